"""An audit of the reductions against torch 2.13 (CPU): sum, mean, prod, nansum, nanmean over dim
tuples, negative dims, ``dim=[]`` and ``dtype=``; int32 sums past 2**31; amax/amin/max/min/aminmax
at ties; all/any with NaN and over empty dims; count_nonzero; logsumexp at infinities; var/std and
their ``_mean`` forms at every correction; the vector norms, dist and F.normalize at zeros; empty
reductions; float16/bfloat16 sums and means rounded once. Values, result dtypes and gradients, on
every backend where a case compiles a program.

Where torch's result is inf or NaN the value expected is written out here. Findings fixed here:
``vector_norm`` of order below 1 (0.5, -1, -2) had a NaN gradient at a zero element, torch's is 0;
the ``inf``/``-inf`` norm of a vector holding a NaN had a NaN gradient, torch's is 0 (its
``norm_backward`` masks them); F.normalize and F.pairwise_distance divided by ``p`` = 0
(ZeroDivisionError), gave the wrong ``-inf`` norm and the NaN gradients above (their norm is now
``vector_norm``); torch.linalg.matrix_norm and torch.renorm (Tensor.renorm) were missing, and
``norm(x, "nuc")`` said only that the order was not supported; amin over an empty dim said
``min: max: ...``."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F  # noqa: N812
from parity import TORCH_DTYPE, check, rand

import luminal as lm
from luminal import train

pytestmark = pytest.mark.usefixtures("one_torch_thread")

NAN, INF = math.nan, math.inf
F32, F64, I32, BOOL = lm.float32, lm.float64, lm.int32, lm.bool


def _is_torch(t) -> bool:
    return isinstance(t, torch.Tensor)


def _vnorm(t, *a, **k):
    return (torch.linalg.vector_norm if _is_torch(t) else lm.linalg.vector_norm)(t, *a, **k)


def _values_and_grad(op, x: np.ndarray, backend: str):
    """``op(x)`` and the gradient of its sum, computed by luminal."""
    g = lm.Graph()
    t = g.input("x", x.shape, dtype=lm.core.dtype.as_dtype(x.dtype))
    y = op(t)
    f = lm.compile([y, train.grad(y.sum() if y.ndim else y, t)], backend=backend)
    return f(x=x)


# findings ----------------------------------------------------------------------------------------
ZERO_ROWS = np.array([[0.0, 0.0, 0.0], [3.0, -4.0, 0.0], [1.0, 1.0, -1.0], [0.0, 2.0, 0.0]], np.float32)


@pytest.mark.parametrize("ord_", [0.5, 0.25, -1, -2, -0.5])
def test_vector_norm_of_order_below_one_has_gradient_0_at_zero_elements(ord_, backend):
    """torch's norm_backward for ``p < 1``: ``sgn(x) * |x|**(p-1)`` masked to 0 where x == 0 (the
    derivative is infinite there). A negative order's norm of a vector with a zero is 0, and so is
    its gradient at every element. Before: NaN at the zeros (``inf * 0``)."""
    check(lambda t: _vnorm(t, ord_, 1), [ZERO_ROWS], backend=backend)
    check(lambda t: _vnorm(t, ord_, (0, 1), keepdim=True), [rand((3, 4))], backend=backend)
    check(lambda t: t.norm(ord_, dim=0), [ZERO_ROWS.astype(np.float64)], backend=backend)


@pytest.mark.parametrize("ord_", [INF, -INF])
def test_inf_norm_of_a_vector_with_a_nan_has_gradient_0(ord_, backend):
    """torch's norm_backward for ``p = +-inf``: ``sgn(x) * grad / count`` at the elements whose ``|x|``
    is the norm or a NaN; ``sgn(NaN)`` is 0, so a vector holding a NaN gets 0 everywhere (amax's own
    gradient, ``1 / count`` of zero ties, was NaN). Ties share the gradient."""
    x = np.array([[NAN, 0.0, 1.0], [2.0, -2.0, 1.0], [0.5, -3.0, NAN], [-1.0, 4.0, 0.5]], np.float32)
    values, grad = _values_and_grad(lambda t: lm.linalg.vector_norm(t, ord_, 1), x, backend)
    if ord_ > 0:
        want_v, want_g = [NAN, 2.0, NAN, 4.0], [[0, 0, 0], [0.5, -0.5, 0], [0, 0, 0], [0, 1, 0]]
    else:
        want_v, want_g = [NAN, 1.0, NAN, 0.5], [[0, 0, 0], [0, 0, 1], [0, 0, 0], [0, 0, 1]]
    np.testing.assert_array_equal(values, np.array(want_v, np.float32))
    np.testing.assert_array_equal(grad, np.array(want_g, np.float32))
    check(lambda t: _vnorm(t, ord_, -1), [np.array([[3.0, -3.0, 1.0], [0.0, 0.0, 0.0]], np.float32)],
          backend=backend)


@pytest.mark.parametrize("p", [0, 0.5, -1, -INF, INF, 1, 3])
def test_normalize_and_pairwise_distance_use_torchs_norms(p, backend):
    """F.normalize and F.pairwise_distance take torch.norm's ``p``: 0 (the count of non-zeros) divided
    by 0 in Python, ``-inf`` gave 1 where the smallest ``|x|`` is meant, orders below 1 had NaN
    gradients at zeros. F.normalize of a zero vector divides by ``eps``: its gradient is ``1/eps``."""
    def normalize(t):
        return (F.normalize if _is_torch(t) else lm.nn.functional.normalize)(t, p, 1)

    def pairwise(a, b):
        return (F.pairwise_distance if _is_torch(a) else lm.nn.functional.pairwise_distance)(a, b, p)

    check(normalize, [ZERO_ROWS], backend=backend)
    check(pairwise, [ZERO_ROWS, rand((4, 3), seed=2)], backend=backend)


# sum, mean, prod, nansum, nanmean ----------------------------------------------------------------
DIMS = [(0, 2), (-1, -3), [-2], (2, 0, 1)]


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dims", DIMS, ids=str)
def test_sum_mean_nansum_nanmean_over_dim_tuples(dims, keepdim, backend):
    x = rand((2, 3, 4))
    x.reshape(-1)[::5] = NAN if keepdim else x.reshape(-1)[::5]
    check(lambda t: (t.sum(dims, keepdim=keepdim), t.mean(dims, keepdim=keepdim), t.nansum(dims, keepdim=keepdim),
                     t.nanmean(dims, keepdim=keepdim)), [x], backend=backend)
    check(lambda t: (t.sum(dims, keepdim=keepdim), t.nansum(dims, keepdim=keepdim)),
          [rand((2, 3, 4), I32, low=-9, high=9)], backend=backend)
    check(lambda t: t.sum(dims, keepdim=keepdim), [rand((2, 3, 4), BOOL)], backend=backend)


@pytest.mark.parametrize("dims", [[], ()], ids=["list", "tuple"])
def test_an_empty_dim_list_reduces_everything(dims, backend):
    """torch: ``sum(x, dim=[])`` and mean's, nansum's, nanmean's are the whole-tensor reduction."""
    x = rand((2, 3))
    check(lambda t: (t.sum(dims), t.mean(dims, keepdim=True), t.nansum(dims), t.nanmean(dims)), [x],
          torch_op=lambda t: (t.sum(), t.mean((0, 1), keepdim=True), t.nansum(), t.nanmean()), backend=backend)


def _td(t, d):
    return TORCH_DTYPE[d] if _is_torch(t) else d


def test_dtype_argument(backend):
    """``dtype=``: the input cast first, the result in that dtype (int32 summed as float64, bool as float32)."""
    xi, xb, x = rand((3, 4), I32, low=-50, high=50), rand((3, 4), BOOL), rand((3, 4))
    check(lambda t: (t.sum(1, dtype=_td(t, F64)), t.nansum(dtype=_td(t, F64)), t.prod(0, dtype=_td(t, F64)),
                     t.mean(1, dtype=_td(t, F32))), [xi], backend=backend)
    check(lambda t: (t.sum(0, dtype=_td(t, F32)), t.prod(1)), [xb], backend=backend)
    check(lambda t: (t.sum(1, dtype=_td(t, F64)), t.mean((0, 1), dtype=_td(t, F64)), t.nanmean(1, dtype=_td(t, F64))),
          [x], backend=backend)


@pytest.mark.parametrize("op", ["mean", "nanmean"])
def test_mean_of_ints_is_refused_as_torchs(op):
    g = lm.Graph()
    x = g.input("x", (3,), dtype=I32)
    with pytest.raises(TypeError, match=rf"{op}: needs a float tensor, got int32"):
        getattr(x, op)()
    with pytest.raises(TypeError, match=r"mean: dtype must be a float dtype, got int32"):
        x.float().mean(dtype=I32)


def test_int32_sums_wrap_as_torchs_int64_sum_taken_mod_2_32(backend):
    """luminal's integer sums are int32 (torch's int64): past 2**31 they wrap, giving torch's sum
    mod 2**32 (written out here), also through prod, nansum and a sum to float64 (which does not wrap)."""
    x = np.full((3, 1001), 2**30 + 7, np.int32)
    x[1] = -2**31
    x[2, ::2] = 2**31 - 1
    g = lm.Graph()
    t = g.input("x", x.shape, dtype=I32)
    f = lm.compile([t.sum(1), t.nansum(), t.prod(1), t.sum(1, dtype=F64)], backend=backend)
    s, total, p, s64 = f(x=x)
    exact = x.astype(object).sum(1)

    def wrap(v):
        return np.array([(int(a) + 2**31) % 2**32 - 2**31 for a in np.ravel(v)], np.int64).reshape(np.shape(v))

    assert s.dtype == np.int32 and p.dtype == np.int32
    np.testing.assert_array_equal(s, wrap(exact))
    np.testing.assert_array_equal(total, wrap(exact.sum()))
    np.testing.assert_array_equal(p, wrap([math.prod(int(v) for v in row) for row in x]))
    np.testing.assert_array_equal(s64, exact.astype(np.float64))


@pytest.mark.parametrize("dtype", [lm.float16, lm.bfloat16], ids=str)
def test_16_bit_sums_and_means_round_once(dtype, backend):
    """float16/bfloat16 sums and means accumulate in float32 and round once, as torch's: within half
    a unit in the last place of the exact value (plus float32's accumulation error), where
    accumulating in 16 bits is off by hundreds of units for 5000 terms."""
    x = rand((3, 5000), dtype, low=0.0, high=1.0, seed=3)
    g = lm.Graph()
    t = g.input("x", x.shape, dtype=dtype)
    f = lm.compile([t.sum(1), t.mean(1), t.nansum(1), t.nanmean(1), t.mean((0, 1))], backend=backend)
    exact = np.asarray(x, np.float64)
    wants = [exact.sum(1), exact.mean(1), exact.sum(1), exact.mean(1), exact.mean()]
    mant = 10 if dtype is lm.float16 else 7
    for got, want in zip(f(x=x), wants):
        got, want = np.asarray(got, np.float64), np.asarray(want)
        half_ulp = 2.0 ** (np.floor(np.log2(np.abs(want))) - mant - 1)
        assert np.all(np.abs(got - want) <= half_ulp * 1.01 + np.abs(want) * 1e-6), (got, want)
    check(lambda t: (t.sum(1), t.mean(1)), [x[:, :300]], dtypes=[dtype], backend=backend)


# maxima and minima ------------------------------------------------------------------------------
TIES = np.array([[[1.0, 3.0, 3.0], [3.0, 0.0, 2.0]], [[5.0, 5.0, 5.0], [5.0, 1.0, 5.0]]], np.float32)


@pytest.mark.parametrize("dims", [(0, 2), (1, 2), (-1, 0), (0, 1, 2)], ids=str)
def test_amax_amin_over_several_dims_share_the_gradient_among_ties(dims, backend):
    """torch.amax: the gradient split evenly among every tie in the reduced set."""
    check(lambda t: (torch.amax(t, dims) if _is_torch(t) else t.amax(dims)), [TIES], backend=backend)
    check(lambda t: (torch.amin(t, dims, keepdim=True) if _is_torch(t) else t.amin(dims, keepdim=True)), [-TIES],
          backend=backend)


def test_max_min_along_a_dim_give_the_gradient_to_the_index_returned(backend):
    check(lambda t: (*t.max(2), *t.min(1, keepdim=True)), [TIES], backend=backend)
    check(lambda t: (t.max(), t.min()), [TIES], backend=backend)  # all elements: shared among ties


def test_aminmax(backend):
    def op(t, **k):
        return tuple(torch.aminmax(t, **k) if _is_torch(t) else lm.aminmax(t, **k))

    check(lambda t: (*op(t), *op(t, dim=1), *op(t, dim=-1, keepdim=True)), [TIES], backend=backend)
    check(lambda t: op(t, dim=0), [rand((3, 4), I32, low=-5, high=5)], backend=backend)


@pytest.mark.parametrize("op", [lambda t: t.amax(1), lambda t: t.amin(1), lambda t: t.max(1), lambda t: t.max(),
                                lambda t: t.argmax(), lambda t: lm.aminmax(t)],
                         ids=["amax", "amin", "max_dim", "max", "argmax", "aminmax"])
def test_extrema_over_an_empty_dim_are_refused(op):
    """torch refuses them (no identity); luminal names the op and the empty dim."""
    g = lm.Graph()
    with pytest.raises(ValueError, match=r"empty dim"):
        op(g.input("x", (3, 0)))


def test_amin_over_an_empty_dim_names_min_alone():
    g = lm.Graph()
    with pytest.raises(ValueError, match=r"^min: cannot reduce over the empty dim 1"):
        g.input("x", (3, 0)).amin(1)


# all, any, count_nonzero -------------------------------------------------------------------------
NANS = np.array([[NAN, 0.0, 1.0], [0.0, 0.0, -0.0], [2.0, NAN, -0.0]], np.float32)


def test_all_any_count_nonzero_read_nan_as_nonzero(backend):
    """NaN is nonzero (True); -0.0 is zero."""
    check(lambda t: (t.any(1), t.all(1), t.any(), t.all(), t.all((0, 1), keepdim=True), t.count_nonzero(1),
                     t.count_nonzero(), t.count_nonzero((0, -1))), [NANS], backend=backend, grad=False)
    check(lambda t: (t.any(0), t.all(-1), t.count_nonzero(0)), [rand((3, 4), I32, low=-1, high=1)],
          backend=backend)


def test_empty_reductions_give_their_identities(backend):
    """Over an empty dim: sum 0, prod 1, any False, all True, count_nonzero 0, logsumexp -inf, mean NaN,
    nanmean NaN, vector norms 0 (torch's values, which are these identities)."""
    e = np.zeros((3, 0), np.float32)
    got = check(lambda t: (t.sum(1), t.prod(1), t.any(1), t.all(1), t.count_nonzero(1), t.logsumexp(1), t.mean(1),
                           t.nanmean(1), t.nansum(1), _vnorm(t, 2, 1), _vnorm(t, 1, 1), t.sum(0), t.all(),
                           t.any()), [e], backend=backend)
    want = [0.0, 1.0, False, True, 0, -INF, NAN, NAN, 0.0, 0.0, 0.0]
    for a, w in zip(got, want):
        np.testing.assert_array_equal(a, np.full(3, w, a.dtype))
    assert got[-2] and not got[-1]


# logsumexp ---------------------------------------------------------------------------------------
def test_logsumexp_at_infinities(backend):
    """A row of -inf gives -inf; a +inf entry gives +inf (also beside another +inf); otherwise finite
    with the gradient softmax(x), 0 at the -inf entries."""
    x = np.array([[-INF, -INF, -INF], [INF, 1.0, 2.0], [INF, INF, 0.0], [-INF, 0.0, 1.0]], np.float32)
    values, grad = _values_and_grad(lambda t: t.logsumexp(1), x, backend)
    np.testing.assert_array_equal(values[:3], [-INF, INF, INF])
    np.testing.assert_allclose(values[3], math.log(1 + math.e), rtol=1e-6)
    np.testing.assert_allclose(grad[3], [0.0, 1 / (1 + math.e), math.e / (1 + math.e)], rtol=1e-6)
    np.testing.assert_array_equal(grad[1:3, 1:][grad[1:3, 1:] == grad[1:3, 1:]], [0.0, 0.0, 0.0])
    check(lambda t: (t.logsumexp((0, 2)), t.logsumexp(-1, keepdim=True)), [rand((2, 3, 4))], backend=backend)


# var, std, var_mean, std_mean ---------------------------------------------------------------------
@pytest.mark.parametrize("correction", [0, 1, 2, 0.5])
def test_var_std_and_their_means_at_every_correction(correction, backend):
    x = rand((3, 5))
    check(lambda t: (*torch.var_mean(t, 1, correction=correction), *torch.std_mean(t, (0, 1), correction=correction,
                                                                                   keepdim=True))
          if _is_torch(t) else (*lm.var_mean(t, 1, correction=correction),
                                *lm.std_mean(t, (0, 1), correction=correction, keepdim=True)), [x], backend=backend)
    check(lambda t: (t.var(1, False), t.std(0, unbiased=True, keepdim=True), t.var(False), t.std(True)), [x],
          backend=backend)


@pytest.mark.parametrize("correction", [4, 5, 7])
def test_var_std_with_a_correction_at_or_past_the_count(correction, backend):
    """Over 4 elements: the divisor ``max(0, 4 - correction)`` is 0, so the variance is inf (NaN where
    every value is equal: 0 / 0), the std the same; var_mean's mean is unaffected."""
    x = np.array([[1.0, 2.0, 4.0, -1.0], [3.0, 3.0, 3.0, 3.0]], np.float32)
    g = lm.Graph()
    t = g.input("x", x.shape)
    v, m = lm.var_mean(t, 1, correction=correction)
    s, _ = lm.std_mean(t, 1, correction=correction)
    got = lm.compile([v, m, s], backend=backend)(x=x)
    for a, w in zip(got, [[INF, NAN], [1.5, 3.0], [INF, NAN]]):
        np.testing.assert_array_equal(a, np.array(w, np.float32))


# norms and dist ----------------------------------------------------------------------------------
@pytest.mark.parametrize("ord_", [0, 1, 2, INF, -INF, 0.5, 1.5, 3, -1])
def test_vector_norm_orders_over_dims(ord_, backend):
    x = rand((2, 3, 4))
    check(lambda t: (_vnorm(t, ord_), _vnorm(t, ord_, (0, -1), keepdim=True), _vnorm(t, ord_, -2)), [x],
          backend=backend)
    check(lambda t: t.norm(ord_, 1), [x], backend=backend)


def test_2_norm_of_zero_vectors_has_gradient_0(backend):
    for ord_ in (2, 1, 3, 1.5, INF):
        check(lambda t, o=ord_: _vnorm(t, o, 1), [ZERO_ROWS[:1]], backend=backend)
    check(lambda t: (t.norm(), t.norm("fro", (0, 1))), [np.zeros((2, 3), np.float32)], backend=backend)


@pytest.mark.parametrize("p", [1, 2, INF, -INF, 0.5, 3])
def test_dist(p, backend):
    a, b = rand((3, 4)), rand((3, 4), seed=1)
    check(lambda s, t: torch.dist(s, t, p) if _is_torch(s) else lm.dist(s, t, p), [a, b[:1]], backend=backend)
    check(lambda s, t: torch.dist(s, t, p) if _is_torch(s) else lm.dist(s, t, p), [a, a.copy()], backend=backend)


def test_dist_of_order_0_counts_the_differences_with_gradient_0(backend):
    """torch's backward of ``dist(p=0)`` fails (an undefined tensor); the count is piecewise constant,
    so its gradient is 0."""
    a = np.array([[1.0, 2.0, 3.0]], np.float32)
    g = lm.Graph()
    x, y = g.input("x", (1, 3)), g.input("y", (1, 3))
    d = lm.dist(x, y, 0)
    got = lm.compile(d, backend=backend)(x=a, y=np.array([[1.0, 0.0, 0.5]], np.float32))
    assert float(got) == 2.0
    with pytest.raises(ValueError, match="only through"):
        train.grad(d, x)


# matrix norms and renorm -------------------------------------------------------------------------
def _mnorm(t, *a, **k):
    return (torch.linalg.matrix_norm if _is_torch(t) else lm.linalg.matrix_norm)(t, *a, **k)


@pytest.mark.parametrize("ord_", ["fro", 1, -1, INF, -INF], ids=str)
def test_matrix_norm(ord_, backend):
    """Column sums (1, -1) or row sums (inf, -inf) of ``|A|``, then their max or min: ties share the
    gradient, as torch's amax/amin; a zero matrix has gradient 0."""
    ties = np.array([[1.0, -2.0, 3.0], [3.0, 2.0, -1.0], [0.0, 0.0, 0.0]], np.float32)
    check(lambda t: (_mnorm(t, ord_), _mnorm(t, ord_, (2, 0), keepdim=True), _mnorm(t, ord_, (-1, 1))),
          [rand((2, 3, 4))], backend=backend)
    check(lambda t: _mnorm(t, ord_), [ties], backend=backend)
    check(lambda t: _mnorm(t, ord_), [np.zeros((2, 3), np.float32)], backend=backend)
    check(lambda t: _mnorm(t, ord_, dtype=_td(t, F64)), [rand((3, 2), lm.float16)], dtypes=[lm.float16],
          backend=backend)
    check(lambda t: t.norm(ord_, (0, 1)) if ord_ == "fro" else _mnorm(t, ord_, (0, 1)), [rand((3, 4))],
          backend=backend)


def test_matrix_norm_of_empty_matrices_as_torchs(backend):
    """No entries: 0 for 'fro', 1 and inf (the max of no sums, or of sums of nothing); -1 and -inf
    refuse a matrix without columns (rows), as torch's amin."""
    for shape in [(0, 3), (3, 0), (2, 0, 3)]:
        check(lambda t: (_mnorm(t), _mnorm(t, 1), _mnorm(t, INF)), [np.zeros(shape, np.float32)], backend=backend)
    g = lm.Graph()
    with pytest.raises(ValueError, match=r"matrix_norm: min: cannot reduce over the empty dim"):
        lm.linalg.matrix_norm(g.input("x", (3, 0)), -1)


@pytest.mark.parametrize("op,exc,msg", [
    (lambda t: lm.linalg.matrix_norm(t, 3), ValueError, r"ord=3 is not a matrix norm"),
    (lambda t: t.norm("fro", (0, 1, 2)), TypeError, r"dim must be a pair of dims, got \(0, 1, 2\)"),
    (lambda t: lm.linalg.matrix_norm(t, 1, (0, -3)), ValueError, r"the dims must differ"),
    (lambda t: lm.linalg.matrix_norm(t[0, 0]), ValueError, r"at least 2 dims, got 1"),
    (lambda t: lm.linalg.matrix_norm(t.int()), TypeError, r"needs a float tensor, got int32"),
    (lambda t: lm.renorm(t, 0, 0, 1.0), ValueError, r"renorm: p must be positive, got 0"),
    (lambda t: lm.renorm(t, 2, 0, -1.0), ValueError, r"renorm: maxnorm must be >= 0, got -1.0"),
    (lambda t: lm.renorm(t[0, 0], 2, 0, 1.0), ValueError, r"renorm: needs a tensor of at least 2 dims, got 1"),
    (lambda t: lm.renorm(t, 2, 3, 1.0), ValueError, r"renorm: dim 3 is out of range"),
], ids=["ord3", "fro-3-dims", "same-dims", "1d", "int", "p0", "maxnorm", "renorm-1d",
        "renorm-dim"])
def test_matrix_norm_and_renorm_errors(op, exc, msg):
    """torch refuses the same ('nuc' and 2 / -2 are computed: tests/frontend/test_linalg_decomp.py)."""
    g = lm.Graph()
    with pytest.raises(exc, match=msg):
        op(g.input("x", (2, 3, 4)))


@pytest.mark.parametrize("p,dim,maxnorm", [(2, 0, 1.0), (1, 1, 0.5), (INF, -1, 0.3), (0.5, 0, 2.0), (3, 2, 0.7),
                                           (2, 0, 0.0), (2, 1, 100.0)])
def test_renorm(p, dim, maxnorm, backend):
    """Slices along ``dim`` with a norm above ``maxnorm`` scaled by ``maxnorm / (norm + 1e-7)`` (the
    gradient through the norm, as torch's renorm_backward); the others, and zero slices, kept."""
    def op(t):
        return torch.renorm(t, p, dim, maxnorm) if _is_torch(t) else lm.renorm(t, p, dim, maxnorm)

    check(op, [rand((2, 3, 4))], backend=backend)
    check(lambda t: t.renorm(p, dim, maxnorm), [rand((2, 3, 4), seed=1)], backend=backend)
    if dim != 2:  # matrices: a zero row, one below maxnorm; float16 (the norm in float32)
        rows = np.array([[3.0, 4.0, 0.0], [0.1, 0.2, 0.0], [0.0, 0.0, 0.0]], np.float32)
        check(op, [rows], backend=backend)
        check(op, [rand((3, 4), lm.float16)], dtypes=[lm.float16], backend=backend)
