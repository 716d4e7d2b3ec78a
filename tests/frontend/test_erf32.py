"""float32 erf (a clamped rational, ``frontend/ops/elementwise.py``): the properties a user relies on
beyond the parity tests' tolerances: never outside [-1, 1] (so ``1 - erf`` and ``gelu`` keep their
signs), exact +-1 and signed zeros at the ends, a few ulps from the true erf, and a gradient that is
2/sqrt(pi) exp(-x^2) (``Graph.custom_vjp``; its second derivative and the values its backward pass
keeps: ``tests/train/test_custom_vjp.py``)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import luminal as lm
from luminal import train

GRID = np.concatenate([np.linspace(-4.5, 4.5, 9001), np.linspace(3.5, 4.1, 3001), [0.0, -0.0, 1e-30, -1e-38]])
GRID = GRID.astype(np.float32)


def _erf(backend, xs):
    g = lm.Graph()
    x = g.input("x", xs.shape)
    return lm.compile(x.erf(), backend=backend)(x=xs)


@pytest.mark.parametrize("backend", ["reference", "cpu"])
def test_values_stay_in_range_and_near_erf(backend):
    got = _erf(backend, GRID)
    assert np.all(np.abs(got) <= 1.0)
    want = np.array([math.erf(float(v)) for v in GRID])
    ulps = np.abs(got - want) / np.spacing(np.abs(want).astype(np.float32))
    assert ulps.max() <= 10, f"{ulps.max():.1f} ulps at x = {GRID[ulps.argmax()]}"
    assert np.all(got[np.abs(GRID) >= 4.0] == np.sign(GRID[np.abs(GRID) >= 4.0]))


@pytest.mark.parametrize("backend", ["reference", "cpu"])
def test_special_values(backend):
    xs = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, 30.0, -30.0], np.float32)
    got = _erf(backend, xs)
    np.testing.assert_array_equal(got[[0, 1, 5, 6]], [1, -1, 1, -1])
    assert np.isnan(got[2]) and got[3] == 0 and not np.signbit(got[3]) and np.signbit(got[4])


def test_gelu_keeps_its_sign_in_the_far_tail():
    xs = np.linspace(-8.0, -5.0, 301).astype(np.float32)
    g = lm.Graph()
    x = g.input("x", xs.shape)
    got = lm.compile(x.gelu(), backend="cpu")(x=xs)
    assert np.all(got <= 0)


def test_gradient_is_near_the_analytic_one():
    xs = np.linspace(-4.5, 4.5, 2001).astype(np.float32)
    g = lm.Graph()
    x = g.input("x", xs.shape)
    (dx,) = train.grad(x.erf().sum(), [x])
    got = lm.compile(dx, backend="cpu")(x=xs)
    want = 2 / math.sqrt(math.pi) * np.exp(-xs.astype(np.float64) ** 2)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-30)
    assert got[1000] == pytest.approx(2 / math.sqrt(math.pi), rel=1e-6)  # x = 0

