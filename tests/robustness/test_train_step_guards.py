"""compile_step refuses clip bounds that flip or empty the gradient, and check_finite stops a
diverging run at the call whose loss is not finite, with nothing written by that call."""

from __future__ import annotations

import math

import numpy as np
import pytest

import luminal as lm
from luminal import nn, train
from luminal.train.step import NonFiniteLossError


def _setup(opt_cls=train.SGD, lr=1e10, seed=0, **opt_kw):
    lm.manual_seed(seed)
    m = nn.Linear(4, 1)
    g = lm.Graph()
    x, y = g.input("x", ("B", 4)), g.input("y", ("B", 1))
    loss = train.mse_loss(m(x), y)
    opt = opt_cls(m.parameters(), lr=lr, **opt_kw)
    r = np.random.default_rng(seed)
    batch = dict(x=r.standard_normal((8, 4)).astype(np.float32), y=np.ones((8, 1), np.float32))
    return m, loss, opt, batch


def _state(m, opt):
    return ([p.data.copy() for p in m.parameters()],
            [s.data.copy() for _, p in opt.params() for s in opt.state_for(p).values()], opt.steps)


def _same(a, b):
    return all(np.array_equal(u, v, equal_nan=True) for u, v in zip(a[0] + a[1], b[0] + b[1])) and a[2] == b[2]


@pytest.mark.parametrize("kw,exc,match", [
    (dict(clip_grad_norm=-1), ValueError, r"clip_grad_norm must be a positive finite number, got -1"),
    (dict(clip_grad_norm=0), ValueError, r"clip_grad_norm"),
    (dict(clip_grad_norm=math.inf), ValueError, r"clip_grad_norm"),
    (dict(clip_grad_norm=math.nan), ValueError, r"clip_grad_norm"),
    (dict(clip_grad_value=-0.5), ValueError, r"clip_grad_value must be a positive finite number"),
    (dict(clip_grad_value="1"), TypeError, r"clip_grad_value must be a positive number, got str"),
    (dict(check_finite="yes"), TypeError, r"check_finite must be True or False"),
])
def test_bad_step_options_are_refused_naming_the_argument(kw, exc, match):
    """Before: clip_grad_norm=-1 compiled, and scaled every gradient by a negative factor."""
    _, loss, opt, _ = _setup(lr=0.1)
    with pytest.raises(exc, match=match):
        train.compile_step(loss, opt, **kw)


@pytest.mark.parametrize("opt_cls,kw", [(train.SGD, dict(momentum=0.9)), (train.Adam, {}),
                                        (train.SGD, dict(clip_grad_norm=1e30))])
def test_check_finite_stops_at_the_bad_call_with_nothing_updated(opt_cls, kw):
    step_kw = {k: v for k, v in kw.items() if k.startswith("clip")}
    m, loss, opt, batch = _setup(opt_cls, lr=1e10 if opt_cls is train.SGD else 1e30,
                                 **{k: v for k, v in kw.items() if k not in step_kw})
    step = train.compile_step(loss, opt, check_finite=True, **step_kw)
    for call in range(1, 50):
        before = _state(m, opt)
        try:
            step(**batch)
        except NonFiniteLossError as e:
            assert isinstance(e, FloatingPointError) and e.call == call == step.calls
            assert f"at call {call} " in str(e) and "nothing was updated" in str(e)
            assert not (math.isfinite(e.loss) and (e.grad_norm is None or math.isfinite(e.grad_norm)))
            assert _same(_state(m, opt), before)  # parameters, optimizer state, step count
            assert all(np.isfinite(p.data).all() for p in m.parameters())
            return
    pytest.fail("the loss never became non-finite")


def test_check_finite_in_a_micro_step_keeps_the_accumulated_gradient():
    m, loss, opt, batch = _setup(lr=0.1)
    step = train.compile_step(loss, opt, check_finite=True, accumulate=2)
    step(**batch)
    acc = [a.data.copy() for a in step._acc]
    params = [p.data.copy() for p in m.parameters()]
    bad = dict(batch, y=np.full((8, 1), np.inf, np.float32))
    with pytest.raises(NonFiniteLossError, match=r"at call 2 \(optimizer step 1\)"):
        step(**bad)
    assert all(np.array_equal(a.data, b) for a, b in zip(step._acc, acc))
    assert all(np.array_equal(p.data, q) for p, q in zip(m.parameters(), params)) and step.micro_step == 1
    step2 = train.compile_step(loss, opt, check_finite=True, accumulate=3)
    step2(**batch)
    acc = [a.data.copy() for a in step2._acc]
    with pytest.raises(NonFiniteLossError, match=r"at call 2 \(micro-step 2 of 3\)"):
        step2(**bad)
    assert all(np.array_equal(a.data, b) for a, b in zip(step2._acc, acc)) and step2.micro_step == 1


def test_check_finite_does_not_change_a_healthy_run():
    runs = []
    for check in (False, True):
        m, loss, opt, batch = _setup(train.AdamW, lr=1e-2)
        step = train.compile_step(loss, opt, check_finite=check, clip_grad_norm=0.5)
        losses = [step(**batch) for _ in range(5)]
        runs.append((losses, [p.data.copy() for p in m.parameters()]))
    assert runs[0][0] == runs[1][0]
    assert all(np.array_equal(a, b) for a, b in zip(runs[0][1], runs[1][1]))


def test_without_check_finite_divergence_is_silent():
    """The library default stays off (it costs a select per updated tensor): the NaN is the caller's."""
    m, loss, opt, batch = _setup()
    step = train.compile_step(loss, opt)
    losses = [step(**batch) for _ in range(10)]
    assert not math.isfinite(losses[-1]) and opt.steps == 10
