"""The CUDA driver API (``cuda.bindings.driver``) at its lowest: whether a device answers
(:func:`device_status`), its architecture, device 0's primary context, modules loaded from cubins
(``cuModuleLoadData``: no PTX, the driver need not JIT) once per process, checked calls, a kernel's
launch shape, and where NVIDIA's other libraries are (:func:`nvidia_library`). The device layer's
driver half (``driver_device.py``) is built on these.

Every binding returns ``(CUresult, *outputs)`` and raises nothing on CUDA errors, so each result is
checked (:class:`CudaError` names the call and the error). Without libcuda every call raises
instead, which :func:`device_status` turns into a reason to skip. cuda-python is imported inside
the functions: importing luminal never needs it.
"""

from __future__ import annotations

import hashlib

from luminal.backends.cuda.render import eval_index
from luminal.codegen import ir


class CudaError(RuntimeError):
    """A CUDA driver call failed (the message names the call and the driver's error)."""


def _driver():
    try:
        from cuda.bindings import driver
    except ImportError as e:
        raise RuntimeError("the CUDA backend needs cuda-python: pip install 'luminal[cuda]'; "
                           f"import failed: {e}") from e
    return driver


def nvidia_library(name: str) -> str:
    """The path of NVIDIA's shared library ``name`` (``"cublasLt"``), loaded by cuda-python's own
    finder (``cuda.pathfinder``: the ``nvidia-*`` wheels, then a CUDA toolkit); an exception saying why
    when there is none."""
    from cuda.pathfinder import load_nvidia_dynamic_lib

    return load_nvidia_dynamic_lib(name).abs_path


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
