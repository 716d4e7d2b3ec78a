"""``backend="cpu"``: a kernel graph run as a flat list of numpy calls (``compiled.CpuProgram``), with
each primitive's numpy semantics from ``core/numpy_ops.py`` (shared with the reference interpreter)."""

import time

from luminal.backends.cpu.compiled import CpuProgram
from luminal.backends.cpu.exprs import LOWERING
from luminal.core.backend import Backend, register_backend, zero_inputs


class Cpu(Backend):
    name = "cpu"
    level = "kernels"
    # every primitive: the elementwise ones as Expr ops of a kernel (exprs.LOWERING), the others as kernels
    # of their own kind (lowering.py: reduce, gather, scatter_add) or as buffers (input, const, iota)
    primitives = frozenset(LOWERING) | {"SumReduce", "MaxReduce", "Gather", "ScatterAdd", "Input", "Constant", "Arange"}

    def program(self, kernel_graph, plan):
        return _Run(kernel_graph, plan)

    def time(self, kernel_graph, plan) -> float:
        """Median seconds of five runs on zero-filled inputs, symbolic dims bound to 16, after one
        warm-up run (which lays the binding out)."""
        env = dict.fromkeys(kernel_graph.dims, 16)
        prog = CpuProgram(kernel_graph, plan)
        arrays = zero_inputs(kernel_graph, env)
        prog(arrays, env)
        times = []
        for _ in range(5):
            t0 = time.perf_counter()
            prog(arrays, env)
            times.append(time.perf_counter() - t0)
        return sorted(times)[len(times) // 2]


class _Run(CpuProgram):
    """A CpuProgram under the protocol's call contract: the outputs, then the update values."""

    def __call__(self, arrays, env):
        outs, ups = super().__call__(arrays, env)
        return [*outs, *ups]


register_backend(Cpu())

__all__ = ["Cpu", "CpuProgram"]
