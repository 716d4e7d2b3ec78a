"""A binding's schedule is data (``backends/cpu/steps.py``): typed steps that the generated driver and
the Python path (``Binding.run_steps``) both run, with the same results."""

from __future__ import annotations

import numpy as np
import pytest

import luminal as lm
from luminal import nn, train
from luminal.backends.cpu import steps
from luminal.backends.cpu.parallel import Split


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
    schedule = _flat(_binding(f).steps)
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
    assert any(isinstance(s, steps.IndexCheck) for s in _flat(b.steps))
    with pytest.raises(IndexError):
        b.run_steps({"t": ta, "i": np.array([1, 12], np.int32)})
