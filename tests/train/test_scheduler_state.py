"""A scheduler's state is data: ``load_state_dict`` takes only the scheduler's own keys, each of the type
and range its constructor accepts, and applies all of them or none; constructors refuse values that
would fail (or give negative rates) only later, inside ``step()``."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest

from luminal.nn.parameter import Parameter
from luminal.train import schedulers as S
from luminal.train.optim.adagrad import Adagrad
from luminal.train.optim.adam import Adam
from luminal.train.optim.sgd import SGD


def sgd(n_groups=2, **kw):
    return SGD([{"params": [Parameter(np.zeros(2, np.float32))], "lr": 0.1 / (i + 1)} for i in range(n_groups)],
               momentum=0.9, **kw)


BUILD = {
    "step": lambda o: S.StepLR(o, step_size=3, gamma=0.5),
    "multistep": lambda o: S.MultiStepLR(o, milestones=[2, 5], gamma=0.5),
    "exp": lambda o: S.ExponentialLR(o, gamma=0.9),
    "cos": lambda o: S.CosineAnnealingLR(o, T_max=10, eta_min=1e-3),
    "linear": lambda o: S.LinearLR(o, start_factor=0.5, total_iters=4),
    "onecycle": lambda o: S.OneCycleLR(o, max_lr=0.5, total_steps=20),
    "lambda": lambda o: S.LambdaLR(o, lambda e: 0.9**e),
    "restarts": lambda o: S.CosineAnnealingWarmRestarts(o, T_0=3, T_mult=2, eta_min=1e-3),
    "sequential": lambda o: S.SequentialLR(o, [S.LinearLR(o, start_factor=0.1, total_iters=3),
                                              S.CosineAnnealingLR(o, T_max=8)], [3]),
}


def stepped(kind, n=5, n_groups=2):
    o = sgd(n_groups)
    s = BUILD[kind](o)
    for _ in range(n):
        s.step()
    return o, s


def saved(kind, n=5):
    return json.loads(json.dumps(stepped(kind, n)[1].state_dict()))


def snapshot(s):
    """Everything a load could change, nested schedulers and callable lr_lambdas included."""
    out = {k: copy.deepcopy(v) for k, v in vars(s).items() if k not in ("optimizer", "_schedulers", "lr_lambdas")}
    out["_nested"] = [snapshot(x) for x in getattr(s, "_schedulers", [])]
    out["_lambdas"] = [dict(vars(f)) for f in getattr(s, "lr_lambdas", [])]
    return out


def edit(sd, **changes):
    sd = copy.deepcopy(sd)
    sd.update(changes)
    return sd


BAD = [  # (scheduler kind, the state to load, what the error must say)
    ("step", lambda sd: edit(sd, step=1), r"StepLR\.load_state_dict: .*'step'"),
    ("step", lambda sd: edit(sd, optimizer=5), r"StepLR\.load_state_dict: .*'optimizer'"),
    ("step", lambda sd: edit(sd, get_lr=None), r"StepLR\.load_state_dict: .*'get_lr'"),
    ("step", lambda sd: edit(sd, __class__="x"), r"StepLR\.load_state_dict: .*'__class__'"),
    ("step", lambda sd: edit(sd, last_epoch="abc"), r"StepLR\.load_state_dict: last_epoch must be an integer"),
    ("step", lambda sd: edit(sd, last_epoch=2.5), r"StepLR\.load_state_dict: last_epoch must be an integer"),
    ("step", lambda sd: edit(sd, last_epoch=-2), r"StepLR\.load_state_dict: last_epoch must be an integer >= -1"),
    ("step", lambda sd: edit(sd, step_size=0), r"StepLR\.load_state_dict: step_size must be a positive integer"),
    ("step", lambda sd: edit(sd, gamma="0.1"), r"StepLR\.load_state_dict: gamma must be a number, got str '0\.1'"),
    ("step", lambda sd: edit(sd, gamma=-5), r"StepLR\.load_state_dict: gamma must be a positive number, got -5"),
    ("step", lambda sd: edit(sd, gamma=float("nan")), r"StepLR\.load_state_dict: gamma must be a positive number"),
    ("step", lambda sd: edit(sd, base_lrs=[0.1]), r"StepLR\.load_state_dict: base_lrs must be a list of 2"),
    ("step", lambda sd: edit(sd, base_lrs=0.1), r"StepLR\.load_state_dict: base_lrs must be a list of 2"),
    ("step", lambda sd: edit(sd, base_lrs=[0.1, -1]), r"base_lrs\[1\] must be a number >= 0, got -1"),
    ("step", lambda sd: edit(sd, _last_lr=[0.1, None]), r"_last_lr\[1\] must be a number, got NoneType"),
    ("step", lambda sd: edit(sd, _initial=True), r"StepLR\.load_state_dict: _initial must be false"),
    ("step", lambda sd: {k: v for k, v in sd.items() if k != "gamma"}, r"StepLR\.load_state_dict: .*lacks 'gamma'"),
    ("step", lambda sd: [1, 2], r"StepLR\.load_state_dict: expected a dict"),
    ("cos", lambda sd: edit(sd, T_max=0), r"CosineAnnealingLR\.load_state_dict: T_max must be a positive integer"),
    ("cos", lambda sd: edit(sd, eta_min="0"), r"CosineAnnealingLR\.load_state_dict: eta_min must be a number"),
    ("cos", lambda _: saved("step"), r"CosineAnnealingLR\.load_state_dict: the state was saved by 'StepLR'"),
    ("cos", lambda _: {k: v for k, v in saved("step").items() if k != "scheduler"},  # (older state: no class)
     r"CosineAnnealingLR\.load_state_dict: the state has keys a CosineAnnealingLR does not keep: 'gamma', "
     r"'step_size'; it lacks 'T_max', 'eta_min'"),
    ("multistep", lambda sd: edit(sd, milestones=[1, "2"]), r"MultiStepLR\.load_state_dict: milestones\[1\]"),
    ("exp", lambda sd: edit(sd, gamma=0), r"ExponentialLR\.load_state_dict: gamma must be a positive number"),
    ("linear", lambda sd: edit(sd, start_factor=0), r"LinearLR\.load_state_dict: start_factor must be a number in"),
    ("linear", lambda sd: edit(sd, end_factor=1.5), r"LinearLR\.load_state_dict: end_factor must be a number in"),
    ("linear", lambda sd: edit(sd, total_iters=0), r"LinearLR\.load_state_dict: total_iters must be a positive"),
    ("onecycle", lambda sd: edit(sd, anneal_strategy="exp"), r"OneCycleLR\.load_state_dict: anneal_strategy"),
    ("onecycle", lambda sd: edit(sd, cycle_momentum="yes"), r"OneCycleLR\.load_state_dict: cycle_momentum must"),
    ("onecycle", lambda sd: edit(sd, use_beta1=True), r"OneCycleLR\.load_state_dict: use_beta1 must be False"),
    ("onecycle", lambda sd: {k: v for k, v in sd.items() if k != "use_beta1"}, r"lacks 'use_beta1'"),
    ("onecycle", lambda sd: edit(sd, total_steps=30), r"OneCycleLR\.load_state_dict: phases must be"),
    ("onecycle", lambda sd: edit(sd, phases=[[5.0, "initial_lr", "max_lr", "max_momentum", "step"],
                                             [19, "max_lr", "min_lr", "base_momentum", "max_momentum"]]),
     r"OneCycleLR\.load_state_dict: phases must be"),
    ("lambda", lambda sd: edit(sd, lr_lambdas=[None]), r"LambdaLR\.load_state_dict: lr_lambdas must be a list of 2"),
    ("lambda", lambda sd: edit(sd, lr_lambdas=[{"__call__": 1}, None]), r"LambdaLR\.load_state_dict: lr_lambdas\[0\]"),
    ("restarts", lambda sd: edit(sd, T_i=0), r"CosineAnnealingWarmRestarts\.load_state_dict: T_i must be a positive"),
    ("restarts", lambda sd: edit(sd, T_cur="1"), r"CosineAnnealingWarmRestarts\.load_state_dict: T_cur must be"),
    ("restarts", lambda sd: edit(sd, eta_min=-1), r"CosineAnnealingWarmRestarts\.load_state_dict: eta_min must be"),
    ("sequential", lambda sd: edit(sd, _milestones=[3, 4]), r"SequentialLR\.load_state_dict: .*expected 1 milestones"),
    ("sequential", lambda sd: edit(sd, _milestones=[-3]), r"SequentialLR\.load_state_dict: _milestones\[0\] must be"),
    ("sequential", lambda sd: edit(sd, _schedulers=sd["_schedulers"][:1]),
     r"SequentialLR\.load_state_dict: _schedulers holds the states of 1 schedulers; this SequentialLR has 2 "
     r"\(LinearLR, CosineAnnealingLR\)"),
    ("sequential", lambda sd: edit(sd, _schedulers=[sd["_schedulers"][0], edit(sd["_schedulers"][1], T_max=0)]),
     r"SequentialLR\.load_state_dict: _schedulers\[1\]: CosineAnnealingLR\.load_state_dict: T_max must be"),
    ("sequential", lambda sd: edit(sd, _schedulers=sd["_schedulers"][::-1]),
     r"_schedulers\[0\]: LinearLR\.load_state_dict: the state was saved by 'CosineAnnealingLR'"),
]


@pytest.mark.parametrize("kind,make_bad,match", BAD, ids=[f"{b[0]}-{i}" for i, b in enumerate(BAD)])
def test_an_edited_state_is_refused_naming_the_key_and_changes_nothing(kind, make_bad, match):
    bad = make_bad(saved(kind, n=5))
    o, s = stepped(kind, n=2)
    before, lrs = snapshot(s), [g["lr"] for g in o.param_groups]
    with pytest.raises(ValueError, match=match):
        s.load_state_dict(bad)
    assert snapshot(s) == before and [g["lr"] for g in o.param_groups] == lrs
    s.step()  # still a working scheduler (its methods and optimizer are its own)


def test_a_sequential_state_for_three_schedulers_into_two_is_named():
    """Before: 'ValueError: zip() argument 2 is shorter than argument 1', with no context."""
    o = sgd()
    three = S.SequentialLR(o, [S.ExponentialLR(o, 0.9), S.StepLR(o, 2), S.LinearLR(o)], [2, 4])
    o2 = sgd()
    two = S.SequentialLR(o2, [S.ExponentialLR(o2, 0.9), S.StepLR(o2, 2)], [2])
    with pytest.raises(ValueError, match=r"SequentialLR\.load_state_dict: .*3 schedulers; this SequentialLR has 2"):
        two.load_state_dict(three.state_dict())
    with pytest.raises(ValueError, match=r"SequentialLR\.load_state_dict: .*2 schedulers; this SequentialLR has 3"):
        three.load_state_dict(two.state_dict())


def test_a_state_for_other_param_groups_is_refused():
    sd = stepped("cos", n_groups=3)[1].state_dict()
    _, s = stepped("cos", n=1)
    with pytest.raises(ValueError, match=r"base_lrs must be a list of 2 learning rates, one per param group"):
        s.load_state_dict(sd)


class Warmup:
    def __init__(self, n):
        self.n = n

    def __call__(self, epoch):
        return min(1.0, (epoch + 1) / self.n)

    def scale(self):
        return 1.0


@pytest.mark.parametrize("attrs,match", [
    ({"n": "4"}, r"lr_lambdas\[0\] must be None or"),
    ({"scale": 5}, r"lr_lambdas\[0\] must be None or"),  # would shadow a method
    ("n=4", r"lr_lambdas\[0\] must be None or"),
])
def test_lambda_state_sets_only_the_callable_objects_own_attributes(attrs, match):
    o = sgd()
    w = Warmup(3)
    s = S.LambdaLR(o, [w, lambda e: 1.0])
    sd = edit(s.state_dict(), lr_lambdas=[attrs, None])
    with pytest.raises(ValueError, match=match):
        s.load_state_dict(sd)
    assert vars(w) == {"n": 3} and w.scale() == 1.0


def test_lambda_state_for_a_function_is_refused():
    o = sgd()
    s = S.LambdaLR(o, [Warmup(3), Warmup(5)])
    o2 = sgd()
    s2 = S.LambdaLR(o2, [lambda e: 1.0, lambda e: 1.0])
    with pytest.raises(ValueError, match=r"lr_lambdas\[0\] must be None or .* function"):
        s2.load_state_dict(s.state_dict())


def legacy(sd):
    """A state as saved before the scheduler's class was recorded (with the constructor-step flag)."""
    sd = {k: v for k, v in copy.deepcopy(sd).items() if k != "scheduler"}
    if "_schedulers" in sd:
        sd["_schedulers"] = [legacy(x) for x in sd["_schedulers"]]
    else:
        sd["_initial"] = False
    return sd


@pytest.mark.parametrize("kind", list(BUILD))
@pytest.mark.parametrize("old", [False, True], ids=["current", "legacy"])
def test_genuine_states_still_resume_exactly(kind, old):
    o, s = stepped(kind, n=6)
    sd = json.loads(json.dumps(s.state_dict()))
    assert sd["scheduler"] == type(s).__name__ and "optimizer" not in sd
    opt_sd = copy.deepcopy(o.state_dict())
    o2, s2 = stepped(kind, n=1)
    o2.load_state_dict(opt_sd)
    s2.load_state_dict(legacy(sd) if old else sd)
    assert s2.state_dict() == sd
    for _ in range(6):
        s.step(), s2.step()
        assert s2.get_last_lr() == s.get_last_lr()
        assert [g["lr"] for g in o2.param_groups] == [g["lr"] for g in o.param_groups]


def test_one_cycle_state_without_momentum_cycling_loads_into_one_with_it():
    o = sgd()
    s = S.OneCycleLR(o, max_lr=0.5, total_steps=20, cycle_momentum=False)
    s.step()
    o2 = sgd()
    s2 = S.OneCycleLR(o2, max_lr=0.5, total_steps=20)
    s2.load_state_dict(s.state_dict())
    assert s2.state_dict() == s.state_dict()  # the stale use_beta1 is gone: it loads again
    s2.load_state_dict(s2.state_dict())
    o3 = Adagrad([Parameter(np.zeros(2, np.float32))], lr=0.1)
    s3 = S.OneCycleLR(o3, max_lr=0.5, total_steps=20, cycle_momentum=False)
    o4 = sgd(n_groups=1)
    with pytest.raises(ValueError, match=r"OneCycleLR\.load_state_dict: cycle_momentum needs an optimizer with "
                                         r"momentum or betas; Adagrad has neither"):
        s3.load_state_dict(S.OneCycleLR(o4, max_lr=0.5, total_steps=20).state_dict())


# ------------------------------------------------------------------------------------- constructors
@pytest.mark.parametrize("make,kind,match", [
    (lambda o: S.StepLR(o, 2, gamma="0.1"), TypeError, r"StepLR: gamma must be a number, got str '0\.1'"),
    (lambda o: S.StepLR(o, 2, gamma=-0.1), ValueError, r"StepLR: gamma must be a positive number, got -0\.1"),
    (lambda o: S.StepLR(o, 2, gamma=float("inf")), ValueError, r"StepLR: gamma must be a positive number"),
    (lambda o: S.MultiStepLR(o, [2], gamma="x"), TypeError, r"MultiStepLR: gamma must be a number"),
    (lambda o: S.ExponentialLR(o, gamma="0.9"), TypeError, r"ExponentialLR: gamma must be a number, got str"),
    (lambda o: S.ExponentialLR(o, gamma=-1), ValueError, r"ExponentialLR: gamma must be a positive number, got -1"),
    (lambda o: S.ExponentialLR(o, gamma=True), ValueError, r"ExponentialLR: gamma must be a positive number"),
    (lambda o: S.CosineAnnealingLR(o, 5, eta_min="0"), TypeError, r"CosineAnnealingLR: eta_min must be a number"),
    (lambda o: S.CosineAnnealingLR(o, 5, eta_min=-1), ValueError, r"CosineAnnealingLR: eta_min must be a number >= 0"),
    (lambda o: S.CosineAnnealingWarmRestarts(o, 5, eta_min=-1), ValueError, r"CosineAnnealingWarmRestarts: eta_min"),
    (lambda o: S.LinearLR(o, start_factor="x"), TypeError, r"LinearLR: start_factor must be a number"),
    (lambda o: S.LinearLR(o, total_iters=0), ValueError, r"LinearLR: total_iters must be a positive integer"),
    (lambda o: S.OneCycleLR(o, max_lr="a", total_steps=5), TypeError, r"OneCycleLR: max_lr must be a number"),
    (lambda o: S.OneCycleLR(o, max_lr=-1, total_steps=5), ValueError, r"OneCycleLR: max_lr must be a number >= 0"),
    (lambda o: S.OneCycleLR(o, max_lr=1, total_steps=5, div_factor=0), ValueError,
     r"OneCycleLR: div_factor must be a positive number"),
    (lambda o: S.StepLR(o, 2, last_epoch="0"), ValueError, r"StepLR: last_epoch must be an integer >= -1"),
])
def test_constructors_refuse_values_that_would_fail_in_step(make, kind, match):
    with pytest.raises(kind, match=match):
        make(sgd())


def test_constructor_stores_plain_ints():
    """A numpy count is stored as an int, so that state_dict stays JSON."""
    s = S.StepLR(sgd(), step_size=np.int64(3))
    assert type(s.step_size) is int
    json.dumps(s.state_dict())


def test_lambda_returning_a_non_number_fails_at_that_step():
    o = sgd()
    s = S.LambdaLR(o, lambda e: "abc" if e == 2 else 1.0)
    s.step()
    lrs = [g["lr"] for g in o.param_groups]
    with pytest.raises(TypeError, match=r"LambdaLR: lr_lambdas\[0\]\(2\) must be a number, got str 'abc'"):
        s.step()
    assert s.last_epoch == 1 and [g["lr"] for g in o.param_groups] == lrs  # the failed step took nothing
    with pytest.raises(ValueError, match=r"LambdaLR: lr_lambdas\[1\]\(0\) must be a number >= 0, got -1"):
        S.LambdaLR(sgd(), [lambda e: 1.0, lambda e: -1])


def test_one_cycle_with_adam_keeps_beta1_cycling_through_a_load():
    o = Adam([Parameter(np.zeros(2, np.float32))], lr=0.1)
    s = S.OneCycleLR(o, max_lr=0.5, total_steps=10)
    s.step()
    sd = json.loads(json.dumps(s.state_dict()))
    assert sd["use_beta1"] is True
    o2 = Adam([Parameter(np.zeros(2, np.float32))], lr=0.1)
    s2 = S.OneCycleLR(o2, max_lr=0.5, total_steps=10)
    s2.load_state_dict(sd)
    with pytest.raises(ValueError, match=r"use_beta1 must be True"):
        s2.load_state_dict(edit(sd, use_beta1=False))
