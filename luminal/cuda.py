"""``lm.cuda``: whether ``backend="cuda"`` can run here (torch's ``torch.cuda.is_available()``).

Importing luminal needs no CUDA package; asking loads cuda-python and probes the driver once per
process (``backends/cuda/driver.py``)."""

from __future__ import annotations


def is_available() -> bool:
    """True when cuda-python is installed and the driver reports a CUDA device."""
    return status()[0]


def status() -> tuple[bool, str]:
    """(available, why): a description of the devices, or the reason there is none."""
    from luminal.backends.cuda.driver import device_status

    return device_status()
