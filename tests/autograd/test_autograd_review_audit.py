"""Review audit of ``lm.autograd`` against torch 2.13 as a torch user would call it: unused inputs
with ``is_grads_batched``, the same tensor passed twice, third derivatives through ``grad``, views as
functional inputs, broadcast outputs of ``jacobian``, ``hessian``'s nested tuples over tuple inputs,
float64 ``hvp``/``vhp``, ``grad_outputs`` of another float dtype, and torch's strict errors."""

import numpy as np
import pytest
import torch

import luminal as lm

F, TF = lm.autograd.functional, torch.autograd.functional
pytestmark = pytest.mark.usefixtures("one_torch_thread")
XV, YV = np.array([0.3, -0.7, 1.2]), np.array([0.5, 2.0])


def run(outs, **inputs):
    res = lm.compile(list(outs), backend="cpu")(**inputs)
    return res if isinstance(res, tuple) else (res,)


def graph_xy():
    g = lm.Graph()
    return g, g.input("x", (3,), lm.float64), g.input("y", (2,), lm.float64)


def leaves():
    return torch.tensor(XV, requires_grad=True), torch.tensor(YV, requires_grad=True)


@pytest.mark.parametrize("mode", [dict(allow_unused=True), dict(materialize_grads=True)])
def test_grads_batched_with_an_unused_input(mode):
    """torch: None (allow_unused) or zeros_like(input) without the batch dim (materialize_grads) for
    the unused input; this crashed in stack() on the None."""
    g, x, y = graph_xy()
    u = g.input("u", (2, 3), lm.float64)
    gx, gy = lm.autograd.grad(x.sin(), [x, y], u, is_grads_batched=True, **mode)
    uv = np.arange(6.0).reshape(2, 3)
    tx, ty = leaves()
    tgx, tgy = torch.autograd.grad(tx.sin(), [tx, ty], torch.tensor(uv), is_grads_batched=True, **mode)
    if tgy is None:
        assert gy is None
        outs = run([gx], x=XV, u=uv)
    else:
        assert tuple(gy.shape) == tuple(tgy.shape) == (2,)
        outs = run([gx, gy], x=XV, u=uv)
        np.testing.assert_array_equal(outs[1], np.zeros(2))
    np.testing.assert_allclose(outs[0], tgx.detach().numpy(), rtol=1e-13)


def test_same_tensor_twice_and_third_order():
    g, x, _ = graph_xy()
    a, b = lm.autograd.grad((x ** 3).sum(), [x, x])
    (g1,) = lm.autograd.grad((x.sin() * x ** 4).sum(), x)
    (g2,) = lm.autograd.grad(g1.sum(), x)
    (g3,) = lm.autograd.grad((g2 * x).sum(), x)
    tx, _ = leaves()
    ta, tb = torch.autograd.grad((tx ** 3).sum(), [tx, tx])
    (t1,) = torch.autograd.grad((tx.sin() * tx ** 4).sum(), tx, create_graph=True)
    (t2,) = torch.autograd.grad(t1.sum(), tx, create_graph=True)
    (t3,) = torch.autograd.grad((t2 * tx).sum(), tx)
    for got, want in zip(run([a, b, g1, g2, g3], x=XV), [ta, tb, t1, t2, t3]):
        np.testing.assert_allclose(got, want.detach().numpy(), rtol=1e-12, atol=1e-14)


def test_grad_outputs_of_another_float_dtype_are_cast():
    """torch casts a float32 grad_outputs to the float64 output's dtype; the gradient stays float64."""
    g, x, _ = graph_xy()
    u = g.input("u", (3,), lm.float32)
    (gx,) = lm.autograd.grad(x * x.exp(), x, u)
    (gs,) = lm.autograd.grad([x * x.exp(), x.sum()], x, [u, None])
    assert gx.dtype == gs.dtype == lm.float64
    uv = np.array([1.5, -2.0, 0.25], np.float32)
    tx, _ = leaves()
    (tgx,) = torch.autograd.grad(tx * tx.exp(), tx, torch.tensor(uv))
    got = run([gx, gs], x=XV, u=uv)
    np.testing.assert_allclose(got[0], tgx.numpy(), rtol=1e-13)
    np.testing.assert_allclose(got[1], tgx.numpy() + 1, rtol=1e-13)


def test_functional_on_views_and_twice_passed_inputs():
    g, x, _ = graph_xy()
    H = F.hessian(lambda a: (a ** 4).sum(), x[1:])
    _, hv = F.hvp(lambda a: (a ** 4).sum(), x[::2], x[::2])
    ja, jb = F.jacobian(lambda a, b: a * b.exp(), (x, x))
    tx = torch.tensor(XV)
    want = [TF.hessian(lambda a: (a ** 4).sum(), tx[1:]), TF.hvp(lambda a: (a ** 4).sum(), tx[::2], tx[::2])[1],
            *TF.jacobian(lambda a, b: a * b.exp(), (tx, tx))]
    for got, w in zip(run([H, hv, ja, jb], x=XV), want):
        np.testing.assert_allclose(got, w.numpy(), rtol=1e-13)


def test_jacobian_of_a_broadcast_output_and_hessian_of_tuple_inputs():
    g, x, y = graph_xy()
    J = F.jacobian(lambda a, b: a[:, None] * b[None, :] + a[:, None].exp(), (x, y))
    H = F.hessian(lambda a, b: a.sum() * b.prod() + (a ** 3).sum() * b[0], (x, y))
    tx, ty = torch.tensor(XV), torch.tensor(YV)
    tJ = TF.jacobian(lambda a, b: a[:, None] * b[None, :] + a[:, None].exp(), (tx, ty))
    tH = TF.hessian(lambda a, b: a.sum() * b.prod() + (a ** 3).sum() * b[0], (tx, ty))
    assert isinstance(H, tuple) and all(isinstance(r, tuple) and len(r) == 2 for r in H)
    ours, theirs = [*J, *H[0], *H[1]], [*tJ, *tH[0], *tH[1]]
    assert [tuple(t.shape) for t in ours] == [tuple(t.shape) for t in theirs]
    for got, w in zip(run(ours, x=XV, y=YV), theirs):
        np.testing.assert_allclose(got, w.numpy(), rtol=1e-13, atol=1e-15)


def test_hvp_vhp_float64_precision():
    g, x, _ = graph_xy()
    v = g.input("v", (3,), lm.float64)

    def f(a):
        return (a.sin() * a.exp()).sum() * (a ** 2).sum()

    (_, hv), (_, vh) = F.hvp(f, x, v), F.vhp(f, x, v)
    vv = np.array([0.9, -0.1, 0.4])
    tx, tv = torch.tensor(XV), torch.tensor(vv)
    for got, w in zip(run([hv, vh], x=XV, v=vv), [TF.hvp(f, tx, tv)[1], TF.vhp(f, tx, tv)[1]]):
        np.testing.assert_allclose(got, w.numpy(), rtol=1e-13)


def test_strict_errors_for_an_ignored_input_as_torch():
    g, x, y = graph_xy()
    with pytest.raises(RuntimeError, match="independent of input 1; this is not allowed in strict mode"):
        F.vjp(lambda a, b: a.sum(), (x, y), strict=True)
    with pytest.raises(RuntimeError, match="independent of input 1; this is not allowed in strict mode"):
        F.hvp(lambda a, b: (a ** 3).sum(), (x, y), (x, y), strict=True)
    with pytest.raises(RuntimeError, match="jacobian: output 0 .* independent of input 1"):
        F.jacobian(lambda a, b: a.sin(), (x, y), strict=True)
    with pytest.raises(TypeError, match="hessian: the function given to hessian should return a single"):
        F.hessian(lambda a: (a.sum(), a.sum()), x)
    _, (va, vb) = F.vjp(lambda a, b: a.sum(), (x, y))  # strict=False: zeros, as torch's
    got = run([va, vb], x=XV, y=YV)
    np.testing.assert_array_equal(got[0], np.ones(3))
    np.testing.assert_array_equal(got[1], np.zeros(2))


def test_functional_results_differentiate_again_as_torch_create_graph():
    """hessian, jvp and hvp results (and a v read from the input) differentiated by the input: torch's
    create_graph=True values."""
    g, x, _ = graph_xy()

    def f(a):
        return (a ** 4).sum() * a.sin().sum()

    def h(a):
        return a.exp() * a.sum()

    (dH,) = lm.autograd.grad(F.hessian(f, x).sum(), x)
    (djv,) = lm.autograd.grad(F.jvp(h, x, x.cos())[1].sum(), x)
    hv = F.hvp(f, x, x.cos())[1]
    (dhv,) = lm.autograd.grad((hv * hv).sum(), x)
    tx, _ = leaves()
    (tdH,) = torch.autograd.grad(TF.hessian(f, tx, create_graph=True).sum(), tx)
    (tdjv,) = torch.autograd.grad(TF.jvp(h, tx, tx.cos(), create_graph=True)[1].sum(), tx)
    thv = TF.hvp(f, tx, tx.cos(), create_graph=True)[1]
    (tdhv,) = torch.autograd.grad((thv * thv).sum(), tx)
    for got, want in zip(run([dH, djv, dhv], x=XV), [tdH, tdjv, tdhv]):
        np.testing.assert_allclose(got, want.numpy(), rtol=1e-12)
