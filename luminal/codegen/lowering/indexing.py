"""Gather and scatter-add. An index out of range reads and writes nothing there and is reported in the
error cell (``work.report``): a kernel cannot raise, so the host checks the cell after the call and
raises the reference's IndexError.

| kind        | option  | targets   | work
|-------------|---------|-----------|--------------------------------------------------------------
| gather      | items   | every     | an item per output element: the index loaded, checked, the
|             |         |           | input read there
| scatter_add | lines   | every     | an item per line of the output along the axis, looping over
|             |         |           | it: ``dst`` copied in, the index's line added in order (as
|             |         |           | ``np.add.at``), no atomics; one kernel when the index covers
|             |         |           | every line and lines are contiguous (the axis innermost), else
|             |         |           | three (copy in memory order, add, round)
| scatter_add | atomics | atomics   | ``dst`` into an accumulator, an atomic add per source element,
|             |         |           | the accumulator rounded into the output

16-bit floats accumulate in a float32 scratch rounded once at the end (bools in int32 where atomics
add), as the reference does.
"""

from __future__ import annotations

from luminal.codegen import ir
from luminal.codegen.lower import accumulate, contiguous_index, dim, index_read, read
from luminal.codegen.lowering.work import HALF, Uses, items, kernel, report, sizes, store
from luminal.core import dtype as dt
from luminal.core.symbolic import same


def gather(k, target, memory, name: str) -> list[ir.Kernel]:
    """``out[i] = x[i with i[axis] := idx[i]]``, one work item per output element."""
    axis = k.axes[0]
    (xb, xv), (ib, iv) = k.inputs
    shape = sizes(memory, k.domain)
    work = items(target, shape)
    uses = Uses()
    px, pi = uses.use(memory.read(xb, xv), "r"), uses.use(memory.read(ib, iv), "r")
    out = uses.use(memory.output(k.outputs[0][0]), "w")
    flag = uses.use(memory.scratch("flag", dt.int32, (2,)), "w")
    j, ok = index_read(pi, work.index, sizes(memory, xv.shape)[axis])
    at = list(work.index)
    at[axis] = j
    body = (*report(flag, j, ok), store(memory, out, work.index, shape, read(px, tuple(at), extra=ok), flat=work.flat))
    return [kernel(name, uses, work, body, notes={"fused": " ".join(k.fused), "schedule": "items"})]


def scatter_options(k, target, memory) -> tuple:
    return ("atomics", "lines") if target.atomics else ("lines",)


def scatter_add(k, target, memory, name: str, option: str) -> list[ir.Kernel]:
    """``out = dst``, then ``src[i]`` added at ``i with i[axis] := idx[i]`` (on bools: or)."""
    return (_atomics if option == "atomics" else _lines)(k, target, memory, name)


def _lines(k, target, memory, name: str) -> list[ir.Kernel]:
    """A work item owns a line of the output along the axis (its other coordinates) and loops over the
    same line of the index, so items write disjoint elements and repeated indices add in order."""
    axis = k.axes[0]
    (db, dv), (ib, iv), (sb, sv) = k.inputs
    shape, ishape = sizes(memory, k.domain), sizes(memory, iv.shape)
    pd, pi, ps, out = memory.read(db, dv), memory.read(ib, iv), memory.read(sb, sv), memory.output(k.outputs[0][0])
    acc = memory.scratch("acc", dt.float32, shape) if out.dtype in HALF else None
    into = out if acc is None else acc
    flag = memory.scratch("flag", dt.int32, (2,))
    work_dtype = into.dtype

    def copy(at):
        return (store(memory, into, at, shape, ir.cast(read(pd, at), work_dtype)),)

    def add(at):
        j, ok = index_read(pi, at, shape[axis])
        to = tuple(j if a == axis else i for a, i in enumerate(at))
        total = accumulate("sum", read(into, to, extra=ok), ir.cast(read(ps, at), work_dtype))
        return *report(flag, j, ok), store(memory, into, to, shape, total, ok)

    def round_(at):
        return (store(memory, out, at, shape, read(acc, at)),)

    steps = [(shape, copy, ((pd, "r"), (into, "w"))),
             (ishape, add, ((pi, "r"), (ps, "r"), (into, "rw"), (flag, "w")))]
    if acc is not None:
        steps.append((shape, round_, ((acc, "r"), (out, "w"))))
    notes = {"fused": " ".join(k.fused), "schedule": "lines"}
    # one kernel where the index covers every line and lines are contiguous (the axis innermost). Lines
    # across memory (an embedding's gradient: an item per column of the table) are copied in by a kernel
    # of their own, in memory order: copied a column at a time, a 32000 x 2048 table's cache lines each
    # went to memory once per float in them (an SGD step on it: 248 ms, now 45 ms; torch's 107 ms)
    if axis == len(shape) - 1 and all(same(n, ishape[a]) for a, n in enumerate(shape) if a != axis):
        uses = Uses()
        work = _line_items(target, shape, axis)
        body = []
        for s, step, accesses in steps:
            for p, access in accesses:
                uses.use(p, access)
            body.append(ir.Loop("j", ir.const(0), dim(s[axis]), step(work.index)))
        return [kernel(name, uses, work, body, notes=notes)]
    kernels = []
    for n, (s, step, accesses) in enumerate(steps):
        uses = Uses()
        for p, access in accesses:
            uses.use(p, access)
        if step is add:
            work = _line_items(target, s, axis)
            body = (ir.Loop("j", ir.const(0), dim(s[axis]), step(work.index)),)
        else:
            work = items(target, s)
            body = step(work.index)
        kernels.append(kernel(f"{name}_{n}", uses, work, body, notes=notes))
    return kernels


def _line_items(target, shape: tuple, axis: int):
    """One work item per line of ``shape`` along ``axis``, indexing the line's elements by the loop
    variable ``j``."""
    work = items(target, tuple(1 if a == axis else n for a, n in enumerate(shape)))
    work.index = tuple(ir.var("j") if a == axis else i for a, i in enumerate(work.index))
    work.flat = None
    return work


def _atomics(k, target, memory, name: str) -> list[ir.Kernel]:
    """Three kernels: ``dst`` into an accumulator (the output itself when its dtype accumulates
    exactly: float32, float64, int32), an atomic add per element of ``src``, the accumulator rounded
    into the output."""
    axis = k.axes[0]
    (db, dv), (ib, iv), (sb, sv) = k.inputs
    shape, ishape = sizes(memory, k.domain), sizes(memory, iv.shape)
    out = memory.output(k.outputs[0][0])
    acc_dtype = dt.float32 if out.dtype in HALF else (dt.int32 if out.dtype.kind == "b" else out.dtype)
    direct = acc_dtype is out.dtype
    into = out if direct else memory.scratch("acc", acc_dtype, shape)
    notes = {"fused": " ".join(k.fused), "schedule": "atomics"}
    uses, work = Uses(), items(target, shape)
    uses.use(into, "w")
    pd = uses.use(memory.read(db, dv), "r")
    first = kernel(f"{name}_init", uses, work,
                   (store(memory, into, work.index, shape, ir.cast(read(pd, work.index), acc_dtype), flat=work.flat),),
                   notes=notes)
    uses, work = Uses(), items(target, ishape)
    uses.use(into, "rw")
    j, ok = index_read(uses.use(memory.read(ib, iv), "r"), work.index, shape[axis])
    ps = uses.use(memory.read(sb, sv), "r")
    flag = uses.use(memory.scratch("flag", dt.int32, (2,)), "w")
    at = tuple(j if a == axis else i for a, i in enumerate(work.index))
    adds = kernel(f"{name}_add", uses, work, (*report(flag, j, ok), ir.AtomicAdd(
        into.name, contiguous_index(at, shape), ir.cast(read(ps, work.index), acc_dtype), ok)), notes=notes)
    if direct:
        return [first, adds]
    uses, work = Uses(), items(target, shape)
    uses.use(into, "r")
    uses.use(out, "w")
    last = kernel(f"{name}_round", uses, work, (store(memory, out, work.index, shape, read(into, work.index),
                                                      flat=work.flat),), notes=notes)
    return [first, adds, last]
