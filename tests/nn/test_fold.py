"""Parity with torch for ``F.unfold``/``F.fold`` (im2col / col2im) and ``nn.Unfold``/``nn.Fold``: kernel
size, dilation, padding and stride, unbatched inputs, overlapping blocks summing, gradients, reprs
and the errors."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as TF
from parity import check, rand

import luminal as lm
import luminal.nn.functional as F
from luminal import nn

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _f(t):
    return TF if isinstance(t, torch.Tensor) else F


def _nn(t):
    return torch.nn if isinstance(t, torch.Tensor) else nn


CASES = [  # kernel_size, dilation, padding, stride
    (2, 1, 0, 1), ((2, 3), (1, 2), (1, 0), (2, 1)), (3, 1, 1, 2),
]


def test_unfold_and_fold_on_every_backend(backend):
    x = rand((2, 3, 5, 6))
    check(lambda t: _f(t).unfold(t, (2, 3), (1, 2), (1, 0), (2, 1)), [x], backend=backend)
    cols = rand((2, 3 * 4, 16), seed=1)  # 2x2 blocks at stride 1 over 5x5: overlaps sum
    check(lambda t: _f(t).fold(t, 5, 2), [cols], backend=backend)


@pytest.mark.parametrize("k,d,p,s", CASES)
def test_unfold_fold_variants(k, d, p, s):
    x = rand((2, 2, 6, 5), seed=2)
    check(lambda t: _f(t).unfold(t, k, dilation=d, padding=p, stride=s), [x])
    check(lambda t: _f(t).unfold(t, k, d, p, s), [x[0]])  # unbatched
    n_cols = TF.unfold(torch.zeros(1, 2, 6, 5), k, d, p, s).shape
    check(lambda t: _f(t).fold(t, (6, 5), k, d, p, s), [rand(tuple(n_cols), seed=3)])
    check(lambda t: _f(t).fold(t, (6, 5), k, d, p, s), [rand(tuple(n_cols[1:]), seed=4)])  # unbatched
    check(lambda t: _f(t).fold(_f(t).unfold(t, k, d, p, s), (6, 5), k, d, p, s), [x])  # a round trip


def test_modules():
    for m, tm in [(nn.Unfold(2, stride=2), torch.nn.Unfold(2, stride=2)),
                  (nn.Fold((4, 4), 2, stride=2), torch.nn.Fold((4, 4), 2, stride=2))]:
        assert repr(m) == repr(tm)
    check(lambda t: _nn(t).Unfold((2, 2), padding=1)(t), [rand((1, 2, 3, 3))])
    check(lambda t: _nn(t).Fold((4, 4), 2, stride=2)(t), [rand((1, 8, 4))])


def test_errors():
    g = lm.Graph()
    x = g.input("x", (1, 2, 4, 4))
    with pytest.raises(ValueError, match=r"^unfold: expected an input \(N, C, H, W\) or \(C, H, W\)"):
        F.unfold(g.input("v", (4, 4)), 2)
    with pytest.raises(ValueError, match="^unfold: the kernel spans 5"):
        F.unfold(x, 3, dilation=2)
    with pytest.raises(ValueError, match="^unfold: stride must be at least 1"):
        F.unfold(x, 2, stride=0)
    with pytest.raises(ValueError, match=r"^fold: dim 1 \(6\) must be divisible by the kernel's 2 \* 2 elements"):
        F.fold(g.input("c", (1, 6, 9)), 4, 2)
    with pytest.raises(ValueError, match=r"^fold: expected 9 columns \(blocks 3 x 3 for output_size \(4, 4\)\), got 8"):
        F.fold(g.input("d", (1, 8, 8)), 4, 2)
    with pytest.raises(TypeError, match="^fold: input must be a GraphTensor"):
        F.fold(None, 4, 2)
