"""``lm.save`` / ``lm.load`` (luminal/serialization.py): torch.save's nested checkpoint dict as a safetensors
file. Round trips of every kind of value (containers as torch.load returns them), a training run resumed
from one file exactly as it would have gone on, and every refusal: what cannot be stored (named by its
place), files of other kinds (a torch pickle), truncated or crafted files, torch's arguments that do not
apply; a failed save keeps the old file."""

from __future__ import annotations

import collections
import io
import json
import os
import pickle

import numpy as np
import pytest
import torch

import luminal as lm
from luminal import nn, train
from luminal.core.safetensors_io import file_dtypes, load_file, load_metadata, save_file

X = np.random.default_rng(0).standard_normal((8, 4)).astype(np.float32)
Y = np.array([0, 1, 2, 1, 0, 2, 2, 1], np.int32)
DTYPES = [np.float16, np.float32, np.float64, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16,
          np.uint32, np.uint64, np.bool_]


def roundtrip(obj, tmp_path):
    lm.save(obj, tmp_path / "x.pt")
    return lm.load(tmp_path / "x.pt")


def same(a, b):
    """Equal values and the same types all the way down (arrays: dtype, shape, values with NaN == NaN)."""
    assert type(a) is type(b), (a, b)
    if isinstance(a, dict):
        assert list(a) == list(b)
        for k in a:
            same(a[k], b[k])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            same(x, y)
    elif isinstance(a, (np.ndarray, np.generic)):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)
    elif isinstance(a, float) and a != a:
        assert b != b
    else:
        assert a == b


@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: np.dtype(d).name)
def test_every_dtype_and_shape_round_trips(tmp_path, dt):
    rng = np.random.default_rng(1)
    arrays = {f"s{i}": np.asarray(rng.standard_normal(shape) * 50).astype(dt) for i, shape in
              enumerate([(), (0,), (3,), (2, 0, 4), (2, 3, 4)])}
    arrays["strided"] = (rng.standard_normal((6, 5)) * 50).astype(dt)[::2, ::-1]
    arrays["big_endian"] = arrays["s4"].astype(np.dtype(dt).newbyteorder(">"))
    out = roundtrip(arrays, tmp_path)
    assert list(out) == list(arrays)
    for k, a in arrays.items():
        assert out[k].dtype == a.dtype.newbyteorder("=") and out[k].shape == a.shape
        np.testing.assert_array_equal(out[k], a)
        assert out[k].flags.writeable
    scalar = dt(3)
    same(roundtrip([scalar], tmp_path), [scalar])  # a numpy scalar comes back a numpy scalar of its dtype


def test_containers_keys_and_python_values(tmp_path):
    obj = {"epoch": 3, "best": 0.91, "note": "run 2 \u00e9\udc80", "none": None, "flag": False, "inf": -float("inf"),
           "nan": float("nan"), "neg_zero": -0.0, "huge": 2**130, "tiny": 5e-324, "nested": [(1, [2, {}]), ()],
           7: "an int key", -1: {"state": {0: np.ones(2, np.float32), 3: {"step": 4}}}, "": [],
           "od": collections.OrderedDict([("z", 1), ("a", (2,))]), "0d": np.array(5.5)}
    out = roundtrip(obj, tmp_path)
    same(out, obj)
    assert str(out["neg_zero"]) == "-0.0" and out["huge"] == 2**130
    assert roundtrip(np.arange(3), tmp_path).tolist() == [0, 1, 2]  # a bare array, and a bare scalar
    assert roundtrip(None, tmp_path) is None and roundtrip("s", tmp_path) == "s"


def test_containers_come_back_as_torch_load_returns_them(tmp_path):
    """The non-array parts: torch.save/torch.load and lm.save/lm.load agree on types and key order."""
    skeleton = {"b": (1, 2.5, [None, True]), "a": collections.OrderedDict([(2, "x"), ("k", ())]), 0: [{"s": "t"}]}
    torch.save(skeleton, tmp_path / "t.pt")
    same(roundtrip(skeleton, tmp_path), torch.load(tmp_path / "t.pt", weights_only=True))


def test_a_shared_array_stays_shared(tmp_path):
    w = np.arange(4, dtype=np.float32)
    out = roundtrip({"a": w, "b": [w], "c": w.copy()}, tmp_path)
    assert out["a"] is out["b"][0] and out["c"] is not out["a"]
    assert len(load_file(tmp_path / "x.pt")) == 2  # stored once


def test_readable_tensor_names_that_never_collide(tmp_path):
    lm.save({"a.b": np.zeros(1), "a": {"b": np.ones(1)}, "__metadata__": np.zeros(2)}, tmp_path / "x.pt")
    assert list(load_file(tmp_path / "x.pt")) == ["a.b", "a.b#1", "__metadata__#1"]
    out = lm.load(tmp_path / "x.pt")
    assert out["a.b"][0] == 0 and out["a"]["b"][0] == 1 and out["__metadata__"].shape == (2,)


def test_bfloat16_states_are_stored_as_bf16(tmp_path):
    lm.manual_seed(0)
    model = nn.Linear(3, 2, dtype=lm.bfloat16)
    lm.save(model.state_dict(keep_vars=True), tmp_path / "x.pt")
    assert set(file_dtypes(tmp_path / "x.pt").values()) == {"BF16"}
    out = lm.load(tmp_path / "x.pt")
    for k, a in model.state_dict().items():
        assert out[k].dtype == np.float32
        np.testing.assert_array_equal(out[k], a)
    lm.manual_seed(1)
    fresh = nn.Linear(3, 2, dtype=lm.bfloat16)
    fresh.load_state_dict(out)
    for k, a in model.state_dict().items():
        np.testing.assert_array_equal(fresh.state_dict()[k], a)
    lm.save(lm.ones(2, dtype=lm.bfloat16) / 3, tmp_path / "t.pt")  # a tensor made outside any graph
    assert file_dtypes(tmp_path / "t.pt") == {"value": "BF16"}
    np.testing.assert_array_equal(lm.load(tmp_path / "t.pt"), np.full(2, 0.333984375, np.float32))


def trainer(seed):
    lm.manual_seed(seed)
    model = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Tanh(), nn.Dropout(0.3), nn.Linear(8, 3))
    g = lm.Graph()
    x, y = g.input("x", (8, 4)), g.input("y", (8,), dtype=lm.int32)
    opt = train.AdamW(model.parameters(), lr=1e-2)
    sched = train.OneCycleLR(opt, max_lr=0.05, total_steps=20)
    step = train.compile_step(train.cross_entropy(model(x), y), opt, backend="reference", accumulate=2)
    return model, opt, sched, step


def run(objs, n):
    losses = []
    for _ in range(n):
        losses.append(objs[3](x=X, y=Y))
        if objs[3].micro_step == 0:
            objs[2].step()
    return losses


def test_a_resumed_training_run_goes_on_as_an_uninterrupted_one(tmp_path):
    """torch's habit: one dict of state_dicts and numbers, saved mid-accumulation, loaded into fresh objects."""
    expected = run(trainer(0), 9)
    objs = trainer(0)
    first = run(objs, 5)  # micro-step 1 of 2: accumulated gradients and the dropout generator are in the file
    model, opt, sched, step = objs
    lm.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "scheduler": sched.state_dict(),
             "step": step.state_dict(), "epoch": 5, "best": np.float32(0.5), "note": "run 2"}, tmp_path / "ckpt.pt")
    model, opt, sched, step = fresh = trainer(7)  # other weights and generator until loaded
    ckpt = lm.load(tmp_path / "ckpt.pt", map_location="cpu", weights_only=True)
    model.load_state_dict(ckpt["model"])
    opt.load_state_dict(ckpt["optimizer"])
    sched.load_state_dict(ckpt["scheduler"])
    step.load_state_dict(ckpt["step"])
    assert (ckpt["epoch"], ckpt["best"], ckpt["note"]) == (5, np.float32(0.5), "run 2")
    assert type(ckpt["model"]) is collections.OrderedDict and type(ckpt["optimizer"]["param_groups"][0]["betas"]) \
        is tuple
    np.testing.assert_allclose(first + run(fresh, 4), expected, rtol=1e-6, atol=0)


def test_grad_scaler_and_lbfgs_state_dicts_round_trip(tmp_path):
    scaler = train.GradScaler(init_scale=2.0**10, growth_interval=7)
    scaler.growth_tracker = 3
    other = train.GradScaler()
    other.load_state_dict(roundtrip(scaler.state_dict(), tmp_path))
    assert other.state_dict() == scaler.state_dict()
    p = nn.Parameter(np.ones(3, np.float32))
    opt = train.LBFGS([p], lr=0.5)
    opt.step(lambda: (float((p.data ** 2).sum()), [2 * p.data]))
    sd = opt.state_dict()
    same(roundtrip(sd, tmp_path), sd)


@pytest.mark.parametrize("make,where,what", [
    (lambda: {"optimizer": {"state": {3: object()}}}, r"obj\['optimizer'\]\['state'\]\[3\]", "builtins.object"),
    (lambda: [1, {"k": 1 + 2j}], r"obj\[1\]\['k'\]", "builtins.complex"),
    (lambda: {"b": b"bytes"}, r"obj\['b'\]", "builtins.bytes"),
    (lambda: {"m": nn.Linear(2, 2)}, r"obj\['m'\]", r"Linear.*save its state_dict\(\)"),
    (lambda: {"t": torch.ones(2)}, r"obj\['t'\]", r"torch.*\.numpy\(\)"),
    (lambda: {"nt": collections.namedtuple("P", "a b")(1, 2)}, r"obj\[.nt.\]", r"a P \(a subclass of tuple"),
    (lambda: {"d": collections.defaultdict(list)}, r"obj\['d'\]", "subclass of dict"),
    (lambda: {"a": np.array(["x"])}, r"obj\['a'\]", "dtype <U1"),
    (lambda: {"a": np.ones(2, np.complex64)}, r"obj\['a'\]", "dtype complex64"),
    (lambda: {"a": np.array([None])}, r"obj\['a'\]", "dtype object"),
    (lambda: {"k": {(1, 2): 3}}, r"obj\['k'\]", r"key \(1, 2\) of type tuple"),
    (lambda: {"k": {np.int64(1): 3}}, r"obj\['k'\]", r"key np.int64\(1\) of type int64.*int\(\)"),
])
def test_what_cannot_be_stored_is_named_by_its_place(tmp_path, make, where, what):
    with pytest.raises(TypeError, match=rf"lm\.save: {where} .*{what}"):
        lm.save(make(), tmp_path / "x.pt")
    assert os.listdir(tmp_path) == []


def test_a_cycle_and_a_graph_tensor_are_refused(tmp_path):
    loop: list = [1]
    loop.append({"again": loop})
    with pytest.raises(ValueError, match=r"lm\.save: obj\[1\]\['again'\] contains itself"):
        lm.save(loop, tmp_path / "x.pt")
    g = lm.Graph()
    with pytest.raises(TypeError, match=r"lm\.save \(obj\['x'\]\)"):
        lm.save({"x": g.input("x", (2,))}, tmp_path / "x.pt")


def test_nesting_up_to_the_limit(tmp_path):
    """100 levels of containers round-trip (dicts: the deepest JSON per level); 101 are refused on save, and a
    crafted file nesting deeper than lm.save writes is refused on load."""
    deep: dict = {}
    inner = deep
    for _ in range(99):
        inner["k"] = {}
        inner = inner["k"]
    inner["k"] = np.ones(1)  # (an array is not a container)
    same(roundtrip(deep, tmp_path), deep)
    with pytest.raises(ValueError, match=r"lm\.save: obj\['k'\]\['k'\].* nested 100 deep"):
        lm.save({"k": deep}, tmp_path / "y.pt")
    crafted(tmp_path / "c.pt", '{"list":[' * 101 + "]}" * 101)
    with pytest.raises(ValueError, match=r"lm\.load: .*c\.pt: the stored structure at obj\[0\]\[0\].* nested 100 "):
        lm.load(tmp_path / "c.pt")


def test_a_failed_save_keeps_the_old_file(tmp_path, monkeypatch):
    path = tmp_path / "ckpt.pt"
    lm.save({"w": np.ones(3)}, path)
    before = path.read_bytes()
    with pytest.raises(TypeError):
        lm.save({"w": np.zeros(3), "bad": object()}, path)
    assert path.read_bytes() == before

    def boom(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", boom)  # the temp file is complete but cannot be made durable
    with pytest.raises(OSError, match="No space left"):
        lm.save({"w": np.zeros(1000)}, path)
    monkeypatch.undo()
    assert path.read_bytes() == before and os.listdir(tmp_path) == ["ckpt.pt"]


def test_file_objects(tmp_path):
    obj = {"a": (np.arange(3, dtype=np.int16), "x"), "b": collections.OrderedDict(c=[1.5])}
    buf = io.BytesIO()
    lm.save(obj, buf)
    buf.seek(0)
    same(lm.load(buf), obj)
    with open(tmp_path / "f.pt", "wb") as fh:
        lm.save(obj, fh)
    with open(tmp_path / "f.pt", "rb") as fh:
        same(lm.load(fh), obj)
    assert lm.load(str(tmp_path / "f.pt"), mmap=True)["a"][0].tolist() == [0, 1, 2]
    with pytest.raises(TypeError, match="binary mode"):
        lm.save(obj, io.StringIO())
    with pytest.raises(TypeError, match="binary mode"):
        lm.load(io.StringIO("x"))
    with pytest.raises(ValueError, match="mmap=True needs a path"):
        lm.load(io.BytesIO(buf.getvalue()), mmap=True)
    with pytest.raises(ValueError, match=r"lm\.load: <BytesIO>: not a safetensors file: 0 bytes"):
        lm.load(io.BytesIO())
    with pytest.raises(TypeError, match="a path or a binary file object"):
        lm.save(obj, 5)


def test_torch_arguments_that_do_not_apply(tmp_path):
    path = tmp_path / "x.pt"
    lm.save([1], path)
    assert lm.load(path, None, weights_only=False) == [1] and lm.load(path, map_location="cpu") == [1]
    assert lm.load(path, map_location=torch.device("cpu")) == [1]
    with pytest.raises(ValueError, match="map_location must be None or 'cpu'"):
        lm.load(path, map_location={"cuda:0": "cpu"})
    with pytest.raises(ValueError, match="map_location must be None or 'cpu', got 'cuda:0'"):
        lm.load(path, map_location="cuda:0")
    with pytest.raises(TypeError, match="lm.load: torch's pickle_module does not apply"):
        lm.load(path, pickle_module=pickle)
    with pytest.raises(TypeError, match="lm.load: torch's encoding does not apply"):
        lm.load(path, encoding="latin1")
    with pytest.raises(TypeError, match="lm.save: torch's pickle_protocol, _use_new_zipfile_serialization do not"):
        lm.save([1], path, pickle_protocol=2, _use_new_zipfile_serialization=False)
    with pytest.raises(TypeError, match="lm.save got unexpected keyword argument.s. protocol"):
        lm.save([1], path, protocol=2)
    with pytest.raises(TypeError, match="weights_only must be None, True or False"):
        lm.load(path, weights_only="yes")


def test_files_of_other_kinds_say_what_they_are(tmp_path):
    t = {"w": torch.ones(2)}
    torch.save(t, tmp_path / "new.pt")
    torch.save(t, tmp_path / "old.pt", _use_new_zipfile_serialization=False)
    np.save(tmp_path / "a.npy", np.ones(2))
    np.savez(tmp_path / "a.npz", x=np.ones(2))
    train.save_checkpoint(tmp_path / "ck.safetensors", model=nn.Linear(2, 2))
    for name, match in [("new.pt", r"a file written by torch\.save \(a zip holding a pickle.*cannot read pickles"),
                        ("old.pt", r"a pickle \(torch\.save's legacy format.*cannot read pickles"),
                        ("a.npy", r"a numpy \.npy file.*np\.load"), ("a.npz", r"a numpy \.npz archive.*np\.load"),
                        ("ck.safetensors", r"a luminal checkpoint .*read it with train\.load_checkpoint")]:
        with pytest.raises(ValueError, match=rf"lm\.load: .*{name}: {match}"):
            lm.load(tmp_path / name)
    with pytest.raises(FileNotFoundError):
        lm.load(tmp_path / "missing.pt")
    plain = {"b": np.ones(2, np.float32), "a": np.zeros(1, np.int32)}  # Hugging Face weights, save_safetensors
    lm.save_safetensors(plain, tmp_path / "p.safetensors")
    same(lm.load(tmp_path / "p.safetensors"), plain)


def test_truncated_and_corrupt_files_are_refused(tmp_path):
    path = tmp_path / "x.pt"
    lm.save({"w": np.ones(100)}, path)
    data = path.read_bytes()
    path.write_bytes(data[:-10])
    with pytest.raises(ValueError, match=r"lm\.load: .*x\.pt: [^/]*(truncated|corrupt)"):
        lm.load(path)
    path.write_bytes(data[:20])
    with pytest.raises(ValueError, match=r"lm\.load: .*x\.pt: [^/]*(truncated|corrupt)"):
        lm.load(path)
    path.write_bytes(data[:8] + b"[" + data[9:])
    with pytest.raises(ValueError, match=r"lm\.load: .*x\.pt: header is not valid JSON"):
        lm.load(path)


def crafted(path, structure, tensors=None, fmt="luminal-save/1"):
    meta = {"format": fmt} if structure is None else {"format": fmt, "structure": structure}
    save_file(tensors or {}, path, metadata=meta)


@pytest.mark.parametrize("structure,tensors,match", [
    (None, None, "has no 'structure' entry"),
    ("{", None, "not valid JSON"),
    ("[1]", None, r"at obj is \[1\], not a stored value"),
    ('{"list": [1], "tuple": []}', None, "not a stored value"),
    ('{"dict": [["a", 1], ["a", 2]]}', None, r"at obj has the key 'a' twice"),
    ('{"dict": [[1.5, 1]]}', None, r"\[1\.5, 1\], not a \[key, value\] pair"),
    ('{"dict": [[true, 1]]}', None, r"not a \[key, value\] pair"),
    ('{"dict": {"a": 1}}', None, "not a list of pairs"),
    ('{"list": [{"set": [1]}]}', None, r"at obj\[0\] has the unknown tag 'set'"),
    ('{"list": [{"tensor": "w"}]}', None, r"at obj\[0\] names the tensor 'w', which the file does not hold"),
    ('{"tensor": "w"}', {"w": np.ones(1), "extra": np.ones(2)}, "tensors the stored structure does not use: 'extra'"),
    ('{"scalar": "w"}', {"w": np.ones(2)}, r"is a scalar, but its tensor 'w' has shape \(2,\)"),
    ("[" * 100000 + "]" * 100000, None, "nested too deeply"),
])
def test_a_crafted_structure_is_refused(tmp_path, structure, tensors, match):
    crafted(tmp_path / "c.pt", structure, tensors)
    with pytest.raises(ValueError, match=r"lm\.load: .*c\.pt: .*" + match):
        lm.load(tmp_path / "c.pt")


def test_another_format_and_the_stored_structure_itself(tmp_path):
    crafted(tmp_path / "c.pt", "1", fmt="something/2")
    with pytest.raises(ValueError, match="format 'something/2', not 'luminal-save/1'"):
        lm.load(tmp_path / "c.pt")
    lm.save({"w": np.ones(2)}, tmp_path / "x.pt")  # the file: plain safetensors, the structure JSON in metadata
    meta = load_metadata(tmp_path / "x.pt")
    assert meta["format"] == "luminal-save/1"
    assert json.loads(meta["structure"]) == {"dict": [["w", {"tensor": "w"}]]}
