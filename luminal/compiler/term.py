"""The optimised program: the DAG the egglog stage extracts, before it is cut into kernels.

A :class:`Term` is a frontend primitive (same op names, args and semantics as
``frontend/primitives.py``) or one of the compiler's own ops:

| op      | srcs                 | arg  | meaning
|---------|----------------------|------|--------
| MatMul  | (a, va), (b, vb)     | axis | ``SumReduce(Mul(a va, b vb), axis)``, proven a GEMM layout by the
|         |                      |      | ``matmul`` ruleset (the views are the Mul's, of the product's shape)
| Call    | the arguments, each  | Call | ``arg.body`` (a ``rolling.body.Body``: a rolled loop's body,
|         | read whole (a packed | Arg  | optimised once) run on these arguments: one trip. Its value is a
|         | one: its part)       |      | tuple (no dtype, shape ``()``); Out terms take its parts
| Out     | (the Call, any view) | i    | output ``i`` of the call: ``arg.body.outputs[i]``'s value; for
|         |                      |      | ``i = len(outputs) + g``, pack ``g`` (``Body.packs``)

``fusible[i]`` is the ``fusion`` ruleset's verdict on edge ``i``: the producer ``srcs[i]`` may be
computed inside this term's kernel (elementwise into elementwise or into a reduction's prologue,
a reduction or matmul into an elementwise epilogue). The kernel builder decides which legal edges
it takes (one reduction or matmul per kernel, no cycles between kernels).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from luminal.core.dtype import DType
from luminal.core.symbolic import shape_str


@dataclass(eq=False, slots=True)  # one per op of the unrolled program: no per-instance dict
class Term:
    op: str
    srcs: tuple  # ((Term, View), ...)
    arg: object
    dtype: DType
    shape: tuple
    fusible: tuple = ()  # per src: may the producer be fused into this term's kernel
    origin: int | None = None  # id of the frontend node this term computes, when it computes one
    id: int = field(default=-1)  # position in the extracted program's topological order

    def __repr__(self):
        return f"t{self.id} = {self.op}({self.arg}) {shape_str(self.shape)} {self.dtype.name}"


def topological(roots) -> list:
    """Every term (or frontend node) reachable from ``roots``, producers first: ``walk.postorder``
    over ``srcs``, written out (it runs on every stage's whole program, and a children function
    per node costs a third of the walk)."""
    order, seen = [], set()
    for r in roots:
        if id(r) in seen:
            continue
        seen.add(id(r))
        stack = [(r, iter(r.srcs))]
        while stack:
            x, it = stack[-1]
            for s, _ in it:
                if id(s) not in seen:
                    seen.add(id(s))
                    stack.append((s, iter(s.srcs)))
                    break
            else:
                stack.pop()
                order.append(x)
    return order

