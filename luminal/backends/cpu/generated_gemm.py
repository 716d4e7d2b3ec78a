"""A generated GEMM: ``C = alpha * op(A) @ op(B) + beta * C`` as LLVM code with ``cblas_?gemm``'s
signature (row-major), an alternative to BLAS that the driver calls the same way (``driver.py``).

Why generate one: OpenBLAS runs the shapes a small network makes far below the machine's peak. A
convolution's products have M = 16 or 32 output channels against tens of thousands of pixels, and
its weight gradients a K of tens of thousands against a 32 x 400 result; single-threaded OpenBLAS
0.3.31 reached 19-45 GFLOP/s on the MNIST CNN's products on a core that does about 150 (Intel Xeon,
AVX-512). Its packing and blocking are tuned for large square matrices.

The algorithm (the classic register-blocked GEMM, in one function):

- columns in panels of ``NC = NR * PANELS`` and k in blocks of ``KC``: each (panel, block) of B is
  packed into a contiguous stack buffer, ``NR`` columns per sub-panel, one row of ``NR`` per k, zeros
  past the last column (from either layout of B: a plain B is read a row of the panel at a time, a
  transposed B along k), asking for the cache lines it reads next;
- rows in blocks of ``MR``: the **microkernel** holds an ``MR x NR`` block of C in ``MR * NV`` vector
  registers (``NR = NV * W``, ``W`` elements a vector), and per k broadcasts ``MR`` elements of A
  (read in place, either layout) against the ``NV`` vectors of the packed row: ``MR * NV`` fused
  multiply-adds per ``NV`` loads;
- the block is then added into C: ``alpha * acc + beta * C`` for the first k block (C not read where
  ``beta`` is 0: it may hold anything), ``C + alpha * acc`` for later ones; its columns past N are
  stored under a mask. Rows go in blocks of ``MR``, then of 8 and 4 and single rows, so no row is
  computed and dropped.

The packed panel lives on the calling thread's stack: ``KC * NC`` elements, 32 to 128 KiB by vector
width, well within a thread's default stack (8 MiB on Linux; the backend's own threads are Python
threads with it).

Each output is a float32 (float64) sum in k order within a block, blocks added in order: what BLAS
does, with fused multiply-adds. The code is generic in every size and stride (one object per dtype
and shape of the microkernel, disk-cached like every kernel); the microkernel's shape follows the
host's vector registers (:func:`shape_for`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import llvmlite.ir as ll
import numpy as np

from luminal.backends.cpu.vector_ir import I32, I64, PTR, Builder
from luminal.codegen import llvm

NO_TRANS = 111  # CBLAS_TRANSPOSE (driver.py's constants; row-major only)


@dataclass(frozen=True)
class Shape:
    """A microkernel's shape: ``w`` elements per vector, ``mr`` rows, ``nv`` vectors of columns, k in
    blocks of ``kc``, ``panels`` sub-panels of ``nv * w`` columns packed at once."""

    w: int
    mr: int
    nv: int
    kc: int
    panels: int

    @property
    def nr(self) -> int:
        return self.nv * self.w


def shape_for(dtype, vector_bits: int) -> Shape:
    """The microkernel for ``dtype`` on vectors of ``vector_bits``: ``mr * nv`` accumulators plus
    ``nv`` loads and a broadcast within the registers (32 with AVX-512, else 16)."""
    w = vector_bits // (8 * np.dtype(dtype).itemsize)
    if vector_bits >= 512:
        return Shape(w, mr=12, nv=2, kc=128, panels=8)
    return Shape(w, mr=6, nv=2, kc=256, panels=4)


def function_name(dtype, shape: Shape) -> str:
    return f"luminal_gemm_{np.dtype(dtype).name}_{shape.w}x{shape.mr}x{shape.nv}_{shape.kc}_{shape.panels}"


def _module(dtype, s: Shape) -> str:
    t = ll.FloatType() if np.dtype(dtype) == np.float32 else ll.DoubleType()
    mod = ll.Module(function_name(dtype, s))
    fty = ll.FunctionType(ll.VoidType(), (I32, I32, I32, I64, I64, I64, t, PTR, I64, PTR, I64, t, PTR, I64))
    fn = ll.Function(mod, fty, function_name(dtype, s))
    _, ta, tb, m, n, k, alpha, a, lda, bm, ldb, beta, c, ldc = fn.args
    g = Builder(fn, t, s.w)
    fma, mload, mstore = g.intrinsics(mod)
    b = g.b
    nr, nc = s.nr, s.nr * s.panels
    pack = g.opaque_alloca(s.kc * nc, "pack")
    # A(i, k) = a[i * sam + k * sak], B(k, j) = b[k * sbk + j * sbn]: the transposes as strides
    a_trans, b_trans = (b.icmp_signed("!=", x, ll.Constant(I32, NO_TRANS)) for x in (ta, tb))
    sam, sak = b.select(a_trans, g.i(1), lda), b.select(a_trans, lda, g.i(1))
    sbk, sbn = b.select(b_trans, g.i(1), ldb), b.select(b_trans, ldb, g.i(1))
    beta_zero = b.fcmp_ordered("==", beta, ll.Constant(t, 0.0))
    alpha_v, beta_v = g.splat(alpha), g.splat(beta)

    def panel(n0, _):
        ncols = g.min(g.i(nc), b.sub(n, n0))
        subpanels = b.sdiv(b.add(ncols, g.i(nr - 1)), g.i(nr))

        def kblock(k0, _):
            kc = g.min(g.i(s.kc), b.sub(k, k0))
            first = b.icmp_signed("==", k0, g.i(0))
            _pack(g, mod, s, pack, bm, sbk, sbn, n, n0, k0, kc, subpanels, b_trans)

            multiply(g, s, (fma, mload, mstore), pack,
                      lambda r: g.at(a, b.add(b.mul(r, sam), b.mul(k0, sak))), lambda kk: b.mul(kk, sak),
                      m, n, n0, kc, subpanels, c, ldc, first, beta_zero, alpha_v, beta_v)
            return ()

        g.loop(g.i(0), g.max(k, g.i(1)), g.i(s.kc), "kb", kblock)  # (k = 0 still stores beta * C)
        return ()

    g.loop(g.i(0), n, g.i(nc), "n", panel)
    b.ret_void()
    return str(mod)


def multiply(g, s: Shape, intrinsics, pack, a_row, a_k, m, n, n0, kc, subpanels, c, ldc, first, beta_zero,
              alpha_v, beta_v) -> None:
    """The microkernel over every row of A against the packed panel (its ``subpanels`` sub-panels of
    ``kc`` rows of k, whose columns start at ``n0``), each block stored into C (:func:`_store`).
    ``a_row(r)``: a pointer to row ``r`` of A at the block's first k; ``a_k(kk)``: the element offset of
    the block's ``kk``-th k from there (one per k, shared by the rows)."""
    b = g.b
    fma, mload, mstore = intrinsics
    t, nr = g.t, s.nr
    vt = ll.VectorType(t, s.w)
    zero_v = ll.Constant(vt, [0.0] * s.w)
    item = 4 if t == ll.FloatType() else 8

    def rows(mr):
        def block(m0, _):
            a_rows = [a_row(b.add(m0, g.i(i))) for i in range(mr)]

            def sub(p, _):
                base = b.mul(p, g.i(s.kc * nr))

                def step(kk, accs):
                    row = g.at(pack, b.add(base, b.mul(kk, g.i(nr))))
                    bv = [b.load(g.at(row, g.i(j * s.w)), typ=vt, align=64) for j in range(s.nv)]
                    out = []
                    ka = a_k(kk)
                    for i in range(mr):
                        x = g.splat(b.load(g.at(a_rows[i], ka), typ=t))
                        out += [b.call(fma, (x, bv[j], accs[i * s.nv + j])) for j in range(s.nv)]
                    return out

                accs = g.loop(g.i(0), kc, g.i(1), "k", step, carried=[zero_v] * (mr * s.nv))
                _store(g, s, mr, accs, c, ldc, n, m0, b.add(n0, b.mul(p, g.i(nr))), first, beta_zero,
                       alpha_v, beta_v, fma, mload, mstore, item)
                return ()

            g.loop(g.i(0), subpanels, g.i(1), "p", sub)
            return ()
        return block

    # blocks of MR rows, then of 8 and 4 (those below MR) and 1: no row computed and dropped. A
    # small M that 8 divides and MR does not (16, 32, 40 with MR 12) is all blocks of 8.
    start = g.i(0)
    for mr in (s.mr, *(x for x in (8, 4) if x < s.mr)):
        end = b.add(start, b.mul(b.sdiv(b.sub(m, start), g.i(mr)), g.i(mr)))
        if mr == s.mr and s.mr > 8:
            by_eight = b.and_(b.icmp_signed("<", m, g.i(8 * s.mr)),
                              b.and_(b.icmp_signed("==", b.srem(m, g.i(8)), g.i(0)),
                                     b.icmp_signed("!=", b.srem(m, g.i(s.mr)), g.i(0))))
            end = b.select(by_eight, start, end)
        g.loop(start, end, g.i(mr), f"m{mr}", rows(mr))
        start = end
    g.loop(start, m, g.i(1), "m1", rows(1))


# How far ahead the packing asks for B's cache lines (a hint; no fault past the end): the rows
# ``PF_ROWS`` below a plain B's row, ``PF_K`` elements further along a transposed B's columns. A
# product whose B streams from memory (a convolution's 400 x 12544 im2col matrix) waits on it while
# packing. Measured on a 2-vCPU AMD EPYC (AVX-512), one thread, alternating in one process: 2-8 rows
# and 32-64 elements alike, 16 rows / 128 elements slower; the 16 x 50176 x 25 product gains most.
PF_ROWS = 4
PF_K = 32


def _pack(g, mod, s, pack, bm, sbk, sbn, n, n0, k0, kc, subpanels, b_trans):
    """``pack[p][kk][j] = B(k0 + kk, n0 + p * NR + j)``, 0 past column N. A plain B is copied a row at
    a time across the panel's whole sub-panels (vector loads), then its last part-filled sub-panel an
    element at a time; a transposed one a column at a time (reading along k, where it is contiguous).
    Both ask for the lines they will read next (``PF_ROWS``, ``PF_K``)."""
    b = g.b
    nr = s.nr
    vt = ll.VectorType(g.t, s.w)
    zero = ll.Constant(g.t, 0.0)

    def put(p, kk, j, value):
        b.store(value, g.at(pack, b.add(b.mul(p, g.i(s.kc * nr)), b.add(b.mul(kk, g.i(nr)), j))))

    def read(kk, col):
        return b.load(g.at(bm, b.add(b.mul(b.add(k0, kk), sbk), b.mul(col, sbn))), typ=g.t)

    def zeros(p, j0):
        """columns ``j0..NR`` of sub-panel ``p``: zeros (past N)."""
        g.each(g.i(0), kc, "z", lambda kk: g.each(j0, g.i(nr), "zj", lambda j: put(p, kk, j, zero)))

    def plain_rows(whole):
        """The first ``whole`` sub-panels (all NR columns in B), row by row: each row of B read as one
        run of up to NC contiguous elements. (Packed a sub-panel at a time, B was read in runs of NR
        elements down KC rows, ``PANELS`` times over: too short for the hardware prefetcher where B
        comes from memory. Row by row, a convolution's 32 x 12544 x 400 forward product went from
        49-59 to 59-68 GFLOP/s on one AMD EPYC core, alternating in one process.)"""
        def row(kk, _):
            src = g.at(bm, b.add(b.mul(b.add(k0, kk), sbk), n0))
            dst = g.at(pack, b.mul(kk, g.i(nr)))

            def sub(p, _):
                s_p, d_p = g.at(src, b.mul(p, g.i(nr))), g.at(dst, b.mul(p, g.i(s.kc * nr)))
                for j in range(s.nv):
                    b.store(b.load(g.at(s_p, g.i(j * s.w)), typ=vt, align=1), g.at(d_p, g.i(j * s.w)), align=64)
                    g.prefetch(mod, g.at(s_p, b.add(b.mul(g.i(PF_ROWS), sbk), g.i(j * s.w))))
                return ()

            g.loop(g.i(0), whole, g.i(1), "pq", sub)
            return ()

        g.loop(g.i(0), kc, g.i(1), "pk", row)

    def plain_part(p, _):
        """Sub-panel ``p``, the last, with fewer than NR columns in B: an element at a time, then zeros."""
        col0 = b.add(n0, b.mul(p, g.i(nr)))
        cols = g.min(g.i(nr), b.sub(n, col0))
        g.each(g.i(0), kc, "pks",
               lambda kk: g.each(g.i(0), cols, "pkj", lambda j: put(p, kk, j, read(kk, b.add(col0, j)))))
        zeros(p, cols)
        return ()

    def trans_panel(p, _):
        col0 = b.add(n0, b.mul(p, g.i(nr)))
        cols = g.min(g.i(nr), b.sub(n, col0))
        k_vec = b.mul(b.sdiv(kc, g.i(s.w)), g.i(s.w))

        def group(jv, _):  # each vector's W columns: transposed in registers where all are in B
            j0 = b.mul(jv, g.i(s.w))
            vec, part, next_ = (b.append_basic_block(f"tpack.{x}") for x in ("vec", "part", "next"))
            b.cbranch(b.icmp_signed(">=", b.sub(cols, j0), g.i(s.w)), vec, part)
            b.position_at_end(vec)

            def square(kb, _):  # W columns x W values of k
                starts = [g.at(bm, b.add(b.mul(b.add(k0, kb), sbk), b.mul(b.add(col0, b.add(j0, g.i(c))), sbn)))
                          for c in range(s.w)]
                rows = [b.load(x, typ=vt, align=1) for x in starts]
                for x in starts:
                    g.prefetch(mod, g.at(x, g.i(PF_K)))
                for kk, row in enumerate(_transpose(b, rows)):
                    dst = g.at(pack, b.add(b.mul(p, g.i(s.kc * nr)), b.add(b.mul(b.add(kb, g.i(kk)), g.i(nr)), j0)))
                    b.store(row, dst, align=64)
                return ()

            g.loop(g.i(0), k_vec, g.i(s.w), "tk", square)
            columns(p, col0, j0, b.add(j0, g.i(s.w)), k_vec)  # the last kc % W values of k
            b.branch(next_)
            b.position_at_end(part)
            end = b.add(j0, g.i(s.w))
            valid = g.min(g.max(cols, j0), end)
            columns(p, col0, j0, valid, g.i(0))
            g.each(g.i(0), kc, "z", lambda kk: g.each(valid, end, "zj", lambda j: put(p, kk, j, zero)))
            b.branch(next_)
            b.position_at_end(next_)
            return ()

        g.loop(g.i(0), g.i(s.nv), g.i(1), "tv", group)
        return ()

    def columns(p, col0, j_lo, j_hi, k_lo):
        """pack columns ``j_lo..j_hi`` of sub-panel ``p`` for k from ``k_lo``, an element at a time."""
        g.each(j_lo, j_hi, "tj", lambda j: g.each(k_lo, kc, "tks", lambda kk: put(p, kk, j, read(kk, b.add(col0, j)))))

    plain, trans, done = (b.append_basic_block(x) for x in ("pack.plain", "pack.trans", "pack.done"))
    b.cbranch(b_trans, trans, plain)
    b.position_at_end(plain)
    whole = g.min(subpanels, b.sdiv(b.sub(n, n0), g.i(nr)))
    plain_rows(whole)
    g.loop(whole, subpanels, g.i(1), "pp", plain_part)
    b.branch(done)
    b.position_at_end(trans)
    g.loop(g.i(0), subpanels, g.i(1), "tp", trans_panel)
    b.branch(done)
    b.position_at_end(done)


def _transpose(b, rows: list) -> list:
    """The transpose of a square of vectors (``rows[c][k]`` -> ``out[k][c]``): log2(W) rounds of
    interleaving row i with row i + W/2 (each round a perfect shuffle of the elements' positions)."""
    w = len(rows)
    h = w // 2
    lo = ll.Constant(ll.VectorType(I32, w), [j for i in range(h) for j in (i, w + i)])
    hi = ll.Constant(ll.VectorType(I32, w), [j for i in range(h, w) for j in (i, w + i)])
    for _ in range(w.bit_length() - 1):
        rows = [x for i in range(h) for x in (b.shuffle_vector(rows[i], rows[i + h], lo),
                                              b.shuffle_vector(rows[i], rows[i + h], hi))]
    return rows


def _store(g, s, mr, accs, c, ldc, n, m0, col0, first, beta_zero, alpha_v, beta_v, fma, mload, mstore, item):
    """The ``mr x NR`` block at ``(m0, col0)`` added into C (see the module docstring), columns below N."""
    b = g.b
    vt = ll.VectorType(g.t, s.w)
    zero_v = ll.Constant(vt, [0.0] * s.w)
    left = b.sub(n, col0)
    masks = [g.lanes_below(b.sub(left, g.i(j * s.w))) for j in range(s.nv)]
    fresh = b.and_(first, beta_zero)  # C is only written: not read (it may hold anything)
    write, update, done = (b.append_basic_block(x) for x in ("c.write", "c.update", "c.done"))
    b.cbranch(fresh, write, update)
    for block, reads in ((write, False), (update, True)):
        b.position_at_end(block)
        for i in range(mr):
            base = g.at(c, b.add(b.mul(b.add(m0, g.i(i)), ldc), col0))
            for j in range(s.nv):
                p = g.at(base, g.i(j * s.w))
                acc = accs[i * s.nv + j]
                if reads:
                    old = b.call(mload, (p, ll.Constant(I32, item), masks[j], zero_v))
                    keep = b.select(first, b.fmul(beta_v, old), old)
                    value = b.call(fma, (alpha_v, acc, keep))
                else:
                    value = b.fmul(alpha_v, acc)
                b.call(mstore, (value, p, ll.Constant(I32, item), masks[j]))
        b.branch(done)
    b.position_at_end(done)


DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


SMALL = 64  # a product with a side at most this long: where BLAS's blocking is far from the machine's peak


def preferred(dtype, m: int, n: int, k: int, blas_threads: int) -> bool:
    """The cost model: whether the generated GEMM should run a row-major ``m x n`` (by ``k``) product
    that BLAS would run on ``blas_threads``. It runs on one thread, so only where BLAS would too; then
    where its blocks are filled (``n`` at least a microkernel's width: columns past N are computed and
    dropped; ``m`` at least 8) and some side is at most :data:`SMALL`. Measured on a 2-vCPU Xeon
    (AVX-512; OpenBLAS 0.3.31 on one thread; two products at once, one per vCPU; time generated /
    OpenBLAS, three runs): a convolution's 16 x 50176 x 25 0.82-0.85, 32 x 12544 x 400 0.84-0.88,
    its data gradient 400 x 12544 x 32 (A transposed) 0.89-1.07, its weight gradient 32 x 200 x
    25088 (B transposed) 0.70-0.83; 512 x 256..1024 x 256..1024 1.01-1.07 (BLAS's); 16 x 25 x 784
    (B transposed, N below the width) 1.5-1.9 alone."""
    return blas_threads == 1 and m >= 8 and n >= _shape(dtype).nr and min(m, n, k) <= SMALL


def _shape(dtype) -> Shape:
    return shape_for(dtype, max(llvm.vector_widths()))


def gemm(dtype, vector_bits: int | None = None) -> int:
    """The address of the generated ``cblas_?gemm`` for ``dtype`` (float32 or float64) on the host's
    widest vectors (or ``vector_bits``): compiled on first use, through the disk cache."""
    return _compiled(np.dtype(dtype).name, vector_bits)[1]


def module(dtype, vector_bits: int | None = None) -> llvm.Generated:
    """The generated ``cblas_?gemm`` for ``dtype`` on the host's widest vectors (or ``vector_bits``), as a
    module whose text is written only where its object is in no cache: what :func:`gemm` compiles (and
    a cold program's planner asks to be compiled beside its kernels: ``driver.companions``)."""
    return _module_of(np.dtype(dtype).name, vector_bits)


@functools.cache
def _module_of(dtype: str, vector_bits: int | None) -> llvm.Generated:
    """:func:`module`, once per dtype name (``np.float32``, ``np.dtype("float32")`` and ``"float32"``
    alike) and width: its name holds every parameter of the text (the shape of the microkernel)."""
    s = shape_for(dtype, vector_bits) if vector_bits else _shape(dtype)
    return llvm.Generated(function_name(dtype, s), lambda: _module(dtype, s))


@functools.cache
def _compiled(dtype: str, vector_bits: int | None) -> tuple:
    """``(module, address)``: the module keeps the function's code alive."""
    generated = module(dtype, vector_bits)
    mod = llvm.compile_text(generated, [generated.name], vectorised=True)
    return mod, mod.address(generated.name)
