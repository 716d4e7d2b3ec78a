"""Column sums (``codegen/lowering/reduce.py``'s ``_column_block``): a reduction over the rows of a row-major array
(a bias's or a LayerNorm weight's gradient) takes a block of 16 or 8 consecutive columns per work
item in an ordered loop, so LLVM vectorises across the columns instead of gathering down each column.
Checked against the reference interpreter and numpy on shapes that take each block width and none,
with NaN, inf and 16-bit inputs, and the kernels' choice read off the binding."""

from __future__ import annotations

import numpy as np
import pytest

import luminal as lm


def _column_widths(f) -> list:
    b = next(iter(f.runner.program._bindings.values()))
    steps = list(b.schedule.steps)
    while any(hasattr(s, "parts") for s in steps):  # a Split's parts (threads) hold the kernels
        steps = [x for s in steps for x in (s.parts[0] if hasattr(s, "parts") else [s])]
    return [s.kernel.notes.get("columns", 1) for s in steps if getattr(s, "kernel", None) is not None
            and s.kernel.name.startswith("reduce")]


CASES = {  # input shape, reduced axes, the block width the kernel takes
    "sum_rows_16": ((5, 7, 48), (0, 1), 16),
    "sum_rows_8": ((9, 40), (0,), 8),
    "sum_rows_none": ((9, 20), (0,), 1),
    "sum_middle_axis": ((3, 6, 32), (1,), 16),
}


@pytest.mark.parametrize("dtype", [lm.float32, lm.float64, lm.float16], ids=lambda d: d.name)
@pytest.mark.parametrize("name", list(CASES))
def test_column_sums_match_the_reference(name, dtype, monkeypatch):
    monkeypatch.setenv("LUMINAL_NUM_THREADS", "1")
    shape, axes, width = CASES[name]
    rng = np.random.default_rng(len(name))
    x = rng.standard_normal(shape).astype(dtype.np)
    x.reshape(-1)[[3, 17]] = [np.nan, np.inf]  # one column NaN, one inf: the others must stay finite
    g = lm.Graph()
    t = g.input("x", shape, dtype=dtype)
    outs = [(t * 2).sum(axes), t.amax(axes)]
    cpu, ref = lm.compile(outs, backend="cpu"), lm.compile(outs, backend="reference")
    got, want = cpu(x=x), ref(x=x)
    rtol = 1e-3 if dtype is lm.float16 else 1e-6
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(a.astype(np.float64), b.astype(np.float64), rtol=rtol, atol=rtol)
    if dtype is not lm.float16:  # (a 16-bit sum over two axes rounds between them, as the reference does)
        np.testing.assert_allclose(got[0], (2 * x.astype(np.float64)).sum(axes), rtol=rtol, atol=rtol)
    assert width in _column_widths(cpu), _column_widths(cpu)
