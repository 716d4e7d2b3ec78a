"""Parity with torch for ``nn.LocalResponseNorm`` and ``F.local_response_norm``: inputs of 3 to 6 dims,
window sizes below, equal to and above the channel count (even and odd: the zero padding is uneven),
non-default alpha, beta, k, gradients, a symbolic batch, and the errors naming the layer."""

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


def _lrn(*args, **kwargs):
    def op(t):
        return (TF if isinstance(t, torch.Tensor) else F).local_response_norm(t, *args, **kwargs)

    return op


def _module(*args, **kwargs):
    def op(t):
        return (torch.nn if isinstance(t, torch.Tensor) else nn).LocalResponseNorm(*args, **kwargs)(t)

    return op


def test_local_response_norm_on_every_backend(backend):
    check(_module(3), [rand((2, 5, 4, 3), low=-3, high=3)], backend=backend)
    check(_lrn(2, alpha=0.3, beta=0.6, k=1.5), [rand((2, 4, 6), seed=1, low=-3, high=3)], backend=backend)


@pytest.mark.parametrize("shape", [(2, 5, 4), (2, 6, 3, 4), (1, 4, 2, 3, 2), (2, 3, 2, 2, 2, 2)])
@pytest.mark.parametrize("size", [1, 2, 3, 4, 8])
def test_local_response_norm_shapes_and_sizes(shape, size):
    check(_lrn(size, alpha=0.5, beta=0.75, k=2.0), [rand(shape, seed=size, low=-3, high=3)])


def test_local_response_norm_module_defaults_float64_and_repr():
    check(_module(5), [rand((2, 7, 3), seed=2, low=-30, high=30).astype(np.float64)])
    assert repr(nn.LocalResponseNorm(2)) == repr(torch.nn.LocalResponseNorm(2))
    assert repr(nn.LocalResponseNorm(3, 0.1, 0.5, 2.0)) == repr(torch.nn.LocalResponseNorm(3, 0.1, 0.5, 2.0))
    assert not list(nn.LocalResponseNorm(2).state_dict())


def test_local_response_norm_symbolic_batch_and_spatial(backend):
    check(_module(3, alpha=0.2), [rand((3, 4, 5), seed=3)], shapes=[("B", 4, "L")], backend=backend)


def test_local_response_norm_errors():
    g = lm.Graph()
    with pytest.raises(ValueError, match=r"^LocalResponseNorm\(2, alpha=0.0001, beta=0.75, k=1.0\): expected input "
                                         r"of shape \(N, C, \*\) of at least 3 dims, got \(4, 5\)"):
        nn.LocalResponseNorm(2)(g.input("x", (4, 5)))
    with pytest.raises(ValueError, match=r"^local_response_norm: expected input of shape \(N, C, \*\)"):
        F.local_response_norm(g.input("y", (5,)), 2)
    with pytest.raises(TypeError, match=r"^LocalResponseNorm\(2.*: expected a float input, got int32"):
        nn.LocalResponseNorm(2)(g.input("i", (2, 3, 4), dtype=lm.int32))
    with pytest.raises(ValueError, match="^LocalResponseNorm: size must be at least 1, got 0"):
        nn.LocalResponseNorm(0)
    with pytest.raises(TypeError, match="^LocalResponseNorm: size must be an int"):
        nn.LocalResponseNorm(2.5)
    with pytest.raises(TypeError, match="^local_response_norm: beta must be a number"):
        F.local_response_norm(g.input("z", (2, 3, 4)), 2, beta="x")
    with pytest.raises(TypeError, match="^LocalResponseNorm"):
        nn.LocalResponseNorm(2)(np.zeros((2, 3, 4), np.float32))
