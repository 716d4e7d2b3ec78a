"""A module that was called in a graph pickles (it failed: ``cannot pickle 'weakref.ReferenceType'``, the
record of the graphs built from it), as torch users save whole models with pickle; the copy has the
same parameters, buffers and mode, is built into no graph, and computes what the original does."""

from __future__ import annotations

import pickle
import warnings

import numpy as np
import pytest

import luminal as lm
from luminal import nn, train


def test_a_trained_module_pickles_and_computes_the_same():
    lm.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.ReLU(), nn.Linear(4, 2))
    g = lm.Graph()
    x = g.input("x", ("B", 3))
    step = train.compile_step(model(x).square().mean(), train.SGD(model.parameters(), lr=0.1))
    xs = np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32)
    for _ in range(3):
        step(x=xs)
    copy = pickle.loads(pickle.dumps(model))
    assert copy.training and list(copy.state_dict()) == list(model.state_dict())
    for k, v in model.state_dict().items():
        np.testing.assert_array_equal(copy.state_dict()[k], v)
    assert copy._live_graphs() == [] and model._live_graphs() == [g]
    with pytest.warns(UserWarning, match="after a graph was built from it"):  # (the original's graph)
        model.eval()
    copy.eval()  # (the copy's record is empty: no warning)
    outs = []
    for m in (model, copy):
        h = lm.Graph()
        outs.append(lm.compile(m(h.input("x", ("B", 3))))(x=xs))
    np.testing.assert_array_equal(outs[0], outs[1])


def test_the_original_still_warns_of_a_mode_change_after_its_graph():
    model = nn.BatchNorm1d(2)  # (its forward reads the mode)
    g = lm.Graph()
    model(g.input("x", (3, 2)))
    pickle.dumps(model)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.eval()
    assert any("after a graph was built from it" in str(w.message) for w in caught)
