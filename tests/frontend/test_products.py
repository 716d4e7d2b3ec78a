"""Quick-tier parity with torch for the matrix products torch has beside matmul (mm, mv, vdot,
inner, ger, addmv, addr, addbmm, linalg.multi_dot, chain_matmul) on every backend, and einsum's
diagonal of a symbolic dim; ``test_products_audit.py`` sweeps their edges in the full tier."""

from __future__ import annotations

import warnings

import pytest
import torch
from parity import check, rand
from sizes import check_sizes

import luminal as lm

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _lib(t):
    return torch if isinstance(t, torch.Tensor) else lm


def test_fixed_rank_products(backend):
    check(lambda a, b, v, w: (_lib(a).mm(a, b), a.mv(v), _lib(a).vdot(v, w), a.inner(b.T), _lib(a).ger(v, w)),
          [rand((3, 4)), rand((4, 2), seed=1), rand((4,), seed=2), rand((4,), seed=3)], backend=backend)


def test_scaled_sums(backend):
    check(lambda i, a, b, v: (_lib(a).addmv(i[:, 0], a, v, beta=0.5, alpha=2), i.addr(a[:, 0], b[0], alpha=-1),
                              _lib(a).addbmm(i, a.unsqueeze(0).expand(2, 3, 4), b.unsqueeze(0).expand(2, 4, 5),
                                             beta=0)),
          [rand((3, 5)), rand((3, 4), seed=1), rand((4, 5), seed=2), rand((4,), seed=3)], backend=backend)


def test_chains(backend):
    with warnings.catch_warnings():  # torch deprecates chain_matmul
        warnings.simplefilter("ignore")
        check(lambda v, a, b: (_lib(a).linalg.multi_dot([v, a, b]), _lib(a).chain_matmul(a, b, b.T)),
              [rand((6,)), rand((6, 2), seed=1), rand((2, 5), seed=2)], backend=backend)


def test_einsum_diagonal_of_a_symbolic_dim(backend):
    """``diagonal`` needs static dims; einsum reads a symbolic one's diagonal another way."""
    check_sizes(lambda a: _lib(a).einsum("iij->ji", a), lambda n: [rand((n, n, 2))], [("B", "B", 2)],
                sizes=(3, 2), backend=backend)


def test_dot_refuses_matrices():
    g = lm.Graph()
    m = g.input("m", (3, 3))
    with pytest.raises(ValueError, match="^dot: needs 1-d input and 1-d tensor, got input 2-d, tensor 2-d"):
        lm.dot(m, m)  # was taken as a matrix product
