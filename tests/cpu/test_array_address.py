"""``compiled._address``: a caller array's data pointer, read from numpy's array object at an offset
found at import by comparison with ``ctypes.data`` (the per-call rebind of a new array object). It
must agree with ``ctypes.data`` for every array a call may hand over, and fall back to the buffer
views when no offset was found."""

import numpy as np
import pytest

from luminal.backends.cpu import compiled


def _arrays():
    base = np.arange(60, dtype=np.float32).reshape(6, 10)
    ro = np.ones(4, np.float64)
    ro.flags.writeable = False
    mapped = np.frombuffer(bytearray(64), np.int32)
    return [base, base[2:], base[:, 3:], base.T, np.empty(0, np.float16), ro, mapped, np.zeros((), np.int64),
            np.ones(7, bool), np.ascontiguousarray(base[::2])]


def test_the_data_field_is_found_on_this_numpy():
    assert compiled._DATA_FIELD is not None  # (CPython and numpy's array object: found, so the fast path runs)


@pytest.mark.parametrize("fast", [True, False], ids=["data field", "buffer views"])
def test_the_address_is_the_arrays_data_pointer(fast, monkeypatch):
    if not fast:
        monkeypatch.setattr(compiled, "_DATA_FIELD", None)
    for a in _arrays():
        assert compiled._address(a) == a.ctypes.data, (a.shape, a.dtype, a.flags)
