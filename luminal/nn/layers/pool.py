"""Pooling: pad (with -inf for max), ``unfold`` windows on each spatial dim (views), then amax / mean.

Output sizes, ``ceil_mode`` and AvgPool's divisors (``count_include_pad``) follow torch's formulas.
MaxPool with ``return_indices=True`` also returns torch's indices (int32): each maximum's flat
position within its spatial plane. Max pooling's gradient is torch's: all of a window's adjoint goes
to the element torch chooses (the first maximum in window order, the last NaN, never padding), not
shared among ties as a max's; the adaptive layers (``pool_nd.py``) use the same rule.
Adaptive average pooling is a matmul with a constant averaging matrix per spatial dim, and a mean over
the dims it pools to size 1 (global pooling: those dims may be symbolic).
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from luminal.core.errors import check_int
from luminal.core.symbolic import is_static, prod
from luminal.frontend.ops.core import prim
from luminal.frontend.ops.elementwise import _opmath, isnan, logical_and, logical_not, logical_or, where
from luminal.nn.layers._util import bad_input, check_float, layer_forward, layer_name, ntuple
from luminal.nn.module import Module


def _out_size(n, k_eff: int, s: int, p: int, ceil_mode: bool):
    """torch's pooling_output_shape: with ceil_mode the last window must start inside the input or
    its left padding."""
    if not ceil_mode:
        return (n + 2 * p - k_eff) // s + 1
    out = -(-(n + 2 * p - k_eff) // s) + 1
    return out - 1 if (out - 1) * s >= n + p else out


def _tiles(x, kernel, stride, padding, dilation) -> bool:
    """Whether the windows tile ``x``'s spatial dims exactly (each element in one window)."""
    spatial = x.shape[x.ndim - len(kernel):]
    return tuple(stride) == tuple(kernel) and set(dilation) == {1} and not any(padding) and \
        all(is_static(n) and n % k == 0 for n, k in zip(spatial, kernel))


def _windows(x, kernel, stride, padding, dilation, ceil_mode, fill, name):
    """(..., *spatial) -> (windows, out sizes, pooled axes). Windows that tile the input exactly
    (stride = kernel, no padding or dilation) are a reshape, ``(..., o1, k1, o2, k2)``, pooled over the
    k axes: every later elementwise pass (the max's gradient) then walks memory in order. Otherwise
    ``unfold`` views, ``(..., *out, *kernel)``, pooled over the last ``len(kernel)`` axes."""
    nd = len(kernel)
    spatial = x.shape[x.ndim - nd:]
    first = x.ndim - nd
    if _tiles(x, kernel, stride, padding, dilation):
        outs = tuple(n // k for n, k in zip(spatial, kernel))
        w = x.reshape(*x.shape[:first], *(d for o, k in zip(outs, kernel) for d in (o, k)))
        return w, outs, tuple(first + 2 * i + 1 for i in range(nd))
    eff = tuple(d * (k - 1) + 1 for k, d in zip(kernel, dilation))
    if ceil_mode and not all(is_static(n) for n in spatial):
        raise bad_input(name, "with static spatial dims for ceil_mode=True", x)
    outs = tuple(_out_size(n, e, s, p, ceil_mode) for n, e, s, p in zip(spatial, eff, stride, padding))
    if any(is_static(o) and o <= 0 for o in outs):
        raise bad_input(name, f"with spatial dims large enough for the (dilated) kernel {eff}", x)
    pads = []
    for n, e, s, p, o in zip(spatial, eff, stride, padding, outs):
        extra = max(0, (o - 1) * s + e - (n + 2 * p)) if ceil_mode else 0
        pads.append((p, p + extra))
    if any(hi for _, hi in pads):
        x = x.pad([v for lo, hi in reversed(pads) for v in (lo, hi)], fill)
    for i in range(nd):
        x = x.unfold(first + i, eff[i], stride[i])
    for i, (k, d) in enumerate(zip(kernel, dilation)):  # every d-th element of each dilated window
        if d > 1:
            x = x._slice_dim(x.ndim - nd + i, 0, k, d)  # not x[..., ::d]: that makes a symbolic batch max(0, B)
    return x, outs, tuple(range(x.ndim - nd, x.ndim))


MAX_TAPS = 16
"""Windows of at most this many elements are pooled as an elementwise chain over their positions
(``_first_maximum``), which also finds each window's chosen position; larger ones by a max over one
window axis at a time, which keeps the graph small, their chosen position found by reductions only
when a gradient or the indices ask for it (``_first_max_position``). Either way the gradient is
``_to_chosen``'s, torch's."""


def _taps(w, axes) -> list:
    """The windows ``w`` (pooled over ``axes``) as one view per window position, in window order
    (row-major over ``axes``): each is the windows' element at that position, of the output's
    shape."""
    out = []
    for at in itertools.product(*(range(w.shape[a]) for a in axes)):
        t = w
        for a, i in sorted(zip(axes, at), reverse=True):
            t = t._slice_dim(a, i, 1, 1).squeeze(a)
        out.append(t)
    return out


def _first_maximum(taps, valid=None):
    """``(maximum, position)`` over ``taps`` as torch's max pooling takes them: a later element
    replaces the maximum only if greater or NaN, so the first maximum of a window in window order
    (the last NaN) is the one chosen. ``position`` (int32) is its index in ``taps``, None for a
    single tap. ``valid``: per tap, whether it is an element of the input, not padding (None: all
    are); padding is never chosen over an element, so a window of -inf elements chooses its first
    one, as torch does.

    Why an elementwise chain, not a reduction: the window's axes are not adjacent in memory (a 2x2
    window's are the row and the column), so one reduction over them would first copy the input,
    and small windows are one kernel over the output this way. The gradient is ``_to_chosen``'s."""
    best, at = taps[0], None
    have = None if valid is None else valid[0]  # whether ``best`` is an element yet
    for i, t in enumerate(taps[1:], 1):
        later = logical_or(t > best, isnan(t))
        if valid is not None:
            later = logical_and(valid[i], logical_or(later, logical_not(have)))
            have = logical_or(have, valid[i])
        best = where(later, t, best)
        at = where(later, i, 0 if at is None else at)
    return best, at


_LATE = 1 << 30
"""``_first_max_position``'s scores: a NaN at window position j scores ``_LATE + j``, a maximum
``_LATE - 1 - j``, so one max over the window finds the last NaN, or else the first maximum (int32,
windows of up to 2**30 elements; no window size in the scores, which may be symbolic)."""


def _window_index(w, axes):
    """int32 of ``w``'s shape: each element's position in its window (row-major over ``axes``)."""
    here = tuple(w.shape[a] if a in axes else 1 for a in range(w.ndim))
    return w.graph.arange(prod(here)).reshape(here).expand(*w.shape)


def _per_window(t, w, axes):
    """``t`` (one value per window: ``w``'s shape less ``axes``) broadcast over each window of ``w``."""
    kept = tuple(1 if a in axes else n for a, n in enumerate(w.shape))
    return t.reshape(*kept).expand(*w.shape)


def _reduce_max(t, axes, merged: bool):
    """The max over ``axes``: one reduction over them (``merged``: they are adjacent, a view) or one
    axis at a time from the last (windows whose axes are not adjacent in memory: merging them
    would copy the windows)."""
    if merged:
        return t.amax(axes)
    for a in sorted(axes, reverse=True):
        t = t.amax(a)
    return t


def _first_max_position(w, axes, best, valid=None, merged: bool = False):
    """The position (int32, row-major over ``axes``) that ``_first_maximum`` chooses in each window of
    ``w``, whose maxima are ``best``, by one max over scores: the last NaN, else the first element
    equal to the maximum; ``valid`` (of ``w``'s shape, None: every element is one of the input)
    keeps padding out, which reads -inf and would otherwise tie a window of -inf elements. A
    reduction, not ``_first_maximum``'s chain, for windows too large for one (the graph grows with
    the window), and not ``argmax``, which takes the first NaN, not torch's pooling's last."""
    j = _window_index(w, axes)
    score = where(isnan(w), j + _LATE, where(w == _per_window(best, w, axes), (_LATE - 1) - j, -1))
    if valid is not None:
        score = where(valid, score, -1)
    score = _reduce_max(score, axes, merged)
    return where(score >= _LATE, score - _LATE, (_LATE - 1) - score)


def _to_chosen(best, w, axes, at):
    """``best`` (the maxima of ``w``'s windows over ``axes``, a whole node) with torch's gradient: each
    window's adjoint goes to its chosen element alone (``at``: the chosen positions, or a function
    ``at(best, w)`` making them, so only a gradient builds them), 0 to the others, ties and NaNs
    included; a max's own gradient shares a tie and turns a window with a NaN all NaN. The rule's
    gradient has ``w``'s shape: autograd sends it back through ``w``'s view onto the input, summing
    windows that overlap (one elementwise pass where they tile the input: ``w`` is then a reshape).

    Small overlapping windows (``_first_maximum``'s chain) do without: differentiating the chain
    sends each window's adjoint to the element it chose already, the same gradient, and is faster
    there (a MaxPool2d(3, 2) forward and backward of an (8, 64, 56, 56) input on the cpu backend took
    8.7 ms where this rule took 10.9 to 16 ms:
    the windows' gradient is a tensor larger than the input, cut into a piece per tap)."""

    def rule(out, adjoint, w):
        chosen = _window_index(w, axes) == _per_window(at(out, w) if callable(at) else at, w, axes)
        return [where(chosen, _per_window(adjoint, w, axes), 0.0)]

    return best.graph.custom_vjp(best, [w], rule)


def _window_max(w, axes, valid=None, merged: bool = False, copy: bool = False):
    """The maxima of ``w``'s windows over ``axes`` (NaN propagates), with torch's gradient
    (``_to_chosen``): a reduction forward, the chosen positions only in the backward pass. ``copy``:
    the rule goes on a copy of the reduction, where the reduction may be a plain ``amax`` that the
    graph shares with other uses (it builds each expression once), whose gradient stays a max's."""
    best = _reduce_max(w, axes, merged)
    if copy:
        best = prim("Copy", best)
    return _to_chosen(best, w, axes, lambda out, w: _first_max_position(w, axes, out, valid, merged))


class _PoolNd(Module):
    _nd = 0

    def _check(self, x):
        name = layer_name(self)
        check_float(name, x)
        if x.ndim not in (self._nd + 1, self._nd + 2):
            spatial = {1: "L", 2: "H, W"}[self._nd]
            raise bad_input(name, f"(N, C, {spatial}) or (C, {spatial})", x)
        self._check_nonempty(name, x)
        return name

    def _check_nonempty(self, name, x) -> None:
        """torch's condition: only the batch dim may be empty (an empty window has no max or mean)."""
        if any(is_static(n) and n == 0 for n in x.shape[x.ndim - self._nd - 1:]):
            raise bad_input(name, "with nonzero channel and spatial dims (only the batch may be empty)", x)

    def _half_kernel_check(self) -> None:
        """torch's limit, for max pooling too: half the kernel size, whatever the dilation."""
        if any(p > k / 2 for p, k in zip(self.padding, self.kernel_size)):
            raise ValueError(f"{type(self).__name__}: pad should be at most half of kernel size, "
                             f"got padding={self.padding}, kernel_size={self.kernel_size}")


class _MaxPoolNd(_PoolNd):
    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices: bool = False,
                 ceil_mode: bool = False):
        super().__init__()
        nd, name = self._nd, type(self).__name__
        self.kernel_size = ntuple(kernel_size, nd, f"{name}: kernel_size", 1)
        self.stride = ntuple(stride if stride is not None else kernel_size, nd, f"{name}: stride", 1)
        self.padding = ntuple(padding, nd, f"{name}: padding", 0)
        self.dilation = ntuple(dilation, nd, f"{name}: dilation", 1)
        self.return_indices, self.ceil_mode = return_indices, ceil_mode
        self._half_kernel_check()

    @layer_forward
    def forward(self, x):
        name = self._check(x)
        w, _, axes = _windows(x, self.kernel_size, self.stride, self.padding, self.dilation, self.ceil_mode,
                              -math.inf, name)
        padded = any(self.padding) or self.ceil_mode
        if prod(w.shape[a] for a in axes) > MAX_TAPS:  # a reduction (see MAX_TAPS)
            pw, paxes = self._positions(x, name) if padded or self.return_indices else (None, None)
            valid = (pw >= 0).expand(*w.shape) if padded else None
            best = _window_max(w, axes, valid)
            if not self.return_indices:
                return best
            return best, self._indices(_first_max_position(w, axes, best, valid), pw, paxes)
        positions = _taps(*self._positions(x, name)) if padded or self.return_indices else None
        best, won = _first_maximum(_taps(w, axes), [p >= 0 for p in positions] if padded else None)
        if won is not None and _tiles(x, self.kernel_size, self.stride, self.padding, self.dilation):
            best = _to_chosen(best, w, axes, won)  # else the chain's own gradient (see _to_chosen)
        if not self.return_indices:
            return best
        chosen = positions[0]  # torch's indices: the chosen element's flat position in its plane
        for i, p in enumerate(positions[1:], 1):
            chosen = where(won == i, p, chosen)
        return best, chosen

    def _positions(self, x, name):
        """``(windows, pooled axes)`` of the positions ``arange(H * W)`` of ``x``'s spatial plane,
        windowed as ``x`` is (padding reads -1)."""
        spatial = x.shape[x.ndim - self._nd:]
        pos = x.graph.arange(prod(spatial)).reshape(spatial)
        pw, _, paxes = _windows(pos, self.kernel_size, self.stride, self.padding, self.dilation, self.ceil_mode,
                                -1, name)
        return pw, paxes

    @staticmethod
    def _indices(at, pw, paxes):
        """torch's indices for windows past ``MAX_TAPS``: the flat position in its (H * W) plane of
        each window's chosen element (``at``, its position in the window, row-major), read from the
        windowed positions ``pw`` (pooled over ``paxes``)."""
        kept = [i for i in range(pw.ndim) if i not in paxes]
        flat = pw.permute(*kept, *paxes).reshape(*(pw.shape[i] for i in kept), -1)
        flat = flat.expand(*at.shape, flat.shape[-1])
        return flat.gather(-1, at.unsqueeze(-1)).squeeze(-1)

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class _AvgPoolNd(_PoolNd):
    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode: bool = False, count_include_pad: bool = True,
                 divisor_override: int | None = None):
        super().__init__()
        nd, name = self._nd, type(self).__name__
        self.kernel_size = ntuple(kernel_size, nd, f"{name}: kernel_size", 1)
        self.stride = ntuple(stride if stride is not None else kernel_size, nd, f"{name}: stride", 1)
        self.padding = ntuple(padding, nd, f"{name}: padding", 0)
        self.ceil_mode, self.count_include_pad = ceil_mode, count_include_pad
        # an int, as torch's (it refuses a float)
        self.divisor_override = None if divisor_override is None else check_int(name, "divisor_override",
                                                                                 divisor_override, 1)
        self._half_kernel_check()

    @layer_forward
    @_opmath
    def forward(self, x):
        name = self._check(x)
        nd = self._nd
        w, outs, axes = _windows(x, self.kernel_size, self.stride, self.padding, (1,) * nd, self.ceil_mode, 0.0,
                                 name)
        total = w.sum(axes)
        if self.divisor_override is not None:
            return total / float(self.divisor_override)
        clipped = self.ceil_mode and any(
            (o - 1) * s + k > n + 2 * p
            for o, s, k, n, p in zip(outs, self.stride, self.kernel_size, x.shape[x.ndim - nd:], self.padding))
        if not clipped and (self.count_include_pad or not any(self.padding)):
            return total / float(np.prod(self.kernel_size))
        return total / self._divisor(x, outs).to(x.dtype)

    def _divisor(self, x, outs):
        """torch's per-window divisor: the window clipped to the padded input (count_include_pad) or
        to the input itself, as the product of one int vector per spatial dim."""
        nd, g = self._nd, x.graph
        div = None
        for i, (n, o, s, k, p) in enumerate(zip(x.shape[x.ndim - nd:], outs, self.stride, self.kernel_size,
                                                 self.padding)):
            size = n if is_static(n) else g.constant(n)
            start = g.arange(o) * s - p
            end = (start + k).minimum(size + p)
            if not self.count_include_pad:
                start, end = start.maximum(0), end.minimum(size)
            cnt = (end - start).reshape((o,) + (1,) * (nd - 1 - i))
            div = cnt if div is None else div * cnt
        return div

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"ceil_mode={self.ceil_mode}, count_include_pad={self.count_include_pad}")


class MaxPool1d(_MaxPoolNd):
    """torch's ``nn.MaxPool1d(kernel_size, stride=None, padding=0, dilation=1, return_indices=False,
    ceil_mode=False)`` over (N, C, L) or (C, L): the largest value of each window (padding reads -inf).

    Args:
        kernel_size, stride (default kernel_size), padding, dilation, ceil_mode: as torch's.
        return_indices: also return the int32 flat index of each maximum within its input plane.
    """

    _nd = 1


class MaxPool2d(_MaxPoolNd):
    """torch's ``nn.MaxPool2d(kernel_size, stride=None, padding=0, dilation=1, return_indices=False,
    ceil_mode=False)`` over (N, C, H, W) or (C, H, W): the largest value of each window (padding reads -inf).

    Args:
        kernel_size, stride (default kernel_size), padding, dilation, ceil_mode: as torch's (an int or
            one value per spatial dim).
        return_indices: also return the int32 flat index of each maximum within its input plane.
    """

    _nd = 2


class AvgPool1d(_AvgPoolNd):
    """torch's ``nn.AvgPool1d(kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True)``
    over (N, C, L) or (C, L): the mean of each window.

    Args:
        kernel_size, stride (default kernel_size), padding, ceil_mode: as torch's.
        count_include_pad: whether the zero padding counts in a window's divisor (default True).
    """

    _nd = 1

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode: bool = False, count_include_pad: bool = True):
        super().__init__(kernel_size, stride, padding, ceil_mode, count_include_pad)


class AvgPool2d(_AvgPoolNd):
    """torch's ``nn.AvgPool2d(kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
    divisor_override=None)`` over (N, C, H, W) or (C, H, W): the mean of each window.

    Args:
        kernel_size, stride (default kernel_size), padding, ceil_mode: as torch's (an int or one
            value per spatial dim).
        count_include_pad: whether the zero padding counts in a window's divisor (default True).
        divisor_override: divide every window's sum by this instead.
    """

    _nd = 2


def _adaptive_whole_dims(name: str, x, output_size) -> tuple[int, ...]:
    """The dims of ``x`` an adaptive pooling to ``output_size`` (one per spatial dim, None keeps it)
    pools to size 1 (a reduction over the whole dim; a static dim of size 1 is kept as it is). A
    symbolic dim pools only to 1 (or is kept): the windows of another output size depend on its size."""
    nd = len(output_size)
    spatial = x.shape[x.ndim - nd:]
    for n, o in zip(spatial, output_size):
        if not is_static(n) and o not in (None, 1):
            raise bad_input(name, f"with static spatial dims for an output size {o} (over a symbolic dim "
                            "only the output size 1, global pooling, or None is supported)", x)
    return tuple(x.ndim - nd + i for i, (n, o) in enumerate(zip(spatial, output_size))
                 if o == 1 and not (is_static(n) and n == 1))


def _adaptive_matrix(n: int, out: int) -> np.ndarray:
    """(out, n) averaging weights over torch's adaptive windows [floor(i*n/out), ceil((i+1)*n/out))."""
    m = np.zeros((out, n))
    for i in range(out):
        lo, hi = (i * n) // out, -(-((i + 1) * n) // out)
        m[i, lo:hi] = 1.0 / (hi - lo)
    return m


class _AdaptiveAvgPoolNd(_PoolNd):
    def __init__(self, output_size):
        super().__init__()
        sizes = output_size if isinstance(output_size, (tuple, list)) else (output_size,) * self._nd
        if len(sizes) != self._nd:
            raise ValueError(f"{type(self).__name__}: output_size must be an int or {self._nd} values")
        self.output_size = tuple(s if s is None else check_int(type(self).__name__, "output_size", s, 1) for s in sizes)

    def _check_nonempty(self, name, x) -> None:
        """torch's condition for adaptive average pooling: no empty spatial dim pooled to a size other than
        1 (its windows would be empty; global pooling of an empty dim is a mean, NaN, as torch's)."""
        spatial = x.shape[x.ndim - self._nd:]
        if any(is_static(n) and n == 0 and o not in (1, None) for n, o in zip(spatial, self.output_size)):
            raise bad_input(name, f"with nonzero spatial dims for an output size {self.output_size}", x)

    @layer_forward
    def forward(self, x):
        name = self._check(x)
        spatial = x.shape[x.ndim - self._nd:]
        whole = _adaptive_whole_dims(name, x, self.output_size)
        if whole:  # output size 1: the mean of the whole dim (global pooling), whatever its size
            x = x.mean(whole, keepdim=True)
        for i, (n, o) in enumerate(zip(spatial, self.output_size)):
            dim = x.ndim - self._nd + i
            if o is None or o == n or dim in whole:
                continue
            m = x.graph.constant(_adaptive_matrix(n, o), x.dtype)  # (o, n)
            x = (x.transpose(dim, -1) @ m.T).transpose(dim, -1)
        return x

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class AdaptiveAvgPool1d(_AdaptiveAvgPoolNd):
    """torch's ``nn.AdaptiveAvgPool1d(output_size)`` over (N, C, L) or (C, L): the mean over windows
    ``[floor(i * L / out), ceil((i + 1) * L / out))``, so the output has ``output_size`` positions.

    Args:
        output_size: the output length (None keeps the input's).
    """

    _nd = 1


class AdaptiveAvgPool2d(_AdaptiveAvgPoolNd):
    """torch's ``nn.AdaptiveAvgPool2d(output_size)`` over (N, C, H, W) or (C, H, W): the mean over
    windows ``[floor(i * n / out), ceil((i + 1) * n / out))`` per spatial dim.

    Args:
        output_size: an int or ``(H_out, W_out)``; a None entry keeps the input's size.
    """

    _nd = 2
