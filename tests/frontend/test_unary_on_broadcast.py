"""A unary elementwise op on a broadcast runs on the values under it (``ops/core.py``'s ``prim``).

``x / s`` with a 0-d ``s`` is ``x * Recip(s expanded)``: taken literally, the Recip is a term of
``x``'s shape that the compiler stores once and every reader shares (an optimizer's update made one
such array per parameter shape, and they kept its kernels from merging). Under the broadcast it is
one element.
"""

import numpy as np
import torch

import luminal as lm
from luminal import train


def _nodes(t, op):
    seen, out, todo = set(), [], [t.node]
    while todo:
        n = todo.pop()
        if n.id in seen:
            continue
        seen.add(n.id)
        if n.op == op:
            out.append(n)
        todo.extend(s for s, _ in n.srcs)
    return out


def test_division_by_a_scalar_takes_one_reciprocal():
    g = lm.Graph()
    x, s = g.input("x", (64, 32)), g.input("s", ())
    y = x / s
    (recip,) = _nodes(y, "Recip")
    assert recip.shape == ()


def test_unary_ops_on_broadcasts_match_torch_with_gradients():
    rng = np.random.default_rng(0)
    xv = rng.random((5, 1), dtype=np.float32) + 0.5
    wv = rng.random((5, 7), dtype=np.float32)
    g = lm.Graph()
    x = g.input("x", (5, 1))
    w = g.input("w", (5, 7))
    xe = x.expand(5, 7)
    y = (w / x + xe.sqrt() + xe.exp() + xe.sin() + xe.log() + xe.to(lm.float64).float()) * w
    for op in ("Recip", "Sqrt", "Sin", "Log2"):  # (exp is Exp2 of a product: binary, left on the view)
        assert all(n.shape == (5, 1) for n in _nodes(y, op)), op
    loss = y.sum()
    (gx,) = train.grad(loss, [x])
    out, gout = lm.compile([y, gx])(x=xv, w=wv)
    xt = torch.tensor(xv, requires_grad=True)
    wt = torch.tensor(wv)
    xte = xt.expand(5, 7)
    yt = (wt / xt + xte.sqrt() + xte.exp() + xte.sin() + xte.log() + xte.double().float()) * wt
    yt.sum().backward()
    np.testing.assert_allclose(out, yt.detach().numpy(), rtol=1e-5)
    np.testing.assert_allclose(gout, xt.grad.numpy(), rtol=1e-5)


def test_a_masked_or_sliced_view_is_left_as_it_is():
    """A padded view's pad would go through the op (``Recip`` of a 0 pad is inf), and a broadcast slice
    that has fewer elements than its node holds is cheaper as it is: both keep the op on the view."""
    g = lm.Graph()
    x = g.input("x", (4,))
    padded = x.reshape(4, 1).pad((0, 2))
    r = padded.reciprocal()
    (recip,) = _nodes(r, "Recip")
    assert recip.shape == (4, 3)
    sliced = x[1:2].expand(3).sqrt()  # 3 elements read, 4 under the view
    (sq,) = _nodes(sliced, "Sqrt")
    assert sq.shape == (3,)


def test_a_broadcast_of_some_elements_of_a_node_keeps_the_op_on_the_view():
    """``b / s[0, 0]`` with ``b`` (4, 2, 1): the broadcast of one element of a (2, 2) node repeats it
    more times than the node has elements, but reads only that one. Taking the Recip of the whole node
    made it inf where ``s`` is 0 elsewhere, and the gradient's zero adjoint there times that: NaN in
    ``s``'s gradient (torch: zeros)."""
    sv = np.array([[2.0, 0.0], [1.0, 3.0]], np.float32)
    for shape, index in (((4, 2, 1), (0, 0)), ((4, 2, 1), (1, 1)), ((3, 5), (0, 1))):
        g = lm.Graph()
        s, b = g.input("s", (2, 2)), g.input("b", shape)
        y = b / s[index]
        (gs,) = train.grad(y.sum(), [s])
        for backend in ("reference", "cpu"):
            out, gout = lm.compile([y, gs], backend=backend)(s=sv, b=np.ones(shape, np.float32))
            st = torch.tensor(sv, requires_grad=True)
            yt = torch.ones(shape) / st[index]
            yt.sum().backward()
            np.testing.assert_allclose(out, yt.detach().numpy(), rtol=1e-6)
            np.testing.assert_allclose(gout, st.grad.numpy(), rtol=1e-6)
    g = lm.Graph()  # a strided pick of every other element is not the whole node either
    x = g.input("x", (4,))
    picked = x[::2].reshape(2, 1).expand(2, 3).sqrt()
    (sq,) = _nodes(picked, "Sqrt")
    assert sq.shape == (2, 3)
