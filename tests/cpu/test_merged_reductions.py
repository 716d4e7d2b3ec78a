"""Reductions on the CPU merge neighbouring reduced axes that every input walks as one
(``codegen/lowering/reduce.py``'s ``_Start``): a bias gradient's sum over (B, H, W) of an (B, C, H, W)
array is a loop over B around one loop of H * W, not three loops. Axes a view breaks apart (a slice,
a permutation, a padded view) keep loops of their own. The values as the reference's."""

import numpy as np
import pytest
from parity import rand

import luminal as lm
from luminal.codegen import ir


def _loops(stmts) -> list:
    """The loops of a kernel body, nested ones included, as their trip counts."""
    out = []
    for s in stmts:
        if isinstance(s, ir.Loop):
            out.append(s.stop)
            out += _loops(s.body)
        elif isinstance(s, ir.If):
            out += _loops(s.body)
    return out


def _reduce_loops(f) -> list:
    return [_loops(k.body) for k, _, _ in f.runner.program._recent[1].schedule.generated if k.name.startswith("reduce")]


CASES = {  # name: (input shape, the op, loops of the reduction)
    # a bias gradient over an NCHW array: B around H * W
    "bias_grad": ((3, 5, 7, 6), lambda x: x.sum((0, 2, 3)), 2),
    # every axis reduced: one loop
    "all": ((3, 5, 7), lambda x: x.sum(), 1),
    # a slice breaks H from W: three loops
    "sliced": ((3, 5, 7, 6), lambda x: x[:, :, :, 1:5].sum((0, 2, 3)), 3),
    # a permuted view walks W before H: they stay apart
    "permuted": ((3, 5, 7, 6), lambda x: x.permute(0, 1, 3, 2).sum((0, 2, 3)), 3),
    # a max over the last two axes, contiguous: one loop
    "max_last_two": ((4, 3, 5, 6), lambda x: x.amax((2, 3)), 1),
    # a padded view (masked) keeps its axes
    "padded": ((3, 5, 7, 6), lambda x: x.pad((1, 1)).sum((0, 2, 3)), 3),
}


@pytest.mark.parametrize("name", list(CASES))
def test_reduced_axes_walked_as_one_are_one_loop(name, monkeypatch):
    monkeypatch.setenv("LUMINAL_NUM_THREADS", "1")  # (no split: one reduction kernel)
    shape, op, loops = CASES[name]
    g = lm.Graph()
    x = g.input("x", shape)
    out = op(x)
    f = lm.compile([out], backend="cpu")
    arrays = {"x": rand(shape, seed=3)}
    got = f(**arrays)
    want = lm.compile([out], backend="reference")(**arrays)
    np.testing.assert_allclose(got[0] if isinstance(got, (tuple, list)) else got,
                               want[0] if isinstance(want, (tuple, list)) else want, rtol=1e-5, atol=1e-5)
    found = _reduce_loops(f)
    assert found and len(found[0]) == loops, found
