"""The cpu backend's special schedules in guard mode (``luminal/backends/cpu/guard.py``: 64 guard bytes
around every storage, checked after each step): split reductions of long rows over one or several
axes and odd sizes, column sums, row norms, attention, batched products, gathers with a symbolic
length and a training step, each compared with the reference. The random-program fuzzers reach none
of the split schedules (a row of at least 65,536 static elements with at most 4 outputs), which is
where 58252f6's scratch overrun was; these shapes do."""

from __future__ import annotations

import numpy as np
import pytest

import luminal as lm
from luminal import nn, train
from luminal.nn import functional as F

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("cpu_guard")]

R = np.random.default_rng(0)


def _same(outs, **feeds):
    got = lm.compile(outs, backend="cpu")(**feeds)
    want = lm.compile(outs, backend="reference")(**feeds)
    for g_, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
        np.testing.assert_allclose(np.asarray(g_, np.float64), np.asarray(w, np.float64), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("shape", [(280, 280), (300, 300), (1000, 100), (20, 100, 100), (65537,), (3, 70000),
                                   (7, 300, 301), (100000, 2), (17, 4099), (2, 3, 50000), (1023, 1025)])
def test_reductions_of_long_rows(shape):
    x = R.standard_normal(shape).astype(np.float32)
    g = lm.Graph()
    a = g.input("x", shape)
    outs = [a.sum(), (a * a).mean(), a.max(), a.sum(0), a.sum(-1), (a.half() * a.half()).float().sum()]
    if len(shape) > 1:
        outs += [a.sum(tuple(range(1, len(shape)))), a.mean(tuple(range(len(shape) - 1)))]
    _same(outs, x=x)


def test_rows_attention_products_and_gathers():
    g = lm.Graph()
    x, q = g.input("x", (64, 300)), g.input("q", (2, 4, "T", 16))
    idx = g.input("i", ("N",), dtype=lm.int32)
    outs = [x.softmax(-1), F.layer_norm(x, (300,)), F.rms_norm(x, (300,)), x.log_softmax(0),
            F.scaled_dot_product_attention(q, q, q, is_causal=True), q @ q.transpose(-1, -2),
            x.index_select(0, idx), x.sum(0)]
    for t, n in ((33, 5), (1, 0), (70, 64)):
        _same(outs, x=R.standard_normal((64, 300)).astype(np.float32),
              q=R.standard_normal((2, 4, t, 16)).astype(np.float32), i=R.integers(0, 64, n).astype(np.int32))


def test_a_cnn_training_step():
    lm.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                          nn.Linear(8 * 14 * 14, 10))
    g = lm.Graph()
    x, y = g.input("x", ("B", 1, 28, 28)), g.input("y", ("B",), dtype=lm.int32)
    step = train.compile_step(train.cross_entropy(model(x), y), train.AdamW(model.parameters(), lr=1e-3),
                              backend="cpu")
    for b in (32, 7):
        loss = step(x=R.standard_normal((b, 1, 28, 28)).astype(np.float32), y=R.integers(0, 10, b).astype(np.int32))
        assert np.isfinite(loss)
