"""Llama on the CPU: luminal ``backend="cpu"`` (``examples/llama``) vs the torch reference in eager mode.

    python bench/llama_cpu.py                         # small (4 layers, width 256) and TinyLlama-1.1B-shaped, f32
    python bench/llama_cpu.py --models small --rounds 5
    python bench/llama_cpu.py --decode-tokens 16

Same work on both sides, batch 1, float32: the same random weights (luminal's arrays, shared with torch
without a copy), a 128-token prompt (prefill: all of it at once), then greedy decode one token at a time
with a KV cache: luminal's two compiled programs (prefill and decode, each compiled once) and the torch
reference of ``tests/examples/llama_reference.py`` (HF's eager formulation: concatenated cache,
``repeat_interleave`` for grouped-query attention), under ``torch.inference_mode``. Both sides apply the
final norm and the LM head to the last position only (luminal's ``last_only=True``; torch through
``forward_last``), so the prefill does the same work on both. Before timing, torch's last-position
logits are asserted equal to its full forward's last row, luminal's prefill logits to those, and both
sides must pick the same greedy tokens.

Before timing, each side runs the prompt and two decode steps untimed (luminal's first call of each
program generates its kernels: the ``compile`` line gives that code generation, with the one call's
work, on top of building the session), and the decode logits are checked equal after them.
Timing follows ``bench/cpu_train.py``: the sides alternate in rounds (prefill, then the decode steps),
each after a pause, so load from other work hits both alike; the table gives medians and the 10th-90th
percentile spread of the decode steps. Ratios are luminal / torch (lower is better; decode goal <= 1.0).
The training step (small model: batch 4 x 128 tokens, cross-entropy, AdamW, clipping) is timed the same
way against torch autograd + ``torch.optim.AdamW``; before timing, the losses of the first two steps and
the parameters after them are asserted equal (parameters within a tenth of the norm of what the two
updates changed: the losses alone could not see a skipped update).

The **memory-bandwidth floor** of decode is the weight bytes each token must read (every parameter but the
embedding table, of which a token reads one row) divided by the copy
bandwidth measured here (``np.copyto`` of 256 MiB, counting the bytes read and written, STREAM's
convention); "x floor" says how far each side's decode step is from it. Weights are random (numpy,
uniform in +-0.05): the TinyLlama shape is 1.1 B float32 parameters, about 4.4 GB, initialised in seconds.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples" / "llama"))
sys.path.insert(0, str(ROOT / "tests" / "examples"))
sys.path.insert(0, str(ROOT / "bench"))
import llama_reference  # noqa: E402
from benchlib import header  # noqa: E402
from cpu_train import blas_threads  # noqa: E402
from llama_reference import TorchLlama  # noqa: E402
from model import Llama, LlamaConfig, Session  # noqa: E402

import luminal as lm  # noqa: E402
from luminal import nn, train  # noqa: E402

SHAPES = {
    "small": dict(vocab_size=8192, hidden_size=256, intermediate_size=768, num_hidden_layers=4,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048),
    "tinyllama": dict(vocab_size=32000, hidden_size=2048, intermediate_size=5632, num_hidden_layers=22,
                      num_attention_heads=32, num_key_value_heads=4, max_position_embeddings=2048,
                      rms_norm_eps=1e-5),
}
PROMPT = 128
PAUSE_S = 0.5  # > torch's OpenMP spin after a call, ~0.25 s here (benchlib's docstring)
GOAL = 1.0
WARMUP_DECODE = 2  # untimed decode steps per side before timing (luminal's first one generates its code)


def copy_bandwidth(nbytes: int = 256 << 20, repeats: int = 7) -> float:
    """Bytes per second read + written by ``np.copyto`` of large float32 arrays (best of ``repeats``)."""
    src = np.ones(nbytes // 4, np.float32)
    dst = np.empty_like(src)
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        np.copyto(dst, src)
        best = min(best, time.perf_counter() - t0)
    return 2 * nbytes / best


@contextlib.contextmanager
def fast_init(seed: int = 0):
    """Linear and Embedding initialised with numpy's uniform fill (in place, ~1 ns per weight) instead of
    torch's kaiming / normal draws, which take minutes at 1.1 B parameters. Values do not matter here."""
    rng = np.random.default_rng(seed)

    def fill(self):
        for p in (self.weight, getattr(self, "bias", None)):
            if p is not None:
                rng.random(out=p.data, dtype=np.float32)
                p.data -= 0.5
                p.data *= 0.1

    saved = nn.Linear.reset_parameters, nn.Embedding.reset_parameters
    nn.Linear.reset_parameters = nn.Embedding.reset_parameters = fill
    try:
        yield
    finally:
        nn.Linear.reset_parameters, nn.Embedding.reset_parameters = saved


def make_models(shape: str):
    cfg = LlamaConfig(**SHAPES[shape])
    with fast_init():
        model = Llama(cfg)
    for name, p in model.named_parameters():
        if name.endswith("norm.weight"):
            p.data[...] = 1.0
    sd = {name: torch.from_numpy(p.data) for name, p in model.named_parameters()}  # shared, not copied
    return model, TorchLlama(cfg=cfg.to_dict(), sd=sd)


def forward_last(ref, ids, cache=None):
    """``ref.forward(ids, cache)`` with the final norm and the LM head on the last position only, the work
    luminal's programs do (``last_only=True``): the reference's ``rms_norm`` is wrapped, for this call,
    to keep only the last row when it is given the final norm's weight (the tensor itself, by identity)."""
    final, norm = ref.sd["model.norm.weight"], llama_reference.rms_norm

    def last_norm(x, w, eps):
        return norm(x[:, -1:] if w is final else x, w, eps)

    llama_reference.rms_norm = last_norm
    try:
        return ref.forward(ids, cache)
    finally:
        llama_reference.rms_norm = norm


def _pct(xs):
    return np.percentile(np.asarray(xs) * 1e3, [10, 50, 90])


def bench_inference(shape: str, rounds: int, decode_tokens: int) -> dict:
    model, ref = make_models(shape)
    # the bytes a decode step must read: every weight but the embedding table, of which it reads one row
    # (with tied embeddings the table is the output projection, read whole)
    embed = model.model.embed_tokens.weight
    weight_bytes = sum(p.data.nbytes for p in model.parameters() if p is not embed or model.config.tie_word_embeddings)
    t0 = time.perf_counter()
    session = Session(model, capacity=PROMPT + decode_tokens + 1)
    compile_s = time.perf_counter() - t0
    prompt = list(np.random.default_rng(1).integers(3, model.config.vocab_size, PROMPT))

    def lm_side(times):
        t0 = time.perf_counter()
        logits = session.start(prompt)
        times["prefill"].append(time.perf_counter() - t0)
        toks = []
        for _ in range(decode_tokens):
            toks.append(int(np.argmax(logits)))
            t0 = time.perf_counter()
            logits = session.step(toks[-1])
            times["decode"].append(time.perf_counter() - t0)
        return toks

    def torch_side(times):
        with torch.inference_mode():
            cache: list = []
            t0 = time.perf_counter()
            logits = forward_last(ref, torch.tensor([prompt]), cache)[0, -1]
            times["prefill"].append(time.perf_counter() - t0)
            toks = []
            for _ in range(decode_tokens):
                toks.append(int(logits.argmax()))
                t0 = time.perf_counter()
                logits = ref.forward(torch.tensor([[toks[-1]]]), cache)[0, -1]
                times["decode"].append(time.perf_counter() - t0)
        return toks

    with torch.inference_mode():
        want = ref.forward(torch.tensor([prompt]))[0, -1].numpy()
        last = forward_last(ref, torch.tensor([prompt]))
    assert last.shape[1] == 1, f"{shape}: the torch side's head ran on {last.shape[1]} positions, not 1"
    last = last[0, -1].numpy()
    err = float(np.abs(last - want).max() / np.abs(want).max())
    assert err < 1e-5, f"{shape}: torch's last-position head differs from its full forward ({err:.2e})"
    t0 = time.perf_counter()
    got = session.start(prompt)  # the first call generates the prefill program's kernels
    first_s = {"prefill": time.perf_counter() - t0}
    err = float(np.abs(got - want).max() / np.abs(want).max())
    assert err < 1e-3, f"{shape}: prefill logits differ (max relative error {err:.2e})"
    # Warm-up decode steps on both sides before timing: luminal's first decode call generates the decode
    # program's kernels, which must not land in the timed samples (torch's first steps warm up alike).
    with torch.inference_mode():
        cache: list = []
        tl = forward_last(ref, torch.tensor([prompt]), cache)[0, -1]
        tok = int(np.argmax(got))
        for i in range(WARMUP_DECODE):
            t0 = time.perf_counter()
            got = session.step(tok)
            if i == 0:
                first_s["decode"] = time.perf_counter() - t0
            tl = forward_last(ref, torch.tensor([[tok]]), cache)[0, -1]
            tok = int(np.argmax(got))
        err = float(np.abs(got - tl.numpy()).max() / np.abs(tl.numpy()).max())
    assert err < 1e-3, f"{shape}: decode logits differ after {WARMUP_DECODE} steps (max relative error {err:.2e})"
    times = {side: {"prefill": [], "decode": []} for side in ("luminal", "torch")}
    toks = {}
    for _ in range(rounds):
        for side, fn in (("luminal", lm_side), ("torch", torch_side)):
            time.sleep(PAUSE_S)
            toks[side] = fn(times[side])
    same = sum(a == b for a, b in zip(toks["luminal"], toks["torch"]))
    return {"shape": shape, "weight_bytes": weight_bytes, "compile_s": compile_s, "first_s": first_s, "times": times,
            "same_tokens": f"{same}/{decode_tokens}", "params": sum(p.numel() for p in model.parameters())}


def bench_train(rounds: int, steps: int, batch: int = 4, seq: int = 128) -> dict:
    model, ref = make_models("small")
    ref.sd = {k: v.clone().requires_grad_(True) for k, v in ref.sd.items()}  # each side updates its own copy
    names = [n for n, _ in model.named_parameters()]
    model.train()
    g = lm.Graph()
    ids, targets = g.input("ids", ("B", "S"), dtype=lm.int32), g.input("targets", ("B", "S"), dtype=lm.int32)
    logits = model(ids)
    loss = train.cross_entropy(logits.reshape(-1, model.config.vocab_size), targets.reshape(-1))
    t0 = time.perf_counter()
    step = train.compile_step(loss, train.AdamW(model.parameters(), lr=1e-4), clip_grad_norm=1.0)
    compile_s = time.perf_counter() - t0
    params = [ref.sd[n] for n in names]
    opt = torch.optim.AdamW(params, lr=1e-4)
    rng = np.random.default_rng(2)
    data = [rng.integers(0, model.config.vocab_size, (batch, seq + 1)).astype(np.int32) for _ in range(4)]
    tdata = [torch.from_numpy(d).long() for d in data]

    def lm_step(k):
        return step(ids=data[k][:, :-1], targets=data[k][:, 1:])

    def torch_step(k):
        opt.zero_grad(set_to_none=True)
        lg = ref.forward(tdata[k][:, :-1])
        out = F.cross_entropy(lg.reshape(-1, lg.shape[-1]), tdata[k][:, 1:].reshape(-1))
        out.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        return out.item()

    start = {n: ref.sd[n].detach().numpy().copy() for n in names}
    for k in range(2):
        a, b = lm_step(k), torch_step(k)
        assert abs(a - b) <= 1e-4 * max(1.0, abs(b)), f"train step {k + 1}: loss {a} (luminal) vs {b} (torch)"
    # The losses cannot see a missing update (a skipped second step moves the second loss by less than the
    # tolerance): the parameters must agree after the two steps to within a tenth of what the updates moved.
    lm_params = dict(model.named_parameters())
    moved = np.sqrt(sum(np.sum((ref.sd[n].detach().numpy() - start[n]) ** 2.0) for n in names))
    apart = np.sqrt(sum(np.sum((np.asarray(lm_params[n].data) - ref.sd[n].detach().numpy()) ** 2.0) for n in names))
    print(f"  train step: after 2 steps the parameters differ by {apart:.2e}; the updates moved them {moved:.2e}")
    assert moved > 0 and apart <= 0.1 * moved, f"train step: parameters {apart:.3e} apart, updates moved {moved:.3e}"
    times = {"luminal": [], "torch": []}
    for r in range(rounds):
        for side, fn in (("luminal", lm_step), ("torch", torch_step)):
            time.sleep(PAUSE_S)
            fn(r % 4)  # warm-up
            for i in range(steps):
                t0 = time.perf_counter()
                fn((r + i) % 4)
                times[side].append(time.perf_counter() - t0)
    return {"compile_s": compile_s, "times": times, "loops": step.report(show=False).loops}


def _load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "n/a"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--models", default="small,tinyllama", help="comma-separated: small, tinyllama")
    p.add_argument("--rounds", type=int, default=None, help="alternations per side (default: small 5, tinyllama 2)")
    p.add_argument("--decode-tokens", type=int, default=None, help="default: small 32, tinyllama 8")
    p.add_argument("--train-steps", type=int, default=5, help="timed train steps per side per round (0: skip)")
    args = p.parse_args(argv)
    threads = blas_threads()
    torch.set_num_threads(threads)
    bw = copy_bandwidth()
    print(header(threads, f"luminal backend=cpu vs torch eager; copy bandwidth {bw / 1e9:.1f} GB/s (read + write)"))
    rows = []
    for shape in args.models.split(","):
        rounds = args.rounds or (5 if shape == "small" else 2)
        decode = args.decode_tokens or (32 if shape == "small" else 8)
        r = bench_inference(shape, rounds, decode)
        rows.append(r)
        fs = r["first_s"]
        total = r["compile_s"] + fs["prefill"] + fs["decode"]
        print(f"  {shape}: {r['params']:,} parameters ({r['weight_bytes'] / 1e9:.3f} GB read per token), compile "
              f"{total:.1f} s: Session (both programs) {r['compile_s']:.1f} s + "
              f"first prefill {fs['prefill']:.1f} s + first decode step {fs['decode']:.2f} s (code generation, "
              f"with one call's work); same greedy tokens {r['same_tokens']}")
    tr = bench_train(3, args.train_steps) if args.train_steps else None
    print(f"load average now {_load()}\n")
    print("| model | what | luminal ms (p10-p90) | torch ms (p10-p90) | ratio | floor ms | luminal x floor | "
          "torch x floor |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        floor = r["weight_bytes"] / bw * 1e3
        lp, tp = _pct(r["times"]["luminal"]["prefill"]), _pct(r["times"]["torch"]["prefill"])
        ld, td = _pct(r["times"]["luminal"]["decode"]), _pct(r["times"]["torch"]["decode"])
        print(f"| {r['shape']} | prefill {PROMPT} | {lp[1]:.1f} ({lp[0]:.1f}-{lp[2]:.1f}) | "
              f"{tp[1]:.1f} ({tp[0]:.1f}-{tp[2]:.1f}) | {lp[1] / tp[1]:.2f} | | | |")
        mark = "met" if ld[1] / td[1] <= GOAL else "not met"
        print(f"| {r['shape']} | decode / token | {ld[1]:.2f} ({ld[0]:.2f}-{ld[2]:.2f}) | "
              f"{td[1]:.2f} ({td[0]:.2f}-{td[2]:.2f}) | {ld[1] / td[1]:.2f} (goal <= {GOAL}: {mark}) | "
              f"{floor:.2f} | {ld[1] / floor:.1f} | {td[1] / floor:.1f} |")
    if tr:
        lt, tt = _pct(tr["times"]["luminal"]), _pct(tr["times"]["torch"])
        print(f"| small | train step 4x128 | {lt[1]:.1f} ({lt[0]:.1f}-{lt[2]:.1f}) | {tt[1]:.1f} "
              f"({tt[0]:.1f}-{tt[2]:.1f}) | {lt[1] / tt[1]:.2f} | | | |")
        print(f"\ntrain step: compiled in {tr['compile_s']:.1f} s; loops (body nodes x trips): "
              + ", ".join(f"{lp['body_nodes']}x{lp['trips']}" for lp in tr["loops"]))
    return rows


if __name__ == "__main__":
    main()
