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

import math

import numpy as np

from luminal.backends.cpu.exprs import ExprEmitter, shape_of
from luminal.backends.cpu.gemm import Strided, plan_gemm
from luminal.core import dtype as dt
from luminal.core import numpy_ops as ops
from luminal.core.kernel_graph import Expr
from luminal.core.view import contiguous_strides

SMALL_REDUCE = 8


def lower(k, b) -> None:
    """Append the calls computing kernel ``k`` to ``b.calls`` (``b``: the program's ``Binding``)."""
    if k.kind == "elementwise":
        if not _padded_sum(k, b):
            ExprEmitter(b, [b.load(buf, v) for buf, v in k.inputs]).emit([(e, b.array(buf)) for buf, e in k.outputs])
    elif k.kind == "reduce":
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


def _padded_sum(k, b) -> bool:
    """Lower an elementwise kernel whose one output is a sum of zero-padded loads (the gradient of
    overlapping windows: col2im) as an accumulation: each load's valid box is added into its part of
    the output in place (the first one copied, the rest of the output zeroed). Evaluated as written,
    every padded load would be materialised at the full output size and each sum taken over whole
    arrays.

    numpy adds a box slowly when its rows are short (a 14-wide window of an 18-wide padded image:
    one inner loop per row), so the terms whose boxes share a range along the innermost axis are
    first summed into a scratch that is exactly that wide (where each box is a contiguous run), and
    that sum is added into the output once.

    The result is the same float sum reordered, as a reduction's. Signed zeros come out exact for a
    -0.0 pad (``cat``'s: the additive identity); with a +0.0 pad, a -0.0 term alone stays -0.0 where
    the expression (adding the pad) gives +0.0."""
    parts = _padded_terms(k, b)
    if parts is None:
        return False
    dst, shape, terms, pad = parts
    out = dst.reshape(shape)
    w = max((a for a, n in enumerate(shape) if n > 1), default=len(shape) - 1)
    groups: dict = {}
    for src, box in terms:
        groups.setdefault((box[w].start, box[w].stop), []).append((src, box))
    full = (slice(None),) * len(shape)
    first = True
    for (lo, hi), group in groups.items():
        if len(group) == 1 or (lo, hi) == (0, shape[w]):
            for src, box in group:
                _put(b, out, box, src, first, pad)
                first = False
            continue
        acc = b.scratch(shape[:w] + (hi - lo,) + shape[w + 1:], dst.dtype)
        for i, (src, box) in enumerate(group):
            _put(b, acc, box[:w] + (slice(None),) + box[w + 1:], src, i == 0, pad)
        _put(b, out, full[:w] + (slice(lo, hi),) + full[w + 1:], acc, first, pad)
        first = False
    if first:  # no valid box at all
        b.calls.append((np.copyto, (dst, np.asarray(pad, dst.dtype))))
    return True


def _put(b, target, box, src, first: bool, pad) -> None:
    """Add ``src`` into ``target[box]`` in place; as the ``first`` term, copy it there and fill the
    rest of ``target`` with the pad instead (one pass less than filling everything and adding)."""
    part = target[box]
    if not first:
        b.calls.append((np.add, (part, src, part)))
        return
    zero = np.asarray(pad, target.dtype)
    for a, sl in enumerate(box):  # the slabs outside the box: before and after it along each axis
        lo, hi, _ = sl.indices(target.shape[a])
        for rng in (slice(0, lo), slice(hi, target.shape[a])):
            if rng.stop > rng.start:
                b.calls.append((np.copyto, (target[box[:a] + (rng,)], zero)))
    b.calls.append((np.copyto, (part, src)))


def _padded_terms(k, b):
    """For a kernel :func:`_padded_sum` lowers: ``(output array, shape the loads have, [(valid box
    of a load as a view of its buffer, its slices of the output seen in that shape)], the pad)``;
    else None. Every masked load must pad with the same zero (+0.0, or -0.0: ``cat``'s, which keeps
    a -0.0 term's sign)."""
    if len(k.outputs) != 1 or k.outputs[0][0].dtype not in (dt.float32, dt.float64):
        return None
    buf, e = k.outputs[0]
    slots = _add_terms(e)
    dst = b.array(buf)
    if slots is None or not isinstance(dst, np.ndarray) or not dst.flags.c_contiguous or 0 in dst.shape:
        return None
    ins = [k.inputs[i] for i in slots]
    views = [ops.bound_view(v, b.env) for _, v in ins]
    shape = views[0][0]
    pads = {(v.pad == 0, math.copysign(1.0, v.pad)) for _, v in ins if v.mask is not None}
    if sum(box is not None for *_, box in views) < 2 or any(v[0] != shape for v in views) or \
            int(np.prod(shape)) != dst.size or any(src.dtype is not buf.dtype for src, _ in ins) or \
            len(pads) != 1 or not next(iter(pads))[0]:
        return None
    terms = []
    for (src, _), (_, strides, offset, box) in zip(ins, views):
        box = box or tuple((0, n) for n in shape)
        inner = ops.inner_box(strides, offset, box)
        if inner is not None:
            terms.append((b.view(src, Strided(inner[0], strides, inner[1])), tuple(slice(lo, hi) for lo, hi in box)))
    return dst, shape, terms, math.copysign(0.0, next(iter(pads))[1])


def _add_terms(e):
    """The Load slots of the terms of ``e``, a tree of Adds of loads read through Copies and Reshapes,
    left to right; else None."""
    terms, stack = [], [e]
    while stack:
        x = stack.pop()
        if x.op == "Add":
            stack.extend(reversed(x.args))
            continue
        while x.op in ("Copy", "Reshape"):
            x = x.args[0]
        if x.op != "Load":
            return None
        terms.append(x.arg)
    return terms


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
    if op == "sum" and prologue.op == "Mul" and k.acc_dtype in (dt.float16, dt.bfloat16) and \
            all(a.op == "Load" for a in prologue.args):
        # a sum of products of 16-bit loads multiplies in float32, as the reference's contraction and
        # torch's matmul do (300 * 300 is inf in float16, 1e-4 * 1e-4 is 0)
        prologue = Expr("Mul", tuple(Expr("Cast", (a,), dt.float32, dt.float32) for a in prologue.args), None,
                        dt.float32)
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
    output element there, several times slower than one pass per slice. A float sum ends with an
    added +0.0, the start of ``np.add.reduce`` (and torch's sum): a sum of -0.0 values is +0.0."""
    sizes = [shape_of(x)[a] for a in axes]
    n = int(np.prod(sizes))
    if not 1 <= n <= SMALL_REDUCE:
        b.calls.append((ops.reduce, (op, x, axes, dtype, out)))
        return
    parts = [b.take(x, dict(zip(axes, idx))) for idx in np.ndindex(*sizes)]
    zero = np.zeros((), out.dtype) if op == "sum" and dtype.is_float else None  # a sum starts from +0.0
    if n == 1:
        b.calls.append((np.copyto, (out, parts[0])) if zero is None else (np.add, (parts[0], zero, out)))
        return
    f = ops.ufunc("Max" if op == "max" else "Add", dt.as_dtype(x.dtype) if dtype.kind != "b" else dtype)
    b.calls.append((f, (parts[0], parts[1], out)))
    for p in parts[2:]:
        b.calls.append((f, (out, p, out)))
    if zero is not None:  # the chain starts from the first term: all -0.0 would stay -0.0, where +0.0 + ... is +0.0
        b.calls.append((np.add, (out, zero, out)))


def _gemm(k, b, ins) -> None:
    """Lower ``sum over k.axes of a*b`` (``ins``: the two unmasked operands, in any layout: the
    compiler's ``contraction`` rule makes MatMuls that the strict ``matmul`` rule would not) to one
    ``np.matmul``, copying an operand into a contiguous scratch first where BLAS cannot read it."""
    domain = b.shape(k.domain)
    shape = _out_shape(k, b)
    (abuf, av), (bbuf, bv) = ins
    a_sv, b_sv = b.locate(abuf, b.strided_view(av)), b.locate(bbuf, b.strided_view(bv))
    out_axes = [i for i in range(len(domain)) if i not in k.axes]
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


def _operand(b, buf, src: Strided, blas: Strided | None, shape, cd):
    """A matmul operand: the buffer's storage seen through the BLAS-ready ``blas`` view, or (when that
    is None) a contiguous ``cd`` scratch of ``shape`` refilled from the unmerged view ``src`` every run."""
    if blas is not None:
        return b.storage_view(buf, blas)
    tmp = b.scratch(shape, cd)
    b.calls.append((np.copyto, (tmp.reshape(src.shape), b.storage_view(buf, src))))
    return tmp
