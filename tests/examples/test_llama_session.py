"""The Llama example's ``Session`` state across refused calls, ``sample``'s top-k as Hugging Face's
``TopKLogitsWarper`` (ties at the k-th value kept), and a forward without a cache longer than
``max_position_embeddings`` (an error naming the limit, before any work)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from llama_reference import TorchLlama

import luminal as lm

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples" / "llama"))
import make_random  # noqa: E402
from model import Llama, Session, sample  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")

TOL = dict(rtol=1e-4, atol=1e-4)
SEQ = list(range(10, 30))


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return make_random.make_random(tmp_path_factory.mktemp("session"), layers=2, hidden=32, heads=2, kv_heads=1,
                                   intermediate=48, vocab=128, max_positions=16, tokenizer=False, std=0.2)


@pytest.fixture(scope="module")
def model(model_dir):
    return Llama.from_pretrained(model_dir)


def _last(ref, ids):
    return ref.forward(torch.tensor([ids]))[0, -1].numpy()


@pytest.mark.parametrize("bad, message", [
    (SEQ[:13], r"context of 13 tokens exceeds the KV cache capacity \(12\)"),
    ([5, 999], r"token ids must be in \[0, 128\), got 5\.\.999"),
])
def test_a_refused_start_leaves_the_sequence_under_way(model, model_dir, bad, message):
    ref = TorchLlama(model_dir)
    session = Session(model, capacity=12)
    session.start(SEQ[:4])
    with pytest.raises(ValueError, match=message):
        session.start(bad)
    with pytest.raises(ValueError, match="at least one token"):
        session.start([])
    with pytest.raises(ValueError, match="token ids must be in"):
        session.step(128)  # a refused step too
    assert session.pos == 4
    np.testing.assert_allclose(session.step(SEQ[4]), _last(ref, SEQ[:5]), **TOL)  # the old sequence goes on
    assert session.pos == 5


def test_step_before_start_is_an_error(model):
    session = Session(model, capacity=12)
    with pytest.raises(RuntimeError, match=r"call Session\.start\(prompt_ids\) first"):
        session.step(7)
    with pytest.raises(ValueError):
        session.start(SEQ[:13])
    with pytest.raises(RuntimeError, match=r"Session\.start"):  # a refused first start starts nothing
        session.step(7)
    assert session.pos is None


def test_top_k_keeps_every_token_tied_with_the_kth_as_hf():
    """HF's TopKLogitsWarper removes ``scores < topk(scores, k)[..., -1]``: ties at the k-th value stay."""
    logits = np.array([3.0, 2.0, 2.0, 1.0, 2.0, 0.5], np.float32)
    rng = np.random.default_rng(0)
    seen = np.bincount([sample(logits, rng, 1.0, top_k=2) for _ in range(6000)], minlength=len(logits))
    x = torch.tensor(logits)[None]
    hf_kept = set(torch.nonzero(~(x < torch.topk(x, 2)[0][..., -1, None]))[:, 1].tolist())
    assert hf_kept == {0, 1, 2, 4}
    assert set(np.nonzero(seen)[0].tolist()) == hf_kept
    p = np.exp(logits[[0, 1, 2, 4]] - 3.0)
    np.testing.assert_allclose(seen[[0, 1, 2, 4]] / seen.sum(), p / p.sum(), atol=0.02)
    # no tie: exactly k; k at least the vocabulary: all
    assert set(np.nonzero(np.bincount([sample(logits, rng, 1.0, top_k=1) for _ in range(50)]))[0]) == {0}
    assert len(set(sample(logits, rng, 5.0, top_k=10) for _ in range(400))) == len(logits)


def test_a_forward_past_max_position_embeddings_is_an_error_naming_it(model, model_dir):
    g = lm.Graph()
    f = lm.compile([model(g.input("ids", (1, "S"), dtype=lm.int32))])
    ids = np.arange(1, 18, dtype=np.int32)[None]
    with pytest.raises(ValueError, match=r"sequence length S exceeds max_position_embeddings \(16\).*S=17"):
        f(ids=ids)
    want = TorchLlama(model_dir).forward(torch.from_numpy(ids[:, :16]).long()).numpy()
    np.testing.assert_allclose(f(ids=ids[:, :16])[0], want, **TOL)  # the limit itself runs
    g = lm.Graph()
    with pytest.raises(ValueError, match=r"a sequence of 17 tokens exceeds max_position_embeddings \(16\)"):
        model(g.input("ids", (2, 17), dtype=lm.int32))
