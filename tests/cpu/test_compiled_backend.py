"""The compiled CPU backend (``luminal/cpu/compiled.py``) on hand-built kernel graphs, against the
reference interpreter on the equivalent frontend graphs.

Elementwise kernels (generated code) must agree with the reference bit for bit (float16/bfloat16
rounding per node included), except Log2, Exp2 and Sin, where libm and numpy's SIMD functions each
round their own way (within 2 ulps: :func:`ulp_equal`); reductions and matmuls sum in a different
order, so floats compare with a tolerance and ints/bools exactly.
"""

from __future__ import annotations

import numpy as np
import pytest
from kg_helpers import ACC, KG, E, L, S, View, prim, rand_array, ref, sym

import luminal as lm
from luminal.core.dtype import ALL

FLOATS = [d for d in ALL if d.is_float]
TOL = {lm.float64: 1e-9, lm.float32: 1e-5, lm.float16: 2e-3, lm.bfloat16: 1.6e-2}


TRANSCENDENTAL = ("Log2", "Exp2", "Sin")


def ulp_equal(got, want, ulps=2):
    """Equal but for the last bits of float32/float64 transcendentals (NaN and infinities exactly);
    bit for bit for the half types (both round the same float32 value) and everything else."""
    if got.dtype not in (np.float32, np.float64):
        np.testing.assert_array_equal(got, want)
        return
    np.testing.assert_array_equal(np.isfinite(got), np.isfinite(want))
    np.testing.assert_array_equal(got[~np.isfinite(got)], want[~np.isfinite(want)])
    np.testing.assert_array_max_ulp(got[np.isfinite(got)], want[np.isfinite(want)], ulps)


def close(got, want, dtype):
    assert got.dtype == want.dtype and got.shape == want.shape
    if dtype.is_float:
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=TOL[dtype], atol=TOL[dtype])
    else:
        np.testing.assert_array_equal(got, want)


def ew_program(shape, dtypes, expr, out_dtype):
    """One elementwise kernel over contiguous inputs x0, x1, ... computing ``expr``."""
    kg = KG()
    ins = [kg.input(f"x{i}", shape, d) for i, d in enumerate(dtypes)]
    out = kg.buf(shape, out_dtype)
    kg.kernel("elementwise", shape, [(b, View.contiguous(shape)) for b in ins], [(out, expr)])
    kg.output(out)
    return kg.program()


# elementwise -----------------------------------------------------------------------------------------

def _ops_for(d):
    if d.is_float:
        return ["Log2", "Exp2", "Sin", "Sqrt", "Recip", "Add", "Mul", "Mod", "Max", "LessThan"]
    if d.kind == "i":
        return ["Add", "Mul", "Mod", "Max", "LessThan"]
    return ["Add", "Mul", "Max", "LessThan"]


@pytest.mark.parametrize("d", ALL, ids=lambda d: d.name)
def test_elementwise_every_op_every_dtype(d):
    shape = (4, 5)
    a, b = rand_array(shape, d, 1), rand_array(shape, d, 2)
    if d.is_float:
        a[0, :3] = [0.0, np.inf, np.nan]
    for op in _ops_for(d):
        unary = op in ("Log2", "Exp2", "Sin", "Sqrt", "Recip")
        args = (L(0, d),) if unary else (L(0, d), L(1, d))
        out_dtype = lm.bool if op == "LessThan" else d
        prog = ew_program(shape, [d, d], E(op, *args), out_dtype)
        (got,), _ = prog({"x0": a, "x1": b}, {})

        def build(g, op=op, unary=unary):
            x, y = g.input("x0", shape, d), g.input("x1", shape, d)
            return [prim(op, x, dtype=out_dtype) if unary else prim(op, x, y, dtype=out_dtype)]

        (want,) = ref(build, {"x0": a, "x1": b})
        assert got.dtype == want.dtype, op
        if op in TRANSCENDENTAL:
            ulp_equal(got, want)
        else:
            np.testing.assert_array_equal(got, want, err_msg=f"{op} {d.name}")


@pytest.mark.parametrize("d", FLOATS, ids=lambda d: d.name)
def test_elementwise_chain_rounds_per_node(d):
    """A fused chain gives the reference's values: half floats round after every node (Exp2: see
    :func:`ulp_equal`)."""
    shape = (3, 7)
    a, b = rand_array(shape, d, 3, 0.1, 3.0), rand_array(shape, d, 4, 0.1, 3.0)
    ab = E("Mul", L(0, d), L(1, d))
    chain = E("Sqrt", E("Add", ab, E("Exp2", E("Mul", L(0, d), S(0.37, d)))))
    expr = E("Where", E("LessThan", L(0, d), L(1, d)), chain, E("Recip", ab))
    prog = ew_program(shape, [d, d], expr, d)
    (got,), _ = prog({"x0": a, "x1": b}, {})

    def build(g):
        x, y = g.input("x0", shape, d), g.input("x1", shape, d)
        xy = prim("Mul", x, y)
        c = g.constant(0.37, d).expand(*shape)
        ch = prim("Sqrt", prim("Add", xy, prim("Exp2", prim("Mul", x, c))))
        return [prim("Where", prim("LessThan", x, y, dtype=lm.bool), ch, prim("Recip", xy), dtype=d)]

    ulp_equal(got, ref(build, {"x0": a, "x1": b})[0])


@pytest.mark.parametrize("src", ALL, ids=lambda d: d.name)
def test_cast_every_pair(src):
    shape = (6,)
    a = rand_array(shape, src, 5, -70000.0, 70000.0) if src.is_float else rand_array(shape, src, 5)
    if src.is_float:
        a[:3] = [0.5, -1.5, 2.7]
    for dst in ALL:
        if dst is src:
            continue
        prog = ew_program(shape, [src], E("Cast", L(0, src), dtype=dst, arg=dst), dst)
        (got,), _ = prog({"x0": a}, {})
        (want,) = ref(lambda g, dst=dst: [prim("Cast", g.input("x0", shape, src), arg=dst, dtype=dst)], {"x0": a})
        np.testing.assert_array_equal(got, want, err_msg=f"{src.name} -> {dst.name}")


def test_int32_wraps_and_fmod_sign():
    shape = (4,)
    a = np.array([2**31 - 1, -7, 7, -2**31], np.int32)
    b = np.array([1, 3, -3, -1], np.int32)
    for op in ("Add", "Mul", "Mod"):
        (got,), _ = ew_program(shape, [lm.int32] * 2, E(op, L(0, lm.int32), L(1, lm.int32)), lm.int32)(
            {"x0": a, "x1": b}, {})
        (want,) = ref(lambda g, op=op: [prim(op, g.input("x0", shape, lm.int32), g.input("x1", shape, lm.int32))],
                      {"x0": a, "x1": b})
        np.testing.assert_array_equal(got, want)


def test_several_outputs_and_scalar_leaves():
    kg = KG()
    x = kg.input("x", (2, 3))
    o1, o2, o3 = kg.buf((2, 3)), kg.buf((2, 3)), kg.buf((2, 3), lm.int32)
    shared = E("Mul", L(0, lm.float32), S(3.0, lm.float32))
    kg.kernel("elementwise", (2, 3), [(x, View.contiguous((2, 3)))],
              [(o1, shared), (o2, E("Add", shared, S(1.0, lm.float32))), (o3, S(sym("B") * 2, lm.int32))])
    for o in (o1, o2, o3):
        kg.output(o)
    prog = kg.program()
    a = rand_array((2, 3), lm.float32)
    for b in (3, 5):
        r1, r2, r3 = prog({"x": a}, {"B": b})[0]
        np.testing.assert_array_equal(r1, a * np.float32(3))
        np.testing.assert_array_equal(r2, a * np.float32(3) + np.float32(1))
        np.testing.assert_array_equal(r3, np.full((2, 3), 2 * b, np.int32))


def test_reshape_expr_views_and_copies():
    """Reshape regroups a value: a view of a computed (contiguous) value, a copy of a transposed load."""
    kg = KG()
    x = kg.input("x", (4, 6))
    t_view = View.contiguous((4, 6)).permute((1, 0))  # (6, 4), not regroupable without a copy
    o1, o2 = kg.buf((24,)), kg.buf((3, 8))
    f = lm.float32
    kg.kernel("elementwise", (24,), [(x, t_view), (x, View.contiguous((4, 6)))],
              [(o1, E("Reshape", L(0, f), arg=(24,), dtype=f)),
               (o2, E("Add", E("Reshape", E("Exp2", L(1, f)), arg=(3, 8), dtype=f), S(1.0, f)))])
    kg.output(o1)
    kg.output(o2)
    a = rand_array((4, 6), f)
    r1, r2 = kg.program()({"x": a}, {})[0]
    np.testing.assert_array_equal(r1, a.T.reshape(24))
    np.testing.assert_array_equal(r2, np.exp2(a).reshape(3, 8) + np.float32(1))


def test_reshape_of_a_0d_value_keeps_its_scratch():
    """A 0-d value read only through a Reshape must keep its scratch until the Reshape's readers ran."""
    f = lm.float32
    kg = KG()
    x = kg.input("x", ())
    out = kg.buf((1,))
    expr = E("Add", E("Reshape", E("Exp2", L(0, f)), arg=(1,), dtype=f), E("Reshape", E("Sin", L(0, f)), arg=(1,),
                                                                            dtype=f))
    kg.kernel("elementwise", (1,), [(x, View.contiguous(()))], [(out, expr)])
    kg.output(out)
    a = np.asarray(0.7, np.float32)
    (got,), _ = kg.program()({"x": a}, {})
    np.testing.assert_array_equal(got, [np.exp2(a) + np.sin(a)])


def test_broadcast_operands():
    """Arithmetic on broadcast loads (stride 0); reshapes and reductions of such values see the full
    shape."""
    f = lm.float32
    kg = KG()
    s, row, x = kg.input("s", ()), kg.input("row", (1, 5)), kg.input("x", (4, 5))
    o1, o2, o3 = kg.buf((4, 5)), kg.buf((20,)), kg.buf((4,))
    sv, rv, xv = View((4, 5), (0, 0)), View((4, 5), (0, 1)), View.contiguous((4, 5))
    scale = E("Recip", E("Sqrt", L(0, f)))  # one element's worth of work
    kg.kernel("elementwise", (4, 5), [(s, sv), (row, rv), (x, xv)],
              [(o1, E("Mul", scale, L(2, f))), (o2, E("Reshape", E("Exp2", L(1, f)), arg=(20,), dtype=f))])
    kg.kernel("reduce", (4, 5), [(s, sv), (row, rv)], [(o3, ACC(f))], axes=(1,), reduce_op="sum",
              prologue=E("Mul", L(0, f), L(1, f)), acc_dtype=f)
    for o in (o1, o2, o3):
        kg.output(o)
    prog = kg.program()
    a, r, xx = np.asarray(4.0, np.float32), rand_array((1, 5), f, 1), rand_array((4, 5), f, 2)
    for _ in range(2):
        r1, r2, r3 = prog({"s": a, "row": r, "x": xx}, {})[0]
        np.testing.assert_allclose(r1, xx / np.float32(2), rtol=1e-6)
        ulp_equal(r2, np.broadcast_to(np.exp2(r), (4, 5)).reshape(20))
        np.testing.assert_allclose(r3, np.full(4, (a * r).sum()), rtol=1e-6)


# views -----------------------------------------------------------------------------------------------

def test_masked_views_pad_filled_once_valid_box_copied_every_run():
    base = View.contiguous((3, 4))
    padded = base.pad_dim(1, 2, 1, -5.0).pad_dim(0, 1, 0, -5.0)  # (4, 7), pad value -5
    flipped = base.flip(1).pad_dim(0, 0, 1, -5.0)  # (4, 4)
    assert padded.mask is not None and flipped.mask is not None
    kg = KG()
    x = kg.input("x", (3, 4))
    out, red = kg.buf((4, 7)), kg.buf((4,))
    f = lm.float32
    kg.kernel("elementwise", (4, 7), [(x, padded)], [(out, E("Mul", L(0, f), S(2.0, f)))])
    kg.kernel("reduce", (4, 4), [(x, flipped)], [(red, ACC(f))], axes=(1,), reduce_op="max", prologue=L(0, f),
              acc_dtype=f)
    kg.output(out)
    kg.output(red)
    kg.output(x, padded)  # an output read through a masked view
    prog = kg.program()
    for seed in range(3):
        a = rand_array((3, 4), f, seed)
        got = prog({"x": a}, {})[0]

        def build(g):
            t = g.input("x", (3, 4))
            p = g.tensor(t.node, padded)
            two = g.constant(2.0).expand(4, 7)
            return [prim("Mul", p, two), prim("MaxReduce", g.tensor(t.node, flipped), arg=1, shape=(4,)), p]

        for gv, wv in zip(got, ref(build, {"x": a})):
            np.testing.assert_array_equal(gv, wv)


def test_kernels_reading_a_permuted_view():
    """Pooling-window style: a view whose axis order disagrees with the output's, read several times
    by an elementwise kernel and a reduction."""
    f = lm.float32
    kg = KG()
    x, r = kg.input("x", (4, 2, 6)), kg.input("r", (4, 6))
    xv = View((4, 6, 2), (12, 1, 6))  # x.permute(0, 2, 1)
    rv = View((4, 6, 2), (6, 1, 0))
    o, s = kg.buf((4, 6, 2)), kg.buf((4, 6))
    expr = E("Where", E("LessThan", L(0, f), L(1, f)), E("Mul", L(0, f), L(0, f)), E("Exp2", L(0, f)))
    kg.kernel("elementwise", (4, 6, 2), [(x, xv), (r, rv)], [(o, expr)])
    kg.kernel("reduce", (4, 6, 2), [(x, xv), (r, rv)], [(s, ACC(f))], axes=(2,), reduce_op="max",
              prologue=E("Add", E("Mul", L(0, f), L(1, f)), L(0, f)), acc_dtype=f)
    kg.output(o)
    kg.output(s)
    prog = kg.program()
    a, b = rand_array((4, 2, 6), f, 1), rand_array((4, 6), f, 2)
    r1, r2 = prog({"x": a, "r": b}, {})[0]
    xt, bb = a.transpose(0, 2, 1), b[:, :, None]
    ulp_equal(r1, np.where(xt < bb, xt * xt, np.exp2(xt)))
    np.testing.assert_array_equal(r2, (xt * bb + xt).max(axis=2))


def test_scalar_only_output_with_a_size_one_axis():
    """An output made of scalars alone (an unfolded ``Recip(16)``, as a sampled extraction may pick)
    into a buffer with a size-1 axis: the evaluation order puts that axis first, and the kernel's 0-d
    value comes back unpermuted (it broadcasts) while the buffer is filled."""
    f = lm.float32
    kg = KG()
    o = kg.buf(("B", 8, 1))
    kg.kernel("elementwise", (sym("B"), 8, 1), [], [(o, E("Recip", S(16.0, f)))])
    kg.output(o)
    (got,), _ = kg.program()({}, {"B": 3})
    np.testing.assert_array_equal(got, np.full((3, 8, 1), 1 / 16, np.float32))


def test_broadcast_and_strided_loads():
    base = View.contiguous((4, 6))
    sliced = base.slice(1, 1, 3, 2)  # (4, 3): columns 1, 3, 5
    row = View.contiguous((1, 3)).expand((4, 3))
    kg = KG()
    x, r = kg.input("x", (4, 6)), kg.input("r", (1, 3))
    out = kg.buf((4, 3))
    f = lm.float32
    kg.kernel("elementwise", (4, 3), [(x, sliced), (r, row)], [(out, E("Add", L(0, f), L(1, f)))])
    kg.output(out)
    a, b = rand_array((4, 6), f), rand_array((1, 3), f, 1)
    (got,), _ = kg.program()({"x": a, "r": b}, {})
    np.testing.assert_array_equal(got, a[:, 1::2] + b)


# reductions ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("n", [5, 20], ids=["short", "long"])
@pytest.mark.parametrize("d", ALL, ids=lambda d: d.name)
@pytest.mark.parametrize("op", ["sum", "max"])
def test_reduce_every_dtype(d, op, n):
    if op == "sum" and d is lm.bool:
        pytest.skip("a bool SumReduce is never built (sum casts bools to int32)")
    shape = (3, n, 4)
    a = rand_array(shape, d, 7)
    if d.is_float:
        a[1, 2, 3] = np.nan
    kg = KG()
    x = kg.input("x", shape, d)
    out = kg.buf((3, 4), d)
    prologue = E("Mul", L(0, d), L(0, d)) if d.kind != "b" else L(0, d)
    kg.kernel("reduce", shape, [(x, View.contiguous(shape))], [(out, ACC(d))], axes=(1,), reduce_op=op,
              prologue=prologue, acc_dtype=d)
    kg.output(out)
    (got,), _ = kg.program()({"x": a}, {})

    def build(g):
        t = g.input("x", shape, d)
        p = prim("Mul", t, t) if d.kind != "b" else t
        return [prim("SumReduce" if op == "sum" else "MaxReduce", p, arg=1, shape=(3, 4))]

    want = ref(build, {"x": a})[0]
    if d.is_float:
        assert np.isnan(got[1, 3]) and np.isnan(want[1, 3])
    close(got, want, d)


def test_reduce_several_axes_with_epilogue():
    """softmax's denominator: exp(x - max) summed over two axes, divided, with an epilogue input."""
    shape = (2, 3, 4)
    f = lm.float32
    a, c = rand_array(shape, f), rand_array((3,), f, 1)
    kg = KG()
    x, y = kg.input("x", shape), kg.input("c", (3,))
    out, out2 = kg.buf((3,)), kg.buf((3,))
    kg.kernel("reduce", shape, [(x, View.contiguous(shape))],
              [(out, E("Mul", E("Recip", ACC(f)), L(0, f))), (out2, ACC(f))], axes=(0, 2), reduce_op="sum",
              prologue=E("Exp2", L(0, f)), acc_dtype=f, epilogue_inputs=[(y, View.contiguous((3,)))])
    kg.output(out)
    kg.output(out2)
    r1, r2 = kg.program()({"x": a, "c": c}, {})[0]
    s = np.exp2(a).sum(axis=(0, 2))
    np.testing.assert_allclose(r2, s, rtol=1e-6)
    np.testing.assert_allclose(r1, c / s, rtol=1e-6)


def test_reduce_int32_wraps_and_empty_axes():
    kg = KG()
    x = kg.input("x", (2, "N"), lm.int32)
    s, m = kg.buf((2,), lm.int32), kg.buf((2,), lm.int32)
    dom = (2, sym("N"))
    kg.kernel("reduce", dom, [(x, View.contiguous(dom))], [(s, ACC(lm.int32))], axes=(1,), reduce_op="sum",
              prologue=L(0, lm.int32), acc_dtype=lm.int32)
    kg.kernel("reduce", dom, [(x, View.contiguous(dom))], [(m, ACC(lm.int32))], axes=(1,), reduce_op="max",
              prologue=L(0, lm.int32), acc_dtype=lm.int32)
    kg.output(s)
    kg.output(m)
    prog = kg.program()
    a = np.full((2, 3), 2**30, np.int32)
    (got_s, got_m), _ = prog({"x": a}, {"N": 3})
    np.testing.assert_array_equal(got_s, a.sum(1, dtype=np.int32))
    np.testing.assert_array_equal(got_m, a.max(1))
    with pytest.raises(ValueError, match="empty axis"):
        prog({"x": np.zeros((2, 0), np.int32)}, {"N": 0})


# matmul ----------------------------------------------------------------------------------------------

def _matmul_pair(a_shape, b_shape, av, bv, domain, k, out_dtype, order=None):
    """A matmul kernel of inputs ``a``/``b`` read through ``av``/``bv`` at ``domain``, and the frontend
    twin (Mul of the same views, SumReduce over ``k``, read as the output through ``order``)."""
    kg = KG()
    a, b = kg.input("a", a_shape, out_dtype), kg.input("b", b_shape, out_dtype)
    oshape = tuple(d for i, d in enumerate(domain) if i != k)
    out = kg.buf(oshape, out_dtype)
    kg.kernel("matmul", domain, [(a, av), (b, bv)], [(out, ACC(out_dtype))], axes=(k,), acc_dtype=out_dtype)
    kg.output(out)

    def build(g):
        x, y = g.input("a", a_shape, out_dtype), g.input("b", b_shape, out_dtype)
        m = prim("Mul", g.tensor(x.node, av), g.tensor(y.node, bv), shape=domain)
        return [prim("SumReduce", m, arg=k, shape=oshape)]

    return kg.program(), build


def _mm_cases():
    # plain (M, K) @ (K, N): domain (M, N, K)
    yield "plain", (5, 7), (7, 3), View((5, 3, 7), (7, 0, 1)), View((5, 3, 7), (0, 1, 3)), (5, 3, 7), 2
    # a transposed: a stored (K, M)
    yield "aT", (7, 5), (7, 3), View((5, 3, 7), (1, 0, 5)), View((5, 3, 7), (0, 1, 3)), (5, 3, 7), 2
    # b transposed (a Linear layer: W stored (N, K))
    yield "bT", (5, 7), (3, 7), View((5, 3, 7), (7, 0, 1)), View((5, 3, 7), (0, 7, 1)), (5, 3, 7), 2
    # output in (N, M) order: domain (N, M, K)
    yield "outT", (5, 7), (7, 3), View((3, 5, 7), (0, 7, 1)), View((3, 5, 7), (1, 0, 3)), (3, 5, 7), 2
    # K first in the domain: (K, M, N)
    yield "kfirst", (5, 7), (7, 3), View((7, 5, 3), (1, 7, 0)), View((7, 5, 3), (3, 0, 1)), (7, 5, 3), 0
    # batched (B, M, K) @ (B, K, N)
    yield "batched", (2, 4, 6), (2, 6, 3), View((2, 4, 3, 6), (24, 6, 0, 1)), View((2, 4, 3, 6), (18, 0, 1, 3)), \
        (2, 4, 3, 6), 3
    # a batch axis both operands broadcast along
    yield "bothbcast", (4, 6), (6, 3), View((2, 4, 3, 6), (0, 6, 0, 1)), View((2, 4, 3, 6), (0, 0, 1, 3)), \
        (2, 4, 3, 6), 3
    # two M axes merged: (P, Q, K) @ (K, N)
    yield "mgroup", (2, 4, 6), (6, 3), View((2, 4, 3, 6), (24, 6, 0, 1)), View((2, 4, 3, 6), (0, 0, 1, 3)), \
        (2, 4, 3, 6), 3
    # two M axes that do not merge in a (a permuted): a is copied, the output still merges
    yield "msplit", (2, 4, 6), (6, 3), View((4, 2, 3, 6), (6, 24, 0, 1)), View((4, 2, 3, 6), (0, 0, 1, 3)), \
        (4, 2, 3, 6), 3
    # a strided (every other column of K): not BLAS-readable, copied first
    yield "strided", (5, 14), (7, 3), View((5, 3, 7), (14, 0, 2)), View((5, 3, 7), (0, 1, 3)), (5, 3, 7), 2
    # batch innermost in the output: (M, N, B, K): the output layout needs a scratch + copy
    yield "batchlast", (4, 2, 6), (2, 6, 3), View((4, 3, 2, 6), (12, 0, 6, 1)), \
        View((4, 3, 2, 6), (0, 1, 18, 3)), (4, 3, 2, 6), 3
    # vector @ matrix (M = 1) and matrix @ vector (N = 1)
    yield "gemv", (1, 7), (7, 3), View((1, 3, 7), (7, 0, 1)), View((1, 3, 7), (0, 1, 3)), (1, 3, 7), 2
    yield "mv", (5, 7), (7, 1), View((5, 1, 7), (7, 0, 1)), View((5, 1, 7), (0, 1, 1)), (5, 1, 7), 2
    # empty K: zeros
    yield "k0", (5, 0), (0, 3), View((5, 3, 0), (1, 0, 1)), View((5, 3, 0), (0, 1, 3)), (5, 3, 0), 2


@pytest.mark.parametrize("case", list(_mm_cases()), ids=lambda c: c[0])
@pytest.mark.parametrize("d", ALL, ids=lambda d: d.name)
def test_matmul_layouts_every_dtype(case, d):
    _, a_shape, b_shape, av, bv, domain, k = case
    prog, build = _matmul_pair(a_shape, b_shape, av, bv, domain, k, d)
    arrays = {"a": rand_array(a_shape, d, 1), "b": rand_array(b_shape, d, 2)}
    for _ in range(2):  # a second run reuses every buffer
        (got,), _ = prog(arrays, {})
        close(got, ref(build, arrays)[0], d)


def test_matmul_epilogue_and_masked_operand_fallback():
    """Linear + bias + relu in one kernel; a padded operand (not a GEMM layout) still computes."""
    f = lm.float32
    kg = KG()
    x, w, bias = kg.input("x", (5, 7)), kg.input("w", (3, 7)), kg.input("bias", (3,))
    out, out2 = kg.buf((5, 3)), kg.buf((5, 3))
    av, bv = View((5, 3, 7), (7, 0, 1)), View((5, 3, 7), (0, 7, 1))
    kg.kernel("matmul", (5, 3, 7), [(x, av), (w, bv)], [(out, E("Max", E("Add", ACC(f), L(0, f)), S(0.0, f)))],
              axes=(2,), acc_dtype=f, epilogue_inputs=[(bias, View((5, 3), (0, 1)))])
    pav = View((5, 3, 7), (6, 0, 1), 0, ((0, 5), (0, 3), (0, 6)), 0.0)  # x read as (5, 6) padded to K = 7
    x6 = kg.input("x6", (5, 6))
    kg.kernel("matmul", (5, 3, 7), [(x6, pav), (w, bv)], [(out2, ACC(f))], axes=(2,), acc_dtype=f)
    kg.output(out)
    kg.output(out2)
    a, wt, bb = rand_array((5, 7), f), rand_array((3, 7), f, 1), rand_array((3,), f, 2)
    a6 = rand_array((5, 6), f, 3)
    r1, r2 = kg.program()({"x": a, "w": wt, "bias": bb, "x6": a6}, {})[0]
    np.testing.assert_allclose(r1, np.maximum(a @ wt.T + bb, 0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(r2, a6 @ wt[:, :6].T, rtol=1e-5, atol=1e-6)


def test_matmul_result_stored_in_its_readers_order():
    """A GEMM result read transposed (by an elementwise kernel and as the next GEMM's operand) is stored
    transposed; every reader, the program output included, still sees the logical values."""
    f = lm.float32
    kg = KG()
    a, b, w = kg.input("a", (5, 7)), kg.input("b", (7, 3)), kg.input("w", (3, 4))
    o1, o2, o3 = kg.buf((3, 5)), kg.buf((5, 3)), kg.buf((5, 4))
    # o1 = (a @ b).T, domain (N=3, M=5, K=7)
    kg.kernel("matmul", (3, 5, 7), [(a, View((3, 5, 7), (0, 7, 1))), (b, View((3, 5, 7), (1, 0, 3)))], [(o1, ACC(f))],
              axes=(2,), acc_dtype=f)
    kg.kernel("elementwise", (5, 3), [(o1, View((5, 3), (1, 5)))], [(o2, E("Exp2", L(0, f)))])
    # o3 = o1.T @ w, domain (M=5, N=4, K=3)
    kg.kernel("matmul", (5, 4, 3), [(o1, View((5, 4, 3), (1, 0, 5))), (w, View((5, 4, 3), (0, 1, 4)))],
              [(o3, ACC(f))], axes=(2,), acc_dtype=f)
    for o in (o1, o2, o3):
        kg.output(o)
    prog = kg.program()
    x, y, z = rand_array((5, 7), f, 1), rand_array((7, 3), f, 2), rand_array((3, 4), f, 3)
    r1, r2, r3 = prog({"a": x, "b": y, "w": z}, {})[0]
    assert next(iter(prog._bindings.values())).schedule.perms == {o1.id: (1, 0)}
    np.testing.assert_allclose(r1, (x @ y).T, rtol=1e-5)
    np.testing.assert_allclose(r2, np.exp2(x @ y), rtol=1e-5)
    np.testing.assert_allclose(r3, (x @ y) @ z, rtol=1e-5)


def test_matmul_in_a_layout_that_is_not_one_gemm_runs_as_a_batched_gemm():
    """A convolution as the compiler's ``contraction`` rule makes it a MatMul: sum over K of weight
    (M, K) times unfolded input (B, K, N), where B and N are both "N" axes that do not merge; B becomes
    a batch axis. And a weight gradient summing over two axes (B and the pixels) at once."""
    f = lm.float32
    B, M, K, N = 3, 4, 5, 6
    kg = KG()
    w, u = kg.input("w", (M, K)), kg.input("u", (B, K, N))
    y, gw = kg.buf((B, M, N)), kg.buf((M, K))
    dom = (B, M, K, N)
    kg.kernel("matmul", dom, [(w, View(dom, (0, K, 1, 0))), (u, View(dom, (K * N, 0, N, 1)))], [(y, ACC(f))],
              axes=(2,), acc_dtype=f)
    dom2 = (B, M, K, N)  # gw[m, k] = sum over b, n of y[b, m, n] * u[b, k, n]
    kg.kernel("matmul", dom2, [(y, View(dom2, (M * N, N, 0, 1))), (u, View(dom2, (K * N, 0, N, 1)))],
              [(gw, ACC(f))], axes=(0, 3), acc_dtype=f)
    kg.output(y)
    kg.output(gw)
    prog = kg.program()
    a, x = rand_array((M, K), f, 1), rand_array((B, K, N), f, 2)
    r1, r2 = prog({"w": a, "u": x}, {})[0]
    want = np.einsum("mk,bkn->bmn", a, x)
    np.testing.assert_allclose(r1, want, rtol=1e-5)
    np.testing.assert_allclose(r2, np.einsum("bmn,bkn->mk", want, x), rtol=1e-5, atol=1e-5)
    calls = next(iter(prog._bindings.values())).schedule.steps
    assert sum(fn is np.matmul for fn, _ in calls) == 2 and not any(fn is np.multiply for fn, _ in calls)


# gather / scatter ------------------------------------------------------------------------------------

@pytest.mark.parametrize("d", ALL, ids=lambda d: d.name)
def test_gather_and_scatter_add(d):
    xs, idx_shape = (4, 5), (4, 3)
    a = rand_array(xs, d, 1)
    idx = np.random.default_rng(0).integers(0, 5, size=idx_shape).astype(np.int32)
    src = rand_array(idx_shape, d, 2)
    kg = KG()
    x, i, s = kg.input("x", xs, d), kg.input("i", idx_shape, lm.int32), kg.input("s", idx_shape, d)
    g_out, s_out = kg.buf(idx_shape, d), kg.buf(xs, d)
    kg.kernel("gather", idx_shape, [(x, View.contiguous(xs)), (i, View.contiguous(idx_shape))],
              [(g_out, E("Gather", L(0, d), L(1, lm.int32), arg=1))], axes=(1,))
    kg.kernel("scatter_add", xs, [(x, View.contiguous(xs)), (i, View.contiguous(idx_shape)),
                                  (s, View.contiguous(idx_shape))],
              [(s_out, E("ScatterAdd", L(0, d), L(1, lm.int32), L(2, d), arg=1))], axes=(1,))
    kg.output(g_out)
    kg.output(s_out)
    prog = kg.program()
    arrays = {"x": a, "i": idx, "s": src}
    got = prog(arrays, {})[0]

    def build(g):
        t, ti, ts = g.input("x", xs, d), g.input("i", idx_shape, lm.int32), g.input("s", idx_shape, d)
        return [prim("Gather", t, ti, arg=1, shape=idx_shape), prim("ScatterAdd", t, ti, ts, arg=1)]

    for gv, wv in zip(got, ref(build, arrays)):
        np.testing.assert_array_equal(gv, wv)
    bad = idx.copy()
    bad[1, 2] = 5
    with pytest.raises(IndexError, match="out of range"):
        prog({**arrays, "i": bad}, {})
    got2 = prog(arrays, {})[0]  # a failed run leaves nothing behind
    for gv, wv in zip(got2, got):
        np.testing.assert_array_equal(gv, wv)


# bindings, reruns, caller arrays -----------------------------------------------------------------------

def _symbolic_chain():
    """(B, 4) -> exp2 -> sum over 4 -> * B, with a (B, 4) @ (4, 3) matmul on the side."""
    f = lm.float32
    kg = KG()
    x, w = kg.input("x", ("B", 4)), kg.input("w", (4, 3))
    B = sym("B")
    e, s, m = kg.buf((B, 4)), kg.buf((B,)), kg.buf((B, 3))
    kg.kernel("elementwise", (B, 4), [(x, View.contiguous((B, 4)))], [(e, E("Exp2", L(0, f)))])
    kg.kernel("reduce", (B, 4), [(e, View.contiguous((B, 4)))], [(s, E("Mul", ACC(f), S(B, f)))], axes=(1,),
              reduce_op="sum", prologue=L(0, f), acc_dtype=f)
    kg.kernel("matmul", (B, 3, 4), [(e, View((B, 3, 4), (4, 0, 1))), (w, View((B, 3, 4), (0, 1, 3)))],
              [(m, ACC(f))], axes=(2,), acc_dtype=f)
    kg.output(s)
    kg.output(m)
    return kg


def test_symbolic_dims_two_bindings_each_correct_and_cached():
    prog = _symbolic_chain().program()
    w = rand_array((4, 3), lm.float32, 9)
    for bsz in (3, 8, 3):
        x = rand_array((bsz, 4), lm.float32, bsz)
        s, m = prog({"x": x, "w": w}, {"B": bsz})[0]
        np.testing.assert_allclose(s, np.exp2(x).sum(1) * bsz, rtol=1e-5)
        np.testing.assert_allclose(m, np.exp2(x) @ w, rtol=1e-5)
    assert len(prog._bindings) == 2  # buffers allocated once per binding


def test_repeated_runs_fresh_outputs_and_caller_arrays_read_in_place():
    prog = _symbolic_chain().program()
    x, w = rand_array((5, 4), lm.float32, 1), rand_array((4, 3), lm.float32, 2)
    first = prog({"x": x, "w": w}, {"B": 5})[0]
    keep = [o.copy() for o in first]
    again = prog({"x": x, "w": w}, {"B": 5})[0]
    for o, k, a in zip(first, keep, again):
        np.testing.assert_array_equal(o, k)  # the earlier outputs were not overwritten
        np.testing.assert_array_equal(a, k)  # no stale scratch
        assert o.flags.c_contiguous and not np.shares_memory(o, a)
    w[:] *= 2  # same array object, new values (a State updated in place)
    _, m = prog({"x": x, "w": w}, {"B": 5})[0]
    np.testing.assert_allclose(m, np.exp2(x) @ w, rtol=1e-5)
    w2 = rand_array((4, 3), lm.float32, 3)  # a new array object
    _, m = prog({"x": x, "w": w2}, {"B": 5})[0]
    np.testing.assert_allclose(m, np.exp2(x) @ w2, rtol=1e-5)
    xt = np.asfortranarray(rand_array((5, 4), lm.float32, 4))  # non-contiguous input: converted
    s, _ = prog({"x": xt, "w": w2}, {"B": 5})[0]
    np.testing.assert_allclose(s, np.exp2(xt).sum(1) * 5, rtol=1e-5)


def test_updates_see_values_from_before_the_run():
    """Two states swap: each update reads the other's value from before the run."""
    f = lm.float32
    kg = KG()
    p, q = kg.input("$p", (3,), kind="state"), kg.input("$q", (3,), kind="state")
    p2 = kg.buf((3,))
    kg.kernel("elementwise", (3,), [(p, View.contiguous((3,)))], [(p2, E("Add", L(0, f), S(1.0, f)))])
    kg.update("$q", p2)
    kg.update("$p", q)
    kg.output(p2)
    prog = kg.program()
    pa, qa = np.arange(3, dtype=np.float32), np.full(3, 10, np.float32)
    for _ in range(3):
        outs, (new_q, new_p) = prog({"$p": pa, "$q": qa}, {})
        np.copyto(qa, new_q)
        np.copyto(pa, new_p)
    # (p, q) <- (q, p + 1), three times from ([0, 1, 2], [10, 10, 10])
    np.testing.assert_array_equal(pa, [11, 11, 11])
    np.testing.assert_array_equal(qa, [2, 3, 4])


def test_const_and_iota_buffers():
    kg = KG()
    c = kg.buf((3,), lm.float32, "const", value=np.array([1.0, 2.0, 3.0], np.float32))
    n = kg.buf(("N",), lm.int32, "iota")
    o, o2 = kg.buf((3,)), kg.buf(("N",), lm.int32)
    f = lm.float32
    kg.kernel("elementwise", (3,), [(c, View.contiguous((3,)))], [(o, E("Mul", L(0, f), L(0, f)))])
    kg.kernel("elementwise", ("N",), [(n, View.contiguous((sym("N"),)))],
              [(o2, E("Mul", L(0, lm.int32), S(2, lm.int32)))])
    kg.output(o)
    kg.output(o2)
    prog = kg.program()
    for nn in (4, 2):
        r, r2 = prog({}, {"N": nn})[0]
        np.testing.assert_array_equal(r, [1, 4, 9])
        np.testing.assert_array_equal(r2, np.arange(nn) * 2)


def _optimizer_like(read_old_p_later=False, gather_after=False):
    """m' = 0.9 m + g and p' = p - m' in one kernel; both written back as updates."""
    f = lm.float32
    kg = KG()
    g = kg.input("g", (4, 3))
    p, m = kg.input("$p", (4, 3), kind="state"), kg.input("$m", (4, 3), kind="state")
    v = View.contiguous((4, 3))
    m2, p2 = kg.buf((4, 3)), kg.buf((4, 3))
    mexpr = E("Add", E("Mul", L(1, f), S(0.9, f)), L(0, f))
    kg.kernel("elementwise", (4, 3), [(g, v), (m, v), (p, v)], [(m2, mexpr), (p2, E("Add", L(2, f), E("Mul", mexpr,
                                                                                              S(-1.0, f))))])
    if read_old_p_later:
        o = kg.buf((4, 3))
        kg.kernel("elementwise", (4, 3), [(p, v)], [(o, E("Exp2", L(0, f)))])
        kg.output(o)
    if gather_after:
        i, o = kg.input("i", (4, 1), lm.int32), kg.buf((4, 1))
        kg.kernel("gather", (4, 1), [(g, v), (i, View.contiguous((4, 1)))], [(o, E("Gather", L(0, f), L(1, lm.int32)))],
                  axes=(1,))
        kg.output(o)
    kg.update("$p", p2)
    kg.update("$m", m2)
    return kg.program()


@pytest.mark.parametrize("case", [{}, {"read_old_p_later": True}, {"gather_after": True}], ids=str)
def test_state_updates_written_in_place_only_when_safe(case):
    prog = _optimizer_like(**case)
    rng = np.random.default_rng(0)
    p, m = rng.random((4, 3), dtype=np.float32), np.zeros((4, 3), np.float32)
    want_p, want_m = p.copy(), m.copy()
    arrays = {"$p": p, "$m": m, "i": np.zeros((4, 1), np.int32)}
    for _ in range(3):
        g = rng.random((4, 3), dtype=np.float32)
        outs, (new_p, new_m) = prog({**arrays, "g": g}, {})
        if case.get("read_old_p_later"):
            np.testing.assert_allclose(outs[0], np.exp2(want_p), rtol=1e-6)  # saw p from before the run
        for state, new in ((p, new_p), (m, new_m)):
            if new is not None:  # (None: the run wrote the state's own array, nothing to copy)
                np.copyto(state, new)
        want_m = np.float32(0.9) * want_m + g
        want_p = want_p - want_m
        np.testing.assert_allclose(p, want_p, rtol=1e-6)
        np.testing.assert_allclose(m, want_m, rtol=1e-6)
    in_place = new_p is None  # (the value is in p itself: no copy onto itself is asked for)
    assert in_place == (not case)  # only the plain case is safe to write in place
    assert (new_m is None) == (not case.get("gather_after"))
