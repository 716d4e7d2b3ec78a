"""Reductions (and products read as sums of products): a prologue accumulated over the reduced axes,
then the epilogue's outputs. Three schedules:

| option  | targets        | work
|---------|----------------|------------------------------------------------------------------------
| thread  | every target   | one work item per output, a loop per reduced axis; on a loop target with
|         |                | column blocks a column sum takes 16 or 8 consecutive columns per item
| row     | cooperative    | a block per output: its threads stride the row, then shuffles within
|         | (warp, shared) | each warp and the warps' partials through shared memory
| split   | every target   | a long row shared by several work items, each a partial, finished in
|         |                | order per output (two kernels, the partials in a scratch): on a
|         |                | cooperative target blocks and a warp per output; on a loop target chunks
|         |                | of the first reduced axis, so the threads share a sum to a scalar
| warp    | cooperative    | a warp per output: its lanes stride the row, a butterfly of shuffles
|         |                | (no shared memory, no barrier; several outputs per block)
| wide    | cooperative    | ``warp`` for a product whose operands are contiguous along the row and
|         |                | 16-byte aligned at every row (``wide_fits``): each lane reads 4 float32
|         |                | or 8 16-bit elements of each operand per 16-byte load (``ir.WideLoad``),
|         |                | the row's last ``K mod 4`` (or 8) one at a time

Float32 sums accumulate in float64, 16-bit inputs in float32 (``codegen.lower.accumulator``), in
every schedule alike; a sum of products of 16-bit loads multiplies in float32, as the reference.
"""

from __future__ import annotations

from luminal.codegen import ir
from luminal.codegen.lower import (
    Values,
    accumulate,
    accumulator,
    address,
    contiguous_index,
    dim,
    reduce_identity,
    unflatten,
)
from luminal.codegen.lowering.elementwise import group_size, has_reshape, joins, merged
from luminal.codegen.lowering.epilogue import epilogue_stores
from luminal.codegen.lowering.work import HALF, Uses, Work, blocks, items, kernel, reader, sizes
from luminal.core import dtype as dt
from luminal.core.kernel_graph import Expr
from luminal.core.numpy_ops import check_max_nonempty
from luminal.core.symbolic import is_static, prod


def options(k, target, memory) -> tuple:
    """The schedules reduction ``k`` may take on ``target``, the cost model's pick first: on a
    cooperative target a block per row when rows are long or unknown (a block's threads share the
    row), a thread per output when rows are short (a block would idle most of its threads), several
    blocks per row when rows are very long and too few to fill the device."""
    _, _, out_shape, red_shape = split_axes(k, sizes(memory, k.domain))
    r, m = prod(red_shape), prod(out_shape)
    if not target.warp:
        if not _splits(red_shape, target):
            return ("thread",)
        few = is_static(r) and is_static(m) and r >= target.split_row and m <= target.split_outputs
        return ("split", "thread") if few else ("thread", "split")
    if is_static(r) and is_static(m) and r >= target.split_row and m <= target.split_outputs:
        return ("split", "row", "warp")
    short = is_static(r) and (r <= 32 or (r <= 256 and is_static(m) and m >= 4096))
    return ("thread", "warp", "row") if short else ("row", "warp", "thread", "split")


def lower(k, target, memory, name: str, option: str) -> list[ir.Kernel]:
    """Reduction ``k`` (or a product, as a sum of products) in schedule ``option``."""
    if option == "split" and not target.warp:
        return split_loops(k, target, memory, name)
    return {"thread": thread, "row": row, "split": split, "warp": warp, "wide": wide}[option](k, target, memory, name)


def _splits(red_shape, target) -> bool:
    """Whether a loop target can split the reduced shape (:func:`loop_parts`)."""
    return loop_parts(red_shape, target) > 1


def loop_parts(red_shape, target) -> int:
    """How many equal chunks a loop target's split cuts the first reduced axis into: the most, up to
    ``split_parts`` and at least 4, that divide it (equal trip counts: the loops stay the ones the
    vectoriser and the cost model know); 1: no split."""
    if not red_shape or not is_static(red_shape[0]) or type(red_shape[0]) is not int:
        return 1
    n = red_shape[0]
    return next((p for p in range(target.split_parts, 3, -1) if n % p == 0 and n // p >= 2), 1)


def split_loops(k, target, memory, name: str) -> list[ir.Kernel]:
    """A loop target's split: ``loop_parts`` work items per output each reduce an equal chunk of the
    first reduced axis (the others whole, in order) into a partial; a second kernel adds each output's
    partials in order and runs the epilogue. The threads cut the first kernel's items, so a sum to a
    scalar runs on all of them. Partials accumulate as the ``thread`` schedule does (float64 for a
    float32 sum): the same bound, another order."""
    st = _Start(k, memory, merge=True)
    uses, op, work_dtype, out_shape, red_shape = st.uses, st.op, st.work_dtype, st.out_shape, st.red_shape
    check_max_nonempty(k.reduce_op, red_shape, out_shape, f"kernel {k}")
    # the parts of the first reduced axis as the kernel graph has it, before any merge: what ``options``
    # chose by and the runtime sized the partials' scratch for (they divide a merged axis too); the
    # merged (300 * 300) could take 16 parts where 300 takes 15, and wrote past the scratch
    parts = loop_parts(split_axes(k, sizes(memory, k.domain))[3], target)
    chunk = red_shape[0] // parts
    m = prod(out_shape)
    partials = uses.use(memory.scratch("partials", work_dtype, (m * parts,)), "w")
    work = items(target, (parts, m))  # (the parts first: the axis the threads cut)
    part, o = work.index
    out_idx = tuple(unflatten(o, out_shape))
    red_idx = (ir.add(ir.mul(part, chunk), ir.var("r0")), *(ir.var(f"r{j}") for j in range(1, len(red_shape))))
    inner: tuple = (ir.Assign("acc", accumulate(op, ir.var("acc", work_dtype), st.at(out_idx, red_idx))),)
    for j in reversed(range(1, len(red_shape))):
        inner = (ir.Loop(f"r{j}", ir.const(0), dim(red_shape[j]), inner),)
    body = [ir.Assign("acc", reduce_identity(op, work_dtype)), ir.Loop("r0", ir.const(0), ir.const(chunk), inner),
            ir.Store(partials.name, ir.add(ir.mul(o, parts), part), ir.var("acc", work_dtype))]
    notes = {"fused": " ".join(k.fused), "schedule": "split"}
    first_kernel = kernel(name, uses, work, body, notes=notes)
    uses = Uses()
    uses.use(partials, "r")
    work = items(target, out_shape, "o")
    flat = work.flat if work.flat is not None else contiguous_index(work.index, out_shape)
    finish = [ir.Assign("acc", reduce_identity(op, work_dtype)),
              ir.Loop("p", ir.const(0), ir.const(parts), (ir.Assign("acc", accumulate(
                  op, ir.var("acc", work_dtype),
                  ir.load(partials.name, work_dtype, ir.add(ir.mul(flat, parts), ir.var("p"))))),)),
              ir.Assign("result", ir.cast(ir.var("acc", work_dtype), k.acc_dtype)),
              *epilogue_stores(k, memory, uses, out_shape, work.index, ir.var("result", k.acc_dtype),
                               flat=work.flat)]
    return [first_kernel, kernel(f"{name}_finish", uses, work, finish, notes=notes)]


def split_axes(k, domain) -> tuple:
    """``(kept axes, reduced axes, the output's shape, the reduced shape)`` of ``domain``."""
    kept = [i for i in range(len(domain)) if i not in k.axes]
    red = list(k.axes)
    return kept, red, tuple(domain[i] for i in kept), tuple(domain[i] for i in red)


def domain_index(domain, kept, red, out_idx, red_idx) -> tuple:
    full = [None] * len(domain)
    for i, a in enumerate(kept):
        full[a] = out_idx[i]
    for i, a in enumerate(red):
        full[a] = red_idx[i]
    return tuple(full)


def _op(k) -> str:
    return "sum" if k.kind == "matmul" else k.reduce_op


def prologue(k, memory, uses: Uses, work_dtype, registers: dict | None = None, placed=None):
    """``at(domain index) -> IR value in work_dtype``: what ``k`` reduces there (a product's: the
    product of its two loads; 16-bit products in float32, as the reference's contraction).
    ``registers``: {input slot: the value every element reads there} (a row's value held in a
    register, ``rows.py``): those slots are not loaded. ``placed``: ``(inputs' placements, the domain
    they are indexed over)`` where not the kernel's own (its reduced axes merged: :class:`_Start`)."""
    if placed is None:
        ins = [memory.read(b, v) for b, v in k.inputs]
        shapes = [sizes(memory, v.shape) for _, v in k.inputs]
    else:
        ins, shapes = placed[0], [placed[1]] * len(placed[0])
    pro = k.prologue
    if k.kind == "matmul":
        pro = Expr("Mul", tuple(Expr("Load", (), i, b.dtype) for i, (b, _) in enumerate(k.inputs)), None, k.acc_dtype)
    load = reader(ins, uses)
    held = registers or {}
    values = Values(lambda e, at: held[e.arg] if e.arg in held else load(e, at), lambda e: shapes[e.arg], memory.env)
    half_products = _op(k) == "sum" and k.acc_dtype in HALF and pro.op == "Mul" and \
        all(x.op == "Load" for x in pro.args)

    def at(idx):
        if half_products:
            a, b = (ir.cast(values.at(x, idx), dt.float32) for x in pro.args)
            return ir.cast(ir.alu("Mul", a, b), work_dtype)
        return ir.cast(values.at(pro, idx if values.shape(pro) is not None else ()), work_dtype)
    return at, ins


class _Start:
    """What every schedule of reduction ``k`` starts from: the domain as the code sees it, its kept and
    reduced axes and shapes, the buffers used so far, the operation, the accumulator's dtype and the
    prologue (``at(domain index)``, reading ``ins``).

    With ``merge`` (the loop schedules), neighbouring reduced axes that every input walks as one are
    one axis of the domain (``elementwise``'s merge): a bias gradient's sum over (B, H, W) of an
    (B, C, H, W) array is a loop over B around one of H * W contiguous elements, which the vectoriser
    takes whole, where a loop of W (28 in the MNIST CNN) left it mostly a remainder. The elements are
    summed in the same order."""

    def __init__(self, k, memory, merge: bool = False):
        self.domain = sizes(memory, k.domain)
        self.kept, self.red, self.out_shape, self.red_shape = split_axes(k, self.domain)
        self.uses = Uses()
        self.op = _op(k)
        self.work_dtype = accumulator(self.op, k.acc_dtype)
        placed = self._merged(k, memory) if merge else None
        self.pro, self.ins = prologue(k, memory, self.uses, self.work_dtype, placed=placed)

    def _merged(self, k, memory):
        """``(placements, domain)`` with the reduced axes that merge merged (and ``domain``, ``kept``,
        ``red`` and ``red_shape`` set to match), or None when none do."""
        if k.kind == "reduce" and has_reshape([k.prologue]):
            return None
        ins = [memory.read(b, v) for b, v in k.inputs]
        if any(len(p.strides) != len(self.domain) for p in ins):
            return None
        red = set(self.red)
        groups: list[list[int]] = []
        for a in range(len(self.domain)):
            g = groups[-1] if groups else None
            if g is not None and a in red and g[-1] in red and joins(g, a, self.domain, ins):
                g.append(a)
            else:
                groups.append([a])
        if len(groups) == len(self.domain):
            return None
        ins = [merged(p, groups, self.domain) for p in ins]
        self.domain = tuple(group_size(g, self.domain) for g in groups)
        self.kept = [i for i, g in enumerate(groups) if g[0] not in red]
        self.red = [i for i, g in enumerate(groups) if g[0] in red]
        self.red_shape = tuple(self.domain[i] for i in self.red)
        return ins, self.domain

    def at(self, out_idx, red_idx) -> ir.V:
        """The prologue's value at the output index ``out_idx`` and reduced index ``red_idx``."""
        return self.pro(domain_index(self.domain, self.kept, self.red, out_idx, red_idx))


def thread(k, target, memory, name: str) -> list[ir.Kernel]:
    """One work item per output element, a loop per reduced axis (in order: the sum's rounding does
    not depend on the target)."""
    st = _Start(k, memory, merge=True)
    domain, axes, kept, out_shape = st.domain, tuple(st.red), st.kept, st.out_shape
    check_max_nonempty(k.reduce_op, st.red_shape, st.out_shape, f"kernel {k}")
    uses, op, acc_dtype, work_dtype = st.uses, st.op, k.acc_dtype, st.work_dtype
    width = _column_block(k, target, domain, axes, kept, st.ins)
    if width > 1:  # each work item sums ``width`` consecutive columns, its rows' loads one vector each
        work = items(target, out_shape[:-1] + (out_shape[-1] // width,), "o")
        idx_outs = [work.index[:-1] + (ir.add(ir.mul(work.index[-1], width), j),) for j in range(width)]
        flats = [None] * width
    else:
        work = items(target, out_shape, "o")
        idx_outs, flats = [work.index], [work.flat]
    accs = [f"acc{c}" if width > 1 else "acc" for c in range(width)]
    inner: tuple = tuple(ir.Assign(a, accumulate(op, ir.var(a, work_dtype), st.at(
        idx, tuple(ir.var(f"r{j}") for j in range(len(axes)))))) for a, idx in zip(accs, idx_outs))
    for j in reversed(range(len(axes))):
        inner = (ir.Loop(f"r{j}", ir.const(0), dim(domain[axes[j]]), inner, ordered=width > 1),)
    body = [*(ir.Assign(a, reduce_identity(op, work_dtype)) for a in accs), *inner]
    for a, idx, flat in zip(accs, idx_outs, flats):
        result = "result" + a[3:]
        body.append(ir.Assign(result, ir.cast(ir.var(a, work_dtype), acc_dtype)))
        body += epilogue_stores(k, memory, uses, out_shape, idx, ir.var(result, acc_dtype), flat=flat)
    notes = {"fused": " ".join(k.fused), "schedule": "thread"}
    if width > 1:
        notes["columns"] = width
    return [kernel(name, uses, work, body, notes=notes)]


def _column_block(k, target, domain, axes, kept, ins) -> int:
    """How many consecutive output columns one work item of reduce ``k`` sums (1: one).

    A sum over rows of a row-major array (a bias's gradient, a LayerNorm weight's: the columns
    contiguous, the reduced axes strided) as one work item per column is a loop of strided scalar
    loads per column, which LLVM vectorises across rows with gathers if at all (a GPT's bias gradient,
    512 rows of 1024: 1.7 ms). With several columns per item, each row's loads are consecutive and
    their accumulators independent: in an ordered loop (``ir.Loop.ordered``: no reassociation, so the
    loop vectoriser leaves it) the SLP vectoriser makes one vector load and add of them (0.3 ms).
    Each column sums its rows in row order."""
    if not target.column_blocks or k.kind != "reduce" or not kept or not ins or has_reshape([k.prologue]):
        return 1
    last = kept[-1]
    n = domain[last]
    if type(n) is not int or any(len(p.strides) != len(domain) or p.box is not None or p.strides[last] != 1
                                 for p in ins):
        return 1  # (every input read at the domain's index, the columns contiguous, nothing masked)
    return next((w for w in target.column_blocks if n % w == 0 and n >= w), 1)


def _butterfly(target, op: str, work_dtype, lanes: int | None = None, reg: str = "acc") -> list:
    """Statements reducing register ``reg`` over a warp's lanes by shuffles (xor masks from half the
    warp down to 1; ``lanes``: only the masks below it, when fewer lanes hold values)."""
    acc = ir.var(reg, work_dtype)
    masks = [target.warp >> s for s in range(1, target.warp.bit_length())]
    return [ir.Assign(reg, accumulate(op, acc, ir.shfl_xor(acc, m))) for m in masks if lanes is None or m < lanes]


def block_reduce(target, op: str, work_dtype, threads: int, scratch: str = "partials", reg: str = "acc") -> list:
    """Statements reducing register ``reg`` over a block into ``reg`` of thread 0: a butterfly of
    shuffles in each warp, the warps' partials through the shared array ``scratch``, a butterfly
    again."""
    warps = threads // target.warp
    out = _butterfly(target, op, work_dtype, reg=reg)
    if warps == 1:
        return out
    lane, w = ir.mod(ir.thread(0), target.warp), ir.div(ir.thread(0), target.warp)
    out.append(ir.If(ir.alu("LessThan", lane, ir.const(1)), (ir.Store(scratch, w, ir.var(reg, work_dtype)),)))
    out.append(ir.Barrier())
    has = ir.alu("LessThan", lane, ir.const(warps))
    out.append(ir.Assign(reg, ir.load(scratch, work_dtype, lane, has, reduce_identity(op, work_dtype).arg)))
    return out + _butterfly(target, op, work_dtype, warps, reg)


def row(k, target, memory, name: str) -> list[ir.Kernel]:
    """A block per output element: its threads stride the row, then reduce as a block."""
    st = _Start(k, memory)
    uses, op, work_dtype, out_shape, red_shape = st.uses, st.op, st.work_dtype, st.out_shape, st.red_shape
    threads = target.row_threads
    out_idx = tuple(unflatten(ir.block(0), out_shape))
    step = accumulate(op, ir.var("acc", work_dtype), st.at(out_idx, tuple(unflatten(ir.var("r"), red_shape))))
    body = [ir.Assign("acc", reduce_identity(op, work_dtype)),
            ir.Loop("r", ir.thread(0), dim(prod(red_shape)), (ir.Assign("acc", step),), ir.const(threads)),
            *block_reduce(target, op, work_dtype, threads),
            ir.Assign("result", ir.cast(ir.var("acc", work_dtype), k.acc_dtype)),
            ir.If(ir.alu("LessThan", ir.thread(0), ir.const(1)),
                  tuple(epilogue_stores(k, memory, uses, out_shape, out_idx, ir.var("result", k.acc_dtype))))]
    work = Work((dim(prod(out_shape)),), (threads,), out_idx)
    return [kernel(name, uses, work, body, shared=(ir.Shared("partials", work_dtype, threads // target.warp),),
                   notes={"fused": " ".join(k.fused), "schedule": "row"})]


def warp(k, target, memory, name: str) -> list[ir.Kernel]:
    """A warp per output element: its lanes stride the row, then a butterfly of shuffles leaves the
    sum in every lane and lane 0 runs the epilogue. A block holds ``row_threads / warp`` outputs; a
    warp's lanes are all in or all out of range, so every shuffle reads an active lane. For rows too
    short to keep a block of ``row`` busy, and many of them (a GEMV's outputs)."""
    st = _Start(k, memory)
    uses, op, work_dtype, out_shape, red_shape = st.uses, st.op, st.work_dtype, st.out_shape, st.red_shape
    per = target.row_threads // target.warp
    lane = ir.mod(ir.thread(0), target.warp)
    o = ir.var("o")
    out_idx = tuple(unflatten(o, out_shape))
    step = accumulate(op, ir.var("acc", work_dtype), st.at(out_idx, tuple(unflatten(ir.var("r"), red_shape))))
    m = prod(out_shape)
    body = [ir.Assign("o", ir.add(ir.mul(ir.block(0), per), ir.div(ir.thread(0), target.warp))),
            ir.If(ir.alu("LessThan", o, dim(m)), (
                ir.Assign("acc", reduce_identity(op, work_dtype)),
                ir.Loop("r", lane, dim(prod(red_shape)), (ir.Assign("acc", step),), ir.const(target.warp)),
                *_butterfly(target, op, work_dtype),
                ir.Assign("result", ir.cast(ir.var("acc", work_dtype), k.acc_dtype)),
                ir.If(ir.alu("LessThan", lane, ir.const(1)),
                      tuple(epilogue_stores(k, memory, uses, out_shape, out_idx, ir.var("result", k.acc_dtype),
                                            flat=o)))))]
    work = Work((blocks(m, per),), (per * target.warp,), out_idx)
    return [kernel(name, uses, work, body, notes={"fused": " ".join(k.fused), "schedule": "warp"})]


def wide_fits(k, memory) -> bool:
    """Whether product ``k`` may take ``wide``: float32, float16 or bfloat16 operands of one dtype,
    unmasked, both read along its one reduced axis at stride 1, their offsets and every other stride
    multiples of ``ir.wide_lanes`` elements (but along axes of one element), so that each lane's
    four or eight elements are one aligned
    16-byte load (device buffers start 256-byte aligned). Plain ints only: code is shared by every
    binding of the same code, so a size that is a dim's value (``DimValue``) cannot promise an
    alignment."""
    if k.kind != "matmul" or len(k.axes) != 1 or len({buf.dtype for buf, _ in k.inputs}) != 1:
        return False
    r, w = k.axes[0], ir.wide_lanes(k.inputs[0][0].dtype)
    one = [type(n) is int and n == 1 for n in sizes(memory, k.domain)]  # (a size-1 axis: its stride unread)
    for buf, view in k.inputs:
        p = memory.read(buf, view)
        if p.dtype not in ir.WIDE_DTYPES or p.box is not None or type(p.offset) is not int or p.offset % w:
            return False
        if any(not one[a] and (type(s) is not int or (s != 1 if a == r else s % w)) for a, s in enumerate(p.strides)):
            return False
    return True


def wide(k, target, memory, name: str) -> list[ir.Kernel]:
    """``warp`` with 16-byte loads (``wide_fits``): lane ``l`` of an output's warp reads elements
    ``wl .. wl + w - 1`` of both operands (``w``: 4 float32, 8 float16 or bfloat16), then every
    ``w * warp``-th such group, accumulating their products in order (16-bit ones multiplied in
    float32, as the reference); the row's last ``K mod w`` elements one per lane; a butterfly of
    shuffles."""
    st = _Start(k, memory)
    uses, work_dtype, out_shape, red_shape = st.uses, st.work_dtype, st.out_shape, st.red_shape
    d = k.inputs[0][0].dtype
    w = ir.wide_lanes(d)
    per = target.row_threads // target.warp
    lane = ir.mod(ir.thread(0), target.warp)
    o = ir.var("o")
    out_idx = tuple(unflatten(o, out_shape))
    n = dim(red_shape[0])
    whole = ir.mul(ir.div(n, w), w)  # (the elements read 16 bytes at a time)
    a, b = (uses.use(p, "r") for p in st.ins)
    regs = [tuple(f"{x}{i}" for i in range(w)) for x in ("wa", "wb")]

    def at(p, r):
        return address(p, domain_index(st.domain, st.kept, st.red, out_idx, (r,)))

    acc = ir.var("acc", work_dtype)

    def product(x, y):
        return ir.cast(ir.alu("Mul", ir.cast(ir.var(x, d), dt.float32), ir.cast(ir.var(y, d), dt.float32)), work_dtype)

    sums = [ir.Assign("acc", ir.alu("Add", acc, product(x, y))) for x, y in zip(*regs)]
    group = (ir.WideLoad(regs[0], a.name, d, at(a, ir.var("r4"))),
             ir.WideLoad(regs[1], b.name, d, at(b, ir.var("r4"))), *sums)
    tail = accumulate("sum", acc, st.at(out_idx, (ir.var("r"),)))
    m = prod(out_shape)
    body = [ir.Assign("o", ir.add(ir.mul(ir.block(0), per), ir.div(ir.thread(0), target.warp))),
            ir.If(ir.alu("LessThan", o, dim(m)), (
                ir.Assign("acc", reduce_identity("sum", work_dtype)),
                ir.Loop("r4", ir.mul(lane, w), whole, group, ir.const(target.warp * w)),
                ir.Loop("r", ir.add(whole, lane), n, (ir.Assign("acc", tail),), ir.const(target.warp)),
                *_butterfly(target, "sum", work_dtype),
                ir.Assign("result", ir.cast(acc, k.acc_dtype)),
                ir.If(ir.alu("LessThan", lane, ir.const(1)),
                      tuple(epilogue_stores(k, memory, uses, out_shape, out_idx, ir.var("result", k.acc_dtype),
                                            flat=o)))))]
    work = Work((blocks(m, per),), (per * target.warp,), out_idx)
    return [kernel(name, uses, work, body, notes={"fused": " ".join(k.fused), "schedule": "wide"})]


def split(k, target, memory, name: str) -> list[ir.Kernel]:
    """The multi-block path for long rows: ``split_parts`` blocks per output each reduce one chunk
    of its row into a partial (float32 for 16-bit inputs), then a warp per output reduces its
    partials and runs the epilogue. Two kernels; the partials live in a scratch."""
    st = _Start(k, memory)
    uses, op, work_dtype, out_shape, red_shape = st.uses, st.op, st.work_dtype, st.out_shape, st.red_shape
    parts, threads, warp = target.split_parts, target.row_threads, target.warp
    m, r = prod(out_shape), prod(red_shape)
    chunk = -(-r // parts)
    partials = uses.use(memory.scratch("partials", work_dtype, (m * parts,)), "w")
    o, part = ir.div(ir.block(0), parts), ir.mod(ir.block(0), parts)
    out_idx = tuple(unflatten(o, out_shape))
    start = ir.add(ir.mul(part, chunk), ir.thread(0))
    stop = ir.V("Where", ir.INDEX, (ir.alu("LessThan", ir.mul(ir.add(part, 1), chunk), ir.const(r)),
                                    ir.mul(ir.add(part, 1), chunk), ir.const(r)))
    step = accumulate(op, ir.var("acc", work_dtype), st.at(out_idx, tuple(unflatten(ir.var("r"), red_shape))))
    body = [ir.Assign("acc", reduce_identity(op, work_dtype)),
            ir.Loop("r", start, stop, (ir.Assign("acc", step),), ir.const(threads)),
            *block_reduce(target, op, work_dtype, threads),
            ir.Store(partials.name, ir.block(0), ir.var("acc", work_dtype),
                     ir.alu("LessThan", ir.thread(0), ir.const(1)))]
    notes = {"fused": " ".join(k.fused), "schedule": "split"}
    first = kernel(name, uses, Work((ir.const(m * parts),), (threads,), ()), body,
                   shared=(ir.Shared("partials", work_dtype, threads // warp),), notes=notes)
    finish_uses = Uses()
    finish_uses.use(partials, "r")
    lane = ir.thread(0)
    has = ir.alu("LessThan", lane, ir.const(parts))
    finish = [ir.Assign("acc", ir.load(partials.name, work_dtype, ir.add(ir.mul(ir.block(0), parts), lane), has,
                                       reduce_identity(op, work_dtype).arg))]
    finish += _butterfly(target, op, work_dtype)
    finish.append(ir.Assign("result", ir.cast(ir.var("acc", work_dtype), k.acc_dtype)))
    out_idx = tuple(unflatten(ir.block(0), out_shape))
    finish.append(ir.If(ir.alu("LessThan", lane, ir.const(1)),
                        tuple(epilogue_stores(k, memory, finish_uses, out_shape, out_idx,
                                              ir.var("result", k.acc_dtype)))))
    second = kernel(f"{name}_finish", finish_uses, Work((ir.const(m),), (warp,), ()), finish, notes=notes)
    return [first, second]
