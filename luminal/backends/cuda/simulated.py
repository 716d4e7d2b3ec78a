"""A simulated CUDA device in host memory: the device layer (``device.py``) with the driver's rules,
so the runtime that drives a GPU runs unchanged, and strictly checked, in CI.

Device memory is one numpy byte array per allocation at a fake 256-aligned address (addresses are
never reused, so a stale pointer cannot land in a newer allocation); a launch runs the IR kernel on
the emulator over typed views of the bytes its pointer arguments address (each pointer and its
extent must lie inside one live allocation). A library product (``library.LibraryGemm``: cuBLASLt on a
GPU) is computed by numpy from the descriptor cuBLASLt would get (``library.simulate``), its operands
checked to lie inside their buffers.

**Stream order.** Operations are checked when enqueued and run, in order, at ``synchronize``: the
latest moment the real stream may take. So a host that reads a download into pinned memory before
synchronizing reads stale bytes, and one that rewrites a pinned upload's source before synchronizing
sends the new bytes, as on a GPU, and the tests see it. As the driver does, a copy from pageable
memory takes its bytes when enqueued, a copy into pageable memory returns finished (it drains the
stream), and a free waits for the stream. A capture records the operations instead, and a replay
enqueues the records again, reading pinned sources when they run, as a CUDA graph's memcpy node does.

The driver's rules it enforces (``DeviceError``): no allocation, free or synchronize while capturing
(CUDA invalidates the capture), a captured host copy only to or from pinned memory, every pointer
inside a live allocation, a replayed graph's memory still allocated, no capture inside a capture.
"""

from __future__ import annotations

import bisect
import time

import numpy as np

from luminal.backends.cuda import library
from luminal.backends.cuda.device import ArgBlock, Device, DeviceError
from luminal.backends.cuda.driver import launch_shape
from luminal.codegen import emulator, ir

_BASE = 1 << 40  # where fake addresses start (far from 0: a null or small integer is never valid)
ALIGN = 256


def _storage(dtype) -> np.dtype:
    if dtype is ir.INDEX:
        return np.dtype(np.int64)
    return np.dtype(np.uint16) if dtype.name == "bfloat16" else dtype.np


class _Graph:
    """A captured graph: its operations as (method, args) and the allocations they touch."""

    def __init__(self, ops: list, touched: set):
        self.ops, self.touched, self.alive = ops, touched, True


class SimulatedDevice(Device):
    """The device layer over host memory (module docstring). ``launches`` counts kernels run (replays
    included) and ``replays`` graphs replayed: what tests look at to tell the two paths apart."""

    name = "simulated"
    arch = "emulated"  # (what a schedule search's cached winners are keyed by: never a GPU's)

    def __init__(self):
        self._memory: dict[int, np.ndarray] = {}  # address -> bytes of each live allocation
        self._starts: list[int] = []  # sorted addresses of the live allocations (for look-ups)
        self._next = _BASE
        self._pinned: dict[int, np.ndarray] = {}  # data address -> pinned array
        self._capture: list | None = None
        self._touched: set = set()
        self._queue: list = []  # enqueued operations, run at ``synchronize``
        self.launches = 0
        self.replays = 0

    # memory ---------------------------------------------------------------------------------------

    def _no_capture(self, what: str) -> None:
        if self._capture is not None:
            raise DeviceError(f"{what} while capturing a graph (the driver invalidates the capture)")

    def alloc(self, nbytes: int) -> int:
        self._no_capture("cuMemAlloc")
        if nbytes < 0:
            raise DeviceError(f"cuMemAlloc({nbytes}): a negative size")
        ptr = self._next
        self._next += (max(int(nbytes), 1) + ALIGN - 1) // ALIGN * ALIGN + ALIGN  # a gap: no two touch
        self._memory[ptr] = np.empty(max(int(nbytes), 1), np.uint8)
        self._memory[ptr].fill(0xA5)  # fresh device memory holds garbage, never zeros
        self._starts.append(ptr)  # addresses only grow: the list stays sorted
        return ptr

    def free(self, ptr: int) -> None:
        self._no_capture("cuMemFree")
        self._drain()
        if self._memory.pop(ptr, None) is None:
            raise DeviceError(f"cuMemFree({ptr:#x}): not the address of a live allocation")
        self._starts.remove(ptr)

    def alloc_pinned(self, nbytes: int) -> np.ndarray:
        self._no_capture("cuMemHostAlloc")
        host = np.zeros(max(int(nbytes), 1), np.uint8)[:int(nbytes)]
        self._pinned[host.ctypes.data] = host
        return host

    def free_pinned(self, host: np.ndarray) -> None:
        self._no_capture("cuMemFreeHost")
        self._drain()
        if self._pinned.pop(host.ctypes.data, None) is None:
            raise DeviceError("cuMemFreeHost: not a pinned allocation of this device")

    def bytes_at(self, ptr: int, nbytes: int) -> np.ndarray:
        """The live device bytes ``[ptr, ptr + nbytes)`` as a writable view (DeviceError when they do not
        lie inside one live allocation): what a kernel or a copy touches."""
        i = bisect.bisect_right(self._starts, ptr) - 1
        if i >= 0:
            start = self._starts[i]
            mem = self._memory[start]
            if ptr + nbytes <= start + len(mem):
                if self._capture is not None:
                    self._touched.add(start)
                return mem[ptr - start:ptr - start + nbytes]
        raise DeviceError(f"device address {ptr:#x} (+{nbytes} bytes) is not inside a live allocation")

    def _is_pinned(self, host: np.ndarray, what: str) -> bool:
        """Whether ``host`` lies in a pinned allocation (DeviceError if not, while capturing)."""
        base = host
        while isinstance(base.base, np.ndarray):
            base = base.base
        start = base.ctypes.data
        pin = self._pinned.get(start)
        pinned = pin is not None and start <= host.ctypes.data and host.ctypes.data + host.nbytes <= start + pin.nbytes
        if not pinned and self._capture is not None:
            raise DeviceError(f"{what}: a captured host copy must use pinned memory (cuMemHostAlloc)")
        return pinned

    @staticmethod
    def _raw(host: np.ndarray) -> np.ndarray:
        if not host.flags.c_contiguous:
            raise DeviceError("a host copy needs a C-contiguous array")
        return host.reshape(-1).view(np.uint8)

    # the stream -----------------------------------------------------------------------------------

    def _enqueue(self, op, *args) -> None:
        op(*args, check_only=True)  # addresses are checked now, as the driver does
        (self._queue if self._capture is None else self._capture).append((op, args))

    def _drain(self) -> None:
        queue, self._queue = self._queue, []
        for op, args in queue:
            op(*args)

    def upload(self, dst: int, src: np.ndarray) -> None:
        if self._is_pinned(src, "cuMemcpyHtoDAsync"):
            self._enqueue(self._upload, dst, src)
        else:  # pageable: the driver copies the bytes before it returns
            self._enqueue(self._upload, dst, np.array(self._raw(src)))

    def _upload(self, dst, src, check_only=False):
        raw = self._raw(src)
        out = self.bytes_at(dst, raw.nbytes)
        if not check_only:
            out[...] = raw

    def download(self, dst: np.ndarray, src: int) -> None:
        pinned = self._is_pinned(dst, "cuMemcpyDtoHAsync")
        self._enqueue(self._download, dst, src)
        if not pinned:  # pageable: the driver returns when the copy (and the stream before it) is done
            self._drain()

    def _download(self, dst, src, check_only=False):
        raw = self._raw(dst)
        got = self.bytes_at(src, raw.nbytes)
        if not check_only:
            raw[...] = got

    def copy(self, dst: int, src: int, nbytes: int) -> None:
        self._enqueue(self._copy, dst, src, nbytes)

    def _copy(self, dst, src, nbytes, check_only=False):
        a, b = self.bytes_at(dst, nbytes), self.bytes_at(src, nbytes)
        if not check_only:
            a[...] = b.copy() if np.shares_memory(a, b) else b

    def memset(self, ptr: int, byte: int, nbytes: int) -> None:
        self._enqueue(self._memset, ptr, byte, nbytes)

    def _memset(self, ptr, byte, nbytes, check_only=False):
        out = self.bytes_at(ptr, nbytes)
        if not check_only:
            out.fill(byte)

    def gemm_library(self) -> bool:
        return True  # (library.simulate: cuBLASLt's descriptor, computed by numpy)

    def function(self, kernel: ir.Kernel):
        if not kernel.gpu:
            raise DeviceError(f"kernel {kernel.name} is a CPU kernel (no block shape)")
        return kernel

    def launch(self, function, grid: tuple, block: tuple, args: ArgBlock) -> None:
        self._enqueue(self._launch, function, tuple(grid), tuple(block), args)

    def _launch(self, kernel: ir.Kernel, grid, block, args: ArgBlock, check_only=False):
        params = dict(zip(kernel.params, (int(v) for v in args.params)))
        if launch_shape(kernel, params) != (grid, block):
            raise DeviceError(f"kernel {kernel.name}: launched over {grid} x {block}, "
                              f"its IR says {launch_shape(kernel, params)}")
        if isinstance(kernel, library.LibraryGemm):
            call = kernel.call(args.pointers, params)
            for x, extent, ptr in zip((call.b, call.a, call.c), args.extents, args.pointers):
                if x.ptr + x.span(call.batch) > int(ptr) + extent:  # (within its buffer, not just an allocation)
                    raise DeviceError(f"cublasLtMatmul {kernel.name}: an operand reaches past its buffer")
            if not check_only:
                self.launches += 1
            library.simulate(call, self.bytes_at, check_only)
            return
        buffers = {}
        for b, ptr, extent in zip(kernel.buffers, args.pointers, args.extents, strict=True):
            st = _storage(b.dtype)
            if int(ptr) % st.itemsize:
                raise DeviceError(f"kernel {kernel.name}: buffer {b.name} at {int(ptr):#x} is misaligned for {st}")
            buffers[b.name] = self.bytes_at(int(ptr), extent).view(st)
        if check_only:
            return
        self.launches += 1
        emulator.run(kernel, buffers, params)

    def event(self):
        return [None]

    def record(self, event) -> None:
        self._enqueue(self._record, event)

    def _record(self, event, check_only=False):
        if not check_only:
            event[0] = time.perf_counter()

    def elapsed_ms(self, start, end) -> float:
        if start[0] is None or end[0] is None:
            raise DeviceError("cuEventElapsedTime: an event that has not completed")
        return (end[0] - start[0]) * 1e3

    def synchronize(self) -> None:
        self._no_capture("cuStreamSynchronize")
        self._drain()

    # graphs ---------------------------------------------------------------------------------------

    def begin_capture(self) -> None:
        self._no_capture("cuStreamBeginCapture")
        self._capture, self._touched = [], set()

    def end_capture(self) -> _Graph:
        if self._capture is None:
            raise DeviceError("cuStreamEndCapture: the stream is not capturing")
        graph = _Graph(self._capture, self._touched)
        self._capture, self._touched = None, set()
        return graph

    def abort_capture(self) -> None:
        """End a capture that failed half way, dropping what it recorded."""
        self._capture, self._touched = None, set()

    def replay(self, graph: _Graph) -> None:
        self._no_capture("cuGraphLaunch")
        if not graph.alive:
            raise DeviceError("cuGraphLaunch: the graph was destroyed")
        gone = [a for a in graph.touched if a not in self._memory]
        if gone:
            raise DeviceError(f"cuGraphLaunch: the graph uses freed memory at {gone[0]:#x}")
        self.replays += 1
        self._queue.extend(graph.ops)

    def destroy_graph(self, graph: _Graph) -> None:
        graph.alive = False

    @property
    def capturing(self) -> bool:
        return self._capture is not None

    def allocated_bytes(self) -> int:
        """Bytes of every live device allocation (what tests check for leaks)."""
        return sum(len(m) for m in self._memory.values())
