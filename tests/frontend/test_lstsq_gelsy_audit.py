"""Audit of ``lm.linalg.lstsq``'s default driver, gelsy, on rank-deficient matrices: QR with column
pivoting, the rank by LAPACK's incremental condition estimation against rcond, and the minimum-norm
solution of the problem truncated to that rank (``linalg_spectral._gelsy``), with torch's gradient
(that of ``pinv(A) @ B``).

The defined value of the solution is ``pinv(A, rtol=rcond) @ B`` in float64 (a matrix of exact rank
r: its trailing singular values are at rounding level, well below any cut-off used here). torch's
own gelsy is compared where it is reliable: torch 2.13 passes LAPACK an uninitialised ``jpvt``,
whose nonzero entries pin columns in front of the pivoting (pytorch/pytorch#71222, #187411), so on a
matrix whose leading columns are dependent (a zero or a duplicated column) its rank and solution
change from run to run; those cases are checked against the values written out instead."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import luminal as lm
from luminal import train
from tests.parity import check

pytestmark = pytest.mark.usefixtures("one_torch_thread")

DTYPES = [np.float32, np.float64]
TOL = {np.float32: 2e-4, np.float64: 1e-10}  # against the float64 pseudo-inverse, relative to its size


def _product(rng, batch, m, r, n):
    """A random (*batch, m, n) matrix of rank r: (m, r) @ (r, n)."""
    return rng.normal(size=(*batch, m, r)) @ rng.normal(size=(*batch, r, n))


def _ours(a, b, rcond=None, grad=False):
    """lstsq's ``(solution, rank)`` (and the gradients of ``solution.sum()`` w.r.t. A and B)."""
    g = lm.Graph()
    dtype = lm.core.dtype.as_dtype(a.dtype)
    x, y = g.input("a", a.shape, dtype=dtype), g.input("b", b.shape, dtype=dtype)
    r = lm.linalg.lstsq(x, y, rcond)
    outs = [r.solution, r.rank]
    if grad:
        outs += [train.grad(r.solution.sum(), x), train.grad(r.solution.sum(), y)]
    return lm.compile(outs, backend="cpu")(a=a, b=b)


def _pinv_solution(a, b, rtol):
    """The minimum-norm least-squares solution of the rank ``rtol`` keeps, in float64."""
    A, B = torch.from_numpy(a).double(), torch.from_numpy(b).double()
    vector = B.ndim == A.ndim - 1
    x = torch.linalg.pinv(A, rtol=rtol) @ (B.unsqueeze(-1) if vector else B)
    return (x.squeeze(-1) if vector else x).numpy()


def _solution_rank(a, b):
    r = lm.linalg.lstsq(a, b)
    return r.solution, r.rank


def _torch_solution_rank(a, b):
    r = torch.linalg.lstsq(a, b)
    return r.solution, r.rank.int()


def _close(got, want, tol):
    np.testing.assert_allclose(got, want, rtol=0, atol=tol * max(1.0, np.abs(want).max()))


CASES = {  # name: (batch, m, r, n, B's trailing shape: (k,) for (*, m, k), () for (*, m))
    "tall": ((), 6, 2, 4, (2,)),
    "square": ((), 5, 3, 5, (2,)),
    "wide": ((), 3, 2, 6, (2,)),
    "batched_matrix_b": ((2,), 6, 3, 4, (3,)),
    "batched_vector_b": ((2,), 5, 2, 5, ()),
    "wide_batched_vector_b": ((3,), 4, 3, 6, ()),
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", list(CASES))
def test_rank_deficient_product_is_the_minimum_norm_solution(case, dtype):
    """The solution of a rank-r product is pinv's (the old plain QR divided by R's rounding-level
    diagonal: errors of 1e16), the rank r, and both equal torch's gelsy's, gradients included (torch's
    is pinv(A) @ B's: differentiating the truncation instead differed by up to 3 in A's)."""
    batch, m, r, n, tail = CASES[case]
    rng = np.random.default_rng(sum(map(ord, case)))
    a = _product(rng, batch, m, r, n).astype(dtype)
    b = rng.normal(size=(*batch, m, *tail)).astype(dtype)
    x, rank, *_ = _ours(a, b)
    rcond = np.finfo(dtype).eps * max(m, n)
    _close(x, _pinv_solution(a, b, rcond), TOL[dtype])
    np.testing.assert_array_equal(rank, np.full(batch, r))
    loose = {"rtol": 1e-4, "atol": 1e-4} if dtype is np.float32 else {}
    grad_tol = 2e-3 if dtype is np.float32 else 1e-7
    check(_solution_rank, [a, b], torch_op=_torch_solution_rank, grad_rtol=grad_tol, grad_atol=grad_tol,
          backend="cpu", **loose)


def _zero_column(rng):
    a = rng.normal(size=(6, 4))
    a[:, 1] = 0
    return a, 3


def _duplicated_columns(rng):
    a = rng.normal(size=(5, 4))
    a[:, 2] = a[:, 0]
    return a, 3


def _wide_duplicated(rng):
    a = rng.normal(size=(4, 6))
    a[:, 3], a[:, 5] = a[:, 1], 2 * a[:, 0]
    return a, 4


def _leading_zero_row_and_column(rng):
    a = np.diag([0.0, 1.0, 2.0, 3.0, 4.0])
    return a, 4


def _zeros(rng):
    return np.zeros((4, 3)), 0


PIVOTED = [_zero_column, _duplicated_columns, _wide_duplicated, _leading_zero_row_and_column, _zeros]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("make", PIVOTED, ids=lambda f: f.__name__.strip("_"))
def test_dependent_leading_columns_need_the_pivoting(make, dtype):
    """A zero or repeated column among the leading ones: without column pivoting its R_ii is ~0 in the
    middle of R's diagonal (the old rank was 1 for a zero second column, the solution NaN/1e16); the
    pivoting moves it last. Checked against the pseudo-inverse and the rank written out (torch's
    gelsy is not: see the module docstring)."""
    rng = np.random.default_rng(3)
    a, r = make(rng)
    b = rng.normal(size=(a.shape[0], 2))
    a, b = a.astype(dtype), b.astype(dtype)
    x, rank, ga, gb = _ours(a, b, grad=True)
    rcond = np.finfo(dtype).eps * max(a.shape)
    _close(x, _pinv_solution(a, b, rcond), TOL[dtype])
    assert rank == r
    A, B = torch.from_numpy(a).double().requires_grad_(), torch.from_numpy(b).double().requires_grad_()
    (torch.linalg.pinv(A, rtol=rcond) @ B).sum().backward()  # torch's lstsq gradient, for its default rcond
    _close(gb, B.grad.numpy(), TOL[dtype])
    _close(ga, A.grad.numpy(), 1e-3 if dtype is np.float32 else 1e-9)


def test_batch_members_pivot_independently():
    """Each matrix of a batch gets its own column order and rank."""
    rng = np.random.default_rng(5)
    a = np.stack([_zero_column(rng)[0], rng.normal(size=(6, 4)), _product(rng, (), 6, 1, 4)])
    b = rng.normal(size=(3, 6, 2))
    x, rank, *_ = _ours(a, b)
    _close(x, _pinv_solution(a, b, np.finfo(np.float64).eps * 6), TOL[np.float64])
    np.testing.assert_array_equal(rank, [3, 4, 1])


@pytest.mark.parametrize("rcond, rank", [(1e-6, 2), (1e-13, 4), (0.9, 1)])
def test_rcond(rcond, rank):
    """A rank-2 product plus 1e-9 noise: singular values ~1, ~1 and ~1e-9, so rcond = 1e-6 keeps 2,
    1e-13 all 4 (the full least-squares solution, of size ~1e9) and 0.9 keeps the first pivot only.
    For a cut-off in a gap of the spectrum the truncated solution is pinv's within the noise over
    the gap; with 0.9, inside the leading singular values, gelsy's truncation of R is not the SVD's:
    the solution is the minimum-norm one of R's first row, checked as such."""
    rng = np.random.default_rng(7)
    a = _product(rng, (), 6, 2, 4) * np.array([1.0, 3.0, 0.5, 2.0]) + 1e-9 * rng.normal(size=(6, 4))
    b = rng.normal(size=(6, 2))
    x, got_rank, *_ = _ours(a, b, rcond)
    assert got_rank == rank
    if rank > 1:
        _close(x, _pinv_solution(a, b, rcond), 1e-6)
        return
    norms = np.linalg.norm(a, axis=0)
    j = int(np.argmax(norms))  # the first pivot: the largest column
    q = a[:, j] / norms[j]
    r0 = -np.sign(a[0, j]) * (q @ a)  # R's first row (geqrf's sign, which the solution does not depend on)
    c = -np.sign(a[0, j]) * (q @ b)
    _close(x, np.outer(r0, c) / (r0 @ r0), 1e-12)  # min ||x|| with r0 . x = c


def test_full_rank_matches_torch_values_and_gradients():
    """Full rank, both dtypes, tall/square/wide with batched matrix and vector B: torch's solution and
    gradients, as before the pivoting (the permutation and the second QR change only the rounding)."""
    rng = np.random.default_rng(11)
    for dtype in DTYPES:
        for a_shape, b_shape in [((2, 7, 4), (2, 7, 3)), ((3, 4, 4), (3, 4)), ((2, 3, 5), (2, 3, 2)), ((4, 6), (4,))]:
            a, b = rng.normal(size=a_shape).astype(dtype), rng.normal(size=b_shape).astype(dtype)
            loose = {"rtol": 1e-4, "atol": 1e-4, "grad_rtol": 1e-3} if dtype is np.float32 else {}
            check(_solution_rank, [a, b], torch_op=_torch_solution_rank, backend="cpu", **loose)


@pytest.mark.parametrize("a_shape, b_shape", [((0, 3), (0, 2)), ((3, 0), (3, 2)), ((2, 0, 0), (2, 0, 1))])
def test_empty(a_shape, b_shape):
    """No rows or no columns: the solution is 0 (or empty) and the rank 0, as torch's, and the
    gradients zeros of the inputs' shapes (the reduction for R's largest diagonal entry refused an
    empty diagonal)."""
    rng = np.random.default_rng(13)
    check(_solution_rank, [rng.normal(size=a_shape), rng.normal(size=b_shape)], torch_op=_torch_solution_rank,
          backend="cpu")


def _graded_kahan(n, theta, f):
    """Kahan's upper-triangular matrix ``diag(s^i) (I - c * strict upper ones)`` (s, c = sin, cos of
    theta) with its columns scaled by ``f^j``: every column norm and every trailing one decreases
    with j, so the column pivoting keeps the order, and R's diagonal ``s^j f^j`` stays far above the
    smallest singular value."""
    s, c = np.sin(theta), np.cos(theta)
    return np.diag(s ** np.arange(n)) @ (np.eye(n) - c * np.triu(np.ones((n, n)), 1)) * f ** np.arange(n)


@pytest.mark.parametrize("n, theta, f, rcond, rank, diagonal_count", [
    (40, 1.0, 0.95, 1e-8, 32, 40), (30, 0.7, 0.97, 1e-7, 16, 30), (16, 0.3, 0.9, 1e-5, 7, 9)])
def test_incremental_condition_estimation(n, theta, f, rcond, rank, diagonal_count):
    """The rank of an ill-conditioned triangle without a small diagonal entry: gelsy grows the
    leading triangle while its estimated condition number stays within 1 / rcond, so it stops well
    before R's diagonal would (``diagonal_count``, the |R_ii| above rcond |R_00|: the previous rule,
    which kept the tiny singular values and a solution of norm ~1/s_min). ``rank`` is reference
    LAPACK's dgelsy (netlib's dlaic1 and the rank loop, run in float64 on the same R); torch's MKL
    gelsy varies from call to call on these (its column pins, see the module docstring). The
    solution is then the minimum-norm one of the problem truncated to that rank, written out from
    R directly."""
    a = _graded_kahan(n, theta, f)
    d = np.abs(np.diag(a))
    assert int((d > rcond * d[0]).sum()) == diagonal_count
    b = np.random.default_rng(n).normal(size=(n, 1))
    x, got, *_ = _ours(a, b, rcond)
    assert got == rank
    want = np.linalg.pinv(a[:rank]) @ b[:rank]  # A is its own R (P = I, Q = I up to signs)
    _close(x, want, 1e-9)
