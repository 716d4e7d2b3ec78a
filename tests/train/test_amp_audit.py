"""Audit of mixed precision against torch.amp: the compiled step with a GradScaler, step for step against
torch's scale/step/update loop (injected inf and NaN batches, a scale whose gradients overflow float32,
clipping after unscale_), a torch scaler's state resumed here, a disabled scaler, and the 16-bit rewrite
(``train.autocast``) of the matmul family and of a small model against ``torch.autocast("cpu")``:
dtypes, values and gradients within the 16-bit dtype's rounding."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import luminal as lm
from luminal import nn, train
from tests.parity import TORCH_DTYPE, from_torch


def _batches(n, bad):
    """``n`` batches of a 4 -> 3 regression; ``bad``: {step: "inf" in x | "nan" in y}."""
    rng = np.random.default_rng(0)
    out = []
    for i in range(n):
        x = rng.standard_normal((8, 4)).astype(np.float32)
        y = rng.standard_normal((8, 3)).astype(np.float32)
        if bad.get(i) == "inf":
            x[3, 1] = np.inf
        elif bad.get(i) == "nan":
            y[0, 2] = np.nan
        out.append((x, y))
    return out


def _torch_run(model, kw, batches, clip):
    """torch's documented AMP loop (fp32 compute): scale(loss).backward(), unscale_ and clip, step, update."""
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    scaler = torch.amp.GradScaler("cpu", **kw)
    rows = []
    for x, y in batches:
        opt.zero_grad()
        loss = F.mse_loss(model(torch.from_numpy(x)), torch.from_numpy(y))
        scaler.scale(loss).backward()
        norm = None
        if clip:
            scaler.unscale_(opt)
            norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), clip))
        before = model.weight.detach().clone()
        scaler.step(opt)
        skipped = bool(torch.equal(before, model.weight.detach()))
        scaler.update()
        rows.append((scaler.get_scale(), skipped, norm, model.weight.detach().numpy().copy(),
                     model.bias.detach().numpy().copy()))
    return rows


@pytest.mark.parametrize("kw", [
    dict(init_scale=2.0**10, growth_factor=3.0, backoff_factor=0.25, growth_interval=2),
    dict(init_scale=3e38, growth_factor=2.0, backoff_factor=0.5, growth_interval=3),  # float32 gradients overflow
])
@pytest.mark.parametrize("clip", [None, 0.5])
def test_scaled_step_matches_torch_step_for_step(kw, clip):
    batches = _batches(12, {2: "inf", 6: "inf", 7: "nan"})
    lm.manual_seed(0)
    model = nn.Linear(4, 3)
    tmodel = torch.nn.Linear(4, 3)
    tmodel.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in model.state_dict().items()})
    want = _torch_run(tmodel, kw, batches, clip)
    g = lm.Graph()
    x, y = g.input("x", ("B", 4)), g.input("y", ("B", 3))
    opt = train.SGD(model.parameters(), lr=0.05, momentum=0.9)
    scaler = train.GradScaler("cpu", **kw)
    step = train.compile_step(train.mse_loss(model(x), y), opt, scaler=scaler, clip_grad_norm=clip)
    assert sum(r[1] for r in want) >= 3  # (the batches do inject overflows)
    for i, ((xb, yb), (scale, skipped, norm, w, b)) in enumerate(zip(batches, want)):
        step(x=xb, y=yb)
        assert step.last_step_skipped == skipped, i
        assert scaler.get_scale() == scale, (i, scaler.get_scale(), scale)
        if clip and not skipped:  # the norm of the unscaled gradients, as after torch's unscale_
            np.testing.assert_allclose(step.last_grad_norm, norm, rtol=1e-5)
        np.testing.assert_allclose(model.weight.data, w, rtol=1e-5, atol=1e-6, err_msg=str(i))
        np.testing.assert_allclose(model.bias.data, b, rtol=1e-5, atol=1e-6, err_msg=str(i))
    assert opt.steps == sum(not r[1] for r in want) and scaler.skipped == sum(r[1] for r in want)


def test_a_torch_scalers_state_resumes_its_sequence():
    """torch's state after some steps (scale, settings, _growth_tracker) loaded here continues the same
    scale sequence; a luminal state loaded into another luminal scaler too."""
    kw = dict(init_scale=100.0, growth_factor=1.5, backoff_factor=0.3, growth_interval=3)
    t = torch.amp.GradScaler("cpu", **kw)
    p = torch.nn.Parameter(torch.ones(1))
    opt = torch.optim.SGD([p], lr=0.1)
    flags = [False, False, True, False, False, False, False, True, False, False, False, False]
    mine = None
    for i, bad in enumerate(flags):
        if i == 5:  # resume here from torch's state
            mine = train.GradScaler()
            mine.load_state_dict(t.state_dict())
            copy = train.GradScaler()
            copy.load_state_dict(mine.state_dict())
        opt.zero_grad()
        t.scale(p.sum()).backward()
        if bad:
            p.grad.fill_(float("inf"))
        t.step(opt)
        t.update()
        if mine is not None:
            mine.update(bad)
            copy.update(bad)
            assert mine.get_scale() == copy.get_scale() == t.get_scale(), i
            assert mine.growth_tracker == copy.growth_tracker == int(t._growth_tracker), i
    assert (mine.get_growth_factor(), mine.get_backoff_factor(), mine.get_growth_interval()) == (1.5, 0.3, 3)


def test_a_disabled_scaler_steps_as_no_scaler_and_as_torchs():
    batches = _batches(3, {})
    weights = []
    for scaler in (None, train.GradScaler(enabled=False)):
        lm.manual_seed(0)
        model = nn.Linear(4, 3)
        init = {k: torch.from_numpy(v.copy()) for k, v in model.state_dict().items()}
        g = lm.Graph()
        x, y = g.input("x", ("B", 4)), g.input("y", ("B", 3))
        step = train.compile_step(train.mse_loss(model(x), y), train.SGD(model.parameters(), lr=0.05, momentum=0.9),
                                  scaler=scaler)
        for xb, yb in batches:
            step(x=xb, y=yb)
        weights.append(model.weight.data.copy())
    np.testing.assert_array_equal(weights[0], weights[1])
    tmodel = torch.nn.Linear(4, 3)
    tmodel.load_state_dict(init)
    rows = _torch_run(tmodel, dict(enabled=False), batches, None)
    assert rows[-1][0] == 1.0 and scaler.get_scale() == 1.0 and scaler.skipped == 0
    np.testing.assert_allclose(weights[1], rows[-1][3], rtol=1e-5, atol=1e-6)


_MM = {  # name -> (luminal op, torch op, input shapes): torch's CPU autocast runs these in the 16-bit dtype
    "matmul": (lambda a, b: a @ b, lambda a, b: a @ b, [(5, 16), (16, 7)]),
    "bmm": (lm.bmm, torch.bmm, [(3, 5, 16), (3, 16, 7)]),
    "baddbmm": (lm.baddbmm, torch.baddbmm, [(3, 5, 7), (3, 5, 16), (3, 16, 7)]),
    "addmm": (lm.addmm, torch.addmm, [(5, 7), (5, 16), (16, 7)]),
    "linear": (nn.functional.linear, F.linear, [(5, 16), (7, 16), (7,)]),
    "conv1d": (nn.functional.conv1d, F.conv1d, [(2, 4, 9), (6, 4, 3), (6,)]),
    "conv2d": (nn.functional.conv2d, F.conv2d, [(2, 3, 6, 6), (4, 3, 3, 3), (4,)]),
}


@pytest.mark.parametrize("dtype", [lm.bfloat16, lm.float16])
@pytest.mark.parametrize("name", list(_MM))
def test_the_matmul_family_computes_in_the_16_bit_dtype_as_torchs(name, dtype):
    op, top, shapes = _MM[name]
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    g = lm.Graph()
    ins = [g.input(f"a{i}", s) for i, s in enumerate(shapes)]
    out = train.autocast(op(*ins), dtype)
    params = [torch.from_numpy(a).requires_grad_() for a in arrays]
    with torch.autocast("cpu", dtype=TORCH_DTYPE[dtype]):
        want = top(*params)
    assert want.dtype == TORCH_DTYPE[dtype] and out.dtype is dtype
    grads = train.grad(out.float().sum(), ins)
    got, *got_grads = lm.compile([out, *grads])(**{f"a{i}": a for i, a in enumerate(arrays)})
    want.float().sum().backward()
    tol = 2e-2 if dtype is lm.bfloat16 else 3e-3  # of the largest magnitude: a few roundings to 8 or 11 bits
    scale = float(np.abs(from_torch(want)).max())
    np.testing.assert_allclose(got.astype(np.float32), from_torch(want), atol=tol * scale)
    for gg, p in zip(got_grads, params):
        assert gg.dtype == np.float32  # gradients reach the float32 leaves in float32
        np.testing.assert_allclose(gg, p.grad.numpy(), atol=tol * float(p.grad.abs().max()))


def test_float64_and_int_computations_are_left_as_torchs():
    """torch's autocast casts only float32 (and 16-bit) operands: float64 matmuls and int ops stay."""
    g = lm.Graph()
    a, b = g.input("a", (3, 4), dtype=lm.float64), g.input("b", (4, 2), dtype=lm.float64)
    i = g.input("i", (3,), dtype=lm.int32)
    mm, ii = train.autocast([a @ b, i * 3], lm.bfloat16)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert (torch.ones(3, 4, dtype=torch.float64) @ torch.ones(4, 2, dtype=torch.float64)).dtype == torch.float64
    assert mm.dtype is lm.float64 and ii.dtype is lm.int32


class _Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc, self.ln, self.out = nn.Linear(32, 64), nn.LayerNorm(64), nn.Linear(64, 10)

    def forward(self, x):
        return self.out(self.ln(self.fc(x)).relu())


@pytest.mark.parametrize("dtype", [lm.bfloat16, lm.float16])
def test_a_small_model_under_autocast_matches_torchs(dtype):
    """Linear, LayerNorm, ReLU, Linear, softmax and cross_entropy under torch.autocast("cpu") and
    train.autocast: the same result dtypes (probabilities 16-bit, from 16-bit logits; the loss float32),
    values and parameter gradients within the 16-bit rounding of float32's (measured, bfloat16: loss
    1.1e-4 off float32's, torch's 0.8e-4, both computing cross_entropy in float32; gradients 8e-3 of
    the largest from torch's)."""
    rng = np.random.default_rng(0)
    xs, ys = rng.standard_normal((16, 32)).astype(np.float32), rng.integers(0, 10, 16).astype(np.int32)
    lm.manual_seed(0)
    model = _Net()
    sd = {k: torch.from_numpy(v.copy()) for k, v in model.state_dict().items()}
    tm = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.LayerNorm(64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
    tm.load_state_dict({f"{i}.{k.split('.')[1]}": v for k, v in sd.items()
                        for i in [{"fc": 0, "ln": 1, "out": 3}[k.split(".")[0]]]})
    with torch.autocast("cpu", dtype=TORCH_DTYPE[dtype]):
        logits = tm(torch.from_numpy(xs))
        probs = torch.softmax(logits, -1)
        tloss = F.cross_entropy(logits, torch.from_numpy(ys).long())
    tloss.backward()
    g = lm.Graph()
    x, y = g.input("x", (16, 32)), g.input("y", (16,), dtype=lm.int32)
    logits32 = model(x)
    loss, p = train.autocast([train.cross_entropy(logits32, y), logits32.softmax(-1)], dtype)
    assert (loss.dtype, p.dtype) == (lm.float32, dtype)
    assert (tloss.dtype, probs.dtype) == (torch.float32, TORCH_DTYPE[dtype])
    params = [model.fc.weight, model.ln.weight, model.out.bias]
    grads = train.grad(loss, params)
    got_loss, got_p, *got_g = lm.compile([loss, p, *grads])(x=xs, y=ys)
    tol = 1e-2 if dtype is lm.bfloat16 else 2e-3
    np.testing.assert_allclose(got_loss, tloss.item(), rtol=tol)
    np.testing.assert_allclose(got_p.astype(np.float32), from_torch(probs), atol=tol)
    for gg, tp in zip(got_g, [tm[0].weight, tm[1].weight, tm[3].bias]):
        assert gg.dtype == np.float32
        np.testing.assert_allclose(gg, tp.grad.numpy(), atol=3 * tol * float(tp.grad.abs().max()))


@pytest.mark.parametrize("dtype", [lm.bfloat16, lm.float16])
def test_batchnorm_running_statistics_converge_as_torchs(dtype):
    """The running-statistic blends were rebuilt in 16 bits: ``0.9 * running_mean + 0.1 * batch_mean``
    rounds back to running_mean once the step is under half an ulp, so the running mean stalled 4.7%
    (bfloat16) or 0.8% (float16) short of a batch mean of 3; torch keeps the buffers float32. Now the
    blend computes in float32 over the 16-bit batch statistics."""
    rng = np.random.default_rng(0)
    xs = (rng.standard_normal((64, 4)) * 0.1 + 3.0).astype(np.float32)
    ys = rng.standard_normal((64, 1)).astype(np.float32)
    stats = []
    for cd in (None, dtype):
        lm.manual_seed(0)
        bn, lin = nn.BatchNorm1d(4), nn.Linear(4, 1)
        g = lm.Graph()
        x, y = g.input("x", ("B", 4)), g.input("y", ("B", 1))
        step = train.compile_step(train.mse_loss(lin(bn(x)), y), train.SGD(lin.parameters(), lr=0.01),
                                  compute_dtype=cd)
        for _ in range(60):
            step(x=xs, y=ys)
        stats.append((bn.running_mean.data.copy(), bn.running_var.data.copy()))
        assert bn.running_mean.data.dtype == np.float32
    tbn = torch.nn.BatchNorm1d(4)
    for _ in range(60):
        with torch.autocast("cpu", dtype=TORCH_DTYPE[dtype]):
            tbn(torch.from_numpy(xs))
    tol = 4e-3 if dtype is lm.bfloat16 else 5e-4  # the 16-bit batch mean's own rounding (2**-9, 2**-12)
    np.testing.assert_allclose(stats[1][0], stats[0][0], rtol=tol)
    np.testing.assert_allclose(stats[1][0], tbn.running_mean.numpy(), rtol=tol)
    np.testing.assert_allclose(stats[1][1], tbn.running_var.numpy(), rtol=0.05)  # (of 16-bit squares)


def test_float_labels_cast_to_int_keep_their_class_under_float16():
    """Labels that arrive as float32 and are cast for cross_entropy (``y.to(lm.int32)``) went through
    float16 first: class 2049 became 2048 and 2999 became 3000 (out of range). Now the step trains on the
    classes given, as torch's autocast (which leaves casts alone) and as the float32 step."""
    rng = np.random.default_rng(0)
    xs = rng.standard_normal((4, 8)).astype(np.float32)
    ys = np.array([2049.0, 2999.0, 1.0, 2047.0], np.float32)
    losses = []
    for cd in (None, lm.float16):
        lm.manual_seed(0)
        model = nn.Linear(8, 3000)
        g = lm.Graph()
        x, y = g.input("x", ("B", 8)), g.input("y", ("B",))
        step = train.compile_step(train.cross_entropy(model(x), y.to(lm.int32)), train.SGD(model.parameters(), lr=0.1),
                                  compute_dtype=cd, scaler=train.GradScaler() if cd else None)
        losses.append([step(x=xs, y=ys) for _ in range(2)])
    np.testing.assert_allclose(losses[1], losses[0], rtol=2e-3)
