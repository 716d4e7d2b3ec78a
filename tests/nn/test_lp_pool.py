"""Parity with torch for ``nn.LPPool1d/2d/3d`` and ``F.lp_pool1d/2d/3d``: values and gradients for
p = 1, 2, 3, 1.5, -1, +-inf, on inputs with negative values and windows whose sum of powers is 0 (torch's
gradient 0 there) or negative (NaN), strides, ceil_mode (clipped windows), unbatched inputs, and the
errors naming the layer."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as TF
from parity import check, rand

import luminal as lm
import luminal.nn.functional as F
from luminal import nn

pytestmark = pytest.mark.usefixtures("one_torch_thread")

P = [1, 2, 3, 1.5, -1.0, math.inf, -math.inf]

# windows of 2: (0, 0) sums to 0 for every p, (1, -2) is negative for odd p, (0.5, -0.5) sums to 0 for
# odd p, (0, 3) has a zero element, then positive ones and a last element that only ceil_mode reads
ROW = np.array([0.0, 0.0, 1.0, -2.0, 0.5, -0.5, 0.0, 3.0, 1.5, 2.0, 0.25], np.float32)


def _f(t):
    return TF if isinstance(t, torch.Tensor) else F


def _layer(t, cls, *args, **kwargs):
    return getattr(torch.nn if isinstance(t, torch.Tensor) else nn, cls)(*args, **kwargs)(t)


@pytest.mark.parametrize("p", P)
def test_lp_pool_on_every_backend(backend, p):
    x = np.stack([ROW, -ROW[::-1]]).reshape(1, 2, 11)
    check(lambda t: _f(t).lp_pool1d(t, p, 2), [x], backend=backend)
    check(lambda t: _layer(t, "LPPool2d", p, (2, 3), stride=(1, 2), ceil_mode=True),
          [rand((2, 2, 5, 6), seed=1)], backend=backend)


@pytest.mark.parametrize("p,ceil", list(itertools.product(P, [False, True])))
def test_lp_pool1d_zero_and_negative_windows(p, ceil):
    x = np.stack([ROW, -ROW, ROW[::-1]]).reshape(3, 11)  # unbatched (C, L)
    check(lambda t: _f(t).lp_pool1d(t, p, 2, ceil_mode=ceil), [x])
    check(lambda t: _f(t).lp_pool1d(t, p, 3, stride=2, ceil_mode=ceil), [x.reshape(1, 3, 11)])


@pytest.mark.parametrize("p,ceil", list(itertools.product(P, [False, True])))
def test_lp_pool2d(p, ceil):
    x = rand((2, 3, 5, 7), seed=2)
    x[0, 0, :2, :2] = 0.0  # a window of zeros
    check(lambda t: _f(t).lp_pool2d(t, p, 2, ceil_mode=ceil), [x])
    check(lambda t: _layer(t, "LPPool2d", p, (3, 2), stride=(2, 1), ceil_mode=ceil), [x[0]])


@pytest.mark.parametrize("p,ceil", list(itertools.product([1, 2, 3, math.inf], [False, True])))
def test_lp_pool3d(p, ceil):
    x = rand((1, 2, 4, 5, 3), seed=3)
    x[0, 1, :2, :2, :2] = 0.0
    check(lambda t: _f(t).lp_pool3d(t, p, 2, ceil_mode=ceil), [x])
    check(lambda t: _layer(t, "LPPool3d", p, (2, 3, 1), stride=(1, 2, 2), ceil_mode=ceil), [x[0]])


def test_lp_pool_float64_and_symbolic_batch(backend):
    x = rand((3, 2, 8), seed=4)
    check(lambda t: _layer(t, "LPPool1d", 2, 3, 2), [x.astype(np.float64)], backend=backend)
    check(lambda t: _layer(t, "LPPool1d", 3, 2), [x], shapes=[("B", 2, 8)], backend=backend)


def test_lp_pool_repr():
    for args in [(2, 3), (2, 3, 2, True), (1.5, 4, 1), (math.inf, 2)]:
        assert repr(nn.LPPool1d(*args)) == repr(torch.nn.LPPool1d(*args))
    assert repr(nn.LPPool2d(2, 3)) == "LPPool2d(norm_type=2, kernel_size=(3, 3), stride=None, ceil_mode=False)"


def test_lp_pool_errors():
    g = lm.Graph()
    with pytest.raises(ValueError, match=r"^LPPool2d\(norm_type=2, kernel_size=\(2, 2\).*: expected input of shape "
                                         r"\(N, C, H, W\) or \(C, H, W\), got \(4, 5\)"):
        nn.LPPool2d(2, 2)(g.input("x", (4, 5)))
    with pytest.raises(ValueError, match=r"^lp_pool1d: LPPool1d\(.*: expected input of shape \(N, C, L\) or \(C, L\)"):
        F.lp_pool1d(g.input("y", (1, 2, 3, 4)), 2, 2)
    with pytest.raises(TypeError, match=r"^LPPool3d\(.*: expected a float input, got int32"):
        nn.LPPool3d(2, 2)(g.input("i", (1, 2, 4, 4, 4), dtype=lm.int32))
    with pytest.raises(ValueError, match="^LPPool1d: norm_type must be a nonzero number"):
        nn.LPPool1d(0, 2)
    with pytest.raises(TypeError, match="^LPPool2d: norm_type must be a number"):
        nn.LPPool2d("2", 2)
    with pytest.raises(ValueError, match=r"^LPPool2d: kernel_size must be an int or 2 ints"):
        nn.LPPool2d(2, (2, 2, 2))
    with pytest.raises(ValueError, match=r"^LPPool1d: stride must be at least 1"):
        nn.LPPool1d(2, 2, 0)
    with pytest.raises(ValueError, match=r"^LPPool1d\(.*AvgPool1d.*large enough"):
        nn.LPPool1d(2, 5)(g.input("z", (1, 2, 3)))
    with pytest.raises(TypeError, match="^lp_pool2d: "):
        F.lp_pool2d(np.zeros((1, 1, 4, 4), np.float32), 2, 2)
