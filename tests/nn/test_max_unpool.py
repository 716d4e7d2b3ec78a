"""Parity with torch for ``nn.MaxUnpool1d/2d/3d`` and ``F.max_unpool1d/2d/3d``: values and gradients of
unpooling torch's own max-pool indices (non-overlapping and overlapping windows, padding, unbatched
inputs, ``output_size`` in both of torch's forms), the round trip through luminal's ``max_pool`` with
``return_indices``, and the errors naming the layer."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as TF
from parity import check, rand

import luminal as lm
import luminal.nn.functional as F
from luminal import nn

pytestmark = pytest.mark.usefixtures("one_torch_thread")

TORCH_POOL = {1: TF.max_pool1d, 2: TF.max_pool2d, 3: TF.max_pool3d}
UNPOOL = {1: "max_unpool1d", 2: "max_unpool2d", 3: "max_unpool3d"}


def _pooled(shape, nd, kernel, stride, padding, seed=0):
    """A max pooling's output and indices (torch's), as the unpooling's inputs."""
    x = torch.from_numpy(rand(shape, seed=seed))
    values, indices = TORCH_POOL[nd](x, kernel, stride, padding, return_indices=True)
    return values.numpy(), indices.to(torch.int32).numpy()


def _unpool(nd, kernel, stride=None, padding=0, output_size=None):
    def run(v, i):
        if isinstance(v, torch.Tensor):
            return getattr(TF, UNPOOL[nd])(v, i.long(), kernel, stride, padding, output_size)
        return getattr(F, UNPOOL[nd])(v, i, kernel, stride, padding, output_size)
    return run


CASES = [  # (input shape, nd, kernel, stride, padding, output_size)
    ((2, 3, 8), 1, 2, None, 0, None),
    ((3, 9), 1, 3, 2, 1, None),  # unbatched, overlapping windows, padding
    ((2, 2, 6, 7), 2, 2, None, 0, (6, 7)),  # an odd width needs output_size
    ((2, 2, 6, 7), 2, 2, None, 0, (2, 2, 6, 7)),  # torch's form with N and C
    ((2, 5, 5), 2, 3, 1, 1, None),  # unbatched, overlapping: positions named twice
    ((1, 2, 4, 6, 5), 3, (2, 2, 3), (2, 2, 2), 0, None),
]


@pytest.mark.parametrize("case", CASES, ids=str)
def test_max_unpool_matches_torch(case, backend):
    shape, nd, kernel, stride, padding, output_size = case
    v, i = _pooled(shape, nd, kernel, stride, padding)
    check(_unpool(nd, kernel, stride, padding, output_size), [v, i], backend=backend)


def test_module_and_round_trip_through_luminal_max_pool():
    """MaxPool2d(return_indices=True) -> MaxUnpool2d, all luminal, against the same in torch."""
    def run(x):
        if isinstance(x, torch.Tensor):
            v, i = torch.nn.MaxPool2d(2, return_indices=True)(x)
            return torch.nn.MaxUnpool2d(2)(v, i, output_size=x.shape)
        v, i = nn.MaxPool2d(2, return_indices=True)(x)
        return nn.MaxUnpool2d(2)(v, i, output_size=x.shape)
    check(run, [rand((2, 3, 7, 6), seed=3)])


def test_bfloat16_values():
    v, i = _pooled((2, 3, 6, 6), 2, 2, None, 0)
    check(_unpool(2, 2), [v, i], dtypes=[lm.bfloat16, lm.int32])


def _graph(v_shape, i_shape=None, i_dtype=lm.int32):
    g = lm.Graph()
    return g.input("v", v_shape), g.input("i", i_shape or v_shape, dtype=i_dtype)


def test_errors_name_the_layer():
    v, i = _graph((2, 3, 4, 4))
    with pytest.raises(ValueError, match=r"MaxUnpool2d.*output_size.*between"):
        nn.MaxUnpool2d(2)(v, i, output_size=(11, 8))
    with pytest.raises(ValueError, match=r"MaxUnpool2d.*output_size must have 2 or 4 entries"):
        nn.MaxUnpool2d(2)(v, i, output_size=(3, 8, 8))
    with pytest.raises(ValueError, match=r"MaxUnpool2d.*indices must have the input's shape"):
        nn.MaxUnpool2d(2)(*_graph((2, 3, 4, 4), (2, 3, 4, 5)))
    with pytest.raises(TypeError, match=r"MaxUnpool2d.*integer"):
        nn.MaxUnpool2d(2)(*_graph((2, 3, 4, 4), i_dtype=lm.float32))
    with pytest.raises(ValueError, match=r"MaxUnpool1d.*\(N, C, L\) or \(C, L\)"):
        nn.MaxUnpool1d(2)(*_graph((2, 3, 4, 4)))
    with pytest.raises(ValueError, match=r"kernel_size must be at least 1"):
        nn.MaxUnpool3d(0)


def test_an_index_outside_the_output_is_an_index_error():
    v, i = _graph((1, 1, 2, 2))
    f = lm.compile(F.max_unpool2d(v, i, 2))
    ok = f(v=np.ones((1, 1, 2, 2), np.float32), i=np.array([[[[0, 3], [9, 15]]]], np.int32))
    assert ok.reshape(-1)[[0, 3, 9, 15]].tolist() == [1, 1, 1, 1] and ok.sum() == 4
    with pytest.raises(IndexError):
        f(v=np.ones((1, 1, 2, 2), np.float32), i=np.array([[[[0, 3], [9, 16]]]], np.int32))
