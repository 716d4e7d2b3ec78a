"""Softmin and the shrinkage/threshold activations as torch's ``F`` functions and ``nn`` modules:
thin wrappers over the frontend's ops (``frontend/ops/activations.py``), torch's signatures."""

from __future__ import annotations

from luminal.frontend.checks import check_tensors
from luminal.frontend.ops import activations as act
from luminal.nn.layers.activation import _Elementwise, _legacy_softmax_dim
from luminal.nn.module import Module


def softmin(input, dim: int | None = None, _stacklevel: int = 3, dtype=None):  # noqa: A002
    """torch's ``F.softmin``: ``softmax(-input)`` along ``dim`` (None: torch's legacy implicit dim).

    Args:
        input: a tensor. dim: the dim to normalise. dtype: the dtype to compute in."""
    check_tensors("softmin", input=input)
    return act.softmin(input, dim if dim is not None else _legacy_softmax_dim(input.ndim), dtype)


def softshrink(input, lambd: float = 0.5):  # noqa: A002
    """torch's ``F.softshrink``: ``input -+ lambd`` outside ``[-lambd, lambd]``, 0 inside.

    Args:
        input: a float tensor. lambd: the half-width of the zeroed band (>= 0)."""
    return act.softshrink(input, lambd)


def hardshrink(input, lambd: float = 0.5):  # noqa: A002
    """torch's ``F.hardshrink``: ``input`` outside ``[-lambd, lambd]``, 0 inside.

    Args:
        input: a float tensor. lambd: the half-width of the zeroed band."""
    return act.hardshrink(input, lambd)


def tanhshrink(input):  # noqa: A002
    """torch's ``F.tanhshrink``: ``input - tanh(input)``.

    Args:
        input: a tensor."""
    return act.tanhshrink(input)


def threshold(input, threshold: float, value: float, inplace: bool = False):  # noqa: A002
    """torch's ``F.threshold``: ``input`` where it is above ``threshold``, else ``value``.

    Args:
        input: a tensor. threshold: the bound. value: the replacement. inplace: ignored."""
    return act.threshold(input, threshold, value)


class Softmin(Module):
    """torch's ``nn.Softmin(dim=None)`` (None: torch's legacy implicit dim).

    Args:
        dim: the dim normalised.
    """

    def __init__(self, dim: int | None = None):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return softmin(x, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class Softshrink(Module):
    """torch's ``nn.Softshrink(lambd=0.5)``.

    Args:
        lambd: the half-width of the zeroed band (>= 0).
    """

    def __init__(self, lambd: float = 0.5):
        super().__init__()
        self.lambd = lambd

    def forward(self, x):
        return act.softshrink(x, self.lambd)

    def extra_repr(self) -> str:
        return str(self.lambd)


class Hardshrink(Softshrink):
    """torch's ``nn.Hardshrink(lambd=0.5)``.

    Args:
        lambd: the half-width of the zeroed band.
    """

    def forward(self, x):
        return act.hardshrink(x, self.lambd)


class Tanhshrink(Module):
    """torch's ``nn.Tanhshrink()``: ``x - tanh(x)``."""

    def forward(self, x):
        return act.tanhshrink(x)


class Threshold(_Elementwise):
    """torch's ``nn.Threshold(threshold, value, inplace=False)``.

    Args:
        threshold: the bound. value: the replacement. inplace: ignored.
    """

    def __init__(self, threshold: float, value: float, inplace: bool = False):
        super().__init__(inplace)
        self.threshold, self.value = threshold, value

    def forward(self, x):
        return act.threshold(x, self.threshold, self.value)

    def extra_repr(self) -> str:
        return f"threshold={self.threshold}, value={self.value}" + (", inplace=True" if self.inplace else "")
