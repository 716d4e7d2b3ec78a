"""The compile cache: the pipeline's result on disk, so that compiling a program a process has compiled
before (the same script run again) skips egglog, and its import, entirely.

A warm start already finds its LLVM objects on disk (``codegen/llvm.py``), but the pipeline before it
(lowering to egglog, the rewrite rounds, extraction, loop rolling, the kernel graph and memory plan)
ran again, egglog with it. ``compile_graph`` asks this module first: on a hit it returns the stored
kernel graph, memory plan and report, and the nodes the program reads, mapped onto this graph's nodes.

**The key** is a sha256 over a canonical, structural description of the program (``describe``):

- the frontend nodes the roots (outputs and updates) reach, numbered by their order of creation among
  themselves (loop detection reads creation order, so two graphs that differ only in it may compile
  differently; nodes the roots do not reach are left out, as are absolute ids). Per node: the op, the
  arg (a name, an axis, a dtype, a number as its exact bits, a symbolic dim as its polynomial, a
  constant's key), the dtype, the shape, and every input as (its number, the View it is read through:
  shape, strides, offset, mask, pad); an Input leaf's kind (input, state or random draw); a constant
  array's dtype, shape and bytes. All but the inputs' numbers are the node's hash-consing signature,
  described once per distinct signature (a deep graph has thousands of nodes, a few hundred
  signatures): hashing a 14,000-node transformer stack takes about 60 ms, the MNIST step's 220 nodes
  about 1 ms;
- the outputs (number and View) and updates (state name, number and View), in order;
- the requirements the graph records on the reached nodes (they do not change what is compiled, but
  are cheap to include);
- ``search``, ``seed`` and ``budget`` (every field);
- what makes the same description compile differently: a digest of luminal's own source (every ``.py``
  and ``.egg`` file of the package, read once per process, so any code change misses), the versions of
  egglog (its installed files' RECORD), numpy and Python, the platform and byte order.

What it leaves out: nothing else reaches the pipeline (``compile_graph``'s arguments are the graph,
the roots and these options; the backend only times a ``search``). Monkeypatching the compiler's
functions or constants is invisible to it: the test suite runs with the compile cache off for that
reason (``tests/conftest.py``).

Anything the encoder does not know (an arg of a new type) makes the program unkeyable: it compiles
without the cache, never under a key that could be another program's.

**The value** is the kernel graph, the memory plan, the report's statistics and the positions of the
nodes the program reads, written as data (``cache_format.py``: JSON and the constants' raw bytes, never
a pickle), so that reading an entry cannot run code: a damaged or hostile one at most fails to decode.

**When it is not used:** ``search > 0`` with a timer (the choice is a timing of the moment), a
result cut short by the time budget (the same: another run may get further), ``LUMINAL_CACHE=0`` or a
``LUMINAL_CACHE`` list without ``compile`` (``core/disk_cache.py``, which also holds the root
directory, the atomic write and the size cap). An entry that cannot be read or decoded, or whose
stored key differs, is a miss and is overwritten by the recompile.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import itertools
import sys
import time
import warnings
from pathlib import Path

import numpy as np

from luminal.compiler import cache_format
from luminal.compiler.report import Report
from luminal.core.disk_cache import DiskCache
from luminal.core.dtype import DType
from luminal.core.errors import user_stacklevel
from luminal.core.float_text import float_text
from luminal.core.source_digest import source_digest
from luminal.core.symbolic import Atom, Sym
from luminal.core.view import View
from luminal.frontend.graph import ConstKey

DISK = DiskCache("compile")


class Unkeyable(Exception):
    """The program holds something the encoder cannot describe completely: compile without the cache."""


# the key ------------------------------------------------------------------------------------------------

class Program:
    """A program as the cache sees it: its ``key`` and its reached nodes in canonical order (``nodes``:
    the position of a node in this list is its number in the key)."""

    __slots__ = ("key", "nodes", "seconds")

    def __init__(self, key: str, nodes: list, seconds: float):
        self.key, self.nodes, self.seconds = key, nodes, seconds

    @property
    def name(self) -> str:
        return f"{self.key[:2]}/{self.key}.entry"


def usable(search: int, timer) -> bool:
    """Whether a compile with these options may read or write the cache at all."""
    return DISK.enabled and not (search and timer is not None)


def describe(graph, outputs, updates, *, search, seed, budget) -> Program | None:
    """The cache key of compiling ``outputs`` and ``updates`` of ``graph``; None when it is unkeyable.

    It reads the graph's hash-consing keys (``Graph.node_keys``: a node's signature number and input
    ids) rather than the nodes: a deep graph has thousands of nodes but a few hundred signatures (op,
    views, arg, dtype, shape), so each signature is described once, when first met in canonical order,
    and a node is its signature's canonical number and its inputs' positions (a few ints)."""
    t0 = time.perf_counter()
    keys = list(graph.node_keys())  # by node id: (signature number, input ids)
    reached = bytearray(len(keys))
    stack = [n.id for n, _ in outputs] + [n.id for _, n, _ in updates]
    while stack:
        i = stack.pop()
        if not reached[i]:
            reached[i] = 1
            stack.extend(keys[i][1])
    ids = list(itertools.compress(range(len(keys)), reached))
    pos = {i: k for k, i in enumerate(ids)}
    h = hashlib.sha256()
    h.update(environment())
    enc = _Encoder()
    kinds = {**{k: "input" for k in graph.inputs}, **{k: "state" for k in graph.states},
             **{k: "random" for k in graph.random}}
    canon: dict = {}  # graph's signature number -> its number here (order of first use)
    try:
        lines = [f"options {enc(search)} {enc(seed)} {_budget(budget, enc)}"]
        for i in ids:
            sig, srcs = keys[i]
            k = canon.get(sig)
            if k is None:
                k = canon[sig] = len(canon)
                lines.append(f"sig {k} " + _signature(graph.nodes[i], enc, kinds, graph.constants, h))
            lines.append(f"{k}:" + ",".join([str(pos[j]) for j in srcs]))
        lines += [f"out {pos[n.id]} {enc(v)}" for n, v in outputs]
        lines += [f"update {enc(name)} {pos[n.id]} {enc(v)}" for name, n, v in updates]
        lines += sorted(f"requires {pos[nid]} {enc(d)} {enc(e)} {enc(need)}"
                        for (nid, d, e), need in graph.requirements.items() if nid in pos)
    except Unkeyable:
        return None
    h.update("\n".join(lines).encode())
    return Program(h.hexdigest(), [graph.nodes[i] for i in ids], time.perf_counter() - t0)


def _signature(n, enc, kinds: dict, constants: dict, h) -> str:
    """What every node of ``n``'s signature shares: op, arg, dtype, shape, the views of its inputs; a
    leaf's kind; a constant array's bytes (into ``h``, once per constant)."""
    text = f"{n.op} {enc(n.arg)} {n.dtype.name} {enc(n.shape)} [{' '.join(enc(v) for _, v in n.srcs)}]"
    if n.op == "Input":
        text += " " + kinds.get(n.arg, "?")
    elif n.op == "Constant" and n.arg in constants:
        arr = np.ascontiguousarray(constants[n.arg])
        h.update(f"const {arr.dtype.str} {arr.shape} {arr.nbytes}\n".encode())
        h.update(arr.tobytes())
    return text


def _budget(budget, enc) -> str:
    if budget is None:
        return "N"
    if not dataclasses.is_dataclass(budget):
        raise Unkeyable(type(budget).__name__)
    return type(budget).__name__ + enc(tuple((f.name, getattr(budget, f.name)) for f in dataclasses.fields(budget)))


class _Encoder:
    """A complete, deterministic text for each value a node holds; tuples, views and Syms are memoised by
    id (a graph shares a few hundred of them among thousands of nodes; the graph keeps them alive)."""

    def __init__(self):
        self.memo: dict = {}

    def __call__(self, x) -> str:
        t = type(x)
        if x is None:
            return "N"
        if t is bool:
            return "T" if x else "F"
        if t is int:
            return f"i{x}"
        if t is float:
            return f"f{x.hex()}" if x == x else f"f{float_text(x)}"  # (hex() says 'nan' for every NaN)
        if t is str:
            return repr(x)
        got = self.memo.get(id(x))
        if got is not None:
            return got[1]
        if t is tuple or t is list:
            s = "(" + ",".join(map(self, x)) + ")"
        elif t is View:
            s = "V" + self((x.shape, x.strides, x.offset, x.mask, x.pad))
        elif t is Sym:
            s = "Y" + self(tuple((m, c) for m, c in x.terms))
        elif t is Atom:
            s = "A" + x.kind + self(tuple(x.args))
        elif t is DType:
            s = "D" + x.name
        elif t is ConstKey:
            s = "K" + self(x.digest) + self(x.scalar)
        elif isinstance(x, np.generic):
            s = f"n{x.dtype.str}:{x.tobytes().hex()}"
        else:
            raise Unkeyable(t.__name__)
        self.memo[id(x)] = (x, s)
        return s


@functools.lru_cache(maxsize=1)
def environment() -> bytes:
    """What besides the program decides the compile: luminal's source (``core/source_digest.py``), egglog,
    numpy, Python (once per process)."""
    h = hashlib.sha256(f"luminal-compile-cache {cache_format.FORMAT}\n".encode())
    h.update(source_digest())
    h.update(f"egglog {_egglog_version()}\n".encode())
    h.update(f"numpy {np.__version__}\npython {sys.version} {sys.implementation.cache_tag}\n".encode())
    h.update(f"platform {sys.platform} {sys.byteorder}\n".encode())
    return h.digest()


def _egglog_version() -> str:
    """egglog's installed files as its RECORD lists them (their hashes: a rebuilt egglog of the same
    version differs), found without importing egglog (which is what a hit saves); its version from
    the package metadata when there is no RECORD."""
    import importlib.util

    spec = importlib.util.find_spec("egglog")
    if spec is None or spec.origin is None:
        return "absent"
    site = Path(spec.origin).resolve().parent.parent
    for info in sorted(site.glob("egglog-*.dist-info")):
        try:
            return info.name + "\n" + (info / "RECORD").read_text()
        except OSError:
            continue
    from importlib.metadata import version

    return version("egglog")


# the value --------------------------------------------------------------------------------------------

class Reached:
    """The nodes a program reads, for ``Compiled`` on a hit (what ``rolling.Loops`` answers on a miss):
    ``nodes()`` by id, ``reads(node)``."""

    def __init__(self, nodes: list):
        self._nodes = nodes
        self._ids = {n.id for n in nodes}

    def nodes(self) -> list:
        return list(self._nodes)

    def reads(self, node) -> bool:
        return node.id in self._ids


def store(program: Program, kg, plan, report: Report, found, compile_s: float) -> bool:
    """Write the entry of ``program``. Not written (False): a result the time budget cut short, or
    nodes read that the key does not number."""
    if report.budget_hit and report.budget_hit.startswith("time budget"):
        return False
    pos = {n.id: i for i, n in enumerate(program.nodes)}
    try:
        positions = [pos[n.id] for n in found.nodes()]
    except KeyError:
        return False
    stats = {"nodes_before": report.nodes_before, "nodes_after": report.nodes_after, "egraph": report.egraph,
             "rules": report.rules, "loops": report.loops, "budget_hit": report.budget_hit}
    entry = {"kg": kg, "plan": plan, "stats": stats, "times": dict(report.times), "positions": positions,
             "compile_s": compile_s}
    try:
        data = cache_format.dumps(program.key, entry)
    except Exception as e:  # noqa: BLE001 - a result the format cannot hold is a bug here, not the user's
        warnings.warn(f"compile cache: the result was not stored ({type(e).__name__}: {e})", RuntimeWarning,
                      stacklevel=user_stacklevel())
        return False
    return DISK.write(program.name, data)


def load(program: Program):
    """``(kg, plan, report, reached)`` from the entry of ``program``, or None (absent, unreadable,
    another format or another key)."""
    t0 = time.perf_counter()
    data = DISK.read(program.name)
    if data is None:
        return None
    try:
        entry = cache_format.loads(data, program.key)
        if entry is None:
            return None
        positions = entry["positions"]
        if positions and not 0 <= min(positions) <= max(positions) < len(program.nodes):
            return None
        nodes = [program.nodes[i] for i in positions]
        kg, plan = entry["kg"], entry["plan"]
        times = {"cache: key": program.seconds, "cache: load": time.perf_counter() - t0}
        report = Report.from_stats(entry["stats"], kg, plan, times)
    except Exception:  # noqa: BLE001 - a damaged or foreign entry is a miss; the recompile overwrites it
        return None
    report.cache = {"hit": True, "key": program.key, "compile_s": entry["compile_s"],
                    "compile_times": entry["times"]}
    return kg, plan, report, Reached(nodes)


__all__ = ["Program", "Reached", "Unkeyable", "describe", "environment", "load", "store", "usable"]
