"""torch's special functions built on ``elementwise.py``'s: logit, xlogy and erfc.

Each has torch's value at the edges (0, 1, infinities, NaN) and torch's gradient (``Graph.custom_vjp``),
including where the formula as written would differentiate to something else: ``xlogy``'s gradient by
``input`` at ``input == 0`` is ``log(other)``, not the 0 a ``where`` would give.
"""

from __future__ import annotations

import math

from luminal.core import dtype as dt
from luminal.core.errors import check_number
from luminal.frontend.checks import tensor_op
from luminal.frontend.ops.core import cast, coerce
from luminal.frontend.ops.elementwise import (
    _derivative,
    _erfcx64,
    _float,
    _opmath,
    add,
    div,
    eq,
    erf,
    exp,
    gt,
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
    sub,
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
