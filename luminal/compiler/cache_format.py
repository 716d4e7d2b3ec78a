"""The compile cache's entries as data: what ``compiler/cache.py`` writes to disk and reads back.

Why not pickle: unpickling runs whatever the bytes name, so an overwritten entry ran ``os.system`` in
the next process (which then took the entry for a miss and looked normal). Here an entry is JSON plus
the raw bytes of its constant arrays, and decoding builds only the types listed below, through their
constructors, checking every field on the way: a damaged or hostile entry can at most fail to decode
(``DecodeError``: a miss, recompiled and rewritten), never run code or make an object of another type.

**Layout:** ``MAGIC``, a header (``HEADER``: the format, the JSON's length, the blob's length), the
JSON (UTF-8), the blob (each constant array's bytes, one after another). The JSON object holds:

- ``values``: the immutable values the objects hold, one row each, children before parents, each
  ``[tag, ...]``: ``N`` None, ``b`` bool, ``i`` int, ``f`` float, ``s`` str (the number or text
  after the tag), ``t`` a tuple (its items' rows), ``D`` a DType (its name), ``A`` a symbolic Atom
  (its kind, its args' rows), ``Y`` a Sym (per term ``[coefficient, atom rows...]``), ``V`` a View
  (the rows of shape, strides, offset, mask, pad), ``a`` an array (dtype, shape, offset and length
  in the blob), ``g`` a numpy scalar (dtype, its bytes in hex). A value met twice (the same object,
  or an equal scalar) is one row: a deep graph shares a few hundred shapes and views among thousands
  of kernels. Everything else below names values by row.
- ``exprs``: every Expr as ``[op, arg, dtype, child rows...]``, children before parents (in this
  table's rows): an expression thousands deep is decoded without recursion, and a subexpression
  shared by several parents stays one object.
- ``buffers``: ``[id, shape, dtype, kind, name, value, base, offset]`` (``base`` a row of this table,
  earlier, or null), ``bodies``: ``[name, params, results, scratch, kernels, packs]`` (buffers by row),
  ``graph`` and ``plan``: the KernelGraph and the MemoryPlan, whose buffers are rows of ``buffers``
  (so a buffer shared by kernels, outputs and slots is one object again). A kernel is ``[kind,
  domain, inputs, outputs, axes, reduce_op, prologue, acc_dtype, epilogue_inputs, fused, body]``,
  its (buffer, view) and (buffer, expr) pairs flattened.
- ``key``, ``stats``, ``times``, ``positions``, ``compile_s``: plain JSON.

A ``Sym`` is rebuilt from its terms, so its cached hash is this process's (string hashes differ
between processes).
"""

from __future__ import annotations

import json
import math
import struct

import numpy as np

from luminal.core import dtype as dt
from luminal.core.kernel_graph import BUFFER_KINDS, KERNEL_KINDS, Body, Buffer, Expr, Kernel, KernelGraph, MemoryPlan
from luminal.core.symbolic import Atom, Sym
from luminal.core.view import View

FORMAT = 2  # bump when the layout changes (the cache key covers it: ``cache.environment``)
MAGIC = b"luminal-compile\0"
HEADER = struct.Struct("<IQQ")  # format, JSON bytes, blob bytes
ATOM_ARITY = {"var": 1, "floordiv": 2, "mod": 2, "max": 2, "min": 2}
DTYPES = {d.name: d for d in dt.ALL}
ARRAY_KINDS = "biuf"  # numpy dtype kinds an array or numpy scalar may have: numbers and bools only


class DecodeError(ValueError):
    """The entry is damaged or is not one this module wrote: a miss."""


# writing ----------------------------------------------------------------------------------------------

def dumps(key: str, entry: dict) -> bytes:
    """The bytes of ``entry`` (``kg``, ``plan``, ``stats``, ``times``, ``positions``, ``compile_s``)
    stored under ``key``. Raises TypeError for a value of a type the format does not hold."""
    w = _Writer()
    kg, plan = entry["kg"], entry["plan"]
    graph = {"buffers": [w.buffer(b) for b in kg.buffers], "kernels": [w.kernel(k) for k in kg.kernels],
             "outputs": w.pairs(kg.outputs, w.value),
             "updates": [x for name, b, v in kg.updates for x in (w.value(name), w.buffer(b), w.value(v))],
             "dims": w.value(tuple(kg.dims))}
    doc = {"key": key, "graph": graph, "plan": w.plan(plan), "values": w.values, "exprs": w.exprs,
           "buffers": w.buffers, "bodies": w.bodies, "stats": entry["stats"], "times": entry["times"],
           "positions": [int(i) for i in entry["positions"]], "compile_s": float(entry["compile_s"])}
    text = json.dumps(doc, separators=(",", ":"), default=_not_json).encode()
    blob = b"".join(w.blob)
    return MAGIC + HEADER.pack(FORMAT, len(text), len(blob)) + text + blob


def _not_json(x):
    raise TypeError(f"compile cache: a {type(x).__name__} in the statistics cannot be stored")


class _Writer:
    """The tables of one entry, filled as the objects are met (each object once, children first)."""

    def __init__(self):
        self.values: list = []
        self.exprs: list = []
        self.buffers: list = []
        self.bodies: list = []
        self.blob: list = []
        self.blob_size = 0
        self.rows: dict = {}  # a value (by id, or a scalar by type and value) -> its row in ``values``
        self.expr_rows: dict = {}  # id(expr) -> row
        self.buffer_rows: dict = {}  # id(buffer) -> row
        self.body_rows: dict = {}  # id(body) -> row
        self.keep: list = []  # the objects whose ids are keys, alive until the entry is written

    def value(self, x) -> int:
        t = type(x)
        if t is float:
            memo = ("f", x.hex())  # -0.0 == 0.0, yet they differ
        elif x is None or t is bool or t is int or t is str:
            memo = (t, x)
        else:
            memo = id(x)
        r = self.rows.get(memo)
        if r is None:
            row = self._row(x, t)  # its children's rows first
            r = self.rows[memo] = len(self.values)
            self.values.append(row)
            self.keep.append(x)
        return r

    def _row(self, x, t) -> list:
        v = self.value
        if x is None:
            return ["N"]
        if t is bool:
            return ["b", x]
        if t is int:
            return ["i", x]
        if t is float:
            return ["f", x]
        if t is str:
            return ["s", x]
        if t is tuple:
            return ["t", *map(v, x)]
        if t is dt.DType:
            return ["D", x.name]
        if t is Sym:
            return ["Y", *([c, *map(v, m)] for m, c in x.terms)]
        if t is Atom:
            return ["A", x.kind, *map(v, x.args)]
        if t is View:
            return ["V", v(x.shape), v(x.strides), v(x.offset), v(x.mask), v(x.pad)]
        if t is np.ndarray and x.dtype.kind in ARRAY_KINDS:
            data = x.tobytes()  # C order, whatever the array's
            self.blob.append(data)
            self.blob_size += len(data)
            return ["a", x.dtype.str, list(x.shape), self.blob_size - len(data), len(data)]
        if isinstance(x, np.generic) and x.dtype.kind in ARRAY_KINDS:
            return ["g", x.dtype.str, x.tobytes().hex()]
        raise TypeError(f"compile cache: a {t.__name__} ({x!r:.60}) cannot be stored")

    def pairs(self, items, second) -> list:
        """``[(buffer, x)]`` flattened: ``[buffer row, second(x), ...]``."""
        return [y for b, x in items for y in (self.buffer(b), second(x))]

    def buffer(self, b: Buffer) -> int:
        r = self.buffer_rows.get(id(b))
        if r is None:
            base = None if b.base is None else self.buffer(b.base)
            v = self.value
            row = [b.id, v(b.shape), v(b.dtype), v(b.kind), v(b.name), v(b.value), base, v(b.offset)]
            r = self.buffer_rows[id(b)] = len(self.buffers)
            self.buffers.append(row)
            self.keep.append(b)
        return r

    def expr(self, root) -> int | None:
        """The row of ``root`` (None for None), its whole DAG added children first, without recursion."""
        if root is None:
            return None
        rows = self.expr_rows
        stack = [(root, False)]
        while stack:
            e, ready = stack.pop()
            if id(e) in rows:
                continue
            if ready:
                rows[id(e)] = len(self.exprs)
                self.exprs.append([self.value(e.op), self.value(e.arg), self.value(e.dtype),
                                   *(rows[id(a)] for a in e.args)])
                self.keep.append(e)
                continue
            stack.append((e, True))
            stack.extend((a, False) for a in reversed(e.args) if id(a) not in rows)
        return rows[id(root)]

    def kernel(self, k: Kernel) -> list:
        v = self.value
        return [v(k.kind), v(k.domain), self.pairs(k.inputs, v), self.pairs(k.outputs, self.expr), v(k.axes),
                v(k.reduce_op), self.expr(k.prologue), v(k.acc_dtype), self.pairs(k.epilogue_inputs, v),
                v(k.fused), None if k.body is None else self.body(k.body)]

    def body(self, body: Body) -> int:
        r = self.body_rows.get(id(body))
        if r is None:
            bufs = self.buffer
            row = [self.value(body.name), [bufs(b) for b in body.params], [bufs(b) for b in body.results],
                   [bufs(b) for b in body.scratch], [self.kernel(k) for k in body.kernels],
                   [self.pairs(pack, self.value) for pack in body.packs]]
            r = self.body_rows[id(body)] = len(self.bodies)
            self.bodies.append(row)
            self.keep.append(body)
        return r

    def plan(self, plan: MemoryPlan) -> dict:
        return {"slot_of": [x for kv in plan.slot_of.items() for x in kv],
                "slots": [[self.buffer(b) for b in bufs] for bufs in plan.slots],
                "temps": [self.buffer(b) for b in plan.temps],
                "calls": [x for kv in plan.calls.items() for x in kv]}


# reading ----------------------------------------------------------------------------------------------

def loads(data: bytes, key: str) -> dict | None:
    """The entry ``dumps`` wrote under ``key``, as the dict it was given; None when ``data`` is of
    another format or was written under another key. Raises DecodeError when it is damaged or holds
    anything ``dumps`` does not write."""
    start = len(MAGIC) + HEADER.size
    if not data.startswith(MAGIC) or len(data) < start:
        return None
    fmt, text_len, blob_len = HEADER.unpack_from(data, len(MAGIC))
    if fmt != FORMAT:
        return None
    if len(data) != start + text_len + blob_len:
        raise DecodeError(f"an entry of {len(data)} bytes whose header says {start + text_len + blob_len}")
    try:
        doc = json.loads(data[start:start + text_len])
    except ValueError as e:  # UnicodeDecodeError is one too
        raise DecodeError(f"the entry's JSON: {e}") from None
    if type(doc) is not dict:
        raise DecodeError("the entry's JSON is no object")
    if doc.get("key") != key:
        return None
    try:
        return _Reader(memoryview(data)[start + text_len:]).entry(doc)
    except DecodeError:
        raise
    except (KeyError, IndexError, TypeError, ValueError) as e:  # a field missing or misshapen, a row ahead
        raise DecodeError(f"the entry's {type(e).__name__}: {e}") from None


def _is_dim(d) -> bool:
    return type(d) is int or type(d) is Sym


def _check(ok: bool, what: str) -> None:
    if not ok:
        raise DecodeError(what)


def _rows(x, what: str) -> list:
    """``x``, a list of row numbers or of rows; no negative index (which would count from the end)."""
    if type(x) is not list or (x and min(x) < 0):
        raise DecodeError(f"{what}: no list of rows")
    return x


class _Reader:
    """Rebuilds an entry's objects from its tables, checking each field as it goes; a row refers only
    to rows before it (``IndexError`` otherwise), so nothing is visited twice and nothing loops."""

    def __init__(self, blob: memoryview):
        self.blob = blob
        self.values: list = []
        self.exprs: list = []
        self.buffers: list = []
        self.bodies: list = []

    def entry(self, doc: dict) -> dict:
        for table, decode, name in ((self.values, self._value, "values"), (self.exprs, self._expr, "exprs"),
                                    (self.buffers, self._buffer, "buffers"), (self.bodies, self._body, "bodies")):
            rows = doc[name]
            _check(type(rows) is list, name)
            table.extend(map(decode, rows))  # each row sees the rows before it
        stats, times, positions = doc["stats"], doc["times"], doc["positions"]
        _check(type(stats) is dict and type(times) is dict and type(doc["compile_s"]) in (int, float), "statistics")
        _check(all(type(t) is str and type(x) in (int, float) for t, x in times.items()), "times")
        _check(type(positions) is list and all(type(i) is int for i in positions), "positions")
        return {"kg": self._graph(doc["graph"]), "plan": self._plan(doc["plan"]), "stats": stats, "times": times,
                "positions": positions, "compile_s": doc["compile_s"]}

    # values
    def value(self, r):
        if type(r) is not int or r < 0:
            raise DecodeError(f"a value row {r!r:.20}")
        return self.values[r]

    def typed(self, r, t, what: str):
        x = self.value(r)
        if type(x) is not t:
            raise DecodeError(f"{what}: a {type(x).__name__}, not a {t.__name__}")
        return x

    def maybe(self, r, t, what: str):
        x = self.value(r)
        if x is not None and type(x) is not t:
            raise DecodeError(f"{what}: a {type(x).__name__}, not a {t.__name__} or None")
        return x

    def dims(self, r, what: str) -> tuple:
        x = self.value(r)
        if type(x) is not tuple or not all(map(_is_dim, x)):
            raise DecodeError(f"{what}: no tuple of dims")
        return x

    def _value(self, row):
        if type(row) is not list or not row or type(row[0]) is not str or row[0] not in _VALUES:
            raise DecodeError(f"a value row {row!r:.40}")
        return _VALUES[row[0]](self, row)

    def _scalar(self, row, t):
        _check(len(row) == 2 and type(row[1]) is t, f"a {t.__name__} row")
        return row[1]

    def _none(self, row):
        _check(len(row) == 1, "a None row")
        return None

    def _float(self, row):
        _check(len(row) == 2 and type(row[1]) in (float, int), "a float row")
        return float(row[1])

    def _tuple(self, row):
        return tuple([self.value(r) for r in row[1:]])

    def _dtype(self, row):
        _check(len(row) == 2 and type(row[1]) is str and row[1] in DTYPES, "a dtype row")
        return DTYPES[row[1]]

    def _atom(self, row):
        kind = row[1] if len(row) > 1 and type(row[1]) is str else None
        _check(kind in ATOM_ARITY and len(row) == 2 + ATOM_ARITY[kind], "an atom row")
        args = tuple([self.value(r) for r in row[2:]])
        _check(type(args[0]) is str if kind == "var" else all(map(_is_dim, args)), f"a {kind} atom's args")
        return Atom(kind, args)

    def _sym(self, row):
        terms = {}
        for term in row[1:]:
            _check(type(term) is list and term and type(term[0]) is int, "a sym term")
            terms[tuple([self.typed(r, Atom, "a sym factor") for r in term[1:]])] = term[0]
        return Sym(terms)

    def _view(self, row):
        _check(len(row) == 6, "a view row")
        shape, strides = self.dims(row[1], "a view's shape"), self.dims(row[2], "a view's strides")
        offset, mask, pad = self.value(row[3]), self.value(row[4]), self.value(row[5])
        _check(len(strides) == len(shape) and _is_dim(offset) and type(pad) in (float, int, bool), "a view's fields")
        _check(mask is None or (type(mask) is tuple and len(mask) == len(shape) and all(
            type(m) is tuple and len(m) == 2 and all(map(_is_dim, m)) for m in mask)), "a view's mask")
        return View(shape, strides, offset, mask, pad)

    def _array(self, row):
        _check(len(row) == 5, "an array row")
        d, shape, offset, size = _numpy_dtype(row[1]), row[2], row[3], row[4]
        _check(type(shape) is list and all(type(n) is int and n >= 0 for n in shape), "an array's shape")
        _check(type(offset) is int and type(size) is int and 0 <= offset and offset + size <= len(self.blob)
               and size == math.prod(shape) * d.itemsize, "an array's bytes")
        return np.frombuffer(self.blob, d, size // d.itemsize, offset).reshape(shape).copy()  # writable, its own

    def _generic(self, row):
        _check(len(row) == 3 and type(row[2]) is str, "a numpy scalar row")
        d, raw = _numpy_dtype(row[1]), bytes.fromhex(row[2])
        _check(len(raw) == d.itemsize, "a numpy scalar's bytes")
        return np.frombuffer(raw, d)[0]

    # objects
    def _expr(self, row) -> Expr:
        _check(len(_rows(row, "an expr")) >= 3, "an expr row")
        v, exprs = self.values, self.exprs
        op, dtype = v[row[0]], v[row[2]]
        _check(type(op) is str and (dtype is None or type(dtype) is dt.DType), "an expr's op or dtype")
        return Expr(op, tuple([exprs[i] for i in row[3:]]), v[row[1]], dtype)

    def expr(self, r) -> Expr | None:
        if r is None:
            return None
        _check(type(r) is int and r >= 0, "an expr row number")
        return self.exprs[r]

    def _buffer(self, row) -> Buffer:
        _check(type(row) is list and len(row) == 8 and type(row[0]) is int, "a buffer row")
        kind, offset = self.value(row[3]), self.value(row[7])
        _check(kind in BUFFER_KINDS and _is_dim(offset), "a buffer's kind or offset")
        base = None if row[6] is None else self.buffer(row[6])
        return Buffer(row[0], self.dims(row[1], "a buffer's shape"), self.typed(row[2], dt.DType, "a buffer's dtype"),
                      kind, self.maybe(row[4], str, "a buffer's name"),
                      self.maybe(row[5], np.ndarray, "a buffer's value"), base, offset)

    def buffer(self, r) -> Buffer:
        _check(type(r) is int and r >= 0, "a buffer row number")
        return self.buffers[r]

    def _buffers(self, rows) -> list:
        return [self.buffers[r] for r in _rows(rows, "buffers")]

    def _pairs(self, flat, second) -> list:
        _check(type(flat) is list and len(flat) % 2 == 0, "pairs")
        return [(self.buffer(b), second(x)) for b, x in zip(flat[::2], flat[1::2])]

    def view(self, r) -> View:
        return self.typed(r, View, "a view")

    def _kernel(self, row) -> Kernel:
        _check(type(row) is list and len(row) == 11, "a kernel row")
        kind, axes, fused = self.value(row[0]), self.typed(row[4], tuple, "axes"), self.typed(row[9], tuple, "fused")
        _check(kind in KERNEL_KINDS and all(type(a) is int for a in axes) and all(type(f) is str for f in fused),
               "a kernel's kind, axes or fused")
        body = None
        if row[10] is not None:
            _check(type(row[10]) is int and row[10] >= 0, "a kernel's body")
            body = self.bodies[row[10]]
        return Kernel(kind, self.dims(row[1], "a kernel's domain"), self._pairs(row[2], self.view),
                      self._pairs(row[3], self.expr), axes, self.maybe(row[5], str, "a kernel's reduce_op"),
                      self.expr(row[6]), self.maybe(row[7], dt.DType, "a kernel's acc_dtype"),
                      self._pairs(row[8], self.view), fused, body)

    def _kernels(self, rows) -> list:
        _check(type(rows) is list, "kernels")
        return [self._kernel(k) for k in rows]

    def dim(self, r):
        d = self.value(r)
        _check(_is_dim(d), "a dim")
        return d

    def _body(self, row) -> Body:
        _check(type(row) is list and len(row) == 6 and type(row[5]) is list, "a body row")
        return Body(self.typed(row[0], str, "a body's name"), self._buffers(row[1]), self._buffers(row[2]),
                    self._buffers(row[3]), self._kernels(row[4]), [self._pairs(p, self.dim) for p in row[5]])

    def _graph(self, g: dict) -> KernelGraph:
        ups, dims = g["updates"], self.typed(g["dims"], tuple, "dims")
        _check(type(ups) is list and len(ups) % 3 == 0 and all(type(d) is str for d in dims), "updates or dims")
        updates = [(self.typed(n, str, "an update's name"), self.buffer(b), self.view(w))
                   for n, b, w in zip(ups[::3], ups[1::3], ups[2::3])]
        return KernelGraph(self._buffers(g["buffers"]), self._kernels(g["kernels"]),
                           self._pairs(g["outputs"], self.view), updates, dims)

    def _plan(self, p: dict) -> MemoryPlan:
        slot_of, calls = p["slot_of"], p["calls"]
        _check(type(slot_of) is list and type(calls) is list and len(slot_of) % 2 == 0 and len(calls) % 2 == 0
               and all(type(x) is int for x in slot_of + calls), "a plan's slot_of or calls")
        _check(type(p["slots"]) is list, "a plan's slots")
        return MemoryPlan(dict(zip(slot_of[::2], slot_of[1::2])), [self._buffers(s) for s in p["slots"]],
                          self._buffers(p["temps"]), dict(zip(calls[::2], calls[1::2])))


def _numpy_dtype(s) -> np.dtype:
    """The numpy dtype named ``s``: numbers and bools only (an object dtype would unpickle its items)."""
    _check(type(s) is str and len(s) <= 8, "a numpy dtype")
    d = np.dtype(s)
    _check(d.kind in ARRAY_KINDS and d.fields is None and d.subdtype is None, f"the numpy dtype {s!r}")
    return d


_VALUES = {"N": _Reader._none, "b": lambda r, row: r._scalar(row, bool), "i": lambda r, row: r._scalar(row, int),
           "f": _Reader._float, "s": lambda r, row: r._scalar(row, str), "t": _Reader._tuple, "D": _Reader._dtype,
           "A": _Reader._atom, "Y": _Reader._sym, "V": _Reader._view, "a": _Reader._array, "g": _Reader._generic}

__all__ = ["FORMAT", "MAGIC", "DecodeError", "dumps", "loads"]
