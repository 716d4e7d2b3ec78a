"""A product and the elementwise kernel reading its result run a batch entry (an image) at a time,
the product's result in a per-thread scratch (``blocked.py``'s mechanism).

A convolution's data gradient reaches the kernel graph as a product, the gradient of the im2col
columns (``W^T dY``: the MNIST CNN's second convolution, 400 x 196 per image, 313 kB; 40 MB for a
batch of 128), and an elementwise kernel summing the ``kh * kw`` shifted windows of it into the
padded image's gradient (col2im). Kernel by kernel the product writes the 40 MB to memory and the
sum reads them back. Here each thread takes images in turn: the product of one image's columns into
its scratch, then the sum's items of that image reading them there.

When it applies (:func:`find`), for one binding of the dims:

- two consecutive units: a library product (BLAS-ready operands, no copies; float32 or float64;
  not gathered) whose one output ``P`` is its sum, then one elementwise kernel, the only reader of
  ``P``'s value; ``choices.blocks`` on;
- ``P`` a private temp (``blocked.Values.private``), its leading axis (``B`` > 1 entries) the
  product's first batch axis, so one GEMM per entry; stored row-major so that an entry is one block
  (where the GEMM layouts permuted it to make the batch one GEMM, the permutation is dropped);
- every read of ``P`` walks entry ``b`` of it at entry ``b`` of the kernel's own leading axis (that
  axis' stride one entry), within the entry (the view's valid box); the kernel's outputs stored
  row-major (its items then run over its leading axis outermost: ``elementwise._store_order``);
- ``P`` at least :data:`MIN_BYTES`, an entry at least :data:`MIN_ENTRY_BYTES` (the cost model: a
  smaller one stays in the cache anyway, or its blocks' calls cost more than they save).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from luminal.backends.cpu import blocked
from luminal.backends.cpu.gemm import Strided, plan_gemm
from luminal.backends.cpu.parallel import thread_count
from luminal.backends.cpu.steps import Gemm, Ref
from luminal.core import numpy_ops as ops
from luminal.core.symbolic import prod
from luminal.core.view import contiguous_strides

BLOCK_BYTES = 1 << 19  # entries per block: as many as fit this (at least one)
MIN_BYTES = 1 << 20
MIN_ENTRY_BYTES = 1 << 14


@dataclass(frozen=True)
class Batched:
    """The product, the kernel reading its result ``p``; ``entries`` along the leading axis of
    ``entry`` elements each; the buffers the blocks write."""

    product: object
    reader: object
    p: object
    entries: int
    entry: int
    lead: int  # the product's domain axis of the entries
    written: tuple


def find(planner, kg, units: list, memory, taken: set) -> dict:
    """``{index of the product's unit: Batched}`` for the binding the planner lays out, leaving out
    the units in ``taken`` (another fusion's)."""
    if not planner.choices.blocks:
        return {}
    values = blocked.Values(planner, kg, units)
    found: dict = {}
    for i in range(len(units) - 1):
        if i in taken or i + 1 in taken or i - 1 in found or len(units[i]) != 1 or len(units[i + 1]) != 1:
            continue
        with planner.plain_sizes():
            fused = _fits(planner, units[i][0], units[i + 1][0], values)
        if fused is not None:
            found[i] = fused
            values.claim(fused.written)
            planner.perms.pop(fused.p.id, None)
    return found


def _fits(planner, kp, kc, values) -> Batched | None:
    if kc.kind != "elementwise" or not blocked.library(planner, kp) or len(kp.outputs) != 1:
        return None
    p, e = kp.outputs[0]
    if e.op != "Acc" or p.dtype is not kp.acc_dtype or not values.private(p) or values.readers(p, kp) != {id(kc)}:
        return None
    domain = planner.shape(kp.domain)
    shape = planner.shape(p.shape)
    out_axes = [i for i in range(len(domain)) if i not in kp.axes and domain[i] != 1]  # (size-1 axes: none)
    dims = [n for n in shape if n != 1]
    if dims != [domain[i] for i in out_axes] or len(dims) < 2:
        return None
    entries, entry = int(dims[0]), int(prod(dims[1:]))
    if entries < 2 or entry < 1:
        return None
    item = np.dtype(p.dtype.np).itemsize
    if entries * entry * item < MIN_BYTES or entry * item < MIN_ENTRY_BYTES:
        return None
    if _entry_gemm(planner, kp, out_axes[0]) is None:
        return None
    if planner.shape(kc.domain)[0] != entries or any(
            not blocked.row_major(planner.strides_of(b, planner.shape(b.shape)), planner.shape(b.shape))
            for b, _ in kc.outputs):
        return None
    for b, v in list(kc.inputs) + list(kc.epilogue_inputs):
        if b is p and not _within_entries(v, planner.env, entries, entry):
            return None
    written = tuple(b for b, _ in kc.outputs)
    if not values.claimable(written):
        return None
    return Batched(kp, kc, p, entries, entry, out_axes[0], written)


def _entry_gemm(planner, kp, lead: int):
    """``(plan, strides)``: product ``kp`` for one entry of its domain axis ``lead`` (``gemm.plan_gemm``
    with that axis of size 1) and the element strides along ``lead`` of its operands and its result
    (P stored row-major: fused, it is an entry a block; the GEMM layouts may have permuted it to make
    the whole batch one GEMM, and nothing else reads it); None where a copy would be needed."""
    domain = list(planner.shape(kp.domain))
    out_axes = [i for i in range(len(domain)) if i not in kp.axes]
    out = dict(zip(out_axes, contiguous_strides(tuple(domain[i] for i in out_axes))))
    (ab, av), (bb, bv) = kp.inputs
    if av.mask is not None or bv.mask is not None:
        return None
    a, b = (planner.locate(buf, planner.strided_view(v)) for buf, v in kp.inputs)
    domain[lead] = 1
    one = tuple(domain)
    g = plan_gemm(one, kp.axes, Strided(one, a.strides, a.offset), Strided(one, b.strides, b.offset), out)
    if g.a2 is None or g.b2 is None or g.out2 is None:
        return None
    return g, (a.strides[lead], b.strides[lead], out[lead])


def _within_entries(view, env, entries: int, entry: int) -> bool:
    """Whether ``view`` (over the reading kernel's domain) reads, at each index ``b`` of its leading
    axis, only elements of entry ``b``: its leading stride one entry, its valid part inside it."""
    shape, strides, offset, box = ops.bound_view(view, env)
    if not shape or shape[0] != entries or strides[0] != entry:
        return False
    box = box or tuple((0, n) for n in shape)
    if any(hi <= lo for lo, hi in box):
        return True  # (it reads nothing)
    low = offset + sum(min(lo * s, (hi - 1) * s) for (lo, hi), s in zip(box[1:], strides[1:]))
    high = offset + sum(max(lo * s, (hi - 1) * s) for (lo, hi), s in zip(box[1:], strides[1:]))
    return 0 <= low and high < entry


def blocks(f: Batched, planner, items: int) -> blocked.Blocks:
    """The fused steps of ``f``: per block of entries, each entry's product into the thread's scratch,
    then the reading kernel's ``items`` items per entry (its first grid axis, row-major over its
    leading axis)."""
    dtype = np.dtype(f.p.dtype.np)
    item = dtype.itemsize
    with planner.plain_sizes():
        g, (sa, sb, so) = _entry_gemm(planner, f.product, f.lead)
        a = planner.storage_view(f.product.inputs[0][0], g.a2)
        b = planner.storage_view(f.product.inputs[1][0], g.b2)
    per = max(1, min(f.entries, BLOCK_BYTES // (f.entry * item)))
    work = [(e0, min(f.entries, e0 + per)) for e0 in range(0, f.entries, per)]
    threads = 1 if planner.choices.threads == "blas" else thread_count()
    threads = max(1, min(threads, len(work)))
    scratch = planner.scratch((threads, per * f.entry), dtype)
    parts = []
    for j, (lo, hi) in enumerate(blocked.ranges(len(work), threads)):
        own = scratch.view((per * f.entry,), (1,), j * per * f.entry)
        steps: list = []
        for e0, e1 in work[lo:hi]:
            for e in range(e0, e1):  # (entry e of P, into the scratch after the block's earlier ones)
                result = own.view(g.out2.shape, g.out2.strides, g.out2.offset + (e - e0) * so)
                steps.append(Gemm(_shifted(a, e * sa), _shifted(b, e * sb), result))
            steps.append((0, e0 * items, (e1 - e0) * items, own))
        parts.append(steps)
    return blocked.Blocks(parts, {planner.place(f.p, None).name: 0}, f.entry * item // items)


def _shifted(x: Ref, elements: int) -> Ref:
    """``x`` moved ``elements`` further into its memory."""
    return Ref(x.space, x.shape, x.dtype, x.strides, x.offset + elements * x.itemsize)
