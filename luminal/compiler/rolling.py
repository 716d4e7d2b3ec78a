"""Loop rolling: optimise one copy of a repeated block, then replicate the result for every repetition.

Models repeat blocks (MLP layers, transformer layers) in the forward and in the backward pass. The
e-graph should see each block once, so that its share of compile time stays flat as depth grows:

1. **Detect** (``compile/loops.py``): loops are windows of a periodic sequence of the graph's nodes in
   creation order, found with array passes over the graph's columns. Trip t of a loop is the t-th
   window; a position (an offset in the window) names one node per trip.
2. **Template**: trip 0, every input that is not read from inside its trip read from a synthetic Input
   leaf instead (leaves shared by all trips stay, so constants still fold, as do small constant
   computations every trip reads). Its outputs are the positions read outside their trip. It is
   optimised once.
3. **Rest**: everything outside the loops, trip outputs read from synthetic leaves; optimised once.
4. **Link**: the optimised template becomes a Body; the rest's terms and, for every trip, Call terms
   of that body on the trip's actual inputs make one Term DAG. The kernel stage builds a body's
   kernels once, as a routine, and makes each Call one ``call`` kernel of it (``compile/calls.py``).
   The outputs that only later trips read (neither the rest nor the roots) are packed (``term.py``):
   a trip then costs the later stages one Out and one buffer for all of them.

Every trip is isomorphic to trip 0 with its own inputs, so the linked DAG computes exactly what the
roots compute. The price: neither the e-graph nor the kernel stage fuses across a body's boundary
(a body's inputs and outputs are buffers). Detection is array passes over the graph; the template,
the rest and linking cost the body, the rest and the trips' interfaces, never the trips' bodies.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from luminal.compiler.loops import Loops, Window
from luminal.compiler.term import Body, CallArg, Pack, Term, topological
from luminal.core.gc_paused import gc_paused
from luminal.core.primitives import LEAVES
from luminal.core.symbolic import prod
from luminal.core.view import View, contiguous_strides
from luminal.frontend.graph import Node


def _optimize(roots, **kw):
    """The e-graph stage (a module-level hook, so tests can count and replace its runs)."""
    from luminal.compiler.egraph import optimize

    return optimize(roots, **kw)


@dataclass
class _Loop:
    """Loop ``index`` (its ``window`` in ``Loops``) as the e-graph and the linker see it."""

    index: int
    window: Window
    template: dict = field(default_factory=dict)  # offset -> template Node (trip 0's id)
    inputs: dict = field(default_factory=dict)  # synthetic name -> id of the node it stands for, per trip
    outputs: list = field(default_factory=list)  # offsets read outside their trip
    terms: dict = field(default_factory=dict)  # template root id -> Term (the optimised template)


def optimize_rolled(roots, graph, *, found: Loops | None = None, search: int = 0, timer=None, **kw):
    """``egraph.optimize`` of ``graph``'s ``roots`` with repeated blocks rolled: same result,
    ``stats["loops"]`` added. ``found``: ``Loops(graph, roots)``, when the caller already has it.

    Each template and the rest is one e-graph run. With ``search``, a run's candidates are timed as
    whole programs: linked with the runs already done and, for those still to come, their nodes
    one to one (the same in every candidate, so the comparison stays fair)."""
    found = Loops(graph, roots) if found is None else found  # times itself (``found.seconds``)
    t0 = time.perf_counter()
    with gc_paused():
        loops = [_Loop(k, w) for k, w in enumerate(found.windows)]
        if loops:
            ids = _Ids()
            for lp in loops:
                _build_template(lp, found, graph.nodes, ids)
                lp.outputs = found.outputs[lp.index]
            rest_roots, rest_inputs = _build_rest(roots, graph.nodes, loops, found, ids)
            units = [[lp.template[p] for p in lp.outputs] for lp in loops] + ([rest_roots] if rest_roots else [])
            unit_terms = [_unoptimized(u) for u in units] if search and timer is not None else [{} for _ in units]
    roll_s = time.perf_counter() - t0 + found.seconds
    if not loops:
        res = _optimize(roots, search=search, timer=timer, **kw)
        _add_roll_stats(res.stats, [], roll_s)
        return res
    sizes: list[int] = []  # terms in each linked program, every Call expanded
    orders: list[list] = []  # each linked program's terms, producers first

    def link():
        for lp, terms in zip(loops, unit_terms):
            lp.terms = terms
        with gc_paused():
            ln = _Link(loops, graph.nodes, found, unit_terms[-1] if rest_roots else {}, rest_inputs, roots)
            terms = ln.run()
        sizes.append(ln.size())
        orders.append(ln.order)
        return terms

    def timed(i):
        def run(candidate):
            unit_terms[i] = candidate
            try:
                return timer(link())
            except _Cycle:
                return float("inf")
        return run

    results = []
    for i, u in enumerate(units):
        results.append(_optimize(u, search=search, timer=timed(i) if search and timer is not None else None, **kw))
        unit_terms[i] = results[-1].terms
    t1 = time.perf_counter()
    try:
        terms = link()
    except _Cycle:  # an extracted template read an input its value does not depend on: do not roll
        res = _optimize(roots, search=search, timer=timer, **kw)
        _add_roll_stats(res.stats, [], roll_s + time.perf_counter() - t1)
        return res
    roll_s += time.perf_counter() - t1
    stats = _merge_stats([r.stats for r in results], [lp.window.trips for lp in loops] + [1], found.size,
                         sizes[-1])
    _add_roll_stats(stats, loops, roll_s)
    return type(results[0])(terms=terms, stats=stats, order=orders[-1])


# detection ------------------------------------------------------------------------------------
def collect(roots) -> list[Node]:
    """Every node the roots read, in id (creation, hence topological) order."""
    seen: dict[int, Node] = {}
    stack = list(roots)
    while stack:
        n = stack.pop()
        if n.id not in seen:
            seen[n.id] = n
            for s, _ in n.srcs:
                if s.id not in seen:
                    stack.append(s)
    return [seen[i] for i in sorted(seen)]


def _unoptimized(roots) -> dict[int, Term]:
    """Terms one to one with the nodes (nothing fused): a unit's stand-in until it is optimised."""
    made: dict[int, Term] = {}
    for n in collect(roots):  # ids are topological here too: synthetic leaves are negative
        made[n.id] = Term(n.op, tuple((made[s.id], v) for s, v in n.srcs), n.arg, n.dtype, n.shape,
                          (False,) * len(n.srcs), n.id)
    return {r.id: made[r.id] for r in roots}


# template and rest ----------------------------------------------------------------------------
class _Ids:
    """Fresh negative ids and names for synthetic Input leaves (outside any Graph)."""

    def __init__(self):
        self.next = -1

    def leaf(self, name: str, like: Node) -> Node:
        self.next -= 1
        return Node(self.next + 1, "Input", (), name, like.dtype, like.shape)


def _build_template(lp: _Loop, found: Loops, nodes: list, ids: _Ids) -> None:
    """Trip 0 with every input not read from inside its trip cut to a synthetic Input (one per
    distinct tuple of nodes read across the trips), except leaves and small constant computations
    every trip shares."""
    k = lp.index
    first, inside, across = found.body(k)
    same = (across == across[..., :1]).all(2).tolist()  # the same node in every trip
    across = np.ascontiguousarray(across)  # a row's bytes name the tuple of nodes it reads
    leaf_of: dict[bytes, Node] = {}
    consts: dict[int, bool] = {}
    for p, i in enumerate(first):  # offsets are in creation order: inputs first
        n0 = nodes[i]
        srcs = []
        for j, (s0, v) in enumerate(n0.srcs):
            q = inside[p][j]
            if q is not None:
                srcs.append((lp.template[q], v))
                continue
            if same[p][j] and (s0.op in LEAVES or _constant(s0, consts)):
                srcs.append((s0, v))
                continue
            key = across[p, j].tobytes()
            leaf = leaf_of.get(key)
            if leaf is None:
                name = f"@roll{k}.in{len(leaf_of)}"
                leaf_of[key] = leaf = ids.leaf(name, s0)
                lp.inputs[name] = across[p, j]
            srcs.append((leaf, v))
        lp.template[p] = Node(n0.id, n0.op, tuple(srcs), n0.arg, n0.dtype, n0.shape)


def _constant(n: Node, memo: dict, limit: int = 16) -> bool:
    """Is ``n`` a small computation of constants alone (a broadcast fill, a mask from an Arange)? Every
    trip reading it then reads it from the template itself, where it folds or inlines into its readers
    as it would unrolled, instead of from a buffer the rest fills."""
    got = memo.get(n.id)
    if got is None:
        seen, stack, got = {n.id}, [n], True
        while stack and got:
            x = stack.pop()
            if x.op in LEAVES:
                got = x.op != "Input"
                continue
            for s, _ in x.srcs:
                if s.id not in seen:
                    seen.add(s.id)
                    stack.append(s)
            got = len(seen) <= limit
        memo[n.id] = got
    return got


def _build_rest(roots, nodes, loops, found: Loops, ids: _Ids):
    """The graph outside the loops: the roots and every non-leaf node a trip reads, with each trip
    node it reads replaced by a synthetic Input. Returns its roots and {synthetic name: trip node}."""
    in_loop = found.in_loop
    wanted = [r for r in roots if not in_loop(r.id) and r.op not in LEAVES]
    rows = [r for lp in loops for r in lp.inputs.values()]
    read = np.unique(np.concatenate(rows)) if rows else np.zeros(0, np.int64)
    read = read[(found.loop_of[read] < 0) & found.computed[read]]
    wanted = list({n.id: n for n in wanted + [nodes[i] for i in read.tolist()]}.values())
    need: set[int] = set()
    stack = list(wanted)
    while stack:
        n = stack.pop()
        if n.id not in need:
            need.add(n.id)
            stack.extend(s for s, _ in n.srcs if s.id not in need and s.op not in LEAVES and not in_loop(s.id))
    new: dict[int, Node] = {}
    inputs: dict[str, Node] = {}
    for i in sorted(need):
        n = nodes[i]
        srcs = []
        for s, v in n.srcs:
            if in_loop(s.id):
                leaf = new.get(s.id)
                if leaf is None:
                    name = f"@out{s.id}"
                    new[s.id] = leaf = ids.leaf(name, s)
                    inputs[name] = s
                s = leaf
            srcs.append((new.get(s.id, s), v))
        if any(a is not b for (a, _), (b, _) in zip(srcs, n.srcs)):
            new[n.id] = Node(n.id, n.op, tuple(srcs), n.arg, n.dtype, n.shape)
    return [new.get(n.id, n) for n in wanted], inputs


# linking --------------------------------------------------------------------------------------
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
        elsewhere = np.array(sorted({n.id for n in rest_inputs.values()} | {r.id for r in roots}), np.int64)
        made = [_body(lp, (~np.isin(ids, elsewhere).any(0)).tolist()) for lp, ids in zip(loops, out_ids)]
        self.bodies = [b for b, _ in made]
        self.body_terms = [n for _, n in made]
        # per loop and trip: the node ids of its arguments and of its outputs, own Outs first, then packed
        self.args = [_rows([lp.inputs[x.arg] for x in b.inputs], lp.window.trips) for lp, b in zip(loops, self.bodies)]
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
        trips = sorted((lp.window.start + t * lp.window.period, k, t)
                       for k, lp in enumerate(self.loops) for t in range(lp.window.trips))
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


def _parts(body: Body) -> list[tuple]:
    """Each packed output, pack by pack: ``(output index, pack index, view)``, the view being how a
    reader reads it from its pack (contiguous, at its offset)."""
    return [(i, g, View(body.outputs[i].shape, contiguous_strides(body.outputs[i].shape), off))
            for g, p in enumerate(body.packs) for i, off in zip(p.members, p.offsets)]


def _body(lp: _Loop, packable: list) -> tuple[Body, int]:
    """Loop ``lp``'s optimised template as a Body (its outputs, the synthetic inputs they still read,
    and its packs) and the number of terms a call computes. ``packable[i]``: only later trips read
    output ``i``. Such an output is packed when a call computes it into a buffer of its own: it
    varies with the inputs (else the routine computes it once, before the first call) and no other
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


# stats ----------------------------------------------------------------------------------------
def _merge_stats(stats: list[dict], copies: list[int], nodes_before: int, nodes_after: int) -> dict:
    """One run's stats from the runs of every template and the rest; costs count every trip."""
    out = {"nodes_before": nodes_before, "nodes_after": nodes_after,
           "egraph": Counter(), "rules": Counter(), "budget_hit": None, "times": Counter(), "candidates": []}
    if all("cost" in s for s in stats):
        out["cost"] = sum(s["cost"] * c for s, c in zip(stats, copies))
    for s in stats:
        out["egraph"].update(s.get("egraph", {}))
        out["rules"].update(s.get("rules", {}))
        out["times"].update(s.get("times", {}))
        out["candidates"] += s.get("candidates", [])
        out["budget_hit"] = out["budget_hit"] or s.get("budget_hit")
    for key in ("egraph", "rules", "times"):
        out[key] = dict(out[key])
    return out


def _add_roll_stats(stats: dict, loops, seconds: float) -> None:
    stats["loops"] = [{"body_nodes": lp.window.length, "trips": lp.window.trips} for lp in loops]
    stats.setdefault("times", {})["roll"] = seconds
