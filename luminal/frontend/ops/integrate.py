"""The trapezoidal rule: trapezoid and cumulative_trapezoid, torch's formulas written as slices, a sum
and a cumulative sum (so gradients reach ``y`` and ``x``, as torch's)."""

from __future__ import annotations

import numbers

from luminal.core import dtype as dt
from luminal.core.errors import op_error
from luminal.core.symbolic import dmax, is_static
from luminal.frontend.checks import check_tensors, tensor_op
from luminal.frontend.ops.core import cast
from luminal.frontend.ops.creation import zeros
from luminal.frontend.ops.elementwise import add, div, mul, sub
from luminal.frontend.ops.reduce import cumsum
from luminal.frontend.ops.reduce import sum as sum_
from luminal.frontend.tensor import GraphTensor


def _prepare(op: str, y: GraphTensor, x, dx, dim) -> tuple[int, GraphTensor | float | None]:
    """The checked dim of ``y`` and the spacing: the differences of ``x`` along the dim, laid out to
    broadcast against ``y``'s (a 1-d ``x`` of one value per sample lies along the dim; a tensor of fewer
    dims than ``y`` is padded with leading 1s, as torch's), or ``dx`` (a number or a 0-d tensor)."""
    if y.ndim == 0:
        raise op_error(ValueError, op, "needs y of at least 1 dim, got a 0-d one", y)
    d = y._axis(dim, op)
    if x is not None and dx is not None:
        raise op_error(TypeError, op, "takes x or dx, not both (torch's two signatures)", y)
    for what, t in (("y", y), ("x", x)):
        if isinstance(t, GraphTensor) and t.dtype.kind == "b":
            raise op_error(TypeError, op, f"received a bool {what}, which is not supported (as torch)", t)
    if x is None:
        if dx is None:
            return d, 1.0
        if isinstance(dx, GraphTensor):
            check_tensors(op, y=y, dx=dx)
            if dx.ndim != 0 or not dx.dtype.is_float and dx.dtype.kind != "i":
                raise op_error(TypeError, op, f"dx must be a real number (or a 0-d tensor), got a {dx.ndim}-d "
                               f"{dx.dtype.name} tensor; pass sample points as x", dx)
            # (the dtype of a number dx, as torch reads a 0-d tensor: the 0-d sum of trapezoid would promote)
            return d, cast(dx, dt.promote_scalar(y.dtype, 1.0))
        if isinstance(dx, bool) or not isinstance(dx, numbers.Real):
            raise op_error(TypeError, op, f"dx must be a real number, got {type(dx).__name__} {dx!r}", y)
        return d, float(dx)
    check_tensors(op, y=y, x=x)
    n = y.shape[d]
    if x.ndim == 1:
        if x.shape[0] != n:
            raise op_error(ValueError, op, f"there must be one x value for each sample point: x has "
                           f"{x.shape[0]}, y has {n} along dim {d}", y, x)
        x = x.reshape(tuple(n if i == d else 1 for i in range(y.ndim)))
    elif x.ndim < y.ndim:
        x = x.reshape((1,) * (y.ndim - x.ndim) + tuple(x.shape))
    elif x.ndim > y.ndim:
        raise op_error(ValueError, op, f"x has more dims ({x.ndim}) than y ({y.ndim})", y, x)
    return d, sub(*_right_left(x, d))


def _right_left(t: GraphTensor, d: int) -> tuple[GraphTensor, GraphTensor]:
    """``t[1:]`` and ``t[:-1]`` along ``d`` (each empty when ``t`` has no samples there)."""
    m = dmax(t.shape[d] - 1, 0)
    return t._slice_dim(d, 1, m, 1), t._slice_dim(d, 0, m, 1)


@tensor_op("trapezoid")
def trapezoid(y: GraphTensor, x: GraphTensor | None = None, *, dx=None, dim: int = -1) -> GraphTensor:
    """torch.trapezoid: the integral of ``y`` along ``dim`` by the trapezoidal rule, with the sample
    points ``x`` or a constant spacing ``dx`` (default 1). torch's formulas: ``sum((x[1:] - x[:-1]) *
    (y[1:] + y[:-1])) / 2``, and ``(sum(y) - (y[0] + y[-1]) / 2) * dx``. An integer ``y`` gives a float
    result; no samples (a static 0 along ``dim``) give zeros of ``y``'s dtype, as torch's. Differentiable
    in ``y`` and ``x``.

    Args:
        y: the values (at least 1 dim).
        x: the sample points: 1-d with one per sample along ``dim``, or a tensor broadcast against
            ``y`` (fewer dims are padded with leading 1s).
        dx: the constant spacing (a number or a 0-d tensor) when ``x`` is not given; a 0-d tensor is
            read as torch reads it, as a number: the result's dtype is that of a number ``dx``.
        dim: the dim integrated along.
    """
    d, spacing = _prepare("trapezoid", y, x, dx, dim)
    n = y.shape[d]
    if is_static(n) and n == 0:
        return zeros(tuple(s for i, s in enumerate(y.shape) if i != d), dtype=y.dtype, graph=y.graph)
    if isinstance(spacing, GraphTensor) and spacing.ndim == y.ndim:  # the differences of x
        return div(sum_(mul(spacing, add(*_right_left(y, d))), d), 2.0)
    if not is_static(n):  # (maybe 0 or 1 when the program runs: no ends to take; the same sum, added in pairs)
        return mul(div(sum_(add(*_right_left(y, d)), d), 2.0), spacing)
    ends = add(y._slice_dim(d, 0, 1, 1), y._slice_dim(d, n - 1, 1, 1)).squeeze(d)
    return mul(sub(sum_(y, d), mul(ends, 0.5)), spacing)


@tensor_op("cumulative_trapezoid")
def cumulative_trapezoid(y: GraphTensor, x: GraphTensor | None = None, *, dx=None, dim: int = -1) -> GraphTensor:
    """torch.cumulative_trapezoid: the running integral of ``y`` along ``dim`` by the trapezoidal rule
    (one value per interval: ``dim`` becomes one shorter, empty for fewer than 2 samples), torch's
    ``cumsum(dx / 2 * (y[:-1] + y[1:]))``. Sample points ``x`` or spacing ``dx`` as in :func:`trapezoid`.
    Differentiable in ``y`` and ``x``.

    Args:
        y: the values (at least 1 dim).
        x: the sample points: 1-d with one per sample along ``dim``, or a tensor broadcast against
            ``y`` (fewer dims are padded with leading 1s).
        dx: the constant spacing (a number or a 0-d tensor) when ``x`` is not given.
        dim: the dim integrated along.
    """
    d, spacing = _prepare("cumulative_trapezoid", y, x, dx, dim)
    half = div(spacing, 2.0) if isinstance(spacing, GraphTensor) else spacing / 2.0
    return cumsum(mul(half, add(*_right_left(y, d))), d)
