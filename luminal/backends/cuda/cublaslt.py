"""cuBLASLt through ctypes: the library products (``library.py``) on a real GPU.

Why ctypes over the library itself: cuda-python binds the driver and NVRTC but not cuBLAS, and
NVIDIA's Python bindings of cuBLASLt (nvmath-python) would add a large package for the dozen calls
used here. The shared library comes from NVIDIA's ``nvidia-cublas`` wheel (the ``cuda`` extra) or a
CUDA toolkit, found by ``cuda.pathfinder`` (cuda-python's own finder: ``driver.nvidia_library``), so
nothing is loaded by path guessing. Without it the device has no library (:func:`load` is None) and
products run as the project's own kernels.

One handle and one workspace per device; per call geometry (``GemmCall.key``) and operand
alignment one plan: the matmul descriptor (``CUBLAS_COMPUTE_32F``, float32 scale, the transposes),
the three matrix layouts (type, rows, columns, leading dimension, batch count and stride) and the
algorithm cuBLASLt's heuristic picks for that workspace and for operands aligned as these are (a
view's offset or a batch stride may leave a pointer aligned to less than the 256 bytes the
heuristic assumes by default, and an algorithm that needs more fails or faults), made once and
reused by every launch, so a captured graph replays the same call. At most ``MAX_PLANS`` are kept
(the least recently used destroyed: a decode loop makes a new geometry per length). Scalars are host
pointers (alpha 1, beta 0), read when the call is enqueued or captured. The enum values are
cublasLt.h's.
"""

from __future__ import annotations

import ctypes
from collections import OrderedDict

from luminal.backends.cuda import driver
from luminal.backends.cuda.device import DeviceError
from luminal.backends.cuda.library import GemmCall, Matrix
from luminal.core import dtype as dt

WORKSPACE_BYTES = 32 << 20  # cuBLASLt's scratch (what its heuristic may use; Hopper's kernels want MBs)
_CUDA_TYPE = {dt.float16: 2, dt.float32: 0, dt.bfloat16: 14}  # cudaDataType_t
_COMPUTE_32F = 68  # cublasComputeType_t CUBLAS_COMPUTE_32F
_DESC_TRANSA, _DESC_TRANSB = 3, 4  # cublasLtMatmulDescAttributes_t
_LAYOUT_BATCH_COUNT, _LAYOUT_BATCH_STRIDE = 5, 6  # cublasLtMatrixLayoutAttribute_t
_PREF_MAX_WORKSPACE = 1  # cublasLtMatmulPreferenceAttributes_t
_PREF_MIN_ALIGNMENT = (5, 6, 7, 8)  # ... A, B, C, D bytes (uint32)
MAX_PLANS = 256
_OP_N, _OP_T = 0, 1


def alignment(x: Matrix, batch: int) -> int:
    """The bytes every one of ``x``'s matrices is aligned to (its address, and each batch's after it),
    at most 256: what cuBLASLt's heuristic must be told."""
    n = x.ptr | 256
    if batch > 1 and x.batch_stride:
        n |= x.batch_stride * x.dtype.itemsize
    return n & -n


class _Heuristic(ctypes.Structure):
    """cublasLtMatmulHeuristicResult_t."""

    _fields_ = [("algo", ctypes.c_uint64 * 8), ("workspaceSize", ctypes.c_size_t), ("state", ctypes.c_int),
                ("wavesCount", ctypes.c_float), ("reserved", ctypes.c_int * 4)]


_lib_state: dict = {}


def load():
    """The cuBLASLt library (a ctypes CDLL), or None with the reason in ``why()``."""
    if "lib" not in _lib_state:
        try:
            _lib_state["lib"] = _declare(ctypes.CDLL(driver.nvidia_library("cublasLt")))
        except Exception as e:  # (not installed, or not loadable here: the own kernels run instead)
            _lib_state["lib"], _lib_state["why"] = None, f"{type(e).__name__}: {e}"
    return _lib_state["lib"]


def _declare(lib):
    """``lib`` with the argument types of the calls used (ctypes would pass a Python int as a 32-bit
    int where the C function takes a size_t)."""
    p, i, size, u64, i64 = ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t, ctypes.c_uint64, ctypes.c_int64
    signatures = {
        "cublasLtCreate": (p,),
        "cublasLtMatmulDescCreate": (p, i, i),
        "cublasLtMatmulDescSetAttribute": (p, i, p, size),
        "cublasLtMatrixLayoutCreate": (p, i, u64, u64, i64),
        "cublasLtMatrixLayoutSetAttribute": (p, i, p, size),
        "cublasLtMatrixLayoutGetAttribute": (p, i, p, size, p),
        "cublasLtMatmulDescGetAttribute": (p, i, p, size, p),
        "cublasLtMatmulPreferenceCreate": (p,),
        "cublasLtMatmulPreferenceSetAttribute": (p, i, p, size),
        "cublasLtMatmulPreferenceDestroy": (p,),
        "cublasLtMatmulDescDestroy": (p,),
        "cublasLtMatrixLayoutDestroy": (p,),
        "cublasLtMatmulAlgoGetHeuristic": (p, p, p, p, p, p, p, i, p, p),
        "cublasLtMatmul": (p, p, p, p, p, p, p, p, p, p, p, p, p, p, size, p),
    }
    for name, args in signatures.items():
        f = getattr(lib, name)
        f.argtypes, f.restype = list(args), ctypes.c_int
    return lib


def why() -> str:
    load()
    return _lib_state.get("why", "")


def _check(status: int, what: str) -> None:
    if status != 0:
        raise DeviceError(f"{what} failed: cublasStatus_t {status}")


def descriptors(lib, call: GemmCall) -> tuple:
    """``(matmul descriptor, A, B and C layouts)`` of ``call`` (host objects: no device involved)."""
    desc = ctypes.c_void_p()
    _check(lib.cublasLtMatmulDescCreate(ctypes.addressof(desc), _COMPUTE_32F, _CUDA_TYPE[dt.float32]),
           "cublasLtMatmulDescCreate")
    for attr, trans in ((_DESC_TRANSA, call.transa), (_DESC_TRANSB, call.transb)):
        op = ctypes.c_int32(_OP_T if trans else _OP_N)
        _check(lib.cublasLtMatmulDescSetAttribute(desc, attr, ctypes.addressof(op), ctypes.sizeof(op)),
               "cublasLtMatmulDescSetAttribute")
    layouts = []
    for x in (call.a, call.b, call.c):
        layout = ctypes.c_void_p()
        _check(lib.cublasLtMatrixLayoutCreate(ctypes.addressof(layout), _CUDA_TYPE[x.dtype], x.rows, x.cols, x.ld),
               "cublasLtMatrixLayoutCreate")
        if call.batch > 1:
            count, stride = ctypes.c_int32(call.batch), ctypes.c_int64(x.batch_stride)
            for attr, v in ((_LAYOUT_BATCH_COUNT, count), (_LAYOUT_BATCH_STRIDE, stride)):
                _check(lib.cublasLtMatrixLayoutSetAttribute(layout, attr, ctypes.addressof(v), ctypes.sizeof(v)),
                       "cublasLtMatrixLayoutSetAttribute")
        layouts.append(layout)
    return (desc, *layouts)


def preference(lib, aligned: tuple):
    """The heuristic's search preference: the workspace it may use, and the alignment (bytes) of A,
    B and C (D is C)."""
    pref = ctypes.c_void_p()
    _check(lib.cublasLtMatmulPreferenceCreate(ctypes.addressof(pref)), "cublasLtMatmulPreferenceCreate")
    settings = [(_PREF_MAX_WORKSPACE, ctypes.c_uint64(WORKSPACE_BYTES))]
    settings += [(attr, ctypes.c_uint32(n)) for attr, n in zip(_PREF_MIN_ALIGNMENT, (*aligned, aligned[2]))]
    for attr, v in settings:
        _check(lib.cublasLtMatmulPreferenceSetAttribute(pref, attr, ctypes.addressof(v), ctypes.sizeof(v)),
               "cublasLtMatmulPreferenceSetAttribute")
    return pref


class CublasLt:
    """cuBLASLt on one device: a handle, a workspace (``alloc``: the device's allocator) and the plans."""

    def __init__(self, alloc):
        lib = load()
        if lib is None:
            raise DeviceError(f"cuBLASLt is not available ({why()})")
        self.lib = lib
        handle = ctypes.c_void_p()
        _check(lib.cublasLtCreate(ctypes.addressof(handle)), "cublasLtCreate")
        self.handle = handle
        self.workspace = alloc(WORKSPACE_BYTES)
        self._plans: OrderedDict = OrderedDict()
        self._alpha, self._beta = ctypes.c_float(1.0), ctypes.c_float(0.0)

    def matmul(self, call: GemmCall, stream) -> None:
        """Enqueue ``call`` on ``stream`` (a ``CUstream``)."""
        if call.batch == 0 or call.m == 0 or call.n == 0:
            return
        desc, la, lb, lc, algo = self._plan(call)
        addr = ctypes.addressof
        _check(self.lib.cublasLtMatmul(
            self.handle, desc, addr(self._alpha), call.a.ptr, la, call.b.ptr, lb, addr(self._beta), call.c.ptr, lc,
            call.c.ptr, lc, addr(algo), self.workspace, WORKSPACE_BYTES, int(stream)), f"cublasLtMatmul ({call.name})")

    def _plan(self, call: GemmCall):
        aligned = tuple(alignment(x, call.batch) for x in (call.a, call.b, call.c))
        key = (call.key(), aligned)
        plan = self._plans.get(key)
        if plan is None:
            plan = self._plans[key] = self._make(call, aligned)
            if len(self._plans) > MAX_PLANS:
                self._destroy(self._plans.popitem(last=False)[1])
        else:
            self._plans.move_to_end(key)
        return plan

    def _destroy(self, plan) -> None:
        desc, la, lb, lc, _ = plan
        self.lib.cublasLtMatmulDescDestroy(desc)
        for layout in (la, lb, lc):
            self.lib.cublasLtMatrixLayoutDestroy(layout)

    def _make(self, call: GemmCall, aligned: tuple):
        lib = self.lib
        desc, la, lb, lc = descriptors(lib, call)
        pref = preference(lib, aligned)
        result, found = _Heuristic(), ctypes.c_int(0)
        asked = lib.cublasLtMatmulAlgoGetHeuristic(self.handle, desc, la, lb, lc, lc, pref, 1, ctypes.addressof(result),
                                                   ctypes.addressof(found))
        _check(asked, f"cublasLtMatmulAlgoGetHeuristic ({call.name})")
        lib.cublasLtMatmulPreferenceDestroy(pref)
        if found.value < 1:
            raise DeviceError(f"cuBLASLt has no algorithm for {call.name} ({call.key()})")
        algo = (ctypes.c_uint64 * 8)(*result.algo)
        return desc, la, lb, lc, algo
