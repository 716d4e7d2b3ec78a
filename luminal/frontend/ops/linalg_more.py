"""The thin ``torch.linalg`` names, built from luminal's products, norms and the eliminations of
``linalg_solve.py``: ``vecdot``, ``vander``, ``matrix_power``, ``norm``, ``tensorinv``,
``tensorsolve``, ``matrix_exp``, the ``*_ex`` variants (the result and torch's ``info``) and
``LinAlgError``.

A compiled graph cannot raise from the values it computes, so the ``*_ex`` variants are how a port
learns that a matrix was singular (``info``); their ``check_errors=True`` (raise from the data) is
refused at build time."""

from __future__ import annotations

import math
from typing import NamedTuple

from luminal.core.errors import check_int, op_error
from luminal.core.symbolic import is_static, shape_str
from luminal.frontend.checks import check_tensors, tensor_op
from luminal.frontend.float32_ops import float32_under_autocast
from luminal.frontend.ops.combine import stack
from luminal.frontend.ops.core import power_by_squaring, require
from luminal.frontend.ops.creation import eye, ones_like
from luminal.frontend.ops.elementwise import (
    add,
    ceil,
    div,
    eq,
    exp2,
    gt,
    log2,
    logical_not,
    lt,
    maximum,
    mul,
    neg,
    sub,
    where,
)
from luminal.frontend.ops.linalg import matmul
from luminal.frontend.ops.linalg_solve import (
    _cholesky,
    _eliminate,
    _getrf,
    _info,
    _matrix,
    _no_check_errors,
    inv,
    solve,
)
from luminal.frontend.ops.linalg_spectral import _svd
from luminal.frontend.ops.movement import movedim
from luminal.frontend.ops.norms import matrix_norm, vector_norm
from luminal.frontend.ops.reduce import sum as sum_
from luminal.frontend.tensor import GraphTensor


class LinAlgError(RuntimeError):
    """torch.linalg.LinAlgError (a RuntimeError, as torch's). luminal's graphs are lazy: a singular
    matrix's ``inv``/``solve`` give inf/NaN and its ``*_ex`` variant's ``info`` is nonzero, nothing
    raises from the data; this class is here so that a port's ``except LinAlgError`` still names a
    type."""


def vecdot(x: GraphTensor, y: GraphTensor, *, dim: int = -1) -> GraphTensor:
    """torch.linalg.vecdot: the dot product of the vectors along ``dim`` of ``x`` and ``y``
    (broadcast against each other), ``sum(x * y, dim)`` for real tensors.

    Args:
        x: a float tensor.
        y: a float tensor of ``x``'s dtype.
        dim: the dim of the vectors (after broadcasting).
    """
    check_tensors("vecdot", x=x, y=y)
    require("vecdot", x.dtype.is_float, f"needs float tensors, got {x.dtype.name}", x, y)
    require("vecdot", x.dtype is y.dtype, f"x and y must have the same dtype, got {x.dtype.name} and "
            f"{y.dtype.name}", x, y)
    prod = mul(x, y)
    return sum_(prod, prod._axis(dim, "vecdot"))


@tensor_op("vander")
def vander(x: GraphTensor, *, N: int | None = None) -> GraphTensor:  # noqa: N803 - torch's name
    """torch.linalg.vander: the Vandermonde matrices of the vectors of ``x`` (*, n): (*, n, N) with
    column ``j`` equal to ``x ** j`` (increasing powers, as torch.linalg's, where ``torch.vander`` is
    decreasing), built by repeated products so that the gradient is finite at 0.

    Args:
        x: a tensor of at least 1 dim, its last dim static when ``N`` is None.
        N: the number of columns, > 1 (default ``x``'s last size).
    """
    require("vander", x.ndim >= 1, f"needs a tensor of at least 1 dim, got {shape_str(x.shape)}", x,
            kind=ValueError)
    require("vander", x.dtype.kind != "b", "bool tensors are not supported", x)
    N = x.shape[-1] if N is None else check_int("vander", "N", N)
    require("vander", is_static(N), f"N must be static (x's last size is {N}): pass N", x, kind=ValueError)
    require("vander", N > 1, f"N must be greater than 1, got {N}", x, kind=ValueError)
    cols = [ones_like(x), x]
    for _ in range(N - 2):
        cols.append(mul(cols[-1], x))
    return stack(cols, -1)


@tensor_op("matrix_power")
def matrix_power(A: GraphTensor, n: int) -> GraphTensor:  # noqa: N803 - torch's names
    """torch.linalg.matrix_power: ``A`` multiplied by itself ``n`` times (binary powering, as torch);
    the identity for ``n = 0``; ``inv(A) ** -n`` for ``n < 0`` (float, static size: ``inv``'s
    elimination).

    Args:
        A: a tensor of square matrices (*, m, m).
        n: the exponent, an int.
    """
    n = check_int("matrix_power", "n", n)
    require("matrix_power", A.ndim >= 2 and A.shape[-1] == A.shape[-2], "A must be batches of square matrices, "
            f"got {shape_str(A.shape)}", A, kind=ValueError)
    if n == 0:
        m = A.shape[-1]
        require("matrix_power", is_static(m), f"n=0 needs a static matrix size, got {m}", A, kind=ValueError)
        return eye(m, dtype=A.dtype, graph=A.graph).expand(*A.shape)
    if n < 0:
        A, n = inv(A), -n
    return power_by_squaring(A, n, matmul)


@tensor_op("norm")
def norm(A: GraphTensor, ord=None, dim=None, keepdim: bool = False, *, dtype=None) -> GraphTensor:  # noqa: A002, N803
    """torch.linalg.norm: a vector norm (``vector_norm``) when ``dim`` is an int or, with ``dim=None``,
    for a 1-d ``A`` or ``ord=None`` (the 2-norm of every element); a matrix norm (``matrix_norm``)
    when ``dim`` is a pair or, with ``dim=None``, for a 2-d ``A`` with ``ord`` given.

    Args:
        A: a float tensor.
        ord: the order (None: 2 for vectors, ``"fro"`` for matrices).
        dim: None, an int or a pair of ints.
        keepdim: keep the reduced dims as size 1.
        dtype: cast ``A`` to this dtype first.
    """
    if isinstance(dim, int):
        dim = (dim,)
    if dim is not None:
        dim = tuple(dim)
        require("norm", len(dim) in (1, 2), f"dim must be an int or a pair of ints, got {dim}", A, kind=ValueError)
    elif ord is not None:
        require("norm", A.ndim in (1, 2), f"with ord given and dim=None, A must be 1-d or 2-d, got {A.ndim}-d", A,
                kind=ValueError)
        dim = tuple(range(A.ndim))
    if dim is not None and len(dim) == 2:
        return matrix_norm(A, "fro" if ord is None else ord, dim, keepdim, dtype=dtype)
    if isinstance(ord, str):
        raise op_error(ValueError, "norm", f"ord={ord!r} is a matrix norm: a vector norm needs a number", A)
    return vector_norm(A, 2 if ord is None else ord, dim, keepdim, dtype=dtype)


def _prod(shape) -> int:
    return math.prod(shape)


@tensor_op("tensorinv")
def tensorinv(A: GraphTensor, ind: int = 2) -> GraphTensor:  # noqa: N803 - torch's names
    """torch.linalg.tensorinv: the inverse of ``A`` for ``tensordot(.., ind)``: ``A`` reshaped to the
    square matrix (prod(A.shape[:ind]), prod(A.shape[ind:])), inverted (``inv``), reshaped to
    ``A.shape[ind:] + A.shape[:ind]``.

    Args:
        A: a float tensor with static sizes.
        ind: the number of leading dims that index the rows, > 0.
    """
    ind = check_int("tensorinv", "ind", ind)
    require("tensorinv", ind > 0, f"ind must be a strictly positive integer, got {ind}", A, kind=ValueError)
    require("tensorinv", ind <= A.ndim, f"ind={ind} exceeds A's {A.ndim} dims", A, kind=ValueError)
    require("tensorinv", all(is_static(s) for s in A.shape), f"needs static sizes, got {shape_str(A.shape)}", A,
            kind=ValueError)
    rows, cols = _prod(A.shape[:ind]), _prod(A.shape[ind:])
    require("tensorinv", rows == cols, f"prod(A.shape[ind:]) = {cols} must equal prod(A.shape[:ind]) = {rows} "
            f"(A {shape_str(A.shape)}, ind={ind})", A, kind=ValueError)

    return inv(A.reshape(rows, cols)).reshape(*A.shape[ind:], *A.shape[:ind])


@tensor_op("tensorsolve")
def tensorsolve(A: GraphTensor, B: GraphTensor, dims=None) -> GraphTensor:  # noqa: N803 - torch's names
    """torch.linalg.tensorsolve: ``X`` with ``tensordot(A, X, X.ndim) = B``: ``A`` (its ``dims`` moved
    to the end first) reshaped to the square matrix (prod(B.shape), prod(A.shape[B.ndim:])) and
    solved (``solve``); ``X`` has the shape ``A.shape[B.ndim:]``.

    Args:
        A: a float tensor with static sizes.
        B: a tensor of A's dtype whose shape is A's leading dims.
        dims: dims of ``A`` to move to the end first (None: none).
    """
    check_tensors("tensorsolve", A=A, B=B)
    if dims is not None:
        dims = (dims,) if isinstance(dims, int) else tuple(dims)
        A = movedim(A, dims, tuple(range(A.ndim - len(dims), A.ndim)))
    require("tensorsolve", all(is_static(s) for s in (*A.shape, *B.shape)),
            f"needs static sizes, got A {shape_str(A.shape)} and B {shape_str(B.shape)}", A, B, kind=ValueError)
    require("tensorsolve", B.ndim <= A.ndim, f"B {shape_str(B.shape)} has more dims than A {shape_str(A.shape)}",
            A, B, kind=ValueError)
    rows, cols = _prod(A.shape[:B.ndim]), _prod(A.shape[B.ndim:])
    require("tensorsolve", rows == cols and rows == _prod(B.shape),
            f"prod(A.shape[B.ndim:]) = {cols} must equal prod(A.shape[:B.ndim]) = {rows} and B's size "
            f"{_prod(B.shape)} (A {shape_str(A.shape)}, B {shape_str(B.shape)})", A, B, kind=ValueError)
    return solve(A.reshape(rows, cols), B.reshape(rows)).reshape(*A.shape[B.ndim:])


class InvExResult(NamedTuple):
    """``inv_ex``'s result, as torch's ``torch.return_types.linalg_inv_ex``."""

    inverse: GraphTensor
    info: GraphTensor


class SolveExResult(NamedTuple):
    """``solve_ex``'s result, as torch's ``torch.return_types.linalg_solve_ex``."""

    result: GraphTensor
    info: GraphTensor


class CholeskyExResult(NamedTuple):
    """``cholesky_ex``'s result, as torch's ``torch.return_types.linalg_cholesky_ex``."""

    L: GraphTensor  # noqa: N815 - torch's name
    info: GraphTensor


@float32_under_autocast
@tensor_op("inv_ex")
def inv_ex(A: GraphTensor, *, check_errors: bool = False) -> InvExResult:  # noqa: N803 - torch's names
    """torch.linalg.inv_ex: ``(inverse, info)``: ``inv``'s result and, per matrix, 0 or the 1-based
    index of the first zero pivot of the elimination (LAPACK getrf's info: the matrix is singular,
    and the inverse holds inf/NaN), int32.

    Args:
        A: a float32/float64 tensor (*, n, n), static n.
        check_errors: refused when True (a compiled graph cannot raise from its values).
    """
    _no_check_errors("inv_ex", check_errors, A)
    n, _ = _matrix("inv_ex", A, square=True)
    _, pivots, _ = _getrf(A, n)  # (the factorisation inv's builds: the graph holds it once)
    return InvExResult(inv(A), _info([eq(p, 0) for p in pivots], A))


@float32_under_autocast
@tensor_op("solve_ex")
def solve_ex(A: GraphTensor, B: GraphTensor, *, left: bool = True, check_errors: bool = False) -> SolveExResult:  # noqa: N803
    """torch.linalg.solve_ex: ``(result, info)``: ``solve``'s result and ``A``'s info as ``inv_ex``'s
    (0, or the 1-based index of the first zero pivot), of A's batch shape.

    Args:
        A: a float32/float64 tensor (*, n, n), static n.
        B: the right-hand side, as ``solve``'s.
        left: solve ``A X = B`` (True) or ``X A = B``.
        check_errors: refused when True (a compiled graph cannot raise from its values).
    """
    _no_check_errors("solve_ex", check_errors, A, B)
    n, _ = _matrix("solve_ex", A, square=True)
    _, pivots, _ = _eliminate(A, n, skip_zero_pivots=True)
    return SolveExResult(solve(A, B, left=left), _info([eq(p, 0) for p in pivots], A))


@float32_under_autocast
@tensor_op("cholesky_ex")
def cholesky_ex(A: GraphTensor, *, upper: bool = False, check_errors: bool = False) -> CholeskyExResult:  # noqa: N803
    """torch.linalg.cholesky_ex: ``(L, info)``: ``cholesky``'s factor and, per matrix, 0 or the order
    of the first leading minor that is not positive-definite (a pivot that is not > 0, NaN
    included), int32. Where ``info`` is nonzero ``L`` holds NaN from that pivot on.

    Args:
        A: a symmetric float32/float64 tensor (*, n, n), static n.
        upper: return the upper-triangular factor ``L.mT`` instead.
        check_errors: refused when True (a compiled graph cannot raise from its values).
    """
    _no_check_errors("cholesky_ex", check_errors, A)
    low, pivots = _cholesky("cholesky_ex", A)
    return CholeskyExResult(low.transpose(-2, -1) if upper else low,
                            _info([logical_not(gt(p, 0)).unsqueeze(-1) for p in pivots], A))


# Higham (2005), "The scaling and squaring method for the matrix exponential revisited": the [13/13]
# Pade approximant's coefficients and the 1-norm up to which it is accurate to float64 rounding
PADE13 = (64764752532480000.0, 32382376266240000.0, 7771770303897600.0, 1187353796428800.0, 129060195264000.0,
          10559470521600.0, 670442572800.0, 33522128640.0, 1323241920.0, 40840800.0, 960960.0, 16380.0, 182.0, 1.0)
THETA13 = 5.371920351148152
MAX_SQUARINGS = 24  # (the 1-norms up to THETA13 * 2**24, about 9e7: exp of more overflows float64 anyway)


@float32_under_autocast
@tensor_op("matrix_exp")
def matrix_exp(A: GraphTensor) -> GraphTensor:  # noqa: N803 - torch's name
    """torch.linalg.matrix_exp: ``exp(A)`` of each square matrix of ``A`` by scaling and squaring
    (Higham 2005): ``A / 2**s`` with ``s`` the least that brings its 1-norm below 5.37, the [13/13]
    Pade approximant (one ``solve``), squared ``s`` times (each matrix its own ``s``: the 24 squarings
    unrolled, each taken or not, so 1-norms beyond about 9e7 are not scaled enough). The gradient is
    autograd's through these steps (static n: ``solve``'s elimination).

    Args:
        A: a float32/float64 tensor (*, n, n).
    """
    n, _ = _matrix("matrix_exp", A, square=True)
    norm1 = matrix_norm(A.detach(), 1, keepdim=True)
    s = maximum(ceil(log2(div(norm1, THETA13))), 0.0)
    X = mul(A, exp2(neg(s)))
    ident = eye(n, dtype=A.dtype, graph=A.graph)
    b = PADE13
    X2 = matmul(X, X)
    X4 = matmul(X2, X2)
    X6 = matmul(X4, X2)

    def comb(c6, c4, c2, c0=None):
        out = add(add(mul(X6, c6), mul(X4, c4)), mul(X2, c2))
        return out if c0 is None else add(out, mul(ident, c0))

    U = matmul(X, add(matmul(X6, comb(b[13], b[11], b[9])), comb(b[7], b[5], b[3], b[1])))
    V = add(matmul(X6, comb(b[12], b[10], b[8])), comb(b[6], b[4], b[2], b[0]))
    R = solve(sub(V, U), add(V, U))
    for k in range(MAX_SQUARINGS):
        R = where(lt(k, s), matmul(R, R), R)
    return R


@float32_under_autocast
@tensor_op("cond")
def cond(A: GraphTensor, p=None) -> GraphTensor:  # noqa: N803 - torch's names
    """torch.linalg.cond: the condition number of each matrix of ``A`` for the norm ``p``: with
    ``p`` None or 2 ``S.max() / S.min()`` (-2: the inverse; any shape), else
    ``matrix_norm(A, p) * matrix_norm(inv(A), p)`` (``'fro'``, ``'nuc'``, 1, -1, inf, -inf; square).

    Args:
        A: a float32/float64 tensor (*, m, n), static, min(m, n) <= 16.
        p: None, 2, -2, ``'fro'``, ``'nuc'``, 1, -1, ``inf`` or ``-inf``.
    """
    if p is None or (not isinstance(p, str) and p in (2, -2)):
        S = _svd("cond", A).S
        top, bottom = S[..., 0], S[..., -1]
        return div(top, bottom) if p != -2 else div(bottom, top)
    if isinstance(p, bool) or p not in ("fro", "nuc", 1, -1, math.inf, -math.inf):
        raise op_error(ValueError, "cond", f"p={p!r} is not a matrix norm (None, 'fro', 'nuc', 1, -1, 2, -2, inf, "
                       "-inf)", A)
    _matrix("cond", A, square=True)
    return mul(matrix_norm(A, p), matrix_norm(inv(A), p))
