"""float64 ndtr and log_ndtr in their tails, and digamma on the negative axis, against mpmath (50
digits), in ulps of the float64 result.

Before: ``ndtr`` was ``erfc(-x / sqrt(2)) / 2`` of the rounded argument, and erfc's tail
``erfcx(a) exp(-a**2)`` of the rounded square: about ``1 + x**2`` ulps off in the lower tail (650 at
-26, 1660 at -36.5), its gradient (the normal density, ``exp`` of the rounded ``x**2 / 2``) 1900;
``log_ndtr`` inherited it through ``log1p(-ndtr(-x))`` in the upper tail (75 ulps at 7.4) and its
gradient ``pdf / ndtr`` 12 ulps at 7. Now ``-x**2 / 2`` is exact as a double-double and so is its exp
(``special._gauss``); what is left is erfcx's own few ulps (its Chebyshev expansion: 2.6 near 0.9,
3.3 near 5.3), which the bounds below allow.

digamma below 0 was the reflection ``psi(1 - x) - pi cot(pi x)``, whose terms cancel at digamma's root
between each two poles (-0.504, -1.573, ...): 4e16 ulps at -5.667, 684 at -4.6536; on (-20, 0) the
root is now factored out (``special._digamma_neg``), the rest is bounded absolutely as before.
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
import torch

import luminal as lm
from tests.mp_ulps import value_and_slope, worst
from tests.parity import check


def _pdf_over_cdf(v):
    return mpmath.npdf(v) / mpmath.ncdf(v)


def _ndtr_points():
    rng = np.random.default_rng(0)
    return np.concatenate([rng.uniform(-38.4, 8, 500), np.linspace(-38.4, -0.5, 150),
                           [-26.0, -36.5, -38.0, -1.0, -0.75, -0.7, 0.0, 0.7, 1.0, 5.0, 8.0]])


@pytest.mark.parametrize("backend", ["cpu", "reference"])
def test_float64_ndtr_and_its_gradient_within_a_few_ulps_on_minus_38_to_8(backend):
    xs = _ndtr_points()
    y, gx = value_and_slope(lm.special.ndtr, xs, backend)
    err, at = worst(xs, y, mpmath.ncdf)
    assert err <= 4, (err, at)
    err, at = worst(xs, gx, mpmath.npdf)
    assert err <= 2, (err, at)


@pytest.mark.parametrize("backend", ["cpu", "reference"])
def test_float64_log_ndtr_and_its_gradient_within_a_few_ulps_on_minus_1e4_to_8(backend):
    rng = np.random.default_rng(1)
    xs = np.concatenate([rng.uniform(-40, 8, 400), -np.logspace(0, 4, 150), np.linspace(-3, 3, 100),
                         [-1.0, np.nextafter(-1.0, 0), np.nextafter(-1.0, -2), -26.0, -1e4, 7.4, 8.0]])
    y, gx = value_and_slope(lm.special.log_ndtr, xs, backend)
    err, at = worst(xs, y, lambda v: mpmath.log(mpmath.ncdf(v)))
    assert err <= 4, (err, at)
    err, at = worst(xs, gx, _pdf_over_cdf)  # (below -1 sqrt(2/pi) / erfcx: erfcx's ulps and more)
    assert err <= 6, (err, at)


def test_float64_ndtr_and_log_ndtr_at_their_edges():
    """The limits written out: ndtr is 0 and 1 at -+inf and below half the smallest subnormal from
    about -38.5 on; the density 0 at +-inf; log_ndtr -inf and -0.0 at -+inf, its gradient +inf at -inf
    (the limit of ``-x``) and about ``-x`` far out (1e300 at -1e300, where ``log_ndtr`` is -inf)."""
    xs = np.array([-math.inf, math.inf, math.nan, -0.0, -40.0, -38.6, 40.0, -1e300])
    y, gx = value_and_slope(lm.special.ndtr, xs)
    assert y[0] == 0.0 and y[1] == 1.0 and math.isnan(y[2])
    assert y[3] == 0.5 and y[4] == y[5] == 0.0 and y[6] == 1.0 and y[7] == 0.0
    assert gx[[0, 1, 4, 6, 7]].tolist() == [0.0] * 5 and math.isnan(gx[2])
    assert gx[3] == pytest.approx(1 / math.sqrt(2 * math.pi), rel=1e-16)
    y, gx = value_and_slope(lm.special.log_ndtr, xs)
    assert y[0] == -math.inf and y[1] == 0.0 and math.copysign(1, y[1]) == -1 and math.isnan(y[2])
    assert y[3] == pytest.approx(-math.log(2), rel=1e-16) and y[7] == -math.inf
    assert gx[0] == math.inf and gx[1] == 0.0 and math.isnan(gx[2])
    assert gx[7] == pytest.approx(1e300, rel=1e-15)


@pytest.mark.parametrize("name", ["ndtr", "log_ndtr"])
def test_float64_ndtr_and_log_ndtr_match_torch_where_torch_is_accurate(name):
    """torch's own float64 values carry the rounded argument's error in the tails: compared on
    [-5, 5] to a tolerance, values and gradients."""
    xs = np.linspace(-5, 5, 41)
    check(getattr(lm.special, name), [xs], torch_op=getattr(torch.special, name))


def _digamma_roots():
    """digamma's root in each interval (-k-1, -k), k < 20 (mpmath, 50 digits)."""
    with mpmath.workdps(50):
        return [mpmath.findroot(mpmath.digamma, (-k - 1 + mpmath.mpf("1e-30"), -k - mpmath.mpf("1e-30")),
                                solver="anderson") for k in range(20)]


@pytest.mark.parametrize("backend", ["cpu", "reference"])
def test_float64_digamma_within_5_ulps_on_minus_20_to_0_its_roots_included(backend):
    rng = np.random.default_rng(2)
    xs = rng.uniform(-20, 0, 600)
    offsets = np.logspace(-15, -1, 12)
    for r in (float(r) for r in _digamma_roots()):
        xs = np.concatenate([xs, r + offsets, r - offsets, [r, np.nextafter(r, 0), np.nextafter(r, -21)]])
    ks = np.arange(20)
    xs = np.concatenate([xs, -ks - 1e-12, -ks - 0.5, -ks - 1 + 1e-12, -ks - 1e-5, -ks - 1 + 1e-5])
    xs = xs[xs != np.round(xs)]
    g = lm.Graph()
    x = g.input("x", (len(xs),), dtype=lm.float64)
    got = lm.compile(lm.digamma(x), backend=backend)(x=xs)
    err, at = worst(xs, got, mpmath.digamma)
    assert err <= 5, (err, at)


def test_float64_digamma_below_minus_20_within_an_absolute_few_ulps_of_its_terms():
    """The reflection there (roots not tabled): its error is bounded absolutely, in ulps of the larger of
    ``|psi(x)|``, ``psi(1 - x)`` and 1."""
    xs = np.concatenate([np.random.default_rng(3).uniform(-60, -20, 300), [-20.5, -30.5, -20.000001]])
    g = lm.Graph()
    x = g.input("x", (len(xs),), dtype=lm.float64)
    got = lm.compile(lm.digamma(x), backend="cpu")(x=xs)
    with mpmath.workdps(50):
        for v, o in zip(xs, got, strict=True):
            want = mpmath.digamma(mpmath.mpf(float(v)))
            size = max(1.0, abs(float(want)), abs(float(mpmath.digamma(1 - mpmath.mpf(float(v))))))
            assert abs(mpmath.mpf(float(o)) - want) <= 4 * size * np.spacing(1.0), v
    assert got[-3] == pytest.approx(3.0446168825125246, rel=3e-16)  # (cot(pi x) is 0 at -20.5: exactly)


def test_float64_digamma_at_the_poles_and_its_gradient_on_the_negative_axis():
    """torch's values at the poles (+inf at -0.0, -inf at +0.0, NaN at the negative integers and -inf),
    unchanged; the gradient is trigamma's, compared with torch's."""
    xs = np.array([-0.0, 0.0, -1.0, -5.0, -19.0, -20.0, -21.0, -math.inf, math.inf])
    g = lm.Graph()
    x = g.input("x", (len(xs),), dtype=lm.float64)
    got = lm.compile(lm.digamma(x), backend="cpu")(x=xs)
    assert got[0] == math.inf and got[1] == -math.inf and got[8] == math.inf
    assert np.isnan(got[2:8]).all()
    check(lm.digamma, [np.array([-19.74, -10.3, -5.667, -2.61, -0.504, -0.1])], torch_op=torch.digamma)


def _lgamma_roots():
    """lgamma's two roots in each interval (-k-1, -k), 2 <= k < 20, around digamma's root there."""
    exact = lambda v: mpmath.loggamma(v).real  # noqa: E731
    out = []
    with mpmath.workdps(50):
        for k, m in enumerate(_digamma_roots()[2:], 2):
            for lo, hi in ((-k - 1 + mpmath.mpf("1e-40"), m), (m, -k - mpmath.mpf("1e-40"))):
                for _ in range(200):  # (bisection: the roots near -20 sit within 1e-18 of the poles)
                    mid = (lo + hi) / 2
                    lo, hi = (mid, hi) if (exact(mid) > 0) == (exact(lo) > 0) else (lo, mid)
                out.append(float(lo))
    return out


@pytest.mark.parametrize("backend", ["cpu", "reference"])
def test_float64_lgamma_within_8_ulps_on_minus_20_to_minus_2_its_roots_included(backend):
    """The worst is near the zeros in (-3, -2), where even the reflection's exact terms cancel by a
    factor of 2 (digamma there: ``psi(1 - x)`` 1.2, ``pi cot(pi x)`` 3.1)."""
    rng = np.random.default_rng(4)
    xs = rng.uniform(-20, -2, 600)
    offsets = np.logspace(-15, -1, 10)
    for r in _lgamma_roots():
        xs = np.concatenate([xs, r + offsets, r - offsets, [r, np.nextafter(r, 0), np.nextafter(r, -21)]])
    ks = np.arange(2, 21)
    xs = np.concatenate([xs, -ks + 1e-12, -ks - 1e-12, -ks + 1e-5, -ks - 0.5])
    xs = xs[(xs != np.round(xs)) & (xs > -20) & (xs < -2)]
    g = lm.Graph()
    x = g.input("x", (len(xs),), dtype=lm.float64)
    got = lm.compile(lm.lgamma(x), backend=backend)(x=xs)
    err, at = worst(xs, got, lambda v: mpmath.loggamma(v).real)
    assert err <= 8, (err, at)
