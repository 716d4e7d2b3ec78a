"""``lm.save`` / ``lm.load``: torch.save's habit (a dict of state_dicts and numbers in one file) as data.

torch pickles the object, and unpickling can run any code the file names. Here the file is safetensors
(``core/safetensors_io.py``): every array is a tensor of the file, and the structure around them (dicts,
lists, tuples, numbers, strings) is JSON in its metadata, under ``"structure"``, each container tagged
with its type so that it comes back as it went in:

    {"dict": [[key, value], ...]}   {"odict": [...]} (an OrderedDict)   {"list": [...]}   {"tuple": [...]}
    {"tensor": name} (an array)     {"scalar": name} (a numpy scalar: a 0-d tensor)
    null, true/false, numbers (ints within Python's int <-> str digit limit, floats with NaN and Infinity)
    and strings as themselves

Loading parses JSON and reads arrays, nothing else, and checks the whole structure against the file's
tensors (each name used exists, each tensor is used) before returning anything. Saving goes through
``save_file``: a temp file, fsynced, renamed over the target, so a failed save keeps the old file.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import sys
import tempfile
import zipfile
from collections import OrderedDict
from typing import Any

import numpy as np

from luminal.core.safetensors_io import _NP, _unique_keys, load_with_metadata, save_file
from luminal.frontend.host import value as host_value
from luminal.frontend.state import State
from luminal.frontend.tensor import GraphTensor

FORMAT = "luminal-save/1"
_CHECKPOINT = "luminal-checkpoint/1"  # train.save_checkpoint's files (train/checkpoint.py)
# numpy dtypes a tensor can be (safetensors' codes; bfloat16 travels as float32 unless a State says so)
_STORABLE = {(np.dtype(s).kind, np.dtype(s).itemsize) for code, s in _NP.items() if code != "BF16"}
# containers inside containers: far beyond any checkpoint, and a structure this deep (JSON nests up to 3 levels
# per container) parses within Python's recursion limit wherever lm.load is called from
MAX_DEPTH = 100
_INT_BITS = 10_000  # ints longer than this are checked against Python's int <-> str digit limit (``_Encoder._int``)
_SAVE_OPTIONS = ("pickle_module", "pickle_protocol", "_use_new_zipfile_serialization", "_disable_byteorder_record")


def save(obj: Any, f, pickle_module=None, pickle_protocol=None, **kwargs) -> None:
    """torch.save: write ``obj`` to ``f`` (a path, or a binary file object open for writing).

    ``obj``: any nesting of dict (str or int keys; an OrderedDict stays one), list, tuple, numpy arrays
    and numpy scalars (float16/32/64, int8-64, uint8-64, bool), Python int, float, bool, str and None:
    what ``model.state_dict()``, an optimizer's, a scheduler's, a GradScaler's and a compile_step's
    ``state_dict()`` return. A Parameter or Buffer (``state_dict(keep_vars=True)``) or a tensor made
    outside any graph is stored with its lm dtype: bfloat16 as BF16, half the bytes of the float32 array
    that carries it (a plain array of bfloat16 values is stored as float32, exactly). An array that
    appears twice (the same object) is stored once and comes back as one array in both places, as
    torch keeps shared tensors shared. At most 100 levels of containers (``MAX_DEPTH``).

    The file is safetensors (tensors, and the structure as JSON in its metadata), never a pickle. To a
    path it is written atomically (a temp file, fsynced, renamed over ``f``): a failed save leaves the
    old file as it was. Anything that cannot be stored is a TypeError naming its place, e.g.
    ``obj['optimizer']['state'][3]``, before anything is written.

    Args:
        obj: the data to save.
        f: a path (str or os.PathLike) or a binary file object with ``write``.
        pickle_module: torch's; must be None (there is no pickle here).
        pickle_protocol: torch's; must be None.
    """
    given = {"pickle_module": pickle_module, "pickle_protocol": pickle_protocol}
    _refuse("lm.save", {k: v for k, v in given.items() if v is not None}, kwargs, _SAVE_OPTIONS,
            "it writes a safetensors file, not a pickle in a zip")
    to_path = isinstance(f, (str, bytes, os.PathLike))
    if not to_path:
        if not callable(getattr(f, "write", None)):
            raise TypeError(f"lm.save: f must be a path or a binary file object with write(), got "
                            f"{type(f).__name__}")
        if isinstance(f, io.TextIOBase):
            raise TypeError("lm.save: f is a text file object; open the file in binary mode ('wb')")
    enc = _Encoder()
    meta = {"format": FORMAT, "structure": json.dumps(enc.node(obj, "obj"), separators=(",", ":"))}
    if to_path:
        save_file(enc.tensors, f, metadata=meta, dtypes=enc.dtypes)
        return
    with tempfile.TemporaryDirectory() as d:  # the bytes are written whole before any reaches f
        tmp = os.path.join(d, "save.safetensors")
        save_file(enc.tensors, tmp, metadata=meta, dtypes=enc.dtypes)
        with open(tmp, "rb") as src:
            shutil.copyfileobj(src, f)


def load(f, map_location=None, pickle_module=None, *, weights_only=None, mmap=None, **pickle_load_args) -> Any:
    """torch.load: what :func:`save` wrote to ``f`` (a path, or a binary file object read from its
    current position to the end).

    Containers come back as they were saved (a tuple stays a tuple, an OrderedDict an OrderedDict, keys
    in their order); where torch returns tensors this returns numpy arrays (bfloat16 values as float32
    arrays, luminal's carrier), and numpy scalars as numpy scalars. The result goes straight into
    ``model.load_state_dict``, ``optimizer.load_state_dict`` and the schedulers', GradScaler's and
    compile_step's. A plain safetensors file (``lm.save_safetensors``, Hugging Face weights, whose
    metadata says ``{"format": "pt"}``) loads as its dict of name -> array. An lm.save file with
    metadata entries this version does not know is refused, not loaded as if they were absent.

    Loading never runs code: the file is JSON and raw arrays, so it is always what torch's
    ``weights_only=True`` gives (``weights_only=False`` changes nothing). The structure is checked
    against the file's tensors before anything is returned; a file of another kind (a torch pickle, a
    numpy file), a truncated or corrupt one is a ValueError saying what it is.

    Args:
        f: a path (str or os.PathLike) or a binary file object with ``read``.
        map_location: None or ``"cpu"``: arrays are host (numpy) arrays; a backend is chosen when
            compiling.
        pickle_module: torch's; must be None.
        weights_only: accepted for torch's code (None, True or False); loading is always data only.
        mmap: True maps the file instead of reading it (a path only): arrays are read-only views,
            valid while the file is not rewritten in place (``lm.load_safetensors``'s ``mmap``).
    """
    _refuse("lm.load", {"pickle_module": pickle_module} if pickle_module is not None else {}, pickle_load_args,
            None, "it reads a safetensors file, not a pickle")
    if not (map_location is None or (str(map_location) == "cpu"
                                     and (isinstance(map_location, str) or type(map_location).__name__ == "device"))):
        raise ValueError(f"lm.load: map_location must be None or 'cpu', got {map_location!r}: luminal loads numpy "
                         f"arrays on the host, and a backend (lm.compile(..., backend='cuda')) moves them")
    if weights_only is not None and not isinstance(weights_only, bool):
        raise TypeError(f"lm.load: weights_only must be None, True or False, got {weights_only!r}")
    if mmap is not None and not isinstance(mmap, bool):
        raise TypeError(f"lm.load: mmap must be None, True or False, got {mmap!r}")
    if isinstance(f, (str, bytes, os.PathLike)):
        return _load_path(os.fsdecode(f), os.fsdecode(f), bool(mmap))
    if not callable(getattr(f, "read", None)):
        raise TypeError(f"lm.load: f must be a path or a binary file object with read(), got {type(f).__name__}")
    if mmap:
        raise ValueError("lm.load: mmap=True needs a path, not a file object")
    name = getattr(f, "name", None)
    name = name if isinstance(name, str) else f"<{type(f).__name__}>"
    with tempfile.TemporaryDirectory() as d:  # the reader checks a file of known size: copy f's bytes into one
        tmp = os.path.join(d, "load.safetensors")
        with open(tmp, "wb") as dst:
            first = f.read(0)
            if not isinstance(first, bytes):
                raise TypeError(f"lm.load: {name} is a text file object; open the file in binary mode ('rb')")
            shutil.copyfileobj(f, dst)
        return _load_path(tmp, name, False)


def _refuse(op: str, given: dict, extra: dict, known: tuple | None, why: str) -> None:
    """A TypeError naming torch's arguments that do not apply here (``known``: the keyword arguments
    of torch's, None for all of ``extra``), or any unknown ones."""
    names = [*given, *extra]
    if not names:
        return
    unknown = [n for n in extra if known is not None and n not in known]
    if unknown:
        raise TypeError(f"{op} got unexpected keyword argument(s) {', '.join(unknown)}")
    raise TypeError(f"{op}: torch's {', '.join(names)} {'does' if len(names) == 1 else 'do'} not apply: {why}")


class _Encoder:
    """Walks ``obj`` into the JSON structure, collecting the tensors (name -> array) and their lm dtypes."""

    def __init__(self):
        self.tensors: dict[str, np.ndarray] = {}
        self.dtypes: dict[str, Any] = {}
        self.names: dict[int, str] = {}  # id of an array already stored -> its tensor's name
        self.open: set[int] = set()  # ids of the containers being walked (a container inside itself)

    def node(self, x, where: str, name: str = "", depth: int = 0):
        t = type(x)
        if t is int and x.bit_length() > _INT_BITS:
            return self._int(x, where)
        if x is None or t in (bool, int, str, float):
            return x
        if t in (dict, OrderedDict, list, tuple):
            if id(x) in self.open:
                raise ValueError(f"lm.save: {where} contains itself (a cycle), which cannot be stored")
            if depth == MAX_DEPTH:
                raise ValueError(f"lm.save: {where[:200]}... is a container nested {MAX_DEPTH} deep; lm.save stores "
                                 f"at most {MAX_DEPTH} levels of containers")
            self.open.add(id(x))
            try:
                if t in (list, tuple):
                    items = [self.node(v, f"{where}[{i}]", f"{name}.{i}", depth + 1) for i, v in enumerate(x)]
                    return {t.__name__: items}
                pairs = []
                for k, v in x.items():
                    if type(k) not in (str, int):
                        raise TypeError(f"lm.save: {where} has a key {k!r} of type {type(k).__name__}; keys must "
                                        f"be str or int" + (" (convert it with int() or str())"
                                                            if isinstance(k, (np.generic, bool)) else ""))
                    pairs.append([k, self.node(v, f"{where}[{k!r}]", f"{name}.{k}", depth + 1)])
                return {"odict" if t is OrderedDict else "dict": pairs}
            finally:
                self.open.discard(id(x))
        if isinstance(x, np.generic):
            return {"scalar": self._tensor(np.asarray(x), None, where, name, x)}
        if t in (np.ndarray, np.memmap):
            return {"tensor": self._tensor(x, None, where, name, x)}
        if isinstance(x, State):
            return {"tensor": self._tensor(x.data, x.dtype, where, name, x)}
        if isinstance(x, GraphTensor):  # a host tensor's values (a graph's tensor raises: it has none yet)
            return {"tensor": self._tensor(host_value(x, f"lm.save ({where})"), x.dtype, where, name, x)}
        raise TypeError(f"lm.save: {where} is {_describe(x)}, which lm.save cannot store; it stores dicts, lists, "
                        f"tuples, numpy arrays and scalars, int, float, bool, str and None{_hint(x)}")

    @staticmethod
    def _int(x: int, where: str) -> int:
        """A long int, checked against Python's limit on int <-> str conversion (4300 digits by default),
        which JSON goes through: one past it is refused here, naming its place and size, not by json's
        ValueError naming neither (and lm.load could not read it back where the limit is lower)."""
        try:
            str(x)
        except ValueError:
            raise ValueError(f"lm.save: {where} is an int of about {int(x.bit_length() * 0.30103)} digits, more than "
                             f"Python's limit on int-to-str conversion ({sys.get_int_max_str_digits()}; "
                             f"sys.set_int_max_str_digits), which lm.save's JSON and lm.load go through; store it "
                             f"as a str") from None
        return x

    def _tensor(self, arr: np.ndarray, lm_dtype, where: str, name: str, owner) -> str:
        if id(owner) in self.names:
            return self.names[id(owner)]
        if (arr.dtype.kind, arr.dtype.itemsize) not in _STORABLE:
            raise TypeError(f"lm.save: {where} is an array of dtype {arr.dtype} (shape {arr.shape}), which cannot be "
                            f"stored; the dtypes are float16/32/64, int8/16/32/64, uint8/16/32/64 and bool")
        name = name[1:] or "value"  # (every name starts with the "." before its first key)
        unique, n = name, 0
        while unique in self.tensors or unique == "__metadata__":
            n += 1
            unique = f"{name}#{n}"
        self.tensors[unique] = arr
        if lm_dtype is not None:
            self.dtypes[unique] = lm_dtype
        self.names[id(owner)] = unique  # (``owner`` lives in the object being saved: its id is not reused)
        return unique


def _describe(x) -> str:
    if isinstance(x, np.ndarray):
        return f"a {type(x).__name__} (a subclass of numpy's ndarray: pass np.asarray(...) of it)"
    base = next((b for b in (int, float, str, dict, list, tuple) if isinstance(x, b)), None)
    if base is not None:
        return f"a {type(x).__qualname__} (a subclass of {base.__name__}: store a plain {base.__name__} of it)"
    return f"a {type(x).__module__}.{type(x).__qualname__}"


def _hint(x) -> str:
    if callable(getattr(x, "state_dict", None)):
        return ": save its state_dict() (and restore it with load_state_dict)"
    if type(x).__module__.startswith("torch"):
        return ": convert torch tensors with .numpy()"
    return ""


def _load_path(path: str, name: str, mmap: bool):
    """:func:`load` of the file ``path``; errors name it ``name`` (the user's file, not a temp copy)."""
    kind = []

    def check(meta):  # before any tensor is read: a file of another kind is refused at once
        fmt = meta.get("format")
        if fmt == _CHECKPOINT:
            raise _Refused(f"{path}: a luminal checkpoint written by train.save_checkpoint; read it with "
                           f"train.load_checkpoint(path, model=..., optimizer=..., ...)")
        if "structure" not in meta and not (isinstance(fmt, str) and fmt.startswith("luminal-")):
            kind.append("plain")  # no format, or another library's tag: Hugging Face's files say "pt"
        elif fmt != FORMAT:
            raise _Refused(f"{path}: a safetensors file whose metadata says format {fmt!r}, not {FORMAT!r} "
                           f"(lm.save's)")
        elif unknown := sorted(set(meta) - {"format", "structure"}):
            # a later version's setting (a scale, a byte order) read as if absent would load other values
            raise _Refused(f"{path}: lm.save's metadata has the entries {unknown}, which this version does not "
                           f"know (only 'format' and 'structure'): a file from a newer luminal, or an edited one")

    try:
        tensors, meta = load_with_metadata(path, mmap=mmap, check=check)
    except _Refused as e:
        raise ValueError(f"lm.load: {e}".replace(path, name)) from None
    except ValueError as e:  # the reader's: say what the file is if it is a known other kind
        what, msg = _foreign(path), str(e)
        if what:
            msg = f"{path}: {what}"
        elif not any(w in msg.replace(path, "") for w in ("truncated", "corrupt", "not a safetensors file")):
            msg += " (a truncated or corrupt file)"
        raise ValueError(f"lm.load: {msg}".replace(path, name)) from None
    if kind:
        return tensors
    try:
        return _Decoder(path, tensors).structure(meta.get("structure"))
    except _Refused as e:
        raise ValueError(f"lm.load: {e}".replace(path, name)) from None


class _Refused(ValueError):
    """A readable safetensors file that :func:`load` refuses (another format, a bad structure)."""


def _foreign(path: str) -> str | None:
    """What a file that is not safetensors is, from its first bytes (None when nothing is recognised).
    A safetensors file's JSON header starts at byte 8, which tells it from a pickle or a zip whose
    first bytes could also be read as a header length."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(9)
    except OSError:
        return None
    if head[8:9] == b"{":
        return None
    advice = ("luminal cannot read pickles (unpickling can run code). With torch, load it and save the tensors: "
              "safetensors.torch.save_file(torch.load(path, weights_only=True), 'x.safetensors') for a flat dict "
              "of tensors (then lm.load or lm.load_safetensors reads it), or convert the tensors with .numpy() "
              "and save with lm.save")
    if head.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        try:
            with zipfile.ZipFile(path) as z:
                names = z.namelist()
        except (zipfile.BadZipFile, OSError, ValueError):
            return "a damaged zip archive (torch.save's files are zips holding a pickle), not lm.save's format"
        if any(n == "data.pkl" or n.endswith("/data.pkl") for n in names):
            return f"a file written by torch.save (a zip holding a pickle, data.pkl). {advice}"
        if names and all(n.endswith(".npy") for n in names):
            return "a numpy .npz archive, not lm.save's format: read it with np.load"
        return f"a zip archive ({len(names)} entries), not lm.save's format (safetensors)"
    if len(head) >= 3 and head[0] == 0x80 and 2 <= head[1] <= 5 and head[2] != 0:
        return f"a pickle (torch.save's legacy format, or pickle.dump's). {advice}"
    if head.startswith(b"\x93NUMPY"):
        return "a numpy .npy file, not lm.save's format: read it with np.load"
    return None


class _Decoder:
    """Checks the JSON structure against the file's tensors and builds the object."""

    def __init__(self, path: str, tensors: dict[str, np.ndarray]):
        self.path, self.tensors, self.used = path, tensors, set()

    def bad(self, where: str, what: str) -> ValueError:
        return _Refused(f"{self.path}: the stored structure at {where} {what} (a corrupt or edited file)")

    def structure(self, text):
        if not isinstance(text, str):
            raise _Refused(f"{self.path}: lm.save's metadata has no 'structure' entry (a corrupt or edited file)")
        try:
            node = json.loads(text, object_pairs_hook=_unique_keys)
        except ValueError as e:
            raise _Refused(f"{self.path}: the stored structure is not valid JSON: {e}") from None
        except RecursionError:
            raise _Refused(f"{self.path}: the stored structure is nested too deeply") from None
        obj = self.node(node, "obj", 0)
        unused = [n for n in self.tensors if n not in self.used]
        if unused:
            raise _Refused(f"{self.path}: the file holds tensors the stored structure does not use: "
                             f"{', '.join(map(repr, unused[:5]))}{' ...' if len(unused) > 5 else ''} "
                             f"(a corrupt or edited file)")
        return obj

    def node(self, x, where: str, depth: int):
        if x is None or type(x) in (bool, int, float, str):
            return x
        if type(x) is not dict or len(x) != 1:
            raise self.bad(where, f"is {_short(x)}, not a stored value")
        ((tag, body),) = x.items()
        if depth == MAX_DEPTH and tag in ("list", "tuple", "dict", "odict"):
            raise self.bad(where[:200] + "...", f"is a container nested {MAX_DEPTH} deep, more than lm.save writes")
        if tag in ("list", "tuple"):
            if type(body) is not list:
                raise self.bad(where, f"is a {tag} whose items are {_short(body)}, not a list")
            items = [self.node(v, f"{where}[{i}]", depth + 1) for i, v in enumerate(body)]
            return items if tag == "list" else tuple(items)
        if tag in ("dict", "odict"):
            if type(body) is not list:
                raise self.bad(where, f"is a dict whose items are {_short(body)}, not a list of pairs")
            out = OrderedDict() if tag == "odict" else {}
            for pair in body:
                if not (type(pair) is list and len(pair) == 2 and type(pair[0]) in (str, int)):
                    raise self.bad(where, f"has the item {_short(pair)}, not a [key, value] pair with a str or "
                                          f"int key")
                if pair[0] in out:
                    raise self.bad(where, f"has the key {pair[0]!r} twice")
                out[pair[0]] = self.node(pair[1], f"{where}[{pair[0]!r}]", depth + 1)
            return out
        if tag in ("tensor", "scalar"):
            if type(body) is not str or body not in self.tensors:
                raise self.bad(where, f"names the tensor {_short(body)}, which the file does not hold")
            arr = self.tensors[body]
            self.used.add(body)
            if tag == "tensor":
                return arr
            if arr.ndim != 0:
                raise self.bad(where, f"is a scalar, but its tensor {body!r} has shape {arr.shape}")
            return arr[()]
        raise self.bad(where, f"has the unknown tag {_short(tag)}")


def _short(x) -> str:
    r = repr(x)
    return r if len(r) <= 80 else r[:77] + "..."
