"""``unfold``/``fold`` (im2col / col2im) and the ``Unfold``/``Fold`` layers, with torch's names,
arguments and layouts: ``unfold`` turns each sliding ``kernel_size`` block of a (N, C, H, W) input
into a column of a (N, C * kh * kw, L) tensor; ``fold`` sums such columns back into (N, C, H, W).

Both are one constant-index op over the flattened, zero-padded spatial dims: ``unfold`` a Gather
(``index_select``), ``fold`` its transpose, a ScatterAdd (``index_add``), where overlapping blocks
sum. Each is the other's gradient, as in torch."""

from __future__ import annotations

import numpy as np

from luminal.core import dtype as dt
from luminal.core.errors import op_error, renamed
from luminal.core.symbolic import is_static, shape_str
from luminal.frontend.checks import check_tensors
from luminal.frontend.tensor import GraphTensor
from luminal.nn.layers._util import ntuple
from luminal.nn.module import Module


def _pairs(op: str, x: GraphTensor, kernel_size, dilation, padding, stride):
    try:
        return (ntuple(kernel_size, 2, "kernel_size", 1), ntuple(dilation, 2, "dilation", 1),
                ntuple(padding, 2, "padding", 0), ntuple(stride, 2, "stride", 1))
    except (ValueError, TypeError) as e:
        raise op_error(ValueError, op, str(e), x) from None


def _blocks(op: str, x: GraphTensor, size, k, d, p, s) -> tuple[int, int]:
    """The number of block positions along H and W of a (padded) ``size``."""
    out = []
    for n, kk, dd, pp, ss in zip(size, k, d, p, s):
        span = dd * (kk - 1) + 1
        if n + 2 * pp < span:
            raise op_error(ValueError, op, f"the kernel spans {span} (kernel_size {k}, dilation {d}), more than the "
                           f"padded input size {tuple(m + 2 * q for m, q in zip(size, p))}", x)
        out.append((n + 2 * pp - span) // ss + 1)
    return out[0], out[1]


def _index(size, k, d, p, s, blocks) -> np.ndarray:
    """(kh * kw * L,) positions in the flattened padded (H + 2p, W + 2p) plane: block element
    ``(i, j)`` of block ``(bh, bw)`` at ``(bh * s + i * d, bw * s + j * d)``, ordered as torch's
    ``(c, i, j)`` rows by ``(bh, bw)`` columns."""
    wp = size[1] + 2 * p[1]
    i = np.arange(k[0]).reshape(-1, 1, 1, 1) * d[0] + np.arange(blocks[0]).reshape(1, 1, -1, 1) * s[0]
    j = np.arange(k[1]).reshape(1, -1, 1, 1) * d[1] + np.arange(blocks[1]).reshape(1, 1, 1, -1) * s[1]
    return (i * wp + j).reshape(-1).astype(np.int32)


def unfold(input, kernel_size, dilation=1, padding=0, stride=1) -> GraphTensor:  # noqa: A002
    """torch's ``F.unfold`` (im2col): the sliding blocks of a (N, C, H, W) (or unbatched (C, H, W))
    input as columns, (N, C * kh * kw, L) with L the number of block positions.

    Args:
        input: a 4-d (or 3-d) tensor with static C, H and W.
        kernel_size: the block size (an int or a pair).
        dilation: the spacing between a block's elements.
        padding: zeros added on both sides of H and W.
        stride: the step between block positions.
    """
    op = "unfold"
    check_tensors(op, input=input)
    x = input
    if x.ndim not in (3, 4) or not all(is_static(n) for n in x.shape[-3:]):
        raise op_error(ValueError, op, f"expected an input (N, C, H, W) or (C, H, W) with static C, H, W, got "
                       f"{shape_str(x.shape)}", x)
    k, d, p, s = _pairs(op, x, kernel_size, dilation, padding, stride)
    size = tuple(x.shape[-2:])
    blocks = _blocks(op, x, size, k, d, p, s)
    with renamed(op):
        xp = x.pad([p[1], p[1], p[0], p[0]], 0) if any(p) else x
        flat = xp.reshape(*x.shape[:-2], (size[0] + 2 * p[0]) * (size[1] + 2 * p[1]))
        idx = x.graph.constant(_index(size, k, d, p, s, blocks), dt.int32)
        cols = flat.index_select(-1, idx)  # (..., C, kh * kw * L)
        c = x.shape[-3]
        return cols.reshape(*x.shape[:-3], c * k[0] * k[1], blocks[0] * blocks[1])


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1) -> GraphTensor:  # noqa: A002
    """torch's ``F.fold`` (col2im): columns (N, C * kh * kw, L) summed back into (N, C, H, W) at the
    blocks' positions (overlaps add up); the transpose of ``unfold``.

    Args:
        input: a 3-d (or unbatched 2-d) tensor with static sizes past the batch dim.
        output_size: (H, W) of the result (an int or a pair).
        kernel_size: the block size (an int or a pair).
        dilation: the spacing between a block's elements.
        padding: the zeros ``unfold`` would have added on both sides (cropped here).
        stride: the step between block positions.
    """
    op = "fold"
    check_tensors(op, input=input)
    x = input
    if x.ndim not in (2, 3) or not all(is_static(n) for n in x.shape[-2:]):
        raise op_error(ValueError, op, f"expected an input (N, C * kh * kw, L) or (C * kh * kw, L) with static "
                       f"sizes, got {shape_str(x.shape)}", x)
    k, d, p, s = _pairs(op, x, kernel_size, dilation, padding, stride)
    try:
        size = ntuple(output_size, 2, "output_size", 1)
    except (ValueError, TypeError) as e:
        raise op_error(ValueError, op, str(e), x) from None
    ck, n_cols = x.shape[-2], x.shape[-1]
    if ck % (k[0] * k[1]):
        raise op_error(ValueError, op, f"dim {x.ndim - 2} ({ck}) must be divisible by the kernel's "
                       f"{k[0]} * {k[1]} elements", x)
    blocks = _blocks(op, x, size, k, d, p, s)
    if blocks[0] * blocks[1] != n_cols:
        raise op_error(ValueError, op, f"expected {blocks[0] * blocks[1]} columns (blocks {blocks[0]} x {blocks[1]} "
                       f"for output_size {size}), got {n_cols}", x)
    c = ck // (k[0] * k[1])
    hp, wp = size[0] + 2 * p[0], size[1] + 2 * p[1]
    lead = tuple(x.shape[:-2])
    with renamed(op):
        src = x.reshape(*lead, c, ck // c * n_cols)
        idx = x.graph.constant(_index(size, k, d, p, s, blocks), dt.int32)
        zeros = x.graph.constant(0, x.dtype).expand(*lead, c, hp * wp)
        out = zeros.index_add(-1, idx, src).reshape(*lead, c, hp, wp)
        return out[..., p[0]:p[0] + size[0], p[1]:p[1] + size[1]] if any(p) else out


class Unfold(Module):
    """torch's ``nn.Unfold(kernel_size, dilation=1, padding=0, stride=1)``: ``unfold`` as a layer.

    Args:
        kernel_size, dilation, padding, stride: as ``unfold``.
    """

    def __init__(self, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.kernel_size, self.dilation, self.padding, self.stride = kernel_size, dilation, padding, stride

    def forward(self, x):
        return unfold(x, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, dilation={self.dilation}, padding={self.padding}, "
                f"stride={self.stride}")


class Fold(Module):
    """torch's ``nn.Fold(output_size, kernel_size, dilation=1, padding=0, stride=1)``: ``fold`` as a layer.

    Args:
        output_size, kernel_size, dilation, padding, stride: as ``fold``.
    """

    def __init__(self, output_size, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.output_size, self.kernel_size = output_size, kernel_size
        self.dilation, self.padding, self.stride = dilation, padding, stride

    def forward(self, x):
        return fold(x, self.output_size, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self) -> str:
        return (f"output_size={self.output_size}, kernel_size={self.kernel_size}, dilation={self.dilation}, "
                f"padding={self.padding}, stride={self.stride}")
