"""Generate text with a Llama checkpoint directory (Hugging Face layout) in luminal.

    python examples/llama/generate.py MODEL_DIR --prompt "Once upon a time" --max-new-tokens 64
    python examples/llama/generate.py MODEL_DIR --prompt "..." --temperature 0.8 --top-k 40 --top-p 0.95 --seed 1
    python examples/llama/generate.py MODEL_DIR --ids 1,450,4996 --max-new-tokens 16    # token ids, no tokenizer
    python examples/llama/generate.py MODEL_DIR --prompt "One" --prompt "Two words"     # a batch, decoded together

The tokenizer is the directory's ``tokenizer.json``, read with the ``tokenizers`` package (``pip install
-e ".[llama]"``); ``--ids`` passes token ids directly instead. Text is streamed as it is generated; at the
end the compile time, the time to first token and the decode rate are printed. Greedy decoding
(``--temperature 0``, the default) is deterministic.

Contract for other tools: with ``--ids``, the last line printed is ``ids:`` followed by the new token ids
only, space-separated. ``--prompt`` or ``--ids`` given several times is a batch (``Session(batch=N)``,
left-padded, each sequence stopping at its own end-of-sequence token): its texts are printed at the end,
not streamed, and with ``--ids`` the last N lines are the ``ids:`` lines, in the order of the prompts.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from model import Llama, LlamaConfig, Session, generate, generate_batch  # noqa: E402


def load_tokenizer(model_dir: Path, required: bool):
    """The directory's ``tokenizer.json`` (None when it or the package is absent and not ``required``)."""
    path = model_dir / "tokenizer.json"
    try:
        from tokenizers import Tokenizer
    except ImportError:
        if required:
            raise SystemExit("generate.py: --prompt needs the 'tokenizers' package (pip install -e \".[llama]\"); "
                             "or pass token ids with --ids") from None
        return None
    if not path.is_file():
        if required:
            raise SystemExit(f"generate.py: {path} not found; pass token ids with --ids instead")
        return None
    try:
        return Tokenizer.from_file(str(path))
    except Exception as e:  # tokenizers raises a bare Exception ("EOF while parsing...") naming no file
        raise ValueError(f"{path}: not a tokenizer the 'tokenizers' package can read: {e}") from None


class TextStream:
    """Prints the decoded text of the ids so far as it grows. Byte-level tokens can end inside a UTF-8
    character; such a tail (decoded as U+FFFD) is held back until the next token completes it."""

    def __init__(self, tokenizer):
        self.tok, self.ids, self.shown = tokenizer, [], ""

    def add(self, token: int) -> None:
        self.ids.append(token)
        text = self.tok.decode(self.ids, skip_special_tokens=True)
        if text.endswith("\ufffd"):
            return
        print(text[len(self.shown):] if text.startswith(self.shown) else "\n" + text, end="", flush=True)
        self.shown = text


def eos_ids(cfg, tokenizer) -> set[int]:
    ids = cfg.eos_token_id if isinstance(cfg.eos_token_id, list) else [cfg.eos_token_id]
    out = {int(i) for i in ids if i is not None}
    if tokenizer is not None and tokenizer.token_to_id("</s>") is not None:
        out.add(tokenizer.token_to_id("</s>"))
    return out


def positive_int(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {n}")
    return n


def positions_needed(n_prompt: int, max_new_tokens: int) -> int:
    """The positions a run uses at most: the prompt and every new token but the last, which is
    returned without being fed back (as :func:`model.generate` does)."""
    return n_prompt + max_new_tokens - 1


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("model_dir", type=Path)
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--prompt", action="append",
                     help="text, tokenized with the directory's tokenizer.json; several: a batch")
    src.add_argument("--ids", action="append", help="comma-separated token ids (no tokenizer needed); several: a batch")
    p.add_argument("--max-new-tokens", type=positive_int, default=32)
    p.add_argument("--temperature", type=float, default=0.0, help="0: greedy")
    p.add_argument("--top-k", type=int, default=0, help="sample among the k most likely (0: all)")
    p.add_argument("--top-p", type=float, default=1.0, help="nucleus sampling mass")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--backend", default="cpu")
    p.add_argument("--context", type=positive_int, default=None,
                   help="KV cache capacity, at most max_position_embeddings (any, with rope_scaling dynamic); at "
                        "least the prompt + new tokens - 1 (the last new token is not fed back), which is the default")
    p.add_argument("--ignore-eos", action="store_true", help="do not stop at an end-of-sequence token")
    p.add_argument("--report", action="store_true", help="print the compile reports of prefill and decode")
    return p


def parse_args(argv=None):
    return parser().parse_args(argv)


def check_context(p: argparse.ArgumentParser, args, cfg: LlamaConfig, n_prompt: int) -> int:
    """The KV cache capacity of the run, after checking (before anything is loaded or compiled) that
    the prompt and the new tokens fit in it and that it fits in ``max_position_embeddings`` (any
    length with ``rope_scaling`` ``dynamic``, whose frequencies stretch past it); a refusal is an
    argparse error (usage, the message, exit status 2)."""
    mpe = cfg.max_position_embeddings
    need = positions_needed(n_prompt, args.max_new_tokens)
    longest = "longest " if len(args.ids or args.prompt or ()) > 1 else ""
    run = (f"{longest}prompt ({n_prompt} tokens) + --max-new-tokens ({args.max_new_tokens}) needs {need} positions "
           f"(the last new token is not fed back)")
    bounded = cfg.rope_type != "dynamic"
    if bounded and args.context is not None and args.context > mpe:
        p.error(f"--context {args.context} exceeds max_position_embeddings ({mpe}) of {args.model_dir}")
    if bounded and need > mpe:
        p.error(f"{run}, which exceeds max_position_embeddings ({mpe})")
    if args.context is not None and need > args.context:
        p.error(f"{run}, more than --context {args.context}")
    return args.context or need


def main(argv=None) -> dict:
    p = parser()
    args = p.parse_args(argv)
    tokenizer = load_tokenizer(args.model_dir, required=args.prompt is not None)
    prompts = []
    for text in args.ids or args.prompt:
        if args.ids is not None:
            try:
                prompts.append([int(t) for t in text.replace(" ", "").split(",") if t])
            except ValueError:
                raise SystemExit(f"generate.py: --ids must be comma-separated integers, got {text!r}") from None
        else:
            prompts.append(tokenizer.encode(text).ids)
        if not prompts[-1]:
            raise SystemExit(f"generate.py: the prompt {text!r} is empty")
    capacity = check_context(p, args, LlamaConfig.from_dir(args.model_dir), max(map(len, prompts)))

    t0 = time.perf_counter()
    model = Llama.from_pretrained(args.model_dir)
    cfg = model.config
    load_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    session = Session(model, capacity=capacity, backend=args.backend, batch=len(prompts))
    compile_s = time.perf_counter() - t0
    if args.report:
        for name, program in (("prefill", session.prefill), ("decode", session.decode)):
            print(f"--- {name}")
            program.report()

    stops = set() if args.ignore_eos else eos_ids(cfg, tokenizer)
    if len(prompts) > 1:
        return run_batch(args, session, prompts, stops, tokenizer, compile_s)
    prompt = prompts[0]
    stream = TextStream(tokenizer) if tokenizer is not None else None
    if stream is not None and args.prompt is not None:
        print(args.prompt[0], end="", flush=True)
    new, times = [], []
    t_start = time.perf_counter()
    for tok in generate(session, prompt, args.max_new_tokens, temperature=args.temperature, top_k=args.top_k,
                        top_p=args.top_p, seed=args.seed, eos_ids=stops):
        times.append(time.perf_counter())
        new.append(tok)
        if stream is not None:
            stream.add(tok)
        else:
            print(tok, end=" ", flush=True)
    print()
    ttft = times[0] - t_start
    decode_s = times[-1] - times[0]
    rate = (len(new) - 1) / decode_s if len(new) > 1 and decode_s > 0 else float("nan")
    print(f"model: {args.model_dir} ({cfg.num_hidden_layers} layers, hidden {cfg.hidden_size}, "
          f"{sum(p.numel() for p in model.parameters()):,} parameters), backend {args.backend}")
    print(f"load {load_s:.2f} s, compile {compile_s:.2f} s (prefill + decode, once each); prompt {len(prompt)} "
          f"tokens, time to first token {ttft * 1e3:.1f} ms; {len(new)} new tokens, "
          f"{rate:.1f} tokens/s after the first")
    if args.ids is not None:
        print("ids: " + " ".join(str(t) for t in new))
    return {"ids": new, "prompt": prompt, "compile_s": compile_s, "ttft_s": ttft, "tokens_per_s": rate}


def run_batch(args, session: Session, prompts: list[list[int]], stops: set[int], tokenizer, compile_s: float) -> dict:
    """The prompts decoded together (:func:`model.generate_batch`), each one's text (or ids) printed when
    all are done, then, with ``--ids``, one ``ids:`` line per prompt."""
    t0 = time.perf_counter()
    new = generate_batch(session, prompts, args.max_new_tokens, temperature=args.temperature, top_k=args.top_k,
                         top_p=args.top_p, seed=args.seed, eos_ids=stops)
    total_s = time.perf_counter() - t0
    for i, ids in enumerate(new):
        if tokenizer is not None:
            text = args.prompt[i] if args.prompt is not None else tokenizer.decode(prompts[i])
            print(f"[{i}] {text}{tokenizer.decode(ids, skip_special_tokens=True)}")
        else:
            print(f"[{i}] " + " ".join(map(str, ids)))
    n = sum(map(len, new))
    print(f"compile {compile_s:.2f} s; batch of {len(prompts)} prompts ({', '.join(str(len(q)) for q in prompts)} "
          f"tokens, left-padded to {max(map(len, prompts))}); {n} new tokens in {total_s:.2f} s, prefill included")
    if args.ids is not None:
        for ids in new:
            print("ids: " + " ".join(map(str, ids)))
    return {"ids": new, "prompt": prompts, "compile_s": compile_s, "total_s": total_s}


if __name__ == "__main__":
    main()
