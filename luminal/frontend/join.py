"""Operands that join the graph an op builds in: Parameters, Buffers and host tensors.

torch code passes a module's parameters to ops as tensors (``F.layer_norm(x, s, self.weight,
self.bias)``, ``x * self.scale``, ``torch.cat([cls, x])``). Every public op, GraphTensor method and
functional (``lm.*``, ``x.*``, ``F.*``) is wrapped by :func:`joins`: when an argument is a
:class:`State` (``nn.Parameter``, ``nn.Buffer``) it is read into the graph the op builds in, as
``s.on(graph)`` would (one node per State and graph, its value read on every run, its gradient
reachable by ``train.grad``); a host tensor (``frontend/host.py``) of another graph becomes a constant
of that graph, but a State's basic-indexed view (``w[0]``: ``state_tensor.StateView``) becomes the
State there, indexed, as torch's view is the parameter. Arguments are looked at one level deep (the
list given to ``cat``, an index tuple).

The graph an op builds in is the graph of its first GraphTensor operand (not a host one), else the
graph of the enclosing module call (``frontend/building.py``), else that of a host tensor operand.
A State with none of these to join fails naming the op, the State and what to do.

The check is an isinstance per argument, so ops on plain GraphTensors pay one scan of their arguments.
"""

from __future__ import annotations

import functools
import inspect
import warnings
from collections.abc import Callable
from typing import Any, TypeVar

from luminal.core.errors import op_error, user_stacklevel
from luminal.frontend import building
from luminal.frontend.graph import Graph
from luminal.frontend.host import host_graph, value
from luminal.frontend.state import State
from luminal.frontend.tensor import GraphTensor

_F = TypeVar("_F", bound=Callable[..., Any])


def _foreign(a) -> bool:
    """Whether ``a`` must join the op's graph: a State, or a host tensor (it may be another graph's)."""
    if isinstance(a, GraphTensor):
        return a.graph.host
    return isinstance(a, State)


def _needs_join(items) -> bool:
    for a in items:
        if isinstance(a, GraphTensor):
            if a.graph.host:
                return True
        elif isinstance(a, State):
            return True
        elif isinstance(a, (list, tuple)) and any(_foreign(b) for b in a):
            return True
    return False


def _flat(args, kwargs):
    for a in (*args, *kwargs.values()):
        if isinstance(a, (list, tuple)):
            yield from a
        else:
            yield a


def target(op: str, args, kwargs, host_ok: bool = False) -> Graph:
    """The graph ``op`` builds in (module docstring); ``host_ok``: with nothing to join, a new host
    graph (a State read outside any graph: ``nn.Parameter(w[:16])``) instead of an error."""
    items = list(_flat(args, kwargs))
    host = None
    for a in items:
        if isinstance(a, GraphTensor):
            if not a.graph.host:
                return a.graph
            host = host or a.graph
    ctx = building.current()
    if isinstance(ctx, Graph):
        return ctx
    if host is not None:
        return host
    if host_ok and ctx is None:
        return host_graph()
    states = [a for a in items if isinstance(a, State)]
    raise no_graph(op, states)


def no_graph(op: str, states) -> TypeError:
    """The error for States with no graph to join: what was called on what, and what to do."""
    what = " and ".join(s.describe() for s in states) or "a Parameter or Buffer"
    ctx = building.current()
    if isinstance(ctx, building.NoGraph):
        msg = (f"{what} has no graph to join: {ctx.who} was called on no GraphTensor ({ctx.got}); call the "
               f"module on a graph's tensors (x = g.input('x', shape)), then compile its outputs with lm.compile "
               f"and run that on arrays")
    else:
        msg = (f"{what} has no graph to join: no operand is a graph's tensor and no module call is building a "
               f"graph; use it with a graph's tensor (x * w), inside the forward of a module called on one, or "
               f"read it into a graph with w.on(g)")
    return op_error(TypeError, op, msg)


def into(a, g: Graph):
    """``a`` as an operand of an op building in ``g``: a State as its tensor there (a host graph takes its
    current value as a constant), a host tensor of another graph as a constant; anything else as is."""
    if isinstance(a, State):
        if not g.host:
            return g.state(a)
        c = g.constant(a.data, a.dtype)
        if a.dtype.is_float and getattr(a, "requires_grad", False):  # (a Parameter: see _warn_if_trained)
            g.__dict__.setdefault("parameter_constants", {})[c.node.id] = a
        return c
    if isinstance(a, GraphTensor) and a.graph is not g and a.graph.host:
        if not g.host:
            if hasattr(a, "read_into"):  # a State's view (``state_tensor.StateView``): the State, indexed there
                return a.read_into(g)
            p = _warn_if_trained(a)
            if p is not None:  # (``lm.autograd.grad``'s "not used" error names the cause: ``constant_reads``)
                c = g.constant(value(a), a.dtype)
                g.__dict__.setdefault("constant_reads", {})[c.node.id] = p
                return c
        return g.constant(value(a), a.dtype)
    if isinstance(a, (list, tuple)) and any(_foreign(b) for b in a):
        return type(a)(into(b, g) for b in a)
    return a


def _warn_if_trained(a: GraphTensor) -> State | None:
    """Warn when host tensor ``a``, joining a graph as a constant, was computed differentiably from a
    trainable Parameter's current values: torch's eager value would carry the Parameter's gradient
    (``F.mse_loss(m.weight, lm.zeros(3, 3)) + m(x).sum()``: a weight penalty built outside the module's
    call), this constant carries none, silently. The walk stops at int and bool values and the user's
    ``detach()``, where torch's gradient stops too (a pruning mask ``w[:] > 0.1`` warns of nothing).
    Returns the Parameter warned of, else None."""
    found = a.graph.__dict__.get("parameter_constants")
    if not found or not a.dtype.is_float:
        return None
    stops = a.graph.user_detached | a.graph.no_grad_results
    seen, todo = set(), [a.node]
    while todo:
        n = todo.pop()
        if n.id in seen or n.id in stops or not n.dtype.is_float:
            continue
        seen.add(n.id)
        if n.id in found:
            p = found[n.id]
            warnings.warn(f"a value computed outside any graph from {p.describe()} (its current values) joins this "
                          f"graph as a constant: no gradient reaches the Parameter through it, where torch's eager "
                          f"value would carry one. Compute it inside the graph (in the module's forward, or from "
                          f"the Parameter's tensor there: w.on(graph)) for a gradient; detach() it to say it is a "
                          f"constant", UserWarning, stacklevel=user_stacklevel())
            return p
        todo.extend(s for s, _ in n.srcs)
    return None


def join(op: str, args: tuple, kwargs: dict, keep: frozenset = frozenset()) -> tuple[tuple, dict]:
    """``args`` and ``kwargs`` with every State and foreign host tensor joined into the op's graph; the
    positions and names in ``keep`` are left as they are."""
    g = target(op, args, kwargs)
    return (tuple(a if i in keep else into(a, g) for i, a in enumerate(args)),
            {k: v if k in keep else into(v, g) for k, v in kwargs.items()})


def joins(fn: _F, op: str | None = None, keep: tuple[str, ...] = ()) -> _F:
    """``fn`` (a public op, method or functional) taking States and host tensors as operands; ``op``
    names it in errors (default: its ``__name__``). The parameters named in ``keep`` take a State as
    itself (``F.batch_norm``'s running statistics, which it updates in place)."""
    name = op or fn.__name__
    kept: frozenset = frozenset()
    if keep:
        params = list(inspect.signature(fn).parameters)
        kept = frozenset(keep) | {params.index(k) for k in keep}

    @functools.wraps(fn)
    def run(*args, **kwargs):
        if _needs_join(args) or (kwargs and _needs_join(kwargs.values())):
            args, kwargs = join(name, args, kwargs, kept)
        return fn(*args, **kwargs)

    return run  # type: ignore[return-value]  # functools.wraps keeps fn's signature


def op_name(method: str) -> str:
    """The op a method name stands for in errors: ``__rmul__`` -> ``mul``, ``__getitem__`` -> ``getitem``."""
    if not method.startswith("__"):
        return method
    base = method[2:-2]
    if base.startswith("r") and base[1:] in _REFLECTED:
        base = base[1:]
    return _DUNDER_OPS.get(base, base)


_REFLECTED = {"add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and", "or", "xor", "lshift",
              "rshift"}
_DUNDER_OPS = {"truediv": "div", "floordiv": "floor_divide", "mod": "remainder", "and": "bitwise_and",
               "or": "bitwise_or", "xor": "bitwise_xor", "lshift": "bitwise_left_shift",
               "rshift": "bitwise_right_shift"}


def joins_all(namespace: dict, names, keep: dict | None = None) -> None:
    """Wrap each of ``names`` in ``namespace`` (a module's globals) with :func:`joins`, in place; ``keep``:
    name -> the parameters that take a State as itself."""
    for n in names:
        f = namespace[n]
        if callable(f) and not isinstance(f, type):
            namespace[n] = joins(f, n, (keep or {}).get(n, ()))
