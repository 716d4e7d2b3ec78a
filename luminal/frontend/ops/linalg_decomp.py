"""Matrix decompositions for static sizes, unrolled over the matrix's steps: LU with partial pivoting
(``lu_factor``, ``lu_factor_ex``, ``lu``, ``lu_solve``) and Householder QR (``qr``,
``householder_product``).

Each step is ordinary ops on the whole (batched) matrix with row/column masks, so autograd gives the
gradients (the pivot choices are locally constant) and every backend runs them. The steps follow
LAPACK's (getrf's pivots: the first largest magnitude of the column; geqrf's reflectors: ``beta =
-sign(alpha) * norm`` with sign(0) = +1), so that the factors equal torch's, not only up to signs.
A step is a handful of nodes: sizes up to 64 (``DECOMP_LIMIT``) are accepted."""

from __future__ import annotations

from typing import NamedTuple

from luminal.core import dtype as dt
from luminal.core.errors import op_error
from luminal.core.symbolic import shape_str
from luminal.frontend.checks import check_tensors, tensor_op
from luminal.frontend.float32_ops import float32_under_autocast
from luminal.frontend.ops.combine import cat
from luminal.frontend.ops.core import broadcast_shapes, cast
from luminal.frontend.ops.creation import eye, tril, triu, zeros
from luminal.frontend.ops.elementwise import add, div, eq, ge, gt, mul, neg, sqrt, sub, where
from luminal.frontend.ops.linalg_solve import _info, _matrix, _no_check_errors, _pivot
from luminal.frontend.ops.linalg_triangular import substitute
from luminal.frontend.ops.reduce import sum as sum_
from luminal.frontend.tensor import GraphTensor

DECOMP_LIMIT = 64


def _no_pivot(op: str, pivot, A: GraphTensor) -> None:  # noqa: N803
    if not pivot:
        raise op_error(NotImplementedError, op, "pivot=False (LU without pivoting) is not supported, as on torch's "
                       "CPU", A)


def _lu(A: GraphTensor, m: int, n: int):  # noqa: N803
    """getrf on ``A`` (..., m, n): the packed factors (L's multipliers below the diagonal, U on and
    above it), the 0-based pivot rows (each (..., 1, 1) int32), the pivots ``U[j, j]`` and the row
    permutation ``Q`` (..., m, m) with ``Q A = L U``. A zero pivot (its column zero from the diagonal
    down) divides by 1 instead, as getrf skips that column."""
    rows = A.graph.arange(m).reshape(m, 1)
    cols = A.graph.arange(n)
    aug = cat([A, eye(m, dtype=A.dtype, graph=A.graph).expand(*A.shape[:-2], m, m)], -1)
    perm, diag = [], []
    for j in range(min(m, n)):
        aug, p = _pivot(aug, j, m)
        perm.append(p)
        lu = aug[..., :, :n]
        piv = lu[..., j:j + 1, j:j + 1]
        diag.append(piv)
        mult = div(lu[..., :, j:j + 1], where(eq(piv, 0), 1.0, piv))
        below = where(gt(cols, j), sub(lu, mul(mult, lu[..., j:j + 1, :])), where(eq(cols, j), mult, lu))
        aug = cat([where(gt(rows, j), below, lu), aug[..., :, n:]], -1)
    return aug[..., :, :n], perm, diag, aug[..., :, n:]


def _pivots(perm: list, A: GraphTensor) -> GraphTensor:  # noqa: N803
    """The 0-based pivot rows as torch's LU_pivots: 1-based int32 (..., k)."""
    return add(cat([p.squeeze(-1) for p in perm], -1), 1) if perm else cast(sum_(A[..., :0], -2), dt.int32)


class LUFactorResult(NamedTuple):
    """``lu_factor``'s result, as torch's ``torch.return_types.linalg_lu_factor``."""

    LU: GraphTensor  # noqa: N815 - torch's name
    pivots: GraphTensor


class LUFactorExResult(NamedTuple):
    """``lu_factor_ex``'s result, as torch's ``torch.return_types.linalg_lu_factor_ex``."""

    LU: GraphTensor  # noqa: N815 - torch's name
    pivots: GraphTensor
    info: GraphTensor


class LUResult(NamedTuple):
    """``lu``'s result, as torch's ``torch.return_types.linalg_lu``: ``A = P @ L @ U``."""

    P: GraphTensor  # noqa: N815 - torch's names
    L: GraphTensor  # noqa: N815
    U: GraphTensor  # noqa: N815


@float32_under_autocast
@tensor_op("lu_factor")
def lu_factor(A: GraphTensor, *, pivot: bool = True) -> LUFactorResult:  # noqa: N803 - torch's names
    """torch.linalg.lu_factor: ``(LU, pivots)``, the LU factorisation with partial pivoting of each
    (m, n) matrix of ``A`` packed as LAPACK's getrf (L's unit diagonal implied) and the pivots
    (int32 (*, min(m, n)), 1-based: row ``i`` was swapped with row ``pivots[i] - 1`` at step ``i``).
    Unrolled over min(m, n) steps; m, n <= 64 and static.

    Args:
        A: a float32/float64 tensor (*, m, n).
        pivot: True; False (no pivoting) is refused, as on torch's CPU.
    """
    LU, pivots, _ = _factor("lu_factor", A, pivot)
    return LUFactorResult(LU, pivots)


def _factor(op: str, A: GraphTensor, pivot) -> LUFactorExResult:  # noqa: N803
    _no_pivot(op, pivot, A)
    m, n = _matrix(op, A, limit=DECOMP_LIMIT)
    LU, perm, diag, _ = _lu(A, m, n)
    return LUFactorExResult(LU, _pivots(perm, A), _info([eq(d, 0) for d in diag], A))


@float32_under_autocast
@tensor_op("lu_factor_ex")
def lu_factor_ex(A: GraphTensor, *, pivot: bool = True, check_errors: bool = False) -> LUFactorExResult:  # noqa: N803
    """torch.linalg.lu_factor_ex: ``lu_factor``'s ``(LU, pivots)`` and ``info``: 0, or the 1-based
    index of the first zero pivot (U is singular), int32 of A's batch shape.

    Args:
        A: a float32/float64 tensor (*, m, n), m, n <= 64.
        pivot: True; False is refused, as on torch's CPU.
        check_errors: refused when True (a compiled graph cannot raise from its values).
    """
    _no_check_errors("lu_factor_ex", check_errors, A)
    return _factor("lu_factor_ex", A, pivot)


@float32_under_autocast
@tensor_op("lu")
def lu(A: GraphTensor, *, pivot: bool = True) -> LUResult:  # noqa: N803 - torch's names
    """torch.linalg.lu: ``(P, L, U)`` with ``A = P @ L @ U``: P a permutation matrix (m, m), L unit
    lower-triangular (m, k), U upper-triangular (k, n), k = min(m, n); ``lu_factor``'s elimination.

    Args:
        A: a float32/float64 tensor (*, m, n), m, n <= 64.
        pivot: True; False is refused, as on torch's CPU.
    """
    _no_pivot("lu", pivot, A)
    m, n = _matrix("lu", A, limit=DECOMP_LIMIT)
    k = min(m, n)
    LU, _, _, Q = _lu(A, m, n)
    L = add(tril(LU[..., :, :k], -1), eye(m, k, dtype=A.dtype, graph=A.graph))
    return LUResult(Q.mT, L, triu(LU[..., :k, :]))


def _permute_rows(B: GraphTensor, pivots: GraphTensor, n: int, reverse: bool) -> GraphTensor:  # noqa: N803
    """``B`` (..., n, k) with rows ``i`` and ``pivots[i] - 1`` swapped for each i in order (``reverse``:
    in reverse order, the inverse permutation), as one-hot selections."""
    rows = B.graph.arange(n).reshape(n, 1)
    zero = B.graph.constant(0, B.dtype)
    for i in reversed(range(n)) if reverse else range(n):
        p = sub(pivots[..., i:i + 1], 1).unsqueeze(-1)  # (..., 1, 1)
        is_p, is_i = eq(rows, p), eq(rows, i)
        row_p = sum_(where(is_p, B, zero), -2, keepdim=True)
        B = where(is_i, row_p, where(is_p, B[..., i:i + 1, :], B))
    return B


@float32_under_autocast
@tensor_op("lu_solve")
def lu_solve(LU: GraphTensor, pivots: GraphTensor, B: GraphTensor, *, left: bool = True,  # noqa: N803
             adjoint: bool = False) -> GraphTensor:
    """torch.linalg.lu_solve: ``X`` with ``A X = B`` from ``lu_factor``'s ``(LU, pivots)`` of a square
    ``A`` (``adjoint``: ``A.mT X = B``; ``left=False``: ``X A = B``): the row swaps, then forward and
    back substitution (``solve_triangular``'s, n <= 64). Batch dims broadcast.

    Args:
        LU: the packed factors (*, n, n), float32/float64.
        pivots: the int32 pivots (*, n), 1-based.
        B: the right-hand side (*, n, k) (``left=False``: (*, k, n)), of LU's dtype.
        left: solve ``A X = B`` (True) or ``X A = B``.
        adjoint: solve with ``A``'s (conjugate) transpose.
    """
    check_tensors("lu_solve", LU=LU, pivots=pivots, B=B)
    m, n = _matrix("lu_solve", LU, limit=DECOMP_LIMIT)
    if m != n:
        raise op_error(ValueError, "lu_solve", f"LU must be square, got {shape_str(LU.shape)}", LU)
    if pivots.dtype is not dt.int32 or pivots.ndim < 1 or pivots.shape[-1] != n:
        raise op_error(TypeError if pivots.dtype is not dt.int32 else ValueError, "lu_solve",
                       f"pivots must be int32 (*, {n}), got {shape_str(pivots.shape)} {pivots.dtype.name}", LU, pivots)
    if B.dtype is not LU.dtype:
        raise op_error(TypeError, "lu_solve", f"B must have LU's dtype {LU.dtype.name}, got {B.dtype.name}", LU, B)
    if B.ndim < 2 or B.shape[-2 if left else -1] != n:
        raise op_error(ValueError, "lu_solve", f"B {shape_str(B.shape)} does not match LU {shape_str(LU.shape)} "
                       f"(left={left})", LU, B)
    if not left:
        return lu_solve(LU, pivots, B.mT, adjoint=not adjoint).mT
    batch = broadcast_shapes("lu_solve", LU, pivots, B, shapes=[LU.shape[:-2], pivots.shape[:-1], B.shape[:-2]])
    B = B.expand(*batch, n, B.shape[-1])
    pivots = pivots.expand(*batch, n)
    if adjoint:  # A.mT = U.mT L.mT P.mT: X = P (L.mT)^-1 (U.mT)^-1 B
        y = substitute(LU.mT, B, n, upper=False, unit=False)
        return _permute_rows(substitute(LU.mT, y, n, upper=True, unit=True), pivots, n, reverse=True)
    y = substitute(LU, _permute_rows(B, pivots, n, reverse=False), n, upper=False, unit=True)
    return substitute(LU, y, n, upper=True, unit=False)


def _householder(A: GraphTensor, m: int, n: int):  # noqa: N803
    """geqrf on ``A`` (..., m, n): R (upper-triangular, (..., m, n)), and per step j < min(m, n) the
    reflector ``v`` (..., m, 1) (0 above row j, 1 at it) and ``tau`` (..., 1, 1), ``H_j = I - tau v v^T``.
    LAPACK's dlarfg: ``beta = -sign(alpha) * |x|`` (sign(0) = +1), and ``tau = 0`` (H = I) where the
    column below the diagonal is already zero."""
    rows = A.graph.arange(m).reshape(m, 1)
    R = A
    vs, taus = [], []
    for j in range(min(m, n)):
        x = R[..., :, j:j + 1]
        alpha = x[..., j:j + 1, :]
        below = sum_(where(gt(rows, j), mul(x, x), 0.0), -2, keepdim=True)
        flat = eq(below, 0)
        norm = sqrt(add(mul(alpha, alpha), where(flat, 1.0, below)))
        beta = where(ge(alpha, 0), neg(norm), norm)
        tau = where(flat, 0.0, div(sub(beta, alpha), beta))
        scale = where(flat, 1.0, sub(alpha, beta))
        v = where(gt(rows, j), div(x, scale), cast(eq(rows, j), A.dtype))
        R = sub(R, mul(mul(tau, v), sum_(mul(v, R), -2, keepdim=True)))
        vs.append(v)
        taus.append(tau)
    return triu(R), vs, taus


def _apply_q(vs: list, taus: list, C: GraphTensor) -> GraphTensor:  # noqa: N803
    """``H_0 H_1 ... H_{k-1} C``, right to left."""
    for v, tau in zip(reversed(vs), reversed(taus)):
        C = sub(C, mul(mul(tau, v), sum_(mul(v, C), -2, keepdim=True)))
    return C


class QRResult(NamedTuple):
    """``qr``'s result, as torch's ``torch.return_types.linalg_qr``."""

    Q: GraphTensor  # noqa: N815 - torch's names
    R: GraphTensor  # noqa: N815


@float32_under_autocast
@tensor_op("qr")
def qr(A: GraphTensor, mode: str = "reduced") -> QRResult:  # noqa: N803 - torch's names
    """torch.linalg.qr: ``(Q, R)`` with ``A = Q R``, by Householder reflections as LAPACK's geqrf/orgqr
    (the same signs as torch's: R's diagonal is ``-sign(alpha) * norm``). ``mode``: ``"reduced"``
    (Q (m, k), R (k, n), k = min(m, n)), ``"complete"`` (Q (m, m), R (m, n)) or ``"r"`` (R only;
    Q an empty tensor, as torch's). Unrolled over k steps; m, n <= 64 and static.

    Args:
        A: a float32/float64 tensor (*, m, n).
        mode: ``"reduced"``, ``"complete"`` or ``"r"``.
    """
    if mode not in ("reduced", "complete", "r"):
        raise op_error(ValueError, "qr", f"mode must be 'reduced', 'complete' or 'r', got {mode!r}", A)
    m, n = _matrix("qr", A, limit=DECOMP_LIMIT)
    k = min(m, n)
    R, vs, taus = _householder(A, m, n)
    if mode == "r":
        return QRResult(zeros(0, dtype=A.dtype, graph=A.graph), R[..., :k, :])
    width = m if mode == "complete" else k
    Q = _apply_q(vs, taus, eye(m, width, dtype=A.dtype, graph=A.graph).expand(*A.shape[:-2], m, width))
    return QRResult(Q, R if mode == "complete" else R[..., :k, :])


@float32_under_autocast
@tensor_op("householder_product")
def householder_product(A: GraphTensor, tau: GraphTensor) -> GraphTensor:  # noqa: N803 - torch's names
    """torch.linalg.householder_product (LAPACK's orgqr): the first n columns of ``H_0 ... H_{k-1}``,
    ``H_j = I - tau_j v_j v_j^T`` with ``v_j`` column j of ``A`` below the diagonal and 1 on it.
    Unrolled over k steps; m, n <= 64 and static.

    Args:
        A: a float32/float64 tensor (*, m, n), m >= n.
        tau: the scales (*, k), k <= n, of A's dtype.
    """
    check_tensors("householder_product", A=A, tau=tau)
    m, n = _matrix("householder_product", A, limit=DECOMP_LIMIT)
    if m < n:
        raise op_error(ValueError, "householder_product", f"A must have at least as many rows as columns, got "
                       f"{shape_str(A.shape)}", A)
    if tau.dtype is not A.dtype:
        raise op_error(TypeError, "householder_product", f"tau must have A's dtype {A.dtype.name}, got "
                       f"{tau.dtype.name}", A, tau)
    if tau.ndim != A.ndim - 1 or tuple(tau.shape[:-1]) != tuple(A.shape[:-2]) or tau.shape[-1] > n:
        raise op_error(ValueError, "householder_product", f"tau must be (*, k) with A's batch dims and k <= "
                       f"{n}, got {shape_str(tau.shape)} for A {shape_str(A.shape)}", A, tau)
    rows = A.graph.arange(m).reshape(m, 1)
    vs = [where(gt(rows, j), A[..., :, j:j + 1], cast(eq(rows, j), A.dtype)) for j in range(tau.shape[-1])]
    taus = [tau[..., j:j + 1].unsqueeze(-1) for j in range(tau.shape[-1])]
    return _apply_q(vs, taus, eye(m, n, dtype=A.dtype, graph=A.graph).expand(*A.shape))
