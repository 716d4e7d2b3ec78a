"""``nn.Module``: named, hierarchical parameters and buffers, torch's names and ``state_dict`` layout.

A module holds its parameters as host arrays (:class:`Parameter`). Calling it on a GraphTensor builds
graph ops in that tensor's graph; the parameters become persistent inputs of the graph, so a graph
always computes with the module's current values and training updates them in place. ``forward`` uses
its parameters and buffers as tensors, as torch's does (``x * self.weight``, ``self.mask[:T, :T]``,
``F.layer_norm(x, s, self.weight, self.bias)``): each joins the graph of the call
(``frontend/join.py``, ``frontend/building.py``).
"""

from __future__ import annotations

import copy
import itertools
import threading
import warnings
import weakref
from collections import OrderedDict
from collections.abc import Mapping
from typing import NamedTuple, NoReturn

import numpy as np

from luminal.core import dtype as dt
from luminal.core.backend import backend_names
from luminal.core.errors import op_error, user_stacklevel
from luminal.core.interrupts import interrupts_deferred
from luminal.frontend import building
from luminal.frontend.eager import eager_only
from luminal.frontend.graph import Graph
from luminal.frontend.ops.core import _device_name
from luminal.frontend.state import State
from luminal.frontend.tensor import GraphTensor
from luminal.nn.parameter import Buffer, Parameter

_calls = threading.local()  # .depth: how many Module.__call__s are running on this thread


def _note_module_path(err: BaseException, module: Module) -> None:
    """For an op's error raised inside nested modules: add a note with the failing module's path from
    the outermost one called (``in Net: body.2 = Linear(in_features=5, ...)``), as ``state_dict`` names
    it, since the error's own lines name the innermost layer and the user's line calling the outermost,
    which do not say which of a Sequential's alike children failed. The modules the error passes
    through are kept on it, innermost first; the outermost call writes the note."""
    if getattr(err, "luminal_op", None) is None:
        return  # (the user's own exception: its traceback says where)
    chain = err.__dict__.setdefault("luminal_modules", [])
    chain.append(module)
    if _calls.depth > 1 or len(chain) < 2:
        return
    names = []
    for parent, child in zip(chain[:0:-1], chain[-2::-1]):
        # (a descendant's path: a ModuleList's block called in a loop skips the list's own call)
        name = next((k for k, m in parent.named_modules() if m is child and k), None)
        if name is None:
            return  # a module called that is not inside its caller: no path to give
        names.append(name)
    err.add_note(f"  in {type(chain[-1]).__name__}: {'.'.join(names)} = {chain[0]._who()}")


class Module:
    """torch's ``nn.Module``: a tree of modules owning named parameters and buffers (torch's
    ``state_dict`` names and order). Subclasses assign layers and Parameters as attributes in
    ``__init__`` (after ``super().__init__()``) and define ``forward``; calling a module on a
    GraphTensor builds graph ops in that tensor's graph."""

    def __init__(self):
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_non_persistent_buffers_set", set())  # (per module, as torch's: a
        object.__setattr__(self, "_modules", OrderedDict())  # buffer shared by two modules may be saved by one)
        object.__setattr__(self, "_training", True)

    def __setstate__(self, state: dict) -> None:
        """Unpickling (``pickle``, ``copy.deepcopy``): a module pickled before buffer persistence was
        kept per module has no ``_non_persistent_buffers_set``; its buffers carried the flag."""
        self.__dict__.update(state)
        if "_non_persistent_buffers_set" not in state:
            buffers = state.get("_buffers", {})
            object.__setattr__(self, "_non_persistent_buffers_set", {
                n for n, b in buffers.items() if b is not None and not getattr(b, "persistent", True)})

    @property
    def training(self) -> bool:
        """Whether graphs built from now on use training mode (``train()``/``eval()``). A read while a
        graph is being built (Dropout, BatchNorm, a user's ``forward``) marks that graph as depending
        on this module's mode: changing the mode later warns only for such graphs.

        A read in the other mode than an earlier read in the same graph, once that graph holds state
        updates (BatchNorm's running statistics), warns: every program compiled from the graph writes
        all of its updates, so an evaluation compiled from the training graph would update the running
        statistics from its batch on every call (and need the training forward's inputs)."""
        g = building.current()
        mode = self.__dict__["_training"]
        if isinstance(g, Graph):
            modes = g.__dict__.setdefault("nn_mode_reads", {}).setdefault(id(self), set())
            if modes and mode not in modes and g.updates and not g.__dict__.get("nn_mixed_warned"):
                g.__dict__["nn_mixed_warned"] = True
                states = ", ".join(s.name or "(unnamed)" for s in list(g.updates)[:3])
                more = f" and {len(g.updates) - 3} more" if len(g.updates) > 3 else ""
                warnings.warn(f"{type(self).__name__}: called in {_mode(mode)} mode in a graph that already holds "
                              f"its {_mode(not mode)}-mode forward: every program compiled from this graph writes the "
                              f"graph's state updates ({states}{more}) after each run, from that forward; build "
                              f"the {_mode(mode)}-mode graph in a new lm.Graph()", UserWarning,
                              stacklevel=user_stacklevel())
            modes.add(mode)
        return mode

    @training.setter
    def training(self, mode: bool) -> None:
        self.__dict__["_training"] = bool(mode)

    # registration -----------------------------------------------------------------------------
    def __setattr__(self, name, value):
        """torch's rules: a Parameter, a Module or a Buffer registers under ``name`` (replacing what had
        it: weight tying keeps the name's place); a registered name takes only its own kind or None
        (kept registered as None, in its place), so that a misspelt port (``lin.weight = array``) fails
        here and not as a missing parameter much later. A registered buffer also takes an array or a
        tensor whose values are known now (torch's ``self.bias = self.bias[:, :, :n, :n]``): its new value."""
        if "_parameters" not in self.__dict__:
            raise AttributeError(f"{type(self).__name__}: call super().__init__() before assigning attributes")
        if isinstance(value, Parameter):
            self._register("_parameters", name, value)
        elif name in self._parameters:
            if value is not None:
                raise TypeError(f"{type(self).__name__}: cannot assign '{type(value).__name__}' as parameter "
                                f"'{name}' (nn.Parameter or None expected: nn.Parameter(array) makes a new "
                                f"parameter, and .{name}.set(array) writes new values into this one)")
            self._parameters[name] = None
        elif isinstance(value, Module):
            self._register("_modules", name, value)
        elif name in self._modules:
            if value is not None:
                raise TypeError(f"{type(self).__name__}: cannot assign '{type(value).__name__}' as child module "
                                f"'{name}' (nn.Module or None expected)")
            self._modules[name] = None
        elif isinstance(value, Buffer) or name in self._buffers:
            value = self._buffer_value(name, value)
            # (a Buffer brings its own persistence, as torch's nn.Buffer; an array keeps the name's)
            persistent = value.persistent if isinstance(value, Buffer) else name not in self._non_persistent_buffers_set
            self._register("_buffers", name, value)
            (self._non_persistent_buffers_set.discard if persistent else self._non_persistent_buffers_set.add)(name)
        object.__setattr__(self, name, value)

    def _register(self, table: str, name: str, value) -> None:
        """Put ``value`` under ``name`` in ``table`` (in the name's place if it had one there) and take the
        name out of the other tables."""
        for other in ("_parameters", "_buffers", "_modules"):
            if other != table:
                self.__dict__[other].pop(name, None)
        if table != "_buffers":
            self._non_persistent_buffers_set.discard(name)
        self.__dict__[table][name] = value

    def _buffer_value(self, name: str, value) -> Buffer | None:
        """``value`` as the buffer ``name``: a Buffer or None as it is, an array or a tensor whose values
        are known now as a new Buffer. A tensor computed in a graph is refused: assigning it here would
        not update the buffer (the module's array, which every run reads), only hide it; torch's
        ``self.avg = self.avg * 0.9 + ...`` is ``graph.assign`` here."""
        if value is None or isinstance(value, Buffer):
            return value
        if isinstance(value, np.ndarray) or (isinstance(value, GraphTensor) and value.graph.host):
            return Buffer(value, persistent=name not in self._non_persistent_buffers_set)
        if isinstance(value, GraphTensor):
            raise TypeError(f"{type(self).__name__}: cannot assign a tensor computed in a graph to buffer '{name}': "
                            f"a buffer is the array every run reads, which this assignment would not change; to "
                            f"update it after every run of the compiled program, write "
                            f"x.graph.assign(self.{name}, new_value) and keep reading self.{name} (as BatchNorm "
                            f"updates its running statistics)")
        raise TypeError(f"{type(self).__name__}: cannot assign '{type(value).__name__}' as buffer '{name}' "
                        f"(nn.Buffer, a numpy array or None expected)")

    def _check_name(self, kind: str, name, table: str) -> None:
        """torch's rules for a name ``register_buffer``/``register_parameter``/``add_module`` is given: a
        str, not empty, without "." (state_dict keys join names with dots), and not an attribute that
        is not already of this kind (``register_buffer("weight")`` on a Linear would drop its parameter;
        a ModuleDict key ``"train"`` would hide the method)."""
        if not isinstance(name, str):
            raise TypeError(f"{type(self).__name__}: {kind} name should be a string, got {type(name).__name__}")
        if name == "":
            raise KeyError(f'{type(self).__name__}: {kind} name can\'t be empty string ""')
        if "." in name:
            raise KeyError(f'{type(self).__name__}: {kind} name can\'t contain ".", got: {name}')
        if hasattr(self, name) and name not in self.__dict__[table]:
            raise KeyError(f"{type(self).__name__}: attribute '{name}' already exists (a {kind} needs a name of "
                           f"its own)")

    def __delattr__(self, name):
        for table in (self._parameters, self._buffers, self._modules):
            table.pop(name, None)
        self._non_persistent_buffers_set.discard(name)
        object.__delattr__(self, name)

    def register_buffer(self, name: str, value, persistent: bool = True, dtype=None) -> Buffer | None:
        """Register ``value`` (an array, a Buffer, or None: declared but absent) as the buffer ``name``;
        a non-persistent one is left out of this module's state_dict (a buffer shared with another
        module keeps the persistence each registered it with, as torch's).

        Args:
            name: a new attribute name (or a buffer's). value: the buffer's values: an array, a State or
                a tensor whose values are known now (a list or a number is refused, as torch refuses
                what is not a tensor: its dtype would be guessed).
            persistent: whether ``state_dict`` saves it. dtype: the dtype to convert an array to.
        """
        self._check_name("buffer", name, "_buffers")
        if not (value is None or isinstance(value, (Buffer, State, np.ndarray, np.generic))
                or (isinstance(value, GraphTensor) and value.graph.host)):
            self._buffer_value(name, value)  # (raises naming the buffer: a list, a str, a tensor of a graph)
        buf = value if value is None or isinstance(value, Buffer) else Buffer(value, dtype, persistent)
        self._register("_buffers", name, buf)
        (self._non_persistent_buffers_set.discard if persistent else self._non_persistent_buffers_set.add)(name)
        object.__setattr__(self, name, buf)
        return buf

    def register_parameter(self, name: str, value: Parameter | None) -> None:
        """Register ``value`` as the parameter ``name`` (None: declared but absent).

        Args:
            name: a new attribute name (or a parameter's). value: an nn.Parameter or None.
        """
        self._check_name("parameter", name, "_parameters")
        if value is not None and not isinstance(value, Parameter):
            raise TypeError(f"{type(self).__name__}: cannot assign '{type(value).__name__}' object to parameter "
                            f"'{name}' (nn.Parameter or None required; nn.Parameter(array) wraps an array)")
        self._register("_parameters", name, value)
        object.__setattr__(self, name, value)

    def add_module(self, name: str, module: Module | None) -> None:
        """Register ``module`` as the child ``name``.

        Args:
            name: a new attribute name (or a child's). module: an nn.Module or None.
        """
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(self).__name__}: {type(module).__name__} is not a Module subclass (add_module "
                            f"{name!r})")
        self._check_name("module", name, "_modules")
        self._register("_modules", name, module)
        object.__setattr__(self, name, module)

    def register_module(self, name: str, module: Module | None) -> None:
        """``add_module`` (torch's alias)."""
        self.add_module(name, module)

    # traversal --------------------------------------------------------------------------------
    def named_modules(self, memo=None, prefix: str = "", remove_duplicate: bool = True):
        """(qualified name, module) for this module and every submodule, depth first (torch's order);
        a module registered twice is listed once unless ``remove_duplicate=False``.

        Args:
            memo: a set of module ids already listed. prefix: put before every name.
            remove_duplicate: list a shared module once.
        """
        stack = [(prefix, self)]
        memo = set() if memo is None else memo
        while stack:
            name, m = stack.pop()
            if remove_duplicate:
                if id(m) in memo:
                    continue
                memo.add(id(m))
            yield name, m
            kids = [(f"{name}.{k}" if name else k, c) for k, c in m._modules.items() if c is not None]
            stack.extend(reversed(kids))

    def modules(self):
        """Every module of the tree, this one first (see ``named_modules``)."""
        return (m for _, m in self.named_modules())

    def named_children(self):
        """(name, module) for the direct children."""
        seen = set()
        for n, m in self._modules.items():
            if m is not None and id(m) not in seen:
                seen.add(id(m))
                yield n, m

    def children(self):
        """The direct child modules."""
        return (m for _, m in self.named_children())

    def get_submodule(self, target: str) -> Module:
        """The submodule at the dotted path ``target`` ("" is this module), as torch's.

        Args:
            target: e.g. ``"encoder.layers.0.linear1"``.
        """
        m = self
        for part in target.split(".") if target else []:
            child = m._modules.get(part)
            if not isinstance(child, Module):
                raise AttributeError(f"{type(m).__name__} has no attribute `{part}` (looking up {target!r})")
            m = child
        return m

    def set_submodule(self, target: str, module: Module, strict: bool = False) -> None:
        """Put ``module`` at the dotted path ``target`` (model surgery: ``set_submodule("encoder.0.fc",
        lora_fc)``), as torch's: the parent must exist; the name may be new (with ``strict``, it must
        exist) and, if it exists, must hold a module. A graph built before keeps the module it called.

        Args:
            target: e.g. ``"encoder.layers.0.linear1"``. module: the new module.
            strict: refuse a name the parent does not have yet.
        """
        if not isinstance(target, str) or target == "":
            raise ValueError(f"{type(self).__name__}.set_submodule: a target name is required, got {target!r}")
        if not isinstance(module, Module):
            raise ValueError(f"{type(self).__name__}.set_submodule({target!r}): {type(module).__name__} is not an "
                             f"nn.Module")
        path, _, name = target.rpartition(".")
        parent = self.get_submodule(path)
        if strict and not hasattr(parent, name):
            raise AttributeError(f"{type(parent).__name__} has no attribute `{name}` (set_submodule({target!r}, "
                                 f"strict=True))")
        if hasattr(parent, name) and not isinstance(getattr(parent, name), Module):
            raise AttributeError(f"`{name}` is not an nn.Module (set_submodule({target!r}): "
                                 f"{type(getattr(parent, name)).__name__} there)")
        setattr(parent, name, module)

    def get_parameter(self, target: str) -> Parameter:
        """The parameter at the dotted path ``target`` (``"linear1.weight"``).

        Args:
            target: the module path and the parameter's name.
        """
        mod, _, name = target.rpartition(".")
        m = self.get_submodule(mod)
        if not isinstance(m._parameters.get(name), Parameter):
            raise AttributeError(f"{type(m).__name__} has no parameter `{name}` (looking up {target!r})")
        return m._parameters[name]

    def get_buffer(self, target: str) -> Buffer:
        """The buffer at the dotted path ``target`` (``"bn.running_mean"``).

        Args:
            target: the module path and the buffer's name.
        """
        mod, _, name = target.rpartition(".")
        m = self.get_submodule(mod)
        if not isinstance(m._buffers.get(name), Buffer):
            raise AttributeError(f"{type(m).__name__} has no buffer `{name}` (looking up {target!r})")
        return m._buffers[name]

    def apply(self, fn) -> Module:
        """Call ``fn(m)`` on every submodule (children first) and then on this module, as torch's
        (an initialisation pass: ``model.apply(init_weights)``). Returns this module.

        Args:
            fn: a function of a module.
        """
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    def requires_grad_(self, requires_grad: bool = True) -> Module:
        """Mark every parameter trainable or frozen. ``train.compile_step`` differentiates and updates
        only the parameters with ``requires_grad`` when it compiles: a frozen parameter gets no
        gradient and no optimizer update (freeze before ``compile_step``). Returns this module.

        Args:
            requires_grad: True to train, False to freeze.
        """
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def to(self, *args, **kwargs) -> Module:
        """Convert the floating-point parameters and buffers to ``dtype`` in place (integer buffers
        such as ``num_batches_tracked`` keep theirs), as torch's ``module.to(dtype)``. A device
        argument (given first, or ``device=``) may be the CPU ("cpu", changing nothing: arrays live on
        the host); any other device (``"cuda"``) is an :class:`~luminal.frontend.eager.EagerOnlyError`
        naming the backend to compile for, as :meth:`cuda`'s. Graphs built from the module read its
        states in the old dtype, so converting while such a graph is alive is refused. Returns this module.

        Args:
            dtype: an lm dtype (or its name), e.g. ``lm.float16``.
        """
        names = {d.name for d in dt.ALL}
        devices = [a for a in (*args, kwargs.get("device")) if not isinstance(a, dt.DType) and a is not None
                   and not (isinstance(a, str) and a in names) and _device_name(a) is not None]
        for d in devices:
            if _device_name(d) not in ("cpu", "cpu:0"):
                self._on_device(f"to({_device_name(d)!r})")
        given = [a for a in args if not any(a is d for d in devices)]  # the device dropped: .to("cpu", lm.float16)
        dtype = kwargs.get("dtype", given[0] if given else None)
        if dtype is None:
            return self
        d = dt.as_dtype(dtype)
        if not d.is_float:
            raise TypeError(f"{type(self).__name__}.to: only floating dtypes are supported, got {d.name}")
        states = [s for s in (*self.parameters(), *self.buffers()) if s.dtype.is_float and s.dtype is not d]
        live = self._live_graphs()
        if states and live:
            raise RuntimeError(f"{type(self).__name__}.to({d.name}): {len(live)} graph(s) built from this module "
                               f"read its parameters as {states[0].dtype.name}; convert before building a graph "
                               f"(or drop those graphs and build new ones)")
        for s in states:  # (host_array: a lazy module's uninitialized parameters, empty, convert too, as torch's)
            s._replace(np.array(dt.to_storage(s.host_array().astype(np.float64), d), order="C", copy=True), d)
        return self

    def half(self) -> Module:
        """``to(float16)``."""
        return self.to(dt.float16)

    def bfloat16(self) -> Module:
        """``to(bfloat16)``."""
        return self.to(dt.bfloat16)

    def float(self) -> Module:
        """``to(float32)``."""
        return self.to(dt.float32)

    def double(self) -> Module:
        """``to(float64)``."""
        return self.to(dt.float64)

    def cpu(self) -> Module:
        """Arrays live on the host already: returns this module."""
        return self

    def cuda(self, device=None) -> Module:
        """torch's ``module.cuda()``; raises :class:`~luminal.frontend.eager.EagerOnlyError`. Parameters
        live on the host and the device is chosen when compiling: ``lm.compile(outputs, backend="cuda")``
        or ``train.compile_step(loss, optimizer, backend="cuda")`` (the backend moves the parameters and
        keeps them there between calls).

        Args:
            device: accepted for torch's signature.
        """
        self._on_device("cuda()")

    def _on_device(self, call: str) -> NoReturn:
        raise eager_only(f"{type(self).__name__}.{call}", "a luminal module has no device: its parameters live on "
                         "the host, and the backend is chosen when compiling, e.g. lm.compile(outputs, "
                         "backend='cuda') or train.compile_step(loss, optimizer, backend='cuda'), which keeps "
                         f"them on the device between calls (registered: {', '.join(backend_names())}); "
                         "module.to('cpu') and .cpu() are accepted and change nothing")

    def zero_grad(self, set_to_none: bool = True) -> None:
        """torch's ``model.zero_grad()``: a no-op, kept so torch training loops port. torch clears the
        ``.grad`` that ``backward()`` accumulated on each parameter; luminal stores none (``p.grad``
        raises, naming where gradients are): ``lm.autograd.grad`` / ``train.grad`` build them as graph
        outputs, and ``train.compile_step`` computes them afresh on every call (its ``accumulate``
        sums clear themselves after each update), so there is nothing to clear.

        Args:
            set_to_none: accepted for torch's signature (no effect).
        """

    def _named(self, table: str, prefix: str, recurse: bool, remove_duplicate: bool):
        seen = set()
        mods = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse else [(prefix, self)]
        for mprefix, m in mods:
            for name, v in getattr(m, table).items():
                if v is None or (remove_duplicate and id(v) in seen):
                    continue
                seen.add(id(v))
                yield (f"{mprefix}.{name}" if mprefix else name), v

    def named_parameters(self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True):
        """(qualified name, Parameter) for each parameter, a shared one once unless ``remove_duplicate=False``
        (then under each of its names).

        Args:
            prefix: put before every name. recurse: include the submodules' parameters.
            remove_duplicate: list a shared parameter once.
        """
        return self._named("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse: bool = True):
        """An iterator over the parameters (see ``named_parameters``), as torch's: ``next(m.parameters())``
        is the first, ``list(m.parameters())`` all of them.

        Args:
            recurse: include the submodules' parameters.
        """
        return (p for _, p in self.named_parameters(recurse=recurse))

    def named_buffers(self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True):
        """(qualified name, Buffer) for each buffer (non-persistent ones too), a shared one once unless
        ``remove_duplicate=False``.

        Args:
            prefix: put before every name. recurse: include the submodules' buffers.
            remove_duplicate: list a shared buffer once.
        """
        return self._named("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse: bool = True):
        """An iterator over the buffers (see ``named_buffers``).

        Args:
            recurse: include the submodules' buffers.
        """
        return (b for _, b in self.named_buffers(recurse=recurse))

    # modes ------------------------------------------------------------------------------------
    def train(self, mode: bool = True) -> Module:
        """Training mode (dropout masks, batch statistics) for graphs built from now on. The mode is
        fixed when a graph is built: a graph (and every program compiled from it) keeps the mode its
        modules had then, so changing the mode of a module that a live graph was built from warns.

        Args:
            mode: True for training, False for evaluation.
        """
        if not isinstance(mode, (bool, np.bool_)):  # (train("eval") would be truthy: training mode)
            raise ValueError(f"{type(self).__name__}.train: training mode is expected to be boolean, got "
                             f"{type(mode).__name__} {mode!r} (eval() for evaluation mode)")
        return self._set_mode(bool(mode))

    def _set_mode(self, mode: bool, stacklevel: int = 3) -> Module:
        stale = []
        for name, m in self.named_modules():
            if m.__dict__["_training"] == mode:  # unchanged: nothing to warn about
                continue
            for ref, built in m.__dict__.get("_graph_modes", {}).values():
                g = ref()  # a live graph built in the other mode whose ops read this module's mode
                if g is not None and built != mode and id(m) in g.__dict__.get("nn_mode_reads", ()):
                    stale.append((name, built))
                    break
        for m in self.modules():
            m.__dict__["_training"] = mode
        if stale:
            name, built = stale[0]
            who = type(self).__name__ + (f" (submodule {name!r})" if name else "")
            more = f" and {len(stale) - 1} more submodule(s)" if len(stale) > 1 else ""
            warnings.warn(f"{who}{more}: set to {_mode(mode)} mode after a graph was built from it in "
                          f"{_mode(built)} mode; that graph and its compiled programs keep {_mode(built)} mode "
                          f"(build a new graph to run in {_mode(mode)} mode)", UserWarning, stacklevel=stacklevel)
        return self

    def eval(self) -> Module:
        """``train(False)``: evaluation mode for graphs built from now on."""
        return self._set_mode(False)

    def _record_graph(self, g) -> None:
        """Remember, for this module and its submodules, the graph ``g`` it is being called in and the
        mode each has (so a later mode change can warn, and ``Compiled``'s repr shows the mode). A host
        graph (``frontend/host.py``: a call on tensors whose values are known now) is not recorded."""
        if g is None or g.host:
            return
        modes = g.__dict__.setdefault("nn_modes", {})
        for m in self.modules():
            table = m.__dict__.get("_graph_modes")
            if table is None:
                table = {}
                object.__setattr__(m, "_graph_modes", table)
            entry = table.get(id(g))
            if entry is None or entry[0]() is not g:
                table[id(g)] = (weakref.ref(g), m.__dict__["_training"])
                for k in [k for k, (r, _) in table.items() if r() is None]:
                    del table[k]
            modes[m.__dict__["_training"]] = modes.get(m.__dict__["_training"], 0) + 1

    def _live_graphs(self) -> list:
        """The graphs built from this module (or a submodule) that are still alive."""
        live = {}
        for m in self.modules():
            for ref, _ in m.__dict__.get("_graph_modes", {}).values():
                g = ref()
                if g is not None:
                    live[id(g)] = g
        return list(live.values())

    def __deepcopy__(self, memo):
        """A deep copy (``copy.deepcopy``: TransformerEncoder's clones) with its own parameters, unnamed
        and built into no graph yet."""
        cls = type(self)
        new = cls.__new__(cls)
        memo[id(self)] = new
        for k, v in self.__dict__.items():
            if k == "_graph_modes":
                continue
            object.__setattr__(new, k, copy.deepcopy(v, memo))
        for s in (*new._parameters.values(), *new._buffers.values()):
            if s is not None:
                s.name = None
        return new

    def __getstate__(self):
        """What ``pickle`` keeps: the module without the graphs built from it (weak references, which
        cannot be pickled: a module called once could not be saved with ``torch.save``-style pickling),
        as a copy's (``__deepcopy__``)."""
        return {k: v for k, v in self.__dict__.items() if k != "_graph_modes"}

    # state ------------------------------------------------------------------------------------
    def _state_items(self):
        """(name, State) in torch's state_dict order: each module's parameters, then its persistent
        buffers, then its children, depth first."""
        return [(k, st) for k, st, _, _ in self._state_entries()]

    def _state_entries(self):
        """(name, State, owning module, the State's name in it) in torch's state_dict order."""
        out = []

        def walk(m, prefix, path):  # a module registered under several names is saved under each, as torch
            if id(m) in path:
                return
            path = path | {id(m)}
            for n, p in m._parameters.items():
                if p is not None:
                    out.append((prefix + n, p, m, n))
            for n, b in m._buffers.items():
                if b is not None and n not in m._non_persistent_buffers_set:
                    out.append((prefix + n, b, m, n))
            for n, c in m._modules.items():
                if c is not None:
                    walk(c, f"{prefix}{n}.", path)

        walk(self, "", set())
        return out

    def state_dict(self, *, destination=None, prefix: str = "", keep_vars: bool = False):
        """Name -> the live numpy array (bfloat16 values are carried in float32 arrays), as torch's.

        Args:
            destination: a dict to add the entries to (and return); a new OrderedDict by default.
            prefix: put before every name.
            keep_vars: give the Parameters and Buffers themselves instead of their arrays.
        """
        out = OrderedDict() if destination is None else destination
        for n, st in self._state_items():
            out[prefix + n] = st if keep_vars else st.data
        return out

    def state_dtypes(self) -> OrderedDict:
        """Name -> lm dtype of each state_dict entry (how it is saved)."""
        return OrderedDict((n, s.dtype) for n, s in self._state_items())

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False) -> _IncompatibleKeys:
        """Copy values by name into the parameters and buffers, converting dtypes. Shapes must match;
        with ``strict``, names must match exactly. Every problem is listed in one
        :class:`StateDictError` (a ValueError that is also torch's RuntimeError), and nothing is
        changed unless every value loads, and a Ctrl-C during the copy is raised after the last value.
        A BatchNorm's ``num_batches_tracked`` may be absent (checkpoints from before torch added it):
        it keeps its value, as torch's. Returns torch's ``(missing_keys, unexpected_keys)`` named tuple.

        Args:
            state_dict: name -> array (numpy arrays, CPU torch tensors, nested lists of numbers).
            strict: whether every name must match.
            assign: torch's ``assign=True``: each parameter and buffer takes the checkpoint's array
                itself (no copy: the memory is shared, as torch's module then holds the checkpoint's
                tensor) and a floating state takes the checkpoint's floating dtype; the Parameter
                objects stay (optimizers and ``requires_grad`` keep them). An array a state cannot hold
                as it is (read-only, strided, an int64 count: integers are int32 here) is copied.
        """
        apply, missing, unexpected = self.prepare_load(state_dict, strict, assign)
        apply()
        return _IncompatibleKeys(missing, unexpected)

    def prepare_load(self, state_dict, strict: bool = True, assign: bool = False):
        """``load_state_dict``'s checks and conversions, changing nothing: ``(apply, missing,
        unexpected)``, where ``apply()`` writes the values (a checkpoint checks all its parts first).
        The modules' load pre-hooks (``register_load_state_dict_pre_hook``) rewrite a copy of the
        state_dict first, as torch's."""
        state_dict = self._pre_hooked(state_dict, strict)
        entries = self._state_entries()
        own = OrderedDict((k, st) for k, st, _, _ in entries)
        given, bad = self._arrays(state_dict)
        missing = [k for k, _, m, n in entries if k not in state_dict and not _optional_state(m, n)]
        unexpected = [k for k in state_dict if k not in own]  # (as torch: their values are not looked at)
        problems = [bad[k] for k in own if k in bad]
        mis_shaped = [f"{k}: checkpoint {tuple(given[k].shape)} vs model {tuple(own[k].shape)}"
                      for k in own if k in given and tuple(given[k].shape) != tuple(own[k].shape)]
        if strict and missing:
            tied = {k: next((o for o in state_dict if o in own and own[o] is own[k]), None) for k in missing}
            problems.append("missing: " + ", ".join(k + (f" (tied: the same parameter as {tied[k]!r}, which the "
                                                         f"checkpoint has)" if tied[k] else "") for k in missing))
            if any(tied.values()):  # safetensors' save_model (and Hugging Face files) keep a tied weight once
                problems.append("a checkpoint that stores tied weights under one name loads with strict=False")
        if strict and unexpected:
            problems.append("unexpected: " + ", ".join(unexpected))
        if mis_shaped:
            problems.append("shape mismatch: " + "; ".join(mis_shaped))
        values = {}
        for k, st in own.items():
            if k in given and tuple(given[k].shape) == tuple(st.shape):
                try:
                    values[k] = _assigned(st, given[k]) if assign else (st.prepared(given[k]), None)
                except ValueError as e:
                    problems.append(f"{k}: {e}")
        retyped = [f"{k} ({own[k].dtype.name} -> {d.name})" for k, (_, d) in values.items()
                   if d is not None and d is not own[k].dtype]
        live = self._live_graphs() if retyped else []
        if live:
            problems.append(f"assign=True would change the dtype of {', '.join(retyped)} while {len(live)} graph(s) "
                            f"built from this module read the old one (load with assign=False to convert the "
                            f"values, or load before building a graph)")
        if problems:
            raise StateDictError(f"load_state_dict into {type(self).__name__}: " + " | ".join(problems))

        def apply():
            with interrupts_deferred():  # a Ctrl-C waits for the last value: no half-loaded model
                for k, (v, d) in values.items():
                    if d is None:
                        np.copyto(own[k].data, v, casting="unsafe")
                    else:
                        own[k]._replace(v, d)

        return apply, missing, unexpected

    def register_load_state_dict_pre_hook(self, hook) -> RemovableHandle:
        """Call ``hook(module, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
        error_msgs)`` before ``load_state_dict`` reads this module's entries, as torch's: it may rewrite
        the (copied) state_dict, e.g. rename an old checkpoint's keys (``prefix`` is this module's path
        with a trailing dot); a message it appends to ``error_msgs`` fails the load.

        Returns:
            A handle whose ``remove()`` unregisters the hook.
        """
        return self._register_load_state_dict_pre_hook(hook, with_module=True)

    def _register_load_state_dict_pre_hook(self, hook, with_module: bool = False) -> RemovableHandle:
        """torch's private form (ported code uses it): ``hook(state_dict, prefix, ...)``, with the module
        first when ``with_module``."""
        return self._add_hook("_load_state_dict_pre_hooks", (hook, with_module, False), False)

    def _pre_hooked(self, state_dict, strict: bool):
        """``state_dict`` as the load pre-hooks of this module and its submodules (parents first, as
        torch's recursive load calls them; a module shared by several paths, once per path, with that
        path's prefix, as its entries are saved under each) rewrite it: a copy, when there are hooks."""
        hooked = [(p, m) for p, m in self.named_modules(remove_duplicate=False)
                  if m.__dict__.get("_load_state_dict_pre_hooks")]
        if not hooked or not isinstance(state_dict, Mapping):
            return state_dict
        state_dict, errors = OrderedDict(state_dict), []
        for path, m in hooked:
            prefix = f"{path}." if path else ""
            for hook, with_module, _ in list(m._load_state_dict_pre_hooks.values()):
                args = (state_dict, prefix, {}, strict, [], [], errors)
                hook(m, *args) if with_module else hook(*args)
        if errors:
            raise StateDictError(f"load_state_dict into {type(self).__name__}: " + " | ".join(map(str, errors)))
        return state_dict

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
            except TypeError as e:  # an object numpy cannot read: a torch bfloat16 tensor
                hint = " (a torch bfloat16 tensor: pass t.float().numpy(); the parameter's dtype is kept)" \
                    if "BFloat16" in str(e) else ""
                problems[k] = f"the value for {k!r} cannot be read as an array ({type(v).__name__}: {e}){hint}"
                continue
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

    def load_safetensors(self, path, strict: bool = True) -> _IncompatibleKeys:
        """Load a safetensors file by name (bf16/f16/f32/f64 converted to each parameter's dtype);
        strict name and shape checks as in ``load_state_dict``."""
        from luminal.core.safetensors_io import load_file

        tensors = load_file(path)
        try:
            return self.load_state_dict(tensors, strict=strict)
        except StateDictError as e:
            raise StateDictError(f"{path}: {e}") from None

    # calling ----------------------------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        self._name_states()
        g = building.graph_in(args, kwargs)  # the graph this call builds in (frontend/building.py)
        if g is None and building.current() is None and any(_data(a) for a in (*args, *kwargs.values())):
            got = building.describe_args(args, kwargs)
            raise op_error(TypeError, self._who(), f"called on no GraphTensor ({got}): a module builds graph ops; "
                           f"call it on a graph's tensors (x = g.input('x', shape)), then compile its outputs with "
                           f"lm.compile and run that on arrays")
        self._record_graph(g)
        _calls.depth = getattr(_calls, "depth", 0) + 1
        try:
            with building.module_call(g, self._who, args, kwargs):
                if not (self.__dict__.get("_forward_pre_hooks") or self.__dict__.get("_forward_hooks")):
                    return self.forward(*args, **kwargs)
                return self._call_with_hooks(args, kwargs)
        except Exception as e:
            _note_module_path(e, self)
            raise
        finally:
            _calls.depth -= 1

    def _call_with_hooks(self, args: tuple, kwargs: dict):
        """``forward`` between the forward pre-hooks and hooks, in torch's order and with torch's rules
        for what a hook's result replaces (``register_forward_pre_hook``, ``register_forward_hook``)."""
        for hook, with_kwargs, _ in list(self.__dict__.get("_forward_pre_hooks", {}).values()):
            if with_kwargs:
                result = hook(self, args, kwargs)
                if result is not None:
                    if not (isinstance(result, tuple) and len(result) == 2):
                        raise RuntimeError(f"{type(self).__name__}: a forward pre-hook registered with_kwargs=True "
                                           f"must return None or a tuple (new_args, new_kwargs), got "
                                           f"{type(result).__name__}")
                    args, kwargs = result
            else:
                result = hook(self, args)
                if result is not None:
                    args = result if isinstance(result, tuple) else (result,)
        hooks = list(self.__dict__.get("_forward_hooks", {}).values())
        called = set()
        try:
            out = self.forward(*args, **kwargs)
            for i, (hook, with_kwargs, _) in enumerate(hooks):
                called.add(i)
                result = hook(self, args, kwargs, out) if with_kwargs else hook(self, args, out)
                if result is not None:
                    out = result
            return out
        except Exception:
            for i, (hook, with_kwargs, always) in enumerate(hooks):  # (torch's always_call: also on failure)
                if always and i not in called:
                    try:
                        hook(self, args, kwargs, None) if with_kwargs else hook(self, args, None)
                    except Exception as e:  # noqa: BLE001 (the forward's error is the one raised)
                        warnings.warn(f"{type(self).__name__}: an always_call forward hook raised {e!r} while "
                                      f"handling the forward's error", UserWarning, stacklevel=3)
            raise

    def register_forward_pre_hook(self, hook, *, prepend: bool = False, with_kwargs: bool = False) -> RemovableHandle:
        """Call ``hook(module, args)`` before each call's ``forward``, as torch's (here, when the call
        builds its graph ops: the args are the call's GraphTensors). A result other than None replaces
        the args (a value that is not a tuple is the one positional argument). With ``with_kwargs``,
        ``hook(module, args, kwargs)`` returns None or ``(args, kwargs)``.

        Args:
            hook: the function. prepend: run it before the hooks registered so far.
            with_kwargs: pass (and let it replace) the keyword arguments too.

        Returns:
            A handle whose ``remove()`` (or the end of its ``with`` block) unregisters the hook.
        """
        return self._add_hook("_forward_pre_hooks", (hook, with_kwargs, False), prepend)

    def register_forward_hook(self, hook, *, prepend: bool = False, with_kwargs: bool = False,
                              always_call: bool = False) -> RemovableHandle:
        """Call ``hook(module, args, output)`` after each call's ``forward``, as torch's (here, when the
        call builds its graph ops: the output is a GraphTensor, which can be kept to be compiled as
        another output, as torch's hooks keep activations). A result other than None replaces the
        output.

        Args:
            hook: the function. prepend: run it before the hooks registered so far.
            with_kwargs: call ``hook(module, args, kwargs, output)``.
            always_call: call it (with output None) also when ``forward`` raised.

        Returns:
            A handle whose ``remove()`` (or the end of its ``with`` block) unregisters the hook.
        """
        return self._add_hook("_forward_hooks", (hook, with_kwargs, always_call), prepend)

    def _add_hook(self, table: str, entry: tuple, prepend: bool) -> RemovableHandle:
        if not callable(entry[0]):
            raise TypeError(f"{type(self).__name__}: a hook must be callable, got {type(entry[0]).__name__}")
        hooks = self.__dict__.get(table)
        if hooks is None:
            hooks = OrderedDict()
            object.__setattr__(self, table, hooks)
        handle = RemovableHandle(hooks)
        hooks[handle.id] = entry
        if prepend:
            hooks.move_to_end(handle.id, last=False)
        return handle

    def register_full_backward_hook(self, hook, prepend: bool = False) -> NoReturn:
        """torch's backward hooks have nothing to run on here: see ``_no_backward_hooks``."""
        self._no_backward_hooks("register_full_backward_hook")

    def register_full_backward_pre_hook(self, hook, prepend: bool = False) -> NoReturn:
        """torch's backward hooks have nothing to run on here: see ``_no_backward_hooks``."""
        self._no_backward_hooks("register_full_backward_pre_hook")

    def register_backward_hook(self, hook) -> NoReturn:
        """torch's backward hooks have nothing to run on here: see ``_no_backward_hooks``."""
        self._no_backward_hooks("register_backward_hook")

    def _no_backward_hooks(self, name: str) -> NoReturn:
        """A backward hook runs during torch's eager backward pass; here gradients are graph outputs
        that ``train.grad`` builds once, so there is no pass to call it in: the error says how to get
        the gradients such a hook would see."""
        raise NotImplementedError(
            f"{type(self).__name__}.{name}: luminal has no backward hooks (gradients are graph outputs "
            f"built by luminal.train.grad, not computed in an eager backward pass); to see a layer's gradients, "
            f"keep its output with register_forward_hook and compile luminal.train.grad(loss, [output, "
            f"*module.parameters()]) as extra outputs")

    def _get_name(self) -> str:
        """The class name, as torch's (custom ``__repr__``s call it)."""
        return type(self).__name__

    def _who(self) -> str:
        """This module as errors name it: ``Linear(in_features=3, out_features=4, bias=True)``, ``GPT()``."""
        return f"{type(self).__name__}({self.extra_repr()})"

    def forward(self, *args, **kwargs):
        """The computation; subclasses define it (calling the module runs it)."""
        raise NotImplementedError(f"{type(self).__name__} defines neither forward nor __call__")

    def _name_states(self):
        """Give unnamed parameters and buffers their qualified names (graph nodes and reports use them)."""
        for n, s in list(self.named_parameters()) + list(self.named_buffers()):
            if s.name is None:
                s.name = n

    def extra_repr(self) -> str:
        """The text inside this module's repr parentheses (before its children), as torch's."""
        return ""

    def __repr__(self):
        """torch's layout: ``Name(extra)``, or the extra lines and ``(child): repr`` lines indented."""
        extra = self.extra_repr()
        extra_lines = extra.split("\n") if extra else []
        child_lines = [f"({k}): " + _addindent(repr(m), 2) for k, m in self._modules.items()]
        lines = extra_lines + child_lines
        body = ""
        if lines:
            body = extra_lines[0] if len(extra_lines) == 1 and not child_lines else \
                "\n  " + "\n  ".join(lines) + "\n"
        return f"{type(self).__name__}({body})"


class RemovableHandle:
    """What a ``register_*_hook`` returns, as torch's: ``remove()`` unregisters the hook (once; the
    module's later copies keep theirs), and so does leaving a ``with handle:`` block."""

    _ids = itertools.count()

    def __init__(self, hooks: OrderedDict):
        self.id = next(RemovableHandle._ids)
        self._hooks = weakref.ref(hooks)

    def remove(self) -> None:
        hooks = self._hooks()
        if hooks is not None:
            hooks.pop(self.id, None)

    def __enter__(self) -> RemovableHandle:
        return self

    def __exit__(self, *exc) -> None:
        self.remove()


class StateDictError(ValueError, RuntimeError):
    """``load_state_dict``'s error (names or shapes that do not match, values that cannot be read): a
    ValueError, and torch's RuntimeError too, so that a port's ``except RuntimeError:`` around
    ``load_state_dict`` (a strict load falling back to ``strict=False``) catches it."""


def _assigned(st: State, arr: np.ndarray) -> tuple[np.ndarray, dt.DType]:
    """``arr`` as the new storage of ``st`` for ``load_state_dict(assign=True)``, and its dtype: a
    floating state takes a floating array's dtype, another keeps its own (lm has one integer type);
    the array itself when the state can hold it as it is (torch's module then shares the checkpoint's
    memory), else a converted copy."""
    if st.dtype.is_float and arr.dtype.kind == "f":
        d, value = dt.as_dtype(arr.dtype), arr
    else:
        d, value = st.dtype, st.prepared(arr)
    if value is arr and arr.dtype == d.np and arr.flags.c_contiguous and arr.flags.writeable:
        return arr, d
    return np.array(dt.to_storage(value, d), order="C", copy=True), d


class _IncompatibleKeys(NamedTuple):
    """What ``load_state_dict`` returns, as torch's: the model's names the state_dict lacks and the
    state_dict's names the model lacks (a tuple: ``missing, unexpected = model.load_state_dict(sd)``)."""

    missing_keys: list[str]
    unexpected_keys: list[str]

    def __repr__(self):
        return "<All keys matched successfully>" if not self.missing_keys and not self.unexpected_keys else \
            f"_IncompatibleKeys(missing_keys={self.missing_keys}, unexpected_keys={self.unexpected_keys})"


def _optional_state(module: Module, name: str) -> bool:
    """Whether a state_dict may lack the state ``name`` of ``module``: torch's ``_NormBase`` (the batch
    and instance norms) added ``num_batches_tracked`` in its version 2 and, loading a state_dict without
    it, keeps the buffer's value (``_load_from_state_dict``); our norms have torch's attribute names."""
    return name == "num_batches_tracked" and getattr(module, "track_running_stats", False) is True


def _data(a, nested: bool = False) -> bool:
    """Whether a module argument is data a graph would take as an input (an array, a State, a list of
    numbers): a top-level call on no tensor but such data is an error saying to build a graph. A bare
    number (a size, a flag) is not data."""
    if isinstance(a, (list, tuple)):
        return any(_data(b, True) for b in a)
    if isinstance(a, (np.ndarray, State)):
        return True
    return nested and isinstance(a, (int, float)) and not isinstance(a, bool)


def _addindent(s: str, n: int) -> str:
    """Indent every line of ``s`` but the first by ``n`` spaces (torch's ``_addindent``)."""
    lines = s.split("\n")
    return lines[0] if len(lines) == 1 else lines[0] + "\n" + "\n".join(" " * n + ln for ln in lines[1:])


def _mode(training: bool) -> str:
    return "train" if training else "eval"
