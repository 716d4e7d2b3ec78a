"""Shared plumbing for ops: making primitive nodes, scalars, broadcasting and dtype coercion."""

from __future__ import annotations

from luminal.core import dtype as dt
from luminal.core.errors import check_number, op_error
from luminal.core.symbolic import is_static, shape_str, sizes
from luminal.frontend.checks import check_tensors, tensor_op
from luminal.frontend.tensor import GraphTensor


def prim(op: str, *srcs: GraphTensor, arg=None, dtype: dt.DType | None = None, shape=None) -> GraphTensor:
    """Add a primitive node reading ``srcs`` and return it as a contiguous tensor."""
    g = srcs[0].graph
    node = g.add(op, srcs, arg, dtype or srcs[0].dtype, srcs[0].shape if shape is None else shape)
    return g.tensor(node)


def cast(x: GraphTensor, dtype) -> GraphTensor:
    if not isinstance(x, GraphTensor):  # inline, not ``tensor_op``: every coerced operand passes here
        check_tensors("cast", input=x)
    dtype = dt.as_dtype(dtype)
    if x.dtype is dtype:
        return x
    return prim("Cast", x, arg=dtype, dtype=dtype)


def broadcast_shapes(op: str, *ts: GraphTensor, shapes=None) -> tuple:
    """numpy/torch broadcasting of the operands' shapes (or of ``shapes``, with ``ts`` named in the
    error), with symbolic dims compared exactly."""
    shapes = [t.shape for t in ts] if shapes is None else shapes
    n = max(len(s) for s in shapes)
    out = []
    for i in range(n):
        dims = [s[i - n + len(s)] for s in shapes if i - n + len(s) >= 0]
        size = 1
        for d in dims:
            if is_static(d) and d == 1:
                continue
            if is_static(size) and size == 1:
                size = d
            elif d != size:
                text = " and ".join(shape_str(s) for s in shapes)
                raise op_error(ValueError, op, f"shapes {text} cannot broadcast (dim {i - n}: {size} vs {d})", *ts)
        out.append(size)
    return tuple(out)


def scalar(like: GraphTensor, value, dtype: dt.DType) -> GraphTensor:
    return like.graph.constant(value, dtype)


def coerce(op: str, *xs, dtype: dt.DType | None = None, min_kind: str | None = None) -> list[GraphTensor]:
    """Turn a mix of tensors and Python scalars into tensors of one shape and one dtype.

    The dtype follows the promotion rules (``dtype.py``) unless ``dtype`` is given; ``min_kind="f"``
    lifts bool/int results to float32 (true division, float math).
    """
    tensors = [x for x in xs if isinstance(x, GraphTensor)]
    if not tensors:
        raise op_error(TypeError, op, "at least one operand must be a GraphTensor, got "
                       + " and ".join(type(x).__name__ for x in xs))
    if any(t.graph is not tensors[0].graph for t in tensors):
        raise op_error(ValueError, op, "operands belong to different graphs", *tensors)
    for x in xs:
        if not isinstance(x, GraphTensor):
            try:
                dt.scalar_kind(x)
            except TypeError:
                msg = f"cannot combine a tensor with {type(x).__name__} {x!r}"
                raise op_error(TypeError, op, msg, *tensors) from None
    if dtype is None:
        dtype = tensors[0].dtype
        for t in tensors[1:]:
            dtype = dt.promote(dtype, t.dtype)
        for x in xs:
            if not isinstance(x, GraphTensor):
                dtype = dt.promote_scalar(dtype, x)
        if min_kind == "f" and not dtype.is_float:
            dtype = dt.float32
    shape = broadcast_shapes(op, *tensors)
    out = []
    for x in xs:
        t = x if isinstance(x, GraphTensor) else scalar(tensors[0], x, dtype)
        t = cast(t, dtype)
        if t.shape != shape:
            t = t.expand(*shape)
        out.append(t)
    return out


def require(op: str, cond: bool, msg: str, *ts, kind=TypeError):
    if not cond:
        raise op_error(kind, op, msg, *ts)


def normalize_axes(x: GraphTensor, axis, op: str) -> tuple[int, ...]:
    """``axis`` as None (all), an int, or a sequence; returns sorted unique non-negative axes."""
    if axis is None:
        return tuple(range(x.ndim))
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    out = sorted({x._axis(a, op) for a in axes})
    if x.ndim == 0:
        return ()
    return tuple(out)


def full(g, shape, value, dtype=None) -> GraphTensor:
    shape = sizes("full", shape)
    check_number("full", "value", value)
    if dtype is None:
        dtype = {"b": dt.bool_, "i": dt.int32, "f": dt.float32}[dt.scalar_kind(value)]
    c = g.constant(value, dtype)
    return c.reshape((1,) * len(shape)).expand(*shape) if shape else c


@tensor_op("full_like")
def full_like(x: GraphTensor, value, dtype=None) -> GraphTensor:
    return full(x.graph, x.shape, value, x.dtype if dtype is None else dtype)
