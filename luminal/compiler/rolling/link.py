"""The link: one Term DAG of the optimised rest and, per trip, a Call of its body.

Trips are linked in creation order; a trip reads only nodes made before it (detection's spans are
proper loop iterations), so every term is made after the terms it reads. The link costs the rest and
the trips' interfaces, never the trips' bodies: the kernel stage builds a body's kernels once
(``calls.py``).
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from luminal.compiler.rolling.body import Body, CallArg, Pack
from luminal.compiler.rolling.detect import Loops
from luminal.compiler.rolling.template import BodyTemplate
from luminal.compiler.term import Term, topological
from luminal.core.primitives import LEAVES
from luminal.core.symbolic import prod
from luminal.core.view import View, contiguous_strides


class _Cycle(Exception):
    pass


class _Link:
    """One Term DAG from the optimised rest and the optimised templates: each trip is a Call of its
    loop's Body (and an Out term per body output), so this pass costs the rest and the trips'
    interfaces, not the trips' bodies (the kernel stage builds a body's kernels once).

    Trips are made in creation order: a trip reads only nodes made before it, which lie in trips that
    start before it or in the rest (whose terms are copied on demand, their synthetic inputs resolved
    to trip outputs). A trip reading one not made yet can only be an extracted template reading an
    input its value does not need (``_Cycle``). Every term is made after the terms it reads, so the
    order they are made in is the program's order (``order``; it also holds the Out terms of outputs
    that a trip's readers happen not to read: the call writes them all the same)."""

    def __init__(self, loops, nodes, found: Loops, rest_terms, rest_inputs, roots):
        self.loops, self.nodes, self.in_loop, self.roots = loops, nodes, found.in_loop, roots
        self.rest_terms, self.rest_inputs = rest_terms, rest_inputs
        self.leaves: dict[tuple, Term] = {}
        self.whole = View.contiguous(())  # how an Out reads its Call
        out_ids = [found.trip_ids(lp.index, lp.outputs) for lp in loops]  # (trips, outputs) per loop
        # read whole: by the rest, by the roots, and through a call that returns its argument as it is
        # (``_passed``), whose Out then holds the argument's buffer whole, never a part of a pack
        elsewhere = np.unique(np.concatenate(
            [np.array([n.id for n in rest_inputs.values()] + [r.id for r in roots], np.int64)] + _passed(loops)))
        made = [_body(lp, (~np.isin(ids, elsewhere).any(0)).tolist()) for lp, ids in zip(loops, out_ids)]
        self.bodies = [b for b, _ in made]
        self.body_terms = [n for _, n in made]
        # per loop and trip: the node ids of its arguments and of its outputs, own Outs first, then packed
        self.args = [_rows([lp.inputs[x.arg] for x in b.inputs], lp.span.trips) for lp, b in zip(loops, self.bodies)]
        parts = [_parts(b) for b in self.bodies]
        packed = [[i for i, _, _ in q] for q in parts]
        self.own = [sorted(set(range(len(b.outputs))) - set(q)) for b, q in zip(self.bodies, packed)]
        self.own_ids = [ids[:, own].tolist() for ids, own in zip(out_ids, self.own)]
        self.packed_ids = [ids[:, q].tolist() for ids, q in zip(out_ids, packed)]
        self.pack_of = [[g for _, g, _ in q] for q in parts]  # per packed output: its pack, then its part
        self.part_views = [[v for _, _, v in q] for q in parts]
        self.arg_views = [[View.contiguous(x.shape) for x in b.inputs] for b in self.bodies]  # read whole
        self.flags = [(False,) * len(b.inputs) for b in self.bodies]
        self.of_node: dict[int, Term] = {}  # node id -> the term computing it (a trip's outputs: once made)
        self.part_of: dict[int, View] = {}  # node id of a packed output -> its part of the pack
        self.copied: dict = {}  # rest term -> its copy in the linked DAG
        self.order: list[Term] = []  # every term made, in the order made (producers first)

    def run(self) -> dict[int, Term]:
        trips = sorted((lp.span.start + t * lp.span.period, k, t)
                       for k, lp in enumerate(self.loops) for t in range(lp.span.trips))
        for _, k, t in trips:
            self._call(k, t)
        terms = {r.id: self._node(r.id) for r in self.roots}  # never a packed output
        for i, t in enumerate(self.order):
            t.id = i
        return terms

    def size(self) -> int:
        """Terms of the program with every Call expanded (a body's terms once per trip)."""
        calls = Counter(t.arg.site[0] for t in self.order if t.op == "Call")
        return sum(t.op not in ("Call", "Out") for t in self.order) + \
            sum(self.body_terms[k] * n for k, n in calls.items())

    def _call(self, k: int, t: int) -> None:
        body, get, node, part_of = self.bodies[k], self.of_node.get, self._node, self.part_of.get
        ids = self.args[k][t]
        srcs = tuple(zip([get(i) or node(i) for i in ids], [part_of(i, v) for i, v in zip(ids, self.arg_views[k])]))
        call = Term("Call", srcs, CallArg(body, (k, t)), None, (), self.flags[k])
        part = ((call, self.whole),)
        outs = [Term("Out", part, i, body.outputs[i].dtype, body.outputs[i].shape, (False,)) for i in self.own[k]]
        n = len(body.outputs)
        packs = [Term("Out", part, n + g, p.dtype, (p.size,), (False,)) for g, p in enumerate(body.packs)]
        self.of_node.update(zip(self.own_ids[k][t], outs))
        if packs:
            self.of_node.update(zip(self.packed_ids[k][t], [packs[g] for g in self.pack_of[k]]))
            self.part_of.update(zip(self.packed_ids[k][t], self.part_views[k]))
        self.order.append(call)
        self.order += outs
        self.order += packs

    def _node(self, i: int) -> Term:
        """The term computing frontend node ``i``: a leaf, a trip's output (registered when its trip
        is made) or a copy of a rest term."""
        got = self.of_node.get(i)
        if got is None:
            x = self.nodes[i]
            if x.op in LEAVES:
                got = self._leaf(Term(x.op, (), x.arg, x.dtype, x.shape, origin=x.id))
            elif not self.in_loop(i):
                got = self._rest(self.rest_terms[i])
            else:  # a trip not made yet
                raise _Cycle(x)
            self.of_node[i] = got
        return got

    def _rest(self, root: Term) -> Term:
        """A copy of rest term ``root`` with its synthetic inputs resolved (iterative: the rest may be
        deep)."""
        done, inputs = self.copied, self.rest_inputs
        stack = [root]
        while stack:
            x = stack[-1]
            if x in done:
                stack.pop()
            elif x.op == "Input" and x.arg in inputs:
                done[x] = self._node(inputs[x.arg].id)
            elif not x.srcs:
                done[x] = self._leaf(x)
            else:
                todo = [s for s, _ in x.srcs if s not in done]
                if todo:
                    stack += todo
                else:
                    done[x] = Term(x.op, tuple((done[s], v) for s, v in x.srcs), x.arg, x.dtype, x.shape,
                                   x.fusible, x.origin)
                    self.order.append(done[x])
        return done[root]

    def _leaf(self, t: Term) -> Term:
        """One term per distinct leaf in the rest and the Calls' arguments."""
        key = (t.op, t.arg, t.dtype.name, t.shape)
        got = self.leaves.get(key)
        if got is None:
            got = self.leaves[key] = t
            self.order.append(t)
        return got


def _rows(per_slot: list, trips: int) -> list[list[int]]:
    """Per trip, the ids each slot reads (``per_slot``: an id array over the trips per slot)."""
    return np.stack(per_slot, 1).tolist() if per_slot else [[] for _ in range(trips)]


def _passed(loops) -> list[np.ndarray]:
    """The node ids that a call returns as they are: per body output that the optimised template
    reduced to one of its synthetic inputs (the rewrites removed a Copy, a product by 1), the ids that
    input reads, one per trip. Such an output's Out is the call's argument buffer itself (``calls.py``:
    a "param" return), and whoever reads the Out reads that buffer whole: an argument read from its
    part of a pack (through the part's view, offset and all) would come back as the whole pack, read
    from element 0. So a value that a call passes through is never packed, whichever body computes it and
    whichever body's trips pass it on (another body's, as a gradient's trips pass on a forward body's
    saved value, or a later trip of its own)."""
    out = []
    for lp in loops:
        for p in lp.outputs:
            t = lp.terms[lp.template[p].id]
            if t.op == "Input" and t.arg in lp.inputs:
                out.append(np.asarray(lp.inputs[t.arg], np.int64))
    return out


def _parts(body: Body) -> list[tuple]:
    """Each packed output, pack by pack: ``(output index, pack index, view)``, the view being how a
    reader reads it from its pack (contiguous, at its offset)."""
    return [(i, g, View(body.outputs[i].shape, contiguous_strides(body.outputs[i].shape), off))
            for g, p in enumerate(body.packs) for i, off in zip(p.members, p.offsets)]


def _body(lp: BodyTemplate, packable: list) -> tuple[Body, int]:
    """Loop ``lp``'s optimised template as a Body (its outputs, the synthetic inputs they still read,
    and its packs) and the number of terms a call computes. ``packable[i]``: only later trips read
    output ``i``, each through its part (neither the rest, the roots nor a call that returns it as it
    is: ``_passed``). Such an output is packed when a call computes it into a buffer of its own: it
    varies with the inputs (else the body computes it once, before the first call) and no other
    output is the same term."""
    outputs = tuple(lp.terms[lp.template[p].id] for p in lp.outputs)
    terms = topological(list(outputs))
    inputs = {t.arg: t for t in terms if t.op == "Input" and t.arg in lp.inputs}
    varies = {id(t) for t in inputs.values()}
    for t in terms:
        if any(id(s) in varies for s, _ in t.srcs):
            varies.add(id(t))
    times = Counter(id(o) for o in outputs)
    groups: dict = {}
    for i, o in enumerate(outputs):
        if packable[i] and o.srcs and id(o) in varies and times[id(o)] == 1:
            groups.setdefault(o.dtype, []).append(i)
    packs = []
    for dtype, members in groups.items():
        offsets, size = [], 0
        for i in members:
            offsets.append(size)
            size = size + prod(outputs[i].shape)
        packs.append(Pack(dtype, tuple(members), tuple(offsets), size))
    return Body(f"@roll{lp.index}", tuple(inputs.values()), outputs, tuple(packs)), len(terms) - len(inputs)
