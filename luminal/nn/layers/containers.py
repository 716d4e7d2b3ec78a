"""Containers: ``Sequential`` and ``ModuleList`` (children named "0", "1", ... as in torch's state_dict)."""

from __future__ import annotations

import copy
import operator
from collections import OrderedDict
from collections.abc import Iterable, Mapping

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
        if isinstance(idx, slice):
            raise TypeError("Sequential: assignment takes one integer index, got a slice (torch's neither): "
                            "del seq[a:b] and insert, or build a new Sequential")
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

    def __iadd__(self, other: Sequential) -> Sequential:
        """``seq += other``: append ``other``'s modules (named ``str(len(self))`` on, as ``append``)."""
        if not isinstance(other, Sequential):
            raise TypeError(f"Sequential += {type(other).__name__}: can only add a Sequential (extend takes "
                            f"any iterable of modules)")
        return self.extend(list(other))  # (a list first: seq += seq)

    def __mul__(self, n: int) -> Sequential:
        """A new Sequential of this one's modules ``n`` times over, as torch's: the same module objects
        (their parameters shared), named "0", "1", ...

        Args:
            n: a positive int.
        """
        return Sequential(*(list(self) * _factor(n)))

    __rmul__ = __mul__

    def __imul__(self, n: int) -> Sequential:
        """``seq *= n``: append this Sequential's modules ``n - 1`` more times (shared, as ``*``)."""
        return self.extend(list(self) * (_factor(n) - 1))

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


def _index(container: str, idx, n: int, what: str = "modules") -> int:
    """``idx`` as a position in [0, n): an int or anything with ``__index__`` (``np.int64``), as torch's."""
    try:
        i = operator.index(idx)
    except TypeError:
        raise TypeError(f"{container} indices must be integers or slices, got {type(idx).__name__} {idx!r}") from None
    if not -n <= i < n:
        raise IndexError(f"{container}: index {i} is out of range for {n} {what}")
    return i % n


def _factor(n) -> int:
    """``n`` as Sequential's repeat count: an int (not a bool) of at least 1, as torch's."""
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"Sequential * {type(n).__name__}: the repeat count must be an int")
    if n <= 0:
        raise ValueError(f"Sequential * {n}: non-positive multiplication factor (at least 1)")
    return n


def _pairs(where: str, items, sort_dict: bool) -> list:
    """The (name, value) pairs of ``items``: a mapping's items (a plain dict's sorted when
    ``sort_dict``, as torch's ParameterDict; an OrderedDict's or a container's in order) or an
    iterable of pairs, each checked to be one, as torch's update."""
    if isinstance(items, (OrderedDict, ModuleDict, ParameterDict)) or (isinstance(items, Mapping) and not sort_dict):
        return list(items.items())
    if isinstance(items, Mapping):
        try:
            return sorted(items.items())
        except TypeError:
            kinds = sorted({type(k).__name__ for k in items})
            raise TypeError(f"{where}: a dict's names must be strings, got {kinds}") from None
    if not isinstance(items, Iterable):
        raise TypeError(f"{where}: expected a mapping or an iterable of (name, value) pairs, got "
                        f"{type(items).__name__}")
    pairs = []
    for j, p in enumerate(items):
        if not isinstance(p, Iterable) or isinstance(p, str):
            raise TypeError(f"{where}: element #{j} of the sequence should be a (name, value) pair, got "
                            f"{type(p).__name__}")
        if len(p := tuple(p)) != 2:
            raise ValueError(f"{where}: element #{j} of the sequence has length {len(p)}; a (name, value) pair "
                             f"is required")
        pairs.append(p)
    return pairs


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
        if key not in self._modules:
            raise KeyError(key)
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
        """Add (or replace) modules from a mapping (in its order) or an iterable of (name, module) pairs."""
        for k, m in _pairs("ModuleDict.update", modules, sort_dict=False):
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
        return self._parameters[str(_index("ParameterList", idx, len(self), "parameters"))]

    def __setitem__(self, idx: int, value) -> None:
        i = _index("ParameterList", idx, len(self), "parameters")
        setattr(self, str(i), _as_parameter("ParameterList", value))

    def __iadd__(self, values) -> ParameterList:
        return self.extend(values)

    def append(self, value) -> ParameterList:
        """Add a parameter at the end (an array is wrapped in a Parameter)."""
        setattr(self, str(len(self)), _as_parameter("ParameterList.append", value))
        return self

    def extend(self, values) -> ParameterList:
        """Add parameters at the end."""
        try:
            values = list(values)
        except TypeError:
            raise TypeError(f"ParameterList.extend: expected an iterable of parameters, got "
                            f"{type(values).__name__}") from None
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
        """Set the parameter ``key`` (an array is wrapped in a Parameter; None declares it absent, kept
        out of the state_dict, as torch's)."""
        self.register_parameter(key, None if value is None else _as_parameter("ParameterDict", value))

    def __delitem__(self, key: str) -> None:
        if key not in self._parameters:
            raise KeyError(key)
        delattr(self, key)

    def __len__(self):
        return len(self._parameters)

    def __iter__(self):
        return iter(self._parameters)

    def __reversed__(self):
        return reversed(list(self._parameters))

    def __or__(self, other) -> ParameterDict:
        """A new ParameterDict of this one's parameters updated with ``other``'s (the same objects)."""
        new = self.copy()
        new.update(other)
        return new

    def __ror__(self, other) -> ParameterDict:
        new = ParameterDict(OrderedDict(_pairs("ParameterDict |", other, sort_dict=True)))
        new.update(self)
        return new

    def __ior__(self, other) -> ParameterDict:
        self.update(other)
        return self

    def copy(self) -> ParameterDict:
        """A new ParameterDict holding the same Parameter objects, in the same order."""
        return ParameterDict(OrderedDict(self._parameters))

    def setdefault(self, key: str, default=None):
        """The parameter named ``key``, first set to ``default`` when there is none."""
        if key not in self._parameters:
            self[key] = default
        return self._parameters[key]

    def popitem(self):
        """Remove the last (name, parameter) pair and return it."""
        if not self._parameters:
            raise KeyError("popitem(): ParameterDict is empty")
        key = next(reversed(self._parameters))
        return key, self.pop(key)

    @staticmethod
    def fromkeys(keys, default=None) -> ParameterDict:
        """A new ParameterDict with each of ``keys`` holding a copy of ``default``."""
        return ParameterDict(OrderedDict((k, copy.deepcopy(default)) for k in keys))

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
        """Add (or replace) parameters from a mapping or an iterable of (name, value) pairs. A plain
        dict's names are taken in sorted order, as torch's ParameterDict does (its state_dict and
        ``parameters()`` order, which an optimizer's saved state follows); an OrderedDict's, another
        ParameterDict's or the pairs' in their own order."""
        for k, v in _pairs("ParameterDict.update", parameters, sort_dict=True):
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
        return "\n".join(f"  ({k}): Object of type: NoneType" if p is None else
                         f"  ({k}): Parameter containing: [torch.{_TYPENAME[p.dtype.name]} of size "
                         f"{'x'.join(str(s) for s in p.shape)}]" for k, p in self._parameters.items())

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ParameterDict is not callable; index it in a forward")


_TYPENAME = {"float32": "FloatTensor", "float16": "HalfTensor", "bfloat16": "BFloat16Tensor",
             "float64": "DoubleTensor", "int32": "IntTensor", "bool": "BoolTensor"}  # torch.typename's


def _as_parameter(where: str, value) -> Parameter:
    """``value`` as a Parameter: itself, or an array (a State, a known tensor, numbers) wrapped in a new
    one; anything else is refused naming the container (torch would keep it as a plain attribute,
    which no parameters() or state_dict sees)."""
    if isinstance(value, Parameter):
        return value
    try:
        return Parameter(value)
    except (TypeError, ValueError) as e:
        raise TypeError(f"{where}: cannot make a parameter of {type(value).__name__} {value!r:.60} ({e})") from None
