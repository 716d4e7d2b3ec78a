"""Power-average pooling (``nn.LPPool1d/2d/3d``, ``F.lp_pool1d/2d/3d``): ``(sum over the window of
x ** p) ** (1 / p)``, composed as torch composes it so that values and gradients agree where they are
delicate:

- the window sum is ``avg_pool(x ** p) * kernel size`` (with ``ceil_mode`` a clipped window's mean is
  over its elements but still multiplied by the whole kernel size, as torch's);
- the sum goes through ``sign(s) * relu(|s|)`` before the root: the same value, but a window whose sum
  is 0 gets gradient 0 (relu's gradient is 0 there and masks the root's infinite one) where the
  root alone would give inf or NaN; a negative sum (odd ``p``, negative inputs) gives NaN, as torch;
- ``p = inf`` is max pooling of ``|x|`` (and ``-inf`` minus that of ``-|x|``), torch's special case,
  with max pooling's gradient.
"""

from __future__ import annotations

import math

import numpy as np

from luminal.core.errors import check_number, renamed
from luminal.frontend.checks import check_tensors
from luminal.nn.layers._util import bad_input, check_float, layer_forward, layer_name, ntuple
from luminal.nn.layers.pool_nd import avg_pool1d, avg_pool2d, avg_pool3d, max_pool1d, max_pool2d, max_pool3d
from luminal.nn.module import Module

_AVG = {1: avg_pool1d, 2: avg_pool2d, 3: avg_pool3d}
_MAX = {1: max_pool1d, 2: max_pool2d, 3: max_pool3d}
_SPATIAL = {1: "L", 2: "H, W", 3: "D, H, W"}


def _norm_type(name: str, norm_type) -> None:
    p = float(check_number(name, "norm_type", norm_type))
    if p == 0 or math.isnan(p):
        raise ValueError(f"{name}: norm_type must be a nonzero number (the root is 1 / norm_type), got {norm_type}")


def _lp_pool(x, p: float, kernel, stride, ceil_mode: bool, nd: int, name: str):
    check_float(name, x)
    if x.ndim not in (nd + 1, nd + 2):
        raise bad_input(name, f"(N, C, {_SPATIAL[nd]}) or (C, {_SPATIAL[nd]})", x)
    if math.isinf(p):
        m = _MAX[nd](x.abs() if p > 0 else -x.abs(), kernel, stride, 0, 1, ceil_mode)
        return m if p > 0 else -m
    s = _AVG[nd](x ** p, kernel, stride, 0, ceil_mode)
    s = s.sign() * s.abs().relu()  # s itself; gradient 0 where s == 0 (module docstring)
    return (s * float(np.prod(kernel))) ** (1.0 / p)


class _LPPoolNd(Module):
    _nd = 0

    def __init__(self, norm_type: float, kernel_size, stride=None, ceil_mode: bool = False):
        super().__init__()
        name = type(self).__name__
        _norm_type(name, norm_type)
        self.norm_type = norm_type  # as given, as torch keeps it (its forward takes float(norm_type))
        self.kernel_size = ntuple(kernel_size, self._nd, f"{name}: kernel_size", 1)
        self.stride = None if stride is None else ntuple(stride, self._nd, f"{name}: stride", 1)
        self.ceil_mode = bool(ceil_mode)

    @layer_forward
    def forward(self, x):
        return _lp_pool(x, float(self.norm_type), self.kernel_size, self.stride, self.ceil_mode, self._nd,
                        layer_name(self))

    def extra_repr(self) -> str:
        def show(t):
            return None if t is None else (t[0] if self._nd == 1 else t)

        return (f"norm_type={self.norm_type}, kernel_size={show(self.kernel_size)}, stride={show(self.stride)}, "
                f"ceil_mode={self.ceil_mode}")


class LPPool1d(_LPPoolNd):
    """torch's ``nn.LPPool1d(norm_type, kernel_size, stride=None, ceil_mode=False)`` over (N, C, L) or
    (C, L): ``(sum over each window of x ** p) ** (1 / p)`` (``p = inf``: the max of ``|x|``).

    Args:
        norm_type: the power ``p`` (nonzero; +-inf allowed).
        kernel_size: the window size. stride: default kernel_size. ceil_mode: as ``AvgPool1d``'s.
    """

    _nd = 1


class LPPool2d(_LPPoolNd):
    """torch's ``nn.LPPool2d(norm_type, kernel_size, stride=None, ceil_mode=False)`` over (N, C, H, W)
    or (C, H, W): ``(sum over each window of x ** p) ** (1 / p)`` (``p = inf``: the max of ``|x|``).

    Args:
        norm_type: the power ``p`` (nonzero; +-inf allowed).
        kernel_size: an int or (kh, kw). stride: default kernel_size. ceil_mode: as ``AvgPool2d``'s.
    """

    _nd = 2


class LPPool3d(_LPPoolNd):
    """torch's ``nn.LPPool3d(norm_type, kernel_size, stride=None, ceil_mode=False)`` over (N, C, D, H, W)
    or (C, D, H, W): ``(sum over each window of x ** p) ** (1 / p)`` (``p = inf``: the max of ``|x|``).

    Args:
        norm_type: the power ``p`` (nonzero; +-inf allowed).
        kernel_size: an int or (kd, kh, kw). stride: default kernel_size. ceil_mode: as ``AvgPool3d``'s.
    """

    _nd = 3


def _functional(layer, name: str, input):  # noqa: A002
    check_tensors(name, input=input)
    with renamed(name):
        return layer(input)


def lp_pool1d(input, norm_type: float, kernel_size, stride=None, ceil_mode: bool = False):  # noqa: A002
    """torch's ``F.lp_pool1d`` over (N, C, L) or (C, L).

    Args:
        input: a float tensor. norm_type, kernel_size, stride (default kernel_size), ceil_mode: as
            ``nn.LPPool1d``.
    """
    return _functional(LPPool1d(norm_type, kernel_size, stride, ceil_mode), "lp_pool1d", input)


def lp_pool2d(input, norm_type: float, kernel_size, stride=None, ceil_mode: bool = False):  # noqa: A002
    """torch's ``F.lp_pool2d`` over (N, C, H, W) or (C, H, W).

    Args:
        input: a float tensor. norm_type, kernel_size, stride (default kernel_size), ceil_mode: as
            ``nn.LPPool2d``.
    """
    return _functional(LPPool2d(norm_type, kernel_size, stride, ceil_mode), "lp_pool2d", input)


def lp_pool3d(input, norm_type: float, kernel_size, stride=None, ceil_mode: bool = False):  # noqa: A002
    """torch's ``F.lp_pool3d`` over (N, C, D, H, W) or (C, D, H, W).

    Args:
        input: a float tensor. norm_type, kernel_size, stride (default kernel_size), ceil_mode: as
            ``nn.LPPool3d``.
    """
    return _functional(LPPool3d(norm_type, kernel_size, stride, ceil_mode), "lp_pool3d", input)
