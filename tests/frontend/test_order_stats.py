"""Parity with torch for median, nanmedian, kthvalue, quantile and nanquantile
(``luminal/frontend/ops/order_stats.py``): values, indices and gradients, dims and keepdim, NaN
rows, even counts (torch's lower median), ties (median()'s gradient shared evenly), every
interpolation mode, a tensor ``q``, and the errors. Each op runs on every backend in its main case;
the variants run on the reference interpreter (each sort is an (n, n) comparison: many kernels)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from parity import check, rand
from sizes import check_sizes

import luminal as lm

pytestmark = pytest.mark.usefixtures("one_torch_thread")

NAN = math.nan


def _ns(t):
    return torch if isinstance(t, torch.Tensor) else lm


def _distinct(shape, seed=0):
    """Distinct values (no ties, so every index is unique), shuffled."""
    n = int(np.prod(shape))
    return (np.random.default_rng(seed).permutation(n).reshape(shape) * 0.37 - 3).astype(np.float32)


MODES = ["linear", "lower", "higher", "midpoint", "nearest"]
ROWS_WITH_NANS = np.array([[3.0, NAN, 1.0, NAN, 2.0], [NAN] * 5, [1.0, 4.0, 3.0, 2.0, 5.0]], np.float32)


def _q(t, q):
    """``q`` as torch wants it (a tensor of the input's dtype) or as a list for luminal."""
    return torch.tensor(q, dtype=t.dtype) if isinstance(t, torch.Tensor) else q


def test_every_op_on_every_backend(backend):
    def ops(t):
        m = t.median(1)
        return (m.values, m.indices, t.nanmedian(), *t.kthvalue(2, 0, keepdim=True),
                t.quantile(_q(t, [0.25, 0.7]), 1), _ns(t).nanquantile(t, 0.5, dim=0, interpolation="nearest"))

    check(ops, [_distinct((4, 6))], backend=backend)
    check(lambda t: (t.median(1).values, t.nanmedian(1).values, t.quantile(0.5, 1)), [ROWS_WITH_NANS],
          backend=backend, grad="finite")


@pytest.mark.parametrize("name", ["median", "nanmedian"])
def test_median_of_all_elements(name):
    check(lambda t: getattr(_ns(t), name)(t), [_distinct((3, 4))])  # an even count: the lower median
    check(lambda t: getattr(t, name)(), [_distinct((5,))], pre=lambda t: t.flip(0))
    ties = np.array([1.0, 2.0, 2.0, 2.0, 3.0, 0.5], np.float32)
    check(lambda t: getattr(t, name)(), [ties])  # the gradient: 1/3 at each 2.0
    check(lambda t: getattr(t, name)(), [np.array([4, -1, 7, 2], np.int32)])
    check(lambda t: getattr(t, name)(), [np.array([3.0, NAN, 1.0, 2.0], np.float32)])  # NaN / 2.0


NONFINITE = [[np.inf, np.inf, np.inf, 1.0], [-np.inf, -np.inf, 1.0], [1.0, NAN, 2.0], [np.inf, NAN, np.inf],
             [NAN, NAN], [NAN, np.inf, NAN, -np.inf], [np.inf, np.inf, NAN], [-np.inf, NAN, NAN, 1.0], [NAN], [np.inf]]


@pytest.mark.parametrize("name", ["median", "nanmedian"])
@pytest.mark.parametrize("row", range(len(NONFINITE)))
def test_median_of_all_elements_shares_the_gradient_at_infinities_and_nans(name, row, backend):
    # torch shares it among the elements equal to an infinite result ([inf, inf, inf, 1]: a third at
    # each inf), and among the NaNs for a NaN result ([1, nan, 2] -> [0, 1, 0]; all-NaN nanmedian too)
    check(lambda t: getattr(t, name)(), [np.array(NONFINITE[row], np.float32)], backend=backend)


@pytest.mark.parametrize("name", ["median", "nanmedian"])
def test_median_of_all_elements_keeps_a_negative_zero(name, backend):
    vals = [-0.0, 1.0, -0.0]
    g = lm.Graph()
    x = g.input("x", (3,))
    (r,) = lm.compile([getattr(x, name)()], backend=backend)(x=np.array(vals, np.float32))
    assert r == 0 and np.signbit(r) == np.signbit(getattr(torch.tensor(vals), name)().item())


@pytest.mark.parametrize("name", ["median", "nanmedian"])
@pytest.mark.parametrize("dim,keepdim", [(1, False), (0, True), (-1, False)])
def test_median_along_a_dim(name, dim, keepdim):
    check(lambda t: getattr(t, name)(dim, keepdim), [_distinct((4, 5))])
    check(lambda t: getattr(_ns(t), name)(t, dim=dim, keepdim=keepdim), [np.array([[5, 1, 3], [2, 8, 6]], np.int32)])


def test_median_rows_with_nans():
    # the index among NaNs is unspecified in torch: the values only, but for rows with numbers left
    check(lambda t: t.nanmedian(1), [ROWS_WITH_NANS[[0, 2]]], grad="finite")
    check(lambda t: t.median(0), [np.array(2.5, np.float32)])  # 0-d


@pytest.mark.parametrize("k,dim,keepdim", [(1, -1, False), (3, 0, True), (4, 1, False)])
def test_kthvalue(k, dim, keepdim):
    check(lambda t: t.kthvalue(k, dim, keepdim), [_distinct((4, 5))])
    check(lambda t: _ns(t).kthvalue(t, k, dim=dim, keepdim=keepdim), [_distinct((4, 2, 5), 1)],
          pre=lambda t: t.transpose(1, 2))
    check(lambda t: t.kthvalue(2, 1), [np.array([[2.0, NAN, 1.0, 0.5]], np.float32)], grad="finite")  # NaN: largest


@pytest.mark.parametrize("name", ["quantile", "nanquantile"])
@pytest.mark.parametrize("mode", MODES)
def test_quantile_modes(name, mode):
    x = rand((3, 6), seed=1)
    q = [0.0, 0.25, 0.5, 0.7, 1.0]  # 0.5 and 0.7 land halfway / off the grid: rounding half to even
    check(lambda t: getattr(t, name)(_q(t, q), 1, interpolation=mode), [x])
    check(lambda t: getattr(_ns(t), name)(t, 0.3, dim=0, keepdim=True, interpolation=mode), [x])
    check(lambda t: getattr(t, name)(0.6, interpolation=mode), [x.astype(np.float64)])


def test_quantile_shapes_nans_and_tensor_q():
    x = rand((2, 3, 4), seed=2)
    check(lambda t: t.quantile(0.4, None, True), [x])  # every dim kept as 1
    q = np.array([0.1, 0.9, 0.5], np.float32)
    check(lambda t, u: t.quantile(u, 1, keepdim=True), [x, q])  # q's gradient too
    nans = np.array([[1.0, NAN, 3.0, 2.0], [NAN] * 4, [4.0, 1.0, 2.0, 3.0]], np.float32)
    for name in ("quantile", "nanquantile"):
        check(lambda t: getattr(t, name)(0.5, 1), [nans], grad="finite")


@pytest.mark.parametrize("shape,dim", [((4, 2, 3), 0), ((4, 2, 3), -3), ((2, 5, 3, 4), 1), ((2, 5, 3, 4), 0),
                                       ((2, 3, 4, 5), 2)])
def test_quantile_along_a_dim_before_the_last_two(shape, dim, backend):
    """The reduced dim was moved last by a transpose, which put the old last dim in its place, and the
    result reshaped: scrambled values (x.quantile(0.5, 0) of a (4, 2, 3) arange gave [[9, 12, 10], ...]).
    Only 2-d inputs and a 3-d input's middle dim came out right, the shapes tested before."""
    x = _distinct(shape, 3)
    check(lambda t: (t.quantile(0.3, dim), t.nanquantile(_q(t, [0.2, 0.5]), dim, keepdim=True)), [x], backend=backend)


def test_over_a_symbolic_dim():
    check_sizes(lambda t: (*t.median(0), t.quantile(0.3, 0), t.nanmedian(), t.kthvalue(2, 0).values),
                lambda n: [_distinct((n, 3), n)], [("B", 3)], backend="reference")


def test_order_statistic_errors():
    g = lm.Graph()
    x = g.input("x", (3, 4))
    with pytest.raises(IndexError, match="^kthvalue: k = 5 is out of range for dim 1 of size 4"):
        x.kthvalue(5)
    with pytest.raises(ValueError, match=r"^quantile: q values must lie in \[0, 1\], got 1.5"):
        x.quantile(1.5)
    with pytest.raises(ValueError, match="^quantile: interpolation must be one of"):
        x.quantile(0.5, interpolation="cubic")
    with pytest.raises(TypeError, match="^quantile: needs a float tensor, got int32"):
        g.input("i", (3,), dtype=lm.int32).quantile(0.5)
    with pytest.raises(TypeError, match="^median: not defined for bool tensors"):
        g.input("b", (3,), dtype=lm.bool).median()
    with pytest.raises(ValueError, match="^median: cannot take an order statistic of an empty"):
        g.input("e", (0, 2)).median(0)
    with pytest.raises(TypeError, match="^nanquantile: q must have the input's dtype float32, got float64"):
        x.nanquantile(g.input("q", (2,), dtype=lm.float64))


@pytest.mark.parametrize("name", ["median", "nanmedian"])
def test_median_of_all_elements_without_a_gradient_is_the_value_alone(name):
    # median()'s gradient (shared among the elements equal to it) is built by the backward pass only:
    # a forward-only program is the value's, median(0) of the flattened input (a sharing expression
    # in the value cost 28 more nodes and 4 more kernels)
    def work(fn):
        g = lm.Graph()
        r = lm.compile([fn(g.input("x", (4, 4)))], backend="cpu").report(show=False)
        return r.nodes_after, len(r.kernels)

    assert work(lambda x: getattr(x, name)()) == work(lambda x: getattr(x.reshape(-1), name)(0).values)
