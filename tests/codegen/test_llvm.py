"""The LLVM CPU target (``luminal/codegen/llvm.py``): every construct of the kernel IR compiled and run,
compared with the reference's numpy functions (``core/numpy_ops.py``) bit for bit where the result is
correctly rounded, within an ulp or two for Log2/Exp2/Sin, and with a tolerance for float sums."""

from __future__ import annotations

import ctypes
import threading

import numpy as np
import pytest

from luminal.codegen import ir, llvm
from luminal.core import disk_cache
from luminal.core import dtype as dt
from luminal.core import numpy_ops as ops
from luminal.core.primitives import PRIMITIVES

F16, BF16, F32, F64, I32, BOOL = dt.float16, dt.bfloat16, dt.float32, dt.float64, dt.int32, dt.bool_
FLOATS = (F16, BF16, F32, F64)
N = ir.param("n")
IT = ir.item(0)


# helpers --------------------------------------------------------------------------------------------

def elementwise(name, out, ins, fn) -> ir.Kernel:
    """``y[i] = fn(x0[i], x1[i], ...)`` over ``n`` items."""
    bufs = tuple(ir.Buf(f"x{j}", d) for j, d in enumerate(ins)) + (ir.Buf("y", out, "w"),)
    loads = [ir.load(f"x{j}", d, IT) for j, d in enumerate(ins)]
    return ir.Kernel(name, bufs, ("n",), (N,), (ir.Store("y", IT, fn(*loads)),))


def run(k: ir.Kernel, arrays, params, stop, out=None):
    """Compile ``k`` alone, run it over items ``[0, stop)``; returns ``out`` (allocated from the last
    buffer's dtype when None, with as many elements as the first array)."""
    if out is None:
        out = np.zeros(arrays[0].size if arrays else stop, k.buffers[-1].dtype.np)
    llvm.compile_kernels([k]).run(k.name, [*arrays, out], params, 0, stop)
    return out


def run_elementwise(name, out, ins, fn, arrays):
    n = arrays[0].size
    return run(elementwise(name, out, ins, fn), arrays, [n], n)


def same(a, b) -> bool:
    """Equal bit for bit, any NaN equal to any NaN."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.dtype.kind != "f":
        return np.array_equal(a, b)
    na, nb = np.isnan(a), np.isnan(b)
    u = {2: np.uint16, 4: np.uint32, 8: np.uint64}[a.itemsize]
    return np.array_equal(na, nb) and np.array_equal(a[~na].view(u), b[~nb].view(u))


def specials(d) -> np.ndarray:
    """Values of dtype ``d`` (in its storage) that exercise the edges, then random ones."""
    rng = np.random.default_rng(0)
    if d.kind == "b":
        return np.array([False, True, True, False, True] * 7)
    if d.kind == "i":
        edge = [0, 1, -1, 2, -2, 3, 7, -7, 2**31 - 1, -2**31, 2**30, 65504, 100000]
        return np.concatenate([edge, rng.integers(-2**31, 2**31, 40), rng.integers(-20, 20, 40)]).astype(np.int32)
    info = np.finfo(np.float16 if d is F16 else np.float32 if d is not F64 else np.float64)
    edge = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, 2.5, -2.5, 3.0, np.inf, -np.inf, np.nan, float(info.max),
            -float(info.max), float(info.tiny), float(info.smallest_subnormal), -float(info.smallest_subnormal),
            1e-3, 65504.0, 65520.0, 3e9, -3e9, 2.0**31, -2.0**31, 1e30, 0.1]
    vals = np.concatenate([edge, rng.normal(0, 1, 40), rng.normal(0, 1000, 20), rng.uniform(-1e-4, 1e-4, 10)])
    with np.errstate(over="ignore"):
        return dt.to_storage(vals.astype(np.float64).astype(d.np if d is not BF16 else np.float32), d)


def reference(op, d, *xs):
    """The reference's value of primitive ``op`` on operands of dtype ``d`` (in storage)."""
    out = PRIMITIVES[op].result_dtype([d] * len(xs), None)
    with np.errstate(all="ignore"):
        r = ops.where(*xs) if op == "Where" else ops.ufunc(op, d)(*xs)
        return dt.to_storage(r, out)


def pairs(d):
    """All pairs of the special values (as two arrays)."""
    v = specials(d)
    a, b = np.meshgrid(v, v, indexing="ij")
    return a.reshape(-1).copy(), b.reshape(-1).copy()


def ulps(a, b, d) -> np.ndarray:
    """Distance in units in the last place of ``d`` between finite values ``a`` and ``b``."""
    if d is BF16:
        a, b = (np.asarray(x, np.float32).view(np.int32) >> 16 for x in (a, b))
    else:
        it = {F16: np.int16, F32: np.int32, F64: np.int64}[d]
        a, b = np.asarray(a).view(it), np.asarray(b).view(it)
    a, b = a.astype(np.int64), b.astype(np.int64)
    # map the sign-magnitude bit patterns onto a line
    mask = np.int64(2 ** ((d.bits if d is not BF16 else 16) - 1) - 1)
    a = np.where(a < 0, -(a & mask), a)
    b = np.where(b < 0, -(b & mask), b)
    return np.abs(a - b)


# elementwise primitives -----------------------------------------------------------------------------

@pytest.mark.parametrize("d", FLOATS, ids=lambda d: d.name)
@pytest.mark.parametrize("op", ["Sqrt", "Recip"])
def test_exact_unary(op, d):
    x = specials(d)
    got = run_elementwise(f"u_{op}", d, (d,), lambda a: ir.alu(op, a), [x])
    assert same(got, reference(op, d, x)), (x, got, reference(op, d, x))


@pytest.mark.parametrize("d", FLOATS, ids=lambda d: d.name)
@pytest.mark.parametrize("op", ["Log2", "Exp2", "Sin"])
def test_transcendental_unary(op, d):
    """libm's (or LLVM's vector) functions and numpy's SIMD ones are both within an ulp of the exact
    value, not equal: the results agree within 2 ulps of float32/float64, 1 of a half type, and
    on NaN and infinities exactly."""
    x = specials(d)
    if op == "Sin":  # numpy's float32 sin is accurate on a bounded range
        x = x[np.abs(np.nan_to_num(x.astype(np.float64), nan=0, posinf=0, neginf=0)) < 1e4].copy()
    x = np.concatenate([x, dt.to_storage(np.linspace(-30, 30, 301), d)])
    got = run_elementwise(f"t_{op}", d, (d,), lambda a: ir.alu(op, a), [x])
    want = reference(op, d, x)
    fin = np.isfinite(want)
    assert np.array_equal(np.isnan(got), np.isnan(want)) and np.array_equal(got[~fin & ~np.isnan(want)],
                                                                            want[~fin & ~np.isnan(want)])
    assert ulps(got[fin], want[fin], d).max() <= (1 if d in (F16, BF16) else 2)


@pytest.mark.parametrize("d", FLOATS + (I32, BOOL), ids=lambda d: d.name)
@pytest.mark.parametrize("op", ["Add", "Mul", "Mod", "Max", "LessThan"])
def test_binary(op, d):
    if op == "Mod" and d is BOOL:
        pytest.skip("Mod on bool: no primitive use")
    a, b = pairs(d)
    got = run_elementwise(f"b_{op}", PRIMITIVES[op].result_dtype([d, d], None), (d, d),
                          lambda x, y: ir.alu(op, x, y), [a, b])
    want = reference(op, d, a, b)
    assert same(got, want), [(x, y, g, w) for x, y, g, w in zip(a, b, got, want) if not same(g, w)][:5]


def test_half_rounding_per_operation():
    """float16 and bfloat16 round after every operation: (a * b) * c differs from rounding once."""
    rng = np.random.default_rng(5)
    for d in (F16, BF16):
        a, b = (dt.to_storage(rng.uniform(1, 2, 1000), d) for _ in range(2))
        got = run_elementwise("chain", d, (d, d), lambda x, y: ir.alu("Mul", ir.alu("Mul", x, y), y), [a, b])
        want = reference("Mul", d, reference("Mul", d, a, b), b)
        assert same(got, want)
        once = dt.to_storage(a.astype(np.float32) * b.astype(np.float32) * b.astype(np.float32), d)
        assert not same(got, once)  # the test can tell per-operation rounding from rounding once


def test_max_signed_zero_and_nan():
    """Max is IEEE maximum: NaN if either is NaN, +0 over -0 in either order."""
    a = np.array([-0.0, 0.0, np.nan, 1.0, np.nan], np.float32)
    b = np.array([0.0, -0.0, 1.0, np.nan, np.nan], np.float32)
    got = run_elementwise("mx", F32, (F32, F32), lambda x, y: ir.alu("Max", x, y), [a, b])
    assert list(np.signbit(got[:2])) == [False, False] and np.isnan(got[2:]).all()


def test_int32_wraps_and_mod_edges():
    a = np.array([2**31 - 1, -2**31, 5, -5, -2**31, 7, 0], np.int32)
    b = np.array([1, -1, 0, 3, -1, -3, 0], np.int32)
    s = run_elementwise("iadd", I32, (I32, I32), lambda x, y: ir.alu("Add", x, y), [a, b])
    assert s[0] == -2**31 and s[1] == 2**31 - 1
    m = run_elementwise("imod", I32, (I32, I32), lambda x, y: ir.alu("Mod", x, y), [a, b])
    assert list(m) == [0, 0, 0, -2, 0, 1, 0]


def test_where_picks_bits():
    c = np.array([True, False, True, False, True])
    a = np.array([np.nan, 1.0, -0.0, np.inf, 2.0], np.float32)
    b = np.array([0.0, np.nan, 0.0, -np.inf, 3.0], np.float32)
    got = run_elementwise("wh", F32, (BOOL, F32, F32), lambda x, y, z: ir.alu("Where", x, y, z), [c, a, b])
    assert same(got, reference("Where", F32, c, a, b))
    assert np.signbit(got[2]) and np.isnan(got[0]) and np.isnan(got[1])


# casts -----------------------------------------------------------------------------------------------

ALL = (F16, BF16, F32, F64, I32, BOOL)


@pytest.mark.parametrize("dst", ALL, ids=lambda d: d.name)
@pytest.mark.parametrize("src", ALL, ids=lambda d: d.name)
def test_cast_matches_reference(src, dst):
    x = specials(src)
    got = run_elementwise("cast", dst, (src,), lambda a: ir.cast(a, dst), [x])
    with np.errstate(all="ignore"):
        want = ops.cast(x, src, dst)
    assert same(got, np.asarray(want, dst.np)), [(v, g, w) for v, g, w in zip(x, got, want) if not same(g, w)][:5]


def test_cast_defined_values():
    """The values the Cast rule defines, written out (not taken from numpy)."""
    x = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 2.7, -2.7, 0.5, -1e-30], np.float32)
    b = run_elementwise("c_b", BOOL, (F32,), lambda a: ir.cast(a, BOOL), [x])
    assert list(b) == [True, True, True, False, False, True, True, True, True]
    i = run_elementwise("c_i", I32, (F32,), lambda a: ir.cast(a, I32), [x])
    assert list(i[3:]) == [0, 0, 2, -2, 0, 0]
    h = run_elementwise("c_h", F16, (F32,), lambda a: ir.cast(a, F16),
                        [np.array([65520.0, 65519.0, -1e6, 1e-9, -0.0, np.nan], np.float32)])
    assert h[0] == np.inf and h[1] == 65504 and h[2] == -np.inf and h[3] == 0 and np.signbit(h[4]) and np.isnan(h[5])
    # float64 -> float16 rounds through float32: 1 + 2^-11 + 2^-40 is 1 + 2^-11 in float32, a tie -> 1.0
    d = run_elementwise("c_dh", F16, (F64,), lambda a: ir.cast(a, F16), [np.array([1 + 2**-11 + 2**-40])])
    assert d[0] == 1.0
    bf = run_elementwise("c_bf", BF16, (F32,), lambda a: ir.cast(a, BF16),
                         [np.array([np.nan, 1.00390625, 1.01171875, -np.inf], np.float32)])
    assert np.isnan(bf[0]) and bf[1] == 1.0 and bf[2] == 1.015625 and bf[3] == -np.inf


# loads, stores, control flow ------------------------------------------------------------------------

def test_masked_load_pads_and_never_reads_out_of_range():
    """A shifted window with a pad: ``valid`` guards indices far outside the buffer (a read there
    would fault)."""
    x = np.arange(1, 9, dtype=np.float32)
    valid = ir.alu("LessThan", IT, ir.const(8))
    far = ir.alu("Where", valid, IT, ir.const(10**12))  # out of range exactly where not valid
    k = ir.Kernel("pad", (ir.Buf("x", F32), ir.Buf("y", F32, "w")), ("n",), (N,),
                  (ir.Store("y", IT, ir.load("x", F32, far, valid, -0.0)),))
    y = run(k, [x], [12], 12, np.zeros(12, np.float32))
    assert list(y[:8]) == list(x) and np.signbit(y[8:]).all() and (y[8:] == 0).all()


def test_masked_store_and_if():
    x = np.arange(10, dtype=np.int32)
    odd = ir.alu("LessThan", ir.const(0, I32), ir.alu("Mod", ir.load("x", I32, IT), ir.const(2, I32)))
    k = ir.Kernel("odd", (ir.Buf("x", I32), ir.Buf("y", I32, "w"), ir.Buf("z", I32, "w")), ("n",), (N,),
                  (ir.Store("y", IT, ir.const(7, I32), odd),
                   ir.If(ir.alu("Not", odd), (ir.Store("z", IT, ir.load("x", I32, IT)),))))
    y, z = np.zeros(10, np.int32), np.full(10, -1, np.int32)
    llvm.compile_kernels([k]).run("odd", [x, y, z], [10], 0, 10)
    assert list(y) == [0, 7] * 5 and list(z) == [0, -1, 2, -1, 4, -1, 6, -1, 8, -1]


def test_bool_buffers_are_bytes():
    a = np.array([True, False, True, False])
    b = np.array([True, True, False, False])
    got = run_elementwise("bx", BOOL, (BOOL, BOOL), lambda x, y: ir.alu("And", x, ir.alu("Not", y)), [a, b])
    assert got.dtype == np.bool_ and list(got.view(np.uint8)) == [0, 0, 1, 0]


def test_registers_reassigned_and_read_again():
    """A register read before a loop that changes it, inside it, and after it: each read sees the
    value at that point (the emitter must not reuse a stale read)."""
    r, x = ir.var("r", F32), ir.load("x", F32, IT)
    body = (ir.Assign("r", x),
            ir.Store("y", IT * 3, ir.alu("Mul", r, ir.const(2.0, F32))),
            ir.Loop("k", ir.const(0), ir.const(3), (ir.Assign("r", ir.alu("Add", ir.alu("Mul", r, ir.const(2.0, F32)),
                                                                          ir.const(1.0, F32))),)),
            ir.Store("y", IT * 3 + 1, r),
            ir.Assign("r", ir.alu("Mul", r, ir.const(2.0, F32))),
            ir.Store("y", IT * 3 + 2, ir.alu("Mul", r, ir.const(2.0, F32))))
    k = ir.Kernel("regs", (ir.Buf("x", F32), ir.Buf("y", F32, "w")), ("n",), (N,), body)
    x_ = np.array([1.0, 2.0], np.float32)
    y = run(k, [x_], [2], 2, np.zeros(6, np.float32))
    for v, got in zip(x_, y.reshape(2, 3)):
        loop = ((v * 2 + 1) * 2 + 1) * 2 + 1
        assert list(got) == [v * 2, loop, loop * 4]


def _sum_kernel(name, d=F32, op="Add", init=0.0):
    """``y[i] = reduce(op) of x[i, 0:m]`` with a register accumulator."""
    m, k = ir.param("m"), ir.var("k")
    acc = ir.var("acc", d)
    body = (ir.Assign("acc", ir.const(init, d)),
            ir.Loop("k", ir.const(0), m, (ir.Assign("acc", ir.alu(op, acc, ir.load("x", d, IT * m + k))),)),
            ir.Store("y", IT, acc))
    return ir.Kernel(name, (ir.Buf("x", d), ir.Buf("y", d, "w")), ("n", "m"), (N,), body)


@pytest.mark.parametrize("m", [0, 1, 7, 1000, 4099])
@pytest.mark.parametrize("d", [F32, F64], ids=lambda d: d.name)
def test_sum_reduction(d, m):
    rng = np.random.default_rng(1)
    x = rng.normal(size=(5, m)).astype(d.np)
    y = run(_sum_kernel("sum", d), [x], [5, m], 5, np.full(5, np.nan, d.np))
    np.testing.assert_allclose(y, x.astype(np.float64).sum(1), rtol=1e-5 if d is F32 else 1e-12, atol=1e-5)


def test_max_reduction_propagates_nan():
    x = np.random.default_rng(2).normal(size=(4, 301)).astype(np.float32)
    x[1, 150] = np.nan
    x[2, :] = -np.inf
    y = run(_sum_kernel("mxr", F32, "Max", -np.inf), [x], [4, 301], 4, np.zeros(4, np.float32))
    assert y[0] == x[0].max() and np.isnan(y[1]) and y[2] == -np.inf and y[3] == x[3].max()


def test_reductions_vectorise_and_elementwise_code_has_no_fast_math():
    text = llvm.optimised_ir([_sum_kernel("vsum"), _sum_kernel("vmax", op="Max", init=-np.inf),
                              elementwise("vadd", F32, (F32, F32), lambda a, b: ir.alu("Add", a, b))])
    funcs = {name: body for name, body in _functions(text).items()}
    for name in ("vsum", "vmax", "vadd"):
        assert "x float>" in funcs[name], f"{name} was not vectorised"
    assert "reassoc" not in funcs["vadd"] and "fast" not in funcs["vadd"] and "nnan" not in text


def _functions(text: str) -> dict:
    out, name, lines = {}, None, []
    for line in text.splitlines():
        if line.startswith("define"):
            name, lines = line.split("@")[1].split("(")[0].strip('"'), []
        elif line == "}" and name:
            out[name] = "\n".join(lines)
            name = None
        elif name:
            lines.append(line)
    return out


# grids, params, threads ------------------------------------------------------------------------------

def _grid2(name="g2"):
    """``y[i, j] = x[i, j] * 2 + b[j]`` over an (n, m) grid."""
    m = ir.param("m")
    i, j = ir.item(0), ir.item(1)
    at = i * m + j
    val = ir.alu("Add", ir.alu("Mul", ir.load("x", F32, at), ir.const(2.0, F32)), ir.load("b", F32, j))
    return ir.Kernel(name, (ir.Buf("x", F32), ir.Buf("b", F32), ir.Buf("y", F32, "w")), ("n", "m"), (N, m),
                     (ir.Store("y", at, val),))


@pytest.mark.parametrize("shape", [(0, 5), (5, 0), (1, 1), (3, 17), (33, 1), (64, 129)])
def test_grid_2d_split_along_axis_0(shape):
    n, m = shape
    rng = np.random.default_rng(3)
    x, b = rng.normal(size=shape).astype(np.float32), rng.normal(size=m).astype(np.float32)
    mod = llvm.compile_kernels([_grid2()])
    y = np.full(shape, np.nan, np.float32)
    cut = n // 3
    mod.run("g2", [x, b, y], [n, m], 0, cut)
    if n:
        assert np.isnan(y[cut:]).all()  # items past stop untouched
    mod.run("g2", [x, b, y], [n, m], cut, n)
    assert same(y, (x * np.float32(2) + b).astype(np.float32))


def test_threads_split_axis_0():
    """ctypes releases the GIL: two threads run halves of axis 0 at once, with prebuilt pointer arrays."""
    n, m = 512, 1024
    rng = np.random.default_rng(4)
    x, b = rng.normal(size=(n, m)).astype(np.float32), rng.normal(size=m).astype(np.float32)
    y = np.zeros((n, m), np.float32)
    f = llvm.compile_kernels([_grid2()]).function("g2")
    ptrs = (ctypes.c_void_p * 3)(x.ctypes.data, b.ctypes.data, y.ctypes.data)
    vals = (ctypes.c_int64 * 2)(n, m)
    ts = [threading.Thread(target=f, args=(ctypes.addressof(ptrs), ctypes.addressof(vals), lo, hi))
          for lo, hi in ((0, n // 2), (n // 2, n))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert same(y, x * np.float32(2) + b)


def test_index_math_div_mod_and_params():
    """A transposed read through Div/Mod of the flat item index: y[i] = x[(i % n) * m + i // n]."""
    n, m = ir.param("n"), ir.param("m")
    k = ir.Kernel("tr", (ir.Buf("x", I32), ir.Buf("y", I32, "w")), ("n", "m"), (n * m,),
                  (ir.Store("y", IT, ir.load("x", I32, (IT % n) * m + IT // n)),))
    mod = llvm.compile_kernels([k])
    for a, c in ((3, 4), (5, 1), (1, 7)):  # one compile, any binding of the params
        x = np.arange(a * c, dtype=np.int32).reshape(a, c)
        y = np.zeros(a * c, np.int32)
        mod.run("tr", [x, y], [a, c], 0, a * c)
        assert list(y) == list(x.T.reshape(-1))


def test_cast_index_to_int32_and_float():
    k = ir.Kernel("iota", (ir.Buf("y", I32, "w"), ir.Buf("z", F32, "w")), ("n",), (N,),
                  (ir.Store("y", IT, ir.cast(IT, I32)), ir.Store("z", IT, ir.cast(IT, F32))))
    y, z = np.zeros(5, np.int32), np.zeros(5, np.float32)
    llvm.compile_kernels([k]).run("iota", [y, z], [5], 0, 5)
    assert list(y) == list(range(5)) and list(z) == list(range(5))


def test_atomic_add():
    k = ir.Kernel("hist", (ir.Buf("x", I32), ir.Buf("y", F32, "rw")), ("n",), (N,),
                  (ir.AtomicAdd("y", ir.cast(ir.load("x", I32, IT), ir.INDEX), ir.const(1.0, F32)),))
    x = np.array([0, 1, 1, 2, 2, 2, 0], np.int32)
    y = run(k, [x], [7], 7, np.zeros(3, np.float32))
    assert list(y) == [2, 2, 3]


def test_several_kernels_one_module():
    a = elementwise("neg", F32, (F32,), lambda x: ir.alu("Mul", x, ir.const(-1.0, F32)))
    b = elementwise("sq", F32, (F32,), lambda x: ir.alu("Mul", x, x))
    mod = llvm.compile_kernels([a, b])
    x = np.array([1.0, 2.0, 3.0], np.float32)
    y = np.zeros(3, np.float32)
    mod.run("neg", [x, y], [3], 0, 3)
    assert list(y) == [-1, -2, -3]
    mod.run("sq", [x, y], [3], 0, 3)
    assert list(y) == [1, 4, 9]
    with pytest.raises(KeyError):
        mod.address("nope")


def test_rejects_gpu_kernels_and_duplicate_names():
    g = ir.Kernel("g", (ir.Buf("y", F32, "w"),), (), (ir.const(1),),
                  (ir.Store("y", ir.thread(0), ir.const(1.0, F32)),), block=(32,))
    with pytest.raises(ir.IRError, match="GPU"):
        llvm.compile_kernels([g])
    a = elementwise("dup", F32, (F32,), lambda x: x)
    with pytest.raises(ir.IRError, match="two kernels"):
        llvm.compile_kernels([a, a])


# caches ----------------------------------------------------------------------------------------------

def test_disk_cache_skips_optimisation(tmp_path, monkeypatch):
    monkeypatch.setenv("LUMINAL_CACHE_DIR", str(tmp_path))
    llvm.forget()
    calls = []
    real = llvm.optimise
    monkeypatch.setattr(llvm, "optimise", lambda mod, *rest: (calls.append(1), real(mod, *rest)))
    k = elementwise("cached", F32, (F32,), lambda x: ir.alu("Add", x, ir.const(0.25, F32)))
    first = llvm.compile_kernels([k])
    assert calls == [1] and not first.from_cache
    assert llvm.compile_kernels([k]) is first  # in-process cache
    disk_cache.flush()  # (objects are written behind the compile)
    assert len(list((tmp_path / "llvm").rglob("*.o"))) == 1
    llvm.forget()  # a fresh process, as far as the caches go
    second = llvm.compile_kernels([k])
    assert calls == [1] and second.from_cache and second is not first
    x, y = np.array([1.0, 2.0], np.float32), np.zeros(2, np.float32)
    second.run("cached", [x, y], [2], 0, 2)
    assert list(y) == [1.25, 2.25]
    other = elementwise("cached", F32, (F32,), lambda x: ir.alu("Add", x, ir.const(0.5, F32)))
    assert not llvm.compile_kernels([other]).from_cache and calls == [1, 1]  # another IR text, another key


def test_hand_vectorised_text_takes_the_light_pipeline_under_a_key_of_its_own(tmp_path, monkeypatch):
    """``compile_text(..., vectorised=True)`` (the generated GEMM and GEMV: vector code written out)
    runs O1 without LLVM's vectorisers, and its object is cached apart from the same text's as a
    kernel (``KERNEL_SPEED`` with them)."""
    monkeypatch.setenv("LUMINAL_CACHE_DIR", str(tmp_path))
    llvm.forget()
    seen = []
    real = llvm.optimise
    monkeypatch.setattr(llvm, "optimise", lambda mod, light=False: (seen.append(light), real(mod, light)))
    text = "define i64 @twice(i64 %x) {\n  %y = add i64 %x, %x\n  ret i64 %y\n}\n"
    light, full = llvm.compile_text(text, ["twice"], vectorised=True), llvm.compile_text(text, ["twice"])
    assert seen == [True, False] and light.key != full.key
    assert llvm.cache_key(text, vectorised=True) != llvm.cache_key(text)
    fn = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int64)
    assert fn(light.address("twice"))(21) == fn(full.address("twice"))(21) == 42


def test_a_generated_module_is_found_in_the_caches_without_writing_its_text(tmp_path, monkeypatch):
    """``Generated`` (the generated GEMM and GEMV): the object is keyed by the module's name and luminal's
    source, so a fresh process finds it on disk without writing the text (25-40 ms each), and runs the
    same code; another name, or another source, is another object (its text written and compiled)."""
    monkeypatch.setenv("LUMINAL_CACHE_DIR", str(tmp_path))
    llvm.forget()
    written = []

    def write(times="2"):
        written.append(times)
        return f"define i64 @twice(i64 %x) {{\n  %y = mul i64 %x, {times}\n  ret i64 %y\n}}\n"

    fn = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int64)
    mod = llvm.compile_text(llvm.Generated("luminal_test_times_2", write), ["twice"], vectorised=True)
    assert written == ["2"] and fn(mod.address("twice"))(21) == 42
    disk_cache.flush()
    llvm.forget()
    mod = llvm.compile_text(llvm.Generated("luminal_test_times_2", write), ["twice"], vectorised=True)
    assert written == ["2"] and mod.from_cache and fn(mod.address("twice"))(21) == 42
    mod = llvm.compile_text(llvm.Generated("luminal_test_times_3", lambda: write("3")), ["twice"], vectorised=True)
    assert written == ["2", "3"] and fn(mod.address("twice"))(21) == 63
    llvm.forget()
    monkeypatch.setattr(llvm, "source_digest", lambda: b"luminal edited")
    mod = llvm.compile_text(llvm.Generated("luminal_test_times_2", write), ["twice"], vectorised=True)
    assert written == ["2", "3", "2"] and not mod.from_cache


def test_a_warm_start_finds_objects_without_building_module_text(tmp_path, monkeypatch):
    """The disk index (kernel fingerprint -> symbol and object key): a fresh process compiling kernels
    it compiled before builds no LLVM IR at all, and runs the same code; a damaged index entry is a
    miss (the text is built and the entry written again)."""
    monkeypatch.setenv("LUMINAL_CACHE_DIR", str(tmp_path))
    llvm.forget()
    built = []
    real = llvm.build_module
    monkeypatch.setattr(llvm, "build_module", lambda *a, **kw: (built.append(1), real(*a, **kw))[1])
    ks = [elementwise(f"ix{i}", F32, (F32,), lambda x, i=i: ir.alu("Mul", x, ir.const(i + 2.0, F32))) for i in range(3)]
    llvm.compile_kernels(ks)
    disk_cache.flush()  # (index entries are written behind the compile)
    assert len(built) == 3 and len(list((tmp_path / "llvm").rglob("*.ix"))) == 3
    llvm.forget()
    mod = llvm.compile_kernels(ks)
    assert len(built) == 3 and mod.from_cache
    x, y = np.array([1.0, 2.0], np.float32), np.zeros(2, np.float32)
    mod.run("ix1", [x, y], [2], 0, 2)
    assert list(y) == [3.0, 6.0]
    entry = next((tmp_path / "llvm").rglob("*.ix"))
    entry.write_bytes(entry.read_bytes()[:-3] + b"zzz")  # its digest no longer matches
    llvm.forget()
    mod = llvm.compile_kernels(ks)
    assert len(built) == 4 and mod.from_cache  # one text built again; its object was on disk
    llvm.forget()
    llvm.compile_kernels(ks)
    assert len(built) == 4  # and its entry is whole again


def test_bfloat16_rounding_keeps_every_nan():
    """NaNs whose payload sits in the low 16 bits: the bit rounding alone would make them inf
    (0x7F800001) or -0.0 (0xFFFFFFFF); bfloat16 keeps them NaN."""
    x = np.array([0x7F800001, 0xFFFFFFFF, 0x7FC00000, 0x3F808000], np.uint32).view(np.float32)
    got = run_elementwise("bfnan", BF16, (F32,), lambda a: ir.cast(a, BF16), [x])
    assert np.isnan(got[:3]).all() and got[3] == 1.0
    got = run_elementwise("bfnan2", BF16, (BF16, BF16), lambda a, b: ir.alu("Add", a, b),
                          [x[:3].copy(), np.zeros(3, np.float32)])
    assert np.isnan(got).all()


# index simplification --------------------------------------------------------------------------------

def test_index_math_of_a_reshape_loses_its_divisions():
    """A row-major index taken apart again (what a Reshape of a view reads) simplifies to the items
    themselves (no division left in the LLVM IR), and a mask the ranges decide disappears; the values
    are the same."""
    i, j = ir.item(0), ir.item(1)
    flat = (i * 18 + j) * 1
    a, b = flat // 18, flat % 18  # i and j again
    inside = ir.alu("LessThan", j, ir.const(20))  # always true: j < 18
    k = ir.Kernel("rs", (ir.Buf("x", F32), ir.Buf("y", F32, "w")), (), (ir.const(5), ir.const(18)),
                  (ir.Store("y", (a % 16) * 18 + b, ir.load("x", F32, (a * 18 + b) // 1, inside, 7.0)),))
    text = str(llvm.build_module([k]))
    assert "sdiv" not in text and "srem" not in text and ".read" not in text
    x = np.arange(90, dtype=np.float32)
    y = run(k, [x], [], 5, np.zeros(90, np.float32))
    assert list(y) == list(x)


def test_index_simplification_keeps_possibly_negative_remainders():
    """(4i - j) // 2 with j in [0, 4): the remainder -j may be negative, so the division stays as
    written (floor and the kernel's truncating division differ there); where the index is valid
    (i >= 1) the values are exact, and the masked lanes (i = 0) read nothing."""
    x = np.arange(40, dtype=np.float32)
    i, j = ir.item(0), ir.item(1)
    valid = ir.alu("Not", ir.alu("LessThan", i, ir.const(1)))
    at = (i * 4 + j * (-1)) // 2
    k = ir.Kernel("neg", (ir.Buf("x", F32), ir.Buf("y", F32, "w")), (), (ir.const(9), ir.const(4)),
                  (ir.Store("y", i * 4 + j, ir.load("x", F32, at, valid, -1.0)),))
    assert "sdiv" in str(llvm.build_module([k]))
    y = run(k, [x], [], 9, np.zeros(36, np.float32)).reshape(9, 4)
    assert (y[0] == -1).all() and all(y[a, b] == (4 * a - b) // 2 for a in range(1, 9) for b in range(4))


@pytest.mark.parametrize("d", [F16, BF16, F32], ids=lambda d: d.name)
def test_relu_composition_keeps_negative_zero(d):
    """The frontend's ReLU, ``where(x <= 0, where(x < 0, 0, x), x)`` with ``x <= 0`` composed of LessThan
    (not(x < 0 or 0 < x) and not isnan(x), or x < 0): ReLU(-0.0) is -0.0. LLVM 20 folded the float16
    form into ``select(x <= 0, 0, x)`` (+0.0) until the widened halves went through a canonicalize."""
    def relu(x):
        zero = ir.const(0.0, d)
        lt, gt = ir.alu("LessThan", x, zero), ir.alu("LessThan", zero, x)
        finite = ir.alu("Or", ir.alu("LessThan", x, ir.const(np.inf, d)), ir.alu("LessThan", ir.const(-np.inf, d), x))
        eq = ir.alu("And", ir.alu("Not", ir.alu("Or", lt, gt)), finite)
        return ir.alu("Where", ir.alu("Or", lt, eq), ir.alu("Where", lt, zero, x), x)

    x = dt.to_storage(np.array([-0.0, 0.0, -1.5, 2.0, np.nan, -np.inf, np.inf] * 5), d)
    got = run_elementwise("relu", d, (d,), relu, [x])
    want = np.where(x <= 0, np.where(x < 0, 0, x), x).astype(x.dtype)
    assert same(got, want) and np.signbit(got[0])


def test_a_split_index_put_back_together_is_the_index():
    """``(f // 28) * 28 + f % 28`` (an output stored through its own shape's unflattened index) is ``f``."""
    f = ir.item(0) * 1
    k = ir.Kernel("rejoin", (ir.Buf("x", F32), ir.Buf("y", F32, "w")), (), (ir.const(56),),
                  (ir.Store("y", (f // 28) * 28 + f % 28, ir.load("x", F32, ((f // 4) * 4 + f % 4) * 1)),))
    text = str(llvm.build_module([k]))
    assert "sdiv" not in text and "srem" not in text
    x = np.arange(56, dtype=np.float32)
    assert list(run(k, [x], [], 56, np.zeros(56, np.float32))) == list(x)


def test_distinct_buffers_vectorise_short_inner_loops():
    """A copy with a 14-wide inner loop (an im2col): with the caller's promise that its buffers are
    distinct (scoped-noalias metadata) LLVM vectorises it (LLVM 20 left it scalar without: the overlap
    checks cost more than 14 elements save)."""
    i, j = ir.item(0), ir.item(1)
    k = ir.Kernel("copy14", (ir.Buf("x", F32), ir.Buf("y", F32, "w")), (), (ir.const(50), ir.const(14)),
                  (ir.Store("y", i * 14 + j, ir.load("x", F32, i * 18 + j)),))
    assert "x float>" in llvm.optimised_ir([k], distinct=True)
    assert "!noalias" in str(llvm.build_module([k], distinct=True)) and "!noalias" not in str(llvm.build_module([k]))
    x = np.arange(50 * 18, dtype=np.float32)
    y = np.zeros(50 * 14, np.float32)
    llvm.compile_kernels([k], distinct=True).run("copy14", [x, y], [], 0, 50)
    assert (y.reshape(50, 14) == x.reshape(50, 18)[:, :14]).all()
