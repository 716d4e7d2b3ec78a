"""The gradient of a view: send a gradient read through a :class:`View` back onto the buffer.

A consumer reads buffer element ``offset + sum(i[k] * strides[k])`` at view index ``i`` (when ``i`` is
inside the mask). The adjoint of that read gives every buffer element the sum of the gradient over
the view indices that read it. It is built from movement ops and reductions, undoing the view step
by step:

* masked (padded) positions read a constant: slice the gradient to the valid box (pad <-> slice);
* stride-0 dims (expand) read one element many times: sum them (expand <-> sum);
* negative strides (flip): flip the gradient;
* what remains is a strided box of the buffer: order dims by stride (permute <-> inverse permute),
  pad each dim out to the buffer's extent and reshape (reshape <-> reshape, slice <-> pad);
* windows that overlap (unfold, convolutions) are split along the smaller of two overlapping dims
  (the window, not the batch) into boxes that do not, and the pieces summed;
* anything else (symbolic strides that cannot be proven apart) falls back to a ScatterAdd over the
  flat indices the view reads, which is always right, only slower.
"""

from __future__ import annotations

from luminal.core import dtype as dt
from luminal.core.symbolic import exact_div, floordiv, is_static, mod, prod
from luminal.core.view import View
from luminal.frontend.ops import cast
from luminal.frontend.ops.core import prim
from luminal.frontend.tensor import GraphTensor

_MAX_SPLIT = 64  # split an overlapping dim into at most this many boxes before scattering instead


def view_grad(g: GraphTensor, view: View, buf_shape) -> GraphTensor:
    """``g`` has ``view.shape``; return the gradient for the buffer (shape ``buf_shape``)."""
    buf_shape = tuple(buf_shape)
    if view.is_contiguous() and prod(view.shape) == prod(buf_shape):
        return g if tuple(view.shape) == buf_shape else g.reshape(buf_shape)
    if view.mask is not None:
        # only the valid box reads the buffer; the rest read the pad value
        lo_hi = view.mask
        for k, (lo, hi) in enumerate(lo_hi):
            if not (is_static(lo) and lo == 0 and hi == view.shape[k]):
                g = g._slice_dim(k, lo, hi - lo, 1)
        offset = view.offset + sum((lo * s for (lo, _), s in zip(lo_hi, view.strides)), 0)
        view = View(tuple(hi - lo for lo, hi in lo_hi), view.strides, offset)
        if any(is_static(n) and n <= 0 for n in view.shape):
            return g.graph.zeros(buf_shape, g.dtype)
    if any(is_static(n) and n == 0 for n in view.shape):
        return g.graph.zeros(buf_shape, g.dtype)
    # expand: every index along a stride-0 dim reads the same element
    summed = tuple(k for k, (n, s) in enumerate(zip(view.shape, view.strides))
                   if is_static(s) and s == 0 and not (is_static(n) and n == 1))
    if summed:
        g = g.sum(summed, keepdim=True)
    keep = [k for k, (n, s) in enumerate(zip(view.shape, view.strides))
            if k not in summed and not (is_static(n) and n == 1)]
    g = g.reshape(tuple(view.shape[k] for k in keep))
    shape, strides, offset = [view.shape[k] for k in keep], [view.strides[k] for k in keep], view.offset
    # flip: a negative stride walks backwards from the far end
    for k, s in enumerate(strides):
        if _sign(s) < 0:
            g = g.flip(k)
            offset = offset + (shape[k] - 1) * s
            strides[k] = -s
    return _place(g, shape, strides, offset, buf_shape)


def _place(g, shape, strides, offset, buf_shape) -> GraphTensor:
    """Scatter ``g`` (unmasked, non-negative strides) into a zero buffer of ``buf_shape``."""
    order = _by_stride(strides)
    if order is not None:
        if order != list(range(len(order))):
            g = g.permute(order)
            shape, strides = [shape[k] for k in order], [strides[k] for k in order]
        box = _box(shape, strides, offset, prod(buf_shape))
        if box is not None:
            return _pad_box(g, box, buf_shape)
        split = _split_dim(shape, strides)
        if split is not None:
            total = None
            for i in range(shape[split]):
                piece = _place(_select(g, split, i), shape[:split] + shape[split + 1:],
                               strides[:split] + strides[split + 1:], offset + i * strides[split], buf_shape)
                total = piece if total is None else total + piece
            return total
    return _scatter(g, shape, strides, offset, buf_shape)


def _sign(d) -> int:
    """+1 / -1 when ``d`` (a stride) is provably positive / negative for dims >= 1, else 0."""
    if is_static(d):
        return (d > 0) - (d < 0)
    coeffs = [c for _, c in d.terms]
    if not all(a.kind == "var" for m, _ in d.terms for a in m):
        return 0
    return 1 if all(c > 0 for c in coeffs) else -1 if all(c < 0 for c in coeffs) else 0


def _geq(a, b) -> bool | None:
    """a >= b for positive strides: numerically when static; when symbolic, when one is a multiple
    of the other by a provably positive factor."""
    if is_static(a) and is_static(b):
        return a >= b
    q = exact_div(a, b)
    if q is not None and _sign(q) > 0 and (not is_static(q) or q >= 1):
        return True
    q = exact_div(b, a)
    if q is not None and _sign(q) > 0 and (not is_static(q) or q >= 1):
        return False
    return None


def _by_stride(strides) -> list[int] | None:
    """Dims ordered by decreasing stride (stable), or None when symbolic strides cannot be ordered."""
    order = list(range(len(strides)))
    for i in range(1, len(order)):  # insertion sort with a partial comparison
        j = i
        while j > 0:
            ge = _geq(strides[order[j - 1]], strides[order[j]])
            if ge is None:
                return None
            if ge:
                break
            order[j - 1], order[j] = order[j], order[j - 1]
            j -= 1
    return order


def _box(shape, strides, offset, numel):
    """Describe the read positions as a box of the buffer viewed as ``(D0, D1, ..., Dm, T)`` where
    ``D_k = strides[k-1] / strides[k]`` and ``T = strides[-1]``: returns per-dim (start, size, extent),
    or None when the dims overlap or the divisions are not exact."""
    if not shape:
        return [(offset, 1, numel)]
    dims = []
    t = strides[-1]
    rest = offset
    # trailing dim of extent T (elements between consecutive reads of the innermost dim)
    trail_start = mod(rest, t) if not (is_static(t) and t == 1) else 0
    for k in range(len(shape) - 1, 0, -1):
        d = exact_div(strides[k - 1], strides[k])
        if d is None:
            return None
        start = mod(floordiv(offset, strides[k]), d)
        if not _fits(start, shape[k], d):
            return None
        dims.append((start, shape[k], d))
    top = exact_div(numel, strides[0])
    start0 = floordiv(offset, strides[0])
    if top is None:
        if not (is_static(numel) and is_static(strides[0])):
            return None
        top = -(-numel // strides[0])
    dims.append((start0, shape[0], top))
    dims.reverse()
    dims.append((trail_start, 1, t))
    return dims


def _fits(start, n, extent) -> bool:
    room = extent - start - n
    return is_static(room) and room >= 0


def _pad_box(g, box, buf_shape) -> GraphTensor:
    g = g.reshape(tuple(n for _, n, _ in box))
    pads = []
    for start, n, extent in reversed(box):  # F.pad order: last dim first
        pads += [start, extent - start - n]
    flat = g.pad(pads).reshape(-1)
    numel = prod(buf_shape)
    size = flat.shape[0]
    if size != numel:
        flat = flat._slice_dim(0, 0, numel, 1)
    return flat.reshape(buf_shape)


def _split_dim(shape, strides) -> int | None:
    """The dim to split a view that is not one box into pieces along: the smallest static one of a
    pair of neighbours (by stride) that do not nest (overlapping windows: split the window, not the
    batch); when all pairs nest (the box only fails on where it starts), the smallest static one."""
    clash = set()
    for k in range(1, len(shape)):
        a, b, n = strides[k - 1], strides[k], shape[k]
        if not (is_static(a) and is_static(b) and is_static(n) and a % b == 0 and a >= n * b):
            clash |= {k - 1, k}
    static = [(n, k) for k, n in enumerate(shape) if is_static(n) and 1 < n <= _MAX_SPLIT]
    if clash:
        static = [c for c in static if c[1] in clash]
    return min(static)[1] if static else None


def _select(g, k, i) -> GraphTensor:
    return g._slice_dim(k, i, 1, 1).reshape(tuple(n for j, n in enumerate(g.shape) if j != k))


def _scatter(g, shape, strides, offset, buf_shape) -> GraphTensor:
    """The general adjoint: add ``g`` at the flat positions the view reads."""
    graph = g.graph
    idx = graph.constant(offset) if not is_static(offset) else graph.constant(int(offset), dt.int32)
    idx = idx.reshape((1,) * len(shape)) if shape else idx
    for k, (n, s) in enumerate(zip(shape, strides)):
        ar = graph.arange(n)
        term = ar * (graph.constant(s) if not is_static(s) else int(s))
        idx = idx + term.reshape(tuple(n if j == k else 1 for j in range(len(shape))))
    flat_idx = cast(idx.expand(*shape), dt.int32).reshape(-1) if shape else idx.reshape(1)
    flat_g = g.reshape(-1) if shape else g.reshape(1)
    zeros = graph.zeros((prod(buf_shape),), g.dtype)
    out = prim("ScatterAdd", zeros, flat_idx.contiguous(), flat_g, arg=0, shape=zeros.shape)
    return out.reshape(buf_shape)
