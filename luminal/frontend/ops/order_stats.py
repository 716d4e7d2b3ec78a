"""Order statistics with torch's names: median, nanmedian, kthvalue, quantile and nanquantile, read
from the stable sort of ``reduce.py`` (NaN sorts last) at a position computed in the graph.

The picked values are Gathers of the input, so their gradient goes to the picked element, as torch's
(``median(dim)``, ``kthvalue``); ``median()`` and ``nanmedian()`` over all elements share it evenly
among the elements equal to the result (infinite ones too, and the NaNs for a NaN result), as
torch's do. ``quantile`` interpolates between the two neighbouring order statistics with torch's
formula (``ranks = q * (n - 1)``, then lerp), except that two equal infinite neighbours give that
infinity (torch: NaN, e.g. ``quantile([-inf, -inf, 0, 1], 0.25)`` or ``q=0``)."""

from __future__ import annotations

import numbers

import numpy as np

from luminal.core import dtype as dt
from luminal.core.errors import op_error
from luminal.core.symbolic import is_static
from luminal.frontend.checks import tensor_op
from luminal.frontend.float32_ops import float32_under_autocast
from luminal.frontend.ops.combine import cat
from luminal.frontend.ops.core import cast, require
from luminal.frontend.ops.elementwise import (
    ceil,
    eq,
    floor,
    floor_divide,
    isinf,
    isnan,
    lerp,
    logical_and,
    logical_not,
    maximum,
    mul,
    ne,
    sub,
    where,
)
from luminal.frontend.ops.elementwise import round_ as round_half_even
from luminal.frontend.ops.reduce import _sort, _take, _values_indices, amax, any_, argmax, cummax, evenly_shared
from luminal.frontend.ops.reduce import sum as sum_
from luminal.frontend.tensor import GraphTensor, ValuesIndices

MedianResult, NanmedianResult = _values_indices("median"), _values_indices("nanmedian")
KthvalueResult, ModeResult = _values_indices("kthvalue"), _values_indices("mode")


def _dim_size(x: GraphTensor, a: int):
    """The size of dim ``a``: an int, or an int32 0-d tensor for a symbolic dim."""
    n = x.shape[a]
    return n if is_static(n) else x.graph.constant(n)


def _check_input(op: str, x: GraphTensor, a: int):
    require(op, x.dtype.kind != "b", "not defined for bool tensors", x)
    n = x.shape[a]
    if is_static(n) and n == 0:
        raise op_error(ValueError, op, "cannot take an order statistic of an empty tensor or dim", x)


def _non_nan_count(x: GraphTensor, a: int) -> GraphTensor:
    """int32 count of the non-NaN elements along ``a`` (keepdim)."""
    return sum_(cast(logical_not(isnan(x)), dt.int32), a, keepdim=True)


def _pick(x: GraphTensor, a: int, pos, keepdim: bool, result) -> ValuesIndices:
    """The element at sorted position ``pos`` along ``a`` (an int or an int32 keepdim tensor):
    ``(values, indices)`` with the indices into ``x``."""
    _, perm = _sort(x, a, False, result.__name__)
    shape = tuple(1 if i == a else d for i, d in enumerate(x.shape))
    if isinstance(pos, GraphTensor):
        pos = pos.expand(*shape) if pos.shape != shape else pos
    else:
        pos = x.graph.constant(pos, dt.int32).expand(*shape)
    idx = _take(perm, cast(pos, dt.int32), a)
    values = _take(x, idx, a)
    if not keepdim:
        values, idx = values.squeeze(a), idx.squeeze(a)
    return result(values, idx)


def _median_pos(x: GraphTensor, a: int, skip_nan: bool):
    """The sorted position of the lower median along ``a``: ``(n - 1) // 2``, or the first NaN where
    there is one (median); ``(count - 1) // 2`` of the non-NaN elements, at least 0 (nanmedian)."""
    n = _dim_size(x, a)
    if not x.dtype.is_float:
        return (n - 1) // 2 if isinstance(n, int) else floor_divide(sub(n, 1), 2)
    count = _non_nan_count(x, a)
    if skip_nan:
        return floor_divide(maximum(sub(count, 1), 0), 2)
    half = (n - 1) // 2 if isinstance(n, int) else floor_divide(sub(n, 1), 2)
    return where(any_(isnan(x), a, keepdim=True), count, half)


def _whole(x: GraphTensor, skip_nan: bool, op: str) -> GraphTensor:
    flat = x.reshape(-1)
    if x.dtype.is_float and is_static(flat.shape[0]) and flat.shape[0] == 0:
        # no elements: NaN, as torch's (and as mean()); written from x (its sum, 0) so that a loss
        # holding it still reaches x, whose gradient is empty, as torch's
        return mul(sum_(flat), float("nan"))
    _check_input(op, flat, 0)
    # keepdim: the Gather itself, a whole node, which evenly_shared's copy of it must read to be free
    values, _ = _pick(flat, 0, _median_pos(flat, 0, skip_nan), True, MedianResult)
    # shared among the elements equal to it, infinite or NaN ones too, as torch's (evenly_shared: a
    # rule of the backward pass only)
    return evenly_shared(flat, values)


def _along(x: GraphTensor, dim, keepdim: bool, skip_nan: bool, op: str, result) -> ValuesIndices:
    if isinstance(dim, (tuple, list)):
        raise op_error(TypeError, op, f"dim must be an int, got {dim!r}", x)
    if x.ndim == 0:
        x._axis(dim, op)
        v, i = _along(x.reshape(1), 0, False, skip_nan, op, result)
        return result(v.reshape(()), i.reshape(()))
    a = x._axis(dim, op)
    _check_input(op, x, a)
    return _pick(x, a, _median_pos(x, a, skip_nan), keepdim, result)


@tensor_op("median")
def median(input: GraphTensor, dim=None, keepdim: bool = False) -> GraphTensor | ValuesIndices:  # noqa: A002
    """torch.median: with no ``dim`` the lower median of all elements (the smaller of the two middle
    values for an even count; NaN if any element is NaN, or if a float tensor has no elements, as
    torch's), a 0-d tensor whose gradient is shared evenly among the elements equal to it; with
    ``dim`` the named tuple ``(values, indices)`` along it (the gradient goes to ``indices``; among
    equal values which index is picked is luminal's, torch leaves it unspecified). Not defined for
    bool tensors.

    Args:
        input: the input tensor.
        dim: the dim to reduce (an int), or None for all elements.
        keepdim: keep the reduced dim as size 1 (with ``dim``).
    """
    if dim is None:
        return _whole(input, False, "median")
    return _along(input, dim, keepdim, False, "median", MedianResult)


@tensor_op("nanmedian")
def nanmedian(input: GraphTensor, dim=None, keepdim: bool = False) -> GraphTensor | ValuesIndices:  # noqa: A002
    """torch.nanmedian: ``median`` with the NaNs left out (NaN only where every element is NaN).

    Args:
        input: the input tensor.
        dim: the dim to reduce (an int), or None for all elements.
        keepdim: keep the reduced dim as size 1 (with ``dim``).
    """
    if dim is None:
        return _whole(input, True, "nanmedian")
    return _along(input, dim, keepdim, True, "nanmedian", NanmedianResult)


@tensor_op("kthvalue")
def kthvalue(input: GraphTensor, k: int, dim: int | None = -1, keepdim: bool = False) -> ValuesIndices:  # noqa: A002
    """torch.kthvalue: the ``k``-th smallest element along ``dim`` (``k`` from 1), as the named tuple
    ``(values, indices)``; NaN counts as the largest value. The gradient goes to ``indices``.

    Args:
        input: the input tensor.
        k: which order statistic, 1 <= k <= the dim's size (a static int).
        dim: the dim to search along (default, or None: the last).
        keepdim: keep the reduced dim as size 1.
    """
    x = input
    dim = -1 if dim is None else dim  # torch's None: the last dim
    require("kthvalue", isinstance(k, int) and not isinstance(k, bool), f"k must be an int, got {k!r}", x)
    if x.ndim == 0:
        x._axis(dim, "kthvalue")
        require("kthvalue", k == 1, f"k = {k} is out of range for a 0-d tensor", x, kind=IndexError)
        v, i = kthvalue(x.reshape(1), k, 0)
        return KthvalueResult(v.reshape(()), i.reshape(()))
    a = x._axis(dim, "kthvalue")
    _check_input("kthvalue", x, a)
    n = x.shape[a]
    require("kthvalue", k >= 1 and (not is_static(n) or k <= n), f"k = {k} is out of range for dim {a} of size {n}",
            x, kind=IndexError)
    return _pick(x, a, k - 1, keepdim, KthvalueResult)


@tensor_op("mode")
def mode(input: GraphTensor, dim: int = -1, keepdim: bool = False) -> ValuesIndices:  # noqa: A002
    """torch.mode: the most frequent value along ``dim``, as the named tuple ``(values, indices)``.
    Among values equally frequent, the smallest; its index is the last position holding it (torch's
    in rows of up to 16 elements; in longer ones torch's index follows its unstable sort, e.g. 1 for
    ``zeros(17)``, and its docs promise none). A NaN equals nothing, so each counts once
    (``mode([1, nan, nan, nan])`` is 1; torch sorts a row holding NaN with a comparison that is no
    order, so its answer there is not defined). The gradient goes to ``indices``.

    It reads the stable sort (an (n, n) comparison): the length of the run of equal values ending at
    each sorted position is the position minus the run's start (a running maximum of where runs
    start), and the first position holding the longest is the end of the smallest value's run.

    Args:
        input: the input tensor (bool, int or float).
        dim: the dim to count along (default the last).
        keepdim: keep the reduced dim as size 1.
    """
    x = input
    if isinstance(dim, (tuple, list)):
        raise op_error(TypeError, "mode", f"dim must be an int, got {dim!r}", x)
    if x.ndim == 0:
        x._axis(dim, "mode")
        v, i = mode(x.reshape(1), 0)
        return ModeResult(v.reshape(()), i.reshape(()))
    a = x._axis(dim, "mode")
    n = x.shape[a]
    if is_static(n) and n == 0:
        raise op_error(ValueError, "mode", f"cannot take the mode along dim {a}, which is empty", x)
    if any(is_static(m) and m == 0 for m in x.shape):  # nothing to count: empty values and indices
        shape = tuple(1 if i == a else m for i, m in enumerate(x.shape)) if keepdim else \
            tuple(m for i, m in enumerate(x.shape) if i != a)
        return ModeResult(x.graph.zeros(shape, x.dtype), x.graph.zeros(shape, dt.int32))
    keys = (cast(x, dt.int32) if x.dtype.kind == "b" else x).detach()  # compared only: values come from x
    _, perm = _sort(keys, a, False, "mode")
    ordered = _take(keys, perm, a)
    pos = x.graph.arange(n).reshape(tuple(n if i == a else 1 for i in range(x.ndim))).expand(*x.shape)
    if not is_static(n) or n > 1:
        later, earlier = ordered._slice_dim(a, 1, n - 1, 1), ordered._slice_dim(a, 0, n - 1, 1)
        starts = where(ne(later, earlier), pos._slice_dim(a, 1, n - 1, 1), 0)  # (NaN != NaN: runs of one)
        starts = cat([pos._slice_dim(a, 0, 1, 1), starts], a)
    else:
        starts = pos
    run = sub(pos, cummax(starts, a).values)  # the run's length so far, less one
    longest = cast(eq(run, amax(run, a, keepdim=True)), dt.int32)
    at = argmax(longest, a, keepdim=True)  # the first longest run: the smallest value's
    idx = _take(perm, at, a)
    values = _take(x, idx, a)
    if not keepdim:
        values, idx = values.squeeze(a), idx.squeeze(a)
    return ModeResult(values, idx)


_INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


def _q_tensor(op: str, x: GraphTensor, q) -> GraphTensor:
    """``q`` as a 0-d or 1-d tensor of ``x``'s dtype; numbers are checked to lie in [0, 1] now."""
    if isinstance(q, GraphTensor):
        require(op, q.graph is x.graph, "q belongs to another graph", x, q, kind=ValueError)
        require(op, q.ndim <= 1, f"q must be a scalar or a 1-d tensor, got {q.ndim} dims", x, q, kind=ValueError)
        require(op, q.dtype is x.dtype, f"q must have the input's dtype {x.dtype.name}, got {q.dtype.name}", x, q)
        return q
    if isinstance(q, numbers.Real) and not isinstance(q, bool):
        arr = np.asarray(float(q))
    elif isinstance(q, (list, tuple, np.ndarray)):
        arr = np.asarray(q, dtype=np.float64)
        if arr.ndim > 1 or arr.dtype.kind not in "fiu":
            raise op_error(ValueError, op, f"q must be a number or a 1-d sequence of numbers, got {q!r}", x)
    else:
        raise op_error(TypeError, op, f"q must be a number, a sequence of numbers or a tensor, got "
                       f"{type(q).__name__}", x)
    if not np.all((arr >= 0) & (arr <= 1)):
        raise op_error(ValueError, op, f"q values must lie in [0, 1], got {q!r}", x)
    return x.graph.constant(arr.astype(np.float64), x.dtype) if arr.ndim else x.graph.constant(float(arr), x.dtype)


def _quantile(op: str, x: GraphTensor, q, dim, keepdim: bool, interpolation: str, skip_nan: bool) -> GraphTensor:
    require(op, x.dtype.is_float, f"needs a float tensor, got {x.dtype.name}", x)
    if interpolation not in _INTERPOLATIONS:
        raise op_error(ValueError, op, f"interpolation must be one of {_INTERPOLATIONS}, got {interpolation!r}", x)
    if isinstance(dim, (tuple, list)):
        raise op_error(TypeError, op, f"dim must be an int or None, got {dim!r}", x)
    qt = _q_tensor(op, x, q)
    if dim is None or x.ndim == 0:
        if dim is not None:
            x._axis(dim, op)
        flat = x.reshape(-1)
        out_shape = (1,) * x.ndim if keepdim and dim is None else ()
    else:
        d = x._axis(dim, op)
        # d last, the others in their order (a transpose would swap the last dim into d's place)
        flat = x.permute(*(i for i in range(x.ndim) if i != d), d) if d != x.ndim - 1 else x
        out_shape = tuple(1 if i == d else n for i, n in enumerate(x.shape) if keepdim or i != d)
    a = flat.ndim - 1
    _check_input(op, flat, a)
    # flat: (..., n), sorted along its last dim a
    values, _ = _sort(flat, a, False, op)
    n = _dim_size(flat, a)
    last = sub(n, 1) if isinstance(n, GraphTensor) else n - 1
    qv = qt.reshape((1,) * (flat.ndim - 1) + (qt.shape[0] if qt.ndim else 1,))  # (1.., Q)
    nan = isnan(flat)
    if skip_nan:
        count = cast(_non_nan_count(flat, a), x.dtype)
        ranks = maximum(mul(qv, sub(count, 1)), 0.0)
    else:
        lastf = cast(last, x.dtype) if isinstance(last, GraphTensor) else float(last)
        ranks = where(any_(nan, a, keepdim=True), lastf, mul(qv, lastf))
    if interpolation == "lower":
        ranks = floor(ranks)
    elif interpolation == "higher":
        ranks = ceil(ranks)
    elif interpolation == "nearest":
        ranks = round_half_even(ranks)
    below_pos = floor(ranks)
    below = _take(values, cast(below_pos, dt.int32), a)
    if interpolation in ("linear", "midpoint"):
        above = _take(values, cast(ceil(ranks), dt.int32), a)
        weight = sub(ranks, below_pos.detach()) if interpolation == "linear" else 0.5
        # equal infinite neighbours: the quantile is that infinity (torch's lerp gives NaN there,
        # inf - inf; finite ties already interpolate exactly and keep torch's gradient split)
        same_inf = logical_and(eq(below, above), isinf(below))
        below = where(same_inf, below, lerp(below, above, weight))
    # below: (..., Q) -> (Q, *out_shape) or out_shape
    if qt.ndim == 0:
        return below.reshape(out_shape)
    moved = below.permute(below.ndim - 1, *range(below.ndim - 1))
    return moved.reshape((qt.shape[0],) + out_shape)


@float32_under_autocast
@tensor_op("quantile")
def quantile(input: GraphTensor, q, dim=None, keepdim: bool = False, *, interpolation: str = "linear") -> GraphTensor:  # noqa: A002
    """torch.quantile: the ``q``-th quantiles along ``dim`` (of all elements when None), interpolated
    between the neighbouring order statistics at rank ``q * (n - 1)``; NaN where the reduced elements
    hold one. A 1-d ``q`` puts its dim first in the result. Differentiable in ``input`` (and in a
    tensor ``q``, for 'linear'), as torch.

    Args:
        input: a float tensor.
        q: a number in [0, 1], a 1-d sequence of them, or a 0-d or 1-d tensor of the input's dtype
            (not range-checked: one outside [0, 1] mostly reads past the sorted values, an
            IndexError when the program runs).
        dim: the dim to reduce (an int), or None for all elements.
        keepdim: keep the reduced dim (or every dim, with ``dim=None``) as size 1.
        interpolation: 'linear', 'lower', 'higher', 'midpoint' or 'nearest' (rounding half to even).
    """
    return _quantile("quantile", input, q, dim, keepdim, interpolation, False)


@float32_under_autocast
@tensor_op("nanquantile")
def nanquantile(input: GraphTensor, q, dim=None, keepdim: bool = False, *,  # noqa: A002
                interpolation: str = "linear") -> GraphTensor:
    """torch.nanquantile: ``quantile`` with the NaNs left out (NaN only where every element is NaN).

    Args:
        input: a float tensor.
        q: a number in [0, 1], a 1-d sequence of them, or a 0-d or 1-d tensor of the input's dtype.
        dim: the dim to reduce (an int), or None for all elements.
        keepdim: keep the reduced dim (or every dim, with ``dim=None``) as size 1.
        interpolation: 'linear', 'lower', 'higher', 'midpoint' or 'nearest' (rounding half to even).
    """
    return _quantile("nanquantile", input, q, dim, keepdim, interpolation, True)
