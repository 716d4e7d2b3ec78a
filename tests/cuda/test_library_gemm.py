"""Library products on the CUDA backends (``backends/cuda/library.py``): the cuBLASLt descriptor a
product maps to (column-major, transposes, leading dimensions, batch strides), checked against
``np.matmul`` on the same views, through the simulated device that computes it from the descriptor;
which products take the library and which keep the own kernels; and, on a GPU, cuBLASLt itself."""

import numpy as np
import pytest

import luminal as lm
from luminal.backends.cuda import driver, library
from luminal.backends.cuda.launches import DeviceMemory, lower_kernel, options
from luminal.codegen import ir
from luminal.codegen.target import CUDA, CUDA_LIBRARY
from luminal.core import dtype as dt

# name -> (input shapes, the product over the inputs: GraphTensors or numpy arrays alike)
CASES = {
    "plain": ({"a": (5, 7), "b": (7, 3)}, lambda a, b: a @ b),
    "a transposed": ({"a": (7, 5), "b": (7, 3)}, lambda a, b: a.T @ b),
    "b transposed": ({"a": (5, 7), "b": (3, 7)}, lambda a, b: a @ b.T),
    "both transposed": ({"a": (7, 5), "b": (3, 7)}, lambda a, b: a.T @ b.T),
    "batched, b shared": ({"a": (2, 3, 5, 7), "b": (7, 4)}, lambda a, b: a @ b),
    "batched, both": ({"a": (2, 3, 5, 7), "b": (2, 3, 7, 4)}, lambda a, b: a @ b),
    "batched, b transposed": ({"a": (3, 5, 7), "b": (3, 4, 7)}, lambda a, b: a @ b.swapaxes(1, 2)),
    "rows sliced (an offset)": ({"a": (9, 7), "b": (7, 3)}, lambda a, b: a[2:7] @ b),
    "columns sliced (a leading dimension)": ({"a": (5, 11), "b": (7, 3)}, lambda a, b: a[:, 1:8] @ b),
    "one row (m = 1)": ({"a": (1, 7), "b": (7, 6)}, lambda a, b: a @ b),
    "one column (n = 1)": ({"a": (6, 7), "b": (7, 1)}, lambda a, b: a @ b),
    "an epilogue": ({"a": (5, 7), "b": (7, 3)}, lambda a, b: a @ b * 2.0 + 1.0),
}
TOLERANCE = {"float32": 1e-5, "float16": 2e-3, "bfloat16": 1.6e-2}


def _values(shape, dtype: str, seed: int) -> np.ndarray:
    """Random values of ``dtype`` as a caller gives them (bfloat16: float32 arrays of its values)."""
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    if dtype == "float16":
        return x.astype(np.float16)
    return dt.round_bf16(x) if dtype == "bfloat16" else x


def _compile(shapes: dict, make, dtype: str, **kw):
    g = lm.Graph()
    ins = [g.input(n, s, dtype=getattr(lm, dtype)) for n, s in shapes.items()]
    return lm.compile(make(*ins), backend="cuda-emulated", **kw)


def _schedules(f) -> list:
    return [launch.choice for s in f.runner.program.steps for launch in s.launches]


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("dtype", list(TOLERANCE))
def test_a_library_product_equals_numpy_on_the_same_views(case, dtype):
    shapes, make = CASES[case]
    f = _compile(shapes, make, dtype)
    arrays = {n: _values(s, dtype, i) for i, (n, s) in enumerate(shapes.items())}
    want = make(*(a.astype(np.float64) for a in arrays.values()))
    for _ in range(2):  # launch by launch, then the captured graph replayed
        got = np.asarray(f(**arrays), np.float64)
        tol = TOLERANCE[dtype]
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol * max(1.0, float(np.abs(want).max())))
    assert "library" in _schedules(f)


def test_a_product_the_library_cannot_read_keeps_the_own_kernels():
    """A product over a padded view (masked reads: no leading dimension covers it) runs as the own
    kernels; so does every product on a target without a library."""
    shapes = {"a": (5, 7), "b": (6, 3)}
    make = lambda a, b: a @ b.pad([0, 0, 0, 1])  # noqa: E731  (b padded to 7 rows)
    f = _compile(shapes, make, "float32")
    arrays = {n: _values(s, "float32", i) for i, (n, s) in enumerate(shapes.items())}
    np.testing.assert_allclose(f(**arrays), arrays["a"] @ np.pad(arrays["b"], ((0, 1), (0, 0))), rtol=1e-5, atol=1e-5)
    assert "library" not in _schedules(f)
    g = lm.Graph()
    y = g.input("a", (5, 7)) @ g.input("b", (7, 3))
    k = next(k for k in lm.compile(y, backend="cuda-emulated").runner.program.kg.kernels if k.kind == "matmul")
    assert options(k, CUDA, DeviceMemory())[0] != "library" and "library" not in options(k, CUDA, DeviceMemory())
    assert options(k, CUDA_LIBRARY, DeviceMemory())[0] == "library"
    own = lower_kernel(k, "tiled", CUDA_LIBRARY)  # (an own schedule stays buildable: the search times it)
    assert all(isinstance(x.kernel, ir.Kernel) for x in own)


@pytest.mark.parametrize("case", ["flipped", "sliding windows"])
def test_views_no_leading_dimension_describes_run_as_own_kernels(case):
    """Reversed rows (a negative stride) and overlapping windows (rows 1 apart, 3 long): no leading
    dimension describes them, so the product keeps the own kernels."""
    make, ref = {
        "flipped": (lambda x, w: x.flip(0) @ w, lambda x, w: np.flip(x, 0) @ w),
        "sliding windows": (lambda x, w: x[0].unfold(0, 3, 1) @ w[:3],
                            lambda x, w: np.lib.stride_tricks.sliding_window_view(x[0], 3) @ w[:3]),
    }[case]
    shapes = {"x": (4, 6), "w": (6, 3)}
    f = _compile(shapes, make, "float32")
    arrays = {n: _values(s, "float32", i) for i, (n, s) in enumerate(shapes.items())}
    np.testing.assert_allclose(f(**arrays), ref(*arrays.values()), rtol=1e-5, atol=1e-5)
    assert "library" not in _schedules(f)


def test_an_empty_sum_is_zeros_and_an_empty_product_nothing():
    g = lm.Graph()
    y = g.input("a", (2, "K")) @ g.input("b", ("K", "N"))
    f = lm.compile(y, backend="cuda-emulated")
    for k, n in ((4, 3), (0, 3), (4, 0), (0, 0)):
        a, b = _values((2, k), "float32", 1), _values((k, n), "float32", 2)
        for _ in range(2):
            got = f(a=a, b=b)
            assert got.shape == (2, n)
            np.testing.assert_allclose(got, a @ b, rtol=1e-5, atol=1e-6)
    assert "library" in _schedules(f)


def test_a_symbolic_batch_binds_anew_without_lowering_again():
    g = lm.Graph()
    y = g.input("a", ("B", 4, 6)) @ g.input("b", (6, 5))
    f = lm.compile(y, backend="cuda-emulated")
    program = f.runner.program
    launches = program.launches()
    for batch in (3, 1, 7):
        a, b = _values((batch, 4, 6), "float32", batch), _values((6, 5), "float32", 9)
        np.testing.assert_allclose(f(a=a, b=b), a @ b, rtol=1e-5, atol=1e-5)
    assert program.launches() == launches and any(x.choice == "library" for x in launches)


def _gemm(geometry, m=3, n=4, k=5, batch=1, dtypes=(dt.float32,) * 3) -> library.LibraryGemm:
    bufs = tuple(ir.Buf(x, d, "w" if x == "c" else "r") for x, d in zip("abc", dtypes))
    lift = lambda t: tuple(ir.const(v) for v in t)  # noqa: E731
    return library.LibraryGemm("g", bufs, ir.const(m), ir.const(n), ir.const(k), ir.const(batch),
                               tuple(lift(g) for g in geometry))


def test_the_descriptor_reads_row_major_c_as_its_column_major_transpose():
    """``C = A @ B`` row-major is cuBLASLt's ``C^T = B^T A^T``: B first, then A; a row-major operand
    is its own transpose read column-major (no op), a column-major one is read with OP_T."""
    # A (3 x 5) row-major, ld 5; B (5 x 4) stored column-major (k contiguous), ld 5; C (3 x 4) row-major
    call = _gemm(((0, 5, 1, 0), (0, 1, 5, 0), (0, 4, 1, 0))).call((1024, 2048, 4096), {})
    assert (call.m, call.n, call.k) == (4, 3, 5)
    assert call.transa and not call.transb  # B column-major: OP_T; A row-major: none
    assert (call.a.ptr, call.a.rows, call.a.cols, call.a.ld) == (2048, 5, 4, 5)
    assert (call.b.ptr, call.b.rows, call.b.cols, call.b.ld) == (1024, 5, 3, 5)
    assert (call.c.ptr, call.c.rows, call.c.cols, call.c.ld) == (4096, 4, 3, 4)
    offset = _gemm(((2, 5, 1, 0), (0, 4, 1, 0), (0, 4, 1, 0))).call((1024, 2048, 4096), {})
    assert offset.b.ptr == 1024 + 2 * 4  # (an element offset, in bytes of the dtype)


def test_a_view_that_is_no_matrix_is_refused_by_name():
    with pytest.raises(library.LibraryError, match="operand A"):
        _gemm(((0, 2, 2, 0), (0, 4, 1, 0), (0, 4, 1, 0))).call((0, 0, 0), {})  # no unit stride
    with pytest.raises(library.LibraryError, match="operand B"):
        _gemm(((0, 5, 1, 0), (0, 2, 1, 0), (0, 4, 1, 0))).call((0, 0, 0), {})  # rows overlap: ld 2 < 4


def test_the_simulated_library_follows_the_descriptor_batches_and_broadcasts():
    """``library.simulate`` over plain memory: a batch of column-major A (op T) times one B shared by
    every batch (batch stride 0), into C, equals np.matmul on those matrices."""
    rng = np.random.default_rng(1)
    memory = np.zeros(4096, np.uint8)
    base = 1 << 20

    def bytes_at(ptr, nbytes):
        return memory[ptr - base:ptr - base + nbytes]

    a = rng.standard_normal((2, 3, 6)).astype(np.float32)  # row-major (m, k): column-major k x m, read with OP_T
    b = rng.standard_normal((6, 4)).astype(np.float32)  # stored column-major (k x n), ld 6 -> b.T rows
    memory[:a.nbytes] = a.reshape(-1).view(np.uint8)
    memory[512:512 + b.nbytes] = np.asfortranarray(b).reshape(-1, order="F").view(np.uint8)
    call = library.GemmCall("t", True, False, 3, 4, 6, 2,
                            library.Matrix(base, dt.float32, 6, 3, 6, 18),
                            library.Matrix(base + 512, dt.float32, 6, 4, 6, 0),
                            library.Matrix(base + 1024, dt.float32, 3, 4, 3, 12))
    library.simulate(call, bytes_at)
    got = memory[1024:1024 + 2 * 12 * 4].view(np.float32).reshape(2, 4, 3).swapaxes(1, 2)  # column-major C
    np.testing.assert_allclose(got, a @ b, rtol=1e-6, atol=1e-6)


def test_a_gpu_without_cublaslt_keeps_the_own_kernels(monkeypatch):
    """The driver's device asks for cuBLASLt once (library, handle, workspace); where that fails the
    products are the own kernels and the reason is kept, and a library launch says why it cannot run."""
    from luminal.backends.cuda import cublaslt
    from luminal.backends.cuda.device import DeviceError
    from luminal.backends.cuda.driver_device import DriverDevice

    tries = []

    def missing(alloc):
        tries.append(1)
        raise DeviceError("cuBLASLt is not available (no libcublasLt here)")

    monkeypatch.setattr(cublaslt, "CublasLt", missing)
    dev = object.__new__(DriverDevice)  # (no GPU here: only the library's bookkeeping is exercised)
    dev._lt, dev.library_error, dev.use = None, None, lambda: None
    assert not dev.gemm_library() and not dev.gemm_library() and tries == [1]
    assert "no libcublasLt" in dev.library_error
    gemm = _gemm(((0, 5, 1, 0), (0, 4, 1, 0), (0, 4, 1, 0)))
    with pytest.raises(DeviceError, match="no cuBLASLt"):
        dev.launch(gemm, (1, 1, 1), (1, 1, 1), None)


def test_cublaslt_is_told_how_each_operand_is_aligned():
    """A view's offset or a batch stride can leave an operand aligned to less than the 256 bytes
    cuBLASLt's heuristic assumes: the plan asks for algorithms that take the actual alignment."""
    from luminal.backends.cuda.cublaslt import alignment

    m = lambda ptr, stride=0, dtype=dt.float16: library.Matrix(ptr, dtype, 4, 4, 4, stride)  # noqa: E731
    assert alignment(m(1 << 20), 1) == 256
    assert alignment(m((1 << 20) + 28), 1) == 4  # rows sliced: an offset of 14 halves
    assert alignment(m((1 << 20) + 2), 1) == 2
    assert alignment(m(1 << 20, 70), 3) == 4  # each batch 140 bytes on
    assert alignment(m(1 << 20, 70), 1) == 256  # (one batch: the stride is never used)


def test_the_real_cublaslt_reads_back_the_descriptors_it_was_given():
    """Where libcublasLt is installed (the ``cuda`` extra's ``nvidia-cublas``; it loads without a
    GPU), the matmul descriptor and layouts made for a call hold what the call says: the transposes,
    the compute type, each matrix's type, rows, columns, leading dimension, batch count and stride."""
    import ctypes

    from luminal.backends.cuda import cublaslt

    lib = cublaslt.load()
    if lib is None:
        pytest.skip(f"no libcublasLt: {cublaslt.why()}")
    call = library.GemmCall("t", True, False, 3, 4, 6, 2, library.Matrix(0, dt.float16, 6, 3, 8, 24),
                            library.Matrix(0, dt.float16, 6, 4, 6, 0), library.Matrix(0, dt.float16, 3, 4, 3, 12))
    desc, *layouts = cublaslt.descriptors(lib, call)

    def get(fn, obj, attr, ctype):
        v, written = ctype(), ctypes.c_size_t()
        assert fn(obj, attr, ctypes.addressof(v), ctypes.sizeof(v), ctypes.addressof(written)) == 0
        return v.value

    i32, i64, u64 = ctypes.c_int32, ctypes.c_int64, ctypes.c_uint64
    assert [get(lib.cublasLtMatmulDescGetAttribute, desc, a, i32) for a in (0, 3, 4)] == [68, 1, 0]
    for layout, x in zip(layouts, (call.a, call.b, call.c)):
        got = [get(lib.cublasLtMatrixLayoutGetAttribute, layout, a, t)
               for a, t in ((0, i32), (2, u64), (3, u64), (4, i64), (5, i32), (6, i64))]
        assert got == [2, x.rows, x.cols, x.ld, call.batch, x.batch_stride]
    lib.cublasLtMatmulPreferenceDestroy(cublaslt.preference(lib, (256, 4, 2)))


@pytest.mark.gpu
def test_cublaslt_equals_the_own_kernels_on_a_gpu():
    ok, why = driver.device_status()
    if not ok:
        pytest.skip(why)
    from luminal.backends.cuda import cublaslt

    if cublaslt.load() is None:
        pytest.skip(f"no cuBLASLt: {cublaslt.why()}")
    for dtype in TOLERANCE:
        for case in ("plain", "both transposed", "batched, b shared", "rows sliced (an offset)",
                     "columns sliced (a leading dimension)", "an epilogue"):
            shapes, make = CASES[case]
            g = lm.Graph()
            ins = [g.input(n, s, dtype=getattr(lm, dtype)) for n, s in shapes.items()]
            f = lm.compile(make(*ins), backend="cuda")
            arrays = {n: _values(s, dtype, i) for i, (n, s) in enumerate(shapes.items())}
            want = make(*(a.astype(np.float64) for a in arrays.values()))
            for _ in range(2):
                tol = TOLERANCE[dtype]
                np.testing.assert_allclose(np.asarray(f(**arrays), np.float64), want, rtol=tol,
                                           atol=tol * max(1.0, float(np.abs(want).max())))
            assert "library" in _schedules(f)
