"""Physical layouts for matmul results: store a buffer in the axis order its readers walk it in.

A kernel graph buffer is logically contiguous, but nothing outside the program sees how a temp is
stored. A GEMM can write its result in any axis order for free (BLAS takes either a row- or
column-major output), while a reader that walks a buffer against its storage order is several
times slower (a weight gradient ``(in, out)`` read as ``(out, in)`` by the optimizer update).
So a matmul's output buffer is stored permuted when its readers prefer it, and every view over it is
remapped onto the permuted storage. Only views that stay inside the buffer's axes remap (each view
axis walks one logical axis, or a run of them kept together); when any reader's view does not, the
buffer keeps its logical layout.

A GEMM's own operands and result are stored permuted too where that makes them one matrix per batch
(``walk_order``): a convolution's im2col buffer ``(B, C*kh*kw, H*W)`` stored as ``(C*kh*kw, B, H*W)``
lets the forward product be one GEMM with ``N = B*H*W`` instead of B small ones.

Sizes, strides and offsets here are ints in elements (one binding of the symbolic dims).
"""

from __future__ import annotations

import functools
from itertools import product

from luminal.backends.cpu.gemm import Strided, classify, plan_gemm
from luminal.core.view import contiguous_strides


def axis_walk(v: Strided, shape: tuple):
    """For each axis of ``v`` (over a contiguous buffer of ``shape``): ``(run, step)``, or None for a
    stride-0 axis. ``run`` is the logical axes the view axis walks: one axis (any ``step``), or a run
    of consecutive axes that the view merged into one (``step`` 1, the whole run from its origin, walked
    by no other view axis: a convolution's ``C*kh*kw`` of an im2col buffer). None overall when some axis
    walks neither."""
    cs = contiguous_strides(shape)
    digits = _digits(v.offset, shape, cs)
    if digits is None:
        return None
    lo, hi = list(digits), list(digits)
    walk = []
    merged: list = []  # the logical axes of the runs
    for n, s in zip(v.shape, v.strides):
        if s == 0 or n == 1:
            walk.append(None)
            continue
        a = next((a for a in range(len(shape)) if shape[a] > 1 and s % cs[a] == 0), None)
        if a is None:
            return None
        step = s // cs[a]
        if step == 1 and n > shape[a]:
            run = _run(a, n, shape)
            if run is None or any(digits[x] for x in run):
                return None
            merged.extend(run)
            walk.append((run, 1))
            continue
        lo[a] += min(0, (n - 1) * step)
        hi[a] += max(0, (n - 1) * step)
        walk.append(((a,), step))
    if any(lo[a] < 0 or hi[a] >= max(shape[a], 1) for a in range(len(shape))):
        return None  # some axis carries into the next: not a view of the axes themselves
    if merged and (len(set(merged)) < len(merged) or any(
            w is not None and len(w[0]) == 1 and w[0][0] in merged for w in walk)):
        return None  # a run's axes are walked twice
    return walk


def _run(last: int, n: int, shape: tuple):
    """The consecutive axes ending at ``last`` whose sizes multiply to ``n``, or None."""
    size, first = 1, last
    for a in range(last, -1, -1):
        size *= shape[a]
        first = a
        if size >= n:
            break
    return tuple(range(first, last + 1)) if size == n else None


def remap(v: Strided, shape: tuple, perm: tuple) -> Strided | None:
    """``v`` (a view of a contiguous buffer of ``shape``) as a view of the same elements stored in
    axis order ``perm``, or None when it does not walk the axes one by one (or a run of them that
    ``perm`` keeps together, in order)."""
    walk = axis_walk(v, shape)
    if walk is None:
        return None
    phys = physical_strides(shape, perm)
    strides = []
    for w in walk:
        if w is None:
            strides.append(0)
            continue
        run = [a for a in w[0] if shape[a] > 1]
        if any(phys[x] != phys[y] * shape[y] for x, y in zip(run, run[1:])):
            return None  # ``perm`` splits the run
        strides.append(w[1] * phys[run[-1]])
    offset = sum(d * phys[a] for a, d in enumerate(_digits(v.offset, shape, contiguous_strides(shape))))
    return Strided(v.shape, tuple(strides), offset)


@functools.lru_cache(maxsize=4096)
def remaps(v: Strided, shape: tuple, perm: tuple) -> bool:
    """Whether :func:`remap` takes ``v`` onto storage order ``perm`` (kept: a layout asks it of every
    reader of every buffer it weighs)."""
    return remap(v, shape, perm) is not None


def walk_order(v: Strided, shape: tuple, groups) -> tuple | None:
    """A storage order of a buffer of ``shape`` in which each of ``groups`` (lists of axes of the view
    ``v``, outermost group first) is laid out as one run, in its axes' order: a GEMM operand's batch,
    row and column axes, so that BLAS reads it as one matrix per batch. Axes no view axis walks go
    outermost. Of the two orders of the last two groups, the one nearer the logical order (fewer
    inverted pairs of axes) is taken: other readers keep their locality. None when ``v`` does not walk
    the axes one by one, or the logical order is it. (An order is a pure function of these, kept as
    ``gemm_orders``'s.)"""
    return _walk_order(v, tuple(shape), tuple(map(tuple, groups)))


@functools.lru_cache(maxsize=4096)
def _walk_order(v: Strided, shape: tuple, groups: tuple) -> tuple | None:
    walk = axis_walk(v, shape) if shape else None
    if walk is None:
        return None

    def axes_of(group) -> list:
        return [a for x in group if walk[x] is not None for a in walk[x][0]]

    best = None
    heads, last = groups[:-2], groups[-2:]
    for tail in (last, last[::-1]):
        walked = [a for g in (*heads, *tail) for a in axes_of(g)]
        if len(set(walked)) < len(walked):
            return None  # two view axes walk one logical axis
        order = tuple([a for a in range(len(shape)) if a not in walked] + walked)
        # fewer inverted pairs; on a tie, the logical innermost axis innermost (a reader's unit stride)
        key = (sum(x > y for i, x in enumerate(order) for y in order[i + 1:]), order[-1] != len(shape) - 1)
        if best is None or key < best[0]:
            best = (key, order)
    return None if best[1] == tuple(range(len(shape))) else best[1]


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
    remap. (Kept per arguments, as ``gemm_orders``'s.)"""
    return _preferred_order(tuple(views), tuple(shape))


@functools.lru_cache(maxsize=4096)
def _preferred_order(views: tuple, shape: tuple) -> tuple | None:
    votes: dict[tuple, int] = {}
    for v, times in views:
        walk = axis_walk(v, shape)
        if walk is None:
            return None
        order = []
        for w in walk:
            for a in () if w is None else w[0]:
                if a not in order:
                    order.append(a)
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


# A GEMM plan's cost in the units that matter here: each batch axis left is a loop of small BLAS calls
# (a convolution's: one per image), each operand or result that is not one matrix is a copy.
BATCH_COST = 2
COPY_COST = 1


def gemm_orders(domain: tuple, ks: tuple, operands: list) -> list:
    """The storage orders of a GEMM's two operands and its result that make it the fewest, largest BLAS
    calls. ``operands``: for ``a``, ``b`` and the result, ``(view, shape, options)``: the view over
    the logical layout of a buffer of ``shape`` (the result's: its own shape, contiguous), and the
    orders it may take (None: logical). Returns one order (or None) each: the combination whose plan
    (``gemm.plan_gemm``) has the fewest extra batch axes and copies (``BATCH_COST``, ``COPY_COST``),
    the earliest options on a tie. (Kept per arguments, as ``plan_gemm``: every trip of a rolled body
    weighs the same choices.)"""
    return list(_gemm_orders(tuple(domain), tuple(ks), tuple((v, shape, tuple(opts)) for v, shape, opts in operands)))


@functools.lru_cache(maxsize=4096)
def _gemm_orders(domain: tuple, ks: tuple, operands: tuple) -> tuple:
    kept = [i for i in range(len(domain)) if i not in ks]
    best = None
    for combo in product(*(opts for _, _, opts in operands)):
        placed = []
        for (v, shape, _), order in zip(operands, combo):
            placed.append(v if order is None else remap(v, shape, order))
        if any(p is None for p in placed):
            continue
        a, b, out = placed
        batch, _, _ = classify(domain, ks, a.strides, b.strides)
        g = plan_gemm(domain, ks, a, b, dict(zip(kept, out.strides)))
        cost = BATCH_COST * (len(g.batch) - len(batch)) + COPY_COST * sum(
            x is None for x in (g.a2, g.b2, g.out2))
        if best is None or cost < best[0]:
            best = (cost, combo)
    return tuple(best[1]) if best is not None else tuple(opts[0] for _, _, opts in operands)
