"""Activation functions (torch.nn.functional names), composed from elementwise ops; softmin and the
shrinkage/threshold family (softshrink, hardshrink, tanhshrink, threshold) with torch's values at
NaN and signed zeros and torch's gradients."""

from __future__ import annotations

import math

from luminal.core import dtype as dt
from luminal.core.errors import check_number, op_error
from luminal.frontend.checks import tensor_op
from luminal.frontend.ops.core import cast, require
from luminal.frontend.ops.elementwise import (
    LN2,
    LOG2E,
    _accurate,
    _derivative,
    _div_dd,
    _exp_dd,
    _float,
    _ln_sum,
    _log_parts,
    _not_bool,
    _opmath,
    _poly,
    _two_sum,
    add,
    div,
    erf,
    exp,
    exp2,
    expm1,
    ge,
    gt,
    le,
    log1p,
    logical_and,
    lt,
    minimum,
    mul,
    neg,
    reciprocal,
    sub,
    where,
)
from luminal.frontend.ops.elementwise import tanh_ as _tanh
from luminal.frontend.ops.reduce import softmax, softmax_input
from luminal.frontend.tensor import GraphTensor


@tensor_op("relu")
def relu(x) -> GraphTensor:
    """torch's: NaN stays NaN, -0.0 stays -0.0; the gradient is 0 where x <= 0 and 1 elsewhere (NaN too).
    An int input keeps its dtype; a bool one is refused, as torch's (its result was int32)."""
    _not_bool(x, "relu")
    return where(le(x, 0), where(lt(x, 0), 0, x.detach()), x)


@tensor_op("leaky_relu")
def leaky_relu(x, negative_slope: float = 0.01) -> GraphTensor:
    """torch's ``leaky_relu``: ``x`` where ``x > 0``, else ``negative_slope * x``.

    Args:
        x: the input tensor.
        negative_slope: the slope of the negative side (default 0.01).
    """
    return where(gt(x, 0), x, mul(x, negative_slope))


@tensor_op("sigmoid")
@_opmath
def sigmoid(x) -> GraphTensor:
    """``1/(1+e)`` or ``e/(1+e)`` with ``e = exp(-|x|)`` <= 1: no overflow, so no inf * 0 in the gradient.
    ``-|x|`` is spelled as a ``where`` (not ``abs``, whose derivative at 0 is 0) so sigmoid'(0) = 1/4.
    float64: ``e`` and ``1 + e`` in double-double (``_exp_dd``, ``_two_sum``), the quotient too
    (``_div_dd``), rounded once: within about half an ulp (1.9 ulps off as above); its gradient is
    torch's ``y (1 - y)`` as ``y sigmoid(-x)``, which keeps its digits where ``y`` rounds near 1
    (``1 - y`` is 5e-8 off at x = 20)."""
    x = _float(x, "sigmoid")
    if _accurate(x):
        return _derivative(_sigmoid_f64(x), x, lambda x, y: mul(y, _sigmoid(neg(x))))
    return _sigmoid(x)


def _sigmoid(x: GraphTensor) -> GraphTensor:
    """The plain formula: float32, and the slope of float64's softplus."""
    neg_side = lt(x, 0)
    e = exp(where(neg_side, x, neg(x)))
    r = reciprocal(add(e, 1.0))
    return where(neg_side, mul(e, r), r)


def _sigmoid_f64(x: GraphTensor) -> GraphTensor:
    """float64 sigmoid: ``|x|`` capped at 746 (where ``e**-|x|`` is below half the smallest double)."""
    neg_side = lt(x, 0)
    v, vl = _exp_dd(neg(minimum(where(neg_side, neg(x), x), 746.0)))
    d, dl = _two_sum(1.0, v)
    q, ql = _div_dd(where(neg_side, v, 1.0), where(neg_side, vl, 0.0), d, add(dl, vl))
    return add(q, ql)


@tensor_op("tanh")
def tanh(x) -> GraphTensor:
    """The hyperbolic tangent, elementwise (torch.tanh). Int and bool inputs give float32.

    Args:
        x: the input tensor.
    """
    return _tanh(x)


@tensor_op("gelu")
@_opmath
def gelu(x, approximate: str = "none") -> GraphTensor:
    """torch's ``gelu``: ``x * Phi(x)``, Phi the standard normal CDF, computed as
    ``0.5 * x * (1 + erf(x / sqrt(2)))``; with ``approximate="tanh"`` the tanh approximation
    ``0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x**3)))``. 16-bit inputs compute in float32.

    Args:
        x: the input tensor.
        approximate: ``"none"`` (exact, the default) or ``"tanh"``.
    """
    x = _float(x, "gelu")
    if approximate == "tanh":
        inner = mul(add(x, mul(mul(mul(x, x), x), 0.044715)), math.sqrt(2 / math.pi))
        return mul(mul(x, 0.5), add(_tanh(inner), 1.0))
    if approximate != "none":
        raise op_error(ValueError, "gelu", f"approximate must be 'none' or 'tanh', got {approximate!r}", x)
    return mul(mul(x, 0.5), add(erf(mul(x, 1 / math.sqrt(2))), 1.0))


@tensor_op("silu")
@_opmath
def silu(x) -> GraphTensor:
    """torch's ``silu`` (swish): ``x * sigmoid(x)``.

    Args:
        x: the input tensor.
    """
    return mul(x, sigmoid(x))


@tensor_op("softplus")
@_opmath
def softplus(x, beta: float = 1.0, threshold: float = 20.0) -> GraphTensor:
    """torch's ``softplus``: ``log(1 + exp(beta * x)) / beta``, and ``x`` itself where
    ``beta * x > threshold`` (linear there, as torch, so that exp cannot overflow). ``log1p``, as
    torch's: ``log(1 + e)`` rounds ``1 + e`` and lost the tail (0 below ``beta * x`` = -17 in float32,
    17% off at -15; mish, built on it, too).

    Args:
        x: the input tensor.
        beta: the sharpness (default 1).
        threshold: above this value of ``beta * x`` the result is ``x`` (default 20).
    """
    check_number("softplus", "beta", beta, x)
    check_number("softplus", "threshold", threshold, x)
    x = _float(x, "softplus")
    bx = mul(x, beta)
    linear = gt(bx, threshold)
    # the log branch never sees the linear region's inputs: exp(bx) overflowing there would make its
    # (unselected) gradient inf * 0 = NaN
    z = where(linear, 0.0, bx)
    # (its slope sigmoid(z), not the chain's e/(1+e), whose own derivative cancels: 9% off at z = 15)
    return where(linear, x, _derivative(_softplus_core(z, beta), z, lambda z, y: div(_sigmoid(z), beta)))


def _softplus_core(z: GraphTensor, beta: float = 1.0) -> GraphTensor:
    """``log(1 + e**z) / beta``; float64: ``_softplus_f64``; float32 as ``(max(z, 0) + log1p(e**-|z|)) /
    beta`` in float64, rounded once: within half an ulp (and a hair), where ``log1p(exp(z))`` in float32
    was 1.35 ulps off (and the division by ``beta`` another rounding). One exp2 and one division
    (``_log1p_unit``): ``log1p(exp(z))`` took float32's exp, then log1p's float64 log (an exact
    reduction) and a second division, 7 times exp's time."""
    if _accurate(z):
        return div(_softplus_f64(z), beta)
    zd = cast(z, dt.float64)
    pos = gt(zd, 0)
    t = exp2(mul(where(pos, neg(zd), zd), LOG2E))  # e**-|z| in (0, 1]; 0 at -inf, NaN at NaN
    return cast(div(add(where(pos, zd, 0.0), _log1p_unit(t)), beta), z.dtype)


_LOG1P_ATANH = tuple(2 / (2 * k + 3) for k in range(6))  # log1p(w) = 2s + s z R(z), R to z**5
_SQRT2_M1 = math.sqrt(2) - 1


def _log1p_unit(t: GraphTensor) -> GraphTensor:
    """float64 ``log1p(t)`` for ``t`` in [0, 1] (NaN stays NaN), within 2**-39 relative: above
    sqrt(2) - 1 as ``ln 2 + log1p((t - 1) / 2)``, so that ``w`` is in [-0.293, 0.415]; then ``log1p(w)
    = 2 atanh(s)``, ``s = w / (2 + w)`` (``|s| <= 0.1716``), by the series ``2s + s z R(z)``, ``z =
    s**2``, to ``z**6`` (the rest is below 2**-39 of the result). Every step is relative to ``t``:
    a tiny ``t`` gives ``t`` (no ``1 + t`` rounded), and nothing cancels. For compositions rounded
    to float32 or narrower (softplus, logsigmoid); no reduction by the exponent (no log2)."""
    big = gt(t, _SQRT2_M1)
    w = where(big, mul(sub(t, 1.0), 0.5), t)
    s = mul(w, reciprocal(add(w, 2.0)))
    z = mul(s, s)
    lg = add(mul(s, 2.0), mul(mul(s, z), _poly(z, _LOG1P_ATANH)))
    return where(big, add(lg, LN2), lg)


def _softplus_f64(z: GraphTensor) -> GraphTensor:
    """float64 ``log(1 + e**z)`` as ``max(z, 0) + log1p(e**-|z|)``, ``e**-|z|`` in double-double
    (``_exp_dd``), ``1 +`` it exactly (``_two_sum``), its log by ``_log_parts`` plus the rest over
    ``u`` (as ``log1p``; below 2**-20 the series), summed with ``max(z, 0)`` exactly, rounded once:
    within about half an ulp, where ``log1p(exp(z))`` was 2.6 ulps off."""
    pos = gt(z, 0)
    v, vl = _exp_dd(neg(minimum(where(pos, z, neg(z)), 746.0)))
    u, c = _two_sum(1.0, v)
    k, hi, lo, _ = _log_parts(u)
    w, wl = _ln_sum(k, hi, add(lo, div(add(c, vl), u)))
    # below 2**-20, log1p(v + vl) by its series (exact to 2**-80): there log(u) and c / u cancel (u is 1 +
    # an ulp or two for |z| near 36.5: 0.99 ulps off, the sum w + wl rounded twice)
    tiny = lt(v, 2.0 ** -20)
    w, wl = where(tiny, v, w), where(tiny, add(vl, mul(mul(v, v), sub(mul(v, 1 / 3), 0.5))), wl)
    s, sl = _two_sum(where(pos, z, 0.0), w)
    return add(s, add(sl, wl))


@tensor_op("elu")
def elu(x, alpha: float = 1.0) -> GraphTensor:
    """torch's ``elu``: ``x`` where ``x > 0``, else ``alpha * (exp(x) - 1)``.

    Args:
        x: the input tensor.
        alpha: the scale of the negative side (default 1).
    """
    check_number("elu", "alpha", alpha, x)
    return scaled_elu(_float(x, "elu"), alpha)


@_opmath
def scaled_elu(x: GraphTensor, alpha: float, scale: float = 1.0, input_scale: float = 1.0) -> GraphTensor:
    """torch's elu kernel, which ``elu``, ``celu`` (``input_scale = 1 / alpha``) and ``selu`` (its
    ``scale``) share: ``scale * x`` where ``x > 0``, else ``scale * alpha * expm1(input_scale * x)``.

    The gradient is torch's formula (``Graph.custom_vjp``), not the composition's: at 0 (either
    sign) it is the ``x <= 0`` side's slope ``scale * alpha * input_scale``, whose own derivative
    (the second derivative) is 0 there, as torch's double backward (it masks ``x < 0``; the
    composition gave ``scale * alpha * input_scale**2``). At NaN both are NaN (torch's kernels differ
    there). The slope is ``exp``, not expm1's ``y + 1``, which cancels (1.7e-4 off at x = -30,
    float64 too).
    """
    pos = gt(x, 0)
    # expm1 only of the negative side: exp(x) overflowing for large x would make the gradient NaN; and
    # expm1, not exp(x) - 1, which cancels near 0 (1% off at -1e-6 in float32) and loses -0.0's sign
    neg_side = mul(expm1(mul(where(pos, 0.0, x), input_scale)), alpha * scale)
    out = where(pos, x if scale == 1 else mul(x, scale), neg_side)

    def slope(x, _):
        # the exp reads 0, a constant, at x >= 0 (so the slope's derivative at 0 is 0, as torch's; and no
        # overflow on the other side), and x itself below 0 and at NaN
        bent = exp(mul(where(ge(x, 0), 0.0, x), input_scale))
        return where(gt(x, 0), x.graph.constant(scale, x.dtype), mul(bent, alpha * scale * input_scale))

    return _derivative(out, x, slope)


@tensor_op("mish")
@_opmath
def mish(x) -> GraphTensor:
    """torch's ``mish``: ``x * tanh(softplus(x))``.

    float32 (and the 16-bit types): ``x n / (n + 2)``, ``n = e (e + 2)``, ``e = exp(x)``, in float64
    (tanh(log(1 + e)) is ((1 + e)**2 - 1) / ((1 + e)**2 + 1)), rounded once: within half an ulp (and
    a hair), no term cancels; ``x`` itself above 20 (where the factor is 1 within 2**-56). One exp
    and one division where softplus and tanh took two exps, a log and three divisions. The gradient
    is torch's, ``t + x sigmoid(x) (1 - t**2)`` (``t`` the factor), as ``t + 4 x e (e + 1) / (n + 2)**2``.
    float64 keeps ``x tanh(softplus(x))`` (each within about an ulp).

    Args:
        x: the input tensor.
    """
    x = _float(x, "mish")
    if _accurate(x):
        return mul(x, _tanh(softplus(x)))
    xd = cast(x, dt.float64)
    linear = gt(xd, 20.0)
    e = exp2(mul(where(linear, 0.0, xd), LOG2E))  # (0 at -inf: -inf * 0 is NaN there, as torch's)
    n = mul(e, add(e, 2.0))
    out = where(linear, xd, mul(xd, mul(n, reciprocal(add(n, 2.0)))))

    def slope(x, _):
        xd = cast(x, dt.float64)
        linear = gt(xd, 20.0)
        e = exp2(mul(where(linear, 0.0, xd), LOG2E))
        n = mul(e, add(e, 2.0))
        r = reciprocal(add(n, 2.0))
        bend = mul(mul(mul(xd, e), add(e, 1.0)), mul(mul(r, r), 4.0))
        # (1 + x * 0 above 20: NaN at +inf, as torch's t + x sigmoid(x) (1 - t**2) = 1 + inf * 0)
        return cast(where(linear, add(mul(xd, 0.0), 1.0), add(mul(n, r), bend)), x.dtype)

    return _derivative(cast(out, x.dtype), x, slope)


def _logsigmoid(x: GraphTensor) -> GraphTensor:
    """``log(sigmoid(x))`` of a float ``x`` (``nn.functional.logsigmoid``'s body). float32: ``-softplus(-x)``
    (``_softplus_core``: in float64, rounded once, within half an ulp), the slope torch's sigmoid(-x);
    float64: ``min(x, 0) - log1p(exp(-|x|))``, each within about an ulp."""
    if not _accurate(x):
        return _derivative(neg(_softplus_core(neg(x))), x, lambda x, y: _sigmoid(neg(x)))
    neg_side = lt(x, 0)
    return sub(where(neg_side, x, 0.0), log1p(exp(where(neg_side, x, neg(x)))))


@tensor_op("softmin")
@tensor_op("softmin")
def softmin(x, dim: int, dtype=None) -> GraphTensor:
    """torch's ``F.softmin``: ``softmax(-x)`` along ``dim`` (``dtype``: cast the input to it first);
    ``lm.softmin`` (torch has only the functional; ``F.softmin`` also takes torch's implicit dim).

    Args:
        x: the input tensor.
        dim: the dim normalised.
        dtype: the dtype to compute in.
    """
    return softmax(neg(_float(softmax_input("softmin", x, dtype), "softmin")), dim)


def _lambd(op: str, x, lambd, nonnegative: bool):
    require(op, x.dtype.is_float, f"needs a float tensor, got {x.dtype.name}", x)
    check_number(op, "lambd", lambd, x)
    if nonnegative and not lambd >= 0:
        raise op_error(ValueError, op, f"lambd must be >= 0, got {lambd!r}", x)


@tensor_op("softshrink")
def softshrink(x, lambd: float = 0.5) -> GraphTensor:
    """torch's ``F.softshrink``: ``x - lambd`` above ``lambd``, ``x + lambd`` below ``-lambd``, and
    ``x * 0`` between (a zero of ``x``'s sign, as torch's kernel; NaN stays NaN). The gradient is 1
    outside ``[-lambd, lambd]`` (NaN included) and 0 inside, as torch's.

    Args:
        x: a float tensor.
        lambd: the half-width of the zeroed band (>= 0).
    """
    _lambd("softshrink", x, lambd, True)
    inside = logical_and(ge(x, -lambd), le(x, lambd))
    return where(inside, mul(x, 0.0), where(gt(x, lambd), sub(x, lambd), add(x, lambd)))


@tensor_op("hardshrink")
def hardshrink(x, lambd: float = 0.5) -> GraphTensor:
    """torch.hardshrink: ``x`` outside ``[-lambd, lambd]`` (NaN included), +0 inside; the gradient 1
    outside and 0 inside, as torch's.

    Args:
        x: a float tensor.
        lambd: the half-width of the zeroed band.
    """
    _lambd("hardshrink", x, lambd, False)
    return where(logical_and(ge(x, -lambd), le(x, lambd)), 0.0, x)


@tensor_op("tanhshrink")
@_opmath
def tanhshrink(x) -> GraphTensor:
    """torch's ``F.tanhshrink``: ``x - tanh(x)`` (int and bool inputs give float32). Computed as torch
    does, so it cancels near 0 as torch's does.

    Args:
        x: the input tensor.
    """
    x = _float(x, "tanhshrink")
    return sub(x, _tanh(x))


@tensor_op("threshold")
def threshold(x, threshold: float, value: float) -> GraphTensor:
    """torch.threshold: ``x`` where ``x > threshold`` (NaN included), else ``value`` (in ``x``'s
    dtype); the gradient is 1 where ``x`` is kept, as torch's.

    Args:
        x: the input tensor.
        threshold: the value ``x`` must exceed to be kept.
        value: the replacement.
    """
    check_number("threshold", "threshold", threshold, x)
    check_number("threshold", "value", value, x)
    return where(le(x, threshold), x.graph.constant(value, x.dtype), x)
