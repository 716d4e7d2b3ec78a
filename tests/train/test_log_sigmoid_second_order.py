"""Second derivatives of the losses built on ``log(sigmoid(x))`` at a logit of exactly 0 (a
zero-initialised head): ``binary_cross_entropy_with_logits`` (also with ``pos_weight``),
``soft_margin_loss`` and ``multilabel_soft_margin_loss`` gave 0 where torch's is sigmoid'(0) = 0.25
(``minimum`` and ``abs`` have kinks at 0); first and second derivatives against torch's."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import luminal as lm
from luminal import train
from luminal.nn import functional as F

X = np.array([[0.0, 1.0, -1.0, 0.0], [2.5, 0.0, -30.0, 40.0]])
T = np.array([[1.0, 0.0, 1.0, 0.0], [1.0, 1.0, 0.0, 1.0]])
PM = 2.0 * T - 1.0  # the margin losses' targets are -1 and 1

LOSSES = {
    "bce_with_logits": (lambda ns, x, t: ns.binary_cross_entropy_with_logits(x, t, reduction="sum"), T),
    "bce_pos_weight": (lambda ns, x, t: ns.binary_cross_entropy_with_logits(
        x, t, reduction="sum", pos_weight=_const(ns, x, [2.0, 1.0, 0.5, 3.0])), T),
    "soft_margin": (lambda ns, x, t: ns.soft_margin_loss(x, t, reduction="sum"), PM),
    "multilabel_soft_margin": (lambda ns, x, t: ns.multilabel_soft_margin_loss(x, t, reduction="sum"), T),
}


def _const(ns, like, values):
    if ns is torch.nn.functional:
        return torch.tensor(values, dtype=torch.float64)
    return like.graph.constant(np.array(values))


@pytest.mark.parametrize("name", sorted(LOSSES))
@pytest.mark.parametrize("backend", ["reference", "cpu"])
def test_first_and_second_derivatives_match_torch_at_zero_logits(name, backend):
    fn, target = LOSSES[name]
    xt = torch.tensor(X, requires_grad=True)
    (gt,) = torch.autograd.grad(fn(torch.nn.functional, xt, torch.tensor(target)), xt, create_graph=True)
    (ht,) = torch.autograd.grad(gt.sum(), xt)
    g = lm.Graph()
    x = g.input("x", X.shape, dtype=lm.float64)
    gx = train.grad(fn(F, x, g.constant(target)), x)
    hx = train.grad(gx.sum(), x)
    got_g, got_h = lm.compile([gx, hx], backend=backend)(x=X)
    np.testing.assert_allclose(got_g, gt.detach().numpy(), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(got_h, ht.numpy(), rtol=1e-10, atol=1e-15)
