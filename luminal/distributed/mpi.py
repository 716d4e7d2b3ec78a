"""MPI, imported only when it is needed, and waits that cannot hang forever.

**When MPI is used.** A process started by an MPI launcher (``mpiexec``, ``mpirun``, ``srun``) finds the
launcher's variables in its environment (``PMI_SIZE``: MPICH's hydra, Intel MPI, Slurm's PMI;
``OMPI_COMM_WORLD_SIZE``: Open MPI; ``PMIX_RANK``: PMIx; ``MV2_COMM_WORLD_SIZE``: MVAPICH) and imports
``mpi4py`` at its first distributed call. A process alone is rank 0 of 1 and never imports it, so
``pip install luminal`` without the ``distributed`` extra trains as before. ``init()`` imports it anyway
(a launcher this module does not know).

**No hang.** MPI has no timeouts: a rank that stops (an uncaught exception, ``sys.exit``) leaves the
others waiting in their next collective forever, and MPICH's launcher does not end the job when one
process exits with an error (measured: ``shared/notes/mpi.md``). Two things prevent it:

- once MPI is up, an uncaught exception on a rank prints its traceback and then aborts the job
  (``MPI_Abort``: the launcher kills every rank), as ``python -m mpi4py`` does; errors the ranks agreed
  on (``errors.py``, ``all_ranks``) just exit, on every rank;
- every collective of this package is started non-blocking and waited for with a deadline
  (``LUMINAL_DIST_TIMEOUT`` seconds, default 600): past it the waiting rank names what it waited in
  and aborts the job. That covers a rank stuck in a loop, or one that left early without an error.

**Two communicators.** The user's collectives (``all_reduce``, ``broadcast``, ``barrier``) run on
``COMM_WORLD``; a data-parallel train step's own exchanges run on a duplicate of it (``internal()``,
made once, by every rank, at start-up). MPI matches collectives by their order on a communicator, so
on one shared communicator a rank that called the step once more than another (a data set of odd
length sharded by hand) had its step's exchange matched with the other's ``all_reduce``: garbage,
silently. Apart, each waits for its own kind and the deadline names what was waited in.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

LAUNCHER_VARS = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "MV2_COMM_WORLD_SIZE")
DEFAULT_TIMEOUT = 600.0

_yield = getattr(os, "sched_yield", None) or (lambda: time.sleep(0))  # (no sched_yield on Windows)
_comm: Any = None  # COMM_WORLD once MPI is up
_internal: Any = None  # the train step's own communicator: a duplicate of COMM_WORLD
_MPI: Any = None  # the mpi4py.MPI module once imported


def launcher() -> str | None:
    """The launcher variable this process was started with (``PMI_SIZE=2``), or None."""
    for var in LAUNCHER_VARS:
        if var in os.environ:
            return f"{var}={os.environ[var]}"
    return None


def comm():
    """``MPI.COMM_WORLD`` under a launcher (or after ``init``), else None (a process alone)."""
    if _comm is None and launcher() is not None:
        init()
    return _comm


def internal():
    """The communicator of a data-parallel step's own exchanges (a duplicate of ``COMM_WORLD``, which
    the user's collectives keep to themselves), or None for a process alone."""
    if _comm is None and launcher() is not None:
        init()
    return _internal


def init():
    """Import mpi4py (which initialises MPI), install the abort-on-uncaught-exception hook and make the
    train step's own communicator (``internal``); returns ``COMM_WORLD``. Safe to call again."""
    global _comm, _MPI, _internal
    if _comm is not None:
        return _comm
    timeout()  # a bad LUMINAL_DIST_TIMEOUT fails here, before any rank waits on it
    try:
        from mpi4py import MPI
    except ImportError as e:
        how = f"this process was started by an MPI launcher ({launcher()})" if launcher() else "init() was called"
        raise ImportError(f"luminal.distributed: {how}, but mpi4py cannot be imported ({e}); install the "
                          f"distributed extra: pip install 'luminal[distributed]'") from e
    _MPI, _comm = MPI, MPI.COMM_WORLD
    if _comm.Get_size() == 1:
        _internal = _comm
        return _comm
    _install_abort_hook()
    # (collective: every rank makes it at its first distributed call, before any other collective)
    dup, request = _comm.Idup()
    wait([request], "MPI start-up (the duplicate communicator of the train step's exchanges)")
    _internal = dup
    return _comm


def mpi():
    """The ``mpi4py.MPI`` module (after ``comm()`` returned a communicator)."""
    return _MPI


def timeout() -> float:
    """Seconds a rank waits in one collective before it aborts the job (``LUMINAL_DIST_TIMEOUT``)."""
    raw = os.environ.get("LUMINAL_DIST_TIMEOUT", "")
    if not raw:
        return DEFAULT_TIMEOUT
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not (value > 0 and value != float("inf")):
        raise ValueError(f"luminal.distributed: LUMINAL_DIST_TIMEOUT={raw!r} must be a positive number of "
                         f"seconds (default {DEFAULT_TIMEOUT:g})")
    return value


def wait(requests: list, what: str) -> None:
    """Wait for ``requests`` (MPI requests), driving MPI's progress, at most ``timeout()`` seconds; then
    abort the job, naming ``what`` was waited for. Between tests the rank yields its core (as MPI's own
    blocking calls do): where ranks outnumber free cores, a waiting rank must not keep the one it waits
    for off the CPU. It never sleeps: a large sum moves in chunks, each needing a test to go on."""
    test = _MPI.Request.Testall
    if test(requests):
        return
    start = time.monotonic()
    deadline = start + timeout()
    while not test(requests):
        _yield()
        now = time.monotonic()
        if now > deadline:
            _abort(f"waited {now - start:.0f} s in {what} for the other ranks: one of them has stopped or is "
                   f"stuck (LUMINAL_DIST_TIMEOUT={timeout():g} s)")


ABORT_GRACE_S = 0.5  # mpiexec forwards a rank's output as it reads it: lines written just before Abort can be lost


def _abort(why: str) -> None:
    print(f"luminal.distributed: rank {_comm.Get_rank()} of {_comm.Get_size()}: {why}; aborting all ranks",
          file=sys.stderr, flush=True)
    time.sleep(ABORT_GRACE_S)  # (the job is ending: let the launcher pass on this rank's last lines first)
    _comm.Abort(1)


def _install_abort_hook() -> None:
    """An uncaught exception on one rank ends every rank (the others would wait for it forever)."""
    previous = sys.excepthook

    def hook(kind, value, tb):
        previous(kind, value, tb)
        if not getattr(value, "all_ranks", False):  # the others raised it too, and exit by themselves
            sys.stdout.flush()
            _abort(f"uncaught {kind.__name__}")

    sys.excepthook = hook
