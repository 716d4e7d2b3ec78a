"""Errors every rank raises together.

A data-parallel step only raises after the ranks have told each other what went wrong (the step's
status exchange), so each rank raises the same error at the same call and none is left waiting in a
collective. Such errors carry ``all_ranks = True``: the uncaught-exception hook (``mpi.py``) then lets
each rank exit on its own instead of aborting the job, which would cut the others' tracebacks short.
"""

from __future__ import annotations


class DistributedError(RuntimeError):
    """Something about the ranks as a whole: raised on every rank at once."""

    all_ranks = True


class RankFailedError(DistributedError):
    """A rank raised inside a data-parallel step; every rank stops with its message (``ranks``: the
    ranks that failed, ``messages``: what each raised)."""

    def __init__(self, msg: str, ranks: list[int], messages: list[str]):
        super().__init__(msg)
        self.ranks, self.messages = ranks, messages


class ProgramMismatchError(DistributedError, ValueError):
    """The ranks do not run the same program (another model, optimizer, option or batch dims)."""
