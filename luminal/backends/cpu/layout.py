"""Physical layouts for matmul results: store a buffer in the axis order its readers walk it in.

A kernel graph buffer is logically contiguous, but nothing outside the program sees how a temp is
stored. A GEMM can write its result in any axis order for free (BLAS takes either a row- or
column-major output), while a reader that walks a buffer against its storage order is several
times slower (a weight gradient ``(in, out)`` read as ``(out, in)`` by the optimizer update).
So a matmul's output buffer is stored permuted when its readers prefer it, and every view over it is
remapped onto the permuted storage. Only views that stay inside the buffer's axes remap (each view
axis walks one logical axis); when any reader's view does not, the buffer keeps its logical layout.

Sizes, strides and offsets here are ints in elements (one binding of the symbolic dims).
"""

from __future__ import annotations

from luminal.backends.cpu.gemm import Strided
from luminal.core.view import contiguous_strides


def axis_walk(v: Strided, shape: tuple):
    """For each axis of ``v`` (over a contiguous buffer of ``shape``): ``(logical axis, step)``, or
    None for a stride-0 axis; None overall when some axis does not walk a single logical axis."""
    cs = contiguous_strides(shape)
    digits = _digits(v.offset, shape, cs)
    if digits is None:
        return None
    lo, hi = list(digits), list(digits)
    walk = []
    for n, s in zip(v.shape, v.strides):
        if s == 0 or n == 1:
            walk.append(None)
            continue
        a = next((a for a in range(len(shape)) if shape[a] > 1 and s % cs[a] == 0), None)
        if a is None:
            return None
        step = s // cs[a]
        lo[a] += min(0, (n - 1) * step)
        hi[a] += max(0, (n - 1) * step)
        walk.append((a, step))
    if any(lo[a] < 0 or hi[a] >= max(shape[a], 1) for a in range(len(shape))):
        return None  # some axis carries into the next: not a view of the axes themselves
    return walk


def remap(v: Strided, shape: tuple, perm: tuple) -> Strided | None:
    """``v`` (a view of a contiguous buffer of ``shape``) as a view of the same elements stored in
    axis order ``perm``, or None when it does not walk the axes one by one."""
    walk = axis_walk(v, shape)
    if walk is None:
        return None
    phys = physical_strides(shape, perm)
    offset = sum(d * phys[a] for a, d in enumerate(_digits(v.offset, shape, contiguous_strides(shape))))
    strides = tuple(0 if w is None else w[1] * phys[w[0]] for w in walk)
    return Strided(v.shape, strides, offset)


def physical_strides(shape: tuple, perm: tuple) -> tuple:
    """Element strides of each logical axis when the buffer is stored in axis order ``perm``."""
    inner = contiguous_strides(tuple(shape[a] for a in perm))
    out = [0] * len(shape)
    for a, s in zip(perm, inner):
        out[a] = s
    return tuple(out)


def preferred_order(views: list, shape: tuple) -> tuple | None:
    """The axis order the readers' ``views`` (``(view, times read)`` pairs) walk the buffer in
    (weighted by elements read), or None when the logical order is as good or some view does not
    remap."""
    votes: dict[tuple, int] = {}
    for v, times in views:
        walk = axis_walk(v, shape)
        if walk is None:
            return None
        order = []
        for w in walk:
            if w is not None and w[0] not in order:
                order.append(w[0])
        order += [a for a in range(len(shape)) if a not in order]
        n = times
        for d in v.shape:
            n *= d
        votes[tuple(order)] = votes.get(tuple(order), 0) + n
    if not votes:
        return None
    ident = tuple(range(len(shape)))
    best = max(votes, key=lambda o: (votes[o], o == ident))
    return None if best == ident or votes[best] <= votes.get(ident, 0) else best


def _digits(offset: int, shape: tuple, cs: tuple):
    if offset < 0:
        return None
    out = []
    for n, s in zip(shape, cs):
        out.append(offset // s if n > 1 else 0)
        offset -= out[-1] * s
    return out if offset == 0 else None
