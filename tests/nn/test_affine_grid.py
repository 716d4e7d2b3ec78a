"""Parity with torch for ``F.affine_grid``: 2-d (N, 2, 3) and 3-d (N, 3, 4) maps, align_corners False and
True, unit-size dims, gradients for theta, a symbolic batch, the errors; and an identity map through
``grid_sample`` reproducing its input."""

from __future__ import annotations

import contextlib
import itertools

import numpy as np
import pytest
import torch
import torch.nn.functional as TF
from parity import check

import luminal as lm
import luminal.nn.functional as F

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _theta(n, nd, seed=0):
    return np.random.default_rng(seed).standard_normal((n, nd, nd + 1)).astype(np.float32)


def _affine(size, ac):
    def op(t):
        return (TF if isinstance(t, torch.Tensor) else F).affine_grid(t, size, align_corners=ac)

    return op


@pytest.mark.parametrize("ac", [False, True])
def test_affine_grid_2d_and_3d_on_every_backend(backend, ac):
    check(_affine((2, 3, 4, 5), ac), [_theta(2, 2)], backend=backend)
    check(_affine((2, 1, 3, 2, 4), ac), [_theta(2, 3, seed=1)], backend=backend)


@pytest.mark.filterwarnings("ignore:.*unit-size:UserWarning")
@pytest.mark.parametrize("size,ac", list(itertools.product([(1, 2, 1, 6), (3, 1, 7, 1), (1, 1, 1, 1), (2, 1, 1, 3, 1),
                                                            (1, 2, 5, 9, 8)], [False, True])))
def test_affine_grid_sizes(size, ac):
    # theta's gradient sums the grid's coordinates over every position: where they are symmetric about 0
    # the exact value is 0, and float32 leaves a residue of the sum's rounding in any order (up to ~1e-4
    # over the 360 positions of (1, 2, 5, 9, 8): torch's 3e-6, the reference's einsum -4e-5)
    check(_affine(size, ac), [_theta(size[0], len(size) - 2, seed=2)], grad_atol=1e-4)


def test_affine_grid_float64_and_symbolic_batch():
    check(_affine((2, 1, 3, 4), True), [_theta(2, 2).astype(np.float64)])
    g = lm.Graph()
    t = g.input("t", ("B", 2, 3))
    x = g.input("x", ("B", 3, 4, 5))
    grid = F.affine_grid(t, x.shape, align_corners=False)
    assert tuple(grid.shape)[1:] == (4, 5, 2)
    th = _theta(3, 2, seed=3)
    got = lm.compile(grid)(t=th, x=np.zeros((3, 3, 4, 5), np.float32))
    want = TF.affine_grid(torch.from_numpy(th), (3, 3, 4, 5), align_corners=False).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("ac", [False, True])
@pytest.mark.parametrize("shape", [(2, 3, 5, 7), (1, 2, 1, 4)])
def test_identity_affine_grid_through_grid_sample_reproduces_the_input(backend, ac, shape):
    x = np.random.default_rng(4).standard_normal(shape).astype(np.float32)
    theta = np.tile(np.array([[1, 0, 0], [0, 1, 0]], np.float32), (shape[0], 1, 1))
    g = lm.Graph()
    xi, ti = g.input("x", shape), g.input("t", theta.shape)
    with pytest.warns(UserWarning, match="unit-size") if ac and 1 in shape[2:] else contextlib.nullcontext():
        grid = F.affine_grid(ti, xi.shape, align_corners=ac)
    out = lm.compile(F.grid_sample(xi, grid, align_corners=ac), backend=backend)(x=x, t=theta)
    np.testing.assert_allclose(out, x, rtol=1e-5, atol=1e-5)


def test_affine_grid_warns_as_torch_for_a_unit_dim_with_align_corners():
    g = lm.Graph()
    with pytest.warns(UserWarning, match="^affine_grid: a unit-size spatial dim with align_corners=True"):
        F.affine_grid(g.input("t", (1, 2, 3)), (1, 1, 1, 4), align_corners=True)


def test_affine_grid_errors():
    g = lm.Graph()
    t2, t3 = g.input("t", (2, 2, 3)), g.input("u", (2, 3, 4))
    with pytest.raises(ValueError, match=r"^affine_grid: expected theta of shape \(N, 2, 3\) for size"):
        F.affine_grid(t3, (2, 1, 4, 4))
    with pytest.raises(ValueError, match=r"^affine_grid: expected theta of shape \(N, 3, 4\) for size"):
        F.affine_grid(t2, (2, 1, 4, 4, 4))
    with pytest.raises(ValueError, match="^affine_grid: supports 4-d and 5-d sizes"):
        F.affine_grid(t2, (2, 1, 4))
    with pytest.raises(ValueError, match="^affine_grid: expected positive sizes"):
        F.affine_grid(t2, (2, 1, 0, 4))
    with pytest.raises(ValueError, match="^affine_grid: size's batch 3 differs from theta's 2"):
        F.affine_grid(t2, (3, 1, 4, 4))
    with pytest.raises(ValueError, match="^affine_grid: needs static spatial sizes"):
        F.affine_grid(t2, g.input("x", (2, 1, "H", 4)).shape)
    with pytest.raises(TypeError, match="^affine_grid: expected theta of a float dtype"):
        F.affine_grid(g.input("i", (2, 2, 3), dtype=lm.int32), (2, 1, 4, 4))
    with pytest.raises(TypeError, match="^affine_grid: "):
        F.affine_grid(np.zeros((2, 2, 3), np.float32), (2, 1, 4, 4))
