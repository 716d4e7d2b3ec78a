"""Running a compiled kernel on the GPU through the CUDA driver API (``cuda.bindings.driver``).

This is the plain path, for tests and for one-off launches: the device's primary context,
``cuModuleLoadData`` of the cubin (no PTX: the driver need not JIT), one ``cuMemAlloc`` per buffer,
synchronous copies, ``cuLaunchKernel`` with every argument typed (pointers as 64-bit device
addresses, parameters as int64, the C types :mod:`render` declares: an untyped Python number would
be packed with the wrong size), and the outputs copied back into the caller's arrays in place.

Every binding returns ``(CUresult, *outputs)`` and raises nothing on CUDA errors, so each result is
checked (:class:`CudaError` names the call and the error). Without libcuda every call raises
instead, which :func:`device_status` turns into a reason to skip. cuda-python is imported inside
the functions: importing luminal never needs it.
"""

from __future__ import annotations

import hashlib

import numpy as np

from luminal.backends.cuda.render import eval_index, kernel_symbol
from luminal.codegen import ir
from luminal.core import dtype as dt


class CudaError(RuntimeError):
    """A CUDA driver call failed (the message names the call and the driver's error)."""


def _driver():
    try:
        from cuda.bindings import driver
    except ImportError as e:
        raise RuntimeError("the CUDA backend needs cuda-python: pip install 'luminal[cuda]'; "
                           f"import failed: {e}") from e
    return driver


def _check(driver, result, what: str):
    """The outputs of a driver call's ``(err, *outputs)``, or :class:`CudaError`."""
    err = result[0]
    if err != driver.CUresult.CUDA_SUCCESS:
        _, name = driver.cuGetErrorName(err)
        _, text = driver.cuGetErrorString(err)
        dec = (lambda s: s.decode() if isinstance(s, bytes) else str(s))
        raise CudaError(f"{what} failed: {dec(name)} ({dec(text)})")
    out = result[1:]
    return out[0] if len(out) == 1 else out


_STATUS: tuple[bool, str] | None = None


def device_status() -> tuple[bool, str]:
    """(True, a description) when a CUDA device answers, else (False, "no CUDA device: <reason>"):
    cuda-python missing, no libcuda (every driver call raises then), ``cuInit`` failing, or no device.
    Checked once per process."""
    global _STATUS
    if _STATUS is None:
        _STATUS = _probe()
    return _STATUS


def _probe() -> tuple[bool, str]:
    try:
        from cuda.bindings import driver
    except ImportError as e:
        return False, f"no CUDA device: cuda-python is not installed ({e}); pip install 'luminal[cuda]'"
    try:
        (err,) = driver.cuInit(0)
        if err != driver.CUresult.CUDA_SUCCESS:
            return False, f"no CUDA device: cuInit(0) returned {getattr(err, 'name', err)}"
        err, count = driver.cuDeviceGetCount()
        if err != driver.CUresult.CUDA_SUCCESS:
            return False, f"no CUDA device: cuDeviceGetCount returned {getattr(err, 'name', err)}"
        if count < 1:
            return False, "no CUDA device: the driver reports 0 devices"
    except Exception as e:  # noqa: BLE001 - no libcuda raises (DynamicLibNotFoundError), whatever the class
        return False, f"no CUDA device: {type(e).__name__}: {e}"
    return True, f"{count} CUDA device(s)"


def device_arch(ordinal: int = 0) -> str:
    """The device's real architecture, ``sm_<major><minor>`` (what a cubin is compiled for)."""
    driver = _driver()
    _check(driver, driver.cuInit(0), "cuInit")
    dev = _check(driver, driver.cuDeviceGet(ordinal), "cuDeviceGet")
    attr = driver.CUdevice_attribute
    major = _check(driver, driver.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev),
                   "cuDeviceGetAttribute(major)")
    minor = _check(driver, driver.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev),
                   "cuDeviceGetAttribute(minor)")
    return f"sm_{major}{minor}"


_CONTEXT = None
_MODULES: dict = {}  # (sha256 of the cubin, symbol) -> CUfunction (modules stay loaded for the process)


def _context(driver):
    """The primary context of device 0, retained once and made current (each call: another thread may
    have none current)."""
    global _CONTEXT
    if _CONTEXT is None:
        _check(driver, driver.cuInit(0), "cuInit")
        dev = _check(driver, driver.cuDeviceGet(0), "cuDeviceGet")
        _CONTEXT = _check(driver, driver.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")
    _check(driver, driver.cuCtxSetCurrent(_CONTEXT), "cuCtxSetCurrent")
    return _CONTEXT


def _function(driver, data: bytes, symbol: str):
    key = (hashlib.sha256(data).hexdigest(), symbol)
    f = _MODULES.get(key)
    if f is None:
        module = _check(driver, driver.cuModuleLoadData(data), "cuModuleLoadData")
        f = _check(driver, driver.cuModuleGetFunction(module, symbol.encode()), f"cuModuleGetFunction({symbol})")
        _MODULES[key] = f
    return f


def _staging(b: ir.Buf, arr) -> np.ndarray:
    """The bytes the device holds for host array ``arr`` of buffer ``b`` (bfloat16: float32 on the host,
    its 16 high bits on the device; raw uint16 bits are taken as they are)."""
    if not isinstance(arr, np.ndarray):
        raise TypeError(f"buffer {b.name!r}: expected a numpy array, got {type(arr).__name__}")
    if not arr.flags.c_contiguous:
        raise ValueError(f"buffer {b.name!r}: the array must be C-contiguous (outputs are written back in place)")
    if b.dtype is dt.bfloat16:
        if arr.dtype == np.uint16:
            return arr
        if arr.dtype != np.float32:
            raise TypeError(f"buffer {b.name!r} (bfloat16): expected float32 (or uint16 bits), got {arr.dtype}")
        return (dt.round_bf16(arr).view(np.uint32) >> 16).astype(np.uint16)
    want = np.dtype(np.int64) if b.dtype is ir.INDEX else b.dtype.np
    if arr.dtype != want:
        raise TypeError(f"buffer {b.name!r} ({b.dtype.name}): expected {want}, got {arr.dtype}")
    return arr


def _write_back(b: ir.Buf, arr: np.ndarray, staged: np.ndarray):
    if staged is arr:
        return
    arr[...] = (staged.astype(np.uint32) << 16).view(np.float32).reshape(arr.shape)


def launch_shape(kernel: ir.Kernel, params: dict) -> tuple[tuple, tuple]:
    """((grid x, y, z), (block x, y, z)) of ``kernel`` with ``params``: its grid values evaluated."""
    grid = [eval_index(g, params) for g in kernel.grid]
    block = [int(n) for n in kernel.block]
    if not 1 <= len(grid) <= 3 or not 1 <= len(block) <= 3:
        raise ValueError(f"kernel {kernel.name}: grid {grid} / block {block}: 1 to 3 axes")
    grid += [1] * (3 - len(grid))
    block += [1] * (3 - len(block))
    if any(g < 0 for g in grid) or grid[0] >= 2**31 or grid[1] > 65535 or grid[2] > 65535:
        raise ValueError(f"kernel {kernel.name}: grid {tuple(grid)} outside CUDA's limits")
    return tuple(grid), tuple(block)


def launch(cubin, kernel: ir.Kernel, buffers: dict, params: dict) -> None:
    """Run ``kernel`` (compiled to ``cubin``, see :func:`luminal.backends.cuda.nvrtc.compile_cubin`) once
    on device 0 over the host arrays ``buffers`` (name -> C-contiguous numpy array of the buffer's
    storage dtype; bfloat16 as float32) with scalar ``params`` (name -> int). Every buffer is copied
    to the device; those the kernel writes (access "w"/"rw") are copied back into their arrays in place.
    Synchronous: returns when the kernel has finished, raising :class:`CudaError` if it failed."""
    missing = [b.name for b in kernel.buffers if b.name not in buffers]
    if missing:
        raise KeyError(f"kernel {kernel.name}: no array for buffers {missing}")
    grid, block = launch_shape(kernel, params)
    staged = [_staging(b, buffers[b.name]) for b in kernel.buffers]
    values = [int(params[p]) for p in kernel.params]  # KeyError names the parameter
    driver = _driver()
    _context(driver)
    f = _function(driver, cubin.data, kernel_symbol(kernel))
    ptrs = []
    try:
        for host in staged:
            nbytes = max(4, -(-host.nbytes // 4) * 4)  # >0, whole words: 16-bit atomics CAS 32-bit words
            ptr = _check(driver, driver.cuMemAlloc(nbytes), "cuMemAlloc")
            ptrs.append(ptr)
            if host.nbytes:
                _check(driver, driver.cuMemcpyHtoD(ptr, host.ctypes.data, host.nbytes), "cuMemcpyHtoD")
        if min(grid) > 0:
            # kernelParams: an array of pointers, each to one argument of exactly its C type
            holders = [np.array([int(p)], dtype=np.uint64) for p in ptrs]
            holders += [np.array([v], dtype=np.int64) for v in values]
            argv = np.array([h.ctypes.data for h in holders], dtype=np.uint64)
            _check(driver, driver.cuLaunchKernel(f, *grid, *block, 0, driver.CUstream(0),
                                                 argv.ctypes.data if holders else 0, 0),
                   f"cuLaunchKernel({kernel.name})")
            _check(driver, driver.cuCtxSynchronize(), f"kernel {kernel.name}")
        for b, host, ptr in zip(kernel.buffers, staged, ptrs):
            if b.access != "r" and host.nbytes:
                out = host if host is buffers[b.name] else np.empty_like(host)
                _check(driver, driver.cuMemcpyDtoH(out.ctypes.data, ptr, host.nbytes), "cuMemcpyDtoH")
                _write_back(b, buffers[b.name], out)
    finally:
        for ptr in ptrs:
            driver.cuMemFree(ptr)
