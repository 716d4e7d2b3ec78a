"""Elementwise kernels: every output ``Expr`` at each index of the domain, stored.

The domain is laid out first: axes every operand walks in step merge into one (on a loop target,
fewer and longer loops for the vectoriser; on a thread target, fewer divisions and remainders to
turn a thread's flat index into the operands' offsets), and on a loop target a single output stored
in another order than the domain's (an im2col matrix) is walked in its own memory order. On a thread
target each thread takes one element by its flat index.
"""

from __future__ import annotations

from luminal.codegen import ir
from luminal.codegen.lower import Placed, Values, contiguous_index, unflatten
from luminal.codegen.lowering.split import split_innermost
from luminal.codegen.lowering.work import Uses, items, kernel, one, reader, sizes, store
from luminal.core.symbolic import same


def elementwise(k, target, memory, name: str) -> list[ir.Kernel]:
    """The elementwise kernel ``k`` as one pass over its domain."""
    shape = sizes(memory, k.domain)
    ins = [memory.read(b, v) for b, v in k.inputs]
    outs = [(memory.output(b), e) for b, e in k.outputs]
    out_shapes = [sizes(memory, b.shape) for b, _ in k.outputs]
    view_shapes = [sizes(memory, v.shape) for _, v in k.inputs]
    regrouped = any(not same(s, shape) for s in out_shapes)  # an output stored in a shape of its own (same order)
    if not regrouped and not has_reshape([e for _, e in k.outputs]):
        # (a thread target stores row-major: its outputs are already walked in their memory order)
        order = _store_order(shape, outs[0][0]) if len(outs) == 1 and not target.threads else None
        if order is not None:  # walk the output in its memory order
            shape = tuple(shape[a] for a in order)
            ins = [_permuted(p, order) for p in ins]
            outs = [(_permuted(p, order), e) for p, e in outs]
        groups = _merged_axes(shape, ins + [p for p, _ in outs])
        ins = [merged(p, groups, shape) for p in ins]
        outs = [(merged(p, groups, shape), e) for p, e in outs]
        shape = tuple(group_size(g, shape) for g in groups)
        view_shapes = [shape] * len(ins)  # every load reads the (merged) domain
        out_shapes = [shape] * len(outs)  # and every output is stored over it
    uses = Uses()
    work = items(target, shape)
    idx = work.index
    values = Values(reader(ins, uses), lambda e: view_shapes[e.arg], memory.env)  # a load has its view's shape
    body = []
    flat = work.flat if work.flat is not None else contiguous_index(idx, shape)
    for (p, e), out_shape in zip(outs, out_shapes):
        at = idx if same(out_shape, shape) else tuple(unflatten(flat, out_shape))
        v = values.at(e, at if values.shape(e) is not None else ())
        uses.use(p, "w")
        body.append(store(memory, p, at, out_shape, v, flat=work.flat))
    made = kernel(name, uses, work, body, notes={"fused": " ".join(k.fused), "schedule": "items"})
    return [made if target.threads else split_innermost(made)]


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
        return (False, 0) if one(shape[a]) else (True, -out.strides[a])

    order = tuple(sorted(range(len(shape)), key=key))
    outer = next((shape[a] for a in order if not one(shape[a])), None)
    return order if isinstance(outer, int) and outer >= MIN_OUTER else None


def _walks_in_order(shape: tuple, out: Placed) -> bool:
    """Whether the domain's own order already walks ``out`` with strides that never grow inward."""
    strides = [st for n, st in zip(shape, out.strides) if not one(n)]
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
        if groups and joins(groups[-1], a, shape, placements):
            groups[-1].append(a)
        else:
            groups.append([a])
    return groups


def joins(group, a, shape, placements) -> bool:
    """Whether axis ``a`` joins ``group``: every placement walks it on from the group's last axis of
    size > 1 (size-1 axes have no stride of their own), and no mask cuts any of them."""
    if any(p.box is not None and any(not same(p.box[x], (0, shape[x])) for x in (*group, a)) for p in placements):
        return False
    inner = [x for x in group if not one(shape[x])]
    if one(shape[a]) or not inner:
        return True
    return all(same(p.strides[inner[-1]], p.strides[a] * shape[a]) for p in placements)


def merged(p: Placed, groups, shape) -> Placed:
    strides, box = [], None if p.box is None else []
    for g in groups:
        inner = [a for a in g if not one(shape[a])]
        strides.append(p.strides[inner[-1]] if inner else 0)
        if box is not None:
            box.append((0, group_size(g, shape)) if len(g) > 1 else p.box[g[0]])
    return Placed(p.name, p.dtype, p.offset, tuple(strides), None if box is None else tuple(box), p.pad)


def group_size(group, shape) -> int:
    n = 1
    for a in group:
        n *= shape[a]
    return n


def has_reshape(exprs) -> bool:
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

