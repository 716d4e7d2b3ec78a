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

import numpy as np

import luminal as lm


def programs(dry: bool) -> dict:
    """name -> (outputs, inputs) built on a fresh graph each."""
    n = 4 if dry else 1
    rows, cols = (6, 300) if dry else (4096, 4096)
    m = 16 if dry else 1024 // n
    rng = np.random.default_rng(0)

    def reductions(g):
        x = g.input("x", (rows, cols))
        long = g.input("l", (2, 20000 if dry else 1 << 22))
        return [x.sum(-1), x.softmax(-1), long.sum(-1)], {"x": rng.standard_normal((rows, cols)),
                                                           "l": rng.standard_normal((2, 20000 if dry else 1 << 22))}

    def products(g):
        a, b = g.input("a", (m, m)), g.input("b", (m, m))
        h, k = g.input("h", (m, m), dtype=lm.float16), g.input("k", (m, m), dtype=lm.float16)
        return [a @ b, h @ k], {"a": rng.standard_normal((m, m)), "b": rng.standard_normal((m, m)),
                                "h": rng.standard_normal((m, m)).astype(np.float16),
                                "k": rng.standard_normal((m, m)).astype(np.float16)}

    def decode(g):
        v, w = g.input("v", (1, cols)), g.input("w", (cols, cols // 2))
        return [v @ w], {"v": rng.standard_normal((1, cols)), "w": rng.standard_normal((cols, cols // 2))}

    return {"reductions": reductions, "products": products, "batch-1 product": decode}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dry", action="store_true", help="the simulated device, tiny sizes")
    p.add_argument("--search", type=int, default=3, help="schedules timed per kernel")
    args = p.parse_args()
    os.environ["LUMINAL_CACHE"] = "llvm,compile"  # (not cuda: every kernel is timed, none taken from the cache)
    backend = "cuda-emulated" if args.dry else "cuda"
    ok, why = lm.cuda.status()
    if not args.dry and not ok:
        raise SystemExit(f"no GPU: {why} (--dry runs on the simulated device)")
    print(f"# schedules, search={args.search}; device: {'simulated (cuda-emulated)' if args.dry else why}\n")
    print("| program | kernel | schedules (ms) | default | kept |")
    print("|---|---|---|---|---|")
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


if __name__ == "__main__":
    main()
