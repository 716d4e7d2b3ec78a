"""Tensor-argument checks at the entry of an op, a layer or a loss.

A wrong argument should fail at the call that takes it, with an error naming that call: not later
as an AttributeError (``None.dtype``), or as an error of an inner op or primitive the user never
wrote (a ``Gather`` given tensors of two graphs). The checks are an isinstance and an identity
compare per argument, so building a graph stays cheap. (Numbers and sizes: ``errors.check_number``,
``errors.check_int``.)
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, TypeVar

from luminal.core.errors import op_error, outermost_op, renamed
from luminal.frontend.state import State
from luminal.frontend.tensor import GraphTensor


def check_tensors(op: str, /, *, optional=(), **named) -> None:
    """Each named argument must be a GraphTensor (those named in ``optional`` may be None), all of one
    graph; otherwise a TypeError/ValueError naming ``op`` and the argument."""
    graph = None
    for what, x in named.items():
        if not isinstance(x, GraphTensor):
            if x is None and what in optional:
                continue
            raise op_error(TypeError, op, f"{what} must be a GraphTensor, got {got(x)}")
        if graph is None:
            graph = x.graph
        elif x.graph is not graph:
            ts = [t for t in named.values() if isinstance(t, GraphTensor)]
            raise op_error(ValueError, op, "operands belong to different graphs", *ts)


def got(x) -> str:
    """What a non-tensor argument is, for errors: its type; a Parameter or Buffer named, with how to read
    it into a graph (the public ops do it themselves, ``frontend/join.py``; this is for what they reach).
    A plain State (an optimizer's) has no ``on``: ``graph.state(s)`` reads it."""
    if isinstance(x, State):
        how = ".on(graph)" if hasattr(x, "on") else "graph.state(...)"
        return f"{x.describe()} (read it into the graph with {how})"
    return type(x).__name__


_F = TypeVar("_F", bound=Callable[..., Any])


def tensor_op(name: str) -> Callable[[_F], _F]:
    """Decorator for a public op whose first argument is a tensor: that argument is checked on entry
    (``relu(None)`` says ``relu: input must be a GraphTensor``, not ``'NoneType' object has no attribute``),
    and errors of the ops it is built from are reported under ``name`` (``renamed``). Its int and bool
    results of float tensors are marked as having no gradient when the user called it
    (``Graph.user_stop``)."""

    def deco(f: _F) -> _F:
        first = inspect.unwrap(f).__code__.co_varnames[0]
        rename = renamed(name)

        @functools.wraps(f)
        def op(*args, **kwargs):
            x = args[0] if args else kwargs.get(first)
            if not isinstance(x, GraphTensor):
                check_tensors(name, input=x)  # raises, with the one wording
            users = outermost_op() is None
            with rename:
                out = f(*args, **kwargs)
            if users and any(isinstance(a, GraphTensor) and a.dtype.is_float for a in (*args, *kwargs.values())):
                out = _mark_no_grad(out)
            if isinstance(out, GraphTensor) and any(out is a for a in (*args, *kwargs.values())):
                # an op that changes nothing (cat of one, pow(1), roll by 0) still gives a handle of its
                # own, as torch's give a new tensor: an in-place method on it must not rebind its input
                return out.graph.tensor(out.node, out.layout)
            return out

        return op  # type: ignore[return-value]  # functools.wraps keeps f's signature

    return deco


def _mark_no_grad(out):
    """An op's results (a tensor or a tuple of them; the op read a float tensor) with each int and bool
    one as the user's own node, marked as having no gradient (``Graph.user_stop``: not the node, which
    an op's inner one may be)."""
    if isinstance(out, GraphTensor):
        return out if out.dtype.is_float else out.graph.user_stop(out)
    if isinstance(out, tuple) and any(isinstance(t, GraphTensor) and not t.dtype.is_float for t in out):
        marked = [_mark_no_grad(t) if isinstance(t, GraphTensor) else t for t in out]
        return out._make(marked) if hasattr(out, "_make") else tuple(marked)  # (a namedtuple stays one)
    return out
