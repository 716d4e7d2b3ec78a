"""What the Llama example reads from a model directory is data: config.json (a seeded byte-flip fuzz,
and the keys that change the math: hidden_act, the rotary kinds, tie_word_embeddings, attention_bias,
mlp_bias, head_dim) and tokenizer.json. Each problem is a ValueError (or OSError) naming the file and
the key, never a TypeError from inside the reader or the tokenizers package's bare Exception."""

from __future__ import annotations

import json
import os
import random
import sys
from pathlib import Path

import pytest

LLAMA = Path(__file__).resolve().parents[2] / "examples" / "llama"
sys.path.insert(0, str(LLAMA))
from generate import load_tokenizer  # noqa: E402
from llama_config import LlamaConfig  # noqa: E402
from model import Llama  # noqa: E402

BASE = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 256, "hidden_size": 64,
        "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
        "head_dim": 16, "hidden_act": "silu", "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
        "max_position_embeddings": 128, "tie_word_embeddings": False, "attention_bias": False, "mlp_bias": False,
        "attention_dropout": 0.0, "torch_dtype": "float32", "bos_token_id": 1, "eos_token_id": 2,
        "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                         "original_max_position_embeddings": 64}}


def _dir(tmp_path, cfg) -> Path:
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    return tmp_path


@pytest.mark.parametrize("key", ["rope_type", "type"])
@pytest.mark.parametrize("value", [[1], {"a": 1}, 3])
def test_a_rotary_kind_that_is_not_a_string_is_a_value_error_naming_it(tmp_path, key, value):
    """Before: a list or an object there was a TypeError (unhashable type: 'list') naming nothing."""
    scaling = {**{k: v for k, v in BASE["rope_scaling"].items() if k != "rope_type"}, key: value}
    path = _dir(tmp_path, {**BASE, "rope_scaling": scaling})
    with pytest.raises(ValueError, match=rf"config\.json: config: rope_scaling '{key}' must be a string naming"):
        LlamaConfig.from_dir(path)


OK = None
KEYS = [  # (key, value, None if it loads else the message)
    ("hidden_act", "silu", OK), ("hidden_act", "swish", OK), ("hidden_act", "gelu", r"'hidden_act' = 'gelu'"),
    ("hidden_act", "gelu_pytorch_tanh", "'hidden_act'"), ("hidden_act", "relu", "'hidden_act'"),
    ("hidden_act", None, "'hidden_act'"),
    ("tie_word_embeddings", True, OK), ("tie_word_embeddings", "true", "'tie_word_embeddings' must be true or false"),
    ("tie_word_embeddings", 1, "'tie_word_embeddings' must be true or false"),
    ("attention_bias", True, OK), ("attention_bias", None, "'attention_bias' must be true or false"),
    ("mlp_bias", True, OK), ("mlp_bias", 0, "'mlp_bias' must be true or false"),
    ("head_dim", 8, OK), ("head_dim", None, OK), ("head_dim", 15, r"'head_dim' \(15\) must be even"),
    ("head_dim", 0, "'head_dim' must be an integer"), ("head_dim", "16", "'head_dim' must be an integer"),
    ("rope_scaling", None, OK), ("rope_scaling", {"rope_type": "default"}, OK),
    ("rope_scaling", {"type": "linear", "factor": 2.0}, OK),
    ("rope_scaling", {"rope_type": "yarn", "factor": 4.0}, OK),
    ("rope_scaling", {"rope_type": "dynamic", "factor": 2.0}, OK),
    ("rope_scaling", {"rope_type": "dynamic"}, "rope_type 'dynamic' needs 'factor'"),
    ("rope_scaling", {"rope_type": "longrope", "short_factor": [1.0]}, "rope_type 'longrope' is not implemented"),
    ("rope_scaling", {"type": "su", "factor": 2.0}, "rope_type 'su' is not implemented"),
    ("rope_scaling", {"rope_type": "linear", "factor": float("nan")}, "'factor' must be a finite number"),
    ("rope_scaling", {"rope_type": "linear", "factor": 2.0, "low_freq_factor": 1.0}, "'low_freq_factor'"),
    ("rope_scaling", [2.0], "rope_scaling must be an object or null"),
    ("sliding_window", 64, "'sliding_window' = 64 is not understood"),
    ("rope_interleaved", True, "'rope_interleaved' = True is not implemented"),
]


@pytest.mark.parametrize("key,value,message", KEYS, ids=[f"{k}={v!r}"[:40] for k, v, _ in KEYS])
def test_each_key_that_changes_the_math_is_read_or_refused_by_name(tmp_path, key, value, message):
    path = _dir(tmp_path, {**BASE, key: value})
    if message is OK:
        cfg = LlamaConfig.from_dir(path)
        if key in ("tie_word_embeddings", "attention_bias", "mlp_bias", "head_dim") and value is not None:
            assert getattr(cfg, key) == value
        return
    with pytest.raises(ValueError, match=message) as e:
        LlamaConfig.from_dir(path)
    assert str(path / "config.json") in str(e.value)


def test_config_byte_flips_are_refused_naming_the_file_or_load(tmp_path):
    """A seeded fuzz of config.json: every flipped file either loads (a flip in a value that is still
    valid, or in an inert key's value) or is a ValueError naming the file; never another exception."""
    raw = json.dumps(BASE, indent=1).encode()
    rnd = random.Random(2024)
    for _ in range(1500):
        b = bytearray(raw)
        pos = rnd.randrange(len(b))
        b[pos] ^= 1 << rnd.randrange(8)
        (tmp_path / "config.json").write_bytes(bytes(b))
        try:
            LlamaConfig.from_dir(tmp_path)
        except ValueError as e:
            assert str(tmp_path / "config.json") in str(e), (pos, e)


@pytest.mark.parametrize("text", [b'{"version": "1.0", "model": ', b"\xff\xfe", b"[]", b"{}", b"[" * 10_000])
def test_a_corrupt_tokenizer_json_is_a_value_error_naming_it(tmp_path, text):
    """Before: the tokenizers package's bare Exception ("EOF while parsing an object at line 1 column
    17"), naming no file."""
    pytest.importorskip("tokenizers")
    (tmp_path / "tokenizer.json").write_bytes(text)
    with pytest.raises(ValueError, match=r"tokenizer\.json: not a tokenizer the 'tokenizers' package can read"):
        load_tokenizer(tmp_path, required=True)


def test_a_fifo_where_a_model_file_should_be_is_an_os_error_not_a_hang(tmp_path):
    """Nothing is opened that is not a regular file: a FIFO named config.json or model.safetensors would
    block an open() until some process wrote to it."""
    _dir(tmp_path, BASE)
    os.mkfifo(tmp_path / "model.safetensors")
    with pytest.raises(FileNotFoundError, match="no model.safetensors"):
        Llama.from_pretrained(tmp_path)
    (tmp_path / "config.json").unlink()
    os.mkfifo(tmp_path / "config.json")
    with pytest.raises(FileNotFoundError, match="no config.json"):
        LlamaConfig.from_dir(tmp_path)


@pytest.mark.parametrize("name", ["config.json", "model.safetensors.index.json"])
def test_a_json_file_of_absurd_size_is_refused_before_it_is_read(tmp_path, name):
    """Before: read whole (here a sparse 1 TiB file: a MemoryError) to be parsed."""
    _dir(tmp_path, BASE)
    with open(tmp_path / name, "wb") as f:
        try:
            f.truncate(2**40)
        except OSError as e:
            pytest.skip(f"no sparse 1 TiB file here: {e}")
    with pytest.raises(ValueError, match=rf"{name}: 1099511627776 bytes, not a model's JSON file"):
        Llama.from_pretrained(tmp_path)
