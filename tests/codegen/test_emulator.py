"""The GPU emulator (``codegen/emulator.py``) against numpy, on hand-built kernels of the kernel IR.

The emulator defines what a kernel means. The CUDA C renderer is checked against it, and CI (no GPU)
runs generated kernels through it. So each test builds a kernel by hand, runs it, and compares real
values with an independent numpy computation. Every output is poisoned (NaN / 0xFF bytes) before the
run, so no test passes by reading zeros, and the lanes past a masked tail must leave their poison
alone. Sizes are odd and small, so the tests are fast and a wrong mask or index shows.

Where the expected value comes from the project's reference semantics (``core/numpy_ops.py``,
``dtype.round_bf16``), the test recomputes it op by op, with one rounding per op as the reference
interpreter does. The mma fragment layout is pinned to literal entries of the PTX ISA's figures, not
to the formulas the emulator uses.
"""

from __future__ import annotations

import numpy as np
import pytest

from luminal.codegen import emulator as em
from luminal.codegen import ir
from luminal.core import dtype as dt
from luminal.core import numpy_ops

F16, BF16, F32, I32, BOOL, IDX = dt.float16, dt.bfloat16, dt.float32, dt.int32, dt.bool_, ir.INDEX
RNG = np.random.default_rng(0)


def poison(n: int, d: dt.DType, gpu: bool = True) -> np.ndarray:
    """A GPU (or CPU) buffer of ``n`` elements of ``d`` full of 0xFF bytes (NaN for floats, -1 for int32)."""
    a = np.empty(n, np.uint16 if (d is BF16 and gpu) else (np.float32 if d is BF16 else d.np))
    a.view(np.uint8).fill(0xFF)
    return a


def gid(bs: int) -> ir.V:
    return ir.block(0) * bs + ir.thread(0)


def alu(op, *xs):
    return ir.alu(op, *xs)


def bits(a: np.ndarray) -> np.ndarray:
    return a.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[a.itemsize])


# elementwise ------------------------------------------------------------------------------------

def _ref_op(op, d, *xs):
    """One primitive on host values of ``d``, as the reference interpreter computes it (one rounding)."""
    with np.errstate(all="ignore"):  # NaN and inf are part of the test
        r = numpy_ops.ufunc(op, d)(*xs)
    if d is F16 and op != "LessThan":
        with np.errstate(all="ignore"):
            return np.asarray(r).astype(np.float16)
    if d is BF16 and op != "LessThan":
        return dt.round_bf16(r)
    return r


@pytest.mark.parametrize("d", [F32, F16, BF16])
def test_elementwise_with_a_masked_tail_rounds_like_the_reference(d):
    """out = Where(x < y, Max(x*y + sin(x), exp2(1/y)), sqrt(x)) over n = 1000 elements, with 8 blocks
    of 128 threads (1024 lanes): the last 24 lanes are masked off by an If. The values must equal
    the reference's op-by-op rounded values bit for bit: float16 rounds each op from float32,
    bfloat16 rounds to nearest even. Negative x gives NaN from sqrt, and NaN inputs must propagate
    through Max. The 8 slots past n must keep their poison."""
    n, bs = 1000, 128
    host = np.float32 if d is BF16 else d.np
    x = (RNG.standard_normal(n) * 3).astype(host)
    y = (RNG.standard_normal(n) * 3).astype(host)
    x[::97] = np.nan
    if d is BF16:
        x, y = dt.round_bf16(x), dt.round_bf16(y)
    i = gid(bs)
    X, Y = ir.load("x", d, i), ir.load("y", d, i)
    e = alu("Where", alu("LessThan", X, Y),
            alu("Max", alu("Add", alu("Mul", X, Y), alu("Sin", X)), alu("Exp2", alu("Recip", Y))),
            alu("Sqrt", X))
    k = ir.Kernel("ew", (ir.Buf("x", d), ir.Buf("y", d), ir.Buf("out", d, "w")), ("n",),
                  (ir.const(8),), (ir.If(i < ir.param("n"), (ir.Store("out", i, e),)),), block=(bs,))
    out = poison(n + 8, d)
    em.run(k, {"x": em.device_array(x, d), "y": em.device_array(y, d), "out": out}, {"n": n})

    r = lambda op, *xs: _ref_op(op, d, *xs)
    want = np.where(r("LessThan", x, y), r("Max", r("Add", r("Mul", x, y), r("Sin", x)), r("Exp2", r("Recip", y))),
                    r("Sqrt", x))
    got = em.host_array(out[:n], d, (n,))
    np.testing.assert_array_equal(got, want)
    assert np.isnan(got).sum() > 10  # the NaN paths were exercised
    assert (bits(out[n:]) == bits(poison(8, d))).all()  # the masked tail wrote nothing


def test_casts_and_integer_semantics():
    """The Cast primitive's rules and the integer/bool semantics of the primitive table, each against
    literal expected values: float->int truncates toward zero, ->bool is x != 0 (NaN is True), float32
    ->bfloat16 rounds to nearest even (ties go to the even mantissa), int32 Add wraps, Mod is C fmod
    (the sign of a), Max propagates NaN, bool Add/Mul are or/and, and index Div is floor division."""
    f = np.array([-2.7, 2.7, -0.5, 1 + 2 ** -8, 1 + 3 * 2 ** -8, np.nan, 0.0, -7.5], np.float32)
    a = np.array([2 ** 31 - 1, -7, 7, -7, 5, 0, 3, 9], np.int32)
    b = np.array([1, 3, -3, -3, 5, 1, 3, 2], np.int32)
    n = len(f)
    i = ir.thread(0)
    F, A, B = ir.load("f", F32, i), ir.load("a", I32, i), ir.load("b", I32, i)
    two = ir.const(2.0, F32)
    stores = (
        ir.Store("to_i32", i, ir.cast(F, I32)),
        ir.Store("via_index", i, ir.cast(ir.cast(F, IDX), I32)),
        ir.Store("to_bf16", i, ir.cast(F, BF16)),
        ir.Store("to_f16", i, ir.cast(F, F16)),
        ir.Store("to_bool", i, ir.cast(F, BOOL)),
        ir.Store("add", i, alu("Add", A, B)),
        ir.Store("imod", i, alu("Mod", A, B)),
        ir.Store("fmod", i, alu("Mod", F, two)),
        ir.Store("fmax", i, alu("Max", F, ir.const(0.0, F32))),
        ir.Store("bor", i, ir.cast(alu("Add", ir.cast(A, BOOL), ir.cast(alu("Add", B, ir.const(-1, I32)), BOOL)), I32)),
        ir.Store("band", i, ir.cast(alu("Mul", ir.cast(alu("Add", A, ir.const(7, I32)), BOOL),
                                        ir.cast(B, BOOL)), I32)),
        ir.Store("div", i, ir.cast(alu("Div", ir.cast(alu("Add", A, ir.const(8, I32)), IDX) + 2 ** 31, ir.const(3)),
                                   I32)),
    )
    outs = {"to_i32": I32, "via_index": I32, "to_bf16": BF16, "to_f16": F16, "to_bool": BOOL, "add": I32, "imod": I32,
            "fmod": F32, "fmax": F32, "bor": I32, "band": I32, "div": I32}
    bufs = (ir.Buf("f", F32), ir.Buf("a", I32), ir.Buf("b", I32)) + tuple(ir.Buf(o, d, "w") for o, d in outs.items())
    k = ir.Kernel("casts", bufs, (), (ir.const(1),), (ir.If(i < n, stores),), block=(32,))
    arrays = {"f": f.copy(), "a": a.copy(), "b": b.copy()} | {o: poison(n, d) for o, d in outs.items()}
    em.run(k, arrays)

    got = {o: em.host_array(arrays[o], d, (n,)) for o, d in outs.items()}
    assert list(got["to_i32"][[0, 1, 2, 3, 6, 7]]) == [-2, 2, 0, 1, 0, -7]
    assert list(got["via_index"][[0, 1, 2, 3, 6, 7]]) == [-2, 2, 0, 1, 0, -7]
    assert list(bits(arrays["to_bf16"])[[0, 3, 4, 6]]) == [0xC02D, 0x3F80, 0x3F82, 0x0000]  # ties to even
    np.testing.assert_array_equal(got["to_f16"], f.astype(np.float16))
    assert list(got["to_bool"]) == [True, True, True, True, True, True, False, True]
    assert list(got["add"]) == [-2 ** 31, -4, 4, -10, 10, 1, 6, 11]
    assert list(got["imod"]) == [0, -1, 1, -1, 0, 0, 0, 1]
    f64 = f.astype(np.float64)  # fmod is exact: x - trunc(x / 2) * 2, computed in float64
    np.testing.assert_array_equal(got["fmod"], (f64 - np.trunc(f64 / 2) * 2).astype(np.float32))
    assert got["fmod"][7] == -1.5
    assert np.isnan(got["fmax"][5]) and list(got["fmax"][[0, 1, 6]]) == [0, np.float32(2.7), 0]
    assert list(got["bor"]) == [1, 1, 1, 1, 1, 0, 1, 1]
    assert list(got["band"]) == [1, 0, 1, 0, 1, 1, 1, 1]
    want_div = (a.astype(np.int64) + 8 + 2 ** 31) // 3  # int32 wraps first (2**31 - 1 + 8), then floor division
    want_div[0] = (np.int64(-(2 ** 31) + 7) + 2 ** 31) // 3
    assert list(got["div"]) == list(want_div.astype(np.int32))


def test_masked_registers_and_per_thread_loops():
    """A register assigned under an If keeps its old value on the other lanes (a relu), and a loop
    whose stop differs per thread runs each thread's own trip count: thread t sums x[t..t+t%5)."""
    n, bs = 70, 32
    x = RNG.standard_normal(n + 4).astype(np.float32)
    i = gid(bs)
    X = ir.load("x", F32, i)
    body = (
        ir.Assign("r", X),
        ir.If(alu("LessThan", X, ir.const(0.0, F32)), (ir.Assign("r", ir.const(0.0, F32)),)),
        ir.Store("relu", i, ir.var("r", F32)),
        ir.Assign("acc", ir.const(0.0, F32)),
        ir.Loop("k", i, i + (i % 5),
                (ir.Assign("acc", alu("Add", ir.var("acc", F32), ir.load("x", F32, ir.var("k")))),)),
        ir.Store("sums", i, ir.var("acc", F32)),
    )
    k = ir.Kernel("regs", (ir.Buf("x", F32), ir.Buf("relu", F32, "w"), ir.Buf("sums", F32, "w")), (),
                  (ir.const(3),), (ir.If(i < n, body),), block=(bs,))
    relu, sums = poison(n, F32), poison(n, F32)
    em.run(k, {"x": x, "relu": relu, "sums": sums})
    np.testing.assert_array_equal(relu, np.maximum(x[:n], 0))
    want = np.array([np.float32(sum(x[t:t + t % 5], np.float32(0))) for t in range(n)], np.float32)
    np.testing.assert_array_equal(sums, want)


def test_thread_and_block_linearisation():
    """Threads are numbered x fastest (then y, z), blocks likewise, and a warp is 32 consecutive threads
    of a block: in a block of 8x4 threads, shfl_xor(.., 8) swaps thread.y 0<->1 and 2<->3."""
    gx, gy, bx, by = 2, 3, 8, 4
    lin = (ir.block(1) * gx + ir.block(0)) * (bx * by) + ir.thread(1) * bx + ir.thread(0)
    code = ir.thread(0) + ir.thread(1) * 10 + ir.block(0) * 100 + ir.block(1) * 1000
    k = ir.Kernel("ids", (ir.Buf("ids", I32, "w"), ir.Buf("swapped", I32, "w")), (), (ir.const(gx), ir.const(gy)),
                  (ir.Store("ids", lin, ir.cast(code, I32)),
                   ir.Store("swapped", lin, ir.cast(ir.shfl_xor(ir.thread(1), 8), I32))), block=(bx, by))
    ids, swapped = poison(gx * gy * bx * by, I32), poison(gx * gy * bx * by, I32)
    em.run(k, {"ids": ids, "swapped": swapped})
    byy, bxx, ty, tx = np.meshgrid(range(gy), range(gx), range(by), range(bx), indexing="ij")
    np.testing.assert_array_equal(ids, (tx + 10 * ty + 100 * bxx + 1000 * byy).ravel())
    np.testing.assert_array_equal(swapped, (ty ^ 1).ravel())


# warps and blocks ---------------------------------------------------------------------------------

def _butterfly(v: ir.V) -> tuple:
    out = (ir.Assign("v", v),)
    for m in (16, 8, 4, 2, 1):
        out += (ir.Assign("v", alu("Add", ir.var("v", F32), ir.shfl_xor(ir.var("v", F32), m))),)
    return out


def test_warp_shuffle_butterfly_sum():
    """A butterfly (xor 16, 8, 4, 2, 1) over each warp of 2 blocks of 64 threads leaves every lane
    holding its warp's sum. Lane 0 of each warp stores it, and every lane stores its own copy,
    which must be the same in all 32 lanes. The shuffle itself is checked exactly as a permutation:
    lane l reads lane l ^ 5."""
    bs, nb = 64, 2
    n = bs * nb
    x = RNG.standard_normal(n).astype(np.float32)
    i = gid(bs)
    lane = ir.thread(0) % 32
    body = _butterfly(ir.load("x", F32, i)) + (
        ir.Store("every", i, ir.var("v", F32)),
        ir.If(alu("LessThan", lane, ir.const(1)), (ir.Store("sums", i // 32, ir.var("v", F32)),)),
        ir.Store("perm", i, ir.cast(ir.shfl_xor(ir.thread(0), 5), I32)),
    )
    k = ir.Kernel("warp_sum", (ir.Buf("x", F32), ir.Buf("sums", F32, "w"), ir.Buf("every", F32, "w"),
                               ir.Buf("perm", I32, "w")), (), (ir.const(nb),), body, block=(bs,))
    sums, every, perm = poison(n // 32, F32), poison(n, F32), poison(n, I32)
    em.run(k, {"x": x, "sums": sums, "every": every, "perm": perm})
    np.testing.assert_allclose(sums, x.reshape(-1, 32).sum(1, dtype=np.float64), rtol=1e-5, atol=1e-5)
    assert (every.reshape(-1, 32) == sums[:, None]).all()
    np.testing.assert_array_equal(perm, np.tile(np.arange(bs) ^ 5, nb))


def test_shuffle_needs_whole_warps_and_active_sources():
    """A shuffle in a block of 48 threads (not whole warps) is refused. So is a shuffle whose source
    lane is inactive, which is undefined on a GPU."""
    x = ir.cast(ir.thread(0), F32)
    k = ir.Kernel("ragged", (ir.Buf("o", F32, "w"),), (), (ir.const(1),),
                  (ir.Store("o", ir.thread(0), ir.shfl_xor(x, 1)),), block=(48,))
    with pytest.raises(em.EmulatorError, match="ragged.*multiple of 32"):
        em.run(k, {"o": poison(48, F32)})
    k = ir.Kernel("half", (ir.Buf("o", F32, "w"),), (), (ir.const(1),),
                  (ir.If(ir.thread(0) < 20, (ir.Store("o", ir.thread(0), ir.shfl_xor(x, 16)),)),), block=(32,))
    with pytest.raises(em.EmulatorError, match="half.*inactive.*thread \\(4\\)"):
        em.run(k, {"o": poison(32, F32)})


def _block_reduce(n: int, bs: int, barriers: bool = True) -> tuple:
    """A block's sum of x[block*bs : (block+1)*bs] (zero past n) into s[0], a tree in shared memory."""
    t, i = ir.thread(0), gid(bs)
    sync = (ir.Barrier(),) if barriers else ()
    out: tuple = (ir.Store("s", t, ir.load("x", F32, i, alu("LessThan", i, ir.param("n")), 0.0)),) + sync
    stride = bs // 2
    while stride:
        s = lambda j: ir.load("s", F32, j)
        out += (ir.If(t < stride, (ir.Store("s", t, alu("Add", s(t), s(t + stride))),)),) + sync
        stride //= 2
    return out


def test_block_reduction_in_shared_memory_then_across_blocks():
    """Each block of 128 threads sums its slice of x (n = 500, so the last block is partly padding)
    with a tree in shared memory and barriers. Thread 0 then writes the block's partial and adds it
    atomically into a total. A second kernel, one warp, sums the partials with a thread-strided loop
    (step = the block size) and a butterfly. Both totals are checked against numpy."""
    n, bs = 500, 128
    nb = -(-n // bs)
    x = RNG.standard_normal(n).astype(np.float32)
    first = ir.If(alu("LessThan", ir.thread(0), ir.const(1)),
                  (ir.Store("partial", ir.block(0), ir.load("s", F32, ir.const(0))),
                   ir.AtomicAdd("total", ir.const(0), ir.load("s", F32, ir.const(0)))))
    k1 = ir.Kernel("block_sum", (ir.Buf("x", F32), ir.Buf("partial", F32, "w"), ir.Buf("total", F32, "rw")), ("n",),
                   (ir.const(nb),), _block_reduce(n, bs) + (first,), block=(bs,), shared=(ir.Shared("s", F32, bs),))
    partial, total = poison(nb, F32), np.zeros(1, np.float32)
    em.run(k1, {"x": x, "partial": partial, "total": total}, {"n": n})
    want = [x[b * bs:(b + 1) * bs].sum(dtype=np.float64) for b in range(nb)]
    np.testing.assert_allclose(partial, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(total[0], x.sum(dtype=np.float64), rtol=1e-5, atol=1e-5)

    t = ir.thread(0)
    k2 = ir.Kernel("sum_partials", (ir.Buf("partial", F32), ir.Buf("out", F32, "w")), ("m",), (ir.const(1),),
                   (ir.Assign("acc", ir.const(0.0, F32)),
                    ir.Loop("j", t, ir.param("m"), (ir.Assign("acc", alu("Add", ir.var("acc", F32),
                                                                          ir.load("partial", F32, ir.var("j")))),),
                            step=ir.const(32)),)
                   + _butterfly(ir.var("acc", F32))
                   + (ir.If(alu("LessThan", t, ir.const(1)), (ir.Store("out", ir.const(0), ir.var("v", F32)),)),),
                   block=(32,))
    big = RNG.standard_normal(77).astype(np.float32)  # more partials than threads: two trips for some
    out = poison(1, F32)
    em.run(k2, {"partial": big, "out": out}, {"m": 77})
    np.testing.assert_allclose(out[0], big.sum(dtype=np.float64), rtol=1e-5, atol=1e-5)


def test_a_missing_barrier_is_a_race():
    """Lockstep execution would hide a missing barrier, since every write lands before the next
    statement reads. The emulator records who wrote and read each element in which phase (the
    stretch of a block between barriers) and reports each of these:

    - a read of another thread's write with no barrier between (a tree reduction without barriers);
    - a read of atomics that other blocks added in the same launch (a barrier orders one block only);
    - a write after another thread's read (a shift in shared memory), which the same kernel with a
      barrier between the read and the write runs correctly;
    - a write after reads by several threads, by one of those readers;
    - a barrier that only one block takes, which orders nothing in the other block."""
    n, bs = 256, 128
    k = ir.Kernel("no_sync", (ir.Buf("x", F32), ir.Buf("partial", F32, "w")), ("n",), (ir.const(2),),
                  _block_reduce(n, bs, barriers=False), block=(bs,), shared=(ir.Shared("s", F32, bs),))
    with pytest.raises(em.EmulatorError, match="no_sync.*race on s\\[64\\].*block \\(0\\) thread \\(64\\)"):
        em.run(k, {"x": np.ones(n, np.float32), "partial": poison(2, F32)}, {"n": n})

    k = ir.Kernel("read_total", (ir.Buf("total", F32, "rw"), ir.Buf("o", F32, "w")), (), (ir.const(2),),
                  (ir.AtomicAdd("total", ir.const(0), ir.const(1.0, F32)), ir.Barrier(),
                   ir.Store("o", gid(32), ir.load("total", F32, ir.const(0)))), block=(32,))
    with pytest.raises(em.EmulatorError, match="race on total\\[0\\]"):
        em.run(k, {"total": np.zeros(1, np.float32), "o": poison(64, F32)})

    t = ir.thread(0)  # a shift left in shared memory: thread t reads s[t+1], then thread t+1 overwrites it
    v = ir.var("v", F32)
    load = (ir.Store("s", t, ir.cast(t, F32)), ir.Barrier(), ir.Assign("v", ir.const(-1.0, F32)),
            ir.If(t < 31, (ir.Assign("v", ir.load("s", F32, t + 1)),)))
    store = (ir.Store("s", t, v), ir.Barrier(), ir.Store("o", t, ir.load("s", F32, t)))
    shared = (ir.Shared("s", F32, 32),)
    k = ir.Kernel("shift", (ir.Buf("o", F32, "w"),), (), (ir.const(1),), load + store, block=(32,), shared=shared)
    with pytest.raises(em.EmulatorError, match="shift.*race on s\\[1\\]: a write after a read by block \\(0\\) "
                                               "thread \\(0\\).*thread \\(1\\)"):
        em.run(k, {"o": poison(32, F32)})
    k = ir.Kernel("shift", (ir.Buf("o", F32, "w"),), (), (ir.const(1),), load + (ir.Barrier(),) + store, block=(32,),
                  shared=shared)
    o = poison(32, F32)
    em.run(k, {"o": o})  # with the barrier it is correct
    np.testing.assert_array_equal(o, np.r_[np.arange(1, 32), -1])

    # every thread reads s[0], then thread 31 overwrites it: the other readers race with the write
    k = ir.Kernel("broadcast", (ir.Buf("o", F32, "w"),), (), (ir.const(1),),
                  (ir.Store("s", t, ir.cast(t, F32)), ir.Barrier(), ir.Store("o", t, ir.load("s", F32, ir.const(0))),
                   ir.If(alu("LessThan", ir.const(30), t), (ir.Store("s", ir.const(0), ir.const(1.0, F32)),))),
                  block=(32,), shared=shared)
    with pytest.raises(em.EmulatorError, match="broadcast.*race on s\\[0\\]: a write after a read by several"):
        em.run(k, {"o": poison(32, F32)})

    # a barrier only block 0 takes (block-uniform, so not divergent) orders nothing in block 1
    rotate = (ir.Store("s", t, ir.cast(t, F32)), ir.Barrier(), ir.Assign("v", ir.load("s", F32, (t + 1) % 32)),
              ir.If(alu("LessThan", ir.block(0), ir.const(1)), (ir.Barrier(),)), ir.Store("s", t, v))
    k = ir.Kernel("block0_only", (), (), (ir.const(2),), rotate, block=(32,), shared=shared)
    with pytest.raises(em.EmulatorError, match="block0_only.*race on s\\[0\\]: a write after a read by block "
                                               "\\(1\\) thread \\(31\\).*\\(block \\(1\\) thread \\(0\\)\\)"):
        em.run(k, {})


def test_stores_to_one_element_last_lane_wins_but_atomics_after_a_store_race():
    """Plain stores of several threads to one element are allowed, with the last in lane order
    winning, so that an error flag every failing thread sets works: here threads 5 and 9 of block 1
    find a bad index and store it. An atomic add after another thread's store, with no barrier, is a
    race (the store can land after the add)."""
    i = gid(32)
    failing = ir.load("failing", BOOL, i)
    k = ir.Kernel("flag", (ir.Buf("failing", BOOL), ir.Buf("flag", I32, "w")), (), (ir.const(2),),
                  (ir.Store("flag", ir.const(0), ir.const(1, I32), failing),
                   ir.Store("flag", ir.const(1), ir.cast(i, I32), failing)), block=(32,))
    fails = np.zeros(64, bool)
    fails[[32 + 5, 32 + 9]] = True
    flag = poison(2, I32)
    em.run(k, {"failing": fails, "flag": flag})
    assert list(flag) == [1, 32 + 9]

    k = ir.Kernel("init_then_add", (ir.Buf("total", F32, "rw"),), (), (ir.const(1),),
                  (ir.If(alu("LessThan", ir.thread(0), ir.const(1)),
                         (ir.Store("total", ir.const(0), ir.const(0.0, F32)),)),
                   ir.AtomicAdd("total", ir.const(0), ir.const(1.0, F32))), block=(32,))
    with pytest.raises(em.EmulatorError, match="init_then_add.*race on total\\[0\\]: an atomic add after a store "
                                               "by block \\(0\\) thread \\(0\\).*thread \\(1\\)"):
        em.run(k, {"total": poison(1, F32)})


@pytest.mark.parametrize("d", [F32, F16, BF16, I32])
def test_atomic_scatter_add_with_duplicate_indices(d):
    """300 lanes (with a masked tail) add src into 7 slots of dst, many lanes hitting the same slot.
    The adds happen in lane order with one rounding to dst's dtype per addition. For float32 and
    int32 (which wraps) that is np.add.at. For float16 and bfloat16 the test adds one at a time and
    rounds after each."""
    n, bs, m = 300, 64, 7
    host = np.float32 if d is BF16 else d.np
    if d is I32:
        src = RNG.integers(2 ** 28, 2 ** 30, n).astype(np.int32)  # sums overflow int32: wraps
        dst0 = RNG.integers(-100, 100, m).astype(np.int32)
    else:
        src = (RNG.standard_normal(n) * 4).astype(host)
        dst0 = RNG.standard_normal(m).astype(host)
        if d is BF16:
            src, dst0 = dt.round_bf16(src), dt.round_bf16(dst0)
    idx = RNG.integers(0, m, n).astype(np.int32)
    i = gid(bs)
    k = ir.Kernel("scatter", (ir.Buf("idx", I32), ir.Buf("src", d), ir.Buf("dst", d, "rw")), ("n",),
                  (ir.const(-(-n // bs)),),
                  (ir.AtomicAdd("dst", ir.cast(ir.load("idx", I32, i), IDX), ir.load("src", d, i),
                                alu("LessThan", i, ir.param("n"))),), block=(bs,))
    dst = em.device_array(dst0, d)
    em.run(k, {"idx": idx, "src": em.device_array(src, d), "dst": dst}, {"n": n})
    want = dst0.copy()
    if d in (F32, I32):
        np.add.at(want, idx, src)
    else:
        rnd = (lambda v: np.float32(np.float16(v))) if d is F16 else (lambda v: dt.round_bf16(np.float32(v)))
        for j, v in zip(idx, src):
            want[j] = rnd(np.float32(want[j]) + np.float32(v))
    np.testing.assert_array_equal(em.host_array(dst, d, (m,)), want)


# tensor cores -------------------------------------------------------------------------------------

def test_mma_layout_is_ptx_figures():
    """The fragment layout, pinned to literal entries of the PTX ISA's figures for mma.m16n8k16
    (f16/bf16): lane 0 and lane 31 (groupID 7, threadID_in_group 3), as (row, col) per element."""
    lay = em.mma_layout()
    at = lambda which, lane: list(zip(lay[which][0][lane].tolist(), lay[which][1][lane].tolist()))
    assert at("a", 0) == [(0, 0), (0, 1), (8, 0), (8, 1), (0, 8), (0, 9), (8, 8), (8, 9)]
    assert at("a", 31) == [(7, 6), (7, 7), (15, 6), (15, 7), (7, 14), (7, 15), (15, 14), (15, 15)]
    assert at("b", 0) == [(0, 0), (1, 0), (8, 0), (9, 0)]
    assert at("b", 31) == [(6, 7), (7, 7), (14, 7), (15, 7)]
    assert at("c", 0) == [(0, 0), (0, 1), (8, 0), (8, 1)]
    assert at("c", 31) == [(7, 6), (7, 7), (15, 6), (15, 7)]
    for which, shape in (("a", (16, 16)), ("b", (16, 8)), ("c", (16, 8))):  # each element held exactly once
        seen = np.zeros(shape, int)
        np.add.at(seen, lay[which], 1)
        assert (seen == 1).all()


def _mma_kernel(d: dt.DType, b_col_major: bool) -> ir.Kernel:
    """Two warps, each computing D[w] = A[w] @ B[w] + C[w] (16x16 @ 16x8) with one Mma: fragments loaded
    with the PTX layout written out in index math, A row-major, B row-major or column-major."""
    w, lane = ir.thread(0) // 32, ir.thread(0) % 32
    g, t = lane // 4, lane % 4
    a = [ir.load("A", d, w * 256 + (g + 8 * ((i >> 1) & 1)) * 16 + t * 2 + (i & 1) + 8 * (i >= 4)) for i in range(8)]
    krow = [t * 2 + (i & 1) + 8 * (i >= 2) for i in range(4)]
    b = [ir.load("B", d, w * 128 + (g * 16 + kr if b_col_major else kr * 8 + g)) for kr in krow]
    cidx = [w * 128 + (g + 8 * (i >= 2)) * 8 + t * 2 + (i & 1) for i in range(4)]
    c = [ir.load("C", F32, ci) for ci in cidx]
    names = tuple(f"d{i}" for i in range(4))
    body = (ir.Mma(names, tuple(a), tuple(b), tuple(c), d),) + tuple(
        ir.Store("D", ci, ir.var(nm, F32)) for ci, nm in zip(cidx, names))
    return ir.Kernel("mma_tile", (ir.Buf("A", d), ir.Buf("B", d), ir.Buf("C", F32), ir.Buf("D", F32, "w")), (),
                     (ir.const(1),), body, block=(64,))


@pytest.mark.parametrize("b_col_major", [False, True])
@pytest.mark.parametrize("d", [F16, BF16])
def test_mma_tile_against_numpy(d, b_col_major):
    """D = A @ B + C per warp, from the exact 16-bit inputs, against numpy in float64 (the tolerance
    is float32 accumulation order). Every input is distinct, so any element that lands in the wrong
    place of a fragment shows."""
    host = np.float16 if d is F16 else np.float32
    A = RNG.standard_normal((2, 16, 16)).astype(host)
    B = RNG.standard_normal((2, 16, 8)).astype(host)
    C = RNG.standard_normal((2, 16, 8)).astype(np.float32)
    if d is BF16:
        A, B = dt.round_bf16(A), dt.round_bf16(B)
    b_store = B.transpose(0, 2, 1) if b_col_major else B
    out = poison(2 * 16 * 8, F32)
    em.run(_mma_kernel(d, b_col_major), {"A": em.device_array(A, d), "B": em.device_array(b_store, d),
                                         "C": C.ravel().copy(), "D": out})
    want = A.astype(np.float64) @ B.astype(np.float64) + C
    np.testing.assert_allclose(out.reshape(2, 16, 8), want, rtol=1e-6, atol=1e-6)


def test_mma_needs_a_whole_warp():
    k = _mma_kernel(F16, False)
    k = ir.Kernel(k.name, k.buffers, k.params, k.grid, (ir.If(ir.thread(0) < 60, k.body),), block=k.block)
    arrays = {"A": np.zeros(512, np.float16), "B": np.zeros(256, np.float16), "C": np.zeros(256, np.float32),
              "D": poison(256, F32)}
    with pytest.raises(em.EmulatorError, match="mma_tile.*part of a warp.*thread \\(60\\)"):
        em.run(k, arrays)


# ldmatrix and async copies ------------------------------------------------------------------------

def _ldmatrix_kernel(d: dt.DType, trans: bool, stride: int = 16) -> ir.Kernel:
    """One warp: the 16x``stride`` matrix X (row-major) into shared memory, then ldmatrix.x4 of its
    four 8x8 quarters (lane 8 i + r addresses row r of quarter i: rows 8 (i % 2) on, columns 8 (i // 2)
    on), each lane's eight registers stored to Y[lane, 0..7]."""
    lane = ir.thread(0)
    fill = tuple(ir.Store("S", lane + 32 * q, ir.load("X", d, lane + 32 * q)) for q in range(16 * stride // 32))
    i, r = lane // 8, lane % 8
    at = (r + 8 * (i % 2)) * stride + 8 * (i // 2)
    names = tuple(f"m{e}" for e in range(8))
    body = (*fill, ir.Barrier(), ir.LdMatrix(names, "S", at, d, trans),
            *(ir.Store("Y", lane * 8 + e, ir.var(nm, d)) for e, nm in enumerate(names)))
    return ir.Kernel("ldmatrix_x4", (ir.Buf("X", d), ir.Buf("Y", d, "w")), (), (ir.const(1),), body, block=(32,),
                     shared=(ir.Shared("S", d, 16 * stride),))


@pytest.mark.parametrize("trans", [False, True])
@pytest.mark.parametrize("d", [F16, BF16])
def test_ldmatrix_gives_each_lane_its_fragment(d, trans):
    """Lane l gets, of quarter i, elements (l // 4, 2 (l % 4) + h), or transposed (2 (l % 4) + h, l // 4):
    the PTX figures for ldmatrix (distinct values: any misplaced element shows)."""
    host = np.float16 if d is F16 else np.float32
    x = (np.arange(256) - 128).astype(host).reshape(16, 16)  # exact in both types
    y = poison(256, d)
    em.run(_ldmatrix_kernel(d, trans), {"X": em.device_array(x, d), "Y": y})
    got = em.host_array(y, d, (32, 8))
    quarters = [x[8 * (i % 2):8 * (i % 2) + 8, 8 * (i // 2):8 * (i // 2) + 8] for i in range(4)]
    for lane in range(32):
        g, t = lane // 4, lane % 4
        want = [(q[2 * t + h, g] if trans else q[g, 2 * t + h]) for q in quarters for h in range(2)]
        np.testing.assert_array_equal(got[lane], want, err_msg=f"lane {lane}")


def test_ldmatrix_refuses_a_misaligned_row_and_part_of_a_warp():
    k = _ldmatrix_kernel(F16, False, stride=20)  # rows 40 bytes apart: row 1 is not 16-byte aligned
    arrays = {"X": np.zeros(320, np.float16), "Y": poison(256, F16)}
    with pytest.raises(em.EmulatorError, match="ldmatrix row of 'S' at index 20: not 16-byte aligned"):
        em.run(k, arrays)
    k = _ldmatrix_kernel(F16, False)
    body = (*k.body[:-9], ir.If(ir.thread(0) < 16, k.body[-9:]))
    k = ir.Kernel(k.name, k.buffers, k.params, k.grid, body, block=k.block, shared=k.shared)
    with pytest.raises(em.EmulatorError, match="ldmatrix run by part of a warp"):
        em.run(k, {"X": np.zeros(256, np.float16), "Y": poison(256, F16)})


def _async_kernel(count: int, wait: bool = True, barrier: bool = True, reader_shift: int = 1) -> ir.Kernel:
    """A block of 64 threads: thread t copies X[8 t ..] (``count`` elements of 8, zeros after) into shared
    S[8 t ..] asynchronously, commits, waits (unless not ``wait``), passes a barrier (unless not), and
    stores S[8 (t + reader_shift) % 64 + e] (another thread's copy) into Y."""
    t = ir.thread(0)
    src = ((t + reader_shift) % 64) * 8
    body = [ir.AsyncCopy("S", t * 8, "X", t * 8, ir.const(count), F16), ir.AsyncCommit()]
    if wait:
        body.append(ir.AsyncWait(0))
    if barrier:
        body.append(ir.Barrier())
    body += [ir.Store("Y", t * 8 + e, ir.load("S", F16, src + e)) for e in range(8)]
    return ir.Kernel("async_copy", (ir.Buf("X", F16), ir.Buf("Y", F16, "w")), (), (ir.const(1),), tuple(body),
                     block=(64,), shared=(ir.Shared("S", F16, 512),))


@pytest.mark.parametrize("count", [8, 5, 0])
def test_an_async_copy_lands_at_its_wait(count):
    """After the wait and a barrier every thread reads the copies: the first ``count`` elements of
    each 16 bytes from the source, zeros after."""
    x = (np.arange(512) + 1).astype(np.float16)
    y = poison(512, F16)
    em.run(_async_kernel(count), {"X": x, "Y": y})
    want = x.reshape(64, 8).copy()
    want[:, count:] = 0
    np.testing.assert_array_equal(y.reshape(64, 8), np.roll(want, -1, axis=0))


def test_an_async_copy_read_before_its_wait_is_no_value_and_a_missing_barrier_a_race():
    """Without the wait the destination still holds poison (NaN): as on a GPU, the copy may not have
    landed. Without the barrier after the wait, reading another thread's copy races with its landing."""
    x = (np.arange(512) + 1).astype(np.float16)
    y = poison(512, F16)
    em.run(_async_kernel(8, wait=False, reader_shift=0), {"X": x, "Y": y})  # (its own copy: no race)
    assert np.isnan(y).all()
    with pytest.raises(em.EmulatorError, match="race on S"):
        em.run(_async_kernel(8, barrier=False), {"X": x, "Y": poison(512, F16)})


def test_async_wait_leaves_the_newest_groups_in_flight():
    """Two groups (two copies each into distinct halves), then wait(1): the first group's copies have
    landed, the second's are still poison; wait(0) lands them."""
    t = ir.thread(0)
    copy = lambda g: ir.AsyncCopy("S", g * 256 + t * 8, "X", g * 256 + t * 8, ir.const(8), F16)  # noqa: E731
    read = lambda base: tuple(ir.Store("Y", base + t * 8 + e, ir.load("S", F16, base % 512 + t * 8 + e))  # noqa: E731
                              for e in range(8))
    body = (copy(0), ir.AsyncCommit(), copy(1), ir.AsyncCommit(), ir.AsyncWait(1), *read(0), *read(256),
            ir.AsyncWait(0), *(ir.Store("Y", 512 + t * 8 + e, ir.load("S", F16, 256 + t * 8 + e)) for e in range(8)))
    k = ir.Kernel("groups", (ir.Buf("X", F16), ir.Buf("Y", F16, "w")), (), (ir.const(1),), body, block=(32,),
                  shared=(ir.Shared("S", F16, 512),))
    x = (np.arange(512) + 1).astype(np.float16)
    y = poison(768, F16)
    em.run(k, {"X": x, "Y": y})
    np.testing.assert_array_equal(y[:256], x[:256])
    assert np.isnan(y[256:512]).all()
    np.testing.assert_array_equal(y[512:], x[256:])


# wide loads -------------------------------------------------------------------------------------

def _wide_kernel(n_groups: int, start: int = 0, d: dt.DType = F32) -> ir.Kernel:
    """Thread ``t`` loads x[start + wt .. start + wt + w - 1] (``w`` elements of ``d``: 4 float32, 8
    16-bit) with one WideLoad and stores them reversed into y[wt ..]; threads past ``n_groups`` do
    nothing."""
    t, w = gid(32), ir.wide_lanes(d)
    names = tuple(f"w{i}" for i in range(w))
    body = (ir.If(t < n_groups, (ir.WideLoad(names, "x", d, t * w + start),
                                 *(ir.Store("y", t * w + (w - 1 - i), ir.var(nm, d)) for i, nm in enumerate(names)))),)
    return ir.Kernel("wide", (ir.Buf("x", d), ir.Buf("y", d, "w")), (), (ir.const(1),), body, block=(32,))


@pytest.mark.parametrize("d", [F32, F16, BF16])
def test_a_wide_load_reads_consecutive_elements(d):
    w = ir.wide_lanes(d)
    x = em.device_array(RNG.standard_normal(16 * w).astype(np.float32), d)
    y = poison(10 * w, d)
    em.run(_wide_kernel(10, d=d), {"x": x, "y": y})
    np.testing.assert_array_equal(bits(y), bits(x[:10 * w].reshape(10, w)[:, ::-1].ravel()))


def test_a_wide_load_off_16_bytes_is_an_error_as_on_a_gpu():
    """An index that is not a multiple of 4 from an aligned array, or a multiple of 4 from an array that
    starts 4 bytes past an alignment (a view), faults on a GPU: the emulator refuses both, naming the
    index; past the end it reports the range."""
    x = np.zeros(80, np.float32)
    assert x.ctypes.data % 16 == 0
    with pytest.raises(em.EmulatorError, match="wide.*wide load of 'x' at index 2: not 16-byte aligned"):
        em.run(_wide_kernel(4, start=2), {"x": x, "y": poison(16, F32)})
    with pytest.raises(em.EmulatorError, match="at index 0: not 16-byte aligned"):
        em.run(_wide_kernel(4), {"x": x[1:], "y": poison(16, F32)})
    with pytest.raises(em.EmulatorError, match="index 80 out of range for 'x'"):
        em.run(_wide_kernel(21), {"x": x, "y": poison(84, F32)})
    with pytest.raises(em.EmulatorError, match="at index 4: not 16-byte aligned"):  # 8 bytes into a 16-bit row
        em.run(_wide_kernel(2, start=4, d=F16), {"x": np.zeros(40, np.float16), "y": poison(16, F16)})


def test_wide_loads_are_float32_gpu_statements_of_a_kernel_buffer():
    k = _wide_kernel(1)
    cpu = ir.Kernel("cpu_wide", k.buffers, (), (ir.const(1),),
                    (ir.WideLoad(("a", "b", "c", "d"), "x", F32, ir.item(0) * 4),))
    with pytest.raises(ir.IRError, match="wide load in a CPU kernel"):
        ir.check(cpu)
    three = ir.Kernel("three", k.buffers, (), k.grid, (ir.WideLoad(("a", "b", "c"), "x", F32, ir.const(0)),),
                      block=(32,))
    with pytest.raises(ir.IRError, match="4 float32 or 8 float16/bfloat16 registers, got 3 of float32"):
        ir.check(three)
    four = (ir.WideLoad(("a", "b", "c", "d"), "x", F16, ir.const(0)),)
    half = ir.Kernel("half", (ir.Buf("x", F16),), (), k.grid, four, block=(32,))
    with pytest.raises(ir.IRError, match="got 4 of float16"):
        ir.check(half)
    shared = ir.Kernel("shared", k.buffers, (), k.grid, (ir.WideLoad(("a", "b", "c", "d"), "s", F32, ir.const(0)),),
                       block=(32,), shared=(ir.Shared("s", F32, 8),))
    with pytest.raises(ir.IRError, match="wide load from 's', not a buffer of the kernel's"):
        ir.check(shared)


# errors -----------------------------------------------------------------------------------------

def test_out_of_bounds_accesses_are_reported():
    """A load or store past the end (no mask on the tail) or before the start names the kernel, the
    statement, the index and the lane. A load whose ``valid`` is False reads nothing, so its index may
    be out of range."""
    n, bs = 100, 64
    i = gid(bs)
    k = ir.Kernel("copy_oob", (ir.Buf("x", F32), ir.Buf("y", F32, "w")), (), (ir.const(2),),
                  (ir.Store("y", i, ir.load("x", F32, i)),), block=(bs,))
    with pytest.raises(em.EmulatorError, match=r"copy_oob at `y\[.*\] = x\[.*\]`: index 100 out of range for 'x' "
                                               r"of 100 elements \(block \(1\) thread \(36\)\)"):
        em.run(k, {"x": np.zeros(n, np.float32), "y": poison(n + 100, F32)})
    with pytest.raises(em.EmulatorError, match="copy_oob.*index 100 out of range for 'y'"):
        em.run(k, {"x": np.zeros(2 * bs, np.float32), "y": poison(n, F32)})

    k = ir.Kernel("shift", (ir.Buf("x", F32), ir.Buf("y", F32, "w")), (), (ir.const(2),),
                  (ir.Store("y", i, ir.load("x", F32, i + -1)),), block=(bs,))
    with pytest.raises(em.EmulatorError, match="shift.*index -1 .*thread \\(0\\)"):
        em.run(k, {"x": np.zeros(2 * bs, np.float32), "y": poison(2 * bs, F32)})

    k = ir.Kernel("padded", (ir.Buf("x", F32), ir.Buf("y", F32, "w")), (), (ir.const(2),),
                  (ir.Store("y", i, ir.load("x", F32, i + -1, alu("LessThan", ir.const(0), i), 7.0)),), block=(bs,))
    x, y = np.arange(2 * bs, dtype=np.float32), poison(2 * bs, F32)
    em.run(k, {"x": x, "y": y})
    np.testing.assert_array_equal(y, np.r_[7.0, x[:-1]])


def test_divergent_barrier_and_misdeclared_buffers_are_reported():
    """A barrier inside an If that only some threads of a block take is undefined on a GPU, and the
    emulator reports it. So are a store of the wrong dtype and a store to a buffer declared
    read-only."""
    k = ir.Kernel("diverge", (ir.Buf("y", F32, "w"),), (), (ir.const(1),),
                  (ir.If(ir.thread(0) < 16, (ir.Barrier(),)),), block=(32,))
    with pytest.raises(em.EmulatorError, match="diverge at `barrier`: divergent barrier: 16 of the block's 32"):
        em.run(k, {"y": poison(32, F32)})
    k = ir.Kernel("wrong_dtype", (ir.Buf("y", F16, "w"),), (), (ir.const(1),),
                  (ir.Store("y", ir.thread(0), ir.const(1.0, F32)),), block=(32,))
    with pytest.raises(em.EmulatorError, match="wrong_dtype.*float32 on 'y', a float16 buffer"):
        em.run(k, {"y": poison(32, F16)})
    k = ir.Kernel("readonly", (ir.Buf("y", F32),), (), (ir.const(1),),
                  (ir.Store("y", ir.thread(0), ir.const(1.0, F32)),), block=(32,))
    with pytest.raises(em.EmulatorError, match="readonly.*declared 'r'"):
        em.run(k, {"y": poison(32, F32)})


# CPU kernels ------------------------------------------------------------------------------------

@pytest.mark.parametrize("d", [F32, BF16])
def test_cpu_kernel_row_sums_over_a_two_axis_grid(d):
    """A CPU kernel (block == ()): one work item per (batch, row) of a 3 x 5 grid. Each sums the first
    lens[row] entries of its row of x with a loop whose stop differs between items. bfloat16 uses CPU
    storage (float32 holding bfloat16 values) and rounds the accumulator after every addition."""
    nb, nr, nc = 3, 5, 11
    x = RNG.standard_normal((nb, nr, nc)).astype(np.float32)
    if d is BF16:
        x = dt.round_bf16(x)
    lens = RNG.integers(0, nc + 1, nb * nr).astype(np.int32)
    row = ir.item(0) * ir.param("R") + ir.item(1)
    body = (ir.Assign("acc", ir.const(0.0, d)),
            ir.Loop("c", ir.const(0), ir.cast(ir.load("lens", I32, row), IDX),
                    (ir.Assign("acc", alu("Add", ir.var("acc", d),
                                          ir.load("x", d, row * ir.param("C") + ir.var("c")))),)),
            ir.Store("out", row, ir.var("acc", d)))
    k = ir.Kernel("row_sum", (ir.Buf("x", d), ir.Buf("lens", I32), ir.Buf("out", d, "w")), ("R", "C"),
                  (ir.const(nb), ir.param("R")), body)
    out = poison(nb * nr, d, gpu=False)
    em.run(k, {"x": x.ravel().copy(), "lens": lens, "out": out}, {"R": nr, "C": nc})
    want = np.zeros(nb * nr, np.float32)
    for c in range(nc):
        add = want + x.reshape(-1, nc)[:, c]
        want = np.where(c < lens, dt.round_bf16(add) if d is BF16 else add, want)
    np.testing.assert_array_equal(out, want)


def test_device_and_host_arrays_round_trip():
    """bfloat16 on a GPU is 16-bit patterns: device_array rounds to nearest even, and keeps NaN a NaN even
    when its payload is only in the low half. host_array gives the values back as float32."""
    v = np.array([1 + 2 ** -8, 1 + 3 * 2 ** -8, -0.0, np.inf, np.nan], np.float32)
    low_nan = np.array([0x7F800001], np.uint32).view(np.float32)
    dev = em.device_array(np.r_[v, low_nan], BF16)
    assert dev.dtype == np.uint16 and list(dev[:4]) == [0x3F80, 0x3F82, 0x8000, 0x7F80]
    back = em.host_array(dev, BF16, (2, 3))
    assert back.dtype == np.float32 and back.shape == (2, 3)
    assert np.isnan(back.ravel()[4:]).all() and list(back.ravel()[:3]) == [1.0, 1 + 2 ** -6, 0.0]
    h = np.array([[1.5, -2.25]], np.float16)
    assert em.host_array(em.device_array(h, F16), F16, (1, 2)).tolist() == h.tolist()
