"""The graph: hash-consed primitive nodes.

``Graph.add`` returns the existing node when the same op with the same argument reads the same
inputs through the same views; this gives common-subexpression elimination for free and a stable
identity for later compile caches.
"""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass

import numpy as np

from luminal.core import dtype as dt
from luminal.core.errors import op_error, outermost_op, user_frame
from luminal.core.primitives import PRIMITIVES
from luminal.core.symbolic import dims, shape_str, sizes
from luminal.core.view import View
from luminal.frontend import float64_paths
from luminal.frontend.seed import default_rng
from luminal.frontend.state import State
from luminal.frontend.tensor import GraphTensor  # (at the top: ``tensor`` makes one for every op built)


@dataclass(frozen=True, eq=False)
class ConstKey:
    """Identity of a literal: a content digest for arrays, the value itself for scalars.

    Numbers are identified by their digest (dtype + exact bytes), so ``nan`` equals ``nan`` and
    ``-0.0`` differs from ``0.0``; a symbolic scalar (digest ``"sym"``) by its expression."""

    digest: str
    scalar: object = None  # int/float/bool/Sym for scalar constants, else None

    def _id(self):
        return (self.digest, self.scalar) if self.digest == "sym" else self.digest

    def __eq__(self, other):
        return isinstance(other, ConstKey) and self._id() == other._id()

    def __hash__(self):
        return hash(self._id())


INDEX_OPS = {"Gather": "gather", "ScatterAdd": "scatter_add"}  # primitives that read an index: their names
USER_STOP = "user stop"  # the arg of the Copy that is a result of the user's (``Graph.user_stop``)


@dataclass(frozen=True, eq=False, init=False)
class Node:
    id: int
    op: str
    srcs: tuple  # ((Node, View), ...)
    arg: object
    dtype: dt.DType
    shape: tuple

    def __init__(self, id: int, op: str, srcs: tuple, arg: object, dtype: dt.DType, shape: tuple):  # noqa: A002
        d = self.__dict__  # (frozen: set once, as View's, not by object.__setattr__ per field)
        d["id"], d["op"], d["srcs"], d["arg"], d["dtype"], d["shape"] = id, op, srcs, arg, dtype, shape

    def __repr__(self):
        return f"%{self.id} = {self.op}({self.arg}) {shape_str(self.shape)} {self.dtype.name}"

    def whole(self) -> View:
        """The contiguous view of the whole node, made once (Views never change): most tensors read a
        node whole, and building a View and its strides for each was a large part of making them."""
        v = self.__dict__.get("_whole")
        if v is None:
            v = View.contiguous(self.shape)
            object.__setattr__(self, "_whole", v)
        return v


def ancestors(nodes) -> set[int]:
    """The ids of ``nodes`` and of every node they read, iteratively (graphs are thousands of nodes
    deep)."""
    seen, stack = set(), list(nodes)
    while stack:
        n = stack.pop()
        if n.id not in seen:
            seen.add(n.id)
            stack.extend(s for s, _ in n.srcs)
    return seen


class Graph:
    """A lazy computation: the nodes that tensors are read from, hash-consed (an op applied twice to
    the same inputs is one node), with the graph's named inputs, States, constants and updates.

    Make one, build tensors with ``input``, ``state``, ``constant`` and the factories (``g.arange``,
    ``g.zeros``, ...; ``lm.zeros(..., graph=g)``), apply ops, and compile the outputs with
    ``lm.compile``.
    """

    def __init__(self):
        self.nodes: list[Node] = []
        self._index: dict[tuple, Node] = {}
        # A node's key is (signature number, input ids); a signature is (op, view numbers, exact arg,
        # dtype name, shape number), views (exact forms) and shapes numbered once per graph. So keys
        # hash as a few small ints however symbolic the views, and nodes alike but for their inputs
        # (one layer's and the next's) share a signature number.
        self._parts: dict = {}
        self._signatures: dict = {}
        self.constants: dict[ConstKey, np.ndarray] = {}
        self.inputs: dict[str, Node] = {}  # user inputs, given by name on every call
        self.states: dict[str, State] = {}  # persistent inputs, read from State.data on every call
        self.updates: dict[State, object] = {}  # State -> GraphTensor written back after every run
        self.random: dict[str, Node] = {}  # uniform [0, 1) float32 inputs drawn fresh on every call
        self.guards: list = []  # run-time value checks, see ``guard``
        self.rng = np.random.default_rng(default_rng().integers(2**63))
        self.mean_counts: dict[int, object] = {}  # loss node id -> 0-d tensor its mean divides by (data parallel)
        self._state_nodes: dict[int, Node] = {}
        # Conditions an op could not check when it was built because a dim was symbolic (unfold's window
        # <= the dim): (node id, two dims of the views it made of that node) -> (expression that must be
        # >= 0 once dims are bound, what breaks otherwise). A program reading a view of that node with
        # both dims (the window count and size, however permuted) checks it.
        self.requirements: dict[tuple, tuple] = {}
        # Conditions on a node itself (a max over a symbolic dim that is 0 at run time, a write at an int
        # index past one): node id -> [(expression that must be >= 0 once dims are bound, what breaks
        # otherwise)]. A program computing the node checks them before any work.
        self.node_requirements: dict[int, list] = {}
        # Gather and ScatterAdd nodes: node id -> (the op or layer the user called, the user's line[, the
        # user's indices the node's is made from: [((node, view), dim size, negatives wrap, dim)]]). An index
        # out of range is found only when a program runs; the call then names what made it, and the
        # user's own value (``x[i, j]``: i's or j's, not the flat position they combine to).
        self.index_ops: dict[int, tuple] = {}
        # The user's stops (``user_stop``): ``detach()`` nodes the user made (not an op's, which marks a
        # zero gradient: Tensor.detach), and int and bool results of ops the user called (a comparison, an
        # int cast, argmax): torch's never require grad, so a parameter read only through them has no
        # gradient at all, not zeros (``train.autograd.has_grad``). Each is a Copy of its own (arg
        # ``USER_STOP``), never an op's inner node: ``sign``'s comparisons make a float result whose
        # gradient is zero, as torch's, also where the user compares alike.
        self.user_detached: set[int] = set()
        self.no_grad_results: set[int] = set()
        # Gradients given by formula (``custom_vjp``): node id -> (rule, inputs as (Node, View)). Autograd
        # sends such a node's adjoint to the inputs by the rule instead of through the node's own chain.
        self.vjps: dict[int, tuple] = {}
        # Nodes mixed precision leaves in float32 (``frontend/float32_ops.py``: what a loss's call made)
        self.float32_ops: set[int] = set()
        self._user_vjps: dict[int, int] = {}  # node id -> how many user rules sit on copies of it
        # A host graph (``frontend/host.py``) holds the tensors made outside any graph (``lm.ones(3)`` in a
        # module's ``__init__``): constants whose values are known now, which join other graphs by value.
        self.host = False

    def __repr__(self):
        return f"Graph({len(self.nodes)} nodes, inputs={list(self.inputs)})"

    # node creation ----------------------------------------------------------------------------
    def add(self, op: str, srcs, arg, dtype: dt.DType, shape) -> Node:
        """Create (or find) a primitive node. ``srcs`` are GraphTensors read through their views."""
        assert op in PRIMITIVES, op
        for s in srcs:
            if s.graph is not self:
                raise op_error(ValueError, op, "operands belong to different graphs", *srcs)
        parts = self._parts  # (list comprehensions, not generators: this runs for every node built)
        key_srcs = tuple([(s.node, s.layout) for s in srcs])
        views = tuple([parts.setdefault(s.layout, len(parts)) for s in srcs])  # (a View's == tells -0.0 pads apart)
        shape = tuple(shape)
        sig = (op, views, _exact(arg), dtype.name, parts.setdefault(shape, len(parts)))
        key = (self._signatures.setdefault(sig, len(self._signatures)), tuple([s.node.id for s in srcs]))
        node = self._index.get(key)
        if node is None:
            node = Node(len(self.nodes), op, key_srcs, arg, dtype, shape)
            self.nodes.append(node)
            self._index[key] = node
            if op in INDEX_OPS:  # (an index out of range is found at run time: say what made it)
                self.index_ops[node.id] = (outermost_op() or INDEX_OPS[op], user_frame())
        return node

    def user_stop(self, t: GraphTensor) -> GraphTensor:
        """``t`` (a result of an op the user called) as a node that only the user's results are: a
        Copy with arg ``USER_STOP``, read through ``t``'s view. For an int or bool ``t`` (a
        comparison, an int cast, argmax) and the user's ``detach()``, where torch's gradient is None
        (``no_grad_results``, ``user_detached``; ``train.autograd.has_grad``).

        The mark cannot sit on ``t``'s own node: the graph builds each expression once, so an op's
        inner comparison (``sign``'s ``x > 0``) built before or after the user's is that node too, and
        whether a parameter had a gradient depended on which came first. The compiler drops the copy
        (a Copy of a whole node is its operand)."""
        if t.dtype.is_float:  # the user's detach(): a Copy through the view, as an op's detach
            node = self.add("Copy", (t,), USER_STOP, t.dtype, t.shape)
            self.user_detached.add(node.id)
            return self.tensor(node)
        if t.node.op == "Copy" and t.node.arg == USER_STOP:
            return self.tensor(t.node, t.layout)
        node = self.add("Copy", (self.tensor(t.node),), USER_STOP, t.dtype, t.node.shape)
        self.no_grad_results.add(node.id)
        return self.tensor(node, t.layout)  # (the view stays a view: no copy of an expanded mask)

    def node_keys(self):
        """The hash-consing key of every node, in id order: ``(signature number, input ids)``. Each key
        is stored once, when its node is made, so whole-graph passes (loop detection's columns) read
        them instead of rebuilding them from the nodes."""
        return self._index.keys()

    def signatures(self) -> list[tuple]:
        """Every signature, indexed by its number: ``(op, view numbers, exact arg, dtype name, shape
        number)``; equal numbers in two signatures mean equal views or shapes."""
        return list(self._signatures)

    def custom_vjp(self, out: GraphTensor, inputs, rule) -> GraphTensor:
        """Give ``out`` (a whole node) the gradient ``rule(out, adjoint, *inputs) -> [gradient per
        input]`` with respect to ``inputs`` (tensors it was computed from), in place of differentiating
        the primitives that compute it; returns the tensor that carries the rule: ``out`` itself in an
        op's code, a copy of it (a Copy node of its own, which the compiler drops) when the user calls
        it, as torch's ``autograd.Function.apply`` gives a new tensor. The rule must then be read
        through the returned tensor: ``out``'s node is every copy of its expression in the graph (the
        user's other ``w.sign()``, which a straight-through ``sign`` must not give its gradient to),
        and an op's rule on it (the function's own derivative) stays.

        For a function that a long chain of primitives computes (a rational approximation, a series,
        an exp formula): differentiating the chain keeps each of its partial values for the backward
        pass, a buffer of the input's size each once the forward and backward passes are different
        kernels, and yields the chain's derivative, not the function's. The rule is built of ops on the
        inputs (or ``out``), so a gradient of the gradient differentiates it in turn.
        """
        if not (isinstance(out, GraphTensor) and out.graph is self and out.layout.is_contiguous()
                and tuple(out.shape) == tuple(out.node.shape)):
            raise ValueError("custom_vjp: out must be a whole node of this graph")
        if outermost_op() is None:  # (a user's rule: a straight-through estimator)
            k = self._user_vjps.get(out.node.id, 0)
            self._user_vjps[out.node.id] = k + 1
            out = self.tensor(self.add("Copy", (out,), f"custom_vjp {k}", out.dtype, out.shape))
        # (the rule composes as ``out`` was built: a float32 function's float64 steps take the plain
        # formulas in its backward pass too, ``float64_paths``)
        self.vjps[out.node.id] = (float64_paths.as_built(rule), tuple((t.node, t.layout) for t in inputs))
        return out

    def tensor(self, node: Node, view: View | None = None) -> GraphTensor:
        """``node`` as a GraphTensor read through ``view`` (default: the whole node, contiguous).

        Args:
            node: a node of this graph.
            view: how the tensor reads the node (``core/view.py``).
        """
        return GraphTensor(self, node, view or node.whole())

    # leaves -----------------------------------------------------------------------------------
    def input(self, name: str, shape, dtype=dt.float32) -> GraphTensor:
        """A named input; ``shape`` entries are ints or symbolic dim names (``"B"``) or Syms."""
        if not isinstance(name, str) or not name.isidentifier():
            raise ValueError(f"input name must be an identifier, got {name!r}")
        if name in self.inputs:
            raise ValueError(f"input {name!r} is already defined in this graph")
        shape = dims(f"input {name!r}", shape)
        for d in shape:
            if isinstance(d, int) and d < 0:
                raise op_error(ValueError, f"input {name!r}", f"negative dim in shape {shape_str(shape)}")
        node = self.add("Input", (), name, dt.as_dtype(dtype), shape)
        self.inputs[name] = node
        return self.tensor(node)

    def state(self, s: State) -> GraphTensor:
        """``s`` as a tensor of this graph (one node per State; its value is read at run time)."""
        if not isinstance(s, State):
            raise op_error(TypeError, "state", f"expected a State (an nn.Parameter or nn.Buffer(array)), got "
                           f"{type(s).__name__} (a fixed value is g.constant(value))")
        node = self._state_nodes.get(id(s))
        if node is None:
            base = "$" + (s.name or "state")
            name, k = base, 1
            while name in self.states:
                name, k = f"{base}#{k}", k + 1
            node = self.add("Input", (), name, s.dtype, s.shape)
            self.states[name] = s
            self._state_nodes[id(s)] = node
        return self.tensor(node)

    def states_nodes(self) -> list[Node]:
        """The node of every State this graph reads."""
        return list(self._state_nodes.values())

    def state_node(self, s: State) -> Node | None:
        """The node reading ``s`` in this graph, or None when the graph never reads it."""
        return self._state_nodes.get(id(s))

    def assign(self, s: State, value) -> None:
        """Write ``value`` (a tensor of this graph with ``s``'s shape) into ``s`` after every run of a
        program compiled from this graph. The dtype is converted to ``s``'s."""
        if not isinstance(s, State):
            raise op_error(TypeError, "assign", f"expected a State to write, got {type(s).__name__}")
        if not isinstance(value, GraphTensor):
            raise op_error(TypeError, "assign", f"the value for {s.describe()} must be a tensor of this graph, got "
                           f"{type(value).__name__} (a fixed value is g.constant(value))")
        if value.graph is not self:
            raise op_error(ValueError, "assign", f"the value for {s.describe()} belongs to another graph", value)
        if tuple(value.shape) != tuple(s.shape):
            raise op_error(ValueError, "assign", f"{s.describe()} cannot take a value of shape "
                           f"{shape_str(value.shape)}", value)
        v = value.cast(s.dtype)  # (a handle of its own: an in-place method on the caller's rebinds the caller's)
        self.updates[s] = self.tensor(v.node, v.layout)

    def guard(self, failed, value, error: type, message: str, of=None) -> None:
        """Check values that only a run sees (class labels that arrive as an input): a program compiled
        from this graph that reads every input ``failed`` and ``value`` read evaluates them first, on
        the call's own inputs, and when ``failed`` (a bool scalar) is True raises ``error(message)``
        with ``{value}`` in ``message`` replaced by ``value`` (a scalar), before the program runs and
        before any state changes. A loss registers one where a bad value would otherwise surface as an
        index error deep in the program, naming neither the loss nor the input. ``of``: the tensor the
        check is about (an integer division's quotient); then only programs that compute it are
        guarded (a program of the same graph that never divides must not fail on its divisor)."""
        for what, t in (("failed", failed), ("value", value)):
            if getattr(t, "graph", None) is not self or t.shape != ():
                raise op_error(ValueError, "guard", f"{what} must be a scalar tensor of this graph")
        if failed.dtype is not dt.bool_:
            raise op_error(TypeError, "guard", f"failed must be bool, got {failed.dtype.name}", failed)
        self.guards.append((failed, value, error, message, of))

    def rand(self, shape) -> GraphTensor:
        """Uniform [0, 1) float32 noise of ``shape`` (may be symbolic), drawn from ``self.rng``
        afresh on every call of a compiled program (dropout masks)."""
        shape = sizes("rand", shape)
        name = f"$rand{len(self.random)}"
        node = self.add("Input", (), name, dt.float32, shape)
        self.random[name] = node
        return self.tensor(node)

    def constant(self, value, dtype=None) -> GraphTensor:
        """A literal tensor (copied now) or scalar. A symbolic dim becomes an int32 scalar whose
        value is bound at run time."""
        from luminal.core.symbolic import Sym

        if isinstance(value, Sym):
            return self.tensor(self.add("Constant", (), ConstKey("sym", value), dt.int32, ()))
        if isinstance(value, (bool, int, float, np.number, np.bool_)) and not isinstance(value, np.ndarray):
            d = dt.as_dtype(dtype) if dtype is not None else _scalar_dtype(value)
            if d.kind == "i" and dt.scalar_kind(value) == "i" and not -2**31 <= int(value) < 2**31:
                raise op_error(ValueError, "constant", f"{value} does not fit in {d.name}")
            # (not NaN, whose payload bits are kept; not a float made int, which may warn, as it must each time)
            kind = value.__class__
            memo = kind in _MEMO_TYPES and value == value and not (d.kind == "i" and kind is float)
            key = (d, kind, value.hex() if kind is float else value) if memo else None
            got = _SCALARS.get(key) if memo else None
            if got is None:
                with np.errstate(over="ignore"):  # (a number past the dtype's range is inf, as in torch: no warning)
                    v = dt.to_storage(np.asarray(value).astype(d.np), d).item()  # bfloat16: the rounded value
                got = v, f"{d.name}:{np.asarray(v, d.np).tobytes().hex()}"
                if memo:
                    if len(_SCALARS) >= 4096:
                        _SCALARS.clear()
                    _SCALARS[key] = got
            v, digest = got
            return self.tensor(self.add("Constant", (), ConstKey(digest, v), d, ()))
        arr = np.asarray(value)
        if arr.dtype.kind not in "biuf":
            raise op_error(TypeError, "constant", f"expected numbers, got {type(value).__name__} "
                           f"(as an array of dtype {arr.dtype})")
        if dtype is not None:
            d = dt.as_dtype(dtype)
        elif arr.dtype.kind in "iu":  # one integer type, as for inputs
            d = dt.int32
        elif not isinstance(value, np.ndarray):  # a Python list: torch.tensor's default dtypes
            d = dt.bool_ if arr.dtype.kind == "b" else dt.float32
        else:
            d = dt.as_dtype(arr.dtype)
        if d.kind == "i" and arr.dtype.kind in "iu" and not _int32_fits(arr):
            raise op_error(ValueError, "constant", f"integer values do not fit in {d.name} "
                           f"(range [{arr.min()}, {arr.max()}])")
        # a copy: later changes to the caller's array must not change (or un-hash) the graph
        arr = np.array(dt.to_storage(arr, d), order="C", copy=True)
        h = hashlib.sha1(arr.tobytes()).hexdigest()
        key = ConstKey(f"{d.name}:{arr.shape}:{h}")
        self.constants.setdefault(key, arr)
        return self.tensor(self.add("Constant", (), key, d, arr.shape))


def _exact(x):
    """A hash key for ``x`` that tells apart what ``==`` conflates or fails on: ``-0.0`` vs ``0.0``,
    ``1.0`` vs ``1`` vs ``True``, and ``nan`` (equal to itself here). Dataclasses (views) are keyed
    field by field."""
    if x is None or type(x) in _AS_IS:  # (most args: no tuple to walk, no dataclass to ask about)
        return x
    if isinstance(x, float):
        return ("float", x.hex())
    if isinstance(x, bool):
        return ("bool", x)
    if isinstance(x, tuple):
        return tuple(_exact(y) for y in x)
    if dataclasses.is_dataclass(x) and not isinstance(x, (type, ConstKey)):
        return (type(x).__name__,) + tuple(_exact(getattr(x, f.name)) for f in dataclasses.fields(x))
    return x


_AS_IS = frozenset({int, str, dt.DType, ConstKey})  # args that are their own key (exactly these types: not bool)


# A scalar constant's stored value and digest, by (dtype, type, exact value): numpy's conversions were most of
# the cost of ``x * 0.5``, and a program names the same few numbers many times. Python numbers only (exact
# types; a float by its hex, so -0.0 is itself; NaN never), a pure function of the key: nothing goes stale.
_MEMO_TYPES = frozenset({float, int, bool})
_SCALARS: dict[tuple, tuple] = {}


def _int32_fits(arr: np.ndarray) -> bool:
    return not arr.size or (int(arr.min()) >= -2**31 and int(arr.max()) < 2**31)



def _scalar_dtype(v) -> dt.DType:
    return {"b": dt.bool_, "i": dt.int32, "f": dt.float32}[dt.scalar_kind(v)]

