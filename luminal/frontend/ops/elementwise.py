"""Elementwise math, arithmetic, comparison and logic, composed from the primitives.

Where a composition could silently change values (NaN, inf, signed zero, integer ranges) it is
written so that it does not: e.g. ``floor`` goes through an exact ``fmod``, comparisons treat NaN as
IEEE does, and ``where`` is a primitive so masked-out values never leak.
"""

from __future__ import annotations

import functools
import math
import numbers
from collections.abc import Callable
from typing import Any, TypeVar, overload

import numpy as np

from luminal.core import dtype as dt
from luminal.core.errors import op_error, renamed
from luminal.core.symbolic import Sym
from luminal.frontend import float64_paths
from luminal.frontend.checks import check_tensors, tensor_op
from luminal.frontend.ops.core import (
    broadcast_shapes,
    cast,
    check_fill,
    coerce,
    fresh,
    full_like,
    prim,
    require,
    result_dtype,
)
from luminal.frontend.tensor import GraphTensor

LOG2E, LN2 = 1.4426950408889634, 0.6931471805599453
_LN2_HI = float.fromhex("0x1.62e42f8p-1")  # ln 2 in 26 bits: n * _LN2_HI is exact for |n| < 2**27
_LN2_LO = float.fromhex("0x1.be8e7bcd5e4f2p-27")  # ln 2 - _LN2_HI
_ROUND = 6755399441055744.0  # 1.5 * 2**52: (y + _ROUND) - _ROUND is y rounded to an integer for |y| < 2**51


def _float(x: GraphTensor, op: str) -> GraphTensor:
    """Float math on an int/bool tensor computes in float32, as torch does."""
    if not isinstance(x, GraphTensor):
        check_tensors(op, input=x)
    return x if x.dtype.is_float else cast(x, dt.float32)


def _not_bool(x: GraphTensor, op: str):
    require(op, x.dtype.kind != "b", "not defined for bool tensors", x)


_LOWP = (dt.float16, dt.bfloat16)


def _inexact(v, d: dt.DType) -> bool:
    """Whether the Python number ``v`` changes when stored as ``d``."""
    with np.errstate(over="ignore"):
        return float(dt.to_storage(np.asarray(float(v)), d).reshape(-1)[0]) != float(v)


_F = TypeVar("_F", bound=Callable[..., Any])


@overload
def _opmath(f: _F) -> _F: ...
@overload
def _opmath(f: None = None, *, scalars_only: bool = False) -> Callable[[_F], _F]: ...
def _opmath(f=None, *, scalars_only: bool = False):
    """Run a multi-primitive float composition on float16/bfloat16 operands in float32 and round
    once at the end, as torch's kernels do. Rounding after every primitive loses several ulps
    (``round(x, 1)`` by a whole step) and can overflow where the result does not (softplus's
    ``exp(x)`` is inf in float16 from x = 11). Other dtypes are passed through untouched.

    ``scalars_only``: only when a Python scalar is not exact in the 16-bit type. torch's mul and div
    use the scalar in float32 (``x_f16 * 1e-7`` is 1e-4 at x = 1000, where the float16 scalar 1.19e-7
    gives 1.19e-4; ``x_f16 / 1e5`` is not 0), while its add and sub round the scalar to the tensor's
    dtype first (``bf16(0.0037) + 0.1`` is 0.10400, from ``bf16(0.1)``; in float32 it would round to
    0.10352): so add and sub are not wrapped. A single primitive on 16-bit tensors already computes
    in float32 and rounds once."""
    if f is None:
        return functools.partial(_opmath, scalars_only=scalars_only)

    @functools.wraps(f)
    def run(*args, **kw):
        vals = list(args) + list(kw.values())
        ts = [a for a in vals if isinstance(a, GraphTensor)]
        if not any(t.dtype in _LOWP for t in ts):
            return f(*args, **kw)
        target = result_dtype(ts)
        nums = [a for a in vals if isinstance(a, (bool, int, float)) and not isinstance(a, GraphTensor)]
        for a in nums:
            target = dt.promote_scalar(target, a)
        if scalars_only and not (target in _LOWP and any(_inexact(a, target) for a in nums)):
            return f(*args, **kw)

        def up(a):
            return cast(a, dt.float32) if isinstance(a, GraphTensor) and a.dtype in _LOWP else a

        out = f(*map(up, args), **{k: up(v) for k, v in kw.items()})
        return cast(out, target) if target in _LOWP and out.dtype is dt.float32 else out

    return run


# arithmetic ---------------------------------------------------------------------------------
def add(a, b, alpha=1) -> GraphTensor:
    """torch.add: ``a + alpha * b``, elementwise, broadcast, in the promoted dtype of the operands.

    As torch, ``alpha`` does not take part in the promotion: it is applied in the result's dtype,
    so an integral (int or bool) result refuses a float ``alpha``, only a bool result takes a bool
    one, and for a bool result an int ``alpha`` is ``bool(alpha)`` (``add(b1, b2, alpha=2)`` is
    ``b1 | b2``, not int32 ``b1 + 2 * b2``). float16/bfloat16 compute ``a + alpha * b`` in float32
    and round once, as torch's kernels.

    Args:
        a: a tensor, numpy array or number (one operand must be a tensor).
        b: a tensor, numpy array or number.
        alpha: the multiplier of ``b`` (default 1).
    """
    if alpha.__class__ is int and alpha == 1:  # valid for every dtype: the common case, unchecked
        a, b = coerce("add", a, b)
        return prim("Add", a, b)
    return _plus_scaled("add", a, b, alpha)


def _plus_scaled(op: str, a, b, alpha) -> GraphTensor:
    """``a + alpha * b`` (``op`` "add") or ``a - alpha * b`` ("sub"), ``alpha`` applied in the
    promoted dtype of ``a`` and ``b`` and checked against it as torch's ``alpha_check`` (``add``)."""
    a, b = coerce(op, a, b)
    d = a.dtype
    is_bool = isinstance(alpha, (bool, np.bool_))
    if isinstance(alpha, GraphTensor) or not (is_bool or isinstance(alpha, numbers.Number)):
        raise op_error(TypeError, op, f"alpha must be a number, got {type(alpha).__name__} {alpha!r}", a, b)
    if not is_bool and not isinstance(alpha, numbers.Real):
        raise op_error(TypeError, op, f"alpha must not be a complex number (got {alpha!r}): the operands are "
                       f"{d.name}, as torch's", a, b)
    if is_bool and d.kind != "b":
        raise op_error(TypeError, op, f"a bool alpha ({alpha!r}) is only for a bool result, as torch's; this "
                       f"one is {d.name}", a, b)
    if d.kind in "bi" and not is_bool and not isinstance(alpha, numbers.Integral):
        raise op_error(TypeError, op, f"for an integral ({d.name}) result, alpha must not be a floating point "
                       f"number (got {alpha!r}), as torch's", a, b)
    if d.kind == "b":  # alpha is bool(alpha); a sub with a bool operand was refused (sub)
        return prim("Add", a, b if alpha else full_like(b, False))
    if d.kind == "i":  # sub is add with -alpha, as torch's: -alpha must fit (sub takes 2**31, not -2**31)
        alpha = int(alpha) if op == "add" else -int(alpha)
        if not -2**31 <= alpha < 2**31:
            raise op_error(ValueError, op, f"alpha={alpha if op == 'add' else -alpha} does not fit in int32, the "
                           f"result's dtype{'' if op == 'add' else ' (negated, as torch)'}", a, b)
        return prim("Add", a, b if alpha == 1 else mul(b, alpha))
    alpha = float(alpha)
    if math.isfinite(alpha) and d in _LOWP + (dt.float32,):
        with np.errstate(over="ignore"):  # (through float32, as torch's Scalar -> Half/BFloat16)
            stored = float(dt.to_storage(np.asarray(alpha, np.float32), d).reshape(-1)[0])
        if not math.isfinite(stored):
            raise op_error(ValueError, op, f"alpha={alpha!r} does not fit in {d.name}, the result's dtype "
                           f"(torch: cannot be converted without overflow)", a, b)
        alpha = stored
    if op == "sub":
        alpha = -alpha
    if d in _LOWP:
        # alpha rounded to d (above), then one rounding of a + alpha * b computed in float32, as torch's
        # kernel (alpha.to<scalar_t>(), then an fmadd in float32): the unrounded alpha (0.3, not
        # float16's 0.30005) moved 14% of float16 and 26% of bfloat16 results by an ulp
        r = prim("Add", cast(a, dt.float32), mul(cast(b, dt.float32), alpha))
        return cast(r, d)
    return prim("Add", a, b if alpha == 1 else mul(b, alpha))


@_opmath(scalars_only=True)
def mul(a, b) -> GraphTensor:
    """torch.mul: ``a * b``, elementwise, broadcast, in the promoted dtype of the operands.

    Args:
        a: a tensor, numpy array or number (one operand must be a tensor).
        b: a tensor, numpy array or number.
    """
    a, b = coerce("mul", a, b)
    return prim("Mul", a, b)


@tensor_op("neg")
def neg(x: GraphTensor) -> GraphTensor:
    """``-x`` elementwise (torch.neg). Not defined for bool tensors, as in torch.

    Args:
        x: the input tensor.
    """
    _not_bool(x, "neg")
    return mul(x, -1)


def sub(a, b, alpha=1) -> GraphTensor:
    """torch.sub: ``a - alpha * b``, elementwise, broadcast. Not defined for a bool operand (a tensor or
    a scalar), as torch's.

    Args:
        a: a tensor, numpy array or number (one operand must be a tensor).
        b: a tensor, numpy array or number.
        alpha: the multiplier of ``b`` (default 1), applied and checked as ``add``'s.
    """
    _no_bool_operand(a, b)
    if alpha.__class__ is int and alpha == 1:
        a, b = coerce("sub", a, b)
        return add(a, neg(b))
    return _plus_scaled("sub", a, b, alpha)


def _no_bool_operand(a, b) -> None:
    """torch refuses a subtraction with any bool operand (a tensor, a Python or numpy bool), whatever
    the other's dtype: ``mask - 1`` and ``x - mask`` are errors, not arithmetic on 0 and 1."""
    for v in (a, b):
        if (v.dtype.kind == "b" if isinstance(v, (GraphTensor, np.ndarray)) else isinstance(v, (bool, np.bool_))):
            ts = [t for t in (a, b) if isinstance(t, GraphTensor)]
            raise op_error(TypeError, "sub", "subtraction with a bool operand is not supported, as torch's; to "
                           "invert a mask use ~ or logical_not(), or cast it first (mask.int())", *ts)


@tensor_op("reciprocal")
def reciprocal(x: GraphTensor) -> GraphTensor:
    """``1 / x`` elementwise (torch.reciprocal). Int and bool inputs give float32.

    Args:
        x: the input tensor.
    """
    return prim("Recip", _float(x, "reciprocal"))


def div(a, b, rounding_mode=None) -> GraphTensor:
    """torch.div: ``a / b``, elementwise, broadcast; true division (int operands give float32)
    unless ``rounding_mode`` says otherwise.

    Args:
        a: the dividend (a tensor, numpy array or number).
        b: the divisor.
        rounding_mode: None (true division), ``"trunc"`` (round toward zero) or ``"floor"`` (round
            down, as ``floor_divide``).
    """
    if rounding_mode == "floor":
        return _floor_divide(a, b, "div")
    if rounding_mode == "trunc":
        return _trunc_div(a, b)
    if rounding_mode is not None:
        raise op_error(ValueError, "div", f"rounding_mode must be None, 'trunc' or 'floor', got {rounding_mode!r}")
    return _true_div(a, b)


@_opmath
def _true_div(a, b) -> GraphTensor:
    """``a / b``. float32 (and so the 16-bit types, which ``_opmath`` lifts to float32) computes
    ``a * (1/b)`` in float64 and rounds once: the float64 value is within 2**-51 (relative) of the
    exact quotient, closer than any quotient of 24-bit numbers comes to a float32 rounding boundary
    (2**-49), so the result is correctly rounded as torch's division (and a float32 quotient rounds
    correctly again to 16 bits: 24 >= 2*11 + 2), but for the subnormal results, whose boundaries are
    coarser (an exact quotient can sit on one: there a float64 product one unit off may round the
    other way). In float32 itself ``a * (1/b)`` was 1 ulp off for a quarter of random quotients and
    wrong where ``1/b`` leaves the normal range (1e-40 / 1e-40 was inf, 3e38 / 3e38 0.99999994).
    A Python-number divisor that is a power of two with a normal reciprocal (``x / 2``, ``x / 0.5``)
    multiplies in float32: that product is the exact quotient rounded once. float64 keeps
    ``a * (1/b)`` (no wider type; within an ulp)."""
    a, b = coerce("div", a, b, min_kind="f")
    if a.dtype is dt.float32 and not _exact_reciprocal(b):
        return cast(prim("Mul", cast(a, dt.float64), prim("Recip", cast(b, dt.float64))), dt.float32)
    return prim("Mul", a, prim("Recip", b))


def _exact_reciprocal(b: GraphTensor) -> bool:
    """Whether float32 ``b`` is a scalar constant +-2**k whose reciprocal is a normal float32 (k in
    [-127, 126]): then ``a * (1/b)`` is one correctly rounded product of ``a`` and the exact ``1/b``."""
    n = b.node
    if n.op != "Constant" or n.arg.scalar is None or n.arg.digest == "sym":
        return False
    v = abs(float(n.arg.scalar))
    if not 0 < v < math.inf:
        return False
    m, e = math.frexp(v)  # v = m * 2**e, m in [0.5, 1): 1/v = 2**(1 - e)
    return m == 0.5 and -126 <= 1 - e <= 127


def _number_divisor(a, b) -> bool:
    """Whether ``b`` is a Python (or numpy) number dividing a float16/bfloat16 tensor ``a``: torch's
    trunc and floor division kernels then read ``b`` in float32, unrounded, and divide in float32
    (``original_scalar_value``), where a tensor divisor, or a number dividend, is rounded to the
    16-bit dtype first: ``bf16(35.75) // 0.3`` is 119 (35.75 / 0.3), not 118 (/ 0.30078125)."""
    return (isinstance(a, GraphTensor) and a.dtype in _LOWP and isinstance(b, numbers.Real)
            and not isinstance(b, (bool, np.bool_)))


def _trunc_div(a, b) -> GraphTensor:
    """torch: ``trunc`` of the quotient rounded to the dtype. ``a * (1/b)`` is not correctly rounded
    (-188 / 47 comes out as -3.9999998), so float32 divides in float64 and rounds once, and
    float16/bfloat16 divide in float32 (``_opmath``); float64 takes the nearest integer when ``b``
    divides ``a`` exactly. Integers divide exactly."""
    if _number_divisor(a, b):
        return cast(_trunc_div(cast(a, dt.float32), b), a.dtype)
    a, b = coerce("div", a, b)
    _not_bool(a, "div")
    if a.dtype.kind == "i":
        return _divisor_checked("div", a, b, _int_div(a, b, floor=False))
    if a.dtype is dt.float32:
        return trunc(cast(_true_div(cast(a, dt.float64), cast(b, dt.float64)), dt.float32))
    q = _true_div(a, b)
    if a.dtype is dt.float64:
        q = where(eq(prim("Mod", a, b), 0), round_(q), q)
    return trunc(q)


def _int_div(a: GraphTensor, b: GraphTensor, floor: bool) -> GraphTensor:
    """Exact int32 quotient (truncated or floored): ``a - fmod(a, b)`` is an exact multiple of ``b``,
    so its float64 quotient is within rounding of an integer and rounds to it. (``a * (1/b)`` alone
    is not enough: ``49 * (1/49)`` is 0.9999999999999999 in float64.) A zero divisor gives garbage:
    callers check it (``_divisor_checked``). ``INT_MIN / -1`` is 2**31, past int32: it wraps to
    INT_MIN, as an int32 division does (a cast of 2**31 would saturate to INT_MAX)."""
    m = prim("Mod", a, b)
    q = round_(mul(cast(sub(a, m), dt.float64), reciprocal(cast(b, dt.float64))))
    q = cast(where(ge(q, 2.0**31), sub(q, 2.0**32), q), a.dtype)
    if floor:
        q = where(logical_and(ne(m, 0), ne(lt(m, 0), lt(b, 0))), sub(q, 1), q)
    return q


def int_div_nonzero(a: GraphTensor, b: GraphTensor) -> GraphTensor:
    """The floored integer quotient of ``a`` by ``b`` where the caller's construction keeps ``b``
    nonzero (a count clamped to at least 1): no run-time zero check, which would run a second program
    on every call and name an op the user never wrote."""
    return _int_div(*coerce("floor_divide", a, b), floor=True)


def _nonzero_constant(b: GraphTensor) -> bool:
    """Whether ``b`` reads a constant without a zero (a Python number, a constant array)."""
    n = b.node
    if n.op != "Constant":
        return False
    if n.arg.scalar is not None:
        return n.arg.digest != "sym" and n.arg.scalar != 0  # (a symbolic dim may be 0 at run time)
    return bool(np.all(b.graph.constants[n.arg] != 0))


def _divisor_checked(op: str, a: GraphTensor, b: GraphTensor, q: GraphTensor) -> GraphTensor:
    """``q``, an integer quotient or remainder of ``a`` by ``b``, with a run-time check that no
    divisor is zero (``Graph.guard``): torch raises ZeroDivisionError there, where the compositions
    would silently give -2**31 or 0. The check runs before the program, on the run's own values, and
    names ``op`` and the user's line; it reads the divisor broadcast to ``q`` (an empty quotient
    divides nothing, as in torch), and costs nothing where ``b`` is a constant without a zero. Float
    division by zero is IEEE's (inf, NaN) and is not checked."""
    if _nonzero_constant(b):
        return q
    zero = eq(b, 0)
    failed = (zero.expand(*q.shape) if tuple(zero.shape) != tuple(q.shape) else zero).any()
    zeros = cast(zero, dt.int32).sum()
    message = str(op_error(ZeroDivisionError, op, "integer division by zero: the divisor holds {value} zero(s)",
                           a, b))
    q.graph.guard(failed, zeros, ZeroDivisionError, message, of=q)
    return q


def fmod(a, b) -> GraphTensor:
    """torch.fmod: the remainder of ``a / b`` with the sign of the dividend ``a`` (C's fmod),
    elementwise. Not defined for bool tensors.

    Args:
        a: the dividend.
        b: the divisor.
    """
    a, b = coerce("fmod", a, b)
    _not_bool(a, "fmod")
    r = prim("Mod", a, b)
    return _divisor_checked("fmod", a, b, r) if a.dtype.kind == "i" else r


def remainder(a, b) -> GraphTensor:
    """Python/torch ``%``: the result takes the sign of the divisor."""
    a, b = coerce("remainder", a, b)
    _not_bool(a, "remainder")
    r = prim("Mod", a, b)
    fix = logical_and(ne(r, 0), ne(lt(r, 0), lt(b, 0)))
    r = where(fix, add(r, b), r)
    return _divisor_checked("remainder", a, b, r) if a.dtype.kind == "i" else r


def floor_divide(a, b) -> GraphTensor:
    """torch ``//``: floor of the quotient. Integers divide exactly through float64 (a zero integer
    divisor raises ZeroDivisionError when the program runs, as torch)."""
    return _floor_divide(a, b, "floor_divide")


def _floor_divide(a, b, op: str) -> GraphTensor:
    if _number_divisor(a, b):  # (in float32, rounded once, as torch)
        return cast(_floor_divide(cast(a, dt.float32), b, op), a.dtype)
    a, b = coerce(op, a, b)
    _not_bool(a, op)
    if a.dtype.kind == "i":
        return _divisor_checked(op, a, b, _int_div(a, b, floor=True))
    m = prim("Mod", a, b)
    q = div(sub(a, m), b)
    q = where(logical_and(ne(m, 0), ne(lt(b, 0), lt(m, 0))), sub(q, 1), q)
    f = floor(q)
    q = _zero_signed(div(a, b), where(gt(sub(q, f), 0.5), add(f, 1), f))  # (a zero has the quotient's sign)
    return where(eq(b, 0), div(a, b), q).detach()  # piecewise constant (a/b at b == 0): no gradient, as torch


def pow(a, b) -> GraphTensor:  # noqa: A001 - torch's name
    """``a ** b``. Integer exponents (Python ints, and integral Python floats on float tensors)
    multiply exactly; half-integral Python floats on float32 tensors (``x ** 2.5``) multiply
    ``sqrt(|a|)`` (``_pow_half_integer``); otherwise ``exp2(b*log2|a|)`` with the sign restored for
    integral exponents, NaN for a negative base with a fractional exponent. int32 powers wrap on overflow as torch's
    (a tensor exponent: ``_int_pow``). A bool base, as torch's: to a Python int, an int32 power (``x ** 0``
    is all 1); to a Python bool, bool (``x ** True`` is ``x``, ``x ** False`` all True); to a bool
    tensor, refused.

    float16/bfloat16 tensors are raised in float32 and rounded once; a Python number with one is first
    rounded to its dtype, as torch does (``_pow_scalar``)."""
    if isinstance(a, GraphTensor) and not isinstance(b, GraphTensor):
        b = _pow_scalar(a, b, "exponent")
    elif isinstance(b, GraphTensor) and not isinstance(a, GraphTensor):
        a = _pow_scalar(b, a, "base")
    return _pow(a, b)


def _pow_scalar(t: GraphTensor, v, what: str):
    """A Python number ``v`` raised with (or raising) the float16/bfloat16 tensor ``t``, rounded to
    ``t``'s dtype, as torch's pow reads it: ``x ** 2.7`` is ``x ** 2.69921875`` in float16 (5 ulps
    from ``x ** 2.7`` computed in float32), ``x ** 2.0001`` is ``x ** 2`` (finite for x < 0), and
    ``x ** 4097`` is ``x ** 4096``. A finite number beyond the dtype's range is refused, as torch does;
    other numbers and dtypes pass unchanged."""
    if t.dtype not in _LOWP or isinstance(v, bool) or not isinstance(v, (int, float)):
        return v
    if abs(v) > _finite_max(t.dtype) and v not in (math.inf, -math.inf):  # (a Python int may exceed float64)
        raise op_error(ValueError, "pow", f"the {what} {v!r} does not fit {t.dtype.name} (largest finite value "
                       f"{_finite_max(t.dtype):g}), the dtype a Python number takes with a {t.dtype.name} "
                       f"tensor; cast the tensor to float32 first", t)
    r = float(dt.to_storage(np.asarray(float(v)), t.dtype).reshape(-1)[0])
    return int(r) if isinstance(v, int) else r


@_opmath
def _pow(a, b) -> GraphTensor:
    if isinstance(a, GraphTensor) and a.dtype.kind == "b" and isinstance(b, (bool, int)):
        if isinstance(b, bool):
            return fresh(a) if b else full_like(a, True)
        a = cast(a, dt.int32)
    if isinstance(b, float) and isinstance(a, GraphTensor) and not a.dtype.is_float:
        a = cast(a, dt.float32)  # (an int or bool base to a float power is float32, as torch: 10 ** 2.0 is 100)
    if isinstance(b, float) and b.is_integer() and abs(b) <= 64 and isinstance(a, GraphTensor) and a.dtype.is_float:
        b = int(b)  # x ** 2.0 is x * x, as in torch (whose gradient at x = 0 is then 0, not NaN)
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
        if out is None:
            return full_like(a, 1)
        return fresh(out) if out is a else out  # (x ** 1: a handle of its own, as torch's new tensor)
    if isinstance(b, float) and b == 0.5 and isinstance(a, GraphTensor):
        return sqrt(a)
    if (isinstance(b, float) and (2 * b).is_integer() and abs(b) <= 64 and isinstance(a, GraphTensor)
            and a.dtype is dt.float32):
        return _pow_half_integer(a, b)
    a, b = coerce("pow", a, b)
    _not_bool(a, "pow")
    if not a.dtype.is_float:
        return _int_pow(a, b)
    if a.dtype is dt.float32:
        # in float64, rounded once: exp2(b * log2(a)) in float32 carries log2(a)'s rounding times b
        # (35 ulps off at 20 ** 10; 5 ** 3.0 was 124.99998), within an ulp of torch in float64
        return cast(_float_pow(cast(a, dt.float64), cast(b, dt.float64)), dt.float32)
    return _float_pow(a, b, exact_exponent=True)


def _pow_half_integer(a: GraphTensor, b: float) -> GraphTensor:
    """float32 ``a ** b`` for a Python exponent ``b = +-(m + 1/2)`` (``x ** 2.5``, ``x ** -1.5``):
    ``|a|**m sqrt(|a|)`` (its reciprocal for ``b < 0``) in float64, rounded once: within half an ulp
    (and a hair; about ``m + 2`` roundings of float64). ``exp2(b log2|a|)`` in float64 took 8 times
    exp's time (float64's exact log2 and exp2). pow's special values (C99): NaN for a finite negative
    base, ``(-0) ** b`` as ``0 ** b`` (0, or inf for ``b < 0``), ``(-inf) ** b`` as ``inf ** b``. The
    gradient is ``b a**(b - 1)`` by the same route, 0 at a zero base as ``_float_pow``'s."""

    def magnitude(x: GraphTensor, e: float) -> GraphTensor:
        xd = cast(x, dt.float64)
        base = where(eq(xd, -math.inf), math.inf, where(eq(xd, 0), 0.0, xd))  # (-0.0 as +0.0)
        out = sqrt(base)  # NaN below 0
        p, k = base, int(abs(e))
        while k:
            if k & 1:
                out = mul(out, p)
            k >>= 1
            if k:
                p = mul(p, p)
        return reciprocal(out) if e < 0 else out

    return _derivative(cast(magnitude(a, b), dt.float32), a,
                       lambda x, y: where(eq(x, 0), 0.0, cast(mul(magnitude(x, b - 1), b), dt.float32)))


def _int_pow(a: GraphTensor, b: GraphTensor) -> GraphTensor:
    """int32 ``a ** b`` for an int32 tensor exponent, wrapping on overflow as torch's (and as the
    Python-int exponent path above): square-and-multiply over the 31 bits of ``b`` with int32
    multiplies, which wrap exactly (a float64 power cast back saturated: ``46341 ** 2`` was INT_MIN).
    The bits are read from ``b`` in float64 (``fmod`` by 2 and an exact halving). A negative exponent
    gives torch's ``1 / a**|b|`` truncated: 1 for a base 1, +-1 for -1 by the parity of ``b``, else 0
    (``0 ** -1`` too). 31 rounds of a few elementwise primitives: the price of wrapping exactly."""
    e = cast(where(lt(b, 0), 0, b), dt.float64)
    out, p = None, a
    for k in range(31):
        bit = prim("Mod", e, full_like(e, 2.0))
        take = cast(bit, dt.bool_)
        out = where(take, p, 1) if out is None else where(take, prim("Mul", out, p), out)
        if k < 30:
            e = mul(sub(e, bit), 0.5)
            p = prim("Mul", p, p)
    odd = cast(prim("Mod", cast(b, dt.float64), full_like(e, 2.0)), dt.bool_)  # (fmod: -1 for odd b < 0)
    negative_power = where(eq(a, 1), 1, where(eq(a, -1), where(odd, -1, 1), 0))
    return where(lt(b, 0), negative_power, out)


def _float_pow(a, b, exact_exponent: bool = False) -> GraphTensor:
    """IEEE/C pow special cases, as torch: |a| == 1 never computes 0 * inf (so (-1) ** inf is 1);
    infinite exponents are even integers; -0 keeps its sign under odd exponents; only a finite
    negative base with a fractional exponent is NaN ((-inf) ** 0.5 is inf).

    Written so that the gradients are torch's: ``b * a**(b-1)`` and ``a**b * log(a)``. A zero base
    takes its own branch (the general one sees 1 instead: its log2(0) = -inf would turn the gradient
    into 0 * inf = NaN), where ``0 ** 1`` is ``a`` itself (gradient 1) and other powers are constants
    (gradient 0; torch's is +-inf for b < 1, b != 0, where a**b has a pole or a vertical tangent). The
    fractional-power NaN is a factor ``NaN``, so its gradients are NaN as torch's. Known difference: for
    a negative base torch's gradient by b is NaN (log of a negative number); here it is the
    derivative of ``sign * |a|**b``.

    ``exact_exponent`` (a float64 power): ``|a|**b`` by :func:`_pow_magnitude`, within about an ulp,
    where ``exp2(b * log2|a|)`` is off by the rounding of ``b * log2|a|``, up to ``|b log2 a|`` ulps
    (90 at ``x ** 2.5`` for x near 1e13); float32 computes in float64, where that is far below its ulp."""
    zero = eq(a, 0)  # +-0
    pos = abs_(where(zero, 1.0, a))
    lg = log2(pos)
    unit = eq(lg, 0)  # |a| == 1
    b_eff = where(logical_and(unit, isinf(b)), 0.0, b)  # 1 ** inf = 1, not inf * 0
    mag = _pow_magnitude(pos, b_eff, lg) if exact_exponent else exp2(mul(b_eff, lg))
    b_int = eq(b, trunc(b))  # true for +-inf
    b_odd = eq(abs_(fmod(b, 2)), 1)  # false for +-inf and NaN
    a_neg = logical_or(lt(a, 0), lt(reciprocal(a), 0))  # includes -0
    flip = logical_and(a_neg, b_odd)
    frac = logical_and(logical_and(lt(a, 0), gt(a, -math.inf)), logical_not(b_int))
    # NaN for a fractional power of a negative base, as a factor so that its gradients are NaN too (a
    # NaN constant in an unselected where branch would make every gradient 0 * NaN)
    general = mul(where(flip, neg(mag), mag), where(frac, math.nan, 1.0))
    # 0 ** b: 0 for b > 0, inf for b < 0, 1 for b == 0, NaN for NaN; sign flipped for -0 ** odd
    zmag = where(gt(b, 0), 0.0, where(lt(b, 0), math.inf, where(eq(b, 0), 1.0, math.nan)))
    # (+ a * 0, or a * NaN for a NaN exponent: the value is unchanged, the gradient NaN as torch's)
    at_zero = where(eq(b, 1), a, add(where(flip, neg(zmag), zmag), mul(a, where(isnan(b), math.nan, 0.0))))
    out = where(zero, at_zero, general)
    # x ** 0 = 1 for x = +-inf and NaN too, and 1 ** NaN = 1
    one = logical_or(logical_and(eq(b, 0), logical_not(isfinite(lg))), logical_and(eq(a, 1), isnan(b)))
    return where(one, 1.0, out)


_SPLIT = 134217729.0  # 2**27 + 1: Veltkamp's split of a double into its high 26 bits and the rest


def _pow_magnitude(p: GraphTensor, b: GraphTensor, lg: GraphTensor) -> GraphTensor:
    """float64 ``p ** b`` for ``p > 0`` (``lg = log2(p)``) with the exponent ``b log2(p)`` carried in
    more than a double: ``p = 2**e m``, ``e`` the integer nearest ``lg`` and ``m`` in about
    [sqrt(1/2), sqrt(2)] (exact), ``b`` split in halves of 26 and 27 bits (Veltkamp: ``bh e`` is exact),
    so ``b log2(p) = bh e + (bl e + b log2(m))`` with ``bh e`` cut into its nearest integer ``n`` and the
    rest, and ``p ** b = 2**n 2**(rest)`` (``_times_pow2``, rounded once). Errors: the
    rounding of ``rest`` and of ``b log2(m)``, at most about ``1 + |b| / 2`` ulps (under an ulp for
    the usual exponents, against ``|b log2(p)|`` for ``exp2(b * lg)``). Subnormal ``p``, non-finite
    operands and ``|b| >= 2**60`` (where the result is 0, 1 or inf, or the split overflows) take
    ``exp2(b * lg)``. A float64 power outside a narrow composition (``float64_paths``) takes
    ``_pow_dd`` instead: within an ulp for every exponent, subnormal ``p`` too. The gradients are the
    function's, as torch's: ``b p**b / p`` and ``p**b ln(p)`` (``Graph.custom_vjp``)."""
    if _accurate(p):
        fine, usable = _pow_dd(p, b), logical_and(lt(p, math.inf), lt(abs_(b), 2.0 ** 60))
    else:
        e = sub(add(lg, _ROUND), _ROUND)
        m = mul(p, exp2(neg(e)))
        c = mul(b, _SPLIT)
        bh = sub(c, sub(c, b))
        high = mul(bh, e)
        n = sub(add(high, _ROUND), _ROUND)
        rest = add(sub(high, n), add(mul(sub(b, bh), e), mul(b, log2(m))))
        fine = _times_pow2(exp2(rest), n)
        usable = logical_and(logical_and(ge(p, 2.0 ** -1022), lt(p, math.inf)), lt(abs_(b), 2.0 ** 60))
    y = where(usable, fine, exp2(mul(b, lg)))
    g = p.graph
    out = g.tensor(g.add("Copy", (y,), "pow", y.dtype, y.shape))  # (a node of its own to carry the rule)
    return g.custom_vjp(out, [p, b], lambda out, adjoint, p, b: [div(mul(mul(adjoint, b), out), p),
                                                               mul(mul(adjoint, out), mul(log2(p), LN2))])


# fdlibm's e_pow.c: log2 of m in [sqrt(3)/2, sqrt(3)) as ``dp + 2/(3 ln 2) s (3 + s**2 + r)``,
# s = (m - bp) / (m + bp) with bp 1 or 3/2 (|s| < 0.102), log2(3/2) and 2/(3 ln 2) in a 21-bit high part
# and the rest (mpmath, 50 digits); r's series 3/(2k+1) s**(2k), k >= 2 (Taylor: the first left out is
# below 2**-66 of the sum)
_LOG2_BP = (0.5849623680114746, 1.3270968157207873e-07)  # log2(3/2)
_CP = (0.9617966939259756, 0.9617962837219238, 4.102040517767816e-07)  # 2/(3 ln 2), its 21-bit head, rest
_LOG2_R = tuple(3 / (2 * k + 1) for k in range(2, 9))
_LN2_DD = (0.6931471805599453, 2.3190468138462996e-17)
_LN2_HALVES = (0.6931471824645996, -1.904654323148236e-09)  # Veltkamp's split of _LN2_DD[0]


def _log2_dd(x: GraphTensor) -> tuple[GraphTensor, GraphTensor]:
    """float64 ``log2(x) = t1 + t2`` for finite ``x > 0`` (subnormal too), to about 2**-64 relative
    (fdlibm's e_pow.c): ``x = 2**e m``, ``m`` in [sqrt(3)/2, sqrt(3)), and ``log2(m)`` from ``s``
    carried as ``s_h + s_l``, the products of 26-bit halves exact (Veltkamp's ``_halves`` in place of
    e_pow's zeroed low words). ``t1`` has 26 significant bits."""
    tiny = lt(x, 2.0 ** -1022)
    xs = where(tiny, mul(x, 2.0 ** 54), x)
    e = sub(add(log2(xs), _ROUND), _ROUND)
    m = mul(xs, exp2(neg(e)))
    low = lt(m, math.sqrt(3) / 2)
    m = where(low, mul(m, 2.0), m)
    e = sub(e, add(cast(low, dt.float64), mul(cast(tiny, dt.float64), 54.0)))
    k = ge(m, math.sqrt(1.5))
    bp = where(k, 1.5, 1.0)
    u = sub(m, bp)  # (exact)
    inv = reciprocal(add(m, bp))
    ss = mul(u, inv)
    s_h, _ = _halves(ss)
    t_h, _ = _halves(add(m, bp))
    t_l = sub(m, sub(t_h, bp))
    s_l = mul(inv, sub(sub(u, mul(s_h, t_h)), mul(s_h, t_l)))
    s2 = mul(ss, ss)
    r = add(mul(mul(s2, s2), _poly(s2, _LOG2_R)), mul(s_l, add(s_h, ss)))
    s2 = mul(s_h, s_h)
    t_h, _ = _halves(add(add(s2, 3.0), r))
    t_l = sub(r, sub(sub(t_h, 3.0), s2))
    u = mul(s_h, t_h)
    v = add(mul(s_l, t_h), mul(t_l, ss))
    p_h, _ = _halves(add(u, v))
    p_l = sub(v, sub(p_h, u))
    z_h = mul(p_h, _CP[1])
    kf = cast(k, dt.float64)  # (a where of two Python numbers would be float32)
    z_l = add(add(mul(p_h, _CP[2]), mul(p_l, _CP[0])), mul(kf, _LOG2_BP[1]))
    dp_h = mul(kf, _LOG2_BP[0])
    t1, _ = _halves(add(add(add(z_h, z_l), dp_h), e))
    return t1, sub(z_l, sub(sub(sub(t1, e), dp_h), z_h))


def _pow_dd(p: GraphTensor, b: GraphTensor) -> GraphTensor:
    """float64 ``p ** b`` for finite ``p > 0`` (subnormal too) and ``|b| < 2**60``, within about an ulp
    for every exponent (fdlibm's e_pow.c): ``b log2(p)`` as ``p_h + p_l`` (``_log2_dd``; ``p_h`` the
    exact product of 26-bit halves), ``n`` its nearest integer and ``2**(rest)`` as ``e**(rest ln 2)``
    with the argument a double-double (``_exp_reduced``), rounded once. ``_pow_magnitude``'s single
    ``b log2(m)`` carries that product's and ``log2``'s roundings times ``|b log2(m)|``: 600 ulps for
    ``a`` near 1 with ``|b ln a|`` near 700. The exponent is held to [-1100, 1100], where the result is
    already 0 or inf, so the reduction stays exact."""
    t1, t2 = _log2_dd(p)
    y1, y2 = _halves(b)
    p_h = mul(y1, t1)
    p_l = add(mul(y2, t1), mul(b, t2))
    big = gt(abs_(p_h), 1100.0)
    p_h = where(big, where(gt(p_h, 0.0), 1100.0, -1100.0), p_h)
    p_l = where(big, 0.0, p_l)
    n = sub(add(p_h, _ROUND), _ROUND)
    r = add(sub(p_h, n), p_l)  # (p_h - n exact)
    rl = sub(p_l, sub(r, sub(p_h, n)))
    x = mul(r, _LN2_DD[0])
    rh, rlo = _halves(r)  # (Dekker's product with ln 2's halves, _LN2_HALVES)
    xl = add(add(add(sub(mul(rh, _LN2_HALVES[0]), x), mul(rh, _LN2_HALVES[1])), mul(rlo, _LN2_HALVES[0])),
             mul(rlo, _LN2_HALVES[1]))
    n2, s, t = _exp_reduced(x, add(xl, add(mul(r, _LN2_DD[1]), mul(rl, _LN2_DD[0]))))
    u, ul = _two_sum(1.0, s)
    return _times_pow2(add(u, add(ul, t)), add(n, n2))


def maximum(a, b) -> GraphTensor:
    """torch.maximum: the larger of ``a`` and ``b``, elementwise (NaN if either is NaN).

    Args:
        a: a tensor, numpy array or number (one operand must be a tensor).
        b: a tensor, numpy array or number.
    """
    a, b = coerce("maximum", a, b)
    return prim("Max", a, b)


def minimum(a, b) -> GraphTensor:
    """torch.minimum: the smaller of ``a`` and ``b``, elementwise (NaN if either is NaN).

    Args:
        a: a tensor, numpy array or number (one operand must be a tensor).
        b: a tensor, numpy array or number.
    """
    a, b = coerce("minimum", a, b)
    if a.dtype.is_float:
        return neg(prim("Max", neg(a), neg(b)))
    if a.dtype.kind == "b":
        return prim("Mul", a, b)
    return where(lt(a, b), a, b)


@tensor_op("clamp")
def clamp(x: GraphTensor, min=None, max=None) -> GraphTensor:  # noqa: A002 - torch's names
    """``min(max(x, min), max)`` (so ``max`` wins when ``min > max``; NaN anywhere gives NaN).

    Spelled as torch's gradient reads it: ``x`` where ``min <= x <= max`` (its gradient 1 there, 0 at
    NaN), ``min`` where ``x < min < max``, ``max`` where ``x > max`` or ``max < min``; what is left
    (NaNs, and ``x < min == max``) takes the value with no gradient, as in torch."""
    if min is None and max is None:
        raise op_error(ValueError, "clamp", "at least one of min and max must be given", x)
    if max is None:
        x, lo = coerce("clamp", x, min)
        return where(ge(x, lo), x, where(lt(x, lo), lo, prim("Max", x, lo).detach()))
    if min is None:
        x, hi = coerce("clamp", x, max)
        return where(le(x, hi), x, where(gt(x, hi), hi, minimum(x, hi).detach()))
    ordered = isinstance(min, (int, float)) and isinstance(max, (int, float)) and min <= max  # not NaN
    x, lo, hi = coerce("clamp", x, min, max)
    inside = logical_and(ge(x, lo), le(x, hi))
    low = logical_and(lt(x, lo), lt(lo, hi))
    high = logical_or(gt(x, hi), lt(hi, lo))
    top = hi
    if x.dtype.is_float and not ordered:
        # max's branch also takes a NaN x (when max < min) and x > max with a NaN min: torch's value
        # there is NaN, its gradient still max's. Adding -0.0 (exactly the identity) or NaN keeps both.
        g = x.graph
        top = add(hi, where(logical_or(isnan(x), isnan(lo)), g.constant(math.nan, hi.dtype),
                            g.constant(-0.0, hi.dtype)))
    return where(inside, x, where(low, lo, where(high, top, minimum(prim("Max", x, lo), hi).detach())))


@tensor_op("lerp")
@_opmath
def lerp(a, b, weight) -> GraphTensor:
    """torch.lerp: the linear interpolation from ``a`` to ``b``, elementwise (broadcast), in torch's
    two-sided form: ``a + weight * (b - a)`` where ``|weight| < 0.5``, else
    ``b - (b - a) * (1 - weight)``. So ``weight == 1`` gives ``b`` exactly (the one-sided form loses
    it: ``lerp(1e8, 1, 1)`` would be 0), and an infinite end is kept where the other end's share is
    small (``lerp(-inf, 1, 0.75)`` is -inf; at 0.25 it is NaN, as torch's). The gradients are torch's:
    ``1 - weight``, ``weight`` and ``b - a``. A Python-number weight picks its side when the graph is
    built.

    Args:
        a: the start (a tensor).
        b: the end (a tensor or a number).
        weight: the interpolation weight (a tensor or a number).
    """
    if isinstance(weight, numbers.Real) and not isinstance(weight, GraphTensor):
        d = sub(b, a)
        if d.dtype is not dt.float64:  # torch takes the weight, and 1 - weight, in float32
            weight = float(np.float32(weight))
        if abs(weight) < 0.5:
            return add(a, mul(weight, d))
        return sub(b, mul(d, 1 - weight))  # (1 - weight: exact in float64, then rounded once)
    # a + w*d or b + (w-1)*d (= b - (1-w)*d exactly): one product, so no where branch multiplies a
    # zero adjoint by an infinite d (0 * inf = NaN in the weight's gradient)
    if not isinstance(weight, GraphTensor):  # (a numpy array)
        weight = coerce("lerp", a, weight)[1]
    near_a = lt(abs_(weight), 0.5)
    return add(where(near_a, a, b), mul(where(near_a, weight, sub(weight, 1)), sub(b, a)))


# comparison and logic -------------------------------------------------------------------------
def lt(a, b) -> GraphTensor:
    """torch.lt: ``a < b`` elementwise, broadcast, compared in the promoted dtype; a bool tensor
    (IEEE: a comparison with NaN is False).

    Args:
        a: a tensor, numpy array or number (one operand must be a tensor).
        b: a tensor, numpy array or number.
    """
    a, b = coerce("lt", a, b)
    return prim("LessThan", a, b, dtype=dt.bool_)


def gt(a, b) -> GraphTensor:
    """torch.gt: ``a > b`` elementwise, broadcast, compared in the promoted dtype; a bool tensor
    (IEEE: a comparison with NaN is False).

    Args:
        a: a tensor, numpy array or number (one operand must be a tensor).
        b: a tensor, numpy array or number.
    """
    a, b = coerce("gt", a, b)
    return prim("LessThan", b, a, dtype=dt.bool_)


@tensor_op("isnan")
def isnan(x: GraphTensor) -> GraphTensor:
    """NaN is the only value neither below +inf nor above -inf."""
    if not x.dtype.is_float:
        return _const_bool(x, False)
    return logical_not(logical_or(lt(x, math.inf), gt(x, -math.inf)))


@tensor_op("isinf")
def isinf(x: GraphTensor) -> GraphTensor:
    """Whether each element is +inf or -inf (a bool tensor; always False for int and bool).

    Args:
        x: the input tensor.
    """
    if not x.dtype.is_float:
        return _const_bool(x, False)
    return logical_or(eq(x, math.inf), eq(x, -math.inf))


@tensor_op("isfinite")
def isfinite(x: GraphTensor) -> GraphTensor:
    """Whether each element is finite: neither inf nor NaN (a bool tensor; always True for int and bool).

    Args:
        x: the input tensor.
    """
    if not x.dtype.is_float:
        return _const_bool(x, True)
    return logical_and(lt(x, math.inf), gt(x, -math.inf))


def eq(a, b) -> GraphTensor:
    """torch.eq: ``a == b`` elementwise, broadcast, compared in the promoted dtype; a bool tensor
    (IEEE: a comparison with NaN is False).

    Args:
        a: a tensor, numpy array or number (one operand must be a tensor).
        b: a tensor, numpy array or number.
    """
    a, b = coerce("eq", a, b)
    out = logical_not(logical_or(prim("LessThan", a, b, dtype=dt.bool_), prim("LessThan", b, a, dtype=dt.bool_)))
    if a.dtype.is_float:
        out = logical_and(out, logical_not(logical_or(isnan(a), isnan(b))))
    return out


def ne(a, b) -> GraphTensor:
    """torch.ne: ``a != b`` elementwise, broadcast, compared in the promoted dtype; a bool tensor
    (IEEE: a comparison with NaN is True).

    Args:
        a: a tensor, numpy array or number (one operand must be a tensor).
        b: a tensor, numpy array or number.
    """
    a, b = coerce("ne", a, b)
    return logical_not(eq(a, b))


def le(a, b) -> GraphTensor:
    """torch.le: ``a <= b`` elementwise, broadcast, compared in the promoted dtype; a bool tensor
    (IEEE: a comparison with NaN is False).

    Args:
        a: a tensor, numpy array or number (one operand must be a tensor).
        b: a tensor, numpy array or number.
    """
    a, b = coerce("le", a, b)
    return logical_or(lt(a, b), eq(a, b))


def ge(a, b) -> GraphTensor:
    """torch.ge: ``a >= b`` elementwise, broadcast, compared in the promoted dtype; a bool tensor
    (IEEE: a comparison with NaN is False).

    Args:
        a: a tensor, numpy array or number (one operand must be a tensor).
        b: a tensor, numpy array or number.
    """
    a, b = coerce("ge", a, b)
    return logical_or(gt(a, b), eq(a, b))


def _bool(x) -> GraphTensor:
    return x if x.dtype.kind == "b" else cast(x, dt.bool_)


def _const_bool(like: GraphTensor, v: bool) -> GraphTensor:
    return like.graph.constant(v, dt.bool_).expand(*like.shape)


@tensor_op("logical_not")
def logical_not(x: GraphTensor) -> GraphTensor:
    """Elementwise logical NOT (torch.logical_not): True where ``x`` is zero/False; a bool tensor.

    Args:
        x: the input tensor.
    """
    x = _bool(x)
    return prim("LessThan", x, _const_bool(x, True), dtype=dt.bool_)


def logical_and(a, b) -> GraphTensor:
    """torch.logical_and: elementwise logical AND of the operands read as booleans (nonzero is True);
    a bool tensor.

    Args:
        a: a tensor or number (one operand must be a tensor).
        b: a tensor or number.
    """
    a, b = coerce("logical_and", a, b)
    return prim("Mul", _bool(a), _bool(b))


def logical_or(a, b) -> GraphTensor:
    """torch.logical_or: elementwise logical OR of the operands read as booleans (nonzero is True);
    a bool tensor.

    Args:
        a: a tensor or number (one operand must be a tensor).
        b: a tensor or number.
    """
    a, b = coerce("logical_or", a, b)
    return prim("Max", _bool(a), _bool(b))


def logical_xor(a, b) -> GraphTensor:
    """torch.logical_xor: elementwise logical XOR of the operands read as booleans (nonzero is True);
    a bool tensor.

    Args:
        a: a tensor or number (one operand must be a tensor).
        b: a tensor or number.
    """
    a, b = coerce("logical_xor", a, b)
    return ne(_bool(a), _bool(b))


def _int_bits(x: GraphTensor) -> GraphTensor:
    """The 32 two's-complement bits of int32 ``x`` as float64 0/1 along a new last axis (bit k at
    index k): ``q_k = floor(x / 2**k)`` is exact in float64 and ``bit_k = q_k - 2 q_(k+1)``. One
    broadcast over a 33-wide axis, not 32 chains of nodes."""
    g = x.graph
    scale = g.constant(np.array([2.0 ** -k for k in range(33)]), dt.float64)
    q = floor(mul(cast(x, dt.float64).unsqueeze(-1), scale))
    n = x.ndim
    return sub(q._slice_dim(n, 0, 32, 1), mul(q._slice_dim(n, 1, 32, 1), 2.0))


_BIT_WEIGHTS = np.array([2.0 ** k for k in range(31)] + [-(2.0 ** 31)])  # two's complement


def _int_and(a: GraphTensor, b: GraphTensor) -> GraphTensor:
    """int32 ``a & b`` from bit decompositions (the primitives have no bitwise op): the sum over the
    common bits of their two's-complement weights, exact in float64."""
    both = mul(_int_bits(a), _int_bits(b))
    w = a.graph.constant(_BIT_WEIGHTS, dt.float64)
    s = prim("SumReduce", mul(both, w), arg=a.ndim, shape=a.shape)
    return cast(s, dt.int32)


def _bitwise_operands(op: str, a, b):
    a, b = coerce(op, a, b)
    require(op, a.dtype.kind in "bi", f"is defined for integer and bool tensors only, got {a.dtype.name}", a, b)
    return a, b


def bitwise_and(a, b) -> GraphTensor:
    """``a & b``: logical and on bool tensors, bitwise on int32 (through a 32-bit decomposition)."""
    a, b = _bitwise_operands("and", a, b)
    return prim("Mul", a, b) if a.dtype.kind == "b" else _int_and(a, b)


def bitwise_or(a, b) -> GraphTensor:
    """``a | b``: logical or on bool tensors; on int32 ``a + b - (a & b)`` (exact modulo 2**32)."""
    a, b = _bitwise_operands("or", a, b)
    return prim("Max", a, b) if a.dtype.kind == "b" else sub(add(a, b), _int_and(a, b))


def bitwise_xor(a, b) -> GraphTensor:
    """``a ^ b``: logical xor on bool tensors; on int32 ``a + b - 2 (a & b)`` (exact modulo 2**32)."""
    a, b = _bitwise_operands("xor", a, b)
    return ne(a, b) if a.dtype.kind == "b" else sub(add(a, b), mul(_int_and(a, b), 2))


@tensor_op("invert")
def bitwise_not(x: GraphTensor) -> GraphTensor:
    """``~x``: logical not on bool tensors, ``-1 - x`` on int32."""
    require("invert", x.dtype.kind in "bi", f"is defined for integer and bool tensors only, got {x.dtype.name}",
            x)
    return logical_not(x) if x.dtype.kind == "b" else sub(-1, x)


def _shift_operands(op: str, a, b):
    a, b = coerce(op, a, b)
    require(op, a.dtype.kind == "i", f"is defined for int32 tensors only, got {a.dtype.name}", a, b)
    return a, b


def _shift_in_range(s: GraphTensor) -> GraphTensor:
    """Where the shift amount is in [0, 31]. torch shifts out every bit for the others (negative
    amounts included): ``<<`` gives 0, ``>>`` the sign (0 or -1), as a shift by 31 does."""
    return logical_and(ge(s, 0), lt(s, 32))


def bitwise_left_shift(input, other) -> GraphTensor:  # noqa: A002 - torch's names
    """``input << other`` on int32, wrapping as torch: a product by ``2**(s // 2)`` and
    ``2**(s - s // 2)``, each within int32, whose int32 multiply wraps exactly; 0 for a shift
    amount outside [0, 31] (``_shift_in_range``)."""
    a, s = _shift_operands("bitwise_left_shift", input, other)
    inside = _shift_in_range(s)
    s64 = cast(where(inside, s, 0), dt.float64)
    lo = floor(mul(s64, 0.5))
    f1, f2 = cast(exp2(lo), dt.int32), cast(exp2(sub(s64, lo)), dt.int32)
    return where(inside, prim("Mul", prim("Mul", a, f1), f2), 0)


def bitwise_right_shift(input, other) -> GraphTensor:  # noqa: A002 - torch's names
    """``input >> other`` on int32: arithmetic (sign-filling) shift, ``floor(input / 2**other)``,
    exact in float64; a shift amount outside [0, 31] shifts by 31 (``_shift_in_range``)."""
    a, s = _shift_operands("bitwise_right_shift", input, other)
    s = where(_shift_in_range(s), s, 31)
    q = floor(mul(cast(a, dt.float64), exp2(neg(cast(s, dt.float64)))))
    return cast(q, dt.int32)


def where(cond, a, b) -> GraphTensor:
    """torch.where: ``a`` where ``cond`` holds, else ``b``, elementwise (all three broadcast).
    Masked-out values never leak into the result, NaN included (``Where`` is a primitive).

    Args:
        cond: the condition, read as bool.
        a: the values where ``cond`` is True (a tensor, numpy array or number).
        b: the values where ``cond`` is False (a tensor, numpy array or number).
    """
    t = [x for x in (a, b) if isinstance(x, GraphTensor)]
    like = t[0] if t else cond
    if t:
        a, b = coerce("where", a, b)
        check_tensors("where", condition=cond, input=a)  # (the Where primitive would name itself)
    else:
        check_tensors("where", condition=cond)
        d = dt.promote_scalar(dt.promote_scalar(dt.bool_, a), b)
        a, b = like.graph.constant(a, d), like.graph.constant(b, d)
    c = _bool(cond)
    shape = broadcast_shapes("where", c, a, b)
    c, a, b = (x.expand(*shape) if x.shape != shape else x for x in (c, a, b))
    return prim("Where", c, a, b, dtype=a.dtype)


# unary math ---------------------------------------------------------------------------------
def _wide(f: _F | None = None, *, narrowed: Callable | None = None) -> _F:
    """Compute a float composition in float64 and round once to the input's dtype (float32 and the
    16-bit types; int and bool inputs give float32, as torch): the compositions below then keep
    float64's accuracy (and range: ``exp(89)`` overflows float32 where ``sinh(89)`` does not). There
    the plain formulas suffice (``_accurate`` is False while they are composed); a float64 input
    takes its function's path within about an ulp of float64.

    ``narrowed``: the composition for the narrower inputs, if it is not ``f``'s plain float64 formula:
    one that is accurate only to far below a float32 ulp (``_exp_narrow``), and cheaper."""
    if f is None:
        return functools.partial(_wide, narrowed=narrowed)  # type: ignore[return-value]

    @functools.wraps(f)
    def run(x, *args, **kw):
        x = _float(x, f.__name__)
        if x.dtype is dt.float64:
            return f(x, *args, **kw)
        with float64_paths.narrow():
            out = (narrowed or f)(cast(x, dt.float64), *args, **kw)
        return cast(out, x.dtype)

    return run  # type: ignore[return-value]  # functools.wraps keeps f's signature


@tensor_op("exp2")
def exp2(x) -> GraphTensor:
    """``2 ** x`` elementwise (torch.exp2). Int and bool inputs give float32.

    Args:
        x: the input tensor.
    """
    return prim("Exp2", _float(x, "exp2"))


@tensor_op("log2")
def log2(x) -> GraphTensor:
    """The base-2 logarithm, elementwise (torch.log2). Int and bool inputs give float32.

    Args:
        x: the input tensor.
    """
    return prim("Log2", _float(x, "log2"))


@tensor_op("exp")
@_opmath
def exp(x) -> GraphTensor:
    """``e ** x`` elementwise (torch.exp), within an ulp as torch's. Int and bool inputs give float32.

    Not ``exp2(x * log2(e))`` in ``x``'s dtype: the product's rounding, up to ``|x log2(e)| / 2`` ulps of
    the exponent, moves the result by as much relative to it (64 ulps of float32 near x = 88, 7 below
    |x| = 10; 439 ulps of float64 near x = 700). float32 (and the 16-bit types, ``_opmath``) takes the
    product in float64 and rounds ``exp2``'s result once; float64 is reduced exactly (``_exp_f64``).
    The gradient is the result itself (``Graph.custom_vjp``), as torch's.

    Args:
        x: the input tensor.
    """
    x = _float(x, "exp")
    if x.dtype is dt.float64:
        y = _exp_f64(x)
    else:
        y = cast(exp2(mul(cast(x, dt.float64), LOG2E)), x.dtype)
    g = x.graph
    out = g.tensor(g.add("Copy", (y,), "exp", y.dtype, y.shape))  # (a node of its own to carry the rule)
    return g.custom_vjp(out, [x], lambda out, adjoint, x: [mul(adjoint, out)])




def _exp_f64(x: GraphTensor) -> GraphTensor:
    """float64 ``e ** x`` as ``2**n exp(r)``, ``n`` the integer nearest ``x log2(e)`` (``_ROUND``'s
    addition and subtraction), ``r = x - n ln 2`` with ln 2 in two parts (Cody and Waite: ``x - n
    _LN2_HI`` is exact), ``exp(r) = exp2(r log2(e))`` for ``|r| <= ln(2) / 2`` (the product's rounding:
    at most a third of an ulp), times ``2**n`` (``_times_pow2``: no overflow below ``x = 709.79``, no
    flush to 0 above -745.2), rounded once. Past 710 and -746 the result is inf and 0 (``n`` is no longer an exact
    integer there); a NaN stays NaN. Each intermediate is a few operations, so that a kernel reading
    the result twice (softmax's) recomputes them rather than storing them (``RECOMPUTE_LIMIT``)."""
    n = sub(add(mul(x, LOG2E), _ROUND), _ROUND)
    r = sub(sub(x, mul(n, _LN2_HI)), mul(n, _LN2_LO))
    out = _times_pow2(exp2(mul(r, LOG2E)), n)
    return where(gt(x, 710.0), math.inf, where(lt(x, -746.0), 0.0, out))


def _times_pow2(p: GraphTensor, n: GraphTensor) -> GraphTensor:
    """float64 ``p * 2**n`` for ``p`` in about [1/2, 2] and an integer ``n``, rounded once: as
    ``(p * 2) * 2**(n - 1)`` for ``n > 0`` and ``(p / 2) * 2**(n + 1)`` below (the first factor exact),
    so that ``2**n`` itself neither overflows at ``n = 1024`` nor flushes to 0 at ``n = -1075``. The two
    tests are two nodes (``n > 0``, ``n < 0.5``), each read once: a shared one would be stored by its
    kernel rather than recomputed (``kernels.RECOMPUTE_LIMIT``)."""
    scale = add(mul(cast(gt(n, 0), dt.float64), 1.5), 0.5)  # 2 or 1/2
    k = sub(1.0, mul(cast(lt(n, 0.5), dt.float64), 2.0))  # 1 or -1
    return mul(mul(p, scale), exp2(sub(n, k)))


# float64 within about an ulp: exact sums and products of doubles (double-double arithmetic), from
# which log, log10, log1p, expm1, tanh, sinh, cosh, sigmoid and softplus carry their last bits to one
# final rounding. Composed of the primitives in the graph (no FMA): each costs tens of operations.
def _accurate(x: GraphTensor) -> bool:
    """Whether ``x``'s function takes the float64 path within about an ulp: for a float64 ``x``, but
    not inside a narrow composition (``_wide`` for float32 and the 16-bit types, a special function),
    whose one rounding at the end hides float64's last bits (``frontend/float64_paths.py``)."""
    return float64_paths.accurate(x.dtype)


def _two_sum(a, b) -> tuple[GraphTensor, GraphTensor]:
    """``a + b`` as ``(s, e)``: ``s`` rounded, ``e`` the exact rest (Knuth's TwoSum; any order)."""
    s = add(a, b)
    bv = sub(s, a)
    return s, add(sub(a, sub(s, bv)), sub(b, bv))


def _fast_two_sum(a: GraphTensor, b) -> tuple[GraphTensor, GraphTensor]:
    """``a + b`` as ``(s, e)`` for ``|a| >= |b|`` (Dekker's Fast2Sum: three operations)."""
    s = add(a, b)
    return s, sub(b, sub(s, a))


def _two_prod(a: GraphTensor, b: GraphTensor) -> tuple[GraphTensor, GraphTensor]:
    """``a * b`` as ``(p, e)``: ``p`` rounded, ``e`` the exact rest (Dekker's product, the factors
    split in halves of 26 and 27 bits by Veltkamp's ``_SPLIT``), for ``|a|, |b| < 2**995``."""
    p = mul(a, b)
    (ah, al), (bh, bl) = _halves(a), _halves(b)
    return p, add(add(add(sub(mul(ah, bh), p), mul(ah, bl)), mul(al, bh)), mul(al, bl))


def _halves(a: GraphTensor) -> tuple[GraphTensor, GraphTensor]:
    """Veltkamp's split: ``a = hi + lo`` exactly, ``hi`` with 26 significant bits."""
    c = mul(a, _SPLIT)
    hi = sub(c, sub(c, a))
    return hi, sub(a, hi)


def _div_dd(nh, nl, dh: GraphTensor, dl) -> tuple[GraphTensor, GraphTensor]:
    """``(nh + nl) / (dh + dl)`` (double-double operands, the low parts below half an ulp of the high
    ones) as ``q + ql``: ``q = nh (1/dh)`` and the remainder ``nh - q dh`` made exact by Dekker's product
    (``nh - p`` is exact: ``p`` is within an ulp of ``nh``), corrected by the low parts, over ``dh``."""
    inv = reciprocal(dh)
    q = mul(nh, inv)
    p, pe = _two_prod(q, dh)
    return q, mul(sub(add(sub(sub(nh, p), pe), nl), mul(q, dl)), inv)


# 1/k! for k = 3..16: the tail of expm1(r) = r + r**2/2 + r**3 Q(r) on |r| <= ln(2)/2, where the
# dropped terms are below 2**-60 of the result
_EXPM1_Q = tuple(1.0 / math.factorial(k) for k in range(3, 17))


def _exp_reduced(x: GraphTensor, xl=None) -> tuple[GraphTensor, GraphTensor, GraphTensor]:
    """float64 ``e**x = 2**n (1 + s + t)`` for ``|x| < 2**50`` (``e**(x + xl)``, a double-double
    argument, with ``xl`` below an ulp of ``x``): ``n`` the integer nearest ``x log2(e)``,
    ``r = x - n ln 2`` carried in two parts (``x - n _LN2_HI`` is exact, as in ``_exp_f64``), and
    ``expm1(r) = s + t``: ``r + r**2/2`` exactly (TwoSum, Dekker's ``r**2``), ``r**3 Q(r)`` and the low
    part of ``r`` times ``e**r``, renormalised (``s`` rounded, ``t`` the rest): ``s + t`` is within about
    2**-60 of ``expm1(r)`` (relative), so callers round once. Returns ``(n, s, t)``."""
    n = sub(add(mul(x, LOG2E), _ROUND), _ROUND)
    hi = sub(x, mul(n, _LN2_HI))
    lo = mul(n, _LN2_LO) if xl is None else sub(mul(n, _LN2_LO), xl)
    r = sub(hi, lo)
    rc = sub(sub(hi, r), lo)  # r + rc = hi - lo, to 2**-106 relative
    p, pe = _two_prod(r, r)
    s, e = _two_sum(r, mul(p, 0.5))
    t = add(add(e, mul(pe, 0.5)), add(mul(mul(r, p), _poly(r, _EXPM1_Q)), mul(rc, add(r, 1.0))))
    st = add(s, t)
    return n, st, sub(t, sub(st, s))  # (Fast2Sum: |t| is below |s|)


def _expm1_parts(x: GraphTensor) -> tuple[GraphTensor, GraphTensor, GraphTensor]:
    """float64 ``expm1(x) = 2 g (y + yl)`` for ``x`` in [-45, 711]: ``g = 2**(n - 2)`` and ``y + yl =
    2 + 2 s + 2 t - 2**(1 - n)``
    (``_exp_reduced``) summed exactly but for the last rounding, so ``expm1`` of a small ``x`` does not
    lose its bits to the cancellation with 1, and ``2 g`` never overflows while the result does not."""
    n, s, t = _exp_reduced(x)
    g = exp2(sub(n, 2.0))
    c, ce = _two_sum(2.0, neg(reciprocal(mul(g, 2.0))))
    y, e = _two_sum(c, mul(s, 2.0))
    return g, y, add(e, add(ce, mul(t, 2.0)))


def _exp_dd(x: GraphTensor) -> tuple[GraphTensor, GraphTensor]:
    """float64 ``e**x = v + vl`` for ``x`` in [-746, 0] (``_exp_reduced``; double-double where ``v`` is
    normal, a subnormal ``v`` rounded once): ``1 + s + t`` renormalised, times ``2**n`` as ``1/2`` and
    ``2**(n + 1)`` (exact down to ``n = -1075``)."""
    n, s, t = _exp_reduced(x)
    u, ul = _two_sum(1.0, s)
    h = exp2(add(n, 1.0))
    return mul(mul(u, 0.5), h), mul(mul(add(ul, t), 0.5), h)


# past |x| = 40, exp(-x**2 / 2) is below half the smallest subnormal (and exp(x**2) overflows)
_GAUSS_END = 40.0


def _gauss(x, c, scale: float = -0.5, over=None):
    """float64 ``c exp(scale x**2)`` within about an ulp (``c``: a number in two parts ``(hi, lo)``, or a
    float64 tensor or number; ``scale`` a power of two, ``-1/2`` for the normal density, ``-1`` for
    erfc, ``1`` for erfcx), over ``over = (f, fl)`` (a double-double tensor, with ``c`` in two parts:
    erfc's ``exp(-x**2) / (sqrt(pi) (x + r))``) if given, rounded once; ``|x|`` capped at 40 (0, or inf
    for a positive ``scale``, past it), NaN at NaN. The exponent is exact as a double-double, ``scale (p
    + pe)`` with ``x**2 = p + pe`` (Dekker's product), and its exp ``2**n (1 + s + t)``
    (``_exp_reduced``): ``exp(-x**2 / 2)`` of the rounded square was off by up to ``x**2 / 2`` ulps (700
    at x = -37, erfc's ``exp(-x**2)`` 480 at 25.4)."""
    a = minimum(abs_(x), _GAUSS_END)
    p, pe = _two_prod(a, a)
    n, s, t = _exp_reduced(mul(p, scale), mul(pe, scale))
    u, ul = _two_sum(1.0, s)
    if isinstance(c, tuple):  # (u + ul + t) (c_hi + c_lo), u c_hi exact (Dekker, c_hi split here)
        c_big = c[0] * _SPLIT
        ch = c_big - (c_big - c[0])
        (uh, uo), cl = _halves(u), c[0] - ch
        m = mul(u, c[0])
        me = add(add(add(sub(mul(uh, ch), m), mul(uh, cl)), mul(uo, ch)), mul(uo, cl))
        rest = add(me, add(mul(add(ul, t), c[0]), mul(u, c[1])))
        if over is not None:
            m, rest = _div_dd(m, rest, *over)
        m = add(m, rest)
    else:
        m = mul(add(u, add(ul, t)), c)
    return _times_pow2(m, n)


_LG = (6.666666666666735130e-01, 3.999999999940941908e-01, 2.857142874366239149e-01,  # fdlibm's Lg1-Lg7:
       2.222219843214978396e-01, 1.818357216161805012e-01, 1.531383769920937332e-01,  # log(1+f) = f - f**2/2
       1.479819860511658591e-01)  # + s (f**2/2 + R(s**2)), s = f / (2 + f), R within 2**-58.45 (e_log.c)


def _log_parts(x: GraphTensor) -> tuple[GraphTensor, GraphTensor, GraphTensor, GraphTensor]:
    """float64 ``log(x) = k ln 2 + hi + lo`` for positive finite ``x`` (fdlibm's e_log.c): ``x = 2**k
    m`` exactly (``k`` the integer nearest ``log2(x)``, a subnormal first scaled by 2**54, ``m`` in about
    [sqrt(1/2), sqrt(2)]), ``f = m - 1`` exact, ``log(m) = f - f**2/2 + s (f**2/2 + R)`` with the
    first two terms split so that ``hi`` has 26 bits (its products with 26-bit constants are exact:
    log10) and ``lo`` carries the rest. Returns ``(k, hi, lo, lg)``, ``lg`` the log2 used for ``k``:
    non-finite exactly where ``x`` is 0, negative, inf or NaN (and then log2(x) itself)."""
    tiny = lt(x, 2.0 ** -1022)
    xs = where(tiny, mul(x, 2.0 ** 54), x)
    lg = log2(xs)
    e = sub(add(lg, _ROUND), _ROUND)
    f = sub(mul(xs, exp2(neg(e))), 1.0)
    k = sub(e, mul(cast(tiny, dt.float64), 54.0))
    s = div(f, add(f, 2.0))
    z = mul(s, s)
    hfsq = mul(mul(f, f), 0.5)
    hi, _ = _halves(sub(f, hfsq))
    lo = add(sub(sub(f, hi), hfsq), mul(s, add(hfsq, mul(z, _poly(z, _LG)))))
    return k, hi, lo, lg


def _ln_sum(k: GraphTensor, hi: GraphTensor, lo) -> tuple[GraphTensor, GraphTensor]:
    """``k ln 2 + hi + lo`` (``_log_parts``) as ``w + wl``, ``w`` rounded: ``k _LN2_HI`` is exact and
    at least ``|hi|`` where ``k != 0``, so the rest of ``k _LN2_HI + hi`` is exact (Fast2Sum)."""
    kh = mul(k, _LN2_HI)
    w = add(kh, hi)
    return w, add(add(sub(hi, sub(w, kh)), mul(k, _LN2_LO)), lo)


def _finite_or(lg: GraphTensor, out: GraphTensor, special: GraphTensor) -> GraphTensor:
    """``out`` where ``lg`` (``_log_parts``) is finite, else ``special``."""
    return where(lt(abs_(lg), math.inf), out, special)


def _log_f64(x: GraphTensor) -> GraphTensor:
    """float64 log within about half an ulp: ``_log_parts`` summed, rounded once; log2's special
    values (times ln 2) at 0, negatives, inf and NaN."""
    k, hi, lo, lg = _log_parts(x)
    w, wl = _ln_sum(k, hi, lo)
    return _finite_or(lg, add(w, wl), lg)


@tensor_op("log")
@_wide
def log(x) -> GraphTensor:
    """The natural logarithm, elementwise (torch.log), as ``log2(x) * ln(2)``, float32 and the 16-bit
    types in float64, rounded once (within half an ulp; in float32 the product's rounding and
    ``ln(2)``'s made it 1.2 ulps). Int and bool inputs give float32. float64 by an exact reduction
    (``_log_parts``): within about half an ulp, where ``log2(x) * ln(2)`` was 1.4 ulps off. The
    gradient is ``1 / x``, as torch's.

    Args:
        x: the input tensor.
    """
    if _accurate(x):
        return _derivative(_log_f64(x), x, lambda x, y: reciprocal(x))
    return mul(log2(x), LN2)


@tensor_op("sqrt")
def sqrt(x) -> GraphTensor:
    """The square root, elementwise (torch.sqrt); NaN for negative inputs. Int and bool inputs give float32.

    Args:
        x: the input tensor.
    """
    return prim("Sqrt", _float(x, "sqrt"))


@tensor_op("rsqrt")
@_opmath
def rsqrt(x) -> GraphTensor:
    """``1 / sqrt(x)`` elementwise (torch.rsqrt).

    Args:
        x: the input tensor.
    """
    return reciprocal(sqrt(x))


@tensor_op("sin")
def sin(x) -> GraphTensor:
    """The sine, elementwise (torch.sin). Int and bool inputs give float32.

    Args:
        x: the input tensor.
    """
    return prim("Sin", _float(x, "sin"))


@tensor_op("cos")
@_opmath
def cos(x) -> GraphTensor:
    """``1 - 2 sin(x/2)**2``: ``x/2`` is exact, so this stays accurate for large |x| (RoPE angles),
    where ``sin(x + pi/2)`` loses the rounding error of the sum (1e-4 at x = 4000 in float32)."""
    s = sin(mul(_float(x, "cos"), 0.5))
    return sub(1.0, mul(mul(s, s), 2.0))


# pi/2 as c1 + c2 + c3 (c1, c2 with 33 significant bits, so ``n * c1`` and ``n * c2`` are exact in
# float64 for |n| < 2**20), and 2/pi: the Cody-Waite reduction of ``tan``.
_PIO2 = (1.5707963267341256, 6.077100506303966e-11, 2.0222662487959506e-21)
_TWO_OVER_PI = 0.6366197723675814
_TAN_REDUCE_BELOW = 2.0 ** 20  # |x| there: |n| < 2**20, the products above stay exact


def _derivative(out, x, slope):
    """``out`` (computed from ``x`` by a chain of primitives) with the gradient ``adjoint * slope(x,
    out)`` (``Graph.custom_vjp``): the function's own derivative, torch's formula, instead of the
    chain's, whose partial values autograd would keep for the backward pass (10 to 32 of them for
    the functions here). ``custom_vjp`` composes the rule as ``out`` was: inside ``_wide`` for a
    narrower dtype too (``frontend/float64_paths.py``), so a float32 sinh's gradient is the plain
    float64 cosh."""
    return x.graph.custom_vjp(out, [x], lambda y, a, x: [mul(a, slope(x, y))])


@tensor_op("tan")
def tan(x) -> GraphTensor:
    """tan. float32 and the 16-bit types: ``_tan_narrow`` (an exact reduction, vectorised arithmetic).
    float64: from ``r = x - n pi/2`` (``n`` the nearest integer to ``x / (pi/2)``, ``|r| <= pi/4``):
    ``sin(r) / cos(r)`` for even ``n``, ``-cos(r) / sin(r)`` for odd ``n``. ``sin(x) / cos(x)`` as
    written loses cos's rounding error near the poles, where cos(x) is tiny: all of it at the double
    nearest pi/2 (torch: 1.6e16). With ``r`` from pi/2 in three parts, each of sin(r), cos(r) is
    accurate to its own few ulps; ``r`` is 0 only at ``x = 0`` (no float is a non-zero multiple of
    pi/2), so the one division never divides by 0 (and its gradient, which ``where`` picks apart,
    never makes a NaN). From ``|x| = 2**20`` on, where ``n * c1`` would round, the unreduced quotient
    (libm's sines reduce it)."""
    x = _float(x, "tan")
    if x.dtype is not dt.float64:
        return _tan_narrow(x)
    wide = cast(x, dt.float64)
    big = ge(abs_(wide), _TAN_REDUCE_BELOW)
    xr = where(big, 0.0, wide)
    n = floor(add(mul(xr, _TWO_OVER_PI), 0.5))
    r = sub(sub(sub(xr, mul(n, _PIO2[0])), mul(n, _PIO2[1])), mul(n, _PIO2[2]))
    s, c = sin(r), cos(r)
    odd = ne(fmod(n, 2.0), 0)
    xb = where(big, wide, 1.0)
    num = where(big, sin(xb), where(odd, neg(c), s))
    den = where(big, cos(xb), where(odd, s, c))
    return cast(_derivative(div(num, den), wide, lambda x, y: add(mul(y, y), 1.0)), x.dtype)


# 2/pi in chunks of 24 bits at fixed positions (weights 2**(-24j-1) .. 2**(-24j-24), j = 0..9) and the
# rest: a float32 (24 bits) times a chunk is exact in float64
_TWO_OVER_PI_BITS = int("a2f9836e4e441529fc2757d1f534ddc0db6295993c439041fe5163abdebbc561b7246e3a424dd2e0", 16)
_TWO_OVER_PI_CHUNKS = tuple(((_TWO_OVER_PI_BITS >> (296 - 24 * j)) & 0xFFFFFF) * 2.0 ** (-24 * j - 24)
                            for j in range(10)) + ((_TWO_OVER_PI_BITS & ((1 << 80) - 1)) * 2.0 ** -320,)
_SIN_TAYLOR = tuple((-1) ** k / math.factorial(2 * k + 1) for k in range(7))  # sin y = y S(y**2), to y**13
_COS_TAYLOR = tuple((-1) ** k / math.factorial(2 * k) for k in range(8))  # cos y = C(y**2), to y**14


def _tan_narrow(x: GraphTensor) -> GraphTensor:
    """tan of a float32 (or 16-bit) ``x``, in float64, rounded once. ``|x| (2/pi)`` is reduced modulo 2
    exactly for every float32 (Payne and Hanek): ``|x|`` times each 24-bit chunk of 2/pi is exact; below
    2**26 it is split at 2**-26 (exactly, by rounding), the heads reduced modulo 2 and summed exactly,
    the tails (each below 2**-26) rounded, every term read once (no stored intermediates), so the
    distance ``f`` to the nearest integer ``n`` is within 2**-75 of the exact one, even for the floats
    nearest the poles. Then ``y = f pi/2`` and Taylor polynomials of sin and cos (to y**13, y**14:
    under 2**-44 relative for ``|y| <= pi/4``): ``sin(y) / cos(y)`` for even ``n``, ``-cos(y) / sin(y)``
    for odd (one division), odd in ``x``; NaN at +-inf and NaN. The float64 path below took four libm
    sines per element (a scalar loop: 80 times exp's time)."""
    wide = cast(x, dt.float64)
    neg_side = _neg_side(wide)
    a = where(neg_side, neg(wide), wide)
    # the chunks along a new last axis, summed (one reduction kernel: a loop over them in Python made 11
    # alike subgraphs, which the compiler rolled into a loop of kernels storing each step)
    chunks = a.graph.constant(np.array(_TWO_OVER_PI_CHUNKS), dt.float64)
    p = mul(a.unsqueeze(-1).expand(*a.shape, len(_TWO_OVER_PI_CHUNKS)), chunks)  # (exact)
    r = sub(add(p, _SPLIT_26), _SPLIT_26)  # p itself from 2**26 on, else rounded to a multiple of 2**-26
    ok = lt(p, 2.0 ** 51)  # (from there on p is a multiple of 8: nothing modulo 2)
    hi = where(ok, sub(r, sub(add(p, _EVEN), _EVEN)), 0.0).sum(-1)  # the heads r mod 2: exact in any order
    lo = where(ok, sub(p, r), 0.0).sum(-1)  # the tails (exact, each below 2**-26), rounded
    hm = sub(hi, sub(add(hi, _EVEN), _EVEN))  # hi mod 2, in [-1, 1] (exact)
    n = _round_even(add(hm, lo))  # -1, 0 or 1
    odd = ne(n, 0.0)
    y = mul(add(sub(hm, n), lo), math.pi / 2)
    z = mul(y, y)
    sin_y, cos_y = mul(y, _poly(z, _SIN_TAYLOR)), _poly(z, _COS_TAYLOR)
    t = div(where(odd, neg(cos_y), sin_y), where(odd, sin_y, cos_y))
    t = where(lt(a, math.inf), where(neg_side, neg(t), t), math.nan)
    return cast(_derivative(t, wide, lambda x, y: add(mul(y, y), 1.0)), x.dtype)


_EVEN = 1.5 * 2.0 ** 53  # (v + _EVEN) - _EVEN: v rounded to an even integer, |v| < 2**52
_SPLIT_26 = 1.5 * 2.0 ** 26  # (v + _SPLIT_26) - _SPLIT_26: |v| <= 2 rounded to a multiple of 2**-26


def _round_even(v: GraphTensor) -> GraphTensor:
    """float64 ``v`` rounded to the nearest integer (ties to even), for ``|v| < 2**51``."""
    return sub(add(v, _ROUND), _ROUND)


@tensor_op("square")
def square(x) -> GraphTensor:
    """``x * x`` elementwise (torch.square); keeps ``x``'s dtype, but for bool, which squares as
    int32 (torch's int64), as ``x ** 2``.

    Args:
        x: the input tensor.
    """
    if isinstance(x, GraphTensor) and x.dtype.kind == "b":
        x = cast(x, dt.int32)
    return mul(x, x)


@tensor_op("abs")
def abs_(x) -> GraphTensor:
    """The absolute value, elementwise (torch.abs, ``lm.abs``); keeps ``x``'s dtype. Not defined for bool.

    Args:
        x: the input tensor.
    """
    _not_bool(x, "abs")
    return maximum(x, neg(x))


@tensor_op("sign")
def sign(x) -> GraphTensor:
    """-1, 0 or 1; 0 for NaN, as torch (numpy gives NaN). A bool tensor is its own sign (a copy, as
    torch's: True is 1, False 0)."""
    if x.dtype.kind == "b":
        return fresh(x)
    return sub(cast(gt(x, 0), x.dtype), cast(lt(x, 0), x.dtype))


def _zero_signed(x, r):
    """``r`` with each zero given the sign of ``x``, as IEEE and torch round: ``trunc(-0.3)``,
    ``ceil(-0.5)``, ``round(-0.3)`` and all of them at -0.0 are -0.0, where the compositions give +0.0
    (``x - fmod(x, 1)`` is ``x - x``, ``round`` adds 1 to -1); ``floor_divide`` passes the quotient.
    ``x * 0`` is the zero of ``x``'s sign (``x`` is finite wherever these give a zero); a NaN ``r`` (a
    NaN ``x``) takes that branch too and stays NaN."""
    zero = logical_not(logical_or(lt(r, 0), gt(r, 0)))
    return where(zero, mul(x, 0.0), r)


@tensor_op("trunc")
def trunc(x) -> GraphTensor:
    """Exact: ``x - fmod(x, 1)`` for values that can have a fraction, its zeros signed as ``x``
    (``_zero_signed``); larger ones are integral."""
    if not x.dtype.is_float:
        return x
    limit = 2.0 ** {16: 10, 32: 23, 64: 52}[x.dtype.bits]
    t = _zero_signed(x, sub(x, fmod(x, 1.0)))
    return where(lt(abs_(x), limit), t, x).detach()  # piecewise constant: no gradient


@tensor_op("floor")
def floor(x) -> GraphTensor:
    """Round down to an integer, elementwise (torch.floor); int and bool tensors are returned unchanged.

    Args:
        x: the input tensor.
    """
    if not x.dtype.is_float:
        return x
    t = trunc(x)
    return where(lt(x, t), sub(t, 1), t)


@tensor_op("ceil")
def ceil(x) -> GraphTensor:
    """Round up to an integer, elementwise (torch.ceil); int and bool tensors are returned unchanged.

    Args:
        x: the input tensor.
    """
    if not x.dtype.is_float:
        return x
    t = trunc(x)
    return where(gt(x, t), add(t, 1), t)


@tensor_op("round")
def round_(x, decimals: int = 0) -> GraphTensor:
    """Round half to even, as torch; a zero result has the sign of ``x`` (``round(-0.5)`` is -0.0).
    With ``decimals``, to that many decimal places (negative: to tens, hundreds...), as torch's
    ``round(x * 10**d) / 10**d`` and ``round(x / 10**-d) * 10**-d`` (``_round_decimals``). Int tensors
    are returned unchanged, but to a negative number of places, which is refused (torch refuses
    every integer round)."""
    if isinstance(decimals, bool) or not isinstance(decimals, numbers.Integral):
        raise op_error(TypeError, "round", f"decimals must be an int, got {type(decimals).__name__} {decimals!r}",
                       x)
    if not x.dtype.is_float:
        require("round", decimals >= 0, f"decimals={decimals} is not defined for {x.dtype.name} tensors (torch "
                "rounds no integer tensor); cast to a float dtype first", x, kind=ValueError)
        return x
    if decimals:
        return _round_decimals(x, int(decimals)).detach()  # piecewise constant: no gradient, as torch
    f = floor(x)
    d = sub(x, f)
    odd = ne(fmod(f, 2.0), 0)
    up = logical_or(gt(d, 0.5), logical_and(eq(d, 0.5), odd))
    return _zero_signed(x, where(up, add(f, 1), f))


_MANTISSA = {32: 24, 64: 53}  # significand bits of the dtypes _round_decimals computes in


@_opmath
def _round_decimals(x, decimals: int) -> GraphTensor:
    """torch's formulas, in ``x``'s dtype (float32 for the 16-bit types): ``round(x * p) / p`` for
    ``decimals > 0`` and ``round(x / p) * p`` below, ``p = 10**|decimals|``; the divisions are
    correctly rounded as torch's (``x * 10**-k`` made ``round(1234.5677, -3)`` 999.99994, and
    float64's ``n * (1/p)`` ``round(1.5, 5)`` 1.5000000000000002). Where torch's formula breaks down,
    the mathematically defined value: ``x`` itself where ``x * p`` overflows or ``x`` is already an
    integer at or above 2**(mantissa - 1) (torch: inf for ``round(1e9, 30)`` in float32; NaN where
    ``p`` is no float32, from 0 * inf), and zero, signed as ``x``, for ``decimals`` below -38 in
    float32 (-308 in float64), where every finite value rounds to 0. Above 38 places float32 computes
    in float64; above 308, float64 returns ``x`` (exact for ``|x| >= 1e-77``: smaller values have
    binary digits past the 308th decimal place)."""
    k = abs(decimals)
    big = k > 308 or not math.isfinite(float(np.float32(10.0 ** k))) if x.dtype is not dt.float64 else k > 308
    if big and decimals < 0:
        return where(isfinite(x), mul(x, 0.0), x)
    if big and x.dtype is not dt.float64:
        return cast(_round_decimals(cast(x, dt.float64), decimals), x.dtype)
    if big:
        return fresh(x)
    p = 10.0 ** k
    if decimals < 0:
        return mul(round_(_div_by(x, p)), p)
    xp = mul(x, p)
    q = _div_by(round_(xp), p)
    keep = logical_or(ge(abs_(x), 2.0 ** (_MANTISSA[x.dtype.bits] - 1)), logical_and(isinf(xp), isfinite(x)))
    return where(keep, x, q)


def _div_by(x: GraphTensor, p: float) -> GraphTensor:
    """``x / p`` correctly rounded (``p`` a positive Python float, finite in ``x``'s dtype). float32's
    ``div`` is (it divides in float64); float64 takes ``q = x * (1/p)`` (within an ulp) and one
    Markstein correction ``q + r * (1/p)`` with the remainder ``r = x - q p`` made exact by Dekker's
    product (``q`` and ``p`` split into 26-bit halves): correctly rounded but within 2**-53 ulp of a
    midpoint. The correction is skipped where ``|q| >= 2**52`` (every such float64 is an integer,
    nothing to round to, and the split would overflow near the top of the range), where ``r`` is 0
    (a zero quotient keeps its sign) and at inf/NaN."""
    if x.dtype is not dt.float64:
        return div(x, p)
    inv = 1.0 / p
    q = mul(x, inv)
    split = 134217729.0  # 2**27 + 1: Veltkamp's splitter
    ph = p * split - (p * split - p)
    pl = p - ph
    small = lt(abs_(q), 2.0 ** 52)
    qs = where(small, q, 0.0)
    c = mul(qs, split)
    qh = sub(c, sub(c, qs))
    ql = sub(qs, qh)
    prod = mul(qs, p)
    err = add(add(add(sub(mul(qh, ph), prod), mul(qh, pl)), mul(ql, ph)), mul(ql, pl))
    r = sub(sub(where(small, x, 0.0), prod), err)
    return where(logical_and(small, ne(r, 0)), add(q, mul(r, inv)), q)


# tanh's Taylor coefficients (2**(2n) (2**(2n) - 1) B_2n / (2n)!, from the Bernoulli numbers), for
# x**2 below _TANH_SERIES_BELOW**2: 6 terms leave 2e-9 (relative) there, under float32's rounding, and
# 12 terms none of float64's.
_TANH_SERIES = (1.0, -0.3333333333333333, 0.13333333333333333, -0.05396825396825397, 0.021869488536155203,
                -0.008863235529902197, 0.003592128036572481, -0.0014558343870513183, 0.000590027440945586,
                -0.00023912911424355248, 9.691537956929451e-05, -3.927832388331683e-05)
_TANH_SERIES_BELOW = 0.3


@tensor_op("tanh")
@_opmath
def tanh_(x):
    """``(1 - e)/(1 + e)`` with ``e = exp(-2|x|)``, negated for x < 0 (the ``|x|`` a ``where`` on the
    sign, not ``abs``): no exp overflows, and NaN propagates (value and gradient). One exp and one
    division for both signs: a branch each cost twice (1M float32 elements on one AVX2 thread: 8.2 ms,
    then 2.8), with the same values (``(e - 1)/(e + 1)`` is exactly ``-(1 - e)/(e + 1)``).
    Below 0.3 in magnitude, where ``1 - e`` cancels (3% off at 1e-6 in float32, and 0 for smaller
    values, -0.0 included), the odd Taylor series ``x P(x**2)``: exact to the dtype's rounding and the
    sign of a zero kept. The gradient is ``1 - tanh**2`` (``Graph.custom_vjp``), as torch's:
    differentiating the formula kept 15 of its values for the backward pass. float64: ``e / (e + 2)``
    with ``e = expm1(2|x|)`` (``_expm1_parts``) and the quotient in double-double (``_div_dd``), odd
    by a ``where``: within about half an ulp (the formulas above were 2.3 ulps off); its gradient is
    ``_sech2``, where ``1 - y**2`` cancels as ``y`` rounds near 1."""
    x = _float(x, "tanh")
    if _accurate(x):
        return _derivative(_tanh_f64(x), x, lambda x, y: _sech2(x))
    neg_side = lt(x, 0)
    e = exp(mul(where(neg_side, x, neg(x)), 2.0))
    t = div(sub(1.0, e), add(e, 1.0))
    big = where(neg_side, neg(t), t)
    small = lt(abs_(x), _TANH_SERIES_BELOW)
    xs = where(small, x, 0.0)
    terms = _TANH_SERIES if x.dtype is dt.float64 else _TANH_SERIES[:6]
    out = where(small, mul(xs, _poly(mul(xs, xs), terms)), big)
    return _derivative(out, x, lambda x, y: sub(1.0, mul(y, y)))


def _sech2(x: GraphTensor) -> GraphTensor:
    """float64 tanh's slope ``1 - tanh**2`` as ``4 e / (1 + e)**2``, ``e = exp(-2|x|)``, to a few ulps:
    torch's ``1 - y**2`` keeps ``y``'s rounding near 1 (1.4e-8 off at x = 10, 0 from 19.1 on)."""
    e = exp(mul(abs_(x), -2.0))
    d = add(e, 1.0)
    return div(mul(e, 4.0), mul(d, d))


def _tanh_f64(x: GraphTensor) -> GraphTensor:
    """The float64 value: ``|x|`` capped at 20 (tanh(20) rounds to 1), -0.0 kept."""
    neg_side = lt(x, 0)
    g, y, yl = _expm1_parts(mul(minimum(where(neg_side, neg(x), x), 20.0), 2.0))
    g2 = mul(g, 2.0)
    e, el = mul(g2, y), mul(g2, yl)
    d, dl = _two_sum(2.0, e)
    q, ql = _div_dd(e, el, d, add(dl, el))
    t = add(q, ql)
    return where(eq(x, 0), x, where(neg_side, neg(t), t))


# Chebyshev coefficients (the first halved) of erfcx(x) = erfc(x) exp(x**2) in t = 2 / (2 + x) over
# x in [0.5, 6] (t in [1/4, 4/5], mapped to u in [-1, 1]), computed at 50 digits with mpmath from
# mpmath's erfc; the dropped tail is below 2e-18. Evaluated by Clenshaw's recurrence in float64, the
# resulting erf is within 4.3e-16 (relative) of the exact value on [0.5, 6].
_ERFCX_CHEB = (
    0.31578150037096797, 0.25827762333138915, 0.03843266692042734, 0.003200163366629538,
    1.9731811450407293e-05, -2.110609497719367e-05, -4.428760021828751e-07, 2.1010632947914575e-07,
    -3.694285770718178e-10, -2.5393266896873477e-09, 1.4344787414916487e-10, 2.6195879183086987e-11,
    -4.203562260727084e-12, -3.9413774478318484e-14, 7.331649899685843e-14, -7.189940911673993e-15,
    -4.801013371849322e-16, 1.9218989422486815e-16, -1.5893460596281417e-17,
)
_ERFCX_T = (0.25, 0.8)  # the t interval of the fit


# erf(x) / x = P(x**2) / Q(x**2) for |x| <= 4 (float32 and the 16-bit types): a (5, 5) rational fit of
# the relative error, by linearised least squares with Lawson's reweighting towards minimax, against
# mpmath's erf at 40 digits on 4000 Chebyshev nodes of [0, 4]. Its largest relative error there is
# 2.5e-8 (under half a float32 ulp); evaluated in float32 it is within 7 ulps of the correctly rounded
# erf on [0, 4.5]. Past 4, erf is 1 - 1.5e-8 or closer: the clamped value rounds to exactly +-1.
_ERF32_P = (1.128379139433429, 0.19353928096349132, 0.0531008346090394, 0.0038830542248191463,
            0.0002845527356536666, 1.9867425243553088e-06)
_ERF32_Q = (1.0, 0.5048522793916578, 0.11534747796307433, 0.015206677729706516, 0.001185488295424205,
            3.7419065774081794e-05)
_ERF32_EDGE = 4.0


@tensor_op("erf")
@_opmath
def erf(x) -> GraphTensor:
    """float32 (and the 16-bit types, computed in float32): ``x * P(x**2) / Q(x**2)`` on ``x`` clamped
    to [-4, 4] (``_ERF32_P``), the result clamped to [-1, 1]: odd by construction, so erf'(0) =
    2/sqrt(pi) and the sign of zero is kept, NaN propagates, +-inf give +-1, and no branch is computed
    and thrown away (about 30 operations per element, no exp: the exact GELU's cost is mostly its erf).
    Values are within 9 float32 ulps of erf. The gradient is the exact derivative, 2/sqrt(pi) exp(-x**2),
    as torch's (``Graph.custom_vjp``): differentiating the rational gave its own derivative (noise past
    |x| = 3.5) and kept its ~20 Horner steps for the backward pass (a GPT block's forward GELU kernel
    wrote 20 buffers of its FFN's width, its backward read them). float64 needs 16 digits:
    odd-extended from ``|x|``, below 0.5 in magnitude the Taylor series (exact to float64 rounding),
    above it ``1 - erfc`` with ``erfc(x) exp(x**2)`` a Chebyshev expansion (``_ERFCX_CHEB``; a float64
    value outside a narrow composition: ``_erfcx_r``, and the slope ``_exp_square``: within 2 and 1.7
    ulps).

    The clamp is ``maximum``/``minimum``; ``|x|`` and the sign of the float64 path are ``where``s on
    ``x < 0``. float64's ``|x|`` is capped at 6 (erfc(6) = 2e-17 is below half an ulp of 1 and the
    expansion ends there) and the series only sees the small inputs."""
    x = _float(x, "erf")
    if _accurate(x):
        return _derivative(_erf64(x, True), x, lambda x, y: _exp_square(x, _TWO_OVER_SQRT_PI))
    out = _erf32(x) if x.dtype is not dt.float64 else _erf64(x)
    return _derivative(out, x, lambda x, y: mul(exp(neg(mul(x, x))), 2 / math.sqrt(math.pi)))


def _erf32(x):
    """The float32 value: the clamped rational, its quotient ``P * (1/Q)`` in float32 (``Q >= 1``): two
    roundings where ``div``'s correctly rounded route goes through float64, whose conversions and
    4-lane divisions took a quarter of the exact GELU's time (1M elements, one AVX2 thread: 1.58 ms,
    now 1.19). The largest error on [-6, 6] went from 6.1 to 6.3 ulps."""
    c = minimum(maximum(x, -_ERF32_EDGE), _ERF32_EDGE)
    z = mul(c, c)
    # (float32 rounding takes the rational up to 1.0000005 past |x| = 3.6: clamped to [-1, 1], so
    # 1 - erf never goes negative and gelu(-6) is -0)
    return minimum(maximum(mul(c, prim("Mul", _poly(z, _ERF32_P), prim("Recip", _poly(z, _ERF32_Q)))), -1.0), 1.0)


def _erf64(x, accurate: bool = False):
    """The float64 value: the series below 0.5 in magnitude, ``1 - erfc`` above, odd-extended; erfcx
    from ``_erfcx_r`` where ``accurate`` (``_ERFCX_CHEB``'s was 3.7 ulps off: erf 2.5 at 0.6, now 2.0)."""
    neg_side = lt(x, 0)
    a = minimum(where(neg_side, neg(x), x), 6.0)
    if accurate:
        big = maximum(a, 0.5)
        cx = div(_INV_SQRT_PI[0], add(big, _erfcx_r(big)))
    else:
        cx = _erfcx64(a)
    y = sub(1.0, mul(cx, exp(neg(mul(a, a)))))
    small = lt(a, 0.5)
    xs = where(small, x, 0.0)
    z = mul(xs, xs)
    series = 0.0
    for n in range(12, -1, -1):  # 2/sqrt(pi) * sum (-1)^n x^(2n+1) / (n! (2n+1))
        c = (-1) ** n * 2 / math.sqrt(math.pi) / (math.factorial(n) * (2 * n + 1))
        series = add(mul(z, series), c) if n < 12 else c
    return where(small, mul(xs, series), where(neg_side, neg(y), y))


def _exp_square(x, c, sign: float = -1.0):
    """float64 ``c exp(sign x**2)`` (``c`` in two parts, ``sign`` +-1) within 1.7 ulps in 25 operations:
    ``exp(sign p) (c + sign c pe)`` with ``x**2 = p + pe`` (Dekker's product; ``exp(pe)`` is ``1 + pe``
    to 2**-100), ``x`` clamped to [-40, 40] (not ``abs``: its ``-x`` is erf's, which a GELU's backward
    pass would keep). erf's slope and erfcx below -0.5: ``exp(-+x**2)`` of the rounded square was
    ``x**2`` ulps off (30 at 6, 700 at 26), and ``_gauss``'s half an ulp cost 110 operations more."""
    a = minimum(maximum(x, -_GAUSS_END), _GAUSS_END)
    p, pe = _two_prod(a, a)
    return mul(exp(mul(p, sign)), add(c[0], add(c[1], mul(pe, sign * c[0]))))


def _erfcx64(a):
    """``erfc(a) exp(a**2)`` for ``a`` in [0.5, 6] (float64): a Chebyshev expansion in ``2 / (a + 2)``
    (outside the interval, finite values that ``erf`` does not select)."""
    return _cheb(div(2.0, add(a, 2.0)), _ERFCX_CHEB, *_ERFCX_T)


# erfcx(a) = 1 / (sqrt(pi) (a + r(a))) on [0.5, 6], for float64 within an ulp or two: Chebyshev
# coefficients (the first halved) of r(a) (a + 3/2), r(a) = 1 / (sqrt(pi) erfcx(a)) - a, in u = (38 - 21 a)
# / (11 a + 22) (_ERFCX_CHEB's t = 2 / (2 + a) over [1/4, 4/5] mapped to [-1, 1], with exact constants:
# through the rounded t, u's error was 1.4 ulps of a + r near 0.5, now 0.7), from mpmath's erfc at 50
# digits; the dropped tail is below 1e-18 (the expansion is 0.61 to 0.83). The sum a + r damps r's error
# by r / (a + r) (below 0.46), and erfcx's slope 2 a erfcx(a) - 2 / sqrt(pi) = -2 r erfcx(a) does not
# cancel; r's own error counts there: r expanded itself (of slope about -r / a) took u's rounding to 6
# ulps near 6, r (a + 3/2) (about flat) to 2.6. Past 6 Laplace's continued fraction has the same form
# (``special._erfcx_rest``).
_ERFCX_R = (
    0.7317601029761737, 0.11464275524759632, -0.01121449973286383, -0.0027146308994872156,
    0.00017988339309320188, 5.849195772404716e-05, -5.448031896943816e-06, -1.2163741596396254e-06,
    1.8859668992586775e-07, 2.0072229320334596e-08, -5.954133640259208e-09, -9.521764268604203e-11,
    1.5539786011722316e-10, -1.0008292713286386e-11, -2.950832612312943e-12, 5.015840962481511e-13,
    2.3319081757782894e-14, -1.3777742508680196e-14, 8.356414424020565e-16, 2.1321052959391844e-16,
    -3.932896744963354e-17,
)
_INV_SQRT_PI = (0.5641895835477563, 7.66772980658294e-18)  # 1/sqrt(pi) and 2/sqrt(pi) in two parts
_TWO_OVER_SQRT_PI = (1.1283791670955126, 1.533545961316588e-17)


def _erfcx_r(a):
    """``r`` with ``erfcx(a) = 1 / (sqrt(pi) (a + r))`` for float64 ``a`` in [0.5, 6] (``_ERFCX_R``)."""
    u = div(sub(38.0, mul(a, 21.0)), add(mul(a, 11.0), 22.0))
    return div(_clenshaw(u, _ERFCX_R), add(a, 1.5))


def _erfcx_dd(f, fl):
    """``erfcx = 1 / (sqrt(pi) (f + fl))`` rounded once (``_div_dd``), ``f + fl = a + r`` exactly; from
    ``f = 2**60`` ``1 / (sqrt(pi) f)`` (``fl`` is below 2**-120 of ``f``, and ``_div_dd``'s product
    overflows past 2**995: NaN at 1e308 and +inf)."""
    q, ql = _div_dd(_INV_SQRT_PI[0], _INV_SQRT_PI[1], minimum(f, 2.0 ** 60), fl)
    return where(lt(f, 2.0 ** 60), add(q, ql), div(_INV_SQRT_PI[0], f))


def _cheb(t, coefs, lo: float, hi: float):
    """``sum_k coefs[k] T_k(u)`` with ``u`` the map of ``t`` in [lo, hi] to [-1, 1] (Clenshaw's
    recurrence): the Chebyshev expansions of erfcx and of ``special.py``'s functions."""
    return _clenshaw(sub(mul(t, 2.0 / (hi - lo)), (hi + lo) / (hi - lo)), coefs)


def _clenshaw(u, coefs):
    """``sum_k coefs[k] T_k(u)`` for ``u`` in [-1, 1] (Clenshaw's recurrence)."""
    u2 = mul(u, 2.0)
    b1, b2 = coefs[-1], 0.0
    for c in coefs[-2:0:-1]:
        b1, b2 = add(sub(mul(u2, b1), b2), c), b1
    return add(sub(mul(u, b1), b2), coefs[0])


# more unary math: log1p, expm1, log10, hyperbolic and inverse trigonometric functions --------------
LOG10_2 = 0.30102999566398120


def _poly(z, coeffs):
    """Horner's scheme: ``coeffs[0] + coeffs[1] z + coeffs[2] z**2 + ...``."""
    out = coeffs[-1]
    for c in coeffs[-2::-1]:
        out = add(mul(z, out), c)
    return out


def _neg_side(x):
    """True where ``x`` is negative, -0.0 included (for odd functions keeping the sign of zero)."""
    return logical_or(lt(x, 0), lt(reciprocal(x), 0))


@tensor_op("log1p")
@_wide
def log1p(x) -> GraphTensor:
    """``log(1 + x)``, accurate near 0: for ``|x| < 1/2``, ``log(u) - ((u - 1) - x) / u`` with
    ``u = 1 + x`` rounded (``u - 1`` is exact; the second term restores what rounding ``1 + x`` lost,
    so tiny ``x`` gives ``x``); elsewhere ``log(1 + x)``, where that rounding is relatively small. Each
    branch only sees inputs where it is finite, so gradients stay ``1 / (1 + x)``. float32 and the
    16-bit types in float64, rounded once (float32 was 2 ulps off). float64 itself: ``_log1p_f64``,
    within about half an ulp (the near branch was 1.5 ulps off)."""
    x = _float(x, "log1p")
    if _accurate(x):
        return _derivative(_log1p_f64(x), x, lambda x, y: reciprocal(add(x, 1.0)))
    # one log of 1 + x for both sides (the far side's argument is the same sum); only the near side's
    # correction reads a quotient (each side had its own log: 1M float32 elements took 3.5 times exp's time)
    small = lt(abs_(x), 0.5)
    xs = where(small, x, 0.0)
    us = add(xs, 1.0)
    out = sub(log(add(x, 1.0)), div(sub(sub(us, 1.0), xs), us))
    out = where(eq(x, 0), x, out)  # (-0.0 stays -0.0)
    return _derivative(out, x, lambda x, y: reciprocal(add(x, 1.0)))


def _log1p_f64(x: GraphTensor) -> GraphTensor:
    """float64 ``log1p(x)`` within about half an ulp (the near branch above was 1.5 ulps off):
    ``u + c = 1 + x`` exactly (TwoSum), ``log(u)`` by ``_log_parts`` and ``log(1 + x) = log(u) + c / u``
    (``c`` is below half an ulp of ``u``: the next term is below 2**-106). Below 2**-20 in magnitude,
    where ``log(u)`` and ``c / u`` cancel (1.2 ulps off at -7e-17), the series (-0.0 kept)."""
    u, c = _two_sum(1.0, x)
    k, hi, lo, lg = _log_parts(u)
    w, wl = _ln_sum(k, hi, add(lo, div(c, u)))
    tiny = lt(abs_(x), 2.0 ** -20)  # (x - x**2/2 + x**3/3, exact to 2**-60, rounded once)
    xt = where(tiny, x, 0.0)
    series = add(xt, mul(mul(xt, xt), sub(mul(xt, 1 / 3), 0.5)))
    return where(tiny, series, _finite_or(lg, add(w, wl), lg))


def _factorials(n, start):
    return [1.0 / math.factorial(k) for k in range(start, n, 2)]


# |x| below which the narrowed expm1 and sinh (float32 and the 16-bit types, in float64) take their
# series to x**5 (the next term is below 2**-60 of the result); from it on exponentials, whose
# cancellation costs at most 2**10 ulps of float64 there, 2**-19 of a float32 ulp
_EXPM1_SERIES_BELOW = 2.0 ** -10


def _exp_narrow(x: GraphTensor) -> GraphTensor:
    """float64 ``e**x`` as ``exp2(x log2(e))``, for compositions rounded to float32 or narrower at the
    end (``_wide``'s ``narrowed``): the product's rounding moves the result by up to ``|x log2(e)|``
    ulps of float64 (2**-45 relative at |x| = 104, past float32's range), far below a float32 ulp, for
    one exp2 where ``exp``'s exact reduction of a float64 (``_exp_f64``) costs two and more."""
    return exp2(mul(x, LOG2E))


def _expm1_narrowed(x: GraphTensor) -> GraphTensor:
    """expm1 of a float32 (or 16-bit) ``x`` in float64: the series below ``_EXPM1_SERIES_BELOW``, else
    ``exp(x) - 1`` (the old 18-term series below 1/2 and ``_exp_f64`` cost 6 times exp's time)."""
    small = lt(abs_(x), _EXPM1_SERIES_BELOW)
    xs = where(small, x, 0.0)
    series = mul(xs, _poly(xs, [1.0 / math.factorial(k) for k in range(1, 6)]))
    out = where(small, series, sub(_exp_narrow(where(small, 0.0, x)), 1.0))
    return _derivative(out, x, lambda x, y: add(y, 1.0))


def _sinh_narrowed(x: GraphTensor) -> GraphTensor:
    """sinh of a float32 (or 16-bit) ``x`` in float64: the odd series below ``_EXPM1_SERIES_BELOW``
    (-0.0 kept), else ``(e - 1/e) / 2`` with ``e = e**x`` (``_exp_narrow``; float64's range holds
    float32's finite results, inf and 0 at the infinities)."""
    small = lt(abs_(x), _EXPM1_SERIES_BELOW)
    xs = where(small, x, 0.0)
    series = mul(xs, _poly(mul(xs, xs), _factorials(6, 1)))
    e = _exp_narrow(where(small, 0.0, x))
    return _derivative(where(small, series, mul(sub(e, reciprocal(e)), 0.5)), x, lambda x, y: _cosh_narrowed(x))


def _cosh_narrowed(x: GraphTensor) -> GraphTensor:
    """cosh of a float32 (or 16-bit) ``x`` in float64: ``(e + 1/e) / 2``, no cancellation."""
    e = _exp_narrow(x)
    return _derivative(mul(add(e, reciprocal(e)), 0.5), x, lambda x, y: _sinh_narrowed(x))


@tensor_op("expm1")
@_wide(narrowed=_expm1_narrowed)
def expm1(x) -> GraphTensor:
    """``exp(x) - 1``, accurate near 0. float32 and the 16-bit types: ``_expm1_narrowed``, in float64,
    rounded once. float64 in a narrow composition: for ``|x| < 1/2`` the Taylor series (18 terms, to
    float64 rounding), elsewhere ``exp(x) - 1``, which loses at most a bit there. float64 itself:
    ``_expm1_parts``, within about half an ulp (the far branch was 1.35 ulps off), -1 below -45, inf
    from 709.79 on; its gradient is ``exp(x)``, not torch's ``y + 1``, which keeps ``y``'s rounding
    near -1 (2e-8 off at x = -20, 0 from -37.4 on)."""
    if _accurate(x):
        xc = minimum(maximum(x, -45.0), 711.0)  # (NaN stays NaN)
        g, y, yl = _expm1_parts(xc)
        out = where(eq(x, 0), x, mul(mul(g, 2.0), add(y, yl)))
        return _derivative(out, x, lambda x, y: exp(x))
    n = 19
    small = lt(abs_(x), 0.5)
    xs = where(small, x, 0.0)
    series = mul(xs, _poly(xs, [1.0 / math.factorial(k) for k in range(1, n)]))
    out = where(small, series, sub(exp(where(small, 0.0, x)), 1.0))
    return _derivative(out, x, lambda x, y: add(y, 1.0))


@tensor_op("log10")
@_wide
def log10(x) -> GraphTensor:
    """``log2(x) * log10(2)``; float32 and the 16-bit types in float64, rounded once (in float32 it
    was 1.8 ulps off). float64: ``_log_parts`` times log10(2) and 1/ln(10), each in two parts, the
    large products exact (FreeBSD's e_log10.c): within about half an ulp, where ``log2(x) *
    log10(2)`` was 1.2 ulps off. The gradient is ``(1 / x) / ln 10`` (torch's ``1 / (x ln 10)``
    overflows to 0 from x = 7.8e307 on)."""
    x = _float(x, "log10")
    if not _accurate(x):
        return mul(log2(x), LOG10_2)
    k, hi, lo, lg = _log_parts(x)
    vh, y2 = mul(hi, _IVLN10_HI), mul(k, _LOG10_2_HI)  # (exact: 26-bit factors)
    vl = add(add(mul(k, _LOG10_2_LO), mul(add(lo, hi), _IVLN10_LO)), mul(lo, _IVLN10_HI))
    w = add(y2, vh)  # (|y2| >= |vh| where k != 0: the rest is exact)
    out = _finite_or(lg, add(add(vl, add(sub(y2, w), vh)), w), mul(lg, LOG10_2))
    return _derivative(out, x, lambda x, y: mul(reciprocal(x), 1 / math.log(10.0)))


# 1/ln(10) and log10(2) as 26-bit heads and their rests
_IVLN10_HI, _IVLN10_LO = float.fromhex("0x1.bcb7b18p-2"), float.fromhex("-0x1.6c8d78e6acaa4p-29")
_LOG10_2_HI, _LOG10_2_LO = float.fromhex("0x1.3441350p-2"), float.fromhex("0x1.3ef3fde623e25p-31")


def _exp_parts(a):
    """``(e**a / 2, e**-a / 2)`` for ``a >= 0`` without overflow before the result does:
    ``h = exp(a / 2)`` (``a / 2`` is exact), ``e**a / 2 = (h / 2) * h``."""
    h = exp(mul(a, 0.5))
    return mul(mul(h, 0.5), h), div(0.5, mul(h, h))


_SERIES_BELOW = 0.5  # |x| where sinh/cosh switch from the Taylor series to exponentials


@tensor_op("sinh")
@_wide(narrowed=_sinh_narrowed)
def sinh(x) -> GraphTensor:
    """``(e**x - e**-x) / 2``. float32 and the 16-bit types: ``_sinh_narrowed``, in float64, rounded
    once. float64 in a narrow composition: below 1/2 in magnitude the odd Taylor series (no
    cancellation), else ``_exp_parts`` (no overflow before the result's). float64 itself: ``(e + e / (e +
    1)) / 2`` with ``e = expm1(|x|)`` in double-double (``_sinh_cosh_f64``), within about half an ulp
    (the formulas here were 2.8 ulps off; 3.8 on the reference backend)."""
    if _accurate(x):
        return _derivative(_sinh_cosh_f64(x, odd=True), x, lambda x, y: _plain(cosh, x))
    small = lt(abs_(x), _SERIES_BELOW)
    xs = where(small, x, 0.0)
    series = mul(xs, _poly(mul(xs, xs), _factorials(25, 1)))
    neg_side = lt(x, 0)
    a = where(small, 1.0, where(neg_side, neg(x), x))
    up, down = _exp_parts(a)
    big = sub(up, down)
    return _derivative(where(small, series, where(neg_side, neg(big), big)), x, lambda x, y: cosh(x))


@tensor_op("cosh")
@_wide(narrowed=_cosh_narrowed)
def cosh(x) -> GraphTensor:
    """``(e**x + e**-x) / 2``. float32 and the 16-bit types: ``_cosh_narrowed``, in float64, rounded
    once. float64 in a narrow composition: below 1/2 in magnitude the even Taylor series, else
    ``_exp_parts`` (no overflow before the result's). float64 itself: ``(e + 1 + 1 / (e +
    1)) / 2`` with ``e = expm1(|x|)`` in double-double (``_sinh_cosh_f64``), within about half an ulp
    (``exp(x/2)**2 / 2`` was 2.1 ulps off)."""
    if _accurate(x):
        return _derivative(_sinh_cosh_f64(x, odd=False), x, lambda x, y: _plain(sinh, x))
    small = lt(abs_(x), _SERIES_BELOW)
    xs = where(small, x, 0.0)
    series = _poly(mul(xs, xs), _factorials(24, 0))
    a = where(small, 1.0, where(lt(x, 0), neg(x), x))
    up, down = _exp_parts(a)
    return _derivative(where(small, series, add(up, down)), x, lambda x, y: sinh(x))


def _plain(f, x: GraphTensor) -> GraphTensor:
    """``f(x)`` by its plain float64 formula (``float64_paths.narrow``): the gradients of float64 sinh and cosh, whose
    accurate paths would share their intermediate values with the forward pass (kept alive for the
    backward pass, each a buffer of the input's size); a few ulps there, as before."""
    with float64_paths.narrow():
        return f(x)


def _sinh_cosh_f64(x: GraphTensor, odd: bool) -> GraphTensor:
    """float64 sinh (``odd``) or cosh of ``x``, from ``a = |x|`` capped at 711 (past the overflow):
    ``e**a / 2 = g (y + yl) + 1/2`` from 22 on (``e**-a`` is then below 2**-63 of it; ``g y`` is exact
    and the rest's rounding far below its ulp, so the result rounds once), else ``e**a = 1 + e``
    with ``e = expm1(a)`` and ``e**-a = 1 / (1 + e)`` in double-double, summed (every term positive:
    no cancellation), rounded once. sinh is odd (-0.0 kept)."""
    neg_side = lt(x, 0)
    a = minimum(where(neg_side, neg(x), x), 711.0)
    g, y, yl = _expm1_parts(a)
    g2 = mul(g, 2.0)
    e, el = mul(g2, y), mul(g2, yl)  # expm1(a), for a <= 22
    u, ul = _two_sum(1.0, e)
    ul = add(ul, el)  # e**a
    if odd:
        q, ql = _div_dd(e, el, u, ul)
        s, sl = _two_sum(e, q)
        low = add(sl, add(el, ql))
    else:
        q, ql = _div_dd(1.0, 0.0, u, ul)
        s, sl = _two_sum(u, q)
        low = add(sl, add(ul, ql))
    out = where(gt(a, 22.0), add(mul(g, y), add(mul(g, yl), 0.5)), mul(add(s, low), 0.5))
    return where(eq(x, 0), x, where(neg_side, neg(out), out)) if odd else out


_HUGE = 2.0 ** 28  # above it, sqrt(x**2 +- 1) == |x| in float64


@tensor_op("asinh")
@_wide
def asinh(x) -> GraphTensor:
    """``sign(x) log1p(a + a**2 / (1 + sqrt(1 + a**2)))`` with ``a = |x|`` (no cancellation near 0),
    and ``log(a) + log(2)`` above 2**28. Computed in float64, rounded once."""
    neg_side = lt(x, 0)
    a = where(neg_side, neg(x), x)
    huge = gt(a, _HUGE)
    s = where(huge, 1.0, a)
    mid = log1p(add(s, div(mul(s, s), add(sqrt(add(mul(s, s), 1.0)), 1.0))))
    r = where(huge, add(log(where(huge, a, 1.0)), LN2), mid)
    out = where(eq(x, 0), x, where(neg_side, neg(r), r))  # (-0.0 stays -0.0)
    return _derivative(out, x, lambda x, y: reciprocal(sqrt(add(mul(x, x), 1.0))))


@tensor_op("acosh")
@_wide
def acosh(x) -> GraphTensor:
    """``log1p(t + sqrt(t (t + 2)))`` with ``t = x - 1`` (exact near 1), ``log(x) + log(2)`` above
    2**28; NaN below 1. Computed in float64, rounded once."""
    huge = gt(x, _HUGE)
    t = sub(where(huge, 1.0, x), 1.0)
    below = lt(x, 1.0)  # (t (t + 2) is positive again below -1)
    mid = log1p(add(t, sqrt(mul(t, add(where(below, -1.0, t), 2.0)))))
    out = where(below, math.nan, where(huge, add(log(where(huge, x, 1.0)), LN2), mid))
    return _derivative(out, x, lambda x, y: reciprocal(sqrt(sub(mul(x, x), 1.0))))


@tensor_op("atanh")
@_wide
def atanh(x) -> GraphTensor:
    """``sign(x) / 2 * log1p(2a / (1 - a))`` with ``a = |x|`` (fdlibm's form: ``2a + 2a**2 / (1 - a)``
    below 1/2); +-inf at +-1, NaN beyond. Computed in float64, rounded once."""
    neg_side = lt(x, 0)
    a = where(neg_side, neg(x), x)
    small = lt(a, 0.5)
    one = eq(a, 1.0)
    d = sub(1.0, where(one, 0.5, a))  # the pole's branch divides by 1/2 instead of 0 (its gradient)
    t = add(a, a)
    r = mul(log1p(where(small, add(t, div(mul(t, a), d)), div(t, d))), 0.5)
    r = where(one, math.inf, r)
    out = where(eq(x, 0), x, where(neg_side, neg(r), r))  # (-0.0 stays -0.0)
    return _derivative(out, x, lambda x, y: reciprocal(sub(1.0, mul(x, x))))


# fdlibm's atan (s_atan.c): breakpoints, atan at them in two parts, and the odd minimax polynomial
# for |t| < 7/16 (error below 2**-64 relative on that interval).
_ATAN_BREAKS = (7 / 16, 11 / 16, 19 / 16, 39 / 16)
_ATAN_HI = (4.63647609000806093515e-01, 7.85398163397448278999e-01, 9.82793723247329054082e-01,
            1.57079632679489655800e+00)
_ATAN_LO = (2.26987774529616870924e-17, 3.06161699786838301793e-17, 1.39033110312309984516e-17,
            6.12323399573676603587e-17)
_ATAN_T = (3.33333333333329318027e-01, -1.99999999998764832476e-01, 1.42857142725034663711e-01,
           -1.11111104054623557880e-01, 9.09088713343650656196e-02, -7.69187620504482999495e-02,
           6.66107313738753120669e-02, -5.83357013379057348645e-02, 4.97687799461593236017e-02,
           -3.65315727442169155270e-02, 1.62858201153657823623e-02)
# the same series to 8 terms for compositions rounded to float32 or narrower: (t - atan(t)) / t**3 on
# t**2 <= (7/16)**2 by Chebyshev interpolation (mpmath.chebyfit), atan(t) within 2**-41.8 relative
_ATAN_T_NARROW = (0.3333333333318219, -0.1999999989879193, 0.14285703105629705, -0.11110637577635443,
                  0.09080970334090359, -0.07577339539165179, 0.05908537867179794, -0.03094766182767127)


def _atan_nonneg(a, narrow: bool | None = None):
    """fdlibm's atan of ``a >= 0`` (float64, within an ulp): ``a`` reduced to ``|t| < 7/16`` around
    one of the breakpoints, ``atan(a) = atan(c) + atan(t)``, the latter an odd minimax polynomial;
    ``narrow`` (by default: not ``_accurate(a)``, a float32 or 16-bit atan's float64) takes 8 terms
    for fdlibm's 11 (``_ATAN_T_NARROW``: 2**-41.8, far below a float32 ulp).
    The reduction ``t = num / den`` is one division of the interval's numerator and denominator,
    selected first (each interval's quotient, computed for every element, took four divisions: 1M
    float32 atans cost 4 times exp's time); ``a`` itself below 7/16 is ``a / 1``, exact."""
    b0, b1, b2, b3 = (lt(a, b) for b in _ATAN_BREAKS)
    # (2a - 1)/(a + 2), (a - 1)/(a + 1), (a - 1.5)/(1.5a + 1), -1/a
    num = where(b0, a, where(b1, sub(mul(a, 2.0), 1.0), where(b2, sub(a, 1.0), where(b3, sub(a, 1.5), -1.0))))
    den = where(b0, 1.0, where(b1, add(a, 2.0), where(b2, add(a, 1.0), where(b3, add(mul(a, 1.5), 1.0), a))))
    t = where(b0, a, div(num, den))

    def pick(vals):
        last = a.graph.constant(vals[3], a.dtype).expand(*a.shape)  # (scalars alone would be float32)
        return where(b0, 0.0, where(b1, vals[0], where(b2, vals[1], where(b3, vals[2], last))))

    coeffs = _ATAN_T_NARROW if (not _accurate(a) if narrow is None else narrow) else _ATAN_T
    z = mul(t, t)
    w = mul(z, z)
    s1 = mul(z, _poly(w, coeffs[0::2]))
    s2 = mul(w, _poly(w, coeffs[1::2]))
    return sub(pick(_ATAN_HI), sub(sub(mul(t, add(s1, s2)), pick(_ATAN_LO)), t))


@tensor_op("atan")
@_wide
def atan(x) -> GraphTensor:
    """Odd-extended fdlibm atan (range reduction + minimax polynomial), in float64, rounded once."""
    neg_side = lt(x, 0)
    r = _atan_nonneg(where(neg_side, neg(x), x))
    out = where(eq(x, 0), x, where(neg_side, neg(r), r))  # (-0.0 stays -0.0)
    return _derivative(out, x, lambda x, y: reciprocal(add(mul(x, x), 1.0)))


_PI_HI, _PI_LO = 3.1415926535897931160e+00, 1.2246467991473531772e-16


def atan2(input, other) -> GraphTensor:  # noqa: A002 - torch's names
    """``atan2(input, other)``: the angle of the point ``(other, input)``, in (-pi, pi], with C's
    special values (signed zeros, infinities). ``atan`` of the ratio of the smaller to the larger
    magnitude (never above 1), then moved to its octant. Computed in float64, rounded once."""
    y, x = coerce("atan2", input, other, min_kind="f")
    out_dtype = y.dtype
    y, x = cast(y, dt.float64), cast(x, dt.float64)
    y_neg, x_neg = _neg_side(y), _neg_side(x)
    ay, ax = where(y_neg, neg(y), y), where(x_neg, neg(x), x)
    swap = gt(ay, ax)
    num, den = where(swap, ax, ay), where(swap, ay, ax)
    zero, both_inf = eq(den, 0.0), logical_and(isinf(num), isinf(den))
    r = div(where(zero, 0.0, num), where(logical_or(zero, both_inf), 1.0, den))
    t = _atan_nonneg(where(both_inf, 1.0, r), narrow=out_dtype is not dt.float64)
    a = where(swap, add(sub(_PI_HI / 2, t), _PI_LO / 2), t)
    a = where(x_neg, add(sub(_PI_HI, a), _PI_LO), a)
    a = where(logical_or(isnan(y), isnan(x)), math.nan, where(y_neg, neg(a), a))
    return cast(a, out_dtype)


@tensor_op("asin")
@_wide
def asin(x) -> GraphTensor:
    """``atan(x / sqrt((1 - x)(1 + x)))`` (+-pi/2 at +-1, NaN beyond). In float64, rounded once."""
    s = sqrt(mul(sub(1.0, x), add(x, 1.0)))
    edge = eq(s, 0.0)
    neg_side = lt(x, 0)
    r = _atan_nonneg(where(edge, 0.0, div(where(neg_side, neg(x), x), where(edge, 1.0, s))))
    r = where(edge, _PI_HI / 2, r)
    out = where(eq(x, 0), x, where(neg_side, neg(r), r))  # (-0.0 stays -0.0)
    return _derivative(out, x, lambda x, y: reciprocal(sqrt(sub(1.0, mul(x, x)))))


@tensor_op("acos")
@_wide
def acos(x) -> GraphTensor:
    """``2 atan(sqrt((1 - x) / (1 + x)))``, exact in its parts near both ends (pi at -1, NaN
    outside [-1, 1]). In float64, rounded once."""
    edge = eq(x, -1.0)
    q = div(sub(1.0, x), add(where(edge, 0.0, x), 1.0))
    r = mul(_atan_nonneg(sqrt(q)), 2.0)
    return _derivative(where(edge, _PI_HI, r), x, lambda x, y: neg(reciprocal(sqrt(sub(1.0, mul(x, x))))))


# cleaning, selecting, fused multiply-adds --------------------------------------------------------
_FINITE_MAX = {16: 65504.0, 32: float(np.finfo(np.float32).max), 64: float(np.finfo(np.float64).max)}


def _finite_max(d: dt.DType) -> float:
    if d is dt.bfloat16:
        return 3.3895313892515355e38
    return _FINITE_MAX[d.bits]


@tensor_op("nan_to_num")
def nan_to_num(x, nan: float = 0.0, posinf: float | None = None, neginf: float | None = None) -> GraphTensor:
    """NaN replaced by ``nan``, +inf by ``posinf`` and -inf by ``neginf`` (default: the dtype's
    largest and smallest finite values). Integer and bool tensors are returned as they are. The
    gradient is 1 at the kept values and 0 at the replaced ones, as torch's."""
    if not x.dtype.is_float:
        return x
    big = _finite_max(x.dtype)
    hi = big if posinf is None else posinf
    lo = -big if neginf is None else neginf
    g = x.graph
    return where(isnan(x), g.constant(nan, x.dtype), where(eq(x, math.inf), g.constant(hi, x.dtype),
                                                            where(eq(x, -math.inf), g.constant(lo, x.dtype), x)))


@tensor_op("clone")
def clone(x) -> GraphTensor:
    """A copy of ``x`` (a ``Copy`` node; tensors are immutable, so this only materialises a view).
    Gradients flow through it."""
    return x.graph.tensor(x.graph.add("Copy", (x,), None, x.dtype, x.shape))


@tensor_op("masked_fill")
def masked_fill(x, mask, value) -> GraphTensor:
    """``value`` where the bool ``mask`` is True, else ``x``, the two broadcast together (as torch's
    out-of-place ``masked_fill``: a (1, 2, 2) input with a (2, 2, 2) mask gives (2, 2, 2); the in-place
    ``masked_fill_`` keeps the input's shape); the result keeps ``x``'s dtype (a 0-d tensor ``value``
    receives the gradient of the filled places)."""
    check_tensors("masked_fill", mask=mask)
    require("masked_fill", mask.dtype.kind == "b", f"mask must be a bool tensor, got {mask.dtype.name}", x, mask)
    if isinstance(value, GraphTensor):
        require("masked_fill", value.ndim == 0, f"value must be a 0-d tensor, got shape {value.shape}",
                x, value, kind=ValueError)
        v = cast(value, x.dtype)
    elif isinstance(value, Sym):  # a symbolic size (``x.masked_fill(m, T)``): its value at run time
        v = cast(x.graph.constant(value), x.dtype)
    else:
        check_fill("masked_fill", value, x.dtype, x)
        v = x.graph.constant(value, x.dtype)
    shape = broadcast_shapes("masked_fill", x, mask)
    return where(mask, v.expand(*shape), x)


@tensor_op("addcmul")
@_opmath  # (16-bit: computed in float32 and rounded once, as torch's; the rounded product overflowed)
def addcmul(input, tensor1, tensor2, *, value=1) -> GraphTensor:  # noqa: A002 - torch's names
    """``input + value * tensor1 * tensor2``."""
    return add(input, mul(mul(tensor1, tensor2), value) if value != 1 else mul(tensor1, tensor2))


@tensor_op("addcdiv")
@_opmath
def addcdiv(input, tensor1, tensor2, *, value=1) -> GraphTensor:  # noqa: A002 - torch's names
    """``input + value * tensor1 / tensor2``."""
    q = div(tensor1, tensor2)
    return add(input, mul(q, value) if value != 1 else q)


# torch's other names for ops above (their in-place forms, ``x.true_divide_(y)`` & co., are inplace.py's):
# the same ops, under torch's signatures, with errors named as the user called them
@renamed("true_divide")
def true_divide(input, other) -> GraphTensor:  # noqa: A002 - torch's names
    """torch.true_divide: ``div(input, other)``, true division (int operands give float32).

    Args:
        input: the dividend (a tensor, numpy array or number).
        other: the divisor.
    """
    return div(input, other)


@renamed("clip")
def clip(input, min=None, max=None) -> GraphTensor:  # noqa: A002 - torch's names
    """torch.clip: ``clamp(input, min, max)`` (values, dtype and gradient as ``clamp``'s).

    Args:
        input: the input tensor.
        min: the lower bound, a number or a tensor (broadcast), or None.
        max: the upper bound, a number or a tensor (broadcast), or None.
    """
    return clamp(input, min, max)


@renamed("divide")
def divide(input, other, *, rounding_mode=None) -> GraphTensor:  # noqa: A002 - torch's names
    """torch.divide: ``div(input, other, rounding_mode=...)`` (``rounding_mode`` keyword-only, as
    torch's).

    Args:
        input: the dividend (a tensor, numpy array or number).
        other: the divisor.
        rounding_mode: None (true division), ``"trunc"`` or ``"floor"``.
    """
    return div(input, other, rounding_mode)


@renamed("multiply")
def multiply(input, other) -> GraphTensor:  # noqa: A002 - torch's names
    """torch.multiply: ``mul(input, other)``.

    Args:
        input: a tensor, numpy array or number.
        other: a tensor, numpy array or number.
    """
    return mul(input, other)


@renamed("subtract")
def subtract(input, other, *, alpha=1) -> GraphTensor:  # noqa: A002 - torch's names
    """torch.subtract: ``sub(input, other, alpha=...)``, ``input - alpha * other`` (``alpha``
    keyword-only, as torch's).

    Args:
        input: a tensor, numpy array or number.
        other: a tensor, numpy array or number.
        alpha: the multiplier of ``other`` (default 1).
    """
    return sub(input, other, alpha)


@tensor_op("negative")
def negative(input) -> GraphTensor:  # noqa: A002 - torch's names
    """torch.negative: ``neg(input)``, ``-input``. Not defined for bool tensors.

    Args:
        input: the input tensor.
    """
    return neg(input)


@tensor_op("absolute")
def absolute(input) -> GraphTensor:  # noqa: A002 - torch's names
    """torch.absolute: ``abs(input)``. Not defined for bool tensors.

    Args:
        input: the input tensor.
    """
    return abs_(input)


@tensor_op("fix")
def fix(input) -> GraphTensor:  # noqa: A002 - torch's names
    """torch.fix: ``trunc(input)``, rounding toward zero.

    Args:
        input: the input tensor.
    """
    return trunc(input)
