"""MNIST MLP AdamW train step on the GPU: luminal ``cuda`` against torch eager on the same device
(issue 31's first bench row), and the host time of one replayed call of a small program.

Prints a markdown table: per side the median milliseconds of a step (10th-90th percentile), and
luminal / torch (lower is better). Every luminal call ends in one synchronize (its loss comes back),
so a step's time is the device's and the host's together; torch's loss is read back (``.item()``)
too, so both sides pay one device-to-host sync per step.

``--dry``: the simulated device (``cuda-emulated``: the emulator runs the kernels, so only tiny
sizes) and torch on the CPU, to check that the script runs where there is no GPU.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import luminal as lm
from luminal import nn, train


def _times(call, warmup: int, steps: int) -> np.ndarray:
    for _ in range(warmup):
        call()
    out = []
    for _ in range(steps):
        t = time.perf_counter()
        call()
        out.append(time.perf_counter() - t)
    return np.array(out) * 1e3


def _fmt(ms: np.ndarray) -> str:
    return f"{np.median(ms):.3f} ({np.percentile(ms, 10):.3f}-{np.percentile(ms, 90):.3f})"


def luminal_step(backend: str, batch: int, sizes: tuple, rng) -> callable:
    lm.manual_seed(0)
    d_in, hidden, classes = sizes
    model = nn.Sequential(nn.Linear(d_in, hidden), nn.ReLU(), nn.Linear(hidden, classes))
    g = lm.Graph()
    x, y = g.input("x", ("B", d_in)), g.input("y", ("B",), dtype=lm.int32)
    step = train.compile_step(train.cross_entropy(model(x), y), train.AdamW(model.parameters(), lr=1e-3),
                              backend=backend)
    xb = rng.standard_normal((batch, d_in)).astype(np.float32)
    yb = rng.integers(0, classes, batch).astype(np.int32)
    return lambda: step(x=xb, y=yb)


def torch_step(device: str, batch: int, sizes: tuple, rng):
    import torch

    d_in, hidden, classes = sizes
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(d_in, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, classes))
    model = model.to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    xb = torch.from_numpy(rng.standard_normal((batch, d_in)).astype(np.float32)).to(device)
    yb = torch.from_numpy(rng.integers(0, classes, batch)).to(device)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(xb), yb)
        loss.backward()
        opt.step()
        return loss.item()

    return step


def replay_host_us(backend: str, calls: int) -> float:
    """Microseconds of host time per call of ``x * 2 + 1`` on 16 floats (replayed after the first)."""
    g = lm.Graph()
    x = g.input("x", (16,))
    f = lm.compile(x * 2.0 + 1.0, backend=backend)
    a = np.ones(16, np.float32)
    return float(np.median(_times(lambda: f(x=a), 3, calls)) * 1e3)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dry", action="store_true", help="the simulated device, tiny sizes, torch on the CPU")
    p.add_argument("--quick", action="store_true", help="a few steps per side")
    args = p.parse_args()
    backend, device = ("cuda-emulated", "cpu") if args.dry else ("cuda", "cuda")
    batch, sizes = (8, (32, 16, 10)) if args.dry else (128, (784, 256, 10))
    warmup, steps = (2, 3) if args.dry or args.quick else (10, 100)
    rng = np.random.default_rng(0)
    ok, why = lm.cuda.status()
    print(f"device: {'simulated (cuda-emulated)' if args.dry else why}; batch {batch}, sizes {sizes}\n")
    if not args.dry and not ok:
        raise SystemExit(f"no GPU: {why} (--dry runs on the simulated device)")
    ours = _times(luminal_step(backend, batch, sizes, rng), warmup, steps)
    try:
        theirs = _times(torch_step(device, batch, sizes, rng), warmup, steps)
    except ImportError:
        theirs = None
    print("| work | luminal ms | torch eager ms | luminal / torch |")
    print("|---|---|---|---|")
    ratio = f"{np.median(ours) / np.median(theirs):.2f}" if theirs is not None else "n/a"
    torch_col = _fmt(theirs) if theirs is not None else "n/a (no torch)"
    print(f"| MLP AdamW step, batch {batch} | {_fmt(ours)} | {torch_col} | {ratio} |")
    print(f"\nhost time of one replayed call of a small program: {replay_host_us(backend, steps * 10):.1f} us")


if __name__ == "__main__":
    main()
