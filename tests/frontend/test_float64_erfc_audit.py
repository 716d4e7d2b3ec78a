"""float64 erfc, erfcx and erf against mpmath (50 digits) over their whole float64 range, values and
gradients, in ulps of the float64 result (subnormal spacing below the normals).

Before: erfc's tail was ``erfcx(a) exp(-a**2)`` of the rounded square, about ``a**2`` ulps off (480 at
25.4), and so was its gradient ``-2/sqrt(pi) exp(-x**2)``; erfcx below 0 was ``2 exp(x**2) - erfcx(-x)``
with the same rounded square (490 ulps at -23.8); erfcx's Chebyshev expansion on [0.5, 6] was 3.7 ulps
off, and its gradient ``2 x erfcx(x) - 2/sqrt(pi)`` cancelled (300 ulps near 6, 3000 at 28, no digit
right past 1e8: -4.4e-16 at 1e308); erf's gradient had erfc's rounded square (30 ulps at 6, 700 at 26).
Now the exponent is exact or corrected (``_gauss``, ``_exp_square``), erfcx is ``1 / (sqrt(pi) (a +
r))`` with ``r`` an expansion (``_erfcx_r``) or Laplace's continued fraction, and its slope ``-2 r
erfcx`` does not cancel. Measured worst (dense samples): erfc 2.0 ulps (1 - erf below 0.5; 0.75 in the
tail), its gradient 0.6; erfcx 2.3, its gradient 2.9; erf 2.0, its gradient 1.7.
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


def _two_over_sqrt_pi():
    """2/sqrt(pi) at the working precision (a module constant would be mpmath's default 53 bits)."""
    return 2 / mpmath.sqrt(mpmath.pi)


def _erfcx(v):
    """exp(v**2) erfc(v); past 1e6 its asymptotic series (mpmath's erfc overflows near 1e150)."""
    if v > 1e6:
        z = 1 / (2 * v * v)
        return (1 - z + 3 * z**2 - 15 * z**3) / (v * mpmath.sqrt(mpmath.pi))
    return mpmath.exp(v * v) * mpmath.erfc(v)


def _erfcx_slope(v):
    """2 v erfcx(v) - 2/sqrt(pi), past 1e6 its series (the difference cancels)."""
    if v > 1e6:
        z = 1 / (2 * v * v)
        return _two_over_sqrt_pi() * (-z + 3 * z**2 - 15 * z**3)
    return 2 * v * _erfcx(v) - _two_over_sqrt_pi()


@pytest.mark.parametrize("backend", ["cpu", "reference"])
def test_float64_erfc_and_its_gradient_within_2_ulps_down_to_its_last_subnormal(backend):
    """The worst is 1 - erf(x) just below the 0.5 switch (2 ulps near 0.48), elsewhere 0.75."""
    rng = np.random.default_rng(0)
    xs = np.concatenate([rng.uniform(-6, 27.3, 700), rng.uniform(-0.6, 0.6, 150), rng.uniform(26.4, 27.4, 150),
                         [-6.0, -0.5, np.nextafter(-0.5, 0), 0.0, 0.5, np.nextafter(0.5, 0), 6.0, 25.4, 27.2]])
    y, gx = value_and_slope(lm.special.erfc, xs, backend)
    err, at = worst(xs, y, mpmath.erfc)
    assert err <= 2.5, (err, at)
    err, at = worst(xs, gx, lambda v: -_two_over_sqrt_pi() * mpmath.exp(-v * v))
    assert err <= 1, (err, at)


@pytest.mark.parametrize("backend", ["cpu", "reference"])
def test_float64_erfcx_and_its_gradient_within_a_few_ulps_on_minus_26_to_1e300(backend):
    rng = np.random.default_rng(1)
    xs = np.concatenate([rng.uniform(-26.6, 0, 300), rng.uniform(-1, 8, 400), np.logspace(0, 300, 200),
                         np.linspace(-26.63, -26.5, 20), [-0.5, 0.0, 0.5, 6.0, np.nextafter(6.0, 7), 1e8, 28.5]])
    y, gx = value_and_slope(lm.special.erfcx, xs, backend)
    err, at = worst(xs, y, _erfcx)
    assert err <= 3, (err, at)
    err, at = worst(xs, gx, _erfcx_slope)
    assert err <= 3.5, (err, at)


@pytest.mark.parametrize("backend", ["cpu", "reference"])
def test_float64_erf_and_its_gradient_near_0_and_6(backend):
    rng = np.random.default_rng(2)
    xs = np.concatenate([rng.uniform(-0.6, 0.6, 300), np.logspace(-300, -1, 60), rng.uniform(0.4, 6, 200),
                         rng.uniform(5, 6.5, 100), -rng.uniform(5, 6.5, 100), rng.uniform(6, 27.3, 100)])
    y, gx = value_and_slope(lm.erf, xs, backend)
    err, at = worst(xs, y, mpmath.erf)
    assert err <= 2.5, (err, at)
    err, at = worst(xs, gx, lambda v: _two_over_sqrt_pi() * mpmath.exp(-v * v))
    assert err <= 2, (err, at)


def test_float64_erfc_erfcx_and_erf_at_their_edges():
    """The limits written out: erfc 0 and 2 at +-inf (and at +-1e308), NaN at NaN, its gradient -0.0
    far out; erfcx 0 at +inf, 1/(sqrt(pi) x) at 1e308, +inf from about -26.6 down, its gradient 0 at +inf
    and -inf at -inf; erf keeps the sign of zero, its gradient 0 at +-inf."""
    xs = np.array([math.inf, -math.inf, math.nan, 1e308, -1e308, 0.0, -0.0, -26.65, 40.0])
    y, gx = value_and_slope(lm.special.erfc, xs)
    assert y[[0, 3, 8]].tolist() == [0.0] * 3 and y[[1, 4]].tolist() == [2.0, 2.0] and math.isnan(y[2])
    assert y[5] == y[6] == 1.0 and y[7] == 2.0
    assert gx[[0, 1, 3, 4, 8]].tolist() == [0.0] * 5 and math.isnan(gx[2])
    assert gx[5] == gx[6] == pytest.approx(-2 / math.sqrt(math.pi), rel=1e-16)
    y, gx = value_and_slope(lm.special.erfcx, xs)
    assert y[0] == 0.0 and y[1] == math.inf and math.isnan(y[2]) and y[4] == y[7] == math.inf
    assert y[3] == pytest.approx(1 / (math.sqrt(math.pi) * 1e308), rel=1e-15) and y[5] == y[6] == 1.0
    assert gx[0] == 0.0 and gx[1] == -math.inf and math.isnan(gx[2]) and gx[3] == 0.0 and gx[7] == -math.inf
    y, gx = value_and_slope(lm.erf, xs)
    assert y[[0, 1, 3, 4]].tolist() == [1.0, -1.0, 1.0, -1.0] and math.isnan(y[2])
    assert y[5] == 0.0 and math.copysign(1, y[5]) == 1 and y[6] == 0.0 and math.copysign(1, y[6]) == -1
    assert gx[[0, 1, 3, 4]].tolist() == [0.0] * 4 and math.isnan(gx[2])


@pytest.mark.parametrize("name", ["erfc", "erfcx"])
def test_float64_erfc_and_erfcx_match_torch(name):
    """Values and gradients against torch's float64 where torch's are accurate (to a tolerance)."""
    xs = np.concatenate([np.linspace(-5, 8, 53), [30.0, 1e3]])
    check(getattr(lm.special, name), [xs], torch_op=getattr(torch.special, name))
