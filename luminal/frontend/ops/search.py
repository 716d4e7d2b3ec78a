"""Searching sorted sequences and sets: searchsorted, bucketize, isin; and counting into bins: histc,
histogram.

Each compares every element with every entry of the sequence (or set) and counts (or looks for a
hit): a broadcast comparison and a sum, which the compiler fuses into one reduction, in place of
torch's binary search or hashing. Meant for the short sequences these take in models (bucket
boundaries, class lists); the cost is the product of the two sizes.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from luminal.core import dtype as dt
from luminal.core.errors import op_error
from luminal.core.symbolic import is_static
from luminal.frontend.checks import check_tensors, tensor_op
from luminal.frontend.ops.combine import cat
from luminal.frontend.ops.core import cast, prim
from luminal.frontend.ops.elementwise import (
    add,
    clamp,
    div,
    eq,
    floor,
    ge,
    gt,
    isfinite,
    isnan,
    le,
    logical_and,
    logical_not,
    logical_or,
    lt,
    maximum,
    minimum,
    mul,
    sub,
    where,
)
from luminal.frontend.ops.indexing import gather
from luminal.frontend.ops.reduce import amax, amin, any_
from luminal.frontend.ops.reduce import sum as sum_
from luminal.frontend.tensor import GraphTensor


def _before(a, b) -> GraphTensor:
    """``a`` sorts before ``b`` in torch.sort's order, where NaN is the largest value."""
    out = lt(a, b)
    if a.dtype.is_float or b.dtype.is_float:
        out = logical_or(out, logical_and(isnan(b), logical_not(isnan(a))))
    return out


def _as_tensor(op: str, v, like: GraphTensor) -> GraphTensor:
    """A number operand as a 0-d constant of ``like``'s graph (torch takes a Python scalar there)."""
    if isinstance(v, GraphTensor):
        return v
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise op_error(TypeError, op, f"expected a GraphTensor or a number, got {type(v).__name__}", like)
    return like.graph.constant(v)


def searchsorted(sorted_sequence: GraphTensor, input, *, out_int32: bool = False, right: bool = False,  # noqa: A002
                 side: str | None = None, sorter: GraphTensor | None = None) -> GraphTensor:
    """torch.searchsorted: for each value, the index at which it would be inserted into the sorted
    last dim of ``sorted_sequence`` to keep it sorted: before equal entries (``side="left"``, the
    default) or after them (``"right"``), as int32 (``out_int32`` is accepted: torch's int64 is
    luminal's int32 anyway). NaN sorts as the largest value, as torch.sort puts it. A value that no
    entry is above (at or above, for the left side) goes to the end, ``n``, as in torch: a NaN value
    always, and one above every number of a sequence ending in NaNs (after the NaNs too: torch's
    binary search compares with ``>``/``>=``, false against NaN). Other values in a sequence holding
    NaN are placed in sort order, where torch's answer depends on its search path.

    Args:
        sorted_sequence: ``(n,)``, or ``(*B, n)`` with ``input`` of shape ``(*B, k)``.
        input: the values (a tensor, or a number with a 1-d sequence: a 0-d result).
        out_int32: accepted for torch's signature.
        right: ``side="right"``.
        side: ``"left"`` or ``"right"``.
        sorter: int32 indices that sort an unsorted ``sorted_sequence`` along its last dim.
    """
    return _search("searchsorted", sorted_sequence, input, right, side, sorter)


def bucketize(input, boundaries: GraphTensor, *, out_int32: bool = False, right: bool = False) -> GraphTensor:  # noqa: A002
    """torch.bucketize: the index of the bucket of each value among the sorted 1-d ``boundaries``:
    the number of boundaries below it (``right=False``: ``boundaries[i-1] < x <= boundaries[i]``) or
    at or below it (``right=True``), as int32. NaN goes past the last boundary, as torch (with NaN
    boundaries at the end, a value above every number too: see ``searchsorted``).

    Args:
        input: the values (a tensor, or a number: a 0-d result).
        boundaries: a sorted 1-d tensor.
        out_int32: accepted for torch's signature (the result is int32).
        right: which side a value equal to a boundary goes to (above).
    """
    check_tensors("bucketize", boundaries=boundaries)
    if boundaries.ndim != 1:
        raise op_error(ValueError, "bucketize", f"boundaries must be 1-d, got {boundaries.ndim}-d", boundaries)
    return _search("bucketize", boundaries, input, right, None, None)


def _search(op: str, seq: GraphTensor, values, right: bool, side, sorter) -> GraphTensor:
    check_tensors(op, optional=("sorter",), sorted_sequence=seq, sorter=sorter)
    x = _as_tensor(op, values, seq)
    check_tensors(op, sorted_sequence=seq, input=x)
    if side is not None:
        if side not in ("left", "right"):
            raise op_error(ValueError, op, f"side must be 'left' or 'right', got {side!r}", seq)
        if right and side == "left":
            raise op_error(ValueError, op, "right=True and side='left' contradict each other", seq)
        right = side == "right"
    if seq.ndim == 0:
        raise op_error(ValueError, op, "the sorted sequence must have at least 1 dim, got a 0-d one", seq)
    if sorter is not None:
        if tuple(sorter.shape) != tuple(seq.shape) or sorter.dtype is not dt.int32:
            raise op_error(ValueError, op, "sorter must be int32 indices of the sequence's shape", seq, sorter)
        seq = gather(seq, -1, sorter)
    if seq.ndim == 1:
        s = seq.reshape((1,) * x.ndim + tuple(seq.shape))
    elif x.ndim != seq.ndim or tuple(x.shape[:-1]) != tuple(seq.shape[:-1]):
        raise op_error(ValueError, op, "an N-d sorted sequence needs values with the same leading dims",
                       seq, x)
    else:
        s = seq.unsqueeze(-2)
    v = x.unsqueeze(-1)
    hits = logical_not(_before(v, s)) if right else _before(s, v)
    count = sum_(cast(hits, dt.int32), -1)
    if not s.dtype.is_float:  # (no NaN in the sequence: a NaN value already counts every entry)
        return count
    # torch's binary search moves right past every entry that is not above the value (``s > v``; at
    # or above, ``s >= v``, for the left side), a NaN entry too: where no entry is, it ends at n, past
    # the NaNs at the sequence's end (a NaN value, or one above every number of the sequence)
    above = gt(s, v) if right else ge(s, v)
    n = s.shape[-1]
    return where(any_(above, -1), count, n if is_static(n) else x.graph.constant(n))


def isin(elements, test_elements, *, assume_unique: bool = False, invert: bool = False) -> GraphTensor:
    """torch.isin: whether each of ``elements`` equals some element of ``test_elements`` (a bool tensor
    of ``elements``' shape; NaN is in nothing, as IEEE equality says). Values compare in their
    promoted dtype.

    Args:
        elements: a tensor (or a number, with ``test_elements`` a tensor: a 0-d result).
        test_elements: a tensor of any shape, or a number.
        assume_unique: accepted for torch's signature (it only speeds torch up).
        invert: whether each is not among them instead.
    """
    like = elements if isinstance(elements, GraphTensor) else test_elements
    if not isinstance(like, GraphTensor):
        raise op_error(TypeError, "isin", f"elements or test_elements must be a GraphTensor, got "
                       f"{type(elements).__name__} and {type(test_elements).__name__}")
    e, t = _as_tensor("isin", elements, like), _as_tensor("isin", test_elements, like)
    check_tensors("isin", elements=e, test_elements=t)
    hit = any_(eq(e.unsqueeze(-1), t.reshape(-1)), -1) if t.ndim else eq(e, t)
    return logical_not(hit) if invert else hit


@tensor_op("histc")
def histc(input: GraphTensor, bins: int = 100, min=0, max=0) -> GraphTensor:  # noqa: A002 - torch's names
    """torch.histc: counts of the elements in ``bins`` equal-width bins from ``min`` to ``max`` (a 1-d
    tensor of ``input``'s dtype); elements outside the range, and NaNs, are not counted; one equal to
    ``max`` counts in the last bin. ``min == max`` (the default 0, 0) takes the range of the data;
    a range of one value ``v`` (or an empty input) is ``[v - 1, v + 1]``, as torch. An element's bin
    is ``floor((x - min) * bins / (max - min))`` in float64 (torch finds it against float32 edges: an
    element within an ulp of an edge may fall on the other side of it). The counts have no gradient
    (torch has none either). With the range taken from data holding NaN or an infinity torch fails;
    here nothing is counted.

    Args:
        input: a float tensor (any shape; every element counts).
        bins: the number of bins (an int > 0).
        min: the lower end of the range (a number).
        max: the upper end of the range (a number).
    """
    x = input
    check_tensors("histc", input=x)
    if not x.dtype.is_float:
        raise op_error(TypeError, "histc", f"takes a float tensor, got {x.dtype.name} (cast it first)", x)
    if isinstance(bins, bool) or not isinstance(bins, numbers.Integral) or bins <= 0:
        raise op_error(ValueError, "histc", f"bins must be an int > 0, got {bins!r}", x)
    for name, v in (("min", min), ("max", max)):
        if isinstance(v, bool) or not isinstance(v, numbers.Real):
            raise op_error(TypeError, "histc", f"{name} must be a number, got {type(v).__name__}", x)
    if not (math.isfinite(min) and math.isfinite(max)):
        raise op_error(ValueError, "histc", f"the range [{min}, {max}] is not finite", x)
    if min > max:
        raise op_error(ValueError, "histc", f"max ({max}) must be at least min ({min})", x)
    g, bins = x.graph, int(bins)
    flat = cast(x.reshape(-1), dt.float64).detach()  # binned, not differentiated
    if min == max and flat.shape[0] != 0:  # the data's range
        lo, hi = amin(flat), amax(flat)
    else:
        lo, hi = g.constant(float(min), dt.float64), g.constant(float(max), dt.float64)
    same = eq(lo, hi)
    lo, hi = where(same, sub(lo, 1.0), lo), where(same, add(hi, 1.0), hi)
    counted = logical_and(ge(flat, lo), le(flat, hi))  # (False for NaN)
    pos = floor(div(mul(sub(flat, lo), float(bins)), sub(hi, lo)))
    pos = cast(where(counted, minimum(pos, bins - 1), 0.0), dt.int32)  # (max itself: the last bin)
    ones = cast(counted, dt.int32)  # (counted exactly: a float32 sum of ones stops at 2**24)
    return cast(prim("ScatterAdd", g.zeros((bins,), dt.int32), pos, ones, arg=0, shape=(bins,)), x.dtype)


def histogram(input: GraphTensor, bins, *, range=None, weight: GraphTensor | None = None,  # noqa: A002
              density: bool = False) -> tuple[GraphTensor, GraphTensor]:
    """torch.histogram: ``(hist, bin_edges)``, the (weighted) counts of the elements of ``input`` in
    bins and the bins' edges, both of ``input``'s dtype. An int ``bins`` makes that many equal-width
    bins over ``range``, or else over the data's min and max when the program runs (no elements: [0,
    1]); a range of one value ``v`` is ``[v - 0.5, v + 0.5]``, as numpy's and torch's. The edges are
    laid out as torch's linspace (counted up from the low end, down from the high end) in the input's
    dtype, and an element is counted in the bin of those edges it falls in (torch's search against its
    edges). A 1-d tensor ``bins`` gives the edges (increasing) itself. Each bin holds its left edge, the
    last its right one too; elements outside the edges, and NaNs, are not counted. The counts are exact
    (summed as int32, weights as float64, then rounded once to the input's dtype: a float32 sum of ones
    stops at 2**24). ``density`` divides by the total and the bins' widths. The results have no
    gradient (torch's is not implemented). Where torch fails on data whose range is not finite (an
    infinity or NaN, found when the program runs), nothing is counted here.

    Args:
        input: a float tensor (any shape; every element counts).
        bins: the number of bins (an int > 0) or a 1-d tensor of at least 2 edges, of input's dtype.
        range: ``(min, max)`` numbers, for an int ``bins`` (default: the data's).
        weight: a tensor of input's shape and dtype: each element counts its weight instead of 1.
        density: whether to give a probability density (integrating to 1 over the edges).

    Returns:
        ``(hist, bin_edges)``: 1-d tensors of ``nbins`` and ``nbins + 1`` elements.
    """
    op = "histogram"
    x = input
    check_tensors(op, optional=("weight",), input=x, weight=weight)
    if not x.dtype.is_float:
        raise op_error(TypeError, op, f"takes a float tensor, got {x.dtype.name} (cast it first)", x)
    if weight is not None and (weight.dtype is not x.dtype or tuple(weight.shape) != tuple(x.shape)):
        raise op_error(ValueError, op, f"weight must have input's shape {tuple(x.shape)} and dtype {x.dtype.name}, "
                       f"got {tuple(weight.shape)} {weight.dtype.name}", x, weight)
    if not isinstance(density, (bool, np.bool_)):
        raise op_error(TypeError, op, f"density must be a bool, got {density!r}", x)
    g = x.graph
    flat = x.reshape(-1).detach()  # binned, not differentiated
    if isinstance(bins, GraphTensor):
        check_tensors(op, input=x, bins=bins)
        if range is not None:
            raise op_error(TypeError, op, "range applies to an int bins only: a tensor bins gives the edges", x)
        if bins.ndim != 1 or bins.dtype is not x.dtype or not is_static(bins.shape[0]) or bins.shape[0] < 2:
            raise op_error(ValueError, op, f"a tensor bins must be 1-d of input's dtype {x.dtype.name} with a static "
                           f"count of at least 2 edges, got {tuple(bins.shape)} {bins.dtype.name}", x, bins)
        edges, n = bins.detach(), bins.shape[0] - 1
        pos = sub(_search(op, edges, flat, True, None, None), 1)
    else:
        if isinstance(bins, bool) or not isinstance(bins, numbers.Integral) or bins <= 0:
            raise op_error(ValueError, op, f"bins must be an int > 0 or a 1-d tensor of edges, got {bins!r}", x)
        n = int(bins)
        edges = _linear_edges(op, flat, n, range)
        pos = _bin_of(flat, edges, n)
    lo, hi = edges[0], edges[n]
    counted = logical_and(ge(flat, lo), le(flat, hi))  # (False for NaN)
    counted = logical_and(counted, logical_and(isfinite(lo), isfinite(hi)))  # (torch fails there)
    pos = cast(where(counted, minimum(pos, n - 1), 0), dt.int32)  # (the last edge: the last bin)
    # summed wide and rounded once, as torch's (exact) counts: a float32 sum of ones stops at 2**24
    acc = dt.int32 if weight is None else dt.float64
    w = cast(counted, acc) if weight is None else where(counted, cast(weight.reshape(-1).detach(), acc), 0.0)
    hist = cast(prim("ScatterAdd", g.zeros((n,), acc), pos, w, arg=0, shape=(n,)), x.dtype)
    if density:
        hist = div(hist, mul(sum_(hist), sub(edges[1:], edges[:-1])))
    return hist, edges


def _linear_edges(op: str, flat: GraphTensor, n: int, range) -> GraphTensor:  # noqa: A002 - torch's name
    """The ``n + 1`` equal-width edges over ``range`` or the data's min and max, as torch's histogram
    makes them: the ends found in float64 (widened by 0.5 each way when equal), rounded to the input's
    dtype, then torch's linspace in that dtype (``lo + step * i`` for the first half, ``hi - step * (n -
    i)`` for the rest, ``step = (hi - lo) / n``)."""
    g, d = flat.graph, flat.dtype
    if range is not None:
        if (not isinstance(range, (tuple, list)) or len(range) != 2
                or any(isinstance(v, bool) or not isinstance(v, numbers.Real) for v in range)):
            raise op_error(TypeError, op, f"range must be a (min, max) pair of numbers, got {range!r}", flat)
        a, b = (float(v) for v in range)
        if not (math.isfinite(a) and math.isfinite(b)):
            raise op_error(ValueError, op, f"the range [{a}, {b}] is not finite", flat)
        if a > b:
            raise op_error(ValueError, op, f"min ({a}) must not exceed max ({b}) in range", flat)
        lo, hi = g.constant(a, dt.float64), g.constant(b, dt.float64)
    elif is_static(flat.shape[0]) and flat.shape[0] == 0:
        lo, hi = g.constant(0.0, dt.float64), g.constant(1.0, dt.float64)
    elif is_static(flat.shape[0]):
        wide = cast(flat, dt.float64)
        lo, hi = amin(wide), amax(wide)
    else:  # a size known when the program runs, maybe 0: the bounds of the data and of the ends of [0, 1]
        wide = cast(flat, dt.float64)  # (with a reversed pair, so that no data gives lo > hi)
        lo = amin(cat([wide, g.constant(np.array([math.inf]))]))
        hi = amax(cat([wide, g.constant(np.array([-math.inf]))]))
        empty = gt(lo, hi)
        lo, hi = where(empty, 0.0, lo), where(empty, 1.0, hi)
    same = eq(lo, hi)
    lo, hi = cast(where(same, sub(lo, 0.5), lo), d), cast(where(same, add(hi, 0.5), hi), d)
    step = div(sub(hi, lo), float(n))
    i = cast(g.arange(n + 1), d)
    return where(lt(i, (n + 1) // 2), add(lo, mul(step, i)), sub(hi, mul(step, sub(float(n), i))))


def _bin_of(flat: GraphTensor, edges: GraphTensor, n: int) -> GraphTensor:
    """The bin of each element among ``n`` equal-width ``edges`` as torch finds it: ``(x - lo) * n / (hi -
    lo)`` truncated, then checked against the edges on each side (the last edge found at or below ``x``
    among those three), so that the count agrees with the edges returned. Meaningful where ``x`` is
    within the edges (others are not counted)."""
    lo, hi = edges[0], edges[n]
    guess = floor(div(mul(sub(flat, lo), float(n)), sub(hi, lo)))
    guess = cast(minimum(maximum(where(isnan(guess), 0.0, guess), 0.0), float(n)), dt.int32)
    found = None
    for k in (-1, 0, 1):
        at = add(guess, k)
        valid = logical_and(ge(at, 0), le(at, n))
        below = logical_and(valid, le(gather(edges, 0, clamp(at, 0, n)), flat))
        found = cast(below, dt.int32) if found is None else add(found, cast(below, dt.int32))
    return sub(add(maximum(sub(guess, 1), 0), found), 1)
