"""Shape and layout ops with torch's names: flatten, flip, rot90, roll, diff, narrow, select, unbind,
movedim, repeat_interleave, diagonal, diag, diag_embed, trace, meshgrid.

All are views where a view can express them (flip, narrow, select, unbind, movedim, diagonal);
roll is two slices joined by ``cat``, ``repeat_interleave`` with a tensor of repeats is a Gather.
"""

from __future__ import annotations

from luminal.core import dtype as dt
from luminal.core.errors import check_int, op_error, user_frame
from luminal.core.errors import where as at_line
from luminal.core.symbolic import Dim, Sym, is_static, nonnegative, shape_str, sym
from luminal.frontend.checks import check_tensors, tensor_op
from luminal.frontend.float32_ops import float32_under_autocast
from luminal.frontend.ops.combine import _sequence, cat
from luminal.frontend.ops.core import cast, require
from luminal.frontend.ops.elementwise import add, eq, le, logical_xor, lt, ne, sub, where
from luminal.frontend.ops.indexing import index_select
from luminal.frontend.ops.reduce import any_, cumsum
from luminal.frontend.ops.reduce import sum as sum_
from luminal.frontend.tensor import GraphTensor


@tensor_op("flatten")
def flatten(input: GraphTensor, start_dim: int = 0, end_dim: int = -1) -> GraphTensor:  # noqa: A002 - torch's name
    """torch.flatten: dims ``start_dim`` to ``end_dim`` merged into one (a view when the layout
    allows; a 0-d tensor becomes 1-d). The function form of ``Tensor.flatten``.

    Args:
        input: the tensor.
        start_dim: the first dim merged (default 0).
        end_dim: the last dim merged (default -1).
    """
    return input.flatten(start_dim, end_dim)


@tensor_op("flip")
def flip(input: GraphTensor, dims) -> GraphTensor:  # noqa: A002 - torch's name
    """torch.flip: reverse the order of elements along each dim in ``dims`` (a view).

    Args:
        input: the tensor.
        dims: an int or a sequence of ints, the dims to reverse.
    """
    return input.flip(dims=dims)


def _dim_list(v) -> tuple:
    return tuple(v) if isinstance(v, (tuple, list)) else (v,)


@tensor_op("roll")
def roll(input: GraphTensor, shifts, dims=None) -> GraphTensor:  # noqa: A002
    """torch.roll: shift the elements along ``dims`` by ``shifts``, wrapping around.

    Args:
        input: the tensor.
        shifts: an int or a sequence of ints, one per dim in ``dims``.
        dims: an int, a sequence of ints, or None: roll the flattened tensor and restore its shape.
    """
    x = input
    if dims is None:
        if isinstance(shifts, (tuple, list)) and len(shifts) != 1:
            raise op_error(ValueError, "roll", f"with dims=None shifts must be one int, got {shifts}", x)
        return roll(x.reshape(-1), shifts, 0).reshape(x.shape) if x.ndim else x
    shifts, dims = _dim_list(shifts), _dim_list(dims)
    if len(shifts) != len(dims):
        raise op_error(ValueError, "roll", f"shifts {shifts} and dims {dims} differ in length", x)
    for s, d in zip(shifts, dims):
        s = check_int("roll", "shifts", s)
        d = x._axis(d, "roll", scalar=False)
        n = x.shape[d]
        require("roll", is_static(n), f"dim {d} must be static, got {n}", x, kind=ValueError)
        if n == 0 or s % n == 0:
            continue
        s %= n
        x = cat([x._slice_dim(d, n - s, s, 1), x._slice_dim(d, 0, n - s, 1)], d)
    return x


@tensor_op("rot90")
def rot90(input: GraphTensor, k: int = 1, dims=(0, 1)) -> GraphTensor:  # noqa: A002
    """torch.rot90: ``k`` quarter turns in the plane of ``dims``, from the first dim towards the
    second (a view: flips and a transpose, as torch composes it).

    Args:
        input: a tensor of at least 2 dims.
        k: the number of turns (any int; negative turns the other way).
        dims: the two dims of the plane.
    """
    x = input
    k = check_int("rot90", "k", k)
    dims = _dim_list(dims)
    if len(dims) != 2:
        raise op_error(ValueError, "rot90", f"dims must name 2 dims, got {dims}", x)
    if x.ndim < 2:
        raise op_error(ValueError, "rot90", f"needs a tensor of at least 2 dims, got {x.ndim}-d", x)
    d0, d1 = (x._axis(d, "rot90") for d in dims)
    if d0 == d1:
        raise op_error(ValueError, "rot90", f"dims must differ, got {dims}", x)
    k %= 4
    if k == 1:
        return x.flip(d1).transpose(d0, d1)
    if k == 2:
        return x.flip(d0, d1)
    return x.flip(d0).transpose(d0, d1) if k == 3 else x


@tensor_op("diff")
def diff(input: GraphTensor, n: int = 1, dim: int = -1, prepend=None, append=None) -> GraphTensor:  # noqa: A002
    """torch.diff: the ``n``-th forward difference along ``dim`` (``x[1:] - x[:-1]``, ``n`` times; for
    bool, ``x[1:] != x[:-1]``), after joining ``prepend`` and ``append`` to ``input`` along ``dim``.
    Each difference is one element shorter (empty once ``n`` reaches the length). The dim must be
    static, so that the result's length is known.

    Args:
        input: a tensor of at least 1 dim.
        n: how many times to difference (>= 0).
        dim: the dim (default the last).
        prepend: a tensor of ``input``'s dims, joined before it along ``dim``.
        append: a tensor of ``input``'s dims, joined after it along ``dim``.
    """
    x = input
    n = check_int("diff", "n", n, 0)
    if x.ndim == 0:
        raise op_error(ValueError, "diff", "needs a tensor of at least 1 dim, got a 0-d one", x)
    d = x._axis(dim, "diff")
    ends = {"prepend": prepend, "append": append}
    check_tensors("diff", optional=tuple(ends), input=x, **ends)
    for what, t in ends.items():
        if t is not None and t.ndim != x.ndim:
            raise op_error(ValueError, "diff", f"{what} must have input's {x.ndim} dims, got {t.ndim}", x, t)
    if prepend is not None or append is not None:
        x = cat([t for t in (prepend, x, append) if t is not None], d)
    m = x.shape[d]
    require("diff", is_static(m), f"dim {d} must be static, got {m}", x, kind=ValueError)
    for _ in range(min(n, m)):
        m -= 1
        hi, lo = x._slice_dim(d, 1, m, 1), x._slice_dim(d, 0, m, 1)
        x = logical_xor(hi, lo) if x.dtype.kind == "b" else sub(hi, lo)
    return x


@tensor_op("narrow")
def narrow(input: GraphTensor, dim: int, start: Dim, length: Dim) -> GraphTensor:  # noqa: A002
    """torch.narrow: the view ``input[..., start:start + length, ...]`` along ``dim``.

    ``start`` and ``length`` may be symbolic sizes (``narrow(1, 0, T)``, ``T - 1``); one that may run
    past the dim is checked when the program runs (``start + length <= size``), as a static one is now.
    ``start`` may also be a 0-d integer tensor, as torch's: a start known only when the program runs;
    the result is then a Gather of ``arange(length) + start`` (an index past the dim fails at run time).

    Args:
        input: the tensor.
        dim: the dim to narrow.
        start: the first index (negative counts from the end): an int, a symbolic size, or a 0-d
            integer tensor.
        length: how many elements to keep, an int or a symbolic size.
    """
    x = input
    d = x._axis(dim, "narrow", scalar=False)
    n = x.shape[d]
    if isinstance(start, GraphTensor):
        return _narrow_at(x, d, start, _size_arg("length", length, x, 0))
    start, length = _size_arg("start", start, x), _size_arg("length", length, x, 0)
    if is_static(start) and start < 0:
        require("narrow", is_static(n), f"a negative start needs a static dim, dim {d} is {n}", x, kind=ValueError)
        start += n
    if is_static(start) and start < 0:
        raise op_error(IndexError, "narrow", f"start {start - n} is out of range for dim {d} of size {n}", x)
    x._requires(n - (start + length), length, "narrow", f"start {start} + length {length} exceeds dim {d} of size {n}")
    return x._slice_dim(d, start, length, 1)


def _narrow_at(x: GraphTensor, d: int, start: GraphTensor, length: Dim) -> GraphTensor:
    """``narrow`` at a start held by a 0-d integer tensor: the Gather of ``start + arange(length)``."""
    check_tensors("narrow", input=x, start=start)
    if start.ndim != 0 or start.dtype.kind != "i":
        raise op_error(TypeError, "narrow", f"a tensor start must be a 0-d integer tensor, got "
                       f"{shape_str(start.shape)} {start.dtype.name}", x, start)
    n = x.shape[d]
    if is_static(n) and is_static(length) and length > n:
        raise op_error(IndexError, "narrow", f"length {length} exceeds dim {d} of size {n}", x)
    s = cast(start, dt.int32)
    size = n if is_static(n) else x.graph.constant(n)
    s = where(lt(s, 0), add(s, size), s)  # negative counts from the end
    return index_select(x, d, add(x.graph.arange(length), s))


def _size_arg(what: str, v, x: GraphTensor, minimum: int | None = None) -> Dim:
    """An index or a length: an int (at least ``minimum``), or a symbolic size (a name or a ``Sym``)."""
    if isinstance(v, (Sym, str)):
        try:
            return sym(v)
        except ValueError as e:
            raise op_error(ValueError, "narrow", f"{what}: {e}", x) from None
    if isinstance(v, bool) or not hasattr(v, "__index__"):
        raise op_error(TypeError, "narrow", f"{what} must be an int or a symbolic size, got {type(v).__name__} {v!r}",
                       x)
    return check_int("narrow", what, v, minimum)


@tensor_op("select")
def select(input: GraphTensor, dim: int, index: int) -> GraphTensor:  # noqa: A002
    """torch.select: the view at ``index`` along ``dim``, with that dim removed.

    Args:
        input: the tensor.
        dim: the dim to index.
        index: the position (negative counts from the end).
    """
    x = input
    d = x._axis(dim, "select", scalar=False)
    index = check_int("select", "index", index)
    return x[(slice(None),) * d + (index,)]


@tensor_op("unbind")
def unbind(input: GraphTensor, dim: int = 0) -> tuple[GraphTensor, ...]:  # noqa: A002
    """torch.unbind: the slices along ``dim``, each with that dim removed (views).

    Args:
        input: the tensor.
        dim: the dim to split (its size must be static).
    """
    x = input
    d = x._axis(dim, "unbind", scalar=False)
    n = x.shape[d]
    require("unbind", is_static(n), f"dim {d} must be static, got {n}", x, kind=ValueError)
    return tuple(select(x, d, i) for i in range(n))


@tensor_op("movedim")
def movedim(input: GraphTensor, source, destination) -> GraphTensor:  # noqa: A002
    """torch.movedim: move the dims ``source`` to the positions ``destination``; the others keep
    their order (a view).

    Args:
        input: the tensor.
        source: an int or a sequence of ints.
        destination: an int or a sequence of ints, as long as ``source``.
    """
    x = input
    src, dst = _dim_list(source), _dim_list(destination)
    if len(src) != len(dst):
        raise op_error(ValueError, "movedim", f"source {src} and destination {dst} differ in length", x)
    src = [x._axis(s, "movedim") for s in src]
    dst = [x._axis(s, "movedim") for s in dst]
    if len(set(src)) != len(src) or len(set(dst)) != len(dst):
        raise op_error(ValueError, "movedim", f"repeated dim in source {src} or destination {dst}", x)
    if x.ndim == 0:
        return x
    order = [None] * x.ndim
    for s, t in zip(src, dst):
        order[t] = s
    rest = iter(i for i in range(x.ndim) if i not in src)
    order = [o if o is not None else next(rest) for o in order]
    return x.permute(*order)


moveaxis = movedim


@tensor_op("repeat_interleave")
def repeat_interleave(input: GraphTensor, repeats, dim=None, *, output_size=None) -> GraphTensor:  # noqa: A002
    """torch.repeat_interleave: repeat each element ``repeats`` times along ``dim``.

    Args:
        input: the tensor.
        repeats: an int (a view: broadcast and reshape), or an integer tensor of one count per
            element along ``dim`` (or one count for all). A tensor's counts are known only at run
            time, so the output length must be given as ``output_size`` (torch's argument).
        dim: the dim to repeat along; None repeats the flattened tensor.
        output_size: the total output length along ``dim`` (needed with a tensor of repeats; with an
            int it must be the length the repeats give, as torch checks it).
    """
    x = input
    if dim is None:
        x, dim = x.reshape(-1), 0
    d = x._axis(dim, "repeat_interleave", scalar=False) if x.ndim else 0
    if x.ndim == 0:
        x = x.reshape(1)
    if not isinstance(repeats, GraphTensor):
        r = check_int("repeat_interleave", "repeats", repeats, 0)
        if output_size is not None and is_static(x.shape[d]) and output_size != x.shape[d] * r:
            raise op_error(ValueError, "repeat_interleave", f"output_size={output_size} but {r} repeats of dim {d} "
                           f"of size {x.shape[d]} give {x.shape[d] * r}", x)
        out = x.unsqueeze(d + 1).expand(*x.shape[:d + 1], r, *x.shape[d + 1:])
        return out.reshape(*x.shape[:d], x.shape[d] * r, *x.shape[d + 1:])
    check_tensors("repeat_interleave", input=x, repeats=repeats)
    require("repeat_interleave", repeats.dtype.kind == "i", f"repeats must be an integer tensor, got "
            f"{repeats.dtype.name}", repeats)
    if repeats.ndim > 1:
        raise op_error(ValueError, "repeat_interleave", "repeats must be 0-d or 1-d", repeats)
    if output_size is None:
        raise op_error(ValueError, "repeat_interleave", "with a tensor of repeats the output length is known "
                       "only at run time: pass output_size=", x, repeats)
    output_size = check_int("repeat_interleave", "output_size", output_size, 0)
    n = x.shape[d]
    if repeats.ndim == 0 or (is_static(repeats.shape[0]) and repeats.shape[0] == 1 and n != 1):
        repeats = repeats.reshape(1).expand(n)
    if repeats.shape[0] != n:
        raise op_error(ValueError, "repeat_interleave", f"repeats has {repeats.shape[0]} counts for dim {d} "
                       f"of size {n}", x, repeats)
    reps = cast(repeats, dt.int32)
    ends = cumsum(reps, 0)  # element i fills [ends[i] - repeats[i], ends[i])
    pos = x.graph.arange(output_size)
    # the source of output position j: how many elements end at or before j
    src = sum_(cast(le(ends.unsqueeze(0), pos.unsqueeze(1)), dt.int32), 1)
    out = index_select(x, d, src)
    _check_repeats(x, repeats, reps, output_size, out)
    return out


def _check_repeats(x: GraphTensor, repeats: GraphTensor, reps: GraphTensor, output_size: int, out: GraphTensor):
    """Run-time checks (``Graph.guard``) of a tensor of repeats, torch's RuntimeErrors: no count is
    negative, and they sum to ``output_size`` (a smaller one silently cut the output short, a larger
    one failed in the gather; a negative count was taken as it came)."""
    g = x.graph
    total = sum_(reps)  # torch compares the sum first: [2, -1, 1] for 3 elements is a size error
    message = str(op_error(RuntimeError, "repeat_interleave", f"allocated size does not match required size: "
                           f"output_size={output_size} but the repeats sum to {{value}}", x, repeats))
    g.guard(ne(total, output_size), total, RuntimeError, message, of=out)
    negative = lt(reps, 0)
    message = str(op_error(RuntimeError, "repeat_interleave", "repeats can not be negative ({value} negative "
                           "count(s))", x, repeats))
    g.guard(any_(negative), sum_(cast(negative, dt.int32)), RuntimeError, message, of=out)


@tensor_op("diagonal")
def diagonal(input: GraphTensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> GraphTensor:  # noqa: A002
    """torch.diagonal: the elements ``input[..., i, ..., i + offset, ...]`` of dims ``dim1``/``dim2``,
    as a new last dim (those two dims removed).

    Args:
        input: the tensor (at least 2-d).
        offset: which diagonal: 0 the main one, > 0 above it, < 0 below it.
        dim1: the first dim of the 2-d sub-arrays.
        dim2: the second dim.
    """
    x = input
    if x.ndim < 2:
        raise op_error(ValueError, "diagonal", f"needs at least 2 dims, got {x.ndim}", x)
    a, b = x._axis(dim1, "diagonal"), x._axis(dim2, "diagonal")
    if a == b:
        raise op_error(ValueError, "diagonal", f"dim1 and dim2 are the same dim ({a})", x)
    offset = check_int("diagonal", "offset", offset)
    n, m = x.shape[a], x.shape[b]
    require("diagonal", is_static(n) and is_static(m), f"dims {a} and {b} must be static, got {n} and {m}",
            x, kind=ValueError)
    t = movedim(x, (a, b), (-2, -1))
    lead = t.shape[:-2]
    length = max(0, min(n, m - offset) if offset >= 0 else min(n + offset, m))
    if length == 0:
        return t.reshape(*lead, n * m)._slice_dim(len(lead), 0, 0, 1)
    start = offset if offset >= 0 else -offset * m
    flat = t.reshape(*lead, n * m)  # element (i, i + offset) is at start + i * (m + 1)
    return flat._slice_dim(len(lead), start, length, m + 1)


@tensor_op("diag")
def diag(input: GraphTensor, diagonal: int = 0) -> GraphTensor:  # noqa: A002
    """torch.diag: a 1-d input becomes the square matrix with it on diagonal ``diagonal`` (zeros
    elsewhere); a 2-d input gives its diagonal ``diagonal``.

    Args:
        input: a 1-d or 2-d tensor.
        diagonal: which diagonal: 0 the main one, > 0 above it, < 0 below it.
    """
    x = input
    k = check_int("diag", "diagonal", diagonal)
    if x.ndim == 2:
        return globals()["diagonal"](x, k)
    if x.ndim != 1:
        raise op_error(ValueError, "diag", f"needs a 1-d or 2-d tensor, got {x.ndim}-d", x)
    n = x.shape[0]
    require("diag", is_static(n), f"the length must be static, got {n}", x, kind=ValueError)
    size = n + abs(k)
    g = x.graph
    r, c = g.arange(size).reshape(size, 1), g.arange(size).reshape(1, size)
    # M[r, c] = x[r] on c - r = k >= 0 (x[c] for k < 0): x padded to ``size`` along that axis
    if k >= 0:
        vals = x.pad([0, k]).reshape(size, 1).expand(size, size)
    else:
        vals = x.pad([0, -k]).reshape(1, size).expand(size, size)
    return where(eq(sub(c, r), k), vals, g.constant(0, x.dtype))


@tensor_op("diagflat")
def diagflat(input: GraphTensor, offset: int = 0) -> GraphTensor:  # noqa: A002
    """torch.diagflat: the square matrix with the flattened ``input`` on diagonal ``offset``, zeros
    elsewhere (``diag`` of ``input.flatten()``: a 0-d input gives a ``1 + |offset|`` square matrix).

    Args:
        input: a tensor of any shape (its size must be static).
        offset: which diagonal: 0 the main one, > 0 above it, < 0 below it.
    """
    offset = check_int("diagflat", "offset", offset)
    return diag(input.reshape(-1) if input.ndim != 1 else input, offset)


@tensor_op("diag_embed")
def diag_embed(input: GraphTensor, offset: int = 0, dim1: int = -2, dim2: int = -1) -> GraphTensor:  # noqa: A002
    """torch.diag_embed: a tensor with one more dim whose 2-d planes over dims ``dim1``/``dim2`` (of
    the result) hold the last dim of ``input`` on diagonal ``offset``, zeros elsewhere (``diag`` of
    each row, for a batch). The last dim must be static.

    Args:
        input: the tensor (at least 1-d).
        offset: which diagonal: 0 the main one, > 0 above it, < 0 below it.
        dim1: the first dim of the planes, in the result (default -2).
        dim2: the second dim of the planes, in the result (default -1).
    """
    x = input
    k = check_int("diag_embed", "offset", offset)
    if x.ndim == 0:
        raise op_error(ValueError, "diag_embed", "needs at least 1 dim, got a 0-d tensor", x)
    a, b = x._axis(dim1, "diag_embed", x.ndim + 1), x._axis(dim2, "diag_embed", x.ndim + 1)
    if a == b:
        raise op_error(ValueError, "diag_embed", f"dim1 and dim2 are the same dim ({a})", x)
    n, lead = x.shape[-1], x.shape[:-1]
    require("diag_embed", is_static(n), f"the last dim must be static, got {n}", x, kind=ValueError)
    size = n + abs(k)
    g = x.graph
    r, c = g.arange(size).reshape(size, 1), g.arange(size).reshape(1, size)
    # as diag's: M[..., r, c] = x[..., r] on c - r = k >= 0 (x[..., c] for k < 0)
    vals = x.pad([0, abs(k)]).reshape(*lead, *((size, 1) if k >= 0 else (1, size))).expand(*lead, size, size)
    return movedim(where(eq(sub(c, r), k), vals, g.constant(0, x.dtype)), (-2, -1), (a, b))


@float32_under_autocast
@tensor_op("trace")
def trace(input: GraphTensor) -> GraphTensor:  # noqa: A002
    """torch.trace: the sum of the main diagonal of a 2-d tensor (int32 for integer inputs).

    Args:
        input: a 2-d tensor.
    """
    if input.ndim != 2:
        raise op_error(ValueError, "trace", f"needs a 2-d tensor, got {input.ndim}-d", input)
    return sum_(diagonal(input))


def meshgrid(*tensors, indexing: str = "ij") -> tuple[GraphTensor, ...]:
    """torch.meshgrid: coordinate grids from 1-d (or 0-d) tensors (broadcast views).

    Args:
        tensors: the tensors, all of one dtype (torch refuses a mix), or one sequence of them.
        indexing: ``"ij"`` (matrix: output dim i follows tensor i) or ``"xy"`` (Cartesian: the first
            two dims swapped).
    """
    if len(tensors) == 1 and isinstance(tensors[0], (tuple, list)):
        tensors = tuple(tensors[0])
    ts = _sequence("meshgrid", tensors)
    if indexing not in ("ij", "xy"):
        raise op_error(ValueError, "meshgrid", f"indexing must be 'ij' or 'xy', got {indexing!r}", *ts)
    for t in ts:
        if t.ndim > 1:
            raise op_error(ValueError, "meshgrid", f"expects 0-d or 1-d tensors, got {t.ndim}-d", t)
    if len({t.dtype for t in ts}) > 1:
        raise op_error(TypeError, "meshgrid", "expects tensors of one dtype (as torch's), got "
                       + ", ".join(t.dtype.name for t in ts), *ts)
    ts = [t.reshape(-1) if t.ndim == 0 else t for t in ts]
    swap = indexing == "xy" and len(ts) >= 2
    order = [ts[1], ts[0], *ts[2:]] if swap else ts
    shape = tuple(t.shape[0] for t in order)
    out = []
    for i, t in enumerate(ts):
        k = {0: 1, 1: 0}.get(i, i) if swap else i
        out.append(t.reshape(tuple(shape[j] if j == k else 1 for j in range(len(shape)))).expand(*shape))
    return tuple(out)


def pad_mode_dim(x, dim: int, lo: int, hi: int, mode: str, name: str = "pad"):
    """Dim ``dim`` of ``x`` padded by ``(lo, hi)`` (ints; negative crops) in ``mode``, with torch's rules.

    Output position ``p`` (from ``-lo`` to ``n + hi``) of 'reflect' and 'replicate' reads input
    ``|p|`` / ``0`` before the dim, ``p`` in it, ``2n - 2 - p`` / ``n - 1`` after it: the output is up
    to three runs of positions, each a slice of the input (reversed for reflect, a broadcast edge for
    replicate). 'circular' crops first, then wraps the kept ``m`` positions: ``[m - lo, m)`` before and
    ``[0, hi)`` after. A static dim is checked now; a symbolic one when the program runs, where the
    cropping must also stay within the dim (a crop reaching past the other edge into its padding, which
    torch allows for a static size, is refused)."""
    n = x.shape[dim]
    static = is_static(n)
    where = f"dim {dim} of size {n}"
    needs: list = []  # (expression >= 0 when the program runs, what it means)

    def bad(why=""):
        return op_error(ValueError, name, f"padding ({lo}, {hi}) is invalid for {where} in mode {mode!r}{why}", x)

    if mode == "circular":
        cut_lo, cut_hi, add_lo, add_hi = max(-lo, 0), max(-hi, 0), max(lo, 0), max(hi, 0)
        m = n - cut_lo - cut_hi  # the kept positions, wrapped around
        if static and max(lo, hi) > n:
            raise bad(": it would wrap around more than once")
        if static and m < 0:
            raise bad(": it crops more than the dim")
        if static and max(add_lo, add_hi) > m:
            raise bad(f": it wraps around the {m} positions the cropping keeps more than once")
        needs.append((m - max(add_lo, add_hi), f"padding ({lo}, {hi}) is invalid for {where} in mode 'circular': "
                      f"it must wrap around the {m} positions the cropping keeps at most once"))
        kept = x._slice_dim(dim, cut_lo, m, 1) if cut_lo or cut_hi else x
        runs = [kept._slice_dim(dim, m - add_lo, add_lo, 1)] if add_lo else []
        runs.append(kept)
        if add_hi:
            runs.append(kept._slice_dim(dim, 0, add_hi, 1))
    else:
        out = n + lo + hi
        if static and (n == 0 or (mode == "reflect" and max(lo, hi) >= n)):
            raise bad(" (each amount must be below the dim's size)" if mode == "reflect" else ": the dim is empty")
        if static and out < 1:
            raise bad(f": the output would have size {out}")
        if mode == "reflect" and max(lo, hi) > 0:
            needs.append((n - 1 - max(lo, hi), f"padding ({lo}, {hi}) is invalid for {where} in mode 'reflect' "
                          "(each amount must be below the dim's size)"))
        needs.append((out - 1, f"padding ({lo}, {hi}) of {where} in mode {mode!r} leaves {out} (< 1) positions"))
        if static:  # the runs are the position range's overlaps with before / in / after the dim
            before, inside = (-lo, min(0, n + hi)), (max(-lo, 0), min(n, n + hi))
            after = (max(n, -lo), n + hi)
        else:  # (where a crop reaching past the other edge ends depends on n: refused, below)
            before, inside, after = (-lo, 0), (max(-lo, 0), n + min(hi, 0)), (n, n + hi)
            needs.append((n + min(lo, 0) + min(hi, 0), f"padding ({lo}, {hi}) crops more than {where} in mode "
                          f"{mode!r} (with a symbolic size the cropping must stay within the dim)"))
        runs = []
        a, b = before
        if static and b > a or not static and lo > 0:  # positions a .. b-1 < 0
            runs.append(x._slice_dim(dim, 1 - b, b - a, 1).flip(dim) if mode == "reflect" else
                        _broadcast_dim(x._slice_dim(dim, 0, 1, 1), dim, b - a))
        a, b = inside
        if not static or b > a:
            runs.append(x._slice_dim(dim, a, b - a, 1) if (a, b) != (0, n) else x)
        a, b = after
        if static and b > a or not static and hi > 0:  # positions a .. b-1 >= n
            runs.append(x._slice_dim(dim, 2 * n - 1 - b, b - a, 1).flip(dim) if mode == "reflect" else
                        _broadcast_dim(x._slice_dim(dim, n - 1, 1, 1), dim, b - a))
    y = cat(runs, dim) if len(runs) > 1 else runs[0]
    for need, what in needs:
        if nonnegative(need):
            continue
        if is_static(need):  # (what the static checks above leave: an input of size 0)
            raise op_error(ValueError, name, what, x)
        if y.node is not x.node:  # a program computing the padded node checks it
            y.graph.node_requirements.setdefault(y.node.id, []).append(
                (need, f"{name}: {what} (at {at_line(user_frame())})"))
        else:  # a crop alone is a view of x: a program reading it checks it
            x._requires(need, y.shape[dim], name, what)
    return y


def _broadcast_dim(x, dim: int, k):
    """``x``, of size 1 in dim ``dim``, broadcast to size ``k`` there (a view)."""
    return x.expand(*x.shape[:dim], k, *x.shape[dim + 1:])
