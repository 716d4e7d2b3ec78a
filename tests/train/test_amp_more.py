"""Quick checks of mixed precision against torch.amp: GradScaler's scale sequence over injected inf/NaN
gradients step for step (odd factors, the float32 ceiling), torch.amp.GradScaler's argument order
(device first) and path (``lm.amp.GradScaler``), a scale float32 cannot hold, and ``train.autocast``'s
argument errors."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import luminal as lm
from luminal import train
from luminal.frontend.state import State


def _torch_scales(kw, bad_steps, n):
    """torch's GradScaler over ``n`` steps of one parameter whose gradient is inf (even steps) or NaN
    (odd) at ``bad_steps``: (scale, growth tracker, skipped) after each update."""
    p = torch.nn.Parameter(torch.ones(1))
    opt = torch.optim.SGD([p], lr=0.1)
    t = torch.amp.GradScaler("cpu", **kw)
    out = []
    for i in range(n):
        opt.zero_grad()
        t.scale(p.sum()).backward()
        if i in bad_steps:
            p.grad.fill_(float("nan") if i % 2 else float("inf"))
        before = p.detach().clone()
        t.step(opt)
        skipped = bool(torch.equal(before, p.detach()))
        t.update()
        out.append((t.get_scale(), int(t._growth_tracker), skipped))
    return out


@pytest.mark.parametrize("kw", [
    dict(init_scale=3.7, growth_factor=3.3, backoff_factor=0.31, growth_interval=2),
    dict(init_scale=2.0**16, growth_factor=2.0, backoff_factor=0.5, growth_interval=1),
    dict(init_scale=1e38, growth_factor=7.0, backoff_factor=0.9, growth_interval=1),  # growth past float32: kept
    dict(init_scale=0.1, growth_factor=1.0001, backoff_factor=0.999, growth_interval=3),
])
def test_scale_sequence_matches_torch_step_for_step(kw):
    bad = {1, 4, 5, 9, 10, 11}
    want = _torch_scales(kw, bad, 16)
    s = train.GradScaler("cpu", **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (growth past float32's max warned "overflow encountered in cast")
        for i, (scale, tracker, skipped) in enumerate(want):
            assert skipped == (i in bad)
            s.update(i in bad)
            assert (s.get_scale(), s.growth_tracker) == (scale, tracker), (i, s.get_scale(), scale)
    assert s.skipped == len(bad)


def test_torch_amp_argument_order_and_path():
    """torch.amp.GradScaler(device, init_scale, ...): the device came first; here it was read as the
    init_scale ("init_scale must be a positive finite number, got 'cuda'")."""
    assert lm.amp.GradScaler is train.GradScaler
    for device in ("cuda", "cpu", "cuda:1"):
        s = lm.amp.GradScaler(device, 1024.0, 3.0, 0.25, 7, True)
        t = torch.amp.GradScaler("cpu", 1024.0, 3.0, 0.25, 7, True)
        for name in ("get_scale", "get_growth_factor", "get_backoff_factor", "get_growth_interval", "is_enabled"):
            assert getattr(s, name)() == getattr(t, name)(), name
    assert train.GradScaler().get_scale() == 2.0**16
    with pytest.raises(ValueError, match=r"^GradScaler: device must be a device name .*got 1024.0; for a scale, "
                                         r"pass init_scale=1024.0$"):
        train.GradScaler(1024.0)
    with pytest.raises(ValueError, match="device must be a device name .*got 'gpu'"):
        train.GradScaler("gpu")


def test_a_scale_float32_cannot_hold_is_refused():
    """torch's float32 scale of 1e39 is inf (every step skipped, backed off to inf again); refused here,
    and in a loaded state."""
    with pytest.raises(ValueError, match=r"^GradScaler: init_scale 1e\+39 is above float32's largest value"):
        train.GradScaler(init_scale=1e39)
    s = train.GradScaler(init_scale=8.0)
    with pytest.raises(ValueError, match="^GradScaler.load_state_dict: scale 1e\\+39 is above float32's"):
        s.load_state_dict({**s.state_dict(), "scale": 1e39})
    assert s.get_scale() == 8.0
    top = train.GradScaler(init_scale=3.4028234663852886e38)  # float32's max itself is a scale
    assert top.get_scale() == 3.4028234663852886e38


def test_autocast_arguments():
    g = lm.Graph()
    x = g.input("x", (4, 8))
    one = train.autocast(x * 2.0, lm.bfloat16)  # one tensor in, one out (as lm.compile takes one)
    assert isinstance(one, lm.GraphTensor) and one.dtype is lm.bfloat16
    assert [t.dtype for t in train.autocast((x * 2.0, x.sum(-1)), "half")] == [lm.float16, lm.float16]
    with pytest.raises(ValueError, match=r"^autocast: dtype is None; pass the compute dtype"):
        train.autocast([x], None)  # (was "got float64")
    for bad in (lm.float64, lm.float32, lm.int32):  # torch's CPU autocast warns and does nothing for these
        with pytest.raises(ValueError, match=f"float16 or bfloat16, got {bad.name}$"):
            train.autocast([x], bad)
    with pytest.raises(TypeError, match=r"^autocast: tensors\[1\] is a float, not a GraphTensor$"):
        train.autocast([x, 3.0], lm.float16)  # (was AttributeError: 'float' object has no attribute 'graph')
    with pytest.raises(ValueError, match=r"tensors\[1\] is of another graph than tensors\[0\]"):
        train.autocast([x, lm.Graph().input("y", (2,))], lm.float16)


def test_a_states_new_value_is_blended_in_float32():
    """A value written back to a State (``graph.assign``, a running statistic) that shares a 16-bit
    batch statistic with the loss computes its own ops in float32 over it; the loss's stay 16-bit."""
    g = lm.Graph()
    x = g.input("x", (8, 4))
    running = State(np.zeros(4, np.float32), name="running")
    mean = x.mean(0)
    g.assign(running, g.state(running) * 0.9 + mean * 0.1)
    loss = ((x - mean) ** 2).sum(-1)
    out, upd = train.autocast([loss, g.updates[running]], lm.bfloat16)
    assert out.dtype is lm.bfloat16 and upd.dtype is lm.float32
    assert {s.dtype for s, _ in upd.node.srcs} == {lm.float32}
    r = np.float32(2.98)
    running.set(np.full(4, r, np.float32))
    (got,) = lm.compile([upd])(x=np.full((8, 4), 3.25, np.float32))  # (a batch mean exact in bfloat16)
    np.testing.assert_allclose(got, r * np.float32(0.9) + np.float32(3.25) * np.float32(0.1), rtol=1e-6)


@pytest.mark.parametrize("dtype", [lm.float16, lm.bfloat16])
def test_casts_and_comparisons_of_float32_inputs_are_exact(dtype):
    """torch's autocast leaves casts and comparisons alone; the rewrite read a float32 input through a
    16-bit cast first: ``y.to(lm.int32)`` of 2049.0 was 2048 (float16), of 70000.0 int32's max (float16's
    inf), 70144 (bfloat16); ``y.double()`` inf; ``y.half()`` rounded twice under bfloat16."""
    g = lm.Graph()
    y = g.input("y", (5,))
    outs = [y.to(lm.int32), y.double(), y.half(), y < 2049.5, y.sum()]
    ys = np.array([2049.0, 70000.0, 3.0001, 1e-8, 1.005], np.float32)
    ints, wide, half, less, total = lm.compile(train.autocast(outs, dtype))(y=ys)
    np.testing.assert_array_equal(ints, [2049, 70000, 3, 0, 1])
    assert wide.dtype == np.float64 and (wide == ys.astype(np.float64)).all()
    # one rounding, to nearest even (2049 a tie; 1.005 is 1.0078125 through bfloat16's 8 bits)
    np.testing.assert_array_equal(half, np.array([2048.0, np.inf, 3.0, 0.0, 1 + 5 * 2.0**-10], np.float16))
    np.testing.assert_array_equal(less, [True, False, True, True, True])
    assert total.dtype == np.float32  # (one element: float32, over the input as it is)
    np.testing.assert_allclose(total, ys.sum(dtype=np.float64), rtol=1e-7)
