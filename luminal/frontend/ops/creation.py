"""Tensors made from nothing: arange, linspace, logspace, zeros, ones, full, eye (and the ``*_like``
forms), and the triangular masks tril/triu; ``Tensor.new_zeros``/``new_ones``/``new_full``.

A factory builds in a :class:`Graph`: given first (``lm.arange(g, 5)``, which is what ``g.arange(5)``
calls) or as ``graph=g`` (torch's spelling, ``lm.arange(5, graph=g)``); the ``*_like`` ones take the
graph from their tensor."""

from __future__ import annotations

import math
import numbers

import numpy as np

from luminal.core import dtype as dt
from luminal.core.errors import op_error
from luminal.core.symbolic import Sym, is_static, sizes, sym
from luminal.frontend.checks import tensor_op
from luminal.frontend.graph import Graph
from luminal.frontend.ops.core import cast, check_device, full, full_like, take_graph  # noqa: F401 - creation ops, made in core
from luminal.frontend.ops.elementwise import add, eq, ge, le, minimum, mul, sub, where
from luminal.frontend.tensor import GraphTensor


def arange(*args, end=None, step=None, dtype=None, graph: Graph | None = None, device=None) -> GraphTensor:
    """torch.arange: the numbers from ``start`` (default 0) up to, not including, ``end``, ``step``
    apart.

    Called as ``arange(end)``, ``arange(start, end)`` or ``arange(start, end, step)`` with
    ``graph=g``, or with the graph first (``arange(g, ...)``, ``g.arange(...)``). ``start`` and
    ``end`` may be symbolic sizes (names, Sym); bools count as 0 / 1, as in torch
    (``arange(False, True, True)`` is ``[0]``).

    Args:
        start: the first value (the only number given is ``end``, as in torch).
        end: the bound, excluded.
        step: the distance between values, non-zero (default 1); ``end - start`` must not have the
            other sign (torch refuses it rather than giving an empty tensor).
        dtype: the dtype; by default int32 (torch's int64) when every number is an int, else float32.
            The values are ``start + i * step`` computed in float64 and rounded once to a float dtype,
            as torch's CPU ``arange`` (so ``arange(0, 1, 0.1)[9]`` is float32's 0.9, not 9 float32
            roundings away); an integer dtype truncates float bounds and step toward zero first, as
            torch's int64 ``arange`` (a step below 1 is then refused); bool is refused, as torch's.
        graph: the Graph to build in, when not given first (``ops/core.py``'s ``take_graph``: without one,
            the graph of the enclosing module call, else a host tensor).
        device: ``"cpu"`` or None (``check_device``).
    """
    check_device("arange", device)
    g, args = take_graph("arange", args, graph)
    if len(args) == 4 and dtype is None:  # the graph-first form's positional dtype
        args, dtype = args[:3], args[3]
    if not 1 <= len(args) + (end is not None) <= 3 or len(args) > 3:
        raise op_error(TypeError, "arange", f"expected start, end and step, got {len(args)} positional arguments")
    if step is not None and len(args) == 3:
        raise op_error(TypeError, "arange", "step given both by position and as step=")
    start = args[0] if args else 0
    if end is None and len(args) >= 2:
        end = args[1]
    elif end is not None and len(args) >= 2:
        raise op_error(TypeError, "arange", "end given both by position and as end=")
    step = args[2] if len(args) == 3 else 1 if step is None else step
    if end is None:
        start, end = 0, start
    start, end, step = (_arange_bound(what, v) for what, v in (("start", start), ("end", end), ("step", step)))
    floats = any(isinstance(v, float) for v in (start, end, step))
    d = dt.as_dtype(dtype) if dtype is not None else (dt.float32 if floats else dt.int32)
    if d.kind == "b":
        raise op_error(TypeError, "arange", "is not defined for bool (as torch's)")
    if step == 0:
        raise op_error(ValueError, "arange", "step must be non-zero")
    if floats and not d.is_float:  # torch's int64 arange: start, end and step truncated toward zero first
        given = step
        start, end, step = (math.trunc(v) if isinstance(v, float) else v for v in (start, end, step))
        if step == 0:
            raise op_error(ValueError, "arange", f"step {given} truncates to 0 for the integer dtype {d.name}")
        floats = False
    span = sym(end) - sym(start) if not floats else end - start
    if (floats or is_static(span)) and (span < 0 < step or step < 0 < span):
        raise op_error(ValueError, "arange", f"the bounds are inconsistent with the step's sign: start {start}, "
                       f"end {end}, step {step} (as torch's)")
    if floats:  # the count in float64, as torch's
        n = max(0, math.ceil((end - start) / step))
    else:
        start = sym(start)
        n = max(0, -(-span // step)) if is_static(span) else (span + step - 1) // step if step > 0 else None
        if n is None:
            raise op_error(ValueError, "arange", "a negative step needs static bounds")
    base = g.tensor(g.add("Arange", (), n, dt.int32, (n,)))
    if not floats and step == 1 and is_static(start) and start == 0:
        return cast(base, d)
    if not floats and not d.is_float:
        return cast(add(mul(base, step), start), d)
    # start + i * step in float64, rounded once to the dtype (torch's CPU arithmetic, exact in the count)
    out = add(mul(cast(base, dt.float64), float(step)), start if not is_static(start) else float(start))
    return cast(out, d)


def _arange_bound(what: str, v):
    """One of arange's numbers: a bool as the int torch takes it for, a finite float, an int, or (not
    the step) a symbolic size; anything else fails naming arange and the argument, not as a
    conversion error deep in the size arithmetic."""
    if isinstance(v, (bool, np.bool_)):
        return int(v)
    if isinstance(v, (Sym, str)) and what != "step":
        return v
    if isinstance(v, numbers.Integral):
        return int(v)
    if isinstance(v, numbers.Real):
        if not math.isfinite(v):
            raise op_error(ValueError, "arange", f"{what} must be finite, got {v}")
        return float(v)
    kind = "a number" if what == "step" else "a number or a symbolic size"
    raise op_error(TypeError, "arange", f"{what} must be {kind}, got {type(v).__name__} {v!r}")


def _spaced(factory: str, args: tuple, steps, base, dtype, graph, device):
    """linspace/logspace's arguments: the graph, ``start``, ``end`` and ``steps`` (positional or
    ``steps=``; logspace's ``base`` also positional), the dtype (default float32, as torch's default
    dtype, also for int bounds)."""
    check_device(factory, device)
    g, args = take_graph(factory, args, graph)
    most = 4 if factory == "logspace" else 3
    if not 2 <= len(args) <= most or (steps is not None and len(args) > 2):
        raise op_error(TypeError, factory, f"expected start, end and steps{', base' if most == 4 else ''}, got "
                       f"{len(args)} positional arguments" + (" and steps=" if steps is not None else ""))
    if len(args) == 4:
        if base is not None:
            raise op_error(TypeError, factory, "base given both by position and as base=")
        base = args[3]
    start, end = args[0], args[1]
    steps = args[2] if len(args) > 2 else steps
    if steps is None:
        raise op_error(TypeError, factory, "missing steps")
    for what, v in (("start", start), ("end", end)) + ((("base", base),) if base is not None else ()):
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Real):
            raise op_error(TypeError, factory, f"{what} must be a number, got {type(v).__name__} {v!r}"
                           + (" (a tensor's value is known only when the program runs)"
                              if isinstance(v, GraphTensor) else ""))
    if isinstance(steps, (bool, np.bool_)) or not isinstance(steps, numbers.Integral):
        raise op_error(TypeError, factory, f"steps must be an int, got {type(steps).__name__} {steps!r}")
    if steps < 0:
        raise op_error(ValueError, factory, f"the number of steps must be non-negative, got {steps}")
    d = dt.float32 if dtype is None else dt.as_dtype(dtype)
    if d.kind == "b":
        raise op_error(TypeError, factory, "is not defined for bool (as torch's)")
    return g, float(start), float(end), int(steps), None if base is None else float(base), d


def _in(d: dt.DType, v):
    """``v`` (float64 values) rounded to the float dtype ``d``, as float64 again: torch's arithmetic in ``d``."""
    return np.asarray(dt.to_storage(np.asarray(v, np.float64), d), np.float64)


def linspace(*args, steps: int | None = None, dtype=None, graph: Graph | None = None, device=None) -> GraphTensor:
    """torch.linspace: ``steps`` values from ``start`` to ``end`` (both included), evenly spaced: a
    constant of the graph, laid out as torch's (the first half counted up from ``start``, the rest down
    from ``end``, so both ends are exact), computed in float64 and rounded once to the dtype; integer
    dtypes truncate the bounds and the values, as torch's.

    Called as ``linspace(start, end, steps, graph=g)``, ``linspace(g, start, end, steps)`` or
    ``g.linspace(start, end, steps)``. The bounds are numbers (torch also takes 0-d tensors).

    Args:
        start: the first value.
        end: the last value.
        steps: how many values (an int >= 0).
        dtype: the dtype (default float32, as torch's default dtype, also for int bounds).
        graph: the Graph to build in, when not given first (``take_graph``).
        device: ``"cpu"`` or None (``check_device``).
    """
    g, start, end, steps, _, d = _spaced("linspace", args, steps, None, dtype, graph, device)
    i, last = np.arange(steps, dtype=np.float64), max(steps - 1, 1)
    if not d.is_float:
        s, e = math.trunc(start), math.trunc(end)
        step = (e - s) / last
        vals = np.trunc(np.where(i < steps // 2, s + step * i, e - step * (steps - 1 - i)))
    else:  # in float64, rounded once to the dtype (torch's own arithmetic in the dtype may differ in the last bit)
        step = (end - start) / last
        vals = np.where(i < steps // 2, start + step * i, end - step * (steps - 1 - i))
    if steps == 1:  # (torch fills with start)
        vals = np.array([math.trunc(start) if not d.is_float else start])
    return g.constant(vals.astype(d.np) if d.is_float else vals.astype(np.int64), d)


def logspace(*args, steps: int | None = None, base: float | None = None, dtype=None, graph: Graph | None = None,
             device=None) -> GraphTensor:
    """torch.logspace: ``base ** linspace(start, end, steps)`` as torch computes it (the bounds in the
    dtype, the exponents and powers in float64, rounded once; integer dtypes truncate): a constant of
    the graph. Called as ``linspace`` is.

    Args:
        start: the first exponent.
        end: the last exponent.
        steps: how many values (an int >= 0).
        base: the base (default 10.0).
        dtype: the dtype (default float32).
        graph: the Graph to build in, when not given first (``take_graph``).
        device: ``"cpu"`` or None (``check_device``).
    """
    g, start, end, steps, base, d = _spaced("logspace", args, steps, base, dtype, graph, device)
    b = 10.0 if base is None else base
    i, last = np.arange(steps, dtype=np.float64), max(steps - 1, 1)
    s, e = (math.trunc(start), math.trunc(end)) if not d.is_float else (_in(d, start), _in(d, end))
    step = (e - s if not d.is_float else _in(d, e - s)) / last
    exps = np.where(i < steps // 2, s + step * i, e - step * (steps - 1 - i))
    if steps == 1:  # (torch fills with base ** start)
        exps = np.array([start])
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        vals = np.power(b, exps)
        vals = vals.astype(d.np) if d.is_float else np.trunc(vals).astype(np.int64)
    return g.constant(vals, d)


def _filled(factory: str, value, args: tuple, dtype, graph, device) -> GraphTensor:
    """``zeros``/``ones``: torch's ``*size`` (ints, or one sequence) filled with ``value``."""
    check_device(factory, device)
    g, args = take_graph(factory, args, graph)
    if len(args) == 2 and isinstance(args[0], (tuple, list)) and dtype is None:  # g.zeros(shape, dtype)
        args, dtype = args[:1], args[1]
    if not args:  # (torch's TypeError: ``zeros(())`` is the 0-d tensor)
        raise op_error(TypeError, factory, "missing the size (a 0-d tensor's is ())")
    shape = args[0] if len(args) == 1 and isinstance(args[0], (tuple, list)) else args
    return full(g, tuple(shape), value, dt.float32 if dtype is None else dtype)


def zeros(*size, dtype=None, graph: Graph | None = None, device=None) -> GraphTensor:
    """torch.zeros: a tensor of zeros (a broadcast scalar: a view, no storage).

    Called as ``zeros(2, 3, graph=g)``, ``zeros((2, 3), graph=g)``, ``zeros(g, 2, 3)`` or
    ``g.zeros((2, 3), dtype)``.

    Args:
        size: the shape, as ints or symbolic dims, or one sequence of them.
        dtype: the dtype (default float32, as torch's default dtype).
        graph: the Graph to build in, when not given first.
        device: ``"cpu"`` or None.
    """
    return _filled("zeros", 0, size, dtype, graph, device)


def ones(*size, dtype=None, graph: Graph | None = None, device=None) -> GraphTensor:
    """torch.ones: a tensor of ones (a broadcast scalar: a view, no storage).

    Called as ``ones(2, 3, graph=g)``, ``ones((2, 3), graph=g)``, ``ones(g, 2, 3)`` or
    ``g.ones((2, 3), dtype)``.

    Args:
        size: the shape, as ints or symbolic dims, or one sequence of them.
        dtype: the dtype (default float32, as torch's default dtype).
        graph: the Graph to build in, when not given first.
        device: ``"cpu"`` or None.
    """
    return _filled("ones", 1, size, dtype, graph, device)


@tensor_op("zeros_like")
def zeros_like(x: GraphTensor, dtype=None) -> GraphTensor:
    """torch.zeros_like: zeros of ``x``'s shape, in ``x``'s graph.

    Args:
        x: the tensor whose shape and graph are used (its values are not read).
        dtype: the result's dtype (default: ``x``'s).
    """
    return full_like(x, 0, dtype)


@tensor_op("ones_like")
def ones_like(x: GraphTensor, dtype=None) -> GraphTensor:
    """torch.ones_like: ones of ``x``'s shape, in ``x``'s graph.

    Args:
        x: the tensor whose shape and graph are used (its values are not read).
        dtype: the result's dtype (default: ``x``'s).
    """
    return full_like(x, 1, dtype)


@tensor_op("rand_like")
def rand_like(x: GraphTensor, dtype=None) -> GraphTensor:
    """torch.rand_like: uniform ``[0, 1)`` noise of ``x``'s shape, in ``x``'s graph, drawn afresh on
    every call of a compiled program (``Graph.rand``: float32 noise, rounded to the dtype, and kept
    below 1 where a half-precision dtype would round it up).

    Args:
        x: the tensor whose shape, graph and (by default) dtype are used (its values are not read).
        dtype: the result's dtype (default ``x``'s), a float dtype: torch's uniform noise is not
            defined for integer or bool tensors.
    """
    d = x.dtype if dtype is None else dt.as_dtype(dtype)
    if not d.is_float:
        raise op_error(TypeError, "rand_like", f"needs a float dtype (as torch's), got {d.name}", x)
    out = cast(x.graph.rand(x.shape), d)
    return minimum(out, 1 - dt.finfo(d).eps / 2) if dt.finfo(d).eps > dt.finfo(dt.float32).eps else out


def _new_shape(op: str, size: tuple) -> tuple:
    """torch's ``*size`` of the ``new_*`` methods: ints or symbolic dims, or one sequence of them."""
    return sizes(op, size[0] if len(size) == 1 and isinstance(size[0], (tuple, list)) else size)


@tensor_op("new_full")
def new_full(x: GraphTensor, size, fill_value, *, dtype=None) -> GraphTensor:
    """torch ``Tensor.new_full``: a tensor of shape ``size`` filled with ``fill_value``, in ``x``'s
    graph and, unless ``dtype`` says otherwise, of ``x``'s dtype (not the value's, as torch): the
    graph to build in is the one thing a luminal factory needs, and ``x`` has it.

    Args:
        x: the tensor whose graph and dtype are used (its values are not read).
        size: the shape, a sequence of ints or symbolic dims.
        fill_value: the value, a Python bool, int or float.
        dtype: the dtype (default ``x``'s).
    """
    return full(x.graph, _new_shape("new_full", (size,)), fill_value, x.dtype if dtype is None else dtype)


@tensor_op("new_zeros")
def new_zeros(x: GraphTensor, *size, dtype=None) -> GraphTensor:
    """torch ``Tensor.new_zeros``: zeros of shape ``size`` in ``x``'s graph, of ``x``'s dtype unless
    ``dtype`` is given.

    Args:
        x: the tensor whose graph and dtype are used (its values are not read).
        size: the shape, as ints or symbolic dims, or one sequence of them.
        dtype: the dtype (default ``x``'s).
    """
    return full(x.graph, _new_shape("new_zeros", size), 0, x.dtype if dtype is None else dtype)


@tensor_op("new_ones")
def new_ones(x: GraphTensor, *size, dtype=None) -> GraphTensor:
    """torch ``Tensor.new_ones``: ones of shape ``size`` in ``x``'s graph, of ``x``'s dtype unless
    ``dtype`` is given.

    Args:
        x: the tensor whose graph and dtype are used (its values are not read).
        size: the shape, as ints or symbolic dims, or one sequence of them.
        dtype: the dtype (default ``x``'s).
    """
    return full(x.graph, _new_shape("new_ones", size), 1, x.dtype if dtype is None else dtype)


def _rows_cols(g, n, m):
    return g.arange(n).reshape(n, 1), g.arange(m).reshape(1, m)


def eye(*args, m=None, dtype=None, graph: Graph | None = None, device=None) -> GraphTensor:
    """torch.eye: a 2-d tensor with ones on the diagonal and zeros elsewhere.

    Called as ``eye(n, m=None, dtype=None, graph=g)`` or with the graph first (``eye(g, n)``,
    ``g.eye(n)``).

    Args:
        n: the number of rows.
        m: the number of columns (default ``n``).
        dtype: the dtype (default float32).
        graph: the Graph to build in, when not given first.
        device: ``"cpu"`` or None.
    """
    check_device("eye", device)
    g, args = take_graph("eye", args, graph)
    if len(args) == 3 and dtype is None:
        args, dtype = args[:2], args[2]
    if not 1 <= len(args) <= 2:
        raise op_error(TypeError, "eye", f"expected n (and m), got {len(args)} positional arguments")
    if len(args) == 2 and m is not None:
        raise op_error(TypeError, "eye", "m given both by position and as m=")
    n, m = args[0], args[1] if len(args) == 2 else m
    dtype = dt.float32 if dtype is None else dtype
    m = n if m is None else m
    sizes("eye", (n, m))
    r, c = _rows_cols(g, n, m)
    return cast(eq(r, c), dtype)


def _triangle(x: GraphTensor, op: str, keep) -> GraphTensor:
    """``x`` where ``keep(col - row)`` holds in the last two dims, 0 elsewhere."""
    if x.ndim < 2:
        raise op_error(ValueError, op, f"needs at least 2 dims, got {x.ndim}", x)
    r, c = _rows_cols(x.graph, x.shape[-2], x.shape[-1])
    return where(keep(sub(c, r)), x, x.graph.constant(0, x.dtype))


@tensor_op("tril")
def tril(x: GraphTensor, diagonal: int = 0) -> GraphTensor:
    """Keep elements with ``col - row <= diagonal`` in the last two dims, zero the rest."""
    return _triangle(x, "tril", lambda d: le(d, diagonal))


@tensor_op("triu")
def triu(x: GraphTensor, diagonal: int = 0) -> GraphTensor:
    """Keep elements with ``col - row >= diagonal`` in the last two dims, zero the rest."""
    return _triangle(x, "triu", lambda d: ge(d, diagonal))
