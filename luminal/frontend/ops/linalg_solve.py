"""Dense square-matrix algorithms for a static size n, unrolled over n: ``inv`` and ``solve`` by
Gauss-Jordan elimination with partial pivoting, ``det`` and ``slogdet`` from the same pivots, and
``cholesky`` column by column (batched over any leading dims).

Each step is ordinary ops (argmax, one-hot row swaps as ``where``, broadcast multiply-subtract), so
gradients come from autograd through the elimination, and every backend runs them. The pivot is the
largest magnitude in its column (argmax), which keeps the elimination stable on the well-conditioned
matrices these are meant for. Singular (or, for cholesky, non positive-definite) inputs cannot raise
from data in a compiled graph: ``inv`` and ``solve`` give inf/NaN where torch raises, ``cholesky`` NaN
from the first non-positive pivot on (a positive semi-definite matrix with an exactly zero pivot and
zeros below it gets a valid factor with a 0 on its diagonal), and a singular matrix's ``det`` is 0 and
``slogdet`` (0, -inf), as torch's. ``det``'s gradient there is finite; where a zero pivot is not the
last one it lacks the cofactor terms of that pivot's column (torch's is not the cofactor matrix
either)."""

from __future__ import annotations

from typing import NamedTuple

from luminal.core import dtype as dt
from luminal.core.errors import op_error
from luminal.core.symbolic import is_static, shape_str
from luminal.frontend.checks import check_tensors, tensor_op
from luminal.frontend.float32_ops import float32_under_autocast
from luminal.frontend.ops.combine import cat, stack
from luminal.frontend.ops.core import broadcast_shapes
from luminal.frontend.ops.creation import eye
from luminal.frontend.ops.elementwise import abs_, add, clone, div, eq, ge, gt, log, lt, mul, ne, sign, sqrt, sub, where
from luminal.frontend.ops.reduce import argmax
from luminal.frontend.ops.reduce import sum as sum_
from luminal.frontend.tensor import GraphTensor


def _square(op: str, a: GraphTensor) -> int:
    """``a``'s static matrix size n, after checking that it is a float (..., n, n) tensor."""
    if a.ndim < 2:
        raise op_error(ValueError, op, f"expected a (*, n, n) matrix, got {shape_str(a.shape)}", a)
    n, m = a.shape[-2], a.shape[-1]
    if not (is_static(n) and is_static(m)):
        raise op_error(ValueError, op, f"needs a static matrix size (the algorithm is unrolled over n), got "
                       f"{shape_str(a.shape)}", a)
    if n != m:
        raise op_error(ValueError, op, f"expected a square matrix, got {shape_str(a.shape)}", a)
    if a.dtype.name not in ("float32", "float64"):
        raise op_error(TypeError, op, f"needs a float32 or float64 tensor, got {a.dtype.name}", a)
    return n


def _pivot(m: GraphTensor, k: int, n: int):
    """``m`` (..., n, w) with row ``k`` swapped with the row ``p >= k`` of largest ``|m[p, k]|``
    (a one-hot swap), and ``p`` (int32, (..., 1, 1))."""
    rows = m.graph.arange(n).reshape(n, 1)
    mag = where(lt(rows, k), -1.0, abs_(m[..., :, k:k + 1]))  # rows above k are done
    p = argmax(mag, -2, keepdim=True)  # (..., 1, 1)
    is_p, is_k = eq(rows, p), eq(rows, k)  # (..., n, 1), (n, 1)
    zero = m.graph.constant(0, m.dtype)
    row_p = sum_(where(is_p, m, zero), -2, keepdim=True)
    row_k = m[..., k:k + 1, :]
    return where(is_k, row_p, where(is_p, row_k, m)), p


def _eliminate(m: GraphTensor, n: int, *, skip_zero_pivots: bool = False):
    """Gauss-Jordan on ``m`` (..., n, w): the reduced matrix (its first n columns the identity), the
    pivots (each (..., 1, 1)) and the swap flags.

    A zero pivot (its column is zero from row k down: the matrix is singular) divides by zero, so that
    ``inv``/``solve`` give inf/NaN. With ``skip_zero_pivots`` (``det``/``slogdet``, which need only
    the pivots) that step divides by 1 instead, as LAPACK's getrf skips the column: the rows below
    are unchanged, the later pivots stay finite and the product of the pivots is exactly 0 (not the
    NaN of 0/0 reaching every later pivot), with finite gradients."""
    rows = m.graph.arange(n).reshape(n, 1)
    pivots, swaps = [], []
    for k in range(n):
        m, p = _pivot(m, k, n)
        piv = m[..., k:k + 1, k:k + 1]
        r = div(m[..., k:k + 1, :], where(eq(piv, 0), 1.0, piv) if skip_zero_pivots else piv)
        m = where(eq(rows, k), r, sub(m, mul(m[..., :, k:k + 1], r)))
        pivots.append(piv)
        swaps.append(ne(p, k))
    return m, pivots, swaps


@float32_under_autocast
@tensor_op("inv")
def inv(A: GraphTensor) -> GraphTensor:  # noqa: N803 - torch's name
    """torch.linalg.inv: the inverse of each square matrix of ``A`` (Gauss-Jordan with partial pivoting,
    for a static size n; a singular matrix gives inf/NaN where torch raises).

    Args:
        A: a float32/float64 tensor (*, n, n).
    """
    n = _square("inv", A)
    aug = cat([A, eye(n, dtype=A.dtype, graph=A.graph).expand(*A.shape)], -1)
    m, _, _ = _eliminate(aug, n)
    return m[..., :, n:]


@float32_under_autocast
@tensor_op("solve")
def solve(A: GraphTensor, B: GraphTensor, *, left: bool = True) -> GraphTensor:  # noqa: N803 - torch's names
    """torch.linalg.solve: ``X`` with ``A @ X = B`` (``left=False``: ``X @ A = B``), by Gauss-Jordan
    with partial pivoting on ``[A | B]``. ``B`` is a batch of vectors when it is 1-d or has ``A``'s
    shape less the last dim, else of matrices (*, n, k); batch dims broadcast.

    Args:
        A: a float32/float64 tensor (*, n, n).
        B: the right-hand side, of A's dtype: (*, n) or (*, n, k) (for ``left=False``, (*, k, n)).
        left: solve ``A X = B`` (True) or ``X A = B``.
    """
    check_tensors("solve", A=A, B=B)
    n = _square("solve", A)
    if B.dtype is not A.dtype:
        raise op_error(TypeError, "solve", f"B must have A's dtype {A.dtype.name}, got {B.dtype.name}", A, B)
    vector = B.ndim == 1 or (B.ndim == A.ndim - 1 and tuple(B.shape) == tuple(A.shape[:-1]))
    b = B.unsqueeze(-1) if vector else B
    if b.ndim < 2 or b.shape[-2 if left else -1] != n:
        raise op_error(ValueError, "solve", f"B {shape_str(B.shape)} does not match A {shape_str(A.shape)}", A, B)
    if not left:
        if vector:
            raise op_error(ValueError, "solve", "left=False needs B as a matrix (*, k, n)", A, B)
        return solve(A.transpose(-2, -1), B.transpose(-2, -1)).transpose(-2, -1)
    batch = broadcast_shapes("solve", A, b, shapes=[A.shape[:-2], b.shape[:-2]])
    aug = cat([A.expand(*batch, n, n), b.expand(*batch, n, b.shape[-1])], -1)
    m, _, _ = _eliminate(aug, n)
    x = m[..., :, n:]
    return x.squeeze(-1) if vector else x


def _lu_parts(op: str, A: GraphTensor):
    """``(sign, pivots)`` of ``A``'s elimination: the permutation's sign (..., 1, 1) and the pivots."""
    n = _square(op, A)
    _, pivots, swaps = _eliminate(A, n, skip_zero_pivots=True)
    s = A.graph.constant(1.0, A.dtype)
    for swapped in swaps:
        s = where(swapped, mul(s, -1.0), s)
    return s, pivots


@float32_under_autocast
@tensor_op("det")
def det(A: GraphTensor) -> GraphTensor:  # noqa: N803 - torch's name
    """torch.linalg.det: the determinant of each square matrix of ``A``: the product of the pivots of
    an elimination with partial pivoting, signed by the row swaps (static size n); exactly 0 for a
    matrix whose elimination meets a zero pivot.

    Args:
        A: a float32/float64 tensor (*, n, n).
    """
    s, pivots = _lu_parts("det", A)
    out = s
    for piv in pivots:
        out = mul(out, piv)
    return _unmat(out, A)


def _unmat(t: GraphTensor, A: GraphTensor) -> GraphTensor:
    """A (..., 1, 1) (or scalar) result as ``A``'s batch shape."""
    return t.expand(*A.shape[:-2], 1, 1).reshape(tuple(A.shape[:-2]))


class SlogdetResult(NamedTuple):
    """``slogdet``'s result, as torch's ``torch.return_types.slogdet``: ``sign`` and ``logabsdet``."""

    sign: GraphTensor
    logabsdet: GraphTensor


@float32_under_autocast
@tensor_op("slogdet")
def slogdet(A: GraphTensor) -> tuple[GraphTensor, GraphTensor]:  # noqa: N803 - torch's name
    """torch.linalg.slogdet: ``(sign, logabsdet)`` of each square matrix of ``A``, with
    ``det = sign * exp(logabsdet)``, from the pivots (sum of their log magnitudes). A singular matrix
    gives sign 0 and -inf.

    Args:
        A: a float32/float64 tensor (*, n, n).
    """
    s, pivots = _lu_parts("slogdet", A)
    logabs = A.graph.constant(0.0, A.dtype)
    for piv in pivots:
        s = mul(s, sign(piv))
        logabs = add(logabs, log(abs_(piv)))
    return SlogdetResult(_unmat(s, A), _unmat(logabs, A))


@float32_under_autocast
@tensor_op("cholesky")
def cholesky(A: GraphTensor, upper: bool = False) -> GraphTensor:  # noqa: N803 - torch's name
    """torch.linalg.cholesky: the lower-triangular ``L`` with ``A = L @ L.mT`` (``upper``: ``L.mT``),
    column by column (static size n). Only ``A``'s lower triangle is read, and the gradient is
    symmetric, as torch's. A matrix that is not positive-definite gives NaN where torch
    raises.

    Args:
        A: a symmetric positive-definite float32/float64 tensor (*, n, n).
        upper: return the upper-triangular factor ``L.mT`` instead.
    """
    low, _ = _cholesky("cholesky", A)
    return low.transpose(-2, -1) if upper else low


def _cholesky(op: str, A: GraphTensor) -> tuple[GraphTensor, list[GraphTensor]]:  # noqa: N803
    """``cholesky``'s lower factor of ``A`` and the values whose square roots are its diagonal (each
    (..., 1): > 0 exactly where the leading minors are positive-definite; ``cholesky_ex``'s info)."""
    n = _square(op, A)
    if n == 0:  # an empty factor (no columns to stack)
        return clone(A), []
    rows = A.graph.arange(n)
    # the values of A's lower triangle mirrored (torch reads only that), the gradient of (A + A.mT) / 2
    lower = where(ge(rows.reshape(n, 1), rows), A, A.transpose(-2, -1))
    half = div(add(A, A.transpose(-2, -1)), 2.0)
    s = add(lower.detach(), sub(half, half.detach()))
    zero = A.graph.constant(0, A.dtype)
    cols: list[GraphTensor] = []
    pivots: list[GraphTensor] = []
    for j in range(n):
        c = s[..., :, j]  # (..., n)
        for col in cols:
            c = sub(c, mul(col, col[..., j:j + 1]))
        pivots.append(c[..., j:j + 1])
        d = sqrt(pivots[-1])
        cols.append(where(gt(rows, j), div(c, d), where(eq(rows, j), d, zero)))
    return stack(cols, -1), pivots


def _no_check_errors(op: str, check_errors, *ts) -> None:
    """``check_errors=True`` asks to raise from the matrix's values, which a lazy graph cannot."""
    if check_errors:
        raise op_error(NotImplementedError, op, "check_errors=True is not supported: a compiled graph cannot raise "
                       "from its values; read the returned info (0: success) instead", *ts)


def _info(bad: list, A: GraphTensor) -> GraphTensor:
    """torch's ``info``: the 1-based index of the first step whose flag in ``bad`` (each (..., 1, 1))
    is set, 0 where none is, as int32 of ``A``'s batch shape."""
    info = A.graph.constant(0, dt.int32)
    for k in reversed(range(len(bad))):
        info = where(bad[k], A.graph.constant(k + 1, dt.int32), info)
    return _unmat(info, A)
