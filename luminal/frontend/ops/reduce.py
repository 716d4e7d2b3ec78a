"""Reductions over one or several axes, softmax-family and scans, from SumReduce and MaxReduce."""

from __future__ import annotations

from luminal.core import dtype as dt
from luminal.core.errors import op_error
from luminal.core.symbolic import is_static, prod
from luminal.frontend.checks import tensor_op
from luminal.frontend.ops.core import cast, normalize_axes, prim, require
from luminal.frontend.ops.elementwise import (
    _float,
    _opmath,
    add,
    div,
    eq,
    exp,
    isinf,
    isnan,
    log,
    logical_not,
    logical_or,
    lt,
    maximum,
    mul,
    neg,
    sqrt,
    sub,
    where,
)
from luminal.frontend.tensor import GraphTensor, scalar_as_1d


def _keep(x: GraphTensor, out: GraphTensor, axes, keepdim: bool) -> GraphTensor:
    if not keepdim:
        return out
    return out.reshape(tuple(1 if i in axes else d for i, d in enumerate(x.shape)))


def _axis_kw(axis, dim, op: str, x: GraphTensor):
    if dim is not None:
        if axis is not None:
            raise op_error(TypeError, op, f"give axis= or dim=, not both (got {axis!r} and {dim!r})", x)
        return dim
    return axis


def _reduce(x: GraphTensor, op: str, axes) -> GraphTensor:
    out = x
    for a in sorted(axes, reverse=True):
        out = prim(op, out, arg=a, shape=out.shape[:a] + out.shape[a + 1:])
    return out


@tensor_op("sum")
def sum(x: GraphTensor, axis=None, keepdim: bool = False, *, dim=None, dtype=None) -> GraphTensor:  # noqa: A001
    axes = normalize_axes(x, _axis_kw(axis, dim, "sum", x), "sum")
    if dtype is not None:
        x = cast(x, dtype)
    elif x.dtype.kind == "b":
        x = cast(x, dt.int32)
    return _keep(x, _reduce(x, "SumReduce", axes), axes, keepdim)


def _count(x: GraphTensor, axes):
    n = prod(x.shape[a] for a in axes)
    return n if is_static(n) else x.graph.constant(n)


@tensor_op("mean")
@_opmath
def mean(x: GraphTensor, axis=None, keepdim: bool = False, *, dim=None) -> GraphTensor:
    require("mean", x.dtype.is_float, f"needs a float tensor, got {x.dtype.name}", x)
    axes = normalize_axes(x, _axis_kw(axis, dim, "mean", x), "mean")
    n = _count(x, axes)
    s = sum(x, axes, keepdim)
    return div(s, n if is_static(n) else cast(n, x.dtype))


@tensor_op("var")
@_opmath
def var(x: GraphTensor, axis=None, keepdim: bool = False, *, dim=None, correction=1, unbiased=None) -> GraphTensor:
    require("var", x.dtype.is_float, f"needs a float tensor, got {x.dtype.name}", x)
    if unbiased is not None:
        correction = 1 if unbiased else 0
    elif correction is None:  # torch's "not given": Bessel's correction, as the default
        correction = 1
    axes = normalize_axes(x, _axis_kw(axis, dim, "var", x), "var")
    n = _count(x, axes)
    # torch divides by max(0, n - correction): too large a correction gives inf (or NaN), not a negative
    denom = maximum(sub(cast(n, x.dtype), correction), 0) if isinstance(n, GraphTensor) else max(0, n - correction)
    m = mean(x, axes, keepdim=True)
    # Dividing by 0, the gradient through the mean is inf * (a sum that is 0 but for rounding) = NaN;
    # it is 0 in exact arithmetic, and torch's gradient, 2 (x - mean) / 0, leaves it out: so do we.
    if isinstance(denom, GraphTensor):
        m = where(eq(denom, 0), m.detach(), m)
    elif denom == 0:
        m = m.detach()
    d = sub(x, m)
    return div(sum(mul(d, d), axes, keepdim), denom)


@tensor_op("std")
@_opmath
def std(x: GraphTensor, axis=None, keepdim: bool = False, *, dim=None, correction=1, unbiased=None) -> GraphTensor:
    """The square root of ``var``. Where the variance is 0 (constant values), torch's gradient is 0:
    sqrt's own, 1 / (2 * 0), times var's zero gradient would be NaN, so there the root reads 1 and
    the result is 0 instead."""
    require("std", x.dtype.is_float, f"needs a float tensor, got {x.dtype.name}", x)
    v = var(x, axis, keepdim, dim=dim, correction=correction, unbiased=unbiased)
    flat = eq(v, 0)
    return where(flat, 0.0, sqrt(where(flat, 1.0, v)))


def _nonempty(x, axes, op):
    for a in axes:
        if is_static(x.shape[a]) and x.shape[a] == 0:
            raise op_error(ValueError, op, f"cannot reduce over the empty dim {a}", x)


@tensor_op("max")
def amax(x: GraphTensor, axis=None, keepdim: bool = False, *, dim=None) -> GraphTensor:
    """Maximum values over axes (numpy / ``torch.amax`` semantics; NaN propagates)."""
    axes = normalize_axes(x, _axis_kw(axis, dim, "max", x), "max")
    _nonempty(x, axes, "max")
    if len(axes) < 2:
        return _keep(x, _reduce(x, "MaxReduce", axes), axes, keepdim)
    # Several axes: one MaxReduce over them merged into the last axis (a view when they already are
    # contiguous, else a copy), not one per axis. Its gradient then shares among every tie in the
    # reduced set alike, as torch.amax's does; a chain would split it per axis (0.25 / 0.25 / 0.5
    # for three tied maxima of a 2x2 window, not a third each).
    kept = [i for i in range(x.ndim) if i not in axes]
    flat = x.permute(*kept, *axes).reshape(*(x.shape[i] for i in kept), prod(x.shape[a] for a in axes))
    out = prim("MaxReduce", flat, arg=len(kept), shape=flat.shape[:-1])
    return _keep(x, out, axes, keepdim)


def _reverse_order(x: GraphTensor) -> GraphTensor:
    """An order-reversing bijection, its own inverse: not / -x / ``-1 - x`` (``~x``, which unlike
    ``-x`` does not overflow at the smallest int32)."""
    if x.dtype.kind == "b":
        return logical_not(x)
    return neg(x) if x.dtype.is_float else sub(-1, x)


@tensor_op("min")
def amin(x: GraphTensor, axis=None, keepdim: bool = False, *, dim=None) -> GraphTensor:
    return _reverse_order(amax(_reverse_order(x), axis, keepdim, dim=dim))


def _amax_or(x: GraphTensor, axes, fill, keepdim: bool) -> GraphTensor:
    """amax that also runs when a symbolic reduced dim is 0 at run time: each symbolic reduced dim
    gets one extra ``fill`` element (a view), which never changes a non-empty max."""
    for a in axes:
        if not is_static(x.shape[a]):
            x = x.pad([0, 0] * (x.ndim - 1 - a) + [0, 1], fill)
    return amax(x, axes, keepdim)


@tensor_op("any")
def any_(x: GraphTensor, axis=None, keepdim: bool = False, *, dim=None) -> GraphTensor:
    b = x if x.dtype.kind == "b" else cast(x, dt.bool_)
    axes = normalize_axes(x, _axis_kw(axis, dim, "any", x), "any")
    if any(is_static(x.shape[a]) and x.shape[a] == 0 for a in axes):
        rest = [d for i, d in enumerate(x.shape) if i not in axes]
        return _keep(x, x.graph.constant(False).expand(*rest), axes, keepdim)
    return _amax_or(b, axes, False, keepdim)


@tensor_op("all")
def all_(x: GraphTensor, axis=None, keepdim: bool = False, *, dim=None) -> GraphTensor:
    b = x if x.dtype.kind == "b" else cast(x, dt.bool_)
    return logical_not(any_(logical_not(b), axis, keepdim, dim=dim))


@tensor_op("prod")
@_opmath
def prod_(x: GraphTensor, axis=None, keepdim: bool = False, *, dim=None) -> GraphTensor:
    """Product by pairwise halving (exact operations, no log/exp); needs static reduced sizes."""
    axes = normalize_axes(x, _axis_kw(axis, dim, "prod", x), "prod")
    out = cast(x, dt.int32) if x.dtype.kind == "b" else x
    for a in sorted(axes, reverse=True):
        n = out.shape[a]
        require("prod", is_static(n), f"prod over the symbolic dim {n} is not supported", x, kind=ValueError)
        while n > 1:
            if n % 2:
                pads = [0, 0] * (out.ndim - 1 - a) + [0, 1]
                out = out.pad(pads, 1)
                n += 1
            half = n // 2
            out = mul(out._slice_dim(a, 0, half, 1), out._slice_dim(a, half, half, 1))
            n = half
        out = out.reshape(out.shape[:a] + out.shape[a + 1:]) if n == 1 else \
            x.graph.constant(1, out.dtype).expand(*(out.shape[:a] + out.shape[a + 1:]))
    return _keep(x, out, axes, keepdim)


def _arg_extreme(x: GraphTensor, axis, keepdim: bool, largest: bool, op: str) -> GraphTensor:
    if axis is None:
        flat = _arg_extreme(x.reshape(-1), 0, False, largest, op)
        return flat.reshape((1,) * x.ndim) if keepdim else flat
    a = x._axis(axis, op)
    _nonempty(x, (a,), op)
    v = x if largest else _reverse_order(x)
    m = amax(v, a, keepdim=True)
    hit = eq(v, m)
    if v.dtype.is_float:
        hit = logical_or(hit, isnan(v))  # torch treats NaN as the extreme
    n = x.shape[a]
    idx = x.graph.arange(n).reshape(tuple(n if i == a else 1 for i in range(x.ndim)))
    cand = where(hit, idx, x.graph.constant(n if is_static(n) else 2**31 - 1, dt.int32))
    return amin(cand, a, keepdim)


@tensor_op("argmax")
@scalar_as_1d("argmax", dims=("axis", "dim"))
def argmax(x: GraphTensor, axis=None, keepdim: bool = False, *, dim=None) -> GraphTensor:
    return _arg_extreme(x, _axis_kw(axis, dim, "argmax", x), keepdim, True, "argmax")


@tensor_op("argmin")
@scalar_as_1d("argmin", dims=("axis", "dim"))
def argmin(x: GraphTensor, axis=None, keepdim: bool = False, *, dim=None) -> GraphTensor:
    return _arg_extreme(x, _axis_kw(axis, dim, "argmin", x), keepdim, False, "argmin")


def _empty(x: GraphTensor, axes) -> bool:
    return any(is_static(x.shape[a]) and x.shape[a] == 0 for a in axes)


@tensor_op("logsumexp")
def logsumexp(x: GraphTensor, axis=None, keepdim: bool = False, *, dim=None) -> GraphTensor:
    """``log(sum(exp(x)))`` shifted by the max; an infinite max shifts by 0 (so all -inf gives -inf
    and a +inf gives +inf, as torch). Over an empty dim the sum is 0 and the result -inf."""
    x = _float(x, "logsumexp")
    axes = normalize_axes(x, _axis_kw(axis, dim, "logsumexp", x), "logsumexp")
    if _empty(x, axes):
        return log(sum(exp(x), axes, keepdim))
    m = _amax_or(x, axes, float("-inf"), keepdim=True)
    m = where(isinf(m), x.graph.constant(0.0, m.dtype).expand(*m.shape), m).detach()
    out = add(log(sum(exp(sub(x, m)), axes, keepdim=True)), m)
    return out if keepdim else out.reshape(tuple(d for i, d in enumerate(x.shape) if i not in axes))


def _shifted(x: GraphTensor, axis, dim, op: str):
    """``(x - max(x), axis)`` over the softmax axis. Unlike logsumexp the max is used as is, as torch
    does: a row holding +inf, or only -inf, comes out all NaN. The max is detached here, in
    ``log_softmax_parts`` and in ``logsumexp``: its share of the gradient is exactly 0, but in 16 bits
    it would carry the rounding noise of a sum over the row (4-8x the tolerance at a 4096-long row's max)."""
    x = _float(x, op)
    a = _axis_kw(axis, dim, op, x)
    a = x._axis(a if a is not None else -1, op)
    if _empty(x, (a,)):
        return None, a
    return sub(x, _amax_or(x, (a,), float("-inf"), keepdim=True).detach()), a


@tensor_op("softmax")
@scalar_as_1d("softmax", dims=("axis", "dim"))
def softmax(x: GraphTensor, axis=None, *, dim=None) -> GraphTensor:
    z, a = _shifted(x, axis, dim, "softmax")
    if z is None:  # nothing to normalise over
        return _float(x, "softmax")
    e = exp(z)
    return div(e, sum(e, a, keepdim=True))


@tensor_op("log_softmax")
@scalar_as_1d("log_softmax", dims=("axis", "dim"))
def log_softmax(x: GraphTensor, axis=None, *, dim=None) -> GraphTensor:
    z, a = _shifted(x, axis, dim, "log_softmax")
    if z is None:
        return _float(x, "log_softmax")
    return sub(z, log(sum(exp(z), a, keepdim=True)))


def log_softmax_parts(x: GraphTensor, axis: int):
    """``(x, m, lse)`` with ``log_softmax(x) == (x - m) - lse`` element for element (``m`` the max,
    ``lse`` the log-sum-exp of ``x - m``, both keepdim; the same nodes log_softmax builds), so a
    caller that needs a few entries of the log-softmax (cross-entropy) can pick them from ``x``
    instead of materialising all of it. None when the axis is empty."""
    x = _float(x, "log_softmax")
    a = x._axis(axis, "log_softmax")
    if _empty(x, (a,)):
        return None
    m = _amax_or(x, (a,), float("-inf"), keepdim=True).detach()
    return x, m, log(sum(exp(sub(x, m)), a, keepdim=True))


@tensor_op("cumsum")
@scalar_as_1d("cumsum", dims=("axis", "dim"))
def cumsum(x: GraphTensor, axis=None, *, dim=None) -> GraphTensor:
    """``out[i] = sum_{j<=i} x[j]`` as a masked sum over a (n, n) lower-triangular window."""
    a = x._axis(_axis_kw(axis, dim, "cumsum", x), "cumsum")
    if x.dtype.kind == "b":
        x = cast(x, dt.int32)
    n = x.shape[a]
    xm = x.transpose(a, -1) if a != x.ndim - 1 else x
    idx = x.graph.arange(n)
    mask = lt(idx.reshape(1, n), add(idx.reshape(n, 1), 1))  # [i, j] = j <= i
    # where, not a multiply by the 0/1 mask: a NaN or inf after position i must not leak into out[i]
    zero = x.graph.constant(0, x.dtype)
    out = sum(where(mask, xm.unsqueeze(-2), zero), -1)
    return out.transpose(a, -1) if a != x.ndim - 1 else out


@tensor_op("cumprod")
@scalar_as_1d("cumprod", dims=("axis", "dim"))
@_opmath
def cumprod(x: GraphTensor, axis=None, *, dim=None) -> GraphTensor:
    """Inclusive product scan by doubling (Hillis-Steele): log2(n) exact multiplies; static n."""
    a = x._axis(_axis_kw(axis, dim, "cumprod", x), "cumprod")
    n = x.shape[a]
    require("cumprod", is_static(n), f"cumprod over the symbolic dim {n} is not supported", x, kind=ValueError)
    out = cast(x, dt.int32) if x.dtype.kind == "b" else x
    k = 1
    while k < n:
        pads = [0, 0] * (x.ndim - 1 - a) + [k, -k]
        out = mul(out, out.pad(pads, 1))
        k *= 2
    return out

