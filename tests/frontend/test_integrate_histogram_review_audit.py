"""Review audit of ``trapezoid``/``cumulative_trapezoid``, ``combinations`` and ``histogram`` against
torch 2.13 as a torch user would call them: a 1-d x along dim 0 of a 3-d y (non-uniform, decreasing
steps; NaN and inf in x), negative dx, half-precision inputs and the result dtype of a 0-d tensor dx;
combinations of every dtype, their rank errors and gradients through repeated elements; histogram's
exact counts past 2**24 in one float32 bin, one bin, a one-value range, unsorted tensor edges, empty
density, and torch's dtype errors."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from parity import TORCH_DTYPE, check, rand

import luminal as lm
from luminal import train

pytestmark = pytest.mark.usefixtures("one_torch_thread")
XS = np.array([0.0, 0.5, 0.4, 2.0])  # non-uniform, one step decreasing


def _ns(t):
    return torch if isinstance(t, torch.Tensor) else lm


def run(outs, **inputs):
    res = lm.compile(list(outs), backend="cpu")(**inputs)
    return res if isinstance(res, tuple) else (res,)


@pytest.mark.parametrize("dtype", [lm.float32, lm.float64])
@pytest.mark.parametrize("name", ["trapezoid", "cumulative_trapezoid"])
def test_x_along_dim0_of_a_3d_y_values_and_gradients(name, dtype):
    y = rand((4, 3, 2), dtype, seed=1)
    x = XS.astype(dtype.np)
    check(lambda t, s: getattr(_ns(t), name)(t, s, dim=0), [y, x])
    check(lambda t: getattr(_ns(t), name)(t, dx=-0.5, dim=1), [y])


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("name", ["trapezoid", "cumulative_trapezoid"])
def test_x_with_nan_or_inf(name, bad):
    x = XS.copy()
    x[2] = bad
    check(lambda t, s: getattr(_ns(t), name)(t, s, dim=0), [rand((4, 3), lm.float64, seed=2), x], grad=False)


@pytest.mark.parametrize("dtype", [lm.float16, lm.bfloat16])
@pytest.mark.parametrize("name", ["trapezoid", "cumulative_trapezoid"])
def test_half_precision_keeps_its_dtype(name, dtype):
    x = lm.core.dtype.to_storage(XS, dtype)
    check(lambda t, s: getattr(_ns(t), name)(t, s, dim=0), [rand((4, 3), dtype, seed=3), x], dtypes=[dtype, dtype])
    check(lambda t: getattr(_ns(t), name)(t, dx=0.25), [rand((3, 6), dtype, seed=4)], dtypes=[dtype])


@pytest.mark.parametrize("name", ["trapezoid", "cumulative_trapezoid"])
def test_a_0d_tensor_dx_gives_the_dtype_of_a_number_dx(name):
    """torch reads a 0-d tensor dx as the number it holds: bfloat16 y and a float32 dx give bfloat16
    (trapezoid gave float32: its 0-d sum promoted with the 0-d dx). The gradient reaches dx."""
    g = lm.Graph()
    y, dx = g.input("y", (4,), lm.bfloat16), g.input("dx", ())
    out = getattr(lm, name)(y, dx=dx)
    yv = lm.core.dtype.to_storage(np.array([1.0, 2.0, 4.0, 8.0]), lm.bfloat16)
    want = getattr(torch, name)(torch.tensor(yv, dtype=torch.bfloat16), dx=0.5)
    assert out.dtype is lm.bfloat16 and TORCH_DTYPE[out.dtype] == want.dtype
    g32 = lm.Graph()
    y32, d32 = g32.input("y", (4,)), g32.input("dx", ())
    (gd,) = train.grad(getattr(lm, name)(y32, dx=d32).sum(), [d32])
    got = run([out], y=yv, dx=np.float32(0.5))[0]
    np.testing.assert_allclose(got, want.float().numpy(), rtol=1e-2)
    # d/d dx of the sum of the running integral: the sum of its terms over dx
    terms = np.cumsum((yv[1:] + yv[:-1]) / 2) if name == "cumulative_trapezoid" else (yv[1:] + yv[:-1]).sum() / 2
    np.testing.assert_allclose(run([gd], y=yv, dx=np.float32(0.5))[0], np.sum(terms), rtol=1e-6)


@pytest.mark.parametrize("dtype", [lm.bool, lm.int32, lm.float32])
@pytest.mark.parametrize("r,rep", [(2, False), (3, True), (4, True), (5, False), (0, False)])
def test_combinations_dtypes_and_gradients(dtype, r, rep):
    """A gradient of a row summed over the rows it appears in (an element repeated within a row with
    replacement gets each of its places)."""
    x = rand((4,), dtype, seed=5)
    check(lambda t: _ns(t).combinations(t, r, with_replacement=rep), [x], dtypes=[dtype])
    if dtype is lm.float32 and r:
        check(lambda t: _ns(t).combinations(t, r, with_replacement=rep).sin() * 3, [x])


def test_combinations_rank_errors():
    g = lm.Graph()
    for shape in [(), (2, 2)]:
        with pytest.raises(ValueError, match=rf"combinations: expects a 1-d tensor, got shape {re.escape(str(shape))}"):
            lm.combinations(g.input(f"x{len(shape)}", shape))
    with pytest.raises(RuntimeError, match="Expect a 1D vector"):
        torch.combinations(torch.tensor(1.0))


def test_histogram_and_histc_count_past_2_24_in_one_float32_bin():
    """A count is exact, of the input's float dtype as torch's: a float32 sum of ones stops at 2**24 =
    16777216 (torch's too on one thread; its threads' partial counts are exact while each stays below
    2**24). Weighted counts too."""
    n = 2 ** 24 + 1000
    xv = np.zeros(n, np.float32)
    xv[:3] = [1.0, 2.0, 0.5]
    g = lm.Graph()
    x, w = g.input("x", ("N",)), g.input("w", ("N",))
    (h, _), (hw, _) = lm.histogram(x, 2), lm.histogram(x, 2, weight=w)
    got = run([h, hw, lm.histc(x, 2)], x=xv, w=np.ones(n, np.float32))  # (histc's counts too)
    assert torch.histogram(torch.from_numpy(xv[:8]), 2)[0].dtype == torch.float32
    for a in got:
        assert a.dtype == np.float32
        np.testing.assert_array_equal(a, [n - 2, 2])


def _hist_both(xv, bins, **kw):
    g = lm.Graph()
    x = g.input("x", xv.shape, lm.core.dtype.as_dtype(xv.dtype))
    b = g.input("b", bins.shape, x.dtype) if isinstance(bins, np.ndarray) else bins
    feeds = dict(x=xv, b=bins) if isinstance(bins, np.ndarray) else dict(x=xv)
    got = run(list(lm.histogram(x, b, **kw)), **feeds)
    tb = torch.from_numpy(bins) if isinstance(bins, np.ndarray) else bins
    want = torch.histogram(torch.from_numpy(xv), tb, **kw)
    for a, t in zip(got, want):
        np.testing.assert_allclose(a, t.numpy(), rtol=1e-6, equal_nan=True)


X = np.array([0.1, 0.5, 0.5, 0.9, 0.3], np.float32)


@pytest.mark.parametrize("case", [
    dict(bins=1), dict(bins=4, range=(0.5, 0.5)), dict(bins=np.array([0.8, 0.0, 0.4], np.float32)),
    dict(bins=3, density=True), dict(bins=np.array([0.0, 0.5, 0.5, 1.0], np.float32), density=False),
])
def test_histogram_edge_cases(case):
    case = dict(case)
    _hist_both(X, case.pop("bins"), **case)


def test_histogram_density_of_no_elements_is_nan():
    _hist_both(np.zeros(0, np.float32), 3, density=True)
    _hist_both(np.zeros(0, np.float32), 3, range=(0.0, 2.0), density=True)


def test_histogram_dtype_errors():
    g = lm.Graph()
    x = g.input("x", (5,))
    with pytest.raises(ValueError, match=r"histogram: weight must have input's shape \(5,\) and dtype float32, got "
                                         r"\(5,\) float64"):
        lm.histogram(x, 3, weight=g.input("w", (5,), lm.float64))
    with pytest.raises(TypeError, match="histogram: takes a float tensor, got int32"):
        lm.histogram(g.input("i", (5,), lm.int32), 3)
    with pytest.raises(ValueError, match="a tensor bins must be 1-d of input's dtype float32 .* got \\(3,\\) float64"):
        lm.histogram(x, g.input("b", (3,), lm.float64))
    with pytest.raises(RuntimeError, match="should have the same dtype"):
        torch.histogram(torch.ones(5), 3, weight=torch.ones(5, dtype=torch.float64))
