import pytest

from luminal.backends.cuda import driver


@pytest.fixture(scope="module")
def cuda_device():
    """A module of tests that need an NVIDIA GPU (``pytestmark = [pytest.mark.gpu,
    pytest.mark.usefixtures("cuda_device")]``) is skipped, with the driver's reason, without one."""
    ok, why = driver.device_status()
    if not ok:
        pytest.skip(why)
