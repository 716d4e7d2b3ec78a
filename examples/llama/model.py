"""Llama (``LlamaForCausalLM``: Llama 2, Llama 3.x, TinyLlama, SmolLM, ...) written with ``luminal.nn``.

The parameter names are Hugging Face's (``model.embed_tokens.weight``, ``model.layers.{i}.self_attn.
q_proj.weight``, ..., ``model.norm.weight``, ``lm_head.weight``), so a checkpoint directory loads by name,
without conversion: ``Llama.from_pretrained(dir)`` reads ``config.json`` and ``model.safetensors`` (or the
shards listed in ``model.safetensors.index.json``).

Generation keeps a **KV cache** as persistent state (one ``nn.Buffer`` pair per layer, of a fixed
capacity): a step reads the cache, attends over it, and writes its own keys and values back with
``graph.assign``, so the compiled program updates the cache in place. The step's sequence length ``S``
is a symbolic dim and the positions are a runtime input, so one compiled program serves every prompt
length (prefill) and one every position (decode): :class:`Session` compiles each once.
"""

from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import secrets
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from llama_config import LlamaConfig, read_json  # noqa: E402

import luminal as lm  # noqa: E402
from luminal import nn  # noqa: E402
from luminal.core.atomic_file import Staged, stage, write_atomic  # noqa: E402
from luminal.core.interrupts import interrupts_deferred  # noqa: E402
from luminal.core.safetensors_io import stage_file  # noqa: E402
from luminal.core.symbolic import is_static  # noqa: E402

__all__ = ["KVCache", "Llama", "LlamaConfig", "Session", "attention_factor", "generate", "generate_batch", "inv_freq",
           "ntk_theta", "rope_tables", "rotary", "sample", "write_atomic"]


def inv_freq(cfg: LlamaConfig, seq_len: int | None = None) -> np.ndarray:
    """Rotary inverse frequencies (head_dim / 2,) float32, with ``rope_scaling`` applied, computed as
    Hugging Face (and Meta's reference code) compute them: in float32, operation by operation.
    ``seq_len`` matters only for ``dynamic`` (NTK) scaling: the frequencies for a sequence of that
    length (:func:`ntk_theta`); None, or a length within ``max_position_embeddings``, gives the
    unscaled ones.

    ``1 / theta ** (arange(0, d, 2) / d)``: the exponents are float32 quotients, ``theta`` is rounded
    to float32 and the power is correctly rounded to float32 (``math.pow`` in float64 on the float32
    operands, then one rounding; numpy's own float32 power is off by one ulp for about a fifth of
    these arguments). torch's float32 power is within one ulp of that and, on the CPU, depends on
    the vector width of the machine (Sleef), so no formulation matches it bit for bit everywhere;
    the float32 exponent is what matters: rounding it differently moves a frequency by up to 3 ulp,
    an angle error that grows with the position. Then, as in float32 torch, ``linear``: divided by
    the factor; ``llama3``: ``wavelen = 2*pi / f`` (torch: ``reciprocal(f) * float32(2*pi)``), low
    frequencies divided by the factor, high ones kept, the smooth blend between, each step rounded
    to float32; ``yarn``: ``_yarn``."""
    f32 = np.float32
    d = cfg.head_dim
    e = np.arange(0, d, 2, dtype=np.int64).astype(f32) / f32(d)
    theta = float(f32(cfg.rope_theta)) if cfg.rope_type != "dynamic" else ntk_theta(cfg, seq_len)
    powers = np.array([math.pow(theta, float(x)) for x in e], np.float64).astype(f32)
    f = f32(1) / powers
    rs = cfg.rope_scaling or {}
    if cfg.rope_type == "linear":
        f = f / f32(rs["factor"])
    elif cfg.rope_type == "llama3":
        factor, lo = f32(rs["factor"]), f32(rs["low_freq_factor"])
        old = rs["original_max_position_embeddings"]
        low_wavelen = f32(old / rs["low_freq_factor"])  # Python floats in HF, compared in float32
        high_wavelen = f32(old / rs["high_freq_factor"])
        wavelen = (f32(1) / f) * f32(2 * math.pi)
        scaled = np.where(wavelen > low_wavelen, f / factor, f)
        smooth = ((f32(1) / wavelen) * f32(old) - lo) / f32(rs["high_freq_factor"] - rs["low_freq_factor"])
        blended = (f32(1) - smooth) * scaled / factor + smooth * scaled
        medium = ~(wavelen < high_wavelen) & ~(wavelen > low_wavelen)
        f = np.where(medium, blended, scaled)
    elif cfg.rope_type == "yarn":
        f = _yarn(cfg, powers)
    return f.astype(f32)


def ntk_theta(cfg: LlamaConfig, seq_len: int | None) -> float:
    """Dynamic NTK's rotary base for a sequence of ``seq_len`` tokens, as transformers'
    ``_compute_dynamic_ntk_parameters`` computes it: ``theta * ((factor * n / max_pos) - (factor - 1))
    ** (d / (d - 2))`` with ``n = max(seq_len, max_pos)``. At model build (and on its reset) transformers
    passes no length: Python floats, theta itself up to rounding; while generating it passes the length
    as an int64 tensor, so every step is a float32 torch operation, rounded here one by one (the power
    correctly rounded, as in :func:`inv_freq`). The result is a float32 value."""
    f32, d, mpe = np.float32, cfg.head_dim, cfg.max_position_embeddings
    factor, theta = cfg.rope_scaling["factor"], cfg.rope_theta
    if seq_len is None or seq_len <= mpe:
        return float(f32(theta * ((factor * mpe / mpe) - (factor - 1)) ** (d / (d - 2))))
    x = f32(f32(factor) * f32(seq_len)) / f32(mpe) - f32(factor - 1)
    return float(f32(theta) * f32(math.pow(float(x), d / (d - 2))))  # (torch: a float32 tensor ** a double)


def _yarn(cfg: LlamaConfig, pos_freqs: np.ndarray) -> np.ndarray:
    """YaRN's frequencies as transformers computes them in float32: the frequencies of dims that turn
    fewer than ``beta_slow`` times over the original context divided by ``factor`` (interpolated), those
    that turn more than ``beta_fast`` times kept (extrapolated), a linear ramp between (its ends rounded
    out to whole dims unless ``truncate`` is false). ``pos_freqs``: ``theta ** e``, float32."""
    f32, rs, d = np.float32, cfg.rope_scaling, cfg.head_dim
    base, old = float(cfg.rope_theta), rs["original_max_position_embeddings"]

    def dim_of(turns):  # the dim whose wavelength fits ``turns`` times into the original context
        return d * math.log(old / (turns * 2 * math.pi)) / (2 * math.log(base))

    low, high = dim_of(rs.get("beta_fast") or 32), dim_of(rs.get("beta_slow") or 1)
    if rs.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, d - 1)
    if low == high:
        high += 0.001  # (transformers': the ramp would divide by zero)
    ramp = np.clip((np.arange(d // 2, dtype=f32) - f32(low)) / f32(high - low), f32(0), f32(1))
    keep = f32(1) - ramp  # how much of each dim's own frequency stays
    extrapolated = f32(1) / pos_freqs
    interpolated = f32(1) / (f32(rs["factor"]) * pos_freqs)
    return interpolated * (f32(1) - keep) + extrapolated * keep


def attention_factor(cfg: LlamaConfig) -> float:
    """The factor YaRN scales the rotary tables by (so attention logits grow with the extension):
    ``attention_factor`` when given, else ``0.1 * ln(factor) + 1``, or its ratio with the mscales
    (DeepSeek's form); 1 for every other kind."""
    rs = cfg.rope_scaling or {}
    if cfg.rope_type != "yarn":
        return 1.0
    if rs.get("attention_factor") is not None:
        return float(rs["attention_factor"])

    def mscale(scale, m=1.0):
        return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0

    factor = rs["factor"]
    if rs.get("mscale") and rs.get("mscale_all_dim"):
        return float(mscale(factor, rs["mscale"]) / mscale(factor, rs["mscale_all_dim"]))
    return mscale(factor)


def rope_tables(cfg: LlamaConfig, n: int) -> tuple[np.ndarray, np.ndarray]:
    """cos and sin of ``position * inv_freq`` for positions 0..n-1, each (n, head_dim / 2) float32."""
    return rotary(np.arange(n), inv_freq(cfg), attention_factor(cfg))


def rotary(positions: np.ndarray, freqs: np.ndarray, scale: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """cos and sin of ``positions * freqs``, each ``positions.shape + (head_dim / 2,)`` float32.
    The angle is HF's float32 product (``positions.float() * inv_freq``, one rounding); its cosine and
    sine are taken in float64 and rounded once (torch's float32 cos/sin are within an ulp of that, the
    same at every position: the error that grows with the position is the angle's, which is exact).
    ``scale``: :func:`attention_factor` (transformers: the float32 tables times the factor)."""
    ang = np.asarray(positions).astype(np.float32)[..., None] * freqs
    a = ang.astype(np.float64)
    cos, sin = np.cos(a).astype(np.float32), np.sin(a).astype(np.float32)
    if scale != 1.0:
        cos, sin = cos * np.float32(scale), sin * np.float32(scale)
    return cos, sin


def rotate(x, cos, sin):
    """HF's ``x * cos + rotate_half(x) * sin`` on (..., S, head_dim), with cos/sin (S, head_dim / 2)
    (the halves of HF's duplicated tables)."""
    h = x.shape[-1] // 2
    x1, x2 = x[..., :h], x[..., h:]
    return lm.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1)


class LlamaAttention(nn.Module):
    """Grouped-query attention: ``num_key_value_heads`` key/value heads, each shared by
    ``num_attention_heads / num_key_value_heads`` query heads. The query heads of one group are
    stacked along the rows so that each group is one GEMM against its keys (no repeated K/V)."""

    def __init__(self, cfg: LlamaConfig, dtype=None):
        super().__init__()
        h, kv, hd, e = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim, cfg.hidden_size
        self.num_heads, self.num_kv, self.head_dim = h, kv, hd
        self.q_proj = nn.Linear(e, h * hd, bias=cfg.attention_bias, dtype=dtype)
        self.k_proj = nn.Linear(e, kv * hd, bias=cfg.attention_bias, dtype=dtype)
        self.v_proj = nn.Linear(e, kv * hd, bias=cfg.attention_bias, dtype=dtype)
        self.o_proj = nn.Linear(h * hd, e, bias=cfg.attention_bias, dtype=dtype)

    def forward(self, x, cos, sin, mask, cache=None):
        """x (B, S, E); cos/sin (S, hd/2); mask (S, T) float, 0 where a query sees a key, -inf where not;
        ``cache``: None (keys are this step's, T = S) or ``(k_state, v_state, write, written)`` where
        ``write`` (T, S) is the one-hot map of this step's rows into the cache (T = its capacity) and
        ``written`` (T, 1) marks the rows it writes."""
        b, s = x.shape[0], x.shape[1]
        h, kv, hd = self.num_heads, self.num_kv, self.head_dim
        q = rotate(self.q_proj(x).reshape(b, s, h, hd).permute(0, 2, 1, 3), cos, sin)
        k = rotate(self.k_proj(x).reshape(b, s, kv, hd).permute(0, 2, 1, 3), cos, sin)
        v = self.v_proj(x).reshape(b, s, kv, hd).permute(0, 2, 1, 3)
        if cache is not None:
            k_state, v_state, write, written = cache
            g = x.graph
            k = (write @ k).where(written, k_state.on(g))  # (B, kv, T, hd): the cache after this step
            v = (write @ v).where(written, v_state.on(g))
            g.assign(k_state, k)
            g.assign(v_state, v)
        t = k.shape[-2]
        r = h // kv
        q = q.reshape(b, kv, r * s, hd)  # the r query heads of a group, one after the other
        scores = ((q * (1.0 / math.sqrt(hd))) @ k.transpose(-2, -1)).reshape(b, kv, r, s, t) + mask
        out = scores.softmax(-1).reshape(b, kv, r * s, t) @ v  # (B, kv, r*S, hd)
        out = out.reshape(b, h, s, hd).permute(0, 2, 1, 3).reshape(b, s, h * hd)
        return self.o_proj(out)


class LlamaMLP(nn.Module):
    """SwiGLU: ``down(silu(gate(x)) * up(x))``."""

    def __init__(self, cfg: LlamaConfig, dtype=None):
        super().__init__()
        e, i = cfg.hidden_size, cfg.intermediate_size
        self.gate_proj = nn.Linear(e, i, bias=cfg.mlp_bias, dtype=dtype)
        self.up_proj = nn.Linear(e, i, bias=cfg.mlp_bias, dtype=dtype)
        self.down_proj = nn.Linear(i, e, bias=cfg.mlp_bias, dtype=dtype)

    def forward(self, x):
        return self.down_proj(self.gate_proj(x).silu() * self.up_proj(x))


class LlamaDecoderLayer(nn.Module):
    def __init__(self, cfg: LlamaConfig, dtype=None):
        super().__init__()
        self.self_attn = LlamaAttention(cfg, dtype)
        self.mlp = LlamaMLP(cfg, dtype)
        self.input_layernorm = nn.RMSNorm(cfg.hidden_size, eps=cfg.rms_norm_eps, dtype=dtype)
        self.post_attention_layernorm = nn.RMSNorm(cfg.hidden_size, eps=cfg.rms_norm_eps, dtype=dtype)

    def forward(self, x, cos, sin, mask, cache=None):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, mask, cache)
        return x + self.mlp(self.post_attention_layernorm(x))


class LlamaModel(nn.Module):
    def __init__(self, cfg: LlamaConfig, dtype=None):
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size, dtype=dtype)
        self.layers = nn.ModuleList([LlamaDecoderLayer(cfg, dtype) for _ in range(cfg.num_hidden_layers)])
        self.norm = nn.RMSNorm(cfg.hidden_size, eps=cfg.rms_norm_eps, dtype=dtype)


class KVCache:
    """Keys and values of every layer, (B, num_key_value_heads, capacity, head_dim) each: persistent
    state that the compiled steps read and update in place. Rows past the current position hold stale
    values from earlier prompts; the attention mask never lets a query see them, so starting a new
    prompt needs no reset. The capacity is at most ``max_position_embeddings``, except with ``dynamic``
    NTK scaling, whose frequencies stretch to longer sequences."""

    def __init__(self, cfg: LlamaConfig, capacity: int, batch: int = 1, dtype=lm.float32):
        if capacity > cfg.max_position_embeddings and cfg.rope_type != "dynamic":
            raise ValueError(f"KV cache capacity {capacity} exceeds max_position_embeddings "
                             f"({cfg.max_position_embeddings}); only rope_scaling 'dynamic' goes past it")
        shape = (batch, cfg.num_key_value_heads, capacity, cfg.head_dim)
        self.capacity, self.batch = capacity, batch
        self.k = [nn.Buffer(np.zeros(shape, np.float32), dtype, name=f"cache.{i}.k")
                  for i in range(cfg.num_hidden_layers)]
        self.v = [nn.Buffer(np.zeros(shape, np.float32), dtype, name=f"cache.{i}.v")
                  for i in range(cfg.num_hidden_layers)]

    def nbytes(self) -> int:
        return sum(s.data.nbytes for s in self.k + self.v)


class Llama(nn.Module):
    """``LlamaForCausalLM``. With ``tie_word_embeddings`` there is no ``lm_head`` parameter (as in the
    checkpoints Hugging Face saves): the logits use ``model.embed_tokens.weight``."""

    def __init__(self, cfg: LlamaConfig, dtype=None):
        super().__init__()
        self.config = cfg
        self.model = LlamaModel(cfg, dtype)
        if not cfg.tie_word_embeddings:
            self.lm_head = nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False, dtype=dtype)

    def head_weight(self):
        return self.model.embed_tokens.weight if self.config.tie_word_embeddings else self.lm_head.weight

    def forward(self, ids, positions=None, cache: KVCache | None = None, last_only: bool = False, *,
                starts=None, rope=None):
        """Logits (B, S, vocab) for token ids (B, S) int32 (only the last position's, (B, 1, vocab), with
        ``last_only``). Without a cache: causal attention over the S tokens, positions 0..S-1 (training).

        With one, the batch's sequences are left-padded to a common length and share the cache's rows:
        ``positions`` (S,) int32 are the rows (columns of the padded batch) this step writes, ``starts``
        (B,) int32 the first row of each sequence (its padding ends there; None: no padding), and
        ``rope`` = (cos, sin), each (B, S, head_dim / 2) float32, the rotary tables at each sequence's
        own positions (row - start), which :class:`Session` computes on the host: with ``dynamic`` NTK
        scaling the frequencies change from call to call. A query sees the rows of its sequence up to
        its own; a padding query sees only its own row (a row that sees nothing would be NaN, and
        NaN keys written to the cache would reach every later query through ``0 * NaN``)."""
        cfg, g = self.config, ids.graph
        b, s = ids.shape[0], ids.shape[1]
        mpe = cfg.max_position_embeddings
        if cache is None:
            why = ("the rotary tables end there" if cfg.rope_type != "dynamic" else
                   "rope_scaling 'dynamic' rescales the frequencies past it only in Session (generation "
                   "with the KV cache); this cacheless forward keeps to the unscaled ones")
            if is_static(s) and s > mpe:
                raise ValueError(f"Llama: a sequence of {s} tokens exceeds max_position_embeddings ({mpe}); {why}")
            cos_t, sin_t = (g.constant(t) for t in rope_tables(cfg, mpe))
            positions = keys = g.arange(s)
            cos, sin = cos_t.index_select(0, positions), sin_t.index_select(0, positions)
            if not is_static(s):
                # a symbolic S: required to fit when the program runs, checked per binding before any work
                # (``graph.node_requirements`` on the gathered rows, which every layer reads), rather than the
                # gather's index error naming neither S nor the limit
                g.node_requirements.setdefault(cos.node.id, []).append(
                    (mpe - s, f"Llama: the sequence length {s} exceeds max_position_embeddings ({mpe}); {why}",
                     ValueError))
            visible = keys.reshape(1, -1) <= positions.reshape(-1, 1)  # (S, T)
        else:
            if rope is None:
                raise ValueError("Llama.forward with a KV cache needs rope=(cos, sin), each (B, S, head_dim/2): "
                                 "the rotary tables at each sequence's positions (see Session)")
            cos, sin = (t.reshape(b, 1, s, cfg.head_dim // 2) for t in rope)
            keys = g.arange(cache.capacity)
            row = positions.reshape(1, -1, 1)  # (1, S, 1) against keys (1, 1, T)
            visible = keys.reshape(1, 1, -1) <= row
            if starts is not None:
                own = keys.reshape(1, 1, -1) >= starts.reshape(-1, 1, 1)
                visible = visible & (own | (keys.reshape(1, 1, -1) == row))  # (B, S, T)
                visible = visible.reshape(b, 1, 1, s, cache.capacity)  # against the scores (B, kv, r, S, T)
        mask = lm.where(visible, g.constant(0.0), g.constant(-math.inf))
        if cache is not None:
            hit = keys.reshape(-1, 1) == positions.reshape(1, -1)  # (T, S)
            write, written = hit.float(), hit.any(-1, keepdim=True)
        # Loop rolling matches the layers node by node, the views each node reads through included: the
        # embedding rows come out of a gather as (B*S, E) and would reach the first layer through a
        # reshape, unlike every later layer's input; one multiply by 1 makes them (B, S, E) like those.
        x = self.model.embed_tokens(ids) * 1.0
        for i, layer in enumerate(self.model.layers):
            x = layer(x, cos, sin, mask, None if cache is None else (cache.k[i], cache.v[i], write, written))
        if last_only:
            x = x[:, -1:]
        # The final norm is applied to the rows as (B*S, E): as (B, S, E) it would be the same nodes as a
        # layer's input norm, and loop rolling would take it for a fifth trip of the layers' first part.
        b, n = x.shape[0], x.shape[1]
        x = self.model.norm(x.reshape(-1, cfg.hidden_size))
        return (x @ self.head_weight().on(g).T).reshape(b, n, cfg.vocab_size)

    # checkpoints ----------------------------------------------------------------------------
    @classmethod
    def from_pretrained(cls, path, dtype=lm.float32) -> Llama:
        """Build the model from ``path/config.json`` and load its safetensors by name. ``dtype``: the
        compute dtype of the parameters (float32 on the CPU; a bf16/f16 checkpoint is widened exactly)."""
        cfg = LlamaConfig.from_dir(path)
        with skip_init():
            model = cls(cfg, dtype=dtype)
        model.load_pretrained(path)
        return model

    def load_pretrained(self, path) -> None:
        """Load every tensor of the checkpoint in ``path`` by its Hugging Face name. Every file and
        every name is checked before any value is written: a missing, unexpected or mis-shaped
        tensor, or a truncated or corrupt shard, raises an error naming it, and the model keeps the
        values it had."""
        where: dict[str, Path] = {}
        tensors = read_checkpoint(path, where)
        if self.config.tie_word_embeddings:
            tensors.pop("lm_head.weight", None)  # some exports keep the tied copy; HF ignores it too
        for name in [n for n in tensors if n.endswith("rotary_emb.inv_freq")]:
            del tensors[name]  # old exports saved the rotary buffer; it is recomputed from the config
        try:
            apply, _, _ = self.prepare_load(tensors, strict=True)
        except ValueError as e:
            shards = ""
            if len(set(where.values())) > 1:  # sharded: say which shard holds each tensor at fault
                own = dict(self._state_items())
                at_fault = [k for k, v in tensors.items()
                            if k not in own or tuple(np.shape(v)) != tuple(own[k].shape)]
                if at_fault:
                    shards = " (" + "; ".join(f"{k} is in {where[k].name}" for k in at_fault) + ")"
            raise ValueError(f"{path}: {e}{shards}") from None
        apply()

    def save_pretrained(self, path) -> None:
        """Write ``config.json`` and ``model.safetensors`` (HF layout, the parameters' dtype) into the
        directory ``path``, as a pair: a config must never describe weights that are not there. The
        index and shards of an earlier sharded save are removed: the index would be read instead of the
        new weights.

        Both files are first written in full to temp files beside their targets (fsynced): a failure
        there (a read-only file, a full disk) leaves the directory as it was, without temp files. Then
        the commit (:func:`_commit_together`), with Ctrl-C held back until it ends: the old weights,
        index and shards are renamed aside to backup names and the old config kept as a hard link, the
        new config and then the new weights are renamed into place, and the backups are removed only
        after that. An error at any of those steps (or a KeyboardInterrupt raised in one) puts the
        backups back and removes the temps, so the directory holds exactly its old files again; a
        Ctrl-C during the commit is raised after it, the save complete.

        Not guaranteed: a power loss or a kill -9 during the commit stops it between two renames, with
        no rollback. Once the old weights and index are set aside (the first renames) and until the new
        weights are renamed in (the last), the directory has neither, so such a directory fails to load
        rather than pairing new weights with the old config or the reverse, and its old files are still
        there as ``.<name>.<pid>.<random>.bak``
        (assuming the filesystem keeps the renames' order across a crash, as journaling ones do). A
        rollback that itself fails (the disk gone) leaves backups behind the same way."""
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        cfg = self.config.to_dict()
        cfg["torch_dtype"] = self.head_weight().dtype.name
        old_shards = []
        if (path / INDEX).is_file():
            with contextlib.suppress(ValueError, OSError):
                old_shards = [f for f in index_shards(path)
                              if f.suffix == ".safetensors" and f.name != "model.safetensors"]
        staged = []
        try:
            # the config first: one that cannot be written (read-only, say) fails before the weights are
            staged.append(stage(path / "config.json", (json.dumps(cfg, indent=2) + "\n").encode()))
            items = self._state_items()
            staged.append(stage_file({n: s.data for n, s in items}, path / "model.safetensors",
                                     metadata={"format": "pt"}, dtypes={n: s.dtype for n, s in items}))
            with interrupts_deferred():
                _commit_together(staged, [path / INDEX, *old_shards])
        except BaseException:
            for s in staged:
                s.discard()  # (a temp already renamed in is not there to remove)
            raise


# errnos of os.link on a filesystem without hard links (FAT, exFAT, some FUSE and network mounts)
_NO_LINKS = {errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EXDEV, errno.EMLINK, errno.ENOSYS}


def _commit_together(staged: list[Staged], remove: list[Path]) -> None:
    """Rename every staged temp over its target and remove the files ``remove`` (an old index, then
    its shards), all or none as far as the filesystem allows.

    The last of ``staged`` (the weights) is the one the others depend on: its old version and the
    files to remove are renamed aside to ``.<name>.<pid>.<random>.bak`` first, and it is renamed in
    last, so from then until the end the directory has neither weights nor index, and a crash
    mid-commit leaves one that fails to load rather than one that mixes old files with new. The other
    targets (the config) stay in place and are replaced by their rename, with a hard link to the old
    version as the backup (renamed aside too where the filesystem has no hard links), so a rename
    into them that fails leaves them as they were.

    Any exception (OSError, KeyboardInterrupt) puts the backups back, removes what was renamed in
    without an old version and the temps, and is re-raised; rollback steps that fail are skipped, so
    the original error is the one raised. After success the renames are fsynced (the directory) and
    only then the backups removed."""
    tag = f"{os.getpid()}.{secrets.token_hex(4)}"
    backups: dict[str, str] = {}  # target or removed file -> its backup
    linked: set[str] = set()  # backups that are hard links: the file itself is still in place
    done: list[Staged] = []  # renamed in

    def backup_of(f: str) -> str:
        return os.path.join(os.path.dirname(f), f".{os.path.basename(f)}.{tag}.bak")

    try:
        for s in staged[:-1]:
            if os.path.lexists(s.target):
                try:
                    os.link(s.target, backup_of(s.target), follow_symlinks=False)
                    linked.add(s.target)
                except OSError as e:
                    if e.errno not in _NO_LINKS:
                        raise
                    os.replace(s.target, backup_of(s.target))
                backups[s.target] = backup_of(s.target)
        for f in [staged[-1].target, *map(os.fspath, remove)]:
            if f not in backups and os.path.lexists(f):
                os.replace(f, backup_of(f))
                backups[f] = backup_of(f)
        for s in staged:
            s.commit()
            done.append(s)
    except BaseException:
        for s in staged:
            s.discard()
        renamed_in = {s.target for s in done}
        for f, backup in reversed(backups.items()):
            with contextlib.suppress(OSError):
                if f in linked and f not in renamed_in:
                    os.unlink(backup)  # the file was never replaced: the link is all there is to undo
                else:
                    os.replace(backup, f)
        for f in renamed_in - backups.keys():
            with contextlib.suppress(OSError):
                os.unlink(f)
        raise
    for d in dict.fromkeys(os.path.dirname(f) for f in [*(s.target for s in staged), *backups]):
        with contextlib.suppress(OSError):
            fd = os.open(d, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
    for backup in backups.values():
        with contextlib.suppress(OSError):
            os.unlink(backup)


@contextlib.contextmanager
def skip_init():
    """Build modules without drawing their random initial weights (they stay zero): a checkpoint is about
    to overwrite every one of them, and drawing 1 B values as torch's init does takes minutes."""
    saved = nn.Linear.reset_parameters, nn.Embedding.reset_parameters
    nn.Linear.reset_parameters = nn.Embedding.reset_parameters = lambda self: None
    try:
        yield
    finally:
        nn.Linear.reset_parameters, nn.Embedding.reset_parameters = saved


INDEX = "model.safetensors.index.json"


def index_shards(path: Path) -> list[Path]:
    """The files named by ``path/model.safetensors.index.json``, each once (see :func:`index_map`)."""
    return list(dict.fromkeys(index_map(path).values()))


def index_map(path: Path) -> dict[str, Path]:
    """The ``weight_map`` of ``path/model.safetensors.index.json``: tensor name -> its shard. The index
    is data from the checkpoint: it must be an object whose ``weight_map`` maps tensor names to files of
    the directory, and a name that is absolute, or leaves the directory through ``..`` or a symlink, is
    refused, so that an index cannot make the loader read any file of the machine. One exception: the
    hub's cache links ``snapshots/<revision>/<file>`` to ``../../blobs/<hash>``, so a link into the
    ``blobs`` folder of the cache folder the snapshot is in is followed."""
    index = path / INDEX
    d = read_json(index)  # a tensor named twice is refused, not mapped to the last shard named
    if not isinstance(d, dict):
        raise ValueError(f"{index}: must be a JSON object, got {type(d).__name__}")
    weight_map = d.get("weight_map")
    if not (isinstance(weight_map, dict) and all(isinstance(k, str) and isinstance(v, str)
                                                  for k, v in weight_map.items())):
        raise ValueError(f"{index}: 'weight_map' must map tensor names to file names, got {weight_map!r:.200}")
    root = path.resolve()
    roots = [root, root.parent.parent / "blobs"] if root.parent.name == "snapshots" else [root]
    files = {}
    for name in dict.fromkeys(weight_map.values()):
        if not name or "\0" in name or Path(name).is_absolute():
            raise ValueError(f"{index}: shard {name!r} must be a path relative to the model directory")
        real = (path / name).resolve()
        if real == root or not any(real.is_relative_to(r) for r in roots):
            raise ValueError(f"{index}: shard {name!r} is outside the model directory {path}")
        files[name] = path / name
    return {k: files[v] for k, v in weight_map.items()}


def checkpoint_files(path) -> list[Path]:
    """The safetensors files of a model directory: the shards of ``model.safetensors.index.json``,
    else ``model.safetensors``."""
    path = Path(path)
    if (path / INDEX).is_file():
        files = index_shards(path)
        for f in files:
            if not f.is_file():
                raise FileNotFoundError(f"{f}: shard listed in {INDEX} is missing")
        return files
    single = path / "model.safetensors"
    if single.is_file():
        return [single]
    raise FileNotFoundError(f"{path}: no model.safetensors or {INDEX}")


def read_checkpoint(path, where: dict | None = None) -> dict[str, np.ndarray]:
    """Name -> array over every shard (memory-mapped; bf16 widened to float32). Each shard's header
    is checked against its size first, so a truncated file is an error naming it; a name in two
    shards is an error too. With an index, the index is authoritative and checked against the shards:
    every tensor it maps to a shard must be in that shard, and every tensor of a shard must be mapped
    to that shard; an error names the shard and the tensor. ``where``, if given, receives each name's
    file."""
    path = Path(path)
    out: dict[str, np.ndarray] = {}
    where = {} if where is None else where
    files = checkpoint_files(path)
    mapped = index_map(path) if (path / INDEX).is_file() else None
    for f in files:
        for name, arr in lm.load_safetensors(f).items():
            if name in out:
                raise ValueError(f"{f}: tensor {name!r} is also in {where[name]}")
            if mapped is not None and mapped.get(name) != f:
                raise ValueError(f"{f}: tensor {name!r} is in this shard, but {INDEX} "
                                 + ("does not list it" if name not in mapped else f"maps it to {mapped[name].name}"))
            out[name], where[name] = arr, f
    for name, f in (mapped or {}).items():
        if name not in out:
            raise ValueError(f"{f}: tensor {name!r}, which {INDEX} maps to this shard, is not in it")
    return out


class Session:
    """Generation with a KV cache: a prefill program (any prompt length, symbolic ``S``) and a decode
    program (one token per sequence), each compiled once and reused for every prompt and position.

    ``batch`` sequences run together (:meth:`start_batch`, :meth:`step_batch`), left-padded to the
    longest prompt with an attention mask, as Hugging Face's ``generate`` does for decoder-only models:
    column ``c`` of the padded batch is cache row ``c`` for every sequence, so one decode step writes
    one row and the write stays a single map shared by the batch; only the mask (a sequence sees its
    own rows) and the rotary positions (``c - start`` of each sequence) differ per sequence. The
    padding costs ``longest - shortest`` cache rows per sequence, and the logits of a padded batch are
    the ones transformers computes on it. :meth:`start` and :meth:`step` are the one-sequence forms.

    ``pos`` is the number of columns of the current batch (a sequence's length with ``batch`` 1; None
    before the first start) and ``starts`` each sequence's first column. A refused start or step (too
    long, a token id out of range, the wrong number of sequences) is refused before anything runs and
    leaves the session as it was: the sequences under way continue.

    With ``rope_scaling`` ``dynamic`` (NTK), the frequencies of each call are transformers': those for
    ``rope_len``, which grows to the call's length ``n`` (its largest position + 1) once ``n`` passes
    it, and falls back to ``max_position_embeddings`` on a call shorter than that, as in transformers'
    ``dynamic_rope_update``. Keys are cached rotated, so as in transformers the keys of earlier calls keep
    the frequencies they were written with. The state spans sequences as in one transformers model: a
    session behaves as one ``LlamaForCausalLM`` instance does across its ``generate`` calls."""

    def __init__(self, model: Llama, capacity: int | None = None, backend: str = "cpu", batch: int = 1):
        cfg = model.config
        if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
            raise ValueError(f"Session: batch must be a positive integer, got {batch!r}")
        capacity = capacity or cfg.max_position_embeddings
        self.model, self.cfg, self.batch = model, cfg, batch
        self.cache = KVCache(cfg, capacity, batch)
        self.rope_len = cfg.max_position_embeddings  # transformers' max_seq_len_cached (dynamic NTK)
        self._freqs, self._scale = inv_freq(cfg), attention_factor(cfg)
        model.eval()
        self.prefill = self._compile("S", backend)
        self.decode = self._compile(1, backend)
        self.pos: int | None = None
        self.starts: np.ndarray | None = None

    def _compile(self, s, backend):
        g, b, half = lm.Graph(), self.batch, self.cfg.head_dim // 2
        ids = g.input("ids", (b, s), dtype=lm.int32)
        positions = g.input("positions", (s,), dtype=lm.int32)
        starts = g.input("starts", (b,), dtype=lm.int32)
        rope = g.input("cos", (b, s, half)), g.input("sin", (b, s, half))
        return lm.compile(self.model(ids, positions, self.cache, last_only=True, starts=starts, rope=rope),
                          backend=backend)

    def _checked(self, ids: np.ndarray, start: int) -> np.ndarray:
        """``ids`` (B, n) as int32, after checking that they fit columns ``start..start+n-1`` and the
        vocabulary (changes nothing)."""
        n = ids.shape[1]
        mpe = self.cfg.max_position_embeddings
        limit = self.cache.capacity if self.cfg.rope_type == "dynamic" else min(self.cache.capacity, mpe)
        if start + n > limit:
            what = "max_position_embeddings" if limit == mpe else "the KV cache capacity"
            padded = " (the batch's longest sequence, padding included)" if self.batch > 1 else ""
            raise ValueError(f"context of {start + n} tokens{padded} exceeds {what} ({limit})")
        if ids.size and (ids.min() < 0 or ids.max() >= self.cfg.vocab_size):
            raise ValueError(f"token ids must be in [0, {self.cfg.vocab_size}), got {ids.min()}..{ids.max()}")
        return ids.astype(np.int32)  # (in range: the cast is exact)

    def _rope_len(self, n: int) -> int:
        """The length transformers' dynamic NTK update computes a call's frequencies for, the call's own
        length being ``n``: a longer one than ever grows it; one within the original limit resets it."""
        if n > self.rope_len:
            return n
        mpe = self.cfg.max_position_embeddings
        return mpe if n < mpe < self.rope_len else self.rope_len

    def _run(self, fn, ids: np.ndarray, start: int, starts: np.ndarray) -> np.ndarray:
        n = ids.shape[1]
        rows = np.arange(start, start + n, dtype=np.int32)
        positions = np.maximum(rows[None, :] - starts[:, None], 0)  # each sequence's own; padding: 0
        freqs, rope_len = self._freqs, self.rope_len
        if self.cfg.rope_type == "dynamic":
            rope_len = self._rope_len(int(positions.max()) + 1)
            freqs = inv_freq(self.cfg, rope_len)
        cos, sin = rotary(positions, freqs, self._scale)
        logits = fn(ids=ids, positions=rows, starts=starts, cos=cos, sin=sin)
        self.pos, self.starts, self.rope_len = start + n, starts, rope_len
        return logits[:, -1]

    def start_batch(self, prompts) -> np.ndarray:
        """Run ``batch`` prompts (lists of token ids, of any lengths >= 1) from position 0, left-padded
        to the longest; returns each one's next-token logits, (batch, vocab). Refused prompts leave the
        session as it was."""
        if isinstance(prompts, np.ndarray) and prompts.ndim == 2:
            prompts = list(prompts)
        if not isinstance(prompts, (list, tuple)) or len(prompts) != self.batch:
            got = len(prompts) if isinstance(prompts, (list, tuple)) else type(prompts).__name__
            raise ValueError(f"Session(batch={self.batch}).start_batch needs {self.batch} prompts, got {got}")
        seqs = [np.asarray(p) for p in prompts]
        for i, p in enumerate(seqs):
            if p.ndim != 1 or p.size == 0 or not np.issubdtype(p.dtype, np.integer):
                raise ValueError(f"Session.start_batch: prompt {i} must be a non-empty list of token ids, "
                                 f"got shape {p.shape} of {p.dtype}")
        n = max(p.size for p in seqs)
        ids = np.zeros((self.batch, n), np.int64)  # padding: token 0, never seen by a real token
        for i, p in enumerate(seqs):
            ids[i, n - p.size:] = p
        ids = self._checked(ids, 0)
        self.pos = None  # the prefill overwrites the cache's first rows: the old sequences end here
        return self._run(self.prefill, ids, 0, np.array([n - p.size for p in seqs], np.int32))

    def step_batch(self, tokens) -> np.ndarray:
        """Feed one token per sequence at the next column; returns the next-token logits (batch, vocab)."""
        if self.pos is None:
            step, start = ("step", "start(prompt_ids)") if self.batch == 1 else ("step_batch", "start_batch(prompts)")
            raise RuntimeError(f"Session.{step}() needs a sequence: call Session.{start} first")
        ids = np.asarray(tokens)
        if ids.shape != (self.batch,) or not np.issubdtype(ids.dtype, np.integer):
            raise ValueError(f"Session(batch={self.batch}).step_batch needs {self.batch} token ids, got "
                             f"shape {ids.shape} of {ids.dtype}")
        return self._run(self.decode, self._checked(ids.reshape(-1, 1), self.pos), self.pos, self.starts)

    def _single(self, what: str) -> None:
        if self.batch != 1:
            raise ValueError(f"Session(batch={self.batch}).{what} runs one sequence; use {what}_batch")

    def start(self, prompt_ids) -> np.ndarray:
        """Run one prompt (a list of token ids) from position 0; returns the next-token logits (vocab,).
        A prompt that is refused leaves the session as it was."""
        self._single("start")
        ids = np.asarray(prompt_ids)
        if ids.size == 0:
            raise ValueError("the prompt must have at least one token")
        if ids.ndim != 1:  # a batch of prompts would otherwise be read as one, concatenated
            raise ValueError(f"Session.start takes one prompt, a list of token ids; got shape {ids.shape} "
                             f"(for several prompts: Session(model, batch=B).start_batch(prompts))")
        return self.start_batch([ids])[0]

    def step(self, token: int) -> np.ndarray:
        """Feed one token at the next position; returns the next-token logits."""
        self._single("step")
        return self.step_batch([token])[0]


def sample(logits: np.ndarray, rng: np.random.Generator, temperature: float = 0.0, top_k: int = 0,
           top_p: float = 1.0) -> int:
    """Greedy at ``temperature`` 0 (the first maximum, deterministic); else softmax(logits / T) restricted
    to the ``top_k`` largest and the smallest set whose mass reaches ``top_p``. As Hugging Face's
    ``TopKLogitsWarper``, ``top_k`` keeps every token whose logit is at least the k-th largest: tokens
    tied with the k-th are all kept (more than k then)."""
    if temperature <= 0:
        return int(np.argmax(logits))
    z = logits.astype(np.float64) / temperature
    order = np.argsort(-z, kind="stable")
    if 0 < top_k < len(order):
        order = order[z[order] >= z[order[top_k - 1]]]  # a prefix: z[order] is non-increasing
    p = np.exp(z[order] - z[order[0]])
    p /= p.sum()
    if top_p < 1.0:
        keep = int(np.searchsorted(np.cumsum(p), top_p) + 1)
        order, p = order[:keep], p[:keep] / p[:keep].sum()
    return int(order[rng.choice(len(order), p=p)])


def generate(session: Session, prompt_ids, max_new_tokens: int, *, temperature: float = 0.0, top_k: int = 0,
             top_p: float = 1.0, seed: int = 0, eos_ids=()):
    """Yield new token ids one at a time (stops after ``max_new_tokens`` or at an end-of-sequence id)."""
    rng = np.random.default_rng(seed)
    logits = session.start(prompt_ids)
    for i in range(max_new_tokens):
        tok = sample(logits, rng, temperature, top_k, top_p)
        yield tok
        if tok in eos_ids or i == max_new_tokens - 1:
            return
        logits = session.step(tok)


def generate_batch(session: Session, prompts, max_new_tokens: int, *, temperature: float = 0.0, top_k: int = 0,
                   top_p: float = 1.0, seed: int = 0, eos_ids=()) -> list[list[int]]:
    """The new token ids of each of ``session.batch`` prompts (of any lengths), decoded together: each
    list stops after ``max_new_tokens`` or at its own end-of-sequence id (included, as :func:`generate`
    yields it); the batch stops when every sequence has. A finished sequence is fed its last token
    until then, its logits ignored. Sequence ``i`` samples with its own generator seeded ``seed + i``,
    drawn from only while it runs, so it gets the tokens :func:`generate` gives it alone with that seed
    (greedy: the same tokens whatever the seed), up to the rounding that batching changes."""
    rngs = [np.random.default_rng(seed + i) for i in range(session.batch)]
    out: list[list[int]] = [[] for _ in range(session.batch)]
    running = [True] * session.batch
    logits = session.start_batch(prompts)
    for step in range(max_new_tokens):
        for i in range(session.batch):
            if running[i]:
                out[i].append(sample(logits[i], rngs[i], temperature, top_k, top_p))
                running[i] = out[i][-1] not in eos_ids
        if not any(running) or step == max_new_tokens - 1:
            return out
        logits = session.step_batch([seq[-1] for seq in out])
    return out
