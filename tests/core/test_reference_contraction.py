"""The reference interpreter evaluates a sum of a product as one einsum (``backends/reference``); it must
still be the sum of the products, elementwise first: an operand broadcast along the summed axis must not
be factored out of the sum (``r * sum(x)``), which loses IEEE's ``0 * inf = NaN`` (and rounds otherwise)."""

import numpy as np
import pytest

import luminal as lm


@pytest.mark.parametrize("dtype", [lm.float32, lm.float64])
@pytest.mark.parametrize("axis", [0, 1])
def test_sum_over_a_broadcast_factor_keeps_nan(dtype, axis):
    g = lm.Graph()
    x = g.input("x", (3, 4), dtype=dtype)
    r = g.input("r", (1, 4) if axis == 0 else (3, 1), dtype=dtype)
    out = (x * r).sum(axis)
    xv = np.array([[0, 1.5, -2, 0], [3, 0, 0.5, -1], [1, 2, 0, 4]], dtype.np)
    rv = (np.array([[2, np.inf, 3, -np.inf]]) if axis == 0 else np.array([[np.inf], [2], [-np.inf]])).astype(dtype.np)
    with np.errstate(invalid="ignore"):
        want = np.sum(xv * rv, axis=axis)  # every product, then the sum: 0 * inf is NaN
    for backend in ("reference", "cpu"):
        got = lm.compile(out, backend=backend)(x=xv, r=rv)
        np.testing.assert_array_equal(got, want, err_msg=backend)


def test_division_by_a_broadcast_zero_summed():
    """The case that showed it: ``sum(x / y, 0)`` with a zero in ``y`` and a zero above it in ``x``."""
    g = lm.Graph()
    x = g.input("x", (2, 4), dtype=lm.float64)
    y = g.input("y", (1, 4), dtype=lm.float64)
    out = lm.div(x, y).sum(0)
    got = lm.compile(out, backend="reference")(x=np.array([[0, 1.5, -2, 0], [3, 0, 0.5, -1]]),
                                               y=np.array([[2, 0.7, 3, 0]]))
    assert np.isnan(got[3]) and np.isfinite(got[:3]).all()
