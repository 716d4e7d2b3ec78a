"""Reading the saturated e-graph back (``freeze()``) into plain Python: e-nodes decoded into Term ops
and args, e-classes numbered by the first lowered item they hold (so that numbering, and therefore
extraction, does not depend on egglog's internal ids, which keep counting across push/pop), and
the ``fusion`` verdicts. Relation and function rows other than the term constructors are not
e-nodes and are skipped. Each lowered item finds its class by looking its own e-node up (every
lowered term is in the e-graph, with canonical children), so lowering stores no id per item."""

from __future__ import annotations

from dataclasses import dataclass, field

from luminal.compiler.egraph.lower import Lowered
from luminal.compiler.egraph.schema import CONSTRUCTORS
from luminal.core import dtype as dt

_UN_ARG = {"Cast": dt.as_dtype, "Copy": lambda a: a or None}
_LEAF = {"Inp": "Input", "Cst": "Constant", "Ara": "Arange"}
_NARY = {"Whr": "Where", "Gat": "Gather", "Sct": "ScatterAdd", "MatMul": "MatMul"}


@dataclass(frozen=True)
class ENode:
    cls: int
    op: str  # Term op
    arg: object  # Term arg
    kids: tuple  # class per input
    views: tuple  # view index per input

    def __post_init__(self):  # the hash the dataclass would compute, once: extraction's tables are keyed by e-node
        object.__setattr__(self, "_hash", hash((self.cls, self.op, self.arg, self.kids, self.views)))

    def __hash__(self):
        return self._hash

    def key(self):
        return (self.cls, self.op, str(self.arg), self.kids, self.views)


@dataclass
class Graph:
    classes: dict = field(default_factory=dict)  # class -> [ENode], in a fixed order
    item_class: list = field(default_factory=list)  # lowered item -> class
    items_of: dict = field(default_factory=dict)  # class -> [item]
    fz: set = field(default_factory=set)  # (class, op, slot, producer kind, view)
    n_enodes: int = 0

    def n_choices(self) -> int:
        """Classes that give extraction a choice: two or more e-nodes that do not read their own
        class (``x*1 = x`` leaves ``Mul(x, 1)`` in ``x``'s class, which no program can pick)."""
        return sum(sum(e.cls not in e.kids for e in es) > 1 for es in self.classes.values())


def _decode(eg, fns, low: Lowered):
    """[(raw class, op, arg, raw kids, views)] for every term row."""
    strs: dict = {}

    def s(v):
        r = strs.get(v)
        if r is None:
            r = strs[v] = eg.value_to_string(v)
        return r

    i64 = eg.value_to_i64
    view = {row.output: i64(row.inputs[0]) for row in fns["V"].rows}
    rows = []
    for name in CONSTRUCTORS:  # Nd is not one: it only names items while loading
        fn = fns.get(name)
        for row in fn.rows if fn is not None else ():
            if row.subsumed:
                continue
            a = row.inputs
            if name in _LEAF:
                op, arg, kids, views = _LEAF[name], low.keys[int(s(a[0])[1:])][1], (), ()
            elif name == "Un":
                op = s(a[0])
                conv = _UN_ARG.get(op)
                arg, kids, views = conv(s(a[3])) if conv else None, (a[1],), (view[a[2]],)
            elif name == "Bin":
                op, arg, kids, views = s(a[0]), None, (a[1], a[3]), (view[a[2]], view[a[4]])
            elif name == "Red":
                op, arg, kids, views = s(a[0]), i64(a[3]), (a[1],), (view[a[2]],)
            else:
                n = len(a) // 2
                op, arg = _NARY[name], None if name == "Whr" else i64(a[-1])
                kids, views = tuple(a[2 * i] for i in range(n)), tuple(view[a[2 * i + 1]] for i in range(n))
            rows.append((row.output, op, arg, kids, views))
    return rows, s, i64, view


def read(eg, low: Lowered) -> Graph:
    fns = eg.freeze().functions
    rows, s, i64, view = _decode(eg, fns, low)
    by_sig = {(op, str(arg), kids, views): c for c, op, arg, kids, views in rows}
    raw_of_item = []
    for it in low.items:
        raw_of_item.append(by_sig[(it.op, str(it.arg), tuple(raw_of_item[k] for k in it.srcs), it.views)])
    num: dict = {}
    for c in raw_of_item:
        num.setdefault(c, len(num))
    for c, *_ in rows:  # classes holding no lowered item (no rule makes one today)
        num.setdefault(c, len(num))
    g = Graph(item_class=[num[c] for c in raw_of_item], n_enodes=len(rows))
    for k, c in enumerate(g.item_class):
        g.items_of.setdefault(c, []).append(k)
    enodes = [ENode(num[c], op, arg, tuple(num[k] for k in kids), views) for c, op, arg, kids, views in rows]
    for e in sorted(enodes, key=ENode.key):
        g.classes.setdefault(e.cls, []).append(e)
    fz = fns.get("Fz")
    for row in fz.rows if fz is not None else ():
        a = row.inputs
        g.fz.add((num[a[0]], s(a[1]), i64(a[2]), s(a[3]), view[a[4]]))
    return g
