"""Compile time of a transformer-block stack as depth grows, forward and forward + backward.

Loop rolling gives the e-graph one block however deep the stack, so compile time should stay nearly
flat: the goal is depth 32 / depth 2 <= 1.5. Each point is the median of a few ``lm.compile`` runs
(backend "cpu", the whole pipeline; every point once per round, so that a drift in the machine's
speed hits all points alike), then split by stage from the compile report: the e-graph runs
(lower, rewrite, extract: the part rolling keeps flat), the rolling pass itself (detection, template
and rest building, linking) and the stages after it (kernels, memory plan).

    python bench/compile_time.py [--depths 1 2 4 8 16 32] [--repeats 3]

It times the pipeline itself, so the compile cache (``luminal/compiler/cache.py``) is off here (its
repeats would load the first run's result); LLVM objects stay cached as before. ``compile_step.py``
measures the MNIST train step's compile cold and warm, with the cache.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import luminal as lm
from luminal import nn, train
from luminal.core import disk_cache


class Block(nn.Module):
    """Pre-norm transformer block: causal multi-head attention and a GELU MLP, both residual."""

    def __init__(self, d, heads):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        h = self.ln1(x)
        x = x + self.attn(h, h, h, need_weights=False, is_causal=True)[0]
        return x + self.fc2(self.fc1(self.ln2(x)).gelu())


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


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--depths", type=int, nargs="+", default=[1, 2, 4, 8, 16, 32])
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    if disk_cache.enabled("compile"):  # time the pipeline, not a load of its result
        on = [k for k in disk_cache.KINDS if k != "compile" and disk_cache.enabled(k)]
        os.environ["LUMINAL_CACHE"] = ",".join(on) or "0"
    lm.compile(stack(1, False), backend="cpu")  # warm-up: egglog's first run in a process costs extra
    points = [(d, bw) for d in args.depths for bw in (False, True)]
    runs: dict = {p: [] for p in points}
    for _ in range(args.repeats):  # every point once per round: a drift in the machine's speed hits all alike
        for p in points:
            runs[p].append(compile_once(*p))
    rows = {p: {**{k: statistics.median(r[k] for r in rs) for k in ("compile", "egraph", "roll", "after")},
                "nodes": rs[-1]["nodes"], "loops": rs[-1]["loops"]} for p, rs in runs.items()}
    print("fwd+bwd by stage: e-graph = lower + rewrite + extract; roll = the rolling pass; "
          "after = kernels + memory plan")
    print(f"{'depth':>5} | {'fwd nodes':>9} | {'fwd compile s':>13} | {'fwd+bwd nodes':>13} | "
          f"{'fwd+bwd compile s':>17} | {'e-graph s':>9} | {'roll s':>7} | {'after s':>7} | loops (body x trips)")
    for depth in args.depths:
        fwd, bwd = rows[(depth, False)], rows[(depth, True)]
        loops = ", ".join(f"{lp['body_nodes']}x{lp['trips']}" for lp in bwd["loops"]) or "-"
        print(f"{depth:>5} | {fwd['nodes']:>9} | {fwd['compile']:>13.3f} | {bwd['nodes']:>13} | "
              f"{bwd['compile']:>17.3f} | {bwd['egraph']:>9.3f} | {bwd['roll']:>7.3f} | {bwd['after']:>7.3f} | {loops}")
    if 2 in args.depths and 32 in args.depths:
        for name, bw in (("fwd", False), ("fwd+bwd", True)):
            a, b = rows[(2, bw)], rows[(32, bw)]
            print(f"{name}: depth 32 / depth 2 = {b['compile'] / a['compile']:.2f} (goal <= 1.5); by stage: "
                  + ", ".join(f"{k} {b[k] / a[k]:.2f}" for k in ("egraph", "roll", "after") if a[k]))


if __name__ == "__main__":
    main()
