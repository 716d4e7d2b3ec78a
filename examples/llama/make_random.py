"""Write a small, randomly initialised Llama in the exact Hugging Face layout.

    python examples/llama/make_random.py OUT_DIR [--layers 2 --hidden 64 --heads 4 --kv-heads 2
        --intermediate 128 --vocab 512 --head-dim D --tie --llama3-rope | --dynamic-rope F --dtype bfloat16
        --sharded]

This environment cannot download models, so the example, its tests and its benchmark run on one of
these: ``config.json``, ``model.safetensors`` (or shards with ``model.safetensors.index.json``) and a
real byte-level BPE ``tokenizer.json`` trained with ``tokenizers`` on text that ships with luminal (its
README and sources). A checkpoint from the hub has the same files and loads the same way.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

import luminal as lm

sys.path.insert(0, str(Path(__file__).resolve().parent))
from model import write_atomic  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SPECIALS = ["<unk>", "<s>", "</s>"]  # Llama's ids: unk 0, bos 1, eos 2


def training_text() -> list[str]:
    """Lines of English and code that ship with luminal: the tokenizer's training corpus."""
    files = [ROOT / "README.md", *sorted((ROOT / "luminal").rglob("*.py"))]
    return [line for f in files if f.is_file() for line in f.read_text(errors="replace").splitlines() if line.strip()]


def make_tokenizer(vocab_size: int):
    """A byte-level BPE tokenizer (GPT-2 / Llama 3 style) with Llama's special tokens; its vocabulary
    is at most ``vocab_size`` (the model's embedding table may be larger, as in many hub models)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIALS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(training_text(), trainer)
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B",
                                                       special_tokens=[("<s>", tok.token_to_id("<s>"))])
    return tok


def random_weights(cfg: dict, seed: int, std: float = 0.02) -> dict[str, np.ndarray]:
    """HF-named float32 tensors: normal(0, std) matrices (HF initialises with 0.02; tests use more, so
    that logits are of order 1 and a tolerance means something); norm weights near 1
    and biases near 0 but not exactly, so that a test notices one that is loaded into the wrong place."""
    rng = np.random.default_rng(seed)
    e, i, v = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    h, kv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd = cfg.get("head_dim") or e // h

    def mat(o, k):
        return (rng.standard_normal((o, k), dtype=np.float32) * std).astype(np.float32)

    def vec(n, centre):
        return (centre + 0.1 * rng.standard_normal(n)).astype(np.float32)

    t = {"model.embed_tokens.weight": mat(v, e)}
    for layer in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{layer}."
        for name, (o, k) in {"q_proj": (h * hd, e), "k_proj": (kv * hd, e), "v_proj": (kv * hd, e),
                             "o_proj": (e, h * hd)}.items():
            t[f"{p}self_attn.{name}.weight"] = mat(o, k)
            if cfg.get("attention_bias"):
                t[f"{p}self_attn.{name}.bias"] = vec(o, 0.0)
        for name, (o, k) in {"gate_proj": (i, e), "up_proj": (i, e), "down_proj": (e, i)}.items():
            t[f"{p}mlp.{name}.weight"] = mat(o, k)
            if cfg.get("mlp_bias"):
                t[f"{p}mlp.{name}.bias"] = vec(o, 0.0)
        t[f"{p}input_layernorm.weight"] = vec(e, 1.0)
        t[f"{p}post_attention_layernorm.weight"] = vec(e, 1.0)
    t["model.norm.weight"] = vec(e, 1.0)
    if not cfg.get("tie_word_embeddings"):
        t["lm_head.weight"] = mat(v, e)
    return t


def write_checkpoint(out: Path, tensors: dict, dtype: str, shards: int = 1) -> None:
    """``model.safetensors``, or ``shards`` files ``model-0000k-of-0000n.safetensors`` plus the index
    (``metadata.total_size`` and ``weight_map``), as ``save_pretrained`` writes them."""
    dtypes = {n: dtype for n in tensors}
    if shards <= 1:
        lm.save_safetensors(tensors, out / "model.safetensors", metadata={"format": "pt"}, dtypes=dtypes)
        return
    names = list(tensors)
    parts = np.array_split(np.arange(len(names)), shards)
    weight_map, total = {}, 0
    for k, idx in enumerate(parts):
        fname = f"model-{k + 1:05d}-of-{shards:05d}.safetensors"
        part = {names[j]: tensors[names[j]] for j in idx}
        lm.save_safetensors(part, out / fname, metadata={"format": "pt"}, dtypes={n: dtype for n in part})
        weight_map.update({n: fname for n in part})
        total += sum(a.size * (2 if dtype in ("bfloat16", "float16") else 4) for a in part.values())
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    write_atomic(out / "model.safetensors.index.json", (json.dumps(index, indent=2) + "\n").encode())


def make_random(out, *, layers: int = 2, hidden: int = 64, heads: int = 4, kv_heads: int = 2,
                intermediate: int = 128, vocab: int = 512, head_dim: int | None = None, tie: bool = False,
                llama3_rope: bool = False, dtype: str = "float32", shards: int = 1, max_positions: int = 256,
                bias: bool = False, seed: int = 0, std: float = 0.02, tokenizer: bool = True,
                dynamic_rope: float | None = None) -> Path:
    """Write the directory; returns its path. ``dynamic_rope``: the factor of a ``rope_scaling`` of type
    ``dynamic`` (NTK scaling past ``max_positions``)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    cfg = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_act": "silu",
        "vocab_size": vocab, "hidden_size": hidden, "intermediate_size": intermediate,
        "num_hidden_layers": layers, "num_attention_heads": heads, "num_key_value_heads": kv_heads,
        "rms_norm_eps": 1e-5, "rope_theta": 10000.0 if not llama3_rope else 500000.0,
        "max_position_embeddings": max_positions, "tie_word_embeddings": tie, "torch_dtype": dtype,
        "attention_bias": bias, "mlp_bias": bias, "bos_token_id": 1, "eos_token_id": 2,
        "initializer_range": 0.02, "rope_scaling": None,
    }
    if head_dim is not None:
        cfg["head_dim"] = head_dim
    if llama3_rope:
        cfg["rope_scaling"] = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                               "high_freq_factor": 4.0, "original_max_position_embeddings": 64}
    if dynamic_rope is not None:
        if llama3_rope:
            raise ValueError("make_random: --llama3-rope and --dynamic-rope are two rope_scaling kinds; pick one")
        cfg["rope_scaling"] = {"rope_type": "dynamic", "factor": float(dynamic_rope)}
    write_checkpoint(out, random_weights(cfg, seed, std), dtype, shards)  # the weights before the config
    write_atomic(out / "config.json", (json.dumps(cfg, indent=2) + "\n").encode())  # that describes them
    if tokenizer:
        make_tokenizer(vocab).save(str(out / "tokenizer.json"))
        (out / "tokenizer_config.json").write_text(json.dumps({
            "tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>", "eos_token": "</s>",
            "unk_token": "<unk>", "add_bos_token": True, "model_max_length": max_positions}, indent=2) + "\n")
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("out", type=Path)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--kv-heads", type=int, default=2)
    p.add_argument("--intermediate", type=int, default=None, help="None: 2 x hidden")
    p.add_argument("--vocab", type=int, default=512)
    p.add_argument("--head-dim", type=int, default=None)
    p.add_argument("--max-positions", type=int, default=256)
    p.add_argument("--tie", action="store_true", help="tie_word_embeddings (no lm_head.weight)")
    p.add_argument("--llama3-rope", action="store_true", help="rope_scaling of type llama3")
    p.add_argument("--dynamic-rope", type=float, default=None, metavar="FACTOR",
                   help="rope_scaling of type dynamic (NTK) with this factor")
    p.add_argument("--bias", action="store_true", help="attention_bias and mlp_bias")
    p.add_argument("--dtype", choices=["float32", "bfloat16", "float16"], default="float32")
    p.add_argument("--sharded", type=int, nargs="?", const=3, default=1, metavar="N",
                   help="write N shards (3 when N is left out) and model.safetensors.index.json; 1: one file")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    out = make_random(a.out, layers=a.layers, hidden=a.hidden, heads=a.heads, kv_heads=a.kv_heads,
                      intermediate=a.intermediate or 2 * a.hidden, vocab=a.vocab, head_dim=a.head_dim, tie=a.tie,
                      llama3_rope=a.llama3_rope, dtype=a.dtype, shards=a.sharded, max_positions=a.max_positions,
                      bias=a.bias, seed=a.seed, dynamic_rope=a.dynamic_rope)
    print(f"wrote {out}: " + ", ".join(sorted(f.name for f in out.iterdir())))


if __name__ == "__main__":
    sys.exit(main())
