"""Assigning ``State.data`` makes the array the State's storage, which compiled programs read and write in
place; it is checked at the assignment, the user's line. Before, anything was taken: a read-only array
(``np.load(mmap_mode="r")``) made the cpu program write into read-only memory (a segfault), an immutable
``bytes`` buffer was changed, a (2, 3) array for a (3,) State was read as its first row on one backend and
refused on another, and a failed update after the run left the other States written (a half update)."""

from __future__ import annotations

import numpy as np
import pytest

import luminal as lm
from luminal.frontend.state import State


def _program(backend):
    a, b = State(np.zeros(3, np.float32), name="a"), State(np.zeros(3, np.float32), name="b")
    g = lm.Graph()
    x = g.input("x", (3,))
    g.assign(a, g.state(a) + x)
    g.assign(b, g.state(b) + 2 * x)
    return a, b, lm.compile(g.state(a) * 1, backend=backend)


@pytest.mark.parametrize("value,error,match", [
    (np.zeros((2, 3), np.float32), ValueError, r"must be a float32 array of shape \(3,\), got float32 \(2, 3\)"),
    (np.zeros((1, 3), np.float32), ValueError, r"must be .* got float32 \(1, 3\)"),
    (np.zeros(3, np.int64), ValueError, r"must be .* got int64 \(3,\)"),
    (np.frombuffer(bytes(12), np.float32), ValueError, "must be writeable"),
    ([1.0, 2.0, 3.0], TypeError, "must be a numpy array, got list"),
])
def test_a_data_array_the_programs_cannot_use_is_refused_where_it_is_assigned(value, error, match, backend):
    a, b, f = _program(backend)
    with pytest.raises(error, match=r"^State b \(3,\) float32: \.data " + match):
        b.data = value
    f(x=np.ones(3, np.float32))  # b kept its own array: both updated
    np.testing.assert_array_equal(a.data, [1, 1, 1])
    np.testing.assert_array_equal(b.data, [2, 2, 2])


def test_an_array_of_the_states_shape_and_dtype_becomes_its_storage(backend, tmp_path):
    a, b, f = _program(backend)
    mine = np.full(3, 10.0, np.float32)
    b.data = mine
    f(x=np.ones(3, np.float32))
    assert b.data is mine
    np.testing.assert_array_equal(mine, [12, 12, 12])  # (written in place, as torch's p.data = t aliases t)
    np.save(tmp_path / "a.npy", np.arange(3, dtype=np.float32))
    with pytest.raises(ValueError, match="must be writeable"):
        a.data = np.load(tmp_path / "a.npy", mmap_mode="r")
    a.set(np.load(tmp_path / "a.npy", mmap_mode="r"))  # set converts (copies) instead
    np.testing.assert_array_equal(f(x=np.zeros(3, np.float32)), [0, 1, 2])


def test_states_and_updates_of_the_wrong_kind_are_named_at_the_call():
    """Before: bare AttributeErrors ('numpy.ndarray' object has no attribute 'graph', ... 'name')."""
    g = lm.Graph()
    x, a = g.input("x", ("B", 3)), State(np.zeros(3, np.float32), name="a")
    cases = [(lambda: lm.compile([x * 1], updates={"a": x.sum(0)}), r"^compile: updates: a key must be a State"),
             (lambda: lm.compile([x * 1], updates={x: x}), r"^compile: updates: a key must be a State.* GraphTensor"),
             (lambda: lm.compile([x * 1], updates=[(a, x.sum(0))]), r"^compile: updates must be a dict"),
             (lambda: g.assign(a, np.ones(3, np.float32)), r"^assign: the value for State a .* got ndarray"),
             (lambda: g.assign(a, 1.0), r"^assign: the value for State a .* got float .*g\.constant"),
             (lambda: g.assign(np.zeros(3), x.sum(0)), r"^assign: expected a State to write, got ndarray"),
             (lambda: g.state(np.ones(3, np.float32)), r"^state: expected a State .* got ndarray")]
    for call, match in cases:
        with pytest.raises(TypeError, match=match):
            call()


def test_a_bfloat16_states_data_must_hold_bfloat16_values(backend):
    """A bfloat16 State's storage is float32 holding bfloat16 values. ``p.data = [1.1, 3.14159]`` was taken
    as is: the cpu program read 1.1, the reference 1.1015625. set() rounds."""
    s = State(np.zeros(2, np.float32), lm.bfloat16, name="p")
    with pytest.raises(ValueError, match=r"^State p \(2,\) bfloat16: \.data must hold bfloat16 values"):
        s.data = np.array([1.1, 3.14159], np.float32)
    s.data = np.array([1.1015625, np.nan], np.float32)  # exact (and NaN) values are storage as they are
    s.set(np.array([1.1, 3.14159], np.float32))
    np.testing.assert_array_equal(s.data, [1.1015625, 3.140625])
