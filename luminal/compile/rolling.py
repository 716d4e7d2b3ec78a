"""Loop rolling: optimise one copy of a repeated block, then replicate the result for every repetition.

Models repeat blocks (MLP layers, transformer layers) in the forward and in the backward pass. The
e-graph should see each block once, so that its share of compile time stays flat as depth grows:

1. **Labels** (made by ``Graph.add`` as it builds each node) say what two copies must agree on: op,
   arg, dtype, shape and the views of its inputs. Leaves never join a body (each layer has its own
   weights, read by name).
2. **Seed** with a class of nodes sharing their label and their inputs' labels, of the most common
   class size (usually the depth), earliest class first.
3. **Grow** the seeds into *trips* all at once, one *position* (one node per trip) at a time, through
   inputs and readers, while every trip agrees: same label, distinct unclaimed nodes, in the trips'
   creation order.
4. **Prune** to proper loop iterations: a trip reads nothing computed by a later trip (forward layer
   i must not swallow layer i's backward, which needs layer i+1) and is convex (it never reads what
   was computed from itself outside the body), so trips can run one after another.
   Steps 2-4 repeat while a loop pays (``MIN_BODY``, ``MIN_SAVED``): the backward rolls as its own
   loops, as do parts that repeat one trip fewer (the first layer's backward has no input gradient).
5. **Template**: trip 0, every edge that is not the same internal edge in every trip read from a
   synthetic Input leaf instead (leaves shared by all trips stay, so constants still fold). Its
   outputs are the positions read outside their trip. It is optimised once.
6. **Rest**: everything outside the loops, trip outputs read from synthetic leaves; optimised once.
7. **Link**: the optimised template becomes a Body; the rest's terms and, for every trip, Call terms
   of that body on the trip's actual inputs make one Term DAG. The kernel stage builds a body's
   kernels once and copies them per call (``compile/calls.py``).

Every trip is isomorphic to trip 0 with its own inputs, so the linked DAG computes exactly what the
roots compute. The price: neither the e-graph nor the kernel stage fuses across a body's boundary
(a body's inputs and outputs are buffers). Detection is linear in the graph; linking, in the rest
and the trips' interfaces.
"""

from __future__ import annotations

import gc
import time
from bisect import bisect_left, bisect_right
from collections import Counter, defaultdict, deque
from contextlib import contextmanager
from dataclasses import dataclass, field

from ..frontend.graph import Node
from ..frontend.primitives import LEAVES
from ..frontend.view import View
from .term import Body, CallArg, Term, topological

MIN_SAVED = 32  # nodes a loop must take off the e-graph (body x (trips - 1)) to pay for a second run
MIN_BODY = 4  # smaller bodies cut their nodes off from every neighbour the e-graph could fuse them with


def _optimize(roots, **kw):
    """The e-graph stage (a module-level hook, so tests can count and replace its runs)."""
    from .egraph import optimize

    return optimize(roots, **kw)


@dataclass
class _Loop:
    """``pos[p]``: position p's node in every trip, trips in creation order."""

    index: int
    pos: list
    internal: dict = field(default_factory=dict)  # (position, input slot) -> the position it reads in every trip
    template: dict = field(default_factory=dict)  # position -> template Node (trip 0's id)
    inputs: dict = field(default_factory=dict)  # synthetic name -> the node it stands for, per trip
    outputs: list = field(default_factory=list)  # positions read outside their trip
    terms: dict = field(default_factory=dict)  # template root id -> Term (the optimised template)


def optimize_rolled(roots, *, nodes=None, search: int = 0, timer=None, **kw):
    """``egraph.optimize`` with repeated blocks rolled: same result, ``stats["loops"]`` added.
    ``nodes``: ``collect(roots)``, when the caller already has it.

    Each template and the rest is one e-graph run. With ``search``, a run's candidates are timed as
    whole programs: linked with the runs already done and, for those still to come, their nodes
    one to one (the same in every candidate, so the comparison stays fair)."""
    t0 = time.perf_counter()
    with _no_gc():
        nodes = collect(roots) if nodes is None else nodes
        readers, classes = _index(nodes)
        loops, owner = _find_loops(nodes, readers, classes)
        if loops:
            ids = _Ids()
            root_ids = {r.id for r in roots}
            for lp in loops:
                _build_template(lp, ids)
                lp.outputs = _outputs(lp, readers, root_ids, owner)
            rest_roots, rest_inputs = _build_rest(roots, nodes, loops, owner, ids)
            units = [[lp.template[p] for p in lp.outputs] for lp in loops] + ([rest_roots] if rest_roots else [])
            unit_terms = [_unoptimized(u) for u in units] if search and timer is not None else [{} for _ in units]
    roll_s = time.perf_counter() - t0
    if not loops:
        res = _optimize(roots, search=search, timer=timer, **kw)
        _add_roll_stats(res.stats, [], roll_s)
        return res
    sizes: list[int] = []  # terms in each linked program, every Call expanded

    def link():
        for lp, terms in zip(loops, unit_terms):
            lp.terms = terms
        with _no_gc():
            ln = _Link(loops, owner, unit_terms[-1] if rest_roots else {}, rest_inputs)
            terms = ln.run(roots)
        sizes.append(ln.size())
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
    stats = _merge_stats([r.stats for r in results], [len(lp.pos[0]) for lp in loops] + [1], len(nodes), sizes[-1])
    _add_roll_stats(stats, loops, roll_s)
    return type(results[0])(terms=terms, stats=stats)


@contextmanager
def _no_gc():
    """These passes allocate an object or more per node and free next to nothing, so the cyclic
    collector would only walk the growing heap again and again (measured: up to half their time)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


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


def _index(nodes):
    """One pass over the nodes: ``readers`` (node id -> [(reader, input slot)]) and the seed classes
    (non-leaf nodes by their label and their inputs' labels: finer than labels, so that a class of
    copies is one node per repetition; coarser than whole-cone hashes, which would tell the first
    layer from the others). A node's label, made by ``Graph.add``, names what two copies of it must
    share: op, arg, dtype, shape, input views; a leaf's, only its kind."""
    readers: dict[int, list] = defaultdict(list)
    classes: dict[tuple, list] = defaultdict(list)
    for n in nodes:
        if n.op in LEAVES:
            continue
        key = [n.label]
        for j, (s, _) in enumerate(n.srcs):
            readers[s.id].append((n, j))
            key.append(s.label)
        classes[tuple(key)].append(n)
    return readers, classes


def _find_loops(nodes, readers, all_classes):
    """Grow loops from seed classes until none pays. Returns the loops and ``owner``: node id ->
    (loop, position, trip).

    Each round looks for seeds among the nodes no loop owns yet. Rather than filter every class again
    after each loop (a pass over the whole graph per loop), ``live`` counts each class's unowned nodes:
    a new loop decrements the classes of the nodes it claims, and only a class chosen as seeds is
    filtered."""
    ids = [n.id for n in nodes]
    owner: dict[int, tuple] = {}
    loops: list[_Loop] = []
    tried: set = set()
    live = {c: len(ns) for c, ns in all_classes.items() if len(ns) >= 2}
    class_of = {n.id: c for c, ns in all_classes.items() if c in live for n in ns}
    while True:
        sizes = Counter(m for c, m in live.items() if m >= 2 and c not in tried)
        loop = None
        for m, _ in sorted(sizes.items(), key=lambda kv: (-kv[1], -kv[0])):
            for cls, count in live.items():
                if count != m or cls in tried:
                    continue
                tried.add(cls)
                seeds = all_classes[cls] if not owner else [n for n in all_classes[cls] if n.id not in owner]
                pos, internal = _grow_and_prune(len(loops), seeds, readers, owner, nodes, ids)
                if _pays(pos):
                    loop = _Loop(len(loops), pos, internal)
                    break
                _release(pos, owner)
            if loop is not None:
                break
        if loop is None:
            return loops, owner
        loops.append(loop)
        for ns in loop.pos:
            for n in ns:
                c = class_of.get(n.id)
                if c is not None:
                    live[c] -= 1


def _grow_and_prune(k, seeds, readers, owner, nodes, ids) -> tuple[list, dict]:
    """Loop ``k`` grown from ``seeds`` and pruned: its positions (claimed in ``owner``) and internal
    edges. A first or last trip wired differently from the others (a stack's first layer reading the
    input its own way, its last one feeding the loss) can still agree on every label as the body
    grows, and then fail pruning along with everything downstream of the odd edge. So when pruning
    takes more than half of the body, the loop is also tried without its first trip and without its
    last one, and the attempt that takes the most nodes off the e-graph is kept."""
    pos = _Grower(k, readers, owner).grow(seeds)
    internal: dict = {}
    grown = len(pos)
    if not _pays(pos):
        return pos, internal
    pos, internal = _prune(k, pos, nodes, ids, owner)
    if len(seeds) <= 2 or 2 * len(pos) >= grown:
        return pos, internal
    best = (_saved(pos), pos, internal)
    _release(pos, owner)
    for trimmed in (seeds[1:], seeds[:-1]):
        pos = _Grower(k, readers, owner).grow(trimmed)
        if _pays(pos):
            pos, internal = _prune(k, pos, nodes, ids, owner)
            if _saved(pos) > best[0]:
                best = (_saved(pos), pos, internal)
        _release(pos, owner)
    _, pos, internal = best
    for p, ns in enumerate(pos):
        for t, n in enumerate(ns):
            owner[n.id] = (k, p, t)
    return pos, internal


def _saved(pos) -> int:
    return len(pos) * (len(pos[0]) - 1) if _pays(pos) else 0


def _pays(pos) -> bool:
    return len(pos) >= MIN_BODY and len(pos) * (len(pos[0]) - 1) >= MIN_SAVED


class _Grower:
    """Grows one loop from its seeds, breadth first, claiming a position only when every trip agrees."""

    def __init__(self, k, readers, owner):
        self.k, self.readers, self.owner = k, readers, owner
        self.pos: list[tuple] = []
        self.queue: deque = deque()

    def grow(self, seeds) -> list[tuple]:
        self.claim(tuple(seeds))
        while self.queue:
            p = self.queue.popleft()
            nodes = self.pos[p]
            for j in range(len(nodes[0].srcs)):
                self.claim(tuple(n.srcs[j][0] for n in nodes))
            self.claim_readers(p, nodes)
        return self.pos

    def claim(self, cs: tuple) -> None:
        """Claim one node per trip as a new position. The nodes must also be in creation order, as the
        seeds are: a position whose copies run the other way (layer i's backward, reached from layer
        i's forward) belongs to another loop, and would only be pruned later at the cost of a pass."""
        if cs[0].op in LEAVES:
            return
        lab, owner = cs[0].label, self.owner
        prev = -1 << 62
        for c in cs:
            if c.id <= prev or c.id in owner or c.label != lab:
                return
            prev = c.id
        p = len(self.pos)
        self.pos.append(cs)
        for t, c in enumerate(cs):
            owner[c.id] = (self.k, p, t)
        self.queue.append(p)

    def claim_readers(self, p, nodes) -> None:
        """Readers of position p, matched across trips by (label, input slot); several candidates in a
        trip are told apart by which positions of that trip they read."""
        owner, readers = self.owner, self.readers
        first = defaultdict(list)
        for c, j in readers[nodes[0].id]:
            if c.id not in owner:
                first[(c.label, j)].append(c)
        if not first:
            return  # every claim starts from a reader in trip 0
        groups = [first]
        for n in nodes[1:]:
            g = defaultdict(list)
            for c, j in readers[n.id]:
                if c.id not in owner:
                    key = (c.label, j)
                    if key in first:
                        g[key].append(c)
            groups.append(g)
        for key, cands in groups[0].items():
            for c0 in cands:
                want, cs = None, []
                for t, g in enumerate(groups):
                    found = [c for c in g.get(key, ()) if c.id not in self.owner]
                    if len(found) > 1:
                        want = self.signature(c0, 0) if want is None else want
                        found = [c for c in found if self.signature(c, t) == want]
                    if len(found) != 1:
                        break
                    cs.append(found[0])
                else:
                    if cs[0] is c0:
                        self.claim(tuple(cs))

    def signature(self, c, t) -> tuple:
        out = []
        for s, _ in c.srcs:
            o = self.owner.get(s.id)
            out.append(o[1] if o is not None and o[0] == self.k and o[2] == t else -1 - s.label)
        return tuple(out)


def _prune(k, pos, nodes, ids, owner) -> tuple[list[tuple], dict]:
    """Keep the positions that make every trip a proper loop iteration (trips in creation order): a
    trip reads nothing computed by a later trip, nor anything computed from itself outside the body
    (trips are convex, so each can run as one step). Dropping a position can expose its readers to
    the same test, so repeat until nothing changes (once or twice in practice). Returns the positions
    and their internal edges (see ``_internal``): {(position, input slot): position read}."""
    while True:
        internal = {}
        for p in range(len(pos)):
            for j in range(len(pos[p][0].srcs)):
                q = _internal(k, pos, owner, p, j)
                if q is not None:
                    internal[p, j] = q
        late: dict[int, int] = {}  # node id -> latest trip of loop k among it and its ancestors
        get, own = late.get, owner.get
        bad = set()
        lo, hi = min(ns[0].id for ns in pos), max(ns[-1].id for ns in pos)  # trips run in id order
        for n in nodes[bisect_left(ids, lo):bisect_right(ids, hi)]:
            o = own(n.id)
            t = o[2] if o is not None and o[0] == k else -1
            a = t
            for j, (s, _) in enumerate(n.srcs):
                x = get(s.id, -1)
                if t >= 0 and (x > t or (x == t and (o[1], j) not in internal)):
                    bad.add(o[1])
                if x > a:
                    a = x
            if a >= 0:
                late[n.id] = a
        if not bad:
            return pos, internal
        _release([pos[p] for p in bad], owner)
        pos = [ns for p, ns in enumerate(pos) if p not in bad]
        for p, ns in enumerate(pos):
            for t, n in enumerate(ns):
                owner[n.id] = (k, p, t)


def _internal(k, pos, owner, p, j):
    """The position that input slot j of position p reads in every trip, or None: the edge leaves the
    body, or is not the same edge in every trip."""
    ns = pos[p]
    o = owner.get(ns[0].srcs[j][0].id)
    if o is None or o[0] != k or o[2] != 0:
        return None
    src = pos[o[1]]
    return o[1] if all(n.srcs[j][0] is src[t] for t, n in enumerate(ns)) else None


def _release(pos, owner) -> None:
    for ns in pos:
        for n in ns:
            del owner[n.id]


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


def _build_template(lp: _Loop, ids: _Ids) -> None:
    """Trip 0 with every edge that is not the same internal edge in all trips cut to a synthetic Input
    (one per distinct tuple of nodes read), except leaves that every trip shares."""
    k, pos, internal = lp.index, lp.pos, lp.internal
    leaf_of: dict[tuple, Node] = {}
    consts: dict[int, bool] = {}
    for p in sorted(range(len(pos)), key=lambda p: pos[p][0].id):  # inputs first
        n0 = pos[p][0]
        srcs = []
        for j, (s0, v) in enumerate(n0.srcs):
            q = internal.get((p, j))
            if q is not None:
                srcs.append((lp.template[q], v))
                continue
            ss = tuple(ns.srcs[j][0] for ns in pos[p])
            if all(s is s0 for s in ss) and (s0.op in LEAVES or _constant(s0, consts)):
                srcs.append((s0, v))
                continue
            key = tuple(s.id for s in ss)
            leaf = leaf_of.get(key)
            if leaf is None:
                name = f"@roll{k}.in{len(leaf_of)}"
                leaf_of[key] = leaf = ids.leaf(name, s0)
                lp.inputs[name] = ss
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


def _build_rest(roots, nodes, loops, owner, ids: _Ids):
    """The graph outside the loops: the roots and every non-leaf node a trip reads, with each trip
    node it reads replaced by a synthetic Input. Returns its roots and {synthetic name: trip node}."""
    wanted = [r for r in roots if r.id not in owner and r.op not in LEAVES]
    for lp in loops:
        wanted += [s for ss in lp.inputs.values() for s in ss if s.id not in owner and s.op not in LEAVES]
    wanted = list({n.id: n for n in wanted}.values())
    need: set[int] = set()
    stack = list(wanted)
    while stack:
        n = stack.pop()
        if n.id not in need:
            need.add(n.id)
            stack.extend(s for s, _ in n.srcs if s.id not in owner and s.op not in LEAVES and s.id not in need)
    new: dict[int, Node] = {}
    inputs: dict[str, Node] = {}
    for n in nodes:
        if n.id not in need:
            continue
        srcs = []
        for s, v in n.srcs:
            if s.id in owner:
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


def _outputs(lp: _Loop, readers, root_ids, owner) -> list[int]:
    """Positions whose node, in some trip, is a root or is read other than by its own trip's template edge."""
    k, tpl, get = lp.index, lp.template, owner.get

    def read_outside(n, t, tp) -> bool:
        if n.id in root_ids:
            return True
        for c, j in readers[n.id]:
            o = get(c.id)
            if o is None or o[0] != k or o[2] != t or tpl[o[1]].srcs[j][0] is not tp:
                return True
        return False

    return [p for p, ns in enumerate(lp.pos) if any(read_outside(n, t, tpl[p]) for t, n in enumerate(ns))]


# linking --------------------------------------------------------------------------------------
class _Cycle(Exception):
    pass


class _Link:
    """One Term DAG from the optimised rest and the optimised templates: each trip is a Call of its
    loop's Body (and an Out term per body output), so this pass costs the rest and the trips'
    interfaces, not the trips' bodies (the kernel stage copies a body's kernels per call).

    Work items: ``("N", node)`` the term computing a frontend node; ``("C", loop, trip)`` a trip's
    Out terms; ``("R", term)`` a copy of a rest term (its synthetic inputs resolved). Trips are convex
    and read no later trip, so items depend on each other without cycles (unless an extracted
    template reads an input its value does not need: ``_Cycle``); graphs are deep, so the walk is
    iterative."""

    def __init__(self, loops, owner, rest_terms, rest_inputs):
        self.loops, self.owner, self.rest_terms, self.rest_inputs = loops, owner, rest_terms, rest_inputs
        self.leaves: dict[tuple, Term] = {}
        self.views: dict = {}  # id(shape) -> (shape, its contiguous view): how a Call reads an argument
        self.bodies = [_body(lp) for lp in loops]
        self.out_index = [{lp.template[p].id: i for i, p in enumerate(lp.outputs)} for lp in loops]
        self.done: dict[tuple, object] = {}

    def run(self, roots) -> dict[int, Term]:
        for r in roots:
            self._resolve(("N", r))
        terms = {r.id: self.done[("N", r)] for r in roots}
        self.order = topological(list(terms.values()))
        for i, t in enumerate(self.order):
            t.id = i
        return terms

    def size(self) -> int:
        """Terms of the program with every Call expanded (a body's terms once per trip)."""
        calls = Counter(t.arg.site[0] for t in self.order if t.op == "Call")
        body = [len(topological(list(b.outputs))) - len(b.inputs) for b in self.bodies]
        return sum(t.op not in ("Call", "Out") for t in self.order) + sum(body[k] * n for k, n in calls.items())

    def _deps(self, item) -> list[tuple]:
        kind, x = item[0], item[1]
        if kind == "C":
            ns = self.loops[x].inputs
            return [("N", ns[t.arg][item[2]]) for t in self.bodies[x].inputs]
        if kind == "N":
            if x.op in LEAVES:
                return []
            o = self.owner.get(x.id)
            return [("R", self.rest_terms[x.id])] if o is None else [("C", o[0], o[2])]
        node = self.rest_inputs.get(x.arg) if x.op == "Input" else None
        return [("N", node)] if node is not None else [("R", s) for s, _ in x.srcs]

    def _build(self, item, deps):
        kind, x = item[0], item[1]
        if kind == "C":
            body = self.bodies[x]
            srcs = tuple((d, self._view(d.shape)) for d in deps)
            call = Term("Call", srcs, CallArg(body, (x, item[2])), None, (), (False,) * len(srcs))
            part = ((call, self._view(())),)
            return [Term("Out", part, i, o.dtype, o.shape, (False,)) for i, o in enumerate(body.outputs)]
        if kind == "N":
            if not deps:
                return self._leaf(Term(x.op, (), x.arg, x.dtype, x.shape, origin=x.id))
            o = self.owner.get(x.id)
            if o is None:
                return deps[0]
            return deps[0][self.out_index[o[0]][self.loops[o[0]].template[o[1]].id]]
        if x.op == "Input" and x.arg in self.rest_inputs:
            return deps[0]
        if not x.srcs:
            return self._leaf(x)
        return Term(x.op, tuple((d, v) for d, (_, v) in zip(deps, x.srcs)), x.arg, x.dtype, x.shape,
                    x.fusible, x.origin)

    def _leaf(self, t: Term) -> Term:
        """One term per distinct leaf in the rest and the Calls' arguments."""
        return self.leaves.setdefault((t.op, t.arg, t.dtype.name, t.shape), t)

    def _view(self, shape) -> View:
        got = self.views.get(id(shape))
        if got is None:
            got = self.views[id(shape)] = (shape, View.contiguous(shape))  # keeps the shape's id its own
        return got[1]

    def _resolve(self, root) -> None:
        done, active = self.done, set()
        stack = [(root, None)]
        while stack:
            item, deps = stack.pop()
            if item in done:
                continue
            if deps is None:
                deps = self._deps(item)
                active.add(item)
                stack.append((item, deps))
                for d in deps:
                    if d in active:  # only an extraction that reads an input its value does not need
                        raise _Cycle(item)
                    if d not in done:
                        stack.append((d, None))
                continue
            done[item] = self._build(item, [done[d] for d in deps])
            active.discard(item)


def _body(lp: _Loop) -> Body:
    """Loop ``lp``'s optimised template as a Body: its outputs, and the synthetic inputs they still read."""
    outputs = tuple(lp.terms[lp.template[p].id] for p in lp.outputs)
    inputs = {t.arg: t for t in topological(list(outputs)) if t.op == "Input" and t.arg in lp.inputs}
    return Body(f"@roll{lp.index}", tuple(inputs.values()), outputs)


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
    stats["loops"] = [{"body_nodes": len(lp.pos), "trips": len(lp.pos[0])} for lp in loops]
    stats.setdefault("times", {})["roll"] = seconds
