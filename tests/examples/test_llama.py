"""The Llama example against a torch reference (``llama_reference.py``, written independently of the
DSL code) on small random checkpoints in the Hugging Face layout: prefill logits, 8 decode steps
through the KV cache, greedy ids, the training forward; one configuration per feature (GQA, tied
embeddings, llama3 rope scaling, an explicit head_dim, biases, a sharded and a bf16 checkpoint)."""

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
from model import Llama, LlamaConfig, Session, generate  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")

TOL = dict(rtol=1e-4, atol=1e-4)
PROMPT = [1, 17, 250, 3, 99, 42, 7, 300, 12, 5, 64]

CONFIGS = {
    "gqa": dict(heads=4, kv_heads=2),
    "tied": dict(tie=True, kv_heads=4),
    "llama3_rope": dict(llama3_rope=True, kv_heads=1),
    "head_dim": dict(heads=4, kv_heads=2, head_dim=32, bias=True),
    "sharded": dict(shards=3),
    "bf16": dict(dtype="bfloat16"),
}


@pytest.fixture(scope="module", params=list(CONFIGS))
def checkpoint(request, tmp_path_factory):
    path = tmp_path_factory.mktemp(request.param)
    make_random.make_random(path, layers=2, hidden=64, intermediate=96, vocab=384, max_positions=64,
                            tokenizer=False, seed=len(request.param), std=0.2, **CONFIGS[request.param])
    return request.param, path


def test_checkpoint_is_in_the_hf_layout(checkpoint):
    name, path = checkpoint
    files = {f.name for f in path.iterdir()}
    if name == "sharded":
        assert "model.safetensors.index.json" in files and "model-00003-of-00003.safetensors" in files
    else:
        assert "model.safetensors" in files
    cfg = LlamaConfig.from_dir(path)
    if name == "bf16":
        assert cfg.torch_dtype == "bfloat16"
        from safetensors import safe_open
        with safe_open(str(path / "model.safetensors"), "pt") as f:
            assert f.get_tensor("model.norm.weight").dtype == torch.bfloat16


def test_prefill_decode_and_greedy_match_torch(checkpoint):
    name, path = checkpoint
    ref = TorchLlama(path)
    model = Llama.from_pretrained(path)
    session = Session(model, capacity=40)
    cache: list = []
    want = ref.forward(torch.tensor([PROMPT]), cache)[0, -1].numpy()
    got = session.start(PROMPT)
    np.testing.assert_allclose(got, want, **TOL, err_msg=f"{name}: prefill")
    for step in range(8):
        tok = int(np.argmax(want))
        want = ref.forward(torch.tensor([[tok]]), cache)[0, -1].numpy()
        got = session.step(tok)
        np.testing.assert_allclose(got, want, **TOL, err_msg=f"{name}: decode step {step}")
    # a second, shorter prompt reuses both programs and the cache (stale rows are masked out)
    ids = list(generate(session, PROMPT[:5], 8))
    assert ids == ref.greedy(PROMPT[:5], 8)


def test_training_forward_matches_torch(checkpoint):
    name, path = checkpoint
    ref = TorchLlama(path)
    model = Llama.from_pretrained(path)
    g = lm.Graph()
    ids = g.input("ids", ("B", "S"), dtype=lm.int32)
    f = lm.compile(model(ids))
    x = np.array([PROMPT, PROMPT[::-1]], np.int32)
    np.testing.assert_allclose(f(ids=x), ref.forward(torch.from_numpy(x).long()).numpy(), **TOL)


def test_programs_are_compiled_once(tmp_path, monkeypatch):
    make_random.make_random(tmp_path, layers=2, hidden=32, heads=2, kv_heads=1, intermediate=48, vocab=128,
                            max_positions=32, tokenizer=False)
    session = Session(Llama.from_pretrained(tmp_path), capacity=32)
    calls = []
    monkeypatch.setattr(lm, "compile", lambda *a, **k: calls.append(a))
    for prompt in ([1, 2, 3], [5] * 9, [7]):
        assert len(list(generate(session, prompt, 6))) == 6
    assert calls == []
    for program in (session.prefill, session.decode):
        loops = program.report(show=False).loops
        assert len(loops) == 1 and loops[0]["trips"] == 2, loops  # the decoder layers: one body, rolled


def test_context_limits(tmp_path):
    make_random.make_random(tmp_path, layers=1, hidden=32, heads=2, kv_heads=1, intermediate=48, vocab=128,
                            max_positions=16, tokenizer=False)
    model = Llama.from_pretrained(tmp_path)
    with pytest.raises(ValueError, match="exceeds max_position_embeddings"):
        Session(model, capacity=17)
    session = Session(model)  # capacity: max_position_embeddings
    session.start(list(range(1, 15)))
    session.step(3)
    session.step(4)  # position 15: the last one
    with pytest.raises(ValueError, match=r"context of 17 tokens exceeds max_position_embeddings \(16\)"):
        session.step(5)
    with pytest.raises(ValueError, match="exceeds max_position_embeddings"):
        session.start(list(range(17)))
    small = Session(model, capacity=8)
    with pytest.raises(ValueError, match=r"exceeds the KV cache capacity \(8\)"):
        small.start(list(range(9)))
