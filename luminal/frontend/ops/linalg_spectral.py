"""Spectral decompositions for static sizes, by Jacobi rotations unrolled over a fixed number of
cyclic sweeps: ``eigh``/``eigvalsh`` (two-sided Jacobi on the symmetric matrix) and ``svd``/``svdvals``
(one-sided Jacobi, Hestenes: the columns are rotated until orthogonal, which keeps the small singular
values' relative accuracy that an eigendecomposition of ``A.mT @ A`` loses), and what is built on them:
``pinv``, ``matrix_rank``, ``cond``.

Cyclic Jacobi converges quadratically: ``6 + ceil(log2(n))`` sweeps leave the off-diagonal part at
float64 rounding for n <= 16 (the limit enforced: a sweep is n (n - 1) / 2 rotations of a few nodes
each). The gradients are not those of the rotations: each decomposition is one node with torch's
backward formula (``Graph.custom_vjp``: ``linalg_eig_backward`` for ``eigh``, ``svd_backward`` for
``svd``), undefined, as torch's, where eigenvalues (singular values) repeat."""

from __future__ import annotations

import math
from typing import NamedTuple

from luminal.core import dtype as dt
from luminal.core.errors import op_error, renamed
from luminal.core.symbolic import shape_str
from luminal.frontend.checks import tensor_op
from luminal.frontend.float32_ops import float32_under_autocast
from luminal.frontend.ops.combine import cat
from luminal.frontend.ops.core import cast
from luminal.frontend.ops.creation import eye, tril, triu, zeros
from luminal.frontend.ops.elementwise import (
    abs_,
    add,
    div,
    eq,
    ge,
    gt,
    le,
    logical_and,
    logical_not,
    logical_or,
    maximum,
    mul,
    sqrt,
    sub,
    where,
)
from luminal.frontend.ops.indexing import take_along_dim
from luminal.frontend.ops.linalg import matmul
from luminal.frontend.ops.linalg_decomp import DECOMP_LIMIT
from luminal.frontend.ops.linalg_solve import _column, _matrix, _step_masks, _swap_rows, check_size
from luminal.frontend.ops.movement import diag_embed
from luminal.frontend.ops.reduce import amax, argmax, sort
from luminal.frontend.ops.reduce import sum as sum_
from luminal.frontend.tensor import GraphTensor

JACOBI_LIMIT = 16


def _sweeps(n: int) -> int:
    return 6 + math.ceil(math.log2(max(n, 1)))


def _rotation(a: GraphTensor, d: GraphTensor, p: int, q: int, n: int, like: GraphTensor) -> GraphTensor:
    """The Jacobi rotation J (..., n, n) that zeroes the (p, q) entry of ``J.mT @ M @ J`` for a
    symmetric M with ``M[p, q] = a`` and ``M[q, q] - M[p, p] = d`` (each (..., 1, 1)):
    ``t = tan(theta) = 2 a sign(d) / (|d| + sqrt(d**2 + 4 a**2))`` (no division by a small ``a``),
    ``t = 0`` where ``a`` and ``d`` are both 0."""
    den = add(abs_(d), sqrt(add(mul(d, d), mul(mul(a, a), 4.0))))
    flat = eq(den, 0)
    t = where(flat, 0.0, div(mul(mul(a, 2.0), where(ge(d, 0), 1.0, -1.0)), where(flat, 1.0, den)))
    c = div(1.0, sqrt(add(mul(t, t), 1.0)))
    s = mul(t, c)
    rows = like.graph.arange(n).reshape(n, 1)
    cols = like.graph.arange(n)

    def at(i: int, j: int) -> GraphTensor:
        return cast(logical_and(eq(rows, i), eq(cols, j)), like.dtype)

    ident = eye(n, dtype=like.dtype, graph=like.graph)
    return add(add(ident, mul(sub(c, 1.0), add(at(p, p), at(q, q)))), mul(s, sub(at(p, q), at(q, p))))


def _jacobi_eigh(S: GraphTensor, n: int) -> tuple[GraphTensor, GraphTensor]:  # noqa: N803
    """Eigenvalues (unsorted, (..., n)) and eigenvectors (columns) of the symmetric ``S``."""
    V = eye(n, dtype=S.dtype, graph=S.graph).expand(*S.shape)
    for _ in range(_sweeps(n)):
        for p in range(n):
            for q in range(p + 1, n):
                J = _rotation(S[..., p:p + 1, q:q + 1], sub(S[..., q:q + 1, q:q + 1], S[..., p:p + 1, p:p + 1]),
                              p, q, n, S)
                S = matmul(J.mT, matmul(S, J))
                V = matmul(V, J)
    return S.diagonal(0, -2, -1), V


def _jacobi_svd(A: GraphTensor, n: int) -> tuple[GraphTensor, GraphTensor]:  # noqa: N803
    """One-sided Jacobi on the columns of ``A`` (..., m, n), m >= n: ``(A V, V)`` with ``A V``'s
    columns orthogonal (their norms the singular values, unsorted)."""
    V = eye(n, dtype=A.dtype, graph=A.graph).expand(*A.shape[:-2], n, n)
    for _ in range(_sweeps(n)):
        for p in range(n):
            for q in range(p + 1, n):
                ap, aq = A[..., :, p:p + 1], A[..., :, q:q + 1]
                alpha, beta = sum_(mul(ap, ap), -2, keepdim=True), sum_(mul(aq, aq), -2, keepdim=True)
                J = _rotation(sum_(mul(ap, aq), -2, keepdim=True), sub(beta, alpha), p, q, n, A)
                A = matmul(A, J)
                V = matmul(V, J)
    return A, V


def _sorted(values: GraphTensor, vectors: GraphTensor, descending: bool):
    """``values`` (..., k) sorted, and the columns of ``vectors`` (..., m, k) in the same order."""
    vals, idx = sort(values, -1, descending)
    return vals, take_along_dim(vectors, idx.unsqueeze(-2).expand(*vectors.shape), -1)


def _pack(*parts: GraphTensor) -> GraphTensor:
    """The tensors flattened over their non-batch dims and joined: one node, for ``custom_vjp``."""
    lead = parts[0].ndim - (2 if parts[0].ndim >= 2 else 1)
    return cat([p.reshape(*p.shape[:lead], -1) for p in parts], -1).contiguous()


def _unpack(packed: GraphTensor, shapes: list[tuple]) -> list[GraphTensor]:
    out, at = [], 0
    for shape in shapes:
        size = math.prod(shape)
        out.append(packed[..., at:at + size].reshape(*packed.shape[:-1], *shape))
        at += size
    return out


class EighResult(NamedTuple):
    """``eigh``'s result, as torch's ``torch.return_types.linalg_eigh``."""

    eigenvalues: GraphTensor
    eigenvectors: GraphTensor


def _symmetric(op: str, A: GraphTensor, UPLO: str) -> GraphTensor:  # noqa: N803
    """``A`` with the triangle ``UPLO`` names mirrored onto the other (torch reads only that one)."""
    if UPLO not in ("L", "U"):
        raise op_error(ValueError, op, f"UPLO must be 'L' or 'U', got {UPLO!r}", A)
    n = A.shape[-1]
    rows, cols = A.graph.arange(n).reshape(n, 1), A.graph.arange(n)
    keep = ge(rows, cols) if UPLO == "L" else ge(cols, rows)
    return where(keep, A, A.mT)


def _eigh(op: str, A: GraphTensor, UPLO: str) -> EighResult:  # noqa: N803
    n, _ = _matrix(op, A, square=True)
    check_size(op, n, JACOBI_LIMIT, A)
    S = _symmetric(op, A, UPLO).detach()
    w, V = _sorted(*_jacobi_eigh(S, n), descending=False)
    shapes = [(n,), (n, n)]
    packed = _pack(w.unsqueeze(-2), V)

    def rule(out, adjoint, A):  # torch's linalg_eig_backward, real symmetric
        w, V = _unpack(out, shapes)
        gw, gV = _unpack(adjoint, shapes)
        VtgV = matmul(V.mT, gV)
        skew = mul(sub(VtgV, VtgV.mT), 0.5)
        E = sub(w.unsqueeze(-2), w.unsqueeze(-1))
        rows, cols = A.graph.arange(n).reshape(n, 1), A.graph.arange(n)
        diag = eq(rows, cols)
        inner = where(diag, diag_embed(gw), div(skew, where(diag, 1.0, E)))
        return [matmul(V, matmul(inner, V.mT))]

    out = A.graph.custom_vjp(packed, [A], rule)
    w, V = _unpack(out, shapes)
    return EighResult(w, V)


@float32_under_autocast
@tensor_op("eigh")
def eigh(A: GraphTensor, UPLO: str = "L") -> EighResult:  # noqa: N803 - torch's names
    """torch.linalg.eigh: ``(eigenvalues, eigenvectors)`` of each symmetric matrix of ``A``: the
    eigenvalues ascending, the eigenvectors as columns (each one's sign is arbitrary, as torch's and
    not necessarily the same). Cyclic Jacobi, static n <= 16. Only the triangle ``UPLO`` is read; the
    gradient is torch's (undefined where eigenvalues repeat).

    Args:
        A: a float32/float64 tensor (*, n, n).
        UPLO: ``"L"`` (the lower triangle is read) or ``"U"``.
    """
    return _eigh("eigh", A, UPLO)


@float32_under_autocast
@tensor_op("eigvalsh")
def eigvalsh(A: GraphTensor, UPLO: str = "L") -> GraphTensor:  # noqa: N803 - torch's names
    """torch.linalg.eigvalsh: ``eigh``'s eigenvalues alone, ascending (static n <= 16).

    Args:
        A: a float32/float64 tensor (*, n, n).
        UPLO: ``"L"`` (the lower triangle is read) or ``"U"``.
    """
    return _eigh("eigvalsh", A, UPLO).eigenvalues


class SVDResult(NamedTuple):
    """``svd``'s result, as torch's ``torch.return_types.linalg_svd``."""

    U: GraphTensor  # noqa: N815 - torch's names
    S: GraphTensor  # noqa: N815
    Vh: GraphTensor  # noqa: N815


def _svd(op: str, A: GraphTensor) -> SVDResult:  # noqa: N803
    """The reduced SVD (U (m, k), S (k,) descending, Vh (k, n)) with torch's gradient."""
    m, n = _matrix(op, A, limit=DECOMP_LIMIT)
    check_size(op, min(m, n), JACOBI_LIMIT, A)
    k = min(m, n)
    X = A.detach() if m >= n else A.detach().mT
    AV, V = _jacobi_svd(X, k)
    S, order = sort(sqrt(sum_(mul(AV, AV), -2)), -1, True)
    order = order.unsqueeze(-2)
    AV, V = take_along_dim(AV, order.expand(*AV.shape), -1), take_along_dim(V, order.expand(*V.shape), -1)
    U = div(AV, where(eq(S, 0), 1.0, S).unsqueeze(-2))
    if m < n:
        U, V = V, U
    shapes = [(m, k), (k,), (k, n)]
    packed = _pack(U, S.unsqueeze(-2), V.mT)

    def rule(out, adjoint, A):  # torch's svd_backward
        U, S, Vh = _unpack(out, shapes)
        gU, gS, gVh = _unpack(adjoint, shapes)
        V, gV = Vh.mT, gVh.mT
        UtgU, VtgV = matmul(U.mT, gU), matmul(V.mT, gV)
        UtgU, VtgV = sub(UtgU, UtgU.mT), sub(VtgV, VtgV.mT)
        S2 = mul(S, S)
        rows, cols = A.graph.arange(k).reshape(k, 1), A.graph.arange(k)
        diag = eq(rows, cols)
        E = where(diag, 1.0, sub(S2.unsqueeze(-2), S2.unsqueeze(-1)))
        gA = div(add(mul(UtgU, S.unsqueeze(-2)), mul(S.unsqueeze(-1), VtgV)), E)
        gA = add(where(diag, 0.0, gA), diag_embed(gS))
        if m > k:
            gUSinv = div(gU, S.unsqueeze(-2))
            gA = add(matmul(U, gA), sub(gUSinv, matmul(U, matmul(U.mT, gUSinv))))
            return [matmul(gA, Vh)]
        if n > k:
            gVSinv = div(gV, S.unsqueeze(-2))
            gA = add(matmul(gA, Vh), sub(gVSinv.mT, matmul(matmul(gVSinv.mT, V), Vh)))
            return [matmul(U, gA)]
        return [matmul(U, matmul(gA, Vh))]

    out = A.graph.custom_vjp(packed, [A], rule)
    return SVDResult(*_unpack(out, shapes))


def _complete(Q: GraphTensor, m: int) -> GraphTensor:  # noqa: N803
    """``Q`` (..., m, k) with orthonormal columns, completed to an orthogonal (..., m, m) by the
    complete Q of its own Householder QR (whose first k columns are +-Q's)."""
    from luminal.frontend.ops.linalg_decomp import qr

    full = qr(Q.detach(), mode="complete").Q
    return cat([Q, full[..., :, Q.shape[-1]:]], -1)


@float32_under_autocast
@tensor_op("svd")
def svd(A: GraphTensor, full_matrices: bool = True, *, driver=None) -> SVDResult:  # noqa: N803 - torch's names
    """torch.linalg.svd: ``(U, S, Vh)`` with ``A = U diag(S) Vh``, the singular values descending
    (each pair of singular vectors' sign is arbitrary, as torch's). One-sided Jacobi, static
    min(m, n) <= 16; the gradient is torch's (undefined where singular values repeat).
    ``full_matrices`` (torch's default) completes U (m, m) or Vh (n, n) with an orthonormal basis of
    the rest (no gradient through that part).

    Args:
        A: a float32/float64 tensor (*, m, n).
        full_matrices: complete U and Vh to square matrices.
        driver: None (a LAPACK driver name is CUDA-only in torch).
    """
    if driver is not None:
        raise op_error(ValueError, "svd", f"driver={driver!r} is not supported (torch takes it on CUDA only)", A)
    U, S, Vh = _svd("svd", A)
    m, n = A.shape[-2], A.shape[-1]
    if full_matrices and m > n:
        U = _complete(U, m)
    elif full_matrices and n > m:
        Vh = _complete(Vh.mT, n).mT
    return SVDResult(U, S, Vh)


@float32_under_autocast
@tensor_op("svdvals")
def svdvals(A: GraphTensor, *, driver=None) -> GraphTensor:  # noqa: N803 - torch's names
    """torch.linalg.svdvals: ``svd``'s singular values alone, descending (static min(m, n) <= 16).

    Args:
        A: a float32/float64 tensor (*, m, n).
        driver: None (a LAPACK driver name is CUDA-only in torch).
    """
    if driver is not None:
        raise op_error(ValueError, "svdvals", f"driver={driver!r} is not supported (torch takes it on CUDA only)", A)
    return _svd("svdvals", A).S


def _threshold(op: str, S: GraphTensor, A: GraphTensor, atol, rtol) -> GraphTensor:  # noqa: N803
    """torch's cut-off for ``pinv``/``matrix_rank``: ``max(atol, rtol * S.max())``, ``rtol`` by default
    ``eps * max(m, n)`` when ``atol`` is unset or 0, else 0."""
    for name, v in (("atol", atol), ("rtol", rtol)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))):
            raise op_error(TypeError, op, f"{name} must be a number or None (a tensor tolerance is not supported), "
                           f"got {v!r}", A)
    if rtol is None:
        rtol = dt.finfo(A.dtype).eps * max(A.shape[-2], A.shape[-1]) if not atol else 0.0
    top = amax(S, -1, keepdim=True) if S.shape[-1] else S.graph.constant(0.0, S.dtype)
    return maximum(mul(top, float(rtol)), float(atol or 0.0))


@float32_under_autocast
@tensor_op("pinv")
def pinv(A: GraphTensor, *, atol=None, rtol=None, hermitian: bool = False) -> GraphTensor:  # noqa: N803
    """torch.linalg.pinv: the Moore-Penrose pseudo-inverse ``V diag(1/S) U.mT`` over the singular values
    above ``max(atol, rtol * S.max())`` (``svd``; ``hermitian``: from ``eigh``, ``|eigenvalues|``).

    Args:
        A: a float32/float64 tensor (*, m, n), min(m, n) <= 16 (static).
        atol: the absolute cut-off (None: 0).
        rtol: the relative cut-off (None: ``eps * max(m, n)`` when atol is unset or 0, else 0).
        hermitian: ``A`` is symmetric (only its lower triangle is read).
    """
    if hermitian:
        w, V = _eigh("pinv", A, "L")
        S, U, Vr = abs_(w), V, mul(V, where(ge(w, 0), 1.0, -1.0).unsqueeze(-2))
    else:
        U, S, Vh = _svd("pinv", A)
        Vr = Vh.mT
    keep = gt(S, _threshold("pinv", S, A, atol, rtol))
    inv_s = where(keep, div(1.0, where(keep, S, 1.0)), 0.0)
    return matmul(mul(Vr, inv_s.unsqueeze(-2)), U.mT)


@float32_under_autocast
@tensor_op("matrix_rank")
def matrix_rank(A: GraphTensor, *, atol=None, rtol=None, hermitian: bool = False) -> GraphTensor:  # noqa: N803
    """torch.linalg.matrix_rank: the number of singular values above ``max(atol, rtol * S.max())``
    (``hermitian``: ``|eigenvalues|``), int32 (torch's is int64).

    Args:
        A: a float32/float64 tensor (*, m, n), min(m, n) <= 16 (static).
        atol: the absolute cut-off (None: 0).
        rtol: the relative cut-off (None: ``eps * max(m, n)`` when atol is unset or 0, else 0).
        hermitian: ``A`` is symmetric (only its lower triangle is read).
    """
    S = abs_(_eigh("matrix_rank", A, "L").eigenvalues) if hermitian else _svd("matrix_rank", A).S
    return sum_(cast(gt(S, _threshold("matrix_rank", S, A, atol, rtol)), dt.int32), -1)


def _reflector(x: GraphTensor, at: GraphTensor, after: GraphTensor) -> tuple[GraphTensor, GraphTensor]:
    """LAPACK's dlarfg on the column ``x`` (..., m, 1) at step j, its rows named by step j's masks
    ``at``/``after`` ((m, 1): row j, rows below): ``(v, tau)`` with ``(I - tau v v^T) x`` zero below
    row j, ``v`` 0 above row j and 1 at it, ``tau = 0`` (H = I) where x is already zero below row j.
    As ``linalg_decomp._householder``'s step, but reading row j through the masks (no slice at
    offset j), so that the steps of a loop roll into one (``linalg_solve._step_masks``)."""
    zero = x.graph.constant(0, x.dtype)
    alpha = sum_(where(at, x, zero), -2, keepdim=True)
    below = sum_(where(after, mul(x, x), zero), -2, keepdim=True)
    flat = eq(below, 0)
    norm = sqrt(add(mul(alpha, alpha), where(flat, 1.0, below)))
    beta = where(ge(alpha, 0), mul(norm, -1.0), norm)
    tau = where(flat, 0.0, div(sub(beta, alpha), beta))
    scale = where(flat, 1.0, sub(alpha, beta))
    return div(where(after, x, where(at, scale, zero)), scale), tau  # v[j] = scale / scale = 1


def _reflect(v: GraphTensor, tau: GraphTensor, C: GraphTensor) -> GraphTensor:  # noqa: N803
    """``(I - tau v v^T) C``."""
    return sub(C, mul(mul(tau, v), sum_(mul(v, C), -2, keepdim=True)))


def _laic1(largest: bool, sest: GraphTensor, alpha: GraphTensor, gamma: GraphTensor, eps: float):
    """LAPACK's dlaic1, one step of incremental condition estimation: from the estimate ``sest`` of
    the largest (``largest``) or smallest singular value of a triangle L, with its approximate
    singular vector x, and the next column (``alpha = x . w`` with w above the diagonal, ``gamma`` on
    it), the estimate ``sestpr`` for the grown triangle and ``(s, c)``, its vector being
    ``[s x; c]``. Each of dlaic1's cases is computed and the one that applies selected; all (..., 1, 1).
    Its first case, ``sest = 0``, is left out: in gelsy the largest estimate starts at ``|R_00| > 0``
    and only grows, and a smallest estimate of 0 stops the growth for any ``rcond > 0`` (for
    ``rcond <= 0`` every step grows whatever the estimates), so it never changes the rank."""
    absalp, absgam, absest = abs_(alpha), abs_(gamma), abs_(sest)

    def safe(t):  # a divisor that only a case not selected can make 0
        return where(eq(t, 0), 1.0, t)

    def unit(sv, cv):  # (s, c) / |(s, c)|
        n = safe(sqrt(add(mul(sv, sv), mul(cv, cv))))
        return div(sv, n), div(cv, n)

    sgn_a, sgn_g = where(ge(alpha, 0), 1.0, -1.0), where(ge(gamma, 0), 1.0, -1.0)
    one, zero = add(mul(absest, 0.0), 1.0), mul(absest, 0.0)  # (..., 1, 1) constants of the batch
    small_g, small_a = le(absgam, mul(absest, eps)), le(absalp, mul(absest, eps))
    small_e = logical_or(le(absest, mul(absalp, eps)), le(absest, mul(absgam, eps)))
    g_le_a, g_le_e = le(absgam, absalp), le(absgam, absest)
    z1, z2 = div(alpha, safe(absest)), div(gamma, safe(absest))
    if largest:
        tmp = maximum(absest, absalp)
        eg = mul(tmp, sqrt(add(mul(div(absest, safe(tmp)), div(absest, safe(tmp))),
                               mul(div(absalp, safe(tmp)), div(absalp, safe(tmp))))))
        ea = where(g_le_e, absest, absgam)
        sa, ca = where(g_le_e, one, zero), where(g_le_e, zero, one)
        r = div(where(g_le_a, absgam, absalp), safe(where(g_le_a, absalp, absgam)))
        h = sqrt(add(mul(r, r), 1.0))
        ee = mul(where(g_le_a, absalp, absgam), h)
        se = where(g_le_a, div(sgn_a, h), div(div(alpha, safe(absgam)), h))
        ce = where(g_le_a, div(div(gamma, safe(absalp)), h), div(sgn_g, h))
        b = mul(sub(sub(1.0, mul(z1, z1)), mul(z2, z2)), 0.5)
        c = mul(z1, z1)
        root = sqrt(add(mul(b, b), c))
        t = where(gt(b, 0), div(c, safe(add(b, root))), sub(root, b))
        sn, cn = unit(div(mul(z1, -1.0), safe(t)), div(mul(z2, -1.0), add(t, 1.0)))
        en = mul(sqrt(add(t, 1.0)), absest)
        cases = [(small_g, (eg, one, zero)), (small_a, (ea, sa, ca)), (small_e, (ee, se, ce))]
    else:
        ea = where(g_le_e, absgam, absest)
        sa, ca = where(g_le_e, zero, one), where(g_le_e, one, zero)
        r = div(where(g_le_a, absgam, absalp), safe(where(g_le_a, absalp, absgam)))
        h = sqrt(add(mul(r, r), 1.0))
        ee = where(g_le_a, mul(absest, div(r, h)), div(absest, h))
        se = where(g_le_a, div(div(mul(gamma, -1.0), safe(absalp)), h), div(mul(sgn_g, -1.0), h))
        ce = where(g_le_a, div(sgn_a, h), div(div(alpha, safe(absgam)), h))
        norma = maximum(add(add(mul(z1, z1), 1.0), abs_(mul(z1, z2))), add(abs_(mul(z1, z2)), mul(z2, z2)))
        near0 = ge(add(mul(mul(sub(z1, z2), add(z1, z2)), 2.0), 1.0), 0)
        b0, c0n = mul(add(add(mul(z1, z1), mul(z2, z2)), 1.0), 0.5), mul(z2, z2)
        t0 = div(c0n, safe(add(b0, sqrt(abs_(sub(mul(b0, b0), c0n))))))
        b1, c1n = mul(sub(add(mul(z2, z2), mul(z1, z1)), 1.0), 0.5), mul(z1, z1)
        root1 = sqrt(add(mul(b1, b1), c1n))
        t1 = where(ge(b1, 0), div(mul(c1n, -1.0), safe(add(b1, root1))), sub(b1, root1))
        fuzz = mul(norma, 4.0 * eps * eps)
        sn, cn = unit(where(near0, div(z1, safe(sub(1.0, t0))), div(mul(z1, -1.0), safe(t1))),
                      where(near0, div(mul(z2, -1.0), safe(t0)), div(mul(z2, -1.0), safe(add(t1, 1.0)))))
        en = mul(sqrt(where(near0, add(t0, fuzz), add(add(t1, 1.0), fuzz))), absest)
        cases = [(small_g, (absgam, zero, one)), (small_a, (ea, sa, ca)), (small_e, (ee, se, ce))]
    out = (en, sn, cn)
    for cond, vals in reversed(cases):  # the first case that applies wins, as dlaic1's IF chain
        out = tuple(where(cond, v, o) for v, o in zip(vals, out))
    return out


def _gelsy_rank(R: GraphTensor, k: int, rcond: float) -> GraphTensor:  # noqa: N803
    """gelsy's rank of the pivoted ``R`` (..., k, n), int32 (..., 1, 1): 0 where ``R_00 = 0``, else
    the leading triangles grown one column at a time while the estimate of the largest singular
    value times ``rcond`` stays at or below that of the smallest (``_laic1``, each estimate's vector
    kept as a (..., k, 1) column), stopping at the first that fails, as LAPACK's."""
    g, eps = R.graph, dt.finfo(R.dtype).eps / 2  # (LAPACK's dlamch('Epsilon'): half a unit in the last place)
    zero = g.constant(0, R.dtype)
    first = _step_masks(g, k, 0)[0].reshape(k, 1)
    r00 = abs_(sum_(where(first, _column(R, _step_masks(g, k, 0)[0]), zero), -2, keepdim=True))
    smin = smax = r00
    xmin = xmax = where(first, add(mul(r00, 0.0), 1.0), zero)  # e_0
    stopped = eq(r00, 0)
    rank = cast(logical_not(stopped), dt.int32)
    for i in range(1, k):
        at, before, _ = (mask.reshape(k, 1) for mask in _step_masks(g, k, i))
        col = _column(R, _step_masks(g, k, i)[0])
        w, gamma = where(before, col, zero), sum_(where(at, col, zero), -2, keepdim=True)
        sminpr, s1, c1 = _laic1(False, smin, sum_(mul(xmin, w), -2, keepdim=True), gamma, eps)
        smaxpr, s2, c2 = _laic1(True, smax, sum_(mul(xmax, w), -2, keepdim=True), gamma, eps)
        grow = logical_and(logical_not(stopped), le(mul(smaxpr, rcond), sminpr))
        xmin, xmax = where(grow, where(at, c1, mul(s1, xmin)), xmin), where(grow, where(at, c2, mul(s2, xmax)), xmax)
        smin, smax = where(grow, sminpr, smin), where(grow, smaxpr, smax)
        rank, stopped = where(grow, add(rank, 1), rank), logical_not(grow)
    return rank


def _gelsy(A: GraphTensor, b: GraphTensor, m: int, n: int, rcond: float):  # noqa: N803
    """LAPACK's gelsy on ``A`` (..., m, n) and ``b`` (..., m, k) of one batch: ``(x, rank)``, the
    minimum-norm solution of the least-squares problem truncated to the rank.

    1. QR with column pivoting (geqp3): ``A P = Q R``, at step j the remaining column whose rows
       j.. have the largest norm (the first among ties) is swapped to j (argmax and a one-hot swap,
       as the LU's row pivots), its reflector applied to ``A`` and ``b`` (``c = Q^T b``). The norms
       are recomputed at each step, where geqp3 downdates them: the choices can differ between
       columns whose norms agree to rounding.
    2. The rank r, as gelsy's: the leading triangles of R grown while the estimates of their
       largest and smallest singular values (incremental condition estimation, ``_gelsy_rank``)
       keep ``smax * rcond <= smin``. On a triangle ill-conditioned without a small diagonal entry
       (Kahan's) this is fewer than R's ``|R_ii|`` above ``rcond * |R_00|``.
    3. R's rows from r on are dropped (zeroed) and the minimum-norm ``y`` with ``R[:r] y = c[:r]``
       found by a QR of ``R[:r].mT = Z T`` (for what tzrzf's complete orthogonal factorisation
       does): ``y = Z T^-T c``, T's forward substitution with its rows from r on set to 0; then
       ``x = P y``.
    Every loop reads its step's row and column through ``_step_masks`` (no slice at offset j), so
    that its steps roll into one and the code generated stays flat in n. For a full-rank ``A`` this
    is the least-squares solution (a wide one's minimum-norm solution); ``lstsq`` gives it torch's
    gradient (``_lstsq_vjp``)."""
    g, k, w = A.graph, min(m, n), b.shape[-1]
    batch = tuple(A.shape[:-2])
    zero = g.constant(0, A.dtype)
    cols_n = g.arange(n).reshape(n, 1)
    R, c, P = A, b, eye(n, dtype=A.dtype, graph=g).expand(*batch, n, n)
    for j in range(k):
        at_c, before_c, _ = _step_masks(g, n, j)
        at_r, above_r, after_r = (mask.reshape(m, 1) for mask in _step_masks(g, m, j))
        norms = sum_(where(above_r, zero, mul(R, R)), -2, keepdim=True)  # (..., 1, n), rows j.. only
        p = argmax(where(before_c, -1.0, norms), -1, keepdim=True)  # (..., 1, 1); columns < j are done
        R, P = _swap_rows(R.mT, j, p, cols_n).mT, _swap_rows(P.mT, j, p, cols_n).mT
        v, tau = _reflector(_column(R, at_c), at_r, after_r)
        R, c = _reflect(v, tau, R), _reflect(v, tau, c)
    R, c = triu(R)[..., :k, :], c[..., :k, :]
    d = abs_(R.diagonal(0, -2, -1))  # (..., k)
    if k == 0:  # x is 0 (or empty), computed from A and b, whose sums are 0 when m == 0 (``_tie_empty``)
        tie = add(sum_(A, (-2, -1), keepdim=True), sum_(b, (-2, -1), keepdim=True))
        return add(zeros(*batch, n, w, dtype=A.dtype, graph=g), tie), sum_(cast(d, dt.int32), -1)
    rank = _gelsy_rank(R.detach(), k, rcond)  # (..., 1, 1)
    lead = gt(rank, g.arange(k).reshape(k, 1))  # (..., k, 1): rows < r
    S, c = where(lead, R, zero).mT, where(lead, c, zero)  # (..., n, k): R[:r].mT, its columns >= r zero
    V, taus = zero.expand(*batch, n, k), zero.expand(*batch, 1, k)  # Z's reflectors, as columns
    for j in range(k):
        at_c = _step_masks(g, k, j)[0]
        at_r, _, after_r = (mask.reshape(n, 1) for mask in _step_masks(g, n, j))
        v, tau = _reflector(_column(S, at_c), at_r, after_r)
        S, V, taus = _reflect(v, tau, S), where(at_c, v, V), where(at_c, tau, taus)
    T = triu(S[..., :k, :])  # (..., k, k): R[:r] = [T^T 0] Z^T, T's columns >= r zero
    Tt, diag = tril(T.mT, -1), where(lead, T.diagonal(0, -2, -1).unsqueeze(-1), 1.0)
    y = zero.expand(*batch, k, w)
    for i in range(k):  # T^T y = c, forward; rows >= r: (0 - 0) / 1
        at = _step_masks(g, k, i)[0].reshape(k, 1)
        row = sum_(where(at, Tt, zero), -2, keepdim=True)
        y = where(at, div(sub(sum_(where(at, c, zero), -2, keepdim=True), matmul(row, y)),
                          sum_(where(at, diag, zero), -2, keepdim=True)), y)
    y = cat([y, zero.expand(*batch, n - k, w)], -2) if n > k else y
    for j in reversed(range(k)):  # y = Z [y; 0] = H_0 ... H_{k-1} [y; 0]
        at_c = _step_masks(g, k, j)[0]
        y = _reflect(_column(V, at_c), _column(taus, at_c), y)
    return matmul(P, y), rank.reshape(*batch)


def _pinv_backward(gG: GraphTensor, G: GraphTensor, A: GraphTensor) -> GraphTensor:  # noqa: N803
    """torch's ``pinv_backward``: the gradient with respect to ``A`` (..., m, n) of a loss whose
    gradient with respect to ``G = pinv(A)`` is ``gG``, the derivative of the pseudo-inverse at
    fixed rank (the products ordered to keep the smaller of m and n inside)."""
    m, n = A.shape[-2], A.shape[-1]
    Gt, gGt = G.mT, gG.mT
    if m <= n:
        K = matmul(gGt, G)
        KGt = matmul(K, Gt)
        return add(sub(add(mul(matmul(G, K).mT, -1.0), KGt), matmul(matmul(A, G), KGt)),
                   matmul(matmul(Gt, G), sub(gGt, matmul(K, A))))
    K = matmul(G, gGt)
    GtK = matmul(Gt, K)
    return add(add(mul(matmul(K, G).mT, -1.0), matmul(matmul(sub(gGt, matmul(A, K)), G), Gt)),
               sub(GtK, matmul(matmul(GtK, G), A)))


def _lstsq_vjp(x: GraphTensor, A: GraphTensor, b: GraphTensor, m: int, n: int, rcond: float) -> GraphTensor:  # noqa: N803
    """``x`` (gelsy's solution of ``A x = b``, a whole node) with torch's gradient
    (``linalg_lstsq_backward``): that of ``pinv(A) @ b``, ``G = pinv(A)`` here gelsy's solution for
    ``b = I`` (the pseudo-inverse of A truncated to gelsy's rank). For a full-rank ``A`` it is the
    derivative of the solution; at a rank-deficient one, differentiating the algorithm would give
    the derivative of its truncation of R (an oblique projection onto the rank-r matrices), not
    torch's. torch's G is ``linalg.pinv``'s with its default cut-off whatever rcond: the two agree
    for the default rcond on a spectrum with a clear gap."""
    def rule(out, adjoint, A, b):  # noqa: N803
        with renamed("lstsq"):  # as inside the op, so that the pivoted QR is the forward pass's nodes
            G, _ = _gelsy(A, eye(m, dtype=A.dtype, graph=A.graph).expand(*A.shape[:-2], m, m), m, n, rcond)
        return [_pinv_backward(matmul(adjoint, b.mT), G, A), matmul(G.mT, adjoint)]

    return A.graph.custom_vjp(x, [A, b], rule)


class LstsqResult(NamedTuple):
    """``lstsq``'s result, as torch's ``torch.return_types.linalg_lstsq``."""

    solution: GraphTensor
    residuals: GraphTensor
    rank: GraphTensor
    singular_values: GraphTensor


LSTSQ_DRIVERS = ("gels", "gelsy", "gelsd", "gelss")


@float32_under_autocast
@tensor_op("lstsq")
def lstsq(A: GraphTensor, B: GraphTensor, rcond=None, *, driver=None) -> LstsqResult:  # noqa: N803 - torch's names
    """torch.linalg.lstsq: the least-squares solution ``X`` of ``A X = B`` (the minimum-norm one for a
    wide ``A``), as torch's CPU drivers. ``"gelsy"`` (the default), for any ``A``: QR with column
    pivoting, the rank r from R by LAPACK's incremental condition estimation against ``rcond``, and
    the minimum-norm solution of the problem truncated to rank r (``_gelsy``), with torch's
    gradient, that of ``pinv(A) @ B`` (torch's pinv cuts at its own default tolerance whatever
    rcond: the same for the default rcond on a spectrum with a clear gap). ``"gels"``: Householder
    QR (of ``A``, or of ``A.mT`` when m < n), for full-rank ``A`` only. ``"gelsd"``/``"gelss"``:
    from the SVD, dropping the singular values at or below ``rcond * S.max()``.
    The other fields as torch's: ``residuals`` (the squared residual norms, per column of B, when
    m > n and the driver is not gelsy; torch leaves them empty for a rank-deficient ``A`` too, which
    a graph cannot check: they are computed), ``rank`` (int32; gels leaves it empty) and
    ``singular_values`` (gelsd/gelss, without a gradient, as torch's; else empty).
    gelsy's rank is reference LAPACK's: torch's MKL build can differ on borderline matrices, and
    torch 2.13 passes gelsy uninitialised column pins (pytorch/pytorch#71222), so that on a matrix
    with dependent leading columns its rank and solution vary from call to call; this one pivots
    every column, as gelsy with a zeroed ``jpvt``.
    Static sizes, m, n <= 64 (the SVD drivers: min(m, n) <= 16).

    Args:
        A: a float32/float64 tensor (*, m, n).
        B: the right-hand sides, of A's dtype: (*, m, k), or (*, m) for one.
        rcond: the relative cut-off (None: ``eps * max(m, n)``).
        driver: None (``"gelsy"``), ``"gels"``, ``"gelsy"``, ``"gelsd"`` or ``"gelss"``.
    """
    from luminal.frontend.ops.core import broadcast_shapes
    from luminal.frontend.ops.linalg_decomp import qr
    from luminal.frontend.ops.linalg_triangular import solve_triangular

    driver = "gelsy" if driver is None else driver
    if driver not in LSTSQ_DRIVERS:
        raise op_error(ValueError, "lstsq", f"driver must be one of {LSTSQ_DRIVERS}, got {driver!r}", A)
    m, n = _matrix("lstsq", A, limit=DECOMP_LIMIT)
    if B.dtype is not A.dtype:
        raise op_error(TypeError, "lstsq", f"B must have A's dtype {A.dtype.name}, got {B.dtype.name}", A, B)
    vector = B.ndim == A.ndim - 1
    b = B.unsqueeze(-1) if vector else B
    if b.ndim < 2 or b.shape[-2] != m:
        raise op_error(ValueError, "lstsq", f"B {shape_str(B.shape)} does not match A {shape_str(A.shape)}: "
                       f"B needs {m} rows", A, B)
    if rcond is not None and (isinstance(rcond, bool) or not isinstance(rcond, (int, float))):
        raise op_error(TypeError, "lstsq", f"rcond must be a number or None, got {rcond!r}", A)
    rcond = dt.finfo(A.dtype).eps * max(m, n) if rcond is None else float(rcond)
    batch = broadcast_shapes("lstsq", A, b, shapes=[A.shape[:-2], b.shape[:-2]])
    A, b = A.expand(*batch, m, n), b.expand(*batch, m, b.shape[-1])
    empty = zeros(0, dtype=A.dtype, graph=A.graph)
    if driver in ("gelsd", "gelss"):
        U, S, Vh = _svd("lstsq", A)
        keep = gt(S, mul(amax(S, -1, keepdim=True), rcond)) if S.shape[-1] else eq(S, S)
        inv_s = where(keep, div(1.0, where(keep, S, 1.0)), 0.0)
        x = matmul(mul(Vh.mT, inv_s.unsqueeze(-2)), matmul(U.mT, b))
        rank, values = sum_(cast(keep, dt.int32), -1), S.detach()  # (no gradient, as torch's)
    elif driver == "gelsy":
        x, rank = _gelsy(A, b, m, n, rcond)
        x, values = _lstsq_vjp(x.contiguous(), A, b, m, n, rcond), empty
    else:
        if m >= n:
            Q, R = qr(A)
            x = solve_triangular(R, matmul(Q.mT, b), upper=True)
        else:
            Q, R = qr(A.mT)
            x = matmul(Q, solve_triangular(R.mT, b, upper=False))
        rank, values = zeros(0, dtype=dt.int32, graph=A.graph), empty
    if m > n and driver != "gelsy":
        r = sub(matmul(A, x), b)
        residuals = sum_(mul(r, r), -2)
        residuals = residuals.squeeze(-1) if vector else residuals
    else:
        residuals = empty
    return LstsqResult(x.squeeze(-1) if vector else x, residuals, rank, values)
