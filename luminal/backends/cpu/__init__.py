"""``backend="cpu"``: a kernel graph run as a short list of calls (``compiled.CpuProgram``): generated
machine code for elementwise, reduce, gather and scatter_add kernels and matmul epilogues
(``codegen/lowering`` with the ``CPU`` target, ``codegen/llvm.py`` compiled), BLAS for GEMMs, runs of them made one
call of the generated driver (``driver.py``); ``lowering.py`` says what runs where and why. Every
primitive has the reference's semantics (``core/numpy_ops.py``)."""

import time

from luminal.backends.cpu.compiled import CpuProgram
from luminal.codegen import llvm_workers
from luminal.core.backend import Backend, register_backend, zero_inputs
from luminal.core.primitives import ELEMENTWISE

# Graphs of this many nodes or more start the LLVM workers when their compile misses the cache: the
# MNIST MLP's train step (217 nodes, 17 objects to compile) cold in 0.82 s against 0.98 (median of six,
# alternating, AMD EPYC 2 vCPU), the worker's start running beside the egglog pipeline and then taking
# half the objects; a 4-block GPT's train step has 2,000 nodes and 60 distinct kernels, the MNIST CNN's 429.
# Smaller programs (an elementwise expression: a few nodes, a kernel or two) compile here alone.
PRESTART_NODES = 150


class Cpu(Backend):
    name = "cpu"
    level = "kernels"
    # every primitive: the elementwise ones as Expr ops of a kernel (generated code: codegen/lower.py), the
    # others as kernels of their own kind (lowering.py: reduce, gather, scatter_add) or as buffers
    primitives = ELEMENTWISE | {"SumReduce", "MaxReduce", "Gather", "ScatterAdd", "Input", "Constant", "Arange"}

    def program(self, kernel_graph, plan, search: int = 0):
        """``search``: each new binding is laid out under up to this many of the backend's own
        alternatives (threads, kernel cuts, vector width, GEMM layouts) and the fastest kept (``tune.py``)."""
        return _Run(kernel_graph, plan, search)

    def expect_code(self, nodes: int) -> None:
        """Start the LLVM worker processes (``codegen/llvm_workers.py``) for a program of ``PRESTART_NODES``
        graph nodes or more (a train step, whose distinct kernels the workers share), so that their half
        second of start-up runs beside the pipeline rather than before the first objects."""
        if nodes >= PRESTART_NODES:
            llvm_workers.prestart()

    def time(self, kernel_graph, plan) -> float:
        """Median seconds of five runs on zero-filled inputs, symbolic dims bound to 16, after one
        warm-up run (which lays the binding out: the model's layout, an undecided thread choice not timed
        for each candidate)."""
        env = dict.fromkeys(kernel_graph.dims, 16)
        prog = CpuProgram(kernel_graph, plan, time_undecided=False)
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

    _flat = True


register_backend(Cpu())

__all__ = ["Cpu", "CpuProgram"]
