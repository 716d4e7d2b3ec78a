"""Constructor options and their combinations, layer by layer, against torch.

test_layers.py / test_layer_grads.py / test_layer_modes.py test each layer's main path; this file sweeps
the options torch's constructors (and forward keywords) offer: each case builds the layer from ``L`` and
``torch.nn`` with the same arguments, checks the state_dict layout, perturbs luminal's initial weights
and copies them into torch by name, then compares the forward values and the gradients of the summed
output with respect to the input and every parameter. Options luminal does not have must raise, not be
silently ignored.
"""

from collections import OrderedDict

import numpy as np
import pytest
import torch

import luminal as lm
from luminal.nn import layers as L

pytestmark = [pytest.mark.usefixtures("one_torch_thread"),
              pytest.mark.filterwarnings("ignore:Using padding='same':UserWarning")]
train = pytest.importorskip("luminal.train")


def randn(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def to_torch_state(m):
    return {k: torch.from_numpy(np.array(v, dtype=np.int64 if v.dtype == np.int32 else v.dtype))
            for k, v in m.state_dict().items()}


def parity(make, *inputs, backend, call=None, tcall=None, training=False, perturb=True, grad=True,
           rtol=1e-5, atol=1e-5, grtol=1e-4, gatol=1e-5, check_layout=True):
    """``make(nn)`` builds the layer from ``L`` or ``torch.nn``; ``call(m, *xs)`` applies it (default
    ``m(*xs)``) and may return a tuple. luminal's (perturbed) weights are loaded into torch by name.
    Gradients: of the sum of every float output w.r.t. the float inputs and every parameter."""
    call = call or (lambda m, *xs: m(*xs))
    tcall = tcall or call
    m, tm = make(L).train(training), make(torch.nn).train(training)
    if check_layout:
        sd = tm.state_dict()
        assert list(m.state_dict()) == list(sd)
        assert {k: tuple(v.shape) for k, v in m.state_dict().items()} == {k: tuple(v.shape) for k, v in sd.items()}
        assert [n for n, _ in m.named_parameters()] == [n for n, _ in tm.named_parameters()]
    if perturb:
        for i, p in enumerate(m.parameters()):
            p.set(p.data + randn(*p.data.shape, seed=100 + i) * 0.3)
    tm.load_state_dict(to_torch_state(m))

    g = lm.Graph()
    xs = [g.input(f"x{i}", a.shape, dtype=lm.core.dtype.as_dtype(a.dtype)) for i, a in enumerate(inputs)]
    out = call(m, *xs)
    outs = [o for o in (out if isinstance(out, (tuple, list)) else (out,)) if o is not None]
    float_in = [x for x in xs if x.dtype.is_float]
    params = [p for p in m.parameters() if p.requires_grad] if grad else []
    wrt = (float_in if grad else []) + params
    grads = []
    if wrt:
        loss = None
        for o in outs:
            loss = o.sum() if loss is None else loss + o.sum()
        grads = list(train.grad(loss, wrt, allow_unused=True))
    got = lm.compile(outs + grads, backend=backend)(**{f"x{i}": a for i, a in enumerate(inputs)})
    got = got if isinstance(got, tuple) else (got,)

    tin = [torch.from_numpy(a.astype(np.int64) if a.dtype == np.int32 else a.copy()) for a in inputs]
    for t in tin:
        if t.is_floating_point() and grad:
            t.requires_grad_(True)
    tout = tcall(tm, *[t.clone() if t.requires_grad else t for t in tin])  # clones: inplace=True layers
    touts = [o for o in (tout if isinstance(tout, (tuple, list)) else (tout,)) if o is not None]
    assert len(touts) == len(outs)
    for k, (a, b) in enumerate(zip(got, touts)):
        b = b.detach().numpy()
        assert a.shape == b.shape, f"output {k}: {a.shape} vs torch's {b.shape}"
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, err_msg=f"output {k}")
    if not wrt:
        return got[:len(outs)]
    sum(o.sum() for o in touts).backward()
    tparams = dict(tm.named_parameters())
    names = [n for n, p in m.named_parameters() if p.requires_grad]
    want = [t.grad for t in tin if t.is_floating_point()] + [tparams[n].grad for n in names]
    labels = [f"input {i}" for i, t in enumerate(tin) if t.is_floating_point()] + names
    for label, a, w in zip(labels, got[len(outs):], want, strict=True):
        w = np.zeros(a.shape) if w is None else w.numpy()
        np.testing.assert_allclose(a, w, rtol=grtol, atol=gatol, err_msg=f"d sum / d {label}")
    return got[:len(outs)]


# Linear / Embedding / shape layers -------------------------------------------------------------
def test_linear_no_bias_unbatched(backend):
    parity(lambda nn: nn.Linear(4, 3, bias=False), randn(4), backend=backend)


def test_linear_bias_false_has_no_bias_entry():
    m = L.Linear(3, 2, bias=False)
    assert m.bias is None and list(m.state_dict()) == ["weight"]


def test_embedding_padding_idx_negative_and_grad(backend):
    idx = np.array([[0, 3, 3], [1, 3, 2]], np.int32)
    parity(lambda nn: nn.Embedding(4, 3, padding_idx=-1), idx, backend=backend)


def test_embedding_from_pretrained_freeze():
    w = randn(5, 3)
    m = L.Embedding.from_pretrained(w)
    tm = torch.nn.Embedding.from_pretrained(torch.from_numpy(w))
    assert m.weight.requires_grad is tm.weight.requires_grad is False
    assert [n for n, _ in m.named_parameters()] == [n for n, _ in tm.named_parameters()]  # frozen still listed
    np.testing.assert_array_equal(m.weight.data, w)
    m2 = L.Embedding.from_pretrained(w, freeze=False, padding_idx=1)
    assert m2.weight.requires_grad and m2.padding_idx == 1
    np.testing.assert_array_equal(m2.weight.data[1], w[1])  # torch does not zero a pretrained padding row


def test_embedding_from_pretrained_padding_grad(backend):
    w = randn(5, 3)
    idx = np.array([1, 2, 1, 4], np.int32)
    parity(lambda nn: nn.Embedding.from_pretrained(torch.from_numpy(w) if nn is torch.nn else w, freeze=False,
                                                   padding_idx=1), idx, backend=backend, perturb=False)


def test_embedding_unsupported_options_raise():
    with pytest.raises(NotImplementedError):  # (scale_grad_by_freq, sparse: test_linear_embedding_audit.py)
        L.Embedding(4, 2, max_norm=1.0)
    with pytest.raises(ValueError):
        L.Embedding(4, 2, padding_idx=4)
    with pytest.raises(ValueError):
        L.Embedding(4, 2, _weight=np.zeros((3, 2), np.float32))


@pytest.mark.parametrize("make", [
    lambda nn: nn.Flatten(-3, -2), lambda nn: nn.Flatten(0, -1), lambda nn: nn.Flatten(2, 2),
    lambda nn: nn.Unflatten(1, (-1, 2)), lambda nn: nn.Unflatten(-1, (5, 1)),
], ids=["flatten_neg", "flatten_all", "flatten_one", "unflatten_minus1", "unflatten_negdim"])
def test_shape_layers(backend, make):
    parity(make, randn(2, 4, 3, 5), backend=backend)


# activations -----------------------------------------------------------------------------------
def _kinks():
    """Values at and around every activation's kink/threshold, exactly representable."""
    base = np.array([-3.0, -1.0, -0.5, 0.0, 0.0, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 12.0], np.float32)
    return np.stack([base, -base, base * 2, base / 4])


ACTS = {
    "relu": lambda nn: nn.ReLU(inplace=True),
    "leaky_neg_slope": lambda nn: nn.LeakyReLU(-0.3),
    "leaky_big_slope": lambda nn: nn.LeakyReLU(negative_slope=2.0),
    "elu_alpha": lambda nn: nn.ELU(alpha=2.5),
    "elu_neg_alpha": lambda nn: nn.ELU(-0.7),
    "gelu_none": lambda nn: nn.GELU(approximate="none"),
    "gelu_tanh": lambda nn: nn.GELU(approximate="tanh"),
    "softplus_beta": lambda nn: nn.Softplus(beta=0.5),
    "softplus_threshold_kink": lambda nn: nn.Softplus(beta=2.0, threshold=5.0),  # x=2.5 sits on the kink
    "softplus_neg_beta": lambda nn: nn.Softplus(beta=-1.0),
    "silu": lambda nn: nn.SiLU(inplace=True),
    "mish": lambda nn: nn.Mish(),
    "sigmoid": lambda nn: nn.Sigmoid(),
    "tanh": lambda nn: nn.Tanh(),
    "softmax_dim0": lambda nn: nn.Softmax(dim=0),
    "softmax_neg": lambda nn: nn.Softmax(dim=-2),
    "log_softmax_dim1": lambda nn: nn.LogSoftmax(dim=1),
}


@pytest.mark.parametrize("case", list(ACTS))
def test_activation_options(backend, case):
    x = _kinks()
    parity(ACTS[case], x, backend=backend)


@pytest.mark.filterwarnings("ignore:Implicit dimension:UserWarning")
@pytest.mark.parametrize("shape", [(5,), (2, 5), (2, 3, 4), (2, 3, 2, 2)])
@pytest.mark.parametrize("cls", ["Softmax", "LogSoftmax"])
def test_softmax_implicit_dim_by_rank(backend, cls, shape):
    parity(lambda nn: getattr(nn, cls)(), randn(*shape), backend=backend)


# normalisation ---------------------------------------------------------------------------------
NORMS = {
    "ln_tuple_noaffine": (lambda nn: nn.LayerNorm((3, 4), elementwise_affine=False), (2, 3, 4)),
    "ln_list_nobias": (lambda nn: nn.LayerNorm([3, 4], bias=False), (2, 3, 4)),
    "ln_noaffine_nobias": (lambda nn: nn.LayerNorm(4, elementwise_affine=False, bias=False), (3, 4)),
    "ln_eps": (lambda nn: nn.LayerNorm(4, eps=0.5), (3, 4)),
    "ln_whole_input": (lambda nn: nn.LayerNorm((2, 3, 4)), (2, 3, 4)),
    "rms_noaffine": (lambda nn: nn.RMSNorm(4, elementwise_affine=False), (3, 4)),
    "rms_tuple_eps": (lambda nn: nn.RMSNorm((3, 4), eps=0.1), (2, 3, 4)),
    "bn1d_noaffine_train": (lambda nn: nn.BatchNorm1d(3, affine=False), (5, 3)),
    "bn2d_eps_train": (lambda nn: nn.BatchNorm2d(3, eps=0.5), (2, 3, 2, 3)),
    "bn2d_nostats_noaffine": (lambda nn: nn.BatchNorm2d(3, affine=False, track_running_stats=False), (2, 3, 2, 2)),
    "bn1d_3d_momentum_none": (lambda nn: nn.BatchNorm1d(3, momentum=None), (2, 3, 4)),
}


@pytest.mark.parametrize("case", list(NORMS))
def test_norm_options(backend, case):
    make, shape = NORMS[case]
    parity(make, randn(*shape) * 2 + 0.5, backend=backend, training="train" in case or "nostats" in case)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_rmsnorm_default_eps_follows_dtype(backend, dtype):
    x = (randn(2, 4) * 1e-4).astype(dtype)
    got = parity(lambda nn: nn.RMSNorm(4).to(torch.float64) if nn is torch.nn and dtype == np.float64
                 else nn.RMSNorm(4, **({"dtype": lm.float64} if dtype == np.float64 else {})),
                 x, backend=backend, grad=False, rtol=1e-4)
    assert got[0].dtype == dtype


@pytest.mark.parametrize("momentum", [0.0, 1.0, 0.3])
@pytest.mark.parametrize("affine", [True, False])
def test_batchnorm_train_then_eval_options(backend, momentum, affine):
    """Running stats after two training steps, then an eval forward, for momentum / affine combos."""
    m = L.BatchNorm1d(3, momentum=momentum, affine=affine)
    tm = torch.nn.BatchNorm1d(3, momentum=momentum, affine=affine)
    g = lm.Graph()
    f = lm.compile(m(g.input("x", (6, 3))), backend=backend)
    for s in range(2):
        x = randn(6, 3, seed=s) * 2 + s
        np.testing.assert_allclose(f(x=x), tm(torch.from_numpy(x)).detach().numpy(), rtol=1e-5, atol=1e-5)
    for k, v in tm.state_dict().items():
        np.testing.assert_allclose(m.state_dict()[k], v.numpy(), rtol=1e-5, atol=1e-6, err_msg=k)
    m.eval()
    tm.eval()
    parity(lambda nn: m if nn is L else tm, randn(4, 3, seed=7), backend=backend, perturb=False)


def test_batchnorm_reset_running_stats():
    m = L.BatchNorm2d(2)
    m.running_mean.set(np.ones(2))
    m.num_batches_tracked.set(4)
    m.reset_running_stats()
    tm = torch.nn.BatchNorm2d(2)
    for k, v in tm.state_dict().items():
        np.testing.assert_array_equal(m.state_dict()[k], v.numpy())


# convolutions ----------------------------------------------------------------------------------
CONVS = {
    "c1_same_even_dil": (lambda nn: nn.Conv1d(2, 3, 4, padding="same", dilation=3), (2, 2, 13)),
    "c1_same_even_dil2": (lambda nn: nn.Conv1d(2, 3, 2, padding="same", dilation=2), (2, 2, 5)),
    "c1_valid_dil": (lambda nn: nn.Conv1d(2, 3, 3, padding="valid", dilation=2), (2, 2, 9)),
    "c1_depthwise": (lambda nn: nn.Conv1d(4, 4, 3, groups=4, padding=1), (2, 4, 7)),
    "c1_depthwise_mult": (lambda nn: nn.Conv1d(3, 6, 3, groups=3, bias=False), (2, 3, 7)),
    "c1_stride_gt_kernel": (lambda nn: nn.Conv1d(2, 3, 2, stride=5), (2, 2, 13)),
    "c1_stride_gt_kernel_pad": (lambda nn: nn.Conv1d(2, 3, 2, stride=4, padding=3, dilation=2), (1, 2, 11)),
    "c1_tuple_args": (lambda nn: nn.Conv1d(2, 2, (3,), stride=(2,), padding=(1,), dilation=(1,)), (2, 2, 8)),
    "c1_unbatched_nobias": (lambda nn: nn.Conv1d(2, 3, 3, bias=False, padding=2), (2, 6)),
    "c1_padding_mode_zeros": (lambda nn: nn.Conv1d(2, 3, 3, padding=1, padding_mode="zeros"), (2, 2, 6)),
    "c2_same_even_both": (lambda nn: nn.Conv2d(2, 3, (2, 4), padding="same", dilation=(3, 1)), (1, 2, 6, 7)),
    "c2_same_groups": (lambda nn: nn.Conv2d(4, 4, 3, padding="same", groups=2, bias=False), (2, 4, 5, 5)),
    "c2_depthwise_stride": (lambda nn: nn.Conv2d(3, 3, 3, stride=2, padding=1, groups=3), (2, 3, 7, 6)),
    "c2_stride_gt_kernel": (lambda nn: nn.Conv2d(2, 2, (1, 2), stride=(3, 4)), (1, 2, 7, 9)),
    "c2_kernel_eq_input": (lambda nn: nn.Conv2d(2, 3, (4, 5)), (2, 2, 4, 5)),
    "c2_asym_pad_dil_stride": (lambda nn: nn.Conv2d(2, 4, (3, 2), stride=(1, 3), padding=(0, 2), dilation=(2, 3),
                                                    groups=2), (2, 2, 8, 9)),
    "c3_same": (lambda nn: nn.Conv3d(2, 2, (2, 3, 1), padding="same"), (1, 2, 3, 4, 3)),
    "c3_unbatched_nobias": (lambda nn: nn.Conv3d(2, 2, 2, stride=2, bias=False), (2, 4, 4, 5)),
}


@pytest.mark.parametrize("case", list(CONVS))
def test_conv_options(backend, case):
    make, shape = CONVS[case]
    parity(make, randn(*shape), backend=backend)


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
def test_conv_transpose_padding_modes_are_refused_not_ignored(mode):
    # (the convolutions' modes are tested against torch in test_conv_audit.py)
    for cls in ("ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d"):
        with pytest.raises(ValueError, match=mode):
            getattr(L, cls)(2, 2, 3, padding=1, padding_mode=mode)


def test_conv_option_errors():
    with pytest.raises(ValueError):
        L.Conv2d(2, 2, 3, groups=0)
    with pytest.raises(ValueError):
        L.Conv2d(2, 2, (3, 3, 3))
    with pytest.raises(ValueError):
        L.Conv1d(2, 2, 3, padding="same", stride=(2,))


# pooling ---------------------------------------------------------------------------------------
POOLS = {
    "max1d_ceil_dil": (lambda nn: nn.MaxPool1d(3, 2, 1, dilation=2, ceil_mode=True), (2, 3, 10)),
    "max1d_stride_gt_kernel": (lambda nn: nn.MaxPool1d(2, stride=3), (2, 2, 11)),
    "max1d_stride_gt_kernel_ceil": (lambda nn: nn.MaxPool1d(2, stride=3, ceil_mode=True), (2, 2, 11)),
    "max2d_ceil_pad_asym": (lambda nn: nn.MaxPool2d((3, 2), stride=(2, 3), padding=(1, 1), ceil_mode=True),
                            (2, 2, 8, 7)),
    "max2d_unbatched_ceil": (lambda nn: nn.MaxPool2d(2, ceil_mode=True), (2, 5, 5)),
    "max2d_kernel_eq_input": (lambda nn: nn.MaxPool2d((4, 3)), (1, 2, 4, 3)),
    "avg1d_ceil_pad_excl": (lambda nn: nn.AvgPool1d(4, 3, 2, ceil_mode=True, count_include_pad=False), (2, 2, 10)),
    "avg1d_ceil_pad_incl": (lambda nn: nn.AvgPool1d(4, 3, 2, ceil_mode=True, count_include_pad=True), (2, 2, 10)),
    "avg1d_stride_gt_kernel": (lambda nn: nn.AvgPool1d(2, stride=3, ceil_mode=True), (2, 2, 10)),
    "avg2d_divisor_ceil": (lambda nn: nn.AvgPool2d(3, 2, 1, ceil_mode=True, divisor_override=2), (2, 2, 6, 7)),
    "avg2d_ceil_nopad_incl": (lambda nn: nn.AvgPool2d((2, 3), stride=(2, 2), ceil_mode=True), (1, 2, 5, 6)),
    "avg2d_unbatched_excl": (lambda nn: nn.AvgPool2d(3, 1, 1, count_include_pad=False), (2, 4, 5)),
    "adaptive1d_up": (lambda nn: nn.AdaptiveAvgPool1d(9), (2, 2, 5)),
    "adaptive1d_nondiv": (lambda nn: nn.AdaptiveAvgPool1d(4), (2, 2, 7)),
    "adaptive2d_up_down": (lambda nn: nn.AdaptiveAvgPool2d((8, 2)), (2, 2, 5, 7)),
    "adaptive2d_none_first": (lambda nn: nn.AdaptiveAvgPool2d([None, 4]), (1, 2, 3, 7)),
    "adaptive2d_unbatched": (lambda nn: nn.AdaptiveAvgPool2d(3), (2, 5, 4)),
}


@pytest.mark.parametrize("case", list(POOLS))
def test_pool_options(backend, case):
    make, shape = POOLS[case]
    parity(make, randn(*shape), backend=backend)


def test_pool_option_errors():
    with pytest.raises(ValueError):
        L.AvgPool2d(2, divisor_override=0)
    with pytest.raises(ValueError):
        L.AvgPool1d(2, padding=2)
    with pytest.raises(TypeError):  # torch's AvgPool1d has no divisor_override either
        L.AvgPool1d(2, divisor_override=2)


# attention -------------------------------------------------------------------------------------
def _mha(nn, **kw):
    return nn.MultiheadAttention(8, 2, **kw)


def _kpm(n, s, kind):
    m = np.zeros((n, s), bool)
    m[0, -2:] = True
    m[1 % n, 0] = True
    return m if kind == "bool" else np.where(m, -1e9, randn(n, s, seed=11) * 0.5).astype(np.float32)


MHA = {
    # name: (ctor kwargs, forward kwargs (masks as inputs by name), batch_first dims)
    "avg_false": ({}, {"average_attn_weights": False}),
    "avg_false_batch_first": ({"batch_first": True}, {"average_attn_weights": False}),
    "no_bias_weights": ({"bias": False}, {}),
    "kdim_vdim_batch_first": ({"kdim": 3, "vdim": 5, "batch_first": True}, {}),
    "kdim_vdim_avg_false": ({"kdim": 3, "vdim": 5}, {"average_attn_weights": False}),
    "kpm_bool_no_weights": ({}, {"key_padding_mask": "kpm_bool", "need_weights": False}),
    "kpm_float": ({}, {"key_padding_mask": "kpm_float"}),
    "mask2d_bool_and_kpm": ({"batch_first": True}, {"attn_mask": "mask2d_bool", "key_padding_mask": "kpm_bool"}),
    "mask2d_float_and_kpm_float": ({}, {"attn_mask": "mask2d_float", "key_padding_mask": "kpm_float"}),
    "mask3d_bool": ({}, {"attn_mask": "mask3d_bool", "average_attn_weights": False}),
    "mask3d_float_batch_first": ({"batch_first": True}, {"attn_mask": "mask3d_float"}),
    "dropout_eval": ({"dropout": 0.5}, {}),
}


@pytest.mark.parametrize("case", list(MHA))
def test_multihead_attention_options(backend, case):
    ckw, fkw = MHA[case]
    n, lq, s = 2, 3, 4
    bf = ckw.get("batch_first", False)
    kd, vd = ckw.get("kdim", 8), ckw.get("vdim", 8)

    def lay(length, d, seed):
        return randn(*((n, length, d) if bf else (length, n, d)), seed=seed)

    mask2d = np.zeros((lq, s), bool)
    mask2d[0, 1:] = True
    extras = {"kpm_bool": _kpm(n, s, "bool"), "kpm_float": _kpm(n, s, "float"), "mask2d_bool": mask2d,
              "mask2d_float": randn(lq, s, seed=12), "mask3d_bool": np.broadcast_to(mask2d, (n * 2, lq, s)).copy(),
              "mask3d_float": randn(n * 2, lq, s, seed=13)}
    names = [v for v in fkw.values() if isinstance(v, str)]
    arrays = [lay(lq, 8, 1), lay(s, kd, 2), lay(s, vd, 3)] + [extras[k] for k in names]

    def call(m, q, k, v, *masks):
        kw = dict(fkw)
        it = iter(masks)
        for key, val in fkw.items():
            if isinstance(val, str):
                kw[key] = next(it)
        return tuple(m(q, k, v, **kw))

    parity(lambda nn: _mha(nn, **ckw), *arrays, backend=backend, call=call)


@pytest.mark.filterwarnings("ignore:Support for mismatched key_padding_mask:UserWarning")
@pytest.mark.parametrize("batch_first", [False, True])
def test_multihead_attention_unbatched_masks(backend, batch_first):
    """Unbatched (L, E) inputs (batch_first does not apply) with a 1-d key_padding_mask and a (H, L, S)
    float mask."""
    kpm = np.array([False, True, False, False])
    mask = randn(2, 3, 4, seed=5)

    def call(m, q, k, v, kp, am):
        return tuple(m(q, k, v, key_padding_mask=kp, attn_mask=am, average_attn_weights=False))

    parity(lambda nn: _mha(nn, batch_first=batch_first, kdim=5), randn(3, 8), randn(4, 5, seed=1),
           randn(4, 8, seed=2), kpm, mask, backend=backend, call=call)


# containers ------------------------------------------------------------------------------------
def test_sequential_ordered_dict_names_and_indexing(backend):
    def make(nn):
        return nn.Sequential(OrderedDict([("fc", nn.Linear(3, 4)), ("act", nn.ELU(0.5)),
                                          ("out", nn.Linear(4, 2, bias=False))]))

    parity(make, randn(2, 3), backend=backend)
    m, tm = make(L), make(torch.nn)
    assert list(m[1:].state_dict()) == list(tm[1:].state_dict()) == ["out.weight"]
    assert type(m[-1]).__name__ == type(tm[-1]).__name__ == "Linear"
    assert len(m[::2]) == len(tm[::2]) == 2
    with pytest.raises(IndexError):
        m[3]
    m.append(L.Tanh())
    tm.append(torch.nn.Tanh())
    assert [n for n, _ in m.named_children()] == [n for n, _ in tm.named_children()]


def test_modulelist_ops_match_torch():
    def make(nn):
        return nn.ModuleList([nn.Linear(2, 3), nn.BatchNorm1d(3), nn.Linear(3, 1, bias=False)])

    m, tm = make(L), make(torch.nn)
    for ml, nn in ((m, L), (tm, torch.nn)):
        ml.append(nn.LayerNorm(1))
        ml.extend([nn.Linear(1, 1)])
        ml[-1] = nn.Linear(1, 2)
        ml.insert(1, nn.RMSNorm(2))
    assert list(m.state_dict()) == list(tm.state_dict())
    assert [n for n, _ in m.named_parameters()] == [n for n, _ in tm.named_parameters()]
    assert [n for n, _ in m.named_buffers()] == [n for n, _ in tm.named_buffers()]
    assert list(m[2:4].state_dict()) == list(tm[2:4].state_dict())  # slices renumber from 0
    assert type(m[-2]).__name__ == type(tm[-2]).__name__


def test_nested_containers_named_parameters_order():
    def make(nn):
        return nn.Sequential(nn.ModuleList([nn.Linear(2, 2), nn.Linear(2, 2, bias=False)]),
                             nn.Sequential(nn.BatchNorm1d(2), nn.MultiheadAttention(4, 2, kdim=2)),
                             nn.LayerNorm(2, bias=False))

    m, tm = make(L), make(torch.nn)
    assert [n for n, _ in m.named_parameters()] == [n for n, _ in tm.named_parameters()]
    assert list(m.state_dict()) == list(tm.state_dict())
    assert [n for n, _ in m.named_modules()] == [n for n, _ in tm.named_modules()]


def test_shared_submodule_state_dict():
    """Found here (fixed): state_dict dropped a submodule registered twice; torch saves it under every name."""
    lin, tlin = L.Linear(2, 2), torch.nn.Linear(2, 2)
    m = L.Sequential(lin, L.ReLU(), lin)
    tm = torch.nn.Sequential(tlin, torch.nn.ReLU(), tlin)
    assert [n for n, _ in m.named_parameters()] == [n for n, _ in tm.named_parameters()]  # deduplicated, both
    assert list(m.state_dict()) == list(tm.state_dict())
    m.load_state_dict({k: v.numpy() for k, v in tm.state_dict().items()})  # torch's checkpoint loads


def test_tied_weight_keeps_state_dict_order():
    """Found here (fixed): re-assigning a registered parameter (weight tying) moved it to the end."""
    a, b = L.Linear(2, 2), L.Linear(2, 2)
    ta, tb = torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)
    b.weight = a.weight
    tb.weight = ta.weight
    m, tm = L.Sequential(a, b), torch.nn.Sequential(ta, tb)
    assert [n for n, _ in m.named_parameters()] == [n for n, _ in tm.named_parameters()]
    assert list(m.state_dict()) == list(tm.state_dict())


# dtype= ----------------------------------------------------------------------------------------
F64 = {
    "linear": (lambda nn, d: nn.Linear(3, 2, dtype=d), (4, 3)),
    "conv1d": (lambda nn, d: nn.Conv1d(2, 4, 3, padding="same", groups=2, dtype=d), (2, 2, 6)),
    "layernorm": (lambda nn, d: nn.LayerNorm(3, dtype=d), (4, 3)),
    "batchnorm_train": (lambda nn, d: nn.BatchNorm1d(3, dtype=d), (4, 3)),
    "embedding": (lambda nn, d: nn.Embedding(4, 3, padding_idx=0, dtype=d), None),
    "mha": (lambda nn, d: nn.MultiheadAttention(4, 2, kdim=3, dtype=d), None),
}


@pytest.mark.parametrize("case", list(F64))
def test_dtype_option_float64(backend, case):
    make, shape = F64[case]

    def build(nn):
        return make(nn, torch.float64 if nn is torch.nn else lm.float64)

    tol = dict(rtol=1e-10, atol=1e-10, grtol=1e-9, gatol=1e-10)
    if case == "embedding":
        parity(build, np.array([0, 3, 1, 0], np.int32), backend=backend, **tol)
    elif case == "mha":
        parity(build, randn(3, 2, 4).astype(np.float64), randn(5, 2, 3, seed=1).astype(np.float64),
               randn(5, 2, 4, seed=2).astype(np.float64), backend=backend, call=lambda m, *t: tuple(m(*t)), **tol)
    else:
        parity(build, randn(*shape).astype(np.float64), backend=backend, training="train" in case, **tol)


# invalid options: torch refuses them (at construction or on the first call); so must we (the
# negative paddings, zero dilation, empty normalized shapes and broadcast MHA masks were accepted
# silently until this file found them) -----------------------------------------------------------
INVALID = [
    pytest.param(lambda: L.Conv1d(1, 1, 2, stride=0), (1, 1, 5), id="conv_stride0"),
    pytest.param(lambda: L.Conv1d(1, 1, 2, dilation=0), (1, 1, 5), id="conv_dilation0"),
    pytest.param(lambda: L.Conv2d(1, 1, (2, 0)), (1, 1, 5, 5), id="conv_kernel0"),
    pytest.param(lambda: L.Conv1d(1, 1, 2, padding=-1), (1, 1, 5), id="conv_negative_padding"),
    pytest.param(lambda: L.MaxPool1d(2, padding=-1), (1, 1, 5), id="maxpool_negative_padding"),
    pytest.param(lambda: L.AvgPool2d(2, padding=(0, -1)), (1, 1, 5, 5), id="avgpool_negative_padding"),
    pytest.param(lambda: L.MaxPool2d(2, dilation=(1, 0)), (1, 1, 5, 5), id="maxpool_dilation0"),
    pytest.param(lambda: L.LayerNorm(()), (2, 3), id="layernorm_empty_shape"),
    pytest.param(lambda: L.RMSNorm([]), (2, 3), id="rmsnorm_empty_shape"),
    pytest.param(lambda: L.AdaptiveAvgPool1d(-1), (1, 1, 5), id="adaptive_negative"),
    pytest.param(lambda: L.Flatten(2, 1), (2, 2, 2), id="flatten_start_after_end"),
    pytest.param(lambda: L.Unflatten(1, (3, 3)), (2, 6), id="unflatten_wrong_sizes"),
]


@pytest.mark.parametrize("make,shape", INVALID)
def test_invalid_options_raise(make, shape):
    with pytest.raises((ValueError, TypeError, NotImplementedError)):
        make()(lm.Graph().input("x", shape))


@pytest.mark.parametrize("shape", [
    (3, 1),
    (1, 4),
    (1, 3, 4), (2, 3, 4), (4, 3, 1),
])
def test_multihead_attention_mask_shape_checked(shape):
    g = lm.Graph()
    q, k = g.input("q", (3, 2, 8)), g.input("k", (4, 2, 8))
    with pytest.raises(ValueError):
        L.MultiheadAttention(8, 2)(q, k, k, attn_mask=g.input("m", shape))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_rmsnorm_default_eps_of_a_16_bit_input_is_float32s(backend, dtype):
    """torch 2.13 computes a 16-bit RMSNorm in float32 with float32's eps (1.19e-7), though its docs say the
    input dtype's; luminal took float16's 9.8e-4 (bfloat16's 7.8e-3), so inputs of size 1e-3 came out 0.008
    for torch's 0.33. Compared with torch's result (computed in float32, rounded once)."""
    x = np.full((2, 4), 1e-3, np.float32) * np.array([1, 2, 3, 4], np.float32)
    tdt = getattr(torch, dtype)
    want = torch.nn.functional.rms_norm(torch.from_numpy(x).to(tdt), (4,)).float().numpy()
    g = lm.Graph()
    xi = g.input("x", (2, 4)).to(getattr(lm, dtype))
    got = lm.compile([L.RMSNorm(4)(xi).float(), lm.nn.functional.rms_norm(xi, (4,)).float()], backend=backend)(x=x)
    for out in got:
        np.testing.assert_allclose(out, want, rtol=1e-2)


def test_functional_conv_arguments_are_checked_as_torch_checks_them():
    """Before, F.conv2d with a weight whose out channels groups do not divide, or a bias of the wrong size,
    failed in a reshape ('cannot reshape to (2, 1, 18)'); groups=0 said 'expected input with 0 channels';
    F.conv1d with a 4-d weight ran as a 2-d convolution of the 3-d input taken as unbatched."""
    import luminal.nn.functional as F

    g = lm.Graph()
    x2, x1 = g.input("x", (1, 4, 5, 5)), g.input("y", (1, 3, 5))
    w = g.constant(np.ones((4, 3, 3, 3), np.float32))
    cases = [
        (lambda: F.conv2d(x2, g.constant(np.ones((3, 2, 3, 3), np.float32)), groups=2),
         r"^conv2d: weight \(3, 2, 3, 3\): dim 0 must be divisible by groups=2"),
        (lambda: F.conv2d(g.input("z", (1, 3, 5, 5)), w, g.constant(np.ones(5, np.float32))),
         r"^conv2d: bias must be \(4,\), one per output channel, got \(5,\)"),
        (lambda: F.conv2d(x2, w, groups=0), r"^conv2d: groups must be at least 1, got 0"),
        (lambda: F.conv1d(x1, w), r"^conv1d: expected a 3-d weight \(C_out, C_in/groups, \*kernel\), got "
                                  r"\(4, 3, 3, 3\)"),
        (lambda: F.conv_transpose2d(x2, g.constant(np.ones((4, 2, 3, 3), np.float32)),
                                    g.constant(np.ones(3, np.float32))),
         r"^conv_transpose2d: bias must be \(2,\), one per output channel, got \(3,\)"),
    ]
    for call, match in cases:
        with pytest.raises(ValueError, match=match):
            call()
