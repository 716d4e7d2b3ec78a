"""Elementwise math, arithmetic, comparison and logic, composed from the primitives.

Where a composition could silently change values (NaN, inf, signed zero, integer ranges) it is
written so that it does not: e.g. ``floor`` goes through an exact ``fmod``, comparisons treat NaN as
IEEE does, and ``where`` is a primitive so masked-out values never leak.
"""

from __future__ import annotations

import math

from .. import dtype as dt
from ..tensor import GraphTensor
from .core import broadcast_shapes, cast, coerce, prim, require

LOG2E, LN2 = 1.4426950408889634, 0.6931471805599453


def _float(x: GraphTensor, op: str) -> GraphTensor:
    """Float math on an int/bool tensor computes in float32, as torch does."""
    if not isinstance(x, GraphTensor):
        raise TypeError(f"{op}: expected a GraphTensor, got {type(x).__name__}")
    return x if x.dtype.is_float else cast(x, dt.float32)


def _not_bool(x: GraphTensor, op: str):
    require(op, x.dtype.kind != "b", f"not defined for bool tensors", x)


# arithmetic ---------------------------------------------------------------------------------
def add(a, b, alpha=1) -> GraphTensor:
    if alpha != 1:
        b = mul(b, alpha)
    a, b = coerce("add", a, b)
    return prim("Add", a, b)


def mul(a, b) -> GraphTensor:
    a, b = coerce("mul", a, b)
    return prim("Mul", a, b)


def neg(x: GraphTensor) -> GraphTensor:
    _not_bool(x, "neg")
    return mul(x, -1)


def sub(a, b, alpha=1) -> GraphTensor:
    a, b = coerce("sub", a, b)
    _not_bool(a, "sub")
    return add(a, neg(b) if alpha == 1 else mul(b, -alpha))


def reciprocal(x: GraphTensor) -> GraphTensor:
    return prim("Recip", _float(x, "reciprocal"))


def div(a, b, rounding_mode=None) -> GraphTensor:
    if rounding_mode == "floor":
        return floor_divide(a, b)
    if rounding_mode == "trunc":
        return trunc(div(a, b)) if _is_float(a, b) else cast(trunc(div(a, b)), coerce("div", a, b)[0].dtype)
    a, b = coerce("div", a, b, min_kind="f")
    return prim("Mul", a, prim("Recip", b))


def _is_float(*xs) -> bool:
    return any(x.dtype.is_float if isinstance(x, GraphTensor) else isinstance(x, float) for x in xs)


def fmod(a, b) -> GraphTensor:
    a, b = coerce("fmod", a, b)
    _not_bool(a, "fmod")
    return prim("Mod", a, b)


def remainder(a, b) -> GraphTensor:
    """Python/torch ``%``: the result takes the sign of the divisor."""
    a, b = coerce("remainder", a, b)
    _not_bool(a, "remainder")
    r = prim("Mod", a, b)
    fix = logical_and(ne(r, 0), ne(lt(r, 0), lt(b, 0)))
    return where(fix, add(r, b), r)


def floor_divide(a, b) -> GraphTensor:
    """torch ``//``: floor of the quotient. Integers divide exactly through float64."""
    a, b = coerce("floor_divide", a, b)
    _not_bool(a, "floor_divide")
    if a.dtype.kind == "i":
        return cast(floor(div(cast(a, dt.float64), cast(b, dt.float64))), a.dtype)
    m = prim("Mod", a, b)
    q = div(sub(a, m), b)
    q = where(logical_and(ne(m, 0), ne(lt(b, 0), lt(m, 0))), sub(q, 1), q)
    f = floor(q)
    q = where(gt(sub(q, f), 0.5), add(f, 1), f)
    return where(eq(b, 0), div(a, b), q)


def pow(a, b) -> GraphTensor:  # noqa: A001 - torch's name
    """``a ** b``. Integer scalar exponents multiply exactly; otherwise ``exp2(b*log2|a|)`` with the
    sign restored for integral exponents, NaN for a negative base with a fractional exponent."""
    if isinstance(b, (int,)) and not isinstance(b, bool) and isinstance(a, GraphTensor) and abs(b) <= 64:
        if b < 0 and not a.dtype.is_float:
            require("pow", False, "integers to negative powers are not allowed", a, kind=ValueError)
        base = a if b >= 0 else reciprocal(a)
        out, e, p = None, abs(b), base
        while e:
            if e & 1:
                out = p if out is None else mul(out, p)
            e >>= 1
            if e:
                p = mul(p, p)
        return out if out is not None else full_like(a, 1)
    if isinstance(b, float) and b == 0.5 and isinstance(a, GraphTensor):
        return sqrt(a)
    a, b = coerce("pow", a, b)
    if not a.dtype.is_float:
        raise TypeError("pow: integer tensor exponents are not supported; cast to float first")
    mag = exp2(mul(b, log2(abs_(a))))
    b_int = eq(b, trunc(b))
    b_odd = logical_and(b_int, ne(fmod(b, 2), 0))
    signed = where(logical_and(lt(a, 0), b_odd), neg(mag), mag)
    out = where(logical_and(lt(a, 0), logical_not(b_int)), full_like(a, math.nan), signed)
    return where(logical_or(eq(b, 0), eq(a, 1)), full_like(a, 1), out)


def maximum(a, b) -> GraphTensor:
    a, b = coerce("maximum", a, b)
    return prim("Max", a, b)


def minimum(a, b) -> GraphTensor:
    a, b = coerce("minimum", a, b)
    if a.dtype.is_float:
        return neg(prim("Max", neg(a), neg(b)))
    if a.dtype.kind == "b":
        return prim("Mul", a, b)
    return where(lt(a, b), a, b)


def clamp(x: GraphTensor, min=None, max=None) -> GraphTensor:  # noqa: A002 - torch's names
    if min is None and max is None:
        raise ValueError("clamp: at least one of min and max must be given")
    if min is not None:
        x = maximum(x, min)
    if max is not None:
        x = minimum(x, max)
    return x


def lerp(a, b, weight) -> GraphTensor:
    return add(a, mul(weight, sub(b, a)))


# comparison and logic -------------------------------------------------------------------------
def lt(a, b) -> GraphTensor:
    a, b = coerce("lt", a, b)
    return prim("LessThan", a, b, dtype=dt.bool_)


def gt(a, b) -> GraphTensor:
    a, b = coerce("gt", a, b)
    return prim("LessThan", b, a, dtype=dt.bool_)


def isnan(x: GraphTensor) -> GraphTensor:
    """NaN is the only value neither below +inf nor above -inf."""
    if not x.dtype.is_float:
        return _const_bool(x, False)
    return logical_not(logical_or(lt(x, math.inf), gt(x, -math.inf)))


def isinf(x: GraphTensor) -> GraphTensor:
    if not x.dtype.is_float:
        return _const_bool(x, False)
    return logical_or(eq(x, math.inf), eq(x, -math.inf))


def isfinite(x: GraphTensor) -> GraphTensor:
    if not x.dtype.is_float:
        return _const_bool(x, True)
    return logical_and(lt(x, math.inf), gt(x, -math.inf))


def eq(a, b) -> GraphTensor:
    a, b = coerce("eq", a, b)
    out = logical_not(logical_or(prim("LessThan", a, b, dtype=dt.bool_), prim("LessThan", b, a, dtype=dt.bool_)))
    if a.dtype.is_float:
        out = logical_and(out, logical_not(logical_or(isnan(a), isnan(b))))
    return out


def ne(a, b) -> GraphTensor:
    return logical_not(eq(a, b))


def le(a, b) -> GraphTensor:
    return logical_or(lt(a, b), eq(a, b))


def ge(a, b) -> GraphTensor:
    return logical_or(gt(a, b), eq(a, b))


def _bool(x) -> GraphTensor:
    return x if x.dtype.kind == "b" else cast(x, dt.bool_)


def _const_bool(like: GraphTensor, v: bool) -> GraphTensor:
    return like.graph.constant(v, dt.bool_).expand(*like.shape)


def logical_not(x: GraphTensor) -> GraphTensor:
    x = _bool(x)
    return prim("LessThan", x, _const_bool(x, True), dtype=dt.bool_)


def logical_and(a, b) -> GraphTensor:
    a, b = coerce("logical_and", a, b)
    return prim("Mul", _bool(a), _bool(b))


def logical_or(a, b) -> GraphTensor:
    a, b = coerce("logical_or", a, b)
    return prim("Max", _bool(a), _bool(b))


def logical_xor(a, b) -> GraphTensor:
    a, b = coerce("logical_xor", a, b)
    return ne(_bool(a), _bool(b))


def bitwise_and(a, b) -> GraphTensor:
    a, b = coerce("and", a, b)
    require("and", a.dtype.kind == "b", "& is defined for bool tensors only", a)
    return prim("Mul", a, b)


def bitwise_or(a, b) -> GraphTensor:
    a, b = coerce("or", a, b)
    require("or", a.dtype.kind == "b", "| is defined for bool tensors only", a)
    return prim("Max", a, b)


def bitwise_xor(a, b) -> GraphTensor:
    a, b = coerce("xor", a, b)
    require("xor", a.dtype.kind == "b", "^ is defined for bool tensors only", a)
    return ne(a, b)


def bitwise_not(x: GraphTensor) -> GraphTensor:
    require("invert", x.dtype.kind == "b", "~ is defined for bool tensors only", x)
    return logical_not(x)


def where(cond, a, b) -> GraphTensor:
    if not isinstance(cond, GraphTensor):
        raise TypeError("where: the condition must be a GraphTensor")
    t = [x for x in (a, b) if isinstance(x, GraphTensor)]
    like = t[0] if t else cond
    if t:
        a, b = coerce("where", a, b)
    else:
        d = dt.promote_scalar(dt.promote_scalar(dt.bool_, a), b)
        a, b = like.graph.constant(a, d), like.graph.constant(b, d)
    c = _bool(cond)
    shape = broadcast_shapes("where", c, a, b)
    c, a, b = (x.expand(*shape) if x.shape != shape else x for x in (c, a, b))
    return prim("Where", c, a, b, dtype=a.dtype)


# unary math ---------------------------------------------------------------------------------
def exp2(x):
    return prim("Exp2", _float(x, "exp2"))


def log2(x):
    return prim("Log2", _float(x, "log2"))


def exp(x):
    return exp2(mul(_float(x, "exp"), LOG2E))


def log(x):
    return mul(log2(x), LN2)


def sqrt(x):
    return prim("Sqrt", _float(x, "sqrt"))


def rsqrt(x):
    return reciprocal(sqrt(x))


def sin(x):
    return prim("Sin", _float(x, "sin"))


def cos(x):
    return sin(add(_float(x, "cos"), math.pi / 2))


def tan(x):
    return div(sin(x), cos(x))


def square(x):
    return mul(x, x)


def abs_(x):
    _not_bool(x, "abs")
    return maximum(x, neg(x))


def sign(x):
    _not_bool(x, "sign")
    s = sub(cast(gt(x, 0), x.dtype), cast(lt(x, 0), x.dtype))
    return where(isnan(x), x, s) if x.dtype.is_float else s


def trunc(x):
    """Exact: ``x - fmod(x, 1)`` for values that can have a fraction; larger ones are integral."""
    if not x.dtype.is_float:
        return x
    limit = 2.0 ** {16: 10, 32: 23, 64: 52}[x.dtype.bits]
    return where(lt(abs_(x), limit), sub(x, fmod(x, 1.0)), x)


def floor(x):
    if not x.dtype.is_float:
        return x
    t = trunc(x)
    return where(lt(x, t), sub(t, 1), t)


def ceil(x):
    if not x.dtype.is_float:
        return x
    t = trunc(x)
    return where(gt(x, t), add(t, 1), t)


def round_(x, decimals: int = 0):
    """Round half to even, as torch."""
    if not x.dtype.is_float:
        return x
    if decimals:
        s = 10.0 ** decimals
        return div(round_(mul(x, s)), s)
    f = floor(x)
    d = sub(x, f)
    odd = ne(fmod(f, 2.0), 0)
    up = logical_or(gt(d, 0.5), logical_and(eq(d, 0.5), odd))
    return where(up, add(f, 1), f)


def tanh_(x):
    """``sign(x) * (1 - e) / (1 + e)`` with ``e = exp(-2|x|)``: no overflow for large |x|."""
    x = _float(x, "tanh")
    e = exp(mul(abs_(x), -2.0))
    return where(isnan(x), x, mul(sign(x), div(sub(1.0, e), add(e, 1.0))))


def erf(x):
    """Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7), odd-extended."""
    x = _float(x, "erf")
    a = abs_(x)
    t = reciprocal(add(mul(a, 0.3275911), 1.0))
    poly = 1.061405429
    for c in (-1.453152027, 1.421413741, -0.284496736, 0.254829592):
        poly = add(mul(t, poly), c)
    poly = mul(t, poly)
    y = sub(1.0, mul(poly, exp(neg(mul(a, a)))))
    return mul(sign(x), y)


def full_like(x: GraphTensor, value, dtype=None) -> GraphTensor:
    d = dt.as_dtype(dtype) if dtype is not None else x.dtype
    return x.graph.constant(value, d).expand(*x.shape) if x.ndim else x.graph.constant(value, d)
