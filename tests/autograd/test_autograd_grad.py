"""``lm.autograd.grad`` against ``torch.autograd.grad``: several outputs (their products summed),
grad_outputs, second derivatives, torch's None / zeros / error rules for unused inputs, batched
grad_outputs, Parameters, and a physics-informed loss (second derivatives by the input) trained one
``compile_step`` step against torch."""

import numpy as np
import pytest
import torch
from parity import TORCH_DTYPE, rand

import luminal as lm
from luminal import nn, train
from luminal.frontend.seed import manual_seed

pytestmark = pytest.mark.usefixtures("one_torch_thread")
TOL = {lm.float32: dict(rtol=1e-4, atol=1e-5), lm.float64: dict(rtol=1e-9, atol=1e-10)}


def run(outs, **inputs):
    res = lm.compile(list(outs), backend="cpu")(**inputs)
    return res if isinstance(res, tuple) else (res,)


def leaf(a, dtype):
    return torch.tensor(a, dtype=TORCH_DTYPE[dtype], requires_grad=True)


def f(x, w, lib):
    sp = lm.nn.functional.softplus if lib is lm else torch.nn.functional.softplus
    return sp((x @ w).tanh() * x.sum(-1, keepdim=True)).exp()


@pytest.mark.parametrize("dtype", [lm.float32, lm.float64])
def test_outputs_grad_outputs_and_second_derivatives(dtype):
    g = lm.Graph()
    x, w, u = g.input("x", (4, 3), dtype), g.input("w", (3, 2), dtype), g.input("u", (4, 2), dtype)
    arrays = dict(x=rand((4, 3), dtype, 0, -1, 1), w=rand((3, 2), dtype, 1, -1, 1), u=rand((4, 2), dtype, 2, -1, 1))
    tx, tw, tu = (leaf(arrays[k], dtype) for k in "xwu")

    y, ty = f(x, w, lm), f(tx, tw, torch)
    one = lm.autograd.grad(y, (x, w), u)  # a non-scalar output with its vector
    both = lm.autograd.grad([y, (x * x).sum()], [x, w], [u, None])  # products summed; None for a scalar
    gx, = lm.autograd.grad(y.sum(), x)
    second = lm.autograd.grad((gx * gx).sum(), [x, w])  # differentiable again, as torch's create_graph=True

    t_one = torch.autograd.grad(ty, (tx, tw), tu, retain_graph=True)
    t_both = torch.autograd.grad([ty, (tx * tx).sum()], [tx, tw], [tu, None], retain_graph=True)
    tgx, = torch.autograd.grad(ty.sum(), tx, create_graph=True)
    t_second = torch.autograd.grad((tgx * tgx).sum(), [tx, tw])

    assert isinstance(one, tuple) and len(gx.shape) == 2
    got = run([*one, *both, gx, *second], **arrays)
    want = [*t_one, *t_both, tgx, *t_second]
    for a, b in zip(got, want):
        assert a.dtype == b.detach().numpy().dtype
        np.testing.assert_allclose(a, b.detach().numpy(), **TOL[dtype])


def test_unused_inputs_none_zeros_and_errors():
    """torch's rules: an input not read, or read only through the user's detach() or a comparison, is
    an error, or None with allow_unused, or zeros with materialize_grads; one read through floor()
    (a zero gradient) gets zeros."""
    g = lm.Graph()
    x, y, z = g.input("x", (3,)), g.input("y", (2,)), g.input("z", (3,))
    loss = (x.exp() + z.detach() + (z > 0).float()).sum()
    with pytest.raises(RuntimeError, match=r"grad: input 1 \(shape \(2,\) float32\) is not used to compute"):
        lm.autograd.grad(loss, [x, y])
    with pytest.raises(RuntimeError, match="input 1 .* not used"):
        lm.autograd.grad(loss, [x, z])
    gx, gy, gz = lm.autograd.grad(loss, [x, y, z], allow_unused=True)
    assert gy is None and gz is None
    mx, my, mz = lm.autograd.grad(loss, [x, y, z], materialize_grads=True)
    with pytest.raises(ValueError, match="materialize_grads=True needs allow_unused=True"):
        lm.autograd.grad(loss, [x, y], allow_unused=False, materialize_grads=True)
    fz, = lm.autograd.grad((z.floor() * 2).sum(), z)
    xv = np.array([0.5, -1.0, 2.0], np.float32)
    out = run([gx, mx, my, mz, fz], x=xv, z=xv)
    tx, tz = torch.tensor(xv, requires_grad=True), torch.tensor(xv, requires_grad=True)
    np.testing.assert_allclose(out[0], np.exp(xv), rtol=1e-6)
    np.testing.assert_allclose(out[1], np.exp(xv), rtol=1e-6)
    np.testing.assert_array_equal(out[2], np.zeros(2, np.float32))
    np.testing.assert_array_equal(out[3], np.zeros(3, np.float32))
    np.testing.assert_array_equal(out[4], torch.autograd.grad((tz.floor() * 2).sum(), tz)[0].numpy())
    t_loss = (tx.exp() + tz.detach() + (tz > 0).float()).sum()
    assert torch.autograd.grad(t_loss, [tx, tz], allow_unused=True)[1] is None


def test_grads_batched_and_parameters():
    g = lm.Graph()
    x = g.input("x", (3,), lm.float64)
    p = nn.Parameter(np.array([0.5, -1.5, 2.0]))
    y = (x.sin() * g.state(p)).exp()
    eye = g.constant(np.eye(3))
    jx, jp = lm.autograd.grad(y, (x, p), eye, is_grads_batched=True)  # rows of the Jacobian
    assert tuple(jx.shape) == (3, 3)
    xv = np.array([0.1, 0.7, -0.4])
    tx, tp = torch.tensor(xv, requires_grad=True), torch.tensor(p.data, requires_grad=True)
    want = torch.autograd.grad((tx.sin() * tp).exp(), (tx, tp), torch.eye(3, dtype=torch.float64),
                               is_grads_batched=True)
    for a, b in zip(run([jx, jp], x=xv), want):
        np.testing.assert_allclose(a, b.numpy(), rtol=1e-12)


def test_bad_arguments():
    g = lm.Graph()
    x = g.input("x", (3,))
    y = x.exp()
    with pytest.raises(RuntimeError, match=r"grad can be implicitly created only for one-element outputs: outputs\[0\] "
                                           r"has shape \(3,\)"):
        lm.autograd.grad(y, x)
    with pytest.raises(RuntimeError, match=r"mismatch in shape: grad_outputs\[0\] has shape \(2,\) and outputs\[0\] "
                                           r"has shape \(3,\)"):
        lm.autograd.grad(y, x, g.input("u", (2,)))
    with pytest.raises(ValueError, match="1 grad_outputs for 2 outputs"):
        lm.autograd.grad([y, y], x, [y])
    with pytest.raises(ValueError, match="is_grads_batched=True needs grad_outputs"):
        lm.autograd.grad(y.sum(), x, is_grads_batched=True)
    with pytest.raises(ValueError, match="needs a static batch size"):
        lm.autograd.grad(y, x, g.input("b", ("B", 3)), is_grads_batched=True)
    with pytest.raises(TypeError, match=r"inputs\[1\] is a list"):
        lm.autograd.grad(y.sum(), [x, [x]])
    with pytest.raises(ValueError, match=r"outputs\[1\] belongs to another graph than outputs\[0\]"):
        lm.autograd.grad([y.sum(), lm.Graph().input("z", (3,)).sum()], x)
    with pytest.raises(TypeError, match=r"outputs\[0\] has dtype int32"):
        lm.autograd.grad(y.int(), x, y.int())


class PINN(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(1, 8), nn.Linear(8, 1)

    def forward(self, x):
        return self.fc2(self.fc1(x).tanh())


def test_physics_informed_loss_one_step_against_torch():
    """u'' = -pi^2 sin(pi x) on collocation points, u(0) = u(1) = 0: the residual needs the second
    derivative of the network by its input; compile_step then differentiates it by the weights (a
    third-order graph). Loss and updated weights match torch's create_graph=True computation."""
    manual_seed(0)
    model = PINN()
    sd = {k: torch.tensor(v) for k, v in model.state_dict().items()}
    xs = np.linspace(0.05, 0.95, 7, dtype=np.float32)[:, None]

    g = lm.Graph()
    x = g.input("x", (7, 1))
    u = model(x)
    du, = lm.autograd.grad(u.sum(), x, create_graph=True)
    d2u, = lm.autograd.grad(du.sum(), x, create_graph=True)
    residual = d2u + np.pi ** 2 * (np.pi * x).sin()
    ends = model(g.constant(np.array([[0.0], [1.0]], np.float32)))
    loss = (residual ** 2).mean() + (ends ** 2).mean()
    step = train.compile_step(loss, train.SGD(model.parameters(), lr=0.01), backend="cpu")
    ours = step(x=xs)

    tm = torch.nn.Sequential(torch.nn.Linear(1, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    tm.load_state_dict({"0.weight": sd["fc1.weight"], "0.bias": sd["fc1.bias"], "2.weight": sd["fc2.weight"],
                        "2.bias": sd["fc2.bias"]})
    tx = torch.tensor(xs, requires_grad=True)
    tu = tm(tx)
    tdu, = torch.autograd.grad(tu.sum(), tx, create_graph=True)
    td2u, = torch.autograd.grad(tdu.sum(), tx, create_graph=True)
    tloss = ((td2u + np.pi ** 2 * torch.sin(np.pi * tx)) ** 2).mean() + (tm(torch.tensor([[0.0], [1.0]])) ** 2).mean()
    opt = torch.optim.SGD(tm.parameters(), lr=0.01)
    tloss.backward()
    opt.step()
    assert ours == pytest.approx(tloss.item(), rel=1e-5)
    new = model.state_dict()
    for ours_k, theirs_k in [("fc1.weight", "0.weight"), ("fc1.bias", "0.bias"), ("fc2.weight", "2.weight"),
                             ("fc2.bias", "2.bias")]:
        np.testing.assert_allclose(new[ours_k], tm.state_dict()[theirs_k].numpy(), rtol=1e-4, atol=1e-6)
    assert not np.allclose(new["fc1.weight"], sd["fc1.weight"].numpy())  # the step moved the weights
