"""Reductions over one or several axes, softmax-family and scans, from SumReduce and MaxReduce."""

from __future__ import annotations

from .. import dtype as dt
from ..errors import op_error
from ..symbolic import is_static, prod
from ..tensor import GraphTensor
from .core import cast, normalize_axes, prim, require
from .elementwise import (
    _float, add, div, eq, exp, isinf, isnan, log, logical_not, logical_or, lt, mul, neg, sqrt, sub, where,
)


def _keep(x: GraphTensor, out: GraphTensor, axes, keepdim: bool) -> GraphTensor:
    if not keepdim:
        return out
    return out.reshape(tuple(1 if i in axes else d for i, d in enumerate(x.shape)))


def _axis_kw(axis, dim):
    if dim is not None:
        if axis is not None:
            raise TypeError("give axis= or dim=, not both")
        return dim
    return axis


def _reduce(x: GraphTensor, op: str, axes) -> GraphTensor:
    out = x
    for a in sorted(axes, reverse=True):
        out = prim(op, out, arg=a, shape=out.shape[:a] + out.shape[a + 1:])
    return out


def sum(x: GraphTensor, axis=None, keepdim: bool = False, *, dim=None, dtype=None) -> GraphTensor:  # noqa: A001
    axes = normalize_axes(x, _axis_kw(axis, dim), "sum")
    if dtype is not None:
        x = cast(x, dtype)
    elif x.dtype.kind == "b":
        x = cast(x, dt.int32)
    return _keep(x, _reduce(x, "SumReduce", axes), axes, keepdim)


def _count(x: GraphTensor, axes):
    n = prod(x.shape[a] for a in axes)
    return n if is_static(n) else x.graph.constant(n)


def mean(x: GraphTensor, axis=None, keepdim: bool = False, *, dim=None) -> GraphTensor:
    require("mean", x.dtype.is_float, f"mean needs a float tensor, got {x.dtype.name}", x)
    axes = normalize_axes(x, _axis_kw(axis, dim), "mean")
    n = _count(x, axes)
    s = sum(x, axes, keepdim)
    return div(s, n if is_static(n) else cast(n, x.dtype))


def var(x: GraphTensor, axis=None, keepdim: bool = False, *, dim=None, correction=1, unbiased=None) -> GraphTensor:
    require("var", x.dtype.is_float, f"var needs a float tensor, got {x.dtype.name}", x)
    if unbiased is not None:
        correction = 1 if unbiased else 0
    axes = normalize_axes(x, _axis_kw(axis, dim), "var")
    d = sub(x, mean(x, axes, keepdim=True))
    n = _count(x, axes)
    denom = sub(cast(n, x.dtype), correction) if isinstance(n, GraphTensor) else n - correction
    return div(sum(mul(d, d), axes, keepdim), denom)


def std(x: GraphTensor, axis=None, keepdim: bool = False, *, dim=None, correction=1, unbiased=None) -> GraphTensor:
    return sqrt(var(x, axis, keepdim, dim=dim, correction=correction, unbiased=unbiased))


def _nonempty(x, axes, op):
    for a in axes:
        if is_static(x.shape[a]) and x.shape[a] == 0:
            raise op_error(ValueError, op, f"cannot reduce over the empty dim {a}", x)


def amax(x: GraphTensor, axis=None, keepdim: bool = False, *, dim=None) -> GraphTensor:
    """Maximum values over axes (numpy / ``torch.amax`` semantics; NaN propagates)."""
    axes = normalize_axes(x, _axis_kw(axis, dim), "max")
    _nonempty(x, axes, "max")
    return _keep(x, _reduce(x, "MaxReduce", axes), axes, keepdim)


def amin(x: GraphTensor, axis=None, keepdim: bool = False, *, dim=None) -> GraphTensor:
    if x.dtype.kind == "b":
        return logical_not(amax(logical_not(x), axis, keepdim, dim=dim))
    return neg(amax(neg(x), axis, keepdim, dim=dim))


def any_(x: GraphTensor, axis=None, keepdim: bool = False, *, dim=None) -> GraphTensor:
    b = x if x.dtype.kind == "b" else cast(x, dt.bool_)
    axes = normalize_axes(x, _axis_kw(axis, dim), "any")
    if any(is_static(x.shape[a]) and x.shape[a] == 0 for a in axes):
        return _keep(x, x.graph.constant(False).expand(*[d for i, d in enumerate(x.shape) if i not in axes]), axes, keepdim)
    return amax(b, axes, keepdim)


def all_(x: GraphTensor, axis=None, keepdim: bool = False, *, dim=None) -> GraphTensor:
    b = x if x.dtype.kind == "b" else cast(x, dt.bool_)
    return logical_not(any_(logical_not(b), axis, keepdim, dim=dim))


def prod_(x: GraphTensor, axis=None, keepdim: bool = False, *, dim=None) -> GraphTensor:
    """Product by pairwise halving (exact operations, no log/exp); needs static reduced sizes."""
    axes = normalize_axes(x, _axis_kw(axis, dim), "prod")
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
        return _arg_extreme(x.reshape(-1), 0, False, largest, op) if not keepdim else \
            _arg_extreme(x.reshape(-1), 0, False, largest, op).reshape((1,) * x.ndim)
    a = x._axis(axis, op)
    _nonempty(x, (a,), op)
    if x.dtype.kind == "b":
        v = x if largest else logical_not(x)
    else:
        v = x if largest else neg(x)
    m = amax(v, a, keepdim=True)
    hit = eq(v, m)
    if v.dtype.is_float:
        hit = logical_or(hit, isnan(v))  # torch treats NaN as the extreme
    n = x.shape[a]
    idx = x.graph.arange(n).reshape(tuple(n if i == a else 1 for i in range(x.ndim)))
    cand = where(hit, idx, x.graph.constant(n if is_static(n) else 2**31 - 1, dt.int32))
    return amin(cand, a, keepdim)


def argmax(x: GraphTensor, axis=None, keepdim: bool = False, *, dim=None) -> GraphTensor:
    return _arg_extreme(x, _axis_kw(axis, dim), keepdim, True, "argmax")


def argmin(x: GraphTensor, axis=None, keepdim: bool = False, *, dim=None) -> GraphTensor:
    return _arg_extreme(x, _axis_kw(axis, dim), keepdim, False, "argmin")


def _stable_max(x: GraphTensor, a: int) -> GraphTensor:
    m = amax(x, a, keepdim=True)
    return where(isinf(m), x.graph.constant(0.0, m.dtype).expand(*m.shape), m)


def logsumexp(x: GraphTensor, axis=None, keepdim: bool = False, *, dim=None) -> GraphTensor:
    x = _float(x, "logsumexp")
    axes = normalize_axes(x, _axis_kw(axis, dim), "logsumexp")
    m = x
    for a in axes:
        m = amax(m, a, keepdim=True)
    m = where(isinf(m), x.graph.constant(0.0, m.dtype).expand(*m.shape), m)
    out = add(log(sum(exp(sub(x, m)), axes, keepdim=True)), m)
    return out if keepdim else out.reshape(tuple(d for i, d in enumerate(x.shape) if i not in axes))


def softmax(x: GraphTensor, axis=None, *, dim=None) -> GraphTensor:
    x = _float(x, "softmax")
    a = x._axis(_axis_kw(axis, dim) if _axis_kw(axis, dim) is not None else -1, "softmax")
    e = exp(sub(x, _stable_max(x, a)))
    return div(e, sum(e, a, keepdim=True))


def log_softmax(x: GraphTensor, axis=None, *, dim=None) -> GraphTensor:
    x = _float(x, "log_softmax")
    a = _axis_kw(axis, dim)
    return sub(x, logsumexp(x, a if a is not None else -1, keepdim=True))


def cumsum(x: GraphTensor, axis=None, *, dim=None) -> GraphTensor:
    """``out[i] = sum_{j<=i} x[j]`` as a masked sum over a (n, n) lower-triangular window."""
    a = x._axis(_axis_kw(axis, dim), "cumsum")
    if x.dtype.kind == "b":
        x = cast(x, dt.int32)
    n = x.shape[a]
    xm = x.transpose(a, -1) if a != x.ndim - 1 else x
    idx = x.graph.arange(n)
    mask = lt(idx.reshape(1, n), add(idx.reshape(n, 1), 1))  # [i, j] = j <= i
    out = sum(mul(xm.unsqueeze(-2), cast(mask, x.dtype)), -1)
    return out.transpose(a, -1) if a != x.ndim - 1 else out


def cumprod(x: GraphTensor, axis=None, *, dim=None) -> GraphTensor:
    """Inclusive product scan by doubling (Hillis-Steele): log2(n) exact multiplies; static n."""
    a = x._axis(_axis_kw(axis, dim), "cumprod")
    n = x.shape[a]
    require("cumprod", is_static(n), f"cumprod over the symbolic dim {n} is not supported", x, kind=ValueError)
    out = cast(x, dt.int32) if x.dtype.kind == "b" else x
    k = 1
    while k < n:
        pads = [0, 0] * (x.ndim - 1 - a) + [k, -k]
        out = mul(out, out.pad(pads, 1))
        k *= 2
    return out

