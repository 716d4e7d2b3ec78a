"""Each kernel's schedules timed on the GPU (``search=N``: ``backends/cuda/schedules.py``): which of the
one lowering's options wins for reductions, products and a batch-1 product, and by how much over the
cost model's default. The data the cost model's thresholds should be set from. (A softmax runs as one
single-pass launch, ``codegen/lowering/rows.py``, which has no alternative to time yet.)

Prints a markdown table: per program and kernel, every schedule's median milliseconds (device events
around runs of that kernel alone), the default (the cost model's pick) and the one kept.

``--dry``: the simulated device (``cuda-emulated``: the emulator's times, tiny sizes), to check that
the script runs where there is no GPU. The schedule cache is off for the run (every kernel timed).
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

import luminal as lm


def programs(dry: bool) -> dict:
    """name -> (outputs, inputs) built on a fresh graph each."""
    n = 4 if dry else 1
    rows, cols = (6, 300) if dry else (4096, 4096)
    m = 16 if dry else 4096 // n
    rng = np.random.default_rng(0)

    def reductions(g):
        x = g.input("x", (rows, cols))
        long = g.input("l", (2, 20000 if dry else 1 << 22))
        return [x.sum(-1), x.softmax(-1), long.sum(-1)], {"x": rng.standard_normal((rows, cols)),
                                                           "l": rng.standard_normal((2, 20000 if dry else 1 << 22))}

    def products(g):
        a, b = g.input("a", (m, m)), g.input("b", (m, m))
        h, k = g.input("h", (m, m), dtype=lm.float16), g.input("k", (m, m), dtype=lm.float16)
        p, q = g.input("p", (m, m), dtype=lm.bfloat16), g.input("q", (m, m), dtype=lm.bfloat16)
        return [a @ b, h @ k, p @ q], {"a": rng.standard_normal((m, m)), "b": rng.standard_normal((m, m)),
                                       "h": rng.standard_normal((m, m)).astype(np.float16),
                                       "k": rng.standard_normal((m, m)).astype(np.float16),
                                       "p": rng.standard_normal((m, m)), "q": rng.standard_normal((m, m))}

    def decode(g):  # weights stored (in, out), and (out, in) as nn.Linear keeps them (``wide`` applies)
        v, w = g.input("v", (1, cols)), g.input("w", (cols, cols // 2))
        wt = g.input("wt", (cols // 2, cols))
        return [v @ w, v @ wt.T], {"v": rng.standard_normal((1, cols)), "w": rng.standard_normal((cols, cols // 2)),
                                   "wt": rng.standard_normal((cols // 2, cols))}

    return {"reductions": reductions, "products": products, "batch-1 product": decode}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dry", action="store_true", help="the simulated device, tiny sizes")
    p.add_argument("--search", type=int, default=4,
                   help="schedules timed per kernel (a product: cuBLASLt and three own kernels)")
    args = p.parse_args()
    torch = _torch()  # before any kernel runs: on the H200 (torch 2.11) importing it after them failed
    os.environ["LUMINAL_CACHE"] = "llvm,compile"  # (not cuda: every kernel is timed, none taken from the cache)
    backend = "cuda-emulated" if args.dry else "cuda"
    ok, why = lm.cuda.status()
    if not args.dry and not ok:
        raise SystemExit(f"no GPU: {why} (--dry runs on the simulated device)")
    print(f"# schedules, search={args.search}; device: {'simulated (cuda-emulated)' if args.dry else why}\n")
    print("| program | kernel | schedules (ms) | default | kept |")
    print("|---|---|---|---|---|")
    products: list = []  # (kernel, its schedules' times) of the square products, for the torch table
    for name, build in programs(args.dry).items():
        g = lm.Graph()
        outs, inputs = build(g)
        inputs = {k: v if v.dtype == np.float16 else v.astype(np.float32) for k, v in inputs.items()}
        f = lm.compile(outs, backend=backend, search=args.search)
        defaults = {id(s.kernel): s.launches[0].choice for s in f.runner.program.steps if s.launches}
        f(**inputs)
        for k, times, kept in f.runner.program.timings:
            timed = ", ".join(f"{o} {s * 1e3:.3f}" for o, s in sorted(times.items(), key=lambda kv: kv[1]))
            shape = "x".join(str(d) for d in k.domain)
            print(f"| {name} | {k.kind} {shape} | {timed} | {defaults[id(k)]} | {kept} |")
            if k.kind == "matmul" and k.domain[0] > 1:
                products.append((k, times))
    torch_products(torch, products, args.dry)


def _torch():
    """torch, or None where it is not installed (then the table has no reference column)."""
    try:
        import torch
    except ImportError:
        return None
    return torch


def torch_products(torch, products: list, dry: bool) -> None:
    """Each timed square product against ``torch.matmul`` on the same device and dtype (device events
    around it; the median of 10 after a warm-up; the CPU when --dry): TFLOP/s per side."""
    if torch is None:
        print("\n(no torch: no reference column)")
        return
    device = "cpu" if dry else "cuda"
    print("\n| product | dtype | library | own kernels (best) | torch.matmul | library / torch (time) |")
    print("|---|---|---|---|---|---|")
    for k, times in products:
        m, n, kk = (int(d) for d in k.domain)
        dtype = k.inputs[0][0].dtype.name
        a = torch.randn(m, kk, device=device, dtype=getattr(torch, dtype))
        b = torch.randn(kk, n, device=device, dtype=getattr(torch, dtype))
        for _ in range(3):
            torch.matmul(a, b)
        runs = []
        for _ in range(10):
            if dry:
                t = time.perf_counter()
                torch.matmul(a, b)
                runs.append(time.perf_counter() - t)
            else:
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                torch.matmul(a, b)
                end.record()
                torch.cuda.synchronize()
                runs.append(start.elapsed_time(end) / 1e3)
        theirs = float(np.median(runs))
        flops = 2.0 * m * n * kk
        rate = lambda s: f"{s * 1e3:.3f} ms, {flops / s / 1e12:.1f} TFLOP/s"  # noqa: E731
        lib = times.get("library")
        own = min((s for o, s in times.items() if o != "library"), default=None)
        print(f"| {m}x{n}x{kk} | {dtype} | {rate(lib) if lib else '-'} | {rate(own) if own else '-'} | "
              f"{rate(theirs)} | {f'{lib / theirs:.2f}' if lib else '-'} |")


if __name__ == "__main__":
    main()
