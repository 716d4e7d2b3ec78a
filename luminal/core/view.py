"""Views: how a consumer reads its input buffer.

A node's output is a contiguous buffer of the node's shape. A consumer reads it through a
:class:`View`: for an index ``i`` of ``view.shape`` the element read is
``buffer[offset + sum(i[k] * strides[k])]`` when ``mask[k][0] <= i[k] < mask[k][1]`` for every k,
and ``pad`` otherwise. Movement ops (permute, expand, slice, pad, flip, reshape, unfold) only build a
new View; no data moves until a consumer runs. A movement the View cannot express returns ``None``
and the caller inserts an explicit copy.
"""

from __future__ import annotations

from dataclasses import dataclass

from luminal.core.symbolic import Dim, ceildiv, dmax, dmin, exact_div, floordiv, is_static, prod


def contiguous_strides(shape) -> tuple:
    """Row-major strides: each dim's the product of the sizes after it. The first size is never
    multiplied in (with a symbolic batch dim that product would be a Sym made and dropped per call)."""
    n = len(shape)
    strides, acc = [1] * n, 1
    for i in range(n - 1, 0, -1):
        acc = acc * shape[i]
        strides[i - 1] = acc
    return tuple(strides)


@dataclass(frozen=True, eq=False, init=False)
class View:
    shape: tuple
    strides: tuple
    offset: Dim = 0
    mask: tuple | None = None  # per dim (lo, hi); None = every element valid
    pad: float = 0.0

    def __init__(self, shape: tuple, strides: tuple, offset: Dim = 0, mask: tuple | None = None, pad: float = 0.0):
        # (the dataclass's own __init__ sets each field of a frozen class by object.__setattr__: a third of
        # the cost of the Views made for every op built)
        d = self.__dict__
        d["shape"], d["strides"], d["offset"], d["mask"], d["pad"] = shape, strides, offset, mask, pad

    # Equality (used by the graph's hash-consing) tells -0.0 from 0.0 pads, and NaN pads equal.
    def _key(self):  # cached, as the hash: the graph compares the views of every op it adds
        k = self.__dict__.get("_k")
        if k is None:
            k = (self.shape, self.strides, self.offset, self.mask, _pad_key(self.pad))
            object.__setattr__(self, "_k", k)
        return k

    def __eq__(self, other):
        return self is other or (isinstance(other, View) and self._key() == other._key())

    def __hash__(self):  # cached: the graph hashes every operand's view of every op it adds
        h = self.__dict__.get("_hash")
        if h is None:
            h = hash(self._key())
            object.__setattr__(self, "_hash", h)
        return h

    def __getstate__(self):  # (a copy in another process hashes its Syms' names anew)
        return {k: v for k, v in self.__dict__.items() if k not in _CACHED}

    @staticmethod
    def contiguous(shape) -> View:
        return View(tuple(shape), contiguous_strides(shape))

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def is_contiguous(self) -> bool:
        """True when the view reads the whole buffer in order (so it is the identity)."""
        if self.mask is not None or self.offset != 0:
            return False
        strides = contiguous_strides(self.shape)
        return self.strides == strides or all(s == c or d == 1 for d, s, c in zip(self.shape, self.strides, strides))

    def _with(self, shape, strides, offset, mask):
        if mask is not None and all(lo == 0 and hi == d for (lo, hi), d in zip(mask, shape)):
            mask = None
        return View(tuple(shape), tuple(strides), offset, None if mask is None else tuple(mask),
                    self.pad if mask is not None else 0.0)

    def _mask(self):
        return self.mask if self.mask is not None else tuple((0, d) for d in self.shape)

    # movement -------------------------------------------------------------------------------
    def permute(self, order) -> View:
        m = self._mask()
        return self._with([self.shape[i] for i in order], [self.strides[i] for i in order],
                          self.offset, [m[i] for i in order])

    def expand(self, shape) -> View:
        """Broadcast size-1 dims to ``shape`` (stride 0). Other dims must already match."""
        m = self._mask()
        strides, mask = [], []
        for d, s, (lo, hi), n in zip(self.shape, self.strides, m, shape):
            if d == n:
                strides.append(s)
                mask.append((lo, hi))
            else:  # d == 1
                strides.append(0)
                mask.append((0, n) if self.mask is None or (lo == 0 and hi == 1) else (0, 0))
        return self._with(shape, strides, self.offset, mask)

    def slice(self, dim: int, start: Dim, count: Dim, step: int) -> View:
        """Take ``count`` elements of ``dim`` starting at ``start`` with ``step`` (may be negative)."""
        shape, strides, m = list(self.shape), list(self.strides), list(self._mask())
        s = strides[dim]
        offset = self.offset + start * s
        lo, hi = m[dim]
        if self.mask is None:
            nlo, nhi = 0, count
        elif step > 0:  # lo <= start + j*step < hi
            nlo = dmin(count, dmax(0, ceildiv(lo - start, step)))
            nhi = dmax(nlo, dmin(count, ceildiv(hi - start, step)))
        else:  # lo <= start - j*|step| < hi
            a = -step
            nlo = dmin(count, dmax(0, floordiv(start - hi, a) + 1))
            nhi = dmax(nlo, dmin(count, floordiv(start - lo, a) + 1))
        shape[dim], strides[dim], m[dim] = count, s * step, (nlo, nhi)
        return self._with(shape, strides, offset, m)

    def flip(self, dim: int) -> View:
        n = self.shape[dim]
        return self.slice(dim, n - 1, n, -1)

    def pad_dim(self, dim: int, before: Dim, after: Dim, value) -> View | None:
        """Grow ``dim`` by non-negative ``before``/``after`` elements reading ``value``."""
        if self.mask is not None and not _same_value(self.pad, value):
            return None  # one view has one pad value
        shape, m = list(self.shape), list(self._mask())
        lo, hi = m[dim]
        shape[dim] = shape[dim] + before + after
        m[dim] = (lo + before, hi + before)
        v = self._with(shape, self.strides, self.offset - before * self.strides[dim], m)
        return View(v.shape, v.strides, v.offset, v.mask, value) if v.mask is not None else v

    def unfold(self, dim: int, size: int, step: int) -> View | None:
        """torch ``Tensor.unfold``: windows of ``size`` every ``step`` along ``dim``, as a new last dim.

        Window ``w``, element ``j`` reads position ``w*step + j`` of ``dim``. When ``dim`` is masked
        (padded) to ``[lo, hi)``, the valid (w, j) are those with ``lo <= w*step + j < hi``: a band,
        which one box per dim expresses only when every window that reaches the valid part sees the
        same j-range of it (e.g. windows that do not overlap and pads that are whole windows).
        Otherwise (e.g. pad, then overlapping windows: the first window starts in the pad, the last
        ends in it) this returns None and the caller copies the padded tensor first."""
        n, s = self.shape[dim], self.strides[dim]
        count = floordiv(n - size, step) + 1
        shape = list(self.shape) + [size]
        strides = list(self.strides) + [s]
        shape[dim], strides[dim] = count, s * step
        m = list(self._mask()) + [(0, size)]
        m[dim] = (0, count)
        if self.mask is not None and self.mask[dim] != (0, n):
            box = _window_box(self.mask[dim], count, size, step)
            if box is None:
                return None
            m[dim], m[-1] = box
        return self._with(shape, strides, self.offset, m)

    def reshape(self, new_shape) -> View | None:
        """Reinterpret the view with ``new_shape`` (same element count) without moving data, or None."""
        new_shape = tuple(new_shape)
        if self.is_contiguous() or (self.mask is None and self.offset != 0 and
                                    View(self.shape, self.strides).is_contiguous()):
            return View(new_shape, contiguous_strides(new_shape), self.offset)
        if any(is_static(d) and d == 0 for d in self.shape):
            return View.contiguous(new_shape)
        m = self._mask()
        old = [(d, s, mk) for d, s, mk in zip(self.shape, self.strides, m) if not (is_static(d) and d == 1)]
        if any(mk != (0, 1) for d, s, mk in zip(self.shape, self.strides, m) if is_static(d) and d == 1):
            return None  # a masked-out size-1 dim would be lost
        new = [i for i, d in enumerate(new_shape) if not (is_static(d) and d == 1)]
        strides: list = [0] * len(new_shape)
        mask: list = [(0, d) for d in new_shape]
        oi = ni = 0
        while ni < len(new) or oi < len(old):
            if ni >= len(new) or oi >= len(old):
                return None
            og, ng = [oi], [new[ni]]
            po, pn = old[oi][0], new_shape[new[ni]]
            oi, ni = oi + 1, ni + 1
            while po != pn:
                grow_new = _grows_new(po, pn)
                if grow_new is None:
                    return None
                if grow_new:
                    if ni >= len(new):
                        return None
                    ng.append(new[ni])
                    pn = pn * new_shape[new[ni]]
                    ni += 1
                else:
                    if oi >= len(old):
                        return None
                    og.append(oi)
                    po = po * old[oi][0]
                    oi += 1
            group = [old[k] for k in og]
            if any(mk != (0, d) for d, _, mk in group) and not (len(og) == 1 and len(ng) == 1):
                return None
            if any(a[1] != b[1] * b[0] for a, b in zip(group, group[1:])):
                return None  # not mergeable: the dims are not laid out one after another
            acc = group[-1][1]
            for j in reversed(ng):
                strides[j] = acc
                acc = acc * new_shape[j]
            if len(og) == 1 and len(ng) == 1:
                mask[ng[0]] = group[0][2]
        return self._with(new_shape, strides, self.offset, mask)


_CACHED = ("_k", "_hash")  # attributes a View computes once and keeps (never pickled)


def _window_box(mask, count, size, step):
    """For windows ``w < count`` of ``size`` every ``step`` over a dim valid on ``[lo, hi)``: the box
    ``((w_lo, w_hi), (j_lo, j_hi))`` of valid (w, j) when the valid set is one, else None."""
    lo, hi = mask
    if not all(is_static(v) for v in (lo, hi, count)):
        return None
    w0 = max(0, -((size - 1 - lo) // step))  # first window reaching lo: w*step + size - 1 >= lo
    w1 = min(count, -(-hi // step)) - 1  # last window starting before hi: w*step < hi
    if w0 > w1 or lo >= hi:
        return (0, 0), (0, 0)

    def rows(w):  # the valid j of window w
        return max(0, lo - w * step), min(size, hi - w * step)
    # both ends of the j-range only move down as w grows: equal at the first and last window, equal throughout
    if rows(w0) != rows(w1):
        return None
    return (w0, w1 + 1), rows(w0)


def _grows_new(po: Dim, pn: Dim) -> bool | None:
    """While matching reshape groups: extend the new side (True) or the old side (False)."""
    if is_static(po) and is_static(pn):
        return po > pn
    if exact_div(po, pn) is not None:
        return True
    if exact_div(pn, po) is not None:
        return False
    return None


def _pad_key(v):
    """A pad value as a key: NaN equals NaN, -0.0 differs from 0.0, and True/1/1.0 stay apart."""
    if isinstance(v, float):
        return ("f", "nan" if v != v else repr(v))
    return (type(v).__name__, v)


def _same_value(a, b) -> bool:
    return _pad_key(a) == _pad_key(b)


def numel(shape) -> Dim:
    return prod(shape)
