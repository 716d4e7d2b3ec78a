"""``nn.utils.fusion``: fold an evaluation-mode BatchNorm into the convolution or Linear before it, as
torch's (``fuse_conv_bn_eval``, ``fuse_linear_bn_eval`` and their ``*_weights`` arithmetic). The fused
weights are computed now, on the host, from the current values (in float64, then stored in each
parameter's dtype), so the fused module computes ``bn(conv(x))`` of an eval-mode ``bn`` in one layer."""

from __future__ import annotations

import copy

import numpy as np

from luminal.core import dtype as dt
from luminal.nn.module import Module
from luminal.nn.parameter import Parameter
from luminal.nn.utils.parametrize import _tensor_values


def _both_eval(op: str, layer: Module, bn: Module) -> None:
    """torch's checks: both modules in eval mode (a training BatchNorm normalises by the batch's
    statistics, which no fixed weight can fold) and a BatchNorm that tracks running statistics."""
    for name, m in (("the layer", layer), ("the BatchNorm", bn)):
        if m.__dict__["_training"]:
            raise ValueError(f"{op}: fusion only for eval: {name} {m._who()} is in training mode (call .eval() on "
                             f"both modules first)")
    if getattr(bn, "running_mean", None) is None or getattr(bn, "running_var", None) is None:
        raise ValueError(f"{op}: {bn._who()} has no running statistics (track_running_stats=False) to fold")


def _f64(x, what: str) -> np.ndarray:
    return _tensor_values(x, what)[0].astype(np.float64)


def _bn_scale(op: str, bn_rm, bn_rv, bn_eps, bn_w, bn_b) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The running mean, the per-channel scale ``bn_w / sqrt(bn_rv + bn_eps)`` and the shift ``bn_b``
    (None weight: ones; None bias: zeros, as torch's), in float64."""
    rm, rv = _f64(bn_rm, f"{op} (bn_rm)"), _f64(bn_rv, f"{op} (bn_rv)")
    w = np.ones_like(rm) if bn_w is None else _f64(bn_w, f"{op} (bn_w)")
    b = np.zeros_like(rm) if bn_b is None else _f64(bn_b, f"{op} (bn_b)")
    return rm, w / np.sqrt(rv + float(bn_eps)), b


def _dtype(x, default: dt.DType) -> dt.DType:
    return default if x is None else _tensor_values(x, "fusion")[1]


def _requires_grad(x) -> bool:
    return bool(getattr(x, "requires_grad", False))


def fuse_conv_bn_weights(conv_w, conv_b, bn_rm, bn_rv, bn_eps: float, bn_w, bn_b,
                         transpose: bool = False) -> tuple[Parameter, Parameter]:
    """The weight and bias of a convolution computing ``bn(conv(x))`` for an eval-mode BatchNorm, as
    torch's: ``w * s`` per output channel (dim 0; dim 1 for a transposed convolution's weight) and
    ``(b - mean) * s + bn_b``, with ``s = bn_w / sqrt(var + eps)``.

    Args:
        conv_w, conv_b: the convolution's weight and bias (None: zeros). bn_rm, bn_rv: the running mean
            and variance. bn_eps: the BatchNorm's eps. bn_w, bn_b: its affine weight and bias (None:
            ones and zeros). transpose: the weight is a transposed convolution's.

    Returns:
        (weight, bias) as new Parameters, in the convolution's dtypes.
    """
    op = "fuse_conv_bn_weights"
    w = _f64(conv_w, f"{op} (conv_w)")
    rm, scale, shift = _bn_scale(op, bn_rm, bn_rv, bn_eps, bn_w, bn_b)
    channels = w.shape[1 if transpose else 0] if w.ndim > 1 else None
    if channels != rm.shape[0] or rm.ndim != 1:
        raise ValueError(f"{op}: the convolution weight {tuple(w.shape)} has {channels} output channels (dim "
                         f"{1 if transpose else 0}) but the BatchNorm's statistics have shape {tuple(rm.shape)}")
    b = np.zeros_like(rm) if conv_b is None else _f64(conv_b, f"{op} (conv_b)")
    shape = [1, -1] if transpose else [-1, 1]
    wd = _dtype(conv_w, dt.float32)
    fused_w = w * scale.reshape(shape + [1] * (w.ndim - 2))
    fused_b = (b - rm) * scale + shift
    return (Parameter(fused_w, wd, requires_grad=_requires_grad(conv_w)),
            Parameter(fused_b, _dtype(conv_b, wd), requires_grad=_requires_grad(conv_b)))


def fuse_conv_bn_eval(conv: Module, bn: Module, transpose: bool = False) -> Module:
    """A copy of the eval-mode ``conv`` computing ``bn(conv(x))`` of the eval-mode ``bn``, as torch's
    (``conv`` and ``bn`` are left as they are; a convolution without a bias gets one).

    Args:
        conv: a Conv1d/2d/3d (or ConvTranspose with ``transpose=True``). bn: the BatchNorm after it.
        transpose: ``conv`` is a transposed convolution.

    Returns:
        The fused convolution.
    """
    _both_eval("fuse_conv_bn_eval", conv, bn)
    fused = copy.deepcopy(conv)
    fused.weight, fused.bias = fuse_conv_bn_weights(conv.weight, conv.bias, bn.running_mean, bn.running_var,
                                                    bn.eps, bn.weight, bn.bias, transpose)
    return fused


def fuse_linear_bn_weights(linear_w, linear_b, bn_rm, bn_rv, bn_eps: float, bn_w, bn_b) -> tuple[Parameter, Parameter]:
    """The weight and bias of a Linear computing ``bn(linear(x))`` for an eval-mode BatchNorm, as torch's:
    ``w * s`` per output feature and ``(b - mean) * s + bn_b``, with ``s = bn_w / sqrt(var + eps)`` (a
    BatchNorm of one feature scales every output alike).

    Args:
        linear_w, linear_b: the Linear's weight and bias (None: zeros). bn_rm, bn_rv: the running mean
            and variance. bn_eps: the BatchNorm's eps. bn_w, bn_b: its affine weight and bias.

    Returns:
        (weight, bias) as new Parameters, in the Linear's dtypes.
    """
    op = "fuse_linear_bn_weights"
    w = _f64(linear_w, f"{op} (linear_w)")
    rm, scale, shift = _bn_scale(op, bn_rm, bn_rv, bn_eps, bn_w, bn_b)
    if w.ndim != 2 or rm.ndim != 1 or rm.shape[0] not in (1, w.shape[0]):
        raise ValueError(f"{op}: the Linear weight {tuple(w.shape)} and the BatchNorm's statistics "
                         f"{tuple(rm.shape)} do not fit (out_features == num_features, or num_features == 1)")
    b = np.zeros(w.shape[0]) if linear_b is None else _f64(linear_b, f"{op} (linear_b)")
    wd = _dtype(linear_w, dt.float32)
    fused_w = w * scale[:, None]
    fused_b = np.broadcast_to((b - rm) * scale + shift, (w.shape[0],))
    return (Parameter(fused_w, wd, requires_grad=_requires_grad(linear_w)),
            Parameter(fused_b, _dtype(linear_b, wd), requires_grad=_requires_grad(linear_b)))


def fuse_linear_bn_eval(linear: Module, bn: Module) -> Module:
    """A copy of the eval-mode ``linear`` computing ``bn(linear(x))`` of the eval-mode ``bn`` (a
    BatchNorm1d over its output features, or of one feature), as torch's.

    Args:
        linear: a Linear. bn: the BatchNorm after it.

    Returns:
        The fused Linear.
    """
    _both_eval("fuse_linear_bn_eval", linear, bn)
    if linear.out_features != bn.num_features and bn.num_features != 1:
        raise ValueError(f"fuse_linear_bn_eval: to fuse, linear.out_features == bn.num_features or "
                         f"bn.num_features == 1, got linear.out_features={linear.out_features} and "
                         f"bn.num_features={bn.num_features}")
    fused = copy.deepcopy(linear)
    fused.weight, fused.bias = fuse_linear_bn_weights(linear.weight, linear.bias, bn.running_mean, bn.running_var,
                                                      bn.eps, bn.weight, bn.bias)
    return fused


__all__ = ["fuse_conv_bn_eval", "fuse_conv_bn_weights", "fuse_linear_bn_eval", "fuse_linear_bn_weights"]
