"""Tensors made outside any graph (``frontend/host.py``): a factory given no graph outside every module
call makes a host tensor, whose values are known now; inside a module's forward it builds in the call's
graph. Also ``device=`` on factories, ``x.device`` and ``lm.long`` (what torch code passes along)."""

from __future__ import annotations

import numpy as np
import pytest

import luminal as lm
from luminal import nn
from luminal.frontend.eager import EagerOnlyError


def test_a_factory_without_a_graph_makes_a_host_tensor_with_values():
    mask = lm.tril(lm.ones(4, 4)).view(1, 1, 4, 4)
    assert mask.graph.host and mask.shape == (1, 1, 4, 4)
    np.testing.assert_array_equal(np.asarray(mask), np.tril(np.ones((4, 4)))[None, None])
    np.testing.assert_array_equal(np.asarray(lm.arange(0, 5, dtype=lm.long)), np.arange(5))
    p = nn.Parameter(lm.full((2,), 0.1, dtype=lm.bfloat16))  # the tensor's dtype is kept
    assert p.dtype is lm.bfloat16 and p.data.dtype == np.float32
    np.testing.assert_array_equal(p.data, np.full(2, lm.core.dtype.round_bf16(np.float32(0.1))))


def test_a_host_tensor_joins_a_graph_as_a_constant():
    g = lm.Graph()
    x = g.input("x", ("B", 3))
    bias = lm.arange(3, dtype=lm.float32) * 2  # a host computation: 0, 2, 4
    y = x + bias
    assert y.graph is g
    a = np.ones((2, 3), np.float32)
    np.testing.assert_array_equal(lm.compile(y, backend="reference")(x=a), a + [0, 2, 4])


def test_a_factory_in_a_forward_builds_in_the_call_graph():
    class Positions(nn.Module):
        def forward(self, x):
            t = x.size(1)
            return x + lm.arange(0, t, device=x.device)  # symbolic t: no host value needed

    g = lm.Graph()
    x = g.input("x", (2, "T"), dtype=lm.int32)
    y = Positions()(x)
    assert y.graph is g and y.shape == x.shape
    a = np.zeros((2, 5), np.int32)
    np.testing.assert_array_equal(lm.compile(y, backend="reference")(x=a), a + np.arange(5))


def test_values_need_a_host_tensor_with_static_sizes():
    g = lm.Graph()
    with pytest.raises(EagerOnlyError, match=r"^numpy: a luminal tensor is lazy"):
        np.asarray(g.input("x", (2,)))
    with pytest.raises(ValueError, match=r"^numpy: a tensor made outside any graph has the symbolic shape \(T,\)"):
        np.asarray(lm.zeros("T"))


def test_device_is_the_host():
    g = lm.Graph()
    x = g.input("x", (2,))
    assert x.device == "cpu" and lm.zeros(2, device=x.device).shape == (2,)
    for make in (lambda: lm.arange(3, device="cuda"), lambda: lm.ones(2, device="cuda:0", graph=g),
                 lambda: lm.eye(2, device="mps"), lambda: lm.full((2,), 1.0, device="cuda")):
        with pytest.raises(ValueError, match=r"^\w+: device '(cuda|cuda:0|mps)': .*lm.compile\(outputs, backend="):
            make()
    assert lm.long is lm.int32
