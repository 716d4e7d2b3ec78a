"""``LlamaConfig``: a Hugging Face ``config.json`` read so that nothing in it that changes the
computation is ignored.

transformers writes the rotary settings in two layouts: 4.x puts ``rope_theta`` at the top and the
scaling in ``rope_scaling`` (its kind under ``rope_type``, or ``type`` in older files); 5.x puts all of
it in ``rope_parameters``. Both are read. A config of either layout from a model this example does not
implement (another activation, a sliding window, a quantized checkpoint, a rotary scaling it has no
code for) would otherwise load and generate different logits from the first token on, with no sign of
it. So every key of ``config.json`` is in one of three lists, and any other key is an error naming it:

* :data:`MODEL_KEYS`: the sizes and options the model is built from (fields of :class:`LlamaConfig`);
* :data:`FIXED`: keys that must hold the one value this model computes with (``hidden_act: silu``);
* :data:`INERT`: keys that do not change the logits (token ids, dtype, bookkeeping, generation
  defaults that ``generate.py`` takes from its own flags).

The rotary settings are checked the same way, per kind (:data:`ROPE_KEYS`). A config written back by
``save_pretrained`` uses the 4.x layout, which both transformers 4.x and 5.x read.

The values are data too: every field is checked for its type, range and divisibility when the config is
built, so a ``"32"`` for 32, a zero head count or an ``int8`` dtype is a ValueError naming the file and the
key, not a TypeError or ZeroDivisionError later (or a model that loads and computes nonsense). The sizes
are capped (:data:`LIMITS`) far above any published Llama, so that a corrupt value is refused here rather
than tried as an allocation of petabytes.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path


class _Duplicate(Exception):
    """Raised by the json hook; not a ValueError, so that it is not reported as invalid JSON."""


def _unique_keys(pairs: list) -> dict:
    """json object hook: a key given twice is refused instead of json's "the last one wins", which would
    build the model from whichever copy came last (the safetensors reader refuses a name given twice
    too). Linear: a dict, and a second pass only when a key repeats."""
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set = set()
        for k, _ in pairs:
            if k in seen:
                raise _Duplicate(k)
            seen.add(k)
    return out


# config.json is a few kilobytes and the shard index of the largest published checkpoints well under a
# megabyte: a bigger file there is another file (weights copied over it, say), refused before it is read
# whole into memory (a MemoryError, or gigabytes spent, otherwise).
MAX_JSON = 64 << 20


def read_json(f: Path):
    """The JSON value in file ``f`` (a model directory's ``config.json`` or shard index), every error a
    ValueError naming the file: bad UTF-8 or JSON, a key given twice in any object, nesting too deep
    for json's recursive parser (a RecursionError otherwise), or a file over :data:`MAX_JSON` bytes."""
    size = f.stat().st_size
    if size > MAX_JSON:
        raise ValueError(f"{f}: {size} bytes, not a model's JSON file (those are under {MAX_JSON} bytes)")
    try:
        return json.loads(f.read_text(encoding="utf-8"), object_pairs_hook=_unique_keys)
    except _Duplicate as e:
        raise ValueError(f"{f}: key {e.args[0]!r} more than once (json would keep the last silently)") from None
    except ValueError as e:  # bad JSON or bad UTF-8
        raise ValueError(f"{f}: not valid JSON: {e}") from None
    except RecursionError:
        raise ValueError(f"{f}: not a model file: its JSON is nested too deeply") from None


MODEL_KEYS = frozenset({
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "head_dim", "rms_norm_eps", "max_position_embeddings", "tie_word_embeddings",
    "attention_bias", "mlp_bias", "bos_token_id", "eos_token_id", "torch_dtype",
    "rope_theta", "rope_scaling", "rope_parameters",
})
ROPE_LAYOUT = frozenset({"rope_theta", "rope_scaling", "rope_parameters"})  # read by ``_rope``, either layout

# key -> the values meaning what this model computes (HF's "swish" is its SiLU too; a dropout of the
# attention weights changes training; a partial rotary factor rotates only part of each head)
FIXED = {
    "hidden_act": ("silu", "swish"),
    "attention_dropout": (0, None),
    "partial_rotary_factor": (1, None),
    "pruned_heads": ({}, None),
    "is_encoder_decoder": (False, None),
    "add_cross_attention": (False, None),
    # nanotron's configs (SmolLM, SmolLM2) say which rotary layout their weights use: true would pair
    # neighbouring channels (GPT-J style) instead of the two halves of each head as this model does
    "rope_interleaved": (False, None),
}

INERT = frozenset({
    "architectures", "model_type", "dtype", "transformers_version", "_name_or_path", "_commit_hash",
    "_attn_implementation", "_attn_implementation_autoset", "use_cache", "initializer_range",
    # token ids the forward pass does not read (HF's padding_idx only freezes that embedding row in training)
    "pad_token_id", "sep_token_id", "decoder_start_token_id", "forced_bos_token_id", "forced_eos_token_id",
    # tensor-parallel slicing of the same products in old transformers: the same computation
    "pretraining_tp",
    # nanotron's tag for "the Llama architecture" (SmolLM, SmolLM2): what architectures already says
    "is_llama_config",
    "tokenizer_class", "return_dict", "output_hidden_states", "output_attentions", "output_scores", "torchscript",
    "use_bfloat16", "tf_legacy_loss", "chunk_size_feed_forward", "is_decoder", "tie_encoder_decoder",
    "cross_attention_hidden_size", "finetuning_task", "id2label", "label2id", "num_labels", "problem_type",
    "prefix", "task_specific_params",
    # generation defaults (generate.py has its own flags)
    "max_length", "min_length", "do_sample", "early_stopping", "num_beams", "num_beam_groups",
    "diversity_penalty", "temperature", "top_k", "top_p", "typical_p", "repetition_penalty", "length_penalty",
    "no_repeat_ngram_size", "encoder_no_repeat_ngram_size", "bad_words_ids", "num_return_sequences",
    "return_dict_in_generate", "remove_invalid_values", "exponential_decay_length_penalty", "suppress_tokens",
    "begin_suppress_tokens",
})

# rotary kind -> (keys it requires, keys it may have) besides rope_type / type, rope_theta and a
# partial_rotary_factor of 1. ``dynamic`` (NTK): frequencies recomputed for each call's length past
# max_position_embeddings, which the generation Session passes to its programs as runtime tables.
# ``longrope`` and the rest are not implemented.
ROPE_KEYS = {
    "default": (frozenset(), frozenset()),
    "linear": (frozenset({"factor"}), frozenset()),
    "dynamic": (frozenset({"factor"}), frozenset()),
    "llama3": (frozenset({"factor", "low_freq_factor", "high_freq_factor"}),
               frozenset({"original_max_position_embeddings"})),  # default: max_position_embeddings (as 5.x)
    "yarn": (frozenset({"factor"}),
             frozenset({"original_max_position_embeddings", "attention_factor", "beta_fast", "beta_slow", "mscale",
                        "mscale_all_dim", "truncate"})),
}


# Caps on the sizes: the largest published Llama (3.1 405B) has 126 layers, hidden_size 16384,
# intermediate_size 53248, 128 heads of 128, a vocabulary of 128256 and 131072 positions.
LIMITS = {
    "vocab_size": 1 << 22, "hidden_size": 1 << 17, "intermediate_size": 1 << 20, "num_hidden_layers": 1 << 10,
    "num_attention_heads": 1 << 12, "num_key_value_heads": 1 << 12, "head_dim": 1 << 12,
    "max_position_embeddings": 1 << 24,
}
DTYPES = ("float32", "bfloat16", "float16", "float64")  # torch_dtype: the checkpoint's float format


def _int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _same(a, b) -> bool:
    """Equal as JSON values, 1 and 1.0 alike but True and 1 not."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    return a == b


@dataclass
class LlamaConfig:
    """The fields of a Hugging Face ``config.json`` this model uses, with HF's defaults. ``rope_scaling``
    is None for plain RoPE, else a dict with ``rope_type`` (``linear``, ``dynamic``, ``llama3`` or
    ``yarn``) and that kind's parameters; :meth:`from_dict` fills it from either layout."""

    vocab_size: int = 32000
    hidden_size: int = 4096
    intermediate_size: int = 11008
    num_hidden_layers: int = 32
    num_attention_heads: int = 32
    num_key_value_heads: int | None = None
    head_dim: int | None = None
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10000.0
    rope_scaling: dict | None = None
    max_position_embeddings: int = 2048
    tie_word_embeddings: bool = False
    torch_dtype: str = "float32"
    attention_bias: bool = False
    mlp_bias: bool = False
    bos_token_id: int | None = 1
    eos_token_id: int | list | None = 2
    extra: dict = field(default_factory=dict, repr=False)  # the INERT and FIXED keys, written back on save

    def __post_init__(self):
        self._check()
        if self.num_key_value_heads is None:
            self.num_key_value_heads = self.num_attention_heads
        if self.head_dim is None:
            self.head_dim = self.hidden_size // self.num_attention_heads
        self.rope_scaling = _scaling(self.rope_scaling, self.max_position_embeddings, "rope_scaling")

    def _check(self) -> None:
        """Every field the model is built from, checked before it is used: a ValueError naming the key."""
        def bad(key, what):
            raise ValueError(f"config: {key!r} must be {what}, got {getattr(self, key)!r}")

        for key, cap in LIMITS.items():
            v = getattr(self, key)
            derived = v is None and key in ("num_key_value_heads", "head_dim")  # from the head count below
            if not (derived or _int(v) and 1 <= v <= cap):
                bad(key, f"an integer from 1 to {cap}")
        h, kv = self.num_attention_heads, self.num_key_value_heads
        if self.head_dim is None and self.hidden_size % h:  # a head_dim given explicitly need not divide it
            raise ValueError(f"config: 'hidden_size' ({self.hidden_size}) must be a multiple of "
                             f"'num_attention_heads' ({h}) when 'head_dim' is not given")
        if kv is not None and h % kv:
            raise ValueError(f"config: 'num_attention_heads' ({h}) must be a multiple of 'num_key_value_heads' ({kv})")
        head_dim = self.head_dim if self.head_dim is not None else self.hidden_size // h
        if head_dim % 2:
            raise ValueError(f"config: 'head_dim' ({head_dim}) must be even for rotary embeddings")
        for key in ("rms_norm_eps", "rope_theta"):
            if not (_number(getattr(self, key)) and getattr(self, key) > 0):
                bad(key, "a finite number > 0")
        for key in ("tie_word_embeddings", "attention_bias", "mlp_bias"):
            if not isinstance(getattr(self, key), bool):
                bad(key, "true or false")
        if self.torch_dtype is not None and self.torch_dtype not in DTYPES:
            bad("torch_dtype", f"one of {', '.join(DTYPES)}")
        if not (self.bos_token_id is None or _int(self.bos_token_id)):
            bad("bos_token_id", "an integer or null")
        eos = self.eos_token_id
        if not (eos is None or _int(eos) or isinstance(eos, list) and all(_int(i) for i in eos)):
            bad("eos_token_id", "an integer, a list of integers or null")

    @property
    def rope_type(self) -> str:
        return (self.rope_scaling or {}).get("rope_type", "default")

    @classmethod
    def from_dict(cls, d: dict) -> LlamaConfig:
        """Read a ``config.json`` dict of either layout; a key outside the three lists, a FIXED key with
        another value or rotary settings this model does not implement is a ValueError naming it."""
        if not isinstance(d, dict):
            raise ValueError(f"config: must be a JSON object, got {type(d).__name__}")
        for k, v in d.items():
            if k in FIXED and not any(_same(v, ok) for ok in FIXED[k]):
                raise ValueError(f"config: {k!r} = {v!r} is not implemented by this Llama (it computes with "
                                 f"{k} = {FIXED[k][0]!r}); loading it would give other logits")
            if k not in MODEL_KEYS and k not in FIXED and k not in INERT:
                raise ValueError(f"config: key {k!r} = {v!r} is not understood by this Llama and may change what "
                                 f"the model computes (understood: the model's sizes and options, the RoPE "
                                 f"settings, and keys that do not change the logits: ids, dtype, bookkeeping; "
                                 f"see examples/llama/llama_config.py)")
        kw = {k: v for k, v in d.items() if k in MODEL_KEYS - ROPE_LAYOUT}
        if d.get("dtype") is not None:  # transformers 5.x writes "dtype"
            if d["dtype"] not in DTYPES:
                raise ValueError(f"config: 'dtype' must be one of {', '.join(DTYPES)}, got {d['dtype']!r}")
            kw.setdefault("torch_dtype", d["dtype"])
        kw["rope_theta"], kw["rope_scaling"] = _rope(d)
        return cls(**kw, extra={k: v for k, v in d.items() if k not in MODEL_KEYS and k != "dtype"})

    @classmethod
    def from_dir(cls, path) -> LlamaConfig:
        f = Path(path) / "config.json"
        if not f.is_file():
            raise FileNotFoundError(f"{f}: no config.json in the model directory")
        d = read_json(f)
        try:
            if isinstance(d, dict) and d.get("model_type", "llama") != "llama":
                arch = d.get("architectures") or ["LlamaForCausalLM"]
                if not (isinstance(arch, list) and "LlamaForCausalLM" in arch):
                    raise ValueError(f"model_type {d['model_type']!r} / architectures {arch!r} is not a Llama model")
            return cls.from_dict(d)
        except ValueError as e:
            raise ValueError(f"{f}: {e}") from None

    def to_dict(self) -> dict:
        """The config in transformers 4.x's layout (``rope_theta``, ``rope_scaling``), which 5.x reads too."""
        d = dict(self.extra)
        d.update({k: getattr(self, k) for k in self.__dataclass_fields__ if k != "extra"})
        d.setdefault("architectures", ["LlamaForCausalLM"])
        d.setdefault("model_type", "llama")
        d.setdefault("hidden_act", "silu")
        return d


def _rope(d: dict) -> tuple[float, dict | None]:
    """(rope_theta, rope_scaling) from either layout. Both layouts in one file must agree: a theta or a
    scaling given twice with two values is an error, not a silent choice of one."""
    params = d.get("rope_parameters")
    if params is not None and not isinstance(params, dict):
        raise ValueError(f"config: rope_parameters must be an object, got {params!r}")
    params = dict(params or {})
    theta = d.get("rope_theta")
    if theta is not None and "rope_theta" in params and not _same(theta, params["rope_theta"]):
        raise ValueError(f"config: rope_theta is {theta!r} at the top and {params['rope_theta']!r} in rope_parameters")
    theta = params.pop("rope_theta", theta)
    scaling = d.get("rope_scaling")
    if scaling is not None:
        if not isinstance(scaling, dict):
            raise ValueError(f"config: rope_scaling must be an object or null, got {scaling!r}")
        old = _scaling(scaling, d.get("max_position_embeddings", 2048), "rope_scaling")
        new = _scaling(params, d.get("max_position_embeddings", 2048), "rope_parameters") if params else old
        if old != new:
            raise ValueError(f"config: rope_scaling {scaling!r} and rope_parameters {d['rope_parameters']!r} "
                             f"disagree")
        params = scaling
    if theta is None:
        theta = 10000.0
    where = "rope_scaling" if scaling is not None else "rope_parameters"
    return float(theta) if _number(theta) else theta, _scaling(params, d.get("max_position_embeddings", 2048), where)


def _scaling(params: dict | None, max_positions: int, where: str) -> dict | None:
    """The rotary scaling ``params`` (without rope_theta) checked against :data:`ROPE_KEYS` and put in one
    form: the kind under ``rope_type``, llama3's ``original_max_position_embeddings`` filled in; None
    for plain RoPE."""
    if not params:
        return None
    params = dict(params)
    kind = params.pop("rope_type", None)
    old = params.pop("type", None)
    for key, v in (("rope_type", kind), ("type", old)):
        if v is not None and not isinstance(v, str):  # (a list or an object is no kind: not a TypeError below)
            raise ValueError(f"config: {where} {key!r} must be a string naming the rotary kind, got {v!r}")
    if kind is not None and old is not None and kind != old:
        raise ValueError(f"config: {where} has rope_type {kind!r} and type {old!r}")
    kind = kind or old or "default"
    if kind not in ROPE_KEYS:
        raise ValueError(f"config: {where} rope_type {kind!r} is not implemented by this Llama "
                         f"(implemented: {', '.join(ROPE_KEYS)})")
    factor = params.pop("partial_rotary_factor", None)
    if not any(_same(factor, ok) for ok in FIXED["partial_rotary_factor"]):
        raise ValueError(f"config: {where} 'partial_rotary_factor' = {factor!r} is not implemented by this Llama "
                         f"(it rotates the whole head)")
    required, optional = ROPE_KEYS[kind]
    unknown, missing = sorted(params.keys() - required - optional), sorted(required - params.keys())
    if unknown:
        k = unknown[0]
        raise ValueError(f"config: {where} key {k!r} = {params[k]!r} is not understood for rope_type {kind!r} "
                         f"(understood: {', '.join(sorted(required | optional)) or 'none'})")
    if missing:
        raise ValueError(f"config: {where} of rope_type {kind!r} needs {missing[0]!r}")
    if kind == "default":
        return None
    _check_values(params, where, kind)
    if kind in ("llama3", "yarn"):
        params.setdefault("original_max_position_embeddings", max_positions)
    return {"rope_type": kind, **params}


def _check_yarn(params: dict, bad) -> None:
    """YaRN's optional values (transformers' defaults when absent or null: beta_fast 32, beta_slow 1, the
    attention factor from ``factor`` and the mscales, truncate true)."""
    for key in ("beta_fast", "beta_slow", "attention_factor", "mscale", "mscale_all_dim"):
        v = params.get(key)
        if v is not None and not (_number(v) and v > 0):
            bad(key, "a finite number > 0 or null")
    if not (params.get("beta_fast") or 32) > (params.get("beta_slow") or 1):
        bad("beta_fast", f"greater than beta_slow ({params.get('beta_slow') or 1!r})")
    if not isinstance(params.get("truncate", True), bool):
        bad("truncate", "true or false")
    old = params.get("original_max_position_embeddings", 1)
    if isinstance(old, bool) or not isinstance(old, int) or old < 1:
        bad("original_max_position_embeddings", "a positive integer")


def _check_values(params: dict, where: str, kind: str) -> None:
    """The scaling's values, checked here: a factor written as the string "2" or a zero frequency factor
    would otherwise load and fail later in ``inv_freq`` with an error that names no key, or give
    infinite frequencies."""
    def bad(key, what):
        raise ValueError(f"config: {where} of rope_type {kind!r}: {key!r} must be {what}, got {params[key]!r}")

    if not (_number(params["factor"]) and params["factor"] >= 1):
        bad("factor", "a finite number >= 1")
    if kind == "yarn":
        _check_yarn(params, bad)
        return
    if kind != "llama3":
        return
    for key in ("low_freq_factor", "high_freq_factor"):
        if not (_number(params[key]) and params[key] > 0):
            bad(key, "a finite number > 0")
    if not params["high_freq_factor"] > params["low_freq_factor"]:  # the blend divides by their difference
        bad("high_freq_factor", f"greater than low_freq_factor ({params['low_freq_factor']!r})")
    old = params.get("original_max_position_embeddings", 1)
    if isinstance(old, bool) or not isinstance(old, int) or old < 1:
        bad("original_max_position_embeddings", "a positive integer")
