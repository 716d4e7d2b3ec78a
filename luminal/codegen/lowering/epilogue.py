"""A reduction's or product's epilogue: every output at one index of the output (the domain without
the reduced axes), with ``Acc`` the reduced value; and a library product's epilogue as a kernel of
its own, reading the product the library wrote."""

from __future__ import annotations

from luminal.codegen import ir
from luminal.codegen.lower import Placed, Values, contiguous_index, read, unflatten
from luminal.codegen.lowering.work import Uses, items, kernel, reader, sizes, store
from luminal.core.symbolic import same


def epilogue_stores(k, memory, uses: Uses, out_shape, idx, acc: ir.V, valid: ir.V | None = None,
                    flat: ir.V | None = None) -> list:
    """Stores of every output of ``k`` at the output index ``idx`` (of ``out_shape``), ``Acc`` being
    ``acc``. An output buffer (and the epilogue's views) may regroup those elements (a kept axis of
    size 1): each output is evaluated at the same element's index in its own shape."""
    epi = [memory.read(b, v) for b, v in k.epilogue_inputs]
    shapes = [sizes(memory, v.shape) for _, v in k.epilogue_inputs]
    read_epi = reader(epi, uses)

    def leaf(e, at):
        return acc if e.op == "Acc" else read_epi(e, at)

    values = Values(leaf, lambda e: out_shape if e.op == "Acc" else shapes[e.arg], memory.env)
    if flat is None:
        flat = contiguous_index(idx, out_shape)
    body = []
    for b, e in k.outputs:
        p = uses.use(memory.output(b), "w")
        shape = sizes(memory, b.shape)
        at = idx if same(shape, out_shape) else tuple(unflatten(flat, shape))
        body.append(store(memory, p, at, shape, values.at(e, at if values.shape(e) is not None else ()), valid,
                          flat))
    return body


def epilogue(k, target, memory, acc: Placed, name: str) -> list[ir.Kernel]:
    """A library product's epilogue: an elementwise pass over its output, reading the product
    (``Acc``) that the library wrote to ``acc``."""
    domain = sizes(memory, k.domain)
    out_shape = tuple(n for a, n in enumerate(domain) if a not in k.axes)
    uses = Uses()
    work = items(target, out_shape)
    uses.use(acc, "r")
    body = epilogue_stores(k, memory, uses, out_shape, work.index, read(acc, work.index), flat=work.flat)
    return [kernel(name, uses, work, body, notes={"fused": " ".join(k.fused), "schedule": "epilogue"})]
