"""torch's per-step GradScaler calls (``scaler.scale(loss)``, ``scaler.step(opt)``, ``scaler.update()``,
``scaler.unscale_(opt)``) fail with an EagerOnlyError naming ``compile_step(scaler=...)``, where luminal's
scaling, unscaling, skipping and update happen; ``scaler.scale`` stays the current scale, a float, and
the step still drives the scaler as before."""

from __future__ import annotations

import json
import pickle

import numpy as np
import pytest

import luminal as lm
from luminal import nn, train
from luminal.frontend.eager import EagerOnlyError


def _step(scaler):
    lm.manual_seed(0)
    model = nn.Linear(4, 3)
    g = lm.Graph()
    x, y = g.input("x", ("B", 4)), g.input("y", ("B", 3))
    opt = train.SGD(model.parameters(), lr=0.1)
    loss = train.mse_loss(model(x), y)
    return loss, opt, train.compile_step(loss, opt, compute_dtype=lm.float16, scaler=scaler)


CALLS = {  # name -> the torch-style call
    "scale": lambda s, loss, opt: s.scale(loss),
    "step": lambda s, loss, opt: s.step(opt),
    "update": lambda s, loss, opt: s.update(),
    "unscale_": lambda s, loss, opt: s.unscale_(opt),
}


@pytest.mark.parametrize("name", list(CALLS))
def test_torch_per_step_calls_name_compile_step(name):
    scaler = train.GradScaler(init_scale=2.0**10)
    loss, opt, _ = _step(scaler)
    before = scaler.state_dict()
    with pytest.raises(EagerOnlyError) as e:
        CALLS[name](scaler, loss, opt)
    msg = str(e.value)
    assert msg.startswith(f"GradScaler.{name}: luminal's GradScaler is passed to the compiled step"), msg
    for text in ("train.compile_step(loss, optimizer, compute_dtype=lm.float16, scaler=scaler)",
                 "scales the loss, unscales the gradients", "nothing to call per step"):
        assert text in msg, msg
    assert f"called at {__file__}:" in msg and f"s.{name}(" in msg.splitlines()[-1], msg  # the user's line
    assert scaler.state_dict() == before


def test_update_with_torchs_new_scale_argument_is_refused_too():
    scaler = train.GradScaler(init_scale=8.0)
    with pytest.raises(EagerOnlyError, match="^GradScaler.update: "):
        scaler.update(1024.0)
    assert scaler.scale == 8.0


def test_scale_is_still_the_current_scale_a_float():
    scaler = train.GradScaler(init_scale=2.0**10)
    assert scaler.scale == 2.0**10 == scaler.get_scale() and isinstance(scaler.scale, float)
    assert scaler.scale * 2 == 2.0**11 and f"{scaler.scale:.0f}" == "1024" and repr(scaler.scale) == "1024.0"
    assert float(pickle.loads(pickle.dumps(scaler.scale))) == 1024.0
    sd = scaler.state_dict()
    assert type(sd["scale"]) is float and json.loads(json.dumps(sd)) == sd


def test_the_step_still_drives_the_scaler():
    """What the scaler does inside compile_step is unchanged: good steps count toward growth."""
    scaler = train.GradScaler(init_scale=2.0**10, growth_interval=2)
    _, opt, step = _step(scaler)
    rng = np.random.default_rng(0)
    for _ in range(2):
        step(x=rng.standard_normal((8, 4)).astype(np.float32), y=rng.standard_normal((8, 3)).astype(np.float32))
        assert not step.last_step_skipped
    assert opt.steps == 2 and scaler.scale == 2.0**11 and scaler.growth_tracker == 0
