"""torch's out-of-place ``masked_fill`` broadcasts the input and the mask together (a (1, 2, 2) input
with a (2, 2, 2) mask gives (2, 2, 2)); luminal refused a mask larger than the input. The in-place
``masked_fill_`` still keeps the tensor's shape, as torch's (which refuses it too)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from parity import check

import luminal as lm


@pytest.mark.parametrize("xs,ms", [((1, 2, 2), (2, 2, 2)), ((3, 1), (1, 4)), ((2, 3), (3,)), ((), (2, 2))])
def test_masked_fill_broadcasts_input_and_mask(xs, ms):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(xs).astype(np.float32)
    m = rng.random(ms) > 0.5
    check(lambda t, mask: t.masked_fill(mask, -1.5), [x, m])
    check(lambda t, mask: t.masked_fill(mask, t.sum() * 0 + 2.0), [x, m])


def test_in_place_masked_fill_keeps_the_shape_as_torchs():
    with pytest.raises(RuntimeError):
        torch.zeros(1, 2).masked_fill_(torch.ones(2, 2, dtype=torch.bool), 1.0)
    g = lm.Graph()
    x = g.input("x", (1, 2))
    with pytest.raises(ValueError, match="^masked_fill_: the result has shape"):
        x.masked_fill_(g.input("m", (2, 2), dtype=lm.bool), 1.0)
