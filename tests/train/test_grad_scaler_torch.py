"""GradScaler as torch's: a disabled scaler (``enabled=False``) neither scales nor skips, so an
overflowing float16 step is applied (it was skipped, though the docs said "never skips"); torch's
accessors; a torch GradScaler's ``state_dict()`` loads (``_growth_tracker``; a disabled one's empty
state)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import luminal as lm
from luminal import nn, train


def _overflowing_step(scaler):
    lm.manual_seed(0)
    model = nn.Linear(4, 1)
    g = lm.Graph()
    x = g.input("x", ("B", 4))
    opt = train.SGD(model.parameters(), lr=1e-6)
    step = train.compile_step((model(x) * 1000.0).sum(), opt, compute_dtype=lm.float16, scaler=scaler,
                              backend="cpu")
    step(x=np.full((2, 4), 100.0, np.float32))  # float16 gradients of 2e5: inf
    return step, opt, model


def test_a_disabled_scaler_applies_an_overflowing_step_as_torchs():
    p = torch.nn.Parameter(torch.ones(1))
    s = torch.amp.GradScaler("cpu", enabled=False)
    p.grad = torch.tensor([float("inf")])
    s.step(torch.optim.SGD([p], lr=1.0))
    s.update()
    assert torch.isinf(p.data).all() and s.get_scale() == 1.0
    step, opt, model = _overflowing_step(train.GradScaler(enabled=False))
    assert not step.last_step_skipped and opt.steps == 1 and not np.isfinite(model.weight.data).all()
    assert step.scaler.get_scale() == 1.0 and step.scaler.skipped == 0


def test_an_enabled_scaler_still_skips_it():
    step, opt, model = _overflowing_step(train.GradScaler())
    assert step.last_step_skipped and opt.steps == 0 and np.isfinite(model.weight.data).all()
    assert step.scaler.skipped == 1 and step.scaler.get_scale() == 2.0**15


def test_torchs_accessors():
    kw = dict(init_scale=256.0, growth_factor=3.0, backoff_factor=0.25, growth_interval=5)
    t, s = torch.amp.GradScaler("cpu", **kw), train.GradScaler(**kw)
    for name in ("is_enabled", "get_growth_factor", "get_backoff_factor", "get_growth_interval", "get_scale"):
        assert getattr(s, name)() == getattr(t, name)(), name
    for setter, v in (("set_growth_factor", 4.0), ("set_backoff_factor", 0.125), ("set_growth_interval", 9)):
        getattr(t, setter)(v)
        getattr(s, setter)(v)
    assert (s.get_growth_factor(), s.get_backoff_factor(), s.get_growth_interval()) == (4.0, 0.125, 9)
    with pytest.raises(ValueError, match="set_growth_factor: growth_factor must be > 1"):
        s.set_growth_factor(0.5)
    with pytest.raises(ValueError, match="set_growth_interval: growth_interval must be an int >= 1"):
        s.set_growth_interval(0)


def test_a_torch_scalers_state_loads():
    t = torch.amp.GradScaler("cpu", init_scale=1024.0, growth_interval=7)
    sd = t.state_dict()
    sd["_growth_tracker"] = 3
    s = train.GradScaler()
    s.load_state_dict(sd)
    assert (s.get_scale(), s.growth_interval, s.growth_tracker) == (1024.0, 7, 3)
    off = train.GradScaler(enabled=False)
    off.load_state_dict(torch.amp.GradScaler("cpu", enabled=False).state_dict())  # {}: nothing to load
    off.load_state_dict(sd)  # torch's disabled scaler ignores a state too
    assert off.get_scale() == 1.0
    with pytest.raises(ValueError, match="the state is empty, as a disabled scaler's"):
        train.GradScaler().load_state_dict({})
    with pytest.raises(ValueError, match="both 'growth_tracker' and torch's '_growth_tracker'"):
        train.GradScaler().load_state_dict({**sd, "growth_tracker": 1})


def test_torch_loads_a_luminal_scalers_state_and_continues_the_same():
    """luminal's state_dict under torch's keys (``_growth_tracker``, not ``growth_tracker``): a torch
    GradScaler loads it and continues the same scale sequence; a state written with the old key still
    loads here."""
    kw = dict(init_scale=64.0, growth_factor=2.0, backoff_factor=0.5, growth_interval=3)
    s = train.GradScaler(**kw)
    for bad in (False, True, False, False):
        s.update(bad)
    sd = s.state_dict()
    assert sd["_growth_tracker"] == 2 and "growth_tracker" not in sd
    t = torch.amp.GradScaler("cpu")
    t.load_state_dict(sd)
    p = torch.nn.Parameter(torch.ones(1))
    opt = torch.optim.SGD([p], lr=0.1)
    for i, bad in enumerate((False, False, True, False)):
        opt.zero_grad()
        t.scale(p.sum()).backward()
        if bad:
            p.grad.fill_(float("inf"))
        t.step(opt)
        t.update()
        s.update(bad)
        assert t.get_scale() == s.get_scale() and int(t._growth_tracker) == s.growth_tracker, i
    old = {("growth_tracker" if k == "_growth_tracker" else k): v for k, v in sd.items()}
    back = train.GradScaler()
    back.load_state_dict(old)
    assert (back.get_scale(), back.growth_tracker) == (32.0, 2)
