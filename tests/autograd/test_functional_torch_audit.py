"""Audit of ``lm.autograd.functional`` against ``torch.autograd.functional`` (torch 2.13) for what a
torch user passes as a tensor: a module's Parameters (``jacobian(f, model.weight)``), tensors made
outside any graph (``lm.arange``, ``lm.ones``) as inputs, ``v`` or outputs, inside a module's forward,
with strict mode, and with the data the function reads closed over. Also pinned: 0-d and empty
inputs and second derivatives of every result (torch's ``create_graph=True``), in float64."""

import functools

import numpy as np
import pytest
import torch
import torch.autograd.functional as TF

import luminal as lm
from luminal.autograd import functional as F

pytestmark = pytest.mark.usefixtures("one_torch_thread")
W = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.5]])
B = np.array([0.1, -0.2])
XA = np.array([[0.3, -0.7, 1.2], [1.0, 0.5, -0.25]])
D, TD = lm.float64, torch.float64
lin, tlin = lm.nn.functional.linear, torch.nn.functional.linear


def linears():
    """A float64 Linear(3, 2) and its torch twin, a graph with x (2, 3) and x's torch twin."""
    m = lm.nn.Linear(3, 2, dtype=D)
    m.weight.set(W)
    m.bias.set(B)
    tm = torch.nn.Linear(3, 2, dtype=TD)
    with torch.no_grad():
        tm.weight.copy_(torch.tensor(W))
        tm.bias.copy_(torch.tensor(B))
    g = lm.Graph()
    return m, tm, g.input("x", (2, 3), D), torch.tensor(XA)


def flat(x) -> list:
    return [t for e in x for t in flat(e)] if isinstance(x, tuple) else [x]


def structure(x):
    return tuple(structure(e) for e in x) if isinstance(x, tuple) else tuple(x.shape)


def check(ours, theirs, **feeds):
    """``ours`` (any nesting; compiled for cpu, or read now when its graph is a host graph) equals
    torch's ``theirs``, structure and shapes included."""
    assert structure(ours) == structure(theirs)
    mine = flat(ours)
    if mine[0].graph.host:
        got = [np.asarray(t) for t in mine]
    else:
        got = lm.compile(mine, backend="cpu")(**feeds)
        got = list(got) if isinstance(got, tuple) else [got]
    for a, b in zip(got, flat(theirs), strict=True):
        np.testing.assert_allclose(a, b.detach().numpy(), rtol=1e-10, atol=1e-12)


def test_jacobian_by_a_modules_parameters_as_torch():
    """torch takes any tensor, a Parameter too, and the usual Jacobian by a model's weights passes them
    (the data closed over); luminal refused a Parameter ("inputs must be a GraphTensor"). Now each is
    read into the graph of the data the function reads: by name from its closure, a functools.partial
    argument, or another input."""
    m, tm, x, tx = linears()
    check(F.jacobian(lambda w: lin(x, w, m.bias).tanh(), m.weight),
          TF.jacobian(lambda w: tlin(tx, w, tm.bias).tanh(), tm.weight), x=XA)
    check(F.jacobian(lambda w, b: lin(x, w, b).tanh(), (m.weight, m.bias)),
          TF.jacobian(lambda w, b: tlin(tx, w, b).tanh(), (tm.weight, tm.bias)), x=XA)
    check(F.jacobian(lambda a, w: lin(a, w).sin(), (x, m.weight)),
          TF.jacobian(lambda a, w: tlin(a, w).sin(), (tx, tm.weight)), x=XA)
    check(F.hessian(lambda b: lin(x, m.weight, b).exp().sum(), m.bias),
          TF.hessian(lambda b: tlin(tx, tm.weight, b).exp().sum(), tm.bias), x=XA)
    check(F.vhp(lambda w: lin(x, w).exp().sum(), m.weight, m.weight),
          TF.vhp(lambda w: tlin(tx, w).exp().sum(), tm.weight, tm.weight), x=XA)

    def f(w, a, linear):
        return linear(a, w).tanh()

    check(F.jacobian(functools.partial(f, a=x, linear=lin), m.weight),
          TF.jacobian(functools.partial(f, a=tx, linear=tlin), tm.weight), x=XA)
    frozen = lm.nn.Parameter(W, requires_grad=False)  # (torch differentiates by a fresh leaf of any tensor)
    check(F.jacobian(lambda w: lin(x, w), frozen),
          TF.jacobian(lambda w: tlin(tx, w), torch.nn.Parameter(torch.tensor(W), requires_grad=False)), x=XA)
    check(F.jacobian(lambda w: (w * x).sum(0), m.weight[0]), TF.jacobian(lambda w: (w * tx).sum(0), tm.weight[0]), x=XA)


def test_jacobian_by_parameters_in_a_modules_forward():
    """Inside a module's forward the Parameters join the graph the module call builds in."""
    m, tm, x, tx = linears()

    class Sensitivity(lm.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = m

        def forward(self, a):
            return F.jacobian(lambda w: lin(a, w).tanh(), self.lin.weight)

    check(Sensitivity()(x), TF.jacobian(lambda w: tlin(tx, w).tanh(), tm.weight), x=XA)


def test_a_model_that_ignores_the_argument_gets_zeros_or_strict_errors_as_torch():
    """torch differentiates by a fresh leaf: ``jacobian(lambda w: model(x), model.weight)`` reads the
    model's own weight, not w, so it is zeros (strict: an error), in luminal too."""
    m, tm, x, tx = linears()
    check(F.jacobian(lambda w: m(x), m.weight), TF.jacobian(lambda w: tm(tx), tm.weight), x=XA)
    with pytest.raises(RuntimeError, match="independent of input 0"):
        TF.jacobian(lambda w: tm(tx), tm.weight, strict=True)
    with pytest.raises(RuntimeError, match="jacobian: output 0 of the user-provided function is independent of "
                                           "input 0"):
        F.jacobian(lambda w: m(x), m.weight, strict=True)


def test_values_made_outside_any_graph_give_values_now():
    """With no graph to join (Parameters or host tensors alone), the function is built in a host graph
    of their values and the results have values now, as torch's eager ones. Two host tensors (each of
    its own host graph) were refused ("input 1 belongs to another graph than input 0")."""
    m, tm, *_ = linears()
    check(F.jacobian(lambda w: (w * w).exp(), m.weight), TF.jacobian(lambda w: (w * w).exp(), tm.weight))
    a, b = lm.arange(1, 4, dtype=D), lm.ones(3, dtype=D)
    ta, tb = torch.arange(1, 4, dtype=TD), torch.ones(3, dtype=TD)
    check(F.jacobian(lambda a, b: a * b.exp(), (a, b)), TF.jacobian(lambda a, b: a * b.exp(), (ta, tb)))
    check(F.hessian(lambda a: (a ** 3).sum(), a), TF.hessian(lambda a: (a ** 3).sum(), ta))


def test_host_tensors_join_the_graph_the_function_reads():
    """A host tensor input with the data closed over, or beside a graph input, was refused ("output 0
    ... belongs to another graph than the inputs", "input 1 belongs to another graph"); torch's
    ``jacobian(f, torch.arange(3.0))`` is its everyday call."""
    g = lm.Graph()
    x = g.input("x", (3,), D)
    tx = torch.tensor(XA[0])
    a, ta = lm.arange(1, 4, dtype=D), torch.arange(1, 4, dtype=TD)
    check(F.jacobian(lambda u: (u * x).sin(), a), TF.jacobian(lambda u: (u * tx).sin(), ta), x=XA[0])
    check(F.jacobian(lambda u, v: u * v, (a, x)), TF.jacobian(lambda u, v: u * v, (ta, tx)), x=XA[0])


def test_v_may_be_a_parameter_or_a_host_tensor():
    """torch's v is any tensor: ``vjp(f, x, torch.ones(2, 2))``; luminal refused lm.ones's host tensor
    ("v belongs to another graph") and a Parameter (not a GraphTensor)."""
    m, tm, x, tx = linears()
    ones = torch.ones(2, 2, dtype=TD)
    check(F.vjp(lambda a: lin(a, m.weight).exp(), x, lm.ones(2, 2, dtype=D)),
          TF.vjp(lambda a: tlin(a, tm.weight).exp(), tx, ones), x=XA)
    check(F.jvp(lambda a: lin(a, m.weight).exp(), x, lm.nn.Parameter(XA[::-1].copy())),
          TF.jvp(lambda a: tlin(a, tm.weight).exp(), tx, torch.tensor(XA[::-1].copy())), x=XA)
    check(F.hvp(lambda b: lin(x, m.weight, b).exp().sum(), m.bias, lm.ones(2, dtype=D)),
          TF.hvp(lambda b: tlin(tx, tm.weight, b).exp().sum(), tm.bias, torch.ones(2, dtype=TD)), x=XA)


def test_a_parameter_or_a_constant_as_an_output():
    """torch: an output that is a Parameter (or a constant) is a tensor whose jacobian by the inputs is
    zeros; luminal refused it ("outputs ... must be a GraphTensor")."""
    m, tm, x, tx = linears()
    check(F.jacobian(lambda a: (a.exp(), m.bias), x), TF.jacobian(lambda a: (a.exp(), tm.bias), tx), x=XA)
    check(F.vjp(lambda a: (a.sin().sum(), lm.ones(2, dtype=D)), x, (lm.ones((), dtype=D), lm.ones(2, dtype=D))),
          TF.vjp(lambda a: (a.sin().sum(), torch.ones(2, dtype=TD)), tx,
                 (torch.ones((), dtype=TD), torch.ones(2, dtype=TD))), x=XA)


@pytest.mark.parametrize("create_graph", [False, True])
def test_strict_reads_closed_over_parameters_in_a_host_graph(create_graph):
    """strict mode: an output of a closed-over trainable Parameter alone requires grad in torch, so the
    vjp passes; in a host graph the Parameter is a constant of its values and still counts."""
    m, tm, *_ = linears()
    v = (lm.ones((2, 3), dtype=D), lm.ones(2, dtype=D))
    tv = (torch.ones(2, 3, dtype=TD), torch.ones(2, dtype=TD))
    check(F.vjp(lambda w: (w.exp(), m.bias * 2), m.weight, v, strict=True, create_graph=create_graph),
          TF.vjp(lambda w: (w.exp(), tm.bias * 2), tm.weight, tv, strict=True, create_graph=create_graph))
    with pytest.raises(RuntimeError, match="vjp: output 1 of the user-provided function does not depend on the "
                                           "inputs"):
        F.vjp(lambda w: (w.exp(), lm.ones(2, dtype=D)), m.weight, v, strict=True)


def test_a_graph_the_function_reads_unseen_is_named_with_the_fix():
    """A callable object's attributes that its ``__call__`` names are found (``_read_by_name``), but not
    data one attribute further (``self.holder.batch``): that function runs in a host graph and its output
    is of another graph; the error says to pass ``p.on(x.graph)``, and that call works."""
    m, tm, x, tx = linears()

    class Data:
        def __init__(self, t, linear):
            self.batch, self.linear = t, linear

        def __call__(self, w):
            return self.linear(self.batch, w).tanh()

    class Holder:
        def __init__(self, t, linear):
            self.holder, self.linear = Data(t, linear), linear

        def __call__(self, w):
            return self.linear(self.holder.batch, w).tanh()

    check(F.jacobian(Data(x, lin), m.weight), TF.jacobian(Data(tx, tlin), tm.weight), x=XA)
    with pytest.warns(UserWarning, match="joins this graph as a constant"), \
            pytest.raises(ValueError, match=r"jacobian: output 0 of the user-provided function belongs to another "
                                            r"graph than the inputs; the inputs were made outside any graph.*"
                                            r"p\.on\(x\.graph\)"):
        F.jacobian(Holder(x, lin), m.weight)
    check(F.jacobian(Holder(x, lin), m.weight.on(x.graph)), TF.jacobian(Data(tx, tlin), tm.weight), x=XA)
    with pytest.raises(TypeError, match="jacobian: input 0 has dtype int32; only float inputs"):
        F.jacobian(lambda b: b * 2, lm.nn.Buffer(np.arange(3)))


def test_zero_dim_and_empty_inputs_as_torch():
    """0-d inputs and outputs give () blocks; an empty input gives empty blocks (torch's jacobian of an
    empty input to an empty output fails in its stack; the zeros here have the shape it documents)."""
    g = lm.Graph()
    s, x, e = g.input("s", (), D), g.input("x", (3,), D), g.input("e", (0,), D)
    feeds = dict(s=np.array(0.4), x=XA[0], e=np.zeros(0))
    ts, tx, te = (torch.tensor(feeds[k]) for k in "sxe")
    check((F.jacobian(lambda s: s.exp(), s), F.jacobian(lambda s: s * x, s), F.hessian(lambda s: s.exp() * s, s),
           F.vjp(lambda s: s.sin(), s), F.hvp(lambda s: s.sin(), s), F.jacobian(lambda e, x: e.sum() + x, (e, x)),
           F.vjp(lambda e: e.exp(), e, e), F.jvp(lambda e: e.exp(), e, e)),
          (TF.jacobian(lambda s: s.exp(), ts), TF.jacobian(lambda s: s * tx, ts),
           TF.hessian(lambda s: s.exp() * s, ts), TF.vjp(lambda s: s.sin(), ts), TF.hvp(lambda s: s.sin(), ts),
           TF.jacobian(lambda e, x: e.sum() + x, (te, tx)),
           TF.vjp(lambda e: e.exp(), te, te), TF.jvp(lambda e: e.exp(), te, te)), **feeds)
    j = F.jacobian(lambda e: e.exp(), e)
    assert tuple(j.shape) == (0, 0)


def test_second_derivatives_of_every_result_as_torch_create_graph():
    """Each result differentiated again (luminal's are always differentiable) equals torch's with
    create_graph=True, through the inputs, the vector v and a tensor the function closes over."""
    g = lm.Graph()
    x, y = g.input("x", (3,), D), g.input("y", (2, 3), D)
    tx, ty = torch.tensor(XA[0], requires_grad=True), torch.tensor(XA, requires_grad=True)

    def f(a, b):
        return ((b @ a).tanh() * (a * a).sum()).exp()

    def s(a):
        return (a.exp() * a.sin()).sum() * (a ** 2).sum()

    def build(mod, x, y):
        J = mod.jacobian(f, (x, y), create_graph=True)
        _, vj = mod.vjp(lambda a: f(a, y), x, y[0, :2], create_graph=True)
        _, jv = mod.jvp(lambda a: f(a, y), x, x * 2, create_graph=True)
        _, hv = mod.hvp(s, x, x.cos(), create_graph=True)
        H = mod.hessian(s, x, create_graph=True)
        return (J[0] ** 2).sum() + J[1].sin().sum() + (vj ** 3).sum() + jv.sum() + hv.sum() + (H * H).sum()

    ours = lm.autograd.grad(build(F, x, y), (x, y))
    theirs = torch.autograd.grad(build(TF, tx, ty), (tx, ty))
    got = lm.compile(list(ours), backend="cpu")(x=XA[0], y=XA)
    for a, b in zip(got, theirs, strict=True):
        np.testing.assert_allclose(a, b.numpy(), rtol=1e-9)
