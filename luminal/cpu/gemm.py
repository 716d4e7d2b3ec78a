"""GEMM planning: how a matmul kernel's operand views become one ``np.matmul`` call that reaches BLAS.

A matmul kernel computes ``sum over axis k of a*b`` over its product domain, with ``a`` and ``b``
read through views (the GEMM layout of ``compile/kernel_graph.py``). Every axis other than ``k``
(of size != 1) is *batch* (both operands move along it, or neither), *M* (only ``a`` moves) or *N*
(only ``b`` moves). The plan arranges ``a`` as ``[batch..., M..., K]``, ``b`` as ``[batch..., K, N...]``
and the output as ``[batch..., M..., N...]``, then merges each M and N run into one axis.

numpy's matmul calls BLAS only when each 2-d operand has a unit stride on one side and a leading
stride covering the other (C or Fortran order); anything else runs a naive loop. So where a merge
is impossible or the result is not BLAS-ready, the plan says to copy that operand into a
contiguous scratch (or, for the output, to compute into a scratch and copy out). Size-1 axes have
no meaningful stride: the plan picks one that makes the operand BLAS-ready.

All sizes and strides here are ints (a binding of the symbolic dims), in elements.
"""

from __future__ import annotations

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
    k: int
    bshape: tuple  # sizes of the batch axes
    M: int
    N: int
    K: int
    a: Strided  # [batch..., M..., K]: a's elements, unmerged (the source when a is copied)
    b: Strided  # [batch..., K, N...]
    out: Strided  # [batch..., M..., N...] over the output buffer
    a2: Strided | None  # [batch..., M, K], BLAS-ready; None: copy ``a`` into a contiguous scratch
    b2: Strided | None  # [batch..., K, N]
    out2: Strided | None  # [batch..., M, N]; None: compute into a scratch, then copy into ``out``


def classify(domain: tuple, k: int, sa: tuple, sb: tuple):
    """The batch, M and N axes of a product domain (size-1 axes belong to none)."""
    batch, m, n = [], [], []
    for i, d in enumerate(domain):
        if i == k or d == 1:
            continue
        if (sa[i] != 0) == (sb[i] != 0):
            batch.append(i)
        elif sa[i] != 0:
            m.append(i)
        else:
            n.append(i)
    return tuple(batch), tuple(m), tuple(n)


def plan_gemm(domain: tuple, k: int, a: Strided, b: Strided, out_strides: dict) -> GemmPlan:
    """``a``, ``b``: the operand views at the product ``domain``; ``out_strides``: {domain axis: stride
    of the output buffer} for every axis but ``k`` (the output starts at offset 0)."""
    batch, m, n = classify(domain, k, a.strides, b.strides)
    size = lambda axes: _prod(domain[i] for i in axes)  # noqa: E731
    M, N, K = size(m), size(n), domain[k]
    bshape = tuple(domain[i] for i in batch)

    def arrange(view: Strided, axes) -> Strided:
        return Strided(tuple(domain[i] for i in axes), tuple(view.strides[i] for i in axes), view.offset)

    av = arrange(a, batch + m + (k,))
    bv = arrange(b, batch + (k,) + n)
    ov = Strided(tuple(domain[i] for i in batch + m + n), tuple(out_strides[i] for i in batch + m + n), 0)
    nb = len(batch)
    a2 = _matrix(av, nb, len(m), 1)
    b2 = _matrix(bv, nb, 1, len(n))
    o2 = _matrix(ov, nb, len(m), len(n))
    return GemmPlan(batch, m, n, k, bshape, M, N, K, av, bv, ov, a2, b2, o2)


def _matrix(v: Strided, nb: int, rows: int, cols: int) -> Strided | None:
    """``v`` (``[batch..., rows axes..., cols axes...]``) as ``[batch..., R, C]`` in a BLAS-ready
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
