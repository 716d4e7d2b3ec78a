"""Loading Hugging Face checkpoints into the Llama example: each kind of mismatch is an error naming
the tensor (or the file), and a failed load leaves the model exactly as it was."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples" / "llama"))
import make_random  # noqa: E402
from model import Llama  # noqa: E402

SMALL = dict(layers=2, hidden=32, heads=2, kv_heads=1, intermediate=48, vocab=128, max_positions=32,
             tokenizer=False)


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    """A good single-file checkpoint, a good sharded one (other weights) and a model loaded from the first."""
    single = make_random.make_random(tmp_path_factory.mktemp("single"), seed=1, **SMALL)
    sharded = make_random.make_random(tmp_path_factory.mktemp("sharded"), seed=2, shards=3, **SMALL)
    return single, sharded


def _snapshot(model):
    return {k: np.array(v) for k, v in model.state_dict().items()}


def _unchanged(model, before):
    after = model.state_dict()
    assert after.keys() == before.keys()
    for k, v in before.items():
        np.testing.assert_array_equal(after[k], v, err_msg=k)


def _edited(src: Path, dst: Path, edit) -> Path:
    """A copy of the single-file checkpoint ``src`` with its tensors passed through ``edit``."""
    shutil.copytree(src, dst)
    tensors = load_file(str(src / "model.safetensors"))
    edit(tensors)
    save_file(tensors, str(dst / "model.safetensors"))
    return dst


@pytest.mark.parametrize("kind, edit, message", [
    ("missing", lambda t: t.pop("model.layers.1.mlp.up_proj.weight"),
     r"missing: model\.layers\.1\.mlp\.up_proj\.weight"),
    ("unexpected", lambda t: t.update({"model.layers.0.self_attn.q_norm.weight": np.ones(16, np.float32)}),
     r"unexpected: model\.layers\.0\.self_attn\.q_norm\.weight"),
    ("mis-shaped", lambda t: t.update({"model.norm.weight": np.ones(33, np.float32)}),
     r"model\.norm\.weight: checkpoint \(33,\) vs model \(32,\)"),
])
def test_mismatch_is_an_error_naming_the_tensor(dirs, tmp_path, kind, edit, message):
    single, _ = dirs
    bad = _edited(single, tmp_path / kind, edit)
    model = Llama.from_pretrained(single)
    before = _snapshot(model)
    with pytest.raises(ValueError, match=message) as e:
        model.load_pretrained(bad)
    assert str(bad) in str(e.value)
    _unchanged(model, before)
    with pytest.raises(ValueError, match=message):
        Llama.from_pretrained(bad)


def test_sharded_loads_and_truncated_shard_changes_nothing(dirs, tmp_path):
    single, sharded = dirs
    model = Llama.from_pretrained(single)
    model.load_pretrained(sharded)  # a sharded checkpoint loads over a single-file one
    reference = load_file(str(sharded / "model-00002-of-00003.safetensors"))
    for k, v in reference.items():
        np.testing.assert_array_equal(model.state_dict()[k], v)
    model.load_pretrained(single)
    before = _snapshot(model)
    bad = tmp_path / "truncated"
    shutil.copytree(sharded, bad)
    shard = bad / "model-00002-of-00003.safetensors"
    data = shard.read_bytes()
    shard.write_bytes(data[: len(data) - 100])
    with pytest.raises(ValueError, match=r"model-00002-of-00003\.safetensors.*outside the data section"):
        model.load_pretrained(bad)
    _unchanged(model, before)  # shard 1 was read fine, but nothing of it was written


def test_index_problems(dirs, tmp_path):
    _, sharded = dirs
    model = Llama.from_pretrained(sharded)
    before = _snapshot(model)
    gone = tmp_path / "gone"
    shutil.copytree(sharded, gone)
    (gone / "model-00003-of-00003.safetensors").unlink()
    with pytest.raises(FileNotFoundError, match=r"model-00003-of-00003\.safetensors: shard listed in"):
        model.load_pretrained(gone)
    twice = tmp_path / "twice"
    shutil.copytree(sharded, twice)
    one = load_file(str(twice / "model-00001-of-00003.safetensors"))
    name = next(iter(one))
    three = load_file(str(twice / "model-00003-of-00003.safetensors"))
    three[name] = one[name]
    save_file(three, str(twice / "model-00003-of-00003.safetensors"))
    with pytest.raises(ValueError, match=rf"tensor {name!r} is also in"):
        model.load_pretrained(twice)
    broken = tmp_path / "broken"
    shutil.copytree(sharded, broken)
    (broken / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}}))
    with pytest.raises(ValueError, match="weight_map"):
        model.load_pretrained(broken)
    with pytest.raises(FileNotFoundError, match="no model.safetensors"):
        model.load_pretrained(tmp_path)
    _unchanged(model, before)
