"""The partial inverse of max pooling (``nn.MaxUnpool1d/2d/3d``, ``F.max_unpool1d/2d/3d``): each value
goes back to the position its index names in a zero-filled output, as torch's.

The indices are what ``MaxPoolNd(return_indices=True)`` returns: each maximum's flat position in its
(D *) H * W plane of the pooled input. Unpooling is one scatter per plane; its gradient is a gather at
the same positions (the scatter's own). A position named twice (overlapping windows that chose the
same element) takes the mean of its values, which is the value itself when both are that element's;
torch leaves the pick unspecified. An index outside the output plane is an IndexError when the
program runs (torch: "Found an invalid max index").
"""

from __future__ import annotations

import math

from luminal.core.errors import op_error
from luminal.core.symbolic import is_static
from luminal.frontend.checks import check_tensors
from luminal.frontend.ops import zeros
from luminal.nn.layers._util import bad_input, layer_forward, layer_name, ntuple
from luminal.nn.module import Module

_SPATIAL = {1: "L", 2: "H, W", 3: "D, H, W"}


def _output_size(name: str, x, kernel, stride, padding, output_size, nd: int) -> tuple:
    """torch's ``_unpool_output_size``: ``(in - 1) * stride - 2 * padding + kernel`` per spatial dim,
    or the ``output_size`` asked for (its last ``nd`` entries when it also gives N and C), which must
    lie strictly within one stride of that default, as torch requires."""
    spatial = x.shape[-nd:]
    default = [(n - 1) * s - 2 * p + k for n, s, p, k in zip(spatial, stride, padding, kernel)]
    if output_size is None:
        out = default
    else:
        out = [int(v) for v in output_size]
        if len(out) == nd + 2:
            out = out[2:]
        if len(out) != nd:
            raise op_error(ValueError, name, f"output_size must have {nd} or {nd + 2} entries, got "
                           f"{tuple(output_size)}", x)
        for d, (want, s) in enumerate(zip(out, stride)):
            lo, hi = default[d] - s, default[d] + s
            if is_static(lo) and not lo < want < hi:
                raise op_error(ValueError, name, f"output_size {tuple(out)}: dim {d} must be between {lo} and "
                               f"{hi} (exclusive) for an input of spatial size {tuple(spatial)}", x)
    for d, n in enumerate(out):
        if is_static(n) and n <= 0:
            raise op_error(ValueError, name, f"the output's spatial size {tuple(out)} is not positive (dim {d})", x)
    return tuple(out)


def max_unpool(x, indices, kernel, stride, padding, output_size, nd: int, name: str):
    """Unpool ``x`` (N, C, *spatial) or (C, *spatial) by ``indices`` (its shape, integer) into a zero
    output of the unpooled spatial size (``_output_size``)."""
    check_tensors(name, input=x, indices=indices)
    if x.ndim not in (nd + 1, nd + 2):
        raise bad_input(name, f"(N, C, {_SPATIAL[nd]}) or (C, {_SPATIAL[nd]})", x)
    if indices.dtype.kind != "i":
        raise op_error(TypeError, name, f"indices must be an integer tensor, got {indices.dtype.name}", indices)
    if indices.shape != x.shape:
        raise op_error(ValueError, name, "indices must have the input's shape (MaxPool's return_indices)", x, indices)
    out = _output_size(name, x, kernel, stride, padding, output_size, nd)
    lead, plane = x.shape[:-nd], math.prod(x.shape[-nd:])
    flat_x, flat_i = x.reshape(*lead, plane), indices.reshape(*lead, plane)
    base = zeros(*lead, math.prod(out), dtype=x.dtype, graph=x.graph)
    return base.scatter(-1, flat_i, flat_x).reshape(*lead, *out)


class _MaxUnpoolNd(Module):
    _nd = 0

    def __init__(self, kernel_size, stride=None, padding=0):
        super().__init__()
        name = type(self).__name__
        self.kernel_size = ntuple(kernel_size, self._nd, f"{name}: kernel_size", 1)
        self.stride = self.kernel_size if stride is None else ntuple(stride, self._nd, f"{name}: stride", 1)
        self.padding = ntuple(padding, self._nd, f"{name}: padding", 0)

    @layer_forward
    def forward(self, x, indices, output_size=None):
        return max_unpool(x, indices, self.kernel_size, self.stride, self.padding, output_size, self._nd,
                          layer_name(self))

    def extra_repr(self) -> str:
        def show(t):
            return t[0] if self._nd == 1 else t

        return f"kernel_size={show(self.kernel_size)}, stride={show(self.stride)}, padding={show(self.padding)}"


class MaxUnpool1d(_MaxUnpoolNd):
    """torch's ``nn.MaxUnpool1d(kernel_size, stride=None, padding=0)``; ``forward(input, indices,
    output_size=None)`` over (N, C, L) or (C, L): each value at the position its index names, zeros
    elsewhere.

    Args:
        kernel_size, stride (default kernel_size), padding: the pooling's, which size the output.
    """

    _nd = 1


class MaxUnpool2d(_MaxUnpoolNd):
    """torch's ``nn.MaxUnpool2d(kernel_size, stride=None, padding=0)``; ``forward(input, indices,
    output_size=None)`` over (N, C, H, W) or (C, H, W). ``output_size`` picks among the sizes a pooling
    could have come from (an odd input size: ``output_size=x.shape``).

    Args:
        kernel_size, stride (default kernel_size), padding: the pooling's, which size the output.
    """

    _nd = 2


class MaxUnpool3d(_MaxUnpoolNd):
    """torch's ``nn.MaxUnpool3d(kernel_size, stride=None, padding=0)``; ``forward(input, indices,
    output_size=None)`` over (N, C, D, H, W) or (C, D, H, W).

    Args:
        kernel_size, stride (default kernel_size), padding: the pooling's, which size the output.
    """

    _nd = 3


def max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None):  # noqa: A002
    """torch's ``F.max_unpool1d``: ``nn.MaxUnpool1d(kernel_size, stride, padding)(input, indices, output_size)``.

    Args:
        input: (N, C, L) or (C, L). indices: MaxPool1d's (return_indices=True), the input's shape.
        kernel_size, stride, padding, output_size: as ``nn.MaxUnpool1d``.
    """
    return MaxUnpool1d(kernel_size, stride, padding)(input, indices, output_size)


def max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):  # noqa: A002
    """torch's ``F.max_unpool2d``: ``nn.MaxUnpool2d(kernel_size, stride, padding)(input, indices, output_size)``.

    Args:
        input: (N, C, H, W) or (C, H, W). indices: MaxPool2d's (return_indices=True), the input's shape.
        kernel_size, stride, padding, output_size: as ``nn.MaxUnpool2d``.
    """
    return MaxUnpool2d(kernel_size, stride, padding)(input, indices, output_size)


def max_unpool3d(input, indices, kernel_size, stride=None, padding=0, output_size=None):  # noqa: A002
    """torch's ``F.max_unpool3d``: ``nn.MaxUnpool3d(kernel_size, stride, padding)(input, indices, output_size)``.

    Args:
        input: (N, C, D, H, W) or (C, D, H, W). indices: MaxPool3d's (return_indices=True), the input's shape.
        kernel_size, stride, padding, output_size: as ``nn.MaxUnpool3d``.
    """
    return MaxUnpool3d(kernel_size, stride, padding)(input, indices, output_size)
