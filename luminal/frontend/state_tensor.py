"""A State used as a tensor: GraphTensor's methods, operators and ``T``/``mT`` on Parameters and Buffers.

torch code calls tensor methods on parameters and buffers directly: ``self.weight.T``,
``self.bias[:, :, :T, :T]``, ``self.scale * x``. A State is a host array, not a node, so each such
method first reads the State into the graph its op builds in (``frontend/join.py``: the graph of a
tensor argument, else of the enclosing module call) and then runs GraphTensor's method there.

Indexing outside any graph (no tensor argument and no module call: a script or ``__init__``, as in
``nn.Parameter(wpe.weight[:16])`` or ``bias[:, :, :n, :n]`` when cropping a model) reads the State's
current values instead: the result is a host tensor (``frontend/host.py``) of those values, which a
new Parameter or Buffer takes as its initial value (a copy: torch's would share storage). Combined
with a graph's tensor (``(w[0] * x).sum()``), such a view joins that graph as the State there,
indexed (``StateView.read_into``): read at run time and differentiable, as torch's view. Every other
method with no graph to join fails naming it and the fix.

The State's own host-side attributes (``shape``, ``dtype``, ``ndim``, ``size()``, ``dim()``,
``numel()``, ``data``) stay its own; ``grad`` (torch's ``p.grad``) raises an AttributeError naming
where luminal's gradients are (graph outputs, never stored on a parameter); ``==``/``!=`` are
elementwise only against a tensor, an array or a number (a State compared with anything else,
another State included, is compared by identity, so lists and dicts of States keep working).
"""

from __future__ import annotations

import numbers

import numpy as np

from luminal.frontend import host, join
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
    an ``__init__`` zeroes the row (it changed a copy, silently). A view of it by basic indexing or by
    one of torch's view methods (``w[0][1:]``, ``w[:2].mT``, ``w[1].view(2, 2)``, ``.unbind(0)``: the
    ``_VIEWS`` below) is a StateView too, and so is it after ``t_()``/``unsqueeze_()``/...: ``index``
    holds the State's flat positions of its elements, and each view method maps it as it maps the
    values. Advanced indexing copies, in torch too, and gives a plain host tensor; so do the methods
    that copy (``reshape``, ``flatten``: torch's copy where a view cannot be made)."""

    __slots__ = ("state", "index")

    def write(self, values: np.ndarray) -> None:
        """Write ``values`` (this view's shape) into the State at the view's positions."""
        self.state.data.flat[self.index] = values

    def __setitem__(self, key, value) -> None:
        """``v[key] = value`` writes into the State too, as torch's through the view (``w[0][1:] = 0``)."""
        GraphTensor.__setitem__(self, key, value)  # (this handle takes the new values: ``indexing.setitem``)
        self.write(host.value(self, "__setitem__"))

    def read_into(self, g) -> GraphTensor:
        """This view as a tensor of the graph ``g`` (not a host one), where it joins an op
        (``join.into``): the State's tensor there (read at run time, its gradient reaching the
        State, as an un-indexed Parameter's) at the view's positions, torch's view of the parameter
        in its computation. A constant of the values would carry no gradient: ``(w[0] * x).sum()``
        differentiated by ``w`` would be "not used" where torch's is ``x`` in row 0."""
        return g.state(self.state).reshape(-1)[g.constant(self.index)]

    def follow(self, name: str, args, kwargs):
        """``index`` mapped by GraphTensor's view method ``name``: a tensor of positions (or a tuple)."""
        return getattr(GraphTensor, name)(host.host_graph().constant(self.index), *args, **kwargs)


# torch's view methods: their result shares the storage, so an in-place op on it writes the State
_VIEWS = ("__getitem__", "view", "view_as", "t", "transpose", "swapaxes", "swapdims", "permute", "squeeze", "unsqueeze",
          "narrow", "select", "diagonal", "movedim", "moveaxis", "unbind", "unflatten", "split", "chunk")


def _state_view(out: GraphTensor, state: State, index: np.ndarray) -> StateView:
    view = StateView(out.graph, out.node, out.layout, out.origin)
    view.state, view.index = state, index
    return view


def _tie(out, index, state: State):
    """``out`` (a view method's result: a tensor, or a tuple of them) as StateViews of ``state`` at the
    positions ``index`` (the same method's result on the positions)."""
    if isinstance(out, (tuple, list)):
        return type(out)(_tie(o, i, state) for o, i in zip(out, index))
    return _state_view(out, state, host.value(index))


def _view_method(name: str):
    def method(self: StateView, *args, **kwargs):
        out = getattr(GraphTensor, name)(self, *args, **kwargs)  # (ops installs it after this module)
        if name == "__getitem__" and not _basic(args[0]):
            return out  # (advanced indexing copies)
        return _tie(out, self.follow(name, args, kwargs), self.state)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"GraphTensor's ``{name}``, a StateView of the same State (torch's view of it)."
    return method


for _name in _VIEWS:
    setattr(StateView, _name, _view_method(_name))
for _name in ("T", "mT"):
    setattr(StateView, _name, property(lambda self, n=_name: _tie(getattr(GraphTensor, n).fget(self),
                                                                 getattr(host.host_graph().constant(self.index), n),
                                                                 self.state)))


def _positions(shape: tuple, key) -> np.ndarray:
    """The flat (C order) positions of the elements of ``a[key]`` in an array ``a`` of ``shape``, for a
    basic ``key``: numpy indexes a zero-size stand-in with byte strides equal to the C positions (no
    array of the whole: an embedding's row costs the row), the view's offset and strides give them."""
    strides = tuple(int(np.prod(shape[i + 1:], dtype=np.int64)) for i in range(len(shape)))
    whole = np.lib.stride_tricks.as_strided(np.zeros(1, np.uint8), shape, strides)
    key = key if isinstance(key, tuple) else (key,)
    part = whole[key if Ellipsis in key else (*key, Ellipsis)]  # (an ... keeps an all-int key's result a view)
    at = part.__array_interface__["data"][0] - whole.__array_interface__["data"][0]
    pos = np.full(part.shape, at, np.int64)
    for d, (n, s) in enumerate(zip(part.shape, part.strides)):
        pos += (np.arange(n, dtype=np.int64) * s).reshape((n,) + (1,) * (part.ndim - d - 1))
    return pos.astype(np.int32)


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
        if (host_ok and t.graph.host and len(args) == 1 and not kwargs and _basic(args[0]) and
                self.numel() < 2**31):  # (positions are int32 tensors, luminal's integer type)
            return _state_view(out, self, _positions(self.shape, args[0]))
        return out

    method.__name__ = method.__qualname__ = name
    method.__doc__ = (f"GraphTensor's ``{name}`` on this State, read into the graph the op builds in "
                      f"(``frontend/state_tensor.py``).")
    return method


def _setitem(self: State, key, value) -> None:
    """``w[key] = value`` outside any graph (an ``__init__``, a script: torch's under ``no_grad``) writes
    the values into the State, any key (``indexing.setitem``'s: advanced ones too). Inside a graph a
    State is an input of the program, not storage: refused, naming what to do."""
    t = tensor_of(self, "__setitem__", (key, value), host_ok=True)
    if not t.graph.host:
        raise TypeError(f"__setitem__: {self.describe()} cannot be assigned into inside a graph (a program reads "
                        f"it; item assignment writes its values, outside any graph, as torch's under no_grad): "
                        f"compute a new tensor instead (w.index_put(...), lm.where(mask, v, w)), or assign before "
                        f"building the graph")
    t[key] = value
    self.data[...] = host.value(t, "__setitem__")


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


def _grad(self: State):
    """torch's ``p.grad``: an AttributeError saying where luminal's gradients are. None is kept on a
    Parameter (there is no ``backward()``): gradients are graph outputs, built by
    ``lm.autograd.grad`` / ``train.grad`` and valued by running the compiled program, or computed and
    applied inside ``train.compile_step``'s program."""
    raise AttributeError(f"grad: {self.describe()} has no .grad: luminal stores no gradient on parameters (there is "
                         f"no backward()); gradients are graph outputs: grads = lm.autograd.grad(loss, "
                         f"model.parameters()) (or train.grad(loss, params)) builds them, lm.compile(grads) runs "
                         f"them to arrays; train.compile_step(loss, optimizer) computes them and applies the update "
                         f"in one program")


def _set_grad(self: State, value) -> None:
    """``p.grad = None`` (torch's way to clear it) does nothing, as there is none; any other value is
    refused: nothing would read it."""
    if value is not None:
        _grad(self)


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
    State.__setitem__ = _setitem  # type: ignore[method-assign,assignment]
    State.__eq__ = _equality("__eq__")  # type: ignore[method-assign,assignment]
    State.__ne__ = _equality("__ne__")  # type: ignore[method-assign,assignment]
    State.__hash__ = object.__hash__  # type: ignore[method-assign,assignment]
    State.grad = property(_grad, _set_grad, doc=_grad.__doc__)  # type: ignore[attr-defined]
    State.__array_ufunc__ = None  # ``ndarray * w``: numpy defers to ``w.__rmul__``, which joins a graph
    State.__iter__ = None  # not a sequence of rows: ``for r in w`` would index outside any graph
