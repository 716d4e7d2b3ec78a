"""Resampling and reshaping layers and functionals: ``interpolate``/``Upsample`` (nearest, linear,
bilinear, bicubic, trilinear, area, with ``align_corners``), ``pixel_shuffle``/``PixelShuffle``,
``pad`` (constant, reflect, replicate, circular), with torch's names, signatures and formulas.

Interpolation is separable: each spatial dim is resampled on its own. An integer scale factor (the
common x2 upsampling) needs no sizes: 'nearest', 'nearest-exact' and 'area' repeat each element ``s``
times (a view: expand and reshape), and 'linear'/'bilinear'/'bicubic'/'trilinear' with
``align_corners=False`` are polyphase filters, output ``s*k + j`` a fixed combination (by ``j`` alone)
of the inputs ``k-1 .. k+1`` (``k-2 .. k+2`` for cubic) of the input padded by replicating its edges,
so these take symbolic spatial dims. Other sizes resample by a constant (out, in) matrix (one 1 per
row for nearest, two weights for linear, four for cubic, a window's mean for area), a matmul whose
gradient is the transposed matrix; they need static spatial dims.

Non-constant padding modes (and their negative amounts, which crop) are slices of the input, flipped
(reflect) or broadcast (replicate) at the edges, joined by ``cat``: the dims may be symbolic, and what
torch checks on the sizes is checked when the program runs."""

from __future__ import annotations

import math
import numbers

import numpy as np

from luminal.core.errors import check_number, op_error, renamed
from luminal.core.symbolic import exact_div, is_static, shape_str
from luminal.frontend.checks import check_tensors
from luminal.frontend.ops.elementwise import _opmath
from luminal.frontend.ops.movement import pad_mode_dim
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
    if mode in ("nearest", "nearest-exact"):  # in float32, as torch's kernel: float64 read a neighbour at times
        r32, i32 = np.float32(ratio), i.astype(np.float32)
        at = i32 * r32 if mode == "nearest" else (i32 + np.float32(0.5)) * r32
        m[i, np.minimum(np.floor(at).astype(np.int64), n - 1)] = 1.0
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
    """torch's ``F.interpolate`` for (N, C, *spatial) inputs.

    The spatial dims may be symbolic with an integer ``scale_factor`` (``2``, ``2.0``; at least 1) in
    the modes 'nearest', 'nearest-exact' and 'area', and in the linear and cubic modes with
    ``align_corners=False``: the output is then ``n * scale_factor`` long, whatever ``n``. ``size``,
    other scale factors and ``align_corners=True`` need static spatial dims.

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
        if (size is None) == (scale_factor is None):
            raise op_error(ValueError, name, "give exactly one of size and scale_factor", x)
        if size is not None:
            if recompute_scale_factor:
                raise op_error(ValueError, name, "recompute_scale_factor is not meaningful with an explicit size "
                               "(as torch's)", x)
            outs = tuple(size) if isinstance(size, (tuple, list)) else (size,) * nd
            if len(outs) != nd:
                raise op_error(ValueError, name, f"size {size!r} must have {nd} elements for input "
                               f"{shape_str(x.shape)}", x)
            if any(isinstance(o, bool) or not hasattr(o, "__index__") for o in outs):
                raise op_error(TypeError, name, f"size {size!r} must be an int or a sequence of ints", x)
            outs = tuple(int(o) for o in outs)
            scales, steps = (None,) * nd, (None,) * nd
        else:
            sf = tuple(scale_factor) if isinstance(scale_factor, (tuple, list)) else (scale_factor,) * nd
            if len(sf) != nd:
                raise op_error(ValueError, name, f"scale_factor {scale_factor!r} must have {nd} elements for "
                               f"input {shape_str(x.shape)}", x)
            for f in sf:  # (0 divided by zero, infinities and NaN failed converting to int, naming nothing)
                check_number(name, "scale_factor", f, x)
                if not (0 < f < math.inf):
                    raise op_error(ValueError, name, f"scale_factor must be positive and finite, got "
                                   f"{scale_factor!r}", x)
            steps = tuple(_integer_scale(f) for f in sf)
            scales = (None,) * nd if recompute_scale_factor else tuple(1.0 / f for f in sf)
            outs = tuple(n * k if k is not None else (int(math.floor(n * f)) if is_static(n) else None)
                         for n, f, k in zip(spatial, sf, steps))
        ac = bool(align_corners)
        local = mode in ("nearest", "nearest-exact", "area") or not ac  # an integer scale resamples locally
        for n, k in zip(spatial, steps):
            if not is_static(n) and (k is None or not local):
                raise op_error(ValueError, name, f"symbolic spatial dims (input {shape_str(x.shape)}) take only an "
                               "integer scale_factor (>= 1), with mode 'nearest', 'nearest-exact' or 'area', or "
                               "with 'linear', 'bilinear', 'bicubic' or 'trilinear' and align_corners=False; "
                               f"{'size=' if size is not None else 'this scale_factor'}"
                               f"{' and align_corners=True' if ac and k is not None else ''} needs static spatial "
                               "dims", x)
        if any(is_static(o) and o < 1 for o in outs):
            raise op_error(ValueError, name, f"output size {shape_str(outs)} must be positive", x)
        repeats = {}  # dim -> k: repeated together, last (one copy, of the other dims' results)
        for i, (n, o, s, k) in enumerate(zip(spatial, outs, scales, steps)):
            dim = 2 + i
            # a dim left its size is copied: always by the linear modes' kernels, whatever the scale factor
            # (torch's; bicubic resamples), by nearest's only at scale 1
            same = o == n and (mode in ("linear", "bilinear", "trilinear") or
                               mode in ("nearest", "nearest-exact") and (s is None or s == 1.0))
            if (k == 1 and local) or same:
                continue
            if k is not None and mode in ("nearest", "nearest-exact", "area"):
                repeats[dim] = k
            elif k is not None and local:
                x = _upsample_taps(x, dim, k, mode)
            else:
                m = x.graph.constant(_resample_matrix(n, o, mode, ac, s), x.dtype)  # (o, n)
                x = (x.transpose(dim, -1) @ m.T).transpose(dim, -1)
        return _repeat_each(x, repeats) if repeats else x


def _integer_scale(f) -> int | None:
    """A scale factor that is a whole number at least 1, as an int (torch's output size ``floor(n * f)``
    is then ``n * f`` and output ``i`` reads from input ``i // f``); else None."""
    try:
        v = float(f)
    except (TypeError, ValueError):
        return None
    return int(v) if v >= 1 and v.is_integer() else None


def _repeat_each(x, repeats: dict[int, int]):
    """Every element of each dim ``d`` repeated ``repeats[d]`` times in place (``[a, b]`` -> ``[a, a, b, b]``):
    nearest upsampling by integer factors, whatever the dims' sizes: a size-1 dim after each, broadcast to
    the factor, merged into it by one reshape."""
    split = [e for d, n in enumerate(x.shape) for e in ((n, 1) if d in repeats else (n,))]
    wide = [e for d, n in enumerate(x.shape) for e in ((n, repeats[d]) if d in repeats else (n,))]
    return x.reshape(*split).expand(*wide).reshape(*(n * repeats.get(d, 1) for d, n in enumerate(x.shape)))


@_opmath
def _upsample_taps(x, dim: int, k: int, mode: str):
    """Dim ``dim`` upsampled by the integer factor ``k`` in a linear or cubic mode with
    ``align_corners=False``: output ``k*q + j`` is a combination, whose weights depend on ``j`` alone, of
    the inputs ``q-p .. q+p`` (``p`` = 1, or 2 for cubic), read from the input padded by ``p`` copies of its
    edge elements (torch clamps the indices at the edges). The weights are the rows of the static
    resampling matrix away from the edges."""
    p = 2 if mode == "bicubic" else 1
    n0, q0 = 2 * p + 4, p + 2  # a length whose row q0 reads no clamped index
    m = _resample_matrix(n0, n0 * k, mode, False, 1.0 / k)[k * q0:k * q0 + k]  # (k, n0)
    w = m[:, q0 - p:q0 + p + 1].T  # (taps, k): all of each row's weight
    n = x.shape[dim]
    xp = pad_mode_dim(x, dim, p, p, "replicate", "interpolate")
    trailing = (1,) * (x.ndim - dim - 1)
    y = None
    for t in range(2 * p + 1):
        if not w[t].any():
            continue
        tap = xp._slice_dim(dim, t, n, 1).unsqueeze(dim + 1)  # input q + t - p at output (q, j)
        term = tap * x.graph.constant(w[t].reshape((k,) + trailing), x.dtype)
        y = term if y is None else y + term
    return y.reshape(*x.shape[:dim], n * k, *x.shape[dim + 1:])


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


def _shuffle_factor(name: str, what: str, r, input) -> int:  # noqa: A002
    """pixel_shuffle's and pixel_unshuffle's factor: a positive int (True reached reshape, 2.0 said "positive")."""
    if isinstance(r, bool) or not isinstance(r, numbers.Integral):
        raise op_error(TypeError, name, f"{what} must be an int, got {type(r).__name__} {r!r}", input)
    if r < 1:
        raise op_error(ValueError, name, f"{what} must be a positive int, got {r!r}", input)
    return int(r)


def pixel_shuffle(input, upscale_factor: int):  # noqa: A002
    """torch's ``F.pixel_shuffle``: (*, C*r^2, H, W) -> (*, C, H*r, W*r). Every dim may be symbolic, the
    channels a multiple of ``r**2`` (``4*C`` for r = 2).

    Args:
        input: a tensor of at least 3 dims. upscale_factor: r.
    """
    name = "pixel_shuffle"
    check_tensors(name, input=input)
    r = _shuffle_factor(name, "upscale_factor", upscale_factor, input)
    oc = exact_div(input.shape[-3], r * r) if input.ndim >= 3 else None
    if oc is None:
        raise op_error(ValueError, name, f"expected an input (*, C*{r * r}, H, W) (channels divisible by "
                       f"upscale_factor**2), got {shape_str(input.shape)}", input)
    *lead, _, h, w = input.shape
    k = len(lead)
    y = input.reshape(*lead, oc, r, r, h, w)
    y = y.permute(*range(k), k, k + 3, k + 1, k + 4, k + 2)  # (*, oc, h, r, w, r)
    return y.reshape(*lead, oc, h * r, w * r)


def pixel_unshuffle(input, downscale_factor: int):  # noqa: A002
    """torch's ``F.pixel_unshuffle``: (*, C, H*r, W*r) -> (*, C*r^2, H, W), the inverse of pixel_shuffle.
    Every dim may be symbolic, H and W multiples of ``r`` (``2*H`` for r = 2: pixel_shuffle's output;
    a bare ``H`` was refused).

    Args:
        input: a tensor of at least 3 dims. downscale_factor: r.
    """
    name = "pixel_unshuffle"
    check_tensors(name, input=input)
    r = _shuffle_factor(name, "downscale_factor", downscale_factor, input)
    hw = [exact_div(d, r) for d in input.shape[-2:]] if input.ndim >= 3 else [None]
    if None in hw:
        raise op_error(ValueError, name, f"expected an input (*, C, H, W) with H and W divisible by {r}, got "
                       f"{shape_str(input.shape)}", input)
    *lead, c, _, _ = input.shape
    (h, w), k = hw, len(lead)
    y = input.reshape(*lead, c, h, r, w, r)
    y = y.permute(*range(k), k, k + 2, k + 4, k + 1, k + 3)  # (*, c, r, r, h/r, w/r)
    return y.reshape(*lead, c * r * r, h, w)


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


_PAD_MODES = ("reflect", "replicate", "circular")


def pad(input, pad, mode: str = "constant", value: float | None = None):  # noqa: A002
    """torch's ``F.pad``: ``pad`` lists (left, right) amounts from the last dim backwards.

    Negative amounts crop, in every mode, as torch's: 'constant' crops the input then pads it;
    'reflect' and 'replicate' read the cropped positions of the input padded by the positive amounts
    (``(1, -2)`` of ``[0, 1, 2, 3, 4, 5]`` is ``[1, 0, 1, 2, 3]``), and 'circular' wraps around what the
    cropping keeps (``[3, 0, 1, 2, 3]``). The padded dims may be symbolic in every mode; torch's checks
    on their sizes (a reflect amount below the dim's size, a circular one at most the dim kept, a
    non-empty result) are then made when the program runs, before any work.

    Args:
        input: the tensor. pad: an even-length sequence of ints; negative amounts crop.
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
        if mode not in _PAD_MODES:
            raise op_error(ValueError, name, f"mode must be 'constant', 'reflect', 'replicate' or 'circular', got "
                           f"{mode!r}", input)
        if value is not None and value != 0:
            raise op_error(ValueError, name, f"padding mode {mode!r} does not take a value", input)
        if any(isinstance(v, bool) or not hasattr(v, "__index__") for v in pads):
            raise op_error(TypeError, name, f"pad {tuple(pads)} must be ints in mode {mode!r}", input)
        x = input
        for i in range(len(pads) // 2):
            lo, hi = int(pads[2 * i]), int(pads[2 * i + 1])
            if lo or hi:
                x = pad_mode_dim(x, x.ndim - 1 - i, lo, hi, mode, name)
        return x


