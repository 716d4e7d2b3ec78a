"""torch's older ``nn.utils.weight_norm`` / ``remove_weight_norm`` (deprecated in torch for
``parametrizations.weight_norm``, and kept for code and checkpoints that use it): the parameter ``weight``
becomes the Parameters ``weight_g`` and ``weight_v`` (torch's state_dict names), and ``module.weight`` is
``g * v / ||v||``. torch recomputes it in a forward pre-hook; here reading ``module.weight`` computes it,
as a parametrized attribute does (``parametrize.py``): a tensor of the graph being built, so gradients
reach ``g`` and ``v``, and outside any graph a host tensor of the current values (torch's attribute is
the last forward's until the next one)."""

from __future__ import annotations

import warnings

from luminal.frontend import join
from luminal.nn.module import Module
from luminal.nn.parameter import Parameter
from luminal.nn.utils.parametrizations import _check_dim, _weight_norm, norm_except_dim
from luminal.nn.utils.parametrize import _host_tensor, _tensor_values, computed_attrs, set_computed


class WeightNorm:
    """The old weight norm of one parameter, as torch's (``name``, ``dim``; -1 for the whole tensor)."""

    parametrized = False  # (the module keeps its class name, as torch's)

    def __init__(self, name: str, dim: int | None):
        self.name = name
        self.dim = -1 if dim is None else dim

    def build(self, module: Module, graph):
        """``g * v / ||v||`` in ``graph``."""
        g, v = getattr(module, self.name + "_g"), getattr(module, self.name + "_v")
        return _weight_norm(join.into(v, graph), join.into(g, graph), self.dim)

    def assign(self, module: Module, value) -> None:
        raise AttributeError(f"{type(module).__name__}.{self.name} is computed from {self.name}_g and {self.name}_v "
                             f"(nn.utils.weight_norm): set those, or call nn.utils.remove_weight_norm first")

    def compute_weight(self, module: Module):
        """``module.<name>``: the weight in the graph being built (a host tensor outside one)."""
        return getattr(module, self.name)

    @staticmethod
    def apply(module: Module, name: str, dim: int | None) -> WeightNorm:
        """Replace the Parameter ``name`` by ``name_g`` and ``name_v``, computing ``name`` from them."""
        warnings.warn("`torch.nn.utils.weight_norm` is deprecated in favor of "
                      "`torch.nn.utils.parametrizations.weight_norm` (luminal has both).", FutureWarning,
                      stacklevel=3)
        if isinstance(computed_attrs(module).get(name), WeightNorm):
            raise RuntimeError(f"Cannot register two weight_norm hooks on the same parameter {name}")
        weight, _ = _check_dim("weight_norm", module, name, dim)
        if not isinstance(weight, Parameter):
            raise TypeError(f"weight_norm: '{name}' of {type(module).__name__} is a {type(weight).__name__}, not a "
                            f"Parameter")
        fn = WeightNorm(name, dim)
        g_values, g_dtype = _tensor_values(norm_except_dim(_host_tensor(weight, "weight_norm"), 2, fn.dim),
                                           "weight_norm")
        delattr(module, name)
        module.register_parameter(name + "_g", Parameter(g_values, g_dtype))
        module.register_parameter(name + "_v", Parameter(weight.data, weight.dtype))
        set_computed(module, name, fn)
        return fn

    def remove(self, module: Module) -> None:
        """Put back the Parameter ``name`` with the current ``g * v / ||v||``."""
        values, d = _tensor_values(getattr(module, self.name), "remove_weight_norm")
        set_computed(module, self.name, None)
        for n in (self.name + "_g", self.name + "_v"):
            delattr(module, n)
        setattr(module, self.name, Parameter(values, d))


def weight_norm(module: Module, name: str = "weight", dim: int | None = 0) -> Module:
    """torch's (deprecated) ``nn.utils.weight_norm``: ``module.<name>`` computed as ``g * v / ||v||`` from the
    Parameters ``<name>_g`` and ``<name>_v`` (module docstring); warns as torch's (FutureWarning).

    Args:
        module: the module. name: its parameter's name. dim: the dim whose slices are normalised (None or
            -1: the whole tensor, as torch's).

    Returns:
        The module.
    """
    WeightNorm.apply(module, name, dim)
    return module


def remove_weight_norm(module: Module, name: str = "weight") -> Module:
    """Undo :func:`weight_norm`: ``<name>`` is a Parameter again, holding the current weight, as torch's.

    Args:
        module: the module. name: the weight-normed parameter's name.

    Returns:
        The module.
    """
    fn = computed_attrs(module).get(name)
    if isinstance(fn, WeightNorm):
        fn.remove(module)
        return module
    raise ValueError(f"weight_norm of '{name}' not found in {type(module).__name__}")


__all__ = ["WeightNorm", "remove_weight_norm", "weight_norm"]
