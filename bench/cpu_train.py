"""One MNIST training step, luminal ``backend="cpu"`` (``train.compile_step``) vs PyTorch eager on the CPU.

    python bench/cpu_train.py                          # MLP and CNN, luminal cpu vs torch eager
    python bench/cpu_train.py --models mlp --steps 100  # more repetitions
    python bench/cpu_train.py --backend reference      # the reference interpreter, as a baseline

Same work on both sides: the models of ``examples/mnist/train.py`` (MLP 784-256-10; ``--model cnn``'s
conv-pool-conv-pool-linear), torch's copy loaded from the luminal model's ``state_dict``, the same batches
of 128 shipped MNIST digits, cross-entropy, AdamW(lr=1e-3). Before timing, the losses of the first two
steps are asserted equal on both sides (the second one also checks that the updates agree).

Timing: a step is forward + backward + update + the loss as a Python float, on each side. The sides
alternate in blocks of steps (so load from other processes on a shared machine hits both alike), each
block after a pause and warm-up steps: alternating step by step would time each side against the other's
still-spinning thread pool (OpenBLAS and OpenMP workers busy-wait after a call; on 2 cores that made
torch's MLP step tens of times slower). Steps rotate over several batches, so neither side times one cached input;
the table reports the median and the 10th-90th percentile spread, and the header the load average (on
a shared machine a wide spread means other work was running: compare medians of quiet runs only). A
ratio is luminal / torch (lower is better); the goals are MLP <= 1.0 and CNN <= 1.5. ``compile s`` is the
one-time ``compile_step`` cost, not in the ratio.

Threads: torch uses as many intra-op threads as numpy's OpenBLAS has, and so does luminal's cpu backend
(its own threads for long row-wise runs, matmuls included, with BLAS on one thread meanwhile; small
programs leave the threads to BLAS), so neither side gets more cores; set ``OPENBLAS_NUM_THREADS`` to
change both.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

import luminal as lm
from luminal import train
from luminal.backends.cpu import blas

ROOT = Path(__file__).resolve().parents[1]
GOALS = {"mlp": 1.0, "cnn": 1.5}
BATCH = 128
ROUNDS = 5  # alternate sides in this many blocks of steps
PAUSE_S = 0.2


def blas_threads() -> int:
    """Threads numpy's OpenBLAS uses (what luminal's cpu backend uses too), else the environment's count."""
    n = blas.threads()
    if n is not None:
        return n
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
        if os.environ.get(var, "").isdigit():
            return int(os.environ[var])
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "n/a"


def load_example():
    """``examples/mnist/train.py`` as a module: its MLP/CNN classes and data loader are the benchmark's."""
    spec = importlib.util.spec_from_file_location("mnist_example", ROOT / "examples" / "mnist" / "train.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class TorchMLP(torch.nn.Module):
    def __init__(self, hidden: int = 256):
        super().__init__()
        self.fc1, self.fc2 = torch.nn.Linear(784, hidden), torch.nn.Linear(hidden, 10)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


class TorchCNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 16, 5, padding=2)
        self.conv2 = torch.nn.Conv2d(16, 32, 5, padding=2)
        self.pool = torch.nn.MaxPool2d(2)
        self.fc = torch.nn.Linear(32 * 7 * 7, 10)

    def forward(self, x):
        x = x.reshape(-1, 1, 28, 28)
        x = self.pool(F.relu(self.conv1(x)))
        x = self.pool(F.relu(self.conv2(x)))
        return self.fc(x.flatten(1))


TORCH_MODELS = {"mlp": TorchMLP, "cnn": TorchCNN}


def make_sides(example, name: str, backend: str):
    """(luminal step, torch step, compile seconds): each step takes (x, y) and returns the loss."""
    lm.manual_seed(0)
    model = example.MODELS[name]()
    tmodel = TORCH_MODELS[name]()
    tmodel.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in model.state_dict().items()})
    g = lm.Graph()
    x, y = g.input("x", ("B", 784)), g.input("y", ("B",), dtype=lm.int32)
    model.train()
    loss = train.cross_entropy(model(x), y)
    t0 = time.perf_counter()
    step = train.compile_step(loss, train.AdamW(model.parameters(), lr=1e-3), backend=backend)
    compile_s = time.perf_counter() - t0
    topt = torch.optim.AdamW(tmodel.parameters(), lr=1e-3)

    def lm_step(xb, yb):
        return step(x=xb, y=yb)

    def torch_step(xb, yb):
        topt.zero_grad(set_to_none=True)
        out = F.cross_entropy(tmodel(xb), yb)
        out.backward()
        topt.step()
        return out.item()

    return lm_step, torch_step, compile_s


def bench(example, name: str, backend: str, steps: int, warmup: int, batches) -> dict:
    lm_step, torch_step, compile_s = make_sides(example, name, backend)
    tbatches = [(torch.from_numpy(xb), torch.from_numpy(yb.astype(np.int64))) for xb, yb in batches]
    losses = []
    for k in range(2):  # same loss before any update and after one: the same work on both sides
        a, b = lm_step(*batches[k]), torch_step(*tbatches[k])
        assert abs(a - b) <= 1e-4 * max(1.0, abs(b)), f"{name}: step {k + 1} loss {a} (luminal) vs {b} (torch)"
        losses.append((a, b))
    times = {"luminal": [], "torch": []}
    sides = (("luminal", lm_step, batches), ("torch", torch_step, tbatches))
    block = max(1, steps // ROUNDS)
    for r in range(ROUNDS):
        for side, fn, data in sides:
            time.sleep(PAUSE_S)  # the other side's thread pool stops spinning before this side runs
            for i in range(warmup + block):
                t0 = time.perf_counter()
                fn(*data[(r * block + i) % len(data)])
                if i >= warmup:
                    times[side].append(time.perf_counter() - t0)
    stats = {side: np.percentile(np.array(ts) * 1e3, [10, 50, 90]) for side, ts in times.items()}
    return {"model": name, "compile_s": compile_s, "stats": stats, "first_loss": losses[0],
            "ratio": stats["luminal"][1] / stats["torch"][1]}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--models", default="mlp,cnn", help="comma-separated: mlp, cnn")
    p.add_argument("--backend", default="cpu", choices=["cpu", "reference"])
    p.add_argument("--steps", type=int, default=None, help="timed steps per side (default: mlp 50, cnn 20)")
    p.add_argument("--warmup", type=int, default=3)
    args = p.parse_args(argv)

    threads = blas_threads()
    torch.set_num_threads(threads)
    example = load_example()
    data = example.load_mnist()
    rng = np.random.default_rng(0)
    order = rng.permutation(len(data.train_images))
    batches = [(data.train_images[order[i:i + BATCH]], data.train_labels[order[i:i + BATCH]].astype(np.int32))
               for i in range(0, 8 * BATCH, BATCH)]
    print(f"luminal backend={args.backend} vs torch {torch.__version__} eager; batch {BATCH}; AdamW lr=1e-3; "
          f"{threads} thread(s) each (numpy BLAS = torch intra-op); load average {_load()}")
    g = lm.Graph()  # one-time process warm-up (imports, egglog start-up) kept out of "compile s"
    lm.compile(g.input("w", (1,)) + 1, backend=args.backend)
    rows = []
    for name in args.models.split(","):
        steps = args.steps or (50 if name == "mlp" else 20)
        r = bench(example, name, args.backend, steps, args.warmup, batches)
        rows.append(r)
        print(f"  {name}: {steps} timed steps; first-step loss luminal {r['first_loss'][0]:.6f}, "
              f"torch {r['first_loss'][1]:.6f}")
    print(f"load average now {_load()}\n")
    print("| model | luminal ms (p10-p90) | torch ms (p10-p90) | ratio | goal | compile s |")
    print("|-------|----------------------|--------------------|-------|------|-----------|")
    for r in rows:
        (l10, l50, l90), (t10, t50, t90) = r["stats"]["luminal"], r["stats"]["torch"]
        goal = GOALS[r["model"]]
        mark = "met" if r["ratio"] <= goal else "not met"
        print(f"| {r['model']} | {l50:.2f} ({l10:.2f}-{l90:.2f}) | {t50:.2f} ({t10:.2f}-{t90:.2f}) | "
              f"{r['ratio']:.2f} | <= {goal} ({mark}) | {r['compile_s']:.2f} |")
    return rows


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
