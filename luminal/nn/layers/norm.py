"""Normalisation layers: LayerNorm, RMSNorm, BatchNorm1d/2d/3d, GroupNorm and their functional forms, with
torch's parameters, buffers and formulas.

BatchNorm in training mode normalises with the batch statistics and registers its running-statistic
updates with ``graph.assign``, so every run of the compiled program updates the module's buffers.
float16/bfloat16 inputs are normalised in float32 and rounded once (``_opmath``), as torch's kernels
do: statistics rounded to 16 bits overflow (a sum of squares past 65504) or lose the spread of values
whose mean is large against it.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable

import numpy as np

from luminal.core import dtype as dt
from luminal.core.errors import check_int, op_error, renamed
from luminal.core.symbolic import is_static, prod, shape_str
from luminal.frontend.checks import check_tensors
from luminal.frontend.ops.elementwise import _opmath
from luminal.frontend.state import State
from luminal.frontend.tensor import GraphTensor
from luminal.nn import init
from luminal.nn.layers._util import bad_input, buffer, check_float, layer_forward, layer_name, param
from luminal.nn.module import Module

# RMSNorm's default eps for each input dtype: torch's docs say torch.finfo(dtype).eps, but its kernel
# computes 16-bit inputs in float32 with float32's (measured on torch 2.13: 1.19e-7 for float16 and
# bfloat16, not 9.8e-4 and 7.8e-3, which changed small inputs' outputs entirely)
_FINFO_EPS = {dt.float16: float(np.finfo(np.float32).eps), dt.bfloat16: float(np.finfo(np.float32).eps),
              dt.float32: float(np.finfo(np.float32).eps), dt.float64: float(np.finfo(np.float64).eps)}


def batch_var(x, axes):
    """The variance over ``axes`` (correction 0, dims kept) that a norm layer divides by, in ``x``'s own
    precision (16-bit through float32), as torch's norm kernels accumulate it. ``Tensor.var`` squares
    float32 deviations in float64 (so that a variance whose root fits does not overflow); here the
    mean, the variance and the normalisation stay one row kernel of the compiler's, which a float64
    reduction in the middle splits into three."""
    xs = x.float() if x.dtype in (dt.float16, dt.bfloat16) else x
    d = xs - xs.mean(axes, keepdim=True)
    v = (d * d).mean(axes, keepdim=True)
    return v if xs is x else v.to(x.dtype)


def _shape_arg(s, name: str) -> tuple[int, ...]:
    """``normalized_shape`` as a tuple: an integer (a numpy one too, as torch's ``numbers.Integral``)
    or a sequence of them (a list, a tuple, ``x.shape``); anything else is refused naming ``name``."""
    dims = (s,) if isinstance(s, numbers.Integral) else tuple(s) if isinstance(s, Iterable) else None
    if dims is None or not all(isinstance(d, numbers.Integral) for d in dims):
        raise TypeError(f"{name}: normalized_shape must be an int or a sequence of ints, got {s!r}")
    return tuple(int(d) for d in dims)


def _normalized_shape(s, layer: str) -> tuple[int, ...]:
    out = _shape_arg(s, layer)
    if not out or any(d < 1 for d in out):  # torch: an empty shape normalises nothing, and is refused
        raise ValueError(f"{layer}: normalized_shape must be one or more positive sizes, got {s!r}")
    return out


class _TrailingNorm(Module):
    """Shared by LayerNorm and RMSNorm: normalise over the last ``len(normalized_shape)`` dims."""

    def _axes(self, x):
        check_float(layer_name(self), x)
        k = len(self.normalized_shape)
        if x.ndim < k or tuple(x.shape[x.ndim - k:]) != self.normalized_shape:
            dims = ", ".join(str(d) for d in self.normalized_shape)
            raise bad_input(layer_name(self), f"(*, {dims})", x)
        return tuple(range(x.ndim - k, x.ndim))

    def reset_parameters(self) -> None:
        """Re-initialise as torch does: the weight to ones, the bias (when there is one) to zeros."""
        if self.weight is not None:
            init.ones_(self.weight)
        if getattr(self, "bias", None) is not None:
            init.zeros_(self.bias)


class LayerNorm(_TrailingNorm):
    """torch's ``nn.LayerNorm(normalized_shape, eps=1e-5, elementwise_affine=True, bias=True)``.

    Args:
        normalized_shape: the trailing dims normalised. eps: added to the variance.
        elementwise_affine: learn ``weight`` (and ``bias``). bias: learn the bias. device: ignored. dtype: their dtype.
    """

    def __init__(self, normalized_shape, eps: float = 1e-5, elementwise_affine: bool = True, bias: bool = True,
                 device=None, dtype=None):
        super().__init__()
        self.normalized_shape = _normalized_shape(normalized_shape, type(self).__name__)
        self.eps, self.elementwise_affine = eps, elementwise_affine
        self.weight = param(self.normalized_shape, dtype) if elementwise_affine else None
        self.bias = param(self.normalized_shape, dtype) if elementwise_affine and bias else None
        self.reset_parameters()

    @layer_forward
    @_opmath
    def forward(self, x):
        axes = self._axes(x)
        mean = x.mean(axes, keepdim=True)
        y = (x - mean) * (batch_var(x, axes) + self.eps).rsqrt()
        if self.weight is not None:
            y = y * self.weight.on(x.graph)
        if self.bias is not None:
            y = y + self.bias.on(x.graph)
        return y

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}, "
                f"bias={self.bias is not None}")


class RMSNorm(_TrailingNorm):
    """``x / sqrt(mean(x^2) + eps) * weight``; ``eps=None`` is the input dtype's machine epsilon, as torch.
    ``device`` is accepted for torch's signature and ignored."""

    def __init__(self, normalized_shape, eps: float | None = None, elementwise_affine: bool = True, device=None,
                 dtype=None):
        super().__init__()
        self.normalized_shape = _normalized_shape(normalized_shape, type(self).__name__)
        self.eps, self.elementwise_affine = eps, elementwise_affine
        self.weight = param(self.normalized_shape, dtype) if elementwise_affine else None
        self.reset_parameters()

    @layer_forward
    def forward(self, x):
        axes = self._axes(x)
        return self._normalize(x, axes, self.eps if self.eps is not None else _FINFO_EPS[x.dtype])

    @_opmath
    def _normalize(self, x, axes, eps):
        y = x * ((x * x).mean(axes, keepdim=True) + eps).rsqrt()
        return y * self.weight.on(x.graph) if self.weight is not None else y

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


class _NormBase(Module):
    """torch's ``_NormBase``, shared by the batch and instance norms: ``weight``/``bias`` when affine,
    ``running_mean``/``running_var``/``num_batches_tracked`` when tracking running statistics."""

    _ranks: tuple[int, ...] = ()
    _layout = ""

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = True,
                 track_running_stats: bool = True, device=None, dtype=None, *, bias: bool = True):
        super().__init__()
        num_features = check_int(type(self).__name__, "num_features", num_features, 1)
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        self.weight = param((num_features,), dtype) if affine else None
        self.bias = param((num_features,), dtype) if affine and bias else None
        if track_running_stats:
            self.running_mean = buffer(np.zeros(num_features), dtype)
            self.running_var = buffer(np.ones(num_features), dtype)
            self.num_batches_tracked = buffer(0, dt.int32)
        else:
            self.running_mean = self.running_var = self.num_batches_tracked = None
        self.reset_parameters()

    def reset_running_stats(self) -> None:
        """torch's: the running mean to 0, the running variance to 1 and ``num_batches_tracked`` to 0
        (when the layer tracks running statistics).
        """
        if self.track_running_stats:
            self.running_mean.set(np.zeros(self.num_features))
            self.running_var.set(np.ones(self.num_features))
            self.num_batches_tracked.set(0)

    def reset_parameters(self) -> None:
        """Re-initialise as torch does: the running statistics reset, the weight to ones and the bias to
        zeros (when affine).
        """
        self.reset_running_stats()
        if self.affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                f"bias={self.bias is not None}, track_running_stats={self.track_running_stats}")


class _BatchNorm(_NormBase):
    def _check(self, x):
        check_float(layer_name(self), x)
        if x.ndim not in self._ranks or x.shape[1] != self.num_features:
            raise bad_input(layer_name(self), self._layout.format(C=self.num_features), x)

    @layer_forward
    @_opmath
    def forward(self, x):
        self._check(x)
        g = x.graph
        axes = tuple(a for a in range(x.ndim) if a != 1)
        per_channel = (1, self.num_features) + (1,) * (x.ndim - 2)
        if self.training or self.running_mean is None:
            mean = x.mean(axes, keepdim=True)
            # (batch statistics: in eval too, without running ones)
            empty = not _more_than_one_value(layer_name(self), x, axes)
            var = batch_var(x, axes)
            if self.training and self.running_mean is not None:
                self._update_running_stats(g, mean.reshape(-1), x.var(axes, correction=1), empty)
        else:
            mean = self.running_mean.on(g).reshape(per_channel)
            var = self.running_var.on(g).reshape(per_channel)
        y = (x - mean) * (var + self.eps).rsqrt()
        if self.affine:
            y = y * self.weight.on(g).reshape(per_channel)
        if self.bias is not None:
            y = y + self.bias.on(g).reshape(per_channel)
        return y

    def _update_running_stats(self, g, mean, unbiased_var, empty: bool) -> None:
        """torch's update: ``stat = (1 - f) * stat + f * batch_stat`` with ``f = momentum``, or
        ``1 / num_batches_tracked`` (a cumulative average) when momentum is None. A module called
        twice in one graph updates twice, in order, as torch would. An ``empty`` batch counts in
        ``num_batches_tracked`` but leaves the statistics alone, as torch's kernel does."""
        nbt = _current(g, self.num_batches_tracked) + 1
        f = self.momentum if self.momentum is not None else 1.0 / nbt.float()
        for s, batch in ((self.running_mean, mean), (self.running_var, unbiased_var)) if not empty else ():
            g.assign(s, _current(g, s) * (1 - f) + batch * f)
        g.assign(self.num_batches_tracked, nbt)


def _more_than_one_value(name: str, x: GraphTensor, axes: tuple) -> bool:
    """torch's rule for a batch norm in training mode: more than one value per channel (with one, the
    unbiased variance divides by zero and the running variance becomes NaN, silently: the step's loss
    stays finite). Checked now where the count is known; else once per binding of the dims, before a
    program reading ``x`` runs (a requirement, ``GraphTensor._requires``): a ragged last batch of one row.
    An empty input (a count of 0 known now) passes, as torch's: False says so (there are no statistics
    to update the running ones with); a count known only when the program runs must be over 1."""
    n = prod(x.shape[a] for a in axes)
    if is_static(n):
        if n == 1:
            raise bad_input(name, "with more than 1 value per channel when training", x)
        return n > 0
    size = next(x.shape[a] for a in axes if not is_static(x.shape[a]))
    x._requires(n - 2, size, name, f"expected more than 1 value per channel when training (an input of shape "
                f"{shape_str(x.shape)})")
    return True


def running_stats(g, rm, rv, dtype, per_channel) -> tuple:
    """The running statistics ``rm``, ``rv`` (States or GraphTensors) as per-channel tensors of
    ``dtype`` in graph ``g``, with no gradient, as torch's (its norms do not differentiate them)."""
    m, v = (s.on(g) if isinstance(s, State) else s.detach() for s in (rm, rv))
    return m.to(dtype).reshape(per_channel), v.to(dtype).reshape(per_channel)


def normalise(x, mean, var, eps, weight, bias, per_channel):
    """``(x - mean) / sqrt(var + eps)``, then times ``weight`` and plus ``bias`` per channel (each
    optional): what batch and instance norms share once they have their statistics."""
    return affine((x - mean) * (var + eps).rsqrt(), weight, bias, per_channel)


def affine(y, weight, bias, shape=None):
    """``y * weight + bias`` (each optional), the parameters reshaped to ``shape`` (if given) and read in ``y``'s
    dtype: the functional norms return their input's dtype, as torch's, whose only mixed case is a
    16-bit input with float32 parameters (computed in float32, rounded to the input's dtype)."""
    if weight is not None:
        y = y * (weight.to(y.dtype) if shape is None else weight.to(y.dtype).reshape(shape))
    if bias is not None:
        y = y + (bias.to(y.dtype) if shape is None else bias.to(y.dtype).reshape(shape))
    return y


def _current(g, s):
    """The value ``s`` will have after this graph's updates registered so far (its value otherwise)."""
    return g.updates[s] if s in g.updates else s.on(g)


class BatchNorm1d(_BatchNorm):
    """torch's ``nn.BatchNorm1d(num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True,
    *, bias=True)`` over (N, C) or (N, C, L).

    Args:
        num_features: C. eps, momentum, affine, track_running_stats, dtype, bias: as torch's.
    """

    _ranks = (2, 3)
    _layout = "(N, {C}) or (N, {C}, L)"


class BatchNorm2d(_BatchNorm):
    """torch's ``nn.BatchNorm2d`` over (N, C, H, W) (arguments as BatchNorm1d)."""

    _ranks = (4,)
    _layout = "(N, {C}, H, W)"


class GroupNorm(Module):
    """torch's ``nn.GroupNorm(num_groups, num_channels, eps=1e-5, affine=True)``: normalise each
    sample over groups of ``num_channels // num_groups`` channels (and every spatial position), then
    scale and shift per channel. Input (N, C, *).

    Args:
        num_groups: groups the channels are split into. num_channels: C. eps: added to the variance.
        affine: learn ``weight`` (ones) and ``bias`` (zeros) of shape (C,). device: ignored. dtype: their dtype.
        bias: with ``affine``, learn the bias too (torch's keyword).
    """

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5, affine: bool = True, device=None,
                 dtype=None, *, bias: bool = True):
        super().__init__()
        num_groups = check_int("GroupNorm", "num_groups", num_groups, 1)
        num_channels = check_int("GroupNorm", "num_channels", num_channels, 1)
        if num_channels % num_groups:
            raise ValueError(f"GroupNorm: num_channels ({num_channels}) must be divisible by num_groups ({num_groups})")
        self.num_groups, self.num_channels, self.eps, self.affine = num_groups, num_channels, eps, affine
        self.weight = param((num_channels,), dtype) if affine else None
        self.bias = param((num_channels,), dtype) if affine and bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Ones for ``weight``, zeros for ``bias``."""
        if self.affine:
            init.ones_(self.weight)
        if self.bias is not None:
            init.zeros_(self.bias)

    @layer_forward
    def forward(self, x):
        check_float(layer_name(self), x)
        if x.ndim < 2 or x.shape[1] != self.num_channels:
            raise bad_input(layer_name(self), f"(N, {self.num_channels}, *)", x)
        g = x.graph
        w = self.weight.on(g) if self.weight is not None else None
        b = self.bias.on(g) if self.bias is not None else None
        return _group_norm(x, self.num_groups, w, b, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}, "
                f"bias={self.bias is not None}")


def _group_norm(x, num_groups: int, weight, bias, eps: float):
    n, c = x.shape[0], x.shape[1]
    rest = tuple(x.shape[2:])
    axes = (2,) if all(is_static(d) for d in rest) else tuple(range(2, 3 + len(rest)))

    @_opmath  # (x alone: a 16-bit input with float32 weights is torch's mixed type, of the input's dtype)
    def run(x):
        xg = x.reshape(n, num_groups, c // num_groups * prod(rest)) if len(axes) == 1 else \
            x.reshape(n, num_groups, c // num_groups, *rest)  # (sizes spelled out: -1 is ambiguous when empty)
        y = ((xg - xg.mean(axes, keepdim=True)) * (batch_var(xg, axes) + eps).rsqrt()).reshape(*x.shape)
        return affine(y, weight, bias, (c,) + (1,) * len(rest))

    return run(x)


def group_norm(input, num_groups: int, weight=None, bias=None, eps: float = 1e-5):  # noqa: A002
    """torch's ``F.group_norm``: normalise (N, C, *) over groups of channels, then ``* weight + bias``
    per channel.

    Args:
        input: a float tensor (N, C, *).
        num_groups: a divisor of C.
        weight, bias: optional (C,) tensors.
        eps: added to the variance.
    """
    name = "group_norm"
    check_tensors(name, optional=("weight", "bias"), input=input, weight=weight, bias=bias)
    check_float(name, input)
    c = input.shape[1] if input.ndim >= 2 else None
    if c is None or not isinstance(num_groups, int) or num_groups < 1 or not is_static(c) or c % num_groups:
        raise bad_input(name, f"(N, C, *) with C divisible by num_groups={num_groups!r}", input)
    for what, t in (("weight", weight), ("bias", bias)):
        if t is not None and tuple(t.shape) != (c,):
            raise bad_input(name, f"({c},)", t, what=what)
    with renamed(name):
        return _group_norm(input, num_groups, weight, bias, eps)


def _trailing_axes(name, x, normalized_shape, weight, bias):
    check_float(name, x)
    shape = _shape_arg(normalized_shape, name)
    k = len(shape)
    if not k:  # (as torch's: normalising over no dim is no norm; a mean over () would be over every dim)
        raise op_error(ValueError, name, "normalized_shape must have at least one dim, got ()", x)
    if x.ndim < k or tuple(x.shape[x.ndim - k:]) != shape:
        raise bad_input(name, "(*, " + ", ".join(str(d) for d in shape) + ")", x)
    for what, t in (("weight", weight), ("bias", bias)):
        if t is not None and tuple(t.shape) != shape:
            raise bad_input(name, str(shape), t, what=what)
    return tuple(range(x.ndim - k, x.ndim))


def layer_norm(input, normalized_shape, weight=None, bias=None, eps: float = 1e-5):  # noqa: A002
    """torch's ``F.layer_norm``: normalise over the trailing ``normalized_shape`` dims, then
    ``* weight + bias``.

    Args:
        input: a float tensor.
        normalized_shape: the trailing dims' sizes.
        weight, bias: optional tensors of that shape.
        eps: added to the variance.
    """
    name = "layer_norm"
    check_tensors(name, optional=("weight", "bias"), input=input, weight=weight, bias=bias)
    axes = _trailing_axes(name, input, normalized_shape, weight, bias)

    @_opmath  # (x alone: a 16-bit input with float32 weights is torch's mixed type, of the input's dtype)
    def run(x):
        y = (x - x.mean(axes, keepdim=True)) * (batch_var(x, axes) + eps).rsqrt()
        return affine(y, weight, bias)

    with renamed(name):
        return run(input)


def rms_norm(input, normalized_shape, weight=None, eps: float | None = None):  # noqa: A002
    """torch's ``F.rms_norm``: ``x / sqrt(mean(x^2) + eps) * weight`` over the trailing dims;
    ``eps=None`` is the input dtype's machine epsilon.

    Args:
        input: a float tensor.
        normalized_shape: the trailing dims' sizes.
        weight: an optional tensor of that shape.
        eps: added to the mean square.
    """
    name = "rms_norm"
    check_tensors(name, optional=("weight",), input=input, weight=weight)
    axes = _trailing_axes(name, input, normalized_shape, weight, None)
    e = eps if eps is not None else _FINFO_EPS[input.dtype]

    @_opmath  # (x alone, as layer_norm's)
    def run(x):
        y = x * ((x * x).mean(axes, keepdim=True) + e).rsqrt()
        return affine(y, weight, None)

    with renamed(name):
        return run(input)


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training: bool = False,  # noqa: A002
               momentum: float | None = 0.1, eps: float = 1e-5):
    """torch's ``F.batch_norm`` over an (N, C, *) input. With ``training`` (or no running statistics)
    the batch statistics normalise; otherwise ``running_mean``/``running_var``. In training mode torch
    updates the running statistics in place: here they must then be States (a module's Buffers), whose
    updates every run of the compiled program writes back (``graph.assign``), or None.

    Args:
        input: a float tensor (N, C, *).
        running_mean, running_var: (C,) GraphTensors, Buffers, or None.
        weight, bias: optional (C,) tensors.
        training: use batch statistics (and update the running ones).
        momentum: the running statistics' update factor (None: a cumulative average is not supported
            here; give a number).
        eps: added to the variance.
    """
    name = "batch_norm"
    check_tensors(name, optional=("weight", "bias"), input=input, weight=weight, bias=bias)
    check_float(name, input)
    if input.ndim < 2:
        raise bad_input(name, "(N, C, *)", input)
    g, c = input.graph, input.shape[1]
    stats = []
    for what, s in (("running_mean", running_mean), ("running_var", running_var)):
        if isinstance(s, State):
            if training and not isinstance(momentum, (int, float)):
                raise TypeError(f"{name}: momentum must be a number to update {what}, got {momentum!r}")
            stats.append(s)
        elif s is None or isinstance(s, GraphTensor):
            if training and s is not None:
                raise TypeError(f"{name}: training=True updates {what} in place, which needs a State (the "
                                f"module's Buffer), not a GraphTensor; pass the Buffer or None")
            stats.append(s)
        else:
            raise TypeError(f"{name}: {what} must be a GraphTensor, a State or None, got {type(s).__name__}")
    for what, t in (("weight", weight), ("bias", bias), ("running_mean", stats[0]), ("running_var", stats[1])):
        if t is not None and tuple(t.shape) != (c,):
            raise bad_input(name, f"({c},)", t, what=what)
    rm, rv = stats
    if not training and (rm is None or rv is None):  # (torch's: batch statistics are training's)
        raise op_error(ValueError, name, "running_mean and running_var must be given in evaluation mode "
                       "(training=False)", input)
    per_channel = (1, c) + (1,) * (input.ndim - 2)
    axes = tuple(a for a in range(input.ndim) if a != 1)

    @_opmath
    def run(x):
        if training:
            mean = x.mean(axes, keepdim=True)
            values = _more_than_one_value(name, x, axes)
            var = batch_var(x, axes)
            for st, batch in ((rm, mean.reshape(-1)), (rv, x.var(axes, correction=1))):
                if st is not None and values:  # (torch's kernel leaves them alone for an empty batch)
                    g.assign(st, _current(g, st) * (1 - momentum) + batch * momentum)
        else:
            mean, var = running_stats(g, rm, rv, x.dtype, per_channel)
        return normalise(x, mean, var, eps, weight, bias, per_channel)

    with renamed(name):
        return run(input)


class BatchNorm3d(_BatchNorm):
    """torch's ``nn.BatchNorm3d``: batch normalisation of an (N, C, D, H, W) input (see BatchNorm1d)."""

    _ranks = (5,)
    _layout = "(N, {C}, D, H, W)"
