"""``symbolic.DimValue``: the int a CPU layout computes its sizes with (``tracked`` dims), which keeps
the dim expression it is the value of. Generated code reads that expression instead of the value, so
the code is right for every binding of the dims only if the expression is carried exactly: these
tests check the value *and* that the expression evaluates like the original one under other
bindings; that the operations it does not carry give plain ints (a constant for one binding, never
a wrong expression); ``same``; and that it still behaves as an int (equality, hashing, dict keys)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from luminal.core.symbolic import (
    DimValue,
    Sym,
    TrackedEnv,
    dmax,
    dmin,
    evaluate,
    floordiv,
    mod,
    same,
    sym_of,
    tracked,
)

B, S = Sym.var("B"), Sym.var("S")
NAMES = ("B", "S")
envs = st.fixed_dictionaries({n: st.integers(1, 9) for n in NAMES})
# bindings other than the one laid out: the expression must hold there too
OTHERS = [{"B": 1, "S": 1}, {"B": 2, "S": 7}, {"B": 9, "S": 3}, {"B": 13, "S": 13}, {"B": 4, "S": 100}]
PROP = settings(max_examples=200, deadline=None)


def trees(ops=("add", "sub", "mul", "max", "min")):
    """Expression trees as nested tuples over B and S; divisors never zero (non-zero ints, a name, or
    a name plus a positive int: names are >= 1 in every binding used here)."""
    leaf = st.one_of(st.integers(-6, 6).map(lambda v: ("int", v)), st.sampled_from(NAMES).map(lambda n: ("var", n)))
    divisor = st.one_of(
        st.integers(1, 5).map(lambda v: ("int", v)), st.integers(-5, -1).map(lambda v: ("int", v)),
        st.sampled_from(NAMES).map(lambda n: ("var", n)),
        st.tuples(st.sampled_from(NAMES), st.integers(1, 3)).map(lambda nk: ("add", ("var", nk[0]), ("int", nk[1]))))

    def extend(children):
        return st.one_of(
            st.tuples(st.sampled_from(ops), children, children),
            st.tuples(st.sampled_from(["floordiv", "mod", "rfloordiv", "rmod"]), children, divisor),
            st.tuples(st.just("neg"), children),
        )

    return st.recursive(leaf, extend, max_leaves=8)


def build(t):
    """The tree as a Dim, built with the symbolic module's operations (what a view's dims are)."""
    op = t[0]
    if op == "int":
        return t[1]
    if op == "var":
        return Sym.var(t[1])
    if op == "neg":
        return -build(t[1])
    a, b = build(t[1]), build(t[2])
    return {"add": lambda: a + b, "sub": lambda: a - b, "mul": lambda: a * b, "max": lambda: dmax(a, b),
            "min": lambda: dmin(a, b), "floordiv": lambda: floordiv(a, b), "mod": lambda: mod(a, b),
            # (the divisor first: ``7 // B`` as well as ``B // 7``)
            "rfloordiv": lambda: floordiv(b, a) if _nonzero(a) else floordiv(a, b),
            "rmod": lambda: mod(b, a) if _nonzero(a) else mod(a, b)}[op]()


def _nonzero(d) -> bool:
    """Whether ``d`` is never zero in the bindings these tests use (so it may divide)."""
    return all(evaluate(d, e) != 0 for e in OTHERS + [{"B": b, "S": s} for b in range(1, 10) for s in range(1, 10)])


def apply(t, env):
    """The tree computed with Python's operators on the values of ``env`` (DimValues when ``env`` is
    tracked): what a layout does with sizes. Only the operations DimValue carries (no max/min)."""
    op = t[0]
    if op == "int":
        return t[1]
    if op == "var":
        return env[t[1]]
    if op == "neg":
        return -apply(t[1], env)
    a, b = apply(t[1], env), apply(t[2], env)
    if op in ("rfloordiv", "rmod"):
        if _nonzero(build(t[1])):
            a, b = b, a
        op = op[1:]
    return {"add": lambda: a + b, "sub": lambda: a - b, "mul": lambda: a * b, "floordiv": lambda: a // b,
            "mod": lambda: a % b}[op]()


def _carried(v, expr) -> None:
    """``v`` (a tracked result) carries ``expr``: a DimValue of it when it is symbolic, and its
    expression evaluates as ``expr`` does in other bindings (not only in the one laid out)."""
    if isinstance(expr, int):
        assert type(v) is int, (v, expr)
        return
    assert type(v) is DimValue, (v, expr)
    assert v.sym == expr, (v.sym, expr)
    for other in OTHERS:
        assert evaluate(v.sym, other) == evaluate(expr, other), (v.sym, expr, other)


@PROP
@given(trees(), envs)
def test_tracked_evaluation_carries_the_expression(t, env):
    """What a layout does: evaluate a view's dims under the tracked binding. The value is the plain
    evaluation's, and the expression is the dim itself (a max or min: the max, not the operand that
    won in this binding)."""
    e = build(t)
    v = evaluate(e, tracked(env))
    assert v == evaluate(e, env)
    _carried(v, e)


@PROP
@given(trees(ops=("add", "sub", "mul")), envs)
def test_arithmetic_on_dim_values_carries_the_expression(t, env):
    """Sizes computed from tracked dims with + - * // % and negation (both operand orders, ints mixed
    in) keep the expression of the computation."""
    v = apply(t, tracked(env))
    assert v == apply(t, env)
    _carried(v, build(t))


@PROP
@given(trees(), trees(), envs)
def test_same_is_sound_for_every_binding(t1, t2, env):
    """``same`` on tracked values answers for every binding: when it says yes, the two dims are
    equal in the other bindings as well (code generated on that answer is right for them)."""
    e1, e2 = build(t1), build(t2)
    tenv = tracked(env)
    v1, v2 = evaluate(e1, tenv), evaluate(e2, tenv)
    if same(v1, v2):
        assert v1 == v2
        for other in OTHERS:
            assert evaluate(e1, other) == evaluate(e2, other)
    if e1 == e2:
        assert same(v1, v2)


def test_max_and_min_keep_the_atom_whichever_operand_wins():
    for env in ({"B": 2, "S": 5}, {"B": 5, "S": 2}, {"B": 3, "S": 3}):
        tenv = tracked(env)
        hi, lo = evaluate(dmax(B, S), tenv), evaluate(dmin(B, S), tenv)
        assert (hi, lo) == (max(env.values()), min(env.values()))
        assert hi.sym == dmax(B, S) and lo.sym == dmin(B, S)


@pytest.mark.parametrize("op", [
    lambda d: d ** 2, lambda d: abs(d), lambda d: +d, lambda d: d / 2, lambda d: d << 1, lambda d: d & 3,
    lambda d: divmod(d, 2)[0], lambda d: round(d), lambda d: int(d), lambda d: d + np.int64(1),
    lambda d: np.int64(1) + d, lambda d: d * np.int64(2), lambda d: np.int64(7) // d, lambda d: d + 1.5,
], ids=["pow", "abs", "pos", "truediv", "lshift", "and", "divmod", "round", "int", "add-np", "radd-np", "mul-np",
        "rfloordiv-np", "add-float"])
def test_operations_it_does_not_carry_give_no_dim_value(op):
    """These have no expression here: a plain number (a constant, right for this binding alone),
    never a DimValue whose expression would be wrong in other bindings."""
    d = tracked({"B": 5})["B"]
    out = op(d)
    assert type(out) is not DimValue
    assert out == op(5)


def test_constant_results_are_plain_ints():
    d = tracked({"B": 5})["B"]
    for out in (d - d, d * 0, d // d, d % d, -(d - d), (d + 1) - d):
        assert type(out) is int
    assert type(-DimValue(3, 3)) is int  # a DimValue of a constant expression


def test_same_semantics():
    tenv = tracked({"B": 4, "S": 4})
    b, s = tenv["B"], tenv["S"]
    assert not same(b, 4) and not same(4, b)  # equal now, not in every binding
    assert not same(b, s)  # equal values, other dims
    assert same(b, DimValue(7, B))  # one expression (values of two bindings)
    assert same(b * 2 + 1, 1 + 2 * b)
    assert same(3, 3) and not same(3, 4)
    assert same(DimValue(5, 5), 5)  # a constant expression is its value
    assert same((b, 2, s), (tenv["B"], 2, s)) and not same((b, 2), (b, 2, 1)) and not same((b,), b)
    assert not same((b, 2), (4, 2))


def test_tracked_env():
    tenv = tracked({"B": 3, "S": 0})
    assert isinstance(tenv, TrackedEnv) and tenv == {"B": 3, "S": 0}
    assert all(type(v) is DimValue and v.sym == Sym.var(k) for k, v in tenv.items())
    assert sym_of(tenv["B"]) == B and sym_of(7) == 7 and type(sym_of(np.int64(7))) is int
    e = 2 * B * S + floordiv(B, 2)
    assert evaluate(e, tenv) is evaluate(e, tenv)  # kept per binding (``known``)
    assert evaluate(e, tracked({"B": 5, "S": 1})) == 12  # never another binding's value


def test_equality_and_hashing_are_the_ints():
    b = tracked({"B": 5})["B"]
    other = DimValue(5, S)
    assert b == 5 and 5 == b and b == other and hash(b) == hash(5) == hash(other)
    assert {b: "x"}[5] == "x" and {5: "x"}[b] == "x" and len({b, 5, other}) == 1
    assert b < 6 and sorted([7, b, 2]) == [2, 5, 7] and isinstance(b, int)
    assert type(int(b)) is int and list(range(b)) == [0, 1, 2, 3, 4]
    shape = np.zeros((b, 2)).shape
    assert shape == (5, 2) and all(type(n) is int for n in shape)
    assert str(b) == "5" and f"{b:>3}" == "  5"


def test_copy_and_pickle_keep_value_and_expression():
    import copy
    import pickle

    v = tracked({"B": 5, "S": 3})["B"] * 2 + 1
    for w in (copy.copy(v), copy.deepcopy(v), pickle.loads(pickle.dumps(v))):
        assert type(w) is type(v) and w == 11 and w.sym == v.sym


def test_a_derived_parameter_carries_its_dim():
    """A dim the kernel cannot compute per item (a floor division, a clamp) is a parameter of its own
    whose name carries the dim (``ir.DerivedDim``): its value comes from the kernel's ``params`` alone,
    with no process-wide table, and survives pickling (a kernel sent to another process)."""
    import pickle

    from luminal.codegen import ir

    B = Sym.var("B")
    d = (B + 3) // 4
    v = ir.dim(d)
    assert v.op == "param" and isinstance(v.arg, ir.DerivedDim) and v.arg.dim == d
    assert ir.derived_value(v.arg, {"B": 10}) == 3 and ir.derived_value(v.arg, {"B": 13}) == 4
    again = pickle.loads(pickle.dumps(v.arg))
    assert again == v.arg and again.dim == d and ir.derived_value(again, {"B": 5}) == 2
    assert ir.dim((B + 3) // 4).arg == v.arg  # the same dim, the same name
    with pytest.raises(KeyError, match="neither a dim"):
        ir.derived_value("d_unknown", {"B": 1})
