"""``F.grid_sample`` for 4-d inputs, with torch's formulas: each output pixel reads the input at the
(x, y) a grid gives in [-1, 1], through 'bilinear' (4 taps), 'nearest' (1) or 'bicubic' (16, torch's
A = -0.75) interpolation, with the padding modes 'zeros', 'border' and 'reflection'.

Each tap is a Gather of the flattened input at indices computed in the graph (masked to 0 where a
tap falls outside, for 'zeros'), times its weight: so the gradient reaches the input (the Gather's
ScatterAdd) and the grid (through the weights), as torch's."""

from __future__ import annotations

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
    """Reads of the input (N, C, H, W) at integer pixel positions (N, Ho, Wo); 0 outside."""

    def __init__(self, x: GraphTensor, out_hw):
        self.n, self.c, self.h, self.w = x.shape
        self.out_hw = tuple(out_hw)
        self.flat = x.reshape(self.n, self.c, self.h * self.w)
        self.zero = x.graph.constant(0, x.dtype)

    def __call__(self, yi: GraphTensor, xi: GraphTensor) -> GraphTensor:
        valid = logical_and(logical_and(ge(xi, 0), lt(xi, self.w)), logical_and(ge(yi, 0), lt(yi, self.h)))
        lin = where(valid, add(mul(yi, self.w), xi), 0)
        n_out = self.out_hw[0] * self.out_hw[1]
        idx = lin.reshape(self.n, 1, n_out).expand(self.n, self.c, n_out)
        v = gather(self.flat, 2, idx).reshape(self.n, self.c, *self.out_hw)
        return where(valid.unsqueeze(1), v, self.zero)


def _int(t: GraphTensor) -> GraphTensor:
    return cast(t, dt.int32)


def _bilinear(taps: _Taps, ix: GraphTensor, iy: GraphTensor) -> GraphTensor:
    x0, y0 = floor(ix), floor(iy)
    x1, y1 = add(x0, 1), add(y0, 1)
    wx0, wx1 = sub(x1, ix), sub(ix, x0)  # torch's weights: (ix_se - ix), (ix - ix_nw)
    wy0, wy1 = sub(y1, iy), sub(iy, y0)
    out = None
    for yy, wy in ((y0, wy0), (y1, wy1)):
        for xx, wx in ((x0, wx0), (x1, wx1)):
            term = mul(taps(_int(yy), _int(xx)), mul(wx, wy).unsqueeze(1))
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
        yj = _int(_pad_coord(add(y0, j - 1), taps.h, padding_mode, align_corners))
        for i in range(4):
            xi = _int(_pad_coord(add(x0, i - 1), taps.w, padding_mode, align_corners))
            term = mul(taps(yj, xi), mul(wx[i], wy[j]).unsqueeze(1))
            out = term if out is None else add(out, term)
    return out


def grid_sample(input, grid, mode: str = "bilinear", padding_mode: str = "zeros",  # noqa: A002
                align_corners: bool | None = None) -> GraphTensor:
    """torch's ``F.grid_sample`` for 4-d inputs: ``out[n, c, i, j]`` is ``input[n, c]`` read at
    ``grid[n, i, j] = (x, y)``, coordinates in [-1, 1] (-1 the left/top edge), interpolated.

    Args:
        input: a float tensor (N, C, H, W) with static C, H and W.
        grid: a tensor (N, Ho, Wo, 2) of the input's dtype, with static Ho and Wo.
        mode: 'bilinear', 'nearest' (rounding half to even) or 'bicubic'.
        padding_mode: 'zeros' (0 outside), 'border' (the edge) or 'reflection' (mirrored at the edges).
        align_corners: -1 and 1 are the corner pixels' centres (True) or their outer edges (False,
            torch's default).
    """
    op = "grid_sample"
    check_tensors(op, input=input, grid=grid)
    x = input
    if x.ndim != 4 or not all(is_static(n) for n in x.shape[1:]):
        raise op_error(ValueError, op, f"expected an input (N, C, H, W) with static C, H, W, got {shape_str(x.shape)}",
                       x, grid)
    if grid.ndim != 4 or grid.shape[-1] != 2 or grid.shape[0] != x.shape[0] or \
            not all(is_static(n) for n in grid.shape[1:3]):
        raise op_error(ValueError, op, f"expected a grid (N, Ho, Wo, 2) with the input's N and static Ho, Wo, got "
                       f"{shape_str(grid.shape)}", x, grid)
    if not x.dtype.is_float or grid.dtype is not x.dtype:
        raise op_error(TypeError, op, f"needs float input and grid of one dtype, got {x.dtype.name} and "
                       f"{grid.dtype.name}", x, grid)
    if mode not in _MODES:
        raise op_error(ValueError, op, f"mode must be one of {_MODES}, got {mode!r}", x)
    if padding_mode not in _PADDING:
        raise op_error(ValueError, op, f"padding_mode must be one of {_PADDING}, got {padding_mode!r}", x)
    ac = bool(align_corners)
    h, w = x.shape[2], x.shape[3]
    with renamed(op):
        taps = _Taps(x, grid.shape[1:3])
        gx, gy = grid[..., 0], grid[..., 1]
        if mode == "bicubic":
            return _bicubic(taps, _unnormalize(gx, w, ac), _unnormalize(gy, h, ac), padding_mode, ac)
        ix = _pad_coord(_unnormalize(gx, w, ac), w, padding_mode, ac)
        iy = _pad_coord(_unnormalize(gy, h, ac), h, padding_mode, ac)
        if mode == "nearest":
            return taps(_int(round_half_even(iy)), _int(round_half_even(ix)))
        return _bilinear(taps, ix, iy)
