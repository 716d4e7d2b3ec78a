"""Review of the session's changes (helper review-lead): an in-place method on a view of a Parameter's
view writes into the Parameter, as torch's (``state_tensor.StateView``): ``w[0][1:].zero_()``,
``w[:2].mT[0].zero_()`` and ``w[0].view(2, 2).add_(1)`` changed a host copy, silently."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import luminal as lm
from luminal import nn


def _t(a):
    return torch.tensor(a, dtype=torch.float32)


CASES = [
    ("zero-d", lambda w, c: w[0, 0].fill_(3.0)),
    ("zero-d-chained", lambda w, c: w[1][2].add_(1.0)),
    ("getitem-getitem", lambda w, c: w[0][1:].zero_()),
    ("three-getitems", lambda w, c: w[1:][::2][:, 0].add_(5.0)),
    ("none-then-int", lambda w, c: w[None][0, 1].fill_(-1.0)),
    ("mT", lambda w, c: w[:2].mT[0].zero_()),
    ("T", lambda w, c: w[1:3, :2].T.sub_(c([[0.0, 1.0], [2.0, 3.0]]))),
    ("transpose", lambda w, c: w[:3].transpose(0, 1)[1].mul_(-2.0)),
    ("permute", lambda w, c: w[:2, None].permute(2, 1, 0)[3].fill_(9.0)),
    ("view", lambda w, c: w[1].view(2, 2).add_(c([[1.0, 2.0], [3.0, 4.0]]))),
    ("unsqueeze-squeeze", lambda w, c: w[2].unsqueeze(0).squeeze(0)[1:3].neg_()),
    ("narrow", lambda w, c: w[1:].narrow(1, 1, 2).zero_()),
    ("select", lambda w, c: w[:, 1:].select(1, 0).fill_(7.0)),
    ("diagonal", lambda w, c: w[:].diagonal().zero_()),
    ("unbind", lambda w, c: w[:2].unbind(0)[1].fill_(4.0)),
    ("movedim", lambda w, c: w[:3, :2].movedim(0, 1)[0].add_(c([1.0, 2.0, 3.0]))),
    ("inplace-transpose-then-add", lambda w, c: w[:2, :2].t_().add_(c([[0.0, 1.0], [2.0, 3.0]]))),
    ("inplace-unsqueeze-then-copy", lambda w, c: w[3].unsqueeze_(0).copy_(c([[1.0, 2.0, 3.0, 4.0]]))),
]


@pytest.mark.parametrize("name,edit", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_an_inplace_method_on_a_view_of_a_parameters_view_writes_as_torchs(name, edit, dtype):
    start = np.arange(16, dtype=np.float32).reshape(4, 4) / 4 + 0.1
    p = nn.Parameter(start.copy(), dtype=getattr(lm, dtype))
    t = torch.nn.Parameter(torch.from_numpy(start.copy()).to(getattr(torch, dtype)))
    before = np.asarray(p.data).copy()
    edit(p, lambda a: np.array(a, np.float32))
    with torch.no_grad():
        edit(t, lambda a: _t(a).to(getattr(torch, dtype)))
    want = t.detach().float().numpy()
    assert not np.array_equal(want, before.astype(np.float32)), "the edit must change torch's parameter"
    np.testing.assert_array_equal(np.asarray(p.data).astype(np.float32), want)


def test_a_compiled_program_reads_the_write_through_a_chained_view():
    """The write reaches the next call of a program compiled before it (the State's storage)."""
    lin = nn.Linear(3, 2, bias=False)
    g = lm.Graph()
    x = g.input("x", (1, 3))
    f = lm.compile(lin(x))
    xs = np.ones((1, 3), np.float32)
    first = f(x=xs)
    lin.weight[1][1:].zero_()
    w = np.asarray(lin.weight.data)
    assert (w[1, 1:] == 0).all()
    np.testing.assert_allclose(f(x=xs), xs @ w.T, rtol=1e-6)
    assert first[0, 1] != f(x=xs)[0, 1]


SETS = [
    ("basic", lambda w, c: w.__setitem__((0, slice(1, None)), 5.0)),
    ("chained", lambda w, c: w[1].__setitem__(slice(1, None), 7.0)),
    ("chained-tensor", lambda w, c: w[:, 2].__setitem__(slice(None, 2), c([8.0, 9.0]))),
    ("advanced", lambda w, c: w.__setitem__(([0, 3], [1, 1]), -1.0)),
    ("mask-row", lambda w, c: w.__setitem__(2, c([1.0, 2.0, 3.0, 4.0]))),
]


@pytest.mark.parametrize("name,edit", SETS, ids=[c[0] for c in SETS])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_item_assignment_into_a_parameter_outside_a_graph_writes_as_torchs(name, edit, dtype):
    """``w[0, 1:] = 5`` was a bare 'does not support item assignment'; ``w[1][1:] = 7`` changed a copy."""
    start = np.arange(16, dtype=np.float32).reshape(4, 4) / 4 + 0.1
    p = nn.Parameter(start.copy(), dtype=getattr(lm, dtype))
    t = torch.from_numpy(start.copy()).to(getattr(torch, dtype))
    edit(p, lambda a: np.array(a, np.float32))
    edit(t, lambda a: _t(a).to(getattr(torch, dtype)))
    np.testing.assert_array_equal(np.asarray(p.data).astype(np.float32), t.float().numpy())


def test_item_assignment_into_a_buffer_and_inside_a_graph():
    m = nn.BatchNorm1d(3)
    m.num_batches_tracked[...] = 4
    m.running_mean[1:] = np.array([1.0, 2.0], np.float32)
    assert int(m.num_batches_tracked.data) == 4
    np.testing.assert_array_equal(m.running_mean.data, [0.0, 1.0, 2.0])

    class Writes(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(np.zeros(3, np.float32))

        def forward(self, x):
            self.w[0] = 1.0
            return x

    g = lm.Graph()
    with pytest.raises(TypeError, match=r"__setitem__: Parameter w \(3,\) float32 cannot be assigned into inside"):
        Writes()(g.input("x", (3,)))
