"""The CUDA target: kernel-graph kernels as GPU launches (``launches.py``: the one lowering,
``codegen/lowering``, with the ``CUDA`` target record), the emulator that runs the IR on the CPU
(``codegen/emulator.py``), the CUDA C renderer (``render.py``), the
NVRTC compiler (``nvrtc.py``), and the runtime (``program.py``, ``binding.py``, ``runtime.py``) over
the narrow device layer (``device.py``: the driver in ``driver_device.py``, a simulated device in
``simulated.py``).

Two backends, one runtime: ``backend="cuda"`` runs on device 0 through the driver; ``backend=
"cuda-emulated"`` runs on the simulated device, whose launches the emulator carries out, so CI covers
the runtime (resident States, staging, graphs, error flags) without a GPU. Every GPU kernel the suite
generates is also rendered and compiled with NVRTC by the test suite. Both are always registered;
importing them needs no CUDA package (cuda-python is imported when a device is first used).
"""

from luminal.backends.cuda.device import NoDeviceError
from luminal.backends.cuda.program import DeviceProgram, EmulatedProgram
from luminal.core.backend import Backend, register_backend, zero_inputs
from luminal.core.primitives import PRIMITIVES


class CudaEmulated(Backend):
    name = "cuda-emulated"
    level = "kernels"
    # every primitive: elementwise ones as IR values (codegen.lower.Values), reductions, gather and
    # scatter_add as kernels of their own (codegen/lowering), leaves as arena buffers
    primitives = frozenset(PRIMITIVES)

    def program(self, kernel_graph, plan, search: int = 0):
        """``search`` >= 2 times each kernel's schedules on the simulated device (``schedules.py``:
        the mechanism, whose emulator timings mean nothing for a GPU)."""
        return EmulatedProgram(kernel_graph, plan, search)


class Cuda(Backend):
    """Device 0 through the driver. Without one, compiling for it raises :class:`NoDeviceError` saying
    why, and naming ``cuda-emulated``, which runs the same programs without a GPU."""

    name = "cuda"
    level = "kernels"
    primitives = frozenset(PRIMITIVES)

    def program(self, kernel_graph, plan, search: int = 0):
        """``search`` >= 2 times each kernel's schedules on the device after the first call and keeps
        the fastest (``schedules.py``); ``search`` > 0 takes cached winners."""
        try:
            return DeviceProgram(kernel_graph, plan, search)
        except NoDeviceError as e:
            why = str(e).rstrip(".")
            raise NoDeviceError(f"backend 'cuda' needs a CUDA device: {why}; backend='cuda-emulated' runs the same "
                                "programs (the same runtime, on a simulated device) without one") from None

    def time(self, kernel_graph, plan) -> float:
        """Median seconds of five replays of the candidate's run on the device (CUDA events around
        each), on zero-filled inputs with symbolic dims bound to 16, after the two calls that lay the
        binding out and capture its graph."""
        env = dict.fromkeys(kernel_graph.dims, 16)
        prog = self.program(kernel_graph, plan)
        arrays = zero_inputs(kernel_graph, env)
        for _ in range(2):
            prog(arrays, env)
        times = next(iter(prog._bindings.values())).time_run(5)
        return sorted(times)[len(times) // 2]


register_backend(CudaEmulated())
register_backend(Cuda())

__all__ = ["Cuda", "CudaEmulated", "NoDeviceError"]
