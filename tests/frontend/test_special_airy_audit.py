"""airy_ai's accuracy sweeps (full tier): dense float64 grids against mpmath for Ai and its gradient Ai'
(tolerances and measured maxima in ``test_special_airy.py``'s docstring), float32 within an ulp of
the exact value over a wide grid of float32 inputs, and the float64 error growth past x = -1e9 that the
docstring states (the phase's double-double rounding)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from mpmath import mp
from test_special_airy import _run, ai_error

import luminal as lm

pytestmark = pytest.mark.usefixtures("one_torch_thread")

# every piece and switch: Chebyshev pieces on [-10, -6], [-6, -2], [-2, 0], [0, 2], [2, 10]; the
# asymptotic series past |x| = 10; the subnormal results from 103.9 on
DENSE = np.concatenate([np.linspace(-10.5, 10.5, 2101), np.linspace(10, 107.5, 976), -10 ** np.linspace(1, 9, 801),
                        [-6.0, -2.0, 2.0, 10.0, -6 - 1e-15, -2 + 1e-15, 2 + 4e-16, 10 - 2e-15],
                        -np.array([2.338107410459767, 4.087949444130971, 5.520559828095551, 6.786708090071759])])


@pytest.mark.parametrize("deriv", [False, True], ids=["Ai", "Ai'"])
def test_float64_dense_against_mpmath(deriv):
    mp.dps = 40
    if deriv:
        got = _run(lm.special.airy_ai, DENSE, grad=1)[1]
    else:
        got = _run(lm.special.airy_ai, DENSE)
    err = ai_error(DENSE, got, deriv)
    normal = np.array([abs(float(mp.airyai(mp.mpf(v), int(deriv)))) >= 2.3e-308 for v in DENSE])
    assert err[normal].max() < 5
    sub = ~normal  # subnormal results: to the last subnormal place
    want = np.array([float(mp.airyai(mp.mpf(v), int(deriv))) for v in DENSE[sub]])
    np.testing.assert_allclose(got[sub], want, rtol=0, atol=1e-323)


def test_float64_far_negative_error_growth():
    """Past -1e10 the phase's rounding, ``zeta * 2e-32`` rad, shows: at most ``zeta * 3e-32 + 5 eps`` of
    the envelope (11 eps at -3e11, 1.6e-10 at -1e15)."""
    mp.dps = 50
    x = -(10 ** np.linspace(9, 15, 25))
    err = ai_error(x, _run(lm.special.airy_ai, x)) * 2.0**-52
    zeta = 2 / 3 * np.abs(x) ** 1.5
    assert np.all(err < zeta * 3e-32 + 5 * 2.0**-52)


def test_float32_within_an_ulp_wide_grid():
    """Random float32 inputs over [-1e4, 30] and a log grid to -1e7: the float64 value rounded once is
    within an ulp of the exact one (also near the zeros, where no float32 input lies closer to a zero
    than half its spacing)."""
    mp.dps = 40
    rng = np.random.default_rng(7)
    x = np.concatenate([rng.uniform(-12, 12, 1500), rng.uniform(-1e4, 30, 1500), -(10 ** rng.uniform(1, 7, 500)),
                        rng.uniform(10, 26, 300)]).astype(np.float32).astype(np.float64)
    got = _run(lm.special.airy_ai, x, dtype=lm.float32).astype(np.float64)
    want = np.array([float(mp.airyai(mp.mpf(v))) for v in x])
    keep = np.abs(want) >= 2.0**-126  # (subnormal float32 results: to a subnormal step)
    ulp = np.spacing(np.abs(want[keep]).astype(np.float32)).astype(np.float64)
    assert (np.abs(got[keep] - want[keep]) / ulp).max() <= 1.0
    assert np.abs(got[~keep] - want[~keep]).max() <= 2.0**-149
    assert math.isfinite(got.sum())
