"""``train.swa_utils`` against ``torch.optim.swa_utils``: the averaged weights after several updates
(SWA and EMA, per-array and per-list functions, ``use_buffers`` both ways, float64), SWALR's rates
(both strategies, several anneal lengths, several param groups), update_bn's running statistics, the
state_dict's keys (a torch checkpoint loads), and a compiled training step with an EMA model read by a
compiled forward that is never rebuilt; the argument errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.optim import swa_utils as tswa

import luminal as lm
from luminal import nn, train
from luminal.nn.parameter import Parameter
from luminal.train import swa_utils

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _net(lib):
    return lib.Sequential(lib.Linear(3, 5), lib.BatchNorm1d(5), lib.ReLU(), lib.Linear(5, 2))


def _pair(seed=0, double=False):
    """luminal's and torch's net with the same weights (and running statistics)."""
    lm.manual_seed(seed)
    ours, theirs = _net(nn), _net(torch.nn)
    if double:
        ours, theirs = ours.double(), theirs.double()
    theirs.load_state_dict({k: torch.tensor(np.array(v)) for k, v in ours.state_dict().items()})
    return ours, theirs


def _perturb(ours, theirs, rng):
    """New weights (and buffers) for both models, as a training step would make."""
    with torch.no_grad():
        for (_, p), (_, tp) in zip(list(ours.named_parameters()) + list(ours.named_buffers()),
                                   list(theirs.named_parameters()) + list(theirs.named_buffers())):
            if p.dtype.is_float:
                v = rng.normal(size=p.shape).astype(p.dtype.np)
            else:
                v = np.array(rng.integers(0, 50), np.int32)
            p.set(v)
            tp.copy_(torch.tensor(v))


def _assert_same(ours, theirs, rtol):
    sd, tsd = ours.state_dict(), theirs.state_dict()
    assert list(sd) == list(tsd)
    for k in sd:
        np.testing.assert_allclose(np.asarray(sd[k], np.float64), tsd[k].double().numpy(), rtol=rtol, atol=rtol,
                                   err_msg=k)


FNS = {
    "swa": ({}, {}),
    "ema": ({"multi_avg_fn": swa_utils.get_ema_multi_avg_fn(0.9)}, {"multi_avg_fn": tswa.get_ema_multi_avg_fn(0.9)}),
    "ema_avg_fn": ({"avg_fn": swa_utils.get_ema_avg_fn(0.75)}, {"avg_fn": tswa.get_ema_avg_fn(0.75)}),
    "swa_multi": ({"multi_avg_fn": swa_utils.get_swa_multi_avg_fn()}, {"multi_avg_fn": tswa.get_swa_multi_avg_fn()}),
    "swa_avg_fn": ({"avg_fn": swa_utils.get_swa_avg_fn()}, {"avg_fn": tswa.get_swa_avg_fn()}),
    "custom": ({"avg_fn": lambda a, c, n: 0.5 * a + 0.5 * c}, {"avg_fn": lambda a, c, n: 0.5 * a + 0.5 * c}),
}


@pytest.mark.parametrize("fn,use_buffers", [(fn, b) for fn in FNS for b in (False, True)
                                            if (fn, b) != ("swa_multi", True)])  # (torch's fails on the int count)
def test_averaged_weights_match_torch(fn, use_buffers):
    ours, theirs = _pair()
    kw, tkw = FNS[fn]
    avg = train.AveragedModel(ours, use_buffers=use_buffers, **kw)
    tavg = tswa.AveragedModel(theirs, use_buffers=use_buffers, **tkw)
    rng = np.random.default_rng(1)
    for k in range(5):
        _perturb(ours, theirs, rng)
        avg.update_parameters(ours), tavg.update_parameters(theirs)
        _assert_same(avg, tavg, 1e-6)
        assert int(avg.n_averaged.data) == k + 1
    assert list(avg.state_dict())[:2] == ["n_averaged", "module.0.weight"]


def test_averaged_float64_and_a_torch_checkpoint_loads():
    ours, theirs = _pair(double=True)
    avg, tavg = train.AveragedModel(ours), tswa.AveragedModel(theirs)
    rng = np.random.default_rng(2)
    for _ in range(4):
        _perturb(ours, theirs, rng)
        avg.update_parameters(ours), tavg.update_parameters(theirs)
    _assert_same(avg, tavg, 1e-12)
    fresh = train.AveragedModel(_pair()[0].double())
    fresh.load_state_dict(tavg.state_dict())  # torch's keys, its long n_averaged
    _assert_same(fresh, tavg, 0)
    assert int(fresh.n_averaged.data) == 4


def test_ema_of_a_compiled_training_step_read_by_a_compiled_forward():
    lm.manual_seed(4)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3))
    tmodel = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
    tmodel.load_state_dict({k: torch.tensor(np.array(v)) for k, v in model.state_dict().items()})
    ema = train.AveragedModel(model, multi_avg_fn=train.swa_utils.get_ema_multi_avg_fn(0.8))
    tema = tswa.AveragedModel(tmodel, multi_avg_fn=tswa.get_ema_multi_avg_fn(0.8))
    g = lm.Graph()
    x, y = g.input("x", ("B", 4)), g.input("y", ("B",), dtype=lm.int32)
    opt = train.SGD(model.parameters(), lr=0.1)
    step = train.compile_step(train.cross_entropy(model(x), y), opt, backend="cpu")
    topt = torch.optim.SGD(tmodel.parameters(), lr=0.1)
    ge = lm.Graph()
    ema.eval()
    forward = lm.compile(ema(ge.input("x", ("B", 4))), backend="cpu")
    rng = np.random.default_rng(5)
    xe = rng.normal(size=(5, 4)).astype(np.float32)
    for _ in range(6):
        xb, yb = rng.normal(size=(8, 4)).astype(np.float32), rng.integers(0, 3, 8).astype(np.int32)
        step(x=xb, y=yb)
        topt.zero_grad()
        torch.nn.functional.cross_entropy(tmodel(torch.tensor(xb)), torch.tensor(yb, dtype=torch.long)).backward()
        topt.step()
        ema.update_parameters(model), tema.update_parameters(tmodel)
        with torch.no_grad():
            np.testing.assert_allclose(forward(x=xe), tema(torch.tensor(xe)).numpy(), rtol=1e-4, atol=1e-5)
    _assert_same(ema, tema, 1e-4)


def test_update_bn_matches_torch():
    ours, theirs = _pair(seed=6)
    rng = np.random.default_rng(7)
    batches = [rng.normal(size=(n, 3)).astype(np.float32) for n in (8, 8, 5)]  # a ragged last batch
    loader = [(b, np.zeros(len(b))) for b in batches]
    ours.eval(), theirs.eval()
    ours[1].momentum, theirs[1].momentum = 0.3, 0.3
    swa_utils.update_bn(loader, ours)
    tswa.update_bn([(torch.tensor(b), 0) for b in batches], theirs)
    _assert_same(ours, theirs, 1e-5)
    assert int(ours[1].num_batches_tracked.data) == 3
    assert not ours.training and not ours[1].training and ours[1].momentum == 0.3  # restored
    avg, tavg = train.AveragedModel(ours), tswa.AveragedModel(theirs)  # through an AveragedModel, bare arrays
    swa_utils.update_bn(batches[::-1], avg)
    tswa.update_bn([torch.tensor(b) for b in batches[::-1]], tavg)
    _assert_same(avg, tavg, 1e-5)


def test_update_bn_without_batchnorm_changes_nothing():
    model = nn.Linear(3, 2)
    before = {k: np.array(v) for k, v in model.state_dict().items()}
    swa_utils.update_bn([np.ones((4, 3), np.float32)], model)
    for k, v in model.state_dict().items():
        np.testing.assert_array_equal(v, before[k])


def _opts(lrs):
    ours = train.SGD([{"params": [Parameter(np.zeros(2, np.float32))], "lr": lr} for lr in lrs])
    theirs = torch.optim.SGD([{"params": [torch.zeros(2, requires_grad=True)], "lr": lr} for lr in lrs])
    return ours, theirs


@pytest.mark.parametrize("strategy", ["cos", "linear"])
@pytest.mark.parametrize("anneal_epochs,swa_lr", [(10, 0.05), (3, [0.01, 0.2]), (1, 0.02), (0, 0.05)])
def test_swalr_matches_torch(strategy, anneal_epochs, swa_lr):
    o, t = _opts((0.1, 0.03))
    s = train.SWALR(o, swa_lr, anneal_epochs=anneal_epochs, anneal_strategy=strategy)
    ts = tswa.SWALR(t, swa_lr, anneal_epochs=anneal_epochs, anneal_strategy=strategy)
    for i in range(16):
        got, want = [g["lr"] for g in o.param_groups], [g["lr"] for g in t.param_groups]
        np.testing.assert_allclose(got, want, rtol=1e-12, err_msg=f"step {i}")
        assert [g["swa_lr"] for g in o.param_groups] == [g["swa_lr"] for g in t.param_groups]
        t.step()
        s.step(), ts.step()


def test_swalr_state_dict_resumes():
    o, t = _opts((0.1,))
    s, ts = train.SWALR(o, 0.01, anneal_epochs=6), tswa.SWALR(t, 0.01, anneal_epochs=6)
    for _ in range(3):
        t.step()
        s.step(), ts.step()
    o2, _ = _opts((0.1,))
    s2 = train.SWALR(o2, 0.01, anneal_epochs=6)
    o2.param_groups[0]["lr"] = o.param_groups[0]["lr"]
    s2.load_state_dict(s.state_dict())
    for _ in range(5):
        t.step()
        s2.step(), ts.step()
        np.testing.assert_allclose(o2.param_groups[0]["lr"], t.param_groups[0]["lr"], rtol=1e-12)


def test_errors():
    model = nn.Linear(2, 2)
    with pytest.raises(ValueError, match="^AveragedModel: give only one of avg_fn and multi_avg_fn"):
        train.AveragedModel(model, avg_fn=swa_utils.get_swa_avg_fn(), multi_avg_fn=swa_utils.get_swa_multi_avg_fn())
    with pytest.raises(TypeError, match="^AveragedModel: model must be an nn.Module, got ndarray"):
        train.AveragedModel(np.zeros(2))
    with pytest.raises(ValueError, match="AveragedModel: device 'cuda'"):
        train.AveragedModel(model, device="cuda")
    avg = train.AveragedModel(model)
    with pytest.raises(ValueError, match=r"^AveragedModel.update_parameters: the model has 1 parameters, the "
                                         r"averaged copy 2"):
        avg.update_parameters(nn.Linear(2, 2, bias=False))
    with pytest.raises(ValueError, match=r"^AveragedModel.update_parameters: weight has shape \(3, 2\) in the model"):
        avg.update_parameters(nn.Linear(2, 3))
    for f in (swa_utils.get_ema_avg_fn, swa_utils.get_ema_multi_avg_fn):
        with pytest.raises(ValueError, match=r"invalid decay value 1.5 provided; please provide a value in \[0, 1\]"):
            f(1.5)
    o, _ = _opts((0.1,))
    with pytest.raises(ValueError, match="^SWALR: anneal_strategy must be 'cos' or 'linear', got 'exp'"):
        train.SWALR(o, 0.01, anneal_strategy="exp")
    with pytest.raises(ValueError, match="^SWALR: anneal_epochs must be an integer >= 0, got -1"):
        train.SWALR(o, 0.01, anneal_epochs=-1)
    with pytest.raises(ValueError, match="^SWALR: swa_lr has 2 values for 1 param groups"):
        train.SWALR(o, [0.1, 0.2])
    with pytest.raises(ValueError, match="^update_bn: batch 0 is 0-d"):
        swa_utils.update_bn([np.float32(1.0)], nn.Sequential(nn.BatchNorm1d(1)))
