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
import numbers
from fractions import Fraction

import numpy as np

from luminal.core import dtype as dt
from luminal.core.errors import check_int, check_number, op_error, renamed
from luminal.frontend import float64_paths
from luminal.frontend.checks import tensor_op
from luminal.frontend.float64_paths import plain_unless_float64
from luminal.frontend.ops.core import cast, coerce, full_like, power_by_squaring
from luminal.frontend.ops.elementwise import (
    _INV_SQRT_PI,
    _TWO_OVER_SQRT_PI,
    _cheb,
    _derivative,
    _erfcx64,
    _erfcx_dd,
    _erfcx_r,
    _exp_square,
    _fast_two_sum,
    _float,
    _gauss,
    _neg_side,
    _opmath,
    _poly,
    abs_,
    add,
    ceil,
    cos,
    div,
    eq,
    exp,
    expm1,
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


@plain_unless_float64
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


@plain_unless_float64
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


@plain_unless_float64
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


@plain_unless_float64
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


@plain_unless_float64
@tensor_op("erfc")
def erfc(input) -> GraphTensor:  # noqa: A002 - torch's names
    """torch.erfc (``torch.special.erfc``): ``1 - erf(x)``, to the input dtype's relative precision also
    in the tail where ``1 - erf`` would round to 0 (``erfc(5)`` is 1.5e-12, ``erfc(9)`` 4.1e-37). Computed
    in float64 and rounded once: ``1 - erf`` below 0.5 in magnitude, ``erfc(a) exp(a**2)`` from
    ``erf``'s Chebyshev expansion times ``exp(-a**2)`` on [0.5, 6], Laplace's continued fraction past 6,
    and ``2 - erfc(-x)`` for negative ``x``. The gradient is torch's ``-2/sqrt(pi) exp(-x**2)``. Int
    and bool inputs give float32. A float64 input: within 2 ulps down to its last subnormal (x = 27.2),
    the gradient within an ulp (``_erfc64``: the rounded ``x**2`` made both 480 ulps off at 25.4).

    Args:
        input: a tensor.
    """
    x = _float(input, "erfc")
    w = cast(x, dt.float64)
    if float64_paths.accurate(x.dtype):  # (exp(-x**2) of the rounded square: x**2 ulps, 480 at 25.4)
        neg_slope = (-_TWO_OVER_SQRT_PI[0], -_TWO_OVER_SQRT_PI[1])  # (of |w|: shares _erfc64's exp)
        return _derivative(_erfc64(w), w, lambda w, y: _gauss(abs_(w), neg_slope, -1.0))
    out = _derivative(_erfc_pair(w)[0], w, lambda w, y: mul(exp(neg(mul(w, w))), -2 / math.sqrt(math.pi)))
    return cast(out, x.dtype)


_ERF_TAYLOR = tuple((-1) ** n * 2 / math.sqrt(math.pi) / (math.factorial(n) * (2 * n + 1)) for n in range(13))


def _erf_small(w):
    """``erf(w)`` for float64 ``|w| < 0.5``: ``_erf64``'s Taylor series there (2/sqrt(pi) sum_n (-1)**n
    w**(2n+1) / (n! (2n+1)), the same operations), without the Chebyshev expansion of erfc that
    ``_erf64`` builds for ``|w| >= 0.5`` and a caller that needs only the small ones throws away."""
    return mul(w, _poly(mul(w, w), _ERF_TAYLOR))


def _erfc_pair(w):
    """``(erfc(w), erfc(-w))`` for float64 ``w``, each to its relative precision, from one evaluation:
    ``1 -+ erf(w)`` below 0.5 in magnitude, else the tail ``erfc(|w|)`` and ``2 -`` it (``erfc``'s
    value, and Temme's P and Q, which need both: two ``erfc`` calls were twice the graph)."""
    a = abs_(w)
    small = lt(a, 0.5)
    er = _erf_small(where(small, w, 0.0))
    tail = mul(_erfcx_big(a), exp(neg(mul(a, a))))
    neg_side = lt(w, 0.0)
    near, far = where(neg_side, sub(2.0, tail), tail), where(neg_side, tail, sub(2.0, tail))
    return where(small, sub(1.0, er), near), where(small, add(1.0, er), far)


def _erfc64(w):
    """float64 ``erfc(w)`` within 2 ulps: ``1 - erf(w)`` below 0.5 in magnitude (2 ulps near 0.48),
    the tail ``exp(-a**2) / (sqrt(pi) (a + r))`` rounded once (``_gauss`` over ``_erfcx_rest``:
    ``erfcx(a) exp(-a**2)`` of the rounded square was ``a**2`` ulps off, 480 at 25.4) and ``2 -`` it. Not
    for Temme's P and Q (``_erfc_pair``): their erfc's argument is rounded, which this cannot undo."""
    a = abs_(w)
    small = lt(a, 0.5)
    centre = sub(1.0, _erf_small(where(small, w, 0.0)))
    capped = minimum(a, 40.0)  # (_gauss's cap: 0 past it; a + r is NaN at +inf)
    tail = _gauss(a, _INV_SQRT_PI, -1.0, over=_fast_two_sum(capped, _erfcx_rest(capped)))
    return where(small, centre, where(lt(w, 0.0), sub(2.0, tail), tail))


def _erfcx_big(a):
    """``erfc(a) exp(a**2)`` for float64 ``a >= 0.5``: ``_erfcx64``'s Chebyshev expansion up to 6,
    Laplace's continued fraction past it (0 at +inf). (``_erfcx_rest``'s form is within 2 ulps: this is
    3.7 ulps off, which erfinv's and ndtri's last step and Temme's P and Q do not see.)"""
    far = maximum(a, 6.0)
    f = far
    for k in range(_CF_TERMS, 0, -1):
        f = add(far, div(k / 2, f))
    return where(le(a, 6.0), _erfcx64(minimum(maximum(a, 0.5), 6.0)), div(1.0 / math.sqrt(math.pi), f))


def _erfcx_rest(a):
    """``r`` with ``erfcx(a) = 1 / (sqrt(pi) (a + r))``, for float64 ``a >= 0.5`` (+inf included): from
    ``_erfcx_r`` up to 6, past it the tail of Laplace's continued fraction ``a + 1/2 / (a + 1 / (a + 3/2 /
    (a + ...)))``. ``a + r`` damps ``r``'s error, and erfcx's slope is ``-2 r erfcx``: ``2 a erfcx - 2 /
    sqrt(pi)`` cancelled (3000 ulps at 28, all digits past 1e8)."""
    far = maximum(a, 6.0)
    f = far
    for k in range(_CF_TERMS, 1, -1):
        f = add(far, div(k / 2, f))
    return where(le(a, 6.0), _erfcx_r(minimum(maximum(a, 0.5), 6.0)), div(0.5, f))


def _erfcx_nonneg(a):
    """``erfc(a) exp(a**2)`` for float64 ``a >= 0``: ``(1 - erf(a)) exp(a**2)`` below 0.5."""
    small = lt(a, 0.5)
    near = where(small, a, 0.0)
    return where(small, mul(sub(1.0, _erf_small(near)), exp(mul(near, near))), _erfcx_big(a))


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
        near = sub(_erf_small(where(centre, y, 0.0)), a)  # (erf(y) - a) exp(y**2), centre (y < 0.477) ...
        far = sub(exp(add(log_q, y2)), _erfcx_nonneg(y))  # ... and tail
        u = mul(where(centre, mul(near, exp(where(centre, y2, 0.0))), far), math.sqrt(math.pi) / 2)
        y = sub(y, div(u, add(1.0, mul(y, u))))  # Halley's step (erf'' = -2 y erf')
    return y


def _erfinv_slope(w, y):
    """``d/dx erfinv(x) = sqrt(pi)/2 exp(erfinv(x)**2)`` (+inf at +-1, NaN outside [-1, 1])."""
    return mul(exp(mul(y, y)), math.sqrt(math.pi) / 2)


@plain_unless_float64
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


@plain_unless_float64
@tensor_op("erfcx")
def erfcx(input) -> GraphTensor:  # noqa: A002 - torch's names
    """torch.special.erfcx: the scaled complementary error function ``exp(x**2) erfc(x)``, without the
    overflow and underflow of that product (``erfcx(30)`` is 0.0188); ``2 exp(x**2) - erfcx(-x)`` for
    negative ``x`` (+inf below about -26.6, and at -inf), 0 at +inf. The gradient is
    ``2 x erfcx(x) - 2/sqrt(pi)`` (0 at +inf, its limit). Computed in float64 and rounded once; int and
    bool inputs give float32. A float64 input: within 2.5 ulps, the gradient 3 (``_erfcx64_accurate``:
    they were 490 ulps off below -20, the gradient 3000 at 28).

    Args:
        input: a tensor.
    """
    x = _float(input, "erfcx")
    w = cast(x, dt.float64)
    if float64_paths.accurate(x.dtype):
        return _erfcx64_accurate(w)
    neg_side = lt(w, 0.0)
    a = where(neg_side, neg(w), w)
    pos = _erfcx_nonneg(where(isnan(a), 0.0, a))
    out = where(isnan(w), w, where(neg_side, sub(mul(exp(mul(a, a)), 2.0), pos), pos))
    slope = lambda w, y: where(eq(w, math.inf), 0.0, sub(mul(mul(w, y), 2.0), 2 / math.sqrt(math.pi)))  # noqa: E731
    return cast(_derivative(out, w, slope), x.dtype)


def _erfcx64_accurate(w):
    """float64 erfcx within 2.5 ulps, its slope 3: ``(1 - erf(w)) exp(w**2)`` below 0.5 in magnitude,
    ``_erfcx_rest`` at 0.5 and above, and ``2 exp(w**2) - erfcx(-w)`` at -0.5 and below with
    ``exp(w**2)`` from ``_exp_square`` (of the rounded square it was ``w**2`` ulps off, 480 at -26.5).
    The slope ``2 w erfcx(w) - 2 / sqrt(pi)`` is ``-2 r erfcx(w)`` at 0.5 and above (0 at +inf)."""
    neg_side = lt(w, 0.0)
    a = where(neg_side, neg(w), w)
    small = lt(a, 0.5)  # (NaN: not small, and w's NaN is kept)
    near = where(small, w, 0.0)
    a_big = maximum(a, 0.5)
    r = _erfcx_rest(a_big)
    big = _erfcx_dd(*_fast_two_sum(a_big, r))
    centre = mul(sub(1.0, _erf_small(near)), exp(mul(near, near)))
    out = where(isnan(w), w, where(small, centre, where(neg_side, sub(_exp_square(a, (2.0, 0.0), 1.0), big), big)))
    far = mul(mul(r, -2.0), big)
    slope = lambda w, y: where(logical_or(neg_side, small), sub(mul(mul(w, y), 2.0), 2 / math.sqrt(math.pi)), far)  # noqa: E731
    return _derivative(out, w, slope)


@plain_unless_float64
@tensor_op("ndtr")
def ndtr(input) -> GraphTensor:  # noqa: A002 - torch's names
    """torch.special.ndtr: the standard normal distribution function ``(1 + erf(x / sqrt(2))) / 2``,
    computed as ``erfc(-x / sqrt(2)) / 2`` in float64 and rounded once, so the lower tail keeps its
    relative precision (``ndtr(-30)`` is 4.9e-198, not 0). The gradient is the normal density. Int and
    bool inputs give float32. A float64 input: within a few ulps down to the smallest subnormal
    result (x = -38.5), value and gradient (``_ndtr_pair``).

    Args:
        input: a tensor.
    """
    x = _float(input, "ndtr")
    if not float64_paths.accurate(x.dtype):
        return cast(mul(erfc(mul(cast(x, dt.float64), -math.sqrt(0.5))), 0.5), x.dtype)
    return _derivative(_ndtr_pair(x)[0], x, lambda x, y: _gauss(x, _INV_SQRT_2PI))


@plain_unless_float64
@tensor_op("log_ndtr")
def log_ndtr(input) -> GraphTensor:  # noqa: A002 - torch's names
    """torch.special.log_ndtr: ``log(ndtr(x))``, finite for very negative ``x`` where ``ndtr``
    underflows: below -1 ``log(erfcx(t) / 2) - x**2 / 2`` with ``t = -x / sqrt(2)`` (``log_ndtr(-1e5)``
    is -5e9), elsewhere ``log1p(-erfc(x / sqrt(2)) / 2)``. -inf at -inf, -0.0 at +inf. The gradient is
    ``pdf(x) / ndtr(x)``, ``sqrt(2/pi) / erfcx(t)`` below -1 (+inf at -inf, the limit). Computed in
    float64 and rounded once; int and bool inputs give float32. A float64 input: within a few ulps,
    value and gradient, with ``_ndtr_pair``'s values above -1 (``log(ndtr(x))`` on [-1, 0),
    ``log1p(-ndtr(-x))`` above, where ``erfc`` of the rounded ``x / sqrt(2)`` was 75 ulps off at 7.4).

    Args:
        input: a tensor.
    """
    x = _float(input, "log_ndtr")
    w = cast(x, dt.float64)
    low = lt(w, -1.0)
    if float64_paths.accurate(x.dtype):
        p, q, cx, f = _ndtr_pair(w)  # (cx = 1 / (sqrt(pi) f): erfcx(-w / sqrt(2)) below -1)
        below = sub(log(mul(cx, 0.5)), mul(mul(w, w), 0.5))
        out = where(low, below, where(lt(w, 0.0), log(p), log1p(neg(q))))
        gauss = div(_gauss(w, _INV_SQRT_2PI), p)
        slope = lambda w, y: where(low, mul(f, math.sqrt(2)), gauss)  # noqa: E731 - sqrt(2/pi) / cx
        return _derivative(out, w, slope)
    t = maximum(mul(w, -math.sqrt(0.5)), 0.5)  # (t > 0.7 where used)
    cx = _erfcx_big(t)
    below = sub(log(mul(cx, 0.5)), mul(mul(w, w), 0.5))
    mid = where(low, 0.0, w)
    gauss = mul(exp(mul(mul(mid, mid), -0.5)), 1 / math.sqrt(2 * math.pi))
    out = where(low, below, log1p(mul(erfc(mul(mid, math.sqrt(0.5))), -0.5)))
    slope = lambda w, y: where(low, div(math.sqrt(2 / math.pi), cx), div(gauss, exp(y)))  # noqa: E731
    return cast(_derivative(out, w, slope), x.dtype)


# 1/sqrt(2 pi) in two parts
_INV_SQRT_2PI = (0.3989422804014327, -2.49232720227773e-17)


def _ndtr_pair(x):
    """``(ndtr(x), ndtr(-x), erfcx(|w|))`` for float64 ``x``, the first two within a few ulps, ``w = -x /
    sqrt(2)``: ``(1 -+ erf(w)) / 2`` below 0.5 in magnitude, else the tail ``ndtr(-|x|) = erfcx(|w|) / 2
    exp(-x**2 / 2)`` (``_gauss``, whose exponent is exact: ``erfc`` of the rounded ``w`` was ``1 + x**2``
    ulps off, 650 at x = -26; erfcx's relative slope is below ``1 / |w|``, so ``w``'s rounding stays
    below an ulp there) and ``1 -`` it. The third (for ``|w| >= 0.5``) is ``log_ndtr``'s below -1,
    ``1 / (sqrt(pi) f)`` with ``f = |w| + r`` (``_erfcx_rest``), the fourth; its gradient there is
    ``sqrt(2) f``."""
    w = mul(x, -math.sqrt(0.5))
    a = abs_(w)
    small = lt(a, 0.5)
    er = mul(_erf_small(where(small, w, 0.0)), 0.5)
    a_big = maximum(a, 0.5)
    f = add(a_big, _erfcx_rest(a_big))
    cx = div(_INV_SQRT_PI[0], f)
    tail = _gauss(x, mul(cx, 0.5))
    lower = lt(x, 0.0)
    near, far = where(lower, tail, sub(1.0, tail)), where(lower, sub(1.0, tail), tail)
    return where(small, sub(0.5, er), near), where(small, add(0.5, er), far), cx, f


@plain_unless_float64
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


@plain_unless_float64
@tensor_op("i0")
def i0(input) -> GraphTensor:  # noqa: A002 - torch's names
    """torch.special.i0 (``torch.i0``): the modified Bessel function of the first kind of order 0, even;
    +inf at +-inf. Computed in float64 (power series below 30, asymptotic series above) and rounded
    once. The gradient is ``i1(x)``. Int and bool inputs give float32.

    Args:
        input: a tensor.
    """
    return _bessel_op("i0", 0, False, input)


@plain_unless_float64
@tensor_op("i0e")
def i0e(input) -> GraphTensor:  # noqa: A002 - torch's names
    """torch.special.i0e: ``exp(-|x|) i0(x)``, finite for every ``x`` (0 at +-inf). The gradient is
    ``i1e(x) - sign(x) i0e(x)``. Computed in float64 and rounded once; int and bool inputs give float32.

    Args:
        input: a tensor.
    """
    return _bessel_op("i0e", 0, True, input)


@plain_unless_float64
@tensor_op("i1")
def i1(input) -> GraphTensor:  # noqa: A002 - torch's names
    """torch.special.i1: the modified Bessel function of the first kind of order 1, odd; +-inf at +-inf.
    The gradient is ``i0(x) - i1(x) / x`` (1/2 at 0). Computed in float64 and rounded once; int and bool
    inputs give float32.

    Args:
        input: a tensor.
    """
    return _bessel_op("i1", 1, False, input)


@plain_unless_float64
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
    return power_by_squaring(v, n, mul)


def _shifted(z, term, combine, shift: int = _SHIFT):
    """``(z', small, steps)``: ``z + shift`` where ``z < shift`` (``small``), else ``z``; and the
    recurrence's steps ``term(z + k)``, k = 0..shift-1, folded by ``combine`` (``mul`` for lgamma's
    product, ``add`` for digamma's and polygamma's sums)."""
    small = lt(z, float(shift))
    steps = term(z)
    for k in range(1, shift):
        steps = combine(steps, term(add(z, float(k))))
    return where(small, add(z, float(shift)), z), small, steps


def _reflected(w, below: float = 0.5):
    """``(z, refl, r)``: ``z = 1 - w`` where ``w < below`` (``refl``), else ``w``; ``r = w - round(w)``,
    exact, in [-1/2, 1/2] (``sin(pi w) = +-sin(pi r)``, ``tan(pi w) = tan(pi r)``)."""
    refl = lt(w, below)
    return where(refl, sub(1.0, w), w), refl, sub(w, round_(w))


def _pole(w):
    """Non-positive integers (the poles of gamma): -inf and NaN count as neither."""
    return logical_and(le(w, 0.0), logical_and(eq(w, floor(w)), logical_not(isinf(w))))


def _lgamma64(w):
    # float64 (accurate): ``lgamma1p(w) - log(w)`` on (0, 1/2], where the reflection's two terms cancel
    # (13 ulps at 0.3); the reflection below 0 only
    accurate = float64_paths.depth() == 0
    z, refl, r = _reflected(w, 0.0 if accurate else 0.5)
    zs, small, prod = _shifted(z, lambda v: v, mul)
    inv = div(1.0, zs)
    big = add(sub(mul(sub(zs, 0.5), log(zs)), zs), 0.5 * math.log(2 * math.pi))
    stirling = sub(add(big, _odd_series(_STIRLING, inv, 1)), where(small, log(where(small, prod, 1.0)), 0.0))
    # below 10, Stirling's sum at the shifted z and the log of the shift's product cancel: to an absolute
    # 1e-15 around the zeros at 1 and 2 (1e-10 relative at 1.9999, 7e13 ulps at 2 - 1e-12), 85 ulps at
    # 2.7: there the recurrence down to a series (``_lgamma_below_10``)
    at_z = where(_lgamma_low(z), _lgamma_below_10(z), stirling)
    if accurate:
        near0 = logical_and(gt(z, 0.0), le(z, 0.5))
        zt = where(near0, z, 0.25)
        at_z = where(near0, sub(_poly(zt, _LGAM1P), log(zt)), at_z)  # (lgamma1p's series about 1)
    sin_pi = abs_(sin(mul(r, math.pi)))
    at_w = where(refl, sub(log(div(math.pi, where(_pole(w), 1.0, sin_pi))), at_z), at_z)
    if accurate:
        inside = logical_and(lt(w, -2.0), gt(w, _PSI_NEG_END))
        at_w = where(inside, _lgamma_neg(w, small, div(1.0, zs), log(zs)), at_w)
    return where(logical_or(_pole(w), isinf(w)), math.inf, at_w)


# lgamma's two roots in each interval (-k-1, -k), k = 2..19, as offsets from their nearest pole in two
# parts: ``r = -k - 1 + e`` left of digamma's root there (``_PSI_NEG_ROOTS``), ``r = -k + e`` right of it
# (mpmath, 60 digits; the offsets near -20 are below an ulp of 20, so the roots themselves are not doubles)
_LGAMMA_NEG_ROOTS = (  # (left e_hi, e_lo, right e_hi, e_lo)
    (0.2523173532725874, -2.04688991691325e-17, -0.45702473822080064, 1.843554041574456e-17),
    (0.04470571514140207, 8.223977942582053e-19, -0.14358088834998006, 3.862806401714152e-18),
    (0.008455359439952277, 8.231751957350036e-19, -0.03936183974053688, 3.2731379225891636e-18),
    (0.0013925199191243706, -7.090441230646531e-20, -0.008218168322593521, -5.582665915956405e-19),
    (0.0001984921093623021, 6.263909978492175e-21, -0.0013852944531550972, -2.6295731811446077e-20),
    (2.4802904179335845e-05, 3.15397713595963e-22, -0.00019833340732475162, 1.1820573401560963e-20),
    (2.7557490225318057e-06, -6.500300408654724e-23, -2.48002706819597e-05, 1.0083974251164085e-21),
    (2.7557337083353163e-07, 1.4502658434955713e-23, -2.7557148226503463e-06, -5.624459871432079e-23),
    (2.5052109918476226e-08, -6.807394864189793e-25, -2.755730136466002e-07, -2.4472526783403563e-23),
    (2.087675709796081e-09, -8.658839215884982e-26, -2.5052106852407546e-08, 1.2924868620853802e-24),
    (1.6059043843534355e-10, 6.465141936497467e-27, -2.087675687777539e-09, -4.849684877236172e-26),
    (1.147074559808161e-11, -7.830340218001236e-28, -1.6059043830108875e-10, 7.046449983196074e-27),
    (7.647163731835846e-13, -3.8035184915187745e-29, -1.147074559737784e-11, 4.194056116105366e-28),
    (4.779477332388026e-14, -9.319923331229129e-31, -7.647163731803788e-13, 4.886154187641447e-29),
    (2.8114572543455435e-15, -8.713180440266469e-32, -4.779477332386745e-14, -1.811833433216651e-30),
    (1.5619206968586233e-16, 9.139764076937634e-33, -2.811457254345498e-15, -2.2878206410005478e-32),
    (8.22063524662433e-18, 4.221635182443431e-34, -1.561920696858622e-16, 9.970308044546635e-33),
    (4.110317623312165e-19, 1.951606135968959e-36, -8.22063524662433e-18, -2.0674364147742136e-35),
)


def _lgamma_neg(w, small, inv_a, log_a):
    """float64 ``lgamma(w)`` for ``w`` in (-20, -2) (not an integer; elsewhere any value) to its relative
    precision, also at its two roots ``r`` between the poles (|gamma| = 1), where the reflection's terms
    ``log(pi / |sin(pi w)|)`` and ``lgamma(1 - w)`` cancel: ``lgamma(w) = lgamma(w) - lgamma(r)``, from
    the root on ``w``'s side of digamma's root, in terms of ``d = w - r`` (exact near ``r``), the
    reflection's differences ``log(|sin(pi r)| / |sin(pi w)|) = -log1p(rho)``, ``rho = sin(pi d) cot(pi
    r) - 2 sin(pi d / 2)**2`` and ``lgamma(a) - lgamma(b)`` (``a = 1 - w``, ``b = 1 - r``): the recurrence's
    ``log(prod_n (a + n) / (b + n)) = log1p(Q)`` (``Q`` summed from ``(a - b) / (b + n)``, one sign) and
    Stirling's sums at ``A``, ``B`` (``a``, ``b`` + 10 below 10) as ``(a - b)`` times ``(B - 1/2)
    log1p(y) / (y B) + log(A) - 1 - sum_k c_k (A**(1-2k) - B**(1-2k)) / (A - B)`` (``y = (a - b) / B``,
    the last ``h_(2k-2) / (A B)`` as in ``_psi_divided``). The two logs are one, ``log1p((Q - rho) /
    (1 + rho))``, and ``log((1 + Q) |sin(pi r)| / |sin(pi w)|)`` where ``1 + rho`` is below 1/2 (near a
    pole). ``small``, ``1 / A`` and ``log(A)``: ``_lgamma64``'s."""
    t = sub(w, ceil(w))  # (as _digamma_accurate's: exact, then |sin(pi w)| = |sin(pi s)|)
    s = where(lt(t, -0.5), add(t, 1.0), t)
    sin_w = abs_(sin(mul(s, math.pi)))
    eh, el = (full_like(w, v) for v in _LGAMMA_NEG_ROOTS[0][2:])
    for k, row in enumerate(_LGAMMA_NEG_ROOTS, 2):
        past = lt(w, -float(k))
        left = logical_and(past, lt(w, _PSI_NEG_ROOTS[k][0]))
        eh, el = (where(left, v, where(past, u, acc)) for acc, v, u in zip((eh, el), row[:2], row[2:], strict=True))
    pole = sub(ceil(w), cast(gt(eh, 0.0), dt.float64))  # (r = pole + e: e > 0 left of digamma's root)
    d = sub(sub(sub(w, pole), eh), el)
    e = where(gt(d, 0.5), sub(1.0, d), where(lt(d, -0.5), sub(-1.0, d), d))  # (exact; sin(pi e) = sin(pi d))
    sin_r = sin(mul(eh, math.pi))
    cot_r = div(sin(mul(sub(0.5, abs_(eh)), math.pi)), sin_r)
    half = sin(mul(d, math.pi / 2))
    rho = sub(mul(sin(mul(e, math.pi)), cot_r), mul(mul(half, half), 2.0))
    b = sub(sub(sub(1.0, pole), eh), el)
    delta = neg(d)
    q = None
    for n in range(_SHIFT):
        eps = div(delta, add(b, float(n)))
        q = eps if q is None else add(add(q, eps), mul(q, eps))
    q = where(small, q, 0.0)
    ratio = div(mul(add(q, 1.0), abs_(sin_r)), sin_w)  # ((1 + Q) / (1 + rho))
    near = logical_and(gt(ratio, 0.25), lt(ratio, 4.0))
    rho_n = where(near, rho, 0.0)
    up = ge(ratio, 1.0)
    y = where(near, div(sub(q, rho_n), add(rho_n, 1.0)), sub(where(up, ratio, div(1.0, ratio)), 1.0))
    log_ratio = where(logical_or(near, up), log1p(y), neg(log1p(y)))
    inv_b = div(1.0, where(small, add(b, float(_SHIFT)), b))
    h, power, series = 1.0, 1.0, None
    for m in range(0, 2 * len(_STIRLING) - 1):
        if m:
            power = mul(power, inv_b)
            h = add(mul(h, inv_a), power)
        if m % 2 == 0:
            term = mul(h, _STIRLING[m // 2]) if m else _STIRLING[0]
            series = term if series is None else add(series, term)
    series = mul(mul(inv_a, inv_b), series)
    stirling = add(mul(sub(1.0, mul(inv_b, 0.5)), _poly(mul(delta, inv_b), _LOG1P_OVER)), sub(sub(log_a, 1.0), series))
    return add(log_ratio, mul(d, stirling))


def _lgamma_low(w):
    """Where ``_lgamma_below_10`` serves ``_lgamma64``: w in (1/2, 10]."""
    return logical_and(gt(w, 0.5), le(w, 10.0))


def _lgamma_below_10(w):
    """float64 ``lgamma(w)`` for w in (1/2, 10] (elsewhere any finite value) to its relative precision:
    ``lgamma1p`` of ``w - 1`` (a series in it, exact: ``lgamma1p``) after ``n = max(floor(w - 3/2), 0)
    <= 8`` steps of the recurrence down, ``log((w-1)...(w-n))`` (each factor exact) added: two terms of
    one sign above 2, so nothing cancels."""
    steps, u = _below_10_steps(w)
    return add(steps, _lgamma1p(u))


def _below_10_steps(w):
    """``_lgamma_below_10``'s recurrence: ``(log((w-1)...(w-n)), w - n - 1)``, the second in [1/2, 3/2)
    for w in (3/2, 10] (0 below), where ``lgamma1p`` finishes."""
    low = _lgamma_low(w)
    v = where(low, w, 2.0)
    n = maximum(floor(sub(v, 1.5)), 0.0)
    prod = 1.0
    for j in range(1, 9):
        prod = mul(prod, where(le(float(j), n), sub(v, float(j)), 1.0))
    return log(prod), sub(sub(v, n), 1.0)


def _digamma64(w):
    if float64_paths.depth() == 0:  # (a float64 digamma; a narrower one rounds these bits away)
        return _digamma_edges(w, _digamma_accurate(w))
    z, refl, r = _reflected(w)
    zs, small, recip = _shifted(z, lambda v: div(1.0, v), add)
    inv = div(1.0, zs)
    at_z = sub(sub(sub(log(zs), mul(inv, 0.5)), _odd_series(_DIGAMMA, inv, 2)), where(small, recip, 0.0))
    cot = div(math.pi, tan(mul(where(eq(r, 0.0), 0.5, r), math.pi)))
    return _digamma_edges(w, where(refl, sub(at_z, cot), at_z))


def _digamma_edges(w, out):
    """torch's values: -inf at +0, +inf at -0 (the limits from the right and the left), NaN at the other
    poles and at -inf, +inf at +inf."""
    zero = eq(w, 0.0)
    signed = where(lt(div(1.0, where(zero, w, 1.0)), 0.0), math.inf, -math.inf)
    out = where(_pole(w), math.nan, where(isinf(w), where(gt(w, 0.0), math.inf, math.nan), out))
    return where(zero, signed, out)


# float64 digamma near its positive root: psi(u) = (u - root) G(u) / u on [1, 3], the root in two parts
# (``u - root_hi`` is exact there) and G, analytic out to u = -1, a polynomial in t = u - 2 (mpmath's
# chebyfit at 50 digits, degree 21: within 5e-17 relative). Summing the recurrence to 10 and Stirling's
# series there cancelled to an absolute 5e-16 near the root (74 ulps at 1.5, 4000 within 0.01 of it)
_PSI_ROOT = (1.4616321449683622, 9.549995429965697e-17)
_PSI_G = (
    1.5706150772082106, 0.2638296292381025, -0.04273912064774364, 0.009897851182280131, -0.0026564137225807017,
    0.0007704444910697313, -0.00023392420064047517, 7.310840481735818e-05, -2.328865220566858e-05,
    7.515452320984161e-06, -2.447247952442441e-06, 8.019945263273589e-07, -2.640883741492983e-07,
    8.722728942443085e-08, -2.876036749440204e-08, 9.538728472794557e-09, -3.3111577360970643e-09,
    1.1007749260813127e-09, -2.593304064351991e-10, 8.627521254873579e-11, -7.371239911406656e-11,
    2.455499019219194e-11,
)


def _digamma_accurate(w):
    """float64 ``digamma(w)`` within a few ulps, relative also at the root 1.4616...: for ``a`` below 10
    (``a = w``, or ``1 - w`` below 0, reflected) ``psi(u)`` by ``_PSI_G`` at ``u = a - n`` in [2, 3)
    plus the recurrence's ``n <= 7`` positive steps ``1/(a - k)`` (nothing cancels), ``u = a`` on
    [1, 3), ``psi(1 + a) - 1/a`` below 1; Stirling's series from 10. Below 0: on (-20, 0) the root of
    each interval factored out (``_digamma_neg``), below -20 the reflection ``psi(1 - w) - pi cot(pi w)``,
    which cancels near the roots there, to an absolute few ulps of its terms (``cot(pi s)``, ``w``
    reduced exactly to ``s`` in [-1/2, 1/2], as ``sin(pi (1/2 - |s|)) / sin(pi s)``: ``_cot_pi``'s
    two tans were 260 graph nodes)."""
    refl = lt(w, 0.0)
    a = where(refl, sub(1.0, w), w)
    v = where(lt(a, 10.0), a, 2.0)
    below = lt(v, 1.0)
    n = where(lt(v, 3.0), 0.0, sub(floor(v), 2.0))
    u = where(below, v, sub(v, n))  # (exact; below 1 it stands for 1 + v)
    one = cast(below, dt.float64)
    d = sub(sub(u, sub(_PSI_ROOT[0], one)), _PSI_ROOT[1])  # (u - root, root_hi - 1 exact)
    psi_u = div(mul(d, _poly(sub(u, sub(2.0, one)), _PSI_G)), add(u, one))
    steps = where(le(1.0, n), div(1.0, sub(v, 1.0)), 0.0)
    for k in range(2, 8):  # (the smallest first)
        steps = add(steps, where(le(float(k), n), div(1.0, sub(v, float(k))), 0.0))
    small = add(where(below, div(-1.0, v), steps), psi_u)
    za = where(lt(a, 10.0), 10.0, a)
    inv = div(1.0, za)
    big = sub(sub(log(za), mul(inv, 0.5)), _odd_series(_DIGAMMA, inv, 2))
    at_a = where(lt(a, 10.0), small, big)
    t = sub(w, ceil(w))  # (exact below 0, in (-1, 0]; then s in [-1/2, 1/2] and sin(pi s) = +-sin(pi w))
    s = where(lt(t, -0.5), add(t, 1.0), t)
    sin_s = sin(mul(s, math.pi))
    cos_s = sin(mul(sub(0.5, abs_(s)), math.pi))  # (0 at the half integers, relative near them)
    reflected = sub(at_a, div(mul(cos_s, math.pi), sin_s))
    return where(refl, where(gt(w, _PSI_NEG_END), _digamma_neg(w, abs_(sin_s)), reflected), at_a)


# digamma's root in each interval (-k-1, -k) of (-20, 0), as (hi, lo, pi / |sin(pi root)|) (mpmath, 50
# digits): below 0 the reflection psi(1 - w) - pi cot(pi w) cancels near them (4e16 ulps at -5.667)
_PSI_NEG_END = -20.0
_PSI_NEG_ROOTS = (
    (-0.5040830082644554, -8.15428206243813e-18, 3.141851123454259),
    (-1.5734984731623904, -1.574185691077347e-17, 3.227242697072363),
    (-2.6107208684441447, 9.881960746978353e-17, 3.3417244345721966),
    (-3.635293366436901, 5.454396163173039e-17, 3.4484206296467317),
    (-4.653237761743142, -2.5492686201468193e-16, 3.5444448939260167),
    (-5.6671624415568855, -3.2153051074948335e-18, 3.630868139165468),
    (-6.678418213073427, 3.470798723495241e-16, 3.709168988099669),
    (-7.687788325031626, -1.351562494643672e-16, 3.7806510952253163),
    (-8.695764163816401, -3.2859903716289447e-16, 3.846375823567905),
    (-9.702672540001863, -3.2563178405401477e-16, 3.907193684148891),
    (-10.708740838254144, -6.287211750540301e-16, 3.9637879228211306),
    (-11.714133061228955, 8.598250154343834e-16, 4.016712105886352),
    (-12.718971025749207, -4.752312432106917e-16, 4.066419383610186),
    (-13.723347457363827, 4.528278691518058e-16, 4.1132846260813976),
    (-14.727334416018529, -3.6618399963139786e-17, 4.157621087392189),
    (-15.730988906332882, 1.0551956373365842e-16, 4.199693008977511),
    (-16.734356723955734, -1.2039501631800144e-15, 4.23972523328062),
    (-17.73747515997759, -5.125776230727235e-16, 4.277910610745498),
    (-18.7403749447801, 7.757330874026816e-16, 4.3144157662814075),
    (-19.74308167259022, 6.505672516695227e-16, 4.349385634777331),
)
_LOG1P_OVER = tuple((-1) ** j / (j + 1) for j in range(16))  # log1p(y) / y, |y| <= 1/11: to 2**-55


def _digamma_neg(w, sin_w):
    """float64 ``digamma(w)`` for ``w`` in (-20, 0) (not an integer; elsewhere any value) to its relative
    precision, also at its root ``r`` between the poles: ``psi(w) = psi(w) - psi(r) = (w - r) G`` with
    ``w - r`` from ``r``'s two parts (``w - r_hi`` exact near ``r``) and, from the reflection, ``G = pi
    sin(pi (w - r)) / ((w - r) |sin(pi w) sin(pi r)|) - D``, the first term the divided difference of
    ``-pi cot(pi w)``, at least pi**2, the second ``D = (psi(1 - w) - psi(1 - r)) / (r - w) = sum_n 1 / ((n
    + 1 - w) (n + 1 - r))``, below 1 (``_psi_divided``): nothing cancels."""
    rh, rl, c = (full_like(w, v) for v in _PSI_NEG_ROOTS[0])
    for k, row in enumerate(_PSI_NEG_ROOTS[1:], 1):
        past = lt(w, -float(k))
        rh, rl, c = (where(past, v, u) for u, v in zip((rh, rl, c), row, strict=True))
    d = sub(sub(w, rh), rl)
    e = where(gt(d, 0.5), sub(1.0, d), where(lt(d, -0.5), sub(-1.0, d), d))  # (exact; sin(pi e) = sin(pi d))
    outer = div(mul(div(sin(mul(e, math.pi)), d), c), sin_w)
    return mul(d, sub(outer, _psi_divided(sub(1.0, w), sub(sub(1.0, rh), rl), neg(d))))


def _psi_divided(a, b, delta):
    """``(psi(a) - psi(b)) / (a - b) = sum_n 1 / ((n + a) (n + b))`` for float64 ``a, b >= 1`` with ``a -
    b = delta``, ``|delta| < 1``, without the difference's cancellation: 10 terms, then the rest by
    Euler-Maclaurin at ``A = a + 10``, ``B = b + 10``: ``log(A / B) / (A - B)`` (``log1p(y) / y``, ``y =
    delta / B``, a series) ``+ 1 / (2 A B) + sum_k B_2k / (2k) (B**-2k - A**-2k) / (A - B)``, the last
    ``h_(2k-1) / (A B)`` with ``h_m = sum_j A**-j B**(j-m)`` (``h_m = h_(m-1) / A + B**-m``): the series
    of trigamma (``_DIGAMMA``'s coefficients) where ``A = B``."""
    steps = None
    for n in range(_SHIFT - 1, -1, -1):  # (the smallest first)
        term = div(1.0, mul(add(a, float(n)), add(b, float(n))))
        steps = term if steps is None else add(steps, term)
    inv_a, inv_b = div(1.0, add(a, float(_SHIFT))), div(1.0, add(b, float(_SHIFT)))
    h, power, series = 1.0, 1.0, None
    for m in range(1, 2 * len(_DIGAMMA)):
        power = mul(power, inv_b)
        h = add(mul(h, inv_a), power)
        if m % 2:
            term = mul(h, _DIGAMMA[m // 2])
            series = term if series is None else add(series, term)
    tail = add(mul(inv_b, _poly(mul(delta, inv_b), _LOG1P_OVER)), mul(mul(inv_a, inv_b), add(series, 0.5)))
    return add(steps, tail)


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


@plain_unless_float64
@tensor_op("lgamma")
def lgamma(input) -> GraphTensor:  # noqa: A002 - torch's names
    """torch.lgamma (``torch.special.gammaln``): ``log |gamma(x)|``; +inf at the poles (0, -1, -2, ...)
    and at +-inf. Computed in float64 and rounded once (recurrence to 10, Stirling's series, reflection
    below 1/2; between 1/2 and 10 a series in ``x - 1`` after the recurrence down): relative error
    near 1e-15, also at lgamma's zeros at 1 and 2. A float64 input: within 3 ulps of the exact value on
    the positive axis, the zeros included (the reflection only below 0, ``lgamma1p(x) - log(x)`` on
    (0, 1/2], the series about 2 on [3/2, 5/2)); on (-20, -2) within 8 ulps, also at its two zeros
    between each two poles (``_lgamma_neg``; the reflection cancelled there, 8e15 ulps at -3.955);
    elsewhere below 0 the reflection, to an absolute few ulps of ``lgamma(1 - x)``. The gradient is
    ``digamma(x)``, as torch's. Int and bool inputs give float32.

    Args:
        input: a tensor.
    """
    return _gamma_family("lgamma", input, _lgamma64, functools.partial(_polygamma_diff, 0))


@plain_unless_float64
@tensor_op("digamma")
def digamma(input) -> GraphTensor:  # noqa: A002 - torch's names
    """torch.digamma (``torch.special.digamma``, ``psi``): the derivative of ``lgamma``; torch's values at
    the poles: -inf at +0, +inf at -0, NaN at -1, -2, ...; +inf at +inf, NaN at -inf. The gradient is
    ``polygamma(1, x)``. Computed in float64 and rounded once. A float64 input: within 3 ulps of the exact
    value on the positive axis, also at its root 1.4616... (``_digamma_accurate``; torch's is 47 ulps off
    at 1.5), within 5 on (-20, 0), also at its root between each two poles (``_digamma_neg``; the
    reflection cancelled there: 4e16 ulps at -5.667); below -20 the reflection, to an absolute few ulps
    of its terms. Int and bool inputs give float32.

    Args:
        input: a tensor.
    """
    return _gamma_family("digamma", input, _digamma64, functools.partial(_polygamma_diff, 1))


@plain_unless_float64
def multigammaln(input, p: int) -> GraphTensor:  # noqa: A002 - torch's names
    """torch.special.multigammaln (``torch.mvlgamma``): the log of the multivariate gamma function of
    dimension ``p``, ``p (p - 1) / 4 log(pi) + sum_j lgamma(x - j / 2)``, j = 0..p-1, summed in float64
    and rounded once. It is defined for ``x > (p - 1) / 2``; below that this is the same sum of
    ``lgamma``'s, as torch's (2.13, which does not check the values). The gradient is the sum of the
    digammas. Int and bool inputs give float32.

    The ``p`` arguments ``x - j / 2`` are one tensor along a new last dim, so the graph holds one
    ``lgamma`` (and its gradient one ``digamma``) whatever ``p`` is: ``p`` of them made its compile
    ``p`` times ``lgamma``'s.

    Args:
        input: a tensor.
        p: the dimension, an int >= 1.
    """
    x = _float(input, "multigammaln")
    p = check_int("multigammaln", "p", p, 1)
    w = cast(x, dt.float64)
    with renamed("multigammaln"):
        terms = lgamma(add(w.unsqueeze(-1), x.graph.constant(np.arange(p) * -0.5)))
        out = p * (p - 1) / 4 * math.log(math.pi)
        for j in range(p):  # (summed in this order, as when each term was an lgamma of its own)
            out = add(terms[..., j], out)
        return cast(out, x.dtype)


@plain_unless_float64
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


@plain_unless_float64
def polygamma_method(input, n: int) -> GraphTensor:  # noqa: A002 - torch's names
    """torch ``Tensor.polygamma(n)``: ``polygamma(n, self)`` (the order comes second on the method).

    Args:
        input: the tensor.
        n: the order, an int in [0, 150].
    """
    return polygamma(n, input)


# torch.special's further functions: the incomplete gamma functions, Hurwitz's zeta, the Bessel
# functions of the first and second kinds, the modified ones of the second kind, spherical_bessel_j0
# and the orthogonal polynomials. Each computes in float64 and rounds once; the coefficient tables
# (Chebyshev expansions, Temme's) were computed with mpmath at 60 digits ---------------------------
def _log1pmx(lam):
    """``log(lam) - (lam - 1)`` for float64 ``lam > 0``, to its relative precision also near 1: for lam
    in [1/2, 2] from ``t = lam - 1`` (exact there) and ``s = t / (2 + t)`` (``|s| <= 1/3``),
    ``-2 s**2 / (1 - s) + 2 sum_k s**(2k+1) / (2k+1)`` (``log(1 + t) = 2 atanh(s)``, ``t = 2 s / (1 - s)``),
    whose leading term carries it; elsewhere as written."""
    near = logical_and(ge(lam, 0.5), le(lam, 2.0))
    tn = where(near, sub(lam, 1.0), 0.0)
    s = div(tn, add(tn, 2.0))
    s2 = mul(s, s)
    odd = mul(mul(s, s2), _poly(s2, [2 / (2 * k + 3) for k in range(18)]))
    series = add(div(mul(s2, -2.0), sub(1.0, s)), odd)
    lf = where(near, 1.0, lam)
    return where(near, series, sub(log(lf), sub(lf, 1.0)))


def _lgamma1p(u):
    """``lgamma(1 + u)`` for float64 ``u`` in (-1/2, 3/2], to its relative precision also near 0 and 1
    (its zeros): the Taylor series ``-euler u + sum_k zeta(k) (-u)**k / k`` for ``|u| <= 1/2``, and
    ``log(u) + lgamma1p(u - 1)`` above; in float64 (accurate) above 1/2 the series about 2, ``(1 - euler) v +
    sum_k (zeta(k) - 1) (-v)**k / k`` in ``v = u - 1``, where the log and the series cancelled (9 ulps
    of lgamma at 1.6)."""
    up = gt(u, 0.5)
    v = where(up, sub(u, 1.0), u)
    if float64_paths.depth() == 0:
        return where(up, _poly(v, _LGAM2P), _poly(v, _LGAM1P))
    return add(_poly(v, _LGAM1P), where(up, log(where(up, u, 1.0)), 0.0))


def _igam_fac(a, x, ab, scaled):
    """``(x**a exp(-x) / gamma(a), lgamma(1 + a))`` for float64 ``a, x > 0`` (the second for a <= 3/2,
    where Q's series shares it), given ``ab = max(a, 10)`` and ``scaled = exp(ab log1pmx(x / ab))``
    (shared with Temme's expansion). From a = 10 on ``scaled sqrt(a / (2 pi)) / gammastar(a)``
    (gammastar: Stirling's series), whose exponent keeps its relative precision where
    ``a log x - x - lgamma(a)`` would cancel; below, that sum: ``lgamma(a) = lgamma1p(a) - log(a)`` for
    a <= 3/2 (690 at a = 1e-300, where exp's rounding of ``a log x - x - lgamma(a)`` would cost 690
    ulps: ``a exp(a log x - x - lgamma1p(a))``), ``_lgamma_below_10`` on (3/2, 10) (``_lgamma64``'s own
    branch there, without the reflection and Stirling's branches it would build and throw away). The
    two branches' ``lgamma1p`` is one series, at ``a`` or at the recurrence's end."""
    big = ge(a, 10.0)
    asm = where(big, 1.0, a)
    expo = sub(mul(asm, log(x)), x)
    tiny = le(asm, 1.5)
    steps, u = _below_10_steps(asm)
    lg1p = _lgamma1p(where(tiny, asm, u))
    # one exp for the three: exp(-series) of Stirling's, exp(expo - lgamma1p(a)), exp(expo - lgamma(a))
    power = where(big, neg(_odd_series(_STIRLING, div(1.0, ab), 1)),
                  sub(expo, where(tiny, lg1p, add(steps, lg1p))))
    factor = where(big, mul(scaled, sqrt(div(ab, 2 * math.pi))), where(tiny, asm, 1.0))
    return mul(factor, exp(power)), lg1p


_IGAM_SERIES = 120  # P's series: x < a + ... as used, the ratio x / (a + n) is below 0.7 or a <= 20
_IGAMC_CF = 110  # Q's continued fraction for x > max(a, 1.1) outside Temme's region
_IGAMC_SMALL = 26  # Q's series in x for x <= 1.1: 1.1**26 / 26! is 1e-26


def _igamma_parts(a, x):
    """``(P, Q)``, the regularized lower and upper incomplete gamma functions, for float64 ``a, x > 0``
    finite, each to its own relative precision (the regions and methods of Cephes' igam.c, as torch's):
    Temme's uniform asymptotic expansion (``_TEMME``) for a > 20 and ``|x - a| < 0.3 a``; else for
    x > 1.1 and x >= a, Q from Legendre's continued fraction (backward, ``_IGAMC_CF`` terms) and
    ``P = 1 - Q``; else P from its power series ``x**a exp(-x) / gamma(a + 1) sum_n x**n / ((a+1)..(a+n))``
    and ``Q = 1 - P``, except for x <= 1.1 with small a (where P is near 1), where Q is
    ``1 - x**a / gamma(a + 1) + x**a / gamma(a) sum_n (-x)**n / (n! (a + n))`` (expm1 and
    ``_lgamma1p`` for its first part)."""
    # shared: log1pmx(x / a) and its exp(a .) (fac's from a = 10 on, Temme's), lgamma(1 + a) (fac's
    # below 3/2, Q's series')
    ab = where(ge(a, 10.0), a, 10.0)
    lpm = _log1pmx(div(x, ab))
    scaled = exp(mul(ab, lpm))
    fac, lg1p = _igam_fac(a, x, ab, scaled)
    # Temme: Q = erfc(eta sqrt(a/2)) / 2 + exp(-a eta**2 / 2) / sqrt(2 pi a) sum_k C_k(eta) a**-k
    t = sub(div(x, a), 1.0)
    temme = logical_and(gt(a, 20.0), lt(abs_(t), 0.3))
    at = where(temme, a, 30.0)
    eta = mul(sign(t), sqrt(mul(where(temme, lpm, 0.0), -2.0)))  # (ab = a, lpm exact there: |t| < 0.3)
    inv, acc = div(1.0, at), None
    for row in reversed(_TEMME_USED):
        ck = _poly(eta, row) if len(row) > 1 else row[0]
        acc = ck if acc is None else add(mul(acc, inv), ck)
    common = mul(div(where(temme, scaled, 1.0), sqrt(mul(at, 2 * math.pi))), acc)
    erfc_arg, erfc_neg = _erfc_pair(mul(eta, sqrt(mul(at, 0.5))))
    q_temme = add(mul(erfc_arg, 0.5), common)
    p_temme = sub(mul(erfc_neg, 0.5), common)
    # Q's continued fraction
    use_cf = logical_and(gt(x, 1.1), ge(x, a))
    xc, ac = where(use_cf, x, 2.0), where(use_cf, a, 1.0)
    f = add(sub(xc, ac), 2 * _IGAMC_CF + 1.0)
    for n in range(_IGAMC_CF, 0, -1):
        f = sub(add(sub(xc, ac), 2 * n - 1.0), div(mul(sub(float(n), ac), float(n)), f))
    q_cf = div(where(use_cf, fac, 0.0), f)
    # P's series
    ser, c = 1.0, 1.0
    for n in range(1, _IGAM_SERIES + 1):
        c = mul(c, div(x, add(a, float(n))))
        ser = add(ser, c)
    p_ser = div(mul(ser, fac), a)
    # Q's series for small x
    small_q = logical_and(le(x, 1.1), where(le(x, 0.5), ge(div(-0.4, log(x)), a), ge(mul(x, 1.1), a)))
    xs, as_ = where(small_q, x, 0.5), where(small_q, a, 0.5)
    s, term = 0.0, 1.0
    for n in range(1, _IGAMC_SMALL + 1):
        term = mul(term, div(neg(xs), float(n)))
        s = add(s, div(term, add(as_, float(n))))
    la = mul(as_, log(x))  # (x = xs, as_ <= 1.21 here: lg1p is lgamma(1 + as_); log(x) is fac's)
    q_small = sub(neg(expm1(sub(la, lg1p))), mul(mul(exp(sub(la, lg1p)), as_), s))
    p = where(temme, p_temme, where(use_cf, sub(1.0, q_cf), where(small_q, sub(1.0, q_small), p_ser)))
    q = where(temme, q_temme, where(use_cf, q_cf, where(small_q, q_small, sub(1.0, p_ser))))
    return p, q, fac


def _igamma(op: str, upper: bool, input, other):  # noqa: A002 - torch's names
    a, x = coerce(op, input, other, min_kind="f")
    wa, wx = cast(a, dt.float64), cast(x, dt.float64)
    ok = logical_and(logical_and(gt(wa, 0.0), gt(wx, 0.0)),
                     logical_and(logical_not(isinf(wa)), logical_not(isinf(wx))))
    sa, sx = where(ok, wa, 1.0), where(ok, wx, 1.0)
    p, q, fac = _igamma_parts(sa, sx)
    out = q if upper else p
    # the limits: P(a, 0) = 0, P(0, x > 0) = 1, P(inf, x) = 0, P(a, inf) = 1; NaN below 0, at
    # P(0, 0) and P(inf, inf)
    lo, hi = (1.0, 0.0) if upper else (0.0, 1.0)
    bad = logical_or(logical_or(lt(wa, 0.0), lt(wx, 0.0)), logical_or(isnan(wa), isnan(wx)))
    bad = logical_or(bad, logical_and(eq(wa, 0.0), eq(wx, 0.0)))
    bad = logical_or(bad, logical_and(isinf(wa), isinf(wx)))
    edge = where(logical_or(eq(wx, 0.0), isinf(wa)), lo, hi)  # (x = inf or a = 0: hi)
    out = where(bad, math.nan, where(ok, out, edge))

    # (created now, so that it names where the op was called; grad raises it only if asked for)
    refused = op_error(NotImplementedError, op, "the gradient by input (a, the first argument) is not implemented, "
                       f"as torch's ('the derivative for '{'igammac' if upper else 'igamma'}: input' is not "
                       "implemented'): make a a constant or detach() it, or differentiate by other (x) only", a)

    def rule(_, g, a, x):
        # d/dx P = x**(a-1) exp(-x) / gamma(a) = fac / x: at x = 0 inf for a < 1, 1 for a = 1, 0 above
        at0 = eq(x, 0.0)
        slope = where(ok, div(fac, sx), where(at0, where(lt(a, 1.0), math.inf, where(eq(a, 1.0), 1.0, 0.0)),
                                              0.0))
        slope = where(bad, math.nan, slope)
        by_x = mul(g, cast(neg(slope) if upper else slope, g.dtype))
        return [refused, by_x]

    out = cast(out, a.dtype)
    return a.graph.custom_vjp(out, [a, x], rule)


@plain_unless_float64
def gammainc(input, other) -> GraphTensor:  # noqa: A002 - torch's names
    """torch.special.gammainc (``torch.igamma``): the regularized lower incomplete gamma function
    ``P(a, x) = gamma(a)**-1 int_0^x t**(a-1) exp(-t) dt`` with ``a = input``, ``x = other`` (both >= 0;
    broadcast, promoted, int and bool to float32). Computed in float64 (``_igamma_parts``) and rounded
    once: relative error a few float64 ulps times the condition ``1 + |x - a|`` of ``exp(-x) x**a`` (so
    about 1e-13 where P is near the underflow). The limits: ``P(a, 0) = 0``, ``P(0, x) = 1`` for
    x > 0, ``P(inf, x) = 0``, ``P(a, inf) = 1``; NaN for a negative ``a`` or ``x``, at ``P(0, 0)``, at
    ``P(inf, inf)`` and NaN.

    The gradient by ``x`` is ``x**(a-1) exp(-x) / gamma(a)`` (at x = 0: inf for a < 1, 1 for a = 1, 0
    above; torch's formula gives NaN at a = 1). By ``a`` there is none: asking for a gradient through
    ``a`` (``train.grad``, ``compile_step``) raises NotImplementedError naming gammainc and its input,
    as torch's backward does ("the derivative for 'igamma: input' is not implemented").

    Args:
        input: ``a``, a tensor or a number (with ``other`` a tensor).
        other: ``x``, a tensor or a number.
    """
    return _igamma("gammainc", False, input, other)


@plain_unless_float64
def gammaincc(input, other) -> GraphTensor:  # noqa: A002 - torch's names
    """torch.special.gammaincc (``torch.igammac``): ``Q(a, x) = 1 - P(a, x)``, computed on its own so
    that it keeps its relative precision where P is near 1 (see ``gammainc``). The limits:
    ``Q(a, 0) = 1``, ``Q(0, x) = 0`` for x > 0, ``Q(inf, x) = 1``, ``Q(a, inf) = 0``; NaN as gammainc's.
    The gradient by ``x`` is ``-x**(a-1) exp(-x) / gamma(a)``; by ``a`` asking raises (as gammainc's).

    Args:
        input: ``a``, a tensor or a number (with ``other`` a tensor).
        other: ``x``, a tensor or a number.
    """
    return _igamma("gammaincc", True, input, other)
_TEMME = (  # Temme's C_k(eta) = sum_n d[k][n] eta**n, k = 0..24 (DLMF 8.12.10's recurrence, tools: mpmath)
    (-0.3333333333333333, 0.08333333333333333, -0.014814814814814815, 0.0011574074074074073, 0.0003527336860670194,
    -0.0001787551440329218, 3.919263178522438e-05, -2.185448510679992e-06, -1.85406221071516e-06,
    8.296711340953087e-07, -1.7665952736826078e-07, 6.707853543401498e-09, 1.0261809784240309e-08,
    -4.382036018453353e-09, 9.14769958223679e-10, -2.5514193994946248e-11, -5.830772132550426e-11,
    2.4361948020667415e-11, -5.0276692801141755e-12),
    (-0.001851851851851852, -0.003472222222222222, 0.0026455026455026454, -0.0009902263374485596,
    0.00020576131687242798, -4.018775720164609e-07, -1.8098550334489977e-05, 7.64916091608111e-06,
    -1.6120900894563446e-06, 4.647127802807434e-09, 1.378633446915721e-07, -5.752545603517705e-08,
    1.1951628599778148e-08, -1.7543241719747647e-11, -1.0091543710600413e-09, 4.162792991842583e-10,
    -8.56390702649298e-11, 6.067215101604758e-14, 7.1624989648114856e-12),
    (0.004133597883597883, -0.0026813271604938273, 0.0007716049382716049, 2.0093878600823047e-06,
    -0.0001073665322636516, 5.2923448829120125e-05, -1.2760635188618728e-05, 3.423578734096138e-08,
    1.3721957309062934e-06, -6.298992138380055e-07, 1.4280614206064242e-07, -2.0477098421990866e-10,
    -1.409252991086752e-08, 6.228974084922022e-09, -1.3670488396617114e-09, 9.428356159014678e-13,
    1.2872252400089318e-10, -5.5645956134363323e-11),
    (0.0006494341563786008, 0.00022947209362139917, -0.0004691894943952557, 0.00026772063206283885,
    -7.561801671883977e-05, -2.396505113867297e-07, 1.1082654115347302e-05, -5.6749528269915965e-06,
    1.4230900732435883e-06, -2.7861080291528143e-11, -1.6958404091930278e-07, 8.099464905388083e-08,
    -1.9111168485973655e-08, 2.3928620439808118e-12, 2.0620131815488797e-09, -9.460496661855133e-10,
    2.1541049775774907e-10),
    (-0.0008618882909167117, 0.0007840392217200666, -0.0002990724803031902, -1.4638452578843418e-06,
    6.641498215465122e-05, -3.968365047179435e-05, 1.1375726970678419e-05, 2.507497226237533e-10,
    -1.6954149536558305e-06, 8.907507532205309e-07, -2.292934834000805e-07, 2.956794137544049e-11,
    2.8865829742708783e-08, -1.4189739437803219e-08, 3.4463580499464896e-09),
    (-0.00033679855336635813, -6.972813758365857e-05, 0.0002772753244959392, -0.00019932570516188847,
    6.797780477937208e-05, 1.419062920643967e-07, -1.3594048189768693e-05, 8.018470256334202e-06,
    -2.291481176508095e-06, -3.252473551298454e-10, 3.4652846491085265e-07, -1.8447187191171344e-07,
    4.8240967037894184e-08),
    (0.0005313079364639922, -0.0005921664373536939, 0.0002708782096718045, 7.902353232660328e-07,
    -8.153969367561969e-05, 5.61168275310625e-05, -1.8329116582843375e-05, -3.0796134506033047e-09,
    3.465155368803609e-06, -2.0291327396058603e-06, 5.788792863149004e-07, 2.338630673826657e-13,
    -8.828600746330484e-08),
    (0.00034436760689237765, 5.171790908260592e-05, -0.00033493161081142234, 0.0002812695154763237,
    -0.00010976582244684731, -1.2741009095484485e-07, 2.7744451511563645e-05, -1.8263488805711332e-05,
    5.7876949497350525e-06, 4.93875893393627e-10, -1.0595367014026043e-06, 6.166714376110408e-07),
    (-0.0006526239185953094, 0.0008394987206720873, -0.000438297098541721, -6.969091458420552e-07,
    0.00016644846642067547, -0.00012783517679769218, 4.629953263691304e-05, 4.557909867922708e-09,
    -1.0595271125805195e-05, 6.783342904865167e-06, -2.1075476666258803e-06),
    (-0.0005967612901927463, -7.204895416020011e-05, 0.0006782308837667328, -0.0006401475260262758,
    0.00027750107634328704, 1.819700838046515e-07, -8.479507117068503e-05, 6.105192082501531e-05,
    -2.1073920183404862e-05),
    (0.0013324454494800656, -0.0019144384985654776, 0.0011089369134596636, 9.9324041226423e-07,
    -0.0005087450129309319, 0.00042735056665392886, -0.00016858853767910798),
    (0.001579727660730835, 0.00016251626278391583, -0.0020633421035543276, 0.00213896861856891,
    -0.0010108559391263003, -3.99127055299192e-07, 0.0003623502508476469),
    (-0.004072512119514016, 0.00640336283380807, -0.004041016108167662, -2.1837328028662328e-06,
    0.002174044180125464, -0.001970044051841889),
    (-0.0059475779383993, -0.0005401647678926045, 0.00879104135507679, -0.009857631558785612),
    (0.01740202778752271, -0.02952788094569912, 0.020045875571402798),
    (0.03024912416090589,),
    (-0.09905102088015905,),
    (-0.19994542198219728,),
    (0.7243860850402943,),
    (1.6668949727276812,),
    (-6.618829886137293,),
    (-17.112706061976095,),
    (73.89033153567425,),
    (212.1683709838252,),
    (-989.5964309832236,),
)


def _temme_used(rows, eta: float = 0.337, a: float = 20.0, drop: float = 1e-19) -> tuple[tuple[float, ...], ...]:
    """``rows`` without the terms ``d[k][n] eta**n a**-k`` that stay below ``drop`` in Temme's region
    (a > 20, ``|x/a - 1| < 0.3``: ``|eta| <= 0.337``, its value at x/a = 0.7), each row cut after its
    last larger term (a row with none is 0) and the trailing rows that have none left out (rows 13 to
    24; 135 of 183 terms are kept). There P and Q are at least twice the sum's factor
    ``exp(-a eta**2 / 2) / sqrt(2 pi a)`` (2.3 times at a = 20, x = 1.3 a: mpmath; ``erfc(eta sqrt(a/2))
    / 2`` is about that factor over eta), so the terms left out, about 50 below 1e-19 of it, move them
    by below 0.03 of a float64 ulp; each term kept is a multiply and an add in every gammainc's graph
    (the largest kernel's polynomials)."""
    used = []
    for k, row in enumerate(rows):
        big = [n for n, c in enumerate(row) if abs(c) * eta**n * a**-k > drop]
        used.append(tuple(row[: big[-1] + 1]) if big else (0.0,))
    while used[-1] == (0.0,):
        used.pop()
    return tuple(used)


_TEMME_USED = _temme_used(_TEMME)


# lgamma(2 + v)'s Taylor series, (1 - euler) v + sum_k (zeta(k) - 1) (-v)**k / k (mpmath, 50 digits), to
# below 1e-19 of the sum for |v| <= 1/2
_LGAM2P = (
    0.0, 0.42278433509846713, 0.3224670334241132, -0.0673523010531981, 0.020580808427784546, -0.007385551028673986,
    0.0028905103307415234, -0.001192753911703261, 0.0005096695247430425, -0.00022315475845357939,
    9.945751278180853e-05, -4.492623673813314e-05, 2.050721277567069e-05, -9.439488275268397e-06,
    4.374866789907488e-06, -2.039215753801366e-06, 9.55141213040742e-07, -4.492469198764566e-07,
    2.1207184805554665e-07, -1.0043224823968099e-07, 4.7698101693639804e-08, -2.2711094608943164e-08,
    1.0838659214896955e-08, -5.183475041970047e-09, 2.4836745438024785e-09, -1.1921401405860912e-09,
    5.731367241678862e-10, -2.7595228851242334e-10, 1.330476437424449e-10, -6.4229645638381e-11,
    3.1044247747322276e-11,
)
_LGAM1P = (0.0, -0.5772156649015329, 0.8224670334241132, -0.40068563438653143, 0.27058080842778454,
    -0.20738555102867398, 0.1695571769974082, -0.1440498967688461, 0.12550966952474304, -0.11133426586956469,
    0.1000994575127818, -0.09095401714582904, 0.083353840546109, -0.0769325164113522, 0.07143294629536133,
    -0.06666870588242046, 0.06250095514121304, -0.058823978658684585, 0.055555767627403614, -0.05263167937961666,
    0.05000004769810169, -0.047619070330142226, 0.04545455629320467, -0.04347826605304026, 0.04166666915034121,
    -0.04000000119214014, 0.03846153903467518, -0.037037037312989324, 0.035714285847333355, -0.034482758684919304,
    0.03333333336437758, -0.03225806453115042, 0.03125000000727597, -0.030303030306558044, 0.029411764707594344,
    -0.02857142857226011, 0.027777777778181998, -0.027027027027223673, 0.02631578947377995, -0.025641025641072283,
    0.025000000000022737, -0.024390243902450117, 0.023809523809529224, -0.023255813953491015, 0.02272727272727402,
    -0.022222222222222855, 0.021739130434782917, -0.021276595744681003, 0.02083333333333341, -0.02040816326530616,
    0.020000000000000018, -0.019607843137254912, 0.019230769230769235, -0.01886792452830189)



# Hurwitz's zeta function ----------------------------------------------------------------------------
_ZETA_TERMS = 9  # terms summed before Euler-Maclaurin's tail at w = q + 9 >= 9
_ZETA_EM = tuple(float(b / math.factorial(2 * k + 2)) for k, b in enumerate(_bernoulli_even(12)))  # B_2k/(2k)!


def _zeta_pos(x, q):
    """``sum_k (q + k)**-x`` for float64 ``x > 1`` finite and ``q > 0`` (Cephes' zeta.c, as torch's):
    the first ``_ZETA_TERMS + 1`` terms, then Euler-Maclaurin's tail at ``w = q + 9``:
    ``w**(1-x) / (x - 1) - w**-x / 2 + sum_j B_2j / (2j)! x (x+1)..(x+2j-2) w**(-x-2j+1)``, 12 terms (the
    next one is below 1e-17 of the sum for every ``x``: large ``x`` make ``w**-x`` negligible against
    ``q**-x``). Each power is ``exp(-x log(q + k))``: relative error near ``(1 + x |log q|)`` ulps, the
    function's own condition in ``x``."""
    s = None
    for k in range(_ZETA_TERMS + 1):
        t = exp(mul(neg(x), log(add(q, float(k)))))
        s = t if s is None else add(s, t)
    w = add(q, float(_ZETA_TERMS))
    b = t  # w**-x
    s = add(sub(s, mul(b, 0.5)), div(mul(b, w), sub(x, 1.0)))
    rise, inv_w, k = b, div(1.0, w), 0.0
    for c in _ZETA_EM:
        rise = mul(mul(rise, add(x, k)), inv_w)  # x..(x+2j-2) w**(-x-2j+1)
        s = add(s, mul(rise, c))
        rise = mul(mul(rise, add(x, k + 1.0)), inv_w)
        k += 2.0
    return s


def _zeta64(x, q):
    """Hurwitz's zeta in float64 with every edge (see ``zeta``); for ``q < 0`` (integer ``x`` only) from
    the positive argument: with ``p = -q`` and ``f = p - floor(p)``, the terms ``(q + k)**-x`` below 0
    are ``(-1)**x`` times ``zeta(x, f) - zeta(x, p + 1)``, the rest ``zeta(x, 1 - f)``; for odd ``x``
    the result is absolute near ``zeta(x, f)``'s rounding where the terms cancel."""
    finite = logical_and(logical_not(isinf(x)), gt(x, 1.0))
    xs = where(finite, x, 2.0)
    x_int = eq(xs, floor(xs))
    odd = logical_and(x_int, eq(sub(xs, mul(floor(mul(xs, 0.5)), 2.0)), 1.0))
    neg_q = lt(q, 0.0)
    p = neg(q)
    f = sub(p, floor(p))
    inside = logical_and(neg_q, gt(f, 0.0))
    f_s = where(inside, f, 0.5)
    q_s = where(gt(q, 0.0), where(isinf(q), 1.0, q), f_s)
    main = _zeta_pos(xs, q_s)
    tail, mirror = _zeta_pos(xs, where(inside, add(p, 1.0), 1.0)), _zeta_pos(xs, sub(1.0, f_s))
    # (odd x: the terms at -(f + j) and 1 - f + j nearly cancel for f near 1/2, exactly at f = 1/2, so
    # the two sums at f and 1 - f are subtracted first; even x: all positive but the smaller tail)
    refl = where(odd, add(tail, sub(mirror, main)), sub(add(main, mirror), tail))
    out = where(neg_q, where(x_int, refl, math.nan), main)
    # the poles q = 0, -1, -2, ...: (q - pole)**-x, so +inf for even x (both sides), for odd x -inf from
    # the left (so -0.0: -inf) and +inf from the right (+0.0), NaN at the negative ones
    zero = eq(q, 0.0)
    pole = logical_and(le(q, 0.0), eq(q, floor(q)))
    neg_zero = lt(div(1.0, where(zero, q, 1.0)), 0.0)
    at_pole = where(x_int, where(odd, where(zero, where(neg_zero, -math.inf, math.inf), math.nan), math.inf), math.nan)
    out = where(pole, at_pole, where(isinf(q), where(gt(q, 0.0), 0.0, math.nan), out))
    # x = 1: inf (the series diverges), x < 1 NaN (as torch's: no continuation), x = inf: the limit of
    # q**-x, inf for 0 < q < 1, 1 at q = 1, 0 above (NaN for q <= 0)
    at_inf = where(lt(q, 1.0), where(gt(q, 0.0), math.inf, math.nan), where(eq(q, 1.0), 1.0, 0.0))
    out = where(eq(x, 1.0), where(isnan(q), math.nan, math.inf), where(lt(x, 1.0), math.nan, out))
    out = where(isinf(x), where(gt(x, 0.0), at_inf, math.nan), out)
    return where(logical_or(isnan(x), isnan(q)), math.nan, out)


def _zeta_diff(x, q):
    """``_zeta64`` whose gradient by ``q`` is ``-x zeta(x + 1, q)`` (itself differentiable); by ``x``
    there is none: asking raises, as torch's "the derivative for 'zeta' is not implemented"."""
    out = _zeta64(x, q)
    refused = op_error(NotImplementedError, "zeta", "the gradient by input (x, the first argument) is not "
                       "implemented, as torch's ('the derivative for 'zeta' is not implemented'): make x a "
                       "constant or detach() it, or differentiate by other (q) only", x)
    return x.graph.custom_vjp(out, [x, q], lambda y, g, x, q: [refused,
                                                                mul(g, neg(mul(x, _zeta_diff(add(x, 1.0), q))))])


@plain_unless_float64
def zeta(input, other) -> GraphTensor:  # noqa: A002 - torch's names
    """torch.special.zeta: Hurwitz's zeta function ``sum_k (q + k)**-x``, ``x = input``, ``q = other``
    (broadcast, promoted, int and bool to float32; either may be a number). Computed in float64 and
    rounded once (``_zeta_pos``): relative error a few ulps times ``1 + x |log q|`` (the condition of
    ``q**-x``). Defined for ``x > 1``: inf at ``x = 1``, NaN below (as torch's; no analytic
    continuation). For ``q < 0`` only integer ``x`` give a real sum (else NaN). At the poles
    ``q = 0, -1, -2, ...``: +inf for even ``x``; for odd ``x`` +inf at +0, -inf at -0 and NaN at the
    negative ones, whose two one-sided limits differ (torch: +inf everywhere). ``zeta(x, +inf)`` and
    ``zeta(+inf, q > 1)`` are 0 (torch: NaN), ``zeta(+inf, 1)`` is 1, ``zeta(+inf, 0 < q < 1)`` inf.

    The gradient by ``q`` is ``-x zeta(x + 1, q)``, as torch's; by ``x`` there is none: asking for it
    (``train.grad``, ``compile_step``, also through the gradient by ``q``) raises NotImplementedError, as
    torch's backward does.

    Args:
        input: ``x``, a tensor or a number (with ``other`` a tensor).
        other: ``q``, a tensor or a number.
    """
    x, q = coerce("zeta", input, other, min_kind="f")
    return cast(_zeta_diff(cast(x, dt.float64), cast(q, dt.float64)), x.dtype)



# the orthogonal polynomials: torch's three-term recurrences, unrolled to the degree n (a number,
# truncated toward zero as torch's int64 cast; below 0 the value is 0, as torch's) ----------------
_POLY_MAX = 1024  # the largest degree: the recurrence is unrolled into the graph, 3 to 5 ops a step


def _degree(op: str, n, x) -> int:
    if isinstance(n, GraphTensor):
        raise op_error(TypeError, op, "n must be a number: the recurrence is unrolled to degree n when the graph is "
                       "built, so a tensor n (known only at run time) is not supported", x)
    if not isinstance(n, numbers.Real) or not math.isfinite(float(n)):
        raise op_error(TypeError if not isinstance(n, numbers.Real) else ValueError, op,
                       f"n must be a finite number, got {n!r}", x)
    k = int(n)  # (toward zero, as torch's cast)
    if k > _POLY_MAX:
        raise op_error(ValueError, op, f"degree n = {k} is past {_POLY_MAX} (the recurrence is unrolled into the "
                       "graph, one step a degree)", x)
    return k


# name -> (shifted, first(y), step(k, y, p, q) -> the degree k + 1 value from p (k - 1) and q (k), sign
# of the leading coefficient for degree n)
_POLYS = {
    "chebyshev_polynomial_t": (lambda y: y, lambda k, y, p, q: sub(mul(add(y, y), q), p), 1),
    "chebyshev_polynomial_u": (lambda y: add(y, y), lambda k, y, p, q: sub(mul(add(y, y), q), p), 1),
    "chebyshev_polynomial_v": (lambda y: sub(add(y, y), 1.0), lambda k, y, p, q: sub(mul(add(y, y), q), p), 1),
    "chebyshev_polynomial_w": (lambda y: add(add(y, y), 1.0), lambda k, y, p, q: sub(mul(add(y, y), q), p), 1),
    "hermite_polynomial_h": (lambda y: add(y, y), lambda k, y, p, q: sub(mul(add(y, y), q), mul(p, 2.0 * k)), 1),
    "hermite_polynomial_he": (lambda y: y, lambda k, y, p, q: sub(mul(y, q), mul(p, float(k))), 1),
    "laguerre_polynomial_l": (lambda y: sub(1.0, y),
                              lambda k, y, p, q: div(sub(mul(sub(2.0 * k + 1, y), q), mul(p, float(k))), k + 1.0), -1),
    "legendre_polynomial_p": (lambda y: y,
                              lambda k, y, p, q: div(sub(mul(mul(y, q), 2.0 * k + 1), mul(p, float(k))), k + 1.0), 1),
}


def _orthogonal(op: str, base: str, shifted: bool, input, n):  # noqa: A002 - torch's names
    x = _float(input, op)
    k = _degree(op, n, x)
    w = cast(x, dt.float64)
    y = sub(add(w, w), 1.0) if shifted else w  # (the shifted ones: of 2x - 1, as torch's)
    first, step, lead = _POLYS[base]
    if k < 0:
        out = full_like(w, 0.0)
    elif k == 0:
        out = full_like(w, 1.0)
    else:
        p, q = full_like(w, 1.0), first(y)
        for j in range(1, k):
            p, q = q, step(j, y, p, q)
        # past float64's range the recurrence makes inf - inf: there the value is the leading term's
        # infinity, sign(y)**n times the leading coefficient's sign
        sign_n = sign(y) if k % 2 else abs_(sign(y))
        big = mul(math.inf, mul(sign_n, float(lead ** k)))
        out = where(logical_and(isnan(q), logical_not(isnan(y))), big, q)
    return cast(out, x.dtype)


def _poly_op(base: str, shifted: bool = False):
    op = ("shifted_" if shifted else "") + base
    what = {"chebyshev_polynomial_t": "the Chebyshev polynomial of the first kind T_n",
            "chebyshev_polynomial_u": "the Chebyshev polynomial of the second kind U_n",
            "chebyshev_polynomial_v": "the Chebyshev polynomial of the third kind V_n",
            "chebyshev_polynomial_w": "the Chebyshev polynomial of the fourth kind W_n",
            "hermite_polynomial_h": "the physicists' Hermite polynomial H_n",
            "hermite_polynomial_he": "the probabilists' Hermite polynomial He_n",
            "laguerre_polynomial_l": "the Laguerre polynomial L_n",
            "legendre_polynomial_p": "the Legendre polynomial P_n"}[base]

    def fn(input, n) -> GraphTensor:  # noqa: A002 - torch's names
        return _orthogonal(op, base, shifted, input, n)

    fn.__name__ = fn.__qualname__ = op
    fn.__doc__ = f"""torch.special.{op}: {what}{' of 2x - 1' if shifted else ''}, by torch's three-term
    recurrence in float64 (rounded once; the recurrence is the polynomial, so the values are torch's to
    rounding, and its trigonometric forms for |x| < 1 agree to a few ulps of max(1, |value|)). ``n`` is
    a number (not a tensor: the recurrence is unrolled when the graph is built), truncated toward zero
    as torch's, at most {_POLY_MAX}; below 0 the value is 0, as torch's. Past float64's range the
    value is the leading term's infinity (torch's recurrence gives NaN there). The gradient by ``input``
    is the polynomial's derivative (autograd through the recurrence; torch has none). Int and bool inputs
    give float32.

    Args:
        input: a tensor.
        n: the degree, a number.
    """
    return tensor_op(op)(fn)


chebyshev_polynomial_t = _poly_op("chebyshev_polynomial_t")
chebyshev_polynomial_u = _poly_op("chebyshev_polynomial_u")
chebyshev_polynomial_v = _poly_op("chebyshev_polynomial_v")
chebyshev_polynomial_w = _poly_op("chebyshev_polynomial_w")
shifted_chebyshev_polynomial_t = _poly_op("chebyshev_polynomial_t", True)
shifted_chebyshev_polynomial_u = _poly_op("chebyshev_polynomial_u", True)
shifted_chebyshev_polynomial_v = _poly_op("chebyshev_polynomial_v", True)
shifted_chebyshev_polynomial_w = _poly_op("chebyshev_polynomial_w", True)
hermite_polynomial_h = _poly_op("hermite_polynomial_h")
hermite_polynomial_he = _poly_op("hermite_polynomial_he")
laguerre_polynomial_l = _poly_op("laguerre_polynomial_l")
legendre_polynomial_p = _poly_op("legendre_polynomial_p")


# Bessel functions: J0, J1, Y0, Y1 below 5 from Chebyshev expansions in z = x**2 (J's divided by
# their first zero's factor, multiplied back as (x - j) (x + j) with j in two parts, so that J keeps
# its relative precision there; Y's less their log term), above 5 Hankel's form
# J = (P cos(chi) - Q sin(chi)) sqrt(2 / (pi x)), Y = (P sin(chi) + Q cos(chi)) sqrt(2 / (pi x)), with
# P and xQ Chebyshev expansions in 25 / x**2 up to 25 and the asymptotic series in 1 / x**2 above
# (its next term below 1e-19). K0, K1: Chebyshev expansions in x**2 below 1 (less their log terms),
# of sqrt(x) exp(x) K in 1/x up to 25, the asymptotic series above ------------------------------
@functools.cache
def _hankel(nu: int, odd: bool, count: int) -> tuple[float, ...]:
    """Coefficients of Hankel's asymptotic series: ``a_k(nu) = prod_{j<=k} (4 nu**2 - (2j - 1)**2) /
    (k! 8**k)``; with ``odd``, ``(-1)**k a_(2k+1)`` (xQ's series in x**-2), else ``(-1)**k a_(2k)`` (P's),
    or with ``count`` < 0 all ``a_k``, k < -count (K's series in 1/x)."""
    def a(k):
        p = Fraction(1)
        for j in range(1, k + 1):
            p *= Fraction(4 * nu * nu - (2 * j - 1) ** 2, 8 * j)
        return p
    if count < 0:
        return tuple(float(a(k)) for k in range(-count))
    return tuple(float((-1) ** k * a(2 * k + odd)) for k in range(count))


_HANKEL_TERMS = 13  # P's and xQ's series past 25: the next term is below 1e-19
_K_TERMS = 25  # K's series past 25


def _bessel_jy(nu: int, second: bool, w):
    """J_nu (``second``: Y_nu) of float64 ``w``, nu = 0 or 1, with its derivative as the gradient
    (itself differentiable): J0' = -J1, Y0' = -Y1, J1' = J0 - J1/x (1/2 at 0), Y1' = Y0 - Y1/x."""
    a = abs_(w)
    near = le(a, 5.0)
    xn = where(near, a, 1.0)
    z = mul(xn, xn)
    if nu == 0:
        hi, lo = _J0_ZERO
        j_near = mul(mul(sub(sub(xn, hi), lo), add(xn, hi)), _cheb(z, _J0_NEAR, 0.0, 25.0))
    else:
        hi, lo = _J1_ZERO
        j_near = mul(mul(mul(sub(sub(xn, hi), lo), add(xn, hi)), _cheb(z, _J1_NEAR, 0.0, 25.0)), xn)
    if second:
        two_log = mul(log(xn), 2 / math.pi)
        if nu == 0:
            v_near = add(_cheb(z, _Y0_NEAR, 0.0, 25.0), mul(two_log, j_near))
        else:
            v_near = add(mul(_cheb(z, _Y1_NEAR, 0.0, 25.0), xn),
                         sub(mul(two_log, j_near), div(2 / math.pi, xn)))
    else:
        v_near = j_near
    xf = where(near, 6.0, a)
    mid = le(xf, 25.0)
    u = div(1.0, mul(xf, xf))
    um = where(mid, mul(u, 25.0), 0.5)
    p_mid, q_mid = (_cheb(um, c, 1 / 25, 1.0) for c in ((_P0_MID, _Q0_MID) if nu == 0 else (_P1_MID, _Q1_MID)))
    p_far, q_far = _poly(u, _hankel(nu, False, _HANKEL_TERMS)), _poly(u, _hankel(nu, True, _HANKEL_TERMS - 1))
    p = where(mid, p_mid, p_far)
    q = div(where(mid, q_mid, q_far), xf)
    s, c = sin(xf), cos(xf)
    # chi = x - (2 nu + 1) pi / 4: sqrt(2) (cos chi, sin chi) = (c + s, s - c) for nu = 0, (s - c, -s - c) for 1
    cc, sc = (add(c, s), sub(s, c)) if nu == 0 else (sub(s, c), neg(add(s, c)))
    scale = div(1.0 / math.sqrt(math.pi), sqrt(xf))
    v_far = mul(add(mul(p, sc), mul(q, cc)) if second else sub(mul(p, cc), mul(q, sc)), scale)
    v = where(near, v_near, where(isinf(a), 0.0, v_far))
    if second:  # -inf at 0, NaN below 0 (and at -inf)
        v = where(eq(w, 0.0), -math.inf, where(lt(w, 0.0), math.nan, v))
    elif nu:
        v = where(_neg_side(w), neg(v), v)

    def slope(w, y):
        if nu == 0:
            return neg(_bessel_jy(1, second, w))
        at0 = eq(w, 0.0)
        return sub(_bessel_jy(0, second, w), where(at0, 0.5, div(y, where(at0, 1.0, w))))

    return _derivative(v, w, slope)


def _bessel_k(nu: int, scaled: bool, w):
    """K_nu (``scaled``: ``exp(x) K_nu(x)``) of float64 ``w``, nu = 0 or 1, with its derivative as the
    gradient: K0' = -K1, K1' = -K0 - K1/x; scaled, K0e' = K0e - K1e, K1e' = K1e - K0e - K1e/x. +inf at 0
    (K's pole), NaN below 0, 0 at +inf."""
    near = le(w, 1.0)
    xn = where(logical_and(near, gt(w, 0.0)), w, 0.5)
    z = mul(xn, xn)
    i_nu = _bessel(nu, False, xn)
    if nu == 0:
        k_near = sub(_cheb(z, _K0_NEAR, 0.0, 1.0), mul(log(xn), i_nu))
    else:
        k_near = add(add(mul(_cheb(z, _K1_NEAR, 0.0, 1.0), xn), div(1.0, xn)), mul(log(xn), i_nu))
    if scaled:
        k_near = mul(k_near, exp(xn))
    xf = where(near, 2.0, w)
    t = div(1.0, xf)
    mid = le(xf, 25.0)
    core = where(mid, _cheb(where(mid, t, 0.5), _K0_MID if nu == 0 else _K1_MID, 1 / 25, 1.0),
                 mul(_poly(t, _hankel(nu, False, -_K_TERMS)), math.sqrt(math.pi / 2)))
    far = div(core, sqrt(xf))
    if not scaled:
        half = exp(mul(xf, -0.5))  # (exp(-x) underflows before K does)
        far = mul(mul(far, half), half)
    v = where(near, k_near, far)
    v = where(eq(w, 0.0), math.inf, where(lt(w, 0.0), math.nan, where(isinf(w), 0.0, v)))

    def slope(w, y):
        other = _bessel_k(1 - nu, scaled, w)
        at0 = eq(w, 0.0)
        by_x = div(y, where(at0, 1.0, w))
        d = neg(other) if nu == 0 else sub(neg(other), where(at0, math.inf, by_x))
        return add(d, y) if scaled else d

    return _derivative(v, w, slope)


def _bessel_f64(op: str, f, input):  # noqa: A002 - torch's names
    x = _float(input, op)
    return cast(f(cast(x, dt.float64)), x.dtype)


@plain_unless_float64
@tensor_op("bessel_j0")
def bessel_j0(input) -> GraphTensor:  # noqa: A002 - torch's names
    """torch.special.bessel_j0: the Bessel function of the first kind of order 0, even; 0 at +-inf.
    Computed in float64 and rounded once: a few float64 ulps relative below 5 (also at its first zero
    2.405), absolute ``~2e-16 sqrt(2 / (pi |x|))`` (its envelope) above, where near each zero the
    relative error grows as torch's (and any float64 evaluation of ``cos(x - pi/4)``) does. The gradient
    is ``-bessel_j1(x)`` (torch's has none). Int and bool inputs give float32.

    Args:
        input: a tensor.
    """
    return _bessel_f64("bessel_j0", functools.partial(_bessel_jy, 0, False), input)


@plain_unless_float64
@tensor_op("bessel_j1")
def bessel_j1(input) -> GraphTensor:  # noqa: A002 - torch's names
    """torch.special.bessel_j1: the Bessel function of the first kind of order 1, odd (keeping -0.0); 0 at
    +-inf. Accurate as ``bessel_j0`` (relative also at its first zero 3.832). The gradient is
    ``j0(x) - j1(x) / x`` (1/2 at 0). Int and bool inputs give float32.

    Args:
        input: a tensor.
    """
    return _bessel_f64("bessel_j1", functools.partial(_bessel_jy, 1, False), input)


@plain_unless_float64
@tensor_op("bessel_y0")
def bessel_y0(input) -> GraphTensor:  # noqa: A002 - torch's names
    """torch.special.bessel_y0: the Bessel function of the second kind of order 0: -inf at 0, NaN for
    negative ``x`` (and -inf), 0 at +inf. Accurate as ``bessel_j0``, absolute near its zeros (the first,
    0.894, included). The gradient is ``-bessel_y1(x)``. Int and bool inputs give float32.

    Args:
        input: a tensor.
    """
    return _bessel_f64("bessel_y0", functools.partial(_bessel_jy, 0, True), input)


@plain_unless_float64
@tensor_op("bessel_y1")
def bessel_y1(input) -> GraphTensor:  # noqa: A002 - torch's names
    """torch.special.bessel_y1: the Bessel function of the second kind of order 1: -inf at 0, NaN for
    negative ``x``, 0 at +inf. Accurate as ``bessel_y0``. The gradient is ``y0(x) - y1(x) / x``. Int and
    bool inputs give float32.

    Args:
        input: a tensor.
    """
    return _bessel_f64("bessel_y1", functools.partial(_bessel_jy, 1, True), input)


@plain_unless_float64
@tensor_op("modified_bessel_i0")
def modified_bessel_i0(input) -> GraphTensor:  # noqa: A002 - torch's names
    """torch.special.modified_bessel_i0: ``i0`` (the same function and gradient ``i1(x)``).

    Args:
        input: a tensor.
    """
    return _bessel_op("modified_bessel_i0", 0, False, input)


@plain_unless_float64
@tensor_op("modified_bessel_i1")
def modified_bessel_i1(input) -> GraphTensor:  # noqa: A002 - torch's names
    """torch.special.modified_bessel_i1: ``i1`` (the same function and gradient ``i0(x) - i1(x) / x``).

    Args:
        input: a tensor.
    """
    return _bessel_op("modified_bessel_i1", 1, False, input)


@plain_unless_float64
@tensor_op("modified_bessel_k0")
def modified_bessel_k0(input) -> GraphTensor:  # noqa: A002 - torch's names
    """torch.special.modified_bessel_k0: the modified Bessel function of the second kind of order 0: +inf
    at 0, NaN for negative ``x``, 0 at +inf (and where it underflows, past 705). Computed in float64 and
    rounded once, to a few float64 ulps. The gradient is ``-modified_bessel_k1(x)``. Int and bool inputs
    give float32.

    Args:
        input: a tensor.
    """
    return _bessel_f64("modified_bessel_k0", functools.partial(_bessel_k, 0, False), input)


@plain_unless_float64
@tensor_op("modified_bessel_k1")
def modified_bessel_k1(input) -> GraphTensor:  # noqa: A002 - torch's names
    """torch.special.modified_bessel_k1: the modified Bessel function of the second kind of order 1: +inf
    at 0, NaN for negative ``x``, 0 at +inf. Accurate as ``modified_bessel_k0``. The gradient is
    ``-k0(x) - k1(x) / x``. Int and bool inputs give float32.

    Args:
        input: a tensor.
    """
    return _bessel_f64("modified_bessel_k1", functools.partial(_bessel_k, 1, False), input)


@plain_unless_float64
@tensor_op("scaled_modified_bessel_k0")
def scaled_modified_bessel_k0(input) -> GraphTensor:  # noqa: A002 - torch's names
    """torch.special.scaled_modified_bessel_k0: ``exp(x) K0(x)``, finite past K0's underflow (+inf at 0,
    NaN below 0, 0 at +inf). The gradient is ``k0e(x) - k1e(x)``. Computed in float64 and rounded once;
    int and bool inputs give float32.

    Args:
        input: a tensor.
    """
    return _bessel_f64("scaled_modified_bessel_k0", functools.partial(_bessel_k, 0, True), input)


@plain_unless_float64
@tensor_op("scaled_modified_bessel_k1")
def scaled_modified_bessel_k1(input) -> GraphTensor:  # noqa: A002 - torch's names
    """torch.special.scaled_modified_bessel_k1: ``exp(x) K1(x)`` (+inf at 0, NaN below 0, 0 at +inf). The
    gradient is ``k1e(x) - k0e(x) - k1e(x) / x``. Computed in float64 and rounded once; int and bool
    inputs give float32.

    Args:
        input: a tensor.
    """
    return _bessel_f64("scaled_modified_bessel_k1", functools.partial(_bessel_k, 1, True), input)


def _sph_j0(w):
    """``sin(x) / x`` (1 at 0, 0 at +-inf: the Taylor series below 0.5 in magnitude); its gradient
    ``(x cos x - sin x) / x**2`` (its Taylor series ``-x/3 + x**3/30 - ...`` below 0.5)."""
    a = abs_(w)
    small = lt(a, 0.5)
    ws = where(small, w, 0.0)
    z = mul(ws, ws)
    near = _poly(z, [(-1) ** k / math.factorial(2 * k + 1) for k in range(10)])
    wf = where(small, 1.0, w)
    v = where(small, near, where(isinf(w), 0.0, div(sin(wf), wf)))

    def slope(w, y):
        d_near = mul(ws, _poly(z, [(-1) ** (k + 1) * (2 * k + 2) / math.factorial(2 * k + 3) for k in range(10)]))
        d_far = div(sub(cos(wf), y), wf)
        return where(small, d_near, where(isinf(w), 0.0, d_far))

    return _derivative(v, w, slope)


@plain_unless_float64
@tensor_op("spherical_bessel_j0")
def spherical_bessel_j0(input) -> GraphTensor:  # noqa: A002 - torch's names
    """torch.special.spherical_bessel_j0: ``sin(x) / x``, 1 at 0, 0 at +-inf. Computed in float64 and
    rounded once (a few ulps; near its zeros k pi relative to ``sin``'s own rounding). The gradient is
    ``(x cos x - sin x) / x**2`` (-j1(x), 0 at 0). Int and bool inputs give float32.

    Args:
        input: a tensor.
    """
    return _bessel_f64("spherical_bessel_j0", _sph_j0, input)
_J0_ZERO = (2.404825557695773, -1.176691651530894e-16)
_J1_ZERO = (3.8317059702075125, -1.5269184090088067e-16)
_J0_NEAR = (-0.07405174056387834, 0.07995724165008089, -0.01689860151045831, 0.0018734993201736279,
    -0.00012786334214099545, 5.919230226082256e-06, -1.9827937012047592e-07, 5.032513126170568e-09,
    -1.0017563061986844e-10, 1.606362191368658e-12, -2.119981793307844e-14, 2.3433615705472256e-16,
    -2.2014527429358544e-18, 1.7795622356428403e-20)
_J1_NEAR = (-0.018028415801166292, 0.013661487082063361, -0.0021632651559238044, 0.0001909490103660189,
    -1.0816174736957452e-05, 4.278886056259686e-07, -1.251337564352681e-08, 2.8183488843903415e-10,
    -5.042568567278396e-12, 7.34347631506432e-14, -8.876744102278278e-16, 9.051454724528835e-18,
    -7.891777052481785e-20)
_Y0_NEAR = (0.20605257634092228, -0.13017522381095709, -0.291894720865317, 0.10268287966073635,
    -0.014279159901781987, 0.0011164629864165486, -5.677525113380376e-05, 2.0406703657627165e-06,
    -5.476431029755533e-08, 1.141220652090372e-09, -1.9021689490013906e-11, 2.5954970583106197e-13,
    -2.9540707750193604e-15, 2.848154182311252e-17, -2.356607585530683e-19)
_Y1_NEAR = (0.0531074450560213, 0.14189450894667655, -0.08834328868289824, 0.017111109934210778,
    -0.0017057852565133666, 0.000105257530278434, -4.44507526565354e-06, 1.3699277670028168e-07,
    -3.222883768023259e-09, 5.984534092223177e-11, -9.000965667133812e-13, 1.1194186560306676e-14,
    -1.1707921590181557e-16, 1.0444110354608508e-18)
_P0_MID = (0.9985977713750755, -0.0012733500504284448, 1.608138169273622e-05, -5.467660471840422e-07,
    3.21882971225826e-08, -2.7043878228750075e-09, 2.9213570942600666e-10, -3.808758896544717e-11,
    5.750445742504109e-12, -9.770322305238322e-13, 1.829891067582405e-13, -3.719936905003212e-14,
    8.111038384855138e-15, -1.879249052411873e-15, 4.591961516814493e-16, -1.1761353577937745e-16,
    3.14165869107632e-17, -8.714796477281458e-18, 2.501426166473498e-18, -7.4064785757969225e-19,
    2.2561825419738383e-19)
_Q0_MID = (-0.12359166325914143, 0.0012609439978365777, -2.926903432265662e-05, 1.396008176256764e-06,
    -1.029907668150455e-07, 1.0210540640425113e-08, -1.2547418014488342e-09, 1.8164563734795525e-10,
    -2.993749890799132e-11, 5.48334775532828e-12, -1.0965409097744126e-12, 2.3622697188387166e-13,
    -5.425451777125223e-14, 1.317508326802474e-14, -3.360309973768829e-15, 8.95221858991687e-16,
    -2.4798420669600255e-16, 7.115232750526674e-17, -2.1076797406608723e-17, 6.4276148485438345e-18,
    -2.013110860519366e-18, 6.461538677352586e-19, -2.1215080073444825e-19, 7.11341605950509e-20,
    -2.4322078965496193e-20)
_P1_MID = (1.002359188365373, 0.0021502718225226984, -2.1080486970846004e-05, 6.615668651580993e-07,
    -3.745130369812773e-08, 3.074159995570496e-09, -3.269631098236341e-10, 4.2154968526877056e-11,
    -6.3108905389178654e-12, 1.0651233439272648e-12, -1.9840938549319159e-13, 4.0152722624622343e-14,
    -8.721616075901632e-15, 2.0140814327269027e-15, -4.907338330145866e-16, 1.2537405445072926e-16,
    -3.341434204144867e-17, 9.25028809732232e-18, -2.6502962158992764e-18, 7.834282005288772e-19,
    -2.3828910342727353e-19)
_Q1_MID = (0.3730093000792877, -0.0017891098035124323, 3.645165005866133e-05, -1.6474285125098412e-06,
    1.180223821630951e-07, -1.1485640570691412e-08, 1.393390471965778e-09, -1.9980942762362733e-10,
    3.269002962462129e-11, -5.9523989232456636e-12, 1.1846022801641723e-12, -2.541649669472393e-13,
    5.817250629750517e-14, -1.4084197113327775e-14, 3.5827427806666764e-15, -9.52259196629156e-16,
    2.632355627886909e-16, -7.538689733521703e-17, 2.2293275728205754e-17, -6.788077851423992e-18,
    2.122993097943774e-18, -6.805336897442029e-19, 2.231690362956054e-19, -7.474476268861246e-20)
_K0_NEAR = (0.26515980836570446, 0.15251907576831567, 0.003318048844835395, 2.738519788401574e-05,
    1.1973841928000323e-07, 3.249474443679295e-10, 6.012730386689703e-13, 8.076060733536439e-16, 8.234977983698423e-19)
_K1_NEAR = (-0.35242753359380785, -0.045059890508404046, -0.0006017177632861077, -3.6154504483539617e-06,
    -1.245884783549044e-08, -2.7927150084633376e-11, -4.4036594695160716e-14, -5.154391531560412e-17,
    -4.6578043506603944e-20)
_K0_MID = (1.1918819913868592, -0.05089031936356283, 0.003869698250853415, -0.00045693123310335584,
    6.881669443157356e-05, -1.2164656151147597e-05, 2.4145080953014643e-06, -5.238309750480217e-07,
    1.2202643244206251e-07, -3.014278729068664e-08, 7.823252385365904e-09, -2.1185018332266233e-09,
    5.952961792288922e-10, -1.728226302407584e-10, 5.1651545219746285e-11, -1.5845260367347446e-11,
    4.9770602093209865e-12, -1.5973134175684734e-12, 5.228379578406596e-13, -1.7427094219098665e-13,
    5.907058138651008e-14, -2.033691231488159e-14, 7.104039757755274e-15, -2.515487256567129e-15,
    9.021280135996834e-16, -3.2742624608715817e-16, 1.2018769671771088e-16, -4.458999663866169e-17,
    1.671089562119127e-17, -6.322984615488292e-18, 2.414341356041071e-18, -9.2990815473537e-19,
    3.611368182542768e-19, -1.4136195068816115e-19)
_K1_MID = (1.4616362127667877, 0.1813812209806132, -0.007512245133317685, 0.0007347332748022451,
    -0.00010054436193562174, 1.675276361903896e-05, -3.1929461939055618e-06, 6.7236922204025e-07,
    -1.5307375007959124e-07, 3.7126270240688215e-08, -9.4924157472956e-09, 2.5384919686692383e-09,
    -7.057497122305367e-10, 2.0301334423195563e-10, -6.018953017898462e-11, 1.833422738328348e-11,
    -5.722703608025769e-12, 1.8262789246430784e-12, -5.947467370552983e-13, 1.9732499337136685e-13,
    -6.660337067709334e-14, 2.2841793817099203e-14, -7.950673482790072e-15, 2.8060218022201254e-15,
    -1.0032541978560803e-15, 3.6309665058206766e-16, -1.329281456610156e-16, 4.9194480146396756e-17,
    -1.839361977012988e-17, 6.944457974939252e-18, -2.646173582975726e-18, 1.0172154711529313e-18,
    -3.943151340264001e-19, 1.540794515890208e-19)
