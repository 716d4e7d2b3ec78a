"""A binding's schedule is data (``backends/cpu/steps.py``): typed steps that the generated driver and
the Python path (``Binding.run_steps``) both run, with the same results."""

from __future__ import annotations

import numpy as np
import pytest

import luminal as lm
from luminal import nn, train
from luminal.backends.cpu import steps
from luminal.backends.cpu.compiled import Binding
from luminal.backends.cpu.parallel import Split
from luminal.backends.cpu.plan import plan
from luminal.core.kernel_graph import expand_calls


def _flat(schedule) -> list:
    return [s for x in schedule for s in ([y for part in x.parts for y in part] if isinstance(x, Split) else [x])]


def _binding(f):
    (b,) = f.runner.program._bindings.values()
    return b


def _mlp():
    lm.manual_seed(0)
    g = lm.Graph()
    x = g.input("x", ("B", 12))
    m = nn.Sequential(nn.Linear(12, 16), nn.GELU(), nn.Linear(16, 5))
    return g, x, m


def test_the_schedule_lists_typed_steps():
    """A forward + backward of an MLP: GEMMs and generated kernels, each step unpacking as its call."""
    g, x, m = _mlp()
    out = m(x).softmax(-1)
    loss = (out * out).sum()
    f = lm.compile([out, *train.grad(loss, list(m.parameters()))], backend="cpu", shapes={"x": (6, 12)})
    schedule = _flat(_binding(f).schedule.steps)
    kinds = {type(s).__name__ for s in schedule}
    assert {"Gemm", "Kernel"} <= kinds <= {"Gemm", "Kernel", "Copy", "Round", "IndexCheck"}, kinds
    for s in schedule:
        fn, args = s
        assert fn is s.fn and args == s.args
        if isinstance(s, steps.Kernel):
            assert s.kernel is not None and 0 <= s.start <= s.stop
            assert len(s.kernel.params) == len(s.params) or (not s.kernel.params and len(s.params) == 1)
        if isinstance(s, steps.Gemm):
            assert fn is np.matmul


@pytest.mark.parametrize("batch", [1, 7, 300])
def test_driver_and_python_path_agree(batch):
    """The same binding run through the driver tables and step by step from Python: the same kernels on
    the same buffers, and the same products: the driver calls cblas_sgemm where the Python path calls
    ``np.matmul``, which may pick another BLAS routine (a GEMV for one row), so the last bit may differ."""
    g, x, m = _mlp()
    y = g.input("y", ("B",), dtype=lm.int32)
    logits = m(x)
    loss = train.cross_entropy(logits, y)
    outs = [logits.softmax(-1), loss, *train.grad(loss, list(m.parameters()))]
    f = lm.compile(outs, backend="cpu")
    rng = np.random.default_rng(batch)
    first, xa = rng.standard_normal((2, batch, 12)).astype(np.float32)
    ya = rng.integers(0, 5, batch).astype(np.int32)
    f(x=first, y=ya)  # lays the binding out (and leaves other values in its buffers)
    b = _binding(f)
    via_python = b.run_steps({"x": xa, "y": ya, **{n: s.data for n, s in f._states}})
    via_python = [np.array(a, copy=True) for a in via_python]
    via_driver = f(x=xa, y=ya)
    assert len(via_python) == len(via_driver)
    for a, w in zip(via_python, via_driver):
        np.testing.assert_allclose(a, w, rtol=1e-6, atol=1e-7)


def test_python_path_raises_the_index_error():
    """An index check is a step of its own: on the Python path too, an index out of range raises the
    reference's IndexError."""
    g = lm.Graph()
    table = g.input("t", (10, 3))
    idx = g.input("i", ("N",), dtype=lm.int32)
    f = lm.compile(table[idx] * 2, backend="cpu")
    ta = np.arange(30, dtype=np.float32).reshape(10, 3)
    f(t=ta, i=np.array([1, 2], np.int32))
    b = _binding(f)
    assert any(isinstance(s, steps.IndexCheck) for s in _flat(b.schedule.steps))
    with pytest.raises(IndexError):
        b.run_steps({"t": ta, "i": np.array([1, 12], np.int32)})


def _operands(step) -> list:
    """The operands a step reads or writes: Refs, and a kernel's buffers as ``(space, offset)``."""
    if isinstance(step, steps.Kernel):
        return list(step.buffers)
    return [x for x in step.args if isinstance(x, (steps.Ref, np.ndarray))]


def test_a_plan_is_data_that_any_binding_runs():
    """``plan(kernel graph, sizes)`` touches no memory: its steps name views of caller arrays and of the
    storages it lists, by offset and strides. Two bindings of one schedule each allocate their own
    memory, run through the driver and through the Python path, and agree with each other and with the
    reference interpreter."""
    g, x, m = _mlp()
    y = g.input("y", ("B",), dtype=lm.int32)
    logits = m(x)
    loss = train.cross_entropy(logits, y)
    outs = [logits.softmax(-1), loss, *train.grad(loss, list(m.parameters()))]
    f = lm.compile(outs, backend="cpu")
    ref = lm.compile(outs, backend="reference")
    prog = f.runner.program
    schedule = plan(prog.kg, expand_calls(prog.kg.kernels), prog.plan, {"B": 9})

    flat = _flat(schedule.steps)
    assert any(isinstance(s, steps.Gemm) for s in flat) and any(isinstance(s, steps.Kernel) for s in flat)
    for s in flat:
        for op in _operands(s):
            assert not isinstance(op, np.ndarray), f"{s} holds memory"
            space = op.space if isinstance(op, steps.Ref) else op[0]
            assert space in schedule.callers or 0 <= space < len(schedule.storages), (s, space)
    assert set(schedule.callers) == {"x", "y", *(n for n, _ in f._states)}
    assert sum(st.nbytes for st in schedule.storages if st.data is None) >= prog.plan.peak_bytes({"B": 9})

    rng = np.random.default_rng(4)
    first, second = (Binding(schedule) for _ in range(2))
    owned = [i for i, st in enumerate(schedule.storages) if st.data is None]  # (constants are shared, read only)
    assert owned and all(first._memory[i] is not second._memory[i] for i in owned)
    states = {n: s.data for n, s in f._states}
    for b in (first, second):
        xa = rng.standard_normal((9, 12)).astype(np.float32)
        ya = rng.integers(0, 5, 9).astype(np.int32)
        want = ref(x=xa, y=ya)
        via_driver = [np.array(a, copy=True) for a in b.run({"x": xa, "y": ya, **states})]
        via_python = [np.array(a, copy=True) for a in b.run_steps({"x": xa, "y": ya, **states})]
        for d, p, w in zip(via_driver, via_python, want):
            np.testing.assert_allclose(d, w, rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(p, d, rtol=1e-6, atol=1e-7)
