"""In-place methods on a Parameter's basic-indexed view outside any graph write into the Parameter, as
torch's do through the view (``state_tensor.StateView``): ``emb.weight[pad].zero_()``, ``w[:, :k]
.normal_()``, ``w[1, 1:].add_(10).mul_(2)`` in an ``__init__`` changed a copy and left the weights as
they were, silently. Advanced indexing copies, in torch too; inside a graph a view stays a handle."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import luminal as lm
from luminal import nn

CASES = [
    ("fill", lambda w: w[0].fill_(5.0)),
    ("chain", lambda w: w[1, 1:].add_(10).mul_(2)),
    ("none-and-int", lambda w: w[:, None, 0].zero_()),
    ("ellipsis", lambda w: w[..., 2].sub_(1.5)),
    ("step", lambda w: w[::2, ::2].clamp_(max=1.0)),
    ("negative-int", lambda w: w[-1].neg_()),
    ("advanced-copies", lambda w: w[[0, 2]].fill_(7.0)),
    ("bool-copies", lambda w: w[torch.tensor([True, False, True]) if isinstance(w, torch.Tensor)
                                else np.array([True, False, True])].zero_()),
]


@pytest.mark.parametrize("name,edit", CASES, ids=[c[0] for c in CASES])
def test_an_inplace_method_on_a_parameters_view_writes_as_torchs(name, edit):
    start = np.arange(12, dtype=np.float32).reshape(3, 4) / 4
    p = nn.Parameter(start.copy())
    t = torch.nn.Parameter(torch.from_numpy(start.copy()))
    edit(p)
    with torch.no_grad():
        edit(t)
    np.testing.assert_array_equal(p.data, t.detach().numpy())


def test_random_fills_and_buffers_write_only_their_view():
    lm.manual_seed(0)
    emb = nn.Embedding(5, 3, padding_idx=None)
    before = emb.weight.data.copy()
    emb.weight[2].zero_()
    emb.weight[:, :1].normal_()
    changed = emb.weight.data != before
    assert (emb.weight.data[2, 1:] == 0).all() and changed[:, 0].all() and not changed[[0, 1, 3, 4], 1:].any()
    bn = nn.BatchNorm1d(3)
    bn.running_var[1:].fill_(4.0)
    np.testing.assert_array_equal(bn.running_var.data, [1.0, 4.0, 4.0])


def test_inside_a_graph_a_view_is_a_handle():
    lin = nn.Linear(3, 2)
    before = lin.weight.data.copy()
    g = lm.Graph()
    x = g.input("x", (1, 3))
    with pytest.warns(UserWarning, match="joins this graph as a constant"):  # (host values of the weight)
        row = lin.weight[0] * 1.0 + x[0]
    v = lin.weight.on(g)[0]
    v.zero_()
    np.testing.assert_array_equal(lin.weight.data, before)
    assert row.graph is g
