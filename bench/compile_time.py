"""Compile cost of a stack of blocks as depth grows: the compiler pipeline in-process, and the first
result end to end in a new process.

Two tables (both by default; ``--pipeline`` or ``--first-result`` prints one):

**Pipeline** (``--pipeline``): compile time of a transformer-block stack, forward and forward +
backward. Loop rolling gives the e-graph one block however deep the stack, so compile time should stay
nearly flat: the goal is depth 32 / depth 2 <= 1.5. Each point is the median of a few ``lm.compile``
runs (backend "cpu", the whole pipeline; every point once per round, so that a drift in the machine's
speed hits all points alike), then split by stage from the compile report: the e-graph runs (lower,
rewrite, extract: the part rolling keeps flat), the rolling pass itself (detection, template and rest
building, linking) and the stages after it (kernels, memory plan). It times the pipeline itself, so the
compile cache (``luminal/compiler/cache.py``) is off here (its repeats would load the first run's
result); LLVM objects stay cached as before (in this process: the first call is not timed here).

**First result** (``--first-result``): what a user waits for, end to end. Each case is a new process
(``FIRST_RESULT_CHILD``) with every disk cache off (``LUMINAL_CACHE=0``) and a new empty
``LUMINAL_CACHE_DIR`` (``tempfile.mkdtemp``, 0700), on a stack of ``depth`` residual blocks
``x + Linear(GELU(Linear(LayerNorm(x))))`` of width 32, input ``("B", 32)``, forward + backward (the loss
``(y * y).mean()``; outputs the loss and every parameter's gradient, ``train.grad``). It times
``lm.compile``, the first call (batch 16, float32; this is where the cpu backend lays out the program and
LLVM compiles its kernels), and a call with a new batch size (24) right after; "first result" is compile
+ first call (``import luminal`` comes before it and is not counted). It counts the LLVM objects the
process compiles (``luminal.codegen.llvm.STATS["compiled"]``: objects that came from no cache; "-" where
that counter is gone), during the first call and during the new-batch call. Goals: first result at
depth 32 / depth 2 <= 1.5; new batch size / first result at depth 32 <= 0.10. Medians over
``--repeats`` rounds, the depths alternating within a round. Python's bytecode is cached (a temporary
``PYTHONPYCACHEPREFIX``, primed by one run first), as ``compile_step.py`` does.

    python bench/compile_time.py                              # both tables
    python bench/compile_time.py --pipeline [--depths 1 2 4 8 16 32] [--repeats 3]
    python bench/compile_time.py --first-result [--depths 2 8 32] [--repeats 3]

``compile_step.py`` measures train steps' compile cold and warm, with the caches on.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gpt import Block  # bench/gpt.py: run as a script, this file's folder is on sys.path

import luminal as lm
from luminal import train
from luminal.core import disk_cache


def stack(depth: int, backward: bool, d: int = 16, heads: int = 2, seq: int = 8):
    """Outputs of a ``depth``-block stack: its activations, or its loss and every parameter's gradient."""
    g = lm.Graph()
    y = g.input("x", ("B", seq, d))
    blocks = [Block(d, heads) for _ in range(depth)]
    for b in blocks:
        y = b(y)
    if not backward:
        return [y]
    loss = (y * y).mean()
    return [loss, *train.grad(loss, [p for b in blocks for p in b.parameters()])]


def nodes(outputs) -> int:
    seen, stack_ = set(), [t.node for t in outputs]
    while stack_:
        n = stack_.pop()
        if n.id not in seen:
            seen.add(n.id)
            stack_.extend(s for s, _ in n.srcs)
    return len(seen)


def compile_once(depth: int, backward: bool) -> dict:
    """Seconds of one compile of one point: total and by stage, with the loops rolled."""
    outs = stack(depth, backward)
    t0 = time.perf_counter()
    f = lm.compile(outs, backend="cpu")
    total = time.perf_counter() - t0
    r = f.report(show=False)
    egraph = sum(v for k, v in r.times.items() if k.startswith("optimize: ") and k != "optimize: roll")
    return {"compile": total, "egraph": egraph, "roll": r.times.get("optimize: roll", 0.0),
            "after": r.times.get("kernels", 0.0) + r.times.get("memory plan", 0.0),
            "nodes": nodes(outs), "loops": r.loops}  # the program (and its graph) is freed before the next


def pipeline(depths, repeats: int) -> None:
    """The pipeline table: in this process, the compile cache off."""
    if disk_cache.enabled("compile"):  # time the pipeline, not a load of its result
        on = [k for k in disk_cache.KINDS if k != "compile" and disk_cache.enabled(k)]
        os.environ["LUMINAL_CACHE"] = ",".join(on) or "0"
    lm.compile(stack(1, False), backend="cpu")  # warm-up: egglog's first run in a process costs extra
    points = [(d, bw) for d in depths for bw in (False, True)]
    runs: dict = {p: [] for p in points}
    for _ in range(repeats):  # every point once per round: a drift in the machine's speed hits all alike
        for p in points:
            runs[p].append(compile_once(*p))
    rows = {p: {**{k: statistics.median(r[k] for r in rs) for k in ("compile", "egraph", "roll", "after")},
                "nodes": rs[-1]["nodes"], "loops": rs[-1]["loops"]} for p, rs in runs.items()}
    print("pipeline (in-process, compile cache off): transformer blocks (d 16, 2 heads, seq 8); "
          "fwd+bwd by stage: e-graph = lower + rewrite + extract; roll = the rolling pass; "
          "after = kernels + memory plan")
    print(f"{'depth':>5} | {'fwd nodes':>9} | {'fwd compile s':>13} | {'fwd+bwd nodes':>13} | "
          f"{'fwd+bwd compile s':>17} | {'e-graph s':>9} | {'roll s':>7} | {'after s':>7} | loops (body x trips)")
    for depth in depths:
        fwd, bwd = rows[(depth, False)], rows[(depth, True)]
        loops = ", ".join(f"{lp['body_nodes']}x{lp['trips']}" for lp in bwd["loops"]) or "-"
        print(f"{depth:>5} | {fwd['nodes']:>9} | {fwd['compile']:>13.3f} | {bwd['nodes']:>13} | "
              f"{bwd['compile']:>17.3f} | {bwd['egraph']:>9.3f} | {bwd['roll']:>7.3f} | {bwd['after']:>7.3f} | {loops}")
    if 2 in depths and 32 in depths:
        for name, bw in (("fwd", False), ("fwd+bwd", True)):
            a, b = rows[(2, bw)], rows[(32, bw)]
            print(f"{name}: depth 32 / depth 2 = {b['compile'] / a['compile']:.2f} (goal <= 1.5); by stage: "
                  + ", ".join(f"{k} {b[k] / a[k]:.2f}" for k in ("egraph", "roll", "after") if a[k]))


# One case of the first-result table, in a new process: argv[1] the depth. Prints one JSON line last.
FIRST_RESULT_CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import numpy as np
import luminal as lm
from luminal import nn, train
t_import = time.perf_counter() - t0
depth = int(sys.argv[1])


class Residual(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.ln, self.fc1, self.fc2 = nn.LayerNorm(d), nn.Linear(d, d), nn.Linear(d, d)

    def forward(self, x):
        return x + self.fc2(self.fc1(self.ln(x)).gelu())


rng = np.random.default_rng(0)
x16 = rng.standard_normal((16, 32), dtype=np.float32)
x24 = rng.standard_normal((24, 32), dtype=np.float32)
lm.manual_seed(0)
g = lm.Graph()
y = g.input("x", ("B", 32))
blocks = [Residual(32) for _ in range(depth)]
for b in blocks:
    y = b(y)
loss = (y * y).mean()
outs = [loss, *train.grad(loss, [p for b in blocks for p in b.parameters()])]
t0 = time.perf_counter()
f = lm.compile(outs, backend="cpu")
t_compile = time.perf_counter() - t0

# Count the LLVM objects compiled (not found in a cache): ``luminal.codegen.llvm.STATS["compiled"]``, read
# after the compile and around each call (the compile imports the backend, and this module, in its timed
# region; a backend that no longer does is imported here, outside the timings, and said so).
late_import = "luminal.codegen.llvm" not in sys.modules
import luminal.codegen.llvm as _llvm
stats = getattr(_llvm, "STATS", None)
counted = isinstance(stats, dict) and "compiled" in stats
compiled = (lambda: stats["compiled"]) if counted else (lambda: 0)
counts = {"now": compiled()}

t0 = time.perf_counter()
r16 = f(x=x16)
loss16 = float(np.asarray(r16[0]))
t_first = time.perf_counter() - t0
first_objects, counts["now"] = compiled() - counts["now"], compiled()
t0 = time.perf_counter()
r24 = f(x=x24)
loss24 = float(np.asarray(r24[0]))
t_new = time.perf_counter() - t0
counts["now"] = compiled() - counts["now"]
print(json.dumps({"import": t_import, "compile": t_compile, "first": t_first, "new_batch": t_new,
                  "first_objects": first_objects if counted else None,
                  "new_objects": counts["now"] if counted else None, "late_import": late_import,
                  "losses": [loss16, loss24], "grads": len(r16) - 1}))
"""


def first_result_case(depth: int, env: dict) -> dict:
    """One case in a new process with every disk cache off and a new empty cache directory."""
    cache_dir = tempfile.mkdtemp(prefix="luminal-first-result-")  # (mkdtemp makes it 0700)
    os.chmod(cache_dir, 0o700)
    try:
        proc = subprocess.run([sys.executable, "-c", FIRST_RESULT_CHILD, str(depth)],
                              env={**env, "LUMINAL_CACHE": "0", "LUMINAL_CACHE_DIR": cache_dir},
                              capture_output=True, text=True, timeout=900)
        if proc.returncode != 0:
            raise RuntimeError(f"the measured process (depth {depth}) failed:\n{proc.stderr[-3000:]}")
        left = [p for p in Path(cache_dir).rglob("*") if p.is_file()]
        assert not left, f"LUMINAL_CACHE=0 wrote into the cache directory: {left[:5]}"
        return json.loads(proc.stdout.strip().splitlines()[-1])
    finally:
        shutil.rmtree(cache_dir, ignore_errors=True)


def first_result(depths, repeats: int) -> None:
    """The first-result table: a new process per case, the caches off."""
    with tempfile.TemporaryDirectory(prefix="luminal-compile-time-") as scratch:
        env = dict(os.environ)
        env.pop("PYTHONDONTWRITEBYTECODE", None)  # an installed package has its .pyc files: cache them
        env["PYTHONPYCACHEPREFIX"] = os.path.join(scratch, "pycache")
        first_result_case(min(depths), env)  # primes the bytecode
        runs: dict = {d: [] for d in depths}
        for _ in range(repeats):  # the depths alternate within a round: a drift hits all alike
            for d in depths:
                runs[d].append(first_result_case(d, env))
    for d, rs in runs.items():  # a bench of the wrong thing is worse than none
        assert len({tuple(r["losses"]) for r in rs}) == 1, (d, [r["losses"] for r in rs])
        assert all(r["grads"] == 6 * d for r in rs), (d, rs)
    med = {d: {k: statistics.median(r[k] for r in rs) for k in ("import", "compile", "first", "new_batch")}
           for d, rs in runs.items()}
    for m in med.values():
        m["result"] = m["compile"] + m["first"]

    def objects(rs, key):
        vals = [r[key] for r in rs]
        return "-" if any(v is None for v in vals) else f"{statistics.median(vals):g}"

    print("first result (a new process per case, LUMINAL_CACHE=0, empty LUMINAL_CACHE_DIR): residual blocks "
          "x + Linear(GELU(Linear(LayerNorm(x)))), width 32, fwd+bwd; first call batch 16, new batch 24; "
          f"medians of {repeats} round(s)")
    print()
    print("| depth | compile s | first call s | first result s | new batch s | objects (first / new batch) | "
          "import s |")
    print("|---|---|---|---|---|---|---|")
    for d in depths:
        m, rs = med[d], runs[d]
        print(f"| {d} | {m['compile']:.3f} | {m['first']:.3f} | {m['result']:.3f} | {m['new_batch']:.3f} | "
              f"{objects(rs, 'first_objects')} / {objects(rs, 'new_objects')} | {m['import']:.3f} |")
    print()
    if any(r["late_import"] for rs in runs.values() for r in rs):
        print("note: the compile no longer imports luminal.codegen.llvm; it was imported outside the timings")
    lo, hi = min(depths), max(depths)
    if lo != hi:
        ratio = med[hi]["result"] / med[lo]["result"]
        goal = " (goal <= 1.5: " + ("met" if ratio <= 1.5 else "not met") + ")" if (lo, hi) == (2, 32) else ""
        print(f"first result: depth {hi} / depth {lo} = {ratio:.2f}{goal}")
    ratio = med[hi]["new_batch"] / med[hi]["result"]
    goal = " (goal <= 0.10: " + ("met" if ratio <= 0.10 else "not met") + ")" if hi == 32 else ""
    print(f"new batch size / first result at depth {hi} = {ratio:.2f}{goal}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pipeline", action="store_true", help="only the pipeline table")
    ap.add_argument("--first-result", action="store_true", help="only the first-result table")
    ap.add_argument("--depths", type=int, nargs="+",
                    help="default: 1 2 4 8 16 32 for the pipeline, 2 8 32 for the first result")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    both = args.pipeline == args.first_result
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from benchlib import blas_threads, header

    print(header(blas_threads(), "compile time vs depth"))
    print()
    if args.pipeline or both:
        pipeline(args.depths or [1, 2, 4, 8, 16, 32], args.repeats)
        print()
    if args.first_result or both:
        first_result(args.depths or [2, 8, 32], args.repeats)


if __name__ == "__main__":
    main()
