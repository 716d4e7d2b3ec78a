"""torch's special functions built on ``elementwise.py``'s: logit, xlogy, erfc, and the gamma
function's lgamma, digamma and polygamma.

Each has torch's value at the edges (0, 1, infinities, NaN) and torch's gradient (``Graph.custom_vjp``),
including where the formula as written would differentiate to something else: ``xlogy``'s gradient by
``input`` at ``input == 0`` is ``log(other)``, not the 0 a ``where`` would give.
"""

from __future__ import annotations

import math

from luminal.core import dtype as dt
from luminal.core.errors import check_number, op_error, renamed
from luminal.frontend.checks import tensor_op
from luminal.frontend.ops.core import cast, coerce
from luminal.frontend.ops.elementwise import (
    _derivative,
    _erfcx64,
    _float,
    _opmath,
    abs_,
    add,
    div,
    eq,
    erf,
    exp,
    floor,
    gt,
    isinf,
    isnan,
    le,
    log,
    logical_and,
    logical_not,
    logical_or,
    lt,
    maximum,
    minimum,
    mul,
    neg,
    round_,
    sin,
    sub,
    tan,
    where,
)
from luminal.frontend.tensor import GraphTensor


@tensor_op("logit")
@_opmath
def logit(input, eps: float | None = None) -> GraphTensor:  # noqa: A002 - torch's names
    """torch.logit: ``log(z / (1 - z))`` with ``z = input`` clamped to ``[eps, 1 - eps]`` when ``eps`` is
    given (None or a negative ``eps``: no clamp, so ``logit(0)`` is -inf and inputs outside [0, 1] NaN).
    The gradient is torch's: ``1 / (x (1 - x))`` (+inf at 0 and 1), NaN outside [0, 1] without ``eps``, 0
    where the clamp holds ``x`` (strictly outside ``[eps, 1 - eps]``) with it. Int and bool inputs give
    float32.

    Args:
        input: a tensor.
        eps: the clamp's distance from 0 and 1 (default None: no clamp).
    """
    x = _float(input, "logit")
    ends = logical_or(eq(x, 0.0), eq(x, 1.0))  # (+inf there, as torch's, also at -0.0)
    slope = lambda x, y: where(ends, math.inf, div(1.0, mul(x, sub(1.0, x))))  # noqa: E731
    if eps is not None and check_number("logit", "eps", eps, x) >= 0:
        lo, hi = float(eps), 1.0 - float(eps)
        below, above = lt(x, lo), gt(x, hi)  # (as torch: x < lo gives lo first, also when lo > hi)
        z = where(below, lo, where(above, hi, x))
        held = logical_or(below, above)
        rule = lambda x, y: where(held, 0.0, slope(x, y))  # noqa: E731
    else:
        z = x
        outside = logical_or(lt(x, 0.0), gt(x, 1.0))
        rule = lambda x, y: where(outside, math.nan, slope(x, y))  # noqa: E731
    return _derivative(log(div(z, sub(1.0, z))), x, rule)


def _xlogy(x: GraphTensor, y: GraphTensor) -> GraphTensor:
    """``x * log(y)``, 0 where ``x == 0`` unless ``y`` is NaN (same-shape float operands)."""
    zero = logical_and(eq(x, 0), logical_not(isnan(y)))
    return where(zero, 0.0, mul(x, log(where(zero, 1.0, y))))


@_opmath
def xlogy(input, other) -> GraphTensor:  # noqa: A002 - torch's names
    """torch.xlogy (``torch.special.xlogy``): ``input * log(other)``, and 0 where ``input`` is 0 (also for
    ``other`` 0 or inf) unless ``other`` is NaN. Operands broadcast and promote, int and bool ones to
    float32. The gradients are torch's: by ``input`` ``log(other)`` (0 where ``input == 0`` and
    ``other <= 0``), by ``other`` ``input / other`` (NaN at ``0 / 0``, as torch's).

    Args:
        input: a tensor, or a number with ``other`` a tensor.
        other: a tensor or a number.
    """
    x, y = coerce("xlogy", input, other, min_kind="f")
    out = _xlogy(x, y)

    def rule(_, a, x, y):
        by_x = where(logical_and(eq(x, 0), le(y, 0)), 0.0, _xlogy(a, y))
        return [by_x, div(mul(a, x), y)]

    return x.graph.custom_vjp(out, [x, y], rule)


_CF_TERMS = 16  # erfc's continued fraction past 6: 16 terms are exact to float64 rounding there


@tensor_op("erfc")
def erfc(input) -> GraphTensor:  # noqa: A002 - torch's names
    """torch.erfc (``torch.special.erfc``): ``1 - erf(x)``, to the input dtype's relative precision also
    in the tail where ``1 - erf`` would round to 0 (``erfc(5)`` is 1.5e-12, ``erfc(9)`` 4.1e-37). Computed
    in float64 and rounded once: ``1 - erf`` below 0.5 in magnitude, ``erfc(a) exp(a**2)`` from
    ``erf``'s Chebyshev expansion times ``exp(-a**2)`` on [0.5, 6], Laplace's continued fraction past 6,
    and ``2 - erfc(-x)`` for negative ``x``. The gradient is torch's ``-2/sqrt(pi) exp(-x**2)``. Int
    and bool inputs give float32.

    Args:
        input: a tensor.
    """
    x = _float(input, "erfc")
    w = cast(x, dt.float64)
    neg_side = lt(w, 0.0)
    a = where(neg_side, neg(w), w)
    gauss = exp(neg(mul(a, a)))
    mid = mul(_erfcx64(minimum(maximum(a, 0.5), 6.0)), gauss)
    far = maximum(a, 6.0)
    f = far
    for k in range(_CF_TERMS, 0, -1):
        f = add(far, div(k / 2, f))
    tail = where(le(a, 6.0), mid, div(gauss, mul(f, math.sqrt(math.pi))))
    out = where(lt(a, 0.5), sub(1.0, erf(w)), where(neg_side, sub(2.0, tail), tail))
    out = _derivative(out, w, lambda w, y: mul(exp(neg(mul(w, w))), -2 / math.sqrt(math.pi)))
    return cast(out, x.dtype)


# the gamma function's logarithm and derivatives: each in float64 and rounded once, from the
# recurrence up to z >= 10 (10 fixed steps, folded into one product or sum) and the asymptotic
# (Stirling) series there, whose next term is below 1e-16; below 0.5 the reflection formulas, with
# sin(pi x) and tan(pi x) of the exactly reduced x - round(x), so a pole is a pole ------------------
_SHIFT = 10
_STIRLING = (1 / 12, -1 / 360, 1 / 1260, -1 / 1680, 1 / 1188, -691 / 360360, 1 / 156)  # z**-1, z**-3, ...
_DIGAMMA = (1 / 12, -1 / 120, 1 / 252, -1 / 240, 1 / 132, -691 / 32760, 1 / 12)  # B2k / 2k: z**-2, z**-4, ...
_TRIGAMMA = (1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6)  # B2k: z**-3, z**-5, ...


def _odd_series(coefs, inv, first):
    """``sum c_k inv**(first + 2k)`` by Horner's rule in ``inv**2``."""
    inv2, acc = mul(inv, inv), None
    for c in reversed(coefs):
        acc = c if acc is None else add(mul(acc, inv2), c)
    return mul(acc, _power(inv, first))


def _power(v, n: int):
    out = v
    for _ in range(n - 1):
        out = mul(out, v)
    return out


def _shifted(z, term, combine):
    """``(z', small, steps)``: ``z + 10`` where ``z < 10`` (``small``), else ``z``; and the recurrence's
    ten steps ``term(z + k)``, k = 0..9, folded by ``combine`` (``mul`` for lgamma's product, ``add``
    for digamma's and trigamma's sums)."""
    small = lt(z, float(_SHIFT))
    steps = term(z)
    for k in range(1, _SHIFT):
        steps = combine(steps, term(add(z, float(k))))
    return where(small, add(z, float(_SHIFT)), z), small, steps


def _reflected(w):
    """``(z, refl, r)``: ``z = 1 - w`` where ``w < 0.5`` (``refl``), else ``w``; ``r = w - round(w)``,
    exact, in [-1/2, 1/2] (``sin(pi w) = +-sin(pi r)``, ``tan(pi w) = tan(pi r)``)."""
    refl = lt(w, 0.5)
    return where(refl, sub(1.0, w), w), refl, sub(w, round_(w))


def _pole(w):
    """Non-positive integers (the poles of gamma): -inf and NaN count as neither."""
    return logical_and(le(w, 0.0), logical_and(eq(w, floor(w)), logical_not(isinf(w))))


def _lgamma64(w):
    z, refl, r = _reflected(w)
    zs, small, prod = _shifted(z, lambda v: v, mul)
    inv = div(1.0, zs)
    big = add(sub(mul(sub(zs, 0.5), log(zs)), zs), 0.5 * math.log(2 * math.pi))
    at_z = sub(add(big, _odd_series(_STIRLING, inv, 1)), where(small, log(where(small, prod, 1.0)), 0.0))
    sin_pi = abs_(sin(mul(r, math.pi)))
    at_w = where(refl, sub(log(div(math.pi, where(_pole(w), 1.0, sin_pi))), at_z), at_z)
    at_w = where(logical_or(eq(w, 1.0), eq(w, 2.0)), 0.0, at_w)  # (exact zeros: the series leaves 4e-15)
    return where(logical_or(_pole(w), isinf(w)), math.inf, at_w)


def _digamma64(w):
    z, refl, r = _reflected(w)
    zs, small, recip = _shifted(z, lambda v: div(1.0, v), add)
    inv = div(1.0, zs)
    at_z = sub(sub(sub(log(zs), mul(inv, 0.5)), _odd_series(_DIGAMMA, inv, 2)), where(small, recip, 0.0))
    cot = div(math.pi, tan(mul(where(eq(r, 0.0), 0.5, r), math.pi)))
    out = where(refl, sub(at_z, cot), at_z)
    # torch's: -inf at +0, +inf at -0 (the limits from the right and the left), NaN at the other poles
    # and at -inf, +inf at +inf
    zero = eq(w, 0.0)
    signed = where(lt(div(1.0, where(zero, w, 1.0)), 0.0), math.inf, -math.inf)
    out = where(_pole(w), math.nan, where(isinf(w), where(gt(w, 0.0), math.inf, math.nan), out))
    return where(zero, signed, out)


def _trigamma64(w):
    z, refl, r = _reflected(w)
    zs, small, sq = _shifted(z, lambda v: div(1.0, mul(v, v)), add)
    inv = div(1.0, zs)
    at_z = add(add(add(inv, mul(mul(inv, inv), 0.5)), _odd_series(_TRIGAMMA, inv, 3)), where(small, sq, 0.0))
    s = sin(mul(r, math.pi))
    out = where(refl, sub(div(math.pi**2, mul(s, s)), at_z), at_z)  # (a pole: pi**2 / 0 = inf)
    return where(isinf(w), where(gt(w, 0.0), 0.0, math.nan), out)


def _gamma_family(op: str, x, f64, slope):
    x = _float(x, op)
    w = cast(x, dt.float64)
    out = f64(w) if slope is None else _derivative(f64(w), w, lambda w, y: slope(w))
    return cast(out, x.dtype)


@tensor_op("lgamma")
def lgamma(input) -> GraphTensor:  # noqa: A002 - torch's names
    """torch.lgamma (``torch.special.gammaln``): ``log |gamma(x)|``; +inf at the poles (0, -1, -2, ...)
    and at +-inf. Computed in float64 and rounded once (recurrence to 10, Stirling's series, reflection
    below 1/2): relative error near 1e-15, absolute near 1e-14 close to lgamma's zeros at 1 and 2. The
    gradient is ``digamma(x)``, as torch's. Int and bool inputs give float32.

    Args:
        input: a tensor.
    """
    return _gamma_family("lgamma", input, _lgamma64, _digamma_vjp)


def _digamma_vjp(w):
    """digamma in float64 with trigamma as its own gradient (so ``lgamma`` differentiates twice)."""
    return _derivative(_digamma64(w), w, lambda w, y: _trigamma64(w))


@tensor_op("digamma")
def digamma(input) -> GraphTensor:  # noqa: A002 - torch's names
    """torch.digamma (``torch.special.digamma``, ``psi``): the derivative of ``lgamma``; torch's values at
    the poles: -inf at +0, +inf at -0, NaN at -1, -2, ...; +inf at +inf, NaN at -inf. The gradient is
    ``polygamma(1, x)``. Computed in float64 and rounded once. Int and bool inputs give float32.

    Args:
        input: a tensor.
    """
    return _gamma_family("digamma", input, _digamma64, _trigamma64)


def polygamma(n: int, input) -> GraphTensor:  # noqa: A002 - torch's names
    """torch.polygamma: the ``n``-th derivative of ``digamma``, for ``n`` 0 (digamma) and 1 (trigamma:
    ``pi**2 / sin(pi x)**2 - trigamma(1 - x)`` below 1/2; 0 at +inf, NaN at -inf). Higher orders are
    not provided (an error). Computed in float64 and rounded once; trigamma's gradient is that of its
    formula.

    Args:
        n: the order, 0 or 1.
        input: a tensor.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise op_error(ValueError, "polygamma", f"n must be an int >= 0, got {n!r}", input)
    if n == 0:
        with renamed("polygamma"):
            return digamma(input)
    if n > 1:
        raise op_error(NotImplementedError, "polygamma", f"order n = {n} is not provided (only 0 and 1)", input)
    with renamed("polygamma"):
        return _gamma_family("polygamma", input, _trigamma64, None)


def polygamma_method(input, n: int) -> GraphTensor:  # noqa: A002 - torch's names
    """torch ``Tensor.polygamma(n)``: ``polygamma(n, self)`` (the order comes second on the method).

    Args:
        input: the tensor.
        n: the order, 0 or 1.
    """
    return polygamma(n, input)
