"""Parity with torch for matrix products and for joining / splitting tensors (cat, stack, split, chunk)."""

import numpy as np
import pytest
import torch
from parity import check, rand
from sizes import check_sizes

import luminal as lm

F32, I32, BOOL = lm.float32, lm.int32, lm.bool

MATMUL = [  # (a shape, b shape), torch.matmul semantics
    ((4,), (4,)), ((4,), (4, 3)), ((2, 4), (4,)), ((2, 4), (4, 3)), ((5, 2, 4), (4, 3)), ((2, 4), (5, 4, 3)),
    ((5, 2, 4), (5, 4, 3)), ((1, 2, 4), (5, 4, 3)), ((3, 1, 2, 4), (5, 4, 3)), ((5, 2, 4), (4,)), ((4,), (5, 4, 3)),
    ((2, 1, 1, 4), (3, 4, 1)), ((1, 4), (4, 1)),
    ((0, 4), (4, 3)), ((2, 0), (0, 3)), ((2, 4), (4, 0)), ((0, 2, 4), (4, 3)),  # zero-size
]
# views on both operands, applied inside the op (shapes unchanged)
VIEWS = {
    "contig": lambda t: t,
    "flipped": lambda t: t.flip(-1),
    "transposed": lambda t: t.mT.contiguous().mT if t.ndim >= 2 else t,
    "expanded": lambda t: t[..., :1].expand(*t.shape) if t.shape[-1] else t,
}


@pytest.mark.parametrize("view", VIEWS, ids=VIEWS.keys())
@pytest.mark.parametrize("sa,sb", MATMUL, ids=str)
def test_matmul(sa, sb, view, backend):
    v = VIEWS[view]
    check(lambda a, b: v(a) @ v(b), [rand(sa), rand(sb, seed=1)], backend=backend)


@pytest.mark.parametrize("dtype", [I32, lm.float64, lm.float16, lm.bfloat16], ids=str)
@pytest.mark.parametrize("sa,sb", [((4,), (4,)), ((2, 4), (4, 3)), ((5, 2, 4), (1, 4, 3)), ((2, 4), (4,))], ids=str)
def test_matmul_dtypes(sa, sb, dtype, backend):
    # half types: both sides accumulate in float32 and round once, so the harness tolerances hold
    kw = dict(low=-5, high=5) if dtype is I32 else {}
    check(lambda a, b: lm.matmul(a, b), [rand(sa, dtype, **kw), rand(sb, dtype, seed=1, **kw)], dtypes=[dtype] * 2,
          torch_op=torch.matmul, backend=backend)


def test_matmul_mixed_dtypes_promote(backend):
    check(lambda a, b: a @ b, [rand((2, 4), I32), rand((4, 3))],
          torch_op=lambda a, b: a.float() @ b, backend=backend)  # torch.matmul refuses mixed dtypes; we promote


def test_dot_outer_and_methods(backend):
    check(lambda a, b: (lm.dot(a, b), lm.outer(a, b), a.matmul(b), a.dot(b)), [rand((5,)), rand((5,), seed=1)],
          torch_op=lambda a, b: (a.dot(b), a.outer(b), a.matmul(b), a.dot(b)), backend=backend)


def test_matmul_special_values(backend):
    a, b = rand((3, 4)), rand((4, 2), seed=1)
    a[0, 1] = np.nan
    a[1, 2] = np.inf
    b[3, 1] = -np.inf
    check(lambda a, b: a @ b, [a, b], backend=backend)


MATMUL_SYM = {  # (graph shapes, array shapes for size n)
    "rows_B": ([("B", 4), (4, 3)], lambda n: [(n, 4), (4, 3)]),
    "contract_K": ([(2, "K"), ("K", 3)], lambda n: [(2, n), (n, 3)]),
    "batch_B": ([("B", 2, 4), (4, 3)], lambda n: [(n, 2, 4), (4, 3)]),
    "batch_broadcast": ([("B", 1, 2, 4), (5, 4, 3)], lambda n: [(n, 1, 2, 4), (5, 4, 3)]),
    "vec_K": ([("K",), ("K",)], lambda n: [(n,), (n,)]),
    "vec_mat_K": ([("K",), ("K", 3)], lambda n: [(n,), (n, 3)]),
}


@pytest.mark.parametrize("name", MATMUL_SYM)
def test_matmul_symbolic(name, backend):
    shapes, arrays = MATMUL_SYM[name]
    check_sizes(lambda a, b: a @ b, lambda n: [rand(s, seed=k) for k, s in enumerate(arrays(n))], shapes,
                sizes=(5, 2), backend=backend)
    check_sizes(lambda a, b: a @ b, lambda n: [rand(s, seed=k) for k, s in enumerate(arrays(n))], shapes,
                sizes=(0,), backend=backend)  # a symbolic dim bound to 0 (an empty sum is 0)


@pytest.mark.parametrize("sa,sb", [((2, 3), (3,)), ((3,), (4,)), ((2, 3), (4, 2)), ((2, 3, 4), (3, 4, 2))], ids=str)
def test_matmul_errors(sa, sb):
    g = lm.Graph()
    with pytest.raises(ValueError) if sa != (2, 3) or sb != (3,) else pytest.raises(TypeError):
        a, b = g.input("a", sa), g.input("b", sb, dtype=lm.bool if sb == (3,) else lm.float32)
        a @ b


# --- cat / stack ---------------------------------------------------------------------------------
CAT = [  # (piece shapes, dim)
    ([(2, 3), (4, 3)], 0), ([(2, 3), (2, 1), (2, 5)], 1), ([(2, 3, 4), (2, 3, 4)], -1), ([(3, 2), (3, 0), (3, 1)], -1),
    ([(0, 3), (2, 3)], 0), ([(1, 2, 3), (4, 2, 3), (1, 2, 3)], -3), ([(5,)], 0), ([(2, 1), (2, 1)], 1),
]


@pytest.mark.parametrize("view", ["contig", "flipped", "expanded"])
@pytest.mark.parametrize("shapes,dim", CAT, ids=str)
def test_cat(shapes, dim, view, backend):
    v = VIEWS[view]
    check(lambda *xs: lm.cat([v(x) for x in xs], dim), [rand(s, seed=k) for k, s in enumerate(shapes)],
          torch_op=lambda *ts: torch.cat([v(t) for t in ts], dim), backend=backend)


@pytest.mark.parametrize("dtypes", [(I32, I32), (BOOL, BOOL), (I32, F32), (BOOL, I32), (lm.float16, F32),
                                    (lm.bfloat16, lm.float16)], ids=str)
def test_cat_dtypes(dtypes, backend):
    # mixed dtypes promote as torch.cat does
    check(lambda a, b: lm.cat([a, b], 1), [rand((2, 3), dtypes[0]), rand((2, 2), dtypes[1], seed=1)],
          dtypes=list(dtypes), torch_op=lambda a, b: torch.cat([a, b], 1), backend=backend)


def test_cat_special_values_keep_sign_of_zero(backend):
    a, b = rand((2, 3)), rand((2, 2), seed=1)
    a[0, 0], a[1, 1], b[0, 1], b[1, 0] = -0.0, np.nan, -np.inf, -0.0
    got = check(lambda a, b: lm.cat([a, b], -1), [a, b], torch_op=lambda a, b: torch.cat([a, b], -1), backend=backend)
    want = torch.cat([torch.from_numpy(a), torch.from_numpy(b)], -1).numpy()
    np.testing.assert_array_equal(np.signbit(got[0]), np.signbit(want))  # -0.0 stays -0.0


@pytest.mark.parametrize("dim", [0, 1, 2, -1, -3])
@pytest.mark.parametrize("n", [1, 3])
def test_stack(n, dim, backend):
    check(lambda *xs: lm.stack(xs, dim), [rand((2, 3), seed=k) for k in range(n)],
          torch_op=lambda *ts: torch.stack(ts, dim), pre=VIEWS["flipped"], backend=backend)


CAT_SYM = {  # (graph shapes, array shapes for size n, op on a module: lm or torch); one graph at two sizes
    "S_plus_1": ([("S", 4), (1, 4)], lambda n: [(n, 4), (1, 4)], lambda m, a, b: m.cat([a, b], 0)),
    "1_plus_S": ([("S", 4), (1, 4)], lambda n: [(n, 4), (1, 4)], lambda m, a, b: m.cat([b, a])),
    "S_plus_T": ([("S", 2), ("T", 2)], lambda n: [(n, 2), (n + 1, 2)], lambda m, a, b: m.cat([a, b, a], 0)),
    "static_dim_of_S": ([("S", 2), ("S", 3)], lambda n: [(n, 2), (n, 3)], lambda m, a, b: m.cat([a, b], -1)),
    "stack_S": ([("S", 2), ("S", 2)], lambda n: [(n, 2), (n, 2)], lambda m, a, b: m.stack([a, b], 1)),
    "cat_then_slice": ([("S", 4), (1, 4)], lambda n: [(n, 4), (1, 4)], lambda m, a, b: m.cat([a, b])[1:]),
}


@pytest.mark.parametrize("name", CAT_SYM)
def test_cat_symbolic(name, backend):
    shapes, arrays, op = CAT_SYM[name]
    check_sizes(lambda a, b: op(lm, a, b), lambda n: [rand(s, seed=k) for k, s in enumerate(arrays(n))], shapes,
                torch_op=lambda a, b: op(torch, a, b), sizes=(5, 2), backend=backend)


def test_cat_symbolic_shape_is_S_plus_1():
    g = lm.Graph()
    out = lm.cat([g.input("a", ("S", 4)), g.input("b", (1, 4))])
    assert out.shape == (lm.sym("S") + 1, 4)
    assert str(out.shape[0]) in ("S+1", "1+S")


# --- split / chunk -------------------------------------------------------------------------------
SPLIT = [  # (shape, split_size_or_sections, dim)
    ((6, 4), 2, 0), ((7, 4), 3, 0), ((4, 7), 7, 1), ((4, 7), 10, -1), ((4, 6), [1, 2, 3], 1), ((5, 3), [0, 5], 0),
    ((2, 3, 4), [3, 1], -1), ((2, 3, 4), 1, -2),
]


@pytest.mark.parametrize("view", ["contig", "flipped", "transposed"])
@pytest.mark.parametrize("shape,size,dim", SPLIT, ids=str)
def test_split(shape, size, dim, view, backend):
    v = VIEWS[view]
    check(lambda x: v(x).split(size, dim), [rand(shape)], torch_op=lambda t: v(t).split(size, dim), backend=backend)
    check(lambda x: lm.split(v(x), size, dim=dim), [rand(shape)], torch_op=lambda t: torch.split(v(t), size, dim=dim),
          backend=backend)


@pytest.mark.parametrize("shape,chunks,dim", [((6, 2), 3, 0), ((5, 2), 3, 0), ((6, 2), 4, 0), ((2, 7), 2, -1),
                                              ((3, 2), 5, 0), ((2, 1), 1, 1), ((4, 4), 1, 0)], ids=str)
def test_chunk(shape, chunks, dim, backend):
    # torch.chunk may give fewer chunks than asked (6 in 4 chunks is 3 chunks of 2): we follow torch
    check(lambda x: lm.chunk(x, chunks, dim), [rand(shape, I32)], torch_op=lambda t: torch.chunk(t, chunks, dim),
          backend=backend)
    check(lambda x: x.chunk(chunks, dim), [rand(shape)], torch_op=lambda t: t.chunk(chunks, dim), backend=backend)


def test_split_symbolic(backend):
    # symbolic sections along the symbolic dim, and a static split of the other dim
    check_sizes(lambda x: x.split([1, x.shape[0] - 1], 0) + x.split(2, 1), lambda n: [rand((n, 4))], [("B", 4)],
                torch_op=lambda t: t.split([1, t.shape[0] - 1], 0) + t.split(2, 1), sizes=(5, 2), backend=backend)


def test_split_cat_roundtrip(backend):
    check(lambda x: lm.cat(x.split([2, 1, 3], 1)[::-1], 1), [rand((3, 6))],
          torch_op=lambda t: torch.cat(t.split([2, 1, 3], 1)[::-1], 1), backend=backend)


@pytest.mark.parametrize("op,exc", [
    (lambda x: lm.cat([x, x.T]), ValueError),
    (lambda x: lm.cat([]), TypeError),
    (lambda x: lm.stack([x, x[:1]]), ValueError),
    (lambda x: x.split([1, 1], 0), ValueError),
    (lambda x: x.split(0, 0), ValueError),
    (lambda x: x.chunk(0), ValueError),
])
def test_combine_errors(op, exc):
    g = lm.Graph()
    with pytest.raises(exc):
        op(g.input("x", (3, 2)))
