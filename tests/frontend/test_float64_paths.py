"""The float64 functions' accurate paths (``frontend/float64_paths.py``) are for float64 results: an op
that computes a narrower input in float64 and rounds once (the special functions, ``airy_ai``, Gumbel
noise, ``_wide``'s compositions) builds their plain formulas, forward and backward. Before, the special
functions cast to float64 themselves and took the accurate paths for float32 inputs too: a float32
lgamma 82% bigger, zeta 111%, for bits the final rounding drops."""

from __future__ import annotations

import pytest

import luminal as lm
from luminal import train
from luminal.frontend import float64_paths

UNARY = ["gammaln", "digamma", "erfinv", "erfcx", "ndtr", "log_ndtr", "ndtri", "i0", "i0e", "i1", "i1e",
         "bessel_j0", "bessel_y1", "modified_bessel_k0", "scaled_modified_bessel_k1", "airy_ai", "entr"]
BINARY = ["gammainc", "gammaincc", "zeta", "xlog1py"]


def _build(name, dtype, grad):
    g = lm.Graph()
    x = g.input("x", (3,), dtype=dtype)
    f = getattr(lm.special, name)
    y = f(x) if name in UNARY else f(x, x + 1.5)
    if grad and name not in ("gammainc", "gammaincc", "zeta"):  # (their first input has no gradient)
        train.grad(y.sum(), [x])
    return len(g.nodes)


@pytest.mark.parametrize("grad", [False, True], ids=["forward", "backward"])
@pytest.mark.parametrize("name", UNARY + BINARY)
def test_a_float32_special_function_composes_the_plain_float64_formulas(name, grad):
    got = _build(name, lm.float32, grad)
    with float64_paths.narrow():
        assert got == _build(name, lm.float32, grad)


def test_float64_inputs_keep_the_accurate_paths():
    plain = _build("gammaln", lm.float64, False)
    with float64_paths.narrow():
        assert _build("gammaln", lm.float64, False) < plain


def test_a_gradient_rule_composes_as_its_function_was_built():
    """A rule registered inside a narrow composition runs narrow, whenever autograd calls it."""
    g = lm.Graph()
    x = g.input("x", (3,), dtype=lm.float64)
    seen = []

    def rule(out, adjoint, a):
        seen.append(float64_paths.depth())
        return [adjoint]

    with float64_paths.narrow():
        y = g.custom_vjp(x * 2.0, [x], rule)
    train.grad(y.sum(), [x])
    assert seen == [1] and float64_paths.depth() == 0
