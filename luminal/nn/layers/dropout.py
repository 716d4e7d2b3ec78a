"""Dropout: in training mode a fresh random mask on every run of the compiled program."""

from __future__ import annotations

from luminal.core.errors import check_number, op_error
from luminal.frontend.checks import check_tensors
from luminal.nn.module import Module


def dropout(x, p: float = 0.5, training: bool = True):
    """torch's ``F.dropout``: zero each element with probability ``p`` and scale the survivors by
    ``1/(1-p)`` so the expectation is unchanged. The noise is a graph input drawn from ``x.graph.rng``
    on every call, so masks differ between runs and are reproducible by seeding that generator."""
    check_tensors("dropout", input=x)
    if not 0.0 <= check_number("dropout", "p", p, x) <= 1.0:
        raise op_error(ValueError, "dropout", f"probability has to be between 0 and 1, but got {p}", x)
    if not training or p == 0.0:
        return x
    if p == 1.0:
        return x * 0.0
    keep = x.graph.rand(x.shape) >= p
    return x * keep.to(x.dtype) * (1.0 / (1.0 - p))


class Dropout(Module):
    def __init__(self, p: float = 0.5, inplace: bool = False):
        super().__init__()
        if not 0.0 <= check_number("Dropout", "p", p) <= 1.0:
            raise ValueError(f"Dropout: probability has to be between 0 and 1, but got {p}")
        self.p, self.inplace = p, inplace

    def forward(self, x):
        return dropout(x, self.p, self.training)

    def extra_repr(self) -> str:
        return f"p={self.p}"
