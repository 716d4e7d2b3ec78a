"""Adadelta, Rprop, ASGD, Adafactor and Muon against torch.optim (single-tensor CPU path), as
tests/train/test_optimizers_more.py checks NAdam, RAdam and Adamax: the update graph alone, fed
gradients directly, every parameter and state compared after every step (float32 and float64, param
groups, lr changed between steps); then torch's signatures and argument checks, ``train.compile_step``
with a checkpoint round trip, and SparseAdam's refusal."""

from __future__ import annotations

import inspect

import numpy as np
import optimizer_parity
import pytest
import torch

import luminal as lm
from luminal import nn, train
from luminal.nn.parameter import Parameter


def _torch_muon(params, foreach=None, **kwargs):
    """torch.optim.Muon, which takes no ``foreach`` (the harness passes foreach=False)."""
    return torch.optim.Muon(params, **kwargs)


OURS = {"Adadelta": train.Adadelta, "Rprop": train.Rprop, "ASGD": train.ASGD, "Adafactor": train.Adafactor,
        "Muon": train.Muon}
THEIRS = {"Adadelta": torch.optim.Adadelta, "Rprop": torch.optim.Rprop, "ASGD": torch.optim.ASGD,
          "Adafactor": torch.optim.Adafactor, "Muon": _torch_muon}
SHAPES = {"Muon": [(3, 4), (6, 2)], "Adafactor": [(3, 4), (5,), (2, 3, 4), ()]}


def run_both(name, kwargs, **kw):
    """``optimizer_parity.run_both`` of luminal's and torch's ``name``, every state compared."""
    return optimizer_parity.run_both(OURS[name], THEIRS[name], kwargs, shapes=SHAPES.get(name), **kw)


CASES = [
    ("Adadelta", {}),
    ("Adadelta", {"lr": 0.5, "rho": 0.5, "eps": 1e-4}),
    ("Adadelta", {"lr": 0.5, "weight_decay": 0.1, "maximize": True}),
    ("Rprop", {}),
    ("Rprop", {"lr": 0.05, "etas": (0.3, 1.5), "step_sizes": (0.01, 0.07)}),
    ("Rprop", {"lr": 0.05, "maximize": True}),
    ("ASGD", {"lr": 0.05}),
    ("ASGD", {"lr": 0.05, "lambd": 0.1, "alpha": 0.5, "t0": 2, "weight_decay": 0.1}),
    ("ASGD", {"lr": 0.05, "t0": 0, "maximize": True}),
    ("Adafactor", {}),
    ("Adafactor", {"lr": 0.5, "beta2_decay": -0.5, "eps": (1e-3, 1e-2), "d": 1.5}),
    ("Adafactor", {"lr": 0.05, "weight_decay": 0.1, "maximize": True}),
    ("Muon", {"lr": 0.02}),
    ("Muon", {"lr": 0.02, "nesterov": False, "adjust_lr_fn": "match_rms_adamw", "weight_decay": 0.0}),
    ("Muon", {"lr": 0.05, "momentum": 0.5, "ns_steps": 3, "ns_coefficients": (2.0, -1.5, 0.5), "eps": 1e-5}),
]
IDS = [f"{n}-{k}" for n, k in CASES]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name,kwargs", CASES, ids=IDS)
def test_six_steps_match_torch(name, kwargs, dtype):
    run_both(name, kwargs, steps=6, seed=1, dtype=dtype)


def test_rprop_sign_logic_over_many_steps():
    """20 steps of gradients whose signs flip often: step sizes grow, shrink and reach the lower clamp,
    and a flipped element sits its step out, as torch's (the upper clamp: the cases above)."""
    opt, topt = run_both("Rprop", {"lr": 0.03, "etas": (0.4, 1.5), "step_sizes": (0.005, 0.05)}, steps=20, seed=4)
    sizes = opt.state_for(opt.param_groups[0]["params"][0])["step_size"].data
    assert np.float32(0.005) in sizes and len(np.unique(sizes)) > 4


def test_asgd_averaging_starts_after_t0():
    """With t0 = 3, ``ax`` is the parameter itself for the first steps and a running average after;
    ``eta`` and ``mu`` (float32 scalars, torch's dtype) follow torch's step by step."""
    opt, _ = run_both("ASGD", {"lr": 0.1, "t0": 3, "lambd": 0.01}, steps=8, seed=3, dtype=np.float64)
    p = opt.param_groups[0]["params"][0]
    st = opt.state_for(p)
    assert st["eta"].data.dtype == np.float32 and st["eta"].data.shape == ()
    assert float(st["mu"].data) == np.float32(1 / (8 - 3))
    assert not np.allclose(st["ax"].data, p.data)


def test_adafactor_factored_state_shapes():
    """A parameter of 2 or more dims keeps row and column factors (torch's shapes), others the full
    variance."""
    opt, topt = run_both("Adafactor", {}, steps=1)
    for p, tp in zip(opt.param_groups[0]["params"], topt.param_groups[0]["params"]):
        ours = {n: s.data.shape for n, s in opt.state_for(p).items()}
        assert ours == {n: tuple(v.shape) for n, v in topt.state[tp].items() if n != "step"}


@pytest.mark.parametrize("name,group_opts", [
    ("Adadelta", [{"lr": 0.3, "rho": 0.7}, {"weight_decay": 0.1, "eps": 1e-3}]),
    ("Rprop", [{"lr": 0.03, "etas": (0.4, 1.1)}, {"step_sizes": (1e-3, 0.02), "maximize": True}]),
    ("ASGD", [{"lr": 0.02, "t0": 1}, {"lambd": 0.05, "alpha": 0.9, "weight_decay": 0.1}]),
    ("Adafactor", [{"lr": 0.02, "d": 2.0}, {"beta2_decay": -0.6, "weight_decay": 0.1}, {"eps": (1e-4, 1e-3)}, {}]),
    ("Muon", [{"lr": 0.03, "nesterov": False}, {"momentum": 0.8, "adjust_lr_fn": "match_rms_adamw"}]),
])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_param_groups_match_torch(name, group_opts, dtype):
    run_both(name, {"lr": 0.01}, steps=5, group_opts=group_opts, seed=2, dtype=dtype)


class _LrChange:
    """Multiplies every group's lr of both optimizers by ``factor`` after each step (a scheduler)."""

    def __init__(self, opts, factor):
        self.opts, self.factor = opts, factor

    def step(self):
        for opt in self.opts:
            for g in opt.param_groups:
                g["lr"] *= self.factor


@pytest.mark.parametrize("name,kwargs", [("Adadelta", {"lr": 0.5}), ("Rprop", {"lr": 0.05}),
                                         ("ASGD", {"lr": 0.05, "lambd": 0.1, "t0": 2}),
                                         ("Adafactor", {"lr": 0.5, "weight_decay": 0.1}),
                                         ("Muon", {"lr": 0.05})])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_lr_changed_between_steps_matches_torch(name, kwargs, dtype):
    """lr edited in the groups between steps, as a scheduler does: the compiled update reads it at
    run time (ASGD's next eta comes from this step's lr; Rprop's lr only seeds the step sizes)."""
    run_both(name, kwargs, steps=6, seed=5, dtype=dtype, schedulers=lambda o, t: [_LrChange([o, t], 0.7)])


def test_defaults_match_torch():
    """The same arguments, defaults and kinds (positional or keyword-only) as torch's constructors."""
    for name, ours in OURS.items():
        theirs = inspect.signature((torch.optim.Muon if name == "Muon" else THEIRS[name]).__init__).parameters
        mine = inspect.signature(ours.__init__).parameters
        assert list(mine) == list(theirs), name
        for k, v in mine.items():
            assert v.kind == theirs[k].kind, (name, k)
            if k not in ("self", "params"):
                assert v.default == theirs[k].default, (name, k)
    for name in ("LBFGS", "SparseAdam"):
        assert list(inspect.signature(getattr(train, name).__init__).parameters) == \
            list(inspect.signature(getattr(torch.optim, name).__init__).parameters)


@pytest.mark.parametrize("name", ["Adadelta", "Rprop", "ASGD"])
def test_torchs_kernel_flags_are_taken_and_change_nothing(name):
    run_both(name, {"lr": 0.01, "capturable": False}, steps=2)
    OURS[name]([Parameter(np.ones(2, np.float32))], foreach=True)
    with pytest.raises(ValueError, match=f"^{name}: differentiable=True .* is not supported"):
        OURS[name]([Parameter(np.ones(2, np.float32))], differentiable=True)
    with pytest.raises(TypeError, match=f"^{name}: foreach must be None, True or False, got 'yes'"):
        OURS[name]([Parameter(np.ones(2, np.float32))], foreach="yes")


@pytest.mark.parametrize("make,err,msg", [
    (lambda p: train.Adadelta(p, rho=1.5), ValueError, r"Adadelta: invalid rho 1.5 \(must be in \[0, 1\]\)"),
    (lambda p: train.Adadelta(p, eps=0.0), ValueError, "Adadelta: invalid eps"),
    (lambda p: train.Adadelta(p, lr=-1), ValueError, "Adadelta: invalid lr"),
    (lambda p: train.Rprop(p, etas=(1.2, 0.5)), ValueError, "Rprop: invalid etas"),
    (lambda p: train.Rprop(p, etas=(0.5,)), ValueError, "Rprop: etas must be a tuple of 2 numbers"),
    (lambda p: train.Rprop(p, step_sizes=(1.0, 0.1)), ValueError, "Rprop: invalid step_sizes"),
    (lambda p: train.Rprop(p, step_sizes=(None, 1)), TypeError, r"Rprop: step_sizes\[0\] must be a number"),
    (lambda p: train.Rprop([{"params": p, "etas": (0.5, 0.9)}]), ValueError, "Rprop: invalid etas"),
    (lambda p: train.ASGD(p, weight_decay=-0.1), ValueError, "ASGD: invalid weight_decay"),
    (lambda p: train.ASGD(p, t0="10"), TypeError, "ASGD: t0 must be a number"),
    (lambda p: train.Adafactor(p, beta2_decay=0.5), ValueError, "Adafactor: invalid beta2_decay"),
    (lambda p: train.Adafactor(p, d=0.5), ValueError, "Adafactor: invalid d"),
    (lambda p: train.Adafactor(p, eps=(0.0, 1e-3)), ValueError, r"Adafactor: invalid eps\[0\]"),
    (lambda p: train.Adafactor(p, eps=(None, -1.0)), ValueError, r"Adafactor: invalid eps\[1\]"),
    (lambda p: train.Adafactor(p, eps=1e-3), TypeError, "Adafactor: eps must be a tuple of 2 numbers"),
    (lambda p: train.Muon(p, adjust_lr_fn="rms"), ValueError, "Muon: adjust_lr_fn 'rms' is not supported"),
    (lambda p: train.Muon(p, ns_steps=100), ValueError, "Muon: invalid ns_steps"),
    (lambda p: train.Muon(p, ns_coefficients=(1.0, 2.0)), ValueError, "Muon: ns_coefficients must be a tuple of 3"),
    (lambda p: train.Muon(p, momentum=-0.5), ValueError, "Muon: invalid momentum"),
])
def test_invalid_arguments(make, err, msg):
    with pytest.raises(err, match=msg):
        make([Parameter(np.zeros((2, 2), np.float32))])


def test_muon_takes_only_2d_parameters():
    """torch's rule: Muon is for 2-d weights; a bias names itself and the way out."""
    w, b = Parameter(np.zeros((3, 2), np.float32), name="w"), Parameter(np.zeros(3, np.float32), name="b")
    with pytest.raises(ValueError, match="Muon: only 2-d parameters .* to another optimizer, such as AdamW"):
        train.Muon([w, b])
    opt = train.Muon([w])
    with pytest.raises(ValueError, match="Muon: only 2-d parameters"):
        opt.add_param_group({"params": [b]})
    assert len(opt.param_groups) == 1


def test_sparse_adam_is_refused_naming_adam():
    with pytest.raises(NotImplementedError, match="SparseAdam: luminal has no sparse gradients .* use train.Adam"):
        train.SparseAdam([Parameter(np.zeros(2, np.float32))])


X = np.random.default_rng(0).standard_normal((8, 4)).astype(np.float32)
Y = np.array([0, 1, 2, 1, 0, 2, 2, 1], np.int32)


def _models(bias):
    lm.manual_seed(3)
    model = nn.Sequential(nn.Linear(4, 8, bias=bias), nn.Tanh(), nn.Linear(8, 3, bias=bias))
    tmodel = torch.nn.Sequential(torch.nn.Linear(4, 8, bias=bias), torch.nn.Tanh(), torch.nn.Linear(8, 3, bias=bias))
    tmodel.load_state_dict({k: torch.tensor(v) for k, v in model.state_dict().items()})
    return model, tmodel


def _trainer(name, kwargs, bias):
    model, tmodel = _models(bias)
    g = lm.Graph()
    x, y = g.input("x", (8, 4)), g.input("y", (8,), dtype=lm.int32)
    opt = OURS[name](model.parameters(), **kwargs)
    return model, tmodel, opt, train.compile_step(train.cross_entropy(model(x), y), opt, backend="reference")


CHECKPOINT_CASES = [
    ("Adadelta", {"lr": 0.5, "weight_decay": 0.01}, 1e-5),
    ("Rprop", {"lr": 0.01}, 1e-5),
    ("ASGD", {"lr": 0.05, "t0": 2, "lambd": 0.01}, 1e-5),
    ("Adafactor", {"lr": 0.05, "weight_decay": 0.01}, 1e-5),
    ("Muon", {"lr": 0.02}, 1e-4),  # (bfloat16 Newton-Schulz: a gradient's last float32 bit can move a rounding)
]


@pytest.mark.parametrize("name,kwargs,tol", CHECKPOINT_CASES, ids=[n for n, _, _ in CHECKPOINT_CASES])
def test_compile_step_matches_torch_and_checkpoint_continues(tmp_path, name, kwargs, tol):
    """Through ``train.compile_step`` (autograd and the update in one program) 8 steps follow torch's;
    saved after 4 and loaded into a freshly built trainer, the next 4 steps give the parameters of the
    uninterrupted run."""
    bias = name != "Muon"
    model, tmodel, opt, step = _trainer(name, kwargs, bias)
    topt = THEIRS[name](tmodel.parameters(), **kwargs, foreach=False)
    path = tmp_path / "ck.safetensors"
    for i in range(8):
        step(x=X, y=Y)
        topt.zero_grad()
        torch.nn.functional.cross_entropy(tmodel(torch.tensor(X)), torch.tensor(Y).long()).backward()
        topt.step()
        for k, v in tmodel.state_dict().items():
            np.testing.assert_allclose(model.state_dict()[k], v.numpy(), rtol=tol, atol=tol / 10,
                                       err_msg=f"{name} {k} after step {i + 1}")
        if i == 3:
            train.save_checkpoint(path, model=model, optimizer=opt, step=step)
    model2, _, opt2, step2 = _trainer(name, kwargs, bias)
    train.load_checkpoint(path, model=model2, optimizer=opt2, step=step2)
    for _ in range(4):
        step2(x=X, y=Y)
    for k, v in model.state_dict().items():
        np.testing.assert_allclose(model2.state_dict()[k], v, rtol=1e-6, atol=1e-7, err_msg=f"{name} {k} resumed")


@pytest.mark.parametrize("name,kwargs", [("Muon", {"ns_steps": 3}), ("Muon", {"adjust_lr_fn": "match_rms_adamw"}),
                                         ("Adafactor", {"eps": (1e-3, 1e-3)})])
def test_structural_option_edits_rebuild_the_step(name, kwargs):
    """Options that change the update's graph (Muon's iteration count and lr adjustment, Adafactor's
    eps[0] None or a number) edited in a group between steps: the compiled step builds again and goes
    on as torch's with the new option."""
    model, tmodel, opt, step = _trainer(name, {"lr": 0.02}, name != "Muon")
    topt = THEIRS[name](tmodel.parameters(), lr=0.02, foreach=False)
    for i in range(4):
        if i == 2:
            for o in (opt, topt):
                o.param_groups[0].update(kwargs)
        step(x=X, y=Y)
        topt.zero_grad()
        torch.nn.functional.cross_entropy(tmodel(torch.tensor(X)), torch.tensor(Y).long()).backward()
        topt.step()
    for k, v in tmodel.state_dict().items():
        np.testing.assert_allclose(model.state_dict()[k], v.numpy(), rtol=1e-4, atol=1e-5, err_msg=k)
