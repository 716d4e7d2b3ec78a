"""The ``matmul`` ruleset: SumReduce(Mul) becomes MatMul exactly on GEMM layouts. Float products in
other layouts with an M or N axis get a MatMul alternative from the ``contraction`` ruleset instead
(the cost model then picks one); dot products, masked views and integer products get neither."""

from __future__ import annotations

import numpy as np
import pytest
from test_egraph_eval import check_same, ops_of, optimized, terms_of

import luminal as lm
from luminal import nn
from luminal.frontend.ops.core import prim
from luminal.train import cross_entropy, grad


def _mm(a_shape, b_shape, prep=lambda a, b: (a, b)):
    g = lm.Graph()
    a, b = prep(g.input("a", a_shape), g.input("b", b_shape))
    return a, b, a @ b


@pytest.mark.parametrize("a_shape,b_shape,prep", [
    ((5, 4), (4, 3), None),
    ((4, 5), (4, 3), lambda a, b: (a.mT, b)),  # a column-major
    ((5, 4), (3, 4), lambda a, b: (a, b.mT)),  # b column-major (x W^T, as nn.Linear)
    ((4, 5), (3, 4), lambda a, b: (a.mT, b.mT)),
    ((2, 5, 4), (4, 3), None),  # batch of a folds into M (merged)
    ((2, 5, 4), (2, 4, 3), None),  # batched
    ((2, 5, 4), (1, 4, 3), None),  # broadcast batch (b's batch of 1 expands)
    ((4,), (4, 3), None),  # vector @ matrix
    ((5, 4), (4,), None),  # matrix @ vector
    ((3, 5, 4), (3, 4, 2), lambda a, b: (a, b.permute(0, 2, 1).permute(0, 2, 1))),
    (("B", 4), (4, "N"), None),  # symbolic dims
])
def test_gemm_layouts_become_matmul(a_shape, b_shape, prep):
    a, b, c = _mm(a_shape, b_shape, prep or (lambda a, b: (a, b)))
    res, (t,) = optimized(c)
    found = [x for x in terms_of(res) if x.op == "MatMul"]
    assert len(found) == 1, ops_of(res)
    assert "SumReduce" not in ops_of(res) and "Mul" not in ops_of(res)
    mm = found[0]
    assert mm.origin is not None and mm.srcs[0][0].op == "Input" and mm.srcs[1][0].op == "Input"
    if all(isinstance(d, int) for d in a_shape + b_shape):
        rng = np.random.default_rng(0)
        check_same([c], {"a": rng.standard_normal(a_shape).astype(np.float32),
                         "b": rng.standard_normal(b_shape).astype(np.float32)})


def _strict(res) -> int:
    return res.stats["rules"].get("matmul", 0)


def _contraction(res) -> int:
    return res.stats["rules"].get("contraction", 0)


def test_operand_without_a_unit_stride_is_a_contraction():
    g = lm.Graph()
    t = g.input("t", (5, 4, 2))
    b = g.input("b", (4, 3))
    a = t[:, :, 0]  # strides (8, 2): neither M nor K is unit
    res, _ = optimized(a @ b)
    assert _strict(res) == 0 and _contraction(res) == 1
    assert res.stats["egraph"]["choices"] == 1  # the reduction of the product, or a GEMM after a copy of a
    ti = g.input("ti", (5, 4, 2), dtype=lm.int32)
    res, _ = optimized(ti[:, :, 0] @ g.input("bi", (4, 3), dtype=lm.int32))
    assert "MatMul" not in ops_of(res) and "SumReduce" in ops_of(res)  # BLAS has no integer GEMM
    rng = np.random.default_rng(1)
    check_same([a @ b], {"t": rng.standard_normal((5, 4, 2)).astype(np.float32),
                         "b": rng.standard_normal((4, 3)).astype(np.float32)})


def test_two_m_groups_are_a_contraction():
    g = lm.Graph()
    x = g.input("x", (3, 4, 5))  # product (i, k, j, n): M axes i and j are not adjacent
    w = g.input("w", (4, 6))
    lhs = x.permute(0, 1, 2).unsqueeze(-1).expand(3, 4, 5, 6)
    rhs = w.unsqueeze(0).unsqueeze(2).expand(3, 4, 5, 6)
    y = (lhs * rhs).sum(1)
    res, _ = optimized(y)
    assert _strict(res) == 0 and _contraction(res) == 1


@pytest.mark.parametrize("a_shape,b_shape", [((2, 1, 5, 4), (3, 4, 6)), ((1, 5, 4), (3, 4, 6))])
def test_batches_that_split_a_group_are_contractions(a_shape, b_shape):
    """(2,1,5,4) @ (3,4,6): product axes (2: M, 3: N, 5: M, 4: K, 6: N), two M groups; (1,5,4) @
    (3,4,6): (3: N, 5: M, 4: K, 6: N), two N groups. Neither is one GEMM by the layout's definition:
    the strict rule leaves them, the contraction rule offers a GEMM over a batch."""
    a, b, c = _mm(a_shape, b_shape)
    res, _ = optimized(c)
    assert _strict(res) == 0 and _contraction(res) == 1
    rng = np.random.default_rng(2)
    check_same([c], {"a": rng.standard_normal(a_shape).astype(np.float32),
                     "b": rng.standard_normal(b_shape).astype(np.float32)})


def test_dot_products_stay_sum_of_product():
    g = lm.Graph()
    x = g.input("x", (6, 10))
    d = x - x.mean(-1, keepdim=True)
    res, _ = optimized((d * d).sum(-1), g.input("v", (10,)) @ g.input("u", (10,)))
    assert "MatMul" not in ops_of(res) and _contraction(res) == 0


def test_masked_operand_stays_sum_of_product():
    g = lm.Graph()
    a = g.input("a", (5, 3)).pad((0, 1))  # (5, 4), last column padded
    b = g.input("b", (4, 3))
    res, _ = optimized(a @ b)
    assert "MatMul" not in ops_of(res) and _contraction(res) == 0


def test_sum_of_product_over_a_broadcast_axis_stays():
    g = lm.Graph()
    a = g.input("a", (5,))
    b = g.input("b", (3,))
    prod = prim("Mul", a.unsqueeze(1).expand(5, 3), b.unsqueeze(0).expand(5, 3), shape=(5, 3))
    res, _ = optimized(prim("SumReduce", prod, arg=1, shape=(5,)))  # k has stride 0 in a
    assert "MatMul" not in ops_of(res) and _contraction(res) == 0


def _mlp(x_grad: bool):
    g = lm.Graph()
    fc1, fc2 = nn.Linear(12, 8), nn.Linear(8, 5)
    x = g.input("x", ("B", 12))
    y = g.input("y", ("B",), dtype=lm.int32)
    loss = cross_entropy(fc2(fc1(x).relu()), y)
    params = list(fc1.parameters()) + list(fc2.parameters())
    grads = grad(loss, params + ([x] if x_grad else []))
    return [loss, *grads]


def test_mlp_forward_backward_has_exactly_the_expected_matmuls():
    res, _ = optimized(*_mlp(False))
    mms = [t for t in terms_of(res) if t.op == "MatMul"]
    assert len(mms) == 5  # forward 2; backward dW1, dW2, dh
    assert "SumReduce" in ops_of(res)  # bias gradients and the loss stay reductions
    shapes = sorted(str(t.shape) for t in mms)
    assert shapes == sorted(["(B, 8)", "(B, 5)", "(B, 8)", "(12, 8)", "(8, 5)"])
    res, _ = optimized(*_mlp(True))
    assert sum(t.op == "MatMul" for t in terms_of(res)) == 6  # + dx


def test_attention_scores_and_mixing_are_matmuls():
    g = lm.Graph()
    q, k, v = (g.input(n, (2, 3, 6, 4)) for n in "qkv")
    att = (q @ k.mT).softmax(-1) @ v
    res, _ = optimized(att)
    assert sum(t.op == "MatMul" for t in terms_of(res)) == 2
    rng = np.random.default_rng(3)
    check_same([att], {n: rng.standard_normal((2, 3, 6, 4)).astype(np.float32) for n in "qkv"})


def _gemm_ok(shape, sa, sb, k) -> bool:
    """The layout's definition, written plainly (the rule computes it with bit masks)."""
    if sa[k] == 0 or sb[k] == 0:
        return False
    cls = [None if i == k or d == 1 else ("B" if (sa[i] == 0) == (sb[i] == 0) else "M" if sa[i] else "N")
           for i, d in enumerate(shape)]

    def groups(c, s):
        out, prev = [], None
        for i in range(len(shape)):
            if cls[i] == c:
                if prev == i - 1 and s[i - 1] == shape[i] * s[i]:
                    out[-1].append(i)
                else:
                    out.append([i])
                prev = i
        return out

    gm, gn = groups("M", sa), groups("N", sb)
    if len(gm) > 1 or len(gn) > 1 or not (gm or gn):  # (a dot product is left to the reduction)
        return False
    return (sa[k] == 1 or not gm or sa[gm[0][-1]] == 1) and (sb[k] == 1 or not gn or sb[gn[0][-1]] == 1)


def test_layout_rule_agrees_with_the_definition_on_random_views():
    from luminal.core.view import View
    from luminal.frontend.graph import Node

    rng = np.random.default_rng(7)
    # int32: the contraction rule (float products only) stays out, so a MatMul means the strict rule's
    a = Node(-1, "Input", (), "a", lm.int32, (1000,))
    b = Node(-2, "Input", (), "b", lm.int32, (1000,))
    roots, want = [], {}
    for i in range(300):
        rank = int(rng.integers(2, 6))
        shape = tuple(int(rng.choice([1, 2, 3, 4])) for _ in range(rank))

        def strides():
            s = [int(rng.choice([0, 0, 1, 2, 3, 4, 6, 12])) for _ in range(rank)]
            if rng.random() < 0.5:  # often a contiguous layout of a random subset of the axes
                acc = 1
                for j in reversed(range(rank)):
                    if s[j]:
                        s[j] = acc
                        acc *= shape[j]
            return tuple(s)

        sa, sb, k = strides(), strides(), int(rng.integers(rank))
        mul = Node(-10 - 2 * i, "Mul", ((a, View(shape, sa)), (b, View(shape, sb))), None, lm.int32, shape)
        out = shape[:k] + shape[k + 1:]
        red = Node(-11 - 2 * i, "SumReduce", ((mul, View.contiguous(shape)),), k, lm.int32, out)
        roots.append(red)
        want[red.id] = _gemm_ok(shape, sa, sb, k)
    from luminal.compiler.egraph import optimize

    res = optimize(roots)
    got = {rid: t.op == "MatMul" for rid, t in res.terms.items()}
    assert got == want
    assert 20 < sum(want.values()) < 280  # both verdicts well exercised
