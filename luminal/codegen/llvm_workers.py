"""Compiling many LLVM objects at once on every core: a few worker processes of our own.

llvmlite serialises LLVM's work in one process (``codegen/llvm.py`` holds one lock around it), so a
cold program of many distinct kernels compiles them one after another on one core. Measured on a
2-core Xeon, a 6-layer width-384 GPT's cold train step (77 objects): code generation 3.1-3.7 s with
this process alone, 2.4-2.7 s with one worker beside it (three alternating pairs; the worker's start
included); its first step 4.3-4.9 s and 3.5-3.8 s.

The workers are plain child processes (``python -m luminal.codegen.llvm``, which runs :func:`serve`),
not ``multiprocessing``'s: a spawned ``multiprocessing`` child imports the user's main script again,
and runs whatever of it is not under ``if __name__ == "__main__"``. A worker reads a module's LLVM IR
text from its stdin (an 8-byte length, a byte saying whether it is vectorised by hand, the text) and
writes the object code to its stdout (an 8-byte length, the object), until it reads a length of 0 or
the end of its input (its parent gone); it ignores Ctrl-C, which reaches the
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
        # one request and its answer at a time: the workers are shared by every Batch, and the threads of
        # an interrupted one still feed them while the next compile's run, whose reads would otherwise
        # take the other's objects (a kernel linked, and cached, with another text's code)
        self.lock = threading.Lock()

    def compile(self, text: str, vectorised: bool = False) -> bytes:
        data = text.encode()
        with self.lock:
            self.proc.stdin.write(_LENGTH.pack(len(data)) + bytes([vectorised]) + data)
            self.proc.stdin.flush()
            head = self.proc.stdout.read(_LENGTH.size)
            if len(head) != _LENGTH.size:
                raise OSError("an LLVM worker process stopped")
            (n,) = _LENGTH.unpack(head)
            obj = self.proc.stdout.read(n)
            if len(obj) != n:
                raise OSError("an LLVM worker process stopped")
            return obj

    def ask_to_stop(self) -> None:
        """Send the length 0 that ends the worker's loop and close its input (the worker finishes a
        text it is compiling first)."""
        try:
            self.proc.stdin.write(_LENGTH.pack(0))
            self.proc.stdin.close()
        except (OSError, ValueError):  # (gone already; ValueError: closed by a dropped worker's feed)
            pass

    def reap(self, timeout: float = 5) -> None:
        """Wait for the process (killed past ``timeout`` seconds) and close both its pipes: an open pipe
        or an unwaited process is a ResourceWarning at exit (``python -X dev``)."""
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                f.close()
            except (OSError, ValueError):  # (a broken pipe's unflushed bytes)
                pass

    def close(self) -> None:
        """Stop the worker and release it (:meth:`ask_to_stop`, then :meth:`reap`)."""
        self.ask_to_stop()
        self.reap()

    def drop(self) -> None:
        """Kill a failed worker and release it (its texts are compiled elsewhere)."""
        self.proc.kill()
        self.reap()


_workers: list = []  # started on first use, kept for the process
_lock = threading.Lock()


def _start(n: int) -> None:
    """Up to ``n`` workers running (call with ``_lock`` held); a worker that cannot start is left out."""
    while len(_workers) < n:
        try:
            _workers.append(_Worker())
        except OSError:
            break


def running() -> int:
    """How many workers are running (started, not yet dropped)."""
    with _lock:
        return sum(w.proc.poll() is None for w in _workers)


def prestart() -> None:
    """Start the workers now, without waiting for them: a worker takes about half a second to start
    (Python, luminal and LLVM), which then passes while the caller does other work (the compile
    pipeline) instead of while the first objects wait."""
    with _lock:
        _start(worker_count() - 1)


THREAD_NAME = "luminal-llvm-batch"


class Batch:
    """Module texts compiled as they are submitted (while the caller builds the next ones): by the
    workers, each fed by a thread of this process, and by one more thread here (llvmlite's calls
    release the GIL); ``compile_here(text, vectorised)`` makes this process's objects, and those of
    any text a worker could not do. ``done()`` after each one (a progress bar). :meth:`results` waits
    for them all."""

    def __init__(self, compile_here, done=None, expected: int | None = None):
        with _lock:  # (this process compiles too: one worker fewer than the count; none past the texts)
            _start(worker_count() - 1 if expected is None else min(worker_count() - 1, expected - 1))
            workers = list(_workers)
        self._compile_here, self._done = compile_here, done
        self._texts: list = []  # (text, vectorised) by index
        self._out: list = []
        self._todo: queue.SimpleQueue = queue.SimpleQueue()  # indexes, then one None per thread
        self._closed = False
        self._threads = [threading.Thread(target=self._feed, args=(w,), daemon=True, name=THREAD_NAME)
                         for w in workers]
        self._threads.append(threading.Thread(target=self._here, daemon=True, name=THREAD_NAME))
        for t in self._threads:
            t.start()

    def submit(self, text: str, vectorised: bool = False) -> int:
        """Queue ``text`` (optimised as ``vectorised`` says: ``llvm.optimise``); its index in :meth:`results`."""
        self._texts.append((text, vectorised))
        self._out.append(None)
        self._todo.put(len(self._texts) - 1)
        return len(self._texts) - 1

    def close(self) -> None:
        """No more texts. Before :meth:`results` (a compile interrupted), the texts not yet taken are
        dropped, so that its threads stop after the one in hand instead of compiling what nobody will
        link (:meth:`results` would compile any dropped text here); from :meth:`results`, each thread
        stops once the queue is drained."""
        if not self._closed:
            while True:
                try:
                    self._todo.get_nowait()
                except queue.Empty:
                    break
            self._end()

    def _end(self) -> None:
        if not self._closed:
            self._closed = True
            for _ in self._threads:
                self._todo.put(None)

    def results(self) -> list:
        """The object code of every text submitted, by index, once all are compiled."""
        self._end()
        for t in self._threads:
            t.join()
        for i, obj in enumerate(self._out):
            if obj is None:  # (a worker's, gone before it answered)
                self._out[i] = self._compile_here(*self._texts[i])
                if self._done is not None:
                    self._done()
        return self._out

    def _feed(self, w: _Worker) -> None:
        while (i := self._todo.get()) is not None:
            try:
                self._out[i] = w.compile(*self._texts[i])
            except (OSError, ValueError):  # dropped (ValueError: its pipe closed at exit); the others take the
                with _lock:                # rest, and what is left when all are gone, we do
                    if w in _workers:
                        _workers.remove(w)
                w.drop()
                return
            if self._done is not None:
                self._done()

    def _here(self) -> None:
        while (i := self._todo.get()) is not None:
            self._out[i] = self._compile_here(*self._texts[i])
            if self._done is not None:
                self._done()


@atexit.register
def _stop() -> None:
    """At exit: ask every worker to stop, then wait for them and close their pipes (all asked first, so
    they exit together: an idle worker exits at once, the exit waits only for a text being compiled)."""
    with _lock:
        workers = list(_workers)
        _workers.clear()
    for w in workers:
        w.ask_to_stop()
    for w in workers:
        w.reap()


def serve(compile_text) -> None:
    """A worker's loop: ``python -m luminal.codegen.llvm`` runs it with ``compile_text``, the module's
    IR text and whether it is vectorised by hand -> object code (that module imports this one, not the
    other way round)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    read, write = sys.stdin.buffer, sys.stdout.buffer
    while True:
        head = read.read(_LENGTH.size)
        if len(head) != _LENGTH.size:
            return
        (n,) = _LENGTH.unpack(head)
        if n == 0:
            return
        vectorised = read.read(1) == b"\x01"
        obj = compile_text(read.read(n).decode(), vectorised)
        write.write(_LENGTH.pack(len(obj)) + obj)
        write.flush()
