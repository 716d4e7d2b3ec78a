"""Steps run a block at a time, their intermediates in a per-thread scratch the cache holds: the
mechanism the planner's fusions share (``attention.py``: an attention a block of query rows at a
time; ``batched.py``: a product and the kernel reading it an image at a time).

A fusion interleaves kernels the memory plan saw one after another. So what the blocks read must be
live together (it is: every buffer they read is made before their first kernel), every buffer they
write gets a storage of its own (:func:`Values.claim`), and the intermediates they keep in scratch are
not touched at all: a generated kernel's code addresses such a buffer in its full layout, and a
block's call gets a pointer to it shifted so that the block's items land at the thread's scratch
(:meth:`Blocks.finish`). The products are ``Gemm`` steps over the block's part of each operand.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass

from luminal.backends.cpu.gemm import plan_gemm
from luminal.backends.cpu.parallel import Split
from luminal.backends.cpu.steps import Gemm, Kernel, Ref
from luminal.core import dtype as dt
from luminal.core.view import contiguous_strides


class Values:
    """Who reads what in a list of units, by value: a rolled body's scratch is written by each of its
    calls, so a value's readers are the kernels between its write and the buffer's next one."""

    def __init__(self, planner, kg, units: list):
        self.planner = planner
        order = [k for u in units for k in u]
        # (the program's: kept in ``planner.program`` for the same kernels, in order; read only)
        got = planner.program.get("values")
        if got is None or len(got[0]) != len(order) or not all(map(operator.is_, got[0], order)):
            reads: dict = {}
            writes: dict = {}
            for at, k in enumerate(order):
                for b, _ in list(k.inputs) + list(k.epilogue_inputs):
                    reads.setdefault(b.id, []).append(at)
                for b, _ in k.outputs:
                    writes.setdefault(b.id, []).append(at)
            ends = {b.id for b, _ in kg.outputs} | {b.id for _, b, _ in kg.updates}
            got = planner.program["values"] = (order, ends, reads, writes, {id(k): at for at, k in enumerate(order)})
        self.order, self.ends, self.reads, self.writes, self.where = got

    def readers(self, b, writer) -> set:
        """The ids of the kernels reading the value kernel ``writer`` writes into ``b``."""
        w = self.where[id(writer)]
        until = min((x for x in self.writes.get(b.id, ()) if x > w), default=len(self.order))
        return {id(self.order[r]) for r in self.reads.get(b.id, ()) if w < r < until}

    def private(self, b) -> bool:
        """Whether ``b`` is a float temp of the program's own, not an output, a pack's part or a state
        written in place (a fusion may keep it in scratch)."""
        return b.kind == "temp" and b.base is None and b.id not in self.ends and b.id not in self.planner.alias \
            and b.dtype in (dt.float32, dt.float64)

    def claimable(self, written) -> bool:
        """Whether the buffers a fusion writes may get storages of their own (temps, not parts of packs,
        not states written in place)."""
        return all(b.kind == "temp" and b.base is None and b.id not in self.planner.alias for b in written)

    def claim(self, written) -> None:
        """Give each buffer the blocks write a storage of its own (before anything touching it is lowered)."""
        for b in written:
            self.planner.own_storage(b)


def plan_product(planner, k, first, second, out_strides=None):
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


def library(planner, k) -> bool:
    """Whether ``k`` is a float32 or float64 product of two operands that BLAS or the generated GEMM
    runs (not gathered from a copy's source: ``gathered.py``)."""
    return k.kind == "matmul" and id(k) not in planner.gathered and len(k.inputs) == 2 and \
        k.acc_dtype in (dt.float32, dt.float64) and planner.library_product(k)


def row_major(strides, shape) -> bool:
    """Whether ``strides`` lay ``shape`` out row-major (an axis of size 1 may have any stride)."""
    return all(a == b for a, b, n in zip(strides, contiguous_strides(shape), shape) if n != 1)


def ranges(n: int, parts: int) -> list:
    """``n`` blocks as ``parts`` runs of consecutive ones, as even as they go."""
    bounds = [n * i // parts for i in range(parts + 1)]
    return list(zip(bounds, bounds[1:]))


@dataclass(eq=False)
class Blocks:
    """The fused steps before their kernels are compiled: per thread, the steps of its blocks, each
    block's call of generated kernel ``r`` a ``(r, first item, items, the thread's scratch)`` that
    :meth:`finish` makes."""

    parts: list
    moved: dict  # the IR name of each buffer kept in scratch -> where its block starts in a thread's scratch
    #              (bytes from the scratch's start)
    row_bytes: int  # one item's share of each (an attention's row of scores, an image's product)

    @property
    def steps(self) -> list:
        """The products (what ``driver.companions`` reads to compile their GEMMs beside the kernels)."""
        return [x for part in self.parts for x in part if isinstance(x, Gemm)]

    def finish(self, kernels: list) -> list:
        """The steps with the kernels' calls made (``kernels``: per generated kernel, its compiled call
        over every item and the IR names of its buffers): one part per thread, a :class:`Split` where
        there are several. A block's call sees each moved buffer where the block's items are in the
        thread's scratch: the code indexes item ``r``'s share ``r * row_bytes`` from the buffer's
        pointer, so the buffer is passed ``first item * row_bytes`` before its block's place in the
        scratch."""
        parts = []
        for part in self.parts:
            steps = []
            for x in part:
                if isinstance(x, tuple):
                    r, lo, n, own = x
                    whole, names = kernels[r]
                    before = lo * self.row_bytes
                    at = {name: (own.space, own.offset + region - before) for name, region in self.moved.items()}
                    x = Kernel(whole.function, tuple(at.get(name, src) for name, src in zip(names, whole.buffers)),
                               whole.params, lo, lo + n, whole.kernel)
                steps.append(x)
            parts.append(steps)
        return [Split(parts)] if len(parts) > 1 else parts[0]


def matrix(x: Ref, at) -> Ref:
    """Matrix ``at`` of a batch of matrices (``x``: batch axes, then two)."""
    offset = x.offset + sum(int(i) * st for i, st in zip(at, x.strides))
    return Ref(x.space, x.shape[-2:], x.dtype, x.strides[-2:], offset)


def rows(x: Ref, at, r0: int, r1: int) -> Ref:
    """Rows ``r0:r1`` of matrix ``at`` of a batch of matrices."""
    return matrix(x, at).rows(0, r0, r1)
