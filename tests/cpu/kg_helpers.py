"""Building small kernel graphs by hand, and their frontend twins for the reference interpreter."""

from __future__ import annotations

import numpy as np

import luminal as lm
from luminal.backends.cpu.compiled import CpuProgram
from luminal.backends.reference.interpreter import ReferenceInterpreter
from luminal.compiler.memory import plan_memory
from luminal.core.kernel_graph import Buffer, Expr, Kernel, KernelGraph
from luminal.core.symbolic import sym
from luminal.core.view import View
from luminal.frontend.ops.core import prim

__all__ = ["KG", "L", "S", "E", "ACC", "ref", "prim", "View", "rand_array", "sym"]


def L(i, dtype):
    return Expr("Load", (), i, dtype)


def S(value, dtype):
    return Expr("Scalar", (), value, dtype)


def E(op, *args, dtype=None, arg=None):
    """An Expr node; its dtype defaults to the primitive's rule (LessThan: bool; Where: its values')."""
    if dtype is None:
        dtype = lm.bool if op == "LessThan" else args[1].dtype if op == "Where" else args[0].dtype
    return Expr(op, tuple(args), arg, dtype)


def ACC(dtype):
    return Expr("Acc", (), None, dtype)


class KG:
    """A kernel graph under construction."""

    def __init__(self):
        self.buffers, self.kernels, self.outputs, self.updates = [], [], [], []

    def buf(self, shape, dtype=lm.float32, kind="temp", name=None, value=None) -> Buffer:
        b = Buffer(len(self.buffers), tuple(sym(d) for d in shape), dtype, kind, name, value)
        self.buffers.append(b)
        return b

    def input(self, name, shape, dtype=lm.float32, kind="input") -> Buffer:
        return self.buf(shape, dtype, kind, name)

    def kernel(self, kind, domain, inputs, outputs, **kw) -> Kernel:
        k = Kernel(kind, tuple(sym(d) for d in domain), list(inputs), list(outputs), **kw)
        self.kernels.append(k)
        return k

    def output(self, buf, view=None):
        self.outputs.append((buf, view or View.contiguous(buf.shape)))

    def update(self, name, buf, view=None):
        self.updates.append((name, buf, view or View.contiguous(buf.shape)))

    def graph(self) -> KernelGraph:
        return KernelGraph(self.buffers, self.kernels, self.outputs, self.updates)

    def program(self) -> CpuProgram:
        kg = self.graph()
        return CpuProgram(kg, plan_memory(kg))


def ref(build, arrays, env=None):
    """Run ``build(g) -> [tensors]`` on a fresh frontend graph with the reference interpreter."""
    g = lm.Graph()
    return ReferenceInterpreter([(t.node, t.layout) for t in build(g)], g.constants)(arrays, env or {})


def rand_array(shape, dtype, seed=0, low=-2.0, high=2.0):
    rng = np.random.default_rng(seed)
    if dtype is lm.bool:
        return rng.random(shape) < 0.5
    if dtype is lm.int32:
        return rng.integers(int(low) - 3, int(high) + 4, size=shape).astype(np.int32)
    return lm.core.dtype.to_storage(rng.uniform(low, high, size=shape), dtype)
