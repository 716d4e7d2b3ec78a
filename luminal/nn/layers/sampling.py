"""Resampling and reshaping layers and functionals: ``interpolate``/``Upsample`` (nearest, linear,
bilinear, bicubic, trilinear, area, with ``align_corners``), ``pixel_shuffle``/``PixelShuffle``,
``pad`` (constant, reflect, replicate, circular), with torch's names, signatures and formulas.

Interpolation is separable: each spatial dim is resampled by a constant (out, in) matrix (one 1 per
row for nearest, two weights for linear, four for cubic, a window's mean for area), a matmul whose
gradient is the transposed matrix. Non-constant padding modes are an ``index_select`` of each padded
dim with constant indices."""

from __future__ import annotations

import math

import numpy as np

from luminal.core import dtype as dt
from luminal.core.errors import op_error, renamed
from luminal.core.symbolic import is_static, shape_str
from luminal.frontend.checks import check_tensors
from luminal.nn.layers._util import check_float
from luminal.nn.module import Module

_MODES = ("nearest", "nearest-exact", "linear", "bilinear", "bicubic", "trilinear", "area")
_MODE_RANK = {"linear": 1, "bilinear": 2, "bicubic": 2, "trilinear": 3}
_CUBIC_A = -0.75  # torch's bicubic coefficient


def _cubic_weights(t: np.ndarray) -> np.ndarray:
    """(len(t), 4) weights of the 4 neighbours ``floor - 1 .. floor + 2`` at fraction ``t``: torch's
    cubic convolution (Keys, A = -0.75)."""
    a = _CUBIC_A

    def near(x):  # |x| <= 1
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x):  # 1 < |x| < 2
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

    return np.stack([far(t + 1), near(t), near(1 - t), far(2 - t)], axis=1)


def _area_matrix(n: int, out: int) -> np.ndarray:
    """(out, n) adaptive average pooling: output i averages inputs ``floor(i n / out)`` to
    ``ceil((i + 1) n / out) - 1``, as torch's 'area' mode (``adaptive_avg_pool``)."""
    m = np.zeros((out, n))
    for i in range(out):
        lo, hi = (i * n) // out, -((-(i + 1) * n) // out)
        m[i, lo:hi] = 1.0 / (hi - lo)
    return m


def _resample_matrix(n: int, out: int, mode: str, align_corners: bool, scale: float | None) -> np.ndarray:
    """(out, n) weights: output position i of one spatial dim as a combination of the input's.
    ``scale`` is torch's in/out ratio for this dim (1/scale_factor when a scale factor was given)."""
    if mode == "area":
        return _area_matrix(n, out)
    m = np.zeros((out, n))
    ratio = (n / out) if scale is None else scale
    i = np.arange(out)
    if mode == "nearest":
        src = np.minimum(np.floor(i * ratio).astype(np.int64), n - 1)
        m[i, src] = 1.0
        return m
    if mode == "nearest-exact":
        src = np.minimum(np.floor((i + 0.5) * ratio).astype(np.int64), n - 1)
        m[i, src] = 1.0
        return m
    if align_corners:
        pos = i * ((n - 1) / (out - 1)) if out > 1 else np.zeros(out)
    elif mode == "bicubic":  # not clamped at 0, as torch's cubic source index
        pos = (i + 0.5) * ratio - 0.5
    else:
        pos = np.maximum((i + 0.5) * ratio - 0.5, 0.0)
    if mode == "bicubic":
        base = np.floor(pos).astype(np.int64)
        w = _cubic_weights(pos - base)
        for t in range(4):  # the neighbours past an edge read the edge, as torch's
            np.add.at(m, (i, np.clip(base - 1 + t, 0, n - 1)), w[:, t])
        return m
    lo = np.minimum(np.floor(pos).astype(np.int64), n - 1)
    hi = np.minimum(lo + 1, n - 1)
    lam = pos - lo
    np.add.at(m, (i, lo), 1.0 - lam)
    np.add.at(m, (i, hi), lam)
    return m


def interpolate(input, size=None, scale_factor=None, mode: str = "nearest", align_corners: bool | None = None,  # noqa: A002
                recompute_scale_factor: bool | None = None, antialias: bool = False):
    """torch's ``F.interpolate`` for (N, C, *spatial) inputs with static spatial dims.

    Args:
        input: a float tensor (N, C, L), (N, C, H, W) or (N, C, D, H, W).
        size: the output spatial size (an int or one per spatial dim), or None.
        scale_factor: a multiplier (one or per dim) instead of ``size``.
        mode: 'nearest', 'nearest-exact', 'linear' (3-d input), 'bilinear' or 'bicubic' (4-d; torch's
            cubic convolution, A = -0.75, reading the edge past the borders), 'trilinear' (5-d), or
            'area' (adaptive average pooling to the output size).
        align_corners: for the linear and cubic modes, align the corner pixels' centres (torch's
            default False).
        recompute_scale_factor: with a scale factor, compute the sampling ratio from the output size
            (True) or from the factor (False/None, torch's default).
        antialias: not supported (False).
    """
    name = "interpolate"
    check_tensors(name, input=input)
    x = input
    with renamed(name):
        check_float(name, x)
        if mode not in _MODES:
            raise op_error(ValueError, name, f"mode must be one of {_MODES}, got {mode!r}", x)
        nd = x.ndim - 2
        if nd < 1:
            raise op_error(ValueError, name, f"expected an input (N, C, *spatial), got {shape_str(x.shape)}", x)
        if mode in _MODE_RANK and _MODE_RANK[mode] != nd:
            raise op_error(ValueError, name, f"mode {mode!r} expects a {_MODE_RANK[mode] + 2}-d input, got "
                           f"{shape_str(x.shape)}", x)
        if align_corners is not None and mode not in _MODE_RANK:
            raise op_error(ValueError, name, f"align_corners may only be set with the linear and cubic modes, not "
                           f"{mode!r}", x)
        if antialias:
            raise op_error(NotImplementedError, name, "antialias=True is not supported", x)
        spatial = tuple(x.shape[2:])
        if not all(is_static(n) for n in spatial):
            raise op_error(ValueError, name, f"expected static spatial dims, got {shape_str(x.shape)}", x)
        if (size is None) == (scale_factor is None):
            raise op_error(ValueError, name, "give exactly one of size and scale_factor", x)
        if size is not None:
            outs = tuple(size) if isinstance(size, (tuple, list)) else (size,) * nd
            if len(outs) != nd:
                raise op_error(ValueError, name, f"size {size!r} must have {nd} elements for input "
                               f"{shape_str(x.shape)}", x)
            scales = (None,) * nd
        else:
            sf = tuple(scale_factor) if isinstance(scale_factor, (tuple, list)) else (scale_factor,) * nd
            if len(sf) != nd:
                raise op_error(ValueError, name, f"scale_factor {scale_factor!r} must have {nd} elements for "
                               f"input {shape_str(x.shape)}", x)
            outs = tuple(int(math.floor(n * f)) for n, f in zip(spatial, sf))
            scales = (None,) * nd if recompute_scale_factor else tuple(1.0 / f for f in sf)
        if any(o < 1 for o in outs):
            raise op_error(ValueError, name, f"output size {outs} must be positive", x)
        ac = bool(align_corners)
        for i, (n, o, s) in enumerate(zip(spatial, outs, scales)):
            if o == n and mode in ("nearest", "nearest-exact") and (s is None or s == 1.0):
                continue
            m = x.graph.constant(_resample_matrix(n, o, mode, ac, s), x.dtype)  # (o, n)
            dim = 2 + i
            x = (x.transpose(dim, -1) @ m.T).transpose(dim, -1)
        return x


class Upsample(Module):
    """torch's ``nn.Upsample(size=None, scale_factor=None, mode='nearest', align_corners=None,
    recompute_scale_factor=None)``: ``interpolate`` as a layer.

    Args:
        size, scale_factor, mode, align_corners, recompute_scale_factor: as ``interpolate``.
    """

    def __init__(self, size=None, scale_factor=None, mode: str = "nearest", align_corners: bool | None = None,
                 recompute_scale_factor: bool | None = None):
        super().__init__()
        self.name = type(self).__name__
        self.size = size
        self.scale_factor = float(scale_factor) if isinstance(scale_factor, (int, float)) else \
            (tuple(float(f) for f in scale_factor) if scale_factor is not None else None)
        self.mode, self.align_corners, self.recompute_scale_factor = mode, align_corners, recompute_scale_factor

    def forward(self, x):
        return interpolate(x, self.size, self.scale_factor, self.mode, self.align_corners,
                           self.recompute_scale_factor)

    def extra_repr(self) -> str:
        info = f"scale_factor={self.scale_factor!r}" if self.scale_factor is not None else f"size={self.size!r}"
        return info + f", mode={self.mode!r}"


class UpsamplingNearest2d(Upsample):
    """torch's ``nn.UpsamplingNearest2d(size=None, scale_factor=None)``: nearest upsampling of (N, C, H, W).

    Args:
        size, scale_factor: as ``interpolate``.
    """

    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="nearest")


class UpsamplingBilinear2d(Upsample):
    """torch's ``nn.UpsamplingBilinear2d(size=None, scale_factor=None)``: bilinear with ``align_corners=True``.

    Args:
        size, scale_factor: as ``interpolate``.
    """

    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="bilinear", align_corners=True)


def pixel_shuffle(input, upscale_factor: int):  # noqa: A002
    """torch's ``F.pixel_shuffle``: (*, C*r^2, H, W) -> (*, C, H*r, W*r).

    Args:
        input: a tensor of at least 3 dims. upscale_factor: r.
    """
    name = "pixel_shuffle"
    check_tensors(name, input=input)
    r = upscale_factor
    if not isinstance(r, int) or r < 1:
        raise op_error(ValueError, name, f"upscale_factor must be a positive int, got {r!r}", input)
    if input.ndim < 3 or not is_static(input.shape[-3]) or input.shape[-3] % (r * r):
        raise op_error(ValueError, name, f"expected an input (*, C*{r * r}, H, W) (channels divisible by "
                       f"upscale_factor**2), got {shape_str(input.shape)}", input)
    *lead, c, h, w = input.shape
    oc = c // (r * r)
    k = len(lead)
    y = input.reshape(*lead, oc, r, r, h, w)
    y = y.permute(*range(k), k, k + 3, k + 1, k + 4, k + 2)  # (*, oc, h, r, w, r)
    return y.reshape(*lead, oc, h * r, w * r)


def pixel_unshuffle(input, downscale_factor: int):  # noqa: A002
    """torch's ``F.pixel_unshuffle``: (*, C, H*r, W*r) -> (*, C*r^2, H, W), the inverse of pixel_shuffle.

    Args:
        input: a tensor of at least 3 dims. downscale_factor: r.
    """
    name = "pixel_unshuffle"
    check_tensors(name, input=input)
    r = downscale_factor
    if not isinstance(r, int) or r < 1:
        raise op_error(ValueError, name, f"downscale_factor must be a positive int, got {r!r}", input)
    if input.ndim < 3 or any(not is_static(d) or d % r for d in input.shape[-2:]):
        raise op_error(ValueError, name, f"expected an input (*, C, H, W) with H and W divisible by {r}, got "
                       f"{shape_str(input.shape)}", input)
    *lead, c, h, w = input.shape
    k = len(lead)
    y = input.reshape(*lead, c, h // r, r, w // r, r)
    y = y.permute(*range(k), k, k + 2, k + 4, k + 1, k + 3)  # (*, c, r, r, h/r, w/r)
    return y.reshape(*lead, c * r * r, h // r, w // r)


class PixelShuffle(Module):
    """torch's ``nn.PixelShuffle(upscale_factor)``.

    Args:
        upscale_factor: r; (*, C*r^2, H, W) -> (*, C, H*r, W*r).
    """

    def __init__(self, upscale_factor: int):
        super().__init__()
        self.upscale_factor = upscale_factor

    def forward(self, x):
        return pixel_shuffle(x, self.upscale_factor)

    def extra_repr(self) -> str:
        return f"upscale_factor={self.upscale_factor}"


class PixelUnshuffle(Module):
    """torch's ``nn.PixelUnshuffle(downscale_factor)``.

    Args:
        downscale_factor: r; (*, C, H*r, W*r) -> (*, C*r^2, H, W).
    """

    def __init__(self, downscale_factor: int):
        super().__init__()
        self.downscale_factor = downscale_factor

    def forward(self, x):
        return pixel_unshuffle(x, self.downscale_factor)

    def extra_repr(self) -> str:
        return f"downscale_factor={self.downscale_factor}"


_NP_PAD = {"reflect": "reflect", "replicate": "edge", "circular": "wrap"}


def pad(input, pad, mode: str = "constant", value: float | None = None):  # noqa: A002
    """torch's ``F.pad``: ``pad`` lists (left, right) amounts from the last dim backwards.

    Args:
        input: the tensor. pad: an even-length sequence of ints (negative crops, for 'constant').
        mode: 'constant', 'reflect', 'replicate' or 'circular'. value: the fill for 'constant' (0).
    """
    name = "pad"
    check_tensors(name, input=input)
    pads = list(pad)
    if len(pads) % 2 or len(pads) // 2 > input.ndim:
        raise op_error(ValueError, name, f"pad {tuple(pads)} must have an even length of at most 2 * ndim "
                       f"({2 * input.ndim})", input)
    with renamed(name):
        if mode == "constant":
            return input.pad(pads, 0.0 if value is None else value)
        if mode not in _NP_PAD:
            raise op_error(ValueError, name, f"mode must be 'constant', 'reflect', 'replicate' or 'circular', got "
                           f"{mode!r}", input)
        if value is not None and value != 0:
            raise op_error(ValueError, name, f"padding mode {mode!r} does not take a value", input)
        x = input
        for i in range(len(pads) // 2):
            lo, hi = pads[2 * i], pads[2 * i + 1]
            if not lo and not hi:
                continue
            dim = x.ndim - 1 - i
            n = x.shape[dim]
            if not is_static(n):
                raise op_error(ValueError, name, f"mode {mode!r} needs static sizes in the padded dims, got "
                               f"{shape_str(input.shape)}", input)
            if min(lo, hi) < 0 or (mode == "reflect" and max(lo, hi) >= n) or (mode == "circular" and max(lo, hi) > n):
                raise op_error(ValueError, name, f"padding ({lo}, {hi}) is invalid for dim {dim} of size {n} in "
                               f"mode {mode!r}", input)
            idx = np.pad(np.arange(n), (lo, hi), mode=_NP_PAD[mode]).astype(np.int32)
            x = x.index_select(dim, x.graph.constant(idx, dt.int32))
        return x
