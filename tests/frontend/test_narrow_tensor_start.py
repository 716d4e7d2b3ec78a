"""Parity with torch for ``narrow`` at a start held by a 0-d integer tensor (known only when the
program runs): values and gradients, negative starts, symbolic sizes, and the errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from parity import check, rand

import luminal as lm

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _ns(t):
    return torch if isinstance(t, torch.Tensor) else lm


@pytest.mark.parametrize("dim,start,length", [(1, 2, 3), (0, 0, 4), (-1, -4, 2), (1, 0, 0)])
def test_narrow_at_a_tensor_start(dim, start, length, backend):
    x = rand((4, 6))
    s = np.array(start, np.int32)
    check(lambda t, i: t.narrow(dim, i, length), [x, s], backend=backend)
    check(lambda t, i: _ns(t).narrow(t, dim, i, length), [x.T.copy(), s], backend=backend,
          pre=lambda t: t.transpose(0, 1) if t.ndim else t)  # a transposed view


def test_narrow_at_a_tensor_start_over_a_symbolic_dim():
    g = lm.Graph()
    x, i = g.input("x", ("T", 3)), g.input("i", (), dtype=lm.int32)
    f = lm.compile(x.narrow(0, i, 2) * 1, backend="reference")
    a = np.arange(15, dtype=np.float32).reshape(5, 3)
    np.testing.assert_array_equal(f(x=a, i=np.array(-3, np.int32)), a[2:4])
    with pytest.raises(IndexError):
        f(x=a, i=np.array(4, np.int32))  # 4 + 2 runs past the 5 rows


def test_narrow_tensor_start_errors():
    g = lm.Graph()
    x = g.input("x", (4, 6))
    with pytest.raises(TypeError, match=r"^narrow: a tensor start must be a 0-d integer tensor, got \(2,\) int32"):
        x.narrow(1, g.input("i", (2,), dtype=lm.int32), 2)
    with pytest.raises(TypeError, match=r"^narrow: a tensor start must be a 0-d integer tensor, got \(\) float32"):
        x.narrow(1, g.input("f", ()), 2)
    with pytest.raises(IndexError, match="^narrow: length 7 exceeds dim 1 of size 6"):
        x.narrow(1, g.input("j", (), dtype=lm.int32), 7)
