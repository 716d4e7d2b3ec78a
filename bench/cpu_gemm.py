"""The generated GEMM (``luminal/backends/cpu/generated_gemm.py``) against BLAS on the products this
project's models make: luminal's generated ``cblas_sgemm`` against numpy's OpenBLAS ``cblas_sgemm``
called the same way (the two GEMMs the driver chooses between), and torch's ``mm`` (MKL, as the
torch side of every other bench runs), each on one thread, with the cost model's pick.

Rows: the MNIST CNN's products per thread as the CPU backend cuts them (convolution 1 and 2
forward, 2's data and weight gradients, 1's batched weight gradient), the transformer encoder's
(``cpu_infer.py``: Q/K/V and the MLP, batch x sequence split over two threads), a TinyLlama-shaped
prefill product and its decode products (one row: the generated GEMV against OpenBLAS's ``cblas_sgemv``;
GB/s of the weight read are the GFLOP/s times 2). ``--pair`` runs two products at once, one per
thread, as the backend's threads do (on a 2-vCPU machine the two share a core); the second thread is
started once and reused (woken by a semaphore), not created inside the timed samples. Sides alternate in
blocks (``benchlib.alternate``); the table gives GFLOP/s (median, p10-p90) and generated / OpenBLAS
time. Before a row is timed, each side's product (its output poisoned with NaN) is checked against
float64's: ||out - ref|| / ||ref|| <= 1e-4, printed under the table.

    python bench/cpu_gemm.py            # every row, one product at a time
    python bench/cpu_gemm.py --pair     # two at once, one per thread
    python bench/cpu_gemm.py --quick    # a few samples: does it run?
"""

from __future__ import annotations

import argparse
import ctypes
import threading

import numpy as np
import torch
from benchlib import alternate, header, pct

from luminal.backends.cpu import blas, generated_gemm, generated_gemv

N, T = 111, 112  # CBLAS_TRANSPOSE
# name -> (m, n, k, a transposed, b transposed)
ROWS = {
    "cnn conv1 forward": (16, 50176, 25, False, False),
    "cnn conv2 forward": (32, 12544, 400, False, False),
    "cnn conv2 data gradient": (400, 12544, 32, True, False),
    "cnn conv2 weight gradient": (32, 200, 25088, False, True),
    "cnn conv1 weight gradient": (16, 25, 784, False, True),
    "encoder q/k/v (512x256 @ 256x256)": (512, 256, 256, False, False),
    "encoder mlp up (512x256 @ 256x1024)": (512, 1024, 256, False, False),
    "encoder mlp down (512x1024 @ 1024x256)": (512, 256, 1024, False, False),
    "encoder scores (128x64 @ 64x128)": (128, 128, 64, False, True),
    "tinyllama prefill (64x2048 @ 2048x5632)": (64, 5632, 2048, False, False),
    # batch-1 products (decode): GEMVs, the weight stored (in, out) as a Linear's, or (out, in)
    "decode 1x2048 @ 2048x5632": (1, 5632, 2048, False, False),
    "decode 1x5632 @ 5632x2048": (1, 2048, 5632, False, False),
    "decode 1x2048 @ 2048x32000": (1, 32000, 2048, False, False),
    "decode 1x2048 @ (5632x2048).T": (1, 5632, 2048, False, True),
}
_SGEMV = ctypes.CFUNCTYPE(None, ctypes.c_int32, ctypes.c_int32, ctypes.c_int64, ctypes.c_int64, ctypes.c_float,
                          ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64, ctypes.c_float,
                          ctypes.c_void_p, ctypes.c_int64)
_SGEMM = ctypes.CFUNCTYPE(None, ctypes.c_int32, ctypes.c_int32, ctypes.c_int32, ctypes.c_int64, ctypes.c_int64,
                          ctypes.c_int64, ctypes.c_float, ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p,
                          ctypes.c_int64, ctypes.c_float, ctypes.c_void_p, ctypes.c_int64)


def _problem(rng, m, n, k, ta, tb):
    a = rng.standard_normal((k, m) if ta else (m, k), dtype=np.float32)
    b = rng.standard_normal((n, k) if tb else (k, n), dtype=np.float32)
    return a, b, np.empty((m, n), np.float32)


def _cblas(fn, m, n, k, ta, tb):
    def run(a, b, c):
        fn(101, T if ta else N, T if tb else N, m, n, k, 1.0, a.ctypes.data, a.shape[1], b.ctypes.data, b.shape[1],
           0.0, c.ctypes.data, n)
    return run


def _gemv(fn, n, k, tb):
    """A one-row product ``x @ B`` as the driver makes it: ``B.T @ x`` for a B stored (k, n), ``B @ x``
    for one stored (n, k)."""
    def run(a, b, c):
        fn(101, N if tb else T, *((n, k) if tb else (k, n)), 1.0, b.ctypes.data, b.shape[1], a.ctypes.data, 1, 0.0,
           c.ctypes.data, 1)
    return run


def _torch(m, n, k, ta, tb):
    def run(a, b, c):
        x, y = torch.from_numpy(a), torch.from_numpy(b)
        torch.mm(x.T if ta else x, y.T if tb else y, out=torch.from_numpy(c))
    return run


class _Partner:
    """One persistent second thread: ``both(fn, a, b)`` runs ``fn(*b)`` there while the caller runs
    ``fn(*a)``, and returns when both are done (no thread created or joined inside a timed sample)."""

    def __init__(self):
        self._go, self._done, self._job = threading.Semaphore(0), threading.Semaphore(0), None
        threading.Thread(target=self._loop, daemon=True).start()

    def _loop(self):
        while True:
            self._go.acquire()
            fn, args = self._job
            fn(*args)
            self._done.release()

    def both(self, fn, a, b):
        self._job = (fn, b)
        self._go.release()
        fn(*a)
        self._done.acquire()


def _paired(run, problems, partner):
    """``run`` on each of ``problems`` at once (one or two), the second on ``partner``'s thread (ctypes and
    torch release the GIL)."""
    if len(problems) == 1:
        return lambda: run(*problems[0])
    return lambda: partner.both(run, problems[0], problems[1])


def check(name, sides, problem, ta, tb, tol: float = 1e-4):
    """Each side's product of ``problem`` (its output poisoned with NaN first) against float64's, by
    ||out - ref|| / ||ref||: float32 arithmetic lands far under ``tol``; an unwritten element is NaN."""
    a, b, c = problem
    ref = (a.T if ta else a).astype(np.float64) @ (b.T if tb else b).astype(np.float64)
    errs = {}
    for side, fn in sides.items():
        c[...] = np.nan
        fn(a, b, c)
        errs[side] = float(np.linalg.norm(c - ref) / np.linalg.norm(ref))
        assert errs[side] <= tol, f"{name}: {side}'s product is {errs[side]:.1e} from float64's (> {tol:.0e})"
    return errs


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--pair", action="store_true", help="two products at once, one per thread")
    p.add_argument("--quick", action="store_true", help="a few samples per side")
    p.add_argument("--only", default=None, help="rows whose name contains this")
    args = p.parse_args(argv)
    if not blas.gemms():
        raise SystemExit("numpy's BLAS is not its bundled OpenBLAS: no cblas_sgemm to compare against")
    torch.set_num_threads(1)
    gen, ob = _SGEMM(generated_gemm.gemm(np.float32)), _SGEMM(blas.gemms()[np.dtype(np.float32)])
    gen_v, ob_v = _SGEMV(generated_gemv.gemv(np.float32)), _SGEMV(blas.gemvs()[np.dtype(np.float32)])
    copies = 2 if args.pair else 1
    partner = _Partner() if args.pair else None
    print(header(1, f"float32 GEMMs, {'two at once' if args.pair else 'one at a time'}; GFLOP/s per side, all copies",
                 luminal=1))
    print("\n| product | m x n x k | a, b | cost model | generated | OpenBLAS | torch (MKL) | generated / OpenBLAS |")
    print("|---|---|---|---|---|---|---|---|")
    rng = np.random.default_rng(0)
    checked = []
    for name, (m, n, k, ta, tb) in ROWS.items():
        if args.only and args.only not in name:
            continue
        problems = [_problem(rng, m, n, k, ta, tb) for _ in range(copies)]
        if m == 1:
            sides = {"generated": _gemv(gen_v, n, k, tb), "openblas": _gemv(ob_v, n, k, tb)}
        else:
            sides = {"generated": _cblas(gen, m, n, k, ta, tb), "openblas": _cblas(ob, m, n, k, ta, tb)}
        sides["torch"] = _torch(m, n, k, ta, tb)
        with blas.single_threaded():
            errs = check(name, sides, problems[0], ta, tb)
        checked.append(f"{name}: " + ", ".join(f"{s} {e:.0e}" for s, e in errs.items()))
        sides = {s: _paired(f, problems, partner) for s, f in sides.items()}
        with blas.single_threaded():
            times = alternate(sides, samples=4 if args.quick else 30, rounds=2 if args.quick else 5, warmup=1,
                              pause_s=0.05)
        flops = 2 * m * n * k * copies
        rate = {s: pct(flops / ts, 1e-9) for s, ts in times.items()}
        cell = {s: f"{r[1]:.0f} ({r[0]:.0f}-{r[2]:.0f})" for s, r in rate.items()}
        pick = "generated" if m > 1 and generated_gemm.preferred(np.float32, m, n, k, 1) else "BLAS"
        ratio = np.median(times["generated"]) / np.median(times["openblas"])
        layout = f"{'T' if ta else 'N'}{'T' if tb else 'N'}"
        print(f"| {name} | {m} x {n} x {k} | {layout} | {pick} | {cell['generated']} | {cell['openblas']} | "
              f"{cell['torch']} | {ratio:.2f} |")
    print("\nEach side's product against float64's before timing, ||out - ref|| / ||ref|| (limit 1e-4; outputs "
          "poisoned with NaN first):\n" + "\n".join(checked))


if __name__ == "__main__":
    main()
