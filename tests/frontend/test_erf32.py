"""float32 erf (a clamped rational, ``frontend/ops/elementwise.py``): the properties a user relies on
beyond the parity tests' tolerances: never outside [-1, 1] (so ``1 - erf`` and ``gelu`` keep their
signs), exact +-1 and signed zeros at the ends, a few ulps from the true erf, a gradient that is
2/sqrt(pi) exp(-x^2) (``Graph.custom_vjp``) at any order, and a backward pass that keeps few values
of the forward."""

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


@pytest.mark.parametrize("dtype", [lm.float32, lm.float64])
def test_second_derivatives_of_erf_and_tanh(dtype):
    """The custom gradients are built of ops, so their own gradients are the functions' second
    derivatives: erf'' = -2x erf', tanh'' = -2 tanh (1 - tanh^2)."""
    xs = np.linspace(-3, 3, 61).astype(dtype.np)
    g = lm.Graph()
    x = g.input("x", xs.shape, dtype=dtype)
    (d_erf,) = train.grad(x.erf().sum(), [x])
    (d_tanh,) = train.grad(x.tanh().sum(), [x])
    (dd_erf,) = train.grad(d_erf.sum(), [x])
    (dd_tanh,) = train.grad(d_tanh.sum(), [x])
    got = lm.compile([dd_erf, dd_tanh], backend="cpu")(x=xs)
    x64 = xs.astype(np.float64)
    erf1 = 2 / math.sqrt(math.pi) * np.exp(-x64 ** 2)
    t = np.tanh(x64)
    tol = dict(rtol=1e-5, atol=1e-6) if dtype is lm.float32 else dict(rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(got[0], -2 * x64 * erf1, **tol)
    np.testing.assert_allclose(got[1], -2 * t * (1 - t * t), **tol)


def _ancestors(node) -> dict:
    seen, stack = {}, [node]
    while stack:
        n = stack.pop()
        if n.id not in seen:
            seen[n.id] = n
            stack.extend(s for s, _ in n.srcs)
    return seen


@pytest.mark.parametrize("dtype", [lm.float32, lm.float64])
def test_the_backward_pass_keeps_few_forward_values(dtype):
    """GELU's gradient reads erf's input and value, not the rational's Horner steps: differentiating the
    rational (the float64 series) kept 21 (43) values of the forward pass alive for the backward pass,
    each a buffer of the activation's size once the two are different kernels (a transformer's)."""
    g = lm.Graph()
    x = g.input("x", ("B", 8), dtype=dtype)
    y = x.gelu()
    (dx,) = train.grad(y.sum(), [x])
    forward = _ancestors(y.node)
    backward = [n for i, n in _ancestors(dx.node).items() if i not in forward]
    kept = {s.id for n in backward for s, _ in n.srcs if s.id in forward and s.op not in ("Input", "Constant")}
    assert len(kept) <= 3, len(kept)

