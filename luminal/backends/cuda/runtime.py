"""The CUDA runtime's per-device part: one device (``device.py``), the one device copy of each State
that programs on it read, and the frees that wait for a safe moment.

A State (any ``core.residency.Mirrored``) read by a program gets one device copy per device, made at
its first use and kept while the State lives: every program and binding on the device reads that
copy (a train step and a predict program, a prefill and a decode), so nothing travels between them.
The copy is uploaded when the host holds the latest values (a first use, a host write) and read back
when ``State.data`` is read after a device write (``core/residency.py`` keeps the score).

Memory is freed when its owner is collected (a State, a program, a binding dropped from the cache),
which may happen at any allocation, also while a graph is being captured, when the driver forbids
a free: frees are queued and done at the start of the next call (``flush``).

``simulated()`` is the process's simulated device (``backend="cuda-emulated"``); ``gpu()`` device 0
through the driver (``backend="cuda"``). Calls run one at a time per device (``lock``).
"""

from __future__ import annotations

import threading
import weakref

import numpy as np

from luminal.backends.cuda.device import Device
from luminal.codegen import emulator


def storage(dtype) -> np.dtype:
    """The element type of a device buffer of ``dtype`` (bfloat16: its 16-bit patterns)."""
    return np.dtype(np.uint16) if dtype.name == "bfloat16" else dtype.np


def stage(out: np.ndarray, values, dtype) -> None:
    """Host ``values`` (the project's carrier: bfloat16 in float32) written as device storage into
    the flat typed array ``out`` (a part of a staging buffer)."""
    a = np.asarray(values)
    if dtype.name == "bfloat16" or a.dtype != out.dtype:
        out[...] = emulator.device_array(a.reshape(-1), dtype)
    else:
        out[...] = a.reshape(-1)


class DeviceState:
    """The device copy of one State: ``nbytes`` at ``ptr``, released through the runtime."""

    __slots__ = ("runtime", "ptr", "nbytes", "dtype", "__weakref__")

    def __init__(self, runtime: Runtime, nbytes: int, dtype):
        self.runtime, self.nbytes, self.dtype = runtime, nbytes, dtype
        self.ptr = runtime.device.alloc(nbytes)

    def upload(self, host: np.ndarray) -> None:
        staged = np.empty(self.nbytes // storage(self.dtype).itemsize, storage(self.dtype))
        stage(staged, host, self.dtype)
        self.runtime.device.upload(self.ptr, staged)

    def download(self, host: np.ndarray) -> None:
        """The device values into ``host`` in place (synchronous: waits for the stream)."""
        with self.runtime.lock:
            dev = self.runtime.device
            dev.use()
            st = storage(self.dtype)
            if host.flags.c_contiguous and host.dtype == st:
                dev.download(host, self.ptr)
                dev.synchronize()
                return
            staged = np.empty(self.nbytes // st.itemsize, st)
            dev.download(staged, self.ptr)
            dev.synchronize()
            host[...] = emulator.host_array(staged, self.dtype, host.shape)

    def release(self) -> None:
        self.runtime.release(self.ptr)
        self.ptr = 0


class Runtime:
    """One device and what lives on it across programs (module docstring)."""

    def __init__(self, device: Device):
        self.device = device
        self.lock = threading.RLock()
        self._frees: list = []  # (kind, handle) waiting for a moment the driver allows

    def resident(self, state, nbytes: int, dtype, into: np.ndarray | None = None) -> int:
        """The device address of ``state``'s copy (made, or remade for a new size, and uploaded when
        the host holds the latest values), read by a program as ``nbytes`` of ``dtype``. With ``into``
        (pinned staging of the State's storage), the host values are written there instead, for the
        caller to upload in its run and then mark the State uploaded."""
        copy = state.device_copy
        if state.device_current and copy.nbytes == nbytes and copy.runtime is self:
            return copy.ptr  # the steady state: nothing to do
        host = state.host_array()
        if host.size * dtype.itemsize != nbytes or state.dtype.name != dtype.name:
            raise ValueError(f"{state.describe()}: a program reads it as {nbytes} bytes of {dtype.name}")
        if not isinstance(copy, DeviceState) or copy.runtime is not self or copy.nbytes != nbytes:
            copy = DeviceState(self, nbytes, dtype)
            state.mirror(copy)
            weakref.finalize(state, copy.release)
        if into is not None:
            stage(into, host, dtype)
            return copy.ptr
        copy.upload(host)
        state.uploaded()
        return copy.ptr

    def release(self, ptr, kind: str = "memory") -> None:
        """Free ``ptr`` (device memory, a pinned array with kind "pinned", a graph with kind "graph")
        now, or at the next ``flush`` while the device is capturing."""
        if ptr is None or (kind == "memory" and not ptr):
            return
        self._frees.append((kind, ptr))
        if not getattr(self.device, "capturing", False) and self.lock.acquire(blocking=False):
            try:
                self.flush()
            finally:
                self.lock.release()

    def flush(self) -> None:
        """Do the frees that waited (at the start of a call)."""
        if self._frees:
            self.device.use()
        while self._frees:
            kind, handle = self._frees.pop()
            if kind == "memory":
                self.device.free(handle)
            elif kind == "pinned":
                self.device.free_pinned(handle)
            else:
                self.device.destroy_graph(handle)


_SIMULATED: Runtime | None = None
_GPU: Runtime | None = None


def simulated() -> Runtime:
    """The process's simulated device (made at first use)."""
    global _SIMULATED
    if _SIMULATED is None:
        from luminal.backends.cuda.simulated import SimulatedDevice

        _SIMULATED = Runtime(SimulatedDevice())
    return _SIMULATED


def gpu() -> Runtime:
    """Device 0 through the driver (made at first use; a DeviceError says why there is none)."""
    global _GPU
    if _GPU is None:
        from luminal.backends.cuda.driver_device import DriverDevice

        _GPU = Runtime(DriverDevice())
    return _GPU
