"""Pooling beyond ``pool.py``'s layers: the 3-d layers (MaxPool3d, AvgPool3d, AdaptiveAvgPool3d, built on
pool.py's machinery), adaptive max pooling, and the functional forms (``F.max_pool2d``, ...) with torch's
signatures. The functional forms run the layers, so they share one implementation and its checks."""

from __future__ import annotations

from luminal.core.errors import check_int, renamed
from luminal.core.symbolic import prod
from luminal.frontend.checks import check_tensors
from luminal.frontend.ops import cat
from luminal.nn.layers._util import bad_input, check_float, layer_forward, layer_name
from luminal.nn.layers.pool import (
    AdaptiveAvgPool1d,
    AdaptiveAvgPool2d,
    AvgPool1d,
    AvgPool2d,
    MaxPool1d,
    MaxPool2d,
    _adaptive_whole_dims,
    _AdaptiveAvgPoolNd,
    _AvgPoolNd,
    _first_max_position,
    _MaxPoolNd,
    _PoolNd,
    _window_max,
)


class _Pool3dCheck:
    _nd = 3

    def _check(self, x):
        name = layer_name(self)
        check_float(name, x)
        if x.ndim not in (4, 5):
            raise bad_input(name, "(N, C, D, H, W) or (C, D, H, W)", x)
        self._check_nonempty(name, x)
        return name


class MaxPool3d(_Pool3dCheck, _MaxPoolNd):
    """torch's ``nn.MaxPool3d(kernel_size, stride=None, padding=0, dilation=1, return_indices=False,
    ceil_mode=False)`` over (N, C, D, H, W) or (C, D, H, W).

    Args:
        kernel_size, stride (default kernel_size), padding, dilation, ceil_mode: as torch's.
        return_indices: as pool.py's 2-d layer supports it.
    """


class AvgPool3d(_Pool3dCheck, _AvgPoolNd):
    """torch's ``nn.AvgPool3d(kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
    divisor_override=None)`` over (N, C, D, H, W) or (C, D, H, W).

    Args:
        kernel_size, stride (default kernel_size), padding: as torch's.
        ceil_mode, count_include_pad, divisor_override: as torch's.
    """


def _distinct_max(t, axes):
    """The max of ``t`` over the adjacent ``axes`` with torch's pooling gradient (``_window_max``), on a
    copy of the reduction: the graph builds each expression once, so a ``t.amax(axes)`` elsewhere in the
    graph is the same node, whose gradient (a max's, sharing ties) must stay its own."""
    return _window_max(t, axes, merged=True, copy=True)


def _adaptive_windows(n: int, out: int):
    """torch's adaptive windows [floor(i*n/out), ceil((i+1)*n/out))."""
    return [((i * n) // out, -(-((i + 1) * n) // out)) for i in range(out)]


class _AdaptiveMaxPoolNd(_PoolNd):
    def __init__(self, output_size, return_indices: bool = False):
        super().__init__()
        name = type(self).__name__
        sizes = output_size if isinstance(output_size, (tuple, list)) else (output_size,) * self._nd
        if len(sizes) != self._nd:
            raise ValueError(f"{name}: output_size must be an int or {self._nd} values")
        self.output_size = tuple(s if s is None else check_int(name, "output_size", s, 1) for s in sizes)
        self.return_indices = return_indices

    @layer_forward
    def forward(self, x):
        """The max one dim at a time (a window is a product of one interval per dim), the last dim
        first: each step's gradient goes to the first maximum along its dim (``pool._window_max``), so
        the steps together choose the first maximum of the whole window in row-major order, torch's
        (the first step picks each row's first maximum, the next the first row holding the window's;
        with NaNs, the last row's last NaN). Runs of adjacent dims pooled whole (output size 1) are one
        step: one reduction. ``return_indices``: each step also carries the chosen elements' flat
        positions in the input plane (int32, as MaxPool's), picked by ``_first_max_position``, the
        same choice."""
        name = self._check(x)
        nd = self._nd
        spatial = x.shape[x.ndim - nd:]
        whole = _adaptive_whole_dims(name, x, self.output_size)
        at = x.graph.arange(prod(spatial)).reshape(spatial).expand(*x.shape) if self.return_indices else None

        def pool(v, pos, axes):
            """``v``'s max over the adjacent ``axes`` (kept as size 1), and its chosen flat positions."""
            best = _distinct_max(v, axes)
            kept = (*v.shape[:axes[0]], *(1 for _ in axes), *v.shape[axes[-1] + 1:])
            if pos is None:
                return best.reshape(*kept), None
            first = _first_max_position(v, axes, best, merged=True).reshape(*kept[:axes[0]], 1,
                                                                              *kept[axes[-1] + 1:])
            flat = pos.reshape(*v.shape[:axes[0]], prod(v.shape[a] for a in axes), *v.shape[axes[-1] + 1:])
            return best.reshape(*kept), flat.gather(axes[0], first).reshape(*kept)

        i = nd - 1
        while i >= 0:
            dim = x.ndim - nd + i
            if dim in whole:  # output size 1: the max of the whole dim (global pooling), whatever its size
                run = [dim]
                while i > 0 and dim - len(run) in whole:
                    run.insert(0, dim - len(run))
                    i -= 1
                x, at = pool(x, at, tuple(run))
            elif self.output_size[i] is not None and self.output_size[i] != spatial[i]:
                windows = _adaptive_windows(spatial[i], self.output_size[i])
                parts = [pool(x._slice_dim(dim, lo, hi - lo, 1),
                              None if at is None else at._slice_dim(dim, lo, hi - lo, 1), (dim,))
                         for lo, hi in windows]
                x = cat([v for v, _ in parts], dim) if len(parts) > 1 else parts[0][0]
                if at is not None:
                    at = cat([a for _, a in parts], dim) if len(parts) > 1 else parts[0][1]
            i -= 1
        return (x, at) if self.return_indices else x

    def extra_repr(self) -> str:
        out = self.output_size[0] if len(set(self.output_size)) == 1 and self._nd == 1 else self.output_size
        return f"output_size={out}"


class AdaptiveMaxPool1d(_AdaptiveMaxPoolNd):
    """torch's ``nn.AdaptiveMaxPool1d(output_size, return_indices=False)`` over (N, C, L) or (C, L).

    Args:
        output_size: the output length. return_indices: also return the
            int32 flat index of each maximum within its input plane.
    """

    _nd = 1


class AdaptiveMaxPool2d(_AdaptiveMaxPoolNd):
    """torch's ``nn.AdaptiveMaxPool2d(output_size, return_indices=False)`` over (N, C, H, W) or (C, H, W).

    Args:
        output_size: an int or (H_out, W_out) (None keeps that dim). return_indices: also return the
            int32 flat index of each maximum within its input plane.
    """

    _nd = 2


class AdaptiveMaxPool3d(_Pool3dCheck, _AdaptiveMaxPoolNd):
    """torch's ``nn.AdaptiveMaxPool3d(output_size, return_indices=False)`` over (N, C, D, H, W) or (C, D, H, W).

    Args:
        output_size: an int or (D_out, H_out, W_out) (None keeps that dim). return_indices: also return the
            int32 flat index of each maximum within its input plane.
    """


class AdaptiveAvgPool3d(_Pool3dCheck, _AdaptiveAvgPoolNd):
    """torch's ``nn.AdaptiveAvgPool3d(output_size)`` over (N, C, D, H, W) or (C, D, H, W): the mean over
    windows ``[floor(i * n / out), ceil((i + 1) * n / out))`` per spatial dim.

    Args:
        output_size: an int or ``(D_out, H_out, W_out)``; a None entry keeps the input's size.
    """


def _pool(layer, name, input):  # noqa: A002
    check_tensors(name, input=input)
    with renamed(name):
        return layer(input)


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode: bool = False,  # noqa: A002
               return_indices: bool = False):
    """torch's ``F.max_pool1d`` over (N, C, L) or (C, L).

    Args:
        input: a float tensor. kernel_size, stride (default kernel_size), padding, dilation, ceil_mode,
        return_indices: as ``nn.MaxPool1d``.
    """
    return _pool(MaxPool1d(kernel_size, stride, padding, dilation, return_indices=return_indices,
                           ceil_mode=ceil_mode), "max_pool1d", input)


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode: bool = False,  # noqa: A002
               return_indices: bool = False):
    """torch's ``F.max_pool2d`` over (N, C, H, W) or (C, H, W).

    Args:
        input: a float tensor. kernel_size, stride (default kernel_size), padding, dilation, ceil_mode,
        return_indices: as ``nn.MaxPool2d``.
    """
    return _pool(MaxPool2d(kernel_size, stride, padding, dilation, return_indices=return_indices,
                           ceil_mode=ceil_mode), "max_pool2d", input)


def max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode: bool = False,  # noqa: A002
               return_indices: bool = False):
    """torch's ``F.max_pool3d`` over (N, C, D, H, W) or (C, D, H, W).

    Args:
        input: a float tensor. kernel_size, stride (default kernel_size), padding, dilation, ceil_mode,
        return_indices: as ``nn.MaxPool3d``.
    """
    return _pool(MaxPool3d(kernel_size, stride, padding, dilation, return_indices=return_indices,
                           ceil_mode=ceil_mode), "max_pool3d", input)


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode: bool = False,  # noqa: A002
               count_include_pad: bool = True):
    """torch's ``F.avg_pool1d`` over (N, C, L) or (C, L).

    Args:
        input: a float tensor. kernel_size, stride (default kernel_size), padding, ceil_mode,
        count_include_pad: as ``nn.AvgPool1d``.
    """
    return _pool(AvgPool1d(kernel_size, stride, padding, ceil_mode, count_include_pad), "avg_pool1d", input)


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode: bool = False,  # noqa: A002
               count_include_pad: bool = True, divisor_override: int | None = None):
    """torch's ``F.avg_pool2d`` over (N, C, H, W) or (C, H, W).

    Args:
        input: a float tensor. kernel_size, stride (default kernel_size), padding, ceil_mode,
        count_include_pad, divisor_override: as ``nn.AvgPool2d``.
    """
    return _pool(AvgPool2d(kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override),
                 "avg_pool2d", input)


def avg_pool3d(input, kernel_size, stride=None, padding=0, ceil_mode: bool = False,  # noqa: A002
               count_include_pad: bool = True, divisor_override: int | None = None):
    """torch's ``F.avg_pool3d`` over (N, C, D, H, W) or (C, D, H, W).

    Args:
        input: a float tensor. kernel_size, stride (default kernel_size), padding, ceil_mode,
        count_include_pad, divisor_override: as ``nn.AvgPool3d``.
    """
    return _pool(AvgPool3d(kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override),
                 "avg_pool3d", input)


def adaptive_avg_pool1d(input, output_size):  # noqa: A002
    """torch's ``F.adaptive_avg_pool1d`` over (N, C, L) or (C, L).

    Args:
        input: a float tensor. output_size: the output length.
    """
    return _pool(AdaptiveAvgPool1d(output_size), "adaptive_avg_pool1d", input)


def adaptive_avg_pool2d(input, output_size):  # noqa: A002
    """torch's ``F.adaptive_avg_pool2d`` over (N, C, H, W) or (C, H, W).

    Args:
        input: a float tensor. output_size: an int or (H_out, W_out) (None keeps that dim).
    """
    return _pool(AdaptiveAvgPool2d(output_size), "adaptive_avg_pool2d", input)


def adaptive_avg_pool3d(input, output_size):  # noqa: A002
    """torch's ``F.adaptive_avg_pool3d`` over (N, C, D, H, W) or (C, D, H, W).

    Args:
        input: a float tensor. output_size: an int or (D_out, H_out, W_out) (None keeps that dim).
    """
    return _pool(AdaptiveAvgPool3d(output_size), "adaptive_avg_pool3d", input)


def adaptive_max_pool1d(input, output_size, return_indices: bool = False):  # noqa: A002
    """torch's ``F.adaptive_max_pool1d`` over (N, C, L) or (C, L).

    Args:
        input: a float tensor. output_size: the output length. return_indices: also return the
            int32 flat index of each maximum within its input plane.
    """
    return _pool(AdaptiveMaxPool1d(output_size, return_indices), "adaptive_max_pool1d", input)


def adaptive_max_pool2d(input, output_size, return_indices: bool = False):  # noqa: A002
    """torch's ``F.adaptive_max_pool2d`` over (N, C, H, W) or (C, H, W).

    Args:
        input: a float tensor. output_size: an int or (H_out, W_out). return_indices: also return the
            int32 flat index of each maximum within its input plane.
    """
    return _pool(AdaptiveMaxPool2d(output_size, return_indices), "adaptive_max_pool2d", input)


def adaptive_max_pool3d(input, output_size, return_indices: bool = False):  # noqa: A002
    """torch's ``F.adaptive_max_pool3d`` over (N, C, D, H, W) or (C, D, H, W).

    Args:
        input: a float tensor. output_size: an int or (D_out, H_out, W_out). return_indices: also return the
            int32 flat index of each maximum within its input plane.
    """
    return _pool(AdaptiveMaxPool3d(output_size, return_indices), "adaptive_max_pool3d", input)



def _with_indices(pool, nd: int, kind: str):
    """torch's ``F.{kind}_pool{nd}d_with_indices``: ``F.{kind}_pool{nd}d`` with ``return_indices=True``,
    returning (values, int32 indices) whatever ``return_indices`` says (torch's keep the parameter for
    their signature and ignore it too)."""
    name = f"{kind}_pool{nd}d_with_indices"
    if kind == "max":
        def fn(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode: bool = False,  # noqa: A002
               return_indices: bool = True):
            return pool(input, kernel_size, stride, padding, dilation, ceil_mode, True)
    else:
        def fn(input, output_size, return_indices: bool = True):  # noqa: A002
            return pool(input, output_size, True)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"""torch's ``F.{name}``: ``{pool.__name__}(..., return_indices=True)``, (values, int32 indices)."""
    return fn


max_pool1d_with_indices = _with_indices(max_pool1d, 1, "max")
max_pool2d_with_indices = _with_indices(max_pool2d, 2, "max")
max_pool3d_with_indices = _with_indices(max_pool3d, 3, "max")
adaptive_max_pool1d_with_indices = _with_indices(adaptive_max_pool1d, 1, "adaptive_max")
adaptive_max_pool2d_with_indices = _with_indices(adaptive_max_pool2d, 2, "adaptive_max")
adaptive_max_pool3d_with_indices = _with_indices(adaptive_max_pool3d, 3, "adaptive_max")

__all__ = ["AdaptiveAvgPool3d", "AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "AdaptiveMaxPool3d", "AvgPool3d",
           "MaxPool3d", "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d", "adaptive_max_pool1d",
           "adaptive_max_pool2d", "adaptive_max_pool3d", "avg_pool1d", "avg_pool2d", "avg_pool3d", "max_pool1d",
           "max_pool2d", "max_pool3d", "max_pool1d_with_indices", "max_pool2d_with_indices", "max_pool3d_with_indices",
           "adaptive_max_pool1d_with_indices", "adaptive_max_pool2d_with_indices", "adaptive_max_pool3d_with_indices"]
