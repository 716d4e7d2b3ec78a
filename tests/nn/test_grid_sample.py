"""Parity with torch for ``F.grid_sample`` on 4-d inputs: modes 'bilinear', 'nearest' and 'bicubic',
padding modes 'zeros', 'border' and 'reflection', ``align_corners``, grids reaching past the edges,
gradients for the input and (bilinear, bicubic) the grid, and the errors."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
import torch.nn.functional as TF
from parity import check, rand

import luminal as lm
import luminal.nn.functional as F

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _f(t):
    return TF if isinstance(t, torch.Tensor) else F


def _grid(shape, seed=1, reach=1.3):
    """Grid coordinates in [-reach, reach]: some taps fall outside the input."""
    return np.random.default_rng(seed).uniform(-reach, reach, shape).astype(np.float32)


def test_grid_sample_on_every_backend(backend):
    x, g = rand((2, 2, 3, 4)), _grid((2, 3, 2, 2))
    check(lambda t, u: _f(t).grid_sample(t, u, align_corners=False), [x, g], backend=backend)
    check(lambda t, u: _f(t).grid_sample(t, u, "nearest", "reflection", align_corners=True), [x, g], backend=backend)


@pytest.mark.parametrize("mode,padding,ac", list(itertools.product(["bilinear", "nearest", "bicubic"],
                                                                     ["zeros", "border", "reflection"],
                                                                     [False, True])))
def test_grid_sample_modes(mode, padding, ac):
    x, g = rand((1, 2, 4, 5), seed=2), _grid((1, 3, 4, 2), seed=3, reach=1.6)
    check(lambda t, u: _f(t).grid_sample(t, u, mode=mode, padding_mode=padding, align_corners=ac), [x, g])


def test_grid_sample_float64_and_one_pixel():
    x, g = rand((1, 1, 3, 3), seed=4), _grid((1, 2, 2, 2), seed=5)
    check(lambda t, u: _f(t).grid_sample(t, u, align_corners=False), [x.astype(np.float64), g.astype(np.float64)])
    check(lambda t, u: _f(t).grid_sample(t, u, padding_mode="reflection", align_corners=True),
          [rand((1, 1, 1, 1)), g])  # a 1-pixel input reflects onto itself


def test_grid_sample_errors():
    gr = lm.Graph()
    x, grid = gr.input("x", (1, 2, 3, 3)), gr.input("g", (1, 2, 2, 2))
    with pytest.raises(ValueError, match=r"^grid_sample: expected an input \(N, C, H, W\)"):
        F.grid_sample(gr.input("v", (2, 3, 3)), grid)
    with pytest.raises(ValueError, match=r"^grid_sample: expected a grid \(N, Ho, Wo, 2\)"):
        F.grid_sample(x, gr.input("h", (1, 2, 2, 3)))
    with pytest.raises(ValueError, match="^grid_sample: mode must be one of"):
        F.grid_sample(x, grid, mode="area")
    with pytest.raises(ValueError, match="^grid_sample: padding_mode must be one of"):
        F.grid_sample(x, grid, padding_mode="circular")
    with pytest.raises(TypeError, match="^grid_sample: needs float input and grid of one dtype"):
        F.grid_sample(x, gr.input("d", (1, 2, 2, 2), dtype=lm.float64))


@pytest.mark.parametrize("padding,ac", list(itertools.product(["border", "reflection"], [True, False])))
def test_a_coordinate_exactly_on_the_clip_bound_passes_no_gradient(padding, ac, backend):
    """torch counts a coordinate on a bound as clipped (gradient 0); a clamp passed it (-211.5 against 0 at
    x = 1 with border, align_corners). An identity affine grid with align_corners=True puts every edge pixel
    exactly there. The grid holds the bounds of both conventions, and points past them."""
    x = (np.arange(1, 31, dtype=np.float32).reshape(1, 1, 5, 6)) ** 1.5
    xs = [-1.0, 1.0, -1 - 1 / 6, 1 + 1 / 6, 0.5, -1.2]
    g = np.array([[[[gx, 0.1] for gx in xs], [[0.3, gy] for gy in (-1.0, 1.0, 1.2, -1 - 1 / 5, 1 + 1 / 5, 0.0)]]],
                 np.float32)
    check(lambda t, u: _f(t).grid_sample(t, u, padding_mode=padding, align_corners=ac), [x, g], backend=backend)
