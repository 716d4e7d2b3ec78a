"""Activation modules: thin wrappers over the frontend's activation ops, torch's constructor arguments.
They call the ops as functions, not methods, so a non-tensor input is reported by the op."""

from __future__ import annotations

import math

import numpy as np

from luminal.core import dtype as dt
from luminal.core.errors import check_int, check_number, op_error, renamed
from luminal.frontend import ops
from luminal.frontend.checks import check_tensors, tensor_op
from luminal.frontend.ops.activations import _logsigmoid, scaled_elu
from luminal.frontend.ops.elementwise import (
    _float,
    _not_bool,
    _opmath,
    add,
    div,
    ge,
    gt,
    le,
    mul,
    where,
)
from luminal.nn.module import Module
from luminal.nn.parameter import Parameter


class _Elementwise(Module):
    """An activation without parameters; ``inplace`` is accepted for torch compatibility and ignored
    (graphs have no in-place ops)."""

    def __init__(self, inplace: bool = False):
        super().__init__()
        self.inplace = inplace

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class ReLU(_Elementwise):
    """torch's ``nn.ReLU(inplace=False)``: ``max(0, x)``."""

    def forward(self, x):
        return ops.relu(x)


class SiLU(_Elementwise):
    """torch's ``nn.SiLU(inplace=False)``: ``x * sigmoid(x)``."""

    def forward(self, x):
        return ops.silu(x)


class Tanh(Module):
    """torch's ``nn.Tanh()``."""

    def forward(self, x):
        return ops.tanh(x)


class Sigmoid(Module):
    """torch's ``nn.Sigmoid()``."""

    def forward(self, x):
        return ops.sigmoid(x)


class Mish(_Elementwise):
    """torch's ``nn.Mish(inplace=False)``: ``x * tanh(softplus(x))``."""

    def forward(self, x):
        return ops.mish(x)


class GELU(Module):
    """torch's ``nn.GELU(approximate='none')``.

    Args:
        approximate: 'none' (erf) or 'tanh'.
    """

    def __init__(self, approximate: str = "none"):
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise ValueError(f"GELU: approximate must be 'none' or 'tanh', got {approximate!r}")
        self.approximate = approximate

    def forward(self, x):
        return ops.gelu(x, approximate=self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class LeakyReLU(_Elementwise):
    """torch's ``nn.LeakyReLU(negative_slope=0.01, inplace=False)``.

    Args:
        negative_slope: the slope below 0. inplace: ignored.
    """

    def __init__(self, negative_slope: float = 0.01, inplace: bool = False):
        super().__init__(inplace)
        self.negative_slope = negative_slope

    def forward(self, x):
        return ops.leaky_relu(x, self.negative_slope)

    def extra_repr(self) -> str:
        return f"negative_slope={self.negative_slope}" + (", inplace=True" if self.inplace else "")


class ELU(_Elementwise):
    """torch's ``nn.ELU(alpha=1.0, inplace=False)``.

    Args:
        alpha: the negative side's scale. inplace: ignored.
    """

    def __init__(self, alpha: float = 1.0, inplace: bool = False):
        super().__init__(inplace)
        self.alpha = alpha

    def forward(self, x):
        return ops.elu(x, self.alpha)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}" + (", inplace=True" if self.inplace else "")


class Softplus(Module):
    """torch's ``nn.Softplus(beta=1.0, threshold=20.0)``.

    Args:
        beta: the sharpness. threshold: above ``beta * x > threshold`` the result is ``x``.
    """

    def __init__(self, beta: float = 1.0, threshold: float = 20.0):
        super().__init__()
        self.beta, self.threshold = beta, threshold

    def forward(self, x):
        return ops.softplus(x, self.beta, self.threshold)

    def extra_repr(self) -> str:
        return f"beta={self.beta}, threshold={self.threshold}"


def _legacy_softmax_dim(ndim: int) -> int:
    """torch's implicit dim for ``Softmax(dim=None)``: 0 for 0-, 1- and 3-d inputs, else 1."""
    return 0 if ndim in (0, 1, 3) else 1


class Softmax(Module):
    """torch's ``nn.Softmax(dim=None)`` (None: torch's legacy implicit dim).

    Args:
        dim: the dim normalised.
    """

    def __init__(self, dim: int | None = None):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        check_tensors("softmax", input=x)
        return ops.softmax(x, self.dim if self.dim is not None else _legacy_softmax_dim(x.ndim))

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class LogSoftmax(Softmax):
    """torch's ``nn.LogSoftmax(dim=None)``.

    Args:
        dim: the dim normalised.
    """

    def forward(self, x):
        check_tensors("log_softmax", input=x)
        return ops.log_softmax(x, self.dim if self.dim is not None else _legacy_softmax_dim(x.ndim))


# functional forms with torch's signatures (``inplace`` accepted and ignored: graphs have no in-place ops)

_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


@tensor_op("hardtanh")
def hardtanh(input, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False):  # noqa: A002
    """torch's ``F.hardtanh``: ``clamp(input, min_val, max_val)``; the gradient is 1 strictly inside
    the range and 0 at and beyond its ends, as torch's. An int input keeps its dtype, its bounds
    truncated to ints, as torch's (they gave a float32 result), and a bound out of int32's range
    (infinities, NaN) is refused, as torch's; bool is refused, as torch's. A NaN bound of a float input
    makes every value NaN, as torch's clamp (the other bound alone was applied).

    Args:
        input: a tensor. min_val, max_val: the range. inplace: ignored.
    """
    check_number("hardtanh", "min_val", min_val, input)
    check_number("hardtanh", "max_val", max_val, input)
    if min_val > max_val:
        raise op_error(ValueError, "hardtanh", f"min_val ({min_val}) cannot be greater than max_val ({max_val})",
                       input)
    _not_bool(input, "hardtanh")
    x = input
    if not x.dtype.is_float:  # torch converts the bounds to the tensor's int type (toward zero), or refuses
        for what, v in (("min_val", min_val), ("max_val", max_val)):
            if not -2**31 <= v < 2**31:
                raise op_error(ValueError, "hardtanh", f"{what} {v} cannot be converted to the input's dtype "
                               f"{x.dtype.name}", x)
        min_val, max_val = int(min_val), int(max_val)
    elif math.isnan(min_val) or math.isnan(max_val):
        return where(x.isnan(), x, math.nan)
    return where(le(x, min_val), min_val, where(ge(x, max_val), max_val, x))


@tensor_op("relu6")
def relu6(input, inplace: bool = False):  # noqa: A002
    """torch's ``F.relu6``: ``min(max(0, x), 6)`` (``hardtanh(x, 0, 6)``; an int input keeps its dtype).

    Args:
        input: a tensor. inplace: ignored.
    """
    _not_bool(input, "relu6")
    return hardtanh(input, 0.0, 6.0)


@tensor_op("hardsigmoid")
def hardsigmoid(input, inplace: bool = False):  # noqa: A002
    """torch's ``F.hardsigmoid``: ``relu6(x + 3) / 6``.

    Args:
        input: a float tensor. inplace: ignored.
    """
    return div(hardtanh(add(_float(input, "hardsigmoid"), 3.0), 0.0, 6.0), 6.0)


@tensor_op("hardswish")
def hardswish(input, inplace: bool = False):  # noqa: A002
    """torch's ``F.hardswish``: ``x * relu6(x + 3) / 6``.

    Args:
        input: a float tensor. inplace: ignored.
    """
    x = _float(input, "hardswish")
    return mul(x, hardsigmoid(x))


@tensor_op("logsigmoid")
@_opmath
def logsigmoid(input):  # noqa: A002
    """torch's ``F.logsigmoid``: ``log(1 / (1 + exp(-x)))``, computed as ``min(x, 0) - log1p(exp(-|x|))``
    (float32 in float64, rounded once: ``activations._logsigmoid``; no overflow; ``log1p``, as torch's:
    ``log(1 + e)`` rounded ``1 + e`` and lost the tail, 0 above x = 17 in float32 where torch's is
    ``-exp(-x)``, 17% off at 15).

    Args:
        input: a float tensor.
    """
    return _logsigmoid(_float(input, "logsigmoid"))


@tensor_op("glu")
def glu(input, dim: int = -1):  # noqa: A002
    """torch's ``F.glu``: split ``input`` in halves ``a, b`` along ``dim``; ``a * sigmoid(b)``.

    Args:
        input: a float tensor whose size along ``dim`` is even. dim: the dim to split.
    """
    x = _float(input, "glu")
    if x.ndim == 0:
        raise op_error(ValueError, "glu", "needs a tensor with at least 1 dim (it halves one), got a 0-d one", x)
    n = x.shape[x._axis(dim, "glu")]
    if not isinstance(n, int) or n % 2:
        raise op_error(ValueError, "glu", f"halving dimension {dim} must have an even size, got shape "
                       f"{tuple(x.shape)}", x)
    a, b = x.split(n // 2, dim)
    return mul(a, ops.sigmoid(b))


@tensor_op("selu")
def selu(input, inplace: bool = False):  # noqa: A002
    """torch's ``F.selu``: ``scale * elu(x, alpha)`` with torch's constants, torch's elu kernel with its
    ``scale`` (``scaled_elu``: a 16-bit input rounded once, not after the elu and again after the scale).

    Args:
        input: a float tensor. inplace: ignored.
    """
    return scaled_elu(_float(input, "selu"), _SELU_ALPHA, _SELU_SCALE)


@tensor_op("celu")
@_opmath
def celu(input, alpha: float = 1.0, inplace: bool = False):  # noqa: A002
    """torch's ``F.celu``: ``max(0, x) + min(0, alpha * (exp(x / alpha) - 1))``, torch's elu kernel
    with ``input_scale = 1 / alpha`` (``scaled_elu``: expm1, and torch's first and second derivatives).

    Args:
        input: a float tensor. alpha: the negative side's scale (not 0). inplace: ignored.
    """
    check_number("celu", "alpha", alpha, input)
    if alpha == 0:
        raise op_error(ValueError, "celu", "alpha cannot be 0", input)
    return scaled_elu(_float(input, "celu"), alpha, 1.0, 1.0 / alpha)


@tensor_op("softsign")
def softsign(input):  # noqa: A002
    """torch's ``F.softsign``: ``x / (1 + |x|)``.

    Args:
        input: a float tensor.
    """
    x = _float(input, "softsign")
    return div(x, add(ops.abs(x), 1.0))


def prelu(input, weight):  # noqa: A002
    """torch's ``F.prelu``: ``x`` where positive, ``weight * x`` elsewhere; ``weight`` has one value or
    one per channel (dim 1 of the input). A 0-d or 1-d input has one channel, as torch's: a weight of
    more values is refused (it was applied along dim 0 of a 1-d input, where torch refuses).

    Args:
        input: a float tensor. weight: a 1-d float tensor of size 1 or the number of channels.
    """
    check_tensors("prelu", input=input, weight=weight)
    with renamed("prelu"):
        x = _float(input, "prelu")
        n = weight.numel()
        if weight.ndim > 1 or (n != 1 and (x.ndim < 2 or x.shape[1] != n)):
            raise op_error(ValueError, "prelu", f"weight of shape {tuple(weight.shape)} must have 1 or as many "
                           f"values as channels (dim 1) of the input, got input {tuple(x.shape)} (an input of "
                           f"fewer than 2 dims has 1 channel)", x, weight)
        w = weight.reshape(()) if n == 1 else weight.reshape(n, *(1,) * (x.ndim - 2))
        return where(gt(x, 0), x, mul(w.to(x.dtype), x))


def relu(input, inplace: bool = False):  # noqa: A002
    """torch's ``F.relu``: ``max(0, x)``. Args: input: a tensor. inplace: ignored."""
    return ops.relu(input)


def leaky_relu(input, negative_slope: float = 0.01, inplace: bool = False):  # noqa: A002
    """torch's ``F.leaky_relu``. Args: input: a float tensor. negative_slope: the slope below 0. inplace: ignored."""
    return ops.leaky_relu(input, negative_slope)


def elu(input, alpha: float = 1.0, inplace: bool = False):  # noqa: A002
    """torch's ``F.elu``. Args: input: a float tensor. alpha: the negative side's scale. inplace: ignored."""
    return ops.elu(input, alpha)


def silu(input, inplace: bool = False):  # noqa: A002
    """torch's ``F.silu``: ``x * sigmoid(x)``. Args: input: a float tensor. inplace: ignored."""
    return ops.silu(input)


def mish(input, inplace: bool = False):  # noqa: A002
    """torch's ``F.mish``: ``x * tanh(softplus(x))``. Args: input: a float tensor. inplace: ignored."""
    return ops.mish(input)


def gelu(input, approximate: str = "none"):  # noqa: A002
    """torch's ``F.gelu``. Args: input: a float tensor. approximate: 'none' (erf) or 'tanh'."""
    return ops.gelu(input, approximate=approximate)


def softplus(input, beta: float = 1.0, threshold: float = 20.0):  # noqa: A002
    """torch's ``F.softplus``: ``log(1 + exp(beta * x)) / beta``, linear above ``threshold``.

    Args: input: a float tensor. beta, threshold: as torch's."""
    return ops.softplus(input, beta, threshold)


def sigmoid(input):  # noqa: A002
    """torch's ``F.sigmoid``. Args: input: a float tensor."""
    return ops.sigmoid(input)


def tanh(input):  # noqa: A002
    """torch's ``F.tanh``. Args: input: a float tensor."""
    return ops.tanh(input)


def softmax(input, dim: int | None = None, _stacklevel: int = 3, dtype=None):  # noqa: A002
    """torch's ``F.softmax`` over ``dim`` (None: torch's legacy implicit dim), in ``dtype`` when given
    (the input is cast first).

    Args: input: a tensor. dim: the dim to normalise. dtype: the dtype to compute in."""
    check_tensors("softmax", input=input)
    return ops.softmax(input, dim if dim is not None else _legacy_softmax_dim(input.ndim), dtype)


def log_softmax(input, dim: int | None = None, _stacklevel: int = 3, dtype=None):  # noqa: A002
    """torch's ``F.log_softmax`` over ``dim``, in ``dtype`` when given.

    Args: input: a tensor. dim: the dim to normalise. dtype: the dtype to compute in."""
    check_tensors("log_softmax", input=input)
    return ops.log_softmax(input, dim if dim is not None else _legacy_softmax_dim(input.ndim), dtype)


# modules ---------------------------------------------------------------------------------------


class Hardtanh(_Elementwise):
    """torch's ``nn.Hardtanh(min_val=-1.0, max_val=1.0, inplace=False)``.

    Args:
        min_val, max_val: the range. inplace: ignored.
    """

    def __init__(self, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False):
        super().__init__(inplace)
        if min_val > max_val:
            raise ValueError(f"Hardtanh: min_val ({min_val}) cannot be greater than max_val ({max_val})")
        self.min_val, self.max_val = min_val, max_val

    def forward(self, x):
        return hardtanh(x, self.min_val, self.max_val)

    def extra_repr(self) -> str:
        return f"min_val={self.min_val}, max_val={self.max_val}" + (", inplace=True" if self.inplace else "")


class ReLU6(Hardtanh):
    """torch's ``nn.ReLU6(inplace=False)``: ``hardtanh(x, 0, 6)``.

    Args:
        inplace: ignored.
    """

    def __init__(self, inplace: bool = False):
        super().__init__(0.0, 6.0, inplace)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class Hardsigmoid(_Elementwise):
    """torch's ``nn.Hardsigmoid(inplace=False)``: ``relu6(x + 3) / 6``."""

    def forward(self, x):
        return hardsigmoid(x)

    def extra_repr(self) -> str:
        return ""  # torch's shows no inplace


class Hardswish(_Elementwise):
    """torch's ``nn.Hardswish(inplace=False)``: ``x * relu6(x + 3) / 6``."""

    def forward(self, x):
        return hardswish(x)

    def extra_repr(self) -> str:
        return ""  # torch's shows no inplace


class LogSigmoid(Module):
    """torch's ``nn.LogSigmoid()``."""

    def forward(self, x):
        return logsigmoid(x)


class GLU(Module):
    """torch's ``nn.GLU(dim=-1)``: the gated linear unit over ``dim``.

    Args:
        dim: the dim split in halves.
    """

    def __init__(self, dim: int = -1):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return glu(x, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class SELU(_Elementwise):
    """torch's ``nn.SELU(inplace=False)``."""

    def forward(self, x):
        return selu(x)


class CELU(_Elementwise):
    """torch's ``nn.CELU(alpha=1.0, inplace=False)``.

    Args:
        alpha: the negative side's scale. inplace: ignored.
    """

    def __init__(self, alpha: float = 1.0, inplace: bool = False):
        super().__init__(inplace)
        self.alpha = alpha

    def forward(self, x):
        return celu(x, self.alpha)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}" + (", inplace=True" if self.inplace else "")


class Softsign(Module):
    """torch's ``nn.Softsign()``: ``x / (1 + |x|)``."""

    def forward(self, x):
        return softsign(x)


class PReLU(Module):
    """torch's ``nn.PReLU(num_parameters=1, init=0.25)``: a learnt negative slope ``weight``, one
    value or one per channel (dim 1 of the input).

    Args:
        num_parameters: 1 or the number of channels. init: the initial slope. device: ignored.
        dtype: the weight's dtype.
    """

    def __init__(self, num_parameters: int = 1, init: float = 0.25, device=None, dtype=None):
        super().__init__()
        self.num_parameters = check_int("PReLU", "num_parameters", num_parameters, 1)
        self.init = init
        d = dt.as_dtype(dtype or dt.float32)
        self.weight = Parameter(np.full((self.num_parameters,), init, d.np), d)

    def reset_parameters(self) -> None:
        """Fill ``weight`` with ``init``."""
        self.weight.set(np.full((self.num_parameters,), self.init))

    def forward(self, x):
        check_tensors("PReLU", input=x)
        return prelu(x, self.weight.on(x.graph))

    def extra_repr(self) -> str:
        return f"num_parameters={self.num_parameters}"


def _rrelu_bounds(owner: str, lower, upper, *operands) -> tuple[float, float]:
    lower = float(check_number(owner, "lower", lower, *operands))
    upper = float(check_number(owner, "upper", upper, *operands))
    for what, v in (("lower", lower), ("upper", upper)):
        if not math.isfinite(v):  # (a NaN bound passed the order check and made every slope NaN)
            raise op_error(ValueError, owner, f"{what} bound must be finite, got {v}", *operands)
    if lower > upper:
        raise op_error(ValueError, owner, f"lower bound should be less than or equal to the upper bound, got "
                       f"lower={lower}, upper={upper}", *operands)
    return lower, upper


@tensor_op("rrelu")
def rrelu(input, lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False,  # noqa: A002
          inplace: bool = False):
    """torch's ``F.rrelu`` (randomized leaky ReLU): ``x`` where ``x > 0``, else ``a * x``. In training
    mode ``a`` is drawn uniformly from ``[lower, upper)`` for each element, afresh on every run of the
    compiled program (a graph input from ``x.graph.rng``, as dropout's mask), and the gradient there is
    the ``a`` used; otherwise ``a = (lower + upper) / 2`` (``leaky_relu``). Note torch's default
    ``training=False`` for the function (``nn.RReLU`` follows the module's mode).

    Args:
        input: a float tensor (int and bool inputs give float32).
        lower: the smallest slope (default 1/8). upper: the largest (default 1/3), at least ``lower``.
        training: draw random slopes. inplace: ignored (graphs have no in-place ops).
    """
    x = _float(input, "rrelu")
    lower, upper = _rrelu_bounds("rrelu", lower, upper, x)
    if not training:
        return ops.leaky_relu(x, (lower + upper) / 2)
    slope = add(mul(x.graph.rand(x.shape), upper - lower), lower).to(x.dtype)
    return where(gt(x, 0), x, mul(x, slope))


class RReLU(_Elementwise):
    """torch's ``nn.RReLU(lower=1/8, upper=1/3, inplace=False)``: ``rrelu`` with random slopes in
    training mode, the mean slope ``(lower + upper) / 2`` in eval mode.

    Args:
        lower: the smallest slope. upper: the largest. inplace: ignored.
    """

    def __init__(self, lower: float = 1.0 / 8, upper: float = 1.0 / 3, inplace: bool = False):
        super().__init__(inplace)
        self.lower, self.upper = _rrelu_bounds("RReLU", lower, upper)

    def forward(self, x):
        return rrelu(x, self.lower, self.upper, self.training)

    def extra_repr(self) -> str:
        return f"lower={self.lower}, upper={self.upper}" + (", inplace=True" if self.inplace else "")
