"""A sum over a GEMM's batch folded into the GEMM: ``sum_b A_b @ B_b`` as one product over ``K = (b, k)``.

A convolution's weight gradient is, per image, a product of the output gradient and the image's
im2col columns; the kernel graph computes it as a batched matmul (one product per image) and a reduce
kernel that sums the products over the images (fused with the optimizer's update of the weight). On
the CPU, B small GEMMs and a pass over their B partial results cost several times one GEMM whose
contraction runs over the images and the pixels together (``layout.py`` stores both operands so that
those two axes merge). So the matmul takes the reduce's summed axes into its own and writes the sum;
the reduce kernel then sums over size-1 axes, and its epilogue (the optimizer update) is unchanged.

A small product (fewer than ``MIN_FOLDED`` elements: the first convolution's 16 x 25 weight gradient
over K = B*28*28) stays batched: one GEMM with a tiny output and a huge contraction runs far below
BLAS's speed and cannot be cut over threads by its rows or columns, while the batched products and
their sum can (measured on the MNIST CNN step: 5.6 ms folded against 1.4 ms batched for that one).

The folded product's buffer keeps its id, so the program's memory plan still holds: its slot was
made for the unfolded product (a binding sizes each slot by the buffers it places there: ``plan.py``).
When the reduce has no epilogue (a data-parallel step writes a weight gradient into its bucket as it
is), summing over size-1 axes is a copy: the matmul then writes the reduce's buffer itself and the
reduce goes, provided that buffer shares no storage with the matmul's operands (the memory plan's
slots) and no kernel runs between the two.

Float16/bfloat16 products are left alone: the reference rounds each image's product before the sum,
and so must they.
"""

from __future__ import annotations

import dataclasses

from luminal.core import dtype as dt
from luminal.core.kernel_graph import KernelGraph
from luminal.core.view import View

_FLOATS = (dt.float32, dt.float64)
MIN_FOLDED = 4096  # elements of a product worth folding (see the module docstring)


def fold_batch_sums(kg: KernelGraph, slot_of: dict | None = None) -> KernelGraph:
    """``kg`` with every matmul whose product only a plain sum reads (the product, summed over some of
    its axes, is the reduce's whole prologue) computing that sum itself, in the program and in every
    rolled loop's body (a transformer block's weight gradients are products in its body).
    ``slot_of``: the memory plan's storage slot of each temp (``MemoryPlan.slot_of``), which lets a
    matmul write a copying reduce's buffer itself (module docstring); None: never."""
    bodies = {}
    for body in kg.bodies():
        ends = {b.id for b in body.results} | {b.id for members in body.packs for b, _ in members}
        kernels, folded = _fold_all(body.kernels, ends, slot_of)
        if folded:
            scratch = [folded.get(b.id, b) for b in body.scratch]
            bodies[id(body)] = dataclasses.replace(body, kernels=kernels, scratch=scratch)
    kernels, folded = _fold_all(kg.kernels, {b.id for b, _ in kg.outputs} | {b.id for _, b, _ in kg.updates}, slot_of)
    if not folded and not bodies:
        return kg
    kernels = [dataclasses.replace(k, body=bodies[id(k.body)]) if k.kind == "call" and id(k.body) in bodies else k
               for k in kernels]
    return dataclasses.replace(kg, kernels=kernels, buffers=[folded.get(b.id, b) for b in kg.buffers])


def _fold_all(kernels: list, ends: set, slot_of: dict | None) -> tuple[list, dict]:
    """``kernels`` (a program's or a body's, in order) with their matmuls folded, and the folded
    products' buffers by id. ``ends``: the ids of buffers read after ``kernels`` (results)."""
    readers: dict = {}
    for j, k in enumerate(kernels):
        for buf, _ in k.inputs + k.epilogue_inputs:
            readers.setdefault(buf.id, []).append(j)
    kernels, folded = list(kernels), {}
    for i, m in enumerate(kernels):
        f = None if m is None else _fold(m, kernels, readers, ends)
        if f is not None:
            j, m2, r2 = f
            buf = m2.outputs[0][0]
            folded[buf.id] = buf
            out = _copied_to(m2, r2, j - i, slot_of)
            if out is not None:  # the matmul writes the sum where the reduce would have copied it
                kernels[i], kernels[j] = dataclasses.replace(m2, outputs=[(out, m2.outputs[0][1])]), None
            else:
                kernels[i], kernels[j] = m2, r2
    return [k for k in kernels if k is not None], folded


def _copied_to(m, r, gap: int, slot_of: dict | None):
    """The buffer the folded reduce ``r`` only copies matmul ``m``'s product into (it sums size-1 axes
    and has no epilogue), when ``m`` may write it directly: ``r`` runs right after ``m`` and the buffer
    shares no slot with ``m``'s operands; else None."""
    if slot_of is None or gap != 1 or r.epilogue_inputs or len(r.outputs) != 1:
        return None
    out, e = r.outputs[0]
    x = m.outputs[0][0]
    if e.op != "Acc" or out.kind != "temp" or out.base is not None or out.dtype is not x.dtype \
            or tuple(out.shape) != tuple(x.shape):
        return None
    slot = slot_of.get(out.id)
    if slot is None or any(slot_of.get(b.id) == slot for b, _ in m.inputs):
        return None
    return out


def _fold(m, kernels, readers, ends):
    """``(reader index, folded matmul, reduce over size-1 axes)``, or None when ``m`` does not qualify."""
    if m.kind != "matmul" or m.epilogue_inputs or len(m.outputs) != 1 or m.acc_dtype not in _FLOATS:
        return None
    x, e = m.outputs[0]
    if e.op != "Acc" or x.kind != "temp" or x.base is not None or x.dtype is not m.acc_dtype or x.id in ends:
        return None
    if any(v.mask is not None for _, v in m.inputs):
        return None
    reads = readers.get(x.id, ())
    if len(reads) != 1:
        return None
    j = reads[0]
    r = kernels[j]
    if r is None or r.kind != "reduce" or r.reduce_op != "sum" or len(r.inputs) != 1 or r.acc_dtype is not m.acc_dtype:
        return None
    (buf, view), pro = r.inputs[0], r.prologue
    if buf is not x or pro.op != "Load" or pro.arg != 0 or tuple(r.domain) != tuple(x.shape) \
            or view != View.contiguous(x.shape) or not r.axes:
        return None
    kept = [a for a in range(len(m.domain)) if a not in m.axes]
    size = 1
    for a, d in enumerate(x.shape):
        if a not in r.axes:
            if not isinstance(d, int):
                return None  # a symbolic size: its binding decides, which a kernel graph pass cannot see
            size *= d
    if size < MIN_FOLDED:
        return None
    summed = tuple(sorted((*m.axes, *(kept[a] for a in r.axes))))
    x2 = dataclasses.replace(x, shape=tuple(d for a, d in enumerate(x.shape) if a not in r.axes))
    m2 = dataclasses.replace(m, axes=summed, outputs=[(x2, e)])
    domain = tuple(1 if a in r.axes else d for a, d in enumerate(r.domain))
    r2 = dataclasses.replace(r, domain=domain, inputs=[(x2, View.contiguous(domain))])
    return j, m2, r2
