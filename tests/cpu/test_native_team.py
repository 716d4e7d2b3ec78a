"""The native team (``luminal/backends/cpu/native_team.py``): splits whose parts are all native calls,
run by the generated driver on worker threads that never return to Python.

Why: the team is a hand-written protocol of atomics and futexes. A lost wake-up hangs a program, a
missing barrier gives wrong numbers only sometimes, a forked child has no workers, and two programs
on two threads contend for one team. Each of these is made to happen here, against the reference
interpreter and against the same program's Python splits (the team turned off), with the splits
forced as ``test_parallel.py`` forces them (every kernel and run worth cutting, into three parts).
"""

from __future__ import annotations

import ctypes
import faulthandler
import os
import threading
import time

import numpy as np
import pytest
from test_parallel import THREADS, forced  # noqa: F401 (every kernel and run worth cutting, in 3 parts)

import luminal as lm
from luminal import nn
from luminal.backends.cpu import driver, guard, native_team
from luminal.backends.cpu.parallel import Split

WATCHDOG_S = 120

pytestmark = pytest.mark.skipif(not native_team.available(), reason="the native team runs on Linux x86-64 only")


@pytest.fixture(autouse=True)
def watchdog():
    """A hang in native code cannot be interrupted: past ``WATCHDOG_S`` the process dumps its threads'
    stacks and exits, so a lost wake-up fails the run (xdist reports the worker lost) instead of
    stalling it."""
    faulthandler.dump_traceback_later(WATCHDOG_S, exit=True)
    yield
    faulthandler.cancel_dump_traceback_later()


class _Net(nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(24, width), nn.Linear(width, 5)
        self.norm = nn.LayerNorm(width)

    def forward(self, x):
        return self.fc2(self.norm(self.fc1(x)).gelu()).softmax(-1)


def _program(width: int = 40, backend: str = "cpu"):
    lm.manual_seed(width)
    model = _Net(width)
    g = lm.Graph()
    x = g.input("x", ("B", 24))
    return lm.compile([model(x)], backend=backend)


def _binding(f):
    (b,) = f.runner.program._bindings.values()
    return b


def _entry_kinds(b) -> list:
    """The kinds of the entries of every driver table the binding keeps (its runs' and its parts')."""
    kinds = []
    for t in b._keep:
        if isinstance(t, ctypes.Array) and len(t) % driver.WORDS == 0 and t._type_ is ctypes.c_int64:
            kinds += [t[i] for i in range(0, len(t), driver.WORDS)]
    return kinds


def _x(rows: int, seed: int = 0):
    return np.random.default_rng(seed).standard_normal((rows, 24)).astype(np.float32)


@pytest.mark.skipif(guard.BYTES > 0, reason="guard mode runs each step as a call of its own")
def test_a_program_of_native_splits_is_one_driver_call_and_matches_the_reference():
    f, ref = _program(), _program(backend="reference")
    x = _x(37)
    (got,) = f(x=x)
    b = _binding(f)
    assert [fn for fn, _ in b._exec] == [driver.driver()], "the splits should have joined the driver's run"
    assert driver.SPLIT in _entry_kinds(b), "no split entry in the driver's table"
    assert native_team.team().live() >= THREADS - 1
    np.testing.assert_allclose(got, ref(x=x)[0], rtol=1e-5, atol=1e-6)


def test_native_and_python_splits_compute_the_same(monkeypatch):
    x = _x(53, seed=1)
    (native,) = _program()(x=x)
    monkeypatch.setattr(native_team, "available", lambda: False)
    f = _program()
    (python,) = f(x=x)
    assert any(isinstance(fn, Split) for fn, _ in _binding(f)._exec), "the team off: Python's splits"
    # the same kernels and BLAS calls over the same row ranges, only run by other threads
    np.testing.assert_allclose(native, python, rtol=1e-6, atol=1e-7)


def test_sleeping_workers_are_woken_by_the_next_split():
    f, ref = _program(), _program(backend="reference")
    t = native_team.team()
    for k in range(4):
        x = _x(29 + k, seed=k)
        np.testing.assert_allclose(f(x=x)[0], ref(x=x)[0], rtol=1e-5, atol=1e-6)
        # past their spin, the workers sleep in the kernel (their flag says so) until the next post
        deadline = time.monotonic() + 5
        asleep = lambda: all(ctypes.c_int32.from_address(  # noqa: E731
            t.address + native_team.HEADER + native_team.SLOT * w + native_team.WORKER_SLEEPS).value
            for w in range(THREADS - 1))
        while not asleep() and time.monotonic() < deadline:
            time.sleep(0.005)
        assert asleep(), "the workers never went to sleep"


def test_many_short_calls_in_a_row():
    f, ref = _program(8), _program(8, backend="reference")
    x = _x(11, seed=3)
    want = ref(x=x)[0]
    first = f(x=x)[0]
    np.testing.assert_allclose(first, want, rtol=1e-5, atol=1e-6)
    for _ in range(2000):  # posts and joins back to back, workers spinning: any lost post hangs here
        (out,) = f(x=x)
    np.testing.assert_array_equal(out, first)


def test_two_programs_on_two_threads_share_the_team():
    """One takes the team, the other runs its parts one after another on its own thread; both right."""
    progs = [(_program(24), _program(24, backend="reference")), (_program(48), _program(48, backend="reference"))]
    errors = []

    def work(i):
        f, ref = progs[i]
        try:
            for k in range(150):
                x = _x(17 + k % 5, seed=k)
                np.testing.assert_allclose(f(x=x)[0], ref(x=x)[0], rtol=1e-5, atol=1e-6)
        except BaseException as e:  # noqa: BLE001 (re-raised below, on the test's thread)
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=300)
    assert not any(th.is_alive() for th in threads), "a program hung"
    if errors:
        raise errors[0]


def _wait_for(pid: int, what: str) -> int:
    """The forked child's wait status; a child still running after half the watchdog's time is killed
    and the test fails (before the watchdog would end this process, leaving the child behind)."""
    deadline = time.monotonic() + WATCHDOG_S / 2
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        time.sleep(0.01)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    pytest.fail(f"the forked child hung {what}")


def test_a_forked_child_starts_workers_of_its_own():
    f, ref = _program(), _program(backend="reference")
    x = _x(41, seed=5)
    want = ref(x=x)[0]
    np.testing.assert_allclose(f(x=x)[0], want, rtol=1e-5, atol=1e-6)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: the parent's workers are not here; its first threaded run starts its own
        code = 1
        try:
            (out,) = f(x=x)
            live = native_team.team().live()
            code = 0 if np.allclose(out, want, rtol=1e-5, atol=1e-6) and live >= THREADS - 1 else 2
        finally:
            os.write(write, bytes([code]))
            os._exit(code)
    os.close(write)
    status = _wait_for(pid, "running the program")
    answer = os.read(read, 1)
    os.close(read)
    assert answer == b"\x00" and os.waitstatus_to_exitcode(status) == 0, \
        f"the child's run: {answer!r} (1: raised, 2: wrong values or no workers)"


def test_a_fork_while_the_team_is_starting_workers_does_not_hang_the_child():
    """The team's lock is held while workers start; a fork at that moment gave the child a lock held
    by a thread it does not have, and its first threaded run waited on it forever (found in review)."""
    f, ref = _program(), _program(backend="reference")
    x = _x(23, seed=7)
    want = ref(x=x)[0]
    f(x=x)
    t = native_team.team()
    t.lock.acquire()  # (as ensure() holds it, on some thread, at the fork)
    try:
        pid = os.fork()
        if pid == 0:
            os._exit(0 if np.allclose(f(x=x)[0], want, rtol=1e-5, atol=1e-6) else 2)
    finally:
        t.lock.release()
    status = _wait_for(pid, "on the team's lock")
    assert os.waitstatus_to_exitcode(status) == 0


def test_more_parts_than_the_team_can_have_workers_stay_pythons_splits(monkeypatch):
    """A split of more parts than MAX_WORKERS + 1 would find too few live workers on every call and run
    serially; it stays a Python split (found in review)."""
    monkeypatch.setattr(native_team, "MAX_WORKERS", 1)  # THREADS = 3 parts: one too many
    f, ref = _program(), _program(backend="reference")
    x = _x(31, seed=8)
    np.testing.assert_allclose(f(x=x)[0], ref(x=x)[0], rtol=1e-5, atol=1e-6)
    b = _binding(f)
    assert any(isinstance(fn, Split) for fn, _ in b._exec) and driver.SPLIT not in _entry_kinds(b)
