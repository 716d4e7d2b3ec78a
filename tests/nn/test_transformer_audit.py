"""The Transformer layers around MultiheadAttention (``TransformerEncoderLayer``, ``TransformerDecoderLayer``,
``TransformerEncoder``, ``TransformerDecoder``, ``Transformer``) against torch's, with torch's weights
loaded by name: outputs and gradients w.r.t. the inputs and every parameter in float32 and float64,
over norm_first, the activations, batch_first, train mode (dropout 0 and 1) and eval mode (dropout > 0),
bias, layer_norm_eps and every mask form; the stacks' deep copies and final norms; rows with every key
masked out (their defined value written out). ``tests/nn/test_transformer_layers.py`` has the errors for
bad sizes and masks and the masks of ``generate_square_subsequent_mask``, ``tests/nn/test_attention_audit.py``
MultiheadAttention itself."""

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

E, H, FF, N, T, S = 8, 2, 12, 2, 3, 4
F32, F64 = np.float32, np.float64
LM_DTYPE = {F32: lm.float32, F64: lm.float64}
TORCH_DTYPE = {F32: torch.float32, F64: torch.float64}
TOL = {F32: ((1e-5, 1e-5), (1e-4, 1e-5)), F64: ((1e-10, 1e-10), (1e-9, 1e-10))}  # (output, gradients)


def randn(*shape, seed=0, dtype=F32):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def loaded(make_lm, make_torch, dtype=F32, training=False, seed=0):
    """The same module in luminal and torch, in ``dtype`` and train or eval mode: torch's, its 1-d
    parameters (zero or one at init: their gradients would test little) perturbed, loaded by name."""
    torch.manual_seed(seed)
    tm = make_torch().to(TORCH_DTYPE[dtype])
    with torch.no_grad():
        for i, p in enumerate(tm.parameters()):
            if p.ndim == 1:
                p.add_(torch.from_numpy(randn(*p.shape, seed=100 + i, dtype=dtype)) * 0.3)
    m = make_lm()
    assert list(m.state_dict()) == list(tm.state_dict())
    m.load_state_dict({k: v.detach().numpy() for k, v in tm.state_dict().items()})
    return m.train(training), tm.train(training)


def assert_parity(m, tm, inputs, call, dtype=F32, torch_call=None, want=None):
    """``call(module, tensors)`` on both sides (``torch_call`` on torch's if given): the output and the
    gradients of a weighted sum of it w.r.t. src/tgt/memory and every parameter. ``want(tm, tensors)``,
    if given, is the expected output written as a torch computation instead of torch's module."""
    g = lm.Graph()
    xs = {k: g.input(k, a.shape, dtype=as_dtype(a.dtype)) for k, a in inputs.items()}
    diff = [k for k in inputs if k in ("src", "tgt", "mem")]
    ts = {k: torch.tensor(a, requires_grad=k in diff) for k, a in inputs.items()}
    out = call(m, xs)
    tout = want(tm, ts) if want is not None else (torch_call or call)(tm, ts)
    w = randn(*tout.shape, seed=77, dtype=dtype)
    wrt = [xs[k] for k in diff] + list(m.parameters())
    got = lm.compile([out, *train.grad((out * g.constant(w)).sum(), wrt)], backend="reference")(**inputs)
    (tout * torch.tensor(w)).sum().backward()
    (rtol, atol), (grtol, gatol) = TOL[dtype]
    assert got[0].dtype == dtype
    np.testing.assert_allclose(got[0], tout.detach().numpy(), rtol=rtol, atol=atol, err_msg="output")
    names = diff + [k for k, _ in tm.named_parameters()]
    grads = [ts[k].grad for k in diff] + [p.grad for p in tm.parameters()]
    for name, a, b in zip(names, got[1:], grads, strict=True):
        b = np.zeros_like(a) if b is None else b.numpy()
        np.testing.assert_allclose(a, b, rtol=grtol, atol=gatol, err_msg=f"d loss / d {name}")


KPM = np.zeros((N, S), bool)
KPM[1, 2:] = True  # the second sequence is 2 long
TKPM = np.zeros((N, T), bool)
TKPM[0, 2:] = True
ACTIVATIONS = {"relu": ("relu", "relu"), "gelu": ("gelu", "gelu"), "F.silu": (LF.silu, TF.silu),
               "GELU-module": (nn.GELU("tanh"), torch.nn.GELU("tanh"))}
MODES = {"train-dropout0": (True, 0.0), "eval-dropout0.3": (False, 0.3)}


def layout(batch_first, length, dtype=F32, seed=1):
    return randn(*((N, length, E) if batch_first else (length, N, E)), seed=seed, dtype=dtype)


@pytest.mark.parametrize("mode,dtype", [("train-dropout0", F64), ("eval-dropout0.3", F32)],
                         ids=["train-dropout0-f64", "eval-dropout0.3-f32"])
@pytest.mark.parametrize("batch_first", [False, True], ids=["seq_first", "batch_first"])
@pytest.mark.parametrize("act", ACTIVATIONS)
@pytest.mark.parametrize("norm_first", [False, True], ids=["postnorm", "prenorm"])
def test_encoder_layer_options(norm_first, act, batch_first, mode, dtype):
    """A float src_mask and a bool key-padding mask, layer_norm_eps 1e-3 (the decoder's options below)."""
    training, p = MODES[mode]
    la, ta = ACTIVATIONS[act]
    kw = {"dim_feedforward": FF, "dropout": p, "norm_first": norm_first, "batch_first": batch_first,
          "layer_norm_eps": 1e-3}
    m, tm = loaded(lambda: nn.TransformerEncoderLayer(E, H, activation=la, dtype=LM_DTYPE[dtype], **kw),
                   lambda: torch.nn.TransformerEncoderLayer(E, H, activation=ta, **kw), dtype, training)
    inputs = {"src": layout(batch_first, S, dtype), "am": randn(S, S, seed=3, dtype=dtype), "kpm": KPM}
    assert_parity(m, tm, inputs, lambda mod, x: mod(x["src"], src_mask=x["am"], src_key_padding_mask=x["kpm"]),
                  dtype)


AM3 = randn(N * H, S, S, seed=5) > 0.6
AM3[..., 0] = False
CAUSAL = np.triu(np.ones((S, S), bool), 1)
KPM_FLOAT = np.where(KPM, -1e9, 0.25).astype(F32)
ENCODER_MASKS = {
    "bool-2d": ({"am": CAUSAL}, {}),
    "float-3d": ({"am": randn(N * H, S, S, seed=6)}, {}),
    "bool-3d+kpm": ({"am": AM3, "kpm": KPM}, {}),
    "float-kpm": ({"kpm": KPM_FLOAT}, {}),
    "float-kpm+float-2d": ({"kpm": KPM_FLOAT, "am": randn(S, S, seed=8)}, {}),
    "is_causal+bool-mask": ({"am": CAUSAL}, {"is_causal": True}),
    "is_causal+float-mask+kpm": ({"am": np.triu(np.full((S, S), -np.inf, F32), 1), "kpm": KPM}, {"is_causal": True}),
}


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
@pytest.mark.parametrize("case", ENCODER_MASKS)
def test_encoder_layer_masks(case, bias):
    ins, kw = ENCODER_MASKS[case]
    m, tm = loaded(lambda: nn.TransformerEncoderLayer(E, H, FF, 0.0, bias=bias),
                   lambda: torch.nn.TransformerEncoderLayer(E, H, FF, 0.0, bias=bias), training=True)
    assert_parity(m, tm, {"src": randn(S, N, E, seed=1), **ins},
                  lambda mod, x: mod(x["src"], src_mask=x.get("am"), src_key_padding_mask=x.get("kpm"), **kw))


def test_unbatched_layers_with_per_head_masks():
    """(L, E) inputs: an attention mask (nhead, L, S) per head and a key-padding mask (S,)."""
    m, tm = loaded(lambda: nn.TransformerDecoderLayer(E, H, FF, 0.0, batch_first=True),
                   lambda: torch.nn.TransformerDecoderLayer(E, H, FF, 0.0, batch_first=True), training=True)
    inputs = {"tgt": randn(T, E, seed=1), "mem": randn(S, E, seed=2), "tm": randn(H, T, T, seed=3),
              "mm": AM3[:H, :T], "mkpm": KPM[1], "tkpm": TKPM[0]}
    assert_parity(m, tm, inputs, lambda mod, x: mod(
        x["tgt"], x["mem"], tgt_mask=x["tm"], memory_mask=x["mm"], tgt_key_padding_mask=x["tkpm"],
        memory_key_padding_mask=x["mkpm"]))


MM3 = randn(N * H, T, S, seed=5) > 0.6
MM3[..., 0] = False
DECODER_MASKS = {
    "memory-bool-2d": ({"mm": np.triu(np.ones((T, S), bool), 2)}, {}),
    "memory-float-2d+tgt_is_causal": ({"mm": randn(T, S, seed=6), "tm": np.triu(np.ones((T, T), bool), 1)},
                                      {"tgt_is_causal": True}),
    "memory-bool-3d+both-kpm": ({"mm": MM3, "mkpm": KPM, "tkpm": TKPM}, {}),
    "float-3d-both": ({"mm": randn(N * H, T, S, seed=7), "tm": randn(N * H, T, T, seed=8)}, {}),
    "memory-float-kpm": ({"mkpm": KPM_FLOAT}, {}),
    "memory_is_causal+mask": ({"mm": np.triu(np.ones((T, S), bool), 1)}, {"memory_is_causal": True}),
}


@pytest.mark.parametrize("dtype", [F32, F64], ids=["f32", "f64"])
@pytest.mark.parametrize("norm_first", [False, True], ids=["postnorm", "prenorm"])
@pytest.mark.parametrize("case", DECODER_MASKS)
def test_decoder_layer_masks(case, norm_first, dtype):
    ins, kw = DECODER_MASKS[case]
    ins = {k: v.astype(dtype) if v.dtype.kind == "f" else v for k, v in ins.items()}
    lkw = {"dim_feedforward": FF, "dropout": 0.0, "norm_first": norm_first, "layer_norm_eps": 1e-3}
    m, tm = loaded(lambda: nn.TransformerDecoderLayer(E, H, dtype=LM_DTYPE[dtype], **lkw),
                   lambda: torch.nn.TransformerDecoderLayer(E, H, **lkw), dtype, training=True)
    inputs = {"tgt": randn(T, N, E, seed=1, dtype=dtype), "mem": randn(S, N, E, seed=2, dtype=dtype), **ins}
    assert_parity(m, tm, inputs, lambda mod, x: mod(
        x["tgt"], x["mem"], tgt_mask=x.get("tm"), memory_mask=x.get("mm"), tgt_key_padding_mask=x.get("tkpm"),
        memory_key_padding_mask=x.get("mkpm"), **kw), dtype)


@pytest.mark.parametrize("batch_first", [False, True], ids=["seq_first", "batch_first"])
@pytest.mark.parametrize("act", ["gelu", "F.silu"])
@pytest.mark.parametrize("mode", MODES)
def test_decoder_layer_options(mode, act, batch_first):
    training, p = MODES[mode]
    la, ta = ACTIVATIONS[act]
    kw = {"dim_feedforward": FF, "dropout": p, "batch_first": batch_first, "bias": False}
    m, tm = loaded(lambda: nn.TransformerDecoderLayer(E, H, activation=la, **kw),
                   lambda: torch.nn.TransformerDecoderLayer(E, H, activation=ta, **kw), training=training)
    inputs = {"tgt": layout(batch_first, T), "mem": layout(batch_first, S, seed=2), "mkpm": KPM}
    assert_parity(m, tm, inputs, lambda mod, x: mod(x["tgt"], x["mem"], memory_key_padding_mask=x["mkpm"]))


@pytest.mark.parametrize("norm_first", [False, True], ids=["postnorm", "prenorm"])
@pytest.mark.parametrize("decoder", [False, True], ids=["encoder", "decoder"])
def test_dropout_one_in_train_mode_drops_every_branch(decoder, norm_first):
    """With p=1 in train mode every dropout (the attention weights', the feed-forward's and the three
    residual branches') gives zeros, so the output is deterministic (the norms of the input alone, with
    the attention's out_proj bias): a dropout left out would show."""
    kw = {"dim_feedforward": FF, "dropout": 1.0, "norm_first": norm_first}
    if decoder:
        m, tm = loaded(lambda: nn.TransformerDecoderLayer(E, H, **kw),
                       lambda: torch.nn.TransformerDecoderLayer(E, H, **kw), training=True)
        assert_parity(m, tm, {"tgt": randn(T, N, E, seed=1), "mem": randn(S, N, E, seed=2)},
                      lambda mod, x: mod(x["tgt"], x["mem"]))
    else:
        m, tm = loaded(lambda: nn.TransformerEncoderLayer(E, H, **kw),
                       lambda: torch.nn.TransformerEncoderLayer(E, H, **kw), training=True)
        assert_parity(m, tm, {"src": randn(S, N, E, seed=1)}, lambda mod, x: mod(x["src"]))


def test_is_causal_without_a_mask_is_the_causal_mask():
    """torch refuses ``is_causal=True`` with no mask ('Need attn_mask if specifying the is_causal hint');
    here it applies the causal mask (key j <= query i), as ``Transformer.forward``'s docs say: the same
    as torch given ``generate_square_subsequent_mask``."""
    causal = torch.nn.Transformer.generate_square_subsequent_mask
    m, tm = loaded(lambda: nn.TransformerEncoder(nn.TransformerEncoderLayer(E, H, FF, 0.0), 2),
                   lambda: torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(E, H, FF, 0.0), 2),
                   training=True)
    assert_parity(m, tm, {"src": randn(S, N, E, seed=1), "kpm": KPM},
                  lambda mod, x: mod(x["src"], src_key_padding_mask=x["kpm"], is_causal=True),
                  torch_call=lambda mod, x: mod(x["src"], mask=causal(S), src_key_padding_mask=x["kpm"]))
    m, tm = loaded(lambda: nn.TransformerDecoder(nn.TransformerDecoderLayer(E, H, FF, 0.0), 2),
                   lambda: torch.nn.TransformerDecoder(torch.nn.TransformerDecoderLayer(E, H, FF, 0.0), 2),
                   training=True)
    assert_parity(m, tm, {"tgt": randn(T, N, E, seed=1), "mem": randn(S, N, E, seed=2), "tkpm": TKPM},
                  lambda mod, x: mod(x["tgt"], x["mem"], tgt_key_padding_mask=x["tkpm"], tgt_is_causal=True),
                  torch_call=lambda mod, x: mod(x["tgt"], x["mem"], tgt_mask=causal(T),
                                                tgt_key_padding_mask=x["tkpm"]))


def masked_rows_reference(layer, x, attn_mask, key_padding_mask, dead):
    """torch's encoder layer written out, with the self-attention of the ``dead`` (L, N) positions (every
    key masked out) defined as attending to nothing: a zero context, so out_proj's bias. The other
    positions come from torch's attention with those rows' masks lifted."""
    am = attn_mask.clone()
    am[dead.any(1)] = False
    kpm = key_padding_mask.clone()
    kpm[dead.all(0)] = False
    d = torch.tensor(dead)[..., None]

    def sa(h):
        out = layer.self_attn(h, h, h, attn_mask=am, key_padding_mask=kpm, need_weights=False)[0]
        return torch.where(d, layer.self_attn.out_proj.bias, out)

    def ff(h):
        return layer.linear2(layer.activation(layer.linear1(h)))

    if layer.norm_first:
        x = x + sa(layer.norm1(x))
        return x + ff(layer.norm2(x))
    x = layer.norm1(x + sa(x))
    return layer.norm2(x + ff(x))


@pytest.mark.parametrize("norm_first", [False, True], ids=["postnorm", "prenorm"])
def test_rows_with_every_key_masked_out(norm_first):
    """A sequence all padding and a query row whose src_mask masks every key: the softmax over no key
    is defined as no attention (weights 0, so the attention gives out_proj's bias there, and no gradient
    flows through those scores), as torch's sdpa (``_safe_softmax``) does; never NaN."""
    m, tm = loaded(lambda: nn.TransformerEncoderLayer(E, H, FF, 0.0, norm_first=norm_first),
                   lambda: torch.nn.TransformerEncoderLayer(E, H, FF, 0.0, norm_first=norm_first), training=True)
    kpm = np.zeros((N, S), bool)
    kpm[1] = True  # the second sequence: all padding
    am = np.zeros((S, S), bool)
    am[2] = True  # query 2 sees no key
    dead = np.zeros((S, N), bool)
    dead[:, 1] = dead[2] = True
    assert_parity(m, tm, {"src": randn(S, N, E, seed=1), "am": am, "kpm": kpm},
                  lambda mod, x: mod(x["src"], src_mask=x["am"], src_key_padding_mask=x["kpm"]),
                  want=lambda mod, x: masked_rows_reference(mod, x["src"], x["am"], x["kpm"], dead))


@pytest.mark.parametrize("norm", [False, True], ids=["no-norm", "final-norm"])
@pytest.mark.parametrize("decoder", [False, True], ids=["encoder", "decoder"])
def test_stacks_are_independent_deep_copies(decoder, norm):
    """num_layers deep copies of the layer (each its own parameters, torch's state_dict names, a torch
    state_dict with a different value per layer loads), and the final norm, in float64."""
    lk, tk = ({"dtype": lm.float64}, {"dtype": torch.float64})

    def distinct(tm):  # torch's copies start equal: their matrices re-drawn, so that each layer differs
        for p in tm.parameters():
            if p.ndim > 1:
                torch.nn.init.xavier_uniform_(p)
        return tm

    if decoder:
        m, tm = loaded(
            lambda: nn.TransformerDecoder(nn.TransformerDecoderLayer(E, H, FF, 0.0, **lk), 3,
                                          nn.LayerNorm(E, eps=1e-3, **lk) if norm else None),
            lambda: distinct(torch.nn.TransformerDecoder(torch.nn.TransformerDecoderLayer(E, H, FF, 0.0, **tk), 3,
                                                         torch.nn.LayerNorm(E, eps=1e-3, **tk) if norm else None)),
            F64, training=True)
        inputs = {"tgt": randn(T, N, E, seed=1, dtype=F64), "mem": randn(S, N, E, seed=2, dtype=F64), "mkpm": KPM}
        assert_parity(m, tm, inputs, lambda mod, x: mod(x["tgt"], x["mem"], memory_key_padding_mask=x["mkpm"]), F64)
    else:
        m, tm = loaded(
            lambda: nn.TransformerEncoder(nn.TransformerEncoderLayer(E, H, FF, 0.0, **lk), 3,
                                          nn.LayerNorm(E, eps=1e-3, **lk) if norm else None),
            lambda: distinct(torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(E, H, FF, 0.0, **tk), 3,
                                                         torch.nn.LayerNorm(E, eps=1e-3, **tk) if norm else None,
                                                         enable_nested_tensor=False)),
            F64, training=True)
        assert_parity(m, tm, {"src": randn(S, N, E, seed=1, dtype=F64), "kpm": KPM},
                      lambda mod, x: mod(x["src"], src_key_padding_mask=x["kpm"]), F64)
    params = list(m.parameters())
    assert len({id(p) for p in params}) == len(params) == len(list(tm.parameters()))
    assert m.num_layers == 3 and (m.norm is not None) == norm
    sd = m.state_dict()
    assert not np.array_equal(np.asarray(sd["layers.0.linear1.weight"]), np.asarray(sd["layers.2.linear1.weight"]))


def test_copies_are_independent_of_the_layer_and_each_other():
    """The layer given is copied, not shared (torch's ``_get_clones``), even after it was called: a
    change to one copy (or to the original) leaves the others as they are."""
    layer = nn.TransformerEncoderLayer(E, H, FF, 0.0)
    g = lm.Graph()
    layer(g.input("x", (S, N, E)))
    enc = nn.TransformerEncoder(layer, 2)
    before = {k: np.array(v) for k, v in enc.state_dict().items()}
    for k in before:
        if k.startswith("layers.0."):
            np.testing.assert_array_equal(before[k], before["layers.1." + k[9:]])
    nn.init.zeros_(enc.layers[0].linear1.weight)
    nn.init.ones_(layer.linear2.weight)
    after = enc.state_dict()
    assert not np.asarray(after["layers.0.linear1.weight"]).any()
    np.testing.assert_array_equal(np.asarray(after["layers.1.linear1.weight"]), before["layers.1.linear1.weight"])
    np.testing.assert_array_equal(np.asarray(after["layers.0.linear2.weight"]), before["layers.0.linear2.weight"])
    g = lm.Graph()
    x = g.input("x", (S, N, E))
    y = enc(x)
    got = lm.compile([y, *train.grad(y.sum(), list(enc.parameters()))], backend="reference")(x=randn(S, N, E))
    assert len(got) == 1 + len(list(enc.parameters())) and all(np.isfinite(a).all() for a in got)


@pytest.mark.parametrize("kw", [{"enable_nested_tensor": True, "mask_check": True},
                                {"enable_nested_tensor": False, "mask_check": False}], ids=["nested", "not-nested"])
def test_nested_tensor_arguments_are_accepted(kw):
    """torch's inference fast path (nested tensors) changes the speed, not the result at the positions
    that are not padding; there is none here: the arguments are kept, ``use_nested_tensor`` is False, and
    the output is torch's (batch_first eval mode, where torch's fast path may run)."""
    lkw = {"dim_feedforward": FF, "dropout": 0.1, "batch_first": True}
    m, tm = loaded(lambda: nn.TransformerEncoder(nn.TransformerEncoderLayer(E, H, **lkw), 2, **kw),
                   lambda: torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(E, H, **lkw), 2, **kw))
    assert (m.enable_nested_tensor, m.mask_check, m.use_nested_tensor) == (kw["enable_nested_tensor"],
                                                                          kw["mask_check"], False)
    src = randn(N, S, E, seed=1)
    g = lm.Graph()
    got = lm.compile(m(g.input("src", src.shape), src_key_padding_mask=KPM), backend="reference")(src=src)
    with torch.no_grad():
        want = tm(torch.tensor(src), src_key_padding_mask=torch.tensor(KPM)).numpy()
    keep = ~KPM  # torch's nested path gives 0 at padding positions (its to_padded_tensor): not compared
    np.testing.assert_allclose(got[keep], want[keep], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("is_causal", [None, True, False], ids=["detected", "hint", "not-causal"])
def test_encoder_is_causal_with_the_causal_mask(is_causal):
    """torch's encoder detects a causal ``mask`` when ``is_causal`` is None and passes the hint down;
    with the causal mask given every setting gives the same."""
    m, tm = loaded(lambda: nn.TransformerEncoder(nn.TransformerEncoderLayer(E, H, FF, 0.0), 2, nn.LayerNorm(E)),
                   lambda: torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(E, H, FF, 0.0), 2,
                                                       torch.nn.LayerNorm(E)), training=True)
    causal = nn.Transformer.generate_square_subsequent_mask(S)
    assert_parity(m, tm, {"src": randn(S, N, E, seed=1), "am": causal},
                  lambda mod, x: mod(x["src"], mask=x["am"], is_causal=is_causal))


def test_transformer_float64_with_custom_parts():
    """custom_encoder/custom_decoder are used as given (a 1-layer encoder without norm, a 3-layer decoder
    with one), their matrices re-drawn xavier_uniform_ at construction as torch's (biases kept), and the
    model matches torch's in float64 with every mask."""
    def parts(nn_, **dkw):
        enc = nn_.TransformerEncoder(nn_.TransformerEncoderLayer(E, H, FF, 0.0, **dkw), 1)
        dec = nn_.TransformerDecoder(nn_.TransformerDecoderLayer(E, H, FF, 0.0, norm_first=True, **dkw), 3,
                                     nn_.LayerNorm(E, **dkw))
        return enc, dec

    enc, dec = parts(nn, dtype=lm.float64)
    before = {k: np.array(v) for k, v in enc.state_dict().items()}
    m = nn.Transformer(E, H, custom_encoder=enc, custom_decoder=dec, dtype=lm.float64)
    assert m.encoder is enc and m.decoder is dec
    for k, v in enc.state_dict().items():
        assert np.array_equal(np.asarray(v), before[k]) == (before[k].ndim == 1), k

    def make_torch():
        tenc, tdec = parts(torch.nn, dtype=torch.float64)
        return torch.nn.Transformer(E, H, custom_encoder=tenc, custom_decoder=tdec, dtype=torch.float64)
    m, tm = loaded(lambda: nn.Transformer(E, H, custom_encoder=enc, custom_decoder=dec), make_torch, F64, True)
    inputs = {"src": randn(S, N, E, seed=1, dtype=F64), "tgt": randn(T, N, E, seed=2, dtype=F64),
              "sm": randn(S, S, seed=3, dtype=F64), "mm": MM3, "skpm": KPM, "tkpm": TKPM}
    assert_parity(m, tm, inputs, lambda mod, x: mod(
        x["src"], x["tgt"], src_mask=x["sm"], memory_mask=x["mm"], src_key_padding_mask=x["skpm"],
        tgt_key_padding_mask=x["tkpm"], memory_key_padding_mask=x["skpm"], tgt_is_causal=True),
        F64, torch_call=lambda mod, x: mod(
        x["src"], x["tgt"], src_mask=x["sm"], memory_mask=x["mm"], src_key_padding_mask=x["skpm"],
        tgt_key_padding_mask=x["tkpm"], memory_key_padding_mask=x["skpm"],
        tgt_mask=torch.nn.Transformer.generate_square_subsequent_mask(T, dtype=torch.float64)))
