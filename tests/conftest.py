import pytest
from parity import BACKENDS


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
