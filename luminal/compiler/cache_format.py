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
  in the blob), ``g`` a numpy scalar (dtype, its bytes in hex). A value met twice, as the same object
  or as an equal one (they are immutable: sharing one is safe), is one row: a deep graph's thousands
  of kernels hold a hundred or so distinct shapes and views (as some thousand objects), and each is
  decoded and checked once. Everything else below names values by row.
- ``exprs``: every Expr as ``[op, arg, dtype, child rows...]``, children before parents (in this
  table's rows): an expression thousands deep is decoded without recursion, and a subexpression
  shared by several parents stays one object.
- ``buffers``: ``[id, shape, dtype, kind, name, value, base, offset]`` (``base`` a row of this table,
  earlier, or null), ``bodies``: ``[name, params, results, scratch, kernels, packs]`` (buffers by row),
  ``graph`` and ``plan``: the KernelGraph and the MemoryPlan, whose buffers are rows of ``buffers``
  (so a buffer shared by kernels, outputs and slots is one object again). A kernel is ``[kind,
  domain, inputs, outputs, axes, reduce_op, prologue, acc_dtype, epilogue_inputs, fused, body]``,
  its (buffer, view) and (buffer, expr) pairs flattened.
- ``key``, ``stats``, ``times``, ``compile_s``: plain JSON; ``positions``: the row of an int64 array.

A ``Sym`` is rebuilt from its terms, so its cached hash is this process's (string hashes differ
between processes).
"""

from __future__ import annotations

import json
import math
import struct

import numpy as np

from luminal.core import dtype as dt
from luminal.core.float_text import from_bits, nan_bits
from luminal.core.kernel_graph import BUFFER_KINDS, KERNEL_KINDS, Body, Buffer, Expr, Kernel, KernelGraph, MemoryPlan
from luminal.core.symbolic import Atom, Sym
from luminal.core.view import View

FORMAT = 3  # bump when the layout changes (the cache key covers it: ``cache.environment``; 3: NaNs as their bits)
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
           "positions": w.value(np.asarray(entry["positions"], np.int64)), "compile_s": float(entry["compile_s"])}
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
        self.equal: dict = {}  # a row (as a tuple) -> its number: equal values met as distinct objects
        self.expr_rows: dict = {}  # id(expr) -> row
        self.buffer_rows: dict = {}  # id(buffer) -> row
        self.body_rows: dict = {}  # id(body) -> row
        self.keep: list = []  # the objects whose ids are keys, alive until the entry is written

    def value(self, x) -> int:
        t = type(x)
        if t is float:
            memo = ("f", x.hex() if x == x else nan_bits(x))  # -0.0 == 0.0, yet they differ; so do NaNs
        elif x is None or t is bool or t is int or t is str:
            memo = (t, x)
        else:
            memo = id(x)
        r = self.rows.get(memo)
        if r is None:
            row = self._row(x, t)  # its children's rows first
            if type(memo) is tuple or t is np.ndarray:  # a scalar (``memo`` is its value), an array (its bytes)
                r = len(self.values)
                self.values.append(row)
            else:  # an equal value met before as another object has the same row
                same = tuple([tuple(c) if type(c) is list else c for c in row])  # (only ints and strs: exact)
                r = self.equal.get(same)
                if r is None:
                    r = self.equal[same] = len(self.values)
                    self.values.append(row)
            if type(memo) is int:
                self.keep.append(x)
            self.rows[memo] = r
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
            return ["f", x] if x == x else ["f", nan_bits(x)]  # (JSON writes every NaN as NaN)
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
    """The entry ``dumps`` wrote under ``key``, as the dict it was given (``positions`` a list); None
    when ``data`` is of another format or was written under another key. Raises DecodeError when it is
    damaged or holds anything ``dumps`` does not write."""
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
    except (ValueError, RecursionError) as e:  # (UnicodeDecodeError is a ValueError; lists nested deep)
        raise DecodeError(f"the entry's JSON: {type(e).__name__}: {e}") from None
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


DIMS = frozenset((int, Sym))  # the types of the items of a tuple that is a shape
INTS = frozenset((int,))
STRS = frozenset((str,))
TUPLES = frozenset((tuple,))
NO_TUPLE = frozenset((object,))  # what ``_Reader.items`` has for a value that is no tuple


def _check(ok: bool, what: str) -> None:
    if not ok:
        raise DecodeError(what)


def _rows(refs, what: str) -> list:
    """``refs``, a list of row numbers: ints, none negative (which would count from the table's end).
    One past the table's end raises IndexError where it is looked up."""
    if type(refs) is not list or (refs and min(refs) < 0):
        raise DecodeError(f"{what}: no list of rows")
    return refs


class _Reader:
    """Rebuilds an entry's objects from its tables, checking each field as it goes. A row refers only to
    rows before it (a later one is past the end of what is decoded: IndexError), so nothing loops."""

    def __init__(self, blob: memoryview):
        self.blob = blob
        self.values: list = []
        self.exprs: list = []
        self.buffers: list = []
        self.bodies: list = []
        self.items: dict = {}  # id of each tuple of ``values`` -> the types of its items (checked once)

    def entry(self, doc: dict) -> dict:
        for table, decode, name in ((self.values, self._value, "values"), (self.exprs, self._expr, "exprs"),
                                    (self.buffers, self._buffer, "buffers"), (self.bodies, self._body, "bodies")):
            rows = doc[name]
            _check(type(rows) is list, name)
            table.extend(map(decode, rows))  # each row sees the rows before it
        stats, times, positions = doc["stats"], doc["times"], self.value(doc["positions"])
        _check(type(stats) is dict and type(times) is dict and type(doc["compile_s"]) in (int, float), "statistics")
        _check(all(type(t) is str and type(x) in (int, float) for t, x in times.items()), "times")
        _check(type(positions) is np.ndarray and positions.dtype == np.int64 and positions.ndim == 1, "positions")
        return {"kg": self._graph(doc["graph"]), "plan": self._plan(doc["plan"]), "stats": stats, "times": times,
                "positions": positions.tolist(), "compile_s": doc["compile_s"]}

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

    def tuple_of(self, r, types: frozenset, what: str) -> tuple:
        """Value ``r``, a tuple whose items are all of ``types``."""
        x = self.value(r)
        if not self.items.get(id(x), NO_TUPLE) <= types:
            raise DecodeError(f"{what}: no tuple of {' or '.join(sorted(t.__name__ for t in types))}")
        return x

    def _value(self, row):
        if type(row) is not list or not row:
            raise DecodeError(f"a value row {row!r:.40}")
        if row[0] == "t":  # the commonest: shapes, strides, masks
            vals = self.values
            t = tuple([vals[r] for r in _rows(row[1:], "a tuple")])
            self.items[id(t)] = frozenset(map(type, t))
            return t
        decode = _VALUES.get(row[0]) if type(row[0]) is str else None
        if decode is None:
            raise DecodeError(f"a value row of unknown tag {row[0]!r:.20}")
        return decode(self, row)

    def _scalar(self, row, t):
        _check(len(row) == 2 and type(row[1]) is t, f"a {t.__name__} row")
        return row[1]

    def _none(self, row):
        _check(len(row) == 1, "a None row")
        return None

    def _float(self, row):
        _check(len(row) == 2 and type(row[1]) in (float, int, str), "a float row")
        if type(row[1]) is str:  # a NaN, as its bits
            try:
                x = from_bits(row[1])
            except ValueError:
                x = 0.0
            _check(x != x, "a NaN's bits")
            return x
        return float(row[1])

    def _dtype(self, row):
        _check(len(row) == 2 and type(row[1]) is str and row[1] in DTYPES, "a dtype row")
        return DTYPES[row[1]]

    def _atom(self, row):
        kind = row[1] if len(row) > 1 and type(row[1]) is str else None
        _check(kind in ATOM_ARITY and len(row) == 2 + ATOM_ARITY[kind], "an atom row")
        args = tuple([self.value(r) for r in row[2:]])
        _check(type(args[0]) is str if kind == "var" else all(type(a) in DIMS for a in args), f"a {kind} atom's args")
        return Atom(kind, args)

    def _sym(self, row):
        terms = {}
        for term in row[1:]:
            _check(type(term) is list and term and type(term[0]) is int, "a sym term")
            terms[tuple([self.typed(r, Atom, "a sym factor") for r in term[1:]])] = term[0]
        return Sym(terms)

    def _view(self, row):
        v, items = self.values, self.items
        if len(row) != 6 or min(row[1:]) < 0:
            raise DecodeError("a view row")
        shape, strides, offset, mask, pad = v[row[1]], v[row[2]], v[row[3]], v[row[4]], v[row[5]]
        if not (items.get(id(shape), NO_TUPLE) <= DIMS and items.get(id(strides), NO_TUPLE) <= DIMS
                and len(strides) == len(shape) and type(offset) in DIMS and type(pad) in (float, int, bool)):
            raise DecodeError("a view's shape, strides, offset or pad")
        if mask is not None and not (items.get(id(mask), NO_TUPLE) <= TUPLES and len(mask) == len(shape)
                                     and all(len(m) == 2 and items[id(m)] <= DIMS for m in mask)):
            raise DecodeError("a view's mask")
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
        if type(row) is not list or len(row) < 3 or min(row) < 0:
            raise DecodeError("an expr row")
        v = self.values
        op, dtype = v[row[0]], v[row[2]]
        if type(op) is not str or not (dtype is None or type(dtype) is dt.DType):
            raise DecodeError("an expr's op or dtype")
        return Expr(op, tuple(map(self.exprs.__getitem__, row[3:])), v[row[1]], dtype)

    def _buffer(self, row) -> Buffer:
        if type(row) is not list or len(row) != 8:
            raise DecodeError("a buffer row")
        i, shape, dtype, kind, name, value, base, offset = row
        if type(i) is not int or min(shape, dtype, kind, name, value, offset) < 0:
            raise DecodeError("a buffer row")
        v = self.values
        shape, dtype, kind, name, value, offset = v[shape], v[dtype], v[kind], v[name], v[value], v[offset]
        if not (self.items.get(id(shape), NO_TUPLE) <= DIMS and type(dtype) is dt.DType and type(offset) in DIMS
                and type(kind) is str and kind in BUFFER_KINDS and (name is None or type(name) is str)
                and (value is None or type(value) is np.ndarray)):
            raise DecodeError("a buffer's shape, dtype, kind, name, value or offset")
        if base is not None:
            base = self.buffers[_rows([base], "a buffer's base")[0]]
        return Buffer(i, shape, dtype, kind, name, value, base, offset)

    def _buffers(self, refs) -> list:
        bufs = self.buffers
        return [bufs[r] for r in _rows(refs, "buffers")]

    def _views(self, flat) -> list:
        """``[(buffer, view)]`` from ``[buffer row, view row, ...]``."""
        if len(_rows(flat, "views")) % 2:
            raise DecodeError("views")
        views = list(map(self.values.__getitem__, flat[1::2]))
        if not all(type(v) is View for v in views):
            raise DecodeError("views")
        return list(zip(map(self.buffers.__getitem__, flat[::2]), views))

    def _outputs(self, flat) -> list:
        """``[(buffer, expr or None)]`` from ``[buffer row, expr row or null, ...]``."""
        if type(flat) is not list or len(flat) % 2:
            raise DecodeError("outputs")
        exprs = self.exprs
        rows = _rows([e for e in flat[1::2] if e is not None], "outputs")
        if len(rows) == len(flat) // 2:  # (the usual case: no call kernel's None)
            return list(zip(self._buffers(flat[::2]), map(exprs.__getitem__, rows)))
        return [(b, None if e is None else exprs[e]) for b, e in zip(self._buffers(flat[::2]), flat[1::2])]

    def _kernel(self, row) -> Kernel:
        if type(row) is not list or len(row) != 11:
            raise DecodeError("a kernel row")
        kind, domain, inputs, outputs, axes, reduce_op, prologue, acc, epilogue_inputs, fused, body = row
        v, items = self.values, self.items
        if min(kind, domain, axes, reduce_op, acc, fused) < 0:
            raise DecodeError("a kernel row")
        kind, domain, axes, reduce_op, acc, fused = v[kind], v[domain], v[axes], v[reduce_op], v[acc], v[fused]
        if not (type(kind) is str and kind in KERNEL_KINDS and items.get(id(domain), NO_TUPLE) <= DIMS
                and items.get(id(axes), NO_TUPLE) <= INTS and items.get(id(fused), NO_TUPLE) <= STRS
                and (reduce_op is None or type(reduce_op) is str) and (acc is None or type(acc) is dt.DType)):
            raise DecodeError("a kernel's kind, domain, axes, reduce_op, acc_dtype or fused")
        if prologue is not None:
            prologue = self.exprs[_rows([prologue], "a prologue")[0]]
        if body is not None:
            body = self.bodies[_rows([body], "a body")[0]]
        return Kernel(kind, domain, self._views(inputs), self._outputs(outputs), axes, reduce_op, prologue, acc,
                      self._views(epilogue_inputs), fused, body)

    def _kernels(self, rows) -> list:
        _check(type(rows) is list, "kernels")
        return [self._kernel(k) for k in rows]

    def _pack(self, flat) -> list:
        """``[(buffer, element offset)]`` from ``[buffer row, offset row, ...]``."""
        _check(len(_rows(flat, "a pack")) % 2 == 0, "a pack")
        out = [(self.buffers[b], self.values[o]) for b, o in zip(flat[::2], flat[1::2])]
        _check(all(type(o) in DIMS for _, o in out), "a pack's offsets")
        return out

    def _body(self, row) -> Body:
        _check(type(row) is list and len(row) == 6 and type(row[5]) is list, "a body row")
        return Body(self.typed(row[0], str, "a body's name"), self._buffers(row[1]), self._buffers(row[2]),
                    self._buffers(row[3]), self._kernels(row[4]), [self._pack(p) for p in row[5]])

    def _graph(self, g: dict) -> KernelGraph:
        ups, dims = g["updates"], self.tuple_of(g["dims"], STRS, "dims")
        _check(type(ups) is list and len(ups) % 3 == 0, "updates")
        updates = [(self.typed(n, str, "an update's name"), self.buffers[b], self.typed(w, View, "an update's view"))
                   for n, b, w in zip(ups[::3], _rows(ups[1::3], "updates"), ups[2::3])]
        return KernelGraph(self._buffers(g["buffers"]), self._kernels(g["kernels"]), self._views(g["outputs"]),
                           updates, dims)

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
           "f": _Reader._float, "s": lambda r, row: r._scalar(row, str), "D": _Reader._dtype, "A": _Reader._atom,
           "Y": _Reader._sym, "V": _Reader._view, "a": _Reader._array, "g": _Reader._generic}

__all__ = ["FORMAT", "MAGIC", "DecodeError", "dumps", "loads"]
