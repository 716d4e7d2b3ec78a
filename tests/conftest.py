import pytest
from parity import BACKENDS


@pytest.fixture(params=BACKENDS)
def backend(request):
    """Every parity test runs on every backend available."""
    return request.param
