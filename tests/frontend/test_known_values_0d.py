"""Class labels given as a 0-d array constant (``g.constant(np.array(3, np.int32))``, torch's
``torch.tensor(3)``): ``value_checks.known_values`` read the value of a 0-d constant from its key's
``scalar``, which only a Python-number constant has (a 0-d array keeps its value in
``graph.constants``, as other arrays), so it gave ``np.asarray(None)`` and the label range checks of
nll_loss, cross_entropy and multi_margin_loss failed with a TypeError ('<' between None and int).
Now the losses match torch's, values and gradients, and an out-of-range label fails at build time
naming the op, as a label held in a Python number or a 1-d array does."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from parity import check, rand

import luminal as lm
import luminal.nn.functional as F
from luminal.frontend.ops.value_checks import known_values

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _loss(name, label):
    def op(t):
        if isinstance(t, torch.Tensor):
            return getattr(torch.nn.functional, name)(t if name != "nll_loss" else t.log_softmax(0),
                                                      torch.tensor(label))
        y = t.graph.constant(np.array(label, np.int32))
        return getattr(F, name)(t if name != "nll_loss" else t.log_softmax(0), y)
    return op


@pytest.mark.parametrize("label", [0, 3, 4])
@pytest.mark.parametrize("name", ["cross_entropy", "nll_loss", "multi_margin_loss"])
def test_0d_array_label(name, label, backend):
    check(_loss(name, label), [rand((5,), seed=label)], backend=backend)


@pytest.mark.parametrize("label", [5, -1])
@pytest.mark.parametrize("name", ["cross_entropy", "nll_loss", "multi_margin_loss"])
def test_0d_array_label_out_of_range(name, label):
    g = lm.Graph()
    with pytest.raises(IndexError, match=rf"^{name}: .*{label}"):
        _loss(name, label)(g.input("x", (5,)))


def test_known_values_of_0d_constants():
    g = lm.Graph()
    for c in (np.array(3, np.int32), np.array(-2.5, np.float32), np.array(True)):
        t = g.constant(c)
        got = known_values(t)
        assert got.shape == () and got.dtype == c.dtype and got == c
        assert known_values(t.expand(2, 3)) == c  # read however expanded, as a Python-number constant
    assert known_values(g.constant(7)) == 7
    assert known_values(g.constant(np.array([1, 2], np.int32))).tolist() == [1, 2]
    assert known_values(g.input("x", ())) is None


def test_negative_0d_variance_fails_as_torch():
    g = lm.Graph()
    with pytest.raises(ValueError, match=r"^gaussian_nll_loss: var has negative entries \(e\.g\. -1\.0\)"):
        F.gaussian_nll_loss(g.input("x", (3,)), g.input("y", (3,)), g.constant(np.array(-1.0, np.float32)))
    with pytest.raises(ValueError, match=r"var has negative entry"):
        torch.nn.functional.gaussian_nll_loss(torch.ones(3), torch.zeros(3), torch.tensor(-1.0))
