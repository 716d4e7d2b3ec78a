"""cumsum, cummax/cummin and logcumsumexp as log-step scans (reduce.py ``_scan``): no (n, n) buffer, in
the forward or the backward graph, for a static dim or a symbolic one (blocks of ``_SCAN_BLOCK`` above
128**2 or when symbolic: two levels, then a window over ceil(n / 128**2) block totals). They were
masked reductions over an (n, n) lower-triangular window: 2 x 100000 float32 cumsum took 9.9 GB, and
the reference backend ran out of memory. Values and gradients against torch at sizes that cross blocks
and levels (a block of 3 here makes small sizes reach every level), with NaN, infinities and ties;
float32 cumsum and logcumsumexp within half an ulp of the exact results, as torch's."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from parity import check, rand
from sizes import check_sizes

import luminal as lm
from luminal import train
from luminal.core.symbolic import evaluate
from luminal.frontend.ops import reduce as reduce_ops

pytestmark = pytest.mark.usefixtures("one_torch_thread")

F32, F64, I32, BOOL = lm.float32, lm.float64, lm.int32, lm.bool

# op on a 2-D tensor along dim 1; a float output is weighted by a second input ``w`` so that the
# gradient that reaches the scan differs per element (the plain sum's is all ones)
OPS = {
    "cumsum": lambda t, w: t.cumsum(1) * w,
    "cummax": lambda t, w: (t.cummax(1).values * w, t.cummax(1).indices),
    "cummin": lambda t, w: (t.cummin(1).values * w, t.cummin(1).indices),
    "logcumsumexp": lambda t, w: t.logcumsumexp(1) * w,
}


def _largest_node(g: lm.Graph, env) -> int:
    return max(math.prod(evaluate(d, env) for d in node.shape) for node in g.nodes)


@pytest.mark.parametrize("shape", [(2, 4096), (2, "N")], ids=["static", "symbolic"])
@pytest.mark.parametrize("name", OPS)
def test_no_quadratic_buffer(name, shape):
    """No node of the forward or backward graph holds more than a few times the input's elements (the
    window made one of 2 x n x n)."""
    g = lm.Graph()
    x = g.input("x", shape)
    outs = OPS[name](x, g.input("w", shape))
    outs = outs if isinstance(outs, tuple) else (outs,)
    train.grad(outs[0].sum(), x)
    n = 4096
    assert _largest_node(g, {"N": n}) <= 4 * 2 * n


@pytest.mark.parametrize("n", [1, 2, 7, 8, 9, 64, 1000])
@pytest.mark.parametrize("name", OPS)
def test_static_sizes(name, n, backend):
    x, w = rand((3, n), seed=n, low=-3, high=3), rand((3, n), seed=n + 1)
    check(OPS[name], [x, w], backend=backend)
    if name != "logcumsumexp":
        ties = np.random.default_rng(n).integers(-2, 3, (3, n))
        check(OPS[name], [ties.astype(np.float32), w], backend=backend)
        if name != "cumsum":
            check(OPS[name], [ties.astype(np.int32), w], backend=backend)


@pytest.mark.parametrize("dim", [0, 1, -1, -3])
@pytest.mark.parametrize("name", ["cumsum", "cummax", "cummin", "logcumsumexp"])
def test_other_dims(name, dim, backend):
    x, w = rand((5, 6, 3), seed=3), rand((5, 6, 3), seed=4)
    op = {"cumsum": lambda t, w: t.cumsum(dim) * w, "logcumsumexp": lambda t, w: t.logcumsumexp(dim) * w,
          "cummax": lambda t, w: (t.cummax(dim).values * w, t.cummax(dim).indices),
          "cummin": lambda t, w: (t.cummin(dim).values * w, t.cummin(dim).indices)}[name]
    check(op, [x, w], backend=backend)


@pytest.mark.parametrize("dtype", [I32, F64], ids=str)
def test_a_scan_of_one_is_a_new_tensor(dtype, backend):
    """No step runs over a dim of 1: the result is still a handle of its own, so an in-place method on it
    leaves the input alone, as torch's new tensor."""
    def op(t):
        y, z = t.cumsum(0), t.logcumsumexp(0) if dtype is F64 else t.cumsum(1)
        y.add_(1)
        z.mul_(2)
        return t * 1, y, z

    check(op, [rand((1, 3), dtype, seed=11)], backend=backend, grad=False)


@pytest.mark.parametrize("dtype", [I32, BOOL, lm.float16, lm.bfloat16, F64], ids=str)
def test_cumsum_dtypes(dtype, backend):
    x = rand((3, 300), dtype, seed=4, low=-3 if dtype is I32 else 0, high=3 if dtype is I32 else 1)
    check(lambda t: t.cumsum(1), [x], dtypes=[dtype], backend=backend)
    check(lambda t: tuple(t.cummax(1)), [x], dtypes=[dtype], backend=backend)
    check(lambda t: tuple(t.cummin(1)), [x], dtypes=[dtype], backend=backend)


def test_cumsum_int32_exact(backend):
    x = np.random.default_rng(5).integers(-2**20, 2**20, (2, 5000)).astype(np.int32)
    check(lambda t: t.cumsum(1), [x], backend=backend)


def test_nan_and_infinities(backend):
    x = rand((4, 40), seed=6)
    x[0, 3] = x[0, 30] = np.nan
    x[1, 5] = np.inf
    x[1, 20] = -np.inf
    x[2, :17] = -np.inf
    x[3, 10] = x[3, 25] = np.inf
    check(lambda t: (t.cumsum(1), *t.cummax(1), *t.cummin(1), t.logcumsumexp(1)), [x], backend=backend,
          grad="finite")


def test_logcumsumexp_extremes(backend):
    x = np.array([[-np.inf, -np.inf, 1.0, 1000.0, -np.inf, 1000.0, -1000.0, 88.0, 89.0],
                  [1.0, 1.0, 2.0, np.inf, 3.0, -np.inf, np.inf, 1e30, -1e30]], np.float32)
    check(lambda t: t.logcumsumexp(1), [x], backend=backend, grad="finite")
    check(lambda t: t.logcumsumexp(0), [rand((300, 2), seed=7, low=-80, high=80)], backend=backend)
    # values only: torch's gradient of the first two is 1 each (in float64 too), the exact one
    # 1 + 5/2 and 5/2 (each later prefix splits evenly between them), which is what this gives
    huge = np.array([3e38, 3e38, -3e38, 0.0, 1e-30, -np.inf, 5.0], np.float32)
    check(lambda t: t.logcumsumexp(0), [huge], backend=backend, grad=False)


# blocked scans: a dim above 128**2, or a symbolic one (one compiled graph at several sizes); a block
# of 3 reaches both blocked levels and, for a symbolic dim, the window over the last level's totals
# (ceil(n / 9) of them) at small n
SYM_OPS = {
    "cumsum": lambda t, w: t.cumsum(0) * w,
    "cummax": lambda t, w: (t.cummax(0).values * w, t.cummax(0).indices),
    "cummin": lambda t, w: (t.cummin(1).values * w, t.cummin(1).indices),
    "logcumsumexp": lambda t, w: t.logcumsumexp(0) * w,
}


def _blocked_inputs(name, n, dtype=F32):
    at = (n, 3) if name != "cummin" else (3, n)
    x = rand(at, dtype, seed=n, low=-3, high=3)
    if name.startswith("cum") and dtype is F32 and n > 4:
        x = np.round(x)  # ties
        if name != "cumsum":
            x[tuple(s // 2 for s in at)] = np.nan
    return [x, rand(at, seed=n + 1)]


@pytest.mark.parametrize("block", [3, 128])
@pytest.mark.parametrize("name", SYM_OPS)
def test_symbolic_dim(name, block, backend, monkeypatch):
    monkeypatch.setattr(reduce_ops, "_SCAN_BLOCK", block)
    shape = ("N", 3) if name != "cummin" else (3, "N")
    check_sizes(SYM_OPS[name], lambda n: _blocked_inputs(name, n), [shape, shape], backend=backend,
                sizes=(40, 0, 1, 3, 9, 10, 28, 200))
    if name != "logcumsumexp":  # (torch's is not defined for ints)
        check_sizes(SYM_OPS[name], lambda n: _blocked_inputs(name, n, I32), [shape, shape], backend=backend,
                    sizes=(40, 7))


@pytest.mark.parametrize("n", [10, 28, 40])
@pytest.mark.parametrize("name", SYM_OPS)
def test_static_blocked(name, n, backend, monkeypatch):
    monkeypatch.setattr(reduce_ops, "_SCAN_BLOCK", 3)
    check(SYM_OPS[name], _blocked_inputs(name, n), backend=backend)
    if name != "logcumsumexp":
        check(SYM_OPS[name], _blocked_inputs(name, n, I32), backend=backend)


@pytest.mark.slow  # (the full tier: a 100000-long scan per case; test_static_blocked's sizes cover the blocks here)
@pytest.mark.parametrize("shape", [(100000, 2), ("N", 2)], ids=["static", "symbolic"])
def test_long(shape, backend):
    """n above 128**2: the real blocks (both levels and, symbolic, a window of 7 totals)."""
    x = rand((100000, 2), F64, seed=8)
    ints = np.random.default_rng(9).integers(-3, 4, (100000, 2)).astype(np.int32)
    check(lambda t: (t.cumsum(0), *t.cummax(0), t.logcumsumexp(0)), [x], backend=backend, shapes=[shape])
    check(lambda t: (t.cumsum(0), *t.cummin(0)), [ints], backend=backend, shapes=[shape])


@pytest.mark.slow  # (the full tier: 100000-long accuracy sweeps)
@pytest.mark.parametrize("shape", [(2, 100000), (2, "N")], ids=["static", "symbolic"])
@pytest.mark.parametrize("name", ["cumsum", "logcumsumexp"])
def test_float32_accuracy(name, shape, backend):
    """float32 steps in float64, rounded once: within half an ulp (and a hair, for the double rounding)
    of the exact results, as torch's (it accumulates in double) and as the window's float64 sums were;
    float32 steps were up to 2 ulps off at n = 20000."""
    x = rand((2, 100000), seed=10, low=-1 if name == "cumsum" else -10, high=3 if name == "cumsum" else 10)
    g = lm.Graph()
    got = lm.compile(getattr(g.input("x", shape), name)(1), backend=backend)(x=x)
    exact = getattr(torch.from_numpy(x.astype(np.float64)), name)(1).numpy()
    ulps = np.abs(got - exact) / np.spacing(np.abs(exact).astype(np.float32)).astype(np.float64)
    assert ulps.max() <= 0.501, ulps.max()
