"""Containers: ``Sequential`` and ``ModuleList`` (children named "0", "1", ... as in torch's state_dict)."""

from __future__ import annotations

from collections import OrderedDict

from luminal.nn.module import Module, _addindent
from luminal.nn.parameter import Parameter


class Sequential(Module):
    """Calls its children in order; built from modules or an ``OrderedDict`` of named modules."""

    def __init__(self, *args):
        super().__init__()
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            for name, m in args[0].items():
                self.add_module(name, m)
        else:
            for i, m in enumerate(args):
                self.add_module(str(i), m)

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return Sequential(OrderedDict(list(self._modules.items())[idx]))
        return list(self._modules.values())[_index(idx, len(self))]

    def append(self, module: Module) -> Sequential:
        """Add ``module`` at the end.

        Args:
            module: the module to append.

        Returns:
            This Sequential.
        """
        self.add_module(str(len(self)), module)
        return self

    def forward(self, x):
        for m in self._modules.values():
            x = m(x)
        return x


class ModuleList(Module):
    """A list of modules registered as children (so their parameters are found and saved)."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return ModuleList(list(self._modules.values())[idx])
        return self._modules[str(_index(idx, len(self)))]

    def __setitem__(self, idx: int, module: Module) -> None:
        self.add_module(str(_index(idx, len(self))), module)

    def append(self, module: Module) -> ModuleList:
        """Add ``module`` at the end.

        Args:
            module: the module to append.

        Returns:
            This ModuleList.
        """
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules) -> ModuleList:
        """Append every module of ``modules``, in order.

        Args:
            modules: an iterable of modules.

        Returns:
            This ModuleList.
        """
        for m in modules:
            self.append(m)
        return self

    def insert(self, index: int, module: Module) -> None:
        """Insert ``module`` before position ``index`` (as ``list.insert``); the later modules are renumbered.

        Args:
            index: the position.
            module: the module to insert.
        """
        items = list(self._modules.values())
        items.insert(index, module)
        for name in list(self._modules):
            delattr(self, name)
        for i, m in enumerate(items):
            self.add_module(str(i), m)

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


def _index(idx: int, n: int) -> int:
    if not isinstance(idx, int) or not -n <= idx < n:
        raise IndexError(f"index {idx!r} is out of range for {n} modules")
    return idx % n


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
        self.add_module(key, module)

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
            self.add_module(k, m)

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
        return self._parameters[str(_index(idx, len(self)))]

    def __setitem__(self, idx: int, value) -> None:
        setattr(self, str(_index(idx, len(self))), _as_parameter(value))

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

    def extra_repr(self) -> str:
        return "\n".join(f"  ({k}): Parameter containing: [torch.{_TYPENAME[p.dtype.name]} of size "
                         f"{'x'.join(str(s) for s in p.shape)}]" for k, p in self._parameters.items())

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ParameterDict is not callable; index it in a forward")


_TYPENAME = {"float32": "FloatTensor", "float16": "HalfTensor", "bfloat16": "BFloat16Tensor",
             "float64": "DoubleTensor", "int32": "IntTensor", "bool": "BoolTensor"}  # torch.typename's


def _as_parameter(value) -> Parameter:
    return value if isinstance(value, Parameter) else Parameter(value)
