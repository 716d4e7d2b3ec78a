"""Gathered products: a product that reads an expanding copy is run on the copy's source instead, and
the copy is not made (the planner's side of ``gathered_gemm.py``).

A convolution is an im2col copy (an elementwise kernel writing a view of the padded image, each
element ``kh * kw`` times) and products of it: the forward one and the weight gradient. The copy
writes tens of megabytes that both products then stream back from memory. Where every reader of
the copy is a product that can read the source through the copy's view, each such product becomes
one gathered GEMM (``gathered_gemm.py``) reading the source, and the copy kernel is skipped.

When it applies (:func:`find`), for one binding of the dims:

- the copy kernel only copies a view of one buffer (``kernel_graph.copy_source``) into more than
  twice its elements (the memory plan keeps such a source alive as long as the copy:
  ``compiler/memory.py``); the copy a program temp, neither an output nor read by anything but
  products, float32 or float64; the source a program input or temp (not a rolled body's scratch,
  not stored permuted, not written in place); ``choices.gemm`` not "blas";
- the memory plan gives a temp source's storage to no buffer written between the copy and its last
  reader, by any of its writes (checked, not assumed: a cached plan may predate the rule);
- no product of the copy gathers from another copy already (of a product reading two, one is made);
- each product reads the copy as one operand, unmasked, and through the composition of the two
  views every axis of the product splits into axes of the copy's domain (:func:`_split`), no two
  of them into the same one (a window sliding over the flat copy carries across them); its M
  axes merge in the other operand and in the result, its N axes make the result's rows contiguous
  (or do after the outermost is taken as a batch: one product per image), its batch axes merge into
  one, and at most three sub-axes remain along k and along n after merging those laid out one after
  another; the source's offsets fit 32 bits; no axis is an output broadcast (neither operand moves);
  it has :data:`MIN_ROWS` rows or more, or runs as a direct convolution (the cost model).

Otherwise the copy is made and its products are GEMMs as before, but for those that run as a
direct convolution (``direct_conv.py``: it packs nothing of the source, so reading the source beats
reading the copy whenever it applies). A product whose work is long
enough is cut over the threads by its panels of columns, like a generated kernel's items.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from luminal.backends.cpu import direct_conv, gathered_gemm
from luminal.backends.cpu.gemm import Strided
from luminal.backends.cpu.parallel import NS_PER_MAC, Split, item_ranges, thread_count
from luminal.backends.cpu.steps import Kernel, Library
from luminal.core import dtype as dt
from luminal.core.kernel_graph import copy_source
from luminal.core.symbolic import prod

# Gathering packs each column of B from its runs in the source: a few masked loads per vector, which
# only products with enough rows to multiply each packed element by repay (a product the direct
# convolution computes packs nothing of the source, and gathers with any number of rows). Measured on the MNIST
# CNN (AMD EPYC, one thread): its second convolution's products (32 rows) 57-63 GFLOP/s gathered,
# faster than the copy and the generated GEMM together; its first's (16 rows) 28-34 GFLOP/s, 5.2 ms
# against 2.6 ms for the copy and BLAS.
MIN_ROWS = 32


@dataclass(frozen=True)
class Gathered:
    """One product as a gathered GEMM: the operand views of its sub-axes (sizes, then element strides
    along the other operand A, the source B and the result C) and the buffers behind them."""

    m: int
    sam: int  # A's stride along M (0 when M is 1)
    ldc: int  # C's stride along M
    ks: tuple  # ((size, A stride, B stride), ...), outer first
    ns: tuple  # ((size, B stride), ...), outer first: C's columns, contiguous
    batch: tuple  # (products, A stride, B stride, C stride) between the products of a batch
    a: tuple  # (buffer, Strided view of its storage over (batch, M, *k sizes)) of the other operand
    b: tuple  # (source buffer, Strided view of its storage over (batch, *k sizes, *n sizes))
    strides: tuple  # the result's element strides over the product's output shape (checked at lowering)


def find(planner, kg, kernels, memory) -> tuple[dict, set]:
    """``({id(product kernel): Gathered}, {id(copy kernel)})``: the products that gather and the
    copies they make unneeded, for the planner's binding."""
    if planner.choices.gemm == "blas":
        return {}, set()
    ends = {b.id for b, _ in kg.outputs} | {b.id for _, b, _ in kg.updates}
    writes: dict = {}  # buffer id -> the indices of the kernels writing it (a pack's parts: the pack's)
    readers: dict = {}
    for i, k in enumerate(kernels):
        for b, _ in k.outputs:
            writes.setdefault(b.id if b.base is None else b.base.id, []).append(i)
        for b, _ in list(k.inputs) + list(k.epilogue_inputs):
            readers.setdefault(b.id, []).append((i, k))
    body_scratch = set(memory.calls)
    products: dict = {}
    copies: set = set()
    for i, e in enumerate(kernels):
        src = copy_source(e)
        if src is None:
            continue
        x, (y, yview) = e.outputs[0][0], src
        if x.kind != "temp" or y.kind not in ("temp", "input") or x.id in ends or x.base is not None \
                or y.base is not None or x.id in body_scratch or y.id in body_scratch or y.id in planner.perms \
                or y.id in planner.alias or x.dtype not in (dt.float32, dt.float64) or yview.mask is not None:
            continue
        users = readers.get(x.id, [])
        if not users or any(id(k) in products for _, k in users):
            continue  # (a product reading two copies gathers from one: the other is made)
        with planner.plain_sizes():
            if prod(planner.shape(x.shape)) <= 2 * prod(planner.shape(y.shape)):
                continue
            plans = [_plan(planner, k, e, x) for _, k in users]
        if any(p is None for p in plans):  # the copy is made: a product it suits runs direct all the same
            plans = [p if p is not None and planner.choices.direct and _direct(p, prod(s for s, *_ in p.ks),
                                                                                np.dtype(x.dtype.np)) else None
                     for p in plans]
            if all(p is None for p in plans):
                continue
        taken = [(j, k, p) for (j, k), p in zip(users, plans) if p is not None]
        if y.kind == "temp" and not _kept(memory, writes, y, i, max(j for j, _, _ in taken)):
            continue
        products.update((id(k), p) for _, k, p in taken)
        if len(taken) == len(users):
            copies.add(id(e))
    return products, copies


def _kept(memory, writes: dict, y, copy_at: int, last: int) -> bool:
    """Whether no buffer sharing ``y``'s storage is written after the copy, up to its last reader
    (``writes``: buffer id -> the indices of every kernel writing it: a rolled body's scratch is
    written by each call, a pack by its parts)."""
    slot = memory.slot_of.get(y.id)
    if slot is None:
        return False
    return not any(z.id != y.id and any(copy_at < w <= last for w in writes.get(z.id, ()))
                   for z in memory.slots[slot])


def _plan(planner, k, e, x) -> Gathered | None:
    """Product ``k`` reading copy ``x`` (made by ``e``) as a gathered GEMM, or None where it cannot."""
    if k.kind != "matmul" or k.acc_dtype is not x.dtype or len(k.inputs) != 2 \
            or any(v.mask is not None for _, v in k.inputs) or any(b is x for b, _ in k.epilogue_inputs):
        return None
    (b0, v0), (b1, v1) = k.inputs
    if (b0 is x) == (b1 is x):
        return None
    (obuf, oview), xview = ((b1, v1), v0) if b0 is x else ((b0, v0), v1)
    if obuf.dtype is not x.dtype:
        return None
    domain = planner.shape(k.domain)
    xs = planner.strided_view(xview)
    if xs.offset != 0:
        return None
    os_ = planner.locate(obuf, planner.strided_view(oview))  # (the storage's strides: Gathered.a is of it)
    e_domain = planner.shape(e.domain)
    if prod(e_domain) != prod(planner.shape(x.shape)):
        return None
    yshape, ystrides, yoffset, box = planner.bound(e.inputs[0][1])
    if box is not None or tuple(yshape) != tuple(e_domain):
        return None
    out_axes = [i for i in range(len(domain)) if i not in k.axes]
    cstride = dict(zip(out_axes, planner.product_strides(k, tuple(domain[i] for i in out_axes))))
    ks, ns, ms, batch = [], [], [], []
    digits: set = set()  # the copy's domain axes the product's axes walk: each at most once
    for i, d in enumerate(domain):
        if d == 1:
            continue
        sx, so = xs.strides[i], os_.strides[i]
        if sx == 0:
            if so == 0 or i in k.axes:
                return None  # an output broadcast (neither moves), or a sum along which the copy does not move
            ms.append((d, so, cstride[i]))
            continue
        found = _split(d, sx, e_domain, ystrides)
        if found is None or digits & set(found[1]):
            return None
        sub, used = found
        digits |= set(used)
        inner = [prod(s for s, _ in sub[j + 1:]) for j in range(len(sub))]
        if i in k.axes:
            ks += [(s, so * n, ys) for (s, ys), n in zip(sub, inner)]
        elif so == 0:
            ns += [(s, ys, cstride[i] * n) for (s, ys), n in zip(sub, inner)]
        else:  # both move: a batch of products
            batch += [(s, so * n, ys, cstride[i] * n) for (s, ys), n in zip(sub, inner)]
    m = _merged(sorted(ms, key=lambda t: -t[1]))
    if m is None:
        return None
    msize, sam, ldc = m
    ns.sort(key=lambda t: -t[2])
    if [c for _, _, c in ns] != list(_contiguous([s for s, _, _ in ns])) and ns and not batch:
        batch, ns = [(ns[0][0], 0, ns[0][1], ns[0][2])], ns[1:]  # the outermost columns as the batch
    if [c for _, _, c in ns] != list(_contiguous([s for s, _, _ in ns])):
        return None  # the result's columns are not one contiguous run
    batch = _merge_runs(sorted(batch, key=lambda t: -abs(t[3])))
    ks = _merge_runs(sorted(ks, key=lambda t: -abs(t[2])))
    nsub = _merge_runs([(s, by) for s, by, _ in ns])
    if len(batch) > 1 or len(ks) > gathered_gemm.AXES or len(nsub) > gathered_gemm.AXES:
        return None
    nb, asb, bsb, csb = batch[0] if batch else (1, 0, 0, 0)
    ksz, nsz = tuple(s for s, *_ in ks), tuple(s for s, _ in nsub)
    bview = Strided((nb, *ksz, *nsz), (bsb, *(t[2] for t in ks), *(t[1] for t in nsub)), yoffset)
    if yoffset + sum((s - 1) * abs(st) for s, st in zip(bview.shape, bview.strides)) >= 2 ** 31 or \
            min(bview.strides, default=0) < 0:
        return None
    aview = Strided((nb, msize, *ksz), (asb, sam, *(t[1] for t in ks)), os_.offset)
    found = Gathered(msize, sam, ldc, tuple(ks), tuple(nsub), (nb, asb, bsb, csb), (obuf, aview),
                     (e.inputs[0][0], bview), tuple(cstride[i] for i in out_axes))
    if msize < MIN_ROWS and not (planner.choices.direct and _direct(found, prod(ksz), np.dtype(x.dtype.np))):
        return None  # (the direct kernel packs no image: any number of rows pays)
    return found


def _split(d: int, stride: int, dims: tuple, strides: tuple) -> tuple | None:
    """An axis of ``d`` elements ``stride`` apart in the copy (its flat, row-major order over the copy
    kernel's domain ``dims``) as the run of the domain's axes it spans: ``([(size, stride in the
    source)], [those axes])`` (axes of size 1 left out), or None where it spans no whole run of them.
    (Two of the product's axes on the same axis of the domain, a window sliding over the copy, carry
    from one into the next: the caller refuses them.)"""
    inner = 1
    for q in range(len(dims) - 1, -1, -1):
        if inner == stride and dims[q] != 1:
            break
        inner *= dims[q]
        if inner > stride:
            return None
    else:
        return None
    span, run = 1, []
    for j in range(q, -1, -1):
        span *= dims[j]
        run.append(j)
        if span >= d:
            break
    if span != d:
        return None
    used = [j for j in reversed(run) if dims[j] != 1]
    return [(dims[j], strides[j]) for j in used], used


def _contiguous(sizes: list):
    """Row-major strides of ``sizes``."""
    out, step = [], 1
    for s in reversed(sizes):
        out.append(step)
        step *= s
    return reversed(out)


def _merged(axes: list):
    """``(size, *strides)`` of axes (outer first) laid out one after another in every stride (no axes:
    one element), or None."""
    if not axes:
        return (1, 0, 0)
    size, *strides = axes[0]
    for s, *st in axes[1:]:
        if any(a != b * s for a, b in zip(strides, st)):
            return None
        size, strides = size * s, st
    return (size, *strides)


def _merge_runs(axes: list) -> list:
    """``axes`` (``(size, *strides)``, outer first) with neighbours laid out one after another in every
    stride merged into one."""
    out: list = []
    for ax in axes:
        if out and all(a == b * ax[0] for a, b in zip(out[-1][1:], ax[1:])):
            out[-1] = (out[-1][0] * ax[0], *ax[1:])
        else:
            out.append(tuple(ax))
    return out


def _direct(plan: Gathered, k: int, dtype) -> tuple | None:
    """How ``plan`` runs as a direct convolution (``direct_conv.py``), or None where it does not: its
    columns' innermost sub-axis must be unit-stride in the source. ``("rows", R, nv)``: blocks of R
    columns (an output row of a forward product), where every product of a batch has the same A (it
    is packed once per call); else ``("windows", rows, cols, sub, nv)``: windows of the two innermost
    column sub-axes (a weight gradient's taps), ``sub`` of their rows an item, A^T packed per block of k."""
    if not plan.ns or plan.ns[-1][1] != 1:
        return None
    if plan.batch[0] == 1 or plan.batch[1] == 0:
        found = direct_conv.shape(plan.m, k, plan.ns[-1][0], dtype)
        if found is not None:
            return ("rows", *found)
    rows, cols = (plan.ns[-2][0] if len(plan.ns) > 1 else 1), plan.ns[-1][0]
    found = direct_conv.window_shape(plan.m, rows, cols, dtype)
    return None if found is None else ("windows", rows, cols, *found)


def lower(k, plan: Gathered, planner, flat, strides) -> None:
    """Append product ``k``'s gathered GEMM to the planner's steps, its result into ``flat`` (the
    storage ``lowering._accumulator`` gave it, with element ``strides``): one kernel call over its
    panels of columns, or a direct convolution's over its blocks of columns or windows of taps
    where that applies and ``choices.direct`` (the cost model: faster wherever it applies,
    ``direct_conv.py``), cut over the threads where the product is long enough."""
    assert tuple(map(int, strides)) == plan.strides, "the result's layout changed since the plan"
    dtype = np.dtype(k.acc_dtype.np)
    item = dtype.itemsize
    a = planner.storage_view(*plan.a)
    b = planner.storage_view(*plan.b)
    n = prod(s for s, _ in plan.ns)
    kk = prod(s for s, *_ in plan.ks)
    nb, asb, bsb, csb = plan.batch
    nr, nc = gathered_gemm.columns(dtype)
    threads = 1 if planner.choices.threads == "blas" else thread_count()
    cols = min(nc, max(1, -(-n // (threads * nr))) * nr)  # (a panel per thread where N is short)
    items = nb * -(-n // cols)
    ks = [(1, 0, 0)] * (gathered_gemm.AXES - len(plan.ks)) + list(plan.ks)
    ns = [(1, 0)] * (gathered_gemm.AXES - len(plan.ns)) + list(plan.ns)
    values = {"m": plan.m, "n": n, "k": kk, "a_off": a.offset // item, "sam": plan.sam,
              "b_off": b.offset // item, "c_off": flat.offset // item, "ldc": plan.ldc, "cols": cols,
              "batches": nb, "asb": asb, "bsb": bsb, "csb": csb}
    for i, (s, sa, sb) in enumerate(ks):
        values[f"kd{i}"], values[f"ak{i}"], values[f"bk{i}"] = s, sa, sb
    for i, (s, sb) in enumerate(ns):
        values[f"nd{i}"], values[f"bn{i}"] = s, sb
    params = tuple(int(values[p]) for p in gathered_gemm.PARAMS)
    direct = _direct(plan, kk, dtype) if planner.choices.direct else None
    if direct is not None and direct[0] == "rows":  # (direct_conv.py: a block of R columns an item)
        library, items = Library(direct_conv.module(dtype.name, *direct[1:])), nb * (n // direct[1])
    elif direct is not None:  # (``sub`` rows of a window of taps for a pass of channels an item)
        _, rows, cols, sub, nv = direct
        passes = -(-plan.m // (nv * direct_conv.generated_gemm._shape(dtype).w))
        library, items = Library(direct_conv.window_module(dtype.name, rows, cols, nv, sub)), \
            nb * passes * (n // (sub * cols))
    else:
        library = Library(gathered_gemm.module(dtype.name))
    planner.direct += direct is not None
    step = Kernel(library, ((a.space, 0), (b.space, 0), (flat.space, 0)), params, 0, items)  # (compiled: plan._link)
    ranges = item_ranges(items, nb * plan.m * n * kk * NS_PER_MAC, threads, planner.split_ns)
    if len(ranges) > 1:  # (cut like a generated kernel: plan._link)
        planner.steps.append(Split([[step.with_range(lo, hi)] for lo, hi in ranges]))
        planner.own_threads = True
    else:
        planner.steps.append(step)
