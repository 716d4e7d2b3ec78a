"""float64 lgamma to its relative precision below 10, its zeros at 1 and 2 included: Stirling's sum at
the shifted argument and the log of the shift's product cancelled there, to an absolute 1e-15 (7e13
ulps at 2 - 1e-12, 1e-10 relative at 1.9999, 85 ulps at 2.7). Now a series in ``x - 1`` after the
recurrence down: within 16 ulps of mpmath on (0, 30] (measured 9.9, at 1.507; the reflection's
negative arguments keep their cancellation near the negative zeros)."""

from __future__ import annotations

import mpmath
import numpy as np
import pytest

import luminal as lm


def _points():
    rng = np.random.default_rng(0)
    near = np.logspace(-13, -1, 60)
    return np.concatenate([rng.uniform(0.01, 10.5, 600), rng.uniform(10, 30, 100), 1 + near, 1 - near, 2 + near,
                           2 - near, [0.5, 2.5, 10.0, 1.0, 2.0, 3.0]])


@pytest.mark.parametrize("backend", ["cpu", "reference"])
def test_float64_lgamma_within_16_ulps_on_0_to_30(backend):
    xs = _points()
    g = lm.Graph()
    x = g.input("x", (len(xs),), dtype=lm.float64)
    got = lm.compile(lm.lgamma(x), backend=backend)(x=xs)
    mpmath.mp.prec = 120
    for v, o in zip(xs, got, strict=True):
        want = mpmath.loggamma(mpmath.mpf(float(v))).real
        if want == 0:
            assert o == 0.0, v
            continue
        ulps = abs(mpmath.mpf(float(o)) - want) / np.spacing(abs(float(want)))
        assert ulps <= 16, (float(v), float(ulps))
