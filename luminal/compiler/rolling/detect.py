"""Loop detection: a model's repeated blocks as windows of a periodic sequence, found with array passes.

The same code builds every block of a stack (its layers, and autograd each layer's backward), one
block after another, so in creation order the nodes the blocks compute repeat with a period: one
block's node count. Detection looks for that period in per-node columns (labels, inputs, types:
``_columns``) with numpy. The columns cost one pass in Python over the graph's hash-consing keys
(``Graph.node_keys``, made as the graph was built), a dict lookup per node; everything after is array
passes, so detection costs next to nothing as depth grows.

Which nodes take part (``seq``): the live ones that are computed (not leaves) and vary with the inputs.
A constant of the program (a causal mask from an Arange) is built by the first block alone (hash-consing
hands the same node to the others), so it would break the period; trips read it as a shared input.

A **loop** is a body repeated ``trips`` times: ``trips`` windows of ``period`` consecutive seq
positions; trip t is
``[start + t*period, start + (t+1)*period)``. It is valid when every position x of every trip but the
last agrees with x + period: the same label (op, arg, dtype, shape, input views), the same input types,
and each input read from inside its own trip at the same offset back in both (or from outside in
both). Windows in creation order are then proper loop iterations: a trip reads only earlier nodes (so
never a later trip), and whatever is computed from a trip outside it comes after the whole trip (so a
trip is convex and runs as one step).

Search, repeated while a loop pays (``MIN_BODY``, ``MIN_SAVED``), best first by nodes saved:
1. candidate periods: the gaps between consecutive free nodes of a class (same label and input types),
   most frequent first, and those dividing a chosen one (a common multiple of several regions' periods
   can outrank each of them);
2. for a period, positions that agree with the one a period later: runs of them are periodic regions;
3. the **phase** (where in a region trips start): the one cutting fewest values across trip boundaries
   (between layers the residual stream alone crosses), giving up at most one trip for it;
4. the input check above, pair of trips by pair: a pair that fails splits the loop.

Blocks that differ in the middle (a stack's first layer reading the input its own way, the last
layer's backward without an input gradient) end a region there: the odd part stays outside the loops.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass
from operator import itemgetter

import numpy as np

MIN_SAVED = 32  # nodes a loop must take off the e-graph (period x (trips - 1)) to pay for a second run
MIN_BODY = 4  # smaller bodies cut their nodes off from every neighbour the e-graph could fuse them with
FAR = 1 << 40  # the distance back to an input outside ``seq`` (a leaf, a constant)
PERIODS = 4  # candidate periods tiled per round ...
GAPS = 32  # ... out of this many frequent gaps
NEXT = 3  # gaps from a position to each of the next this many of its class
PHASES = 3  # candidate phases tiled per periodic region
LIVE_PASSES = 8  # array passes of liveness before a sweep in Python (``_live``)


@dataclass(frozen=True)
class Span:
    """Where a body's trips lie: trip t is the ``length`` seq positions from ``start + t * period``
    (length <= period)."""

    start: int
    period: int
    length: int
    trips: int

    @property
    def saved(self) -> int:
        return self.length * (self.trips - 1)

    def trips_at(self):
        """Each trip's [first, past-the-last) seq positions."""
        return [(self.start + t * self.period, self.start + t * self.period + self.length) for t in range(self.trips)]


def pays(length: int, trips: int) -> bool:
    return length >= MIN_BODY and length * (trips - 1) >= MIN_SAVED


class Loops:
    """The live nodes of ``roots`` (``live``: per node id; ``size`` of them) and the bodies found among
    them (``spans``). Arrays per node id: ``live``, ``computed`` (not a leaf), ``loop_of``.

    Arrays over seq positions: ``seq`` (node ids), ``src`` (ids of the inputs, -1 past a node's arity),
    ``dist`` (how many seq positions back each input is; ``FAR`` outside seq). ``seconds``: the time
    detection took (the compile report counts it as rolling's)."""

    def __init__(self, graph, roots):
        t0 = time.perf_counter()
        cols = _columns(graph)
        n = len(cols.srcs)
        arity, flat = cols.arity, cols.flat
        reader = np.repeat(np.arange(n), arity)  # the id reading each entry of ``flat``
        live = _live(reader, flat, cols.srcs, roots)
        first = np.cumsum(arity) - arity  # where each node's inputs start in ``flat``
        self.live, self.size, self._graph = live, int(np.count_nonzero(live)), graph
        self.computed = arity > 0
        varies = _varies(reader, flat, cols.srcs, cols.is_input)
        self.seq = seq = np.flatnonzero(live & (arity > 0) & varies)
        m, k = len(seq), max(1, int(arity.max(initial=0)))
        # arrays indexed by a node id get a -1 appended, so that an absent input (-1) reads -1
        slot = np.arange(k)
        entry = np.where(slot < arity[seq][:, None], first[seq][:, None] + slot, len(flat))
        self.src = np.append(flat, -1)[entry]
        at = np.full(n + 1, -1, np.int64)  # seq position of each id
        at[seq] = np.arange(m)
        pos = at[self.src]
        self.dist = np.where(pos >= 0, np.arange(m)[:, None] - pos, FAR)
        types = cols.type
        in_type = np.append(types, -1)[self.src]
        # class: label and input types (what two copies of a node share, bar where their inputs are)
        self.cls = cols.label[seq]
        for j in range(k):
            self.cls = _pair(self.cls, in_type[:, j] + 1, int(types.max(initial=0)) + 2)
        self.spans = self._search()
        self._owners(n, live, reader, flat, roots)
        self.seconds = time.perf_counter() - t0

    # search ---------------------------------------------------------------------------------------
    def _search(self) -> list[Span]:
        free = np.ones(len(self.seq), bool)
        by_class = np.argsort(self.cls, kind="stable")  # positions by class, then position
        found = []
        while True:
            best, most = [], 0
            masked = np.where(free, self.cls, -1 - np.arange(len(free)))  # taken positions agree with none
            for period in _periods(masked, by_class, free):
                for tiling in self._tilings(period, masked, most):
                    if sum(w.saved for w in tiling) <= most:
                        continue  # checking the inputs (``_split``) only ever saves less
                    tiling = [v for w in tiling for v in self._split(w)]
                    saved = sum(w.saved for w in tiling)
                    if saved > most:
                        best, most = tiling, saved
            if not best:
                return sorted(found, key=lambda w: w.start)
            for w in best:
                for a, b in w.trips_at():
                    free[a:b] = False
            found += best

    def _tilings(self, period: int, masked, floor: int):
        """For each periodic region of this period among the free positions that could save more than
        ``floor`` nodes: its loops (``_tile``). ``masked``: the classes, a unique negative value at
        each position already taken."""
        m, p = len(masked), period
        if m <= p:
            return
        agree = masked[:-p] == masked[p:]
        edge = np.diff(agree.astype(np.int8), prepend=0, append=0)
        starts, ends = np.flatnonzero(edge == 1), np.flatnonzero(edge == -1)
        long = ends - starts >= max(MIN_BODY, MIN_SAVED, floor + 1)  # a run of r agreements saves at most r
        for a, b in zip(starts[long].tolist(), ends[long].tolist()):
            for start in self._phases(a, b + p, p):
                yield self._tile(a, b + p, start, p)

    def _tile(self, lo: int, hi: int, start: int, p: int) -> list[Span]:
        """Loops covering the periodic region [lo, hi) with trips from ``start``: T whole trips, a
        *head* [lo, start) (the last offsets of a trip before them) and a *tail* (the first offsets of
        a trip after them). Splitting the period where the head and tail begin, a piece covering them
        has one or two trips more (the last layer's backward, which lacks its input gradient, is such
        a tail). Each split is kept when it saves more nodes (a piece that does not pay saves none).
        The pieces' inputs are not checked yet (``_split``)."""
        whole = (hi - start) // p
        head, tail = start - lo, hi - start - whole * p
        best, most = [], -1
        for h in {0, head}:
            for r in {0, tail}:
                cuts = sorted({0, p, r, p - h})
                pieces = []
                for o0, o1 in zip(cuts, cuts[1:]):
                    first = -1 if h and o0 >= p - h else 0
                    last = whole if o1 <= r else whole - 1
                    if pays(o1 - o0, last - first + 1):
                        pieces.append(Span(start + first * p + o0, p, o1 - o0, last - first + 1))
                saved = sum(w.saved for w in pieces)
                if saved > most:
                    best, most = pieces, saved
        return best

    def _phases(self, lo: int, hi: int, p: int) -> list[int]:
        """Where trips may start in the periodic region [lo, hi), best first (``PHASES`` of them), among
        the phases leaving a whole trip: fewest positions that split a pair of trips (see ``_split``; a
        split in the head or tail costs less, so the first few are all tiled), then fewest values cut
        across trip boundaries, then most whole trips, then the earliest.

        Both counts, for every phase at once: a value at y whose furthest reader within a period is
        y + r crosses a boundary iff a trip starts in (y, y + r]; a position x whose input is at
        distances d0 != d1 in it and a period later splits its pair unless a trip starts in
        (x - min(d0, d1), x]."""
        d = self.dist[lo:hi]
        x = np.arange(lo, hi)[:, None]
        inside = (d < p) & (x - d >= lo)
        reach = np.zeros(hi - lo, np.int64)
        np.maximum.at(reach, (x - d)[inside] - lo, d[inside])
        y = np.flatnonzero(reach)
        cut = _cyclic_count(y + lo, reach[y], p)
        d0, d1 = d[:-p], d[p:]
        need = np.where(d0 != d1, np.minimum(d0, d1), FAR).min(1)
        y = np.flatnonzero(need < p)
        splits = len(y) - _cyclic_count(y + lo - need[y], need[y], p)
        start = lo + (np.arange(p) - lo) % p
        trips = (hi - start) // p
        order = np.lexsort((start, -trips, cut, splits))
        return start[order[trips[order] >= 1][:PHASES]].tolist()

    def _split(self, w: Span):
        """``w`` split where a pair of consecutive trips' inputs do not agree: at offset o, an input at
        a different distance in the two trips must be outside both (both distances > o)."""
        p, n = w.period, w.length
        x = (w.start + np.arange(w.trips - 1)[:, None] * p + np.arange(n)).ravel()
        offset = np.tile(np.arange(n), w.trips - 1)
        bad = np.zeros(len(x), bool)
        for j in range(self.dist.shape[1]):
            d0, d1 = self.dist[x, j], self.dist[x + p, j]
            bad |= (d0 != d1) & (offset >= np.minimum(d0, d1))
        t0 = 0
        for t in np.unique(np.flatnonzero(bad) // n).tolist() + [w.trips - 1]:
            if pays(n, t - t0 + 1):
                yield Span(w.start + t0 * p, p, n, t - t0 + 1)
            t0 = t + 1

    # ownership ------------------------------------------------------------------------------------
    def _owners(self, n, live, reader, flat, roots) -> None:
        """Per node id, its loop (-1: none; ``loop_of``); per loop, the offsets read outside their own
        trip (``outputs``)."""
        loop = np.full(n, -1, np.int64)
        offset = np.zeros(n, np.int64)
        trip = np.zeros(n, np.int64)
        for k, w in enumerate(self.spans):
            ids = self.seq[w.start + np.arange(w.trips)[:, None] * w.period + np.arange(w.length)]  # (trips, length)
            loop[ids], offset[ids], trip[ids] = k, np.arange(w.length), np.arange(w.trips)[:, None]
        keep = live[reader] & (loop[flat] >= 0)
        reader, read = reader[keep], flat[keep]
        out = (loop[reader] != loop[read]) | (trip[reader] != trip[read])
        ids = np.concatenate([read[out], [r.id for r in roots]]).astype(np.int64)
        ids = ids[loop[ids] >= 0]
        width = max((w.length for w in self.spans), default=1)
        pairs = np.unique(loop[ids] * width + offset[ids])  # (loop, offset) read outside their trip
        self.outputs = [[] for _ in self.spans]
        for k, o in zip((pairs // width).tolist(), (pairs % width).tolist()):
            self.outputs[k].append(o)
        self.loop_of = loop
        self._in_loop = (loop >= 0).tolist()

    def nodes(self) -> list:
        """The live nodes, by id."""
        return list(itertools.compress(self._graph.nodes, self.live))

    def reads(self, node) -> bool:
        """Whether the roots read ``node``."""
        return node.id < len(self.live) and bool(self.live[node.id])

    def in_loop(self, node_id: int) -> bool:
        """Whether a node belongs to a loop's trip (synthetic leaves, with negative ids, do not)."""
        return 0 <= node_id < len(self._in_loop) and self._in_loop[node_id]

    def trip_ids(self, k: int, offsets) -> np.ndarray:
        """The node ids at ``offsets`` of loop ``k``'s body, per trip: shape (trips, len(offsets))."""
        w = self.spans[k]
        return self.seq[w.start + np.arange(w.trips)[:, None] * w.period + np.asarray(offsets, np.int64)]

    def body(self, k: int):
        """Loop ``k`` as its template sees it, per offset of the body (lists, for Python loops):
        ``(ids, inside, across)``. ``ids[o]``: trip 0's node; ``inside[o][j]``: the offset input slot
        ``j`` reads inside its own trip (the same in every trip), else None; ``across[o][j]``: the
        node ids slot ``j`` reads, one per trip, as an array (slots past the arity: -1)."""
        w = self.spans[k]
        lo = w.start
        ids = self.seq[lo:lo + w.length].tolist()
        off = np.arange(w.length)[:, None]
        d = self.dist[lo:lo + w.length]
        inside = np.where(d <= off, off - d, -1).tolist()
        inside = [[q if q >= 0 else None for q in row] for row in inside]
        at = lo + np.arange(w.trips)[:, None] * w.period + np.arange(w.length)  # (trips, length)
        across = self.src[at].transpose(1, 2, 0)  # (length, slots, trips)
        return ids, inside, across


@dataclass
class _Columns:
    """Per-node facts, one entry per node id (int64 arrays but ``srcs``):

    - ``label``: a small int naming what two copies of a node in repeated blocks share: op, arg,
      dtype, shape and the views it reads through, not which nodes it reads (a leaf: its kind alone,
      never its name or value). Trips are matched by it.
    - ``srcs``: the ids of the nodes it reads (tuples); ``arity``: how many; ``flat``: every node's in
      a row.
    - ``type``: a small int naming its (dtype, shape).
    - ``is_input``: whether it is an Input leaf (a user input, state or random draw)."""

    label: np.ndarray
    srcs: list
    arity: np.ndarray
    flat: np.ndarray
    type: np.ndarray
    is_input: np.ndarray


def _columns(graph) -> _Columns:
    """The columns of ``graph``'s nodes as they are now (the graph may grow after), from one pass over
    its hash-consing keys (``(signature number, input ids)``, per-node work in C): a node's
    signature (op, views, arg, dtype, shape) is its label, except that a leaf's label leaves out its
    arg (two layers' weights are different inputs of one label); leaves are the nodes without inputs,
    and few, so they are relabelled after. A type (dtype, shape) is a part of a signature: types are
    numbered over the distinct signatures (a few hundred), not over the nodes."""
    keys = list(graph.node_keys())
    n = len(keys)
    sigs = graph.signatures()
    label = np.fromiter(map(_SIG, keys), np.int64, n)
    srcs = list(map(_SRCS, keys))
    arity = np.fromiter(map(len, srcs), np.int64, n)
    leaves = np.flatnonzero(arity == 0).tolist()
    argless: dict = {}  # a leaf's signature without its arg -> its label (numbered after the signatures)
    for i in leaves:
        op, views, _, dtype, shape = sigs[label[i]]
        label[i] = argless.setdefault((op, views, dtype, shape), len(sigs) + len(argless))
    types: dict = {}
    type_of = np.array([types.setdefault(sig[3:], len(types)) for sig in sigs]
                       + [types.setdefault(key[2:], len(types)) for key in argless], np.int64)
    flat = np.fromiter(itertools.chain.from_iterable(srcs), np.int64)
    is_input = np.zeros(n, bool)
    is_input[[i for i in leaves if sigs[keys[i][0]][0] == "Input"]] = True
    return _Columns(label, srcs, arity, flat, type_of[label], is_input)


_SIG, _SRCS = itemgetter(0), itemgetter(1)


def _varies(reader, flat, srcs: list, is_input) -> np.ndarray:
    """Whether each node depends on an Input; one that does not is a constant of the program (a mask
    from an Arange, a broadcast fill). From every computed node varying, each array pass drops the
    nodes that read no varying node: a constant computation k nodes deep takes k passes, so past
    ``LIVE_PASSES`` one sweep over the ids in Python finishes the job (ids are topological)."""
    base = is_input.copy()
    v = base.copy()
    v[reader] = True
    for _ in range(LIVE_PASSES):
        now = base.copy()
        now[reader[v[flat]]] = True
        if np.array_equal(now, v):
            return v
        v = now
    out = bytearray(is_input.tobytes())
    for i, s in enumerate(srcs):
        if not out[i] and any(out[j] for j in s):
            out[i] = 1
    return np.frombuffer(out, np.bool_)


def _live(reader, flat, srcs: list, roots) -> np.ndarray:
    """Whether each node id is read by the roots. A node is live iff it is a root or a live node reads
    it (a graph is a DAG, so that has one solution): from every node live, each array pass drops the
    nodes no live node reads. A chain of k unread nodes takes k passes, so past ``LIVE_PASSES`` (a
    long dead chain) one reverse sweep over the ids in Python finishes the job (ids are topological)."""
    n = len(srcs)
    root = np.zeros(n, bool)
    root[[r.id for r in roots]] = True
    live = np.ones(n, bool)
    for _ in range(LIVE_PASSES):
        now = root.copy()
        now[flat[live[reader]]] = True
        if np.array_equal(now, live):
            return live
        live = now
    live = bytearray(n)
    for r in roots:
        live[r.id] = 1
    for i in range(max(r.id for r in roots), -1, -1):
        if live[i]:
            for s in srcs[i]:
                live[s] = 1
    return np.frombuffer(live, np.bool_)


def _pair(a, b, n: int):
    """Ints naming the pairs (a, b), 0 <= b < n: ``a * n + b``, once ``a`` is renumbered densely if
    that could overflow."""
    if int(a.max(initial=0)) >= (1 << 62) // n:
        a = np.unique(a, return_inverse=True)[1].ravel()
    return a * n + b


def _cyclic_count(y, r, p: int):
    """For every phase f in [0, p): how many of the intervals (y, y + r] (r < p) hold a position = f
    mod p."""
    first, last = (y + 1) % p, (y + r) % p
    diff = np.bincount(first, minlength=p + 1) - np.bincount(last + 1, minlength=p + 1)
    wrapped = int(np.count_nonzero(first > last))
    diff[0] += wrapped
    diff[p] -= wrapped
    return np.cumsum(diff)[:p]


def _periods(masked, by_class, free) -> list[int]:
    """Candidate periods, best first: gaps (at least ``MIN_BODY``) between a free position and the
    next few of its class (a block may hold a class more than once: two layer norms), the most
    frequent ``GAPS`` of them ranked by how many free positions agree with the one a period later,
    the best ``PERIODS`` of them and every frequent gap dividing one of those, each moved up to just
    before its best-ranked multiple: a region periodic with p is periodic with 2p too (a stray
    agreement elsewhere can rank 2p first), and trying p first sets the bar that prunes 2p's tiling.
    The divisors are needed because a common multiple gathers the agreements of every region whose
    period divides it: with regions of periods 5, 6 and 10 free, 30 outranked 6 and the periods of
    5's and 10's regions filled the rest, so the 6-node region was tiled with period 30 (five
    bodies a trip, split in two loops where its length is not a multiple of 30). ``masked``: the
    classes, a unique negative value at each position already taken; ``by_class``: every position,
    sorted by class then position."""
    pos = by_class[free[by_class]]
    c = masked[pos]
    gaps = np.concatenate([(pos[k:] - pos[:-k])[c[k:] == c[:-k]] for k in range(1, NEXT + 1)])
    counts = np.bincount(gaps, minlength=MIN_BODY)
    counts[:MIN_BODY] = 0
    vals = np.flatnonzero(counts)
    cands = vals[np.argsort(-counts[vals], kind="stable")][:GAPS].tolist()
    agree = [int(np.count_nonzero(masked[:-p] == masked[p:])) for p in cands]
    best = [p for _, p in sorted(zip(agree, cands), key=lambda ap: -ap[0])][:PERIODS]
    best += [d for d in cands if d not in best and any(p % d == 0 for p in best)]
    rank = {p: min(r for r, q in enumerate(best) if q % p == 0) for p in best}
    return sorted(best, key=lambda p: (rank[p], p))
