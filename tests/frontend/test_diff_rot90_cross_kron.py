"""Parity with torch for diff, rot90 (``frontend/ops/movement.py``), cross and kron
(``frontend/ops/linalg.py``): values, dtypes, shapes and gradients."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from parity import check, rand

import luminal as lm

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _ns(t):
    return torch if isinstance(t, torch.Tensor) else lm


@pytest.mark.parametrize("n,dim", [(1, -1), (2, 0), (3, 1), (0, -1), (5, -1), (9, 2)])
def test_diff(n, dim, backend):
    check(lambda t: _ns(t).diff(t, n, dim), [rand((3, 4, 5))], backend=backend)
    check(lambda t: t.diff(n=n, dim=dim), [rand((3, 4, 5), lm.int32, low=-9, high=9)], backend=backend)
    check(lambda t: t.diff(n=n, dim=dim), [rand((3, 4, 5), lm.bool)], backend=backend)  # != for bool


def test_diff_prepend_append(backend):
    x, p, a = rand((3, 4)), rand((3, 2), seed=1), rand((3, 1), seed=2)
    check(lambda t, q, r: t.diff(prepend=q, append=r), [x, p, a], backend=backend)
    check(lambda t, q: _ns(t).diff(t, 2, 0, q), [x, rand((1, 4), seed=3)], backend=backend)
    check(lambda t, r: t.diff(dim=0, append=r), [x, rand((2, 4), lm.float64, seed=4)], backend=backend)
    check(lambda t: t.diff(), [x], backend=backend, pre=lambda t: t.T)


def test_diff_errors():
    g = lm.Graph()
    x = g.input("x", (3, 4))
    with pytest.raises(ValueError, match="^diff: needs a tensor of at least 1 dim"):
        g.input("s", ()).diff()
    with pytest.raises(ValueError, match="^diff: prepend must have input's 2 dims, got 1"):
        x.diff(prepend=g.input("p", (4,)))
    with pytest.raises(ValueError, match="^diff: n must be at least 0, got -1"):
        x.diff(-1)
    with pytest.raises(ValueError, match="^diff: dim 0 must be static, got B"):
        g.input("b", ("B", 2)).diff(dim=0)
    with pytest.raises(TypeError, match="^diff: append must be a GraphTensor, got ndarray"):
        x.diff(append=np.zeros((3, 1)))


@pytest.mark.parametrize("k", [-5, -1, 0, 1, 2, 3, 4, 7])
@pytest.mark.parametrize("dims", [(0, 1), (1, 0), (2, 0), (-1, -2)])
def test_rot90(k, dims, backend):
    check(lambda t: _ns(t).rot90(t, k, dims), [rand((2, 3, 4))], backend=backend)


def test_rot90_defaults_and_errors(backend):
    check(lambda t: t.rot90(), [rand((3, 5), lm.int32)], backend=backend)
    g = lm.Graph()
    x = g.input("x", (2, 3))
    with pytest.raises(ValueError, match="^rot90: dims must differ"):
        x.rot90(1, (1, 1))
    with pytest.raises(ValueError, match="^rot90: dims must name 2 dims"):
        x.rot90(1, (0,))
    with pytest.raises(ValueError, match="^rot90: needs a tensor of at least 2 dims, got 1-d"):
        g.input("v", (3,)).rot90()
    with pytest.raises(TypeError, match="^rot90: k must be an int"):
        x.rot90(1.5)


@pytest.mark.filterwarnings("ignore:Using torch.cross without specifying the dim arg")
@pytest.mark.parametrize("dim", [None, 0, 1, -1])
def test_cross(dim, backend):
    a, b = rand((3, 3, 4)), rand((3, 3, 4), seed=1)
    if dim in (None, 0, 1):
        check(lambda x, y: _ns(x).cross(x, y, dim=dim), [a, b], backend=backend)
    check(lambda x, y: _ns(x).linalg.cross(x, y), [rand((4, 2, 3)), rand((1, 2, 3), seed=2)], backend=backend)
    check(lambda x, y: x.cross(y, dim=-1), [rand((5, 3), lm.int32, low=-4, high=4), rand((5, 3), lm.int32, seed=3)],
          backend=backend)
    check(lambda x, y: x.cross(y, dim=0), [rand((3,), lm.float64), rand((3,), lm.float64, seed=4)], backend=backend)


def test_cross_errors():
    g = lm.Graph()
    with pytest.raises(ValueError, match=r"^cross: no dim of size 3 in \(2, 4\)"):
        lm.cross(g.input("a", (2, 4)), g.input("b", (2, 4)))
    with pytest.raises(ValueError, match="^cross: dim 1 must have size 3, got 4"):
        lm.cross(g.input("c", (3, 4)), g.input("d", (3, 4)), dim=1)
    with pytest.raises(ValueError, match="^cross: input and other must have the same number of dims, got 2 and 1"):
        lm.cross(g.input("e", (2, 3)), g.input("f", (3,)))


@pytest.mark.parametrize("sa,sb", [((2, 3), (4, 5)), ((3,), (2,)), ((2, 1, 3), (4, 2)), ((), (3, 2)), ((2, 2), ())])
def test_kron(sa, sb, backend):
    check(lambda x, y: _ns(x).kron(x, y), [rand(sa), rand(sb, seed=1)], backend=backend)
    check(lambda x, y: x.kron(y), [rand(sa, lm.int32), rand(sb, lm.float64, seed=2)], backend=backend)
    check(lambda x, y: x.kron(y), [rand(sa, lm.bool), rand(sb, lm.bool, seed=3)], backend=backend)
