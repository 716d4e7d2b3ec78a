"""Parity with torch for logaddexp, hypot, copysign, fmax/fmin, isclose/allclose and deg2rad/rad2deg
(``luminal/frontend/ops/pointwise.py``): values over wide ranges and at the special values (NaN, infinities,
signed zeros), dtypes, and gradients."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from parity import check, rand

import luminal as lm

pytestmark = pytest.mark.usefixtures("one_torch_thread")

F16, BF16, F32, F64, I32, BOOL = lm.float16, lm.bfloat16, lm.float32, lm.float64, lm.int32, lm.bool
SPECIAL = [0.0, -0.0, 1.0, -2.5, math.inf, -math.inf, math.nan, 1e-30, -7e20]


def _ns(t):
    return torch if isinstance(t, torch.Tensor) else lm


def _num(t, v):
    """The number ``v`` as an operand: a number for luminal, a 0-d tensor for torch (which wants one)."""
    return torch.tensor(v) if isinstance(t, torch.Tensor) else v


def _pairs(values, dtype=np.float64):
    """Every pair of ``values``, as two flat arrays."""
    a, b = np.meshgrid(np.array(values), np.array(values))
    return a.ravel().astype(dtype), b.ravel().astype(dtype)


def _signs_match(got, want):
    zeros = want == 0
    assert np.array_equal(np.signbit(got[zeros]), np.signbit(want[zeros])), (got, want)


def _wide(shape, seed, lo=-30, hi=30):
    rng = np.random.default_rng(seed)
    return (rng.uniform(lo, hi, shape)).astype(np.float32)


@pytest.mark.parametrize("name", ["logaddexp", "hypot"])
def test_binary_float_math(name, backend):
    x, y = _wide((4, 5), 0), _wide((5,), 1)
    check(lambda a, b: _ns(a).__dict__[name](a, b), [x, y], backend=backend)
    check(lambda a, b: getattr(a, name)(b), [x.astype(np.float64), y.astype(np.float64)], backend=backend)
    check(lambda a, b: getattr(a, name)(b), [x[0], y], backend=backend, pre=lambda t: t.flip(0))
    for d in (F16, BF16):
        check(lambda a, b: getattr(a, name)(b), [lm.core.dtype.to_storage(v / 4, d) for v in (x, y)],
              dtypes=[d, d], backend=backend)
    check(lambda a: getattr(a, name)(_num(a, 2.5)), [x], backend=backend)  # a number operand
    check(lambda a, b: getattr(a, name)(b), [x, np.array([1, -3, 0, 2, 5], np.int32)], backend=backend)  # promoted


def test_logaddexp_has_no_overflow_and_torch_gradients(backend):
    big = np.array([-1e30, -200.0, -100.0, 0.0, 88.0, 100.0, 1e30, 3e38], np.float32)
    a, b = np.meshgrid(big, big)
    check(lambda x, y: x.logaddexp(y), [a.ravel(), b.ravel()], backend=backend)
    check(lambda x, y: x.logaddexp(y), [a.ravel().astype(np.float64) * 1e8, b.ravel().astype(np.float64)],
          backend=backend)
    ties = np.array([-3.0, 0.0, 5.0], np.float32)
    check(lambda x, y: x.logaddexp(y), [ties, ties.copy()], backend=backend)  # gradient 1/2 each


def test_logaddexp_special_values(backend):
    a, b = _pairs(SPECIAL)
    check(lambda x, y: x.logaddexp(y), [a, b], backend=backend, grad="finite")


def test_hypot_range_and_special_values(backend):
    for d, lo, hi in [(np.float32, -40, 38), (np.float64, -300, 300)]:
        rng = np.random.default_rng(2)
        a = (10.0 ** rng.uniform(lo, hi, 32) * rng.choice([-1, 1], 32)).astype(d)
        b = (10.0 ** rng.uniform(lo, hi, 32) * rng.choice([-1, 1], 32)).astype(d)
        # squares of these overflow or underflow in the input's own dtype
        check(lambda x, y: x.hypot(y), [a, b], backend=backend, rtol=2e-7 if d is np.float32 else 1e-15, atol=0)
    a, b = _pairs(SPECIAL)
    check(lambda x, y: x.hypot(y), [a, b], backend=backend, grad="finite")  # inf beside NaN is inf
    check(lambda x, y: x.hypot(y), [np.zeros(3, np.float32), np.array([0.0, -0.0, 2.0], np.float32)],
          backend=backend)  # the gradient at the origin is NaN, as torch's


def test_logaddexp_hypot_need_floats():
    g = lm.Graph()
    i = g.input("i", (3,), dtype=I32)
    for f in (lm.logaddexp, lm.hypot):
        with pytest.raises(TypeError, match=rf"^{f.__name__}: needs float tensors, got int32"):
            f(i, i)


def test_copysign(backend):
    a, b = _pairs([0.0, -0.0, 1.5, -2.0, math.inf, -math.inf, math.nan])
    b = np.where(np.isnan(b), 3.0, b)
    out = check(lambda x, y: x.copysign(y), [a, b], backend=backend, grad="finite")[0]
    _signs_match(out, np.copysign(a, b))
    c = np.array([[math.nan], [-0.0]], np.float32)  # a positive NaN ``other`` counts as positive
    check(lambda x, y: _ns(x).copysign(x, y), [rand((2, 3)), c], backend=backend)
    check(lambda x, y: x.copysign(y), [rand((3, 4), seed=2), np.array([0.0, -0.0, 1.0, -1.0], np.float32)],
          backend=backend)
    check(lambda x: x.copysign(_num(x, -1.0)), [np.array([0.0, 2.0, -3.0], np.float32)], backend=backend)  # grad 0 at 0
    check(lambda x, y: x.copysign(y), [np.array([1, -2, 0], np.int32), np.array([-1, 1, -1], np.int32)],
          backend=backend)  # float32, as torch
    check(lambda x, y: x.copysign(y), [rand((3,), F16), rand((3,), F16, seed=1)], backend=backend)


@pytest.mark.parametrize("name", ["fmax", "fmin"])
def test_fmax_fmin(name, backend):
    a, b = _pairs([0.0, -0.0, 1.0, -2.0, math.inf, -math.inf, math.nan])
    out = check(lambda x, y: getattr(x, name)(y), [a, b], backend=backend, grad="finite")[0]
    _signs_match(out, getattr(torch, name)(torch.from_numpy(a), torch.from_numpy(b)).numpy())
    x = np.array([1.0, 2.0, 3.0, 3.0, math.nan], np.float32)
    y = np.array([1.0, 5.0, -1.0, 3.0, 4.0], np.float32)  # ties: value and gradient to input
    check(lambda p, q: _ns(p).__dict__[name](p, q), [x, y], backend=backend)
    check(lambda p, q: getattr(p, name)(q), [rand((3, 1), seed=3), rand((4,), seed=4)], backend=backend)
    check(lambda p, q: getattr(p, name)(q), [rand((5,), I32, low=-3, high=3), rand((5,), I32, seed=1)],
          backend=backend)
    check(lambda p, q: getattr(p, name)(q), [rand((5,), BOOL), rand((5,), BOOL, seed=1)], backend=backend)
    check(lambda p, q: getattr(p, name)(q), [rand((4,), BF16), rand((4,), BF16, seed=5)], backend=backend)


ISCLOSE_KW = [{}, {"rtol": 0.1}, {"atol": 0.5}, {"rtol": 0, "atol": 0}, {"equal_nan": True},
              {"rtol": 1e-3, "atol": 1e-3, "equal_nan": True}]


@pytest.mark.parametrize("kw", ISCLOSE_KW, ids=[str(k) for k in ISCLOSE_KW])
def test_isclose_allclose(kw, backend):
    base = np.array([1.0, 100.0, -3.0, 0.0, math.inf, -math.inf, math.nan, 1e-9, 2.0, math.inf], np.float32)
    other = np.array([1.05, 100.2, -3.0, 4e-9, math.inf, math.inf, math.nan, 0.0, 2.4, math.nan], np.float32)
    check(lambda a, b: _ns(a).isclose(a, b, **kw), [base, other], backend=backend)
    check(lambda a, b: a.isclose(b, **kw), [base.astype(np.float64), other.astype(np.float64)], backend=backend)
    check(lambda a, b: _ns(a).allclose(a, b, **kw), [base, other], backend=backend)
    check(lambda a, b: a.allclose(b, **kw), [base[:4], base[:4] * (1 + 1e-6)], backend=backend)
    ints = [np.array([0, 5, -7, 100], np.int32), np.array([0, 6, -7, 91], np.int32)]
    check(lambda a, b: a.isclose(b, **{k: v for k, v in kw.items() if k != "equal_nan"}), ints, backend=backend)
    check(lambda a, b: a.isclose(b), [rand((4,), BOOL), rand((4,), BOOL, seed=1)], backend=backend)
    check(lambda a, b: a.isclose(b, **kw), [rand((2, 3), F16), rand((3,), F16, seed=1) / 1000],
          backend=backend)


def test_isclose_errors_and_scalars(backend):
    check(lambda a: a.isclose(_num(a, 1.0), rtol=0.3),
          [np.array([0.8, 1.2, 1.4], np.float32)], backend=backend)
    g = lm.Graph()
    x, y = g.input("x", (3,)), g.input("y", (3,), dtype=F64)
    with pytest.raises(TypeError, match="^isclose: input and other must have the same dtype, got float32 and float64"):
        lm.isclose(x, y)
    with pytest.raises(ValueError, match="^allclose: isclose: rtol must be >= 0, got -1"):
        lm.allclose(x, x, rtol=-1)
    with pytest.raises(TypeError, match="^isclose: atol must be a number, got str"):
        x.isclose(x, atol="0")
    assert x.allclose(x).shape == () and x.allclose(x).dtype is BOOL


def test_deg2rad_rad2deg(backend):
    for name in ("deg2rad", "rad2deg"):
        check(lambda t: _ns(t).__dict__[name](t), [rand((3, 4), low=-720, high=720)], backend=backend)
        check(lambda t: getattr(t, name)(), [rand((5,), F64, low=-10, high=10)], backend=backend)
        check(lambda t: getattr(t, name)(), [rand((5,), F16, low=-100, high=100)], backend=backend)
        check(lambda t: getattr(t, name)(), [np.array([0, 90, -180, 360], np.int32)], backend=backend)
        check(lambda t: getattr(t, name)(), [np.array([-0.0, math.inf, math.nan], np.float32)], backend=backend)
