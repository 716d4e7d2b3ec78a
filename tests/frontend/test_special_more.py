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


# erf (float32) --------------------------------------------------------------------------------------
def test_erf_float32_within_its_documented_ulps():
    """float32 erf (the clamped rational ``_erf32``, its quotient a float32 division) within 7 ulps of the
    exact value on a dense grid of [-6, 6] and tiny magnitudes (measured 6.3 at -3.59), exactly +-1 past
    the clamp, odd (the sign of zero kept)."""
    x = np.concatenate([np.linspace(-6, 6, 60001), np.geomspace(1e-30, 6, 4000),
                        -np.geomspace(1e-30, 6, 4000)]).astype(np.float32)
    got = _run(lm.erf, x, lm.float32)
    want = np.array([math.erf(float(v)) for v in x])  # (math.erf: within an ulp of float64)
    assert _ulps(got, want).max() <= 7.0
    edge = _run(lm.erf, np.array([-50.0, -4.5, 4.5, 50.0, -0.0, 0.0], np.float32), lm.float32)
    assert edge[:4].tolist() == [-1.0, -1.0, 1.0, 1.0]
    assert np.signbit(edge[4]) and not np.signbit(edge[5])


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


# lm.special -----------------------------------------------------------------------------------------
def _sp(t):
    return torch.special if isinstance(t, torch.Tensor) else lm.special


UNARY = {  # name -> inputs inside its domain, away from poles
    "erf": (-3, 3), "erfc": (-3, 5), "erfcx": (-3, 8), "erfinv": (-0.99, 0.99), "expit": (-8, 8),
    "logit": (0.02, 0.98), "gammaln": (0.1, 6), "digamma": (0.1, 6), "psi": (0.1, 6), "entr": (0.01, 4),
    "ndtr": (-6, 6), "ndtri": (0.001, 0.999), "log_ndtr": (-20, 6), "exp2": (-4, 4), "expm1": (-3, 3),
    "log1p": (-0.9, 4), "sinc": (-3, 3), "round": (-5, 5), "i0": (-40, 40), "i0e": (-40, 40), "i1": (-40, 40),
    "i1e": (-40, 40),
}
NO_16BIT = {"erfcx", "ndtri", "log_ndtr"}  # (torch's CPU kernels lack float16/bfloat16 for these)
MORE = {"gammainc", "gammaincc", "bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1", "modified_bessel_i0",
        "modified_bessel_i1", "modified_bessel_k0", "modified_bessel_k1", "scaled_modified_bessel_k0",
        "scaled_modified_bessel_k1", "spherical_bessel_j0", "zeta"}  # (test_special_torch_more.py)
MORE |= {"airy_ai"}  # (test_special_airy.py)
MORE |= {f"{s}chebyshev_polynomial_{k}" for s in ("", "shifted_") for k in "tuvw"}
MORE |= {"hermite_polynomial_h", "hermite_polynomial_he", "laguerre_polynomial_l", "legendre_polynomial_p"}


def _inputs(name, dtype, n=12):
    lo, hi = UNARY[name]
    x = np.linspace(lo, hi, n) + 0.013  # (off the grid's round numbers: round's ties, sinc's zeros)
    return lm.core.dtype.to_storage(np.clip(x, lo, hi), dtype)


def test_special_names_are_torch_special_names():
    assert lm.special.__all__ == sorted(lm.special.__all__)
    for name in lm.special.__all__:
        assert hasattr(torch.special, name), name
    assert set(UNARY) | {"xlogy", "xlog1py", "polygamma", "multigammaln", "softmax", "log_softmax",
                         "logsumexp"} | MORE == set(lm.special.__all__)
    assert set(lm.special.__all__) == set(torch.special.__all__)  # (all of torch.special's functions)


@pytest.mark.parametrize("name", sorted(UNARY))
@pytest.mark.parametrize("dtype", [lm.float32, lm.float64])
def test_unary_against_torch_special(name, dtype, backend):
    check(lambda t: getattr(_sp(t), name)(t), [_inputs(name, dtype)], dtypes=[dtype], backend=backend)


@pytest.mark.parametrize("name", sorted(set(UNARY) - NO_16BIT))
@pytest.mark.parametrize("dtype", [lm.float16, lm.bfloat16])
def test_unary_16bit_against_torch_special(name, dtype):
    check(lambda t: getattr(_sp(t), name)(t), [_inputs(name, dtype)], dtypes=[dtype])


@pytest.mark.parametrize("dtype", [lm.float32, lm.float64, lm.bfloat16])
@pytest.mark.parametrize("name", ["xlogy", "xlog1py"])
def test_xlogy_xlog1py_against_torch(name, dtype, backend):
    x = lm.core.dtype.to_storage(np.array([[0.0, 1.5, -2.0, 0.0], [3.0, 0.0, 0.5, -1.0]]), dtype)
    y = lm.core.dtype.to_storage(np.array([[2.0, 0.7, 3.0, 0.0], [0.25, 5.0, 1e-3, 2.0]]), dtype)
    check(lambda a, b: getattr(_sp(a), name)(a, b), [x, y], dtypes=[dtype, dtype], backend=backend)
    check(lambda a, b: getattr(_sp(a), name)(a, b), [x, y[1:]], dtypes=[dtype, dtype], backend=backend)  # broadcast
    check(lambda a: getattr(_sp(a), name)(a, 2.5), [x], dtypes=[dtype], backend=backend)
    check(lambda b: getattr(_sp(b), name)(3.0, b), [y], dtypes=[dtype], backend=backend)


def test_xlog1py_edges():
    """0 where x is 0 (also for y = -1 and inf) unless y is NaN; log1p's precision for tiny y. The
    gradient by x is log1p(y) (0 where x = 0 and y <= -1), by y x / (1 + y) (0/0 NaN at x = 0, y = -1)."""
    xs = np.array([0.0, 0.0, 0.0, 0.0, 2.0, 1.0, 3.0])
    ys = np.array([-1.0, inf, nan, 2.0, 1e-20, -1.0, -2.0])
    g = lm.Graph()
    x, y = g.input("x", (7,), dtype=lm.float64), g.input("y", (7,), dtype=lm.float64)
    out = lm.special.xlog1py(x, y)
    got, gx, gy = lm.compile([out, *train.grad(out.sum(), [x, y])], backend="cpu")(x=xs, y=ys)
    np.testing.assert_array_equal(got, [0.0, 0.0, nan, 0.0, 2e-20, -inf, nan])
    np.testing.assert_array_equal(gx, [0.0, inf, nan, math.log(3.0), 1e-20, -inf, nan])  # (ln 3 rounded)
    np.testing.assert_array_equal(gy, [nan, 0.0, nan, 0.0, 2.0, inf, -3.0])


def _ndtri_exact(v):
    with mp.workdps(400):  # (1 - 2v exact down to v = 5e-324)
        return mp.sqrt(2) * mp.erfinv(2 * v - 1)


def test_tails_against_mpmath():
    """ndtr, log_ndtr, ndtri and erfcx keep their relative precision in the tails where the naive
    formulas underflow or round to 0/1 (torch 2.13's ndtr(-10) is 0). ndtr's relative error is bound by
    its condition, ``x ndtr'(x) / ndtr(x)``, about ``x**2`` in the lower tail: a correctly rounded
    ``exp`` of the rounded ``x**2 / 2`` is off by ``x**2`` half-ulps (``ndtr(-20)``: 400)."""
    cases = {
        lm.special.ndtr: ([-38.0, -20.0, -10.0, -1.0, 0.5, 8.0], lambda v: mp.ncdf(v)),
        lm.special.log_ndtr: ([-1e5, -40.0, -10.0, -1.0, 0.3, 8.0], lambda v: mp.log(mp.ncdf(v))),
        lm.special.ndtri: ([5e-324, 1e-300, 1e-20, 0.01, 0.3, 0.5 + 1e-9, 0.99, 1 - 2.0**-53], _ndtri_exact),
        lm.special.erfcx: ([-6.0, -2.0, -0.2, 0.1, 0.7, 3.0, 6.5, 40.0, 1e10], lambda v: mp.erfc(v) * mp.exp(v * v)),
    }
    for fn, (pts, exact) in cases.items():
        pts = np.array(pts)
        want = np.array([float(exact(mp.mpf(float(v)))) for v in pts])
        bound = 2e-14 * np.maximum(1.0, pts * pts / 4) if fn is lm.special.ndtr else 2e-14
        assert np.all(np.abs(_run(fn, pts) - want) <= bound * np.abs(want)), fn.__name__


BESSEL = {"i0": lambda v: mp.besseli(0, v), "i1": lambda v: mp.besseli(1, v),
          "i0e": lambda v: mp.besseli(0, v) * mp.exp(-abs(v)), "i1e": lambda v: mp.besseli(1, v) * mp.exp(-abs(v))}


@pytest.mark.parametrize("name", sorted(BESSEL))
def test_bessel_against_mpmath(name):
    """Both sides of the switch from the power series to the asymptotic one (30), up to where i0
    overflows (713.99); the unscaled ones multiply by exp(|x|), whose rounding at |x| = 700 is ~5e-14."""
    pts = np.array([1e-10, 0.5, -1.3, 5.0, -12.0, 29.99, 30.0, 30.01, -45.0, 100.0, 700.0, 713.0, -713.0])
    want = np.array([float(BESSEL[name](mp.mpf(float(v)))) for v in pts])
    rtol = 1e-13 if name in ("i0", "i1") else 4e-15
    np.testing.assert_allclose(_run(getattr(lm.special, name), pts), want, rtol=rtol, atol=0)


def test_bessel_special_values():
    """i0 even, i1 odd (keeping -0.0); +-inf at +-inf, the scaled ones +-0 there; the gradients at 0:
    i0' = i1(0) = 0, i1' = 1/2, i0e' = 0, i1e' = 1/2."""
    vals = np.array([0.0, -0.0, inf, -inf, nan])
    for name, want, slope0 in [("i0", [1.0, 1.0, inf, inf, nan], 0.0), ("i1", [0.0, -0.0, inf, -inf, nan], 0.5),
                               ("i0e", [1.0, 1.0, 0.0, 0.0, nan], 0.0), ("i1e", [0.0, -0.0, 0.0, -0.0, nan], 0.5)]:
        got, grad = _values_and_grads(getattr(lm.special, name), vals)
        np.testing.assert_array_equal(got, want, err_msg=name)
        np.testing.assert_array_equal(np.signbit(got[:4]), np.signbit(want[:4]), err_msg=name)
        np.testing.assert_array_equal(grad[:2], slope0, err_msg=name)


def test_bessel_second_derivatives():
    """i0'' = i1' = i0 - i1/x; the gradients are themselves differentiable."""
    x0 = np.array([-3.0, -0.5, 0.25, 2.0, 35.0])
    for name in ("i0", "i1e"):
        xt = torch.tensor(x0, requires_grad=True)
        (gt,) = torch.autograd.grad(getattr(torch.special, name)(xt).sum(), xt, create_graph=True)
        (ht,) = torch.autograd.grad(gt.sum(), xt)
        g = lm.Graph()
        x = g.input("x", (5,), dtype=lm.float64)
        gx = train.grad(getattr(lm.special, name)(x).sum(), x)
        got_g, got_h = lm.compile([gx, train.grad(gx.sum(), x)], backend="cpu")(x=x0)
        np.testing.assert_allclose(got_g, gt.detach().numpy(), rtol=1e-12)
        np.testing.assert_allclose(got_h, ht.numpy(), rtol=1e-11)


def _values_and_grads(fn, vals):
    g = lm.Graph()
    x = g.input("x", vals.shape, dtype=lm.float64)
    y = fn(x)
    return lm.compile([y, train.grad(y.sum(), x)], backend="cpu")(x=vals)


def test_special_values():
    """The defined values at the edges (and the gradients' limits), written out."""
    sq = math.sqrt(2 * math.pi)
    got, grad = _values_and_grads(lm.special.ndtri, np.array([0.0, 1.0, 0.5, -0.1, 1.1, nan]))
    np.testing.assert_array_equal(got, [-inf, inf, 0.0, nan, nan, nan])
    np.testing.assert_array_equal(grad, [inf, inf, sq, nan, nan, nan])
    got, grad = _values_and_grads(lm.special.ndtr, np.array([-inf, inf, 0.0, nan]))
    np.testing.assert_array_equal(got, [0.0, 1.0, 0.5, nan])
    np.testing.assert_array_equal(grad, [0.0, 0.0, 1 / sq, nan])
    got, grad = _values_and_grads(lm.special.log_ndtr, np.array([-inf, inf, nan]))
    np.testing.assert_array_equal(got, [-inf, 0.0, nan])
    np.testing.assert_array_equal(grad, [inf, 0.0, nan])  # (d/dx log ndtr(x) ~ -x as x -> -inf)
    got, grad = _values_and_grads(lm.special.erfcx, np.array([-inf, inf, 0.0, nan]))
    np.testing.assert_array_equal(got, [inf, 0.0, 1.0, nan])
    np.testing.assert_array_equal(grad, [-inf, 0.0, -2 / math.sqrt(math.pi), nan])
    got, grad = _values_and_grads(lm.special.entr, np.array([0.0, -1.0, inf, nan, 1.0]))
    np.testing.assert_array_equal(got, [0.0, -inf, -inf, nan, 0.0])
    np.testing.assert_array_equal(grad, [inf, nan, -inf, nan, -1.0])


@pytest.mark.parametrize("dtype", [lm.float32, lm.float64, lm.bfloat16])
@pytest.mark.parametrize("p", [1, 2, 4])
def test_multigammaln_against_torch(p, dtype, backend):
    x = lm.core.dtype.to_storage(np.array([2.6, 3.0, 4.25, 10.5, 33.0]), dtype)
    check(lambda t: _sp(t).multigammaln(t, p), [x], dtypes=[dtype], backend=backend)


def test_polygamma_softmax_logsumexp_against_torch(backend):
    x = np.random.default_rng(0).uniform(0.2, 3.0, (3, 4)).astype(np.float32)
    check(lambda t: _sp(t).polygamma(3, t), [x], backend=backend)
    for d in (0, 1, -1):
        check(lambda t: _sp(t).softmax(t, d), [x], backend=backend)
        check(lambda t: _sp(t).log_softmax(t, d), [x], backend=backend)
        check(lambda t: _sp(t).logsumexp(t, d), [x], backend=backend)
    check(lambda t: _sp(t).logsumexp(t, (0, 1), keepdim=True), [x], backend=backend)
    check(lambda t: _sp(t).softmax(t, 1, dtype=torch.float64 if isinstance(t, torch.Tensor) else lm.float64), [x],
          backend=backend)
    check(lambda t: _sp(t).round(t, decimals=1), [x], backend=backend)


def test_special_errors():
    x = lm.Graph().input("x", (2,))
    with pytest.raises(ValueError, match="multigammaln: p must be at least 1, got 0"):
        lm.special.multigammaln(x, 0)
    with pytest.raises(TypeError, match="multigammaln: p must be an int"):
        lm.special.multigammaln(x, 1.5)
    with pytest.raises(TypeError, match="ndtri: input must be a GraphTensor"):
        lm.special.ndtri([0.5])
    with pytest.raises(TypeError, match="xlog1py: at least one operand must be a GraphTensor"):
        lm.special.xlog1py(1.0, 2.0)
