"""The rotary frequencies and tables of the Llama example against Hugging Face's float32 arithmetic:
``inv_freq`` bit for bit (an angle error grows with the position), the tables at long positions."""

from __future__ import annotations

import copy
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from llama_reference import inv_freq as reference_inv_freq

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples" / "llama"))
from model import LlamaConfig, attention_factor, inv_freq, rope_tables  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")

LLAMA3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 8192}
PUBLISHED = {  # the rotary fields of published configs
    "llama3.1-8b": dict(hidden_size=4096, num_attention_heads=32, num_key_value_heads=8, rope_theta=500000.0,
                        max_position_embeddings=131072, rope_scaling=LLAMA3),
    "llama2-7b": dict(hidden_size=4096, num_attention_heads=32, rope_theta=10000.0, max_position_embeddings=4096),
    "tinyllama": dict(hidden_size=2048, num_attention_heads=32, num_key_value_heads=4, rope_theta=10000.0,
                      max_position_embeddings=2048),
    "smollm-135m": dict(hidden_size=576, num_attention_heads=9, num_key_value_heads=3, rope_theta=10000.0,
                        max_position_embeddings=2048),
    "linear4": dict(hidden_size=4096, num_attention_heads=32, rope_theta=10000.0, max_position_embeddings=16384,
                    rope_scaling={"type": "linear", "factor": 4.0}),
}
ODD = [  # other thetas (one not a float32), head sizes and llama3 parameters
    dict(hidden_size=hd * 4, num_attention_heads=4, rope_theta=theta, max_position_embeddings=131072,
         rope_scaling=scaling)
    for theta in (1e6, 10000.3, 1234567.89) for hd in (48, 80, 160)
    for scaling in (None, {"rope_type": "linear", "factor": 3.0},
                    {"rope_type": "llama3", "factor": 6.0, "low_freq_factor": 1.5, "high_freq_factor": 3.7,
                     "original_max_position_embeddings": 4000})]


def ulps(a, b):
    return np.abs(a.view(np.int32).astype(np.int64) - b.view(np.int32).astype(np.int64))


@pytest.mark.parametrize("fields", list(PUBLISHED.values()) + ODD,
                         ids=list(PUBLISHED) + [f"odd{i}" for i in range(len(ODD))])
def test_inv_freq_is_hf_float32_arithmetic_bit_for_bit(fields):
    cfg = LlamaConfig(**copy.deepcopy(fields))
    ref = reference_inv_freq({**copy.deepcopy(fields), "head_dim": cfg.head_dim}).numpy()
    got = inv_freq(cfg)
    assert got.dtype == np.float32
    assert ulps(got, ref).max() == 0, f"{int((got != ref).sum())} of {got.size} differ, by up to {ulps(got, ref).max()}"


def test_inv_freq_is_within_an_ulp_or_two_of_transformers():
    transformers = pytest.importorskip("transformers")
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    worst = {}
    for name, fields in PUBLISHED.items():
        hf_cfg = transformers.LlamaConfig(**copy.deepcopy(fields))
        scaling = fields.get("rope_scaling") or {}
        kind = scaling.get("rope_type", scaling.get("type"))
        hf = (ROPE_INIT_FUNCTIONS[kind](hf_cfg, "cpu") if kind else
              LlamaRotaryEmbedding.compute_default_rope_parameters(hf_cfg))[0].numpy()
        worst[name] = int(ulps(inv_freq(LlamaConfig(**copy.deepcopy(fields))), hf).max())
    # torch's float32 pow is within an ulp of the correctly rounded one (which inv_freq uses) and varies
    # with the CPU's vector width; the reciprocal can make that two
    assert max(worst.values()) <= 2, worst


YARN = [  # (head_dim, theta, max positions, scaling): published shapes and the options' corners
    (128, 500000.0, 131072, {"factor": 4.0, "original_max_position_embeddings": 32768}),
    (64, 1e6, 163840, {"factor": 40.0, "beta_fast": 32, "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 1.0,
                       "original_max_position_embeddings": 4096}),
    (80, 10000.0, 16384, {"factor": 8.0, "truncate": False, "original_max_position_embeddings": 2048}),
    (48, 10000.3, 8192, {"factor": 2.0, "attention_factor": 0.7, "beta_fast": 16, "beta_slow": 2}),
]


@pytest.mark.parametrize("hd,theta,mpe,yarn", YARN, ids=[f"yarn{i}" for i in range(len(YARN))])
def test_yarn_frequencies_and_attention_factor_match_transformers(hd, theta, mpe, yarn):
    transformers = pytest.importorskip("transformers")
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    sizes = dict(hidden_size=hd * 4, num_attention_heads=4, head_dim=hd, max_position_embeddings=mpe)
    hf_cfg = transformers.LlamaConfig(**sizes, rope_parameters={"rope_type": "yarn", "rope_theta": theta, **yarn})
    want, want_factor = ROPE_INIT_FUNCTIONS["yarn"](hf_cfg, "cpu")
    cfg = LlamaConfig(**sizes, rope_theta=theta, rope_scaling={"rope_type": "yarn", **copy.deepcopy(yarn)})
    assert ulps(inv_freq(cfg), want.numpy()).max() <= 2  # (torch's float32 pow: see above)
    assert attention_factor(cfg) == pytest.approx(want_factor, rel=1e-12)
    cos, sin = rope_tables(cfg, 64)
    ang = torch.arange(64).float()[:, None] * want[None]
    np.testing.assert_allclose(cos, (ang.cos() * want_factor).numpy(), rtol=0, atol=2e-6)
    np.testing.assert_allclose(sin, (ang.sin() * want_factor).numpy(), rtol=0, atol=2e-6)


def test_rope_tables_at_long_positions_match_hf():
    """HF: ``freqs = positions.float() * inv_freq`` in float32, then cos/sin. The example's angles are
    that product exactly, so its tables stay within an ulp of torch's up to position 131071."""
    cfg = LlamaConfig(**copy.deepcopy(PUBLISHED["llama3.1-8b"]))
    n = cfg.max_position_embeddings
    cos, sin = rope_tables(cfg, n)
    freqs = torch.arange(n).float()[:, None] * reference_inv_freq({**PUBLISHED["llama3.1-8b"], "head_dim": 128})[None]
    assert np.abs(cos - freqs.cos().numpy()).max() <= 2.4e-7
    assert np.abs(sin - freqs.sin().numpy()).max() <= 2.4e-7
