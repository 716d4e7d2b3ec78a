"""``F.grid_sample`` for 4-d and 5-d inputs, with torch's formulas: each output pixel (voxel) reads the
input at the (x, y[, z]) a grid gives in [-1, 1], through 'bilinear' (2 taps per spatial dim: 4, or
8 for a volume, torch's trilinear), 'nearest' (1) or 'bicubic' (16, torch's A = -0.75; 4-d only, as
torch's), with the padding modes 'zeros', 'border' and 'reflection'.

Each tap is a Gather of the flattened input at indices computed in the graph (masked to 0 where a
tap falls outside, for 'zeros'), times its weight: so the gradient reaches the input (the Gather's
ScatterAdd) and the grid (through the weights), as torch's."""

from __future__ import annotations

import itertools
import math

from luminal.core import dtype as dt
from luminal.core.errors import op_error, renamed
from luminal.core.symbolic import is_static, shape_str
from luminal.frontend.checks import check_tensors
from luminal.frontend.ops.core import cast
from luminal.frontend.ops.elementwise import (
    abs_,
    add,
    div,
    eq,
    floor,
    fmod,
    ge,
    logical_and,
    lt,
    mul,
    sub,
    where,
)
from luminal.frontend.ops.elementwise import round_ as round_half_even
from luminal.frontend.ops.indexing import gather
from luminal.frontend.tensor import GraphTensor

_MODES = ("bilinear", "nearest", "bicubic")
_PADDING = ("zeros", "border", "reflection")
_A = -0.75  # torch's cubic coefficient


def _reflect(c: GraphTensor, twice_low: int, twice_high: int) -> GraphTensor:
    """torch's ``reflect_coordinates``: ``c`` reflected into [low, high] (given doubled)."""
    if twice_low == twice_high:
        return mul(c, 0.0)
    low, span = twice_low / 2, (twice_high - twice_low) / 2
    c = abs_(sub(c, low))
    extra = fmod(c, span)
    flips = floor(div(c, span))
    return where(eq(fmod(flips, 2.0), 0), add(extra, low), add(sub(span, extra), low))


def _clip(c: GraphTensor, size: int) -> GraphTensor:
    """``c`` clipped to [0, size - 1] as torch's ``clip_coordinates``: a coordinate on a bound counts as
    clipped, so its gradient is 0 there (a clamp passes it at the bounds; an identity affine grid with
    align_corners=True puts every edge pixel exactly on one)."""
    return where(c <= 0, 0.0, where(c >= size - 1, float(size - 1), c))


def _pad_coord(c: GraphTensor, size: int, padding_mode: str, align_corners: bool) -> GraphTensor:
    """torch's ``compute_coordinates``: ``c`` (in pixels) clipped or reflected for the padding mode."""
    if padding_mode == "border":
        return _clip(c, size)
    if padding_mode == "reflection":
        c = _reflect(c, 0, 2 * (size - 1)) if align_corners else _reflect(c, -1, 2 * size - 1)
        return _clip(c, size)
    return c


def _unnormalize(g: GraphTensor, size: int, align_corners: bool) -> GraphTensor:
    """[-1, 1] to pixels: the corner pixels' centres (``align_corners``) or their outer edges."""
    if align_corners:
        return mul(div(add(g, 1), 2), size - 1)
    return div(sub(mul(add(g, 1), size), 1), 2)


class _Taps:
    """Reads of the input (N, C, *spatial) at integer positions, one (N, *out) index tensor per spatial
    dim (in the input's order: (y, x) or (z, y, x)); 0 outside."""

    def __init__(self, x: GraphTensor, out):
        self.n, self.c, self.sizes = x.shape[0], x.shape[1], tuple(x.shape[2:])
        self.out = tuple(out)
        self.flat = x.reshape(self.n, self.c, math.prod(self.sizes))
        self.zero = x.graph.constant(0, x.dtype)

    def __call__(self, *pos: GraphTensor) -> GraphTensor:
        valid, lin = None, None
        for i, size in zip(pos, self.sizes):
            inside = logical_and(ge(i, 0), lt(i, size))
            valid = inside if valid is None else logical_and(valid, inside)
            lin = i if lin is None else add(mul(lin, size), i)
        lin = where(valid, lin, 0)
        n_out = math.prod(self.out)
        idx = lin.reshape(self.n, 1, n_out).expand(self.n, self.c, n_out)
        v = gather(self.flat, 2, idx).reshape(self.n, self.c, *self.out)
        return where(valid.unsqueeze(1), v, self.zero)


def _int(t: GraphTensor) -> GraphTensor:
    return cast(t, dt.int32)


def _linear(taps: _Taps, coords) -> GraphTensor:
    """Bilinear (trilinear for a volume) interpolation at the pixel coordinates ``coords`` (one per
    spatial dim, the input's order): the 2 taps of each dim around its coordinate, weighted as torch's
    ``(high - c)`` and ``(c - low)``, every combination of them summed."""
    per_dim = []
    for c in coords:
        low = floor(c)
        high = add(low, 1)
        per_dim.append(((low, sub(high, c)), (high, sub(c, low))))
    out = None
    for corner in itertools.product(*per_dim):
        weight = corner[0][1]
        for _, w in corner[1:]:
            weight = mul(weight, w)
        term = mul(taps(*(_int(i) for i, _ in corner)), weight.unsqueeze(1))
        out = term if out is None else add(out, term)
    return out


def _cubic(t: GraphTensor):
    """The 4 weights of the taps ``floor - 1 .. floor + 2`` at fraction ``t`` (torch's
    ``get_cubic_upsample_coefficients``)."""

    def near(x):
        return add(mul(mul(sub(mul(x, _A + 2), _A + 3), x), x), 1)

    def far(x):
        return sub(mul(add(mul(sub(mul(x, _A), 5 * _A), x), 8 * _A), x), 4 * _A)

    return [far(add(t, 1)), near(t), near(sub(1, t)), far(sub(2, t))]


def _bicubic(taps: _Taps, ix, iy, padding_mode: str, align_corners: bool) -> GraphTensor:
    x0, y0 = floor(ix), floor(iy)
    wx, wy = _cubic(sub(ix, x0)), _cubic(sub(iy, y0))
    out = None
    for j in range(4):
        # each tap position goes through the padding mode on its own, as torch's get_value_bounded
        yj = _int(_pad_coord(add(y0, j - 1), taps.sizes[0], padding_mode, align_corners))
        for i in range(4):
            xi = _int(_pad_coord(add(x0, i - 1), taps.sizes[1], padding_mode, align_corners))
            term = mul(taps(yj, xi), mul(wx[i], wy[j]).unsqueeze(1))
            out = term if out is None else add(out, term)
    return out


def grid_sample(input, grid, mode: str = "bilinear", padding_mode: str = "zeros",  # noqa: A002
                align_corners: bool | None = None) -> GraphTensor:
    """torch's ``F.grid_sample``: ``out[n, c, i, j]`` is ``input[n, c]`` read at ``grid[n, i, j] = (x, y)``
    (a volume: ``out[n, c, k, i, j]`` at ``grid[n, k, i, j] = (x, y, z)``), coordinates in [-1, 1]
    (-1 the left/top/front edge), interpolated.

    Args:
        input: a float tensor (N, C, H, W) or (N, C, D, H, W) with static sizes past N.
        grid: a tensor (N, Ho, Wo, 2) or (N, Do, Ho, Wo, 3) of the input's dtype, with static sizes
            between N and the coordinates.
        mode: 'bilinear' (trilinear for a volume), 'nearest' (rounding half to even) or 'bicubic'
            (4-d only, as torch's).
        padding_mode: 'zeros' (0 outside), 'border' (the edge) or 'reflection' (mirrored at the edges).
        align_corners: -1 and 1 are the corner pixels' centres (True) or their outer edges (False,
            torch's default).
    """
    op = "grid_sample"
    check_tensors(op, input=input, grid=grid)
    x = input
    if x.ndim not in (4, 5) or not all(is_static(n) for n in x.shape[1:]):
        raise op_error(ValueError, op, f"expected an input (N, C, H, W) or (N, C, D, H, W) with static sizes past N, "
                       f"got {shape_str(x.shape)}", x, grid)
    nd = x.ndim - 2
    want = "(N, Ho, Wo, 2)" if nd == 2 else "(N, Do, Ho, Wo, 3)"
    if grid.ndim != x.ndim or grid.shape[-1] != nd or grid.shape[0] != x.shape[0] or \
            not all(is_static(n) for n in grid.shape[1:-1]):
        raise op_error(ValueError, op, f"expected a grid {want} with the input's N and static sizes for the "
                       f"{x.ndim}-d input {shape_str(x.shape)}, got {shape_str(grid.shape)}", x, grid)
    if not x.dtype.is_float or grid.dtype is not x.dtype:
        raise op_error(TypeError, op, f"needs float input and grid of one dtype, got {x.dtype.name} and "
                       f"{grid.dtype.name}", x, grid)
    if mode not in _MODES:
        raise op_error(ValueError, op, f"mode must be one of {_MODES}, got {mode!r}", x)
    if mode == "bicubic" and nd == 3:
        raise op_error(ValueError, op, f"mode 'bicubic' needs a 4-d input (as torch's), got the 5-d "
                       f"{shape_str(x.shape)}", x)
    if padding_mode not in _PADDING:
        raise op_error(ValueError, op, f"padding_mode must be one of {_PADDING}, got {padding_mode!r}", x)
    ac = bool(align_corners)
    sizes = x.shape[2:]
    with renamed(op):
        taps = _Taps(x, grid.shape[1:-1])
        # the grid's last dim is (x, y[, z]): the spatial dims from the last one back
        coords = [_unnormalize(grid[..., nd - 1 - d], n, ac) for d, n in enumerate(sizes)]
        if mode == "bicubic":
            return _bicubic(taps, coords[1], coords[0], padding_mode, ac)
        coords = [_pad_coord(c, n, padding_mode, ac) for c, n in zip(coords, sizes)]
        if mode == "nearest":
            return taps(*(_int(round_half_even(c)) for c in coords))
        return _linear(taps, coords)
