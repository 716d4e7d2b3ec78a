"""Layers vs torch: load the torch module's state_dict by name, run both on the same input, compare."""

import numpy as np
import pytest
import torch

import luminal as lm
from luminal.nn import layers as L

pytestmark = pytest.mark.filterwarnings("ignore:Using padding='same':UserWarning")
TF = torch.nn.functional


def copy_state(ours, theirs):
    """torch state_dict -> ours, by name (num_batches_tracked as int32)."""
    sd = {k: v.detach().numpy() for k, v in theirs.state_dict().items()}
    ours.load_state_dict({k: v.astype(np.int32) if v.dtype == np.int64 else v for k, v in sd.items()})


def run(module, *arrays, backend="reference", shapes=None, **kwargs):
    """Build ``module(*inputs)`` in a fresh graph and run it on ``arrays``."""
    g = lm.Graph()
    shapes = shapes or [a.shape for a in arrays]
    xs = [g.input(f"x{i}", s, dtype=lm.core.dtype.as_dtype(a.dtype)) for i, (a, s) in
          enumerate(zip(arrays, shapes))]
    out = module(*xs, **kwargs)
    return lm.compile(out, backend=backend)(**{f"x{i}": a for i, a in enumerate(arrays)})


def randn(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def check(ours, theirs, *arrays, backend, rtol=1e-5, atol=1e-5, shapes=None, load=True):
    if load:
        copy_state(ours, theirs)
    ours.train(theirs.training)
    got = run(ours, *arrays, backend=backend, shapes=shapes)
    want = theirs(*[torch.from_numpy(a) for a in arrays]).detach().numpy()
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)
    return got


def same_state_layout(ours, theirs):
    sd = theirs.state_dict()
    assert list(ours.state_dict()) == list(sd)
    for k, v in ours.state_dict().items():
        assert v.shape == tuple(sd[k].shape), k


# linear family ---------------------------------------------------------------------------------
@pytest.mark.parametrize("bias", [True, False])
def test_linear(backend, bias):
    check(L.Linear(5, 3, bias=bias), torch.nn.Linear(5, 3, bias=bias), randn(2, 4, 5), backend=backend)


def test_linear_symbolic_batch_and_1d(backend):
    m, tm = L.Linear(5, 3), torch.nn.Linear(5, 3)
    check(m, tm, randn(7, 5), backend=backend, shapes=[("B", 5)])
    check(m, tm, randn(5), backend=backend)


def test_embedding(backend):
    tm = torch.nn.Embedding(10, 4, padding_idx=-2)
    m = L.Embedding(10, 4, padding_idx=-2)
    assert m.padding_idx == tm.padding_idx == 8
    assert not m.weight.data[8].any()
    idx = np.array([[1, 8, 3], [9, 0, 0]], np.int32)
    copy_state(m, tm)
    got = run(m, idx, backend=backend)
    np.testing.assert_array_equal(got, tm(torch.from_numpy(idx).long()).detach().numpy())


def test_flatten_identity_unflatten(backend):
    x = randn(2, 3, 4, 5)
    check(L.Flatten(), torch.nn.Flatten(), x, backend=backend)
    check(L.Flatten(0, 2), torch.nn.Flatten(0, 2), x, backend=backend)
    check(L.Identity(3, foo=1), torch.nn.Identity(3, foo=1), x, backend=backend)
    check(L.Unflatten(1, (3, 1)), torch.nn.Unflatten(1, (3, 1)), x, backend=backend)


# activations -----------------------------------------------------------------------------------
@pytest.mark.parametrize("make", [
    lambda nn: nn.ReLU(), lambda nn: nn.GELU(), lambda nn: nn.GELU(approximate="tanh"), lambda nn: nn.SiLU(),
    lambda nn: nn.Tanh(), lambda nn: nn.Sigmoid(), lambda nn: nn.Softmax(dim=-1), lambda nn: nn.Softmax(dim=1),
    lambda nn: nn.LeakyReLU(0.2), lambda nn: nn.LeakyReLU(), lambda nn: nn.ELU(0.5), lambda nn: nn.Mish(),
    lambda nn: nn.Softplus(2.0, 3.0), lambda nn: nn.LogSoftmax(dim=0),
], ids=["relu", "gelu", "gelu_tanh", "silu", "tanh", "sigmoid", "softmax", "softmax1", "leaky", "leaky_default",
        "elu", "mish", "softplus", "log_softmax"])
def test_activations(backend, make):
    check(make(L), make(torch.nn), randn(3, 4, 5) * 3, backend=backend)


def test_softmax_implicit_dim(backend):
    with pytest.warns(UserWarning):  # torch warns about the implicit dim; we follow its choice silently
        check(L.Softmax(), torch.nn.Softmax(), randn(2, 3, 4), backend=backend)


# normalisation ---------------------------------------------------------------------------------
@pytest.mark.parametrize("kw", [{}, {"elementwise_affine": False}, {"bias": False}, {"eps": 1e-2}])
def test_layernorm(backend, kw):
    tm = torch.nn.LayerNorm((4, 5), **kw)
    with torch.no_grad():
        for p in tm.parameters():
            p.uniform_(-1, 1)
    check(L.LayerNorm((4, 5), **kw), tm, randn(3, 4, 5) * 2 + 1, backend=backend)
    check(L.LayerNorm(5, **kw), torch.nn.LayerNorm(5, **kw), randn(2, 5), backend=backend)


@pytest.mark.parametrize("eps", [None, 1e-3])
def test_rmsnorm(backend, eps):
    tm = torch.nn.RMSNorm([3, 4], eps=eps)
    with torch.no_grad():
        tm.weight.uniform_(-1, 1)
    check(L.RMSNorm([3, 4], eps=eps), tm, randn(2, 3, 4) * 1e-3, backend=backend)


@pytest.mark.parametrize("cls,shape", [("BatchNorm1d", (4, 3)), ("BatchNorm1d", (4, 3, 5)),
                                       ("BatchNorm2d", (2, 3, 4, 5))])
def test_batchnorm_eval(backend, cls, shape):
    tm = getattr(torch.nn, cls)(3).eval()
    with torch.no_grad():
        tm.running_mean.uniform_(-1, 1)
        tm.running_var.uniform_(0.5, 2)
        tm.weight.uniform_(-1, 1)
        tm.bias.uniform_(-1, 1)
    check(getattr(L, cls)(3), tm, randn(*shape), backend=backend)


# convolutions ----------------------------------------------------------------------------------
CONV2D = [
    dict(), dict(stride=2), dict(padding=1), dict(padding=(2, 0)), dict(dilation=2), dict(groups=2),
    dict(stride=(2, 1), padding=(1, 2), dilation=(1, 2)), dict(stride=3, padding=2, dilation=2, groups=2),
    dict(padding="same"), dict(padding="same", dilation=(2, 1)), dict(padding="valid"), dict(bias=False),
    dict(groups=4, out=8), dict(kernel=(2, 3)), dict(kernel=1),
]


@pytest.mark.parametrize("kw", CONV2D, ids=[str(k) for k in CONV2D])
def test_conv2d(backend, kw):
    kw = dict(kw)
    out, kernel = kw.pop("out", 6), kw.pop("kernel", 3)
    check(L.Conv2d(4, out, kernel, **kw), torch.nn.Conv2d(4, out, kernel, **kw), randn(2, 4, 7, 8),
          backend=backend)


CONV1D = [dict(), dict(stride=2, padding=1), dict(dilation=3, padding="same"), dict(groups=3, kernel=4),
          dict(padding="same", kernel=4)]


@pytest.mark.parametrize("kw", CONV1D, ids=[str(k) for k in CONV1D])
def test_conv1d(backend, kw):
    kw = dict(kw)
    kernel = kw.pop("kernel", 3)
    check(L.Conv1d(3, 6, kernel, **kw), torch.nn.Conv1d(3, 6, kernel, **kw), randn(2, 3, 11), backend=backend)


def test_conv_unbatched_and_symbolic_batch(backend):
    m, tm = L.Conv2d(3, 4, 3, padding=1), torch.nn.Conv2d(3, 4, 3, padding=1)
    check(m, tm, randn(3, 5, 6), backend=backend)
    check(m, tm, randn(2, 3, 5, 6), backend=backend, shapes=[("B", 3, 5, 6)])
    m, tm = L.Conv2d(3, 4, 3, stride=2, dilation=2), torch.nn.Conv2d(3, 4, 3, stride=2, dilation=2)
    check(m, tm, randn(2, 3, 9, 8), backend=backend, shapes=[("B", 3, "H", "W")])


def test_conv3d(backend):
    kw = dict(stride=(1, 2, 1), padding=(1, 0, 1), groups=2)
    check(L.Conv3d(4, 2, (2, 3, 2), **kw), torch.nn.Conv3d(4, 2, (2, 3, 2), **kw), randn(2, 4, 4, 5, 3),
          backend=backend)


def test_conv_graph_is_small():
    g = lm.Graph()
    L.Conv2d(4, 6, 3, stride=2, padding=1, dilation=2, groups=2)(g.input("x", ("B", 4, 9, 8)))
    assert len(g.nodes) <= 8  # x, w, b, pad copy, im2col copy, mul, sum, bias add


# pooling ---------------------------------------------------------------------------------------
MAXPOOL = [dict(kernel_size=2), dict(kernel_size=3, stride=2), dict(kernel_size=3, stride=2, padding=1),
           dict(kernel_size=(2, 3), stride=(1, 2), dilation=(2, 1)), dict(kernel_size=3, stride=2, ceil_mode=True),
           dict(kernel_size=2, stride=2, padding=1, ceil_mode=True), dict(kernel_size=3, padding=1, dilation=2)]


@pytest.mark.parametrize("kw", MAXPOOL, ids=[str(k) for k in MAXPOOL])
def test_maxpool2d(backend, kw):
    x = randn(2, 3, 7, 8)
    check(L.MaxPool2d(**kw), torch.nn.MaxPool2d(**kw), x, backend=backend)
    check(L.MaxPool2d(**kw), torch.nn.MaxPool2d(**kw), x[0], backend=backend)


AVGPOOL = [dict(kernel_size=2), dict(kernel_size=3, stride=2), dict(kernel_size=3, stride=2, padding=1),
           dict(kernel_size=3, stride=2, padding=1, count_include_pad=False),
           dict(kernel_size=3, stride=2, ceil_mode=True), dict(kernel_size=2, stride=2, padding=1, ceil_mode=True),
           dict(kernel_size=(3, 2), stride=2, padding=1, ceil_mode=True, count_include_pad=False),
           dict(kernel_size=(3, 2), stride=2, padding=1, ceil_mode=True, count_include_pad=True),
           dict(kernel_size=3, padding=1, divisor_override=5)]


@pytest.mark.parametrize("kw", AVGPOOL, ids=[str(k) for k in AVGPOOL])
def test_avgpool2d(backend, kw):
    check(L.AvgPool2d(**kw), torch.nn.AvgPool2d(**kw), randn(2, 3, 7, 8), backend=backend)


def test_pool1d_and_symbolic(backend):
    check(L.MaxPool1d(3, 2, 1), torch.nn.MaxPool1d(3, 2, 1), randn(2, 3, 10), backend=backend)
    check(L.AvgPool1d(3, 2, 1, count_include_pad=False), torch.nn.AvgPool1d(3, 2, 1, count_include_pad=False),
          randn(2, 3, 10), backend=backend)
    check(L.AvgPool2d(3, 2, 1, count_include_pad=False), torch.nn.AvgPool2d(3, 2, 1, count_include_pad=False),
          randn(2, 3, 7, 8), backend=backend, shapes=[("B", 3, "H", "W")])
    check(L.MaxPool2d(2), torch.nn.MaxPool2d(2), randn(2, 3, 7, 8), backend=backend, shapes=[("B", 3, 7, 8)])


@pytest.mark.parametrize("size", [1, (3, 2), (None, 3), 5])
def test_adaptive_avgpool(backend, size):
    check(L.AdaptiveAvgPool2d(size), torch.nn.AdaptiveAvgPool2d(size), randn(2, 3, 7, 6), backend=backend)
    if not isinstance(size, tuple):
        check(L.AdaptiveAvgPool1d(size), torch.nn.AdaptiveAvgPool1d(size), randn(2, 3, 7), backend=backend)


# containers ------------------------------------------------------------------------------------
def test_sequential_and_modulelist(backend):
    def build(nn):
        return nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Flatten(), nn.Linear(4 * 3 * 3, 5), nn.Dropout(0.3))

    tm = build(torch.nn).eval()
    m = build(L)
    same_state_layout(m, tm)
    check(m, tm, randn(2, 3, 6, 7), backend=backend)
    assert isinstance(m[1], L.BatchNorm2d) and len(m[2:]) == 5 and len(m) == 7
    ml = L.ModuleList([L.Linear(2, 2), L.Linear(2, 3)])
    ml.append(L.Linear(3, 1))
    tml = torch.nn.ModuleList([torch.nn.Linear(2, 2), torch.nn.Linear(2, 3), torch.nn.Linear(3, 1)])
    same_state_layout(ml, tml)
    ml.insert(0, L.Identity())
    assert [type(x).__name__ for x in ml] == ["Identity", "Linear", "Linear", "Linear"]
    assert list(ml.state_dict())[0] == "1.weight"


# attention -------------------------------------------------------------------------------------
def _sdpa_inputs():
    return randn(2, 3, 4, 8, seed=1), randn(2, 3, 6, 8, seed=2), randn(2, 3, 6, 5, seed=3)


@pytest.mark.parametrize("kind", ["plain", "causal", "bool_mask", "float_mask", "scale"])
def test_sdpa(backend, kind):
    q, k, v = _sdpa_inputs()
    bool_mask = np.random.default_rng(4).random((4, 6)) < 0.7
    bool_mask[:, 0] = True
    float_mask = randn(3, 4, 6, seed=5)
    kw, tkw, extra = {}, {}, []
    if kind == "causal":
        kw = tkw = {"is_causal": True}
    elif kind == "scale":
        kw = tkw = {"scale": 0.3}
    elif kind in ("bool_mask", "float_mask"):
        extra = [bool_mask if kind == "bool_mask" else float_mask]
    arrays = [q, k, v] + extra

    def ours(q, k, v, *m):
        return L.scaled_dot_product_attention(q, k, v, *m, **kw)

    got = run(ours, *arrays, backend=backend)
    want = TF.scaled_dot_product_attention(*[torch.from_numpy(a) for a in arrays], **tkw).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_sdpa_gqa(backend):
    q, k, v = randn(2, 4, 3, 8), randn(2, 2, 5, 8, seed=1), randn(2, 2, 5, 8, seed=2)
    got = run(lambda *t: L.scaled_dot_product_attention(*t, enable_gqa=True), q, k, v, backend=backend)
    want = TF.scaled_dot_product_attention(*map(torch.from_numpy, (q, k, v)), enable_gqa=True).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("mask", ["none", "causal", "causal_bool", "kpm", "float"])
def test_multihead_attention(backend, batch_first, mask):
    e, h, n, s = 8, 2, 3, 5
    tm = torch.nn.MultiheadAttention(e, h, batch_first=batch_first)
    with torch.no_grad():
        tm.in_proj_bias.uniform_(-1, 1)
        tm.out_proj.bias.uniform_(-1, 1)
    m = L.MultiheadAttention(e, h, batch_first=batch_first)
    same_state_layout(m, tm)
    copy_state(m, tm)
    x = randn(*((n, s, e) if batch_first else (s, n, e)))
    causal = np.triu(np.ones((s, s), bool), 1)  # True = masked out, torch's MHA convention
    kpm = np.zeros((n, s), bool)
    kpm[0, -2:] = True
    tkw, arrays = {}, [x]
    if mask == "causal":  # torch wants the mask with the hint; we build it from the hint alone
        tkw = {"attn_mask": torch.from_numpy(causal), "is_causal": True}
    elif mask == "causal_bool":
        arrays.append(causal)
    elif mask == "kpm":
        arrays.append(kpm)
    elif mask == "float":
        arrays.append(randn(n * h, s, s, seed=7))

    def ours(x, *extra):
        kw = {"need_weights": True}
        if mask == "causal":
            kw["is_causal"] = True
        elif mask == "kpm":
            kw["key_padding_mask"] = extra[0]
        elif extra:
            kw["attn_mask"] = extra[0]
        out, w = m(x, x, x, **kw)
        return [out, w]

    got = run(ours, *arrays, backend=backend)
    tx = torch.from_numpy(x)
    if mask == "kpm":
        tkw = {"key_padding_mask": torch.from_numpy(kpm)}
    elif len(arrays) > 1:
        tkw = {"attn_mask": torch.from_numpy(arrays[1])}
    want_out, want_w = tm(tx, tx, tx, **tkw)
    np.testing.assert_allclose(got[0], want_out.detach().numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got[1], want_w.detach().numpy(), rtol=1e-5, atol=1e-5)


def test_multihead_attention_symbolic_causal(backend):
    tm, m = torch.nn.MultiheadAttention(8, 2), L.MultiheadAttention(8, 2)
    copy_state(m, tm)
    x = randn(5, 3, 8)
    got = run(lambda t: m(t, t, t, is_causal=True)[0], x, backend=backend, shapes=[("S", "B", 8)])
    tx = torch.from_numpy(x)
    want = tm(tx, tx, tx, attn_mask=torch.triu(torch.ones(5, 5, dtype=torch.bool), 1), is_causal=True)[0]
    np.testing.assert_allclose(got, want.detach().numpy(), rtol=1e-5, atol=1e-5)


def test_multihead_attention_kv_dims_unbatched_no_weights(backend):
    tm = torch.nn.MultiheadAttention(6, 3, kdim=4, vdim=5, bias=False)
    m = L.MultiheadAttention(6, 3, kdim=4, vdim=5, bias=False)
    same_state_layout(m, tm)
    copy_state(m, tm)
    q, k, v = randn(3, 6), randn(4, 4, seed=1), randn(4, 5, seed=2)
    got = run(lambda *t: m(*t, need_weights=False)[0], q, k, v, backend=backend)
    want = tm(*map(torch.from_numpy, (q, k, v)), need_weights=False)[0].detach().numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    g = lm.Graph()
    out, w = m(g.input("q", (3, 6)), g.input("k", (4, 4)), g.input("v", (4, 5)), need_weights=False)
    assert w is None and out.shape == (3, 6)


# state_dict layout -----------------------------------------------------------------------------
@pytest.mark.parametrize("make", [
    lambda nn: nn.Linear(3, 4), lambda nn: nn.Linear(3, 4, bias=False), lambda nn: nn.Embedding(5, 3),
    lambda nn: nn.LayerNorm((2, 3)), lambda nn: nn.LayerNorm(3, bias=False),
    lambda nn: nn.LayerNorm(3, elementwise_affine=False), lambda nn: nn.RMSNorm(4),
    lambda nn: nn.BatchNorm1d(3), lambda nn: nn.BatchNorm2d(3, affine=False),
    lambda nn: nn.BatchNorm2d(3, track_running_stats=False), lambda nn: nn.Conv1d(2, 4, 3, groups=2),
    lambda nn: nn.Conv2d(2, 4, (3, 2), bias=False), lambda nn: nn.MultiheadAttention(4, 2),
    lambda nn: nn.MultiheadAttention(4, 2, bias=False, kdim=3, vdim=2),
    lambda nn: nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Sequential(nn.Linear(3, 1))),
])
def test_state_dict_layout(make):
    m, tm = make(L), make(torch.nn)
    same_state_layout(m, tm)
    assert [n for n, _ in m.named_parameters()] == [n for n, _ in tm.named_parameters()]
    assert [n for n, _ in m.named_buffers()] == [n for n, _ in tm.named_buffers()]
    copy_state(m, tm)  # loads by name


def test_batchnorm_state_dtypes():
    m = L.BatchNorm2d(3)
    assert m.state_dtypes()["num_batches_tracked"] is lm.int32
    tm = torch.nn.BatchNorm2d(3)
    tm.num_batches_tracked.fill_(7)
    m.load_state_dict({k: v.numpy() for k, v in tm.state_dict().items()})  # int64 converts
    assert m.num_batches_tracked.data.dtype == np.int32 and int(m.num_batches_tracked.data) == 7


def test_an_int_buffer_refuses_floats_without_an_int32_value():
    """A cast would store NaN, inf and 1e20 as -2**31, with a numpy warning at most; a fraction
    truncates, as torch's ``copy_`` does."""
    m = L.BatchNorm1d(3)
    m.num_batches_tracked.set(4)
    for bad, why in ((np.nan, "nan has no int32 value"), (-np.inf, "-inf has no int32 value"),
                     (1e20, "do not fit in int32")):
        sd = {k: np.asarray(v) for k, v in m.state_dict().items()}
        sd["num_batches_tracked"] = np.array(bad, np.float64)
        with pytest.raises(ValueError, match=f"num_batches_tracked: .*{why}"):
            m.load_state_dict(sd)
        assert int(m.num_batches_tracked.data) == 4  # nothing loaded
    sd["num_batches_tracked"] = np.array(7.9, np.float32)
    m.load_state_dict(sd)
    assert int(m.num_batches_tracked.data) == 7


# errors ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("layer,shape,expect", [
    (lambda: L.Linear(4, 2), (3, 5), r"Linear\(in_features=4.*expected input of shape \(\*, 4\), got \(3, 5\)"),
    (lambda: L.Conv2d(3, 4, 3), (2, 5, 8, 8), r"Conv2d\(3, 4.*expected input of shape \(N, 3, H, W\) or "
                                              r"\(3, H, W\), got \(2, 5, 8, 8\)"),
    (lambda: L.Conv2d(3, 4, 3), (3, 8), r"Conv2d.*got \(3, 8\)"),
    (lambda: L.Conv1d(3, 4, 3), (2, 3, 8, 8), r"Conv1d.*\(N, 3, L\)"),
    (lambda: L.Conv2d(3, 4, 5), (1, 3, 4, 4), r"smaller than the \(dilated\) kernel"),
    (lambda: L.BatchNorm2d(3), (2, 4, 5, 5), r"BatchNorm2d\(3.*\(N, 3, H, W\), got \(2, 4, 5, 5\)"),
    (lambda: L.BatchNorm1d(3), (2, 3, 4, 5), r"BatchNorm1d.*\(N, 3\) or \(N, 3, L\)"),
    (lambda: L.BatchNorm1d(3), (1, 3), r"more than 1 value per channel"),
    (lambda: L.LayerNorm((4, 5)), (2, 5, 4), r"LayerNorm.*\(\*, 4, 5\), got \(2, 5, 4\)"),
    (lambda: L.MaxPool2d(2), (2, 3, 4), None),
    (lambda: L.MaxPool2d(2), (4,), r"MaxPool2d.*\(N, C, H, W\) or \(C, H, W\)"),
    (lambda: L.MaxPool2d(3), (1, 1, 2, 2), r"large enough"),
])
def test_input_errors(layer, shape, expect):
    g = lm.Graph()
    x = g.input("x", shape)
    if expect is None:
        layer()(x)  # accepted (unbatched)
        return
    with pytest.raises(ValueError, match=expect) as e:
        layer()(x)
    assert "test_layers.py" in str(e.value)  # points at the user's line


def test_constructor_errors():
    with pytest.raises(ValueError, match="padding_mode='zeros'"):
        L.ConvTranspose2d(2, 2, 3, padding_mode="reflect")
    with pytest.raises(ValueError, match="divisible by groups"):
        L.Conv2d(3, 4, 3, groups=2)
    with pytest.raises(ValueError, match="strided"):
        L.Conv2d(3, 4, 3, padding="same", stride=2)
    with pytest.raises(ValueError, match="invalid padding string"):
        L.Conv1d(3, 4, 3, padding="full")
    with pytest.raises(ValueError, match="at most half"):
        L.MaxPool2d(2, padding=2)
    with pytest.raises(ValueError, match="at most half"):  # torch's limit ignores the dilation
        L.MaxPool1d(3, 1, padding=2, dilation=2)
    with pytest.raises(ValueError, match="divisible by num_heads"):
        L.MultiheadAttention(5, 2)
    with pytest.raises(ValueError, match="between 0 and 1"):
        L.Dropout(1.5)
    with pytest.raises(ValueError, match="approximate"):
        L.GELU("fast")
    g = lm.Graph()
    with pytest.raises(TypeError, match="integer indices"):
        L.Embedding(3, 2)(g.input("i", (4,)))
