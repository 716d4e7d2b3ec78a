"""Trust audit of ``lm.save`` / ``lm.load`` (luminal/serialization.py) and the safetensors reader and
writer (luminal/core/safetensors_io.py, core/atomic_file.py): files are data, checked before use. Each
malformed file is a ValueError naming ``lm.load``, the file and the fault (never a numpy/json/struct
traceback, a huge allocation or a wrong value); a save that cannot succeed leaves the old file and no
temp; files shared with torch's ``safetensors`` package round-trip in both directions, every dtype."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys

import numpy as np
import pytest
import torch
from safetensors.torch import load_file as torch_load_file
from safetensors.torch import save_file as torch_save_file

import luminal as lm
import luminal.core.safetensors_io as sio
from luminal import nn
from luminal.core.safetensors_io import file_dtypes, load_file, load_metadata, save_file
from tests.core.test_save_load import same  # (values and types all the way down)

TORCH_DTYPES = [torch.bfloat16, torch.float16, torch.float32, torch.float64, torch.int8, torch.int16, torch.int32,
                torch.int64, torch.uint8, torch.uint16, torch.uint32, torch.uint64, torch.bool]


def raw_file(path, header, data=b"", n=None):
    """A safetensors file by hand: the 8-byte length (``n``, if given, instead of the true one), the header
    (a dict as JSON, or bytes as they are) and the data section."""
    head = header if isinstance(header, bytes) else json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(head) if n is None else n) + head + data)
    return path


def ent(dtype="F32", shape=(1,), offs=(0, 4)):
    return {"dtype": dtype, "shape": list(shape), "data_offsets": list(offs)}


def temps(d):
    return sorted(n for n in os.listdir(d) if n.endswith(".tmp"))


# ---------------------------------------------------------------------------------- malformed files
MALFORMED = {
    "shorter than 8 bytes": (b"", None, None, "shorter than the 8-byte header length"),
    "truncated inside the header": (ent(), b"\0" * 4, 1000, "runs past the end of the file"),
    "header length 2**63": (ent(), b"\0" * 4, 2**63, "runs past the end of the file"),
    "header length 2**64-1": (ent(), b"\0" * 4, 2**64 - 1, "runs past the end of the file"),
    "header not JSON": (b"{not json}", b"", None, "header is not valid JSON"),
    "header not UTF-8": (b'{"\xff\xfe": 1}', b"", None, "header is not valid JSON: 'utf-8' codec"),
    "header nested too deep": (b"{" + b'"a":{' * 100_000 + b"}" * 100_001, b"", None, "nested too deeply"),
    "header a list": (b"[]", b"", None, "must be a JSON object, got list"),
    "unknown dtype": ({"x": ent("F8", (1,), (0, 1))}, b"\0", None, "unknown dtype"),
    "negative dim": ({"x": ent(shape=(-1,))}, b"\0" * 4, None, "shape must be a list of non-negative ints"),
    "huge dim of an empty tensor": ({"x": ent(shape=(2**62, 0), offs=(0, 0))}, b"", None, "too many elements"),
    "dims whose product overflows": ({"x": ent(shape=(2**32, 2**32, 0), offs=(0, 0))}, b"", None,
                                     "too many elements"),
    "float dim": ({"x": ent(shape=(1.0,))}, b"\0" * 4, None, "shape must be a list of non-negative ints"),
    "offsets past the data": ({"x": ent(offs=(0, 8))}, b"\0" * 4, None, r"data_offsets \[0, 8\] outside"),
    "negative offset": ({"x": ent(offs=(-4, 0))}, b"\0" * 4, None, r"data_offsets \[-4, 0\] outside"),
    "reversed offsets": ({"x": ent(shape=(0,), offs=(4, 0))}, b"\0" * 4, None,
                         r"data_offsets \[4, 0\] are reversed"),
    "three offsets": ({"x": ent("U8", (1,), (0, 1, 2))}, b"\0", None, "must be a \\[begin, end\\] pair of ints"),
    "bool offsets": ({"x": ent("U8", (1,), (False, True))}, b"\0", None, "pair of ints, got \\[False, True\\]"),
    "offsets not matching shape x itemsize": ({"x": ent(shape=(2,))}, b"\0" * 4, None, "needs 8 bytes"),
    "overlapping tensors": ({"x": ent(), "y": ent()}, b"\0" * 4, None, "overlap"),
    "duplicate names": (b'{"x":' + json.dumps(ent("U8", (1,), (0, 1))).encode() + b',"x":'
                        + json.dumps(ent("U8", (1,), (0, 1))).encode() + b"}", b"\0", None,
                        r"a JSON object names \['x'\] more than once"),
    "__metadata__ a list": ({"__metadata__": [1]}, b"", None, "__metadata__ must map str to str"),
    "__metadata__ an int value": ({"__metadata__": {"a": 1}}, b"", None, "__metadata__ must map str to str"),
    "BOOL byte 2": ({"x": ent("BOOL", (1,), (0, 1))}, b"\2", None, "BOOL data holds byte 2"),
    "bytes appended": ({}, b"xx", None, "something appended"),
}


@pytest.mark.parametrize("mmap", [False, True], ids=["read", "mmap"])
@pytest.mark.parametrize("case", list(MALFORMED))
def test_a_malformed_file_is_a_value_error_naming_lm_load_the_file_and_the_fault(tmp_path, case, mmap):
    header, data, n, match = MALFORMED[case]
    p = tmp_path / "bad.pt"
    if case == "shorter than 8 bytes":
        p.write_bytes(b"\1\2")
    else:
        raw_file(p, header, data, n)
    with pytest.raises(ValueError, match=r"^lm\.load: .*bad\.pt: .*" + match):
        lm.load(p, mmap=mmap)


def test_a_directory_and_a_symlink_as_the_path(tmp_path):
    with pytest.raises(IsADirectoryError, match="is a directory"):
        lm.load(tmp_path)
    lm.save({"w": np.arange(3)}, tmp_path / "real.pt")
    os.symlink(tmp_path / "real.pt", tmp_path / "link.pt")
    assert lm.load(tmp_path / "link.pt")["w"].tolist() == [0, 1, 2]
    lm.save({"w": np.arange(2)}, tmp_path / "link.pt")  # the link's target is rewritten, the link stays
    assert os.path.islink(tmp_path / "link.pt") and lm.load(tmp_path / "real.pt")["w"].tolist() == [0, 1]


# --------------------------------------------------------------------------- lm.save's JSON structure
def test_hugging_face_weights_whose_metadata_says_format_pt_load_as_a_plain_dict(tmp_path):
    """transformers' save_pretrained tags its model.safetensors {"format": "pt"}; lm.load refused it as
    "format 'pt', not 'luminal-save/1'" though its docstring promises Hugging Face weights load."""
    weights = {"w": torch.arange(6, dtype=torch.float32).reshape(2, 3).to(torch.bfloat16), "b": torch.ones(2)}
    torch_save_file(weights, tmp_path / "model.safetensors", metadata={"format": "pt"})
    out = lm.load(tmp_path / "model.safetensors")
    assert list(out) == list(load_file(tmp_path / "model.safetensors"))
    for k, t in weights.items():
        np.testing.assert_array_equal(out[k], t.float().numpy())
    save_file({}, tmp_path / "later.pt", metadata={"format": "luminal-save/2"})  # a luminal format is still checked
    with pytest.raises(ValueError, match="format 'luminal-save/2', not 'luminal-save/1'"):
        lm.load(tmp_path / "later.pt")


def test_an_lm_save_file_with_metadata_this_version_does_not_know_is_refused(tmp_path):
    """A setting a later version (or an edit) adds, a scale or a byte order, must not load as if absent."""
    lm.save({"w": np.ones(2)}, tmp_path / "x.pt")
    meta = load_metadata(tmp_path / "x.pt")
    save_file(load_file(tmp_path / "x.pt"), tmp_path / "y.pt", metadata={**meta, "scale": "2.0"})
    with pytest.raises(ValueError, match=r"lm\.load: .*y\.pt: lm\.save's metadata has the entries \['scale'\], "
                                         r"which this version does not know"):
        lm.load(tmp_path / "y.pt")


def test_a_key_twice_in_the_stored_structure_is_named_as_such(tmp_path):
    lm.save({"w": np.ones(2)}, tmp_path / "x.pt")
    meta = {**load_metadata(tmp_path / "x.pt"), "structure": '{"tensor": "w", "tensor": "w"}'}
    save_file(load_file(tmp_path / "x.pt"), tmp_path / "y.pt", metadata=meta)
    with pytest.raises(ValueError, match=r"stored structure is not valid JSON: a JSON object names \['tensor'\]"):
        lm.load(tmp_path / "y.pt")


def test_a_save_whose_header_no_reader_could_load_is_refused_and_keeps_the_old_file(tmp_path, monkeypatch):
    """The readers refuse a header over 100 MB (the safetensors library's limit): a structure that long (a
    Python list of 20 million numbers) was written, then lm.load refused the file it had just saved."""
    path = tmp_path / "x.pt"
    lm.save({"w": np.ones(2)}, path)
    before = path.read_bytes()
    monkeypatch.setattr(sio, "MAX_HEADER", 4096)  # the same check at a size a test can afford
    with pytest.raises(ValueError, match=r"header .* would be \d+ bytes, over the format's limit of 4096"):
        lm.save({"w": np.ones(2), "log": list(range(2000))}, path)
    assert path.read_bytes() == before and temps(tmp_path) == []
    lm.save({"w": np.ones(2), "log": list(range(200))}, path)  # under the limit: saved and loaded
    assert lm.load(path)["log"] == list(range(200))


# ------------------------------------------------------------------------------------------- targets
@pytest.mark.parametrize("existing", [False, True])
def test_a_path_ending_in_a_separator_names_a_directory_and_is_refused(tmp_path, existing):
    """open("ckpt.pt/", "wb") fails; the save resolved the path, dropped the slash and wrote the file."""
    path = tmp_path / "ckpt.pt"
    if existing:
        lm.save({"w": np.ones(2)}, path)
    before = sorted(os.listdir(tmp_path))
    with pytest.raises(IsADirectoryError, match=r"ends in a separator.*ckpt\.pt/"):
        lm.save({"w": np.zeros(2)}, f"{path}{os.sep}")
    assert sorted(os.listdir(tmp_path)) == before
    if existing:
        assert lm.load(path)["w"].tolist() == [1.0, 1.0]


def test_a_long_file_name_the_file_system_allows_saves(tmp_path):
    """The temp's name adds ~25 bytes to the target's: a valid 240-byte name failed with 'File name too
    long (creating a temp file ...)'."""
    path = tmp_path / ("c" * 240)
    lm.save({"w": np.arange(3)}, path)
    assert lm.load(path)["w"].tolist() == [0, 1, 2] and temps(tmp_path) == []
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True).stdout.strip()
    stale = tmp_path / f".{'c' * 200}.{dead}.abcdefgh.tmp"  # a killed save of it, as stage() names its temp
    stale.write_bytes(b"x")
    lm.save({"w": np.arange(2)}, path)
    assert temps(tmp_path) == []


def test_a_live_temp_of_another_target_is_not_taken_for_a_stale_one(tmp_path):
    """Saving "ckpt" read the temp of a save of "ckpt.<n>" (".ckpt.<n>.<pid>.<random>.tmp") as one of
    "ckpt" by pid <n>, and removed it when no process <n> ran: that save's rename then failed."""
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True).stdout.strip()
    live = tmp_path / f".ckpt.{dead}.{os.getppid()}.abcdefgh.tmp"  # writer of "ckpt.<dead>": our parent, alive
    live.write_bytes(b"x")
    lm.save({"w": np.ones(1)}, tmp_path / "ckpt")
    assert temps(tmp_path) == [live.name]


# --------------------------------------------------------------------------- round trips with torch
def torch_tensors():
    g = torch.Generator().manual_seed(0)
    out = {}
    for d in TORCH_DTYPES:
        for i, shape in enumerate([(), (0,), (3, 0), (2, 3)]):
            x = torch.randn(shape, generator=g) * 50
            out[f"{str(d)[6:]}_{i}"] = x > 0 if d is torch.bool else x.to(d)
    return out


def test_a_file_of_the_safetensors_package_loads_with_every_dtype_0d_and_empty(tmp_path):
    ts = torch_tensors()
    torch_save_file(ts, tmp_path / "t.safetensors")
    for mmap in (False, True):
        out = lm.load(tmp_path / "t.safetensors", mmap=mmap)
        assert list(out) == list(load_file(tmp_path / "t.safetensors"))
        for k, t in ts.items():
            ref = t.float().numpy() if t.dtype is torch.bfloat16 else t.numpy()  # bf16: float32, luminal's carrier
            assert out[k].dtype == ref.dtype and out[k].shape == ref.shape, k
            np.testing.assert_array_equal(out[k], ref)


def test_lm_save_files_load_in_the_safetensors_package(tmp_path):
    """Every numpy dtype (big-endian and strided arrays too), and bf16 parameters, as torch reads them."""
    ts = {k: t for k, t in torch_tensors().items() if t.dtype is not torch.bfloat16}
    arrays = {k: t.numpy() for k, t in ts.items()}
    arrays["big_endian"] = np.arange(6, dtype=">f8").reshape(2, 3)
    arrays["strided"] = np.arange(24, dtype=np.int16).reshape(4, 6)[::2, ::-3]
    lm.save(arrays, tmp_path / "x.pt")
    back = torch_load_file(tmp_path / "x.pt")
    for k, a in arrays.items():
        np.testing.assert_array_equal(back[k].numpy(), a)
        assert back[k].numpy().dtype == a.dtype.newbyteorder("=")
    lm.manual_seed(0)
    model = nn.Linear(3, 2, dtype=lm.bfloat16)
    lm.save(model.state_dict(keep_vars=True), tmp_path / "m.pt")
    back = torch_load_file(tmp_path / "m.pt")
    for k, a in model.state_dict().items():
        assert back[k].dtype is torch.bfloat16
        np.testing.assert_array_equal(back[k].float().numpy(), a)


def test_bf16_weights_come_back_as_float32_carriers_that_keep_a_bf16_model_bf16(tmp_path):
    """luminal carries bfloat16 values in float32 arrays everywhere a user sees them (Parameter.data,
    state_dict(), load_safetensors, np.asarray of a bf16 tensor); lm.load gives the same arrays, and
    load_state_dict keeps the model's bf16 (values exact, as torch's bf16 tensors)."""
    t = torch.randn(4, 3, generator=torch.Generator().manual_seed(1)).to(torch.bfloat16)
    torch_save_file({"weight": t, "bias": torch.zeros(4, dtype=torch.bfloat16)}, tmp_path / "w.safetensors")
    sd = lm.load(tmp_path / "w.safetensors")
    assert sd["weight"].dtype == np.float32
    np.testing.assert_array_equal(sd["weight"], t.float().numpy())
    model = nn.Linear(3, 4, dtype=lm.bfloat16)
    model.load_state_dict(sd)
    assert set(model.state_dtypes().values()) == {lm.bfloat16}
    lm.save(model.state_dict(keep_vars=True), tmp_path / "again.pt")
    assert set(file_dtypes(tmp_path / "again.pt").values()) == {"BF16"}
    assert torch.equal(torch_load_file(tmp_path / "again.pt")["weight"], t)


def test_optimizer_and_module_state_dicts_round_trip_as_torch_save_and_load_keep_them(tmp_path):
    """An Adam state_dict after a step and a module's state_dict come back exactly, containers and types
    included (the betas tuple, the module's OrderedDict: as torch.load gives torch.save's)."""
    lm.manual_seed(0)
    model = nn.Linear(4, 3)
    g = lm.Graph()
    x, y = g.input("x", (8, 4)), g.input("y", (8,), dtype=lm.int32)
    opt = lm.optim.Adam(model.parameters(), lr=0.1)
    step = lm.train.compile_step(lm.train.cross_entropy(model(x), y), opt, backend="reference")
    step(x=np.ones((8, 4), np.float32), y=np.zeros(8, np.int32))
    obj = {"model": model.state_dict(), "optimizer": opt.state_dict()}
    lm.save(obj, tmp_path / "o.pt")
    same(lm.load(tmp_path / "o.pt"), obj)
    tm = torch.nn.Linear(4, 3)
    torch.save({"model": tm.state_dict(), "optimizer": torch.optim.Adam(tm.parameters()).state_dict()},
               tmp_path / "t.pt")
    ref = torch.load(tmp_path / "t.pt", weights_only=True)
    out = lm.load(tmp_path / "o.pt")
    assert type(out["model"]) is type(ref["model"])
    assert type(out["optimizer"]["param_groups"][0]["betas"]) is type(ref["optimizer"]["param_groups"][0]["betas"])
