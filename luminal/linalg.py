"""``lm.linalg``: the ``torch.linalg`` names luminal has (``vector_norm``, ``cross``)."""

from luminal.frontend.ops import linalg as _ops
from luminal.frontend.ops.norms import vector_norm

__all__ = ["cross", "vector_norm"]


def cross(input, other, *, dim: int = -1):  # noqa: A002 - torch's names
    """torch.linalg.cross: the cross product of 3-vectors along ``dim`` (default the last, where
    ``lm.cross``/torch.cross take the first dim of size 3).

    Args:
        input: a tensor whose ``dim`` has size 3.
        other: a tensor broadcast against it, of the same number of dims.
        dim: the dim of the vectors' components.
    """
    return _ops.cross(input, other, dim)
