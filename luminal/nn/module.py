"""``nn.Module``: named, hierarchical parameters and buffers, torch's names and ``state_dict`` layout.

A module holds its parameters as host arrays (:class:`Parameter`). Calling it on a GraphTensor builds
graph ops in that tensor's graph; the parameters become persistent inputs of the graph, so a graph
always computes with the module's current values and training updates them in place.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping

import numpy as np

from luminal.nn.parameter import Buffer, Parameter


class Module:
    training: bool

    def __init__(self):
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "training", True)

    # registration -----------------------------------------------------------------------------
    def __setattr__(self, name, value):
        if "_parameters" not in self.__dict__:
            raise AttributeError(f"{type(self).__name__}: call super().__init__() before assigning attributes")
        own = self._parameters if isinstance(value, Parameter) else self._buffers if isinstance(value, Buffer) \
            else self._modules if isinstance(value, Module) else None
        for table in (self._parameters, self._buffers, self._modules):
            if table is not own:
                table.pop(name, None)
        if own is not None:
            own[name] = value  # re-assigning (weight tying) keeps the name's place, as torch
        object.__setattr__(self, name, value)

    def __delattr__(self, name):
        for table in (self._parameters, self._buffers, self._modules):
            table.pop(name, None)
        object.__delattr__(self, name)

    def register_buffer(self, name: str, value, persistent: bool = True, dtype=None) -> Buffer:
        buf = value if isinstance(value, Buffer) else Buffer(value, dtype, persistent)
        buf.persistent = persistent
        setattr(self, name, buf)
        return buf

    def register_parameter(self, name: str, value: Parameter | None) -> None:
        setattr(self, name, value)

    def add_module(self, name: str, module: Module | None) -> None:
        setattr(self, name, module)

    # traversal --------------------------------------------------------------------------------
    def named_modules(self, prefix: str = "", memo=None):
        memo = set() if memo is None else memo
        if id(self) in memo:
            return
        memo.add(id(self))
        yield prefix, self
        for name, m in self._modules.items():
            if m is not None:
                yield from m.named_modules(f"{prefix}.{name}" if prefix else name, memo)

    def modules(self):
        return (m for _, m in self.named_modules())

    def named_children(self):
        return ((n, m) for n, m in self._modules.items() if m is not None)

    def children(self):
        return (m for _, m in self.named_children())

    def _named(self, table: str, prefix: str, recurse: bool):
        seen = set()
        mods = self.named_modules(prefix) if recurse else [(prefix, self)]
        for mprefix, m in mods:
            for name, v in getattr(m, table).items():
                if v is None or id(v) in seen:
                    continue
                seen.add(id(v))
                yield (f"{mprefix}.{name}" if mprefix else name), v

    def named_parameters(self, prefix: str = "", recurse: bool = True):
        return self._named("_parameters", prefix, recurse)

    def parameters(self, recurse: bool = True) -> list[Parameter]:
        return [p for _, p in self.named_parameters(recurse=recurse)]

    def named_buffers(self, prefix: str = "", recurse: bool = True):
        return self._named("_buffers", prefix, recurse)

    def buffers(self, recurse: bool = True) -> list[Buffer]:
        return [b for _, b in self.named_buffers(recurse=recurse)]

    # modes ------------------------------------------------------------------------------------
    def train(self, mode: bool = True) -> Module:
        """Training mode (dropout masks, batch statistics) for graphs built from now on."""
        for m in self.modules():
            object.__setattr__(m, "training", mode)
        return self

    def eval(self) -> Module:
        return self.train(False)

    # state ------------------------------------------------------------------------------------
    def _state_items(self):
        """(name, State) in torch's state_dict order: each module's parameters, then its persistent
        buffers, then its children, depth first."""
        out = []

        def walk(m, prefix, path):  # a module registered under several names is saved under each, as torch
            if id(m) in path:
                return
            path = path | {id(m)}
            for n, p in m._parameters.items():
                if p is not None:
                    out.append((prefix + n, p))
            for n, b in m._buffers.items():
                if b is not None and b.persistent:
                    out.append((prefix + n, b))
            for n, c in m._modules.items():
                if c is not None:
                    walk(c, f"{prefix}{n}.", path)

        walk(self, "", set())
        return out

    def state_dict(self) -> OrderedDict:
        """Name -> the live numpy array (bfloat16 values are carried in float32 arrays)."""
        return OrderedDict((n, s.data) for n, s in self._state_items())

    def state_dtypes(self) -> OrderedDict:
        """Name -> lm dtype of each state_dict entry (how it is saved)."""
        return OrderedDict((n, s.dtype) for n, s in self._state_items())

    def load_state_dict(self, state_dict, strict: bool = True) -> tuple[list[str], list[str]]:
        """Copy values by name into the parameters and buffers, converting dtypes. Shapes must match;
        with ``strict``, names must match exactly. Every problem is listed in one error, and nothing is
        changed unless every value loads. Returns (missing, unexpected) like torch."""
        apply, missing, unexpected = self.prepare_load(state_dict, strict)
        apply()
        return missing, unexpected

    def prepare_load(self, state_dict, strict: bool = True):
        """``load_state_dict``'s checks and conversions, changing nothing: ``(apply, missing,
        unexpected)``, where ``apply()`` writes the values (a checkpoint checks all its parts first)."""
        own = OrderedDict(self._state_items())
        given, bad = self._arrays(state_dict)
        missing = [k for k in own if k not in state_dict]
        unexpected = [k for k in state_dict if k not in own]  # (as torch: their values are not looked at)
        problems = [bad[k] for k in own if k in bad]
        mis_shaped = [f"{k}: checkpoint {tuple(given[k].shape)} vs model {tuple(own[k].shape)}"
                      for k in own if k in given and tuple(given[k].shape) != tuple(own[k].shape)]
        if strict and missing:
            problems.append("missing: " + ", ".join(missing))
        if strict and unexpected:
            problems.append("unexpected: " + ", ".join(unexpected))
        if mis_shaped:
            problems.append("shape mismatch: " + "; ".join(mis_shaped))
        values = {}
        for k, st in own.items():
            if k in given and tuple(given[k].shape) == tuple(st.shape):
                try:
                    values[k] = st.prepared(given[k])
                except ValueError as e:
                    problems.append(f"{k}: {e}")
        if problems:
            raise ValueError(f"load_state_dict into {type(self).__name__}: " + " | ".join(problems))

        def apply():
            for k, v in values.items():
                np.copyto(own[k].data, v, casting="unsafe")

        return apply, missing, unexpected

    def _arrays(self, state_dict) -> tuple[dict, dict]:
        """The state_dict's values as numeric arrays, and a problem for each value that is none (a
        str, a ragged list, an object) instead of a shape mismatch against its 0-d or 1-d accident.
        A state_dict must be a mapping, as torch requires: a list of (name, array) pairs is refused
        with a TypeError saying so (``dict(pairs)`` converts it), not an AttributeError."""
        if not isinstance(state_dict, Mapping):
            hint = " (a list of (name, array) pairs: pass dict(pairs))" if isinstance(state_dict, (list, tuple)) else ""
            raise TypeError(f"load_state_dict into {type(self).__name__}: expected state_dict to be dict-like "
                            f"(name -> array), got {type(state_dict).__name__}{hint}")
        given, problems = {}, {}
        for k, v in state_dict.items():
            try:
                arr = np.asarray(v)
            except ValueError:  # numpy's "inhomogeneous shape": a ragged nested list
                arr = None
            if arr is None or arr.dtype.kind not in "biuf":
                dtype = f" of dtype {arr.dtype}" if isinstance(v, np.ndarray) else ""
                problems[k] = f"the value for {k!r} is not an array of numbers (got {type(v).__name__}{dtype})"
            else:
                given[k] = arr
        return given, problems

    def save_safetensors(self, path, metadata: dict[str, str] | None = None) -> None:
        """Write the state_dict to ``path`` atomically, each tensor in its parameter's dtype."""
        from luminal.core.safetensors_io import save_file

        items = self._state_items()
        save_file({n: s.data for n, s in items}, path, metadata=metadata,
                  dtypes={n: s.dtype for n, s in items})

    def load_safetensors(self, path, strict: bool = True) -> tuple[list[str], list[str]]:
        """Load a safetensors file by name (bf16/f16/f32/f64 converted to each parameter's dtype);
        strict name and shape checks as in ``load_state_dict``."""
        from luminal.core.safetensors_io import load_file

        tensors = load_file(path)
        try:
            return self.load_state_dict(tensors, strict=strict)
        except ValueError as e:
            raise ValueError(f"{path}: {e}") from None

    # calling ----------------------------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        self._name_states()
        return self.forward(*args, **kwargs)

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} defines neither forward nor __call__")

    def _name_states(self):
        """Give unnamed parameters and buffers their qualified names (graph nodes and reports use them)."""
        for n, s in list(self.named_parameters()) + list(self.named_buffers()):
            if s.name is None:
                s.name = n

    def extra_repr(self) -> str:
        return ""

    def __repr__(self):
        lines = [f"{type(self).__name__}({self.extra_repr()}"]
        for n, m in self.named_children():
            sub = repr(m).replace("\n", "\n  ")
            lines.append(f"  ({n}): {sub}")
        return lines[0] + (")" if len(lines) == 1 else "\n" + "\n".join(lines[1:]) + "\n)")
