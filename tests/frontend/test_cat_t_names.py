"""torch's other names for cat (``concat``, ``concatenate``) and the function form of ``t``: values and
gradients against torch's (they were missing: ``lm.concat`` was an AttributeError)."""

from __future__ import annotations

import pytest
import torch
from parity import check, rand

import luminal as lm


@pytest.mark.parametrize("name", ["concat", "concatenate"])
def test_cat_names(name, backend):
    a, b = rand((2, 3), seed=1), rand((2, 4), seed=2)
    check(lambda x, y: (getattr(lm, name)([x, y], dim=1), getattr(lm, name)((x, x))),
          [a, b], backend=backend, torch_op=lambda x, y: (getattr(torch, name)([x, y], dim=1),
                                                           getattr(torch, name)((x, x))))


@pytest.mark.parametrize("shape", [(), (4,), (2, 3)])
def test_t_function(shape, backend):
    check(lambda x: lm.t(x) * 2, [rand(shape, seed=3)], backend=backend,
          torch_op=lambda x: torch.t(x) * 2)


def test_t_function_refuses_three_dims():
    g = lm.Graph()
    with pytest.raises(ValueError, match="^t: "):
        lm.t(g.input("x", (2, 3, 4)))
