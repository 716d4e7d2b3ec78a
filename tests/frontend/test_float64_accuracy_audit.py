"""float64 digamma, lgamma and pow against mpmath (50 digits), in ulps of the float64 result.

Before: digamma summed the recurrence to 10 and Stirling's series there, which cancel near its root
1.4616... to an absolute 5e-16 (74 ulps at 1.5, 4000 within 0.01 of the root, 11 at 0.7); lgamma
cancelled in the reflection on (0, 1/2) (13 ulps) and in ``log(u) + lgamma(u)`` on [1.5, 2) (9 ulps);
pow carried ``b log2(m)`` in one double, so its rounding grew with the exponent (100 ulps for
``|b ln a|`` near 700, and ``1.9158 ** 1082.6``, 1e305, overflowed to inf). Relative error is the
measure also at the roots (digamma's 1.4616..., lgamma's 1 and 2): the inputs are exact doubles, so
the correctly rounded value is the target there too. The negative axis (the reflection, which
cancels near each root between the poles) is measured by absolute error in ulps of 1.
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
import torch

import luminal as lm
from tests.mp_ulps import ulps, worst
from tests.parity import check

ROOT = 1.4616321449683622  # digamma's positive root, rounded


def _run(f, backend, **arrays):
    g = lm.Graph()
    xs = {k: g.input(k, (len(v),), dtype=lm.float64) for k, v in arrays.items()}
    return lm.compile(f(*xs.values()), backend=backend)(**arrays)


def _near(c):
    d = np.logspace(-15, -1, 40)
    return np.concatenate([c + d, c - d])


@pytest.mark.parametrize("backend", ["cpu", "reference"])
def test_float64_digamma_within_3_ulps_on_the_positive_axis_its_root_included(backend):
    rng = np.random.default_rng(0)
    xs = np.concatenate([rng.uniform(0.01, 12, 700), rng.uniform(12, 60, 100), np.logspace(-300, -2, 20),
                         _near(ROOT), [ROOT, np.nextafter(ROOT, 2), np.nextafter(ROOT, 0), 1.5, 0.7, 1.0,
                                       2.0, 3.0, 10.0]])
    err, at = worst(xs, _run(lm.digamma, backend, x=xs), mpmath.digamma)
    assert err <= 3, (err, at)


@pytest.mark.parametrize("backend", ["cpu", "reference"])
def test_float64_lgamma_within_3_ulps_on_0_to_60_its_zeros_included(backend):
    rng = np.random.default_rng(1)
    xs = np.concatenate([rng.uniform(0.001, 12, 700), rng.uniform(12, 60, 100), np.logspace(-300, -2, 20),
                         _near(1.0), _near(2.0), [0.3, 0.5, 1.6, 2.5]])
    err, at = worst(xs, _run(lm.lgamma, backend, x=xs), lambda v: mpmath.loggamma(v).real)
    assert err <= 3, (err, at)


def test_float64_lgamma_and_digamma_on_the_negative_axis_within_an_absolute_few_ulps_of_1():
    """Between the poles both cross zero (digamma once per interval, lgamma twice from -2 on): the
    reflection's terms cancel there, so the error is bounded absolutely, in ulps of 1, times the size
    of the terms (``lgamma(1 - x)``: 13 at -9.5)."""
    rng = np.random.default_rng(2)
    xs = rng.uniform(-10, 0, 300)
    xs = xs[np.abs(xs - np.round(xs)) > 1e-3]
    for f, exact in ((lm.lgamma, lambda v: mpmath.loggamma(v).real), (lm.digamma, mpmath.digamma)):
        got = _run(f, "cpu", x=xs)
        with mpmath.workdps(50):
            for v, o in zip(xs, got, strict=True):
                want = exact(mpmath.mpf(float(v)))
                size = max(1.0, abs(float(want)), abs(float(exact(1 - mpmath.mpf(float(v))))))
                assert abs(mpmath.mpf(float(o)) - want) <= 4 * size * np.spacing(1.0), (f.__name__, v)


def _pow_cases():
    rng = np.random.default_rng(3)
    n = 400
    a1 = rng.uniform(0.5, 2, n)  # bases near 1, exponents up to the overflow threshold
    b1 = rng.uniform(-709, 709, n) / np.log(a1)
    a2 = np.exp(rng.uniform(-40, 40, n))
    b2 = rng.uniform(-700, 700, n) / np.log(a2)
    a3 = np.exp(rng.uniform(-700, 700, n))  # any base, ordinary exponents
    b3 = rng.uniform(-1, 1, n)
    a = np.concatenate([a1, a2, a3, [1.915836894503012, 2.0, 10.0, 1.0000001, 5e-324, 0.5]])
    b = np.concatenate([b1, b2, b3, [1082.600440243109, -1074.0, 308.0, 7.0e9, 0.5, 1074.5]])
    return a, b


@pytest.mark.parametrize("backend", ["cpu", "reference"])
def test_float64_pow_within_an_ulp_for_exponents_up_to_the_overflow_threshold(backend):
    a, b = _pow_cases()
    got = _run(lm.pow, backend, a=a, b=b)
    largest = (0.0, None)
    with mpmath.workdps(50):
        for p, q, o in zip(a, b, got, strict=True):
            want = mpmath.power(mpmath.mpf(float(p)), mpmath.mpf(float(q)))
            if want > np.finfo(np.float64).max:
                assert o == math.inf, (p, q, o)
            elif want < np.finfo(np.float64).tiny:  # subnormal: within an ulp of the smallest one
                assert abs(mpmath.mpf(float(o)) - want) <= 5e-324, (p, q, o)
            else:
                largest = max(largest, (ulps(o, want), (float(p), float(q))))
    assert largest[0] <= 1, largest


def test_float64_pow_of_a_number_exponent_within_an_ulp():
    xs = np.exp(np.random.default_rng(4).uniform(-700, 700, 300))
    got = _run(lambda x: x ** 2.5, "cpu", x=xs)
    with mpmath.workdps(50):
        want = [mpmath.mpf(float(v)) ** mpmath.mpf(2.5) for v in xs]
    fin = np.finfo(np.float64)
    finite = [(o, w) for o, w in zip(got, want, strict=True) if fin.tiny < w < fin.max]
    assert max(ulps(o, w) for o, w in finite) <= 1


NAN, INF = math.nan, math.inf


def test_float64_pow_special_values():
    """IEEE 754's pow (C99 F.9.4.4), written out."""
    cases = [(0.0, 0.0, 1.0), (-0.0, 0.0, 1.0), (INF, 0.0, 1.0), (-INF, -0.0, 1.0), (NAN, 0.0, 1.0),
             (2.5, 0.0, 1.0), (1.0, NAN, 1.0), (1.0, INF, 1.0), (1.0, -INF, 1.0), (1.0, 2.5, 1.0),
             (-8.0, 1 / 3, NAN), (-2.0, 0.5, NAN), (0.0, -1.0, INF), (-0.0, -1.0, -INF), (0.0, -0.5, INF),
             (-0.0, -2.0, INF), (0.0, 3.0, 0.0), (-0.0, 3.0, -0.0), (-1.0, INF, 1.0), (-1.0, -INF, 1.0),
             (0.5, INF, 0.0), (0.5, -INF, INF), (2.0, INF, INF), (2.0, -INF, 0.0), (-INF, 0.5, INF),
             (-INF, 3.0, -INF), (-INF, -3.0, -0.0), (INF, -1.0, 0.0), (-2.0, 3.0, -8.0), (2.0, 1024.0, INF),
             (2.0, -1074.0, 5e-324), (2.0, -1080.0, 0.0), (NAN, 1.0, NAN), (2.0, NAN, NAN)]
    a, b, want = (np.array(c, dtype=np.float64) for c in zip(*cases, strict=True))
    got = _run(lm.pow, "cpu", a=a, b=b)
    for p, q, w, o in zip(a, b, want, got, strict=True):
        assert (np.isnan(w) and np.isnan(o)) or (o == w and np.signbit(o) == np.signbit(w)), (p, q, o, w)


def test_float64_digamma_and_lgamma_special_values():
    xs = np.array([0.0, -0.0, -1.0, -2.0, -100.0, INF, -INF, NAN, 1.0, 2.0])
    dig = _run(lm.digamma, "cpu", x=xs)
    np.testing.assert_array_equal(dig[:8], [-INF, INF, NAN, NAN, NAN, INF, NAN, NAN])
    # -euler and 1 - euler, within an ulp
    np.testing.assert_allclose(dig[8:], [-0.5772156649015329, 0.42278433509846713], rtol=2.3e-16, atol=0)
    lg = _run(lm.lgamma, "cpu", x=xs)
    np.testing.assert_array_equal(lg[:8], [INF, INF, INF, INF, INF, INF, INF, NAN])
    assert lg[8] == 0.0 and lg[9] == 0.0  # exactly


@pytest.mark.parametrize("name", ["digamma", "lgamma"])
def test_float64_gradients_match_torch(name):
    rng = np.random.default_rng(5)
    x = np.concatenate([rng.uniform(0.05, 12, 40), _near(ROOT)[::8], rng.uniform(-5, -0.05, 10)])
    check(getattr(lm, name), [x], torch_op=getattr(torch, name), backend="cpu")


def test_float64_pow_gradients_match_torch():
    rng = np.random.default_rng(6)
    a = np.concatenate([rng.uniform(0.5, 2, 30), np.exp(rng.uniform(-20, 20, 30))])
    b = np.concatenate([rng.uniform(-300, 300, 30), rng.uniform(-3, 3, 30)])
    check(lm.pow, [a, b], torch_op=torch.pow, backend="cpu", rtol=1e-13, atol=0, grad_rtol=1e-12, grad_atol=0)
