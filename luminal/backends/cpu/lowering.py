"""Lowering each kernel kind to the steps of a binding (``steps.py``): generated code where it applies, numpy and
BLAS where they do better or where the generated path does not reach.

| kind        | runs as
|-------------|--------
| elementwise | one generated kernel (``codegen/lowering``'s ``elementwise``): every output in one pass
| reduce      | one generated kernel (``codegen/lowering``'s ``reduce.thread``): prologue,
|             | accumulation and epilogue fused, one work item per output element; a long row
|             | with few outputs (a sum to a scalar) as two (``reduce.split_loops``): partials of
|             | chunks of the row, which the threads share, then their sum in order
| matmul      | one ``np.matmul`` (BLAS) laid out by ``gemm.py``, operands copied first only where BLAS
|             | cannot read them; then the epilogue as a generated kernel reading the product. A matmul
|             | whose operands are masked views is no GEMM: a generated reduce (a sum of products)
| gather      | one generated kernel (``codegen/lowering``'s ``gather``): an item per output element
| scatter_add | generated code (``codegen/lowering``'s ``lines``): an item per line of the output
|             | along the axis (``dst`` copied, the adds in order, a half float rounded once from a
|             | float32 accumulator), so no atomics; one kernel when the index covers every line, else
|             | three. Both flag an index out of range in an error cell; the call after them reads the
|             | cell and raises the reference's IndexError (``numpy_ops.check_index``'s message)

Why: generated code evaluates a fused region element by element in registers, one pass over memory,
where numpy made one pass (and one scratch array) per operation; BLAS's GEMMs are faster than any
loop nest we would generate. The generated kernels are collected per binding and compiled as one
LLVM module (``plan.Planner.generate``).

Half floats (float16, bfloat16) accumulate in float32 and are rounded once into the accumulator,
as the reference does (the GEMM into a float32 scratch, then rounded and copied).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from luminal.backends.cpu import attention, batched, gathered
from luminal.backends.cpu.gemm import Strided, plan_gemm
from luminal.backends.cpu.steps import Copy, Gemm, IndexCheck, Round
from luminal.codegen import lowering
from luminal.codegen.lower import Placed, accumulator, index_value
from luminal.codegen.lowering import rows
from luminal.codegen.lowering.reduce import loop_parts
from luminal.codegen.target import CPU
from luminal.core import dtype as dt
from luminal.core import numpy_ops as ops
from luminal.core.symbolic import prod, sym_of
from luminal.core.view import contiguous_strides


class Memory:
    """The binding's placements as the one lowering asks for them (``codegen/lowering/work.py``):
    ``place(buf, view)`` the read of a view, ``place(buf, None)`` a whole output (stored in the
    layout the planner chose: strides, not row-major), ``place(None, tag)`` a scratch the planner
    laid out before (an error cell, an accumulator, a product)."""

    contiguous_outputs = False

    def __init__(self, env, place):
        self.env, self._place = env, place

    def read(self, buf, view) -> Placed:
        return self._place(buf, view)

    def output(self, buf) -> Placed:
        return self._place(buf, None)

    def scratch(self, tag: str, dtype, shape) -> Placed:
        p = self._place(None, tag)
        if p.dtype is not dtype:
            raise TypeError(f"cpu lowering: scratch {tag!r} is {p.dtype.name}, the kernel wants {dtype.name}")
        return p


def lower(k, b) -> None:
    """Append the steps computing kernel ``k`` to ``b.steps`` (``b``: the binding's ``plan.Planner``)."""
    if k.kind == "matmul" and id(k) in b.gathered:
        flat, ostr, acc_buf = _accumulator(k, b, _out_shape(k, b))
        gathered.lower(k, b.gathered[id(k)], b, flat, ostr)
        _epilogue(k, b, flat, ostr, acc_buf)
    elif k.kind == "matmul" and b.library_product(k):
        _gemm(k, b, k.inputs)
    elif k.kind in ("gather", "scatter_add"):
        _indexing(k, b)
    else:
        if k.kind == "reduce":
            sizes = b.shape(k.domain)
            ops.check_max_nonempty(k.reduce_op, [sizes[a] for a in k.axes],
                                   [n for a, n in enumerate(sizes) if a not in k.axes], f"kernel {k}")
        prefix = "ew" if k.kind == "elementwise" else k.kind
        extra = None
        if k.kind == "reduce" and lowering.options(k, CPU, Memory(b.env, None))[0] == "split":
            outputs = prod(_out_shape(k, b))
            work = accumulator(k.reduce_op, k.acc_dtype)  # the partials, as the accumulator holds them
            parts = loop_parts(tuple(b.shape(k.domain)[a] for a in k.axes), CPU)
            extra = {"partials": Placed(b.scratch_name(b.scratch((parts * outputs,), work.np)), work, 0, (1,))}
        _generate(b, k, prefix, lambda memory, name: lowering.lower(k, CPU, memory, name), _reads(k), extra)
    b.end_kernel()


def lower_run(run: list, b) -> None:
    """Append the one generated kernel computing a run of kernels in a pass over their rows
    (``codegen/lowering/rows.py``: softmax, LayerNorm, RMSNorm) to ``b.steps``."""
    _generate(b, run, "rows", lambda memory, name: rows.lower(run, CPU, memory, name), _run_reads(run, b.program))
    b.end_kernel()


def lower_attention(f, b) -> None:
    """Append the fused steps of an attention (``attention.py``: the scores product, the runs of row
    kernels and the product with ``v``, a block of rows at a time) to ``b.steps``: each run's kernel
    generated with a grid over its rows (their calls are made per block once they are compiled:
    ``blocked.Blocks.finish``), the blocks' steps, then the second product's epilogue."""
    kernels = []
    for run in f.runs:
        _generate(b, run, "attn", lambda memory, name, run=run: rows.lower(run, CPU, memory, name, flat_rows=True),
                  _run_reads(run, b.program))
        kernels.append(b.generated[-1])
        b.end_kernel()
    flat, ostr, acc_buf = _accumulator(f.out, b, _out_shape(f.out, b))
    fused = attention.blocks(f, b, flat, ostr)
    b.steps.append(fused)
    b.fused.append(("attention", kernels, fused))
    _epilogue(f.out, b, flat, ostr, acc_buf)
    b.end_kernel()


def lower_batched(f, b) -> None:
    """Append the fused steps of a product and the elementwise kernel reading it (``batched.py``: an
    entry of the product's leading axis at a time) to ``b.steps``: the kernel generated as ever (its
    calls are made per block once it is compiled), then the blocks' steps; where its items do not run
    over the leading axis outermost, the two kernels one after the other instead."""
    k = f.reader
    _generate(b, k, "ew", lambda memory, name: lowering.lower(k, CPU, memory, name), _reads(k))
    kernel = b.generated[-1]
    b.end_kernel()
    items = index_value(kernel[0].grid[0], b.values) if kernel[0].grid else 1
    if items % f.entries:
        b.generated.pop()
        b.steps.pop()
        lower(f.product, b)
        lower(k, b)
        return
    fused = batched.blocks(f, b, items // f.entries)
    b.steps.append(fused)
    b.fused.append(("batched", [kernel], fused))
    b.end_kernel()


def _reads(k, inputs: bool = True) -> list:
    """Every ``(buffer, view)`` a kernel's code places: its inputs (unless ``inputs`` is False: a GEMM's
    epilogue reads the product instead), its epilogue's, and its outputs whole (view None)."""
    return (list(k.inputs) if inputs else []) + list(k.epilogue_inputs) + [(buf, None) for buf, _ in k.outputs]


def _run_reads(run: list, program: dict) -> list:
    """The ``(buffer, view)`` pairs a run of kernels' code places, once each: the program's, kept in
    ``program`` (``plan.PROGRAM``) by the run's first kernel and length (a run is a slice of the
    program's kernels), with the kernel."""
    found = program.get("run reads")
    if found is None:
        found = program["run reads"] = {}
    key = (id(run[0]), len(run))
    got = found.get(key)
    if got is None or got[0] is not run[0]:
        got = found[key] = (run[0], list({(id(buf), id(view)): (buf, view)
                                           for k in run for buf, view in _reads(k)}.values()))
    return got[1]


def _template(k, program: dict) -> tuple:
    """What identifies kernel ``k``'s code apart from its buffers: the trips of a rolled body are copies
    of one kernel over other buffers that share its domain, views and expressions (``relinked``), so
    they have one template (the objects live as long as the program, whose memo this keys). Kept per
    kernel in ``program`` (``plan.PROGRAM``: every kernel lowered is the program's, or an epilogue kept
    there, ``_epilogue``), with the kernel: its id is not reused."""
    templates = program.get("templates")
    if templates is None:
        templates = program["templates"] = {}
    got = templates.get(id(k))
    if got is None or got[0] is not k:
        got = templates[id(k)] = (k, (k.kind, id(k.domain), k.axes, k.reduce_op, id(k.prologue), k.acc_dtype,
                                      tuple(id(v) for _, v in k.inputs), tuple(id(v) for _, v in k.epilogue_inputs),
                                      tuple((id(e), b.dtype, tuple(b.shape)) for b, e in k.outputs)))
    return got[1]


def _generate(b, k, prefix: str, make, reads, extra: dict | None = None) -> None:
    """Generate kernel-graph kernel ``k``'s code (``k``: a list, for a run of kernels lowered as one)
    (``make(memory, name) -> [ir.Kernel]``) once per layout of its buffers: the placements of
    ``reads`` and of the ``extra`` scratch (by name: a product, an error cell, an accumulator, which
    ``make`` gets as ``place(None, name)``), their buffers named by
    order of appearance, are the key of the program's memo (``b.memo``). So every trip of a rolled
    body, and every binding that places the buffers alike (sizes are ``DimValue`` values: the key holds
    their expressions, not their values), reuses the kernels made for the first. The memo's kernels
    name their buffers ``p0, p1, ...``; ``b.generate`` is told which of the binding's each one is."""
    extra = extra or {}
    # (name, dtype, (offset, strides, box, pad), those sizes as the code sees them) of each placement
    got = [b.placed(buf, view) for buf, view in reads] + \
        [(p.name, p.dtype, None, sizes_key(p.offset, p.strides, p.box, p.pad)) for p in extra.values()]
    canon: dict = {}
    for g in got:
        if g[0] not in canon:
            canon[g[0]] = f"p{len(canon)}"
    # (specialised code is made from the sizes' values: they are part of its key)
    values = tuple(sorted(b.values.items())) if b.env is b.values else None
    template = tuple([_template(x, b.program) for x in k]) if isinstance(k, list) else _template(k, b.program)
    # (each placement as its code sees it: the buffer by order of appearance, sizes by their expressions)
    key = (prefix, template, tuple(extra), tuple([(canon[n], d, sizes) for n, d, _, sizes in got]), values)
    kernels = b.memo.get(key)
    if kernels is None:
        where = {(id(buf), id(view)): Placed(canon[name], dtype, *placement)
                 for (buf, view), (name, dtype, placement, _) in zip(reads, got)}
        named = {x: dataclasses.replace(p, name=canon[p.name]) for x, p in extra.items()}

        def place(buf, view):
            return named[view] if buf is None else where[(id(buf), id(view))]

        # (named uniquely in the program: by the kernels in the memo, less its ``plan.PROGRAM`` entry)
        kernels = b.memo[key] = make(Memory(b.env, place), f"{prefix}{len(b.memo) - 1}")
        b.made["kernels"] += len(kernels)
    else:
        b.made["reused"] += len(kernels)
    names = {c: n for n, c in canon.items()}
    for kernel in kernels:
        b.generate(kernel, k, [names[buf.name] for buf in kernel.buffers])


def sizes_key(offset, strides, box, pad) -> tuple:
    """A placement's offset, strides, box and pad as its code sees them: sizes by their expressions."""
    box = None if box is None else tuple([(sym_of(lo), sym_of(hi)) for lo, hi in box])
    return (sym_of(offset), tuple([sym_of(s) for s in strides]), box, pad)


def _indexing(k, b) -> None:
    """A gather or scatter_add as generated kernels, then the check of their error cell (a kernel
    cannot raise: it flags an index out of range there, and ``steps.IndexCheck`` raises the
    reference's IndexError after the call)."""
    cell = b.error_cell()
    extra = {"flag": Placed(b.scratch_name(cell), dt.int32, 0, (1,))}
    if k.kind == "gather":
        _generate(b, k, "gather", lambda memory, name: lowering.lower(k, CPU, memory, name), _reads(k), extra)
    else:
        if k.outputs[0][0].dtype in (dt.float16, dt.bfloat16):  # accumulates in float32, rounded once at the end
            shape = b.shape(k.domain)
            extra["acc"] = Placed(b.scratch_name(b.scratch(shape, np.float32)), dt.float32, 0,
                                  contiguous_strides(shape))
        _generate(b, k, "scatter", lambda memory, name: lowering.lower(k, CPU, memory, name), _reads(k), extra)
    size = b.index_size(k)
    ib, iv = k.inputs[1]
    shape, strides, offset, box = b.bound(iv)
    inner = (shape, offset) if box is None else ops.inner_box(strides, offset, box)
    src = None if inner is None else b.view(ib, Strided(inner[0], strides, inner[1]))
    valid = None if box is None else tuple(slice(lo, hi) for lo, hi in box)
    b.steps.append(IndexCheck(cell, k.kind, size, src, shape, iv.pad, valid))


def _out_shape(k, b) -> tuple:
    domain = b.shape(k.domain)
    return tuple(d for i, d in enumerate(domain) if i not in k.axes)


def _accumulator(k, b, shape):
    """Where ``Acc`` lands: ``(flat storage, element strides of the output shape, its buffer)``: the
    buffer of an output that is just ``Acc`` (``acc_output``), else a scratch (buffer None) stored in
    the order the binding chose for the GEMM (``plan.Planner.acc_order``)."""
    buf, strides = acc_output(k), b.product_strides(k, shape)
    if buf is not None:
        return b.storage(buf, shape)[0], strides, buf
    order = b.acc_order(k)
    stored = b.scratch(shape if order is None else tuple(shape[a] for a in order), k.acc_dtype.np)
    return stored.reshape((prod(shape),)), strides, None


def acc_output(k):
    """The output buffer of product ``k`` that is just its ``Acc`` (the product is written there), or None."""
    return next((buf for buf, e in k.outputs if e.op == "Acc" and buf.dtype is k.acc_dtype), None)


def _gemm(k, b, ins) -> None:
    """Lower ``sum over k.axes of a*b`` (``ins``: the two unmasked operands, in any layout: the
    compiler's ``contraction`` rule makes MatMuls that the strict ``matmul`` rule would not) to one
    ``np.matmul``, copying an operand into a contiguous scratch first where BLAS cannot read it; then
    the epilogue outputs (all but the one the product was written into) as a generated kernel."""
    shape = _out_shape(k, b)
    flat, ostr, acc_buf = _accumulator(k, b, shape)  # (sizes as DimValues: the epilogue's code reads them)
    with b.plain_sizes():  # the GEMM's BLAS call: plain sizes
        domain = b.shape(k.domain)
        (abuf, av), (bbuf, bv) = ins
        a_sv, b_sv = b.locate(abuf, b.strided_view(av)), b.locate(bbuf, b.strided_view(bv))
    out_axes = [i for i in range(len(domain)) if i not in k.axes]
    g = plan_gemm(domain, k.axes, a_sv, b_sv, dict(zip(out_axes, map(int, ostr))))
    half = k.acc_dtype in (dt.float16, dt.bfloat16)
    cd = ops.compute_dtype(k.acc_dtype)
    lhs = _operand(b, abuf, g.a, None if half else g.a2, g.bshape + (g.M, g.K), cd)
    rhs = _operand(b, bbuf, g.b, None if half else g.b2, g.bshape + (g.K, g.N), cd)
    if g.out2 is not None and not half:
        b.steps.append(Gemm(lhs, rhs, b.over(flat, g.out2)))
    else:
        res = b.scratch(g.bshape + (g.M, g.N), cd)
        b.steps.append(Gemm(lhs, rhs, res))
        if k.acc_dtype is dt.bfloat16:
            b.steps.append(Round(res))
        b.steps.append(Copy(b.over(flat, g.out), res.reshape(g.out.shape)))
    _epilogue(k, b, flat, ostr, acc_buf)


def _epilogue(k, b, flat, ostr, acc_buf) -> None:
    """After product ``k`` was written into ``flat`` (element strides ``ostr`` over its output shape;
    ``acc_buf`` the output buffer it is, if any): its other outputs, as a generated kernel reading it."""
    if any(not (e.op == "Acc" and buf is acc_buf) for buf, e in k.outputs):
        # the product, indexed in the output shape (its buffer may group the same elements otherwise)
        if acc_buf is None:
            where = Placed(b.scratch_name(flat), k.acc_dtype, 0, ostr)
        else:
            where = Placed(b.place(acc_buf, None).name, k.acc_dtype, 0, b.strides_of(acc_buf, _out_shape(k, b)))
        # the product's own buffer is BLAS's (the kernel kept with the program's: see _template)
        epilogues = b.program.get("epilogues")
        if epilogues is None:
            epilogues = b.program["epilogues"] = {}
        got = epilogues.get((id(k), id(acc_buf)))
        if got is None or got[0] is not k or got[1] is not acc_buf:
            rest = [(buf, e) for buf, e in k.outputs if not (e.op == "Acc" and buf is acc_buf)]
            got = epilogues[(id(k), id(acc_buf))] = (k, acc_buf, dataclasses.replace(k, outputs=rest))
        epi = got[2]
        _generate(b, epi, "epi", lambda memory, name: lowering.epilogue(epi, CPU, memory, memory.scratch(
            "acc", k.acc_dtype, None), name), _reads(epi, inputs=False), {"acc": where})


def _operand(b, buf, src: Strided, blas: Strided | None, shape, cd):
    """A matmul operand: the buffer's storage seen through the BLAS-ready ``blas`` view, or (when that
    is None) a contiguous ``cd`` scratch of ``shape`` refilled from the unmerged view ``src`` every run."""
    if blas is not None:
        return b.storage_view(buf, blas)
    tmp = b.scratch(shape, cd)
    b.steps.append(Copy(tmp.reshape(src.shape), b.storage_view(buf, src)))
    return tmp
