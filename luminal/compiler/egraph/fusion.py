"""The ``fusion`` ruleset's table: which producer kinds each consumer op accepts into its kernel.

The rules are ``rules/fusion.egg`` (which edges fuse, and why only through in-order views); this
module holds the table they read, asserted as ``(Accepts consumer producer-kind)`` facts
(:func:`facts`), and :func:`kind`, with which extraction names a chosen producer's kind:

| producer                    | consumer                     | what it becomes
|-----------------------------|------------------------------|----------------
| elementwise                 | elementwise                  | one elementwise region
| elementwise                 | SumReduce / MaxReduce        | the reduction's prologue
| SumReduce / MaxReduce / MatMul | elementwise               | an epilogue
| SumReduce                   | SumReduce                    | a chained reduction

Elementwise = Log2 Exp2 Sin Sqrt Recip Add Mul Mod Max LessThan Where Cast Copy; Gather, ScatterAdd
and the leaves never fuse.
"""

from luminal.core.primitives import PRIMITIVES

# the elementwise kind comes from the primitive records: a new elementwise primitive fuses without an edit here
_EW = tuple(n for n, p in PRIMITIVES.items() if p.fusion == "elementwise")
ACCEPTS = {**{c: ("ew", "SumReduce", "MaxReduce", "MatMul") for c in _EW},
           "SumReduce": ("ew", "SumReduce"), "MaxReduce": ("ew",)}


def kind(op: str) -> str:
    """The producer kind of an e-node op, as the ``Kind`` relation names it."""
    return "ew" if op in _EW else op


def facts() -> str:
    """The ``Accepts`` facts of ``ACCEPTS``, as egglog text (to load after ``rules/fusion.egg``)."""
    return "\n".join(f'(Accepts "{c}" "{k}")' for c, ks in ACCEPTS.items() for k in ks)
