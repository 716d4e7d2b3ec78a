"""``Graph.custom_vjp``: functions computed by long chains of primitives (fdlibm's atan, series,
exp formulas) differentiate by their own derivative, torch's formula, built of ops. Checked here: the
backward pass keeps few values of the forward pass (differentiating the chains kept 10 to 32 each),
and first and second derivatives equal torch's (double backward through the rules)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import luminal as lm
from luminal import train

pytestmark = pytest.mark.usefixtures("one_torch_thread")

# name: inputs inside the function's domain (away from poles, where torch's own values blow up)
DOMAINS = {
    "tanh": (-3.0, 3.0), "erf": (-2.5, 2.5), "expm1": (-3.0, 3.0), "log1p": (-0.9, 3.0), "sinh": (-3.0, 3.0),
    "cosh": (-3.0, 3.0), "asinh": (-3.0, 3.0), "acosh": (1.1, 4.0), "atanh": (-0.9, 0.9), "atan": (-3.0, 3.0),
    "asin": (-0.9, 0.9), "acos": (-0.9, 0.9), "tan": (-1.2, 1.2),
}


def _ancestors(node) -> dict:
    seen, stack = {}, [node]
    while stack:
        n = stack.pop()
        if n.id not in seen:
            seen[n.id] = n
            stack.extend(s for s, _ in n.srcs)
    return seen


@pytest.mark.parametrize("dtype", [lm.float32, lm.float64], ids=lambda d: d.name)
@pytest.mark.parametrize("name", [*DOMAINS, "gelu"])
def test_the_backward_pass_keeps_few_forward_values(name, dtype):
    """GELU's gradient reads erf's input and value, not the rational's Horner steps: differentiating the
    rational (the float64 series) kept 21 (43) values of the forward pass alive for the backward pass,
    each a buffer of the activation's size once the two are different kernels (a transformer's)."""
    g = lm.Graph()
    x = g.input("x", ("B", 8), dtype=dtype)
    y = getattr(x, name)()
    (dx,) = train.grad(y.sum(), [x])
    forward = _ancestors(y.node)
    backward = [n for i, n in _ancestors(dx.node).items() if i not in forward]
    kept = {s.id for n in backward for s, _ in n.srcs if s.id in forward and s.op not in ("Input", "Constant")
            and _reads_data(s)}
    assert len(kept) <= (3 if name == "gelu" else 6), len(kept)


def _reads_data(node) -> bool:
    """Whether ``node`` depends on an input: a node of constants alone (a bound of float64 exp's
    clamp, broadcast) keeps no forward data, whichever pass shares it."""
    return any(n.op == "Input" for n in _ancestors(node).values())


@pytest.mark.parametrize("dtype", [lm.float32, lm.float64], ids=lambda d: d.name)
@pytest.mark.parametrize("name", list(DOMAINS))
def test_first_and_second_derivatives_are_torchs(name, dtype):
    lo, hi = DOMAINS[name]
    xs = np.linspace(lo, hi, 41).astype(dtype.np)
    g = lm.Graph()
    x = g.input("x", xs.shape, dtype=dtype)
    (d1,) = train.grad(getattr(x, name)().sum(), [x])
    (d2,) = train.grad(d1.sum(), [x])
    got = lm.compile([d1, d2], backend="cpu")(x=xs)
    t = torch.tensor(xs, requires_grad=True)
    (w1,) = torch.autograd.grad(getattr(torch, name)(t).sum(), [t], create_graph=True)
    (w2,) = torch.autograd.grad(w1.sum(), [t])
    tol = dict(rtol=2e-5, atol=1e-5) if dtype is lm.float32 else dict(rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(got[0], w1.detach().numpy(), **tol, err_msg="first derivative")
    np.testing.assert_allclose(got[1], w2.numpy(), **tol, err_msg="second derivative")


def test_custom_vjp_needs_a_whole_node():
    g = lm.Graph()
    x = g.input("x", (2, 3))
    with pytest.raises(ValueError, match="whole node"):
        g.custom_vjp(x.exp().T, [x], lambda y, a, x: [a])


def test_autocast_keeps_the_rules():
    """``compile_step(compute_dtype=...)`` rewrites the loss graph in 16 bits: the rewritten erf keeps its
    rule, so its backward pass still reads the slope alone (not the 16-bit rational's steps)."""
    from luminal.train.amp import autocast

    g = lm.Graph()
    x = g.input("x", ("B", 8))
    (y,) = autocast([x.gelu()], lm.float16)
    (dx,) = train.grad(y.sum(), [x])
    forward = _ancestors(y.node)
    backward = [n for i, n in _ancestors(dx.node).items() if i not in forward]
    kept = {s.id for n in backward for s, _ in n.srcs if s.id in forward and s.op not in ("Input", "Constant")}
    assert len(kept) <= 6, len(kept)
    xs = np.linspace(-3, 3, 16, dtype=np.float32).reshape(2, 8)
    got = lm.compile(dx, backend="cpu")(x=xs)
    t = torch.tensor(xs, requires_grad=True)
    (want,) = torch.autograd.grad(torch.nn.functional.gelu(t).sum(), [t])
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-2, atol=1e-2)  # (16-bit compute)
