"""The CUDA target: the GPU lowering of a kernel graph into the kernel IR (``lower.py``), the
emulator that runs that IR on the CPU (``emulator.py``), the CUDA C renderer (``render.py``), the
NVRTC compiler (``nvrtc.py``) and the driver launcher (``driver.py``).

``backend="cuda-emulated"`` is the whole pipeline but the driver: the program's kernels lowered for
the GPU and run by the emulator over a host copy of the device arena. Every GPU kernel it generates
is also rendered and compiled with NVRTC by the test suite, so CI proves the CUDA path without a GPU.
"""

from luminal.backends.cuda.program import EmulatedProgram
from luminal.core.backend import Backend, register_backend
from luminal.core.primitives import PRIMITIVES


class CudaEmulated(Backend):
    name = "cuda-emulated"
    level = "kernels"
    # every primitive: elementwise ones as IR values (codegen.lower.Values), reductions, gather and
    # scatter_add as kernels of their own (lower.py), leaves as arena buffers
    primitives = frozenset(PRIMITIVES)

    def program(self, kernel_graph, plan, search: int = 0):
        return EmulatedProgram(kernel_graph, plan)  # (nothing of its own to time: ``search`` is ignored)


register_backend(CudaEmulated())

__all__ = ["CudaEmulated"]
