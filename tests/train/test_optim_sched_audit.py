"""Optimizers and schedulers against torch.optim, the cases the other files leave out: three param groups
with different hyperparameters through a compiled train step (a zero-size parameter, maximize, numbers
changed between steps, a group added after steps), torch's ValueErrors for bad hyperparameters, params in a
set, a hyperparameter edited into a non-number; schedulers resumed with ``last_epoch=k``, nested in
SequentialLR / ChainedScheduler, OneCycleLR over its small and degenerate layouts, and
CosineAnnealingWarmRestarts at its exact restart epochs."""

from __future__ import annotations

import inspect
import math
import warnings

import numpy as np
import pytest
import torch
from test_schedulers import make_optimizers, snapshot

import luminal as lm
from luminal import nn, train
from luminal.train import schedulers as S

# (the schedulers here step without an optimizer step in between; torch warns about that order)
pytestmark = pytest.mark.filterwarnings("ignore:Detected call of `lr_scheduler.step\\(\\)` before:UserWarning")

RNG = np.random.default_rng(0)
W0, V0, B0 = (RNG.normal(size=s).astype(np.float32) for s in ((3, 4), (2, 3), (2,)))
X, Y = RNG.normal(size=(8, 4)).astype(np.float32), RNG.normal(size=(8, 2)).astype(np.float32)


def _trainers(name, defaults, groups, zero_size=False):
    """torch's and luminal's optimizer ``name`` over the same three parameters (W, V, b of
    ``(x @ W.T @ V.T + b - y)**2``), one per group with ``groups``' options, and the compiled step; with
    ``zero_size`` a (0, 3) parameter joins group 0. Returns (torch params, torch optimizer, luminal params,
    luminal optimizer, step, torch loss function)."""
    tps = [torch.nn.Parameter(torch.from_numpy(a.copy())) for a in (W0, V0, B0)]
    lps = [nn.Parameter(a.copy()) for a in (W0, V0, B0)]
    g = lm.Graph()
    x, y = g.input("x", (8, 4)), g.input("y", (8, 2))
    lw, lv, lb = (p.on(g) for p in lps)
    loss = ((x @ lw.T @ lv.T + lb) - y).pow(2).mean()
    tgroups, lgroups = [[p] for p in tps], [[p] for p in lps]
    if zero_size:
        tz, lz = torch.nn.Parameter(torch.zeros(0, 3)), nn.Parameter(np.zeros((0, 3), np.float32))
        loss = loss + lz.on(g).sum()
        tgroups[0].append(tz)
        lgroups[0].append(lz)
    topt = getattr(torch.optim, name)([{"params": p, **o} for p, o in zip(tgroups, groups)], **defaults,
                                      foreach=False)
    lopt = getattr(train, name)([{"params": p, **o} for p, o in zip(lgroups, groups)], **defaults)

    def torch_loss():
        out = (torch.from_numpy(X) @ tps[0].T @ tps[1].T + tps[2] - torch.from_numpy(Y)).pow(2).mean()
        return out + tgroups[0][-1].sum() if zero_size else out

    return tps, topt, lps, lopt, train.compile_step(loss, lopt, backend="cpu"), torch_loss


def _torch_step(topt, torch_loss):
    topt.zero_grad()
    torch_loss().backward()
    topt.step()


def _same(tps, lps, what):
    for i, (t, p) in enumerate(zip(tps, lps)):
        np.testing.assert_allclose(p.data, t.detach().numpy(), rtol=1e-5, atol=1e-6, err_msg=f"{what}: param {i}")


GROUPS = {  # optimizer -> (defaults, three groups' options)
    "SGD": ({"lr": 0.05}, [{"momentum": 0.9, "nesterov": True},
                           {"lr": 0.02, "momentum": 0.5, "dampening": 0.3, "weight_decay": 0.1},
                           {"weight_decay": 0.01}]),
    "Adam": ({"lr": 0.01}, [{"amsgrad": True}, {"betas": (0.5, 0.9), "weight_decay": 0.1, "lr": 0.03},
                            {"eps": 1e-3, "decoupled_weight_decay": True, "weight_decay": 0.2}]),
    "AdamW": ({"lr": 0.01}, [{"amsgrad": True, "weight_decay": 0.0}, {"betas": (0.5, 0.9), "lr": 0.03},
                             {"eps": 1e-3}]),
    "RMSprop": ({"lr": 0.01}, [{"centered": True}, {"momentum": 0.5, "alpha": 0.9},
                               {"centered": True, "momentum": 0.3, "weight_decay": 0.1}]),
    "Adagrad": ({"lr": 0.1, "initial_accumulator_value": 0.3}, [{"lr_decay": 0.1},
                                                                 {"weight_decay": 0.1, "eps": 1e-3}, {"lr": 0.05}]),
    "Adamax": ({"lr": 0.02}, [{"betas": (0.5, 0.9)}, {"weight_decay": 0.1}, {"eps": 1e-3}]),
    "NAdam": ({"lr": 0.02}, [{"momentum_decay": 0.01}, {"weight_decay": 0.1, "decoupled_weight_decay": True},
                             {"betas": (0.5, 0.9), "weight_decay": 0.1}]),
    "RAdam": ({"lr": 0.02}, [{"betas": (0.5, 0.9)}, {"weight_decay": 0.1, "decoupled_weight_decay": True},
                             {"weight_decay": 0.1}]),
}


def _retune(opt):
    """Halve every group's lr; move SGD's / RMSprop's momentum and beta1, as a scheduler does between steps
    (NAdam's mu_product multiplies each step's own momentum, as torch's)."""
    for g in opt.param_groups:
        g["lr"] = g["lr"] * 0.5
        if "betas" in g:
            g["betas"] = (0.7, g["betas"][1])
        if g.get("momentum"):
            g["momentum"] = 0.6


@pytest.mark.parametrize("variant", ["plain", "maximize-zero-size", "retuned"])
@pytest.mark.parametrize("name", list(GROUPS))
def test_three_groups_through_a_compiled_step_match_torch(name, variant):
    defaults, groups = GROUPS[name]
    if variant == "maximize-zero-size":
        groups = [{**o, "maximize": True} for o in groups]
    tps, topt, lps, lopt, step, torch_loss = _trainers(name, defaults, groups, zero_size=variant != "plain")
    for i in range(8):
        if variant == "retuned" and i == 3:
            _retune(topt)
            _retune(lopt)
        _torch_step(topt, torch_loss)
        step(x=X, y=Y)
        _same(tps, lps, f"{name} {variant} step {i + 1}")


@pytest.mark.parametrize("name,added", [
    ("Adam", {"lr": 0.05, "amsgrad": True, "betas": (0.8, 0.95)}),
    ("RMSprop", {"lr": 0.003, "centered": True, "momentum": 0.4}),
    ("RAdam", {"lr": 0.05, "weight_decay": 0.1}),
    ("SGD", {"lr": 0.2, "momentum": 0.8, "dampening": 0.5}),
])
def test_a_group_added_after_steps_counts_its_own_steps_as_torch(name, added):
    """A param group added after three steps (its parameter frozen until then) starts its own step count
    (Adam's bias corrections, RAdam's switch to the rectified step, SGD's first momentum buffer) as torch's
    per-parameter ``step`` does, while the first groups go on from theirs."""
    defaults, groups = GROUPS[name]
    tps = [torch.nn.Parameter(torch.from_numpy(a.copy())) for a in (W0, V0, B0)]
    lps = [nn.Parameter(a.copy()) for a in (W0, V0, B0)]
    tps[2].requires_grad_(False)
    g = lm.Graph()
    x, y = g.input("x", (8, 4)), g.input("y", (8, 2))
    loss = ((x @ lps[0].on(g).T @ lps[1].on(g).T + lps[2].on(g)) - y).pow(2).mean()
    topt = getattr(torch.optim, name)([{"params": [p], **o} for p, o in zip(tps[:2], groups)], **defaults,
                                      foreach=False)
    lopt = getattr(train, name)([{"params": [p], **o} for p, o in zip(lps[:2], groups)], **defaults)
    step = train.compile_step(loss, lopt, backend="cpu")

    def torch_loss():
        return (torch.from_numpy(X) @ tps[0].T @ tps[1].T + tps[2] - torch.from_numpy(Y)).pow(2).mean()

    for i in range(10):
        if i == 3:
            tps[2].requires_grad_(True)
            topt.add_param_group({"params": [tps[2]], **added})
            lopt.add_param_group({"params": [lps[2]], **added})
        _torch_step(topt, torch_loss)
        step(x=X, y=Y)
        _same(tps, lps, f"{name} step {i + 1}")


def _nadam_one_cycle(path=None, load=None, steps=12):
    """NAdam under OneCycleLR (which cycles beta1 by default) through a compiled step, against torch's
    over ``steps`` steps; saved to ``path`` after 6, or resumed from ``load`` (then only luminal runs)."""
    tps, topt, lps, lopt, step, torch_loss = _trainers("NAdam", {"lr": 0.01}, [{}, {"momentum_decay": 0.02}, {}])
    sched = S.OneCycleLR(lopt, max_lr=0.05, total_steps=steps)
    tsched = torch.optim.lr_scheduler.OneCycleLR(topt, max_lr=0.05, total_steps=steps)
    start = 0
    if load is not None:
        train.load_checkpoint(load, optimizer=lopt, scheduler=sched, step=step)
        for p, v in zip(lps, load_params(load)):
            p.set(v)
        start = lopt.steps
    for i in range(start, steps):
        if load is None:
            _torch_step(topt, torch_loss)
            tsched.step()
        step(x=X, y=Y)
        sched.step()
        if load is None:
            _same(tps, lps, f"NAdam under OneCycleLR, step {i + 1}")
            for k, (t, p) in enumerate(zip(tps, lps)):
                assert lopt.mu_products[id(p)] == topt.state[t]["mu_product"].item(), (i, k)
        if path is not None and i == 5:
            train.save_checkpoint(path, optimizer=lopt, scheduler=sched, step=step)
            np.savez(str(path) + ".npz", *[p.data for p in lps])
    return lps


def load_params(path):
    with np.load(str(path) + ".npz") as f:
        return [f[f"arr_{i}"] for i in range(3)]


def test_nadam_under_one_cycle_follows_torchs_mu_product_and_resumes_exactly(tmp_path):
    """OneCycleLR moves beta1 at every step, and torch's NAdam multiplies each step's own momentum into
    its mu_product: the parameters used to drift from torch's by ~4e-5 over 50 steps (the product was
    recomputed from the current beta1 for every past step). Now the product is torch's to the bit, and a
    checkpoint holds it: resumed after 6 of 12 steps, the run ends bit for bit where the uninterrupted did."""
    path = tmp_path / "ck.safetensors"
    full = _nadam_one_cycle(path)
    resumed = _nadam_one_cycle(load=path)
    for a, b in zip(full, resumed):
        np.testing.assert_array_equal(a.data, b.data)


def test_nadam_mu_products_in_a_state_dict_are_checked():
    ps = [nn.Parameter(np.zeros(2, np.float32)) for _ in range(2)]
    sd = train.NAdam(ps).state_dict()
    for bad, match in [({"5": 0.5}, "'5' is not a parameter index"), ({"0": 1.5}, r"mu_products\[0\] must be a "
                       r"number in \[0, 1\], got 1.5"), ([0.5], "mu_products must be a dict")]:
        opt = train.NAdam(ps)
        with pytest.raises(ValueError, match=f"^NAdam.load_state_dict: .*{match}"):
            opt.load_state_dict({**sd, "steps": 1, "mu_products": bad})
        assert opt.steps == 0 and opt.mu_products == {}


def test_a_state_saved_with_another_group_layout_is_refused_as_torch():
    """Three parameters in groups of 1 + 2 saved, loaded into groups of 2 + 1: torch refuses it ("doesn't
    match the size of optimizer's group"), and so does luminal, naming the group and changing nothing."""
    t = [torch.zeros(2, requires_grad=True) for _ in range(3)]
    with pytest.raises(ValueError, match="size of optimizer's group"):
        torch.optim.Adam([{"params": t[:2]}, {"params": t[2:]}]).load_state_dict(
            torch.optim.Adam([{"params": t[:1]}, {"params": t[1:]}]).state_dict())
    ps = [nn.Parameter(np.zeros(2, np.float32)) for _ in range(3)]
    sd = train.Adam([{"params": ps[:1]}, {"params": ps[1:], "lr": 0.5}]).state_dict()
    opt = train.Adam([{"params": ps[:2]}, {"params": ps[2:]}])
    with pytest.raises(ValueError, match=r"^Adam.load_state_dict: group 0 has 1 parameters in the checkpoint, 2 here"):
        opt.load_state_dict(sd)
    assert [g["lr"] for g in opt.param_groups] == [1e-3, 1e-3]


BAD = {"lr": [-0.1], "eps": [-1e-8], "weight_decay": [-0.1], "momentum": [-0.1], "alpha": [-0.1],
       "lr_decay": [-0.1], "initial_accumulator_value": [-0.1], "momentum_decay": [-0.1],
       "betas": [(1.0, 0.9), (0.9, 1.0), (-0.1, 0.9)]}
BAD_CASES = [(name, k, v) for name in GROUPS for k, vs in BAD.items()
             if k in inspect.signature(getattr(torch.optim, name).__init__).parameters for v in vs]


@pytest.mark.parametrize("name,key,value", BAD_CASES, ids=[f"{n}-{k}={v}" for n, k, v in BAD_CASES])
def test_torchs_invalid_hyperparameters_are_value_errors_naming_them(name, key, value):
    with pytest.raises(ValueError):
        getattr(torch.optim, name)([torch.zeros(2, requires_grad=True)], **{key: value})
    what = "betas\\[" if key == "betas" else key
    for make in (lambda p: getattr(train, name)(p, **{key: value}),
                 lambda p: getattr(train, name)([{"params": p, key: value}]),
                 lambda p: getattr(train, name)(p[:1]).add_param_group({"params": p[1:], key: value})):
        with pytest.raises(ValueError, match=f"^{name}: invalid {what}"):
            make([nn.Parameter(np.zeros(2, np.float32)) for _ in range(2)])


@pytest.mark.parametrize("where", ["group", "top"])
def test_params_in_a_set_are_refused(where):
    """A set's order follows the parameters' hashes, different in every run, and the state dict maps state
    to parameters by position: torch refuses a group's params given as a set; luminal refuses that, and a
    set as the whole params too (torch takes it, and a resumed run could load Adam's moments of one
    parameter into another of the same shape)."""
    ps = {nn.Parameter(np.zeros(2, np.float32)), nn.Parameter(np.zeros(2, np.float32))}
    if where == "group":
        with pytest.raises(TypeError, match="ordered collections"):
            torch.optim.Adam([{"params": {torch.zeros(2, requires_grad=True)}}])
    params = [{"params": ps}] if where == "group" else ps
    what = "param group 0's params" if where == "group" else "params"
    with pytest.raises(TypeError, match=f"^Adam: {what} is a set; give the parameters in an ordered collection"):
        train.Adam(params)
    opt = train.SGD([nn.Parameter(np.zeros(2, np.float32))])
    with pytest.raises(TypeError, match="^SGD: param group 1's params is a frozenset"):
        opt.add_param_group({"params": frozenset(ps)})
    assert len(opt.param_groups) == 1


@pytest.mark.parametrize("key,value,match", [
    ("lr", "0.05", "lr'\\] must be a number, got str '0.05'"),
    ("lr", None, "lr'\\] must be a number, got NoneType None"),
    ("lr", np.array([0.05]), "lr'\\] must be a number, got ndarray"),
    ("betas", (0.9,), "betas'\\] must be a tuple of 2 numbers, got \\(0.9,\\)"),
    ("weight_decay", "0.1", "weight_decay'\\] must be a number"),
])
def test_a_hyperparameter_edited_into_a_non_number_is_named_at_the_next_step(key, value, match):
    """``param_groups[i][k] = v`` bypasses the constructor's checks; a str or None failed inside the host
    arithmetic of the step's scalars (``unsupported operand type(s) for /: 'str' and 'float'``), naming
    neither the optimizer nor the key. A numpy scalar or 0-d array (a numpy schedule's value) still works."""
    w = nn.Parameter(np.ones((2, 2), np.float32))
    g = lm.Graph()
    x = g.input("x", (2, 2))
    opt = train.Adam([{"params": [w], "weight_decay": 0.1}], lr=0.1)
    step = train.compile_step((x @ w.on(g)).sum(), opt, backend="reference")
    ones = np.ones((2, 2), np.float32)
    step(x=ones)
    opt.param_groups[0][key] = value
    with pytest.raises(TypeError, match=f"^Adam: param_groups\\[0\\]\\['{match}"):
        step(x=ones)
    for ok in (np.float32(0.05), np.array(0.05), 0.05):
        opt.param_groups[0].update(lr=ok, betas=(0.9, 0.999), weight_decay=0.1)
        step(x=ones)
    assert step.calls == 4


# ------------------------------------------------------------------------------------------ schedulers
def _close(a, b, what):
    assert len(a) == len(b) and all(abs(x - y) <= 1e-12 * abs(y) for x, y in zip(a, b)), f"{what}: {a} vs {b}"


RESUME = [
    ("StepLR", {"step_size": 7, "gamma": 0.5}, "SGD", {}),
    ("MultiStepLR", {"milestones": [3, 5, 17, 17], "gamma": 0.3}, "SGD", {}),
    ("ExponentialLR", {"gamma": 0.93}, "RMSprop", {}),
    ("CosineAnnealingLR", {"T_max": 10, "eta_min": 0.001}, "SGD", {}),
    ("LinearLR", {"start_factor": 0.1, "end_factor": 0.7, "total_iters": 20}, "Adagrad", {}),
    ("ConstantLR", {"factor": 0.5, "total_iters": 8}, "Adam", {}),
    ("PolynomialLR", {"total_iters": 20, "power": 2.0}, "AdamW", {}),
    ("OneCycleLR", {"max_lr": 0.5, "total_steps": 50}, "SGD", {"momentum": 0.9}),
    ("OneCycleLR", {"max_lr": [0.01, 0.02], "total_steps": 50, "three_phase": True, "anneal_strategy": "linear"},
     "Adam", {}),
    ("LambdaLR", {"lr_lambda": lambda e: 0.9**e}, "SGD", {}),
    ("MultiplicativeLR", {"lr_lambda": lambda e: 0.95}, "SGD", {}),
    ("CosineAnnealingWarmRestarts", {"T_0": 3, "T_mult": 2, "eta_min": 1e-3}, "AdamW", {}),
    ("CyclicLR", {"base_lr": 0.01, "max_lr": 0.1, "step_size_up": 5}, "SGD", {"momentum": 0.9}),
    ("CyclicLR", {"base_lr": 0.001, "max_lr": 0.006, "step_size_up": 3, "mode": "exp_range", "gamma": 0.97},
     "AdamW", {}),
]


@pytest.mark.parametrize("k", [0, 4, 12])
@pytest.mark.parametrize("name,kw,opt_name,opt_kw", RESUME, ids=[f"{c[0]}-{i}" for i, c in enumerate(RESUME)])
def test_a_scheduler_rebuilt_with_last_epoch_continues_as_torchs(name, kw, opt_name, opt_kw, k):
    """k steps of a scheduler, then a new one built on the same optimizer with ``last_epoch=k`` (torch's
    way to resume: its constructor steps once more from the groups' rates): 30 more steps (to the end of
    OneCycleLR's) follow torch's rates, momenta and betas."""
    o, t = make_optimizers(opt_name, **opt_kw)
    s, ts = getattr(S, name)(o, **kw), getattr(torch.optim.lr_scheduler, name)(t, **kw)
    for _ in range(k):
        s.step(), ts.step()
    s, ts = getattr(S, name)(o, **kw, last_epoch=k), getattr(torch.optim.lr_scheduler, name)(t, **kw, last_epoch=k)
    for i in range(30 if name != "OneCycleLR" else 48 - k):
        _close(snapshot(o), snapshot(t), f"{name} resumed at {k}, step {i}")
        _close(s.get_last_lr(), ts.get_last_lr(), f"{name} get_last_lr resumed at {k}, step {i}")
        assert s.last_epoch == ts.last_epoch
        s.step(), ts.step()


NESTED = {  # name -> builder over (scheduler module, optimizer, module holding ChainedScheduler)
    "seq-onecycle": lambda m, o, c: m.SequentialLR(o, [m.LinearLR(o, start_factor=0.1, total_iters=5),
                                                       m.OneCycleLR(o, max_lr=0.3, total_steps=40)], [5]),
    "seq-cyclic": lambda m, o, c: m.SequentialLR(o, [m.ConstantLR(o, factor=0.5, total_iters=3),
                                                     m.CyclicLR(o, 0.01, 0.1, step_size_up=4)], [6]),
    "chain-onecycle": lambda m, o, c: c.ChainedScheduler([m.OneCycleLR(o, max_lr=0.3, total_steps=50),
                                                          m.ExponentialLR(o, gamma=0.99)], optimizer=o),
    "chain-cyclic": lambda m, o, c: c.ChainedScheduler([m.CyclicLR(o, 0.01, 0.1, step_size_up=4, mode="triangular2"),
                                                        m.ExponentialLR(o, gamma=0.95)], optimizer=o),
    "chain-of-seq": lambda m, o, c: c.ChainedScheduler(
        [m.SequentialLR(o, [m.LinearLR(o, start_factor=0.1, total_iters=5), m.ExponentialLR(o, gamma=0.9)], [5]),
         m.ConstantLR(o, factor=0.5, total_iters=7)], optimizer=o),
    "seq-of-chain": lambda m, o, c: m.SequentialLR(o, [c.ChainedScheduler(
        [m.LinearLR(o, start_factor=0.1, total_iters=5), m.ExponentialLR(o, gamma=0.9)], optimizer=o), m.StepLR(o, 3)],
        [8]),
    "seq-of-seq": lambda m, o, c: m.SequentialLR(o, [m.SequentialLR(
        o, [m.LinearLR(o, start_factor=0.1, total_iters=5), m.ExponentialLR(o, gamma=0.9)], [5]), m.StepLR(o, 3)], [8]),
    "seq-same-milestone": lambda m, o, c: m.SequentialLR(o, [m.LinearLR(o, start_factor=0.1, total_iters=5),
                                                             m.ExponentialLR(o, gamma=0.9), m.StepLR(o, 2)], [4, 4]),
    "seq-last-epoch": lambda m, o, c: m.SequentialLR(o, [m.LinearLR(o, start_factor=0.1, total_iters=5),
                                                         m.ExponentialLR(o, gamma=0.9)], [5], last_epoch=3),
}


@pytest.mark.parametrize("opt_name,opt_kw", [("SGD", {"momentum": 0.9}), ("Adam", {})])
@pytest.mark.parametrize("case", list(NESTED))
def test_nested_schedulers_match_torch(case, opt_name, opt_kw):
    o, t = make_optimizers(opt_name, **opt_kw)
    s, ts = NESTED[case](S, o, train), NESTED[case](torch.optim.lr_scheduler, t, torch.optim.lr_scheduler)
    for i in range(40):
        _close(snapshot(o), snapshot(t), f"{case} step {i}")
        _close(s.get_last_lr(), ts.get_last_lr(), f"{case} get_last_lr step {i}")
        s.step(), ts.step()


ONE_CYCLE = [(n, pct, three, strat) for n in (1, 2, 3, 40) for pct in (0.0, 0.3, 0.5, 1.0)
             for three in (False, True) for strat in ("cos", "linear")]


@pytest.mark.parametrize("total,pct,three,strat", ONE_CYCLE)
def test_one_cycle_small_and_extreme_layouts_match_torch(total, pct, three, strat):
    """Every step torch computes (to ``total_steps`` itself, where its linear anneal overshoots) for 1 to 3
    and 40 steps, warm-ups of 0 % to 100 %, two or three phases, cos or linear, beta1 cycling; a layout that
    leaves a phase no steps raises where torch divides 0 by 0 (see the next test)."""
    kw = dict(max_lr=[0.3, 0.2], total_steps=total, pct_start=pct, three_phase=three, anneal_strategy=strat)
    o, t = make_optimizers("Adam")
    try:
        ts = torch.optim.lr_scheduler.OneCycleLR(t, **kw)
    except ZeroDivisionError:
        with pytest.raises(ValueError, match="^OneCycleLR: step 0 falls in phase 1 of .*, which has no steps"):
            S.OneCycleLR(o, **kw)
        return
    s = S.OneCycleLR(o, **kw)
    for i in range(total + 1):
        _close(snapshot(o), snapshot(t), f"OneCycleLR {kw} step {i}")
        if i == total:
            break
        try:
            ts.step()
        except ZeroDivisionError:
            with pytest.raises(ValueError, match="which has no steps"):
                s.step()
            return
        s.step()


def test_one_cycle_with_an_empty_phase_names_it_and_changes_nothing():
    """pct_start * total_steps = 1 makes the warm-up phase start and end at step 0 (torch: ZeroDivisionError
    from its constructor, after it has written initial_lr, max_lr and the momentum into the groups); with
    pct_start=1.0 the last phase is empty and only the step past the schedule's end falls in it."""
    o = train.SGD([nn.Parameter(np.zeros(1, np.float32))], lr=0.3, momentum=0.5)
    with pytest.raises(ValueError, match=r"^OneCycleLR: step 0 falls in phase 1 of 2, which has no steps .*"
                                         r"pct_start \* total_steps = 1 with total_steps=4; choose a pct_start"):
        S.OneCycleLR(o, max_lr=0.1, total_steps=4, pct_start=0.25)
    assert {k: v for k, v in o.param_groups[0].items() if k != "params"} == dict(
        lr=0.3, momentum=0.5, dampening=0, weight_decay=0, nesterov=False, maximize=False)
    s = S.OneCycleLR(o, max_lr=0.1, total_steps=3, pct_start=1.0)
    s.step(), s.step()
    assert s.get_last_lr() == [0.1]
    with pytest.raises(ValueError, match="^OneCycleLR: step 3 falls in phase 2 of 2, which has no steps"):
        s.step()
    assert s.last_epoch == 2 and s.get_last_lr() == [0.1]


@pytest.mark.parametrize("t_0,t_mult", [(1, 3), (2, 3), (5, 3), (1, 2), (3, 5), (7, 4)])
def test_warm_restarts_step_epoch_at_every_restart_is_the_base_rate(t_0, t_mult):
    """``step(epoch)`` at each restart epoch ``T_0 (T_mult**n - 1) / (T_mult - 1)`` restarts the cosine at
    the base rate, and half an epoch before it is half an epoch from the end of the period. torch's float
    ``log(..., T_mult)`` counts one restart too few at some (``log(243, 3)`` = 4.999...: epoch 121 with
    ``T_0=1, T_mult=3``), giving eta_min there; luminal's count is exact."""
    lo, base = 0.01, 1.0
    o = train.SGD([nn.Parameter(np.zeros(1, np.float32))], lr=base)
    s = S.CosineAnnealingWarmRestarts(o, T_0=t_0, T_mult=t_mult, eta_min=lo)
    for n in range(1, 12):
        restart, period = t_0 * (t_mult**n - 1) // (t_mult - 1), t_0 * t_mult ** (n - 1)
        s.step(restart)
        assert (s.T_cur, s.T_i, s.get_last_lr()) == (0, t_0 * t_mult**n, [base]), (n, restart)
        s.step(restart - 0.5)
        want = lo + (base - lo) * (1 + math.cos(math.pi * (period - 0.5) / period)) / 2
        assert s.T_i == period and s.T_cur == period - 0.5
        assert abs(s.get_last_lr()[0] - want) <= 1e-12, (n, restart)


def test_warm_restarts_step_epoch_matches_torch_away_from_its_rounding():
    """Fractional epochs over 60 epochs with T_mult=2 and 3 (no restart epoch where torch's log rounds
    down): the same rates as torch's."""
    for t_mult in (2, 3):
        o, t = make_optimizers("SGD")
        s = S.CosineAnnealingWarmRestarts(o, T_0=2, T_mult=t_mult, eta_min=1e-3)
        ts = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(t, T_0=2, T_mult=t_mult, eta_min=1e-3)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for e in np.arange(0, 60, 0.25):
                s.step(float(e)), ts.step(float(e))
                _close(s.get_last_lr(), ts.get_last_lr(), f"T_mult={t_mult} epoch {e}")


CHAINABLE = {"StepLR": {"step_size": 2}, "MultiStepLR": {"milestones": [1, 4]}, "ExponentialLR": {"gamma": 0.9},
             "LinearLR": {}, "PolynomialLR": {}, "ConstantLR": {}, "CosineAnnealingLR": {"T_max": 4}}
FIXED = {"LambdaLR": {"lr_lambda": lambda e: 0.9**e}, "MultiplicativeLR": {"lr_lambda": lambda e: 0.9},
         "OneCycleLR": {"max_lr": 0.1, "total_steps": 20}, "CosineAnnealingWarmRestarts": {"T_0": 3},
         "CyclicLR": {"base_lr": 0.01, "max_lr": 0.1, "step_size_up": 3}}


@pytest.mark.parametrize("name", list(CHAINABLE))
def test_a_group_added_after_a_chainable_scheduler_is_scheduled_as_torchs(name):
    """A param group added after the scheduler was built: a scheduler whose step multiplies the current
    rates (torch's chainable form) schedules it from its own rate, as torch's (CosineAnnealingLR up to the
    bottom of its cosine, whose next step reads the base rates: see the next test)."""
    o, t = make_optimizers("SGD", momentum=0.9)
    s, ts = getattr(S, name)(o, **CHAINABLE[name]), getattr(torch.optim.lr_scheduler, name)(t, **CHAINABLE[name])
    s.step(), ts.step()
    o.add_param_group({"params": [nn.Parameter(np.zeros(2, np.float32))], "lr": 0.5})
    t.add_param_group({"params": [torch.zeros(2, requires_grad=True)], "lr": 0.5})
    for i in range(3 if name == "CosineAnnealingLR" else 8):
        s.step(), ts.step()
        _close(snapshot(o), snapshot(t), f"{name} step {i} after the group was added")


@pytest.mark.parametrize("name", [*FIXED, "CosineAnnealingLR", "StepLR.step(epoch)"])
def test_a_group_added_after_a_scheduler_of_fixed_rates_is_named(name):
    """Schedulers whose rates read values fixed per group when built (base rates, lr_lambdas, max_lr, a
    group's initial_lr) have none for a group added since: torch's fail with ``zip() argument 2 is shorter
    than argument 1`` or ``KeyError: 'initial_lr'`` (or, for CosineAnnealingLR at the bottom of its cosine
    and a closed-form step(epoch), leave the new group unscheduled). luminal's say so, naming the scheduler
    and the counts, and change nothing."""
    cls = name.split(".")[0]
    kw = {**CHAINABLE, **FIXED}[cls]
    o, _ = make_optimizers("SGD", momentum=0.9)
    s = getattr(S, cls)(o, **kw)
    for _ in range(4 if cls == "CosineAnnealingLR" else 1):
        s.step()
    o.add_param_group({"params": [nn.Parameter(np.zeros(2, np.float32))], "lr": 0.5})
    before, epoch = snapshot(o), s.last_epoch
    with pytest.raises(ValueError, match=f"^{cls}.step: the optimizer has 3 param groups, and this {cls} was built "
                                         f"for 2: .* build the scheduler after adding the group"):
        if name.endswith("(epoch)"):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                s.step(5)
        else:
            s.step()
    assert snapshot(o) == before and s.last_epoch == epoch
