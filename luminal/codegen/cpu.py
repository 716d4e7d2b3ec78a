"""Lowering kernel-graph kernels to CPU kernels of the IR, laid out for a binding of the symbolic dims.

Sizes, strides and mask bounds come in as the binding evaluates them: a static one is a constant
in the code; one that depends on a symbolic dim is, when the binding gives it as a ``DimValue``
(``backends/cpu/plan.py`` does), an expression over the kernel's parameters (``ir.const``), so
the code serves every binding of the dims. Whatever shapes code is decided on expressions
(``symbolic.same``, and an axis dropped only when it is statically 1), never on a dim's value. Plain
ints everywhere give code specialised to one binding (fixed trip counts for LLVM: an option the
backend's search may time).

| kind        | grid (work items)           | code of one item
|-------------|-----------------------------|-----------------
| elementwise | the domain, with axes that  | every output Expr at the item's index, stored; the loads
|             | every operand walks in step | are the views' reads (masked reads select the pad)
|             | merged into one             |
| reduce      | the output index            | a register from the reduction's identity, a loop nest over
|             |                             | the reduced axes accumulating the prologue, then the epilogue
|             |                             | outputs (``Acc`` = the register, rounded to its dtype)
| matmul      | the output index            | the epilogue only (``epilogue``): the product itself is a
|             |                             | BLAS call, whose result the epilogue reads as ``Acc``
| gather      | the output index            | the index loaded, checked, and the input read there
| scatter_add | a line of the output along  | loops over the line: ``dst`` copied in, the index's line
|             | the axis                    | added in order, the accumulator rounded out (16-bit)

An index out of range (gather, scatter_add) reads and writes nothing and stores 1 in an error cell:
a kernel cannot raise, so the caller checks the cell after the call.

Float16 and bfloat16 accumulate in float32 and are rounded once at the end; a sum of products of
16-bit loads multiplies in float32 (300 * 300 is inf in float16): both as the reference does. A
float32 sum accumulates in float64 (``codegen.lower.accumulator``): LLVM vectorises it in any order
(``reassoc``), and its error stays within 1e-6 of the sum up to 2**31 terms.

The caller says where buffers live: ``place(buf, view)`` gives the :class:`~luminal.codegen.lower.Placed`
read of a kernel-graph view, ``place(buf, None)`` the placement of a whole output buffer (its
strides say where each output index is stored: a backend may store a buffer permuted).
"""

from __future__ import annotations

from luminal.codegen import ir
from luminal.codegen.lower import (
    Placed,
    Values,
    accumulate,
    accumulator,
    contiguous_index,
    index_read,
    read,
    reduce_identity,
    unflatten,
)
from luminal.core import dtype as dt
from luminal.core.kernel_graph import Expr
from luminal.core.symbolic import DimValue, evaluate, same

HALF = (dt.float16, dt.bfloat16)


class _Buffers:
    """The IR buffer parameters a kernel uses, each once, with what it does to them."""

    def __init__(self):
        self.bufs: dict[str, ir.Buf] = {}

    def use(self, p: Placed, access: str) -> None:
        old = self.bufs.get(p.name)
        if old is not None and old.access != access:
            access = "rw"
        self.bufs[p.name] = ir.Buf(p.name, p.dtype, access)

    def params(self) -> tuple:
        return tuple(self.bufs.values())


def _kernel(name: str, bufs: _Buffers, grid: tuple, body, notes: dict) -> ir.Kernel:
    """The checked kernel, its parameters the dims its code reads (sizes laid out as ``DimValue``s
    become parameters: ``ir.const``)."""
    k = ir.Kernel(name, bufs.params(), (), tuple(grid), tuple(body), notes=notes)
    k.params = ir.used_params(k)
    return ir.check(k)


def _store(p: Placed, idx, value: ir.V, valid: ir.V | None = None) -> ir.Store:
    index = ir.const(p.offset)
    for i, s in zip(idx, p.strides):
        index = ir.add(index, ir.mul(i, s))
    return ir.Store(p.name, index, ir.cast(value, p.dtype), valid)


MIN_OUTER = 16  # a reordered kernel's outermost axis, which threads cut (``parallel.py``), has this many items


def _store_order(shape: tuple, out: Placed) -> tuple | None:
    """The order of the domain's axes that walks output ``out`` in its memory order (strides from the
    largest down; size-1 axes first), when it is not the domain's own and its outermost axis still has
    ``MIN_OUTER`` items for the threads to share; else None. An output the layout planner stored in
    another order (an im2col matrix, whose image axis the GEMM wants inside the channel and window
    axes) was written in runs of one row's width scattered over the whole matrix; walked in its own
    order, it is written front to back."""
    if not all(isinstance(st, int) for st in out.strides) or _walks_in_order(shape, out):
        return None

    def key(a):
        return (False, 0) if _one(shape[a]) else (True, -out.strides[a])

    order = tuple(sorted(range(len(shape)), key=key))
    outer = next((shape[a] for a in order if not _one(shape[a])), None)
    return order if isinstance(outer, int) and outer >= MIN_OUTER else None


def _walks_in_order(shape: tuple, out: Placed) -> bool:
    """Whether the domain's own order already walks ``out`` with strides that never grow inward."""
    strides = [st for n, st in zip(shape, out.strides) if not _one(n)]
    return all(a >= b for a, b in zip(strides, strides[1:]))


def _permuted(p: Placed, order: tuple) -> Placed:
    return Placed(p.name, p.dtype, p.offset, tuple(p.strides[a] for a in order),
                  None if p.box is None else tuple(p.box[a] for a in order), p.pad)


def _merged_axes(shape: tuple, placements: list[Placed]) -> list[list[int]]:
    """Groups of consecutive axes that every placement walks as one (each group's stride is the
    stride of its last axis, its size the product): fewer, longer loops for the vectoriser. Axes of
    size 1 join any group; an axis with a mask only its own."""
    groups: list[list[int]] = []
    for a in range(len(shape)):
        if groups and _joins(groups[-1], a, shape, placements):
            groups[-1].append(a)
        else:
            groups.append([a])
    return groups


def _joins(group, a, shape, placements) -> bool:
    """Whether axis ``a`` joins ``group``: every placement walks it on from the group's last axis of
    size > 1 (size-1 axes have no stride of their own), and no mask cuts any of them."""
    if any(p.box is not None and any(not same(p.box[x], (0, shape[x])) for x in (*group, a)) for p in placements):
        return False
    inner = [x for x in group if not _one(shape[x])]
    if _one(shape[a]) or not inner:
        return True
    return all(same(p.strides[inner[-1]], p.strides[a] * shape[a]) for p in placements)


def _merge(p: Placed, groups, shape) -> Placed:
    strides, box = [], None if p.box is None else []
    for g in groups:
        inner = [a for a in g if not _one(shape[a])]
        strides.append(p.strides[inner[-1]] if inner else 0)
        if box is not None:
            box.append((0, _size(g, shape)) if len(g) > 1 else p.box[g[0]])
    return Placed(p.name, p.dtype, p.offset, tuple(strides), None if box is None else tuple(box), p.pad)


def _one(n) -> bool:
    """Whether an axis of size ``n`` is left out of loops and strides: a size 1 that is no dim's value
    (a dim bound to 1 keeps its axis, so the code stays the code of every binding of the dim)."""
    return n == 1 and type(n) is not DimValue


def _size(group, shape) -> int:
    n = 1
    for a in group:
        n *= shape[a]
    return n


def _has_reshape(exprs) -> bool:
    stack, seen = list(exprs), set()
    while stack:
        e = stack.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        if e.op == "Reshape":
            return True
        stack.extend(e.args)
    return False


def elementwise(k, env: dict, place, name: str) -> ir.Kernel:
    """The elementwise kernel ``k`` as one pass over its domain."""
    shape = tuple(evaluate(d, env) for d in k.domain)
    ins = [place(b, v) for b, v in k.inputs]
    outs = [(place(b, None), e) for b, e in k.outputs]
    out_shapes = [tuple(evaluate(d, env) for d in b.shape) for b, _ in k.outputs]
    regrouped = any(not same(s, shape) for s in out_shapes)  # an output stored in a shape of its own (same order)
    view_shapes = [tuple(evaluate(d, env) for d in v.shape) for _, v in k.inputs]
    if not regrouped and not _has_reshape([e for _, e in k.outputs]):
        order = _store_order(shape, outs[0][0]) if len(outs) == 1 else None
        if order is not None:  # walk the output in its memory order
            shape = tuple(shape[a] for a in order)
            ins = [_permuted(p, order) for p in ins]
            outs = [(_permuted(p, order), e) for p, e in outs]
        groups = _merged_axes(shape, ins + [p for p, _ in outs])
        ins = [_merge(p, groups, shape) for p in ins]
        outs = [(_merge(p, groups, shape), e) for p, e in outs]
        shape = tuple(_size(g, shape) for g in groups)
        view_shapes = [shape] * len(ins)  # every load reads the (merged) domain
        out_shapes = [shape] * len(outs)  # and every output is stored over it
    bufs = _Buffers()
    idx = tuple(ir.item(a) for a in range(len(shape)))

    def leaf(e, at):
        p = ins[e.arg]
        bufs.use(p, "r")
        return read(p, at)

    values = Values(leaf, lambda e: view_shapes[e.arg], env)  # a load has its view's shape
    body = []
    flat = contiguous_index(idx, shape)
    for (p, e), out_shape in zip(outs, out_shapes):
        at = idx if same(out_shape, shape) else tuple(unflatten(flat, out_shape))
        v = values.at(e, at if values.shape(e) is not None else ())
        bufs.use(p, "w")
        body.append(_store(p, at, v))
    return _kernel(name, bufs, tuple(ir.const(n) for n in shape), tuple(body), notes={"fused": " ".join(k.fused)})


def _prologue_value(k, values, idx, acc_dtype, work) -> ir.V:
    """The value summed or maxed at ``idx`` of the domain, in the accumulator's dtype ``work``."""
    pro = k.prologue
    if k.reduce_op == "sum" and acc_dtype in HALF and pro.op == "Mul" and all(a.op == "Load" for a in pro.args):
        a, b = (ir.cast(values.at(x, idx), dt.float32) for x in pro.args)  # 16-bit products in float32
        return ir.cast(ir.alu("Mul", a, b), work)
    v = values.at(pro, idx if values.shape(pro) is not None else ())
    return ir.cast(v, work)


def reduce(k, env: dict, place, name: str) -> ir.Kernel:
    """The reduce kernel ``k`` (a matmul read as a sum of products too): one work item per output
    element, the reduced axes as loops."""
    domain = tuple(evaluate(d, env) for d in k.domain)
    axes = tuple(k.axes)
    if k.reduce_op == "max" and any(domain[a] == 0 for a in axes):
        raise ValueError(f"MaxReduce over an empty axis (kernel {k})")
    kept = [a for a in range(len(domain)) if a not in axes]
    out_shape = tuple(domain[a] for a in kept)
    ins = [place(b, v) for b, v in k.inputs]
    epi = [place(b, v) for b, v in k.epilogue_inputs]
    bufs = _Buffers()
    width = _column_block(k, domain, axes, kept, ins)
    if width > 1:  # each work item sums ``width`` consecutive columns, its rows' loads one vector each
        grid, idx_block = _grid(out_shape[:-1] + (out_shape[-1] // width,))
        idx_outs = [idx_block[:-1] + (ir.add(ir.mul(idx_block[-1], width), j),) for j in range(width)]
    else:
        grid, idx_out = _grid(out_shape)
        idx_outs = [idx_out]
    idx_doms = []
    for idx_out in idx_outs:
        full = [None] * len(domain)
        for i, a in enumerate(kept):
            full[a] = idx_out[i]
        for j, a in enumerate(axes):
            full[a] = ir.var(f"r{j}")
        idx_doms.append(tuple(full))

    def pro_leaf(e, at):
        p = ins[e.arg]
        bufs.use(p, "r")
        return read(p, at)

    prologue = k.prologue
    if k.kind == "matmul":
        loads = tuple(Expr("Load", (), i, b.dtype) for i, (b, _) in enumerate(k.inputs))
        prologue = Expr("Mul", loads, None, k.acc_dtype)
    op = "sum" if k.kind == "matmul" else k.reduce_op
    kk = _Reduction(prologue, op)
    acc_dtype = k.acc_dtype
    work = accumulator(op, acc_dtype)
    view_shapes = [tuple(evaluate(d, env) for d in v.shape) for _, v in k.inputs]
    values = Values(pro_leaf, lambda e: view_shapes[e.arg], env)
    accs = [f"acc{c}" if width > 1 else "acc" for c in range(width)]
    inner: tuple = tuple(ir.Assign(a, accumulate(op, ir.var(a, work), _prologue_value(kk, values, at, acc_dtype, work)))
                         for a, at in zip(accs, idx_doms))
    for j in reversed(range(len(axes))):
        inner = (ir.Loop(f"r{j}", ir.const(0), ir.const(domain[axes[j]]), inner, ordered=width > 1),)
    body = [*(ir.Assign(a, reduce_identity(op, work)) for a in accs), *inner]
    for a, idx_out in zip(accs, idx_outs):
        result = "result" + a[3:]
        body.append(ir.Assign(result, ir.cast(ir.var(a, work), acc_dtype)))
        body += _epilogue(k, env, epi, bufs, out_shape, idx_out, ir.var(result, acc_dtype), place)
    notes = {"fused": " ".join(k.fused)}
    if width > 1:
        notes["columns"] = width
    return _kernel(name, bufs, grid, tuple(body), notes=notes)


COLUMN_BLOCKS = (16, 8)  # columns a work item of a column sum takes (the first that divides the count)


def _column_block(k, domain, axes, kept, ins) -> int:
    """How many consecutive output columns one work item of reduce ``k`` sums (1: one).

    A sum over rows of a row-major array (a bias's gradient, a LayerNorm weight's: the columns
    contiguous, the reduced axes strided) as one work item per column is a loop of strided scalar
    loads per column, which LLVM vectorises across rows with gathers if at all (a GPT's bias gradient,
    512 rows of 1024: 1.7 ms). With several columns per item, each row's loads are consecutive and
    their accumulators independent: in an ordered loop (``ir.Loop.ordered``: no reassociation, so the
    loop vectoriser leaves it) the SLP vectoriser makes one vector load and add of them (0.3 ms).
    Each column sums its rows in row order."""
    if k.kind != "reduce" or not kept or not ins or _has_reshape([k.prologue]):
        return 1
    last = kept[-1]
    n = domain[last]
    if type(n) is not int or any(len(p.strides) != len(domain) or p.box is not None or p.strides[last] != 1
                                 for p in ins):
        return 1  # (every input read at the domain's index, the columns contiguous, nothing masked)
    return next((w for w in COLUMN_BLOCKS if n % w == 0 and n >= w), 1)


def _grid(shape: tuple) -> tuple:
    """``(grid, index)``: a kernel's work items over the axes of ``shape`` longer than 1 (the first is
    the one a caller cuts over threads: a leading size-1 axis would leave nothing to cut), and the index
    of each axis of ``shape`` in terms of them (0 for the others)."""
    long = [a for a, n in enumerate(shape) if not _one(n)] or list(range(min(1, len(shape))))
    index = [ir.const(0)] * len(shape)
    for g, a in enumerate(long):
        index[a] = ir.item(g)
    return tuple(ir.const(shape[a]) for a in long), tuple(index)


def epilogue(k, env: dict, place, acc: Placed, name: str) -> ir.Kernel:
    """A matmul's epilogue as an elementwise pass over its output, reading the product (``Acc``)
    that BLAS wrote to ``acc``."""
    domain = tuple(evaluate(d, env) for d in k.domain)
    out_shape = tuple(n for a, n in enumerate(domain) if a not in k.axes)
    bufs = _Buffers()
    grid, idx = _grid(out_shape)
    bufs.use(acc, "r")
    epi = [place(b, v) for b, v in k.epilogue_inputs]
    body = _epilogue(k, env, epi, bufs, out_shape, idx, read(acc, idx), place)
    return _kernel(name, bufs, grid, tuple(body), notes={"fused": " ".join(k.fused)})


def _epilogue(k, env, epi, bufs, out_shape, idx, acc: ir.V, place) -> list:
    """Stores of every output at the output index ``idx`` (of ``out_shape``, the domain without the
    reduced axes). An output buffer (and the epilogue's views) may regroup those elements (a kept
    axis of size 1): each output is evaluated at the same element's index in its own shape."""
    shapes = [tuple(evaluate(d, env) for d in v.shape) for _, v in k.epilogue_inputs]

    def leaf(e, at):
        if e.op == "Acc":
            return acc
        p = epi[e.arg]
        bufs.use(p, "r")
        return read(p, at)

    values = Values(leaf, lambda e: out_shape if e.op == "Acc" else shapes[e.arg], env)
    flat = contiguous_index(idx, out_shape)
    body = []
    for b, e in k.outputs:
        p = place(b, None)
        bufs.use(p, "w")
        shape = tuple(evaluate(d, env) for d in b.shape)
        at = idx if same(shape, out_shape) else tuple(unflatten(flat, shape))
        body.append(_store(p, at, values.at(e, at if values.shape(e) is not None else ())))
    return body


def gather(k, env: dict, place, flag: Placed, name: str) -> ir.Kernel:
    """``out[i] = x[i with i[axis] := idx[i]]``, one work item per output element. A kernel cannot
    raise: an index out of range reads nothing and stores 1 in ``flag`` (an int32 cell), which the
    caller checks after the call to raise the reference's IndexError."""
    axis = k.axes[0]
    (xb, xv), (ib, iv) = k.inputs
    shape = tuple(evaluate(d, env) for d in k.domain)
    grid, idx = _grid(shape)
    px, pi, out = place(xb, xv), place(ib, iv), place(k.outputs[0][0], None)
    j, ok = index_read(pi, idx, evaluate(xv.shape[axis], env))
    at = list(idx)
    at[axis] = j
    bufs = _Buffers()
    for p, access in ((px, "r"), (pi, "r"), (out, "w"), (flag, "w")):
        bufs.use(p, access)
    body = (_report(flag, ok), _store(out, idx, read(px, tuple(at), extra=ok)))
    return _kernel(name, bufs, grid, body, notes={"fused": " ".join(k.fused)})


def scatter_add(k, env: dict, place, flag: Placed, acc: Placed | None, name: str) -> list[ir.Kernel]:
    """``out = dst``, then ``src[i]`` added at ``i with i[axis] := idx[i]`` (on bools: or), repeated
    indices in order as ``np.add.at`` adds them. No atomics: a work item owns a line of the output
    along ``axis`` (its other coordinates) and loops over the same line of ``idx``, so items write
    disjoint elements (and may run on any thread). ``acc`` (None: the output itself) is a float32
    scratch where a float16/bfloat16 output accumulates, rounded once at the end, as the reference.
    An index out of range adds nothing and sets ``flag`` (see :func:`gather`).

    One kernel (copy ``dst``, add, round, line by line) when ``idx`` has every line of the output;
    else three, the copy and the rounding over the whole output."""
    axis = k.axes[0]
    (db, dv), (ib, iv), (sb, sv) = k.inputs
    shape = tuple(evaluate(d, env) for d in k.domain)
    ishape = tuple(evaluate(d, env) for d in iv.shape)
    pd, pi, ps, out = place(db, dv), place(ib, iv), place(sb, sv), place(k.outputs[0][0], None)
    into = out if acc is None else acc
    work = into.dtype

    def copy(at):
        return (_store(into, at, ir.cast(read(pd, at), work)),)

    def add(at):
        j, ok = index_read(pi, at, shape[axis])
        to = tuple(j if a == axis else i for a, i in enumerate(at))
        total = accumulate("sum", read(into, to, extra=ok), ir.cast(read(ps, at), work))
        return _report(flag, ok), _store(into, to, total, ok)

    def round_(at):
        return (_store(out, at, read(acc, at)),)

    steps = [(shape, copy, ((pd, "r"), (into, "w"))),
             (ishape, add, ((pi, "r"), (ps, "r"), (into, "rw"), (flag, "w")))]
    if acc is not None:
        steps.append((shape, round_, ((acc, "r"), (out, "w"))))
    notes = {"fused": " ".join(k.fused)}
    if all(same(n, ishape[a]) for a, n in enumerate(shape) if a != axis):
        bufs = _Buffers()
        grid, at = _lines(shape, axis)
        body = []
        for s, step, uses in steps:
            for p, access in uses:
                bufs.use(p, access)
            body.append(ir.Loop("j", ir.const(0), ir.const(s[axis]), step(at)))
        return [_kernel(name, bufs, grid, tuple(body), notes=notes)]
    kernels = []
    for n, (s, step, uses) in enumerate(steps):
        bufs = _Buffers()
        for p, access in uses:
            bufs.use(p, access)
        if step is add:
            grid, at = _lines(s, axis)
            body = (ir.Loop("j", ir.const(0), ir.const(s[axis]), step(at)),)
        else:
            grid, at = _grid(s)
            body = step(at)
        kernels.append(_kernel(f"{name}_{n}", bufs, grid, body, notes=notes))
    return kernels


def _lines(shape: tuple, axis: int) -> tuple:
    """``(grid, index)``: one work item per line of ``shape`` along ``axis``, the index of the line's
    elements in terms of the item and the loop variable ``j`` (along ``axis``)."""
    grid, idx = _grid(tuple(1 if a == axis else n for a, n in enumerate(shape)))
    return grid, tuple(ir.var("j") if a == axis else i for a, i in enumerate(idx))


def _report(flag: Placed, ok: ir.V) -> ir.Store:
    """1 into the error cell ``flag`` where an index is out of range (``ok`` False)."""
    return ir.Store(flag.name, ir.const(0), ir.const(1, dt.int32), ir.alu("Not", ok))


class _Reduction:
    """The prologue and operation a reduction accumulates (a matmul's: the product of its loads)."""

    def __init__(self, prologue, reduce_op):
        self.prologue, self.reduce_op = prologue, reduce_op

