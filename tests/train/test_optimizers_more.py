"""NAdam, RAdam and Adamax against torch.optim (single-tensor CPU path), as tests/train/test_optimizers.py
checks the others: the update graph alone, fed gradients directly, compared parameter by parameter and
state by state after every step; then through ``train.compile_step`` and a checkpoint round trip."""

from __future__ import annotations

import inspect

import numpy as np
import optimizer_parity
import pytest
import torch

import luminal as lm
from luminal import nn, train
from luminal.nn.parameter import Parameter

OURS = {"NAdam": train.NAdam, "RAdam": train.RAdam, "Adamax": train.Adamax}
THEIRS = {"NAdam": torch.optim.NAdam, "RAdam": torch.optim.RAdam, "Adamax": torch.optim.Adamax}


def run_both(name, kwargs, **kw):
    """``optimizer_parity.run_both`` of luminal's and torch's ``name``, every state compared."""
    return optimizer_parity.run_both(OURS[name], THEIRS[name], kwargs, **kw)


CASES = [
    ("NAdam", {}),
    ("NAdam", {"lr": 0.01, "betas": (0.8, 0.99), "eps": 1e-6, "momentum_decay": 0.01}),
    ("NAdam", {"lr": 0.01, "weight_decay": 0.1}),
    ("NAdam", {"lr": 0.01, "weight_decay": 0.1, "decoupled_weight_decay": True}),
    ("NAdam", {"lr": 0.01, "weight_decay": 0.05, "maximize": True, "momentum_decay": 0.0}),
    ("RAdam", {}),
    ("RAdam", {"lr": 0.01, "betas": (0.8, 0.9), "eps": 1e-6}),
    ("RAdam", {"lr": 0.01, "weight_decay": 0.1}),
    ("RAdam", {"lr": 0.01, "weight_decay": 0.1, "decoupled_weight_decay": True, "maximize": True}),
    ("Adamax", {}),
    ("Adamax", {"lr": 0.01, "betas": (0.8, 0.99), "eps": 1e-3}),
    ("Adamax", {"lr": 0.01, "weight_decay": 0.1}),
    ("Adamax", {"lr": 0.01, "weight_decay": 0.1, "maximize": True}),
]
IDS = [f"{n}-{k}" for n, k in CASES]


@pytest.mark.parametrize("name,kwargs", CASES, ids=IDS)
def test_one_step_matches_torch(name, kwargs):
    run_both(name, kwargs, steps=1)


@pytest.mark.parametrize("name,kwargs", CASES, ids=IDS)
def test_five_steps_match_torch(name, kwargs):
    run_both(name, kwargs, steps=5, seed=1)


@pytest.mark.parametrize("kwargs", [{"lr": 0.01}, {"lr": 0.01, "betas": (0.5, 0.9), "weight_decay": 0.1}])
def test_radam_switches_to_the_rectified_step_in_one_program(kwargs):
    """torch's RAdam takes plain momentum steps until rho_t > 5 (step 6 here) and the rectified adaptive
    step from then on; one compiled program does both, the choice a pair of runtime scalars."""
    opt, _ = run_both("RAdam", kwargs, steps=9, seed=5)
    assert opt.scalars(opt.param_groups[0], 5)["plain"] == 1.0
    assert opt.scalars(opt.param_groups[0], 6)["plain"] == 0.0


def test_nadam_mu_product_over_many_steps():
    """NAdam's mu_product (torch's float32 state) is computed on the host: 40 steps, past the point
    where it underflows its first digits, still match torch; a fresh optimizer asked for a late step
    (a resumed run) computes the same product as one that got there step by step."""
    opt, topt = run_both("NAdam", {"lr": 0.01, "momentum_decay": 0.05}, steps=40, seed=6)
    tp = topt.param_groups[0]["params"][0]
    assert opt.mu_product(0.9, 0.05, 40) == topt.state[tp]["mu_product"].item()
    fresh = train.NAdam([Parameter(np.zeros(2, np.float32))], momentum_decay=0.05)
    assert fresh.mu_product(0.9, 0.05, 40) == opt.mu_product(0.9, 0.05, 40)


@pytest.mark.parametrize("name,group_opts", [
    ("NAdam", [{"lr": 0.02, "momentum_decay": 0.01}, {"betas": (0.5, 0.9), "weight_decay": 0.1}]),
    ("RAdam", [{"lr": 0.02, "weight_decay": 0.1, "decoupled_weight_decay": True}, {"betas": (0.5, 0.9)}]),
    ("Adamax", [{"lr": 0.02}, {"betas": (0.5, 0.9), "weight_decay": 0.1, "eps": 1e-4}]),
])
def test_param_groups_match_torch(name, group_opts):
    run_both(name, {"lr": 0.01}, steps=7, group_opts=group_opts, seed=2)


def test_defaults_match_torch():
    """The same arguments, defaults and kinds (positional or keyword-only: Adamax's ``foreach`` is
    positional in torch's signature, NAdam's and RAdam's keyword-only)."""
    for name, ours in OURS.items():
        theirs = inspect.signature(THEIRS[name].__init__).parameters
        mine = inspect.signature(ours.__init__).parameters
        assert list(mine) == list(theirs), name
        for k, v in mine.items():
            assert v.kind == theirs[k].kind, (name, k)
            if k not in ("self", "params"):
                assert v.default == theirs[k].default, (name, k)


def test_state_names():
    p = [Parameter(np.zeros(3, np.float32))]
    assert train.NAdam(p).state_names == ("exp_avg", "exp_avg_sq")
    assert train.RAdam(p).state_names == ("exp_avg", "exp_avg_sq")
    assert train.Adamax(p).state_names == ("exp_avg", "exp_inf")


@pytest.mark.parametrize("name", list(OURS))
def test_torchs_kernel_flags_are_taken_and_change_nothing(name):
    run_both(name, {"lr": 0.01, "capturable": False}, steps=2)
    OURS[name]([Parameter(np.ones(2, np.float32))], foreach=True)
    with pytest.raises(ValueError, match=f"^{name}: differentiable=True .* is not supported"):
        OURS[name]([Parameter(np.ones(2, np.float32))], differentiable=True)
    with pytest.raises(TypeError, match=f"^{name}: foreach must be None, True or False, got 'yes'"):
        OURS[name]([Parameter(np.ones(2, np.float32))], foreach="yes")
    with pytest.raises(TypeError):  # (torch's have no fused kernel for these)
        OURS[name]([Parameter(np.ones(2, np.float32))], fused=True)


@pytest.mark.parametrize("make,msg", [
    (lambda p: train.NAdam(p, lr=-0.1), "NAdam: invalid lr"),
    (lambda p: train.NAdam(p, momentum_decay=-1), "NAdam: invalid momentum_decay"),
    (lambda p: train.NAdam([{"params": p, "momentum_decay": -1.0}]), "NAdam: invalid momentum_decay"),
    (lambda p: train.RAdam(p, betas=(1.0, 0.999)), r"RAdam: invalid betas\[0\]"),
    (lambda p: train.RAdam(p, weight_decay=-1), "RAdam: invalid weight_decay"),
    (lambda p: train.Adamax(p, betas=(0.9, -0.1)), r"Adamax: invalid betas\[1\]"),
    (lambda p: train.Adamax(p, eps=0.0), "Adamax: invalid eps"),
    (lambda p: train.Adamax([{"params": p, "betas": (0.9,)}]), "Adamax: betas must be a pair"),
])
def test_invalid_arguments(make, msg):
    with pytest.raises(ValueError, match=msg):
        make([Parameter(np.zeros(2, np.float32))])


X = np.random.default_rng(0).standard_normal((8, 4)).astype(np.float32)
Y = np.array([0, 1, 2, 1, 0, 2, 2, 1], np.int32)


def _trainer(opt_cls, kwargs):
    lm.manual_seed(3)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3))
    g = lm.Graph()
    x, y = g.input("x", (8, 4)), g.input("y", (8,), dtype=lm.int32)
    opt = opt_cls(model.parameters(), **kwargs)
    return model, opt, train.compile_step(train.cross_entropy(model(x), y), opt, backend="reference")


CHECKPOINT_CASES = [
    ("NAdam", {"lr": 0.01, "weight_decay": 0.01, "decoupled_weight_decay": True}),
    ("RAdam", {"lr": 0.01, "weight_decay": 0.01}),
    ("Adamax", {"lr": 0.01, "weight_decay": 0.01}),
]


@pytest.mark.parametrize("name,kwargs", CHECKPOINT_CASES, ids=[n for n, _ in CHECKPOINT_CASES])
def test_compile_step_matches_torch_and_checkpoint_continues_exactly(tmp_path, name, kwargs):
    """Through ``train.compile_step`` (autograd and the update in one program) 8 steps follow torch's
    (RAdam's switch at step 6 included); saved after 4 and loaded into a freshly built trainer, the
    next 4 steps give bit for bit the parameters of the uninterrupted run."""
    model, opt, step = _trainer(OURS[name], kwargs)
    tmodel = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
    tmodel.load_state_dict({k: torch.tensor(v) for k, v in model.state_dict().items()})
    topt = THEIRS[name](tmodel.parameters(), **kwargs, foreach=False)
    path = tmp_path / "ck.safetensors"
    for i in range(8):
        step(x=X, y=Y)
        topt.zero_grad()
        torch.nn.functional.cross_entropy(tmodel(torch.tensor(X)), torch.tensor(Y).long()).backward()
        topt.step()
        for k, v in tmodel.state_dict().items():
            np.testing.assert_allclose(model.state_dict()[k], v.numpy(), rtol=1e-5, atol=1e-6,
                                       err_msg=f"{name} {k} after step {i + 1}")
        if i == 3:
            train.save_checkpoint(path, model=model, optimizer=opt, step=step)
    model2, opt2, step2 = _trainer(OURS[name], kwargs)
    train.load_checkpoint(path, model=model2, optimizer=opt2, step=step2)
    for _ in range(4):
        step2(x=X, y=Y)
    for k, v in model.state_dict().items():
        np.testing.assert_array_equal(model2.state_dict()[k], v, err_msg=f"{name} {k} after resuming")
