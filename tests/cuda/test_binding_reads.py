"""A call's outputs are read out of the binding's pinned staging memory: an output that is its buffer
whole (the usual case) is copied out as it lies, any other view (a transpose, a slice, a masked pad) is
materialised; either way the caller gets a fresh array of its own, which later calls (the same staging
memory, replayed) never change."""

import numpy as np
import pytest

import luminal as lm


def _outputs(g):
    x, y = g.input("x", (3, 4)), g.input("y", (4, 3), dtype=lm.bfloat16)
    return {
        "whole": x * 2.0 + 1.0,  # the buffer whole
        "bfloat16": y * 3.0,  # 16-bit storage, a float32 carrier on the host
        "transposed": (x * 2.0).T,  # a view of the kernel's buffer
        "sliced": (x + 1.0)[1:, ::2],
        "padded": lm.nn.functional.pad(x * 1.0, (1, 1)),
        "scalar": (x * x).sum(),
        "column": (x + y.T.float()).sum(1, keepdim=True),
    }


@pytest.mark.parametrize("name", ["whole", "bfloat16", "transposed", "sliced", "padded", "scalar", "column"])
def test_replayed_outputs_are_fresh_and_right(name):
    g = lm.Graph()
    out = _outputs(g)[name]
    f = lm.compile(out, backend="cuda-emulated")
    ref = lm.compile(out, backend="reference")
    rng = np.random.default_rng(0)
    calls = [{"x": rng.standard_normal((3, 4)).astype(np.float32),
              "y": rng.standard_normal((4, 3)).astype(np.float32)} for _ in range(3)]
    got = [f(**c) for c in calls]  # the first launch by launch, the others replayed over the same staging
    for c, r in zip(calls, got, strict=True):
        want = ref(**c)
        assert r.shape == want.shape and r.dtype == want.dtype and r.flags.c_contiguous
        np.testing.assert_allclose(r, want, rtol=1e-6, atol=1e-6)
    assert not np.shares_memory(got[1], got[2])  # each call's result is its own
