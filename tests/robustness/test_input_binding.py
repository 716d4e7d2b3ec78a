"""Python lists and numbers given for an input take the input's dtype; a ragged list is named."""

from __future__ import annotations

import numpy as np
import pytest

import luminal as lm


def _f(dtype, shape=(2, 4)):
    g = lm.Graph()
    x = g.input("x", shape, dtype=dtype)
    return lm.compile(x * 2)


@pytest.mark.parametrize("dtype,data,want", [
    (lm.float32, [[1.0] * 4] * 2, np.float32),  # before: "expected float32, got float64"
    (lm.float32, [[1] * 4] * 2, np.float32),
    (lm.float16, [[0.5] * 4] * 2, np.float16),
    (lm.bfloat16, [[1.5] * 4] * 2, np.float32),
    (lm.int32, [[3] * 4] * 2, np.int32),
    (lm.float32, ((1.0, 2.0, 3.0, 4.0), (5.0, 6.0, 7.0, 8.0)), np.float32),
])
def test_python_lists_take_the_inputs_dtype(dtype, data, want):
    out = _f(dtype)(x=data)
    assert out.dtype == want
    np.testing.assert_array_equal(out, np.asarray(data, np.float64) * 2)


def test_python_scalar_takes_the_inputs_dtype():
    assert float(_f(lm.float32, ())(x=1.25)) == 2.5


def test_float_list_for_an_int_input_is_still_refused():
    with pytest.raises(TypeError, match=r"input 'x': expected dtype int32, got float64"):
        _f(lm.int32)(x=[[1.5] * 4] * 2)


def test_numpy_arrays_keep_the_strict_dtype_check():
    with pytest.raises(TypeError, match=r"input 'x': expected dtype float32, got float64"):
        _f(lm.float32)(x=np.ones((2, 4)))


def test_ragged_list_names_the_input():
    """Before: numpy's bare "setting an array element with a sequence ... inhomogeneous shape"."""
    with pytest.raises(ValueError, match=r"input 'x': the nested list is ragged.*expected 2 dims \(2, 4\)"):
        _f(lm.float32)(x=[[1.0] * 4, [1.0] * 3])
