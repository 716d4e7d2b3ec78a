"""``nn.MultiheadAttention`` and the Transformer layers against torch's, as a port of a torch model uses
them: a torch module's state_dict loads, and the outputs (eval mode), attention weights and gradients
w.r.t. the inputs and every parameter are torch's, over the constructor options (kdim/vdim, bias,
add_bias_kv, add_zero_attn, batch_first, norm_first, activations, layer_norm_eps) and the mask forms
(key padding and attention masks, bool and float, 2-d and per head, numpy arrays)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import luminal as lm
import luminal.nn.functional as LF
from luminal import nn, train
from luminal.core.dtype import as_dtype

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")  # torch's nested-tensor and mask-type notes

E, H, FF, N, L, S = 8, 2, 12, 2, 3, 4


def randn(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def loaded(make_lm, make_torch, seed=0):
    """The same module in luminal and torch (eval mode): torch's, its 1-d parameters and bias_k/bias_v
    perturbed (zero at init, their gradients would test little), loaded into luminal's by name."""
    torch.manual_seed(seed)
    tm = make_torch()
    with torch.no_grad():
        for i, p in enumerate(tm.parameters()):
            if p.ndim == 1 or p.shape[:2] == (1, 1):
                p.add_(torch.from_numpy(randn(*p.shape, seed=100 + i)) * 0.3)
    m = make_lm()
    assert [k for k, _ in m.named_parameters()] == [k for k, _ in tm.named_parameters()]
    m.load_state_dict({k: v.detach().numpy() for k, v in tm.state_dict().items()})
    return m.eval(), tm.eval()


def assert_parity(m, tm, inputs, call, weights=True):
    """``call(module, tensors)`` on both sides: the first output and the second (the attention weights,
    if ``weights``), and the gradient of a weighted sum of the first w.r.t. the float inputs and every
    parameter. ``inputs``: name -> numpy array (bool arrays are masks, not differentiated)."""
    g = lm.Graph()
    xs = {k: g.input(k, a.shape, dtype=as_dtype(a.dtype)) for k, a in inputs.items()}
    ts = {k: torch.tensor(a, requires_grad=a.dtype != bool) for k, a in inputs.items()}
    out, tout = call(m, xs), call(tm, ts)
    out, tout = (out, tout) if isinstance(out, tuple) else ((out,), (tout,))
    diff = [k for k, a in inputs.items() if a.dtype != bool and k not in ("kpm", "am")]
    w = randn(*tout[0].shape, seed=77)
    fetch = [out[0]] + ([out[1]] if weights else [])
    wrt = [xs[k] for k in diff] + list(m.parameters())
    got = lm.compile(fetch + train.grad((out[0] * g.constant(w)).sum(), wrt), backend="reference")(**inputs)
    (tout[0] * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(got[0], tout[0].detach().numpy(), rtol=1e-5, atol=1e-5, err_msg="output")
    if weights:
        np.testing.assert_allclose(got[1], tout[1].detach().numpy(), rtol=1e-5, atol=1e-6, err_msg="weights")
    names = diff + [k for k, _ in tm.named_parameters()]
    want = [ts[k].grad for k in diff] + [p.grad for p in tm.parameters()]
    for name, a, b in zip(names, got[len(fetch):], want, strict=True):
        np.testing.assert_allclose(a, b.numpy(), rtol=1e-4, atol=1e-5, err_msg=f"d loss / d {name}")


KPM = np.zeros((N, S), bool)
KPM[1, 2:] = True  # the second key sequence is 2 long


def mha_inputs(batch_first=False, unbatched=False, kdim=E, vdim=E, kpm=None, am=None):
    lay = (lambda n, d: (n, d)) if unbatched else (lambda n, d: (N, n, d)) if batch_first else (lambda n, d: (n, N, d))
    inputs = {"q": randn(*lay(L, E), seed=1), "k": randn(*lay(S, kdim), seed=2), "v": randn(*lay(S, vdim), seed=3)}
    inputs.update({k: v for k, v in (("kpm", kpm), ("am", am)) if v is not None})
    return inputs


def mha_call(need_weights, average):
    def call(mod, x):
        return mod(x["q"], x["k"], x["v"], key_padding_mask=x.get("kpm"), attn_mask=x.get("am"),
                   need_weights=need_weights, average_attn_weights=average)
    return call


@pytest.mark.parametrize("need_weights,average", [(True, True), (True, False), (False, True)],
                         ids=["avg-weights", "head-weights", "no-weights"])
@pytest.mark.parametrize("case", ["bias_kv", "zero_attn", "both-kvdim-3d-mask", "both-batch_first-unbatched"])
def test_add_bias_kv_and_add_zero_attn_are_torchs(case, need_weights, average):
    """torch appends ``bias_k``/``bias_v`` (learned, (1, 1, E), after the projections) as one more key
    and value, and with ``add_zero_attn`` a zero key and value per head, which no mask masks out; the
    weights have S + 1 or S + 2 columns. They used to be refused (NotImplementedError)."""
    kw, ikw = {
        "bias_kv": ({"add_bias_kv": True}, {"kpm": KPM, "am": randn(L, S, seed=4)}),
        "zero_attn": ({"add_zero_attn": True}, {"kpm": KPM, "am": np.triu(np.ones((L, S), bool), 2)}),
        "both-kvdim-3d-mask": ({"add_bias_kv": True, "add_zero_attn": True, "kdim": 5, "vdim": 6, "bias": False},
                               {"kdim": 5, "vdim": 6, "am": randn(N * H, L, S, seed=5)}),
        "both-batch_first-unbatched": ({"add_bias_kv": True, "add_zero_attn": True, "batch_first": True},
                                       {"unbatched": True, "kpm": KPM[1]}),
    }[case]
    m, tm = loaded(lambda: nn.MultiheadAttention(E, H, **kw), lambda: torch.nn.MultiheadAttention(E, H, **kw))
    assert list(m.state_dict()) == list(tm.state_dict()) and repr(m) == repr(tm)
    assert_parity(m, tm, mha_inputs(**ikw), mha_call(need_weights, average), weights=need_weights)


def test_bias_kv_init_is_xavier_normal():
    m = nn.MultiheadAttention(64, 4, add_bias_kv=True)
    for k in ("bias_k", "bias_v"):
        a = np.asarray(m.state_dict()[k])
        assert a.shape == (1, 1, 64)
        assert 0.08 < a.std() < 0.17  # xavier_normal_ of (1, 1, 64): std sqrt(2 / (64 + 64)) = 0.125


@pytest.mark.parametrize("need_weights", [True, False], ids=["weights", "no-weights"])
def test_numpy_masks_are_taken_as_constants(need_weights):
    """``Transformer.generate_square_subsequent_mask`` returns a numpy array, taken as a constant by the
    Transformer layers; MultiheadAttention itself failed with AttributeError on one ('numpy dtype has no
    is_float'), for attn_mask and key_padding_mask alike."""
    m, tm = loaded(lambda: nn.MultiheadAttention(E, H), lambda: torch.nn.MultiheadAttention(E, H))
    x, causal = randn(S, N, E, seed=1), nn.Transformer.generate_square_subsequent_mask(S)
    g = lm.Graph()
    xi = g.input("x", x.shape)
    out, _ = m(xi, xi, xi, attn_mask=causal, key_padding_mask=KPM, need_weights=need_weights)
    got = lm.compile(out, backend="reference")(x=x)
    tx = torch.tensor(x)
    with torch.no_grad():
        want, _ = tm(tx, tx, tx, attn_mask=torch.tensor(causal), key_padding_mask=torch.tensor(KPM),
                     need_weights=need_weights)
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-5, atol=1e-5)
    with pytest.raises(TypeError, match=r"MultiheadAttention.*attn_mask must be a GraphTensor, got list"):
        m(xi, xi, xi, attn_mask=[[0.0]])


AM3 = randn(N * H, L, S, seed=6) > 0.7
AM3[..., 0] = False


@pytest.mark.parametrize("kw,ikw", [
    ({"kdim": 5, "vdim": 6}, {"kdim": 5, "vdim": 6, "kpm": KPM}),
    ({"bias": False, "batch_first": True}, {"batch_first": True, "am": AM3}),
    ({"dropout": 0.5}, {"unbatched": True, "kpm": KPM[1], "am": randn(L, S, seed=7)}),
    ({}, {"kpm": np.where(KPM, -1e9, 0.5).astype(np.float32), "am": randn(N * H, L, S, seed=8)}),
], ids=["kvdim-kpm", "nobias-batchfirst-3d-bool", "dropout-eval-unbatched", "float-masks"])
@pytest.mark.parametrize("need_weights,average", [(True, True), (True, False), (False, True)],
                         ids=["avg-weights", "head-weights", "no-weights"])
def test_multihead_attention_options_and_masks(kw, ikw, need_weights, average):
    m, tm = loaded(lambda: nn.MultiheadAttention(E, H, **kw), lambda: torch.nn.MultiheadAttention(E, H, **kw))
    assert_parity(m, tm, mha_inputs(**ikw), mha_call(need_weights, average), weights=need_weights)


ACTIVATIONS = {"gelu-str": ("gelu", "gelu"), "F.gelu": (LF.gelu, TF.gelu), "F.silu": (LF.silu, TF.silu),
               "GELU-tanh-module": (nn.GELU("tanh"), torch.nn.GELU("tanh"))}


@pytest.mark.parametrize("act", ACTIVATIONS)
@pytest.mark.parametrize("norm_first", [False, True], ids=["postnorm", "prenorm"])
def test_encoder_stack_with_callable_activation(act, norm_first):
    """TransformerEncoder (2 layers, a final norm, enable_nested_tensor accepted) of layers with a
    callable activation, layer_norm_eps, bias=False, a causal mask with is_causal and key padding."""
    kw = {"dim_feedforward": FF, "dropout": 0.1, "layer_norm_eps": 1e-3, "norm_first": norm_first, "bias": False,
          "batch_first": True}
    la, ta = ACTIVATIONS[act]
    m, tm = loaded(
        lambda: nn.TransformerEncoder(nn.TransformerEncoderLayer(E, H, activation=la, **kw), 2, nn.LayerNorm(E),
                                      enable_nested_tensor=True),
        lambda: torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(E, H, activation=ta, **kw), 2,
                                            torch.nn.LayerNorm(E), enable_nested_tensor=True))
    causal = np.triu(np.ones((S, S), bool), 1)
    inputs = {"src": randn(N, S, E, seed=1), "kpm": KPM, "am": causal}
    assert_parity(m, tm, inputs, lambda mod, x: mod(x["src"], mask=x["am"], src_key_padding_mask=x["kpm"],
                                                    is_causal=True), weights=False)


@pytest.mark.parametrize("norm_first", [False, True], ids=["postnorm", "prenorm"])
def test_decoder_stack_with_every_mask(norm_first):
    """TransformerDecoder (2 layers, F.gelu): a causal float tgt_mask with tgt_is_causal, a float
    memory_mask and both key-padding masks."""
    kw = {"dim_feedforward": FF, "dropout": 0.1, "norm_first": norm_first, "layer_norm_eps": 1e-4}
    m, tm = loaded(lambda: nn.TransformerDecoder(nn.TransformerDecoderLayer(E, H, activation=LF.gelu, **kw), 2),
                   lambda: torch.nn.TransformerDecoder(torch.nn.TransformerDecoderLayer(E, H, activation=TF.gelu,
                                                                                        **kw), 2))
    t = 3
    tpad = np.zeros((N, t), bool)
    tpad[0, 2:] = True
    inputs = {"tgt": randn(t, N, E, seed=1), "mem": randn(S, N, E, seed=2),
              "tm": nn.Transformer.generate_square_subsequent_mask(t), "mm": randn(t, S, seed=3), "tp": tpad, "mp": KPM}

    def call(mod, x):
        return mod(x["tgt"], x["mem"], tgt_mask=x["tm"], memory_mask=x["mm"], tgt_key_padding_mask=x["tp"],
                   memory_key_padding_mask=x["mp"], tgt_is_causal=True)
    g = lm.Graph()
    xs = {k: g.input(k, a.shape, dtype=as_dtype(a.dtype)) for k, a in inputs.items()}
    ts = {k: torch.tensor(a, requires_grad=k in ("tgt", "mem")) for k, a in inputs.items()}
    out, tout = call(m, xs), call(tm, ts)
    w = randn(*tout.shape, seed=77)
    wrt = [xs["tgt"], xs["mem"], *m.parameters()]
    got = lm.compile([out, *train.grad((out * g.constant(w)).sum(), wrt)], backend="reference")(**inputs)
    (tout * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(got[0], tout.detach().numpy(), rtol=1e-5, atol=1e-5)
    want = [ts["tgt"].grad, ts["mem"].grad] + [p.grad for p in tm.parameters()]
    for name, a, b in zip(["tgt", "mem"] + [k for k, _ in tm.named_parameters()], got[1:], want, strict=True):
        np.testing.assert_allclose(a, b.numpy(), rtol=1e-4, atol=1e-5, err_msg=f"d loss / d {name}")
