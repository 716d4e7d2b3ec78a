"""The memory plan (``luminal/compile/memory.py``): temps whose lives do not overlap share slots,
slots are sized per binding in bytes, and the CPU program runs correctly on the shared storage."""

from __future__ import annotations

import numpy as np
from kg_helpers import ACC, KG, E, L, S, View, sym

import luminal as lm
from luminal.backends.cpu.plan import storage_itemsize
from luminal.compiler.memory import lifetimes, plan_memory


def _chain(n, shape=(64, 32), dtypes=None):
    """x -> t0 -> t1 -> ... -> t{n-1} (output), each an elementwise kernel reading the previous."""
    kg = KG()
    f = lm.float32
    prev = kg.input("x", shape)
    prev_dtype = f
    temps = []
    for i in range(n):
        d = (dtypes or [f] * n)[i]
        t = kg.buf(shape, d)
        expr = E("Add", E("Cast", L(0, prev_dtype), dtype=d, arg=d), S(1, d)) if d is not prev_dtype else \
            E("Add", L(0, d), S(1, d))
        kg.kernel("elementwise", shape, [(prev, View.contiguous(tuple(sym(s) for s in shape)))], [(t, expr)])
        temps.append(t)
        prev, prev_dtype = t, d
    kg.output(prev)
    return kg, temps


def _overlap(a, b):
    return a[0] <= b[1] and b[0] <= a[1]


def test_chain_reuses_two_slots():
    kg, temps = _chain(6)
    plan = plan_memory(kg.graph())
    assert len(plan.slots) == 2  # a kernel's output never shares with its input: ping-pong
    one = 64 * 32 * 4
    assert plan.no_reuse_bytes({}) == 6 * one
    assert plan.peak_bytes({}) == 2 * one < plan.no_reuse_bytes({})
    (got,), _ = kg.program()({"x": np.zeros((64, 32), np.float32)}, {})
    np.testing.assert_array_equal(got, np.full((64, 32), 6, np.float32))


def test_no_two_live_buffers_share_a_slot():
    """A diamond with a long-lived branch and an output read at the end."""
    f = lm.float32
    kg = KG()
    x = kg.input("x", (8,))
    v = View.contiguous((8,))
    a, b, c, d, o = (kg.buf((8,)) for _ in range(5))
    kg.kernel("elementwise", (8,), [(x, v)], [(a, E("Add", L(0, f), S(1.0, f)))])
    kg.kernel("elementwise", (8,), [(a, v)], [(b, E("Mul", L(0, f), S(2.0, f)))])
    kg.kernel("elementwise", (8,), [(b, v)], [(c, E("Mul", L(0, f), S(3.0, f)))])
    kg.kernel("elementwise", (8,), [(c, v)], [(d, E("Exp2", L(0, f)))])
    kg.kernel("elementwise", (8,), [(d, v), (a, v)], [(o, E("Add", L(0, f), L(1, f)))])
    kg.output(o)
    kg.output(b)
    g = kg.graph()
    plan = plan_memory(g)
    life = lifetimes(g)
    assert life[b.id] == (1, 5) and life[a.id] == (0, 4)
    ids = list(plan.slot_of)
    for i in ids:
        for j in ids:
            if i < j and plan.slot_of[i] == plan.slot_of[j]:
                assert not _overlap(life[i], life[j]), (i, j)
    xs = np.arange(8, dtype=np.float32)
    (out, bb), _ = kg.program()({"x": xs}, {})
    np.testing.assert_allclose(out, np.exp2((xs + 1) * 6) + xs + 1, rtol=1e-6)
    np.testing.assert_array_equal(bb, (xs + 1) * 2)


def test_mixed_dtypes_share_by_bytes():
    """float64, int32, float16 and bool temps in one chain: slots hold the largest member in bytes."""
    dts = [lm.float64, lm.int32, lm.float16, lm.bool, lm.float32]
    kg, temps = _chain(5, (10, 3), dts)
    plan = plan_memory(kg.graph())
    assert len(plan.slots) < len(temps)
    sizes = plan.slot_bytes({}, storage_itemsize)
    for s, bufs in enumerate(plan.slots):
        assert sizes[s] == max(30 * b.dtype.np.itemsize for b in bufs)
    (got,), _ = kg.program()({"x": np.zeros((10, 3), np.float32)}, {})
    # 0.0 -> +1 (f64) -> int 1 +1 = 2 -> f16 3 -> bool (3 != 0) or True -> f32 1 + 1
    np.testing.assert_array_equal(got, np.full((10, 3), 2, np.float32))


def test_symbolic_slots_sized_per_binding():
    kg, _ = _chain(4, ("B", 16))
    g = kg.graph()
    plan = plan_memory(g)
    assert plan.peak_bytes({"B": 2}) == 2 * (2 * 16 * 4)
    assert plan.peak_bytes({"B": 100}) == 2 * (100 * 16 * 4)
    assert plan.no_reuse_bytes({"B": 100}) == 4 * (100 * 16 * 4)
    prog = kg.program()
    for b in (2, 100, 7):
        (got,), _ = prog({"x": np.ones((b, 16), np.float32)}, {"B": b})
        np.testing.assert_array_equal(got, np.full((b, 16), 5, np.float32))


def test_bfloat16_bytes_logical_vs_stored():
    kg, _ = _chain(1, (4, 4), [lm.bfloat16])
    plan = plan_memory(kg.graph())
    assert plan.peak_bytes({}) == 32  # 2 bytes per element, as a device stores it
    assert plan.peak_bytes({}, storage_itemsize) == 64  # numpy keeps bfloat16 in float32


def test_outputs_and_update_sources_live_to_the_end():
    f = lm.float32
    kg = KG()
    x = kg.input("x", (4,))
    st = kg.input("$s", (4,), kind="state")
    v = View.contiguous((4,))
    a, b, c = kg.buf((4,)), kg.buf((4,)), kg.buf(())
    kg.kernel("elementwise", (4,), [(x, v)], [(a, E("Add", L(0, f), S(1.0, f)))])  # update source
    kg.kernel("elementwise", (4,), [(st, v)], [(b, E("Mul", L(0, f), S(2.0, f)))])
    kg.kernel("reduce", (4,), [(b, v)], [(c, ACC(f))], axes=(0,), reduce_op="sum", prologue=L(0, f), acc_dtype=f)
    kg.output(c, View((4,), (0,)))  # the 0-d sum read through a broadcast view
    kg.update("$s", a)
    g = kg.graph()
    life = lifetimes(g)
    assert life[a.id] == (0, 3) and life[c.id] == (2, 3)
    plan = plan_memory(g)
    assert plan.slot_of[a.id] != plan.slot_of[b.id] and plan.slot_of[a.id] != plan.slot_of[c.id]
    (out,), (new_s,) = kg.program()({"x": np.arange(4, dtype=np.float32), "$s": np.ones(4, np.float32)}, {})
    np.testing.assert_array_equal(new_s, [1, 2, 3, 4])
    np.testing.assert_array_equal(out, [8, 8, 8, 8])
