"""Compiling many LLVM objects at once on every core: a few worker processes of our own.

llvmlite serialises LLVM's work in one process (``codegen/llvm.py`` holds one lock around it), so a
cold program of many distinct kernels compiles them one after another on one core. Measured on a
2-core Xeon, a 6-layer width-384 GPT's cold train step (77 objects): code generation 3.1-3.7 s with
this process alone, 2.4-2.7 s with one worker beside it (three alternating pairs; the worker's start
included); its first step 4.3-4.9 s and 3.5-3.8 s.

The workers are plain child processes (``python -m luminal.codegen.llvm``, which runs :func:`serve`),
not ``multiprocessing``'s: a spawned ``multiprocessing`` child imports the user's main script again,
and runs whatever of it is not under ``if __name__ == "__main__"``. A worker reads a module's LLVM IR
text from its stdin and writes the object code to its stdout, each framed by an 8-byte length, until
it reads a length of 0 or the end of its input (its parent gone); it ignores Ctrl-C, which reaches the
whole process group: the parent stops at the interrupt and the workers finish their one text. A
worker that fails (it exits, or its output is cut) is dropped and its texts compiled in the parent:
the result never depends on the workers, only the time does.

``LUMINAL_COMPILE_WORKERS`` sets how many processes compile (default: the cores this process may use;
0 or 1: this one alone): this process and that many minus one workers.
"""

from __future__ import annotations

import atexit
import os
import queue
import signal
import struct
import subprocess
import sys
import threading

_LENGTH = struct.Struct("<Q")


def worker_count() -> int:
    """``LUMINAL_COMPILE_WORKERS``, else the cores this process may run on."""
    env = os.environ.get("LUMINAL_COMPILE_WORKERS", "").strip()
    if env:
        try:
            return max(0, int(env))
        except ValueError:
            raise ValueError(f"LUMINAL_COMPILE_WORKERS must be a non-negative integer, got {env!r}") from None
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # (not on every platform)
        return os.cpu_count() or 1


class _Worker:
    def __init__(self):
        self.proc = subprocess.Popen([sys.executable, "-m", "luminal.codegen.llvm"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE)

    def compile(self, text: str) -> bytes:
        data = text.encode()
        self.proc.stdin.write(_LENGTH.pack(len(data)) + data)
        self.proc.stdin.flush()
        head = self.proc.stdout.read(_LENGTH.size)
        if len(head) != _LENGTH.size:
            raise OSError("an LLVM worker process stopped")
        (n,) = _LENGTH.unpack(head)
        obj = self.proc.stdout.read(n)
        if len(obj) != n:
            raise OSError("an LLVM worker process stopped")
        return obj

    def close(self) -> None:
        try:
            self.proc.stdin.write(_LENGTH.pack(0))
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()


_workers: list = []  # started on first use, kept for the process
_lock = threading.Lock()


def _start(n: int) -> None:
    """Up to ``n`` workers running (call with ``_lock`` held); a worker that cannot start is left out."""
    while len(_workers) < n:
        try:
            _workers.append(_Worker())
        except OSError:
            break


def prestart() -> None:
    """Start the workers now, without waiting for them: a worker takes about half a second to start
    (Python, luminal and LLVM), which then passes while the caller does other work (the compile
    pipeline) instead of while the first objects wait."""
    with _lock:
        _start(worker_count() - 1)


def compile_all(texts: list, compile_here, done=None) -> list:
    """The object code of each of ``texts`` (module IR), compiled by the workers, ``compile_here(text)``
    for any a worker could not do; ``done()`` after each one (a progress bar)."""
    with _lock:
        _start(min(worker_count() - 1, len(texts) - 1))  # (this process compiles too, on a thread of its own)
        workers = list(_workers)
    out: list = [None] * len(texts)
    todo: queue.SimpleQueue = queue.SimpleQueue()
    for i in range(len(texts)):
        todo.put(i)

    def serve(w: _Worker):
        while True:
            try:
                i = todo.get_nowait()
            except queue.Empty:
                return
            try:
                out[i] = w.compile(texts[i])
            except OSError:  # dropped; the others take the rest, and what is left when all are gone, we do
                with _lock:
                    if w in _workers:
                        _workers.remove(w)
                w.proc.kill()
                return
            if done is not None:
                done()

    def here():  # (llvmlite's calls release the GIL: this runs beside the threads feeding workers)
        while True:
            try:
                i = todo.get_nowait()
            except queue.Empty:
                return
            out[i] = compile_here(texts[i])
            if done is not None:
                done()

    threads = [threading.Thread(target=serve, args=(w,), daemon=True) for w in workers]
    threads.append(threading.Thread(target=here, daemon=True))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i, obj in enumerate(out):
        if obj is None:
            out[i] = compile_here(texts[i])
            if done is not None:
                done()
    return out


@atexit.register
def _stop() -> None:
    with _lock:
        for w in _workers:
            w.close()
        _workers.clear()


def serve(compile_text) -> None:
    """A worker's loop: ``python -m luminal.codegen.llvm`` runs it with ``compile_text``, the module's
    IR text -> object code (that module imports this one, not the other way round)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    read, write = sys.stdin.buffer, sys.stdout.buffer
    while True:
        head = read.read(_LENGTH.size)
        if len(head) != _LENGTH.size:
            return
        (n,) = _LENGTH.unpack(head)
        if n == 0:
            return
        obj = compile_text(read.read(n).decode())
        write.write(_LENGTH.pack(len(obj)) + obj)
        write.flush()
