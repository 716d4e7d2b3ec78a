"""A reference Llama in plain torch, written from Hugging Face's ``modeling_llama.py`` semantics and
independent of the DSL example: its own config reading, safetensors loading (``safetensors.torch``),
rotary tables (``rotate_half`` over duplicated frequencies), ``repeat_kv`` for grouped-query attention
and a growing (concatenated) KV cache, as HF's ``DynamicCache``. Plus :func:`hf_generation_logits`,
which runs transformers' own model as its ``generate`` runs a left-padded batch."""

from __future__ import annotations

import json
import math
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors.torch import load_file


def read_config(path) -> dict:
    cfg = json.loads((Path(path) / "config.json").read_text())
    cfg.setdefault("num_key_value_heads", cfg["num_attention_heads"])
    cfg["head_dim"] = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
    return cfg


def read_weights(path) -> dict[str, torch.Tensor]:
    path = Path(path)
    index = path / "model.safetensors.index.json"
    files = sorted(set(json.loads(index.read_text())["weight_map"].values())) if index.is_file() \
        else ["model.safetensors"]
    sd = {}
    for f in files:
        sd.update(load_file(str(path / f)))
    return {k: v.float() for k, v in sd.items()}


def inv_freq(cfg) -> torch.Tensor:
    """transformers' ``_compute_default_rope_parameters`` / ``_compute_llama3_parameters``: float32 torch
    operations, one by one. The one change: the power is correctly rounded (float64 on the float32
    operands, rounded once), where torch's float32 ``pow`` (Sleef on the CPU) is within an ulp of it
    and depends on the machine's vector width."""
    d = cfg["head_dim"]
    base = torch.tensor(cfg["rope_theta"], dtype=torch.float32)
    e = torch.arange(0, d, 2, dtype=torch.int64).float() / d
    f = 1.0 / torch.pow(base.double(), e.double()).float()
    rs = cfg.get("rope_scaling") or {}
    kind = rs.get("rope_type", rs.get("type", "default"))
    if kind == "linear":
        f = f / rs["factor"]
    elif kind == "llama3":  # transformers' _compute_llama3_parameters
        factor, lo, hi = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"]
        old = rs["original_max_position_embeddings"]
        low_wavelen, high_wavelen = old / lo, old / hi
        wavelen = 2 * math.pi / f
        f_llama = torch.where(wavelen > low_wavelen, f / factor, f)
        smooth = (old / wavelen - lo) / (hi - lo)
        smoothed = (1 - smooth) * f_llama / factor + smooth * f_llama
        medium = ~(wavelen < high_wavelen) * ~(wavelen > low_wavelen)
        f = torch.where(medium, smoothed, f_llama)
    assert f.dtype == torch.float32
    return f


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def rms_norm(x, w, eps):
    return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def linear(sd, name, x):
    b = sd.get(name + ".bias")
    return F.linear(x, sd[name + ".weight"], b)


class TorchLlama:
    """``forward(ids, cache)``: logits (B, S, V) for ids (B, S) at positions ``len(cache)`` onwards;
    ``cache`` is a list of (k, v) per layer, extended in place."""

    def __init__(self, path=None, *, cfg: dict | None = None, sd: dict | None = None):
        """From a checkpoint directory, or from a config dict (HF keys) and HF-named float32 tensors."""
        self.cfg = read_config(path) if cfg is None else dict(cfg)
        self.cfg.setdefault("num_key_value_heads", self.cfg["num_attention_heads"])
        self.cfg["head_dim"] = self.cfg.get("head_dim") or self.cfg["hidden_size"] // self.cfg["num_attention_heads"]
        self.sd = read_weights(path) if sd is None else sd
        self.inv_freq = inv_freq(self.cfg)

    def forward(self, ids, cache=None):
        c, sd = self.cfg, self.sd
        b, s = ids.shape
        past = cache[0][0].shape[2] if cache else 0
        pos = torch.arange(past, past + s)
        freqs = pos[:, None].float() * self.inv_freq[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos(), emb.sin()
        h, kv, hd = c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
        x = F.embedding(ids, sd["model.embed_tokens.weight"])
        mask = torch.full((s, past + s), float("-inf")).triu(past + 1)
        for i in range(c["num_hidden_layers"]):
            p = f"model.layers.{i}."
            y = rms_norm(x, sd[p + "input_layernorm.weight"], c["rms_norm_eps"])
            q = linear(sd, p + "self_attn.q_proj", y).view(b, s, h, hd).transpose(1, 2)
            k = linear(sd, p + "self_attn.k_proj", y).view(b, s, kv, hd).transpose(1, 2)
            v = linear(sd, p + "self_attn.v_proj", y).view(b, s, kv, hd).transpose(1, 2)
            q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
            if cache is not None:
                if len(cache) > i:
                    k, v = torch.cat([cache[i][0], k], 2), torch.cat([cache[i][1], v], 2)
                    cache[i] = (k, v)
                else:
                    cache.append((k, v))
            k, v = k.repeat_interleave(h // kv, 1), v.repeat_interleave(h // kv, 1)
            w = torch.softmax(q @ k.transpose(2, 3) / math.sqrt(hd) + mask, -1)
            a = (w @ v).transpose(1, 2).reshape(b, s, h * hd)
            x = x + linear(sd, p + "self_attn.o_proj", a)
            y = rms_norm(x, sd[p + "post_attention_layernorm.weight"], c["rms_norm_eps"])
            x = x + linear(sd, p + "mlp.down_proj", F.silu(linear(sd, p + "mlp.gate_proj", y)) *
                           linear(sd, p + "mlp.up_proj", y))
        x = rms_norm(x, sd["model.norm.weight"], c["rms_norm_eps"])
        head = sd["model.embed_tokens.weight"] if c.get("tie_word_embeddings") else sd["lm_head.weight"]
        return x @ head.T

    def greedy(self, prompt, n) -> list[int]:
        cache: list = []
        logits = self.forward(torch.tensor([prompt]), cache)
        out = []
        for _ in range(n):
            tok = int(logits[0, -1].argmax())
            out.append(tok)
            logits = self.forward(torch.tensor([[tok]]), cache)
        return out


def hf_generation_logits(hf, prompts, fed, pad: int = 0) -> list:
    """Hugging Face's own ``LlamaForCausalLM`` ``hf`` (transformers) as its ``generate`` runs a batch:
    the prompts left-padded with ``pad`` and an attention mask, positions ``cumsum(mask) - 1``, then one
    token per sequence per step (``fed``: a list of per-sequence token lists) through its KV cache.
    Returns the last column's logits of each call, (B, vocab) arrays. ``hf`` keeps its state between
    calls (a dynamic NTK rotary module remembers the longest length it has seen)."""
    n = max(len(p) for p in prompts)
    ids = torch.tensor([[pad] * (n - len(p)) + list(p) for p in prompts])
    mask = torch.tensor([[0] * (n - len(p)) + [1] * len(p) for p in prompts])
    cache, out = None, []
    with torch.no_grad():
        for step in range(len(fed) + 1):
            x = ids if step == 0 else torch.tensor(fed[step - 1]).reshape(-1, 1)
            pos = (mask.cumsum(-1) - 1).clamp(min=0)[:, -x.shape[1]:]
            r = hf(input_ids=x, attention_mask=mask, position_ids=pos, cache=cache, use_cache=True)
            cache = r.cache
            out.append(r.logits[:, -1].numpy())
            mask = torch.cat([mask, torch.ones(len(prompts), 1, dtype=mask.dtype)], 1)
    return out


def hf_model(path):
    """transformers' ``LlamaForCausalLM`` from a checkpoint directory, float32, eager attention (its
    additive mask keeps a fully masked padding row finite)."""
    import transformers

    hf = transformers.LlamaForCausalLM.from_pretrained(str(path), torch_dtype=torch.float32,
                                                       attn_implementation="eager")
    return hf.eval()
