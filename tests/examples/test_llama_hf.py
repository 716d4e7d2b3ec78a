"""Hugging Face ``transformers`` itself loads the checkpoints the Llama example writes
(``make_random.py``, and ``finetune.py --save``) and computes the same logits as the example's model:
the layout, names, config keys and dtypes are the real ones, not only what our own torch reference
expects."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import transformers

import luminal as lm

LLAMA = Path(__file__).resolve().parents[2] / "examples" / "llama"
sys.path.insert(0, str(LLAMA))
import make_random  # noqa: E402
from model import Llama  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")

PROMPT = np.array([[1, 17, 250, 3, 99, 42, 7, 300, 12, 5]], np.int32)
CONFIGS = {
    "gqa_bias_head_dim": dict(heads=4, kv_heads=2, head_dim=32, bias=True),
    "tied_llama3_rope": dict(tie=True, kv_heads=1, llama3_rope=True),
    "sharded_bf16": dict(shards=2, dtype="bfloat16"),
}


def _ours(path, ids):
    model = Llama.from_pretrained(path)
    model.eval()
    g = lm.Graph()
    x = g.input("ids", ids.shape, dtype=lm.int32)
    return lm.compile(model(x))(ids=ids)


def _hf(path, ids):
    hf = transformers.LlamaForCausalLM.from_pretrained(str(path), torch_dtype=torch.float32)
    hf.eval()
    with torch.no_grad():
        return hf(torch.from_numpy(ids).long()).logits.numpy()


@pytest.mark.parametrize("name", list(CONFIGS))
def test_transformers_loads_a_random_checkpoint_and_agrees(name, tmp_path):
    path = make_random.make_random(tmp_path, layers=2, hidden=64, intermediate=96, vocab=384, max_positions=64,
                                   tokenizer=False, seed=3, std=0.2, **CONFIGS[name])
    np.testing.assert_allclose(_ours(path, PROMPT), _hf(path, PROMPT), rtol=1e-4, atol=1e-4)


def test_transformers_loads_what_finetune_saves(tmp_path):
    src = make_random.make_random(tmp_path / "src", layers=2, hidden=32, heads=2, kv_heads=1, intermediate=48,
                                  vocab=320, max_positions=64)
    data = tmp_path / "data.txt"
    data.write_text("the quick brown fox jumps over the lazy dog. " * 20)
    spec = importlib.util.spec_from_file_location("llama_finetune_hf", LLAMA / "finetune.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    script.main([str(src), "--data", str(data), "--steps", "3", "--batch-size", "2", "--seq-len", "8",
                 "--save", str(tmp_path / "tuned")])
    ids = PROMPT % 320
    np.testing.assert_allclose(_ours(tmp_path / "tuned", ids), _hf(tmp_path / "tuned", ids), rtol=1e-4, atol=1e-4)
    tok = transformers.PreTrainedTokenizerFast(tokenizer_file=str(tmp_path / "tuned" / "tokenizer.json"))
    assert tok("the quick brown fox")["input_ids"]
