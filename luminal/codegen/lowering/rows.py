"""Single-pass rows: a run of kernel-graph kernels that reduce the same rows and then use the results
on those rows, lowered as one kernel, a block of threads per row, on a cooperative target (GPU).

Softmax, LayerNorm and RMSNorm reach the kernel graph as such runs: reductions over one domain and
the same axes (softmax: the row's max, then the sum of ``exp(x - max)``; LayerNorm: the mean, then
the variance of ``x - mean``), each later one reading the earlier results, and an elementwise kernel
over the domain reading them all. Each reads its per-row inputs through a *row view*: every element
of a row sees that row's value (stride 0 along the reduced axes). Lowered kernel by kernel that is
a launch per kernel, each reading the whole input from device memory, and the per-row results
stored and read back. Here one block takes a row through every phase: each reduction strides the
row with the block's threads, reduces in the block (``reduce.block_reduce``) and hands the result to
every thread through shared memory, into a register; later phases read registers where the
separate kernels read memory. The per-row results are still stored (thread 0), as the kernels
would: another kernel (a backward pass) may read them. The same values, in the same order per row
as the ``row`` schedule's: only launches and memory traffic go.

:func:`runs` finds the runs in a list of kernels, :func:`fits` says whether a backend may take one
(given its memory plan), :func:`lower` builds one.
"""

from __future__ import annotations

from luminal.codegen import ir
from luminal.codegen.lower import Values, accumulate, accumulator, contiguous_index, dim, reduce_identity, unflatten
from luminal.codegen.lowering import reduce
from luminal.codegen.lowering.elementwise import has_reshape
from luminal.codegen.lowering.reduce import block_reduce, domain_index, prologue, split_axes
from luminal.codegen.lowering.work import Uses, Work, items, kernel, one, reader, sizes, store
from luminal.core import dtype as dt
from luminal.core.numpy_ops import check_max_nonempty
from luminal.core.symbolic import prod, same
from luminal.core.view import contiguous_strides


def runs(kernels: list, together=None) -> list[tuple[int, int]]:
    """``[(start, stop)]``: the runs ``kernels[start:stop]`` that :func:`lower` takes (at least one
    reduction, then one elementwise kernel); ``together(i)``: whether kernels ``i - 1`` and ``i`` may
    join one run (the same call of a rolled body)."""
    out, i = [], 0
    while i < len(kernels):
        j = i
        while j < len(kernels) and kernels[j].kind == "reduce" and _same_rows(kernels[i], kernels[j]) and \
                (j == i or together is None or together(j)):
            j += 1
        if j > i and j < len(kernels) and (together is None or together(j)) and \
                _fits(kernels[i:j], kernels[j]):
            out.append((i, j + 1))
            i = j + 1
        else:
            i = max(j, i + 1)
    return out


def fits(run: list, target, memory, slot_of: dict, links: dict) -> bool:
    """Whether a run :func:`runs` found is lowered as one kernel here: the cost model runs its rows so
    (:func:`worth_it`) and the memory plan keeps its buffers apart (:func:`overlaps`)."""
    return worth_it(run, target, memory) and not overlaps(run, slot_of, links)


def worth_it(run: list, target, memory) -> bool:
    """Whether the cost model would run the run's rows as the run's kernel does: its first reduction's
    default schedule is a block per row (cooperative target) or a work item per row (loop target).
    Not for a few very long rows, which the reductions' split schedule spreads over many blocks or
    threads, nor (on a GPU) for short rows, a thread per row."""
    return reduce.options(run[0], target, memory)[0] == ("row" if target.warp else "thread")


def overlaps(run: list, slot_of: dict, links: dict) -> bool:
    """Whether the memory plan (``slot_of``: buffer id -> its storage slot) puts two buffers the run
    touches in one storage (``links``: a call's buffers for a body's). The plan lets a kernel's output
    take the storage of what only earlier kernels used; one kernel for the run would touch both at
    once (and a generated kernel's buffers are promised not to alias, so even a store that comes
    later in its code may be moved), so such a run stays kernel by kernel."""
    def storage(b):  # (a part of a pack: the pack's; two parts of one pack count as one storage)
        b = links.get(b, b)
        return b if b.base is None else b.base

    seen: dict = {}  # slot -> id of the storage in it
    for k in run:
        for b, _ in [*k.inputs, *k.epilogue_inputs, *k.outputs]:
            b = storage(b)
            slot = slot_of.get(b.id)
            if slot is not None and seen.setdefault(slot, id(b)) != id(b):
                return True
    return False


def _same_rows(a, b) -> bool:
    return tuple(a.axes) == tuple(b.axes) and len(a.domain) == len(b.domain) and \
        all(same(x, y) for x, y in zip(a.domain, b.domain))


def _fits(reduces: list, last) -> bool:
    """Whether ``reduces`` and the elementwise ``last`` form a run: ``last`` over the reductions'
    domain, storing whole outputs of it; every read of a reduction's output by a later kernel of the
    run a row view (in a prologue or ``last``) or the output itself (in an epilogue); and the run
    uses at least one result."""
    first = reduces[0]
    if last.kind != "elementwise" or len(last.domain) != len(first.domain) or \
            not all(same(x, y) for x, y in zip(last.domain, first.domain)) or has_reshape([e for _, e in last.outputs]):
        return False
    if not all(len(b.shape) == len(first.domain) and all(same(x, y) for x, y in zip(b.shape, first.domain))
               for b, _ in last.outputs):
        return False
    made: set = set()
    used = False
    for k in [*reduces, last]:
        for b, v in k.inputs:
            if id(b) in made:
                if not _row_view(v, first):
                    return False
                used = True
        for b, v in (k.epilogue_inputs if k.kind == "reduce" else ()):
            if id(b) in made:
                if not _own_view(v, first):
                    return False
                used = True
        if k.kind == "reduce":
            made.update(id(b) for b, _ in k.outputs)
    return used


def _out_shape(k) -> tuple:
    return tuple(n for a, n in enumerate(k.domain) if a not in k.axes)


def _row_view(v, k) -> bool:
    """Whether view ``v`` (of ``k``'s domain) reads, at every element, the element of a row-major
    array of the output shape at that element's row."""
    if v.mask is not None or not same(v.offset, 0) or len(v.strides) != len(k.domain):
        return False
    kept = [a for a in range(len(k.domain)) if a not in k.axes]
    want = dict(zip(kept, contiguous_strides(_out_shape(k))))
    return all(one(n) or same(s, 0 if a in k.axes else want[a]) for a, (n, s) in enumerate(zip(k.domain, v.strides)))


def _own_view(v, k) -> bool:
    """Whether view ``v`` (of the output shape) reads a row-major array of that shape in order."""
    shape = _out_shape(k)
    return v.mask is None and same(v.offset, 0) and len(v.strides) == len(shape) and \
        all(one(n) or same(s, r) for n, s, r in zip(shape, v.strides, contiguous_strides(shape)))


def lower(run: list, target, memory, name: str, flat_rows: bool = False) -> list[ir.Kernel]:
    """The run (reductions, then an elementwise kernel) as one kernel: on a cooperative target a block
    per row, its threads striding the row in every phase; on a loop target a work item per row, a
    loop per reduced axis in every phase (the reductions' order is the ``thread`` schedule's).
    ``flat_rows`` (a loop target): one grid axis over the rows in row-major order, so that a call's
    item range is any run of rows (a fused attention's block: ``backends/cpu/attention.py``)."""
    first = run[0]
    domain = sizes(memory, first.domain)
    kept, red, out_shape, red_shape = split_axes(first, domain)
    uses = Uses()
    block = bool(target.warp)
    if block:
        threads = target.row_threads
        work = Work((dim(prod(out_shape)),), (threads,), tuple(unflatten(ir.block(0), out_shape)))
        flat, guard = ir.block(0), ir.alu("LessThan", ir.thread(0), ir.const(1))
    elif flat_rows:
        work = Work((dim(prod(out_shape)),), (), tuple(unflatten(ir.item(0), out_shape)))
        flat, guard = ir.item(0), None
    else:
        work = items(target, out_shape, "o")
        flat, guard = contiguous_index(work.index, out_shape), None
    row = work.index

    def over_row(tag: str, statements) -> tuple:
        """``statements(domain index)`` for each element of the row: the block's threads striding it,
        or a loop per reduced axis."""
        if block:
            at = domain_index(domain, kept, red, row, tuple(unflatten(ir.var(tag), red_shape)))
            return (ir.Loop(tag, ir.thread(0), dim(prod(red_shape)), tuple(statements(at)), ir.const(threads)),)
        at = domain_index(domain, kept, red, row, tuple(ir.var(f"{tag}_{j}") for j in range(len(red_shape))))
        inner = tuple(statements(at))
        for j in reversed(range(len(red_shape))):
            inner = (ir.Loop(f"{tag}_{j}", ir.const(0), dim(red_shape[j]), inner),)
        return inner

    registers: dict[int, ir.V] = {}  # id(output buffer of a reduction) -> the register holding this row's value
    body, shared = [], []
    phases = []  # per reduction: (where its loop is in body, its prologue, its accumulator, op, work dtype)
    for phase, k in enumerate(run[:-1]):
        op = k.reduce_op
        check_max_nonempty(op, red_shape, out_shape, f"kernel {k}")
        work_dtype = accumulator(op, k.acc_dtype)
        slots = {i: registers[id(b)] for i, (b, _) in enumerate(k.inputs) if id(b) in registers}
        pro, _ = prologue(k, memory, uses, work_dtype, slots)
        acc = f"sum{phase}"  # (a register has one dtype: one per phase)
        body.append(ir.Assign(acc, reduce_identity(op, work_dtype)))
        phases.append((len(body), pro, acc, op, work_dtype))
        body += over_row(f"r{phase}", lambda at, acc=acc, pro=pro, op=op, wd=work_dtype: (
            ir.Assign(acc, accumulate(op, ir.var(acc, wd), pro(at))),))
        if block:
            # the block's reduction leaves the row's value in thread 0, which hands it to every thread
            # through shared memory (the barrier also keeps the next phase from writing the partials
            # before every warp has read them)
            scratch = f"partials_{work_dtype.name}"
            body += [*block_reduce(target, op, work_dtype, threads, scratch, acc),
                     ir.If(guard, (ir.Store(f"row{phase}", ir.const(0), ir.var(acc, work_dtype)),)), ir.Barrier(),
                     ir.Assign(acc, ir.load(f"row{phase}", work_dtype, ir.const(0)))]
            shared += [ir.Shared(f"row{phase}", work_dtype, 1),
                       ir.Shared(scratch, work_dtype, max(1, threads // target.warp))]
        body.append(ir.Assign(f"acc{phase}", ir.cast(ir.var(acc, work_dtype), k.acc_dtype)))
        body += _epilogue(k, memory, uses, out_shape, row, flat, ir.var(f"acc{phase}", k.acc_dtype), registers,
                          phase, guard)
    last = run[-1]
    ins = [memory.read(b, v) for b, v in last.inputs]
    base = reader(ins, uses)
    slots = {i: registers[id(b)] for i, (b, _) in enumerate(last.inputs) if id(b) in registers}
    values = Values(lambda e, idx: slots[e.arg] if e.arg in slots else base(e, idx), lambda e: domain, memory.env)
    outs = [(uses.use(memory.output(b), "w"), e) for b, e in last.outputs]
    reuse = None if block else _reused(phases, outs, values, domain, kept, red, row, red_shape)
    if reuse is not None:  # the phase's loop also stores its per-element value into the output
        j, (at_body, pro, acc, op, wd) = reuse
        p = uses.use(outs[0][0], "rw")

        def stored(at):
            value = _inner(pro(at))
            return (ir.Assign("each", value), ir.Assign(acc, accumulate(op, ir.var(acc, wd), ir.cast(
                ir.var("each", value.dtype), wd))), store(memory, p, at, domain, ir.var("each", value.dtype)))

        body[at_body:at_body + 1] = over_row(f"r{j}", stored)

    def last_values(at):
        out = []
        for p, e in outs:
            value = values.at(e, at if values.shape(e) is not None else ())
            if reuse is not None:  # (its value read back from where the phase stored it)
                kept_value = _inner(reuse[1][1](at))
                value = ir.replaced(value, kept_value, ir.load(p.name, kept_value.dtype,
                                                               store(memory, p, at, domain, kept_value).index))
            out.append(store(memory, p, at, domain, value))
        return out

    body += over_row("r", last_values)
    shared = list({x.name: x for x in shared}.values())  # (one scratch per accumulator dtype)
    fused = " ".join(x for k in run for x in k.fused)
    return [kernel(name, uses, work, body, shared=tuple(shared), notes={"fused": fused, "schedule": "rows"})]


def _inner(value: ir.V) -> ir.V:
    """A prologue's value before its cast to the accumulator's dtype."""
    return value.args[0] if value.op == "cast" else value


def _reused(phases: list, outs: list, values, domain, kept, red, row, red_shape):
    """``(phase, its entry of phases)`` whose per-element value the last kernel computes again (a
    softmax: ``exp(x - max)``, summed by the second reduction, then divided by the sum), or None. On a
    loop target that phase's loop stores the value into the output (the last kernel's one output,
    of the value's dtype: float32 or float64) and the last kernel reads it back: an ``exp`` in double
    per element fewer (``codegen/llvm.py``'s float32 ``exp2``), for a load of the row the cache holds.
    The values are the same: the stored value is the one computed, in the output's dtype."""
    if len(outs) != 1 or outs[0][0].dtype not in (dt.float32, dt.float64):
        return None
    p, e = outs[0]
    at = domain_index(domain, kept, red, row, tuple(ir.var(f"r_{j}") for j in range(len(red_shape))))
    if values.shape(e) is None:
        return None
    value = values.at(e, at)
    for j in reversed(range(len(phases))):
        inner = _inner(phases[j][1](at))
        if inner.dtype is p.dtype and inner.op not in ("load", "var", "const") and \
                ir.replaced(value, inner, ir.var("each", inner.dtype)) is not value:
            return j, phases[j]
    return None


def _epilogue(k, memory, uses, out_shape, row, flat, acc, registers: dict, phase: int, guard) -> list:
    """Reduction ``k``'s outputs at ``row`` (``flat``: its row-major index): each into a register (what
    later phases read) and stored (where ``guard``: thread 0 of a block)."""
    epi = [memory.read(b, v) for b, v in k.epilogue_inputs]
    shapes = [sizes(memory, v.shape) for _, v in k.epilogue_inputs]
    base = reader(epi, uses)
    own = {i: registers[id(b)] for i, (b, _) in enumerate(k.epilogue_inputs) if id(b) in registers}

    def leaf(e, idx):
        if e.op == "Acc":
            return acc
        return own[e.arg] if e.arg in own else base(e, idx)

    values = Values(leaf, lambda e: out_shape if e.op == "Acc" else shapes[e.arg], memory.env)
    body, stores = [], []
    for j, (b, e) in enumerate(k.outputs):
        # (evaluated at the row's index in the output's own shape, which may regroup the output
        # shape's elements: a kept axis of size 1; as epilogue.epilogue_stores)
        shape = sizes(memory, b.shape)
        at = row if same(shape, out_shape) else tuple(unflatten(flat, shape))
        name = f"out{phase}_{j}"
        body.append(ir.Assign(name, ir.cast(values.at(e, at if values.shape(e) is not None else ()), b.dtype)))
        registers[id(b)] = ir.var(name, b.dtype)
        p = uses.use(memory.output(b), "w")
        stores.append(store(memory, p, at, shape, ir.var(name, b.dtype), flat=flat if same(shape, out_shape) else None))
    return body + ([ir.If(guard, tuple(stores))] if guard is not None else stores)
