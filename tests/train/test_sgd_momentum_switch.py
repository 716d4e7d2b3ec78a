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
