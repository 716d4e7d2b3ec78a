"""Python's protocols and operator rules on a lazy GraphTensor, against what torch does.

A GraphTensor has no values while the graph is built. Where torch reads values (``bool(t)``, ``float(t)``,
``f"{t:.2f}"``, ``v in t``, ``pickle``) luminal must fail naming the protocol, the tensor and the line,
never answer something silently (torch compares one-element tensors by value in ``max``, ``sorted`` and
``list.index``; luminal cannot). Where torch has rules without values (augmented assignment is in-place:
the tensor keeps its dtype and shape; scalars of numpy promote as Python's), luminal follows them.
"""

from __future__ import annotations

import copy
import math
import operator
import pickle
import sys

import numpy as np
import pytest
import torch
from parity import TORCH_DTYPE, check, rand

import luminal as lm
from luminal import nn
from luminal.frontend.eager import EagerOnlyError

HERE = __file__


def _line() -> int:
    return sys._getframe(1).f_lineno


def _named_here(e, op: str, line: int | None = None) -> None:
    """The error names ``op`` first, the operand, and the line that called it (in this file; ``line``
    when given: a table's cases name the line of their lambda)."""
    msg = str(e.value)
    assert msg.startswith(f"{op}: "), msg
    assert "operand 0: " in msg and f"called at {HERE}:{'' if line is None else line}" in msg, msg


def _run(outs, **inputs):
    return lm.compile(list(outs), backend="reference")(**inputs)


# truth values ------------------------------------------------------------------------------------
TRUTH = {
    "bool": lambda x, y: bool(x),
    "if": lambda x, y: 1 if x else 0,
    "and": lambda x, y: x and y,
    "not": lambda x, y: not x,
    "chained": lambda x, y: 0 < x < 1,  # Python: (0 < x) and (x < 1); bool of the first
    "max-builtin": lambda x, y: max(x, y),
    "sorted": lambda x, y: sorted([x, y]),
    "list-in": lambda x, y: x in [y],
    "list-index": lambda x, y: [y, x].index(x),
}


@pytest.mark.parametrize("name", sorted(TRUTH))
def test_a_truth_value_is_refused_naming_the_line(name):
    """torch answers each for one-element tensors (by value) and refuses larger ones; a lazy tensor has no
    value, so every form is an EagerOnlyError (a TypeError) naming bool, the tensor and the line."""
    g = lm.Graph()
    x, y = g.input("x", ()), g.input("y", ())
    with pytest.raises(EagerOnlyError) as e:
        TRUTH[name](x, y)
    _named_here(e, "bool")
    assert "lazy" in str(e.value) and "lm.where" in str(e.value)


def test_identity_is_enough_for_containers():
    """dict keys, set members and ``in`` on a list holding the tensor itself use identity (no truth value),
    as torch's hash by id."""
    g = lm.Graph()
    x, y = g.input("x", (3,)), g.input("y", (3,))
    assert {x: 1, y: 2}[y] == 2 and len({x, x, y}) == 2
    assert x in [x, y] and [x, y].index(x) == 0
    assert hash(x) != hash(y)


# length, iteration, membership --------------------------------------------------------------------
def test_len_and_iteration_give_the_rows_as_torch():
    g = lm.Graph()
    x = g.input("x", (3, 2))
    assert len(x) == 3
    a, b, c = x
    rows = list(x)
    assert len(rows) == 3 and all(r.shape == (2,) for r in rows)
    v = rand((3, 2))
    got = _run([a, b, c, *reversed(x)], x=v)
    want = list(torch.from_numpy(v))
    for o, w in zip(got, want + want[::-1]):
        np.testing.assert_array_equal(o, w.numpy())
    with pytest.raises(ValueError, match="too many values to unpack"):
        p, q = x


@pytest.mark.parametrize("form", ["len", "iter", "unpack"])
def test_no_rows_without_a_static_first_dim(form):
    """torch's "len() of a 0-d tensor" / "iteration over a 0-d tensor"; a symbolic first dim is known only
    when the program runs. The error names the op actually used and the line (iteration said "len() of")."""
    g = lm.Graph()
    x0, xs = g.input("x0", ()), g.input("xs", ("S", 3))
    op = "len" if form == "len" else "iter"
    run = {"len": len, "iter": iter, "unpack": lambda t: [*t]}[form]
    with pytest.raises(TypeError, match=r"0-d tensor") as e:
        run(x0)
    _named_here(e, op)
    with pytest.raises(TypeError, match=r"first dim S is symbolic") as e:
        run(xs)
    _named_here(e, op)


def test_membership_is_refused_naming_the_lazy_form():
    """torch's ``v in t`` is ``(t == v).any()``; here it names that form (it iterated the rows, failing in
    bool of the first comparison, or in len() for a symbolic first dim)."""
    g = lm.Graph()
    x, xs = g.input("x", (3,)), g.input("xs", ("S",))
    for t in (x, xs):
        with pytest.raises(EagerOnlyError, match=r"\(t == v\)\.any\(\)") as e:
            line = _line(); 2.0 in t  # noqa: B015, E702
        _named_here(e, "in", line)
    v = np.array([1.0, 2.0, 3.0], np.float32)
    (got,) = _run([(x == 2.0).any()], x=v)
    assert bool(got) is (2.0 in torch.from_numpy(v))


# conversions to Python numbers and formatting ----------------------------------------------------
CONVERSIONS = {
    "int": (lambda t: int(t), "int"), "float": (lambda t: float(t), "float"),
    "complex": (lambda t: complex(t), "complex"), "math.floor": (lambda t: math.floor(t), "float"),
    "math.sqrt": (lambda t: math.sqrt(t), "float"), "math.isnan": (lambda t: math.isnan(t), "float"),
    "format-spec": (lambda t: format(t, ".2f"), "format"), "f-string-spec": (lambda t: f"{t:.4f}", "format"),
}


@pytest.mark.parametrize("name", sorted(CONVERSIONS))
def test_a_number_conversion_is_refused_naming_the_line(name):
    """torch reads the value of a one-element tensor; a lazy one fails naming the conversion and its
    lazy form (these were Python's "must be real number, not GraphTensor" or "unsupported format
    string passed to GraphTensor.__format__", naming no line)."""
    fn, op = CONVERSIONS[name]
    g = lm.Graph()
    x = g.input("x", ())
    assert isinstance(fn(torch.tensor(2.5)), (int, float, complex, bool, str))  # (torch: a value)
    with pytest.raises(EagerOnlyError) as e:
        fn(x)
    _named_here(e, op)


def test_a_host_tensor_names_np_asarray_for_its_values():
    t = lm.ones(3)  # made outside any graph: it has values
    with pytest.raises(EagerOnlyError, match=r"np\.asarray\(t\)"):
        float(t[0])
    np.testing.assert_array_equal(np.asarray(t), np.ones(3, np.float32))


def test_formatting_without_a_spec_and_what_python_itself_refuses():
    """``f"{t}"`` and ``str(t)`` are the repr. ``round``, ``math.trunc``, ``divmod`` and three-argument
    ``pow`` are refused by torch's Tensor too (it defines none of them); an index (``range(t)``,
    ``seq[t]``) is refused by Python: a tensor has no ``__index__``, whose presence marks an integer."""
    g = lm.Graph()
    x = g.input("x", ())
    assert f"{x}" == str(x) == repr(x) == "GraphTensor((), float32, node=Input#0)"
    tx = torch.tensor(2.5)
    for fn in (round, math.trunc, lambda t: divmod(t, 2), lambda t: pow(t, 2, 3)):
        for t in (tx, x):
            with pytest.raises(TypeError):
                fn(t)
    for fn in (range, operator.index, lambda t: [1, 2, 3][t]):
        with pytest.raises(TypeError, match="GraphTensor"):
            fn(x)


# copies and pickles ------------------------------------------------------------------------------
def test_a_deep_copy_is_a_handle_on_the_same_graph():
    """``copy.deepcopy`` copied the whole graph, Parameters included: the copy could not be combined with
    the original ("operands belong to different graphs"), and a program compiled from it read copies of the
    Parameters, keeping their old values after they changed. It is now a new handle on the same value, as
    ``copy.copy``: an in-place op on the original leaves it alone (torch's copy is independent too)."""
    lin = nn.Linear(3, 2)
    g = lm.Graph()
    x = g.input("x", (1, 3))
    y = lin(x)
    for c in (copy.copy(y), copy.deepcopy(y), copy.deepcopy([y, y])[0]):
        assert c is not y and c.graph is y.graph and c.shape == y.shape
    d = copy.deepcopy(y)
    both = y + d
    y.mul_(0)  # rebinds y only
    f = lm.compile([d, both, y], backend="reference")
    a = rand((1, 3))
    lin.weight.mul_(0)  # the Parameter changes after compiling: the program reads its current value
    got = f(x=a)
    bias = np.asarray(lin.bias.data)[None]
    np.testing.assert_allclose(got[0], bias, rtol=1e-6)
    np.testing.assert_allclose(got[1], 2 * bias, rtol=1e-6)
    np.testing.assert_array_equal(got[2], np.zeros((1, 2), np.float32))


def test_pickling_a_graph_tensor_is_refused():
    """It pickled its whole graph (with copies of the Parameters it reads) into a tensor with no values;
    a tensor made outside any graph has values, and pickles with them."""
    g = lm.Graph()
    y = nn.Linear(3, 2)(g.input("x", (1, 3)))
    with pytest.raises(EagerOnlyError, match=r"state_dict\(\)") as e:
        line = _line(); pickle.dumps(y)  # noqa: E702
    _named_here(e, "pickle", line)
    h = lm.arange(4) * 2
    np.testing.assert_array_equal(np.asarray(pickle.loads(pickle.dumps(h))), [0, 2, 4, 6])


# augmented assignment ------------------------------------------------------------------------------
AUGMENTED = {
    "+=": operator.iadd, "-=": operator.isub, "*=": operator.imul, "/=": operator.itruediv,
    "//=": operator.ifloordiv, "%=": operator.imod, "**=": operator.ipow, "&=": operator.iand,
    "|=": operator.ior, "^=": operator.ixor, "<<=": operator.ilshift, ">>=": operator.irshift,
}
I32, F16, F32, B = lm.int32, lm.float16, lm.float32, lm.bool
# (symbol, the tensor's dtype, the other operand: a number, or the dtype of a (3,) tensor)
AUG_CASES = [
    ("+=", I32, 1.5), ("+=", I32, F32), ("/=", I32, 2), ("%=", I32, 2.5), ("**=", I32, 0.5), ("+=", B, 1),
    ("*=", B, 2.0), ("+=", F16, F32), ("*=", F16, F32), ("-=", F16, 1.5), ("//=", I32, 2), ("**=", I32, 2),
    ("%=", I32, 3), ("<<=", I32, 1), (">>=", I32, 1), ("&=", I32, 6), ("|=", B, B), ("^=", B, True),
    ("+=", I32, True), ("*=", F32, F32), ("/=", F32, 3), ("+=", F32, I32),
]


def _values(d, seed):
    return rand((3,), d, seed=seed, low=1, high=5) if d is not B else np.array([True, False, True])


@pytest.mark.parametrize("case", AUG_CASES, ids=lambda c: f"{c[1].name}{c[0]}{getattr(c[2], 'name', c[2])}")
def test_augmented_assignment_is_torchs_in_place_op(case):
    """``x += y`` is torch's in-place add: the result keeps x's dtype (a higher kind is refused, "result
    type Float can't be cast to the desired output type Int"; a lower or narrower one is cast back). It
    rebound the name to the out-of-place result: an int tensor became float, a float16 one float32."""
    sym, d, other = case
    fn = AUGMENTED[sym]
    xv = _values(d, 0)
    tx = torch.from_numpy(xv.copy()).to(TORCH_DTYPE[d])
    g = lm.Graph()
    x = g.input("x", (3,), dtype=d)
    if isinstance(other, lm.core.dtype.DType):
        ov = _values(other, 1)
        o, to = g.input("o", (3,), dtype=other), torch.from_numpy(ov.copy()).to(TORCH_DTYPE[other])
        inputs = {"x": xv, "o": ov}
    else:
        o, to, inputs = other, other, {"x": xv}
    try:
        want = fn(tx, to)
    except RuntimeError as err:
        assert "can't be cast to the desired output type" in str(err)
        with pytest.raises(TypeError, match=rf"^{__import__('re').escape(sym)}: \w+_: result type \w+ can't be cast "
                           rf"to the tensor's dtype {d.name}") as e:
            line = _line(); fn(x, o)  # noqa: E702
        assert f"called at {HERE}:{line}" in str(e.value)
        return
    got = fn(x, o)
    assert got is x and got.dtype is d and got.shape == (3,)
    (out,) = _run([got], **inputs)
    np.testing.assert_allclose(out.astype(np.float64), want.double().numpy(), rtol=1e-3)


def test_augmented_assignment_refuses_a_broadcast_result_and_is_seen_through_aliases():
    """torch: "output with shape [3] doesn't match the broadcast shape [2, 3]"; and ``y = x; x += 1``
    changes ``y`` too (one tensor). ``@=`` is Python's ``x = x @ w`` in torch as here (no in-place matmul)."""
    g = lm.Graph()
    x, w = g.input("x", (3,)), g.input("w", (2, 3))
    with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
        t = torch.ones(3)
        t += torch.ones(2, 3)
    with pytest.raises(ValueError, match=r"^\+=: add_: the result has shape \(2, 3\), the tensor \(3,\)"):
        x += w
    y = x
    x += 1
    assert y is x
    m, k = g.input("m", (2, 3)), g.input("k", (3, 4))
    m0 = m
    m @= k
    assert m.shape == (2, 4) and m0.shape == (2, 3)
    a = rand((3,))
    np.testing.assert_array_equal(_run([y], x=a)[0], a + 1)


def test_augmented_assignment_values_and_gradients_match_torch():
    def body(x, y):
        z = x.clone()
        z *= y
        z += 1.5
        z /= y.abs() + 1
        z -= x
        z **= 2
        return z

    check(body, [rand((2, 3)), rand((2, 3), seed=1)])


def test_augmented_assignment_on_a_view_writes_into_the_tensor():
    """``x[0] += 1`` is ``x[0] = x[0].__iadd__(1)``: the row is written back, as torch's; an int row given
    a float is refused as torch refuses it."""
    g = lm.Graph()
    x = g.input("x", (2, 3))
    y = x.clone()
    y[0] += 1
    y[:, 1] *= 3
    a = rand((2, 3))
    t = torch.from_numpy(a.copy())
    t[0] += 1
    t[:, 1] *= 3
    np.testing.assert_allclose(_run([y], x=a)[0], t.numpy(), rtol=1e-6)
    xi = g.input("xi", (2, 3), dtype=lm.int32)
    with pytest.raises(RuntimeError, match="can't be cast"):
        ti = torch.zeros(2, 3, dtype=torch.int32)
        ti[0] += 1.5
    with pytest.raises(TypeError, match=r"^\+=: add_: result type float32 can't be cast"):
        xi[0] += 1.5


# equality and scalar operands ----------------------------------------------------------------------
def test_equality_with_a_numpy_bool_or_a_symbolic_size_is_elementwise():
    """``x == np.bool_(True)`` and ``x == S`` (a symbolic size) were Python's identity answer, False (and
    ``!=`` True), where ``<`` and ``+`` are elementwise; torch compares elementwise."""
    g = lm.Graph()
    x = g.input("x", ("S",))
    n = x.shape[0]
    outs = [x == np.bool_(True), x != np.bool_(True), np.bool_(True) == x, x == n, x != n]
    assert all(isinstance(o, lm.GraphTensor) and o.dtype is lm.bool for o in outs)
    a = np.array([1.0, 3.0, 0.5], np.float32)
    t = torch.from_numpy(a)
    got = _run(outs, x=a)
    for o, w in zip(got, [t == np.bool_(True), t != np.bool_(True), t == np.bool_(True), t == 3, t != 3]):
        np.testing.assert_array_equal(o, w.numpy())

    class Flags(nn.Module):  # a Parameter compared in a module's forward joins its graph
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(np.array([1.0, 0.0, 1.0], np.float32))

        def forward(self, x):
            return (self.w == np.bool_(True)) & (x > 0), self.w != np.bool_(True)

    h = lm.Graph()
    outs = Flags()(h.input("x", (3,)))
    got = lm.compile(list(outs), backend="reference")(x=a)
    np.testing.assert_array_equal(got[0], [True, False, True])
    np.testing.assert_array_equal(got[1], [False, True, False])


def test_a_symbolic_size_on_the_left_of_a_tensor_is_elementwise():
    """``S + x``, ``S * x``, ``S - x``, ``S // x``, ``S % x``, ``S < x``, ``S == x`` (``S = x.shape[0]``, as
    torch code writes ``x.shape[1] - pos``) defer to the tensor's reflected operator, as an int does: they failed with
    "'GraphTensor' object has no attribute 'terms'", "symbolic dim S has no value", or answered False."""
    g = lm.Graph()
    x = g.input("x", ("S",))
    n = x.shape[0]
    outs = [n + x, n * x, n - x, n // x, n % x, n < x, n >= x, n == x, n != x]
    a = np.array([1.0, 3.0, 5.0], np.float32)
    t = torch.from_numpy(a)
    got = _run(outs, x=a)
    for o, w in zip(got, [3 + t, 3 * t, 3 - t, 3 // t, 3 % t, 3 < t, 3 >= t, 3 == t, 3 != t]):
        np.testing.assert_array_equal(o, w.numpy())
    assert n == n and n != 3 and not n == 3.0  # (plain sizes compare as before)
    with pytest.raises(TypeError, match="symbolic dim S has no value"):
        n < 3  # noqa: B015


SCALARS = {"int": 2, "float": 2.5, "bool": True, "np.float32": np.float32(2), "np.float64": np.float64(2.5),
           "np.float16": np.float16(2), "np.int64": np.int64(3), "np.int8": np.int8(3), "np.uint8": np.uint8(3)}
BINARY = {"+": operator.add, "*": operator.mul, "/": operator.truediv, "//": operator.floordiv,
          "%": operator.mod, "**": operator.pow, "<": operator.lt, "==": operator.eq, "&": operator.and_}


def _torch_name(t: torch.Tensor) -> str:
    return str(t.dtype).removeprefix("torch.").replace("int64", "int32")  # (luminal's one int type)


@pytest.mark.parametrize("dtype", [F32, F16, lm.bfloat16, lm.float64, I32, B], ids=lambda d: d.name)
def test_scalar_and_0d_operands_promote_as_torch_on_either_side(dtype):
    """Python and numpy scalars (torch takes numpy's as Python's: ``np.float64(2) * half_t`` is float16)
    and 0-d tensors of every other dtype, on the left (reflected operators) and the right: the result
    dtype is torch's, or both refuse. (``np.bool_`` is left out: torch takes it as a float, a quirk.)"""
    g = lm.Graph()
    x = g.input("x", (3,), dtype=dtype)
    tx = torch.ones(3, dtype=TORCH_DTYPE[dtype])
    others = [(s, s) for s in SCALARS.values()]
    others += [(g.input(f"z{d.name}", (), dtype=d), torch.ones((), dtype=TORCH_DTYPE[d])) for d in TORCH_DTYPE]
    for (o, to), (sym, op) in [(p, q) for p in others for q in BINARY.items()]:
        for lm_f, t_f in ((lambda: op(x, o), lambda: op(tx, to)), (lambda: op(o, x), lambda: op(to, tx))):
            try:
                want = _torch_name(t_f())
            except (RuntimeError, TypeError, NotImplementedError):
                with pytest.raises((TypeError, ValueError)):
                    lm_f()
                continue
            got = lm_f()
            assert got.dtype.name == want, (sym, o, got.dtype, want)


def test_builtin_sum_and_abs_as_torch():
    """``sum([x, y, z])`` starts from the int 0 (``0 + x``: a bool list sums to int, as torch's int64);
    ``abs(x)`` is ``x.abs()`` keeping the dtype."""
    g = lm.Graph()
    bs = [g.input(f"b{i}", (3,), dtype=lm.bool) for i in range(3)]
    fs = [g.input(f"f{i}", (3,)) for i in range(3)]
    xi = g.input("xi", (3,), dtype=lm.int32)
    sb, sf, ai = sum(bs), sum(fs), abs(xi)
    assert (sb.dtype, sf.dtype, ai.dtype) == (lm.int32, lm.float32, lm.int32)
    bv = [np.array(r) for r in ([True, False, True], [True, True, False], [False, False, True])]
    fv = [rand((3,), seed=i) for i in range(3)]
    iv = np.array([-3, 0, 4], np.int32)
    got = _run([sb, sf, ai], **{f"b{i}": v for i, v in enumerate(bv)}, **{f"f{i}": v for i, v in enumerate(fv)},
               xi=iv)
    np.testing.assert_array_equal(got[0], sum(torch.from_numpy(v) for v in bv).numpy())
    np.testing.assert_allclose(got[1], sum(torch.from_numpy(v) for v in fv).numpy(), rtol=1e-6)
    np.testing.assert_array_equal(got[2], abs(torch.from_numpy(iv)).numpy())


def test_numpy_defers_to_the_tensor():
    """``ndarray + t`` and ``np.float32(2) * t`` give tensors (``__array_ufunc__ = None``: numpy calls the
    reflected operator; torch's ``__array_priority__`` does the same), and numpy's ufuncs are refused."""
    g = lm.Graph()
    x = g.input("x", (3,))
    assert isinstance(np.array([1.0, 2.0, 3.0]) + x, lm.GraphTensor)
    assert isinstance(np.float32(2) * x, lm.GraphTensor) and (np.float32(2) * x).dtype is lm.float32
    with pytest.raises(TypeError, match="does not support ufuncs"):
        np.exp(x)
