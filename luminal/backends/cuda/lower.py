"""The GPU lowering: each kernel-graph kernel as one or more GPU kernels of the kernel IR.

Kernels take the symbolic dims as parameters (``codegen.lower.dim`` with no binding), so a program
is lowered once and launched for any batch size. Every buffer is contiguous in the arena; a kernel
reads it through its views (strides, offset, mask) and writes whole buffers in row-major order.

| kind        | shape chosen (``choices``: the alternatives, the cost model's pick first)
|-------------|---------------------------------------------------------------------------------
| elementwise | one thread per element, ``ELEMENTWISE_THREADS`` per block, a masked tail
| reduce      | ``row``: a block per output (threads stride the row, warp shuffles, then the warps'
|             | partials through shared memory), or ``thread``: a thread per output looping over
|             | its row (short rows, many outputs), or ``split``: blocks share a long row; prologue
|             | and epilogue fused either way; float32 sums accumulate in float64, 16-bit inputs in
|             | float32 (``codegen.lower.accumulator``)
| matmul      | ``mma``: tensor cores (float16 / bfloat16 in, float32 accumulate), a warp per 16x8
|             | tile, ``mma.sync.m16n8k16`` in the PTX fragment layout; ``tiled``: 16x16 tiles of
|             | both operands through shared memory (float32/float64/int32 and the fallback);
|             | ``gemv``: a product with one output row or column, as a ``row`` reduction (a
|             | block per output, the whole block on its dot product); the epilogue fused
| gather      | one thread per output element; an index out of range sets the program's error flag
| scatter_add | copy ``dst`` into an accumulator, one atomic add per source element, round into the
|             | output (16-bit and bool accumulate in float32 / int32, as the reference does)

A rolled loop's body is lowered once: every call launches the same kernels over the call's
buffers (``Launch.bind``), a routine called per trip.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from luminal.codegen import ir
from luminal.codegen.lower import (
    Placed,
    Values,
    accumulate,
    accumulator,
    contiguous_index,
    dim,
    index_read,
    read,
    reduce_identity,
    unflatten,
)
from luminal.core import dtype as dt
from luminal.core.kernel_graph import Expr
from luminal.core.symbolic import is_static, prod

ELEMENTWISE_THREADS = 256
ROW_THREADS = 128
WARP = 32
TILE = 16
HALF = (dt.float16, dt.bfloat16)
ERROR_FLAG = "error_flag"  # int32[2]: set to (1, the index) by a kernel that finds an index out of range


@dataclass
class Launch:
    """One GPU kernel and what it is launched over: ``args`` maps each of the kernel's buffer names to
    the kernel-graph Buffer it reads or writes (``None``: a scratch of ``scratch[name]`` = (dtype,
    element count Dim), owned by this launch)."""

    kernel: ir.Kernel
    args: dict
    scratch: dict = field(default_factory=dict)
    choice: str = ""
    choices: tuple = ()


def _name(kind: str, k: ir.Kernel) -> ir.Kernel:
    """``k`` with its parameters (the dims its code reads), named by its kind and a digest of its
    code: the same code gets the same name in every program (so the NVRTC cache hits)."""
    k.params = ir.used_params(k)
    digest = hashlib.sha256(ir.fingerprint(k).encode()).hexdigest()[:10]
    k.name = f"{kind}_{digest}"
    return ir.check(k)


class _Args:
    """The IR buffers a kernel uses: a name per kernel-graph Buffer, its dtype and access."""

    def __init__(self):
        self.bufs: dict[str, ir.Buf] = {}
        self.args: dict[str, object] = {}
        self.scratch: dict[str, tuple] = {}
        self._names: dict[int, str] = {}

    def name(self, buf) -> str:
        n = self._names.get(id(buf))
        if n is None:
            n = self._names[id(buf)] = f"b{len(self._names)}"
            self.args[n] = buf
        return n

    def use(self, name: str, dtype, access: str) -> None:
        old = self.bufs.get(name)
        if old is not None and old.access != access:
            access = "rw"
        self.bufs[name] = ir.Buf(name, dtype, access)

    def view(self, buf, view) -> Placed:
        p = Placed(self.name(buf), buf.dtype, view.offset, tuple(view.strides), view.mask, view.pad)
        return p

    def reader(self, placements):
        def leaf(e, at):
            p = placements[e.arg]
            self.use(p.name, p.dtype, "r")
            return read(p, at)
        return leaf

    def output(self, buf) -> str:
        n = self.name(buf)
        self.use(n, buf.dtype, "w")
        return n

    def new_scratch(self, tag: str, dtype, count) -> str:
        n = f"s_{tag}"
        self.args[n] = None
        self.scratch[n] = (dtype, count)
        return n

    def flag(self) -> str:
        self.args[ERROR_FLAG] = ERROR_FLAG
        self.use(ERROR_FLAG, dt.int32, "w")
        return ERROR_FLAG



def _grid(n, threads: int):
    return ir.div(ir.add(dim(n), threads - 1), threads)


def _gid(threads: int) -> ir.V:
    return ir.add(ir.mul(ir.block(0), threads), ir.thread(0))


def _store_at(args: _Args, buf, index, value, valid=None) -> ir.Store:
    return ir.Store(args.output(buf), index, ir.cast(value, buf.dtype), valid)


# elementwise --------------------------------------------------------------------------------------

def elementwise(k) -> list[Launch]:
    a = _Args()
    n = prod(k.domain)
    gid = _gid(ELEMENTWISE_THREADS)
    live = ir.alu("LessThan", gid, dim(n))
    idx = tuple(unflatten(ir.var("i"), k.domain))
    ins = [a.view(b, v) for b, v in k.inputs]
    values = Values(a.reader(ins), lambda e: tuple(k.inputs[e.arg][1].shape))
    body = [ir.Assign("i", gid)]
    stores = []
    for b, e in k.outputs:  # an output stored in a shape of its own (same order): its own index
        at = idx if tuple(b.shape) == tuple(k.domain) else tuple(unflatten(ir.var("i"), b.shape))
        v = values.at(e, at if values.shape(e) is not None else ())
        stores.append(_store_at(a, b, ir.var("i"), v))
    body.append(ir.If(live, tuple(stores)))
    kern = ir.Kernel("k", tuple(a.bufs.values()), (), (_grid(n, ELEMENTWISE_THREADS),),
                     tuple(body), block=(ELEMENTWISE_THREADS,))
    return [Launch(_name("elementwise", kern), a.args, a.scratch, "thread per element", ("thread per element",))]


# reductions ---------------------------------------------------------------------------------------

def _split(k):
    kept = [i for i in range(len(k.domain)) if i not in k.axes]
    red = list(k.axes)
    return kept, red, tuple(k.domain[i] for i in kept), tuple(k.domain[i] for i in red)


def _domain_index(k, out_idx, red_idx) -> tuple:
    kept, red, _, _ = _split(k)
    full = [None] * len(k.domain)
    for i, a in enumerate(kept):
        full[a] = out_idx[i]
    for i, a in enumerate(red):
        full[a] = red_idx[i]
    return tuple(full)


def _prologue(k, a: _Args, op: str, work):
    """``(value at a domain index -> IR value in the work dtype)`` of what the kernel reduces."""
    ins = [a.view(b, v) for b, v in k.inputs]
    if k.kind == "matmul":
        prologue = Expr("Mul", tuple(Expr("Load", (), i, b.dtype) for i, (b, _) in enumerate(k.inputs)), None,
                        k.acc_dtype)
    else:
        prologue = k.prologue
    values = Values(a.reader(ins), lambda e: tuple(k.inputs[e.arg][1].shape))
    half_products = op == "sum" and k.acc_dtype in HALF and prologue.op == "Mul" and \
        all(x.op == "Load" for x in prologue.args)

    def at(idx):
        if half_products:  # 16-bit products in float32, as the reference's contraction does
            x, y = (ir.cast(values.at(t, idx), dt.float32) for t in prologue.args)
            return ir.cast(ir.alu("Mul", x, y), work)
        v = values.at(prologue, idx if values.shape(prologue) is not None else ())
        return ir.cast(v, work)
    return at


def _epilogue(k, a: _Args, out_idx, result: ir.V, valid=None) -> list:
    """Stores of every output at ``out_idx`` (``Acc`` = ``result``). An output buffer (and the
    epilogue's views) may regroup the output's elements (a kept axis of size 1): each output is
    evaluated at the same element's index in its own shape."""
    _, _, out_shape, _ = _split(k)
    epi = [a.view(b, v) for b, v in k.epilogue_inputs]
    read_epi = a.reader(epi)

    def leaf(e, at):
        return result if e.op == "Acc" else read_epi(e, at)

    values = Values(leaf, lambda e: out_shape if e.op == "Acc" else tuple(k.epilogue_inputs[e.arg][1].shape))
    flat = contiguous_index(out_idx, out_shape)
    stores = []
    for b, e in k.outputs:
        at = out_idx if tuple(b.shape) == tuple(out_shape) else tuple(unflatten(flat, b.shape))
        stores.append(_store_at(a, b, flat, values.at(e, at if values.shape(e) is not None else ()), valid))
    return stores


def _work_dtype(k):
    """The dtype a reduction kernel accumulates in (``codegen.lower.accumulator``: float64 for a
    float32 sum, float32 for 16-bit floats), in every thread's loop, the block's tree and the split's
    partials alike."""
    return accumulator(_op(k), k.acc_dtype)


def _op(k) -> str:
    return "sum" if k.kind == "matmul" else k.reduce_op


def reduce_thread(k) -> Launch:
    """A thread per output element, looping over its row."""
    a = _Args()
    kept, red, out_shape, red_shape = _split(k)
    work, op = _work_dtype(k), _op(k)
    pro = _prologue(k, a, op, work)
    m = prod(out_shape)
    gid = _gid(ELEMENTWISE_THREADS)
    out_idx = tuple(unflatten(ir.var("o"), out_shape))
    red_idx = tuple(unflatten(ir.var("r"), red_shape))
    step = accumulate(op, ir.var("acc", work), pro(_domain_index(k, out_idx, red_idx)))
    body = (ir.Assign("o", gid), ir.If(ir.alu("LessThan", ir.var("o"), dim(m)), (
        ir.Assign("acc", reduce_identity(op, work)),
        ir.Loop("r", ir.const(0), dim(prod(red_shape)), (ir.Assign("acc", step),)),
        ir.Assign("result", ir.cast(ir.var("acc", work), k.acc_dtype)),
        *_epilogue(k, a, out_idx, ir.var("result", k.acc_dtype)))))
    kern = ir.Kernel("k", tuple(a.bufs.values()), (), (_grid(m, ELEMENTWISE_THREADS),), body,
                     block=(ELEMENTWISE_THREADS,))
    return Launch(_name("reduce_thread", kern), a.args, a.scratch, "thread")


def _block_reduce(op: str, work, threads: int) -> list:
    """Statements reducing register ``acc`` over a block into ``acc`` of thread 0: a butterfly of
    shuffles in each warp, the warps' partials through shared memory, a butterfly again in warp 0."""
    warps = threads // WARP
    out: list = []
    for m in (16, 8, 4, 2, 1):
        out.append(ir.Assign("acc", accumulate(op, ir.var("acc", work), ir.shfl_xor(ir.var("acc", work), m))))
    if warps == 1:
        return out
    lane, warp = ir.mod(ir.thread(0), WARP), ir.div(ir.thread(0), WARP)
    out.append(ir.If(ir.alu("LessThan", lane, ir.const(1)), (ir.Store("partials", warp, ir.var("acc", work)),)))
    out.append(ir.Barrier())
    has = ir.alu("LessThan", lane, ir.const(warps))
    out.append(ir.Assign("acc", ir.load("partials", work, lane, has, reduce_identity(op, work).arg)))
    for m in (16, 8, 4, 2, 1):
        if m < warps:
            out.append(ir.Assign("acc", accumulate(op, ir.var("acc", work), ir.shfl_xor(ir.var("acc", work), m))))
    return out


def reduce_row(k, tag="reduce_row") -> Launch:
    """A block per output element: its threads stride the row, then reduce as a block."""
    a = _Args()
    _, _, out_shape, red_shape = _split(k)
    work, op = _work_dtype(k), _op(k)
    pro = _prologue(k, a, op, work)
    threads = ROW_THREADS
    out_idx = tuple(unflatten(ir.block(0), out_shape))
    red_idx = tuple(unflatten(ir.var("r"), red_shape))
    step = accumulate(op, ir.var("acc", work), pro(_domain_index(k, out_idx, red_idx)))
    body = [ir.Assign("acc", reduce_identity(op, work)),
            ir.Loop("r", ir.thread(0), dim(prod(red_shape)), (ir.Assign("acc", step),), ir.const(threads)),
            *_block_reduce(op, work, threads),
            ir.Assign("result", ir.cast(ir.var("acc", work), k.acc_dtype)),
            ir.If(ir.alu("LessThan", ir.thread(0), ir.const(1)),
                  tuple(_epilogue(k, a, out_idx, ir.var("result", k.acc_dtype))))]
    kern = ir.Kernel("k", tuple(a.bufs.values()), (), (dim(prod(out_shape)),), tuple(body),
                     block=(threads,), shared=(ir.Shared("partials", work, threads // WARP),))
    return Launch(_name(tag, kern), a.args, a.scratch, "row")


SPLIT_ROW = 16384  # a static row at least this long, with few outputs, is split over several blocks
SPLIT_OUTPUTS = 64  # ... when there are at most this many outputs (else every SM has rows already)
SPLIT_PARTS = 32  # blocks per row (one warp finishes their partials)


def reduce_split(k, parts: int = SPLIT_PARTS) -> list[Launch]:
    """The multi-block path for long rows: ``parts`` blocks per output each reduce one chunk of its
    row into a partial (float32 for 16-bit inputs), then a warp per output reduces its partials and
    runs the epilogue. Two launches; the partials live in a scratch of the step."""
    _, _, out_shape, red_shape = _split(k)
    work, op = _work_dtype(k), _op(k)
    m, r = prod(out_shape), prod(red_shape)
    chunk = -(-r // parts)
    threads = ROW_THREADS
    a = _Args()
    pro = _prologue(k, a, op, work)
    part_name = a.new_scratch("partials", work, m * parts)
    a.use(part_name, work, "w")
    o, part = ir.div(ir.block(0), parts), ir.mod(ir.block(0), parts)
    out_idx = tuple(unflatten(o, out_shape))
    red_idx = tuple(unflatten(ir.var("r"), red_shape))
    start = ir.add(ir.mul(part, chunk), ir.thread(0))
    stop = ir.V("Where", ir.INDEX, (ir.alu("LessThan", ir.mul(ir.add(part, 1), chunk), ir.const(r)),
                                    ir.mul(ir.add(part, 1), chunk), ir.const(r)))
    step = accumulate(op, ir.var("acc", work), pro(_domain_index(k, out_idx, red_idx)))
    body = [ir.Assign("acc", reduce_identity(op, work)),
            ir.Loop("r", start, stop, (ir.Assign("acc", step),), ir.const(threads)),
            *_block_reduce(op, work, threads),
            ir.Store(part_name, ir.block(0), ir.var("acc", work), ir.alu("LessThan", ir.thread(0), ir.const(1)))]
    first = ir.Kernel("k", tuple(a.bufs.values()), (), (ir.const(m * parts),), tuple(body), block=(threads,),
                      shared=(ir.Shared("partials", work, threads // WARP),))
    b = _Args()
    b.args[part_name] = None
    b.use(part_name, work, "r")
    lane = ir.thread(0)
    has = ir.alu("LessThan", lane, ir.const(parts))
    finish = [ir.Assign("acc", ir.load(part_name, work, ir.add(ir.mul(ir.block(0), parts), lane), has,
                                       reduce_identity(op, work).arg))]
    for mask in (16, 8, 4, 2, 1):
        finish.append(ir.Assign("acc", accumulate(op, ir.var("acc", work), ir.shfl_xor(ir.var("acc", work), mask))))
    finish.append(ir.Assign("result", ir.cast(ir.var("acc", work), k.acc_dtype)))
    out_idx = tuple(unflatten(ir.block(0), out_shape))
    finish.append(ir.If(ir.alu("LessThan", lane, ir.const(1)),
                        tuple(_epilogue(k, b, out_idx, ir.var("result", k.acc_dtype)))))
    second = ir.Kernel("k", tuple(b.bufs.values()), (), (ir.const(m),), tuple(finish), block=(WARP,))
    scratch = {part_name: (work, m * parts)}
    return [Launch(_name("reduce_split", first), a.args, scratch, "split", ("split", "row")),
            Launch(_name("reduce_split_finish", second), b.args, scratch, "split")]


def reduce(k) -> list[Launch]:
    """The cost model: a block per row when rows are long or unknown (a block's 128 threads share the
    row); a thread per output when rows are short (a block would idle most of its threads); several
    blocks per row when rows are very long and too few to fill the GPU."""
    _, _, out_shape, red_shape = _split(k)
    r, m = prod(red_shape), prod(out_shape)
    if is_static(r) and is_static(m) and r >= SPLIT_ROW and m <= SPLIT_OUTPUTS:
        return reduce_split(k)
    short = is_static(r) and (r <= 32 or (r <= 256 and is_static(m) and m >= 4096))
    options = ("thread", "row") if short else ("row", "thread", "split")
    first = reduce_thread(k) if short else reduce_row(k)
    first.choices = options
    return [first]


# matmul -------------------------------------------------------------------------------------------

def _matmul_axes(k):
    """``(batch axes, m axis, n axis, k axis)`` of the domain, or None when the product has fewer than
    two output axes or more than one reduced axis (then it is a reduction)."""
    kept, red, _, _ = _split(k)
    if len(red) != 1 or len(kept) < 2:
        return None
    return kept[:-2], kept[-2], kept[-1], red[0]


def _roles(k, axes):
    """``(slot of A, slot of B)``: A is the operand constant along the n axis (stride 0), B along m."""
    _, m_ax, n_ax, _ = axes
    s0, s1 = (v.strides for _, v in k.inputs)
    if s0[n_ax] == 0 and s1[m_ax] == 0:
        return 0, 1
    if s1[n_ax] == 0 and s0[m_ax] == 0:
        return 1, 0
    return None


def matmul(k) -> list[Launch]:
    """Tensor cores for 16-bit operands, shared-memory tiles otherwise; a product with a single row
    or column of output (decode-shaped: GEMV) as a row reduction, a block per output."""
    axes = _matmul_axes(k)
    if axes is not None and not any(v.mask is not None for _, v in k.inputs) and _roles(k, axes) is not None:
        _, m_ax, n_ax, _ = axes
        skinny = (is_static(k.domain[m_ax]) and k.domain[m_ax] == 1) or \
            (is_static(k.domain[n_ax]) and k.domain[n_ax] == 1)
        if skinny:
            launch = reduce_row(k, "gemv")
            launch.choice, launch.choices = "gemv", ("gemv", "tiled")
            return [launch]
        if all(b.dtype in HALF for b, _ in k.inputs) and k.inputs[0][0].dtype is k.inputs[1][0].dtype:
            launch = matmul_mma(k, axes)
            launch.choices = ("mma", "tiled")
            return [launch]
        launch = matmul_tiled(k, axes)
        launch.choices = ("tiled", "thread")
        return [launch]
    launch = reduce_row(k) if not is_static(prod(_split(k)[3])) or prod(_split(k)[3]) > 32 else reduce_thread(k)
    return [launch]


def _batch_index(k, batch_axes, b: ir.V):
    shape = tuple(k.domain[i] for i in batch_axes)
    return dict(zip(batch_axes, unflatten(b, shape))) if batch_axes else {}


def _operand(k, a: _Args, slot: int, fixed: dict, work, valid) -> ir.V:
    """Operand ``slot`` (0: a, 1: b) of the product at the domain index ``fixed``, as ``work``; 0 where
    ``valid`` is False (a tile's edge)."""
    buf, view = k.inputs[slot]
    p = a.view(buf, view)
    a.use(p.name, p.dtype, "r")
    idx = tuple(fixed[i] for i in range(len(k.domain)))
    v = read(p, idx)
    index, guard = v.args[0], v.args[1] if len(v.args) > 1 else None
    guard = ir.both(guard, valid)
    return ir.cast(ir.load(p.name, p.dtype, index, guard, 0), work)


def matmul_tiled(k, axes) -> Launch:
    """A 16x16 block of threads per 16x16 output tile; each step of 16 along k loads one tile of each
    operand into shared memory (a thread an element), then every thread takes its dot product of the
    two tiles: its 16 products (float32 for 16-bit operands, else the operands' dtype) summed as a
    pairwise tree (4 roundings deep), the tile's sum added into the accumulator (``_work_dtype``:
    float64 for float32), so the error does not grow with k any faster than a sum's."""
    batch_axes, m_ax, n_ax, k_ax = axes
    sa, sb = _roles(k, axes)
    a = _Args()
    compute, work = (dt.float32 if k.acc_dtype in HALF else k.acc_dtype), _work_dtype(k)
    m, n, kk = (k.domain[i] for i in (m_ax, n_ax, k_ax))
    tx, ty = ir.thread(0), ir.thread(1)
    row = ir.add(ir.mul(ir.block(1), TILE), ty)
    col = ir.add(ir.mul(ir.block(0), TILE), tx)
    batch = _batch_index(k, batch_axes, ir.block(2))
    t = ir.var("t")
    # tile loads: A[row, t + tx], B[t + ty, col]
    a_k, b_k = ir.add(t, tx), ir.add(t, ty)
    a_fixed = {**batch, m_ax: row, n_ax: ir.const(0), k_ax: a_k}
    b_fixed = {**batch, m_ax: ir.const(0), n_ax: col, k_ax: b_k}
    a_ok = ir.both(ir.alu("LessThan", row, dim(m)), ir.alu("LessThan", a_k, dim(kk)))
    b_ok = ir.both(ir.alu("LessThan", col, dim(n)), ir.alu("LessThan", b_k, dim(kk)))
    a_val = _operand(k, a, sa, a_fixed, compute, a_ok)
    b_val = _operand(k, a, sb, b_fixed, compute, b_ok)
    slot = ir.add(ir.mul(ty, TILE), tx)
    dot = _pairwise([ir.alu("Mul", ir.load("tile_a", compute, ir.add(ir.mul(ty, TILE), j)),
                             ir.load("tile_b", compute, ir.add(ir.mul(j, TILE), tx))) for j in range(TILE)])
    body = [ir.Assign("acc", reduce_identity("sum", work)),
            ir.Loop("t", ir.const(0), dim(kk), (
                ir.Store("tile_a", slot, a_val), ir.Store("tile_b", slot, b_val), ir.Barrier(),
                ir.Assign("acc", ir.alu("Add", ir.var("acc", work), ir.cast(dot, work))),
                ir.Barrier()), ir.const(TILE)),
            ir.Assign("result", ir.cast(ir.var("acc", work), k.acc_dtype))]
    out_valid = ir.both(ir.alu("LessThan", row, dim(m)), ir.alu("LessThan", col, dim(n)))
    out_idx = _out_index(k, batch, row, col)
    body.append(ir.If(out_valid, tuple(_epilogue(k, a, out_idx, ir.var("result", k.acc_dtype)))))
    batches = prod(tuple(k.domain[i] for i in batch_axes)) if batch_axes else 1
    kern = ir.Kernel("k", tuple(a.bufs.values()), (),
                     (_grid(n, TILE), _grid(m, TILE), dim(batches)), tuple(body), block=(TILE, TILE),
                     shared=(ir.Shared("tile_a", compute, TILE * TILE), ir.Shared("tile_b", compute, TILE * TILE)))
    return Launch(_name("matmul_tiled", kern), a.args, a.scratch, "tiled")


def _pairwise(xs: list) -> ir.V:
    """The sum of ``xs`` as a balanced tree: ``ceil(log2(len(xs)))`` roundings deep, not ``len(xs) - 1``."""
    while len(xs) > 1:
        xs = [ir.alu("Add", *xs[i:i + 2]) if i + 1 < len(xs) else xs[i] for i in range(0, len(xs), 2)]
    return xs[0]


def _out_index(k, batch: dict, row, col) -> tuple:
    kept, _, _, _ = _split(k)
    _, m_ax, n_ax, _ = _matmul_axes(k)
    at = {**batch, m_ax: row, n_ax: col}
    return tuple(at[i] for i in kept)


def matmul_mma(k, axes) -> Launch:
    """Tensor cores: a warp per 16x8 output tile, ``mma.sync.m16n8k16`` per step of 16 along k, with
    the operands loaded straight into the PTX fragment layout (groupID = lane / 4, tig = lane % 4):
    a_i at row groupID + 8 * (i // 2 % 2), col tig * 2 + i % 2 + 8 * (i // 4); b_i at row
    tig * 2 + i % 2 + 8 * (i // 2), col groupID; c_i / d_i at row groupID + 8 * (i // 2), col
    tig * 2 + i % 2. Edges load zeros; float32 accumulation, rounded once into the output dtype."""
    batch_axes, m_ax, n_ax, k_ax = axes
    sa, sb = _roles(k, axes)
    a = _Args()
    ab = k.inputs[0][0].dtype
    m, n, kk = (k.domain[i] for i in (m_ax, n_ax, k_ax))
    lane = ir.thread(0)
    group, tig = ir.div(lane, 4), ir.mod(lane, 4)
    row0 = ir.mul(ir.block(1), 16)
    col0 = ir.mul(ir.block(0), 8)
    batch = _batch_index(k, batch_axes, ir.block(2))
    t = ir.var("t")
    a_vals, b_vals = [], []
    for i in range(8):
        r = ir.add(row0, ir.add(group, 8 * (i // 2 % 2)))
        c = ir.add(t, ir.add(ir.mul(tig, 2), i % 2 + 8 * (i // 4)))
        ok = ir.both(ir.alu("LessThan", r, dim(m)), ir.alu("LessThan", c, dim(kk)))
        a_vals.append(_operand(k, a, sa, {**batch, m_ax: r, n_ax: ir.const(0), k_ax: c}, ab, ok))
    for i in range(4):
        r = ir.add(t, ir.add(ir.mul(tig, 2), i % 2 + 8 * (i // 2)))
        c = ir.add(col0, group)
        ok = ir.both(ir.alu("LessThan", r, dim(kk)), ir.alu("LessThan", c, dim(n)))
        b_vals.append(_operand(k, a, sb, {**batch, m_ax: ir.const(0), n_ax: c, k_ax: r}, ab, ok))
    d = tuple(f"d{i}" for i in range(4))
    body = [*(ir.Assign(x, ir.const(0.0, dt.float32)) for x in d),
            ir.Loop("t", ir.const(0), dim(kk), (
                ir.Mma(d, tuple(a_vals), tuple(b_vals), tuple(ir.var(x, dt.float32) for x in d), ab),), ir.const(16))]
    for i in range(4):
        r = ir.add(row0, ir.add(group, 8 * (i // 2)))
        c = ir.add(col0, ir.add(ir.mul(tig, 2), i % 2))
        ok = ir.both(ir.alu("LessThan", r, dim(m)), ir.alu("LessThan", c, dim(n)))
        res = f"result{i}"
        body.append(ir.Assign(res, ir.cast(ir.var(d[i], dt.float32), k.acc_dtype)))
        body.append(ir.If(ok, tuple(_epilogue(k, a, _out_index(k, batch, r, c), ir.var(res, k.acc_dtype)))))
    batches = prod(tuple(k.domain[i] for i in batch_axes)) if batch_axes else 1
    kern = ir.Kernel("k", tuple(a.bufs.values()), (),
                     (_grid(n, 8), _grid(m, 16), dim(batches)), tuple(body), block=(WARP,))
    return Launch(_name("matmul_mma", kern), a.args, a.scratch, "mma")


# gather / scatter_add -----------------------------------------------------------------------------

def _index_read(a: _Args, buf, view, idx, size) -> tuple[ir.V, ir.V]:
    """The index read at ``idx`` (as INDEX) and whether it is in ``[0, size)``."""
    p = a.view(buf, view)
    a.use(p.name, p.dtype, "r")
    return index_read(p, idx, size)


def _report(flag: str, j: ir.V, ok: ir.V) -> tuple:
    """Where the index ``j`` is out of range: the error flag set, and the index kept for the message."""
    bad = ir.alu("Not", ok)
    return (ir.Store(flag, ir.const(0), ir.const(1, dt.int32), bad),
            ir.Store(flag, ir.const(1), ir.cast(j, dt.int32), bad))


def gather(k) -> list[Launch]:
    """``out[i] = x[i with i[axis] := idx[i]]``; an index out of range stores 1 in the error flag
    (the host raises IndexError, as the reference does) and reads nothing."""
    a = _Args()
    axis = k.axes[0]
    (xb, xv), (ib, iv) = k.inputs
    n = prod(k.domain)
    gid = _gid(ELEMENTWISE_THREADS)
    idx = tuple(unflatten(ir.var("i"), k.domain))
    j, ok = _index_read(a, ib, iv, idx, xv.shape[axis])
    at = list(idx)
    at[axis] = j
    px = a.view(xb, xv)
    a.use(px.name, px.dtype, "r")
    guarded = read(px, tuple(at), extra=ok)
    out = k.outputs[0][0]
    flag = a.flag()
    body = (ir.Assign("i", gid), ir.If(ir.alu("LessThan", ir.var("i"), dim(n)), (
        *_report(flag, j, ok), _store_at(a, out, ir.var("i"), guarded))))
    kern = ir.Kernel("k", tuple(a.bufs.values()), (), (_grid(n, ELEMENTWISE_THREADS),), body,
                     block=(ELEMENTWISE_THREADS,))
    return [Launch(_name("gather", kern), a.args, a.scratch, "thread per element", ("thread per element",))]


def _accumulator_dtype(d):
    return dt.float32 if d in HALF else (dt.int32 if d.kind == "b" else d)


def scatter_add(k) -> list[Launch]:
    """Three launches: ``dst`` into an accumulator (the output itself when its dtype accumulates
    exactly: float32, float64, int32), an atomic add per element of ``src``, the accumulator rounded
    into the output."""
    axis = k.axes[0]
    (db, dv), (ib, iv), (sb, sv) = k.inputs
    out = k.outputs[0][0]
    acc_dtype = _accumulator_dtype(out.dtype)
    n_dst, n_src = prod(k.domain), prod(iv.shape)
    launches = []
    # 1: dst -> accumulator
    a = _Args()
    direct = acc_dtype is out.dtype
    acc_name = a.output(out) if direct else a.new_scratch("acc", acc_dtype, n_dst)
    if not direct:
        a.use(acc_name, acc_dtype, "w")
    pd = a.view(db, dv)
    a.use(pd.name, pd.dtype, "r")
    gid = _gid(ELEMENTWISE_THREADS)
    idx = tuple(unflatten(ir.var("i"), k.domain))
    body = (ir.Assign("i", gid), ir.If(ir.alu("LessThan", ir.var("i"), dim(n_dst)), (
        ir.Store(acc_name, ir.var("i"), ir.cast(read(pd, idx), acc_dtype)),)))
    kern = ir.Kernel("k", tuple(a.bufs.values()), (), (_grid(n_dst, ELEMENTWISE_THREADS),), body,
                     block=(ELEMENTWISE_THREADS,))
    launches.append(Launch(_name("scatter_init", kern), a.args, a.scratch, "thread per element"))
    # 2: atomic adds
    a2 = _Args()
    if direct:
        acc2 = a2.name(out)
        a2.use(acc2, acc_dtype, "rw")
    else:
        acc2 = acc_name
        a2.args[acc2] = None
        a2.use(acc2, acc_dtype, "rw")
    sidx = tuple(unflatten(ir.var("i"), iv.shape))
    j, ok = _index_read(a2, ib, iv, sidx, k.domain[axis])
    ps = a2.view(sb, sv)
    a2.use(ps.name, ps.dtype, "r")
    at = list(sidx)
    at[axis] = j
    dst_index = contiguous_index(tuple(at), k.domain)
    flag = a2.flag()
    body = (ir.Assign("i", gid), ir.If(ir.alu("LessThan", ir.var("i"), dim(n_src)), (
        *_report(flag, j, ok),
        ir.AtomicAdd(acc2, dst_index, ir.cast(read(ps, sidx), acc_dtype), ok))))
    kern = ir.Kernel("k", tuple(a2.bufs.values()), (),
                     (_grid(n_src, ELEMENTWISE_THREADS),), body, block=(ELEMENTWISE_THREADS,))
    launches.append(Launch(_name("scatter_add", kern), a2.args, {acc2: (acc_dtype, n_dst)} if not direct else {},
                           "atomics"))
    if direct:
        return launches
    # 3: accumulator -> output
    a3 = _Args()
    a3.args[acc_name] = None
    a3.use(acc_name, acc_dtype, "r")
    body = (ir.Assign("i", gid), ir.If(ir.alu("LessThan", ir.var("i"), dim(n_dst)), (
        _store_at(a3, out, ir.var("i"), ir.load(acc_name, acc_dtype, ir.var("i"))),)))
    kern = ir.Kernel("k", tuple(a3.bufs.values()), (), (_grid(n_dst, ELEMENTWISE_THREADS),),
                     body, block=(ELEMENTWISE_THREADS,))
    launches.append(Launch(_name("scatter_round", kern), a3.args, {acc_name: (acc_dtype, n_dst)}, "thread per element"))
    launches[0].scratch = {acc_name: (acc_dtype, n_dst)}
    return launches


LOWER = {"elementwise": elementwise, "reduce": reduce, "matmul": matmul, "gather": gather, "scatter_add": scatter_add}


def lower_kernel(k) -> list[Launch]:
    """The launches computing kernel-graph kernel ``k`` (not a call: a program lowers a body's
    kernels once and launches them per call)."""
    try:
        f = LOWER[k.kind]
    except KeyError:
        raise NotImplementedError(f"cuda lowering: no lowering for kernel kind {k.kind!r}") from None
    return f(k)
