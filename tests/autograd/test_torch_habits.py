"""torch habits met porting a training script, each against torch's behaviour: ``lm.autograd.grad``
over ``model.parameters()`` (a generator) or a dict's ``values()``; a Parameter indexed outside any
graph and combined with a graph's tensor, differentiable as torch's view of it (it was a constant of
its values: "not used"); ``p.grad`` and ``model.zero_grad()``, which name where luminal's gradients
are; ``save_safetensors`` of a nested dict, which names ``train.save_checkpoint``."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import luminal as lm
from luminal import nn
from luminal.nn import functional as F

pytestmark = pytest.mark.usefixtures("one_torch_thread")
W = (np.arange(20, dtype=np.float32).reshape(5, 4) - 9.5) / 7
XV = np.array([0.5, -1.0, 2.0, 0.25], np.float32)


def _linears():
    """A luminal Linear(4, 5) and torch's with the same weights, a graph input x and torch's x."""
    m, tm = nn.Linear(4, 5), torch.nn.Linear(4, 5)
    m.weight.data[...] = W
    m.bias.data[...] = np.linspace(-1, 1, 5, dtype=np.float32)
    with torch.no_grad():
        tm.weight.copy_(torch.from_numpy(W))
        tm.bias.copy_(torch.from_numpy(m.bias.data))
    g = lm.Graph()
    return m, tm, g.input("x", (4,)), torch.tensor(XV)


def _run(outs):
    return lm.compile(list(outs), backend="cpu")(x=XV)


@pytest.mark.parametrize("make", [
    lambda m: m.parameters(),
    lambda m: dict(m.named_parameters()).values(),
    lambda m: (p for p in [m.weight, m.bias]),
], ids=["parameters", "dict-values", "generator"])
def test_grad_takes_any_iterable_of_inputs(make):
    m, tm, x, tx = _linears()
    got = lm.autograd.grad((m(x) ** 2).sum(), make(m))
    want = torch.autograd.grad((tm(tx) ** 2).sum(), tm.parameters())
    assert len(got) == 2
    for a, b in zip(_run(got), want):
        np.testing.assert_allclose(a, b.numpy(), rtol=1e-5, atol=1e-6)
    y = m(x)
    (gx,) = lm.autograd.grad([y, y.sum()], [x], (s for s in [y, None]))  # grad_outputs: an iterable too
    tx.requires_grad_(True)
    ty = tm(tx)
    (tgx,) = torch.autograd.grad([ty, ty.sum()], [tx], [ty.detach(), None])
    np.testing.assert_allclose(_run([gx])[0], tgx.numpy(), rtol=1e-5)
    with pytest.raises(TypeError, match=r"inputs must be .* or an iterable of them, got a dict \(a dict: pass its "
                                        r"\.values\(\)\)"):
        lm.autograd.grad(y.sum(), dict(m.named_parameters()))


VIEWS = [
    ("row", lambda w, x: (w[0] * x).sum()),
    ("columns", lambda w, x: (w[:, 1:] * x[1:]).sum() ** 2),
    ("strided-T", lambda w, x: (w[1:, ::2].T @ x[:4]).sum()),
    ("view-of-view", lambda w, x: (w[2][1:] * x[:3]).prod()),
    ("element", lambda w, x: w[3, 1] * x.sum()),
    ("linear", lambda w, x: ((w[:4] @ x) * (w[1:] @ x)).sum() if isinstance(w, torch.Tensor)
     else (F.linear(x, w[:4]) * F.linear(x, w[1:])).sum()),
    ("unsqueezed", lambda w, x: ((w[None, 0] * x) * w[..., 1].unsqueeze(1)[:4]).sum()),
]


@pytest.mark.parametrize("name,f", VIEWS, ids=[v[0] for v in VIEWS])
def test_an_indexed_parameter_outside_a_graph_is_differentiable(name, f):
    """``w[...]`` (basic indexing, and views of it) made outside any graph joins the graph it is
    combined with as the Parameter there, indexed: torch's view of the parameter, its gradient
    reaching the Parameter (it was a constant of its values, and ``grad`` said "not used")."""
    m, tm, x, tx = _linears()
    loss = f(m.weight, x)
    (gw,) = lm.autograd.grad(loss, m.weight)
    tloss = f(tm.weight, tx)
    (tgw,) = torch.autograd.grad(tloss, tm.weight)
    got_loss, got_gw = _run([loss, gw])
    np.testing.assert_allclose(got_loss, tloss.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got_gw, tgw.numpy(), rtol=1e-5, atol=1e-6)


def test_an_indexed_parameter_is_read_when_the_program_runs():
    """As torch's view shares the parameter's storage, the compiled program reads the Parameter's values
    at each run (an optimizer's update is seen), not a copy taken when the view was made."""
    m, _, x, _ = _linears()
    row = m.weight[1]
    run = lm.compile([row * x], backend="cpu")
    np.testing.assert_allclose(run(x=XV)[0], W[1] * XV, rtol=1e-6)
    m.weight.data[1] = 3.0
    np.testing.assert_allclose(run(x=XV)[0], 3.0 * XV, rtol=1e-6)
    bn = nn.BatchNorm1d(4)  # a Buffer's view too
    out = lm.compile([bn.running_var[1:] + x[1:]], backend="cpu")
    bn.running_var.data[...] = 2.0
    np.testing.assert_allclose(out(x=XV)[0], XV[1:] + 2.0, rtol=1e-6)


def test_a_value_computed_outside_a_graph_names_the_cause_at_grad():
    """``w[0] * 2`` computed outside any graph is a value (a constant where it joins a graph: it warns
    then); torch's would carry a gradient, so ``grad``'s "not used" says why and what to write. Other
    ops on a Parameter itself outside a graph (``.T``, ``reshape``, ``* 2``, ``sum``) have no graph
    to join and say so."""
    m, _, x, _ = _linears()
    doubled = m.weight[0] * 2
    with pytest.warns(UserWarning, match="joins this graph as a constant"):
        loss = (doubled * x).sum()
    with pytest.raises(RuntimeError, match=r"grad: input 0 \(Parameter .*\) is read by the outputs only as a constant "
                                           r"of its current values.*inside the graph.*w\.on\(x\.graph\)\[0\] \* 2"):
        lm.autograd.grad(loss, m.weight)
    (gb,) = lm.autograd.grad(loss + m(x).sum(), m.bias)  # (another Parameter: unaffected)
    np.testing.assert_allclose(_run([gb])[0], np.ones(5), rtol=0)
    (gw,) = lm.autograd.grad((m.weight.on(x.graph)[0] * 2 * x).sum(), m.weight)  # the fix the message names
    np.testing.assert_allclose(_run([gw])[0], np.vstack([2 * XV, np.zeros((4, 4))]), rtol=1e-6)
    for op, f in [("T", lambda w: w.T), ("reshape", lambda w: w.reshape(20)), ("mul", lambda w: w * 2),
                  ("sum", lambda w: w.sum())]:
        with pytest.raises(TypeError, match=rf"^{op}: Parameter .* has no graph to join.*w\.on\(g\)"):
            f(m.weight)


def test_p_grad_names_where_gradients_are_and_zero_grad_is_a_no_op():
    """torch reads ``p.grad`` after ``backward()``; luminal stores none, and the AttributeError names
    ``lm.autograd.grad`` and ``train.compile_step``. ``p.grad = None`` (torch's way to clear it) and
    ``model.zero_grad()`` have nothing to clear."""
    m, *_ = _linears()
    with pytest.raises(AttributeError, match=r"grad: Parameter .* has no \.grad: .*lm\.autograd\.grad\(loss, "
                                             r"model\.parameters\(\)\).*train\.compile_step\(loss, optimizer\)"):
        _ = m.weight.grad
    assert not hasattr(m.bias, "grad")
    m.weight.grad = None
    with pytest.raises(AttributeError, match="has no .grad"):
        m.weight.grad = np.zeros((5, 4), np.float32)
    before = {k: v.copy() for k, v in m.state_dict().items()}
    assert m.zero_grad() is None and m.zero_grad(set_to_none=False) is None
    for k, v in m.state_dict().items():
        np.testing.assert_array_equal(v, before[k])
    assert "no-op" in nn.Module.zero_grad.__doc__


def test_save_safetensors_of_a_nested_dict_names_save_checkpoint(tmp_path):
    m, *_ = _linears()
    opt = lm.optim.SGD(m.parameters(), lr=0.1)
    with pytest.raises(TypeError, match=r"tensor 'model' is a dict \(OrderedDict\), not an array.*"
                                        r"lm\.train\.save_checkpoint\(path, model=model, optimizer=optimizer"):
        lm.save_safetensors({"model": m.state_dict(), "optimizer": opt.state_dict()}, tmp_path / "ckpt.safetensors")
    with pytest.raises(TypeError, match=r"tensor 'epoch': dtype object cannot be saved as safetensors \(a NoneType"
                                        r".*lm\.train\.save_checkpoint"):
        lm.save_safetensors({"epoch": None}, tmp_path / "ckpt.safetensors")
    assert not (tmp_path / "ckpt.safetensors").exists()
    lm.train.save_checkpoint(tmp_path / "ckpt.safetensors", model=m, optimizer=opt)  # what the message names
    assert (tmp_path / "ckpt.safetensors").exists()
