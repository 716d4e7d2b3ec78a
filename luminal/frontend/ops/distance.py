"""``cdist``: the p-norm distance between every row of one batch of points and every row of another;
``pdist``: between every pair of rows of one set of points; ``cosine_similarity`` and
``pairwise_distance``: between matching vectors of two tensors (torch's top-level and ``F.`` names)."""

from __future__ import annotations

import math

import numpy as np

from luminal.core import dtype as dt
from luminal.core.errors import check_number, op_error, renamed
from luminal.core.symbolic import is_static
from luminal.frontend.checks import check_tensors
from luminal.frontend.float32_ops import float32_under_autocast
from luminal.frontend.ops.core import broadcast_shapes, cast, require
from luminal.frontend.ops.elementwise import _opmath, add, gt, mul, sqrt, sub, where
from luminal.frontend.ops.indexing import index_select
from luminal.frontend.ops.linalg import matmul
from luminal.frontend.ops.norms import vector_norm
from luminal.frontend.ops.reduce import sum as sum_
from luminal.frontend.tensor import GraphTensor

_MODES = ("use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist", "donot_use_mm_for_euclid_dist")


@float32_under_autocast
def cdist(x1: GraphTensor, x2: GraphTensor, p: float = 2.0,
          compute_mode: str = "use_mm_for_euclid_dist_if_necessary") -> GraphTensor:
    """torch.cdist: ``out[..., i, j] = ||x1[..., i, :] - x2[..., j, :]||_p`` (batch dims broadcast), for
    any ``p >= 0`` (0 counts the differing coordinates, ``inf`` takes the largest difference).

    The differences are formed directly, exact but ``P * R * M`` large; for ``p == 2``, as torch,
    ``compute_mode`` may take ``|x|**2 + |y|**2 - 2 x.y`` instead (one matmul, ``P * R`` memory, with
    cancellation for close points): always (``"use_mm_for_euclid_dist"``) or when ``P`` or ``R`` is
    above 25 (the default; a symbolic ``P`` or ``R`` counts as above, the size being unknown until
    run time). Either way a distance of 0 has gradient 0, as torch's.

    Args:
        x1: ``(..., P, M)`` float points.
        x2: ``(..., R, M)`` float points.
        p: the norm's order (>= 0).
        compute_mode: one of torch's three modes (above).
    """
    check_tensors("cdist", x1=x1, x2=x2)
    require("cdist", x1.dtype.is_float and x2.dtype.is_float,
            f"needs float tensors, got {x1.dtype.name} and {x2.dtype.name}", x1, x2)
    if x1.ndim < 2 or x2.ndim < 2:
        raise op_error(ValueError, "cdist", f"needs tensors of at least 2 dims, got {x1.ndim}-d and {x2.ndim}-d",
                       x1, x2)
    if x1.shape[-1] != x2.shape[-1]:
        raise op_error(ValueError, "cdist", f"the points' sizes differ: {x1.shape[-1]} vs {x2.shape[-1]}", x1, x2)
    if not check_number("cdist", "p", p, x1, x2) >= 0:
        raise op_error(ValueError, "cdist", f"p must be >= 0, got {p!r}", x1, x2)
    if compute_mode not in _MODES:
        raise op_error(ValueError, "cdist", f"compute_mode must be one of {', '.join(_MODES)}, got {compute_mode!r}",
                       x1, x2)
    batch = broadcast_shapes("cdist", x1, x2, shapes=[x1.shape[:-2], x2.shape[:-2]])
    d = dt.promote(x1.dtype, x2.dtype)
    return _cdist(cast(x1, d), cast(x2, d), p, compute_mode, batch)


@_opmath  # (16-bit points: the squares and their sums in float32, as torch's kernels; they overflowed)
def _cdist(x1: GraphTensor, x2: GraphTensor, p: float, compute_mode: str, batch) -> GraphTensor:
    """cdist of checked points of one dtype, their batch dims broadcast to ``batch``."""
    (P, M), (R, _) = x1.shape[-2:], x2.shape[-2:]
    a, b = x1.expand(*batch, P, M), x2.expand(*batch, R, M)
    big = any(isinstance(n, int) and n > 25 for n in (P, R)) or not all(isinstance(n, int) for n in (P, R))
    if p == 2 and (compute_mode == _MODES[1] or (compute_mode == _MODES[0] and big)):
        sq = add(add(sum_(mul(a, a), -1, keepdim=True), sum_(mul(b, b), -1).unsqueeze(-2)),
                 mul(matmul(a, b.mT), -2.0))
        pos = gt(sq, 0)  # (rounding may leave a small negative; and sqrt's gradient at 0 is infinite)
        return where(pos, sqrt(where(pos, sq, 1.0)), 0.0)
    return _distance(sub(a.unsqueeze(-2), b.unsqueeze(-3)), p)


def _distance(diff: GraphTensor, p: float) -> GraphTensor:
    """The p-norm of the differences ``diff`` over the last dim. Points with no coordinates are at
    distance 0 for every ``p``, as torch's cdist/pdist: also for ``inf``, the largest of no (non-negative)
    differences, which ``vector_norm`` refuses (a max over an empty dim). A symbolic coordinate count may
    be 0 only when the program runs: one 0 appended to the differences makes that max defined and
    changes no other (every ``|d| >= 0``; a 0 tied with the largest shares a gradient of ``sign(0) = 0``)."""
    if p == math.inf and not is_static(diff.shape[-1]):
        diff = diff.pad([0, 1])
    if p == math.inf and diff.shape[-1] == 0:
        return sum_(diff, -1)
    return vector_norm(diff, p, -1)


def pdist(input: GraphTensor, p: float = 2.0) -> GraphTensor:  # noqa: A002
    """torch.pdist (``F.pdist``): the p-norm distance between every pair of rows ``i < j`` of the
    ``(N, M)`` points, in torch's order (row-major over the upper triangle), ``N * (N - 1) / 2`` of them.
    As ``cdist``'s exact form: the differences of each pair, then ``vector_norm`` (a distance of 0 has
    gradient 0, as torch's). The pairs are chosen when the graph is built, so ``N`` must be static.

    Args:
        input: ``(N, M)`` float points.
        p: the norm's order (>= 0; 0 counts the differing coordinates, ``inf`` takes the largest).
    """
    check_tensors("pdist", input=input)
    require("pdist", input.dtype.is_float, f"needs a float tensor, got {input.dtype.name}", input)
    if input.ndim != 2:
        raise op_error(ValueError, "pdist", f"needs a 2-d tensor (N, M), got {input.ndim}-d", input)
    if not check_number("pdist", "p", p, input) >= 0:
        raise op_error(ValueError, "pdist", f"p must be >= 0, got {p!r}", input)
    n = input.shape[0]
    if not isinstance(n, int):
        raise op_error(ValueError, "pdist", f"needs a static number of points, got {n} (the pairs are chosen when "
                       "the graph is built); cdist takes a symbolic one", input)
    return _pdist(input, p)


@_opmath  # (16-bit points: the differences' powers and sums in float32, as cdist's)
def _pdist(x: GraphTensor, p: float) -> GraphTensor:
    """pdist of checked (N, M) points, N static."""
    i, j = np.triu_indices(x.shape[0], 1)
    a, b = (index_select(x, 0, x.graph.constant(k.astype(np.int32))) for k in (i, j))
    return _distance(sub(a, b), p)


@_opmath  # (16-bit inputs: the norm's sum of squares in float32, as torch's; it overflowed)
def cosine_similarity(x1: GraphTensor, x2: GraphTensor, dim: int = 1, eps: float = 1e-8) -> GraphTensor:
    """torch's ``F.cosine_similarity``: ``x1 . x2 / (max(||x1||, eps) * max(||x2||, eps))`` along ``dim``
    of the inputs broadcast together. As torch's, the gradient goes through each norm also where ``eps``
    holds it (torch clamps without recording the clamp).

    Args:
        x1, x2: float tensors. dim: the dim of the vectors. eps: the smallest norm.
    """
    check_tensors("cosine_similarity", x1=x1, x2=x2)
    with renamed("cosine_similarity"):
        shape = broadcast_shapes("cosine_similarity", x1, x2)
        x1, x2 = x1.expand(*shape), x2.expand(*shape)
        n1, n2 = (_clamped_norm(x, dim, eps) for x in (x1, x2))
        return ((x1 / n1) * (x2 / n2)).sum(dim)


def _clamped_norm(x, dim: int, eps: float):
    """The 2-norm along ``dim`` (keepdim), ``eps`` where it is smaller, with the norm's gradient there
    too (``n - n.detach()`` is 0 with the gradient of ``n``)."""
    n = vector_norm(x, 2, dim, keepdim=True)
    return where(n < eps, n - n.detach() + eps, n)


@_opmath  # (16-bit inputs: the norm's sum of squares in float32, as torch's; it overflowed)
def pairwise_distance(x1: GraphTensor, x2: GraphTensor, p: float = 2.0, eps: float = 1e-6,
                      keepdim: bool = False) -> GraphTensor:
    """torch's ``F.pairwise_distance``: ``||x1 - x2 + eps||_p`` over the last dim.

    Args:
        x1, x2: float tensors (broadcast). p: the norm's exponent. eps: added to the difference.
        keepdim: keep the reduced dim.
    """
    check_tensors("pairwise_distance", x1=x1, x2=x2)
    with renamed("pairwise_distance"):
        d = vector_norm(x1 - x2 + eps, p, -1, keepdim=True)
        return d if keepdim else d.squeeze(-1)
