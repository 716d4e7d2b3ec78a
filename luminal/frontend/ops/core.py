"""Shared plumbing for ops: making primitive nodes, scalars, broadcasting and dtype coercion."""

from __future__ import annotations

import math

import numpy as np

from luminal.core import dtype as dt
from luminal.core.backend import backend_names
from luminal.core.errors import check_number, op_error, outermost_op
from luminal.core.symbolic import Sym, is_static, shape_str, sizes
from luminal.frontend import building
from luminal.frontend.checks import check_tensors, got, tensor_op
from luminal.frontend.graph import Graph
from luminal.frontend.host import host_graph
from luminal.frontend.state import State
from luminal.frontend.tensor import GraphTensor


def prim(op: str, *srcs: GraphTensor, arg=None, dtype: dt.DType | None = None, shape=None) -> GraphTensor:
    """Add a primitive node reading ``srcs`` and return it as a contiguous tensor.

    A unary elementwise op on a broadcast (``Recip`` of a scalar expanded to a parameter's shape, as
    ``x / lr`` makes) runs on the values under the broadcast and is broadcast after: one element's
    work instead of a tensor's, and no tensor-sized term for the compiler to store and share."""
    g = srcs[0].graph
    if len(srcs) == 1 and op in _UNARY and shape is None:
        under = _under_broadcast(srcs[0])
        if under is not None:
            return prim(op, under, arg=arg, dtype=dtype)._with_view(srcs[0].layout)
    out = g.tensor(g.add(op, srcs, arg, dtype or srcs[0].dtype, srcs[0].shape if shape is None else shape))
    if not out.dtype.is_float and outermost_op() is None and any(s.dtype.is_float for s in srcs):
        return g.user_stop(out)  # (a comparison or int cast of floats the user wrote)
    return out


_UNARY = frozenset({"Log2", "Exp2", "Sin", "Sqrt", "Recip", "Cast"})  # (not Copy: it materialises the view)


def _under_broadcast(x: GraphTensor) -> GraphTensor | None:
    """The whole node ``x`` reads, when ``x`` is a broadcast of all its elements and of no others (an
    unmasked view that repeats each of them); else None. A view of some of them (``s[0, 0]`` expanded)
    is not: the op would run on elements the user never read too, and where it is infinite there
    (``Recip`` of a 0 elsewhere in ``s``) the gradient's zero adjoint times it made NaN."""
    view, node = x.layout, x.node
    if view.mask is not None or 0 not in view.strides:  # (most operands: no broadcast dim, nothing more to ask)
        return None
    if not all(is_static(d) for d in (*node.shape, *view.shape, *view.strides)):
        return None
    n = int(np.prod(node.shape, dtype=np.int64))
    if not any(s == 0 and d != 1 for d, s in zip(view.shape, view.strides)) or \
            n >= int(np.prod(view.shape, dtype=np.int64)) or view.offset != 0:
        return None
    # the repeated dims aside, the view must walk the node's elements once each, in some order: its
    # strides, sorted, each the product of the sizes below it (mixed radix), up to n
    covered = 1
    for d, s in sorted((int(d), int(s)) for d, s in zip(view.shape, view.strides) if s != 0 and d != 1):
        if s != covered:
            return None
        covered *= d
    return x.graph.tensor(node) if covered == n else None


def cast(x: GraphTensor, dtype) -> GraphTensor:
    """``x`` converted to ``dtype`` (torch ``Tensor.to(dtype)``); ``x`` itself when it already has it.
    Float to int rounds toward zero; to bool, nonzero is True.

    Args:
        x: the input tensor.
        dtype: an lm dtype, a numpy dtype or a name (``"float16"``).
    """
    if not isinstance(x, GraphTensor):  # inline, not ``tensor_op``: every coerced operand passes here
        check_tensors("cast", input=x)
    dtype = dt.as_dtype(dtype)
    if x.dtype is dtype:
        return x
    return prim("Cast", x, arg=dtype, dtype=dtype)


def to(x: GraphTensor, *args, dtype=None, device=None, non_blocking: bool = False, copy: bool = False) -> GraphTensor:
    """torch ``Tensor.to``: ``to(dtype)``, ``to(device, dtype=None)`` or ``to(other)`` (``other``'s dtype).

    A luminal graph runs where it is compiled (``lm.compile(outputs, backend=...)``), not where a
    tensor was moved, so a device is only checked: ``"cpu"`` is accepted and changes nothing (code
    written for torch's CPU runs as is), any other device is an error naming the backend to compile
    for. Tensors are immutable, so ``non_blocking`` and ``copy`` change nothing either.

    Args:
        x: the input tensor.
        args: a dtype, a device (``"cpu"``) and then perhaps a dtype, or another tensor.
        dtype: the dtype to cast to (an lm dtype, a numpy dtype or a name).
        device: ``"cpu"`` (or None).
        non_blocking: accepted for torch's signature.
        copy: accepted for torch's signature.
    """
    if not isinstance(x, GraphTensor):
        check_tensors("to", input=x)
    rest = list(args)
    if rest and isinstance(rest[0], GraphTensor):
        check_tensors("to", input=x, other=rest[0])
        dtype = rest.pop(0).dtype
    elif rest and not isinstance(rest[0], bool):
        first = rest.pop(0)
        if _device_name(first) is None:
            dtype = first
        else:
            device = first
            if rest and not isinstance(rest[0], bool):
                dtype = rest.pop(0)
    if len(rest) > 2 or not all(isinstance(v, bool) for v in rest):
        raise op_error(TypeError, "to", f"expected a dtype, a device or a tensor (then non_blocking, copy), got "
                       f"{', '.join(repr(a) for a in args)}", x)
    if device is not None:
        _check_device(x, device)
    return x if dtype is None else cast(x, dtype)


# torch's device types: a str naming one (``"cuda"``, ``"cuda:1"``) is a device, any other str a dtype name
_DEVICE_TYPES = frozenset({"cpu", "cuda", "mps", "xpu", "hip", "meta", "xla", "hpu", "mtia", "lazy", "vulkan",
                           "ipu", "maia", "privateuseone"})


def _device_name(v) -> str | None:
    """``v`` as a device name when it is one (not a dtype): a str of a torch device type (with or
    without an index), an int (torch's CUDA ordinal), or an object with a str ``type`` (a
    ``torch.device``); else None."""
    if isinstance(v, str):
        return v if v.partition(":")[0] in _DEVICE_TYPES else None
    if isinstance(v, int) and not isinstance(v, bool):
        return f"cuda:{v}"
    kind = getattr(v, "type", None)
    if isinstance(kind, str):
        index = getattr(v, "index", None)
        return kind if index is None else f"{kind}:{index}"
    return None


def _check_device(x: GraphTensor, device) -> None:
    name = _device_name(device)
    if name in ("cpu", "cpu:0"):
        return
    what = repr(device) if name is None else repr(name)
    raise op_error(ValueError, "to", f"device {what}: luminal has no per-tensor device ('cpu' is accepted and "
                   f"changes nothing); it picks the backend when compiling, e.g. lm.compile(outputs, backend='cuda') "
                   f"(registered: {', '.join(backend_names())})", x)


@tensor_op("type_as")
def type_as(x: GraphTensor, other: GraphTensor) -> GraphTensor:
    """torch ``Tensor.type_as``: ``x`` cast to ``other``'s dtype (``x`` itself when it has it).

    Args:
        x: the input tensor.
        other: the tensor whose dtype is taken (its values are not read).
    """
    check_tensors("type_as", input=x, other=other)
    return cast(x, other.dtype)


def broadcast_shapes(op: str, *ts: GraphTensor, shapes=None) -> tuple:
    """numpy/torch broadcasting of the operands' shapes (or of ``shapes``, with ``ts`` named in the
    error), with symbolic dims compared exactly."""
    shapes = [t.shape for t in ts] if shapes is None else shapes
    first = shapes[0]
    if all(s == first for s in shapes):  # (the common case: one operand, or operands of one shape)
        return tuple(first)
    n = max(len(s) for s in shapes)
    out = []
    for i in range(n):
        dims = [s[i - n + len(s)] for s in shapes if i - n + len(s) >= 0]
        size = 1
        for d in dims:
            if is_static(d) and d == 1:
                continue
            if is_static(size) and size == 1:
                size = d
            elif d != size:
                text = " and ".join(shape_str(s) for s in shapes)
                raise op_error(ValueError, op, f"shapes {text} cannot broadcast (dim {i - n}: {size} vs {d})", *ts)
        out.append(size)
    return tuple(out)


def scalar(like: GraphTensor, value, dtype: dt.DType) -> GraphTensor:
    return like.graph.constant(value, dtype)


def coerce(op: str, *xs, dtype: dt.DType | None = None, min_kind: str | None = None) -> list[GraphTensor]:
    """Turn a mix of tensors, numpy arrays and Python scalars into tensors of one shape and one dtype.

    The dtype follows the promotion rules (``dtype.py``) unless ``dtype`` is given; ``min_kind="f"``
    lifts bool/int results to float32 (true division, float math). A numpy array becomes a constant
    of the tensors' graph (``from_numpy``).
    """
    if len(xs) == 2:  # the common cases (two tensors of one graph; a tensor and a Python number): no checks to make
        a, b = xs
        ca, cb = a.__class__, b.__class__
        if ca is GraphTensor and cb is GraphTensor and a.graph is b.graph:
            d = a.node.dtype
            if b.node.dtype is d and (dtype is d or (dtype is None and (min_kind != "f" or d.kind == "f"))) \
                    and a.layout.shape == b.layout.shape:
                return [a, b]  # (one dtype and shape: nothing to cast or broadcast)
            tensors = [a, b]
            return _coerced(op, xs, tensors, _dtype_of(tensors, xs, dtype, min_kind), broadcast_shapes(op, a, b))
        if (ca is GraphTensor and cb in _NUMBERS) or (cb is GraphTensor and ca in _NUMBERS):
            tensors = [a if ca is GraphTensor else b]
            return _coerced(op, xs, tensors, _dtype_of(tensors, xs, dtype, min_kind), tuple(tensors[0].layout.shape))
    tensors = [x for x in xs if isinstance(x, GraphTensor)]
    if not tensors:
        raise op_error(TypeError, op, "at least one operand must be a GraphTensor, got "
                       + " and ".join(type(x).__name__ for x in xs))
    if any(t.graph is not tensors[0].graph for t in tensors):
        raise op_error(ValueError, op, "operands belong to different graphs", *tensors)
    if any(isinstance(x, (np.ndarray, Sym)) for x in xs):  # a symbolic size: its int32 value at run time
        xs = tuple(from_numpy(op, x, tensors[0]) if isinstance(x, np.ndarray) else
                   tensors[0].graph.constant(x) if isinstance(x, Sym) else x for x in xs)
        tensors = [x for x in xs if isinstance(x, GraphTensor)]
    for x in xs:
        if not isinstance(x, GraphTensor):
            try:
                dt.scalar_kind(x)
            except TypeError:
                msg = f"cannot combine a tensor with {got(x)}" if isinstance(x, State) else \
                    f"cannot combine a tensor with {type(x).__name__} {x!r}"
                raise op_error(TypeError, op, msg, *tensors) from None
    return _coerced(op, xs, tensors, _dtype_of(tensors, xs, dtype, min_kind), broadcast_shapes(op, *tensors))


_NUMBERS = frozenset({float, int, bool})  # Python numbers (exactly these types), which coerce takes as they are


def _dtype_of(tensors, xs, dtype, min_kind) -> dt.DType:
    """``coerce``'s dtype: ``dtype`` when given, else the operands' promoted (``min_kind``: see coerce)."""
    if dtype is None:
        dtype = result_dtype(tensors)
        for x in xs:
            if not isinstance(x, GraphTensor):
                dtype = dt.promote_scalar(dtype, x)
        if min_kind == "f" and not dtype.is_float:
            dtype = dt.float32
    return dtype


def _coerced(op: str, xs, tensors, dtype: dt.DType, shape: tuple) -> list[GraphTensor]:
    """``coerce``'s result: each operand (checked) as a tensor of ``dtype`` and ``shape``, in order."""
    out = []
    for x in xs:
        if not isinstance(x, GraphTensor) and dtype.kind == "i" and dt.scalar_kind(x) == "i" \
                and not -2**31 <= int(x) < 2**31:  # (named by the op the user called, not "constant")
            raise op_error(ValueError, op, f"{x} does not fit in int32, the operation's dtype (luminal's one "
                           f"integer type)", *tensors)
        t = x if isinstance(x, GraphTensor) else scalar(tensors[0], x, dtype)
        t = cast(t, dtype)
        if t.shape != shape:
            t = _broadcast(t, shape)
        out.append(t)
    return out


def _broadcast(t: GraphTensor, shape: tuple) -> GraphTensor:
    """``t.expand(*shape)`` for a shape ``t`` broadcasts to (``broadcast_shapes`` checked it), as a view
    without expand's checks and its intermediate tensor; where the view cannot add the leading dims (a
    masked size-1 dim), expand's own path (a Copy first)."""
    v = t.layout
    lead = len(shape) - len(v.shape)
    if lead:
        v = v.reshape((1,) * lead + v.shape)
        if v is None:
            return t.expand(*shape)
    return GraphTensor(t.graph, t.node, v.expand(shape))


def result_dtype(tensors) -> dt.DType:
    """The dtype tensors promote to, by torch's tiers: tensors with dims promote among themselves, and
    0-d tensors count only where their kind (bool < int < float) is above theirs, as a scalar would
    (``f16[3] + f32[]`` is float16, ``i32[3] + f64[]`` float64); 0-d tensors alone promote as tensors."""
    dims, zero = [t for t in tensors if t.ndim], [t for t in tensors if not t.ndim]
    if not dims or not zero:
        return _promoted(dims or zero)
    d, z = _promoted(dims), _promoted(zero)
    return z if dt.kind_rank(z) > dt.kind_rank(d) else d


def _promoted(ts) -> dt.DType:
    d = ts[0].dtype
    for t in ts[1:]:
        d = dt.promote(d, t.dtype)
    return d


def result_type(tensor, other) -> dt.DType:
    """torch.result_type: the dtype an op of ``tensor`` and ``other`` (tensors or Python numbers) gives,
    by torch's rules (``result_dtype``'s tiers for tensors; a number counts only where its kind is
    higher, as ``promote_scalar``; two numbers give the default dtype of the higher kind).

    Args:
        tensor: a tensor or a number.
        other: a tensor or a number.
    """
    ts = [v for v in (tensor, other) if isinstance(v, GraphTensor)]
    nums = [v for v in (tensor, other) if not isinstance(v, GraphTensor)]
    for v in nums:
        dt.scalar_kind(v)  # (a TypeError naming what is not a number)
    if not ts:
        kinds = sorted((dt.scalar_kind(v) for v in nums), key=lambda k: "bif".index(k))
        return {"b": dt.bool_, "i": dt.int32, "f": dt.float32}[kinds[-1]]
    d = result_dtype(ts)
    for v in nums:
        d = dt.promote_scalar(d, v)
    return d


def fresh(t: GraphTensor) -> GraphTensor:
    """A new handle on ``t``'s value: what an op that changes nothing returns, so that an in-place method
    on its result rebinds that result only, not the op's input (torch's op gives a new tensor)."""
    return t.graph.tensor(t.node, t.layout)


def from_numpy(op: str, a: np.ndarray, like: GraphTensor):
    """A numpy array operand of ``op`` as torch takes ``torch.from_numpy(a)``: a constant of
    ``like``'s graph whose dtype is the array's (float64 stays float64, so ``x + np.ones(3)`` of a
    float32 ``x`` is float64, as in torch; integers become int32, luminal's one integer type), and a
    0-d array as the Python scalar it holds (torch's 0-dim operands do not raise a tensor's dtype
    within its kind: ``x + np.float64(2)`` stays float32)."""
    if a.dtype.kind not in "biuf":
        raise op_error(TypeError, op, f"cannot combine a tensor with a numpy array of dtype {a.dtype}", like)
    if a.ndim == 0:
        return a.item()
    return like.graph.constant(a)


def require(op: str, cond: bool, msg: str, *ts, kind=TypeError):
    if not cond:
        raise op_error(kind, op, msg, *ts)


def normalize_axes(x: GraphTensor, axis, op: str, empty_is_all: bool = True) -> tuple[int, ...]:
    """``axis`` as None (all), an int, or a sequence; returns sorted non-negative axes (a dim named
    twice is refused, as torch). An empty sequence is every dim too, as torch's reductions take
    ``dim=[]`` (not numpy's ``axis=()``, no dim); ``empty_is_all=False`` for torch's any/all, which take
    it as no dim."""
    if axis is None:
        return tuple(range(x.ndim))
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    if not axes and empty_is_all:
        return tuple(range(x.ndim))
    out = sorted(x._axes(axes, op))
    if x.ndim == 0:
        return ()
    return tuple(out)


def take_graph(factory: str, args: tuple, graph) -> tuple[Graph, tuple]:
    """The graph a factory builds in, and the rest of its positional arguments.

    A luminal tensor is a node of a :class:`Graph`, given as the factory's first positional argument
    (``lm.full(g, (2, 3), 1.0)``, which is also how ``g.full((2, 3), 1.0)`` calls it) or as the
    ``graph=`` keyword (torch's spelling: ``lm.full((2, 3), 1.0, graph=g)``). Without either, torch
    code's factories still work: inside a module's forward (``torch.arange(0, t)``) the tensor is built
    in the graph the module call builds in (``frontend/building.py``); outside any module call
    (``nn.Parameter(torch.ones(n))`` in ``__init__``) it is a host tensor, whose values are known now
    (``frontend/host.py``)."""
    if args and isinstance(args[0], Graph):
        if graph is not None and graph is not args[0]:
            raise op_error(ValueError, factory, "got a graph both as the first argument and as graph=, and "
                           "they differ")
        return args[0], args[1:]
    if graph is None:
        ctx = building.current()
        if isinstance(ctx, building.NoGraph):
            raise op_error(TypeError, factory, f"has no graph to build in: {ctx.who} was called on no GraphTensor "
                           f"({ctx.got}); call the module on a graph's tensors (x = g.input('x', shape)), or pass "
                           f"graph=g (lm.{factory}(..., graph=g))")
        return (ctx if ctx is not None else host_graph()), args
    if not isinstance(graph, Graph):
        raise op_error(TypeError, factory, f"graph must be a luminal Graph, got {type(graph).__name__}")
    return graph, args


def check_device(factory: str, device) -> None:
    """A factory's ``device=`` (torch's ``torch.arange(t, device=x.device)``): ``"cpu"`` (or None) is
    accepted and changes nothing, as ``Tensor.to``'s; another device fails naming the backend option."""
    if device is None or _device_name(device) in ("cpu", "cpu:0"):
        return
    what = repr(device) if _device_name(device) is None else repr(_device_name(device))
    raise op_error(ValueError, factory, f"device {what}: luminal has no per-tensor device ('cpu' is accepted and "
                   f"changes nothing); it picks the backend when compiling, e.g. lm.compile(outputs, "
                   f"backend='cuda') (registered: {', '.join(backend_names())})")


def check_fill(op: str, value, d: dt.DType, *tensors) -> None:
    """torch refuses a fill value the dtype cannot hold ("value cannot be converted to type int without
    overflow"): a float NaN, inf or one outside int32's range (a fraction within it truncates), a
    finite number (an int too) beyond a float dtype's largest value (``65505`` in float16, though it
    would round to 65504). A bool takes any value (and is never checked); an int out of int32's range
    in int32 is the constant's own error."""
    if isinstance(value, (bool, np.bool_)) or d.kind == "b" or not isinstance(value, (int, float, np.number)):
        return
    if d.kind == "i":
        if not isinstance(value, (float, np.floating)):
            return
        v = float(value)
        bad = not (math.isfinite(v) and -(2.0**31) <= v <= 2.0**31 - 1)
    else:
        v = float(value) if abs(value) < 2**1024 else math.inf  # (an int past a double's range)
        bad = (math.isfinite(v) and abs(v) > dt.finfo(d).max) or (math.isinf(v) and isinstance(value, int))
    if bad:
        raise op_error(ValueError, op, f"value {value!r} cannot be converted to {d.name} without overflow, as "
                       f"torch's", *tensors)


def full(*args, dtype=None, graph: Graph | None = None, device=None) -> GraphTensor:
    """torch.full: a tensor of shape ``size`` filled with ``fill_value`` (a broadcast scalar: a view,
    no storage).

    Called as ``full(size, fill_value, dtype=None, *, graph=g)``, ``full(g, size, fill_value,
    dtype=None)`` or ``g.full(size, fill_value, dtype=None)``.

    Args:
        size: the shape, a sequence of ints or symbolic dims (an int alone for 1-d).
        fill_value: the value, a Python bool, int or float.
        dtype: the dtype; by default the value's kind as torch takes it: bool, int32 (torch's
            int64) or float32.
        graph: the Graph to build in, when not given first (``take_graph``).
        device: ``"cpu"`` or None (``check_device``).
    """
    check_device("full", device)
    g, args = take_graph("full", args, graph)
    if len(args) == 3 and dtype is None:
        args, dtype = args[:2], args[2]
    if len(args) != 2:
        raise op_error(TypeError, "full", f"expected size and fill_value (and dtype), got {len(args)} "
                       "positional arguments after the graph")
    shape, value = args
    shape = sizes("full", shape)
    check_number("full", "value", value)
    if dtype is None:
        dtype = {"b": dt.bool_, "i": dt.int32, "f": dt.float32}[dt.scalar_kind(value)]
    check_fill("full", value, dt.as_dtype(dtype))
    c = g.constant(value, dtype)
    return c.reshape((1,) * len(shape)).expand(*shape) if shape else c


@tensor_op("full_like")
def full_like(x: GraphTensor, value, dtype=None) -> GraphTensor:
    """torch.full_like: a tensor of ``x``'s shape (and graph) filled with ``value``.

    Args:
        x: the tensor whose shape and graph are used (its values are not read).
        value: the fill value, a Python bool, int or float.
        dtype: the result's dtype (default: ``x``'s).
    """
    return full(x.graph, x.shape, value, x.dtype if dtype is None else dtype)


def power_by_squaring(x, n: int, times):
    """``x`` to the int power ``n >= 1`` under the product ``times`` (``mul`` for elementwise powers,
    ``matmul`` for matrix powers), by repeated squaring: about ``2 log2(n)`` products."""
    out = None
    while True:
        if n & 1:
            out = x if out is None else times(out, x)
        n >>= 1
        if not n:
            return out
        x = times(x, x)
