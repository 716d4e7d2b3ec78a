"""``lm.linalg``: the ``torch.linalg`` names luminal has: ``vector_norm``, ``matrix_norm``, ``norm``, ``cross``,
``multi_dot``, ``matmul``, ``diagonal``, ``vecdot``, ``vander``, ``matrix_power``, and for static square sizes
``inv``, ``solve``, ``det``, ``slogdet``, ``cholesky`` (``frontend/ops/linalg_solve.py``), their ``*_ex``
variants, ``tensorinv``, ``tensorsolve`` (``linalg_more.py``) and ``solve_triangular``
(``linalg_triangular.py``), ``lu_factor``, ``lu_factor_ex``, ``lu``, ``lu_solve``, ``qr`` and
``householder_product`` (``linalg_decomp.py``), ``eigh``, ``eigvalsh``, ``svd``, ``svdvals``, ``pinv``,
``matrix_rank`` and ``lstsq`` (``linalg_spectral.py``), ``cond`` and ``matrix_exp`` (``linalg_more.py``)."""

from luminal.frontend.join import joins_all as _joins_all
from luminal.frontend.ops import linalg as _ops
from luminal.frontend.ops.linalg import matmul, multi_dot
from luminal.frontend.ops.linalg_decomp import householder_product, lu, lu_factor, lu_factor_ex, lu_solve, qr
from luminal.frontend.ops.linalg_more import (
    LinAlgError,
    cholesky_ex,
    cond,
    inv_ex,
    matrix_exp,
    matrix_power,
    norm,
    solve_ex,
    tensorinv,
    tensorsolve,
    vander,
    vecdot,
)
from luminal.frontend.ops.linalg_solve import cholesky, det, inv, slogdet, solve
from luminal.frontend.ops.linalg_spectral import eigh, eigvalsh, lstsq, matrix_rank, pinv, svd, svdvals
from luminal.frontend.ops.linalg_triangular import solve_triangular
from luminal.frontend.ops.movement import diagonal as _diagonal
from luminal.frontend.ops.norms import matrix_norm, vector_norm

__all__ = [
    "LinAlgError", "cholesky", "cholesky_ex", "cond", "cross", "det", "diagonal", "eigh", "eigvalsh",
    "householder_product", "inv", "inv_ex", "lstsq", "lu", "lu_factor", "lu_factor_ex", "lu_solve", "matmul",
    "matrix_exp", "matrix_norm", "matrix_power", "matrix_rank", "multi_dot", "norm", "pinv", "qr", "slogdet", "solve",
    "solve_ex", "solve_triangular", "svd", "svdvals", "tensorinv", "tensorsolve", "vander", "vecdot", "vector_norm",
]


def cross(input, other, *, dim: int = -1):  # noqa: A002 - torch's names
    """torch.linalg.cross: the cross product of 3-vectors along ``dim`` (default the last, where
    ``lm.cross``/torch.cross take the first dim of size 3).

    Args:
        input: a tensor whose ``dim`` has size 3.
        other: a tensor broadcast against it, of the same number of dims.
        dim: the dim of the vectors' components.
    """
    return _ops.cross(input, other, dim)


def diagonal(A, *, offset: int = 0, dim1: int = -2, dim2: int = -1):  # noqa: N803 - torch's names
    """torch.linalg.diagonal: ``lm.diagonal`` with torch.linalg's defaults, the diagonals of the
    matrices in the last two dims (as a new last dim).

    Args:
        A: a tensor of at least 2 dims.
        offset: which diagonal: 0 the main one, > 0 above it, < 0 below it.
        dim1: the first dim of the matrices.
        dim2: the second dim.
    """
    return _diagonal(A, offset, dim1, dim2)


_joins_all(globals(), __all__)  # a Parameter, Buffer or host tensor joins the other operand's graph (join.py)
