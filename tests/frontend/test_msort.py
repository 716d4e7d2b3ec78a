"""torch.msort (``lm.msort``, ``x.msort()``): the values sorted along the first dim, NaN last, with the
gradient going back to where each value came from; checked against torch."""

import numpy as np
import pytest
from parity import check

import luminal as lm

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
def test_msort_matches_torch(dtype):
    rng = np.random.default_rng(0)
    arr = rng.permutation(24).reshape(4, 3, 2).astype(dtype)  # distinct: the gradient's places are determined
    kw = {"grad": "finite"} if arr.dtype.kind == "f" else {"grad": False}
    check(lambda t: t.msort(), [arr], **kw)
    check(lambda t: (lm.msort(t) if isinstance(t, lm.GraphTensor) else __import__("torch").msort(t)), [arr], **kw)


def test_msort_puts_nan_last():
    arr = np.array([[2.0, np.nan], [np.nan, -1.0], [0.5, 3.0]], np.float32)
    check(lambda t: t.msort(), [arr], grad=False)


def test_msort_of_a_0d_tensor_is_itself():
    check(lambda t: t.msort(), [np.array(2.5, np.float32)])
