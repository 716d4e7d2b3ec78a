"""Parity with torch for ``lm.linalg`` inv, solve, det, slogdet and cholesky on static square sizes
(``luminal/frontend/ops/linalg_solve.py``): values and gradients on well-conditioned inputs, batches
and broadcasting, pivoting (a zero on the diagonal), the torch method names, and the errors.

The unrolled eliminations are large graphs (tens of kernels to compile on the native backends): one
case of each op runs on every backend, the variants on the reference interpreter."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from parity import check

import luminal as lm

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _la(t):
    return torch.linalg if isinstance(t, torch.Tensor) else lm.linalg


def _well_conditioned(shape, seed=0, dtype=np.float32):
    rng = np.random.default_rng(seed)
    n = shape[-1]
    return (rng.normal(size=shape) + n * np.eye(n)).astype(dtype)


def _spd(shape, seed=0, dtype=np.float32):
    rng = np.random.default_rng(seed)
    m = rng.normal(size=shape)
    return (m @ np.swapaxes(m, -1, -2) + shape[-1] * np.eye(shape[-1])).astype(dtype)


# a zero leading pivot: the elimination has to swap rows
NEEDS_PIVOT = np.array([[0.0, 2.0, 1.0], [3.0, 1.0, -1.0], [1.0, -2.0, 4.0]], np.float32)


def _inv_det_slogdet(t):
    return (_la(t).inv(t), _la(t).det(t), *_la(t).slogdet(t))


def test_inv_det_slogdet_solve(backend):
    a = _well_conditioned((2, 2, 2))  # small n: each step of the unrolled elimination is kernels to compile
    b = np.random.default_rng(2).normal(size=(2, 2, 3)).astype(np.float32)
    check(lambda t, p: (*_inv_det_slogdet(t), _la(t).solve(t, p)), [a, b], backend=backend)


def test_cholesky(backend):
    check(lambda t: _la(t).cholesky(t), [_spd((2, 3, 3))], backend=backend)  # the gradient is symmetric, as torch's


def test_sizes_pivoting_and_views():
    check(_inv_det_slogdet, [_well_conditioned((1, 1))])
    check(_inv_det_slogdet, [_well_conditioned((2, 3, 3))])
    check(_inv_det_slogdet, [_well_conditioned((4, 4), 5, np.float64)])
    check(_inv_det_slogdet, [NEEDS_PIVOT])
    check(lambda t: _la(t).slogdet(-t), [NEEDS_PIVOT.astype(np.float64)], pre=lambda t: t.transpose(-1, -2))


def test_solve_vectors_broadcasting_and_right_sides():
    a = _well_conditioned((2, 3, 3), 1)
    rng = np.random.default_rng(2)
    v, vs, w = (rng.normal(size=s).astype(np.float32) for s in [(3,), (2, 3), (4, 3)])
    check(lambda t, p, q: (_la(t).solve(t, p), _la(t).solve(t, q)), [a, v, vs])  # a vector (broadcast); a batch
    check(lambda t, p: _la(t).solve(t, p, left=False), [a[0], w])


def test_cholesky_sizes_and_upper():
    for shape in [(1, 1), (4, 4)]:
        check(lambda t: _la(t).cholesky(t), [_spd(shape)])
    check(lambda t: _la(t).cholesky(t, upper=True), [_spd((3, 3), 1, np.float64)])
    lower_only = np.tril(_spd((3, 3), 2)) + np.triu(np.ones((3, 3), np.float32), 1)  # the upper triangle unread
    check(lambda t: _la(t).cholesky(t), [lower_only])


@pytest.mark.filterwarnings("ignore:torch.cholesky is deprecated")
def test_torch_method_names():
    a = _well_conditioned((3, 3), 3)
    check(lambda t: (t.det(), t.inverse(), *t.slogdet()), [a])
    check(lambda t: (torch if isinstance(t, torch.Tensor) else lm).cholesky(t), [_spd((3, 3))])


def test_parameters_join_the_graph():
    w = lm.nn.Parameter(_well_conditioned((3, 3), 6))
    g = lm.Graph()
    b = g.input("b", (3,))
    f = lm.compile([lm.linalg.solve(w, b), lm.linalg.det(w.on(g))], backend="reference")
    x, d = f(b=np.ones(3, np.float32))
    np.testing.assert_allclose(x, np.linalg.solve(w.data, np.ones(3)), rtol=1e-5)
    np.testing.assert_allclose(d, np.linalg.det(w.data), rtol=1e-5)


def test_linalg_errors():
    g = lm.Graph()
    with pytest.raises(ValueError, match=r"^inv: needs a static matrix size \(the algorithm is unrolled over n\)"):
        lm.linalg.inv(g.input("s", ("N", "N")))
    with pytest.raises(ValueError, match=r"^det: expected a square matrix, got \(3, 4\)"):
        lm.linalg.det(g.input("r", (3, 4)))
    with pytest.raises(ValueError, match=r"^cholesky: expected a \(\*, n, n\) matrix, got \(3,\)"):
        lm.linalg.cholesky(g.input("v", (3,)))
    with pytest.raises(TypeError, match="^slogdet: needs a float32 or float64 tensor, got int32"):
        lm.linalg.slogdet(g.input("i", (2, 2), dtype=lm.int32))
    a = g.input("a", (3, 3))
    with pytest.raises(ValueError, match=r"^solve: B \(4, 2\) does not match A \(3, 3\)"):
        lm.linalg.solve(a, g.input("b", (4, 2)))
