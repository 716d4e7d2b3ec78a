"""Batched generation in the Llama example: ``Session(batch=B)`` left-pads prompts of different lengths
with an attention mask, as Hugging Face's ``generate`` does. Each sequence gets exactly the tokens it
gets alone (greedy, sampled with seed ``seed + i``, stopping at its own end-of-sequence id), and the
logits of the padded batch are transformers' own on the same batch, through its KV cache."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from llama_reference import hf_generation_logits, hf_model

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples" / "llama"))
import make_random  # noqa: E402
from model import Llama, Session, generate, generate_batch  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")

TOL = dict(rtol=1e-4, atol=1e-4)
PROMPTS = [[1, 17, 50, 3, 99], [1, 42], [1, 7, 88, 12, 5, 64, 31, 9]]  # lengths 5, 2, 8
NEW = 6


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return make_random.make_random(tmp_path_factory.mktemp("batch"), layers=2, hidden=32, heads=4, kv_heads=2,
                                   intermediate=48, vocab=128, max_positions=32, tokenizer=False, std=0.2)


@pytest.fixture(scope="module")
def sessions(model_dir):
    model = Llama.from_pretrained(model_dir)
    return Session(model, capacity=16), Session(model, capacity=16, batch=3)


def test_greedy_batch_gives_each_prompt_its_tokens_alone(sessions):
    one, batch = sessions
    alone = [list(generate(one, p, NEW)) for p in PROMPTS]
    assert generate_batch(batch, PROMPTS, NEW) == alone
    assert batch.pos == 8 + NEW - 1 and batch.starts.tolist() == [3, 6, 0]


def test_each_sequence_stops_at_its_own_eos(sessions):
    one, batch = sessions
    greedy = [list(generate(one, p, NEW)) for p in PROMPTS]
    # an id the second sequence makes before its last token, and some other sequence never: they stop apart
    eos = {next(t for t in greedy[1][:-1] if any(t not in g for g in greedy))}
    want = [list(generate(one, p, NEW, eos_ids=eos)) for p in PROMPTS]
    assert len(want[1]) < NEW and max(map(len, want)) == NEW
    assert generate_batch(batch, PROMPTS, NEW, eos_ids=eos) == want


def test_sampled_batch_samples_each_sequence_as_alone_with_seed_plus_i(sessions):
    one, batch = sessions
    kw = dict(temperature=1.3, top_k=40, top_p=0.95)
    want = [list(generate(one, p, NEW, seed=7 + i, **kw)) for i, p in enumerate(PROMPTS)]
    assert generate_batch(batch, PROMPTS, NEW, seed=7, **kw) == want
    assert len({tuple(w) for w in want}) == 3


def test_padded_batch_logits_match_transformers(model_dir, sessions):
    _, batch = sessions
    fed = [[5, 9, 70], [6, 1, 33], [100, 2, 4]]  # one token per sequence per decode step
    want = hf_generation_logits(hf_model(model_dir), PROMPTS, fed)
    np.testing.assert_allclose(batch.start_batch(PROMPTS), want[0], **TOL, err_msg="prefill")
    for step, tokens in enumerate(fed):
        np.testing.assert_allclose(batch.step_batch(tokens), want[step + 1], **TOL, err_msg=f"decode step {step}")


def test_batch_errors_name_the_counts_and_leave_the_batch_under_way(sessions):
    one, batch = sessions
    with pytest.raises(ValueError, match=r"Session\.start takes one prompt.*shape \(2, 3\).*start_batch"):
        one.start([[1, 2, 3], [4, 5, 6]])  # was read as one prompt of 6 tokens
    with pytest.raises(ValueError, match=r"Session\(batch=3\)\.start runs one sequence; use start_batch"):
        batch.start([1, 2, 3])
    before = batch.start_batch(PROMPTS)
    with pytest.raises(ValueError, match=r"Session\(batch=3\)\.start_batch needs 3 prompts, got 2"):
        batch.start_batch(PROMPTS[:2])
    with pytest.raises(ValueError, match=r"prompt 1 must be a non-empty list of token ids"):
        batch.start_batch([PROMPTS[0], [], PROMPTS[2]])
    with pytest.raises(ValueError, match=r"context of 17 tokens \(the batch's longest sequence, padding "
                                         r"included\) exceeds the KV cache capacity \(16\)"):
        batch.start_batch([[1], [2], list(range(17))])
    with pytest.raises(ValueError, match=r"step_batch needs 3 token ids, got shape \(2,\)"):
        batch.step_batch([1, 2])
    with pytest.raises(ValueError, match=r"token ids must be in \[0, 128\), got 1\.\.128"):
        batch.step_batch([1, 2, 128])
    with pytest.raises(ValueError, match=r"token ids must be in \[0, 128\), got 1\.\.4294967298"):
        batch.step_batch([1, 2, 2**32 + 2])  # not wrapped to 2 by a cast to int32
    assert batch.pos == 8
    tokens = [int(t) for t in before.argmax(-1)]
    alone = [one.start(p + [t]) for p, t in zip(PROMPTS, tokens)]  # the batch goes on as each sequence alone
    np.testing.assert_allclose(batch.step_batch(tokens), np.stack(alone), **TOL)
    with pytest.raises(ValueError, match="batch must be a positive integer, got 0"):
        Session(batch.model, capacity=4, batch=0)


def test_a_step_before_any_start_names_the_batch_methods(sessions):
    """The error of a step before any start names the methods of the session's kind (a batch session's
    was "Session.step() ... call Session.start(prompt_ids)", which a batch session refuses)."""
    fresh = Session(sessions[1].model, capacity=4, batch=2)
    with pytest.raises(RuntimeError, match=r"^Session\.step_batch\(\) needs a sequence: call "
                                           r"Session\.start_batch\(prompts\) first$"):
        fresh.step_batch([1, 2])
    with pytest.raises(RuntimeError, match=r"^Session\.step\(\) needs a sequence: call Session\.start\(prompt_ids\)"):
        Session(sessions[0].model, capacity=4).step(1)
