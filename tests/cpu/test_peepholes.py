"""The compiled CPU backend's peepholes (``luminal/cpu/exprs.py``, ``lowering.py``): frontend
compositions evaluated as one numpy call each, and cheaper call patterns for selects, broadcasts
along short axes and sums of padded loads. Each must give the reference interpreter's values
(comparisons and selects bit for bit, NaN, infinities and signed zeros included) and must fire on
the patterns it is for (checked on the lowered calls)."""

from __future__ import annotations

import numpy as np
import pytest
from kg_helpers import KG, E, L, S, View, prim, rand_array, ref

import luminal as lm
from luminal.core import numpy_ops as ops

SPECIAL = [0.0, -0.0, 1.5, -1.5, np.inf, -np.inf, np.nan, 3.0]


def _compiled_pair(build, arrays):
    """``build(g) -> [tensors]`` compiled for the cpu backend and for the reference; returns both
    results and the cpu program's calls."""
    out = []
    for backend in ("cpu", "reference"):
        g = lm.Graph()
        f = lm.compile(build(g), backend=backend)
        res = f(**arrays)
        out.append(res if isinstance(res, tuple) else (res,))
        if backend == "cpu":
            calls = next(iter(f.runner.program._bindings.values())).calls
    return out[0], out[1], calls


def _grid(dtype):
    """Every pair of special values, as two (8, 8) arrays."""
    v = lm.core.dtype.to_storage(np.array(SPECIAL), dtype)
    return np.ascontiguousarray(np.repeat(v[:, None], 8, 1)), np.ascontiguousarray(np.repeat(v[None, :], 8, 0))


COMPARISONS = {"eq": (lambda a, b: a.eq(b), np.equal), "ne": (lambda a, b: a.ne(b), np.not_equal),
               "le": (lambda a, b: a.le(b), np.less_equal), "ge": (lambda a, b: a.ge(b), np.less_equal),
               "isnan": (lambda a, b: a.isnan(), np.isnan)}


@pytest.mark.parametrize("name", COMPARISONS)
@pytest.mark.parametrize("d", [lm.float32, lm.float16, lm.bfloat16, lm.float64], ids=lambda d: d.name)
def test_comparisons_are_one_ufunc_with_the_references_values(name, d):
    op, ufunc = COMPARISONS[name]
    a, b = _grid(d)

    def build(g):
        return [op(g.input("a", (8, 8), d), g.input("b", (8, 8), d))]

    got, want, calls = _compiled_pair(build, {"a": a, "b": b})
    np.testing.assert_array_equal(got[0], want[0])
    assert [f for f, _ in calls] == [ufunc]


@pytest.mark.parametrize("d", [lm.int32, lm.bool], ids=lambda d: d.name)
def test_integer_and_bool_equality_is_one_ufunc(d):
    a, b = rand_array((6, 5), d, 1, -2, 2), rand_array((6, 5), d, 2, -2, 2)
    got, want, calls = _compiled_pair(lambda g: [g.input("a", (6, 5), d).eq(g.input("b", (6, 5), d))],
                                      {"a": a, "b": b})
    np.testing.assert_array_equal(got[0], want[0])
    assert [f for f, _ in calls] == [np.equal]


def test_comparison_with_a_number_and_relu_with_its_gradient():
    """``x == 0`` (whose isnan of the number the compiler folds) is one call; a ReLU is one compare
    and one two-pass select, its gradient likewise; values are the reference's bit for bit."""
    from luminal import train

    x = np.array(SPECIAL * 2, np.float32)

    def build(g):
        t = g.input("x", (16,))
        y = t.relu()
        return [t.eq(0.0), y, train.grad((y * y).sum(), t)]

    got, want, calls = _compiled_pair(build, {"x": x})
    for gv, wv in zip(got, want):
        np.testing.assert_array_equal(gv, wv)
        assert np.array_equal(np.signbit(gv), np.signbit(wv)) if gv.dtype.kind == "f" else True
    names = [getattr(f, "__name__", "") for f, _ in calls]
    assert "where" not in names and names.count("where_zero") >= 2


@pytest.mark.parametrize("zero_side", [1, 2])
@pytest.mark.parametrize("d", [lm.float32, lm.float16, lm.int32, lm.bool], ids=lambda d: d.name)
def test_select_against_zero_takes_two_passes(zero_side, d):
    shape = (5, 6)
    c, x = rand_array(shape, lm.bool, 1), rand_array(shape, d, 2)
    zero = S(False if d is lm.bool else 0, d)
    args = (L(1, d), zero) if zero_side == 2 else (zero, L(1, d))
    kg = KG()
    cb, xb = kg.input("c", shape, lm.bool), kg.input("x", shape, d)
    out = kg.buf(shape, d)
    kg.kernel("elementwise", shape, [(cb, View.contiguous(shape)), (xb, View.contiguous(shape))],
              [(out, E("Where", L(0, lm.bool), *args))])
    kg.output(out)
    prog = kg.program()
    (got,), _ = prog({"c": c, "x": x}, {})
    want = np.where(c, x, 0) if zero_side == 2 else np.where(c, 0, x)
    np.testing.assert_array_equal(got, want.astype(got.dtype))
    assert [f for f, _ in next(iter(prog._bindings.values())).calls] == [ops.where_zero]


def test_select_against_negative_zero_keeps_its_sign():
    """-0.0 is not all-zero bits: such a select keeps the general bit-select."""
    shape = (4,)
    f = lm.float32
    kg = KG()
    cb, xb = kg.input("c", shape, lm.bool), kg.input("x", shape)
    out = kg.buf(shape)
    kg.kernel("elementwise", shape, [(cb, View.contiguous(shape)), (xb, View.contiguous(shape))],
              [(out, E("Where", L(0, lm.bool), S(-0.0, f), L(1, f)))])
    kg.output(out)
    c = np.array([True, False, True, False])
    (got,), _ = kg.program()({"c": c, "x": np.ones(4, np.float32)}, {})
    assert np.array_equal(np.signbit(got), c)


def test_broadcast_along_a_short_inner_axis_is_split():
    """A pooling gradient's ``x == max`` with the max broadcast along a 2-wide innermost axis: one call
    per index along it, the same values."""
    f = lm.float32
    kg = KG()
    x, m = kg.input("x", (3, 4, 2)), kg.input("m", (3, 4))
    out, out2 = kg.buf((3, 4, 2), lm.bool), kg.buf((3, 4, 2))
    mv = View((3, 4, 2), (4, 1, 0))
    xv = View.contiguous((3, 4, 2))
    kg.kernel("elementwise", (3, 4, 2), [(x, xv), (m, mv)],
              [(out, E("LessThan", L(0, f), L(1, f))), (out2, E("Mul", L(0, f), L(1, f)))])
    kg.output(out)
    kg.output(out2)
    prog = kg.program()
    a, b = rand_array((3, 4, 2), f, 1), rand_array((3, 4), f, 2)
    lt, mul = prog({"x": a, "m": b}, {})[0]
    np.testing.assert_array_equal(lt, a < b[..., None])
    np.testing.assert_array_equal(mul, a * b[..., None])
    calls = next(iter(prog._bindings.values())).calls
    assert [f for f, _ in calls] == [np.less, np.less, np.multiply, np.multiply]


def test_product_with_a_reciprocal_is_a_division():
    f = lm.float32
    kg = KG()
    x, y = kg.input("x", (5,)), kg.input("y", (5,))
    out = kg.buf((5,))
    v = View.contiguous((5,))
    kg.kernel("elementwise", (5,), [(x, v), (y, v)], [(out, E("Mul", L(0, f), E("Recip", L(1, f))))])
    kg.output(out)
    prog = kg.program()
    a, b = rand_array((5,), f, 1), rand_array((5,), f, 2, 0.5, 3.0)
    (got,), _ = prog({"x": a, "y": b}, {})
    np.testing.assert_array_equal(got, a / b)
    assert [f for f, _ in next(iter(prog._bindings.values())).calls] == [np.divide]


def _col2im(windows_h, windows_w, size=6, k=3):
    """The gradient of 2-d overlapping windows: the sum of ``k*k`` shifted, zero-padded (B, size,
    size) boxes of g (B, k, k, size, size), as a tree of Adds (one chain per window row), as the
    compiler emits it."""
    f = lm.float32
    n = size + k - 1
    kg = KG()
    g = kg.input("g", (2, k, k, size, size))
    out = kg.buf((2, n, n))
    inputs, terms = [], []
    for i in range(k):
        row = None
        for j in range(k):
            base = View((2, size, size), (k * k * size * size, size, 1), (i * k + j) * size * size)
            v = base.pad_dim(1, i, k - 1 - i, 0.0).pad_dim(2, j, k - 1 - j, 0.0)
            inputs.append((g, v))
            t = E("Copy", L(len(inputs) - 1, f))
            row = t if row is None else E("Add", row, t)
        terms.append(row)
    total = terms[0]
    for t in terms[1:]:
        total = E("Add", total, t)
    kg.kernel("elementwise", (2, n, n), inputs, [(out, total)])
    kg.output(out)
    return kg, inputs


def test_sum_of_padded_loads_accumulates_in_place():
    kg, inputs = _col2im(3, 3)
    prog = kg.program()
    a = rand_array((2, 3, 3, 6, 6), lm.float32, 1)
    (got,), _ = prog({"g": a}, {})
    want = np.zeros((2, 8, 8), np.float32)
    for i in range(3):
        for j in range(3):
            want[:, i:i + 6, j:j + 6] += a[:, i, j]

    def build(gr):
        t = gr.input("g", a.shape)
        total = None
        for _, v in inputs:
            p = gr.tensor(t.node, v)
            total = p if total is None else prim("Add", total, p)
        return [total]

    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(got, ref(build, {"g": a})[0], rtol=1e-6, atol=1e-6)
    calls = next(iter(prog._bindings.values())).calls
    assert all(f in (np.copyto, np.add) for f, _ in calls)
    assert not any(f is np.add and args[0].shape == (2, 8, 8) for f, args in calls)  # no full-size sums
