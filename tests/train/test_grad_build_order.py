"""A parameter's gradient does not depend on the order the graph was built in, and is torch's.

The graph builds each expression once, and marks sat on those shared nodes: the user's ``w > 0`` (no
gradient: torch's is None) was the same node as ``sign``'s inner ``w > 0`` (a zero gradient), and a
user's ``custom_vjp`` (a straight-through estimator) sat on the node of every ``w.sign()`` or
``(w > 0).float()`` of the graph. So whether ``w`` had a gradient depended on which was built first,
and a plain ``w.sign()`` took the estimator's gradient. Each case is built in both orders and checked
against torch (``torch.autograd.Function`` for ``custom_vjp``); None is torch's ``w.grad is None``.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import luminal as lm
from luminal import train
from luminal.train.autograd import has_grad

W = np.array([0.5, -1.5, 2.0, -0.25, 0.0])
X = np.array([1.0, 2.0, 3.0, 4.0, 5.0])


def _straight_through(g, out, w):
    """``out`` with the gradient passed to ``w`` unchanged."""
    return g.custom_vjp(out, [w], lambda y, a, x: [a])


class _Sign(torch.autograd.Function):
    @staticmethod
    def forward(ctx, t):
        return t.sign()

    @staticmethod
    def backward(ctx, a):
        return a


class _Positive(torch.autograd.Function):
    @staticmethod
    def forward(ctx, t):
        return (t > 0).double()

    @staticmethod
    def backward(ctx, a):
        return a


# name: (luminal parts, in build order: each (g, w, x) -> a tensor (a term of the loss) or None (built
# only), torch's loss). Each case is run with its parts in this order and reversed.
CASES = {
    # the loss reads w only through the user's comparison (None), sign(w) built elsewhere
    "comparison_beside_sign": (
        [lambda g, w, x: ((w > 0).double() * x).sum(), lambda g, w, x: (w.sign(), None)[1]],
        lambda w, x: ((w > 0).double() * x).sum()),
    # only through sign (zeros), the user comparing w alike elsewhere
    "sign_beside_comparisons": (
        [lambda g, w, x: (w.sign() * x).sum(), lambda g, w, x: ((w > 0, w < 0), None)[1]],
        lambda w, x: (w.sign() * x).sum()),
    # only through an int cast (None), round (whose inner nodes cast) built elsewhere
    "int_cast_beside_round": (
        [lambda g, w, x: ((w * 3).int().double() * x).sum(), lambda g, w, x: ((w * 3).round(), None)[1]],
        lambda w, x: ((w * 3).int().double() * x).sum()),
    # only through argmax (None), max with indices built elsewhere
    "argmax_beside_max": (
        [lambda g, w, x: (x * w.argmax().double()).sum(), lambda g, w, x: (w.max(0), None)[1]],
        lambda w, x: (x * w.argmax().double()).sum()),
    # a straight-through sign and a plain sign: the plain one's gradient is sign's (zeros)
    "straight_through_sign_and_sign": (
        [lambda g, w, x: (_straight_through(g, w.sign(), w) * x).sum(), lambda g, w, x: (w.sign() * x * x).sum()],
        lambda w, x: (_Sign.apply(w) * x).sum() + (w.sign() * x * x).sum()),
    # a straight-through binarisation and the same comparison as a mask
    "straight_through_comparison_and_mask": (
        [lambda g, w, x: (_straight_through(g, (w > 0).double(), w) * x).sum(),
         lambda g, w, x: ((w > 0).double() * x * x).sum()],
        lambda w, x: (_Positive.apply(w) * x).sum() + ((w > 0).double() * x * x).sum()),
    # only through a mask (None), a straight-through binarisation of it built elsewhere (not in the loss)
    "mask_beside_straight_through": (
        [lambda g, w, x: ((w > 0).double() * x).sum(),
         lambda g, w, x: (_straight_through(g, (w > 0).double(), w), None)[1]],
        lambda w, x: ((w > 0).double() * x).sum()),
    # the detach form of the estimator beside a plain use of the same expression
    "detached_straight_through": (
        [lambda g, w, x: ((w + (w.sign() - w).detach()) * x).sum(), lambda g, w, x: ((w.sign() - w) * x * x).sum()],
        lambda w, x: ((w + (w.sign() - w).detach()) * x).sum() + ((w.sign() - w) * x * x).sum()),
    # a user's rule on an op with a rule of its own (tanh): each use keeps its own
    "straight_through_tanh_and_tanh": (
        [lambda g, w, x: (_straight_through(g, w.tanh(), w) * x).sum(), lambda g, w, x: (w.tanh() * x * x).sum()],
        lambda w, x: (_Tanh.apply(w) * x).sum() + (w.tanh() * x * x).sum()),
}


class _Tanh(torch.autograd.Function):
    @staticmethod
    def forward(ctx, t):
        return t.tanh()

    @staticmethod
    def backward(ctx, a):
        return a


def _luminal(parts):
    """w's gradient (None where torch's is None) for the loss of the parts' terms."""
    g = lm.Graph()
    w, x = g.input("w", W.shape, dtype=lm.float64), g.input("x", X.shape, dtype=lm.float64)
    terms = [t for t in (part(g, w, x) for part in parts) if t is not None]
    loss = terms[0] if len(terms) == 1 else terms[0] + terms[1]
    if not has_grad(loss, [w])[0]:
        return None
    (gw,) = lm.compile([train.grad(loss, w, allow_unused=True)], backend="reference")(w=W, x=X)
    return gw


def _torch(loss_of):
    w = torch.tensor(W, requires_grad=True)
    loss = loss_of(w, torch.tensor(X))
    if loss.requires_grad:
        loss.backward()
    return None if w.grad is None else w.grad.numpy()


@pytest.mark.parametrize("order", ["as_listed", "reversed"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_gradient_is_torchs_in_either_build_order(name, order):
    parts, loss_of = CASES[name]
    got = _luminal(parts if order == "as_listed" else parts[::-1])
    want = _torch(loss_of)
    if want is None:
        assert got is None, f"torch's gradient is None, got {got}"
    else:
        assert got is not None, f"torch's gradient is {want}, got None"
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=0)


def test_custom_vjp_of_the_user_returns_a_tensor_of_its_own():
    """The rule is read through what ``custom_vjp`` returns (torch's ``Function.apply`` gives a new
    tensor): ``out`` itself stays the plain expression."""
    g = lm.Graph()
    w = g.input("w", W.shape, dtype=lm.float64)
    s = w.sign()
    ste = _straight_through(g, s, w)
    assert ste.node is not s.node and s.node.id not in g.vjps and ste.node.id in g.vjps
    grads = [train.grad(s.sum(), w, allow_unused=True), train.grad(ste.sum(), w)]
    d_plain, d_ste = lm.compile(grads, backend="reference")(w=W)
    np.testing.assert_array_equal(d_plain, np.zeros_like(W))
    np.testing.assert_array_equal(d_ste, np.ones_like(W))


@pytest.mark.parametrize("first", ["model", "metric"])
def test_weight_decay_follows_torch_whatever_the_order(first):
    """Through ``compile_step``: ``u`` is read only through ``sign`` (torch: a zero gradient, so AdamW
    decays it) and ``v`` only through the user's comparison (None: AdamW leaves it alone), with the
    user's comparisons of ``u`` (a metric) and ``v.sign()`` built before or after the loss; ``k``
    (read directly) trains both ways."""
    u0, v0, k0 = (np.array([[0.5, -1.0]], np.float32), np.array([[1.5, -0.5]], np.float32),
                  np.array([[0.25, 0.75]], np.float32))
    lu, lv, lk = (lm.nn.Parameter(a.copy()) for a in (u0, v0, k0))
    tu, tv, tk = (torch.tensor(a.copy(), requires_grad=True) for a in (u0, v0, k0))
    g = lm.Graph()
    x = g.input("x", (4, 2))
    u, v = lu.on(g), lv.on(g)

    def metric():
        return (u > 0, u < 0, v.sign())

    if first == "metric":
        metric()
    loss = ((x * u.sign()).sum() + (x * (v > 0).float()).sum() + (x * lk.on(g)).sum()) ** 2
    if first == "model":
        metric()
    step = train.compile_step(loss, train.AdamW([lu, lv, lk], lr=0.1, weight_decay=0.5), backend="cpu")
    topt = torch.optim.AdamW([tu, tv, tk], lr=0.1, weight_decay=0.5)
    xs = np.arange(8, dtype=np.float32).reshape(4, 2)
    for _ in range(2):
        topt.zero_grad()
        tx = torch.from_numpy(xs)
        ((tx * tu.sign()).sum() + (tx * (tv > 0).float()).sum() + (tx * tk).sum()).pow(2).backward()
        assert tv.grad is None and tu.grad is not None
        topt.step()
        step(x=xs)
    for lp, tp in ((lu, tu), (lk, tk)):
        np.testing.assert_allclose(lp.data, tp.detach().numpy(), rtol=1e-5)
    np.testing.assert_array_equal(lv.data, v0)
    assert not np.array_equal(lu.data, u0)
