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

A Call of a rolled loop's body (``rolling/body.py``) is one more kind of draft: it never merges, and
emitting it makes a ``call`` kernel of the body's kernels, built once (``rolling/calls.py``).
"""

from __future__ import annotations

import itertools
from functools import lru_cache

import numpy as np

from luminal.compiler.rolling.calls import BodyKernels
from luminal.core import dtype as dt
from luminal.core.kernel_graph import Buffer, Expr, Kernel, KernelGraph, dims_needed
from luminal.core.primitives import ELEMENTWISE
from luminal.core.symbolic import prod

RECOMPUTE_LIMIT = 4  # elementwise ops worth recomputing in each reader rather than storing once
# ops that cost next to nothing to recompute, left out of that count: a float32 exp computes its
# product in float64 (``exp``: two casts around exp2 and its multiply), which must not make softmax's
# ``exp(x - max)`` a stored kernel of its own where the uncast form was recomputed in its readers
_FREE = frozenset({"Cast"})
MAX_INLINE_DEPTH = 128  # longer chains of inlined ops are cut into several kernels (bounded kernel size)
_EXACT_CHAIN = (dt.float32, dt.float64, dt.int32)  # sums that chain without a rounding in between


def _is_scalar_const(t) -> bool:
    return t.op == "Constant" and t.arg.scalar is not None


class _Draft:
    """A kernel under construction: the materialised terms it outputs, around at most one core."""

    __slots__ = ("kind", "core", "roots", "reads", "unfusible", "lo", "hi", "alive")

    def __init__(self, kind, core, roots, reads, unfusible, pos):
        self.kind, self.core, self.roots, self.reads = kind, core, roots, reads
        self.unfusible = unfusible  # the reads that some edge in this kernel may not fuse
        self.lo = self.hi = pos  # range of topological positions of its terms (for path pruning)
        self.alive = True


class KernelBuilder:
    def __init__(self, order, roots, input_kinds, constants, ids=None):
        self.order = order
        self.pos = {t: i for i, t in enumerate(order)}  # terms hash by identity: they key every table here
        self.root_set = set(roots)
        self.input_kinds = input_kinds
        self.constants = constants
        self.readers: dict = {t: [] for t in order}
        for t in order:
            if t.op == "Out":  # reads a Call, which is a kernel of its own whoever reads it
                continue
            for i, (s, _) in enumerate(t.srcs):
                self.readers[s].append((t, i))
        self.buffers: list[Buffer] = []
        self.ids = itertools.count() if ids is None else ids  # buffer ids, unique across a program's bodies
        self.buffer_of: dict = {}  # term -> Buffer
        self.mat: set = set()
        self.chained: set = set()  # sums folded into the sum that reads them
        self.kernels: list[Kernel] = []
        self.expr_args: list = []  # args of every Scalar and Reshape made (for ``dims_needed``)
        self.in_order: dict[int, object] = {}  # id(view) -> its element count if contiguous, else None
        self.sizes: dict[int, object] = {}  # id(shape) -> _numel(shape)
        self.alive: list = []  # the shapes keyed by id in ``sizes``
        self.leaf_buffers: dict[tuple, Buffer] = {}  # one buffer per distinct leaf, whichever term reads it
        self.bodies: dict[int, BodyKernels] = {}  # id(Body) -> its kernels, built at its first call

    # step 1 ------------------------------------------------------------------------------------
    def decide(self):
        cone: dict = {}
        depth: dict = {}
        mat, chained, readers, root_set = self.mat, self.chained, self.readers, self.root_set
        for t in self.order:
            rd = readers[t]
            if t.op == "SumReduce" and t not in root_set and t.dtype in _EXACT_CHAIN and len(rd) == 1 \
                    and rd[0][0].op == "SumReduce" and _fusible(*rd[0]) \
                    and tuple(rd[0][0].srcs[rd[0][1]][1].shape) == tuple(t.shape):  # no keepdim regrouping
                chained.add(t)
                continue
            if t.op not in ELEMENTWISE or t in root_set or not rd \
                    or not all(r.fusible and r.fusible[i] for r, i in rd):
                mat.add(t)
                continue
            c, d = (0 if t.op in _FREE else 1), 0
            for s, _ in t.srcs:
                if s not in mat:
                    c += cone.get(s, 0)
                    d = max(d, depth.get(s, 0))
            cone[t], depth[t] = c, d + 1
            if (len(rd) > 1 and c > RECOMPUTE_LIMIT) or d + 1 >= MAX_INLINE_DEPTH:
                mat.add(t)

    # buffers -----------------------------------------------------------------------------------
    def _new_buffer(self, shape, dtype, kind="temp", name=None, value=None) -> Buffer:
        b = Buffer(next(self.ids), tuple(shape), dtype, kind, name, value)
        self.buffers.append(b)
        return b

    def buffer(self, t) -> Buffer:
        """The buffer holding term ``t`` (leaves get theirs on first use: one per distinct leaf, as the
        rest of a rolled program and each body's kernels have their own leaf terms)."""
        b = self.buffer_of.get(t)
        if b is not None:
            return b
        key = (t.op, t.arg, t.dtype.name, t.shape)
        b = self.leaf_buffers.get(key)
        if b is not None:
            self.buffer_of[t] = b
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
            self.kernels.append(Kernel("elementwise", (), [], [(b, self._scalar(t))], fused=("Constant",)))
        self.buffer_of[t] = self.leaf_buffers[key] = b
        return b

    # step 2 ------------------------------------------------------------------------------------
    def _reads(self, terms) -> tuple[set, set]:
        """The materialised terms read by ``terms`` and their inlined producers, and of those
        among them read through an edge that the ``fusion`` ruleset did not mark fusible."""
        out, bad, stack, seen, mat = set(), set(), list(terms), set(), self.mat
        while stack:
            t = stack.pop()
            for i, (s, _) in enumerate(t.srcs):
                if s in mat:
                    out.add(s)
                    if not (t.fusible and t.fusible[i]):
                        bad.add(s)
                elif s not in seen:
                    seen.add(s)
                    stack.append(s)
        return out, bad

    def drafts(self) -> list[_Draft]:
        drafts = []
        calls: dict = {}  # Call term -> its draft, whose roots are the call and its Out terms
        for t in self.order:
            if t not in self.mat or t.op in ("Input", "Constant", "Arange"):
                continue
            if t.op == "Call":
                calls[t] = _Draft("call", None, [t], {s for s, _ in t.srcs}, set(), self.pos[t])
                drafts.append(calls[t])
                continue
            if t.op == "Out":
                d = calls[t.srcs[0][0]]
                d.roots.append(t)
                d.hi = self.pos[t]
                continue
            kind = ("elementwise" if t.op in ELEMENTWISE else "reduce" if t.op in ("SumReduce", "MaxReduce")
                    else "matmul" if t.op == "MatMul" else "gather" if t.op == "Gather" else "scatter_add")
            core = [t] if kind == "elementwise" else self._core(t)
            d = _Draft(kind, None if kind == "elementwise" else core, [t], *self._reads(core), self.pos[t])
            drafts.append(d)
        return drafts

    def _core(self, t) -> list:
        """A reduction with the chained sums folded into it (outermost first), or the single term."""
        chain = [t]
        while chain[-1].op == "SumReduce" and chain[-1].srcs[0][0] in self.chained:
            chain.append(chain[-1].srcs[0][0])
        return chain

    # step 3 ------------------------------------------------------------------------------------
    def merge(self, drafts: list[_Draft]) -> list[_Draft]:
        owner = {r: d for d in drafts for r in d.roots}  # drafts, like terms, hash by identity
        producers = {d: {owner[r] for r in d.reads if r in owner} for d in drafts}
        consumers: dict[_Draft, set] = {d: set() for d in drafts}
        for d in drafts:
            for p in producers[d]:
                consumers[p].add(d)
        for d2 in drafts:
            if d2.kind != "elementwise":
                continue
            size = self._size(d2.roots[0].shape)
            for r2 in sorted(d2.reads, key=lambda r: -self.pos[r]):
                d1 = owner.get(r2)
                if d1 is None or d1 is d2 or d1.kind in ("gather", "scatter_add", "call"):
                    continue
                if not all(_same(self._size(r.shape), size) for r in d1.roots):
                    continue  # an epilogue or a sibling region covers the same elements
                if any(r in d2.unfusible for r in d1.roots) or _path(d1, d2, consumers, producers):
                    continue
                # d1 absorbs d2: d2's outputs become more outputs of d1 (or its epilogue)
                d1.roots += d2.roots
                d1.reads = (d1.reads | d2.reads) - set(d1.roots)
                d1.unfusible = d1.unfusible | d2.unfusible
                d1.lo, d1.hi = min(d1.lo, d2.lo), max(d1.hi, d2.hi)
                for r in d2.roots:
                    owner[r] = d1
                for p in producers[d2]:
                    consumers[p].discard(d2)
                    if p is not d1:
                        consumers[p].add(d1)
                for c in consumers[d2]:
                    producers[c].discard(d2)
                    producers[c].add(d1)
                producers[d1] = (producers[d1] | producers[d2]) - {d1, d2}
                consumers[d1] = (consumers[d1] | consumers[d2]) - {d1, d2}
                d2.alive = False
                d2 = d1
                if d1.kind != "elementwise":
                    break  # an epilogue joins one core
        alive = [d for d in drafts if d.alive]
        self.read_outside = set().union(*(d.reads for d in alive)) if alive else set()
        return _toposort(alive, owner)

    # emit --------------------------------------------------------------------------------------
    def emit(self, d: _Draft):
        if d.kind == "call":
            self._emit_call(d)
            return
        needed = {r for r in d.roots if r in self.read_outside or r in self.root_set}
        for r in d.roots:
            if r in needed and r not in self.buffer_of:
                self.buffer_of[r] = self._new_buffer(r.shape, r.dtype)
        root_set = set(d.roots)
        if d.kind in ("gather", "scatter_add"):
            t = d.core[0]
            ins = [(self.buffer(s), v) for s, v in t.srcs]
            expr = Expr(t.op, tuple(Expr("Load", (), i, s.dtype) for i, (s, _) in enumerate(t.srcs)), t.arg, t.dtype)
            self.kernels.append(Kernel(d.kind, t.shape, ins, [(self.buffer_of[t], expr)], axes=(t.arg,),
                                       fused=(t.op,)))
            return
        ins: list = []
        if d.kind == "elementwise":
            memo: dict = {}
            exprs = [self._expr(r, ins, memo, root_set, set()) for r in d.roots]
            outs = [(self.buffer_of[r], e) for r, e in zip(d.roots, exprs) if r in needed]
            names = _names(d.roots, self.mat, root_set)
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
        memo = {top: acc}
        exprs = [self._expr(r, epi_ins, memo, root_set, {top}) for r in d.roots]
        outs = [(self.buffer_of[r], e) for r, e in zip(d.roots, exprs) if r in needed]
        fused = tuple(t.op for t in reversed(core)) + _names([r for r in d.roots if r is not top], self.mat, root_set)
        self.kernels.append(Kernel(d.kind, tuple(domain), ins, outs, axes=axes, reduce_op=reduce_op,
                                   prologue=prologue, acc_dtype=top.dtype, epilogue_inputs=epi_ins, fused=fused))

    def _emit_call(self, d: _Draft):
        """One call of a loop body: a ``call`` kernel of the body's kernels (built at its first call)
        on this call's argument buffers (``calls.py``)."""
        call = d.roots[0]
        body = call.arg.body
        built = self.bodies.get(id(body))
        if built is None:
            built = self.bodies[id(body)] = BodyKernels(body, self)
        outs = built.call(self, [self.buffer(s) for s, _ in call.srcs], [v for _, v in call.srcs])
        for r in d.roots[1:]:
            self.buffer_of[r] = outs[r.arg]

    def _operand(self, s, view, ins, memo, root_set, inside) -> Expr:
        """How a kernel reads term ``s`` through ``view``: an inline scalar, the producer's own
        expression (computed in this kernel; reshaped when the view only regroups its elements),
        or a Load of its buffer."""
        if s.op == "Constant" and s.arg.scalar is not None and view.mask is None:
            return self._scalar(s)
        e = memo.get(s)
        here = e is not None or ((s not in self.mat or s in root_set) and s not in inside)
        if here and self._reads_in_order(view, s.shape):
            if e is None:
                e = self._expr(s, ins, memo, root_set, inside)
            if view.shape is s.shape or tuple(view.shape) == tuple(s.shape) or _scalar_only(e):
                return e  # a value made of scalars broadcasts to any shape
            self.expr_args.append(view.shape)
            return Expr("Reshape", (e,), tuple(view.shape), s.dtype)
        b = self.buffer(s)
        for i, (b2, v) in enumerate(ins):
            if b2 is b and (v is view or v == view):
                return Expr("Load", (), i, s.dtype)
        ins.append((b, view))
        return Expr("Load", (), len(ins) - 1, s.dtype)

    def _scalar(self, t) -> Expr:
        self.expr_args.append(t.arg.scalar)
        return Expr("Scalar", (), t.arg.scalar, t.dtype)

    def _reads_in_order(self, view, shape) -> bool:
        """The view reads the whole buffer of ``shape`` element by element in order (the identity, or
        a reshape of it): a consumer can then use the producer's values directly. (Cached by view
        object: symbolic arithmetic is slow, hashing a view is too, and deep graphs ask about the same
        few view objects thousands of times; the terms keep them alive while the builder runs.)"""
        n = self.in_order.get(id(view), False)
        if n is False:
            n = self.in_order[id(view)] = self._size(view.shape) if view.is_contiguous() else None
        return n is not None and _same(n, self._size(shape))

    def _size(self, shape):
        """``_numel(shape)``, looked up by the shape object first (a deep program's terms share a few;
        hashing a symbolic shape by value compares dims, which is slow)."""
        n = self.sizes.get(id(shape))
        if n is None:
            n = self.sizes[id(shape)] = _numel(shape)
            self.alive.append(shape)  # its id stays its own while the builder runs
        return n

    def _expr(self, t, ins, memo, root_set, inside) -> Expr:
        e = memo.get(t)
        if e is None:
            operand = self._operand
            args = tuple([operand(s, v, ins, memo, root_set, inside) for s, v in t.srcs])
            e = memo[t] = Expr(t.op, args, t.arg if t.op == "Cast" else None, t.dtype)
        return e

    def build(self, outputs, updates) -> KernelGraph:
        self.decide()
        for d in self.merge(self.drafts()):
            self.emit(d)
        outs = [(self.buffer(t), v) for t, v in outputs]
        ups = [(name, self.buffer(t), v) for name, t, v in updates]
        kg = KernelGraph(self.buffers, self.kernels, outs, ups)
        kg.dims = dims_needed(kg, self.expr_args)
        return kg


@lru_cache(maxsize=65536)
def _numel(shape):
    """The element count of ``shape``, one object per distinct value (see ``_same``)."""
    n = prod(shape)
    return _NUMELS.setdefault(n, n)


_NUMELS: dict = {}


def _same(a, b) -> bool:
    """Equal element counts from ``_numel``: interned, so identity decides (symbolic ``==`` is slow)."""
    return a is b or (type(a) is int and type(b) is int and a == b)


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


def _names(roots, mat, root_set) -> tuple:
    """The primitives an elementwise region computes (roots and their inlined producers)."""
    names, stack, seen = [], list(roots), set()
    while stack:
        t = stack.pop()
        if t in seen:
            continue
        seen.add(t)
        names.append(t.op)
        stack.extend(s for s, _ in t.srcs if (s not in mat or s in root_set) and s.op in ELEMENTWISE)
    return tuple(reversed(names))


def _path(d1, d2, consumers, producers) -> bool:
    """Is there a kernel X != d1, d2 with d1 -> ... -> X -> ... -> d2? (Merging would be a cycle.)

    Searched from both ends at once, forward from d1's other consumers and backward from d2's other
    producers, one kernel per side in turn: either side alone decides, so the answer costs the
    smaller of the two cones (a late d2 reading an early d1 has a huge forward cone and a small
    backward one, or the other way round)."""
    fwd = [c for c in consumers[d1] if c is not d2]
    bwd = [p for p in producers[d2] if p is not d1]
    fseen, bseen = set(fwd), set(bwd)
    while fwd and bwd:
        x = fwd.pop()
        if x.lo <= d2.hi:  # else everything x reaches comes after d2's last term
            nxt = consumers[x]
            if d2 in nxt:
                return True
            for c in nxt:
                if c not in fseen:
                    if c in bseen:
                        return True
                    fseen.add(c)
                    fwd.append(c)
        y = bwd.pop()
        if y.hi >= d1.lo:  # else everything that reaches y comes before d1's first term
            prev = producers[y]
            if d1 in prev:
                return True
            for p in prev:
                if p not in bseen:
                    if p in fseen:
                        return True
                    bseen.add(p)
                    bwd.append(p)
    return False


def _toposort(drafts, owner) -> list[_Draft]:
    """Kernels in an order where every kernel runs after the kernels whose outputs it reads
    (ties broken by the position of their first term, so the order is deterministic)."""
    import heapq

    deps = {d: {owner[r] for r in d.reads if r in owner and owner[r] is not d} for d in drafts}
    users: dict[_Draft, list] = {d: [] for d in drafts}
    for d in drafts:
        for p in deps[d]:
            users[p].append(d)
    waiting = {d: len(deps[d]) for d in drafts}
    index = {d: i for i, d in enumerate(drafts)}
    ready = [(d.lo, i, d) for i, d in enumerate(drafts) if not waiting[d]]  # i is unique: d never compared
    heapq.heapify(ready)
    out = []
    while ready:
        _, _, d = heapq.heappop(ready)
        out.append(d)
        for u in users[d]:
            waiting[u] -= 1
            if not waiting[u]:
                heapq.heappush(ready, (u.lo, index[u], u))
    assert len(out) == len(drafts), "kernel merge produced a cycle"
    return out


def build_kernels(order, outputs, updates, input_kinds, constants) -> KernelGraph:
    """``order``: the terms, producers first; ``outputs``: [(Term, View)]; ``updates``:
    [(state name, Term, View)]; ``input_kinds``: Input name -> buffer kind; ``constants``:
    ConstKey -> array for array constants."""
    roots = [t for t, _ in outputs] + [t for _, t, _ in updates]
    return KernelBuilder(order, roots, input_kinds, constants).build(outputs, updates)


__all__ = ["build_kernels", "RECOMPUTE_LIMIT"]
