"""A checkpoint is data, checked before use: every part (model, optimizer, scheduler, train step) is
validated before any is written, the optimizer's hyperparameters against the constructors' own checks,
the counters as ints; an error names the file and leaves every object as it was."""

from __future__ import annotations

import json

import numpy as np
import pytest

import luminal as lm
from luminal import nn, train
from luminal.core.safetensors_io import load_file, load_metadata, save_file
from luminal.nn.parameter import Parameter

X = np.random.default_rng(0).standard_normal((8, 4)).astype(np.float32)
Y = np.array([0, 1, 2, 1, 0, 2, 2, 1], np.int32)


def trainer(seed, opt_cls=train.Adam, accumulate=2, **opt_kw):
    lm.manual_seed(seed)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Dropout(0.3), nn.Linear(8, 3))
    g = lm.Graph()
    x, y = g.input("x", (8, 4)), g.input("y", (8,), dtype=lm.int32)
    opt = opt_cls(model.parameters(), lr=1e-2, **opt_kw)
    sched = train.CosineAnnealingLR(opt, T_max=10)
    step = train.compile_step(train.cross_entropy(model(x), y), opt, backend="reference", accumulate=accumulate)
    return model, opt, sched, step


def everything(model, opt, sched, step):
    """Every value a load writes, as plain comparable data."""
    sd = opt.state_dict()
    return ({k: v.tobytes() for k, v in model.state_dict().items()},
            {k: np.array(v).tobytes() for k, v in sd["arrays"].items()},
            json.dumps([sd["steps"], sd["param_groups"]]), json.dumps(sched.state_dict()),
            step.micro_step, json.dumps(step.state_dict()["rng"]))


@pytest.fixture
def ck(tmp_path):
    objs = trainer(seed=1)
    for _ in range(3):
        objs[3](x=X, y=Y)
        if objs[3].micro_step == 0:
            objs[2].step()
    path = tmp_path / "ck.safetensors"
    train.save_checkpoint(path, model=objs[0], optimizer=objs[1], scheduler=objs[2], step=objs[3])
    return path


def tamper(path, key, fn):
    meta = load_metadata(path)
    value = json.loads(meta[key])
    fn(value)
    meta[key] = json.dumps(value)
    save_file(load_file(path), path, metadata=meta)


def refused(path, match, **opt):
    """Loading ``path`` into fresh objects fails with ``match`` (and the file's name) and writes nothing."""
    objs = trainer(seed=7, **opt)
    before = everything(*objs)
    with pytest.raises(ValueError, match=r"ck\.safetensors: .*" + match):
        train.load_checkpoint(path, model=objs[0], optimizer=objs[1], scheduler=objs[2], step=objs[3])
    assert everything(*objs) == before
    return objs


def test_a_genuine_checkpoint_loads(ck):
    objs = trainer(seed=7)
    train.load_checkpoint(ck, model=objs[0], optimizer=objs[1], scheduler=objs[2], step=objs[3])
    assert objs[1].steps == 1 and objs[2].last_epoch == 1 and objs[3].micro_step == 1


@pytest.mark.parametrize("edit,match", [
    (lambda s: s.update(T_max=0), r"CosineAnnealingLR\.load_state_dict: T_max must be a positive integer"),
    (lambda s: s.update(step=1), r"CosineAnnealingLR\.load_state_dict: .*'step'"),
    (lambda s: s.update(optimizer=5), r"CosineAnnealingLR\.load_state_dict: .*'optimizer'"),
    (lambda s: s.update(base_lrs=[0.1, 0.1]), r"base_lrs must be a list of 1 learning rates"),
])
def test_a_bad_scheduler_part_changes_nothing(ck, edit, match):
    """Before: the model, the optimizer and the step were written, and then the scheduler's load raised (or, for
    most edits, loaded without a word)."""
    tamper(ck, "scheduler", edit)
    refused(ck, match)


@pytest.mark.parametrize("key,value,match", [
    ("lr", float("nan"), r"invalid lr nan"),
    ("betas", [2.0, 0.9], r"invalid betas\[0\] 2\.0"),
    ("betas", [1.0, 0.9], r"invalid betas\[0\] 1\.0"),  # before: a ZeroDivisionError from the bias correction
    ("eps", 0, r"invalid eps 0 \(must be > 0"),
    ("weight_decay", -1, r"invalid weight_decay -1"),
    ("params", 5, r"the checkpoint sets 'params'"),
])
def test_optimizer_hyperparameters_are_checked_as_the_constructor_checks_them(ck, key, value, match):
    def edit(o):
        o["param_groups"][0][key] = value

    tamper(ck, "optimizer", edit)
    refused(ck, r"Adam\.load_state_dict: group 0: .*" + match)


def test_a_one_cycle_run_saved_at_its_end_loads():
    """OneCycleLR's linear anneal ends just below 0 after its last step (torch's too): the optimizer's
    lr there is negative, and a checkpoint saved then must load (any finite lr loads; NaN does not)."""
    def make():
        ps = [Parameter(np.ones(3, np.float32))]
        opt = train.SGD(ps, lr=0.1, momentum=0.9)
        return opt, train.OneCycleLR(opt, max_lr=0.1, total_steps=10, anneal_strategy="linear")

    opt, sched = make()
    for _ in range(10):
        sched.step()
    assert opt.param_groups[0]["lr"] < 0
    dst, dst_sched = make()
    dst.load_state_dict(opt.state_dict())
    dst_sched.load_state_dict(sched.state_dict())
    assert dst.param_groups[0]["lr"] == opt.param_groups[0]["lr"]


@pytest.mark.parametrize("value", [1.9, "1", True, None, -1, 2])
def test_step_counters_must_be_ints_in_range(ck, value):
    def edit(s):
        s["micro_step"] = value

    tamper(ck, "step", edit)
    refused(ck, r"TrainStep\.load_state_dict: micro_step")


def test_sgd_and_lamb_and_rmsprop_and_adagrad_ranges_on_load():
    cases = [(train.SGD, dict(momentum=0.9), "momentum", -0.5, r"invalid momentum -0\.5"),
             (train.SGD, dict(momentum=0.9, nesterov=True), "momentum", 0, r"nesterov=True needs momentum > 0"),
             (train.LAMB, {}, "max_trust_ratio", "big", r"max_trust_ratio must be a number"),
             (train.RMSprop, {}, "alpha", float("nan"), r"invalid alpha nan"),
             (train.Adagrad, {}, "eps", 0.0, r"invalid eps 0\.0")]
    for cls, kw, key, value, match in cases:
        ps = [Parameter(np.ones(3, np.float32))]
        src = cls(ps, lr=0.1, **kw)
        sd = src.state_dict()
        sd["param_groups"][0][key] = value
        dst = cls([Parameter(np.ones(3, np.float32))], lr=0.1, **kw)
        before = json.dumps(dst.state_dict()["param_groups"])
        with pytest.raises(ValueError, match=rf"{cls.__name__}\.load_state_dict: group 0: .*{match}"):
            dst.load_state_dict(sd)
        assert json.dumps(dst.state_dict()["param_groups"]) == before


@pytest.mark.parametrize("cls", [train.Adam, train.AdamW, train.RMSprop, train.Adagrad, train.LAMB])
def test_eps_must_be_positive(cls):
    """eps keeps the update's denominator off 0: with eps = 0 an exactly-zero gradient gives 0 / 0 = NaN."""
    with pytest.raises(ValueError, match=r"invalid eps 0 \(must be > 0"):
        cls([Parameter(np.ones(3, np.float32))], lr=0.1, eps=0)


@pytest.mark.parametrize("opt_cls,key", [(train.SGD, "decoupled_weight_decay"), (train.Adam, "nesterov")])
def test_an_option_the_optimizer_does_not_have_is_refused(opt_cls, key, tmp_path):
    """Before, ``decoupled_weight_decay: true`` in an SGD group loaded without a word and dropped the update's
    L2 term (``descent_grad`` reads the flag). Another optimizer's option is refused; other keys load as
    saved (a scheduler's ``initial_lr``: test_a_scheduler_key_in_the_groups_loads_before_the_scheduler)."""
    model, opt, sched, step = trainer(seed=1, opt_cls=opt_cls, accumulate=1, weight_decay=0.1)
    step(x=X, y=Y)
    path = tmp_path / "ck.safetensors"
    train.save_checkpoint(path, model=model, optimizer=opt, scheduler=sched, step=step)

    def edit(o):
        o["param_groups"][0][key] = True

    tamper(path, "optimizer", edit)
    name = opt_cls.__name__
    refused(path, rf"{name}\.load_state_dict: group 0: the checkpoint sets '{key}', an option this {name} does "
            rf"not have", opt_cls=opt_cls, accumulate=1, weight_decay=0.1)


def test_a_scheduler_key_in_the_groups_loads_before_the_scheduler():
    """torch's resume: load the optimizer, then build the scheduler with last_epoch. The saved groups hold the
    scheduler's initial_lr (OneCycleLR's max_lr, ...); the first version of the foreign-key check refused it."""
    ps = [Parameter(np.ones(3, np.float32))]
    opt = train.SGD(ps, lr=0.1, momentum=0.9)
    sched = train.OneCycleLR(opt, max_lr=0.1, total_steps=10)
    for _ in range(3):
        sched.step()
    fresh = train.SGD([Parameter(np.ones(3, np.float32))], lr=0.1, momentum=0.9)
    fresh.load_state_dict(opt.state_dict())
    assert fresh.param_groups[0]["initial_lr"] == opt.param_groups[0]["initial_lr"]
    again = train.StepLR(fresh, step_size=2, last_epoch=3)
    assert again.last_epoch == 4  # (torch steps once on construction: 3 + 1)


@pytest.mark.parametrize("edit", [
    lambda r: r["state"].update(state=2**200),
    lambda r: r["state"].update(inc=-1),
    lambda r: r.update(uinteger=2**80),
])
def test_a_random_state_numpy_refuses_is_an_error_naming_the_file(ck, edit):
    """Before: numpy's bare ``OverflowError: Python int too large to convert to C long``, no file named."""
    tamper(ck, "step", lambda s: edit(s["rng"]))
    refused(ck, r"TrainStep\.load_state_dict: the random generator's state is not one numpy takes")
