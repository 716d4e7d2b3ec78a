"""A generated GEMM whose right operand is gathered from another buffer: ``C = A @ B`` where B is no
matrix in memory but the matrix an expanding copy would make of a buffer it reads (a convolution's
im2col matrix, read from the padded image it is made of). The planner (``gathered.py``) runs it in
place of the copy and a GEMM of the copy, when the copy's only readers are such products.

Why: a convolution's im2col matrix is its input repeated ``kh * kw`` times (the MNIST CNN's second
one: 40 MB of a 2.6 MB image). Made, it is written to memory once and read back by the forward and
the weight-gradient products, each streaming it from memory while packing; the generated GEMM then
waits on memory more than it computes. Gathered, each k block of a panel of B is read from the image,
which the cache holds, straight into the packed panel the microkernel reads.

B is described by up to three *sub-axes* along k and three along n: ``k`` runs over sizes
``(kd0, kd1, kd2)`` in row-major order and ``n`` over ``(nd0, nd1, nd2)``; element ``(k, n)`` of B is
``b[b_off + sum(k_i * bk_i) + sum(n_i * bn_i)]``. A reads along k through its own strides of the
same sub-axes (``a[a_off + m * sam + sum(k_i * ak_i)]``), so an A whose k does not merge into one
stride still needs no copy. C is row-major with unit columns (``c[c_off + m * ldc + n]``).

The code is the generated GEMM's (``generated_gemm.py``: its microkernel, blocks of rows and stores
into C) with another packing: per k block, the offsets of each k along A and B are tabled
(``kc`` each, counted through the sub-axes without a division); per panel, the offset of each column
along B, and each vector of ``W`` columns as the runs of them contiguous in B (a start and the lanes
it fills; columns past N in none). Each vector is then packed down the k block as masked loads of its
runs, loaded apart and or-ed (up to :data:`RUNS` held in registers; more, a loop over them). Vector
gathers packed at about 2 cycles an element on an AMD EPYC, slower than making the copy.

It is a kernel of the generated kernels' ABI (``codegen/llvm.py``: ``f(pointers, parameters, start,
stop)``): pointers ``a, b, c``; parameters :data:`PARAMS`; its work items panels of ``cols`` columns
(a multiple of the microkernel's width, at most its ``NC``), the batch's products one after another,
so threads share a product as they share any kernel's items. Offsets along B are 32-bit (the
planner checks that B's extent fits).
"""

from __future__ import annotations

import functools

import llvmlite.ir as ll
import numpy as np

from luminal.backends.cpu import generated_gemm
from luminal.backends.cpu.generated_gemm import Shape, multiply
from luminal.backends.cpu.vector_ir import I32, I64, PTR, Builder
from luminal.codegen import llvm

AXES = 3  # sub-axes along k and along n
RUNS = 4  # a vector of columns in this many contiguous runs or fewer is packed by unrolled loads
PARAMS = ("m", "n", "k", "a_off", "sam", "b_off", "c_off", "ldc", "cols", "batches", "asb", "bsb", "csb",
          *(f"kd{i}" for i in range(AXES)), *(f"ak{i}" for i in range(AXES)), *(f"bk{i}" for i in range(AXES)),
          *(f"nd{i}" for i in range(AXES)), *(f"bn{i}" for i in range(AXES)))


def columns(dtype) -> tuple[int, int]:
    """``(NR, NC)`` of ``dtype``'s microkernel on the host: a work item's ``cols`` is a multiple of
    the first, at most the second."""
    s = generated_gemm._shape(dtype)
    return s.nr, s.nr * s.panels


def function_name(dtype, s: Shape) -> str:
    return f"luminal_gathered_gemm_{np.dtype(dtype).name}_{s.w}x{s.mr}x{s.nv}_{s.kc}_{s.panels}"


def _counter(g, sizes, strides_sets, put):
    """The body of a loop over consecutive indices of the row-major sub-axes ``sizes`` that calls
    ``put(i, offsets)`` (one offset per strides set) and counts up a digit at a time (no division per
    index); its carried values start as :func:`_digits` of the first index."""
    b = g.b
    d2, d1 = sizes[2], sizes[1]

    def step(i, carried):
        j1, j2, *offs = carried
        put(i, offs)
        j2n = b.add(j2, g.i(1))
        wrap2 = b.icmp_signed("==", j2n, d2)
        j1n = b.add(j1, ll.Constant(I64, 1))
        wrap1 = b.and_(wrap2, b.icmp_signed("==", j1n, d1))
        new = []
        for off, st in zip(offs, strides_sets):
            o = b.add(off, st[2])
            o = b.select(wrap2, b.add(b.sub(o, b.mul(d2, st[2])), st[1]), o)  # carry into digit 1
            o = b.select(wrap1, b.add(b.sub(o, b.mul(d1, st[1])), st[0]), o)  # ... into digit 0
            new.append(o)
        return (b.select(wrap1, g.i(0), b.select(wrap2, j1n, j1)), b.select(wrap2, g.i(0), j2n), *new)

    return step


def _digits(g, sizes, index, strides_sets) -> tuple:
    """``(digit 1, digit 2, offsets...)`` of flat ``index`` over the row-major sub-axes ``sizes``."""
    b = g.b
    d2, d1 = g.max(sizes[2], g.i(1)), g.max(sizes[1], g.i(1))  # (an empty axis: no index is counted)
    j2 = b.srem(index, d2)
    rest = b.sdiv(index, d2)
    j1 = b.srem(rest, d1)
    j0 = b.sdiv(rest, d1)
    offs = [b.add(b.add(b.mul(j0, st[0]), b.mul(j1, st[1])), b.mul(j2, st[2])) for st in strides_sets]
    return (j1, j2, *offs)


def _module(dtype, s: Shape) -> str:
    t = ll.FloatType() if np.dtype(dtype) == np.float32 else ll.DoubleType()
    vt = ll.VectorType(t, s.w)
    name = function_name(dtype, s)
    mod = ll.Module(name)
    fn = ll.Function(mod, ll.FunctionType(ll.VoidType(), (PTR, PTR, I64, I64)), name)
    ptrs, params, start, stop = fn.args
    g = Builder(fn, t, s.w)
    b = g.b
    fma, mload, mstore = g.intrinsics(mod)
    item = np.dtype(dtype).itemsize
    base = [b.load(b.gep(ptrs, [g.i(i)], source_etype=PTR), typ=PTR) for i in range(3)]
    p = {n: b.load(b.gep(params, [g.i(i)], source_etype=I64), typ=I64) for i, n in enumerate(PARAMS)}
    a0, b0, c0 = (g.at(x, p[o]) for x, o in zip(base, ("a_off", "b_off", "c_off")))
    m, n, k, sam, ldc, cols = (p[x] for x in ("m", "n", "k", "sam", "ldc", "cols"))
    panels = b.sdiv(b.add(n, b.sub(cols, g.i(1))), cols)  # per product of the batch
    kd, ak, bk = ([p[f"{x}{i}"] for i in range(AXES)] for x in ("kd", "ak", "bk"))
    nd, bn = ([p[f"{x}{i}"] for i in range(AXES)] for x in ("nd", "bn"))
    nr, nc = s.nr, s.nr * s.panels
    pack = g.opaque_alloca(s.kc * nc, "pack")
    koff_a, koff_b = _alloca(b, I64, s.kc, "koff_a"), _alloca(b, I32, s.kc, "koff_b")
    noff = _alloca(b, I32, nc, "noff")
    # a panel's columns as runs contiguous in B, per vector of W columns: how many, and each one's
    # start (the offset its lane 0 would have) and lanes (a bit mask)
    runs_held = min(RUNS, s.w)  # (a vector has at most w runs)
    seg_count, seg_base, seg_lanes = _alloca(b, I32, nc // s.w, "segs"), _alloca(b, I32, nc, "seg_base"), \
        _alloca(b, I32, nc, "seg_lanes")
    lane_mask_t, mask_t = ll.IntType(s.w), ll.VectorType(ll.IntType(1), s.w)
    int_v = ll.VectorType(ll.IntType(8 * np.dtype(dtype).itemsize), s.w)
    no_lanes = ll.Constant(mask_t, [0] * s.w)
    one, zero = ll.Constant(t, 1.0), ll.Constant(t, 0.0)
    true = ll.Constant(ll.IntType(1), 1)
    zero_v = ll.Constant(vt, [0.0] * s.w)
    i32 = lambda v: ll.Constant(I32, v)  # noqa: E731

    def at32(table, i):
        return b.gep(table, [i], source_etype=I32)

    def panel(work, _):
        which, n0 = b.sdiv(work, panels), b.mul(b.srem(work, panels), cols)
        a, bm, c = (g.at(x, b.mul(which, p[st])) for x, st in ((a0, "asb"), (b0, "bsb"), (c0, "csb")))
        ncols = g.min(cols, b.sub(n, n0))
        subpanels = b.sdiv(b.add(ncols, g.i(nr - 1)), g.i(nr))
        vectors = b.mul(subpanels, g.i(s.nv))
        g.loop(g.i(0), ncols, g.i(1), "nt", _counter(g, nd, [bn], lambda j, offs: _put(
            b, b.trunc(offs[0], I32), at32(noff, j))), carried=_digits(g, nd, n0, [bn]))
        g.each(g.i(0), vectors, "sz", lambda v: _put(b, i32(0), at32(seg_count, v)))

        def lane(j):  # column j joins its vector's last run, or starts a new one where B is not contiguous
            v, lane_ = b.sdiv(j, g.i(s.w)), b.trunc(b.srem(j, g.i(s.w)), I32)
            here = b.load(at32(noff, j), typ=I32)
            before = b.load(at32(noff, b.select(b.icmp_signed(">", j, g.i(0)), b.sub(j, g.i(1)), j)), typ=I32)
            new = b.or_(b.icmp_signed("==", lane_, i32(0)), b.icmp_signed("!=", here, b.add(before, i32(1))))
            count = b.load(at32(seg_count, v), typ=I32)
            seg = b.add(b.mul(v, g.i(s.w)), b.sext(b.sub(b.add(count, b.zext(new, I32)), i32(1)), I64))
            b.store(b.select(new, b.sub(here, lane_), b.load(at32(seg_base, seg), typ=I32)), at32(seg_base, seg))
            bits = b.select(new, i32(0), b.load(at32(seg_lanes, seg), typ=I32))
            b.store(b.or_(bits, b.shl(i32(1), lane_)), at32(seg_lanes, seg))
            b.store(b.add(count, b.zext(new, I32)), at32(seg_count, v))

        g.each(g.i(0), ncols, "sl", lane)

        def kblock(k0, _):
            kc = g.min(g.i(s.kc), b.sub(k, k0))
            first = b.icmp_signed("==", k0, g.i(0))

            def tables(kk, offs):
                b.store(offs[0], b.gep(koff_a, [kk], source_etype=I64))
                b.store(b.trunc(offs[1], I32), at32(koff_b, kk))

            g.loop(g.i(0), kc, g.i(1), "kt", _counter(g, kd, [ak, bk], tables), carried=_digits(g, kd, k0, [ak, bk]))

            def vector(v):  # each vector of columns down the block: masked loads of its runs, per k
                q, j = b.sdiv(v, g.i(s.nv)), b.srem(v, g.i(s.nv))
                dst = g.at(pack, b.add(b.mul(q, g.i(s.kc * nr)), b.mul(j, g.i(s.w))))
                count = b.load(at32(seg_count, v), typ=I32)

                def run_of(r):  # (start offset, lanes) of the vector's run r
                    seg = b.add(b.mul(v, g.i(s.w)), r)
                    lanes = b.bitcast(b.trunc(b.load(at32(seg_lanes, seg), typ=I32), lane_mask_t), mask_t)
                    return b.sext(b.load(at32(seg_base, seg), typ=I32), I64), lanes

                def load(kk, start_, lanes, value):
                    row_b = g.at(bm, b.sext(b.load(at32(koff_b, kk), typ=I32), I64))
                    return b.call(mload, (g.at(row_b, start_), ll.Constant(I32, item), lanes, value))

                few, many, done = (b.append_basic_block(f"pv.{x}") for x in ("few", "many", "done"))
                b.cbranch(b.icmp_signed("<=", count, i32(runs_held)), few, many)
                b.position_at_end(few)  # (most vectors: their runs in registers, unrolled)
                runs = []
                for r in range(runs_held):  # (entries past the count are the vector's own: read, unused)
                    used = b.icmp_signed("<", i32(r), count)
                    start_, lanes = run_of(g.i(r))
                    runs.append((b.select(used, start_, g.i(0)), b.select(used, lanes, no_lanes)))

                def rows_few(kk):  # (each run loaded apart and the disjoint lanes or-ed: no chain of loads)
                    parts = [b.bitcast(load(kk, start_, lanes, zero_v), int_v) for start_, lanes in runs]
                    while len(parts) > 1:
                        parts = [b.or_(x, y) for x, y in zip(parts[::2], parts[1::2])] + parts[len(parts) & ~1:]
                    b.store(b.bitcast(parts[0], vt), g.at(dst, b.mul(kk, g.i(nr))), align=64)

                g.each(g.i(0), kc, "gk", rows_few)
                b.branch(done)
                b.position_at_end(many)  # (columns in short runs: a loop over them)

                def rows_many(kk):
                    def run(r, carried):
                        return (load(kk, *run_of(r), carried[0]),)

                    value, = g.loop(g.i(0), b.sext(count, I64), g.i(1), "run", run, carried=(zero_v,))
                    b.store(value, g.at(dst, b.mul(kk, g.i(nr))), align=64)

                g.each(g.i(0), kc, "gm", rows_many)
                b.branch(done)
                b.position_at_end(done)

            g.each(g.i(0), vectors, "gv", vector)
            multiply(g, s, (fma, mload, mstore), pack, lambda r: g.at(a, b.mul(r, sam)),
                      lambda kk: b.load(b.gep(koff_a, [kk], source_etype=I64), typ=I64),
                      m, n, n0, kc, subpanels, c, ldc, first, true, g.splat(one), g.splat(zero))
            return ()

        g.loop(g.i(0), g.max(k, g.i(1)), g.i(s.kc), "kb", kblock)  # (k = 0: C = 0)
        return ()

    g.loop(start, stop, g.i(1), "item", panel)
    b.ret_void()
    return str(mod)


def _put(b, value, where) -> None:
    """A store as an expression (for the loop bodies written as lambdas)."""
    b.store(value, where)


def _alloca(b, typ, count: int, name: str):
    space = b.alloca(typ, size=ll.Constant(I64, count), name=name)
    space.align = 64
    return b.inttoptr(b.ptrtoint(space, I64), PTR)


@functools.cache
def module(dtype: str) -> llvm.Generated:
    """The kernel for ``dtype`` (a name: float32 or float64) on the host's widest vectors, as a module
    whose text is written only where its object is in no cache."""
    s = generated_gemm._shape(dtype)
    return llvm.Generated(function_name(dtype, s), lambda: _module(dtype, s))
