"""The compile cache (``compiler/cache.py``) and the disk caches' shared mechanism (``core/disk_cache.py``):
a second compile of a program, in a new process, comes from disk without running (or importing) egglog
and computes the same; any change to the program misses; a torn entry is recompiled and replaced;
``LUMINAL_CACHE=0`` writes nothing; the size cap evicts the least recently used entries."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import luminal as lm
from luminal import nn
from luminal.compiler import cache, cache_format
from luminal.compiler.memory import plan_memory
from luminal.compiler.pipeline import compile_graph
from luminal.core import disk_cache
from luminal.core import dtype as dt
from luminal.core.kernel_graph import Buffer, Expr, Kernel, KernelGraph
from luminal.core.symbolic import Sym
from luminal.core.view import View
from luminal.frontend.state import State

# A train step: rolled layers (a loop body and its calls), a symbolic batch, a constant, States written
# back, a guard (cross-entropy's label check: a second program). Prints what the test compares.
SCRIPT = r"""
import json, sys
import numpy as np
import luminal as lm
from luminal import nn, train

lm.manual_seed(0)
layers = [nn.Linear(16, 16) for _ in range(6)]
head = nn.Linear(16, 4)
g = lm.Graph()
x, y = g.input("x", ("B", 16)), g.input("y", ("B",), dtype=lm.int32)
h = x * g.constant(np.linspace(0.5, 1.5, 16).astype(np.float32))
for layer in layers:
    h = layer(h).relu()
loss = train.cross_entropy(head(h), y)
params = [p for m in layers + [head] for p in m.parameters()]
step = train.compile_step(loss, train.AdamW(params, lr=1e-2), backend="cpu")
rng = np.random.default_rng(1)
xb, yb = rng.standard_normal((5, 16)).astype(np.float32), rng.integers(0, 4, 5).astype(np.int32)
losses = [float(step(x=xb, y=yb)) for _ in range(3)]
x7 = rng.standard_normal((7, 16)).astype(np.float32)
losses.append(float(step(x=x7, y=rng.integers(0, 4, 7).astype(np.int32))))  # another binding of B
r = step.report(show=False)
print(json.dumps({"losses": losses, "hit": bool(r.cache.get("hit")), "egglog": "egglog.bindings" in sys.modules,
                  "text": str(r), "times": sorted(r.times), "loops": r.loops,
                  "weights": [p.data.tolist() for p in params]}))
"""


def _env(tmp_path, **extra):
    env = {**os.environ, "LUMINAL_CACHE_DIR": str(tmp_path), "LUMINAL_CACHE": "1", **extra}
    return env


def _run(tmp_path, **extra) -> dict:
    out = subprocess.run([sys.executable, "-c", SCRIPT], env=_env(tmp_path, **extra), capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def _entries(tmp_path, kind="compile"):
    return sorted(p for p in (tmp_path / kind).rglob("*") if p.is_file())


@pytest.fixture
def on(tmp_path, monkeypatch):
    """The compile cache on, in ``tmp_path``."""
    monkeypatch.setenv("LUMINAL_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("LUMINAL_CACHE", "1")
    return tmp_path


def test_a_new_process_loads_the_program_without_egglog(tmp_path):
    cold = _run(tmp_path)
    assert not cold["hit"] and cold["egglog"]
    assert "cache: key" in cold["times"] and "cache: store" in cold["times"]
    assert len(_entries(tmp_path)) == 2  # the step and its guard
    warm = _run(tmp_path)
    assert warm["hit"] and not warm["egglog"], warm["text"]
    assert warm["times"] == ["cache: key", "cache: load", "code generation"]  # (the first step's, its own stage)
    assert "from the compile cache" in warm["text"] and "egglog did not run" in warm["text"]
    assert warm["loops"] == cold["loops"] and warm["loops"]  # the stored statistics: a rolled loop
    assert warm["losses"] == cold["losses"]  # the same program: the same bits
    assert warm["weights"] == cold["weights"]
    assert len(_entries(tmp_path)) == 2


def _program(shape=("B", 8), const=0.5, op="relu", dtype=lm.float32, extra_output=False, update=False,
             spare=0):
    """A small program; each argument changes one thing about it. ``spare`` nodes the outputs do not read
    are made first (other node ids, the same program)."""
    lm.manual_seed(0)
    g = lm.Graph()
    for i in range(spare):
        g.input(f"unused{i}", (3,)).exp()
    x = g.input("x", shape, dtype=dtype)
    h = nn.Linear(8, 8)(x.float()) * g.constant(np.full((8,), const, np.float32))
    y = getattr(h, op)()
    outs = [y.sum(-1)] + ([y.amax(-1)] if extra_output else [])
    updates = []
    if update:
        st = g.state(State(np.zeros((8,), np.float32), name="acc"))
        new = st + y.sum(0)
        updates = [(st.node.arg, new.node, new.layout)]
    return g, [(t.node, t.layout) for t in outs], updates


def _key(g, outs, ups, **kw) -> str:
    opts = {"search": 0, "seed": 0, "budget": None, **kw}
    return cache.describe(g, outs, ups, **opts).key


def test_a_changed_program_has_another_key():
    base = _key(*_program())
    assert _key(*_program()) == base  # a new graph of the same program: the same key
    assert _key(*_program(spare=3)) == base  # unread nodes and other ids do not matter
    changed = {"shape": _program(shape=(4, 8)), "symbolic": _program(shape=("N", 8)),
               "constant": _program(const=0.25), "op": _program(op="sigmoid"), "dtype": _program(dtype=lm.float16),
               "outputs": _program(extra_output=True), "update": _program(update=True)}
    keys = {name: _key(*p) for name, p in changed.items()}
    keys["seed"] = _key(*_program(), seed=1)
    keys["search"] = _key(*_program(), search=2)
    assert base not in keys.values() and len(set(keys.values())) == len(keys), keys


def test_a_changed_program_misses_and_the_same_one_hits(on):
    g, outs, ups = _program()
    kg, _, report, found = compile_graph(g, outs, ups)
    assert not report.cache and len(_entries(on)) == 1
    g2, outs2, ups2 = _program()
    kg2, _, report2, found2 = compile_graph(g2, outs2, ups2)
    assert report2.cache["hit"] and [n.id for n in found2.nodes()] == [n.id for n in found.nodes()]
    assert all(found2.reads(n) for n in found2.nodes())
    assert [k.kind for k in kg2.kernels] == [k.kind for k in kg.kernels]
    g3, outs3, ups3 = _program(const=0.75)
    assert not compile_graph(g3, outs3, ups3)[2].cache and len(_entries(on)) == 2


def test_the_reads_map_onto_this_graphs_nodes(on):
    _, _, report, fresh = compile_graph(*_program())
    assert not report.cache
    g, outs, ups = _program(spare=4)  # the same program at other node ids
    _, _, report, found = compile_graph(g, outs, ups)
    assert report.cache["hit"] and found.nodes()[0].id > fresh.nodes()[0].id
    assert all(n is g.nodes[n.id] and found.reads(n) for n in found.nodes())
    assert [(n.op, n.arg) for n in found.nodes()] == [(n.op, n.arg) for n in fresh.nodes()]
    assert not any(found.reads(g.inputs[f"unused{i}"]) for i in range(4))
    f = lm.compile(_outputs((g, outs, ups)))  # what ``Compiled`` asks of it: the inputs it reads
    assert f.input_names == ["x"] and f.report(show=False).cache["hit"]


def _outputs(program):
    g, outs, _ = program
    return [g.tensor(n, v) for n, v in outs]


def test_a_torn_entry_is_recompiled_and_replaced(on):
    g, outs, ups = _program()
    compile_graph(g, outs, ups)
    (entry,) = _entries(on)
    good = entry.read_bytes()
    for torn in (good[: len(good) // 2], b"", b"not an entry", good[:20] + b"\0" * (len(good) - 20)):
        entry.write_bytes(torn)
        _, _, report, _ = compile_graph(*_program())
        assert not report.cache  # a miss, not an error
        assert entry.read_bytes() != torn  # replaced by the recompile
        assert compile_graph(*_program())[2].cache["hit"]


def test_an_entry_of_another_key_is_a_miss(on):
    g, outs, ups = _program()
    compile_graph(g, outs, ups)
    (entry,) = _entries(on)
    other = cache.describe(*_program(const=2.0), search=0, seed=0, budget=None)
    target = on / "compile" / other.name
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(entry.read_bytes())  # a file under the wrong name: its stored key tells
    assert not compile_graph(*_program(const=2.0))[2].cache


def test_off_writes_nothing(tmp_path, monkeypatch):
    from luminal.codegen import llvm

    monkeypatch.setenv("LUMINAL_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("LUMINAL_CACHE", "0")
    f = lm.compile(_outputs(_program()))
    f(x=np.ones((2, 8), np.float32))
    assert not f.report(show=False).cache and not list(tmp_path.rglob("*"))
    monkeypatch.setenv("LUMINAL_CACHE", "llvm")  # a list of the kinds that are on
    llvm.forget()  # no module from this process's memory either
    lm.compile(_outputs(_program()))(x=np.ones((2, 8), np.float32))
    disk_cache.flush()  # (LLVM objects are written behind the compile)
    assert _entries(tmp_path, "llvm") and not (tmp_path / "compile").exists()


def test_a_timed_search_is_not_cached(on):
    g, outs, ups = _program()
    compile_graph(g, outs, ups, search=2, timer=lambda kg: float(len(kg.kernels)))
    assert not (on / "compile").exists()
    compile_graph(g, outs, ups, search=2)  # no timer: the choice is the cost model's, reproducible
    assert len(_entries(on)) == 1


def test_time_budget_results_are_not_stored(on):
    from luminal.compiler.egraph import Budget

    g, outs, ups = _program()
    _, _, report, _ = compile_graph(g, outs, ups, budget=Budget(seconds=0.0, round_iterations=1))
    assert report.budget_hit and report.budget_hit.startswith("time budget")
    assert not (on / "compile").exists()


def test_a_result_that_cannot_be_stored_warns_at_the_users_line(on, monkeypatch):
    """Before: the warning named a line of the compiler (``stacklevel=2``: cache.store's caller)."""
    def refuse(key, entry):
        raise ValueError("no encoding")

    monkeypatch.setattr(cache_format, "dumps", refuse)
    with pytest.warns(RuntimeWarning, match=r"not stored \(ValueError: no encoding\)") as caught:
        line = sys._getframe().f_lineno + 1
        lm.compile(_outputs(_program()))
    assert [(w.filename, w.lineno) for w in caught] == [(__file__, line)]
    assert not (on / "compile").exists()


def test_unknown_arg_types_are_not_keyed():
    enc = cache._Encoder()
    with pytest.raises(cache.Unkeyable):
        enc(object())
    assert enc((1, 1.0, True, "1", None)) == "(i1,f0x1.0000000000000p+0,T,'1',N)"
    assert enc(-0.0) != enc(0.0) and enc(np.float32(1)) != enc(np.float64(1)) != enc(1.0)


def _entry(kg) -> dict:
    """An entry of the compile cache around ``kg`` (``cache.store``'s fields)."""
    return {"kg": kg, "plan": plan_memory(kg), "stats": {}, "times": {}, "positions": [], "compile_s": 0.0}


def test_deep_expressions_round_trip_without_recursion():
    """A fused region may be thousands of operations deep: past Python's recursion limit, so the entry
    holds expressions as a table, children first."""
    e = Expr("Load", (), 0, dt.float32)
    for i in range(5000):
        e = Expr("Add", (e, Expr("Scalar", (), Sym.var("S") + i, dt.float32)), None, dt.float32)
    assert 5000 > sys.getrecursionlimit()
    b = Buffer(0, (Sym.var("S"),), dt.float32)
    kg = KernelGraph([b], [Kernel("elementwise", (4,), [], [(b, e)])], [(b, View.contiguous(b.shape))], [])
    data = cache_format.dumps("k", _entry(kg))
    back = cache_format.loads(data, "k")["kg"]
    x, depth = back.kernels[0].outputs[0][1], 0
    while x.op == "Add":
        assert x.args[1].arg == Sym.var("S") + (4999 - depth)
        x, depth = x.args[0], depth + 1
    assert depth == 5000 and back.kernels[0].outputs[0][0] is back.buffers[0] is back.outputs[0][0]
    assert cache_format.loads(data, "other key") is None


def test_a_loaded_sym_hashes_as_this_process_makes_it():
    """A Sym caches its hash, and string hashes differ between processes: the entry holds its terms, and
    loading rebuilds the hash."""
    s = Sym.var("B") * 2 + 1
    object.__setattr__(s, "_hash", 12345)  # as another process would have made it
    b = Buffer(0, (s,), dt.float32, "input", "x")
    kg = KernelGraph([b], [], [(b, View.contiguous(b.shape))], [], ("B",))
    (back,) = cache_format.loads(cache_format.dumps("k", _entry(kg)), "k")["kg"].buffers[0].shape
    assert back == s and hash(back) == hash(Sym.var("B") * 2 + 1) and {back: 1}[Sym.var("B") * 2 + 1] == 1


def test_eviction_keeps_a_kind_under_its_cap(tmp_path, monkeypatch):
    monkeypatch.setenv("LUMINAL_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("LUMINAL_CACHE", "1")
    monkeypatch.setenv("LUMINAL_CACHE_MAX_MB", "0.015625")  # 16 KiB: 16 entries of 1000 bytes
    monkeypatch.setattr(disk_cache, "_sizes", {})
    d = disk_cache.DiskCache("compile")
    stale = tmp_path / "compile" / (disk_cache.TMP_PREFIX + "dead")
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"x" * 100)
    os.utime(stale, (0, 0))  # a writer that died long ago
    for i in range(40):
        assert d.write(f"{i % 3}/{i:02}.pkl", bytes(1000))
        os.utime(d.path(f"{i % 3}/{i:02}.pkl"), (1000 + i, 1000 + i))  # written in order
        if i == 5:
            keep = i
        if i > 5 and i % 4 == 0:
            assert d.read(f"{keep % 3}/{keep:02}.pkl") is not None  # used: not the least recently
            os.utime(d.path(f"{keep % 3}/{keep:02}.pkl"), (1000 + i, 1000 + i))
        total = sum(p.stat().st_size for p in (tmp_path / "compile").rglob("*") if p.is_file())
        assert total <= disk_cache.max_bytes() == 16384
    names = {p.name for p in _entries(tmp_path)}
    assert "39.pkl" in names and "05.pkl" in names and "06.pkl" not in names and not stale.exists()
    per = len(disk_cache.header("0/00.pkl", bytes(1000))) + 1000  # a file: the entry's header and payload
    assert int(16384 * disk_cache.KEEP) // per <= len(names) <= 16384 // per  # down to KEEP of the cap, not emptied


def test_disk_caches_share_one_root(tmp_path, monkeypatch):
    from luminal.backends.cuda import nvrtc
    from luminal.codegen import llvm

    monkeypatch.setenv("LUMINAL_CACHE_DIR", str(tmp_path))
    assert llvm.cache_dir() == str(tmp_path / "llvm") and nvrtc.cache_dir() == tmp_path / "cuda"
    assert cache.DISK.directory == tmp_path / "compile"
    monkeypatch.delenv("LUMINAL_CACHE_DIR")
    assert disk_cache.root() == Path.home() / ".cache" / "luminal"
