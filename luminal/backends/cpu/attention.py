"""Fused attention: ``softmax(q @ k^T) @ v`` run a block of query rows at a time, the scores and the
probabilities of a block in a scratch the cache holds, never the whole score matrix in memory.

Attention reaches the kernel graph as three units or more: a product making the scores ``S``
(``q @ k^T``, any scale or mask applied before or inside the softmax), runs of row kernels making the
probabilities ``P`` from them (``codegen/lowering/rows.py``: the row's max, the sum of exponentials,
then ``P``; a mask read through its own view), and a product of ``P`` with ``v``. Run kernel by
kernel, ``S`` and ``P`` (``rows x keys`` each: 4 MB for a batch of 8 sequences of 128 tokens over 8
heads) are each written to memory and read back. Fused, each thread takes blocks of :data:`BLOCK_BYTES`
worth of rows of one batch entry (a head of a sequence) and runs, per block: the scores product for
the block's rows into its scratch, the row kernel over those rows, and the product of the block's
probabilities with ``v`` into the result. The same kernels compute the same values in the same order
per row: only where ``S`` and ``P`` live changes.

How: the row kernel is generated with one grid axis over the rows (``rows.lower``'s ``flat_rows``),
so a call's item range is a block. Its code addresses ``S`` and ``P`` in their full row-major
layouts; a block's call gets pointers to them shifted so that its rows land in the thread's scratch
(the block's first row at the scratch's start). The products are ``Gemm`` steps over the block's
rows (the driver calls BLAS or the generated GEMM, as for any product).

When it applies (:func:`find`), for one binding of the dims:

- consecutive units: a product, runs of row kernels, a product; the products lowered as
  library products (BLAS-ready operands, no copies: ``gemm.plan_gemm``), float32 or float64, not
  gathered (``gathered.py``); ``choices.attention`` on;
- ``S`` the first product's only output (just its sum), its value read by nothing but the runs,
  each reader walking it in order (no mask); each run's result likewise, read by the later runs; ``P``
  (the last run's) read by nothing but the second product; all program temps stored row-major (an
  axis of size 1 anywhere), not a pack's part, not an output, not a state written in place (a rolled
  body's scratch is fine: each call's values are looked at apart);
- the runs' rows are the first product's rows: its columns (the keys) the runs' reduced axis, its
  batch and M axes the runs' row axes in order; the second product sums over the keys, its rows the
  same (its other operand ``v``: its N axes, the result's last);
- the score matrix is :data:`MIN_BYTES` or more (the cost model: below, it stays in the cache
  anyway and the blocks' extra calls cost more than they save).

The memory plan still reserves ``S`` and ``P`` (it is made before the schedule); nothing reads or
writes them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from luminal.backends.cpu.gemm import plan_gemm
from luminal.backends.cpu.parallel import Split, thread_count
from luminal.backends.cpu.steps import Gemm, Kernel, Ref
from luminal.core import dtype as dt
from luminal.core.symbolic import prod
from luminal.core.view import contiguous_strides

# The scores and probabilities of a block together take about this much (two scratch regions of half):
# a block stays in a core's L2 between the three steps that touch it.
BLOCK_BYTES = 1 << 18
# Score matrices smaller than this stay unfused (measured: see bench/README.md's attention rows).
MIN_BYTES = 1 << 20


@dataclass(frozen=True)
class Attention:
    """The units fused: the scores product, the runs of row kernels (softmax is one; a masked softmax
    may be two: the exponentials, then their sum and quotients), the product with ``v``; the
    buffers moved into scratch (the scores ``S``, each run's result, the last being ``P``); the
    rows (per batch entry) and keys."""

    @property
    def p(self):
        return self.moved[-1]


    scores: object
    runs: tuple  # the runs of row kernels, in order
    out: object
    moved: tuple  # the full-size buffers the blocks keep in scratch: the scores, each run's result
    q: tuple  # (buffer, view): the scores product's operand whose rows are the run's rows
    k: tuple  # its other operand (the keys)
    v: tuple  # the second product's operand other than the probabilities
    rows: int  # all rows (every batch entry's)
    per: int  # rows per batch entry (each product's M)
    keys: int
    written: tuple  # the buffers the blocks write (each given a storage of its own: see find)


def find(planner, kg, units: list, memory) -> dict:
    """``{index of the scores product's unit: Attention}`` for the binding the planner lays out."""
    if not planner.choices.attention:
        return {}
    ends = {b.id for b, _ in kg.outputs} | {b.id for _, b, _ in kg.updates}
    # (a rolled body's scratch is written by each of its calls: a value's readers are those between its
    # write and the buffer's next one)
    order = [k for u in units for k in u]
    reads: dict = {}
    writes: dict = {}
    for at, k in enumerate(order):
        for b, _ in list(k.inputs) + list(k.epilogue_inputs):
            reads.setdefault(b.id, []).append(at)
        for b, _ in k.outputs:
            writes.setdefault(b.id, []).append(at)
    where = {id(k): at for at, k in enumerate(order)}

    def readers(b, writer) -> set:
        """The kernels reading the value kernel ``writer`` writes into ``b``."""
        w = where[id(writer)]
        until = min((x for x in writes.get(b.id, ()) if x > w), default=len(order))
        return {id(order[r]) for r in reads.get(b.id, ()) if w < r < until}

    def private(buf) -> bool:  # a temp of the program's own that only this fusion touches
        return buf.kind == "temp" and buf.base is None and buf.id not in ends and buf.id not in planner.alias \
            and buf.dtype in (dt.float32, dt.float64)

    # The memory plan, made for the kernels one after another, may give a buffer the blocks write (a
    # row's max, the result) the storage of one they read until the last block (q): each written
    # buffer gets a storage of its own. What they read is live together in the plan (every read
    # buffer is made before the first unit), and S and P, which they no longer touch, are left as
    # they are.
    found: dict = {}
    i = 0
    while i < len(units):
        j = i + 1
        while j < len(units) and len(units[j]) > 1:  # (a unit of several kernels: a run of row kernels)
            j += 1
        fused = None
        if len(units[i]) == 1 and j > i + 1 and j < len(units) and len(units[j]) == 1:
            with planner.plain_sizes():
                fused = _fits(planner, units[i][0], units[i + 1:j], units[j][0], readers, private)
        if fused is not None:
            found[i] = fused
            for buf in fused.written:
                planner.own_storage(buf)
            i = j + 1
        else:
            i += 1
    return found


def _library(planner, k) -> bool:
    return k.kind == "matmul" and id(k) not in planner.gathered and len(k.inputs) == 2 and \
        k.acc_dtype in (dt.float32, dt.float64) and planner.library_product(k)


def _fits(planner, ks, runs, ko, readers, private) -> Attention | None:
    """The fusion of units ``[ks]``, ``*runs``, ``[ko]``, or None where it does not apply."""
    if not (_library(planner, ks) and _library(planner, ko)) or len(ks.outputs) != 1:
        return None
    s, e = ks.outputs[0]
    if e.op != "Acc" or s.dtype is not ks.acc_dtype or any(len(run[-1].outputs) != 1 for run in runs):
        return None
    moved = [s] + [run[-1].outputs[0][0] for run in runs]
    p = moved[-1]
    domain = planner.shape(runs[0][0].domain)
    whole = tuple(contiguous_strides(domain))
    middle = {id(k) for run in runs for k in run}
    def row_major(strides) -> bool:  # (a layout may place an axis of size 1 anywhere)
        return all(a == b for a, b, n in zip(strides, whole, domain) if n != 1)

    writers = [ks] + [run[-1] for run in runs]
    if p.dtype is not ko.acc_dtype or readers(p, runs[-1][-1]) != {id(ko)} or any(
            not private(b) or planner.shape(b.shape) != domain or not row_major(planner.strides_of(b, domain))
            for b in moved) or any(not readers(b, w) or not readers(b, w) <= middle
                                   for b, w in zip(moved[:-1], writers)):
        return None
    if any(tuple(run[0].axes) != (len(domain) - 1,) or planner.shape(run[0].domain) != domain for run in runs):
        return None
    row_sizes = [n for n in domain[:-1] if n != 1]
    keys = domain[-1]
    for run in runs:
        for k in run:
            for b, v in list(k.inputs) + list(k.epilogue_inputs):
                if b in moved and (v.mask is not None or not row_major(planner.strided_view(v).strides)
                                   or planner.strided_view(v).offset != 0):
                    return None
    # the scores: rows (batch, then M) as the run's, columns the keys (q may be either operand)
    q, k = next(((x, y) for x, y in (ks.inputs, ks.inputs[::-1])
                 if _rows_match(_plan(planner, ks, x, y), planner.shape(ks.domain), ks.axes, row_sizes, keys)),
                (None, None))
    if q is None:
        return None
    gs = _plan(planner, ks, q, k)
    # the product with v: P's rows as the run's, summed over the keys, read row-major
    (b0, v0), (b1, v1) = ko.inputs
    if (b0 is p) == (b1 is p):
        return None
    pin, vin = ((b0, v0), (b1, v1)) if b0 is p else ((b1, v1), (b0, v0))
    go = _plan(planner, ko, pin, vin)
    o_domain = planner.shape(ko.domain)
    if go is None or go.K != keys or len(go.k) != 1 or go.M != gs.M or \
            not _rows_match(go, o_domain, ko.axes, row_sizes, go.N):
        return None
    pv = planner.strided_view(pin[1])
    rows_o = [a for a in range(len(o_domain)) if a not in ko.axes and a not in go.n and o_domain[a] != 1]
    rows_p = [a for a in range(len(domain) - 1) if domain[a] != 1]
    if pv.offset != 0 or pv.strides[go.k[0]] != 1 or any(pv.strides[a] != 0 for a in go.n) or \
            [pv.strides[a] for a in rows_o] != [whole[a] for a in rows_p]:
        return None
    rows = prod(domain[:-1])
    if rows * keys * np.dtype(p.dtype.np).itemsize < MIN_BYTES:
        return None
    # what the blocks write while what they read is live: the run's per-row results and the product
    written = [b for run in runs for k in run[:-1] for b, _ in k.outputs] + \
        [b for b, e in ko.outputs if e.op == "Acc" and b.dtype is ko.acc_dtype][:1]
    if any(b.kind != "temp" or b.base is not None or b.id in planner.alias for b in written):
        return None
    return Attention(ks, tuple(runs), ko, tuple(moved), q, k, vin, int(rows), int(gs.M), int(keys), tuple(written))


def _plan(planner, k, first, second, out_strides=None):
    """``gemm.plan_gemm`` of product ``k`` with ``first`` as its left operand (its rows the result's),
    None where an operand or the result would need a copy."""
    domain = planner.shape(k.domain)
    (fb, fv), (sb, sv) = first, second
    if fv.mask is not None or sv.mask is not None:
        return None
    fs, ss = planner.locate(fb, planner.strided_view(fv)), planner.locate(sb, planner.strided_view(sv))
    out_axes = [i for i in range(len(domain)) if i not in k.axes]
    if out_strides is None:
        out_strides = planner.product_strides(k, tuple(domain[i] for i in out_axes))
    g = plan_gemm(domain, k.axes, fs, ss, dict(zip(out_axes, map(int, out_strides))))
    return None if g.a2 is None or g.b2 is None or g.out2 is None else g


def _rows_match(g, domain, axes, row_sizes: list, columns: int) -> bool:
    """Whether there is a plan ``g`` and its result rows are the run's rows in order (its batch axes, then its M axes,
    the output's leading axes) and its columns ``columns`` elements of the output's trailing axes."""
    if g is None:
        return False
    out_axes = [a for a in range(len(domain)) if a not in axes and domain[a] != 1]
    rows = list(g.batch) + list(g.m)
    return g.N == columns and rows == out_axes[:len(rows)] and list(g.n) == out_axes[len(rows):] and \
        [domain[a] for a in rows] == row_sizes


@dataclass(eq=False)
class Blocks:
    """The fused steps before the row kernels are compiled: per thread, the steps of its blocks, each
    block's call of run ``r``'s kernel a ``(r, first row, rows, the thread's scratch)`` that
    :meth:`finish` makes."""

    parts: list
    moved: dict  # the IR name of each buffer kept in scratch -> (where it starts in its storage, bytes,
    #              where its block starts in a thread's scratch, bytes)
    row_bytes: int  # one row of each

    @property
    def steps(self) -> list:
        """The products (what ``driver.companions`` reads to compile their GEMMs beside the kernels)."""
        return [x for part in self.parts for x in part if isinstance(x, Gemm)]

    def finish(self, kernels: list) -> list:
        """The steps with the row kernels' calls made (``kernels``: per run, its compiled call over
        every row and the IR names of its buffers): one part per thread, a :class:`Split` where there
        are several. A block's call sees each moved buffer where the block's rows are in the thread's
        scratch: the code indexes row ``r`` at ``start + r * row_bytes``, so the buffer is passed
        ``first row * row_bytes`` before its block's place in the scratch."""
        parts = []
        for part in self.parts:
            steps = []
            for x in part:
                if isinstance(x, tuple):
                    r, lo, n, own = x
                    whole, names = kernels[r]
                    before = lo * self.row_bytes
                    at = {name: (own.space, own.offset + region - before - start)
                          for name, (start, region) in self.moved.items()}
                    x = Kernel(whole.function, tuple(at.get(name, src) for name, src in zip(names, whole.buffers)),
                               whole.params, lo, lo + n, whole.kernel)
                steps.append(x)
            parts.append(steps)
        return [Split(parts)] if len(parts) > 1 else parts[0]


def blocks(f: Attention, planner, flat, ostr) -> Blocks:
    """The fused steps of ``f``, the result of its second product into ``flat`` (element strides
    ``ostr`` over its output shape: ``lowering._accumulator``)."""
    dtype = np.dtype(f.p.dtype.np)
    item, m, regions = dtype.itemsize, f.per, len(f.moved)
    with planner.plain_sizes():
        gs = _plan(planner, f.scores, f.q, f.k)
        go = _plan(planner, f.out, next(x for x in f.out.inputs if x[0] is f.p), f.v, out_strides=ostr)
        q, k = planner.storage_view(f.q[0], gs.a2), planner.storage_view(f.k[0], gs.b2)
        v, o = planner.storage_view(f.v[0], go.b2), planner.over(flat, go.out2)
    per = max(1, min(m, BLOCK_BYTES // (regions * f.keys * item)))
    row_bytes = f.keys * item
    threads = 1 if planner.choices.threads == "blas" else thread_count()
    work = [(t, r0, min(m, r0 + per)) for t in range(f.rows // m) for r0 in range(0, m, per)]
    threads = max(1, min(threads, len(work)))
    size = regions * per * f.keys
    scratch = planner.scratch((threads, size), dtype)  # per thread: a block of each moved buffer
    bounds = [len(work) * i // threads for i in range(threads + 1)]
    parts = []
    for j in range(threads):
        own = scratch.view((size,), (1,), j * size)
        steps: list = []
        for t, r0, r1 in work[bounds[j]:bounds[j + 1]]:
            at_s = np.unravel_index(t, gs.bshape) if gs.bshape else ()
            at_o = np.unravel_index(t, go.bshape) if go.bshape else ()
            n = r1 - r0

            def block(i):  # rows r0:r1 of moved buffer i, in the scratch
                return Ref(own.space, (n, f.keys), dtype, (row_bytes, item), own.offset + i * per * row_bytes)

            steps += [Gemm(_rows(q, at_s, r0, r1), _batch(k, at_s), block(0)),
                      *((r, t * m + r0, n, own) for r in range(len(f.runs))),
                      Gemm(block(regions - 1), _batch(v, at_o), _rows(o, at_o, r0, r1))]
        parts.append(steps)
    moved = {planner.place(b, None).name: (planner.storage(b, planner.shape(b.shape))[0].offset, i * per * row_bytes)
             for i, b in enumerate(f.moved)}
    return Blocks(parts, moved, row_bytes)


def _batch(x: Ref, at) -> Ref:
    """Matrix ``at`` of a batch of matrices (``x``: batch axes, then two)."""
    offset = x.offset + sum(int(i) * st for i, st in zip(at, x.strides))
    return Ref(x.space, x.shape[-2:], x.dtype, x.strides[-2:], offset)


def _rows(x: Ref, at, r0: int, r1: int) -> Ref:
    """Rows ``r0:r1`` of matrix ``at`` of a batch of matrices."""
    return _batch(x, at).rows(0, r0, r1)
