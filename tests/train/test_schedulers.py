"""Schedulers against torch.optim.lr_scheduler: the learning-rate (and OneCycleLR momentum/beta1)
sequences, to 1e-12 relative, and resuming from a (JSON round-tripped) state_dict."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest
import torch

from luminal.nn.parameter import Parameter
from luminal.train import schedulers as ours_sched
from luminal.train.optim.adagrad import Adagrad
from luminal.train.optim.adam import Adam, AdamW
from luminal.train.optim.rmsprop import RMSprop
from luminal.train.optim.sgd import SGD

OPTS = {"SGD": (SGD, torch.optim.SGD), "Adam": (Adam, torch.optim.Adam), "AdamW": (AdamW, torch.optim.AdamW),
        "RMSprop": (RMSprop, torch.optim.RMSprop), "Adagrad": (Adagrad, torch.optim.Adagrad)}


def make_optimizers(opt_name="SGD", lrs=(0.1, 0.03), **kw):
    """The same optimizer, luminal's and torch's, with one dummy parameter per group (one group per lr)."""
    ours, theirs = OPTS[opt_name]
    o = ours([{"params": [Parameter(np.zeros(2, np.float32))], "lr": lr} for lr in lrs], **kw)
    t = theirs([{"params": [torch.zeros(2, requires_grad=True)], "lr": lr} for lr in lrs], **kw)
    return o, t


def snapshot(opt) -> list:
    """What a schedule controls, per group: lr, and momentum or beta1 when present."""
    out = []
    for g in opt.param_groups:
        out.append(float(g["lr"]))
        if "momentum" in g:
            out.append(float(g["momentum"]))
        if "betas" in g:
            out.append(float(g["betas"][0]))
    return out


def assert_close(a, b, what):
    assert len(a) == len(b), what
    for x, y in zip(a, b):
        assert abs(x - y) <= 1e-12 * abs(y), f"{what}: {a} vs {b}"


CASES = [
    ("StepLR", {"step_size": 7, "gamma": 0.5}, "SGD", {}),
    ("StepLR", {"step_size": 1}, "Adam", {}),
    ("MultiStepLR", {"milestones": [30, 5, 17, 17], "gamma": 0.3}, "SGD", {}),
    ("ExponentialLR", {"gamma": 0.93}, "RMSprop", {}),
    ("CosineAnnealingLR", {"T_max": 10}, "SGD", {}),
    ("CosineAnnealingLR", {"T_max": 17, "eta_min": 1e-3}, "Adam", {}),
    ("LinearLR", {}, "SGD", {}),
    ("LinearLR", {"start_factor": 0.1, "end_factor": 0.7, "total_iters": 20}, "Adagrad", {}),
    ("LinearLR", {"start_factor": 1.0, "end_factor": 0.0, "total_iters": 40}, "SGD", {}),
    ("OneCycleLR", {"max_lr": 0.5, "total_steps": 50}, "SGD", {"momentum": 0.9}),
    ("OneCycleLR", {"max_lr": [0.5, 0.2], "epochs": 5, "steps_per_epoch": 10, "pct_start": 0.25,
                    "anneal_strategy": "linear", "div_factor": 10.0, "final_div_factor": 100.0}, "Adam", {}),
    ("OneCycleLR", {"max_lr": 0.01, "total_steps": 50, "three_phase": True, "base_momentum": [0.8, 0.7],
                    "max_momentum": 0.9}, "AdamW", {}),
    ("OneCycleLR", {"max_lr": 0.1, "total_steps": 60, "cycle_momentum": False}, "Adagrad", {}),
    ("OneCycleLR", {"max_lr": 0.1, "total_steps": 50, "three_phase": True}, "RMSprop", {"momentum": 0.5}),
    ("LambdaLR", {"lr_lambda": lambda e: 0.9**e}, "SGD", {}),
    ("LambdaLR", {"lr_lambda": [lambda e: min(1.0, (e + 1) / 7), lambda e: 1 / (1 + 0.3 * e)]}, "Adam", {}),
    ("CosineAnnealingWarmRestarts", {"T_0": 7}, "SGD", {}),
    ("CosineAnnealingWarmRestarts", {"T_0": 3, "T_mult": 2, "eta_min": 1e-3}, "AdamW", {}),
]
IDS = [f"{c[0]}-{c[2]}-{i}" for i, c in enumerate(CASES)]


def build(name, kwargs, opt_name, opt_kw):
    o, t = make_optimizers(opt_name, **opt_kw)
    return o, getattr(ours_sched, name)(o, **kwargs), t, getattr(torch.optim.lr_scheduler, name)(t, **kwargs)


def steps_of(kwargs):
    return kwargs.get("total_steps") or kwargs.get("epochs", 0) * kwargs.get("steps_per_epoch", 0) or 60


@pytest.mark.parametrize("name,kwargs,opt_name,opt_kw", CASES, ids=IDS)
def test_sequence_matches_torch(name, kwargs, opt_name, opt_kw):
    o, s, t, ts = build(name, kwargs, opt_name, opt_kw)
    assert s.last_epoch == ts.last_epoch == 0
    for i in range(steps_of(kwargs)):  # OneCycleLR: every step up to total_steps - 1
        assert_close(snapshot(o), snapshot(t), f"{name} epoch {i}")
        assert_close(s.get_last_lr(), ts.get_last_lr(), f"{name} get_last_lr epoch {i}")
        t.step()
        if i < steps_of(kwargs) - 1:
            s.step(), ts.step()
    assert s.last_epoch == ts.last_epoch


@pytest.mark.parametrize("name,kwargs,opt_name,opt_kw", CASES, ids=IDS)
def test_state_dict_resumes(name, kwargs, opt_name, opt_kw):
    n = steps_of(kwargs)
    o, s, t, ts = build(name, kwargs, opt_name, opt_kw)
    for _ in range(n // 2):
        t.step()
        s.step(), ts.step()
    for _, p in o.params():
        o.state_for(p)  # as a compiled step would have (the base saves only states that exist)
    opt_sd = copy.deepcopy(o.state_dict())
    sched_sd = json.loads(json.dumps(s.state_dict()))  # plain JSON
    o2, s2, _, _ = build(name, kwargs, opt_name, opt_kw)
    s2.step(), s2.step()  # drift away: the load must restore everything
    o2.load_state_dict(opt_sd)
    s2.load_state_dict(sched_sd)
    assert s2.last_epoch == ts.last_epoch
    for i in range(n // 2, n - 1):
        t.step()
        s2.step(), ts.step()
        assert_close(snapshot(o2), snapshot(t), f"{name} resumed, epoch {i + 1}")
        assert_close(s2.get_last_lr(), ts.get_last_lr(), f"{name} resumed get_last_lr, epoch {i + 1}")


def test_cosine_three_cycles_against_closed_form():
    o, t = make_optimizers("SGD", lrs=(0.1,))
    s = ours_sched.CosineAnnealingLR(o, T_max=8, eta_min=0.01)
    for e in range(1, 3 * 2 * 8 + 1):
        s.step()
        want = 0.01 + (0.1 - 0.01) * (1 + np.cos(np.pi * e / 8)) / 2
        assert abs(s.get_last_lr()[0] - want) <= 1e-12 * want


def test_one_cycle_overrun_and_validation():
    o, _ = make_optimizers("SGD", momentum=0.9)
    s = ours_sched.OneCycleLR(o, max_lr=0.1, total_steps=3)
    s.step(), s.step(), s.step()
    with pytest.raises(ValueError, match="total_steps is 3"):
        s.step()
    with pytest.raises(ValueError, match="total_steps, or both epochs and steps_per_epoch"):
        ours_sched.OneCycleLR(o, max_lr=0.1)
    with pytest.raises(ValueError, match="anneal_strategy"):
        ours_sched.OneCycleLR(o, max_lr=0.1, total_steps=10, anneal_strategy="exp")
    with pytest.raises(ValueError, match="max_lr has 3 values for 2 param groups"):
        ours_sched.OneCycleLR(o, max_lr=[0.1, 0.2, 0.3], total_steps=10)
    o, _ = make_optimizers("Adagrad")
    with pytest.raises(ValueError, match="momentum or betas"):
        ours_sched.OneCycleLR(o, max_lr=0.1, total_steps=10)
    with pytest.raises(ValueError, match="start_factor"):
        ours_sched.LinearLR(o, start_factor=0)
    with pytest.raises(ValueError, match="step_size"):
        ours_sched.StepLR(o, step_size=0)


def test_resume_needs_initial_lr():
    p = Parameter(np.zeros(2, np.float32))
    o = SGD([p], lr=0.1)  # as torch: initial_lr is set by the first scheduler, not by the optimizer
    assert "initial_lr" not in o.param_groups[0]
    with pytest.raises(KeyError, match="initial_lr"):
        ours_sched.StepLR(o, step_size=2, last_epoch=4)


class Warmup:
    """A callable object as lr_lambda: its attributes are saved in ``state_dict`` (torch's rule)."""

    def __init__(self, n):
        self.n = n

    def __call__(self, epoch):
        return min(1.0, (epoch + 1) / self.n)


def test_lambda_lr_saves_callable_objects_not_functions():
    o, _ = make_optimizers("SGD")
    s = ours_sched.LambdaLR(o, [Warmup(4), lambda e: 0.5**e])
    for _ in range(3):
        s.step()
    sd = json.loads(json.dumps(s.state_dict()))
    assert sd["lr_lambdas"] == [{"n": 4}, None]
    o2, _ = make_optimizers("SGD")
    w = Warmup(99)
    s2 = ours_sched.LambdaLR(o2, [w, lambda e: 0.5**e])
    o2.load_state_dict(copy.deepcopy(o.state_dict()))
    s2.load_state_dict(sd)
    assert w.n == 4 and s2.last_epoch == 3
    s.step(), s2.step()
    assert_close(s2.get_last_lr(), s.get_last_lr(), "LambdaLR resumed")
    with pytest.raises(ValueError, match="expected 2 lr_lambdas"):
        ours_sched.LambdaLR(o, [Warmup(3)])
    with pytest.raises(TypeError, match="lr_lambda must be a function"):
        ours_sched.LambdaLR(o, 0.5)


SEQUENTIAL = {  # name -> (schedulers built on a module's classes and an optimizer, milestones)
    "warmup-cosine": (lambda m, o: [m.LinearLR(o, start_factor=0.1, total_iters=5), m.CosineAnnealingLR(o, T_max=20)],
                      [5]),
    "three": (lambda m, o: [m.ExponentialLR(o, gamma=0.9), m.StepLR(o, step_size=3, gamma=0.5),
                            m.LambdaLR(o, lambda e: 1 / (1 + e))], [4, 10]),
    "restarts": (lambda m, o: [m.LinearLR(o, start_factor=0.5, total_iters=3),
                               m.CosineAnnealingWarmRestarts(o, T_0=4, T_mult=2, eta_min=0.001)], [3]),
    "multistep": (lambda m, o: [m.MultiStepLR(o, milestones=[0, 2], gamma=0.5), m.ExponentialLR(o, gamma=0.8)], [6]),
    "milestone-0": (lambda m, o: [m.StepLR(o, step_size=2), m.ExponentialLR(o, gamma=0.7)], [0]),
}


def build_sequential(case, opt_name="SGD"):
    make, milestones = SEQUENTIAL[case]
    o, t = make_optimizers(opt_name)
    tm = torch.optim.lr_scheduler
    return (o, ours_sched.SequentialLR(o, make(ours_sched, o), milestones),
            t, tm.SequentialLR(t, make(tm, t), milestones))


@pytest.mark.parametrize("case", list(SEQUENTIAL))
def test_sequential_lr_matches_torch(case):
    o, s, t, ts = build_sequential(case, "Adam")
    for i in range(30):
        assert_close(snapshot(o), snapshot(t), f"SequentialLR {case} epoch {i}")
        assert_close(s.get_last_lr(), ts.get_last_lr(), f"SequentialLR {case} get_last_lr epoch {i}")
        t.step()
        s.step(), ts.step()
    assert s.last_epoch == ts.last_epoch


@pytest.mark.parametrize("case", list(SEQUENTIAL))
def test_sequential_lr_state_dict_resumes(case):
    o, s, t, ts = build_sequential(case)
    for _ in range(7):
        t.step()
        s.step(), ts.step()
    opt_sd = copy.deepcopy(o.state_dict())
    sched_sd = json.loads(json.dumps(s.state_dict()))
    o2, s2, _, _ = build_sequential(case)
    s2.step()
    o2.load_state_dict(opt_sd)
    s2.load_state_dict(sched_sd)
    for i in range(7, 25):
        t.step()
        s2.step(), ts.step()
        assert_close(snapshot(o2), snapshot(t), f"SequentialLR {case} resumed, epoch {i + 1}")


def test_sequential_lr_validation():
    o, _ = make_optimizers("SGD")
    other, _ = make_optimizers("SGD")
    a, b = ours_sched.StepLR(o, 2), ours_sched.ExponentialLR(o, 0.9)
    with pytest.raises(ValueError, match="at least one scheduler"):
        ours_sched.SequentialLR(o, [], [])
    with pytest.raises(ValueError, match="expected 1 milestones for 2 schedulers, got 2"):
        ours_sched.SequentialLR(o, [a, b], [3, 4])
    with pytest.raises(ValueError, match=r"schedulers\[1\] \(StepLR\) belongs to another optimizer"):
        ours_sched.SequentialLR(o, [a, ours_sched.StepLR(other, 2)], [3])
    with pytest.raises(TypeError, match=r"schedulers\[0\] must be a scheduler"):
        ours_sched.SequentialLR(o, [o, b], [3])


@pytest.mark.parametrize("t_mult", [1, 2, 3])
def test_warm_restarts_fractional_and_jumping_epochs(t_mult):
    """``step(epoch + i / iters)`` per batch, jumps back and forth, then plain steps, as torch's."""
    o, t = make_optimizers("SGD")
    s = ours_sched.CosineAnnealingWarmRestarts(o, T_0=3, T_mult=t_mult, eta_min=0.01)
    ts = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(t, T_0=3, T_mult=t_mult, eta_min=0.01)
    epochs = [e + i / 4 for e in range(12) for i in range(4)] + [26, 2.5, 40, 0]
    for k, e in enumerate(epochs + [None] * 10):
        t.step()
        s.step(e)
        ts.step(e)
        assert_close(s.get_last_lr(), ts.get_last_lr(), f"T_mult={t_mult} call {k} epoch {e}")
        assert (s.last_epoch, s.T_i) == (ts.last_epoch, ts.T_i)
    with pytest.raises(ValueError, match="epoch must be a number >= 0"):
        s.step(-1)
    with pytest.raises(ValueError, match="T_mult must be a positive integer"):
        ours_sched.CosineAnnealingWarmRestarts(o, T_0=3, T_mult=0)
    with pytest.raises(ValueError, match="T_0 must be a positive integer"):
        ours_sched.CosineAnnealingWarmRestarts(o, T_0=2.5)
