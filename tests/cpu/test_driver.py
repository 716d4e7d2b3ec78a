"""The generated driver (``backends/cpu/driver.py``): runs of generated kernels and BLAS GEMMs made one
native call, GEMMs reached through cblas's C symbols. Each GEMM layout the driver accepts is checked
against ``np.matmul`` (with tolerances: BLAS may block the sums differently for different layouts), and
each one it must leave to numpy is checked to stay an ``np.matmul`` call."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

import luminal as lm
from luminal.backends.cpu import blas, driver, generated_gemm, generated_gemv, guard
from luminal.backends.cpu.compiled import Binding

pytestmark = pytest.mark.skipif(not blas.gemms(), reason="numpy's BLAS is not its bundled OpenBLAS: no cblas symbols")


def _run_matmul(a, b, c, kinds=None, gemm="blas", fns=None):
    """``np.matmul(a, b, out=c)`` through ``driver.build`` with GEMMs ``gemm``; the calls it made (and
    into ``kinds`` the kind of each table entry, into ``fns`` its function's address)."""
    keep = []

    def cell(x):
        box = (ctypes.c_void_p * 1)(x.ctypes.data)
        keep.append(box)
        return ctypes.addressof(box), 0

    calls, tables = driver.build([(np.matmul, (a, b, c))], cell, gemm)
    if kinds is not None:
        kinds += [t[i] for t in tables for i in range(0, len(t), driver.WORDS)]
    if fns is not None:
        fns += [t[i + 1] for t in tables for i in range(0, len(t), driver.WORDS)]
    for f, args in calls:
        f(*args)
    return calls


def _rand(rng, shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


LAYOUTS = {
    "row-major": lambda r, d: (_rand(r, (5, 7), d), _rand(r, (7, 3), d), np.empty((5, 3), d)),
    "a transposed": lambda r, d: (_rand(r, (7, 5), d).T, _rand(r, (7, 3), d), np.empty((5, 3), d)),
    "b transposed": lambda r, d: (_rand(r, (5, 7), d), _rand(r, (3, 7), d).T, np.empty((5, 3), d)),
    "out column-major": lambda r, d: (_rand(r, (5, 7), d), _rand(r, (7, 3), d), np.empty((3, 5), d).T),
    "padded rows": lambda r, d: (_rand(r, (5, 9), d)[:, :7], _rand(r, (7, 6), d)[:, 1:4], np.empty((5, 8), d)[:, :3]),
    "batched": lambda r, d: (_rand(r, (4, 5, 7), d), _rand(r, (4, 7, 3), d), np.empty((4, 5, 3), d)),
    "batch broadcast": lambda r, d: (_rand(r, (1, 5, 7), d), _rand(r, (4, 7, 3), d), np.empty((4, 5, 3), d)),
    "missing batch": lambda r, d: (_rand(r, (5, 7), d), _rand(r, (2, 3, 7, 3), d), np.empty((2, 3, 5, 3), d)),
    "vector rows": lambda r, d: (_rand(r, (1, 7), d), _rand(r, (7, 3), d), np.empty((1, 3), d)),
    "vector columns": lambda r, d: (_rand(r, (5, 7), d), _rand(r, (7, 1), d), np.empty((5, 1), d)),
    "k of one": lambda r, d: (_rand(r, (5, 1), d), _rand(r, (1, 3), d), np.empty((5, 3), d)),
    "odd sizes": lambda r, d: (_rand(r, (33, 65), d), _rand(r, (65, 17), d), np.empty((33, 17), d)),
}


@pytest.mark.parametrize("gemm", ["blas", "generated"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_gemm_entries_match_numpy(layout, dtype, gemm):
    """Each layout, as BLAS's GEMM and as the generated one (``generated_gemm.py``): the entry calls
    the GEMM asked for (a product with one row or column: BLAS's GEMV either way)."""
    a, b, c = LAYOUTS[layout](np.random.default_rng(0), dtype)
    c[...] = np.nan  # (a reused slot holds anything: every element must be written)
    kinds, fns = [], []
    calls = _run_matmul(a, b, c, kinds, gemm, fns)
    assert [f for f, _ in calls] == [driver.driver()], "the driver should take this GEMM"
    if kinds[0] in (driver.SGEMM, driver.DGEMM):
        assert (fns[0] == generated_gemm.gemm(dtype)) == (gemm == "generated")
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(c, np.matmul(a, b), rtol=tol, atol=tol)


# products with one row or one column: cblas_?gemv (OpenBLAS's GEMM runs them several times slower)
VECTOR_LAYOUTS = {
    "row": lambda r, d: (_rand(r, (1, 33), d), _rand(r, (33, 17), d), np.empty((1, 17), d)),
    "row, b transposed": lambda r, d: (_rand(r, (1, 33), d), _rand(r, (17, 33), d).T, np.empty((1, 17), d)),
    "row of a strided x": lambda r, d: (_rand(r, (1, 66), d)[:, ::2], _rand(r, (33, 17), d), np.empty((1, 17), d)),
    "row, b with padded rows": lambda r, d: (_rand(r, (1, 33), d), _rand(r, (33, 20), d)[:, 2:19],
                                             np.empty((1, 17), d)),
    "column": lambda r, d: (_rand(r, (17, 33), d), _rand(r, (33, 1), d), np.empty((17, 1), d)),
    "column, a transposed": lambda r, d: (_rand(r, (33, 17), d).T, _rand(r, (33, 1), d), np.empty((17, 1), d)),
    "column of a strided b and c": lambda r, d: (_rand(r, (17, 33), d), _rand(r, (33, 3), d)[:, 1:2],
                                                 np.empty((17, 4), d)[:, 2:3]),
    "batched rows": lambda r, d: (_rand(r, (4, 1, 9), d), _rand(r, (4, 9, 5), d), np.empty((4, 1, 5), d)),
    "broadcast matrix, batched rows": lambda r, d: (_rand(r, (6, 1, 9), d), _rand(r, (9, 5), d),
                                                    np.empty((6, 1, 5), d)),
    "one by one": lambda r, d: (_rand(r, (1, 9), d), _rand(r, (9, 1), d), np.empty((1, 1), d)),
    "row into a column-major out": lambda r, d: (_rand(r, (5, 9), d), _rand(r, (9, 1), d), np.empty((1, 5), d).T),
}


@pytest.mark.parametrize("gemm", ["blas", "generated"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("layout", list(VECTOR_LAYOUTS))
def test_products_with_one_row_or_column_are_gemv_entries(layout, dtype, gemm):
    """Each is one GEMV entry of the driver (BLAS's or the generated one, as asked), right whatever
    the strides, and writes every element of its output (which may hold anything before: a reused
    slot, here NaN)."""
    a, b, c = VECTOR_LAYOUTS[layout](np.random.default_rng(2), dtype)
    c[...] = np.nan
    kinds, fns = [], []
    calls = _run_matmul(a, b, c, kinds, gemm, fns)
    assert [f for f, _ in calls] == [driver.driver()], "the driver should take this product"
    assert kinds == [driver.SGEMV if dtype == np.float32 else driver.DGEMV]
    assert (fns[0] == generated_gemv.gemv(dtype)) == (gemm == "generated")
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(c, np.matmul(a, b), rtol=tol, atol=tol)


def test_a_batch_one_linear_reads_its_weight_through_gemv():
    """A batch-1 product of a compiled program (a decode step's shape) is the driver's GEMV."""
    rng = np.random.default_rng(5)
    w = _rand(rng, (24, 40))
    g = lm.Graph()
    x = g.input("x", (1, 24))
    f = lm.compile(x @ g.constant(w), backend="cpu")
    xv = _rand(rng, (1, 24))
    np.testing.assert_allclose(f(x=xv), xv @ w, rtol=1e-5, atol=1e-5)
    (table,) = _binding(f)._keep[-1:]
    assert table[0] == driver.SGEMV


LEFT_TO_NUMPY = {
    "int32": lambda r: (np.arange(6, dtype=np.int32).reshape(2, 3), np.ones((3, 2), np.int32),
                        np.empty((2, 2), np.int32)),
    "mixed dtypes": lambda r: (_rand(r, (2, 3)), _rand(r, (3, 2), np.float64), np.empty((2, 2), np.float64)),
    "no unit stride": lambda r: (_rand(r, (4, 6))[:, ::2], _rand(r, (3, 2)), np.empty((4, 2), np.float32)),
    "empty contraction": lambda r: (_rand(r, (2, 0)), _rand(r, (0, 3)), np.full((2, 3), 7.0, np.float32)),
    "batch axes that do not merge": lambda r: (_rand(r, (2, 3, 4, 5)), _rand(r, (2, 3, 5, 2)),
                                               np.empty((3, 2, 4, 2), np.float32).transpose(1, 0, 2, 3)),
    "output overlaps an operand": lambda r: (lambda a: (a, _rand(r, (70, 70)), a))(_rand(r, (70, 70))),
}


@pytest.mark.parametrize("case", list(LEFT_TO_NUMPY))
def test_gemms_the_driver_cannot_call_stay_numpy(case):
    a, b, c = LEFT_TO_NUMPY[case](np.random.default_rng(1))
    want = np.matmul(a, b)
    calls = _run_matmul(a, b, c)
    assert [f for f, _ in calls] == [np.matmul]
    np.testing.assert_allclose(c, want, rtol=1e-5, atol=1e-4)


def test_an_empty_product_is_no_call():
    a, b, c = np.ones((0, 3), np.float32), np.ones((3, 4), np.float32), np.empty((0, 4), np.float32)
    assert _run_matmul(a, b, c) == []


def _binding(f) -> Binding:
    return next(reversed(f.runner.program._bindings.values()))


@pytest.mark.skipif(guard.BYTES > 0, reason="guard mode runs each step as a call of its own")
def test_a_program_runs_as_one_driver_call_and_follows_new_caller_arrays():
    """An MLP forward (GEMMs reading the caller's input in place, generated epilogues) is one call of
    the driver; a new input array each call is read where it is (its cell is rewritten on rebind)."""
    rng = np.random.default_rng(2)
    w1, w2 = _rand(rng, (16, 32)), _rand(rng, (32, 8))
    g = lm.Graph()
    x = g.input("x", (4, 16))
    y = (x @ g.constant(w1)).relu() @ g.constant(w2)
    f = lm.compile(y, backend="cpu")
    for _ in range(3):
        xv = _rand(rng, (4, 16))
        np.testing.assert_allclose(f(x=xv), np.maximum(xv @ w1, 0) @ w2, rtol=1e-5, atol=1e-5)
    b = _binding(f)
    assert [fn for fn, _ in b._exec] == [driver.driver()]
    assert any(fn is np.matmul for fn, _ in b.schedule.steps)  # ``steps``: the schedule, kept for reading


def test_numpy_calls_split_the_driver_runs():
    """A call that needs Python (a gather's index check) ends a run: kernels before and after it are
    driver calls of their own, and the results stay the reference's."""
    g = lm.Graph()
    x, i = g.input("x", (3, 5)), g.input("i", (3, 2), dtype=lm.int32)
    y = (x.exp().gather(1, i) * 2.0).sum()
    f = lm.compile(y, backend="cpu")
    ref = lm.compile(y, backend="reference")
    xv = np.random.default_rng(3).standard_normal((3, 5)).astype(np.float32)
    iv = np.array([[0, 4], [1, 1], [2, 3]], np.int32)
    np.testing.assert_allclose(f(x=xv, i=iv), ref(x=xv, i=iv), rtol=1e-5)
    kinds = [fn is driver.driver() for fn, _ in _binding(f)._exec]
    assert kinds.count(True) >= 1 and False in kinds


def test_auto_takes_the_generated_gemm_where_the_cost_model_prefers_it():
    """``gemm="auto"``: a convolution-shaped product (16 rows) is the generated GEMM's on one BLAS
    thread and BLAS's where BLAS has several; a large square one stays BLAS's."""
    rng = np.random.default_rng(4)
    a, b, c = _rand(rng, (16, 25)), _rand(rng, (25, 300)), np.empty((16, 300), np.float32)
    gen = generated_gemm.gemm(np.float32)
    for threads, want in ((1, True), (2, False)):
        keep = []

        def cell(x):
            box = (ctypes.c_void_p * 1)(x.ctypes.data)
            keep.append(box)
            return ctypes.addressof(box), 0

        _, tables = driver.build([(np.matmul, (a, b, c))], cell, "auto", threads)
        assert (tables[0][1] == gen) == want
    assert not generated_gemm.preferred(np.float32, 512, 512, 512, 1)


def test_companions_name_the_modules_build_may_call():
    """``driver.companions``: the driver's module always; the generated GEMM for a product its cost
    model prefers as BLAS sees it (a column-major result is its transpose's product) on the given BLAS
    threads, or for a part of a product a threaded run may cut, or under ``gemm="generated"``; never
    under ``"blas"``, for a large square product or where BLAS has threads of its own; the generated
    GEMV for a one-row product only under ``"generated"``."""
    from luminal.backends.cpu.steps import Gemm, Ref

    def gemm(m, k, n, dtype=np.float32, out_columns=False):
        a, b = Ref.contiguous(0, (m, k), dtype), Ref.contiguous(1, (k, n), dtype)
        out = Ref.contiguous(2, (m, n), dtype)
        if out_columns:  # (m, n) stored column-major
            out = Ref(2, (m, n), dtype, (np.dtype(dtype).itemsize, m * np.dtype(dtype).itemsize))
        return Gemm(a, b, out)

    plain = [(driver.DRIVER_IR, False)]
    with_gemm = plain + [(generated_gemm.module(np.float32), True)]
    conv, square, row = gemm(16, 25, 300), gemm(512, 512, 512), gemm(1, 64, 96)
    narrow = generated_gemm._shape(np.float32).nr // 2  # fewer columns than the host's microkernel is wide
    assert driver.companions([conv], "auto") == with_gemm
    assert driver.companions([gemm(300, 25, narrow)], "auto") == plain  # BLAS's: too few columns
    assert driver.companions([gemm(300, 25, narrow, out_columns=True)], "auto") == with_gemm  # its transpose
    assert driver.companions([conv], "auto", blas_threads=2) == plain
    assert driver.companions([gemm(128, 128, 256)], "auto") == plain
    assert driver.companions([gemm(128, 128, 256)], "auto", parts=2) == with_gemm  # 64 rows a part
    assert driver.companions([square, row], "auto") == plain
    assert driver.companions([conv, row], "blas") == plain
    assert driver.companions([square, row], "generated") == with_gemm + [
        (generated_gemv.module(np.float32), True)]
    assert driver.companions([gemm(16, 25, 300, np.float64)], "auto")[1] == \
        (generated_gemm.module(np.float64), True)
    # (one module per dtype however it is named: the planner names a numpy dtype, the compile its name)
    for made in (generated_gemm, generated_gemv):
        assert made.module(np.dtype(np.float32)) is made.module("float32") is made.module(np.float32)
