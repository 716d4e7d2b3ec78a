"""Loop detection finds a repeated block whole when a multiple of its period ranks above it.

Candidate periods are ranked by how many positions agree with the one a period later, over the whole
graph, so a common multiple gathers the agreements of every region whose period divides it. With
chains of 6-, 10- and 5-node steps, 30 ranked first and 5's and 10's multiples filled the other
places, 6 was never tried: the 6-node chain rolled with period 30 (five steps a trip), at some
lengths as two loops (18 and 12 nodes), and the kernels generated jumped with the chain's length
(lstsq's backward: 78 kernels at n = 24, 86 at n = 28, the 6-node loop applying Z to the pinv's
columns). Each chain here is its own input's steps, one node each, distinct ops within a step."""

from __future__ import annotations

import numpy as np
import pytest

import luminal as lm
from luminal.backends.reference.interpreter import ReferenceInterpreter
from luminal.compiler.rolling import Loops
from luminal.frontend.ops.core import prim

STEP = [  # one node each, distinct labels; values stay in [0.2, 6]
    lambda h, w: prim("Mul", h, w),
    lambda h, w: prim("Sin", h),
    lambda h, w: h + 1.5,
    lambda h, w: prim("Exp2", h),
    lambda h, w: prim("Sqrt", h),
    lambda h, w: prim("Recip", h),
    lambda h, w: h + w,
    lambda h, w: prim("Log2", h),
    lambda h, w: h * 0.5,
    lambda h, w: prim("Max", h, w),
]
OTHERS = [(10, 6), (5, 18), (5, 18)]  # (nodes a step, steps) of the chains built after the 6-node one


def _chains(steps: int):
    """A chain of ``steps`` 6-node steps, then the ``OTHERS``; each chain on its own width, so no class
    is shared between chains. Returns the graph, the chains' ends and their inputs."""
    g = lm.Graph()
    outs, arrays = [], {}
    rng = np.random.default_rng(steps)
    for i, (body, trips) in enumerate([(6, steps)] + OTHERS):
        width = 3 + i
        h = g.input(f"c{i}", (width,))
        arrays[f"c{i}"] = rng.uniform(0.5, 1.5, width).astype(np.float32)
        for t in range(trips):
            w = g.input(f"c{i}_w{t}", (width,))
            arrays[f"c{i}_w{t}"] = rng.uniform(0.5, 1.5, width).astype(np.float32)
            for step in STEP[:body]:
                h = step(h, w)
        outs.append(h)
    return g, outs, arrays


@pytest.mark.parametrize("steps", [20, 24, 28, 32])
def test_each_chain_is_one_loop_of_its_own_period(steps):
    g, outs, _ = _chains(steps)
    found = Loops(g, [o.node for o in outs])
    got = [(w.period, w.length, w.trips) for w in found.spans]
    assert got == [(6, 6, steps)] + [(body, body, trips) for body, trips in OTHERS], got


def _compiled(steps: int):
    g, outs, arrays = _chains(steps)
    f = lm.compile(outs, backend="cpu")
    want = ReferenceInterpreter([(t.node, t.layout) for t in outs], g.constants)(arrays, {})
    for a, b in zip(f(**arrays), want, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    return f.report(show=False)


def test_kernels_generated_do_not_grow_with_the_chain():
    """The chains' values equal the reference interpreter's; 24, 28 and 32 steps roll the same loops
    and generate the same kernels (4; before, 24 and 28 rolled the 6-node chain with period 30 and
    generated 8 and 5)."""
    reports = {steps: _compiled(steps) for steps in (24, 28, 32)}
    others = [(body, trips) for body, trips in OTHERS]
    for steps, r in reports.items():
        assert [(lp["body_nodes"], lp["trips"]) for lp in r.loops] == [(6, steps)] + others, r.loops
    kernels = {steps: r.codegen["kernels"] for steps, r in reports.items()}
    assert len(set(kernels.values())) == 1, kernels
