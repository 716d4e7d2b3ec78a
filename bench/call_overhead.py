"""Per-call overhead of a compiled function, and what the thread-safety lock costs in it.

    python bench/call_overhead.py                 # x + 1 on one element: luminal cpu (with and without
                                                  # the call lock) vs torch eager
    python bench/call_overhead.py --size 65536    # a larger input
    python bench/call_overhead.py --mlp           # a small MLP forward (32-64-10, batch 8, symbolic batch)

``Compiled`` runs one call at a time (``compiler/api.py``: a program keeps its buffers between calls,
states are read and written back around a run). The lock's cost is measured by timing the same
compiled function with its lock replaced by a no-op context, in alternating blocks; the difference is
the lock's share of a call. "backend run" times the backend's program alone, on the arrays and dim
binding a call hands it (recorded once): the rest of a call is luminal's front end (the input
signature's look-up, states, the lock, the output checks; the full binding and checks only on a new
signature). Medians over blocks; the header states the CPU, core count, BLAS and torch.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch

import luminal as lm
from luminal import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import blas_name, cpu_model  # noqa: E402

BLOCKS, CALLS = 15, 2000


def _per_call_us(fn) -> float:
    t0 = time.perf_counter()
    for _ in range(CALLS):
        fn()
    return (time.perf_counter() - t0) / CALLS * 1e6


class _MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(32, 64), nn.Linear(64, 10)

    def forward(self, x):
        return self.fc2(self.fc1(x).relu())


class _TorchMLP(torch.nn.Module):
    """The same MLP in torch, with the same weights."""

    def __init__(self, m: _MLP):
        super().__init__()
        self.fc1, self.fc2 = torch.nn.Linear(32, 64), torch.nn.Linear(64, 10)
        with torch.no_grad():
            for mine, theirs in ((m.fc1, self.fc1), (m.fc2, self.fc2)):
                theirs.weight.copy_(torch.from_numpy(mine.weight.data))
                theirs.bias.copy_(torch.from_numpy(mine.bias.data))
        self.requires_grad_(False)

    def forward(self, x):
        return self.fc2(self.fc1(x).relu())


class _NoLock:
    """A lock that is always free: what the call costs without its lock (``Compiled`` acquires and
    releases it by hand)."""

    def acquire(self):
        return True

    def release(self):
        pass

    __enter__, __exit__ = acquire, lambda self, *a: None


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--size", type=int, default=1, help="elements of the input (default 1)")
    p.add_argument("--mlp", action="store_true", help="a small MLP forward instead of x + 1")
    args = p.parse_args()
    if args.size < 1:
        p.error("--size must be at least 1")
    g = lm.Graph()
    if args.mlp:
        model = _MLP()
        x = g.input("x", ("B", 32))
        f = lm.compile(model(x), backend="cpu")
        a = np.random.default_rng(0).standard_normal((8, 32)).astype(np.float32)
        tm = _TorchMLP(model)
        ta = torch.from_numpy(a.copy())
        eager = lambda: tm(ta)  # noqa: E731
        what = "MLP 32-64-10 forward on (8, 32)"
    else:
        x = g.input("x", (args.size,))
        f = lm.compile(x + 1, backend="cpu")
        a = np.ones(args.size, np.float32)
        ta = torch.from_numpy(a.copy())
        eager = lambda: ta + 1  # noqa: E731
        what = f"x + 1 on {args.size} element(s)"
    recorded = {}
    program = f.runner

    def record(arrays, env):
        recorded.update(arrays=dict(arrays), env=env)
        return program(arrays, env)

    f.runner = record
    f(x=a)
    f.runner = program
    locked = f._lock
    no_lock = _NoLock()
    sides = {"luminal cpu": lambda: f(x=a), "luminal cpu, no lock": lambda: f(x=a),
             "backend run": lambda: program(recorded["arrays"], recorded["env"]), "torch eager": eager}
    times = {k: [] for k in sides}
    for side in sides:  # warm-up
        f._lock = no_lock if side.endswith("no lock") else locked
        _per_call_us(sides[side])
    for _ in range(BLOCKS):
        for side, fn in sides.items():
            f._lock = no_lock if side.endswith("no lock") else locked
            times[side].append(_per_call_us(fn))
    f._lock = locked
    med = {k: float(np.median(v)) for k, v in times.items()}
    print(f"# {cpu_model()}, {os.cpu_count()} cores, BLAS {blas_name()}, torch {torch.__version__}, "
          f"numpy {np.__version__}; {what}, {BLOCKS} blocks x {CALLS} calls")
    print("| side | us per call (median) | p10-p90 |")
    print("|---|---|---|")
    for k, v in times.items():
        print(f"| {k} | {med[k]:.2f} | {np.percentile(v, 10):.2f}-{np.percentile(v, 90):.2f} |")
    lock_us = med["luminal cpu"] - med["luminal cpu, no lock"]
    front = med["luminal cpu"] - med["backend run"]
    print(f"\nfront end: {front:.2f} us per call ({front / med['luminal cpu'] * 100:.0f}% of a call), "
          f"backend run {med['backend run']:.2f} us")
    print(f"\nlock: {lock_us:+.2f} us per call ({lock_us / med['luminal cpu'] * 100:+.1f}% of a call); "
          f"luminal / torch eager = {med['luminal cpu'] / med['torch eager']:.2f}")


if __name__ == "__main__":
    main()
