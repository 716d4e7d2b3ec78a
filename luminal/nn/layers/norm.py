"""Normalisation layers: LayerNorm, RMSNorm, BatchNorm1d/2d, with torch's parameters, buffers and formulas.

BatchNorm in training mode normalises with the batch statistics and registers its running-statistic
updates with ``graph.assign``, so every run of the compiled program updates the module's buffers.
float16/bfloat16 inputs are normalised in float32 and rounded once (``_opmath``), as torch's kernels
do: statistics rounded to 16 bits overflow (a sum of squares past 65504) or lose the spread of values
whose mean is large against it.
"""

from __future__ import annotations

import numpy as np

from luminal.core import dtype as dt
from luminal.core.errors import check_int
from luminal.core.symbolic import is_static, prod
from luminal.frontend.ops.elementwise import _opmath
from luminal.nn import init
from luminal.nn.layers._util import bad_input, buffer, check_float, layer_forward, layer_name, param
from luminal.nn.module import Module

# torch.finfo(dtype).eps, RMSNorm's default eps for each input dtype
_FINFO_EPS = {dt.float16: float(np.finfo(np.float16).eps), dt.bfloat16: 2.0 ** -7,
              dt.float32: float(np.finfo(np.float32).eps), dt.float64: float(np.finfo(np.float64).eps)}


def _normalized_shape(s, layer: str) -> tuple[int, ...]:
    out = (int(s),) if isinstance(s, int) else tuple(int(d) for d in s)
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
        if self.weight is not None:
            init.ones_(self.weight)
        if getattr(self, "bias", None) is not None:
            init.zeros_(self.bias)


class LayerNorm(_TrailingNorm):
    def __init__(self, normalized_shape, eps: float = 1e-5, elementwise_affine: bool = True, bias: bool = True,
                 dtype=None):
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
        y = (x - mean) * (x.var(axes, keepdim=True, correction=0) + self.eps).rsqrt()
        if self.weight is not None:
            y = y * self.weight.on(x.graph)
        if self.bias is not None:
            y = y + self.bias.on(x.graph)
        return y

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


class RMSNorm(_TrailingNorm):
    """``x / sqrt(mean(x^2) + eps) * weight``; ``eps=None`` is the input dtype's machine epsilon, as torch."""

    def __init__(self, normalized_shape, eps: float | None = None, elementwise_affine: bool = True, dtype=None):
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


class _BatchNorm(Module):
    _ranks: tuple[int, ...] = ()
    _layout = ""

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = True,
                 track_running_stats: bool = True, dtype=None):
        super().__init__()
        num_features = check_int(type(self).__name__, "num_features", num_features, 1)
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        self.weight = param((num_features,), dtype) if affine else None
        self.bias = param((num_features,), dtype) if affine else None
        if track_running_stats:
            self.running_mean = buffer(np.zeros(num_features), dtype)
            self.running_var = buffer(np.ones(num_features), dtype)
            self.num_batches_tracked = buffer(0, dt.int32)
        else:
            self.running_mean = self.running_var = self.num_batches_tracked = None
        self.reset_parameters()

    def reset_running_stats(self) -> None:
        if self.track_running_stats:
            self.running_mean.set(np.zeros(self.num_features))
            self.running_var.set(np.ones(self.num_features))
            self.num_batches_tracked.set(0)

    def reset_parameters(self) -> None:
        self.reset_running_stats()
        if self.affine:
            init.ones_(self.weight)
            init.zeros_(self.bias)

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
            n = prod(x.shape[a] for a in axes)
            if self.training and is_static(n) and n <= 1:
                raise bad_input(layer_name(self), "with more than 1 value per channel when training", x)
            mean = x.mean(axes, keepdim=True)
            var = x.var(axes, keepdim=True, correction=0)
            if self.training and self.running_mean is not None:
                self._update_running_stats(g, mean.reshape(-1), x.var(axes, correction=1))
        else:
            mean = self.running_mean.on(g).reshape(per_channel)
            var = self.running_var.on(g).reshape(per_channel)
        y = (x - mean) * (var + self.eps).rsqrt()
        if self.affine:
            y = y * self.weight.on(g).reshape(per_channel) + self.bias.on(g).reshape(per_channel)
        return y

    def _update_running_stats(self, g, mean, unbiased_var) -> None:
        """torch's update: ``stat = (1 - f) * stat + f * batch_stat`` with ``f = momentum``, or
        ``1 / num_batches_tracked`` (a cumulative average) when momentum is None. A module called
        twice in one graph updates twice, in order, as torch would."""
        nbt = _current(g, self.num_batches_tracked) + 1
        f = self.momentum if self.momentum is not None else 1.0 / nbt.float()
        for s, batch in ((self.running_mean, mean), (self.running_var, unbiased_var)):
            g.assign(s, _current(g, s) * (1 - f) + batch * f)
        g.assign(self.num_batches_tracked, nbt)

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                f"track_running_stats={self.track_running_stats}")


def _current(g, s):
    """The value ``s`` will have after this graph's updates registered so far (its value otherwise)."""
    return g.updates[s] if s in g.updates else s.on(g)


class BatchNorm1d(_BatchNorm):
    _ranks = (2, 3)
    _layout = "(N, {C}) or (N, {C}, L)"


class BatchNorm2d(_BatchNorm):
    _ranks = (4,)
    _layout = "(N, {C}, H, W)"
