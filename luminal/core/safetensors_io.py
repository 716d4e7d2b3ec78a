"""Read and write the safetensors format with numpy only (no torch at runtime).

Layout: an 8-byte little-endian header length ``n``, ``n`` bytes of JSON (space-padded so the data
starts 8-byte aligned) mapping each name to ``{"dtype", "shape", "data_offsets"}`` plus an optional
``"__metadata__"`` of str -> str, then the raw little-endian tensor bytes. numpy has no bfloat16, so
luminal carries bfloat16 values in float32 arrays: BF16 is written as the upper 16 bits of each float32
and read back into float32.

Loading reads each tensor into an array of its own, so the arrays stay valid whatever later happens
to the file (a ``cp`` over it, a truncation, a half-written copy from another program): with a
memory map, reading a page that a truncation removed raises SIGBUS and kills the process, which no
``try`` can catch. Mapping stays available as ``load_file(path, mmap=True)`` for files known to stay
put (read-only model weights), where paging in only the tensors used is worth that risk.

Every file is checked before any value is used: a regular file (a FIFO would block the open), a header
length within the file and under the format's 100 MB, JSON that is an object without repeated keys,
each entry's dtype, shape and offsets against the file's size, the tensors covering the data section
without overlaps or holes, BOOL bytes 0 or 1. A problem is a ValueError naming the file and what is
wrong (an OSError for a path that is missing or not a file), never a crash or a wrong tensor.

Saving writes a temp file beside the target and renames it over the target (``atomic_file.py``), so
readers see the old file or the new one, never half of one.
"""

from __future__ import annotations

import errno
import json
import os
import stat
from collections.abc import Mapping
from math import prod

import numpy as np

from luminal.core.atomic_file import Staged, stage
from luminal.core.dtype import as_dtype, round_bf16

# safetensors dtype -> numpy storage on disk (BF16 is raw 16-bit patterns, widened on load).
_NP = {"F16": "<f2", "BF16": "<u2", "F32": "<f4", "F64": "<f8", "I8": "i1", "I16": "<i2", "I32": "<i4",
       "I64": "<i8", "U8": "u1", "U16": "<u2", "U32": "<u4", "U64": "<u8", "BOOL": "?"}
_LM = {"float16": "F16", "bfloat16": "BF16", "float32": "F32", "float64": "F64", "int32": "I32", "bool": "BOOL"}


def _code_for(name: str, arr: np.ndarray, lm_dtype) -> str:
    """The safetensors dtype a tensor is saved as: its luminal dtype if given, else its numpy dtype."""
    if lm_dtype is not None:
        try:
            return _LM[as_dtype(lm_dtype).name]
        except TypeError as e:
            raise TypeError(f"tensor {name!r}: {e}") from None
    for code, s in _NP.items():
        d = np.dtype(s)
        if code != "BF16" and (d.kind, d.itemsize) == (arr.dtype.kind, arr.dtype.itemsize):
            return code
    what = (f" (a {type(arr.item()).__name__}: values must be arrays of numbers; a nested dict of model, optimizer "
            f"and scheduler state is saved by lm.train.save_checkpoint)" if arr.dtype == object and arr.ndim == 0
            else "")
    raise TypeError(f"tensor {name!r}: dtype {arr.dtype} cannot be saved as safetensors{what}")


def _to_disk(arr: np.ndarray, code: str) -> np.ndarray:
    """C-contiguous little-endian bytes of ``arr`` as ``code`` (BF16: rounded, upper half of float32)."""
    if code != "BF16":
        return np.ascontiguousarray(arr, dtype=_NP[code])
    f = round_bf16(arr)  # a no-op on luminal's bf16-exact arrays; round-to-nearest-even otherwise
    bits = np.asarray((f.view(np.uint32) >> 16).astype("<u2"))  # 0-d: an array, not a numpy scalar
    # A NaN keeps its sign and payload (a bf16 value's NaN, read from a file, is written back bit for bit);
    # one with only low mantissa bits would truncate to inf, and becomes torch's 0x7FC0.
    bits[np.isnan(f) & ((bits & 0x7F) == 0)] = 0x7FC0
    return bits


def save_file(tensors, path, metadata: dict[str, str] | None = None, dtypes: dict | None = None) -> None:
    """Write ``tensors`` (name -> array, or (name, array) pairs) to ``path`` atomically: a temp file in
    the same directory is fsynced then renamed over ``path``, so a crash or an error never leaves a
    half-written checkpoint, and an existing file survives any failure untouched."""
    stage_file(tensors, path, metadata, dtypes).commit()


def stage_file(tensors, path, metadata: dict[str, str] | None = None, dtypes: dict | None = None) -> Staged:
    """:func:`save_file` without the rename: the new file complete and fsynced in a temp beside ``path``
    (``commit`` renames it over ``path``, ``discard`` removes it), so that a file saved together with
    others (a model's weights and its config) replaces its old version only once all are written."""
    items = list(tensors.items()) if hasattr(tensors, "items") else list(tensors)
    dtypes = dict(dtypes or {})
    seen, arrays = set(), []
    for name, value in items:
        if not isinstance(name, str):
            raise TypeError(f"safetensors names must be strings, got {name!r}")
        if name in seen or name == "__metadata__":
            raise ValueError(f"tensor name {name!r} is " + ("used twice" if name in seen else "reserved"))
        seen.add(name)
        if isinstance(value, Mapping):
            raise TypeError(f"tensor {name!r} is a dict ({type(value).__name__}), not an array: safetensors holds "
                            f"one flat name -> array map. For a nested dict such as {{'model': "
                            f"model.state_dict(), 'optimizer': optimizer.state_dict()}} use "
                            f"lm.train.save_checkpoint(path, model=model, optimizer=optimizer, scheduler=scheduler) "
                            f"(the objects; lm.train.load_checkpoint reads it back); a model's weights alone: "
                            f"save_safetensors(model.state_dict(), path)")
        arr = np.asarray(value)
        code = _code_for(name, arr, dtypes.pop(name, None))
        arrays.append((name, code, arr.shape, _to_disk(arr, code)))
    if dtypes:
        raise ValueError(f"dtypes given for tensors that are not saved: {sorted(dtypes)}")
    if metadata is not None and not all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
        raise TypeError(f"metadata must map str to str, got {metadata!r}")
    header, offset = {"__metadata__": dict(metadata)} if metadata else {}, 0
    header.update({name: None for name, *_ in arrays})  # the header keeps the caller's order
    arrays.sort(key=lambda t: -t[3].itemsize)  # data widest first: every tensor stays aligned in an mmap
    for name, code, shape, data in arrays:
        header[name] = {"dtype": code, "shape": list(shape), "data_offsets": [offset, offset + data.nbytes]}
        offset += data.nbytes
    head = json.dumps(header, separators=(",", ":")).encode()
    head += b" " * (-len(head) % 8)
    if len(head) > MAX_HEADER:  # written, it would be a file that no reader (this one included) loads
        raise ValueError(f"cannot save: the safetensors header (tensor names, shapes and the metadata) would be "
                         f"{len(head)} bytes, over the format's limit of {MAX_HEADER} (the safetensors "
                         f"library's), so the file could not be loaded; keep bulk data in arrays, not in metadata "
                         f"(lm.save: a long list of numbers as np.array(...), not a Python list or str)")

    def write(f) -> None:
        f.write(len(head).to_bytes(8, "little") + head)
        for *_, data in arrays:
            f.write(data.reshape(-1).view(np.uint8).data)

    return stage(path, write)


def _unique_keys(pairs):
    """json object hook: a name given twice in the header (or lm.save's structure) is corruption, not "last
    one wins". Linear in the number of names (a dict, and a second pass only when a name repeats): a
    quadratic check took 30-90 s on a 2.3 MB header of 40k empty tensors and minutes on a larger one."""
    out = dict(pairs)
    if len(out) != len(pairs):
        seen, dup = set(), set()
        for k, _ in pairs:
            (dup if k in seen else seen).add(k)
        raise ValueError(f"a JSON object names {sorted(dup)} more than once")
    return out


# numpy's limits on an array: at most 64 dims, and every dim and the byte size
# (``itemsize * prod(nonzero dims)``, zeros skipped) below 2**63. An empty tensor needs no bytes, so the
# size check against data_offsets cannot bound its other dims; these do, before numpy fails on them
# with an error that names neither the file nor the tensor.
_MAX_DIMS, _MAX_SIZE = 64, 2**63


def _shape_problem(shape, itemsize: int) -> str | None:
    """Why ``shape`` cannot be a tensor's shape (None if it can)."""
    if not isinstance(shape, list) or not all(type(d) is int and d >= 0 for d in shape):
        return f"shape must be a list of non-negative ints, got {shape!r}"
    if len(shape) > _MAX_DIMS:
        return f"shape has {len(shape)} dims, more than {_MAX_DIMS}"
    if any(d >= _MAX_SIZE for d in shape):
        return f"shape {shape} must have each dim below 2**63"
    if prod(d for d in shape if d) * itemsize >= _MAX_SIZE:
        return f"shape {shape} has too many elements: its non-zero dims hold 2**63 bytes or more"
    return None


# The safetensors library's limit on the header (its MAX_HEADER_SIZE): the header length is read before
# anything else, and one corrupt high byte in a multi-gigabyte file would otherwise be a read (an
# allocation) of gigabytes, or a MemoryError, instead of an error naming the file.
MAX_HEADER = 100_000_000


def _open(path):
    """``path`` opened for binary reading, refused unless it is a regular file: opening a FIFO waits for
    a writer (forever, if none comes) and a device has no size to check the header against. The open
    itself does not block (O_NONBLOCK); the mode is checked on the opened descriptor, not on a name that
    could change before the open."""
    nonblock = getattr(os, "O_NONBLOCK", 0)  # (not on Windows, which has no FIFOs to block on)
    fd = os.open(path, os.O_RDONLY | nonblock | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, "cannot load a safetensors file: the path is a directory", path)
        if not stat.S_ISREG(mode):
            kind = "a FIFO" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode) else "a device"
            raise OSError(errno.EINVAL, f"cannot load a safetensors file: the path is {kind}, not a regular file",
                          path)
        if nonblock:
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _read_header(path, f=None) -> tuple[dict, dict, int]:
    """(tensor entries, metadata, data start) after checking every entry against the file size, so a
    corrupt or truncated file is reported here, by name, instead of as garbage values or a crash.
    ``f``: the file, already open (``load_file`` reads the data through the same descriptor)."""
    path = os.fspath(path)
    if f is None:
        with _open(path) as f:
            return _read_header(path, f)
    size = os.fstat(f.fileno()).st_size
    if size < 8:
        raise ValueError(f"{path}: not a safetensors file: {size} bytes, shorter than the 8-byte header length")
    length = f.read(8)
    n = int.from_bytes(length, "little")
    first = f.read(1)
    if n == 0 or first not in (b"{", b"[", b" ", b"\t", b"\r", b"\n"):  # a header is JSON (an object: below)
        raise ValueError(f"{path}: not a safetensors file (the format of luminal's checkpoints, save_safetensors "
                         f"and Hugging Face weights), which starts with an 8-byte header length and a JSON object; "
                         f"this one starts {(length + first + f.read(7))!r}")
    if 8 + n > size:
        raise ValueError(f"{path}: header length {n} runs past the end of the file ({size} bytes): "
                         f"a truncated or corrupt safetensors file")
    if n > MAX_HEADER:
        raise ValueError(f"{path}: header length {n} is over the format's limit of {MAX_HEADER} bytes (the "
                         f"safetensors library's): a corrupt safetensors file")
    raw = first + f.read(n - 1)
    if len(raw) != n:
        raise ValueError(f"{path}: the file ended inside the header (it was truncated while being read)")
    try:
        header = json.loads(raw.decode("utf-8"), object_pairs_hook=_unique_keys)
    except ValueError as e:  # also JSONDecodeError and UnicodeDecodeError
        raise ValueError(f"{path}: header is not valid JSON: {e}") from None
    except RecursionError:  # json recurses once per nesting level: a crafted header exhausts the stack
        raise ValueError(f"{path}: header is not a safetensors header: its JSON is nested too deeply "
                         f"(a safetensors header is two levels deep)") from None
    if not isinstance(header, dict):
        raise ValueError(f"{path}: header must be a JSON object, got {type(header).__name__}")
    # Absent, there is no metadata; present, it must be an object as the format says: a 0, "", [] or
    # null there is as corrupt as [1], not "no metadata".
    meta = header.pop("__metadata__", None)
    if meta is None:  # (absent, or null: the safetensors library reads null as no metadata too)
        meta = {}
    if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
        raise ValueError(f"{path}: __metadata__ must map str to str (a JSON object of strings), got {meta!r}")
    data_len, spans = size - 8 - n, []
    for name, e in header.items():
        code = e.get("dtype") if isinstance(e, dict) else None
        shape, offs = (e.get("shape"), e.get("data_offsets")) if isinstance(e, dict) else (None, None)
        if not isinstance(code, str) or code not in _NP:
            problem = f"unknown dtype or malformed entry {e!r}; supported dtypes: {sorted(_NP)}"
        elif (problem := _shape_problem(shape, np.dtype(_NP[code]).itemsize)) is not None:
            pass
        elif not (isinstance(offs, list) and len(offs) == 2 and all(type(o) is int for o in offs)):
            problem = f"data_offsets must be a [begin, end] pair of ints, got {offs!r}"
        elif offs[0] > offs[1]:
            problem = f"data_offsets {offs} are reversed (the end before the begin)"
        elif not 0 <= offs[0] <= offs[1] <= data_len:
            problem = f"data_offsets {offs} outside the data section [0, {data_len}]"
        elif (need := prod(shape) * np.dtype(_NP[code]).itemsize) != offs[1] - offs[0]:
            problem = f"shape {shape} of {code} needs {need} bytes but data_offsets {offs} hold {offs[1] - offs[0]}"
        else:
            if offs[1] > offs[0]:  # an empty tensor occupies no bytes, so it cannot overlap anything
                spans.append((offs[0], offs[1], name))
            continue
        raise ValueError(f"{path}: tensor {name!r}: {problem}")
    # As the format requires (and the safetensors library checks): the tensors cover the data section
    # exactly, without holes. A hole or a tail belongs to no tensor, so an offset that a corruption moved
    # (with its partner) or a file with something appended is refused, not read as other values.
    at, prev = 0, None
    for begin, end, name in sorted(spans):
        if begin < at:
            raise ValueError(f"{path}: tensors {prev!r} and {name!r} overlap in the data section")
        if begin > at:
            raise ValueError(f"{path}: bytes {at} to {begin} of the data section belong to no tensor (a hole "
                             f"before tensor {name!r}): a corrupt safetensors file")
        at, prev = end, name
    if at != data_len:
        raise ValueError(f"{path}: the data section has {data_len} bytes but its tensors cover only the first "
                         f"{at}: a corrupt safetensors file, or one with something appended")
    return header, meta, 8 + n


def load_file(path, mmap: bool = False) -> dict[str, np.ndarray]:
    """Name -> array (BF16 comes back as bf16-exact float32).

    By default each tensor is read into an array of its own, which stays valid whatever happens to
    the file afterwards. ``mmap=True`` returns read-only views of a memory map instead: nothing is
    read until used, but the file must not change while any returned array lives. Rewriting it in
    place (``cp new.safetensors old.safetensors``) changes the arrays' values under the reader, and
    truncating it makes the next read of a lost page raise SIGBUS, which kills the process. (A save
    by ``save_file`` renames a new file over the old one and is safe: the mapping keeps the old file.)
    """
    return load_with_metadata(path, mmap)[0]


def load_with_metadata(path, mmap: bool = False, check=None) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """(:func:`load_file`'s tensors, the ``__metadata__``), both from one opening of the file: reading
    them with two calls, a save renaming a new file over ``path`` between the two would pair the old
    file's metadata with the new file's tensors (a checkpoint's step count with other moments).
    ``check(metadata)``, if given, runs before any tensor is read (to refuse a file of the wrong kind
    without reading its gigabytes)."""
    path = os.fspath(path)
    raw = {}
    with _open(path) as f:
        header, meta, start = _read_header(path, f)
        if check is not None:
            check(dict(meta))
        if mmap:  # the same descriptor: a file renamed over ``path`` since the header was read is not mapped
            mm = np.memmap(f, dtype=np.uint8, mode="r")
            need = start + max((e["data_offsets"][1] for e in header.values()), default=0)
            if len(mm) < need:
                raise ValueError(f"{path}: the file ended early (it was truncated while being read)")
            raw = {name: np.asarray(mm[start + e["data_offsets"][0]:start + e["data_offsets"][1]])
                   for name, e in header.items()}
        else:
            for name, e in header.items():
                b, end = e["data_offsets"]
                buf = np.empty(end - b, np.uint8)
                f.seek(start + b)
                if f.readinto(memoryview(buf)) != end - b:  # the file shrank since its size was checked
                    raise ValueError(f"{path}: tensor {name!r}: the file ended early (it was truncated or "
                                     f"rewritten while being read)")
                raw[name] = buf
    out = {}
    for name, e in header.items():
        if e["dtype"] == "BOOL" and raw[name].size and (bad := np.flatnonzero(raw[name] > 1)).size:
            # numpy would take any byte as a bool without converting it, and such a "bool" compares
            # unequal to True and inverts to another nonzero byte: corruption, not a value
            raise ValueError(f"{path}: tensor {name!r}: BOOL data holds byte {raw[name][bad[0]]} at element "
                             f"{bad[0]} ({bad.size} such); a bool is stored as 0 or 1")
        arr = raw[name].view(_NP[e["dtype"]]).reshape(e["shape"])
        out[name] = np.asarray(arr.astype(np.uint32) << 16).view(np.float32) if e["dtype"] == "BF16" else arr
    return out, dict(meta)


def load_metadata(path) -> dict[str, str]:
    """The file's ``__metadata__`` (empty if none), reading only the header."""
    return dict(_read_header(path)[1])


def file_dtypes(path) -> dict[str, str]:
    """Name -> safetensors dtype string (``"BF16"``, ``"F32"``, ...), reading only the header."""
    return {name: e["dtype"] for name, e in _read_header(path)[0].items()}
