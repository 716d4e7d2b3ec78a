"""A generated GEMV: ``y = alpha * op(A) @ x + beta * y`` as LLVM code with ``cblas_?gemv``'s signature
(row-major ``A``, ``M x N``), the driver's alternative to BLAS's for products with one row or one
column (a batch-1 Linear, a decode step's products: ``driver.py``).

A matrix-vector product reads each element of ``A`` once, so it runs at the speed memory streams
``A``; what the code must do is keep several streams going and do nothing per element but a fused
multiply-add. The two layouts:

- ``A @ x`` (no transpose): each ``y[i]`` is a dot product along a row. Rows go :data:`ROWS` at a
  time, each with ``U`` vector accumulators (independent chains: an add's latency is not the bound),
  the last partial vector of each row under a mask; each row's vectors are then added into one, and
  its lanes summed.
- ``A.T @ x`` (transpose, ``x @ W`` for a weight stored ``(in, out)``): ``y`` accumulates rows of
  ``A`` scaled by the elements of ``x``. ``y`` is first set to ``beta * y`` (to 0 where ``beta`` is 0,
  without reading it), then rows are added :data:`ROWS` at a time, ``y[j..] += A[i, j..] * x[i] + ...``:
  ``A`` is read row after row, as it lies, and ``y`` (in cache) once per group of rows.

Both are generic in sizes, strides and increments (a vector path where ``x`` and ``y`` are contiguous,
an element at a time otherwise), float32 and float64, one object per dtype and vector width.
"""

from __future__ import annotations

import functools

import llvmlite.ir as ll
import numpy as np

from luminal.backends.cpu.vector_ir import I32, I64, PTR, Builder, declare
from luminal.codegen import llvm

NO_TRANS = 111
ROWS = 8  # rows of A in flight at once
U = 4  # vector accumulators per row (no transpose)


def function_name(dtype, w: int) -> str:
    return f"luminal_gemv_{np.dtype(dtype).name}_{w}"


def _module(dtype, w: int) -> str:
    t = ll.FloatType() if np.dtype(dtype) == np.float32 else ll.DoubleType()
    mod = ll.Module(function_name(dtype, w))
    fty = ll.FunctionType(ll.VoidType(), (I32, I32, I64, I64, t, PTR, I64, PTR, I64, t, PTR, I64))
    fn = ll.Function(mod, fty, function_name(dtype, w))
    _, trans, m, n, alpha, a, lda, x, incx, beta, y, incy = fn.args
    g = Builder(fn, t, w)
    b = g.b
    plain, transposed = (b.append_basic_block(s) for s in ("plain", "transposed"))
    b.cbranch(b.icmp_signed("==", trans, ll.Constant(I32, NO_TRANS)), plain, transposed)
    b.position_at_end(plain)
    _rows_dot(g, mod, m, n, alpha, a, lda, x, incx, beta, y, incy)
    b.ret_void()
    b.position_at_end(transposed)
    _rows_added(g, mod, m, n, alpha, a, lda, x, incx, beta, y, incy)
    b.ret_void()
    return str(mod)


def _vector_at(g, base, index, inc, mask, mload):
    """``w`` elements ``base[(index + l) * inc]`` where ``mask`` (0 elsewhere): one masked load where
    ``inc`` is 1, else element by element."""
    b = g.b
    vt = ll.VectorType(g.t, g.w)
    zero_v = ll.Constant(vt, [0.0] * g.w)
    contiguous, strided, done = (b.append_basic_block(s) for s in ("v.contiguous", "v.strided", "v.done"))
    b.cbranch(b.icmp_signed("==", inc, g.i(1)), contiguous, strided)
    b.position_at_end(contiguous)
    v1 = b.call(mload, (g.at(base, index), ll.Constant(I32, 1), mask, zero_v))  # (alignment 1: any)
    from_contiguous = b.block
    b.branch(done)
    b.position_at_end(strided)
    v2 = zero_v
    for lane in range(g.w):
        ok, skip = b.append_basic_block(f"lane{lane}"), b.append_basic_block(f"lane{lane}.next")
        on = b.extract_element(mask, ll.Constant(I32, lane))
        here = b.block
        b.cbranch(on, ok, skip)
        b.position_at_end(ok)
        e = b.load(g.at(base, b.mul(b.add(index, g.i(lane)), inc)), typ=g.t)
        with_e = b.insert_element(v2, e, ll.Constant(I32, lane))
        b.branch(skip)
        b.position_at_end(skip)
        phi = b.phi(vt)
        phi.add_incoming(v2, here)
        phi.add_incoming(with_e, ok)
        v2 = phi
    from_strided = b.block
    b.branch(done)
    b.position_at_end(done)
    out = b.phi(vt)
    out.add_incoming(v1, from_contiguous)
    out.add_incoming(v2, from_strided)
    return out


def _rows_dot(g, mod, m, n, alpha, a, lda, x, incx, beta, y, incy):
    """``y[i] = alpha * A[i, :] . x + beta * y[i]``, ROWS rows at a time, then one at a time."""
    b = g.b
    fma, mload, _ = g.intrinsics(mod)
    vt = ll.VectorType(g.t, g.w)
    zero_v = ll.Constant(vt, [0.0] * g.w)
    reduce = declare(mod, ll.FunctionType(g.t, (g.t, vt)), f"llvm.vector.reduce.fadd.v{g.w}f{g.t.intrinsic_name[1:]}")
    zero = ll.Constant(g.t, 0.0)
    step = g.w * U
    n_full = b.mul(b.sdiv(n, g.i(step)), g.i(step))
    all_lanes = ll.Constant(ll.VectorType(ll.IntType(1), g.w), [1] * g.w)

    def rows(count):
        def block(i0, _):
            starts = [g.at(a, b.mul(b.add(i0, g.i(r)), lda)) for r in range(count)]

            def full(k, accs):
                xs = [_vector_at(g, x, b.add(k, g.i(u * g.w)), incx, all_lanes, mload) for u in range(U)]
                return [b.call(fma, (b.load(g.at(starts[r], b.add(k, g.i(u * g.w))), typ=vt, align=1), xs[u],
                                     accs[r * U + u])) for r in range(count) for u in range(U)]

            accs = g.loop(g.i(0), n_full, g.i(step), "dk", full, carried=[zero_v] * (count * U))

            def tail(k, accs):  # the last n % (U w) columns, a masked vector at a time
                mask = g.lanes_below(b.sub(n, k))
                xv = _vector_at(g, x, k, incx, mask, mload)
                return [b.call(fma, (b.call(mload, (g.at(starts[r], k), ll.Constant(I32, 1), mask, zero_v)), xv,
                                     accs[r * U])) if u == 0 else accs[r * U + u]
                        for r in range(count) for u in range(U)]

            accs = g.loop(n_full, n, g.i(g.w), "dt", tail, carried=accs)
            for r in range(count):
                total = accs[r * U]
                for u in range(1, U):
                    total = b.fadd(total, accs[r * U + u])
                dot = b.fmul(alpha, b.call(reduce, (zero, total)))
                at = g.at(y, b.mul(b.add(i0, g.i(r)), incy))
                old = b.select(b.fcmp_ordered("==", beta, zero), zero, b.fmul(beta, b.load(at, typ=g.t)))
                b.store(b.fadd(dot, old), at)
            return ()
        return block

    m_full = b.mul(b.sdiv(m, g.i(ROWS)), g.i(ROWS))
    g.loop(g.i(0), m_full, g.i(ROWS), "dr", rows(ROWS))
    g.loop(m_full, m, g.i(1), "dr1", rows(1))


def _rows_added(g, mod, m, n, alpha, a, lda, x, incx, beta, y, incy):
    """``y = beta * y``, then ``y += A[i, :] * (alpha * x[i])`` for ROWS rows at a time, then one at a
    time (``A``'s rows are ``M`` long ``N``: ``y`` has ``N`` elements, ``x`` ``M``)."""
    b = g.b
    fma, mload, mstore = g.intrinsics(mod)
    vt = ll.VectorType(g.t, g.w)
    zero_v = ll.Constant(vt, [0.0] * g.w)
    zero = ll.Constant(g.t, 0.0)
    item = ll.Constant(I32, 1)
    beta_zero = b.fcmp_ordered("==", beta, zero)

    def scale(j, _):
        mask = g.lanes_below(b.sub(n, j))
        if_zero, otherwise, done = (b.append_basic_block(s) for s in ("s.zero", "s.scale", "s.done"))
        b.cbranch(beta_zero, if_zero, otherwise)
        b.position_at_end(if_zero)
        _store_vector(g, y, j, incy, zero_v, mask, mstore)
        b.branch(done)
        b.position_at_end(otherwise)
        _store_vector(g, y, j, incy, b.fmul(g.splat(beta), _vector_at(g, y, j, incy, mask, mload)), mask, mstore)
        b.branch(done)
        b.position_at_end(done)
        return ()

    g.loop(g.i(0), n, g.i(g.w), "ys", scale)

    def rows(count):
        def block(i0, _):
            starts = [g.at(a, b.mul(b.add(i0, g.i(r)), lda)) for r in range(count)]
            xs = [g.splat(b.fmul(alpha, b.load(g.at(x, b.mul(b.add(i0, g.i(r)), incx)), typ=g.t)))
                  for r in range(count)]

            def columns(j, _):
                mask = g.lanes_below(b.sub(n, j))
                acc = _vector_at(g, y, j, incy, mask, mload)
                for r in range(count):
                    acc = b.call(fma, (b.call(mload, (g.at(starts[r], j), item, mask, zero_v)), xs[r], acc))
                _store_vector(g, y, j, incy, acc, mask, mstore)
                return ()

            g.loop(g.i(0), n, g.i(g.w), "ac", columns)
            return ()
        return block

    m_full = b.mul(b.sdiv(m, g.i(ROWS)), g.i(ROWS))
    g.loop(g.i(0), m_full, g.i(ROWS), "ar", rows(ROWS))
    g.loop(m_full, m, g.i(1), "ar1", rows(1))


def _store_vector(g, base, index, inc, value, mask, mstore):
    """``base[(index + l) * inc] = value[l]`` where ``mask``: one masked store where ``inc`` is 1."""
    b = g.b
    contiguous, strided, done = (b.append_basic_block(s) for s in ("w.contiguous", "w.strided", "w.done"))
    b.cbranch(b.icmp_signed("==", inc, g.i(1)), contiguous, strided)
    b.position_at_end(contiguous)
    b.call(mstore, (value, g.at(base, index), ll.Constant(I32, 1), mask))
    b.branch(done)
    b.position_at_end(strided)
    for lane in range(g.w):
        ok, skip = b.append_basic_block(f"wl{lane}"), b.append_basic_block(f"wl{lane}.next")
        b.cbranch(b.extract_element(mask, ll.Constant(I32, lane)), ok, skip)
        b.position_at_end(ok)
        b.store(b.extract_element(value, ll.Constant(I32, lane)), g.at(base, b.mul(b.add(index, g.i(lane)), inc)))
        b.branch(skip)
        b.position_at_end(skip)
    b.branch(done)
    b.position_at_end(done)


def gemv(dtype, vector_bits: int | None = None) -> int:
    """The address of the generated ``cblas_?gemv`` for ``dtype`` (float32 or float64) on the host's
    widest vectors (or ``vector_bits``): compiled on first use, through the disk cache."""
    return _compiled(np.dtype(dtype).name, vector_bits)[1]


def module(dtype, vector_bits: int | None = None) -> llvm.Generated:
    """The generated ``cblas_?gemv`` for ``dtype`` on the host's widest vectors (or ``vector_bits``), as a
    module whose text is written only where its object is in no cache: what :func:`gemv` compiles (and
    a cold program's planner asks to be compiled beside its kernels: ``driver.companions``)."""
    return _module_of(np.dtype(dtype).name, vector_bits)


@functools.cache
def _module_of(dtype: str, vector_bits: int | None) -> llvm.Generated:
    """:func:`module`, once per dtype name (``np.float32``, ``np.dtype("float32")`` and ``"float32"``
    alike) and width: its name holds every parameter of the text (the vector width)."""
    w = (vector_bits or max(llvm.vector_widths())) // (8 * np.dtype(dtype).itemsize)
    return llvm.Generated(function_name(dtype, w), lambda: _module(dtype, w))


@functools.cache
def _compiled(dtype: str, vector_bits: int | None) -> tuple:
    """``(module, address)``: the module keeps the function's code alive."""
    generated = module(dtype, vector_bits)
    mod = llvm.compile_text(generated, [generated.name], vectorised=True)
    return mod, mod.address(generated.name)
