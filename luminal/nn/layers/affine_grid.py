"""``F.affine_grid``: the sampling grid of a batch of affine maps, for ``grid_sample`` (spatial
transformer networks), with torch's formula.

Each output position's normalised coordinates ``(x, y[, z], 1)`` (the base grid: a constant, since the
output's spatial size is static) are multiplied by ``theta``'s rows. The base grid is a constant
built as torch builds it (``linspace(-1, 1)``, scaled by ``(n - 1) / n`` without ``align_corners``), and
the product is elementwise plus a sum over the 3 (or 4) columns, so the gradient reaches ``theta``
and the batch may be symbolic."""

from __future__ import annotations

import warnings

import numpy as np

from luminal.core.errors import op_error, renamed, user_stacklevel
from luminal.core.symbolic import is_static, shape_str
from luminal.frontend.checks import check_tensors
from luminal.frontend.tensor import GraphTensor


def _linspace_from_neg_one(n: int, align_corners: bool, np_dtype) -> np.ndarray:
    """torch's ``linspace_from_neg_one`` in the grid's dtype: the centres of ``n`` pixels across
    [-1, 1] (``align_corners``: the end pixels' centres on -1 and 1; else their outer edges, so the
    centres are scaled by ``(n - 1) / n``). One pixel is at 0. torch's ``linspace`` steps up from -1
    for the first half and down from 1 for the rest; done here in the same order and precision."""
    if n <= 1:
        return np.zeros(1, np_dtype)
    step = np_dtype(2.0) / np_dtype(n - 1)
    i = np.arange(n)
    r = np.where(i < n // 2, np_dtype(-1.0) + step * i.astype(np_dtype),
                 np_dtype(1.0) - step * (n - 1 - i).astype(np_dtype)).astype(np_dtype)
    if not align_corners:
        r = (r * np_dtype(n - 1) / np_dtype(n)).astype(np_dtype)
    return r


def _base_grid(spatial, align_corners: bool, np_dtype) -> np.ndarray:
    """(prod(spatial), nd + 1): each output position's (x, y[, z], 1), x along the last spatial dim
    (torch's order: the grid's last entry indexes the input's last dim)."""
    axes = [_linspace_from_neg_one(n, align_corners, np_dtype) for n in spatial]
    mesh = np.meshgrid(*axes, indexing="ij")  # one array per spatial dim, first dim first
    cols = [m.reshape(-1) for m in reversed(mesh)] + [np.ones(int(np.prod(spatial)), np_dtype)]
    return np.stack(cols, axis=-1).astype(np_dtype)


def affine_grid(theta, size, align_corners: bool | None = None) -> GraphTensor:
    """torch's ``F.affine_grid``: the grid ``(N, H, W, 2)`` (or ``(N, D, H, W, 3)``) whose entry at each
    output position is ``theta[n] @ (x, y[, z], 1)``, the position's coordinates normalised to [-1, 1].
    Passed to ``grid_sample`` with the same ``align_corners``, an identity ``theta`` reproduces the input.

    Args:
        theta: a float tensor (N, 2, 3) for 2-d or (N, 3, 4) for 3-d affine maps.
        size: the output size (N, C, H, W) or (N, C, D, H, W), e.g. the input's ``x.shape``; the
            spatial sizes must be static, N (which may be symbolic) must be ``theta``'s.
        align_corners: -1 and 1 are the corner pixels' centres (True) or their outer edges (False; None
            is False, torch's default, without torch's warning about the change of that default).
    """
    op = "affine_grid"
    check_tensors(op, theta=theta)
    size = tuple(size)
    if not theta.dtype.is_float:
        raise op_error(TypeError, op, f"expected theta of a float dtype, got {theta.dtype.name}", theta)
    if len(size) not in (4, 5):
        raise op_error(ValueError, op, f"supports 4-d and 5-d sizes (2-d and 3-d affine maps), got size "
                       f"{shape_str(size)}", theta)
    nd = len(size) - 2
    want = (nd, nd + 1)
    if theta.ndim != 3 or tuple(theta.shape[1:]) != want:
        raise op_error(ValueError, op, f"expected theta of shape (N, {want[0]}, {want[1]}) for size {shape_str(size)}, "
                       f"got {shape_str(theta.shape)}", theta)
    spatial = size[2:]
    if not all(is_static(n) for n in spatial):
        raise op_error(ValueError, op, f"needs static spatial sizes, got size {shape_str(size)}", theta)
    if any(is_static(n) and n <= 0 for n in size):
        raise op_error(ValueError, op, f"expected positive sizes, got size {shape_str(size)}", theta)
    if is_static(size[0]) and is_static(theta.shape[0]) and size[0] != theta.shape[0]:
        raise op_error(ValueError, op, f"size's batch {size[0]} differs from theta's {theta.shape[0]}", theta)
    ac = bool(align_corners)
    if ac and min(spatial) == 1:
        warnings.warn(f"{op}: a unit-size spatial dim with align_corners=True puts its grid points at 0 (the "
                      "centre), as torch since 1.3.0; not an intended use of affine_grid", UserWarning,
                      stacklevel=user_stacklevel())
    np_dtype = np.dtype(theta.dtype.np).type if theta.dtype.bits >= 32 else np.float32
    with renamed(op):
        base = theta.graph.constant(_base_grid(spatial, ac, np_dtype)).to(theta.dtype)  # (P, nd + 1)
        n, points = theta.shape[0], int(np.prod(spatial))
        grid = (base.reshape(1, points, 1, nd + 1) * theta.reshape(n, 1, nd, nd + 1)).sum(-1)
        return grid.reshape(n, *spatial, nd)
