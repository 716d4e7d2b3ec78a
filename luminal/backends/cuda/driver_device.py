"""The device layer (``device.py``) on a real GPU, through ``cuda.bindings.driver``: device 0's primary
context, one non-blocking stream, modules loaded from cubins (NVRTC through the disk cache, see
``nvrtc.py``) once per process, ``cuMemAlloc`` / ``cuMemHostAlloc`` memory, async copies and memsets
on the stream, events, and stream capture into CUDA graphs.

Every call is checked (``driver._check``: a :class:`~luminal.backends.cuda.driver.CudaError` naming the
call, the driver's error name and its message). cuda-python is imported when a device is made, never
by importing luminal. This is the only runtime code that calls the driver; the simulated device
(``simulated.py``) stands in for it without a GPU, so everything above it is tested in CI.
"""

from __future__ import annotations

import ctypes

import numpy as np

from luminal.backends.cuda import driver as drv
from luminal.backends.cuda.device import ArgBlock, Device, DeviceError, NoDeviceError


class DriverDevice(Device):
    """Device 0 through the driver API (module docstring)."""

    name = "cuda"

    def __init__(self):
        ok, why = drv.device_status()
        if not ok:
            raise NoDeviceError(why)
        self.d = drv._driver()
        drv._context(self.d)
        self.arch = drv.device_arch(0)
        flags = self.d.CUstream_flags.CU_STREAM_NON_BLOCKING
        self.stream = self._call(self.d.cuStreamCreate(flags), "cuStreamCreate")
        self._pinned: dict[int, int] = {}  # data address of a pinned array -> its cuMemHostAlloc pointer
        self.capturing = False
        self._lt = None  # cuBLASLt on this device (cublaslt.py), made when a program first asks
        self.library_error: str | None = None  # why there is none, once that was found

    def _call(self, result, what: str):
        return drv._check(self.d, result, what)

    def use(self) -> None:
        drv._context(self.d)

    def gemm_library(self) -> bool:
        """Whether cuBLASLt runs here: the library loads and its handle and workspace are made (now,
        outside any capture; a failure leaves the products to the own kernels, ``library_error``
        saying why)."""
        if self._lt is None and self.library_error is None:
            from luminal.backends.cuda.cublaslt import CublasLt

            try:
                self.use()  # (the workspace is device memory: the context must be current)
                self._lt = CublasLt(self.alloc)
            except (DeviceError, drv.CudaError) as e:
                self.library_error = str(e)
        return self._lt is not None

    def function(self, kernel):
        from luminal.backends.cuda import library, nvrtc, render

        if isinstance(kernel, library.LibraryGemm):
            return kernel  # (cuBLASLt is the code: ``launch`` calls it)

        cubin = nvrtc.compile_cubin(render.render(kernel), render.kernel_symbol(kernel), self.arch)
        return drv._function(self.d, cubin.data, render.kernel_symbol(kernel))

    def alloc(self, nbytes: int) -> int:
        return int(self._call(self.d.cuMemAlloc(max(int(nbytes), 1)), f"cuMemAlloc({nbytes})"))

    def free(self, ptr: int) -> None:
        self._call(self.d.cuMemFree(self.d.CUdeviceptr(ptr)), "cuMemFree")

    def alloc_pinned(self, nbytes: int) -> np.ndarray:
        ptr = int(self._call(self.d.cuMemHostAlloc(max(int(nbytes), 1), 0), f"cuMemHostAlloc({nbytes})"))
        host = np.ctypeslib.as_array((ctypes.c_uint8 * max(int(nbytes), 1)).from_address(ptr))[:int(nbytes)]
        self._pinned[host.ctypes.data] = ptr
        return host

    def free_pinned(self, host: np.ndarray) -> None:
        ptr = self._pinned.pop(host.ctypes.data, None)
        if ptr is None:
            raise DeviceError("cuMemFreeHost: not a pinned allocation of this device")
        self._call(self.d.cuMemFreeHost(ptr), "cuMemFreeHost")

    def upload(self, dst: int, src: np.ndarray) -> None:
        if not src.flags.c_contiguous:
            raise DeviceError("cuMemcpyHtoDAsync: the host array must be C-contiguous")
        if src.nbytes:
            self._call(self.d.cuMemcpyHtoDAsync(self.d.CUdeviceptr(dst), src.ctypes.data, src.nbytes, self.stream),
                       "cuMemcpyHtoDAsync")

    def download(self, dst: np.ndarray, src: int) -> None:
        if not dst.flags.c_contiguous:
            raise DeviceError("cuMemcpyDtoHAsync: the host array must be C-contiguous")
        if dst.nbytes:
            self._call(self.d.cuMemcpyDtoHAsync(dst.ctypes.data, self.d.CUdeviceptr(src), dst.nbytes, self.stream),
                       "cuMemcpyDtoHAsync")

    def copy(self, dst: int, src: int, nbytes: int) -> None:
        if nbytes:
            self._call(self.d.cuMemcpyDtoDAsync(self.d.CUdeviceptr(dst), self.d.CUdeviceptr(src), nbytes,
                                                self.stream), "cuMemcpyDtoDAsync")

    def memset(self, ptr: int, byte: int, nbytes: int) -> None:
        if nbytes:
            self._call(self.d.cuMemsetD8Async(self.d.CUdeviceptr(ptr), byte, nbytes, self.stream), "cuMemsetD8Async")

    def launch(self, function, grid: tuple, block: tuple, args: ArgBlock) -> None:
        from luminal.backends.cuda import library

        if isinstance(function, library.LibraryGemm):
            if not self.gemm_library():
                raise DeviceError(f"{function.name}: a library product, but no cuBLASLt ({self.library_error})")
            params = dict(zip(function.params, (int(v) for v in args.params)))
            call = function.call(args.pointers, params)
            if call.k == 0:  # an empty sum: zeros (C is stored whole, row-major: one range of bytes)
                self.memset(call.c.ptr, 0, call.c.span(call.batch))
            else:
                self._lt.matmul(call, self.stream)
            return
        if min(grid) == 0:
            return  # an empty grid is an error to the driver and nothing to do
        self._call(self.d.cuLaunchKernel(function, *grid, *block, 0, self.stream,
                                         args.argv.ctypes.data if len(args.argv) else 0, 0), "cuLaunchKernel")

    def event(self):
        return self._call(self.d.cuEventCreate(self.d.CUevent_flags.CU_EVENT_DEFAULT), "cuEventCreate")

    def record(self, event) -> None:
        self._call(self.d.cuEventRecord(event, self.stream), "cuEventRecord")

    def elapsed_ms(self, start, end) -> float:
        return float(self._call(self.d.cuEventElapsedTime(start, end), "cuEventElapsedTime"))

    def synchronize(self) -> None:
        self._call(self.d.cuStreamSynchronize(self.stream), "cuStreamSynchronize")

    def begin_capture(self) -> None:
        mode = self.d.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
        self._call(self.d.cuStreamBeginCapture(self.stream, mode), "cuStreamBeginCapture")
        self.capturing = True

    def end_capture(self):
        self.capturing = False
        graph = self._call(self.d.cuStreamEndCapture(self.stream), "cuStreamEndCapture")
        try:
            return self._call(self.d.cuGraphInstantiate(graph, 0), "cuGraphInstantiate")
        finally:
            self._call(self.d.cuGraphDestroy(graph), "cuGraphDestroy")

    def abort_capture(self) -> None:
        if self.capturing:
            self.capturing = False
            result = self.d.cuStreamEndCapture(self.stream)  # an invalidated capture ends with an error: dropped
            if result[0] == self.d.CUresult.CUDA_SUCCESS and result[1] is not None:
                self.d.cuGraphDestroy(result[1])

    def replay(self, graph) -> None:
        self._call(self.d.cuGraphLaunch(graph, self.stream), "cuGraphLaunch")

    def destroy_graph(self, graph) -> None:
        self._call(self.d.cuGraphExecDestroy(graph), "cuGraphExecDestroy")
