"""Cut the extracted Term DAG into kernels (``kernel_graph.py``).

Three steps, each simple on its own:

1. **Materialise or inline.** A term gets a buffer of its own when something needs one: it is a
   program result, not elementwise (reductions, matmuls, gathers, leaves), read through an edge
   the ``fusion`` ruleset did not mark fusible, or read by several consumers and too costly to
   recompute in each (more than ``RECOMPUTE_LIMIT`` ops), or it ends a chain of ``MAX_INLINE_DEPTH``
   inlined ops (kernels stay bounded). Every other elementwise term is inlined
   into the kernels of its readers. A sum read only by another sum becomes part of that sum
   (one reduction over both axes).
2. **One kernel per materialised term**: an elementwise region (its inlined producers), a reduction
   whose prologue is its inlined producers, a matmul, a gather or a scatter. Kernels read only
   materialised terms, so they cannot form cycles.
3. **Vertical merges.** An elementwise kernel whose inputs come, through fusible edges, from an
   earlier elementwise, reduce or matmul kernel of the matching shape joins it (as more outputs or
   as an epilogue), unless some third kernel lies on a path between them. This turns Linear + bias +
   activation into one matmul kernel, softmax's division into the sum's epilogue, and an optimizer's
   moment and parameter updates into one kernel with several outputs.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from ..frontend import dtype as dt
from ..frontend.primitives import ELEMENTWISE
from ..frontend.symbolic import prod
from .kernel_graph import Buffer, Expr, Kernel, KernelGraph

RECOMPUTE_LIMIT = 4  # elementwise ops worth recomputing in each reader rather than storing once
MAX_INLINE_DEPTH = 128  # longer chains of inlined ops are cut into several kernels (bounded kernel size)
_EXACT_CHAIN = (dt.float32, dt.float64, dt.int32)  # sums that chain without a rounding in between


def _is_scalar_const(t) -> bool:
    return t.op == "Constant" and t.arg.scalar is not None


class _Draft:
    """A kernel under construction: the materialised terms it outputs, around at most one core."""

    __slots__ = ("kind", "core", "roots", "reads", "lo", "hi", "alive")

    def __init__(self, kind, core, roots, reads, pos):
        self.kind, self.core, self.roots, self.reads = kind, core, roots, reads
        self.lo = self.hi = pos  # range of topological positions of its terms (for path pruning)
        self.alive = True


class KernelBuilder:
    def __init__(self, order, roots, input_kinds, constants):
        self.order = order
        self.pos = {id(t): i for i, t in enumerate(order)}
        self.root_ids = {id(t) for t in roots}
        self.input_kinds = input_kinds
        self.constants = constants
        self.readers: dict[int, list] = {id(t): [] for t in order}
        for t in order:
            for i, (s, _) in enumerate(t.srcs):
                self.readers[id(s)].append((t, i))
        self.buffers: list[Buffer] = []
        self.buffer_of: dict[int, Buffer] = {}
        self.mat: set[int] = set()
        self.chained: set[int] = set()  # sums folded into the sum that reads them
        self.kernels: list[Kernel] = []

    # step 1 ------------------------------------------------------------------------------------
    def decide(self):
        cone: dict[int, int] = {}
        depth: dict[int, int] = {}
        for t in self.order:
            rd = self.readers[id(t)]
            if t.op == "SumReduce" and id(t) not in self.root_ids and t.dtype in _EXACT_CHAIN and len(rd) == 1 \
                    and rd[0][0].op == "SumReduce" and _fusible(*rd[0]) \
                    and tuple(rd[0][0].srcs[rd[0][1]][1].shape) == tuple(t.shape):  # no keepdim regrouping
                self.chained.add(id(t))
                continue
            if t.op not in ELEMENTWISE or id(t) in self.root_ids or not rd \
                    or not all(_fusible(r, i) for r, i in rd):
                self.mat.add(id(t))
                continue
            inlined = [s for s, _ in t.srcs if id(s) not in self.mat]
            cone[id(t)] = 1 + sum(cone.get(id(s), 0) for s in inlined)
            depth[id(t)] = 1 + max((depth.get(id(s), 0) for s in inlined), default=0)
            if (len(rd) > 1 and cone[id(t)] > RECOMPUTE_LIMIT) or depth[id(t)] >= MAX_INLINE_DEPTH:
                self.mat.add(id(t))

    # buffers -----------------------------------------------------------------------------------
    def _new_buffer(self, shape, dtype, kind="temp", name=None, value=None) -> Buffer:
        b = Buffer(len(self.buffers), tuple(shape), dtype, kind, name, value)
        self.buffers.append(b)
        return b

    def buffer(self, t) -> Buffer:
        """The buffer holding term ``t`` (leaves get theirs on first use)."""
        b = self.buffer_of.get(id(t))
        if b is not None:
            return b
        if t.op == "Input":
            b = self._new_buffer(t.shape, t.dtype, self.input_kinds.get(t.arg, "input"), t.arg)
        elif t.op == "Constant" and t.arg.scalar is None:
            b = self._new_buffer(t.shape, t.dtype, "const", value=self.constants[t.arg])
        elif _is_scalar_const(t) and t.arg.digest != "sym":
            b = self._new_buffer((), t.dtype, "const", value=np.asarray(t.arg.scalar, t.dtype.np))
        elif t.op == "Arange":
            b = self._new_buffer(t.shape, dt.int32, "iota")
        else:  # a symbolic scalar read where a buffer is needed: computed by a tiny kernel
            assert _is_scalar_const(t), f"no buffer was made for {t}"
            b = self._new_buffer((), t.dtype)
            self.kernels.append(Kernel("elementwise", (), [], [(b, _scalar(t))], fused=("Constant",)))
        self.buffer_of[id(t)] = b
        return b

    # step 2 ------------------------------------------------------------------------------------
    def _reads(self, terms) -> set[int]:
        """Ids of the materialised terms read by ``terms`` and their inlined producers."""
        out, stack, seen = set(), list(terms), set()
        while stack:
            t = stack.pop()
            for s, _ in t.srcs:
                if id(s) in self.mat:
                    out.add(id(s))
                elif id(s) not in seen:
                    seen.add(id(s))
                    stack.append(s)
        return out

    def drafts(self) -> list[_Draft]:
        drafts = []
        for t in self.order:
            if id(t) not in self.mat or t.op in ("Input", "Constant", "Arange"):
                continue
            kind = ("elementwise" if t.op in ELEMENTWISE else "reduce" if t.op in ("SumReduce", "MaxReduce")
                    else "matmul" if t.op == "MatMul" else "gather" if t.op == "Gather" else "scatter_add")
            core = [t] if kind == "elementwise" else self._core(t)
            d = _Draft(kind, None if kind == "elementwise" else core, [t], self._reads(core), self.pos[id(t)])
            drafts.append(d)
        return drafts

    def _core(self, t) -> list:
        """A reduction with the chained sums folded into it (outermost first), or the single term."""
        chain = [t]
        while chain[-1].op == "SumReduce" and id(chain[-1].srcs[0][0]) in self.chained:
            chain.append(chain[-1].srcs[0][0])
        return chain

    # step 3 ------------------------------------------------------------------------------------
    def merge(self, drafts: list[_Draft]) -> list[_Draft]:
        owner = {id(r): d for d in drafts for r in d.roots}
        by_id = {id(d): d for d in drafts}
        producers = {id(d): {id(owner[r]) for r in d.reads if r in owner} for d in drafts}
        consumers: dict[int, set] = {id(d): set() for d in drafts}
        for d in drafts:
            for p in producers[id(d)]:
                consumers[p].add(id(d))
        for d2 in drafts:
            if d2.kind != "elementwise":
                continue
            size = _numel(d2.roots[0].shape)
            for rid in sorted(d2.reads, key=lambda r: -self.pos[r]):
                d1 = owner.get(rid)
                if d1 is None or d1 is d2 or d1.kind in ("gather", "scatter_add"):
                    continue
                if any(_numel(r.shape) != size for r in d1.roots):
                    continue  # an epilogue or a sibling region covers the same elements
                if not self._fusible_reads(d2, d1) or self._path(d1, d2, consumers, by_id):
                    continue
                # d1 absorbs d2: d2's outputs become more outputs of d1 (or its epilogue)
                d1.roots += d2.roots
                d1.reads = (d1.reads | d2.reads) - {id(r) for r in d1.roots}
                d1.lo, d1.hi = min(d1.lo, d2.lo), max(d1.hi, d2.hi)
                for r in d2.roots:
                    owner[id(r)] = d1
                for p in producers[id(d2)]:
                    consumers[p].discard(id(d2))
                    if p != id(d1):
                        consumers[p].add(id(d1))
                for c in consumers[id(d2)]:
                    producers[c].discard(id(d2))
                    producers[c].add(id(d1))
                producers[id(d1)] = (producers[id(d1)] | producers[id(d2)]) - {id(d1), id(d2)}
                consumers[id(d1)] = (consumers[id(d1)] | consumers[id(d2)]) - {id(d1), id(d2)}
                d2.alive = False
                d2 = d1
                if d1.kind != "elementwise":
                    break  # an epilogue joins one core
        alive = [d for d in drafts if d.alive]
        self.read_outside = set().union(*(d.reads for d in alive)) if alive else set()
        return _toposort(alive, owner)

    def _fusible_reads(self, d2: _Draft, d1: _Draft) -> bool:
        """Every read of ``d1``'s outputs inside ``d2`` goes through a fusible edge."""
        targets = {id(r) for r in d1.roots}
        stack, seen = list(d2.roots), set()
        while stack:
            t = stack.pop()
            for i, (s, _) in enumerate(t.srcs):
                if id(s) in targets and not _fusible(t, i):
                    return False
                if id(s) not in self.mat and id(s) not in seen:
                    seen.add(id(s))
                    stack.append(s)
        return True

    def _path(self, d1, d2, consumers, by_id) -> bool:
        """Is there a kernel X != d1, d2 with d1 -> ... -> X -> ... -> d2? (Merging would be a cycle.)"""
        stack = [c for c in consumers[id(d1)] if c != id(d2)]
        seen = set(stack)
        while stack:
            x = by_id[stack.pop()]
            if x.lo > d2.hi:
                continue  # everything x reaches comes after d2's last term
            if id(d2) in consumers[id(x)]:
                return True
            for c in consumers[id(x)]:
                if c not in seen:
                    seen.add(c)
                    stack.append(c)
        return False

    # emit --------------------------------------------------------------------------------------
    def emit(self, d: _Draft):
        needed = [r for r in d.roots if id(r) in self.read_outside or id(r) in self.root_ids]
        for r in needed:
            if id(r) not in self.buffer_of:
                self.buffer_of[id(r)] = self._new_buffer(r.shape, r.dtype)
        root_ids = {id(r) for r in d.roots}
        if d.kind in ("gather", "scatter_add"):
            t = d.core[0]
            ins = [(self.buffer(s), v) for s, v in t.srcs]
            expr = Expr(t.op, tuple(Expr("Load", (), i, s.dtype) for i, (s, _) in enumerate(t.srcs)), t.arg, t.dtype)
            self.kernels.append(Kernel(d.kind, t.shape, ins, [(self.buffer_of[id(t)], expr)], axes=(t.arg,),
                                       fused=(t.op,)))
            return
        ins: list = []
        if d.kind == "elementwise":
            memo: dict = {}
            exprs = [self._expr(r, ins, memo, root_ids, set()) for r in d.roots]
            outs = [(self.buffer_of[id(r)], e) for r, e in zip(d.roots, exprs) if r in needed]
            names = _names(d.roots, self.mat, root_ids)
            self.kernels.append(Kernel("elementwise", d.roots[0].shape, ins, outs, fused=names))
            return
        core = d.core
        top, inner = core[0], core[-1]
        acc = Expr("Acc", (), None, top.dtype)
        if d.kind == "matmul":
            ins = [(self.buffer(s), v) for s, v in inner.srcs]
            domain, axes, prologue, reduce_op = inner.srcs[0][1].shape, (inner.arg,), None, None
        else:
            domain = inner.srcs[0][1].shape
            axes = _chain_axes(core)
            src, view = inner.srcs[0]
            prologue = self._operand(src, view, ins, {}, set(), set())
            reduce_op = "sum" if top.op == "SumReduce" else "max"
        epi_ins: list = []
        memo = {id(top): acc}
        exprs = [self._expr(r, epi_ins, memo, root_ids, {id(top)}) for r in d.roots]
        outs = [(self.buffer_of[id(r)], e) for r, e in zip(d.roots, exprs) if r in needed]
        fused = tuple(t.op for t in reversed(core)) + _names([r for r in d.roots if r is not top], self.mat, root_ids)
        self.kernels.append(Kernel(d.kind, tuple(domain), ins, outs, axes=axes, reduce_op=reduce_op,
                                   prologue=prologue, acc_dtype=top.dtype, epilogue_inputs=epi_ins, fused=fused))

    def _operand(self, s, view, ins, memo, root_ids, inside) -> Expr:
        """How a kernel reads term ``s`` through ``view``: an inline scalar, the producer's own
        expression (computed in this kernel; reshaped when the view only regroups its elements),
        or a Load of its buffer."""
        if _is_scalar_const(s) and view.mask is None:
            return _scalar(s)
        here = id(s) in memo or ((id(s) not in self.mat or id(s) in root_ids) and id(s) not in inside)
        if here and reads_in_order(view, s.shape):
            e = memo[id(s)] if id(s) in memo else self._expr(s, ins, memo, root_ids, inside)
            if tuple(view.shape) == tuple(s.shape) or _scalar_only(e):
                return e  # a value made of scalars broadcasts to any shape
            return Expr("Reshape", (e,), tuple(view.shape), s.dtype)
        b = self.buffer(s)
        for i, (b2, v) in enumerate(ins):
            if b2 is b and v == view:
                return Expr("Load", (), i, s.dtype)
        ins.append((b, view))
        return Expr("Load", (), len(ins) - 1, s.dtype)

    def _expr(self, t, ins, memo, root_ids, inside) -> Expr:
        if id(t) in memo:
            return memo[id(t)]
        args = tuple(self._operand(s, v, ins, memo, root_ids, inside) for s, v in t.srcs)
        e = Expr(t.op, args, t.arg if t.op == "Cast" else None, t.dtype)
        memo[id(t)] = e
        return e

    def build(self, outputs, updates) -> KernelGraph:
        self.decide()
        for d in self.merge(self.drafts()):
            self.emit(d)
        outs = [(self.buffer(t), v) for t, v in outputs]
        ups = [(name, self.buffer(t), v) for name, t, v in updates]
        return KernelGraph(self.buffers, self.kernels, outs, ups)


@lru_cache(maxsize=65536)
def reads_in_order(view, shape) -> bool:
    """The view reads the whole buffer of ``shape`` element by element in order (the identity, or a
    reshape of it): a consumer can then use the producer's values directly. (Cached: symbolic
    arithmetic is slow and deep graphs ask about the same few views thousands of times.)"""
    return view.is_contiguous() and _numel(view.shape) == _numel(shape)


@lru_cache(maxsize=65536)
def _numel(shape):
    return prod(shape)


def _fusible(t, i) -> bool:
    return bool(t.fusible) and bool(t.fusible[i])


def _scalar_only(e: Expr) -> bool:
    stack = [e]
    while stack:
        x = stack.pop()
        if x.op in ("Load", "Acc"):
            return False
        stack.extend(x.args)
    return True


def _scalar(t) -> Expr:
    return Expr("Scalar", (), t.arg.scalar, t.dtype)


def _chain_axes(core) -> tuple:
    """The axes of the innermost sum's input that a chain of sums (outermost first) removes."""
    axes: list[int] = []
    for t in reversed(core):  # innermost first: map each axis back to the original domain
        a = t.arg
        for prev in sorted(axes):
            if a >= prev:
                a += 1
        axes.append(a)
    return tuple(sorted(axes))


def _names(roots, mat, root_ids) -> tuple:
    """The primitives an elementwise region computes (roots and their inlined producers)."""
    names, stack, seen = [], list(roots), set()
    while stack:
        t = stack.pop()
        if id(t) in seen:
            continue
        seen.add(id(t))
        names.append(t.op)
        stack.extend(s for s, _ in t.srcs if (id(s) not in mat or id(s) in root_ids) and s.op in ELEMENTWISE)
    return tuple(reversed(names))


def _toposort(drafts, owner) -> list[_Draft]:
    """Kernels in an order where every kernel runs after the kernels whose outputs it reads
    (ties broken by the position of their first term, so the order is deterministic)."""
    import heapq

    deps = {id(d): {id(owner[r]) for r in d.reads if r in owner and owner[r] is not d} for d in drafts}
    users: dict[int, list] = {id(d): [] for d in drafts}
    for d in drafts:
        for p in deps[id(d)]:
            users[p].append(d)
    by_id = {id(d): d for d in drafts}
    waiting = {id(d): len(deps[id(d)]) for d in drafts}
    ready = [(d.lo, i, id(d)) for i, d in enumerate(drafts) if not waiting[id(d)]]
    index = {id(d): i for i, d in enumerate(drafts)}
    heapq.heapify(ready)
    out = []
    while ready:
        _, _, k = heapq.heappop(ready)
        out.append(by_id[k])
        for u in users[k]:
            waiting[id(u)] -= 1
            if not waiting[id(u)]:
                heapq.heappush(ready, (u.lo, index[id(u)], id(u)))
    assert len(out) == len(drafts), "kernel merge produced a cycle"
    return out


def build_kernels(order, outputs, updates, input_kinds, constants) -> KernelGraph:
    """``order``: the terms, producers first; ``outputs``: [(Term, View)]; ``updates``:
    [(state name, Term, View)]; ``input_kinds``: Input name -> buffer kind; ``constants``:
    ConstKey -> array for array constants."""
    roots = [t for t, _ in outputs] + [t for _, t, _ in updates]
    return KernelBuilder(order, roots, input_kinds, constants).build(outputs, updates)


__all__ = ["build_kernels", "RECOMPUTE_LIMIT"]
