"""Products audit against torch: einsum (every subscript form, its errors naming the equation),
tensordot, the matmul family (matmul, mm, mv, bmm, dot, vdot, inner, outer/ger, addmm, addmv, addr,
baddbmm, addbmm, linalg.multi_dot, chain_matmul) and kron: values and gradients in float32, float64,
float16/bfloat16 and int32, zero sizes, beta=0, and one graph run at two sizes of a symbolic dim
(``luminal/frontend/ops/einsum.py``, ``linalg.py``). What ``test_api_shapes.py``,
``test_linalg_combine.py`` and ``test_linalg_audit.py`` cover is not repeated."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest
import torch
from parity import check, rand
from sizes import check_sizes

import luminal as lm
from luminal.frontend.ops.linalg import _chain_order

pytestmark = pytest.mark.usefixtures("one_torch_thread")
F32, F64, F16, BF16, I32 = lm.float32, lm.float64, lm.float16, lm.bfloat16, lm.int32


def _lib(t):
    return torch if isinstance(t, torch.Tensor) else lm


def _inputs(shapes, dtype=F32, **kw):
    return [rand(s, dtype, seed=k, **kw) for k, s in enumerate(shapes)]


def _einsum(eq):
    return lambda *xs: _lib(xs[0]).einsum(eq, *xs)


# einsum ------------------------------------------------------------------------------------------
EINSUM = [  # (equation, operand shapes): forms test_api_shapes.py's list leaves out
    ("...ij->...ji", [(2, 3, 4)]),  # ellipsis first, kept in the output
    ("i...j->j...i", [(2, 5, 6, 3)]),  # ellipsis in the middle
    ("ij...->...", [(2, 3, 4, 5)]),  # ellipsis last, the letters summed
    ("i...,...i->...", [(3, 2), (2, 3)]),  # ellipsis on both sides of the letters
    ("...i,...i", [(2, 3), (4, 1, 3)]),  # implicit output with ellipsis dims of different counts
    ("ij...,jk...", [(2, 3, 4), (3, 5, 4)]),
    ("...,...->...", [(2, 3), (3,)]),
    ("...,...", [(2, 1), (1, 3)]),
    ("ba", [(2, 3)]),  # implicit output: alphabetical, so a transpose
    ("aA,Aa", [(3, 3), (3, 3)]),  # uppercase before lowercase; both repeated: the full sum
    ("AB,Bc->cA", [(2, 3), (3, 4)]),
    ("iij->j", [(3, 3, 4)]), ("iji->j", [(3, 4, 3)]), ("iii->i", [(3, 3, 3)]), ("iii", [(3, 3, 3)]),
    ("ii...->...i", [(3, 3, 2)]), ("...ii->...i", [(2, 3, 3)]), ("i...i->i...", [(3, 2, 3)]),
    ("ii,i->i", [(3, 3), (3,)]),  # a diagonal times a vector
    ("ij,ij->ij", [(1, 4), (3, 1)]),  # size-1 dims under letters broadcast
    ("i,i", [(1,), (4,)]),
    ("bi,bi->b", [(3, 1), (1, 4)]),
    ("ij,jk,kl,lm->im", [(2, 3), (3, 4), (4, 5), (5, 2)]),  # four operands
    ("i,j,k->ijk", [(2,), (3,), (4,)]), ("i,i,i->", [(3,), (3,), (3,)]), ("ijk,ikj->", [(2, 3, 4), (2, 4, 3)]),
    (" i j , j k -> i k ", [(2, 3), (3, 4)]),  # spaces anywhere
    (",->", [(), ()]), ("i,->i", [(3,), ()]), ("->", [()]), ("", [()]), ("...->...", [()]),  # scalars
    ("i,i->", [(0,), (0,)]), ("ij,jk->ik", [(2, 0), (0, 3)]), ("ij,jk->ik", [(0, 3), (3, 2)]),  # zero sizes
    ("ij->", [(0, 3)]), ("ii->i", [(0, 0)]), ("...ij,jk", [(0, 2, 3), (3, 4)]),
]


@pytest.mark.parametrize("eq,shapes", EINSUM, ids=[f"{e!r}-{s}" for e, s in EINSUM])
def test_einsum_forms(eq, shapes):
    check(_einsum(eq), _inputs(shapes))


@pytest.mark.parametrize("dtype", [F64, F16, BF16, I32], ids=str)
@pytest.mark.parametrize("eq,shapes", [("ij,jk->ik", [(3, 4), (4, 2)]), ("ii->i", [(3, 3)]),
                                       ("bij,bjk", [(2, 3, 4), (2, 4, 2)]), ("i,i->", [(5,), (5,)]),
                                       ("...i,i->...", [(2, 3), (3,)])], ids=str)
def test_einsum_dtypes(eq, shapes, dtype):
    """The result keeps the operands' dtype (int32 too, as torch's einsum of int32); 16-bit products
    within the harness's 16-bit tolerances."""
    check(_einsum(eq), _inputs(shapes, dtype), dtypes=[dtype] * len(shapes))


def test_einsum_sublist_more_operands_and_ellipsis_out():
    check(lambda a, b, c: _lib(a).einsum(a, [..., 0, 1], b, [1, 2], c, [2, 3], [3, ..., 0]),
          _inputs([(5, 2, 3), (3, 4), (4, 2)]))
    check(lambda a, b: _lib(a).einsum(a, [27, 27], b, [27]), _inputs([(3, 3), (3,)]))  # implicit: a scalar


EINSUM_ERRORS = [  # (equation, operand shapes, the message after "einsum: ")
    ("ij->i", [(3,)], "operand 0 has 1 dims but 2 subscripts 'ij' in 'ij->i' (and no '...')"),
    ("...ij->...", [(3,)], "operand 0 has 1 dims but 2 subscripts '...ij' in '...ij->...'"),
    ("ij,jk->ik", [(3, 4), (5, 2)], "subscript 'j' of 'ij,jk->ik' has sizes 4 and 5, which do not broadcast"),
    ("...,...", [(3,), (4,)], "subscript '...' of '...,...' has sizes 3 and 4"),
    ("ii->i", [(3, 4)], "subscript 'i' is repeated in operand 0 of 'ii->i' over dims of sizes 3 and 4"),
    ("i->ij", [(3,)], "output subscript 'j' of 'i->ij' appears in no input operand"),
    ("ij->ii", [(3, 4)], "output subscript 'i' appears more than once in 'ij->ii'"),
    ("ij,jk->ik", [(3, 4)], "'ij,jk->ik' has 2 operand subscripts, got 1 operands"),
    ("ij", [(3, 4), (4, 3)], "'ij' has 1 operand subscripts, got 2 operands"),
    ("i.j->i", [(3, 4)], "operand 0: bad ellipsis in 'i.j' of 'i.j->i'"),
    ("...i->....", [(3,)], "bad ellipsis in the output '....' of '...i->....'"),
    ("i1->i", [(3,)], "invalid subscript '1' in operand 0's 'i1' of 'i1->i'"),
    ("ij->j->i", [(3, 4)], "invalid subscript '-' in the output of 'ij->j->i'"),
]


@pytest.mark.parametrize("eq,shapes,msg", EINSUM_ERRORS, ids=[f"{e!r}-{s}" for e, s, _ in EINSUM_ERRORS])
def test_einsum_errors_name_the_equation(eq, shapes, msg):
    """torch's conditions, each message naming the equation (a wrong output letter was reported as a
    missing one, '....' in the output as a subscript '.', and sizes and repeats without the equation)."""
    g = lm.Graph()
    xs = [g.input(f"x{k}", s) for k, s in enumerate(shapes)]
    with pytest.raises(ValueError, match="^einsum: " + re.escape(msg)):
        lm.einsum(eq, *xs)
    with pytest.raises(RuntimeError):  # torch refuses each too
        torch.einsum(eq, *[torch.zeros(s) for s in shapes])


EINSUM_SYM = {  # (equation, graph shapes, array shapes for size n)
    "batched_matmul": ("bij,bjk->bik", [("B", 2, 3), ("B", 3, 4)], lambda n: [(n, 2, 3), (n, 3, 4)]),
    "ellipsis_B": ("...ij,jk->...ik", [("B", 2, 3), (3, 4)], lambda n: [(n, 2, 3), (3, 4)]),
    "implicit": ("bi,ij", [("B", 3), (3, 4)], lambda n: [(n, 3), (3, 4)]),
    "contract_B": ("bi,bj->ij", [("B", 3), ("B", 4)], lambda n: [(n, 3), (n, 4)]),
    "broadcast_1_to_B": ("bi,bi->b", [("B", 3), (1, 3)], lambda n: [(n, 3), (1, 3)]),
    "diagonal_BB": ("bb->b", [("B", "B")], lambda n: [(n, n)]),  # diagonal refused symbolic dims
    "diagonal_BB_kept": ("iij->ji", [("B", "B", 2)], lambda n: [(n, n, 2)]),
    "trace_BB": ("bb", [("B", "B")], lambda n: [(n, n)]),
}


@pytest.mark.parametrize("name", EINSUM_SYM)
def test_einsum_symbolic(name):
    eq, shapes, arrays = EINSUM_SYM[name]
    check_sizes(_einsum(eq), lambda n: _inputs(arrays(n)), shapes, sizes=(3, 2), backend="reference")


@pytest.mark.parametrize("name", ["diagonal_BB", "diagonal_BB_kept", "trace_BB"])
def test_einsum_symbolic_diagonal_at_sizes_1_and_0(name):
    eq, shapes, arrays = EINSUM_SYM[name]
    check_sizes(_einsum(eq), lambda n: _inputs(arrays(n)), shapes, sizes=(4, 1, 0), backend="reference")


# tensordot ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("sa,sb,dims", [
    ((3, 4), (4, 3), 0), ((3, 4), (4, 3), 1), ((3, 4, 2), (4, 2, 5), 2), ((3, 4), (4, 3), ([1, 0], [0, 1])),
    ((3, 4), (4, 3), [[-1], [-2]]), ((2, 3, 4), (4, 2), ([0, 2], [1, 0])), ((3, 0), (0, 2), 1),
], ids=str)
def test_tensordot_dims_forms(sa, sb, dims):
    check(lambda a, b: _lib(a).tensordot(a, b, dims=dims), _inputs([sa, sb]))


def test_tensordot_pair_of_ints_is_numpys_meaning():
    """``dims=(2, 0)``: dim 2 of a with dim 0 of b, as numpy's ``axes=(2, 0)`` (torch wants lists)."""
    check(lambda a, b: lm.tensordot(a, b, dims=(2, 0)), _inputs([(3, 4, 2), (2, 3)]),
          torch_op=lambda a, b: torch.tensordot(a, b, dims=([2], [0])))


def test_tensordot_int32_and_symbolic():
    check(lambda a, b: _lib(a).tensordot(a, b, dims=1), _inputs([(3, 4), (4, 2)], I32))
    check_sizes(lambda a, b: _lib(a).tensordot(a, b, dims=([0], [0])), lambda n: _inputs([(n, 3), (n, 4)]),
                [("B", 3), ("B", 4)], sizes=(3, 2), backend="reference")


@pytest.mark.parametrize("dims,msg", [
    (([1, 1], [0, 1]), "dim 1 of a appears more than once"),  # was taken silently as a diagonal
    (([0, 1], [0, 0]), "dim 0 of b appears more than once"),
    (-1, "dims=-1 is out of range"), (3, "dims=3 is out of range"),
    (([0, 1], [0]), "same length"), (([2], [0]), "out of range"),
], ids=str)
def test_tensordot_errors(dims, msg):
    g = lm.Graph()
    a, b = g.input("a", (3, 3)), g.input("b", (3, 3))
    with pytest.raises(ValueError, match=r"^tensordot: .*" + msg):
        lm.tensordot(a, b, dims=dims)


# matmul ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [F32, F64, F16, BF16, I32], ids=str)
@pytest.mark.parametrize("sa,sb", [((4,), (4,)), ((4,), (2, 4, 3)), ((2, 3, 4), (4,)), ((2, 1, 3, 4), (5, 4, 6)),
                                   ((3, 0), (0, 2)), ((0, 3), (3, 2)), ((2, 0, 3), (3, 0)), ((0,), (0,)),
                                   ((0,), (0, 3)), ((1, 4), (3, 4, 1))], ids=str)
def test_matmul_shapes_and_dtypes(sa, sb, dtype):
    check(lambda a, b: _lib(a).matmul(a, b), _inputs([sa, sb], dtype), dtypes=[dtype] * 2)


def test_matmul_mixed_float_dtypes_promote():
    """torch refuses float32 @ float64; luminal promotes (as its other binary ops), to float64."""
    with pytest.raises(RuntimeError):
        torch.ones(2, 3) @ torch.ones(3, 2, dtype=torch.float64)
    check(lambda a, b: a @ b, [rand((2, 3)), rand((3, 2), F64, seed=1)], torch_op=lambda a, b: a.double() @ b)


# the scaled sums: beta * input + alpha * product ---------------------------------------------------
SCALED = {  # op: (input, first, second shapes), the product in numpy
    "addmm": ([(3, 5), (3, 4), (4, 5)], lambda a, b: a @ b),
    "addmv": ([(3,), (3, 4), (4,)], lambda a, b: a @ b),
    "addr": ([(3, 4), (3,), (4,)], np.outer),
    "baddbmm": ([(2, 3, 5), (2, 3, 4), (2, 4, 5)], lambda a, b: a @ b),
    "addbmm": ([(3, 5), (2, 3, 4), (2, 4, 5)], lambda a, b: (a @ b).sum(0)),
}
ZERO_K = {  # the factors with a zero-size contracted dim (the product is an empty sum: 0)
    "addmm": [(3, 0), (0, 5)], "addmv": [(3, 0), (0,)], "baddbmm": [(2, 3, 0), (2, 0, 5)],
    "addbmm": [(2, 3, 0), (2, 0, 5)],
}


def _scaled(op, **kw):
    return lambda i, a, b: getattr(_lib(a), op)(i, a, b, **kw)


@pytest.mark.parametrize("fill", [np.nan, np.inf, -np.inf], ids=str)
@pytest.mark.parametrize("op", SCALED)
def test_beta_zero_ignores_input(op, fill):
    """beta=0: the result is ``alpha * product`` exactly, whatever ``input`` holds (NaN and inf do not
    propagate, as torch's docs define); the gradient of ``input`` is then 0."""
    shapes, product = SCALED[op]
    i = np.full(shapes[0], fill, np.float32)
    a, b = rand(shapes[1], F64, seed=1), rand(shapes[2], F64, seed=2)
    got = check(_scaled(op, beta=0, alpha=2.5), [i, a.astype(np.float32), b.astype(np.float32)], grad=False)[0]
    np.testing.assert_allclose(got, 2.5 * product(a.astype(np.float32).astype(np.float64),
                                                  b.astype(np.float32).astype(np.float64)), rtol=1e-5, atol=1e-5)
    check(_scaled(op, beta=0, alpha=2.5), [rand(shapes[0]), rand(shapes[1], seed=1), rand(shapes[2], seed=2)])


@pytest.mark.parametrize("op", SCALED)
def test_beta_zero_keeps_the_promoted_dtype(op):
    """A float64 ``input`` with float32 factors gives float64 for every beta (beta=0 gave float32, the
    input dropped with its dtype). torch refuses the mix; the expectation is beta=1's dtype."""
    shapes, _ = SCALED[op]
    g = lm.Graph()
    i, a, b = g.input("i", shapes[0], dtype=F64), g.input("a", shapes[1]), g.input("b", shapes[2])
    assert getattr(lm, op)(i, a, b, beta=0).dtype is F64
    assert getattr(lm, op)(i, a, b, beta=1).dtype is F64


@pytest.mark.parametrize("dtype", [F32, F64, F16, BF16, I32], ids=str)
@pytest.mark.parametrize("op", SCALED)
def test_scaled_sums_dtypes(op, dtype):
    """Integer scales on integer tensors (torch's rule: ints for integer tensors) and float ones on
    float tensors, through the function and the method."""
    shapes, _ = SCALED[op]
    kw = dict(beta=-2, alpha=3) if dtype is I32 else dict(beta=0.5, alpha=-1.5)
    check(lambda i, a, b: (getattr(_lib(a), op)(i, a, b, **kw), getattr(i, op)(a, b, **kw)),
          _inputs(shapes, dtype), dtypes=[dtype] * 3)


@pytest.mark.parametrize("op", SCALED)
def test_scaled_sums_broadcast_input_and_zero_sizes(op):
    shapes, _ = SCALED[op]
    check(_scaled(op, beta=2, alpha=0.5), _inputs([shapes[0][-1:], *shapes[1:]]))  # input of the last dim
    check(_scaled(op), _inputs([(), *shapes[1:]]))  # a 0-d input
    if op in ZERO_K:  # (addr has no contracted dim)
        check(_scaled(op, beta=2, alpha=3), _inputs([shapes[0], *ZERO_K[op]]))  # beta * input
    if op == "addbmm":
        check(_scaled(op, alpha=2), _inputs([shapes[0], (0, 3, 4), (0, 4, 5)]))  # an empty batch


# the fixed-rank products and chains ----------------------------------------------------------------
FIXED = {  # op (a function and a Tensor method): operand shapes
    "mm": [(3, 4), (4, 2)], "mv": [(3, 4), (4,)], "bmm": [(2, 3, 4), (2, 4, 5)], "dot": [(4,), (4,)],
    "vdot": [(4,), (4,)], "outer": [(3,), (4,)], "ger": [(3,), (4,)], "inner": [(2, 3, 4), (5, 4)],
    "kron": [(2, 3), (3,)],
}


@pytest.mark.parametrize("dtype", [F32, F64, F16, BF16, I32], ids=str)
@pytest.mark.parametrize("op", FIXED)
def test_fixed_rank_products(op, dtype):
    check(lambda a, b: (getattr(_lib(a), op)(a, b), getattr(a, op)(b)), _inputs(FIXED[op], dtype),
          dtypes=[dtype] * 2)


@pytest.mark.parametrize("sa,sb", [((), (5, 4)), ((4,), (4,)), ((2, 0), (3, 0)), ((2, 3), ())], ids=str)
def test_inner_edges(sa, sb):
    check(lambda a, b: _lib(a).inner(a, b), _inputs([sa, sb]))


@pytest.mark.parametrize("sa,sb", [((2,), (3, 4)), ((2, 3), (4,)), ((2, 1, 3), (2, 2)), ((), (3,)), ((3,), ()),
                                   ((2, 0), (3, 2)), ((1, 2, 1, 2), (2, 1))], ids=str)
def test_kron_of_different_ranks(sa, sb):
    check(lambda a, b: _lib(a).kron(a, b), _inputs([sa, sb]))


@pytest.mark.parametrize("shapes", [
    [(3,), (3, 4), (4, 5), (5,)], [(2, 3), (3, 4)], [(3,), (3,)], [(2, 3), (3,)], [(3,), (3, 2)],
    [(10, 2), (2, 30), (30, 5), (5, 60)], [(60, 5), (5, 30), (30, 2), (2, 10)], [(2, 0), (0, 3), (3, 4)],
], ids=str)
def test_multi_dot(shapes):
    """The first may be a row vector and the last a column vector (their dims dropped); the order is
    the cheapest one, which gives the same values."""
    check(lambda *xs: _lib(xs[0]).linalg.multi_dot(list(xs)), _inputs(shapes))


@pytest.mark.parametrize("dtype", [F64, F16, BF16, I32], ids=str)
def test_multi_dot_and_chain_matmul_dtypes(dtype):
    check(lambda a, b, c: _lib(a).linalg.multi_dot((a, b, c)), _inputs([(3,), (3, 4), (4, 2)], dtype),
          dtypes=[dtype] * 3)
    with warnings.catch_warnings():  # torch deprecates chain_matmul
        warnings.simplefilter("ignore")
        check(lambda a, b, c: _lib(a).chain_matmul(a, b, c), _inputs([(3, 5), (5, 4), (4, 2)], dtype),
              dtypes=[dtype] * 3)


@pytest.mark.parametrize("shapes", [[(3, 4)], [(2, 3), (3, 4)], [(10, 2), (2, 30), (30, 5), (5, 60)]], ids=str)
def test_chain_matmul(shapes):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check(lambda *xs: _lib(xs[0]).chain_matmul(*xs), _inputs(shapes))


def test_chain_order_is_the_cheapest():
    """Cormen et al.'s example: dims 30, 35, 15, 5, 10, 20, 25 multiply as ((A1 (A2 A3)) ((A4 A5) A6))."""
    split = _chain_order([30, 35, 15, 5, 10, 20, 25])

    def paren(i, j):
        return f"A{i + 1}" if i == j else f"({paren(i, split[i][j])} {paren(split[i][j] + 1, j)})"

    assert paren(0, 5) == "((A1 (A2 A3)) ((A4 A5) A6))"
    assert _chain_order([lm.sym("B"), 3, 4]) is None  # symbolic: left to right


def _bad(op, shapes):
    g = lm.Graph()
    return op(*[g.input(f"x{k}", s) for k, s in enumerate(shapes)])


@pytest.mark.parametrize("op,shapes,msg", [
    ("mm", [(3,), (3, 2)], r"^mm: needs 2-d input and 2-d mat2, got input 1-d"),
    ("mm", [(2, 3), (4, 2)], r"^mm: matmul: contracted dims differ: 3 vs 4 \(\(2, 3\) @ \(4, 2\)\)"),
    ("mv", [(2, 3), (3, 2)], r"^mv: needs 2-d input and 1-d vec"),
    ("mv", [(2, 3), (2,)], r"^mv: matmul: contracted dims differ: 3 vs 2"),
    ("dot", [(3, 3), (3, 3)], r"^dot: needs 1-d input and 1-d tensor, got input 2-d, tensor 2-d"),  # was a matmul
    ("vdot", [(3, 1), (3,)], r"^vdot: needs 1-d input and 1-d other"),
    ("inner", [(2, 3), (2, 4)], r"^inner: last dims differ: \(2, 3\) and \(2, 4\)"),
    ("outer", [(2, 3), (2,)], r"^outer: needs 1-d input and 1-d vec2"),
    ("ger", [(2, 3), (2,)], r"^ger: outer: needs 1-d input and 1-d vec2"),
    ("bmm", [(2, 3), (3, 2)], r"^bmm: needs 3-d input and 3-d mat2"),
    ("bmm", [(2, 2, 3), (3, 3, 2)], r"^bmm: batch sizes differ: 2 and 3"),
    ("bmm", [(2, 2, 3), (2, 4, 2)], r"^bmm: matmul: contracted dims differ: 3 vs 4"),
    ("addmv", [(3,), (2, 3), (3,)], r"^addmv: .*\(3,\) and \(2,\) cannot broadcast"),
    ("addr", [(3, 3), (2, 3), (3,)], r"^addr: needs 1-d vec1 and 1-d vec2, got vec1 2-d"),
    ("addbmm", [(2, 4), (2, 3), (3, 4)], r"^addbmm: needs 3-d batch1 and 3-d batch2"),
    ("addbmm", [(2, 4), (2, 2, 3), (3, 3, 4)], r"^addbmm: bmm: batch sizes differ: 2 and 3"),
    ("baddbmm", [(2, 4), (2, 3), (3, 4)], r"^baddbmm: needs 3-d batch1 and 3-d batch2"),
    ("addmm", [(2, 4), (2, 2, 3), (3, 4)], r"^addmm: needs 2-d mat1 and 2-d mat2"),
], ids=str)
def test_product_errors(op, shapes, msg):
    with pytest.raises(ValueError, match=msg):
        _bad(getattr(lm, op), shapes)
    with pytest.raises((RuntimeError, IndexError)):  # torch refuses each too
        getattr(torch, op)(*[torch.zeros(s) for s in shapes])


@pytest.mark.parametrize("call,msg", [
    (lambda x: lm.linalg.multi_dot([x((2, 3))]), r"^multi_dot: needs at least 2 tensors, got 1"),
    (lambda x: lm.linalg.multi_dot([x((2, 2, 3)), x((3, 3))]), r"^multi_dot: the first tensor must be 1 or 2-d"),
    (lambda x: lm.linalg.multi_dot([x((2, 3)), x((3,)), x((3, 3))]), r"^multi_dot: tensor 1 must be 2-d, got 1-d"),
    (lambda x: lm.linalg.multi_dot([x((2, 3)), x((4, 3))]),
     r"^multi_dot: matrices 0 and 1 cannot be multiplied: \(2, 3\) @ \(4, 3\)"),
    (lambda x: lm.chain_matmul(), r"^chain_matmul: needs at least one matrix"),
    (lambda x: lm.chain_matmul(x((2, 3)), x((3,))), r"^chain_matmul: matrix 1 must be 2-d, got 1-d"),
    (lambda x: lm.chain_matmul(x((2, 3)), x((2, 3))), r"^chain_matmul: matrices 0 and 1 cannot be multiplied"),
], ids=range(7))
def test_chain_errors(call, msg):
    g, n = lm.Graph(), iter(range(10))
    with pytest.raises(ValueError, match=msg):
        call(lambda s: g.input(f"x{next(n)}", s))


# one graph at two sizes of a symbolic dim -----------------------------------------------------------
SYM = {  # (op on a module, graph shapes, array shapes for size n)
    "matmul_broadcast": (lambda m, a, b: m.matmul(a, b), [("B", 1, 2, 4), (5, 4, 3)], lambda n: [(n, 1, 2, 4),
                                                                                               (5, 4, 3)]),
    "mm": (lambda m, a, b: m.mm(a, b), [("B", 3), (3, 4)], lambda n: [(n, 3), (3, 4)]),
    "mm_K": (lambda m, a, b: m.mm(a, b), [(2, "B"), ("B", 4)], lambda n: [(2, n), (n, 4)]),
    "mv": (lambda m, a, b: m.mv(a, b), [(2, "B"), ("B",)], lambda n: [(2, n), (n,)]),
    "bmm": (lambda m, a, b: m.bmm(a, b), [("B", 2, 3), ("B", 3, 4)], lambda n: [(n, 2, 3), (n, 3, 4)]),
    "dot": (lambda m, a, b: m.dot(a, b), [("B",), ("B",)], lambda n: [(n,), (n,)]),
    "vdot": (lambda m, a, b: m.vdot(a, b), [("B",), ("B",)], lambda n: [(n,), (n,)]),
    "inner": (lambda m, a, b: m.inner(a, b), [("B", 3), (2, 3)], lambda n: [(n, 3), (2, 3)]),
    "outer": (lambda m, a, b: m.outer(a, b), [("B",), (3,)], lambda n: [(n,), (3,)]),
    "ger": (lambda m, a, b: m.ger(a, b), [(3,), ("B",)], lambda n: [(3,), (n,)]),
    "addmm": (lambda m, a, b: m.addmm(b[0], a, b, beta=0.5, alpha=2), [("B", 3), (3, 4)], lambda n: [(n, 3), (3, 4)]),
    "addmv": (lambda m, a, b: m.addmv(a[:, 0], a, b, beta=2), [(2, "B"), ("B",)], lambda n: [(2, n), (n,)]),
    "addr": (lambda m, a, b: m.addr(b[0], a, b, alpha=-1), [("B",), (3,)], lambda n: [(n,), (3,)]),
    "baddbmm": (lambda m, a, b: m.baddbmm(b[:, :2], a, b), [("B", 2, 3), ("B", 3, 4)], lambda n: [(n, 2, 3),
                                                                                                  (n, 3, 4)]),
    "addbmm": (lambda m, a, b: m.addbmm(b[0, :2], a, b, beta=0), [("B", 2, 3), ("B", 3, 4)],
               lambda n: [(n, 2, 3), (n, 3, 4)]),
    "multi_dot": (lambda m, a, b: m.linalg.multi_dot([a, b, a.T]), [("B", 3), (3, 3)], lambda n: [(n, 3), (3, 3)]),
    "multi_dot_vectors": (lambda m, a, b: m.linalg.multi_dot([a, b, a]), [("B",), ("B", "B")],
                          lambda n: [(n,), (n, n)]),
    "chain_matmul": (lambda m, a, b: m.chain_matmul(a, b, a.T), [("B", 3), (3, 3)], lambda n: [(n, 3), (3, 3)]),
    "kron": (lambda m, a, b: m.kron(a, b), [("B", 2), (2, 3)], lambda n: [(n, 2), (2, 3)]),
}


@pytest.mark.parametrize("name", SYM)
def test_products_symbolic(name):
    op, shapes, arrays = SYM[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_sizes(lambda a, b: op(_lib(a), a, b), lambda n: _inputs(arrays(n)), shapes, sizes=(3, 2),
                    backend="reference")
