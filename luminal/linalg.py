"""``lm.linalg``: the ``torch.linalg`` names luminal has: ``vector_norm``, ``matrix_norm``, ``cross``, ``multi_dot``,
and for static square sizes ``inv``, ``solve``, ``det``, ``slogdet`` and ``cholesky``
(``frontend/ops/linalg_solve.py``)."""

from luminal.frontend.join import joins_all as _joins_all
from luminal.frontend.ops import linalg as _ops
from luminal.frontend.ops.linalg import multi_dot
from luminal.frontend.ops.linalg_solve import cholesky, det, inv, slogdet, solve
from luminal.frontend.ops.norms import matrix_norm, vector_norm

__all__ = ["cholesky", "cross", "det", "inv", "matrix_norm", "multi_dot", "slogdet", "solve", "vector_norm"]


def cross(input, other, *, dim: int = -1):  # noqa: A002 - torch's names
    """torch.linalg.cross: the cross product of 3-vectors along ``dim`` (default the last, where
    ``lm.cross``/torch.cross take the first dim of size 3).

    Args:
        input: a tensor whose ``dim`` has size 3.
        other: a tensor broadcast against it, of the same number of dims.
        dim: the dim of the vectors' components.
    """
    return _ops.cross(input, other, dim)


_joins_all(globals(), __all__)  # a Parameter, Buffer or host tensor joins the other operand's graph (join.py)
