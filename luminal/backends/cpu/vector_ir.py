"""Building LLVM IR with vectors by hand, for the generated BLAS-like routines (``generated_gemm.py``,
``generated_gemv.py``): an ``ll.IRBuilder`` with counted loops (values carried through phis, which
LLVM keeps in registers), scalar-to-vector splats and element addressing over opaque pointers."""

from __future__ import annotations

import llvmlite.ir as ll

I32, I64, I1 = ll.IntType(32), ll.IntType(64), ll.IntType(1)
PTR = ll.PointerType()


def declare(mod, fty, name: str):
    """Function ``name`` of ``mod`` (an intrinsic), declared on first use."""
    return mod.globals.get(name) or ll.Function(mod, fty, name)


class Builder:
    """An ``ll.IRBuilder`` with counted loops and typed helpers."""

    def __init__(self, fn, t, w: int):
        self.b = ll.IRBuilder(fn.append_basic_block("entry"))
        self.t, self.w = t, w

    def i(self, v: int) -> ll.Constant:
        return ll.Constant(I64, v)

    def min(self, x, y):
        return self.b.select(self.b.icmp_signed("<", x, y), x, y)

    def max(self, x, y):
        return self.b.select(self.b.icmp_signed(">", x, y), x, y)

    def loop(self, lo, hi, step, name: str, body, carried=()):
        """``for v in range(lo, hi, step): carried = body(v, carried)``; returns the final ``carried``."""
        b = self.b
        pre = b.block
        head, inner, out = (b.append_basic_block(f"{name}.{s}") for s in ("head", "body", "out"))
        b.branch(head)
        b.position_at_end(head)
        v = b.phi(I64, name)
        v.add_incoming(lo, pre)
        phis = []
        for c in carried:
            p = b.phi(c.type)
            p.add_incoming(c, pre)
            phis.append(p)
        b.cbranch(b.icmp_signed("<", v, hi), inner, out)
        b.position_at_end(inner)
        new = body(v, tuple(phis))
        for p, c in zip(phis, new):
            p.add_incoming(c, b.block)
        v.add_incoming(b.add(v, step), b.block)
        b.branch(head)
        b.position_at_end(out)
        return tuple(phis)

    def each(self, lo, hi, name: str, body) -> None:
        """``for v in range(lo, hi): body(v)``."""
        self.loop(lo, hi, self.i(1), name, lambda v, _: body(v) or ())

    def at(self, base, index):
        return self.b.gep(base, [index], source_etype=self.t)

    def splat(self, x):
        """A vector of ``w`` copies of scalar ``x``."""
        vt = ll.VectorType(x.type, self.w)
        one = self.b.insert_element(ll.Constant(vt, ll.Undefined), x, ll.Constant(I32, 0))
        return self.b.shuffle_vector(one, ll.Constant(vt, ll.Undefined),
                                     ll.Constant(ll.VectorType(I32, self.w), [0] * self.w))

    def opaque_alloca(self, count: int, name: str):
        """A stack buffer of ``count`` elements (64-byte aligned), as an opaque pointer like every
        other here (llvmlite types an alloca's pointer; LLVM folds the int round trip)."""
        space = self.b.alloca(self.t, size=self.i(count), name=name)
        space.align = 64
        return self.b.inttoptr(self.b.ptrtoint(space, I64), PTR)

    def intrinsics(self, mod) -> tuple:
        """``(fma, masked load, masked store)`` on vectors of ``w`` elements of this builder's type."""
        vt = ll.VectorType(self.t, self.w)
        suffix = f"v{self.w}f{self.t.intrinsic_name[1:]}"
        mask = ll.VectorType(I1, self.w)
        store = ll.FunctionType(ll.VoidType(), (vt, PTR, I32, mask))
        return (declare(mod, ll.FunctionType(vt, (vt, vt, vt)), f"llvm.fma.{suffix}"),
                declare(mod, ll.FunctionType(vt, (PTR, I32, mask, vt)), f"llvm.masked.load.{suffix}.p0"),
                declare(mod, store, f"llvm.masked.store.{suffix}.p0"))

    def prefetch(self, mod, address) -> None:
        """A hint to bring ``address``'s cache line closer for a read (no fault past the end of memory)."""
        fn = declare(mod, ll.FunctionType(ll.VoidType(), (PTR, I32, I32, I32)), "llvm.prefetch.p0")
        self.b.call(fn, (address, ll.Constant(I32, 0), ll.Constant(I32, 3), ll.Constant(I32, 1)))

    def lanes_below(self, count):
        """The mask of the lanes ``j`` with ``j < count`` (an i64)."""
        lanes = ll.Constant(ll.VectorType(I64, self.w), list(range(self.w)))
        return self.b.icmp_signed("<", lanes, self.splat(count))
