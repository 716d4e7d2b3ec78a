"""Parity with torch for ``F.interpolate``'s 'bicubic' (torch's A = -0.75, the edge read past the
borders, ``align_corners``, scale factors) and 'area' (adaptive average pooling; 1-d, 2-d and 3-d)
modes, values and gradients, and ``nn.Upsample`` with them."""

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


def test_bicubic_and_area_on_every_backend(backend):
    x = rand((1, 2, 4, 5))
    check(lambda t: (_f(t).interpolate(t, size=(7, 3), mode="bicubic"), _f(t).interpolate(t, size=(3, 2), mode="area")),
          [x], backend=backend)


CASES = [
    (dict(size=(9, 8), mode="bicubic"), (1, 2, 4, 5)),
    (dict(size=(2, 3), mode="bicubic"), (2, 1, 5, 7)),  # downsampling
    (dict(size=(6, 4), mode="bicubic", align_corners=True), (1, 1, 3, 5)),
    (dict(scale_factor=(1.5, 2.3), mode="bicubic"), (1, 1, 4, 3)),
    (dict(scale_factor=1.7, mode="bicubic", recompute_scale_factor=True), (1, 1, 3, 3)),
    (dict(size=(1, 1), mode="bicubic", align_corners=True), (1, 1, 3, 3)),
    (dict(size=3, mode="area"), (2, 2, 7)),
    (dict(size=(2, 5), mode="area"), (1, 2, 5, 3)),  # pooling down, and up
    (dict(scale_factor=0.5, mode="area"), (1, 1, 4, 6)),
    (dict(size=(2, 3, 2), mode="area"), (1, 1, 4, 5, 3)),
]


@pytest.mark.parametrize("kw,shape", CASES, ids=[f"{kw['mode']}-{i}" for i, (kw, _) in enumerate(CASES)])
def test_interpolate_cases(kw, shape):
    check(lambda t: _f(t).interpolate(t, **kw), [rand(shape)])


def test_upsample_and_errors():
    ns = lambda t: torch.nn if isinstance(t, torch.Tensor) else nn  # noqa: E731
    check(lambda t: ns(t).Upsample(scale_factor=2, mode="bicubic")(t), [rand((1, 1, 3, 2))])
    g = lm.Graph()
    with pytest.raises(ValueError, match="^interpolate: mode 'bicubic' expects a 4-d input"):
        F.interpolate(g.input("x", (1, 2, 3)), size=4, mode="bicubic")
    with pytest.raises(ValueError, match="^interpolate: align_corners may only be set with the linear and cubic"):
        F.interpolate(g.input("y", (1, 2, 3)), size=4, mode="area", align_corners=True)


@pytest.mark.parametrize("mode,shape,scale", [("linear", (1, 2, 4), 1.1), ("bilinear", (1, 2, 4, 5), (1.1, 2.0)),
                                              ("trilinear", (1, 1, 3, 4, 2), (1.2, 1.1, 1.5))])
def test_a_dim_the_scale_factor_leaves_its_size_is_copied_by_the_linear_modes(mode, shape, scale, backend):
    """torch's linear kernels copy a dim whose output size is the input's (4 * 1.1 -> 4), whatever the
    scale factor; luminal resampled it with ratio 1/1.1 (output [.126, -.097, .465, .275] for the input
    [.126, -.132, .640, .105])."""
    check(lambda t: _f(t).interpolate(t, scale_factor=scale, mode=mode), [rand(shape)], backend=backend)


@pytest.mark.parametrize("n,scale,mode,recompute", [(16, 1.3, "nearest-exact", None), (20, 1.3, "nearest-exact", None),
                                                     (14, 3.3, "nearest", True), (14, 1.7, "nearest-exact", True)])
def test_nearest_source_index_is_computed_in_float32(n, scale, mode, recompute):
    """torch computes nearest's source index in float32; in float64 an output read its neighbour at times
    (n=16, scale 1.3, nearest-exact: output 19 read input 14 for torch's 15)."""
    check(lambda t: _f(t).interpolate(t, scale_factor=scale, mode=mode, recompute_scale_factor=recompute),
          [rand((1, 1, n))])
