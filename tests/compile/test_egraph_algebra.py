"""The ``algebra`` ruleset and constant folding: each identity fires where it is exact and nowhere else."""

from __future__ import annotations

import math

import numpy as np
from test_egraph_eval import check_same, ops_of, optimized

import luminal as lm
from luminal.frontend.ops.core import prim


def _x(shape=(3, 4), dtype=lm.float32):
    g = lm.Graph()
    return g, g.input("x", shape, dtype=dtype)


def test_mul_one_and_add_zero_collapse_to_the_input():
    for make in (lambda x: x * 1.0, lambda x: 1.0 * x, lambda x: x + (-0.0), lambda x: -0.0 + x):
        g, x = _x()
        res, (t,) = optimized(make(x))
        assert t.op == "Input" and t.arg == "x", make
    g, x = _x(dtype=lm.int32)
    res, (t,) = optimized(x * 1 + 0)
    assert t.op == "Input"
    assert res.stats["rules"].get("mul-one", 0) + res.stats["rules"].get("mul-one-l", 0) >= 1


def test_float_add_of_positive_zero_stays():
    g, x = _x((2,))
    y = (x + 0.0).reciprocal()  # x = -0.0: 1/(x + 0.0) is +inf, 1/x is -inf
    res, (t,) = optimized(y)
    assert t.srcs[0][0].op == "Add"
    check_same([y], {"x": np.array([-0.0, 2.0], np.float32)})


def test_bool_identities():
    g, x = _x(dtype=lm.bool_)
    res, (t,) = optimized(lm.frontend.ops.logical_and(x, g.constant(True)))
    assert t.op == "Input"


def test_mul_one_through_a_broadcast_view_is_not_collapsed():
    g, x = _x((4,))
    y = x.unsqueeze(0).expand(3, 4) * 1.0  # x is read through a broadcast: the product has another shape
    res, (t,) = optimized(y)
    assert t.op == "Mul" and t.shape == (3, 4)
    check_same([y], {"x": np.arange(4, dtype=np.float32)})


def test_mul_one_with_a_masked_constant_view_is_not_collapsed():
    g, x = _x((4,))
    one = g.full((2,), 1.0).pad((1, 1), value=7.0)  # reads 7 where padded
    y = x * one
    res, (t,) = optimized(y)
    assert t.op == "Mul"
    check_same([y], {"x": np.arange(4, dtype=np.float32)})


def test_mul_zero_is_not_folded():
    g, x = _x()
    res, (t,) = optimized(x * 0.0)
    assert t.op == "Mul"
    arr = np.array([[np.inf, np.nan, -1.0, 0.0]] * 3, np.float32)
    check_same([x * 0.0], {"x": arr})


def test_double_negation():
    g, x = _x()
    res, (t,) = optimized(x.neg().neg())
    assert t.op == "Input"
    assert any(k.startswith("neg-neg") for k in res.stats["rules"])
    g, x = _x(dtype=lm.int32)
    res, (t,) = optimized(x.neg().neg())
    assert t.op == "Input"
    check_same([x.neg().neg()], {"x": np.array([[-2**31, 5, 0, -1]] * 3, np.int32)})


def test_recip_recip_and_detach():
    g, x = _x()
    res, (t,) = optimized(x.reciprocal().reciprocal())
    assert t.op == "Input" and res.stats["rules"]["recip-recip"] >= 1
    g, x = _x()
    res, (t,) = optimized(x.detach())
    assert t.op == "Input" and res.stats["rules"]["copy-id"] >= 1
    g, x = _x()
    res, (t,) = optimized(x.permute(1, 0).detach())  # a detach through a transpose still copies
    assert t.op == "Copy"


def test_scalar_folding_is_exact():
    g = lm.Graph()
    c = g.constant(3.0)
    res, (t,) = optimized(c.exp2())
    assert t.op == "Constant" and t.arg.scalar == 8.0 and res.stats["rules"]["fold-const"] == 1
    res, (t,) = optimized(g.constant(8.0).log2())
    assert t.arg.scalar == 3.0
    # -0.0 and 0.0 stay apart; NaN folds to NaN
    res, (t,) = optimized(g.constant(-0.0) * 1.0)
    assert t.op == "Constant" and math.copysign(1.0, t.arg.scalar) == -1.0
    res, (t,) = optimized(g.constant(-0.0) + 0.0)
    assert math.copysign(1.0, t.arg.scalar) == 1.0
    res, (t,) = optimized(g.constant(float("nan")) * 0.0)
    assert math.isnan(t.arg.scalar)
    # int32 wraps, float16 rounds, float32 rounds like float32 (not float64)
    res, (t,) = optimized(g.constant(2**31 - 1) + g.constant(1))
    assert t.arg.scalar == -2**31 and t.dtype is lm.int32
    res, (t,) = optimized(g.constant(1.0, lm.float16) + g.constant(1e-4, lm.float16))
    assert t.dtype is lm.float16 and t.arg.scalar == float(np.float16(1.0) + np.float16(1e-4))
    res, (t,) = optimized(g.constant(0.1) * 3.0)
    assert t.arg.scalar == float(np.float32(0.1) * np.float32(3.0))
    res, (t,) = optimized(g.constant(True) + g.constant(False))  # bool add is "or"
    assert t.arg.scalar is True


def test_uniform_values_fold_through_broadcasts():
    g, x = _x((2, 3))
    zeros = g.zeros((2, 3))
    z = zeros * 5.0 + zeros  # uniform: no kernel left for it, x reads the scalar
    y = x + z
    res, (t,) = optimized(y)
    assert t.op == "Add" and {s.op for s, _ in t.srcs} == {"Input", "Constant"}
    s = g.zeros((4, 3), lm.int32).sum(0)  # a sum of zeros is zero (and int x + 0 is x)
    res, (t,) = optimized(x.int() + s)
    assert t.op == "Cast"
    res, (t,) = optimized(zeros * 2.0)  # a uniform root is materialised from the scalar
    assert t.op == "Copy" and t.srcs[0][0].op == "Constant" and t.shape == (2, 3)
    check_same([zeros * 2.0, x + z], {"x": np.ones((2, 3), np.float32)})


def test_where_with_a_constant_condition_picks_a_branch():
    g, x = _x()
    y = g.input("y", (3, 4))
    w = lm.frontend.ops.where(g.constant(True), x, y)
    res, (t,) = optimized(w)
    assert t.op == "Input" and t.arg == "x" and res.stats["rules"]["fold-where"] == 1
    w2 = lm.frontend.ops.where(g.constant(False), x, y.permute(1, 0).permute(1, 0) * 2.0)
    res, (t,) = optimized(w2)
    assert t.op == "Mul"


def test_x_times_constant_keeps_the_constant():
    g, x = _x()
    res, _ = optimized(x * 2.0)
    assert sorted(ops_of(res)) == ["Constant", "Input", "Mul"]


def test_prim_level_add_of_a_broadcast_zero():
    g, x = _x((3,))
    zero = g.constant(-0.0)
    y = prim("Add", x, zero.expand(3), shape=(3,))
    res, (t,) = optimized(y)
    assert t.op == "Input"
