"""What every kind's lowering shares: where buffers live (a backend's ``Memory``), the buffers a kernel
uses, how its work items map onto the target, and its stores.

A backend answers the lowering's questions about memory through an object with these methods (the
CPU's ``backends/cpu/lowering.py``, the GPU's ``backends/cuda/launches.py``):

- ``env``: the binding the code is laid out for (dims to ints, or to ``DimValue`` sizes that become
  parameters: the CPU), or None: the symbolic dims themselves (the GPU, whose kernels take every
  dim as a parameter), see :func:`sizes`;
- ``read(buf, view)``: the :class:`~luminal.codegen.lower.Placed` read of a view of ``buf``;
- ``output(buf)``: the placement of a whole output buffer, indexed in its own shape;
- ``scratch(tag, dtype, shape)``: memory of the kernel's own, row-major over ``shape`` (``"flag"``:
  the error cell, two int32; ``"acc"``: an accumulator; ``"partials"``: a split row's partial results);
- ``contiguous_outputs``: True when every output is stored row-major from its start (then a store
  is at the element's flat index, which a thread already has, not a sum over strides).
"""

from __future__ import annotations

from dataclasses import dataclass

from luminal.codegen import ir
from luminal.codegen.lower import Placed, contiguous_index, dim, read, unflatten
from luminal.core import dtype as dt
from luminal.core.symbolic import DimValue, evaluate, prod, same
from luminal.core.view import contiguous_strides

HALF = (dt.float16, dt.bfloat16)


class Uses:
    """The IR buffer parameters a kernel uses, each once (in order of first use), with what it does
    to them (read, write, or both)."""

    def __init__(self):
        self.bufs: dict[str, ir.Buf] = {}

    def use(self, p: Placed, access: str) -> Placed:
        old = self.bufs.get(p.name)
        if old is not None and old.access != access:
            access = "rw"
        self.bufs[p.name] = ir.Buf(p.name, p.dtype, access)
        return p

    def params(self) -> tuple:
        return tuple(self.bufs.values())


@dataclass
class Work:
    """A kernel's work items over ``shape``: the launch ``grid`` (and ``block``, on a thread target),
    each item's multi-index ``index``, its row-major ``flat`` index where the target has it (a thread's
    global id), and the statements that define them (``prelude``) with the guard ``live`` that keeps a
    block's tail past the last item idle (None: every item is live)."""

    grid: tuple
    block: tuple
    index: tuple
    flat: ir.V | None = None
    prelude: tuple = ()
    live: ir.V | None = None


def sizes(memory, dims) -> tuple:
    """``dims`` as the code sees them: evaluated under ``memory.env``, or symbolic where it is None."""
    env = memory.env
    return tuple(dims) if env is None else tuple(evaluate(d, env) for d in dims)


def one(n) -> bool:
    """Whether an axis of size ``n`` is left out of loops and strides: a size 1 that is no dim's value
    (a dim bound to 1 keeps its axis, so the code stays the code of every binding of the dim)."""
    return n == 1 and type(n) is not DimValue


def items(target, shape: tuple, var: str = "i") -> Work:
    """One work item per element of ``shape``. A loop target runs a grid over the axes longer than
    1 (the first is the one a caller cuts over threads: a leading size-1 axis would leave nothing to
    cut); a thread target a thread per element, ``block`` to a block, over the flat index."""
    if not target.threads:
        long = [a for a, n in enumerate(shape) if not one(n)] or list(range(min(1, len(shape))))
        index = [ir.const(0)] * len(shape)
        for g, a in enumerate(long):
            index[a] = ir.item(g)
        return Work(tuple(ir.const(shape[a]) for a in long), (), tuple(index))
    n, t = prod(shape), target.block
    gid = ir.add(ir.mul(ir.block(0), t), ir.thread(0))
    flat = ir.var(var)
    return Work((blocks(n, t),), (t,), tuple(unflatten(flat, shape)), flat, (ir.Assign(var, gid),),
                ir.alu("LessThan", flat, dim(n)))


def blocks(n, per: int) -> ir.V:
    """Blocks of ``per`` threads covering ``n`` items."""
    return ir.div(ir.add(dim(n), per - 1), per)


def kernel(name: str, uses: Uses, work: Work, body, shared=(), notes=None) -> ir.Kernel:
    """The checked kernel running ``body`` for each of ``work``'s items, its parameters the dims its
    code reads (sizes laid out as ``DimValue``s become parameters: ``ir.const``)."""
    body = tuple(body)
    if work.live is not None:
        body = (*work.prelude, ir.If(work.live, body))
    else:
        body = (*work.prelude, *body)
    k = ir.Kernel(name, uses.params(), (), tuple(work.grid), body, block=tuple(work.block), shared=tuple(shared),
                  notes=dict(notes or {}))
    k.params = ir.used_params(k)
    return ir.check(k)


def store(memory, p: Placed, idx, shape, value: ir.V, valid: ir.V | None = None, flat: ir.V | None = None) -> ir.Store:
    """``value`` stored at ``idx`` (of ``shape``) of output placement ``p``: at the flat index where
    ``memory`` keeps outputs row-major (``flat``: that index, where the caller has it), else at the
    placement's offset plus the index times its strides."""
    if memory.contiguous_outputs:
        if flat is None:
            flat = contiguous_index(idx, shape)
        row_major = contiguous_strides(shape)
        if not all(one(n) or same(s, r) for n, s, r in zip(shape, p.strides, row_major)):
            raise ir.IRError(f"store into {p.name}: strides {p.strides} are not row-major over {shape}")
        index = flat if same(p.offset, 0) else ir.add(dim(p.offset), flat)
        return ir.Store(p.name, index, ir.cast(value, p.dtype), valid)
    index = ir.const(p.offset)
    for i, s in zip(idx, p.strides):
        index = ir.add(index, ir.mul(i, s))
    return ir.Store(p.name, index, ir.cast(value, p.dtype), valid)


def report(flag: Placed, j: ir.V, ok: ir.V) -> tuple:
    """Where the index ``j`` is out of range (``ok`` False): 1 into the error cell's first int32 and
    the index into its second. A kernel cannot raise; the host reads the cell after the call and
    raises the reference's IndexError."""
    bad = ir.alu("Not", ok)
    return (ir.Store(flag.name, ir.const(0), ir.const(1, dt.int32), bad),
            ir.Store(flag.name, ir.const(1), ir.cast(j, dt.int32), bad))


def reader(placements: list, uses: Uses):
    """The ``Values`` leaf that reads ``Load`` leaves from ``placements`` (noting each buffer read)."""
    def leaf(e, at):
        return read(uses.use(placements[e.arg], "r"), at)
    return leaf
