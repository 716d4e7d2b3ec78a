"""torch refuses a subtraction with any bool operand: ``mask - 1``, ``1 - mask``, ``x - mask``,
``x - True``, ``x.sub(mask, alpha=2)`` and the in-place ``x -= mask`` (luminal refused bool - bool only,
and computed the others on 0 and 1). Other subtractions are unchanged."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import luminal as lm

CASES = {
    "bool - int": lambda b, i, f: b - 1,
    "int - bool": lambda b, i, f: 1 - b,
    "int tensor - bool": lambda b, i, f: i - b,
    "float tensor - bool": lambda b, i, f: f - b,
    "tensor - True": lambda b, i, f: i - True,
    "sub alpha": lambda b, i, f: f.sub(b, alpha=2),
    "rsub method": lambda b, i, f: b.__rsub__(f),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_subtraction_with_a_bool_operand_is_refused_as_torchs(case):
    fn = CASES[case]
    with pytest.raises(RuntimeError, match="Subtraction, the `-` operator, with a bool tensor is not supported"):
        fn(torch.tensor([True, False]), torch.tensor([1, 2]), torch.tensor([1.0, 2.0]))
    g = lm.Graph()
    b, i, f = g.input("b", (2,), dtype=lm.bool), g.input("i", (2,), dtype=lm.int32), g.input("f", (2,))
    with pytest.raises(TypeError, match="^sub: subtraction with a bool operand is not supported"):
        fn(b, i, f)


def test_in_place_subtraction_of_a_mask_and_a_numpy_bool_array_are_refused():
    g = lm.Graph()
    f = g.input("f", (2,))
    with pytest.raises(TypeError, match="sub: subtraction with a bool operand"):
        f -= f > 0
    with pytest.raises(TypeError, match="^sub: subtraction with a bool operand"):
        f - np.array([True, False])  # (a bool array is a bool tensor to the op)


def test_other_subtractions_still_compute():
    g = lm.Graph()
    i, f = g.input("i", (2,), dtype=lm.int32), g.input("f", (2,))
    out = lm.compile([i - 1, 3 - i, f - i, f.sub(i, alpha=2), (f > 0).int() - 1], backend="cpu")(
        i=np.array([4, -1], np.int32), f=np.array([0.5, -2.0], np.float32))
    want = [[3, -2], [-1, 4], [-3.5, -1.0], [-7.5, 0.0], [0, -1]]
    for o, w in zip(out, want):
        np.testing.assert_array_equal(o, w)
