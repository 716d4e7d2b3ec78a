"""ChainedScheduler against torch's: every scheduler of the list steps at each step, the rates equal
torch's to 1e-12 relative over 25 steps, and its state (each scheduler's in its place) resumes a run,
round-tripped through JSON and a checkpoint; a bad state is refused naming the key, changing nothing."""

from __future__ import annotations

import copy
import json

import pytest
import torch
from test_schedulers import assert_close, make_optimizers, snapshot

from luminal import nn, train
from luminal.train import schedulers as S

CHAINS = {  # name -> the schedulers, built on a module's classes (luminal's or torch's) and an optimizer
    "constant-exponential": lambda m, o: [m.ConstantLR(o, factor=0.1, total_iters=5), m.ExponentialLR(o, gamma=0.9)],
    "warmup-cosine": lambda m, o: [m.LinearLR(o, start_factor=0.2, total_iters=4), m.CosineAnnealingLR(o, T_max=12)],
    "three": lambda m, o: [m.StepLR(o, step_size=3, gamma=0.5), m.MultiStepLR(o, milestones=[4, 9], gamma=0.7),
                           m.MultiplicativeLR(o, lambda e: 0.97)],
    "one": lambda m, o: [m.PolynomialLR(o, total_iters=10, power=2.0)],
}


def build(case, opt_name="SGD"):
    o, t = make_optimizers(opt_name)
    tm = torch.optim.lr_scheduler
    return o, train.ChainedScheduler(CHAINS[case](S, o)), t, tm.ChainedScheduler(CHAINS[case](tm, t), optimizer=t)


@pytest.mark.parametrize("opt_name", ["SGD", "Adam"])
@pytest.mark.parametrize("case", list(CHAINS))
def test_chained_scheduler_matches_torch(case, opt_name):
    o, s, t, ts = build(case, opt_name)
    for i in range(25):
        assert_close(snapshot(o), snapshot(t), f"ChainedScheduler {case} step {i}")
        assert_close(s.get_last_lr(), ts.get_last_lr(), f"ChainedScheduler {case} get_last_lr step {i}")
        t.step()
        s.step(), ts.step()


@pytest.mark.parametrize("case", list(CHAINS))
def test_chained_scheduler_state_dict_resumes(case):
    o, s, t, ts = build(case)
    for _ in range(7):
        t.step()
        s.step(), ts.step()
    sd = s.state_dict()
    assert set(sd) == {"scheduler", *ts.state_dict()}  # torch's keys, and the class
    opt_sd, sched_sd = copy.deepcopy(o.state_dict()), json.loads(json.dumps(sd))
    o2, s2, _, _ = build(case)
    s2.step()
    o2.load_state_dict(opt_sd)
    s2.load_state_dict(sched_sd)
    assert s2.get_last_lr() == s.get_last_lr()
    for i in range(7, 25):
        t.step()
        s2.step(), ts.step()
        assert_close(snapshot(o2), snapshot(t), f"ChainedScheduler {case} resumed, step {i + 1}")


def test_a_checkpoint_holds_and_restores_the_chain(tmp_path):
    model = nn.Linear(2, 2)
    opt = train.SGD(model.parameters(), lr=0.1)
    s = train.ChainedScheduler(CHAINS["warmup-cosine"](S, opt))
    for _ in range(5):
        s.step()
    path = tmp_path / "ckpt.safetensors"
    train.save_checkpoint(path, model=model, optimizer=opt, scheduler=s)
    opt2 = train.SGD(model.parameters(), lr=0.1)
    s2 = train.ChainedScheduler(CHAINS["warmup-cosine"](S, opt2))
    train.load_checkpoint(path, optimizer=opt2, scheduler=s2)
    for _ in range(5):
        s.step(), s2.step()
        assert s2.get_last_lr() == s.get_last_lr()



BAD = [
    (lambda sd: {**sd, "last_epoch": 3}, r"ChainedScheduler\.load_state_dict: .*does not keep: 'last_epoch'"),
    (lambda sd: {**sd, "_schedulers": sd["_schedulers"][:1]},
     r"ChainedScheduler\.load_state_dict: _schedulers holds the states of 1 schedulers; this ChainedScheduler has 2 "
     r"\(LinearLR, CosineAnnealingLR\)"),
    (lambda sd: {**sd, "_schedulers": [sd["_schedulers"][0], {**sd["_schedulers"][1], "T_max": 0}]},
     r"_schedulers\[1\]: CosineAnnealingLR\.load_state_dict: T_max must be a positive integer"),
    (lambda sd: {**sd, "_last_lr": [0.1]}, r"ChainedScheduler\.load_state_dict: _last_lr must be a list of 2"),
    (lambda sd: {**sd, "scheduler": "SequentialLR"}, r"the state was saved by 'SequentialLR'"),
]


@pytest.mark.parametrize("k", range(len(BAD)))
def test_a_bad_state_is_refused_naming_the_key_and_changes_nothing(k):
    make_bad, match = BAD[k]
    o, s, _, _ = build("warmup-cosine")
    for _ in range(3):
        s.step()
    saved = json.loads(json.dumps(s.state_dict()))
    o2, s2, _, _ = build("warmup-cosine")
    before = json.dumps(s2.state_dict())
    with pytest.raises(ValueError, match=match):
        s2.load_state_dict(make_bad(saved))
    assert json.dumps(s2.state_dict()) == before


def test_validation():
    o, _ = make_optimizers()
    other, _ = make_optimizers()
    with pytest.raises(ValueError, match="^ChainedScheduler: expected at least one scheduler, got none"):
        train.ChainedScheduler([])
    with pytest.raises(TypeError, match=r"^ChainedScheduler: schedulers\[1\] is a ReduceLROnPlateau"):
        train.ChainedScheduler([S.ExponentialLR(o, 0.9), S.ReduceLROnPlateau(o)])
    with pytest.raises(ValueError, match=r"^ChainedScheduler: schedulers\[1\] \(StepLR\) belongs to another optimizer"):
        train.ChainedScheduler([S.ExponentialLR(o, 0.9), S.StepLR(other, 2)])
    with pytest.raises(ValueError, match=r"^ChainedScheduler: schedulers\[0\] \(StepLR\) belongs to another optimizer"):
        train.ChainedScheduler([S.StepLR(other, 2)], optimizer=o)
    with pytest.raises(TypeError, match=r"^ChainedScheduler: schedulers\[0\] must be a scheduler, got SGD"):
        train.ChainedScheduler([o])
    assert repr(train.ChainedScheduler([S.StepLR(o, 2)])).startswith("ChainedScheduler([StepLR], last_lr=")
