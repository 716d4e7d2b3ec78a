"""The backend protocol and the registry that ``lm.compile(..., backend=NAME)`` looks names up in.

A backend turns what the compiler hands it into a *program*: a callable ``program(arrays, env)``
that takes every input, state and random array by name (``arrays``) and the binding of the symbolic
dims (``env``), and returns a list: the outputs, then the new values of the updated states (the
caller writes those back into the states, after every read has seen the old values). Two levels:

- ``level = "kernels"``: the backend reads only the compiler's :class:`~luminal.core.kernel_graph.KernelGraph`
  and its :class:`~luminal.core.kernel_graph.MemoryPlan` (``program``), and may time a candidate
  kernel graph for ``search=N`` (``time``). Every code-generating backend is of this level.
  ``program`` also gets the ``search=N`` of ``lm.compile``: a backend with alternatives of its own
  (the cpu backend's threads, vector width, layouts) may time up to N of them on a binding's first
  call and keep the fastest; one without ignores it.
- ``level = "graph"``: the backend interprets the primitive graph itself, op by op (``interpret``):
  the reference interpreter, the ground truth every other backend is tested against, which must not
  depend on the compiler it checks. It gets the roots as (node, View) pairs, whose nodes are objects
  with ``id``, ``op``, ``arg``, ``srcs`` = [(node, View)], ``shape`` and ``dtype`` (the table in
  ``core/primitives.py``), and the graph's constant table; it imports no frontend class.

A program that keeps States on a device says so with ``takes_states = True``: it is then handed each
State itself (a ``core.residency.Mirrored``) instead of its array, keeps the State's device copy, and
returns None in place of an update it applied to that copy (the State is then marked written on the
device, and reading its ``data`` brings the values back).

A program may also have ``describe() -> str``: its generated code as text (each kernel's IR and what
its compiler said), which ``compiled.report(code=True)`` prints.

Registration: a backend package calls :func:`register_backend` when it is imported. The built-in
ones are named in ``_BUILTIN`` (imported on first use, so ``import luminal`` stays light); a package
outside this project registers through the ``luminal.backends`` entry-point group (``name =
"module"``). The compiler never imports a backend: it asks this registry.
"""

from __future__ import annotations

import functools
import importlib
from importlib.metadata import entry_points

import numpy as np

from luminal.core.gc_paused import gc_paused
from luminal.core.symbolic import evaluate

_BUILTIN = {"reference": "luminal.backends.reference", "cpu": "luminal.backends.cpu",
            "cuda-emulated": "luminal.backends.cuda", "cuda": "luminal.backends.cuda"}
_REGISTRY: dict[str, Backend] = {}


class Backend:
    """Base class of every backend; subclasses set ``name`` and implement their level's method."""

    name: str = ""
    level: str = "kernels"  # or "graph"
    # The primitives (names in core/primitives.py's PRIMITIVES) its lowering covers: the backend facet of
    # the primitive records, which a test checks covers every primitive for every registered backend.
    primitives: frozenset = frozenset()

    def lowers(self, primitive: str) -> bool:
        """Whether this backend runs the primitive named ``primitive``."""
        return primitive in self.primitives

    def program(self, kernel_graph, plan, search: int = 0):
        """A program running ``kernel_graph`` with the temps placed as ``plan`` says (level "kernels");
        ``search``: how many of its own alternatives it may time (module docstring), 0 for none."""
        raise NotImplementedError(f"backend {self.name!r} does not run kernel graphs")

    def interpret(self, roots, constants):
        """A program evaluating the (node, View) ``roots`` op by op (level "graph")."""
        raise NotImplementedError(f"backend {self.name!r} does not interpret primitive graphs")

    def time(self, kernel_graph, plan) -> float:
        """Seconds one run of the candidate ``kernel_graph`` takes here (for ``search=N``)."""
        raise NotImplementedError(f"backend {self.name!r} cannot time candidates for search")

    def can_time(self) -> bool:
        return type(self).time is not Backend.time

    def expect_code(self, nodes: int) -> None:
        """The compile of a program of a graph of ``nodes`` nodes missed the compile cache: the pipeline
        runs now and the program's code is generated soon after. A backend whose code generation can
        start work ahead (the cpu backend's LLVM worker processes) starts it here; by default nothing."""

    def __repr__(self):
        return f"<backend {self.name!r} ({self.level})>"


def register_backend(backend: Backend) -> Backend:
    """Make ``backend`` available under ``backend.name`` (a later registration of the name replaces it)."""
    if not isinstance(backend, Backend) or not isinstance(backend.name, str) or not backend.name:
        raise TypeError(f"register_backend: expected a named luminal.core.backend.Backend, got {backend!r}")
    if backend.level not in ("kernels", "graph"):
        raise ValueError(f"register_backend: backend {backend.name!r} has level {backend.level!r}; "
                         f"expected 'kernels' or 'graph'")
    _REGISTRY[backend.name] = backend
    return backend


@functools.cache
def _plugins() -> dict[str, str]:
    """Backends installed by other packages (the ``luminal.backends`` entry points), read once: the
    scan of every installed distribution's metadata costs milliseconds."""
    return {ep.name: ep.value for ep in entry_points(group="luminal.backends")}


def backend_names() -> list[str]:
    """Every backend name that can be looked up (registered, built in, or installed as a plugin)."""
    return sorted({*_REGISTRY, *_BUILTIN, *_plugins()})


def get_backend(name: str) -> Backend:
    """The backend registered as ``name``, importing its package on first use."""
    if not isinstance(name, str):
        raise TypeError(f"backend must be a name (str), got {type(name).__name__}; available: {backend_names()}")
    if name not in _REGISTRY:
        module = _BUILTIN.get(name) or _plugins().get(name)
        if module is None:
            raise ValueError(f"unknown backend {name!r}; available: {backend_names()}")
        with gc_paused():  # (importing a backend's package allocates and frees little: ``gc_paused``)
            importlib.import_module(module)
        if name not in _REGISTRY:
            raise RuntimeError(f"backend package {module!r} did not register a backend named {name!r}")
    return _REGISTRY[name]


def zero_inputs(kernel_graph, env) -> dict[str, np.ndarray]:
    """Zero-filled arrays for every input, state and random buffer of ``kernel_graph`` under ``env``
    (what a backend's ``time`` runs a candidate on)."""
    return {b.name: np.zeros(tuple(evaluate(d, env) for d in b.shape), b.dtype.np)
            for b in kernel_graph.buffers if b.kind in ("input", "state", "random")}
