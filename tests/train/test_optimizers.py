"""Optimizers against torch.optim (single-tensor CPU path): the update graph alone, fed gradients
directly (no autograd), compiled with the parameters and states as persistent updates."""

from __future__ import annotations

import numpy as np
import optimizer_parity
import pytest
import torch
from optimizer_parity import UpdateStep

from luminal.nn.parameter import Parameter
from luminal.train.optim.adagrad import Adagrad
from luminal.train.optim.adam import Adam, AdamW
from luminal.train.optim.rmsprop import RMSprop
from luminal.train.optim.sgd import SGD
from luminal.train.schedulers import OneCycleLR

OURS = {"SGD": SGD, "Adam": Adam, "AdamW": AdamW, "RMSprop": RMSprop, "Adagrad": Adagrad}
THEIRS = {"SGD": torch.optim.SGD, "Adam": torch.optim.Adam, "AdamW": torch.optim.AdamW,
          "RMSprop": torch.optim.RMSprop, "Adagrad": torch.optim.Adagrad}


def run_both(name, kwargs, **kw):
    """``optimizer_parity.run_both`` of luminal's and torch's ``name`` (a group without momentum keeps an
    unused momentum buffer torch has not: states torch lacks are skipped)."""
    return optimizer_parity.run_both(OURS[name], THEIRS[name], kwargs, every_state=False, **kw)


CASES = [
    ("SGD", {}),
    ("SGD", {"lr": 0.1, "weight_decay": 0.1}),
    ("SGD", {"lr": 0.1, "momentum": 0.9}),
    ("SGD", {"lr": 0.1, "momentum": 0.9, "dampening": 0.3, "weight_decay": 0.05}),
    ("SGD", {"lr": 0.1, "momentum": 0.9, "nesterov": True}),
    ("SGD", {"lr": 0.1, "momentum": 0.8, "nesterov": True, "weight_decay": 0.01, "maximize": True}),
    ("Adam", {}),
    ("Adam", {"lr": 0.01, "betas": (0.8, 0.99), "eps": 1e-6}),
    ("Adam", {"lr": 0.01, "weight_decay": 0.1}),
    ("Adam", {"lr": 0.01, "amsgrad": True}),
    ("Adam", {"lr": 0.01, "amsgrad": True, "weight_decay": 0.1, "maximize": True}),
    ("Adam", {"lr": 0.01, "weight_decay": 0.1, "decoupled_weight_decay": True}),
    ("AdamW", {}),
    ("AdamW", {"lr": 0.01, "weight_decay": 0.3, "amsgrad": True}),
    ("AdamW", {"lr": 0.01, "weight_decay": 0.0, "maximize": True}),
    ("RMSprop", {}),
    ("RMSprop", {"lr": 0.01, "alpha": 0.9, "weight_decay": 0.1}),
    ("RMSprop", {"lr": 0.01, "centered": True}),
    ("RMSprop", {"lr": 0.01, "momentum": 0.9}),
    ("RMSprop", {"lr": 0.01, "momentum": 0.9, "centered": True, "weight_decay": 0.1, "maximize": True}),
    ("Adagrad", {}),
    ("Adagrad", {"lr": 0.1, "lr_decay": 0.1}),
    ("Adagrad", {"lr": 0.1, "initial_accumulator_value": 0.5, "weight_decay": 0.1}),
    ("Adagrad", {"lr": 0.1, "lr_decay": 0.05, "initial_accumulator_value": 0.2, "eps": 1e-3, "maximize": True}),
]


@pytest.mark.parametrize("name,kwargs", CASES, ids=[f"{n}-{k}" for n, k in CASES])
def test_one_step_matches_torch(name, kwargs):
    run_both(name, kwargs, steps=1)


@pytest.mark.parametrize("name,kwargs", CASES, ids=[f"{n}-{k}" for n, k in CASES])
def test_five_steps_match_torch(name, kwargs):
    run_both(name, kwargs, steps=5, seed=1)


@pytest.mark.parametrize("name,group_opts", [
    ("SGD", [{"lr": 0.2, "momentum": 0.9, "nesterov": True}, {"lr": 0.05}]),
    ("Adam", [{"lr": 0.02, "amsgrad": True}, {"betas": (0.5, 0.9), "weight_decay": 0.1}]),
    ("RMSprop", [{"centered": True}, {"momentum": 0.5, "lr": 0.001}]),
    ("Adagrad", [{"initial_accumulator_value": 1.0}, {"lr_decay": 0.2}]),
])
def test_param_groups_match_torch(name, group_opts):
    run_both(name, {"lr": 0.01}, steps=3, group_opts=group_opts, seed=2)


def test_learning_rate_changes_without_recompiling():
    """A scheduler (here OneCycleLR, which also cycles Adam's beta1) changes the groups between
    runs of one compiled program; the update follows, as torch's does."""
    def schedulers(opt, topt):
        return [OneCycleLR(opt, max_lr=0.05, total_steps=10),
                torch.optim.lr_scheduler.OneCycleLR(topt, max_lr=0.05, total_steps=10)]

    opt, topt = run_both("Adam", {"lr": 0.01}, steps=6, seed=3, schedulers=schedulers)
    assert opt.param_groups[0]["lr"] == topt.param_groups[0]["lr"]
    assert opt.param_groups[0]["betas"] == topt.param_groups[0]["betas"]


def test_state_names_follow_options():
    p = [Parameter(np.zeros(3, np.float32))]
    assert SGD(p).state_names == ()
    assert SGD(p, momentum=0.9).state_names == ("momentum_buffer",)
    assert Adam(p).state_names == ("exp_avg", "exp_avg_sq")
    assert Adam(p, amsgrad=True).state_names == ("exp_avg", "exp_avg_sq", "max_exp_avg_sq")
    assert RMSprop(p).state_names == ("square_avg",)
    assert RMSprop(p, momentum=0.1, centered=True).state_names == ("square_avg", "momentum_buffer", "grad_avg")
    assert Adagrad(p).state_names == ("sum",)
    np.testing.assert_array_equal(Adagrad(p, initial_accumulator_value=0.25).state_for(p[0])["sum"].data,
                                  np.full(3, 0.25, np.float32))


def test_state_dict_round_trip_resumes():
    rng = np.random.default_rng(4)
    x = rng.standard_normal(6).astype(np.float32)
    grads = [rng.standard_normal(6).astype(np.float32) for _ in range(4)]

    def make(data):
        p = Parameter(data.copy(), name="w")
        opt = Adam([p], lr=0.01, amsgrad=True)
        return p, opt, UpdateStep(opt)

    p, opt, step = make(x)
    for g in grads:
        step([g])
    p2, opt2, step2 = make(x)
    p3, opt3, step3 = make(x)
    for g in grads[:2]:
        step2([g])
    sd = opt2.state_dict()
    p3.set(p2.data)
    opt3.load_state_dict(sd)
    for g in grads[2:]:
        step3([g])
    np.testing.assert_array_equal(p3.data, p.data)


@pytest.mark.parametrize("make,msg", [
    (lambda p: SGD(p, lr=-0.1), "SGD: invalid lr"),
    (lambda p: SGD(p, momentum=-1), "SGD: invalid momentum"),
    (lambda p: SGD(p, nesterov=True), "SGD: nesterov=True needs momentum > 0"),
    (lambda p: SGD(p, momentum=0.9, dampening=0.1, nesterov=True), "dampening = 0"),
    (lambda p: SGD([{"params": p, "lr": -1.0}]), "SGD: invalid lr"),
    (lambda p: Adam(p, betas=(1.0, 0.999)), r"Adam: invalid betas\[0\]"),
    (lambda p: Adam(p, betas=(0.9, -0.1)), r"Adam: invalid betas\[1\]"),
    (lambda p: AdamW(p, eps=-1e-8), "AdamW: invalid eps"),
    (lambda p: AdamW(p, weight_decay=-1), "AdamW: invalid weight_decay"),
    (lambda p: RMSprop(p, alpha=-0.5), "RMSprop: invalid alpha"),
    (lambda p: Adagrad(p, lr_decay=-1), "Adagrad: invalid lr_decay"),
    (lambda p: Adagrad(p, initial_accumulator_value=-1), "Adagrad: invalid initial_accumulator_value"),
])
def test_invalid_arguments(make, msg):
    with pytest.raises(ValueError, match=msg):
        make([Parameter(np.zeros(2, np.float32))])


def test_defaults_match_torch():
    import inspect

    for name, ours in OURS.items():
        theirs = inspect.signature(THEIRS[name].__init__).parameters
        for k, v in inspect.signature(ours.__init__).parameters.items():
            if k not in ("self", "params"):
                assert v.default == theirs[k].default, (name, k)


@pytest.mark.parametrize("name", ["SGD", "Adam", "AdamW", "RMSprop", "Adagrad"])
def test_torchs_kernel_flags_are_taken_and_change_nothing(name):
    """A porting script's ``foreach=False`` or ``fused=True`` was a TypeError (unexpected keyword); they pick
    torch's kernels, and luminal's update is one compiled program anyway. differentiable=True is refused."""
    flags = {"SGD": {"fused": None}, "Adagrad": {"fused": None}, "RMSprop": {"capturable": False}}.get(
        name, {"fused": None, "capturable": False})  # (those torch's has; run_both gives torch foreach=False)
    run_both(name, {"lr": 0.01, **flags}, steps=2)
    OURS[name]([Parameter(np.ones(2, np.float32))], foreach=True, **flags)
    with pytest.raises(ValueError, match=f"^{name}: differentiable=True .* is not supported"):
        OURS[name]([Parameter(np.ones(2, np.float32))], differentiable=True)
    with pytest.raises(TypeError, match=f"^{name}: foreach must be None, True or False, got 'yes'"):
        OURS[name]([Parameter(np.ones(2, np.float32))], foreach="yes")
