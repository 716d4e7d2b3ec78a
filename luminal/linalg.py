"""``lm.linalg``: the ``torch.linalg`` names luminal has (``vector_norm``)."""

from luminal.frontend.ops.norms import vector_norm

__all__ = ["vector_norm"]
