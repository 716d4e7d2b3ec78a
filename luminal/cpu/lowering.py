"""Lowering each kernel kind to numpy calls with ``out=`` over the binding's preallocated arrays.

| kind        | calls
|-------------|------
| elementwise | the output Exprs (``exprs.py``), written straight into the output buffers
| reduce      | prologue into a scratch of the domain (or the input view itself when it is a plain
|             | load), ``ufunc.reduce`` over ``axes`` into the accumulator, then the epilogue
| matmul      | one ``np.matmul`` laid out by ``gemm.py`` (operands copied first only where BLAS could
|             | not read them), then the epilogue
| gather,     | ``numpy_ops.gather`` / ``scatter_add`` on the input views (index checks included)
| scatter_add |

Half floats (float16, bfloat16) accumulate in float32 and are rounded once into the accumulator,
as the reference does; the accumulator is the output buffer itself when an output is just ``Acc``.
"""

from __future__ import annotations

import numpy as np

from ..compile.kernel_graph import Expr
from ..frontend import dtype as dt
from ..frontend.view import contiguous_strides
from . import numpy_ops as ops
from .exprs import ExprEmitter, shape_of
from .gemm import Strided, plan_gemm

SMALL_REDUCE = 8


def lower(k, b) -> None:
    """Append the calls computing kernel ``k`` to ``b.calls`` (``b``: the program's ``Binding``)."""
    if k.kind == "elementwise":
        ExprEmitter(b, [b.load(buf, v) for buf, v in k.inputs]).emit([(e, b.array(buf)) for buf, e in k.outputs])
    elif k.kind == "reduce":
        ins = contraction(k)
        if ins is None or not _gemm(k, b, ins, worth_it=True):
            _reduce(k, b)
    elif k.kind == "matmul":
        if any(v.mask is not None for _, v in k.inputs):
            _reduce(k, b)  # not a GEMM layout: the product, then a sum
        else:
            _gemm(k, b, k.inputs)
    elif k.kind == "gather":
        x, idx = (b.load(buf, v) for buf, v in k.inputs)
        b.calls.append((ops.gather, (x, idx, k.axes[0], b.array(k.outputs[0][0]))))
    elif k.kind == "scatter_add":
        dst, idx, src = (b.load(buf, v) for buf, v in k.inputs)
        out = k.outputs[0][0]
        b.calls.append((ops.scatter_add, (dst, idx, src, k.axes[0], out.dtype, b.array(out))))
    else:
        raise NotImplementedError(f"cpu backend: no lowering for kernel kind {k.kind!r}")
    b.end_kernel()


def _out_shape(k, b) -> tuple:
    domain = b.shape(k.domain)
    return tuple(d for i, d in enumerate(domain) if i not in k.axes)


def _accumulator(k, b, shape):
    """Where ``Acc`` lands: ``(array of the output shape, its buffer)``: the buffer of an output that is
    just ``Acc``, else a scratch (buffer None)."""
    for buf, e in k.outputs:
        if e.op == "Acc" and buf.dtype is k.acc_dtype:
            arr = b.array(buf)
            return (arr if arr.shape == shape else arr.reshape(shape)), buf
    return b.scratch(shape, k.acc_dtype.np), None


def _epilogue(k, b, acc, acc_buf) -> None:
    roots = [(e, b.array(buf)) for buf, e in k.outputs if not (e.op == "Acc" and buf is acc_buf)]
    if roots:
        ExprEmitter(b, [b.load(buf, v) for buf, v in k.epilogue_inputs], acc).emit(roots)


def _round_into(b, dst, src32, dtype) -> None:
    """Write float32 values into ``dst`` rounded to ``dtype`` (float16: the cast; bfloat16: in place first)."""
    if dtype is dt.bfloat16:
        b.calls.append((ops.round_bf16_, (src32,)))
    b.calls.append((np.copyto, (dst, src32)))


def _reduce(k, b) -> None:
    shape = _out_shape(k, b)
    acc, acc_buf = _accumulator(k, b, shape)
    if k.kind == "matmul":
        loads = [Expr("Load", (), i, buf.dtype) for i, (buf, _) in enumerate(k.inputs)]
        prologue, op = Expr("Mul", tuple(loads), None, k.acc_dtype), "sum"
    else:
        prologue, op = k.prologue, k.reduce_op
    if op == "max" and any(b.shape(k.domain)[a] == 0 for a in k.axes):
        raise ValueError(f"MaxReduce over an empty axis (kernel {k})")
    loads = [b.load(buf, v) for buf, v in k.inputs]
    if prologue.op == "Load" and prologue.dtype is not dt.float16:
        x = loads[prologue.arg]  # reduce the input view itself
    else:
        x, = ExprEmitter(b, loads).emit([(prologue, None)])
        x = b.expand(x, b.shape(k.domain))  # a prologue of scalars still covers the whole domain
    cd = ops.compute_dtype(k.acc_dtype)
    if k.acc_dtype is dt.float16:
        x32 = b.scratch(shape_of(x), cd)
        b.calls.append((np.copyto, (x32, x)))
        res = b.scratch(shape, cd)
        _reduce_into(b, op, x32, tuple(k.axes), k.acc_dtype, res)
        _round_into(b, acc, res, k.acc_dtype)
    else:
        _reduce_into(b, op, x, tuple(k.axes), k.acc_dtype, acc)
        if k.acc_dtype is dt.bfloat16:
            b.calls.append((ops.round_bf16_, (acc,)))
    _epilogue(k, b, acc, acc_buf)


def _reduce_into(b, op, x, axes, dtype, out) -> None:
    """``numpy_ops.reduce``; over at most ``SMALL_REDUCE`` elements per output (a 2x2 pooling window)
    as a chain of elementwise ufunc calls over slices instead: numpy's reduction loop runs per
    output element there, several times slower than one pass per slice."""
    sizes = [shape_of(x)[a] for a in axes]
    n = int(np.prod(sizes))
    if not 1 <= n <= SMALL_REDUCE:
        b.calls.append((ops.reduce, (op, x, axes, dtype, out)))
        return
    parts = [b.take(x, dict(zip(axes, idx))) for idx in np.ndindex(*sizes)]
    if n == 1:
        b.calls.append((np.copyto, (out, parts[0])))
        return
    f = ops.ufunc("Max" if op == "max" else "Add", dt.as_dtype(x.dtype) if dtype.kind != "b" else dtype)
    b.calls.append((f, (parts[0], parts[1], out)))
    for p in parts[2:]:
        b.calls.append((f, (out, p, out)))


def contraction(k):
    """The two inputs of a reduce kernel that sums the product of two float32/float64 loads (a GEMM
    the compiler did not recognise, e.g. a convolution over its unfolded input), else None."""
    p = k.prologue
    if k.reduce_op != "sum" or p.op != "Mul" or p.dtype is not k.acc_dtype or k.acc_dtype not in (dt.float32,
                                                                                                     dt.float64):
        return None
    x, y = p.args
    if x.op != "Load" or y.op != "Load" or x.arg == y.arg:
        return None
    ins = [k.inputs[x.arg], k.inputs[y.arg]]
    return None if any(v.mask is not None for _, v in ins) else ins


def _gemm(k, b, ins, worth_it=False) -> bool:
    """Lower ``sum over k.axes of a*b`` (``ins``: the two unmasked operands) to one ``np.matmul``.
    ``worth_it``: give up (emitting nothing, returning False) when the GEMM would be a batch of dot
    products, which a plain reduction does as well."""
    domain = b.shape(k.domain)
    shape = _out_shape(k, b)
    (abuf, av), (bbuf, bv) = ins
    a_sv, b_sv = b.locate(abuf, b.strided_view(av)), b.locate(bbuf, b.strided_view(bv))
    out_axes = [i for i in range(len(domain)) if i not in k.axes]
    if worth_it:
        g = plan_gemm(domain, k.axes, a_sv, b_sv, dict(zip(out_axes, contiguous_strides(shape))))
        if g.M * g.N <= 1:
            return False
    acc, acc_buf = _accumulator(k, b, shape)
    flat, ostr = (acc.reshape(-1), contiguous_strides(shape)) if acc_buf is None else b.storage(acc_buf, shape)
    g = plan_gemm(domain, k.axes, a_sv, b_sv, dict(zip(out_axes, ostr)))
    half = k.acc_dtype in (dt.float16, dt.bfloat16)
    cd = ops.compute_dtype(k.acc_dtype)
    lhs = _operand(b, abuf, g.a, None if half else g.a2, g.bshape + (g.M, g.K), cd)
    rhs = _operand(b, bbuf, g.b, None if half else g.b2, g.bshape + (g.K, g.N), cd)
    if g.out2 is not None and not half:
        b.calls.append((np.matmul, (lhs, rhs, b.over(flat, g.out2))))
    else:
        res = b.scratch(g.bshape + (g.M, g.N), cd)
        b.calls.append((np.matmul, (lhs, rhs, res)))
        if k.acc_dtype is dt.bfloat16:
            b.calls.append((ops.round_bf16_, (res,)))
        b.calls.append((np.copyto, (b.over(flat, g.out), res.reshape(g.out.shape))))
    _epilogue(k, b, acc, acc_buf)
    return True


def _operand(b, buf, src: Strided, blas: Strided | None, shape, cd):
    """A matmul operand: the buffer's storage seen through the BLAS-ready ``blas`` view, or (when that
    is None) a contiguous ``cd`` scratch of ``shape`` refilled from the unmerged view ``src`` every run."""
    if blas is not None:
        return b.storage_view(buf, blas)
    tmp = b.scratch(shape, cd)
    b.calls.append((np.copyto, (tmp.reshape(src.shape), b.storage_view(buf, src))))
    return tmp
