"""Compile time of the MNIST MLP train step, cold and warm: the time from building the graph to the
first step's loss, in a fresh process each time.

    python bench/compile_step.py               # 3 rounds of each case
    python bench/compile_step.py --rounds 5
    python bench/compile_step.py --no-pyc      # leave Python's bytecode caching as the environment has it

The step is ``bench/cpu_train.py``'s ``mlp`` (``examples/mnist/train.py``'s MLP 784-256-10, cross-entropy,
AdamW(lr=1e-3), ``train.compile_step``, batch 128 of random digits). A case's time is building the model,
the graph and the loss, ``compile_step`` (autograd, the optimizer's update, the compile of the step and of
its label guard, the cpu backend's program: LLVM objects) and the first step (which lays out the
program for its batch size); importing luminal comes before it (``import s``, not in the total).
Lazy imports the compile makes (egglog, the cpu backend, llvmlite) are in it.

Cases, each in a new process, each round with a new empty cache directory (``LUMINAL_CACHE_DIR``):

- ``cold``: an empty cache: egglog runs, LLVM compiles (goal: <= 1 s);
- ``warm``: the same directory again: the compile cache (``luminal/compiler/cache.py``) and the LLVM
  objects are on disk (goal: <= 0.2 s);
- ``warm, llvm only``: the same directory with the compile cache off (``LUMINAL_CACHE=llvm,cuda``):
  what a warm start cost before the compile cache (the egglog pipeline runs, LLVM objects load).

Python's bytecode: by default every process writes and reads ``.pyc`` files under a temporary
``PYTHONPYCACHEPREFIX`` (primed by one run first), as an installed package has them, whatever
``PYTHONDONTWRITEBYTECODE`` says: without them every import compiles its source, which is not what a
compile cache is about. ``--no-pyc`` keeps the environment's setting. The table gives the median of
the rounds and their range; the header the machine and the load average (on a shared machine, compare
quiet runs only).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GOALS = {"cold": 1.0, "warm": 0.2}
CASES = ("cold", "warm", "warm, llvm only")

CHILD = r"""
import importlib.util, json, sys, time
t0 = time.perf_counter()
import numpy as np
import luminal as lm
from luminal import train
t_import = time.perf_counter() - t0
spec = importlib.util.spec_from_file_location("mnist_example", sys.argv[1])
example = importlib.util.module_from_spec(spec)
spec.loader.exec_module(example)
rng = np.random.default_rng(0)
xb, yb = rng.random((128, 784), dtype=np.float32), rng.integers(0, 10, 128).astype(np.int32)
t0 = time.perf_counter()
lm.manual_seed(0)
model = example.MLP(256)
g = lm.Graph()
x, y = g.input("x", ("B", 784)), g.input("y", ("B",), dtype=lm.int32)
model.train()
loss = train.cross_entropy(model(x), y)
t1 = time.perf_counter()
step = train.compile_step(loss, train.AdamW(model.parameters(), lr=1e-3), backend="cpu")
t2 = time.perf_counter()
first = float(step(x=xb, y=yb))
t3 = time.perf_counter()
r = step.report(show=False)
print(json.dumps({"import": t_import, "build": t1 - t0, "compile_step": t2 - t1, "first_step": t3 - t2,
                  "total": t3 - t0, "hit": bool(r.cache.get("hit")), "egglog": "egglog" in sys.modules,
                  "times": r.times, "loss": first}))
"""


def run_case(cache_dir: str, env: dict, compile_cache: bool) -> dict:
    env = {**env, "LUMINAL_CACHE_DIR": cache_dir, "LUMINAL_CACHE": "1" if compile_cache else "llvm,cuda"}
    proc = subprocess.run([sys.executable, "-c", CHILD, str(ROOT / "examples" / "mnist" / "train.py")],
                          env=env, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"the measured process failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def measure(rounds: int, pyc: bool, scratch: str) -> dict:
    env = dict(os.environ)
    if pyc:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = os.path.join(scratch, "pycache")
        run_case(os.path.join(scratch, "prime"), env, True)  # writes every module's .pyc
    runs: dict = {c: [] for c in CASES}
    for k in range(rounds):
        d = os.path.join(scratch, f"round{k}")
        runs["cold"].append(run_case(d, env, True))
        runs["warm"].append(run_case(d, env, True))
        runs["warm, llvm only"].append(run_case(d, env, False))
    for case, rs in runs.items():
        want_hit = case == "warm"
        for r in rs:  # the cases are what they say: a bench of the wrong thing is worse than none
            assert r["hit"] == want_hit and r["egglog"] != want_hit, (case, r)
    losses = {r["loss"] for rs in runs.values() for r in rs}
    assert len(losses) == 1, f"the cases computed different losses: {losses}"
    return runs


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--no-pyc", action="store_true", help="keep the environment's bytecode caching")
    args = ap.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from benchlib import blas_threads, header

    with tempfile.TemporaryDirectory(prefix="luminal-compile-step-") as scratch:
        runs = measure(args.rounds, not args.no_pyc, scratch)
    pyc = "bytecode cached" if not args.no_pyc else \
        f"bytecode as the environment has it (PYTHONDONTWRITEBYTECODE={os.environ.get('PYTHONDONTWRITEBYTECODE', '')})"
    print(header(blas_threads(), f"MNIST MLP train step, graph to first loss, a new process per case; {pyc}"))
    print()
    print("| case | total s (min-max) | build s | compile_step s | first step s | import s | goal | met |")
    print("|---|---|---|---|---|---|---|---|")
    med = {}
    for case, rs in runs.items():
        m = {k: statistics.median(r[k] for r in rs) for k in ("total", "build", "compile_step", "first_step", "import")}
        med[case] = m
        lo, hi = min(r["total"] for r in rs), max(r["total"] for r in rs)
        goal = GOALS.get(case)
        met = "-" if goal is None else ("yes" if m["total"] <= goal else "no")
        print(f"| {case} | {m['total']:.3f} ({lo:.3f}-{hi:.3f}) | {m['build']:.3f} | {m['compile_step']:.3f} | "
              f"{m['first_step']:.3f} | {m['import']:.3f} | {'-' if goal is None else f'<= {goal}'} | {met} |")
    print()
    warm = runs["warm"][-1]["times"]
    print("warm: the step's compile came from the compile cache (egglog not imported): "
          + ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in warm.items()))
    print(f"warm / warm, llvm only = {med['warm']['total'] / med['warm, llvm only']['total']:.2f}")


if __name__ == "__main__":
    main()
