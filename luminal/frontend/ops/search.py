"""Searching sorted sequences and sets: searchsorted, bucketize, isin; and counting into bins: histc.

Each compares every element with every entry of the sequence (or set) and counts (or looks for a
hit): a broadcast comparison and a sum, which the compiler fuses into one reduction, in place of
torch's binary search or hashing. Meant for the short sequences these take in models (bucket
boundaries, class lists); the cost is the product of the two sizes.
"""

from __future__ import annotations

import math
import numbers

from luminal.core import dtype as dt
from luminal.core.errors import op_error
from luminal.core.symbolic import is_static
from luminal.frontend.checks import check_tensors, tensor_op
from luminal.frontend.ops.core import cast, prim
from luminal.frontend.ops.elementwise import (
    add,
    div,
    eq,
    floor,
    ge,
    gt,
    isnan,
    le,
    logical_and,
    logical_not,
    logical_or,
    lt,
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
    ones = cast(counted, x.dtype)
    return prim("ScatterAdd", g.zeros((bins,), x.dtype), pos, ones, arg=0, shape=(bins,))
