"""float16/bfloat16 ``pow`` against torch within one unit in the last place.

torch reads a Python number raised with (or raising) a 16-bit tensor in that tensor's dtype, then
computes in float32 and rounds once: ``x ** 2.7`` on float16 is ``x ** 2.69921875``, and luminal's
``x ** 2.7`` in float32 was up to 5 ulps (bfloat16: 6) from it; ``x ** 2.0001`` is ``x ** 2`` there
(finite for a negative base, where luminal gave NaN) and ``x ** 4097`` is ``x ** 4096``. A 16-bit
tensor raised to a 16-bit tensor is computed in float32 and rounded once on both sides.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
import torch
from parity import TORCH_DTYPE, check, from_torch, to_torch

import luminal as lm

F16, BF16 = lm.float16, lm.bfloat16
HALF = pytest.mark.parametrize("dtype", [F16, BF16], ids=lambda d: d.name)
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def values(dtype, low, high, n=2000, seed=0):
    return lm.core.dtype.to_storage(np.random.default_rng(seed).uniform(low, high, n), dtype)


def ulps(got: np.ndarray, want: np.ndarray, dtype) -> np.ndarray:
    """|got - want| in units of ``dtype``'s spacing at ``want`` (0 where both are equal or both NaN)."""
    got, want = got.astype(np.float64), want.astype(np.float64)
    same = (got == want) | (np.isnan(got) & np.isnan(want))
    mag = np.maximum(np.abs(want), np.finfo(np.float16).tiny if dtype is F16 else 2.0 ** -126)
    step = 2.0 ** (np.floor(np.log2(mag)) - (10 if dtype is F16 else 7))
    with np.errstate(invalid="ignore"):
        return np.where(same, 0.0, np.abs(got - want) / step)


def run(f, dtype, *arrays):
    g = lm.Graph()
    xs = [g.input(f"x{i}", a.shape, dtype=dtype) for i, a in enumerate(arrays)]
    return lm.compile(f(*xs))(**{f"x{i}": a for i, a in enumerate(arrays)})


EXPONENTS = [2.7, 1.1, 0.3, 1 / 3, 7.1, -1.5, -0.7, 100.3, 1e-3]


@HALF
@pytest.mark.parametrize("e", EXPONENTS, ids=lambda e: f"{e:.4g}")
def test_scalar_exponent_within_one_ulp(e, dtype):
    x = values(dtype, 0, 8)
    got = run(lambda t: t ** e, dtype, x)
    want = from_torch(to_torch(x, dtype) ** e)
    assert ulps(got, want, dtype).max() <= 1


@HALF
@pytest.mark.parametrize("b", [2.7, 0.3, 1.1, 10.0], ids=str)
def test_scalar_base_within_one_ulp(b, dtype):
    y = values(dtype, -4, 4)
    got = run(lambda t: b ** t, dtype, y)
    want = from_torch(b ** to_torch(y, dtype))
    assert ulps(got, want, dtype).max() <= 1


@HALF
def test_tensor_exponents_within_one_ulp(dtype):
    """Fractional exponents of positive bases, and integer-valued ones of any base (negative included)."""
    x, y = values(dtype, 0, 8), values(dtype, -4, 4, seed=1)
    xs, yi = values(dtype, -8, 8, seed=2), np.round(values(dtype, -6, 6, seed=3))
    for a, b in ((x, y), (xs, yi)):
        got = run(lambda s, t: s ** t, dtype, a, b)
        want = from_torch(to_torch(a, dtype) ** to_torch(b, dtype))
        assert ulps(got, want, dtype).max() <= 1


@HALF
def test_scalar_exponent_gradients(dtype, backend):
    x = values(dtype, 0.25, 4, n=64)
    check(lambda t: (t ** 2.7, t ** -0.7, 1.1 ** t), [x], dtypes=[dtype], backend=backend)


def test_exponent_rounded_to_an_integer():
    """In float16, 2.0001 is 2 and -1.00001 is -1 (integral: a negative base is fine) and 4097 is 4096
    (even): the values are those powers, written out."""
    x = np.array([-3.0, -1.0, 0.5, 2.0, -0.0], np.float16)
    assert run(lambda t: t ** 2.0001, F16, x).tolist() == [9.0, 1.0, 0.25, 4.0, 0.0]
    np.testing.assert_array_equal(run(lambda t: t ** -1.00001, F16, x), np.float16([-1 / 3, -1.0, 2.0, 0.5, -math.inf]))
    assert run(lambda t: t ** 4097, F16, np.array([-1.0, 1.0], np.float16)).tolist() == [1.0, 1.0]


def test_zero_and_negative_bases_with_tensor_exponents():
    """IEEE pow's values at zero and negative bases, float16 tensor ** float16 tensor."""
    a = np.array([0.0, -0.0, -0.0, 0.0, -2.0, -2.0, -2.0, -1.0], np.float16)
    b = np.array([-1.0, -1.0, -2.0, 0.0, 3.0, -2.0, 0.5, math.inf], np.float16)
    got = run(lambda s, t: s ** t, F16, a, b).astype(np.float64)
    want = np.array([math.inf, -math.inf, math.inf, 1.0, -8.0, 0.25, math.nan, 1.0])
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", [lm.float32, lm.float64], ids=lambda d: d.name)
def test_wide_dtypes_keep_the_exponent(dtype, backend):
    x = values(dtype, 0, 8, n=64)
    check(lambda t: t ** 2.7, [x], dtypes=[dtype], backend=backend)


@HALF
def test_exponent_beyond_the_dtype_is_refused(dtype):
    big = 70000.0 if dtype is F16 else 1e39
    with pytest.raises(ValueError, match=re.escape(f"pow: the exponent {big!r} does not fit {dtype.name}")):
        lm.Graph().input("x", (2,), dtype=dtype) ** big
    with pytest.raises(RuntimeError):  # torch refuses it too
        torch.ones(2, dtype=TORCH_DTYPE[dtype]) ** big
