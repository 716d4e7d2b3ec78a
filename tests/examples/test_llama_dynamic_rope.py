"""Dynamic NTK rotary scaling (``rope_scaling: {"rope_type": "dynamic", "factor": f}``) in the Llama
example against transformers: the frequencies of ``_compute_dynamic_ntk_parameters`` at and past
``max_position_embeddings``, and the logits of generation with the KV cache below and past that limit,
including transformers' state across calls (the longest length seen keeps its frequencies until a
call within the limit resets them), for one sequence and a left-padded batch."""

from __future__ import annotations

import copy
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import transformers
from llama_reference import hf_generation_logits, hf_model
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

import luminal as lm

LLAMA = Path(__file__).resolve().parents[2] / "examples" / "llama"
sys.path.insert(0, str(LLAMA))
import make_random  # noqa: E402
from model import Llama, LlamaConfig, Session, inv_freq  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")

TOL = dict(rtol=1e-4, atol=1e-4)
MPE = 16


def ulps(a, b):
    return np.abs(a.view(np.int32).astype(np.int64) - b.view(np.int32).astype(np.int64))


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return make_random.make_random(tmp_path_factory.mktemp("ntk"), layers=2, hidden=32, heads=2, kv_heads=1,
                                   intermediate=48, vocab=128, max_positions=MPE, tokenizer=False, std=0.2,
                                   dynamic_rope=2.0)


@pytest.fixture(scope="module")
def model(model_dir):
    return Llama.from_pretrained(model_dir)


@pytest.mark.parametrize("hd,theta,mpe,factor", [(16, 10000.0, 16, 2.0), (64, 10000.0, 2048, 4.0),
                                                 (128, 500000.0, 8192, 1.7), (48, 10000.3, 100, 3.0)])
def test_frequencies_match_transformers_at_every_length(hd, theta, mpe, factor):
    sizes = dict(hidden_size=hd * 2, num_attention_heads=2, head_dim=hd, max_position_embeddings=mpe)
    scaling = {"rope_type": "dynamic", "factor": factor}
    hf_cfg = transformers.LlamaConfig(**sizes, rope_parameters={**scaling, "rope_theta": theta})
    cfg = LlamaConfig(**sizes, rope_theta=theta, rope_scaling=copy.deepcopy(scaling))
    for n in (None, mpe + 1, mpe + 7, 3 * mpe, 10 * mpe + 3):  # None: at build (and reset); else while generating
        want = ROPE_INIT_FUNCTIONS["dynamic"](hf_cfg, "cpu", seq_len=None if n is None else torch.tensor(n))[0]
        got = inv_freq(cfg, n)
        # the base is transformers' float32 value exactly; torch's float32 pow is within an ulp of the
        # correctly rounded one and the reciprocal can make that two (as for the other kinds)
        assert ulps(got, want.numpy()).max() <= 2, n
    assert ulps(inv_freq(cfg, mpe), inv_freq(cfg)).max() == 0  # within the limit: unscaled


def test_generation_past_the_limit_matches_transformers_across_sequences(model, model_dir):
    hf = hf_model(model_dir)  # one model for every sequence: its rotary state carries over, as ours does
    session = Session(model, capacity=40)
    rng = np.random.default_rng(0)
    runs = [  # (prompt length, decode steps): the longest length, then one between, then one within
        (10, 14),  # grows past 16 step by step: new frequencies each step, cached keys keep theirs
        (20, 2),  # 20..22 < 24 seen: transformers keeps the frequencies of 24
        (5, 3),  # within the limit: reset to the unscaled frequencies
        (18, 1),  # past it again after the reset: 18, then 19, are the longest lengths since
    ]
    lens = []
    for n, steps in runs:
        prompt = rng.integers(0, 128, n).tolist()
        fed = rng.integers(0, 128, (steps, 1)).tolist()
        want = hf_generation_logits(hf, [prompt], fed)
        np.testing.assert_allclose(session.start(prompt), want[0][0], **TOL, err_msg=f"prompt of {n}")
        for k, (tok,) in enumerate(fed):
            np.testing.assert_allclose(session.step(tok), want[k + 1][0], **TOL, err_msg=f"{n}: step {k}")
        lens.append(session.rope_len)
    assert lens == [24, 24, MPE, 19]


def test_batched_generation_past_the_limit_matches_transformers(model, model_dir):
    session = Session(model, capacity=24, batch=2)
    prompts, fed = [[3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8], [2, 7, 1, 8, 2, 8]], [[i, 100 - i] for i in range(8)]
    want = hf_generation_logits(hf_model(model_dir), prompts, fed)
    np.testing.assert_allclose(session.start_batch(prompts), want[0], **TOL)
    for k, tokens in enumerate(fed):  # the longer sequence reaches position 19
        np.testing.assert_allclose(session.step_batch(tokens), want[k + 1], **TOL, err_msg=f"step {k}")


def test_cacheless_forward_within_the_limit_matches_and_past_it_is_refused_naming_the_key(model, model_dir):
    g = lm.Graph()
    f = lm.compile([model(g.input("ids", (1, "S"), dtype=lm.int32))])
    ids = np.arange(3, 3 + MPE, dtype=np.int32)[None]
    with torch.no_grad():
        want = hf_model(model_dir)(torch.from_numpy(ids).long()).logits.numpy()
    np.testing.assert_allclose(f(ids=ids)[0], want, **TOL)
    with pytest.raises(ValueError, match=r"exceeds max_position_embeddings \(16\); rope_scaling 'dynamic' "
                                         r"rescales the frequencies past it only in Session"):
        f(ids=np.arange(MPE + 1, dtype=np.int32)[None])


def test_config_reads_dynamic_in_both_layouts_and_refuses_other_keys(model_dir):
    cfg = LlamaConfig.from_dir(model_dir)
    assert cfg.rope_scaling == {"rope_type": "dynamic", "factor": 2.0}
    base = {k: v for k, v in cfg.to_dict().items() if k not in ("rope_scaling", "rope_theta")}
    v5 = LlamaConfig.from_dict({**base, "rope_parameters": {"rope_type": "dynamic", "factor": 2.0,
                                                            "rope_theta": 10000.0}})
    assert v5.rope_scaling == cfg.rope_scaling and v5.rope_theta == cfg.rope_theta
    with pytest.raises(ValueError, match=r"'low_freq_factor' = 1 is not understood for rope_type 'dynamic'"):
        LlamaConfig.from_dict({**base, "rope_scaling": {"type": "dynamic", "factor": 2.0, "low_freq_factor": 1}})
    with pytest.raises(ValueError, match=r"'factor' must be a finite number >= 1, got 0\.5"):
        LlamaConfig.from_dict({**base, "rope_scaling": {"rope_type": "dynamic", "factor": 0.5}})


def test_generate_script_runs_past_the_limit_as_transformers_generate(model_dir, capsys):
    """``generate.py`` refuses a run past max_position_embeddings except with dynamic scaling; its greedy
    ids are those of transformers' ``generate`` (which updates the frequencies as the cache grows)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("llama_generate_ntk", LLAMA / "generate.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    prompt = [1, 40, 41, 42, 7, 9, 99, 3, 17, 60]
    out = script.main([str(model_dir), "--ids", ",".join(map(str, prompt)), "--max-new-tokens", "12",
                       "--ignore-eos"])  # 21 positions
    capsys.readouterr()
    with torch.no_grad():
        want = hf_model(model_dir).generate(torch.tensor([prompt]), max_new_tokens=12, min_new_tokens=12,
                                            do_sample=False, pad_token_id=0)
    assert out["ids"] == want[0, len(prompt):].tolist()
