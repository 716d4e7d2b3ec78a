"""Dense square-matrix algorithms for a static size n, unrolled over n: ``solve`` by Gauss-Jordan
elimination with partial pivoting, ``det`` and ``slogdet`` from the pivots of an LU with the same
pivoting (getrf's), ``inv`` from that LU's factors, and ``cholesky`` column by column (batched over any leading dims).

Each step is ordinary ops (argmax, one-hot row swaps as ``where``, broadcast multiply-subtract), so
gradients come from autograd through the elimination (``det``'s and ``slogdet``'s from rules of
their own, below), and every backend runs them. The pivot is the
largest magnitude in its column (argmax), which keeps the elimination stable on the well-conditioned
matrices these are meant for. Singular (or, for cholesky, non positive-definite) inputs cannot raise
from data in a compiled graph: ``inv`` and ``solve`` give inf/NaN where torch raises, ``cholesky`` NaN
from the first non-positive pivot on (a positive semi-definite matrix with an exactly zero pivot and
zeros below it gets a valid factor with a 0 on its diagonal), and a singular matrix's ``det`` is 0 and
``slogdet`` (0, -inf), as torch's. ``det``'s gradient is its own rule, the cofactor matrix, exact and
finite there too (torch's is 0 at some singular matrices); slogdet's is NaN there (it does not
exist). ``det``'s second derivative is exact at every matrix for n <= 8 (from the minors,
``_det_cofactors``); above, it comes from differentiating that rule's elimination: exact for a
regular matrix, not where the elimination meets a zero pivot before the last step."""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from luminal.core import dtype as dt
from luminal.core.errors import op_error, renamed
from luminal.core.symbolic import is_static, shape_str
from luminal.frontend.checks import check_tensors, tensor_op
from luminal.frontend.float32_ops import float32_under_autocast
from luminal.frontend.ops.combine import cat, stack
from luminal.frontend.ops.core import broadcast_shapes
from luminal.frontend.ops.elementwise import abs_, add, clone, div, eq, ge, gt, log, mul, ne, sign, sqrt, sub, where
from luminal.frontend.ops.indexing import index_select
from luminal.frontend.ops.linalg import matmul
from luminal.frontend.ops.reduce import _own_node, argmax
from luminal.frontend.ops.reduce import sum as sum_
from luminal.frontend.tensor import GraphTensor


def _matrix(op: str, A: GraphTensor, *, square: bool = False, limit: int | None = None) -> tuple[int, int]:  # noqa: N803
    """``A``'s static matrix sizes (m, n), after checking that it is a float32/float64 (..., m, n)
    tensor: with ``square``, m == n; with ``limit``, m, n <= limit (``check_size``). The linalg ops
    are unrolled over the matrix's steps, so the sizes must be static."""
    dims = "n, n" if square else "m, n"
    if A.ndim < 2:
        raise op_error(ValueError, op, f"expected a (*, {dims}) matrix, got {shape_str(A.shape)}", A)
    m, n = A.shape[-2], A.shape[-1]
    if not (is_static(m) and is_static(n)):
        raise op_error(ValueError, op, f"needs a static matrix size (the algorithm is unrolled over "
                       f"{'n' if square else 'it'}), got {shape_str(A.shape)}", A)
    if square and m != n:
        raise op_error(ValueError, op, f"expected a square matrix, got {shape_str(A.shape)}", A)
    if A.dtype.name not in ("float32", "float64"):
        raise op_error(TypeError, op, f"needs a float32 or float64 tensor, got {A.dtype.name}", A)
    if limit is not None:
        check_size(op, max(m, n), limit, A)
    return m, n


def check_size(op: str, n: int, limit: int, *ts) -> None:
    """Refuse a static matrix size above ``limit``: the unrolled graph would take too long to compile."""
    if n > limit:
        raise op_error(ValueError, op, f"is unrolled over the matrix size and supports n <= {limit}, got n = {n}",
                       *ts)


def _pivot(m: GraphTensor, k: int, n: int):
    """``m`` (..., n, w) with row ``k`` swapped with the row ``p >= k`` of largest ``|m[p, k]|``
    (a one-hot swap), and ``p`` (int32, (..., 1, 1)). Row and column k are read through step k's
    masks (``_step_masks``), so that the steps of an elimination roll into one loop."""
    at, above, _ = _step_masks(m.graph, n, k)
    mag = where(above.reshape(n, 1), -1.0, abs_(_column(m, at)))  # rows above k are done
    p = argmax(mag, -2, keepdim=True)  # (..., 1, 1)
    return _swap_rows(m, k, p, m.graph.arange(n).reshape(n, 1)), p


def _column(m: GraphTensor, at: GraphTensor) -> GraphTensor:
    """The column of ``m`` (..., n, w) where the mask ``at`` (n,) over its first n columns is set, as (..., n, 1)."""
    n = at.shape[0]
    return sum_(where(at, m[..., :, :n], m.graph.constant(0, m.dtype)), -1, keepdim=True)


def _swap_rows(m: GraphTensor, k: int, p: GraphTensor, rows: GraphTensor) -> GraphTensor:
    """``m`` (..., n, w) with its rows ``k`` and ``p`` (..., 1, 1) swapped; ``rows``: arange(n) as (n, 1)."""
    n = rows.shape[0]
    is_p, is_k = eq(rows, p), _step_masks(m.graph, n, k)[0].reshape(n, 1)  # (..., n, 1), (n, 1)
    zero = m.graph.constant(0, m.dtype)
    row_p, row_k = sum_(where(is_p, m, zero), -2, keepdim=True), sum_(where(is_k, m, zero), -2, keepdim=True)
    return where(is_k, row_p, where(is_p, row_k, m))


def _eliminate(m: GraphTensor, n: int, *, skip_zero_pivots: bool = False):
    """Gauss-Jordan on ``m`` (..., n, w): the reduced matrix (its first n columns the identity), the
    pivots (each (..., 1, 1)) and the swap flags.

    A zero pivot (its column is zero from row k down: the matrix is singular) divides by zero, so that
    ``inv``/``solve`` give inf/NaN. With ``skip_zero_pivots`` (``solve_ex``'s info, which needs only
    the pivots) that step divides by 1 instead, as getrf skips the column (``_getrf``)."""
    pivots, swaps = [], []
    zero = m.graph.constant(0, m.dtype)
    for k in range(n):
        m, p = _pivot(m, k, n)
        at = _step_masks(m.graph, n, k)[0]
        at_row = at.reshape(n, 1)
        row = sum_(where(at_row, m, zero), -2, keepdim=True)  # (..., 1, w)
        piv = _column(row, at)  # (..., 1, 1)
        r = div(row, where(eq(piv, 0), 1.0, piv) if skip_zero_pivots else piv)
        m = where(at_row, r, sub(m, mul(_column(m, at), r)))
        pivots.append(piv)
        swaps.append(ne(p, k))
    return m, pivots, swaps


@float32_under_autocast
@tensor_op("inv")
def inv(A: GraphTensor) -> GraphTensor:  # noqa: N803 - torch's name
    """torch.linalg.inv: the inverse of each square matrix of ``A`` (static size n), ``U^-1 L^-1 P`` from
    an LU with partial pivoting (``_cofactors``, slogdet's gradient); a singular matrix gives NaN
    where torch raises. Not Gauss-Jordan on ``[A | I]``: at 8x64x64 on the cpu backend that ran about
    twice as long (and its gradient too), for a compile about 1 s shorter.

    Args:
        A: a float32/float64 tensor (*, n, n).
    """
    _matrix("inv", A, square=True)
    return _cofactors(A, inverse=True).transpose(-2, -1)


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
    n, _ = _matrix("solve", A, square=True)
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


def _step_masks(g, n: int, k: int):
    """Step ``k``'s masks over ``range(n)`` (bool, (n,)): ``== k``, ``< k`` and ``> k``, as one constant
    leaf per step.

    The steps of an elimination then differ in a leaf alone and are copies of one body, which the
    compiler's loop rolling (``compiler/rolling``) compiles once for the n steps. A step reading row or
    column k through a slice (its offset k is part of the reader's code) or a mask computed from an
    arange and k (a computation per step outside the body) makes code that grows with n."""
    i = np.arange(n)
    both = g.constant(np.stack([i == k, i < k, i > k]), dt.bool_)
    return both[0], both[1], both[2]


def _getrf(A: GraphTensor, n: int):  # noqa: N803
    """LU with partial pivoting of ``A`` (..., n, n), as LAPACK's getrf: the packed factors (L's
    multipliers below the diagonal, U on and above it, of the rows permuted), the pivots ``U[k, k]``
    (each (..., 1, 1)) and the pivot rows (int32, (..., 1, 1)). A zero pivot (its column zero from
    the diagonal down: the matrix is singular) divides by 1 instead, as getrf skips the column: the
    rows below are unchanged and the later pivots stay finite, so the product of the pivots is
    exactly 0 (not the NaN of 0/0 reaching every later pivot)."""
    zero = A.graph.constant(0, A.dtype)
    m, pivots, swaps = A, [], []
    for k in range(n):
        m, p = _pivot(m, k, n)
        at, _, after = _step_masks(A.graph, n, k)
        below = after.reshape(n, 1)
        row = sum_(where(at.reshape(n, 1), m, zero), -2, keepdim=True)  # (..., 1, n)
        col, piv = _column(m, at), _column(row, at)
        mult = where(below, div(col, where(eq(piv, 0), 1.0, piv)), zero)  # 0 in rows <= k
        m = where(at, where(below, mult, col), sub(m, mul(mult, where(after, row, zero))))
        pivots.append(piv)
        swaps.append(p)
    return m, pivots, swaps


def _swap_sign(swaps: list, A: GraphTensor) -> GraphTensor:  # noqa: N803
    """The sign (+-1, (..., 1, 1) or scalar) of the permutation of ``_getrf``'s pivot rows."""
    s = A.graph.constant(1.0, A.dtype)
    for k, p in enumerate(swaps):
        s = where(ne(p, k), mul(s, -1.0), s)
    return s


def _lu_parts(op: str, A: GraphTensor):
    """``(sign, pivots)`` of ``A``'s elimination: the permutation's sign (..., 1, 1) and the pivots."""
    _, pivots, swaps = _getrf(A, _matrix(op, A, square=True)[0])
    return _swap_sign(swaps, A), pivots


@float32_under_autocast
@tensor_op("det")
def det(A: GraphTensor) -> GraphTensor:  # noqa: N803 - torch's name
    """torch.linalg.det: the determinant of each square matrix of ``A``: the product of the pivots of
    an elimination with partial pivoting, signed by the row swaps (static size n); exactly 0 for a
    matrix whose elimination meets a zero pivot. Its gradient is the cofactor matrix (``_cofactors``)
    for every matrix, singular ones included: differentiating the elimination instead loses, at a
    zero pivot, the terms of that pivot's column (the pivot is skipped there, not divided by).

    Args:
        A: a float32/float64 tensor (*, n, n).
    """
    s, pivots = _lu_parts("det", A)
    out = _tie_empty(s, A)
    for piv in pivots:
        out = mul(out, piv)
    out = _own_node(_unmat(out, A), "det")

    def rule(out, adjoint, A):  # noqa: N803
        with renamed("det"):  # as inside the op, so that the elimination is the forward pass's nodes
            return [mul(adjoint.unsqueeze(-1).unsqueeze(-1), _det_cofactors(A))]

    return A.graph.custom_vjp(out, [A], rule)


# the largest n whose det has an exact second derivative at every matrix (``_det_cofactors``)
EXACT_SECOND_ORDER_LIMIT = 8


def _det_cofactors(A: GraphTensor) -> GraphTensor:  # noqa: N803
    """``_cofactors(A)`` (det's gradient), for n <= ``EXACT_SECOND_ORDER_LIMIT`` with a gradient rule
    of its own, exact at every matrix: det's second derivative. Differentiating ``_cofactors``'
    elimination (as above the limit) is exact at a regular matrix but not where the elimination meets
    a zero pivot before its last step (the pivot's column is skipped there, as in ``det``).

    Each cofactor ``C[k, l]`` is ``(-1)^(k + l) det(M_kl)``, ``M_kl`` the minor of A without row k and
    column l, whose derivative along ``V`` is ``<cofactors(M_kl), V_kl>``; det's Hessian is
    symmetric, so the vector-Jacobian product with ``V`` is that derivative: the cofactors of the
    n^2 minors as one batch (``_minors``), themselves differentiable the same way. That is O(n^5)
    operations against the elimination's O(n^3) (at n = 16, a batch of 2 took ~46 ms a call on the
    cpu backend against ~0.1 ms), hence the limit; the first derivative is unchanged."""
    if A.shape[-1] > EXACT_SECOND_ORDER_LIMIT:
        return _cofactors(A)
    out = _own_node(_cofactors(A), "det")

    def rule(out, adjoint, A):  # noqa: N803
        k = np.arange(A.shape[-1])
        signs = A.graph.constant((-1.0) ** (k[:, None] + k), A.dtype)
        with renamed("det"):
            along = sum_(mul(_det_cofactors(_minors(A)), _minors(adjoint)), (-2, -1))
        return [mul(signs, along)]

    return A.graph.custom_vjp(out, [A], rule)


def _minors(A: GraphTensor) -> GraphTensor:  # noqa: N803
    """The (n - 1) x (n - 1) minors of each matrix of ``A`` (..., n, n), as (..., n, n, n - 1, n - 1):
    ``[k, l]`` is A without row k and column l (one gather)."""
    n, batch = A.shape[-1], tuple(A.shape[:-2])
    if n == 0:
        return A.reshape(*batch, 0, 0, 0, 0)
    kept = np.arange(n - 1) + (np.arange(n - 1) >= np.arange(n)[:, None])  # (n, n - 1): row/col indices without k
    flat = kept[:, None, :, None] * n + kept[None, :, None, :]  # (n, n, n - 1, n - 1)
    picked = index_select(A.reshape(*batch, n * n), -1, A.graph.constant(flat.reshape(-1), dt.int32))
    return picked.reshape(*batch, n, n, n - 1, n - 1)


def _cofactors(A: GraphTensor, *, inverse: bool = False) -> GraphTensor:  # noqa: N803
    """The cofactor matrix ``adj(A).mT`` of each matrix of ``A`` (..., n, n): ``det``'s gradient,
    finite for every matrix (``det(A) * inv(A).mT`` is 0/0 at a singular one), with no division but
    the elimination's by its nonzero pivots. ``inverse``: ``inv(A).mT`` from the same factors
    (slogdet's gradient; inf/NaN at a singular matrix).

    An LU with partial pivoting, as getrf (a zero pivot's column skipped), gives ``P A = L U`` with
    L unit lower triangular; ``adj(XY) = adj(Y) adj(X)`` for any square matrices, so
    ``adj(A) = adj(U) L^-1 adj(P^T) = s adj(U) L^-1 P`` (s: the swaps' sign). ``adj(U)`` is upper
    triangular: ``adj(U)[i, j] = W[i, j] * prod(d[:i]) * prod(d[j + 1:])`` (d: U's diagonal), where W
    is ``U^-1`` scaled by ``prod(d[i:j + 1])``: from ``U U^-1 = I``,
    ``W[i] = e_i - sum_{m > i} U[i, m] prod(d[i + 1:m]) W[m]``, rows from the last up, polynomials in
    U that stay finite where a pivot is 0 (``inverse``: ``U^-1`` itself, by back substitution, and
    ``inv(A) = U^-1 L^-1 P``). ``X = adj(U) L^-1`` solves ``X L = adj(U)`` column by column from the
    last."""
    n, g, batch = A.shape[-1], A.graph, tuple(A.shape[:-2])
    zero, one = g.constant(0, A.dtype), g.constant(1, A.dtype)
    if n == 0:  # empty, and computed from A (``_tie_empty``)
        return clone(A)
    rows, cols = g.arange(n).reshape(n, 1), g.arange(n)
    m, _, swaps = _getrf(A, n)
    d = sum_(where(eq(rows, cols), m, zero), -2, keepdim=True)  # (..., 1, n)
    # each step reads its row/column i through step i's masks (no slice at offset i), so that the
    # n steps of each loop below roll into one, as the elimination's (``_step_masks``)
    W = zero.expand(*batch, n, n)  # noqa: N806
    before = zero.expand(*batch, 1, n)  # row i's prod(d[i + 1:m]) at m > i; prod(d[:m]) after row 0
    for i in reversed(range(n)):
        at, _, after = _step_masks(g, n, i)
        at_row = at.reshape(n, 1)
        m_i, d_i = sum_(where(at_row, m, zero), -2, keepdim=True), _column(d, at)
        if inverse:
            row = div(_add_one_hot(mul(matmul(where(after, m_i, zero), W), -1.0), at), d_i)
        else:
            row = _add_one_hot(mul(matmul(mul(m_i, before), W), -1.0), at)
            before = _add_one_hot(mul(d_i, before), at)
        W = where(at_row, row, W)  # noqa: N806
    if inverse:
        upper, s = W, one
    else:
        after_d = zero.expand(*batch, 1, n)  # prod(d[j + 1:]) once every column is in
        for j in range(n):
            at = _step_masks(g, n, j)[0]
            after_d = _add_one_hot(mul(_column(d, at), after_d), at)
        upper, s = mul(mul(before.transpose(-2, -1), W), after_d), _swap_sign(swaps, A)
    X = zero.expand(*batch, n, n)  # noqa: N806
    for j in reversed(range(n)):
        at, _, after = _step_masks(g, n, j)
        l_col = where(after.reshape(n, 1), _column(m, at), zero)  # L's column j below the diagonal
        X = where(at, sub(_column(upper, at), matmul(X, l_col)), X)  # noqa: N806
    perm = rows.expand(*batch, n, 1)  # P[i, perm[i]] = 1
    for k, p in enumerate(swaps):
        perm = _swap_rows(perm, k, p, rows)
    return mul(s, matmul(X, where(eq(perm, cols), one, zero))).transpose(-2, -1)


def _add_one_hot(t: GraphTensor, at: GraphTensor) -> GraphTensor:
    """``t`` plus 1 where the step mask ``at`` is set (``t + e_k``). Not ``add(t, where(at, 1, 0))``:
    that one-hot depends on the step's constant leaf alone, so it is computed outside the rolled loop,
    one kernel per step."""
    return where(at, add(t, 1.0), t)


def _tie_empty(t: GraphTensor, A: GraphTensor) -> GraphTensor:  # noqa: N803
    """``t`` plus the sum of ``A``'s entries (exactly 0) when ``A`` is 0 x 0, else ``t``. An empty
    matrix's det (1) and logabsdet (0) would be constants, which ``train.grad`` takes for unused by
    the loss (an error without ``allow_unused``); torch's gradient is an empty tensor, as the rules'."""
    return add(t, sum_(A, (-2, -1), keepdim=True)) if A.shape[-1] == 0 else t


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
    gives sign 0 and -inf. logabsdet's gradient is ``inv(A).mT``; at a singular matrix it does not
    exist (a change t of an entry with a nonzero cofactor changes logabsdet by about log|t|, one with
    a zero cofactor leaves it -inf) and is NaN in every entry, where differentiating the elimination
    gave finite values in some (torch's mixes inf, NaN and finite values there).

    Args:
        A: a float32/float64 tensor (*, n, n).
    """
    s, pivots = _lu_parts("slogdet", A)
    logabs = _tie_empty(A.graph.constant(0.0, A.dtype), A)
    for piv in pivots:
        s = mul(s, sign(piv))
        logabs = add(logabs, log(abs_(piv)))
    logabs = _own_node(_unmat(logabs, A), "slogdet")

    def rule(out, adjoint, A):  # noqa: N803
        singular = eq(out, -math.inf).unsqueeze(-1).unsqueeze(-1)
        with renamed("slogdet"):  # as inside the op, so that the elimination is the forward pass's nodes
            inv_t = _cofactors(A, inverse=True)
        return [mul(adjoint.unsqueeze(-1).unsqueeze(-1), where(singular, math.nan, inv_t))]

    return SlogdetResult(_unmat(s, A), A.graph.custom_vjp(logabs, [A], rule))


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
    n, _ = _matrix(op, A, square=True)
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
