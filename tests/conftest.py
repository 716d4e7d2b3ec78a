import os
import shutil
import tempfile

import pytest
from parity import BACKENDS

_session_cache: str | None = None


def pytest_configure(config):
    """The disk caches (``luminal/core/disk_cache.py``) go to a directory of this session, never the
    user's ``~/.cache/luminal``: the suite compiles thousands of programs. ``LUMINAL_TEST_CACHE_DIR``
    names a directory to keep between sessions instead (warm LLVM objects: a faster suite).

    The compile cache is off for the suite (``LUMINAL_CACHE=llvm,cuda``, unless ``LUMINAL_CACHE`` is
    set): tests spy on the compiler's stages (``monkeypatch`` on rolling, extraction, kernel building),
    and a program another test compiled earlier in the session would come from the cache without
    running them. ``tests/compile/test_compile_cache.py`` turns it on where it tests it."""
    global _session_cache
    keep = os.environ.get("LUMINAL_TEST_CACHE_DIR")
    if keep:
        os.environ["LUMINAL_CACHE_DIR"] = keep
    else:
        _session_cache = tempfile.mkdtemp(prefix="luminal-test-cache-")
        os.environ["LUMINAL_CACHE_DIR"] = _session_cache
    os.environ.setdefault("LUMINAL_CACHE", "llvm,cuda")


def pytest_unconfigure(config):
    if _session_cache is not None:
        shutil.rmtree(_session_cache, ignore_errors=True)


@pytest.fixture(params=BACKENDS)
def backend(request):
    """Every parity test runs on every backend available."""
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


def pytest_collection_modifyitems(config, items):
    """The NVRTC check of every generated GPU kernel runs last, so it sees the kernels of every
    ``cuda-emulated`` test before it (``tests/cuda/test_generated_kernels_compile.py``)."""
    last = [i for i in items if i.nodeid.startswith("tests/cuda/test_generated_kernels_compile.py")]
    if last:
        items[:] = [i for i in items if i not in last] + last
