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
