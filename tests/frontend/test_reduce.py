"""Parity with torch for reductions, softmax-family ops and scans."""

import numpy as np
import pytest
import torch
from parity import check, rand
from sizes import check_sizes

import luminal as lm
from luminal import train

F32, I32, BOOL = lm.float32, lm.int32, lm.bool


def _axes(t, axis):
    """luminal's ``axis`` as torch's ``dim`` (None = all dims, spelled out for ops that need it)."""
    return tuple(range(t.ndim)) if axis is None else axis


def _tprod(t, axis, keepdim):  # torch.prod takes one dim at a time
    if axis is None and not keepdim:
        return t.prod()
    axes = range(t.ndim) if axis is None else axis if isinstance(axis, (tuple, list)) else [axis]
    axes = {a % t.ndim for a in axes}
    for a in sorted(axes, reverse=True):
        t = t.prod(a, keepdim=True)
    return t if keepdim else t.reshape([d for i, d in enumerate(t.shape) if i not in axes])


# name: (luminal op, torch op), both called as op(x, axis, keepdim)
REDUCTIONS = {
    "sum": (lambda x, a, k: x.sum(a, keepdim=k), lambda t, a, k: t.sum(_axes(t, a), keepdim=k)),
    "mean": (lambda x, a, k: x.mean(a, keepdim=k), lambda t, a, k: t.mean(_axes(t, a), keepdim=k)),
    "max": (lambda x, a, k: x.amax(a, keepdim=k), lambda t, a, k: torch.amax(t, _axes(t, a), keepdim=k)),
    "min": (lambda x, a, k: x.amin(a, keepdim=k), lambda t, a, k: torch.amin(t, _axes(t, a), keepdim=k)),
    "amax": (lambda x, a, k: lm.amax(x, a, k), lambda t, a, k: torch.amax(t, _axes(t, a), keepdim=k)),
    "prod": (lambda x, a, k: x.prod(a, keepdim=k), _tprod),
    "var0": (lambda x, a, k: x.var(a, keepdim=k, correction=0),
             lambda t, a, k: t.var(_axes(t, a), keepdim=k, correction=0)),
    "var1": (lambda x, a, k: lm.var(x, a, keepdim=k), lambda t, a, k: t.var(_axes(t, a), keepdim=k)),
    "var_unbiased0": (lambda x, a, k: x.var(a, keepdim=k, unbiased=False),
                      lambda t, a, k: t.var(_axes(t, a), keepdim=k, unbiased=False)),
    "std1": (lambda x, a, k: x.std(a, keepdim=k), lambda t, a, k: t.std(_axes(t, a), keepdim=k)),
    "std2": (lambda x, a, k: x.std(a, keepdim=k, correction=2),
             lambda t, a, k: t.std(_axes(t, a), keepdim=k, correction=2)),
    "any": (lambda x, a, k: x.any(a, keepdim=k), lambda t, a, k: t.any(_axes(t, a), keepdim=k)),
    "all": (lambda x, a, k: lm.all(x, a, k), lambda t, a, k: t.all(_axes(t, a), keepdim=k)),
    "logsumexp": (lambda x, a, k: x.logsumexp(a, keepdim=k),
                  lambda t, a, k: t.logsumexp(_axes(t, a), keepdim=k)),
}
# (op, input dtype, rand kwargs): int/bool inputs where torch accepts them; prod inputs near 1 / in {-1,0,1}
CASES = [("sum", F32, {}), ("sum", I32, {}), ("sum", BOOL, {}), ("mean", F32, {}), ("max", F32, {}), ("max", I32, {}),
         ("max", BOOL, {}), ("min", F32, {}), ("min", I32, {}), ("min", BOOL, {}), ("amax", F32, {}),
         ("prod", F32, dict(low=0.7, high=1.3)), ("prod", I32, dict(low=-1, high=1)), ("prod", BOOL, {}),
         ("var0", F32, {}), ("var1", F32, {}), ("var_unbiased0", F32, {}), ("std1", F32, {}), ("std2", F32, {}),
         ("any", BOOL, {}), ("any", I32, dict(low=0, high=1)), ("all", BOOL, dict(low=0)),
         ("all", F32, dict(low=0, high=1)), ("logsumexp", F32, {})]
AXES_KEEP = [(None, False), (None, True), (0, False), (-1, True), ((-1, -3), True), ((1, 0, 2), False)]


@pytest.mark.parametrize("axis,keepdim", AXES_KEEP, ids=str)
@pytest.mark.parametrize("name,dtype,kw", CASES, ids=lambda c: getattr(c, "name", c) if not isinstance(c, dict) else "")
def test_reduce(name, dtype, kw, axis, keepdim, backend):
    op, top = REDUCTIONS[name]
    x = rand((3, 4, 5), dtype, **kw)
    if name == "all" and dtype is F32:
        x = np.round(x).astype(np.float32)  # some exact zeros
    check(lambda x: op(x, axis, keepdim), [x], torch_op=lambda t: top(t, axis, keepdim), backend=backend)


NONCONTIG = {
    "permute": lambda t: t.permute(2, 0, 1),
    "step_slice": lambda t: t[:, ::2, 1:],
    "flip": lambda t: t.flip(0, 2),
    "expand": lambda t: t[:, :1].expand(3, 4, 5),
    "transpose_neg_step": lambda t: t.transpose(0, 1).flip(-1)[::2],
}


@pytest.mark.parametrize("pre", NONCONTIG.values(), ids=NONCONTIG.keys())
@pytest.mark.parametrize("name,axis", [("sum", 1), ("max", (0, -1)), ("prod", 0), ("var1", None), ("logsumexp", -1),
                                       ("any", 2)])
def test_reduce_noncontiguous(name, axis, pre, backend):
    op, top = REDUCTIONS[name]
    dtype = BOOL if name == "any" else F32
    x = rand((3, 4, 5), dtype, low=0.7 if name == "prod" else -2, high=1.3 if name == "prod" else 2)
    check(lambda x: op(x, axis, True), [x], torch_op=lambda t: top(t, axis, True), backend=backend, pre=pre)


@pytest.mark.parametrize("name", ["sum", "mean", "max", "min", "prod", "var1", "std1", "any", "all", "logsumexp"])
def test_reduce_dim_alias_and_scalar(name, backend):
    op, top = REDUCTIONS[name]
    dtype = BOOL if name in ("any", "all") else F32
    x = rand((4, 3), dtype, low=0.5)
    lop = {"sum": lm.sum, "mean": lm.mean, "max": lm.amax, "min": lm.amin, "prod": lm.prod, "var1": lm.var,
           "std1": lm.std, "any": lm.any, "all": lm.all, "logsumexp": lm.logsumexp}[name]
    check(lambda x: lop(x, dim=-2, keepdim=True), [x], torch_op=lambda t: top(t, -2, True), backend=backend)
    # a 0-d input, reduced over everything (made from a (1,) input: parity.to_torch turns 0-d into (1,))
    check(lambda x: op(x, None, False), [rand((1,), dtype, low=0.5)], torch_op=lambda t: top(t, None, False),
          pre=lambda t: t.reshape(()), backend=backend)
    check(lambda x: op(x, None, True), [rand((1,), dtype, low=0.5)], torch_op=lambda t: top(t, None, True),
          pre=lambda t: t.reshape(()), backend=backend)


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("axis", [None, 0, 1, -1])
@pytest.mark.parametrize("dtype", [F32, I32, BOOL], ids=str)
@pytest.mark.parametrize("fn", ["argmax", "argmin"])
def test_argextreme(fn, dtype, axis, keepdim, backend):
    x = rand((3, 4, 5), dtype, low=-1, high=1)  # int/bool inputs have many ties: torch picks the first
    tcast = (lambda t: t.int()) if dtype is BOOL else (lambda t: t)  # torch has no bool argmax; same order as int
    check(lambda x: getattr(x, fn)(axis, keepdim), [x], torch_op=lambda t: getattr(tcast(t), fn)(axis, keepdim),
          backend=backend)
    check(lambda x: getattr(lm, fn)(x, dim=axis, keepdim=keepdim), [x],
          torch_op=lambda t: getattr(torch, fn)(tcast(t), dim=axis, keepdim=keepdim), backend=backend)


@pytest.mark.parametrize(("axis", "keepdim"), [(None, False), ((0, 2), True), ((1, 2), False), ((2, 0), False)])
@pytest.mark.parametrize("fn", ["amax", "amin"])
def test_extreme_over_several_axes_shares_gradient_among_all_ties(fn, axis, keepdim, backend):
    """torch.amax/amin give every tied extreme of the reduced set the same share of the gradient. A
    reduction done one axis at a time would split it per axis instead (three tied maxima of a 2x2
    window: 1/4, 1/4, 1/2), so the ties here fall unevenly across the axes."""
    x = np.array([[[1.0, 1.0, -1.0], [1.0, 0.0, 1.0]], [[-2.0, 0.5, 1.0], [0.5, 0.5, 0.5]]], np.float32)
    if fn == "amin":
        x = -x
    check(lambda t: getattr(t, fn)(axis, keepdim), [x],
          torch_op=lambda t: getattr(torch, fn)(t, _axes(t, axis), keepdim=keepdim), backend=backend)


NAN_OPS = {
    "max": (lambda x: x.amax(1), lambda t: t.amax(1)),
    "min": (lambda x: x.amin((0, 1)), lambda t: t.amin((0, 1))),
    "argmax": (lambda x: x.argmax(1), lambda t: t.argmax(1)),
    "argmin": (lambda x: x.argmin(0), lambda t: t.argmin(0)),
    "argmax_all": (lambda x: x.argmax(), lambda t: t.argmax()),
    "sum": (lambda x: x.sum(-1), lambda t: t.sum(-1)),
    "logsumexp": (lambda x: x.logsumexp(1), lambda t: t.logsumexp(1)),
    "softmax": (lambda x: x.softmax(-1), lambda t: t.softmax(-1)),
    "cumsum": (lambda x: x.cumsum(1), lambda t: t.cumsum(1)),
    "cumprod": (lambda x: x.cumprod(1), lambda t: t.cumprod(1)),
    "prod": (lambda x: x.prod(1), lambda t: t.prod(1)),
    "log_softmax": (lambda x: x.log_softmax(0), lambda t: t.log_softmax(0)),
}


@pytest.mark.parametrize("name", NAN_OPS)
def test_nan_propagation(name, backend):
    x = rand((4, 5))
    x[1, 3] = x[3, 0] = x[3, 4] = np.nan  # torch treats NaN as the max (and the min) for arg* too
    op, top = NAN_OPS[name]
    # The gradient of a product at a NaN factor itself is the product of the others here (finite);
    # torch's is result / input = NaN. Elsewhere in a row with a NaN both are NaN, and compared.
    check(op, [x], torch_op=top, backend=backend, grad="finite" if name in ("prod", "cumprod") else True)


@pytest.mark.parametrize("name", ["max", "min", "argmax", "argmin", "logsumexp", "softmax", "log_softmax"])
def test_infinities(name, backend):
    x = rand((5, 4))
    x[0] = -np.inf            # all -inf: softmax NaN, logsumexp -inf
    x[1, 2] = np.inf          # one +inf
    x[2, :2] = -np.inf        # some -inf
    x[3, 1] = x[3, 3] = np.inf
    name = name if name not in ("max", "min") else "a" + name  # (max(dim) with indices: test_api_math.py)
    check(lambda x: getattr(x, name)(-1), [x], backend=backend)


SOFTMAX_AXES = [None, 0, 1, -1, -3]


@pytest.mark.parametrize("axis", SOFTMAX_AXES)
@pytest.mark.parametrize("fn", ["softmax", "log_softmax"])
def test_softmax(fn, axis, backend):
    x = rand((3, 4, 5), low=-20, high=20)  # large logits: needs the max subtraction
    tax = -1 if axis is None else axis
    check(lambda x: getattr(x, fn)(axis), [x], torch_op=lambda t: getattr(t, fn)(tax), backend=backend)
    check(lambda x: getattr(lm, fn)(x, dim=tax), [x], torch_op=lambda t: getattr(t, fn)(dim=tax), backend=backend,
          pre=NONCONTIG["permute"])


@pytest.mark.parametrize("dtype", [lm.float16, lm.bfloat16, lm.float64], ids=str)
@pytest.mark.parametrize("name", ["sum", "mean", "max", "softmax", "logsumexp", "var", "cumsum"])
def test_float_dtypes(name, dtype, backend):
    # half types: luminal reduces in float32 and rounds once, like torch's CPU kernels
    x = rand((3, 6), dtype, low=0, high=1)
    op = {"sum": lambda x: x.sum(-1), "mean": lambda x: x.mean(0), "max": lambda x: x.amax(-1),
          "softmax": lambda x: x.softmax(-1), "logsumexp": lambda x: x.logsumexp(1), "var": lambda x: x.var(1),
          "cumsum": lambda x: x.cumsum(1)}[name]
    top = {"max": lambda t: t.amax(-1)}.get(name, op)
    check(op, [x], dtypes=[dtype], torch_op=top, backend=backend)


@pytest.mark.parametrize("axis", [0, 1, -1, -3])
@pytest.mark.parametrize("dtype,kw", [(F32, dict(low=0.6, high=1.4)), (I32, dict(low=-1, high=2)), (BOOL, {})], ids=str)
@pytest.mark.parametrize("fn", ["cumsum", "cumprod"])
def test_scan(fn, dtype, kw, axis, backend):
    x = rand((3, 4, 7), dtype, **kw)  # 7: a length that is not a power of two
    check(lambda x: getattr(x, fn)(axis), [x], torch_op=lambda t: getattr(t, fn)(axis), backend=backend)


@pytest.mark.parametrize("pre", NONCONTIG.values(), ids=NONCONTIG.keys())
@pytest.mark.parametrize("fn", ["cumsum", "cumprod"])
def test_scan_noncontiguous(fn, pre, backend):
    x = rand((3, 4, 5), low=0.6, high=1.4)
    check(lambda x: getattr(lm, fn)(x, dim=1), [x], torch_op=lambda t: getattr(torch, fn)(t, dim=1), backend=backend,
          pre=pre)


SYMBOLIC = {  # op on a ("B", 4) tensor, BOOL bound at run time; first the reductions over BOOL itself
    "sum_B": lambda x: x.sum(0),
    "mean_B": lambda x: x.mean(0, keepdim=True),
    "var_B": lambda x: x.var(0),
    "std_B_corr0": lambda x: x.std(0, correction=0),
    "max_B": lambda x: x.amax(0),
    "min_all": lambda x: x.amin(),
    "argmax_B": lambda x: x.argmax(0),
    "argmin_all": lambda x: x.argmin(),
    "logsumexp_B": lambda x: x.logsumexp(0),
    "softmax_B": lambda x: x.softmax(0),
    "log_softmax_B": lambda x: x.log_softmax(0),
    "cumsum_B": lambda x: x.cumsum(0),
    "any_B": lambda x: (x > 1).any(0),
    "all_all": lambda x: (x > -1.5).all(),
    "mean_all": lambda x: x.mean(),
    "prod_static": lambda x: x.prod(1),
    "cumprod_static": lambda x: x.cumprod(-1),
    "softmax_static": lambda x: x.softmax(-1),
    "var_static": lambda x: x.var(-1, keepdim=True),
}
SYMBOLIC_TORCH = {"max_B": lambda t: t.amax(0), "min_all": lambda t: t.amin()}


@pytest.mark.parametrize("name", SYMBOLIC)
def test_symbolic(name, backend):
    check_sizes(SYMBOLIC[name], lambda n: [rand((n, 4), seed=n)], [("B", 4)], backend=backend,
                torch_op=SYMBOLIC_TORCH.get(name, SYMBOLIC[name]))


ZERO_SIZE = {  # (shape, op): torch defines these on empty tensors
    "sum_empty_axis": ((0, 3), lambda x: x.sum(0)),
    "sum_all_empty": ((2, 0), lambda x: x.sum()),
    "mean_empty_axis": ((0, 3), lambda x: x.mean(0)),
    "prod_empty_axis": ((0, 3), lambda x: x.prod(0)),
    "max_other_axis": ((0, 3), lambda x: x.amax(1)),
    "argmax_other_axis": ((0, 3), lambda x: x.argmax(1)),
    "any_empty": ((0, 3), lambda x: x.any(0)),
    "all_empty": ((3, 0), lambda x: x.all(-1)),
    "logsumexp_empty": ((3, 0), lambda x: x.logsumexp(1)),
    "logsumexp_all_empty": ((0, 2), lambda x: x.logsumexp((0, 1), keepdim=True)),
    "softmax_over_empty": ((3, 0), lambda x: x.softmax(1)),
    "log_softmax_over_empty": ((3, 0), lambda x: x.log_softmax(-1)),
    "softmax_empty": ((0, 3), lambda x: x.softmax(-1)),
    "cumsum_empty": ((0, 3), lambda x: x.cumsum(0)),
    "cumprod_empty": ((3, 0), lambda x: x.cumprod(1)),
    "var_other_axis": ((0, 4), lambda x: x.var(1)),
    "sum_size1": ((1, 1, 3), lambda x: x.sum((0, 1))),
    "var_size1_corr0": ((1, 3), lambda x: x.var(0, correction=0)),
    "var_size1_corr1": ((1, 3), lambda x: x.var(0)),  # 0/0: NaN, as torch
}
ZERO_TORCH = {"max_other_axis": lambda t: t.amax(1)}


@pytest.mark.parametrize("name", ZERO_SIZE)
def test_zero_and_unit_size(name, backend):
    shape, op = ZERO_SIZE[name]
    check(op, [rand(shape)], torch_op=ZERO_TORCH.get(name, op), backend=backend)


def test_symbolic_reduce_to_size_zero(backend):
    # a symbolic dim bound to 0 at run time: sums give 0, means NaN, any False, all True, logsumexp -inf,
    # softmax over it an empty result, like torch (and the same graph at BOOL = 3)
    check_sizes(lambda x: (x.sum(0), x.mean(0), x.cumsum(0), x.softmax(-1), x.softmax(0), x.log_softmax(0),
                           x.logsumexp(0), x.logsumexp((0, 1), keepdim=True), (x > 0).any(0), (x > 0).all(0)),
                lambda n: [rand((n, 3))], [("B", 3)], sizes=(0, 3), backend=backend)


def test_int32_extremes(backend):
    # min/argmin must not negate: -(-2**31) overflows in int32
    x = rand((3, 4), I32, low=-100, high=100)
    x[0, 1], x[1, 3], x[2, 0], x[2, 2] = -2**31, 2**31 - 1, -2**31, 2**31 - 1
    ops = lambda x: (x.amin(1), x.amax(1), x.argmin(1), x.argmax(0), x.min(), lm.amin(x, 0, True))  # noqa: E731
    check(ops, [x], torch_op=lambda t: (t.amin(1), t.amax(1), t.argmin(1), t.argmax(0), t.amin(), t.amin(0, True)),
          backend=backend)


@pytest.mark.parametrize("correction", [3, 4, 7, 0.5])
def test_var_large_correction(correction, backend):
    # torch divides by max(0, n - correction): inf (not a negative variance) once correction >= n.
    # Its backward divides by n - correction unclamped, so for n < correction its gradient is that of
    # a negative variance (finite) while the value is inf, as here (var's rule, ``_var_backward``);
    # over all elements (no dim) with n <= correction it is grad * (inf, or NaN at the mean).
    check(lambda x: (x.var(1, correction=correction), x.std(correction=correction)), [rand((2, 3))],
          torch_op=lambda t: (t.var(1, correction=correction), t.std(correction=correction)), backend=backend)
    check(lambda x: x.var(correction=correction), [rand((2, 3))], backend=backend)
    check_sizes(lambda x: x.var(0, correction=correction), lambda n: [rand((n, 2))], [("B", 2)], sizes=(3, 2),
                backend=backend)
    check_sizes(lambda x: x.std(correction=correction), lambda n: [rand((n, 2))], [("B", 2)], sizes=(3, 2),
                backend=backend)


@pytest.mark.parametrize("name", ["logsumexp", "softmax", "log_softmax", "mean_of_float"])
def test_int_input_to_float_ops(name, backend):
    # torch computes these in float32 for int input (mean needs an explicit float)
    op = {"logsumexp": lambda x: x.logsumexp(1), "softmax": lambda x: x.float().softmax(1),
          "log_softmax": lambda x: x.float().log_softmax(0), "mean_of_float": lambda x: x.float().mean(1)}[name]
    check(op, [rand((3, 4), I32, low=-3, high=3)], backend=backend)


@pytest.mark.parametrize("op,exc", [
    (lambda x: x.amax(0), ValueError),        # max over an empty dim (torch raises too)
    (lambda x: x.argmin(0), ValueError),
    (lambda x: x.mean(5), ValueError),        # dim out of range
    (lambda x: x.int().mean(), TypeError),     # mean of an int tensor (torch raises too)
    (lambda x: x.sum(0.5), TypeError),
])
def test_reduce_errors(op, exc):
    g = lm.Graph()
    with pytest.raises(exc):
        op(g.input("x", (0, 3)))


def test_prod_symbolic_dim_is_rejected():
    g = lm.Graph()
    x = g.input("x", ("B", 3))
    with pytest.raises(ValueError, match="symbolic"):
        x.prod(0)
    with pytest.raises(ValueError, match="symbolic"):
        x.cumprod(0)


@pytest.mark.parametrize("name,op", [("max", lambda x: x.max(0).values), ("amax", lambda x: x.amax(0)),
                                     ("min", lambda x: x.amin(0)), ("argmax", lambda x: x.argmax(0)),
                                     ("argmin", lambda x: x.argmin(0))])
def test_an_extremum_over_a_symbolic_dim_bound_to_0_fails_before_any_work(name, op, backend):
    """torch: ``max(): Expected reduction dim 0 to have non-zero size``. Before, a backend's kernel-level
    ``MaxReduce over an empty axis (kernel reduce(B, C) -> ...)``; now the op and the user's line, checked
    with the binding. Bound otherwise (B=2, or an empty kept dim) it runs."""
    g = lm.Graph()
    y = op(g.input("x", ("B", "C")))
    f = lm.compile(y, backend=backend)
    said = {"amax": "max"}.get(name, name)  # (amax is max's tensor op: its errors say max)
    with pytest.raises(IndexError, match=rf"{said}: reducing dim 0 of a \(B, C\) tensor, which is empty.*"
                                         rf"test_reduce\.py:\d+"):
        f(x=np.ones((0, 3), np.float32))
    t = torch.arange(6.0).reshape(2, 3)
    want = {"max": t.max(0).values, "amax": t.amax(0), "min": t.amin(0), "argmax": t.argmax(0),
            "argmin": t.argmin(0)}[name]
    np.testing.assert_array_equal(f(x=t.numpy()), want.numpy())
    assert f(x=np.ones((2, 0), np.float32)).shape == (0,)


def test_ops_built_on_a_max_keep_their_answer_for_an_empty_dim(backend):
    """softmax, logsumexp and cummax over an empty symbolic dim: torch's results (empty, -inf, empty), not
    the extrema's error; cummax's windows reduce 0 elements into 0 outputs, which a backend once refused."""
    g = lm.Graph()
    x = g.input("x", ("B", "C"))
    f = lm.compile([x.softmax(0), x.logsumexp(0), x.cummax(0).values, x.cummin(1).values], backend=backend)
    for shape in [(0, 3), (3, 0)]:
        t = torch.ones(shape)
        got = f(x=t.numpy())
        want = (t.softmax(0), t.logsumexp(0), t.cummax(0).values, t.cummin(1).values)
        for a, b in zip(got, want):
            assert a.shape == tuple(b.shape)
            np.testing.assert_array_equal(a, b.numpy())


@pytest.mark.parametrize("dims", [[], ()])
def test_an_empty_dim_list_reduces_every_dim_as_torch(dims, backend):
    """torch's reductions take ``dim=[]`` as every dim (numpy's ``axis=()`` is none); luminal returned the
    input unchanged. torch's any/all take it as no dim, and so do these."""
    x = rand((2, 3), seed=4)
    check(lambda t: (t.sum(dim=dims), t.mean(dim=dims), t.amax(dim=dims), t.amin(dim=dims), t.nansum(dim=dims)),
          [x], backend=backend)
    # torch's var/std(dim=[]) values are the full ones, but their gradients are +-inf (a backward that
    # divides by the count of no dim); the defined gradient is the full reduction's
    check(lambda t: (t.var(dim=dims), t.std(dim=dims)), [x], torch_op=lambda t: (t.var(), t.std()), backend=backend)
    check(lambda t: (t.any(dim=dims), t.all(dim=dims)), [x > 0.5], backend=backend, grad=False)


NONFINITE_ROWS = [[1.0, np.nan, 2.0], [np.nan, 1.0, np.nan], [np.inf, np.inf, np.inf, 1.0], [-np.inf, -np.inf, 1.0],
                  [np.nan, np.inf, np.nan, -np.inf], [2.0, 1.0, 2.0]]


@pytest.mark.parametrize("name", ["max", "min"])
@pytest.mark.parametrize("row", range(len(NONFINITE_ROWS)))
def test_max_min_of_all_elements_share_the_gradient_among_nans_and_infinities(name, row, backend):
    # torch's max()/min() (no dim) share the gradient evenly among the elements equal to the result,
    # NaN ones when it is NaN ([1, nan, 2] -> [0, 1, 0]); amax's gradient there is NaN everywhere
    check(lambda t: getattr(t, name)(), [np.array(NONFINITE_ROWS[row], np.float32)], backend=backend)


def test_max_of_all_elements_of_a_matrix_with_nans(backend):
    x = rand((3, 4))
    x[0, 1] = x[2, 3] = np.nan
    check(lambda t: (t.max(), t.min()), [x], backend=backend)
    check(lambda t: t.max(), [x.astype(np.float16)], backend=backend)
    check(lambda t: t.max(), [np.array(np.nan, np.float32)], backend=backend)  # 0-d


@pytest.mark.parametrize("name,vals", [("max", [-0.0, -1.0]), ("min", [-0.0, 1.0])])
def test_an_extremum_of_all_elements_keeps_its_signed_zeros(name, vals, backend):
    # the value is the reduction's own (a -0.0 result kept); the other elements' gradient is +0, as
    # torch's (bit for bit, as test_signed_zeros.py)
    g = lm.Graph()
    x = g.input("x", (len(vals),))
    r, d = lm.compile([getattr(x, name)(), train.grad(getattr(x, name)(), x)], backend=backend)(
        x=np.array(vals, np.float32))
    t = torch.tensor(vals, requires_grad=True)
    getattr(t, name)().backward()
    assert r == 0 and np.signbit(r) == np.signbit(getattr(t, name)().item())
    np.testing.assert_array_equal(np.signbit(d), np.signbit(t.grad.numpy()))
    np.testing.assert_array_equal(d, t.grad.numpy())


def _compiled_work(fn, shape=(16, 16), dtype=lm.float32):
    """(nodes after the rewrites, kernels) of a forward-only program ``fn(x)`` on the cpu backend."""
    g = lm.Graph()
    r = lm.compile([fn(g.input("x", shape, dtype=dtype))], backend="cpu").report(show=False)
    return r.nodes_after, len(r.kernels)


@pytest.mark.parametrize("dtype", [lm.float32, lm.float16, lm.int32], ids=lambda d: d.name)
@pytest.mark.parametrize("name,plain", [("max", "amax"), ("min", "amin")])
def test_an_extremum_of_all_elements_without_a_gradient_is_the_reduction_alone(name, plain, dtype):
    # max()'s gradient (shared among the ties) is built by the backward pass only: a forward-only
    # program is amax's (a sharing expression in the value made it 48 nodes and 4 kernels, 5x slower)
    assert _compiled_work(lambda x: getattr(x, name)(), dtype=dtype) == \
        _compiled_work(lambda x: getattr(x, plain)(), dtype=dtype)
    assert _compiled_work(lambda x: x / getattr(x.abs(), name)()) == \
        _compiled_work(lambda x: x / getattr(x.abs(), plain)())


@pytest.mark.parametrize("vals", [[1.0, 3.0, 3.0, 0.0, 2.0], [1.0, 3.0, 3.0, np.nan, 2.0], [-np.inf, -np.inf, 1.0]])
def test_amax_and_max_of_the_same_tensor_keep_their_own_gradients(vals, backend):
    # max()'s rule sits on a node of its own: amax (and a clone of it) in the same graph keep amax's
    # gradient (ties: an even share; a NaN result: NaN everywhere) while max() shares among the ties
    ops = lambda t: t.amax() * 2 + t.max() * 3 + t.amax().clone() * 5 + t.min() * 7 + t.amin() * 11  # noqa: E731
    check(ops, [np.array(vals, np.float32)], backend=backend)
