"""Checkpoints and state_dicts that are wrong: errors name the file, the key, and what was expected."""

from __future__ import annotations

import json

import numpy as np
import pytest

from luminal import nn, train
from luminal.core.safetensors_io import load_file, load_metadata, save_file


def _model():
    return nn.Linear(3, 4)


# --------------------------------------------------------------------------------- load_state_dict
def test_state_dict_value_that_is_not_numbers_is_named():
    """Before: 'shape mismatch: checkpoint () vs model (4,)', as if "abc" were a 0-d array."""
    m = _model()
    before = m.bias.data.copy()
    with pytest.raises(ValueError, match=r"value for 'bias' is not an array of numbers \(got str\)") as e:
        m.load_state_dict({"weight": np.zeros((4, 3), np.float32), "bias": "abc"})
    assert "shape mismatch" not in str(e.value)
    np.testing.assert_array_equal(m.bias.data, before)


def test_ragged_state_dict_value_is_named():
    with pytest.raises(ValueError, match=r"value for 'weight' is not an array of numbers"):
        _model().load_state_dict({"weight": [[1.0, 2.0, 3.0]] * 3 + [[1.0]], "bias": np.zeros(4)})


def test_state_dict_as_a_list_of_pairs_is_a_type_error_like_torch():
    """torch.nn.Module.load_state_dict: TypeError 'Expected state_dict to be dict-like'. Before: an
    AttributeError about 'items'."""
    pairs = [("weight", np.zeros((4, 3), np.float32)), ("bias", np.zeros(4, np.float32))]
    with pytest.raises(TypeError, match=r"dict-like.*got list.*dict\(pairs\)"):
        _model().load_state_dict(pairs)
    assert _model().load_state_dict(dict(pairs)) == ([], [])


def test_non_strict_ignores_an_unexpected_keys_value():
    m = _model()
    missing, unexpected = m.load_state_dict({"bias": np.ones(4), "junk": "abc"}, strict=False)
    assert (missing, unexpected) == (["weight"], ["junk"]) and m.bias.data.tolist() == [1.0] * 4


# ---------------------------------------------------------------------------------- checkpoints
def _saved(tmp_path, opt_cls=train.AdamW, **kw):
    m = _model()
    opt = opt_cls(m.parameters(), lr=0.1)
    p = tmp_path / "c.safetensors"
    train.save_checkpoint(p, model=m, optimizer=opt, **kw)
    return p, m, opt


def _tamper(p, key, fn):
    """Rewrite one metadata entry of checkpoint ``p`` (fn: the parsed JSON -> new JSON text, or None
    to drop the entry)."""
    meta = load_metadata(p)
    new = fn(json.loads(meta[key]))
    if new is None:
        del meta[key]
    else:
        meta[key] = new
    save_file(load_file(p), p, metadata=meta)


def test_resuming_an_adamw_checkpoint_into_sgd_names_both_optimizers(tmp_path):
    """Before: 'the checkpoint's hyperparameters change the update's terms (['weight_decay'])'."""
    p, _, _ = _saved(tmp_path)
    m = _model()
    with pytest.raises(ValueError, match=r"c\.safetensors: .*saved by AdamW, and this optimizer is SGD"):
        train.load_checkpoint(p, model=m, optimizer=train.SGD(m.parameters(), lr=0.1))


def test_tampered_hyperparameter_names_the_file_and_key(tmp_path):
    p, _, _ = _saved(tmp_path)

    def fast(o):
        o["param_groups"][0]["lr"] = "fast"
        return json.dumps(o)

    _tamper(p, "optimizer", fast)
    m = _model()
    opt = train.AdamW(m.parameters(), lr=0.1)
    with pytest.raises(ValueError, match=r"c\.safetensors: .*hyperparameter 'lr' is 'fast'.*expected a number"):
        train.load_checkpoint(p, model=m, optimizer=opt)
    assert opt.param_groups[0]["lr"] == 0.1


@pytest.mark.parametrize("key", ["extra", "optimizer"])
def test_missing_metadata_entry_names_the_file_and_key(tmp_path, key):
    """Before: a missing 'extra' gave ValueError "c.safetensors: 'extra'" (a KeyError's text)."""
    p, _, _ = _saved(tmp_path)
    _tamper(p, key, lambda _: None)
    m = _model()
    with pytest.raises(ValueError, match=rf"c\.safetensors: .*(no {key!r} entry|no {key} state)"):
        train.load_checkpoint(p, model=m, optimizer=train.AdamW(m.parameters(), lr=0.1))


def test_missing_key_inside_the_optimizer_metadata_is_named(tmp_path):
    p, _, _ = _saved(tmp_path)
    _tamper(p, "optimizer", lambda o: json.dumps({k: v for k, v in o.items() if k != "steps"}))
    m = _model()
    with pytest.raises(ValueError, match=r"c\.safetensors: AdamW\.load_state_dict: the state has no 'steps'; "
                                         r"expected a dict from Optimizer\.state_dict\(\)"):
        train.load_checkpoint(p, model=m, optimizer=train.AdamW(m.parameters(), lr=0.1))


def test_deeply_nested_checkpoint_metadata_is_a_value_error_naming_the_file(tmp_path):
    p, _, _ = _saved(tmp_path)
    _tamper(p, "extra", lambda _: "[" * 100_000 + "]" * 100_000)
    with pytest.raises(ValueError, match=r"c\.safetensors: .*'extra'.*nested too deeply"):
        train.load_checkpoint(p, model=_model())


def test_extra_accepts_numpy_scalars_as_their_values(tmp_path):
    """Before: 'Object of type int64 is not JSON serializable'."""
    p, _, _ = _saved(tmp_path, extra={"epoch": np.int64(2), "loss": np.float32(0.5), "best": np.array(3.25),
                                      "flags": [np.bool_(True)], np.int64(7): "seven"})
    extra = train.load_checkpoint(p, model=_model())
    assert extra == {"epoch": 2, "loss": 0.5, "best": 3.25, "flags": [True], "7": "seven"}
    assert type(extra["epoch"]) is int


@pytest.mark.parametrize("extra,match", [
    ({"w": np.zeros(3)}, r"extra\['w'\] is an array of shape \(3,\)"),
    ({"cfg": {"fn": print}}, r"extra\['cfg'\]\['fn'\] is a builtin_function_or_method"),
    ({(1, 2): 3}, r"extra has a key \(1, 2\)"),
])
def test_extra_that_json_cannot_hold_names_the_key_and_writes_nothing(tmp_path, extra, match):
    p = tmp_path / "c.safetensors"
    with pytest.raises(TypeError, match=match):
        train.save_checkpoint(p, model=_model(), extra=extra)
    assert not p.exists()
