"""A product over a contraction of one element is an elementwise kernel (``cpu/outer.py``), and a state
updated in place by a select of its own elements is stored only where the select changes it
(``cpu/plan.py``'s ``_stores_last``): a Llama step's KV-cache write touches the step's rows only."""

from __future__ import annotations

import numpy as np
import pytest
from parity import rand

import luminal as lm
from luminal.frontend.state import State


def _kinds(f) -> list:
    kg = f.runner.program.kg
    return [k.kind for k in kg.kernels] + [k.kind for body in kg.bodies() for k in body.kernels]


@pytest.mark.parametrize("dtype", [lm.float32, lm.float16], ids=lambda d: d.name)
def test_an_outer_product_is_elementwise(dtype):
    g = lm.Graph()
    a, b = g.input("a", ("B", 7, 1), dtype=dtype), g.input("b", ("B", 1, 5), dtype=dtype)
    c = g.input("c", ("B", 7, 5), dtype=dtype)
    outs = [(a @ b) * c + 1.0, (a.transpose(1, 2).transpose(1, 2) @ b).sum(-1)]
    cpu, ref = lm.compile(outs, backend="cpu"), lm.compile(outs, backend="reference")
    for n in (3, 1, 0):
        inputs = {"a": rand((n, 7, 1), dtype, seed=n), "b": rand((n, 1, 5), dtype, seed=n + 1),
                  "c": rand((n, 7, 5), dtype, seed=n + 2)}
        for got, want in zip(cpu(**inputs), ref(**inputs), strict=True):
            np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=2e-3, atol=2e-3)
    assert "matmul" not in _kinds(cpu), _kinds(cpu)


def test_an_outer_product_of_padded_and_strided_operands():
    """Operands read through views with a validity mask (a pad) and reversed or broadcast strides keep
    them as elementwise reads: the padded elements are the pad's value times the other operand."""
    g = lm.Graph()
    a, b = g.input("a", (6, 1)), g.input("b", (1, 4))
    padded = a.pad((0, 0, 2, 1))  # (9, 1): two rows of zeros before, one after
    outs = [padded @ b.flip(-1), (padded.T.T @ b) * 2.0 + b.expand(9, 4)]
    cpu, ref = lm.compile(outs, backend="cpu"), lm.compile(outs, backend="reference")
    inputs = {"a": rand((6, 1), seed=3), "b": rand((1, 4), seed=4)}
    for got, want in zip(cpu(**inputs), ref(**inputs), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    assert "matmul" not in _kinds(cpu), _kinds(cpu)


def test_a_select_of_a_states_own_elements_stores_only_the_changed_ones():
    """A KV-cache write as the Llama example makes it: the one-hot map of the step's row times the
    step's values, selected where the row is written, else the cache. The in-place kernel stores under
    an ``if`` and reads no old element; the cache holds the old rows, NaN and -0.0 included, and the
    new one."""
    cache = State(np.arange(6 * 4, dtype=np.float32).reshape(6, 4), name="cache")
    cache.data[0, 0], cache.data[5, 3] = np.nan, -0.0
    g = lm.Graph()
    write, k = g.input("write", (6, 1)), g.input("k", (1, 4))
    written = g.input("written", (6, 1), dtype=lm.bool_)
    new = (write @ k).where(written, g.state(cache))
    g.assign(cache, new)
    f = lm.compile([new.sum()], backend="cpu")
    before = cache.data.copy()
    for row in (2, 4):
        onehot = np.zeros((6, 1), np.float32)
        onehot[row] = 1.0
        kv = rand((1, 4), seed=row)
        expect = cache.data.copy()
        expect[row] = kv[0]
        f(write=onehot, k=kv, written=onehot > 0)
        np.testing.assert_array_equal(cache.data, expect)
    assert np.isnan(cache.data[0, 0]) and np.signbit(cache.data[5, 3]) and (cache.data[1] == before[1]).all()
    binding = next(iter(f.runner.program._bindings.values()))
    texts = [st.kernel.text() for st in binding.schedule.steps if getattr(st, "kernel", None) is not None
             and "_in_place" in st.kernel.name]
    assert texts and all("if " in t for t in texts), texts
