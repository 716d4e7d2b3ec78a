"""Per-primitive numpy implementations, shared by the reference interpreter and the compiled CPU backend.

Each op's numpy semantics (the table of ``core/primitives.py``, dtype rules included) lives here
once, so the two backends (and the compiler's constant folding) cannot drift apart: the elementwise
ufuncs are the primitive records' own, the structured ops (cast, where, reductions, gather,
scatter_add) the functions below, which the records name. Functions take an optional ``out``: the
compiled backend passes its preallocated arrays, the reference interpreter lets numpy allocate.

Half floats: float16 math runs in float32 (numpy casts on the way in, and on the way out into a
float16 ``out``: one rounding per op); bfloat16 values are float32 arrays rounded after every op
(:func:`round_bf16_`).
"""

from __future__ import annotations

import functools

import numpy as np

from luminal.core import dtype as dt
from luminal.core.primitives import PRIMITIVES
from luminal.core.symbolic import evaluate, is_static
from luminal.core.view import View

UFUNCS = {n: p.ufunc for n, p in PRIMITIVES.items() if p.ufunc is not None}
_BOOL = {n: p.bool_ufunc for n, p in PRIMITIVES.items() if p.bool_ufunc is not None}


def compute_dtype(d: dt.DType) -> np.dtype:
    """The numpy dtype an op producing ``d`` computes in."""
    return np.dtype(np.float32) if d in (dt.float16, dt.bfloat16) else d.np


# elementwise ----------------------------------------------------------------------------------------

def ufunc(op: str, arg: dt.DType):
    """The numpy function of the unary/binary primitive ``op`` on operands of dtype ``arg``, called as
    ``f(*xs)`` or ``f(*xs, out)``. A bfloat16 result still needs rounding (:func:`round_bf16_`)."""
    f = (_BOOL.get(op) if arg.kind == "b" else None) or UFUNCS[op]
    if arg is dt.float16 and PRIMITIVES[op].dtype != "bool":  # comparisons are exact in float16
        return functools.partial(f, dtype=np.float32)
    return f


def round_bf16_(a: np.ndarray) -> None:
    """Round a float32 array to bfloat16 values in place."""
    np.copyto(a, dt.round_bf16(a))


def where(c, a, b):
    """``a`` where ``c`` else ``b``: each element is copied from exactly one side."""
    return np.where(c, a, b)


def cast(x, src: dt.DType, dst: dt.DType, out=None):
    """float->int truncates toward zero and saturates (:func:`float_to_int32`); ->bool is ``x != 0``;
    ->float16/bfloat16 goes through float32."""
    if dst.kind == "b":
        return np.not_equal(x, 0, out)
    if dst.kind == "i" and src.is_float:
        r = float_to_int32(x)
        if out is None:
            return r
        np.copyto(out, r)
        return out
    if out is None:
        return dt.to_storage(np.asarray(x).astype(compute_dtype(dst)), dst)
    if dst is dt.float16 and x.dtype == np.float64:  # round once to float32, as the allocating path does
        x = x.astype(np.float32)
    np.copyto(out, x, casting="unsafe")
    if dst is dt.bfloat16:
        round_bf16_(out)
    return out


_INT32_RANGE = (float(np.iinfo(np.int32).min), float(np.iinfo(np.int32).max))


def float_to_int32(x) -> np.ndarray:
    """Floats to int32 by the Cast rule: truncated toward zero, and where the result does not fit
    (C and torch leave it undefined: torch gives INT_MIN on x86 and saturates on ARM and CUDA) every
    backend gives the same: NaN is 0, values past the range (infinities included) its end, INT_MAX or
    INT_MIN. That is what a GPU's conversion does, and numpy's own cast is the platform's (x86: INT_MIN),
    so it is spelt out here."""
    w = np.trunc(np.asarray(x, dtype=np.float64))  # (float64 holds every float16/32 and both ends exactly)
    return np.clip(np.where(np.isnan(w), 0.0, w), *_INT32_RANGE).astype(np.int32)


# reductions -----------------------------------------------------------------------------------------

def reduce(op: str, x: np.ndarray, axes: tuple, dtype: dt.DType, out=None):
    """``op`` ("sum"/"max") over ``axes`` of ``x`` (already in its compute dtype), for a result of
    ``dtype``. Integer sums stay int32 (wrapping); a bool sum is "any"; a max over an empty axis is
    an error."""
    if op == "max":
        if any(x.shape[a] == 0 for a in axes):
            check_max_nonempty(op, [x.shape[a] for a in axes], [n for a, n in enumerate(x.shape) if a not in axes],
                               f"shape {x.shape}, axes {axes}")
            shape = tuple(n for a, n in enumerate(x.shape) if a not in axes)
            return out if out is not None else np.empty(shape, x.dtype)  # (an empty result: nothing to compute)
        r = np.asarray(np.maximum.reduce(x, axes, None, out))  # (a numpy scalar for a full reduction)
        if x.dtype.kind == "f":
            _order_zeros(x, axes, r)
        return r
    if dtype.kind == "b":
        return np.logical_or.reduce(x, axes, None, out)
    return np.add.reduce(x, axes, np.int32 if dtype.kind == "i" else None, out)


def check_max_nonempty(reduce_op: str, reduced, kept, what: str) -> None:
    """A max over an empty axis has no value: an error (``what`` names the kernel) where its result has
    elements. An empty result (a dim it keeps is 0 too: a cummax over an empty batch reduces windows
    of 0 elements into 0 outputs) computes nothing, so it is none. Sizes not known yet pass."""
    def empty(sizes):
        return any(is_static(n) and n == 0 for n in sizes)

    if reduce_op == "max" and empty(reduced) and not empty(kept):
        raise ValueError(f"MaxReduce over an empty axis ({what})")


def _order_zeros(x: np.ndarray, axes: tuple, r) -> None:
    """The Max primitive's -0 < +0 in a max reduction ``r`` of ``x`` (numpy's loops return whichever
    zero they met first): a zero maximum is +0 where the reduced elements hold a +0."""
    zero = r == 0
    if zero.any():
        pos = np.logical_or.reduce((x == 0) & ~np.signbit(x), axes)
        np.copyto(r, np.where(pos, 0.0, -0.0).astype(r.dtype), where=zero)


# indexing -------------------------------------------------------------------------------------------

def check_index(idx: np.ndarray, size: int, op: str) -> None:
    if idx.size and (idx.min() < 0 or idx.max() >= size):
        bad = idx[(idx < 0) | (idx >= size)].flat[0]
        raise IndexError(f"{op}: index {bad} is out of range for a dim of size {size}")


def gather(x: np.ndarray, idx: np.ndarray, axis: int, out=None):
    check_index(idx, x.shape[axis], "gather")
    res = np.take_along_axis(x, idx.astype(np.intp), axis=axis)
    if out is None:
        return np.ascontiguousarray(res)
    np.copyto(out, res)
    return out


def scatter_add(dst: np.ndarray, idx: np.ndarray, src: np.ndarray, axis: int, dtype: dt.DType, out=None):
    """``dst`` with ``src[i]`` added at ``i with i[axis] := idx[i]`` (repeated indices accumulate)."""
    check_index(idx, dst.shape[axis], "scatter_add")
    res = dst.astype(compute_dtype(dtype), copy=True)
    grid = list(np.indices(idx.shape, sparse=True))
    grid[axis] = idx.astype(np.intp)
    if dtype.kind == "b":
        np.logical_or.at(res, tuple(grid), src)
    else:
        np.add.at(res, tuple(grid), src.astype(res.dtype))
    res = dt.to_storage(res, dtype)
    if out is None:
        return res
    np.copyto(out, res)
    return out


# views ----------------------------------------------------------------------------------------------

def strided(flat: np.ndarray, shape: tuple, strides: tuple, offset: int) -> np.ndarray:
    """The unmasked view ``(shape, strides, offset)`` (in elements) over the 1-d ``flat``, read-only,
    with a bounds check (a view reading outside its buffer is a compiler bug, never silent)."""
    if any(n == 0 for n in shape):
        return np.empty(shape, dtype=flat.dtype)
    check_bounds(shape, strides, offset, flat.size)
    item = flat.itemsize
    return np.lib.stride_tricks.as_strided(flat[offset:], shape, [s * item for s in strides], writeable=False)


def check_bounds(shape: tuple, strides: tuple, offset: int, size: int) -> None:
    """Raise unless the (non-empty) view stays inside a buffer of ``size`` elements."""
    lo = hi = int(offset)  # (plain ints: a layout's sizes may be DimValues, whose arithmetic costs more)
    for n, s in zip(shape, strides):
        reach = (int(n) - 1) * int(s)
        if reach < 0:
            lo += reach
        else:
            hi += reach
    if lo < 0 or hi >= size:
        raise IndexError(f"view (shape {shape}, strides {strides}, offset {offset}) reads outside a buffer "
                         f"of {size} elements")


def check_view(view: View, env: dict[str, int], size: int) -> None:
    """Raise (``check_bounds``) unless the elements ``view`` reads under ``env`` (its valid box's, when
    masked) lie inside a buffer of ``size`` elements: a device kernel reads where the view says,
    unchecked."""
    shape, strides, offset, box = bound_view(view, env)
    if box is not None:
        inner = inner_box(strides, offset, box)
        if inner is None:
            return
        shape, offset = inner
    if 0 not in shape:
        check_bounds(shape, strides, offset, size)


def bound_view(view: View, env: dict[str, int]):
    """``view`` evaluated under ``env``: ``(shape, strides, offset, box)``; ``box`` is None when unmasked,
    else the valid ``(lo, hi)`` per dim, clamped to the shape."""
    shape = tuple(evaluate(d, env) for d in view.shape)
    strides = tuple(evaluate(s, env) for s in view.strides)
    offset = evaluate(view.offset, env)
    box = None
    if view.mask is not None:
        box = tuple((max(0, min(evaluate(lo, env), n)), max(0, min(evaluate(hi, env), n)))
                    for (lo, hi), n in zip(view.mask, shape))
    return shape, strides, offset, box


def inner_box(strides: tuple, offset: int, box: tuple):
    """The unmasked part of a masked view: ``(shape, offset)`` of the valid box, or None when it is empty."""
    if not all(hi > lo for lo, hi in box):
        return None
    return tuple(hi - lo for lo, hi in box), offset + sum(lo * s for (lo, _), s in zip(box, strides))


def read(buf: np.ndarray, view: View, env: dict[str, int]) -> np.ndarray:
    """Materialise ``view`` over the contiguous buffer ``buf`` (zero-copy when unmasked)."""
    shape, strides, offset, box = bound_view(view, env)
    flat = buf.reshape(-1)
    if box is None:
        return strided(flat, shape, strides, offset)
    out = np.full(shape, view.pad, dtype=buf.dtype)
    inner = inner_box(strides, offset, box)
    if inner is not None:
        out[tuple(slice(lo, hi) for lo, hi in box)] = strided(flat, inner[0], strides, inner[1])
    return out
