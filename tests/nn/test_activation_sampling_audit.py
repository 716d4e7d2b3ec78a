"""Audit of the activations and the resampling/reshaping functionals against torch: what the other
activation and interpolate tests leave out (values and gradients in the far tails, int and bool
dtypes, argument checks, module reprs, second derivatives, non-integer scale factors, errors).

Found by the audit (each test below marked so failed before the fix):
- softplus and logsigmoid computed ``log(1 + e)``: ``1 + e`` rounds and the tail was lost (softplus
  0 below x = -17 in float32, 17% off at -15; logsigmoid 0 above 17; mish, built on softplus, too,
  and its gradient 1.3% off far out). Now ``log1p``, as torch's.
- hardtanh and relu6 of an int tensor gave float32 (torch keeps the int dtype, bounds truncated);
  relu of a bool tensor gave int32, hardtanh/relu6 float32 (torch refuses bool).
- a NaN hardtanh bound applied the other bound alone (torch's clamp: NaN everywhere).
- glu with a dim out of range said "halving dimension 5 must have an even size".
- prelu applied a per-channel weight along dim 0 of a 1-d input, which torch refuses (1 channel).
- nn.Hardsigmoid(inplace=True) and nn.Hardswish printed ``inplace=True`` (torch's print nothing).
- elu/celu/softplus/hardtanh with a str argument failed in Python arithmetic naming nothing.
- interpolate: scale_factor 0 raised a bare ZeroDivisionError, inf/NaN/str bare conversion errors,
  a size with None or floats a bare TypeError; recompute_scale_factor=True with a size was accepted
  silently (torch refuses); pixel_shuffle(x, True) failed inside reshape.
- F.softmax/log_softmax/softmin(x, dim, dtype=int32) cast x to int32 first (silently truncating it) and
  gave float32; torch refuses a non-float dtype.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as TF
from parity import check, rand

import luminal as lm
import luminal.nn.functional as F
from luminal import nn, train

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _f(t):
    return TF if isinstance(t, torch.Tensor) else F


def _run(op, xs: np.ndarray, dtype=lm.float32, grad: bool = True):
    """luminal's ``op(x)`` and, with ``grad``, d sum(op(x)) / dx, compiled for the cpu backend."""
    g = lm.Graph()
    x = g.input("x", xs.shape, dtype=dtype)
    y = op(x)
    outs = [y, train.grad(y.sum(), x)] if grad else [y]
    return lm.compile(outs, backend="cpu")(x=xs)


# far tails: log1p (failed before) ------------------------------------------------------------------

TAIL = [-100.0, -80.0, -50.0, -30.0, -20.0, -17.0, -15.0, -10.0, -5.0, 5.0, 10.0, 15.0, 17.0, 20.0, 30.0, 80.0]


def _softplus64(x, beta=1.0):
    return np.log1p(np.exp(beta * x)) / beta


TAIL_REF = {  # name: (luminal op, value and derivative in float64, written out)
    "softplus": (lambda x: F.softplus(x), lambda x: (_softplus64(x), 1 / (1 + np.exp(-x)))),
    "softplus_b0.5": (lambda x: F.softplus(x, 0.5, 50.0),
                      lambda x: (_softplus64(x, 0.5), 1 / (1 + np.exp(-0.5 * x)))),
    "logsigmoid": (F.logsigmoid, lambda x: (-np.log1p(np.exp(-x)), 1 / (1 + np.exp(x)))),
    "mish": (F.mish, lambda x: (x * np.tanh(_softplus64(x)),
                                np.tanh(_softplus64(x)) + x * (1 - np.tanh(_softplus64(x)) ** 2) / (1 + np.exp(-x)))),
}


@pytest.mark.parametrize("dtype", [lm.float32, lm.float64], ids=lambda d: d.name)
@pytest.mark.parametrize("name", list(TAIL_REF))
def test_tails_are_relatively_accurate(name, dtype):
    op, ref = TAIL_REF[name]
    xs = np.array(TAIL, dtype.np)
    y, d = _run(op, xs, dtype)
    want_y, want_d = ref(xs.astype(np.float64))
    rt = 1e-5 if dtype is lm.float32 else 1e-12
    normal = np.abs(want_y) > np.finfo(dtype.np).tiny  # (a subnormal result keeps only a few bits)
    np.testing.assert_allclose(y[normal], want_y[normal], rtol=rt, atol=0, err_msg="value")
    normal = np.abs(want_d) > np.finfo(dtype.np).tiny
    np.testing.assert_allclose(d[normal], want_d[normal], rtol=rt * 10, atol=0, err_msg="derivative")


# int and bool inputs ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name,args", [("hardtanh", ()), ("hardtanh", (-2.7, 2.7)), ("hardtanh", (-2.2, 1.5)),
                                       ("hardtanh", (2.2, 2.7)), ("relu6", ()), ("relu", ())])
def test_int_inputs_keep_their_dtype(name, args):
    """torch's hardtanh of an int tensor truncates the bounds toward zero and keeps the dtype."""
    x = np.array([-5, -3, -2, -1, 0, 1, 2, 3, 5, 7], np.int32)
    check(lambda t: getattr(_f(t), name)(t, *args), [x])


@pytest.mark.parametrize("name", ["relu", "relu6", "hardtanh"])
def test_bool_inputs_are_refused(name):
    g = lm.Graph()
    with pytest.raises(TypeError, match=f"^{name}: not defined for bool tensors"):
        getattr(F, name)(g.input("b", (3,), dtype=lm.bool))


def test_hardtanh_int_bounds_beyond_int32_are_refused():
    g = lm.Graph()
    x = g.input("i", (3,), dtype=lm.int32)
    for bounds in [(-math.inf, 1.0), (-1.0, math.inf), (math.nan, 1.0), (-1e30, 1e30)]:
        with pytest.raises(ValueError, match="^hardtanh: (min|max)_val .* cannot be converted to the input's dtype"):
            F.hardtanh(x, *bounds)


@pytest.mark.parametrize("bounds", [(math.nan, 1.0), (-1.0, math.nan)])
def test_hardtanh_nan_bound_makes_every_value_nan(bounds):
    xs = np.array([-2.0, -1.0, 0.0, 0.5, 1.0, 3.0, math.inf, -math.inf, math.nan], np.float32)
    (y,) = _run(lambda x: F.hardtanh(x, *bounds), xs, grad=False)
    assert np.isnan(y).all()


# argument checks ----------------------------------------------------------------------------------


@pytest.mark.parametrize("call,match", [
    (lambda x: F.elu(x, "a"), "^elu: alpha must be a number, got str 'a'"),
    (lambda x: F.celu(x, "a"), "^celu: alpha must be a number, got str 'a'"),
    (lambda x: F.softplus(x, "a"), "^softplus: beta must be a number, got str 'a'"),
    (lambda x: F.softplus(x, 1.0, None), "^softplus: threshold must be a number, got NoneType None"),
    (lambda x: F.hardtanh(x, "a"), "^hardtanh: min_val must be a number, got str 'a'"),
    (lambda x: F.hardtanh(x, -1.0, None), "^hardtanh: max_val must be a number, got NoneType None"),
    (lambda x: F.glu(x, 5), "^glu: dim 5 is out of range for a 2-d tensor"),
    (lambda x: F.glu(x, -3), "^glu: dim -3 is out of range for a 2-d tensor"),
    (lambda x: F.glu(x[0, 0]), "^glu: needs a tensor with at least 1 dim"),
], ids=["elu", "celu", "softplus_beta", "softplus_threshold", "hardtanh_min", "hardtanh_max", "glu_dim",
        "glu_neg_dim", "glu_0d"])
def test_argument_errors_name_the_op(call, match):
    g = lm.Graph()
    with pytest.raises((TypeError, ValueError), match=match):
        call(g.input("x", (2, 4)))


def test_errors_torch_also_raises():
    g = lm.Graph()
    x = g.input("x", (2, 3))
    with pytest.raises(ValueError, match=r"^hardtanh: min_val \(2.0\) cannot be greater than max_val \(1.0\)"):
        F.hardtanh(x, 2.0, 1.0)
    with pytest.raises(ValueError, match="^gelu: approximate must be 'none' or 'tanh', got 'foo'"):
        F.gelu(x, approximate="foo")
    with pytest.raises(ValueError, match=r"^glu: halving dimension -1 must have an even size, got shape \(2, 3\)"):
        F.glu(x)
    with pytest.raises(ValueError, match="^celu: alpha cannot be 0"):
        F.celu(x, 0.0)
    with pytest.raises(ValueError, match="GELU: approximate must be 'none' or 'tanh'"):
        nn.GELU("foo")
    with pytest.raises(ValueError, match="Hardtanh: min_val"):
        nn.Hardtanh(2, 1)


# prelu ----------------------------------------------------------------------------------------------


def test_prelu_input_of_fewer_than_two_dims_has_one_channel():
    """torch: "When input has dims < 2, then there is no channel dim and the number of channels = 1"."""
    g = lm.Graph()
    for shape in [(6,), ()]:
        with pytest.raises(ValueError, match=r"^prelu: weight of shape \(6,\) must have 1 or as many values as "
                                             r"channels .*fewer than 2 dims has 1 channel"):
            F.prelu(g.input(f"x{len(shape)}", shape), g.input(f"w{len(shape)}", (6,)))
    with pytest.raises(RuntimeError, match="Mismatch of parameter numbers"):  # torch refuses too
        TF.prelu(torch.zeros(6), torch.ones(6))
    check(lambda a, b: _f(a).prelu(a, b), [rand((6,)), np.array([0.3], np.float32)])
    check(lambda a, b: _f(a).prelu(a, b), [rand(()), np.array([0.3], np.float32)])


@pytest.mark.parametrize("dtype", [lm.float32, lm.float64, lm.float16, lm.bfloat16], ids=lambda d: d.name)
@pytest.mark.parametrize("xs,ws", [((2, 3, 2, 2, 2), (3,)), ((1, 6), (6,)), ((2, 3, 4), (1,))])
def test_prelu_channels_values_and_gradients(xs, ws, dtype):
    check(lambda a, b: _f(a).prelu(a, b), [rand(xs, dtype), rand(ws, dtype, seed=3, low=-1, high=2)],
          dtypes=[dtype, dtype])


def test_prelu_at_the_kink_and_special_values():
    x = np.array([[0.0, -0.0, 1e-30, -1e-30, -1.0, 2.0]], np.float32)
    check(lambda a, b: _f(a).prelu(a, b), [x, np.array([0.3], np.float32)])
    (y,) = _run(lambda t: F.prelu(t, t.graph.constant(np.array([0.5], np.float32))),
                np.array([math.nan, math.inf, -math.inf, -0.0], np.float32), grad=False)
    np.testing.assert_array_equal(y[:3], [math.nan, math.inf, -math.inf])
    assert y[3] == 0 and np.signbit(y[3])


# module reprs ------------------------------------------------------------------------------------------

MODULES = ["ReLU()", "ReLU(inplace=True)", "ReLU6(inplace=True)", "LeakyReLU(0.2, True)", "LeakyReLU(-1)",
           "PReLU(3, 0.1)", "Hardtanh(-2.0, 3.0, True)", "Hardsigmoid(True)", "Hardswish(inplace=True)",
           "Hardsigmoid()", "SiLU(True)", "Mish(True)", "GELU('tanh')", "Softplus(2, 5)", "Softsign()",
           "Tanhshrink()", "Threshold(1, 2, True)", "LogSigmoid()", "Softmax()", "LogSoftmax(1)", "Softmin(0)",
           "GLU(1)", "ELU(0.5, True)", "CELU(2.0)", "SELU(True)", "Upsample(scale_factor=2)",
           "Upsample(size=(4, 5), mode='bilinear')", "UpsamplingNearest2d(size=3)",
           "UpsamplingBilinear2d(scale_factor=2)", "PixelShuffle(2)", "PixelUnshuffle(3)"]


@pytest.mark.parametrize("make", MODULES)
def test_module_repr_is_torchs(make):
    assert repr(eval("nn." + make)) == repr(eval("torch.nn." + make))


# values and gradients at kinks and extremes, every float dtype ------------------------------------------

ACTS = {
    "relu": (), "relu6": (), "leaky_relu": (), "leaky_relu_neg": ("leaky_relu", -0.5),
    "leaky_relu_2": ("leaky_relu", 2.0), "hardtanh": (), "hardtanh_2_3": ("hardtanh", -2.0, 3.0),
    "hardtanh_eq": ("hardtanh", 1.0, 1.0), "hardsigmoid": (), "hardswish": (), "silu": (), "mish": (), "gelu": (),
    "softplus": (), "softplus_b50": ("softplus", 50.0), "softplus_b-1": ("softplus", -1.0), "softsign": (),
    "tanhshrink": (), "threshold": ("threshold", 0.5, -3.0), "logsigmoid": (), "sigmoid": (), "tanh": (),
}
KINKS = np.array([0.0, -0.0, 1e-30, -1e-30, 1e-7, -1e-7, 1.0, -1.0, 2.9999, 3.0, -3.0, 3.0001, -3.0001, 6.0,
                  5.9999, 6.0001, 0.5, -0.5, 20.0, 25.0, -25.0, 100.0, -100.0], np.float32)


def _act(name):
    spec = ACTS[name]
    fn, args = (spec[0], spec[1:]) if spec else (name, ())
    return lambda t: getattr(_f(t), fn)(t, *args)


@pytest.mark.parametrize("name", list(ACTS))
def test_activation_kinks_every_dtype(name):
    op = _act(name)
    check(op, [KINKS])
    check(op, [KINKS.astype(np.float64)])
    for d in (lm.float16, lm.bfloat16):
        check(op, [lm.core.dtype.to_storage(KINKS.astype(np.float64), d)], dtypes=[d])
        check(op, [rand((40,), d, low=-8, high=8)], dtypes=[d])


# the mathematically defined values at +-1e30, +-inf and NaN, written out
EXTREMES = np.array([1e30, -1e30, math.inf, -math.inf, math.nan], np.float32)
EXTREME_VALUES = {
    "relu": [1e30, 0, math.inf, 0, math.nan], "relu6": [6, 0, 6, 0, math.nan],
    "leaky_relu": [1e30, -1e28, math.inf, -math.inf, math.nan], "hardtanh": [1, -1, 1, -1, math.nan],
    "hardsigmoid": [1, 0, 1, 0, math.nan], "softplus": [1e30, 0, math.inf, 0, math.nan],
    # x * (a gate that is 0 at -inf): -inf * 0 is NaN in IEEE arithmetic (the limit is 0); not asserted
    **{name: [1e30, 0, math.inf, None, math.nan] for name in ("hardswish", "silu", "mish", "gelu")},
    "softsign": [1, -1, None, None, math.nan],  # inf / (1 + inf): NaN in IEEE arithmetic (the limit is +-1)
    "logsigmoid": [0, -1e30, 0, -math.inf, math.nan],
    "sigmoid": [1, 0, 1, 0, math.nan], "tanh": [1, -1, 1, -1, math.nan],
}


@pytest.mark.parametrize("name", list(EXTREME_VALUES))
def test_activation_extreme_values(name):
    (y,) = _run(_act(name), EXTREMES, grad=False)
    want = np.array([math.nan if v is None else v for v in EXTREME_VALUES[name]], np.float32)
    keep = np.array([v is not None for v in EXTREME_VALUES[name]])
    np.testing.assert_allclose(y[keep], want[keep], rtol=1e-6, atol=0)
    y, d = _run(_act(name), EXTREMES[:2])  # finite: finite gradients (no inf * 0)
    assert np.isfinite(d).all(), d


SECOND_ORDER = ["relu", "relu6", "leaky_relu", "hardtanh", "hardsigmoid", "hardswish", "silu", "gelu", "softplus",
                "softsign", "tanhshrink", "logsigmoid", "sigmoid", "tanh", "threshold"]
X2 = [-100.0, -25.0, -6.0001, -6.0, -3.0001, -3.0, -2.9999, -1.0, -0.5, -1e-7, -0.0, 0.0, 1e-7, 0.5, 1.0, 2.9999,
      3.0, 3.0001, 6.0, 6.0001, 19.9, 20.0, 20.1, 25.0, 100.0]


@pytest.mark.parametrize("dtype", [lm.float32, lm.float64], ids=lambda d: d.name)
@pytest.mark.parametrize("name", SECOND_ORDER)
def test_second_derivatives_are_torchs(name, dtype):
    args = (0.5, 2.0) if name == "threshold" else ()
    xs = np.array(X2, dtype.np)
    g = lm.Graph()
    x = g.input("x", xs.shape, dtype=dtype)
    y = getattr(F, name)(x, *args)
    d1 = train.grad(y.sum(), x)
    d2 = train.grad(d1.sum(), x, allow_unused=True)
    got = lm.compile([y, d1] + ([d2] if d2 is not None else []), backend="cpu")(x=xs)
    t = torch.tensor(xs, requires_grad=True)
    ty = getattr(TF, name)(t, *args)
    (td1,) = torch.autograd.grad(ty.sum(), t, create_graph=True)
    # (torch has no double backward for hardsigmoid: piecewise linear, its second derivative is 0)
    td2 = None if name == "hardsigmoid" or not td1.requires_grad else \
        torch.autograd.grad(td1.sum(), t, allow_unused=True)[0]
    want = [ty.detach().numpy(), td1.detach().numpy(), np.zeros(xs.shape) if td2 is None else td2.numpy()]
    got = list(got) + ([np.zeros(xs.shape)] if d2 is None else [])
    tol = 1e-6 if dtype is lm.float64 else 1e-4
    for label, a, w in zip(("value", "first", "second"), got, want):
        np.testing.assert_allclose(a, w, rtol=tol, atol=tol, err_msg=label)


# softmax family: legacy implicit dim, dtype= ------------------------------------------------------------


@pytest.mark.filterwarnings("ignore:Implicit dimension choice")
@pytest.mark.parametrize("shape", [(), (5,), (2, 5), (2, 3, 4), (2, 3, 4, 5)], ids=str)
@pytest.mark.parametrize("name", ["softmax", "log_softmax", "softmin"])
def test_softmax_family_implicit_dim_and_dtype(name, shape):
    check(lambda t: getattr(_f(t), name)(t), [rand(shape)])
    if shape:
        for d in (lm.float16, lm.bfloat16):
            check(lambda t: getattr(_f(t), name)(t, -1, dtype=torch.float32 if isinstance(t, torch.Tensor)
                                                 else lm.float32), [rand(shape, d, low=-5, high=5)], dtypes=[d])


# interpolate --------------------------------------------------------------------------------------------

SPATIAL = {1: (2, 3, 5), 2: (1, 2, 5, 4), 3: (1, 2, 3, 4, 5)}
MODES = {1: ["nearest", "nearest-exact", "linear", "area"],
         2: ["nearest", "nearest-exact", "bilinear", "bicubic", "area"],
         3: ["nearest", "nearest-exact", "trilinear", "area"]}
CASES = [(nd, mode, ac) for nd in (1, 2, 3) for mode in MODES[nd]
         for ac in ([None] if mode in ("nearest", "nearest-exact", "area") else [False, True])]


@pytest.mark.parametrize("nd,mode,ac", CASES, ids=[f"{nd}d-{m}-{ac}" for nd, m, ac in CASES])
def test_interpolate_non_integer_scales_and_sizes(nd, mode, ac):
    x = rand(SPATIAL[nd], low=-2, high=2)
    kws = [dict(scale_factor=s, recompute_scale_factor=r) for s in (1.5, 0.7, 1.999, 3.7) for r in (None, True)]
    kws += [dict(size=1), dict(size=7), dict(size=tuple(range(3, 3 + nd))),
            dict(scale_factor=tuple([2.0, 0.5, 1.5][:nd]))]
    for kw in kws:
        check(lambda t, kw=kw: _f(t).interpolate(t, mode=mode, align_corners=ac, **kw), [x])
    check(lambda t: _f(t).interpolate(t, scale_factor=1.5, mode=mode, align_corners=ac), [x.astype(np.float64)])
    for d in (lm.float16, lm.bfloat16):
        check(lambda t: _f(t).interpolate(t, size=7, mode=mode, align_corners=ac), [rand(SPATIAL[nd], d)], dtypes=[d])


def test_nearest_gradient_counts_the_reads():
    """torch's nearest3d backward disagrees with its own forward at scale 2.3 (it sends 18 to each of
    three inputs whose forward reads are 27, 18 and 9); the gradient of the sum is how many outputs
    read each input: counted here from torch's forward of the element indices."""
    shape = (1, 2, 3, 4, 5)
    idx = torch.arange(math.prod(shape), dtype=torch.float64).reshape(shape)
    reads = TF.interpolate(idx, scale_factor=2.3, mode="nearest").flatten().long()
    want = torch.bincount(reads, minlength=idx.numel()).reshape(shape).numpy()
    y, d = _run(lambda t: F.interpolate(t, scale_factor=2.3, mode="nearest"), rand(shape))
    assert y.shape == (1, 2, 6, 9, 11)
    np.testing.assert_array_equal(d, want)


@pytest.mark.parametrize("kw,err,match", [
    (dict(size=4, recompute_scale_factor=True), ValueError, "recompute_scale_factor is not meaningful with an "
                                                            "explicit size"),
    (dict(scale_factor=0), ValueError, "scale_factor must be positive and finite, got 0"),
    (dict(scale_factor=-1.5), ValueError, "scale_factor must be positive and finite, got -1.5"),
    (dict(scale_factor=math.inf), ValueError, "scale_factor must be positive and finite, got inf"),
    (dict(scale_factor=(2.0, math.nan)), ValueError, r"scale_factor must be positive and finite, got \(2.0, nan\)"),
    (dict(scale_factor="2"), TypeError, "scale_factor must be a number, got str '2'"),
    (dict(size=(2, None)), TypeError, r"size \(2, None\) must be an int or a sequence of ints"),
    (dict(size=2.5), TypeError, "size 2.5 must be an int or a sequence of ints"),
    (dict(size=0), ValueError, r"output size \(0, 0\) must be positive"),
    (dict(scale_factor=0.1), ValueError, r"output size \(0, 0\) must be positive"),
], ids=["recompute_with_size", "scale0", "scale_neg", "scale_inf", "scale_nan", "scale_str", "size_none",
        "size_float", "size0", "scale_to_0"])
def test_interpolate_argument_errors(kw, err, match):
    g = lm.Graph()
    with pytest.raises(err, match="^interpolate: " + match):
        F.interpolate(g.input("x", (1, 2, 4, 4)), **kw)
    with pytest.raises((ValueError, TypeError, RuntimeError)):  # torch refuses each too
        TF.interpolate(torch.zeros(1, 2, 4, 4), **kw)


def test_interpolate_valid_sizes_of_numpy_ints():
    check(lambda t: _f(t).interpolate(t, size=(np.int64(3), 5) if not isinstance(t, torch.Tensor) else (3, 5),
                                      mode="bilinear"), [rand((1, 2, 4, 4))])


# upsampling modules, pixel shuffle ------------------------------------------------------------------------


@pytest.mark.parametrize("make", [
    "Upsample(scale_factor=2)", "Upsample(size=(5, 7), mode='bilinear')",
    "Upsample(scale_factor=1.5, mode='bicubic', align_corners=True)", "UpsamplingNearest2d(scale_factor=2)",
    "UpsamplingNearest2d(size=(3, 5))", "UpsamplingBilinear2d(scale_factor=2)", "UpsamplingBilinear2d(size=(3, 5))",
    "Upsample(scale_factor=(2, 1.5), mode='nearest-exact')", "Upsample(scale_factor=0.5, mode='area')",
    "Upsample(scale_factor=2.5, mode='bilinear', recompute_scale_factor=True)"])
def test_upsample_modules(make):
    m, tm = eval("nn." + make), eval("torch.nn." + make)
    check(lambda t: (tm if isinstance(t, torch.Tensor) else m)(t), [rand((1, 4, 4, 6))])


@pytest.mark.parametrize("r", [1, 2])
@pytest.mark.parametrize("shape", [(2, 8, 3, 3), (8, 3, 3), (1, 2, 8, 3, 3)], ids=str)
def test_pixel_shuffle_and_unshuffle_round_trip(shape, r):
    check(lambda t: _f(t).pixel_shuffle(t, r), [rand(shape)], pre=lambda t: t.transpose(-1, -2))
    check(lambda t: _f(t).pixel_unshuffle(_f(t).pixel_shuffle(t, r), r), [rand(shape)])
    check(lambda t: _f(t).pixel_unshuffle(t, r + 1), [rand(shape[:-2] + (6, 12))])


def test_pixel_shuffle_keeps_the_dtype():
    check(lambda t: _f(t).pixel_shuffle(t, 2), [rand((1, 4, 2, 2), lm.bfloat16)], dtypes=[lm.bfloat16])
    check(lambda t: _f(t).pixel_unshuffle(t, 2), [np.arange(16, dtype=np.int32).reshape(1, 1, 4, 4)])


@pytest.mark.parametrize("name", ["pixel_shuffle", "pixel_unshuffle"])
def test_pixel_shuffle_factor_errors(name):
    g = lm.Graph()
    x = g.input("x", (1, 4, 2, 2))
    arg = "upscale_factor" if name == "pixel_shuffle" else "downscale_factor"
    for bad, err, what in [(True, TypeError, "an int, got bool True"), (2.0, TypeError, "an int, got float 2.0"),
                           (0, ValueError, "a positive int, got 0")]:
        with pytest.raises(err, match=f"^{name}: {arg} must be {what}"):
            getattr(F, name)(x, bad)
        with warnings.catch_warnings(), pytest.raises((TypeError, RuntimeError)):  # torch refuses too
            getattr(TF, name)(torch.zeros(1, 4, 2, 2), bad)


@pytest.mark.parametrize("dtype", [lm.int32, lm.bool, "int32"], ids=str)
@pytest.mark.parametrize("name", ["softmax", "log_softmax", "softmin"])
def test_softmax_family_refuses_a_non_float_dtype(name, dtype):
    """The input was cast to it first: softmax(x, dtype=int32) silently truncated x (torch refuses)."""
    g = lm.Graph()
    with pytest.raises(TypeError, match=f"^{name}: dtype must be a float dtype, got"):
        getattr(F, name)(g.input("x", (3,)), 0, dtype=dtype)
    with pytest.raises((RuntimeError, NotImplementedError)):
        getattr(TF, name)(torch.zeros(3), 0, dtype=torch.int32)
    if name != "softmin":  # lm.softmax / lm.log_softmax and the methods check it too (they truncated)
        with pytest.raises(TypeError, match=f"^{name}: dtype must be a float dtype, got"):
            getattr(lm, name)(g.input("y", (3,)), 0, dtype=dtype)
        with pytest.raises(TypeError, match=f"^{name}: dtype must be a float dtype, got"):
            getattr(g.input("z", (3,)), name)(0, dtype=dtype)


def test_pixel_unshuffle_of_symbolic_multiples():
    """H and W declared as multiples of the factor (pixel_shuffle's output, ``2*lm.sym("h")``) are divisible
    whatever their values: pixel_unshuffle refused every symbolic dim. One compiled graph, two sizes."""
    g = lm.Graph()
    x = g.input("x", ("B", 3, 2 * lm.sym("h"), 4 * lm.sym("w")))
    y = F.pixel_unshuffle(x, 2)
    z = F.pixel_shuffle(g.input("c", (1, 4 * lm.sym("C"), "H", 3)), 2)
    assert str(y.shape) == "(B, 12, h, 2*w)" and str(z.shape) == "(1, C, 2*H, 6)"
    f = lm.compile(y, backend="cpu")
    for shape in [(1, 3, 4, 8), (2, 3, 6, 4)]:
        a = rand(shape)
        np.testing.assert_array_equal(f(x=a), TF.pixel_unshuffle(torch.from_numpy(a), 2).numpy())
    with pytest.raises(ValueError, match=r"^pixel_unshuffle: expected an input .* divisible by 2, got \(1, 2, H, W\)"):
        F.pixel_unshuffle(g.input("q", (1, 2, "H", "W")), 2)
