"""GEMM planning: how a contraction's operand views become one ``np.matmul`` call that reaches BLAS.

A matmul kernel (the compiler's ``matmul`` and ``contraction`` rules make them) computes ``sum over the K axes
of a*b`` over a product domain, with ``a`` and ``b`` read through views. Every other axis (of size
!= 1) is *batch* (both operands move along it, or neither), *M* (only ``a`` moves) or *N* (only ``b``
moves). The plan arranges ``a`` as ``[batch..., M..., K...]``, ``b`` as ``[batch..., K..., N...]`` and
the output as ``[batch..., M..., N...]``, and merges each of the M, N and K runs into one axis.

The M axes are taken in the order of ``a``'s strides (N: ``b``'s; K: ``a``'s), largest first, so that
axes a view walks in another order than memory (a sequence-major view of a batch-major input) merge.
M axes that do not merge in ``a``'s strides (a convolution's batch axis next to its pixels) are not
copied together: the largest run that merges stays M and the others become batch axes, along which
``b`` is broadcast (numpy's matmul loops over batch axes, stride 0 included). Likewise for N.

numpy's matmul calls BLAS only when each 2-d operand has a unit stride on one side and a leading
stride covering the other (C or Fortran order); anything else runs a naive loop. So where the K
axes do not merge or a matrix is not BLAS-ready, the plan says to copy that operand into a
contiguous scratch (or, for the output, to compute into a scratch and copy out). Size-1 axes have
no meaningful stride: the plan picks one that makes the operand BLAS-ready.

All sizes and strides here are ints (a binding of the symbolic dims), in elements.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass


@dataclass(frozen=True)
class Strided:
    """A view over a flat buffer: ``shape``, ``strides`` and ``offset`` in elements."""

    shape: tuple
    strides: tuple
    offset: int


@dataclass(frozen=True)
class GemmPlan:
    batch: tuple  # domain axes, in order
    m: tuple
    n: tuple
    k: tuple
    bshape: tuple  # sizes of the batch axes
    M: int
    N: int
    K: int
    a: Strided  # [batch..., M..., K...]: a's elements, unmerged (the source when a is copied)
    b: Strided  # [batch..., K..., N...]
    out: Strided  # [batch..., M..., N...] over the output
    a2: Strided | None  # [batch..., M, K], BLAS-ready; None: copy ``a`` into a contiguous scratch
    b2: Strided | None  # [batch..., K, N]
    out2: Strided | None  # [batch..., M, N]; None: compute into a scratch, then copy into ``out``


def classify(domain: tuple, ks: tuple, sa: tuple, sb: tuple):
    """The batch, M and N axes of a product domain (size-1 axes belong to none)."""
    batch, m, n = [], [], []
    for i, d in enumerate(domain):
        if i in ks or d == 1:
            continue
        if (sa[i] != 0) == (sb[i] != 0):
            batch.append(i)
        elif sa[i] != 0:
            m.append(i)
        else:
            n.append(i)
    return batch, m, n


def plan_gemm(domain: tuple, ks: tuple, a: Strided, b: Strided, out_strides: dict) -> GemmPlan:
    """``a``, ``b``: the operand views at the product ``domain``; ``ks``: the summed axes;
    ``out_strides``: {domain axis: stride of the output} for every other axis (offset 0). A plan is a
    pure function of these (frozen): laying out a deep stack asks for the same few thousands of times
    (each trip of a rolled body, each option a layout weighs), so plans are kept (``_plan``)."""
    return _plan(tuple(domain), tuple(ks), a, b, tuple(out_strides.items()))


@functools.lru_cache(maxsize=4096)
def _plan(domain: tuple, ks: tuple, a: Strided, b: Strided, out_items: tuple) -> GemmPlan:
    out_strides = dict(out_items)
    batch, m, n = classify(domain, ks, a.strides, b.strides)
    m, extra_m = _largest_run(in_memory_order(m, a.strides), domain, a.strides)
    n, extra_n = _largest_run(in_memory_order(n, b.strides), domain, b.strides)
    batch = tuple(sorted(batch + extra_m + extra_n))
    ks = tuple(in_memory_order([i for i in ks if domain[i] != 1], a.strides))
    size = lambda axes: _prod(domain[i] for i in axes)  # noqa: E731

    def arrange(view: Strided, axes) -> Strided:
        return Strided(tuple(domain[i] for i in axes), tuple(view.strides[i] for i in axes), view.offset)

    av = arrange(a, batch + m + ks)
    bv = arrange(b, batch + ks + n)
    ov = Strided(tuple(domain[i] for i in batch + m + n), tuple(out_strides[i] for i in batch + m + n), 0)
    nb = len(batch)
    return GemmPlan(batch, m, n, ks, tuple(domain[i] for i in batch), size(m), size(n), size(ks), av, bv, ov,
                    _matrix(av, nb, len(m)), _matrix(bv, nb, len(ks)), _matrix(ov, nb, len(m)))


def in_memory_order(axes, strides) -> list:
    """``axes`` from the largest stride to the smallest (ties in their order): the order in which they
    can merge into one run (a sequence-major view of a batch-major input, ``(S, B)``, merges as
    ``(B, S)``). The result's rows follow the left operand's order, its columns the right one's."""
    return sorted(axes, key=lambda i: -abs(strides[i]))


def _largest_run(axes: list, domain: tuple, strides: tuple):
    """Split ``axes`` into the run of consecutive ones laid out one after another in ``strides`` with
    the most elements, and the rest."""
    best, run = (), []
    for i in axes:
        if run and strides[run[-1]] != strides[i] * domain[i]:
            run = []
        run.append(i)
        if _prod(domain[j] for j in run) > _prod(domain[j] for j in best):
            best = tuple(run)
    return best, [i for i in axes if i not in best]


def _matrix(v: Strided, nb: int, rows: int) -> Strided | None:
    """``v`` (``[batch..., rows axes..., column axes...]``) as ``[batch..., R, C]`` in a BLAS-ready
    layout, or None when that needs a copy."""
    r = _merge(v.shape[nb:nb + rows], v.strides[nb:nb + rows])
    c = _merge(v.shape[nb + rows:], v.strides[nb + rows:])
    if r is None or c is None:
        return None
    st = _blas(r[0], r[1], c[0], c[1])
    if st is None:
        return None
    return Strided(v.shape[:nb] + (r[0], c[0]), v.strides[:nb] + st, v.offset)


def _merge(shape, strides):
    """Consecutive axes as one ``(size, stride)`` when laid out one after another (stride None for an
    empty run: size 1, any stride), else None."""
    if not shape:
        return 1, None
    for j in range(len(shape) - 1):
        if strides[j] != strides[j + 1] * shape[j + 1]:
            return None
    return _prod(shape), strides[-1]


def _blas(d1, s1, d2, s2):
    """Strides of a ``d1 x d2`` matrix that numpy hands to BLAS (row- or column-major with a
    leading stride covering the other dim), choosing the free stride of a size-1 dim; None if none."""
    if d1 == 1:
        s1 = None
    if d2 == 1:
        s2 = None
    if s1 is None and s2 is None:
        return max(d2, 1), 1
    if s1 is None:
        s1 = max(d2, 1) if s2 == 1 else 1
    if s2 is None:
        s2 = 1 if s1 != 1 else max(d1, 1)
    if s2 == 1 and s1 >= max(d2, 1):
        return s1, s2
    if s1 == 1 and s2 >= max(d1, 1):
        return s1, s2
    return None


def _prod(xs) -> int:
    p = 1
    for x in xs:
        p *= x
    return p
