"""Parity with torch for ``histc`` (``luminal/frontend/ops/search.py``): counts with a given range and
with the data's range, values at both ends (``max`` in the last bin), outside the range, NaNs, a
range of one value, empty and N-d inputs, float64 and float16; the argument errors; and that the
counts have no gradient."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from parity import check

import luminal as lm

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _ns(t):
    return torch if isinstance(t, torch.Tensor) else lm


def test_histc_on_every_backend(backend):
    x = np.random.default_rng(0).normal(size=(200,)).astype(np.float32)
    check(lambda t: (t.histc(10, -2, 2), _ns(t).histc(t, 7)), [x], backend=backend, grad=False)


@pytest.mark.parametrize("bins,lo,hi", [(1, 0, 0), (4, 0, 5), (16, 0, 0), (5, -1.5, 0.25), (100, 0, 0)])
def test_histc_ranges(bins, lo, hi):
    for seed in range(3):
        x = np.random.default_rng(seed).uniform(-2, 3, size=(4, 50)).astype(np.float32)
        check(lambda t: t.histc(bins, lo, hi), [x], grad=False)


@pytest.mark.parametrize("row,bins,lo,hi", [
    ([1.0, 2.0, 1.0, 4.0, 5.0, np.nan], 4, 0, 5),   # NaN not counted; 5 == max in the last bin
    ([0.0, 5.0, -0.1, 5.1, 2.5], 4, 0, 5),          # both ends counted, outside ones not
    ([3.0, 3.0], 4, 0, 0),                           # one value: the range [2, 4]
    ([-7.0], 3, 0, 0),
    ([np.inf, 1.0, -np.inf], 2, 0, 4),               # infinities outside a given range
    ([1.0, 2.0, 3.0, 4.0], 3, 2, 2),                 # min == max, whatever the value: the data's range
])
def test_histc_special_rows(row, bins, lo, hi):
    check(lambda t: t.histc(bins, lo, hi), [np.array(row, np.float32)], grad=False)


def test_histc_dtypes_and_empty():
    x = np.random.default_rng(3).uniform(0, 1, size=(64,))
    check(lambda t: t.histc(8), [x], grad=False)  # float64
    check(lambda t: t.histc(8, 0, 1), [x.astype(np.float16)], grad=False)
    check(lambda t: t.histc(3), [np.zeros((0,), np.float32)], grad=False)  # empty: [-1, 1], no counts
    check(lambda t: t.histc(3, 2, 2), [np.zeros((0, 2), np.float32)], grad=False)
    check(lambda t: t.histc(5, 0, 1), [np.array(0.5, np.float32)], grad=False)  # 0-d


def test_histc_errors():
    g = lm.Graph()
    x = g.input("x", (4,))
    with pytest.raises(ValueError, match="^histc: bins must be an int > 0, got 0"):
        x.histc(0)
    with pytest.raises(ValueError, match=r"^histc: max \(1\) must be at least min \(3\)"):
        x.histc(4, 3, 1)
    with pytest.raises(ValueError, match=r"^histc: the range \[inf, 0\] is not finite"):
        x.histc(4, float("inf"))
    with pytest.raises(TypeError, match="^histc: takes a float tensor, got int32"):
        g.input("i", (4,), dtype=lm.int32).histc(4)
    with pytest.raises(TypeError, match="^histc: min must be a number"):
        x.histc(4, x, 1)
    with pytest.raises(ValueError, match="^grad: the loss depends on"):  # torch: histc has no derivative
        lm.train.grad(x.histc(4, 0, 1).sum(), x)
