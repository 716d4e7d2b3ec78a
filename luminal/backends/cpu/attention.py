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
  gathered (``gathered.py``); ``choices.blocks`` on;
- ``S`` the first product's only output (just its sum), its value read by nothing but the runs,
  each reader walking it in order (no mask); each run's result likewise, read by the later runs; ``P``
  (the last run's) read by nothing but the second product, as its operand (its epilogue runs after the
  blocks and would find nothing there); all program temps stored row-major (an
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

from luminal.backends.cpu import blocked
from luminal.backends.cpu.parallel import thread_count
from luminal.backends.cpu.steps import Gemm, Ref
from luminal.core.symbolic import prod
from luminal.core.view import contiguous_strides

# The scores and probabilities of a block together take about this much (two scratch regions of half):
# a block stays in a core's L2 between the three steps that touch it.
BLOCK_BYTES = 1 << 18
# Score matrices smaller than this stay unfused. Measured (AMD EPYC, 2 threads, head width 32, fused
# against unfused in one process): 32 kB 0.08 against 0.03 ms (the blocks' calls dominate), 512 kB
# 0.37 against 0.35 ms, 1 MB 0.67 against 0.70 ms, 4 MB 1.7-1.8 against 2.1-2.3 ms.
MIN_BYTES = 1 << 20


@dataclass(frozen=True)
class Attention:
    """The units fused: the scores product, the runs of row kernels (softmax is one; a masked softmax
    may be two: the exponentials, then their sum and quotients), the product with ``v``; the
    buffers moved into scratch (the scores ``S``, each run's result, the last being ``P``); the
    rows (per batch entry) and keys."""

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

    @property
    def p(self):
        """The probabilities: the last run's result."""
        return self.moved[-1]


def find(planner, kg, units: list, memory) -> dict:
    """``{index of the scores product's unit: Attention}`` for the binding the planner lays out."""
    if not planner.choices.blocks:
        return {}
    values = blocked.Values(planner, kg, units)
    found: dict = {}
    i = 0
    while i < len(units):
        j = i + 1
        while j < len(units) and len(units[j]) > 1:  # (a unit of several kernels: a run of row kernels)
            j += 1
        fused = None
        if len(units[i]) == 1 and j > i + 1 and j < len(units) and len(units[j]) == 1:
            with planner.plain_sizes():
                fused = _fits(planner, units[i][0], units[i + 1:j], units[j][0], values)
        if fused is not None:
            found[i] = fused
            values.claim(fused.written)
            i = j + 1
        else:
            i += 1
    return found


def _fits(planner, ks, runs, ko, values) -> Attention | None:
    """The fusion of units ``[ks]``, ``*runs``, ``[ko]``, or None where it does not apply."""
    if not (blocked.library(planner, ks) and blocked.library(planner, ko)) or len(ks.outputs) != 1:
        return None
    s, e = ks.outputs[0]
    if e.op != "Acc" or s.dtype is not ks.acc_dtype or any(len(run[-1].outputs) != 1 for run in runs):
        return None
    moved = [s] + [run[-1].outputs[0][0] for run in runs]
    p = moved[-1]
    domain = planner.shape(runs[0][0].domain)
    whole = tuple(contiguous_strides(domain))
    middle = {id(k) for run in runs for k in run}
    writers = [ks] + [run[-1] for run in runs]

    def kept(b) -> bool:  # (a buffer kept in scratch: of the runs' domain, row-major)
        return values.private(b) and planner.shape(b.shape) == domain and \
            blocked.row_major(planner.strides_of(b, domain), domain)

    if p.dtype is not ko.acc_dtype or values.readers(p, runs[-1][-1]) != {id(ko)} or not all(map(kept, moved)) \
            or any(not values.readers(b, w) or not values.readers(b, w) <= middle for b, w in zip(moved[:-1], writers)):
        return None
    if any(tuple(run[0].axes) != (len(domain) - 1,) or planner.shape(run[0].domain) != domain for run in runs):
        return None
    row_sizes = [n for n in domain[:-1] if n != 1]
    keys = domain[-1]
    for run in runs:
        for k in run:
            for b, v in list(k.inputs) + list(k.epilogue_inputs):
                if b in moved and v.mask is not None:
                    return None
                if b in moved and not _walks_rows(planner.strided_view(v), domain):
                    return None
    # the scores: rows (batch, then M) as the run's, columns the keys (q may be either operand)
    plans = ((x, y, blocked.plan_product(planner, ks, x, y)) for x, y in (ks.inputs, ks.inputs[::-1]))
    q, k, gs = next(((x, y, g) for x, y, g in plans
                     if _rows_match(g, planner.shape(ks.domain), ks.axes, row_sizes, keys)), (None, None, None))
    if q is None:
        return None
    # the product with v: P's rows as the run's, summed over the keys, read row-major
    (b0, v0), (b1, v1) = ko.inputs
    if (b0 is p) == (b1 is p):
        return None
    pin, vin = ((b0, v0), (b1, v1)) if b0 is p else ((b1, v1), (b0, v0))
    if any(b is p for b, _ in ko.epilogue_inputs):
        return None  # (P read after the product, by its epilogue: it must be in memory)
    go = blocked.plan_product(planner, ko, pin, vin)
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
    if not values.claimable(written):
        return None
    return Attention(ks, tuple(runs), ko, tuple(moved), q, k, vin, int(rows), int(gs.M), int(keys), tuple(written))


def _walks_rows(view, domain) -> bool:
    """Whether a strided view over the runs' ``domain`` reads a row-major buffer of it in order."""
    return view.offset == 0 and blocked.row_major(view.strides, domain)


def _rows_match(g, domain, axes, row_sizes: list, columns: int) -> bool:
    """Whether there is a plan ``g`` and its result rows are the run's rows in order (its batch axes, then its M axes,
    the output's leading axes) and its columns ``columns`` elements of the output's trailing axes."""
    if g is None:
        return False
    out_axes = [a for a in range(len(domain)) if a not in axes and domain[a] != 1]
    rows = list(g.batch) + list(g.m)
    return g.N == columns and rows == out_axes[:len(rows)] and list(g.n) == out_axes[len(rows):] and \
        [domain[a] for a in rows] == row_sizes


def blocks(f: Attention, planner, flat, ostr) -> blocked.Blocks:
    """The fused steps of ``f``, the result of its second product into ``flat`` (element strides
    ``ostr`` over its output shape: ``lowering._accumulator``)."""
    dtype = np.dtype(f.p.dtype.np)
    item, m, regions = dtype.itemsize, f.per, len(f.moved)
    with planner.plain_sizes():
        gs = blocked.plan_product(planner, f.scores, f.q, f.k)
        go = blocked.plan_product(planner, f.out, next(x for x in f.out.inputs if x[0] is f.p), f.v, out_strides=ostr)
        q, k = planner.storage_view(f.q[0], gs.a2), planner.storage_view(f.k[0], gs.b2)
        v, o = planner.storage_view(f.v[0], go.b2), planner.over(flat, go.out2)
    per = max(1, min(m, BLOCK_BYTES // (regions * f.keys * item)))
    row_bytes = f.keys * item
    threads = 1 if planner.choices.threads == "blas" else thread_count()
    work = [(t, r0, min(m, r0 + per)) for t in range(f.rows // m) for r0 in range(0, m, per)]
    threads = max(1, min(threads, len(work)))
    size = regions * per * f.keys
    scratch = planner.scratch((threads, size), dtype)  # per thread: a block of each moved buffer
    parts = []
    for j, (lo, hi) in enumerate(blocked.ranges(len(work), threads)):
        own = scratch.view((size,), (1,), j * size)
        steps: list = []
        for t, r0, r1 in work[lo:hi]:
            at_s = np.unravel_index(t, gs.bshape) if gs.bshape else ()
            at_o = np.unravel_index(t, go.bshape) if go.bshape else ()
            n = r1 - r0

            def block(i):  # rows r0:r1 of moved buffer i, in the scratch
                return Ref(own.space, (n, f.keys), dtype, (row_bytes, item), own.offset + i * per * row_bytes)

            steps += [Gemm(blocked.rows(q, at_s, r0, r1), blocked.matrix(k, at_s), block(0)),
                      *((r, t * m + r0, n, own) for r in range(len(f.runs))),
                      Gemm(block(regions - 1), blocked.matrix(v, at_o), blocked.rows(o, at_o, r0, r1))]
        parts.append(steps)
    moved = {planner.place(b, None).name: i * per * row_bytes for i, b in enumerate(f.moved)}
    return blocked.Blocks(parts, moved, row_bytes)
