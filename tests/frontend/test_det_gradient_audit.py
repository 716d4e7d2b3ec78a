"""Audit of the determinant's gradients at singular and near-singular matrices, against torch and the
exact cofactor matrix (``luminal/frontend/ops/linalg_solve.py``: ``det``, ``slogdet``; ``logdet``).

``d det(A) / dA`` is the cofactor matrix ``adj(A).mT``, a polynomial in A: finite for every matrix,
nonzero at a matrix of rank n-1, 0 at rank <= n-2. The reference is that matrix computed in float64
from the minors (numpy). torch's det backward gives 0 at some rank n-1 matrices (the dependent row
case below), so the tests assert the cofactors, not torch's values, at singular matrices; torch is
the reference at regular ones. logabsdet's gradient (``inv(A).mT``) does not exist at a singular
matrix: NaN in every entry."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from parity import check

import luminal as lm
from luminal import train

pytestmark = pytest.mark.usefixtures("one_torch_thread")

SINGULAR = {  # name: (matrix, whether a zero pivot comes before the elimination's last step)
    "first_pivot_zero": ([[0, 0, 0], [0, 1, 2], [0, 3, 4]], True),
    "dependent_row": ([[1, 2, 3], [2, 4, 6], [1, 0, 1]], False),
    "dependent_column": ([[1, 2, 3], [2, 4, 5], [3, 6, 7]], True),  # the second pivot's column is 0
    "middle_zero_pivot_4x4": ([[2, 1, 0, 3], [4, 2, 1, 1], [2, 1, 5, 0], [0, 0, 1, 1]], True),
    "rank_1": (np.outer([1, 2, 3], [4, 5, 6]), True),
    "zero_3x3": (np.zeros((3, 3)), True),
    "zero_1x1": ([[0]], False),
    "nilpotent_2x2": ([[0, 1], [0, 0]], True),
    "singular_2x2": ([[1, 2], [2, 4]], False),
}
DTYPES = [(lm.float32, np.float32), (lm.float64, np.float64)]


def _cofactors(a) -> np.ndarray:
    """``adj(a).mT`` in float64, from the signed minors."""
    a = np.asarray(a, np.float64)
    n = a.shape[-1]
    if n == 1:
        return np.ones_like(a)
    c = np.empty_like(a)
    for i in range(n):
        for j in range(n):
            c[i, j] = (-1) ** (i + j) * np.linalg.det(np.delete(np.delete(a, i, 0), j, 1))
    return c


def _det_and_grad(a: np.ndarray, dtype, weights=None, backend="reference"):
    """luminal's det of ``a`` (..., n, n) and the gradient of ``sum(weights * det)``."""
    g = lm.Graph()
    x = g.input("x", a.shape, dtype=dtype)
    d = lm.linalg.det(x)
    loss = (d * g.constant(weights, dtype) if weights is not None else d).sum()
    return lm.compile([d, train.grad(loss, x)], backend=backend)(x=a)


def _grad_tol(np_dtype):
    return {"rtol": 1e-5, "atol": 1e-5} if np_dtype == np.float32 else {"rtol": 1e-12, "atol": 1e-12}


@pytest.mark.parametrize("dtype,np_dtype", DTYPES, ids=["float32", "float64"])
@pytest.mark.parametrize("name", list(SINGULAR))
def test_det_gradient_at_singular_matrix_is_the_cofactor_matrix(name, dtype, np_dtype):
    """det 0, as torch's; the gradient the cofactors (a zero pivot before the last step lost the
    cofactors of that pivot's column: [[0, 1], [0, 0]] gave 0, not [[0, 0], [-1, 0]])."""
    a = np.array(SINGULAR[name][0], np_dtype)
    d, grad = _det_and_grad(a, dtype)
    assert d == 0
    np.testing.assert_allclose(grad, _cofactors(a), **_grad_tol(np_dtype))


@pytest.mark.parametrize("backend", ["reference", "cpu"])
@pytest.mark.parametrize("dtype,np_dtype", DTYPES, ids=["float32", "float64"])
def test_det_gradient_batched_singular_and_regular(dtype, np_dtype, backend):
    """A batch mixing every 3x3 singular case with regular matrices, each det weighted (the rule's
    adjoint per matrix): values as torch's, gradients the cofactors, and torch's at regular ones."""
    rng = np.random.default_rng(0)
    singular = [np.array(m, np.float64) for m, _ in SINGULAR.values() if np.shape(m) == (3, 3)]
    regular = [rng.normal(size=(3, 3)) + 2 * np.eye(3) for _ in range(3)]
    order = rng.permutation(len(singular) + len(regular))
    a = np.stack([(singular + regular)[k] for k in order]).reshape(2, -1, 3, 3).astype(np_dtype)
    w = rng.uniform(0.5, 2.0, size=a.shape[:-2]).astype(np_dtype)
    d, grad = _det_and_grad(a, dtype, weights=w, backend=backend)
    t = torch.from_numpy(a).requires_grad_(True)
    (torch.linalg.det(t) * torch.from_numpy(w)).sum().backward()
    tol = {"rtol": 1e-5, "atol": 1e-5} if np_dtype == np.float32 else {"rtol": 1e-10, "atol": 1e-10}
    np.testing.assert_allclose(d, torch.linalg.det(torch.from_numpy(a)).numpy(), **tol)
    want = w[..., None, None] * np.stack([_cofactors(m) for m in a.reshape(-1, 3, 3)]).reshape(a.shape)
    np.testing.assert_allclose(grad, want, **tol)
    is_regular = np.abs(np.linalg.det(a.astype(np.float64))) > 0.5
    np.testing.assert_allclose(grad[is_regular], t.grad.numpy()[is_regular], **tol)


@pytest.mark.parametrize("dtype,np_dtype", DTYPES, ids=["float32", "float64"])
def test_det_gradient_of_random_rank_deficient_matrices(dtype, np_dtype):
    """Integer matrices of every rank 0..n (products of n x r and r x n factors), some with a zero
    column or upper triangular, sizes 1 to 5: the gradient is the cofactor matrix."""
    rng = np.random.default_rng(1)
    for n in range(1, 6):
        mats = []
        for _ in range(24):
            r = rng.integers(0, n + 1)
            m = rng.integers(-3, 4, size=(n, r)) @ rng.integers(-3, 4, size=(r, n))
            if rng.random() < 0.3:
                m[:, rng.integers(0, n)] = 0
            if rng.random() < 0.3:
                m = np.triu(m, rng.integers(0, 2))
            mats.append(m)
        a = np.stack(mats).astype(np_dtype)
        _, grad = _det_and_grad(a, dtype)
        want = np.stack([_cofactors(m) for m in a])
        scale = max(1.0, np.abs(want).max())
        np.testing.assert_allclose(grad / scale, want / scale, rtol=0, atol=1e-6 if np_dtype == np.float32 else 1e-13,
                                   err_msg=f"n={n}")


def _lib(t):
    return torch if isinstance(t, torch.Tensor) else lm


def _well_conditioned(shape, seed, dtype=np.float32):
    rng = np.random.default_rng(seed)
    n = shape[-1]
    return (rng.normal(size=shape) + 2 * np.sqrt(n) * np.eye(n)).astype(dtype)


@pytest.mark.parametrize("backend", ["reference", "cpu"])
def test_regular_det_and_slogdet_against_torch(backend):
    """Regular matrices, values and gradients against torch (the rules' regular case)."""
    both = lambda t: (_lib(t).linalg.det(t), _lib(t).linalg.slogdet(t)[1])  # noqa: E731
    check(both, [_well_conditioned((2, 3, 4, 4), 2)], backend=backend)
    check(both, [_well_conditioned((5, 5), 3, np.float64)], backend=backend)
    check(both, [_well_conditioned((1, 1), 4)], backend=backend)
    check(lambda t: _lib(t).linalg.det(t), [_well_conditioned((3, 2, 2), 5)], backend=backend,
          pre=lambda t: t.transpose(-1, -2))


def test_det_of_empty_matrices():
    """det of a 0 x 0 matrix is 1 (the empty product), as torch's, and its gradient an empty tensor
    (it needed ``allow_unused``: det was a constant; more in test_linalg_empty.py)."""
    a = np.zeros((2, 0, 0), np.float32)
    g = lm.Graph()
    x = g.input("x", a.shape, dtype=lm.float32)
    d = lm.linalg.det(x)
    value, grad = lm.compile([d, train.grad(d.sum(), x)], backend="reference")(x=a)
    np.testing.assert_array_equal(value, torch.linalg.det(torch.from_numpy(a)).numpy())
    np.testing.assert_array_equal(value, [1.0, 1.0])
    assert grad.shape == (2, 0, 0)


def _near_singular(n: int, cond: float, seed: int) -> np.ndarray:
    """A float32 matrix with singular values from 1 down to 1/cond, geometrically spaced."""
    rng = np.random.default_rng(seed)
    u, _ = np.linalg.qr(rng.normal(size=(n, n)))
    v, _ = np.linalg.qr(rng.normal(size=(n, n)))
    return ((u * np.geomspace(1.0, 1.0 / cond, n)) @ v.T).astype(np.float32)


@pytest.mark.parametrize("n", [3, 6])
def test_det_gradient_of_near_singular_float32_matrix(n):
    """Condition 1e7 in float32: the gradient's relative error (Frobenius) against the float64
    cofactors of the same float32 matrix stays below 1e-2 (measured up to 2e-3 at n = 6..8, as
    torch's float32 gradient: the cofactor matrix is dominated by the smallest singular direction,
    which an LU with partial pivoting resolves to about 1e4 ulps at this condition)."""
    a = np.stack([_near_singular(n, 1e7, seed) for seed in range(3)])
    _, grad = _det_and_grad(a, lm.float32)
    for k, m in enumerate(a.astype(np.float64)):
        want = np.linalg.det(m) * np.linalg.inv(m).T
        assert np.linalg.norm(grad[k] - want) / np.linalg.norm(want) < 1e-2, k


def _hessian_vector_product(a: np.ndarray, v: np.ndarray) -> np.ndarray:
    """``d <v, cofactors(A)> / dA``, exact: each cofactor is affine in any one entry of A, so a unit
    step's difference is the derivative."""
    base = _cofactors(a)
    out = np.empty_like(a)
    for r, c in np.ndindex(*a.shape):
        e = np.zeros_like(a)
        e[r, c] = 1.0
        out[r, c] = np.sum(v * (_cofactors(a + e) - base))
    return out


def _lm_hessian_vector_product(a: np.ndarray, v: np.ndarray, shape=None, backend="reference") -> np.ndarray:
    """luminal's ``d <v, d det(A) / dA> / dA`` for ``a`` (..., n, n) (the dets summed), float64."""
    g = lm.Graph()
    x = g.input("x", shape or a.shape, dtype=lm.float64)
    vv = g.input("v", shape or a.shape, dtype=lm.float64)
    first = train.grad(lm.linalg.det(x).sum(), x)
    return lm.compile([train.grad((first * vv).sum(), x)], backend=backend)(x=a, v=v)[0]


@pytest.mark.parametrize("name", ["regular", "dependent_row", "singular_2x2"])
def test_det_second_derivative(name):
    """The gradient of det's gradient: exact at regular matrices and at singular ones whose only zero
    pivot is the last, as torch's."""
    rng = np.random.default_rng(7)
    a = rng.normal(size=(3, 3)) if name == "regular" else np.array(SINGULAR[name][0], np.float64)
    v = rng.normal(size=a.shape)
    t = torch.from_numpy(a).requires_grad_(True)
    (first,) = torch.autograd.grad(torch.linalg.det(t), t, create_graph=True)
    (torch_hvp,) = torch.autograd.grad((first * torch.from_numpy(v)).sum(), t)
    want = _hessian_vector_product(a, v)
    np.testing.assert_allclose(torch_hvp.numpy(), want, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(_lm_hessian_vector_product(a, v), want, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("name", list(SINGULAR))
def test_det_second_derivative_at_every_singular_matrix(name):
    """Exact at every singular matrix (the second-order cofactors, nonzero at rank n-2 too), a zero
    pivot before the elimination's last step included: differentiating the elimination of det's
    gradient rule lost that pivot's column there (first_pivot_zero, dependent_column, ...)."""
    a = np.array(SINGULAR[name][0], np.float64)
    v = np.random.default_rng(8).normal(size=a.shape)
    np.testing.assert_allclose(_lm_hessian_vector_product(a, v), _hessian_vector_product(a, v), atol=1e-10)


def test_det_second_derivative_of_random_rank_deficient_matrices():
    """Integer matrices of every rank (as above), sizes 1 to 5, in one batch per size with a symbolic
    batch dim: the Hessian-vector products are exact."""
    rng = np.random.default_rng(10)
    for n in range(1, 6):
        mats = []
        for _ in range(8):
            r = rng.integers(0, n + 1)
            m = rng.integers(-3, 4, size=(n, r)) @ rng.integers(-3, 4, size=(r, n))
            if rng.random() < 0.3:
                m[:, rng.integers(0, n)] = 0
            mats.append(m)
        a = np.stack(mats).astype(np.float64)
        v = rng.normal(size=a.shape)
        want = np.stack([_hessian_vector_product(m, w) for m, w in zip(a, v)])
        got = _lm_hessian_vector_product(a, v, shape=("B", n, n))
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-9, err_msg=f"n={n}")


def test_det_second_derivative_batched_on_the_cpu_backend():
    """Every 3x3 singular case and regular matrices in one batch, compiled by the cpu backend."""
    rng = np.random.default_rng(13)
    mats = [np.array(m, np.float64) for m, _ in SINGULAR.values() if np.shape(m) == (3, 3)]
    a = np.stack([*mats, *(rng.normal(size=(2, 3, 3)) + 2 * np.eye(3))])
    v = rng.normal(size=a.shape)
    want = np.stack([_hessian_vector_product(m, w) for m, w in zip(a, v)])
    np.testing.assert_allclose(_lm_hessian_vector_product(a, v, backend="cpu"), want, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("name", ["regular", "first_pivot_zero", "rank_1"])
def test_det_third_derivative(name):
    """The minors' cofactors are differentiable the same way: ``d <w, hvp(A, v)> / dA`` is exact (the
    second-order cofactors are affine in each entry, so a unit step's difference is the derivative);
    torch's at the regular matrix."""
    rng = np.random.default_rng(11)
    a = rng.normal(size=(3, 3)) if name == "regular" else np.array(SINGULAR[name][0], np.float64)
    v, w = rng.normal(size=a.shape), rng.normal(size=a.shape)
    base = np.sum(w * _hessian_vector_product(a, v))
    want = np.empty_like(a)
    for r, c in np.ndindex(*a.shape):
        e = np.zeros_like(a)
        e[r, c] = 1.0
        want[r, c] = np.sum(w * _hessian_vector_product(a + e, v)) - base
    g = lm.Graph()
    x, vv, ww = (g.input(k, a.shape, dtype=lm.float64) for k in "xvw")
    second = train.grad((train.grad(lm.linalg.det(x), x) * vv).sum(), x)
    got = lm.compile([train.grad((second * ww).sum(), x)], backend="reference")(x=a, v=v, w=w)[0]
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)
    if name == "regular":
        t = torch.from_numpy(a).requires_grad_(True)
        (first,) = torch.autograd.grad(torch.linalg.det(t), t, create_graph=True)
        (hvp,) = torch.autograd.grad((first * torch.from_numpy(v)).sum(), t, create_graph=True)
        (third,) = torch.autograd.grad((hvp * torch.from_numpy(w)).sum(), t)
        np.testing.assert_allclose(got, third.numpy(), rtol=1e-10, atol=1e-10)


def test_det_second_derivative_above_the_exact_limit():
    """Above ``EXACT_SECOND_ORDER_LIMIT`` (n = 9) the second derivative differentiates the
    elimination: torch's at a regular matrix."""
    a = _well_conditioned((9, 9), 12, np.float64)
    v = np.random.default_rng(12).normal(size=a.shape)
    t = torch.from_numpy(a).requires_grad_(True)
    (first,) = torch.autograd.grad(torch.linalg.det(t), t, create_graph=True)
    (want,) = torch.autograd.grad((first * torch.from_numpy(v)).sum(), t)
    np.testing.assert_allclose(_lm_hessian_vector_product(a, v), want.numpy(), rtol=1e-9, atol=1e-6)


@pytest.mark.parametrize("dtype,np_dtype", DTYPES, ids=["float32", "float64"])
def test_slogdet_and_logdet_at_singular_matrices(dtype, np_dtype):
    """sign 0 and logabsdet -inf (torch's values); logabsdet's and logdet's gradients do not exist
    there: NaN in every entry (the elimination gave finite values in some, e.g. -2 at [1, 1] of
    first_pivot_zero; torch's mixes inf, NaN and finite values). A regular matrix in the same batch
    keeps its gradient inv(A).mT, as torch's."""
    mats = [np.array(m, np.float64) for m, _ in SINGULAR.values() if np.shape(m) == (3, 3)]
    a = np.stack([*mats, _well_conditioned((3, 3), 9, np.float64)]).astype(np_dtype)
    g = lm.Graph()
    x = g.input("x", a.shape, dtype=dtype)
    sign, logabs = lm.linalg.slogdet(x)
    logdet = lm.logdet(x)
    s, la, ld, g_la, g_ld = lm.compile([sign, logabs, logdet, train.grad(logabs.sum(), x),
                                        train.grad(logdet.sum(), x)], backend="reference")(x=a)
    singular = slice(0, len(mats))
    np.testing.assert_array_equal(s[singular], 0.0)
    np.testing.assert_array_equal(la[singular], -math.inf)
    np.testing.assert_array_equal(ld[singular], -math.inf)
    assert np.isnan(g_la[singular]).all() and np.isnan(g_ld[singular]).all()
    t = torch.from_numpy(a[-1]).requires_grad_(True)
    torch.linalg.slogdet(t)[1].backward()
    tol = {"rtol": 1e-5, "atol": 1e-6} if np_dtype == np.float32 else {"rtol": 1e-12, "atol": 1e-12}
    np.testing.assert_allclose(g_la[-1], t.grad.numpy(), **tol)
    np.testing.assert_allclose(g_ld[-1], t.grad.numpy(), **tol)


def test_logdet_of_negative_determinant():
    """logdet is NaN where det < 0 and its gradient 0 there, as torch's (the NaN is a constant)."""
    a = np.array([[0.0, 1.0], [1.0, 0.0]])
    g = lm.Graph()
    x = g.input("x", a.shape, dtype=lm.float64)
    y = lm.logdet(x)
    value, grad = lm.compile([y, train.grad(y, x)], backend="reference")(x=a)
    assert math.isnan(value)
    np.testing.assert_array_equal(grad, np.zeros((2, 2)))


def test_det_gradient_with_a_symbolic_batch():
    """A symbolic batch dim ("B"): the 3x3 shift matrix (every pivot 0, cofactor 1 at [2, 0]) and a
    regular matrix, bound to B = 2."""
    a = np.array([[[0, 1, 0], [0, 0, 1], [0, 0, 0]], [[2, 1, 0], [1, 3, 1], [0, 1, 4]]], np.float64)
    g = lm.Graph()
    x = g.input("x", ("B", 3, 3), dtype=lm.float64)
    d = lm.linalg.det(x)
    value, grad = lm.compile([d, train.grad(d.sum(), x)], backend="reference")(x=a)
    np.testing.assert_allclose(value, [0.0, 18.0], rtol=1e-12)
    np.testing.assert_allclose(grad, np.stack([_cofactors(m) for m in a]), rtol=1e-12, atol=1e-12)
