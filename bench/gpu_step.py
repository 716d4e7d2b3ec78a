"""MNIST AdamW train steps on the GPU: luminal ``cuda`` against torch eager on the same device (issue
31's first two bench rows: the MLP, 784-256-10, and ``examples/mnist``'s CNN, conv-pool-conv-pool-linear,
the model ``bench/cpu_train.py`` times on the CPU), and the host time of one replayed call of a small
program.

Same work on both sides: torch's model loads luminal's initial weights; both take the same host numpy
batches (rotating over 4), uploaded to the device on every step (luminal's inputs are host arrays, so
torch's ``.to(device)`` of the same arrays is in its step too); AdamW(lr=1e-3); float32 throughout:
torch's TF32 is off for cuDNN's convolutions (on by torch's default) and its matmuls, as luminal
computes in float32 (cuBLASLt's ``CUBLAS_COMPUTE_32F``, its own kernels in float). Before timing, the
losses of the first two steps are asserted equal and so are the parameters after them (within a tenth
of what the updates moved them). The sides alternate in blocks (``benchlib.alternate``: a pause, warm-up
steps, then the timed ones), so load from other work hits both alike. The header names the GPU
(``nvidia-smi``, else torch's device name).

Prints a markdown table: per side the median milliseconds of a step (10th-90th percentile),
luminal / torch (lower is better) and issue 31's goal for it. Every luminal call ends in one
synchronize (its loss comes back), so a step's time is the device's and the host's together; torch's
loss is read back (``.item()``) too, so both sides pay one device-to-host sync per step. No
``torch.compile`` column (its first compile on a GPU takes longer than the GPU check's stage allows).

``--dry``: the simulated device (``cuda-emulated``: the emulator runs the kernels, so only tiny
sizes: the MLP narrow, the CNN, whose shape is fixed, at batch 1 and one timed step) and torch on the
CPU, to check that the script runs where there is no GPU.
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


def batches(batch: int, d_in: int, classes: int, rng) -> list:
    return [(rng.standard_normal((batch, d_in)).astype(np.float32), rng.integers(0, classes, batch).astype(np.int32))
            for _ in range(N_BATCHES)]


def models(name: str, sizes: tuple):
    """(luminal model, a function torch -> its torch twin (the same layers and parameter names)), luminal's
    initialised from seed 0. ``mlp``: 784-256-10 (``sizes``: in, hidden, classes); ``cnn``: the example's
    CNN and ``bench/cpu_train.py``'s torch twin of it (that module imports torch)."""
    lm.manual_seed(0)
    if name == "cnn":
        from cpu_train import TorchCNN, load_example

        return load_example().CNN(), lambda torch: TorchCNN()
    d_in, hidden, classes = sizes
    model = nn.Sequential(nn.Linear(d_in, hidden), nn.ReLU(), nn.Linear(hidden, classes))
    return model, lambda torch: torch.nn.Sequential(torch.nn.Linear(d_in, hidden), torch.nn.ReLU(),
                                                    torch.nn.Linear(hidden, classes))


def luminal_step(backend: str, model, d_in: int):
    """step(x, y) -> loss: the batch is uploaded from host numpy arrays on every call."""
    g = lm.Graph()
    x, y = g.input("x", ("B", d_in)), g.input("y", ("B",), dtype=lm.int32)
    model.train()
    step = train.compile_step(train.cross_entropy(model(x), y), train.AdamW(model.parameters(), lr=1e-3),
                              backend=backend)
    return lambda xb, yb: float(step(x=xb, y=yb))


def torch_step(device: str, model, state: dict):
    """(step(x, y) -> loss, model): ``model`` with luminal's initial weights (``state``); the batch uploaded
    from the same host numpy arrays on every call, as luminal's is."""
    import torch

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


GOALS = {"mlp": 0.5, "cnn": 1.0}  # issue 31: luminal / torch eager
# name -> (label, batch, sizes (in, hidden, classes), (warm-up, timed steps, rounds)) per mode
ROWS = {
    "dry": {"mlp": ("MLP", 8, (32, 16, 10), (2, 4, 2)), "cnn": ("CNN", 1, (784, None, 10), (0, 1, 1))},
    "quick": {"mlp": ("MLP", 128, (784, 256, 10), (5, 20, 4)), "cnn": ("CNN", 128, (784, None, 10), (5, 20, 4))},
    "full": {"mlp": ("MLP", 128, (784, 256, 10), (10, 100, 5)), "cnn": ("CNN", 128, (784, None, 10), (10, 50, 5))},
}


def bench_row(name: str, backend: str, device: str, torch, mode: str, rng) -> tuple:
    """(table row, the check's line) of one model's step, luminal against torch eager."""
    label, batch, sizes, (warmup, steps, rounds) = ROWS[mode][name]
    data = batches(batch, sizes[0], sizes[2], rng)
    lmodel, twin = models(name, sizes)
    ours = luminal_step(backend, lmodel, sizes[0])
    state = {k: np.array(v) for k, v in lmodel.state_dict().items()}  # luminal's initial weights, for torch
    work = f"{label} AdamW step, batch {batch}"
    if torch is None:
        ms = _times(lambda: ours(*data[0]), warmup, steps)
        row = f"| {work} | {_fmt(ms)} | n/a (no torch) | n/a | <= {GOALS[name]} |"
        return row, "no torch: luminal alone, one batch"
    from benchlib import alternate  # imports torch

    theirs, tmodel = torch_step(device, twin(torch), state)
    checked = check_same(ours, theirs, lmodel, tmodel, data)
    times = alternate({"luminal": ours, "torch": theirs}, samples=steps, rounds=rounds, warmup=warmup,
                      pause_s=0.05, args={"luminal": data, "torch": data})
    ms = {side: ts * 1e3 for side, ts in times.items()}
    ratio = np.median(ms["luminal"]) / np.median(ms["torch"])
    goal = f"<= {GOALS[name]}: {'met' if ratio <= GOALS[name] else 'not met'}"
    return f"| {work} | {_fmt(ms['luminal'])} | {_fmt(ms['torch'])} | {ratio:.2f} | {goal} |", f"{label}: {checked}"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dry", action="store_true", help="the simulated device, tiny sizes, torch on the CPU")
    p.add_argument("--quick", action="store_true", help="fewer steps per side (20, in 4 rounds)")
    p.add_argument("--models", default="mlp,cnn", help="comma-separated: mlp, cnn")
    args = p.parse_args()
    names = args.models.split(",")
    unknown = [n for n in names if n not in ROWS["full"]]
    if unknown:
        p.error(f"--models: unknown {', '.join(unknown)} (known: {', '.join(ROWS['full'])})")
    mode = "dry" if args.dry else "quick" if args.quick else "full"
    backend, device = ("cuda-emulated", "cpu") if args.dry else ("cuda", "cuda")
    rng = np.random.default_rng(0)
    ok, why = lm.cuda.status()
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:  # float32 on both sides (module docstring)
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cuda.matmul.allow_tf32 = False
    tv = f"torch {torch.__version__}" if torch is not None else "no torch"
    gpu = "simulated (cuda-emulated), torch on the CPU" if args.dry else f"{gpu_name()} ({why})"
    print(f"# device: {gpu}; {tv}; luminal {getattr(lm, '__version__', '?')}; float32, TF32 off; "
          f"{N_BATCHES} batches rotated, uploaded from host arrays every step on both sides\n")
    if not args.dry and not ok:
        raise SystemExit(f"no GPU: {why} (--dry runs on the simulated device)")
    rows = []
    for name in names:
        if name == "cnn" and torch is None:
            print("CNN: skipped (its torch twin, bench/cpu_train.py's, needs torch)")
            continue
        row, checked = bench_row(name, backend, device, torch, mode, rng)
        print(checked, flush=True)
        rows.append(row)
    print("\n| work | luminal ms | torch eager ms | luminal / torch | goal (issue 31) |")
    print("|---|---|---|---|---|")
    print("\n".join(rows))
    calls = 40 if args.dry else 400
    print(f"\nhost time of one replayed call of a small program: {replay_host_us(backend, calls):.1f} us")


if __name__ == "__main__":
    main()
