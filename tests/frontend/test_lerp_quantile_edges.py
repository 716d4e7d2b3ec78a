"""lerp in torch's two-sided form (``b`` exactly at weight 1, an infinite end kept where the other's
share is small) and quantile/nanquantile between equal infinite neighbours (that infinity, where
torch's lerp gives NaN): values and gradients against torch, or against the mathematically defined
value where torch's is NaN."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from parity import check

import luminal as lm

pytestmark = pytest.mark.usefixtures("one_torch_thread")

INF, NAN = math.inf, math.nan
A = np.array([1e8, 3e7, 1.0, -INF, -INF, 1e8, 2.0, -3.0, 5.0, INF], np.float32)
B = np.array([1.0, -2.5, 1e-8, 1.0, 1.0, 1.0, 7.0, 4.0, -1.0, 2.0], np.float32)
W = np.array([1.0, 1.0, 1.0, 0.75, 0.25, 0.99999, 0.3, -0.7, 1.6, 0.5], np.float32)


def test_lerp_tensor_weight(backend):
    """weight 1 gives b (the one-sided a + w*(b-a) gave 0 for lerp(1e8, 1, 1)); lerp(-inf, 1, 0.75)
    is -inf (it was NaN), at 0.25 NaN as torch's; gradients 1-w, w and b-a."""
    check(lambda a, b, w: a.lerp(b, w), [A, B, W], backend=backend, rtol=1e-6, atol=0)
    check(lambda a, b, w: torch.lerp(a, b, w) if isinstance(a, torch.Tensor) else lm.lerp(a, b, w),
          [A[:3].astype(np.float64), B[:3].astype(np.float64), W[:3].astype(np.float64)], backend=backend)


@pytest.mark.parametrize("w", [1.0, 0.75, 0.8, 0.25, 0.4999, 0.5, -0.6, 1.7, 0.0])
def test_lerp_scalar_weight(w, backend):
    """A Python weight picks its side at build time, in float32 as torch (``1 - 0.8`` from float32 0.8)."""
    check(lambda a, b: a.lerp(b, w), [A, B], backend=backend, rtol=1e-6, atol=0)


@pytest.mark.parametrize("dtype", [lm.float16, lm.bfloat16])
def test_lerp_16bit(dtype, backend):
    a = lm.core.dtype.to_storage(np.array([300.0, 3e4, -INF, 2.0]), dtype)
    b = lm.core.dtype.to_storage(np.array([1.0, -2.5, 1.0, 7.0]), dtype)
    w = lm.core.dtype.to_storage(np.array([1.0, 1.0, 0.75, 0.3]), dtype)
    check(lambda a, b, w: a.lerp(b, w), [a, b, w], dtypes=[dtype] * 3, backend=backend)
    check(lambda a, b: a.lerp(b, 1.0), [a, b], dtypes=[dtype] * 2, backend=backend)


X_INF = np.array([[-INF, -INF, 0.0, 1.0], [-INF, 1.0, 2.0, 3.0], [0.0, 1.0, INF, INF], [1.0, 2.0, 2.0, 3.0]],
                 np.float32)


def _defined_quantile(name, q, interpolation):
    """torch's quantile, except where the two neighbours are the same infinity: that infinity (torch:
    NaN, its lerp computing inf - inf)."""
    def op(t):
        out = getattr(t, name)(q, dim=1, interpolation=interpolation)
        s = t.sort(1).values
        pos = q * (t.shape[1] - 1)
        lo, hi = s[:, math.floor(pos)], s[:, math.ceil(pos)]
        return torch.where((lo == hi) & lo.isinf(), lo, out)
    return op


@pytest.mark.parametrize("name", ["quantile", "nanquantile"])
@pytest.mark.parametrize("interpolation", ["linear", "midpoint", "lower", "higher", "nearest"])
@pytest.mark.parametrize("q", [0.0, 0.25, 0.5, 1 / 3, 0.9, 1.0])
def test_quantile_infinite_neighbours(name, interpolation, q, backend):
    """An -inf and a finite neighbour give -inf (NaN before); two equal infinities give that infinity.
    Gradients compared at the finite elements (torch splits 1-w, w between two equal infinities,
    here the lower one takes it all)."""
    check(lambda t: getattr(t, name)(q, dim=1, interpolation=interpolation), [X_INF],
          torch_op=_defined_quantile(name, q, interpolation), backend=backend, grad="finite")


def test_quantile_ties_keep_torch_gradient():
    """Finite equal neighbours still interpolate (exactly), so the gradient split is torch's."""
    x = np.array([1.0, 2.0, 2.0, 3.0], np.float32)
    check(lambda t: t.quantile(0.5), [x])
    check(lambda t: t.quantile(0.4), [x])
