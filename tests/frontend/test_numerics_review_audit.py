"""Review of the float64 transcendentals (``elementwise._log_parts``, ``_exp_reduced``, the ``_NARROW``
flag) and of lm.multinomial: the cases the first tests missed. Expected values are the mathematical
ones (mpmath at 40 digits), not torch's, where torch's formula cancels."""

from __future__ import annotations

import threading

import mpmath as mp
import numpy as np
import pytest

import luminal as lm
from luminal import train
from luminal.frontend.ops import elementwise


def _log_graph_size() -> int:
    g = lm.Graph()
    g.input("x", (3,), dtype=lm.float64).log()
    return len(g.nodes)


def test_narrow_flag_is_per_thread():
    """Graphs are built per thread (``frontend/building.py``): a float32 composition under way on one
    thread (``_wide``, which marks its float64 steps narrow) must not make a float64 log built on
    another take the plain formula (1.4 ulps) instead of the accurate one."""
    alone = _log_graph_size()
    inside, release = threading.Event(), threading.Event()

    @elementwise._wide
    def held(x):
        inside.set()
        release.wait(30)
        return x

    worker = threading.Thread(target=held, args=(lm.Graph().input("x", (2,)),))
    worker.start()
    try:
        assert inside.wait(30)
        assert _log_graph_size() == alone
    finally:
        release.set()
        worker.join()
    assert _log_graph_size() == alone


def test_narrow_flag_restored_after_an_error():
    """An exception inside a ``_wide`` composition leaves the flag as it was."""
    alone = _log_graph_size()

    @elementwise._wide
    def failing(x):
        raise RuntimeError("inside")

    with pytest.raises(RuntimeError, match="inside"):
        failing(lm.Graph().input("x", (2,)))
    assert _log_graph_size() == alone


def _draws(weights, num_samples, runs):
    g = lm.Graph()
    p = g.input("p", (len(weights),), dtype=lm.float64)
    f = lm.compile([lm.multinomial(p, num_samples)], backend="reference")
    return np.array([f(p=np.array(weights, np.float64))[0] for _ in range(runs)])


def test_multinomial_without_replacement_never_draws_a_zero_weight_beside_a_tiny_one():
    """The race's keys: ``E / p`` overflowed to inf for a weight below about 1e-307, tying it with the
    zero weights (inf too), and the tie went to the first index: ``[0, 1e-310, 1]`` drew category 0
    every time (torch draws 2 and 1)."""
    lm.manual_seed(30)
    got = _draws([0.0, 1e-310, 1.0], 2, 20)
    np.testing.assert_array_equal(got, [[2, 1]] * 20)


def test_multinomial_without_replacement_orders_tiny_weights_by_the_race():
    """Two equal tiny weights finish first each about half the time (the tie at inf always gave 0
    first): over 400 draws the count of 0 first is Binomial(400, 1/2), kept within 5.5 sigma."""
    lm.manual_seed(31)
    got = _draws([1e-310, 1e-310, 0.0], 2, 400)
    assert (np.sort(got, 1) == [0, 1]).all()
    assert abs((got[:, 0] == 0).sum() - 200) < 5.5 * 10


def _grad64(name, x):
    g = lm.Graph()
    t = g.input("x", (len(x),), dtype=lm.float64)
    return lm.compile([train.grad(getattr(t, name)().sum(), t)], backend="reference")(x=np.array(x, np.float64))[0]


@pytest.mark.parametrize("name, x, slope", [
    # torch's y + 1 keeps expm1's rounding near -1: 2e-8 off at -20, 0 from -37.4 on
    ("expm1", [-3.0, -20.0, -40.0, -700.0, 0.5, 700.0], mp.exp),
    # torch's 1 - y**2 keeps tanh's rounding near 1: 1.4e-8 off at 10, 0 from 19.1 on
    ("tanh", [0.3, -3.0, 10.0, -19.5, 25.0, -300.0], lambda v: 1 / mp.cosh(v) ** 2),
    # torch's 1 / (x ln 10): x ln 10 overflows from 7.8e307 on (0, where the slope is 2.4e-309 and up)
    ("log10", [0.25, 3.0, 1e300, 1e308, 1.7976931348623157e308], lambda v: 1 / (v * mp.log(10))),
])
def test_float64_slopes_are_the_mathematical_ones(name, x, slope):
    """The float64 paths' gradients where torch's formulas cancel or overflow: the derivative itself,
    to a few ulps (``exp(x)``; ``4 e / (1 + e)**2`` with ``e = exp(-2|x|)``; ``(1 / x) / ln 10``)."""
    with mp.workdps(40):
        want = [float(slope(mp.mpf(v))) for v in x]
    np.testing.assert_allclose(_grad64(name, x), want, rtol=1e-14, atol=0)


@pytest.mark.parametrize("name, x, curvature", [
    ("expm1", [-20.0, -1.0, 0.5], mp.exp),
    ("tanh", [0.0, 0.7, -4.0, 12.0], lambda v: -2 * mp.tanh(v) / mp.cosh(v) ** 2),
    ("log10", [0.5, 7.0], lambda v: -1 / (v * v * mp.log(10))),
])
def test_float64_second_derivatives(name, x, curvature):
    """train.grad of train.grad through the float64 slopes (their own chains differentiated)."""
    g = lm.Graph()
    t = g.input("x", (len(x),), dtype=lm.float64)
    first = train.grad(getattr(t, name)().sum(), t)
    got = lm.compile([train.grad(first.sum(), t)], backend="reference")(x=np.array(x, np.float64))[0]
    with mp.workdps(40):
        want = [float(curvature(mp.mpf(v))) for v in x]
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-300)


def test_multinomial_with_replacement_never_draws_a_zero_weight_however_the_sums_round():
    """cumsum adds in a tree's order, so the running sum at a zero weight can come out an ulp below
    the one before it; counting the sums at or below ``u * total`` then drew that zero weight for a
    ``u`` in the gap (found here from luminal's own running sums; one was [3693], of weight 0)."""
    n = 4096
    w = np.random.default_rng(0).random(n)
    w[::3] = 0
    g = lm.Graph()
    p = g.input("p", (n,), dtype=lm.float64)
    cdf = lm.compile([lm.cumsum(p, -1)], backend="reference")(p=w)[0]
    total = cdf.max()
    ks = {254499208070117}
    for j in np.nonzero((np.diff(cdf) < 0) & (w[1:] == 0))[0]:
        k = int(np.ceil(cdf[j + 1] / total * 2.0**48))
        ks |= {k - 1, k, k + 1}
    drawn = iter(range(2))
    g.rand = lambda shape: g.input(f"u{next(drawn)}", shape)  # (the two halves of the 48-bit uniform)
    f = lm.compile([lm.multinomial(p, 1, True)], backend="reference")
    for k in sorted(ks):
        hi, lo = divmod(k, 2**24)
        (got,) = f(p=w, u0=np.float32([hi / 2**24]), u1=np.float32([lo / 2**24]))
        assert w[got[0]] > 0, (k, got)


def test_float64_softplus_where_one_plus_exp_rounds_to_one():
    """``log(1 + v)`` with ``v = e**z`` below 2**-52 (z about -36 to -37.4), where ``1 + v`` rounds to 1:
    the value is ``v - v**2/2``, and ``v**2/2`` is up to 0.4 of an ulp there (it was dropped: 0.99
    ulps off at -36.5); within 0.75 ulps of mpmath, as the other float64 functions."""
    x = np.concatenate([np.linspace(-37.5, -35.5, 41), [-36.525561356687525]])
    g = lm.Graph()
    t = g.input("x", x.shape, dtype=lm.float64)
    got = lm.compile([lm.nn.functional.softplus(t)], backend="reference")(x=x)[0]
    with mp.workdps(40):
        for v, y in zip(x, got):
            want = mp.log1p(mp.exp(mp.mpf(float(v))))
            assert abs(mp.mpf(float(y)) - want) / float(np.spacing(float(want))) <= 0.75, v
