"""The e-graph gives extraction real choices: the report counts the classes with more than one usable
e-node, a training step has some, and ``search=N`` times programs that differ in their kernels."""

from __future__ import annotations

import functools

import numpy as np

import luminal as lm
from luminal import nn, train
from luminal.core.backend import get_backend
from luminal.train import step as step_mod


def _mlp_step(**compile_kw):
    lm.manual_seed(0)
    g = lm.Graph()
    fc1, fc2 = nn.Linear(8, 16), nn.Linear(16, 4)
    x = g.input("x", (6, 8))
    y = g.input("y", (6,), dtype=lm.int32)
    loss = train.cross_entropy(fc2(fc1(x).relu()), y)
    opt = train.SGD(list(fc1.parameters()) + list(fc2.parameters()), lr=0.1)
    search = compile_kw.pop("search", 0)  # (compile_step's own option; the rest reaches lm.compile below)
    if not compile_kw:
        return train.compile_step(loss, opt, search=search)
    orig = step_mod.compile_graph
    step_mod.compile_graph = functools.partial(lm.compile, **compile_kw)
    try:
        return train.compile_step(loss, opt, search=search)
    finally:
        step_mod.compile_graph = orig


def _batch():
    rng = np.random.default_rng(0)
    return {"x": rng.standard_normal((6, 8)).astype(np.float32), "y": rng.integers(0, 4, 6).astype(np.int32)}


def test_report_counts_classes_with_a_choice(capsys):
    step = _mlp_step()
    r = step._update.report()
    out = capsys.readouterr().out
    k = r.egraph["choices"]
    assert 0 < k < r.egraph["eclasses"]
    assert f"e-classes, {k} with a choice" in out, out


def test_search_times_programs_with_different_kernels(monkeypatch):
    seen = []
    cpu = type(get_backend("cpu"))
    real = cpu.time

    def timed(self, kg, plan):
        seen.append(tuple((k.kind, tuple(k.fused)) for k in kg.kernels))
        return real(self, kg, plan)

    monkeypatch.setattr(cpu, "time", timed)
    step = _mlp_step(search=4, seed=0)
    assert "optimize: search" in step._update.report(show=False).times and len(seen) >= 3
    assert len(set(seen)) >= 2, seen  # the candidates are distinct programs, not the same one timed again
    losses = [float(step(**_batch())) for _ in range(3)]
    ref = _mlp_step()
    want = [float(ref(**_batch())) for _ in range(3)]
    np.testing.assert_allclose(losses, want, rtol=1e-5)


def _strided_product():
    g = lm.Graph()
    a = g.input("t", (64, 48, 2))[:, :, 0]  # strides (96, 2): a GEMM must copy it first
    return a @ g.input("b", (48, 32))


def test_a_contraction_is_priced_both_ways_and_searchable():
    """The contraction rule's MatMul (a copy of ``a``, then BLAS) against the product's reduction:
    the CPU model picks the GEMM; a model where GEMM arithmetic is dear picks the reduction; and
    ``search`` times both."""
    from luminal.compiler.egraph import CPU, CostModel, optimize
    from luminal.compiler.term import topological

    y = _strided_product()
    ops = lambda res: {t.op for t in topological(list(res.terms.values()))}  # noqa: E731
    res = optimize([y.node])
    assert res.stats["rules"].get("contraction") == 1 and res.stats["egraph"]["choices"] == 1
    assert "MatMul" in ops(res)
    assert not CPU.in_place(*(v for _, v in next(t for t in topological(list(res.terms.values()))
                                                 if t.op == "MatMul").srcs), 2)
    assert "MatMul" not in ops(optimize([y.node], cost_model=CostModel(gemm=10.0)))
    timed = []
    optimize([y.node], search=3, timer=lambda terms: timed.append(
        {t.op for t in topological(list(terms.values()))}) or 1.0)
    assert len(timed) == 2 and {"MatMul" in t for t in timed} == {True, False}


def test_a_convolution_is_a_gemm_through_the_contraction_rule():
    from luminal.compiler.egraph import optimize

    lm.manual_seed(0)
    g = lm.Graph()
    x = g.input("x", (2, 3, 9, 9))
    y = nn.Conv2d(3, 4, 3, padding=1)(x)
    res = optimize([y.node], constants=g.constants)
    assert res.stats["rules"].get("contraction", 0) >= 1
    xv = np.random.default_rng(0).standard_normal((2, 3, 9, 9)).astype(np.float32)
    np.testing.assert_allclose(lm.compile([y])(x=xv), lm.compile([y], backend="reference")(x=xv),
                               rtol=1e-5, atol=1e-5)
