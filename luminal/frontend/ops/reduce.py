"""Reductions over one or several axes, softmax-family and scans, from SumReduce and MaxReduce."""

from __future__ import annotations

from luminal.core import dtype as dt
from luminal.core.errors import op_error, outermost_op, user_frame
from luminal.core.errors import where as at_line
from luminal.core.symbolic import is_static, prod, shape_str
from luminal.frontend.checks import tensor_op
from luminal.frontend.float32_ops import float32_under_autocast
from luminal.frontend.ops.core import cast, fresh, normalize_axes, prim, require
from luminal.frontend.ops.elementwise import (
    _float,
    _opmath,
    add,
    div,
    eq,
    exp,
    ge,
    gt,
    isinf,
    isnan,
    log,
    log1p,
    logical_and,
    logical_not,
    logical_or,
    lt,
    maximum,
    minimum,
    mul,
    neg,
    sqrt,
    sub,
    where,
)
from luminal.frontend.tensor import GraphTensor, ValuesIndices, scalar_as_1d


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
    """torch.sum: the sum over ``axis`` (all dims by default). Bool and int32 inputs sum as int32
    (torch's int64): past 2**31 the sum wraps, to torch's sum modulo 2**32 (``dtype=lm.float64``
    for larger sums). float16/bfloat16 sums accumulate in float32 and round once, as torch's.

    Args:
        x: the input tensor.
        axis: the dim or dims to reduce (None: all).
        keepdim: keep the reduced dims as size 1.
        dim: torch's name for ``axis``.
        dtype: cast ``x`` to this dtype before summing.
    """
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
def mean(x: GraphTensor, axis=None, keepdim: bool = False, *, dim=None, dtype=None) -> GraphTensor:
    """torch.mean: the mean over ``axis`` (all dims by default); needs a float tensor (or a float
    ``dtype``), as torch.

    Args:
        x: the input tensor.
        axis: the dim or dims to reduce (None: all).
        keepdim: keep the reduced dims as size 1.
        dim: torch's name for ``axis``.
        dtype: a float dtype to cast ``x`` to first, and the result's (torch's ``dtype=``).
    """
    if dtype is not None:
        d = dt.as_dtype(dtype)
        require("mean", d.is_float, f"dtype must be a float dtype, got {d.name}", x)
        x = cast(x, d)
    return _mean(x, axis, keepdim, dim)


@_opmath
def _mean(x: GraphTensor, axis, keepdim: bool, dim) -> GraphTensor:
    require("mean", x.dtype.is_float, f"needs a float tensor, got {x.dtype.name}", x)
    axes = normalize_axes(x, _axis_kw(axis, dim, "mean", x), "mean")
    n = _count(x, axes)
    s = sum(x, axes, keepdim)
    return div(s, n if is_static(n) else cast(n, x.dtype))


def _var_args(op: str, x: GraphTensor, dim, unbiased, axis, correction):
    """torch's overloads: ``var(x, unbiased)``, ``var(x, dim, unbiased, keepdim)`` and
    ``var(x, dim, *, correction, keepdim)``; returns ``(axes, correction)``."""
    if isinstance(dim, bool):  # var(x, False): the bool is ``unbiased``
        if unbiased is not None:
            raise op_error(TypeError, op, "unbiased given twice", x)
        dim, unbiased = None, dim
    if unbiased is not None:
        if correction is not None:
            raise op_error(TypeError, op, "give unbiased= or correction=, not both", x)
        correction = 1 if unbiased else 0
    elif correction is None:  # torch's "not given": Bessel's correction, as the default
        correction = 1
    return normalize_axes(x, _axis_kw(axis, dim, op, x), op), correction


@tensor_op("var")
def var(x: GraphTensor, dim=None, unbiased=None, keepdim: bool = False, *, axis=None, correction=None) -> GraphTensor:
    """Variance over ``dim`` (all dims by default) divided by ``N - correction`` (``unbiased``:
    correction 1 or 0), as torch, whose positional order ``(dim, unbiased, keepdim)`` this keeps.
    float32 and bfloat16 compute it in float64 (``_variance``) and round once.

    Args:
        x: a float tensor.
        dim: an int, a sequence of ints or None (all); a bool here is ``unbiased`` (``var(x, False)``).
        unbiased: Bessel's correction (1) or none (0); exclusive with ``correction``.
        keepdim: keep the reduced dims as size 1.
        axis: another name for ``dim``.
        correction: the number subtracted from the count (default 1)."""
    require("var", x.dtype.is_float, f"needs a float tensor, got {x.dtype.name}", x)
    axes, correction = _var_args("var", x, dim, unbiased, axis, correction)
    whole = _whole(x, dim, axis)
    out = _own_node(cast(_variance(x, axes, correction, keepdim), x.dtype), "var")

    def rule(out, adjoint, x):
        return [_var_backward(x, axes, correction, keepdim, whole, adjoint)]

    return x.graph.custom_vjp(out, [x], rule)


def _whole(x: GraphTensor, dim, axis) -> bool:
    """Whether torch sees no ``dim`` (``var(x)``, ``var(x, unbiased)``) or a 0-d ``x``: its backward
    then takes another branch for ``N <= correction``."""
    return x.ndim == 0 or ((dim is None or isinstance(dim, bool)) and axis is None)


def _own_node(t: GraphTensor, tag: str) -> GraphTensor:
    """A Copy of ``t`` that is no other expression's node, to carry a ``Graph.custom_vjp`` (see
    ``evenly_shared``; the compiler drops the copy)."""
    g = t.graph
    return g.tensor(g.add("Copy", (t,), tag, t.dtype, t.shape))


def _var_widths(x: GraphTensor):
    """``(x as computed, the wide dtype)``: the 16-bit types' mean is float32's (``_opmath``)."""
    xs = cast(x, dt.float32) if x.dtype in (dt.float16, dt.bfloat16) else x
    return xs, (dt.float32 if x.dtype is dt.float16 else dt.float64)


def _var_denom(x: GraphTensor, axes, correction, d: dt.DType):
    """``max(0, N - correction)``: torch's divisor (too large a correction gives inf or NaN, not a
    negative variance); an int, or a 0-d tensor of ``d`` for a symbolic count."""
    n = _count(x, axes)
    return maximum(sub(cast(n, d), correction), 0) if isinstance(n, GraphTensor) else max(0, n - correction)


def _variance(x: GraphTensor, axes, correction, keepdim: bool) -> GraphTensor:
    """The variance of float ``x`` in a dtype wide enough that the squared deviations neither
    overflow nor underflow where the variance (or its root) fits: float64 for float32, bfloat16 and
    float64, float32 for float16. In ``x``'s own float32 the squares overflowed (the std of [3e20,
    4e20, -1e20] was inf, torch's 2.6458e20) or flushed to 0 (the std of [3e-25, 4e-25, 1e-25] was 0).
    The mean is ``mean(x)`` as computed elsewhere (float32 for the 16-bit types), so a norm layer's
    own ``x.mean`` is the same node; the deviations from it and their squares are wide. A float32 sum
    already accumulates in float64, so the wide squares cost an f64 multiply per term. The gradient
    is a rule (``_var_backward``), not this chain's."""
    xs, wide = _var_widths(x)
    d = sub(cast(xs, wide), cast(mean(xs, axes, keepdim=True), wide))
    return div(sum(mul(d, d), axes, keepdim), _var_denom(x, axes, correction, wide))


def _var_backward(x: GraphTensor, axes, correction, keepdim: bool, whole: bool, adjoint: GraphTensor) -> GraphTensor:
    """torch's ``var_backward``: ``(2 / (N - correction)) * grad * (x - mean(x))``, in ``x``'s dtype
    (float32 for the 16-bit types, rounded once), ``N - correction`` unclamped (the value's divisor
    is clamped at 0: for ``correction > N`` the value is inf, its gradient that of a negative
    variance, as torch's). A whole-tensor reduction (``dim`` None, or a 0-d ``x``: ``whole``) with
    ``N <= correction`` is torch's other branch, ``grad * (NaN where x == mean, else inf)``.

    Differentiating the forward chain instead also sent the adjoint back through its mean (a float64
    sum of the deviations, 0 but for rounding: one more reduction and buffer per call). The mean here
    is the forward's node and is not detached, so a gradient of this gradient is torch's too
    (``I - 1/N``)."""
    xs, _ = _var_widths(x)
    n = _count(x, axes)
    a = cast(adjoint, xs.dtype)
    if not keepdim:
        a = a.reshape(tuple(1 if i in axes else size for i, size in enumerate(x.shape)))
    dev = sub(xs, mean(xs, axes, keepdim=True))
    if isinstance(n, GraphTensor):
        dof = sub(cast(n, xs.dtype), correction)
        grad = mul(mul(a, div(2.0, dof)), dev)
        if whole:
            grad = where(gt(dof, 0), grad, mul(a, where(eq(dev, 0), float("nan"), float("inf"))))
    elif whole and n <= correction:
        grad = mul(a, where(eq(dev, 0), float("nan"), float("inf")))
    else:
        grad = mul(mul(a, 2.0 / (n - correction) if n != correction else float("inf")), dev)
    return cast(grad, x.dtype)


@tensor_op("std")
def std(x: GraphTensor, dim=None, unbiased=None, keepdim: bool = False, *, axis=None, correction=None) -> GraphTensor:
    """The square root of ``var`` (same arguments), taken in ``var``'s wide dtype and rounded once:
    the std of float32 values fits where their variance does not (3e20's square). The gradient is
    torch's ``std_backward``: ``var``'s with the adjoint ``grad / (2 * std)``, 0 where the std is 0
    (constant values)."""
    require("std", x.dtype.is_float, f"needs a float tensor, got {x.dtype.name}", x)
    axes, correction = _var_args("std", x, dim, unbiased, axis, correction)
    whole = _whole(x, dim, axis)
    v = _variance(x, axes, correction, keepdim)
    out = _own_node(cast(sqrt(v), x.dtype), "std")

    def rule(out, adjoint, x):
        zero = eq(out, 0)
        a = where(zero, 0.0, div(adjoint, mul(where(zero, 1.0, out), 2)))
        return [_var_backward(x, axes, correction, keepdim, whole, a)]

    return x.graph.custom_vjp(out, [x], rule)


def _nonempty(x, axes, op):
    for a in axes:
        if is_static(x.shape[a]) and x.shape[a] == 0:
            raise op_error(ValueError, op, f"cannot reduce over the empty dim {a}", x)


# The ops whose result is a max or min itself: over a dim that is 0 at run time they fail as torch's do.
# Others built on amax (softmax, logsumexp, cummax, norms) have their own answer for an empty dim.
_EXTREMA = frozenset({"max", "min", "argmax", "argmin"})


def _nonempty_when_run(x: GraphTensor, axes, out: GraphTensor) -> None:
    """For a max the user called over a symbolic dim: require it non-empty when a program computing
    ``out`` runs (``graph.node_requirements``, checked per binding before any work), as torch's
    ``Expected reduction dim 0 to have non-zero size``; not a backend's failure deep in a kernel."""
    op = outermost_op() or "max"
    if op not in _EXTREMA:
        return
    for a in axes:
        n = x.shape[a]
        if not is_static(n):
            msg = (f"{op}: reducing dim {a} of a {shape_str(x.shape)} tensor, which is empty: there is no "
                   f"{'largest' if op.endswith('max') else 'smallest'} value (at {at_line(user_frame())})")
            x.graph.node_requirements.setdefault(out.node.id, []).append((n - 1, msg, IndexError))
            return


@tensor_op("max")
def amax(x: GraphTensor, axis=None, keepdim: bool = False, *, dim=None) -> GraphTensor:
    """Maximum values over axes (numpy / ``torch.amax`` semantics; NaN propagates)."""
    axes = normalize_axes(x, _axis_kw(axis, dim, "max", x), "max")
    _nonempty(x, axes, "max")
    if len(axes) < 2:
        out = _reduce(x, "MaxReduce", axes)
        _nonempty_when_run(x, axes, out)
        return _keep(x, out, axes, keepdim)
    # Several axes: one MaxReduce over them merged into the last axis (a view when they already are
    # contiguous, else a copy), not one per axis. Its gradient then shares among every tie in the
    # reduced set alike, as torch.amax's does; a chain would split it per axis (0.25 / 0.25 / 0.5
    # for three tied maxima of a 2x2 window, not a third each).
    kept = [i for i in range(x.ndim) if i not in axes]
    flat = x.permute(*kept, *axes).reshape(*(x.shape[i] for i in kept), prod(x.shape[a] for a in axes))
    out = prim("MaxReduce", flat, arg=len(kept), shape=flat.shape[:-1])
    _nonempty_when_run(x, axes, out)
    return _keep(x, out, axes, keepdim)


def _reverse_order(x: GraphTensor) -> GraphTensor:
    """An order-reversing bijection, its own inverse: not / -x / ``-1 - x`` (``~x``, which unlike
    ``-x`` does not overflow at the smallest int32)."""
    if x.dtype.kind == "b":
        return logical_not(x)
    return neg(x) if x.dtype.is_float else sub(-1, x)


@tensor_op("min")
def amin(x: GraphTensor, axis=None, keepdim: bool = False, *, dim=None) -> GraphTensor:
    """torch.amin: the smallest values over ``axis`` (all dims by default); NaN propagates.

    Args:
        x: the input tensor.
        axis: the dim or dims to reduce (None: all).
        keepdim: keep the reduced dims as size 1.
        dim: torch's name for ``axis``.
    """
    _nonempty(x, normalize_axes(x, _axis_kw(axis, dim, "min", x), "min"), "min")  # (not amax's "max: ...")
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
    """torch.any: whether any element over ``axis`` is nonzero/True (a bool tensor; False over an empty dim).

    Args:
        x: the input tensor.
        axis: the dim or dims to reduce (None: all).
        keepdim: keep the reduced dims as size 1.
        dim: torch's name for ``axis``.
    """
    b = x if x.dtype.kind == "b" else cast(x, dt.bool_)
    axes = normalize_axes(x, _axis_kw(axis, dim, "any", x), "any", empty_is_all=False)
    if not axes:  # (dim=[]: no dim, as torch's)
        return b
    if any(is_static(x.shape[a]) and x.shape[a] == 0 for a in axes):
        rest = [d for i, d in enumerate(x.shape) if i not in axes]
        return _keep(x, x.graph.constant(False).expand(*rest), axes, keepdim)
    return _amax_or(b, axes, False, keepdim)


@tensor_op("all")
def all_(x: GraphTensor, axis=None, keepdim: bool = False, *, dim=None) -> GraphTensor:
    """torch.all: whether every element over ``axis`` is nonzero/True (a bool tensor; True over an empty dim).

    Args:
        x: the input tensor.
        axis: the dim or dims to reduce (None: all).
        keepdim: keep the reduced dims as size 1.
        dim: torch's name for ``axis``.
    """
    b = x if x.dtype.kind == "b" else cast(x, dt.bool_)
    return logical_not(any_(logical_not(b), axis, keepdim, dim=dim))


@float32_under_autocast
@tensor_op("prod")
def prod_(x: GraphTensor, axis=None, keepdim: bool = False, *, dim=None, dtype=None) -> GraphTensor:
    """torch.prod: the product over ``axis`` (all dims by default), by pairwise halving (exact
    operations, no log/exp); needs static reduced sizes. Bool inputs multiply as int32 (torch's int64).

    Args:
        x: the input tensor.
        axis: the dim or dims to reduce (None: all).
        keepdim: keep the reduced dims as size 1.
        dim: torch's name for ``axis``.
        dtype: cast ``x`` to this dtype first; the result's dtype (torch's ``dtype=``).
    """
    if dtype is not None:
        d = dt.as_dtype(dtype)
        return cast(_prod(cast(x, d), axis, keepdim, dim), d)
    return _prod(x, axis, keepdim, dim)


@_opmath
def _prod(x: GraphTensor, axis, keepdim: bool, dim) -> GraphTensor:
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
    """torch.argmax: the int32 index of the largest value along ``axis`` (of the flattened tensor when None);
    the first index among ties, NaN counting as the largest.

    Args:
        x: the input tensor.
        axis: the dim or dims to reduce (None: all).
        keepdim: keep the reduced dims as size 1.
        dim: torch's name for ``axis``.
    """
    return _arg_extreme(x, _axis_kw(axis, dim, "argmax", x), keepdim, True, "argmax")


@tensor_op("argmin")
@scalar_as_1d("argmin", dims=("axis", "dim"))
def argmin(x: GraphTensor, axis=None, keepdim: bool = False, *, dim=None) -> GraphTensor:
    """torch.argmin: the int32 index of the smallest value along ``axis`` (of the flattened tensor when None);
    the first index among ties, NaN counting as the smallest.

    Args:
        x: the input tensor.
        axis: the dim or dims to reduce (None: all).
        keepdim: keep the reduced dims as size 1.
        dim: torch's name for ``axis``.
    """
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


def softmax_input(op: str, x: GraphTensor, dtype) -> GraphTensor:
    """``x`` cast to the ``dtype`` argument of the softmax family, which must be a float dtype: torch
    refuses an int or bool one, and casting to it first silently truncated the input (softmax then
    computed in float32 from the truncated values)."""
    if dtype is None:
        return x
    d = dt.as_dtype(dtype)
    require(op, d.is_float, f"dtype must be a float dtype, got {d.name}", x)
    return cast(x, d)


@tensor_op("softmax")
@scalar_as_1d("softmax", dims=("axis", "dim"))
def softmax(x: GraphTensor, axis=None, dtype=None, *, dim=None) -> GraphTensor:
    """``exp(x) / sum(exp(x))`` along ``dim`` (``dtype``: cast the input to it first, as torch)."""
    x = softmax_input("softmax", x, dtype)
    z, a = _shifted(x, axis, dim, "softmax")
    if z is None:  # nothing to normalise over
        return _float(x, "softmax")
    e = exp(z)
    return _times_reciprocal(e, sum(e, a, keepdim=True))


@_opmath
def _times_reciprocal(e: GraphTensor, s: GraphTensor) -> GraphTensor:
    """softmax's ``e / s`` as ``e * (1/s)`` in float32 (float16/bfloat16 in float32, rounded once),
    not ``div``'s float64 quotient: ``s``, a sum of ``exp(x - max)`` over the row, is in ``[1, n]``
    (or NaN), so ``1/s`` is a normal float and the product is within about an ulp of the quotient
    (torch's CPU softmax multiplies by the reciprocal too). A float64 quotient cost +10% on a
    256x1024 softmax, +25% forward and backward."""
    return mul(e, prim("Recip", s))


@tensor_op("log_softmax")
@scalar_as_1d("log_softmax", dims=("axis", "dim"))
def log_softmax(x: GraphTensor, axis=None, dtype=None, *, dim=None) -> GraphTensor:
    """``x - logsumexp(x)`` along ``dim`` (``dtype``: cast the input to it first, as torch)."""
    x = softmax_input("log_softmax", x, dtype)
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
def cumsum(x: GraphTensor, axis=None, *, dim=None, dtype=None) -> GraphTensor:
    """``out[i] = sum_{j<=i} x[j]`` by a log-step scan (``_scan``; ``dtype``: cast the input to it
    first, as torch). Bool sums as int32. float32 adds in float64 and float16/bfloat16 in float32,
    rounded once at the end: the scan adds in a tree's order, not torch's left-to-right one, and the
    wider type keeps float32 results correctly rounded, as torch's (which accumulates in double)."""
    a = x._axis(_axis_kw(axis, dim, "cumsum", x), "cumsum")
    if dtype is not None:
        x = cast(x, dtype)
    elif x.dtype.kind == "b":
        x = cast(x, dt.int32)
    (out,) = _scan((cast(x, _wider(x)),), a, _add_pair, (0,), _window_sum)
    return cast(out, x.dtype)  # (over a dim of 1 no step runs: tensor_op gives x a new handle)


def _wider(x: GraphTensor) -> dt.DType:
    """The dtype a float scan runs in: float32's steps in float64, 16-bit ones in float32."""
    return {dt.float32: dt.float64, dt.float16: dt.float32, dt.bfloat16: dt.float32}.get(x.dtype, x.dtype)


def _add_pair(earlier, later):
    return (add(earlier[0], later[0]),)


def _window_sum(xs, a: int):
    """cumsum's (n, n) window: a masked sum (``where``, not a product by the mask: a NaN or inf after
    position ``i`` must not leak into ``out[i]``)."""
    (x,) = xs
    win, _, _, _ = _window(x, a, 0)
    return (_back(sum(win, -1), a, x.ndim),)


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



# value-and-index reductions, scans and sorting ---------------------------------------------------
def _values_indices(name: str) -> type[ValuesIndices]:
    """A ``(values, indices)`` named tuple class called ``name``, as torch's ``torch.return_types.<name>``."""
    doc = f"``{name}``'s result: ``values`` and their int32 ``indices`` (a tuple, as torch's)."
    return type(name, (ValuesIndices,), {"__doc__": doc, "__slots__": ()})


MaxResult, MinResult = _values_indices("max"), _values_indices("min")
CummaxResult, CumminResult = _values_indices("cummax"), _values_indices("cummin")
SortResult, TopkResult = _values_indices("sort"), _values_indices("topk")


def _take(x: GraphTensor, idx: GraphTensor, a: int) -> GraphTensor:
    """``x`` gathered along ``a`` at ``idx`` (of ``x``'s rank): the gradient goes to the picked
    element only, as torch's for values selected by index."""
    return prim("Gather", x, idx, arg=a, shape=idx.shape)


def _value_and_index(x: GraphTensor, dim, keepdim: bool, largest: bool, op: str, result):
    if isinstance(dim, (tuple, list)):
        raise op_error(TypeError, op, f"dim must be an int, got {dim!r} (amax/amin reduce several dims)", x)
    if x.ndim == 0:
        x._axis(dim, op)
        v, i = _value_and_index(x.reshape(1), 0, False, largest, op, result)
        return result(v, i)
    a = x._axis(dim, op)
    idx = _arg_extreme(x, a, True, largest, op)
    values = _take(x, idx, a)
    if not keepdim:
        values, idx = values.squeeze(a), idx.squeeze(a)
    return result(values, idx)


def evenly_shared(x: GraphTensor, value: GraphTensor) -> GraphTensor:
    """``value`` (one element, equal to one of ``x``) as a 0-d tensor whose gradient is shared evenly
    among the elements of ``x`` equal to it, the NaN ones when it is NaN, +0 at the others: torch's
    gradient of ``max()``, ``min()``, ``median()`` and ``nanmedian()`` over all elements
    (``evenly_distribute_backward``; amax's own gradient, which torch.amax keeps, compares
    ``x == value`` and is NaN for a NaN result).

    The rule is a ``Graph.custom_vjp``, so a forward-only program computes ``value`` alone (an
    expression that carried the sharing in its own primitives made ``x.max()`` 51 nodes and 4
    kernels where ``amax`` is 2 and 1, 5x its time). It sits on a Copy of ``value`` whose arg keeps
    it apart from every other node: a rule is keyed by node and the graph builds each expression
    once, so on the reduction itself (or on a user's ``clone()`` of it) it would also change the
    gradient of a user's own ``x.amax()``. The compiler drops a copy of a whole node (a Copy is its
    operand), so ``value`` should be one, of any shape of one element (a median's keepdim Gather: a
    copy read through its squeeze stayed a kernel of its own); the result is reshaped to 0-d after."""
    if not x.dtype.is_float:
        return value.reshape(())
    g = value.graph
    out = g.tensor(g.add("Copy", (value,), "evenly shared", value.dtype, value.shape))

    def rule(out, adjoint, x):
        out, adjoint = out.reshape(()), adjoint.reshape(())
        hit = logical_or(eq(x, out), logical_and(isnan(x), isnan(out)))
        count = sum(cast(hit, dt.int32))
        # a division by the count, as torch's (grad / mask.sum()); where, not a product by the mask:
        # the other elements get +0 whatever the adjoint (inf or NaN included), as torch's masked_fill
        return [where(hit, div(adjoint, count), x.graph.constant(0, x.dtype))]

    return g.custom_vjp(out, [x], rule).reshape(())


@tensor_op("max")
def max_(x: GraphTensor, dim=None, keepdim: bool = False, *, axis=None) -> GraphTensor | ValuesIndices:
    """torch.max: with no dim the largest value (a 0-d tensor), whose gradient is shared evenly
    among the elements equal to it, the NaN ones when it is NaN (torch's; ``amax``'s is NaN then, as
    torch.amax's); with ``dim`` the named tuple ``(values, indices)`` of the maxima along it (the
    first index among ties; NaN is the largest); with a tensor in place of ``dim``, the elementwise
    ``maximum``. ``amax`` gives the values alone (also over several dims).

    Args:
        x: the input.
        dim: the dim to reduce (an int), or another tensor (elementwise maximum).
        keepdim: keep the reduced dim as size 1.
        axis: another name for ``dim``."""
    if isinstance(dim, GraphTensor):
        return maximum(x, dim)
    d = _axis_kw(axis, dim, "max", x)
    if d is None:
        return evenly_shared(x, amax(x))
    return _value_and_index(x, d, keepdim, True, "max", MaxResult)


@tensor_op("min")
def min_(x: GraphTensor, dim=None, keepdim: bool = False, *, axis=None) -> GraphTensor | ValuesIndices:
    """torch.min: with no dim the smallest value (its gradient as ``max()``'s); with ``dim`` the
    named tuple ``(values, indices)`` of the minima along it (first index among ties; NaN is the
    smallest); with a tensor in place of ``dim``, the elementwise ``minimum``. Arguments as ``max``."""
    if isinstance(dim, GraphTensor):
        return minimum(x, dim)
    d = _axis_kw(axis, dim, "min", x)
    if d is None:
        return evenly_shared(x, amin(x))
    return _value_and_index(x, d, keepdim, False, "min", MinResult)


def _var_mean(op: str, x, dim, unbiased, keepdim, axis, correction, root: bool):
    require(op, x.dtype.is_float, f"needs a float tensor, got {x.dtype.name}", x)
    axes, _ = _var_args(op, x, dim, unbiased, axis, correction)
    f = std if root else var
    return f(x, dim, unbiased, keepdim, axis=axis, correction=correction), mean(x, axes, keepdim)


@tensor_op("var_mean")
def var_mean(x: GraphTensor, dim=None, unbiased=None, keepdim: bool = False, *, axis=None,
             correction=None) -> tuple[GraphTensor, GraphTensor]:
    """``(var(x, ...), mean(x, ...))`` over the same dims, as ``torch.var_mean`` (arguments as
    ``var``)."""
    return _var_mean("var_mean", x, dim, unbiased, keepdim, axis, correction, False)


@tensor_op("std_mean")
def std_mean(x: GraphTensor, dim=None, unbiased=None, keepdim: bool = False, *, axis=None,
             correction=None) -> tuple[GraphTensor, GraphTensor]:
    """``(std(x, ...), mean(x, ...))`` over the same dims, as ``torch.std_mean`` (arguments as
    ``var``)."""
    return _var_mean("std_mean", x, dim, unbiased, keepdim, axis, correction, True)


def _lowest(x: GraphTensor):
    """The value below (or equal to) every value of ``x``'s dtype: a masked-out max never wins."""
    if x.dtype.kind == "b":
        return False
    return float("-inf") if x.dtype.is_float else -(2 ** 31)


def _window(x: GraphTensor, a: int, fill):
    """``x`` with ``a`` moved last, spread to ``(..., n_i, n_j)``: ``x[j]`` where ``j <= i``, else
    ``fill``; also the mask and the ``j`` indices (1, n)."""
    xm = x.transpose(a, -1) if a != x.ndim - 1 else x
    n = xm.shape[-1]
    idx = x.graph.arange(n)
    mask = lt(idx.reshape(1, n), add(idx.reshape(n, 1), 1))  # [i, j] = j <= i
    row = xm.unsqueeze(-2)
    return where(mask, row, x.graph.constant(fill, x.dtype)), mask, row, idx.reshape(1, n)


def _back(t: GraphTensor, a: int, ndim: int) -> GraphTensor:
    return t.transpose(a, -1) if a != ndim - 1 else t


def _cum_extreme(x: GraphTensor, dim, largest: bool, op: str, result):
    if x.ndim == 0:
        x._axis(dim, op)
        v, i = _cum_extreme(x.reshape(1), 0, largest, op, result)
        return result(v.reshape(()), i.reshape(()))
    a = x._axis(dim, op)
    if any(is_static(n) and n == 0 for n in x.shape):  # nothing to scan: empty values and int32 indices, as torch
        return result(fresh(x), x.graph.zeros(x.shape, dt.int32))
    v = x if largest else _reverse_order(x)
    v = (cast(v, dt.int32) if v.dtype.kind == "b" else v).detach()  # compared only: values come from x
    n = x.shape[a]
    pos = x.graph.arange(n).reshape(tuple(n if i == a else 1 for i in range(x.ndim))).expand(*x.shape)
    _, idx = _scan((v, pos), a, _later_extreme, (_lowest(v), 0), _window_extreme)
    return result(_take(x, idx, a), idx)


def _later_extreme(earlier, later):
    """cummax's step: the later ``(value, index)`` wins unless its value is smaller (torch's rule: the
    last index among ties; a NaN is the maximum from where it appears on, the last NaN's index)."""
    (ve, ie), (vl, il) = earlier, later
    take = ge(vl, ve)
    if vl.dtype.is_float:
        take = logical_or(take, isnan(vl))
    return where(take, vl, ve), where(take, il, ie)


def _window_extreme(xs, a: int):
    """cummax's (n, n) window over ``(values, indices)``: the prefix maximum, the last position ``j``
    holding it (or a NaN), and the pair at ``j``."""
    v, pos = xs
    win, mask, row, j = _window(v, a, _lowest(v))
    m = amax(win, -1, keepdim=True)
    hit = eq(row, m)
    if v.dtype.is_float:
        hit = logical_or(hit, isnan(row))  # a NaN is the extreme from where it appears on
    last = _back(amax(where(logical_and(mask, hit), j, -1), -1), a, v.ndim)  # the last index among ties
    return _take(v, last, a), _take(pos, last, a)


@tensor_op("cummax")
def cummax(x: GraphTensor, dim: int) -> ValuesIndices:
    """Running maximum along ``dim``: the named tuple ``(values, indices)``, ``indices[i]`` the last
    position ``j <= i`` holding the maximum (torch's tie rule; a NaN stays the maximum from its
    position on). The gradient of ``values[i]`` goes to ``x[indices[i]]``, as torch's.

    Args:
        x: the input.
        dim: the dim to scan."""
    return _cum_extreme(x, dim, True, "cummax", CummaxResult)


@tensor_op("cummin")
def cummin(x: GraphTensor, dim: int) -> ValuesIndices:
    """Running minimum along ``dim``: ``(values, indices)`` as ``cummax``.

    Args:
        x: the input.
        dim: the dim to scan."""
    return _cum_extreme(x, dim, False, "cummin", CumminResult)


@tensor_op("logcumsumexp")
@scalar_as_1d("logcumsumexp", dims=("dim",))
def logcumsumexp(x: GraphTensor, dim: int) -> GraphTensor:
    """``log(cumsum(exp(x)))`` along ``dim``, stably: a log-step scan (``_scan``) whose step is
    ``logaddexp`` (``hi + log1p(exp(lo - hi))``: nothing overflows, -inf is its identity, equal
    infinities give that infinity). Each step rounds, so float32 steps run in float64 and 16-bit ones
    in float32, rounded once at the end (float32 results within about half an ulp, as torch's).

    Args:
        x: the input (int and bool give float32).
        dim: the dim to scan."""
    x = _float(x, "logcumsumexp")
    a = x._axis(dim, "logcumsumexp")
    (out,) = _scan((cast(x, _wider(x)),), a, _logaddexp_pair, (float("-inf"),), _window_logsumexp)
    return cast(out, x.dtype)


def _logaddexp_pair(earlier, later):
    """``log(exp(a) + exp(b))`` as ``hi + log1p(exp(lo - hi))`` (pointwise.logaddexp's formula: the
    gradients are ``sigmoid(a - b)`` and ``sigmoid(b - a)``, 1/2 each at a tie)."""
    a, b = earlier[0], later[0]
    first = ge(a, b)
    hi, lo = where(first, a, b), where(first, b, a)
    same_inf = logical_and(isinf(a), eq(a, b))
    out = add(hi, log1p(exp(where(same_inf, 0.0, sub(lo, hi)))))
    return (where(same_inf, a, out),)


def _window_logsumexp(xs, a: int):
    """logcumsumexp's (n, n) window: a logsumexp over each prefix (entries after ``i`` are -inf)."""
    (x,) = xs
    win, _, _, _ = _window(x, a, float("-inf"))
    return (_back(logsumexp(win, -1), a, x.ndim),)


# inclusive scans ---------------------------------------------------------------------------------
# A scan over a static dim of up to _SCAN_BLOCK**2 takes log2(n) steps of shifted pads (Hillis-Steele):
# O(n log n) work, no (n, n) buffer. A longer or symbolic dim is cut into blocks of _SCAN_BLOCK
# (padded up to a whole number of them), each block scanned so, and the blocks' totals scanned the
# same way (O(n log _SCAN_BLOCK) work: 7 passes over the data rather than 17 at n = 100000). A
# symbolic dim goes _SCAN_LEVELS levels deep, and the last level's totals, ceil(n / 128**2) of them,
# through the op's (m, m) window.
_SCAN_BLOCK = 128
_SCAN_LEVELS = 2


def _shift(t: GraphTensor, a: int, k, fill) -> GraphTensor:
    """``t`` moved ``k`` places later along ``a``: ``fill`` in the first ``k``, the last ``k`` dropped
    (a pad, then a crop: either order is a view; this one keeps a symbolic size from going negative)."""
    lead = [0, 0] * (t.ndim - 1 - a)
    return t.pad(lead + [k, 0], fill).pad(lead + [0, -k], fill)


def _log_scan(xs: tuple, a: int, step, fills) -> tuple:
    """Inclusive scan of the tensors ``xs`` along the static dim ``a``: at step ``k = 1, 2, 4, ...``
    each position combines (``step(earlier, later)``, associative) with the one ``k`` before it
    (``fills``, the identities, before the start)."""
    n = xs[0].shape[a]
    k = 1
    while k < n:
        xs = step(tuple(_shift(t, a, k, f) for t, f in zip(xs, fills)), xs)
        k *= 2
    return xs


def _scan(xs: tuple, a: int, step, fills, window, levels: int = _SCAN_LEVELS) -> tuple:
    """Inclusive scan of the same-shaped tensors ``xs`` along ``a`` (see above); ``window(xs, a)``
    scans a symbolic dim once ``levels`` blocked levels are spent (a static one needs none)."""
    shape = xs[0].shape
    n = shape[a]
    if is_static(n) and n <= _SCAN_BLOCK ** 2:
        return _log_scan(xs, a, step, fills)
    if not is_static(n) and levels <= 0:
        return window(xs, a)
    b = _SCAN_BLOCK
    m = (n + b - 1) // b
    lead = [0, 0] * (len(shape) - 1 - a)
    blocked = shape[:a] + (m, b) + shape[a + 1:]
    inner = _log_scan(tuple(t.pad(lead + [0, m * b - n], f).reshape(blocked) for t, f in zip(xs, fills)),
                      a + 1, step, fills)
    totals = tuple(t._slice_dim(a + 1, b - 1, 1, 1).squeeze(a + 1) for t in inner)
    before = _scan(totals, a, step, fills, window, levels - 1)  # through block i
    before = tuple(_shift(t, a, 1, f).unsqueeze(a + 1).expand(*blocked) for t, f in zip(before, fills))
    out = step(before, inner)
    return tuple(t.reshape(shape[:a] + (m * b,) + shape[a + 1:])._slice_dim(a, 0, n, 1) for t in out)


def _sort(x: GraphTensor, dim: int, descending: bool, op: str):
    """Stable sort by ranks: ``rank_i = #(x_j before x_i) + #(x_j == x_i, j < i)`` over a (n, n)
    comparison (NaN sorts as the largest, as torch), ``perm[rank_i] = i`` by a scatter, and the values
    gathered at ``perm`` (their gradient goes back to the picked elements)."""
    a = x._axis(dim, op)
    k = cast(x, dt.int32) if x.dtype.kind == "b" else x
    km = k.transpose(a, -1) if a != x.ndim - 1 else k
    n = km.shape[-1]
    xi, xj = km.unsqueeze(-1), km.unsqueeze(-2)  # [.., i, j]
    first = gt(xj, xi) if descending else lt(xj, xi)
    same = eq(xj, xi)
    if k.dtype.is_float:
        ni, nj = isnan(xi), isnan(xj)
        first = logical_or(first, logical_and(nj, logical_not(ni)) if descending
                           else logical_and(ni, logical_not(nj)))
        same = logical_or(same, logical_and(ni, nj))
    idx = x.graph.arange(n)
    earlier = lt(idx.reshape(1, n), idx.reshape(n, 1))  # [i, j] = j < i
    rank = sum(logical_or(first, logical_and(same, earlier)), -1)
    src = idx.expand(*rank.shape)
    zeros = x.graph.constant(0, dt.int32).expand(*rank.shape)
    perm = prim("ScatterAdd", zeros, rank, src, arg=rank.ndim - 1, shape=rank.shape)
    perm = _back(perm, a, x.ndim)
    return _take(x, perm, a), perm


@tensor_op("sort")
def sort(x: GraphTensor, dim: int = -1, descending: bool = False, stable: bool = False, *,
         axis=None) -> ValuesIndices:
    """Sort along ``dim``: the named tuple ``(values, indices)``. Always stable (equal values keep
    their order, which is what ``stable=True`` asks of torch); NaN sorts as the largest value. The
    ranks come from an (n, n) comparison of the dim with itself: meant for the short dims users sort.

    Args:
        x: the input.
        dim: the dim to sort along (default the last).
        descending: largest first.
        stable: accepted for torch's signature; the sort is stable either way.
        axis: another name for ``dim``."""
    if axis is not None:
        dim = axis
    if x.ndim == 0:
        x._axis(dim, "sort")
        return SortResult(x, x.graph.constant(0, dt.int32))
    return SortResult(*_sort(x, dim, descending, "sort"))


@tensor_op("argsort")
def argsort(x: GraphTensor, dim: int = -1, descending: bool = False, stable: bool = False) -> GraphTensor:
    """The int32 indices that sort ``x`` along ``dim`` (``sort(...).indices``; stable).

    Args:
        x: the input.
        dim: the dim to sort along (default the last).
        descending: largest first.
        stable: accepted for torch's signature; the sort is stable either way."""
    return sort(x, dim, descending).indices


@tensor_op("msort")
def msort(x: GraphTensor) -> GraphTensor:
    """torch.msort: ``x`` sorted along its first dim, the values alone (``sort(x, 0).values``: stable,
    NaN as the largest value); the gradient goes back to where each value came from.

    Args:
        x: the input (a 0-d one is itself, as torch's)."""
    return sort(x, 0).values


@tensor_op("topk")
def topk(x: GraphTensor, k: int, dim: int = -1, largest: bool = True,
         sorted: bool = True) -> ValuesIndices:  # noqa: A002
    """The ``k`` largest (or smallest) elements along ``dim``: the named tuple ``(values, indices)``,
    in sorted order (also for ``sorted=False``, whose order torch leaves unspecified). ``k`` is a
    static int (over a symbolic dim, the run fails if the dim is below ``k``); among equal values the
    earlier index comes first; NaN counts as the largest.

    Args:
        x: the input.
        k: how many to keep, 0 <= k <= the dim's size.
        dim: the dim to search along (default the last).
        largest: the largest (else the smallest) elements.
        sorted: accepted for torch's signature (the result is sorted either way)."""
    n = x.shape[x._axis(dim, "topk")] if x.ndim else 1
    require("topk", isinstance(k, int) and not isinstance(k, bool), f"k must be an int, got {k!r}", x)
    require("topk", 0 <= k and (not is_static(n) or k <= n), f"k = {k} is out of range for a dim of size {n}",
            x, kind=ValueError)
    values, idx = sort(x, dim, descending=largest)
    if x.ndim == 0:
        return TopkResult(values, idx)
    a = x._axis(dim, "topk")
    return TopkResult(values._slice_dim(a, 0, k, 1), idx._slice_dim(a, 0, k, 1))
