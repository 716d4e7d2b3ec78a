"""Products: ``sum over k of a * b`` with an epilogue. The schedules:

| option  | targets          | work
|---------|------------------|-----------------------------------------------------------------------
| library | ``library_gemm`` | a library call the backend makes (the CPU: BLAS; CUDA: cuBLASLt, where
|         |                  | ``backends/cuda/library.py`` takes the operands as they lie), then the
|         |                  | epilogue as a kernel of its own (``epilogue.epilogue``); on a GPU the
|         |                  | default, the own kernels below its alternatives
| gemv    | cooperative      | a product with one output row or column (decode-shaped): a block per
|         |                  | output, its threads on the dot product (``reduce.row``); ``warp``: a
|         |                  | warp per output (``reduce.warp``); ``wide``: ``warp`` with 16-byte loads
|         |                  | of operands contiguous and aligned along k (``reduce.wide``)
| pipelined | ``mma`` shapes,| tensor cores fed through shared memory: a 64x64 tile per block of four
|         | ``async_copy``   | warps, each step of 32 along k staged by 16-byte ``cp.async`` copies two
|         |                  | stages deep, fragments read by ``ldmatrix`` (operands 16-byte aligned)
| mma     | ``mma`` shapes   | tensor cores: a warp per 16x8 tile, ``mma.sync.m16n8k16`` in the PTX
|         |                  | fragment layout, float32 accumulation, operands straight from memory
| tiled   | shared memory    | 16x16 tiles of both operands through shared memory, a thread per output
| blocked | shared memory    | 64x64 output tiles, 16 along k through shared memory, each of 256 threads
|         |                  | holding a 4x4 block of outputs in registers (strided by 16: conflict-free
|         |                  | shared reads, coalesced stores): 16 products per 8 shared loads, not 2
| thread  | every target     | a sum of products, as a reduction (``reduce.thread``); also ``row``
|         |                  | where the operands are masked or the roles unclear
"""

from __future__ import annotations

from dataclasses import dataclass

from luminal.codegen import ir
from luminal.codegen.lower import accumulator, dim, read, reduce_identity, unflatten
from luminal.codegen.lowering import reduce
from luminal.codegen.lowering.epilogue import epilogue_stores
from luminal.codegen.lowering.work import HALF, Uses, Work, blocks, kernel, sizes
from luminal.core import dtype as dt
from luminal.core.symbolic import is_static, prod


def options(k, target, memory) -> tuple:
    """The schedules product ``k`` may take on ``target``, the cost model's pick first."""
    masked = any(v.mask is not None for _, v in k.inputs)
    own = _own_options(k, target, memory, masked)
    return ("library", *own) if target.library_gemm and not masked else own


def _own_options(k, target, memory, masked: bool) -> tuple:
    """The schedules of the target's own kernels, the cost model's pick first."""
    domain = sizes(memory, k.domain)
    axes = matmul_axes(k)
    if target.tile and axes is not None and not masked and roles(k, axes) is not None:
        _, m_ax, n_ax, _ = axes
        if any(is_static(domain[a]) and domain[a] == 1 for a in (m_ax, n_ax)):
            return ("gemv", "warp", *(("wide",) if reduce.wide_fits(k, memory) else ()), "tiled")
        a, b = (buf.dtype for buf, _ in k.inputs)
        if a is b and a in HALF and target.mma_for(a) is not None:
            _, m_ax, n_ax, k_ax = axes
            sa, sb = roles(k, axes)
            if target.async_copy and staging(k, memory, sa, m_ax, k_ax) and staging(k, memory, sb, n_ax, k_ax):
                return ("pipelined", "mma", "tiled", "blocked")
            return ("mma", "tiled", "blocked")
        return ("tiled", "blocked", "thread")
    if not target.warp:
        return ("thread",)
    r = prod(reduce.split_axes(k, domain)[3])
    return ("row", "thread") if not is_static(r) or r > 32 else ("thread", "row")


def lower(k, target, memory, name: str, option: str) -> list[ir.Kernel]:
    """Product ``k`` in schedule ``option`` (``library``: the backend's call, not a kernel)."""
    if option == "library":
        raise ValueError("a library product is the backend's call; its epilogue is epilogue.epilogue")
    if option == "gemv":
        return reduce.row(k, target, memory, name)
    if option in ("thread", "row", "split", "warp", "wide"):
        return reduce.lower(k, target, memory, name, option)
    axes = matmul_axes(k)
    return {"mma": _mma, "pipelined": _pipelined, "tiled": _tiled, "blocked": _blocked}[option](
        k, target, memory, name, axes)


def matmul_axes(k):
    """``(batch axes, m axis, n axis, k axis)`` of the domain, or None when the product has fewer than
    two output axes or more than one reduced axis (then it is a reduction)."""
    kept = [i for i in range(len(k.domain)) if i not in k.axes]
    if len(k.axes) != 1 or len(kept) < 2:
        return None
    return tuple(kept[:-2]), kept[-2], kept[-1], k.axes[0]


def roles(k, axes):
    """``(slot of A, slot of B)``: A is the operand constant along the n axis (stride 0, or the axis
    has one element: a decode-shaped product's row), B along m."""
    _, m_ax, n_ax, _ = axes

    def constant(slot, ax):
        n = k.domain[ax]
        return k.inputs[slot][1].strides[ax] == 0 or (is_static(n) and n == 1)

    if constant(0, n_ax) and constant(1, m_ax):
        return 0, 1
    if constant(1, n_ax) and constant(0, m_ax):
        return 1, 0
    return None


def _batch_index(domain, batch_axes, b: ir.V) -> dict:
    shape = tuple(domain[i] for i in batch_axes)
    return dict(zip(batch_axes, unflatten(b, shape))) if batch_axes else {}


def _operand(k, memory, uses: Uses, slot: int, fixed: dict, dtype, valid) -> ir.V:
    """Operand ``slot`` of the product at the domain index ``fixed``, as ``dtype``; 0 where ``valid``
    is False (a tile's edge)."""
    buf, view = k.inputs[slot]
    p = uses.use(memory.read(buf, view), "r")
    v = read(p, tuple(fixed[i] for i in range(len(k.domain))))
    index, guard = v.args[0], v.args[1] if len(v.args) > 1 else None
    return ir.cast(ir.load(p.name, p.dtype, index, ir.both(guard, valid), 0), dtype)


def _out_index(k, batch: dict, row, col) -> tuple:
    kept = [i for i in range(len(k.domain)) if i not in k.axes]
    _, m_ax, n_ax, _ = matmul_axes(k)
    at = {**batch, m_ax: row, n_ax: col}
    return tuple(at[i] for i in kept)


def _pairwise(xs: list) -> ir.V:
    """The sum of ``xs`` as a balanced tree: ``ceil(log2(len(xs)))`` roundings deep, not ``len(xs) - 1``."""
    while len(xs) > 1:
        xs = [ir.alu("Add", *xs[i:i + 2]) if i + 1 < len(xs) else xs[i] for i in range(0, len(xs), 2)]
    return xs[0]


def _tiled(k, target, memory, name: str, axes) -> list[ir.Kernel]:
    """A ``tile x tile`` block of threads per output tile; each step of ``tile`` along k loads one
    tile of each operand into shared memory (a thread an element), then every thread takes its dot
    product of the two tiles: its products (float32 for 16-bit operands, else the operands' dtype)
    summed as a pairwise tree, the tile's sum added into the accumulator (float64 for float32), so
    the error does not grow with k any faster than a sum's."""
    batch_axes, m_ax, n_ax, k_ax = axes
    sa, sb = roles(k, axes)
    domain = sizes(memory, k.domain)
    t = target.tile
    uses = Uses()
    compute = dt.float32 if k.acc_dtype in HALF else k.acc_dtype
    work_dtype = accumulator("sum", k.acc_dtype)
    m, n, kk = (domain[i] for i in (m_ax, n_ax, k_ax))
    tx, ty = ir.thread(0), ir.thread(1)
    row = ir.add(ir.mul(ir.block(1), t), ty)
    col = ir.add(ir.mul(ir.block(0), t), tx)
    batch = _batch_index(domain, batch_axes, ir.block(2))
    step = ir.var("t")
    a_k, b_k = ir.add(step, tx), ir.add(step, ty)  # tile loads: A[row, t + tx], B[t + ty, col]
    a_ok = ir.both(ir.alu("LessThan", row, dim(m)), ir.alu("LessThan", a_k, dim(kk)))
    b_ok = ir.both(ir.alu("LessThan", col, dim(n)), ir.alu("LessThan", b_k, dim(kk)))
    a_val = _operand(k, memory, uses, sa, {**batch, m_ax: row, n_ax: ir.const(0), k_ax: a_k}, compute, a_ok)
    b_val = _operand(k, memory, uses, sb, {**batch, m_ax: ir.const(0), n_ax: col, k_ax: b_k}, compute, b_ok)
    slot = ir.add(ir.mul(ty, t), tx)
    dot = _pairwise([ir.alu("Mul", ir.load("tile_a", compute, ir.add(ir.mul(ty, t), j)),
                             ir.load("tile_b", compute, ir.add(ir.mul(j, t), tx))) for j in range(t)])
    body = [ir.Assign("acc", reduce_identity("sum", work_dtype)),
            ir.Loop("t", ir.const(0), dim(kk), (
                ir.Store("tile_a", slot, a_val), ir.Store("tile_b", slot, b_val), ir.Barrier(),
                ir.Assign("acc", ir.alu("Add", ir.var("acc", work_dtype), ir.cast(dot, work_dtype))),
                ir.Barrier()), ir.const(t)),
            ir.Assign("result", ir.cast(ir.var("acc", work_dtype), k.acc_dtype))]
    out_valid = ir.both(ir.alu("LessThan", row, dim(m)), ir.alu("LessThan", col, dim(n)))
    out_shape = reduce.split_axes(k, domain)[2]
    body.append(ir.If(out_valid, tuple(epilogue_stores(k, memory, uses, out_shape, _out_index(k, batch, row, col),
                                                       ir.var("result", k.acc_dtype)))))
    batches = prod(tuple(domain[i] for i in batch_axes)) if batch_axes else 1
    work = Work((blocks(n, t), blocks(m, t), dim(batches)), (t, t), ())
    return [kernel(name, uses, work, body, notes={"fused": " ".join(k.fused), "schedule": "tiled"},
                   shared=(ir.Shared("tile_a", compute, t * t), ir.Shared("tile_b", compute, t * t)))]


BLOCK_TILE, BLOCK_K, MICRO = 64, 16, 4  # the blocked schedule: output tile edge, k step, outputs per thread per axis


def _blocked(k, target, memory, name: str, axes) -> list[ir.Kernel]:
    """A 64x64 output tile per block of 16x16 threads. Each step of 16 along k stages a 64x16 tile of
    A and a 16x64 tile of B in shared memory (four elements per thread each, zeros past the edges);
    thread (tx, ty) then holds outputs (ty + 16 i, tx + 16 j), i, j < 4, in registers: per k it reads
    4 values of A and 4 of B and makes 16 products. Numerics as ``tiled``: each output's 16 products
    of a step summed as a pairwise tree in the compute dtype, that sum added into its float64 (for
    float32) accumulator."""
    batch_axes, m_ax, n_ax, k_ax = axes
    sa, sb = roles(k, axes)
    domain = sizes(memory, k.domain)
    t, bk, mt = BLOCK_TILE, BLOCK_K, MICRO
    side = t // mt  # threads per axis of the block
    uses = Uses()
    compute = dt.float32 if k.acc_dtype in HALF else k.acc_dtype
    work_dtype = accumulator("sum", k.acc_dtype)
    m, n, kk = (domain[i] for i in (m_ax, n_ax, k_ax))
    tx, ty = ir.thread(0), ir.thread(1)
    flat = ir.add(ir.mul(ty, side), tx)
    row0, col0 = ir.mul(ir.block(1), t), ir.mul(ir.block(0), t)
    batch = _batch_index(domain, batch_axes, ir.block(2))
    step = ir.var("t")
    stage = []
    for q in range(t * bk // (side * side)):  # each thread's share of a tile
        e = ir.add(flat, side * side * q)
        r, c = ir.div(e, bk), ir.mod(e, bk)  # A tile: t rows of bk
        a_row, a_k = ir.add(row0, r), ir.add(step, c)
        ok = ir.both(ir.alu("LessThan", a_row, dim(m)), ir.alu("LessThan", a_k, dim(kk)))
        stage.append(ir.Store("tile_a", e, _operand(k, memory, uses, sa,
                                                    {**batch, m_ax: a_row, n_ax: ir.const(0), k_ax: a_k}, compute, ok)))
        r, c = ir.div(e, t), ir.mod(e, t)  # B tile: bk rows of t
        b_k, b_col = ir.add(step, r), ir.add(col0, c)
        ok = ir.both(ir.alu("LessThan", b_col, dim(n)), ir.alu("LessThan", b_k, dim(kk)))
        stage.append(ir.Store("tile_b", e, _operand(k, memory, uses, sb,
                                                    {**batch, m_ax: ir.const(0), n_ax: b_col, k_ax: b_k}, compute, ok)))
    rows = [ir.add(ty, side * i) for i in range(mt)]
    cols = [ir.add(tx, side * j) for j in range(mt)]
    a = [[ir.load("tile_a", compute, ir.add(ir.mul(rows[i], bk), x)) for x in range(bk)] for i in range(mt)]
    b = [[ir.load("tile_b", compute, ir.add(ir.mul(x, t), cols[j])) for x in range(bk)] for j in range(mt)]
    accs = {(i, j): f"acc{i}{j}" for i in range(mt) for j in range(mt)}
    update = tuple(ir.Assign(v, ir.alu("Add", ir.var(v, work_dtype), ir.cast(_pairwise(
        [ir.alu("Mul", a[i][x], b[j][x]) for x in range(bk)]), work_dtype))) for (i, j), v in accs.items())
    body = [*(ir.Assign(v, reduce_identity("sum", work_dtype)) for v in accs.values()),
            ir.Loop("t", ir.const(0), dim(kk), (*stage, ir.Barrier(), *update, ir.Barrier()), ir.const(bk))]
    out_shape = reduce.split_axes(k, domain)[2]
    for (i, j), v in accs.items():
        row, col = ir.add(row0, rows[i]), ir.add(col0, cols[j])
        res = f"result{i}{j}"
        body.append(ir.Assign(res, ir.cast(ir.var(v, work_dtype), k.acc_dtype)))
        ok = ir.both(ir.alu("LessThan", row, dim(m)), ir.alu("LessThan", col, dim(n)))
        body.append(ir.If(ok, tuple(epilogue_stores(k, memory, uses, out_shape, _out_index(k, batch, row, col),
                                                    ir.var(res, k.acc_dtype)))))
    batches = prod(tuple(domain[i] for i in batch_axes)) if batch_axes else 1
    work = Work((blocks(n, t), blocks(m, t), dim(batches)), (side, side), ())
    return [kernel(name, uses, work, body, notes={"fused": " ".join(k.fused), "schedule": "blocked"},
                   shared=(ir.Shared("tile_a", compute, t * bk), ir.Shared("tile_b", compute, bk * t)))]


def _mma(k, target, memory, name: str, axes) -> list[ir.Kernel]:
    """Tensor cores: a warp per 16x8 output tile, ``mma.sync.m16n8k16`` per step of 16 along k, with
    the operands loaded straight into the PTX fragment layout (groupID = lane / 4, tig = lane % 4):
    a_i at row groupID + 8 * (i // 2 % 2), col tig * 2 + i % 2 + 8 * (i // 4); b_i at row
    tig * 2 + i % 2 + 8 * (i // 2), col groupID; c_i / d_i at row groupID + 8 * (i // 2), col
    tig * 2 + i % 2. Edges load zeros; float32 accumulation, rounded once into the output dtype."""
    batch_axes, m_ax, n_ax, k_ax = axes
    sa, sb = roles(k, axes)
    domain = sizes(memory, k.domain)
    shape = target.mma_for(k.inputs[0][0].dtype)
    if (shape.m, shape.n, shape.k) != (16, 8, 16):
        raise NotImplementedError(f"mma: the fragment layout is m16n8k16's, the target has {shape}")
    uses = Uses()
    ab = k.inputs[0][0].dtype
    m, n, kk = (domain[i] for i in (m_ax, n_ax, k_ax))
    lane = ir.thread(0)
    group, tig = ir.div(lane, 4), ir.mod(lane, 4)
    row0, col0 = ir.mul(ir.block(1), shape.m), ir.mul(ir.block(0), shape.n)
    batch = _batch_index(domain, batch_axes, ir.block(2))
    t = ir.var("t")
    a_vals, b_vals = [], []
    for i in range(8):
        r = ir.add(row0, ir.add(group, 8 * (i // 2 % 2)))
        c = ir.add(t, ir.add(ir.mul(tig, 2), i % 2 + 8 * (i // 4)))
        ok = ir.both(ir.alu("LessThan", r, dim(m)), ir.alu("LessThan", c, dim(kk)))
        a_vals.append(_operand(k, memory, uses, sa, {**batch, m_ax: r, n_ax: ir.const(0), k_ax: c}, ab, ok))
    for i in range(4):
        r = ir.add(t, ir.add(ir.mul(tig, 2), i % 2 + 8 * (i // 2)))
        c = ir.add(col0, group)
        ok = ir.both(ir.alu("LessThan", r, dim(kk)), ir.alu("LessThan", c, dim(n)))
        b_vals.append(_operand(k, memory, uses, sb, {**batch, m_ax: ir.const(0), n_ax: c, k_ax: r}, ab, ok))
    d = tuple(f"d{i}" for i in range(4))
    body = [*(ir.Assign(x, ir.const(0.0, dt.float32)) for x in d),
            ir.Loop("t", ir.const(0), dim(kk), (
                ir.Mma(d, tuple(a_vals), tuple(b_vals), tuple(ir.var(x, dt.float32) for x in d), ab),),
                ir.const(shape.k))]
    body += _store_tile(k, memory, uses, domain, batch, d, row0, col0, group, tig, "")
    batches = prod(tuple(domain[i] for i in batch_axes)) if batch_axes else 1
    work = Work((blocks(n, shape.n), blocks(m, shape.m), dim(batches)), (target.warp,), ())
    return [kernel(name, uses, work, body, notes={"fused": " ".join(k.fused), "schedule": "mma"})]


PIPE_M, PIPE_N, PIPE_K, PIPE_STAGES = 64, 64, 32, 2  # the pipelined schedule: block tile, k step, stages
PIPE_WARPS = (2, 2)  # warps along m and along n, each taking a 32x32 part of the tile (2 x 4 mma tiles)
PAD = 8  # elements after each staged row: ldmatrix's eight row addresses then fall in distinct banks


def staging(k, memory, slot: int, x_ax: int, k_ax: int) -> str | None:
    """How the pipelined schedule stages operand ``slot``: ``"k"`` where it is contiguous along k (in
    shared memory as rows of its x axis, m or n), ``"x"`` where contiguous along ``x_ax`` (rows of k),
    None where a 16-byte copy cannot read it (a masked view, or the offset or another stride not a
    static multiple of 8 elements)."""
    buf, view = k.inputs[slot]
    p = memory.read(buf, view)
    if p.box is not None or not is_static(p.offset) or int(p.offset) % 8:
        return None
    domain = sizes(memory, k.domain)
    moving = {}
    for i, st in enumerate(p.strides):
        if (is_static(domain[i]) and domain[i] == 1) or (is_static(st) and st == 0):
            continue
        if not is_static(st):
            return None
        moving[i] = int(st)
    for axis, kind in ((k_ax, "k"), (x_ax, "x")):
        if moving.get(axis) == 1 and all(st % 8 == 0 for i, st in moving.items() if i != axis):
            return kind
    return None


def _store_tile(k, memory, uses, domain, batch: dict, d: tuple, row, col, group, tig, tag: str) -> list:
    """Statements storing the accumulators ``d`` of one 16x8 ``mma`` tile whose first output is at
    (``row``, ``col``) (the C fragment layout: rows ``group`` and ``group + 8``, columns ``2 tig`` and
    ``2 tig + 1``), each rounded once into the output dtype, through the epilogue, where inside the
    output (``tag`` names the tile's registers)."""
    _, m_ax, n_ax, _ = matmul_axes(k)
    out_shape = reduce.split_axes(k, domain)[2]
    body = []
    for e in range(4):
        r = ir.add(row, ir.add(group, 8 * (e // 2)))
        c = ir.add(col, ir.add(ir.mul(tig, 2), e % 2))
        ok = ir.both(ir.alu("LessThan", r, dim(domain[m_ax])), ir.alu("LessThan", c, dim(domain[n_ax])))
        res = f"result{tag}_{e}"
        body.append(ir.Assign(res, ir.cast(ir.var(d[e], dt.float32), k.acc_dtype)))
        body.append(ir.If(ok, tuple(epilogue_stores(k, memory, uses, out_shape, _out_index(k, batch, r, c),
                                                    ir.var(res, k.acc_dtype)))))
    return body


@dataclass(frozen=True)
class _Staged:
    """An operand of the pipelined schedule as its steps are staged in shared memory: along its own
    product axis ``x_ax`` (m or n; broadcast along ``other``) the tile starting at ``start`` of the
    axis' ``size``; ``kind`` as :func:`staging`; ``edge`` the tile's extent along x."""

    role: str  # "a" or "b"
    x_ax: int
    other: int
    start: ir.V
    size: object
    kind: str
    edge: int
    placed: object  # its Placed read

    @property
    def rows(self) -> int:  # staged rows: of x along k ("k"), or of k along x ("x")
        return self.edge if self.kind == "k" else PIPE_K

    @property
    def inner(self) -> int:
        return PIPE_K if self.kind == "k" else self.edge

    @property
    def stride(self) -> int:
        return self.inner + PAD

    @property
    def per(self) -> int:  # elements of one stage
        return self.rows * self.stride

    @property
    def shared(self) -> str:
        return f"stage_{self.role}"


def _pipelined(k, target, memory, name: str, axes) -> list[ir.Kernel]:
    """Tensor cores fed through shared memory: a 64x64 output tile per block of four warps (each a
    32x32 part: 2 x 4 ``mma.m16n8k16`` tiles, their float32 accumulators in registers). Each step of
    32 along k is staged in shared memory by 16-byte ``cp.async`` copies (zeros past the edges), two
    stages deep: the copies of the next step are in flight while the warps multiply the current one,
    whose fragments ``ldmatrix`` reads from the staged rows (``.trans`` for an operand staged across
    k). Numerics as ``mma``'s: float32 accumulation, rounded once into the output dtype."""
    batch_axes, m_ax, n_ax, k_ax = axes
    sa, sb = roles(k, axes)
    domain = sizes(memory, k.domain)
    uses = Uses()
    ab = k.inputs[0][0].dtype
    m, n, kk = (domain[i] for i in (m_ax, n_ax, k_ax))
    wm_count, wn_count = PIPE_WARPS
    threads = 32 * wm_count * wn_count
    tid = ir.thread(0)
    warp, lane = ir.div(tid, 32), ir.mod(tid, 32)
    group, tig = ir.div(lane, 4), ir.mod(lane, 4)
    wm, wn = ir.div(warp, wn_count), ir.mod(warp, wn_count)
    row0, col0 = ir.mul(ir.block(1), PIPE_M), ir.mul(ir.block(0), PIPE_N)
    batch = _batch_index(domain, batch_axes, ir.block(2))
    ops = {role: _Staged(role, x_ax, other, start, size, staging(k, memory, slot, x_ax, k_ax), edge,
                         uses.use(memory.read(*k.inputs[slot]), "r"))
           for role, slot, x_ax, other, edge, start, size in (("a", sa, m_ax, n_ax, PIPE_M, row0, m),
                                                              ("b", sb, n_ax, m_ax, PIPE_N, col0, n))}

    def clamp(rem):  # min(rem, 8) where rem > 0, else 0
        return ir.alu("Where", ir.alu("LessThan", rem, ir.const(8)), rem, ir.const(8))

    def copies(t, stage) -> list:
        out = []
        for op in ops.values():
            per_row = op.inner // 8
            for q in range(op.rows * per_row // threads):
                e = ir.add(tid, threads * q)
                r, c = ir.div(e, per_row), ir.mul(ir.mod(e, per_row), 8)
                if op.kind == "k":
                    x, kpos = ir.add(op.start, r), ir.add(t, c)
                    rem = ir.add(dim(kk), ir.mul(kpos, -1))
                else:
                    kpos, x = ir.add(t, r), ir.add(op.start, c)
                    rem = ir.add(dim(op.size), ir.mul(x, -1))
                ok = ir.both(ir.alu("LessThan", kpos, dim(kk)), ir.alu("LessThan", x, dim(op.size)))
                at = {**batch, op.x_ax: x, op.other: ir.const(0), k_ax: kpos}
                index = read(op.placed, tuple(at.get(i, ir.const(0)) for i in range(len(k.domain)))).args[0]
                count = ir.alu("Where", ok, clamp(rem), ir.const(0))
                sidx = ir.add(ir.mul(stage, op.per), ir.add(ir.mul(r, op.stride), c))
                out.append(ir.AsyncCopy(op.shared, sidx, op.placed.name, index, count, ab))
        return out

    eight, row_in = ir.div(lane, 8), ir.mod(lane, 8)  # ldmatrix: lane 8 i + r addresses row r of matrix i

    def fragments(op, stage, x_base, k0, regs) -> ir.LdMatrix:
        lo, hi = ir.mul(ir.mod(eight, 2), 8), ir.mul(ir.div(eight, 2), 8)
        x_off, k_off = (lo, hi) if op.role == "a" else (hi, lo)  # (A: its m halves first; B: its k halves)
        if op.kind == "k":
            at = ir.add(ir.mul(ir.add(ir.add(x_base, x_off), row_in), op.stride), ir.add(k0, k_off))
        else:
            at = ir.add(ir.mul(ir.add(ir.add(k0, k_off), row_in), op.stride), ir.add(x_base, x_off))
        return ir.LdMatrix(regs, op.shared, ir.add(ir.mul(stage, op.per), at), ab, trans=op.kind == "x")

    acc = {(i, j): tuple(f"acc{i}{j}_{e}" for e in range(4)) for i in range(2) for j in range(4)}
    fa = {i: tuple(f"fa{i}_{e}" for e in range(8)) for i in range(2)}
    fb = {j: tuple(f"fb{j}_{e}" for e in range(4)) for j in range(4)}

    def compute(stage) -> list:
        out = []
        for k16 in range(0, PIPE_K, 16):
            for i in range(2):
                out.append(fragments(ops["a"], stage, ir.add(ir.mul(wm, 32), 16 * i), ir.const(k16), fa[i]))
            for j in range(0, 4, 2):
                out.append(fragments(ops["b"], stage, ir.add(ir.mul(wn, 32), 8 * j), ir.const(k16),
                                     fb[j] + fb[j + 1]))
            for (i, j), d in acc.items():
                out.append(ir.Mma(d, tuple(ir.var(x, ab) for x in fa[i]), tuple(ir.var(x, ab) for x in fb[j]),
                                  tuple(ir.var(x, dt.float32) for x in d), ab))
        return out

    t = ir.var("t")
    step = ir.div(t, PIPE_K)
    body = [*(ir.Assign(x, ir.const(0.0, dt.float32)) for d in acc.values() for x in d),
            *copies(ir.const(0), ir.const(0)), ir.AsyncCommit(),
            ir.Loop("t", ir.const(0), dim(kk), (
                *copies(ir.add(t, PIPE_K), ir.mod(ir.add(step, 1), PIPE_STAGES)), ir.AsyncCommit(),
                ir.AsyncWait(1), ir.Barrier(),
                *compute(ir.mod(step, PIPE_STAGES)),
                ir.Barrier()), ir.const(PIPE_K)),
            ir.AsyncWait(0)]  # (the last step's copies, of zeros past k: none left in flight at exit)
    for (i, j), d in acc.items():
        body += _store_tile(k, memory, uses, domain, batch, d, ir.add(row0, ir.add(ir.mul(wm, 32), 16 * i)),
                            ir.add(col0, ir.add(ir.mul(wn, 32), 8 * j)), group, tig, f"{i}{j}")
    batches = prod(tuple(domain[i] for i in batch_axes)) if batch_axes else 1
    work = Work((blocks(n, PIPE_N), blocks(m, PIPE_M), dim(batches)), (threads,), ())
    shared = tuple(ir.Shared(op.shared, ab, PIPE_STAGES * op.per) for op in ops.values())
    return [kernel(name, uses, work, body, shared=shared, notes={"fused": " ".join(k.fused), "schedule": "pipelined"})]
