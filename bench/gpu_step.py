"""MNIST MLP AdamW train step on the GPU: luminal ``cuda`` against torch eager on the same device
(issue 31's first bench row), and the host time of one replayed call of a small program.

Same work on both sides: torch's model loads luminal's initial weights; both take the same host numpy
batches (rotating over 4), uploaded to the device on every step (luminal's inputs are host arrays, so
torch's ``.to(device)`` of the same arrays is in its step too); AdamW(lr=1e-3). Before timing, the
losses of the first two steps are asserted equal and so are the parameters after them (within a tenth
of what the updates moved them). The sides alternate in blocks (``benchlib.alternate``: a pause, warm-up
steps, then the timed ones), so load from other work hits both alike. The header names the GPU
(``nvidia-smi``, else torch's device name).

Prints a markdown table: per side the median milliseconds of a step (10th-90th percentile), and
luminal / torch (lower is better). Every luminal call ends in one synchronize (its loss comes back),
so a step's time is the device's and the host's together; torch's loss is read back (``.item()``)
too, so both sides pay one device-to-host sync per step. No ``torch.compile`` column (its first
compile on a GPU takes longer than the GPU check's stage allows).

``--dry``: the simulated device (``cuda-emulated``: the emulator runs the kernels, so only tiny
sizes) and torch on the CPU, to check that the script runs where there is no GPU.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import luminal as lm  # noqa: E402
from luminal import nn, train  # noqa: E402


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


N_BATCHES = 4  # steps rotate over this many batches (the same numpy arrays on both sides)


def batches(batch: int, sizes: tuple, rng) -> list:
    d_in, _, classes = sizes
    return [(rng.standard_normal((batch, d_in)).astype(np.float32), rng.integers(0, classes, batch).astype(np.int32))
            for _ in range(N_BATCHES)]


def luminal_step(backend: str, sizes: tuple):
    """(step(x, y) -> loss, model): the batch is uploaded from host numpy arrays on every call."""
    lm.manual_seed(0)
    d_in, hidden, classes = sizes
    model = nn.Sequential(nn.Linear(d_in, hidden), nn.ReLU(), nn.Linear(hidden, classes))
    g = lm.Graph()
    x, y = g.input("x", ("B", d_in)), g.input("y", ("B",), dtype=lm.int32)
    step = train.compile_step(train.cross_entropy(model(x), y), train.AdamW(model.parameters(), lr=1e-3),
                              backend=backend)
    return (lambda xb, yb: float(step(x=xb, y=yb))), model


def torch_step(device: str, sizes: tuple, state: dict):
    """(step(x, y) -> loss, model): luminal's initial weights (``state``); the batch uploaded from the same
    host numpy arrays on every call, as luminal's is."""
    import torch

    d_in, hidden, classes = sizes
    model = torch.nn.Sequential(torch.nn.Linear(d_in, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, classes))
    model.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in state.items()})
    model = model.to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)

    def step(xb, yb):
        x, y = torch.from_numpy(xb).to(device), torch.from_numpy(yb).long().to(device)
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss.item()

    return step, model


def check_same(ours, theirs, lmodel, tmodel, data) -> str:
    """The first two steps' losses equal on both sides, and the parameters after them within a tenth of
    what the two updates moved them (the losses alone cannot see a skipped update)."""
    start = {k: np.array(v) for k, v in lmodel.state_dict().items()}
    for k in range(2):
        a, b = ours(*data[k]), theirs(*data[k])
        assert abs(a - b) <= 1e-4 * max(1.0, abs(b)), f"step {k + 1}: loss {a} (luminal) vs {b} (torch)"
    tstate = {k: v.detach().cpu().numpy() for k, v in tmodel.state_dict().items()}
    lstate = {k: np.array(v) for k, v in lmodel.state_dict().items()}
    moved = np.sqrt(sum(np.sum((tstate[k] - start[k]) ** 2.0) for k in start))
    apart = np.sqrt(sum(np.sum((lstate[k] - tstate[k]) ** 2.0) for k in start))
    assert moved > 0 and apart <= 0.1 * moved, f"after 2 steps the parameters are {apart:.3e} apart, moved {moved:.3e}"
    return f"losses of 2 steps equal; parameters after them {apart:.1e} apart (the updates moved them {moved:.1e})"


def gpu_name() -> str:
    """The GPU's model and driver, from nvidia-smi when there is one, else torch's device name."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
        if out.returncode == 0 and out.stdout.strip():
            return out.stdout.strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError):
        pass
    try:
        import torch
        if torch.cuda.is_available():
            return torch.cuda.get_device_name(0)
    except ImportError:
        pass
    return "unknown"


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
    warmup, steps, rounds = (2, 4, 2) if args.dry or args.quick else (10, 100, 5)
    rng = np.random.default_rng(0)
    ok, why = lm.cuda.status()
    try:
        import torch
    except ImportError:
        torch = None
    tv = f"torch {torch.__version__}" if torch is not None else "no torch"
    gpu = "simulated (cuda-emulated), torch on the CPU" if args.dry else f"{gpu_name()} ({why})"
    print(f"# device: {gpu}; {tv}; luminal {getattr(lm, '__version__', '?')}; batch {batch}, sizes {sizes}; "
          f"{N_BATCHES} batches rotated, uploaded from host arrays every step on both sides\n")
    if not args.dry and not ok:
        raise SystemExit(f"no GPU: {why} (--dry runs on the simulated device)")
    data = batches(batch, sizes, rng)
    ours, lmodel = luminal_step(backend, sizes)
    state = {k: np.array(v) for k, v in lmodel.state_dict().items()}  # luminal's initial weights, for torch
    if torch is None:
        times = {"luminal": _times(lambda: ours(*data[0]), warmup, steps) / 1e3}
        print("no torch: luminal alone, one batch")
    else:
        from benchlib import alternate  # imports torch

        theirs, tmodel = torch_step(device, sizes, state)
        print(check_same(ours, theirs, lmodel, tmodel, data))
        times = alternate({"luminal": ours, "torch": theirs}, samples=steps, rounds=rounds, warmup=warmup,
                          pause_s=0.05, args={"luminal": data, "torch": data})
    ms = {side: ts * 1e3 for side, ts in times.items()}
    print("\n| work | luminal ms | torch eager ms | luminal / torch |")
    print("|---|---|---|---|")
    theirs_ms = ms.get("torch")
    ratio = f"{np.median(ms['luminal']) / np.median(theirs_ms):.2f}" if theirs_ms is not None else "n/a"
    torch_col = _fmt(theirs_ms) if theirs_ms is not None else "n/a (no torch)"
    print(f"| MLP AdamW step, batch {batch} | {_fmt(ms['luminal'])} | {torch_col} | {ratio} |")
    print(f"\nhost time of one replayed call of a small program: {replay_host_us(backend, steps * 10):.1f} us")


if __name__ == "__main__":
    main()
