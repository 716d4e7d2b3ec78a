"""Containers: ``Sequential`` and ``ModuleList`` (children named "0", "1", ... as in torch's state_dict)."""

from __future__ import annotations

import operator
from collections import OrderedDict

from luminal.nn.module import Module, _addindent
from luminal.nn.parameter import Parameter


class Sequential(Module):
    """Calls its children in order; built from modules or an ``OrderedDict`` of named modules.

    Args:
        *args: the modules, or one OrderedDict of name -> module.
    """

    def __init__(self, *args):
        super().__init__()
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            for name, m in args[0].items():
                self.add_module(name, _module("Sequential", m))
        else:
            for i, m in enumerate(args):
                self.add_module(str(i), _module("Sequential", m))

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return Sequential(OrderedDict(list(self._modules.items())[idx]))
        return self._modules[self._key(idx)]

    def __setitem__(self, idx, module: Module) -> None:
        """Replace the module at ``idx`` (its name is kept)."""
        setattr(self, self._key(idx), _module("Sequential", module))

    def __delitem__(self, idx) -> None:
        """Remove the module(s) at ``idx`` (an int or a slice); the rest are renamed "0", "1", ..., as torch's."""
        keys = list(self._modules)[idx] if isinstance(idx, slice) else [self._key(idx)]
        _renumber(self, [m for k, m in self._modules.items() if k not in keys])

    def _key(self, idx) -> str:
        return list(self._modules)[_index("Sequential", idx, len(self))]

    def __add__(self, other: Sequential) -> Sequential:
        """A new Sequential of this one's modules, then ``other``'s (renamed "0", "1", ...)."""
        if not isinstance(other, Sequential):
            raise TypeError(f"Sequential + {type(other).__name__}: can only add a Sequential")
        return Sequential(*self, *other)

    def append(self, module: Module) -> Sequential:
        """Add ``module`` at the end, under the name ``str(len(self))``, as torch's.

        Args:
            module: the module to append.

        Returns:
            This Sequential.
        """
        self.add_module(str(len(self)), _module("Sequential.append", module))
        return self

    def extend(self, modules) -> Sequential:
        """Append every module of ``modules`` (another Sequential, a list), in order.

        Args:
            modules: an iterable of modules.

        Returns:
            This Sequential.
        """
        for m in _modules("Sequential.extend", modules):
            self.append(m)
        return self

    def insert(self, index: int, module: Module) -> Sequential:
        """Insert ``module`` before position ``index`` (as ``list.insert``); the modules are renamed
        "0", "1", ...

        Args:
            index: the position.
            module: the module to insert.

        Returns:
            This Sequential.
        """
        items = list(self._modules.values())
        items.insert(_insert_index("Sequential", index, len(items)), _module("Sequential.insert", module))
        _renumber(self, items)
        return self

    def pop(self, idx) -> Module:
        """Remove the module at ``idx`` and return it (the rest are renamed "0", "1", ...)."""
        m = self[idx]
        del self[idx]
        return m

    def forward(self, x):
        for m in self._modules.values():
            x = m(x)
        return x


class ModuleList(Module):
    """A list of modules registered as children (so their parameters are found and saved).

    Args:
        modules: an optional iterable of modules.
    """

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            for m in _modules("ModuleList", modules):
                self.append(m)

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return ModuleList(list(self._modules.values())[idx])
        return self._modules[str(_index("ModuleList", idx, len(self)))]

    def __setitem__(self, idx: int, module: Module) -> None:
        self.add_module(str(_index("ModuleList", idx, len(self))), _module("ModuleList", module))

    def __delitem__(self, idx) -> None:
        """Remove the module(s) at ``idx`` (an int or a slice); the rest are renumbered, as torch's."""
        items = list(self._modules.values())
        if isinstance(idx, slice):
            del items[idx]
        else:
            del items[_index("ModuleList", idx, len(self))]
        _renumber(self, items)

    def __add__(self, other) -> ModuleList:
        """A new ModuleList of this one's modules, then ``other``'s."""
        return ModuleList([*self, *_modules("ModuleList +", other)])

    def __iadd__(self, modules) -> ModuleList:
        return self.extend(modules)

    def append(self, module: Module) -> ModuleList:
        """Add ``module`` at the end.

        Args:
            module: the module to append.

        Returns:
            This ModuleList.
        """
        self.add_module(str(len(self)), _module("ModuleList.append", module))
        return self

    def extend(self, modules) -> ModuleList:
        """Append every module of ``modules``, in order.

        Args:
            modules: an iterable of modules.

        Returns:
            This ModuleList.
        """
        for m in _modules("ModuleList.extend", modules):
            self.append(m)
        return self

    def insert(self, index: int, module: Module) -> None:
        """Insert ``module`` before position ``index`` (as ``list.insert``); the later modules are renumbered.

        Args:
            index: the position.
            module: the module to insert.
        """
        items = list(self._modules.values())
        items.insert(_insert_index("ModuleList", index, len(items)), _module("ModuleList.insert", module))
        _renumber(self, items)

    def pop(self, idx) -> Module:
        """Remove the module at ``idx`` and return it (the rest are renumbered)."""
        m = self[idx]
        del self[idx]
        return m

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ModuleList is not callable; iterate over it in a forward")

    def __repr__(self):
        """torch's: runs of identical modules are shown once, as ``(0-2): 3 x Linear(...)``."""
        reprs = [repr(m) for m in self]
        if not reprs:
            return "ModuleList()"
        runs = []  # [start, end, repr]
        for i, r in enumerate(reprs):
            if runs and runs[-1][2] == r:
                runs[-1][1] = i
            else:
                runs.append([i, i, r])
        lines = [_addindent(f"({a}): {r}" if a == b else f"({a}-{b}): {b - a + 1} x {r}", 2) for a, b, r in runs]
        return "ModuleList(\n  " + "\n  ".join(lines) + "\n)"


def _index(container: str, idx, n: int) -> int:
    """``idx`` as a position in [0, n): an int or anything with ``__index__`` (``np.int64``), as torch's."""
    try:
        i = operator.index(idx)
    except TypeError:
        raise TypeError(f"{container} indices must be integers or slices, got {type(idx).__name__} {idx!r}") from None
    if not -n <= i < n:
        raise IndexError(f"{container}: index {i} is out of range for {n} modules")
    return i % n


def _insert_index(container: str, idx, n: int) -> int:
    """``idx`` as a position to insert before, in [-n, n] (torch's Sequential.insert refuses others)."""
    i = operator.index(idx)
    if not -n <= i <= n:
        raise IndexError(f"{container}.insert: index {i} is out of range for {n} modules")
    return i


def _module(where: str, m) -> Module:
    """``m``, checked to be a Module: a container given something else fails here, at the user's line,
    and not as an empty container that passes its input through (``Sequential([a, b])``)."""
    if isinstance(m, Module):
        return m
    if where == "Sequential" and isinstance(m, (list, tuple)):
        hint = ": pass the layers as arguments, Sequential(*layers)"
    elif where == "Sequential" and isinstance(m, dict):
        hint = ": pass named layers as an OrderedDict, Sequential(OrderedDict(layers))"
    else:
        hint = ""
    raise TypeError(f"{where}: {type(m).__name__} is not a Module subclass{hint}")


def _modules(where: str, modules) -> list[Module]:
    """The modules of the iterable ``modules``, each checked (``_module``)."""
    try:
        items = list(modules)
    except TypeError:
        raise TypeError(f"{where}: expected an iterable of modules, got {type(modules).__name__}") from None
    return [_module(where, m) for m in items]


def _renumber(container: Module, modules: list[Module]) -> None:
    """Make ``modules`` the container's children, named "0", "1", ... in order."""
    for name in list(container._modules):
        delattr(container, name)
    for i, m in enumerate(modules):
        container.add_module(str(i), m)


class ModuleDict(Module):
    """torch's ``nn.ModuleDict``: modules by name (insertion order), registered as children.

    Args:
        modules: an optional mapping or iterable of (name, module) pairs.
    """

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key: str) -> Module:
        return self._modules[key]

    def __setitem__(self, key: str, module: Module) -> None:
        self.add_module(key, _module("ModuleDict", module))

    def __delitem__(self, key: str) -> None:
        delattr(self, key)

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def __contains__(self, key) -> bool:
        return key in self._modules

    def clear(self) -> None:
        """Remove every module."""
        for k in list(self._modules):
            delattr(self, k)

    def pop(self, key: str) -> Module:
        """Remove ``key`` and return its module."""
        m = self._modules[key]
        delattr(self, key)
        return m

    def keys(self):
        """The names."""
        return self._modules.keys()

    def items(self):
        """(name, module) pairs."""
        return self._modules.items()

    def values(self):
        """The modules."""
        return self._modules.values()

    def update(self, modules) -> None:
        """Add (or replace) modules from a mapping or an iterable of (name, module) pairs."""
        items = modules.items() if hasattr(modules, "items") else modules
        for k, m in items:
            self.add_module(k, _module("ModuleDict.update", m))

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ModuleDict is not callable; index it in a forward")


class ParameterList(Module):
    """torch's ``nn.ParameterList``: parameters registered under "0", "1", ... (torch's state_dict names).

    Args:
        values: an optional iterable of Parameters (arrays are wrapped in Parameters).
    """

    def __init__(self, values=None):
        super().__init__()
        if values is not None:
            self.extend(values)

    def __len__(self):
        return len(self._parameters)

    def __iter__(self):
        return iter(self._parameters.values())

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return ParameterList(list(self._parameters.values())[idx])
        return self._parameters[str(_index("ParameterList", idx, len(self)))]

    def __setitem__(self, idx: int, value) -> None:
        setattr(self, str(_index("ParameterList", idx, len(self))), _as_parameter(value))

    def append(self, value) -> ParameterList:
        """Add a parameter at the end."""
        setattr(self, str(len(self)), _as_parameter(value))
        return self

    def extend(self, values) -> ParameterList:
        """Add parameters at the end."""
        for v in values:
            self.append(v)
        return self

    def extra_repr(self) -> str:
        return "\n".join(f"  ({k}): Parameter containing: [torch.{p.dtype.name} of size "
                         f"{'x'.join(str(s) for s in p.shape)}]" for k, p in self._parameters.items())

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ParameterList is not callable; index it in a forward")


class ParameterDict(Module):
    """torch's ``nn.ParameterDict``: parameters by name (insertion order).

    Args:
        parameters: an optional mapping or iterable of (name, Parameter) pairs.
    """

    def __init__(self, parameters=None):
        super().__init__()
        if parameters is not None:
            self.update(parameters)

    def __getitem__(self, key: str):
        return self._parameters[key]

    def __setitem__(self, key: str, value) -> None:
        setattr(self, key, _as_parameter(value))

    def __delitem__(self, key: str) -> None:
        delattr(self, key)

    def __len__(self):
        return len(self._parameters)

    def __iter__(self):
        return iter(self._parameters)

    def __contains__(self, key) -> bool:
        return key in self._parameters

    def keys(self):
        """The names."""
        return self._parameters.keys()

    def items(self):
        """(name, parameter) pairs."""
        return self._parameters.items()

    def values(self):
        """The parameters."""
        return self._parameters.values()

    def update(self, parameters) -> None:
        """Add (or replace) parameters from a mapping or an iterable of (name, value) pairs."""
        items = parameters.items() if hasattr(parameters, "items") else parameters
        for k, v in items:
            self[k] = v

    def get(self, key: str, default=None):
        """The parameter named ``key``, or ``default``."""
        return self._parameters.get(key, default)

    def pop(self, key: str):
        """Remove the parameter named ``key`` and return it (a KeyError when there is none)."""
        p = self._parameters[key]
        del self[key]
        return p

    def clear(self) -> None:
        """Remove every parameter."""
        for k in list(self._parameters):
            del self[k]

    def extra_repr(self) -> str:
        return "\n".join(f"  ({k}): Parameter containing: [torch.{_TYPENAME[p.dtype.name]} of size "
                         f"{'x'.join(str(s) for s in p.shape)}]" for k, p in self._parameters.items())

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ParameterDict is not callable; index it in a forward")


_TYPENAME = {"float32": "FloatTensor", "float16": "HalfTensor", "bfloat16": "BFloat16Tensor",
             "float64": "DoubleTensor", "int32": "IntTensor", "bool": "BoolTensor"}  # torch.typename's


def _as_parameter(value) -> Parameter:
    return value if isinstance(value, Parameter) else Parameter(value)
