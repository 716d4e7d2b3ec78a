"""Train an MLP (default) or a small CNN on MNIST with luminal.

    python examples/mnist/train.py                      # MLP on the shipped 4,000/1,000 subset
    python examples/mnist/train.py --model cnn          # conv-pool-conv-pool-linear
    python examples/mnist/train.py --data ~/mnist       # the full dataset from its IDX files
    mpiexec -n 2 python examples/mnist/train.py --data-parallel   # 2 processes, each half of every batch

The whole train step (forward, backward, optimizer update) is one compiled program; the batch size
is a symbolic dim, so the last, smaller batch of an epoch runs the same program. ``--save`` writes a
checkpoint after every epoch and ``--resume`` continues from one exactly (same data order, same
optimizer state).

Each step checks that the loss is finite (``check_finite``; ``--no-check-finite`` turns it off): a
learning rate far too large makes the loss inf, then NaN, and without the check the run would go on
training, and saving checkpoints of, NaN weights. With it the run stops at the first bad step, with
the weights of the step before, and the last checkpoint written stays the last good one.

``--data-parallel`` under ``mpiexec -n N`` (``pip install -e ".[distributed]"``): every rank draws the
same global batches (``--batch-size`` stays the global size) and trains on its share of each
(``luminal.distributed.shard``); the step sums the gradients over the ranks, so the run prints the
losses and accuracy of a single process with the same flags. The held-out digits are shared out the
same way. Only rank 0 prints and saves; every rank resumes from the same ``--resume`` file.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np
from tqdm import tqdm

import luminal as lm
from luminal import distributed as dist
from luminal import nn, train
from luminal.data import batches, load_mnist
from luminal.train import NonFiniteLossError


class MLP(nn.Module):
    def __init__(self, hidden: int = 256):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(784, hidden), nn.Linear(hidden, 10)

    def forward(self, x):
        return self.fc2(self.fc1(x).relu())


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 5, padding=2)
        self.conv2 = nn.Conv2d(16, 32, 5, padding=2)
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(32 * 7 * 7, 10)

    def forward(self, x):
        x = x.reshape(-1, 1, 28, 28)
        x = self.pool(self.conv1(x).relu())
        x = self.pool(self.conv2(x).relu())
        return self.fc(x.flatten(1))


MODELS = {"mlp": MLP, "cnn": CNN}
OPTIMIZERS = {"adamw": train.AdamW, "adam": train.Adam, "sgd": train.SGD}


def _int_at_least(least: int):
    """An argparse type: an int >= ``least``, so ``--batch-size 0`` is a usage error, not a
    ZeroDivisionError traceback from the batching."""
    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if v < least:
            raise argparse.ArgumentTypeError(f"must be at least {least}, got {v}")
        return v
    return parse


def _positive_float(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not (math.isfinite(v) and v > 0):
        raise argparse.ArgumentTypeError(f"must be a positive finite number, got {text}")
    return v


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--model", choices=MODELS, default="mlp", help="the network to train")
    p.add_argument("--epochs", type=_int_at_least(1), default=None,
                   help="passes over the data; None: 5 (mlp), 4 (cnn)")
    p.add_argument("--batch-size", type=_int_at_least(1), default=64, help="digits per step")
    p.add_argument("--lr", type=_positive_float, default=None,
                   help="learning rate; None: 1e-3 (adam/adamw), 0.05 (sgd)")
    p.add_argument("--optimizer", choices=OPTIMIZERS, default="adamw", help="the update rule")
    p.add_argument("--backend", choices=lm.backend_names(), default="cpu", help="where the programs run")
    p.add_argument("--seed", type=_int_at_least(0), default=0, help="initial weights and data order")
    p.add_argument("--data", type=Path, default=None,
                   help="directory with the MNIST IDX files; None: the shipped 4,000/1,000 subset")
    p.add_argument("--save", type=Path, default=None, help="checkpoint written after every epoch")
    p.add_argument("--resume", type=Path, default=None, help="checkpoint to continue from")
    p.add_argument("--limit", type=_int_at_least(4), default=None,
                   help="use only the first N train and N//4 test digits; None: all")
    p.add_argument("--no-check-finite", dest="check_finite", action="store_false",
                   help="do not stop when the loss becomes inf or NaN")
    p.add_argument("--data-parallel", action="store_true",
                   help="under mpiexec -n N: each rank trains on its share of every batch")
    return p.parse_args(argv)


def _sizes(n: int, batch_size: int) -> set:
    """The batch sizes of an epoch of ``n`` examples: the full one and the last one's."""
    return {min(n, batch_size), n % batch_size or min(n, batch_size)} - {0}


def _local(n: int, dp: bool) -> int:
    """This rank's share of a batch of ``n`` (all of it without data parallelism)."""
    return len(dist.shard(range(n))) if dp else n


def main(argv=None) -> dict:
    args = parse_args(argv)
    dp = args.data_parallel
    main_rank = not dp or dist.rank() == 0
    say = print if main_rank else (lambda *a, **k: None)
    epochs = args.epochs if args.epochs is not None else (4 if args.model == "cnn" else 5)
    lr = args.lr if args.lr is not None else (0.05 if args.optimizer == "sgd" else 1e-3)
    data = load_mnist(args.data)
    xtr, ytr, xte, yte = data.train_images, data.train_labels, data.test_images, data.test_labels
    if args.limit:
        xtr, ytr, xte, yte = xtr[:args.limit], ytr[:args.limit], xte[:args.limit // 4], yte[:args.limit // 4]
    say(f"data: {data.source}: {len(xtr)} train / {len(xte)} held-out digits")

    lm.manual_seed(args.seed)
    model = MODELS[args.model]()
    g = lm.Graph()
    x, y = g.input("x", ("B", 784)), g.input("y", ("B",), dtype=lm.int32)
    model.train()
    loss = train.cross_entropy(model(x), y)
    opt = OPTIMIZERS[args.optimizer](model.parameters(), lr=lr)
    t0 = time.perf_counter()
    step = train.compile_step(loss, opt, backend=args.backend, check_finite=args.check_finite, data_parallel=dp)
    for n in _sizes(len(xtr), args.batch_size):  # the code for every batch size an epoch has, now
        step.prepare(x=(_local(n, dp), 784), y=(_local(n, dp),))
    model.eval()
    predict = lm.compile(model(x).argmax(-1), backend=args.backend)
    for n in _sizes(len(xte), 500):
        predict.prepare(x=(_local(n, dp), 784))
    ranks = f", {dist.world_size()} ranks" if dp else ""
    say(f"model: {args.model} ({sum(p.numel() for p in model.parameters()):,} parameters), "
          f"{args.optimizer} lr={lr}, backend={args.backend}{ranks}; compiled in {time.perf_counter() - t0:.1f} s")

    start = 0
    if args.resume is not None:
        start = train.load_checkpoint(args.resume, model=model, optimizer=opt, step=step)["epoch"]
        say(f"resumed from {args.resume} after epoch {start}")

    history = []
    t_start = time.perf_counter()
    for epoch in range(start, epochs):
        # data order depends only on seed and epoch
        epoch_batches = batches((xtr, ytr), args.batch_size, shuffle=True, seed=[args.seed, epoch])
        n_batches = -(-len(xtr) // args.batch_size)
        bar = tqdm(epoch_batches, total=n_batches, desc=f"epoch {epoch + 1}/{epochs}",
                   unit="batch", leave=True, file=sys.stdout, disable=not main_rank)
        seen, total, t_epoch = 0, 0.0, time.perf_counter()
        try:
            for xb, yb in bar:
                xs, ys = dist.shard(xb, yb) if dp else (xb, yb)
                total += step(x=xs, y=ys) * len(xb)  # (data parallel: the loss of the whole batch)
                seen += len(xb)
                rate = seen / (time.perf_counter() - t_epoch)
                bar.set_postfix(loss=f"{total / seen:.4f}", digits_per_s=f"{rate:.0f}")
        except NonFiniteLossError as e:  # stop before this epoch's save overwrites a good checkpoint
            kept = f"; {args.save} was not overwritten" if args.save is not None else ""
            raise SystemExit(f"stopped in epoch {epoch + 1}: {e}{kept}" if main_rank else 1) from None
        finally:
            bar.close()
        correct = sum(int((predict(x=xb) == yb).sum()) for xb, yb in
                      (dist.shard(*b) if dp else b for b in batches((xte, yte), 500)))
        if dp:  # every rank counted its share of the held-out digits
            correct = int(dist.all_reduce(np.array([correct], np.int64))[0])
        acc = correct / len(xte)
        history.append({"epoch": epoch + 1, "loss": total / seen, "accuracy": acc})
        say(f"epoch {epoch + 1}: train loss {total / seen:.4f}, held-out accuracy {acc:.2%} "
              f"({time.perf_counter() - t_start:.1f} s elapsed)")
        if args.save is not None and main_rank:
            train.save_checkpoint(args.save, model=model, optimizer=opt, step=step, extra={"epoch": epoch + 1})
    return {"history": history, "seconds": time.perf_counter() - t_start}


if __name__ == "__main__":
    main()
