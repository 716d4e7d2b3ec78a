"""torch's older ``nn.utils.spectral_norm`` / ``remove_spectral_norm`` (GAN code and checkpoints use it;
torch recommends ``parametrizations.spectral_norm``): the parameter ``weight`` becomes ``weight_orig``,
with the power-iteration vectors as the buffers ``weight_u`` and ``weight_v`` (torch's state_dict names),
and ``module.weight`` is ``weight_orig / sigma``.

torch recomputes the weight in a forward pre-hook, one power iteration per call in training mode. Here
reading ``module.weight`` computes it, as a parametrized attribute does (``parametrize.py``): in a
training-mode graph each read runs ``n_power_iterations`` (a forward reads its weight once) and the new
vectors are written back after every run of a program compiled from it, as BatchNorm's running
statistics. Outside any graph it is a host tensor of the current value, which writes nothing (torch's
attribute is the raw weight until the first forward). Checkpoints from before torch's version 1 of this
hook (a saved ``weight`` and no ``weight_v``) are refused by name.
"""

from __future__ import annotations

import functools

import numpy as np

from luminal.core.errors import check_int
from luminal.frontend import join
from luminal.frontend.seed import default_rng
from luminal.nn.layers.conv import ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
from luminal.nn.module import Module
from luminal.nn.parameter import Buffer, Parameter
from luminal.nn.utils.parametrizations import _matrix, _np_normalize, _sigma
from luminal.nn.utils.parametrize import _tensor_values, computed_attrs, set_computed


class SpectralNorm:
    """The old spectral norm of one parameter, as torch's (``name``, ``n_power_iterations``, ``dim``, ``eps``)."""

    parametrized = False  # (the module keeps its class name, as torch's)

    def __init__(self, name: str = "weight", n_power_iterations: int = 1, dim: int = 0, eps: float = 1e-12):
        self.name = name
        self.dim = dim
        n_power_iterations = check_int("spectral_norm", "n_power_iterations", n_power_iterations)
        if n_power_iterations <= 0:
            raise ValueError(f"spectral_norm: Expected n_power_iterations to be positive, but got "
                             f"n_power_iterations={n_power_iterations}")
        self.n_power_iterations = n_power_iterations
        self.eps = eps

    def build(self, module: Module, graph):
        """``weight_orig / sigma`` in ``graph``, iterating in training mode (module docstring)."""
        w = join.into(getattr(module, self.name + "_orig"), graph)
        iterations = self.n_power_iterations if module.training else 0
        return w / _sigma(_matrix(w, self.dim), getattr(module, self.name + "_u"), getattr(module, self.name + "_v"),
                          iterations, self.eps, v_first=True)

    def assign(self, module: Module, value) -> None:
        raise AttributeError(f"{type(module).__name__}.{self.name} is computed from {self.name}_orig "
                             f"(nn.utils.spectral_norm): set that, or call nn.utils.remove_spectral_norm first")

    @staticmethod
    def apply(module: Module, name: str, n_power_iterations: int, dim: int, eps: float) -> SpectralNorm:
        """Replace the Parameter ``name`` by ``name_orig`` and the buffers ``name_u``, ``name_v``."""
        if isinstance(computed_attrs(module).get(name), SpectralNorm):
            raise RuntimeError(f"Cannot register two spectral_norm hooks on the same parameter {name}")
        fn = SpectralNorm(name, n_power_iterations, dim, eps)
        weight = module.__dict__["_parameters"].get(name)
        if weight is None:
            raise ValueError(f"`SpectralNorm` cannot be applied as parameter `{name}` is None (or not a parameter "
                             f"of {type(module).__name__})")
        dim = check_int("spectral_norm", "dim", dim)
        if not -weight.ndim <= dim < weight.ndim:
            raise IndexError(f"spectral_norm: dim {dim} is out of range for {name} of shape {tuple(weight.shape)}")
        fn.dim = dim % weight.ndim
        mat = _matrix(weight.data.astype(np.float64), fn.dim)
        rng = default_rng()  # (lm.manual_seed; torch's draws differ: load its weight_u, weight_v to match it)
        u = _np_normalize(rng.standard_normal(mat.shape[0]), eps)
        v = _np_normalize(rng.standard_normal(mat.shape[1]), eps)
        delattr(module, name)
        module.register_parameter(name + "_orig", weight)
        module.register_buffer(name + "_u", Buffer(u, weight.dtype))
        module.register_buffer(name + "_v", Buffer(v, weight.dtype))
        set_computed(module, name, fn)
        module._register_load_state_dict_pre_hook(functools.partial(_refuse_version_0, name))
        return fn

    def remove(self, module: Module) -> None:
        """Put back the Parameter ``name`` with the current ``weight_orig / sigma`` (no iteration)."""
        training = module.__dict__["_training"]
        module.__dict__["_training"] = False  # (torch's: do_power_iteration=False)
        try:
            values, d = _tensor_values(getattr(module, self.name), "remove_spectral_norm")
        finally:
            module.__dict__["_training"] = training
        set_computed(module, self.name, None)
        for suffix in ("_u", "_v", "_orig"):
            delattr(module, self.name + suffix)
        module.register_parameter(self.name, Parameter(values, d))


def _refuse_version_0(name: str, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                      error_msgs) -> None:
    """A load pre-hook (bound to ``name`` with ``functools.partial``, which pickles with the module, as
    torch's hook object does): a state_dict from before torch's version 1 of spectral_norm (it saved the
    normalised ``weight`` and no ``weight_v``, which torch reconstructs with a pseudo-inverse) is refused
    by name instead of failing as missing keys."""
    key = prefix + name
    if key in state_dict and key + "_orig" in state_dict and key + "_v" not in state_dict:
        error_msgs.append(f"{key}: a spectral_norm checkpoint from before torch 1.0 ({name} saved, no "
                          f"{name}_v) is not supported; load it in torch and save its state_dict again")


def spectral_norm(module: Module, name: str = "weight", n_power_iterations: int = 1, eps: float = 1e-12,
                  dim: int | None = None) -> Module:
    """torch's older ``nn.utils.spectral_norm``: ``module.<name>`` becomes ``<name>_orig / sigma`` (module
    docstring); ``dim`` defaults to 1 for a ConvTranspose, else 0, as torch's.

    Args:
        module: the module. name: its parameter's name. n_power_iterations: iterations per training read.
        eps: the normalisation's floor. dim: the output dim.

    Returns:
        The module.
    """
    if dim is None:
        dim = 1 if isinstance(module, (ConvTranspose1d, ConvTranspose2d, ConvTranspose3d)) else 0
    SpectralNorm.apply(module, name, n_power_iterations, dim, eps)
    return module


def remove_spectral_norm(module: Module, name: str = "weight") -> Module:
    """Undo :func:`spectral_norm`: ``<name>`` is a Parameter again, holding the current weight, as torch's.

    Args:
        module: the module. name: the spectral-normed parameter's name.

    Returns:
        The module.
    """
    fn = computed_attrs(module).get(name)
    if not isinstance(fn, SpectralNorm):
        raise ValueError(f"spectral_norm of '{name}' not found in {type(module).__name__}")
    fn.remove(module)
    return module


__all__ = ["SpectralNorm", "remove_spectral_norm", "spectral_norm"]
