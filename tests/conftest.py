import contextlib
import gc
import os
import shutil
import tempfile
from pathlib import Path

import pytest
import session_kernels

import luminal as lm

_session_dir: str | None = None  # this session's scratch directory, made by the controller (or the only process)
_mpi_segments_before: set = set()  # MPICH's shared-memory segments when the session began (the controller's)


def pytest_configure(config):
    """The disk caches (``luminal/core/disk_cache.py``) go to a directory of this session, never the
    user's ``~/.cache/luminal``: the suite compiles thousands of programs. ``LUMINAL_TEST_CACHE_DIR``
    names a directory to keep between sessions instead (warm LLVM objects: a faster suite).

    The compile cache is off for the suite (``LUMINAL_CACHE=llvm,cuda``, unless ``LUMINAL_CACHE`` is
    set): tests spy on the compiler's stages (``monkeypatch`` on rolling, extraction, kernel building),
    and a program another test compiled earlier in the session would come from the cache without
    running them. ``tests/compile/test_compile_cache.py`` turns it on where it tests it.

    Under pytest-xdist (``addopts`` in ``pyproject.toml``) the controller makes the session's directory
    and hands it to its workers (``pytest_configure_node``): they share one cache (its writes are atomic,
    for processes side by side) and exchange the GPU kernels they lowered (``session_kernels.py``)."""
    global _session_dir, _mpi_segments_before
    shared = getattr(config, "workerinput", {}).get("luminal_session_dir")
    if shared is None:  # the controller, or a session without workers
        _mpi_segments_before = _mpi_segments()
        _session_dir = shared = tempfile.mkdtemp(prefix="luminal-test-session-", dir=_scratch_root())
        os.mkdir(os.path.join(shared, "cache"), 0o700)
    os.environ["LUMINAL_CACHE_DIR"] = os.environ.get("LUMINAL_TEST_CACHE_DIR") or os.path.join(shared, "cache")
    os.environ.setdefault("LUMINAL_CACHE", "llvm,cuda")
    os.environ[session_kernels.DIR_ENV] = os.path.join(shared, "kernels")
    session_kernels.announce()


SHM = "/dev/shm"
SHM_FREE = 4 << 30  # bytes free there, at least, to use it (the session's caches grow to a few hundred MB)


def _scratch_root() -> str | None:
    """Where the session's scratch directory goes: memory (``/dev/shm``) where the machine has it with
    room to spare and ``TMPDIR`` does not say otherwise, else the temporary directory. The caches there
    are scratch, deleted with the session, but every write to them is an atomic, fsynced one
    (``disk_cache.write_atomic``, as for a user's cache) and each test waits for its writes: on a
    virtual disk a write took 4 ms (0.08 ms in memory), and writing and deleting the session's objects
    took about 7% of a test file's time."""
    if os.environ.get("TMPDIR") or not os.path.isdir(SHM) or not os.access(SHM, os.W_OK | os.X_OK):
        return None
    try:
        return SHM if shutil.disk_usage(SHM).free >= SHM_FREE else None
    except OSError:
        return None


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    """(xdist, in the controller) A worker is being started: it uses this session's directory."""
    node.workerinput["luminal_session_dir"] = _session_dir


def pytest_sessionfinish(session):
    """(xdist, in a worker) Its last test is done: the GPU kernels it lowered, for the NVRTC check."""
    if any(i.nodeid.startswith(session_kernels.CHECK) for i in session.items):
        session_kernels.dump()


def pytest_unconfigure(config):
    if _session_dir is not None:
        shutil.rmtree(_session_dir, ignore_errors=True)
        _remove_orphaned_mpi_segments(_mpi_segments_before)


def _mpi_segments() -> set:
    """MPICH's shared-memory segments (``/dev/shm/mpich_shm_*``) that exist now."""
    try:
        return {p.name for p in Path(SHM).glob("mpich_shm_*")}
    except OSError:
        return set()


def _remove_orphaned_mpi_segments(before: set) -> None:
    """(The controller, at the end) Delete the MPICH segments made during the session that no process
    maps: a job whose rank aborts or is killed (``tests/distributed``'s abort tests) leaves its 2 MB
    segment in memory for good, four a run of the suite. One a process maps (another session's job,
    running now) is left alone."""
    names = _mpi_segments() - before
    if not names:
        return
    mapped = set()
    for maps in Path("/proc").glob("[0-9]*/maps"):
        try:
            text = maps.read_text()
        except OSError:  # (a process gone meanwhile, or not ours to read)
            continue
        mapped.update(n for n in names if n in text)
    for name in names - mapped:
        with contextlib.suppress(OSError):
            (Path(SHM) / name).unlink()


@pytest.fixture(autouse=True)
def _cache_writes_done():
    """Each test ends with the disk caches' queued writes done (``DiskCache.write_behind``: LLVM objects
    go to disk on a writer thread), so that none lands in the time of the next test, which may reset
    the cache module's state or look at a directory."""
    yield
    from luminal.core import disk_cache

    disk_cache.flush()


def available_backends() -> list[str]:
    """Every registered backend that can run here: ``cuda`` only where a GPU is (``lm.cuda``)."""
    return [b for b in lm.backend_names() if b != "cuda" or lm.cuda.is_available()]


@pytest.fixture(params=available_backends())
def backend(request):
    """Every parity test runs on every backend available (``parity.BACKENDS``; not imported from there,
    so that pytest-xdist's controller, which runs no test, does not import torch)."""
    return request.param


@pytest.fixture(scope="module")
def one_torch_thread():
    """Tiny tensors: torch's thread pool only adds wake-up latency on a busy machine. A module uses it
    with ``pytestmark = pytest.mark.usefixtures("one_torch_thread")``."""
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope="module")
def cpu_guard():
    """Every cpu program of the module runs in guard mode (``luminal/backends/cpu/guard.py``): a kernel
    writing out of bounds (into slack or another buffer, where its results may still be right) fails the
    program. A module uses it with ``pytestmark = pytest.mark.usefixtures("cpu_guard")``."""
    from luminal.backends.cpu import guard

    saved = guard.BYTES
    guard.BYTES = saved or 64
    yield
    guard.BYTES = saved


FULL_TIER_BACKENDS = ("cuda-emulated",)  # their parity tests run in the full tier (``slow``)
FULL_TIER_DIRS = ("tests/cuda/",)  # and every test of the GPU lowering: the NVRTC check sees all their kernels
# and the audits: sweeps of one area's edge cases against torch (tests/**/test_*_audit.py, *_fuzz.py), whose
# ops the quick tier's parity tests check at ordinary values
FULL_TIER_SUFFIXES = ("_audit.py", "_fuzz.py")


@pytest.hookimpl(tryfirst=True)  # (before ``-m`` deselects by marker)
def pytest_collection_modifyitems(config, items):
    """Two tiers. ``python -m pytest`` (the README's command) runs the quick one: every test not marked
    ``slow`` (``addopts``); ``python -m pytest -m slow`` runs the rest, and ``.ci/run`` runs both, so CI
    runs every test. Here the tests of the GPU lowering are marked ``slow``: those in ``FULL_TIER_DIRS``
    and the parity tests on its emulator (a ``backend`` parameter in ``FULL_TIER_BACKENDS``: each runs
    on the cpu and reference backends in the quick tier too), with the NVRTC check of every kernel
    they generate; the audits (files ending in ``FULL_TIER_SUFFIXES``), thousands of edge cases
    that keep the quick tier near 8 minutes on 2 cores if they run only in the full one; and the
    fuzzers wherever they are (a test function named ``*fuzz*``: seeds of random programs, each a
    compile, whose ops and layouts the quick tier checks one by one).

    That check runs last, so it sees the kernels of every ``cuda-emulated`` test before it
    (``tests/cuda/test_generated_kernels_compile.py``)."""
    for item in items:
        spec = getattr(item, "callspec", None)
        on_emulator = spec is not None and spec.params.get("backend") in FULL_TIER_BACKENDS
        audit = item.nodeid.split("::", 1)[0].endswith(FULL_TIER_SUFFIXES)
        fuzz = "fuzz" in getattr(item, "originalname", item.name)
        if item.nodeid.startswith(FULL_TIER_DIRS) or on_emulator or audit or fuzz:
            item.add_marker(pytest.mark.slow)
    last = [i for i in items if i.nodeid.startswith("tests/cuda/test_generated_kernels_compile.py")]
    if last:
        items[:] = [i for i in items if i not in last] + last


# the cyclic collector's youngest generation, once the session's imports are frozen (CPython's is 700)
GC_THRESHOLD0 = 7000


def pytest_collection_finish(session):
    """Every process (the controller, each worker) has imported torch, numpy, luminal and the test
    modules by now: ``gc.freeze()`` moves those objects out of the collector's reach, and the youngest
    generation is collected every ``GC_THRESHOLD0`` allocations instead of 700. Each full collection
    walked that whole heap again (about 0.17 s each on a 2-vCPU EPYC) and the young ones ran every
    ~0.2 ms of graph building: tests/compile with tests/cpu/test_tune.py on one process spent 7.5-9 s of
    69-71 in the collector, 2.5 of 58.5 after. Objects made from here on are collected as ever (the
    tests that check something is freed make theirs inside the test), so no leak can hide."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(GC_THRESHOLD0, *gc.get_threshold()[1:])
