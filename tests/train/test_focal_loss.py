"""train.focal_loss against torchvision.ops.sigmoid_focal_loss's formula, written here in torch (values
and gradients, through tests/parity.py's check)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from parity import check, rand

import luminal as lm
from luminal import train

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def torch_focal(inputs, targets, alpha=0.25, gamma=2.0, reduction="none"):
    """torchvision.ops.sigmoid_focal_loss (torchvision 0.2x), verbatim in torch."""
    p = torch.sigmoid(inputs)
    ce_loss = F.binary_cross_entropy_with_logits(inputs, targets, reduction="none")
    p_t = p * targets + (1 - p) * (1 - targets)
    loss = ce_loss * ((1 - p_t) ** gamma)
    if alpha >= 0:
        alpha_t = alpha * targets + (1 - alpha) * (1 - targets)
        loss = alpha_t * loss
    if reduction == "mean":
        loss = loss.mean()
    elif reduction == "sum":
        loss = loss.sum()
    return loss


def _targets(shape, seed, soft=False):
    rng = np.random.default_rng(seed)
    return (rng.random(shape) if soft else (rng.random(shape) < 0.3)).astype(np.float32)


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("alpha,gamma", [(0.25, 2.0), (0.5, 0.0), (-1.0, 2.0), (0.75, 1.5), (0.25, 3.0)])
def test_focal_loss_matches_torchvision_formula(backend, alpha, gamma, reduction):
    x = rand((6, 5), seed=1, low=-4, high=4)
    t = _targets((6, 5), seed=2)
    check(lambda a, b: train.focal_loss(a, b, alpha=alpha, gamma=gamma, reduction=reduction), [x, t],
          torch_op=lambda a, b: torch_focal(a, b, alpha, gamma, reduction), backend=backend)


def test_focal_loss_soft_targets_and_large_logits(backend):
    x = rand((4, 7), seed=3, low=-30, high=30)  # saturated sigmoids: finite loss and gradients
    t = _targets((4, 7), seed=4, soft=True)
    out = check(lambda a, b: train.focal_loss(a, b, reduction="sum"), [x, t],
                torch_op=lambda a, b: torch_focal(a, b, reduction="sum"), backend=backend)
    assert np.isfinite(out[0]).all()


def test_focal_loss_defaults_and_errors():
    g = lm.Graph()
    x, t = g.input("x", (3, 2)), g.input("t", (3, 2))
    assert train.focal_loss(x, t).shape == (3, 2)  # torchvision's default reduction is "none"
    with pytest.raises(ValueError, match="gamma"):
        train.focal_loss(x, t, gamma=-1.0)
    with pytest.raises(ValueError, match="reduction"):
        train.focal_loss(x, t, reduction="avg")
    with pytest.raises(ValueError, match="shape"):
        train.focal_loss(x, g.input("u", (3, 1)))
    with pytest.raises(TypeError, match="alpha"):
        train.focal_loss(x, t, alpha="0.25")
    with pytest.raises(TypeError, match="float"):
        train.focal_loss(x, g.input("i", (3, 2), dtype=lm.int32))
