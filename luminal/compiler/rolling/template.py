"""The template of each body and the rest: the graphs the e-graph optimises once each.

The **template** of a body is its trip 0 with every input that is not read from inside the trip
read from a synthetic Input leaf instead (leaves every trip shares stay, so constants still fold, as
do small constant computations every trip reads); its outputs are the offsets read outside their
trip. The **rest** is everything outside the bodies, with the trip outputs it reads read from
synthetic leaves. Both cost the body and the rest, never the trips.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from luminal.compiler.rolling.detect import Loops, Span
from luminal.compiler.term import Term
from luminal.core.primitives import LEAVES
from luminal.frontend.graph import Node


@dataclass
class BodyTemplate:
    """Body ``index`` (its ``span`` in ``Loops.spans``) as the e-graph and the linker see it: its
    template (trip 0, its inputs cut to synthetic leaves), then the template optimised."""

    index: int
    span: Span
    template: dict = field(default_factory=dict)  # offset -> template Node (trip 0's id)
    inputs: dict = field(default_factory=dict)  # synthetic name -> id of the node it stands for, per trip
    outputs: list = field(default_factory=list)  # offsets read outside their trip
    terms: dict = field(default_factory=dict)  # template root id -> Term (the optimised template)



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


class _Ids:
    """Fresh negative ids and names for synthetic Input leaves (outside any Graph)."""

    def __init__(self):
        self.next = -1

    def leaf(self, name: str, like: Node) -> Node:
        self.next -= 1
        return Node(self.next + 1, "Input", (), name, like.dtype, like.shape)


def _build_template(lp: BodyTemplate, found: Loops, nodes: list, ids: _Ids) -> None:
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
