"""Parity with torch for the math, selection, norm, scan, sort and bitwise ops a torch user reaches
for (log1p ... atan2, nan_to_num, masked_fill, addcmul, norms, var_mean, cummax, sort, topk, the
``(values, indices)`` forms of max/min, bitwise ops on int32), values and gradients."""

import math

import numpy as np
import pytest
import torch
from parity import check, rand

import luminal as lm
from luminal import train

pytestmark = pytest.mark.usefixtures("one_torch_thread")

F16, BF16, F32, F64, I32, BOOL = lm.float16, lm.bfloat16, lm.float32, lm.float64, lm.int32, lm.bool


def _signed_logspace(lo, hi, n, seed=0):
    """Magnitudes spread over decades ``10**lo .. 10**hi``, both signs, shuffled."""
    rng = np.random.default_rng(seed)
    m = 10.0 ** rng.uniform(lo, hi, n)
    return m * rng.choice([-1.0, 1.0], n)


def _domain(name, n=48):
    """Inputs over each function's domain, tiny and large magnitudes included."""
    tiny = _signed_logspace(-12, -1, n // 2, seed=1)
    if name in ("log1p",):
        return np.concatenate([tiny, np.linspace(-0.99, 20, n // 2)])
    if name in ("expm1", "sinh", "cosh"):
        return np.concatenate([tiny, np.linspace(-30, 30, n // 2)])
    if name == "log10":
        return 10.0 ** np.linspace(-20, 20, n)
    if name in ("asin", "acos", "atanh"):
        return np.concatenate([tiny, np.linspace(-0.999, 0.999, n // 2)])
    if name == "acosh":
        # (near 1 torch's own gradient, 1 / sqrt(x**2 - 1), cancels: there values only, in the specials)
        return np.concatenate([np.linspace(1.1, 3, n // 2), 10.0 ** np.linspace(0.5, 12, n // 2)])
    return np.concatenate([tiny, _signed_logspace(-1, 12, n // 2, seed=2)])  # atan, asinh


UNARY = ["log1p", "expm1", "log10", "sinh", "cosh", "asinh", "acosh", "atanh", "atan", "asin", "acos"]
# float64 is compared far tighter than the harness's 1e-6; float32 rounds once from float64 (1e-6)
TIGHT = {F64: (1e-13, 0.0), F32: (1e-6, 0.0)}


@pytest.mark.parametrize("dtype", [F32, F64], ids=["f32", "f64"])
@pytest.mark.parametrize("name", UNARY)
def test_unary_math_values_and_gradients(name, dtype, backend):
    x = _domain(name).astype(dtype.np)
    rtol, atol = TIGHT[dtype]
    grad_rtol = 1e-12 if dtype is F64 else 1e-5
    # (torch's expm1 gradient is ``result + 1``, a whole ulp of 1 off where exp(x) is tiny)
    check(lambda t: getattr(t, name)(), [x], backend=backend, rtol=rtol, atol=atol,
          grad_rtol=grad_rtol, grad_atol=float(np.finfo(dtype.np).eps))


@pytest.mark.parametrize("name", UNARY)
def test_unary_math_functions_and_low_precision(name, backend):
    """``lm.<name>`` as a function, on float16 / bfloat16 (computed wider, rounded once) and int32."""
    x = np.clip(_domain(name, 16), -60000, 60000)
    if name in ("asin", "acos", "atanh"):  # (16-bit gradients near the poles at +-1 are all rounding)
        x = np.clip(x, -0.9, 0.9)
    for d in (F16, BF16):
        check(lambda t: getattr(lm if not isinstance(t, torch.Tensor) else torch, name)(t),
              [lm.core.dtype.to_storage(x, d)], dtypes=[d], backend=backend)
    ints = {"acosh": [1, 2, 7], "log10": [1, 10, 1000], "log1p": [0, 3, 7]}.get(name, [0, 1, -1])
    check(lambda t: getattr(t, name)(), [np.array(ints, np.int32)], backend=backend)


SPECIALS = np.array([0.0, -0.0, math.inf, -math.inf, math.nan, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5, 1e300, -1e300,
                     1 + 1e-12, 1 + 1e-6, 1 - 1e-9, -1 + 1e-9, 1e-300, -5e-324])


@pytest.mark.parametrize("name", UNARY)
def test_unary_math_special_values(name, backend):
    """Signed zeros, infinities, NaN, the domain edges (+-1) and beyond them, as torch."""
    out = check(lambda t: getattr(t, name)(), [SPECIALS], backend=backend, grad=False)[0]
    want = getattr(torch, name)(torch.from_numpy(SPECIALS)).numpy()
    zeros = SPECIALS == 0
    assert np.array_equal(np.signbit(out[zeros & (want == 0)]), np.signbit(want[zeros & (want == 0)]))


def test_log1p_expm1_keep_relative_accuracy_near_zero():
    """The naive ``log(1 + x)`` / ``exp(x) - 1`` give 0 (or a whole ulp of 1) here."""
    g = lm.Graph()
    for d in (F32, F64):
        x = np.array([1e-30, -1e-20, 3e-12, 1e-8, -2e-5], d.np)
        t = g.input(f"x{d.name}", (5,), dtype=d)
        f = lm.compile([t.log1p(), t.expm1()], backend="reference")
        lp, em = f(**{f"x{d.name}": x})
        np.testing.assert_allclose(lp, np.log1p(x.astype(np.float64)), rtol=4 * np.finfo(d.np).eps)
        np.testing.assert_allclose(em, np.expm1(x.astype(np.float64)), rtol=4 * np.finfo(d.np).eps)


ATAN2_SPECIALS = [0.0, -0.0, 1.0, -1.0, math.inf, -math.inf, math.nan, 3.5]


def test_atan2(backend):
    rng = np.random.default_rng(3)
    for d in (F32, F64):
        y = (rng.standard_normal((5, 8)) * 10.0 ** rng.uniform(-5, 5, (5, 8))).astype(d.np)
        x = (rng.standard_normal((5, 8)) * 10.0 ** rng.uniform(-5, 5, (5, 8))).astype(d.np)
        rtol = 1e-13 if d is F64 else 1e-6
        check(lambda a, b: lm.atan2(a, b) if not isinstance(a, torch.Tensor) else torch.atan2(a, b), [y, x],
              backend=backend, rtol=rtol, atol=0.0, grad_rtol=1e-10 if d is F64 else 1e-5)
    check(lambda a, b: a.atan2(b), [rand((3, 4), seed=4), rand((4,), seed=5)], backend=backend)
    # every pair of special values: signed zeros, infinities, NaN
    ys, xs = np.meshgrid(ATAN2_SPECIALS, ATAN2_SPECIALS)
    out = check(lambda a, b: a.atan2(b), [ys.ravel(), xs.ravel()], backend=backend, grad=False, rtol=1e-15,
                atol=0.0)[0]
    want = np.arctan2(ys.ravel(), xs.ravel())
    assert np.array_equal(np.signbit(out), np.signbit(want))


def test_atan_is_float64_accurate_across_its_reduction_intervals(backend):
    """fdlibm's breakpoints (7/16, 11/16, 19/16, 39/16) and both sides of each."""
    b = np.array([7 / 16, 11 / 16, 19 / 16, 39 / 16, 1.0, 1e-300, 1e300])
    x = np.concatenate([b, np.nextafter(b, 0), np.nextafter(b, np.inf), -b, np.linspace(-5, 5, 41)])
    check(lambda t: t.atan(), [x], backend=backend, rtol=3e-16, atol=0.0, grad=False)


def test_nan_to_num(backend):
    x = np.array([[1.5, math.nan, math.inf], [-math.inf, -2.0, 0.0]], np.float32)
    for kw in ({}, {"nan": 2.0}, {"nan": -1.0, "posinf": 7.0, "neginf": -9.0}):
        check(lambda t: t.nan_to_num(**kw), [x], backend=backend, grad="finite")
        check(lambda t: lm.nan_to_num(t, **kw) if not isinstance(t, torch.Tensor) else torch.nan_to_num(t, **kw),
              [x.astype(np.float64)], backend=backend, grad="finite")
    for d in (F16, BF16):
        check(lambda t: t.nan_to_num(), [lm.core.dtype.to_storage(x, d)], dtypes=[d], backend=backend, grad="finite")
    check(lambda t: t.nan_to_num(), [np.array([1, -2], np.int32)], backend=backend)


def test_clone_masked_fill_addcmul_addcdiv(backend):
    x, y, z = rand((3, 4), seed=6), rand((3, 4), seed=7), rand((4,), seed=8, low=0.5, high=2.0)
    mask = rand((3, 4), BOOL, seed=9)
    row = rand((4,), BOOL, seed=10)
    check(lambda a: a.clone() * 2, [x], backend=backend)
    check(lambda a, m: a.masked_fill(m, -1.5), [x, mask], backend=backend)
    check(lambda a, m: a.masked_fill(m, 3), [x, row], backend=backend)
    check(lambda a, m: (a * 3).masked_fill(m, 7), [np.arange(12, dtype=np.int32).reshape(3, 4), row],
          backend=backend)
    check(lambda a, m, v: a.masked_fill(m, v), [x, mask, np.array(0.25, np.float32)], backend=backend)
    check(lambda a, b, c: a.addcmul(b, c, value=0.5), [x, y, z], backend=backend)
    check(lambda a, b, c: lm.addcmul(a, b, c) if not isinstance(a, torch.Tensor) else torch.addcmul(a, b, c),
          [x, y, z], backend=backend)
    check(lambda a, b, c: a.addcdiv(b, c, value=-2), [x, y, z], backend=backend)
    check(lambda a, b, c: a.addcdiv(b, c), [x, y, z], backend=backend)


def test_masked_fill_rejects_a_float_mask():
    g = lm.Graph()
    x = g.input("x", (3,))
    with pytest.raises(TypeError, match="masked_fill: mask must be a bool tensor, got float32"):
        x.masked_fill(x, 0.0)


NORM_ORDS = [2, 1, math.inf, -math.inf, 0, 3, 0.5, -1.5]


@pytest.mark.parametrize("ord_", NORM_ORDS, ids=str)
def test_vector_norm(ord_, backend):
    x = rand((3, 5), seed=11)
    for dim, keepdim in ((None, False), (1, False), ((0, 1), True), (0, True)):
        def lm_op(t, dim=dim, keepdim=keepdim):
            return lm.linalg.vector_norm(t, ord_, dim, keepdim)

        check(lm_op, [x], torch_op=lambda t, dim=dim, keepdim=keepdim: torch.linalg.vector_norm(t, ord_, dim, keepdim),
              backend=backend, grad_rtol=1e-4, grad_atol=1e-5)


def test_norm_method_and_zero_vector_gradient(backend):
    x = rand((2, 6), seed=12)
    check(lambda t: t.norm(), [x], backend=backend)
    check(lambda t: t.norm(1, 1), [x], backend=backend)
    check(lambda t: t.norm(p=2, dim=-1, keepdim=True), [x.astype(np.float64)], backend=backend)
    check(lambda t: t.norm("fro", (0, 1)), [x], backend=backend)
    zeros = np.zeros((2, 3), np.float32)
    check(lambda t: t.norm(dim=1), [zeros], backend=backend)  # torch's gradient at 0 is 0, not NaN
    check(lambda t: t.norm(dim=1, dtype=lm.float64 if not isinstance(t, torch.Tensor) else torch.float64), [x],
          backend=backend)


@pytest.mark.parametrize("op", ["var_mean", "std_mean"])
def test_var_mean_std_mean(op, backend):
    x = rand((3, 5), seed=13)
    cases = [
        lambda f, t: f(t),
        lambda f, t: f(t, 1),
        lambda f, t: f(t, 1, keepdim=True),
        lambda f, t: f(t, (0, 1), correction=0),
        lambda f, t: f(t, 0, False),  # (dim, unbiased)
        lambda f, t: f(t, 0, True, True),  # (dim, unbiased, keepdim)
        lambda f, t: f(t, False),  # (unbiased)
    ]
    for case in cases:
        check(lambda t, case=case: case(getattr(lm if not isinstance(t, torch.Tensor) else torch, op), t), [x],
              backend=backend)


def test_var_std_positional_unbiased_as_torch(backend):
    x = rand((4, 3), seed=14)
    check(lambda t: (t.var(False), t.var(0, False), t.var(1, True, True), t.std(0, False, True), t.std(True)),
          [x], backend=backend)
    check(lambda t: (t.var(dim=1, unbiased=False), t.std(1, correction=2)), [x], backend=backend)


def _ties(shape, seed):
    """Small integers as floats: plenty of ties."""
    return np.random.default_rng(seed).integers(-2, 3, shape).astype(np.float32)


@pytest.mark.parametrize("op", ["cummax", "cummin"])
def test_cummax_cummin(op, backend):
    for x in (rand((3, 6), seed=15), _ties((3, 6), 16)):
        for dim in (1, 0, -1):
            check(lambda t, dim=dim: getattr(t, op)(dim), [x], backend=backend)
    nan = np.array([[1.0, math.nan, 3.0, math.nan, -1.0], [2.0, 2.0, -math.inf, 5.0, 5.0]])
    check(lambda t: getattr(t, op)(1), [nan], backend=backend, grad=False)
    check(lambda t: getattr(torch if isinstance(t, torch.Tensor) else lm, op)(t, 0),
          [np.array([3, -1, 3, 7, 7, -5], np.int32)], backend=backend)
    check(lambda t: getattr(t, op)(0), [np.array(2.5, np.float32)], backend=backend)


def test_cummax_named_tuple():
    g = lm.Graph()
    x = g.input("x", (2, 3))
    r = x.cummax(1)
    assert r.values.shape == (2, 3) and r.indices.dtype is I32 and r[0] is r.values


def test_logcumsumexp(backend):
    check(lambda t: t.logcumsumexp(1), [rand((3, 6), seed=17, low=-30, high=30)], backend=backend)
    check(lambda t: t.logcumsumexp(0), [rand((5, 2), seed=18).astype(np.float64)], backend=backend)
    x = np.array([-math.inf, -math.inf, 1.0, 1000.0, -math.inf], np.float32)
    check(lambda t: t.logcumsumexp(0), [x], backend=backend, grad="finite")
    check(lambda t: lm.logcumsumexp(t, 0) if not isinstance(t, torch.Tensor) else torch.logcumsumexp(t, 0),
          [np.array(1.5, np.float32)], backend=backend)


@pytest.mark.parametrize("descending", [False, True])
def test_sort_argsort(descending, backend):
    for x in (rand((3, 7), seed=19), _ties((3, 7), 20)):
        for dim in (-1, 0):
            check(lambda t, dim=dim: t.sort(dim, descending), [x], backend=backend,
                  torch_op=lambda t, dim=dim: t.sort(dim=dim, descending=descending, stable=True))
            check(lambda t, dim=dim: t.argsort(dim, descending), [x], backend=backend,
                  torch_op=lambda t, dim=dim: torch.argsort(t, dim=dim, descending=descending, stable=True))
    nan = np.array([[3.0, math.nan, -math.inf, 1.0, math.nan, math.inf, -0.0, 0.0]])
    check(lambda t: t.sort(1, descending), [nan], backend=backend, grad=False,
          torch_op=lambda t: t.sort(dim=1, descending=descending, stable=True))
    ints = np.array([[3, -1, 3, 0, -1, 2]], np.int32)
    check(lambda t: lm.sort(t, descending=descending) if not isinstance(t, torch.Tensor)
          else torch.sort(t, descending=descending, stable=True), [ints], backend=backend)
    check(lambda t: t.sort(0, descending), [rand((5,), BOOL, seed=21)], backend=backend,
          torch_op=lambda t: t.sort(dim=0, descending=descending, stable=True))


@pytest.mark.parametrize("largest", [True, False])
def test_topk(largest, backend):
    x = rand((3, 8), seed=22)
    for k, dim in ((3, -1), (1, 1), (8, 1), (2, 0), (0, 1)):
        check(lambda t, k=k, dim=dim: t.topk(k, dim, largest), [x], backend=backend)
    check(lambda t: lm.topk(t, 2, largest=largest, sorted=False) if not isinstance(t, torch.Tensor)
          else torch.topk(t, 2, largest=largest, sorted=True), [x.astype(np.float64)], backend=backend)


def test_scans_and_sorts_over_symbolic_dims(backend):
    x = rand((3, 6), seed=37)
    sym = [("B", "N")]
    check(lambda t: (*t.sort(1, True), *t.topk(2, 1), *t.max(1), *t.cummin(1), t.logcumsumexp(1)), [x],
          backend=backend, shapes=sym)


def test_topk_k_out_of_range():
    g = lm.Graph()
    x = g.input("x", (3, 4))
    with pytest.raises(ValueError, match=r"topk: k = 5 is out of range for a dim of size 4"):
        x.topk(5)


def test_max_min_with_dim_return_values_and_indices(backend):
    for x in (rand((3, 5), seed=23), _ties((3, 5), 24)):
        for op in ("max", "min"):
            check(lambda t, op=op: getattr(t, op)(1), [x], backend=backend)
            check(lambda t, op=op: getattr(t, op)(0, keepdim=True), [x], backend=backend)
            check(lambda t, op=op: getattr(t, op)(dim=-1), [x], backend=backend)
            check(lambda t, op=op: getattr(lm if not isinstance(t, torch.Tensor) else torch, op)(t, 1), [x],
                  backend=backend)
            check(lambda t, op=op: getattr(t, op)(), [x], backend=backend)  # no dim: the value alone
    nan = np.array([[1.0, math.nan, 3.0, math.nan], [2.0, 5.0, 5.0, -1.0]], np.float32)
    check(lambda t: (*t.max(1), *t.min(1)), [nan], backend=backend, grad=False)
    check(lambda t: t.max(0), [np.array([4, 9, 9, -3], np.int32)], backend=backend)
    check(lambda t: t.max(0), [np.array(1.5, np.float32)], backend=backend)
    a, b = rand((3,), seed=25), rand((3,), seed=26)
    check(lambda s, t: (s.max(t), s.min(t)), [a, b], backend=backend)  # elementwise, as torch.max(a, b)


def test_max_with_dim_is_a_named_tuple_and_amax_stays_values():
    g = lm.Graph()
    x = g.input("x", (2, 3))
    r = x.max(1)
    assert r.values.shape == (2,) and r.indices.dtype is I32
    v, i = x.min(0)
    assert v.shape == (3,) and i.shape == (3,)
    assert x.amax(1).shape == (2,) and x.max().shape == ()
    with pytest.raises(TypeError, match=r"max: dim must be an int"):
        x.max((0, 1))


def test_dtype_arguments(backend):
    x = rand((3, 4), seed=27)
    T = {lm.float64: torch.float64, lm.float32: torch.float32, lm.int32: torch.int32}

    def dtype_of(t, d):
        return T[d] if isinstance(t, torch.Tensor) else d

    check(lambda t: t.softmax(1, dtype=dtype_of(t, F64)), [x], backend=backend)
    check(lambda t: t.log_softmax(-1, dtype=dtype_of(t, F64)), [x], backend=backend)
    check(lambda t: t.cumsum(1, dtype=dtype_of(t, F64)), [x], backend=backend)
    check(lambda t: t.sum(1, dtype=dtype_of(t, F64)), [x], backend=backend)
    check(lambda t: t.cumsum(0, dtype=dtype_of(t, F32)), [np.array([1, 2, 3], np.int32)], backend=backend)
    check(lambda t: lm.softmax(t, 0, F64) if not isinstance(t, torch.Tensor) else torch.softmax(t, 0, torch.float64),
          [x], backend=backend)


def test_dtype_methods(backend):
    x = rand((2, 3), seed=28, low=-3, high=3)
    check(lambda t: (t.long(), t.int(), t.float(), t.double(), t.bool()), [x], backend=backend)
    check(lambda t: (t.half(), t.bfloat16()), [x], backend=backend, grad=False)


def _int_operands(shape, seed):
    """Full-range int32 values, the edges included."""
    rng = np.random.default_rng(seed)
    a = rng.integers(-2 ** 31, 2 ** 31, shape, dtype=np.int64).astype(np.int32)
    a.flat[:4] = [0, -1, -2 ** 31, 2 ** 31 - 1]
    return a


def test_bitwise_on_int32(backend):
    a, b = _int_operands((4, 6), 29), _int_operands((6,), 30)
    check(lambda s, t: (s & t, s | t, s ^ t, ~s), [a, b], backend=backend)
    check(lambda s, t: (s.bitwise_and(t), s.bitwise_or(t), s.bitwise_xor(t), s.bitwise_not()), [a, b],
          backend=backend)
    check(lambda s: (s & 0xFF, 7 | s, s ^ -1, lm.bitwise_and(s, 12) if not isinstance(s, torch.Tensor)
                     else torch.bitwise_and(s, 12)), [a], backend=backend)
    p, q = rand((5,), BOOL, seed=31), rand((5,), BOOL, seed=32)
    check(lambda s, t: (s & t, s | t, s ^ t, ~s), [p, q], backend=backend)


def test_shifts_on_int32(backend):
    a = _int_operands((3, 5), 33)
    for k in (0, 1, 5, 16, 30, 31):
        check(lambda s, k=k: (s << k, s >> k), [a], backend=backend)
    s = np.random.default_rng(34).integers(0, 32, (3, 5)).astype(np.int32)
    check(lambda x, y: (x << y, x >> y, x.bitwise_left_shift(y), x.bitwise_right_shift(y)), [a, s], backend=backend)


def test_bitwise_rejects_floats():
    g = lm.Graph()
    x = g.input("x", (3,))
    with pytest.raises(TypeError, match="bitwise_left_shift: .*float32"):
        x << 1
    with pytest.raises(TypeError, match="and: .*float32"):
        x & x


def test_grad_allow_unused_through_a_comparison_gives_zeros():
    """b reaches the loss only through ``a < b``: torch's gradient is zeros (with allow_unused); the
    default stays the error naming the comparison."""
    g = lm.Graph()
    a, b = g.input("a", (4,)), g.input("b", (4,))
    loss = ((a < b).float() * a).sum()
    ga, gb = train.grad(loss, [a, b], allow_unused=True)
    av, bv = rand((4,), seed=35), rand((4,), seed=36)
    ga_v, gb_v = lm.compile([ga, gb], backend="reference")(a=av, b=bv)
    ta, tb = torch.tensor(av, requires_grad=True), torch.tensor(bv, requires_grad=True)
    ((ta < tb).float() * ta).sum().backward()
    np.testing.assert_array_equal(ga_v, ta.grad.numpy())
    assert tb.grad is None and not np.any(gb_v) and gb_v.shape == (4,)
    with pytest.raises(ValueError, match="only through LessThan"):
        train.grad(loss, [a, b])
