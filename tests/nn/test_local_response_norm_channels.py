"""``nn.LocalResponseNorm`` / ``F.local_response_norm`` with a symbolic channel count: one compiled
program bound to C = 0 (an empty output, as torch's; the window unfold required size <= C + size - 1
and raised at run time), to C below and above the window size, and a static C = 0."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as TF
from frontend.sizes import check_sizes  # tests/frontend (tests/ is on the path)
from parity import check, rand

import luminal.nn.functional as F
from luminal import nn

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _lrn(*args, **kwargs):
    def op(t):
        return (TF if isinstance(t, torch.Tensor) else F).local_response_norm(t, *args, **kwargs)

    return op


@pytest.mark.parametrize("size", [1, 2, 3, 5])
def test_symbolic_channels_bound_to_zero_and_more(size, backend):
    check_sizes(_lrn(size, alpha=0.5, k=2.0), lambda c: [rand((2, c, 3), seed=c, low=-3, high=3)],
                [(2, "C", 3)], sizes=(0, 4, 1, 0), backend=backend)


def test_module_symbolic_batch_and_channels_bound_to_zero():
    def op(t):
        return (torch.nn if isinstance(t, torch.Tensor) else nn).LocalResponseNorm(3)(t)

    check_sizes(op, lambda c: [rand((c + 1, c, 2, 2), seed=c).astype(np.float64)], [("B", "C", 2, 2)],
                sizes=(0, 3), backend="reference")


@pytest.mark.parametrize("shape", [(2, 0, 3), (1, 0, 2, 2)])
def test_static_zero_channels(shape):
    check(_lrn(2), [rand(shape)])
