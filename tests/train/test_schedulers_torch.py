"""ConstantLR, PolynomialLR, MultiplicativeLR, CyclicLR and ReduceLROnPlateau against
torch.optim.lr_scheduler: the learning-rate (and CyclicLR momentum/beta1) sequences over two param
groups, to 1e-12 relative; resuming from a (JSON round-tripped) state_dict and from a checkpoint;
the state's keys as torch's; constructors and loads refusing bad values with the scheduler's name."""

from __future__ import annotations

import copy
import json
import math

import numpy as np
import pytest
import torch
from optimizer_parity import UpdateStep
from test_schedulers import OPTS, assert_close, make_optimizers, snapshot  # noqa: F401 (tests/train's helpers)

from luminal import train
from luminal.core.safetensors_io import load_file, load_metadata, save_file
from luminal.nn.parameter import Parameter
from luminal.train import schedulers as S

TORCH_ONLY = {"_step_count", "_is_initial", "_get_lr_called_within_step"}  # torch's step bookkeeping


class Decay:
    """A callable object as a function of the epoch: its attributes are saved (torch's rule)."""

    def __init__(self, rate):
        self.rate = rate

    def __call__(self, x):
        return self.rate


class Halving:
    """A callable scale_fn object."""

    def __init__(self, base):
        self.base = base

    def __call__(self, x):
        return self.base ** (x - 1)


CASES = [
    ("ConstantLR", {}, "SGD", {}),
    ("ConstantLR", {"factor": 0.5, "total_iters": 8}, "Adam", {}),
    ("ConstantLR", {"factor": 1.0, "total_iters": 3}, "SGD", {}),
    ("ConstantLR", {"factor": 0.1, "total_iters": 1}, "RMSprop", {}),
    ("PolynomialLR", {}, "SGD", {}),
    ("PolynomialLR", {"total_iters": 20, "power": 2.0}, "AdamW", {}),
    ("PolynomialLR", {"total_iters": 25, "power": 0.5}, "Adagrad", {}),
    ("PolynomialLR", {"total_iters": 7, "power": 0}, "SGD", {}),
    ("MultiplicativeLR", {"lr_lambda": lambda e: 0.95}, "SGD", {}),
    ("MultiplicativeLR", {"lr_lambda": [lambda e: 0.9 if e % 3 == 0 else 1.0, lambda e: 1 / (1 + 0.01 * e)]},
     "Adam", {}),
    ("MultiplicativeLR", {"lr_lambda": Decay(0.97)}, "SGD", {}),
    ("CyclicLR", {"base_lr": 0.01, "max_lr": 0.1, "step_size_up": 5}, "SGD", {"momentum": 0.9}),
    ("CyclicLR", {"base_lr": [0.01, 0.001], "max_lr": [0.1, 0.05], "step_size_up": 4, "step_size_down": 7,
                  "mode": "triangular2", "base_momentum": [0.8, 0.85], "max_momentum": 0.95}, "Adam", {}),
    ("CyclicLR", {"base_lr": 0.001, "max_lr": 0.006, "step_size_up": 3, "mode": "exp_range", "gamma": 0.97},
     "AdamW", {}),
    ("CyclicLR", {"base_lr": 0.01, "max_lr": 0.1, "step_size_up": 6, "step_size_down": 2, "cycle_momentum": False},
     "Adagrad", {}),
    ("CyclicLR", {"base_lr": 0.01, "max_lr": 0.1, "step_size_up": 5, "scale_fn": lambda x: 1 / (1 + 0.05 * x),
                  "scale_mode": "iterations"}, "RMSprop", {"momentum": 0.5}),
    ("CyclicLR", {"base_lr": 0.01, "max_lr": 0.1, "step_size_up": 4, "scale_fn": Halving(0.5)}, "SGD",
     {"momentum": 0.9}),
    ("CyclicLR", {"base_lr": 0.01, "max_lr": 0.1, "step_size_up": 2000}, "SGD", {"momentum": 0.9}),
]
IDS = [f"{c[0]}-{c[2]}-{i}" for i, c in enumerate(CASES)]
STEPS = 40


def build(name, kwargs, opt_name, opt_kw):
    o, t = make_optimizers(opt_name, **opt_kw)
    kw, tkw = copy.deepcopy(kwargs), copy.deepcopy(kwargs)  # (a callable object each: saved state is per object)
    return o, getattr(S, name)(o, **kw), t, getattr(torch.optim.lr_scheduler, name)(t, **tkw)


@pytest.mark.parametrize("name,kwargs,opt_name,opt_kw", CASES, ids=IDS)
def test_sequence_matches_torch(name, kwargs, opt_name, opt_kw):
    o, s, t, ts = build(name, kwargs, opt_name, opt_kw)
    assert s.last_epoch == ts.last_epoch == 0
    for i in range(STEPS):
        assert_close(snapshot(o), snapshot(t), f"{name} epoch {i}")
        assert_close(s.get_last_lr(), ts.get_last_lr(), f"{name} get_last_lr epoch {i}")
        t.step()
        s.step(), ts.step()
    assert s.last_epoch == ts.last_epoch == STEPS


@pytest.mark.parametrize("name,kwargs,opt_name,opt_kw", CASES, ids=IDS)
def test_state_dict_has_torchs_keys_and_resumes(name, kwargs, opt_name, opt_kw):
    o, s, t, ts = build(name, kwargs, opt_name, opt_kw)
    for _ in range(STEPS // 2):
        t.step()
        s.step(), ts.step()
    sched_sd = json.loads(json.dumps(s.state_dict()))  # plain JSON
    assert set(sched_sd) - {"scheduler"} == set(ts.state_dict()) - TORCH_ONLY
    for _, p in o.params():
        o.state_for(p)  # as a compiled step would have (the base saves only states that exist)
    opt_sd = copy.deepcopy(o.state_dict())
    o2, s2, _, _ = build(name, kwargs, opt_name, opt_kw)
    s2.step(), s2.step()  # drift away: the load must restore everything
    o2.load_state_dict(opt_sd)
    s2.load_state_dict(sched_sd)
    assert s2.state_dict() == sched_sd and s2.last_epoch == ts.last_epoch
    for i in range(STEPS // 2, STEPS):
        t.step()
        s2.step(), ts.step()
        assert_close(snapshot(o2), snapshot(t), f"{name} resumed, epoch {i + 1}")
        assert_close(s2.get_last_lr(), ts.get_last_lr(), f"{name} resumed get_last_lr, epoch {i + 1}")


def test_callable_objects_state_is_restored():
    o, _ = make_optimizers("SGD", momentum=0.9)
    s = S.CyclicLR(o, 0.01, 0.1, step_size_up=3, scale_fn=Halving(0.5))
    m = S.MultiplicativeLR(make_optimizers("SGD")[0], [Decay(0.9), lambda e: 1.0])
    assert s.state_dict()["_scale_fn_custom"] == {"base": 0.5}
    assert m.state_dict()["lr_lambdas"] == [{"rate": 0.9}, None]
    f, d = Halving(0.25), Decay(0.5)
    s2 = S.CyclicLR(make_optimizers("SGD", momentum=0.9)[0], 0.01, 0.1, step_size_up=3, scale_fn=f)
    m2 = S.MultiplicativeLR(make_optimizers("SGD")[0], [d, lambda e: 1.0])
    s2.load_state_dict(json.loads(json.dumps(s.state_dict())))
    m2.load_state_dict(json.loads(json.dumps(m.state_dict())))
    assert f.base == 0.5 and d.rate == 0.9


# --------------------------------------------------------------------------------------- ReduceLROnPlateau
METRICS = [10, 9, 9, 9, 9, 8.9995, 8.9, 8.9, 8.9, 8.9, 8.9, 8.9, 7, float("nan"), 7, 7, 6.99, 7, 7, 7, 6, 6, 6, 6,
           5.5, 5.5, 5.5, 5.5, 5.5, 5.5, 5.5, 5.5, 5.5, 5.5, 5.5, 5.5, 4, 4, 4, 4, 4, 4, 4, float("inf"), 3, 3, 3]

PLATEAU = [
    {},
    {"patience": 0},
    {"patience": 2, "factor": 0.5},
    {"patience": 2, "cooldown": 3, "factor": 0.5},
    {"patience": 1, "cooldown": 1, "factor": 0.3, "min_lr": 0.005},
    {"patience": 1, "factor": 0.2, "min_lr": [0.004, 0.0001]},
    {"patience": 2, "threshold": 0.05},
    {"patience": 2, "threshold_mode": "abs", "threshold": 0.5},
    {"patience": 2, "threshold_mode": "abs", "threshold": 0.0},
    {"mode": "max", "patience": 2, "factor": 0.5},
    {"mode": "max", "patience": 1, "cooldown": 2, "threshold": 0.1, "min_lr": [0.01, 0.0]},
    {"mode": "max", "patience": 2, "threshold_mode": "abs", "threshold": 0.5, "factor": 0.0},
    {"patience": 0, "factor": 0.9, "eps": 1e-3},  # a step below eps is skipped
]


def metric_sequence(kw):
    """The scripted metric: falling with plateaus (rising, mirrored and positive, in mode 'max'), a NaN and
    an inf (-inf in mode 'max')."""
    return [20 - m for m in METRICS] if kw.get("mode") == "max" else list(METRICS)


def plateau_state(s):
    return (s.last_epoch, s.best, s.num_bad_epochs, s.cooldown_counter)


def plateau_pair(kw, opt_name="SGD"):
    o, t = make_optimizers(opt_name, momentum=0.9) if opt_name == "SGD" else make_optimizers(opt_name)
    return o, S.ReduceLROnPlateau(o, **kw), t, torch.optim.lr_scheduler.ReduceLROnPlateau(t, **kw)


def same_state(a, b):
    return all(x == y or (x != x and y != y) for x, y in zip(plateau_state(a), plateau_state(b)))


@pytest.mark.parametrize("kw", PLATEAU, ids=[json.dumps(k) for k in PLATEAU])
@pytest.mark.parametrize("opt_name", ["SGD", "Adam"])
def test_plateau_matches_torch(kw, opt_name):
    o, s, t, ts = plateau_pair(kw, opt_name)
    assert_close(s.get_last_lr(), ts.get_last_lr(), "constructor")
    assert "initial_lr" not in o.param_groups[0]  # as torch's: the constructor changes no group
    reductions = 0
    for i, m in enumerate(metric_sequence(kw)):
        before = snapshot(o)
        s.step(m), ts.step(m)
        reductions += snapshot(o) != before
        assert_close(snapshot(o), snapshot(t), f"step {i}, metric {m}")
        assert_close(s.get_last_lr(), ts.get_last_lr(), f"get_last_lr step {i}")
        assert same_state(s, ts), f"step {i}: {plateau_state(s)} vs {plateau_state(ts)}"
        assert s.in_cooldown == ts.in_cooldown
    assert reductions > 0


def test_plateau_takes_numpy_scalars_and_0d_arrays():
    o, s, t, ts = plateau_pair({"patience": 1})
    for m in [np.float32(3.0), np.array(2.5), np.float64(2.5), np.array(2.5, np.float16), 2, np.int64(2),
              np.array(2)]:
        s.step(m), ts.step(float(m))
        assert same_state(s, ts) and type(s.best) is float
        assert_close(snapshot(o), snapshot(t), f"metric {m!r}")


@pytest.mark.parametrize("bad,match", [
    ("0.5", r"got str '0\.5'"),
    (None, r"got NoneType None"),
    (True, r"got bool True"),
    (np.ones(3), r"got an array of shape \(3,\)"),
    (np.array([1.0]), r"got an array of shape \(1,\)"),
    (1 + 2j, r"got complex"),
    (np.array("x"), r"got str 'x'"),
])
def test_plateau_refuses_a_metric_that_is_not_a_number(bad, match):
    o, s, _, _ = plateau_pair({"patience": 0})
    s.step(1.0)
    before = json.dumps(s.state_dict())
    with pytest.raises(TypeError, match=r"ReduceLROnPlateau\.step: metrics must be a number .*" + match):
        s.step(bad)
    assert json.dumps(s.state_dict()) == before


@pytest.mark.parametrize("kw", PLATEAU, ids=[json.dumps(k) for k in PLATEAU])
def test_plateau_state_has_torchs_keys_and_resumes(kw):
    o, s, t, ts = plateau_pair(kw)
    seq = metric_sequence(kw)
    for m in seq[:17]:  # (mid-run, after a NaN; in a cooldown for some)
        s.step(m), ts.step(m)
    sd = json.loads(json.dumps(s.state_dict()))  # +-inf: JSON's Infinity, as Python writes and reads it
    tsd = ts.state_dict()
    assert set(sd) - {"scheduler"} == set(tsd)
    for k in tsd:
        assert sd[k] == tsd[k] or (sd[k] != sd[k] and tsd[k] != tsd[k]), k
    opt_sd = copy.deepcopy(o.state_dict())
    o2, s2, _, _ = plateau_pair(kw)
    s2.step(1e9), s2.step(1e9)
    o2.load_state_dict(opt_sd)
    s2.load_state_dict(sd)
    assert s2.state_dict() == sd
    for i, m in enumerate(seq[17:]):
        s2.step(m), ts.step(m)
        assert_close(snapshot(o2), snapshot(t), f"resumed step {17 + i}")
        assert same_state(s2, ts)


def test_plateau_fresh_state_round_trips_with_infinite_best():
    for mode in ("min", "max"):
        o, s, _, _ = plateau_pair({"mode": mode})
        sd = json.loads(json.dumps(s.state_dict()))
        assert sd["best"] == sd["mode_worse"] == (math.inf if mode == "min" else -math.inf)
        S.ReduceLROnPlateau(make_optimizers()[0], mode=mode).load_state_dict(sd)


def test_plateau_with_an_added_param_group():
    """torch's rule: one min_lr for all groups grows with the groups; a list of them must be set again."""
    o, _ = make_optimizers()
    s = S.ReduceLROnPlateau(o, patience=0, min_lr=0.001)
    o.add_param_group({"params": [Parameter(np.zeros(2, np.float32))], "lr": 0.5})
    s.step(1.0), s.step(2.0)
    assert s.min_lrs == [0.001] * 3 and s.get_last_lr() == [0.010000000000000002, 0.003, 0.05]
    o, _ = make_optimizers()
    s = S.ReduceLROnPlateau(o, patience=0, min_lr=[0.001, 0.0])
    o.add_param_group({"params": [Parameter(np.zeros(2, np.float32))], "lr": 0.5})
    with pytest.raises(ValueError, match=r"ReduceLROnPlateau\.step: the optimizer has 3 param groups and min_lr "
                                         r"has 2 values"):
        s.step(1.0)
    assert s.last_epoch == 0


# ------------------------------------------------------------------------------------- constructors
@pytest.mark.parametrize("make,kind,match", [
    (lambda o: S.ConstantLR(o, factor=0), ValueError, r"ConstantLR: factor must be a number in \(0, 1\], got 0"),
    (lambda o: S.ConstantLR(o, factor=1.5), ValueError, r"ConstantLR: factor must be a number in \(0, 1\]"),
    (lambda o: S.ConstantLR(o, factor="0.5"), TypeError, r"ConstantLR: factor must be a number, got str"),
    (lambda o: S.ConstantLR(o, total_iters=0), ValueError, r"ConstantLR: total_iters must be a positive integer"),
    (lambda o: S.ConstantLR(o, total_iters=2.5), ValueError, r"ConstantLR: total_iters must be a positive integer"),
    (lambda o: S.ConstantLR(o, last_epoch=-3), ValueError, r"ConstantLR: last_epoch must be an integer >= -1"),
    (lambda o: S.ConstantLR(None), TypeError, r"ConstantLR: expected an optimizer, got NoneType"),
    (lambda o: S.PolynomialLR(o, total_iters=0), ValueError, r"PolynomialLR: total_iters must be a positive"),
    (lambda o: S.PolynomialLR(o, power=-1.0), ValueError, r"PolynomialLR: power must be a number >= 0, got -1\.0"),
    (lambda o: S.PolynomialLR(o, power=float("nan")), ValueError, r"PolynomialLR: power must be a number >= 0"),
    (lambda o: S.PolynomialLR(o, power=None), TypeError, r"PolynomialLR: power must be a number, got NoneType"),
    (lambda o: S.MultiplicativeLR(o, 0.9), TypeError, r"MultiplicativeLR: lr_lambda must be a function of the "
                                                      r"epoch, got float 0\.9"),
    (lambda o: S.MultiplicativeLR(o, [lambda e: 1.0]), ValueError, r"MultiplicativeLR: expected 2 lr_lambdas"),
    (lambda o: S.ReduceLROnPlateau(o, factor=1.0), ValueError, r"ReduceLROnPlateau: factor must be a number in "
                                                               r"\[0, 1\), got 1\.0"),
    (lambda o: S.ReduceLROnPlateau(o, factor=-0.1), ValueError, r"ReduceLROnPlateau: factor must be a number in"),
    (lambda o: S.ReduceLROnPlateau(o, mode="avg"), ValueError, r"ReduceLROnPlateau: mode must be one of 'min', "
                                                               r"'max', got 'avg'"),
    (lambda o: S.ReduceLROnPlateau(o, threshold_mode="x"), ValueError, r"threshold_mode must be one of 'rel', 'abs'"),
    (lambda o: S.ReduceLROnPlateau(o, threshold=-1e-4), ValueError, r"ReduceLROnPlateau: threshold must be a number"),
    (lambda o: S.ReduceLROnPlateau(o, threshold=1.0), ValueError, r"threshold must be a number in \[0, 1\) with "
                                                                  r"mode='min', threshold_mode='rel'"),
    (lambda o: S.ReduceLROnPlateau(o, patience=-1), ValueError, r"ReduceLROnPlateau: patience must be an integer >= 0"),
    (lambda o: S.ReduceLROnPlateau(o, patience=2.0), ValueError, r"ReduceLROnPlateau: patience must be an integer"),
    (lambda o: S.ReduceLROnPlateau(o, cooldown=-1), ValueError, r"ReduceLROnPlateau: cooldown must be an integer"),
    (lambda o: S.ReduceLROnPlateau(o, min_lr=-1), ValueError, r"ReduceLROnPlateau: min_lr must be a number >= 0"),
    (lambda o: S.ReduceLROnPlateau(o, min_lr=[0.1]), ValueError, r"ReduceLROnPlateau: min_lr has 1 values for 2 "
                                                                 r"param groups"),
    (lambda o: S.ReduceLROnPlateau(o, min_lr=[0.1, "0"]), TypeError, r"ReduceLROnPlateau: min_lr\[1\] must be a "
                                                                     r"number"),
    (lambda o: S.ReduceLROnPlateau(o, eps="1e-8"), TypeError, r"ReduceLROnPlateau: eps must be a number"),
    (lambda o: S.ReduceLROnPlateau([1, 2]), TypeError, r"ReduceLROnPlateau: expected an optimizer, got list"),
    (lambda o: S.CyclicLR(o, base_lr=-0.1, max_lr=0.1), ValueError, r"CyclicLR: base_lr must be a number >= 0"),
    (lambda o: S.CyclicLR(o, base_lr=0.01, max_lr=[0.1]), ValueError, r"CyclicLR: max_lr has 1 values for 2 param"),
    (lambda o: S.CyclicLR(o, 0.01, 0.1, step_size_up=0), ValueError, r"CyclicLR: step_size_up must be a positive"),
    (lambda o: S.CyclicLR(o, 0.01, 0.1, step_size_down=-2), ValueError, r"CyclicLR: step_size_down must be a "
                                                                        r"positive integer"),
    (lambda o: S.CyclicLR(o, 0.01, 0.1, mode="cosine"), ValueError, r"CyclicLR: mode must be one of 'triangular', "
                                                                    r"'triangular2', 'exp_range', got 'cosine'"),
    (lambda o: S.CyclicLR(o, 0.01, 0.1, gamma=0), ValueError, r"CyclicLR: gamma must be a positive number"),
    (lambda o: S.CyclicLR(o, 0.01, 0.1, scale_fn=0.5), TypeError, r"CyclicLR: scale_fn must be None or a function"),
    (lambda o: S.CyclicLR(o, 0.01, 0.1, scale_fn=lambda x: 1.0, scale_mode="epoch"), ValueError,
     r"CyclicLR: scale_mode must be one of 'cycle', 'iterations'"),
    (lambda o: S.CyclicLR(o, 0.01, 0.1, base_momentum=-0.8), ValueError, r"CyclicLR: base_momentum must be a number"),
    (lambda o: S.CyclicLR(o, 0.01, 0.1, max_momentum=[0.9]), ValueError, r"CyclicLR: max_momentum has 1 values"),
    (lambda o: S.CyclicLR(o, 0.01, 0.1, last_epoch="0"), ValueError, r"CyclicLR: last_epoch must be an integer"),
])
def test_constructors_refuse_bad_arguments(make, kind, match):
    o = make_optimizers("SGD", momentum=0.9)[0]
    before = copy.deepcopy([{k: v for k, v in g.items() if k != "params"} for g in o.param_groups])
    with pytest.raises(kind, match=match):
        make(o)
    assert [{k: v for k, v in g.items() if k != "params"} for g in o.param_groups] == before  # nothing written


def test_cyclic_momentum_needs_momentum_or_betas():
    o = make_optimizers("Adagrad")[0]
    with pytest.raises(ValueError, match=r"CyclicLR: cycle_momentum needs an optimizer with momentum or betas; "
                                         r"Adagrad has neither"):
        S.CyclicLR(o, 0.01, 0.1)
    S.CyclicLR(o, 0.01, 0.1, cycle_momentum=False)


def test_cyclic_scale_fn_out_of_range_fails_at_that_step():
    o = make_optimizers("SGD", momentum=0.9)[0]
    s = S.CyclicLR(o, 0.01, 0.1, step_size_up=2, scale_fn=lambda x: 1.0 if x < 2 else 1.5)
    s.step(), s.step(), s.step()
    before = snapshot(o)
    with pytest.raises(ValueError, match=r"CyclicLR: scale_fn\(2\) must be a number in \[0, 1\], got 1\.5"):
        s.step()
    assert s.last_epoch == 3 and snapshot(o) == before  # the failed step took nothing, momentum included


def test_multiplicative_lambda_returning_a_bad_factor_fails_at_that_step():
    o = make_optimizers()[0]
    s = S.MultiplicativeLR(o, lambda e: -1.0 if e == 2 else 0.9)
    s.step()
    with pytest.raises(ValueError, match=r"MultiplicativeLR: lr_lambdas\[0\]\(2\) must be a number >= 0, got -1\.0"):
        s.step()
    assert s.last_epoch == 1


def test_plateau_cannot_be_part_of_a_sequential_lr():
    o = make_optimizers()[0]
    with pytest.raises(TypeError, match=r"SequentialLR: schedulers\[1\] is a ReduceLROnPlateau"):
        S.SequentialLR(o, [S.ConstantLR(o), S.ReduceLROnPlateau(o)], [3])


def test_new_schedulers_in_a_sequential_lr_match_torch():
    o, t = make_optimizers("SGD", momentum=0.9)
    tm = torch.optim.lr_scheduler

    def make(m, opt):
        return [m.ConstantLR(opt, factor=0.2, total_iters=4), m.PolynomialLR(opt, total_iters=10, power=2.0),
                m.MultiplicativeLR(opt, lambda e: 0.9)]

    s, ts = S.SequentialLR(o, make(S, o), [5, 12]), tm.SequentialLR(t, make(tm, t), [5, 12])
    for i in range(30):
        assert_close(snapshot(o), snapshot(t), f"SequentialLR epoch {i}")
        t.step()
        s.step(), ts.step()


# ------------------------------------------------------------------------------------------ loading
BUILD = {
    "constant": lambda o: S.ConstantLR(o, factor=0.5, total_iters=4),
    "poly": lambda o: S.PolynomialLR(o, total_iters=10, power=2.0),
    "mult": lambda o: S.MultiplicativeLR(o, lambda e: 0.9),
    "plateau": lambda o: S.ReduceLROnPlateau(o, patience=1, cooldown=2),
    "cyclic": lambda o: S.CyclicLR(o, 0.01, 0.1, step_size_up=3),
    "cyclic-fn": lambda o: S.CyclicLR(o, 0.01, 0.1, step_size_up=3, scale_fn=Halving(0.5)),
    "cyclic-nomom": lambda o: S.CyclicLR(o, 0.01, 0.1, step_size_up=3, cycle_momentum=False),
}


def advance(s, n):
    for i in range(n):
        s.step(5.0 - 0.1 * (i % 3)) if isinstance(s, S.ReduceLROnPlateau) else s.step()


def stepped(kind, n=5):
    o = make_optimizers("SGD", momentum=0.9)[0]
    s = BUILD[kind](o)
    advance(s, n)
    return o, s


def saved(kind, n=5):
    return json.loads(json.dumps(stepped(kind, n)[1].state_dict()))


def edit(sd, **changes):
    sd = copy.deepcopy(sd)
    sd.update(changes)
    return sd


def drop(sd, key):
    return {k: v for k, v in sd.items() if k != key}


BAD = [  # (scheduler kind, the state to load, what the error must say)
    ("constant", lambda sd: edit(sd, factor=0), r"ConstantLR\.load_state_dict: factor must be a number in \(0, 1\]"),
    ("constant", lambda sd: edit(sd, total_iters=-1), r"ConstantLR\.load_state_dict: total_iters must be a positive"),
    ("constant", lambda sd: edit(sd, gamma=0.5), r"ConstantLR\.load_state_dict: .*keys a ConstantLR does not keep: "
                                                 r"'gamma'"),
    ("constant", lambda sd: drop(sd, "factor"), r"ConstantLR\.load_state_dict: the state lacks 'factor'"),
    ("poly", lambda sd: edit(sd, power=-2), r"PolynomialLR\.load_state_dict: power must be a number >= 0"),
    ("poly", lambda sd: edit(sd, power="2"), r"PolynomialLR\.load_state_dict: power must be a number, got str"),
    ("poly", lambda _: saved("constant"), r"PolynomialLR\.load_state_dict: the state was saved by 'ConstantLR'"),
    ("mult", lambda sd: edit(sd, lr_lambdas=[None]), r"MultiplicativeLR\.load_state_dict: lr_lambdas must be a list "
                                                     r"of 2"),
    ("mult", lambda sd: edit(sd, lr_lambdas=[{"x": 1}, None]), r"MultiplicativeLR\.load_state_dict: lr_lambdas\[0\] "
                                                               r"must be None or attributes of this "
                                                               r"MultiplicativeLR's lr_lambdas\[0\]"),
    ("mult", lambda sd: edit(sd, base_lrs=[0.1, -0.1]), r"base_lrs\[1\] must be a number >= 0"),
    ("plateau", lambda sd: edit(sd, best=float("nan")), r"ReduceLROnPlateau\.load_state_dict: best must be a number "
                                                        r"or \+-inf, got nan"),
    ("plateau", lambda sd: edit(sd, best="1"), r"ReduceLROnPlateau\.load_state_dict: best must be a number"),
    ("plateau", lambda sd: edit(sd, num_bad_epochs=2), r"ReduceLROnPlateau\.load_state_dict: num_bad_epochs must be "
                                                       r"at most patience \(1\), got 2"),
    ("plateau", lambda sd: edit(sd, num_bad_epochs=-1), r"num_bad_epochs must be an integer >= 0"),
    ("plateau", lambda sd: edit(sd, cooldown_counter=3), r"cooldown_counter must be at most cooldown \(2\), got 3"),
    ("plateau", lambda sd: edit(sd, cooldown_counter=1.5), r"cooldown_counter must be an integer >= 0"),
    ("plateau", lambda sd: edit(sd, mode="avg"), r"ReduceLROnPlateau\.load_state_dict: mode must be one of"),
    ("plateau", lambda sd: edit(sd, mode="max"), r"ReduceLROnPlateau\.load_state_dict: mode_worse must be -inf for "
                                                 r"mode='max', got inf"),
    ("plateau", lambda sd: edit(sd, threshold_mode=None), r"threshold_mode must be one of 'rel', 'abs', got None"),
    ("plateau", lambda sd: edit(sd, threshold=2.0), r"threshold must be a number in \[0, 1\) with mode='min'"),
    ("plateau", lambda sd: edit(sd, factor=1.0), r"ReduceLROnPlateau\.load_state_dict: factor must be a number in"),
    ("plateau", lambda sd: edit(sd, patience=-1), r"ReduceLROnPlateau\.load_state_dict: patience must be an integer"),
    ("plateau", lambda sd: edit(sd, min_lrs=[0.0]), r"min_lrs must be a list of 2 min_lr values, one per param"),
    ("plateau", lambda sd: edit(sd, min_lrs=[0.0, -1.0]), r"min_lrs\[1\] must be a number >= 0"),
    ("plateau", lambda sd: edit(sd, default_min_lr="0"), r"default_min_lr must be a number, got str"),
    ("plateau", lambda sd: edit(sd, eps=-1), r"ReduceLROnPlateau\.load_state_dict: eps must be a number >= 0"),
    ("plateau", lambda sd: edit(sd, last_epoch=-1), r"last_epoch must be an integer >= 0"),
    ("plateau", lambda sd: edit(sd, _last_lr=[0.1]), r"_last_lr must be a list of 2 learning rates"),
    ("plateau", lambda sd: edit(sd, base_lrs=[0.1, 0.1]), r"ReduceLROnPlateau\.load_state_dict: the state has keys "
                                                          r"a ReduceLROnPlateau does not keep: 'base_lrs'"),
    ("plateau", lambda sd: drop(sd, "best"), r"ReduceLROnPlateau\.load_state_dict: the state lacks 'best'"),
    ("plateau", lambda _: saved("cyclic"), r"ReduceLROnPlateau\.load_state_dict: the state was saved by 'CyclicLR'"),
    ("cyclic", lambda sd: edit(sd, step_ratio=1.0), r"CyclicLR\.load_state_dict: step_ratio must be a number in "
                                                    r"\(0, 1\)"),
    ("cyclic", lambda sd: edit(sd, total_size=0), r"CyclicLR\.load_state_dict: total_size must be a positive"),
    ("cyclic", lambda sd: edit(sd, mode="cosine"), r"CyclicLR\.load_state_dict: mode must be one of"),
    ("cyclic", lambda sd: edit(sd, scale_mode="iterations"), r"CyclicLR\.load_state_dict: scale_mode must be 'cycle' "
                                                             r"for mode='triangular'"),
    ("cyclic", lambda sd: edit(sd, gamma=-1), r"CyclicLR\.load_state_dict: gamma must be a positive number"),
    ("cyclic", lambda sd: edit(sd, max_lrs=[0.1]), r"CyclicLR\.load_state_dict: max_lrs must be a list of 2"),
    ("cyclic", lambda sd: edit(sd, use_beta1=True), r"CyclicLR\.load_state_dict: use_beta1 must be False for SGD"),
    ("cyclic", lambda sd: edit(sd, base_momentums=[0.8]), r"base_momentums must be a list of 2 momentums"),
    ("cyclic", lambda sd: edit(sd, max_momentums=[0.9, None]), r"max_momentums\[1\] must be a number, got NoneType"),
    ("cyclic", lambda sd: drop(sd, "max_momentums"), r"CyclicLR\.load_state_dict: the state lacks 'max_momentums'"),
    ("cyclic", lambda sd: edit(sd, cycle_momentum=1), r"CyclicLR\.load_state_dict: cycle_momentum must be true or "
                                                      r"false"),
    ("cyclic", lambda sd: edit(sd, _scale_fn_custom={"base": 2}), r"_scale_fn_custom must be None: this CyclicLR has "
                                                                  r"no scale_fn"),
    ("cyclic-fn", lambda sd: edit(sd, _scale_fn_custom={"base": "2"}), r"_scale_fn_custom must be None or attributes "
                                                                       r"of this CyclicLR's scale_fn"),
    ("cyclic-fn", lambda sd: edit(sd, _scale_fn_custom={"__call__": 1}), r"_scale_fn_custom must be None or"),
    ("cyclic-nomom", lambda sd: edit(sd, base_momentums=[0.8, 0.8]), r"CyclicLR\.load_state_dict: the state has keys "
                                                                     r"a CyclicLR does not keep: 'base_momentums'"),
]


def snapshot_state(s):
    out = {k: copy.deepcopy(v) for k, v in vars(s).items() if k not in ("optimizer", "lr_lambdas", "_scale_fn_custom")}
    out["_fns"] = [dict(vars(f)) for f in getattr(s, "lr_lambdas", []) if not callable(getattr(f, "__code__", None))]
    fn = getattr(s, "_scale_fn_custom", None)
    out["_scale_fn"] = dict(vars(fn)) if fn is not None else None
    return out


@pytest.mark.parametrize("kind,make_bad,match", BAD, ids=[f"{b[0]}-{i}" for i, b in enumerate(BAD)])
def test_an_edited_state_is_refused_naming_the_key_and_changes_nothing(kind, make_bad, match):
    bad = make_bad(saved(kind, n=5))
    o, s = stepped(kind, n=2)
    before, groups = snapshot_state(s), snapshot(o)
    with pytest.raises(ValueError, match=match):
        s.load_state_dict(bad)
    assert snapshot_state(s) == before and snapshot(o) == groups
    advance(s, 1)  # still a working scheduler


def test_a_cyclic_state_without_momentum_cycling_loads_into_one_with_it():
    o, s = stepped("cyclic-nomom")
    o2, s2 = stepped("cyclic", n=1)
    s2.load_state_dict(s.state_dict())
    assert s2.state_dict() == s.state_dict()  # the stale momentum keys are gone: it loads again
    s2.load_state_dict(s2.state_dict())
    m = snapshot(o2)
    advance(s2, 3)
    assert snapshot(o2)[1::2] == m[1::2]  # momentum no longer cycled


def trained(kind, n):
    o = make_optimizers("SGD", momentum=0.9)[0]
    for _, p in o.params():
        o.state_for(p)
    s = BUILD[kind](o)
    advance(s, n)
    return o, s


@pytest.mark.parametrize("kind", list(BUILD))
def test_checkpoint_round_trip_resumes_exactly(kind, tmp_path):
    o, s = trained(kind, 7)
    path = tmp_path / "ck.safetensors"
    train.save_checkpoint(path, optimizer=o, scheduler=s, extra={"epoch": 7})
    o2, s2 = trained(kind, 1)
    assert train.load_checkpoint(path, optimizer=o2, scheduler=s2) == {"epoch": 7}
    assert s2.state_dict() == s.state_dict() and snapshot(o2) == snapshot(o)
    for i in range(15):
        advance(s, 1), advance(s2, 1)
        assert s2.get_last_lr() == s.get_last_lr() and snapshot(o2) == snapshot(o), f"step {i}"


@pytest.mark.parametrize("kind,key,value,match", [
    ("plateau", "num_bad_epochs", 9, r"ReduceLROnPlateau\.load_state_dict: num_bad_epochs must be at most"),
    ("plateau", "best", None, r"ReduceLROnPlateau\.load_state_dict: best must be a number"),
    ("cyclic", "step_ratio", 0, r"CyclicLR\.load_state_dict: step_ratio must be"),
    ("constant", "factor", 2, r"ConstantLR\.load_state_dict: factor must be"),
    ("poly", "power", -1, r"PolynomialLR\.load_state_dict: power must be"),
])
def test_a_tampered_checkpoint_is_refused_and_changes_nothing(kind, key, value, match, tmp_path):
    o, s = trained(kind, 4)
    path = tmp_path / "ck.safetensors"
    train.save_checkpoint(path, optimizer=o, scheduler=s)
    meta = load_metadata(path)
    sd = json.loads(meta["scheduler"])
    sd[key] = value
    meta["scheduler"] = json.dumps(sd)
    save_file(load_file(path), path, metadata=meta)
    o2, s2 = trained(kind, 1)
    before, groups, steps = json.dumps(s2.state_dict()), snapshot(o2), o2.steps
    with pytest.raises(ValueError, match=r"ck\.safetensors: " + match):
        train.load_checkpoint(path, optimizer=o2, scheduler=s2)
    assert json.dumps(s2.state_dict()) == before and snapshot(o2) == groups and o2.steps == steps


# ------------------------------------------------------------------------------ through a compiled update


@pytest.mark.parametrize("name,opt_name,make", [
    ("CyclicLR", "SGD", lambda m, o: m.CyclicLR(o, 0.01, [0.1, 0.05], step_size_up=3, step_size_down=2)),
    ("CyclicLR", "Adam", lambda m, o: m.CyclicLR(o, 0.001, 0.01, step_size_up=2, mode="triangular2")),
    ("ReduceLROnPlateau", "SGD", lambda m, o: m.ReduceLROnPlateau(o, patience=1, factor=0.5)),
    ("PolynomialLR", "Adam", lambda m, o: m.PolynomialLR(o, total_iters=6, power=2.0)),
])
def test_training_follows_torch(name, opt_name, make):
    """The rates (and CyclicLR's momentum or beta1) a schedule sets change the updates of one compiled
    program, as torch's optimizer follows torch's schedule."""
    rng = np.random.default_rng(0)
    inits = [rng.standard_normal(s).astype(np.float32) for s in [(3, 4), (5,)]]
    ours = [Parameter(x, name=f"p{i}") for i, x in enumerate(inits)]
    theirs = [torch.tensor(x, requires_grad=True) for x in inits]
    kw = {"lr": 0.05, "momentum": 0.9} if opt_name == "SGD" else {"lr": 0.01}
    o = OPTS[opt_name][0]([{"params": [p]} for p in ours], **kw)
    t = OPTS[opt_name][1]([{"params": [p]} for p in theirs], **kw, foreach=False)
    run = UpdateStep(o)  # (one compiled program applying opt.update to every parameter)
    s, ts = make(S, o), make(torch.optim.lr_scheduler, t)
    for i in range(12):
        grads = [rng.standard_normal(x.shape).astype(np.float32) for x in inits]
        run(grads)
        for tp, g in zip(theirs, grads):
            tp.grad = torch.tensor(g)
        t.step()
        for p, tp in zip(ours, theirs):
            np.testing.assert_allclose(p.data, tp.detach().numpy(), rtol=1e-5, atol=1e-6, err_msg=f"{name} step {i}")
        if name == "ReduceLROnPlateau":
            metric = 1.0 if i < 3 else 0.9  # improves, then a plateau: reductions
            s.step(metric), ts.step(metric)
        else:
            s.step(), ts.step()
        assert_close(snapshot(o), snapshot(t), f"{name} groups after step {i}")
