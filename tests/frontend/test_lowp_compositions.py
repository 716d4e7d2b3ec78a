"""16-bit inputs to compositions whose intermediates leave float16's range: ``F.normalize``,
``F.cosine_similarity``, ``F.pairwise_distance`` and ``F.local_response_norm`` summed squares in
float16 (inf at |x| ~ 300: normalize gave 0, pairwise_distance inf) and ``addcmul``/``addcdiv``
rounded after each primitive (``addcmul(x, x, x, value=1e-4)`` at 300 was inf). They compute in
float32 and round once, as torch's kernels (``_opmath``). Compared with torch and with float64."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from parity import check

import luminal as lm
from luminal.nn import functional as F

pytestmark = pytest.mark.usefixtures("one_torch_thread")

VEC = np.array([[3.0, 4.0, 0.0, 1.0], [1.0, -2.0, 0.5, 2.0]], np.float32)


def _f(t):
    return torch.nn.functional if isinstance(t, torch.Tensor) else F


def _run(fn, arrays, dtype):
    g = lm.Graph()
    xs = [g.input(f"x{i}", a.shape, dtype=dtype) for i, a in enumerate(arrays)]
    return np.asarray(lm.compile([fn(*xs)], backend="cpu")(**{f"x{i}": a for i, a in enumerate(arrays)})[0],
                      np.float64)


@pytest.mark.parametrize("dtype", [lm.float16, lm.bfloat16])
@pytest.mark.parametrize("scale", [300.0, 1e-4])
def test_norm_compositions_at_the_edges_of_16_bits(dtype, scale):
    a = (VEC * scale).astype(np.float16) if dtype is lm.float16 else VEC * scale
    b = a[::-1].copy()
    x64, y64 = a.astype(np.float64), b.astype(np.float64)
    n64 = np.sqrt((x64 * x64).sum(1, keepdims=True))
    want = {
        "normalize": (lambda x, y: F.normalize(x), x64 / n64),
        "cosine": (lambda x, y: F.cosine_similarity(x, y),
                   (x64 * y64).sum(1) / (n64[:, 0] * np.sqrt((y64 * y64).sum(1)))),
        "pairwise": (lambda x, y: F.pairwise_distance(x, y, eps=0.0), np.sqrt(((x64 - y64) ** 2).sum(1))),
    }
    for name, (fn, exact) in want.items():
        got = _run(fn, [a, b], dtype)
        np.testing.assert_allclose(got, exact, rtol=1e-2 if dtype is lm.bfloat16 else 2e-3, atol=1e-7 * scale,
                                   err_msg=name)


def test_local_response_norm_of_large_float16_values():
    x = (np.random.default_rng(0).uniform(200, 400, (1, 6, 3))).astype(np.float16)
    x64 = x.astype(np.float64)
    sq = np.pad(x64 * x64, ((0, 0), (1, 1), (0, 0)))
    exact = x64 / (1.0 + 1e-4 / 3 * (sq[:, :-2] + sq[:, 1:-1] + sq[:, 2:])) ** 0.75
    got = _run(lambda t: F.local_response_norm(t, 3), [x], lm.float16)
    np.testing.assert_allclose(got, exact, rtol=2e-3)


@pytest.mark.parametrize("dtype", [np.float16, "bfloat16"])
def test_addcmul_and_addcdiv_round_once(dtype):
    x = np.array([-300.0, 1.0, 300.0, 7.5, -0.25], np.float32)
    dt_ = lm.bfloat16 if dtype == "bfloat16" else None
    arr = x.astype(dtype) if dt_ is None else x
    check(lambda a: (a.addcmul(a, a, value=1e-4), a.addcdiv(a, a + 1000.0, value=0.3)), [arr],
          dtypes=None if dt_ is None else [dt_], grad=False)
    rng = np.random.default_rng(0)
    ins = [rng.standard_normal(64).astype(np.float32) for _ in range(3)]
    ins = [i.astype(dtype) for i in ins] if dt_ is None else ins
    check(lambda a, b, c: (a.addcmul(b, c, value=0.3), torch.addcdiv(a, b, c + 4.0, value=0.3)
                           if isinstance(a, torch.Tensor) else lm.addcdiv(a, b, c + 4.0, value=0.3)),
          ins, dtypes=None if dt_ is None else [dt_] * 3)
