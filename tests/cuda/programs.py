"""Small programs that exercise every GPU kernel shape the lowering makes (elementwise, the three
reductions, tiled / tensor-core / GEMV matmuls, gather, scatter-add, a rolled loop, a train step),
shared by the NVRTC compile check and the device smoke test."""

from __future__ import annotations

import numpy as np

import luminal as lm
from luminal import nn, train

_RNG = [np.random.default_rng(0)]


def _fresh() -> None:
    """Every builder draws the same numbers on every call (its inputs and its modules' weights), so
    two compiles of one builder are the same program on the same data."""
    _RNG[0] = np.random.default_rng(0)
    lm.manual_seed(0)


def _r(*shape, dtype=np.float32):
    return _RNG[0].standard_normal(shape).astype(dtype)


def _ints(high, shape):
    return _RNG[0].integers(0, high, shape).astype(np.int32)


def mlp_softmax():
    g = lm.Graph()
    x, w = g.input("x", (37, 24)), g.input("w", (24, 19))
    y = ((x @ w).relu() + 1.0).softmax(-1)
    return g, [y, x.sum(0).exp(), (x * x).mean(-1)], {"x": _r(37, 24), "w": _r(24, 19)}


def half_matmuls():
    g = lm.Graph()
    a, b = g.input("a", (40, 72), dtype=lm.float16), g.input("b", (72, 24), dtype=lm.float16)
    c, d = g.input("c", (3, 20, 48), dtype=lm.bfloat16), g.input("d", (3, 48, 17), dtype=lm.bfloat16)
    return g, [a @ b, (c @ d) * 2.0], {"a": _r(40, 72, dtype=np.float16), "b": _r(72, 24, dtype=np.float16),
                                       "c": lm.core.dtype.to_storage(_r(3, 20, 48), lm.bfloat16),
                                       "d": lm.core.dtype.to_storage(_r(3, 48, 17), lm.bfloat16)}


def gemv_and_long_rows():
    g = lm.Graph()
    v, m = g.input("v", (1, 300)), g.input("m", (300, 45))
    x = g.input("x", (4, 5000))
    return g, [v @ m, x.max(-1)[0], x.sum(-1)], {"v": _r(1, 300), "m": _r(300, 45), "x": _r(4, 5000)}


def split_rows():
    """Rows long enough, and few enough, that each is reduced by several blocks (the split path)."""
    g = lm.Graph()
    x = g.input("x", (2, 20000))
    h = g.input("h", (17000,), dtype=lm.float16)
    return g, [x.sum(-1), x.max(-1)[0], h.sum()], {"x": _r(2, 20000), "h": (_r(17000) / 64).astype(np.float16)}


def gather_scatter():
    g = lm.Graph()
    x = g.input("x", (6, 9))
    idx = g.input("idx", (6, 4), dtype=lm.int32)
    src = g.input("src", (6, 4))
    out = [lm.gather(x, 1, idx), lm.scatter_add(x, 1, idx, src)]
    return g, out, {"x": _r(6, 9), "idx": _ints(9, (6, 4)), "src": _r(6, 4)}


def rolled_layers():
    g = lm.Graph()
    x = g.input("x", (5, 16))
    h = x
    layers = [nn.Linear(16, 16) for _ in range(4)]
    for layer in layers:
        h = layer(h).tanh() + h
    return g, [h], {"x": _r(5, 16)}


BUILDERS = [mlp_softmax, half_matmuls, gemv_and_long_rows, split_rows, gather_scatter, rolled_layers]


def compiled(builder, backend="cuda-emulated"):
    """``(compiled function, inputs)`` of one of the programs above."""
    _fresh()
    g, outs, inputs = builder()
    return lm.compile(outs, backend=backend), inputs


def train_step(backend="cuda-emulated"):
    """``(step, inputs, compiled)``: a 2-layer MLP's AdamW train step (matmuls, reductions, the
    optimizer update, a cross-entropy) and the Compiled that runs it."""
    _fresh()
    model = nn.Sequential(nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 5))
    g = lm.Graph()
    x, y = g.input("x", (8, 12)), g.input("y", (8,), dtype=lm.int32)
    step = train.compile_step(train.cross_entropy(model(x), y), train.AdamW(model.parameters(), lr=1e-2),
                              backend=backend)
    inputs = {"x": _r(8, 12), "y": _ints(5, 8)}
    return step, inputs, step._update
