"""Compile time of train steps, cold and warm: the time from building the graph to the first step's
loss, in a fresh process each time. Two models: the MNIST MLP and a small GPT.

    python bench/compile_step.py                   # 3 rounds of each case, both models
    python bench/compile_step.py --models mlp      # one model (the MLP is the quick one)
    python bench/compile_step.py --rounds 5
    python bench/compile_step.py --no-pyc          # leave Python's bytecode caching as the environment has it

Models (``--models``, default both):

- ``mlp``: ``bench/cpu_train.py``'s ``mlp`` (``examples/mnist/train.py``'s MLP 784-256-10, cross-entropy,
  AdamW(lr=1e-3), ``train.compile_step``, batch 128 of random digits);
- ``gpt``: a 6-layer GPT of width 384 (``bench/gpt.py``): token embedding (vocabulary 512) plus a
  learned position embedding, 6 pre-norm blocks (``nn.MultiheadAttention(384, 6, batch_first=True)``,
  causal through ``is_causal=True`` as ``compile_time.py``'s ``Block``, and a 4x GELU MLP, both
  residual), a final LayerNorm and a Linear head; cross-entropy of each position's logits against the
  next token (63 per sequence), AdamW(lr=1e-3), ``train.compile_step``, batch 8 x sequence 64 of random
  int32 tokens (input ``("B", 64)``).

A case's time is building the model, the graph and the loss, ``compile_step`` (autograd, the
optimizer's update, the compile of the step and of its label guard, the cpu backend's program: LLVM
objects) and the first step (which lays out the program for its batch size and compiles, or loads, its
kernels); importing luminal comes before it (``import s``, not in the total). Lazy imports the compile
makes (egglog, the cpu backend, llvmlite) are in it. ``later step s`` is a second step, after the total:
what the step itself costs, which the first step includes.

Cases, each in a new process, each round with a new empty cache directory (``LUMINAL_CACHE_DIR``):

- ``cold``: an empty cache: egglog runs, LLVM compiles (goals: MLP <= 1 s, GPT <= 3 s);
- ``warm``: the same directory again: the compile cache (``luminal/compiler/cache.py``) and the LLVM
  objects are on disk (goals: MLP <= 0.2 s, GPT <= 0.5 s);
- ``warm, llvm only`` (the MLP only): the same directory with the compile cache off
  (``LUMINAL_CACHE=llvm,cuda``): what a warm start cost before the compile cache (the egglog pipeline
  runs, LLVM objects load).

Python's bytecode: by default every process writes and reads ``.pyc`` files under a temporary
``PYTHONPYCACHEPREFIX`` (primed by one run of each model first), as an installed package has them,
whatever ``PYTHONDONTWRITEBYTECODE`` says: without them every import compiles its source, which is not
what a compile cache is about. ``--no-pyc`` keeps the environment's setting. Each model's table gives
the median of the rounds and their range, and whether the goal is met; the header the machine and the
load average (on a shared machine, compare quiet runs only).
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
MODELS = {  # name -> (title, its cases)
    "mlp": ("MNIST MLP train step (784-256-10, batch 128)", ("cold", "warm", "warm, llvm only")),
    "gpt": ("GPT train step (6 layers, width 384, 6 heads, vocabulary 512, batch 8 x 64 tokens)", ("cold", "warm")),
}
GOALS = {("mlp", "cold"): 1.0, ("mlp", "warm"): 0.2, ("gpt", "cold"): 3.0, ("gpt", "warm"): 0.5}

# One case in a new process: argv[1] the model, argv[2] examples/mnist/train.py, argv[3] bench/gpt.py.
# Prints one JSON line last.
CHILD = r"""
import importlib.util, json, sys, time
t0 = time.perf_counter()
import numpy as np
import luminal as lm
from luminal import nn, train
t_import = time.perf_counter() - t0
which = sys.argv[1]

spec = importlib.util.spec_from_file_location("bench_gpt", sys.argv[3])
gpt = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gpt)

rng = np.random.default_rng(0)
if which == "mlp":
    spec = importlib.util.spec_from_file_location("mnist_example", sys.argv[2])
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    inputs = {"x": rng.random((128, 784), dtype=np.float32), "y": rng.integers(0, 10, 128).astype(np.int32)}
else:
    inputs = {"ids": rng.integers(0, 512, (8, 64)).astype(np.int32)}
t0 = time.perf_counter()
lm.manual_seed(0)
g = lm.Graph()
if which == "mlp":
    model = example.MLP(256)
    x, y = g.input("x", ("B", 784)), g.input("y", ("B",), dtype=lm.int32)
    model.train()
    loss = train.cross_entropy(model(x), y)
else:
    model = gpt.GPT(d=384, heads=6, layers=6)
    model.train()
    loss = gpt.next_token_loss(model, g)
t1 = time.perf_counter()
step = train.compile_step(loss, train.AdamW(model.parameters(), lr=1e-3), backend="cpu")
t2 = time.perf_counter()
first = float(step(**inputs))
t3 = time.perf_counter()
second = float(step(**inputs))
t4 = time.perf_counter()
r = step.report(show=False)
print(json.dumps({"import": t_import, "build": t1 - t0, "compile_step": t2 - t1, "first_step": t3 - t2,
                  "total": t3 - t0, "later_step": t4 - t3, "hit": bool(r.cache.get("hit")),
                  "egglog": "egglog.bindings" in sys.modules, "times": r.times, "loss": [first, second]}))
"""


def run_case(model: str, cache_dir: str, env: dict, compile_cache: bool) -> dict:
    env = {**env, "LUMINAL_CACHE_DIR": cache_dir, "LUMINAL_CACHE": "1" if compile_cache else "llvm,cuda"}
    proc = subprocess.run([sys.executable, "-c", CHILD, model, str(ROOT / "examples" / "mnist" / "train.py"),
                           str(ROOT / "bench" / "gpt.py")],
                          env=env, capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        raise RuntimeError(f"the measured process ({model}) failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def measure(models, rounds: int, pyc: bool, scratch: str) -> dict:
    env = dict(os.environ)
    if pyc:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = os.path.join(scratch, "pycache")
        for m in models:  # writes every module's .pyc (a model may import modules the other does not)
            run_case(m, os.path.join(scratch, f"prime-{m}"), env, True)
    runs: dict = {m: {c: [] for c in MODELS[m][1]} for m in models}
    for k in range(rounds):
        for m in models:
            d = os.path.join(scratch, f"round{k}-{m}")
            for case in MODELS[m][1]:
                runs[m][case].append(run_case(m, d, env, case != "warm, llvm only"))
    for m in models:
        for case, rs in runs[m].items():
            want_hit = case == "warm"
            for r in rs:  # the cases are what they say: a bench of the wrong thing is worse than none
                assert r["hit"] == want_hit and r["egglog"] != want_hit, (m, case, r)
        losses = {tuple(r["loss"]) for rs in runs[m].values() for r in rs}
        assert len(losses) == 1, f"{m}: the cases computed different losses: {losses}"
    return runs


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", choices=list(MODELS), default=list(MODELS))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--no-pyc", action="store_true", help="keep the environment's bytecode caching")
    args = ap.parse_args()
    models = list(dict.fromkeys(args.models))
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from benchlib import blas_threads, header

    with tempfile.TemporaryDirectory(prefix="luminal-compile-step-") as scratch:
        runs = measure(models, args.rounds, not args.no_pyc, scratch)
    pyc = "bytecode cached" if not args.no_pyc else \
        f"bytecode as the environment has it (PYTHONDONTWRITEBYTECODE={os.environ.get('PYTHONDONTWRITEBYTECODE', '')})"
    print(header(blas_threads(), f"train steps, graph to first loss, a new process per case; {pyc}; "
                                 f"medians of {args.rounds} round(s)"))
    for m in models:
        print()
        print(f"{m}: {MODELS[m][0]}")
        print()
        print("| case | total s (min-max) | build s | compile_step s | first step s | later step s | import s | "
              "goal | met |")
        print("|---|---|---|---|---|---|---|---|---|")
        med = {}
        for case, rs in runs[m].items():
            md = {k: statistics.median(r[k] for r in rs)
                  for k in ("total", "build", "compile_step", "first_step", "later_step", "import")}
            med[case] = md
            lo, hi = min(r["total"] for r in rs), max(r["total"] for r in rs)
            goal = GOALS.get((m, case))
            met = "-" if goal is None else ("yes" if md["total"] <= goal else "no")
            print(f"| {case} | {md['total']:.3f} ({lo:.3f}-{hi:.3f}) | {md['build']:.3f} | {md['compile_step']:.3f} | "
                  f"{md['first_step']:.3f} | {md['later_step']:.3f} | {md['import']:.3f} | "
                  f"{'-' if goal is None else f'<= {goal}'} | {met} |")
        print()
        warm = runs[m]["warm"][-1]["times"]
        print(f"{m} warm: the step's compile came from the compile cache (egglog not imported): "
              + ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in warm.items()))
        if "warm, llvm only" in med:
            print(f"{m}: warm / warm, llvm only = {med['warm']['total'] / med['warm, llvm only']['total']:.2f}")


if __name__ == "__main__":
    main()
