"""Fill values the dtype cannot hold are refused, as torch's ("value cannot be converted to type int
without overflow"): NaN, inf and out-of-range floats into int32 (they became -2147483648), a finite
float beyond float16/bfloat16/float32's largest value (``masked_fill(-1e9)`` of a float16 tensor was
-inf); what torch takes still works (2.5 truncates, -inf fills, 65504 is float16's largest). An int
operand out of int32's range names the op the user called (it said "constant")."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
import torch
from parity import TORCH_DTYPE

import luminal as lm

REFUSED = [(math.nan, lm.int32), (math.inf, lm.int32), (3e9, lm.int32), (-2147483648.5, lm.int32),
           (2147483647.5, lm.int32), (1e5, lm.float16), (-1e9, lm.float16), (65505.0, lm.float16),
           (3.39e38, lm.bfloat16), (1e39, lm.float32), (70000, lm.float16), (-100000, lm.float16)]
TAKEN = [(2.5, lm.int32), (-2147483648.0, lm.int32), (-math.inf, lm.float16), (65504.0, lm.float16),
         (math.nan, lm.bool), (3.3895e38, lm.bfloat16), (7, lm.float16)]

FILLS = {
    "full_like": (lambda ns, x, m, v: ns.full_like(x, v)),
    "masked_fill": (lambda ns, x, m, v: x.masked_fill(m, v)),
    "fill_": (lambda ns, x, m, v: x.clone().fill_(v)),
}


def _both(d):
    g = lm.Graph()
    x, m = g.input("x", (2,), dtype=d), g.input("m", (2,), dtype=lm.bool)
    t = torch.zeros(2, dtype=TORCH_DTYPE[d])
    return (lm, x, m), (torch, t, torch.tensor([True, False]))


@pytest.mark.parametrize("how", sorted(FILLS))
@pytest.mark.parametrize("value,d", REFUSED)
def test_a_value_the_dtype_cannot_hold_is_refused(how, value, d):
    mine, theirs = _both(d)
    with pytest.raises(RuntimeError, match="cannot be converted to type .* without overflow"):
        FILLS[how](*theirs, value)
    msg = re.escape(f"value {value!r} cannot be converted to {d.name} without overflow")
    with pytest.raises(ValueError, match=f"^{how}: (full: )?{msg}"):
        FILLS[how](*mine, value)


@pytest.mark.parametrize("how", sorted(FILLS))
@pytest.mark.parametrize("value,d", TAKEN)
def test_values_torch_takes_still_fill(how, value, d):
    mine, theirs = _both(d)
    want = FILLS[how](*theirs, value)
    g_out = FILLS[how](*mine, value)
    got = lm.compile(g_out, backend="cpu")(x=np.zeros(2, d.np), m=np.array([True, False]))
    want = want.float().numpy() if d is lm.bfloat16 else want.numpy()
    np.testing.assert_array_equal(np.asarray(got, want.dtype), want)


def test_an_int_operand_out_of_range_names_the_op():
    g = lm.Graph()
    x = g.input("x", (3,), dtype=lm.int32)
    for name, fn in (("add", lambda: x + 2**31), ("mul", lambda: x * 2**40), ("lt", lambda: x < 2**31),
                     ("clamp", lambda: x.clamp(max=2**31)), ("where", lambda: lm.where(x > 0, x, 2**31))):
        with pytest.raises(ValueError, match=f"^{name}: {2**40 if name == 'mul' else 2**31} does not fit in int32"):
            fn()
