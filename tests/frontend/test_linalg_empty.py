"""Empty matrices in the linalg ops (``luminal/frontend/ops/linalg_solve.py``, ``linalg_decomp.py``):
a 0 x 0 matrix's det is 1 and its logabsdet 0 (the empty product), its inverse empty; the gradient
of each is an empty tensor, as torch's, through ``train.grad`` without ``allow_unused`` (the values
used to be constants that the loss did not depend on, an error). LU of a (*, 0, n) matrix has empty
pivots (it raised an IndexError)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from parity import compare_outputs

import luminal as lm
from luminal import train

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _la(t):
    return torch.linalg if isinstance(t, torch.Tensor) else lm.linalg


OPS = {
    "det": lambda t: _la(t).det(t),
    "slogdet": lambda t: _la(t).slogdet(t),
    "logdet": lambda t: (torch if isinstance(t, torch.Tensor) else lm).logdet(t),
    "inv": lambda t: _la(t).inv(t),
    "inv_ex": lambda t: _la(t).inv_ex(t),
    "matrix_power_-2": lambda t: _la(t).matrix_power(t, -2),
}

# the defined values at a 0 x 0 matrix: the empty product 1, its log 0 (given ones, zeros)
EMPTY_VALUES = {
    "det": lambda ones, zeros: (ones,),
    "slogdet": lambda ones, zeros: (ones, zeros),
    "logdet": lambda ones, zeros: (zeros,),
}


@pytest.mark.parametrize("backend", ["reference", "cpu"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", list(OPS))
@pytest.mark.parametrize("shape", [(0, 0), (2, 0, 0), ("B", 0, 0)], ids=["0x0", "batch", "symbolic_batch"])
def test_empty_matrix_values_and_gradient(name, dtype, shape, backend):
    """Values as torch's (det 1, slogdet (1, 0), inv empty); the gradient of the float outputs' sum
    an empty tensor of the input's shape, with no ``allow_unused``."""
    a = np.zeros(tuple(2 if s == "B" else s for s in shape), dtype)
    g = lm.Graph()
    x = g.input("x", shape, dtype=lm.float32 if dtype == np.float32 else lm.float64)
    out = OPS[name](x)
    outs = out if isinstance(out, tuple) else (out,)
    loss = sum(o.sum() for o in outs if o.dtype.is_float)
    got = lm.compile([*outs, train.grad(loss, x)], backend=backend)(x=a)
    t = torch.from_numpy(a).requires_grad_(True)
    ref = OPS[name](t)
    refs = ref if isinstance(ref, tuple) else (ref,)
    compare_outputs(outs, got[:-1], refs)
    (want,) = torch.autograd.grad(sum(r.sum() for r in refs if r.dtype.is_floating_point), t)
    assert got[-1].shape == tuple(want.shape) == a.shape
    if name in EMPTY_VALUES:
        for value, want in zip(got, EMPTY_VALUES[name](np.ones(a.shape[:-2]), np.zeros(a.shape[:-2]))):
            np.testing.assert_array_equal(value, want)


@pytest.mark.parametrize("shape", [(2, 0, 3), (2, 3, 0), (0, 0), (2, 0, 0)])
def test_lu_of_empty_matrices(shape):
    """lu_factor_ex / lu of an empty (m, n) matrix: shapes and values as torch's, pivots int32 (*, 0)
    and info 0; the gradient of LU, L and U empty (or zeros, for the unit diagonal's L (3, 0))."""
    a = np.zeros(shape, np.float64)
    g = lm.Graph()
    x = g.input("x", shape, dtype=lm.float64)
    outs = (*lm.linalg.lu_factor_ex(x), *lm.linalg.lu(x))
    loss = outs[0].sum() + outs[4].sum() + outs[5].sum()
    got = lm.compile([*outs, train.grad(loss, x)], backend="reference")(x=a)
    t = torch.from_numpy(a)
    compare_outputs(outs, got[:-1], (*torch.linalg.lu_factor_ex(t), *torch.linalg.lu(t)))
    np.testing.assert_array_equal(got[-1], np.zeros(shape))
