"""Parity with torch for cdist (``frontend/ops/distance.py``): every p (0, 1, 2, 3.5, inf), batch
broadcasting, both ways of computing p = 2 (differences; the matmul form above 25 points), coincident
points (distance 0, gradient 0), values and gradients."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from parity import check, rand

import luminal as lm
from luminal import train

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.mark.parametrize("p", [2.0, 1.0, 0.0, 3.5, math.inf])
def test_cdist_every_p(p, backend):
    x1, x2 = rand((4, 3)), rand((5, 3), seed=1)
    check(lambda a, b: (torch if isinstance(a, torch.Tensor) else lm).cdist(a, b, p=p), [x1, x2], backend=backend)
    check(lambda a, b: (torch if isinstance(a, torch.Tensor) else lm).cdist(a, b, p),
          [rand((2, 1, 4, 3), lm.float64, seed=2), rand((3, 5, 3), lm.float64, seed=3)], backend=backend)


@pytest.mark.parametrize("mode", ["use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist",
                                  "donot_use_mm_for_euclid_dist"])
def test_cdist_euclidean_modes(mode, backend):
    x1 = rand((30, 4), lm.float64, seed=4)  # above 25 rows: the default takes the matmul form, as torch
    x2 = np.concatenate([x1[:3], rand((7, 4), lm.float64, seed=5)])  # coincident points: distance 0
    check(lambda a, b: (torch if isinstance(a, torch.Tensor) else lm).cdist(a, b, compute_mode=mode), [x1, x2],
          backend=backend, atol=1e-6)
    small = [rand((6, 2), seed=6), rand((4, 2), seed=7)]
    check(lambda a, b: (torch if isinstance(a, torch.Tensor) else lm).cdist(a, b, compute_mode=mode), small,
          backend=backend)


def test_cdist_zero_distance_has_zero_gradient():
    g = lm.Graph()
    x = g.input("x", (3, 2), dtype=lm.float64)
    pts = np.array([[0.0, 1.0], [2.0, 2.0], [0.0, 1.0]])
    for mode in ("use_mm_for_euclid_dist", "donot_use_mm_for_euclid_dist"):
        d = lm.cdist(x, x, compute_mode=mode)
        out, gx = lm.compile([d, train.grad(d.sum(), x)], backend="reference")(x=pts)
        assert out[0, 0] == 0 and out[0, 2] == 0 and np.isfinite(gx).all()


def test_cdist_errors():
    g = lm.Graph()
    a, b = g.input("a", (4, 3)), g.input("b", (5, 2))
    with pytest.raises(ValueError, match="^cdist: the points' sizes differ: 3 vs 2"):
        lm.cdist(a, b)
    with pytest.raises(ValueError, match="^cdist: p must be >= 0, got -1"):
        lm.cdist(a, a, p=-1)
    with pytest.raises(TypeError, match="^cdist: needs float tensors, got int32"):
        lm.cdist(g.input("i", (2, 3), dtype=lm.int32), a)
    with pytest.raises(ValueError, match="^cdist: needs tensors of at least 2 dims, got 1-d"):
        lm.cdist(g.input("v", (3,)), a)
    with pytest.raises(ValueError, match="^cdist: compute_mode must be one of"):
        lm.cdist(a, a, compute_mode="fast")
