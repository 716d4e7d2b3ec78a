"""Data-parallel training steps: steps per second at 1 and 2 ranks, one thread each, and what the ring
all-reduce cost model predicts for more ranks.

    python bench/data_parallel.py                    # the MNIST MLP and CNN and a small GPT (a few minutes)
    python bench/data_parallel.py --models mlp       # one model
    python bench/data_parallel.py --steps 50         # timed steps per case (default: 200 mlp, 20 cnn and gpt)
    python bench/data_parallel.py --rounds 5         # 1-rank and 2-rank runs alternating, 5 of each (default 3)

Strong scaling: the global batch stays the same (MLP and CNN 128 digits, GPT 8 x 64 tokens) and 2 ranks take
half each. 1 rank is the plain ``compile_step`` in a process alone (what one would run without MPI);
2 ranks are ``mpiexec -n 2`` with ``data_parallel=True``. The two alternate, a new process (or pair) per
round, and the tables give each side's median step time (the spread of the rounds in brackets): on a
shared VM one run of a side alone moved by 20% from one minute to the next. Every process has one thread
(``LUMINAL_NUM_THREADS=1``, ``OPENBLAS_NUM_THREADS=1``). In the 2-rank run the gradient buckets' sum is
also timed alone (``all-reduce``, as the bus bandwidth ``2(N-1)/N * bytes / time``) against MPI's own
point-to-point bandwidth on the same bytes (a ping-pong between the two ranks).

The header states the machine's own 2-process ceiling (``ceiling``): a fixed single-threaded GEMM run by
two processes at once against one, which on a shared VM was anywhere from 1.1x to 2.0x within an
hour (two busy vCPUs sharing a physical core, or clocked down together); no data-parallel step on
such a machine can scale past it.

The model table applies ``t(N) = t(1)/N + 2(N-1)/N * bytes / bandwidth`` with the measured one-rank
step time, gradient bytes and point-to-point bandwidth (and, for machines joined by a network, 10 and
100 Gbit/s): perfect scaling of the compute, nothing overlapped, latency ignored.

Models:

- ``mlp``: ``examples/mnist/train.py``'s MLP (784-256-10), cross-entropy, AdamW;
- ``cnn``: its CNN (conv 5x5 16, pool, conv 5x5 32, pool, linear), cross-entropy, AdamW;
- ``gpt``: 4 pre-norm blocks of width 256 (4 heads, causal ``nn.MultiheadAttention``, 4x GELU MLP),
  vocabulary 512, learned positions, next-token cross-entropy, AdamW.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
STEPS = {"mlp": 200, "cnn": 20, "gpt": 20}  # timed steps per case
WARMUP = 5
LINKS = {"10 Gbit/s": 1.25e9, "100 Gbit/s": 12.5e9}


def build(which: str):
    """(loss, model, the global batch) of one model."""
    import luminal as lm
    from luminal import train

    rng = np.random.default_rng(0)
    lm.manual_seed(0)
    g = lm.Graph()
    if which in ("mlp", "cnn"):
        spec = importlib.util.spec_from_file_location("mnist_example", ROOT / "examples" / "mnist" / "train.py")
        example = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(example)
        model = example.MLP(256) if which == "mlp" else example.CNN()
        x, y = g.input("x", ("B", 784)), g.input("y", ("B",), dtype=lm.int32)
        batch = {"x": rng.random((128, 784), dtype=np.float32), "y": rng.integers(0, 10, 128).astype(np.int32)}
        return train.cross_entropy(model(x), y), model, batch

    spec = importlib.util.spec_from_file_location("bench_gpt", ROOT / "bench" / "gpt.py")
    gpt = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gpt)
    model = gpt.GPT()
    loss = gpt.next_token_loss(model, g)
    return loss, model, {"ids": rng.integers(0, 512, (8, 64)).astype(np.int32)}


def child(which: str, steps: int) -> None:
    """One measured process (a rank); rank 0 prints a JSON line."""
    from luminal import distributed as dist
    from luminal import train

    n = dist.world_size()
    loss, model, batch = build(which)
    step = train.compile_step(loss, train.AdamW(model.parameters(), lr=1e-3), data_parallel=n > 1)
    names = list(batch)
    local = dict(zip(names, dist.shard(*batch.values()))) if len(names) > 1 else {names[0]: dist.shard(batch[names[0]])}
    for _ in range(WARMUP):
        step(**local)
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(steps):
        step(**local)
    dist.barrier()
    out = {"step_s": (time.perf_counter() - t0) / steps,
           "grad_bytes": int(sum(p.data.nbytes for p in model.parameters()))}
    if n > 1:
        out.update(exchange_times(step._dp.buckets))
    if dist.rank() == 0:
        print(json.dumps(out), flush=True)


def exchange_times(buckets, reps: int = 20) -> dict:
    """The buckets' sum over the ranks alone, and a ping-pong of the same bytes between ranks 0 and 1."""
    from luminal import distributed as dist
    from luminal.distributed import mpi

    comm = mpi.comm()
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(reps):
        buckets.sum_over_ranks("bench")
    t_sum = (time.perf_counter() - t0) / reps
    other = 1 - comm.Get_rank() if comm.Get_rank() < 2 else None
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(reps):
        for f in buckets.flats:
            if comm.Get_rank() == 0:
                comm.Send(f, dest=other)
                comm.Recv(f, source=other)
            elif other is not None:
                comm.Recv(f, source=other)
                comm.Send(f, dest=other)
    t_p2p = (time.perf_counter() - t0) / reps / 2  # one way
    return {"allreduce_s": t_sum, "p2p_s": t_p2p, "bucket_bytes": buckets.nbytes, "buckets": len(buckets.flats)}


def run(which: str, ranks: int, steps: int) -> dict:
    env = {**os.environ, "LUMINAL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    cmd = [sys.executable, __file__, "--child", which, "--steps", str(steps)]
    if ranks > 1:
        launcher = Path(sys.executable).with_name("mpiexec")
        cmd = [str(launcher) if launcher.exists() else shutil.which("mpiexec") or "mpiexec", "-n", str(ranks), *cmd]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1200)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def machine() -> str:
    name = "unknown CPU"
    try:
        name = next(ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                    if ln.startswith("model name"))
    except (OSError, StopIteration):
        pass
    load = " ".join(f"{x:.1f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "n/a"
    return f"{name}, {os.cpu_count()} cores, load average {load}"


def _median_run(runs: list) -> dict:
    """The run with the median step time (the lower middle one of an even count)."""
    return sorted(runs, key=lambda r: r["step_s"])[(len(runs) - 1) // 2]


def predict(t1: float, nbytes: int, bandwidth: float, n: int) -> float:
    """The speed-up of ``n`` ranks by the ring all-reduce model."""
    return t1 / (t1 / n + 2 * (n - 1) / n * nbytes / bandwidth)


# One process's share of the calibration: a fixed float32 GEMM, single-threaded, timed in a loop.
GEMM_CHILD = r"""
import time, numpy as np
a = np.random.default_rng(0).random((512, 1024), dtype=np.float32)
b = np.random.default_rng(1).random((1024, 256), dtype=np.float32)
c = np.empty((512, 256), np.float32)
for _ in range(5):
    np.matmul(a, b, out=c)
t0 = time.perf_counter()
for _ in range(60):
    np.matmul(a, b, out=c)
print(time.perf_counter() - t0)
"""


def ceiling(rounds: int) -> list:
    """The machine's own 2-process speed-up on compute-bound work, per round: one process running a
    fixed single-threaded GEMM loop alone, then two running it at once (throughput of two / of one).
    On a shared VM two busy vCPUs can run well below twice one (siblings of one physical core, or a
    lower clock with both busy): a data-parallel step cannot scale past this, so each table states it."""
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    out = []
    for _ in range(max(1, rounds)):
        one = float(subprocess.run([sys.executable, "-c", GEMM_CHILD], env=env, capture_output=True, text=True,
                                   check=True).stdout)
        procs = [subprocess.Popen([sys.executable, "-c", GEMM_CHILD], env=env, stdout=subprocess.PIPE, text=True)
                 for _ in range(2)]
        two = max(float(p.communicate()[0]) for p in procs)
        out.append(2 * one / two)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", choices=list(STEPS), default=list(STEPS))
    ap.add_argument("--steps", type=int, default=None, help="timed steps per case (default: STEPS)")
    ap.add_argument("--rounds", type=int, default=3, help="1-rank and 2-rank runs per model, alternating")
    ap.add_argument("--child", choices=list(STEPS), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args.child, args.steps)
    results, spread = {}, {}
    for m in dict.fromkeys(args.models):
        steps = args.steps or STEPS[m]
        rounds = [(run(m, 1, steps), run(m, 2, steps)) for _ in range(max(1, args.rounds))]
        results[m] = tuple(_median_run([r[side] for r in rounds]) for side in (0, 1))
        rates = [[1 / r[side]["step_s"] for r in rounds] for side in (0, 1)]
        spread[m] = [f"{min(x):.1f}-{max(x):.1f}" for x in rates]
    limit = ceiling(args.rounds)
    print(f"data-parallel train steps, one thread per rank; {machine()}")
    print()
    print(f"This machine's 2-process ceiling (a single-threaded GEMM in 2 processes at once against 1, "
          f"{len(limit)} rounds): median {sorted(limit)[(len(limit) - 1) // 2]:.2f}x "
          f"({min(limit):.2f}-{max(limit):.2f})")
    print()
    print("| model | gradients | 1 rank steps/s (rounds) | 2 ranks steps/s (rounds) | 2 ranks / 1 rank | "
          "all-reduce ms (bus GB/s) | p2p GB/s | model predicts (2 ranks) |")
    print("|---|---|---|---|---|---|---|---|")
    for m, (one, two) in results.items():
        nbytes, t1 = two["bucket_bytes"], one["step_s"]
        bus = nbytes / two["allreduce_s"]  # 2(N-1)/N = 1 at N = 2
        p2p = nbytes / two["p2p_s"]
        print(f"| {m} | {nbytes / 2**20:.2f} MiB in {two['buckets']} bucket(s) | {1 / t1:.1f} ({spread[m][0]}) | "
              f"{1 / two['step_s']:.1f} ({spread[m][1]}) | {t1 / two['step_s']:.2f}x | {two['allreduce_s'] * 1e3:.2f} "
              f"({bus / 1e9:.2f}) | {p2p / 1e9:.2f} | {predict(t1, nbytes, p2p, 2):.2f}x |")
    print()
    print("Speed-up the ring all-reduce model predicts (t(1) measured above; bandwidth: this machine's "
          "point-to-point, or a network link):")
    print()
    ns = (2, 4, 8, 16, 32, 64)
    print("| model | link | " + " | ".join(f"{n} ranks" for n in ns) + " |")
    print("|---|---|" + "---|" * len(ns))
    for m, (one, two) in results.items():
        links = {"this machine": two["bucket_bytes"] / two["p2p_s"], **LINKS}
        for link, bw in links.items():
            cells = " | ".join(f"{predict(one['step_s'], two['bucket_bytes'], bw, n):.1f}x" for n in ns)
            print(f"| {m} | {link} ({bw / 1e9:.2f} GB/s) | {cells} |")


if __name__ == "__main__":
    main()
