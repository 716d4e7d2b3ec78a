"""Lowering: frontend nodes -> egglog commands (the term language of ``schema.py``).

Each lowered node becomes one *item*: a term over earlier items whose views are ``(V k ...)``
terms carrying their structure. Items are sent as body-less rules of a few hundred actions, each
followed by one run of it (``(rule () ((let n7 (Bin "Add" n3 w1 n5 w2)) ...))``): egglog spends
~0.2 ms per top-level command but only microseconds per term built inside a rule's actions.
Inputs are identified by name, constants by ConstKey, never by a Graph (synthetic leaves from loop
rolling belong to none). Identical items are sent once. Scalar constants and values computed from
them only are folded on the way (``fold.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from luminal.compiler.egraph import fold, schema
from luminal.compiler.egraph.egglog_bindings import bindings as b
from luminal.compiler.term import topological
from luminal.core.primitives import ELEMENTWISE, PRIMITIVES, REDUCE
from luminal.core.symbolic import is_static, prod
from luminal.core.view import View

ACTIONS = 300  # per load rule (measured: fewer, larger rules load faster, up to ~600)
_S = b.PanicSpan()


@dataclass
class Item:
    term: tuple  # (constructor, *args): str / int literals, ("n", item) and ("w", view) references
    op: str  # the Term op and arg it stands for
    arg: object
    srcs: tuple  # item index per input
    views: tuple  # view index per input
    shape: tuple
    dtype: object
    node_ids: list = field(default_factory=list)  # frontend nodes this item computes


@dataclass
class Lowered:
    items: list = field(default_factory=list)
    views: list = field(default_factory=list)  # view index -> View
    view_terms: list = field(default_factory=list)  # view index -> its (V ...) term
    keys: list = field(default_factory=list)  # leaf key index -> (op, arg)
    roots: dict = field(default_factory=dict)  # root node id -> item index
    folds: dict = field(default_factory=dict)  # fold kind -> count
    nodes_before: int = 0
    _views: dict = field(default_factory=dict)
    _keys: dict = field(default_factory=dict)
    _terms: dict = field(default_factory=dict)

    # interning -------------------------------------------------------------------------------
    def view(self, v: View, src_shape) -> int:
        key = (v, tuple(src_shape))
        k = self._views.get(key)
        if k is None:
            in_order = v.is_contiguous() and prod(v.shape) == prod(src_shape)
            ident = in_order and tuple(v.shape) == tuple(src_shape)
            k = self._views[key] = len(self.views)
            self.views.append(v)
            self.view_terms.append(_view_term(k, v, ident, in_order))
        return k

    def key(self, op: str, arg) -> str:
        k = self._keys.get((op, arg))
        if k is None:
            k = self._keys[(op, arg)] = len(self.keys)
            self.keys.append((op, arg))
        return f"k{k}"

    def add(self, item: Item, node_id=None) -> int:
        k = self._terms.get(item.term)
        if k is None:
            k = self._terms[item.term] = len(self.items)
            self.items.append(item)
        if node_id is not None and node_id not in self.items[k].node_ids:
            self.items[k].node_ids.append(node_id)
        return k

    def fold(self, kind: str):
        self.folds[kind] = self.folds.get(kind, 0) + 1


def _view_term(k: int, v: View, ident: bool, in_order: bool) -> tuple:
    """``(V k flags rank zero unit one merge)``: see ``schema.py``."""
    flags = ((schema.IDENT if ident else 0) | (schema.UNMASKED if v.mask is None else 0)
             | (schema.IN_ORDER if in_order else 0))
    zero = unit = one = merge = 0
    sh, st = v.shape, v.strides
    if len(sh) <= schema.MAX_AXES:
        flags |= schema.AXES
        for i, (d, s) in enumerate(zip(sh, st)):
            bit = 1 << i
            zero |= bit if is_static(s) and s == 0 else 0
            unit |= bit if is_static(s) and s == 1 else 0
            one |= bit if is_static(d) and d == 1 else 0
            merge |= bit if i + 1 < len(sh) and s == sh[i + 1] * st[i + 1] else 0
    return ("V", k, flags, len(sh), zero, unit, one, merge)


def _value_bits(val: np.ndarray, dtype) -> int:
    """Which identities a scalar is: ``x + (-0.0)`` is ``x`` for every float ``x`` but ``x + 0.0`` is
    not (``-0.0 + 0.0 == +0.0``, and ``1/x`` tells the two zeros apart: -inf vs +inf)."""
    if dtype.kind == "b":
        return schema.V_ONE if bool(val) else schema.V_ADD_ID
    add_id = val == 0 and (dtype.kind != "f" or bool(np.signbit(val)))
    return ((schema.V_ONE if val == 1 else 0) | (schema.V_NEG_ONE if val == -1 else 0)
            | (schema.V_ADD_ID if add_id else 0))


def lower(roots) -> Lowered:
    low = Lowered()
    order = topological(roots)
    low.nodes_before = len(order)
    uni: dict[int, np.ndarray] = {}  # id(node) -> uniform value (not lowered)
    item_of: dict[int, int] = {}

    def const(val, dtype, node_id=None) -> int:
        key = fold.const_key(val, dtype)
        term = ("Cst", low.key("Constant", key), _value_bits(val, dtype))
        return low.add(Item(term, "Constant", key, (), (), (), dtype), node_id)

    def edge(s, v):
        if id(s) in uni:
            k = item_of.get(id(s))
            if k is None:
                k = item_of[id(s)] = const(uni[id(s)], s.dtype)
            return k, low.view(fold.broadcast(v), ())
        return item_of[id(s)], low.view(v, s.shape)

    def item(n, op, arg, srcs, make, node_id) -> int:
        """An item reading ``srcs`` (node, view) pairs; ``make(refs)`` gives its term."""
        edges = [edge(s, v) for s, v in srcs]
        refs = [x for k, vk in edges for x in (("n", k), ("w", vk))]
        return low.add(Item(make(refs), op, arg, tuple(k for k, _ in edges), tuple(v for _, v in edges),
                            tuple(n.shape), n.dtype), node_id)

    for n in order:
        op = n.op
        val = fold.scalar_value(n)
        if val is not None:
            uni[id(n)] = val
            continue
        if n.srcs and (op in ELEMENTWISE or op in REDUCE) and all(id(s) in uni and v.mask is None for s, v in n.srcs):
            vals = [uni[id(s)] for s, _ in n.srcs]
            res = fold.evaluate(n, vals) if op in ELEMENTWISE else fold.reduce_value(n, vals[0])
            if res is not None:
                uni[id(n)] = res
                low.fold("fold-const")
                continue
        item_of[id(n)] = _lower_node(n, low, item, uni)
    for r in roots:
        if id(r) in uni:  # its readers read the scalar (item_of); the root itself needs its own shape
            if r.shape == ():
                item_of[id(r)] = const(uni[id(r)], r.dtype, r.id)
            else:  # a uniform root: the constant, materialised by a Copy through a broadcast view
                c = const(uni[id(r)], r.dtype)
                vk = low.view(View(tuple(r.shape), (0,) * len(r.shape)), ())
                item_of[id(r)] = low.add(Item(("Un", "Copy", ("n", c), ("w", vk), ""), "Copy", None, (c,), (vk,),
                                              tuple(r.shape), r.dtype), r.id)
        low.roots[r.id] = item_of[id(r)]
    return low


def _un_arg(op, arg) -> str:
    """A ``Un`` term's string argument: the dtype name of a Cast, ``"detach"`` or ``""`` otherwise."""
    return arg.name if op == "Cast" else (arg or "")


# One entry per egglog constructor of schema.py: the term of a node (op, arg) from its input references
# (``("n", item), ("w", view)`` per input). Which one a primitive lowers to is its record's ``egglog``.
_TERMS = {
    "Un": lambda op, arg, r: ("Un", op, *r, _un_arg(op, arg)),
    "Bin": lambda op, arg, r: ("Bin", op, *r),
    "Whr": lambda op, arg, r: ("Whr", *r),
    "Red": lambda op, arg, r: ("Red", op, *r, arg),
    "Gat": lambda op, arg, r: ("Gat", *r, arg),
    "Sct": lambda op, arg, r: ("Sct", *r, arg),
}
_LEAVES = ("Inp", "Cst", "Ara")  # leaf terms name an interned key instead (a Constant's value bits: 0)


def _lower_node(n, low: Lowered, item, uni) -> int:
    op, arg = n.op, n.arg
    if op == "Copy" and arg != "detach":  # (a checked copy's "index k" is the frontend's: a plain Copy here)
        arg = None
    prim = PRIMITIVES.get(op)
    if prim is None:
        raise ValueError(f"cannot lower {n!r}: unknown op {op!r}")
    if prim.egglog in _LEAVES:
        term = (prim.egglog, low.key(op, arg)) + ((0,) if prim.egglog == "Cst" else ())
        return low.add(Item(term, op, arg, (), (), tuple(n.shape), n.dtype), n.id)
    if op == "Where" and id(n.srcs[0][0]) in uni and n.srcs[0][1].mask is None:
        low.fold("fold-where")
        branch = n.srcs[1] if bool(uni[id(n.srcs[0][0])]) else n.srcs[2]
        return item(n, "Copy", None, [branch], lambda r: _TERMS["Un"]("Copy", None, r), n.id)
    make = _TERMS[prim.egglog]
    return item(n, op, arg, n.srcs, lambda r: make(op, arg, r), n.id)


def _expr(x):
    if isinstance(x, tuple):
        if x[0] in ("n", "w"):
            return b.Var(_S, f"{x[0]}{x[1]}")
        return b.Call(_S, x[0], [_expr(a) for a in x[1:]])
    if isinstance(x, str):
        return _string(x)
    return b.Lit(_S, b.Int(x))


_STRINGS: dict = {}  # str -> its Lit (op names, dtype names, leaf keys: a few hundred)
_MAX_STRINGS = 4096


def _string(x: str):
    """A string literal, made once: a Lit of a String costs ~7 us to make (the bindings try the other
    kinds of literal first, each failure an exception), 20 times an Int's, and every item names its
    op by one. A Lit is immutable and usable from any thread; the same one in many terms is the same
    literal to egglog."""
    got = _STRINGS.get(x)
    if got is None:
        got = b.Lit(_S, b.String(x))
        if len(_STRINGS) < _MAX_STRINGS:
            _STRINGS[x] = got
    return got


def commands(low: Lowered, limit: int = ACTIONS) -> list:
    """The commands that load ``low``: body-less rules of about ``limit`` actions, each followed by
    one run of it. Each view is built once per rule. An item read by a later rule is unioned with
    ``(Nd k)``, which that rule builds to refer to it (a rule's actions may build terms but not look
    functions up, and a body of lookups costs milliseconds to plan).

    Commands are built as objects, not parsed: ``parse_program`` gives every span a copy of the
    whole source (quadratic), and those copies are converted again when the commands run. The span
    is a ``PanicSpan`` (a RustSpan costs ~8 us per object to convert): egglog only reads a span to
    report an error, which then surfaces as a panic, i.e. as a CompileError all the same."""
    chunks, cur, size = [], [], 0
    for k, it in enumerate(low.items):  # ~1 action per item, 1 per new view and per outside read
        cost = 1 + 2 * len(it.srcs)
        if cur and size + cost > limit:
            chunks.append(cur)
            cur, size = [], 0
        cur.append(k)
        size += cost
    if cur:
        chunks.append(cur)
    first = {k: c for c, ks in enumerate(chunks) for k in ks}
    later = {s for ks in chunks for k in ks for s in low.items[k].srcs if first[s] != first[k]}
    out = []
    for c, ks in enumerate(chunks):
        ext = sorted({s for k in ks for s in low.items[k].srcs if first[s] != c})
        head = [b.Let(_S, f"n{s}", _expr(("Nd", s))) for s in ext]
        views: set = set()
        for k in ks:
            it = low.items[k]
            for v in it.views:
                if v not in views:
                    views.add(v)
                    head.append(b.Let(_S, f"w{v}", _expr(low.view_terms[v])))
            head.append(b.Let(_S, f"n{k}", _expr(it.term)))
            if it.op == "Mul" and it.dtype.name in ("float32", "float64"):  # a product BLAS can take (contraction.egg)
                head.append(b.Expr_(_S, _expr(("BlasMul", ("n", k)))))
            if k in later:
                head.append(b.Union(_S, _expr(("Nd", k)), b.Var(_S, f"n{k}")))
        name = f"load{c}"
        out += [b.AddRuleset(_S, name), b.RuleCommand(b.Rule(_S, head, [], name, name)),
                b.RunSchedule(b.Run(_S, b.RunConfig(name, None)))]
    return out
