"""Cost models for extraction: a DAG's cost is the sum over its distinct e-nodes of
launch + bytes moved + arithmetic, so a matmul (one GEMM) beats a broadcast product and its sum
(the product is materialised), and an input beats ``x*1``. Symbolic dims count as ``dim``.

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

    def enode(self, op: str, shape, dtype, reads) -> float:
        """``reads``: [(view, source itemsize)] of the e-node's inputs."""
        if op in ("Input", "Constant", "Arange"):
            return 0.0
        out = self.numel(shape) * dtype.itemsize
        moved = out + sum(self.read(v, isz) for v, isz in reads)
        if op == "MatMul":
            work = self.gemm * self.numel(reads[0][0].shape)
        elif op in ("SumReduce", "MaxReduce"):
            work = self.op * self.numel(reads[0][0].shape)
        else:
            work = self.op * self.numel(shape)
        return self.launch + self.byte * moved + work


@lru_cache(maxsize=4096)
def _eval(d, dim: int) -> float:
    return float(evaluate(d, {v: dim for v in free_vars(d)}))


CPU = CostModel()
