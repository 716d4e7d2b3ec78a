"""``sinc`` and ``logaddexp2`` against torch: values and gradients, at 0 (sinc's 1, gradient 0), at
infinities and NaN, ties, large differences (no overflow), 16-bit inputs and int inputs to sinc."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from parity import check

import luminal as lm

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _ns(t):
    return torch if isinstance(t, torch.Tensor) else lm


def test_sinc_and_logaddexp2_on_every_backend(backend):
    x = np.array([0.0, 0.5, -1.25, 3.0, 1e-8, 100.5, -7.3], np.float32)
    y = np.array([0.0, -1.0, 2.0, 40.0, -3.0, 100.5, -90.0], np.float32)
    check(lambda a, b: (a.sinc(), _ns(a).logaddexp2(a, b), a.logaddexp2(b)), [x, y], backend=backend)


def test_special_values():
    inf, nan = math.inf, math.nan
    x = np.array([inf, -inf, inf, nan, 0.0, -0.0, 1e30], np.float32)
    y = np.array([inf, -inf, -inf, 1.0, 0.0, 5.0, -1e30], np.float32)
    check(lambda a, b: (_ns(a).logaddexp2(a, b), a.sinc()), [x, y], grad="finite")


@pytest.mark.parametrize("dtype", [np.float16, np.float64])
def test_other_float_dtypes(dtype):
    rng = np.random.default_rng(0)
    x, y = (rng.uniform(-8, 8, 40).astype(dtype) for _ in range(2))
    check(lambda a, b: (a.sinc(), _ns(a).logaddexp2(a, b)), [x, y])


def test_sinc_of_ints_is_float32():
    check(lambda a: a.sinc(), [np.array([0, 1, -2, 3], np.int32)])
    with pytest.raises(TypeError, match="logaddexp2: needs float tensors"):
        lm.logaddexp2(lm.Graph().input("i", (2,), dtype=lm.int32), 1)
