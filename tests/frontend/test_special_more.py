"""erfinv, polygamma of any order, and the ``lm.special`` namespace: values against mpmath (float64, to
a few ulps) and torch (float32/float64, float16/bfloat16 where torch's CPU has the op), gradients
against torch's autograd, the defined values at the edges written out (not read from torch), errors."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from mpmath import mp
from parity import check

import luminal as lm
from luminal import train

pytestmark = pytest.mark.usefixtures("one_torch_thread")
mp.dps = 40
inf, nan = math.inf, math.nan


def _run(fn, vals, dtype=lm.float64):
    g = lm.Graph()
    x = g.input("x", vals.shape, dtype=dtype)
    return lm.compile(fn(x), backend="cpu")(x=vals)


def _ulps(got, want, d=np.float32):
    """|got - want| in units of the last place of ``want`` rounded to ``d``."""
    return np.abs(got.astype(np.float64) - want) / np.spacing(np.abs(want).astype(d)).astype(np.float64)


# erfinv ---------------------------------------------------------------------------------------------
ERFINV_POINTS = np.array([1e-300, 1e-10, 0.1, 0.3, 0.49, 0.5, 0.51, 0.7, 0.9, 0.99, 0.999999, 1 - 1e-10,
                          1 - 2.0**-52, 1 - 2.0**-53, -0.7, -1e-5, -(1 - 2.0**-53)])


def test_erfinv_float64_against_mpmath():
    """A few ulps everywhere, also next to +-1 (where correcting with erf, as torch does, loses digits)."""
    got = _run(lm.erfinv, ERFINV_POINTS)
    want = np.array([float(mp.erfinv(mp.mpf(float(v)))) for v in ERFINV_POINTS])
    np.testing.assert_allclose(got, want, rtol=1e-15, atol=0)


def test_erfinv_float32_within_an_ulp():
    x = np.linspace(-1, 1, 4001, dtype=np.float32)[1:-1]
    x = np.concatenate([x, np.float32(1) - np.float32(2.0**-24) * np.arange(1, 50, dtype=np.float32)])
    want = np.array([float(mp.erfinv(mp.mpf(float(v)))) for v in x])
    assert _ulps(_run(lm.erfinv, x, lm.float32), want).max() <= 0.5001  # (correctly rounded here)


def test_erfinv_special_values():
    """erfinv(+-1) = +-inf, NaN outside [-1, 1] and at NaN; odd, so -0.0 stays -0.0. The gradient
    sqrt(pi)/2 exp(erfinv(x)**2) is +inf at +-1 and NaN outside."""
    vals = np.array([-1.0, 1.0, 1.5, -2.0, inf, -inf, nan, 0.0, -0.0])
    g = lm.Graph()
    x = g.input("x", vals.shape, dtype=lm.float64)
    y = lm.erfinv(x)
    got, grad = lm.compile([y, train.grad(y.sum(), x)], backend="cpu")(x=vals)
    np.testing.assert_array_equal(got, [-inf, inf, nan, nan, nan, nan, nan, 0.0, -0.0])
    assert np.signbit(got[-1]) and not np.signbit(got[-2])
    np.testing.assert_array_equal(grad, [inf, inf, nan, nan, nan, nan, nan, math.sqrt(math.pi) / 2,
                                         math.sqrt(math.pi) / 2])


@pytest.mark.parametrize("dtype", [lm.float32, lm.float64, lm.float16, lm.bfloat16])
def test_erfinv_values_and_gradients_against_torch(dtype, backend):
    x = np.array([-0.999, -0.9, -0.5, -0.1, 0.0, 1e-4, 0.3, 0.7, 0.95, 0.99])
    check(lambda t: t.erfinv(), [lm.core.dtype.to_storage(x, dtype)], dtypes=[dtype], backend=backend)
    check(lambda t: torch.erfinv(t) if isinstance(t, torch.Tensor) else lm.erfinv(t),
          [lm.core.dtype.to_storage(x, dtype)], dtypes=[dtype], backend=backend)


def test_erfinv_int_input_and_second_derivative():
    check(lambda t: t.erfinv(), [np.array([0, 1, -1, 2], np.int32)])
    x0 = np.array([-0.8, -0.2, 0.1, 0.6, 0.97])
    xt = torch.tensor(x0, requires_grad=True)
    (gt,) = torch.autograd.grad(torch.erfinv(xt).sum(), xt, create_graph=True)
    (ht,) = torch.autograd.grad(gt.sum(), xt)
    g = lm.Graph()
    x = g.input("x", (5,), dtype=lm.float64)
    gx = train.grad(lm.erfinv(x).sum(), x)
    got_g, got_h = lm.compile([gx, train.grad(gx.sum(), x)], backend="cpu")(x=x0)
    np.testing.assert_allclose(got_g, gt.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(got_h, ht.numpy(), rtol=1e-10)


# polygamma ------------------------------------------------------------------------------------------
PG_POINTS = np.array([1e-8, 0.001, 0.3, 0.5, 1.5, 2.5, 3.7, 7.25, 9.99, 10.0, 11.0, 25.0, 100.0, 170.5, 1e20,
                      -1e-8, -0.3, -0.7, -1.3, -2.5, -3.0000001, -4.6, -7.9, -100.5])


@pytest.mark.parametrize("n", [2, 3, 4, 7])
def test_polygamma_float64_against_mpmath(n):
    got = _run(lambda x: lm.polygamma(n, x), PG_POINTS)
    want = np.array([float(mp.psi(n, mp.mpf(float(v)))) for v in PG_POINTS])
    np.testing.assert_allclose(got, want, rtol=1e-14, atol=0)


@pytest.mark.parametrize("n", [2, 3, 4])
@pytest.mark.parametrize("dtype", [lm.float32, lm.float64])
def test_polygamma_values_and_gradients_against_torch(n, dtype, backend):
    """The gradient is polygamma(n + 1, x), as torch's."""
    x = lm.core.dtype.to_storage(np.array([0.05, 0.5, 1.3, 2.0, 4.5, 30.0, -0.4, -2.5, -5.3, -0.8]), dtype)
    tol = {lm.float32: 1e-5, lm.float64: 1e-10}[dtype]
    check(lambda t: torch.polygamma(n, t) if isinstance(t, torch.Tensor) else lm.polygamma(n, t), [x],
          dtypes=[dtype], backend=backend, rtol=tol, atol=0, grad_rtol=tol, grad_atol=0)
    check(lambda t: t.polygamma(n), [x], dtypes=[dtype], backend=backend, rtol=tol, atol=0, grad_rtol=tol,
          grad_atol=0)


@pytest.mark.parametrize("dtype", [lm.float16, lm.bfloat16])
def test_polygamma_half_precision(dtype):
    x = lm.core.dtype.to_storage(np.array([0.5, 1.3, 2.0, 4.5, -0.4, -2.5]), dtype)
    check(lambda t: t.polygamma(2), [x], dtypes=[dtype])


def test_polygamma_special_values():
    """The mathematical limits at the poles 0, -1, -2 (psi_n ~ (-1)**(n+1) n! / (x - pole)**(n+1)): +inf
    for odd n; for even n the two sides disagree, so NaN, except the one-sided limits at +0 (-inf) and
    -0 (+inf). 0 at +inf, NaN at -inf and NaN. (torch 2.13 gives -inf at every pole for even n, and NaN
    at +inf.)"""
    vals = np.array([0.0, -0.0, -1.0, -2.0, -1e6, inf, -inf, nan])
    odd = [inf, inf, inf, inf, inf, 0.0, nan, nan]
    even = [-inf, inf, nan, nan, nan, 0.0, nan, nan]
    for n in (1, 2, 3, 4):
        np.testing.assert_array_equal(_run(lambda x: lm.polygamma(n, x), vals), odd if n % 2 else even)


def test_derivatives_chain_through_the_orders():
    """lgamma's third derivative is polygamma(2), digamma's second polygamma(2), polygamma(2)'s
    polygamma(3): each gradient is itself differentiable."""
    x0 = np.array([0.3, 1.0, 2.5, 7.0, -1.5])
    g = lm.Graph()
    x = g.input("x", (5,), dtype=lm.float64)
    d1 = train.grad(lm.lgamma(x).sum(), x)
    d2 = train.grad(d1.sum(), x)
    d3 = train.grad(d2.sum(), x)
    p3 = train.grad(lm.polygamma(2, x).sum(), x)
    got3, gotp3 = lm.compile([d3, p3], backend="cpu")(x=x0)
    np.testing.assert_allclose(got3, [float(mp.psi(2, v)) for v in x0], rtol=1e-13)
    np.testing.assert_allclose(gotp3, [float(mp.psi(3, v)) for v in x0], rtol=1e-13)


def test_polygamma_errors():
    x = lm.Graph().input("x", (2,))
    with pytest.raises(ValueError, match="polygamma: n must be an int >= 0, got -1"):
        lm.polygamma(-1, x)
    with pytest.raises(ValueError, match="polygamma: n must be an int >= 0, got 2.0"):
        lm.polygamma(2.0, x)
    with pytest.raises(ValueError, match="polygamma: order n = 151 is past 150"):
        lm.polygamma(151, x)
    with pytest.raises(TypeError, match="polygamma: input must be a GraphTensor"):
        lm.polygamma(2, np.zeros(2))
