"""Graphs thousands of operations deep compile and run: no pass of the compiler or of a backend
recurses once per level (Python's recursion limit is about a thousand frames). The full size of the
issue's probe, a 20,000-op chain, is measured outside the suite (time and memory in the notes); here
a chain deeper than the recursion limit, its gradient, and an or-chain as deep.

The limit is lowered for the test to ``HEADROOM`` frames above the test's own, so that a chain of
``DEPTH`` ops is past it at a fraction of the cost of one past the default limit (a 3000-op chain took
a minute; the compile grows faster than the chain). Measured: the compiler and the cpu backend need
120 to 150 frames above the caller for such a chain, whatever its depth; the cpu backend before
79d9fb2, which recursed once per level (``cpu/exprs.py``), fails this test (RecursionError) and
passes it with the default limit."""

from __future__ import annotations

import sys

import numpy as np
import pytest

import luminal as lm
from luminal import train

DEPTH = 800
HEADROOM = 330  # frames the test allows the compile above its own: more than twice what it needs
assert DEPTH > 2 * HEADROOM


def _frames() -> int:
    f, n = sys._getframe(), 0
    while f is not None:
        f, n = f.f_back, n + 1
    return n


def _chain(x, n, seed=0):
    """``n`` random elementwise ops (the probe's mix: *c, +c, sin, -c, tanh, maximum(t, -c)), fused
    into one kernel: nothing repeats, so no loop is rolled."""
    rng = np.random.default_rng(seed)
    t = x
    for _ in range(n):
        k, c = int(rng.integers(6)), float(rng.uniform(0.5, 1.5))
        t = (lambda: t * c, lambda: t + c, t.sin, lambda: t - c, t.tanh, lambda: t.maximum(-c))[k]()
    return t


@pytest.mark.slow
def test_a_chain_deeper_than_the_recursion_limit_compiles_and_runs():
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(_frames() + HEADROOM)  # building the graph and its gradient too
    try:
        g = lm.Graph()
        x = g.input("x", ("B", 16))
        y = _chain(x, DEPTH)
        (gx,) = train.grad(_chain(x, DEPTH // 2, seed=1).sum(), [x])
        m = x > 0
        for i in range(DEPTH // 2):
            m = m | (x > i / DEPTH)
        a = np.linspace(-1, 1, 48, dtype=np.float32).reshape(3, 16)
        got = lm.compile([y, gx, m], backend="cpu")(x=a)
        want = lm.compile([y, gx, m], backend="reference")(x=a)
    finally:
        sys.setrecursionlimit(limit)
    for o, w in zip(got, want, strict=True):
        np.testing.assert_allclose(o, w, rtol=1e-4, atol=1e-5)
