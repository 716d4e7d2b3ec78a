"""What the one lowering (``codegen/lowering/``) needs to know about a kind of machine: a ``Target``
record. A target is this record, an op table keyed by the primitive records, a renderer (llvmlite
IR: ``codegen/llvm.py``; CUDA C: ``backends/cuda/render.py``) and a runtime; adding one (ROCm, Metal)
is a new record and renderer, not a copy of the lowering.

The record says how work items map onto the machine and what the lowering may use:

| field          | cpu                           | cuda
|----------------|-------------------------------|---------------------------------------------
| block          | None: work items are the      | 256 threads per block, one work item each,
|                | iterations of a grid of loops | a masked tail past the last item
|                | (threads cut its first axis)  |
| row_threads    | 1                             | 128 threads share one output's row
| warp           | 0 (no lanes exchange values)  | 32 lanes exchanging registers by shuffle
| shared_memory  | no                            | yes: partials, matmul tiles
| atomics        | no: a scatter owns lines      | yes: one atomic add per scattered element
| mma            | none                          | m16n8k16 on float16 / bfloat16
| tile           | -                             | 16x16 tiles of a product's operands
| async_copy     | no                            | yes (sm_80 on): ``cp.async`` into shared memory
|                |                               | and ``ldmatrix`` out of it (``pipelined`` products)
| library_gemm   | yes: BLAS, then an epilogue   | ``CUDA_LIBRARY``: cuBLASLt, then an epilogue,
|                |                               | where the device has it (``CUDA``: own kernels)
| column_blocks  | 16, 8 columns per column sum  | none
| split_*        | rows of 2**16 or more, at most| rows of 16384 or more, at most 64 outputs,
|                | 4 outputs: 16 parts           | shared by 32 blocks

The cost-model fields (``split_*``) are data too, so a search can vary them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from luminal.core import dtype as dt


@dataclass(frozen=True)
class MmaShape:
    """A matrix instruction: ``m x n`` outputs from ``m x k`` and ``k x n`` operands of ``dtypes``."""

    m: int
    n: int
    k: int
    dtypes: tuple


@dataclass(frozen=True)
class Target:
    """How one kind of machine runs a kernel (see the module docstring's table)."""

    name: str
    block: int | None  # threads per block, one work item each; None: work items are loop iterations
    row_threads: int = 1  # threads of a block sharing one output's row (cooperative reductions)
    warp: int = 0  # lanes that exchange registers by shuffle (0: none)
    shared_memory: bool = False
    atomics: bool = False
    mma: tuple = ()  # (MmaShape, ...)
    tile: int = 0  # edge of the shared-memory tiles of a product (0: no tiled products)
    async_copy: bool = False  # cp.async into shared memory and ldmatrix out of it
    library_gemm: bool = False  # products run by a library call, the epilogue a kernel of its own
    column_blocks: tuple = ()  # consecutive columns one work item of a column sum may take
    split_row: int = 0  # a static row at least this long ...
    split_outputs: int = 0  # ... with at most this many outputs is shared by several blocks
    split_parts: int = 0  # blocks per row on that path

    @property
    def threads(self) -> bool:
        """Whether work items are threads of blocks (else iterations of a grid of loops)."""
        return self.block is not None

    def mma_for(self, dtype) -> MmaShape | None:
        """The matrix instruction taking operands of ``dtype``, if the target has one."""
        return next((s for s in self.mma if dtype in s.dtypes), None)


CPU = Target("cpu", block=None, library_gemm=True, column_blocks=(16, 8),
             split_row=1 << 16, split_outputs=4, split_parts=16)

CUDA = Target("cuda", block=256, row_threads=128, warp=32, shared_memory=True, atomics=True,
              mma=(MmaShape(16, 8, 16, (dt.float16, dt.bfloat16)),), tile=16, async_copy=True,
              split_row=16384, split_outputs=64, split_parts=32)
# a device whose runtime has a GEMM library (cuBLASLt; the simulated device's numpy stand-in)
CUDA_LIBRARY = replace(CUDA, library_gemm=True)
