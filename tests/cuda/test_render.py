"""The CUDA C renderer, the NVRTC compiler and the driver launcher.

Without a GPU (CI): every construct of the kernel IR renders deterministically and compiles to an
sm_90 cubin that reports its registers and does not spill (NVRTC runs without a device), errors
carry the numbered source, and the disk cache answers without NVRTC. With a GPU (tests marked
``gpu``, skipped with the driver's reason otherwise): the kernels run and match numpy, which is the
only check of the semantics the text encodes (16-bit rounding, NaN-propagating max, fmod, wrapping
int32, the mma fragment layout, atomics, barriers, stale locals after an assignment).
"""

from __future__ import annotations

import sys

import numpy as np
import pytest

from luminal.backends.cuda import driver, nvrtc
from luminal.backends.cuda.render import RenderError, eval_index, kernel_symbol, literal, render
from luminal.codegen import ir
from luminal.core import dtype as dt
from luminal.core.primitives import PRIMITIVES

f16, bf16, f32, f64, i32, b8 = dt.float16, dt.bfloat16, dt.float32, dt.float64, dt.int32, dt.bool_


# kernels (each builder makes fresh IR objects: determinism must not hang on object identity) --------

def elementwise():
    """Masked tail (n is no multiple of the block), float16/bfloat16 loads, casts and a float16 store."""
    n = ir.param("n")
    i = ir.block(0) * 256 + ir.thread(0)
    ok = i < n
    x = ir.load("x", f16, i, ok)
    y = ir.load("y", bf16, i, ok)
    s = ir.alu("Add", ir.cast(x, f32), ir.cast(y, f32))
    p = ir.alu("Mul", s, s)
    body = (ir.Store("o", i, ir.cast(p, f16), ok),
            ir.Store("ob", i, ir.alu("Add", ir.cast(x, bf16), y), ok))
    return ir.Kernel("elementwise", (ir.Buf("x", f16), ir.Buf("y", bf16), ir.Buf("o", f16, "w"),
                                     ir.Buf("ob", bf16, "w")), ("n",), ((n + 255) // 256,), body, block=(256,))


def all_ops():
    """Every primitive, cast and index op the renderer knows, one output each."""
    n = ir.param("n")
    i = ir.block(0) * 128 + ir.thread(0)
    ok = i < n
    a, b = ir.load("a", f32, i, ok, 1.0), ir.load("b", f32, i, ok, 1.0)
    ia, ib = ir.load("ia", i32, i, ok, 1), ir.load("ib", i32, i, ok, 1)
    h = ir.cast(a, f16)
    lt = ir.alu("LessThan", a, b)
    outs = {
        "max": (f32, ir.alu("Max", a, b)),
        "mod": (f32, ir.alu("Mod", a, b)),
        "recip": (f32, ir.alu("Recip", a)),
        "sqrt": (f32, ir.alu("Sqrt", a)),
        "log2": (f32, ir.alu("Log2", a)),
        "exp2": (f32, ir.alu("Exp2", a)),
        "sin": (f32, ir.alu("Sin", a)),
        "where": (f32, ir.alu("Where", lt, a, ir.const(float("-inf"), f32))),
        "lt": (b8, lt),
        "imod": (i32, ir.alu("Mod", ia, ib)),
        "iadd": (i32, ir.alu("Add", ia, ib)),
        "imul": (i32, ir.alu("Mul", ia, ib)),
        "imax": (i32, ir.alu("Max", ia, ib)),
        "ftoi": (i32, ir.cast(a, i32)),
        "itob": (b8, ir.cast(ia, b8)),
        "bor": (b8, ir.alu("Add", lt, ir.cast(ia, b8))),
        "band": (b8, ir.alu("And", ir.alu("Mul", lt, ir.cast(ib, b8)), ir.alu("Not", ir.alu("Or", lt, lt)))),
        "hsum": (f16, ir.alu("Add", h, ir.alu("Exp2", h))),
        "bprod": (bf16, ir.alu("Mul", ir.cast(a, bf16), ir.cast(b, bf16))),
        "dsum": (f64, ir.alu("Add", ir.alu("Mul", ir.cast(a, f64), ir.const(0.1, f64)), ir.cast(ia, f64))),
        "hmax": (f16, ir.alu("Max", h, ir.cast(ir.const(float("nan"), f32), f16))),
    }
    body = tuple(ir.Store(name, i, v, ok) for name, (_, v) in outs.items())
    bufs = (ir.Buf("a", f32), ir.Buf("b", f32), ir.Buf("ia", i32), ir.Buf("ib", i32))
    bufs += tuple(ir.Buf(name, d, "w") for name, (d, _) in outs.items())
    return ir.Kernel("all_ops", bufs, ("n",), ((n + 127) // 128,), body, block=(128,))


def warp_sum():
    """One warp per row: a butterfly of shfl_xor sums the row's 32 lanes (masked past ``cols``)."""
    cols = ir.param("cols")
    lane, row = ir.thread(0), ir.block(0)
    acc = ir.var("acc", f32)
    body = [ir.Assign("acc", ir.load("x", f32, row * cols + lane, lane < cols, 0.0))]
    body += [ir.Assign("acc", ir.alu("Add", acc, ir.shfl_xor(acc, m))) for m in (16, 8, 4, 2, 1)]
    body.append(ir.If(lane < 1, (ir.Store("out", row, acc),)))
    return ir.Kernel("warp_sum", (ir.Buf("x", f32), ir.Buf("out", f32, "w")), ("rows", "cols"),
                     (ir.param("rows"),), tuple(body), block=(32,))


def block_sum():
    """A thread-strided loop (step = the block's size) into a register, then a shared-memory tree with
    barriers. The same load value ``s[t]`` is read at every level: a renderer that kept it in a local
    across the stores and barriers would sum stale values."""
    n, t = ir.param("n"), ir.thread(0)
    acc = ir.var("acc", f32)
    st = ir.load("s", f32, t)
    body = [ir.Assign("acc", ir.const(0.0, f32)),
            ir.Loop("k", t, n, (ir.Assign("acc", ir.alu("Add", acc, ir.load("x", f32, ir.var("k")))),),
                    step=ir.const(128)),
            ir.Store("s", t, acc), ir.Barrier()]
    for stride in (64, 32, 16, 8, 4, 2, 1):
        body += [ir.If(t < stride, (ir.Store("s", t, ir.alu("Add", st, ir.load("s", f32, t + stride))),)),
                 ir.Barrier()]
    body.append(ir.If(t < 1, (ir.Store("out", ir.block(0), st),)))
    return ir.Kernel("block_sum", (ir.Buf("x", f32), ir.Buf("out", f32, "w")), ("n",), (ir.const(1),),
                     tuple(body), block=(128,), shared=(ir.Shared("s", f32, 128),))


def atomics():
    """Atomic adds into 4 slots of float32, int32, float16 and bfloat16 buffers (the 16-bit ones by a
    compare-and-swap on the 32-bit word: neighbouring slots share words)."""
    n = ir.param("n")
    i = ir.block(0) * 256 + ir.thread(0)
    ok = i < n
    slot = i % 4
    body = tuple(ir.AtomicAdd(f"o{name}", slot, ir.load(f"x{name}", d, i, ok), ok)
                 for name, d in (("f", f32), ("i", i32), ("h", f16), ("b", bf16)))
    bufs = tuple(ir.Buf(f"x{name}", d) for name, d in (("f", f32), ("i", i32), ("h", f16), ("b", bf16)))
    bufs += tuple(ir.Buf(f"o{name}", d, "rw") for name, d in (("f", f32), ("i", i32), ("h", f16), ("b", bf16)))
    return ir.Kernel("atomics", bufs, ("n",), ((n + 255) // 256,), body, block=(256,))


def mma(dtype):
    """One warp's D(16x8) = A(16x16, row-major) @ B(16x8, row-major KxN) + C(16x8) through mma.sync,
    operands gathered in the PTX fragment layout of m16n8k16."""
    lane = ir.thread(0)
    g, t = lane // 4, lane % 4
    a = []
    for r_off, c_off in ((0, 0), (8, 0), (0, 8), (8, 8)):
        for j in (0, 1):
            a.append(ir.load("a", dtype, (g + r_off) * 16 + t * 2 + c_off + j))
    b = [ir.load("b", dtype, (t * 2 + k_off + j) * 8 + g) for k_off in (0, 8) for j in (0, 1)]
    c_at = [(g + r_off) * 8 + t * 2 + j for r_off in (0, 8) for j in (0, 1)]
    c = [ir.load("c", f32, at) for at in c_at]
    d = ("d0", "d1", "d2", "d3")
    body = (ir.Mma(d, tuple(a), tuple(b), tuple(c), dtype),) + tuple(
        ir.Store("out", at, ir.var(name, f32)) for name, at in zip(d, c_at))
    return ir.Kernel(f"mma_{dtype.name}", (ir.Buf("a", dtype), ir.Buf("b", dtype), ir.Buf("c", f32),
                                           ir.Buf("out", f32, "w")), (), (ir.const(1),), body, block=(32,))


def registers():
    """``t = acc * 2`` read before and after ``acc = t``: by the IR's semantics the second read sees the
    new ``acc`` (out = [2, 4]), so the local holding ``t`` must not outlive the assignment."""
    acc = ir.var("acc", f32)
    t = ir.alu("Mul", acc, ir.const(2.0, f32))
    body = (ir.Assign("acc", ir.const(1.0, f32)), ir.Store("out", ir.const(0), t), ir.Assign("acc", t),
            ir.Store("out", ir.const(1), t))
    return ir.Kernel("registers", (ir.Buf("out", f32, "w"),), (), (ir.const(1),), body, block=(1,))


def wide(d=f32):
    """Thread ``t`` of ``groups``: one 16-byte load of ``w`` elements of x from ``wt`` on (4 float32, 8
    16-bit), stored reversed and scaled by their position plus one (as float32), so that each
    register's lane and the load's reach show."""
    t = ir.block(0) * 64 + ir.thread(0)
    w = ir.wide_lanes(d)
    ok = t < ir.param("groups")
    names = tuple(f"w{i}" for i in range(w))
    body = (ir.If(ok, (ir.WideLoad(names, "x", d, t * w),
                       *(ir.Store("out", t * w + (w - 1 - i),
                                  ir.alu("Mul", ir.cast(ir.var(nm, d), f32), ir.const(float(i + 1), f32)))
                         for i, nm in enumerate(names)))),)
    return ir.Kernel(f"wide_{d.name}", (ir.Buf("x", d), ir.Buf("out", f32, "w")), ("groups",),
                     ((ir.param("groups") + 63) // 64,), body, block=(64,))


KERNELS = {"elementwise": elementwise, "all_ops": all_ops, "warp_sum": warp_sum, "block_sum": block_sum,
           "atomics": atomics, "mma_f16": lambda: mma(f16), "mma_bf16": lambda: mma(bf16),
           "registers": registers, "wide": wide, "wide_f16": lambda: wide(f16), "wide_bf16": lambda: wide(bf16)}


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A private compile cache: tests neither read a stale entry nor leave entries behind."""
    monkeypatch.setenv("LUMINAL_CACHE_DIR", str(tmp_path))
    return tmp_path / "cuda"


def _need_nvrtc():
    pytest.importorskip("cuda.bindings.nvrtc", reason="cuda-python is not installed (the cuda extra)")


# rendering ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(KERNELS))
def test_render_is_deterministic(name):
    """The source is the cache key: fresh IR objects of the same kernel give the same bytes."""
    first, second = render(KERNELS[name]()), render(KERNELS[name]())
    assert first == second
    assert "#include" not in first  # the NVRTC wheel ships no CUDA headers
    assert 'extern "C" __global__ void __launch_bounds__(' in first


def test_render_text_of_constructs():
    """Spot checks of what the semantics need: typed signature, guarded loads, shared arrays,
    barriers, the strided loop, the mma instruction, 16-bit CAS atomics."""
    src = render(elementwise())
    assert "const unsigned short* __restrict__ g_x" in src and "long long p_n)" in src
    assert "__launch_bounds__(256) elementwise(" in src
    assert "? lm_h2f(g_x[" in src and "lm_f2b(" in src
    src = render(block_sum())
    assert "__shared__ __align__(16) float s_s[128];" in src
    assert src.count("__syncthreads();") == 8
    assert "for (long long r_k = (long long)threadIdx.x; r_k < p_n; r_k += 128LL)" in src
    assert "float r_acc = 0;" in src
    assert "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32" in render(mma(bf16))
    assert "lm_atomic_add_h(&g_oh[" in render(atomics())
    assert "__shfl_xor_sync(0xffffffffu, r_acc, 16)" in render(warp_sum())


def test_locals_do_not_outlive_what_they_read():
    """A value used twice is one local, but not across an assignment of a register it reads, nor
    across a store to (or a barrier before a reload of) a buffer it loads."""
    src = render(registers())
    assert src.count("(r_acc * 0x1p+1f)") == 2  # once before ``acc = t``, once after
    src = render(block_sum())
    assert src.count("s_s[(long long)threadIdx.x]") >= 8  # s[t] reloaded after every barrier


def test_deep_expressions_and_loop_bounds(cache):
    """A 300-deep single-use chain is split into locals (compilers limit nesting), and a loop bound
    that reads a register the body changes is evaluated once, as ``range`` does."""
    x = ir.load("x", f32, ir.thread(0))
    for j in range(300):
        x = ir.alu("Add", x, ir.const(float(j), f32))
    stop = ir.var("m") + 1
    body = (ir.Assign("m", ir.const(3)),
            ir.Loop("k", ir.const(0), stop, (ir.Assign("m", ir.var("m") + 1),)),
            ir.Store("o", ir.thread(0), x), ir.Store("n", ir.const(0), ir.cast(ir.var("m"), i32)))
    k = ir.Kernel("deep", (ir.Buf("x", f32), ir.Buf("o", f32, "w"), ir.Buf("n", i32, "w")), (), (ir.const(1),),
                  body, block=(32,))
    src = render(k)
    assert max(line.count("(") for line in src.splitlines()) < 100
    assert "const long long v0 = (r_m + 1LL);" in src and "r_k < v0;" in src
    _need_nvrtc()
    assert nvrtc.compile_cubin(src, "deep", "sm_90").spills == 0


def test_literals_are_exact():
    """Hex floats for finite values, bit patterns for NaN/inf; 16-bit constants rounded to their type."""
    assert literal(-0.0, f32) == "(-0x0p+0f)"
    assert literal(float("inf"), f32) == "__int_as_float(0x7f800000)"
    assert literal(float("nan"), f32) == "__int_as_float(0x7fc00000)"
    assert literal(float("-inf"), f64) == "__longlong_as_double(0xfff0000000000000LL)"
    assert float.fromhex(literal(0.1, f32)[:-1]) == float(np.float32(0.1))
    assert float.fromhex(literal(0.1, f16)[:-1]) == float(np.float16(0.1))
    assert float.fromhex(literal(1.0 + 2**-9, bf16)[:-1]) == 1.0  # ties to even
    assert literal(-2**31, i32) == "(-2147483647 - 1)" and literal(2**31, i32) == "(-2147483647 - 1)"
    assert literal(-5, ir.INDEX) == "(-5LL)" and literal(True, b8) == "true"


def test_render_rejects_what_it_cannot_run():
    """A CPU kernel, or a register assigned two dtypes, is a lowering bug: said with the kernel's name."""
    cpu = ir.Kernel("cpu", (ir.Buf("o", f32, "w"),), (), (ir.const(4),),
                    (ir.Store("o", ir.item(0), ir.const(1.0, f32)),))
    with pytest.raises(RenderError, match="cpu.*CPU kernel"):
        render(cpu)
    two = ir.Kernel("two", (ir.Buf("o", f32, "w"),), (), (ir.const(1),),
                    (ir.Assign("r", ir.const(1.0, f32)), ir.Assign("r", ir.const(1, i32))), block=(32,))
    with pytest.raises(RenderError, match="two.*register 'r'"):
        render(two)


def test_kernel_symbol_and_eval_index():
    """A launch needs the C name of the function and the grid as numbers."""
    assert kernel_symbol(elementwise()) == "elementwise"
    k = ir.Kernel("fused.add-1", (), (), (ir.const(1),), (), block=(32,))
    assert kernel_symbol(k) == "k_fused_add_1" and "void __launch_bounds__(32) k_fused_add_1(" in render(k)
    n = ir.param("n")
    assert eval_index((n + 255) // 256, {"n": 1000}) == 4
    assert eval_index(n % 7 * 3, {"n": 20}) == 18
    with pytest.raises(KeyError, match="'n'"):
        eval_index(n + 1, {})


# compiling ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(KERNELS))
def test_compiles_to_sm90_without_spills(name, cache):
    """Each construct is valid CUDA C for NVRTC with no header, and fits in registers."""
    _need_nvrtc()
    k = KERNELS[name]()
    cubin = nvrtc.compile_cubin(render(k), kernel_symbol(k), "sm_90")
    assert cubin.data[:4] == b"\x7fELF" and cubin.arch == "sm_90"
    assert cubin.registers > 0, cubin.log
    assert cubin.spills == 0, cubin.log


def test_compile_error_shows_numbered_source(cache):
    """A kernel NVRTC rejects is reported with its name, NVRTC's message and the source by line."""
    _need_nvrtc()
    src = 'extern "C" __global__ void broken(float* o) {\n  o[0] = undefined_thing;\n}\n'
    with pytest.raises(nvrtc.NvrtcError) as e:
        nvrtc.compile_cubin(src, "broken", "sm_90")
    msg = str(e.value)
    assert "broken" in msg and "undefined_thing" in msg and "error" in msg
    assert "2 |   o[0] = undefined_thing;" in msg


def test_fma_contraction_is_on_unless_asked_off(cache, monkeypatch):
    """NVRTC fuses ``a * b + c`` by default (``--fmad=true``); ``LUMINAL_CUDA_FMAD=0`` rounds every
    operation as the IR does. The two are different cubins under different cache keys; a value
    that is neither is refused by name (it changes the math)."""
    _need_nvrtc()
    monkeypatch.delenv("LUMINAL_CUDA_FMAD", raising=False)
    assert "--fmad=true" in nvrtc.options()
    k = elementwise()
    src = render(k)
    fused = nvrtc.compile_cubin(src, kernel_symbol(k), "sm_90")
    monkeypatch.setenv("LUMINAL_CUDA_FMAD", "0")
    assert "--fmad=false" in nvrtc.options()
    exact = nvrtc.compile_cubin(src, kernel_symbol(k), "sm_90")
    assert nvrtc.cache_key(src, "sm_90") != nvrtc.cache_key(src, "sm_90", nvrtc.options()[:-1] + ("--fmad=true",))
    assert len(list(cache.glob("*.cubin"))) == 2 and fused.data and exact.data
    monkeypatch.setenv("LUMINAL_CUDA_FMAD", "yes")
    with pytest.raises(ValueError, match="LUMINAL_CUDA_FMAD must be 0"):
        nvrtc.options()


def test_cache_returns_same_bytes_without_nvrtc(cache, monkeypatch):
    """The second compile of a source is a file read: NVRTC is not called (a raising stand-in proves it)."""
    _need_nvrtc()
    k = elementwise()
    src = render(k)
    first = nvrtc.compile_cubin(src, kernel_symbol(k), "sm_90")
    assert len(list(cache.glob("*.cubin"))) == 1

    def no_compile(*a, **kw):
        raise AssertionError("NVRTC called on a cache hit")

    monkeypatch.setattr(nvrtc, "_compile", no_compile)
    again = nvrtc.compile_cubin(src, kernel_symbol(k), "sm_90")
    assert again == first
    with pytest.raises(AssertionError, match="cache hit"):  # another arch is another entry
        nvrtc.compile_cubin(src, kernel_symbol(k), "sm_80")


def test_corrupt_cache_entry_is_recompiled(cache):
    """A damaged entry is not trusted: it is compiled again and overwritten."""
    _need_nvrtc()
    k = registers()
    src = render(k)
    good = nvrtc.compile_cubin(src, kernel_symbol(k), "sm_90")
    (entry,) = cache.glob("*.cubin")
    entry.write_bytes(entry.read_bytes()[:-10])
    assert nvrtc.compile_cubin(src, kernel_symbol(k), "sm_90").data == good.data  # the log's timings differ
    assert entry.read_bytes().endswith(good.data)


def test_swapped_cache_entries_are_recompiled(cache):
    """Two entries swapped (a copy gone wrong): each file's header names the other entry, so each is a
    miss compiled again, never another kernel's cubin under this one's key."""
    _need_nvrtc()
    kernels = [registers(), elementwise()]
    good = [nvrtc.compile_cubin(render(k), kernel_symbol(k), "sm_90") for k in kernels]
    a, b = (cache / f"{nvrtc.cache_key(render(k), 'sm_90')}.cubin" for k in kernels)
    a_bytes, b_bytes = a.read_bytes(), b.read_bytes()
    a.write_bytes(b_bytes)
    b.write_bytes(a_bytes)
    again = [nvrtc.compile_cubin(render(k), kernel_symbol(k), "sm_90") for k in kernels]
    assert [c.data for c in again] == [c.data for c in good]
    assert a.read_bytes().endswith(good[0].data) and b.read_bytes().endswith(good[1].data)  # rewritten


def test_parse_resources():
    """Registers of the entry function; spills summed over every function in the report."""
    log = ("ptxas info    : Compiling entry function 'k' for 'sm_90'\n"
           "ptxas info    : Function properties for k\n"
           "ptxas         .     8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads\n"
           "ptxas info    : Used 40 registers, used 1 barriers\n"
           "ptxas info    : Function properties for helper\n"
           "ptxas         .     0 bytes stack frame, 2 bytes spill stores, 0 bytes spill loads\n")
    assert nvrtc.parse_resources(log, "k") == (40, 10)
    assert nvrtc.parse_resources("", "k") == (-1, -1)  # no report: unknown, not "no spills"


def test_missing_cuda_python_names_the_extra(monkeypatch):
    """Without cuda-python the error says which extra to install; device_status reports, never raises."""
    monkeypatch.setitem(sys.modules, "cuda.bindings", None)
    with pytest.raises(nvrtc.CudaUnavailableError, match=r"luminal\[cuda\]"):
        nvrtc._nvrtc()
    ok, reason = driver._probe()
    assert not ok and reason.startswith("no CUDA device: ") and "luminal[cuda]" in reason


def test_device_status_shape():
    """(bool, str); without a device the reason says why (the gpu tests skip with it)."""
    ok, reason = driver.device_status()
    assert isinstance(ok, bool) and isinstance(reason, str)
    if not ok:
        assert reason.startswith("no CUDA device: ")


# on the GPU ---------------------------------------------------------------------------------------

def _gpu():
    ok, reason = driver.device_status()
    if not ok:
        pytest.skip(reason)


def _run(k, buffers, params):
    from luminal.backends.cuda import runtime
    from luminal.backends.cuda.oneshot import launch_once

    cubin = nvrtc.compile_cubin(render(k), kernel_symbol(k))  # the device's arch
    # no spills, where the log says (-1: no ptxas report; on the H200 image NVRTC left it out once torch
    # was imported, as conftest does; test_compiles_to_sm90_without_spills checks the same kernels)
    assert cubin.spills in (0, -1), cubin.log
    launch_once(runtime.gpu().device, k, buffers, params)


def _bf16(a):
    return dt.round_bf16(np.asarray(a, np.float32))


@pytest.mark.gpu
def test_gpu_elementwise_matches_numpy(cache):
    """The masked tail is neither read nor written; 16-bit results are the reference's bits."""
    _gpu()
    rng = np.random.default_rng(0)
    n = 1000
    x = rng.standard_normal(n).astype(np.float16)
    y = _bf16(rng.standard_normal(n))
    o = np.full(n + 24, 7, np.float16)  # past n: must stay untouched
    ob = np.full(n + 24, 7, np.float32)
    _run(elementwise(), {"x": x, "y": y, "o": o, "ob": ob}, {"n": n})
    s = x.astype(np.float32) + y
    np.testing.assert_array_equal(o[:n], (s * s).astype(np.float16))
    np.testing.assert_array_equal(ob[:n], _bf16(_bf16(x.astype(np.float32)) + y))
    assert (o[n:] == 7).all() and (ob[n:] == 7).all()


@pytest.mark.gpu
def test_gpu_all_ops_match_numpy(cache, monkeypatch):
    """Exactly specified ops bit for bit (max with NaN, fmod, IEEE recip/sqrt, wrapping int32, casts);
    the transcendental functions within a few ulp. FMA contraction off (``nvrtc.options``): with it on
    (the default), ``a * 0.1 + ia`` in float64 is one fused rounding, an ulp from the IR's two (seen on
    an H200)."""
    _gpu()
    monkeypatch.setenv("LUMINAL_CUDA_FMAD", "0")
    rng = np.random.default_rng(1)
    n = 300
    a = (rng.standard_normal(n) * 4).astype(np.float32)
    b = (rng.standard_normal(n) * 4).astype(np.float32)
    a[:6] = [np.nan, 1.0, -0.0, 0.0, np.inf, 3.5]
    b[:6] = [1.0, np.nan, 0.0, -0.0, 2.0, 0.0]
    ia = rng.integers(-2**31, 2**31, n, dtype=np.int64).astype(np.int32)
    ib = rng.integers(-9, 9, n).astype(np.int32)
    ib[:3] = [0, -1, 1]
    ia[1] = -2**31
    k = all_ops()
    bufs = {"a": a, "b": b, "ia": ia, "ib": ib}
    for buf in k.buffers[4:]:
        bufs[buf.name] = np.zeros(n, np.float32 if buf.dtype is bf16 else buf.dtype.np)
    _run(k, bufs, {"n": n})
    def eq(got, want):  # NaN-aware, and the sign of zero counts (max(-0, 0) is 0, fmod(-0, 1) is -0)
        np.testing.assert_array_equal(got, want)
        if got.dtype.kind == "f":  # a NaN's sign is the hardware's (x86 makes negative ones)
            keep = ~np.isnan(want)
            np.testing.assert_array_equal(np.signbit(got[keep]), np.signbit(want[keep]))

    with np.errstate(all="ignore"):
        # the primitive's own definition (IEEE 754-2019 maximum: max(0, -0) is +0), not np.maximum, which
        # returns its second operand for two zeros on x86 (-0 there): the first run on a GPU found it
        eq(bufs["max"], PRIMITIVES["Max"].ufunc(a, b))
        eq(bufs["mod"], np.fmod(a, b))
        eq(bufs["recip"], np.float32(1) / a)
        eq(bufs["sqrt"], np.sqrt(a))
        np.testing.assert_allclose(bufs["log2"], np.log2(a), rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(bufs["exp2"], np.exp2(a), rtol=1e-6)
        np.testing.assert_allclose(bufs["sin"], np.sin(a), rtol=1e-6, atol=1e-6)
        eq(bufs["where"], np.where(a < b, a, np.float32(-np.inf)))
        eq(bufs["lt"], a < b)
        eq(bufs["imod"], np.where((ib == 0) | (ib == -1), 0, np.fmod(ia, np.where(ib == 0, 1, ib))))
        eq(bufs["iadd"], ia + ib)
        eq(bufs["imul"], ia * ib)
        eq(bufs["imax"], np.maximum(ia, ib))
        finite = np.isfinite(a)
        eq(bufs["ftoi"][finite], np.trunc(a[finite]).astype(np.int32))
        eq(bufs["itob"], ia != 0)
        eq(bufs["bor"], (a < b) | (ia != 0))
        eq(bufs["band"], np.zeros(n, bool))  # (lt and ib) and not (lt or lt) == False
        h = a.astype(np.float16)
        hexp = np.exp2(h.astype(np.float32)).astype(np.float16)
        np.testing.assert_allclose(bufs["hsum"].astype(np.float32),
                                   (h.astype(np.float32) + hexp.astype(np.float32)).astype(np.float16)
                                   .astype(np.float32), rtol=2e-3)
        eq(bufs["bprod"], _bf16(_bf16(a) * _bf16(b)))
        eq(bufs["dsum"], a.astype(np.float64) * 0.1 + ia.astype(np.float64))
        assert np.isnan(bufs["hmax"]).all()


@pytest.mark.gpu
def test_gpu_warp_sum(cache):
    """The shfl_xor butterfly sums each row, lanes past ``cols`` contributing 0."""
    _gpu()
    rows, cols = 5, 27
    x = np.arange(rows * cols, dtype=np.float32) % 17
    out = np.zeros(rows, np.float32)
    _run(warp_sum(), {"x": x, "out": out}, {"rows": rows, "cols": cols})
    np.testing.assert_array_equal(out, x.reshape(rows, cols).sum(1))


def test_a_wide_load_renders_as_one_vector_load():
    assert render(wide()).count("reinterpret_cast<const float4*>") == 1
    half = render(wide(bf16))
    assert half.count("reinterpret_cast<const uint4*>") == 1 and half.count("lm_b2f((unsigned short)") == 8


@pytest.mark.gpu
@pytest.mark.parametrize("d", [f32, f16, bf16])
def test_gpu_wide_load(d, cache):
    """The registers of a 16-byte load are its elements in order (16-bit: the lower half of each word
    first); the emulator agrees."""
    _gpu()
    from luminal.codegen import emulator

    groups, w = 37, ir.wide_lanes(d)
    x = emulator.device_array(np.arange(w * groups, dtype=np.float32) * 0.5, d)
    out, em_out = np.zeros(w * groups, np.float32), np.zeros(w * groups, np.float32)
    _run(wide(d), {"x": x, "out": out}, {"groups": groups})
    emulator.run(wide(d), {"x": x, "out": em_out}, {"groups": groups})
    stored = np.arange(w * groups, dtype=np.float32) * 0.5  # as x holds it (bfloat16 rounds past 128)
    stored = _bf16(stored) if d is bf16 else stored
    want = stored.reshape(groups, w) * np.arange(1, w + 1, dtype=np.float32)
    want = want[:, ::-1].ravel()
    np.testing.assert_array_equal(em_out, want)
    np.testing.assert_array_equal(out, want)


@pytest.mark.gpu
def test_gpu_block_sum(cache):
    """Strided loop + shared-memory tree with barriers: exact on small integers."""
    _gpu()
    x = (np.arange(1001) % 5).astype(np.float32)
    out = np.zeros(1, np.float32)
    _run(block_sum(), {"x": x, "out": out}, {"n": 1001})
    assert out[0] == x.sum()


@pytest.mark.gpu
def test_gpu_atomics(cache):
    """Concurrent adds into shared slots lose nothing, 16-bit halves of one word included."""
    _gpu()
    n = 1000
    v = (np.arange(n) % 2).astype(np.float32)
    k = atomics()
    bufs = {"xf": v, "xi": v.astype(np.int32), "xh": v.astype(np.float16), "xb": v.copy(),
            "of": np.zeros(4, np.float32), "oi": np.zeros(4, np.int32), "oh": np.zeros(4, np.float16),
            "ob": np.zeros(4, np.float32)}
    _run(k, bufs, {"n": n})
    want = v.reshape(-1, 4).sum(0)
    for name in ("of", "oi", "oh", "ob"):
        np.testing.assert_array_equal(bufs[name].astype(np.float32), want, err_msg=name)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [f16, bf16], ids=["f16", "bf16"])
def test_gpu_mma(dtype, cache):
    """The fragment gather and packing give A @ B + C (exact on small integers)."""
    _gpu()
    rng = np.random.default_rng(2)
    a = rng.integers(-3, 4, (16, 16)).astype(np.float32)
    b = rng.integers(-3, 4, (16, 8)).astype(np.float32)
    c = rng.integers(-3, 4, (16, 8)).astype(np.float32)
    host = (lambda m: m.astype(np.float16).ravel()) if dtype is f16 else (lambda m: m.ravel().copy())
    out = np.zeros(128, np.float32)
    _run(mma(dtype), {"a": host(a), "b": host(b), "c": c.ravel().copy(), "out": out}, {})
    np.testing.assert_array_equal(out.reshape(16, 8), a @ b + c)


@pytest.mark.gpu
def test_gpu_registers(cache):
    """A value read after a register it reads is reassigned sees the new value."""
    _gpu()
    out = np.zeros(2, np.float32)
    _run(registers(), {"out": out}, {})
    np.testing.assert_array_equal(out, [2.0, 4.0])
