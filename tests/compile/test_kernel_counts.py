"""The kernel builder's fusion, seen through ``compiled.report()``: how many kernels the classic
composite ops become, and that Linear + bias + activation, and an optimizer's update, are one kernel."""

import numpy as np
import pytest

import luminal as lm
from luminal import nn, train
from luminal.backends.reference.interpreter import ReferenceInterpreter


def _compile(outs, **arrays):
    f = lm.compile(outs, backend="cpu")
    g = outs[0].graph
    interp = ReferenceInterpreter([(t.node, t.layout) for t in outs], g.constants)
    ref = interp({**arrays, **{k: s.data for k, s in g.states.items()}}, {})
    got = f(**arrays)
    for a, b in zip(got, ref, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    return f.report(show=False)


@pytest.fixture
def x():
    return np.random.default_rng(0).standard_normal((6, 10)).astype(np.float32)


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_softmax_is_three_kernels(op, x):
    g = lm.Graph()
    r = _compile([getattr(g.input("x", (6, 10)), op)(-1)], x=x)
    assert len(r.kernels) <= 3, r


@pytest.mark.parametrize("norm", [nn.LayerNorm(10), nn.RMSNorm(10)])
def test_norms_are_at_most_three_kernels(norm, x):
    g = lm.Graph()
    r = _compile([norm(g.input("x", (6, 10)))], x=x)
    assert len(r.kernels) <= 3, r


def test_cross_entropy_reads_the_logits_in_at_most_three_kernels(x):
    g = lm.Graph()
    logits = g.input("x", (6, 10))
    loss = train.cross_entropy(logits, g.input("y", (6,), dtype=lm.int32))
    r = _compile([loss], x=x, y=np.arange(6, dtype=np.int32))
    f = lm.compile([loss], backend="cpu")
    over_classes = [k for k in f.runner.program.kg.kernels if 10 in k.domain]
    assert len(over_classes) <= 3, r


def test_linear_bias_relu_is_one_matmul_kernel():
    g = lm.Graph()
    lin = nn.Linear(10, 4)
    r = _compile([lin(g.input("x", (6, 10))).relu()],
                 x=np.random.default_rng(1).standard_normal((6, 10)).astype(np.float32))
    assert [k for k, _ in r.kernels] == ["matmul"], r
    assert {"Add", "Max"} <= set(r.kernels[0][1]), r


def test_adamw_update_is_one_kernel_per_parameter():
    lm.manual_seed(0)
    model = nn.Linear(8, 3)
    g = lm.Graph()
    xb = g.input("x", (5, 8))
    loss = (model(xb) ** 2).mean()
    opt = train.AdamW(model.parameters(), lr=1e-2)
    step = train.compile_step(loss, opt, backend="cpu")
    step(x=np.ones((5, 8), np.float32))
    r = step._update.report(show=False)
    updates = [fused for _, fused in r.kernels if "Sqrt" in fused]
    # weight and bias: both moments + the parameter in one kernel each (the bias's joins the
    # reduction that sums its gradient over the batch, as an epilogue)
    assert len(updates) == 2, r
