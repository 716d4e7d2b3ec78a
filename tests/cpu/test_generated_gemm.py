"""The generated GEMM (``backends/cpu/generated_gemm.py``), called through its ``cblas_?gemm``
signature against a float64 product: every transpose, both dtypes, sizes around each of its blocks
(the microkernel's rows and columns, the packed panels with whole and part-filled sub-panels, the
blocks of k, the register transposes of a transposed B), leading dimensions longer than a row,
alpha and beta."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

from luminal.backends.cpu import generated_gemm
from luminal.codegen import llvm

NO_TRANS, TRANS = 111, 112


def _function(dtype):
    scalar = ctypes.c_float if dtype == np.float32 else ctypes.c_double
    i32, i64, p = ctypes.c_int32, ctypes.c_int64, ctypes.c_void_p
    return ctypes.CFUNCTYPE(None, i32, i32, i32, i64, i64, i64, scalar, p, i64, p, i64, scalar, p, i64)(
        generated_gemm.gemm(dtype))


def _operand(rng, rows, cols, trans, dtype, pad):
    """A ``rows x cols`` operand stored as given (``trans``: as its transpose), its stored rows ``pad``
    longer than needed; ``(logical matrix, storage, leading dimension)``."""
    shape = (cols, rows) if trans else (rows, cols)
    store = rng.standard_normal((shape[0], shape[1] + pad)).astype(dtype)
    view = store[:, :shape[1]]
    return (view.T if trans else view), store, store.shape[1]


def _gemm(dtype, m, n, k, ta, tb, alpha=1.0, beta=0.0, pad=0, seed=0):
    rng = np.random.default_rng(seed)
    a, a_store, lda = _operand(rng, m, k, ta, dtype, pad)
    b, b_store, ldb = _operand(rng, k, n, tb, dtype, pad)
    c_store = np.full((m, n + pad), np.nan, dtype) if beta == 0 else rng.standard_normal((m, n + pad)).astype(dtype)
    c0 = c_store[:, :n].astype(np.float64)
    _function(dtype)(101, TRANS if ta else NO_TRANS, TRANS if tb else NO_TRANS, m, n, k, alpha, a_store.ctypes.data,
                     lda, b_store.ctypes.data, ldb, beta, c_store.ctypes.data, n + pad)
    want = alpha * (a.astype(np.float64) @ b.astype(np.float64)) + (beta * c0 if beta else 0.0)
    return c_store, want


def _tolerance(dtype, k):
    eps = np.finfo(dtype).eps
    return 4 * eps * np.sqrt(max(k, 1)) * 8  # |sum| of k unit normals' products: about sqrt(k)


SHAPES = [(1, 1, 1), (5, 40, 0), (3, 5, 7), (8, 32, 16), (13, 33, 300), (25, 70, 513), (12, 32, 256), (40, 200, 17),
          (16, 50, 25), (29, 257, 130), (4, 16, 1),
          (9, 600, 40)]  # (k = 0: C = beta * C)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("tb", [False, True])
@pytest.mark.parametrize("ta", [False, True])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_products_match_float64(shape, ta, tb, dtype):
    m, n, k = shape
    c, want = _gemm(dtype, m, n, k, ta, tb)
    np.testing.assert_allclose(c[:, :n], want, rtol=0, atol=_tolerance(dtype, k) * (1 + np.abs(want).max()))


@pytest.mark.parametrize("ta, tb", [(False, False), (True, True)])
def test_leading_dimensions_alpha_and_beta(ta, tb):
    """Rows longer than the matrix (the tail is never read or written), ``alpha`` scales the product
    and ``beta`` the old C; ``beta = 0`` ignores C (NaN there stays out of the result)."""
    for alpha, beta in ((1.0, 0.0), (0.5, 0.0), (2.0, 1.0), (1.0, -0.5)):
        c, want = _gemm(np.float32, 21, 45, 300, ta, tb, alpha, beta, pad=3, seed=1)
        np.testing.assert_allclose(c[:, :45], want, rtol=0, atol=1e-4 * (1 + np.abs(want).max()))
        if beta == 0:
            assert np.isnan(c[:, 45:]).all(), "the padding past each row of C was written"


def test_each_vector_width_the_host_has_compiles_and_agrees():
    """The microkernel follows the vector registers: every width this host has gives the same
    products (the shape of the microkernel changes, not the sums' order within a block of k)."""
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((19, 70)).astype(np.float32), rng.standard_normal((70, 50)).astype(np.float32)
    for bits in llvm.vector_widths():
        c = np.empty((19, 50), np.float32)
        f = ctypes.CFUNCTYPE(None, *([ctypes.c_int32] * 3 + [ctypes.c_int64] * 3 + [ctypes.c_float, ctypes.c_void_p,
                                     ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64, ctypes.c_float, ctypes.c_void_p,
                                     ctypes.c_int64]))(generated_gemm.gemm(np.float32, bits))
        f(101, NO_TRANS, NO_TRANS, 19, 50, 70, 1.0, a.ctypes.data, 70, b.ctypes.data, 50, 0.0, c.ctypes.data, 50)
        np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=0, atol=1e-4)


def test_the_cost_model():
    """Generated where BLAS would run on one thread and a side is small with the blocks filled; BLAS's
    otherwise."""
    nr = generated_gemm.shape_for(np.float32, max(llvm.vector_widths())).nr
    assert generated_gemm.preferred(np.float32, 16, 50176, 25, 1)
    assert generated_gemm.preferred(np.float32, 32, 200, 25088, 1)
    assert not generated_gemm.preferred(np.float32, 16, 50176, 25, 2)  # BLAS on two threads
    assert not generated_gemm.preferred(np.float32, 16, nr - 1, 784, 1)  # narrower than a microkernel
    assert not generated_gemm.preferred(np.float32, 4, 500, 25, 1)  # rows below 8
    assert not generated_gemm.preferred(np.float32, 512, 768, 256, 1)  # large on every side
