"""Review audit of ``train.swa_utils`` against ``torch.optim.swa_utils`` 2.13 as a torch user would use
it: SWALR after another scheduler (torch's pattern), built with ``last_epoch``, stepped with an epoch
and inside SequentialLR (torch counts ``step()`` calls); AveragedModel of tied, frozen, float64 and
bfloat16 weights, of a model that already built and compiled a graph, and its state_dict both ways;
update_bn over (x, y) batches with the model in eval mode."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from torch.optim import swa_utils as tswa

import luminal as lm
from luminal import nn, train
from luminal.nn.parameter import Parameter
from luminal.train import swa_utils

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _opts(lr=0.1):
    return (train.SGD([Parameter(np.zeros(2, np.float32))], lr=lr),
            torch.optim.SGD([torch.zeros(2, requires_grad=True)], lr=lr))


def _lr(opt):
    return opt.param_groups[0]["lr"]


def test_swalr_after_cosine_annealing_as_torch_pattern():
    o, t = _opts()
    sched, tsched = train.CosineAnnealingLR(o, T_max=20), torch.optim.lr_scheduler.CosineAnnealingLR(t, T_max=20)
    swa, tswa_s = train.SWALR(o, 0.05, anneal_epochs=4), tswa.SWALR(t, 0.05, anneal_epochs=4)
    for epoch in range(20):
        t.step()
        if epoch > 8:
            swa.step(), tswa_s.step()
        else:
            sched.step(), tsched.step()
        assert _lr(o) == pytest.approx(_lr(t), rel=1e-12), epoch


def test_swalr_counts_steps_not_last_epoch():
    """torch's anneal counts step() calls: built with last_epoch=5 it anneals from its first step (it
    jumped to swa_lr at once), and step(epoch) advances it by one whatever the epoch (a repeated epoch
    re-annealed from the current rate)."""
    o, t = _opts()
    for opt in (o, t):
        opt.param_groups[0]["initial_lr"] = 0.1
    swa, ts = train.SWALR(o, 0.05, anneal_epochs=4, last_epoch=5), tswa.SWALR(t, 0.05, anneal_epochs=4, last_epoch=5)
    for i in range(6):
        assert _lr(o) == pytest.approx(_lr(t), rel=1e-12), i
        t.step()
        swa.step(), ts.step()
    assert swa.last_epoch == ts.last_epoch == 12
    o, t = _opts()
    swa, ts = train.SWALR(o, 0.05, anneal_epochs=4), tswa.SWALR(t, 0.05, anneal_epochs=4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for e in (1, 2, 2, 3, 7):
            swa.step(e), ts.step(e)
            assert _lr(o) == pytest.approx(_lr(t), rel=1e-12), e
    o2, _ = _opts()
    resumed = train.SWALR(o2, 0.05, anneal_epochs=4)
    o2.param_groups[0]["lr"] = 0.1
    o, t = _opts()
    swa, ts = train.SWALR(o, 0.05, anneal_epochs=4), tswa.SWALR(t, 0.05, anneal_epochs=4)
    t.step()
    swa.step(), ts.step()
    o2.param_groups[0]["lr"] = _lr(o)
    resumed.load_state_dict(swa.state_dict())  # the step count travels with the state
    for _ in range(4):
        resumed.step(), ts.step()
        assert _lr(o2) == pytest.approx(_lr(t), rel=1e-12)


def test_swalr_in_sequential_lr():
    o, t = _opts()
    cos, tcos = train.CosineAnnealingLR(o, T_max=10), torch.optim.lr_scheduler.CosineAnnealingLR(t, T_max=10)
    swa, ts = train.SWALR(o, 0.05, anneal_epochs=3), tswa.SWALR(t, 0.05, anneal_epochs=3)
    seq = train.SequentialLR(o, [cos, swa], milestones=[5])
    tseq = torch.optim.lr_scheduler.SequentialLR(t, [tcos, ts], milestones=[5])
    for i in range(12):
        assert _lr(o) == pytest.approx(_lr(t), rel=1e-12), i
        t.step()
        seq.step(), tseq.step()


class Tied(nn.Module):
    def __init__(self, lib):
        super().__init__()
        self.a, self.b = lib.Linear(3, 3), lib.Linear(3, 3)
        self.b.weight = self.a.weight

    def forward(self, x):
        return self.b(self.a(x))


class TTied(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Linear(3, 3), torch.nn.Linear(3, 3)
        self.b.weight = self.a.weight


def _set_both(ours, theirs, rng, tdtype):
    """The same new values in both models' parameters (as torch's dtype rounds them)."""
    for p, tp in zip(ours.parameters(), theirs.parameters(), strict=True):
        v = torch.tensor(rng.normal(size=tuple(p.shape))).to(tdtype)
        with torch.no_grad():
            tp.copy_(v)
        p.set(v.double().numpy())


def _assert_close(avg, tavg, rtol, atol):
    sd, tsd = avg.state_dict(), tavg.state_dict()
    assert list(sd) == list(tsd)
    for k in sd:
        np.testing.assert_allclose(np.asarray(sd[k], np.float64), tsd[k].double().numpy(), rtol=rtol, atol=atol,
                                   err_msg=k)


def test_tied_weights_are_averaged_once_and_frozen_ones_too():
    ours, theirs = Tied(nn), TTied()
    ours.a.bias.requires_grad = False  # frozen: torch averages it as any parameter
    theirs.a.bias.requires_grad_(False)
    avg, tavg = train.AveragedModel(ours), tswa.AveragedModel(theirs)
    assert avg.module.a.weight is avg.module.b.weight  # the copy keeps the tie
    rng = np.random.default_rng(0)
    for _ in range(4):
        _set_both(ours, theirs, rng, torch.float32)
        avg.update_parameters(ours), tavg.update_parameters(theirs)
    _assert_close(avg, tavg, 1e-6, 1e-7)


@pytest.mark.parametrize("dtype,tdtype,tol", [(lm.float64, torch.float64, 1e-15), (lm.bfloat16, torch.bfloat16, 2e-2)])
def test_float64_and_bfloat16_averages(dtype, tdtype, tol):
    """float64 to rounding; bfloat16 to an ulp of the values (torch's CPU average rounds three times,
    luminal's lerp once)."""
    lm.manual_seed(1)
    ours, theirs = nn.Linear(6, 4).to(dtype), torch.nn.Linear(6, 4).to(tdtype)
    avg, tavg = train.AveragedModel(ours), tswa.AveragedModel(theirs)
    rng = np.random.default_rng(3)
    for _ in range(6):
        _set_both(ours, theirs, rng, tdtype)
        avg.update_parameters(ours), tavg.update_parameters(theirs)
    assert avg.module.weight.dtype is dtype
    _assert_close(avg, tavg, tol, tol)


def test_averaged_copy_of_a_model_that_built_a_graph_and_state_dict_both_ways():
    lm.manual_seed(2)
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    g = lm.Graph()
    forward = lm.compile(model(g.input("x", ("B", 3))), backend="cpu")
    xv = np.random.default_rng(0).normal(size=(5, 3)).astype(np.float32)
    before = forward(x=xv)
    avg = train.AveragedModel(model)
    avg.update_parameters(model)
    avg.module[0].weight.set(np.zeros((4, 3), np.float32))  # the copy's arrays are its own
    np.testing.assert_array_equal(forward(x=xv), before)
    assert np.abs(model[0].weight.data).sum() > 0
    tavg = tswa.AveragedModel(torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4)))
    tavg.load_state_dict({k: torch.tensor(np.asarray(v)) for k, v in avg.state_dict().items()})
    assert tavg.n_averaged.dtype == torch.int64 and int(tavg.n_averaged) == 1
    back = train.AveragedModel(nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4)))
    back.load_state_dict(tavg.state_dict())
    assert back.n_averaged.dtype is lm.int32 and int(back.n_averaged.data) == 1
    _assert_close(back, tavg, 0, 0)


def test_update_bn_with_xy_batches_and_the_model_in_eval_mode():
    lm.manual_seed(3)
    ours = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.ReLU(), nn.Linear(4, 2), nn.BatchNorm1d(2))
    theirs = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4), torch.nn.ReLU(),
                                 torch.nn.Linear(4, 2), torch.nn.BatchNorm1d(2))
    theirs.load_state_dict({k: torch.tensor(np.array(v)) for k, v in ours.state_dict().items()})
    ours.eval(), theirs.eval()
    rng = np.random.default_rng(4)
    batches = [(rng.normal(size=(n, 3)).astype(np.float32), rng.integers(0, 2, n)) for n in (6, 6, 3)]
    swa_utils.update_bn(batches, ours)
    tswa.update_bn([(torch.tensor(x), torch.tensor(y)) for x, y in batches], theirs)
    assert not ours.training and not any(m.training for m in ours) and not theirs.training
    sd, tsd = ours.state_dict(), theirs.state_dict()
    for k in tsd:
        np.testing.assert_allclose(np.asarray(sd[k], np.float64), tsd[k].double().numpy(), rtol=1e-5, atol=1e-6,
                                   err_msg=k)
