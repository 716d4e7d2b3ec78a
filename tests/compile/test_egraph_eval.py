"""A tiny Term interpreter (reference semantics, MatMul as the sum of the product) and the check
that optimised programs compute what the reference interpreter computes. Other ``test_egraph_*``
files import ``optimized``, ``run_terms`` and ``terms_of`` from here."""

from __future__ import annotations

import numpy as np
import pytest

import luminal as lm
from luminal.compiler.egraph import optimize
from luminal.compiler.term import topological
from luminal.core import dtype as dt
from luminal.core import numpy_ops as ops
from luminal.core.symbolic import evaluate
from luminal.train import cross_entropy, grad


def run_terms(roots: dict, arrays: dict, constants: dict, env=None) -> dict:
    """Evaluate the Term DAG ``roots`` ({key: Term}); returns {key: array}."""
    env = env or {}
    vals: dict = {}
    with np.errstate(all="ignore"):
        for t in topological(list(roots.values())):
            vals[id(t)] = np.array(_eval(t, vals, arrays, constants, env), order="C")
    return {k: vals[id(t)] for k, t in roots.items()}


def _eval(t, vals, arrays, constants, env):
    op, d = t.op, t.dtype
    if op == "Input":
        return arrays[t.arg]
    if op == "Constant":
        if t.arg.scalar is None:
            return constants[t.arg]
        return np.asarray(evaluate(t.arg.scalar, env) if t.arg.digest == "sym" else t.arg.scalar, d.np)
    if op == "Arange":
        return np.arange(evaluate(t.arg, env), dtype=np.int32)
    xs = [ops.read(vals[id(s)], v, env) for s, v in t.srcs]
    src = t.srcs[0][0].dtype
    if op == "MatMul":
        cd = ops.compute_dtype(src)
        return dt.to_storage(np.sum(xs[0].astype(cd) * xs[1].astype(cd), axis=t.arg), d)
    if op == "Copy":
        return np.array(xs[0])
    if op == "Cast":
        return ops.cast(xs[0], src, d)
    if op == "Where":
        return dt.to_storage(ops.where(*xs), d)
    if op == "Gather":
        return ops.gather(*xs, t.arg)
    if op == "ScatterAdd":
        return ops.scatter_add(*xs, t.arg, d)
    if op in ("SumReduce", "MaxReduce"):
        x = xs[0].astype(ops.compute_dtype(src), copy=False)
        return dt.to_storage(np.asarray(ops.reduce("sum" if op == "SumReduce" else "max", x, (t.arg,), d)), d)
    return dt.to_storage(np.asarray(ops.ufunc(op, src)(*xs)), d)


def optimized(*outputs, **kw):
    """optimize() the graph of ``outputs`` (GraphTensors); returns (result, [Term per output])."""
    res = optimize([t.node for t in outputs], constants=outputs[0].graph.constants, **kw)
    return res, [res.terms[t.node.id] for t in outputs]


def terms_of(res) -> list:
    return topological(list(res.terms.values()))


def ops_of(res) -> list:
    return [t.op for t in terms_of(res)]


def check_same(outputs, arrays, env=None, **kw):
    """The optimised program gives the reference interpreter's results (exactly for ints/bools, to
    float rounding otherwise: a MatMul sums in a different order)."""
    graph = outputs[0].graph
    want = lm.compile(list(outputs), backend="reference")(**{k: v for k, v in arrays.items() if k in graph.inputs})
    want = want if isinstance(want, tuple) else (want,)
    res, terms = optimized(*outputs, **kw)
    arrays = {**arrays, **{name: s.data for name, s in graph.states.items()}}
    got = run_terms({i: t for i, t in enumerate(terms)}, arrays, graph.constants, env)
    for i, (o, w) in enumerate(zip(outputs, want)):
        g = ops.read(got[i], o.layout, env or {})
        assert g.shape == w.shape and g.dtype == w.dtype
        if w.dtype.kind in "biu":
            np.testing.assert_array_equal(g, w)
        else:
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6, equal_nan=True)
    return res


def _rand(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def test_mlp_forward_backward_matches_reference():
    from luminal import nn

    rng = np.random.default_rng(0)
    g = lm.Graph()
    fc1, fc2 = nn.Linear(12, 8), nn.Linear(8, 5)
    x = g.input("x", ("B", 12))
    y = g.input("y", ("B",), dtype=lm.int32)
    loss = cross_entropy(fc2(fc1(x).relu()), y)
    params = list(fc1.parameters()) + list(fc2.parameters())
    grads = grad(loss, params)
    arrays = {"x": _rand(rng, 6, 12), "y": rng.integers(0, 5, 6).astype(np.int32)}
    res = check_same([loss, *grads], arrays, env={"B": 6})
    assert res.stats["nodes_after"] < res.stats["nodes_before"]


def test_softmax_and_layernorm_match_reference():
    rng = np.random.default_rng(1)
    g = lm.Graph()
    x = g.input("x", (3, 7))
    w = g.input("w", (7,))
    sm = x.softmax(-1)
    ln = (x - x.mean(-1, keepdim=True)) / (x.var(-1, keepdim=True) + 1e-5).sqrt() * w
    check_same([sm, ln], {"x": _rand(rng, 3, 7), "w": _rand(rng, 7)})


@pytest.mark.parametrize("shapes", [((5, 4), (4, 3)), ((2, 5, 4), (4, 3)), ((2, 1, 5, 4), (3, 4, 6)),
                                    ((4,), (4, 3)), ((5, 4), (4,)), ((2, 3, 4), (2, 4, 5))])
def test_matmul_forms_match_reference(shapes):
    rng = np.random.default_rng(2)
    g = lm.Graph()
    a, b = g.input("a", shapes[0]), g.input("b", shapes[1])
    outs = [a @ b, (b.mT @ a.mT) if len(shapes[0]) > 1 and len(shapes[1]) > 1 else a @ b]
    check_same(outs, {"a": _rand(rng, *shapes[0]), "b": _rand(rng, *shapes[1])})


def test_folding_matches_reference_for_special_values():
    g = lm.Graph()
    x = g.input("x", (4,))
    vals = [g.constant(v) for v in (0.0, -0.0, float("nan"), float("inf"), 3.0)]
    outs = [x + (c * 2.0).exp2() for c in vals] + [x * vals[1], x + vals[0].reciprocal(), (vals[2] < 1.0).float() + x]
    outs += [x.half() + g.constant(1e-3, lm.float16) * 3.0, g.constant(2**31 - 1) + g.constant(1) + x.int()]
    check_same(outs, {"x": np.array([1.0, -0.0, np.inf, -2.5], np.float32)})
