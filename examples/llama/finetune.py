"""Fine-tune a Llama checkpoint directory (Hugging Face layout) on a text file: next-token prediction.

    python examples/llama/finetune.py MODEL_DIR --data notes.txt --steps 200 --save tuned/
    python examples/llama/generate.py tuned/ --prompt "..."        # the saved directory loads like the original
    mpiexec -n 2 python examples/llama/finetune.py MODEL_DIR --data notes.txt --data-parallel   # 2 processes

The text is tokenized with the directory's ``tokenizer.json`` (the ``tokenizers`` package), one id
stream cut into windows of ``--seq-len`` + 1 tokens, shuffled per epoch from ``--seed``. One step
(forward, cross-entropy, backward, gradient clipping by global norm, AdamW update) is one compiled
program whose decoder layers are rolled (``--report`` prints its compile report); the learning rate
follows a cosine schedule from ``--lr`` to ``--min-lr`` over the run without recompiling (it is a
runtime scalar). ``--save`` writes ``config.json`` + ``model.safetensors`` (float32; as a pair, see
``Llama.save_pretrained``) and copies the tokenizer files, so ``generate.py`` and Hugging Face load the result.

The training state (weights, AdamW moments, the schedule, the steps done) goes to ``--checkpoint``
(written atomically) every ``--save-every`` steps and when the run is interrupted: Ctrl-C waits for the
step under way to be applied entirely, saves, and exits with status 130. ``--resume FILE`` continues
from such a file exactly as the run would have gone on (same batches, same schedule); the file of
another run (other ``--steps``, ``--batch-size``, ``--seq-len``, ``--seed`` or other ``--data`` bytes)
is refused.

``--data-parallel`` under ``mpiexec -n N`` (``pip install -e ".[distributed]"``): every rank cuts the same
batches (``--batch-size`` stays the global count of windows) and trains on its share of each
(``luminal.distributed.shard``); the step sums the gradients over the ranks, so the losses are those of
one process with the same flags. Only rank 0 prints and writes ``--save`` and ``--checkpoint``; every
rank resumes from the same ``--resume`` file.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from pathlib import Path

import numpy as np
from tqdm import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parent))
from generate import load_tokenizer  # noqa: E402
from model import Llama, write_atomic  # noqa: E402

import luminal as lm  # noqa: E402
from luminal import distributed as dist  # noqa: E402
from luminal import train  # noqa: E402
from luminal.train import interrupts_deferred  # noqa: E402

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "generation_config.json",
                   "tokenizer.model")


def windows(ids: np.ndarray, seq_len: int) -> np.ndarray:
    """Non-overlapping (seq_len + 1)-token windows of the stream: inputs are [:-1], targets [1:]."""
    n = (len(ids) - 1) // seq_len
    if n < 1:
        raise SystemExit(f"finetune.py: the data has {len(ids)} tokens, fewer than --seq-len + 1 = {seq_len + 1}")
    return np.stack([ids[i * seq_len:(i + 1) * seq_len + 1] for i in range(n)]).astype(np.int32)


def batches(data: np.ndarray, batch_size: int, steps: int, seed: int):
    """``steps`` batches, cycling over shuffled epochs; the order depends only on ``seed``."""
    epoch, out = 0, []
    while len(out) < steps:
        order = np.random.default_rng([seed, epoch]).permutation(len(data))
        out.extend(data[order[i:i + batch_size]] for i in range(0, len(order), batch_size))
        epoch += 1
    return out[:steps]


def build_step(model: Llama, lr: float, weight_decay: float, clip: float, backend: str, data_parallel: bool = False):
    """(step, optimizer): ``step(ids=(B, S), targets=(B, S))`` -> mean token cross-entropy; B and S are
    symbolic, so a last smaller batch runs the same program. ``data_parallel``: each rank of an MPI job
    calls it with its share of every batch."""
    model.train()
    g = lm.Graph()
    ids = g.input("ids", ("B", "S"), dtype=lm.int32)
    targets = g.input("targets", ("B", "S"), dtype=lm.int32)
    logits = model(ids)
    loss = train.cross_entropy(logits.reshape(-1, model.config.vocab_size), targets.reshape(-1))
    opt = train.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    step = train.compile_step(loss, opt, backend=backend, clip_grad_norm=clip if clip > 0 else None,
                              data_parallel=data_parallel)
    return step, opt


def save(model: Llama, src: Path, out: Path) -> None:
    model.save_pretrained(out)
    for name in TOKENIZER_FILES:
        if (src / name).is_file() and src.resolve() != out.resolve():
            write_atomic(out / name, (src / name).read_bytes())


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("model_dir", type=Path)
    p.add_argument("--data", type=Path, required=True, help="a UTF-8 text file")
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--seq-len", type=int, default=64)
    p.add_argument("--lr", type=float, default=3e-4)
    p.add_argument("--min-lr", type=float, default=0.0, help="the cosine schedule's floor")
    p.add_argument("--weight-decay", type=float, default=0.0)
    p.add_argument("--clip", type=float, default=1.0, help="max global gradient norm (0: no clipping)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--backend", default="cpu")
    p.add_argument("--save", type=Path, default=None, help="output directory (HF layout)")
    p.add_argument("--report", action="store_true", help="print the train step's compile report")
    p.add_argument("--checkpoint", type=Path, default=Path("finetune-state.safetensors"),
                   help="training state written every --save-every steps and on Ctrl-C (default: %(default)s)")
    p.add_argument("--save-every", type=int, default=0, metavar="N", help="write --checkpoint every N steps")
    p.add_argument("--resume", type=Path, default=None, help="a --checkpoint file to continue from")
    p.add_argument("--data-parallel", action="store_true",
                   help="under mpiexec -n N: each rank trains on its share of every batch")
    args = p.parse_args(argv)
    if args.save_every < 0:
        p.error(f"--save-every must be >= 0, got {args.save_every}")
    return args


RUN_KEYS = ("steps", "batch_size", "seq_len", "seed", "data")  # what fixes the batches and the schedule


def data_id(path: Path) -> dict:
    """What identifies ``--data``: its size and SHA-256 (the path only for messages: a moved file is the
    same data, an edited one is not). Hashing a text file costs far less than one train step."""
    raw = path.read_bytes()
    return {"path": str(path), "bytes": len(raw), "sha256": hashlib.sha256(raw).hexdigest()}


def run_id(args, data: dict) -> dict:
    """The run a training state belongs to: ``--resume`` continues only the same run."""
    return {**{k: getattr(args, k) for k in RUN_KEYS if k != "data"}, "data": data}


def save_state(path: Path, model, opt, sched, step, run: dict, done: int) -> None:
    """The training state after ``done`` steps, for ``--resume`` (one file, written atomically)."""
    train.save_checkpoint(path, model=model, optimizer=opt, scheduler=sched, step=step,
                          extra={"done": done, "run": run})


def _shown(key: str, value) -> str:
    if key == "data" and isinstance(value, dict):
        return f"{value.get('path')} ({value.get('bytes')} bytes, sha256 {str(value.get('sha256'))[:12]}...)"
    return str(value)


def _same_run(key: str, there, here) -> bool:
    if key == "data":  # the same bytes, wherever the file now is
        return isinstance(there, dict) and all(there.get(k) == here[k] for k in ("bytes", "sha256"))
    return there == here


def resume(path: Path, model, opt, sched, step, run: dict) -> int:
    """Load ``--resume``'s state; the steps it had done. A run of other steps, batch size, sequence
    length, seed or data would not continue the same run (other batches, another schedule): refused."""
    extra = train.load_checkpoint(path, model=model, optimizer=opt, scheduler=sched, step=step)
    there = extra.get("run") if isinstance(extra, dict) else None
    done = extra.get("done") if isinstance(extra, dict) else None
    if not isinstance(there, dict) or isinstance(done, bool) or not isinstance(done, int) or done < 0:
        has = f"keys {sorted(map(str, extra))}" if isinstance(extra, dict) else f"a JSON {type(extra).__name__}"
        raise SystemExit(f"finetune.py: --resume {path} is a luminal checkpoint but not a finetune.py training "
                         f"state (its extra values, {has}, lack the 'run' and 'done' that finetune.py writes): "
                         f"give a --checkpoint file written by finetune.py")
    diff = [f"--{k.replace('_', '-')} {_shown(k, there[k]) if k in there else 'not recorded'} there, "
            f"{_shown(k, run[k])} here" for k in RUN_KEYS if not _same_run(k, there.get(k), run[k])]
    if diff:
        raise SystemExit(f"finetune.py: {path} is the state of another run ({'; '.join(diff)})")
    return done


def main(argv=None) -> dict:
    args = parse_args(argv)
    dp = args.data_parallel
    main_rank = not dp or dist.rank() == 0
    say = print if main_rank else (lambda *a, **k: None)
    mine = dist.shard if dp else (lambda b: b)  # this rank's windows of a batch
    tokenizer = load_tokenizer(args.model_dir, required=True)
    model = Llama.from_pretrained(args.model_dir)
    cfg = model.config
    if args.seq_len > cfg.max_position_embeddings:
        raise SystemExit(f"finetune.py: --seq-len {args.seq_len} exceeds max_position_embeddings "
                         f"({cfg.max_position_embeddings})")
    ids = np.asarray(tokenizer.encode(args.data.read_text()).ids, np.int64)
    if ids.size and ids.max() >= cfg.vocab_size:
        raise SystemExit(f"finetune.py: the tokenizer gives id {ids.max()} >= vocab_size {cfg.vocab_size}")
    data = windows(ids, args.seq_len)
    run = run_id(args, data_id(args.data))
    say(f"data: {args.data}: {len(ids):,} tokens, {len(data)} windows of {args.seq_len + 1}")

    t0 = time.perf_counter()
    step, opt = build_step(model, args.lr, args.weight_decay, args.clip, args.backend, dp)
    everything = batches(data, args.batch_size, args.steps, args.seed)
    for shape in {mine(b)[:, :-1].shape for b in everything}:  # the code for every batch shape of the run, now
        step.prepare(ids=shape, targets=shape)
    sched = train.CosineAnnealingLR(opt, T_max=args.steps, eta_min=args.min_lr)
    say(f"model: {cfg.num_hidden_layers} layers, hidden {cfg.hidden_size}, "
          f"{sum(p.numel() for p in model.parameters()):,} parameters; AdamW lr={args.lr} cosine to {args.min_lr}, "
          f"clip {args.clip}; backend {args.backend}; compiled in {time.perf_counter() - t0:.1f} s")
    if args.report:
        step.report()

    done = 0
    if args.resume is not None:
        done = resume(args.resume, model, opt, sched, step, run)
        say(f"resumed from {args.resume} after step {done}")
    losses = []
    todo = everything[done:]
    bar = tqdm(todo, total=args.steps, initial=done, unit="step", file=sys.stdout, desc="finetune",
               disable=not main_rank)
    t_start, tokens = time.perf_counter(), 0
    try:
        for b in bar:
            with interrupts_deferred():  # the step, its schedule and its count: all three or none
                part = mine(b)
                losses.append(step(ids=part[:, :-1], targets=part[:, 1:]))  # (data parallel: the whole batch's)
                sched.step()
                done += 1
            tokens += b[:, 1:].size
            bar.set_postfix(loss=f"{losses[-1]:.4f}", lr=f"{opt.param_groups[0]['lr']:.2e}",
                            tok_s=f"{tokens / (time.perf_counter() - t_start):.0f}")
            if args.save_every and done % args.save_every == 0 and main_rank:
                save_state(args.checkpoint, model, opt, sched, step, run, done)
    except KeyboardInterrupt:
        bar.close()
        if main_rank:
            save_state(args.checkpoint, model, opt, sched, step, run, done)
        say(f"interrupted after step {done} of {args.steps}: saved {args.checkpoint}; "
              f"continue with --resume {args.checkpoint}")
        return {"losses": losses, "model": model, "interrupted": True, "done": done}
    bar.close()
    if losses:
        k = max(1, len(losses) // 10)
        say(f"loss: first {k} steps {np.mean(losses[:k]):.4f} -> last {k} steps {np.mean(losses[-k:]):.4f}")
    if args.save is not None and main_rank:
        save(model, args.model_dir, args.save)
        print(f"saved {args.save}")
    return {"losses": losses, "model": model, "interrupted": False, "done": done}


if __name__ == "__main__":
    sys.exit(130 if main()["interrupted"] else 0)  # 130: the shell's status for a run stopped by Ctrl-C
