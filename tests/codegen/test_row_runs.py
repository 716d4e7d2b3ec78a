"""Single-pass rows (``codegen/lowering/rows.py``) on both code-generating backends: a symbolic batch
runs every binding, and a backward pass reads the per-row statistics the run stores. (Each backend's
own file checks its norms shape by shape: ``tests/cpu/test_norm_rows.py``, ``tests/cuda/test_rows.py``.)"""

from __future__ import annotations

import numpy as np
import pytest

import luminal as lm
import luminal.backends.cuda  # noqa: F401  (registers cuda-emulated)
from luminal.nn import functional as F
from luminal.train import grad

BACKENDS = ["cpu", pytest.param("cuda-emulated", marks=pytest.mark.slow)]  # (the GPU lowering: the full tier)


def _fused(f) -> bool:
    """Whether program ``f`` runs some run of kernels as one (a ``rows`` kernel or launch)."""
    program = f.runner.program
    if hasattr(program, "steps"):  # the CUDA program
        return any(x.choice == "rows" for s in program.steps for x in s.launches)
    binding = next(reversed(program._bindings.values()))
    return any(getattr(getattr(s, "kernel", None), "name", "").startswith("rows") for s in binding.schedule.steps)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_symbolic_batch_runs_every_binding(backend):
    g = lm.Graph()
    x = g.input("x", ("B", 40))
    y = F.layer_norm(x.softmax(-1) * 3.0, (40,))
    f, ref = lm.compile(y, backend=backend), lm.compile(y, backend="reference")
    for b in (1, 7, 300):
        a = np.random.default_rng(b).standard_normal((b, 40)).astype(np.float32)
        np.testing.assert_allclose(f(x=a), ref(x=a), rtol=1e-5, atol=1e-5)
    assert _fused(f)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_backward_pass_reads_the_statistics_the_run_stores(backend):
    """LayerNorm's gradient reads the forward's per-row mean and scale: the run stores them."""
    g = lm.Graph()
    x, w = g.input("x", (5, 33)), g.input("w", (5, 33))
    loss = (F.layer_norm(x, (33,)) * w).sum()
    (dx,) = grad(loss, [x])
    rng = np.random.default_rng(3)
    inputs = {n: rng.standard_normal((5, 33)).astype(np.float32) for n in ("x", "w")}
    f, ref = lm.compile([loss, dx], backend=backend), lm.compile([loss, dx], backend="reference")
    for got, want in zip(f(**inputs), ref(**inputs)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    assert _fused(f)


def test_structural_equality_and_replacement_reach_any_depth():
    """``ir.same_value`` and ``ir.replaced`` (what a row run uses to find the value its last phase
    computes again) walk without recursion: a fused region's value may be thousands deep."""
    from luminal.codegen import ir
    from luminal.core import dtype as dt

    def chain(depth):
        v = ir.load("x", dt.float32, ir.var("i"))
        for j in range(depth):
            v = ir.alu("Add", v, ir.const(float(j % 7), dt.float32))
        return v

    deep, again = chain(5000), chain(5000)
    assert deep is not again and ir.same_value(deep, again)
    assert not ir.same_value(deep, chain(4999))
    inner = chain(10)
    out = ir.replaced(deep, inner, ir.var("each", dt.float32))
    assert out is not deep and ir.same_value(out.args[1], deep.args[1])
    found = [v for v in ir.walk_values_of([out]) if v.op == "var" and v.arg == "each"]
    assert len(found) == 1 and not any(v.op == "load" for v in ir.walk_values_of([out]))
