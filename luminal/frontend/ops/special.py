"""torch's special functions built on ``elementwise.py``'s: logit, xlogy, xlog1py, entr, erfc, erfcx,
erfinv, the normal distribution's ndtr, ndtri and log_ndtr, the Bessel functions i0, i0e, i1 and i1e,
and the gamma function's lgamma, digamma, polygamma (any order up to 150) and multigammaln. Most
compute in float64 and round once. ``luminal/special.py`` gathers them under torch.special's names.

Each has torch's value at the edges (0, 1, infinities, NaN) and torch's gradient (``Graph.custom_vjp``),
including where the formula as written would differentiate to something else: ``xlogy``'s gradient by
``input`` at ``input == 0`` is ``log(other)``, not the 0 a ``where`` would give.
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction

from luminal.core import dtype as dt
from luminal.core.errors import check_int, check_number, op_error, renamed
from luminal.frontend.checks import tensor_op
from luminal.frontend.ops.core import cast, coerce
from luminal.frontend.ops.elementwise import (
    _derivative,
    _erf64,
    _erfcx64,
    _float,
    _neg_side,
    _opmath,
    _poly,
    abs_,
    add,
    div,
    eq,
    erf,
    exp,
    floor,
    ge,
    gt,
    isinf,
    isnan,
    le,
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
    round_,
    sign,
    sin,
    sqrt,
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


def _xlog1py(x: GraphTensor, y: GraphTensor) -> GraphTensor:
    """``x * log1p(y)``, 0 where ``x == 0`` unless ``y`` is NaN (same-shape float operands)."""
    zero = logical_and(eq(x, 0), logical_not(isnan(y)))
    return where(zero, 0.0, mul(x, log1p(where(zero, 0.0, y))))


@_opmath
def xlog1py(input, other) -> GraphTensor:  # noqa: A002 - torch's names
    """torch.special.xlog1py: ``input * log1p(other)``, and 0 where ``input`` is 0 (also for ``other``
    -1 or inf) unless ``other`` is NaN; as ``xlogy``, with ``log1p`` accurate for small ``other``.
    Operands broadcast and promote, int and bool ones to float32. The gradients are torch's: by
    ``input`` ``log1p(other)`` (0 where ``input == 0`` and ``other <= -1``), by ``other``
    ``input / (1 + other)``.

    Args:
        input: a tensor, or a number with ``other`` a tensor.
        other: a tensor or a number.
    """
    x, y = coerce("xlog1py", input, other, min_kind="f")
    out = _xlog1py(x, y)

    def rule(_, a, x, y):
        by_x = where(logical_and(eq(x, 0), le(y, -1)), 0.0, _xlog1py(a, y))
        return [by_x, div(mul(a, x), add(y, 1.0))]

    return x.graph.custom_vjp(out, [x, y], rule)


@tensor_op("entr")
def entr(input) -> GraphTensor:  # noqa: A002 - torch's names
    """torch.special.entr: the elementwise entropy ``-x log(x)``; 0 at 0, -inf for negative ``x`` and at
    +inf, NaN at NaN. The gradient is torch's ``-(1 + log(x))``: +inf at 0, NaN below it. Computed in
    the input's dtype (16-bit ones in float32); int and bool inputs give float32.

    Args:
        input: a tensor.
    """
    x = _float(input, "entr")
    return _entr(x)


@_opmath
def _entr(x):
    pos = gt(x, 0.0)
    value = neg(mul(x, log(where(pos, x, 1.0))))
    out = where(pos, value, where(eq(x, 0.0), 0.0, where(lt(x, 0.0), -math.inf, x)))  # (NaN stays NaN)
    return _derivative(out, x, lambda x, y: neg(add(log(x), 1.0)))


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
    tail = mul(_erfcx_big(a), exp(neg(mul(a, a))))
    out = where(lt(a, 0.5), sub(1.0, erf(w)), where(neg_side, sub(2.0, tail), tail))
    out = _derivative(out, w, lambda w, y: mul(exp(neg(mul(w, w))), -2 / math.sqrt(math.pi)))
    return cast(out, x.dtype)


def _erfcx_big(a):
    """``erfc(a) exp(a**2)`` for float64 ``a >= 0.5``: ``_erfcx64``'s Chebyshev expansion up to 6,
    Laplace's continued fraction past it (0 at +inf)."""
    far = maximum(a, 6.0)
    f = far
    for k in range(_CF_TERMS, 0, -1):
        f = add(far, div(k / 2, f))
    return where(le(a, 6.0), _erfcx64(minimum(maximum(a, 0.5), 6.0)), div(1.0 / math.sqrt(math.pi), f))


def _erfcx_nonneg(a):
    """``erfc(a) exp(a**2)`` for float64 ``a >= 0``: ``(1 - erf(a)) exp(a**2)`` below 0.5."""
    small = lt(a, 0.5)
    near = where(small, a, 0.0)
    return where(small, mul(sub(1.0, _erf64(near)), exp(mul(near, near))), _erfcx_big(a))


# erf's inverse: Giles' single-precision approximation as the first guess ("Approximating the erfinv
# function", GPU Computing Gems, 2011: relative error below 1e-7 to 1 - |x| = 1e-7), the asymptotic
# tail beyond it, then two of Halley's steps in float64 (cubic: 1e-7 becomes 1e-21) ------------------
_GILES_CENTRAL = (1.50140941, 0.246640727, -0.00417768164, -0.00125372503, 0.00021858087, -4.39150654e-06,
                  -3.5233877e-06, 3.43273939e-07, 2.81022636e-08)  # w - 2.5, w < 5
_GILES_TAIL = (2.83297682, 1.00167406, 0.00943887047, -0.0076224613, 0.00573950773, -0.00367342844,
               0.00134934322, 0.000100950558, -0.000200214257)  # sqrt(w) - 3, w >= 5
_GILES_END = 16.0  # w past which the asymptotic guess is the better one (1 - |x| below 6e-8)


def _erfinv_nonneg(a, q):
    """``y >= 0`` with ``erf(y) = a`` and ``erfc(y) = q`` (float64, ``0 <= a < 1``, ``q = 1 - a``): ``a``
    must be exact where ``a < 0.5`` and ``q`` where ``a >= 0.5`` (``1 - a`` is, there), so that
    ``erfinv`` and ``ndtri`` (which knows ``q`` exactly in the tail) share it. The residual of each step
    is ``erf(y) - a`` in the centre and ``q - erfc(y)`` in the tail, written ``(q exp(y**2) - erfcx(y))
    exp(-y**2)`` with ``q exp(y**2) = exp(log q + y**2)``: relative to ``q`` down to the smallest
    subnormal, where ``erfc`` and ``exp(-y**2)`` would underflow. Accurate to a few float64 ulps."""
    w = neg(log(mul(q, sub(2.0, q))))  # -log(1 - a**2)
    giles = mul(where(lt(w, 5.0), _poly(sub(w, 2.5), _GILES_CENTRAL),
                      _poly(sub(sqrt(maximum(w, 5.0)), 3.0), _GILES_TAIL)), a)
    # erfc(y) ~ exp(-y**2) / (y sqrt(pi)) (1 - 1/(2 y**2)): y**2 = L - log(y sqrt(pi)) + log(1 - 1/(2 y**2))
    big = ge(w, _GILES_END)
    L = where(big, neg(log(q)), _GILES_END)
    y = sqrt(L)
    for _ in range(3):
        y = sqrt(add(sub(L, log(mul(y, math.sqrt(math.pi)))), log1p(div(-0.5, mul(y, y)))))
    y = where(big, y, giles)
    centre, log_q = lt(a, 0.5), log(q)
    for _ in range(2):
        y2 = mul(y, y)
        near = sub(_erf64(where(centre, y, 0.0)), a)  # (erf(y) - a) exp(y**2), centre ...
        far = sub(exp(add(log_q, y2)), _erfcx_nonneg(y))  # ... and tail
        u = mul(where(centre, mul(near, exp(where(centre, y2, 0.0))), far), math.sqrt(math.pi) / 2)
        y = sub(y, div(u, add(1.0, mul(y, u))))  # Halley's step (erf'' = -2 y erf')
    return y


def _erfinv_slope(w, y):
    """``d/dx erfinv(x) = sqrt(pi)/2 exp(erfinv(x)**2)`` (+inf at +-1, NaN outside [-1, 1])."""
    return mul(exp(mul(y, y)), math.sqrt(math.pi) / 2)


@tensor_op("erfinv")
def erfinv(input) -> GraphTensor:  # noqa: A002 - torch's names
    """torch.erfinv (``torch.special.erfinv``): ``y`` with ``erf(y) = x`` for ``x`` in [-1, 1]; -inf at
    -1, +inf at 1, NaN outside [-1, 1] and at NaN; odd, so ``erfinv(-0.0)`` is -0.0. Computed in float64
    and rounded once (``_erfinv_nonneg``: a few float64 ulps; torch's float64 erfinv loses digits as
    ``|x|`` nears 1, where it corrects with ``erf``). The gradient is ``sqrt(pi)/2 exp(erfinv(x)**2)``.
    Int and bool inputs give float32.

    Args:
        input: a tensor.
    """
    x = _float(input, "erfinv")
    w = cast(x, dt.float64)
    a = abs_(w)
    inside = lt(a, 1.0)
    a_in = where(inside, a, 0.5)
    y = _erfinv_nonneg(a_in, sub(1.0, a_in))
    y = where(inside, y, where(eq(a, 1.0), math.inf, math.nan))
    out = _derivative(where(_neg_side(w), neg(y), y), w, _erfinv_slope)
    return cast(out, x.dtype)


@tensor_op("erfcx")
def erfcx(input) -> GraphTensor:  # noqa: A002 - torch's names
    """torch.special.erfcx: the scaled complementary error function ``exp(x**2) erfc(x)``, without the
    overflow and underflow of that product (``erfcx(30)`` is 0.0188); ``2 exp(x**2) - erfcx(-x)`` for
    negative ``x`` (+inf below about -26.6, and at -inf), 0 at +inf. The gradient is
    ``2 x erfcx(x) - 2/sqrt(pi)`` (0 at +inf, its limit). Computed in float64 and rounded once; int and
    bool inputs give float32.

    Args:
        input: a tensor.
    """
    x = _float(input, "erfcx")
    w = cast(x, dt.float64)
    neg_side = lt(w, 0.0)
    a = where(neg_side, neg(w), w)
    pos = _erfcx_nonneg(where(isnan(a), 0.0, a))
    out = where(isnan(w), w, where(neg_side, sub(mul(exp(mul(a, a)), 2.0), pos), pos))
    slope = lambda w, y: where(eq(w, math.inf), 0.0, sub(mul(mul(w, y), 2.0), 2 / math.sqrt(math.pi)))  # noqa: E731
    return cast(_derivative(out, w, slope), x.dtype)


@tensor_op("ndtr")
def ndtr(input) -> GraphTensor:  # noqa: A002 - torch's names
    """torch.special.ndtr: the standard normal distribution function ``(1 + erf(x / sqrt(2))) / 2``,
    computed as ``erfc(-x / sqrt(2)) / 2`` in float64 and rounded once, so the lower tail keeps its
    relative precision (``ndtr(-30)`` is 4.9e-198, not 0). The gradient is the normal density. Int and
    bool inputs give float32.

    Args:
        input: a tensor.
    """
    x = _float(input, "ndtr")
    return cast(mul(erfc(mul(cast(x, dt.float64), -math.sqrt(0.5))), 0.5), x.dtype)


@tensor_op("log_ndtr")
def log_ndtr(input) -> GraphTensor:  # noqa: A002 - torch's names
    """torch.special.log_ndtr: ``log(ndtr(x))``, finite for very negative ``x`` where ``ndtr``
    underflows: below -1 ``log(erfcx(t) / 2) - x**2 / 2`` with ``t = -x / sqrt(2)`` (``log_ndtr(-1e5)``
    is -5e9), elsewhere ``log1p(-erfc(x / sqrt(2)) / 2)``. -inf at -inf, -0.0 at +inf. The gradient is
    ``pdf(x) / ndtr(x)``, ``sqrt(2/pi) / erfcx(t)`` below -1 (+inf at -inf, the limit). Computed in
    float64 and rounded once; int and bool inputs give float32.

    Args:
        input: a tensor.
    """
    x = _float(input, "log_ndtr")
    w = cast(x, dt.float64)
    low = lt(w, -1.0)
    t = maximum(mul(w, -math.sqrt(0.5)), 0.5)  # (t > 0.7 where used)
    cx = _erfcx_big(t)
    below = sub(log(mul(cx, 0.5)), mul(mul(w, w), 0.5))
    mid = where(low, 0.0, w)
    gauss = mul(exp(mul(mul(mid, mid), -0.5)), 1 / math.sqrt(2 * math.pi))
    out = where(low, below, log1p(mul(erfc(mul(mid, math.sqrt(0.5))), -0.5)))
    slope = lambda w, y: where(low, div(math.sqrt(2 / math.pi), cx), div(gauss, exp(y)))  # noqa: E731
    return cast(_derivative(out, w, slope), x.dtype)


@tensor_op("ndtri")
def ndtri(input) -> GraphTensor:  # noqa: A002 - torch's names
    """torch.special.ndtri: the inverse of ``ndtr`` (the standard normal quantile function): ``-inf``
    at 0, ``+inf`` at 1, NaN outside [0, 1]. ``sqrt(2) erfinv(2p - 1)`` loses the tails (``2p - 1``
    rounds to -1 below p = 1e-17), so it is ``-+sqrt(2) erfcinv(2q)``, ``q = min(p, 1 - p)`` exact, via
    ``_erfinv_nonneg``: a few float64 ulps down to the smallest subnormal p. The gradient is
    ``sqrt(2 pi) exp(ndtri(p)**2 / 2)``. Computed in float64 and rounded once; int and bool inputs give
    float32.

    Args:
        input: a tensor.
    """
    x = _float(input, "ndtri")
    p = cast(x, dt.float64)
    lower = lt(p, 0.5)
    inside = logical_and(gt(p, 0.0), lt(p, 1.0))
    q = mul(where(inside, where(lower, p, sub(1.0, p)), 0.5), 2.0)  # erfc(y) = q, in (0, 1]
    y = mul(_erfinv_nonneg(sub(1.0, q), q), math.sqrt(2.0))
    out = where(inside, where(lower, neg(y), y), where(eq(p, 0.0), -math.inf, where(eq(p, 1.0), math.inf, math.nan)))
    slope = lambda p, y: mul(exp(mul(mul(y, y), 0.5)), math.sqrt(2 * math.pi))  # noqa: E731
    return cast(_derivative(out, p, slope), x.dtype)


# the modified Bessel functions of the first kind, orders 0 and 1 (and scaled by exp(-|x|)): in float64
# from |x| = a, the power series below 30 (52 terms: the next is below 1e-17 of the sum at 30) and
# the asymptotic series above (terms until below 1e-17 at 30) --------------------------------------
_BESSEL_SWITCH, _BESSEL_SERIES = 30.0, 52


@functools.cache
def _bessel_asymptotic(nu: int) -> tuple[float, ...]:
    """``(-1)**k prod_{j<=k} (4 nu**2 - (2j - 1)**2) / (k! 8**k)``: ``exp(a) / sqrt(2 pi a)`` times their
    series in ``1/a`` is ``I_nu(a)``."""
    coefs, c, k = [1.0], 1.0, 0
    while abs(c) >= 1e-17 * _BESSEL_SWITCH**k:
        k += 1
        c *= -(4 * nu * nu - (2 * k - 1) ** 2) / (8 * k)
        coefs.append(c)
    return tuple(coefs[:-1])


def _bessel_ie(nu: int, a):
    """``exp(-a) I_nu(a)`` for float64 ``a >= 0``, ``nu`` 0 or 1 (0 at +inf, NaN at NaN)."""
    small = lt(a, _BESSEL_SWITCH)
    s = where(small, a, 0.0)
    series = _poly(mul(mul(s, s), 0.25), [1 / (math.factorial(k) * math.factorial(k + nu))
                                          for k in range(_BESSEL_SERIES)])
    near = mul(mul(series, mul(s, 0.5)) if nu else series, exp(neg(s)))
    b = where(small, _BESSEL_SWITCH, a)
    far = div(_poly(div(1.0, b), _bessel_asymptotic(nu)), sqrt(mul(b, 2 * math.pi)))
    return where(small, near, far)


def _bessel(nu: int, scaled: bool, w):
    """I_nu(w) (``scaled``: ``exp(-|w|) I_nu(w)``) in float64 with its derivative as the gradient
    (itself differentiable): ``I0' = I1``, ``I1' = I0 - I1 / w`` (1/2 at 0), and for the scaled ones
    ``I0e' = I1e - sign(w) I0e``, ``I1e' = I0e - I1e (sign(w) + 1/w)``. I1 is odd (keeping -0.0)."""
    a = abs_(w)
    v = _bessel_ie(nu, a)
    if not scaled:
        half = exp(mul(a, 0.5))  # (exp(a) overflows before I_nu(a) does)
        v = where(isinf(a), math.inf, mul(mul(v, half), half))
    if nu:
        v = where(_neg_side(w), neg(v), v)

    def slope(w, y):
        at0 = eq(w, 0.0)
        if nu == 0:
            d = _bessel(1, scaled, w)
            return sub(d, mul(sign(w), y)) if scaled else d
        corr = where(at0, 0.5, div(y, where(at0, 1.0, w)))  # y / w, whose limit at 0 is 1/2
        d = sub(_bessel(0, scaled, w), corr)
        return sub(d, mul(sign(w), y)) if scaled else d

    return _derivative(v, w, slope)


def _bessel_op(op: str, nu: int, scaled: bool, input):  # noqa: A002 - torch's names
    x = _float(input, op)
    return cast(_bessel(nu, scaled, cast(x, dt.float64)), x.dtype)


@tensor_op("i0")
def i0(input) -> GraphTensor:  # noqa: A002 - torch's names
    """torch.special.i0 (``torch.i0``): the modified Bessel function of the first kind of order 0, even;
    +inf at +-inf. Computed in float64 (power series below 30, asymptotic series above) and rounded
    once. The gradient is ``i1(x)``. Int and bool inputs give float32.

    Args:
        input: a tensor.
    """
    return _bessel_op("i0", 0, False, input)


@tensor_op("i0e")
def i0e(input) -> GraphTensor:  # noqa: A002 - torch's names
    """torch.special.i0e: ``exp(-|x|) i0(x)``, finite for every ``x`` (0 at +-inf). The gradient is
    ``i1e(x) - sign(x) i0e(x)``. Computed in float64 and rounded once; int and bool inputs give float32.

    Args:
        input: a tensor.
    """
    return _bessel_op("i0e", 0, True, input)


@tensor_op("i1")
def i1(input) -> GraphTensor:  # noqa: A002 - torch's names
    """torch.special.i1: the modified Bessel function of the first kind of order 1, odd; +-inf at +-inf.
    The gradient is ``i0(x) - i1(x) / x`` (1/2 at 0). Computed in float64 and rounded once; int and bool
    inputs give float32.

    Args:
        input: a tensor.
    """
    return _bessel_op("i1", 1, False, input)


@tensor_op("i1e")
def i1e(input) -> GraphTensor:  # noqa: A002 - torch's names
    """torch.special.i1e: ``exp(-|x|) i1(x)`` (+-0 at +-inf). The gradient is
    ``i0e(x) - i1e(x) (sign(x) + 1/x)`` (1/2 at 0). Computed in float64 and rounded once; int and bool
    inputs give float32.

    Args:
        input: a tensor.
    """
    return _bessel_op("i1e", 1, True, input)


# the gamma function's logarithm and derivatives: each in float64 and rounded once, from the
# recurrence up to z >= 10 (10 fixed steps, folded into one product or sum) and the asymptotic
# (Stirling) series there, whose next term is below 1e-16; below 0.5 the reflection formulas, with
# sin(pi x) and tan(pi x) of the exactly reduced x - round(x), so a pole is a pole ------------------
_SHIFT = 10
_STIRLING = (1 / 12, -1 / 360, 1 / 1260, -1 / 1680, 1 / 1188, -691 / 360360, 1 / 156)  # z**-1, z**-3, ...
_DIGAMMA = (1 / 12, -1 / 120, 1 / 252, -1 / 240, 1 / 132, -691 / 32760, 1 / 12)  # B2k / 2k: z**-2, z**-4, ...


def _odd_series(coefs, inv, first):
    """``sum c_k inv**(first + 2k)`` by Horner's rule in ``inv**2``."""
    inv2, acc = mul(inv, inv), None
    for c in reversed(coefs):
        acc = c if acc is None else add(mul(acc, inv2), c)
    return mul(acc, _power(inv, first))


def _power(v, n: int):
    """``v**n`` for an int ``n >= 1``, by squaring (about ``2 log2(n)`` products)."""
    out, sq = None, v
    while True:
        if n & 1:
            out = sq if out is None else mul(out, sq)
        n >>= 1
        if not n:
            return out
        sq = mul(sq, sq)


def _shifted(z, term, combine, shift: int = _SHIFT):
    """``(z', small, steps)``: ``z + shift`` where ``z < shift`` (``small``), else ``z``; and the
    recurrence's steps ``term(z + k)``, k = 0..shift-1, folded by ``combine`` (``mul`` for lgamma's
    product, ``add`` for digamma's and polygamma's sums)."""
    small = lt(z, float(shift))
    steps = term(z)
    for k in range(1, shift):
        steps = combine(steps, term(add(z, float(k))))
    return where(small, add(z, float(shift)), z), small, steps


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


def _bernoulli_even(count: int) -> list[Fraction]:
    """B_2, B_4, ..., B_(2 count), exact (the Akiyama-Tanigawa algorithm)."""
    a, out = [], []
    for m in range(2 * count + 1):
        a.append(Fraction(1, m + 1))
        for j in range(m, 0, -1):
            a[j - 1] = j * (a[j - 1] - a[j])
        if m >= 2 and m % 2 == 0:
            out.append(a[0])
    return out


_MAX_ORDER = 150  # polygamma's n: the reflection's coefficients (n! and more) overflow float64 past ~160


@functools.cache
def _polygamma_plan(n: int) -> tuple[int, tuple[float, ...]]:
    """``(shift, coefs)`` for ``polygamma(n, .)``, n >= 1: the recurrence's number of steps and the
    asymptotic series' coefficients ``B_2k (2k + n - 1)! / ((2k)! (n - 1)!)`` of ``z**-(n + 2k)``
    (relative to the leading term ``z**-n``), k = 1, 2, ..., enough that the first left out is below
    1e-17 of the leading term at ``z = shift`` (10 for small n; larger orders need a larger z for the
    series to converge as fast)."""
    bern = _bernoulli_even(24)
    for shift in range(_SHIFT, 20 * _SHIFT):
        coefs = []
        for k, b in enumerate(bern, 1):
            c = b * Fraction(math.factorial(2 * k + n - 1), math.factorial(2 * k) * math.factorial(n - 1))
            if abs(c) < Fraction(shift ** (2 * k), 10**17):
                return shift, tuple(float(c) for c in coefs)
            coefs.append(c)
    raise AssertionError(f"no polygamma plan for n = {n}")  # (n <= _MAX_ORDER all have one)


@functools.cache
def _cot_derivative(n: int) -> tuple[int, ...]:
    """The coefficients (constant first) of ``P_n`` with ``d^n/dx^n cot(x) = P_n(cot(x))``:
    ``P_0(c) = c``, ``P_(k+1)(c) = -(1 + c**2) P_k'(c)``."""
    p = [0, 1]
    for _ in range(n):
        d = [k * p[k] for k in range(1, len(p))] + [0, 0]
        p = [-(d[k] + (d[k - 2] if k >= 2 else 0)) for k in range(len(d))]
    while len(p) > 1 and p[-1] == 0:
        p.pop()
    return tuple(p)


def _polygamma64(n: int, w):
    """``polygamma(n, w)``, n >= 1, in float64: for ``z >= 0`` the recurrence
    ``psi_n(z) = psi_n(z + s) + (-1)**(n+1) n! sum_k (z + k)**-(n+1)`` up to ``z + s >= s``
    (``_polygamma_plan``) and there the asymptotic series ``(-1)**(n+1) ((n-1)!/z**n + n!/(2 z**(n+1))
    + sum_k B_2k (2k+n-1)!/(2k)! z**-(2k+n))``; below 0 the reflection formula
    ``psi_n(w) = (-1)**n psi_n(1 - w) - pi d^n/dw^n cot(pi w)`` (``_cot_derivative``), with
    ``cot(pi w)`` of the exactly reduced ``w - round(w)``. At the poles (0, -1, -2, ...), where
    ``psi_n(w) ~ (-1)**(n+1) n! / (w - pole)**(n+1)``: +inf for odd ``n``; for even ``n`` the limit from
    each side has the other sign, so NaN, except at +0 (-inf) and -0 (+inf), the one-sided limits (as
    digamma's). At +inf 0 (signed as the limit), at -inf NaN."""
    shift, coefs = _polygamma_plan(n)
    sign = (-1) ** (n + 1)
    refl = lt(w, 0.0)
    z = where(refl, sub(1.0, w), w)
    zs, small, steps = _shifted(z, lambda v: _power(div(1.0, v), n + 1), add, shift)
    inv = div(1.0, zs)
    lead = add(_power(inv, n), mul(_power(inv, n + 1), n / 2))  # (all over (n - 1)!)
    series = add(lead, _odd_series(coefs, inv, n + 2)) if coefs else lead
    at_z = mul(add(series, mul(where(small, steps, 0.0), float(n))), sign * float(math.factorial(n - 1)))
    cot_part = mul(_poly(_cot_pi(w), _cot_derivative(n)), math.pi ** (n + 1))
    out = where(refl, sub(mul(at_z, float((-1) ** n)), cot_part), at_z)
    if n % 2:
        at_pole = math.inf
    else:
        zero = eq(w, 0.0)
        at_pole = where(zero, where(lt(div(1.0, where(zero, w, 1.0)), 0.0), math.inf, -math.inf), math.nan)
    out = where(_pole(w), at_pole, out)
    return where(isinf(w), where(gt(w, 0.0), sign * 0.0, math.nan), out)


def _cot_pi(w):
    """``cot(pi w)`` in float64 to its relative precision also near its zeros (``w`` near a half
    integer, where ``1 / tan`` of the rounded ``pi w`` leaves 6e-17 at -100.5): from ``r = w - round(w)``
    (exact, in [-1/2, 1/2]), ``1 / tan(pi r)`` for ``|r| < 1/4`` and ``tan(pi (1/2 - |r|))`` with r's
    sign (``1/2 - |r|`` exact) beyond; +-inf at the integers."""
    r = sub(w, round_(w))
    a = abs_(r)
    near = div(1.0, tan(mul(where(eq(r, 0.0), 0.5, r), math.pi)))
    far = tan(mul(sub(0.5, a), math.pi))
    return where(lt(a, 0.25), where(eq(r, 0.0), math.inf, near), where(lt(r, 0.0), neg(far), far))


def _polygamma_diff(n: int, w):
    """``polygamma(n, w)`` in float64 whose gradient is ``polygamma(n + 1, w)`` (built when asked for),
    so lgamma, digamma and polygamma differentiate any number of times."""
    value = _digamma64(w) if n == 0 else _polygamma64(n, w)
    return _derivative(value, w, lambda w, y: _polygamma_diff(n + 1, w))


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
    return _gamma_family("lgamma", input, _lgamma64, functools.partial(_polygamma_diff, 0))


@tensor_op("digamma")
def digamma(input) -> GraphTensor:  # noqa: A002 - torch's names
    """torch.digamma (``torch.special.digamma``, ``psi``): the derivative of ``lgamma``; torch's values at
    the poles: -inf at +0, +inf at -0, NaN at -1, -2, ...; +inf at +inf, NaN at -inf. The gradient is
    ``polygamma(1, x)``. Computed in float64 and rounded once. Int and bool inputs give float32.

    Args:
        input: a tensor.
    """
    return _gamma_family("digamma", input, _digamma64, functools.partial(_polygamma_diff, 1))


def multigammaln(input, p: int) -> GraphTensor:  # noqa: A002 - torch's names
    """torch.special.multigammaln (``torch.mvlgamma``): the log of the multivariate gamma function of
    dimension ``p``, ``p (p - 1) / 4 log(pi) + sum_j lgamma(x - j / 2)``, j = 0..p-1, summed in float64
    and rounded once. It is defined for ``x > (p - 1) / 2``; below that this is the same sum of
    ``lgamma``'s, as torch's (2.13, which does not check the values). The gradient is the sum of the
    digammas. Int and bool inputs give float32.

    Args:
        input: a tensor.
        p: the dimension, an int >= 1.
    """
    x = _float(input, "multigammaln")
    p = check_int("multigammaln", "p", p, 1)
    w = cast(x, dt.float64)
    with renamed("multigammaln"):
        out = p * (p - 1) / 4 * math.log(math.pi)
        for j in range(p):
            out = add(lgamma(sub(w, j / 2)), out)
        return cast(out, x.dtype)


def polygamma(n: int, input) -> GraphTensor:  # noqa: A002 - torch's names
    """torch.polygamma (``torch.special.polygamma``): the ``n``-th derivative of ``digamma``, any order
    0 <= n <= 150 (past it the reflection formula's coefficients overflow float64). Computed in float64
    and rounded once: the recurrence and asymptotic series above 0, the reflection formula below
    (``_polygamma64``); relative error near 1e-15, except close to the zeros on the negative axis
    (where the reflection's two terms cancel: there the error is relative to the terms).

    The poles (0, -1, -2, ...) give the mathematical limits, where torch (2.13) gives -inf at every pole
    for even n: +inf for odd ``n``; for even ``n`` NaN (the two one-sided limits are -inf and +inf),
    except -inf at +0 and +inf at -0, as digamma. +inf gives 0 (torch: NaN for even n), -inf NaN. The gradient is
    ``polygamma(n + 1, x)``, itself differentiable. Int and bool inputs give float32.

    Args:
        n: the order, an int in [0, 150].
        input: a tensor.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise op_error(ValueError, "polygamma", f"n must be an int >= 0, got {n!r}", input)
    if n > _MAX_ORDER:
        raise op_error(ValueError, "polygamma", f"order n = {n} is past {_MAX_ORDER} (the reflection formula's "
                       "coefficients overflow float64)", input)
    with renamed("polygamma"):
        if n == 0:
            return digamma(input)
        return _gamma_family("polygamma", input, functools.partial(_polygamma64, n),
                             functools.partial(_polygamma_diff, n + 1))


def polygamma_method(input, n: int) -> GraphTensor:  # noqa: A002 - torch's names
    """torch ``Tensor.polygamma(n)``: ``polygamma(n, self)`` (the order comes second on the method).

    Args:
        input: the tensor.
        n: the order, an int in [0, 150].
    """
    return polygamma(n, input)
