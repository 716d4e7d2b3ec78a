"""``squeeze`` and symbolic dims: a named symbolic dim is an error (its size, and so the result's rank,
is known only when the program runs; it was silently kept, so a binding of 1 gave another shape than
torch's), ``squeeze()`` keeps symbolic dims and drops static size-1 ones."""

from __future__ import annotations

import numpy as np
import pytest

import luminal as lm


def test_naming_a_symbolic_dim_is_an_error_naming_it():
    g = lm.Graph()
    x = g.input("x", ("B", 3))
    for dim in (0, -2, (0, 1)):
        with pytest.raises(ValueError, match=r"squeeze: dim 0 has the symbolic size B.*index it \(x\[0\]\)"):
            x.squeeze(dim)


def test_squeeze_without_dims_keeps_symbolic_ones():
    g = lm.Graph()
    x = g.input("x", ("B", 1, 3, 1))
    y = x.squeeze()
    assert y.shape[1:] == (3,) and x.squeeze(1).shape[1:] == (3, 1) and x.squeeze((1, 3)).shape[1:] == (3,)
    out = lm.compile(y)(x=np.ones((1, 1, 3, 1), np.float32))
    assert out.shape == (1, 3)
