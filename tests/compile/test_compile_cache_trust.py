"""The compile cache's entries are data (``compiler/cache_format.py``), never pickles: a planted pickle
never runs, a damaged or hostile entry is a miss that the recompile rewrites, and every kind of program
the cache stores (rolled loops, symbolic dims, constants of every dtype, convolutions, gathers) comes
back computing the same (issue 29, item 2)."""

import ast
import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import luminal as lm
from luminal import nn
from luminal.compiler import cache, cache_format
from luminal.compiler.cache_format import DecodeError
from luminal.compiler.pipeline import compile_graph
from luminal.core.disk_cache import DiskCache


@pytest.fixture
def on(tmp_path, monkeypatch):
    """The compile cache on, in ``tmp_path``."""
    monkeypatch.setenv("LUMINAL_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("LUMINAL_CACHE", "1")
    return tmp_path


def _entries(root: Path) -> list[Path]:
    return sorted(p for p in (root / "compile").rglob("*") if p.is_file() and not p.name.startswith("."))


def _name(root: Path, entry: Path) -> str:
    """The name ``DiskCache("compile")`` knows ``entry`` by."""
    return entry.relative_to(root / "compile").as_posix()


class _RunsCode:
    """A pickle that runs ``call(*args)`` when loaded: what an attacker plants."""

    def __init__(self, call, *args):
        self.call, self.args = call, args

    def __reduce__(self):
        return self.call, self.args


def _payloads(marker: Path) -> dict:
    """Pickles that create ``marker`` when loaded (by a shell command, or by opening it), framed as the
    pickled entries were (``luminal-compile\\0`` then the pickle), as this format's header, and bare."""
    shell = pickle.dumps(_RunsCode(os.system, f"touch '{marker}'"))
    opened = pickle.dumps(_RunsCode(open, str(marker), "w"))
    header = cache_format.MAGIC + cache_format.HEADER.pack(cache_format.FORMAT, len(shell), 0)
    return {"pickled entry": b"luminal-compile\0" + shell + opened, "this format's header": header + shell,
            "bare": opened}


# a program, each of its kinds ------------------------------------------------------------------------

def _programs() -> dict:
    """Programs that hold each thing an entry stores: name -> a function that builds (outputs, inputs for
    two runs), the same each call."""

    def rolled():
        rng = np.random.default_rng(0)
        lm.manual_seed(0)
        g = lm.Graph()
        h = g.input("x", ("B", 8))
        for layer in [nn.Linear(8, 8) for _ in range(6)]:
            h = layer(h).relu()
        return [h.sum(-1)], [{"x": rng.standard_normal((b, 8)).astype(np.float32)} for b in (3, 5)]

    def symbolic():
        rng = np.random.default_rng(0)
        lm.manual_seed(0)
        g = lm.Graph()
        x = g.input("x", ("B", "S"))
        y = (x - x.amax(-1, keepdim=True)).exp()
        z = x.reshape((lm.sym("B") * lm.sym("S"),))[1:] * 2 + 1  # a view with an offset, a symbolic length
        return [y / y.sum(-1, keepdim=True), z], [{"x": rng.standard_normal(s).astype(np.float32)}
                                                   for s in ((2, 3), (4, 7))]

    def dtypes():
        rng = np.random.default_rng(0)
        g = lm.Graph()
        x = g.input("x", (4,))
        c16 = g.constant(np.array([0.5, -1.25, 3.0, 1e-3], np.float16))
        cbf = g.constant(np.array([1.0, 2.5, -0.75, 3.0], np.float32), dtype=lm.bfloat16)
        ci = g.constant(np.array([3, -7, 11, 2**30], np.int32))
        cb = g.constant(np.array([True, False, True, True]))
        c64 = g.constant(np.array([1e-300, 2.0, -0.0, np.pi]), dtype=lm.float64)
        out = [(x.half() * c16).float(), x.bfloat16() + cbf, (ci * 2 + x.int()).float(), cb.where(x, -0.0),
               x.double() + c64, x * g.constant(np.float32(0.25)) + g.constant(-0.0)]
        return out, [{"x": rng.standard_normal(4).astype(np.float32)} for _ in range(2)]

    def conv():
        rng = np.random.default_rng(0)
        lm.manual_seed(0)
        g = lm.Graph()
        img = g.input("img", (2, 3, 8, 8))
        out = nn.Conv2d(3, 4, 3, padding=1)(img).relu().mean((2, 3))
        return [out], [{"img": rng.standard_normal((2, 3, 8, 8)).astype(np.float32)} for _ in range(2)]

    def indexing():
        rng = np.random.default_rng(0)
        g = lm.Graph()
        x, i = g.input("x", (5, 6)), g.input("i", (3, 6), dtype=lm.int32)
        picked = x.gather(0, i)
        added = g.constant(np.zeros((5, 6), np.float32)).scatter_add(0, i, picked * 2)
        return [picked, added], [{"x": rng.standard_normal((5, 6)).astype(np.float32),
                                  "i": rng.integers(0, 5, (3, 6)).astype(np.int32)} for _ in range(2)]

    return {"rolled": rolled, "symbolic": symbolic, "dtypes": dtypes, "conv": conv, "indexing": indexing}


def _run(outputs, runs) -> tuple:
    f = lm.compile(outputs)
    got = [[np.asarray(y) for y in f(**feed)] for feed in runs]
    return got, f.report(show=False)


@pytest.mark.parametrize("name", list(_programs()))
def test_a_loaded_program_computes_the_same(on, name):
    """The program from the entry computes what the compiled one did, and the entry decodes to objects
    that encode to the same bytes (every field, every shared object, every constant came back)."""
    build = _programs()[name]
    fresh, report = _run(*build())
    assert not report.cache and len(_entries(on)) == 1
    loaded, report = _run(*build())
    assert report.cache["hit"]
    for a, b in zip(fresh, loaded):
        for x, y in zip(a, b):
            assert x.dtype == y.dtype and x.shape == y.shape
            np.testing.assert_allclose(x, y, rtol=1e-6, atol=0)
    (entry,) = _entries(on)
    program = cache.describe(*_described(build), search=0, seed=0, budget=None)
    data = DiskCache("compile").read(_name(on, entry))
    assert data is not None and _name(on, entry) == program.name
    back = cache_format.loads(data, program.key)
    assert cache_format.dumps(program.key, back) == data
    if name == "rolled":
        assert back["kg"].bodies() and back["stats"]["loops"]
    if name == "dtypes":
        consts = {b.value.dtype.str for b in back["kg"].buffers if b.value is not None}
        assert {"<f2", "<f4", "<i4", "|b1", "<f8"} <= consts


def _described(build):
    outputs, _ = build()
    g = outputs[0].graph
    return g, [(t.node, t.layout) for t in outputs], []


# the planted pickle --------------------------------------------------------------------------------

STEP = r"""
import json, sys
import numpy as np
import luminal as lm
from luminal import nn, train

lm.manual_seed(0)
layers = [nn.Linear(8, 8) for _ in range(4)]
g = lm.Graph()
x, y = g.input("x", ("B", 8)), g.input("y", ("B",), dtype=lm.int32)
h = x * g.constant(np.linspace(0.5, 1.5, 8).astype(np.float32))
for layer in layers:
    h = layer(h).relu()
loss = train.cross_entropy(h, y)
params = [p for m in layers for p in m.parameters()]
step = train.compile_step(loss, train.AdamW(params, lr=1e-2), backend="cpu")
rng = np.random.default_rng(1)
losses = [float(step(x=rng.standard_normal((5, 8)).astype(np.float32), y=rng.integers(0, 8, 5).astype(np.int32)))
          for _ in range(3)]
print(json.dumps({"losses": losses, "hit": bool(step.report(show=False).cache.get("hit"))}))
"""


def _step(root: Path) -> dict:
    env = {**os.environ, "LUMINAL_CACHE_DIR": str(root), "LUMINAL_CACHE": "1"}
    out = subprocess.run([sys.executable, "-c", STEP], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_planted_pickle_never_runs_in_a_new_process(on):
    """Pickles that run code, written in place of the entries (through the cache's own writer, so the
    file is as valid as one luminal wrote), are read by a new process: nothing runs, the entries are
    misses, the program computes the same, and the recompile rewrites them."""
    cold = _step(on)
    assert not cold["hit"]
    names = [_name(on, p) for p in _entries(on)]
    assert len(names) == 2  # the step and its label guard
    marker = on / "pwned"
    for name in names:
        assert DiskCache("compile").write(name, _payloads(marker)["pickled entry"])
    warm = _step(on)
    assert not marker.exists(), "the planted pickle ran"
    assert not warm["hit"] and warm["losses"] == cold["losses"]
    assert _step(on)["hit"]  # rewritten as valid entries


def test_planted_pickles_are_misses_and_are_rewritten(on):
    """The same in this process, for each framing of the payload."""
    lm.manual_seed(0)
    outputs, runs = _programs()["rolled"]()
    want, _ = _run(outputs, runs)
    (entry,) = _entries(on)
    name = _name(on, entry)
    marker = on / "pwned"
    for framing, payload in _payloads(marker).items():
        assert DiskCache("compile").write(name, payload)
        got, report = _run(*_programs()["rolled"]())
        assert not marker.exists(), framing
        assert not report.cache, framing
        np.testing.assert_allclose(got[0][0], want[0][0], rtol=1e-6)
        assert DiskCache("compile").read(name) != payload  # rewritten
        assert _run(*_programs()["rolled"]())[1].cache["hit"]


def test_no_pickle_is_read(on, monkeypatch):
    """A hit with every unpickling entry point of the process broken: nothing on the load path unpickles."""
    outputs, runs = _programs()["dtypes"]()
    want, _ = _run(outputs, runs)

    def refuse(*args, **kwargs):
        raise AssertionError("the compile cache unpickled")

    for attr in ("load", "loads", "Unpickler"):
        monkeypatch.setattr(pickle, attr, refuse)
    monkeypatch.setattr(np, "load", refuse)
    got, report = _run(*_programs()["dtypes"]())
    assert report.cache["hit"]
    for a, b in zip(want[0], got[0]):
        np.testing.assert_array_equal(a, b)


def test_the_cache_modules_import_no_unpickler():
    """Neither module of the compile cache imports a module that can unpickle."""
    import luminal.compiler.cache as c
    import luminal.compiler.cache_format as f

    for module in (c, f):
        tree = ast.parse(Path(module.__file__).read_text())
        names = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        names |= {(n.module or "").split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        assert not names & {"pickle", "_pickle", "marshal", "shelve", "copyreg", "dill", "cloudpickle"}, module
        assert "allow_pickle" not in Path(module.__file__).read_text()


# damaged and hostile entries ------------------------------------------------------------------------

def test_a_damaged_entry_is_a_miss_computes_the_same_and_is_rewritten(on):
    outputs, runs = _programs()["dtypes"]()
    want, _ = _run(outputs, runs)
    (entry,) = _entries(on)
    good = entry.read_bytes()
    n = len(good)
    flips = [0, 20, n // 3, n // 2, n - 5, n - 1]  # the header line, the JSON, the constants' bytes
    damaged = [good[:k] for k in (0, 10, n // 2, n - 1)] + [
        good[:i] + bytes([good[i] ^ 0x10]) + good[i + 1:] for i in flips] + [good + b"\0"]
    for bad in damaged:
        entry.write_bytes(bad)
        got, report = _run(*_programs()["dtypes"]())
        assert not report.cache  # a miss, not an error
        for a, b in zip(want[0], got[0]):
            np.testing.assert_array_equal(a, b)
        assert entry.read_bytes() != bad
        assert _run(*_programs()["dtypes"]())[1].cache["hit"]


def _doc(data: bytes) -> tuple[dict, bytes]:
    start = len(cache_format.MAGIC) + cache_format.HEADER.size
    _, text_len, _ = cache_format.HEADER.unpack_from(data, len(cache_format.MAGIC))
    return json.loads(data[start:start + text_len]), data[start + text_len:]


def _pack(doc: dict, blob: bytes) -> bytes:
    text = json.dumps(doc).encode()
    return cache_format.MAGIC + cache_format.HEADER.pack(cache_format.FORMAT, len(text), len(blob)) + text + blob


def _row(doc: dict, tag: str) -> int:
    return next(i for i, r in enumerate(doc["values"]) if r[0] == tag)


# Each edit makes a well-formed entry (valid JSON, a header that matches) that this module never writes.
HOSTILE = {
    "an unknown tag": lambda d: d["values"].append(["pickle", "posix", "system"]),
    "a tag of another type": lambda d: d["values"].append([["s"], "x"]),
    "a row ahead of its table": lambda d: d["values"].insert(0, ["t", 0]),
    "a negative row": lambda d: d["exprs"][-1].append(-1),
    "a row past the end": lambda d: d["graph"]["buffers"].append(10**6),
    "an expression ahead of itself": lambda d: d["exprs"].insert(0, [0, 0, 0, 0]),
    "a string where a row is": lambda d: d["graph"]["outputs"].__setitem__(1, "__import__('os')"),
    "an object array": lambda d: d["values"].__setitem__(_row(d, "a"), ["a", "|O", [1], 0, 8]),
    "an array past the blob": lambda d: d["values"][_row(d, "a")].__setitem__(3, 10**9),
    "an array whose length lies": lambda d: d["values"][_row(d, "a")].__setitem__(2, [10**6]),
    "a structured dtype": lambda d: d["values"].__setitem__(_row(d, "a"), ["a", "V8", [1], 0, 8]),
    "an unknown dtype": lambda d: d["values"].__setitem__(_row(d, "D"), ["D", "object"]),
    "an unknown buffer kind": lambda d: d["buffers"][0].__setitem__(3, _row(d, "V")),
    "an unknown atom": lambda d: d["values"].append(["A", "eval", 0]),
    "a kernel of another length": lambda d: d["graph"]["kernels"][0].append(0),
    "statistics that are a list": lambda d: d.__setitem__("stats", [1]),
    "positions that are not ints": lambda d: d.__setitem__("positions", ["0"]),
    "no graph": lambda d: d.pop("graph"),
}


@pytest.mark.parametrize("what", list(HOSTILE))
def test_a_hostile_entry_does_not_decode(on, what):
    """Entries a writer that is not this module could make: a DecodeError (a miss), and at the compile a
    miss that the recompile rewrites."""
    outputs, runs = _programs()["dtypes"]()
    want, _ = _run(outputs, runs)
    (entry,) = _entries(on)
    name = _name(on, entry)
    key = name.split("/")[-1].split(".")[0]
    good = DiskCache("compile").read(name)
    assert cache_format.loads(good, key) is not None
    doc, blob = _doc(good)
    HOSTILE[what](doc)
    bad = _pack(doc, blob)
    with pytest.raises(DecodeError):
        cache_format.loads(bad, key)
    assert DiskCache("compile").write(name, bad)
    got, report = _run(*_programs()["dtypes"]())
    assert not report.cache
    for a, b in zip(want[0], got[0]):
        np.testing.assert_array_equal(a, b)
    assert _run(*_programs()["dtypes"]())[1].cache["hit"]


def test_another_format_or_key_is_none_not_an_error():
    entry = cache_format.dumps("k", _tiny())
    assert cache_format.loads(entry, "k") is not None
    assert cache_format.loads(entry, "other") is None
    older = cache_format.MAGIC + cache_format.HEADER.pack(cache_format.FORMAT - 1, 0, 0)
    assert cache_format.loads(older, "k") is None and cache_format.loads(b"", "k") is None


def _tiny() -> dict:
    g = lm.Graph()
    x = g.input("x", (3,))
    kg, plan, _, _ = compile_graph(g, [((x * 2).node, (x * 2).layout)], [])
    return {"kg": kg, "plan": plan, "stats": {}, "times": {}, "positions": [], "compile_s": 0.0}


def test_every_value_comes_back_exactly():
    """Each kind of value an entry holds comes back of its type and bit for bit: signed zeros, NaN and
    infinities, big ints, bools (not ints), numpy scalars, every symbolic atom, masked views and their
    pads; equal values stay equal and unequal ones (-0.0, 0.0) stay apart."""
    from luminal.core import dtype as dt
    from luminal.core.kernel_graph import Buffer, Expr, Kernel, KernelGraph, MemoryPlan
    from luminal.core.symbolic import Sym, dmax, dmin, floordiv, mod
    from luminal.core.view import View

    B, S = Sym.var("B"), Sym.var("S")
    args = [float("nan"), float("inf"), float("-inf"), -0.0, 0.0, 5e-324, 1.5, 2**70, -(2**40), True, False, 1, 1.0,
            np.float32(0.1), np.int32(-3), np.float16(2.5), np.bool_(True), B * S + 3, floordiv(S + 1, 2),
            mod(S, B), dmax(B, S), dmin(B - 1, S), (B, 4, S * 2)]
    leaves = [Expr("Scalar", (), a, dt.float32) for a in args]
    b = Buffer(7, (B, 4), dt.bfloat16, "state", "w", np.arange(8, dtype=np.float32).reshape(2, 4), offset=S)
    views = [View((B, 4), (4, 1), S, ((1, B), (0, 3)), pad) for pad in (-0.0, 0.0, float("nan"), True, 2)]
    k = Kernel("reduce", (B, 4), [(b, v) for v in views], [(b, e) for e in leaves], (1,), "max", leaves[0],
               dt.float32, [(b, views[0])], ("Max", "Add"))
    kg = KernelGraph([b], [k], [(b, views[1])], [("w", b, views[2])], ("B", "S"))
    entry = {"kg": kg, "plan": MemoryPlan({7: 0}, [[b]], [b], {7: 3}), "stats": {"loops": [{"trips": 2}]},
             "times": {"x": 0.5}, "positions": [3, 1, 2], "compile_s": 0.25}
    back = cache_format.loads(cache_format.dumps("k", entry), "k")
    k2 = back["kg"].kernels[0]
    for a, (_, e) in zip(args, k2.outputs):
        got = e.arg
        assert type(got) is type(a), (a, got)
        if isinstance(a, (float, np.generic)):
            assert np.asarray(got).tobytes() == np.asarray(a).tobytes(), (a, got)
        else:
            assert got == a, (a, got)
    assert k2.prologue is k2.outputs[0][1] and k2.inputs[0][0] is back["kg"].buffers[0] is back["plan"].temps[0]
    for v, (_, w) in zip(views, k2.inputs):
        assert w == v and type(w.pad) is type(v.pad) and w.mask == v.mask and w.offset == v.offset
    assert k2.inputs[0][1] != k2.inputs[1][1]  # the -0.0 pad and the 0.0 pad
    b2 = back["kg"].buffers[0]
    assert (b2.id, b2.shape, b2.dtype, b2.kind, b2.name, b2.offset) == (7, (B, 4), dt.bfloat16, "state", "w", S)
    assert b2.value.dtype == np.float32 and b2.value.flags.writeable and np.array_equal(b2.value, b.value)
    assert (k2.kind, k2.domain, k2.axes, k2.reduce_op, k2.acc_dtype, k2.fused) == \
        ("reduce", (B, 4), (1,), "max", dt.float32, ("Max", "Add"))
    assert back["kg"].updates[0][0] == "w" and back["kg"].dims == ("B", "S")
    assert (back["plan"].slot_of, back["plan"].calls) == ({7: 0}, {7: 3})
    assert (back["stats"], back["times"], back["positions"], back["compile_s"]) == \
        (entry["stats"], entry["times"], [3, 1, 2], 0.25)


def test_what_the_format_cannot_hold_is_not_stored():
    """An object of a type the format does not know is a TypeError when writing (``cache.store`` then
    warns and stores nothing), never stored some other way."""
    from luminal.core import dtype as dt
    from luminal.core.kernel_graph import Buffer, Expr, Kernel, KernelGraph, MemoryPlan
    from luminal.core.view import View

    b = Buffer(0, (2,), dt.float32)
    for odd in (object(), [1, 2], {"a": 1}, np.array([object()]), 1j):
        k = Kernel("elementwise", (2,), [], [(b, Expr("Scalar", (), odd, dt.float32))])
        kg = KernelGraph([b], [k], [(b, View.contiguous((2,)))], [])
        entry = {"kg": kg, "plan": MemoryPlan({}, [], []), "stats": {}, "times": {}, "positions": [], "compile_s": 0.0}
        with pytest.raises(TypeError):
            cache_format.dumps("k", entry)


def test_json_that_is_no_entry_does_not_decode():
    """Text that is no entry's JSON (not JSON, not UTF-8, nested past the parser's recursion, not an
    object) is a DecodeError, and so is a length that is not the header's."""
    for text in (b"{", b"\xff\xfe", b"[" * 200_000 + b"]" * 200_000, b"[1, 2]", b'"key"'):
        data = cache_format.MAGIC + cache_format.HEADER.pack(cache_format.FORMAT, len(text), 0) + text
        with pytest.raises(DecodeError):
            cache_format.loads(data, "k")
        with pytest.raises(DecodeError):
            cache_format.loads(data + b"\0", "k")
