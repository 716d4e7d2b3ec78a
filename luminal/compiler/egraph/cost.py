"""Cost models for extraction: a DAG's cost is the sum over its distinct e-nodes of
launch + bytes moved + arithmetic, so a matmul (one GEMM) beats a broadcast product and its sum
(the product is materialised), and an input beats ``x*1``. Symbolic dims count as ``dim``.

A MatMul also pays for the operands it cannot hand to BLAS in place (``contraction.egg`` makes
MatMuls of layouts the strict ``matmul`` rule leaves): each such operand is first copied into a
contiguous scratch (a launch, and its elements read and written once), the way the CPU backend's
GEMM plan does it (``backends/cpu/gemm.py``). So for a contraction the e-graph holds two priced
programs, the reduction of the materialised product and the GEMM with its copies.

Costs are in nanoseconds of a rough machine; only their ratios matter. ``CPU`` is the default; a
CUDA model is another instance with its own numbers.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from luminal.core.symbolic import evaluate, free_vars, is_static


@dataclass(frozen=True)
class CostModel:
    launch: float = 3000.0  # one kernel call (numpy: one ufunc / BLAS call)
    byte: float = 0.1  # per byte read or written
    op: float = 0.5  # per element of elementwise or reduction arithmetic
    gemm: float = 0.01  # per multiply-add inside a GEMM
    dim: int = 64  # value assumed for a symbolic dim

    def size(self, d) -> float:
        return d if is_static(d) else _eval(d, self.dim)

    def numel(self, shape) -> float:
        n = 1.0
        for d in shape:
            n *= self.size(d)
        return n

    def read(self, view, itemsize: int) -> float:
        """Bytes read through ``view``: the distinct elements it touches."""
        n = 1.0
        for d, s in zip(view.shape, view.strides):
            if not (is_static(s) and s == 0):
                n *= self.size(d)
        return n * itemsize

    def enode(self, op: str, shape, dtype, reads, arg=None) -> float:
        """``reads``: [(view, source itemsize)] of the e-node's inputs; ``arg``: the e-node's (a
        MatMul's: the summed axis)."""
        if op in ("Input", "Constant", "Arange"):
            return 0.0
        out = self.numel(shape) * dtype.itemsize
        moved = out + sum(self.read(v, isz) for v, isz in reads)
        if op == "MatMul":
            work = self.gemm * self.numel(reads[0][0].shape)
            (va, ia), (vb, ib) = reads
            for v, isz, other in ((va, ia, vb), (vb, ib, va)):
                if not self.in_place(v, other, arg):
                    work += self.launch + 2 * self.byte * self.read(v, isz)
        elif op in ("SumReduce", "MaxReduce"):
            work = self.op * self.numel(reads[0][0].shape)
        else:
            work = self.op * self.numel(shape)
        return self.launch + self.byte * moved + work

    def in_place(self, v, other, k: int) -> bool:
        """Whether a GEMM reads operand view ``v`` (``other``: the other operand's, both over the
        product domain; ``k``: the summed axis) as a BLAS matrix without a copy: a unit stride on
        ``k``, or no axes of its own (only ``v`` moving), or a unit stride on the innermost axis of
        the largest run of its own axes laid out one after another (the rest become batch axes, as
        in ``plan_gemm``)."""
        if _unit(v.strides[k]):
            return True
        own = [i for i, (d, s, t) in enumerate(zip(v.shape, v.strides, other.strides))
               if i != k and not (is_static(d) and d == 1) and not _zero(s) and _zero(t)]
        best, best_n, run, run_n = [], 0.0, [], 1.0
        for i in own:
            if run and v.strides[run[-1]] != v.shape[i] * v.strides[i]:
                run, run_n = [], 1.0
            run, run_n = run + [i], run_n * self.size(v.shape[i])
            if run_n > best_n:
                best, best_n = run, run_n
        return not best or _unit(v.strides[best[-1]])


def _unit(s) -> bool:
    return is_static(s) and s == 1


def _zero(s) -> bool:
    return is_static(s) and s == 0


@lru_cache(maxsize=4096)
def _eval(d, dim: int) -> float:
    return float(evaluate(d, {v: dim for v in free_vars(d)}))


CPU = CostModel()
