"""A value computed outside any graph from a trainable Parameter's current values, joining a graph,
is a constant there: no gradient reaches the Parameter, where torch's eager value carries one. It was
silent (``F.mse_loss(m.weight, lm.zeros(3, 3)) + m(x).sum()``: the penalty's gradient 0, torch's
2w/9); now a UserWarning names the Parameter and the ways out. Values whose gradient stops in torch
too (comparisons, int casts, ``detach()``), buffers and frozen Parameters warn of nothing."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import luminal as lm
from luminal import nn, train
from luminal.nn import functional as F


def _graph():
    g = lm.Graph()
    return g, g.input("x", (2, 3))


def test_a_weight_penalty_built_outside_the_graph_warns():
    m = nn.Linear(3, 3)
    g, x = _graph()
    with pytest.warns(UserWarning, match=r"from Parameter .*joins this graph as a constant"):
        loss = F.mse_loss(m.weight, lm.zeros(3, 3)) + m(x).sum()
    # (the warning's reason: the penalty carries no gradient to the weight)
    (gw,) = train.grad(loss, [m.weight])
    got = lm.compile(gw)(x=np.zeros((2, 3), np.float32))
    np.testing.assert_allclose(got, np.zeros((3, 3)), atol=0)


@pytest.mark.parametrize("make", [
    lambda m: (m.weight[:] > 0.1).float(),  # a mask: the comparison stops torch's gradient too
    lambda m: (m.weight[:] * 2).detach(),
    lambda m: m.weight[:].to(lm.int32).float(),
], ids=["mask", "detached", "int-cast"])
def test_values_without_a_gradient_in_torch_warn_of_nothing(make):
    m = nn.Linear(3, 3)
    g, x = _graph()
    v = make(m)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m(x) * v[0]


def test_buffers_and_frozen_parameters_warn_of_nothing():
    bn = nn.BatchNorm1d(3)
    frozen = nn.Parameter(np.ones(3, np.float32), requires_grad=False)
    g, x = _graph()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        x + bn.running_mean[:] * 2
        x + frozen[:] * 2
