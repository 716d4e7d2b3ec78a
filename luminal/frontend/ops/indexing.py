"""Indexing: ``__getitem__`` (views), gather / take_along_dim / index_select, scatter, one_hot."""

from __future__ import annotations

from luminal.core import dtype as dt
from luminal.core.errors import check_number, op_error
from luminal.core.symbolic import ceildiv, dmax, dmin, is_static, sym
from luminal.frontend.checks import check_tensors, tensor_op
from luminal.frontend.ops.core import cast, prim, require
from luminal.frontend.ops.elementwise import add, eq, gt, lt, where
from luminal.frontend.tensor import GraphTensor, scalar_as_1d


def _norm_slice(sl: slice, n, x, dim):
    """Python slice semantics -> (start, count, step); clamped for static sizes."""
    step = 1 if sl.step is None else sl.step
    if not isinstance(step, int) or step == 0:
        raise op_error(ValueError, "getitem", f"slice step must be a non-zero int, got {sl.step!r}", x)
    if is_static(n):
        start, stop, step = sl.indices(n)
        count = max(0, -(-(stop - start) // step)) if step > 0 else max(0, -(-(start - stop) // -step))
        return start, count, step

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


def getitem(x: GraphTensor, index) -> GraphTensor:
    if not isinstance(index, tuple):
        index = (index,)
    tensors = [i for i, ix in enumerate(index) if isinstance(ix, GraphTensor)]
    if len(tensors) > 1:
        raise op_error(NotImplementedError, "getitem", "only one tensor index per indexing is supported", x)
    n_real = sum(1 for ix in index if ix is not None and ix is not Ellipsis)
    if sum(ix is Ellipsis for ix in index) > 1:
        raise op_error(IndexError, "getitem", "an index can only have one ellipsis", x)
    if n_real > x.ndim:
        raise op_error(IndexError, "getitem", f"too many indices ({n_real}) for a {x.ndim}-d tensor", x)
    # identity tests only: ``in`` / ``.index`` would compare a tensor index with ``==`` (an op)
    ell = [k for k, ix in enumerate(index) if ix is Ellipsis]
    if ell:
        e = ell[0]
        index = index[:e] + (slice(None),) * (x.ndim - n_real) + index[e + 1:]
    else:
        index = index + (slice(None),) * (x.ndim - n_real)
    view, dim, out_shape, tensor_at = x.layout, 0, [], None
    for ix in index:
        if ix is None:
            out_shape.append(1)
            continue
        n = view.shape[dim]
        if isinstance(ix, GraphTensor):
            tensor_at = (len(out_shape), dim, ix)
            out_shape.append(n)
        elif isinstance(ix, slice):
            start, count, step = _norm_slice(ix, n, x, dim)
            view = view.slice(dim, start, count, step)
            out_shape.append(view.shape[dim])
        elif isinstance(ix, int) and not isinstance(ix, bool):
            if is_static(n) and not -n <= ix < n:
                raise op_error(IndexError, "getitem", f"index {ix} is out of range for dim {dim} of size {n}", x)
            view = view.slice(dim, n + ix if ix < 0 else ix, 1, 1)
        else:
            raise op_error(TypeError, "getitem", f"unsupported index {ix!r}", x)
        dim += 1
    t = x._with_view(view)
    t = t.reshape(tuple(out_shape))
    if tensor_at is not None:

        pos, _, idx = tensor_at
        _index("getitem", idx, input=x)
        idx = _wrap_negative(idx, t.shape[pos])
        flat = index_select(t, pos, idx.reshape(-1))
        t = flat.reshape(t.shape[:pos] + idx.shape + t.shape[pos + 1:])
    return t


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


def take_along_dim(x: GraphTensor, indices: GraphTensor, dim: int) -> GraphTensor:
    """torch.take_along_dim: like gather, with the other dims broadcast and negative indices
    counted from the end (torch's gather rejects them)."""
    indices = _index("take_along_dim", indices, input=x)
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
    return gather(xb, d, _wrap_negative(indices, x.shape[d]).expand(*shape))


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
    index = _index("index_select", index, input=x)
    d = x._axis(dim, "index_select")
    if index.ndim != 1:
        raise op_error(ValueError, "index_select", "index must be 1-d", index)
    shape = list(x.shape)
    shape[d] = index.shape[0]
    ix = index.reshape(tuple(index.shape[0] if k == d else 1 for k in range(x.ndim))).expand(*shape)
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
    if index.ndim != x.ndim or src.ndim != x.ndim:
        msg = "input, index and src must have the same number of dims"
        raise op_error(ValueError, "scatter_add", msg, x, index, src)
    for k in range(x.ndim):  # as torch: index.shape[k] <= x.shape[k] off ``dim``, and <= src.shape[k]
        if k != d and index.shape[k] != x.shape[k] and not (
                is_static(index.shape[k]) and is_static(x.shape[k]) and index.shape[k] <= x.shape[k]):
            raise op_error(ValueError, "scatter_add", f"index dim {k} ({index.shape[k]}) exceeds the input's "
                           f"({x.shape[k]})", x, index)
        if src.shape[k] != index.shape[k] and not (
                is_static(index.shape[k]) and is_static(src.shape[k]) and index.shape[k] <= src.shape[k]):
            raise op_error(ValueError, "scatter_add", f"index dim {k} ({index.shape[k]}) exceeds src's "
                           f"({src.shape[k]})", x, index, src)
    if src.shape != index.shape:
        src = src[tuple(slice(0, n) for n in index.shape)]
    if src.dtype is not x.dtype:
        src = cast(src, x.dtype)
    return prim("ScatterAdd", x, cast(index, dt.int32), src, arg=d, shape=x.shape)


@tensor_op("scatter")
@scalar_as_1d("scatter", tensors=("index", "src"))
def scatter(x: GraphTensor, dim: int, index: GraphTensor, src) -> GraphTensor:
    """torch.scatter (no reduction): positions named by ``index`` take ``src``; with duplicate
    indices the result is undefined, as in torch."""

    _index("scatter", index, input=x)
    zeros = x.graph.constant(0, x.dtype).expand(*x.shape)
    if not isinstance(src, GraphTensor):
        src = x.graph.constant(check_number("scatter", "src", src, x), x.dtype).expand(*index.shape)
    hits = scatter_add(x.graph.constant(0, dt.int32).expand(*x.shape), dim, index,
                       x.graph.constant(1, dt.int32).expand(*index.shape))
    return where(gt(hits, 0), scatter_add(zeros, dim, index, src), x)


def one_hot(index: GraphTensor, num_classes: int) -> GraphTensor:
    """torch.nn.functional.one_hot (int32 instead of int64)."""

    _index("one_hot", index)
    if num_classes is not None and (not isinstance(num_classes, int) or isinstance(num_classes, bool)):
        raise op_error(TypeError, "one_hot", f"num_classes must be an int, got {num_classes!r}", index)
    if num_classes is None or num_classes < 0:
        raise op_error(ValueError, "one_hot", "num_classes must be given (the data is not known at build time)", index)
    classes = index.graph.arange(num_classes)
    return cast(eq(index.unsqueeze(-1), classes), dt.int32)
