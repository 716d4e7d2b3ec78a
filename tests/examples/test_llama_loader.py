"""Loading Hugging Face checkpoints into the Llama example: each kind of mismatch is an error naming
the tensor (or the file), and a failed load leaves the model exactly as it was."""

from __future__ import annotations

import errno
import json
import os
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


# The index is data from the checkpoint: it can name only files of the model directory.
OUTSIDE, NOT_RELATIVE = "is outside the model directory", "must be a path relative to the model directory"


@pytest.mark.parametrize("weight_map, message", [
    ({"model.norm.weight": "../../../../etc/hostname"}, r"'\.\./\.\./\.\./\.\./etc/hostname' " + OUTSIDE),
    ({"model.norm.weight": "/etc/hostname"}, r"'/etc/hostname' " + NOT_RELATIVE),
    ({"model.norm.weight": "sub/../../x.safetensors"}, r"'sub/\.\./\.\./x\.safetensors' " + OUTSIDE),
    ({"model.norm.weight": ""}, r"'' " + NOT_RELATIVE),
    (["model-00001-of-00003.safetensors"], r"'weight_map' must map tensor names to file names, got \['model-00001"),
    ({"model.norm.weight": 3}, r"'weight_map' must map tensor names to file names, got .*3"),
    (None, r"'weight_map' must map tensor names to file names"),
])
def test_an_index_naming_a_file_outside_the_directory_or_malformed_is_refused(dirs, tmp_path, weight_map, message):
    _, sharded = dirs
    bad = tmp_path / "bad"
    shutil.copytree(sharded, bad)
    index = bad / "model.safetensors.index.json"
    index.write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    with pytest.raises(ValueError, match=message) as e:
        Llama.from_pretrained(bad)
    assert str(index) in str(e.value)


@pytest.mark.parametrize("text, message", [("[]", r"must be a JSON object, got list"), ("{", r"not valid JSON")])
def test_an_index_that_is_not_a_json_object_is_refused(dirs, tmp_path, text, message):
    _, sharded = dirs
    bad = tmp_path / "bad"
    shutil.copytree(sharded, bad)
    (bad / "model.safetensors.index.json").write_text(text)
    with pytest.raises(ValueError, match=message) as e:
        Llama.from_pretrained(bad)
    assert str(bad / "model.safetensors.index.json") in str(e.value)


def test_an_index_with_a_name_given_twice_is_refused(dirs, tmp_path):
    """Before: the last of two entries for one tensor won silently."""
    _, sharded = dirs
    bad = tmp_path / "bad"
    shutil.copytree(sharded, bad)
    index = bad / "model.safetensors.index.json"
    d = json.loads(index.read_text())
    name, shard = next(iter(d["weight_map"].items()))
    text = json.dumps(d)
    text = text.replace('"weight_map": {', f'"weight_map": {{{json.dumps(name)}: {json.dumps(shard)}, ', 1)
    index.write_text(text)
    with pytest.raises(ValueError, match=f"key '{name}' more than once") as e:
        Llama.from_pretrained(bad)
    assert str(index) in str(e.value)


def test_a_shard_symlinked_outside_the_directory_is_refused(dirs, tmp_path):
    _, sharded = dirs
    outside = tmp_path / "outside.safetensors"
    shutil.copy(sharded / "model-00002-of-00003.safetensors", outside)
    bad = tmp_path / "bad"
    shutil.copytree(sharded, bad)
    (bad / "model-00002-of-00003.safetensors").unlink()
    (bad / "model-00002-of-00003.safetensors").symlink_to(outside)
    with pytest.raises(ValueError, match=r"'model-00002-of-00003\.safetensors' " + OUTSIDE):
        Llama.from_pretrained(bad)
    inside = tmp_path / "inside"  # a link to a file of the directory itself is fine
    shutil.copytree(sharded, inside)
    (inside / "model-00002-of-00003.safetensors").rename(inside / "real.safetensors")
    (inside / "model-00002-of-00003.safetensors").symlink_to("real.safetensors")
    Llama.from_pretrained(inside)


def test_the_hugging_face_cache_layout_loads(dirs, tmp_path):
    """The hub's cache keeps each file once in ``blobs/`` and links ``snapshots/<revision>/<name>`` to it:
    a shard linked into the ``blobs`` of its own cache folder is not outside the checkpoint."""
    _, sharded = dirs
    repo = tmp_path / "models--org--tiny"
    snap, blobs = repo / "snapshots" / "abc123", repo / "blobs"
    snap.mkdir(parents=True)
    blobs.mkdir()
    for k, f in enumerate(sorted(sharded.iterdir())):
        shutil.copy(f, blobs / f"blob{k}")
        (snap / f.name).symlink_to(Path("../../blobs") / f"blob{k}")
    model = Llama.from_pretrained(snap)
    np.testing.assert_array_equal(model.state_dict()["model.norm.weight"],
                                  Llama.from_pretrained(sharded).state_dict()["model.norm.weight"])


# save_pretrained writes config.json and the weights as a pair: a save that fails leaves the directory as
# it was (the old pair, no temp file), and a save over a sharded checkpoint leaves no old index behind.
def _listing(path: Path) -> dict[str, bytes]:
    return {f.name: f.read_bytes() for f in sorted(path.iterdir())}


@pytest.fixture
def saved_and_other(dirs, tmp_path):
    """A directory saved by save_pretrained, and a model of other sizes to save over it."""
    single, _ = dirs
    out = tmp_path / "saved"
    Llama.from_pretrained(single).save_pretrained(out)
    other = make_random.make_random(tmp_path / "other", seed=3, **{**SMALL, "intermediate": 64})
    return out, Llama.from_pretrained(other)


def test_a_save_refused_for_read_only_weights_changes_nothing(saved_and_other):
    out, other = saved_and_other
    before = _listing(out)
    (out / "model.safetensors").chmod(0o444)
    try:
        with pytest.raises(PermissionError, match="read-only"):
            other.save_pretrained(out)
    finally:
        (out / "model.safetensors").chmod(0o644)
    assert _listing(out) == before
    Llama.from_pretrained(out)  # still the old, consistent pair


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="names an open file through /proc")
@pytest.mark.parametrize("which", ["config.json", "model.safetensors"])
def test_a_save_failing_while_writing_changes_nothing(saved_and_other, monkeypatch, which):
    """A full disk shows as an error from the write or the fsync of one of the two files."""
    out, other = saved_and_other
    before = _listing(out)
    real = os.fsync

    def fsync(fd):
        if os.path.basename(os.readlink(f"/proc/self/fd/{fd}")).startswith(f".{which}."):
            raise OSError(errno.ENOSPC, "No space left on device")
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    with pytest.raises(OSError, match="No space left"):
        other.save_pretrained(out)
    monkeypatch.undo()
    assert _listing(out) == before
    Llama.from_pretrained(out)


def test_a_save_refused_for_a_read_only_config_changes_nothing(saved_and_other):
    out, other = saved_and_other
    before = _listing(out)
    (out / "config.json").chmod(0o444)
    try:
        with pytest.raises(PermissionError, match=r"read-only .*config\.json"):
            other.save_pretrained(out)
    finally:
        (out / "config.json").chmod(0o644)
    assert _listing(out) == before


def test_a_save_over_a_sharded_checkpoint_leaves_no_stale_index(dirs, tmp_path):
    single, sharded = dirs
    out = tmp_path / "out"
    shutil.copytree(sharded, out)
    model = Llama.from_pretrained(single)
    model.save_pretrained(out)
    assert sorted(f.name for f in out.iterdir()) == ["config.json", "model.safetensors"]
    reloaded = Llama.from_pretrained(out).state_dict()
    for k, v in model.state_dict().items():
        np.testing.assert_array_equal(reloaded[k], v, err_msg=k)


# The commit of a save is the renames: the old files are set aside, the new ones renamed in, and a
# failure or Ctrl-C at any point puts the old files back. Before: the weights were renamed in and the
# old index deleted before the config's rename, so a failure there left new weights beside the old
# config (a reload paired them silently when the shapes agreed) and the old shards behind.
@pytest.fixture(scope="module")
def other_model(tmp_path_factory):
    """A model of other sizes (intermediate 64, not 48) to save over the checkpoints of ``dirs``."""
    other = make_random.make_random(tmp_path_factory.mktemp("other"), seed=3, **{**SMALL, "intermediate": 64})
    return Llama.from_pretrained(other)


def _is_saved(out: Path, model) -> None:
    """``out`` holds exactly ``model``'s config and weights."""
    assert sorted(f.name for f in out.iterdir()) == ["config.json", "model.safetensors"]
    reloaded = Llama.from_pretrained(out)
    assert reloaded.config.intermediate_size == model.config.intermediate_size
    for k, v in model.state_dict().items():
        np.testing.assert_array_equal(reloaded.state_dict()[k], v, err_msg=k)


@pytest.mark.parametrize("layout", ["single", "sharded", "new"])
@pytest.mark.parametrize("error", [lambda: OSError(errno.EIO, "Input/output error"), KeyboardInterrupt],
                         ids=["OSError", "KeyboardInterrupt"])
def test_a_save_failing_at_any_rename_leaves_exactly_the_old_files(dirs, other_model, tmp_path, monkeypatch,
                                                                   layout, error):
    """Each os.replace, os.link or os.chmod of the commit fails in turn (the k-th call, then no other):
    the directory afterwards holds exactly the files it had, with their contents, and no temp or
    backup."""
    single, sharded = dirs
    real_replace, real_chmod, real_link = os.replace, os.chmod, os.link
    k = 0
    while True:
        out = tmp_path / f"out{k}"
        if layout == "new":
            out.mkdir()
        else:
            shutil.copytree(single if layout == "single" else sharded, out)
        before, calls = _listing(out), [0]

        def failing(real):
            def op(*a, **kw):
                calls[0] += 1
                if calls[0] == k + 1:
                    raise error()
                return real(*a, **kw)
            return op

        monkeypatch.setattr(os, "replace", failing(real_replace))
        monkeypatch.setattr(os, "chmod", failing(real_chmod))
        monkeypatch.setattr(os, "link", failing(real_link))
        try:
            other_model.save_pretrained(out)
        except (OSError, KeyboardInterrupt) as e:
            monkeypatch.undo()
            assert "Input/output error" in str(e) or isinstance(e, KeyboardInterrupt)
            assert _listing(out) == before, f"failing call {k + 1}"
            k += 1
            continue
        monkeypatch.undo()
        break
    assert k >= 4, k  # every rename, link and chmod of the commit was made to fail once
    _is_saved(out, other_model)  # the save that no failure reached: exactly the new files


def test_ctrl_c_during_the_commit_is_raised_after_it(dirs, other_model, tmp_path, monkeypatch):
    """A real SIGINT at the first rename: the commit completes (the pair is never split), then the
    KeyboardInterrupt comes."""
    import signal
    _, sharded = dirs
    out = tmp_path / "out"
    shutil.copytree(sharded, out)
    real, sent = os.replace, []

    def replace(a, b):
        if not sent:
            sent.append(b)
            os.kill(os.getpid(), signal.SIGINT)
        return real(a, b)

    monkeypatch.setattr(os, "replace", replace)
    with pytest.raises(KeyboardInterrupt):
        other_model.save_pretrained(out)
    monkeypatch.undo()
    assert sent
    _is_saved(out, other_model)


def test_a_save_over_a_single_file_checkpoint_leaves_exactly_the_new_files(dirs, other_model, tmp_path):
    single, _ = dirs
    out = tmp_path / "out"
    shutil.copytree(single, out)
    other_model.save_pretrained(out)
    _is_saved(out, other_model)


@pytest.mark.parametrize("layout", ["single", "sharded"])
def test_a_save_stopped_between_any_two_renames_never_loads_a_mixed_pair(dirs, tmp_path, monkeypatch, layout):
    """A power loss stops the commit with no rollback: the directory as it is before each rename either
    loads the old model, loads the new one, or fails to load; never new weights with the old config.
    The new model is a fine-tune of the old (the same shapes, other values and rms_norm_eps), the case
    where a mixed pair loads without an error."""
    single, sharded = dirs
    src = single if layout == "single" else sharded
    out = tmp_path / "out"
    shutil.copytree(src, out)
    tuned = Llama.from_pretrained(src)
    tuned.config.rms_norm_eps = 1e-3
    for p in tuned.parameters():
        p.data[...] += 1
    states, real = [], os.replace

    def replace(a, b):
        states.append({f.name: f.read_bytes() for f in out.iterdir() if f.is_file()})
        return real(a, b)

    monkeypatch.setattr(os, "replace", replace)
    tuned.save_pretrained(out)
    monkeypatch.undo()

    def model(m):
        return m.config.rms_norm_eps, {k: np.array(v) for k, v in m.state_dict().items()}

    old, new = model(Llama.from_pretrained(src)), model(tuned)
    assert model(Llama.from_pretrained(out))[0] == 1e-3
    for i, files in enumerate(states):
        d = tmp_path / f"state{i}"
        d.mkdir()
        for name, data in files.items():
            (d / name).write_bytes(data)
        try:
            eps, got = model(Llama.from_pretrained(d))
        except (ValueError, FileNotFoundError):
            continue  # a directory that does not load is safe: nothing is computed from it
        assert any(eps == ref[0] and all(np.array_equal(got[k], v) for k, v in ref[1].items())
                   for ref in (old, new)), f"stopped before rename {i + 1}: a mix of the old and new model"


def _index_edited(sharded: Path, dst: Path, edit_map=None, edit_shard=None) -> Path:
    """A copy of the sharded checkpoint with its index's weight_map passed through ``edit_map`` and/or
    one shard's tensors through ``edit_shard`` ((file name, edit))."""
    shutil.copytree(sharded, dst)
    index = json.loads((dst / "model.safetensors.index.json").read_text())
    if edit_map:
        edit_map(index["weight_map"])
        (dst / "model.safetensors.index.json").write_text(json.dumps(index))
    if edit_shard:
        name, edit = edit_shard
        tensors = load_file(str(dst / name))
        edit(tensors)
        save_file(tensors, str(dst / name), metadata={"format": "pt"})
    return dst


SHARD1, SHARD2 = "model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors"


def _in_shard(sharded: Path, shard: str) -> str:
    return next(iter(load_file(str(sharded / shard))))


@pytest.mark.parametrize("case", ["listed_in_no_shard", "mapped_to_another_shard", "in_a_shard_unlisted",
                                  "mis_shaped"])
def test_the_index_is_checked_against_the_shards_and_errors_name_the_shard(dirs, tmp_path, case):
    _, sharded = dirs
    model = Llama.from_pretrained(sharded)
    before = _snapshot(model)
    one, two = _in_shard(sharded, SHARD1), _in_shard(sharded, SHARD2)
    if case == "listed_in_no_shard":  # the index lists a tensor no shard has
        bad = _index_edited(sharded, tmp_path / case, lambda m: m.update({"model.layers.1.mlp.extra.weight": SHARD1}))
        message = rf"{SHARD1}: tensor 'model\.layers\.1\.mlp\.extra\.weight', which .* maps to this shard, is not in it"
    elif case == "mapped_to_another_shard":  # the tensor is in shard 1, the index says shard 2
        bad = _index_edited(sharded, tmp_path / case, lambda m: m.update({one: SHARD2}))
        message = rf"{SHARD1}: tensor {one!r} is in this shard, but .* maps it to {SHARD2}"
    elif case == "in_a_shard_unlisted":  # a shard holds a tensor the index does not list
        bad = _index_edited(sharded, tmp_path / case, lambda m: m.pop(two))
        message = rf"{SHARD2}: tensor {two!r} is in this shard, but .* does not list it"
    else:  # a wrong shape inside a shard: the error names the shard as well as the tensor
        def narrower(t):
            t[two] = np.ascontiguousarray(t[two][..., :-1])
        bad = _index_edited(sharded, tmp_path / case, edit_shard=(SHARD2, narrower))
        message = rf"{two}: checkpoint .* vs model .*\({two} is in {SHARD2}\)"
    with pytest.raises(ValueError, match=message) as e:
        model.load_pretrained(bad)
    assert str(bad) in str(e.value)
    _unchanged(model, before)
