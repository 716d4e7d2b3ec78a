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
