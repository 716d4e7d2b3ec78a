"""The ``fusion`` ruleset: which edges may be computed inside their consumer's kernel.

An edge fuses only through a view that reads the producer's whole buffer in order (the identity,
or a reshape of it such as a ``keepdim`` reduction's size-1 axis: element ``i`` of the consumer's
domain is element ``i`` of the producer's) and only between these kinds of producer and consumer:

| producer                    | consumer                     | what it becomes
|-----------------------------|------------------------------|----------------
| elementwise                 | elementwise                  | one elementwise region
| elementwise                 | SumReduce / MaxReduce        | the reduction's prologue
| SumReduce / MaxReduce / MatMul | elementwise               | an epilogue
| SumReduce                   | SumReduce                    | a chained reduction

Elementwise = Log2 Exp2 Sin Sqrt Recip Add Mul Mod Max LessThan Where Cast Copy; Gather, ScatterAdd
and the leaves never fuse. ``(Kind p k)`` names the kind of each e-node of class ``p``;
``(Fz c op i k v)`` says: an ``op`` e-node of class ``c`` reading slot ``i`` through view ``v`` may
fuse a producer of kind ``k``. Extraction looks the chosen e-nodes up in it (``Term.fusible``).
"""

from luminal.core.primitives import PRIMITIVES

RULESET = "fusion"

# the elementwise kind comes from the primitive records: a new elementwise primitive fuses without an edit here
_EW = tuple(n for n, p in PRIMITIVES.items() if p.fusion == "elementwise")
ACCEPTS = {**{c: ("ew", "SumReduce", "MaxReduce", "MatMul") for c in _EW},
           "SumReduce": ("ew", "SumReduce"), "MaxReduce": ("ew",)}


def kind(op: str) -> str:
    """The producer kind of an e-node op, as the ``Kind`` relation names it."""
    return "ew" if op in _EW else op


def _text():
    facts = " ".join(f'(Accepts "{c}" "{k}")' for c, ks in ACCEPTS.items() for k in ks)
    slots = (("un", '(Un op x0 v0 a)', "op", 1), ("bin", "(Bin op x0 v0 x1 v1)", "op", 2),
             ("where", "(Whr x0 v0 x1 v1 x2 v2)", '"Where"', 3), ("red", "(Red op x0 v0 ax)", "op", 1))
    rules = [
        "(relation Kind (Op String))", "(relation Accepts (String String))",
        "(relation Fz (Op String i64 String View))", facts,
    ]
    for name, pat, k in (("un", "(Un op x v a)", '"ew"'), ("bin", "(Bin op x v y w)", '"ew"'),
                         ("where", "(Whr x v y w z u)", '"ew"'), ("red", "(Red op x v ax)", "op"),
                         ("matmul", "(MatMul x v y w ax)", '"MatMul"')):
        rules.append(f'(rule ((= p {pat})) ((Kind p {k})) :ruleset {RULESET} :name "kind-{name}")')
    for name, pat, op, n in slots:
        for i in range(n):
            rules.append(f"(rule ((= c {pat}) (InOrder v{i}) (Kind x{i} k) (Accepts {op} k)) "
                         f'((Fz c {op} {i} k v{i})) :ruleset {RULESET} :name "fuse-{name}-{i}")')
    return "\n".join(rules)


TEXT = _text()
