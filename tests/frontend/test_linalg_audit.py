"""Linear-algebra audit against torch: the determinant of a matrix whose elimination meets an exactly
zero pivot (0 and (0, -inf), not NaN), einsum's sublist format, cholesky of an empty matrix, and
addmm/baddbmm of integer operands with float scales (``luminal/frontend/ops/linalg_solve.py``,
``einsum.py``, ``linalg.py``)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from parity import check, rand

import luminal as lm
from luminal import train

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _lib(t):
    return torch if isinstance(t, torch.Tensor) else lm


# singular matrices whose first column is zero from the pivot down: the elimination's first pivot is 0
ZERO = np.zeros((3, 3))
ZERO_COLUMN = np.array([[0.0, 1.0, 2.0], [0.0, 3.0, 4.0], [0.0, 5.0, 7.0]])
SINGULAR_2X2 = np.array([[0.0, 0.0], [0.0, 1.0]])


def _det_slogdet_logdet(a: np.ndarray):
    g = lm.Graph()
    x = g.input("x", a.shape, dtype=lm.float64)
    s, logabs = lm.linalg.slogdet(x)
    d = lm.linalg.det(x)
    return lm.compile([d, s, logabs, lm.logdet(x), train.grad(d, x)], backend="reference")(x=a)


@pytest.mark.parametrize("a", [ZERO, ZERO_COLUMN, SINGULAR_2X2], ids=["zero", "zero_column", "2x2"])
def test_det_of_singular_matrix_with_a_zero_pivot(a):
    """det 0, slogdet (0, -inf), logdet -inf (the 0/0 of the zero pivot made them all NaN), and a
    finite gradient."""
    d, s, logabs, logdet, grad = _det_slogdet_logdet(a)
    assert d == 0 and s == 0
    assert logabs == -math.inf and logdet == -math.inf
    assert np.all(np.isfinite(grad))


def test_det_gradient_at_singular_matrices():
    """The gradient of det is the cofactor matrix: 0 for the zero 3x3 matrix; [[1, 0], [0, 0]] for
    diag(0, 1), whose zero pivot comes first."""
    np.testing.assert_array_equal(_det_slogdet_logdet(ZERO)[-1], np.zeros((3, 3)))
    np.testing.assert_array_equal(_det_slogdet_logdet(SINGULAR_2X2)[-1], [[1.0, 0.0], [0.0, 0.0]])


def test_singular_det_batched_against_torch():
    """A batch mixing singular and regular matrices, float32, on every value torch gives."""
    rng = np.random.default_rng(0)
    batch = np.stack([ZERO, ZERO_COLUMN, rng.normal(size=(3, 3)) + 3 * np.eye(3)]).astype(np.float32)
    check(lambda t: (_lib(t).linalg.det(t), *_lib(t).linalg.slogdet(t), _lib(t).logdet(t)), [batch], grad=False)


def test_inv_and_solve_of_singular_matrix_are_not_finite():
    """Where torch raises, inv and solve must not give finite garbage."""
    g = lm.Graph()
    x = g.input("x", (3, 3), dtype=lm.float64)
    inv, sol = lm.compile([lm.linalg.inv(x), lm.linalg.solve(x, x[:, :1])], backend="reference")(x=ZERO_COLUMN)
    assert not np.all(np.isfinite(inv))
    assert not np.all(np.isfinite(sol))


@pytest.mark.parametrize("case", [
    ([0, 1], [1, 2], [0, 2]),  # explicit output
    ([30, 1], [1, 2], None),  # implicit output: lowercase (30 is 'e') after uppercase, as torch
    ([..., 0, 1], [1, 2], [..., 0, 2]),  # ellipsis
], ids=["explicit", "implicit", "ellipsis"])
def test_einsum_sublist_format(case):
    sa, sb, out = case
    shape_a = (5, 2, 3) if ... in sa else (2, 3)
    tail = [] if out is None else [out]
    check(lambda a, b: _lib(a).einsum(a, sa, b, sb, *tail), [rand(shape_a), rand((3, 4), seed=2)])


def test_einsum_sublist_diagonal_and_errors():
    check(lambda a: _lib(a).einsum(a, [5, 5]), [rand((3, 3))])
    x = lm.Graph().input("x", (2, 3))
    with pytest.raises(ValueError, match=r"einsum: .*subscript 60 is not an int in \[0, 52\)"):
        lm.einsum(x, [0, 60])
    with pytest.raises(TypeError, match="einsum: the sublist of operand 0 must be a list"):
        lm.einsum(x, "ab")
    with pytest.raises(TypeError, match="einsum: operand 1 has no sublist"):
        lm.einsum(x, [0, 1], x)


@pytest.mark.parametrize("shape, upper", [((0, 0), False), ((2, 0, 0), True)])
def test_cholesky_of_empty_matrix(shape, upper):
    check(lambda t: _lib(t).linalg.cholesky(t, upper=upper), [np.zeros(shape, np.float32)])


@pytest.mark.parametrize("beta, alpha", [(0.5, 1), (1, 0.5), (2.0, -1.7), (-0.9, 3)])
def test_addmm_baddbmm_int_operands_with_float_scales(beta, alpha):
    """Integer operands keep an integer result, the float scales truncated toward zero, as torch
    (luminal promoted the result to float32)."""
    i32 = lm.int32
    check(lambda i, x, y: _lib(x).addmm(i, x, y, beta=beta, alpha=alpha),
          [rand((2, 5), i32), rand((2, 3), i32, seed=2), rand((3, 5), i32, seed=3)])
    check(lambda i, x, y: _lib(x).baddbmm(i, x, y, beta=beta, alpha=alpha),
          [rand((2, 2, 5), i32), rand((2, 2, 3), i32, seed=2), rand((2, 3, 5), i32, seed=3)])
