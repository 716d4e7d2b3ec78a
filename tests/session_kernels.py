"""Every GPU kernel a test session lowered, when pytest-xdist splits the session over worker processes.

The NVRTC check (``tests/cuda/test_generated_kernels_compile.py``) compiles every distinct kernel the
session generated, and a process remembers only the kernels it lowered itself
(``luminal.backends.cuda.program.generated_kernels``). So under xdist each worker, once its last test
is done, writes the source of every kernel it lowered to ``<dir>/<worker>.json`` (``dump``, from
``tests/conftest.py``'s ``pytest_sessionfinish``), and the check, the session's last test, waits for
the files of the other workers (``other_workers``) and compiles their kernels with its own.

A worker writes ``<dir>/<worker>.pid`` when it starts (``announce``): one whose process ended without
its file (it crashed) fails the check at once instead of after ``WAIT_S``. Without xdist (``-n 0``,
``-p no:xdist``) there are no other workers and nothing is written or read.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

DIR_ENV = "LUMINAL_TEST_KERNELS_DIR"  # set in every worker by tests/conftest.py
CHECK = "tests/cuda/test_generated_kernels_compile.py"  # the check's node ids start so
WAIT_S = 1800.0  # the other workers' last tests run first: the slowest takes about a minute
_checked_here = [False]  # this worker runs the check: it needs no file of its own


def _dir() -> Path | None:
    d = os.environ.get(DIR_ENV)
    return Path(d) if d and os.environ.get("PYTEST_XDIST_WORKER") else None


def announce() -> None:
    """A worker starts: ``<worker>.pid`` says which process will write ``<worker>.json``."""
    d = _dir()
    if d is not None:
        d.mkdir(parents=True, exist_ok=True)
        (d / f"{os.environ['PYTEST_XDIST_WORKER']}.pid").write_text(str(os.getpid()))


def rendered(kernels) -> list[tuple[str, str, str | None, str | None]]:
    """``(name, C symbol, CUDA source, None)`` per kernel, or ``(name, symbol, None, error)`` for one the
    renderer refuses (the check reports it as the failure it is)."""
    from luminal.backends.cuda import render

    out = []
    for k in kernels:
        try:
            out.append((k.name, render.kernel_symbol(k), render.render(k), None))
        except Exception as e:  # a kernel the renderer refuses is the check's failure to report, not ours
            out.append((k.name, render.kernel_symbol(k), None, f"{type(e).__name__}: {e}"))
    return out


def dump() -> None:
    """A worker is done: the sources of every kernel it lowered, to ``<worker>.json`` (written whole,
    then renamed: a reader never sees half of it)."""
    d = _dir()
    if d is None or _checked_here[0]:
        return
    from luminal.backends.cuda.program import generated_kernels

    worker = os.environ["PYTEST_XDIST_WORKER"]
    tmp = d / f".{worker}.json.tmp"
    tmp.write_text(json.dumps(rendered(generated_kernels())))
    os.replace(tmp, d / f"{worker}.json")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a dead worker its parent has not reaped yet is a zombie: gone all the same
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def other_workers(wait_s: float = WAIT_S) -> list[tuple[str, str, str | None, str | None]]:
    """The kernels of every other worker of the session (``rendered``'s tuples), once each has written
    them: [] outside xdist. Fails (AssertionError) for a worker gone without its file, or not done
    after ``wait_s`` seconds."""
    d = _dir()
    if d is None:
        return []
    me = os.environ["PYTEST_XDIST_WORKER"]
    _checked_here[0] = True
    deadline = time.monotonic() + wait_s
    while True:
        waiting = []
        for pid_file in sorted(d.glob("*.pid")):
            worker = pid_file.stem
            if worker == me or (d / f"{worker}.json").exists():
                continue
            if not _alive(int(pid_file.read_text())):
                # (it may have written its file between the two looks)
                assert (d / f"{worker}.json").exists(), f"xdist worker {worker} ended without reporting its kernels"
                continue
            waiting.append(worker)
        if not waiting:
            break
        assert time.monotonic() < deadline, f"xdist workers {waiting} not done after {wait_s:.0f} s"
        time.sleep(0.2)
    out = []
    for f in sorted(d.glob("*.json")):
        if f.stem != me:
            out += [tuple(x) for x in json.loads(f.read_text())]
    return out
