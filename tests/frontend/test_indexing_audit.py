"""Audit of the indexing, gather/scatter and index-update ops against torch 2.13: values, dtypes and
gradients (``parity.check``), and the errors on bad indices, dtypes and shapes. Index tensors are
int32 inputs or constants; torch gets them as int64 (``.long()``)."""

import numpy as np
import pytest
import torch
from parity import check, rand
from sizes import check_sizes

import luminal as lm
from luminal import train

F32, F64, I32, BOOL = lm.float32, lm.float64, lm.int32, lm.bool
X = (4, 5, 6)


def _lt(i):
    """An index for torch: lists and int32 arrays as int64 tensors, the rest as it is."""
    if isinstance(i, tuple):
        return tuple(_lt(k) for k in i)
    if isinstance(i, np.ndarray) and i.dtype.kind == "b":
        return torch.from_numpy(i)
    return i


GETITEM = {  # constant indices on a (4, 5, 6) input, the same on both sides
    "ints": (1, -2),
    "steps": (slice(None, None, 2), slice(1, None, 3), slice(1, 5, 2)),
    "clamped": (slice(None, None, 7), slice(10, None), slice(-100, 3)),
    "none_ellipsis": (None, Ellipsis, None, 1),
    "list_neg": ([0, 2, -1],),
    "broadcast": ([[0], [1]], [2, 3, -1]),
    "split_by_slice": ([0, 1], slice(None), [2, -3]),  # indexed dims go first
    "split_by_int": ([0, 1], 1, [2, 3]),  # the int is a selection (torch): adjacent
    "adjacent_mid": (slice(None), [0, 1], [2, 3]),
    "none_between": ([0, 1], None, [1, 2]),
    "mask_1d": (np.array([True, False, True, True]),),
    "mask_2d": (np.eye(4, 5, dtype=bool),),
    "mask_and_int": (np.array([True, False, True, True]), 1),
    "empty_list": ([],),
    "bool_true": (True,),
    "bool_false": (False,),
    "bool_with_list": (True, [0, 1]),
    "list_with_bool": ([0, 2], True),
    "false_and_int": (False, 0),
    "int_true_slice": (0, True, slice(1, None)),
    "split_by_bool": ([0, 1], slice(None), True),
    "bool_bool": (True, True),
    "ellipsis_bool": (Ellipsis, True),
    "bool_broadcast": (True, [[0], [1]], [1, 2]),
}


@pytest.mark.parametrize("name", GETITEM)
def test_getitem_constant_index(name, backend):
    ix = GETITEM[name]
    check(lambda x: x[ix], [rand(X)], torch_op=lambda x: x[_lt(ix)], backend=backend)


@pytest.mark.parametrize("dtype", [F64, I32, BOOL], ids=str)
def test_getitem_dtypes(dtype, backend):
    check(lambda x: x[[0, 2], 1:, [1, -1]], [rand(X, dtype)], backend=backend)


TENSOR_GETITEM = {  # (i, j) int32 inputs with negative entries, a (3,) and a (2, 1)
    "i_j": lambda x, i, j: x[i, j],
    "i_slice_j": lambda x, i, j: x[i, :, j],
    "slice_j_i": lambda x, i, j: x[:, j, i],
    "i_int_j": lambda x, i, j: x[i, 2, j],
    "none_i_none_j": lambda x, i, j: x[None, i, None, j],
    "repeated": lambda x, i, j: x[:, i, i],
}


@pytest.mark.parametrize("name", TENSOR_GETITEM)
def test_getitem_index_tensors(name, backend):
    """Values, and the gradients of repeated and negative indices (accumulated, as torch's)."""
    f = TENSOR_GETITEM[name]
    i = np.array([1, -4, 1], np.int32)
    j = np.array([[-1], [2]], np.int32)
    check(f, [rand(X), i, j], torch_op=lambda x, i, j: f(x, i.long(), j.long()), backend=backend)


def test_getitem_int_after_slice_is_a_selection(backend):
    # x[:, i, :, 2] of a 4-d input: torch selects dim 3 first, so i's dim stays in place (numpy moves it first)
    i = np.array([2, -1], np.int32)
    check(lambda x, i: x[:, i, :, 2], [rand((3, 4, 5, 6)), i], torch_op=lambda x, i: x[:, i.long(), :, 2],
          backend=backend)


SETITEM = {
    "int": (1, (5, 6)),
    "slice_broadcast": ((slice(None), slice(1, 4)), (1, 3, 6)),
    "step": ((slice(None, None, 2),), (2, 5, 6)),
    "ellipsis_step": ((Ellipsis, slice(0, 6, 4)), (2,)),
    "lists_split": (([0, -1], slice(None), [1, 2]), (2, 5)),
    "list_int": (([3, 0], 2), (6,)),
    "mask": ((np.array([True, False, True, True]),), (5, 6)),
    "bool_true": (True, (5, 6)),
    "bool_false": (False, ()),
    "bool_and_int": ((True, 1), (6,)),
}


@pytest.mark.parametrize("name", SETITEM)
def test_setitem(name, backend):
    ix, vshape = SETITEM[name]

    def op(x, v):
        y = x * 1
        y[ix] = v
        return y

    def top(x, v):
        y = x * 1
        y[_lt(ix)] = v
        return y

    check(op, [rand(X), rand(vshape, seed=5)], torch_op=top, backend=backend)


@pytest.mark.parametrize("dtype", [F64, I32, BOOL], ids=str)
def test_setitem_dtypes(dtype, backend):
    i = np.array([2, -1], np.int32)

    def op(x, v, i):
        y = x.clone()
        y[i, 1:3] = v
        return y

    def top(x, v, i):
        y = x.clone()
        y[i.long(), 1:3] = v
        return y

    check(op, [rand(X, dtype), rand((1, 2, 6), dtype, seed=5), i], torch_op=top, backend=backend)


@pytest.mark.parametrize("accumulate", [False, True])
@pytest.mark.parametrize("dtype", [F32, I32, BOOL], ids=str)
def test_index_put(accumulate, dtype, backend):
    """Unique positions when overwriting (torch's pick among duplicates is unspecified); repeated ones
    add up when accumulating (bool: or), gradients included."""
    i = np.array([0, 2, -1, 2], np.int32)
    j = np.array([1, 3, 4, 3] if accumulate else [1, 1, 4, 3], np.int32)
    check(lambda x, v, i, j: x.index_put((i, j), v, accumulate=accumulate),
          [rand(X, dtype), rand((4, 6), dtype, seed=2), i, j],
          torch_op=lambda x, v, i, j: x.index_put((i.long(), j.long()), v, accumulate=accumulate), backend=backend)


@pytest.mark.parametrize("accumulate", [False, True])
def test_index_put_mask_and_broadcast_value(accumulate, backend):
    check(lambda x, v, m: x.index_put((m,), v, accumulate=accumulate),
          [rand((4, 5)), rand((5,), seed=2), rand((4,), BOOL, seed=3)],
          torch_op=lambda x, v, m: x.index_put((m,), v, accumulate=accumulate), backend=backend)
    check(lambda x, i: x.index_put((i,), x.graph.constant(2.5), accumulate=accumulate),
          [rand((4, 5)), np.array([1, -3, 1], np.int32)],
          torch_op=lambda x, i: x.index_put((i.long(),), torch.tensor(2.5), accumulate=accumulate), backend=backend)


@pytest.mark.parametrize("dtype", [F32, F64, I32, BOOL], ids=str)
def test_gather_repeated(dtype, backend):
    i = np.array([[0, 0, 0, 0], [2, 2, 2, 2], [0, 1, 2, 0]], np.int32)
    check(lambda x, i: x.gather(0, i), [rand((3, 4), dtype), i], torch_op=lambda x, i: x.gather(0, i.long()),
          backend=backend)


SCATTER_INDEX = np.array([[0, 0, 1], [3, 3, 3], [2, 1, 0]], np.int32)  # repeats within rows, position 2 of row 1 unhit


@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("dtype", [F32, F64, I32], ids=str)
def test_scatter_reduce(reduce, include_self, dtype, backend):
    low, high = (0.5, 2.0) if dtype.is_float else (-3, 3)
    check(lambda x, i, s: x.scatter_reduce(1, i, s, reduce, include_self=include_self),
          [rand((3, 4), dtype), SCATTER_INDEX, rand((3, 3), dtype, seed=2, low=low, high=high)],
          torch_op=lambda x, i, s: x.scatter_reduce(1, i.long(), s, reduce, include_self=include_self),
          backend=backend)


@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
def test_scatter_reduce_smaller_index_and_zeros(reduce, include_self, backend):
    """An index smaller than src (torch reads src[:2, :3]; spelled out for torch, whose backward fails on
    a bigger src), and zeros in a product (its gradient)."""
    check(lambda x, i, s: x.scatter_reduce(0, i, s, reduce, include_self=include_self),
          [rand((4, 5)), np.array([[0, 0, 1], [3, 0, 3]], np.int32), rand((3, 4), seed=2, low=0.5)],
          torch_op=lambda x, i, s: x.scatter_reduce(0, i.long(), s[:2, :3], reduce, include_self=include_self),
          backend=backend)
    check(lambda x, i, s: x.scatter_reduce(0, i, s, reduce, include_self=include_self),
          [np.array([0.0, 2.0, 3.0], np.float32), np.array([0, 0, 1, 1], np.int32),
           np.array([1.0, 3.0, 0.0, 0.0], np.float32)],
          torch_op=lambda x, i, s: x.scatter_reduce(0, i.long(), s, reduce, include_self=include_self),
          backend=backend)


@pytest.mark.parametrize("reduce", ["sum", "prod", "amax", "amin"])
def test_scatter_reduce_bool(reduce, backend):
    """Bool stays bool: prod is an and (it was an int32 count), sum and amax an or, amin an and."""
    check(lambda x, i, s: x.scatter_reduce(0, i, s, reduce),
          [np.array([True, True, False, True]), np.array([0, 0, 1, 1, 2], np.int32),
           np.array([True, False, True, True, True])],
          torch_op=lambda x, i, s: x.scatter_reduce(0, i.long(), s, reduce), backend=backend)


@pytest.mark.parametrize("reduce", ["amax", "amin"])
def test_scatter_reduce_tie_without_self(reduce, backend):
    """include_self=False, two equal src values reduced into a position whose own value equals them too
    (amin: the values negated):
    the two src values share its gradient, 1/2 each. (torch 2.13 counts the excluded own value among the
    tied ones and gives each src 1/3, a gradient that does not sum to the position's.)"""
    sign = 1.0 if reduce == "amax" else -1.0
    g = lm.Graph()
    x, s = g.input("x", (3,)), g.input("s", (4,))
    out = x.scatter_reduce(0, g.constant(np.array([0, 0, 1, 1], np.int32)), s, reduce, include_self=False)
    loss = out.sum()
    f = lm.compile([out, train.grad(loss, x), train.grad(loss, s)], backend=backend)
    y, gx, gs = f(x=sign * np.array([1.0, 2.0, 3.0], np.float32), s=sign * np.array([1.0, 1.0, 2.0, 5.0], np.float32))
    np.testing.assert_allclose(y, sign * np.array([1.0, 5.0, 3.0]))
    np.testing.assert_allclose(gx, [0.0, 0.0, 1.0])
    np.testing.assert_allclose(gs, [0.5, 0.5, 0.0, 1.0])


@pytest.mark.parametrize("dtype", [F32, F64, I32, BOOL], ids=str)
def test_index_add_copy_select(dtype, backend):
    i = np.array([2, 0, 2, 3], np.int32)
    if dtype is not BOOL:
        alpha = 2.5 if dtype.is_float else 3
        check(lambda x, i, s: x.index_add(1, i, s, alpha=alpha), [rand((3, 5), dtype), i, rand((3, 4), dtype, seed=2)],
              torch_op=lambda x, i, s: x.index_add(1, i.long(), s, alpha=alpha), backend=backend)
    check(lambda x, i, s: x.index_copy(0, i, s), [rand((5, 3), dtype), np.array([4, 0, 2], np.int32),
                                                   rand((3, 3), dtype, seed=2)],
          torch_op=lambda x, i, s: x.index_copy(0, i.long(), s), backend=backend)
    check(lambda x, i: x.index_select(1, i), [rand((3, 5), dtype), i],
          torch_op=lambda x, i: x.index_select(1, i.long()), backend=backend)


@pytest.mark.parametrize("dtype", [F32, I32, BOOL], ids=str)
def test_masked_fill_where_narrow_select(dtype, backend):
    m = rand((4, 1), BOOL, seed=5)
    check(lambda x, m: x.masked_fill(m, 1), [rand((3, 1, 5), dtype), m], torch_op=lambda x, m: x.masked_fill(m, 1),
          backend=backend)
    check(lambda m, x, y: lm.where(m, x, y), [m, rand((3, 1, 5), dtype), rand((5,), dtype, seed=2)],
          torch_op=lambda m, x, y: torch.where(m, x, y), backend=backend)
    check(lambda x: (x.narrow(1, -3, 2), x.select(-1, -2)), [rand((3, 5), dtype)], backend=backend)


def test_take_along_dim_flat_negative(backend):
    check(lambda x, i: x.take_along_dim(i, 1), [rand((3, 5)), np.array([[-1, 0], [4, -5], [2, 2]], np.int32)],
          torch_op=lambda x, i: x.take_along_dim(i.long(), 1), backend=backend)


OUT_OF_RANGE = {  # op on a (3, 4) x and an int32 index input i, torch's name of the failing op
    "gather": (lambda x, i: x.gather(1, i.reshape(2, 1)), "gather"),
    "scatter": (lambda x, i: x.scatter(1, i.reshape(2, 1), 1.0), "scatter"),
    "scatter_add": (lambda x, i: x.scatter_add(1, i.reshape(2, 1), x[:2, :1]), "scatter_add"),
    "scatter_reduce": (lambda x, i: x.scatter_reduce(1, i.reshape(2, 1), x[:2, :1], "amax"), "scatter_reduce"),
    "index_select": (lambda x, i: x.index_select(1, i), "index_select"),
    "index_add": (lambda x, i: x.index_add(1, i, x[:, :2]), "index_add"),
    "index_copy": (lambda x, i: x.index_copy(1, i, x[:, :2]), "index_copy"),
    "take_along_dim": (lambda x, i: x.take_along_dim(i.reshape(1, 2), 1), "take_along_dim"),
    "getitem": (lambda x, i: x[:, i], "getitem"),
    "index_put": (lambda x, i: x.index_put((i,), x[0, 0], accumulate=True), "index_put"),
}


@pytest.mark.parametrize("value", [4, -5])
@pytest.mark.parametrize("name", OUT_OF_RANGE)
def test_out_of_range_index_names_the_op(name, value, backend):
    """The run-time index check names the op and the value (torch: ``index 4 is out of bounds for
    dimension 1 with size 4``); gather and the scatters refuse -1 as torch's, the others wrap it."""
    op, opname = OUT_OF_RANGE[name]
    g = lm.Graph()
    x, i = g.input("x", (3, 4)), g.input("i", (2,), dtype=I32)
    f = lm.compile(op(x, i), backend=backend)
    size = 3 if name == "index_put" else 4
    with pytest.raises(IndexError, match=rf"^{opname}: index {value} is out of range for (dim \d+ of |a dim of )?"
                                         rf"size {size}"):
        f(x=rand((3, 4)), i=np.array([0, value], np.int32))


@pytest.mark.parametrize("name", ["gather", "scatter", "scatter_add", "scatter_reduce", "index_select", "index_add",
                                  "index_copy"])
def test_negative_index_refused_where_torch_refuses(name, backend):
    op, opname = OUT_OF_RANGE[name]
    g = lm.Graph()
    x, i = g.input("x", (3, 4)), g.input("i", (2,), dtype=I32)
    f = lm.compile(op(x, i), backend=backend)
    with pytest.raises(IndexError, match=rf"^{opname}: index -1 is out of range"):
        f(x=rand((3, 4)), i=np.array([0, -1], np.int32))


def _graph():
    g = lm.Graph()
    return g, g.input("x", (4, 3)), g.input("i2", (2, 3), dtype=I32), g.input("s", (2, 3))


BAD = {  # build-time errors: (op, exception, message)
    "getitem_float_index": (lambda g, x, i, s: x[s[0]], TypeError, r"^getitem: index must be an integer tensor"),
    "getitem_runtime_mask": (lambda g, x, i, s: x[x > 0], IndexError, r"^getitem: a boolean mask tensor .* run time"),
    "getitem_runtime_bool_scalar": (lambda g, x, i, s: x[x[0, 0] > 0], IndexError, r"^getitem: a boolean mask"),
    "getitem_mask_shape": (lambda g, x, i, s: x[np.array([True, False])], IndexError, r"^getitem: mask of shape"),
    "scatter_src_ndim": (lambda g, x, i, s: x.scatter(0, i, s[0]), ValueError,
                         r"^scatter: input, index and src must have the same number of dims, got 2, 2 and 1"),
    "scatter_reduce_src_small_amax": (lambda g, x, i, s: x.scatter_reduce(0, i, s[:, :2], "amax"), ValueError,
                                      r"^scatter_reduce: index dim 1 \(3\) exceeds src's \(2\)"),
    "scatter_reduce_src_small_prod": (lambda g, x, i, s: x.scatter_reduce(0, i, s[:, :2], "prod"), ValueError,
                                      r"^scatter_reduce: index dim 1 \(3\) exceeds src's \(2\)"),
    "scatter_reduce_mean_bool": (lambda g, x, i, s: (x > 0).scatter_reduce(0, i, s > 0, "mean"), TypeError,
                                 r"^scatter_reduce: reduce='mean' is not defined for bool"),
    "scatter_reduce_bad_reduce": (lambda g, x, i, s: x.scatter_reduce(0, i, s, "max"), ValueError,
                                  r"^scatter_reduce: reduce must be one of"),
    "index_add_shape": (lambda g, x, i, s: x.index_add(0, i[0, :2], s[:, :2]), ValueError,
                        r"^index_add: source must have shape \(2, 3\)"),
    "index_put_value_shape": (lambda g, x, i, s: x.index_put((i[0, :2],), g.input("v", (2, 4))), ValueError,
                              r"^index_put: shapes \(2, 4\) and \(2, 3\) cannot broadcast"),
    "masked_fill_float_mask": (lambda g, x, i, s: x.masked_fill(x, 1.0), TypeError,
                               r"^masked_fill: mask must be a bool tensor"),
}


@pytest.mark.parametrize("name", BAD)
def test_bad_arguments_name_the_op(name):
    op, exc, msg = BAD[name]
    with pytest.raises(exc, match=msg):
        op(*_graph())


# torch's take, put, index_fill, index_reduce and masked_scatter (they were missing) ----------------------------
@pytest.mark.parametrize("dtype", [F32, F64, I32, BOOL], ids=str)
def test_take_put_index_fill_masked_scatter(dtype, backend):
    x = rand((3, 4), dtype)
    check(lambda x, i: lm.take(x, i), [x, np.array([[-1, 0], [5, 11], [5, 5]], np.int32)],
          torch_op=lambda x, i: torch.take(x, i.long()), backend=backend)
    check(lambda x, i: x.index_fill(1, i, 1), [x, np.array([-1, 0, 3], np.int32)],
          torch_op=lambda x, i: x.index_fill(1, i.long(), 1), backend=backend)
    check(lambda x, m, s: x.masked_scatter(m, s), [rand((1, 4), dtype), rand((3, 1), BOOL, seed=3),
                                                   rand((2, 7), dtype, seed=4)],
          torch_op=lambda x, m, s: x.masked_scatter(m, s), backend=backend)
    check(lambda x, i, s: x.put(i, s), [x, np.array([[-1, 0], [5, 2]], np.int32), rand((4,), dtype, seed=3)],
          torch_op=lambda x, i, s: x.put(i.long(), s), backend=backend)
    if dtype is not BOOL:
        check(lambda x, i, s: x.put(i, s, accumulate=True), [x, np.array([[-1, 0], [5, -1]], np.int32),
                                                             rand((4,), dtype, seed=3)],
              torch_op=lambda x, i, s: x.put(i.long(), s, accumulate=True), backend=backend)


@pytest.mark.filterwarnings("ignore:index_reduce\\(\\) is in beta")
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("reduce", ["prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("dtype", [F32, I32], ids=str)
def test_index_reduce(reduce, include_self, dtype, backend):
    low, high = (0.5, 2.0) if dtype.is_float else (-3, 3)
    check(lambda x, i, s: x.index_reduce(0, i, s, reduce, include_self=include_self),
          [rand((4, 3), dtype), np.array([0, 2, 0, 3, 2], np.int32), rand((5, 3), dtype, seed=2, low=low, high=high)],
          torch_op=lambda x, i, s: x.index_reduce(0, i.long(), s, reduce, include_self=include_self), backend=backend)


def test_index_fill_tensor_value_gets_each_position_once(backend):
    """A 0-d tensor value's gradient is the sum over the filled positions, a repeated index counted
    once (torch's); the input's is zero there."""
    check(lambda x, i, v: x.index_fill(0, i, v.reshape(())), [rand((3, 4)), np.array([1, 1, 2], np.int32),
                                                             rand((1,), seed=3)],
          torch_op=lambda x, i, v: x.index_fill(0, i.long(), v.reshape(())), backend=backend)


def test_new_ops_edges(backend):
    check(lambda x, i: x.take(i.reshape(())), [rand((3, 4)), np.array([7], np.int32)],
          torch_op=lambda x, i: torch.take(x, i.reshape(()).long()), backend=backend)
    check(lambda x, i: x.index_fill(0, i.reshape(()), 2.5), [rand((3, 4)), np.array([2], np.int32)],
          torch_op=lambda x, i: x.index_fill(0, i.reshape(()).long(), 2.5), backend=backend)
    check(lambda x, m, s: x.masked_scatter(m, s), [rand((3, 4)), np.zeros((3, 4), bool), rand((0,), seed=4)],
          torch_op=lambda x, m, s: x.masked_scatter(m, s), backend=backend)  # nothing selected, nothing read
    check(lambda x, m, s: x.masked_scatter(m, s), [rand((3, 4)), np.eye(3, 4, dtype=bool), rand((3,), seed=4)],
          torch_op=lambda x, m, s: x.masked_scatter(m, s), backend=backend)  # exactly as many as selected


def test_masked_scatter_short_source_is_refused_before_the_run(backend):
    """torch: ``Number of elements of source < number of ones in mask``; the count is known at run time."""
    g = lm.Graph()
    x, m, s = g.input("x", (3, 4)), g.input("m", (3, 4), dtype=BOOL), g.input("s", (5,))
    f = lm.compile(x.masked_scatter(m, s), backend=backend)
    with pytest.raises(IndexError, match=r"^masked_scatter: the mask selects 6 elements, source has only 5"):
        f(x=rand((3, 4)), m=np.arange(12).reshape(3, 4) % 2 == 0, s=rand((5,)))
    mask = np.arange(12).reshape(3, 4) % 3 == 0
    np.testing.assert_array_equal(f(x=np.zeros((3, 4), np.float32), m=mask, s=np.arange(1, 6, dtype=np.float32)),
                                  np.where(mask, np.cumsum(mask).reshape(3, 4), 0))


@pytest.mark.parametrize("name,op,opname", [
    ("take", lambda x, i: x.take(i), "take"),
    ("index_fill", lambda x, i: x.index_fill(1, i, 0.0), "index_fill"),
    ("put", lambda x, i: x.put(i, x[0, :2]), "put"),
    ("index_reduce", lambda x, i: x.index_reduce(1, i, x[:, :2], "amax"), "index_reduce"),
])
def test_new_ops_out_of_range_index(name, op, opname, backend):
    g = lm.Graph()
    x, i = g.input("x", (3, 4)), g.input("i", (2,), dtype=I32)
    f = lm.compile(op(x, i), backend=backend)
    bad = 12 if name in ("take", "put") else 4
    with pytest.raises(IndexError, match=rf"^{opname}: index {bad} is out of range"):
        f(x=rand((3, 4)), i=np.array([0, bad], np.int32))


NEW_BAD = {
    "take_float_index": (lambda g, x, i, s: x.take(s), TypeError, r"^take: index must be an integer tensor"),
    "index_fill_2d_index": (lambda g, x, i, s: x.index_fill(0, i, 1.0), ValueError,
                            r"^index_fill: index must be 0-d or 1-d, got 2-d"),
    "index_fill_1d_value": (lambda g, x, i, s: x.index_fill(0, i[0], s[0]), ValueError,
                            r"^index_fill: value must be a number or a 0-d tensor, got shape \(3,\)"),
    "index_fill_int_overflow": (lambda g, x, i, s: i.index_fill(0, i[0], float("inf")), ValueError,
                                r"^index_fill: value inf cannot be converted to int32"),
    "put_count": (lambda g, x, i, s: x.put(i, s[0]), ValueError,
                  r"^put: source and index must have the same number of elements, got 3 and 6"),
    "masked_scatter_float_mask": (lambda g, x, i, s: x.masked_scatter(x, s), TypeError,
                                  r"^masked_scatter: mask must be a bool tensor, got float32"),
    "masked_scatter_shape": (lambda g, x, i, s: x.masked_scatter(s > 0, s), ValueError,
                             r"^masked_scatter: shapes \(4, 3\) and \(2, 3\) cannot broadcast"),
    "index_reduce_sum": (lambda g, x, i, s: x.index_reduce(0, i[0, :2], s, "sum"), ValueError,
                         r"^index_reduce: reduce must be one of \('prod', 'mean', 'amax', 'amin'\)"),
}


@pytest.mark.parametrize("name", NEW_BAD)
def test_new_ops_bad_arguments(name):
    op, exc, msg = NEW_BAD[name]
    with pytest.raises(exc, match=msg):
        op(*_graph())


@pytest.mark.parametrize("alpha", [1.5, -1.5, 2.7, True])
@pytest.mark.parametrize("dtype", [I32, BOOL], ids=str)
def test_index_add_alpha_in_the_inputs_dtype(alpha, dtype, backend):
    """torch converts alpha to an int or bool input's dtype (int32: 1.5 is 1, -1.5 is -1): luminal
    multiplied by the float and truncated each product (3 * 1.5 gave 4, torch's 3)."""
    check(lambda x, i, s: x.index_add(0, i, s, alpha=alpha),
          [rand((3, 4), dtype), np.array([1, 1, 0], np.int32), (rand((3, 4), dtype, seed=2, low=1, high=5))],
          torch_op=lambda x, i, s: x.index_add(0, i.long(), s, alpha=alpha), backend=backend)


HIGHER_KIND = {  # a float src into an int32 input or an int32 one into a bool input: torch refuses, the cast loses
    "index_add": lambda x, i, s: x.index_add(0, i, s),
    "index_copy": lambda x, i, s: x.index_copy(0, i, s),
    "index_reduce": lambda x, i, s: x.index_reduce(0, i, s, "amax"),
    "scatter": lambda x, i, s: x.scatter(0, i.unsqueeze(1).expand(2, 3), s),
    "scatter_add": lambda x, i, s: x.scatter_add(0, i.unsqueeze(1).expand(2, 3), s),
    "scatter_reduce": lambda x, i, s: x.scatter_reduce(0, i.unsqueeze(1).expand(2, 3), s, "sum"),
    "index_put": lambda x, i, s: x.index_put((i,), s),
    "put": lambda x, i, s: x.put(i, s[0, :2]),
    "masked_scatter": lambda x, i, s: x.masked_scatter(x.graph.constant(True), s),
}


@pytest.mark.parametrize("kinds", [(I32, F32), (BOOL, I32)], ids=str)
@pytest.mark.parametrize("name", HIGHER_KIND)
def test_a_source_of_a_higher_kind_is_refused(name, kinds):
    g = lm.Graph()
    x, i, s = g.input("x", (4, 3), dtype=kinds[0]), g.input("i", (2,), dtype=I32), g.input("s", (2, 3), dtype=kinds[1])
    with pytest.raises(TypeError, match=rf"^{name}: (src|source|values) is {kinds[1].name} and the input "
                                        rf"{kinds[0].name}: .* would lose values"):
        HIGHER_KIND[name](x, i, s)


def test_a_source_of_a_lower_kind_or_width_is_cast(backend):
    """luminal casts what keeps its values (an int src into a float input) and a float64 src into float32 (torch
    needs equal dtypes); x[i] = v casts any v, as torch's."""
    i = np.array([2, 0], np.int32)
    check(lambda x, i, s: x.index_add(0, i, s.double()) + x.scatter_add(0, i.unsqueeze(1).expand(2, 3), s.int()),
          [rand((4, 3)), i, rand((2, 3), seed=2)],
          torch_op=lambda x, i, s: x.index_add(0, i.long(), s) + x.scatter_add(0, i.long().unsqueeze(1).expand(2, 3),
                                                                                s.int().float()),
          backend=backend)

    def set_float_into_int(x, s):
        y = x.clone()
        y[1:3] = s
        return y

    check(set_float_into_int, [rand((4, 3), I32), rand((2, 3), seed=2)], backend=backend)


SYMBOLIC_NEW = {  # (graph shapes, make(n), op, torch op): one compiled graph at two sizes
    "take": ([("B", 4), (3,)], lambda n: [rand((n, 4)), rand((3,), I32, low=-4 * n, high=4 * n - 1)],
             lambda x, i: x.take(i), lambda x, i: torch.take(x, i.long())),
    "index_fill": ([("B", 4), (3,)], lambda n: [rand((n, 4)), rand((3,), I32, low=-n, high=n - 1)],
                   lambda x, i: x.index_fill(0, i, 1.0), lambda x, i: x.index_fill(0, i.long(), 1.0)),
    "masked_scatter": ([("B", 4), ("B", 4), ("S",)], lambda n: [rand((n, 4)), rand((n, 4), BOOL, seed=2),
                                                                rand((4 * n,), seed=3)],
                       lambda x, m, s: x.masked_scatter(m, s), lambda x, m, s: x.masked_scatter(m, s)),
    "put": ([("B", 4), (2,), (2,)], lambda n: [rand((n, 4)), np.array([-1, 1], np.int32), rand((2,), seed=3)],
            lambda x, i, s: x.put(i, s, accumulate=True), lambda x, i, s: x.put(i.long(), s, accumulate=True)),
}


@pytest.mark.parametrize("name", SYMBOLIC_NEW)
def test_new_ops_symbolic(name, backend):
    shapes, make, op, top = SYMBOLIC_NEW[name]
    check_sizes(op, make, shapes, sizes=(5, 2), torch_op=top, backend=backend)
