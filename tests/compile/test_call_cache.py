"""The compiled callable's per-signature cache (``compiler/api.py``: the call's signature, ``_Seen``,
and for a program without symbolic dims the backend's ``run_exact``): a call
whose inputs have the names, shapes, dtypes and contiguity of a call that passed every check skips the
binding and the checks. These tests run one sequence of calls twice, on a compiled function that keeps
its cache and on one whose cache is emptied before every call (every check made anew, as before the
cache), and require the same results and the same errors, call by call: new shapes after cached calls,
wrong dtypes after cached calls, symbolic dims changing, values that only a per-call check sees."""

from __future__ import annotations

import numpy as np
import pytest

import luminal as lm
from luminal import train
from luminal.compiler import api

f32 = np.float32
# The cache is the front end's, the same whatever runs the program: one backend per level (the graph
# interpreter, a kernel-graph backend) keeps these runs short.
BACKENDS = pytest.mark.parametrize("backend", ["reference", "cpu"])


def _outcome(f, call: dict):
    try:
        out = f(**call)
    except Exception as e:  # noqa: BLE001 - the error itself is compared
        return ("error", type(e), str(e))
    return ("ok", [np.array(o, copy=True) for o in (out if isinstance(out, tuple) else (out,))])


def _same_as_uncached(make, calls, backend="cpu"):
    """``make()`` -> outputs of a fresh graph; each call (a dict, or a callable returning one, so that
    arrays can be mutated in place between calls) on the cached and the uncached compiled function."""
    cached, uncached = lm.compile(make(), backend=backend), lm.compile(make(), backend=backend)
    got = []
    for call in calls:
        call = call() if callable(call) else call
        uncached._signatures.clear()
        uncached._exact = None
        want = _outcome(uncached, call)
        have = _outcome(cached, call)
        assert have[0] == want[0], (call, have, want)
        if want[0] == "ok":
            assert len(have[1]) == len(want[1])
            for a, b in zip(have[1], want[1]):
                assert a.shape == b.shape and a.dtype == b.dtype
                np.testing.assert_array_equal(a, b)
        else:
            assert have[1:] == want[1:], (call, have, want)
        got.append(have)
    assert len(uncached._signatures) <= 1
    return cached, got


def _xy():
    g = lm.Graph()
    x, y = g.input("x", ("B", "S")), g.input("y", ("B",), dtype=lm.int32)
    return [x.sum(-1) * 2 + y.float(), (y + 1) * 3]


def _r(*shape, seed=0, dtype=f32):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


@BACKENDS
def test_same_results_and_errors_as_binding_every_call(backend):
    held = _r(2, 3, seed=1)
    labels = np.array([1, 2], np.int32)

    def mutate():  # the same objects as an earlier call, new values in them
        held[:] = -held
        labels[:] = [7, -4]
        return {"x": held, "y": labels}

    calls = [
        {"x": held, "y": labels},
        {"x": held, "y": labels},  # the same objects: cached
        {"x": _r(2, 3, seed=2), "y": np.array([0, 5], np.int32)},  # new arrays, same signature
        mutate,
        {"y": labels, "x": held},  # the keywords in another order
        {"x": _r(4, 5, seed=3), "y": np.arange(4, dtype=np.int32)},  # B and S change
        {"x": held, "y": labels},  # back to a cached signature
        {"x": held.astype(np.float64), "y": labels},  # wrong dtype after cached calls
        {"x": held, "y": labels.astype(np.float32)},
        {"x": held, "y": np.arange(3, dtype=np.int32)},  # B contradicts
        {"x": held[None], "y": labels},  # wrong number of dims
        {"x": held},  # missing input
        {"x": held, "y": labels, "z": held},  # unknown input
        {"x": held, "y": labels.astype(np.int64)},  # converted on every call ...
        {"x": held, "y": np.array([1, 2**40], np.int64)},  # ... so a value out of int32 is still refused
        {"x": held, "y": np.array([3, 4], np.int64)},
        {"x": np.asfortranarray(_r(2, 3, seed=4)), "y": labels},  # not C-contiguous: copied
        {"x": _r(2, 6, seed=5)[:, ::2], "y": labels},  # strided
        {"x": _r(2, 3, seed=6).tolist(), "y": [1, 2]},  # Python lists: bound anew every call
        {"x": _r(2, 3, seed=6).tolist(), "y": [1, 2**40]},
        {"x": held, "y": labels},
        {"x": np.zeros((0, 3), f32), "y": np.zeros(0, np.int32)},  # B = 0
        {"x": held, "y": labels},
    ]
    f, got = _same_as_uncached(_xy, calls, backend)
    kinds = [o[0] for o in got]
    assert [i for i, k in enumerate(kinds) if k == "error"] == [7, 8, 9, 10, 11, 12, 14, 19], got
    # one entry per plain-array signature that passed: (2,3) (in two keyword orders), (4,5), an int64 y,
    # a non-contiguous x (Fortran order and strided alike), (0,3)
    assert len(f._signatures) == 6


def test_a_static_program_takes_the_exact_path_and_leaves_it_for_anything_else():
    """A program without symbolic dims, once a plain call passed every check, runs calls of the same
    arrays' names, shapes, dtypes and contiguity through the backend's ``run_exact`` (no signature);
    every other call falls through to the checks, with the same results and errors as binding every
    call (an array reshaped or retyped in place after a call included)."""
    def make():
        g = lm.Graph()
        x, y = g.input("x", (2, 3)), g.input("y", (2,), dtype=lm.int32)
        return [x.sum(-1) * 2 + y.float(), (y + 1) * 3]

    held, labels, flat = _r(2, 3, seed=1), np.array([1, 2], np.int32), _r(6, seed=7)
    exact_calls = []

    def reshaped():  # the object of an earlier call, given another shape in place
        held.shape = (3, 2)
        return {"x": held, "y": labels}

    def restored():
        held.shape = (2, 3)
        return {"x": held, "y": labels}

    calls = [
        {"x": held, "y": labels},
        {"x": held, "y": labels},  # exact from here
        {"x": _r(2, 3, seed=2), "y": np.array([0, 5], np.int32)},
        {"y": labels, "x": held},
        reshaped,  # refused: the shape is checked on every call, the same object or not
        restored,
        {"x": held.astype(np.float64), "y": labels},  # refused: another dtype
        {"x": np.asfortranarray(_r(2, 3, seed=4)), "y": labels},  # copied
        {"x": flat.reshape(2, 3), "y": labels},
        {"x": held, "y": labels.astype(np.int64)},  # converted
        {"x": held, "y": np.array([1, 2**40], np.int64)},  # refused: out of int32
        {"x": held},  # missing input
        {"x": held, "y": labels, "z": held},  # unknown input
        {"x": held.tolist(), "y": [1, 2]},
        {"x": held, "y": labels},
    ]
    f, got = _same_as_uncached(make, calls)
    assert [i for i, o in enumerate(got) if o[0] == "error"] == [4, 6, 10, 11, 12], got
    assert f._exact is not None
    program = f.runner.program
    original = program.run_exact

    def counting(arrays):
        out = original(arrays)
        exact_calls.append(out is not None)
        return out

    f._exact = counting
    fortran = np.asfortranarray(held)
    for call in ({"x": held, "y": labels}, {"x": _r(2, 3, seed=9), "y": labels}, {"x": fortran, "y": labels}):
        f(**call)
    assert exact_calls == [True, True, False]


@BACKENDS
def test_derived_and_negative_dims_after_cached_calls(backend):
    def make():
        g = lm.Graph()
        s = lm.sym("S")
        a, b = g.input("a", (s,)), g.input("b", (s + 1, 2 * s))
        return [a.sum() + b.sum(), b.unfold(0, 3, 1).sum(-1)]  # S-1 windows: an error for S < 2

    calls = [
        {"a": _r(3), "b": _r(4, 6)},
        {"a": _r(3, seed=1), "b": _r(4, 6, seed=1)},
        {"a": _r(3), "b": _r(5, 6)},  # S+1 contradicts S=3
        {"a": _r(3), "b": _r(4, 7)},  # 2*S contradicts
        {"a": _r(5), "b": _r(6, 10)},  # S changes
        {"a": _r(1), "b": _r(2, 2)},  # the unfold window is larger than S+1
        {"a": _r(0), "b": _r(1, 0)},
        {"a": _r(3, seed=2), "b": _r(4, 6, seed=2)},
        {"a": _r(1), "b": _r(2, 2)},  # again: a failed signature is not remembered
    ]
    _, got = _same_as_uncached(make, calls, backend)
    assert [o[0] for o in got] == ["ok", "ok", "error", "error", "ok", "error", "error", "ok", "error"]


def test_bfloat16_inputs_are_rounded_on_every_cached_call():
    def make():
        g = lm.Graph()
        return [g.input("h", ("N",), dtype=lm.bfloat16) * 1]

    vals = [np.array([1.00390625, 3.14159], f32), np.array([2.71828, -1.0001], f32)]
    _, got = _same_as_uncached(make, [{"h": v} for v in vals + vals])
    assert not np.array_equal(got[0][1][0], vals[0])  # rounded to bfloat16


@BACKENDS
def test_random_draws_follow_the_binding(backend):
    def make():
        g = lm.Graph()
        x = g.input("x", ("B", 3))
        return [x * (g.rand(x.shape) < 2).float(), g.rand(("B",)) * 0]

    f = lm.compile(make(), backend=backend)
    for b in (2, 5, 2, 0, 5):
        y, z = f(x=np.ones((b, 3), f32))
        assert y.shape == (b, 3) and z.shape == (b,)
        np.testing.assert_array_equal(y, 1)


@BACKENDS
def test_label_guard_runs_on_every_cached_call(backend):
    """The label guard reads values, not shapes: it still fires after cached calls, on a new array or
    one changed in place, with the message of a first call, and the run changes nothing."""
    def make():
        g = lm.Graph()
        x, y = g.input("x", ("B", 3)), g.input("y", ("B",), dtype=lm.int32)
        return [train.cross_entropy(x, y)]

    labels = np.array([0, 2, 1], np.int32)

    def bad_in_place():
        labels[1] = 9
        return {"x": np.zeros((3, 3), f32), "y": labels}

    def good_in_place():
        labels[1] = 2
        return {"x": np.zeros((3, 3), f32), "y": labels}

    calls = [{"x": np.zeros((3, 3), f32), "y": labels}] * 3 + [
        {"x": np.zeros((3, 3), f32), "y": np.array([0, -2, 1], np.int32)},
        bad_in_place, good_in_place,
        {"x": np.zeros((3, 3), f32), "y": np.array([3, -5, 9], np.int32)},
        {"x": np.zeros((3, 3), f32), "y": np.array([0, 1, -100], np.int32)},  # ignore_index
    ]
    _, got = _same_as_uncached(make, calls, backend)
    assert [o[0] for o in got] == ["ok"] * 3 + ["error", "error", "ok", "error", "ok"]
    assert got[3][1] is IndexError and "target holds class -2" in got[3][2]
    assert "target holds class 9" in got[4][2] and "target holds class 9" in got[6][2]


def test_report_binding_follows_the_latest_call():
    g = lm.Graph()
    f = lm.compile(g.input("x", ("B", 4)).sum(-1), backend="cpu")
    for b in (3, 5, 3):
        f(x=np.ones((b, 4), f32))
        assert f.report(show=False).memory["binding"] == {"B": b}


def test_the_cache_is_bounded(monkeypatch):
    monkeypatch.setattr(api, "MAX_SIGNATURES", 4)
    g = lm.Graph()
    f = lm.compile(g.input("x", ("B",)) + 1, backend="cpu")
    for b in range(10):
        np.testing.assert_array_equal(f(x=np.zeros(b, f32)), np.ones(b, f32))
    assert len(f._signatures) == 4
    assert [s[0][1] for s in f._signatures] == [(6,), (7,), (8,), (9,)]  # the oldest dropped first


@pytest.mark.parametrize("value", [np.float32(2.0), 2.0, np.ma.masked_array([2.0], dtype=f32)])
def test_values_that_are_not_plain_arrays_are_bound_every_call(value):
    g = lm.Graph()
    f = lm.compile(g.input("x", ()) * 2 if np.ndim(value) == 0 else g.input("x", (1,)) * 2, backend="cpu")
    for _ in range(2):
        np.testing.assert_array_equal(f(x=value), np.asarray(value, f32) * 2)
    assert not f._signatures
