"""Errors for bad shapes, dtypes and inputs: raised while building (or before any work at call time),
naming the op, the shapes/dtypes, and pointing at the user's lines: where each operand was made and
where the failing call was written.

Line numbers are taken with ``here()`` on the same source line as the statement they refer to.
"""

from __future__ import annotations

import operator
import sys

import numpy as np
import pytest

import luminal as lm

HERE = __file__


def here() -> int:
    """The line number of the caller's current line."""
    return sys._getframe(1).f_lineno


def at(line: int) -> str:
    return f"{HERE}:{line}:"


def check(exc, op: str, *, made=(), called: int | None = None, has=()):
    """The message starts with the op's name, names each operand's line, the call line and ``has``."""
    msg = str(exc.value)
    assert msg.startswith(f"{op}: "), msg
    for line in made:
        assert f"made at {at(line)}" in msg, msg
    if called is not None:
        assert f"called at {at(called)}" in msg, msg
    for text in has:
        assert text in msg, msg
    return msg


@pytest.fixture
def g():
    return lm.Graph()


def test_error_paths_are_this_file():
    """Sanity for the helpers: the path in messages is this file's own path."""
    g = lm.Graph()
    x = g.input("x", (3,)); lx = here()
    with pytest.raises(ValueError) as e:
        lc = here(); x.reshape(4)
    msg = check(e, "reshape", made=[lx], called=lc)
    assert "tests/frontend/test_errors.py" in msg


# shapes -------------------------------------------------------------------------------------------
def test_add_broadcast_mismatch(g):
    a = g.input("a", ("B", 3)); la = here()
    b = g.constant(np.ones(4, np.float32)); lb = here()
    with pytest.raises(ValueError) as e:
        lc = here(); a + b
    check(e, "add", made=[la, lb], called=lc, has=["(B, 3)", "(4,)", "cannot broadcast", "3 vs 4",
                                                    "operand 0: (B, 3) float32", "operand 1: (4,) float32"])
    # the source text of the lines is quoted too
    assert 'a = g.input("a", ("B", 3))' in str(e.value)


def test_mul_broadcast_mismatch(g):
    a = g.input("a", (2, 3)); la = here()
    b = g.input("b", (2, 1, 4)); lb = here()
    with pytest.raises(ValueError) as e:
        lc = here(); a * b
    check(e, "mul", made=[la, lb], called=lc, has=["(2, 3)", "(2, 1, 4)", "3 vs 4"])


def test_symbolic_dims_do_not_broadcast_against_other_dims(g):
    a = g.input("a", ("S",)); la = here()
    b = g.input("b", ("T",)); lb = here()
    with pytest.raises(ValueError) as e:
        lc = here(); a - b
    check(e, "sub", made=[la, lb], called=lc, has=["(S,)", "(T,)", "S vs T"])


def test_where_condition_shape_mismatch(g):
    c = g.input("c", (4,), dtype=lm.bool); lcnd = here()
    a = g.input("a", (3,)); la = here()
    with pytest.raises(ValueError) as e:
        lc = here(); lm.where(c, a, 0.0)
    check(e, "where", made=[lcnd, la], called=lc, has=["(4,)", "(3,)", "4 vs 3", "bool"])


def test_where_branch_shape_mismatch(g):
    c = g.input("c", (3,), dtype=lm.bool)
    a = g.input("a", (3,)); la = here()
    b = g.input("b", (2,)); lb = here()
    with pytest.raises(ValueError) as e:
        lc = here(); lm.where(c, a, b)
    check(e, "where", made=[la, lb], called=lc, has=["(3,)", "(2,)"])


def test_matmul_contracted_dim_mismatch(g):
    a = g.input("a", ("B", 3)); la = here()
    w = g.input("w", (4, 5)); lw = here()
    with pytest.raises(ValueError) as e:
        lc = here(); a @ w
    check(e, "matmul", made=[la, lw], called=lc, has=["3 vs 4", "(B, 3)", "(4, 5)"])


def test_matmul_batch_mismatch(g):
    a = g.input("a", (2, 3, 4)); la = here()
    b = g.input("b", (5, 4, 6)); lb = here()
    with pytest.raises(ValueError) as e:
        lc = here(); a.matmul(b)
    check(e, "matmul", made=[la, lb], called=lc, has=["2 vs 5"])


def test_reshape_wrong_element_count(g):
    a = g.input("a", ("B", 3)); la = here()
    with pytest.raises(ValueError) as e:
        lc = here(); a.reshape(7)
    check(e, "reshape", made=[la], called=lc, has=["(7,)", "3*B", "(B, 3)"])
    with pytest.raises(ValueError) as e:
        lc = here(); a.reshape(-1, 2)  # 3*B is not divisible by 2 for every B
    check(e, "reshape", made=[la], called=lc, has=["(-1, 2)"])
    with pytest.raises(ValueError) as e:
        lc = here(); a.reshape(-1, -1)
    check(e, "reshape", made=[la], called=lc, has=["-1"])


def test_permute_bad_permutation(g):
    a = g.input("a", (2, 3, 4)); la = here()
    with pytest.raises(ValueError) as e:
        lc = here(); a.permute(0, 0, 1)
    check(e, "permute", made=[la], called=lc, has=["(0, 0, 1)", "permutation", "(2, 3, 4)"])
    with pytest.raises(ValueError) as e:
        lc = here(); a.permute(1, 0)
    check(e, "permute", made=[la], called=lc, has=["(1, 0)"])
    with pytest.raises(ValueError) as e:
        lc = here(); a.permute(0, 1, 3)
    check(e, "permute", made=[la], called=lc, has=["dim 3", "out of range"])


def test_expand_non_one_dim(g):
    a = g.input("a", (2, 3)); la = here()
    with pytest.raises(ValueError) as e:
        lc = here(); a.expand(4, 3)
    check(e, "expand", made=[la], called=lc, has=["dim 0 of size 2 cannot expand to 4", "(2, 3)"])
    s = g.input("s", ("S", 1)); ls = here()
    with pytest.raises(ValueError) as e:
        lc = here(); s.expand(5, 7)  # a symbolic dim is not known to be 1
    check(e, "expand", made=[ls], called=lc, has=["size S cannot expand to 5"])
    with pytest.raises(ValueError) as e:
        lc = here(); a.expand(3)
    check(e, "expand", made=[la], called=lc, has=["fewer dims"])


@pytest.mark.parametrize("op", ["sum", "softmax", "mean", "amax", "argmax", "cumsum", "log_softmax"])
def test_out_of_range_axis(g, op):
    a = g.input("a", ("B", 3)); la = here()
    with pytest.raises(ValueError) as e:
        lc = here(); getattr(a, op)(2)
    check(e, {"amax": "max"}.get(op, op), made=[la], called=lc, has=["dim 2", "out of range", "2-d", "(B, 3)"])
    with pytest.raises(ValueError):
        getattr(a, op)(-3)


def test_non_int_axis_is_a_type_error(g):
    a = g.input("a", (2, 3)); la = here()
    with pytest.raises(TypeError) as e:
        lc = here(); a.sum(1.0)
    check(e, "sum", made=[la], called=lc, has=["1.0"])


def test_cat_mismatched_shapes(g):
    a = g.input("a", ("B", 3)); la = here()
    m = g.input("m", (4, 5)); lm_ = here()
    with pytest.raises(ValueError) as e:
        lc = here(); lm.cat([a, m], 0)
    check(e, "cat", made=[la, lm_], called=lc, has=["(B, 3)", "(4, 5)", "except in dim 0"])
    v = g.input("v", (3,)); lv = here()
    with pytest.raises(ValueError) as e:
        lc = here(); lm.cat([a, v], 1)  # rank mismatch
    check(e, "cat", made=[la, lv], called=lc, has=["(B, 3)", "(3,)"])


def test_stack_mismatched_shapes(g):
    a = g.input("a", (3,)); la = here()
    b = g.input("b", (4,)); lb = here()
    with pytest.raises(ValueError) as e:
        lc = here(); lm.stack([a, b])
    check(e, "stack", made=[la, lb], called=lc, has=["(3,)", "(4,)"])


def test_too_many_indices(g):
    a = g.input("a", ("B", 3)); la = here()
    with pytest.raises(IndexError) as e:
        lc = here(); a[0, 0, 0]
    check(e, "getitem", made=[la], called=lc, has=["too many indices (3)", "2-d"])
    with pytest.raises(IndexError):
        a[0, ..., 0, 0]
    with pytest.raises(IndexError):
        a[..., ...]


def test_out_of_range_int_index(g):
    a = g.input("a", ("B", 3)); la = here()
    with pytest.raises(IndexError) as e:
        lc = here(); a[:, 5]
    check(e, "getitem", made=[la], called=lc, has=["index 5", "size 3", "dim 1"])
    with pytest.raises(IndexError) as e:
        lc = here(); a[:, -4]
    check(e, "getitem", made=[la], called=lc, has=["index -4"])
    with pytest.raises(TypeError) as e:
        lc = here(); a[1.5]
    check(e, "getitem", made=[la], called=lc, has=["1.5"])


def test_gather_wrong_rank(g):
    x = g.input("x", ("B", 3)); lx = here()
    i = g.input("i", (3,), dtype=lm.int32); li = here()
    with pytest.raises(ValueError) as e:
        lc = here(); x.gather(1, i)
    check(e, "gather", made=[lx, li], called=lc, has=["2 dims", "(B, 3)", "(3,) int32"])


def test_gather_index_too_large_off_axis(g):
    x = g.input("x", (2, 3)); lx = here()
    i = g.input("i", (4, 1), dtype=lm.int32); li = here()
    with pytest.raises(ValueError) as e:
        lc = here(); x.gather(1, i)
    check(e, "gather", made=[lx, li], called=lc, has=["(4)", "(2)"])


# dtypes -------------------------------------------------------------------------------------------
def test_invert_float(g):
    a = g.input("a", ("B", 3)); la = here()
    with pytest.raises(TypeError) as e:
        lc = here(); _ = ~a
    check(e, "invert", made=[la], called=lc, has=["bool", "float32"])


@pytest.mark.parametrize("fn,op", [(operator.and_, "and"), (operator.or_, "or"), (operator.xor, "xor")])
def test_bitwise_on_floats(g, fn, op):
    a = g.input("a", (3,)); la = here()
    b = g.input("b", (3,))
    with pytest.raises(TypeError) as e:
        lc = here(); fn(a, b)  # a & b, a | b, a ^ b
    check(e, op, made=[la], called=lc, has=["bool", "float32"])


def test_shift_of_floats(g):  # (& | ^ ~ << >> work on int32: test_api_math.py)
    x = g.input("x", (3,)); lx = here()
    with pytest.raises(TypeError) as e:
        lc = here(); x << 1
    check(e, "bitwise_left_shift", made=[lx], called=lc, has=["int32", "float32"])


@pytest.mark.parametrize("op", ["mean", "var", "std"])
def test_mean_of_int(g, op):
    i = g.input("i", (3,), dtype=lm.int32); li = here()
    with pytest.raises(TypeError) as e:
        lc = here(); getattr(i, op)()
    check(e, op, made=[li], called=lc, has=["int32", "float"])


@pytest.mark.parametrize("op", ["neg", "abs"])  # (sign takes bool, as torch's)
def test_bool_neg(g, op):
    c = g.input("c", (3,), dtype=lm.bool); lc_ = here()
    with pytest.raises(TypeError) as e:
        lc = here(); getattr(c, op)()
    check(e, op, made=[lc_], called=lc, has=["bool"])
    with pytest.raises(TypeError):
        _ = -c
    with pytest.raises(TypeError):
        c - c


def test_gather_float_index(g):
    x = g.input("x", (2, 3)); lx = here()
    with pytest.raises(TypeError) as e:
        lc = here(); x.gather(1, x)
    check(e, "gather", made=[lx], called=lc, has=["integer", "float32"])
    with pytest.raises(TypeError) as e:
        lc = here(); x.index_select(0, g.input("f", (2,)))
    check(e, "index_select", called=lc, has=["float32"])


def test_matmul_bool(g):
    c = g.input("c", (2, 2), dtype=lm.bool); lc_ = here()
    with pytest.raises(TypeError) as e:
        lc = here(); c @ c
    check(e, "matmul", made=[lc_], called=lc, has=["bool"])


def test_combining_with_non_numbers(g):
    a = g.input("a", (3,)); la = here()
    with pytest.raises(TypeError) as e:
        lc = here(); a + "x"
    check(e, "add", made=[la], called=lc, has=["str"])


def test_unknown_dtype_names():
    g = lm.Graph()
    with pytest.raises(TypeError, match="int64"):
        g.input("a", (3,), dtype="int64")
    with pytest.raises(TypeError, match="int64.*not supported"):
        g.input("a", (3,), dtype=np.int64)
    a = g.input("a", (3,))
    with pytest.raises(TypeError, match="unknown dtype"):
        a.to("complex")


# graphs and truth values --------------------------------------------------------------------------
def test_operands_from_two_graphs():
    g1, g2 = lm.Graph(), lm.Graph()
    a = g1.input("a", (3,)); la = here()
    z = g2.input("z", (3,)); lz = here()
    with pytest.raises(ValueError) as e:
        lc = here(); a + z
    msg = str(e.value)
    assert "different graphs" in msg
    assert f"made at {at(la)}" in msg and f"made at {at(lz)}" in msg and f"called at {at(lc)}" in msg
    with pytest.raises(ValueError, match="different graphs"):
        lm.where(g1.input("c", (3,), dtype=lm.bool), a, z)
    with pytest.raises(ValueError, match="same graph"):
        lm.compile([a, z])


def test_operands_from_two_graphs_with_broadcast():
    g1, g2 = lm.Graph(), lm.Graph()
    a = g1.input("a", ("B", 3))
    z = g2.input("z", (3,)); lz = here()
    with pytest.raises(ValueError) as e:
        a + z
    assert f"operand 1: (3,) float32, made at {at(lz)}" in str(e.value)


def test_cat_from_two_graphs():
    g1, g2 = lm.Graph(), lm.Graph()
    a = g1.input("a", (3,))
    z = g2.input("z", (3,))
    with pytest.raises(ValueError) as e:
        lm.cat([a, z])
    assert str(e.value).startswith("cat: ")


def test_gather_from_two_graphs_names_gather():
    """Checked at the op's entry: not reported by the Gather primitive."""
    g1, g2 = lm.Graph(), lm.Graph()
    x = g1.input("x", (2, 3)); lx = here()
    i = g2.input("i", (2, 1), dtype=lm.int32); li = here()
    with pytest.raises(ValueError) as e:
        lc = here(); x.gather(1, i)
    check(e, "gather", made=[lx, li], called=lc, has=["different graphs"])


def test_bool_of_tensor_raises(g):
    a = g.input("a", (3,))
    with pytest.raises(TypeError, match="lazy"):
        bool(a)
    with pytest.raises(TypeError):
        if a > 0:
            pass
    with pytest.raises(TypeError):
        assert a == a
    with pytest.raises(TypeError, match="run time"):
        bool(lm.sym("S"))


def test_len_of_symbolic_or_0d(g):
    with pytest.raises(TypeError, match="symbolic"):
        len(g.input("a", ("S", 3)))
    with pytest.raises(TypeError, match="0-d"):
        len(g.input("b", ()))
    assert len(g.input("c", (4, "S"))) == 4


def test_compile_unknown_backend(g):
    a = g.input("a", (3,))
    with pytest.raises(ValueError, match=r"unknown backend 'tpu'.*cpu"):
        lm.compile(a, backend="tpu")
    with pytest.raises(TypeError, match="GraphTensor"):
        lm.compile([])
    with pytest.raises(TypeError, match="GraphTensor"):
        lm.compile([a, np.ones(3)])
    with pytest.raises(TypeError, match="GraphTensor"):
        lm.compile(3)


# errors of inner ops ------------------------------------------------------------------------------
def test_inner_op_error_is_named_by_the_op_called(g):
    """An op built from others reports their error under its own name, keeping the inner op's name,
    its message and its operands: the user wrote leaky_relu, not mul."""
    x = g.input("x", (3,)); lx = here()
    with pytest.raises(TypeError) as e:
        lc = here(); x.leaky_relu("a")
    msg = check(e, "leaky_relu", made=[lx], called=lc, has=["leaky_relu: mul: cannot combine a tensor with str"])
    assert msg.count("called at") == 1, msg
    assert e.value.__cause__ is not None  # the inner error stays attached


def test_inner_op_error_is_named_by_the_layer_called(g):
    from luminal import nn

    x = g.input("x", (2, 3), dtype=lm.bool); lx = here()
    with pytest.raises(TypeError) as e:
        lc = here(); nn.Linear(3, 4)(x)
    check(e, "Linear(in_features=3, out_features=4, bias=True)", made=[lx], called=lc,
          has=["matmul: bool operands are not supported"])


@pytest.mark.parametrize("op,call", [("relu", lambda: lm.relu(None)), ("sum", lambda: lm.sum([1.0])),
                                     ("exp", lambda: lm.exp(np.ones(2)))])
def test_non_tensor_is_named_by_the_op(op, call):
    """Checked at the op's entry, not found by an inner op (lt, mul, cast) or as an AttributeError."""
    with pytest.raises(TypeError) as e:
        call()
    check(e, op, has=["must be a GraphTensor, got", f"called at {HERE}:"])


# call-time errors: all raised before any work ----------------------------------------------------
class _NoWork:
    """Stands in for a compiled graph's runner and fails the test if it is ever run."""

    def __init__(self, runner):
        self.ran = False

    def __call__(self, arrays, env):
        self.ran = True
        raise AssertionError(f"work was done for a bad call (env={env})")


def no_work(outputs, **kw):
    f = lm.compile(outputs, **kw)
    f.runner = _NoWork(f.runner)
    return f


f32 = np.float32


def two_inputs():
    g = lm.Graph()
    a = g.input("a", ("B", 3))
    b = g.input("b", ("B", 4))
    return g, [a.sum(1), b.sum(1)]


def test_missing_input():
    _, outs = two_inputs()
    f = no_work(outs)
    with pytest.raises(TypeError, match=r"missing input\(s\) \['b'\]"):
        f(a=np.ones((2, 3), f32))
    with pytest.raises(TypeError, match=r"missing.*\['a', 'b'\]"):
        f()


def test_unexpected_input_name():
    _, outs = two_inputs()
    f = no_work(outs)
    with pytest.raises(TypeError, match=r"unexpected input\(s\) \['c'\].*\['a', 'b'\]"):
        f(a=np.ones((2, 3), f32), b=np.ones((2, 4), f32), c=np.ones(1, f32))


def test_positional_inputs_rejected():
    _, outs = two_inputs()
    f = no_work(outs)
    with pytest.raises(TypeError, match="by name"):
        f(np.ones((2, 3), f32), np.ones((2, 4), f32))


def test_wrong_rank():
    _, outs = two_inputs()
    f = no_work(outs)
    with pytest.raises(ValueError, match=r"input 'a': expected 2 dims \(B, 3\), got an array of shape \(3,\)"):
        f(a=np.ones(3, f32), b=np.ones((2, 4), f32))


def test_wrong_static_dim():
    _, outs = two_inputs()
    f = no_work(outs)
    with pytest.raises(ValueError, match=r"input 'a': dim 1 should be 3.*\(2, 4\)"):
        f(a=np.ones((2, 4), f32), b=np.ones((2, 4), f32))


def test_wrong_dtype_float64_for_float32():
    _, outs = two_inputs()
    f = no_work(outs)
    with pytest.raises(TypeError, match=r"input 'a': expected dtype float32, got float64.*astype"):
        f(a=np.ones((2, 3)), b=np.ones((2, 4), f32))
    with pytest.raises(TypeError, match="expected dtype float32, got int64"):
        f(a=np.ones((2, 3), np.int64), b=np.ones((2, 4), f32))
    with pytest.raises(TypeError, match="expected dtype float32, got bool"):
        f(a=np.ones((2, 3), bool), b=np.ones((2, 4), f32))


def test_non_numeric_input():
    _, outs = two_inputs()
    f = no_work(outs)
    with pytest.raises(TypeError, match="input 'a': expected a numpy array or a number, got str"):
        f(a="hello", b=np.ones((2, 4), f32))
    with pytest.raises(TypeError, match="input 'a'"):
        f(a=np.array([["x", "y", "z"]]), b=np.ones((1, 4), f32))
    with pytest.raises(TypeError, match="input 'a'"):
        f(a=[[object()] * 3], b=np.ones((1, 4), f32))


def int_graph():
    g = lm.Graph()
    i = g.input("i", (3,), dtype=lm.int32)
    return i


def test_float_array_for_int32_input():
    f = no_work(int_graph() + 1)
    with pytest.raises(TypeError, match=r"input 'i': expected dtype int32, got float32.*astype\(np.int32\)"):
        f(i=np.arange(3, dtype=f32))
    with pytest.raises(TypeError, match="got float64"):
        f(i=np.arange(3.0))


def test_int64_for_int32_input(backend):
    i = int_graph()
    f = lm.compile(i * 2, backend=backend)
    out = f(i=np.array([1, -2, 2**30], np.int64))
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, np.array([2, -4, 2**31], np.int64).astype(np.int32))
    np.testing.assert_array_equal(f(i=np.array([1, 2, 3], np.uint8)), [2, 4, 6])
    g = no_work(i * 2)
    with pytest.raises(ValueError, match=r"input 'i': integer values do not fit in int32"):
        g(i=np.array([0, 1, 2**31], np.int64))
    with pytest.raises(ValueError, match="int32"):
        g(i=np.array([0, -2**31 - 1, 0], np.int64))
    with pytest.raises(ValueError, match="int32"):
        g(i=np.array([0, 0, 2**63], np.uint64))
    # the edges of the range are fine
    np.testing.assert_array_equal(f(i=np.array([-2**31, 2**31 - 1, 0], np.int64)) // 2,
                                  np.array([-2**31, 2**31 - 1, 0], np.int64).astype(np.int32) * 2 // 2)


def test_contradicting_symbolic_dims_name_both_inputs():
    _, outs = two_inputs()
    f = no_work(outs)
    with pytest.raises(ValueError) as e:
        f(a=np.ones((2, 3), f32), b=np.ones((5, 4), f32))
    msg = str(e.value)
    assert "input 'b'" in msg and "from input 'a'" in msg and "B=2" in msg and "(5, 4)" in msg, msg
    assert f.runner.ran is False


def test_symbolic_dim_contradicting_itself():
    g = lm.Graph()
    x = g.input("x", ("N", "N"))
    f = no_work(x.sum())
    with pytest.raises(ValueError, match=r"input 'x': dim 1 should be N = 2 .*from input 'x'.*\(2, 3\)"):
        f(x=np.ones((2, 3), f32))


def test_derived_dims_checked():
    g = lm.Graph()
    s = lm.sym("S")
    a = g.input("a", (s,))
    b = g.input("b", (s + 1, 2 * s))
    f = no_work([a.sum(), b.sum()])
    with pytest.raises(ValueError, match=r"input 'b': dim 0 should be S\+1 = 4 \(S=3 from input 'a'\)"):
        f(a=np.ones(3, f32), b=np.ones((5, 6), f32))
    with pytest.raises(ValueError, match=r"input 'b': dim 1 should be 2\*S = 6"):
        f(a=np.ones(3, f32), b=np.ones((4, 7), f32))


def test_unsolvable_dims():
    g = lm.Graph()
    x = g.input("x", (lm.sym("S") * lm.sym("T"),))
    f = no_work(x.sum())
    with pytest.raises(ValueError, match=r"input 'x': cannot infer \['S', 'T'\] from dim 0 \(S\*T\)"):
        f(x=np.ones(6, f32))
    g = lm.Graph()
    y = g.input("y", (lm.sym("S") // 2,))
    f = no_work(y.sum())
    with pytest.raises(ValueError, match=r"cannot infer \['S'\]"):
        f(y=np.ones(3, f32))


def test_no_integer_solution():
    g = lm.Graph()
    x = g.input("x", (2 * lm.sym("M"),))
    f = no_work(x.sum())
    with pytest.raises(ValueError, match=r"input 'x': dim 0 is 2\*M, and no integer M makes it 5"):
        f(x=np.ones(5, f32))


def test_no_integer_solution_reported_as_mismatch_when_bound_elsewhere():
    """Whatever the order of the inputs, a dim fixed by another input gives the mismatch message."""
    g = lm.Graph()
    m = lm.sym("M")
    x = g.input("x", (2 * m,))
    y = g.input("y", (m,))
    f = no_work([x.sum(), y.sum()])
    with pytest.raises(ValueError, match=r"input 'x': dim 0 should be 2\*M = 6 \(M=3 from input 'y'\)"):
        f(x=np.ones(5, f32), y=np.ones(3, f32))


def test_negative_dim_binding():
    g = lm.Graph()
    x = g.input("x", (lm.sym("N") + 1,))
    f = no_work(x.sum())
    with pytest.raises(ValueError, match=r"input 'x'.*N negative \(N=-1\)"):
        f(x=np.ones(0, f32))


def test_dim_used_by_graph_but_given_by_no_input():
    g = lm.Graph()
    x = g.input("x", (3,))
    y = x.sum() + g.arange("K").sum().float()
    f = no_work(y)
    with pytest.raises(ValueError, match=r"\['K'\].*no input"):
        f(x=np.ones(3, f32))


def test_python_scalars_for_0d_inputs(backend):
    g = lm.Graph()
    s = g.input("s", ())
    i = g.input("i", (), dtype=lm.int32)
    c = g.input("c", (), dtype=lm.bool)
    f = lm.compile([s * 2, i + 1, c], backend=backend)
    out = f(s=1.5, i=3, c=True)
    assert [o.shape for o in out] == [(), (), ()]
    assert [o.dtype for o in out] == [np.float32, np.int32, np.bool_]
    assert out[0] == 3.0 and out[1] == 4 and out[2]
    assert f(s=2, i=True, c=False)[0] == 4.0  # weaker Python kinds are accepted
    assert f(s=np.float32(0.5), i=np.int32(1), c=np.bool_(True))[0] == 1.0
    bad = no_work([s * 2, i + 1, c])
    with pytest.raises(TypeError, match="input 'i': expected dtype int32, got float64"):
        bad(s=1.0, i=1.5, c=True)
    with pytest.raises(TypeError, match="input 'c': expected dtype bool"):
        bad(s=1.0, i=1, c=1)
    with pytest.raises(ValueError, match="input 'i': integer value 1099511627776 does not fit in int32"):
        bad(s=1.0, i=2**40, c=True)
    with pytest.raises(TypeError, match="input 's': expected dtype float32, got float64"):
        bad(s=np.array(1.0), i=1, c=True)  # a numpy array keeps its dtype
    g2 = lm.Graph()
    v = g2.input("v", (1,))
    with pytest.raises(ValueError, match=r"input 'v': expected 1 dims \(1,\), got an array of shape \(\)"):
        no_work(v * 2)(v=1.0)
    with pytest.raises(ValueError, match=r"input 's': expected 0 dims"):
        bad(s=[1.0], i=1, c=True)


def test_bfloat16_input_needs_float32_storage():
    g = lm.Graph()
    h = g.input("h", (3,), dtype=lm.bfloat16)
    f = no_work(h * 2)
    with pytest.raises(TypeError, match=r"expected dtype bfloat16, got float16 \(bfloat16 inputs are given as float32"):
        f(h=np.ones(3, np.float16))
    with pytest.raises(TypeError, match="bfloat16, got float64"):
        f(h=np.ones(3))


def test_float16_input_is_strict():
    g = lm.Graph()
    h = g.input("h", (3,), dtype=lm.float16)
    f = no_work(h * 2)
    with pytest.raises(TypeError, match=r"expected dtype float16, got float32 \(convert with .astype\(np.float16\)\)"):
        f(h=np.ones(3, f32))


def test_bad_call_does_not_spoil_the_next_good_one(backend):
    g, outs = two_inputs()
    f = lm.compile(outs, backend=backend)
    with pytest.raises(ValueError):
        f(a=np.ones((2, 3), f32), b=np.ones((5, 4), f32))
    sa, sb = f(a=np.ones((5, 3), f32), b=np.ones((5, 4), f32))
    np.testing.assert_array_equal(sa, np.full(5, 3, f32))
    np.testing.assert_array_equal(sb, np.full(5, 4, f32))
