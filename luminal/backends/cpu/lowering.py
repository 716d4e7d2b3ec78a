"""Lowering each kernel kind to the calls of a binding: generated code where it applies, numpy and
BLAS where they do better or where the generated path does not reach.

| kind        | runs as
|-------------|--------
| elementwise | one generated kernel (``codegen/cpu.py``'s ``elementwise``): every output in one pass
| reduce      | one generated kernel (``codegen/cpu.py``'s ``reduce``): prologue, accumulation and
|             | epilogue fused, one work item per output element
| matmul      | one ``np.matmul`` (BLAS) laid out by ``gemm.py``, operands copied first only where BLAS
|             | cannot read them; then the epilogue as a generated kernel reading the product. A matmul
|             | whose operands are masked views is no GEMM: a generated reduce (a sum of products)
| gather,     | ``numpy_ops.gather`` / ``scatter_add`` on the input views (index checks with the
| scatter_add | reference's errors; numpy's fancy indexing is as fast as a loop would be)

Why: generated code evaluates a fused region element by element in registers, one pass over memory,
where numpy made one pass (and one scratch array) per operation; BLAS's GEMMs are faster than any
loop nest we would generate. The generated kernels are collected per binding and compiled as one
LLVM module (``Binding.generate``).

Half floats (float16, bfloat16) accumulate in float32 and are rounded once into the accumulator,
as the reference does (the GEMM into a float32 scratch, then rounded and copied).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from luminal.backends.cpu.gemm import Strided, plan_gemm
from luminal.backends.cpu.layout import physical_strides
from luminal.codegen import cpu as gen
from luminal.codegen.lower import Placed
from luminal.core import dtype as dt
from luminal.core import numpy_ops as ops
from luminal.core.view import contiguous_strides


def lower(k, b) -> None:
    """Append the calls computing kernel ``k`` to ``b.calls`` (``b``: the program's ``Binding``)."""
    if k.kind == "elementwise":
        b.generate(gen.elementwise(k, b.env, b.place, b.kernel_name("ew")), k)
    elif k.kind == "reduce" or (k.kind == "matmul" and any(v.mask is not None for _, v in k.inputs)):
        b.generate(gen.reduce(k, b.env, b.place, b.kernel_name(k.kind)), k)
    elif k.kind == "matmul":
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
    """Where ``Acc`` lands: ``(flat storage, element strides of the output shape, its buffer)``: the
    buffer of an output that is just ``Acc``, else a scratch (buffer None) stored in the order the
    binding chose for the GEMM (``Binding.acc_order``)."""
    for buf, e in k.outputs:
        if e.op == "Acc" and buf.dtype is k.acc_dtype:
            return (*b.storage(buf, shape), buf)
    order = b.acc_order(k)
    if order is None:
        return b.scratch(shape, k.acc_dtype.np).reshape(-1), contiguous_strides(shape), None
    stored = b.scratch(tuple(shape[a] for a in order), k.acc_dtype.np)
    return stored.reshape(-1), physical_strides(shape, order), None


def _gemm(k, b, ins) -> None:
    """Lower ``sum over k.axes of a*b`` (``ins``: the two unmasked operands, in any layout: the
    compiler's ``contraction`` rule makes MatMuls that the strict ``matmul`` rule would not) to one
    ``np.matmul``, copying an operand into a contiguous scratch first where BLAS cannot read it; then
    the epilogue outputs (all but the one the product was written into) as a generated kernel."""
    domain = b.shape(k.domain)
    shape = _out_shape(k, b)
    (abuf, av), (bbuf, bv) = ins
    a_sv, b_sv = b.locate(abuf, b.strided_view(av)), b.locate(bbuf, b.strided_view(bv))
    out_axes = [i for i in range(len(domain)) if i not in k.axes]
    flat, ostr, acc_buf = _accumulator(k, b, shape)
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
    if any(not (e.op == "Acc" and buf is acc_buf) for buf, e in k.outputs):
        # the product, indexed in the output shape (its buffer may group the same elements otherwise)
        if acc_buf is None:
            where = Placed(b.scratch_name(flat), k.acc_dtype, 0, ostr)
        else:
            where = Placed(b.place(acc_buf, None).name, k.acc_dtype, 0, b.strides_of(acc_buf, shape))
        rest = [(buf, e) for buf, e in k.outputs if not (e.op == "Acc" and buf is acc_buf)]
        epi = dataclasses.replace(k, outputs=rest)  # the product's own buffer is BLAS's
        b.generate(gen.epilogue(epi, b.env, b.place, where, b.kernel_name("epi")), k)


def _operand(b, buf, src: Strided, blas: Strided | None, shape, cd):
    """A matmul operand: the buffer's storage seen through the BLAS-ready ``blas`` view, or (when that
    is None) a contiguous ``cd`` scratch of ``shape`` refilled from the unmerged view ``src`` every run."""
    if blas is not None:
        return b.storage_view(buf, blas)
    tmp = b.scratch(shape, cd)
    b.calls.append((np.copyto, (tmp.reshape(src.shape), b.storage_view(buf, src))))
    return tmp
