"""Single-pass rows on the GPU (``codegen/lowering/rows.py``): softmax, log-softmax, LayerNorm and
RMSNorm run as one launch of a block per row instead of a launch per kernel, on the simulated device,
and give the reference's values: rows shorter and longer than a block, 16-bit inputs. A run whose
buffers the memory plan lets share storage, or whose rows the cost model splits or gives a thread
each, stays kernel by kernel. (A symbolic batch and a backward pass: ``tests/codegen/test_row_runs.py``.)"""

from __future__ import annotations

import numpy as np
import pytest

import luminal as lm
from luminal.codegen.lowering import rows
from luminal.codegen.target import CUDA
from luminal.nn import functional as F


def _programs(y, inputs: dict):
    f = lm.compile(y, backend="cuda-emulated")
    want = lm.compile(y, backend="reference")(**inputs)
    return f, f(**inputs), want


def _schedules(f) -> list:
    return [(s.kernel.kind, [x.choice for x in s.launches]) for s in f.runner.program.steps]


NORMS = {
    "softmax": lambda x: x.softmax(-1),
    "log_softmax": lambda x: x.log_softmax(-1),
    "layer_norm": lambda x: F.layer_norm(x, (x.shape[-1],), eps=1e-5),
    "rms_norm": lambda x: F.rms_norm(x, (x.shape[-1],), eps=1e-6),
}


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("shape", [(6, 37), (3, 1000), (2, 3, 130)], ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("norm", list(NORMS))
def test_norms_run_as_one_launch_per_run_and_match_the_reference(norm, shape, dtype):
    g = lm.Graph()
    x = g.input("x", shape, dtype=getattr(lm, dtype))
    a = np.random.default_rng(1).standard_normal(shape).astype(dtype)
    f, got, want = _programs(NORMS[norm](x), {"x": a})
    tol = 2e-6 if dtype == "float32" else 2e-3
    np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64), rtol=tol, atol=tol)
    sched = _schedules(f)
    assert any(choices == ["rows"] for _, choices in sched), sched
    assert sum(len(c) for _, c in sched) < len(sched), "the run's later kernels should launch nothing"


def test_a_run_whose_outputs_may_share_storage_with_its_reads_is_unsafe():
    """``overlaps``: the plan lets a kernel's output take the storage of what only earlier kernels read;
    one pass would write it while other rows still read it."""
    g = lm.Graph()
    x = g.input("x", (4, 9))
    f = lm.compile((x * 2.0).softmax(-1), backend="cuda-emulated")
    f(x=np.ones((4, 9), np.float32))
    program = f.runner.program
    kernels = [s.kernel for s in program.steps]
    start, stop = rows.runs(kernels)[-1]  # (exp(2x - max) is a temp of its own: two runs)
    run = kernels[start:stop]
    assert not rows.overlaps(run, program.plan.slot_of, {})
    read = next(b for b, _ in run[0].inputs if b.kind == "temp")
    written = run[-1].outputs[0][0]
    assert rows.overlaps(run, {**program.plan.slot_of, written.id: program.plan.slot_of[read.id]}, {})


@pytest.mark.parametrize("shape", [(64, 16), (2, CUDA.split_row)], ids=["short rows", "few long rows"])
def test_rows_the_cost_model_runs_otherwise_stay_kernel_by_kernel(shape):
    """Short rows (a thread per row) and a few very long ones (split over many blocks): one block per
    row would idle most of a block, or most of the device."""
    g = lm.Graph()
    x = g.input("x", shape)
    a = np.random.default_rng(2).standard_normal(shape).astype(np.float32)
    f, got, want = _programs(x.softmax(-1), {"x": a})
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)
    assert all(choices != ["rows"] for _, choices in _schedules(f)), _schedules(f)
