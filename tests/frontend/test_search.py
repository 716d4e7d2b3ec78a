"""Parity with torch for searchsorted, bucketize and isin (``frontend/ops/search.py``): both sides,
ties, NaN and infinite values, N-d sequences, sorter, number operands; errors."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from parity import check, rand

import luminal as lm

pytestmark = pytest.mark.usefixtures("one_torch_thread")

NAN, INF = math.nan, math.inf
BOUNDS = np.array([-1.0, 0.0, 0.0, 2.5, 7.0], np.float32)
VALUES = np.array([[-3.0, -1.0, -0.0, 0.0, 1.0], [2.5, 3.0, 7.0, 9.0, NAN], [INF, -INF, 0.5, 6.9, 7.1]],
                  np.float32)


def _ns(t):
    return torch if isinstance(t, torch.Tensor) else lm


@pytest.mark.parametrize("kw", [{}, {"right": True}, {"side": "left"}, {"side": "right"}])
def test_searchsorted_1d(kw, backend):
    check(lambda s, v: _ns(s).searchsorted(s, v, **kw), [BOUNDS, VALUES], backend=backend)
    check(lambda s, v: _ns(s).searchsorted(s, v, out_int32=True, **kw), [BOUNDS.astype(np.float64),
          VALUES.astype(np.float64)], backend=backend)
    ints = np.array([1, 3, 3, 8], np.int32)
    check(lambda s, v: _ns(s).searchsorted(s, v, **kw), [ints, np.arange(-1, 10, dtype=np.int32)], backend=backend)


@pytest.mark.parametrize("right", [False, True])
def test_searchsorted_nd_and_sorter(right, backend):
    seq = np.sort(rand((2, 3, 6), seed=1), -1)
    vals = rand((2, 3, 4), seed=2)
    vals[0, 0, :2] = seq[0, 0, 1:3]  # ties
    check(lambda s, v: _ns(s).searchsorted(s, v, right=right), [seq, vals], backend=backend)
    order = np.argsort(BOUNDS[::-1].copy(), kind="stable").astype(np.int32)
    check(lambda s, v, o: _ns(s).searchsorted(s, v, right=right, sorter=o.long() if isinstance(s, torch.Tensor)
                                              else o), [BOUNDS[::-1].copy(), VALUES, order], backend=backend)


def test_searchsorted_number_and_symbolic(backend):
    check(lambda s: _ns(s).searchsorted(s, 2.5), [BOUNDS], backend=backend)
    check(lambda s: _ns(s).searchsorted(s, 2.5, side="right"), [BOUNDS], backend=backend)
    g = lm.Graph()
    s, v = g.input("s", ("N",)), g.input("v", ("B", 2))
    (out,) = lm.compile([lm.searchsorted(s, v)], backend="reference")(s=BOUNDS, v=VALUES[:, :2])
    np.testing.assert_array_equal(out, np.searchsorted(BOUNDS, VALUES[:, :2]))


@pytest.mark.parametrize("right", [False, True])
def test_bucketize(right, backend):
    check(lambda v, b: _ns(v).bucketize(v, b, right=right), [VALUES, BOUNDS], backend=backend)
    check(lambda v, b: _ns(v).bucketize(v, b, right=right, out_int32=True),
          [rand((4, 3), lm.int32, low=-3, high=9), np.array([0, 2, 5], np.int32)], backend=backend)
    check(lambda b: _ns(b).bucketize(torch.tensor(0.0) if isinstance(b, torch.Tensor) else 0.0, b, right=right),
          [BOUNDS], backend=backend)


def test_search_errors():
    g = lm.Graph()
    s, v = g.input("s", (2, 3)), g.input("v", (4, 3))
    with pytest.raises(ValueError, match="^searchsorted: an N-d sorted sequence needs values with the same leading"):
        lm.searchsorted(s, v)
    with pytest.raises(ValueError, match="^searchsorted: right=True and side='left' contradict each other"):
        lm.searchsorted(v[0], v, right=True, side="left")
    with pytest.raises(ValueError, match="^searchsorted: side must be 'left' or 'right', got 'up'"):
        lm.searchsorted(v[0], v, side="up")
    with pytest.raises(ValueError, match="^bucketize: boundaries must be 1-d, got 2-d"):
        lm.bucketize(v, s)
    with pytest.raises(TypeError, match="^searchsorted: sorted_sequence must be a GraphTensor, got ndarray"):
        lm.searchsorted(np.zeros(3), v)
    with pytest.raises(ValueError, match="^searchsorted: sorter must be int32 indices of the sequence's shape"):
        lm.searchsorted(v[0], v, sorter=g.input("o", (2,), dtype=lm.int32))


def test_isin(backend):
    e = np.array([[1.0, 2.0, NAN], [-0.0, INF, 3.0]], np.float32)
    t = np.array([[0.0, NAN], [INF, 3.0]], np.float32)
    for invert in (False, True):
        check(lambda a, b: _ns(a).isin(a, b, invert=invert), [e, t], backend=backend)  # NaN is in nothing; -0 == 0
        check(lambda a, b: _ns(a).isin(a, b, assume_unique=True, invert=invert),
              [rand((3, 4), lm.int32, low=0, high=6), np.array([1, 4, 4], np.int32)], backend=backend)
    check(lambda a: _ns(a).isin(a, torch.tensor(2.0) if isinstance(a, torch.Tensor) else 2.0), [e], backend=backend)
    check(lambda b: _ns(b).isin(torch.tensor(3.0) if isinstance(b, torch.Tensor) else 3.0, b), [t], backend=backend)
    check(lambda a, b: _ns(a).isin(a, b), [np.array([1, 2, 3], np.int32), np.array([2.5, 3.0], np.float32)],
          backend=backend)  # compared in the promoted dtype
    with pytest.raises(TypeError, match="^isin: elements or test_elements must be a GraphTensor"):
        lm.isin(1.0, [1.0])
