"""Run under ``mpiexec -n 2`` by ``test_data_parallel.py``: every case in one launch (MPI start-up and
luminal's import are paid once). Each rank runs each case and writes a JSON line to ``rank<r>.jsonl``
in the directory given as the first argument (one file per rank: two ranks' lines on one stdout can
interleave). A case compares the data-parallel step on this rank's shares of global batches with a
single-process step on the whole batches, computed in this same process (cheap for these models).

The failure cases raise errors that every rank agrees on, so the launch goes on to the next case.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np

import luminal as lm
from luminal import distributed as dist
from luminal import nn, train

OPTIMIZERS = {
    "sgd": lambda ps, lr=0.1: train.SGD(ps, lr=lr, momentum=0.9),
    "adamw": lambda ps, lr=1e-2: train.AdamW(ps, lr=lr, weight_decay=0.01),
    "lamb": lambda ps, lr=1e-2: train.LAMB(ps, lr=lr, weight_decay=0.01),
}


def build(opt="adamw", hidden=16, frozen=False, seq=False, batchnorm=False, seed=0, lr=None, **options):
    """(model, optimizer, step): a small classifier of 12 features (``seq``: of (B, S, 12) sequences,
    averaged over S) into 4 classes."""
    lm.manual_seed(seed)
    layers = [nn.Linear(12, hidden)] + ([nn.BatchNorm1d(hidden)] if batchnorm else []) + [nn.Tanh(),
                                                                                           nn.Linear(hidden, 4)]
    model = nn.Sequential(*layers)
    if frozen:
        model[0].bias.requires_grad_(False)
    g = lm.Graph()
    x = g.input("x", ("B", "S", 12) if seq else ("B", 12))
    y = g.input("y", ("B",), dtype=lm.int32)
    logits = model(x).mean(1) if seq else model(x)
    optimizer = OPTIMIZERS[opt](model.parameters(), **({} if lr is None else {"lr": lr}))
    step = train.compile_step(train.cross_entropy(logits, y), optimizer, **options)
    return model, optimizer, step


def batches(sizes, seq=None, seed=7):
    rng = np.random.default_rng(seed)
    shape = (12,) if seq is None else (seq, 12)
    return [(rng.standard_normal((n, *shape)).astype(np.float32), rng.integers(0, 4, n).astype(np.int32))
            for n in sizes]


def params(model) -> dict:
    return {k: np.array(v, copy=True) for k, v in model.state_dict().items()}


def rel_diff(a: dict, b: dict) -> float:
    return max(float(np.abs(a[k] - b[k]).max() / (np.abs(b[k]).max() + 1e-6)) for k in b)


def spread(model) -> float:
    """The largest difference of any parameter from its mean over the ranks (0: identical everywhere)."""
    worst = 0.0
    for v in model.state_dict().values():
        v = np.array(v, np.float64)
        mean = dist.all_reduce(v.copy(), "mean")
        worst = max(worst, float(np.abs(v - mean).max()))
    return worst


def reference(data, **kw):
    model, _, step = build(**kw)
    losses = [step(x=x, y=y) for x, y in data]
    return losses, params(model), step


def parallel(data, **kw):
    model, _, step = build(data_parallel=True, **kw)
    losses = [step(**dict(zip(("x", "y"), dist.shard(x, y)))) for x, y in data]
    return losses, model, step


def equivalence(sizes=(8, 8, 8, 8), tol=1e-5, **kw):
    data = batches(sizes)
    ref_losses, ref_params, ref_step = reference(data, **kw)
    losses, model, step = parallel(data, **kw)
    out = {"loss_diff": max(abs(a - b) for a, b in zip(losses, ref_losses)), "param_diff": rel_diff(params(model),
           ref_params), "spread": spread(model), "tol": tol, "losses": losses, "ref_losses": ref_losses}
    if step.last_grad_norm is not None:
        out["norm_diff"] = abs(step.last_grad_norm - ref_step.last_grad_norm)
    return out


def ignore_index(ignored: int):
    """cross_entropy over targets of which the first ``ignored`` of every global batch of 8 are ignored
    (-100, padding: all in rank 0's share of 4), a mean over the targets it counts. With the count
    registered as the loss's mean denominator (``graph.mean_counts``, by cross_entropy itself), the data-parallel
    step weights each rank by its counted targets: the losses and parameters of one process on the whole
    batches. ``ignored=4``: rank 0's share counts none."""
    def make(data_parallel):
        lm.manual_seed(0)
        model = nn.Sequential(nn.Linear(12, 16), nn.Tanh(), nn.Linear(16, 4))
        g = lm.Graph()
        x, y = g.input("x", ("B", 12)), g.input("y", ("B",), dtype=lm.int32)
        loss = train.cross_entropy(model(x), y)
        assert loss.node.id in g.mean_counts  # (cross_entropy registers the count of its kept targets)
        return model, train.compile_step(loss, OPTIMIZERS["sgd"](model.parameters()), data_parallel=data_parallel)

    data = batches((8, 8, 8))
    for _, y in data:
        y[:ignored] = -100
    ref, ref_step = make(False)
    ref_losses = [ref_step(x=x, y=y) for x, y in data]
    model, step = make(True)
    losses = [step(**dict(zip(("x", "y"), dist.shard(x, y)))) for x, y in data]
    return {"loss_diff": max(abs(a - b) for a, b in zip(losses, ref_losses)),
            "param_diff": rel_diff(params(model), params(ref)), "spread": spread(model), "tol": 1e-5}


def agreed_failure(bad_call, make_bad, **kw):
    """Call 2 fails (on rank 1 only, by ``make_bad``); every rank must raise the same error there, change
    nothing, and train on as a single process that skipped that batch."""
    data = batches((8, 8, 8))
    model, _, step = build(data_parallel=True, check_finite=True, **kw)
    error = None
    for i, (x, y) in enumerate(data):
        xs, ys = dist.shard(x, y)
        if i == bad_call:
            xs, ys = make_bad(xs.copy(), ys.copy())
            try:
                step(x=xs, y=ys)
            except (train.NonFiniteLossError, dist.DistributedError) as e:
                error = f"{type(e).__name__}: {e}"
            continue
        step(x=xs, y=ys)
    _, ref_params, _ = reference([d for i, d in enumerate(data) if i != bad_call], check_finite=True, **kw)
    return {"error": error, "param_diff": rel_diff(params(model), ref_params), "spread": spread(model), "tol": 1e-5,
            "calls": step.calls}


def on_rank_1(change):
    return lambda x, y: change(x, y) if dist.rank() == 1 else (x, y)


def first_batch(seq=None) -> dict:
    """This rank's share of a global batch of 8 (``seq``: of sequences that long)."""
    return dict(zip("xy", dist.shard(*batches((8,), seq=seq)[0])))


def expect_mismatch(first_call, **kw):
    try:
        model, _, step = build(data_parallel=True, **kw)
        step(**first_call())
    except dist.ProgramMismatchError as e:
        return {"error": f"{type(e).__name__}: {e}"}
    return {"error": None}


def swapped_order():
    """Two Linear layers of one shape (the same parameter names and shapes); rank 1's optimizer lists the
    second's parameters first. Summed by position, rank 0's gradient of one would be added to rank 1's of
    the other: the first call must refuse it."""
    lm.manual_seed(0)
    a, b, head = nn.Linear(12, 12), nn.Linear(12, 12), nn.Linear(12, 4)
    g = lm.Graph()
    x, y = g.input("x", ("B", 12)), g.input("y", ("B",), dtype=lm.int32)
    groups = [list(a.parameters()), list(b.parameters())]
    if dist.rank() == 1:
        groups.reverse()
    step = train.compile_step(train.cross_entropy(head(b(a(x).tanh()).tanh()), y),
                              train.SGD([*groups[0], *groups[1], *head.parameters()], lr=0.5), data_parallel=True)
    try:
        step(**first_batch())
    except dist.ProgramMismatchError as e:
        return {"error": f"{type(e).__name__}: {e}"}
    return {"error": None}


def checkpoint(path):
    data = batches((8, 8, 8, 8))
    _, ref_params, _ = reference(data)
    model, opt, step = build(data_parallel=True)
    for x, y in data[:2]:
        step(**dict(zip(("x", "y"), dist.shard(x, y))))
    if dist.rank() == 0:
        train.save_checkpoint(path, model=model, optimizer=opt, step=step)
    dist.barrier()
    model, opt, step = build(data_parallel=True, seed=1 + dist.rank())  # other weights: the load must replace them
    train.load_checkpoint(path, model=model, optimizer=opt, step=step)
    loaded_spread = spread(model)
    for x, y in data[2:]:
        step(**dict(zip(("x", "y"), dist.shard(x, y))))
    return {"loaded_spread": loaded_spread, "param_diff": rel_diff(params(model), ref_params),
            "spread": spread(model), "tol": 1e-5}


def scaler_resume(path):
    """GradScaler(growth_interval=3): rank 0 saves after two good steps (growth_tracker 2); new models of
    other weights load the file on rank 0 alone (the first call gives every rank rank 0's state) and train
    on. Every rank must take rank 0's scaler counters too: the scale grows at the same step on all, as in
    an uninterrupted run."""
    data = batches((8, 8, 8, 8))

    def make(seed=0):
        return build(data_parallel=True, seed=seed, compute_dtype=lm.float16,
                     scaler=train.GradScaler(init_scale=2.0**8, growth_interval=3))

    model, _, step = make()
    for x, y in data:
        step(**dict(zip(("x", "y"), dist.shard(x, y))))
    want, want_params = [step.scaler.get_scale(), step.scaler.growth_tracker], params(model)
    model, opt, step = make()
    for x, y in data[:2]:
        step(**dict(zip(("x", "y"), dist.shard(x, y))))
    if dist.rank() == 0:
        train.save_checkpoint(path, model=model, optimizer=opt, step=step)
    dist.barrier()
    model, opt, step = make(seed=1 + dist.rank())
    if dist.rank() == 0:
        train.load_checkpoint(path, model=model, optimizer=opt, step=step)
    history = []
    for x, y in data[2:]:
        step(**dict(zip(("x", "y"), dist.shard(x, y))))
        history.append([step.scaler.get_scale(), step.scaler.growth_tracker])
    return {"history": history, "want": want, "param_diff": rel_diff(params(model), want_params),
            "spread": spread(model)}


def dropout(path):
    """Dropout, one seed on every rank (lm.manual_seed(0), as a script does): the masks of each call as
    strings of 0/1 (this rank's 4 rows of 64). Run A trains 4 calls (rank 0 saves after 2); run B repeats
    it; run C builds models of other seeds, loads the checkpoint on every rank and makes calls 3 and 4;
    run D loads it on rank 0 alone."""
    def make(seed):
        lm.manual_seed(seed)
        model = nn.Sequential(nn.Linear(12, 64), nn.Dropout(0.5), nn.Linear(64, 4))
        g = lm.Graph()
        x, y = g.input("x", ("B", 12)), g.input("y", ("B",), dtype=lm.int32)
        h = model[1](model[0](x))
        opt = OPTIMIZERS["sgd"](model.parameters())
        return model, opt, train.compile_step(train.cross_entropy(model[2](h), y), opt, outputs=[h],
                                              data_parallel=True)

    def masks(step, data):
        out = []
        for x, y in data:
            _, h = step(**dict(zip(("x", "y"), dist.shard(x, y))))
            out.append("".join("1" if v else "0" for v in (np.asarray(h) != 0).ravel()))
        return out

    data = batches((8, 8, 8, 8))
    model, opt, step = make(0)
    run_a = masks(step, data[:2])
    if dist.rank() == 0:
        train.save_checkpoint(path, model=model, optimizer=opt, step=step)
    dist.barrier()
    run_a += masks(step, data[2:])
    run_b = masks(make(0)[2], data)
    model, opt, step = make(1 + dist.rank())
    train.load_checkpoint(path, model=model, optimizer=opt, step=step)
    run_c = masks(step, data[2:])
    model, opt, step = make(1 + dist.rank())
    if dist.rank() == 0:
        train.load_checkpoint(path, model=model, optimizer=opt, step=step)
    run_d = masks(step, data[2:])
    return {"a": run_a, "b": run_b, "c": run_c, "d": run_d}


def batchnorm():
    data = batches((8, 8, 8))
    model, _, step = build(data_parallel=True, batchnorm=True)
    for x, y in data:
        step(**dict(zip(("x", "y"), dist.shard(x, y))))
    return {"spread": spread(model)}


def batchnorm_failure():
    """Call 2 fails on rank 1 only (a label out of range): every rank's BatchNorm statistics (and count of
    batches) must be those of a run that never saw that batch, as the parameters are."""
    data = batches((8, 8, 8))
    model, _, step = build(data_parallel=True, batchnorm=True)
    error = None
    for i, (x, y) in enumerate(data):
        xs, ys = dist.shard(x, y)
        if i == 1 and dist.rank() == 1:
            ys = np.full_like(ys, 99)
        try:
            step(x=xs, y=ys)
        except dist.RankFailedError as e:
            error = f"{type(e).__name__}: {e}"
    ref, _, ref_step = build(data_parallel=True, batchnorm=True)
    for i, (x, y) in enumerate(data):
        if i != 1:
            ref_step(**dict(zip(("x", "y"), dist.shard(x, y))))
    a, b = params(model), params(ref)
    return {"error": error, "diffs": {k: float(np.abs(a[k].astype(np.float64) - b[k]).max()) for k in b},
            "spread": spread(model)}


def out_of_step():
    """Both ranks call step A once; then rank 0 calls A again while rank 1 calls another step, B, for the
    first time."""
    _, _, a = build(data_parallel=True)
    _, _, b = build(data_parallel=True)
    a(**first_batch())
    error = None
    try:
        (a if dist.rank() == 0 else b)(**first_batch())
    except dist.DistributedError as e:
        error = f"{type(e).__name__}: {e}"
    return {"error": error, "calls": [a.calls, b.calls]}


def loader():
    """DataLoader(shuffle=True) and batches(shuffle=True) without a seed, on every rank, each global batch
    sharded: how many times the ranks together see each of 20 examples per epoch (1 when the ranks shuffle
    alike; each rank's own fresh entropy repeated some examples and skipped others)."""
    from luminal.data import DataLoader, Dataset
    from luminal.data import batches as epoch_batches

    ids = np.arange(20)
    loader = DataLoader(Dataset(ids), batch_size=6, shuffle=True)
    epochs = [list(loader), list(loader), [(b,) for b in DataLoader(ids, batch_size=6, shuffle=True)],  # (an array's
              list(epoch_batches(ids, 6, shuffle=True))]  # batches are arrays, as torch's; the others 1-tuples)
    seen = []
    for epoch in epochs:
        count = np.zeros(20, np.int64)
        np.add.at(count, np.concatenate([dist.shard(b[0]) for b in epoch]), 1)
        seen.append(dist.all_reduce(count).tolist())
    return {"seen": seen}


def collectives():
    r, n = dist.rank(), dist.world_size()
    a = np.full(3, r + 1, np.float32)
    b = np.arange(4, dtype=np.int64) * (r + 1)
    c = np.full(2, float(r), np.float64)
    dist.all_reduce(a)
    dist.all_reduce(b, op="sum")
    m = dist.all_reduce(np.full(2, float(r), np.float32), op="mean")
    dist.broadcast(c, root=1)
    dist.barrier()
    x, y = dist.shard(np.arange(5), np.arange(5) * 10)
    return {"size": n, "sum": a.tolist(), "int_sum": b.tolist(), "mean": m.tolist(), "bcast": c.tolist(),
            "shard": x.tolist(), "shard_y": y.tolist()}


CASES = {
    "sgd": lambda: equivalence(opt="sgd"),
    "adamw": lambda: equivalence(opt="adamw"),
    "lamb": lambda: equivalence(opt="lamb"),
    "clip": lambda: equivalence(clip_grad_norm=0.05),
    "clip_value": lambda: equivalence(opt="sgd", clip_grad_value=0.01),
    "frozen": lambda: equivalence(frozen=True),
    "uneven": lambda: equivalence(sizes=(8, 5, 3, 8)),
    "accumulate": lambda: equivalence(sizes=(8, 8, 8, 8), accumulate=2),
    # micro-batches of other sizes: the mean of each call's global mean, as the plain step (and torch's loss /
    # accumulate); a mean over the update's samples moved the parameters 0.36 (relative) away
    "accumulate_uneven": lambda: equivalence(sizes=(8, 2, 8, 2), opt="sgd", accumulate=2),
    "float16": lambda: equivalence(compute_dtype=lm.float16, tol=2e-2),
    "ignore_index": lambda: ignore_index(3),
    "ignore_index_whole_share": lambda: ignore_index(4),
    "nonfinite": lambda: agreed_failure(1, on_rank_1(lambda x, y: (np.full_like(x, np.nan), y))),
    "raising": lambda: agreed_failure(1, on_rank_1(lambda x, y: (x, np.full_like(y, 99)))),
    "mismatch_model": lambda: expect_mismatch(first_batch, hidden=16 + dist.rank()),
    "mismatch_lr": lambda: expect_mismatch(first_batch, lr=1e-2 * (1 + dist.rank())),
    "mismatch_dims": lambda: expect_mismatch(lambda: first_batch(seq=4 + dist.rank()), seq=True),
    "mismatch_order": swapped_order,
    "mismatch_scaler": lambda: expect_mismatch(first_batch, compute_dtype=lm.float16,
                                               scaler=train.GradScaler(growth_interval=1 + 2 * dist.rank())),
    "checkpoint": lambda: checkpoint(str(Path(sys.argv[1]) / "checkpoint.safetensors")),
    "scaler_resume": lambda: scaler_resume(str(Path(sys.argv[1]) / "scaler.safetensors")),
    "dropout": lambda: dropout(str(Path(sys.argv[1]) / "dropout.safetensors")),
    "batchnorm": batchnorm,
    "batchnorm_failure": batchnorm_failure,
    "collectives": collectives,
    "loader": loader,
    "out_of_step": out_of_step,  # (last: before the fix, MPI failed on it and ended the launch)
}


def main():
    with open(Path(sys.argv[1]) / f"rank{dist.rank()}.jsonl", "w") as f:
        for name, case in CASES.items():
            out = case()
            clean = {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in out.items()}
            f.write(json.dumps({"case": name, "rank": dist.rank(), **clean}) + "\n")
            f.flush()


if __name__ == "__main__":
    main()
