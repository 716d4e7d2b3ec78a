"""An audit of the elementwise ops against torch 2.13 where integer and rounding semantics decide the
value: integer division, remainder and fmod signs, division by zero, bitwise ops and shifts at the
int32 extremes, wrapping, integer powers, ``round(decimals=k)``, 16-bit trunc/floor division by a
Python number, float32 ``pow``, ``sign`` of bool, clamp/min/max/nan_to_num per dtype, and gradients
at the kinks. The values at special points (overflow, ``INT_MIN / -1``) are written out, not taken
from torch (``torch.div(INT_MIN, -1, rounding_mode="trunc")`` kills the process with SIGFPE)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from parity import check

import luminal as lm

pytestmark = pytest.mark.usefixtures("one_torch_thread")

F16, BF16, F32, F64, I32, BOOL = lm.float16, lm.bfloat16, lm.float32, lm.float64, lm.int32, lm.bool
IMIN, IMAX = -2**31, 2**31 - 1
BACKENDS = ["reference", "cpu"]


def _ns(t):
    return torch if isinstance(t, torch.Tensor) else lm


def _run(op, arrays, dtypes=None, backend="reference"):
    """``op`` on graph inputs of the arrays' shapes and dtypes, compiled and run: its outputs."""
    dtypes = dtypes or [lm.core.dtype.as_dtype(a.dtype) for a in arrays]
    g = lm.Graph()
    xs = [g.input(f"x{i}", a.shape, dtype=d) for i, (a, d) in enumerate(zip(arrays, dtypes))]
    return lm.compile(op(*xs), backend=backend)(**{f"x{i}": a for i, a in enumerate(arrays)})


def _same(got, want):
    """Equal values, NaN matching NaN, zeros of the same sign."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    zero = want == 0
    assert np.array_equal(np.signbit(got[zero]), np.signbit(want[zero])), (got, want)


# integer division, remainder, fmod ----------------------------------------------------------------
_A = np.array([7, -7, 7, -7, 0, 5, -5, IMAX, IMIN, IMIN + 1, 123456789], np.int32)
_B = np.array([2, 2, -2, -2, 3, 7, -7, -1, 2, -1, -10], np.int32)


@pytest.mark.parametrize("name", ["true", "floor", "trunc", "remainder", "fmod"])
def test_int_division_family_is_torchs(name, backend):
    """Mixed signs and the int32 extremes: ``/`` gives float32, ``//`` and ``remainder`` follow the
    divisor's sign, ``trunc`` and ``fmod`` the dividend's."""
    ops = {"true": lambda a, b: a / b, "floor": lambda a, b: a // b,
           "trunc": lambda a, b: _ns(a).div(a, b, rounding_mode="trunc"),
           "remainder": lambda a, b: a % b, "fmod": lambda a, b: _ns(a).fmod(a, b)}
    check(ops[name], [_A, _B], backend=backend)


def test_int_min_by_minus_one_wraps(backend):
    """``INT_MIN / -1`` is 2**31, which wraps to INT_MIN in every rounding mode (torch's floor mode
    gives it; its trunc mode traps on x86 and ends the process), with remainder and fmod 0."""
    a, b = np.array([IMIN], np.int32), np.array([-1], np.int32)
    outs = _run(lambda x, y: (x // y, lm.div(x, y, rounding_mode="trunc"), x % y, lm.fmod(x, y)), [a, b],
                backend=backend)
    assert [int(o[0]) for o in outs] == [IMIN, IMIN, 0, 0]


@pytest.mark.parametrize("name", ["floor", "trunc", "remainder", "fmod"])
def test_int_division_by_zero_raises_not_crashes(name, backend):
    """torch raises for an integer divisor of 0 (``RuntimeError: ZeroDivisionError``); luminal raises
    ZeroDivisionError when the program runs, naming the op, and the process lives on."""
    ops = {"floor": lambda a, b: a // b, "trunc": lambda a, b: _ns(a).div(a, b, rounding_mode="trunc"),
           "remainder": lambda a, b: a % b, "fmod": lambda a, b: _ns(a).fmod(a, b)}
    with pytest.raises(ZeroDivisionError, match="division by zero"):
        _run(ops[name], [np.array([5, 6], np.int32), np.array([1, 0], np.int32)], backend=backend)
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        ops[name](torch.tensor([5, 6], dtype=torch.int32), torch.tensor([1, 0], dtype=torch.int32))
    got = _run(lambda a, b: a / b, [np.array([5, -6, 0], np.int32), np.zeros(3, np.int32)], backend=backend)
    _same(got, [math.inf, -math.inf, math.nan])  # true division is float: IEEE's values


def test_float_remainder_and_fmod_signs(backend):
    """remainder takes the divisor's sign, fmod the dividend's; infinite divisors; a zero dividend's
    sign is kept by both (C's fmod; torch's remainder only adds the divisor to a nonzero remainder)."""
    a = np.array([5.5, -5.5, 5.5, -5.5, 0.0, -0.0, 3.0, -3.0, 7.0, -7.0, 2.0], np.float32)
    b = np.array([2.0, 2.0, -2.0, -2.0, -3.0, 3.0, 3.0, -3.0, math.inf, math.inf, -math.inf], np.float32)
    rem, fm, fd = _run(lambda x, y: (x % y, lm.fmod(x, y), x // y), [a, b], backend=backend)
    _same(rem, [1.5, 0.5, -0.5, -1.5, 0.0, -0.0, 0.0, -0.0, 7.0, math.inf, -math.inf])
    _same(fm, [1.5, -1.5, 1.5, -1.5, 0.0, -0.0, 0.0, -0.0, 7.0, -7.0, 2.0])
    _same(fd, [2.0, -3.0, -3.0, 2.0, -0.0, -0.0, 1.0, 1.0, 0.0, -1.0, -1.0])
    check(lambda x, y: (x % y, _ns(x).fmod(x, y)), [a[:8], b[:8]], backend=backend)


@pytest.mark.parametrize("dtype", [F16, BF16], ids=lambda d: d.name)
def test_16bit_trunc_and_floor_division_by_a_number_divide_in_float32(dtype, backend):
    """torch reads a Python-number divisor of a float16/bfloat16 tensor in float32 for ``//`` and
    ``rounding_mode="trunc"`` (as for ``/``): ``bf16(35.75) // 0.3`` is 119, not 118 (35.75 divided by
    bfloat16's 0.30078125). A number dividend is rounded to the dtype, as torch."""
    rng = np.random.default_rng(0)
    x = lm.core.dtype.to_storage(rng.uniform(-300, 300, 400), dtype)
    for s in (0.3, 0.1, -0.7, 7.1):
        outs = _run(lambda t, s=s: (t // s, lm.div(t, s, rounding_mode="trunc"), 10.3 // t), [x], [dtype],
                    backend=backend)
        t = torch.from_numpy(np.asarray(x, np.float32)).to({F16: torch.float16, BF16: torch.bfloat16}[dtype])
        for got, want in zip(outs, (t // s, torch.div(t, s, rounding_mode="trunc"), 10.3 // t)):
            _same(np.asarray(got, np.float32), want.float().numpy())


# bitwise, shifts, wrapping -------------------------------------------------------------------------
def test_bitwise_and_wrapping_at_the_extremes(backend):
    a = np.array([0, 1, -1, 5, -6, IMIN, IMAX, 123456789, -987654321], np.int32)
    b = np.array([3, -1, 7, -5, 12, -1, IMIN, 55555, 31], np.int32)
    check(lambda x, y: (x & y, x | y, x ^ y, ~x, x + y, x - y, x * y, -x, x.abs(), x * 100000),
          [a, b], backend=backend)


def test_shifts_by_large_and_negative_amounts(backend):
    """torch shifts every bit out for amounts outside [0, 31]: ``<<`` gives 0, ``>>`` the sign."""
    a = np.array([1, -1, IMIN, IMAX, 12345, -12345, 3, -3], np.int32)
    s = np.array([31, 32, 1, 40, -1, -5, 0, 33], np.int32)
    check(lambda x, y: (x << y, x >> y, 1 << y, -100 >> y), [a, s], backend=backend)


# powers --------------------------------------------------------------------------------------------
def test_int_tensor_to_an_integral_float_power_is_exact(backend):
    """An int (or bool) base to a float power is float32, as torch; ``x ** 2.0`` multiplies exactly
    (10 ** 2.0 was 99.99999 and 46341 ** 2.0 four ulps off through exp2/log2 in float32)."""
    x = np.array([-3, 0, 1, 5, 10, 11, 46341, -7], np.int32)
    sq = _run(lambda t: t ** 2.0, [x], backend=backend)
    assert sq.dtype == np.float32
    _same(sq, np.float32(x.astype(np.float64) ** 2))
    check(lambda t: (t ** 2.0, t ** 3.0, t ** 0.5, t ** -1.0), [x], backend=backend)  # (** 3.0: x * x * x)
    check(lambda t: t ** 2.0, [np.array([True, False])], backend=backend)


def test_float32_pow_by_a_tensor_is_within_an_ulp(backend):
    """float32 ``a ** b`` with a tensor exponent computes in float64 and rounds once: through
    ``exp2(b * log2(a))`` in float32 it was up to 35 ulps from torch (and ``5 ** 3.0`` 124.99998)."""
    rng = np.random.default_rng(1)
    a = rng.uniform(0.1, 20, 600).astype(np.float32)
    b = rng.uniform(-10, 10, 600).astype(np.float32)
    check(lambda x, y: x ** y, [a, b], backend=backend, rtol=2.5e-7, atol=0)
    base = np.arange(1, 12, dtype=np.float32)
    got = _run(lambda x, y: x ** y, [base, np.full(11, 3.0, np.float32)], backend=backend)
    _same(got, base.astype(np.float64) ** 3)


def test_int_pow_to_a_negative_number_is_refused_as_torch():
    g = lm.Graph()
    x = g.input("x", (3,), dtype=I32)
    with pytest.raises(ValueError, match="negative powers"):
        x ** -1
    with pytest.raises(RuntimeError, match="negative integer powers"):
        torch.tensor([1, 2]) ** -1


# rounding ------------------------------------------------------------------------------------------
_ROUND_X = np.concatenate([np.random.default_rng(2).uniform(-10, 10, 300),
                           np.random.default_rng(3).integers(-10**6, 10**6, 300) / 1000,
                           [0.5, 1.5, 2.5, -0.5, -2.5, 0.125, 2.675, -2.675, 1234.5678, 15.0, -35.0, 0.0, -0.0,
                            -0.001, 250.0, 350.0, math.inf, -math.inf, math.nan]])


@pytest.mark.parametrize("dtype,places", [(F32, (1, 2, 3, -1, -2, -3)), (F64, (1, 2, 3, 5, 8, 15, -1, -2, -3, -6)),
                                          (F16, (1, 2, -1)), (BF16, (1, -1))], ids=["f32", "f64", "f16", "bf16"])
def test_round_decimals_is_torchs(dtype, places, backend):
    """torch's ``round(x * 10**d) / 10**d`` and ``round(x / 10**-d) * 10**-d`` with correctly rounded
    divisions: negative ``decimals`` multiplied by ``10**d`` (``round(1234.5677, -3)`` was 999.99994
    in float32) and float64 divided by ``n * (1/p)`` (``round(1.5, 5)`` was 1.5000000000000002)."""
    x = lm.core.dtype.to_storage(_ROUND_X, dtype)
    outs = _run(lambda t: tuple(lm.round(t, decimals=k) for k in places), [x], [dtype], backend=backend)
    t = torch.from_numpy(np.asarray(x, np.float64)).to(
        {F16: torch.float16, BF16: torch.bfloat16, F32: torch.float32, F64: torch.float64}[dtype])
    for k, got in zip(places, outs):
        _same(np.asarray(got, np.float64), torch.round(t, decimals=k).double().numpy())


def test_round_decimals_exact_values(backend):
    x32 = np.array([1234.5677, 1e30, -0.3], np.float32)
    x64 = np.array([1.5, 0.3, -2.675, 1e-3], np.float64)
    r32, r64 = _run(lambda a, b: (lm.round(a, decimals=-3), lm.round(b, decimals=5)), [x32, x64], backend=backend)
    _same(r32, np.array([1000.0, 1e30, -0.0], np.float32))
    _same(r64, [1.5, 0.3, -2.675, 1e-3])


def test_round_decimals_where_torch_overflows_gives_the_defined_value(backend):
    """Where ``x * 10**d`` overflows, or ``10**d`` is no float32, torch gives inf or NaN; the rounded
    value is ``x`` itself (its digits end well before the d-th place), or a zero of ``x``'s sign for
    ``d`` far below 0."""
    x = np.array([1e9, 10.0, -7.25, 0.0, -0.0, 3e38, math.inf, -math.inf], np.float32)
    outs = _run(lambda t: (lm.round(t, decimals=30), lm.round(t, decimals=38), lm.round(t, decimals=40),
                           lm.round(t, decimals=-40)), [x], backend=backend)
    for got in outs[:3]:
        _same(got, x)
    _same(outs[3], [0.0, 0.0, -0.0, 0.0, -0.0, 0.0, math.inf, -math.inf])
    tiny = np.array([1e-40, -3e-41, 2.5e-39], np.float32)  # (float32 above 38 places computes in float64)
    _same(_run(lambda t: lm.round(t, decimals=39), [tiny], backend=backend), np.array([0.0, -0.0, 3e-39], np.float32))
    x64 = np.array([1.5, -2.0e300, 1e-20], np.float64)
    big, small = _run(lambda t: (lm.round(t, decimals=400), lm.round(t, decimals=-400)), [x64], backend=backend)
    _same(big, x64)
    _same(small, [0.0, -0.0, 0.0])


def test_round_decimals_arguments():
    g = lm.Graph()
    x, i = g.input("x", (3,)), g.input("i", (3,), dtype=I32)
    for bad in (1.5, True):
        with pytest.raises(TypeError, match="decimals must be an int"):
            lm.round(x, decimals=bad)
    with pytest.raises(ValueError, match="decimals=-2 is not defined for int32"):
        lm.round(i, decimals=-2)
    assert lm.round(i, decimals=2).dtype is I32


def test_rounding_family_on_negatives_and_signed_zeros(backend):
    x = np.array([-0.0, 0.0, -0.5, -1.5, -2.5, 0.5, 2.5, -0.3, -3.7, 3.7, -1e-30, 8388609.0], np.float32)
    check(lambda t: (t.round(), t.trunc(), t.floor(), t.ceil(), t.frac(), t.sign(), t.sgn(), t.round(decimals=1)),
          [x], backend=backend)
    r, tr, fl, ce = _run(lambda t: (t.round(), t.trunc(), t.floor(), t.ceil()), [x], backend=backend)
    _same(r, np.array([-0.0, 0.0, -0.0, -2.0, -2.0, 0.0, 2.0, -0.0, -4.0, 4.0, -0.0, 8388609.0], np.float32))
    _same(ce, np.array([-0.0, 0.0, -0.0, -1.0, -2.0, 1.0, 3.0, -0.0, -3.0, 4.0, -0.0, 8388609.0], np.float32))


def test_sign_of_bool_is_bool(backend):
    """torch.sign and torch.sgn of a bool tensor are that tensor (they were refused)."""
    check(lambda t: (t.sign(), t.sgn()), [np.array([True, False, True])], backend=backend)


# promotion, clamp, min/max, nan_to_num ------------------------------------------------------------
@pytest.mark.parametrize("pair", [(I32, 2.5), (BOOL, 2.5), (I32, True), (F16, 2**20), (BF16, 1e-3)],
                         ids=lambda p: f"{p[0].name}-{p[1]!r}")
def test_promotion_with_python_numbers(pair, backend):
    d, v = pair
    x = lm.core.dtype.to_storage(np.array([1.0, 0.0, 3.0]), d) if d.is_float else np.array([1, 0, 3]).astype(d.np)
    check(lambda t: (t + v, t * v), [x], dtypes=[d], backend=backend)


@pytest.mark.parametrize("da,db", [(F16, F64), (BF16, F32), (I32, F16), (BOOL, BF16), (I32, BOOL)],
                         ids=lambda d: d.name)
def test_promotion_with_0d_tensors(da, db, backend):
    """A 0-d tensor of a higher kind decides the result dtype; of the same kind it does not."""
    x = lm.core.dtype.to_storage(np.array([1.5, -2.0]), da) if da.is_float else np.array([1, 0]).astype(da.np)
    z = lm.core.dtype.to_storage(np.array(3.0), db) if db.is_float else np.array(1).astype(db.np)
    check(lambda a, b: (a + b, a * b, _ns(a).maximum(a, b)), [x, z], dtypes=[da, db], backend=backend)


def test_clamp_int_with_float_bounds(backend):
    """An int tensor clamped by float bounds is float32, as torch; int bounds keep int32."""
    x = np.array([-5, -1, 0, 1, 2, 3, 7], np.int32)
    check(lambda t: (t.clamp(-1.5, 2.5), t.clamp(min=0.5), t.clamp(max=2.5), t.clamp(-1, 2), t.clamp(2, 1),
                     t.clip(-1.5, 2.5)), [x], backend=backend)


def test_minimum_maximum_fmin_fmax_with_nan(backend):
    a = np.array([math.nan, 1.0, math.nan, math.inf, -math.inf, 2.0], np.float32)
    b = np.array([1.0, math.nan, math.nan, math.nan, 5.0, -3.0], np.float32)
    check(lambda x, y: (_ns(x).minimum(x, y), _ns(x).maximum(x, y), _ns(x).fmin(x, y), _ns(x).fmax(x, y)),
          [a, b], backend=backend, grad="finite")


@pytest.mark.parametrize("dtype", [F16, BF16, F32, F64], ids=lambda d: d.name)
def test_nan_to_num_defaults_per_dtype(dtype, backend):
    """Defaults are the dtype's largest finite values (65504 in float16, 3.3895e38 in bfloat16)."""
    x = lm.core.dtype.to_storage(np.array([math.nan, math.inf, -math.inf, 1.0, -0.0]), dtype)
    big = {F16: 65504.0, BF16: 3.3895313892515355e38, F32: float(np.finfo(np.float32).max),
           F64: float(np.finfo(np.float64).max)}[dtype]
    got = _run(lambda t: t.nan_to_num(), [x], [dtype], backend=backend)
    _same(np.asarray(got, np.float64), [0.0, big, -big, 1.0, -0.0])
    check(lambda t: (t.nan_to_num(), t.nan_to_num(nan=1.5, posinf=100.0, neginf=-100.0)), [x], dtypes=[dtype],
          backend=backend)


# two-operand float math and gradients at the kinks ---------------------------------------------------
def test_float_binary_math_and_isclose(backend):
    a = np.array([1.0, -1.0, 0.0, -0.0, 2.0, 3.0, -4.0, 1e-3], np.float32)
    b = np.array([-0.5, 0.5, -1.0, 1.0, -2.0, 4.0, 3.0, 1e-3], np.float32)
    check(lambda x, y: (_ns(x).copysign(x, y), _ns(x).hypot(x, y), _ns(x).logaddexp(x, y),
                        _ns(x).logaddexp2(x, y)), [a, b], backend=backend)
    check(lambda x, y: _ns(x).float_power(x.abs() + 0.5, y), [a, b], backend=backend)
    check(lambda x, y: (_ns(x).isclose(x, y, rtol=0.5, atol=0.1), _ns(x).isclose(x, x)), [a, b], backend=backend)
    i = np.array([-5, 0, 3, 7], np.int32)
    check(lambda x, y: (_ns(x).copysign(x, y), _ns(x).float_power(x, 2), _ns(x).isclose(x, y, atol=2)),
          [i, i[::-1].copy()], backend=backend)


def test_gradients_at_the_kinks_are_torchs(backend):
    """Ties and zeros: abs'(0) = 0, maximum/minimum split a tie 1/2 each, fmax/fmin give it to
    ``input``, clamp's bounds are inside (gradient 1), logaddexp's tie 1/2 each, rounding and sign 0,
    frac 1, remainder's and fmod's divisor ``-floor(a/b)`` and ``-trunc(a/b)``, copysign's ``+-1`` (0 at
    a zero magnitude)."""
    a = np.array([0.0, -0.0, 1.0, -1.0, 2.0, 2.0, -3.5, 0.5, 3.0, -2.0], np.float32)
    b = np.array([0.0, 0.0, 1.0, -1.0, 2.0, -2.0, 2.0, -0.5, -3.0, 1.0], np.float32)
    check(lambda x, y: (x.abs(), _ns(x).maximum(x, y), _ns(x).minimum(x, y), _ns(x).fmax(x, y), _ns(x).fmin(x, y),
                        x.clamp(-1.0, 2.0), _ns(x).logaddexp(x, y), x.round(), x.trunc(), x.frac(), x.sign(),
                        _ns(x).copysign(x, y), x ** 2.0), [a, b], backend=backend)
    check(lambda x, y: (x % y, _ns(x).fmod(x, y), x / y, _ns(x).hypot(x, y), (x.abs() + 0.5) ** y), [a[2:], b[2:]],
          backend=backend)


# ldexp, frexp, nextafter, clip (torch names luminal lacked) ---------------------------------------------
_TD = {F16: torch.float16, BF16: torch.bfloat16, F32: torch.float32, F64: torch.float64}


@pytest.mark.parametrize("dtype", [F16, BF16, F32, F64], ids=lambda d: d.name)
def test_ldexp_is_torchs(dtype, backend):
    x = lm.core.dtype.to_storage(np.array([1.5, -3.0, 0.0, -0.0, 1e-3, 0.7, math.inf, 2.5, -1.25]), dtype)
    n = np.array([3, -2, 5, 100, 20, -130, -4, 0, 1000], np.int32)
    check(lambda a, b: _ns(a).ldexp(a, b), [x, n], dtypes=[dtype, I32], backend=backend, grad=False)
    check(lambda a, b: a.ldexp(b), [x[:2], lm.core.dtype.to_storage(np.array([2.0, -1.5]), dtype)],
          dtypes=[dtype, dtype], backend=backend)  # (a float exponent: the gradient by it too)


def test_ldexp_gradient_is_two_to_the_power(backend):
    """d/dx ``x * 2**n`` is ``2**n`` (torch's is 0 for a negative int ``n``: it differentiates through an
    integer ``2**n``)."""
    g = lm.Graph()
    x, n = g.input("x", (4,)), g.input("n", (4,), dtype=I32)
    dx = lm.train.grad(lm.ldexp(x, n).sum(), x)
    got = lm.compile(dx, backend=backend)(x=np.array([1.5, -3.0, 0.7, 2.0], np.float32),
                                          n=np.array([3, -2, -130, 0], np.int32))
    _same(got, np.array([8.0, 0.25, 2.0**-130, 1.0], np.float32))


def test_ldexp_has_no_overflow_or_underflow_before_the_result(backend):
    """``input * 2**other`` rounded once: 2**-160 is 0 in float32, but ``ldexp(2**100, -160)`` is 2**-60."""
    x32 = np.array([2.0**100, 1.0, 3.0, 1e-3, 3.0], np.float32)
    n32 = np.array([-160, 128, -150, 20, -149], np.int32)
    x64 = np.array([2.0**-1074, 2.0**1023, 3.0, 1.0], np.float64)
    n64 = np.array([2000, -2000, 2.0, -1074], np.int32)
    r32, r64, ri = _run(lambda a, b, c, d: (lm.ldexp(a, b), lm.ldexp(c, d), lm.ldexp(b, b)), [x32, n32, x64, n64],
                        backend=backend)
    # (3 * 2**-150 is 1.5 of the smallest subnormal: rounded to even, 2 of them)
    _same(r32, np.array([2.0**-60, math.inf, 2.0**-148, 1e-3 * 2.0**20, 3 * 2.0**-149], np.float32))
    _same(r64, [2.0**926, 2.0**-977, 12.0, 2.0**-1074])
    assert ri.dtype == np.float32  # (int operands give float32, as torch)


@pytest.mark.parametrize("dtype", [F16, BF16, F32, F64], ids=lambda d: d.name)
def test_frexp_is_torchs(dtype, backend):
    """``input = mantissa * 2**exponent`` with ``|mantissa|`` in [0.5, 1); zeros, infinities and NaN give
    themselves and exponent 0; subnormals included (float32 ``1e-45`` is ``0.5 * 2**-148``)."""
    vals = [0.0, -0.0, 1.0, -3.0, 0.75, 1e-3, 6e-8, 1e-45, 1e-310, 65504.0, 3e38, math.inf, -math.inf, math.nan]
    x = lm.core.dtype.to_storage(np.array(vals), dtype)
    m, e = _run(lambda t: lm.frexp(t), [x], [dtype], backend=backend)
    tm, te = torch.frexp(torch.from_numpy(np.asarray(x, np.float64)).to(_TD[dtype]))
    _same(np.asarray(m, np.float64), tm.double().numpy())
    np.testing.assert_array_equal(e, te.numpy())
    assert e.dtype == np.int32
    check(lambda t: tuple(t.frexp()), [x[:11]], dtypes=[dtype], backend=backend)  # (the mantissa's gradient)


def test_frexp_refuses_integers():
    g = lm.Graph()
    with pytest.raises(TypeError, match="frexp: only supports float tensors"):
        lm.frexp(g.input("i", (2,), dtype=I32))


@pytest.mark.parametrize("dtype", [F16, BF16, F32, F64], ids=lambda d: d.name)
def test_nextafter_is_torchs(dtype, backend):
    """Towards larger and smaller values, from and to zero (the smallest subnormal), at powers of two
    (half the step towards zero), from infinities (the largest finite value), equal operands (the second;
    its gradient by input 0, as torch's)."""
    vals = [0.0, -0.0, 1.0, -1.0, 2.0, 0.5, -7.25, 1e-3, math.inf, -math.inf, math.nan, 65504.0, 6e-8, 1e-40,
            3e38, 1e-310, 2.0**-1022, -2.0**-126, 2.0**-14]
    x = lm.core.dtype.to_storage(np.array(vals), dtype)
    tx = torch.from_numpy(np.asarray(x, np.float64)).to(_TD[dtype])
    targets = [math.inf, -math.inf, 0.0, -0.0, math.nan]
    ys = [lm.core.dtype.to_storage(np.full(len(vals), v), dtype) for v in targets] + [x]
    outs = _run(lambda a, *bs: tuple(lm.nextafter(a, b) for b in bs), [x, *ys], [dtype] * 7, backend=backend)
    for got, y in zip(outs, ys):
        want = torch.nextafter(tx, torch.from_numpy(np.asarray(y, np.float64)).to(_TD[dtype]))
        _same(np.asarray(got, np.float64), want.double().numpy())
    rng = np.random.default_rng(0)
    r = lm.core.dtype.to_storage(rng.standard_normal(300) * 10.0 ** rng.uniform(-30, 30, 300), dtype)
    check(lambda a, b: _ns(a).nextafter(a, b), [r, r[::-1].copy()], dtypes=[dtype, dtype], backend=backend,
          rtol=0, atol=0)
    check(lambda a, b: _ns(a).nextafter(a, b), [r[:6], r[6:18].reshape(2, 1, 6)], dtypes=[dtype, dtype],
          backend=backend, rtol=0, atol=0)  # (broadcast: the gradient by input sums over the broadcast)


def test_nextafter_exact_values(backend):
    x = np.array([1.0, 1.0, 0.0, 0.0, -0.0, 2.0, math.inf], np.float32)
    y = np.array([2.0, 0.0, 1.0, -0.0, 1.0, 0.0, 0.0], np.float32)
    got = _run(lambda a, b: lm.nextafter(a, b), [x, y], backend=backend)
    f32 = np.finfo(np.float32)
    _same(got, np.array([1 + 2.0**-23, 1 - 2.0**-24, 2.0**-149, -0.0, 2.0**-149, 2 - 2.0**-23, f32.max], np.float32))


def test_clip_is_clamp(backend):
    x = np.array([-3.0, -0.5, 0.0, 0.7, 4.0], np.float32)
    check(lambda t: (_ns(t).clip(t, -1.0, 1.0), _ns(t).clip(t, min=0.0), t.clip(max=0.5)), [x], backend=backend)
