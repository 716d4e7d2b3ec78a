"""``nn.utils.parametrizations``: torch's ready-made parametrizations, registered with
``parametrize.register_parametrization`` so the reparameterised tensor is computed in the graph from its
originals (gradients reach them) and saved under torch's state_dict names."""

from __future__ import annotations

from luminal.core.errors import check_int
from luminal.frontend.ops.norms import vector_norm
from luminal.nn.module import Module
from luminal.nn.utils import parametrize


def norm_except_dim(v, pow: float = 2, dim: int = 0):  # noqa: A002 - torch's name
    """torch's ``norm_except_dim``: the ``pow``-norm of ``v`` over every dim but ``dim`` (kept, the
    others of size 1), or over the whole tensor (0-d) when ``dim`` is -1, as torch's (-1 is its "no dim",
    not the last one).

    Args:
        v: a float tensor. pow: the order of the norm. dim: the dim kept, or -1.
    """
    if dim == -1:
        return vector_norm(v, pow)
    other = tuple(d for d in range(v.ndim) if d != dim % v.ndim)
    return vector_norm(v, pow, dim=other, keepdim=True) if other else v.abs()


def _weight_norm(v, g, dim: int):
    """torch's ``_weight_norm``: ``v * (g / norm_except_dim(v, 2, dim))``."""
    return v * (g / norm_except_dim(v, 2, dim))


class _WeightNorm(Module):
    """The weight-norm parametrization, as torch's: ``forward(g, v) = g * v / ||v||`` (the norm over every
    dim but ``dim``); ``right_inverse(w) = (||w||, w)``."""

    def __init__(self, dim: int | None = 0):
        super().__init__()
        self.dim = -1 if dim is None else dim

    def forward(self, weight_g, weight_v):
        return _weight_norm(weight_v, weight_g, self.dim)

    def right_inverse(self, weight):
        return norm_except_dim(weight, 2, self.dim), weight


def _check_dim(where: str, module: Module, name: str, dim):
    """The tensor ``name`` of ``module`` (it must be a parameter or buffer) and ``dim`` checked against
    its rank (None and -1: the whole tensor, as torch's)."""
    w = getattr(module, name, None)
    if w is None or not hasattr(w, "shape"):
        raise ValueError(f"{where}: Module '{type(module).__name__}' has no parameter or buffer with name '{name}'")
    if dim is not None:
        dim = check_int(where, "dim", dim)
        if not -w.ndim <= dim < max(w.ndim, 1):
            raise IndexError(f"{where}: dim {dim} is out of range for {name} of shape {tuple(w.shape)} (expected "
                             f"-1 for the whole tensor, or a dim in [{-w.ndim}, {w.ndim - 1}])")
    return w, dim


def weight_norm(module: Module, name: str = "weight", dim: int | None = 0) -> Module:
    """torch's ``parametrizations.weight_norm``: ``module.<name>`` becomes ``g * v / ||v||`` (the norm over
    every dim but ``dim``; over the whole tensor for ``dim`` None or -1, as torch's), with ``g`` and ``v``
    the Parameters ``parametrizations.<name>.original0`` and ``original1`` (torch's state_dict names),
    starting at ``||w||`` and ``w``.

    Args:
        module: the module. name: its parameter's name. dim: the dim whose slices are normalised.

    Returns:
        The module.
    """
    _check_dim("weight_norm", module, name, dim)
    return parametrize.register_parametrization(module, name, _WeightNorm(dim), unsafe=True)


__all__ = ["weight_norm"]
