"""Random sampling beyond test_random_sampling.py (ops/random.py): the normal's tails past 5.77 sigma,
lm.multinomial, and the in-place random fills (``x.normal_()``, ``uniform_``, ...).

The streams differ from torch's, so draws are checked as distributions with fixed seeds and bounds a
correct sampler meets with overwhelming probability (tail probabilities below about 1e-6); torch is
the reference for shapes, dtypes, argument forms and errors.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import luminal as lm

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
