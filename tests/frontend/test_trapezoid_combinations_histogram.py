"""Parity with torch for ``trapezoid``/``cumulative_trapezoid`` (``luminal/frontend/ops/integrate.py``),
``combinations`` (``combinations.py``) and ``histogram`` (``search.py``): values and gradients in
float32 and float64, the broadcasting of ``x``, constant and tensor spacings, empty and one-sample
dims, symbolic sizes, integer inputs; the combinations' order and empty cases; the histogram's edges
(from a range, from the data, from a tensor), weights, density and the argument errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from parity import check, rand

import luminal as lm

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _ns(t):
    return torch if isinstance(t, torch.Tensor) else lm


# --- trapezoid and cumulative_trapezoid ---------------------------------------------------------------


@pytest.mark.parametrize("dtype", [lm.float32, lm.float64])
@pytest.mark.parametrize("name", ["trapezoid", "cumulative_trapezoid"])
def test_trapezoid_spacings(name, dtype):
    y, x = rand((3, 5, 4), dtype, seed=1), np.sort(rand((5,), dtype, seed=2))
    check(lambda t: getattr(_ns(t), name)(t), [y])  # dx = 1
    check(lambda t: getattr(_ns(t), name)(t, dx=0.25, dim=1), [y])
    check(lambda t, s: getattr(_ns(t), name)(t, s, dim=1), [y, x])  # 1-d x along dim 1
    check(lambda t, s: getattr(_ns(t), name)(t, s, dim=-2), [y, rand((5, 4), dtype, seed=3)])  # padded in front
    check(lambda t, s: getattr(_ns(t), name)(t, s, dim=0), [y, rand((3, 1, 4), dtype, seed=4)])  # broadcast


@pytest.mark.parametrize("name", ["trapezoid", "cumulative_trapezoid"])
def test_trapezoid_on_every_backend(name, backend):
    check(lambda t, s: getattr(_ns(t), name)(t, s), [rand((2, 6), seed=5), rand((6,), seed=6)], backend=backend)


@pytest.mark.parametrize("name", ["trapezoid", "cumulative_trapezoid"])
def test_trapezoid_short_and_empty_dims(name):
    for shape in [(0,), (2, 0), (1,), (3, 1), (2,)]:
        check(lambda t: getattr(_ns(t), name)(t), [rand(shape, seed=7)])
        check(lambda t: getattr(_ns(t), name)(t, dx=3.0), [rand(shape, seed=7)])
    check(lambda t: getattr(_ns(t), name)(t, dim=0), [rand((0, 3), seed=8)])


@pytest.mark.parametrize("name", ["trapezoid", "cumulative_trapezoid"])
def test_trapezoid_integers_and_mixed_dtypes(name):
    yi, xi = np.array([[1, 2, 3], [4, -1, 0]], np.int32), np.array([1, 3, 4], np.int32)
    check(lambda t: getattr(_ns(t), name)(t), [yi])  # a float32 result, as torch's
    check(lambda t: getattr(_ns(t), name)(t, dx=2.5), [yi])
    check(lambda t, s: getattr(_ns(t), name)(t, s), [yi, xi])
    check(lambda t, s: getattr(_ns(t), name)(t, s), [rand((2, 3), lm.float32, seed=9), rand((3,), lm.float64)])


@pytest.mark.parametrize("name", ["trapezoid", "cumulative_trapezoid"])
def test_trapezoid_symbolic_sizes(name):
    y, x = rand((4, 7), seed=10), rand((4, 7), seed=11)
    check(lambda t, s: getattr(_ns(t), name)(t, s), [y, x], shapes=[("B", "N"), ("B", "N")])
    check(lambda t: getattr(_ns(t), name)(t, dx=0.5, dim=0), [y], shapes=[("B", "N")])
    for n in (0, 1, 2):  # a symbolic dim with no interval when the program runs: 0 (an empty running integral)
        check(lambda t, s: getattr(_ns(t), name)(t, s), [rand((n,), seed=n), rand((n,), seed=9)], shapes=[("N",)] * 2)
        check(lambda t: getattr(_ns(t), name)(t, dx=2.0), [rand((3, n), seed=n)], shapes=[(3, "N")])


def test_trapezoid_tensor_dx():
    g = lm.Graph()
    y, dx = g.input("y", (4,)), g.input("dx", ())
    yv = np.array([1.0, 2.0, 4.0, 8.0], np.float32)
    out, cum = lm.compile([lm.trapezoid(y, dx=dx), lm.cumulative_trapezoid(y, dx=dx)], backend="reference")(
        y=yv, dx=np.float32(0.5))
    np.testing.assert_allclose(out, 0.5 * (1.5 + 3 + 6), rtol=1e-6)
    np.testing.assert_allclose(cum, 0.5 * np.cumsum([1.5, 3, 6]), rtol=1e-6)


def test_trapezoid_errors():
    g = lm.Graph()
    y, x3 = g.input("y", (2, 3)), g.input("x3", (3,))
    with pytest.raises(TypeError, match="^trapezoid: takes x or dx, not both"):
        lm.trapezoid(y, x3, dx=1.0)
    with pytest.raises(ValueError, match="^trapezoid: there must be one x value for each sample point: x has 3, "
                                         "y has 2 along dim 0"):
        lm.trapezoid(y, x3, dim=0)
    with pytest.raises(ValueError, match="^cumulative_trapezoid: needs y of at least 1 dim"):
        lm.cumulative_trapezoid(g.input("s", ()))
    with pytest.raises(ValueError, match="^trapezoid: x has more dims"):
        lm.trapezoid(x3, y)
    with pytest.raises(TypeError, match="^trapezoid: received a bool y"):
        lm.trapezoid(g.input("b", (3,), dtype=lm.bool))
    with pytest.raises(TypeError, match="^trapezoid: dx must be a real number, got str"):
        lm.trapezoid(y, dx="1")
    with pytest.raises(ValueError, match="^trapezoid: dim 2 is out of range"):
        lm.trapezoid(y, dim=2)


# --- combinations ------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [lm.float32, lm.float64])
@pytest.mark.parametrize("r,with_replacement", [(2, False), (3, False), (1, False), (4, False), (2, True),
                                                (3, True), (0, False), (5, False), (6, True)])
def test_combinations(r, with_replacement, dtype):
    check(lambda t: _ns(t).combinations(t, r, with_replacement), [rand((4,), dtype, seed=12)])


def test_combinations_ints_empty_and_backends(backend):
    check(lambda t: lm.combinations(t, 2) if isinstance(t, lm.GraphTensor) else torch.combinations(t, 2),
          [np.arange(5, dtype=np.int32)], backend=backend)
    check(lambda t: _ns(t).combinations(t), [np.zeros((0,), np.float32)])
    check(lambda t: _ns(t).combinations(t, 0), [np.zeros((0,), np.float32)])
    check(lambda t: _ns(t).combinations(t * 2, with_replacement=True), [rand((3,), seed=13)])  # of a computed tensor


def test_combinations_errors():
    g = lm.Graph()
    with pytest.raises(ValueError, match=r"^combinations: expects a 1-d tensor, got shape \(2, 2\)"):
        lm.combinations(g.input("m", (2, 2)))
    with pytest.raises(ValueError, match="^combinations: r must be at least 0, got -1"):
        lm.combinations(g.input("v", (3,)), -1)
    with pytest.raises(ValueError, match="^combinations: the length must be static"):
        lm.combinations(g.input("n", ("N",)))


# --- histogram ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [lm.float32, lm.float64])
@pytest.mark.parametrize("bins,rng", [(1, None), (4, None), (10, None), (7, (-1.5, 0.25)), (5, (0, 5)),
                                      (3, (2.0, 2.0)), (64, None)])
def test_histogram_int_bins(bins, rng, dtype):
    for seed in range(3):
        x = rand((6, 40), dtype, seed=seed, low=-2, high=3)
        check(lambda t: _ns(t).histogram(t, bins, range=rng), [x], grad=False)
        w = rand((6, 40), dtype, seed=seed + 10, low=0, high=1)
        check(lambda t, u: _ns(t).histogram(t, bins, range=rng, weight=u, density=True), [x, w], grad=False)


@pytest.mark.parametrize("row,bins,rng", [
    ([1.0, 2.0, 1.0, 4.0, 5.0], 4, None),             # values on the edges; max in the last bin
    ([1.0, 2.0, np.nan, 5.0], 4, (0.0, 5.0)),         # NaN not counted
    ([0.0, 5.0, -0.1, 5.1, 2.5], 4, (0.0, 5.0)),      # both ends counted, outside ones not
    ([3.0, 3.0], 4, None),                            # one value: [2.5, 3.5]
    ([np.inf, 1.0, -np.inf], 2, (0.0, 4.0)),          # infinities outside a given range
    ([0.1, 0.2, 0.3, 0.7], 10, (0.0, 1.0)),           # values on inexact float32 edges
])
def test_histogram_special_rows(row, bins, rng):
    check(lambda t: _ns(t).histogram(t, bins, range=rng), [np.array(row, np.float32)], grad=False)


def test_histogram_tensor_bins_and_backends(backend):
    x = rand((50,), seed=20, low=-1, high=6)
    edges = np.array([0.0, 0.5, 2.0, 2.5, 5.0], np.float32)
    check(lambda t, e: _ns(t).histogram(t, e), [x, edges], grad=False, backend=backend)
    check(lambda t, e, u: _ns(t).histogram(t, e, weight=u, density=True),
          [x, edges, rand((50,), seed=21, low=0, high=1)], grad=False, backend=backend)
    check(lambda t: _ns(t).histogram(t, 6), [x], grad=False, backend=backend)
    check(lambda t, e: _ns(t).histogram(t, e), [x, np.array([5.0, 2.0, 0.0], np.float32)], grad=False)  # decreasing
    on_edges = np.array([0.0, 0.5, 2.0, 2.5, 5.0, 5.5, -1.0, np.nan, 4.9], np.float32)  # each bin holds its left edge
    check(lambda t, e: _ns(t).histogram(t, e), [on_edges, edges], grad=False)


def test_histogram_empty_0d_and_symbolic():
    check(lambda t: _ns(t).histogram(t, 3), [np.zeros((0,), np.float32)], grad=False)  # edges [0, 1]
    check(lambda t: _ns(t).histogram(t, 3, density=True), [np.zeros((0, 2), np.float64)], grad=False)  # 0 / 0
    check(lambda t: _ns(t).histogram(t, 3), [np.array(3.0, np.float32)], grad=False)
    check(lambda t: _ns(t).histogram(t, 8), [rand((5, 9), seed=22)], shapes=[("B", 9)], grad=False)
    check(lambda t: _ns(t).histogram(t, 4), [np.zeros((0, 9), np.float32)], shapes=[("B", 9)], grad=False)
    check(lambda t: _ns(t).histogram(t, 2), [np.full((3, 9), 2.5, np.float32)], shapes=[("B", 9)], grad=False)


def test_histogram_no_gradient():
    g = lm.Graph()
    x, w = g.input("x", (5,)), g.input("w", (5,))
    hist, edges = lm.histogram(x * 2, 3, weight=w * 3)
    with pytest.raises(ValueError):
        lm.train.grad(hist.sum() + edges.sum(), x)


def test_histogram_nonfinite_data_counts_nothing():
    g = lm.Graph()
    x = g.input("x", (3,))
    hist, _ = lm.compile(list(lm.histogram(x, 2)), backend="reference")(x=np.array([1.0, np.inf, 2.0], np.float32))
    np.testing.assert_array_equal(hist, [0.0, 0.0])  # (torch raises: the range [1, inf] is not finite)


def test_histogram_errors():
    g = lm.Graph()
    x = g.input("x", (4,))
    with pytest.raises(ValueError, match="^histogram: bins must be an int > 0 or a 1-d tensor of edges, got 0"):
        lm.histogram(x, 0)
    with pytest.raises(TypeError, match="^histogram: takes a float tensor, got int32"):
        lm.histogram(g.input("i", (4,), dtype=lm.int32), 3)
    with pytest.raises(ValueError, match=r"^histogram: min \(3.0\) must not exceed max \(1.0\)"):
        lm.histogram(x, 3, range=(3, 1))
    with pytest.raises(ValueError, match=r"^histogram: the range \[0.0, inf\] is not finite"):
        lm.histogram(x, 3, range=(0, float("inf")))
    with pytest.raises(TypeError, match="^histogram: range must be a"):
        lm.histogram(x, 3, range=5)
    with pytest.raises(ValueError, match=r"^histogram: weight must have input's shape \(4,\) and dtype float32, got "
                                         r"\(3,\) float32"):
        lm.histogram(x, 3, weight=g.input("w", (3,)))
    with pytest.raises(ValueError, match="^histogram: a tensor bins must be 1-d of input's dtype float32 with a "
                                         "static count of at least 2 edges, got"):
        lm.histogram(x, g.input("e", (1,)))
    with pytest.raises(ValueError, match="^histogram: a tensor bins must be 1-d"):
        lm.histogram(x, g.input("e64", (3,), dtype=lm.float64))
    with pytest.raises(TypeError, match="^histogram: range applies to an int bins only"):
        lm.histogram(x, g.input("e2", (3,)), range=(0, 1))
