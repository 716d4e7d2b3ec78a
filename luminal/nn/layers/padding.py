"""Padding layers (``nn.ZeroPad2d``, ``nn.ReflectionPad1d``, ...): torch's names, arguments and
``padding`` attribute, each a thin module over ``F.pad`` in one of its modes. Negative amounts crop,
in every mode, and the padded dims may be symbolic, as ``F.pad``'s."""

from __future__ import annotations

import numbers

import numpy as np

from luminal.core.errors import check_number
from luminal.frontend.checks import check_tensors
from luminal.nn.layers._util import bad_input, layer_name
from luminal.nn.layers.sampling import pad
from luminal.nn.module import Module

_LAYOUTS = {1: "(C, W) or (N, C, W)", 2: "(C, H, W) or (N, C, H, W)", 3: "(C, D, H, W) or (N, C, D, H, W)"}


def _padding(layer: str, padding, n: int) -> tuple[int, ...]:
    """torch's ``_ntuple(2 * n)``: an int pads every side; a sequence gives (left, right, top, bottom,
    front, back) for the last ``n`` dims, last dim first, and must have ``2 * n`` ints (torch does not
    check the length). Negative amounts crop (``F.pad``)."""
    sides = 2 * n
    if isinstance(padding, (tuple, list)):
        vals = tuple(padding)
    else:
        vals = (padding,) * sides
    if len(vals) != sides or any(isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Integral)
                                 for v in vals):
        raise TypeError(f"{layer}: padding must be an int or a tuple of {sides} ints, got {padding!r}")
    return tuple(int(v) for v in vals)


class _PadNd(Module):
    """``F.pad(x, self.padding, mode)``. The non-constant modes take an unbatched or a batched input,
    as torch's (one or two dims before the padded ones)."""

    _n = 1
    _mode = "constant"

    def __init__(self, padding):
        super().__init__()
        self.padding = _padding(type(self).__name__, padding, self._n)

    def forward(self, input):  # noqa: A002
        """Pad ``input``'s last dims by ``self.padding``.

        Args:
            input: the tensor.
        """
        check_tensors("pad", input=input)
        if input.ndim not in (self._n + 1, self._n + 2):
            raise bad_input(layer_name(self), _LAYOUTS[self._n], input)
        return pad(input, self.padding, self._mode)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class _ConstantPadNd(_PadNd):
    def __init__(self, padding, value: float):
        super().__init__(padding)
        self.value = check_number(type(self).__name__, "value", value)

    def forward(self, input):  # noqa: A002
        """Pad ``input``'s last dims by ``self.padding`` with ``self.value`` (any rank, as torch).

        Args:
            input: the tensor.
        """
        return pad(input, self.padding, "constant", self.value)

    def extra_repr(self) -> str:
        return f"padding={self.padding}, value={self.value}"


class ConstantPad1d(_ConstantPadNd):
    """torch's ``nn.ConstantPad1d(padding, value)``: ``F.pad(x, padding, 'constant', value)`` on the last dim.

    Args:
        padding: an int, or (left, right); negative amounts crop. value: the fill.
    """

    _n = 1


class ConstantPad2d(_ConstantPadNd):
    """torch's ``nn.ConstantPad2d(padding, value)``: ``F.pad`` in 'constant' mode on the last 2 dims.

    Args:
        padding: an int, or (left, right, top, bottom); negative amounts crop. value: the fill.
    """

    _n = 2


class ConstantPad3d(_ConstantPadNd):
    """torch's ``nn.ConstantPad3d(padding, value)``: ``F.pad`` in 'constant' mode on the last 3 dims.

    Args:
        padding: an int, or (left, right, top, bottom, front, back); negative amounts crop. value: the fill.
    """

    _n = 3


class _ZeroPadNd(_ConstantPadNd):
    def __init__(self, padding):
        super().__init__(padding, 0.0)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class ZeroPad1d(_ZeroPadNd):
    """torch's ``nn.ZeroPad1d(padding)``: ``F.pad`` with zeros on the last dim.

    Args:
        padding: an int, or (left, right); negative amounts crop.
    """

    _n = 1


class ZeroPad2d(_ZeroPadNd):
    """torch's ``nn.ZeroPad2d(padding)``: ``F.pad`` with zeros on the last 2 dims.

    Args:
        padding: an int, or (left, right, top, bottom); negative amounts crop.
    """

    _n = 2


class ZeroPad3d(_ZeroPadNd):
    """torch's ``nn.ZeroPad3d(padding)``: ``F.pad`` with zeros on the last 3 dims.

    Args:
        padding: an int, or (left, right, top, bottom, front, back); negative amounts crop.
    """

    _n = 3


class ReflectionPad1d(_PadNd):
    """torch's ``nn.ReflectionPad1d(padding)``: ``F.pad`` in 'reflect' mode on (C, W) or (N, C, W).

    Args:
        padding: an int, or (left, right), each less than the padded dim's size; negative amounts crop.
    """

    _n, _mode = 1, "reflect"


class ReflectionPad2d(_PadNd):
    """torch's ``nn.ReflectionPad2d(padding)``: ``F.pad`` in 'reflect' mode on (C, H, W) or (N, C, H, W).

    Args:
        padding: an int, or (left, right, top, bottom); negative amounts crop.
    """

    _n, _mode = 2, "reflect"


class ReflectionPad3d(_PadNd):
    """torch's ``nn.ReflectionPad3d(padding)``: ``F.pad`` in 'reflect' mode on (C, D, H, W) or
    (N, C, D, H, W).

    Args:
        padding: an int, or (left, right, top, bottom, front, back); negative amounts crop.
    """

    _n, _mode = 3, "reflect"


class ReplicationPad1d(_PadNd):
    """torch's ``nn.ReplicationPad1d(padding)``: ``F.pad`` in 'replicate' mode on (C, W) or (N, C, W).

    Args:
        padding: an int, or (left, right); negative amounts crop.
    """

    _n, _mode = 1, "replicate"


class ReplicationPad2d(_PadNd):
    """torch's ``nn.ReplicationPad2d(padding)``: ``F.pad`` in 'replicate' mode on (C, H, W) or
    (N, C, H, W).

    Args:
        padding: an int, or (left, right, top, bottom); negative amounts crop.
    """

    _n, _mode = 2, "replicate"


class ReplicationPad3d(_PadNd):
    """torch's ``nn.ReplicationPad3d(padding)``: ``F.pad`` in 'replicate' mode on (C, D, H, W) or
    (N, C, D, H, W).

    Args:
        padding: an int, or (left, right, top, bottom, front, back); negative amounts crop.
    """

    _n, _mode = 3, "replicate"


class CircularPad1d(_PadNd):
    """torch's ``nn.CircularPad1d(padding)``: ``F.pad`` in 'circular' mode on (C, W) or (N, C, W).

    Args:
        padding: an int, or (left, right), each at most the padded dim's size (what the negative
            amounts, which crop, leave of it).
    """

    _n, _mode = 1, "circular"


class CircularPad2d(_PadNd):
    """torch's ``nn.CircularPad2d(padding)``: ``F.pad`` in 'circular' mode on (C, H, W) or (N, C, H, W).

    Args:
        padding: an int, or (left, right, top, bottom); negative amounts crop.
    """

    _n, _mode = 2, "circular"


class CircularPad3d(_PadNd):
    """torch's ``nn.CircularPad3d(padding)``: ``F.pad`` in 'circular' mode on (C, D, H, W) or
    (N, C, D, H, W).

    Args:
        padding: an int, or (left, right, top, bottom, front, back); negative amounts crop.
    """

    _n, _mode = 3, "circular"
