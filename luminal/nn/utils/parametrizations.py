"""``nn.utils.parametrizations``: torch's ready-made parametrizations, registered with
``parametrize.register_parametrization`` so the reparameterised tensor is computed in the graph from its
originals (gradients reach them) and saved under torch's state_dict names."""

from __future__ import annotations

import functools

import numpy as np

from luminal.core.errors import check_int
from luminal.frontend import join
from luminal.frontend.ops.norms import vector_norm
from luminal.frontend.seed import default_rng
from luminal.nn.layers.conv import ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
from luminal.nn.layers.linear import normalize
from luminal.nn.module import Module
from luminal.nn.parameter import Buffer
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
    starting at ``||w||`` and ``w``. A checkpoint of the old ``nn.utils.weight_norm`` (``<name>_g``,
    ``<name>_v``) loads too, as torch's.

    Args:
        module: the module. name: its parameter's name. dim: the dim whose slices are normalised.

    Returns:
        The module.
    """
    _check_dim("weight_norm", module, name, dim)
    parametrize.register_parametrization(module, name, _WeightNorm(dim), unsafe=True)

    module._register_load_state_dict_pre_hook(functools.partial(_weight_norm_compat_hook, name))
    return module


def _weight_norm_compat_hook(name: str, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                             error_msgs) -> None:
    """A load pre-hook (bound to ``name`` with ``functools.partial``: a module-level function, so the
    module still pickles once the parametrization is removed; torch's closure does not): a checkpoint of
    the old ``nn.utils.weight_norm`` (``<name>_g``, ``<name>_v``) loads, as torch's."""
    g_key, v_key = f"{prefix}{name}_g", f"{prefix}{name}_v"
    if g_key in state_dict and v_key in state_dict:
        state_dict[f"{prefix}parametrizations.{name}.original0"] = state_dict.pop(g_key)
        state_dict[f"{prefix}parametrizations.{name}.original1"] = state_dict.pop(v_key)


def _np_normalize(x: np.ndarray, eps: float) -> np.ndarray:
    return x / max(float(np.linalg.norm(x)), eps)


def _matrix(w, dim: int):
    """The weight (an array or a tensor) as a matrix: ``dim`` first, the other dims flattened."""
    if dim != 0:
        order = (dim, *(d for d in range(w.ndim) if d != dim))
        w = w.transpose(order) if isinstance(w, np.ndarray) else w.permute(order)
    return w.reshape(w.shape[0], -1)


def _sigma(mat, u_state, v_state, iterations: int, eps: float, v_first: bool = False):
    """The spectral norm estimate ``u . (mat @ v)`` after ``iterations`` power iterations on ``mat``
    detached, from the buffers ``u_state``, ``v_state`` (their values after this graph's updates so far);
    with iterations, the new vectors are written back after every run (``graph.assign``; a host graph
    is never run, and writes nothing). ``v_first``: torch's older order (v from u, then u from v).
    Differentiable through ``mat`` only, as torch's."""
    g = mat.graph
    u, v = (g.updates[s] if s in g.updates else join.into(s, g) for s in (u_state, v_state))
    fixed = mat.detach()
    for _ in range(iterations):
        if v_first:
            v = normalize(fixed.T @ u, dim=0, eps=eps)
        u = normalize(fixed @ v, dim=0, eps=eps)
        if not v_first:
            v = normalize(fixed.T @ u, dim=0, eps=eps)
    if iterations and not g.host:
        g.assign(u_state, u)
        g.assign(v_state, v)
    return (u.detach() * (mat @ v.detach())).sum()


class _SpectralNorm(Module):
    """The spectral-norm parametrization, as torch's: ``forward(w) = w / sigma``, ``sigma`` the largest
    singular value of ``w`` as a matrix (``dim`` first, the rest flattened), estimated by power
    iteration with the vectors ``_u`` and ``_v`` (buffers). In training mode each forward runs
    ``n_power_iterations`` more iterations (on the weight, detached) and, as BatchNorm's running
    statistics, every run of a program compiled from that graph writes the new ``_u`` and ``_v`` back
    (``graph.assign``); in eval mode they are read as they are. ``sigma`` is differentiated through the
    weight only, as torch's. A 1-d weight is divided by its norm.

    A host tensor (``module.weight`` read outside any graph, in training mode) is computed with the
    iterated vectors but writes nothing: no program runs it (torch's read would update them)."""

    def __init__(self, weight, n_power_iterations: int = 1, dim: int = 0, eps: float = 1e-12):
        super().__init__()
        ndim = weight.ndim
        dim = check_int("spectral_norm", "dim", dim)
        if dim >= ndim or dim < -ndim:
            raise IndexError(f"spectral_norm: Dimension out of range (expected to be in range of [-{ndim}, "
                             f"{ndim - 1}] but got {dim})")
        n_power_iterations = check_int("spectral_norm", "n_power_iterations", n_power_iterations)
        if n_power_iterations <= 0:
            raise ValueError(f"spectral_norm: Expected n_power_iterations to be positive, but got "
                             f"n_power_iterations={n_power_iterations}")
        self.dim = dim if dim >= 0 else dim + ndim
        self.eps = eps
        if ndim > 1:
            self.n_power_iterations = n_power_iterations
            mat = _matrix(np.asarray(weight).astype(np.float64), self.dim)
            rng = default_rng()  # (lm.manual_seed; torch's draws differ: load its _u, _v to match it)
            u = _np_normalize(rng.standard_normal(mat.shape[0]), eps)
            v = _np_normalize(rng.standard_normal(mat.shape[1]), eps)
            for _ in range(15):  # torch's start: 15 iterations at registration
                u = _np_normalize(mat @ v, eps)
                v = _np_normalize(mat.T @ u, eps)
            self.register_buffer("_u", Buffer(u, weight.dtype))
            self.register_buffer("_v", Buffer(v, weight.dtype))

    def forward(self, weight):
        if weight.ndim == 1:
            return normalize(weight, dim=0, eps=self.eps)
        iterations = self.n_power_iterations if self.training else 0
        return weight / _sigma(_matrix(weight, self.dim), self._u, self._v, iterations, self.eps)

    def right_inverse(self, value):
        return value


def spectral_norm(module: Module, name: str = "weight", n_power_iterations: int = 1, eps: float = 1e-12,
                  dim: int | None = None) -> Module:
    """torch's ``parametrizations.spectral_norm``: ``module.<name>`` becomes ``w / sigma``, ``sigma`` its
    largest singular value estimated by power iteration (see ``_SpectralNorm``: the vectors ``_u``, ``_v``
    are buffers, updated by every run of a program compiled in training mode). state_dict names as
    torch's: ``parametrizations.<name>.original``, ``parametrizations.<name>.0._u`` and ``._v``.

    Args:
        module: the module. name: its parameter's name. n_power_iterations: iterations per training
            forward. eps: the normalisation's floor. dim: the output dim (default 0; 1 for ConvTranspose).

    Returns:
        The module.
    """
    w, _ = _check_dim("spectral_norm", module, name, None)
    if dim is None:
        dim = 1 if isinstance(module, (ConvTranspose1d, ConvTranspose2d, ConvTranspose3d)) else 0
    return parametrize.register_parametrization(module, name, _SpectralNorm(w, n_power_iterations, dim, eps))


def orthogonal(module: Module, name: str = "weight", orthogonal_map: str | None = None, *,
               use_trivialization: bool = True):
    """torch's ``parametrizations.orthogonal``; raises NotImplementedError: its maps need
    ``matrix_exp`` ("matrix_exp", the square default), ``householder_product`` ("householder", the
    default otherwise) or, for "cayley" with the trivialization, a QR decomposition in ``right_inverse``,
    none of which luminal has. A map of your own built from ``lm.linalg.solve`` registers with
    ``parametrize.register_parametrization``.

    Args:
        module, name, orthogonal_map, use_trivialization: torch's arguments (for the message).
    """
    raise NotImplementedError(f"parametrizations.orthogonal({type(module).__name__}, {name!r}, "
                              f"orthogonal_map={orthogonal_map!r}) is not supported: torch's maps need matrix_exp, "
                              f"householder_product or a QR decomposition, which luminal lacks; register a "
                              f"parametrization of your own (e.g. a Cayley map with lm.linalg.solve) with "
                              f"nn.utils.parametrize.register_parametrization")


__all__ = ["orthogonal", "spectral_norm", "weight_norm"]
