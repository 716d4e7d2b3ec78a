"""``nn.Transformer`` against torch's: the same state_dict keys (a torch state dict loads), the same
output and gradients (inputs and every parameter) with causal and key-padding masks in both layouts,
and the same parameters after AdamW steps of a tiny seq2seq model trained through ``compile_step``."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import luminal as lm
from luminal import nn, train

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")  # torch's nested-tensor and mask-type notes

E, H, FF = 8, 2, 16


def randn(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def pair(seed=0, **kw):
    """The same Transformer in torch and luminal (torch's weights, biases and norms perturbed so that
    their gradients are tested too, loaded into luminal's by name)."""
    torch.manual_seed(seed)
    tm = torch.nn.Transformer(E, H, 2, 2, FF, dropout=0.0, **kw)
    with torch.no_grad():
        for i, p in enumerate(tm.parameters()):
            if p.ndim == 1:
                p.add_(torch.from_numpy(randn(*p.shape, seed=100 + i)) * 0.1)
    m = nn.Transformer(E, H, 2, 2, FF, dropout=0.0, **kw)
    m.load_state_dict({k: v.detach().numpy() for k, v in tm.state_dict().items()})
    return m, tm


@pytest.mark.parametrize("kw", [{}, {"bias": False, "norm_first": True}, {"activation": "gelu", "batch_first": True}],
                         ids=["default", "nobias-prenorm", "gelu-batchfirst"])
def test_state_dict_keys_and_repr_are_torchs(kw):
    m, tm = pair(**kw)
    assert list(m.state_dict()) == list(tm.state_dict())
    assert [n for n, _ in m.named_parameters()] == [n for n, _ in tm.named_parameters()]
    assert repr(m) == repr(tm)


TGT_MASKS = ["numpy", "is_causal", "bool_tensor"]


@pytest.mark.parametrize("batch_first", [False, True], ids=["seq_first", "batch_first"])
@pytest.mark.parametrize("norm_first", [False, True], ids=["postnorm", "prenorm"])
@pytest.mark.parametrize("tgt_mask", TGT_MASKS)
def test_forward_and_gradients_match_torch(batch_first, norm_first, tgt_mask):
    """A causal tgt mask (``generate_square_subsequent_mask``'s array, ``tgt_is_causal=True``, or a bool
    GraphTensor), padding in src (so in memory) and in tgt: the output and the gradient of a weighted
    sum w.r.t. src, tgt and every parameter are torch's."""
    n, s, t = 2, 5, 4
    m, tm = pair(batch_first=batch_first, norm_first=norm_first)
    lay = (lambda L: (n, L, E)) if batch_first else (lambda L: (L, n, E))
    src, tgt, w = randn(*lay(s), seed=1), randn(*lay(t), seed=2), randn(*lay(t), seed=3)
    src_pad = np.zeros((n, s), bool)
    src_pad[1, 3:] = True  # the second source is 3 long
    tgt_pad = np.zeros((n, t), bool)
    tgt_pad[0, 3:] = True

    g = lm.Graph()
    xs, xt = g.input("src", src.shape), g.input("tgt", tgt.shape)
    sp, tp = g.input("sp", src_pad.shape, dtype=lm.bool_), g.input("tp", tgt_pad.shape, dtype=lm.bool_)
    kw = {"numpy": {"tgt_mask": nn.Transformer.generate_square_subsequent_mask(t)},
          "is_causal": {"tgt_is_causal": True},
          "bool_tensor": {"tgt_mask": g.constant(np.triu(np.ones((t, t), bool), 1))}}[tgt_mask]
    out = m(xs, xt, src_key_padding_mask=sp, tgt_key_padding_mask=tp, memory_key_padding_mask=sp, **kw)
    wrt = [xs, xt, *m.parameters()]
    got = lm.compile([out, *train.grad((out * g.constant(w)).sum(), wrt)], backend="reference")(
        src=src, tgt=tgt, sp=src_pad, tp=tgt_pad)

    ts, tt = torch.tensor(src, requires_grad=True), torch.tensor(tgt, requires_grad=True)
    tout = tm(ts, tt, tgt_mask=torch.nn.Transformer.generate_square_subsequent_mask(t),
              src_key_padding_mask=torch.tensor(src_pad), tgt_key_padding_mask=torch.tensor(tgt_pad),
              memory_key_padding_mask=torch.tensor(src_pad))
    (tout * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(got[0], tout.detach().numpy(), rtol=1e-5, atol=1e-5, err_msg="forward")
    names = ["src", "tgt"] + [k for k, _ in tm.named_parameters()]
    want = [ts.grad, tt.grad] + [p.grad for _, p in tm.named_parameters()]
    for name, a, b in zip(names, got[1:], want, strict=True):
        np.testing.assert_allclose(a, b.numpy(), rtol=1e-4, atol=1e-5, err_msg=f"d loss / d {name}")


def test_unbatched_and_masks_on_every_attention():
    """(S, E) and (T, E) inputs, with a float src_mask and a bool memory_mask, as torch's."""
    m, tm = pair(seed=4)
    src, tgt = randn(5, E, seed=5), randn(3, E, seed=6)
    src_mask = randn(5, 5, seed=7)
    mem_mask = np.zeros((3, 5), bool)
    mem_mask[:, 4] = True
    g = lm.Graph()
    out = m(g.input("src", (5, E)), g.input("tgt", (3, E)), src_mask=src_mask, memory_mask=mem_mask)
    got = lm.compile(out, backend="reference")(src=src, tgt=tgt)
    with torch.no_grad():
        tm.eval()
        want = tm(torch.tensor(src), torch.tensor(tgt), src_mask=torch.tensor(src_mask),
                  memory_mask=torch.tensor(mem_mask))
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-5, atol=1e-5)


def test_generate_square_subsequent_mask_is_torchs():
    for sz in (0, 1, 4):
        mask = nn.Transformer.generate_square_subsequent_mask(sz)
        assert mask.dtype == np.float32
        np.testing.assert_array_equal(mask, torch.nn.Transformer.generate_square_subsequent_mask(sz).numpy())
    assert nn.Transformer.generate_square_subsequent_mask(3, dtype=lm.float64).dtype == np.float64
    with pytest.raises(TypeError, match="float dtype"):
        nn.Transformer.generate_square_subsequent_mask(3, dtype=lm.int32)
    g = lm.Graph()
    x = g.input("x", ("B", "T", E))
    with pytest.raises(TypeError, match="tgt_is_causal=True"):
        nn.Transformer.generate_square_subsequent_mask(x.shape[1])


def test_custom_encoder_and_decoder_are_used_and_reset():
    enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(E, H, FF, 0.0), 1)
    dec = nn.TransformerDecoder(nn.TransformerDecoderLayer(E, H, FF, 0.0), 3)
    m = nn.Transformer(E, H, custom_encoder=enc, custom_decoder=dec)
    assert m.encoder is enc and m.decoder is dec
    assert len(m.decoder.layers) == 3 and m.encoder.norm is None
    assert "decoder.layers.2.linear1.weight" in m.state_dict()


def test_wrong_inputs_are_named():
    m = nn.Transformer(E, H, 1, 1, FF, 0.0)
    g = lm.Graph()
    with pytest.raises(ValueError, match="batch number of src and tgt"):
        m(g.input("a", (5, 2, E)), g.input("b", (4, 3, E)))
    with pytest.raises(ValueError, match=r"d_model \(8\)"):
        m(g.input("c", (5, 2, E)), g.input("d", (4, 2, E + 1)))
    with pytest.raises(ValueError, match="must both be batched"):
        m(g.input("e", (5, 2, E)), g.input("f", (4, E)))


V = 7


class Seq2Seq:
    """A tiny translation model, built the same way from ``nn`` (luminal's or torch's)."""

    def __init__(self, nn_):
        self.src_emb, self.tgt_emb = nn_.Embedding(V, E), nn_.Embedding(V, E)
        self.core = nn_.Transformer(E, H, 1, 1, FF, dropout=0.0, batch_first=True)
        self.head = nn_.Linear(E, V)
        self.parts = {"src_emb": self.src_emb, "tgt_emb": self.tgt_emb, "core": self.core, "head": self.head}

    def logits(self, src, tgt, mask, causal):
        return self.head(self.core(self.src_emb(src), self.tgt_emb(tgt), tgt_mask=mask, tgt_is_causal=causal))

    def params(self):
        return [p for part in self.parts.values() for p in part.parameters()]

    def named(self):
        return {f"{name}.{k}": v for name, part in self.parts.items() for k, v in part.state_dict().items()}


def test_adamw_steps_of_a_seq2seq_match_torch():
    """Embeddings, the Transformer (causal tgt) and a head, cross-entropy on next tokens, trained 4 AdamW
    steps through ``train.compile_step``: every parameter follows torch's."""
    n, s, t = 3, 6, 5
    rng = np.random.default_rng(8)
    src = rng.integers(0, V, (n, s)).astype(np.int32)
    tgt = rng.integers(0, V, (n, t + 1)).astype(np.int32)
    lm.manual_seed(0)
    ours = Seq2Seq(nn)
    theirs = Seq2Seq(torch.nn)
    for name, part in ours.parts.items():
        theirs.parts[name].load_state_dict({k: torch.tensor(v) for k, v in part.state_dict().items()})

    g = lm.Graph()
    xs, xt = g.input("src", (n, s), dtype=lm.int32), g.input("tgt", (n, t), dtype=lm.int32)
    y = g.input("y", (n, t), dtype=lm.int32)
    logits = ours.logits(xs, xt, nn.Transformer.generate_square_subsequent_mask(t), True)
    loss = train.cross_entropy(logits.reshape(n * t, V), y.reshape(n * t))
    opt = train.AdamW(ours.params(), lr=1e-2, weight_decay=0.05)
    step = train.compile_step(loss, opt, backend="reference")
    topt = torch.optim.AdamW(theirs.params(), lr=1e-2, weight_decay=0.05, foreach=False)
    tmask = torch.nn.Transformer.generate_square_subsequent_mask(t)
    for i in range(4):
        got = step(src=src, tgt=tgt[:, :-1], y=tgt[:, 1:])
        topt.zero_grad()
        tl = torch.nn.functional.cross_entropy(
            theirs.logits(torch.tensor(src).long(), torch.tensor(tgt[:, :-1]).long(), tmask, True).reshape(n * t, V),
            torch.tensor(tgt[:, 1:]).long().reshape(n * t))
        tl.backward()
        topt.step()
        np.testing.assert_allclose(got, tl.item(), rtol=1e-5, err_msg=f"loss at step {i + 1}")
        want = theirs.named()
        for k, v in ours.named().items():
            w = want[k].numpy()
            if k.endswith("in_proj_bias"):
                # the key projection's bias adds one number to all of a query's scores, which the softmax
                # takes away: its true gradient is 0, and Adam turns the rounding noise there into
                # steps of up to lr, in torch's run and in ours alike. Only that bound is compared.
                assert np.abs(v[E:2 * E]).max() <= 1e-2 * (i + 1) + 1e-6 and np.abs(w[E:2 * E]).max() <= 1e-2 * (i + 1)
                v, w = np.delete(v, np.s_[E:2 * E]), np.delete(w, np.s_[E:2 * E])
            np.testing.assert_allclose(v, w, rtol=1e-4, atol=1e-5, err_msg=f"{k} after step {i + 1}")
