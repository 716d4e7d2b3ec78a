"""Everything luminal reads from a user's safetensors file or checkpoint is data, checked before use: a
seeded fuzz (every truncation, byte flips) and the structural cases tests/nn/test_safetensors_io.py
leaves out (holes in the data section, a header length past the format's limit, BOOL bytes that are no
bool, a FIFO or a device where a file should be, a file replaced while it is read), each a ValueError
or OSError naming the file, never a hang, a MemoryError or a wrong tensor. Valid files load as the
safetensors package loads them, and every dtype's special values survive load -> save bit for bit.
"""

from __future__ import annotations

import errno
import json
import os
import random

import numpy as np
import pytest
import safetensors.numpy
import safetensors.torch
import torch

import luminal.core.safetensors_io as sio
from luminal import nn, train
from luminal.core.safetensors_io import file_dtypes, load_file, load_metadata, save_file

LOADERS = {
    "load_file": load_file,
    "load_file(mmap)": lambda p: load_file(p, mmap=True),
    "load_metadata": load_metadata,
    "file_dtypes": file_dtypes,
    "load_checkpoint": lambda p: train.load_checkpoint(p),
}


def _file(header, data=b"", n=None) -> bytes:
    h = header if isinstance(header, bytes) else json.dumps(header).encode()
    return (len(h) if n is None else n).to_bytes(8, "little") + h + data


def _ent(dtype="F32", shape=(2,), offs=(0, 8)):
    return {"dtype": dtype, "shape": list(shape), "data_offsets": list(offs)}


def _sample() -> dict:
    rng = np.random.default_rng(7)
    return {"w": rng.standard_normal((3, 4)).astype(np.float32), "ids": np.arange(5, dtype=np.int64),
            "mask": np.array([True, False, True]), "empty": np.zeros((0, 3), np.float16), "s": np.float64(2.5),
            "h": rng.standard_normal(6).astype(np.float16)}


def _loaded_or_refused(p, raw: bytes, mmap: bool):
    """load_file of ``raw``: the arrays, or None when refused by a ValueError / OSError naming the file."""
    p.write_bytes(raw)
    try:
        return load_file(p, mmap=mmap)
    except (ValueError, OSError) as e:
        assert str(p) in str(e), f"the error does not name the file: {e}"
        return None


def _data_size(raw: bytes) -> int:
    return len(raw) - 8 - int.from_bytes(raw[:8], "little")


# ------------------------------------------------------------------------------------- seeded fuzz
@pytest.mark.parametrize("mmap", [False, True], ids=["read", "mmap"])
def test_every_truncation_is_refused_naming_the_file(tmp_path, mmap):
    p = tmp_path / "t.safetensors"
    save_file(_sample(), p, metadata={"k": "v"})
    good = p.read_bytes()
    for k in range(len(good)):
        assert _loaded_or_refused(p, good[:k], mmap) is None, f"a file cut to {k} of {len(good)} bytes loaded"


@pytest.mark.parametrize("mmap", [False, True], ids=["read", "mmap"])
def test_byte_flips_are_refused_or_load_a_consistent_file(tmp_path, mmap):
    """Flipping a bit of a value cannot be detected (the format has no checksum), so a flipped file may
    load; what loads must still be a consistent file: the tensors cover the data section exactly, a
    bool is 0 or 1 (before: a flipped BOOL byte loaded as a "bool" holding 2, 16, 33...), and the
    safetensors package reads the same tensors from it."""
    p = tmp_path / "f.safetensors"
    save_file(_sample(), p, metadata={"k": "v"})
    good = p.read_bytes()
    rnd = random.Random(1234)
    for _ in range(600):
        raw = bytearray(good)
        pos = rnd.randrange(len(raw))
        raw[pos] ^= 1 << rnd.randrange(8)
        out = _loaded_or_refused(p, bytes(raw), mmap)
        if out is None:
            continue
        assert sum(a.nbytes for a in out.values()) == _data_size(bytes(raw)), f"flip at {pos}"
        theirs = safetensors.numpy.load_file(p)  # what luminal accepts, the safetensors package reads the same
        assert theirs.keys() == out.keys() and all(
            (a.dtype, a.shape, a.tobytes()) == (theirs[k].dtype, theirs[k].shape, theirs[k].tobytes())
            for k, a in out.items()), f"flip at {pos}"
        for name, a in out.items():
            if a.dtype == bool:
                assert a.view(np.uint8).max(initial=0) <= 1, f"flip at {pos}: {name!r} holds {a.view(np.uint8)}"


# --------------------------------------------------------------------------------- structural cases
CASES = {
    # the tensors must cover the data section without holes (the format's rule; the safetensors package's check)
    "hole between tensors": (_file({"a": _ent(offs=(0, 8)), "b": _ent(offs=(16, 24))}, bytes(24)),
                             r"bytes 8 to 16 of the data section belong to no tensor .*'b'"),
    "hole before the first tensor": (_file({"a": _ent(offs=(8, 16))}, bytes(16)), "bytes 0 to 8 .* no tensor"),
    "bytes after the last tensor": (_file({"a": _ent(offs=(0, 8))}, bytes(16)),
                                    "has 16 bytes but its tensors cover only the first 8"),
    "data and no tensors": (_file({}, bytes(8)), "has 8 bytes but its tensors cover only the first 0"),
    "overlap that also covers": (_file({"a": _ent(offs=(0, 8)), "b": _ent("I32", (3,), (4, 16))}, bytes(16)),
                                 "tensors 'a' and 'b' overlap"),
    "bool byte 2": (_file({"m": _ent("BOOL", (3,), (0, 3))}, b"\x01\x00\x02"),
                    r"tensor 'm': BOOL data holds byte 2 at element 2"),
    "header length 2**63": (_file({}, n=2**63), "runs past the end of the file"),
    "header length 2**64-1": (_file({}, n=2**64 - 1), "runs past the end of the file"),
    "NaN offset": (_file(b'{"a":{"dtype":"F32","shape":[2],"data_offsets":[NaN,8]}}', bytes(8)), "data_offsets"),
    "Infinity dim": (_file(b'{"a":{"dtype":"F32","shape":[Infinity],"data_offsets":[0,8]}}', bytes(8)),
                     "shape must be a list of non-negative ints"),
    "5000-digit dim": (_file(b'{"a":{"dtype":"F32","shape":[' + b"9" * 5000 + b'],"data_offsets":[0,8]}}',
                             bytes(8)), "not valid JSON"),
    "key twice inside an entry": (_file(b'{"a":{"dtype":"F32","dtype":"I32","shape":[2],"data_offsets":[0,8]}}',
                                        bytes(8)), r"names \['dtype'\] more than once"),
    "metadata value an object": (_file({"__metadata__": {"a": {"b": "c"}}}), "__metadata__ must map str to str"),
    "metadata value NaN": (_file(b'{"__metadata__":{"a":NaN}}'), "__metadata__ must map str to str"),
    "JSON string": (_file(b'"x"'), "not a safetensors file"),
    "JSON null": (_file(b"null"), "not a safetensors file"),
    "JSON array of objects": (_file(b"[{}]"), "must be a JSON object, got list"),
    "lower-case dtype": (_file({"a": _ent("f32")}, bytes(8)), "unknown dtype"),
    "bool dim": (_file({"a": _ent(shape=(True, 2))}, bytes(8)), "shape must be a list of non-negative ints"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_malformed_file_is_a_value_error_naming_the_file_and_fault(tmp_path, case):
    raw, match = CASES[case]
    p = tmp_path / "bad.safetensors"
    p.write_bytes(raw)
    loaders = ("load_file", "load_file(mmap)") if case.startswith("bool") else LOADERS  # (BOOL: a data check)
    for name in loaders:
        with pytest.raises(ValueError, match=match) as e:
            LOADERS[name](p)
        assert str(p) in str(e.value), name


def test_a_header_length_past_the_limit_is_refused_without_reading_it(tmp_path):
    """A corrupt high byte of the header length in a large file: before, the loader read that many
    bytes (here 1 TiB of a sparse file: a MemoryError) to parse them."""
    p = tmp_path / "big.safetensors"
    with open(p, "wb") as f:
        f.write((2**40).to_bytes(8, "little") + b"{")
        try:
            f.truncate(2**40 + 64)
        except OSError as e:
            pytest.skip(f"no sparse 1 TiB file here: {e}")
    for name in LOADERS:
        with pytest.raises(ValueError, match=r"big\.safetensors: header length 1099511627776 is over the format's "
                                             r"limit of 100000000 bytes"):
            LOADERS[name](p)


def test_a_fifo_a_device_or_a_directory_is_refused_without_blocking(tmp_path):
    """Before: opening a FIFO blocked until some process wrote to it (forever); here the test holds the
    FIFO open itself, so the old code does not hang but misreports it as a file of 0 bytes."""
    fifo = tmp_path / "pipe.safetensors"
    os.mkfifo(fifo)
    keep = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)  # a writer: an open that does block returns at once
    try:
        for name, fn in LOADERS.items():
            with pytest.raises(OSError, match=r"the path is a FIFO, not a regular file") as e:
                fn(fifo)
            assert e.value.errno == errno.EINVAL and e.value.filename == str(fifo), name
            with pytest.raises(OSError, match=r"the path is a device, not a regular file"):
                fn("/dev/null")
            with pytest.raises(IsADirectoryError) as e:
                fn(tmp_path)
            assert e.value.filename == str(tmp_path)
    finally:
        os.close(keep)


def test_symlinks_are_followed_and_broken_ones_are_os_errors(tmp_path):
    p = tmp_path / "real.safetensors"
    save_file({"x": np.arange(3, dtype=np.int32)}, p)
    (tmp_path / "link.safetensors").symlink_to(p)
    np.testing.assert_array_equal(load_file(tmp_path / "link.safetensors")["x"], [0, 1, 2])
    (tmp_path / "dangling.safetensors").symlink_to(tmp_path / "gone")
    (tmp_path / "loop.safetensors").symlink_to(tmp_path / "loop.safetensors")
    with pytest.raises(FileNotFoundError, match="dangling"):
        load_file(tmp_path / "dangling.safetensors")
    with pytest.raises(OSError, match="loop"):
        load_file(tmp_path / "loop.safetensors")


# ------------------------------------------------------------------------- a file replaced mid-load
def _replace_after_header(monkeypatch, path, replace):
    """The first header read returns, then ``replace()`` runs (as another process's save would)."""
    real, calls = sio._read_header, []

    def read(p, f=None):
        out = real(p, f)
        if not calls:
            calls.append(p)
            replace()
        return out

    monkeypatch.setattr(sio, "_read_header", read)


def test_mmap_maps_the_file_whose_header_was_read(tmp_path, monkeypatch):
    """Before: the header came from one opening and the map from a second, so a save renaming a new
    file over the path in between mapped the new file's bytes under the old header: other values."""
    p = tmp_path / "w.safetensors"
    save_file({"w": np.zeros(4, np.float32)}, p)
    _replace_after_header(monkeypatch, p, lambda: save_file({"w": np.ones(4, np.float32)}, p))
    np.testing.assert_array_equal(load_file(p, mmap=True)["w"], np.zeros(4, np.float32))
    np.testing.assert_array_equal(load_file(p, mmap=True)["w"], np.ones(4, np.float32))


def test_mmap_of_a_file_truncated_after_its_header_is_a_clear_error(tmp_path, monkeypatch):
    """Before: numpy's "cannot reshape array of size 1000 into shape (100000,)", naming no file."""
    p = tmp_path / "w.safetensors"
    save_file({"w": np.arange(100_000, dtype=np.float32)}, p)
    _replace_after_header(monkeypatch, p, lambda: os.truncate(p, 4_000))
    with pytest.raises(ValueError, match=r"w\.safetensors: the file ended early"):
        load_file(p, mmap=True)


def test_a_checkpoint_replaced_while_loading_is_read_whole_from_one_file(tmp_path, monkeypatch):
    """Before: load_checkpoint read the metadata (extra, optimizer state) and the tensors in two
    openings, so a save between them paired one checkpoint's metadata with another's weights."""
    p = tmp_path / "c.safetensors"
    m = nn.Linear(2, 2)

    def save(v):
        for t in m.parameters():
            t.data[...] = v
        train.save_checkpoint(p, model=m, extra={"value": v})

    save(1.0)
    _replace_after_header(monkeypatch, p, lambda: save(2.0))
    fresh = nn.Linear(2, 2)
    extra = train.load_checkpoint(p, model=fresh)
    assert {float(v) for t in fresh.parameters() for v in np.ravel(t.data)} == {extra["value"]}


def test_a_file_that_is_not_a_checkpoint_is_refused_before_its_tensors_are_read(tmp_path, monkeypatch):
    p = tmp_path / "weights.safetensors"
    save_file({"w": np.zeros(1000, np.float32)}, p)
    def no_buffers(*a, **k):
        raise AssertionError("a tensor was read before the file's format was checked")

    monkeypatch.setattr(sio.np, "empty", no_buffers)
    with pytest.raises(ValueError, match=r"weights\.safetensors: not a luminal checkpoint"):
        train.load_checkpoint(p)


# ---------------------------------------------------------------------- exact copies, interop
def _specials() -> dict[str, np.ndarray]:
    """Every dtype the format and numpy share, with its edge values (NaN payloads and signs included)."""
    out = {}
    for code, (f, u) in {"F16": (np.float16, np.uint16), "F32": (np.float32, np.uint32),
                         "F64": (np.float64, np.uint64)}.items():
        nbits = np.dtype(u).itemsize * 8
        sign, exp_all = u(1) << u(nbits - 1), {16: 0x7C00, 32: 0x7F800000, 64: 0x7FF0000000000000}[nbits]
        pats = [0, sign, exp_all, exp_all | sign, exp_all | 1, exp_all | 1 | sign, exp_all | (exp_all >> 1 & ~exp_all),
                1, sign | 1, exp_all - 1]  # zeros, infs, signalling and quiet NaNs of both signs, subnormal, max
        out[code] = np.array(pats, dtype=u).view(f)
    for code, t in {"I8": np.int8, "I16": np.int16, "I32": np.int32, "I64": np.int64, "U8": np.uint8,
                    "U16": np.uint16, "U32": np.uint32, "U64": np.uint64}.items():
        info = np.iinfo(t)
        out[code] = np.array([info.min, info.max, 0, 1, info.max // 3], dtype=t).reshape(5, 1)
    out["BOOL"] = np.array([[True, False], [False, True]])
    out["scalar"], out["empty"] = np.float32(-0.0), np.zeros((2, 0), np.int16)
    return out


BF16_BITS = np.array([0x0000, 0x8000, 0x7F80, 0xFF80, 0x7FC0, 0xFFC0, 0x7F81, 0xFF81, 0x7FFF, 0x0001, 0x7F7F, 0x3F80],
                     dtype=np.uint16)  # zeros, infs, quiet and signalling NaNs of both signs, subnormal, max, 1


def test_every_dtype_survives_load_then_save_bit_for_bit(tmp_path):
    """A file written by the safetensors package (bf16 through torch) -> luminal load -> luminal save
    holds the same bytes per tensor. Before: a bf16 NaN's sign and payload were lost (0xFF81 -> 0x7FC0)."""
    arrays = _specials()
    src, dst = tmp_path / "src.safetensors", tmp_path / "dst.safetensors"
    tensors = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in arrays.items()}
    tensors["BF16"] = torch.from_numpy(BF16_BITS.astype(np.int16)).view(torch.bfloat16)
    safetensors.torch.save_file(tensors, src)
    loaded = load_file(src)
    assert loaded["BF16"].dtype == np.float32
    save_file(loaded, dst, dtypes={"BF16": "bfloat16"})
    back = safetensors.torch.load_file(dst)
    assert set(back) == set(tensors)
    for k, t in tensors.items():
        assert back[k].dtype == t.dtype and back[k].shape == t.shape, k
        assert back[k].view(-1).view(torch.uint8).tolist() == t.reshape(-1).view(torch.uint8).tolist(), k
    assert file_dtypes(dst) == file_dtypes(src)


def _random_valid(rnd: random.Random) -> dict[str, np.ndarray]:
    dtypes = [np.float16, np.float32, np.float64, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16,
              np.uint32, np.uint64, np.bool_]
    out = {}
    for i in range(rnd.randrange(0, 7)):
        shape = tuple(rnd.randrange(0, 4) for _ in range(rnd.randrange(0, 4)))
        raw = np.frombuffer(rnd.randbytes(int(np.prod(shape, dtype=np.int64)) * 8 or 1), np.uint8)
        d = rnd.choice(dtypes)
        n = int(np.prod(shape, dtype=np.int64))
        arr = (raw[:n] & 1).astype(bool) if d is np.bool_ else raw[:n * np.dtype(d).itemsize].view(d)
        out[f"t{i}.{rnd.choice(['w', 'ß', '层', ''])}"] = arr.reshape(shape)
    return out


def test_valid_files_load_as_the_safetensors_package_loads_them(tmp_path):
    """Seeded random files of every shared dtype (0-d, empty, NaN payloads in the random bytes), written
    by each side and read by both: the same names, dtypes, shapes and bytes."""
    rnd = random.Random(99)
    for i in range(60):
        arrays = _random_valid(rnd)
        theirs, ours = tmp_path / f"st{i}.safetensors", tmp_path / f"lm{i}.safetensors"
        safetensors.numpy.save_file(arrays, theirs)
        save_file(arrays, ours)
        for p in (theirs, ours):
            a, b = load_file(p), safetensors.numpy.load_file(p)
            assert a.keys() == b.keys() == arrays.keys(), p
            for k in a:
                assert (a[k].dtype, a[k].shape, a[k].tobytes()) == (b[k].dtype, b[k].shape, b[k].tobytes()), (p, k)


# ------------------------------------------------------------------------------- interrupted saves
@pytest.mark.parametrize("exc", [OSError("disk full"), KeyboardInterrupt()], ids=["OSError", "KeyboardInterrupt"])
def test_a_save_interrupted_at_any_point_leaves_the_old_file_and_no_temp(tmp_path, monkeypatch, exc):
    """The k-th write of the temp, its fsync, chmod or the rename raising (an error, or Ctrl-C): the old
    file is there byte for byte and the directory holds nothing else; the save that is not interrupted
    replaces it."""
    import tempfile

    p = tmp_path / "x.safetensors"
    save_file({"old": np.arange(3, dtype=np.int32)}, p)
    before = p.read_bytes()
    new = {"a": np.zeros(10, np.float32), "b": np.ones(3, np.int64), "c": np.array([True])}
    real_ntf = tempfile.NamedTemporaryFile

    def failing_at(k):
        def ntf(*a, **kw):
            f, calls = real_ntf(*a, **kw), []
            real_write = f.file.write

            def write(b):
                calls.append(b)
                if len(calls) == k:
                    raise exc
                return real_write(b)

            f.write = write
            return f
        return ntf

    # one write for the length and header, one per tensor; then fsync, chmod, the rename
    for patch in [("tempfile.NamedTemporaryFile", failing_at(k)) for k in range(1, 5)] + \
                 [(f"os.{name}", None) for name in ("fsync", "chmod", "replace")]:
        target, value = patch
        if value is None:
            def value(*a, **k):
                raise exc
        with monkeypatch.context() as m:
            m.setattr(target, value)
            with pytest.raises(type(exc)):
                save_file(new, p)
        assert p.read_bytes() == before and os.listdir(tmp_path) == ["x.safetensors"], target
    save_file(new, p)
    assert load_file(p).keys() == new.keys() and os.listdir(tmp_path) == ["x.safetensors"]
