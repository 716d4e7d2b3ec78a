"""Native worker threads for the generated driver's splits: a :class:`~luminal.backends.cpu.parallel.Split`
whose parts are all native (generated kernels, cblas calls) runs inside the driver, with no Python
between its parts or around it.

A Python split hands each part to a worker thread through a queue and waits on another: two wake-ups
through the kernel and the GIL passed back and forth, tens of microseconds each on a VM, several
times per call of a program with a few dozen splits (an encoder forward: 48; a GPT train step: 332);
and the driver's table is cut at every split, so each is also a return to Python and a new ctypes
call. Here the driver posts a part to a worker by writing its table into the worker's slot and
bumping the slot's generation; the worker, which never leaves native code, spins on its slot for a
moment and then sleeps in ``futex``; the driver runs part 0 itself, then each part no worker has
claimed yet, and waits for the others the same way. The protocol (``driver.py``'s ``luminal_split``
and ``luminal_worker``):

- **post**: write the part's table and count, then the generation (sequentially consistent), then
  read the worker's *sleeping* flag and wake its futex if set;
- **worker**: spin ``SPIN`` rounds on the generation; then set *sleeping*, read the generation again
  and sleep on it only if it is unchanged (the futex compares it again in the kernel). Either side's
  store precedes its load of the other's flag, so a post is never missed (Dekker's pairing);
- **claim**: a posted part is run by whoever first moves the slot's *claim* word from the generation
  before to the posted one (a compare-and-swap): the worker when it sees the post, or the driver
  once its own part is done. So a split never waits for a worker that has not started: on a machine
  busy with other work, the worker's core may be taken for milliseconds (a scheduler's time slice),
  and waiting for it turned every split into that wait (the small Llama's prefill, 32 splits: 1.3 to
  1.6 times its one-thread time on two threads at a load average of 7 on 2 cores; 1.1 to 1.2 with
  the driver running the parts no worker claimed). A worker that loses the claim goes
  back to waiting; it only reads the part's table after winning it (the driver posts the next part
  only once this one is claimed and done);
- **done**: the worker stores the generation it ran into its *done* word and wakes the driver the same
  way when the driver sleeps on it (after its own ``SPIN`` rounds); a driver that ran the part itself
  stores it there too.

A split takes the team with a compare-and-swap; a program on another thread finding it taken (or a
team with too few live workers: a forked child before :func:`ensure` restarts them) runs the parts one
after another on its own thread, as the Python team does. Workers start when a binding first needs
them (:func:`ensure`, from ``driver.build``); they are daemon threads blocked in native code for the
life of the process. Linux on x86-64 only (``futex`` through libc's ``syscall``, the ``pause``
instruction): elsewhere :func:`available` is false and splits stay Python's.

Memory (one 128-byte header, then 128 bytes per worker, the words each side writes on their own cache
lines):

| offset | what |
|---|---|
| 0 (i32) | taken: 1 while a split runs on the team |
| 8 (i64) | live: workers started and waiting |
| 16 (i64) | libc's ``syscall`` |
| 24 (i64) | ``SPIN``: rounds of ``pause`` before sleeping |
| 128 w + 128 (i32) | worker w's generation (the driver writes it, with the table and count below) |
| ... + 8, + 16 (i64) | the posted part's table address and entry count |
| ... + 24 (i32) | claim: the generation last claimed (by the worker or the driver) |
| ... + 64 (i32) | done: the generation worker w finished last |
| ... + 68 (i32) | the worker sleeps on its generation |
| ... + 72 (i32) | the driver sleeps on the worker's done word |
| ... + 76 (i32) | ready: the worker has read its first generation |
"""

from __future__ import annotations

import ctypes
import os
import platform
import sys
import threading
import time

HEADER = 128
SLOT = 128
MAX_WORKERS = 255
# rounds of ``pause`` (20-50 ns each: 1-2 ms in all) before a thread sleeps. Longer than
# the gap between the cuts of a small program's run and between its runs (a train step's Python work:
# 0.1-0.2 ms): a worker that sleeps there lets its core halt, and on a VM the host then takes its time to
# wake it, more so after a long idle (the hypervisor stops polling a halted core): 4000 rounds made the
# MNIST MLP step on our threads take 1.75-1.98 ms for a while after a 0.5 s pause instead of 1.0 (the
# driver ran each cut alone while the worker woke); 40,000 rounds: 0.98-1.04 ms. (OpenBLAS's workers
# spin about 0.1 s.)
SPIN = 40000
SYS_FUTEX = 202  # x86-64 Linux
FUTEX_WAIT_PRIVATE, FUTEX_WAKE_PRIVATE = 128, 129
TAKEN, LIVE, SYSCALL, SPINS = 0, 8, 16, 24  # header offsets
GEN, TABLE, COUNT, CLAIM, DONE, WORKER_SLEEPS, DRIVER_SLEEPS, READY = 0, 8, 16, 24, 64, 68, 72, 76  # slot offsets


def available() -> bool:
    """Whether native splits run here: Linux on x86-64."""
    return sys.platform.startswith("linux") and platform.machine().lower() in ("x86_64", "amd64")


class _Team:
    """The process's team: its memory (aligned to a cache line) and the workers started on it."""

    def __init__(self):
        raw = ctypes.create_string_buffer(HEADER + SLOT * MAX_WORKERS + 64)
        self._raw = raw
        self.address = -(-ctypes.addressof(raw) // 64) * 64
        self.started = 0  # workers started (live)
        self.wanted = 0  # the most any binding asked for (a forked child starts them again: restore)
        self.worker = None  # the workers' native function
        self._syscall = ctypes.cast(ctypes.CDLL(None).syscall, ctypes.c_void_p).value  # (the same in a child)
        self.reset()

    def reset(self) -> None:
        """No workers, the team free (a new team's state, and a forked child's: its threads are gone, and
        so is any thread that held the lock when the fork happened: a new lock)."""
        ctypes.memset(self.address, 0, HEADER + SLOT * MAX_WORKERS)
        self._word(SYSCALL).value = self._syscall
        self._word(SPINS).value = SPIN
        self.started = 0
        self.lock = threading.Lock()

    def _word(self, offset: int) -> ctypes.c_int64:
        return ctypes.c_int64.from_address(self.address + offset)

    def live(self) -> int:
        return self._word(LIVE).value

    def ensure(self, workers: int, worker=None) -> None:
        """Start workers until ``workers`` wait on the team (each ready before it counts as live), each
        running ``worker`` (``driver.worker()``: the driver's module holds its code; kept for
        :func:`restore`)."""
        workers = min(workers, MAX_WORKERS)
        self.wanted = max(self.wanted, workers)
        self.worker = worker or self.worker
        if self.started >= workers:
            return
        with self.lock:
            for w in range(self.started, workers):
                ready = ctypes.c_int32.from_address(self.address + HEADER + SLOT * w + READY)
                threading.Thread(target=self.worker, args=(ctypes.c_void_p(self.address), ctypes.c_int64(w)),
                                 daemon=True, name="luminal-native").start()
                while not ready.value:  # (before it is live, a split would post to a thread not yet waiting)
                    time.sleep(1e-5)
                self.started = w + 1
                self._word(LIVE).value = self.started


_team: _Team | None = None


def team() -> _Team:
    """The process's team (made on first use; its workers start with :func:`ensure`)."""
    global _team
    if _team is None:
        _team = _Team()
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=_team.reset)
    return _team


def restore() -> None:
    """Start the workers bindings asked for if they are gone (in a forked child: until then its splits
    run one part after another). Cheap when they run: what a threaded run calls first."""
    t = _team
    if t is not None and t.started < t.wanted:
        t.ensure(t.wanted)


def ensure(workers: int, worker) -> int:
    """Start the team's workers up to ``workers``, running ``worker``; the team's address (what a
    split entry holds)."""
    t = team()
    t.ensure(workers, worker)
    return t.address
