"""An audit of the order statistics against torch (CPU): sort and argsort (stable or not, descending,
NaN, -0.0 against 0.0, ties), topk, kthvalue, median and nanmedian, mode, cummax and cummin, max and
min along a dim, searchsorted and bucketize; float32, float64, int32 and bool where torch takes them;
values, indices and gradients.

Where torch documents which index it returns (a stable sort; cummax's and cummin's running loop; max's
and min's first occurrence) the indices are compared with torch's. Where it does not (sort with
stable=False, topk, kthvalue, median, mode among equal values) the values are compared, the indices
are checked to index those values, and the gradient to go to the elements the indices name; torch's
own gradients are compared on inputs without ties, where its indices are determined.

Two findings are fixed here: searchsorted/bucketize over a sequence ending in NaNs (torch.sort's
order) put a NaN value, or one above every number, before the NaNs where torch's binary search puts
it at the end; median() and nanmedian() of a float tensor with no elements raised, where torch gives
NaN (as mean() does)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from parity import check

import luminal as lm
from luminal import train

pytestmark = pytest.mark.usefixtures("one_torch_thread")

NAN, INF = math.nan, math.inf

# NaNs, infinities, -0.0 beside 0.0, ties; rows of ten
SPECIAL = np.array([[3.0, NAN, -0.0, 1.0, 0.0, NAN, 1.0, -INF, INF, 3.0],
                    [0.0, -0.0, 0.0, -0.0, 2.0, 2.0, -1.0, 4.0, 5.0, -1.0],
                    [-INF, -INF, 1.0, 1.0, 1.0, -2.0, 7.0, 7.0, NAN, 0.0]], np.float32)
INTS = np.array([[3, 1, 3, -2, 0, 1, 7, 3, 5, 5], [5, 5, 5, 5, -9, 2, 2, 0, 1, 1],
                 [-2**31, 2**31 - 1, 0, -2**31, 2**31 - 1, 1, 1, 1, 0, 0]], np.int32)
BOOLS = np.array([[True, False, True, False, True, False, False, True, True, False],
                  [False, False, True, True, False, True, True, True, False, False]])
INPUTS = {"float32": SPECIAL, "float64": SPECIAL.astype(np.float64), "int32": INTS, "bool": BOOLS}
NUMBERS = {k: v for k, v in INPUTS.items() if k != "bool"}  # (torch's topk, kthvalue, median: no bool)


def _ns(t):
    return torch if isinstance(t, torch.Tensor) else lm


def _distinct(shape, seed=0):
    """Distinct values (no ties: torch's indices are determined), shuffled."""
    n = int(np.prod(shape))
    return (np.random.default_rng(seed).permutation(n).reshape(shape) * 0.37 - 3).astype(np.float32)


def _grad_kw(arr):
    return {"grad": "finite"} if arr.dtype.kind == "f" else {"grad": False}


def _sort(t, dim=-1, descending=False, stable=False):
    if isinstance(t, torch.Tensor):
        return t.sort(dim=dim, descending=descending, stable=stable)
    return t.sort(dim, descending, stable)


def _eval(op, arr) -> tuple:
    """luminal's outputs of ``op`` (a function of the input tensor and the graph) on ``arr``."""
    g = lm.Graph()
    x = g.input("x", arr.shape, dtype=lm.core.dtype.as_dtype(arr.dtype))
    return lm.compile(list(op(x, g)), backend="reference")(x=arr)


def _run(op, arr):
    """luminal's ``(values, indices)`` of ``op``, and the gradient of ``sum(values * w)`` (``w``:
    1, 2, 3, ... over the values) for a float input."""
    def outputs(x, g):
        values, indices = op(x)
        if not x.dtype.is_float:
            return values, indices
        w = np.arange(1, int(np.prod(values.shape)) + 1, dtype=np.float64).reshape(values.shape)
        return values, indices, train.grad((values * g.constant(w, values.dtype)).sum(), x)

    got = _eval(outputs, arr)
    return got if len(got) == 3 else (*got, None)


def _check_indices_and_gradient(op, arr, dim):
    """The indices index the values (bit for bit: -0.0 stays -0.0), and the gradient of each value
    (weight 1, 2, 3, ...) lands on the element its index names (a repeated index sums)."""
    values, idx, grad = _run(op, arr)
    a = dim % arr.ndim
    full = idx if idx.ndim == arr.ndim else np.expand_dims(idx, a)
    picked = np.take_along_axis(arr, full.astype(np.int64), a)
    picked = picked if values.ndim == arr.ndim else np.squeeze(picked, a)
    assert picked.dtype == values.dtype and picked.shape == values.shape
    if arr.dtype.kind == "f":
        np.testing.assert_array_equal(np.signbit(picked), np.signbit(values))
        np.testing.assert_array_equal(picked, values)  # (NaN at the same places)
    else:
        np.testing.assert_array_equal(picked, values)
    if grad is None:
        return
    want = np.zeros(arr.shape, np.float64)
    for k, p in enumerate(np.ndindex(*full.shape)):
        at = list(p)
        at[a] = full[p]
        want[tuple(at)] += k + 1
    np.testing.assert_array_equal(grad, want)


# ----------------------------------------------------------------------------------------- sort, argsort
@pytest.mark.parametrize("dim", [-1, 0])
@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("dtype", INPUTS)
def test_stable_sort_matches_torch(dtype, descending, dim):
    """stable=True: values, indices (equal values keep their order; -0.0 and 0.0 are equal) and the
    gradient; NaN last ascending, first descending."""
    arr = INPUTS[dtype]
    check(lambda t: tuple(_sort(t, dim, descending, True)), [arr], **_grad_kw(arr))
    check(lambda t: _ns(t).argsort(t, dim=dim, descending=descending, stable=True), [arr])


@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("dtype", INPUTS)
def test_unstable_sort_values_match_torch(dtype, descending):
    """stable=False: torch leaves the order of equal values open, so the values are compared and the
    indices checked to index them."""
    arr = INPUTS[dtype]
    check(lambda t: _sort(t, -1, descending).values, [arr], **_grad_kw(arr))
    _check_indices_and_gradient(lambda t: tuple(t.sort(-1, descending)), arr, -1)
    (argsorted,) = _eval(lambda t, g: [lm.argsort(t, -1, descending)], arr)
    want = torch.from_numpy(arr).sort(dim=-1, descending=descending).values.numpy()
    np.testing.assert_array_equal(np.take_along_axis(arr, argsorted.astype(np.int64), -1), want)


def test_sort_keeps_the_sign_of_zero_as_torch():
    values = _run(lambda t: tuple(t.sort(-1, False, True)), SPECIAL)[0]
    want = torch.from_numpy(SPECIAL).sort(dim=-1, stable=True).values.numpy()
    np.testing.assert_array_equal(np.signbit(values), np.signbit(want))
    np.testing.assert_array_equal(values[:, :2], [[-INF, -0.0], [-1.0, -1.0], [-INF, -INF]])
    assert np.isnan(values[0, -2:]).all() and np.isnan(values[2, -1])  # NaN last


# ------------------------------------------------------------------------------------------------ topk
@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("k", [0, 1, 3, 10])
@pytest.mark.parametrize("dtype", NUMBERS)
def test_topk_values_and_indices(dtype, k, largest):
    """NaN is the largest (first of largest=True, last of largest=False); k = 0 and k = n."""
    arr = NUMBERS[dtype]
    check(lambda t: t.topk(k, -1, largest).values, [arr], grad=False)
    _check_indices_and_gradient(lambda t: tuple(t.topk(k, -1, largest)), arr, -1)


@pytest.mark.parametrize("largest", [True, False])
def test_topk_unsorted_holds_the_same_values(largest):
    check(lambda t: _sort(t.topk(4, -1, largest, False).values).values, [SPECIAL], grad=False)
    check(lambda t: t.topk(2, 0, largest).values, [SPECIAL], grad=False)


def test_topk_without_ties_matches_torch_with_gradients():
    x = _distinct((4, 7))
    check(lambda t: (*t.topk(3, -1), *t.topk(2, 0, False), *t.topk(7, 1, False)), [x])


# ------------------------------------------------------------------------- kthvalue, median, nanmedian
@pytest.mark.parametrize("dtype", NUMBERS)
def test_kthvalue_median_nanmedian_values_and_indices(dtype):
    """NaN counts as the largest (kthvalue), makes the median NaN (median) or is left out
    (nanmedian); an even count gives the lower median."""
    arr = NUMBERS[dtype]
    for k in (1, 2, 5, 10):
        check(lambda t: t.kthvalue(k, -1).values, [arr], grad=False)
        _check_indices_and_gradient(lambda t: tuple(t.kthvalue(k, -1)), arr, -1)
    for name in ("median", "nanmedian"):
        check(lambda t: (getattr(t, name)(-1).values, getattr(t, name)(0).values, getattr(t, name)()), [arr],
              grad=False)
        _check_indices_and_gradient(lambda t: tuple(getattr(t, name)(-1)), arr, -1)
        _check_indices_and_gradient(lambda t: tuple(getattr(t, name)(0, keepdim=True)), arr, 0)


def test_kthvalue_median_without_ties_match_torch_with_gradients():
    x = _distinct((4, 6))
    check(lambda t: (*t.kthvalue(3, 1), *t.kthvalue(2, 0, True), *t.median(1), *t.median(0), *t.nanmedian(1),
                     t.median()), [x])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", ["median", "nanmedian"])
def test_median_of_no_elements_is_nan(name, dtype):
    """torch's median() and nanmedian() of an empty float tensor are NaN (as mean()); this raised."""
    got, grad = _eval(lambda x, g: [getattr(x, name)(), train.grad(getattr(x, name)(), x)], np.zeros((3, 0), dtype))
    assert got.shape == () and got.dtype == np.dtype(dtype) and np.isnan(got)
    assert grad.shape == (3, 0)
    g = lm.Graph()
    with pytest.raises(ValueError, match=f"^{name}: cannot take an order statistic of an empty"):
        getattr(g.input("i", (0,), dtype=lm.int32), name)()  # (torch's int result is no value)


# ------------------------------------------------------------------------------------------------ mode
@pytest.mark.parametrize("dim", [-1, 0])
@pytest.mark.parametrize("dtype", INPUTS)
def test_mode_values_and_indices(dtype, dim):
    """The smallest of the most frequent values (-0.0 equals 0.0). Rows holding NaN are left out of
    the comparison: torch sorts them with a comparison that is no order (std::sort with NaN)."""
    arr = INPUTS[dtype]
    rows = arr[1:2] if arr.dtype.kind == "f" else arr
    check(lambda t: t.mode(-1).values, [rows], grad=False)
    _check_indices_and_gradient(lambda t: tuple(t.mode(dim)), arr, dim)


def test_mode_of_longer_rows():
    x = np.random.default_rng(3).integers(-3, 4, size=(4, 40)).astype(np.int32)
    check(lambda t: t.mode(-1).values, [x])
    _check_indices_and_gradient(lambda t: tuple(t.mode(-1)), x.astype(np.float32), -1)


# ----------------------------------------------------------------------------------- cummax, cummin, max
@pytest.mark.parametrize("dim", [-1, 0, 1])
@pytest.mark.parametrize("dtype", INPUTS)
def test_cummax_cummin_max_min_match_torch(dtype, dim):
    """cummax/cummin: the last index among ties, a NaN the extreme from where it appears on (torch's
    loop); max/min along a dim: the first index among ties, NaN the extreme (torch's docs). Values,
    indices, gradients."""
    arr = INPUTS[dtype]
    check(lambda t: (*t.cummax(dim), *t.cummin(dim)), [arr], **_grad_kw(arr))
    check(lambda t: (*t.max(dim), *t.min(dim, keepdim=True)), [arr], **_grad_kw(arr))


def test_cummax_and_max_along_every_dim_of_a_3d_tensor():
    x = np.random.default_rng(1).integers(-2, 3, size=(3, 4, 5)).astype(np.float32)
    x[1, 2, 3] = x[0, 0, 0] = NAN
    x[2, 1, :] = NAN
    for dim in (0, 1, 2):
        check(lambda t: (*t.cummax(dim), *t.cummin(dim), *t.max(dim), *t.min(dim)), [x], grad="finite")


def test_cummax_over_a_long_dim():
    """Past 128 elements the scan runs in blocks: a NaN in one block stays the maximum in the next."""
    x = np.random.default_rng(2).integers(-3, 4, size=(2, 300)).astype(np.float32)
    x[0, 100] = x[1, 299] = NAN
    check(lambda t: (*t.cummax(1), *t.cummin(1)), [x], grad="finite")


def test_on_every_backend(backend):
    """The main cases compiled by every backend (the rest run on the reference interpreter)."""
    check(lambda t: (*_sort(t, -1, True, True), *t.cummax(-1), *t.min(0)), [SPECIAL], backend=backend,
          grad="finite")
    check(lambda t: (*t.topk(3, -1), *t.kthvalue(2, 1), *t.median(0), t.nanmedian()), [_distinct((4, 6))],
          backend=backend)
    check(lambda s, v: (_ns(s).searchsorted(s, v), _ns(s).bucketize(v, s, right=True)),
          [SEQ_NAN, VALUES_PAST], backend=backend)


# ------------------------------------------------------------------------------ searchsorted, bucketize
SEQ_NAN = np.array([-1.0, 0.0, 0.0, 2.5, 7.0, NAN, NAN], np.float32)  # sorted as torch.sort leaves it
# values that every entry is below (or at, for the right side): torch's search ends past the NaNs
VALUES_PAST = np.array([NAN, 7.5, INF, NAN], np.float32)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kw", [{}, {"right": True}, {"side": "left"}, {"side": "right"}])
def test_searchsorted_past_a_sequence_ending_in_nans(kw, dtype):
    """A NaN value, or one above every number, goes to the end (7), after the NaNs, as torch's
    binary search puts it (``s >= v`` / ``s > v`` are false against NaN); it went before them (5)."""
    seq, vals = SEQ_NAN.astype(dtype), VALUES_PAST.astype(dtype)
    check(lambda s, v: _ns(s).searchsorted(s, v, **kw), [seq, vals])
    check(lambda s, v: _ns(s).searchsorted(s, v, **kw), [np.stack([seq, seq]), np.stack([vals, vals])])
    if "side" not in kw:
        check(lambda s, v: _ns(s).bucketize(v, s, **kw), [seq, vals])
    right = kw.get("right") or kw.get("side") == "right"
    g = lm.Graph()
    s = g.input("s", seq.shape, dtype=lm.core.dtype.as_dtype(seq.dtype))
    v = g.input("v", (4,), dtype=s.dtype)
    (got,) = lm.compile([lm.searchsorted(s, v, right=right)], backend="reference")(
        s=seq, v=np.array([7.0, 0.0, 5.0, -2.0], dtype))
    # 7.0: at the last number (left: before it, 4; right: past everything, 7); the others in sort order
    np.testing.assert_array_equal(got, [7, 3, 4, 0] if right else [4, 1, 4, 0])


def test_searchsorted_with_a_sorter_and_symbolic_length_past_nans():
    rng = np.random.default_rng(0)
    perm = rng.permutation(SEQ_NAN.shape[0])
    unsorted = SEQ_NAN[perm]
    order = np.argsort(perm, kind="stable").astype(np.int32)  # unsorted[order] == SEQ_NAN
    for right in (False, True):
        check(lambda s, v, o: _ns(s).searchsorted(s, v, right=right,
                                                  sorter=o.long() if isinstance(s, torch.Tensor) else o),
              [unsorted, VALUES_PAST, order])
    g = lm.Graph()
    s, v = g.input("s", ("N",)), g.input("v", ("K",))
    (got,) = lm.compile([lm.searchsorted(s, v)], backend="reference")(s=SEQ_NAN, v=VALUES_PAST)
    np.testing.assert_array_equal(got, [7, 7, 7, 7])


def test_searchsorted_without_nans_unchanged():
    seq = np.array([-INF, -1.0, -0.0, 0.0, 2.5, INF], np.float32)
    vals = np.array([[-INF, -3.0, -0.0, 0.0, 1.0, 2.5, INF, NAN]], np.float32)
    for kw in ({}, {"right": True}):
        check(lambda s, v: (_ns(s).searchsorted(s, v, **kw), _ns(s).bucketize(v, s, **kw)), [seq, vals])
    ints = np.array([-5, 0, 0, 3], np.int32)
    check(lambda s, v: _ns(s).searchsorted(s, v, right=True), [ints, np.array([-9, 0, 3, 4], np.int32)])
