"""Audit of saving, loading and resuming: the cases the other suites leave out.

tests/nn/test_safetensors_io.py covers the file format and tests/train/test_train_step.py one resume
(AdamW + ExponentialLR + dropout + accumulate=2). This file adds: 0-d, empty and non-contiguous
tensors of every luminal dtype through luminal, the safetensors package and torch in both
directions; exact resume through a checkpoint for every optimizer (fresh objects, a different seed,
so every bit of state must come from the file); and the error paths of loading -- missing, extra or
mis-shaped state must be reported clearly and must not leave a model, optimizer or step half-loaded.
"""

import json
import os

import numpy as np
import pytest
import safetensors.numpy
import safetensors.torch
import torch

import luminal as lm
from luminal import nn, train
from luminal.core.dtype import round_bf16
from luminal.core.safetensors_io import file_dtypes, load_file, load_metadata, save_file
from luminal.frontend.seed import manual_seed
from luminal.nn.module import Module
from luminal.nn.parameter import Buffer, Parameter

RNG = np.random.default_rng(123)
TORCH = {lm.float16: torch.float16, lm.bfloat16: torch.bfloat16, lm.float32: torch.float32,
         lm.int32: torch.int32, lm.bool: torch.bool}
CODE = {lm.float16: "F16", lm.bfloat16: "BF16", lm.float32: "F32", lm.int32: "I32", lm.bool: "BOOL"}


def carrier(dtype, shape):
    """Values of ``dtype`` in luminal's storage form (bf16 in float32)."""
    if dtype is lm.bool:
        return RNG.random(shape) > 0.5
    if dtype is lm.int32:
        return RNG.integers(-2**31, 2**31 - 1, shape, dtype=np.int32)
    x = (RNG.standard_normal(shape) * 50).astype(np.float32)
    return round_bf16(x) if dtype is lm.bfloat16 else x.astype(dtype.np)


def bits(a):
    a = np.asarray(a)
    return a.dtype, a.shape, a.tobytes()


def contig(a):
    """C-contiguous copy (np.ascontiguousarray would turn a 0-d array into shape (1,))."""
    return np.array(a, order="C", copy=True)


def to_numpy(t: torch.Tensor) -> np.ndarray:
    return t.float().numpy() if t.dtype == torch.bfloat16 else t.numpy()


SHAPES = {"scalar": (), "empty": (0, 3), "empty_mid": (2, 0, 4), "matrix": (3, 5)}


# ------------------------------------------------------------------------- dtypes x shapes, interop
BF16_0D = "_to_disk: for a 0-d array `>> 16` yields a numpy scalar, so `bits[isnan] = ...` raises TypeError"
CASES = [pytest.param(d, s, id=f"{d.name}-{n}") for d in CODE for n, s in SHAPES.items()]


@pytest.mark.parametrize("dtype,shape", CASES)
def test_every_dtype_and_shape_round_trips_through_luminal_safetensors_and_torch(tmp_path, dtype, shape):
    arr = carrier(dtype, shape)
    strided = carrier(dtype, (4, 6))[::-2, 1::2]  # non-contiguous, negative stride
    p = tmp_path / "ours.safetensors"
    save_file({"a": arr, "s": strided}, p, dtypes={"a": dtype, "s": dtype})
    assert file_dtypes(p) == {"a": CODE[dtype], "s": CODE[dtype]}
    ours = load_file(p)
    assert bits(ours["a"]) == bits(arr) and bits(ours["s"]) == bits(contig(strided))
    theirs = safetensors.torch.load_file(str(p))
    for k, want in (("a", arr), ("s", strided)):
        assert theirs[k].dtype == TORCH[dtype] and tuple(theirs[k].shape) == want.shape
        assert bits(to_numpy(theirs[k])) == bits(contig(want)), k
    if dtype is not lm.bfloat16:  # numpy has no bf16: the package's numpy API cannot read it
        npy = safetensors.numpy.load_file(str(p))
        assert bits(npy["a"]) == bits(arr) and bits(npy["s"]) == bits(contig(strided))

    # and back: torch writes, luminal reads
    q = tmp_path / "torch.safetensors"
    t = torch.from_numpy(contig(arr)).to(TORCH[dtype])
    safetensors.torch.save_file({"a": t, "s": torch.from_numpy(contig(strided)).to(TORCH[dtype])},
                                str(q))
    back = load_file(q)
    assert all(isinstance(v, np.ndarray) for v in back.values())
    assert file_dtypes(q) == {"a": CODE[dtype], "s": CODE[dtype]}
    assert bits(back["a"]) == bits(arr) and bits(back["s"]) == bits(contig(strided))


class Zoo(Module):
    """One parameter or buffer per dtype, including 0-d and empty ones."""

    def __init__(self, seed=0):
        super().__init__()
        rng = np.random.default_rng(seed)
        self.w16 = Parameter(rng.standard_normal((2, 3)).astype(np.float16), dtype=lm.float16)
        self.wbf = Parameter(round_bf16(rng.standard_normal((2, 1)).astype(np.float32)), dtype=lm.bfloat16)
        self.w32 = Parameter(rng.standard_normal((0, 4)).astype(np.float32))
        self.count = Buffer(np.array(seed, np.int32), lm.int32)
        self.mask = Buffer(rng.random((3,)) > 0.5, lm.bool)
        self.scratch = Buffer(np.ones(2, np.float32), persistent=False)


def test_module_with_every_dtype_round_trips_and_torch_reads_it(tmp_path):
    p = tmp_path / "zoo.safetensors"
    src, dst = Zoo(seed=1), Zoo(seed=2)
    src.save_safetensors(p)
    assert file_dtypes(p) == {"w16": "F16", "wbf": "BF16", "w32": "F32", "count": "I32", "mask": "BOOL"}
    assert dst.load_safetensors(p) == ([], [])
    for (k, a), (_, b) in zip(src.state_dict().items(), dst.state_dict().items()):
        assert bits(a) == bits(b), k
    t = safetensors.torch.load_file(str(p))
    assert {k: v.dtype for k, v in t.items()} == {"w16": torch.float16, "wbf": torch.bfloat16,
                                                  "w32": torch.float32, "count": torch.int32, "mask": torch.bool}
    assert t["count"].shape == () and t["w32"].shape == (0, 4)


def test_module_with_a_0d_bf16_parameter_saves(tmp_path):
    m = Module()
    m.temperature = Parameter(np.array(0.5, np.float32), dtype=lm.bfloat16)
    m.save_safetensors(tmp_path / "m.safetensors")
    assert safetensors.torch.load_file(str(tmp_path / "m.safetensors"))["temperature"].item() == 0.5


def test_0d_bf16_written_by_torch_loads_as_an_array(tmp_path):
    """Found by this audit (fixed): load_file: a 0-d BF16 tensor comes back as a numpy scalar (np.float32), not a 0-d
    ndarray like every other dtype: `(a.astype(uint32) << 16)` on 0-d yields a scalar"""
    p = tmp_path / "t.safetensors"
    safetensors.torch.save_file({"a": torch.tensor(1.5, dtype=torch.bfloat16)}, str(p))
    a = load_file(p)["a"]
    assert isinstance(a, np.ndarray) and a.shape == () and a.dtype == np.float32


# ------------------------------------------------------------------------------- load_state_dict
class Pair(Module):
    def __init__(self, seed=0):
        super().__init__()
        rng = np.random.default_rng(seed)
        self.weight = Parameter(rng.standard_normal((3, 4)).astype(np.float32))
        self.steps = Buffer(np.array(seed, np.int32), lm.int32)


def snapshot(m):
    return {k: bits(v) for k, v in m.state_dict().items()}


@pytest.mark.parametrize("case,sd,match", [
    ("missing", lambda good: {"weight": good["weight"]}, r"missing: steps"),
    ("unexpected", lambda good: {**good, "bias": np.zeros(3, np.float32)}, r"unexpected: bias"),
    ("shape", lambda good: {**good, "weight": np.zeros((4, 3), np.float32)},
     r"weight: checkpoint \(4, 3\) vs model \(3, 4\)"),
])
def test_load_state_dict_errors_name_the_key_and_change_nothing(case, sd, match):
    m = Pair(seed=1)
    before = snapshot(m)
    with pytest.raises(ValueError, match=match):
        m.load_state_dict(sd(Pair(seed=2).state_dict()))
    assert snapshot(m) == before


def test_non_strict_load_follows_torch():
    """torch: strict=False loads the matching keys and reports the rest; shapes are still checked."""
    m = Pair(seed=1)
    src = Pair(seed=2).state_dict()
    missing, unexpected = m.load_state_dict({"weight": src["weight"], "extra": np.zeros(1)}, strict=False)
    assert (missing, unexpected) == (["steps"], ["extra"])
    assert bits(m.weight.data) == bits(src["weight"]) and int(m.steps.data) == 1
    tm = torch.nn.Linear(4, 3)
    res = tm.load_state_dict({"weight": torch.zeros(3, 4), "extra": torch.zeros(1)}, strict=False)
    assert (res.missing_keys, res.unexpected_keys) == (["bias"], ["extra"])  # the same contract


def test_load_state_dict_converts_dtypes_like_torch_copy():
    """A value of another dtype is converted to the parameter's dtype, as torch's copy_ does."""
    m = Pair()
    m.load_state_dict({"weight": np.arange(12, dtype=np.float64).reshape(3, 4) / 3, "steps": np.array(7.9)})
    assert m.weight.data.dtype == np.float32 and m.steps.data.dtype == np.int32
    np.testing.assert_array_equal(m.weight.data, (np.arange(12) / 3).astype(np.float32).reshape(3, 4))
    assert int(m.steps.data) == int(torch.tensor(0, dtype=torch.int32).copy_(torch.tensor(7.9)))


def test_load_state_dict_value_error_leaves_nothing_half_loaded():
    """Found by this audit (fixed): load_state_dict validates names and shapes up front but not values: a value that
    State.set rejects (int32 overflow) fails after earlier keys were already written, and the error says 'Buffer
    (unnamed)' instead of the key"""
    m = Pair(seed=1)
    before = snapshot(m)
    with pytest.raises(ValueError, match="steps"):
        m.load_state_dict({"weight": np.zeros((3, 4), np.float32), "steps": np.array(2**40, np.int64)})
    assert snapshot(m) == before  # was: weight is already zeros


# ----------------------------------------------------------------------------------- exact resume
class Net(nn.Module):
    def __init__(self, dropout=0.0, dtype=None):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(6, 8, dtype=dtype), nn.Linear(8, 3, dtype=dtype)
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        return self.fc2(self.drop(self.fc1(x.to(self.fc1.weight.dtype)).relu())).float()


def batches(n, seed=5):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal((4, 6)).astype(np.float32), rng.integers(0, 3, 4).astype(np.int32))
            for _ in range(n)]


def make(opt_cls, opt_kw, seed, dropout=0.0, sched=None, accumulate=1, backend="reference", dtype=None,
         groups=None):
    manual_seed(seed)
    model = Net(dropout, dtype)
    g = lm.Graph()
    x, y = g.input("x", ("B", 6)), g.input("y", ("B",), dtype=lm.int32)
    loss = train.cross_entropy(model(x), y)
    params = model.parameters()
    if groups:  # fc1 with its own options, fc2 with the defaults
        params = [{"params": model.fc1.parameters(), **groups}, {"params": model.fc2.parameters()}]
    opt = getattr(train, opt_cls)(params, **opt_kw)
    s = sched(opt) if sched else None
    return model, opt, s, train.compile_step(loss, opt, backend=backend, accumulate=accumulate)


def drive(objs, data):
    _, _, sched, step = objs
    losses = []
    for xb, yb in data:
        losses.append(step(x=xb, y=yb))
        if sched is not None and step.micro_step == 0:
            sched.step()
    return losses


RESUME_CASES = {
    "adamw": ("AdamW", dict(lr=1e-2, weight_decay=0.1), {}),
    "adam_amsgrad": ("Adam", dict(lr=1e-2, amsgrad=True, weight_decay=0.01), {}),
    "sgd_nesterov": ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-3), {}),
    "sgd_dampening": ("SGD", dict(lr=0.1, momentum=0.5, dampening=0.3), {}),
    "rmsprop_centered_momentum": ("RMSprop", dict(lr=1e-2, momentum=0.9, centered=True), {}),
    "adagrad_decay": ("Adagrad", dict(lr=0.1, lr_decay=0.01, initial_accumulator_value=0.1), {}),
    "sgd_cosine_dropout": ("SGD", dict(lr=0.1, momentum=0.9), dict(
        dropout=0.4, sched=lambda o: train.CosineAnnealingLR(o, T_max=3, eta_min=1e-3))),
    "adam_onecycle_acc2": ("Adam", dict(lr=1e-2), dict(
        accumulate=2, dropout=0.3, sched=lambda o: train.OneCycleLR(o, max_lr=0.05, total_steps=10))),
    "rmsprop_steplr_acc3": ("RMSprop", dict(lr=1e-2), dict(
        accumulate=3, sched=lambda o: train.StepLR(o, step_size=1, gamma=0.5))),
    "adam_two_groups_multistep": ("Adam", dict(lr=1e-2), dict(
        groups=dict(lr=3e-2, betas=(0.8, 0.99), weight_decay=0.1),
        sched=lambda o: train.MultiStepLR(o, milestones=[2, 3, 3]))),
    "sgd_groups_linearlr": ("SGD", dict(lr=0.1, momentum=0.9), dict(
        groups=dict(momentum=0.5, nesterov=True), sched=lambda o: train.LinearLR(o, total_iters=4))),
    "adamw_bf16": ("AdamW", dict(lr=1e-2), dict(dtype=lm.bfloat16, accumulate=2)),
    "sgd_fp16": ("SGD", dict(lr=0.1, momentum=0.9), dict(dtype=lm.float16, dropout=0.2)),
}


@pytest.mark.parametrize("stop", [1, 4])
@pytest.mark.parametrize("case", list(RESUME_CASES))
def test_resume_through_a_checkpoint_is_bit_exact(tmp_path, case, stop):
    """N calls straight == k calls, checkpoint, fresh objects built under ANOTHER seed (so weights,
    moments, the dropout generator, the accumulation buffers all must come from the file), N - k calls."""
    opt_cls, opt_kw, kw = RESUME_CASES[case]
    data = batches(9)
    straight = make(opt_cls, opt_kw, seed=1, **kw)
    l_straight = drive(straight, data)

    first = make(opt_cls, opt_kw, seed=1, **kw)
    l_first = drive(first, data[:stop])
    path = tmp_path / "ck.safetensors"
    model, opt, sched, step = first
    train.save_checkpoint(path, model=model, optimizer=opt, scheduler=sched, step=step, extra={"calls": stop})
    del first, model, opt, sched, step
    second = make(opt_cls, opt_kw, seed=99, **kw)
    model, opt, sched, step = second
    extra = train.load_checkpoint(path, model=model, optimizer=opt, scheduler=sched, step=step)
    assert extra == {"calls": stop}
    l_rest = drive(second, data[stop:])

    assert l_first + l_rest == l_straight
    for (k, a), (_, b) in zip(straight[0].state_dict().items(), model.state_dict().items()):
        assert np.array_equal(a, b), k
    assert opt.steps == straight[1].steps and step.micro_step == straight[3].micro_step
    if sched is not None:
        assert sched.get_last_lr() == straight[2].get_last_lr()
        assert [g["lr"] for g in opt.param_groups] == [g["lr"] for g in straight[1].param_groups]


def test_resume_on_the_cpu_backend_too(tmp_path):
    kw = dict(accumulate=2, dropout=0.3, sched=lambda o: train.ExponentialLR(o, gamma=0.8), backend="cpu")
    data = batches(7)
    straight = make("SGD", dict(lr=0.1, momentum=0.9, nesterov=True), seed=1, **kw)
    drive(straight, data)
    first = make("SGD", dict(lr=0.1, momentum=0.9, nesterov=True), seed=1, **kw)
    drive(first, data[:3])
    p = tmp_path / "ck.safetensors"
    train.save_checkpoint(p, model=first[0], optimizer=first[1], scheduler=first[2], step=first[3])
    second = make("SGD", dict(lr=0.1, momentum=0.9, nesterov=True), seed=42, **kw)
    train.load_checkpoint(p, model=second[0], optimizer=second[1], scheduler=second[2], step=second[3])
    drive(second, data[3:])
    for (k, a), (_, b) in zip(straight[0].state_dict().items(), second[0].state_dict().items()):
        assert np.array_equal(a, b), k


def test_checkpoint_is_a_plain_safetensors_file(tmp_path):
    """Its model tensors are readable by torch with their own names; the rest is JSON metadata."""
    model, opt, sched, step = make("Adam", dict(lr=1e-2), seed=1, accumulate=2)
    drive((model, opt, sched, step), batches(3))
    p = tmp_path / "ck.safetensors"
    train.save_checkpoint(p, model=model, optimizer=opt, step=step)
    t = safetensors.torch.load_file(str(p))
    for k, v in model.state_dict().items():
        assert np.array_equal(t[f"model.{k}"].numpy(), v), k
    meta = load_metadata(p)
    assert meta["format"] == "luminal-checkpoint/1"
    assert json.loads(meta["optimizer"])["steps"] == 1 and json.loads(meta["step"])["micro_step"] == 1


def test_failed_checkpoint_save_keeps_the_old_file(tmp_path):
    """A group value JSON cannot hold fails the save before anything is written."""
    model, opt, _, step = make("SGD", dict(lr=0.1), seed=1)
    p = tmp_path / "ck.safetensors"
    train.save_checkpoint(p, model=model, optimizer=opt)
    old = p.read_bytes()
    opt.param_groups[0]["lr"] = np.float32(0.1)  # not JSON-serialisable
    with pytest.raises(TypeError):
        train.save_checkpoint(p, model=model, optimizer=opt)
    assert p.read_bytes() == old and os.listdir(tmp_path) == ["ck.safetensors"]


def test_truncated_checkpoint_is_reported_and_loads_nothing(tmp_path):
    model, opt, _, step = make("Adam", dict(lr=1e-2), seed=1)
    drive((model, opt, None, step), batches(2))
    p = tmp_path / "ck.safetensors"
    train.save_checkpoint(p, model=model, optimizer=opt, step=step)
    p.write_bytes(p.read_bytes()[:-10])
    fresh, opt2, _, step2 = make("Adam", dict(lr=1e-2), seed=7)
    before = snapshot(fresh)
    with pytest.raises(ValueError, match="outside the data section"):
        train.load_checkpoint(p, model=fresh, optimizer=opt2, step=step2)
    assert snapshot(fresh) == before and opt2.steps == 0


def test_checkpoint_without_a_section_is_refused_before_loading_anything(tmp_path):
    model, opt, _, step = make("Adam", dict(lr=1e-2), seed=1)
    p = tmp_path / "ck.safetensors"
    train.save_checkpoint(p, model=model)
    fresh, opt2, _, _ = make("Adam", dict(lr=1e-2), seed=7)
    before = snapshot(fresh)
    with pytest.raises(ValueError, match="no optimizer state"):
        train.load_checkpoint(p, model=fresh, optimizer=opt2)
    assert snapshot(fresh) == before
    save_file({"x": np.zeros(2)}, p)
    with pytest.raises(ValueError, match="not a luminal checkpoint"):
        train.load_checkpoint(p, model=fresh)


# ------------------------------------------------------------------- mismatched optimizer / step state
def sgd_opt(n_params, shape=(3,), **kw):
    ps = [Parameter(np.ones(shape, np.float32) * (i + 1), name=f"p{i}") for i in range(n_params)]
    return ps, train.SGD(ps, lr=0.1, momentum=0.9, **kw)


def filled(opt, value):
    for _, p in opt.params():
        opt.state_for(p)["momentum_buffer"].set(np.full(p.shape, value, np.float32))
    opt.steps = 3
    return opt.state_dict()


def opt_snapshot(opt):
    return (opt.steps, [{k: v for k, v in g.items() if k not in ("params", "_scalars")} for g in opt.param_groups],
            [bits(opt.state_for(p)["momentum_buffer"].data) for _, p in opt.params()])


@pytest.mark.parametrize("src_kw,dst_kw,msg", [
    (dict(nesterov=True), {}, "option 'nesterov' is True in the checkpoint, False here"),
    (dict(weight_decay=0.1), {}, "change the update's terms"),
    ({}, dict(weight_decay=0.1), "change the update's terms"),
])
def test_optimizer_load_that_changes_what_the_update_computes_is_refused(src_kw, dst_kw, msg):
    """A compiled step bakes in the update's flags and terms (the numbers are runtime scalars): a checkpoint
    that changes them would train on with the old update, so it is refused and nothing changes."""
    _, src = sgd_opt(2, **src_kw)
    _, dst = sgd_opt(2, **dst_kw)
    before = opt_snapshot(dst)
    with pytest.raises(ValueError, match=msg):
        dst.load_state_dict(filled(src, 5.0))
    assert opt_snapshot(dst) == before


def test_optimizer_load_may_change_the_numbers():
    _, src = sgd_opt(2, weight_decay=0.1)
    src.param_groups[0]["lr"] = 0.5
    src.param_groups[0]["weight_decay"] = 0.2
    _, dst = sgd_opt(2, weight_decay=0.1)
    dst.load_state_dict(filled(src, 5.0))
    assert dst.param_groups[0]["lr"] == 0.5 and dst.param_groups[0]["weight_decay"] == 0.2


def test_optimizer_load_with_different_group_count_is_refused():
    _, src = sgd_opt(2)
    ps = [Parameter(np.ones(3, np.float32)) for _ in range(2)]
    dst = train.SGD([{"params": ps[:1]}, {"params": ps[1:]}], lr=0.1, momentum=0.9)
    with pytest.raises(ValueError, match="1 groups in the checkpoint, 2 here"):
        dst.load_state_dict(filled(src, 5.0))


def test_optimizer_load_with_more_params_in_the_checkpoint_is_refused():
    """Found by this audit (fixed): Optimizer.state_dict records no parameter count or shapes per group, so state for 3
    parameters loads into an optimizer of 2 without a word (torch raises)"""
    _, src = sgd_opt(3)
    _, dst = sgd_opt(2)
    with pytest.raises(ValueError, match="param"):
        dst.load_state_dict(filled(src, 5.0))


def test_optimizer_load_with_fewer_params_fails_cleanly():
    """Found by this audit (fixed): Optimizer.load_state_dict writes the groups' hyperparameters and the step count
    before checking the arrays, so a failed load leaves them changed"""
    _, src = sgd_opt(1)
    sd = filled(src, 5.0)
    sd["param_groups"][0]["lr"] = 0.5
    _, dst = sgd_opt(2)
    before = opt_snapshot(dst)
    with pytest.raises(ValueError, match=r"group 0 has 1 parameters in the checkpoint, 2 here"):
        dst.load_state_dict(sd)
    assert opt_snapshot(dst) == before
    del sd["param_groups"][0]["param_count"]  # a checkpoint from before counts were saved
    with pytest.raises(ValueError, match=r"missing state\.1\.momentum_buffer"):
        dst.load_state_dict(sd)
    assert opt_snapshot(dst) == before  # nothing written: lr, steps and state.0 as they were


def test_optimizer_load_with_wrong_shape_names_it_and_fails_cleanly():
    """Found by this audit (fixed): a mis-shaped optimizer state array is caught by State.set only after the groups,
    the step count and the earlier arrays were overwritten"""
    _, src = sgd_opt(2, shape=(4,))
    sd = filled(src, 5.0)
    sd["arrays"]["state.1.momentum_buffer"] = np.zeros((5,), np.float32)
    _, dst = sgd_opt(2, shape=(4,))
    before = opt_snapshot(dst)
    with pytest.raises(ValueError, match=r"p1\.momentum_buffer.*\(5,\)"):
        dst.load_state_dict(sd)
    assert opt_snapshot(dst) == before


def test_load_checkpoint_is_all_or_nothing(tmp_path):
    """Found by this audit (fixed): load_checkpoint restores the model before the optimizer: when the optimizer state
    does not fit, the model is left loaded from the file and the rest not"""
    model = Net()
    p = tmp_path / "ck.safetensors"
    train.save_checkpoint(p, model=model, optimizer=train.Adam(model.fc2.parameters(), lr=1e-2))
    fresh = Net()
    fresh_opt = train.Adam(fresh.parameters(), lr=1e-2)  # more parameters: "missing state.2.exp_avg"
    before = snapshot(fresh)
    with pytest.raises(ValueError):
        train.load_checkpoint(p, model=fresh, optimizer=fresh_opt)
    assert snapshot(fresh) == before


def saved_step(accumulate, calls):
    model, opt, _, step = make("SGD", dict(lr=0.1), seed=1, accumulate=accumulate)
    drive((model, opt, None, step), batches(calls))
    return step.state_dict()


def test_step_state_from_another_accumulate_is_refused():
    """Found by this audit (fixed): TrainStep.load_state_dict does not check the checkpoint against its own accumulate:
    a mid-accumulation state (micro_step=1) loads into accumulate=1, and the next call fails with AttributeError
    '_micro'"""
    sd = saved_step(accumulate=2, calls=1)
    _, _, _, step = make("SGD", dict(lr=0.1), seed=1, accumulate=1)
    with pytest.raises(ValueError, match="accumulat"):
        step.load_state_dict(sd)


def test_step_state_missing_accumulators_is_a_clear_error():
    """Found by this audit (fixed): a step state without gradient accumulators loaded into accumulate=2 raises a bare
    KeyError('grad_acc.0'), after micro_step and the RNG were already replaced"""
    sd = saved_step(accumulate=1, calls=1)
    _, _, _, step = make("SGD", dict(lr=0.1), seed=1, accumulate=2)
    rng_before = step.graph.rng.bit_generator.state
    with pytest.raises(ValueError, match="grad_acc"):
        step.load_state_dict(sd)
    assert step.graph.rng.bit_generator.state == rng_before
