"""Audit of the compile work of the unrolled eliminations (``luminal/frontend/ops/linalg_solve.py``):
their n steps are copies of one body that the compiler rolls into one loop, so the kernels generated
(and LLVM objects compiled) stay the same from n = 8 to n = 32 instead of growing with n (a step
reading row k through a slice at offset k, or masks computed from k, made about 9 kernels a step:
a 64x64 determinant took 13 s to compile). Counts, not times; values are checked against torch."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import luminal as lm
from luminal import train

pytestmark = pytest.mark.usefixtures("one_torch_thread")

OPS = {
    "det": (lambda x, y: lm.linalg.det(x), lambda a, b: torch.linalg.det(a)),
    "slogdet": (lambda x, y: lm.linalg.slogdet(x)[1], lambda a, b: torch.linalg.slogdet(a)[1]),
    "inv": (lambda x, y: lm.linalg.inv(x), lambda a, b: torch.linalg.inv(a)),
    "solve": (lambda x, y: lm.linalg.solve(x, y), lambda a, b: torch.linalg.solve(a, b)),
    # gelsy: QR with column pivoting, a second QR (the minimum-norm solve) and two substitutions
    "lstsq": (lambda x, y: lm.linalg.lstsq(x, y).solution, lambda a, b: torch.linalg.lstsq(a, b).solution),
}


def _kernels(op: str, n: int) -> int:
    """Kernels generated (not reused from a rolled trip) for ``op`` on a batch of 2 n x n matrices on the
    cpu backend; its value checked against torch's on the way."""
    rng = np.random.default_rng(n)
    a = (rng.normal(size=(2, n, n)) / n + np.eye(n)).astype(np.float32)  # det near 1, no overflow
    b = rng.normal(size=(2, n, 2)).astype(np.float32)
    g = lm.Graph()
    x, y = g.input("x", a.shape), g.input("y", b.shape)
    ours, theirs = OPS[op]
    c = lm.compile(ours(x, y), backend="cpu")
    got = c(x=a, y=b) if op in ("solve", "lstsq") else c(x=a)
    want = theirs(torch.from_numpy(a).double(), torch.from_numpy(b).double()).numpy()
    np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-4)
    return c.report(show=False).codegen["kernels"]


@pytest.mark.parametrize("op", list(OPS))
def test_kernels_generated_do_not_grow_with_n(op):
    small, large = _kernels(op, 8), _kernels(op, 32)
    assert large <= small + 2, f"{op}: {small} kernels generated at n=8, {large} at n=32"


GRADS = {  # det's and slogdet's own gradient rules (the cofactor matrix, inv(A).mT): loops of their own
    "det": (lm.linalg.det, torch.linalg.det),
    "slogdet": (lambda x: lm.linalg.slogdet(x)[1], lambda a: torch.linalg.slogdet(a)[1]),
    # lstsq's rule (pinv(A) @ B's gradient): gelsy's pinv, the forward pass's pivoted QR reused
    "lstsq": (lambda x: lm.linalg.lstsq(x, x[..., :, :2]).solution,
              lambda a: torch.linalg.lstsq(a, a[..., :, :2]).solution),
}


def _backward_kernels(op: str, n: int) -> int:
    """Kernels generated for the gradient of ``op``'s sum over a batch of 2 n x n matrices on the cpu
    backend; the gradient checked against torch's on the way."""
    a = (np.random.default_rng(n).normal(size=(2, n, n)) / n + np.eye(n)).astype(np.float32)
    g = lm.Graph()
    x = g.input("x", a.shape)
    ours, theirs = GRADS[op]
    c = lm.compile(train.grad(ours(x).sum(), x), backend="cpu")
    got = c(x=a)
    t = torch.from_numpy(a).double().requires_grad_()
    theirs(t).sum().backward()
    np.testing.assert_allclose(got, t.grad.numpy(), rtol=2e-4, atol=2e-4)
    return c.report(show=False).codegen["kernels"]


@pytest.mark.parametrize("op", list(GRADS))
def test_backward_kernels_generated_do_not_grow_with_n(op):
    """The rule's back substitutions read row/column i through step i's masks and add e_i inside the
    step (a one-hot computed from the mask alone was one kernel a step, outside the rolled loop)."""
    # from n = 16: at n = 8 a loop of a few nodes may stay unrolled (fused into one kernel) instead
    # (lstsq's backward too, since loop detection tries the divisors of its frequent periods: 9ed25d1)
    lo, hi = 16, 32
    small, large = _backward_kernels(op, lo), _backward_kernels(op, hi)
    assert large <= small + 2, f"{op} backward: {small} kernels generated at n={lo}, {large} at n={hi}"
