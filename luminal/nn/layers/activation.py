"""Activation modules: thin wrappers over the frontend's activation ops, torch's constructor arguments.
They call the ops as functions, not methods, so a non-tensor input is reported by the op."""

from __future__ import annotations

from luminal.frontend import ops
from luminal.frontend.checks import check_tensors
from luminal.nn.module import Module


class _Elementwise(Module):
    """An activation without parameters; ``inplace`` is accepted for torch compatibility and ignored
    (graphs have no in-place ops)."""

    def __init__(self, inplace: bool = False):
        super().__init__()
        self.inplace = inplace


class ReLU(_Elementwise):
    def forward(self, x):
        return ops.relu(x)


class SiLU(_Elementwise):
    def forward(self, x):
        return ops.silu(x)


class Tanh(Module):
    def forward(self, x):
        return ops.tanh(x)


class Sigmoid(Module):
    def forward(self, x):
        return ops.sigmoid(x)


class Mish(_Elementwise):
    def forward(self, x):
        return ops.mish(x)


class GELU(Module):
    def __init__(self, approximate: str = "none"):
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise ValueError(f"GELU: approximate must be 'none' or 'tanh', got {approximate!r}")
        self.approximate = approximate

    def forward(self, x):
        return ops.gelu(x, approximate=self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class LeakyReLU(_Elementwise):
    def __init__(self, negative_slope: float = 0.01, inplace: bool = False):
        super().__init__(inplace)
        self.negative_slope = negative_slope

    def forward(self, x):
        return ops.leaky_relu(x, self.negative_slope)

    def extra_repr(self) -> str:
        return f"negative_slope={self.negative_slope}"


class ELU(_Elementwise):
    def __init__(self, alpha: float = 1.0, inplace: bool = False):
        super().__init__(inplace)
        self.alpha = alpha

    def forward(self, x):
        return ops.elu(x, self.alpha)


class Softplus(Module):
    def __init__(self, beta: float = 1.0, threshold: float = 20.0):
        super().__init__()
        self.beta, self.threshold = beta, threshold

    def forward(self, x):
        return ops.softplus(x, self.beta, self.threshold)


def _legacy_softmax_dim(ndim: int) -> int:
    """torch's implicit dim for ``Softmax(dim=None)``: 0 for 0-, 1- and 3-d inputs, else 1."""
    return 0 if ndim in (0, 1, 3) else 1


class Softmax(Module):
    def __init__(self, dim: int | None = None):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        check_tensors("softmax", input=x)
        return ops.softmax(x, self.dim if self.dim is not None else _legacy_softmax_dim(x.ndim))

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class LogSoftmax(Softmax):
    def forward(self, x):
        check_tensors("log_softmax", input=x)
        return ops.log_softmax(x, self.dim if self.dim is not None else _legacy_softmax_dim(x.ndim))
