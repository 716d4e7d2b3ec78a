"""SGD with momentum switched on after some steps: torch creates the momentum buffer at that step,
as the gradient itself, so the dampening applies from the next step on. The buffer here existed as
zeros, and its first step took ``(1 - dampening) * g`` (half the step at dampening 0.5)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import luminal as lm
from luminal import nn, train


@pytest.mark.parametrize("dampening", [0.0, 0.5])
def test_momentum_switched_on_later_matches_torch(dampening):
    rng = np.random.default_rng(0)
    w = rng.standard_normal((3, 4)).astype(np.float32)
    xs = [rng.standard_normal((5, 4)).astype(np.float32) for _ in range(7)]
    lin = nn.Linear(4, 3, bias=False)
    lin.weight.set(w)
    g = lm.Graph()
    x = g.input("x", (5, 4))
    opt = train.SGD(lin.parameters(), lr=0.1, momentum=0.0, dampening=dampening)
    step = train.compile_step((lin(x) ** 2).mean(), opt)
    tw = torch.tensor(w, requires_grad=True)
    topt = torch.optim.SGD([tw], lr=0.1, momentum=0.0, dampening=dampening)
    for i, xb in enumerate(xs):
        if i == 3:  # momentum on; off again at 5 (the buffer stays, as torch's), on at 6
            opt.param_groups[0]["momentum"] = topt.param_groups[0]["momentum"] = 0.9
        if i in (5, 6):
            opt.param_groups[0]["momentum"] = topt.param_groups[0]["momentum"] = 0.0 if i == 5 else 0.9
        step(x=xb)
        topt.zero_grad()
        ((torch.from_numpy(xb) @ tw.T) ** 2).mean().backward()
        topt.step()
        np.testing.assert_allclose(lin.weight.data, tw.detach().numpy(), rtol=1e-5, atol=1e-6, err_msg=f"step {i}")


def _run(schedule, dampening=0.5, resume_at=None, tmp_path=None, start_momentum=0.0):
    """Weights after 6 steps with momentum ``schedule[i]`` at step i, against torch; ``resume_at``: a
    checkpoint saved before that step and loaded into a new model, optimizer and step."""
    rng = np.random.default_rng(1)
    w = rng.standard_normal((3, 4)).astype(np.float32)
    xs = [rng.standard_normal((5, 4)).astype(np.float32) for _ in range(len(schedule))]

    def build(momentum):
        lin = nn.Linear(4, 3, bias=False)
        lin.weight.set(w)
        g = lm.Graph()
        x = g.input("x", (5, 4))
        opt = train.SGD(lin.parameters(), lr=0.1, momentum=momentum, dampening=dampening)
        return lin, opt, train.compile_step((lin(x) ** 2).mean(), opt)

    lin, opt, step = build(start_momentum)
    tw = torch.tensor(w, requires_grad=True)
    topt = torch.optim.SGD([tw], lr=0.1, momentum=start_momentum, dampening=dampening)
    for i, (m, xb) in enumerate(zip(schedule, xs)):
        opt.param_groups[0]["momentum"] = topt.param_groups[0]["momentum"] = m
        if i == resume_at:
            train.save_checkpoint(tmp_path / "ck.safetensors", model=lin, optimizer=opt)
            lin, opt, step = build(schedule[i])  # (a checkpoint loads into an optimizer of its options)
            train.load_checkpoint(tmp_path / "ck.safetensors", model=lin, optimizer=opt)
        opt.param_groups[0]["momentum"] = topt.param_groups[0]["momentum"] = m
        step(x=xb)
        topt.zero_grad()
        ((torch.from_numpy(xb) @ tw.T) ** 2).mean().backward()
        topt.step()
    return float(np.abs(lin.weight.data - tw.detach().numpy()).max())


def test_a_warm_up_without_momentum_after_compiling_with_it():
    """Compiled with momentum 0.9, set to 0 for three steps, then back: the buffer starts at step 3. The
    first version recorded the start when the step merely looked at the optimizer (at compile time)."""
    assert _run([0.0, 0.0, 0.0, 0.9, 0.9, 0.9], start_momentum=0.9) < 1e-6


@pytest.mark.parametrize("schedule,resume_at", [
    ([0.0, 0.0, 0.0, 0.9, 0.9, 0.9], 2),  # saved in the warm-up: no buffer yet
    ([0.0, 0.0, 0.0, 0.9, 0.9, 0.9], 5),  # saved after the buffer started
    ([0.0, 0.0, 0.9, 0.9, 0.9, 0.9], 2),  # switched on just before saving, no update with it yet
], ids=["warm-up", "started", "switched-on"])
def test_a_resumed_run_starts_the_buffer_where_torch_does(tmp_path, schedule, resume_at):
    """The checkpoint says which groups' buffers have started (``momentum_started``)."""
    assert _run(schedule, resume_at=resume_at, tmp_path=tmp_path, start_momentum=schedule[0]) < 1e-6
