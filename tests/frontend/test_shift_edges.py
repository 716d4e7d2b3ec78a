"""Shifts by amounts outside [0, 31] follow torch on every backend (issue 29, item 8): ``x << s`` is
0 and ``x >> s`` the sign fill (0 or -1) for a negative amount or one of 32 and more; ``x >> -1``
used to compute ``x << 1``."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import luminal as lm

pytestmark = pytest.mark.usefixtures("one_torch_thread")

X = np.array([5, -5, 1, -1, 0, 2**31 - 1, -2**31, 123456789, -987654321], np.int32)
AMOUNTS = [-2**31, -33, -32, -2, -1, 0, 1, 7, 30, 31, 32, 33, 63, 64, 100, 2**31 - 1]


@pytest.mark.parametrize("op", ["left", "right"])
def test_shift_by_tensor_amounts_is_torchs(op, backend):
    x = np.repeat(X, len(AMOUNTS))
    s = np.tile(np.array(AMOUNTS, np.int32), len(X))
    g = lm.Graph()
    tx, ts = g.input("x", x.shape, dtype=lm.int32), g.input("s", s.shape, dtype=lm.int32)
    out = tx << ts if op == "left" else tx >> ts
    got = lm.compile(out, backend=backend)(x=x, s=s)
    a, b = torch.from_numpy(x), torch.from_numpy(s)
    want = (a << b if op == "left" else a >> b).numpy()
    bad = got != want
    assert not bad.any(), f"{x[bad]} {'<<' if op == 'left' else '>>'} {s[bad]}: {got[bad]}, torch {want[bad]}"


@pytest.mark.parametrize("amount", [-1, -40, 32, 40])
def test_shift_by_a_python_int_is_torchs(amount, backend):
    g = lm.Graph()
    tx = g.input("x", X.shape, dtype=lm.int32)
    left, right = lm.compile([tx << amount, lm.bitwise_right_shift(tx, amount)], backend=backend)(x=X)
    a = torch.from_numpy(X)
    np.testing.assert_array_equal(left, (a << amount).numpy())
    np.testing.assert_array_equal(right, (a >> amount).numpy())


def test_right_shift_by_minus_one_is_not_a_left_shift(backend):
    g = lm.Graph()
    tx = g.input("x", (3,), dtype=lm.int32)
    got = lm.compile(tx >> -1, backend=backend)(x=np.array([3, -3, 0], np.int32))
    np.testing.assert_array_equal(got, [0, -1, 0])
