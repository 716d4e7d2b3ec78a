"""The ``fusion`` ruleset's verdicts (``Term.fusible``): which edges may fuse, and which must not."""

from __future__ import annotations

from test_egraph_eval import optimized, terms_of

import luminal as lm
from luminal.frontend.ops.core import prim


def _one(res, op):
    (t,) = [t for t in terms_of(res) if t.op == op]
    return t


def _edge(t, src_op):
    (i,) = [i for i, (s, _) in enumerate(t.srcs) if s.op == src_op]
    return t.fusible[i]


def test_elementwise_chain_fuses():
    g = lm.Graph()
    x = g.input("x", (3, 4))
    y = (x.exp2() + 1.0).sqrt()
    res, (t,) = optimized(y)
    assert t.op == "Sqrt" and t.fusible == (True,)
    add = t.srcs[0][0]
    assert add.op == "Add" and _edge(add, "Exp2") is True
    assert _edge(add, "Constant") is False  # a leaf never fuses
    assert add.srcs[0][0].fusible == (False,)  # Exp2 reads an Input


def test_reduction_prologue_epilogue_and_chain():
    g = lm.Graph()
    x = g.input("x", (3, 4, 5))
    s = (x * 2.0).sum(-1)  # prologue
    y = s.sum(-1).sqrt()  # chained reduction, then epilogue
    m = (x.amax(-1) + 1.0)  # max epilogue
    res, _ = optimized(y, m)
    sums = [t for t in terms_of(res) if t.op == "SumReduce"]
    inner = next(t for t in sums if t.srcs[0][0].op == "Mul")
    outer = next(t for t in sums if t.srcs[0][0].op == "SumReduce")
    assert inner.fusible == (True,) and outer.fusible == (True,)
    assert _one(res, "Sqrt").fusible == (True,)
    add = _one(res, "Add")
    assert _edge(add, "MaxReduce") is True


def test_max_reduce_does_not_chain_and_matmul_has_no_prologue():
    g = lm.Graph()
    x = g.input("x", (3, 4, 5))
    y = x.amax(-1).amax(-1)
    res, (t,) = optimized(y)
    assert t.op == "MaxReduce" and t.srcs[0][0].op == "MaxReduce" and t.fusible == (False,)
    g = lm.Graph()
    a, b = g.input("a", (5, 4)), g.input("b", (4, 3))
    y = ((a * 2.0) @ b).relu()
    res, _ = optimized(y)
    mm = _one(res, "MatMul")
    assert mm.fusible == (False, False)
    assert any(_edge(t, "MatMul") for t in terms_of(res) if any(s.op == "MatMul" for s, _ in t.srcs))


def test_only_in_order_views_fuse():
    g = lm.Graph()
    x = g.input("x", (3, 4))
    e = x.exp2()
    y = e.permute(1, 0) + 1.0  # transposed read
    z = e.unsqueeze(0).expand(2, 3, 4).sum(0)  # broadcast read into a reduction
    w = e[1:].sin()  # a slice: an offset into the buffer
    v = e.reshape(4, 3).sqrt()  # a reshape reads the whole buffer in order: fuses
    res, _ = optimized(y, z, w, v)
    assert _edge(_one(res, "Add"), "Exp2") is False
    assert _one(res, "SumReduce").fusible == (False,)
    assert _one(res, "Sin").fusible == (False,)
    assert _one(res, "Sqrt").fusible == (True,)


def test_gather_scatter_never_fuse():
    g = lm.Graph()
    x = g.input("x", (3, 4))
    idx = g.input("i", (3, 1), dtype=lm.int32)
    gat = prim("Gather", x.exp2(), idx, arg=1, shape=(3, 1))
    y = gat.sqrt()
    res, (t,) = optimized(y)
    assert t.fusible == (False,)
    assert _one(res, "Gather").fusible == (False, False)


def test_cast_copy_where_and_compare_are_elementwise():
    g = lm.Graph()
    x = g.input("x", (3, 4))
    c = x < 0.5
    y = lm.frontend.ops.where(c, x.exp2(), x).half().float()
    res, (t,) = optimized(y)
    assert t.op == "Cast" and t.fusible == (True,)
    wh = _one(res, "Where")
    assert wh.fusible[0] is True and _edge(wh, "Exp2") is True and _edge(wh, "Input") is False
