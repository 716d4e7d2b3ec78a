"""Memory-bound work on the GPU as a fraction of the device's copy bandwidth (issue 31's bench row
"elementwise chain over 2^28 f32; softmax and layer norm rows: >= 70% of copy bandwidth"): luminal
``cuda`` and torch eager on the same device, float32.

The ceiling is measured in the same run: torch's device-to-device ``copy_`` of 2^28 floats (1 GiB),
CUDA events around it, the median of 20 after 3 warm-ups, counting the bytes read and the bytes
written (STREAM's convention). Each row's bytes are the fewest its work must move: every input read
once, the output written once. "% of copy" is those bytes over the median time, over the ceiling.

Rows: an elementwise chain over 2^28 floats (``chain``: six operations; luminal fuses them into one
kernel, torch eager runs six), softmax over rows of 1024 and of 32768 (a vocabulary's logits), layer
norm (weight and bias) over rows of 1024 and of 4096, each 2^26 floats (256 MiB, several times the
H200's 60 MB of L2), on random normal inputs (never zeros, which hide unwritten outputs and can run
faster than real data).

luminal's side: its inputs and its result are resident States (``g.state``, ``g.assign``), so nothing
crosses to the host: the program's output is the result's first element. Its time is the device's, of
the captured run graph alone (``DeviceBinding.time_run``: events around one replay of the graph the
second call captured), without the commit that then copies the new value into the result State's
device copy (one more pass, which a program returning the result, or feeding it to the next kernel,
does not make). torch's side: events around the eager call. Before timing, each side's result is
compared on the device with the other's, ||luminal - torch|| / ||torch|| in float64 under 1e-4;
luminal's result State starts as NaN, so an element its kernels leave unwritten fails the check. The
sides alternate in blocks (``benchlib.alternate``), each sample one event-timed call.

``--dry``: the simulated device (``cuda-emulated``: the emulator's times, which say nothing of a GPU)
and torch on the CPU (the host clock), tiny sizes: checks that the script runs where there is no GPU.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import luminal as lm  # noqa: E402
from luminal.frontend.state import State  # noqa: E402

GOAL = 0.70  # issue 31: >= 70% of the copy bandwidth
TOLERANCE = 1e-4  # ||luminal - torch|| / ||torch||: float32 on both sides lands far under it, a wrong result near 1

# mode -> (copy floats, [(row, kind, shape)], (warm-up, samples, rounds))
SIZES = {
    "device": (1 << 28, [("elementwise chain", "chain", (1 << 28,)),
                         ("softmax rows", "softmax", (1 << 16, 1024)), ("softmax rows", "softmax", (1 << 11, 32768)),
                         ("layer norm rows", "layer_norm", (1 << 16, 1024)),
                         ("layer norm rows", "layer_norm", (1 << 14, 4096))], (3, 20, 4)),
    "dry": (1 << 16, [("elementwise chain", "chain", (1 << 12,)), ("softmax rows", "softmax", (16, 64)),
                      ("softmax rows", "softmax", (2, 2048)), ("layer norm rows", "layer_norm", (16, 64)),
                      ("layer norm rows", "layer_norm", (4, 256))], (1, 2, 1)),
}


def chain(x):
    """Six elementwise operations, written with methods luminal's tensors and torch's share."""
    return ((x * 1.5 + 0.25).relu() * x).sigmoid() * 2.0 - 1.0


def torch_seconds(torch, device: str, fn) -> float:
    """Seconds of ``fn()`` on ``device``: CUDA events around it on a GPU (its work is asynchronous), the
    host clock on the CPU (``--dry``)."""
    if device == "cpu":
        t = time.perf_counter()
        fn()
        return time.perf_counter() - t
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1e3


def copy_bandwidth(torch, device: str, n: int, repeats: int = 20) -> float:
    """Bytes per second read + written by torch's device-to-device ``copy_`` of ``n`` random float32s: the
    median of ``repeats`` (``torch_seconds``) after 3 warm-ups."""
    src = torch.randn(n, device=device)
    dst = torch.empty_like(src)
    for _ in range(3):
        dst.copy_(src)
    runs = [torch_seconds(torch, device, lambda: dst.copy_(src)) for _ in range(repeats)]
    return 2 * src.nbytes / float(np.median(runs))


def alternate_device(sides: dict, samples: int, rounds: int, warmup: int, pause_s: float) -> dict:
    """``benchlib.alternate`` over functions that return the seconds they measured themselves (device
    events): the same alternating blocks and warm-ups; name -> the ``samples`` seconds its timed calls
    returned (alternate's own clock, the host's, is not used). A block is ``warmup`` calls, then the
    timed ones, as ``alternate`` makes them."""
    from benchlib import alternate  # imports torch

    got = {name: [] for name in sides}
    alternate({name: (lambda fn=fn, out=got[name]: out.append(fn())) for name, fn in sides.items()},
              samples=samples, rounds=rounds, warmup=warmup, pause_s=pause_s)
    rounds = max(1, min(rounds, samples))
    block = warmup + -(-samples // rounds)
    out = {}
    for name, ts in got.items():
        assert len(ts) == rounds * block, f"{name}: {len(ts)} calls, expected {rounds} blocks of {block}"
        out[name] = np.array([t for i, t in enumerate(ts) if i % block >= warmup][:samples])
    return out


def build(kind: str, shape: tuple, g, states: dict):
    """The row's luminal graph over the States (the input ``x``; layer norm's ``w`` and ``b``)."""
    x = g.state(states["x"])
    if kind == "chain":
        return chain(x)
    if kind == "softmax":
        return x.softmax(-1)
    return lm.nn.functional.layer_norm(x, (shape[-1],), g.state(states["w"]), g.state(states["b"]))


def torch_fn(torch, kind: str, shape: tuple, tensors: dict):
    x = tensors["x"]
    if kind == "chain":
        return lambda: chain(x)
    if kind == "softmax":
        return lambda: torch.softmax(x, -1)
    return lambda: torch.nn.functional.layer_norm(x, (shape[-1],), tensors["w"], tensors["b"])


def bench_row(torch, backend: str, device: str, kind: str, shape: tuple, counts: tuple, seed: int) -> dict:
    """One row: luminal's program and torch's call on the same random inputs, checked against each other,
    then timed alternately. Returns the median seconds per side and the bytes the work must move."""
    gen = torch.Generator(device=device).manual_seed(seed)
    tensors = {"x": torch.randn(shape, device=device, generator=gen)}
    if kind == "layer_norm":
        tensors["w"] = torch.randn(shape[-1], device=device, generator=gen)
        tensors["b"] = torch.randn(shape[-1], device=device, generator=gen)
    states = {k: State(v.cpu().numpy(), name=k) for k, v in tensors.items()}
    result = State(np.full(shape, np.nan, np.float32), name="result")  # unwritten elements fail the check
    g = lm.Graph()
    out = build(kind, shape, g, states)
    g.assign(result, out)
    f = lm.compile(out.reshape(-1)[:1], backend=backend)
    for _ in range(2):  # the first call runs launch by launch, the second captures the run's graph
        f()
    ours_t, theirs_t = torch.from_numpy(result.data).to(device), torch_fn(torch, kind, shape, tensors)()
    err = float(torch.linalg.vector_norm((ours_t - theirs_t).double()) / torch.linalg.vector_norm(theirs_t.double()))
    assert err < TOLERANCE, f"{kind} {shape}: ||luminal - torch|| / ||torch|| = {err:.2e} (over {TOLERANCE:.0e})"
    del ours_t, theirs_t
    binding = next(iter(f.runner.program._bindings.values()))
    warmup, samples, rounds = counts
    ours, theirs = lambda: binding.time_run(1)[0], torch_fn(torch, kind, shape, tensors)
    times = alternate_device({"luminal": ours, "torch": lambda: torch_seconds(torch, device, theirs)},
                             samples=samples, rounds=rounds, warmup=warmup, pause_s=0.05)
    moved = 2 * tensors["x"].nbytes + sum(tensors[k].nbytes for k in ("w", "b") if k in tensors)
    return {"err": err, "bytes": moved, **{side: float(np.median(ts)) for side, ts in times.items()}}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dry", action="store_true", help="the simulated device, tiny sizes, torch on the CPU")
    args = p.parse_args()
    import torch
    from gpu_step import gpu_name

    backend, device = ("cuda-emulated", "cpu") if args.dry else ("cuda", "cuda")
    ok, why = lm.cuda.status()
    if not args.dry and not ok:
        raise SystemExit(f"no GPU: {why} (--dry runs on the simulated device)")
    copy_n, rows, counts = SIZES["dry" if args.dry else "device"]
    bw = copy_bandwidth(torch, device, copy_n)
    gpu = "simulated (cuda-emulated), torch on the CPU" if args.dry else f"{gpu_name()} ({why})"
    print(f"# device: {gpu}; torch {torch.__version__}; float32; copy bandwidth {bw / 1e9:.1f} GB/s (torch copy_ "
          f"of {copy_n * 4 / 2**20:.4g} MiB, read + written); goal: luminal >= {GOAL:.0%} of it\n", flush=True)
    table = []
    for k, (work, kind, shape) in enumerate(rows):
        r = bench_row(torch, backend, device, kind, shape, counts, seed=k)
        print(f"{work} {shape}: luminal and torch agree ({r['err']:.1e})", flush=True)
        share = {side: r["bytes"] / r[side] / bw for side in ("luminal", "torch")}
        mark = "met" if share["luminal"] >= GOAL else "not met"
        table.append(f"| {work} | {'x'.join(map(str, shape))} | {r['bytes'] / 2**20:.4g} | {r['luminal'] * 1e3:.3f} | "
                     f"{r['torch'] * 1e3:.3f} | {r['luminal'] / r['torch']:.2f} | {share['luminal']:.0%} ({mark}) | "
                     f"{share['torch']:.0%} |")
    print("\n| work | shape | MiB moved | luminal ms | torch eager ms | luminal / torch | luminal % of copy "
          f"(goal >= {GOAL:.0%}) | torch % of copy |")
    print("|---|---|---|---|---|---|---|---|")
    print("\n".join(table))


if __name__ == "__main__":
    main()
