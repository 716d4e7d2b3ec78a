"""A convolution's products as direct kernels: ``C = A @ B`` where B is the im2col matrix a gathered
product reads from the image (``gathered.py``), its elements broadcast straight from the image and
A's rows (output channels) held as vectors. Nothing of the image is packed.

Why: the gathered GEMM (``gathered_gemm.py``) packs each panel of B from the image before its
microkernel multiplies it by A's rows. A convolution has few output channels (M = 16..64), so each
packed element is used by few rows and the packing costs about as much as the multiplication.

Two kernels, by what B's columns are:

- **Rows** (:func:`shape`, :func:`module`): the columns are output pixels (a forward product,
  or a data gradient written as a convolution: ``nn/layers/conv.py``). A^T (K x M, a few tens of kB)
  is packed once per call, and a work item is ``R`` consecutive output pixels of one image row: for
  each of the K (input channel, kernel row, kernel column) the kernel broadcasts the R pixels'
  inputs, consecutive in the image, into ``R x nv`` vector accumulators (``nv`` vectors of output
  channels, M in passes of ``nv * W``), held for the whole K. MNIST CNN's second convolution
  (32 x 400 x 25088, AMD EPYC AVX-512, one thread): 93-98 GFLOP/s against 64-67 for the gathered
  GEMM on the same operands. It applies where the innermost column sub-axis is unit-stride in the
  image (a stride-1 convolution's output row) with a divisor ``R`` the registers can hold, and one A
  serves every product of a batch, within :data:`PACK_BYTES`.
- **Windows** (:func:`window_shape`, :func:`window_module`): the columns are the weight's taps
  and K the output pixels (a weight gradient: A the output's gradient). A work item is one window of
  taps (an input channel's kernel rows x columns) for a pass of ``nv`` vectors of channels; per
  block of pixels (A^T within :data:`PACK_BYTES`) each pixel's inputs at the window's taps are
  broadcast into one vector accumulator per tap, and the block's sums go to C (the first block's
  stored, later ones added). The same convolution's weight gradient: 90-96 GFLOP/s against 62-71.

The accumulators go through a small stack tile to C's rows (C is channel-major: ``c[c_off + m *
ldc + n]``). Both kernels are of the generated kernels' ABI (``codegen/llvm.py``: ``f(pointers,
parameters, start, stop)``) with the gathered GEMM's pointers and parameters
(``gathered_gemm.PARAMS``; ``cols`` unused), compiled with a binding's kernels (``steps.Library``).
"""

from __future__ import annotations

import functools

import llvmlite.ir as ll
import numpy as np

from luminal.backends.cpu import generated_gemm
from luminal.backends.cpu.gathered_gemm import AXES, PARAMS, _counter, _digits
from luminal.backends.cpu.vector_ir import I32, I64, PTR, Builder
from luminal.codegen import llvm

PACK_BYTES = 128 << 10  # A^T packed on the stack, per call: K * nv * W elements at most this many bytes
MAX_VECTORS = 4  # vectors of output channels per pass over K


def shape(m: int, k: int, width: int, dtype) -> tuple[int, int] | None:
    """``(R, nv)`` of the kernel for M = ``m`` output channels, K = ``k`` and output rows of ``width``
    unit-stride columns, or None where it does not apply. ``nv`` vectors of channels per pass over K
    (M in passes of ``nv * W``), ``R`` the largest divisor of ``width`` (at least 4) whose ``R x nv``
    accumulators, ``nv`` vectors of A and a broadcast fit the vector registers with one to spare. Of
    the ``nv`` that fit, the one using most of its lanes (M in few passes) and with accumulators
    enough to hide the FMA's latency (16).

    The spare register: with all of them taken (14 x 1 on AVX2's 16), LLVM's unrolled loop over K
    spills accumulators to the stack every iteration. The MNIST CNN's second convolution (32 x 400 x
    25088, AMD EPYC Zen 3, one thread) took 13.2 ms as 14 x 1 against 9.3 ms as 7 x 1."""
    w = generated_gemm._shape(dtype).w
    registers = 32 if w * np.dtype(dtype).itemsize >= 64 else 16
    best, score = None, 0.0
    for nv in range(1, min(MAX_VECTORS, -(-m // w)) + 1):
        if k * nv * w * np.dtype(dtype).itemsize > PACK_BYTES:
            break
        most = (registers - nv - 2) // nv
        r = max((d for d in range(1, min(most, width) + 1) if width % d == 0), default=0)
        passes = -(-m // (nv * w))
        here = m / (passes * nv * w) * min(1.0, r * nv / 16)
        if r >= 4 and here > score:
            best, score = (r, nv), here
    return best


def function_name(dtype, r: int, nv: int) -> str:
    return f"luminal_direct_conv_{np.dtype(dtype).name}_{r}x{nv}"


class _Entry:
    """A kernel function of the generated kernels' ABI being built: its module, builder, element and
    vector types, FMA, parameters (``gathered_gemm.PARAMS``), item range and operands A, B, C at
    their offsets; what both kernels start with."""

    def __init__(self, dtype: str, name: str):
        self.t = ll.FloatType() if np.dtype(dtype) == np.float32 else ll.DoubleType()
        self.w = generated_gemm._shape(dtype).w
        self.vt = ll.VectorType(self.t, self.w)
        self.mod = ll.Module(name)
        fn = ll.Function(self.mod, ll.FunctionType(ll.VoidType(), (PTR, PTR, I64, I64)), name)
        ptrs, params, self.start, self.stop = fn.args
        self.g = g = Builder(fn, self.t, self.w)
        self.b = b = g.b
        self.fma = g.intrinsics(self.mod)[0]
        base = [b.load(b.gep(ptrs, [g.i(i)], source_etype=PTR), typ=PTR) for i in range(3)]
        self.p = {x: b.load(b.gep(params, [g.i(i)], source_etype=I64), typ=I64) for i, x in enumerate(PARAMS)}
        self.a0, self.b0, self.c0 = (g.at(x, self.p[o]) for x, o in zip(base, ("a_off", "b_off", "c_off")))

    def pack_row(self, row, a, m0, rows, sam, offset, width: int) -> None:
        """``row[mm] = A(m0 + mm, k)`` for ``mm < width`` (``a[(m0 + mm) * sam + offset]``: ``offset``
        is k's), 0 from ``rows`` on: one k's row of A^T."""
        g, b = self.g, self.b
        zero = ll.Constant(self.t, 0.0)

        def put(mm):
            inside = b.icmp_signed("<", mm, rows)
            at = b.add(b.mul(b.add(m0, b.select(inside, mm, g.i(0))), sam), offset)
            b.store(b.select(inside, b.load(g.at(a, at), typ=self.t), zero), g.at(row, mm))

        g.each(g.i(0), g.i(width), "ap", put)

    def accumulate(self, base, koff, kk, apack, nv: int, offsets, accs) -> list:
        """``accs`` (a vector per offset and vector of channels) plus k = ``kk``'s term: the element
        at each of ``offsets`` from k's place in the image (``base + koff[kk]``) broadcast, times
        the ``nv`` vectors of channels of A^T's row ``kk``."""
        g, b = self.g, self.b
        pixel = g.at(base, b.sext(b.load(b.gep(koff, [kk], source_etype=I32), typ=I32), I64))
        row = g.at(apack, b.mul(kk, g.i(nv * self.w)))
        channels = [b.load(g.at(row, g.i(v * self.w)), typ=self.vt, align=64) for v in range(nv)]
        out = []
        for i, offset in enumerate(offsets):
            x = g.splat(b.load(g.at(pixel, offset), typ=self.t))
            out += [b.call(self.fma, (x, channels[v], accs[i * nv + v])) for v in range(nv)]
        return out


def _module(dtype: str, r: int, nv: int) -> str:
    e = _Entry(dtype, function_name(dtype, r, nv))
    g, b, t, w, vt, p, start, stop = e.g, e.b, e.t, e.w, e.vt, e.p, e.start, e.stop
    a0, b0, c0 = e.a0, e.b0, e.c0
    m, n, k, sam, ldc = (p[x] for x in ("m", "n", "k", "sam", "ldc"))
    kd, ak, bk = ([p[f"{x}{i}"] for i in range(AXES)] for x in ("kd", "ak", "bk"))
    nd, bn = ([p[f"{x}{i}"] for i in range(AXES)] for x in ("nd", "bn"))
    width = nv * w
    apack = _stack(b, t, b.mul(k, g.i(width)), "apack")  # A^T of a pass: row kk holds its channels' A(., kk)
    koff = _stack(b, I32, k, "koff")  # each k's offset in the image
    tile = g.opaque_alloca(r * width, "tile")

    def offsets(kk, offs):
        b.store(b.trunc(offs[1], I32), b.gep(koff, [kk], source_etype=I32))
        return ()

    g.loop(g.i(0), k, g.i(1), "kt", _counter(g, kd, [ak, bk], offsets), carried=_digits(g, kd, g.i(0), [ak, bk]))
    blocks = b.sdiv(n, g.i(r))  # per product of the batch

    def run_pass(m0, _):  # the channels m0 .. m0 + width, over every block of the call
        rows = g.min(g.i(width), b.sub(m, m0))

        def pack(kk, offs):
            e.pack_row(g.at(apack, b.mul(kk, g.i(width))), a0, m0, rows, sam, offs[0], width)
            return ()

        g.loop(g.i(0), k, g.i(1), "kp", _counter(g, kd, [ak, bk], pack), carried=_digits(g, kd, g.i(0), [ak, bk]))

        def block(work, _):
            which, n0 = b.sdiv(work, blocks), b.mul(b.srem(work, blocks), g.i(r))
            _, _, noff = _digits(g, nd, n0, [bn])
            image = g.at(g.at(b0, b.mul(which, p["bsb"])), noff)
            c = g.at(c0, b.add(b.mul(which, p["csb"]), b.mul(m0, ldc)))

            columns = [g.i(j) for j in range(r)]  # (the block's pixels, consecutive in the image)
            accs = g.loop(g.i(0), k, g.i(1), "k", lambda kk, accs: e.accumulate(
                image, koff, kk, apack, nv, columns, accs), carried=[ll.Constant(vt, [0.0] * w)] * (r * nv))
            for j in range(r):
                for v in range(nv):
                    b.store(accs[j * nv + v], g.at(tile, g.i(j * width + v * w)), align=64)

            def channel(mm):  # the tile's column mm is C's row m0 + mm at these R columns
                dst = g.at(c, b.add(b.mul(mm, ldc), n0))
                for j in range(r):
                    b.store(b.load(g.at(tile, b.add(g.i(j * width), mm)), typ=t), g.at(dst, g.i(j)))

            g.each(g.i(0), rows, "st", channel)
            return ()

        g.loop(start, stop, g.i(1), "item", block)
        return ()

    g.loop(g.i(0), m, g.i(width), "pass", run_pass)
    b.ret_void()
    return str(e.mod)


def window_shape(m: int, rows: int, cols: int, dtype) -> tuple[int, int] | None:
    """``(sub, nv)`` of the weight gradient's kernel (:func:`window_module`) for M = ``m`` output
    channels and windows of ``rows x cols`` taps (C's two innermost column sub-axes, the inner one
    unit-stride in the image): an item is ``sub`` of the window's rows (a divisor of ``rows``) for a
    pass of ``nv`` vectors of channels, its ``sub x cols x nv`` accumulators within the vector
    registers with one to spare (``shape``'s) and at least 8 of them (the FMA's latency); or None.
    The ``(sub, nv)`` using most of its lanes, then the most accumulators, then the most rows.

    ``sub`` below ``rows``: a 5x5 window's 25 taps need 32 registers (AVX-512's); with AVX2's 16 an
    item takes one row of 5 taps for 2 vectors of channels (10 accumulators) and the image is read
    once per row of the window. The MNIST CNN's second weight gradient (32 x 400 x 25088, AMD EPYC
    Zen 3, one thread): 11.1 ms as a gathered GEMM, 8 ms so."""
    w = generated_gemm._shape(dtype).w
    registers = 32 if w * np.dtype(dtype).itemsize >= 64 else 16
    best, score = None, (0.0, 0, 0)
    for sub in (d for d in range(rows, 0, -1) if rows % d == 0):
        taps = sub * cols
        for nv in range(1, min(MAX_VECTORS, -(-m // w)) + 1):
            if taps * nv + nv + 2 > registers or taps * nv < 8:
                continue
            passes = -(-m // (nv * w))
            here = (m / (passes * nv * w), taps * nv, sub)
            if here > score:
                best, score = (sub, nv), here
    return best


def window_function_name(dtype, rows: int, cols: int, nv: int, sub: int | None = None) -> str:
    part = "" if sub in (None, rows) else f"{sub}of"
    return f"luminal_direct_conv_window_{np.dtype(dtype).name}_{part}{rows}x{cols}x{nv}"


def _window_module(dtype: str, rows: int, cols: int, nv: int, sub: int) -> str:
    """The weight gradient's kernel: ``C(m, n) = sum_k A(m, k) B(k, n)`` with k the output pixels
    (every image's) and n the weight's taps, ``(outer, rows, cols)`` sub-axes; a work item is ``sub``
    rows of one window (``rows x cols`` taps) for ``nv`` vectors of channels. Per block of
    :func:`window_block` pixels A^T is packed (the output gradient's channels as vectors, with each
    pixel's offset in the image), and the item's accumulators, one per tap and vector, take each
    pixel's ``sub x cols`` inputs broadcast from the image; C gets the block's sums (the first
    block's stored, later ones added)."""
    e = _Entry(dtype, window_function_name(dtype, rows, cols, nv, sub))
    g, b, t, w, vt, p, start, stop = e.g, e.b, e.t, e.w, e.vt, e.p, e.start, e.stop
    a0, b0, c0 = e.a0, e.b0, e.c0
    m, n, k, sam, ldc = (p[x] for x in ("m", "n", "k", "sam", "ldc"))
    kd, ak, bk = ([p[f"{x}{i}"] for i in range(AXES)] for x in ("kd", "ak", "bk"))
    bn0, bn1 = p["bn0"], p["bn1"]
    width, taps, kc, parts = nv * w, sub * cols, window_block(dtype, nv), rows // sub
    apack = g.opaque_alloca(kc * width, "apack")  # A^T of a block: row kk holds a pass's channels at pixel kk
    koff = _stack(b, I32, g.i(kc), "koff")  # each pixel's offset in the image
    tile = g.opaque_alloca(taps * width, "tile")
    windows = b.sdiv(n, g.i(taps))  # items per pass: a window's ``parts`` rows apart
    passes = b.sdiv(b.add(m, g.i(width - 1)), g.i(width))
    window_taps = [b.add(b.mul(g.i(r), bn1), g.i(q)) for r in range(sub) for q in range(cols)]  # (from its corner)

    def group(gi, _):  # the items of one product and pass: its windows lo .. hi
        which, m0 = b.sdiv(gi, passes), b.mul(b.srem(gi, passes), g.i(width))
        lo = b.sub(g.max(start, b.mul(gi, windows)), b.mul(gi, windows))
        hi = b.sub(g.min(stop, b.mul(b.add(gi, g.i(1)), windows)), b.mul(gi, windows))
        a, image = g.at(a0, b.mul(which, p["asb"])), g.at(b0, b.mul(which, p["bsb"]))
        c = g.at(c0, b.add(b.mul(which, p["csb"]), b.mul(m0, ldc)))
        here = g.min(g.i(width), b.sub(m, m0))

        def block(k0, _):
            count = g.min(g.i(kc), b.sub(k, k0))

            def pack(kk, offs):
                b.store(b.trunc(offs[1], I32), b.gep(koff, [kk], source_etype=I32))
                e.pack_row(g.at(apack, b.mul(kk, g.i(width))), a, m0, here, sam, offs[0], width)
                return ()

            g.loop(g.i(0), count, g.i(1), "kp", _counter(g, kd, [ak, bk], pack),
                   carried=_digits(g, kd, k0, [ak, bk]))
            first = b.icmp_signed("==", k0, g.i(0))

            def window(j, _):
                corner = g.at(image, b.mul(j, bn0) if parts == 1 else b.add(
                    b.mul(b.sdiv(j, g.i(parts)), bn0), b.mul(b.srem(j, g.i(parts)), b.mul(bn1, g.i(sub)))))

                accs = g.loop(g.i(0), count, g.i(1), "k", lambda kk, accs: e.accumulate(
                    corner, koff, kk, apack, nv, window_taps, accs), carried=[ll.Constant(vt, [0.0] * w)] * (taps * nv))
                for tap in range(taps):
                    for v in range(nv):
                        b.store(accs[tap * nv + v], g.at(tile, g.i(tap * width + v * w)), align=64)
                col0 = b.mul(j, g.i(taps))

                def channel(mm):  # the tile's column mm is C's row m0 + mm at this window's taps
                    dst = g.at(c, b.add(b.mul(mm, ldc), col0))
                    for tap in range(taps):
                        at = g.at(dst, g.i(tap))
                        value = b.load(g.at(tile, b.add(g.i(tap * width), mm)), typ=t)
                        b.store(b.select(first, value, b.fadd(b.load(at, typ=t), value)), at)

                g.each(g.i(0), here, "st", channel)
                return ()

            g.loop(lo, hi, g.i(1), "window", window)
            return ()

        g.loop(g.i(0), g.max(k, g.i(1)), g.i(kc), "kb", block)
        return ()

    g.loop(b.sdiv(start, windows), b.sdiv(b.add(stop, b.sub(windows, g.i(1))), windows), g.i(1), "group", group)
    b.ret_void()
    return str(e.mod)


def window_block(dtype, nv: int) -> int:
    """Pixels per block of the weight gradient's kernel: its A^T within :data:`PACK_BYTES`."""
    w = generated_gemm._shape(dtype).w
    return max(16, PACK_BYTES // (nv * w * np.dtype(dtype).itemsize))


@functools.cache
def window_module(dtype: str, rows: int, cols: int, nv: int, sub: int | None = None) -> llvm.Generated:
    """The weight gradient's kernel (:func:`_window_module`), an item ``sub`` of the window's rows (all of
    them by default), as a module whose text is written only where its object is in no cache."""
    sub = rows if sub is None else sub
    return llvm.Generated(window_function_name(dtype, rows, cols, nv, sub),
                          lambda: _window_module(dtype, rows, cols, nv, sub))


def _stack(b, typ, count, name: str):
    """A 64-byte aligned stack buffer of ``count`` (a value) elements of ``typ``, as an opaque pointer."""
    space = b.alloca(typ, size=count, name=name)
    space.align = 64
    return b.inttoptr(b.ptrtoint(space, I64), PTR)


@functools.cache
def module(dtype: str, r: int, nv: int) -> llvm.Generated:
    """The kernel for ``dtype`` (a name) with ``R`` columns and ``nv`` vectors of rows per block, as a
    module whose text is written only where its object is in no cache."""
    return llvm.Generated(function_name(dtype, r, nv), lambda: _module(dtype, r, nv))
