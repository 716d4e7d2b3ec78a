"""The caches tell NaNs apart by their bits. ``repr``, ``float.hex`` and JSON write every NaN alike, so
two kernels differing in a NaN constant's sign shared one compiled object (in a process and through
the LLVM index), two programs differing in a NaN pad value shared a compile-cache key, and a stored
program's NaN came back positive from a warm hit."""

from __future__ import annotations

import struct

import numpy as np
import pytest

import luminal as lm
from luminal.core.float_text import float_text, from_bits, nan_bits

X = np.array([1.0, -1.0, 2.0, -2.0], np.float32)


def _nan(negative: bool, payload: int = 0) -> float:
    return struct.unpack("<f", struct.pack("<I", 0x7FC00000 | payload | (0x80000000 if negative else 0)))[0]


def _where(c):
    g = lm.Graph()
    x = g.input("x", (4,))
    return lm.where(x > 0, x, c)


def _pad(c):
    g = lm.Graph()
    x = g.input("x", (4,))
    return x.pad((1, 2), value=c) * 2.0


def _bits(a):
    return a.view(np.uint32).tolist()


@pytest.fixture
def cache_on(tmp_path, monkeypatch):
    monkeypatch.setenv("LUMINAL_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("LUMINAL_CACHE", "1")
    return tmp_path


def test_float_text_tells_every_float_apart():
    values = [0.0, -0.0, 1e-45, 5e-324, float("inf"), -float("inf"), _nan(False), _nan(True), _nan(False, 1)]
    assert len({float_text(v) for v in values}) == len(values)
    for v in values[6:]:
        assert struct.pack(">d", from_bits(nan_bits(v))) == struct.pack(">d", v)
    with pytest.raises(ValueError):
        from_bits("7ff8")


@pytest.mark.parametrize("build", [_where, _pad], ids=["where", "pad"])
def test_programs_differing_in_a_nan_sign_keep_their_own_bits(build, cache_on):
    for negative in (False, True, False):  # the second and third reuse nothing of another's
        out = build(_nan(negative))
        want = lm.compile(out, backend="reference")(x=X)
        cold = lm.compile(out, backend="cpu")
        assert _bits(cold(x=X)) == _bits(want), negative
    for negative in (True, False):  # now warm: loaded from the compile cache, the NaN's sign intact
        out = build(_nan(negative))
        warm = lm.compile(out, backend="cpu")
        assert warm.report(show=False).cache["hit"]
        assert _bits(warm(x=X)) == _bits(lm.compile(out, backend="reference")(x=X)), negative
