"""An embedding table's training step on the CPU: luminal ``backend="cpu"`` vs PyTorch eager.

    python bench/embedding_step.py                 # TinyLlama's table (32000 x 2048), then a small one
    python bench/embedding_step.py --tables small  # one of them
    python bench/embedding_step.py --quick         # a few steps per side

The token embeddings of a language model take the gradient of a gather: a scatter-add of the batch's
rows into a table of zeros (``codegen/lowering/indexing.py``'s ``scatter_add``), then the optimizer's
pass over the whole table. Same work on both sides: ``nn.Embedding(V, D)`` (torch's loaded from
luminal's weights), a batch of 1 x 256 random token ids (repeats among them), loss = the embeddings'
mean times 0.5 plus their squares' mean, SGD(lr=0.1) (no momentum: the step is the scatter and one
pass over the table). Before timing, the losses of the first two steps are asserted equal and so are
the tables after them (within a tenth of the norm of what the two updates changed: a side that skipped
its update would differ by all of it; the losses alone could not tell).

Timing follows ``bench/cpu_train.py`` (``benchlib.alternate``): the sides alternate in blocks of steps,
each after a pause and a warm-up step; steps rotate over four batches; the table gives the median and
the 10th-90th percentile spread. The floor is the parameters read and written once (a dense update
of the whole table, as both sides make), at the copy bandwidth measured here (bytes read + written).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import alternate, blas_threads, copy_bandwidth, fmt, header, load_avg, pct  # noqa: E402

import luminal as lm  # noqa: E402
from luminal import nn, train  # noqa: E402

TABLES = {"tinyllama": (32000, 2048), "small": (8192, 256)}
TOKENS = 256


def sides(vocab: int, dim: int):
    """(luminal step, torch step, batches, weights): each step takes a (1, TOKENS) int array and returns
    the loss; ``weights()`` gives (luminal's table, torch's table) as numpy arrays, as they are now."""
    lm.manual_seed(0)
    emb = nn.Embedding(vocab, dim)
    g = lm.Graph()
    ids = g.input("ids", (1, TOKENS), dtype=lm.int32)
    h = emb(ids)
    step = train.compile_step(h.mean() * 0.5 + (h * h).mean(), train.SGD(emb.parameters(), lr=0.1))
    temb = torch.nn.Embedding(vocab, dim)
    with torch.no_grad():
        temb.weight.copy_(torch.from_numpy(np.array(emb.weight.data)))
    opt = torch.optim.SGD(temb.parameters(), lr=0.1)

    def torch_step(x):
        opt.zero_grad(set_to_none=True)
        t = temb(x)
        loss = t.mean() * 0.5 + (t * t).mean()
        loss.backward()
        opt.step()
        return loss.item()

    rng = np.random.default_rng(1)
    batches = [rng.integers(0, vocab, (1, TOKENS)).astype(np.int32) for _ in range(4)]
    def weights():
        return np.array(emb.weight.data), temb.weight.detach().numpy().copy()

    return (lambda x: float(step(ids=x))), torch_step, batches, weights


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a few steps per side")
    ap.add_argument("--tables", nargs="+", choices=list(TABLES), default=list(TABLES))
    args = ap.parse_args()
    threads = blas_threads()
    torch.set_num_threads(threads)
    bandwidth = copy_bandwidth()
    print(header(threads, f"embedding training step (SGD), {TOKENS} tokens; copy bandwidth {bandwidth / 1e9:.1f} GB/s"))
    print()
    print("| table | luminal ms (p10-p90) | torch eager ms (p10-p90) | luminal / eager | floor ms |")
    print("|---|---|---|---|---|")
    for name in dict.fromkeys(args.tables):
        vocab, dim = TABLES[name]
        lm_step, torch_step, batches, weights = sides(vocab, dim)
        start = weights()[1]
        for k in range(2):
            a, b = lm_step(batches[k]), torch_step(torch.from_numpy(batches[k]).long())
            assert abs(a - b) <= 1e-4 * max(1.0, abs(b)), f"{name} step {k + 1}: loss {a} (luminal) vs {b} (torch)"
        # The losses cannot see a missing update (it moves them by far less than 1e-4): the tables must
        # agree after the two steps to within a tenth of what the updates moved them.
        w_lm, w_t = weights()
        moved, apart = np.linalg.norm(w_t - start), np.linalg.norm(w_lm - w_t)
        assert moved > 0 and apart <= 0.1 * moved, (
            f"{name}: after 2 steps the tables differ by {apart:.3e}, the updates moved torch's by {moved:.3e}")
        samples = 4 if args.quick else 12
        times = alternate({"luminal": lm_step, "torch": torch_step}, samples=samples, rounds=2 if args.quick else 4,
                          warmup=1, pause_s=0.5,
                          args={"luminal": [(x,) for x in batches],
                                "torch": [(torch.from_numpy(x).long(),) for x in batches]})
        floor = 2 * vocab * dim * 4 / bandwidth  # the parameters read and written
        pl, pt = pct(times["luminal"]), pct(times["torch"])
        print(f"| {name} {vocab} x {dim} | {fmt(pl)} | {fmt(pt)} | {pl[1] / pt[1]:.2f} | {floor * 1e3:.1f} |")
    print()
    print(f"load average now {load_avg()}")


if __name__ == "__main__":
    main()
