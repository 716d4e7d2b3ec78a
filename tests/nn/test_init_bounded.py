"""``nn.init.trunc_normal_`` (bounded time whatever the bounds, the truncated normal's moments, its
argument checks), ``orthogonal_`` and ``dirac_``, against torch's and the closed forms."""

import math

import numpy as np
import pytest
import torch

from luminal import nn
from luminal.nn import init

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _truncated_moments(mean, std, a, b):
    """The mean and standard deviation of N(mean, std**2) restricted to [a, b] (closed form)."""
    al, be = (a - mean) / std, (b - mean) / std
    pdf = [math.exp(-x * x / 2) / math.sqrt(2 * math.pi) if math.isfinite(x) else 0.0 for x in (al, be)]
    z = 0.5 * (math.erfc(-be / math.sqrt(2)) - math.erfc(-al / math.sqrt(2)))
    if al > 0:  # (a tail: the mass as a difference of small numbers)
        z = 0.5 * (math.erfc(al / math.sqrt(2)) - math.erfc(be / math.sqrt(2)))
    t = [x * q if math.isfinite(x) else 0.0 for x, q in zip((al, be), pdf)]
    m = (pdf[0] - pdf[1]) / z
    var = 1 + (t[0] - t[1]) / z - m * m
    return mean + std * m, std * math.sqrt(var)


@pytest.mark.filterwarnings("ignore:mean is more than 2 std")  # (torch's, about its own method)
@pytest.mark.parametrize("mean,std,a,b", [
    (0.0, 1.0, -2.0, 2.0), (0.0, 0.02, -2.0, 2.0), (1.0, 2.0, 1.5, 1.7), (0.0, 1.0, 4.0, 5.0),
    (0.0, 1.0, 6.0, 7.0), (0.0, 1.0, -7.0, -6.0), (0.0, 1.0, 1.0, math.inf), (3.0, 2.0, 0.0, 1.0),
])
def test_trunc_normal_is_the_truncated_normal_in_bounded_time(mean, std, a, b):
    """The moments of 200k draws against the closed form, and torch's draws; a far tail (6 std: one normal
    draw in a billion lands there) took forever by redrawing (the draw now has no loop: it returns)."""
    w = init.trunc_normal_(np.empty(200_000), mean, std, a, b, generator=np.random.default_rng(0))
    assert w.min() >= a and w.max() <= b
    want_mean, want_std = _truncated_moments(mean, std, a, b)
    se = want_std / math.sqrt(w.size)
    assert abs(w.mean() - want_mean) < 5 * se + 1e-12
    assert abs(w.std() / want_std - 1) < 0.02
    if math.isfinite(b):  # (torch's draws: from a uniform on [a, b] in a tail, refused for an infinite b)
        torch.manual_seed(0)
        tw = torch.nn.init.trunc_normal_(torch.empty(20_000, dtype=torch.float64), mean, std, a, b)
        assert abs(tw.mean().item() - want_mean) < 5 * want_std / math.sqrt(tw.numel()) + 1e-12


def test_trunc_normal_beyond_double_precision_tails():
    """37 std out the tail's mass underflows a double; the draws stay in [a, b] and spread as the tail
    does (an exponential of rate a: mean excess about 1 / a), not all at a bound."""
    w = init.trunc_normal_(np.empty(100_000), 0.0, 1.0, 40.0, 41.0, generator=np.random.default_rng(0))
    assert w.min() >= 40 and w.max() <= 41 and abs((w.mean() - 40) * 40 - 1) < 0.02
    w = init.trunc_normal_(np.empty(100_000), 0.0, 1.0, -math.inf, -40.0, generator=np.random.default_rng(0))
    assert w.max() <= -40 and abs((w.mean() + 40) * 40 + 1) < 0.02


@pytest.mark.filterwarnings("ignore:mean is more than 2 std")
def test_trunc_normal_bounds_and_std_zero():
    with pytest.raises(RuntimeError, match="from=1 > to=-1"):
        torch.nn.init.trunc_normal_(torch.zeros(3), 0.0, 1.0, 1.0, -1.0)
    with pytest.raises(ValueError, match=r"trunc_normal_: expects the range \[a, b\] with a <= b, but found a=1.0 > "
                                         r"b=-1.0"):
        init.trunc_normal_(np.zeros(3), 0.0, 1.0, 1.0, -1.0)
    with pytest.raises(ValueError, match="trunc_normal_: std must be at least 0, got -1"):
        init.trunc_normal_(np.zeros(3), 0.0, -1.0)
    with pytest.raises(ZeroDivisionError):  # (torch: std=0 divides by it)
        torch.nn.init.trunc_normal_(torch.zeros(3), 5.0, 0.0, -2.0, 2.0)
    np.testing.assert_array_equal(init.trunc_normal_(np.zeros(3), 5.0, 0.0, -2.0, 2.0), [2, 2, 2])
    np.testing.assert_array_equal(init.trunc_normal_(np.zeros(3), 0.5, 0.0, -2.0, 2.0), [0.5] * 3)
    np.testing.assert_array_equal(init.trunc_normal_(np.zeros(3), 0.0, 1.0, 1.0, 1.0), [1, 1, 1])
    p = nn.Parameter(np.zeros((4, 4), np.float32))
    assert init.trunc_normal_(p, std=0.02) is p and np.abs(p.data).max() <= 2


@pytest.mark.parametrize("shape", [(3, 5), (5, 3), (4, 2, 3), (6, 6)])
def test_orthogonal_as_torchs(shape):
    p = nn.Parameter(np.zeros(shape, np.float32))
    assert init.orthogonal_(p, gain=2.0, generator=np.random.default_rng(0)) is p
    t = torch.nn.init.orthogonal_(torch.empty(shape), gain=2.0)
    for w in (p.data, t.numpy()):
        flat = w.reshape(shape[0], -1).astype(np.float64)
        gram = flat @ flat.T if flat.shape[0] <= flat.shape[1] else flat.T @ flat
        np.testing.assert_allclose(gram, 4 * np.eye(min(flat.shape)), atol=1e-5)
    with pytest.raises(ValueError, match="orthogonal_: only tensors with 2 or more dimensions"):
        init.orthogonal_(np.zeros(3))
    assert init.orthogonal_(np.zeros((0, 3))).shape == (0, 3)


def test_orthogonal_sign_fix_makes_it_uniform():
    """Without the sign fix QR's Q is not Haar-distributed (numpy's Householder QR makes R's diagonal
    negative-heavy); with it, the diagonal of a 2 x 2 Q has mean 0, as torch's."""
    rng = np.random.default_rng(1)
    diag = np.array([init.orthogonal_(np.zeros((2, 2)), generator=rng)[0, 0] for _ in range(4000)])
    assert abs(diag.mean()) < 0.05


@pytest.mark.parametrize("shape,groups", [((4, 2, 3), 2), ((4, 4, 3, 3), 1), ((2, 3, 3, 3, 3), 1),
                                          ((6, 2, 3, 3), 3), ((3, 5, 2, 2), 1)])
def test_dirac_as_torchs(shape, groups):
    p = nn.Parameter(np.full(shape, 7, np.float32))
    assert init.dirac_(p, groups) is p
    np.testing.assert_array_equal(p.data, torch.nn.init.dirac_(torch.empty(shape), groups).numpy())


def test_dirac_errors_as_torchs():
    both = [(lambda i: i.dirac_(np.zeros((2, 2)) if i is init else torch.zeros(2, 2)), "3, 4, or 5 dimensions"),
            (lambda i: i.dirac_(np.zeros((3, 2, 3)) if i is init else torch.zeros(3, 2, 3), 2), "divisible by groups")]
    for build, part in both:
        with pytest.raises(ValueError):
            build(torch.nn.init)
        with pytest.raises(ValueError, match=part):
            build(init)
