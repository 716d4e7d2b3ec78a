"""The graph a module call builds in.

torch code reads a module's parameters and buffers as tensors (``x * self.weight``,
``self.bias[:, :, :T, :T]``) and makes tensors from nothing inside ``forward``
(``torch.arange(0, t)``). In luminal a tensor is a node of a graph, so each of those needs a graph to
join. The operands usually carry one; when none does (a buffer sliced on its own, a factory given no
graph), the graph is the one the enclosing module call builds in: the graph of that call's tensor
arguments. ``nn.Module.__call__`` opens a :func:`module_call` around ``forward``; a submodule called
with no tensor argument builds in its caller's graph. A top-level call with no graph at all leaves a
:class:`NoGraph` mark, so that what fails inside it can say which module was called on what.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import contextmanager

from luminal.frontend.graph import Graph
from luminal.frontend.tensor import GraphTensor

_local = threading.local()  # graphs are built per thread: one stack of module calls each


class NoGraph:
    """The mark of a module call that found no graph in its arguments: ``who`` was called, ``got``
    says on what (for the errors raised inside it)."""

    __slots__ = ("who", "got")

    def __init__(self, who: str, got: str):
        self.who, self.got = who, got


def current() -> Graph | NoGraph | None:
    """The graph of the innermost module call (a :class:`NoGraph` mark when it found none), or None
    outside every module call."""
    stack = getattr(_local, "stack", None)
    return stack[-1] if stack else None


def graph_in(args, kwargs) -> Graph | None:
    """The graph of the first GraphTensor (or Graph) among ``args`` and ``kwargs``' values, also one
    level inside lists, tuples and dicts (a module called on ``(q, k, v)`` or ``{"x": x}``)."""
    for a in (*args, *kwargs.values()):
        items = a.values() if isinstance(a, dict) else a if isinstance(a, (list, tuple)) else (a,)
        for b in items:
            if isinstance(b, GraphTensor):
                return b.graph
            if isinstance(b, Graph):
                return b
    return None


def describe_args(args, kwargs) -> str:
    """The arguments of a call as errors name them: ``ndarray (2, 8) int64, targets=None``."""

    def one(a) -> str:
        shape, dtype = getattr(a, "shape", None), getattr(a, "dtype", None)
        if isinstance(shape, tuple) and dtype is not None:
            return f"{type(a).__name__} {tuple(shape)} {getattr(dtype, 'name', dtype)}"
        text = repr(a)
        return f"{type(a).__name__} {text if len(text) <= 40 else text[:37] + '...'}"

    parts = [one(a) for a in args] + [f"{k}={one(v)}" for k, v in kwargs.items()]
    return ", ".join(parts) or "no arguments"


@contextmanager
def module_call(graph: Graph | None, who: Callable[[], str], args, kwargs):
    """Build in ``graph`` (the call's own) for the ``with`` block; with None, in the enclosing call's
    graph, or under a :class:`NoGraph` mark at the top level (``who()`` names the module called)."""
    stack = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    if graph is None and stack and isinstance(stack[-1], Graph):
        yield  # a submodule called on no tensor (a position count): its caller's graph
        return
    stack.append(graph if graph is not None else NoGraph(who(), describe_args(args, kwargs)))
    try:
        yield
    finally:
        stack.pop()
