"""Errors of float64 results in ulps against mpmath (the float64 accuracy audits' shared measure)."""

from __future__ import annotations

import math

import mpmath
import numpy as np

import luminal as lm
from luminal import train


def ulps(got, want) -> float:
    """|got - want| in ulps of the float64 nearest ``want`` (an mpf; subnormal spacing below the
    normals). Past the largest double, ``got`` must overflow to the same infinity (else inf)."""
    if math.isinf(float(want)):
        return 0.0 if float(got) == float(want) else math.inf
    return float(abs(mpmath.mpf(float(got)) - want) / np.spacing(abs(float(want))))


def worst(xs, got, exact) -> tuple[float, float]:
    """The largest error of ``got`` (at the points ``xs``) against ``exact`` (an mpmath function,
    evaluated at 50 digits), in ulps, and the point where it is."""
    with mpmath.workdps(50):
        errs = [ulps(o, exact(mpmath.mpf(float(v)))) for v, o in zip(xs, got, strict=True)]
    i = int(np.argmax(errs))
    return errs[i], float(xs[i])


def value_and_slope(f, xs, backend: str = "cpu"):
    """``f`` of the float64 points ``xs`` and its derivative there (the gradient of the sum)."""
    g = lm.Graph()
    x = g.input("x", (len(xs),), dtype=lm.float64)
    y = f(x)
    (gx,) = train.grad(y.sum(), [x])
    return lm.compile([y, gx], backend=backend)(x=xs)
