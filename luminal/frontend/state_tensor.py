"""A State used as a tensor: GraphTensor's methods, operators and ``T``/``mT`` on Parameters and Buffers.

torch code calls tensor methods on parameters and buffers directly: ``self.weight.T``,
``self.bias[:, :, :T, :T]``, ``self.scale * x``. A State is a host array, not a node, so each such
method first reads the State into the graph its op builds in (``frontend/join.py``: the graph of a
tensor argument, else of the enclosing module call) and then runs GraphTensor's method there.

Indexing outside any graph (no tensor argument and no module call: a script or ``__init__``, as in
``nn.Parameter(wpe.weight[:16])`` or ``bias[:, :, :n, :n]`` when cropping a model) reads the State's
current values instead: the result is a host tensor (``frontend/host.py``) of those values, which a
new Parameter or Buffer takes as its initial value (a copy: torch's would share storage). Every other
method with no graph to join fails naming it and the fix.

The State's own host-side attributes (``shape``, ``dtype``, ``ndim``, ``size()``, ``dim()``,
``numel()``, ``data``) stay its own; ``==``/``!=`` are elementwise only against a tensor, an array
or a number (a State compared with anything else, another State included, is compared by identity,
so lists and dicts of States keep working).
"""

from __future__ import annotations

import numbers

import numpy as np

from luminal.frontend import join
from luminal.frontend.state import State
from luminal.frontend.tensor import GraphTensor

# GraphTensor members a State does not take: its node and view, its dtype (a State's own attribute), the
# eager-only calls (their errors speak of graph tensors), in-place assignment, iteration and truth (a State
# stays a truthy object), the protocols needing values, copying and pickling (a State has its values, and
# copies and pickles as itself), and augmented assignment (``w += x`` keeps Python's ``w = w + x``).
_SKIP = {"graph", "node", "layout", "origin", "dtype", "backward", "item", "numpy", "tolist", "__setitem__", "__iter__",
         "__len__", "__bool__", "__repr__", "__init__", "__hash__", "__slots__", "__module__", "__doc__",
         "__annotations__", "__array_ufunc__", "__eq__", "__ne__", "__contains__", "__int__", "__float__",
         "__complex__", "__format__", "__copy__", "__deepcopy__", "__reduce_ex__",
         *(f"__i{o}__" for o in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "and", "or", "xor",
                                 "lshift", "rshift"))}


class StateView(GraphTensor):
    """A host tensor of a State's values read by basic indexing outside any graph (``w[pad]``,
    ``w[:, :k]``, ``w[..., None]``: ints, slices, ``...`` and None, where torch's result is a view of
    the parameter). Its in-place methods (``frontend/ops/inplace.py``) write their result into the
    State at those positions as well, as torch's do through the view: ``emb.weight[pad].zero_()`` in
    an ``__init__`` zeroes the row (it changed a copy, silently). Advanced indexing copies, in torch
    too, and gives a plain host tensor."""

    __slots__ = ("state", "key")


def _basic(key) -> bool:
    """Whether index ``key`` is basic (torch's and numpy's view-making indexing)."""
    parts = key if isinstance(key, tuple) else (key,)
    return all(p is None or p is Ellipsis or isinstance(p, slice) or
               (isinstance(p, numbers.Integral) and not isinstance(p, (bool, np.bool_))) for p in parts)


def tensor_of(s: State, op: str, args=(), kwargs=None, host_ok: bool = False) -> GraphTensor:
    """``s`` as a tensor of the graph ``op`` builds in (``join.target``)."""
    return join.into(s, join.target(op, (s, *args), kwargs or {}, host_ok=host_ok))


def _method(name: str):
    op = join.op_name(name)
    host_ok = name == "__getitem__"

    def method(self: State, *args, **kwargs):
        t = tensor_of(self, op, args, kwargs, host_ok)
        out = getattr(GraphTensor, name)(t, *args, **kwargs)
        if host_ok and t.graph.host and len(args) == 1 and not kwargs and _basic(args[0]):
            view = StateView(out.graph, out.node, out.layout, out.origin)
            view.state, view.key = self, args[0]
            return view
        return out

    method.__name__ = method.__qualname__ = name
    method.__doc__ = (f"GraphTensor's ``{name}`` on this State, read into the graph the op builds in "
                      f"(``frontend/state_tensor.py``).")
    return method


def _property(name: str):
    def get(self: State):
        return getattr(tensor_of(self, name), name)

    get.__name__ = name
    get.__doc__ = f"GraphTensor's ``{name}`` of this State, read into the graph the op builds in."
    return property(get)


def _equality(name: str):
    """``==``/``!=``: elementwise against a tensor, an array or a number; else identity (NotImplemented)."""
    op = name[2:-2]

    def method(self: State, other):
        if not isinstance(other, (GraphTensor, numbers.Number, np.ndarray, np.bool_)):  # (np.bool_: no Number)
            return NotImplemented
        return getattr(GraphTensor, name)(tensor_of(self, op, (other,)), other)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"Elementwise ``{op}`` with a tensor, an array or a number; identity otherwise."
    return method


def install() -> None:
    """Give State every GraphTensor method and operator it does not define itself (after ``ops`` has
    installed GraphTensor's)."""
    own = {n for c in State.__mro__[:-1] for n in vars(c)}
    for name in dir(GraphTensor):
        if name in _SKIP or name in own or (name.startswith("_") and not (name.startswith("__")
                                                                            and name in vars(GraphTensor))):
            continue
        if isinstance(getattr(GraphTensor, name), property):
            setattr(State, name, _property(name))
        elif callable(getattr(GraphTensor, name)):
            setattr(State, name, _method(name))
    State.__eq__ = _equality("__eq__")  # type: ignore[method-assign,assignment]
    State.__ne__ = _equality("__ne__")  # type: ignore[method-assign,assignment]
    State.__hash__ = object.__hash__  # type: ignore[method-assign,assignment]
    State.__array_ufunc__ = None  # ``ndarray * w``: numpy defers to ``w.__rmul__``, which joins a graph
    State.__iter__ = None  # not a sequence of rows: ``for r in w`` would index outside any graph
