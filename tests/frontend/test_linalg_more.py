"""Parity with torch.linalg for the thin names (``luminal/frontend/ops/linalg_more.py``,
``linalg_triangular.py``): matmul, diagonal, vecdot, vander, matrix_power, norm, solve_triangular,
tensorinv, tensorsolve, inv_ex / solve_ex / cholesky_ex (their info on singular and indefinite
matrices) and LinAlgError; values and gradients in float32 and float64, batched, and the errors."""

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


def _well_conditioned(shape, seed=0, dtype=np.float32):
    n = shape[-1]
    return (np.random.default_rng(seed).normal(size=shape) + n * np.eye(n)).astype(dtype)


def _spd(shape, seed=0, dtype=np.float32):
    m = np.random.default_rng(seed).normal(size=shape)
    return (m @ np.swapaxes(m, -1, -2) + shape[-1] * np.eye(shape[-1])).astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_matmul_diagonal_vecdot(dtype):
    a, b = _normal((2, 3, 4), 1, dtype), _normal((4, 2), 2, dtype)
    check(lambda t, u: _la(t).matmul(t, u), [a, b])
    check(lambda t: (_la(t).diagonal(t), _la(t).diagonal(t, offset=1), _la(t).diagonal(t, offset=-1, dim1=0, dim2=2)),
          [a])
    check(lambda t, u: (_la(t).vecdot(t, u), _la(t).vecdot(t, u[..., :1, :], dim=-2)),
          [_normal((2, 3, 4), 3, dtype), _normal((3, 4), 4, dtype)])


@pytest.mark.parametrize("dtype", DTYPES)
def test_vander(dtype):
    x = np.array([[0.0, 1.5, -2.0], [0.5, 0.0, 3.0]], dtype)  # zeros: the gradient of x**j stays finite
    check(lambda t: (_la(t).vander(t), _la(t).vander(t, N=2), _la(t).vander(t[0], N=5)), [x])


@pytest.mark.parametrize("dtype", DTYPES)
def test_matrix_power(dtype):
    a = _well_conditioned((2, 3, 3), 5, dtype) / 3
    for n in [0, 1, 2, 3, 5, -1, -2]:
        check(lambda t, n=n: _la(t).matrix_power(t, n), [a])


@pytest.mark.parametrize("dtype", DTYPES)
def test_norm_dispatch(dtype):
    a = _normal((2, 3, 4), 6, dtype)
    check(lambda t: (_la(t).norm(t), _la(t).norm(t, dim=1), _la(t).norm(t, 3, dim=-1, keepdim=True),
                     _la(t).norm(t, dim=(0, 2)), _la(t).norm(t, float("inf"), dim=(1, 2)),
                     _la(t).norm(t[0], 1), _la(t).norm(t[0], "fro"), _la(t).norm(t[0, 0], 1),
                     _la(t).norm(t[0], -float("inf"), keepdim=True)), [a])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("upper", [True, False])
def test_solve_triangular(dtype, upper):
    a = _well_conditioned((2, 1, 4, 4), 7, dtype)  # not triangular: only the named triangle is read
    b = _normal((3, 4, 2), 8, dtype)  # batch dims broadcast
    for unit in (False, True):
        check(lambda t, u, unit=unit: _la(t).solve_triangular(t, u, upper=upper, unitriangular=unit), [a, b])
        check(lambda t, u, unit=unit: _la(t).solve_triangular(t, u.mT, upper=upper, left=False,
                                                              unitriangular=unit), [a, b])


def test_solve_triangular_ignores_the_other_triangle():
    a = np.triu(_well_conditioned((3, 3), 9, np.float64)) + np.tril(np.full((3, 3), np.nan), -1)
    check(lambda t, u: _la(t).solve_triangular(t, u, upper=True), [a, _normal((3, 2), 10, np.float64)], grad=False)


@pytest.mark.parametrize("dtype", DTYPES)
def test_tensorinv_tensorsolve(dtype):
    a = _well_conditioned((6, 6), 11, dtype)
    check(lambda t: (_la(t).tensorinv(t.reshape(6, 2, 3), ind=1), _la(t).tensorinv(t.reshape(2, 3, 3, 2))), [a])
    b = _normal((2, 3), 12, dtype)
    check(lambda t, u: (_la(t).tensorsolve(t.reshape(2, 3, 6), u),
                        _la(t).tensorsolve(t.reshape(6, 2, 3), u, dims=(0,))), [a, b])


@pytest.mark.parametrize("dtype", DTYPES)
def test_ex_variants_on_good_matrices(dtype):
    a, s = _well_conditioned((2, 3, 3), 13, dtype), _spd((2, 3, 3), 14, dtype)
    b = _normal((2, 3, 2), 15, dtype)
    check(lambda t, u, v: (*_la(t).inv_ex(t), *_la(t).solve_ex(t, v), *_la(t).solve_ex(t, v.mT, left=False),
                           *_la(t).cholesky_ex(u), *_la(t).cholesky_ex(u, upper=True)), [a, s, b])


def test_ex_info_on_singular_and_indefinite_matrices():
    singular = np.array([[[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]],  # rank 2: the last pivot is 0
                         [[0.0, 1.0, 2.0], [0.0, 3.0, 4.0], [0.0, 5.0, 7.0]],  # a zero first column
                         [[2.0, 1.0, 0.0], [1.0, 3.0, 1.0], [0.0, 1.0, 4.0]]])  # regular: 0
    check(lambda t: (_la(t).inv_ex(t).info, _la(t).solve_ex(t, t).info), [singular])
    indefinite = np.array([[[1.0, 2.0], [2.0, 1.0]], [[-1.0, 0.0], [0.0, 1.0]], [[2.0, 1.0], [1.0, 2.0]]])
    check(lambda t: _la(t).cholesky_ex(t).info, [indefinite])
    out = lm.linalg.cholesky_ex(lm.Graph().input("a", (3, 2, 2), dtype=lm.float64))
    assert out._fields == ("L", "info") and out.info.dtype is lm.int32


def test_named_tuples():
    g = lm.Graph()
    a = g.input("a", (3, 3))
    assert lm.linalg.inv_ex(a)._fields == ("inverse", "info")
    assert lm.linalg.solve_ex(a, a)._fields == ("result", "info")


def test_errors():
    assert issubclass(lm.linalg.LinAlgError, RuntimeError)
    g = lm.Graph()
    a, v = g.input("a", (3, 3)), g.input("v", (3,))
    with pytest.raises(NotImplementedError, match="^inv_ex: check_errors=True is not supported"):
        lm.linalg.inv_ex(a, check_errors=True)
    with pytest.raises(ValueError, match=r"^solve_triangular: B must have at least 2 dims, got \(3,\)"):
        lm.linalg.solve_triangular(a, v, upper=True)
    with pytest.raises(TypeError, match="upper"):
        lm.linalg.solve_triangular(a, a)  # upper is required, as torch's
    with pytest.raises(ValueError, match=r"^solve_triangular: is unrolled over the matrix size and supports n <= 64"):
        lm.linalg.solve_triangular(g.input("big", (65, 65)), g.input("bb", (65, 1)), upper=False)
    with pytest.raises(ValueError, match="^vander: N must be greater than 1, got 1"):
        lm.linalg.vander(v, N=1)
    with pytest.raises(ValueError, match=r"^matrix_power: A must be batches of square matrices, got \(3, 2\)"):
        lm.linalg.matrix_power(g.input("r", (3, 2)), 2)
    with pytest.raises(TypeError, match="^vecdot: x and y must have the same dtype, got float32 and float64"):
        lm.linalg.vecdot(v, g.input("w", (3,), dtype=lm.float64))
    with pytest.raises(ValueError, match="^norm: with ord given and dim=None, A must be 1-d or 2-d, got 3-d"):
        lm.linalg.norm(g.input("c", (2, 2, 2)), 2)
    with pytest.raises(ValueError, match="^norm: ord='fro' is a matrix norm"):
        lm.linalg.norm(v, "fro")
    with pytest.raises(ValueError, match=r"^tensorinv: prod\(A.shape\[ind:\]\) = 3 must equal prod\(A.shape\[:ind\]\)"):
        lm.linalg.tensorinv(g.input("t", (2, 3)), ind=1)
    with pytest.raises(ValueError, match="^tensorinv: ind must be a strictly positive integer, got 0"):
        lm.linalg.tensorinv(a, ind=0)
    with pytest.raises(ValueError, match=r"^tensorsolve: prod\(A.shape\[B.ndim:\]\) = 18 must equal"):
        lm.linalg.tensorsolve(g.input("t3", (2, 3, 6)), g.input("b6", (2,)))
