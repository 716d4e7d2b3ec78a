"""Extraction (ours, not egglog's): one e-node per e-class, by a DAG cost model.

egglog's built-in extraction counts a shared sub-term once per path (tree cost), which overflows
on deep forward+backward graphs and cannot return alternatives. Here each class's cost is its
e-node's own cost plus its inputs' costs, each input's cost shared among the e-nodes that read it
(so shared sub-terms are not counted once per path and costs stay linear in depth); the choice is
then checked from the roots for cycles (an e-node reading its own class, directly or not), and a
cycle-closing e-node is banned and the choice redone. Ties go to the first e-node in a fixed order
(``egraph_read``), so extraction is deterministic. ``dag_cost`` scores a whole choice exactly.

Banning the e-node that closes a cycle can ban a class's only acyclic e-node when the cycle was
entered from the other side (a rewrite such as ``-(-x) = x`` merged a class with its own
grand-input). When repairs leave a root without a choice, or take more than ``MAX_REPAIRS`` rounds,
the choice is made again with every class fixed once settled (``choose(..., settled_only=True)``):
each class then reads only classes settled before it, so the program is acyclic by construction,
and every class that has an acyclic program gets one (the e-graph always holds the original DAG).
"""

from __future__ import annotations

import heapq
import math

from luminal.compiler.egraph.cost import CostModel
from luminal.compiler.egraph.fusion import kind
from luminal.compiler.egraph.lower import Lowered
from luminal.compiler.term import Term, topological
from luminal.core.walk import postorder

MAX_REPAIRS = 64  # cycle repairs before the choice is made again settled-only


class Costs:
    """Own cost of every e-node, and each class's shape and dtype (from its lowered items)."""

    def __init__(self, g, low: Lowered, model: CostModel):
        self.info = {}
        for c, ks in g.items_of.items():
            it = low.items[ks[0]]
            self.info[c] = (it.shape, it.dtype)
        self.own = {}
        same: dict = {}  # what an e-node's cost depends on -> the cost (a graph repeats its ops many times)
        for c, es in g.classes.items():
            shape, dtype = self.info[c]
            for e in es:
                sizes = tuple(self.info[k][1].itemsize for k in e.kids)
                key = (e.op, shape, dtype, e.views, sizes, e.arg)
                cost = same.get(key)
                if cost is None:
                    reads = [(low.views[v], n) for v, n in zip(e.views, sizes)]
                    cost = same[key] = model.enode(e.op, shape, dtype, reads, e.arg)
                self.own[e] = cost


def tables(g) -> tuple:
    """What ``choose`` walks, which no ban changes: each class's readers (the e-nodes reading it,
    once each), how many read it, and every e-node's place in the fixed order (ties go to the first).
    ``extract`` makes them once for all its rounds of repairs."""
    parents: dict = {}
    refs: dict = {}
    for es in g.classes.values():
        for e in es:
            for k in set(e.kids):
                parents.setdefault(k, []).append(e)
                refs[k] = refs.get(k, 0) + 1
    order = {e: i for i, e in enumerate(e for es in g.classes.values() for e in es)}
    return parents, refs, order


def choose(g, costs: Costs, banned=frozenset(), settled_only: bool = False, made: tuple | None = None) -> dict:
    """class -> chosen ENode, for every class that has an acyclic-looking choice. ``settled_only``:
    an e-node counts only once all its inputs are settled (popped), and a settled class's choice is
    final, so the choice is acyclic (though the shared-cost estimate may then miss a cheaper one).
    ``made``: ``tables(g)``, when the caller has them."""
    parents, refs, order = tables(g) if made is None else made
    cost = {c: math.inf for c in g.classes}
    best: dict = {}
    heap = []  # (cost, order, class) in Dijkstra order: cheapest classes settle first

    settled: set = set()

    def relax(e):
        if e in banned or e.cls in e.kids or (settled_only and e.cls in settled):
            return
        total = costs.own[e]
        for k in set(e.kids):
            ck = cost[k]
            if ck == math.inf or (settled_only and k not in settled):
                return
            total += ck / refs[k]
        cur = cost[e.cls]
        if total < cur or (total == cur and order[e] < order[best[e.cls]]):
            cost[e.cls] = total
            best[e.cls] = e
            heapq.heappush(heap, (total, order[e], e.cls))

    for es in g.classes.values():
        for e in es:
            if not e.kids:
                relax(e)
    while heap:
        total, _, c = heapq.heappop(heap)
        if total > cost[c] or (settled_only and c in settled):
            continue
        settled.add(c)
        for e in parents.get(c, ()):
            relax(e)
    return best


def find_cycle(choice: dict, roots) -> object | None:
    """An e-node of ``choice`` that closes a cycle reachable from ``roots``, else None."""
    state: dict = {}  # class -> 1 on the path, 2 done
    for r in roots:
        if state.get(r):
            continue
        stack = [(r, 0)]
        state[r] = 1
        while stack:
            c, i = stack[-1]
            e = choice[c]
            if i < len(e.kids):
                stack[-1] = (c, i + 1)
                k = e.kids[i]
                s = state.get(k)
                if s == 1:
                    return e
                if s is None:
                    state[k] = 1
                    stack.append((k, 0))
            else:
                state[c] = 2
                stack.pop()
    return None


def extract(g, costs: Costs, roots) -> dict:
    """The cost model's choice: class -> ENode, acyclic from ``roots``."""
    banned: set = set()
    made = tables(g)
    for _ in range(MAX_REPAIRS):
        choice = choose(g, costs, frozenset(banned), made=made)
        if any(r not in choice for r in roots):
            break
        bad = find_cycle(choice, roots)
        if bad is None:
            return choice
        banned.add(bad)
    choice = choose(g, costs, settled_only=True, made=made)
    missing = [r for r in roots if r not in choice]
    if missing:
        raise ValueError(f"no acyclic program computes e-class {missing[0]}")
    return choice


def reachable(choice: dict, roots) -> list:
    """Classes used by ``choice`` from ``roots``, producers first."""
    return postorder(roots, lambda c: choice[c].kids, key=lambda c: c)


def dag_cost(choice: dict, costs: Costs, roots) -> float:
    return sum(costs.own[choice[c]] for c in reachable(choice, roots))


def build_terms(g, choice: dict, costs: Costs, low: Lowered, roots) -> dict:
    """class -> Term for everything reachable from ``roots`` (shared classes give shared Terms)."""
    terms: dict = {}
    for c in reachable(choice, roots):
        e = choice[c]
        shape, dtype = costs.info[c]
        srcs = tuple((terms[k], low.views[v]) for k, v in zip(e.kids, e.views))
        fusible = tuple((c, e.op, i, kind(choice[k].op), v) in g.fz for i, (k, v) in enumerate(zip(e.kids, e.views)))
        terms[c] = Term(e.op, srcs, e.arg, dtype, shape, fusible, _origin(g, low, e, c))
    for i, t in enumerate(topological([terms[r] for r in roots])):
        t.id = i
    return terms


def _origin(g, low: Lowered, e, c):
    """The frontend node the chosen e-node computes: the one lowered as exactly this e-node, else
    the first node lowered into its class (e.g. the SumReduce a MatMul replaces)."""
    ids = None
    for k in g.items_of.get(c, ()):
        it = low.items[k]
        if ids is None and it.node_ids:
            ids = it.node_ids
        if (it.op == e.op and it.views == e.views and tuple(g.item_class[s] for s in it.srcs) == e.kids
                and str(it.arg) == str(e.arg) and it.node_ids):
            return it.node_ids[0]
    return ids[0] if ids else None
