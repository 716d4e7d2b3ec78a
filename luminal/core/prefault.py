"""``prefault(array)``: map a new array's pages on another thread, ahead of its first write.

A large ``np.zeros`` is memory the kernel has not mapped yet: its first write faults in each 4 KB
page. An optimizer's moments are made that way (``frontend/state.py``'s ``zeros_state``: copying zeros
in would write every page at once, in ``compile_step``) and first written by the first training
step's update: a 6-layer width-384 GPT's AdamW moments (88 MB) took about 38,000 page faults there,
0.2 s of its warm first step on a 2-vCPU AMD EPYC VM, while the other core sat idle through
``compile_step`` and the binding's layout before it. Here a daemon thread asks the kernel to map them
(``madvise(MADV_POPULATE_WRITE)``, Linux 5.14 and later) meanwhile: that GPT's warm start (graph to
first loss, ``bench/compile_step.py``) went from 0.79-0.90 s to 0.67-0.79 s (medians 0.83 / 0.77),
faster in 5 of 5 alternating pairs; with the moments made by :func:`zeros`, which this thread never
writes, from 0.71-0.84 s to 0.60-0.90 s (medians 0.82 / 0.68, faster in 4 of 5). The call maps pages
as a write would but reads and writes none of the array's bytes, so the array may be written (a
checkpoint loaded into it) at the same time; where it is not available (another OS, an older
kernel) nothing happens and the first write maps the pages as before. (Huge pages instead, tried:
one allocation for a binding's storages, the moments cut from 64 MB slabs, about 2,000 faults in
all, but each fault of a 2 MB page on that VM took long enough that the warm start was slower,
0.78-1.10 s against 0.74-0.79, in 5 of 5 pairs.)
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import mmap
import os
import queue
import sys
import threading

import numpy as np

MIN_BYTES = 64 << 10  # smaller arrays: a few faults, not worth a hand-off
_MADV_POPULATE_WRITE = 23  # <linux/mman.h>
_PAGE = 4096

_jobs: queue.SimpleQueue = queue.SimpleQueue()
_started = threading.Lock()
_thread: list = []  # the worker, once started
_madvise: list = []  # libc's madvise, once found; [None] where there is none


def _forked() -> None:
    """A forked child has no worker (threads do not survive a fork): it starts its own, with a queue of its own."""
    global _jobs, _started
    _jobs, _started = queue.SimpleQueue(), threading.Lock()
    _thread.clear()


if hasattr(os, "register_at_fork"):  # (POSIX)
    os.register_at_fork(after_in_child=_forked)


def zeros(shape, dtype, populate: bool = True) -> np.ndarray:
    """``np.zeros(shape, dtype)`` that this thread never writes, its pages mapped on the prefault thread
    (``populate``) or by their first write: from :data:`MIN_BYTES` on (on Linux) an anonymous mapping of
    its own, whose pages are zero until written. (``np.zeros`` takes memory from ``calloc``, which
    clears a block reused from the heap by writing it: glibc serves arrays up to the size of the
    largest one freed so far from the heap, so after a model's start-up most of them were written
    with zeros on the caller's thread: an 88 MB AdamW's 156 moments in about 10 ms, a GPT step's 254
    storages (281 MB) in 7-11 ms, then written again by the step.)

    A binding's storages are not populated: mapped on this thread while the plan before the first
    run went on, they made the plan 0.07-0.11 s slower on a 2-vCPU VM (the moments, mapped while
    ``compile_step`` runs, pay for themselves). Unlike ``np.zeros`` of 4 MB or more, the mapping does
    not ask for transparent huge pages (where the system gives them to every mapping, it has them):
    on that VM huge pages made the warm start slower (see the module's docstring)."""
    dtype = np.dtype(dtype)
    shape = (int(shape),) if np.ndim(shape) == 0 else tuple(int(n) for n in shape)  # (as np.zeros takes it)
    count = int(np.prod(shape, dtype=np.int64))
    if not sys.platform.startswith("linux") or dtype.hasobject or count * dtype.itemsize < MIN_BYTES:
        return np.zeros(shape, dtype)
    try:
        m = mmap.mmap(-1, count * dtype.itemsize, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    except OSError:  # (out of mappings: vm.max_map_count, 65,530 by default)
        return np.zeros(shape, dtype)
    a = np.frombuffer(m, dtype, count).reshape(shape)  # (the mapping lives as long as the array and its views)
    if populate:
        prefault(a)
    return a


def prefault(array: np.ndarray) -> None:
    """Have the pages of ``array`` (C-contiguous, :data:`MIN_BYTES` or more) mapped on the prefault
    thread; any other array, or a system without the call, is left as it is."""
    if not sys.platform.startswith("linux") or array.nbytes < MIN_BYTES or not array.flags.c_contiguous \
            or not array.flags.writeable:  # (a read-only mapping cannot be populated for writing)
        return
    if not _thread:
        with _started:
            if not _thread:
                t = threading.Thread(target=_work, name="luminal-prefault", daemon=True)
                t.start()
                _thread.append(t)
    _jobs.put(array)  # (held until mapped, so its memory is not freed and reused meanwhile)


def wait() -> None:
    """Return once every array handed over so far is mapped (tests)."""
    if _thread:
        done = threading.Event()
        _jobs.put(done)
        done.wait()


def _work() -> None:
    while True:
        job = _jobs.get()
        if isinstance(job, threading.Event):
            job.set()
        else:
            _populate(job)
        del job


def _populate(a: np.ndarray) -> None:
    madvise = _libc_madvise()
    if madvise is None:
        return
    start = -(-a.ctypes.data // _PAGE) * _PAGE  # the whole pages inside the array
    end = (a.ctypes.data + a.nbytes) // _PAGE * _PAGE
    if end > start and madvise(start, end - start, _MADV_POPULATE_WRITE) != 0 and ctypes.get_errno() == errno.EINVAL:
        _madvise[0] = None  # (a kernel without the call: not tried again; another failure is this array's alone)


def _libc_madvise():
    if not _madvise:
        f = None
        try:
            f = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True).madvise
            f.argtypes, f.restype = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int], ctypes.c_int
        except (OSError, AttributeError):
            f = None
        _madvise.append(f)
    return _madvise[0]
