"""float32 (and float16/bfloat16) true division rounded once from a float64 quotient, as torch's
correctly rounded division: random quotients within half an ulp of torch's (``a * (1/b)`` in float32
was an ulp off for a quarter of them), divisors whose reciprocal leaves float32's normal range
(1e-40 / 1e-40 was inf, 3e38 / 3e38 0.99999994), Python-number divisors (a power of two multiplies
in float32), int operands, floor_divide / div(rounding_mode='floor') built on it; values and
gradients against torch."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
import torch
from parity import check

import luminal as lm

pytestmark = pytest.mark.usefixtures("one_torch_thread")

INF, NAN = math.inf, math.nan
F16, BF16, F32 = lm.float16, lm.bfloat16, lm.float32
HALF_ULP = 5e-8  # below one float32 ulp (2**-23 .. 2**-24 relative): an ulp off fails


def _rand_pair(n, seed, lo=-10.0, hi=10.0):
    rng = np.random.default_rng(seed)
    return rng.uniform(lo, hi, n).astype(np.float32), rng.uniform(lo, hi, n).astype(np.float32)


def test_random_quotients_are_torchs(backend):
    a, b = _rand_pair(20000, 1)
    got = check(lambda x, y: x / y, [a, b], backend=backend, rtol=HALF_ULP, atol=0, grad=False)[0]
    want = (torch.from_numpy(a) / torch.from_numpy(b)).numpy()
    assert np.count_nonzero(got != want) == 0  # correctly rounded both: the same float
    check(lambda x, y: x / y, [a[:64].reshape(8, 8), b[:64].reshape(8, 8)], backend=backend)  # gradients


def test_wide_magnitudes(backend):
    rng = np.random.default_rng(2)
    a = (rng.standard_normal(4000) * 10.0 ** rng.uniform(-30, 30, 4000)).astype(np.float32)
    b = (rng.standard_normal(4000) * 10.0 ** rng.uniform(-30, 30, 4000)).astype(np.float32)
    got = check(lambda x, y: torch.div(x, y) if isinstance(x, torch.Tensor) else lm.div(x, y), [a, b],
                backend=backend, rtol=HALF_ULP, atol=0, grad=False)[0]
    exact = np.array([float(Fraction(float(x)) / Fraction(float(y))) for x, y in zip(a, b)]).astype(np.float32)
    assert np.count_nonzero(got != exact) == 0


SPECIAL_A = np.array([1e-40, 3e-40, 1.0, 1e30, 3e38, 6.0, 1e-40, 1.0, INF, 0.0, 0.0, -0.0, 5.0, -5.0, 1.0, INF,
                      NAN, 3e38, -2.5, 7.0], np.float32)
SPECIAL_B = np.array([1e-40, 1e-40, 3e38, 3e38, 3e38, 3.0, 2.0, 1e-40, INF, 0.0, -3.0, 2.0, 0.0, 0.0, -0.0, 2.0,
                      1.0, 1e-38, INF, -INF], np.float32)


def test_special_values(backend):
    """Subnormal divisors and dividends, divisors near FLT_MAX, inf, NaN and signed zeros."""
    got = check(lambda x, y: x / y, [SPECIAL_A, SPECIAL_B], backend=backend, rtol=HALF_ULP, atol=0, grad="finite")[0]
    assert got[0] == 1.0 and got[4] == 1.0  # 1e-40 / 1e-40 was inf, 3e38 / 3e38 0.99999994
    want = (torch.from_numpy(SPECIAL_A) / torch.from_numpy(SPECIAL_B)).numpy()
    assert np.array_equal(np.signbit(got), np.signbit(want))


@pytest.mark.parametrize("divisor", [3.0, 0.1, 2.0, 0.5, 1024.0, 2.0 ** -130, 2.0 ** 127, 1e-40, 7])
def test_python_number_divisor(divisor, backend):
    """A power of two whose reciprocal is a normal float32 multiplies in float32 (exact); others
    (2**-130, whose reciprocal overflows float32) divide in float64. ``divisor / x`` is compared
    with torch's tensor division: torch's ``__rtruediv__`` is ``x.reciprocal() * divisor``, an ulp
    off for about a third of the quotients."""
    a = np.concatenate([_rand_pair(512, 3, -100, 100)[0], [1e-39, 3e38, -1e-45, 0.0]]).astype(np.float32)
    check(lambda x: x / divisor, [a], backend=backend, rtol=HALF_ULP, atol=0)
    check(lambda x: divisor / x, [a[:512]], torch_op=lambda t: torch.full_like(t, divisor) / t, backend=backend,
          rtol=HALF_ULP, atol=0)


def test_int_operands_give_float32(backend):
    a = np.arange(-60, 60, dtype=np.int32)
    b = np.concatenate([np.arange(1, 61), -np.arange(1, 61)]).astype(np.int32)
    check(lambda x, y: x / y, [a, b], backend=backend, rtol=HALF_ULP, atol=0)
    check(lambda x: x / 7, [a], backend=backend, rtol=HALF_ULP, atol=0)


@pytest.mark.parametrize("dtype", [F16, BF16], ids=lambda d: d.name)
def test_16bit_quotients(dtype, backend):
    """A correctly rounded float32 quotient rounds correctly again to 16 bits (24 >= 2*11 + 2)."""
    a, b = (lm.core.dtype.to_storage(v.astype(np.float64), dtype) for v in _rand_pair(8000, 4))
    got = check(lambda x, y: x / y, [a, b], dtypes=[dtype] * 2, backend=backend, grad=False)[0]
    td = {F16: torch.float16, BF16: torch.bfloat16}[dtype]
    want = (torch.from_numpy(a).to(td) / torch.from_numpy(b).to(td)).float().numpy()
    assert np.count_nonzero(got.astype(np.float32) != want) == 0
    check(lambda x: x / 3.7, [a[:256]], dtypes=[dtype], backend=backend)
    check(lambda x, y: x / y, [a[:64], b[:64]], dtypes=[dtype] * 2, backend=backend)


def test_floor_divide_and_floor_rounding_mode(backend):
    """floor_divide on float32 builds on the quotient: torch's values, subnormal operands included."""
    rng = np.random.default_rng(5)
    a = (rng.standard_normal(2000) * 10.0 ** rng.uniform(-3, 8, 2000)).astype(np.float32)
    b = (rng.standard_normal(2000) * 10.0 ** rng.uniform(-3, 3, 2000)).astype(np.float32)
    a = np.concatenate([a, np.array([1e-40, 3e-40, 1e-40, 1.0, 3e38, 7.0], np.float32)])
    b = np.concatenate([b, np.array([1e-40, 1e-40, 2.0, 1e-40, 3e38, 0.1], np.float32)])
    check(lambda x, y: x // y, [a, b], backend=backend, rtol=0, atol=0)
    check(lambda x, y: torch.div(x, y, rounding_mode="floor") if isinstance(x, torch.Tensor)
          else lm.div(x, y, rounding_mode="floor"), [a, b], backend=backend, rtol=0, atol=0)


def test_symbolic_and_broadcast(backend):
    a, b = _rand_pair(24, 6)
    check(lambda x, y: x / y, [a.reshape(4, 6), b[:6]], shapes=[("B", 6), (6,)], backend=backend,
          rtol=HALF_ULP, atol=0)
    check(lambda x, y: x / y, [a.reshape(4, 6), b[:4].reshape(4, 1)], backend=backend, rtol=HALF_ULP, atol=0,
          pre=lambda t: t.flip(0))
