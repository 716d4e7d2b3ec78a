"""More elementwise math with torch's names: logaddexp/logaddexp2, hypot, copysign, fmax/fmin,
isclose/allclose, deg2rad/rad2deg, clamp_min/clamp_max, sinc, ldexp/frexp/nextafter (``elementwise.py``
holds the core set these are built from).

Each is written for torch's values at the edges (NaN, infinities, signed zeros) and for torch's
gradients, which a textbook composition would get wrong: logaddexp never forms ``exp`` of a large
number, hypot never overflows before its result does, fmax/fmin skip NaN and give a tie to ``input``.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import numpy as np

from luminal.core import dtype as dt
from luminal.core.errors import check_number, op_error
from luminal.frontend.checks import tensor_op
from luminal.frontend.ops.core import broadcast_shapes, cast, coerce, require
from luminal.frontend.ops.elementwise import (
    _neg_side,
    _opmath,
    abs_,
    add,
    clamp,
    div,
    eq,
    exp,
    exp2,
    floor,
    ge,
    gt,
    isfinite,
    isinf,
    isnan,
    le,
    log1p,
    log2,
    logical_and,
    logical_or,
    logical_xor,
    lt,
    maximum,
    mul,
    ne,
    neg,
    sin,
    sqrt,
    sub,
    where,
)
from luminal.frontend.ops.reduce import all_
from luminal.frontend.tensor import GraphTensor


def _floats(op: str, a, b):
    """The operands promoted together; float only, as torch (whose kernels refuse integer inputs)."""
    a, b = coerce(op, a, b)
    require(op, a.dtype.is_float, f"needs float tensors, got {a.dtype.name}", a, b)
    return a, b


@_opmath
def logaddexp(input, other) -> GraphTensor:  # noqa: A002 - torch's names
    """torch.logaddexp: ``log(exp(input) + exp(other))``, as ``hi + log1p(exp(lo - hi))`` with ``hi``
    the larger operand: ``exp`` only sees numbers <= 0, so nothing overflows, and the gradients are
    torch's ``sigmoid(input - other)`` and ``sigmoid(other - input)`` (1/2 each at a tie). Equal
    infinities give that infinity (their difference would be NaN); NaN gives NaN.

    Args:
        input: a float tensor (or a number, with ``other`` a tensor).
        other: a float tensor or a number.
    """
    return _log_add("logaddexp", input, other, exp, 1.0)


def _log_add(op: str, input, other, power, per_e: float) -> GraphTensor:  # noqa: A002
    """``hi + log1p(power(lo - hi)) * per_e`` (``power`` exp or exp2, ``per_e`` 1 or 1/ln 2): the
    larger operand plus the log of 1 + the smaller's share, which never overflows; equal infinities
    give that infinity (their difference would be NaN)."""
    a, b = _floats(op, input, other)
    first = ge(a, b)
    hi, lo = where(first, a, b), where(first, b, a)
    same_inf = logical_and(isinf(a), eq(a, b))
    tail = log1p(power(where(same_inf, 0.0, sub(lo, hi))))
    return where(same_inf, a, add(hi, tail if per_e == 1.0 else mul(tail, per_e)))


@_opmath
def logaddexp2(input, other) -> GraphTensor:  # noqa: A002 - torch's names
    """torch.logaddexp2: ``log2(2**input + 2**other)``, as ``hi + log1p(2**(lo - hi)) / ln 2`` (the
    ``logaddexp`` construction in base 2: nothing overflows; the gradients are ``2**input / (2**input +
    2**other)`` and the other's, 1/2 each at a tie). Equal infinities give that infinity; NaN gives NaN.

    Args:
        input: a float tensor (or a number, with ``other`` a tensor).
        other: a float tensor or a number.
    """
    return _log_add("logaddexp2", input, other, exp2, 1.0 / math.log(2.0))


@tensor_op("sinc")
@_opmath
def sinc(input) -> GraphTensor:  # noqa: A002 - torch's names
    """torch.sinc: the normalised sinc, ``sin(pi x) / (pi x)``, 1 at 0 (its gradient there 0, as torch's);
    int and bool inputs give float32. ``pi x`` is rounded in the input's dtype, as torch's.

    Args:
        input: the input tensor.
    """
    x = input if input.dtype.is_float else cast(input, dt.float32)
    zero = eq(x, 0)
    px = mul(where(zero, 1.0, x), math.pi)  # (the zero branch never divides by 0, so its gradient is not NaN)
    return where(zero, 1.0, div(sin(px), px))


def hypot(input, other) -> GraphTensor:  # noqa: A002 - torch's names
    """torch.hypot: ``sqrt(input**2 + other**2)`` without overflow or underflow in between. float16,
    bfloat16 and float32 square in float64 (whose range holds every square) and round once; float64
    scales both by the larger magnitude first. An infinite operand gives +inf even beside a NaN (C's
    rule, and torch's). The gradient is ``input / hypot`` (NaN at the origin, as torch's).

    Args:
        input: a float tensor (or a number, with ``other`` a tensor).
        other: a float tensor or a number.
    """
    a, b = _floats("hypot", input, other)
    if a.dtype is not dt.float64:
        a64, b64 = cast(a, dt.float64), cast(b, dt.float64)
        h = cast(sqrt(add(mul(a64, a64), mul(b64, b64))), a.dtype)
    else:
        m = where(ge(abs_(a), abs_(b)), abs_(a), abs_(b)).detach()  # (a scale: no gradient of its own)
        s = where(logical_and(isfinite(m), ne(m, 0)), m, 1.0)
        ra, rb = div(a, s), div(b, s)
        h = mul(s, sqrt(add(mul(ra, ra), mul(rb, rb))))
    return where(logical_or(isinf(a), isinf(b)), math.inf, h)


def copysign(input, other) -> GraphTensor:  # noqa: A002 - torch's names
    """torch.copysign: the magnitude of ``input`` with the sign of ``other``, signed zeros included
    (``copysign(1, -0.0)`` is -1). Integer and bool operands give float32, as torch. The gradient is
    ``+-1`` by ``input`` (0 where ``input`` is 0, as torch's) and none by ``other``.

    A NaN ``other`` counts as positive: the sign bit of a NaN is not observable through the
    primitives (torch reads it; NaNs made by invalid operations on x86, ``inf - inf``, carry a minus).

    Args:
        input: the magnitudes (a tensor, or a number with ``other`` a tensor).
        other: the signs (a tensor or a number).
    """
    a, b = coerce("copysign", input, other, min_kind="f")
    minus = _neg_side(b)
    zero = where(minus, -0.0, 0.0)
    return where(eq(a, 0), cast(zero, a.dtype), where(ne(_neg_side(a), minus), neg(a), a))


def _nan_skipping(op: str, input, other, first_cmp) -> GraphTensor:
    """``input`` where it wins by ``first_cmp`` or ``other`` is NaN, else ``other``: torch's fmax/fmin,
    whose tie goes to ``input`` (value and gradient) and which is NaN only where both are."""
    a, b = coerce(op, input, other)
    take = first_cmp(a, b)
    if a.dtype.is_float:
        take = logical_or(take, isnan(b))
    return where(take, a, b)


def fmax(input, other) -> GraphTensor:  # noqa: A002 - torch's names
    """torch.fmax: the larger of ``input`` and ``other``, skipping NaN (NaN only where both are; numpy's
    fmax). A tie, ``-0.0`` against ``0.0`` included, takes ``input``, and so does its gradient, as torch.

    Args:
        input: a tensor (or a number, with ``other`` a tensor).
        other: a tensor or a number.
    """
    return _nan_skipping("fmax", input, other, ge)


def fmin(input, other) -> GraphTensor:  # noqa: A002 - torch's names
    """torch.fmin: the smaller of ``input`` and ``other``, skipping NaN (NaN only where both are). A
    tie takes ``input``, and so does its gradient, as torch.

    Args:
        input: a tensor (or a number, with ``other`` a tensor).
        other: a tensor or a number.
    """
    return _nan_skipping("fmin", input, other, le)


def _tolerances(op: str, rtol, atol, x) -> None:
    for what, v in (("rtol", rtol), ("atol", atol)):
        if not check_number(op, what, v, x) >= 0:
            raise op_error(ValueError, op, f"{what} must be >= 0, got {v!r}", x)


@tensor_op("isclose")
def isclose(input, other, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> GraphTensor:  # noqa: A002
    """torch.isclose: ``|input - other| <= atol + rtol * |other|`` elementwise (a bool tensor), and
    True where they are equal (equal infinities) or, with ``equal_nan``, both NaN. As torch, two
    tensors must have the same dtype (``other`` may be a number); integer differences are exact.

    Args:
        input: a tensor.
        other: a tensor of the same dtype, or a number.
        rtol: the relative tolerance (>= 0).
        atol: the absolute tolerance (>= 0).
        equal_nan: count NaN as close to NaN.
    """
    _tolerances("isclose", rtol, atol, input)
    if isinstance(other, GraphTensor) and other.dtype is not input.dtype:
        raise op_error(TypeError, "isclose", f"input and other must have the same dtype, got {input.dtype.name} "
                       f"and {other.dtype.name}", input, other)
    a, b = coerce("isclose", input, other, dtype=input.dtype)
    close = eq(a, b)
    if a.dtype.is_float and equal_nan:
        close = logical_or(close, logical_and(isnan(a), isnan(b)))
    if rtol == 0 and atol == 0:
        return close
    if a.dtype.kind == "b":
        a, b = cast(a, dt.float32), cast(b, dt.float32)
    err = abs_(sub(a, b))
    allowed = add(abs_(mul(b, float(rtol))), float(atol))
    return logical_or(close, logical_and(isfinite(err), le(err, allowed)))


@tensor_op("allclose")
def allclose(input, other, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> GraphTensor:  # noqa: A002
    """torch.allclose, lazily: whether ``isclose`` holds everywhere, as a 0-d bool tensor (torch
    returns a Python bool, which a lazy graph has only after it runs: compile it, and ``bool()`` the
    result). Arguments as ``isclose``.

    Args:
        input: a tensor.
        other: a tensor of the same dtype, or a number.
        rtol: the relative tolerance (>= 0).
        atol: the absolute tolerance (>= 0).
        equal_nan: count NaN as close to NaN.
    """
    return all_(isclose(input, other, rtol, atol, equal_nan))


@tensor_op("deg2rad")
def deg2rad(input) -> GraphTensor:  # noqa: A002 - torch's names
    """torch.deg2rad: degrees to radians, ``input * pi / 180`` (int and bool inputs give float32).

    Args:
        input: a tensor.
    """
    return mul(input if input.dtype.is_float else cast(input, dt.float32), math.pi / 180)


@tensor_op("rad2deg")
def rad2deg(input) -> GraphTensor:  # noqa: A002 - torch's names
    """torch.rad2deg: radians to degrees, ``input * 180 / pi`` (int and bool inputs give float32).

    Args:
        input: a tensor.
    """
    return mul(input if input.dtype.is_float else cast(input, dt.float32), 180 / math.pi)


@tensor_op("clamp_min")
def clamp_min(input, min) -> GraphTensor:  # noqa: A002 - torch's names
    """torch.clamp_min: ``clamp(input, min=min)``, the lower bound alone (values, dtype and gradient as
    ``clamp``'s).

    Args:
        input: a tensor.
        min: the lower bound, a number or a tensor (broadcast).
    """
    if min is None:
        raise op_error(TypeError, "clamp_min", "min must be a number or a tensor, got None", input)
    return clamp(input, min=min)


@tensor_op("clamp_max")
def clamp_max(input, max) -> GraphTensor:  # noqa: A002 - torch's names
    """torch.clamp_max: ``clamp(input, max=max)``, the upper bound alone (values, dtype and gradient as
    ``clamp``'s).

    Args:
        input: a tensor.
        max: the upper bound, a number or a tensor (broadcast).
    """
    if max is None:
        raise op_error(TypeError, "clamp_max", "max must be a number or a tensor, got None", input)
    return clamp(input, max=max)


# significand bits and smallest normal exponent of each float dtype (ldexp, frexp, nextafter)
_FORMAT = {dt.float16: (11, -14), dt.bfloat16: (8, -126), dt.float32: (24, -126), dt.float64: (53, -1022)}


def _exponent(a: GraphTensor) -> GraphTensor:
    """``floor(log2(a))`` of a positive finite float64 ``a``, exact: ``log2`` rounded near a power of two
    is corrected by comparing with the powers of two on either side (``exp2`` of an integer is exact)."""
    e = floor(log2(a))
    e = where(gt(exp2(e), a), sub(e, 1.0), e)
    return where(ge(a, exp2(add(e, 1.0))), add(e, 1.0), e)


def ldexp(input, other) -> GraphTensor:  # noqa: A002 - torch's names
    """torch.ldexp: ``input * 2**other``, rounded once to the promoted dtype (int and bool give
    float32), with no overflow or underflow before the result's: ``ldexp(2.0**100, -160)`` is 2**-60 in
    float32, ``ldexp(float16(1e-3), 20)`` is 1049. Computed in float64 (float64 itself multiplies by
    2**k1 and 2**k2, each a normal float64; a subnormal result with ``|other| > 1022`` may round twice).
    The gradients are torch's: ``2**other`` and ``input * 2**other * ln 2``.

    Args:
        input: the significands (a tensor, or a number with ``other`` a tensor).
        other: the powers of two (a tensor or a number; usually integers).
    """
    a, n = coerce("ldexp", input, other, min_kind="f")
    d = a.dtype
    n = clamp(cast(n, dt.float64), -2200.0, 2200.0)  # (beyond, every finite product is 0 or inf)
    if d is not dt.float64:
        return cast(mul(cast(a, dt.float64), exp2(n)), d)
    n1 = clamp(n, -1022.0, 1023.0)
    return mul(mul(a, exp2(n1)), exp2(sub(n, n1).detach()))


class FrexpResult(NamedTuple):
    """``frexp``'s result, as torch's ``torch.return_types.frexp``: ``mantissa`` and ``exponent``."""

    mantissa: GraphTensor
    exponent: GraphTensor


@tensor_op("frexp")
def frexp(input) -> tuple[GraphTensor, GraphTensor]:  # noqa: A002 - torch's names
    """torch.frexp: ``input = mantissa * 2**exponent`` with ``|mantissa|`` in [0.5, 1) (the input's
    dtype) and an int32 exponent; zeros give themselves and 0, as do infinities and NaN (C's frexp
    leaves their exponent unspecified; glibc's, and torch's, is 0). Float tensors only, as torch. The
    mantissa's gradient is ``2**-exponent``.

    Args:
        input: a float tensor.
    """
    require("frexp", input.dtype.is_float, f"only supports float tensors, as torch's; got {input.dtype.name}",
            input)
    x = cast(input, dt.float64) if input.dtype is not dt.float64 else input
    keep = logical_and(isfinite(x), ne(x, 0))
    mag = abs_(where(keep, x, 1.0)).detach()
    sub_normal = lt(mag, 2.0 ** -1022)  # (only float64 has them here: scaled up by 2**54 first, exactly)
    e = add(_exponent(where(sub_normal, mul(mag, 2.0 ** 54), mag)), 1.0)
    m = mul(where(sub_normal, mul(x, 2.0 ** 54), x), exp2(neg(e)))
    e = where(sub_normal, sub(e, 54.0), e)
    return FrexpResult(cast(where(keep, m, x), input.dtype), cast(where(keep, e, 0.0), dt.int32))


def nextafter(input, other) -> GraphTensor:  # noqa: A002 - torch's names
    """torch.nextafter: the next float after ``input`` towards ``other``, in their promoted float dtype
    (subnormals included: ``nextafter(0, 1)`` is the smallest one; ``other`` itself where they are
    equal, so ``nextafter(0.0, -0.0)`` is -0.0; the largest finite value after an infinity; NaN where
    either is NaN). The step is the spacing at ``input``: ``2**(e - p + 1)`` for ``|input|`` in
    [2**e, 2**(e+1)) with ``p`` significand bits, half that towards zero from a power of two, computed
    in float64 (exactly). The gradient is torch's: 1 by ``input`` (the result is ``input`` within an
    ulp) but 0 where ``input == other`` (the result is then ``other``), none by ``other``.

    Args:
        input: the starting values (a float tensor, or a number with ``other`` a tensor).
        other: the directions (a float tensor or a number).
    """
    a, b = _floats("nextafter", input, other)
    shape = broadcast_shapes("nextafter", a, b)
    a, b = (t if tuple(t.shape) == tuple(shape) else t.expand(*shape) for t in (a, b))  # (a's gradient)
    d = a.dtype
    p, emin = _FORMAT[d]
    x, y = (a, b) if d is dt.float64 else (cast(a, dt.float64), cast(b, dt.float64))
    regular = logical_and(isfinite(x), ne(x, 0))
    mag = abs_(where(regular, x, 1.0))
    e = maximum(_exponent(mag), float(emin))
    step = exp2(sub(e, float(p - 1)))
    down = where(logical_and(eq(mag, exp2(e)), gt(e, float(emin))), mul(step, 0.5), step)
    away = logical_xor(gt(y, x), lt(x, 0))  # (towards the larger magnitude)
    r = where(away, add(mag, step), sub(mag, down))
    r = where(lt(x, 0), neg(r), r)
    tiny = 2.0 ** (emin - p + 1)
    big = (2.0 - 2.0 ** (1 - p)) * 2.0 ** (-emin + 1) if d is not dt.float64 else float(np.finfo(np.float64).max)
    c = functools.partial(x.graph.constant, dtype=dt.float64)  # (where's two numbers would be float32)
    r = where(eq(x, 0), where(gt(y, x), c(tiny), c(-tiny)), r)
    r = where(isinf(x), where(gt(x, 0), c(big), c(-big)), r)
    r = where(logical_or(isnan(x), isnan(y)), math.nan, where(eq(x, y), y, r))
    out = cast(r, d).detach()
    # torch's gradient: the adjoint by input where the operands differ (0 where the result is other)
    return out.graph.custom_vjp(out, [a], lambda y, adjoint, a: [where(ne(a, b), adjoint, 0.0)])
