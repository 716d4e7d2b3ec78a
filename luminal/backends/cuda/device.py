"""The narrow device layer: every operation the CUDA runtime asks of a device, and nothing more.

Two implementations: :class:`~luminal.backends.cuda.driver_device.DriverDevice` (the real GPU through
``cuda.bindings.driver``: the only code of luminal's runtime that calls cuda-python) and
:class:`~luminal.backends.cuda.simulated.SimulatedDevice` (host memory at fake device addresses, a
launch run by the emulator, the driver's rules enforced), so the runtime above it is the same code on
a GPU and in CI.

The layer speaks in the driver's terms: device memory is an integer address, pinned host memory a
numpy byte array, every operation is enqueued on the device's one stream in order (copies and
launches are asynchronous: the host reads what a copy brought back only after :meth:`Device.synchronize`),
and a stream capture turns the operations enqueued between :meth:`Device.begin_capture` and
:meth:`Device.end_capture` into a graph that :meth:`Device.replay` runs again (over the same
addresses; a captured host copy reads its pinned source when the graph runs, not when it was captured).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from luminal.codegen import ir


class DeviceError(RuntimeError):
    """A device operation failed or broke the driver's rules (the message names the call and why)."""


class NoDeviceError(DeviceError):
    """There is no CUDA device to run on (the message says why: no cuda-python, no driver, no GPU)."""


@dataclass(frozen=True, eq=False)
class ArgBlock:
    """One launch's arguments, packed once per launch and binding: the kernel's buffer pointers (device
    addresses, in ``kernel.buffers`` order) and its INDEX parameters (in ``kernel.params`` order), each
    stored in the C type the kernel declares (pointers as 64-bit addresses, parameters as int64) with
    ``argv`` the array of their addresses that ``cuLaunchKernel`` takes. ``extents`` holds each buffer's
    bytes: the simulated device checks every access against them, the driver ignores them."""

    pointers: np.ndarray  # uint64, one per buffer
    params: np.ndarray  # int64, one per parameter
    extents: tuple  # bytes of each buffer
    argv: np.ndarray  # uint64: the address of each argument above, buffers first

    @staticmethod
    def pack(kernel: ir.Kernel, pointers, extents, params: dict) -> ArgBlock:
        """The argument block of ``kernel`` over buffers at ``pointers`` (``extents`` bytes each) with
        parameter values ``params`` (name -> int; a missing one is a KeyError naming it)."""
        if len(pointers) != len(kernel.buffers) or len(extents) != len(kernel.buffers):
            raise ValueError(f"kernel {kernel.name}: {len(kernel.buffers)} buffers, {len(pointers)} pointers")
        ptrs = np.array([int(p) for p in pointers], np.uint64)
        values = np.array([int(params[p]) for p in kernel.params], np.int64)
        argv = np.array([ptrs.ctypes.data + 8 * i for i in range(len(ptrs))]
                        + [values.ctypes.data + 8 * i for i in range(len(values))], np.uint64)
        return ArgBlock(ptrs, values, tuple(int(n) for n in extents), argv)


class Device:
    """The operations of the layer (module docstring); each implementation documents its own costs.

    ``function(kernel)`` loads the code of an IR kernel: the driver compiles it with NVRTC (through the
    disk cache) and loads the cubin's symbol once per process; the simulator keeps the IR, which the
    emulator runs. Handles are opaque to the runtime."""

    name: str = ""

    def use(self) -> None:
        """Make the device current for the calling thread (the driver's context is per thread): at the
        start of every call, download and free."""

    def gemm_library(self) -> bool:
        """Whether the device runs library products (``library.LibraryGemm``: cuBLASLt)."""
        return False

    def function(self, kernel: ir.Kernel):
        raise NotImplementedError

    def alloc(self, nbytes: int) -> int:
        """A device allocation of ``nbytes`` (at least 1), 256-byte aligned: its address."""
        raise NotImplementedError

    def free(self, ptr: int) -> None:
        raise NotImplementedError

    def alloc_pinned(self, nbytes: int) -> np.ndarray:
        """Page-locked host memory of ``nbytes`` as a uint8 array (the source of captured uploads)."""
        raise NotImplementedError

    def free_pinned(self, host: np.ndarray) -> None:
        raise NotImplementedError

    def upload(self, dst: int, src: np.ndarray) -> None:
        """Enqueue a copy of the bytes of C-contiguous ``src`` to device address ``dst``."""
        raise NotImplementedError

    def download(self, dst: np.ndarray, src: int) -> None:
        """Enqueue a copy of ``dst.nbytes`` bytes at device address ``src`` into C-contiguous ``dst``."""
        raise NotImplementedError

    def copy(self, dst: int, src: int, nbytes: int) -> None:
        """Enqueue a device-to-device copy."""
        raise NotImplementedError

    def memset(self, ptr: int, byte: int, nbytes: int) -> None:
        raise NotImplementedError

    def launch(self, function, grid: tuple, block: tuple, args: ArgBlock) -> None:
        """Enqueue ``function`` over ``grid`` blocks of ``block`` threads with the packed ``args``."""
        raise NotImplementedError

    def event(self):
        """A new event (for timing: :meth:`record`, then :meth:`elapsed_ms`)."""
        raise NotImplementedError

    def record(self, event) -> None:
        raise NotImplementedError

    def elapsed_ms(self, start, end) -> float:
        """Milliseconds between two recorded events (both complete: after a synchronize)."""
        raise NotImplementedError

    def synchronize(self) -> None:
        """Wait until everything enqueued has finished (failures surface here as DeviceError)."""
        raise NotImplementedError

    def begin_capture(self) -> None:
        raise NotImplementedError

    def end_capture(self):
        """The graph of the operations enqueued since :meth:`begin_capture`, instantiated (executable)."""
        raise NotImplementedError

    def abort_capture(self) -> None:
        """End a capture that failed half way, dropping what it recorded (the stream usable again)."""
        raise NotImplementedError

    def replay(self, graph) -> None:
        """Enqueue one run of an instantiated graph."""
        raise NotImplementedError

    def destroy_graph(self, graph) -> None:
        raise NotImplementedError
