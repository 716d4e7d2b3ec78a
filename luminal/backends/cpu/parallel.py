"""Running the compiled CPU backend's calls on every core.

Generated kernels are cut along their first grid axis by ``plan.py`` (each part a ctypes call,
which releases the GIL). This module cuts the numpy calls between them: matmuls (BLAS), the copies
that lay their operands out, a half GEMM's bfloat16 rounding. Most such calls compute row ``i`` of
their outputs (along the first axis longer than 1: the batch, in a training step) from row ``i`` of
their inputs only; a run of them can be cut into row ranges, one per thread, each thread making the
same calls over its own rows (numpy releases the GIL inside its loops). Matmuls are cut by batch,
by the left operand's rows or by the right operand's columns, while BLAS runs on one thread
(``blas.py``): two thread pools on the same cores would fight.

A run is cut only where that is safe and worth it:

- every call is a known row-wise function (``copyto``, a bfloat16 rounding, a matmul), and all of the
  run's outputs have the same number of rows;
- no thread can touch memory another thread writes: every array that may share memory with an
  array the run writes is cut into rows with the same row stride, at least as wide as the rows of
  both (so row ``i`` of one overlaps row ``j != i`` of the other nowhere); a read of such memory
  that broadcasts along the rows ends the run;
- the run takes about ``MIN_RUN_NS`` or more and its calls ``MIN_CALL_NS`` each on average (by a
  cost model of numpy and BLAS): handing the GIL from thread to thread costs tens of microseconds
  here, so short calls would spend more on handoffs than they save. A program is split at all only
  if some run qualifies by its work outside matmuls, or when generated kernels were cut (our threads
  run anyway, with BLAS on one thread): otherwise BLAS's own threads do as well for matmuls.

``LUMINAL_NUM_THREADS`` sets the number of threads; by default the backend uses as many as numpy's
OpenBLAS (one when numpy's BLAS is another library).
"""

from __future__ import annotations

import os
import queue
import threading

import numpy as np

from luminal.backends.cpu import blas
from luminal.backends.cpu.steps import Step
from luminal.core import numpy_ops as ops

MIN_RUN_NS = 1_000_000  # estimated time of a run worth splitting
MIN_CALL_NS = 150_000  # and of its calls on average: threads trade the GIL between calls, slowly
# the cost model of one call (measured on a 2-core machine): numpy streams contiguous operands fast,
# pays more per element for strided ones, and pays per inner loop (a row of the output's innermost
# contiguous run); BLAS does about 80 GFLOP/s on one core
NS_PER_ELEMENT = 0.15
NS_PER_STRIDED_ELEMENT = 0.6
NS_PER_LOOP = 15.0
NS_PER_MAC = 0.025

# function -> (argument positions read, argument positions written), for the row-wise calls but matmul
_ROLES = {
    np.copyto: ((1,), (0,)),
    ops.round_bf16_: ((), (0,)),
}
_ROLES_BY_ID = {id(f): r for f, r in _ROLES.items()}  # (the functions live as long as _ROLES)


def thread_count() -> int:
    """Threads the compiled CPU backend uses: ``LUMINAL_NUM_THREADS``, else OpenBLAS's count."""
    env = os.environ.get("LUMINAL_NUM_THREADS", "").strip()
    if env:
        try:
            n = int(env)
        except ValueError:
            raise ValueError(f"LUMINAL_NUM_THREADS must be a positive integer, got {env!r}") from None
        if n < 1:
            raise ValueError(f"LUMINAL_NUM_THREADS must be a positive integer, got {env!r}")
        return n
    return blas.threads() or 1


def item_ranges(n: int, cost: float, threads: int, split: float) -> list:
    """The ranges of a kernel's ``n`` work items to run on threads of their own: one range unless the
    kernel takes ``split`` ns or more (its estimated ``cost``), then up to ``threads``, each with half
    of that or more."""
    if threads < 2 or n < 2 or cost < split:
        return [(0, n)]
    t = min(threads, n, max(2, int(cost // (split / 2))) if split > 0 else threads)
    bounds = [n * i // t for i in range(t + 1)]
    return list(zip(bounds, bounds[1:]))


class Split(Step):
    """A run of steps cut into row ranges: ``parts[t]`` is thread ``t``'s list of steps (or, in a run's
    table of calls, of ``(function, args)``). Calling it runs the parts at once and returns when all
    are done (re-raising the first error). As a step it calls itself with no arguments."""

    __slots__ = ("parts",)

    def __init__(self, parts: list):
        self.parts = parts

    @property
    def fn(self):
        return self

    @property
    def args(self) -> tuple:
        return ()

    def __call__(self) -> None:
        _team(len(self.parts)).run(self.parts)


def split_rows(calls: list, threads: int, matmuls: bool = False) -> list:
    """``calls`` (steps, over arrays or ``steps.Ref`` views) with each long enough run of row-wise steps
    replaced by one :class:`Split`. Unchanged (BLAS keeps its threads)
    unless some run has enough work outside matmuls to gain from threads of our own, or
    ``matmuls`` says our threads run anyway (generated kernels were cut over them, so BLAS runs on
    one thread: its matmuls are cut too)."""
    if threads < 2:
        return calls
    rowwise = [_row_call(*call) for call in calls]
    if not matmuls and sum(r.work for r, (f, _) in zip(rowwise, calls) if r is not None and f is not np.matmul) \
            < MIN_RUN_NS:
        return calls  # no run can have enough work outside matmuls (what the runs below would find, sooner)
    runs: list = []  # _Run, or a call that is not row-wise
    run = _Run()
    for call, rows in zip(calls, rowwise):
        if rows is not None and run.add(call, rows):
            continue
        if run.calls:
            runs.append(run)
        run = _Run()
        if rows is None or not run.add(call, rows):  # not row-wise, or its own rows overlap
            runs.append(call)
    if run.calls:
        runs.append(run)
    if not matmuls and not any(isinstance(r, _Run) and r.worth_it(r.other) for r in runs):
        return calls
    out: list = []
    for r in runs:
        if not isinstance(r, _Run):
            out.append(r)
        elif r.worth_it(r.work) or (matmuls and r.work > r.other and r.worth_it(r.work, MIN_CALL_NS)):
            # with our threads running, BLAS runs on one: a matmul left whole would use one core
            out.append(r.split(r.threads(threads)))
        else:
            out.extend(r.calls)
    return out


def _roles(f, args):
    """``(positions read, positions written)`` if ``f(*args)`` computes each row of its outputs from the
    same row of its inputs (along some axis), else None."""
    if f is np.matmul:  # (a vector operand has no rows to line up with the output's)
        return ((0, 1), (2,)) if len(args) == 3 and all(len(_shape(a)) >= 2 for a in args) else None
    roles = _ROLES_BY_ID.get(id(f))  # by identity: ctypes functions do not hash
    if roles is None or len(args) <= max(roles[0] + roles[1]):
        return None
    return roles


class _Rows:
    """One row-wise call: its row count, ``(position, axis)`` of each array cut into rows, the
    positions of the arrays read whole (broadcast along the rows) and of those written, and its
    estimated time (ns)."""

    __slots__ = ("n", "cut", "whole", "written", "work", "alone")

    def __init__(self, n, cut, whole, written, work, alone=False):
        self.n, self.cut, self.whole, self.written, self.work = n, cut, whole, written, work
        self.alone = alone  # cut along an axis whose parts interleave in memory: a run of its own


def _row_call(f, args) -> _Rows | None:
    """The rows of a row-wise call: along the first axis of its outputs longer than 1 (a matmul: along
    its output's axis of the largest stride, which is the first unless the output is stored permuted,
    where the first axis's rows interleave in memory and cannot be handed to threads apart)."""
    roles = _roles(f, args)
    if roles is None:
        return None
    reads, writes = roles
    shapes = [_shape(args[i]) for i in writes]
    if any(s != shapes[0] for s in shapes):
        return None
    out = shapes[0]
    axis = next((a for a, d in enumerate(out) if d > 1), None)
    alone = False
    if f is np.matmul and axis is not None:  # rows in memory: the output's axis of the largest stride
        strides = args[writes[0]].strides
        axis = max((a for a, d in enumerate(out) if d > 1), key=lambda a: (abs(strides[a]), -a))
        rows, cols = len(out) - 2, len(out) - 1
        if axis in (rows, cols):
            # each thread packs the whole operand the cut does not divide: cutting the rows copies the
            # right operand (K x N) to every thread, cutting the columns the left one (M x K), so the
            # side with the smaller other operand is cut (a (128, 784) @ (784, 256) product: 0.28 ms by
            # columns, 0.35 by rows, on 2 threads); parts that interleave in memory make a run of their own
            want = cols if out[rows] < out[cols] else rows
            if want != axis:
                axis, alone = want, True
    if axis is None:
        return None
    n, ndim = out[axis], len(out)
    cut, whole = [(i, axis) for i in writes], []
    for i in reads:
        a = _input_axis(f, args, i, axis, ndim)
        shape = _shape(args[i])
        if a is None or a < 0 or shape[a] == 1:
            whole.append(i)
        elif shape[a] == n:
            cut.append((i, a))
        else:
            return None
    return _Rows(n, cut, whole, writes, _cost(f, args, [i for i, _ in cut] + whole, writes), alone)


def _input_axis(f, args, i: int, axis: int, ndim: int) -> int | None:
    """The axis of input ``args[i]`` that goes with output axis ``axis`` (negative or None: the input
    has none, it is read whole)."""
    shape = _shape(args[i])
    if f is np.matmul and axis >= ndim - 2:  # rows of the left operand, or columns of the right one
        if len(shape) < 2:
            return -1
        side = 0 if axis == ndim - 2 else 1
        return len(shape) - 2 + side if i == side else -1
    return axis - (ndim - len(shape)) if shape else -1


def _cost(f, args, operands, writes) -> float:
    """Estimated time (ns) of ``f(*args)``; ``operands``: the positions of its arrays."""
    if f is np.matmul:
        return _size(args[2]) * _shape(args[0])[-1] * NS_PER_MAC
    arrays = [args[i] for i in operands if _shape(args[i])]
    strided = any(a.strides[-1] not in (0, np.dtype(a.dtype).itemsize) for a in arrays)
    cost = 0.0
    for i in writes:
        out, size = args[i], _size(args[i])
        if size:
            cost += size * (NS_PER_STRIDED_ELEMENT if strided else NS_PER_ELEMENT) + size / _inner(out) * NS_PER_LOOP
    return cost


def _inner(x) -> int:
    """Elements in the innermost contiguous run of ``x`` (at least its last axis)."""
    shape, strides, item = _shape(x), x.strides, np.dtype(x.dtype).itemsize
    run, step = 1, item
    for n, s in zip(reversed(shape), reversed(strides)):
        if n != 1 and s != step:
            return max(run, shape[-1])
        run, step = run * n, step * n
    return run


class _Run:
    """Consecutive row-wise calls with one row count, none touching rows another thread writes."""

    MAX_CALLS = 256  # bounds the pairwise memory checks

    def __init__(self):
        self.calls: list = []
        self.rows: list = []  # the _Rows of each call
        self.n = None
        self.work = 0.0
        self.other = 0.0  # the work outside matmuls
        self.written: list = []  # memory extents of the arrays written
        self.cut: list = []  # of the arrays cut by rows
        self.whole: list = []  # of the arrays read whole

    def add(self, call, rows: _Rows) -> bool:
        """Take ``call`` into the run if it keeps every thread's writes apart; else leave the run as is."""
        if (self.n is not None and rows.n != self.n) or len(self.calls) >= self.MAX_CALLS:
            return False
        if rows.alone or (self.rows and self.rows[0].alone):
            if self.calls:
                return False
            self.calls, self.rows, self.n, self.work = [call], [rows], rows.n, rows.work  # its parts write apart
            return True
        args = call[1]
        axes = dict(rows.cut)
        written = [e for e in (_extent(args[i], axes[i]) for i in rows.written) if e is not None]
        cut = [e for e in (_extent(args[i], a) for i, a in rows.cut) if e is not None]
        whole = [e for e in (_extent(args[i], None) for i in rows.whole) if e is not None]
        pairs = [(w, x) for w in written for x in self.cut + cut] + [(w, x) for w in self.written for x in cut]
        if any(_rows_clash(w, x) for w, x in pairs):
            return False
        if any(_overlap(w, x) for w in written for x in self.whole + whole) or \
                any(_overlap(w, x) for w in self.written for x in whole):
            return False
        self.calls.append(call)
        self.rows.append(rows)
        self.n = rows.n
        self.work += rows.work
        if call[0] is not np.matmul:
            self.other += rows.work
        self.written += written
        self.cut += cut
        self.whole += whole
        return True

    def worth_it(self, work: float, least: float | None = None) -> bool:
        """Whether ``work`` (all of the run's, or its part outside matmuls) is worth the threads: ``least``
        (default ``MIN_RUN_NS``) or more, and its calls ``MIN_CALL_NS`` each on average."""
        return work >= (MIN_RUN_NS if least is None else least) and self.work >= MIN_CALL_NS * len(self.calls)

    def threads(self, most: int) -> int:
        """How many threads to share the run: up to ``most``, each with half of ``MIN_RUN_NS`` or more."""
        share = MIN_RUN_NS / 2
        n = most if share <= 0 else max(2, min(most, int(self.work // share)))
        return min(n, self.n)

    def split(self, threads: int) -> Split:
        bounds = [self.n * t // threads for t in range(threads + 1)]
        parts = []
        for lo, hi in zip(bounds, bounds[1:]):
            part = []
            for step, rows in zip(self.calls, self.rows):
                cut = dict(rows.cut)
                part.append(step.with_args(tuple(a if i not in cut else _rows_of(a, cut[i], lo, hi)
                                                 for i, a in enumerate(step.args))))
            parts.append(part)
        return Split(parts)


# memory extents ------------------------------------------------------------------------------------
# An array's extent: (space, first byte, end byte, first byte of row 0, end byte of row 0, row stride).
# The space is a Ref's (a storage of the schedule, or a caller array's name: offsets from its start), or
# None for a plain array (absolute addresses); different spaces never overlap (storages are separate
# allocations, and the program copies a caller array that overlaps a state it writes in place).

def _shape(x) -> tuple:
    return tuple(getattr(x, "shape", ()))


def _size(x) -> int:
    n = 1
    for d in _shape(x):
        n *= d
    return n


def _extent(x, axis):
    """The memory extent of ``x`` cut into rows along ``axis`` (None: read whole, no rows)."""
    shape = _shape(x)
    if not shape or 0 in shape:
        return None
    if isinstance(x, np.ndarray):
        space, start, item = None, x.__array_interface__["data"][0], x.itemsize
    else:  # a steps.Ref: byte offset and strides into its space
        space, start, item = x.space, x.offset, x.itemsize
    dims = [(n, s) for a, (n, s) in enumerate(zip(shape, x.strides)) if a != axis]
    lo = start + sum(min(0, (n - 1) * s) for n, s in dims)
    hi = start + sum(max(0, (n - 1) * s) for n, s in dims) + item
    if axis is None:
        return (space, lo, hi, lo, hi, 0)
    n, s = shape[axis], x.strides[axis]
    return (space, lo + min(0, (n - 1) * s), hi + max(0, (n - 1) * s), lo, hi, s)


def _overlap(a, b) -> bool:
    return a[0] == b[0] and a[1] < b[2] and b[1] < a[2]


def _rows_clash(w, x) -> bool:
    """Whether row ``i`` of written ``w`` can overlap row ``j != i`` of ``x`` (both cut by rows). With a
    common row stride ``s``, rows ``i`` and ``j`` are apart for every ``i != j`` iff each row-0 span
    ends within ``s`` of the other's start."""
    if not _overlap(w, x):
        return False
    s = w[5]
    return s <= 0 or x[5] != s or x[4] - w[3] > s or w[4] - x[3] > s


def _rows_of(x, axis: int, lo: int, hi: int):
    """Rows ``lo:hi`` along ``axis`` of an array or a ``steps.Ref``."""
    if isinstance(x, np.ndarray):
        return x[(slice(None),) * axis + (slice(lo, hi),)]
    return x.rows(axis, lo, hi)



# the threads ---------------------------------------------------------------------------------------

class _Team:
    """``size - 1`` worker threads; the caller's thread runs the first part itself."""

    def __init__(self, size: int):
        self.size, self.pid = size, os.getpid()
        self.lock = threading.Lock()
        self.jobs = [queue.SimpleQueue() for _ in range(size - 1)]
        for q in self.jobs:
            threading.Thread(target=self._work, args=(q,), daemon=True, name="luminal-cpu").start()

    @staticmethod
    def _work(jobs: queue.SimpleQueue) -> None:
        while True:
            part, done = jobs.get()
            try:
                _run(part)
                done.put(None)
            except BaseException as e:  # handed to the caller's thread, which re-raises it
                done.put(e)

    def run(self, parts: list) -> None:
        if not self.lock.acquire(blocking=False):  # another program is using the team: run here
            for part in parts:
                _run(part)
            return
        try:
            done: queue.SimpleQueue = queue.SimpleQueue()  # this run's own: a late worker cannot confuse the next
            for q, part in zip(self.jobs, parts[1:]):  # the first len(parts) - 1 workers
                q.put((part, done))
            error = None
            try:
                _run(parts[0])
            except BaseException as e:
                error = e
            for _ in parts[1:]:  # the parts share arrays: wait for all before returning or raising
                r = done.get()
                error = error or r
            if error is not None:
                raise error
        finally:
            self.lock.release()


def _run(calls: list) -> None:
    with np.errstate(all="ignore"):  # numpy's error state is per thread
        for f, args in calls:
            f(*args)


_teams: list = []  # the one team, grown when a split has more parts than it has threads


def _team(size: int) -> _Team:
    team = _teams[0] if _teams else None
    if team is None or team.size < size or team.pid != os.getpid():  # a forked child has no threads
        team = _Team(max(size, team.size if team is not None and team.pid == os.getpid() else 0))
        _teams[:] = [team]
    return team
