"""The generated GEMV (``backends/cpu/generated_gemv.py``), called through its ``cblas_?gemv`` signature
against a float64 product: both layouts, both dtypes, every vector width the host has, sizes around its
row groups and vector tails, increments other than 1 (the elements between are left alone), alpha
and beta (``beta = 0``: ``y`` is not read)."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

from luminal.backends.cpu import generated_gemv
from luminal.codegen import llvm

NO_TRANS, TRANS = 111, 112


def _function(dtype, bits=None):
    scalar = ctypes.c_float if dtype == np.float32 else ctypes.c_double
    i32, i64, p = ctypes.c_int32, ctypes.c_int64, ctypes.c_void_p
    return ctypes.CFUNCTYPE(None, i32, i32, i64, i64, scalar, p, i64, p, i64, scalar, p, i64)(
        generated_gemv.gemv(dtype, bits))


@pytest.mark.parametrize("bits", llvm.vector_widths())
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("trans", [False, True])
@pytest.mark.parametrize("shape", [(1, 1), (3, 5), (7, 33), (40, 17), (9, 100), (16, 64), (2, 0)],
                         ids=lambda s: "x".join(map(str, s)))
def test_products_match_float64(shape, trans, dtype, bits):
    m, n = shape
    rng = np.random.default_rng(m * 100 + n)
    f = _function(dtype, bits)
    a = rng.standard_normal((m, n + 2)).astype(dtype)  # rows 2 longer than the matrix
    dense = a[:, :n].astype(np.float64)
    op = dense.T if trans else dense
    for inc in (1, 3):
        x = rng.standard_normal(op.shape[1] * inc).astype(dtype)
        y0 = rng.standard_normal(op.shape[0] * inc).astype(dtype)
        for alpha, beta in ((1.0, 0.0), (2.0, 0.5)):
            y = y0.copy()
            if beta == 0:
                y[::inc] = np.nan
            f(101, TRANS if trans else NO_TRANS, m, n, alpha, a.ctypes.data, n + 2, x.ctypes.data, inc, beta,
              y.ctypes.data, inc)
            want = alpha * (op @ x[::inc].astype(np.float64)) + (beta * y0[::inc] if beta else 0.0)
            scale = np.sqrt(max(op.shape[1], 1)) * (1 + np.abs(want).max(initial=0))
            tol = (1e-5 if dtype == np.float32 else 1e-12) * scale
            np.testing.assert_allclose(y[::inc], want, rtol=0, atol=tol)
            if inc > 1:  # the elements between the increments are not touched
                np.testing.assert_array_equal(y.reshape(-1, inc)[:, 1:], y0.reshape(-1, inc)[:, 1:])
