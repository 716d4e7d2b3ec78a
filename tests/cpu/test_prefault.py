"""``backends/cpu/prefault.py``: a binding's storages are mapped when allocated, so a program's first
run does not fault its arena in page by page."""

from __future__ import annotations

import resource
import sys

import numpy as np
import pytest

from luminal.backends.cpu.prefault import MIN_BYTES, prefault
from luminal.backends.cpu.steps import Storage


def _faults_writing(array: np.ndarray) -> int:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    array[::1024] = 1.0  # (a float32 every 4 kB: every page)
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="MADV_POPULATE_WRITE is Linux's")
def test_a_prefaulted_array_is_written_without_page_faults_and_keeps_its_zeros():
    array = np.zeros(3 << 18, np.float32)  # 3 MB: below numpy's huge-page threshold, 768 pages
    if not prefault(array):
        pytest.skip("this kernel has no MADV_POPULATE_WRITE (Linux 5.14 and later)")
    assert not array.any()
    assert _faults_writing(array) <= 2


def test_small_arrays_are_left_alone():
    assert not prefault(np.zeros(MIN_BYTES // 8, np.float32))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="MADV_POPULATE_WRITE is Linux's")
def test_a_storage_is_allocated_mapped():
    memory = Storage(3 << 20).allocate()
    if not prefault(np.zeros(MIN_BYTES, np.uint8)):
        pytest.skip("this kernel has no MADV_POPULATE_WRITE (Linux 5.14 and later)")
    assert memory.nbytes == 3 << 20 and not memory.any()
    assert _faults_writing(memory.view(np.float32)) <= 2
