"""Random sampling beyond test_random_sampling.py (ops/random.py): the normal's tails past 5.77 sigma,
lm.multinomial, and the in-place random fills (``x.normal_()``, ``uniform_``, ...).

The streams differ from torch's, so draws are checked as distributions with fixed seeds and bounds a
correct sampler meets with overwhelming probability (tail probabilities below about 1e-6); torch is
the reference for shapes, dtypes, argument forms and errors.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest
import torch

import luminal as lm
from luminal.frontend.ops.inplace import INPLACE, RANDOM

U_MAX = 1 - 2.0**-24  # the largest float32 uniform Graph.rand draws


def _run(outs, **inputs):
    return lm.compile(outs)(**inputs)


def _ks(v: np.ndarray, cdf) -> float:
    """The Kolmogorov-Smirnov statistic of samples ``v`` against ``cdf`` (vectorised: a float64 array
    in, the CDF's values out)."""
    v = np.sort(np.asarray(v, np.float64).ravel())
    c = cdf(v)
    i = np.arange(1, len(v) + 1)
    return float(max((i / len(v) - c).max(), (c - (i - 1) / len(v)).max()))


def _normal_cdf(v: np.ndarray) -> np.ndarray:
    return torch.special.ndtr(torch.from_numpy(v)).numpy()


def _ks_bound(n: int) -> float:
    """The KS statistic a correct sampler of ``n`` draws stays below but with probability 2e-9."""
    return math.sqrt(math.log(2 / 2e-9) / (2 * n))


# -------------------------------------------------------------------------------------------- randn tails


def _pinned_uniforms(g: lm.Graph, *pins):
    """Make ``g.rand``'s calls return, in turn, the constant ``pins[i]``, or fresh noise where it is None."""
    queue = list(pins)

    def rand(shape):
        v = queue.pop(0)
        return lm.Graph.rand(g, shape) if v is None else g.constant(np.full(tuple(shape), v, np.float32))

    g.rand = rand


@pytest.mark.parametrize("dtype", [lm.float32, lm.float64, lm.float16])
def test_randn_tail_past_the_24_bit_radius(dtype):
    """Given the largest first uniform (where a 24-bit radius stopped, at 5.77 sigma) and an angle of 0,
    the second uniform carries the value on into the normal's tail, to 8.16: ``z**2 - 48 ln 2`` is
    exponential with mean 2, as the Rayleigh radius beyond 5.77 is (its tail is memoryless)."""
    lm.manual_seed(11)
    n = 100_000
    g = lm.Graph()
    x = g.input("x", (n,), dtype=dtype)
    _pinned_uniforms(g, U_MAX, None, 0.0)
    z = np.asarray(_run([lm.randn_like(x)], x=np.zeros(n, dtype.np))[0], np.float64)
    assert z.min() >= math.sqrt(48 * math.log(2)) - 1e-2 and z.max() <= math.sqrt(96 * math.log(2)) + 1e-2
    if dtype != lm.float16:  # (float16's ulp at 6 is 0.004: the exponential's shape is rounded away)
        t = z**2 - 48 * math.log(2)
        assert _ks(t, lambda v: 1 - np.exp(-v / 2)) < _ks_bound(n)


@pytest.mark.parametrize("dtype", [lm.float32, lm.float64])
def test_randn_four_million_draws(dtype):
    """Mean, variance, KS and the tail mass beyond 4.5 sigma (expected 27.2 of 4M draws; beyond 5.77
    sigma, where the 24-bit radius stopped, 0.03 are expected: too few to count in a test, which the
    test above checks instead)."""
    lm.manual_seed(12)
    n = 4_000_000
    g = lm.Graph()
    x = g.input("x", (n,), dtype=dtype)
    v = np.asarray(_run([lm.randn_like(x)], x=np.zeros(n, dtype.np))[0], np.float64)
    assert abs(v.mean()) < 6 / math.sqrt(n) and abs(v.var() - 1) < 6 * math.sqrt(2 / n)
    assert _ks(v, _normal_cdf) < _ks_bound(n)
    tail = int((np.abs(v) > 4.5).sum())
    expected = n * 2 * float(torch.special.ndtr(torch.tensor(-4.5, dtype=torch.float64)))
    assert 5 <= tail <= 65, (tail, expected)  # (Poisson(27.2): P(outside) < 1e-6)


# ---------------------------------------------------------------------------------------------- multinomial


def _chi2(counts: np.ndarray, probs: np.ndarray) -> float:
    """Pearson's statistic of ``counts`` against ``probs`` (categories of probability 0 must be empty)."""
    counts, probs = np.asarray(counts, np.float64), np.asarray(probs, np.float64)
    assert (counts[probs == 0] == 0).all()
    want = counts.sum() * probs[probs > 0]
    return float(((counts[probs > 0] - want) ** 2 / want).sum())


def _chi2_bound(categories: int) -> float:
    """A bound a correct sampler's chi-square over ``categories`` (k - 1 degrees of freedom) stays
    below but with probability under about 1e-8."""
    return categories - 1 + 60


WEIGHTS = np.array([[1, 2, 3, 4, 0, 10], [0, 0, 5, 0, 0, 1e-3], [7, 0, 0, 0, 0, 0], [0.5, 0.5, 0.5, 0.5, 0.5, 0.5]])


@pytest.mark.parametrize("dtype", [lm.float32, lm.float64, lm.float16])
def test_multinomial_with_replacement_frequencies(dtype):
    lm.manual_seed(13)
    s = 100_000
    g = lm.Graph()
    p = g.input("p", WEIGHTS.shape, dtype=dtype)
    out = lm.multinomial(p, s, replacement=True)
    assert (out.dtype, out.shape) == (lm.int32, (4, s))
    v = _run([out], p=lm.core.dtype.to_storage(WEIGHTS, dtype))[0]
    for row, w in zip(v, WEIGHTS):
        counts = np.bincount(row, minlength=w.size)
        assert counts.size == w.size and _chi2(counts, w / w.sum()) < _chi2_bound(int((w > 0).sum()))


def test_multinomial_1d_and_torch_shapes():
    lm.manual_seed(14)
    g = lm.Graph()
    p = g.input("p", (5,))
    outs = [lm.multinomial(p, 3), p.multinomial(7, True), lm.multinomial(p, 5, replacement=False)]
    tp = torch.ones(5)
    for out, targs in zip(outs, [(3,), (7, True), (5, False)]):
        want = torch.multinomial(tp, *targs)
        assert out.shape == tuple(want.shape) and out.dtype == lm.int32  # (torch's int64 is luminal's int32)
    a, b, c = _run(outs, p=np.array([1, 2, 3, 4, 5], np.float32))
    assert len(set(a)) == 3 and set(b) <= set(range(5)) and sorted(c) == list(range(5))  # c: a permutation
    assert lm.multinomial(g.input("q", (0, 4)), 2).shape == tuple(torch.multinomial(torch.ones(0, 4), 2).shape)


def test_multinomial_without_replacement_first_and_second_draws():
    """Distinct indices per row; the first draw is distributed as the weights, the second as the
    weights of the categories left: ``P(j) = sum_i p_i p_j / (1 - p_i)`` (torch's sequential order)."""
    lm.manual_seed(15)
    rows, w = 100_000, np.array([1.0, 2.0, 0.0, 3.0, 4.0])
    p = w / w.sum()
    g = lm.Graph()
    x = g.input("x", (rows, w.size))
    v = _run([lm.multinomial(x, 3)], x=np.broadcast_to(w, (rows, w.size)).astype(np.float32))[0]
    assert v.shape == (rows, 3) and (v != 2).all()  # the zero weight never
    assert (v[:, 0] != v[:, 1]).all() and (v[:, 0] != v[:, 2]).all() and (v[:, 1] != v[:, 2]).all()
    assert _chi2(np.bincount(v[:, 0], minlength=5), p) < _chi2_bound(4)
    second = np.array([sum(p[i] * p[j] / (1 - p[i]) for i in range(5) if i != j) for j in range(5)])
    assert _chi2(np.bincount(v[:, 1], minlength=5), second) < _chi2_bound(4)


@pytest.mark.parametrize("weights, first, last", [
    ([0, 0, 3, 0, 1, 0], 2, 4), ([5], 0, 0), ([0, 1], 1, 1), ([1, 0], 0, 0), ([1e-30, 1, 0, 0], 0, 1),
])
def test_multinomial_ends_of_the_uniform(weights, first, last):
    """The smallest uniform draws the first non-zero weight, the largest the last one: never a zero
    weight, and never past the categories, however the float64 sums round."""
    for u, want in ((0.0, first), (U_MAX, last)):
        g = lm.Graph()
        p = g.input("p", (len(weights),))
        _pinned_uniforms(g, u, u)
        got = _run([lm.multinomial(p, 4, True)], p=np.array(weights, np.float32))[0]
        np.testing.assert_array_equal(got, [want] * 4)


def test_multinomial_symbolic_rows():
    lm.manual_seed(16)
    g = lm.Graph()
    p = g.input("p", ("n", 3))
    f = lm.compile([lm.multinomial(p, 2), lm.multinomial(p, 5, True)])
    for n in (1, 40):
        a, b = f(p=np.tile(np.array([1, 0, 1], np.float32), (n, 1)))
        assert a.shape == (n, 2) and b.shape == (n, 5)
        assert (np.sort(a, 1) == [0, 2]).all() and set(np.unique(b)) <= {0, 2}


def test_multinomial_symbolic_categories():
    """A symbolic number of categories (the total is the running sums' largest, not a slice's last)."""
    lm.manual_seed(21)
    g = lm.Graph()
    p = g.input("p", ("k",))
    f = lm.compile([lm.multinomial(p, 4000, True), lm.multinomial(p, 2)])
    for w in ([0, 1, 1, 0], [0, 0, 0, 0, 0, 2, 1], [3]):
        w = np.array(w, np.float32)
        if (w > 0).sum() < 2:
            with pytest.raises(RuntimeError, match=r"^multinomial: cannot sample 2 without replacement"):
                f(p=w)
            continue
        a, b = f(p=w)
        assert _chi2(np.bincount(a, minlength=w.size), w / w.sum()) < _chi2_bound(int((w > 0).sum()))
        assert len(set(b)) == 2 and (w[b] > 0).all()
    with pytest.raises(ValueError, match=r"^multinomial: needs at least one category, got none"):
        lm.multinomial(g.input("e", (3, 0)), 1, True)
    with pytest.raises(RuntimeError):
        torch.multinomial(torch.ones(3, 0), 1, True)


@pytest.mark.parametrize("weights, args, error, match", [
    ([1.0, 2.0], (0,), ValueError, r"^multinomial: cannot sample num_samples=0 <= 0 samples"),
    ([1.0, 2.0], (3,), ValueError, r"^multinomial: cannot sample num_samples=3 > 2 categories without replacement"),
    ([1.0, -1.0], (1,), RuntimeError, r"^multinomial: probability tensor contains either inf, nan or element < 0"),
    ([1.0, math.inf], (1, True), RuntimeError, r"^multinomial: probability tensor contains either inf"),
    ([1.0, math.nan], (1,), RuntimeError, r"^multinomial: probability tensor contains either inf"),
    ([0.0, 0.0], (1, True), RuntimeError, r"^multinomial: invalid multinomial distribution \(sum of probabilities "
                                          r"<= 0\) in 1 row"),
    ([[1.0, 1.0], [0.0, 0.0]], (1,), RuntimeError, r"^multinomial: invalid multinomial distribution"),
    (1.0, (1,), ValueError, r"^multinomial: prob_dist must be 1 or 2 dim \(as torch's\), got 0-d"),
    (np.ones((2, 2, 2)), (1,), ValueError, r"^multinomial: prob_dist must be 1 or 2 dim"),
    ([1.0, 2.0], (1.5,), TypeError, r"^multinomial: num_samples must be an int, got float"),
    ([1.0, 2.0], (True,), TypeError, r"^multinomial: num_samples must be an int, got bool"),
])
def test_multinomial_refuses_as_torch(weights, args, error, match):
    g = lm.Graph()
    with pytest.raises(error, match=match):
        lm.multinomial(g.constant(np.array(weights, np.float32)), *args)
    with pytest.raises((RuntimeError, TypeError)):
        torch.multinomial(torch.tensor(weights, dtype=torch.float32), *args)


def test_multinomial_refuses_too_few_non_zero_weights_and_other_dtypes():
    """torch's CPU kernel then returns zero-weight categories (a sample of probability 0); refused here."""
    g = lm.Graph()
    with pytest.raises(RuntimeError, match=r"^multinomial: cannot sample 2 without replacement from fewer non-zero "
                                           r"weights \(in 1 row"):
        lm.multinomial(g.constant(np.array([1.0, 0.0, 0.0], np.float32)), 2)
    with pytest.raises(TypeError, match=r"^multinomial: needs float weights \(as torch's\), got int32"):
        lm.multinomial(g.input("i", (3,), dtype=lm.int32), 1)
    with pytest.raises(RuntimeError, match="floating-point"):
        torch.multinomial(torch.ones(3, dtype=torch.int64), 1)
    with pytest.raises(NotImplementedError, match=r"^multinomial: generator= is not supported"):
        lm.multinomial(g.input("p", (3,)), 1, generator=torch.Generator())


@pytest.mark.parametrize("replacement", [False, True])
def test_multinomial_checks_run_time_weights(replacement):
    g = lm.Graph()
    p = g.input("p", (2, 3))
    f = lm.compile([lm.multinomial(p, 2, replacement)])
    assert f(p=np.array([[1, 1, 0], [0, 2, 3]], np.float32))[0].shape == (2, 2)
    with pytest.raises(RuntimeError, match=r"^multinomial: probability tensor contains either inf, nan or element "
                                           r"< 0 \(2 of them\)"):
        f(p=np.array([[1, -1, 1], [math.nan, 1, 1]], np.float32))
    with pytest.raises(RuntimeError, match=r"^multinomial: invalid multinomial distribution \(sum of probabilities "
                                           r"<= 0\) in 1 row"):
        f(p=np.array([[1, 1, 1], [0, 0, 0]], np.float32))
    if not replacement:
        with pytest.raises(RuntimeError, match=r"^multinomial: cannot sample 2 without replacement from fewer"):
            f(p=np.array([[1, 1, 1], [0, 0, 3]], np.float32))
    else:
        assert (f(p=np.array([[1, 1, 1], [0, 0, 3]], np.float32))[0][1] == 2).all()


# ---------------------------------------------------------------------------------------- in-place fills

M = 200_000


def _filled(dtype, fill, seed=17, n=M):
    """``fill(x)`` of a fresh ``(n,)`` tensor ``x`` of ``dtype``, run once: its values (float64), the
    handle ``fill`` returned and ``x``."""
    lm.manual_seed(seed)
    g = lm.Graph()
    x = g.input("x", (n,), dtype=dtype)
    out = fill(x)
    assert out is x and (x.dtype, x.shape) == (dtype, (n,))
    v = _run([x], x=np.zeros(n, dtype.np))[0]
    assert v.dtype == dtype.np
    return np.asarray(v, np.float64)


@pytest.mark.parametrize("dtype", [lm.float32, lm.float64])
@pytest.mark.parametrize("name, args, cdf", [
    ("normal_", (), _normal_cdf),
    ("normal_", (2.0, 3.0), lambda v: _normal_cdf((v - 2) / 3)),
    ("uniform_", (), lambda v: np.clip(v, 0, 1)),
    ("uniform_", (-1.0, 4.0), lambda v: np.clip((v + 1) / 5, 0, 1)),
    ("exponential_", (), lambda v: 1 - np.exp(-np.maximum(v, 0))),
    ("exponential_", (2.5,), lambda v: 1 - np.exp(-2.5 * np.maximum(v, 0))),
    ("cauchy_", (), lambda v: 0.5 + np.arctan(v) / math.pi),
    ("cauchy_", (1.0, 2.0), lambda v: 0.5 + np.arctan((v - 1) / 2) / math.pi),
    ("log_normal_", (), lambda v: _normal_cdf((np.log(np.maximum(v, 1e-300)) - 1) / 2)),
    ("log_normal_", (0.0, 0.5), lambda v: _normal_cdf(np.log(np.maximum(v, 1e-300)) / 0.5)),
])
def test_continuous_fills_follow_their_distribution(dtype, name, args, cdf):
    v = _filled(dtype, lambda x: getattr(x, name)(*args))
    assert np.isfinite(v).all()
    assert _ks(v, cdf) < _ks_bound(M), name
    if name == "uniform_":
        lo, hi = args or (0.0, 1.0)
        assert lo <= v.min() and v.max() < hi
    if name in ("exponential_", "log_normal_"):
        assert v.min() >= 0


@pytest.mark.parametrize("dtype", [lm.float16, lm.bfloat16])
@pytest.mark.parametrize("name, args, mean", [
    ("normal_", (1.0, 2.0), 1.0), ("uniform_", (2.0, 4.0), 3.0), ("exponential_", (0.5,), 2.0),
    ("log_normal_", (0.0, 0.25), math.exp(0.25**2 / 2)), ("bernoulli_", (0.25,), 0.25), ("random_", (7,), 3.0),
    ("geometric_", (0.5,), 2.0), ("cauchy_", (), None),
])
def test_fills_of_half_precision_tensors(dtype, name, args, mean):
    """Computed in float32 and rounded once to the tensor's dtype (as torch's half kernels)."""
    v = _filled(dtype, lambda x: getattr(x, name)(*args), n=50_000)
    t = getattr(torch.zeros(3, dtype={lm.float16: torch.float16, lm.bfloat16: torch.bfloat16}[dtype]), name)(*args)
    assert t.dtype == {lm.float16: torch.float16, lm.bfloat16: torch.bfloat16}[dtype]
    if mean is None:
        assert abs(np.median(v)) < 0.05
    else:
        assert abs(v.mean() - mean) < 0.05 * max(1, mean), (name, v.mean())


@pytest.mark.parametrize("dtype", [lm.int32, lm.float32, lm.float64])
def test_geometric_fill(dtype):
    """``P(k) = (1 - p)**(k - 1) p`` for ``k = 1, 2, ...`` (chi-square over 1..20 and the rest)."""
    p = 0.3
    v = _filled(dtype, lambda x: x.geometric_(p)).astype(np.int64)
    assert v.min() >= 1 and (v == np.round(v)).all()
    counts = np.bincount(np.minimum(v, 21))[1:]
    probs = np.array([(1 - p) ** (k - 1) * p for k in range(1, 21)] + [(1 - p) ** 20])
    assert _chi2(counts, probs) < _chi2_bound(21)


@pytest.mark.parametrize("dtype, args, low, high", [
    (lm.int32, (), 0, 2**31 - 1), (lm.float32, (), 0, 2**24), (lm.float64, (), 0, 2**53), (lm.bool, (), 0, 1),
    (lm.int32, (10,), 0, 9), (lm.float32, (-3, 3), -3, 2), (lm.int32, (5, None), 5, 2**31 - 1),
    (lm.float16, (), 0, 2**11), (lm.int32, (-7, -6), -7, -7),
])
def test_random_fill_ranges_as_torch(dtype, args, low, high):
    """torch's forms: ``random_()`` (0 to the dtype's largest exact integer), ``random_(to)``,
    ``random_(from, to)``, ``random_(from, None)``; every value ``low..high``, uniform."""
    v = _filled(dtype, lambda x: x.random_(*args)).astype(np.int64)
    assert v.min() >= low and v.max() <= high
    span = high - low + 1
    if span <= 16:
        counts = np.bincount(v - low, minlength=span)
        assert _chi2(counts, np.full(span, 1 / span)) < _chi2_bound(span)
    else:
        assert abs((v.mean() - low) / (span - 1) - 0.5) < 0.01
    tt = {lm.int32: torch.int32, lm.float32: torch.float32, lm.float64: torch.float64, lm.bool: torch.bool,
          lm.float16: torch.float16}[dtype]
    t = torch.zeros(100_000, dtype=tt).random_(*args).double()
    assert low <= t.min() and t.max() <= high  # (torch's range is the same)


@pytest.mark.parametrize("dtype", [lm.float32, lm.int32, lm.bool])
def test_bernoulli_fill_with_a_number_or_tensor_p(dtype):
    lm.manual_seed(18)
    rows = 50_000
    g = lm.Graph()
    x = g.input("x", (rows, 3), dtype=dtype)
    p = g.input("p", (3,))
    a = x.clone().bernoulli_()
    b = x.clone().bernoulli_(p)
    assert (a.dtype, b.dtype, b.shape) == (dtype, dtype, (rows, 3))
    va, vb = _run([a, b], x=np.zeros((rows, 3), dtype.np), p=np.array([0.0, 0.2, 1.0], np.float32))
    va, vb = np.asarray(va, np.float64), np.asarray(vb, np.float64)
    assert set(np.unique(va)) == {0, 1} and abs(va.mean() - 0.5) < 0.01
    assert vb[:, 0].sum() == 0 and vb[:, 2].sum() == rows and abs(vb[:, 1].mean() - 0.2) < 0.01
    assert len({tuple(r) for r in vb[:20, 1:2].tolist()}) == 2  # a draw per row, not one broadcast


@pytest.mark.parametrize("u, want_exp, want_geo", [
    (0.0, 0.0, 1), (U_MAX, 48 * math.log(2), math.floor(48 * math.log(2) / -math.log1p(-0.3)) + 1),
])
def test_fills_at_the_extreme_uniforms(u, want_exp, want_geo):
    """Exponential and geometric draws at the 48-bit uniform's ends (``1 - u`` from 1 down to
    ``2**-48``); Cauchy's stay finite and keep the sign of ``u - 1/2``."""
    for dtype in (lm.float32, lm.float64):
        g = lm.Graph()
        x = g.input("x", (2,), dtype=dtype)
        _pinned_uniforms(g, u, u, u, u, u, u)
        e, geo, c = (x.clone().exponential_(), x.clone().geometric_(0.3), x.clone().cauchy_())
        ve, vg, vc = _run([e, geo, c], x=np.zeros(2, dtype.np))
        np.testing.assert_allclose(ve, want_exp, rtol=1e-6)
        np.testing.assert_array_equal(vg, want_geo)
        assert np.isfinite(vc).all() and (np.sign(vc) == (1 if u > 0.5 else -1)).all() and (np.abs(vc) > 1e13).all()


def test_fills_draw_afresh_on_every_call_and_rebind_the_handle():
    lm.manual_seed(19)
    g = lm.Graph()
    x = g.input("x", (64,)) * 1
    old, view = x.node, x[:4]
    assert x.normal_() is x and x.node is not old
    f = lm.compile([x, view])
    (a, va), (b, _) = f(x=np.ones(64, np.float32)), f(x=np.ones(64, np.float32))
    assert not np.array_equal(a, b) and abs(a.mean()) < 0.6 and abs(b.mean()) < 0.6
    np.testing.assert_array_equal(va, 1)  # a view taken before keeps the old values, as after x[i] = v


def test_fills_of_a_parameter_outside_a_graph_change_it_now():
    """torch's ``with torch.no_grad(): w.normal_(0, 0.02)`` (nn.init's way); inside a graph, refused."""
    lm.manual_seed(20)
    w = lm.nn.Parameter(np.zeros(20_000, np.float32))
    assert w.normal_(0, 0.02) is w
    assert abs(w.data.std() - 0.02) < 0.001 and abs(w.data.mean()) < 0.001
    w.uniform_(-1, 1)
    assert w.data.min() >= -1 and w.data.max() < 1 and abs(w.data.mean()) < 0.03
    noisy = Noisy()
    with pytest.raises(lm.frontend.eager.EagerOnlyError, match=r"^normal_: Parameter .* is read into a graph here.* "
                                                                 r"draw noise of its shape \(lm.randn_like\(w\)"):
        noisy(lm.Graph().input("x", (3,)))
    np.testing.assert_array_equal(noisy.w.data, 1)


class Noisy(lm.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = lm.nn.Parameter(np.ones(3, np.float32))

    def forward(self, x):
        return x * self.w.normal_()


@pytest.mark.parametrize("name, args, dtype, error, match", [
    ("normal_", (0.0, -1.0), lm.float32, ValueError, r"^normal_: expects std >= 0, got std=-1.0"),
    ("normal_", (), lm.int32, TypeError, r"^normal_: needs a float tensor \(as torch's: a continuous distribution\), "
                                         r"got int32"),
    ("normal_", ("1",), lm.float32, TypeError, r"^normal_: mean must be a number, got str"),
    ("uniform_", (2.0, 1.0), lm.float32, ValueError, r"^uniform_: expects a \[from, to\) range, got from=2.0 > "
                                                     r"to=1.0"),
    ("uniform_", (), lm.int32, TypeError, r"^uniform_: needs a float tensor"),
    ("uniform_", (0.0, math.inf), lm.float32, ValueError, r"^uniform_: to=inf is out of bounds for float32"),
    ("uniform_", (0.0, 1e5), lm.float16, ValueError, r"^uniform_: to=100000.0 is out of bounds for float16"),
    ("exponential_", (0.0,), lm.float32, ValueError, r"^exponential_: expects lambd > 0, got lambd=0.0"),
    ("exponential_", (-1.0,), lm.float32, ValueError, r"^exponential_: expects lambd > 0"),
    ("exponential_", (), lm.int32, TypeError, r"^exponential_: needs a float tensor"),
    ("bernoulli_", (1.5,), lm.float32, ValueError, r"^bernoulli_: expects p in \[0, 1\], got p=1.5"),
    ("bernoulli_", (-0.5,), lm.int32, ValueError, r"^bernoulli_: expects p in \[0, 1\], got p=-0.5"),
    ("random_", (5, 2), lm.float32, ValueError, r"^random_: expects from < to, got from=5, to=2"),
    ("random_", (5, 5), lm.int32, ValueError, r"^random_: expects from < to, got from=5, to=5"),
    ("random_", (5,), lm.bool, ValueError, r"^random_: randint_like: the range \[0, 5\) does not fit in bool"),
    ("random_", (2.5,), lm.float32, TypeError, r"^random_: to must be an int, got float 2.5"),
    ("geometric_", (0.0,), lm.float32, ValueError, r"^geometric_: expects p in \(0, 1\), got p=0.0"),
    ("geometric_", (1.0,), lm.int32, ValueError, r"^geometric_: expects p in \(0, 1\), got p=1.0"),
    ("geometric_", (0.5,), lm.bool, TypeError, r"^geometric_: is not defined for bool tensors"),
    ("cauchy_", (0.0, 0.0), lm.float32, ValueError, r"^cauchy_: expects sigma > 0, got sigma=0.0"),
    ("cauchy_", (), lm.int32, TypeError, r"^cauchy_: needs a float tensor"),
    ("log_normal_", (1.0, 0.0), lm.float32, ValueError, r"^log_normal_: expects std > 0, got std=0.0"),
    ("log_normal_", (), lm.int32, TypeError, r"^log_normal_: needs a float tensor"),
])
def test_fills_refuse_as_torch(name, args, dtype, error, match):
    x = lm.Graph().input("x", (3,), dtype=dtype)
    with pytest.raises(error, match=match):
        getattr(x, name)(*args)
    tt = {lm.float32: torch.float32, lm.int32: torch.int32, lm.bool: torch.bool, lm.float16: torch.float16}[dtype]
    with pytest.raises((RuntimeError, NotImplementedError, TypeError)):
        getattr(torch.zeros(3, dtype=tt), name)(*args)


def test_fills_refuse_a_generator_and_a_bad_p_shape():
    g = lm.Graph()
    x = g.input("x", (3,))
    with pytest.raises(NotImplementedError, match=r"^normal_: generator= is not supported"):
        x.normal_(generator=torch.Generator())
    with pytest.raises(ValueError, match=r"^bernoulli_: p of shape \(4,\) does not broadcast to the tensor's shape "
                                         r"\(3,\)"):
        x.bernoulli_(g.input("p", (4,)))
    with pytest.raises(RuntimeError):
        torch.zeros(3).bernoulli_(torch.zeros(4))


def test_every_fill_is_torchs_and_declared_for_type_checkers():
    text = (Path(lm.__file__).parent / "frontend" / "tensor.py").read_text()
    assert sorted(re.findall(r"(\w+_): _RandomFill\b", text)) == sorted(RANDOM)
    assert not set(RANDOM) & set(INPLACE)
    for name in RANDOM:
        assert hasattr(torch.Tensor, name) and callable(getattr(lm.GraphTensor, name)), name
        assert callable(getattr(lm.nn.Parameter, name)), name


@pytest.mark.parametrize("name, args", [
    ("randn_like", ()), ("randint_like", (5,)), ("bernoulli", ()), ("normal", (1.0,)), ("multinomial", (1,)),
])
def test_generator_is_refused_by_name(name, args):
    """torch's ``generator=`` keyword is taken by every sampler, and refused unless None: a graph draws
    from its own generator (``lm.manual_seed``), which a torch.Generator cannot reach."""
    x = lm.Graph().input("x", (3,))
    with pytest.raises(NotImplementedError, match=rf"^{name}: generator= is not supported \(got Generator"):
        getattr(lm, name)(x, *args, generator=torch.Generator())
    assert getattr(lm, name)(x, *args, generator=None).ndim == 1
    assert getattr(torch, name)(torch.full((3,), 0.5), *args, generator=torch.Generator()).ndim == 1
    with pytest.raises(NotImplementedError, match=r"^uniform_: generator= is not supported"):
        x.uniform_(generator=torch.Generator())


def test_fills_with_degenerate_parameters():
    """``uniform_(a, a)`` is ``a``, ``normal_(m, 0)`` is ``m``, ``exponential_(inf)`` is 0 (torch allows
    each); written out, not read from torch."""
    g = lm.Graph()
    x = g.input("x", (4,))
    got = _run([x.clone().uniform_(1.5, 1.5), x.clone().normal_(3.0, 0.0), x.clone().exponential_(math.inf)],
               x=np.zeros(4, np.float32))
    for v, want in zip(got, (1.5, 3.0, 0.0)):
        np.testing.assert_array_equal(v, want)
