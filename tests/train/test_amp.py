"""Mixed precision: compile_step(compute_dtype=...) on float32 masters, train.autocast, and the dynamic
loss scaler (growth, backoff, in-program skip of overflowing steps)."""

from __future__ import annotations

import numpy as np
import pytest

import luminal as lm
from luminal import nn, train
from luminal.data import batches, load_mnist


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(784, 256), nn.Linear(256, 10)

    def forward(self, x):
        return self.fc2(self.fc1(x).relu())


def _mnist_run(data, compute_dtype, scaler):
    lm.manual_seed(0)
    model = MLP()
    g = lm.Graph()
    x, y = g.input("x", ("B", 784)), g.input("y", ("B",), dtype=lm.int32)
    opt = train.AdamW(model.parameters(), lr=1e-3)
    step = train.compile_step(train.cross_entropy(model(x), y), opt, compute_dtype=compute_dtype, scaler=scaler)
    predict = lm.compile(model(x).argmax(-1))
    losses, skipped = [], 0
    for epoch in range(2):
        for xb, yb in batches((data.train_images, data.train_labels), 64, shuffle=True, seed=[0, epoch]):
            losses.append(step(x=xb, y=yb))
            skipped += step.last_step_skipped
    acc = float(np.mean(predict(x=data.test_images) == data.test_labels))
    return acc, losses, skipped, opt, model


def test_float16_mlp_trains_to_float32_accuracy():
    """784-256-10 MLP, AdamW, 2 epochs of the shipped subset, same seed and batches: float16 compute with
    float32 masters and a GradScaler lands within 1% of float32 (measured: 90.4% vs 90.3%)."""
    data = load_mnist()
    acc32, losses32, _, _, _ = _mnist_run(data, None, None)
    scaler = train.GradScaler()
    acc16, losses16, skipped, opt, model = _mnist_run(data, lm.float16, scaler)
    assert acc32 > 0.85
    assert abs(acc16 - acc32) <= 0.01, (acc16, acc32)
    # the forward really ran in float16 (the first loss, same weights and batch, is float16's
    # rounding away from float32's: the logits', as the loss computes in float32 as torch's, 1e-6
    # here), the masters stayed float32
    assert 0 < abs(losses16[0] - losses32[0]) / losses32[0] < 1e-2, (losses16[0], losses32[0])
    assert all(p.dtype is lm.float32 and p.data.dtype == np.float32 for p in model.parameters())
    # torch's default scale, 2**16, is above float16's largest value: the loss and its scaling stay
    # float32 (ops of one element), so the backward starts from a finite seed and no step is skipped
    assert skipped == scaler.skipped == 0 and opt.steps == len(losses16)
    assert scaler.scale == 2.0**16  # growth_interval 2000 not reached


def test_grad_scaler_growth_backoff_and_validation():
    s = train.GradScaler(init_scale=8.0, growth_factor=2.0, backoff_factor=0.25, growth_interval=3)
    assert s.scale == 8.0
    s.update(False)
    s.update(False)
    assert s.scale == 8.0 and s.growth_tracker == 2
    s.update(False)
    assert s.scale == 16.0 and s.growth_tracker == 0
    s.update(False)
    s.update(True)  # an overflow resets the count of good steps
    assert s.scale == 4.0 and s.growth_tracker == 0 and s.skipped == 1
    s.update(False)
    s.update(False)
    assert s.scale == 4.0
    s.update(False)
    assert s.scale == 8.0
    assert float(s._inv_scale.data) == 1 / 8.0
    off = train.GradScaler(enabled=False)
    off.update(True)
    assert off.scale == 1.0 and off.skipped == 0
    for bad in (dict(init_scale=0), dict(growth_factor=1.0), dict(backoff_factor=1.5), dict(growth_interval=0),
                dict(init_scale=float("inf"))):
        with pytest.raises(ValueError):
            train.GradScaler(**bad)
    restored = train.GradScaler()
    restored.load_state_dict(s.state_dict())
    assert restored.scale == 8.0 and restored.growth_interval == 3 and restored.backoff_factor == 0.25


@pytest.mark.parametrize("edit,match", [
    (dict(backoff_factor=float("nan")), "backoff_factor must be a positive finite number"),
    (dict(backoff_factor=0.0), "backoff_factor must be a positive finite number"),
    (dict(growth_factor=0.5), "growth_factor must be > 1"),
    (dict(growth_interval=0), "growth_interval must be an int >= 1"),
    (dict(growth_interval=2.9), "growth_interval must be an int >= 1"),
    (dict(growth_interval=float("inf")), "growth_interval must be an int >= 1"),
    (dict(skipped=-5), "skipped must be an int >= 0"),
    (dict(_growth_tracker=True), "growth_tracker must be an int >= 0"),
    (dict(enabled=False), "the state is of a scaler with enabled=False"),
    (dict(scale=float("inf")), "scale must be a positive finite number"),
    (dict(init_scale=4.0), "the state has 'init_scale', which a GradScaler does not"),
])
def test_a_scaler_state_is_checked_as_the_constructor_checks_it(edit, match):
    """Before, a loaded state was only converted (``float``, ``int``): a NaN backoff_factor made the scale NaN
    at the first overflow and every later step was skipped, silently; 2.9 became 2; enabled was ignored.
    A refused load changes nothing."""
    s = train.GradScaler(init_scale=8.0, growth_interval=3)
    dst = train.GradScaler(init_scale=2.0)
    before = dst.state_dict()
    with pytest.raises(ValueError, match=f"^GradScaler.load_state_dict: {match}"):
        dst.load_state_dict({**s.state_dict(), **edit})
    assert dst.state_dict() == before


def _linear_step(compute_dtype=None, scaler=None, seed=0, lr=0.1, **opts):
    lm.manual_seed(seed)
    model = nn.Linear(4, 3)
    g = lm.Graph()
    x, y = g.input("x", ("B", 4)), g.input("y", ("B", 3))
    opt = train.SGD(model.parameters(), lr=lr, momentum=0.9)
    step = train.compile_step(train.mse_loss(model(x), y), opt, compute_dtype=compute_dtype, scaler=scaler, **opts)
    return model, opt, step


def _batch(seed):
    rng = np.random.default_rng(seed)
    return dict(x=rng.standard_normal((8, 4)).astype(np.float32), y=rng.standard_normal((8, 3)).astype(np.float32))


def _overflowing_scaler():
    """A scale of 2**30 overflows float16's gradients of any loss here; one backoff brings it to 2**10."""
    return train.GradScaler(init_scale=2.0**30, backoff_factor=2.0**-20)


@pytest.mark.parametrize("check_finite", [False, True])
def test_overflowing_step_is_skipped_in_program(check_finite):
    """A scale float16's gradients cannot hold: that step writes nothing (parameters, momentum, step
    count), does not raise even under check_finite, and backs the scale off; the next step trains."""
    scaler = _overflowing_scaler()
    model, opt, step = _linear_step(lm.float16, scaler, check_finite=check_finite)
    before = {k: v.copy() for k, v in model.state_dict().items()}
    loss = step(**_batch(1))
    assert np.isfinite(loss) and step.last_step_skipped
    for k, v in model.state_dict().items():
        np.testing.assert_array_equal(v, before[k])  # the select wrote back the values read
    assert all((s.data == 0).all() for p in model.parameters() for s in opt.state_for(p).values())
    assert opt.steps == 0 and scaler.scale == 2.0**10 and scaler.skipped == 1
    step(**_batch(2))
    assert not step.last_step_skipped and opt.steps == 1 and scaler.scale == 2.0**10
    assert not np.allclose(model.state_dict()["weight"], before["weight"])


def test_default_scale_trains_float16_from_the_first_step():
    """torch's GradScaler default (2**16, above float16's 65504) does not skip a step of a float16
    program: the loss and its scaling are float32 ops of one element, the seed of the backward finite."""
    scaler = train.GradScaler()
    model, opt, step = _linear_step(lm.float16, scaler)
    for i in range(3):
        step(**_batch(i))
        assert not step.last_step_skipped
    assert opt.steps == 3 and scaler.skipped == 0 and scaler.scale == 2.0**16


def test_skip_clears_accumulated_gradients():
    scaler = _overflowing_scaler()
    model, opt, step = _linear_step(lm.float16, scaler, accumulate=2)
    before = model.state_dict()["weight"].copy()
    step(**_batch(1))
    assert not np.isfinite(step._acc[0].data).all()  # the micro-step accumulated an overflow
    step(**_batch(2))
    assert step.last_step_skipped and opt.steps == 0 and step.micro_step == 0
    assert all((a.data == 0).all() for a in step._acc)
    np.testing.assert_array_equal(model.state_dict()["weight"], before)
    step(**_batch(3))
    step(**_batch(4))
    assert not step.last_step_skipped and opt.steps == 1


def test_scaling_is_undone_before_the_update():
    """float32 compute with a scale of 1024 (no overflow) updates exactly as without a scaler, up to rounding;
    clipping by norm sees the unscaled gradients."""
    plain, _, plain_step = _linear_step(clip_grad_norm=0.5)
    scaled, opt, scaled_step = _linear_step(scaler=train.GradScaler(init_scale=1024.0), clip_grad_norm=0.5)
    for i in range(4):
        a, b = plain_step(**_batch(i)), scaled_step(**_batch(i))
        np.testing.assert_allclose(a, b, rtol=1e-5)
        np.testing.assert_allclose(plain_step.last_grad_norm, scaled_step.last_grad_norm, rtol=1e-4)
    assert opt.steps == 4
    for k, v in plain.state_dict().items():
        np.testing.assert_allclose(scaled.state_dict()[k], v, rtol=1e-5, atol=1e-6)


def test_bfloat16_compute_trains_and_step_state_dict_keeps_the_scaler():
    model, opt, step = _linear_step(lm.bfloat16, lr=0.05)
    losses = [step(**_batch(0)) for _ in range(30)]
    assert losses[-1] < 0.7 * losses[0]
    _, _, s32 = _linear_step(None, lr=0.05)
    first32 = s32(**_batch(0))
    assert 1e-4 < abs(losses[0] - first32) / first32 < 5e-2  # computed in bfloat16, up to its rounding
    scaler = train.GradScaler(init_scale=256.0, growth_interval=5)
    _, _, s16 = _linear_step(lm.float16, scaler)
    s16(**_batch(0))
    sd = s16.state_dict()
    assert sd["scaler"]["scale"] == 256.0 and sd["scaler"]["_growth_tracker"] == 1
    scaler2 = train.GradScaler()
    _, _, other = _linear_step(lm.float16, scaler2)
    other.load_state_dict(sd)
    assert scaler2.scale == 256.0 and scaler2.growth_tracker == 1 and scaler2.growth_interval == 5


def test_autocast_rewrites_float32_compute_and_keeps_float32_gradients():
    lm.manual_seed(0)
    model = nn.Linear(4, 2)
    g = lm.Graph()
    x = g.input("x", ("B", 4))
    out = model(x).relu().sum(-1)
    idx = g.input("i", ("B",), dtype=lm.int32)
    (o16, i16) = train.autocast([out, idx * 2], lm.float16)
    assert o16.dtype is lm.float16 and i16.dtype is lm.int32 and o16.shape == out.shape
    w = next(model.parameters())
    (gw,) = [train.grad(o16.float().sum(), [w])[0]]
    assert gw.dtype is lm.float32
    xs = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)
    f = lm.compile([out, o16, gw])
    r32, r16, grad_w = f(x=xs)
    assert r16.dtype == np.float16 and grad_w.dtype == np.float32
    np.testing.assert_allclose(r16.astype(np.float32), r32, rtol=1e-2, atol=1e-2)
    with pytest.raises(ValueError, match="float16 or bfloat16"):
        train.autocast([out], lm.float64)
    with pytest.raises(TypeError, match="GradScaler"):
        train.compile_step(out.sum(), train.SGD(model.parameters(), lr=0.1), scaler=2.0**16)


class _NormNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc, self.ln, self.out = nn.Linear(8, 16), nn.LayerNorm(16), nn.Linear(16, 3)

    def forward(self, x):
        return self.out(self.ln(self.fc(x)).relu())


@pytest.mark.parametrize("dtype", [lm.bfloat16, lm.float16])
def test_a_mean_trains_under_compute_dtype_on_every_backend(dtype, backend):
    """A LayerNorm's mean scales by 1/N, a one-element node kept in float32 (its result feeds no loss
    scaling); its 16-bit consumer got a float32 operand, which the cpu backend's IR refused (``Mul of
    bfloat16 and float32``) while the reference computed on. Every backend now trains it alike, near
    float32's losses."""
    rng = np.random.default_rng(0)
    xs, ys = rng.normal(size=(4, 8)).astype(np.float32), np.array([0, 1, 2, 1], np.int32)

    def losses(compute_dtype, on):
        lm.manual_seed(0)
        model = _NormNet()
        g = lm.Graph()
        x, y = g.input("x", ("B", 8)), g.input("y", ("B",), dtype=lm.int32)
        step = train.compile_step(train.cross_entropy(model(x), y), train.AdamW(model.parameters(), lr=1e-2),
                                  backend=on, compute_dtype=compute_dtype)
        return [step(x=xs, y=ys) for _ in range(3)]

    got, ref = losses(dtype, backend), losses(dtype, "reference")
    np.testing.assert_allclose(got, ref, rtol=1e-2)
    np.testing.assert_allclose(got, losses(None, "reference"), rtol=3e-2)
    g = lm.Graph()
    x = g.input("x", (2, 4, 32))
    (m,) = train.autocast([x.mean(-1)], dtype)
    assert {s.dtype for s, _ in m.node.srcs} == {dtype}
    xs = rng.normal(size=(2, 4, 32)).astype(np.float32)
    np.testing.assert_allclose(lm.compile(m, backend=backend)(x=xs).astype(np.float32), xs.mean(-1), atol=2e-2)
