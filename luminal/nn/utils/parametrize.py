"""``nn.utils.parametrize``: a module's parameter (or buffer) computed from other parameters, as torch's.

``register_parametrization(m, "weight", P())`` replaces the parameter ``m.weight`` by
``m.parametrizations.weight``, a :class:`ParametrizationList` holding ``P`` and the parameter(s) it is
computed from (``original``, or ``original0``, ``original1``, ... when ``P.right_inverse`` returns a
sequence: torch's state_dict names). Reading ``m.weight`` then computes ``P(original)``, as torch's
does, by torch's mechanism: the module's class is swapped for a subclass (``ParametrizedLinear``) with a
property of that name.

What the property gives is a tensor of the graph being built: inside a module call (a ``forward``
reading ``self.weight`` or ``self.weight.on(g)``) the parametrization is built in that call's graph
from its originals, so ``train.grad`` and ``train.compile_step`` differentiate through it to the
originals and the optimizer updates them. Outside any graph (a script inspecting ``m.weight``) it is a
host tensor (``frontend/host.py``) of the current value: ``np.asarray(m.weight)`` reads it, and
``m.weight.on(g)`` builds it in ``g`` (a host tensor itself used in a graph is a constant there, with no
gradient: ``train.grad`` then reports the originals unused). Assigning ``m.weight = value`` (an array
or a tensor whose values are known now) writes ``right_inverse(value)`` into the originals, as torch's.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from contextlib import contextmanager

import numpy as np

from luminal.core import dtype as dt
from luminal.frontend import building, join
from luminal.frontend.graph import Graph
from luminal.frontend.host import host_graph
from luminal.frontend.state import State
from luminal.frontend.tensor import GraphTensor
from luminal.nn.layers.containers import ModuleDict, ModuleList
from luminal.nn.module import Module
from luminal.nn.parameter import Buffer, Parameter

_cache = threading.local()  # .depth: open cached() blocks; .table: (module id, name, graph id) -> (graph, tensor)


@contextmanager
def cached():
    """torch's ``parametrize.cached()``: inside the block, each parametrized tensor is built once per
    graph and module and reused by every later read. Outside, every read builds it again, as torch's
    recomputes it on every access; a graph shares the identical nodes such rebuilding makes, so here the
    block saves only building time (an RNN reading its parametrized weight at every step), never
    compute."""
    _cache.depth = getattr(_cache, "depth", 0) + 1
    if _cache.depth == 1:
        _cache.table = {}
    try:
        yield
    finally:
        _cache.depth -= 1
        if not _cache.depth:
            _cache.table = {}


class ParametrizedTensor(GraphTensor):
    """What reading a parametrized attribute gives: a tensor (of the graph being built, or a host tensor
    outside any graph) that, as a Parameter does, also gives itself in another graph: ``on(g)`` builds the
    parametrization in ``g`` from its originals (the layers read ``self.weight.on(g)``)."""

    __slots__ = ("_build",)

    def on(self, graph: Graph) -> GraphTensor:
        """This parametrized tensor as a tensor of ``graph`` (itself when it is one already).

        Args:
            graph: the Graph to build it in.
        """
        return self if graph is self.graph else self._build(graph)


def _tensor_values(x, what: str) -> tuple[np.ndarray, dt.DType]:
    """The values and lm dtype of ``x`` (an array, a State, a torch CPU tensor or a tensor whose values
    are known now); a graph's tensor has no values yet and is refused, naming ``what``."""
    if isinstance(x, GraphTensor):
        if not x.graph.host:
            raise ValueError(f"{what}: got a tensor of a graph, whose values are known only when a compiled program "
                             f"runs; pass an array (or a tensor made outside any graph)")
        return np.asarray(x), x.dtype
    if isinstance(x, State):
        return x.data.copy(), x.dtype
    arr = np.asarray(x)
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"{what}: expected a tensor or an array of numbers, got {type(x).__name__}")
    return arr, dt.as_dtype(dt.int32 if arr.dtype.kind in "iu" else arr.dtype)


def _host_tensor(x, what: str, dtype=None) -> GraphTensor:
    """``x`` as a host tensor (a parametrization's ``right_inverse`` is given one, as torch's a tensor);
    ``dtype``: the dtype a plain array takes (a tensor keeps its own)."""
    values, d = _tensor_values(x, what)
    if dtype is not None and not isinstance(x, (GraphTensor, State)):
        d = dtype
    return host_graph().constant(dt.to_storage(values, d), d)


def _is_tensor(x) -> bool:
    return isinstance(x, (GraphTensor, State, np.ndarray))


def _write(original: State, value, what: str) -> None:
    """Write ``value`` (a right_inverse's result) into ``original`` in place (a new shape replaces its
    storage, as torch's ``set_`` does); its dtype must be the original's, as torch requires."""
    values, d = _tensor_values(value, what)
    if d is not original.dtype:
        raise ValueError(f"{what}: the tensor returned by right_inverse has dtype {d.name} while {original.describe()} "
                         f"has dtype {original.dtype.name}")
    if tuple(values.shape) == tuple(original.shape):
        original.set(values)
    else:
        original._replace(np.array(dt.to_storage(values, d), order="C", copy=True))


class ParametrizationList(ModuleList):
    """The parametrizations of one tensor, applied in order, and the tensor(s) they start from:
    ``original`` (when ``right_inverse`` gives one tensor, or there is none: the module's own Parameter,
    the same object, so optimizers built before keep it) or ``original0``, ``original1``, ... (new
    Parameters, or Buffers for a parametrized buffer), as torch's.

    Args:
        modules: the parametrizations (at least one). original: the Parameter or Buffer parametrized.
        unsafe: skip the check that the parametrization keeps the tensor's shape and dtype.
    """

    def __init__(self, modules, original: State, unsafe: bool = False):
        modules = list(modules)
        if not modules:
            raise ValueError("ParametrizationList requires one or more modules.")
        super().__init__(modules)
        self.unsafe = bool(unsafe)
        shape, dtype = tuple(original.shape), original.dtype
        new = start = _host_tensor(original, "register_parametrization")
        for m in reversed(modules):
            if hasattr(m, "right_inverse"):
                try:
                    new = m.right_inverse(new)
                except NotImplementedError:
                    pass
        if not _is_tensor(new) and not isinstance(new, Sequence):
            raise ValueError(f"'right_inverse' must return a Tensor or a Sequence of tensors (list, tuple...). Got "
                             f"{type(new).__name__}")
        self.is_tensor = _is_tensor(new)
        self.ntensors = 1 if self.is_tensor else len(new)
        if self.is_tensor:
            if new is not start:  # (no right_inverse: the original keeps its values)
                d = new.dtype if isinstance(new, (GraphTensor, State)) else _tensor_values(new, "right_inverse")[1]
                if d is not original.dtype:
                    raise ValueError(f"When `right_inverse` outputs one tensor, it may not change the dtype.\n"
                                     f"original.dtype: {original.dtype.name}\nright_inverse(original).dtype: {d.name}")
                _write(original, new, "register_parametrization")
            _register_state(self, "original", original)
        else:
            for i, t in enumerate(new):
                if not _is_tensor(t):
                    raise ValueError(f"'right_inverse' must return a Tensor or a Sequence of tensors (list, "
                                     f"tuple...). Got element {i} of the sequence with type {type(t).__name__}.")
                values, d = _tensor_values(t, "right_inverse")
                state = (Parameter(values, d, requires_grad=original.requires_grad) if isinstance(original, Parameter)
                         else Buffer(values, d))
                _register_state(self, f"original{i}", state)
        if not self.unsafe:
            z = self._compute(host_graph())
            _check_same("Registering a parametrization", z, shape, dtype,
                        "unparametrized {what}: {want}\nparametrized {what}: {got}")

    def __repr__(self):
        return "ParametrizationList" + super().__repr__()[len("ModuleList"):]

    def originals(self) -> list[State]:
        """The tensor(s) the parametrizations start from, in order."""
        return [self.original] if self.is_tensor else [getattr(self, f"original{i}") for i in range(self.ntensors)]

    def _compute(self, g: Graph) -> GraphTensor:
        """The parametrized tensor built in ``g`` from the originals (constants of a host graph)."""
        x = self[0](*(join.into(o, g) for o in self.originals()))
        for m in list(self)[1:]:
            x = m(x)
        if not isinstance(x, GraphTensor):
            raise ValueError(f"A parametrization must return a tensor. Got {type(x).__name__}.")
        return x

    def forward(self) -> GraphTensor:
        """The parametrized tensor, in the graph being built (a host tensor outside any graph)."""
        g = building.current()
        return self._compute(g if isinstance(g, Graph) else host_graph())

    def right_inverse(self, value) -> None:
        """Write the originals from which the parametrizations give ``value`` (each parametrization's
        ``right_inverse``, last first), as torch's; what assigning the parametrized attribute does."""
        current = self._compute(host_graph())
        value = _host_tensor(value, "right_inverse", current.dtype)
        for m in reversed(list(self)):
            if not hasattr(m, "right_inverse"):
                raise RuntimeError(f"parametrization {type(m).__name__} does not implement right_inverse.")
            value = m.right_inverse(value)
        if self.is_tensor:
            if not _is_tensor(value):
                raise ValueError(f"`right_inverse` should return a tensor. Got {type(value).__name__}")
            _write(self.original, value, "right_inverse")
            return
        if not isinstance(value, Sequence) or _is_tensor(value):
            raise ValueError(f"'right_inverse' must return a sequence of tensors. Got {type(value).__name__}.")
        if len(value) != self.ntensors:
            raise ValueError(f"'right_inverse' must return a sequence of tensors of length {self.ntensors}. Got a "
                             f"sequence of length {len(value)}.")
        checked = []
        for i, (o, t) in enumerate(zip(self.originals(), value)):
            values, d = _tensor_values(t, f"right_inverse (tensor {i})")
            if d is not o.dtype:
                raise ValueError(f"Tensor {i} returned by `right_inverse` has dtype {d.name} while `original{i}` has "
                                 f"dtype {o.dtype.name}")
            checked.append((o, values))
        for o, values in checked:  # (every one checked first: no half-written originals)
            _write(o, values, "right_inverse")


def _register_state(module: Module, name: str, s: State) -> None:
    if isinstance(s, Parameter):
        module.register_parameter(name, s)
    else:
        module.register_buffer(name, s)


def _check_same(what: str, z, shape: tuple, dtype: dt.DType, layout: str) -> None:
    """torch's checks that a parametrization (without ``unsafe``) keeps the tensor's dtype and shape."""
    if not isinstance(z, GraphTensor):
        raise ValueError(f"A parametrization must return a tensor. Got {type(z).__name__}.")
    if z.dtype is not dtype:
        raise ValueError(f"{what} may not change the dtype of the tensor, unless the `unsafe` flag is enabled.\n"
                         + layout.format(what="dtype", want=dtype.name, got=z.dtype.name))
    if tuple(z.shape) != tuple(shape):
        raise ValueError(f"{what} may not change the shape of the tensor, unless the `unsafe` flag is enabled.\n"
                         + layout.format(what="shape", want=tuple(shape), got=tuple(z.shape)))


class _Computed(property):
    """The property a module's class has for each computed name (a parametrization's, the old weight norm's)."""


class _ByParametrizations:
    """How ``register_parametrization``'s names are computed and assigned: from ``module.parametrizations``."""

    parametrized = True

    def __init__(self, name: str):
        self.name = name

    def build(self, module: Module, g: Graph) -> GraphTensor:
        return module.parametrizations[self.name]._compute(g)

    def assign(self, module: Module, value) -> None:
        module.parametrizations[self.name].right_inverse(value)


def _read(module: Module, name: str, how) -> ParametrizedTensor:
    """``module.<name>``: the tensor ``how`` computes, in the graph being built (module docstring)."""

    def build(g: Graph) -> GraphTensor:
        table = getattr(_cache, "table", None) if getattr(_cache, "depth", 0) else None
        key = (id(module), name, id(g))
        if table is not None and key in table:
            return table[key][1]
        t = how.build(module, g)
        if table is not None:
            table[key] = (g, t)  # (the graph kept alive: its id stays its own while cached)
        return t

    return _built(build)


def _built(build) -> ParametrizedTensor:
    """``build(g)`` (a tensor computed from parameters in the graph ``g``) in the graph being built, else
    in a host graph, as a :class:`ParametrizedTensor` whose ``on`` builds it in another graph."""
    g = building.current()
    t = build(g if isinstance(g, Graph) else host_graph())
    out = ParametrizedTensor(t.graph, t.node, t.layout, t.origin)
    out._build = build
    return out


def computed_attrs(module: Module) -> dict:
    """The module's computed names: name -> how (an object with ``build(module, graph)`` and
    ``assign(module, value)``)."""
    return dict(type(module).__dict__.get("_computed_attrs", {}))


def set_computed(module: Module, name: str, how) -> None:
    """Make ``module.<name>`` computed by ``how`` (None: no longer computed), by giving the module a new
    class: its original class with a property per computed name (torch's ``ParametrizedLinear`` when a
    parametrization is among them). A new class for every change, so a deep copy (which shares its
    original's class) keeps its own."""
    base = type(module).__dict__.get("_parametrized_base", type(module))
    attrs = computed_attrs(module)
    if how is None:
        attrs.pop(name, None)
    else:
        attrs[name] = how
    object.__setattr__(module, "__class__", _computed_class(base, attrs) if attrs else base)


def _computed_class(base: type, attrs: dict) -> type:
    def setattr_(self, name, value):
        if isinstance(getattr(type(self), name, None), _Computed):
            object.__setattr__(self, name, value)  # (the property: how.assign, e.g. right_inverse)
        else:
            base.__setattr__(self, name, value)

    def reduce_ex(self, protocol):
        """Pickle rebuilds the class from ``base`` and ``attrs`` (``pickle`` cannot find a class made here
        by name), so a module under the older weight_norm / spectral_norm pickles, as torch's (whose hooks
        leave the class alone); a parametrized one is refused, as torch refuses it."""
        if any(h.parametrized for h in attrs.values()):
            raise RuntimeError(f"Serialization of parametrized modules is only supported through state_dict(): "
                               f"{type(self).__name__}'s class was made when {', '.join(sorted(attrs))} became "
                               f"computed by a parametrization, so pickle cannot find it again")
        return _computed_instance, (base, attrs), self.__getstate__()

    body = {"__setattr__": setattr_, "__reduce_ex__": reduce_ex, "__module__": base.__module__,
            "_parametrized_base": base, "_computed_attrs": attrs}
    for n, how in attrs.items():
        body[n] = _Computed(lambda self, n=n, how=how: _read(self, n, how),
                            lambda self, value, how=how: how.assign(self, value))
    name = f"Parametrized{base.__name__}" if any(h.parametrized for h in attrs.values()) else base.__name__
    return type(name, (base,), body)


def _computed_instance(base: type, attrs: dict) -> Module:
    """An empty instance of ``base`` with the computed names ``attrs`` (what unpickling starts from)."""
    cls = _computed_class(base, attrs)
    return cls.__new__(cls)


def type_before_parametrizations(module: Module) -> type:
    """The module's class before any parametrization was registered (``Linear`` for a ``ParametrizedLinear``)."""
    return type(module).__dict__.get("_parametrized_base", type(module)) if is_parametrized(module) else type(module)


def is_parametrized(module: Module, tensor_name: str | None = None) -> bool:
    """Whether ``module`` has a parametrization (on ``tensor_name``, when given), as torch's.

    Args:
        module: the module. tensor_name: a name, or None for any.
    """
    plists = module.__dict__.get("_modules", {}).get("parametrizations")
    if not isinstance(plists, ModuleDict):
        return False
    return len(plists) > 0 if tensor_name is None else tensor_name in plists


def register_parametrization(module: Module, tensor_name: str, parametrization: Module, *,
                             unsafe: bool = False) -> Module:
    """Make ``module.<tensor_name>`` (a parameter or buffer) computed as ``parametrization(original)``,
    as torch's: the tensor moves to ``module.parametrizations.<tensor_name>.original`` (or ``original0``,
    ... when ``parametrization.right_inverse`` returns a sequence), and reading the attribute builds the
    parametrization from it in the graph being built (module docstring), so gradients reach the
    originals. Registering on a name already parametrized appends: the new one is applied last.

    Args:
        module: the module. tensor_name: the parameter's or buffer's name.
        parametrization: an nn.Module whose ``forward`` maps the original(s) to the tensor, and may
            define ``right_inverse`` (the original(s) giving a tensor).
        unsafe: skip the check that the parametrization keeps the tensor's shape and dtype.

    Returns:
        The module.
    """
    if not isinstance(parametrization, Module):
        raise TypeError(f"register_parametrization: the parametrization must be an nn.Module, got "
                        f"{type(parametrization).__name__}")
    parametrization.train(module.__dict__["_training"])
    if is_parametrized(module, tensor_name):
        if not unsafe:
            y = getattr(module, tensor_name)
            x = parametrization(y)
            _check_same("Registering a parametrization", x, tuple(y.shape), y.dtype,
                        f"module.{tensor_name}.{{what}}: {{want}}\nparametrization(module.{tensor_name}).{{what}}: "
                        f"{{got}}")
            if hasattr(parametrization, "right_inverse"):
                try:
                    z = parametrization.right_inverse(x)
                except NotImplementedError:
                    pass
                else:
                    if not _is_tensor(z):
                        raise ValueError(f"parametrization.right_inverse must return a tensor. Got: "
                                         f"{type(z).__name__}")
                    _check_same(f"The tensor returned by parametrization.right_inverse (module.{tensor_name})",
                                _host_tensor(z, "right_inverse"), tuple(y.shape), y.dtype,
                                f"module.{tensor_name}.{{what}}: {{want}}\nreturned {{what}}: {{got}}")
        plist = module.parametrizations[tensor_name]
        plist.append(parametrization)
        plist.unsafe |= bool(unsafe)
        return module
    own = module.__dict__
    if tensor_name not in own["_parameters"] and tensor_name not in own["_buffers"] \
            or getattr(module, tensor_name) is None:
        raise ValueError(f"Module '{type(module).__name__}' does not have a parameter, a buffer, or a parametrized "
                         f"element with name '{tensor_name}'")
    plist = ParametrizationList([parametrization], getattr(module, tensor_name), unsafe=unsafe)
    delattr(module, tensor_name)
    if not is_parametrized(module):
        module.parametrizations = ModuleDict()
    module.parametrizations[tensor_name] = plist
    set_computed(module, tensor_name, _ByParametrizations(tensor_name))
    return module


def remove_parametrizations(module: Module, tensor_name: str, leave_parametrized: bool = True) -> Module:
    """Undo ``register_parametrization`` on ``tensor_name``, as torch's: with ``leave_parametrized`` the
    tensor keeps its current parametrized value (in the ``original`` Parameter itself, when there is one
    original: optimizers holding it keep working; else in a new Parameter), without it the tensor goes
    back to ``original`` (refused for several originals: there is no single tensor to go back to).

    Args:
        module: the module. tensor_name: the parametrized name.
        leave_parametrized: keep the current parametrized value.

    Returns:
        The module.
    """
    if not is_parametrized(module, tensor_name):
        raise ValueError(f"Module {type(module).__name__} does not have a parametrization on {tensor_name}")
    plist = module.parametrizations[tensor_name]
    if plist.is_tensor:
        original = plist.original
        if leave_parametrized:
            _write(original, getattr(module, tensor_name), f"remove_parametrizations({tensor_name!r})")
    elif leave_parametrized:
        t = getattr(module, tensor_name)
        values, d = _tensor_values(t, f"remove_parametrizations({tensor_name!r})")
        first = plist.original0
        original = Parameter(values, d, requires_grad=first.requires_grad) if isinstance(first, Parameter) \
            else Buffer(values, d)
    else:
        raise ValueError("Cannot leave unparametrized (`leave_parametrized=False`) a tensor that is parametrized in "
                         "terms of a sequence of tensors.")
    del module.parametrizations[tensor_name]
    set_computed(module, tensor_name, None)
    if not len(module.parametrizations):
        delattr(module, "parametrizations")
    _register_state(module, tensor_name, original)
    return module


def transfer_parametrizations_and_params(from_module: Module, to_module: Module,
                                         tensor_name: str | None = None) -> Module:
    """Register ``from_module``'s parametrizations (all, or those of ``tensor_name``) on ``to_module``,
    sharing the same parametrization modules and original Parameters, as torch's.

    Args:
        from_module: the parametrized module. to_module: the module to parametrize.
        tensor_name: one name, or None for every parametrized one.

    Returns:
        ``to_module``.
    """
    if not is_parametrized(from_module):
        return to_module
    names = list(from_module.parametrizations.keys()) if tensor_name is None else [tensor_name]
    for name in names:
        src = from_module.parametrizations[name]
        if not hasattr(to_module, name):
            values, d = _tensor_values(getattr(from_module, name), "transfer_parametrizations_and_params")
            setattr(to_module, name, Parameter(values, d))
        for p in src:
            register_parametrization(to_module, name, p)
        dst = to_module.parametrizations[name]
        for i, o in enumerate(src.originals()):
            _register_state(dst, "original" if src.is_tensor else f"original{i}", o)
    return to_module


__all__ = ["ParametrizationList", "ParametrizedTensor", "cached", "is_parametrized", "register_parametrization",
           "remove_parametrizations", "transfer_parametrizations_and_params", "type_before_parametrizations"]
