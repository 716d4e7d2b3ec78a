"""``nn.AlphaDropout`` / ``F.alpha_dropout`` and ``nn.FeatureAlphaDropout`` / ``F.feature_alpha_dropout``
against torch: the affine constants (read off torch's own outputs), each output element either
``a * x + b`` (kept) or ``-alpha * a + b`` (dropped), mean 0 and variance 1 kept on standard normal
input, one draw per (sample, channel) for the feature variant, the gradient ``a * mask`` from the same
run's draws, eval mode and p = 0 the identity (no draws), p = 1 zeros, fresh masks on every run, and
the errors naming the layer."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import luminal as lm
import luminal.nn.functional as F
from luminal import nn, train
from luminal.nn.layers.alpha_dropout import ALPHA, affine_constants

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def randn(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _run(make, x, backend, shape=None):
    """``make(t)`` on a graph input of ``x``'s shape (or ``shape``): the output and the gradient of its sum
    by the input, from one run (the same draws), and the graph."""
    g = lm.Graph()
    g.rng = np.random.default_rng(0)
    t = g.input("x", shape or x.shape)
    y = make(t)
    f = lm.compile([y, train.grad(y.sum(), t)], backend=backend)
    return f, g


def _split(x, y, p):
    """(kept, dropped) masks: ``y`` is ``a * x + b`` or ``-ALPHA * a + b`` at every element."""
    a, b = affine_constants(p)
    kept = np.isclose(y, a * x + b, rtol=1e-5, atol=1e-5)
    dropped = np.isclose(y, -ALPHA * a + b, rtol=1e-5, atol=1e-5)
    assert (kept | dropped).all(), "an output is neither a kept nor a dropped value"
    return kept, dropped & ~kept


@pytest.mark.parametrize("p", [0.05, 0.2, 0.5, 0.9])
def test_affine_constants_are_torchs(p):
    """torch's kept outputs are ``a * x + b``, its dropped ones ``-alpha * a + b``, at every p: read a and b
    off torch at x = 0 and x = 1 (an input of both, many times over, so both outcomes occur)."""
    a, b = affine_constants(p)
    assert a == pytest.approx(1 / math.sqrt((ALPHA ** 2 * p + 1) * (1 - p)), rel=1e-15)
    assert b == pytest.approx(ALPHA * a * p, rel=1e-15)
    torch.manual_seed(0)
    x = torch.zeros(2, 4000, dtype=torch.float64)
    x[1] = 1.0
    y = TF.alpha_dropout(x, p, training=True).numpy()
    values = {0: set(np.unique(y[0]).round(12)), 1: set(np.unique(y[1]).round(12))}
    dropped = round(-ALPHA * a + b, 12)
    assert values[0] == {round(b, 12), dropped}
    assert values[1] == {round(a + b, 12), dropped}


@pytest.mark.parametrize("p", [0.1, 0.5])
def test_alpha_dropout_keeps_mean_and_variance(backend, p):
    """On standard normal input (what SELU networks keep) the output's mean and variance stay 0 and 1,
    as torch's does; the drawn fraction is p; the gradient is a * mask, from the same run's draws."""
    x = randn(200, 500)
    f, _ = _run(lambda t: F.alpha_dropout(t, p, training=True), x, backend)
    y, gx = f(x=x)
    assert abs(y.mean()) < 0.02 and abs(y.var() - 1) < 0.03
    torch.manual_seed(0)
    ty = TF.alpha_dropout(torch.from_numpy(x), p, training=True).numpy()
    assert abs(y.mean() - ty.mean()) < 0.03 and abs(y.var() - ty.var()) < 0.04
    kept, dropped = _split(x, y, p)
    assert abs(dropped.mean() - p) < 0.01
    a, _ = affine_constants(p)
    np.testing.assert_allclose(gx, a * kept, rtol=1e-6, atol=0)


def test_feature_alpha_dropout_draws_per_channel(backend):
    p = 0.3
    x = randn(40, 50, 3, 4)
    f, _ = _run(lambda t: F.feature_alpha_dropout(t, p, training=True), x, backend)
    y, gx = f(x=x)
    kept, dropped = _split(x, y, p)
    per_channel = kept.reshape(40, 50, -1)
    assert (per_channel.all(-1) | (~per_channel).all(-1)).all(), "a channel partly dropped"
    assert abs(dropped.mean() - p) < 0.05
    a, _ = affine_constants(p)
    np.testing.assert_allclose(gx, a * kept, rtol=1e-6, atol=0)
    y2, _ = f(x=x)
    assert (_split(x, y2, p)[0] != kept).any()  # a fresh mask on every run


def test_feature_alpha_dropout_module_on_2d_input_and_symbolic_batch(backend):
    p = 0.5
    x = randn(300, 20)
    f, g = _run(nn.FeatureAlphaDropout(p), x, backend, shape=("B", 20))
    y, gx = f(x=x)
    kept, dropped = _split(x, y, p)  # (N, C): one draw per element
    assert abs(dropped.mean() - p) < 0.03
    np.testing.assert_allclose(gx, affine_constants(p)[0] * kept, rtol=1e-6, atol=0)
    assert f(x=x[:7])[0].shape == (7, 20)


def test_alpha_dropout_module_train_and_eval(backend):
    x = randn(50, 60)
    m = nn.AlphaDropout(0.25)
    f, g = _run(m, x, backend)
    y, gx = f(x=x)
    assert g.random and abs(_split(x, y, 0.25)[1].mean() - 0.25) < 0.02
    for m in (nn.AlphaDropout(0.25).eval(), nn.FeatureAlphaDropout(0.25).eval(), nn.AlphaDropout(0.0)):
        f, g = _run(m, x, backend)
        y, gx = f(x=x)
        np.testing.assert_array_equal(y, x)
        np.testing.assert_array_equal(gx, np.ones_like(x))
        assert not g.random


def test_functional_defaults_to_eval_as_torch(backend):
    x = randn(4, 5, 6)
    for fn in (F.alpha_dropout, F.feature_alpha_dropout):
        f, g = _run(lambda t, fn=fn: fn(t, 0.5), x, backend)
        np.testing.assert_array_equal(f(x=x)[0], x)
        assert not g.random


def test_p1_gives_zeros_as_torch(backend):
    x = randn(3, 4, 5)
    for fn, tfn in ((F.alpha_dropout, TF.alpha_dropout), (F.feature_alpha_dropout, TF.feature_alpha_dropout)):
        f, _ = _run(lambda t, fn=fn: fn(t, 1.0, training=True), x, backend)
        y, gx = f(x=x)
        np.testing.assert_array_equal(y, tfn(torch.from_numpy(x), 1.0, training=True).numpy())
        np.testing.assert_array_equal(gx, np.zeros_like(x))


def test_repr_matches_torch():
    for cls in ("AlphaDropout", "FeatureAlphaDropout"):
        assert repr(getattr(nn, cls)(0.2)) == repr(getattr(torch.nn, cls)(0.2))
        assert repr(getattr(nn, cls)()) == repr(getattr(torch.nn, cls)())


def test_alpha_dropout_errors():
    g = lm.Graph()
    x = g.input("x", (3, 4))
    with pytest.raises(ValueError, match="^AlphaDropout: dropout probability has to be between 0 and 1, but got 1.5"):
        nn.AlphaDropout(1.5)
    with pytest.raises(ValueError, match="^FeatureAlphaDropout: dropout probability has to be between 0 and 1"):
        nn.FeatureAlphaDropout(-0.1)
    with pytest.raises(TypeError, match="^AlphaDropout: p must be a number"):
        nn.AlphaDropout("0.5")
    with pytest.raises(ValueError, match="^alpha_dropout: dropout probability has to be between 0 and 1"):
        F.alpha_dropout(x, 2.0, training=True)
    with pytest.raises(ValueError, match="^feature_alpha_dropout: feature dropout needs an input of at least 2 dims"):
        F.feature_alpha_dropout(g.input("v", (5,)), 0.5, training=True)
    with pytest.raises(ValueError, match=r"^FeatureAlphaDropout\(p=0.5, inplace=False\): feature dropout needs"):
        nn.FeatureAlphaDropout()(g.input("w", (5,)))
    with pytest.raises(TypeError, match=r"^AlphaDropout\(p=0.5, inplace=False\): expected a float input, got int32"):
        nn.AlphaDropout()(g.input("i", (2, 3), dtype=lm.int32))
    with pytest.raises(TypeError, match="^alpha_dropout: "):
        F.alpha_dropout(np.zeros((2, 3), np.float32), 0.5, training=True)
