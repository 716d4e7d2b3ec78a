"""Parity with torch.linalg for the unrolled decompositions (``luminal/frontend/ops/linalg_decomp.py``):
lu_factor / lu_factor_ex / lu / lu_solve (partial pivoting, LAPACK's pivots) and qr /
householder_product (Householder, LAPACK's signs), values and gradients in float32 and float64,
square and rectangular, batched, and the errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from parity import check

import luminal as lm

pytestmark = pytest.mark.usefixtures("one_torch_thread")

DTYPES = [np.float32, np.float64]


def _la(t):
    return torch.linalg if isinstance(t, torch.Tensor) else lm.linalg


def _normal(shape, seed=0, dtype=np.float32):
    return np.random.default_rng(seed).normal(size=shape).astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(2, 4, 4), (3, 5), (5, 3)], ids=["square", "wide", "tall"])
def test_lu_factor_and_lu(dtype, shape):
    a = _normal(shape, 1, dtype)  # random: the pivots swap rows
    check(lambda t: (*_la(t).lu_factor(t), *_la(t).lu_factor_ex(t)), [a])
    check(lambda t: tuple(_la(t).lu(t)), [a])


def test_lu_factor_ex_info_of_singular_matrices():
    a = np.array([[[0.0, 1.0, 2.0], [0.0, 3.0, 4.0], [0.0, 5.0, 7.0]],  # a zero first column: info 1
                  [[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]],  # rank 2: info 3
                  [[2.0, 1.0, 0.0], [1.0, 3.0, 1.0], [0.0, 1.0, 4.0]]])
    check(lambda t: tuple(_la(t).lu_factor_ex(t)), [a], grad=False)


@pytest.mark.parametrize("dtype", DTYPES)
def test_lu_solve(dtype):
    a, b = _normal((2, 4, 4), 2, dtype), _normal((2, 4, 3), 3, dtype)

    def op(t, u):
        LU, piv = _la(t).lu_factor(t)
        return (_la(t).lu_solve(LU, piv, u), _la(t).lu_solve(LU, piv, u, adjoint=True),
                _la(t).lu_solve(LU, piv, u.mT, left=False), _la(t).lu_solve(LU, piv, u.mT, left=False, adjoint=True))

    check(op, [a, b], grad_rtol=1e-3 if dtype is np.float32 else None)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(2, 4, 3), (3, 5), (3, 3)], ids=["tall", "wide", "square"])
def test_qr(dtype, shape):
    a = _normal(shape, 4, dtype)
    check(lambda t: tuple(_la(t).qr(t)), [a])
    check(lambda t: _la(t).qr(t, mode="r").R, [a], grad=False)  # torch does not differentiate mode="r"
    if shape[-2] <= shape[-1]:  # torch differentiates the complete Q only when it is the reduced one
        check(lambda t: tuple(_la(t).qr(t, mode="complete")), [a])
    else:
        check(lambda t: tuple(_la(t).qr(t, mode="complete")), [a], grad=False)


def test_qr_r_mode_q_is_empty():
    q, r = lm.linalg.qr(lm.Graph().input("a", (2, 4, 3)), mode="r")
    assert q.shape == (0,) and r.shape == (2, 3, 3)


@pytest.mark.parametrize("dtype", DTYPES)
def test_householder_product(dtype):
    a, tau = _normal((2, 4, 3), 5, dtype), _normal((2, 2), 6, dtype)
    check(lambda t, u: _la(t).householder_product(t, u), [a, tau])


def test_errors():
    g = lm.Graph()
    a = g.input("a", (3, 3))
    with pytest.raises(NotImplementedError, match=r"^lu_factor: pivot=False \(LU without pivoting\) is not supported"):
        lm.linalg.lu_factor(a, pivot=False)
    with pytest.raises(NotImplementedError, match="^lu_factor_ex: check_errors=True is not supported"):
        lm.linalg.lu_factor_ex(a, check_errors=True)
    with pytest.raises(ValueError, match=r"^qr: needs a static matrix size"):
        lm.linalg.qr(g.input("s", ("N", 3)))
    with pytest.raises(ValueError, match="^qr: mode must be 'reduced', 'complete' or 'r', got 'x'"):
        lm.linalg.qr(a, mode="x")
    with pytest.raises(ValueError, match="^lu: is unrolled over the matrix size and supports n <= 64, got n = 65"):
        lm.linalg.lu(g.input("big", (2, 65)))
    with pytest.raises(TypeError, match=r"^lu_solve: pivots must be int32 \(\*, 3\), got \(3,\) float32"):
        lm.linalg.lu_solve(a, g.input("p", (3,)), a)
    with pytest.raises(ValueError, match=r"^householder_product: tau must be \(\*, k\) with A's batch dims and k <= 2"):
        lm.linalg.householder_product(g.input("h", (3, 2)), g.input("t", (3,)))


def _sym(shape, seed=0, dtype=np.float32):
    m = np.random.default_rng(seed).normal(size=shape)
    return (m + np.swapaxes(m, -1, -2)).astype(dtype)


def _column_signs_fixed(V):
    """Each column times its first entry: invariant to the column's sign, which is not unique."""
    return V * V[..., :1, :]


@pytest.mark.parametrize("dtype", DTYPES)
def test_eigh_eigvalsh(dtype):
    a = _sym((2, 4, 4), 7, dtype)
    check(lambda t: (_la(t).eigh(t).eigenvalues, _column_signs_fixed(_la(t).eigh(t).eigenvectors),
                     _la(t).eigvalsh(t)), [a])
    upper_only = np.triu(a[0]) + np.tril(np.full((4, 4), 9.0, dtype), -1)  # the lower triangle unread
    check(lambda t: (_la(t).eigvalsh(t, UPLO="U"), _column_signs_fixed(_la(t).eigh(t, "U")[1])), [upper_only])


def test_eigh_invariants_float64():
    a = _sym((3, 5, 5), 8, np.float64)
    g = lm.Graph()
    w, v = lm.linalg.eigh(g.input("a", a.shape, dtype=lm.float64))
    wv, vv = lm.compile([w, v], backend="reference")(a=a)
    np.testing.assert_allclose(wv, np.linalg.eigvalsh(a), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(a @ vv, vv * wv[..., None, :], atol=1e-12)
    np.testing.assert_allclose(np.swapaxes(vv, -1, -2) @ vv, np.broadcast_to(np.eye(5), (3, 5, 5)), atol=1e-13)


def _svd_invariant(t, full_matrices=False):
    U, S, Vh = _la(t).svd(t, full_matrices=full_matrices)
    return S, _column_signs_fixed(U), _column_signs_fixed(Vh.mT)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(2, 4, 3), (3, 4), (3, 3)], ids=["tall", "wide", "square"])
def test_svd_svdvals(dtype, shape):
    a = _normal(shape, 9, dtype)
    check(_svd_invariant, [a])
    check(lambda t: _la(t).svdvals(t), [a])


def test_svd_full_matrices_invariants():
    for shape in [(5, 3), (3, 5)]:
        a = _normal(shape, 10, np.float64)
        g = lm.Graph()
        u, s, vh = lm.compile(list(lm.linalg.svd(g.input("a", shape, dtype=lm.float64))), backend="reference")(a=a)
        m, n = shape
        assert u.shape == (m, m) and vh.shape == (n, n)
        np.testing.assert_allclose(u.T @ u, np.eye(m), atol=1e-13)
        np.testing.assert_allclose(vh @ vh.T, np.eye(n), atol=1e-13)
        np.testing.assert_allclose(u[:, :len(s)] * s @ vh[:len(s)], a, atol=1e-13)
        np.testing.assert_allclose(s, np.linalg.svd(a, compute_uv=False), rtol=1e-13)


@pytest.mark.parametrize("dtype", DTYPES)
def test_pinv_matrix_rank_cond_norms(dtype):
    a = _normal((2, 4, 3), 11, dtype)
    check(lambda t: _la(t).pinv(t), [a])
    check(lambda t: _la(t).pinv(t, hermitian=True), [_sym((3, 3), 12, dtype)], grad_rtol=1e-3)  # (large gradients)
    check(lambda t: (_la(t).matrix_norm(t, "nuc"), _la(t).matrix_norm(t, 2), _la(t).matrix_norm(t, -2, keepdim=True),
                     _la(t).matrix_norm(t, 2, dim=(0, 2)), _la(t).cond(t), t[0].norm("nuc")), [a])
    sq = _normal((2, 3, 3), 13, dtype) + 3 * np.eye(3, dtype=dtype)
    check(lambda t: (_la(t).cond(t), _la(t).cond(t, -2)), [sq])
    # (torch's own backward of cond with these p fails: an in-place write to inv_ex's output)
    check(lambda t: tuple(_la(t).cond(t, p) for p in ["fro", "nuc", 1, -1, float("inf")]), [sq], grad=False)
    rank2 = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]], dtype)
    check(lambda t: (_la(t).matrix_rank(t), _la(t).matrix_rank(t, atol=1.5), _la(t).matrix_rank(t, rtol=0.5),
                     _la(t).matrix_rank(t + t.mT, hermitian=True)),
          [rank2], grad=False, torch_op=lambda t: tuple(r.int() for r in (
              torch.linalg.matrix_rank(t), torch.linalg.matrix_rank(t, atol=1.5), torch.linalg.matrix_rank(t, rtol=0.5),
              torch.linalg.matrix_rank(t + t.mT, hermitian=True))))


def test_spectral_errors():
    g = lm.Graph()
    a = g.input("a", (3, 3))
    with pytest.raises(ValueError, match="^eigh: UPLO must be 'L' or 'U', got 'X'"):
        lm.linalg.eigh(a, "X")
    with pytest.raises(ValueError, match="^eigh: is unrolled over the matrix size and supports n <= 16, got n = 17"):
        lm.linalg.eigh(g.input("big", (17, 17)))
    with pytest.raises(ValueError, match="^svd: driver='gesvd' is not supported"):
        lm.linalg.svd(a, driver="gesvd")
    with pytest.raises(ValueError, match="^cond: p=3 is not a matrix norm"):
        lm.linalg.cond(a, 3)
    with pytest.raises(ValueError, match=r"^cond: expected a square matrix, got \(3, 2\)"):
        lm.linalg.cond(g.input("r", (3, 2)), 1)


def _lstsq_fields(t, u, driver):
    r = _la(t).lstsq(t, u, driver=driver)
    return tuple(x.int() if x.dtype in (torch.int64,) else x for x in r)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("driver", [None, "gels", "gelsd", "gelss"])
def test_lstsq(dtype, driver):
    rng = np.random.default_rng(14)
    tall, wide = rng.normal(size=(2, 5, 3)).astype(dtype), rng.normal(size=(3, 4)).astype(dtype)
    b5, b3 = rng.normal(size=(2, 5, 2)).astype(dtype), rng.normal(size=(3,)).astype(dtype)
    check(lambda t, u: _lstsq_fields(t, u, driver), [tall, b5], grad_rtol=1e-3 if dtype is np.float32 else None)
    if driver != "gels":  # (torch's gels of a wide matrix is not the minimum-norm solution)
        check(lambda t, u: _lstsq_fields(t, u, driver), [wide, b3], grad_rtol=1e-3 if dtype is np.float32 else None)


@pytest.mark.parametrize("dtype", DTYPES)
def test_matrix_exp(dtype):
    rng = np.random.default_rng(15)
    a = np.stack([rng.normal(size=(3, 3)) * 0.1, rng.normal(size=(3, 3)) * 3.0])  # no squaring; several
    check(lambda t: _la(t).matrix_exp(t), [a.astype(dtype)], rtol=1e-5 if dtype is np.float32 else 1e-12,
          grad_rtol=1e-3 if dtype is np.float32 else None)
    check(lambda t: _la(t).matrix_exp(t), [np.zeros((2, 2), dtype)])


def test_lstsq_errors():
    g = lm.Graph()
    a = g.input("a", (4, 3))
    with pytest.raises(ValueError, match=r"^lstsq: driver must be one of \('gels', 'gelsy', 'gelsd', 'gelss'\)"):
        lm.linalg.lstsq(a, g.input("b", (4, 2)), driver="x")
    with pytest.raises(ValueError, match=r"^lstsq: B \(3, 2\) does not match A \(4, 3\): B needs 4 rows"):
        lm.linalg.lstsq(a, g.input("b3", (3, 2)))
