"""The 16-bit rewrite (``train.amp.autocast``, ``compile_step(compute_dtype=...)``) keeps ops of one
element in float32, their one-element operands too: a float32 constant of one element (``1e-8``,
``1e5``, a mean's element count) was read through a float16 cast first (0, inf, inf: a mean over more
than 65504 elements was 0 and nothing trained), and a float32 sum went through float16 on its way to
a float64 Cast (a mean over a symbolic batch dim: an inf loss once the sum passed 65504)."""

from __future__ import annotations

import numpy as np
import pytest

import luminal as lm
from luminal import nn, train


def test_one_element_constants_stay_float32():
    g = lm.Graph()
    x = g.input("x", (4, 3))
    s = x.sum()
    outs = [s * 1e-8, s * 1e5, s * 1e-5, s / 1e5, s + 1e-4]
    xs = np.ones((4, 3), np.float32)
    want = lm.compile(outs, backend="cpu")(x=xs)
    got = lm.compile(train.autocast(outs, lm.float16), backend="cpu")(x=xs)
    for w, o in zip(want, got):
        assert o.dtype == np.float32
        np.testing.assert_array_equal(o, w)  # the same float32 ops on the same (exact) sum of ones


@pytest.mark.parametrize("dims", [(300, 300), ("B", 300)])
def test_a_mean_over_more_elements_than_float16_counts(dims):
    g = lm.Graph()
    x = g.input("x", dims)
    m = (x * x).mean()
    xs = np.random.default_rng(0).standard_normal((300, 300)).astype(np.float32)
    want, got = lm.compile([m, *train.autocast([m], lm.float16)], backend="cpu")(x=xs)
    np.testing.assert_allclose(got, want, rtol=2e-3)


@pytest.mark.parametrize("batch_dim", ["B", 1024])
def test_a_float16_step_with_a_large_mean_trains_as_float32(batch_dim):
    rng = np.random.default_rng(0)
    batch = dict(x=(0.1 * rng.standard_normal((1024, 100))).astype(np.float32), y=np.zeros((1024, 100), np.float32))
    changes, losses = [], []
    for cd in (None, lm.float16):
        lm.manual_seed(0)
        model = nn.Linear(100, 100)
        w0 = model.weight.data.copy()
        g = lm.Graph()
        x, y = g.input("x", (batch_dim, 100)), g.input("y", (batch_dim, 100))
        step = train.compile_step(train.mse_loss(model(x) + x * 10.0, y), train.SGD(model.parameters(), lr=0.1),
                                  compute_dtype=cd, scaler=train.GradScaler() if cd is lm.float16 else None,
                                  backend="cpu")
        losses.append(step(**batch))
        assert not step.last_step_skipped
        changes.append(model.weight.data - w0)
    np.testing.assert_allclose(losses[1], losses[0], rtol=2e-3)  # (a loss above 1: its sum passes 65504)
    assert losses[0] > 0.9
    np.testing.assert_allclose(changes[1], changes[0], rtol=0.05, atol=2e-7)
