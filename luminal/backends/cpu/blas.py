"""numpy's OpenBLAS thread count, which the compiled CPU backend takes over while a program runs.

The backend runs its own threads (``parallel.py``), matmuls included, each thread calling BLAS on its
share of the rows. BLAS must then run on one thread: OpenBLAS's own workers busy-wait for a while
after every call, and on a machine with as many cores as threads they would hold the cores the
backend's threads need (measured: no speedup at all from splitting the non-matmul calls while
OpenBLAS had two threads). So a run that uses the backend's threads sets OpenBLAS to one thread and
puts the caller's count back at the end; the backend uses as many threads as OpenBLAS had. A program
whose kernels are too small to cut (``plan.OWN_THREADS_NS``) leaves OpenBLAS its own threads (timed
against the backend's at its first call where some kernel is worth cutting: ``Schedule.undecided``).

Only numpy's bundled OpenBLAS (the PyPI wheels) is driven; with any other BLAS the backend runs on
one thread of its own unless ``LUMINAL_NUM_THREADS`` asks for more.
"""

from __future__ import annotations

import ctypes
import functools
import glob
import os
import threading

import numpy as np

_NAMES = ("scipy_openblas_{}_num_threads64_", "scipy_openblas_{}_num_threads", "openblas_{}_num_threads64_",
          "openblas_{}_num_threads")


def _libraries():
    """numpy's bundled OpenBLAS libraries (the PyPI wheels), loaded."""
    base = os.path.dirname(np.__file__)
    for path in glob.glob(os.path.join(base, "..", "numpy.libs", "*openblas*")) + \
            glob.glob(os.path.join(base, ".dylibs", "*openblas*")):
        try:
            yield ctypes.CDLL(path)
        except OSError:
            continue


def _functions():
    """``(get, set)`` of numpy's bundled OpenBLAS, or None."""
    for lib in _libraries():
        for name in _NAMES:
            get, put = getattr(lib, name.format("get"), None), getattr(lib, name.format("set"), None)
            if get is not None and put is not None:
                put.argtypes, put.restype = [ctypes.c_int], None
                return get, put
    return None


_GEMMS = {np.dtype(np.float32): ("scipy_cblas_sgemm64_", "cblas_sgemm64_"),
          np.dtype(np.float64): ("scipy_cblas_dgemm64_", "cblas_dgemm64_")}
_GEMVS = {np.dtype(np.float32): ("scipy_cblas_sgemv64_", "cblas_sgemv64_"),
          np.dtype(np.float64): ("scipy_cblas_dgemv64_", "cblas_dgemv64_")}


@functools.cache
def gemms() -> dict:
    """``{numpy dtype: address}`` of the ``cblas_?gemm`` functions (64-bit integers) of numpy's bundled
    OpenBLAS: the GEMMs ``np.matmul`` runs, for the generated driver to call by their C symbols
    (``driver.py``). Empty when numpy's BLAS is another library (its matmuls then stay numpy calls)."""
    return _symbols(_GEMMS)


@functools.cache
def gemvs() -> dict:
    """``{numpy dtype: address}`` of the ``cblas_?gemv`` functions, as :func:`gemms`: a product with one
    row or one column is a matrix-vector product, which OpenBLAS's GEMM runs several times slower than
    its GEMV (a 1 x 2048 by 2048 x 5632 product: 16 ms against 2.3 ms, on a 2-core Xeon), and which
    ``np.matmul`` runs as a GEMV too."""
    return _symbols(_GEMVS)


def _symbols(names_of: dict) -> dict:
    found = {}
    for lib in _libraries():
        for dtype, names in names_of.items():
            f = next((getattr(lib, n) for n in names if hasattr(lib, n)), None)
            if f is not None and dtype not in found:
                found[dtype] = ctypes.cast(f, ctypes.c_void_p).value
    return found


_lock = threading.Lock()
_state = {"found": None, "depth": 0, "saved": None}


def _lib():
    if _state["found"] is None:
        _state["found"] = _functions() or ()
    return _state["found"] or None


def threads() -> int | None:
    """OpenBLAS's thread count outside of runs, or None when numpy's BLAS is not OpenBLAS (or not found)."""
    lib = _lib()
    if lib is None:
        return None
    with _lock:
        return _state["saved"] if _state["depth"] else int(lib[0]())


class single_threaded:
    """``with single_threaded():`` OpenBLAS runs on one thread; the caller's count comes back after
    the outermost one exits (runs may nest or overlap from several Python threads)."""

    def __enter__(self):
        lib = _lib()
        if lib is not None:
            with _lock:
                if _state["depth"] == 0:
                    _state["saved"] = int(lib[0]())
                    lib[1](1)
                _state["depth"] += 1
        return self

    def __exit__(self, *exc):
        lib = _lib()
        if lib is not None:
            with _lock:
                _state["depth"] -= 1
                if _state["depth"] == 0:
                    lib[1](_state["saved"])
        return False
