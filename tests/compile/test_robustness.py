"""Robustness of the compiler on the graph shapes that break e-graph tools: very deep chains and long sums.

Why: egglog's pitfalls (``shared/notes/egglog.md``) are depth and width, not cleverness: deeply nested
terms overflow recursion or the parser, tree-cost extraction overflows on shared DAGs, and an unbounded
associativity rule explodes on a long sum. Each test compiles such a graph for ``cpu``, runs it under
two bindings of a symbolic dim, compares with the reference interpreter, and holds compile + run to a
generous bound on peak memory and the e-graph to a size proportional to the graph: tripwires for
blow-ups (gigabytes, millions of rows), never timings (``bench/`` measures speed; the egglog
``Budget`` bounds the rewrite runs' wall time inside the compiler).
"""

from __future__ import annotations

import resource
from pathlib import Path

import numpy as np

import luminal as lm

ENODES_PER_NODE = 4  # rewrites add alternatives; an explosion adds orders of magnitude more
RSS_LIMIT_BYTES = 2 * 2**30


def _reset_peak_rss() -> bool:
    """Reset the kernel's peak-RSS mark of this process (Linux: ``5`` into clear_refs), so that
    VmHWM afterwards is the peak of what ran in between; False where that is not possible."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def _peak_rss() -> int:
    """Peak resident set size in bytes: VmHWM (resettable) or, failing that, ru_maxrss (a lower bound
    on the growth, since an earlier peak of the process hides a later one)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _current_rss() -> int:
    """Resident set size now (VmRSS): the base the peak is measured from after a reset."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return _peak_rss()


def compile_and_compare(outputs, make_inputs, *, rtol: float, atol: float):
    """Compile ``outputs`` for ``cpu`` and run it under two bindings (``make_inputs(b)`` gives the
    inputs for batch size ``b``) within the memory and e-graph bounds; compare with the reference.
    Returns the compile report."""
    base = _current_rss() if _reset_peak_rss() else _peak_rss()
    compiled = lm.compile(outputs, backend="cpu")
    runs = [(b, compiled(**make_inputs(b))) for b in (3, 5)]
    grown = _peak_rss() - base
    report = compiled.report(show=False)
    assert report.egraph["enodes"] <= ENODES_PER_NODE * report.nodes_before + 100, report.egraph
    assert grown < RSS_LIMIT_BYTES, f"peak RSS grew by {grown / 2**20:.0f} MiB (limit {RSS_LIMIT_BYTES / 2**20:.0f})"
    reference = lm.compile(outputs, backend="reference")
    for b, got in runs:
        np.testing.assert_allclose(got, reference(**make_inputs(b)), rtol=rtol, atol=atol, err_msg=f"B={b}")
    return report


def _inputs(*specs):
    """``make_inputs`` for named inputs ``(name, rest, batched)`` of shape ``(B, *rest)`` or ``rest``
    (seeded by B, so both backends see the same arrays)."""
    def make(b):
        rng = np.random.default_rng(b)
        return {name: rng.uniform(-1, 1, size=(b, *rest) if batched else rest).astype(np.float32)
                for name, rest, batched in specs}
    return make


def test_deep_elementwise_chain():
    """5,000 elementwise primitives in one dependency chain (no two steps alike, so hash-consing
    cannot shorten it): recursion in term building, extraction or lowering shows up here."""
    g = lm.Graph()
    x = g.input("x", ("B", 16))
    y = x * 0.1
    h = x
    for i in range(1667):  # sin, mul, add per step; |d step / d h| <= 0.9 keeps errors from growing
        h = h.sin() * (0.9 - 0.01 * (i % 7)) + y
    assert len(g.nodes) >= 5000
    compile_and_compare(h, _inputs(("x", (16,), True)), rtol=1e-4, atol=1e-5)


def test_residual_chain():
    """``x = x + f(x)`` 300 times with a matmul in ``f``: the residual-stream shape of every deep model
    (and of a loop-rolling target), with each step's value read twice."""
    g = lm.Graph()
    x = g.input("x", ("B", 32))
    w = g.input("w", (32, 32))
    h = x
    for _ in range(300):
        h = h + (h @ w).tanh() * 0.01
    compile_and_compare(h, _inputs(("x", (32,), True), ("w", (32, 32), False)), rtol=1e-3, atol=1e-4)


def test_long_sum():
    """A sum of 500 distinct terms: unbounded associativity/commutativity rewriting of such a chain
    is the documented e-graph explosion (millions of rows), so this bounds time and memory."""
    g = lm.Graph()
    x = g.input("x", ("B", 8))
    total = None
    for i in range(500):
        term = (x * (0.5 + 0.01 * i)).sin()
        total = term if total is None else total + term
    # any summation order is fine: 500 terms of magnitude <= 1 allow ~500 * 1e-5 of drift
    compile_and_compare(total, _inputs(("x", (8,), True)), rtol=1e-4, atol=5e-3)


def test_tripwires_pass_a_trivial_graph():
    """The tripwires themselves: a one-op graph passes them (so a failure above is about the graph)."""
    g = lm.Graph()
    x = g.input("x", ("B", 4))
    assert compile_and_compare(x + 1, _inputs(("x", (4,), True)), rtol=0, atol=0).budget_hit is None
