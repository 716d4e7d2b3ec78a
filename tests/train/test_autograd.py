"""Unit tests of ``train.grad`` itself: what it refuses (and how it says so), detach, grad_output,
graphs that mix many views, symbolic dims, State targets. Op-by-op gradient parity with torch lives
in the frontend parity tables (``parity.check`` differentiates every float op)."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from parity import rand

import luminal as lm
from luminal import train
from luminal.frontend.state import State


def run(outs, **inputs):
    res = lm.compile(list(outs))(**inputs)
    return res if isinstance(res, tuple) else (res,)


def torch_grads(f, arrays, seed=None):
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    return [g.numpy() for g in torch.autograd.grad(f(*ts), ts, grad_outputs=seed)]


# refusals ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("name,f,names", [
    ("comparison", lambda x: (x > 0).float().sum(), "LessThan"),
    ("argmax", lambda x: x.argmax(1).float().sum(), "LessThan"),
    ("floor", lambda x: x.floor().sum(), "Copy (detach)"),
    ("int_cast", lambda x: x.int().float().sum(), "Cast (to int32)"),
    ("detach", lambda x: (x.detach() * 2).sum(), "Copy (detach)"),
    ("where_condition", lambda x: lm.where(x > 0, 1.0, 2.0).sum(), "LessThan"),
])
def test_no_differentiable_path_names_the_op(name, f, names):
    g = lm.Graph()
    x = g.input("x", (3, 4))
    with pytest.raises(ValueError, match="only through") as e:
        train.grad(f(x), x)
    assert names in str(e.value)
    assert "test_autograd.py" in str(e.value)  # where the tensor was made


def test_gather_index_has_no_gradient_but_the_data_has():
    g = lm.Graph()
    x = g.input("x", (3, 4))
    i = g.input("i", (3, 2), dtype=lm.int32)
    loss = x.gather(1, i).sum()
    gx = train.grad(loss, x)
    with pytest.raises(TypeError, match="int32"):
        train.grad(loss, i)
    xv, iv = rand((3, 4)), np.array([[0, 3], [1, 1], [2, 0]], np.int32)
    want = np.zeros((3, 4), np.float32)
    np.add.at(want, (np.arange(3)[:, None], iv), 1.0)
    np.testing.assert_array_equal(run([gx], x=xv, i=iv)[0], want)


def test_unused_input():
    g = lm.Graph()
    x, y = g.input("x", (3,)), g.input("y", (2, 2))
    loss = (x * x).sum()
    with pytest.raises(ValueError, match="not used to compute the loss"):
        train.grad(loss, [x, y])
    gx, gy = train.grad(loss, [x, y], allow_unused=True)
    assert gy.shape == (2, 2) and gy.dtype is lm.float32
    xv = rand((3,))
    out_x, out_y = run([gx, gy], x=xv)
    np.testing.assert_allclose(out_x, 2 * xv, rtol=1e-6)
    np.testing.assert_array_equal(out_y, np.zeros((2, 2), np.float32))


def test_grad_by_a_view_is_an_error():
    g = lm.Graph()
    x = g.input("x", (3, 4))
    loss = (x.T * 2).sum()
    for view in (x.T, x[1:], x.reshape(12), x[None]):
        with pytest.raises(ValueError, match="cannot differentiate by a view"):
            train.grad(loss, view)


def test_bad_losses_and_targets():
    g = lm.Graph()
    x = g.input("x", (3,))
    i = g.input("i", (3,), dtype=lm.int32)
    with pytest.raises(ValueError, match="non-scalar loss needs grad_output"):
        train.grad(x * 2, x)
    with pytest.raises(ValueError, match="grad_output must be a tensor of the loss's shape"):
        train.grad(x * 2, x, grad_output=g.ones((4,)))
    with pytest.raises(TypeError, match="only float losses"):
        train.grad(i.sum(), x)
    with pytest.raises(TypeError, match="cannot differentiate by a int32 tensor"):
        train.grad((x * i).sum(), i)
    with pytest.raises(ValueError, match="another graph"):
        train.grad(x.sum(), lm.Graph().input("x", (3,)))
    with pytest.raises(TypeError, match="GraphTensors or Parameters"):
        train.grad(x.sum(), np.zeros(3))


# what flows ----------------------------------------------------------------------------------------
def test_detach_stops_the_gradient():
    g = lm.Graph()
    x = g.input("x", (2, 3))
    loss = (x * x.detach() + x.exp().detach() * 3).sum()  # d/dx = x (not 2x); the exp term is a constant
    xv = rand((2, 3))
    np.testing.assert_allclose(run([train.grad(loss, x)], x=xv)[0], xv, rtol=1e-6)


def test_grad_output_seeds_the_backward_pass():
    g = lm.Graph()
    x = g.input("x", (3, 4))
    seed = g.input("seed", (4, 3))
    y = (x * x).T.sin()
    gx = train.grad(y, x, grad_output=seed)
    xv, sv = rand((3, 4)), rand((4, 3), seed=1)
    want, = torch_grads(lambda t: (t * t).T.sin(), [xv], seed=torch.tensor(sv))
    np.testing.assert_allclose(run([gx], x=xv, seed=sv)[0], want, rtol=1e-5, atol=1e-6)


def pad(x, pads):
    return x.pad(pads) if isinstance(x, lm.GraphTensor) else F.pad(x, pads)


def test_one_input_used_many_ways():
    """A graph mixing views (slices with steps, flips, pads, transposes, expands, overlapping
    windows, reshapes that copy) and reuse of the same input: gradients add up as in torch."""
    def f(x, w):
        a = x[:, 1:, ::2].flip(0).transpose(1, 2)                  # (2, 3, 3)
        b = pad(x, (1, 1, 0, 0)).unfold(2, 3, 2)                    # (2, 4, 3, 3): a pad under overlapping windows
        c = (b * w).sum(-1).transpose(1, 2)                         # (2, 3, 4)
        d = c.reshape(2, 12)[:, 1::3].reshape(2, 2, 2)             # a reshape that copies
        e = x.permute(2, 0, 1).reshape(6, 8)[:, None, :].expand(6, 2, 8)
        return (a.sum() * 0.5 + (a * a).sum() + d.sum(-1).pow(2).sum() + (e * e.flip(1)).mean()
                + x[0, :, 0].repeat(3).softmax(0)[::2].sum())

    g = lm.Graph()
    x, w = g.input("x", (2, 4, 6)), g.input("w", (3,))
    loss = f(x, w)
    gx, gw = train.grad(loss, [x, w])
    xv, wv = rand((2, 4, 6)), rand((3,), seed=2)
    got = run([loss, gx, gw], x=xv, w=wv)
    ts = [torch.tensor(a, requires_grad=True) for a in (xv, wv)]
    ref = f(*ts)
    want = torch.autograd.grad(ref, ts)
    np.testing.assert_allclose(got[0], ref.detach().numpy(), rtol=1e-5)
    for a, b in zip(got[1:], want):
        np.testing.assert_allclose(a, b.numpy(), rtol=1e-4, atol=1e-5)


def test_symbolic_dims_differentiate():
    """One backward graph built with a symbolic batch B, run at several B."""
    def f(x, w):
        h = (x @ w).relu()
        return (h[1:] - h[:-1]).pow(2).sum() + h.flip(0)[::2].mean() + x.T.logsumexp(1).sum()

    g = lm.Graph()
    x, w = g.input("x", ("B", 3)), g.input("w", (3, 5))
    loss = f(x, w)
    prog = lm.compile([loss] + train.grad(loss, [x, w]))
    for n in (5, 2, 8):
        xv, wv = rand((n, 3), seed=n), rand((3, 5), seed=10)
        got = prog(x=xv, w=wv)
        want = torch_grads(f, [xv, wv])
        for a, b in zip(got[1:], want):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5, err_msg=f"B={n}")


def test_state_targets():
    w = State(rand((3, 2)), name="w")
    g = lm.Graph()
    x = g.input("x", (4, 3))
    loss = (x @ g.state(w)).tanh().sum()
    gw = train.grad(loss, w)
    assert gw.shape == (3, 2)
    xv = rand((4, 3))
    want = torch_grads(lambda x, w: (x @ w).tanh().sum(), [xv, w.data])[1]
    np.testing.assert_allclose(run([gw], x=xv)[0], want, rtol=1e-5, atol=1e-6)
    unread = State(np.zeros(2, np.float32), name="b")
    with pytest.raises(ValueError, match="not used"):
        train.grad(loss, unread)


def test_ties_and_nan_follow_torch():
    """maximum: ties share the gradient, a NaN operand gives both the whole of it; clamp passes the
    gradient only strictly inside or on the bounds (not at NaN); relu passes it at NaN, not at 0."""
    a = np.array([1.0, 2.0, np.nan, 0.0, 3.0], np.float32)
    b = np.array([1.0, 1.0, 0.5, np.nan, 3.0], np.float32)
    g = lm.Graph()
    x, y = g.input("x", (5,)), g.input("y", (5,))
    outs = [x.maximum(y).sum(), x.clamp(0.0, 2.0).sum(), x.relu().sum()]
    grads = [train.grad(o, [x, y], allow_unused=True) for o in outs]
    got = run([t for pair in grads for t in pair], x=a, y=b)
    fs = [lambda s, t: torch.maximum(s, t).sum(), lambda s, t: s.clamp(0.0, 2.0).sum() + 0 * t.sum(),
          lambda s, t: s.relu().sum() + 0 * t.sum()]
    for k, fn in enumerate(fs):
        want = torch_grads(fn, [a, b])
        for j in range(2):
            np.testing.assert_allclose(got[2 * k + j], want[j], err_msg=f"case {k}, input {j}")
