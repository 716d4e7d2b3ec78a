"""Parity with torch for ``mode`` (``luminal/frontend/ops/order_stats.py``): values, indices (the last
position of the mode, torch's rule) and gradients; ties between equally frequent values (the
smallest wins); every dim, keepdim, 0-d, int, bool and signed-zero inputs; NaNs (each counts once);
a symbolic dim; empty tensors and the errors."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from parity import check

import luminal as lm

pytestmark = pytest.mark.usefixtures("one_torch_thread")

NAN = math.nan


def _ns(t):
    return torch if isinstance(t, torch.Tensor) else lm


def _counts(shape, seed, levels=4):
    """Small integers as floats: many ties and several equally frequent values."""
    return np.random.default_rng(seed).integers(0, levels, shape).astype(np.float32)


def test_mode_on_every_backend(backend):
    rows = np.array([[3, 1, 3, 1, 2, 2, 5], [1, 1, 1, 2, 2, 2, 0], [4, 4, 1, 1, 4, 1, 7]], np.float32)
    check(lambda t: tuple(t.mode(1)), [rows], backend=backend)
    check(lambda t: tuple(_ns(t).mode(t, 0, keepdim=True)), [rows], backend=backend)


@pytest.mark.parametrize("dim", [0, 1, 2, -1])
@pytest.mark.parametrize("keepdim", [False, True])
def test_mode_along_each_dim(dim, keepdim):
    for seed in range(3):
        check(lambda t: tuple(t.mode(dim, keepdim)), [_counts((3, 5, 6), seed)])


@pytest.mark.parametrize("row", [
    [3.0, 1.0, 3.0, 1.0],            # a tie: the smaller value, its last index
    [5.0],                           # one element
    [2.0, 2.0, 2.0],                 # all equal: the last index
    [-0.0, 0.0, 1.0, 1.0],           # -0.0 == 0.0: one value, the smaller of the tie
    [np.inf, np.inf, -np.inf],       # infinities are values like any other
    [1.0, NAN, NAN, NAN],            # NaN equals nothing: each counts once, 1 is the smallest
    [1.0, NAN, 2.0, NAN],
    [7.0, -3.0, 7.0, -3.0, 0.5],
])
def test_mode_special_rows(row):
    check(lambda t: tuple(t.mode()), [np.array(row, np.float32)])


def test_mode_of_ints_bools_and_0d():
    check(lambda t: tuple(t.mode()), [np.array([4, 4, 1, 1, 4, 1, 7, 1], np.int32)])
    check(lambda t: tuple(t.mode(0)), [np.array([[1, 2], [2, 2], [1, 3]], np.int32)])
    check(lambda t: tuple(t.mode()), [np.array([True, False, True], np.bool_)])
    check(lambda t: tuple(t.mode()), [np.array(2.5, np.float32)])
    check(lambda t: tuple(t.mode(0, keepdim=True)), [np.array(2.5, np.float32)])


def test_mode_over_a_symbolic_dim():
    x = _counts((2, 9), 7)
    check(lambda t: tuple(t.mode(1)), [x], shapes=[(2, "N")])


def test_mode_gradient_goes_to_the_index():
    # torch: the gradient of values goes to input[indices] (the last occurrence of the mode)
    check(lambda t: t.mode().values * 3.0, [np.array([3.0, 1.0, 3.0, 1.0], np.float32)])


def test_mode_of_empty_tensors():
    check(lambda t: tuple(t.mode(1)), [np.zeros((0, 3), np.float32)], grad=False)
    g = lm.Graph()
    with pytest.raises(ValueError, match="^mode: cannot take the mode along dim 1, which is empty"):
        g.input("x", (2, 0)).mode(1)
    with pytest.raises(TypeError, match="^mode: dim must be an int"):
        g.input("y", (2, 3)).mode((0, 1))
    with pytest.raises(ValueError, match="^mode: dim 2 is out of range for a 2-d tensor"):
        g.input("z", (2, 3)).mode(2)
