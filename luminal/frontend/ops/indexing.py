"""Indexing: ``__getitem__`` (views, advanced indices) and ``__setitem__``, gather / take_along_dim /
index_select / take, scatter / scatter_add / scatter_reduce, index_add / index_copy / index_put /
index_fill / index_reduce, put, masked_scatter, one_hot."""

from __future__ import annotations

import itertools
import math

import numpy as np

from luminal.core import dtype as dt
from luminal.core.errors import check_number, op_error, renamed, user_frame
from luminal.core.errors import where as at_line
from luminal.core.symbolic import Sym, ceildiv, dmax, dmin, is_static, shape_str, sym
from luminal.frontend.checks import check_tensors, tensor_op
from luminal.frontend.ops.combine import cat
from luminal.frontend.ops.core import broadcast_shapes, cast, check_fill, prim, require
from luminal.frontend.ops.elementwise import (
    add,
    div,
    eq,
    ge,
    gt,
    int_div_nonzero,
    logical_or,
    lt,
    maximum,
    mul,
    where,
)
from luminal.frontend.ops.reduce import amax, amin, cumsum, prod_
from luminal.frontend.ops.reduce import sum as sum_
from luminal.frontend.ops.value_checks import guard, range_check
from luminal.frontend.tensor import GraphTensor, scalar_as_1d


def _norm_slice(sl: slice, n, x, dim, op: str = "getitem"):
    """Python slice semantics -> (start, count, step); clamped for static sizes.

    A bound may be symbolic (``x[:, :T]``, ``x[:T - 1]``). A symbolic bound past the end of the dim
    would be clamped by Python, giving ``min(16, T)`` elements of a 16-long dim, a size no other shape
    of the program has; so it is taken as is (``T`` elements) and required to lie within the dim when
    the program runs (``GraphTensor._requires``: ``16 - T >= 0``, checked before any work), as a
    torch model asserts ``T <= block_size`` before slicing its mask."""
    step = 1 if sl.step is None else sl.step
    if not isinstance(step, int) or step == 0:
        raise op_error(ValueError, op, f"slice step must be a non-zero int, got {sl.step!r}", x)
    for v in (sl.start, sl.stop):
        if not (v is None or isinstance(v, (int, Sym, str)) or hasattr(v, "__index__")):
            raise op_error(TypeError, op, f"slice bounds must be ints or symbolic sizes, got {type(v).__name__} "
                           f"{v!r}", x)
    symbolic = isinstance(sl.start, (Sym, str)) or isinstance(sl.stop, (Sym, str))
    if is_static(n) and not symbolic:
        start, stop, step = sl.indices(n)
        count = max(0, -(-(stop - start) // step)) if step > 0 else max(0, -(-(start - stop) // -step))
        return start, count, step
    start, count, step = _symbolic_slice(sl, n, step)
    far = sl.stop if step > 0 else sl.start  # the bound on the end side: Python would clamp it to the dim
    if isinstance(far, (Sym, str)):
        need = n - sym(far) if step > 0 else n - 1 - sym(far)
        x._requires(need, count, op, f"slice [{_slice_str(sl)}] of dim {dim} (size {n}) of a "
                    f"{shape_str(x.shape)} {x.dtype.name} tensor reads past the dim's end")
    return start, count, step


def _slice_str(sl: slice) -> str:
    parts = ["" if v is None else str(v) for v in (sl.start, sl.stop)]
    return ":".join(parts) + ("" if sl.step is None else f":{sl.step}")


def _symbolic_slice(sl: slice, n, step):
    """(start, count, step) of ``sl`` over a dim of size ``n`` when the dim or a bound is symbolic."""
    def bound(v, default):
        if v is None:
            return default
        v = sym(v)
        return n + v if is_static(v) and v < 0 else v

    def static(v, neg):
        return v is not None and isinstance(v, int) and (v < 0) == neg

    # Python clamps out-of-range bounds. Only the clamps the final max(0, count) does not already
    # cover are spelled out, so that common slices keep simple shapes (x[1:] and x[:-1] are both
    # max(0, B-1)); and the max(0, count) is left out where the bounds cannot cross (a dim is never
    # negative), so that x[:], x[::2] and x[::-1] keep B and (B+1)//2, not max(0, B).
    first = sl.start is None or (isinstance(sl.start, int) and sl.start == 0)
    if step > 0:
        start, stop = bound(sl.start, 0), bound(sl.stop, n)
        if static(sl.start, True):
            start = dmax(0, start)  # x[-3:] of a 2-long dim starts at 0
        if static(sl.stop, False):
            stop = dmin(stop, n)
        # start 0 with stop in [0, n], or stop n with start in [0, n]
        ordered = (first and (sl.stop is None or static(sl.stop, False))) or \
            (sl.stop is None and (first or static(sl.start, True)))
        count = ceildiv(stop - start, step)
        return start, count if ordered else dmax(0, count), step
    start, stop = bound(sl.start, n - 1), bound(sl.stop, -1) if sl.stop is not None else -1
    if static(sl.start, False):
        start = dmin(start, n - 1)  # x[3::-1] of a 2-long dim starts at its last element
    if static(sl.stop, True):
        stop = dmax(-1, stop)  # x[:-3:-1] of a 1-long dim stops before element 0
    # start n-1 with stop in [-1, n-1], or stop -1 with start in [-1, n-1]
    ordered = (sl.start is None and (sl.stop is None or static(sl.stop, True))) or \
        (sl.stop is None and (sl.start is None or static(sl.start, False)))
    count = ceildiv(start - stop, -step)
    return start, count if ordered else dmax(0, count), step


def _constant_array(t: GraphTensor):
    """The values of ``t`` when it is a literal array constant read whole (known at build time), else None."""
    node = t.node
    if node.op != "Constant" or getattr(node.arg, "scalar", 1) is not None or not t.layout.is_contiguous():
        return None
    arr = t.graph.constants.get(node.arg)
    return None if arr is None or arr.shape != t.shape else arr


class _NewDim:
    """A bool scalar in an index (``x[True]``, ``x[False]``, a 0-d mask): as torch's and numpy's, a new
    dim of size 1 taken by the advanced index ``[0]`` (True) or ``[]`` (False), which broadcasts with
    the other advanced indices of the index (``x[True, i]`` is ``x[i]``, ``x[False]`` is empty)."""

    def __init__(self, x: GraphTensor, keep: bool):
        self.index = x.graph.constant(np.zeros(1 if keep else 0, np.int64), dt.int32)


def _as_index(x: GraphTensor, ix, op: str):
    """One entry of an index: Python lists and numpy arrays become int32 constants (bools: a mask,
    kept as a numpy array, a bool scalar a 0-d one); a boolean tensor is a mask only when its values
    are known now."""
    if isinstance(ix, (bool, np.bool_)):
        return np.array(bool(ix))
    if isinstance(ix, (np.integer,)):
        return int(ix)
    if isinstance(ix, (list, np.ndarray)):
        arr = np.asarray(ix)
        if arr.dtype.kind == "b":
            return arr
        if arr.ndim == 0 and arr.dtype.kind in "iu":
            return int(arr)
        if arr.size == 0 and arr.dtype.kind == "f":
            arr = arr.astype(np.int32)
        if arr.dtype.kind not in "iu":
            raise op_error(TypeError, op, f"index lists must hold ints or bools, got {arr.dtype}", x)
        return x.graph.constant(arr.astype(np.int64), dt.int32)
    if isinstance(ix, GraphTensor) and ix.dtype.kind == "b":
        arr = _constant_array(ix)
        if arr is None:
            raise op_error(IndexError, op, f"a boolean mask tensor {shape_str(ix.shape)} selects a number of "
                           "elements known only at run time; use where / masked_fill, or assign "
                           "(x[mask] = v), whose shape is static", x, ix)
        return arr.astype(bool)
    return ix


def _normalize_index(x: GraphTensor, index, op: str) -> list:
    """``index`` as one entry per input dim (plus the Nones): ellipsis expanded, lists and constant
    masks converted (a k-d mask becomes k int32 index tensors, its nonzero positions; a 0-d one, a
    ``_NewDim``)."""
    if not isinstance(index, tuple):
        index = (index,)
    index = [_as_index(x, ix, op) for ix in index]
    # identity tests only: ``in`` / ``.index`` would compare a tensor index with ``==`` (an op)
    if sum(ix is Ellipsis for ix in index) > 1:
        raise op_error(IndexError, op, "an index can only have one ellipsis", x)
    used = sum(ix.ndim if isinstance(ix, np.ndarray) else 1 for ix in index if ix is not None and ix is not Ellipsis)
    if used > x.ndim:
        raise op_error(IndexError, op, f"too many indices ({used}) for a {x.ndim}-d tensor", x)
    ell = [k for k, ix in enumerate(index) if ix is Ellipsis]
    fill = [slice(None)] * (x.ndim - used)
    index = index[:ell[0]] + fill + index[ell[0] + 1:] if ell else index + fill
    out, dim = [], 0
    for ix in index:
        if isinstance(ix, np.ndarray) and ix.ndim == 0:
            out.append(_NewDim(x, bool(ix)))
        elif isinstance(ix, np.ndarray):  # a static boolean mask over the next ix.ndim dims
            covered = x.shape[dim:dim + ix.ndim]
            if tuple(covered) != ix.shape:
                raise op_error(IndexError, op, f"mask of shape {ix.shape} does not match dims {dim}.. of size "
                               f"{shape_str(covered)}", x)
            out.extend(x.graph.constant(nz.astype(np.int64), dt.int32) for nz in np.nonzero(ix))
            dim += ix.ndim
        else:
            out.append(ix)
            dim += ix is not None
    return out


def getitem(x: GraphTensor, index) -> GraphTensor:
    """``x[index]`` with torch's semantics: ints, slices, None, Ellipsis (views), and advanced indices:
    integer tensors, Python lists and numpy arrays of ints, and boolean masks whose values are known
    at build time (lists, numpy arrays, constants; a bool scalar: ``_NewDim``). Several index tensors
    broadcast together; the result's indexed dims stand where the first of them stood when they are
    adjacent, else first (as torch, which takes ints as plain selections, not as advanced indices)."""
    index = _normalize_index(x, index, "getitem")
    view, dim, out_shape, adv, needs = x.layout, 0, [], [], []
    for ix in index:
        if ix is None or isinstance(ix, _NewDim):
            if ix is not None:
                adv.append((len(out_shape), ix.index))
            out_shape.append(1)
            continue
        n = view.shape[dim]
        if isinstance(ix, GraphTensor):
            _index("getitem", ix, input=x)
            adv.append((len(out_shape), ix))
            out_shape.append(n)
        elif isinstance(ix, slice):
            start, count, step = _norm_slice(ix, n, x, dim)
            view = view.slice(dim, start, count, step)
            out_shape.append(view.shape[dim])
        elif isinstance(ix, int) and not isinstance(ix, bool):
            need = _int_index(x, ix, dim, n, "getitem")
            if need is not None:
                needs.append(need)
            view = view.slice(dim, n + ix if ix < 0 else ix, 1, 1)
        else:
            raise op_error(TypeError, "getitem", f"unsupported index {ix!r}", x)
        dim += 1
    t = x._with_view(view).reshape(tuple(out_shape))
    if needs:  # (see _checked_copy)
        t = _checked_copy(t, needs, "getitem")
    return _advanced(t, adv) if adv else t


def _checked_copy(t: GraphTensor, needs: list, op: str) -> GraphTensor:
    """``t``, a view made by an int index into a symbolic dim, copied to a node of its own that carries
    the index's requirements (``graph.node_requirements``: checked per binding before any work, by the
    programs that read this node only). The view alone could not carry them: ``x[:-1][2]`` and
    ``x[::2][1]`` are the same view of ``x``'s buffer, valid for different sizes (B >= 4 and B >= 3), and a
    program reading ``x`` through another view must not be refused for an index it never reads. So the
    copy is a node of its own for each distinct list of requirements: a Copy whose arg (``"index"``,
    ``"index 1"``, ...) keeps it apart from other copies of the view; the compiler takes it as any Copy."""
    g, reqs = t.graph, [(need, f"{op}: {message}", IndexError) for need, message in needs]
    for k in itertools.count():  # (arg "index k": apart from a user's copy of the view, and from each other)
        made = len(g.nodes)
        out = g.tensor(g.add("Copy", (t,), "index" if k == 0 else f"index {k}", t.dtype, t.shape))
        if len(g.nodes) > made:
            g.node_requirements[out.node.id] = reqs
            return out
        if g.node_requirements[out.node.id] == reqs:
            return out  # (the same index, made at the same line)
    raise AssertionError("unreachable")


def _int_index(x: GraphTensor, ix: int, dim: int, n, op: str) -> tuple | None:
    """An int index ``ix`` of dim ``dim`` (size ``n``): out of range now, an error; into a symbolic dim,
    (the expression that must be >= 0 when the program runs, the message if it is not)."""
    if is_static(n):
        if not -n <= ix < n:
            raise op_error(IndexError, op, f"index {ix} is out of range for dim {dim} of size {n}", x)
        return None
    need = n + ix if ix < 0 else n - ix - 1
    return need, (f"index {ix} is out of range for dim {dim} of size {n} of a {shape_str(x.shape)} tensor "
                  f"(made at {at_line(user_frame())})")


def _size(g, n):
    return n if is_static(n) else g.constant(n)


def _advanced(t: GraphTensor, adv) -> GraphTensor:
    """``t`` indexed at dims ``adv`` ((dim, int tensor) pairs) by the broadcast index tensors: the
    indexed dims are moved first and merged, the indices combined into one linear index, one Gather."""
    positions = [p for p, _ in adv]
    idxs = [cast(_wrap_negative(i, t.shape[p]), dt.int32) for p, i in adv]
    bshape = broadcast_shapes("getitem", *idxs)
    rest = [k for k in range(t.ndim) if k not in positions]
    sizes = [t.shape[p] for p in positions]
    lin, stride = None, 1
    for i in reversed(range(len(idxs))):
        term = idxs[i] if is_static(stride) and stride == 1 else mul(idxs[i], _size(t.graph, stride))
        lin = term if lin is None else add(lin, term)
        stride = stride * sizes[i]
    if len(idxs) > 1:  # one index out of its dim could land inside another row: x[0, 5] of a (3, 4) read x[1, 1]
        bad = None
        for i, n in zip(idxs, sizes):
            out = logical_or(lt(i, 0), ge(i, _size(t.graph, n)))
            bad = out if bad is None else logical_or(bad, out)
        lin = where(bad, -1, lin)  # (the gather's own check then fails, and the report finds which index)
    rest_shape = tuple(t.shape[k] for k in rest)
    flat = t.permute(*positions, *rest).reshape(stride, *rest_shape)
    lin = lin.expand(*bshape) if lin.shape != bshape else lin
    with renamed("getitem"):
        picked = index_select(flat, 0, lin.reshape(-1))
    _given_by(picked, [(i, t.shape[p], True, p) for p, i in adv])
    r = picked.reshape(*bshape, *rest_shape)
    p = positions[0]
    if positions == list(range(p, p + len(positions))) and p > 0:
        nb = len(bshape)
        r = r.permute(*range(nb, nb + p), *range(nb), *range(nb + p, r.ndim))
    return r


def _positions(x: GraphTensor, index, op: str) -> GraphTensor:
    """The flat positions in ``x`` that ``x[index]`` reads, in the shape of ``x[index]``."""
    pos = x.graph.arange(x.numel()).reshape(x.shape)
    with renamed(op):
        return getitem(pos, index)


def _runtime_mask(x: GraphTensor, index):
    """(the dim it starts at, the mask) when ``index`` is one boolean mask tensor whose values are
    known only at run time, among whole-dim slices and an ellipsis (``x[mask]``, ``x[:, mask]``,
    ``x[..., mask]``); else None."""
    if not isinstance(index, tuple):
        index = (index,)
    at = [k for k, ix in enumerate(index)
          if isinstance(ix, GraphTensor) and ix.dtype.kind == "b" and _constant_array(ix) is None]
    if len(at) != 1:
        return None
    k = at[0]
    if not all(ix is Ellipsis or (isinstance(ix, slice) and ix == slice(None)) for ix in index[:k] + index[k + 1:]):
        return None
    mask = index[k]
    if any(ix is Ellipsis for ix in index[:k]):
        return x.ndim - mask.ndim - sum(ix is not Ellipsis for ix in index[k + 1:]), mask
    return k, mask


def _basic_region(x: GraphTensor, index, needs: list):
    """For an index of ints, None, Ellipsis and step-1 slices: ((start, count) per dim of x, the
    shape of x[index]); else None. ``needs`` gets the conditions (``_int_index``) of its ints into
    symbolic dims."""
    if not isinstance(index, tuple):
        index = (index,)
    if not all(ix is None or ix is Ellipsis or (isinstance(ix, int) and not isinstance(ix, bool))
               or (isinstance(ix, slice) and ix.step in (None, 1)) for ix in index):
        return None
    index = _normalize_index(x, index, "setitem")
    region, dim = [], 0
    for ix in index:
        if ix is None:
            continue
        n = x.shape[dim]
        if isinstance(ix, slice):
            start, count, _ = _norm_slice(ix, n, x, dim)
        else:
            need = _int_index(x, ix, dim, n, "setitem")
            if need is not None:
                needs.append(need)
            start, count = (n + ix if ix < 0 else ix), 1
        region.append((start, count))
        dim += 1
    return region


def _in_dtype_of(op: str, x: GraphTensor, src: GraphTensor, what: str) -> GraphTensor:
    """``src``, the values an index op writes into ``x``, in ``x``'s dtype. torch's index_put, index_add,
    scatter & co. need the two dtypes equal; luminal casts, as its other ops promote, but refuses a
    ``src`` of a higher kind (bool < int < float: floats into an int tensor, ints into a bool one), whose
    cast would silently drop fractions or magnitudes, as luminal's in-place ops refuse such a result."""
    if dt.kind_rank(src.dtype) > dt.kind_rank(x.dtype):
        raise op_error(TypeError, op, f"{what} is {src.dtype.name} and the input {x.dtype.name}: cast to the "
                       f"input's dtype it would lose values (torch needs the same dtype); cast it first "
                       f"({what}.to(lm.{x.dtype.name}))", x, src)
    return cast(src, x.dtype) if src.dtype is not x.dtype else src


def _value(x: GraphTensor, value, op: str) -> GraphTensor:
    if isinstance(value, GraphTensor):
        check_tensors(op, input=x, values=value)
        if op != "setitem":  # (x[i] = v casts v, as torch's; index_put and put refuse as torch's)
            return _in_dtype_of(op, x, value, "values")
        return cast(value, x.dtype)
    if isinstance(value, (list, np.ndarray)):
        return x.graph.constant(np.asarray(value), x.dtype)
    return x.graph.constant(check_number(op, "value", value, x), x.dtype)


def _assign(x: GraphTensor, index, value, accumulate: bool, op: str) -> GraphTensor:
    """A new tensor: ``x`` with ``x[index]`` set to (or, accumulating, increased by) ``value``."""
    v = _value(x, value, op)
    found = _runtime_mask(x, index)
    if found is not None:  # x[mask] = v: v broadcasts to (*lead, count, *rest), count known at run time
        lead, mask = found
        k = mask.ndim
        if lead < 0 or mask.shape != x.shape[lead:lead + k]:
            raise op_error(IndexError, op, f"mask {shape_str(mask.shape)} does not match dims {lead}.. of "
                           f"{shape_str(x.shape)}", x, mask)
        rest = x.ndim - lead - k
        if v.ndim > rest:  # its dim facing the selected count must be 1: it stands for every mask dim
            c = v.ndim - rest - 1
            if not (is_static(v.shape[c]) and v.shape[c] == 1):
                raise op_error(ValueError, op, f"value {shape_str(v.shape)} must broadcast to every selected "
                               f"element (the number selected is known only at run time)", x, v)
            v = v.reshape(v.shape[:c] + (1,) * k + v.shape[c + 1:])
        m = mask.reshape((1,) * lead + mask.shape + (1,) * rest)
        if accumulate:
            return add(x, where(m, v, x.graph.constant(0, x.dtype)))
        return where(m, v, x)
    needs: list = []
    region = None if accumulate else _basic_region(x, index, needs)
    if region is not None:  # a box: pad the value and a mask into place (views), one where
        target = getitem(x, index).shape
        v = v.expand(*broadcast_shapes(op, v, shapes=[v.shape, target])) if v.shape != target else v
        if v.shape != target:
            raise op_error(ValueError, op, f"value {shape_str(v.shape)} cannot broadcast to the indexed "
                           f"{shape_str(target)}", x, v)
        box = tuple(c for _, c in region)
        pads = [a for (s, c), n in zip(reversed(region), reversed(x.shape)) for a in (s, n - s - c)]
        vals = v.reshape(box).pad(pads, 0)
        m = x.graph.constant(True).reshape((1,) * len(box)).expand(*box).pad(pads, False) if box else \
            x.graph.constant(True)
        out = where(m, vals, x)
        for need, message in needs:  # (a write past the dim would pad by a negative amount: nothing, silently)
            x.graph.node_requirements.setdefault(out.node.id, []).append((need, f"{op}: {message}", IndexError))
        return out
    pos = _positions(x, index, op)
    if broadcast_shapes(op, v, pos, shapes=[v.shape, pos.shape]) != pos.shape:
        raise op_error(ValueError, op, f"value {shape_str(v.shape)} cannot broadcast to the indexed "
                       f"{shape_str(pos.shape)}", x, v)
    pf = pos.reshape(-1)
    vf = v.expand(*pos.shape).reshape(-1)
    flat = x.reshape(-1)
    out = scatter_add(flat, 0, pf, vf) if accumulate else _overwrite(flat, 0, pf, vf)
    return out.reshape(x.shape)


def _overwrite(x: GraphTensor, d: int, index: GraphTensor, src: GraphTensor) -> GraphTensor:
    """``x`` with ``src`` written at ``index`` along ``d`` (``src`` cut to ``index``'s shape, as torch's
    scatter). Positions written more than once take the mean of their values (torch leaves the pick
    unspecified): so writing one value through a repeated index (``x[[0, 0]] = 1``) writes exactly
    it, where a sum would double it. The gradient is torch's (``Graph.custom_vjp``): each written
    value gets the whole adjoint of its position, duplicates too (the mean's would be 1/k of it), and
    ``x`` the adjoint of the positions not written."""
    g = x.graph
    if src.shape != index.shape:
        src = src[tuple(slice(0, n) for n in index.shape)]
    hits = scatter_add(g.constant(0, dt.int32).expand(*x.shape), d, index,
                       g.constant(1, dt.int32).expand(*index.shape))
    written = gt(hits, 0)
    total = scatter_add(g.constant(0, x.dtype).expand(*x.shape), d, index, src)
    if x.dtype.kind == "f":
        total = div(total, cast(maximum(hits, 1), x.dtype))
    elif x.dtype.kind == "i":
        total = int_div_nonzero(total, maximum(hits, 1))
    out = where(written, total, x)
    if not x.dtype.is_float:
        return out

    def rule(y, a, x_, src_):
        return [where(written, g.constant(0, a.dtype), a), cast(gather(a, d, index), src_.dtype)]

    return g.custom_vjp(out, [x, src], rule)


def setitem(x: GraphTensor, index, value) -> None:
    """``x[index] = value``. A GraphTensor is a lazy handle, not storage: the assignment builds the
    new value (``index_put`` semantics, or ``masked_fill``'s for a boolean mask tensor) and rebinds
    the handle ``x`` to it. Other handles are not changed: a view taken before (``y = x[0]``) keeps
    the old values, and ``x`` no longer names an input it was (gradients with respect to the old
    value need a handle kept before). ``value`` is cast to ``x``'s dtype; a position named twice
    by the index gets the mean of its values (torch leaves the pick unspecified)."""
    new = _assign(x, index, value, False, "setitem")
    x.node, x.layout = new.node, new.layout


@tensor_op("index_put")
def index_put(input: GraphTensor, indices, values, accumulate: bool = False) -> GraphTensor:  # noqa: A002
    """torch.index_put: ``input`` with ``input[indices]`` set to ``values`` (out of place).

    Args:
        input: the tensor.
        indices: a tuple of index tensors (integer, or a boolean mask), one per leading dim; None
            entries take the whole dim.
        values: a tensor (or number) broadcast to the shape of ``input[indices]``.
        accumulate: add ``values`` instead of writing them (duplicate positions add up).
    """
    if not isinstance(indices, (tuple, list)):
        raise op_error(TypeError, "index_put", f"indices must be a tuple of tensors, got {type(indices).__name__}",
                       input)
    index = tuple(slice(None) if i is None else i for i in indices)
    return _assign(input, index, values, accumulate, "index_put")


def _along(op: str, x: GraphTensor, dim: int, index: GraphTensor, source: GraphTensor):
    """(dim, index expanded to ``source``'s shape) for index_add / index_copy."""
    _index(op, index, input=x)
    check_tensors(op, input=x, source=source)
    d = x._axis(dim, op)
    if index.ndim > 1:
        raise op_error(ValueError, op, f"index must be 0-d or 1-d, got {index.ndim}-d", index)
    if x.ndim == 0:
        x, source = x.reshape(1), source.reshape(1) if source.ndim == 0 else source
    index = index.reshape(-1)
    if source.ndim == 0:
        source = source.reshape(1)
    want = x.shape[:d] + index.shape + x.shape[d + 1:]
    if source.shape != want:
        raise op_error(ValueError, op, f"source must have shape {shape_str(want)} (index {shape_str(index.shape)} "
                       f"along dim {d}), got {shape_str(source.shape)}", x, index, source)
    ix = index.reshape(tuple(index.shape[0] if k == d else 1 for k in range(x.ndim))).expand(*want)
    return x, d, ix, _in_dtype_of(op, x, source, "source")


@tensor_op("index_add")
def index_add(input: GraphTensor, dim: int, index: GraphTensor, source: GraphTensor, *, alpha=1) -> GraphTensor:  # noqa: A002
    """torch.index_add: ``out = input``; ``out[..., index[i], ...] += alpha * source[..., i, ...]``.

    Args:
        input: the tensor.
        dim: the dim ``index`` indexes.
        index: a 1-d integer tensor, one entry per element of ``source`` along ``dim``.
        source: the values, shaped as ``input`` except ``len(index)`` along ``dim``.
        alpha: the scale of ``source``.
    """
    x, d, ix, src = _along("index_add", input, dim, index, source)
    alpha = check_number("index_add", "alpha", alpha, input)
    if not x.dtype.is_float:  # torch converts alpha to the input's dtype: an int tensor's 1.5 is 1
        alpha = bool(alpha) if x.dtype.kind == "b" else int(alpha)
    if alpha != 1:
        src = mul(src, alpha)
    return scatter_add(x, d, ix, src).reshape(input.shape)


@tensor_op("index_copy")
def index_copy(input: GraphTensor, dim: int, index: GraphTensor, source: GraphTensor) -> GraphTensor:  # noqa: A002
    """torch.index_copy: ``input`` with ``out[..., index[i], ...] = source[..., i, ...]`` (a position
    named twice gets the mean of its values; torch leaves it unspecified).

    Args:
        input: the tensor.
        dim: the dim ``index`` indexes.
        index: a 1-d integer tensor, one entry per element of ``source`` along ``dim``.
        source: the values, shaped as ``input`` except ``len(index)`` along ``dim``.
    """
    x, d, ix, src = _along("index_copy", input, dim, index, source)
    return _overwrite(x, d, ix, src).reshape(input.shape)


_REDUCES = ("sum", "prod", "mean", "amax", "amin")


@tensor_op("scatter_reduce")
def scatter_reduce(input: GraphTensor, dim: int, index: GraphTensor, src: GraphTensor, reduce: str, *,  # noqa: A002
                   include_self: bool = True) -> GraphTensor:
    """torch.scatter_reduce: ``input`` with each ``src[i]`` reduced into position
    ``i with i[dim] := index[i]``.

    Args:
        input: the tensor.
        dim: the dim ``index`` indexes.
        index: an integer tensor with ``input``'s number of dims (sizes at most ``input``'s off
            ``dim``, and at most ``src``'s).
        src: the values.
        reduce: ``"sum"``, ``"prod"``, ``"mean"``, ``"amax"`` or ``"amin"``.
        include_self: whether ``input``'s own values take part at the positions written to
            (positions nothing is scattered to keep ``input``'s value either way).

    ``sum`` and ``mean`` are ScatterAdds; ``prod``, ``amax`` and ``amin`` compare every index with
    every position along ``dim`` (a dense ``(n, len)`` one-hot per row), so they suit moderate sizes.
    """
    x = input
    if reduce not in _REDUCES:
        raise op_error(ValueError, "scatter_reduce", f"reduce must be one of {_REDUCES}, got {reduce!r}", x)
    _index("scatter_reduce", index, input=x)
    check_tensors("scatter_reduce", input=x, src=src)
    if x.ndim == 0:
        return scatter_reduce(x.reshape(1), 0, index.reshape(1), src.reshape(1), reduce,
                              include_self=include_self).reshape(())
    d = x._axis(dim, "scatter_reduce")
    src = _in_dtype_of("scatter_reduce", x, src, "src")
    _scatter_shapes("scatter_reduce", x, d, index, src)  # (the dense reductions below would fail unclearly)
    if reduce == "mean" and x.dtype.kind == "b":
        raise op_error(TypeError, "scatter_reduce", "reduce='mean' is not defined for bool tensors (as torch's); "
                       "cast the input and src to a number dtype first", x)
    g = x.graph
    zero, one = g.constant(0, x.dtype), g.constant(1, x.dtype)
    ones_i = g.constant(1, dt.int32).expand(*index.shape)
    hits = scatter_add(g.constant(0, dt.int32).expand(*x.shape), d, index, ones_i)
    hit = gt(hits, 0)
    if reduce in ("sum", "mean"):
        base = x if include_self else where(hit, zero, x)
        total = scatter_add(base, d, index, src)
        if reduce == "sum":
            return total
        count = add(hits, 1) if include_self else hits
        count = where(hit, count, 1)
        if x.dtype.is_float:
            return where(hit, div(total, cast(count, x.dtype)), x)
        return where(hit, int_div_nonzero(total, count), x)
    # dense: positions (n) x index entries (m) along dim
    if not is_static(x.shape[d]):
        raise op_error(ValueError, "scatter_reduce", f"reduce={reduce!r} needs a static dim {d}, got {x.shape[d]}", x)
    n = x.shape[d]
    if src.shape != index.shape:
        src = src[tuple(slice(0, k) for k in index.shape)]
    ishape = index.shape
    cells = ishape[:d] + (n,) + ishape[d:]
    pos = g.arange(n).reshape((1,) * d + (n, 1) + (1,) * (x.ndim - d - 1))
    onehot = eq(cast(_wrap_negative(index, n), dt.int32).unsqueeze(d), pos)
    vals = src.unsqueeze(d).expand(*cells)
    if reduce == "prod":
        red = prod_(where(onehot, vals, one), d + 1, dtype=x.dtype)  # (bool: all of them, not an int32 count)
    else:
        big = _extreme(x.dtype, reduce == "amin")
        red = where(onehot, vals, g.constant(big, x.dtype))
        if include_self:  # x's own value is one more candidate of the same reduction, so that a tie between it
            # and src values shares the gradient evenly among all of them, as torch's (a maximum of x and the
            # src's max halved it twice)
            mine = x[tuple(slice(None) if k == d else slice(0, ishape[k]) for k in range(x.ndim))]
            red = cat([red, mine.unsqueeze(d + 1)], d + 1)
        red = amax(red, d + 1) if reduce == "amax" else amin(red, d + 1)
    off = [(k, x.shape[k] - ishape[k]) for k in range(x.ndim) if k != d and x.shape[k] != ishape[k]]
    if off:
        pads = [0] * (2 * x.ndim)
        for k, extra in off:
            pads[2 * (x.ndim - 1 - k) + 1] = extra
        red = red.pad(pads, 1 if reduce == "prod" else 0)
    if include_self and reduce == "prod":
        red = mul(red, x)
    return where(hit, red, x)


@tensor_op("index_reduce")
def index_reduce(input: GraphTensor, dim: int, index: GraphTensor, source: GraphTensor, reduce: str, *,  # noqa: A002
                 include_self: bool = True) -> GraphTensor:
    """torch.index_reduce: ``source[..., i, ...]`` reduced into ``out[..., index[i], ...]``
    (``scatter_reduce`` with ``index`` along ``dim`` of every row).

    Args:
        input: the tensor.
        dim: the dim ``index`` indexes.
        index: a 1-d integer tensor, one entry per element of ``source`` along ``dim``.
        source: the values, shaped as ``input`` except ``len(index)`` along ``dim``.
        reduce: ``"prod"``, ``"mean"``, ``"amax"`` or ``"amin"`` (torch's; ``index_add`` sums).
        include_self: whether ``input``'s own values take part at the positions written to.
    """
    if reduce not in _REDUCES[1:]:
        raise op_error(ValueError, "index_reduce", f"reduce must be one of {_REDUCES[1:]}, got {reduce!r}", input)
    x, d, ix, src = _along("index_reduce", input, dim, index, source)
    return scatter_reduce(x, d, ix, src, reduce, include_self=include_self).reshape(input.shape)


@tensor_op("index_fill")
def index_fill(input: GraphTensor, dim: int, index: GraphTensor, value) -> GraphTensor:  # noqa: A002
    """torch.index_fill: ``input`` with the positions ``index`` along ``dim`` (negative ones count from
    the end, as torch's) set to ``value``, in ``input``'s dtype. A 0-d tensor ``value`` receives the
    gradient of the filled positions, each counted once however often ``index`` names it (torch's).

    Args:
        input: the tensor.
        dim: the dim ``index`` indexes.
        index: a 0-d or 1-d integer tensor.
        value: a number or a 0-d tensor.
    """
    x = input
    _index("index_fill", index, input=x)
    d = x._axis(dim, "index_fill")
    if index.ndim > 1:
        raise op_error(ValueError, "index_fill", f"index must be 0-d or 1-d, got {index.ndim}-d", x, index)
    if isinstance(value, GraphTensor):
        check_tensors("index_fill", input=x, value=value)
        if value.ndim != 0:
            raise op_error(ValueError, "index_fill", f"value must be a number or a 0-d tensor, got shape "
                           f"{shape_str(value.shape)}", x, value)
        v = cast(value, x.dtype)
    else:
        check_fill("index_fill", check_number("index_fill", "value", value, x), x.dtype, x)
        v = x.graph.constant(value, x.dtype)
    n = x.shape[d] if x.ndim else 1
    g = x.graph
    index = index.reshape(-1)
    hits = scatter_add(g.constant(0, dt.int32).expand(n), 0, cast(_wrap_negative(index, n), dt.int32),
                       g.constant(1, dt.int32).expand(*index.shape))
    _given_by(hits, [(index, n, True, d)])
    hit = gt(hits, 0).reshape(tuple(n if k == d else 1 for k in range(x.ndim)))
    return where(hit, v, x)


@tensor_op("take")
def take(input: GraphTensor, index: GraphTensor) -> GraphTensor:  # noqa: A002
    """torch.take: ``input`` read as 1-d (row-major) at ``index``, in ``index``'s shape; negative
    indices count from the end.

    Args:
        input: the tensor.
        index: an integer tensor of flat positions.
    """
    _index("take", index, input=input)
    return getitem(input.reshape(-1), index)


@tensor_op("put")
def put(input: GraphTensor, index: GraphTensor, source: GraphTensor, accumulate: bool = False) -> GraphTensor:  # noqa: A002
    """torch.Tensor.put: ``input`` read as 1-d (row-major) with ``source``'s elements written at the flat
    positions ``index`` (negative ones count from the end), or added to them (``accumulate``).
    Without ``accumulate``, a position named twice gets the mean of its values (torch leaves the pick
    unspecified), as ``index_put``.

    Args:
        input: the tensor.
        index: an integer tensor of flat positions.
        source: the values, as many as ``index`` has (any shape).
        accumulate: add the values instead of writing them.
    """
    _index("put", index, input=input)
    check_tensors("put", input=input, source=source)
    if is_static(index.numel()) and is_static(source.numel()) and index.numel() != source.numel():
        raise op_error(ValueError, "put", f"source and index must have the same number of elements, got "
                       f"{source.numel()} and {index.numel()}", input, index, source)
    source = _in_dtype_of("put", input, source, "source")
    flat = index_put(input.reshape(-1), (index.reshape(-1),), source.reshape(-1), accumulate)
    return flat.reshape(input.shape)


@tensor_op("masked_scatter")
def masked_scatter(input: GraphTensor, mask: GraphTensor, source: GraphTensor) -> GraphTensor:  # noqa: A002
    """torch.masked_scatter: ``input`` and ``mask`` broadcast together; the positions where ``mask`` is
    True take ``source``'s elements in row-major order, the k-th True position ``source.reshape(-1)[k]``.

    The shape is static (that of the broadcast), so the number of True positions may be known only at
    run time: ``source`` must have at least that many elements, checked before the program runs
    (``Graph.guard``). Gradients: each used element of ``source`` gets its position's, the others zero.

    Args:
        input: the tensor.
        mask: a bool tensor.
        source: the values (any shape), in ``input``'s dtype.
    """
    x = input
    check_tensors("masked_scatter", mask=mask, source=source)
    require("masked_scatter", mask.dtype.kind == "b", f"mask must be a bool tensor, got {mask.dtype.name}", x, mask)
    shape = broadcast_shapes("masked_scatter", x, mask)
    m = mask.expand(*shape).reshape(-1)
    g = x.graph
    rank = cumsum(cast(m, dt.int32), 0)  # the k-th True position: k + 1
    count, have = sum_(cast(m, dt.int32)), source.numel()
    g.guard(gt(count, _size(g, have)), count, IndexError,
            str(op_error(IndexError, "masked_scatter", f"the mask selects {{value}} elements, source has only {have}",
                         x, mask, source)), of=rank)
    # source after one leading element that the False positions read (so an empty source is read only
    # where the mask selects something)
    vals = cat([g.constant(0, x.dtype).reshape(1), _in_dtype_of("masked_scatter", x, source, "source").reshape(-1)], 0)
    with renamed("masked_scatter"):
        picked = index_select(vals, 0, where(m, rank, 0))
    return where(m, picked, x.expand(*shape).reshape(-1)).reshape(shape)


def _extreme(d, lowest_first: bool):
    """The value no element exceeds (``lowest_first``: none is below) in dtype ``d``."""
    if d.is_float:
        return math.inf if lowest_first else -math.inf
    if d.kind == "b":
        return lowest_first
    return 2**31 - 1 if lowest_first else -2**31


def _given_by(out: GraphTensor, indices) -> None:
    """Record that the Gather or ScatterAdd ``out`` reads an index made from the user's ``indices``
    ((index tensor, size of the dim it indexes, whether negatives count from the end, the dim)), so
    that an index out of range is reported as the user's value (``Graph.index_ops``)."""
    g = out.graph
    made, origin, *_ = g.index_ops[out.node.id]
    g.index_ops[out.node.id] = (made, origin, [((i.node, i.layout), n, wraps, dim) for i, n, wraps, dim in indices])


def _wrap_negative(idx: GraphTensor, n) -> GraphTensor:
    """Indices into a dim of size ``n`` with -1 meaning the last, as torch's ``x[idx]`` and
    ``take_along_dim`` read them: ``idx + n`` where ``idx < 0``, as graph ops (the values are known
    only at run time). The primitives (Gather, ScatterAdd) take only ``[0, n)``, as torch's gather."""
    return where(lt(idx, 0), add(idx, n if is_static(n) else idx.graph.constant(n)), idx)


def _index(op: str, idx: GraphTensor, **inputs) -> GraphTensor:
    """``idx`` must be an integer tensor, of the graph of ``inputs`` (checked here: the Gather or
    ScatterAdd primitive would report two graphs under its own name)."""
    check_tensors(op, **inputs, index=idx)
    require(op, idx.dtype.kind == "i", f"index must be an integer tensor, got {idx.dtype.name}", idx)
    return idx


@scalar_as_1d("gather", tensors=("index",), result=lambda out, args: out.reshape(args["index"].shape))
def gather(x: GraphTensor, dim: int, index: GraphTensor) -> GraphTensor:
    """torch.gather: ``out[i] = x[i with i[dim] := index[i]]``; index.shape[d] <= x.shape[d] off ``dim``."""
    index = _index("gather", index, input=x)
    d = x._axis(dim, "gather")
    if index.ndim != x.ndim:
        raise op_error(ValueError, "gather", f"index must have {x.ndim} dims like the input", x, index)
    src = x
    for k in range(x.ndim):
        if k != d and index.shape[k] != x.shape[k]:
            if not (is_static(index.shape[k]) and is_static(x.shape[k]) and index.shape[k] <= x.shape[k]):
                msg = f"index dim {k} ({index.shape[k]}) exceeds the input's ({x.shape[k]})"
                raise op_error(ValueError, "gather", msg, x, index)
            src = src._slice_dim(k, 0, index.shape[k], 1)
    return prim("Gather", src, cast(index, dt.int32), arg=d, shape=index.shape)


def take_along_dim(x: GraphTensor, indices: GraphTensor, dim: int | None = None) -> GraphTensor:
    """torch.take_along_dim: like gather, with the other dims broadcast and negative indices
    counted from the end (torch's gather rejects them).

    Args:
        x: the tensor.
        indices: an integer tensor.
        dim: the dim to take along; None: both ``x`` and ``indices`` are flattened first.
    """
    indices = _index("take_along_dim", indices, input=x)
    if dim is None:
        return take_along_dim(x.reshape(-1), indices.reshape(-1), 0)
    d = x._axis(dim, "take_along_dim")
    if indices.ndim != x.ndim:
        raise op_error(ValueError, "take_along_dim", "input and indices must have the same number of dims", x, indices)
    shape = []
    for k in range(x.ndim):
        a, b = x.shape[k], indices.shape[k]
        if k != d and a != b and not (is_static(a) and a == 1) and not (is_static(b) and b == 1):
            raise op_error(ValueError, "take_along_dim", f"dim {k} cannot broadcast ({a} vs {b})", x, indices)
        shape.append(b if k == d or (is_static(a) and a == 1) else a)
    xb = x.expand(*[x.shape[k] if k == d else shape[k] for k in range(x.ndim)])
    with renamed("take_along_dim"):
        out = gather(xb, d, _wrap_negative(indices, x.shape[d]).expand(*shape))
    _given_by(out, [(indices, x.shape[d], True, d)])
    return out


def _index_select_0d(out: GraphTensor, args) -> GraphTensor:
    """index_select of a 0-d input is 0-d, and takes exactly one index (torch's rule)."""
    if args["x"].ndim:
        return out
    if out.shape != (1,):
        raise op_error(ValueError, "index_select", f"a 0-d input takes one index, got {out.shape[0]}",
                       args["x"], args["index"])
    return out.reshape(())


@scalar_as_1d("index_select", tensors=("index",), result=_index_select_0d)
def index_select(x: GraphTensor, dim: int, index: GraphTensor) -> GraphTensor:
    """torch.index_select: the entries of ``x`` at ``index`` along ``dim`` (a Gather).

    Args:
        x: the input tensor.
        dim: the dim indexed.
        index: a 1-d integer tensor of positions along ``dim``.
    """
    index = _index("index_select", index, input=x)
    d = x._axis(dim, "index_select")
    if index.ndim != 1:
        raise op_error(ValueError, "index_select", "index must be 1-d", index)
    shape = list(x.shape)
    shape[d] = index.shape[0]
    ix = index.reshape(tuple(index.shape[0] if k == d else 1 for k in range(x.ndim))).expand(*shape)
    with renamed("index_select"):
        return prim("Gather", x, cast(ix, dt.int32), arg=d, shape=tuple(shape))


@scalar_as_1d("scatter_add", tensors=("index", "src"))
def scatter_add(x: GraphTensor, dim: int, index: GraphTensor, src: GraphTensor) -> GraphTensor:
    """torch.scatter_add: ``out = x``; ``out[i with i[dim] := index[i]] += src[i]``."""
    index = _index("scatter_add", index, input=x)
    d = x._axis(dim, "scatter_add")
    if isinstance(src, GraphTensor):
        check_tensors("scatter_add", input=x, src=src)
    else:
        src = x.graph.constant(check_number("scatter_add", "src", src, x), x.dtype).expand(*index.shape)
    _scatter_shapes("scatter_add", x, d, index, src)
    if src.shape != index.shape:
        src = src[tuple(slice(0, n) for n in index.shape)]
    src = _in_dtype_of("scatter_add", x, src, "src")
    return prim("ScatterAdd", x, cast(index, dt.int32), src, arg=d, shape=x.shape)


def _scatter_shapes(op: str, x: GraphTensor, d: int, index: GraphTensor, src: GraphTensor) -> None:
    """torch's shape rule of the scatters: ``input``, ``index`` and ``src`` have the same number of
    dims, and ``index.shape[k]`` is at most ``src.shape[k]``, and at most ``input.shape[k]`` off ``d``."""
    if index.ndim != x.ndim or src.ndim != x.ndim:
        raise op_error(ValueError, op, f"input, index and src must have the same number of dims, got "
                       f"{x.ndim}, {index.ndim} and {src.ndim}", x, index, src)
    for k in range(x.ndim):
        if k != d and index.shape[k] != x.shape[k] and not (
                is_static(index.shape[k]) and is_static(x.shape[k]) and index.shape[k] <= x.shape[k]):
            raise op_error(ValueError, op, f"index dim {k} ({index.shape[k]}) exceeds the input's "
                           f"({x.shape[k]})", x, index)
        if src.shape[k] != index.shape[k] and not (
                is_static(index.shape[k]) and is_static(src.shape[k]) and index.shape[k] <= src.shape[k]):
            raise op_error(ValueError, op, f"index dim {k} ({index.shape[k]}) exceeds src's "
                           f"({src.shape[k]})", x, index, src)


@tensor_op("scatter")
@scalar_as_1d("scatter", tensors=("index", "src"))
def scatter(x: GraphTensor, dim: int, index: GraphTensor, src) -> GraphTensor:
    """torch.scatter (no reduction): positions named by ``index`` take ``src``; a position named more
    than once takes the mean of its values (torch leaves the pick unspecified; one value written
    through a repeated index is written exactly, where a sum doubled it: ``_overwrite``)."""

    index = _index("scatter", index, input=x)
    d = x._axis(dim, "scatter")
    if not isinstance(src, GraphTensor):
        src = x.graph.constant(check_number("scatter", "src", src, x), x.dtype).expand(*index.shape)
    check_tensors("scatter", input=x, src=src)
    _scatter_shapes("scatter", x, d, index, src)
    return _overwrite(x, d, index, _in_dtype_of("scatter", x, src, "src"))


def one_hot(index: GraphTensor, num_classes: int) -> GraphTensor:
    """torch.nn.functional.one_hot (int32 instead of int64); a class out of ``[0, num_classes)`` is an
    IndexError, as torch's (now where the indices are known, else when a program computing the result
    is called)."""

    _index("one_hot", index)
    if num_classes is not None and (not isinstance(num_classes, int) or isinstance(num_classes, bool)):
        raise op_error(TypeError, "one_hot", f"num_classes must be an int, got {num_classes!r}", index)
    if num_classes is None or num_classes < 0:
        raise op_error(ValueError, "one_hot", "num_classes must be given (the data is not known at build time)", index)
    check = range_check("one_hot", index, num_classes,
                        lambda v: f"class {v} is out of range for {num_classes} classes", (index,))
    classes = index.graph.arange(num_classes)
    out = cast(eq(index.unsqueeze(-1), classes), dt.int32)
    guard(check, out)  # (a comparison: an out-of-range class would be a silent row of zeros)
    return out
