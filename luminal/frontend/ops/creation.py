"""Tensors made from nothing: arange, full, eye, and the triangular masks tril/triu."""

from __future__ import annotations

import math
import numbers

import numpy as np

from luminal.core import dtype as dt
from luminal.core.errors import op_error
from luminal.core.symbolic import Sym, is_static, sizes, sym
from luminal.frontend.checks import tensor_op
from luminal.frontend.ops.core import cast, full, full_like  # noqa: F401 - creation ops, made in core
from luminal.frontend.ops.elementwise import add, eq, ge, le, mul, sub, where
from luminal.frontend.tensor import GraphTensor


def arange(g, start, end=None, step=1, dtype=None) -> GraphTensor:
    """torch.arange: ``start`` (and ``end``) may be symbolic sizes (names, Sym); bools count as 0 / 1,
    as in torch (``arange(False, True, True)`` is ``[0]``)."""
    if end is None:
        start, end = 0, start
    start, end, step = (_arange_bound(what, v) for what, v in (("start", start), ("end", end), ("step", step)))
    floats = any(isinstance(v, float) for v in (start, end, step))
    d = dt.as_dtype(dtype) if dtype is not None else (dt.float32 if floats else dt.int32)
    if step == 0:
        raise op_error(ValueError, "arange", "step must be non-zero")
    if floats:
        n = max(0, math.ceil((end - start) / step))
    else:
        start, end = sym(start), sym(end)
        span = end - start
        n = max(0, -(-span // step)) if is_static(span) else (span + step - 1) // step if step > 0 else None
        if n is None:
            raise op_error(ValueError, "arange", "a negative step needs static bounds")
    base = g.tensor(g.add("Arange", (), n, dt.int32, (n,)))
    if not floats and step == 1 and is_static(start) and start == 0:
        return cast(base, d)
    out = add(mul(cast(base, d if d.is_float else dt.int32), step), start if not floats else float(start))
    return cast(out, d)


def _arange_bound(what: str, v):
    """One of arange's numbers: a bool as the int torch takes it for, a finite float, an int, or (not
    the step) a symbolic size; anything else fails naming arange and the argument, not as a
    conversion error deep in the size arithmetic."""
    if isinstance(v, (bool, np.bool_)):
        return int(v)
    if isinstance(v, (Sym, str)) and what != "step":
        return v
    if isinstance(v, numbers.Integral):
        return int(v)
    if isinstance(v, numbers.Real):
        if not math.isfinite(v):
            raise op_error(ValueError, "arange", f"{what} must be finite, got {v}")
        return float(v)
    kind = "a number" if what == "step" else "a number or a symbolic size"
    raise op_error(TypeError, "arange", f"{what} must be {kind}, got {type(v).__name__} {v!r}")


@tensor_op("zeros_like")
def zeros_like(x: GraphTensor, dtype=None) -> GraphTensor:
    return full_like(x, 0, dtype)


@tensor_op("ones_like")
def ones_like(x: GraphTensor, dtype=None) -> GraphTensor:
    return full_like(x, 1, dtype)


def _rows_cols(g, n, m):
    return g.arange(n).reshape(n, 1), g.arange(m).reshape(1, m)


def eye(g, n, m=None, dtype=dt.float32) -> GraphTensor:
    m = n if m is None else m
    sizes("eye", (n, m))
    r, c = _rows_cols(g, n, m)
    return cast(eq(r, c), dtype)


def _triangle(x: GraphTensor, op: str, keep) -> GraphTensor:
    """``x`` where ``keep(col - row)`` holds in the last two dims, 0 elsewhere."""
    if x.ndim < 2:
        raise op_error(ValueError, op, f"needs at least 2 dims, got {x.ndim}", x)
    r, c = _rows_cols(x.graph, x.shape[-2], x.shape[-1])
    return where(keep(sub(c, r)), x, x.graph.constant(0, x.dtype))


@tensor_op("tril")
def tril(x: GraphTensor, diagonal: int = 0) -> GraphTensor:
    """Keep elements with ``col - row <= diagonal`` in the last two dims, zero the rest."""
    return _triangle(x, "tril", lambda d: le(d, diagonal))


@tensor_op("triu")
def triu(x: GraphTensor, diagonal: int = 0) -> GraphTensor:
    """Keep elements with ``col - row >= diagonal`` in the last two dims, zero the rest."""
    return _triangle(x, "triu", lambda d: ge(d, diagonal))
