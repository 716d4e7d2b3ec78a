"""torch's deprecated ``scheduler.step(epoch)`` against torch.optim.lr_scheduler: for every scheduler,
the learning-rate (and cycled momentum) sequence with epochs given in order, skipping, going back,
and mixed with plain ``step()``s (which go on from the rates a jump left, by the recursive form), to
1e-12 relative; torch's deprecation UserWarning, pointing at the caller; CosineAnnealingWarmRestarts'
fractional epochs (no warning, as torch's); ReduceLROnPlateau's ``step(metrics, epoch)``; and the
epochs and schedulers that are refused."""

from __future__ import annotations

import copy
import json
import warnings

import numpy as np
import pytest
import torch
from test_schedulers import OPTS, assert_close, make_optimizers, snapshot  # noqa: F401 (tests/train's helpers)

from luminal.train import ChainedScheduler
from luminal.train import schedulers as S

CASES = [  # (name, kwargs, optimizer, optimizer kwargs)
    ("StepLR", {"step_size": 3, "gamma": 0.5}, "SGD", {}),
    ("MultiStepLR", {"milestones": [2, 5, 5, 9], "gamma": 0.3}, "Adam", {}),
    ("ExponentialLR", {"gamma": 0.9}, "SGD", {}),
    ("CosineAnnealingLR", {"T_max": 6, "eta_min": 0.001}, "SGD", {}),
    ("LambdaLR", {"lr_lambda": [lambda e: 1 / (1 + e), lambda e: 0.95**e]}, "SGD", {}),
    ("MultiplicativeLR", {"lr_lambda": lambda e: 0.9 if e % 2 else 0.8}, "AdamW", {}),
    ("LinearLR", {"start_factor": 0.25, "end_factor": 0.75, "total_iters": 6}, "SGD", {}),
    ("ConstantLR", {"factor": 0.5, "total_iters": 4}, "SGD", {}),
    ("PolynomialLR", {"total_iters": 6, "power": 2.0}, "Adam", {}),
    ("OneCycleLR", {"max_lr": [0.5, 0.2], "total_steps": 20}, "SGD", {"momentum": 0.9}),
    ("OneCycleLR", {"max_lr": 0.5, "total_steps": 20, "three_phase": True, "anneal_strategy": "linear"}, "Adam",
     {}),
    ("CyclicLR", {"base_lr": 0.01, "max_lr": 0.1, "step_size_up": 3, "mode": "triangular2"}, "SGD",
     {"momentum": 0.9}),
    ("CyclicLR", {"base_lr": 0.01, "max_lr": 0.1, "step_size_up": 2, "step_size_down": 5, "mode": "exp_range",
                  "gamma": 0.9}, "Adam", {}),
]
IDS = [f"{c[0]}-{i}" for i, c in enumerate(CASES)]

# None: a plain step(); an int: step(epoch)
ORDERS = {
    "in_order": list(range(1, 14)),
    "skipping": [2, 5, 6, 11, 12, 15],
    "backwards": [12, 9, 4, 3, 0, 7, 1],
    "mixed": [None, 7, None, None, 2, None, 0, None, None, 13, None, 4],
    "repeated": [3, 3, None, 3, 6, 6],
}


def build(name, kwargs, opt_name, opt_kw):
    o, t = make_optimizers(opt_name, **opt_kw)
    return o, getattr(S, name)(o, **copy.deepcopy(kwargs)), t, getattr(torch.optim.lr_scheduler, name)(t, **kwargs)


def torch_step(ts, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (its own deprecation warning: ours is checked separately)
        ts.step(*args)


def our_step(s, *args):
    """``s.step(*args)``; one warning when an epoch is given (torch's deprecation), none otherwise."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        s.step(*args)
    if args and args[-1] is not None:
        assert [w.category for w in caught] == [UserWarning], caught
        assert "epoch argument is deprecated" in str(caught[0].message)
        assert caught[0].filename == __file__  # stacklevel: the warning names the caller's line
    else:
        assert caught == [], [str(w.message) for w in caught]


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("name,kwargs,opt_name,opt_kw", CASES, ids=IDS)
def test_step_epoch_matches_torch(name, kwargs, opt_name, opt_kw, order):
    o, s, t, ts = build(name, kwargs, opt_name, opt_kw)
    for epoch in ORDERS[order]:
        t.step()
        args = () if epoch is None else (epoch,)
        our_step(s, *args)
        torch_step(ts, *args)
        what = f"{name} {order}, step({'' if epoch is None else epoch})"
        assert s.last_epoch == ts.last_epoch, what
        assert_close(snapshot(o), snapshot(t), what)
        assert_close(s.get_last_lr(), ts.get_last_lr(), f"{what} get_last_lr")
    sd = json.loads(json.dumps(s.state_dict()))  # a jump leaves a state that saves and loads
    s.load_state_dict(sd)
    assert s.state_dict() == sd


def test_step_epoch_accepts_numpy_integers():
    o, s, t, ts = build("StepLR", {"step_size": 2}, "SGD", {})
    with pytest.warns(UserWarning, match="deprecated"):
        s.step(np.int64(5))
    torch_step(ts, 5)
    assert type(s.last_epoch) is int and s.last_epoch == 5
    assert_close(snapshot(o), snapshot(t), "StepLR step(np.int64(5))")


@pytest.mark.parametrize("epoch", [-1, 2.5, True, "3", [3]])
def test_step_epoch_refuses_non_epochs(epoch):
    """An epoch must be an integer >= 0 (torch stores anything; a float or negative last_epoch would
    leave a state that cannot load); a refused step changes nothing and warns nothing."""
    o, s, _, _ = build("ExponentialLR", {"gamma": 0.5}, "SGD", {})
    before, lrs = s.last_epoch, snapshot(o)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError, match=r"ExponentialLR\.step: epoch must be an integer >= 0, got"):
            s.step(epoch)
    assert s.last_epoch == before and snapshot(o) == lrs


def test_one_cycle_past_total_steps_is_refused_and_changes_nothing():
    o, s, t, ts = build("OneCycleLR", {"max_lr": 0.5, "total_steps": 10}, "SGD", {"momentum": 0.9})
    with pytest.warns(UserWarning, match="deprecated"):
        s.step(4)
    torch_step(ts, 4)
    with pytest.raises(ValueError, match="total_steps is 10"), pytest.warns(UserWarning):
        s.step(11)
    with pytest.raises(ValueError):
        torch_step(ts, 11)
    assert s.last_epoch == 4  # (torch's is left at 11)
    s.step(), torch_step(ts, 5)
    assert_close(snapshot(o), snapshot(t), "OneCycleLR after a refused step(11)")


# ------------------------------------------------------------------------------ CosineAnnealingWarmRestarts
WARM = {
    "fractional": [0.5, 1.25, 2.999, 3, 3.5, 7.25, 8.0],
    "backwards": [20, 9.5, 4.2, 0, 1.75, 0.25],
    "mixed": [None, None, 5.5, None, None, 2, None, 30, None, 0.0],
}


@pytest.mark.parametrize("order", WARM)
@pytest.mark.parametrize("t_mult", [1, 2, 3])
def test_warm_restarts_step_epoch_matches_torch(t_mult, order):
    """Its own epoch semantics (T_cur from a fractional epoch, restarts at T_0 * T_mult**n), and no
    warning: a fractional epoch is this scheduler's API, as torch's."""
    o, t = make_optimizers("SGD", momentum=0.9)
    s = S.CosineAnnealingWarmRestarts(o, T_0=3, T_mult=t_mult, eta_min=0.001)
    ts = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(t, T_0=3, T_mult=t_mult, eta_min=0.001)
    for epoch in WARM[order]:
        t.step()
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            s.step(epoch)
        torch_step(ts, epoch)
        what = f"T_mult={t_mult} {order} step({epoch})"
        assert (s.last_epoch, s.T_i) == (ts.last_epoch, ts.T_i), what
        assert abs(s.T_cur - ts.T_cur) <= 1e-12 * max(1, abs(ts.T_cur)), what
        assert_close(snapshot(o), snapshot(t), what)


@pytest.mark.parametrize("epoch", [-0.5, float("inf"), float("nan")])
def test_warm_restarts_refuses_bad_epochs(epoch):
    o, _ = make_optimizers("SGD")
    s = S.CosineAnnealingWarmRestarts(o, T_0=3)
    with pytest.raises(ValueError, match=r"CosineAnnealingWarmRestarts\.step: epoch must be a number >= 0"):
        s.step(epoch)
    assert s.last_epoch == 0


# --------------------------------------------------------------------------------------- ReduceLROnPlateau
METRICS = [5, 5, 5, 4, 4, 4, 4, 4, 3, 3, 3, 3, 3, 3]


@pytest.mark.parametrize("order", ["in_order", "skipping", "backwards", "mixed"])
def test_plateau_step_metrics_epoch_matches_torch(order):
    """``step(metrics, epoch)`` records ``epoch`` as last_epoch (warning); the plateau logic is the same."""
    epochs = (ORDERS[order] * 2)[: len(METRICS)]
    o, t = make_optimizers("SGD")
    s = S.ReduceLROnPlateau(o, patience=1, cooldown=1, factor=0.5)
    ts = torch.optim.lr_scheduler.ReduceLROnPlateau(t, patience=1, cooldown=1, factor=0.5)
    for metric, epoch in zip(METRICS, epochs):
        our_step(s, metric, epoch)
        torch_step(ts, metric, epoch)
        what = f"ReduceLROnPlateau {order} step({metric}, {epoch})"
        assert (s.last_epoch, s.num_bad_epochs, s.cooldown_counter) == \
            (ts.last_epoch, ts.num_bad_epochs, ts.cooldown_counter), what
        assert_close(snapshot(o), snapshot(t), what)
    sd = json.loads(json.dumps(s.state_dict()))
    s.load_state_dict(sd)


def test_plateau_refuses_bad_epoch():
    o, _ = make_optimizers("SGD")
    s = S.ReduceLROnPlateau(o)
    with pytest.raises(ValueError, match=r"ReduceLROnPlateau\.step: epoch must be an integer >= 0, got 1\.5"):
        s.step(1.0, 1.5)
    assert s.last_epoch == 0 and s.num_bad_epochs == 0


# ------------------------------------------------------------------------ schedulers of schedulers: refused
def test_sequential_and_chained_take_no_epoch_as_torch():
    """torch's SequentialLR.step and ChainedScheduler.step take no epoch (a TypeError); so do ours, saying so."""
    o, t = make_optimizers("SGD")
    seq = S.SequentialLR(o, [S.ConstantLR(o, 0.5, 2), S.ExponentialLR(o, 0.9)], milestones=[2])
    o2, t2 = make_optimizers("SGD")
    chain = ChainedScheduler([S.ConstantLR(o2, 0.5, 2), S.ExponentialLR(o2, 0.9)])
    tseq = torch.optim.lr_scheduler.SequentialLR(
        t, [torch.optim.lr_scheduler.ConstantLR(t, 0.5, 2), torch.optim.lr_scheduler.ExponentialLR(t, 0.9)], [2])
    tchain = torch.optim.lr_scheduler.ChainedScheduler(
        [torch.optim.lr_scheduler.ConstantLR(t2, 0.5, 2), torch.optim.lr_scheduler.ExponentialLR(t2, 0.9)])
    for ours, theirs in ((seq, tseq), (chain, tchain)):
        name = type(ours).__name__
        before = ours.state_dict()
        with pytest.raises(TypeError, match=rf"{name}\.step: takes no epoch \(got 3\)"):
            ours.step(3)
        with pytest.raises(TypeError):
            theirs.step(3)
        assert ours.state_dict() == before
