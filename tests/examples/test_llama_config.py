"""The Llama example reads both layouts of a Hugging Face ``config.json``: transformers 4.x's
(``rope_theta`` and ``rope_scaling``) and 5.x's (``rope_parameters``), and agrees with transformers'
logits on each (a llama3-scaled RoPE with another theta than the default, so that a config read
wrongly shows from the second position on). A key that changes the computation and that the
example does not implement is an error naming it, never ignored."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import transformers

import luminal as lm

LLAMA = Path(__file__).resolve().parents[2] / "examples" / "llama"
sys.path.insert(0, str(LLAMA))
from model import Llama, LlamaConfig  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")

PROMPT = np.array([[1, 17, 250, 3, 99, 42, 7, 300, 12, 5, 77, 150]], np.int32)
LLAMA3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 16}


@pytest.fixture(scope="module")
def v5_dir(tmp_path_factory):
    """A tiny random Llama written by transformers itself (5.x: ``rope_parameters``, ``dtype``, ...)."""
    cfg = transformers.LlamaConfig(vocab_size=384, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                                   max_position_embeddings=64, initializer_range=0.2, rms_norm_eps=1e-5,
                                   rope_parameters={**LLAMA3, "rope_theta": 500000.0})
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(cfg)
    with torch.no_grad():  # norm weights away from 1, so that a norm read from the wrong place shows
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.add_(0.1 * torch.randn_like(p))
    path = tmp_path_factory.mktemp("v5")
    model.save_pretrained(str(path))
    return path


def _config(path) -> dict:
    return json.loads((Path(path) / "config.json").read_text())


def _with_config(src: Path, dst: Path, edit) -> Path:
    """A copy of the checkpoint ``src`` whose config.json is ``edit(config)``."""
    shutil.copytree(src, dst)
    (dst / "config.json").write_text(json.dumps(edit(_config(src)), indent=2))
    return dst


def _as_v4(cfg: dict) -> dict:
    """The same model in transformers 4.x's layout: ``rope_theta`` at the top, the scaling in
    ``rope_scaling``, ``torch_dtype``."""
    cfg = dict(cfg)
    rope = dict(cfg.pop("rope_parameters"))
    cfg["rope_theta"] = rope.pop("rope_theta")
    cfg["rope_scaling"] = rope
    cfg["torch_dtype"] = cfg.pop("dtype", "float32")
    cfg["transformers_version"] = "4.46.0"
    return cfg


def _ours(path, ids=PROMPT):
    model = Llama.from_pretrained(path)
    model.eval()
    g = lm.Graph()
    x = g.input("ids", ids.shape, dtype=lm.int32)
    return lm.compile(model(x))(ids=ids)


def _hf(path, ids=PROMPT):
    hf = transformers.LlamaForCausalLM.from_pretrained(str(path), dtype=torch.float32)
    hf.eval()
    with torch.no_grad():
        return hf(torch.from_numpy(ids).long()).logits.numpy()


def test_transformers_5_layout_matches_transformers(v5_dir):
    cfg = _config(v5_dir)
    assert "rope_parameters" in cfg and "rope_theta" not in cfg and "rope_scaling" not in cfg
    ours = LlamaConfig.from_dir(v5_dir)
    assert (ours.rope_theta, ours.rope_type) == (500000.0, "llama3")
    np.testing.assert_allclose(_ours(v5_dir), _hf(v5_dir), rtol=1e-4, atol=1e-4)


def test_transformers_4_layout_matches_transformers(v5_dir, tmp_path):
    v4 = _with_config(v5_dir, tmp_path / "v4", _as_v4)
    assert "rope_parameters" not in _config(v4) and _config(v4)["rope_scaling"]["rope_type"] == "llama3"
    np.testing.assert_allclose(_ours(v4), _hf(v4), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(_ours(v4), _hf(v5_dir), rtol=1e-4, atol=1e-4)  # the same model


def test_old_type_key_and_linear_scaling(v5_dir, tmp_path):
    """4.x configs from before ``rope_type`` name the kind ``type``; ``linear`` divides the frequencies."""
    def linear(cfg):
        cfg = _as_v4(cfg)
        cfg["rope_scaling"] = {"type": "linear", "factor": 4.0}
        return cfg

    path = _with_config(v5_dir, tmp_path / "linear", linear)
    np.testing.assert_allclose(_ours(path), _hf(path), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("yarn", [
    {"factor": 4.0, "original_max_position_embeddings": 16},
    {"factor": 8.0, "beta_fast": 16, "beta_slow": 2, "mscale": 0.707, "mscale_all_dim": 1.0, "truncate": False},
    {"factor": 2.0, "attention_factor": 0.8},
], ids=["default", "deepseek-mscale", "attention-factor"])
def test_yarn_scaling_matches_transformers(v5_dir, tmp_path, yarn):
    """YaRN: frequencies interpolated below beta_slow turns over the original context, kept above
    beta_fast, and the tables scaled by the attention factor; both layouts, and what save_pretrained writes."""
    def v5(cfg):
        return {**cfg, "rope_parameters": {"rope_type": "yarn", "rope_theta": 500000.0, **yarn}}

    path = _with_config(v5_dir, tmp_path / "yarn", v5)
    assert LlamaConfig.from_dir(path).rope_type == "yarn"
    np.testing.assert_allclose(_ours(path), _hf(path), rtol=1e-4, atol=1e-4)
    v4 = _with_config(path, tmp_path / "yarn4", _as_v4)
    np.testing.assert_allclose(_ours(v4), _hf(path), rtol=1e-4, atol=1e-4)
    Llama.from_pretrained(v4).save_pretrained(tmp_path / "saved")
    np.testing.assert_allclose(_hf(tmp_path / "saved"), _hf(path), rtol=1e-5, atol=1e-5)


def test_saved_config_loads_in_transformers(v5_dir, tmp_path):
    """What ``save_pretrained`` writes from a 5.x config keeps the RoPE settings (transformers reads it)."""
    model = Llama.from_pretrained(v5_dir)
    model.save_pretrained(tmp_path / "saved")
    np.testing.assert_allclose(_hf(tmp_path / "saved"), _hf(v5_dir), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(_ours(tmp_path / "saved"), _hf(v5_dir), rtol=1e-4, atol=1e-4)


def _set(key, value):
    return lambda cfg: {**cfg, key: value}


def _rope(**changes):
    return lambda cfg: {**cfg, "rope_parameters": {**cfg["rope_parameters"], **changes}}


def _drop_rope(key):
    return lambda cfg: {**cfg, "rope_parameters": {k: v for k, v in cfg["rope_parameters"].items() if k != key}}


@pytest.mark.parametrize("edit, message", [
    (_set("hidden_act", "gelu"), r"'hidden_act' = 'gelu'"),
    (_set("sliding_window", 32), r"'sliding_window' = 32"),
    (_set("quantization_config", {"quant_method": "bitsandbytes"}), r"'quantization_config'"),
    (_set("attention_dropout", 0.1), r"'attention_dropout' = 0\.1"),
    (_set("partial_rotary_factor", 0.5), r"'partial_rotary_factor' = 0\.5"),
    (_rope(rope_type="dynamic"), r"'high_freq_factor' = 4\.0 is not understood for rope_type 'dynamic'"),
    (_rope(partial_rotary_factor=0.5), r"'partial_rotary_factor' = 0\.5"),
    (_rope(attention_factor=2.0), r"'attention_factor'"),
    (_drop_rope("low_freq_factor"), r"'low_freq_factor'"),
    (_set("rope_theta", 10000.0), r"rope_theta.*10000\.0.*500000\.0"),
    (lambda cfg: {**_as_v4(cfg), "rope_scaling": {"rope_type": "longrope", "short_factor": [1.0]}},
     r"rope_type 'longrope'"),
    (lambda cfg: {**_as_v4(cfg), "rope_scaling": {**LLAMA3, "mscale": 1.0}}, r"'mscale'"),
])
def test_a_key_that_changes_the_math_is_an_error_naming_it(v5_dir, tmp_path, edit, message):
    path = _with_config(v5_dir, tmp_path / "bad", edit)
    with pytest.raises(ValueError, match=message) as e:
        Llama.from_pretrained(path)
    assert "config.json" in str(e.value)


def test_keys_that_do_not_change_the_math_are_accepted(v5_dir, tmp_path):
    extra = {"_name_or_path": "meta-llama/Llama-3.2-1B", "pad_token_id": 0, "use_cache": False,
             "pretraining_tp": 1, "output_attentions": False, "tokenizer_class": "PreTrainedTokenizerFast"}
    path = _with_config(v5_dir, tmp_path / "ok", lambda cfg: {**cfg, **extra})
    np.testing.assert_allclose(_ours(path), _hf(v5_dir), rtol=1e-4, atol=1e-4)


# The config.json files of the model families the README names, as published on the Hugging Face hub
# (written from those files: their keys and values, in their layout). Each must load as it is.
_SMOL = {"architectures": ["LlamaForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
         "hidden_act": "silu", "is_llama_config": True, "model_type": "llama", "pretraining_tp": 1,
         "rms_norm_eps": 1e-05, "rope_interleaved": False, "rope_scaling": None, "tie_word_embeddings": True,
         "torch_dtype": "bfloat16", "use_cache": True, "vocab_size": 49152}
PUBLISHED = {
    "TinyLlama-1.1B-Chat-v1.0": {
        "architectures": ["LlamaForCausalLM"], "attention_bias": False, "bos_token_id": 1, "eos_token_id": 2,
        "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 5632,
        "max_position_embeddings": 2048, "model_type": "llama", "num_attention_heads": 32,
        "num_hidden_layers": 22, "num_key_value_heads": 4, "pretraining_tp": 1, "rms_norm_eps": 1e-05,
        "rope_scaling": None, "rope_theta": 10000.0, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
        "transformers_version": "4.35.0", "use_cache": True, "vocab_size": 32000},
    "Llama-2-7b-hf": {
        "_name_or_path": "meta-llama/Llama-2-7b-hf", "architectures": ["LlamaForCausalLM"], "bos_token_id": 1,
        "eos_token_id": 2, "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02,
        "intermediate_size": 11008, "max_position_embeddings": 4096, "model_type": "llama",
        "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 32, "pretraining_tp": 1,
        "rms_norm_eps": 1e-05, "rope_scaling": None, "tie_word_embeddings": False, "torch_dtype": "float16",
        "transformers_version": "4.31.0.dev0", "use_cache": True, "vocab_size": 32000},
    "Meta-Llama-3-8B": {
        "architectures": ["LlamaForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
        "bos_token_id": 128000, "eos_token_id": 128001, "hidden_act": "silu", "hidden_size": 4096,
        "initializer_range": 0.02, "intermediate_size": 14336, "max_position_embeddings": 8192,
        "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
        "pretraining_tp": 1, "rms_norm_eps": 1e-05, "rope_scaling": None, "rope_theta": 500000.0,
        "tie_word_embeddings": False, "torch_dtype": "bfloat16", "transformers_version": "4.40.0.dev0",
        "use_cache": True, "vocab_size": 128256},
    "Llama-3.2-1B": {
        "architectures": ["LlamaForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
        "bos_token_id": 128000, "eos_token_id": 128001, "head_dim": 64, "hidden_act": "silu", "hidden_size": 2048,
        "initializer_range": 0.02, "intermediate_size": 8192, "max_position_embeddings": 131072,
        "mlp_bias": False, "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 16,
        "num_key_value_heads": 8, "pretraining_tp": 1, "rms_norm_eps": 1e-05,
        "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                         "original_max_position_embeddings": 8192, "rope_type": "llama3"},
        "rope_theta": 500000.0, "tie_word_embeddings": True, "torch_dtype": "bfloat16",
        "transformers_version": "4.45.0.dev0", "use_cache": True, "vocab_size": 128256},
    "SmolLM2-135M": {
        **_SMOL, "_name_or_path": "HuggingFaceTB/SmolLM2-135M", "bos_token_id": 0, "eos_token_id": 0,
        "head_dim": 64, "hidden_size": 576, "initializer_range": 0.041666666666666664, "intermediate_size": 1536,
        "max_position_embeddings": 2048, "mlp_bias": False, "num_attention_heads": 9, "num_hidden_layers": 30,
        "num_key_value_heads": 3, "rope_theta": 100000, "transformers_version": "4.48.0"},
    "SmolLM2-360M": {
        **_SMOL, "bos_token_id": 0, "eos_token_id": 0, "hidden_size": 960, "initializer_range": 0.02,
        "intermediate_size": 2560, "max_position_embeddings": 8192, "num_attention_heads": 15,
        "num_hidden_layers": 32, "num_key_value_heads": 5, "rope_theta": 100000, "transformers_version": "4.40.1"},
    "SmolLM2-1.7B": {
        **_SMOL, "bos_token_id": 1, "eos_token_id": 2, "hidden_size": 2048, "initializer_range": 0.02,
        "intermediate_size": 8192, "max_position_embeddings": 8192, "num_attention_heads": 32,
        "num_hidden_layers": 24, "num_key_value_heads": 32, "pad_token_id": 2, "rope_theta": 130000,
        "transformers_version": "4.42.3"},
}


@pytest.mark.parametrize("name", PUBLISHED)
def test_published_configs_load(name):
    d = PUBLISHED[name]
    cfg = LlamaConfig.from_dict(d)
    assert (cfg.hidden_size, cfg.num_hidden_layers, cfg.num_key_value_heads) == (
        d["hidden_size"], d["num_hidden_layers"], d["num_key_value_heads"])
    assert cfg.rope_theta == d.get("rope_theta", 10000.0)
    assert cfg.rope_type == (d["rope_scaling"] or {}).get("rope_type", "default")
    again = LlamaConfig.from_dict(cfg.to_dict())  # what save_pretrained writes loads again, the same
    assert again.to_dict() == cfg.to_dict()


def test_interleaved_rope_is_an_error_naming_it():
    """nanotron's ``rope_interleaved: true`` rotates pairs of neighbouring channels: other logits."""
    with pytest.raises(ValueError, match=r"'rope_interleaved' = True is not implemented"):
        LlamaConfig.from_dict({**PUBLISHED["SmolLM2-135M"], "rope_interleaved": True})


@pytest.mark.parametrize("scaling, key", [
    ({"type": "linear", "factor": "2"}, "factor"),
    ({"rope_type": "linear", "factor": 0.5}, "factor"),
    ({"rope_type": "linear", "factor": float("nan")}, "factor"),
    ({"rope_type": "linear", "factor": True}, "factor"),
    ({**LLAMA3, "factor": None}, "factor"),
    ({**LLAMA3, "low_freq_factor": 0.0}, "low_freq_factor"),
    ({**LLAMA3, "high_freq_factor": "4"}, "high_freq_factor"),
    ({**LLAMA3, "high_freq_factor": 1.0}, "high_freq_factor"),  # == low_freq_factor: the blend divides by 0
    ({**LLAMA3, "original_max_position_embeddings": 16.5}, "original_max_position_embeddings"),
    ({**LLAMA3, "original_max_position_embeddings": 0}, "original_max_position_embeddings"),
    ({"rope_type": "yarn", "factor": 4.0, "beta_fast": 1.0, "beta_slow": 2.0}, "beta_fast"),
    ({"rope_type": "yarn", "factor": 4.0, "attention_factor": -1.0}, "attention_factor"),
    ({"rope_type": "yarn", "factor": 4.0, "truncate": "no"}, "truncate"),
    ({"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 0}, "original_max_position_embeddings"),
])
def test_a_scaling_value_of_the_wrong_type_or_range_is_an_error_naming_it(scaling, key):
    for d in ({"rope_scaling": scaling}, {"rope_parameters": scaling}):
        with pytest.raises(ValueError, match=rf"{next(iter(d))} of rope_type '\w+': '{key}' must be"):
            LlamaConfig.from_dict(d)


# config.json is data: every key the model is built from is checked (type, range, divisibility) where
# it is read, and the error names the file and the key instead of failing later (or never) elsewhere.
_TINY = {"vocab_size": 128, "hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 2,
         "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 32}


@pytest.mark.parametrize("text, message", [
    ('{"hidden_size": 32,', r"not valid JSON"),
    ("[1, 2]", r"must be a JSON object, got list"),
    ('"llama"', r"must be a JSON object, got str"),
    (b"\xff\xfe{}", r"not valid JSON"),
])
def test_a_config_that_is_not_a_json_object_is_an_error_naming_the_file(tmp_path, text, message):
    f = tmp_path / "config.json"
    f.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(ValueError, match=message) as e:
        LlamaConfig.from_dir(tmp_path)
    assert str(f) in str(e.value)


@pytest.mark.parametrize("text, key", [
    ('{"rope_theta": 10000.0, %s, "rope_theta": 500000.0}', "rope_theta"),
    ('{%s, "rope_scaling": {"rope_type": "linear", "factor": 2.0, "factor": 4.0}}', "factor"),
])
def test_a_key_given_twice_is_an_error_naming_the_file_and_key(tmp_path, text, key):
    """Before: json kept the last value silently, so the model was built from whichever copy came last
    (the safetensors reader refuses a name given twice; a config is no less data)."""
    f = tmp_path / "config.json"
    f.write_text(text % json.dumps(_TINY)[1:-1])
    with pytest.raises(ValueError, match=rf"key '{key}' more than once") as e:
        LlamaConfig.from_dir(tmp_path)
    assert str(f) in str(e.value)


def test_a_deeply_nested_config_is_an_error_naming_the_file(tmp_path):
    f = tmp_path / "config.json"
    f.write_text('{"x": ' + "[" * 100_000 + "]" * 100_000 + "}")
    with pytest.raises(ValueError, match="nested too deeply") as e:
        LlamaConfig.from_dir(tmp_path)
    assert str(f) in str(e.value)


@pytest.mark.parametrize("key, value, message", [
    ("num_attention_heads", 0, r"'num_attention_heads' must be an integer from 1 to \d+, got 0"),
    ("hidden_size", "32", r"'hidden_size' must be an integer from 1 to \d+, got '32'"),
    ("hidden_size", -32, r"'hidden_size' must be an integer from 1 to \d+, got -32"),
    ("hidden_size", 32.0, r"'hidden_size' must be an integer"),
    ("hidden_size", True, r"'hidden_size' must be an integer"),
    ("intermediate_size", 0, r"'intermediate_size' must be an integer from 1"),
    ("vocab_size", None, r"'vocab_size' must be an integer from 1"),
    ("max_position_embeddings", -1, r"'max_position_embeddings' must be an integer from 1"),
    ("num_hidden_layers", 10**9, r"'num_hidden_layers' must be an integer from 1 to 1024, got 1000000000"),
    ("num_key_value_heads", 0, r"'num_key_value_heads' must be an integer from 1"),
    ("num_key_value_heads", 3, r"'num_attention_heads' \(4\) must be a multiple of 'num_key_value_heads' \(3\)"),
    ("head_dim", "8", r"'head_dim' must be an integer from 1"),
    ("head_dim", 7, r"'head_dim' \(7\) must be even"),
    ("num_attention_heads", 6, r"'hidden_size' \(32\) must be a multiple of 'num_attention_heads' \(6\)"),
    ("rms_norm_eps", "x", r"'rms_norm_eps' must be a finite number > 0, got 'x'"),
    ("rms_norm_eps", 0, r"'rms_norm_eps' must be a finite number > 0, got 0"),
    ("rms_norm_eps", float("nan"), r"'rms_norm_eps' must be a finite number > 0, got nan"),
    ("rope_theta", float("inf"), r"'rope_theta' must be a finite number > 0, got inf"),
    ("rope_theta", "10000", r"'rope_theta' must be a finite number > 0"),
    ("torch_dtype", "int8", r"'torch_dtype' must be one of float32, bfloat16, float16, float64, got 'int8'"),
    ("dtype", "int8", r"'dtype' must be one of .*, got 'int8'"),
    ("tie_word_embeddings", "false", r"'tie_word_embeddings' must be true or false, got 'false'"),
    ("attention_bias", 1, r"'attention_bias' must be true or false, got 1"),
    ("mlp_bias", None, r"'mlp_bias' must be true or false, got None"),
    ("bos_token_id", "1", r"'bos_token_id' must be an integer or null, got '1'"),
    ("eos_token_id", [2, "3"], r"'eos_token_id' must be an integer, a list of integers or null, got \[2, '3'\]"),
])
def test_a_value_of_the_wrong_type_or_range_is_an_error_naming_the_file_and_key(tmp_path, key, value, message):
    f = tmp_path / "config.json"
    f.write_text(json.dumps({**_TINY, key: value}))
    with pytest.raises(ValueError, match=message) as e:
        LlamaConfig.from_dir(tmp_path)
    assert str(f) in str(e.value)
    with pytest.raises(ValueError, match=message):  # the same check for a config built in Python
        LlamaConfig.from_dict({**_TINY, key: value})


def test_head_dim_given_need_not_divide_hidden_size():
    """As in transformers: with ``head_dim`` given, hidden_size is not heads x head_dim (projections
    map between the two); only a head_dim derived from hidden_size needs the division to be exact."""
    cfg = LlamaConfig.from_dict({**_TINY, "num_attention_heads": 6, "num_key_value_heads": 3, "head_dim": 8})
    assert (cfg.head_dim, cfg.num_key_value_heads) == (8, 3)
    assert LlamaConfig.from_dict({**_TINY, "eos_token_id": [2, 3], "bos_token_id": None, "torch_dtype": None})
