"""Integer division by zero raises ZeroDivisionError on every backend, as torch does (issue 29, item
8): ``//``, ``floor_divide``, ``div(rounding_mode=...)``, ``%``/``remainder`` and ``fmod`` on int32
tensors with a zero divisor. The check is on the values of a run (``Graph.guard``): the same program
runs with non-zero divisors, and the error names the op and the user's line. Float division by zero
stays IEEE (inf, NaN), and a program that does not compute the division is not guarded by it."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import luminal as lm

pytestmark = pytest.mark.usefixtures("one_torch_thread")

OPS = {  # name: (luminal op, torch op, the op the error names)
    "floordiv_operator": (lambda a, b: a // b, lambda a, b: a // b, "floor_divide"),
    "floor_divide": (lm.floor_divide, torch.floor_divide, "floor_divide"),
    "div_trunc": (lambda a, b: lm.div(a, b, rounding_mode="trunc"),
                  lambda a, b: torch.div(a, b, rounding_mode="trunc"), "div"),
    "div_floor": (lambda a, b: lm.div(a, b, rounding_mode="floor"),
                  lambda a, b: torch.div(a, b, rounding_mode="floor"), "div"),
    "mod_operator": (lambda a, b: a % b, lambda a, b: a % b, "remainder"),
    "remainder": (lm.remainder, torch.remainder, "remainder"),
    "fmod": (lm.fmod, torch.fmod, "fmod"),
}
A = np.array([7, -7, 0, 2**31 - 1, -2**31, 5], np.int32)
GOOD = np.array([2, -3, 5, 7, 3, -1], np.int32)


def _program(op, backend, shape_b=A.shape):
    g = lm.Graph()
    a, b = g.input("a", A.shape, dtype=lm.int32), g.input("b", shape_b, dtype=lm.int32)
    return lm.compile(op(a, b), backend=backend)


@pytest.mark.parametrize("name", sorted(OPS))
def test_a_zero_divisor_raises_naming_the_op_and_line(name, backend):
    op, top, shown = OPS[name]
    f = _program(op, backend)
    np.testing.assert_array_equal(f(a=A, b=GOOD), top(torch.from_numpy(A), torch.from_numpy(GOOD)).numpy())
    for bad, zeros in ((np.array([2, 0, 5, 7, 3, -1], np.int32), 1), (np.zeros(6, np.int32), 6)):
        with pytest.raises(ZeroDivisionError) as e:
            f(a=A, b=bad)
        msg = str(e.value)
        assert msg.startswith(f"{shown}: integer division by zero"), msg
        assert f"{zeros} zero" in msg, msg
        assert f"called at {__file__}:" in msg, msg  # the user's line (the lambda's, in OPS)
    np.testing.assert_array_equal(f(a=A, b=GOOD), top(torch.from_numpy(A), torch.from_numpy(GOOD)).numpy())


@pytest.mark.parametrize("name", sorted(OPS))
def test_a_zero_python_divisor_raises(name, backend):
    op, _, shown = OPS[name]
    g = lm.Graph()
    a = g.input("a", A.shape, dtype=lm.int32)
    f = lm.compile(op(a, 0), backend=backend)
    with pytest.raises(ZeroDivisionError, match=f"^{shown}: integer division by zero"):
        f(a=A)


def test_a_broadcast_zero_divisor_raises(backend):
    f = _program(lambda a, b: a // b, backend, shape_b=(1,))
    np.testing.assert_array_equal(f(a=A, b=np.array([2], np.int32)), A // 2)
    with pytest.raises(ZeroDivisionError):
        f(a=A, b=np.array([0], np.int32))


def test_an_empty_quotient_does_not_raise(backend):
    """torch: ``empty // 0`` is empty, no error (no element divides by zero)."""
    g = lm.Graph()
    a, b = g.input("a", ("N",), dtype=lm.int32), g.input("b", (1,), dtype=lm.int32)
    f = lm.compile(a % b, backend=backend)
    assert f(a=np.zeros(0, np.int32), b=np.zeros(1, np.int32)).shape == (0,)


def test_a_program_without_the_division_is_not_guarded_by_it(backend):
    g = lm.Graph()
    a, b = g.input("a", A.shape, dtype=lm.int32), g.input("b", A.shape, dtype=lm.int32)
    _ = a // b  # built, never compiled
    f = lm.compile(a + b, backend=backend)
    np.testing.assert_array_equal(f(a=A, b=np.zeros(6, np.int32)), A)


@pytest.mark.parametrize("name", sorted(OPS))
def test_float_division_by_zero_stays_ieee(name, backend):
    op, top, _ = OPS[name]
    x = np.array([1.5, -1.5, 0.0, np.inf], np.float32)
    z = np.zeros(4, np.float32)
    g = lm.Graph()
    a, b = g.input("a", x.shape), g.input("b", z.shape)
    got = lm.compile(op(a, b), backend=backend)(a=x, b=z)
    want = top(torch.from_numpy(x), torch.from_numpy(z)).numpy()
    np.testing.assert_array_equal(got, want)


def test_a_nonzero_constant_divisor_adds_no_guard():
    """A divisor known not to be zero (a Python int, a constant array) costs nothing at run time."""
    g = lm.Graph()
    a = g.input("a", A.shape, dtype=lm.int32)
    _ = (a // 3, a % -2, lm.fmod(a, g.constant(np.array([1, 2, 3, 4, 5, 6], np.int32))))
    assert g.guards == []


@pytest.mark.parametrize("how", ["setitem", "scatter_reduce_mean"])
def test_divisions_whose_divisor_cannot_be_zero_add_no_guard(how):
    """Writes through an index (a mean over repeated positions) and scatter_reduce's mean divide an
    int tensor by a count clamped to at least 1: no run-time check (a second program on every call,
    naming an op the user never wrote), and the values are still torch's."""
    g = lm.Graph()
    x = g.input("x", (4, 3), dtype=lm.int32)
    i = g.input("i", (2, 3), dtype=lm.int32)
    xs = np.arange(12, dtype=np.int32).reshape(4, 3)
    idx = np.array([[0, 1, 0], [0, 3, 0]], np.int32)
    src = np.array([[5, 6, 7], [9, 10, 11]], np.int32)
    if how == "setitem":  # x[[0, 0, 3]] = [5, 7, 9]: position 0 written twice takes the mean, 6
        y = x + 0
        y[g.constant(np.array([0, 0, 3], np.int32))] = g.constant(np.array([[5] * 3, [7] * 3, [9] * 3], np.int32))
        want = torch.tensor(xs)
        want[[0, 3]] = torch.tensor([[6] * 3, [9] * 3], dtype=torch.int32)
    else:
        y = x.scatter_reduce(0, i, g.constant(src), "mean")
        want = torch.tensor(xs).scatter_reduce(0, torch.tensor(idx, dtype=torch.int64), torch.tensor(src), "mean")
    assert g.guards == []
    np.testing.assert_array_equal(lm.compile(y, backend="cpu")(x=xs, i=idx), want.numpy())
