"""A Python number past a 16-bit tensor's range is inf in that dtype, as torch gives (``f16 + 1e300``
is inf), without numpy's "overflow encountered in cast" RuntimeWarning leaking from the graph's
constant (the cast that makes it inf is the intended one)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import luminal as lm


@pytest.mark.parametrize("dtype", [lm.float16, lm.bfloat16], ids=str)
def test_a_number_past_the_range_is_inf_without_a_warning(dtype, backend):
    g = lm.Graph()
    x = g.input("x", (2,), dtype=dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y = x + 1e300 if dtype is lm.float16 else x * 1e300
    got = np.asarray(lm.compile(y, backend=backend)(x=np.array([1, -1], np.float32).astype(dtype.np)),
                     np.float32)
    tdt = torch.float16 if dtype is lm.float16 else torch.bfloat16
    t = torch.tensor([1.0, -1.0], dtype=tdt)
    want = (t + 1e300 if dtype is lm.float16 else t * 1e300).float().numpy()
    np.testing.assert_array_equal(got, want)
