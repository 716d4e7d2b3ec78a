"""Parity with torch for data-dependent indexing: gather, take_along_dim, index_select, scatter,
scatter_add, one_hot and tensor indices in ``__getitem__``. Index tensors are int32 inputs; torch
gets them as int64 (``.long()``)."""

import numpy as np
import pytest
import torch
import torch.nn.functional as tF
from parity import check, rand
from sizes import check_sizes

import luminal as lm

F32, I32, BOOL = lm.float32, lm.int32, lm.bool
X = (4, 5, 6)


def idx(shape, n, seed=1):
    return rand(shape, I32, seed=seed, low=0, high=n - 1)


def unique_idx(shape, dim, n, seed=1):
    """Index for scatter: along ``dim`` no position repeats (torch's scatter is undefined on duplicates)."""
    rng = np.random.default_rng(seed)
    full = list(shape)
    full[dim] = n
    perm = np.argsort(rng.random(full), axis=dim)
    return np.take(perm, range(shape[dim]), axis=dim).astype(np.int32)


# views of the (4, 5, 6) data input taken inside the op (so the index input stays as it is)
XVIEWS = {
    "contig": lambda x: x,
    "flipped": lambda x: x.flip(1),
    "permuted": lambda x: x.reshape(5, 4, 6).transpose(0, 1),
    "expanded": lambda x: x[:, :1].expand(4, 5, 6),
}
GATHER = [  # (dim, index shape): off-dim sizes may be smaller than the input's, the dim itself any size
    (0, (4, 5, 6)), (1, (4, 5, 6)), (2, (4, 5, 6)), (-1, (4, 5, 3)), (0, (7, 2, 6)), (1, (2, 9, 1)),
    (-2, (1, 1, 1)), (2, (4, 0, 6)),
]


@pytest.mark.parametrize("view", XVIEWS.values(), ids=XVIEWS.keys())
@pytest.mark.parametrize("dim,ishape", GATHER, ids=str)
def test_gather(dim, ishape, view, backend):
    i = idx(ishape, X[dim])
    check(lambda x, i: view(x).gather(dim, i), [rand(X), i],
          torch_op=lambda x, i: view(x).gather(dim, i.long()), backend=backend)


@pytest.mark.parametrize("dtype", [I32, BOOL, lm.float16, lm.bfloat16], ids=str)
def test_gather_dtypes(dtype, backend):
    i = idx((4, 3, 6), 5)
    check(lambda x, i: lm.gather(x, 1, i), [rand(X, dtype), i], dtypes=[dtype, I32],
          torch_op=lambda x, i: torch.gather(x, 1, i.long()), backend=backend)


TAKE = [(0, (3, 5, 6)), (1, (4, 2, 1)), (-1, (1, 1, 4)), (2, (4, 1, 6)), (0, (1, 5, 6))]


@pytest.mark.parametrize("view", ["contig", "permuted"])
@pytest.mark.parametrize("dim,ishape", TAKE, ids=str)
def test_take_along_dim(dim, ishape, view, backend):
    v = XVIEWS[view]
    check(lambda x, i: lm.take_along_dim(v(x), i, dim), [rand(X), idx(ishape, X[dim])],
          torch_op=lambda x, i: torch.take_along_dim(v(x), i.long(), dim), backend=backend)


def test_take_along_dim_argmax(backend):
    # the usual pairing: values at the argmax
    check(lambda x: x.take_along_dim(x.argmax(1, keepdim=True), 1), [rand(X)],
          torch_op=lambda t: t.take_along_dim(t.argmax(1, keepdim=True), 1), backend=backend)


@pytest.mark.parametrize("view", XVIEWS.values(), ids=XVIEWS.keys())
@pytest.mark.parametrize("dim,k", [(0, 3), (1, 8), (-1, 1), (2, 0), (-3, 6)], ids=str)
def test_index_select(dim, k, view, backend):
    check(lambda x, i: view(x).index_select(dim, i), [rand(X), idx((k,), X[dim])],
          torch_op=lambda x, i: view(x).index_select(dim, i.long()), backend=backend)


SCATTER = [(0, (2, 5, 6)), (1, (4, 5, 6)), (2, (4, 5, 3)), (-1, (4, 5, 1)), (1, (4, 0, 6))]


@pytest.mark.parametrize("src", ["tensor", "scalar", "bigger_src"])
@pytest.mark.parametrize("dim,ishape", SCATTER, ids=str)
def test_scatter(dim, ishape, src, backend):
    i = unique_idx(ishape, dim % 3, X[dim])
    if src == "scalar":
        op = lambda x, i: x.scatter(dim, i, 9.5)  # noqa: E731
        top = lambda x, i: x.scatter(dim, i.long(), 9.5)  # noqa: E731
        check(op, [rand(X), i], torch_op=top, backend=backend)
        return
    sshape = tuple(n + 1 for n in ishape) if src == "bigger_src" else ishape  # torch reads src[:index.shape]
    # torch reads src[:index.shape]; spelled out for torch, whose scatter backward returns a gradient
    # of the index's shape for a bigger src (and then fails its own shape check)
    check(lambda x, i, s: x.scatter(dim, i, s), [rand(X), i, rand(sshape, seed=3)],
          torch_op=lambda x, i, s: x.scatter(dim, i.long(), s[tuple(slice(0, n) for n in ishape)]),
          backend=backend)


@pytest.mark.parametrize("dtype", [F32, I32, lm.float64], ids=str)
@pytest.mark.parametrize("dim,ishape", [(0, (9, 5, 6)), (1, (4, 3, 6)), (2, (4, 5, 12)), (-2, (2, 7, 6)),
                                        (0, (0, 5, 6))], ids=str)
def test_scatter_add(dim, ishape, dtype, backend):
    i = idx(ishape, X[dim])  # duplicates accumulate
    check(lambda x, i, s: lm.scatter_add(x, dim, i, s), [rand(X, dtype), i, rand(ishape, dtype, seed=3)],
          torch_op=lambda x, i, s: torch.scatter_add(x, dim, i.long(), s), backend=backend)


def test_scatter_add_noncontiguous(backend):
    i = idx((4, 5, 6), 5)
    check(lambda x, i, s: x.flip(0).scatter_add(1, i.flip(2), s.transpose(0, 1).reshape(4, 5, 6)),
          [rand(X), i, rand((5, 4, 6), seed=3)],
          torch_op=lambda x, i, s: x.flip(0).scatter_add(1, i.flip(2).long(), s.transpose(0, 1).reshape(4, 5, 6)),
          backend=backend)


def test_scatter_bool_and_nan(backend):
    i = unique_idx((2, 5), 0, 4)
    x = rand((4, 5))
    x[0, 0] = np.nan  # untouched positions keep their NaN, overwritten ones lose it
    x[i[0, 1], 1] = np.inf
    check(lambda x, i: x.scatter(0, i, 0.0), [x, i], torch_op=lambda x, i: x.scatter(0, i.long(), 0.0),
          backend=backend)
    check(lambda x, i, s: x.scatter(0, i, s), [rand((4, 5), BOOL), i, rand((2, 5), BOOL, seed=4)],
          torch_op=lambda x, i, s: x.scatter(0, i.long(), s), backend=backend)


@pytest.mark.parametrize("shape,classes", [((5,), 5), ((2, 3), 4), ((0,), 3), ((3, 1, 2), 1), ((), 6)], ids=str)
def test_one_hot(shape, classes, backend):
    i = idx(shape or (1,), classes)
    pre = (lambda t: t.reshape(())) if shape == () else None  # 0-d index (parity.to_torch makes 0-d arrays 1-d)
    check(lambda i: lm.one_hot(i, classes), [i], torch_op=lambda i: tF.one_hot(i.long(), classes), pre=pre,
          backend=backend)


TENSOR_INDEX = {  # x[...] with an int32 index tensor i on a (4, 5, 6) input; (index shape, dim indexed)
    "x[i]": ((3,), 0, lambda x, i: x[i]),
    "x[i2d]": ((2, 3), 0, lambda x, i: x[i]),
    "x[:, i]": ((4,), 1, lambda x, i: x[:, i]),
    "x[..., i]": ((2, 2), 2, lambda x, i: x[..., i]),
    "x[i, 1:]": ((3,), 0, lambda x, i: x[i, 1:]),
    "x[1, i]": ((2, 3), 1, lambda x, i: x[1, i]),
    "x[i, 1]": ((2, 3), 0, lambda x, i: x[i, 1]),
    "x[1, :, i]": ((2, 3), 2, lambda x, i: x[1, :, i]),
    "x[None, i]": ((3,), 0, lambda x, i: x[None, i]),
    "x[i, None, ::2]": ((3,), 0, lambda x, i: x[i, None, ::2]),
    "x[:, 1:4, i]": ((5,), 2, lambda x, i: x[:, 1:4, i]),
    "x[i0d]": ((), 0, lambda x, i: x[i]),
}


@pytest.mark.parametrize("view", ["contig", "permuted", "flipped"])
@pytest.mark.parametrize("name", TENSOR_INDEX)
def test_tensor_index(name, view, backend):
    shape, dim, op = TENSOR_INDEX[name]
    v = XVIEWS[view]
    ins = [rand(X), idx(shape or (1,), X[dim])]
    if shape == ():  # a 0-d index tensor: made from a (1,) input (parity.to_torch turns 0-d arrays into (1,))
        check(lambda x, i: op(v(x), i.reshape(())), ins, torch_op=lambda x, i: op(v(x), i.long().reshape(())),
              backend=backend)
        return
    check(lambda x, i: op(v(x), i), ins, torch_op=lambda x, i: op(v(x), i.long()), backend=backend)


def test_tensor_index_negative(backend):
    # torch wraps negative entries of an index tensor in __getitem__ (gather / index_select reject them)
    i = rand((6,), I32, low=-4, high=3)
    check(lambda x, i: x[i], [rand(X), i], torch_op=lambda x, i: x[i.long()], backend=backend)


SYMBOLIC = {  # (graph shapes, make(n), luminal op, torch op): one compiled graph at two sizes
    "gather_along_B": ([("B", 5), (3, 5)], lambda n: [rand((n, 5)), idx((3, 5), n)],
                       lambda x, i: x.gather(0, i), lambda x, i: x.gather(0, i.long())),
    "gather_index_B": ([(4, 5), ("B", 5)], lambda n: [rand((4, 5)), idx((n, 5), 4)],
                       lambda x, i: x.gather(0, i), lambda x, i: x.gather(0, i.long())),
    "gather_both_B": ([("B", 5), ("B", 2)], lambda n: [rand((n, 5)), idx((n, 2), 5)],
                      lambda x, i: x.gather(1, i), lambda x, i: x.gather(1, i.long())),
    "index_select_K": ([(4, 5), ("K",)], lambda n: [rand((4, 5)), idx((n,), 5)],
                       lambda x, i: x.index_select(1, i), lambda x, i: x.index_select(1, i.long())),
    "getitem_K": ([(4, 5), ("K",)], lambda n: [rand((4, 5)), idx((n,), 4)],
                  lambda x, i: x[i], lambda x, i: x[i.long()]),
    "getitem_of_B": ([("B", 5), (3,)], lambda n: [rand((n, 5)), idx((3,), n)],
                     lambda x, i: x[i, 1:], lambda x, i: x[i.long(), 1:]),
    "getitem_neg_of_B": ([("B", 5), (4,)], lambda n: [rand((n, 5)), rand((4,), I32, low=-n, high=n - 1)],
                         lambda x, i: x[i], lambda x, i: x[i.long()]),
    "take_along_B": ([("B", 5), ("B", 1)], lambda n: [rand((n, 5)), idx((n, 1), 5)],
                     lambda x, i: x.take_along_dim(i, 1), lambda x, i: x.take_along_dim(i.long(), 1)),
    "scatter_add_into_B": ([("B", 3), (6, 3)], lambda n: [rand((n, 3)), idx((6, 3), n), rand((6, 3), seed=2)][:2],
                           lambda x, i: x.scatter_add(0, i, x[0][None].expand(6, 3)),
                           lambda x, i: x.scatter_add(0, i.long(), x[0][None].expand(6, 3))),
    "scatter_add_from_B": ([(4, 3), ("B", 3)], lambda n: [rand((4, 3)), idx((n, 3), 4)],
                           lambda x, i: x.scatter_add(0, i, lm.ones_like(i, dtype=lm.float32)),
                           lambda x, i: x.scatter_add(0, i.long(), torch.ones_like(i, dtype=torch.float32))),
    "one_hot_B": ([("B",)], lambda n: [idx((n,), 4)], lambda i: lm.one_hot(i, 4),
                  lambda i: tF.one_hot(i.long(), 4)),
}


@pytest.mark.parametrize("name", SYMBOLIC)
def test_symbolic(name, backend):
    shapes, make, op, top = SYMBOLIC[name]
    check_sizes(op, make, shapes, sizes=(5, 2), torch_op=top, backend=backend)


@pytest.mark.parametrize("op,exc", [
    (lambda x, i: x.gather(0, i.float()), TypeError),           # float index
    (lambda x, i: x.gather(0, i[0]), ValueError),               # wrong ndim
    (lambda x, i: x.gather(0, i.expand(3, 9)), ValueError),     # off-dim size larger than the input's
    (lambda x, i: x.index_select(0, i), ValueError),            # 2-d index
    (lambda x, i: x[x > 0], IndexError),                        # a mask known only at run time
    (lambda x, i: lm.one_hot(i, None), ValueError),             # num_classes unknown
])
def test_index_errors(op, exc):
    g = lm.Graph()
    with pytest.raises(exc):
        op(g.input("x", (3, 4)), g.input("i", (3, 1), dtype=lm.int32))


def test_out_of_range_index_raises_at_run_time(backend):
    g = lm.Graph()
    x, i = g.input("x", (3, 4)), g.input("i", (2, 4), dtype=lm.int32)
    f = lm.compile([x.gather(0, i)], backend=backend)
    with pytest.raises(IndexError):
        f(x=rand((3, 4)), i=np.full((2, 4), 3, np.int32))


@pytest.mark.parametrize("index,shape,bad", [(5, ("B", 4), 3), (-1, ("B", 4), 0), ((slice(None), 2), (2, "B", 4), 2),
                                             ((slice(None), -3), (3, "B"), 2)])
def test_an_int_index_past_a_symbolic_dim_names_the_index_and_line(index, shape, bad, backend):
    """``x[5]`` of a (B, 4) input bound to B=3: torch's ``index 5 is out of bounds for dimension 0 with size
    3``. The view reads outside x's buffer, which the backend finds (before: ``view (shape (4,), strides
    (1,), offset 20) reads outside a buffer of 12 elements``); the call now names the index, the dim, the
    binding and the user's line. In range, the values are x's."""
    g = lm.Graph()
    x = g.input("x", shape)
    f = lm.compile(x[index] * 2, backend=backend)
    dims = index if isinstance(index, tuple) else (index,)
    i = next(ix for ix in dims if isinstance(ix, int))
    at = shape.index("B")
    with pytest.raises(IndexError, match=rf"^getitem: index {i} is out of range for dim {at} of size B .*"
                                         rf"test_indexing\.py:\d+: f = lm\.compile.*with B={bad}"):
        f(x=np.ones(tuple(bad if d == "B" else d for d in shape), np.float32))
    a = np.arange(np.prod([6 if d == "B" else d for d in shape]), dtype=np.float32)
    a = a.reshape(tuple(6 if d == "B" else d for d in shape))
    np.testing.assert_array_equal(f(x=a), a[index] * 2)


def test_an_int_index_past_a_narrower_view_of_a_symbolic_dim_is_refused(backend):
    """``x[:-1][2]`` of a (B, 4) input bound to B=3 read row 2 of x, silently: the index is past the
    view's 2 rows but inside x's buffer, where no backend could see it. ``x[::2][1]`` is the same view of
    x (row 2) but valid at B=3, and a program reading x through another view must run whatever the
    indices of the graph: each int index's check belongs to the programs that read it (torch:
    ``index 2 is out of bounds for dimension 0 with size 2``)."""
    g = lm.Graph()
    x = g.input("x", ("B", 4))
    past, inside, whole = x[:-1][2] * 2, x[::2][1] * 2, x * 3
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    with pytest.raises(IndexError, match=r"^getitem: index 2 is out of range for dim 0 of size max\(0, B-1\) .*"
                                         r"test_indexing\.py:\d+: past, inside, whole = .*with B=3"):
        lm.compile(past, backend=backend)(x=a)
    np.testing.assert_array_equal(lm.compile(inside, backend=backend)(x=a), a[::2][1] * 2)
    np.testing.assert_array_equal(lm.compile(whole, backend=backend)(x=a), a * 3)
    b = np.arange(16, dtype=np.float32).reshape(4, 4)
    np.testing.assert_array_equal(lm.compile([past, inside], backend=backend)(x=b), (b[:-1][2] * 2, b[::2][1] * 2))


def test_a_write_at_an_int_index_past_a_symbolic_dim_is_refused(backend):
    """``y[5] = 7`` of a (B, 4) tensor bound to B=3 was a write of nothing, silently (its box padded by a
    negative amount); torch raises. Now the binding is refused before any work; in range it writes."""
    g = lm.Graph()
    y = g.input("x", ("B", 4)) * 1
    y[5] = 7.0
    f = lm.compile(y, backend=backend)
    with pytest.raises(IndexError, match=r"setitem: index 5 is out of range for dim 0 of size B .*"
                                         r"test_indexing\.py:\d+: y\[5\] = 7\.0"):
        f(x=np.ones((3, 4), np.float32))
    want = np.ones((7, 4), np.float32)
    want[5] = 7
    np.testing.assert_array_equal(f(x=np.ones((7, 4), np.float32)), want)


DUP = np.array([[1, 1, 3], [0, 2, 0]], np.int32)  # along dim 1: position 1 twice in row 0, position 0 twice in row 1


@pytest.mark.parametrize("kind", ["scalar", "tensor", "setitem", "index_put", "index_copy"])
def test_one_value_written_through_a_repeated_index_is_written_once(kind, backend):
    """The mask idiom ``zeros.scatter(1, idx, 1.0)`` gave 2 where an index repeats (the duplicates were added);
    torch's pick among equal values is that value. The written values' gradient is torch's: each duplicate
    gets its position's whole adjoint (the mean's was 1/k of it); ``x`` the adjoint of positions not written."""
    src = np.array([[7.0, 7.0, 2.0], [3.0, 5.0, 3.0]], np.float32)
    x = rand((2, 4), seed=3)
    if kind == "scalar":
        check(lambda x: x.scatter(1, x.graph.constant(DUP), 1.0),
              [x], torch_op=lambda x: x.scatter(1, torch.from_numpy(DUP).long(), 1.0), backend=backend)
    elif kind == "tensor":
        check(lambda x, s: x.scatter(1, x.graph.constant(DUP), s), [x, src],
              torch_op=lambda x, s: x.scatter(1, torch.from_numpy(DUP).long(), s), backend=backend)
    else:
        rows, cols = np.array([1, 1, 3], np.int32), np.array([2, 2, 0], np.int32)
        v = np.array([4.0, 4.0, 1.5], np.float32)
        x = rand((5, 3), seed=4)

        def lum(x, v):
            r, c = x.graph.constant(rows), x.graph.constant(cols)
            if kind == "setitem":
                y = x * 1
                y[r, c] = v
                return y
            if kind == "index_put":
                return x.index_put((r, c), v)
            return x.index_copy(0, r, v.unsqueeze(1).expand(3, 3))

        def tor(x, v):
            r, c = torch.from_numpy(rows).long(), torch.from_numpy(cols).long()
            if kind == "setitem":
                y = x * 1
                y[r, c] = v
                return y
            if kind == "index_put":
                return x.index_put((r, c), v)
            return x.index_copy(0, r, v.unsqueeze(1).expand(3, 3))

        check(lum, [x, v], torch_op=tor, backend=backend)


@pytest.mark.parametrize("reduce", ["amax", "amin"])
def test_scatter_reduce_shares_a_tie_with_self_evenly(reduce, backend):
    """x = [1, 0] with src [1, 1] both reduced into position 0, include_self: three tied candidates, torch gives
    each 1/3 of the gradient. Before: x's own value got 1/2 and the two src values 1/4 each (a maximum of x
    with the src's max)."""
    index = np.array([0, 0, 1], np.int32)
    x = np.array([1.0, 0.0, 3.0], np.float32)
    src = np.array([1.0, 1.0, -2.0], np.float32) * (1 if reduce == "amax" else -1)
    x = x * (1 if reduce == "amax" else -1)
    check(lambda x, s: x.scatter_reduce(0, x.graph.constant(index), s, reduce, include_self=True), [x, src],
          torch_op=lambda x, s: x.scatter_reduce(0, torch.from_numpy(index).long(), s, reduce, include_self=True),
          backend=backend)
