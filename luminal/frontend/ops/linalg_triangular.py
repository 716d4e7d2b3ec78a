"""Triangular solves by substitution unrolled over a static size n (``solve_triangular``, and the
substitutions of ``lu_solve``), with a size limit (``_matrix``, ``check_size``: linalg_solve.py).

Each step of a substitution is one row: ``x_i = (b_i - A[i, :] @ X) / A[i, i]`` with the rows of
``X`` not yet found still 0, so only the solved triangle of ``A`` is read (the other is masked to 0
first, so that its inf/NaN do not leak in) and gradients come from autograd, triangular as torch's."""

from __future__ import annotations

from luminal.core.errors import op_error
from luminal.core.symbolic import shape_str
from luminal.frontend.checks import check_tensors, tensor_op
from luminal.frontend.float32_ops import float32_under_autocast
from luminal.frontend.ops.core import broadcast_shapes
from luminal.frontend.ops.creation import tril, triu
from luminal.frontend.ops.elementwise import div, eq, sub, where
from luminal.frontend.ops.linalg import matmul
from luminal.frontend.ops.linalg_solve import _matrix
from luminal.frontend.tensor import GraphTensor

# the largest static size the substitutions unroll: n steps of a few nodes each
TRIANGULAR_LIMIT = 64


def substitute(A: GraphTensor, B: GraphTensor, n: int, *, upper: bool, unit: bool) -> GraphTensor:  # noqa: N803
    """``X`` with ``A X = B`` for a triangular ``A`` (..., n, n) and ``B`` (..., n, k) of broadcastable
    batches: back substitution (``upper``) or forward; ``unit``: the diagonal taken as ones (unread)."""
    strict = triu(A, 1) if upper else tril(A, -1)
    batch = broadcast_shapes("solve_triangular", A, B, shapes=[A.shape[:-2], B.shape[:-2]])
    B = B.expand(*batch, n, B.shape[-1])
    rows = A.graph.arange(n).reshape(n, 1)
    x = B.graph.constant(0, B.dtype).expand(*B.shape)
    for i in reversed(range(n)) if upper else range(n):
        r = sub(B[..., i:i + 1, :], matmul(strict[..., i:i + 1, :], x))
        if not unit:
            r = div(r, A[..., i:i + 1, i:i + 1])
        x = where(eq(rows, i), r, x)
    return x


@float32_under_autocast
@tensor_op("solve_triangular")
def solve_triangular(A: GraphTensor, B: GraphTensor, *, upper: bool, left: bool = True,  # noqa: N803
                     unitriangular: bool = False) -> GraphTensor:
    """torch.linalg.solve_triangular: ``X`` with ``A X = B`` (``left=False``: ``X A = B``) for a
    triangular ``A``, by substitution unrolled over its static size n (n <= 64). Only the triangle
    ``upper`` names is read (and its diagonal unless ``unitriangular``); a zero on the diagonal
    gives inf/NaN. Batch dims broadcast.

    Args:
        A: a float32/float64 tensor (*, n, n).
        B: a tensor of A's dtype (*, n, k) (``left=False``: (*, k, n)); a matrix, as torch's.
        upper: ``A`` is upper (True) or lower triangular; keyword-only and required, as torch's.
        left: solve ``A X = B`` (True) or ``X A = B``.
        unitriangular: take ``A``'s diagonal as ones.
    """
    check_tensors("solve_triangular", A=A, B=B)
    n, _ = _matrix("solve_triangular", A, square=True, limit=TRIANGULAR_LIMIT)
    if B.dtype is not A.dtype:
        raise op_error(TypeError, "solve_triangular", f"B must have A's dtype {A.dtype.name}, got {B.dtype.name}",
                       A, B)
    if B.ndim < 2:
        raise op_error(ValueError, "solve_triangular", f"B must have at least 2 dims, got {shape_str(B.shape)}", A, B)
    if B.shape[-2 if left else -1] != n:
        raise op_error(ValueError, "solve_triangular", f"B {shape_str(B.shape)} does not match A "
                       f"{shape_str(A.shape)} (left={left})", A, B)
    if not left:
        return substitute(A.mT, B.mT, n, upper=not upper, unit=unitriangular).mT
    return substitute(A, B, n, upper=upper, unit=unitriangular)
