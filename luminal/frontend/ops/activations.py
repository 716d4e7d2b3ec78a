"""Activation functions (torch.nn.functional names), composed from elementwise ops."""

from __future__ import annotations

import math

from .elementwise import _float, _opmath, abs_, add, div, erf, exp, gt, log, lt, mul, neg, reciprocal, sub, where
from .elementwise import tanh_ as _tanh


def relu(x):
    """torch's: NaN stays NaN, -0.0 stays -0.0; the gradient is 1 where x > 0 and 0 elsewhere (at 0 and NaN too)."""
    return where(gt(x, 0), x, where(lt(x, 0), 0, x.detach()))


def leaky_relu(x, negative_slope: float = 0.01):
    return where(gt(x, 0), x, mul(x, negative_slope))


@_opmath
def sigmoid(x):
    """``1/(1+e)`` or ``e/(1+e)`` with ``e = exp(-|x|)`` <= 1: no overflow, so no inf * 0 in the gradient."""
    x = _float(x, "sigmoid")
    e = exp(neg(abs_(x)))
    r = reciprocal(add(e, 1.0))
    return where(lt(x, 0), mul(e, r), r)


def tanh(x):
    return _tanh(x)


@_opmath
def gelu(x, approximate: str = "none"):
    x = _float(x, "gelu")
    if approximate == "tanh":
        inner = mul(add(x, mul(mul(mul(x, x), x), 0.044715)), math.sqrt(2 / math.pi))
        return mul(mul(x, 0.5), add(_tanh(inner), 1.0))
    if approximate != "none":
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    return mul(mul(x, 0.5), add(erf(mul(x, 1 / math.sqrt(2))), 1.0))


@_opmath
def silu(x):
    return mul(x, sigmoid(x))


@_opmath
def softplus(x, beta: float = 1.0, threshold: float = 20.0):
    x = _float(x, "softplus")
    bx = mul(x, beta)
    soft = div(log(add(exp(bx), 1.0)), beta)
    return where(gt(bx, threshold), x, soft)


@_opmath
def elu(x, alpha: float = 1.0):
    x = _float(x, "elu")
    return where(gt(x, 0), x, mul(sub(exp(x), 1.0), alpha))


@_opmath
def mish(x):
    return mul(x, _tanh(softplus(x)))
