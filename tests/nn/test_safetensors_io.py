"""safetensors I/O: round trips of every dtype, interop with the safetensors package and torch,
atomic writes, header validation, memory mapping, and nn.Module save/load by name."""

import json
import mmap
import os

import numpy as np
import pytest
import safetensors.numpy
import safetensors.torch
import torch

import luminal as lm
from luminal.core.dtype import round_bf16
from luminal.core.safetensors_io import file_dtypes, load_file, load_metadata, save_file
from luminal.nn.module import Module
from luminal.nn.parameter import Buffer, Parameter

RNG = np.random.default_rng(0)


def bf16_values(shape=(4, 6)) -> np.ndarray:
    """luminal's bf16 carrier: float32 arrays holding bf16-exact values, with the special values."""
    x = round_bf16(RNG.standard_normal(shape).astype(np.float32) * 100)
    x.flat[:6] = [np.inf, -np.inf, -0.0, 0.0, 1e-40, 3.0e38]  # 1e-40: a subnormal
    return round_bf16(x)


def bits_equal(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


# ---------------------------------------------------------------------------------------- round trips
LM_CASES = [  # (lm dtype, carrier array, code on disk)
    (lm.float16, RNG.standard_normal((3, 4)).astype(np.float16), "F16"),
    (lm.bfloat16, bf16_values(), "BF16"),
    (lm.float32, RNG.standard_normal((2, 3, 4)).astype(np.float32), "F32"),
    (lm.float64, RNG.standard_normal((5,)).astype(np.float64), "F64"),
    (lm.int32, RNG.integers(-2**31, 2**31 - 1, (3, 3), dtype=np.int32), "I32"),
    (lm.bool, RNG.random((2, 5)) > 0.5, "BOOL"),
]
NUMPY_CASES = [  # arrays a user might have, saved by their numpy dtype
    (np.arange(-6, 6, dtype=np.int64).reshape(3, 4) * 2**40, "I64"),
    (np.arange(256, dtype=np.uint8), "U8"),
    (np.arange(-128, 128, dtype=np.int8), "I8"),
    (np.arange(-300, 300, 7, dtype=np.int16), "I16"),
    (np.array(3.5, dtype=np.float32), "F32"),  # 0-d
    (np.zeros((0, 3), dtype=np.float64), "F64"),  # empty
]


@pytest.mark.parametrize("dtype,arr,code", LM_CASES, ids=lambda c: getattr(c, "name", None))
def test_roundtrip_lm_dtypes(tmp_path, dtype, arr, code):
    p = tmp_path / "t.safetensors"
    save_file({"x": arr}, p, dtypes={"x": dtype})
    assert file_dtypes(p) == {"x": code}
    assert bits_equal(load_file(p)["x"], arr)  # bf16 comes back as the same float32 values, bit for bit


@pytest.mark.parametrize("arr,code", NUMPY_CASES, ids=lambda c: getattr(c, "dtype", c))
def test_roundtrip_numpy_dtypes(tmp_path, arr, code):
    p = tmp_path / "t.safetensors"
    save_file({"x": arr}, p)
    assert file_dtypes(p) == {"x": code}
    assert bits_equal(load_file(p)["x"], arr)


def test_roundtrip_many_tensors_keeps_order_and_metadata(tmp_path):
    tensors = {f"t{i}": arr for i, (_, arr, _) in enumerate(LM_CASES)}
    tensors.update({f"n{i}": arr for i, (arr, _) in enumerate(NUMPY_CASES)})
    dtypes = {f"t{i}": d for i, (d, _, _) in enumerate(LM_CASES)}
    p = tmp_path / "t.safetensors"
    save_file(tensors, p, metadata={"format": "np", "step": "12", "ünï": "çødé"}, dtypes=dtypes)
    out = load_file(p)
    assert list(out) == list(tensors)
    for k in tensors:
        assert bits_equal(out[k], tensors[k]), k
    assert load_metadata(p) == {"format": "np", "step": "12", "ünï": "çødé"}
    n = int.from_bytes(p.read_bytes()[:8], "little")
    assert n % 8 == 0  # data starts 8-byte aligned
    for k, e in json.loads(p.read_bytes()[8:8 + n]).items():  # and every tensor is aligned to its itemsize
        if k != "__metadata__":
            assert e["data_offsets"][0] % (2 if e["dtype"] == "BF16" else out[k].dtype.itemsize) == 0, k


def test_no_metadata_is_empty_dict(tmp_path):
    p = tmp_path / "t.safetensors"
    save_file({"x": np.ones(2, np.float32)}, p)
    assert load_metadata(p) == {}
    save_file({}, p)
    assert load_file(p) == {} and load_metadata(p) == {}


def test_non_contiguous_and_big_endian_inputs(tmp_path):
    base = RNG.standard_normal((6, 8)).astype(np.float32)
    tensors = {"t": base.T, "s": base[::2, ::-3], "be": base.astype(">f4"), "bf": bf16_values().T}
    p = tmp_path / "t.safetensors"
    save_file(tensors, p, dtypes={"bf": lm.bfloat16})
    out = load_file(p)
    for k, v in tensors.items():
        np.testing.assert_array_equal(out[k], v)
        assert out[k].dtype == np.float32


def test_bf16_rounds_inexact_values_like_torch(tmp_path):
    x = RNG.standard_normal(1000).astype(np.float32)
    x[:4] = [np.nan, 1 + 2**-8, 1 + 3 * 2**-8, np.float32(np.uint32(0x7F800001).view(np.float32))]  # ties; low NaN
    p = tmp_path / "t.safetensors"
    save_file({"x": x}, p, dtypes={"x": lm.bfloat16})
    got = load_file(p)["x"]
    want = torch.from_numpy(x).to(torch.bfloat16).float().numpy()
    np.testing.assert_array_equal(got, want)  # NaNs stay NaN (never truncate to inf); ties go to even
    assert np.isnan(got[0]) and np.isnan(got[3])
    np.testing.assert_array_equal(got, round_bf16(x))


# ------------------------------------------------------------------------------------------- interop
def test_file_from_safetensors_package_loads_identically(tmp_path):
    tensors = {"f16": LM_CASES[0][1], "f32": LM_CASES[2][1], "f64": LM_CASES[3][1], "i32": LM_CASES[4][1],
               "b": LM_CASES[5][1], **{f"n{i}": a for i, (a, _) in enumerate(NUMPY_CASES)}}
    p = tmp_path / "theirs.safetensors"
    safetensors.numpy.save_file(tensors, str(p), metadata={"who": "them"})
    out = load_file(p)
    assert set(out) == set(tensors)
    for k in tensors:
        assert bits_equal(out[k], tensors[k]), k
    assert load_metadata(p) == {"who": "them"}


def test_our_file_loads_in_safetensors_numpy_and_torch(tmp_path):
    tensors = {"f16": LM_CASES[0][1], "f32": LM_CASES[2][1], "f64": LM_CASES[3][1], "i32": LM_CASES[4][1],
               "b": LM_CASES[5][1], **{f"n{i}": a for i, (a, _) in enumerate(NUMPY_CASES)}}
    p = tmp_path / "ours.safetensors"
    save_file(tensors, p, metadata={"who": "us"})
    theirs = safetensors.numpy.load_file(str(p))
    assert set(theirs) == set(tensors)
    for k in tensors:
        assert bits_equal(theirs[k], tensors[k]), k
    with safetensors.safe_open(str(p), framework="np") as f:
        assert f.metadata() == {"who": "us"}

    bf = bf16_values()
    save_file({"bf": bf, **tensors}, p, dtypes={"bf": lm.bfloat16})
    t = safetensors.torch.load_file(str(p))
    assert t["bf"].dtype == torch.bfloat16
    assert torch.equal(t["bf"], torch.from_numpy(bf).to(torch.bfloat16))
    assert torch.equal(t["bf"].float(), torch.from_numpy(bf))  # exact: the values were already bf16
    for k in tensors:
        np.testing.assert_array_equal(t[k].numpy(), tensors[k])


@pytest.mark.parametrize("tdtype", [torch.float32, torch.bfloat16, torch.float16])
def test_torch_linear_state_dict_loads(tmp_path, tdtype):
    torch.manual_seed(0)
    sd = torch.nn.Linear(7, 3).to(tdtype).state_dict()
    p = tmp_path / "linear.safetensors"
    safetensors.torch.save_file(sd, str(p))
    out = load_file(p)
    assert set(out) == {"weight", "bias"}
    for k, v in sd.items():
        assert out[k].shape == tuple(v.shape)
        np.testing.assert_array_equal(out[k], v.float().numpy() if tdtype == torch.bfloat16 else v.numpy())
        assert out[k].dtype == (np.float32 if tdtype == torch.bfloat16 else v.numpy().dtype)


# ----------------------------------------------------------------------------------------- atomicity
def _fail(*_a, **_k):
    raise OSError("disk on fire")


@pytest.mark.parametrize("where", ["os.replace", "os.fsync"])
def test_failed_write_keeps_previous_file_and_leaves_no_temp(tmp_path, monkeypatch, where):
    p = tmp_path / "ckpt.safetensors"
    save_file({"x": np.arange(4, dtype=np.float32)}, p, metadata={"v": "1"})
    before = p.read_bytes()
    monkeypatch.setattr(where, _fail)
    with pytest.raises(OSError, match="disk on fire"):
        save_file({"x": np.zeros(1000, np.float64), "y": np.ones(3, np.int32)}, p, metadata={"v": "2"})
    monkeypatch.undo()
    assert p.read_bytes() == before
    assert os.listdir(tmp_path) == ["ckpt.safetensors"]
    assert load_metadata(p) == {"v": "1"}


def test_failed_write_midway_through_data(tmp_path, monkeypatch):
    """A failure after some tensor bytes are written (here: converting the second tensor's bytes)."""
    p = tmp_path / "ckpt.safetensors"
    save_file({"x": np.arange(4, dtype=np.float32)}, p)
    before = p.read_bytes()
    real_write, calls = None, []

    import tempfile

    real_ntf = tempfile.NamedTemporaryFile

    def ntf(*a, **k):
        f = real_ntf(*a, **k)
        nonlocal real_write
        real_write = f.file.write

        def write(b):
            calls.append(len(b))
            if len(calls) == 3:
                raise OSError("disk full")
            return real_write(b)

        f.write = write
        return f

    monkeypatch.setattr(tempfile, "NamedTemporaryFile", ntf)
    with pytest.raises(OSError, match="disk full"):
        save_file({"a": np.zeros(10, np.float32), "b": np.zeros(10, np.float32)}, p)
    monkeypatch.undo()
    assert len(calls) == 3  # header, first tensor, then the failing second tensor
    assert p.read_bytes() == before and os.listdir(tmp_path) == ["ckpt.safetensors"]


def test_new_file_failure_leaves_nothing_and_permissions_follow_umask(tmp_path, monkeypatch):
    p = tmp_path / "new.safetensors"
    monkeypatch.setattr("os.replace", _fail)
    with pytest.raises(OSError):
        save_file({"x": np.ones(2, np.float32)}, p)
    monkeypatch.undo()
    assert os.listdir(tmp_path) == []
    save_file({"x": np.ones(2, np.float32)}, p)
    umask = os.umask(0)
    os.umask(umask)
    assert os.stat(p).st_mode & 0o777 == 0o666 & ~umask  # not the temp file's 0600
    os.chmod(p, 0o640)
    save_file({"x": np.zeros(2, np.float32)}, p)
    assert os.stat(p).st_mode & 0o777 == 0o640  # overwriting keeps the file's permissions


# --------------------------------------------------------------------------------------- save errors
@pytest.mark.parametrize("tensors,kwargs,exc,match", [
    ({1: np.ones(2)}, {}, TypeError, "names must be strings"),
    ([("w", np.ones(2)), ("w", np.zeros(2))], {}, ValueError, "'w' is used twice"),
    ({"__metadata__": np.ones(2)}, {}, ValueError, "reserved"),
    ({"ok": np.ones(2), "cplx": np.ones(2, np.complex64)}, {}, TypeError, "'cplx'.*complex64"),
    ({"txt": np.array(["a"])}, {}, TypeError, "'txt'"),
    ({"w": np.ones(2)}, {"dtypes": {"v": lm.float32}}, ValueError, r"not saved: \['v'\]"),
    ({"w": np.ones(2)}, {"dtypes": {"w": "int64"}}, TypeError, r"tensor 'w': unknown dtype 'int64'"),
    ({"w": np.ones(2)}, {"metadata": {"step": 3}}, TypeError, "metadata must map str to str"),
])
def test_save_rejects_bad_input_and_keeps_previous_file(tmp_path, tensors, kwargs, exc, match):
    p = tmp_path / "ckpt.safetensors"
    save_file({"x": np.arange(3, dtype=np.int32)}, p)
    before = p.read_bytes()
    with pytest.raises(exc, match=match):
        save_file(tensors, p, **kwargs)
    assert p.read_bytes() == before and os.listdir(tmp_path) == ["ckpt.safetensors"]


# --------------------------------------------------------------------------------------- load errors
def _file(header, data=b"", n=None) -> bytes:
    h = header if isinstance(header, bytes) else json.dumps(header).encode()
    return (len(h) if n is None else n).to_bytes(8, "little") + h + data


def _ent(dtype="F32", shape=(2,), offs=(0, 8)):
    return {"dtype": dtype, "shape": list(shape), "data_offsets": list(offs)}


MALFORMED = {
    "empty file": (b"", "shorter than the 8-byte header length"),
    "truncated length": (b"\x10\x00\x00", "shorter than the 8-byte header length"),
    "header length beyond file": (_file({"x": _ent()}, b"\0" * 8, n=10_000), "header length 10000 runs past"),
    "huge header length": (b"\xff" * 8 + b"{}", "runs past the end of the file"),
    "not a safetensors file": (b"PK\x03\x04 a zip, not a checkpoint" * 4, "not a safetensors file .*this one starts"),
    "zero header length": (b"\0" * 8 + b"{}", "not a safetensors file"),
    "bad json": (_file(b'{"x": {"dtype": "F32",', b"\0" * 8), "not valid JSON"),
    "not utf-8": (_file(b'{"\xff": 1}'), "not valid JSON"),
    "json list": (_file([1, 2]), "must be a JSON object"),
    "duplicate name": (_file(b'{"x": %s, "x": %s}' % ((json.dumps(_ent()).encode(),) * 2), b"\0" * 8),
                       r"names \['x'\] more than once"),
    "bad metadata": (_file({"__metadata__": {"a": 1}}), "__metadata__ must map str to str"),
    "unknown dtype": (_file({"x": _ent(dtype="F8_E4M3")}, b"\0" * 8), "tensor 'x': unknown dtype"),
    "unhashable dtype": (_file({"x": _ent(dtype=["F32"])}, b"\0" * 8), "tensor 'x': unknown dtype"),
    "entry not an object": (_file({"x": 5}), "tensor 'x': unknown dtype or malformed entry"),
    "negative dim": (_file({"x": _ent(shape=(-2,))}, b"\0" * 8), "tensor 'x': shape must be"),
    "float dim": (_file({"x": _ent(shape=(2.0,))}, b"\0" * 8), "tensor 'x': shape must be"),
    "offsets past data": (_file({"x": _ent(offs=(0, 8))}, b"\0" * 4), r"tensor 'x': data_offsets \[0, 8\] outside"),
    "offsets reversed": (_file({"x": _ent(shape=(0,), offs=(8, 0))}, b"\0" * 8), "tensor 'x': data_offsets"),
    "negative offset": (_file({"x": _ent(offs=(-8, 0))}, b"\0" * 8), "tensor 'x': data_offsets"),
    "one offset": (_file({"x": _ent(offs=(0,))}, b"\0" * 8), "tensor 'x': data_offsets"),
    "size mismatch": (_file({"x": _ent(shape=(3,), offs=(0, 8))}, b"\0" * 8),
                      r"tensor 'x': shape \[3\] of F32 needs 12 bytes but data_offsets \[0, 8\] hold 8"),
    "overlap": (_file({"a": _ent(offs=(0, 8)), "b": _ent(dtype="I32", offs=(4, 12))}, b"\0" * 12),
                "tensors 'a' and 'b' overlap"),
    # An empty tensor needs no bytes whatever its other dims, so only the header check can refuse
    # dims numpy cannot build (before: numpy's "Maximum allowed dimension exceeded", no file or name).
    "zero dim beside a dim past int64": (_file({"x": _ent(shape=(0, 2**70), offs=(0, 0))}),
                                         r"tensor 'x': shape .*each dim below 2\*\*63"),
    "zero dim beside dims whose product overflows": (_file({"x": _ent(shape=(0, 2**62, 2**62), offs=(0, 0))}),
                                                     r"tensor 'x': shape .* too many elements"),
    "65 dims": (_file({"x": _ent(shape=(0,) * 65, offs=(0, 0))}), r"tensor 'x': shape has 65 dims, more than 64"),
    # __metadata__, when present, is an object of str -> str (or null, which the safetensors library reads as
    # no metadata): a falsy non-object is not "no metadata".
    **{f"metadata {v!r}": (_file({"__metadata__": v}), "__metadata__ must map str to str")
       for v in (0, False, "", [], [1], {"a": None})},
}


@pytest.mark.parametrize("case", list(MALFORMED))
def test_malformed_files_raise_clear_errors(tmp_path, case):
    raw, match = MALFORMED[case]
    p = tmp_path / "bad.safetensors"
    p.write_bytes(raw)
    for fn in (load_file, load_metadata, file_dtypes):
        with pytest.raises(ValueError, match=match) as e:
            fn(p)
        assert str(p) in str(e.value)


def test_limit_shapes_load(tmp_path):
    """The shape checks refuse only what numpy cannot build: 64 dims, and an empty tensor whose other
    dims reach numpy's limit, still load."""
    p = tmp_path / "edge.safetensors"
    p.write_bytes(_file({"a": _ent(shape=(1,) * 63 + (2,)), "e": _ent(dtype="U8", shape=(0, 2**62, 1), offs=(8, 8)),
                         "__metadata__": {}}, b"\0" * 8))
    out = load_file(p)
    assert out["a"].shape == (1,) * 63 + (2,) and out["e"].shape == (0, 2**62, 1)
    assert load_metadata(p) == {}


class _CountingKey(str):
    """A header name that counts comparisons, to tell a linear duplicate check from a quadratic one."""
    __hash__ = str.__hash__
    compares = 0

    def __eq__(self, other):
        type(self).compares += 1
        return str.__eq__(self, other)


def test_duplicate_name_check_is_linear():
    """Before: ``keys.count(k)`` per key compared every name with every other one, so a 2.3 MB header
    of 40k empty tensors took 28 s to load (a 12 MB one, minutes)."""
    from luminal.core.safetensors_io import _unique_keys
    n = 2000
    pairs = [(_CountingKey(f"t{i}"), i) for i in range(n)]
    _CountingKey.compares = 0
    assert _unique_keys(pairs) == {f"t{i}": i for i in range(n)}
    assert _CountingKey.compares <= n, _CountingKey.compares  # quadratic: about n * n
    with pytest.raises(ValueError, match=r"names \['t7'\] more than once"):
        _unique_keys(pairs + [(_CountingKey("t7"), -1)])


def test_large_header_loads_and_still_refuses_a_duplicate(tmp_path):
    n = 50_000
    head = {f"t{i}": _ent(shape=(0,), offs=(0, 0)) for i in range(n)}
    p = tmp_path / "many.safetensors"
    p.write_bytes(_file(head))
    assert len(load_file(p)) == n
    raw = json.dumps(head)[:-1] + ', "t123": ' + json.dumps(_ent(shape=(0,), offs=(0, 0))) + "}"
    p.write_bytes(_file(raw.encode()))
    with pytest.raises(ValueError, match=r"many\.safetensors: .*names \['t123'\] more than once"):
        load_file(p)


def test_truncated_real_file_is_reported(tmp_path):
    p = tmp_path / "t.safetensors"
    save_file({"a": np.ones(100, np.float32), "b": np.ones(100, np.float32)}, p)
    p.write_bytes(p.read_bytes()[:-10])
    with pytest.raises(ValueError, match=r"tensor '[ab]': data_offsets .* outside the data section"):
        load_file(p)


def test_empty_tensors_do_not_count_as_overlapping(tmp_path):
    p = tmp_path / "t.safetensors"
    p.write_bytes(_file({"a": _ent(offs=(0, 8)), "e": _ent(shape=(0, 5), offs=(4, 4))}, b"\0" * 8))
    out = load_file(p)
    assert out["e"].shape == (0, 5) and out["a"].tolist() == [0.0, 0.0]


def test_missing_file(tmp_path):
    p = tmp_path / "nope" / "missing.safetensors"
    for fn in (load_file, load_metadata, file_dtypes):
        with pytest.raises(FileNotFoundError, match="missing.safetensors"):
            fn(p)


# ---------------------------------------------------------------------------------------------- mmap
def test_load_with_mmap_is_memory_mapped(tmp_path):
    p = tmp_path / "t.safetensors"
    save_file({"x": np.arange(1000, dtype=np.float32), "bf": bf16_values()}, p, dtypes={"bf": lm.bfloat16})
    x = load_file(p, mmap=True)["x"]
    base, chain = x, []
    while base is not None:
        chain.append(type(base))
        base = getattr(base, "base", None)
    assert np.memmap in chain and mmap.mmap in chain, chain  # a view of the file's mapping, not a copy of its bytes
    assert not x.flags.writeable  # read-only: nobody scribbles on the checkpoint through it
    assert type(x) is np.ndarray  # a plain array for the caller (no memmap subclass surprises)


def test_overwriting_a_loaded_file_keeps_loaded_arrays_valid(tmp_path):
    """The rename gives the new checkpoint a new inode, so arrays still mapped from the old one keep
    their values (an in-place rewrite would change them under the reader, or crash it)."""
    p = tmp_path / "t.safetensors"
    save_file({"x": np.arange(1000, dtype=np.float32)}, p)
    old = load_file(p, mmap=True)["x"]
    save_file({"x": np.zeros(10, dtype=np.float32)}, p)
    np.testing.assert_array_equal(old, np.arange(1000, dtype=np.float32))
    assert load_file(p)["x"].shape == (10,)


def test_header_helpers_do_not_map_the_data(tmp_path, monkeypatch):
    p = tmp_path / "t.safetensors"
    save_file({"x": np.ones(10, np.float64)}, p, metadata={"a": "b"})
    monkeypatch.setattr(np, "memmap", _fail)
    assert file_dtypes(p) == {"x": "F64"} and load_metadata(p) == {"a": "b"}


# ------------------------------------------------------------------------------------- nn.Module I/O
class Tiny(Module):
    def __init__(self, seed=0, out=3, rename=False, extra=False):
        super().__init__()
        r = np.random.default_rng(seed)
        setattr(self, "kernel" if rename else "weight", Parameter(r.standard_normal((out, 4)).astype(np.float32)))
        self.bias = Parameter(r.standard_normal(out), dtype=lm.bfloat16)
        self.scale = Parameter(r.standard_normal(2), dtype=lm.float16)
        self.steps = Buffer(np.array([seed], np.int32))
        if extra:
            self.gate = Parameter(np.ones(1, np.float32))


class Outer(Module):
    def __init__(self, seed=0):
        super().__init__()
        self.inner = Tiny(seed)
        self.head = Parameter(np.full((2, 2), seed, np.float64))


def test_module_save_load_roundtrip(tmp_path):
    p = tmp_path / "m.safetensors"
    src, dst = Outer(seed=1), Outer(seed=2)
    src.save_safetensors(p, metadata={"epoch": "3"})
    assert file_dtypes(p) == {"inner.weight": "F32", "inner.bias": "BF16", "inner.scale": "F16",
                              "inner.steps": "I32", "head": "F64"}
    assert load_metadata(p) == {"epoch": "3"}
    assert dst.load_safetensors(p) == ([], [])
    for (k, a), (k2, b) in zip(src.state_dict().items(), dst.state_dict().items()):
        assert k == k2 and bits_equal(a, b), k
    assert dst.inner.bias.dtype is lm.bfloat16 and dst.inner.bias.data.dtype == np.float32


def test_module_loads_torch_linear(tmp_path):
    torch.manual_seed(0)
    lin = torch.nn.Linear(4, 3)
    p = tmp_path / "lin.safetensors"
    safetensors.torch.save_file({k: v for k, v in lin.state_dict().items()}, str(p))

    class Lin(Module):
        def __init__(self):
            super().__init__()
            self.weight = Parameter(np.zeros((3, 4), np.float32))
            self.bias = Parameter(np.zeros(3, np.float32), dtype=lm.bfloat16)

    m = Lin()
    m.load_safetensors(p)
    np.testing.assert_array_equal(m.weight.data, lin.weight.detach().numpy())
    np.testing.assert_array_equal(m.bias.data, round_bf16(lin.bias.detach().numpy()))  # converted to its dtype


def test_module_load_lists_every_problem(tmp_path):
    p = tmp_path / "m.safetensors"
    Tiny().save_safetensors(p)
    bad = Tiny(out=5, rename=True, extra=True)  # weight -> kernel, plus gate; bias/scale... shapes differ
    before = {k: v.copy() for k, v in bad.state_dict().items()}
    with pytest.raises(ValueError) as e:
        bad.load_safetensors(p)
    msg = str(e.value)
    assert str(p) in msg
    for name in ("missing: kernel, gate", "unexpected: weight", "bias: checkpoint (3,) vs model (5,)"):
        assert name in msg, msg
    assert "scale" not in msg and "steps" not in msg
    for k, v in bad.state_dict().items():
        assert bits_equal(v, before[k]), k  # nothing was half-loaded


def test_module_non_strict_load(tmp_path):
    p = tmp_path / "m.safetensors"
    Tiny(seed=1).save_safetensors(p)
    m = Tiny(seed=2, rename=True, extra=True)
    assert m.load_safetensors(p, strict=False) == (["kernel", "gate"], ["weight"])
    np.testing.assert_array_equal(m.bias.data, Tiny(seed=1).bias.data)
    with pytest.raises(ValueError, match=r"shape mismatch: weight: checkpoint \(3, 4\) vs model \(5, 4\); bias"):
        Tiny(out=5).load_safetensors(p, strict=False)  # shapes are checked even when not strict


def test_module_load_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="absent.safetensors"):
        Tiny().load_safetensors(tmp_path / "absent.safetensors")


def test_null_metadata_is_no_metadata(tmp_path):
    """The safetensors library loads ``"__metadata__": null`` as a file without metadata, and so did luminal
    before the header checks were tightened; a file written so by another tool must still load."""
    path = tmp_path / "m.safetensors"
    path.write_bytes(_file({"__metadata__": None, "x": _ent(shape=(2,), offs=(0, 8))}, b"\0" * 8))
    assert load_metadata(path) == {}
    np.testing.assert_array_equal(load_file(path)["x"], np.zeros(2, np.float32))
