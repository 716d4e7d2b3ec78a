"""Parity with torch for nansum, nanmean and count_nonzero (``frontend/ops/reduce_extra.py``): NaN
skipped (value and gradient), all-NaN and empty reductions, dims, dtypes."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from parity import check, rand

import luminal as lm

pytestmark = pytest.mark.usefixtures("one_torch_thread")

NAN = math.nan


def _ns(t):
    return torch if isinstance(t, torch.Tensor) else lm


def _with_nans(shape, seed=0, dtype=np.float32):
    x = rand(shape, seed=seed).astype(dtype)
    x.reshape(-1)[:: 3] = NAN
    return x


ARGS = [{}, {"dim": 1}, {"dim": (0, 2)}, {"dim": -1, "keepdim": True}, {"dim": [0, 1, 2]}]


@pytest.mark.parametrize("name", ["nansum", "nanmean"])
@pytest.mark.parametrize("kw", ARGS, ids=[str(k) for k in ARGS])
def test_nan_skipping_reductions(name, kw, backend):
    x = _with_nans((3, 4, 5))
    check(lambda t: _ns(t).__dict__[name](t, **kw), [x], backend=backend)  # gradient 0 at the NaNs
    check(lambda t: getattr(t, name)(**kw), [x.astype(np.float64)], backend=backend)
    check(lambda t: getattr(t, name)(**kw), [x], backend=backend, pre=lambda t: t.transpose(0, 2).transpose(1, 2))


@pytest.mark.parametrize("name", ["nansum", "nanmean"])
def test_nan_skipping_edges(name, backend):
    all_nan = np.array([[NAN, NAN], [1.0, NAN], [math.inf, -math.inf]], np.float32)
    check(lambda t: getattr(t, name)(1), [all_nan], backend=backend, grad="finite")  # 0 / NaN; inf - inf is NaN
    check(lambda t: getattr(t, name)(1), [np.zeros((2, 0), np.float32)], backend=backend)  # empty: 0 / NaN
    # (an all-NaN nanmean's gradient is 0 here, NaN in torch: 0 * inf in its backward)
    check(lambda t: getattr(t, name)(), [np.array(NAN, np.float32)], backend=backend, grad="finite")
    for d in (lm.float16, lm.bfloat16):
        x = lm.core.dtype.to_storage(_with_nans((4, 64)) * 100, d)
        check(lambda t: getattr(t, name)(-1), [x], dtypes=[d], backend=backend)
    check(lambda t: getattr(t, name)(0, dtype=torch.float64 if isinstance(t, torch.Tensor) else lm.float64),
          [_with_nans((3, 2))], backend=backend)


def test_nansum_of_integers_and_bools(backend):
    check(lambda t: t.nansum(0), [rand((3, 4), lm.int32, low=-5, high=5)], backend=backend)
    check(lambda t: t.nansum(), [rand((3, 4), lm.bool)], backend=backend)
    g = lm.Graph()
    with pytest.raises(TypeError, match="^nanmean: needs a float tensor, got int32"):
        g.input("i", (3,), dtype=lm.int32).nanmean()


@pytest.mark.parametrize("dim", [None, 0, 1, (0, 1), -1])
def test_count_nonzero(dim, backend):
    x = np.array([[0.0, -0.0, NAN, 1.0], [2.0, 0.0, math.inf, -3.0], [0.0, 0.0, 0.0, 0.0]], np.float32)
    kw = {} if dim is None else {"dim": dim}
    check(lambda t: _ns(t).count_nonzero(t, **kw), [x], backend=backend)  # NaN counts, -0.0 does not
    check(lambda t: t.count_nonzero(**kw), [rand((3, 4), lm.int32, low=-1, high=1)], backend=backend)
    check(lambda t: t.count_nonzero(**kw), [rand((3, 4), lm.bool)], backend=backend)
    check(lambda t: t.count_nonzero(**kw), [rand((3, 4), lm.float16)], dtypes=[lm.float16], backend=backend)
