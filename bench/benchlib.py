"""What ``cpu_train.py`` and ``cpu_infer.py`` share: the machine header (CPU, cores, BLAS, versions,
threads, load), the machine's measured sgemm rate and copy bandwidth (for the floors), and the timing
loop that alternates the sides in blocks.

Timing method (``alternate``): the sides take turns in ``rounds`` blocks; before each block a pause lets
the previous side's thread pool stop spinning (OpenBLAS and OpenMP workers busy-wait after a call: on 2
cores, alternating call by call timed each side against the other's spinning threads). The pause must
outlast the longest spin: torch's OpenMP workers spun about 0.25 s after its last call on a 2-vCPU EPYC
(the MNIST MLP step on luminal's threads took 1.7-2.9 ms for the first 55 ms after torch's block and a
0.2 s pause, 1.0 ms after a 1 s pause), OpenBLAS's about 0.1 s (2**28 cycles): the benches pause 0.5 s.
Then warm-up calls, then the timed samples. A sample is ``inner`` calls timed together, divided by ``inner``, so a
call of a few microseconds is not measured at the resolution of the clock. Load from other processes
on a shared machine hits every side alike; the spread (10th-90th percentile) shows how much there was.
"""

from __future__ import annotations

import os
import platform
import re
import time
from pathlib import Path

import numpy as np
import torch

from luminal.backends.cpu import blas


def cpu_model() -> str:
    """The CPU's model name, with its family/model numbers and widest vectors where /proc/cpuinfo has
    them: a VM may name only the vendor ("AMD EPYC"), and an AVX-512 and an AVX2 EPYC time the same
    code differently (the generated GEMM's microkernel, BLAS's kernels)."""
    try:
        info = {}
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            info.setdefault(key.strip(), value.strip())
    except OSError:
        return platform.processor() or platform.machine()
    flags = info.get("flags", "").split()
    vectors = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "AVX" if "avx" in flags else None
    detail = [f"family {info['cpu family']} model {info['model']}"] if "cpu family" in info and "model" in info else []
    detail += [vectors] if vectors else []
    name = info.get("model name") or platform.processor() or platform.machine()
    return f"{name} ({', '.join(detail)})" if detail else name


def blas_name() -> str:
    try:
        b = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
        return f"{b.get('name')} {b.get('version')}"
    except Exception:  # noqa: BLE001 - only a label
        return "unknown"


def torch_blas() -> str:
    """torch's BLAS, from its build configuration (``BLAS_INFO`` in ``torch.__config__.show()``), with
    whether MKL is available to it."""
    try:
        m = re.search(r"\bBLAS_INFO=([^,\s]+)", torch.__config__.show())
        info = m.group(1) if m else "unknown"
    except Exception:  # noqa: BLE001 - only a label
        info = "unknown"
    return f"{info} (MKL {'available' if torch.backends.mkl.is_available() else 'not available'})"


def luminal_threads() -> int:
    """Threads luminal's cpu backend uses: ``LUMINAL_NUM_THREADS``, else numpy's OpenBLAS count."""
    from luminal.backends.cpu.parallel import thread_count
    return thread_count()


def blas_threads() -> int:
    """Threads numpy's OpenBLAS uses (what luminal's cpu backend uses too), else the environment's count."""
    n = blas.threads()
    if n is not None:
        return n
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
        if os.environ.get(var, "").isdigit():
            return int(os.environ[var])
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def llc_bytes(default: int = 64 << 20) -> tuple[int, str]:
    """(bytes, where from) of the last-level cache: the highest-level data or unified cache of cpu0 in
    ``/sys/devices/system/cpu/cpu0/cache/index*`` (its ``size``, e.g. ``32768K``), else ``default``."""
    best = None
    for d in sorted(Path("/sys/devices/system/cpu/cpu0/cache").glob("index*")):
        try:
            level = int((d / "level").read_text())
            kind = (d / "type").read_text().strip()
            size = (d / "size").read_text().strip().upper()
        except (OSError, ValueError):
            continue
        if kind == "Instruction" or not size:
            continue
        unit = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(size[-1], 1)
        try:
            n = int(size.rstrip("KMG")) * unit
        except ValueError:
            continue
        if best is None or level > best[0]:
            best = (level, n)
    if best is None:
        return default, f"assumed ({default >> 20} MB: no cache sizes in /sys)"
    return best[1], f"L{best[0]}, /sys"


def load_avg() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "n/a"


def header(threads: int, what: str, luminal: int | None = None) -> str:
    """One line: the machine, the libraries (numpy's BLAS and torch's), the thread counts and the load
    average. ``threads``: numpy's BLAS and torch's intra-op threads; ``luminal``: the cpu backend's
    (default: ``luminal_threads()``, which honours ``LUMINAL_NUM_THREADS``)."""
    lt = luminal_threads() if luminal is None else luminal
    counts = (f"{threads} thread(s) each (numpy BLAS = torch intra-op = luminal)" if lt == threads else
              f"{threads} thread(s) for numpy BLAS and torch intra-op, {lt} for luminal (LUMINAL_NUM_THREADS)")
    return (f"# {cpu_model()}, {os.cpu_count()} cores; numpy BLAS {blas_name()}; torch BLAS {torch_blas()}; "
            f"numpy {np.__version__}; torch {torch.__version__}; {counts}; {what}; load average {load_avg()}")


def copy_bandwidth(nbytes: int = 256 << 20, repeats: int = 7) -> float:
    """Bytes per second read + written by ``np.copyto`` of large float32 arrays (best of ``repeats``;
    STREAM's convention: a copy of N bytes moves 2N)."""
    src = np.ones(nbytes // 4, np.float32)
    dst = np.empty_like(src)
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        np.copyto(dst, src)
        best = min(best, time.perf_counter() - t0)
    return 2 * nbytes / best


def sgemm_flops(m: int, k: int, n: int, repeats: int = 20, min_s: float = 0.3) -> float:
    """FLOP/s of numpy's float32 ``(m, k) @ (k, n)`` into a preallocated output: the best of at least
    ``repeats`` calls and ``min_s`` seconds of them (a peak rate, as a floor wants)."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    out = np.empty((m, n), np.float32)
    np.matmul(a, b, out=out)
    best, calls, start = float("inf"), 0, time.perf_counter()
    while calls < repeats or time.perf_counter() - start < min_s:
        t0 = time.perf_counter()
        np.matmul(a, b, out=out)
        best = min(best, time.perf_counter() - t0)
        calls += 1
    return 2 * m * k * n / best


def alternate(sides: dict, samples: int, rounds: int, warmup: int, pause_s: float, inner: int = 1,
              args=None) -> dict:
    """Time each side's ``fn(*args[i % len(args)])`` in alternating blocks (see the module docstring).

    ``sides``: name -> fn; ``args``: name -> list of argument tuples the calls rotate over (default: no
    arguments). Returns name -> array of seconds per call, ``samples`` of them (at least one per round)."""
    args = args or {}
    rounds = max(1, min(rounds, samples))
    block = max(1, -(-samples // rounds))
    times = {name: [] for name in sides}
    for r in range(rounds):
        for name, fn in sides.items():
            data = args.get(name) or [()]
            time.sleep(pause_s)
            k = r * (warmup + block) * inner
            for _ in range(warmup * inner):
                fn(*data[k % len(data)])
                k += 1
            for _ in range(block):
                t0 = time.perf_counter()
                for _ in range(inner):
                    fn(*data[k % len(data)])
                    k += 1
                times[name].append((time.perf_counter() - t0) / inner)
    return {name: np.array(ts[:max(samples, rounds)]) for name, ts in times.items()}


def calibrate_inner(fns, target_s: float) -> int:
    """Calls per sample so that a sample of the slowest of ``fns`` (each called without arguments)
    lasts about ``target_s``."""
    slowest = 0.0
    for fn in fns:
        fn()
        t0 = time.perf_counter()
        for _ in range(3):
            fn()
        slowest = max(slowest, (time.perf_counter() - t0) / 3)
    return max(1, int(target_s / max(slowest, 1e-9)))


def pct(ts, scale: float = 1e3) -> np.ndarray:
    """10th, 50th and 90th percentile of ``ts`` (seconds) times ``scale`` (default: milliseconds)."""
    return np.percentile(np.asarray(ts) * scale, [10, 50, 90])


def fmt(p, digits: int = 2) -> str:
    """``median (p10-p90)``."""
    return f"{p[1]:.{digits}f} ({p[0]:.{digits}f}-{p[2]:.{digits}f})"
