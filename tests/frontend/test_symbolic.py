"""Symbolic dims: canonical polynomials, exact division, opaque floordiv/mod/max/min atoms,
solve_linear, printed forms; property tests against Python ints."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import luminal as lm
from luminal.core.symbolic import (
    Sym,
    ceildiv,
    dmax,
    dmin,
    evaluate,
    exact_div,
    floordiv,
    free_vars,
    is_static,
    mod,
    prod,
    shape_str,
    solve_linear,
    substitute,
    sym,
)

S, B, C = lm.sym("S"), lm.sym("B"), lm.sym("C")


# canonical form -----------------------------------------------------------------------------------
def test_canonical_equality():
    assert (S + 1) * 2 == 2 * S + 2
    assert hash((S + 1) * 2) == hash(2 * S + 2)
    assert S * B == B * S
    assert (S + B) * (S - B) == S * S - B * B
    assert (S + 1) * (S + 1) == S * S + 2 * S + 1
    assert S + B + 1 == 1 + B + S
    assert 3 - S == -(S - 3)
    assert {(S + 1) * 2: "x"}[2 * S + 2] == "x"  # usable as dict keys (shapes compare by ==)
    assert (S, 3) == (S * 1 + 0, 3)
    assert S != B and S != S + 1 and S != 2 * S


def test_constants_collapse_to_ints():
    assert S - S == 0 and isinstance(S - S, int)
    assert (S + 1) - S == 1 and isinstance((S + 1) - S, int)
    assert S * 0 == 0 and isinstance(S * 0, int)
    assert prod([2, 3, 4]) == 24 and prod([]) == 1
    assert prod([S, 2, B]) == 2 * S * B


def test_sym_never_equals_an_int():
    assert (S == 3) is False
    assert S != 3
    assert (3 == S) is False


def test_truth_value_is_an_error():
    with pytest.raises(TypeError, match="symbolic dim S"):
        bool(S)
    with pytest.raises(TypeError):
        if S + 1:
            pass


def test_sym_constructor():
    assert sym(3) == 3 and isinstance(sym(3), int)
    assert sym("S") == S
    assert sym(S + 1) == S + 1
    import numpy as np

    assert sym(np.int64(4)) == 4 and type(sym(np.int64(4))) is int
    with pytest.raises(TypeError, match="True"):
        sym(True)
    with pytest.raises(TypeError, match="float"):
        sym(2.0)
    with pytest.raises(ValueError, match="not an identifier"):
        sym("S+1")
    with pytest.raises(ValueError, match="not an identifier"):
        sym("1B")
    assert is_static(3) and not is_static(S)


# division and atoms --------------------------------------------------------------------------------
def test_exact_div():
    assert exact_div(6 * S * B, 3 * S) == 2 * B
    assert exact_div(2 * S + 2, 2) == S + 1
    assert exact_div(S * S, S) == S
    assert exact_div(S * B + S, S) == B + 1
    assert exact_div(12, 4) == 3
    assert exact_div(S + 1, S + 1) == 1
    assert exact_div(S + 1, 2) is None
    assert exact_div(S, B) is None
    assert exact_div(6 * S, 4 * S) is None
    assert exact_div(7, 2) is None
    assert exact_div(S, 0) is None
    assert exact_div(4, S) is None
    assert exact_div(0, 16 * S) == 0 and exact_div(0, S + 1) == 0  # zero: every polynomial's multiple


def test_floordiv_and_mod_simplify_when_exact():
    assert (2 * S) // 2 == S
    assert (2 * S) % 2 == 0
    assert (S * B) // B == S
    assert (S * B) % S == 0
    assert floordiv(7, 2) == 3 and mod(-7, 2) == 1
    assert 2 * S // -2 == -S


@pytest.mark.parametrize("s", [0, 1, 2, 5, 7, 100])
@pytest.mark.parametrize("k", [1, 2, 3, -2])
def test_floordiv_mod_atoms_evaluate_like_python(s, k):
    env = {"S": s, "B": 3}
    for e, want in [(S // k, s // k), (S % k, s % k), ((S + 1) // k, (s + 1) // k),
                    ((S - 10) % k, (s - 10) % k), (ceildiv(S, k), -(-s // k)),
                    ((S * B + 1) // k, (s * 3 + 1) // k), (3 * (S // k) + 1, 3 * (s // k) + 1)]:
        assert evaluate(e, env) == want, (e, env)
    if s:
        assert evaluate(k // S, env) == k // s
        assert evaluate(B % S, env) == 3 % s


def test_division_by_an_empty_dim_evaluates_to_zero():
    """Index math divides by dims and strides only; bound to 0 they are an empty dim, nothing is read
    through the view, and its bounds (a gradient's box: ``1 // (4*S)``) evaluate to 0, also for the
    tracked values a backend lays a program out with."""
    from luminal.core.symbolic import tracked

    env = {"S": 0, "B": 3}
    assert evaluate(1 // (4 * S), env) == 0 and evaluate(B % S, env) == 0
    assert evaluate(1 // (4 * S) + B, tracked(env)) == 3


def test_max_min():
    assert dmax(S, S + 1) == S + 1 and dmin(S, S + 1) == S
    assert dmax(S + 3, S) == S + 3 and dmin(S + 3, S) == S
    assert dmax(S, S) == S and dmin(4, 2) == 2 and dmax(4, 2) == 4
    assert dmax(S, B) == dmax(B, S)  # symmetric atoms are canonical
    assert dmin(S, B) == dmin(B, S)
    for s, b in [(0, 5), (5, 0), (3, 3)]:
        env = {"S": s, "B": b}
        assert evaluate(dmax(S, B), env) == max(s, b)
        assert evaluate(dmin(S, B), env) == min(s, b)
        assert evaluate(dmax(S - 4, 0), env) == max(s - 4, 0)


def test_atoms_combine_like_variables():
    h = S // 2
    assert h + h == 2 * h
    assert h - h == 0
    assert (S // 2) == (S // 2) and hash(S // 2) == hash(S // 2)
    assert S // 2 != S // 3
    assert free_vars(h * B + dmax(S, C)) == {"S", "B", "C"}


def test_evaluate_unbound():
    with pytest.raises(ValueError, match="'S' has no value bound"):
        evaluate(S + 1, {})
    assert evaluate(5, {}) == 5


# solve_linear / substitute ------------------------------------------------------------------------
def test_solve_linear():
    assert solve_linear(S, 5) == ("S", 5)
    assert solve_linear(2 * S + 3, 11) == ("S", 4)
    assert solve_linear(-S + 10, 3) == ("S", 7)
    assert solve_linear(S + 1, 0) == ("S", -1)  # the caller rejects negative dims
    assert solve_linear(S * B, 6) is None
    assert solve_linear(S + B, 6) is None
    assert solve_linear(S // 2, 3) is None
    assert solve_linear(7, 7) is None
    with pytest.raises(ValueError, match="no integer S makes 2\\*S equal 5"):
        solve_linear(2 * S, 5)


def test_substitute():
    assert substitute(S * B + C, {"S": 3}) == 3 * B + C
    assert substitute(S * B, {"S": 2, "B": 5}) == 10
    assert substitute((S + B) // C, {"S": 1, "B": 2, "C": 2}) == 1
    assert substitute((S + B) // C, {"S": 1}) == (S + B) // C  # a partly bound atom is kept
    assert substitute(4, {}) == 4


# printed forms ------------------------------------------------------------------------------------
@pytest.mark.parametrize("e,text", [
    ((S + 1) * 2, "2*S+2"),
    (-S, "-S"),
    (2 * S - 3, "2*S-3"),
    (3 * S * S - B + 4, "3*S*S-B+4"),
    (S * B, "B*S"),
    (S // 2, "(S//2)"),
    (S % 2, "(S%2)"),
    ((S + 1) // 2, "((S+1)//2)"),
    (S // (B * C), "(S//(B*C))"),
    ((-S) // 2, "((-S)//2)"),
    (S // -2, "(S//(-2))"),
    (3 * ((S + 1) // 2), "3*((S+1)//2)"),
    (dmax(S, B), "max(B, S)"),
    (dmin(S + 1, B), "min(B, S+1)"),
])
def test_str_forms(e, text):
    assert str(e) == text
    assert repr(e) == text
    env = {"S": 7, "B": 2, "C": 3}
    assert eval(text, {}, dict(env)) == evaluate(e, env)  # the printed form is the expression


def test_shape_str():
    assert shape_str(()) == "()"
    assert shape_str((S,)) == "(S,)"
    assert shape_str((S + 1, 3)) == "(S+1, 3)"
    assert shape_str((2, 3)) == "(2, 3)"


# properties ---------------------------------------------------------------------------------------
NAMES = ("A", "B", "C")
envs = st.fixed_dictionaries({n: st.integers(1, 9) for n in NAMES})


def trees(depth=3):
    """Expression trees as nested tuples; divisors are non-zero (ints or variables, which are >= 1)."""
    leaf = st.one_of(st.integers(-6, 6).map(lambda v: ("int", v)), st.sampled_from(NAMES).map(lambda n: ("var", n)))
    divisor = st.one_of(st.integers(1, 4) | st.integers(-4, -1), st.sampled_from(NAMES)).map(
        lambda d: ("var", d) if isinstance(d, str) else ("int", d))

    def extend(children):
        return st.one_of(
            st.tuples(st.sampled_from(["add", "sub", "mul", "max", "min"]), children, children),
            st.tuples(st.sampled_from(["floordiv", "mod"]), children, divisor),
            st.tuples(st.just("neg"), children),
        )

    return st.recursive(leaf, extend, max_leaves=8)


def build(t):
    """The tree as a Dim built with luminal's operations."""
    op = t[0]
    if op == "int":
        return t[1]
    if op == "var":
        return Sym.var(t[1])
    if op == "neg":
        return -build(t[1])
    a, b = build(t[1]), build(t[2])
    return {"add": lambda: a + b, "sub": lambda: a - b, "mul": lambda: a * b, "max": lambda: dmax(a, b),
            "min": lambda: dmin(a, b), "floordiv": lambda: floordiv(a, b), "mod": lambda: mod(a, b)}[op]()


def value(t, env):
    """The tree evaluated with Python ints."""
    op = t[0]
    if op == "int":
        return t[1]
    if op == "var":
        return env[t[1]]
    if op == "neg":
        return -value(t[1], env)
    a, b = value(t[1], env), value(t[2], env)
    return {"add": lambda: a + b, "sub": lambda: a - b, "mul": lambda: a * b, "max": lambda: max(a, b),
            "min": lambda: min(a, b), "floordiv": lambda: a // b, "mod": lambda: a % b}[op]()


PROP = settings(max_examples=150, deadline=None)


@PROP
@given(trees(), envs)
def test_evaluation_matches_python_ints(t, env):
    e = build(t)
    assert evaluate(e, env) == value(t, env)


@PROP
@given(trees(), envs)
def test_printed_form_evaluates_to_the_same_value(t, env):
    e = build(t)
    assert eval(str(e), {"max": max, "min": min}, dict(env)) == value(t, env)


@PROP
@given(trees(), trees(), trees(), envs)
def test_ring_laws_hold_structurally(t1, t2, t3, env):
    a, b, c = build(t1), build(t2), build(t3)
    assert a + b == b + a and hash(a + b) == hash(b + a)
    assert a * b == b * a
    assert (a + b) * c == a * c + b * c
    assert (a + b) + c == a + (b + c)
    assert a - a == 0
    assert evaluate((a + b) * c, env) == (evaluate(a, env) + evaluate(b, env)) * evaluate(c, env)


@PROP
@given(trees(), trees(), envs)
def test_equal_expressions_evaluate_equal(t1, t2, env):
    a, b = build(t1), build(t2)
    if a == b:
        assert evaluate(a, env) == evaluate(b, env)
        assert hash(a) == hash(b)
        assert str(a) == str(b)


@PROP
@given(trees(), envs)
def test_free_vars_and_substitute(t, env):
    e = build(t)
    assert free_vars(e) <= set(NAMES)
    assert substitute(e, env) == evaluate(e, env)
    part = {k: v for k, v in env.items() if k != "A"}
    assert evaluate(substitute(e, part), env) == evaluate(e, env)


@PROP
@given(trees(), trees(), envs)
def test_exact_div_is_exact(t1, t2, env):
    a, b = build(t1), build(t2)
    q = exact_div(a, b)
    if q is not None:
        bv = evaluate(b, env)
        assert evaluate(q, env) * bv == evaluate(a, env)


@PROP
@given(st.integers(-5, 5).filter(bool), st.integers(-20, 20), st.integers(0, 50))
def test_solve_linear_property(c, k, v):
    d = c * S + k
    assert solve_linear(d, c * v + k) == ("S", v)
    if abs(c) > 1:
        with pytest.raises(ValueError):
            solve_linear(d, c * v + k + 1)


def test_floordiv_and_mod_take_out_the_whole_multiples():
    """(b*q + r) // b is q + r // b for integer-valued terms: a strided conv's output size over a size
    declared as a multiple, (4*h - 1)//2 + 1, is 2*h, as a pool's 4*h // 2 is, so a U-Net's skip joins."""
    from luminal import nn
    from luminal.core.symbolic import evaluate, floordiv, mod

    h, w = lm.sym("h"), lm.sym("w")
    assert floordiv(4 * h - 1, 2) + 1 == 2 * h
    assert floordiv(4 * h + 3 * w + 5, 2) == 2 * h + 2 + floordiv(3 * w + 1, 2)
    assert mod(4 * h + 3, 2) == 1 and mod(6 * h - 1, 3) == 2
    assert str(floordiv(3 * h + 4, 2)) == "((3*h+4)//2)"  # (no term moves but the constant: kept as it was)
    for a in (4 * h - 1, -4 * h - 1, 6 * h + 3 * w - 7, 2 * h * w + w + 1):
        for b in (2, 3, 4):
            for env in ({"h": 0, "w": 0}, {"h": 1, "w": 5}, {"h": 7, "w": 2}):
                n = evaluate(a, env)
                assert evaluate(floordiv(a, b), env) == n // b and evaluate(mod(a, b), env) == n % b, (a, b, env)
    g = lm.Graph()
    x = g.input("x", (1, 3, 4 * h, 4 * w))
    down = nn.Conv2d(3, 3, 3, stride=2, padding=1)(x)
    assert down.shape[2:] == (2 * h, 2 * w)
    up = nn.functional.interpolate(down, scale_factor=2)
    assert lm.cat([x, up], 1).shape == (1, 6, 4 * h, 4 * w)
