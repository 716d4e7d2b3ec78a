"""lm.randn_like, lm.randint_like, lm.bernoulli / Tensor.bernoulli and lm.normal (ops/random.py).

Random streams differ from torch's, so values are checked as distributions: seeded draws of many
samples against tolerances a correct sampler meets with overwhelming probability (several standard
errors, or a Kolmogorov-Smirnov / chi-square bound at a tail probability far below 1e-6). The extreme
uniforms (0 and the largest below 1) are fed in deterministically to check the ends of the ranges.
torch is the reference for dtypes, argument forms, errors and gradients.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import luminal as lm
from luminal import train

N = 200_000
U_MAX = 1 - 2.0**-24  # the largest float32 uniform Graph.rand draws


def _run(outs, **inputs):
    return lm.compile(outs)(**inputs)


def _ks_normal(v: np.ndarray) -> float:
    """The Kolmogorov-Smirnov statistic of samples ``v`` against the standard normal CDF."""
    v = np.sort(np.asarray(v, np.float64).ravel())
    cdf = np.array([0.5 * (1 + math.erf(x / math.sqrt(2))) for x in v])
    i = np.arange(1, len(v) + 1)
    return float(max((i / len(v) - cdf).max(), (cdf - (i - 1) / len(v)).max()))


def _fixed_uniforms(g: lm.Graph, *values: float):
    """Make ``g.rand`` return constant uniforms, one per call, in turn: the extreme draws."""
    queue = list(values)
    g.rand = lambda shape: g.constant(np.full(tuple(shape), queue.pop(0), np.float32))


# ---------------------------------------------------------------------------------------------------- randn


@pytest.mark.parametrize("dtype", [lm.float32, lm.float64, lm.float16, lm.bfloat16])
def test_randn_like_is_standard_normal(dtype):
    lm.manual_seed(0)
    g = lm.Graph()
    x = g.input("x", (N,), dtype=dtype)
    z = lm.randn_like(x)
    assert (z.dtype, z.shape) == (dtype, (N,))
    v = np.asarray(_run([z], x=np.zeros(N, dtype.np))[0], np.float64)
    assert np.isfinite(v).all() and np.abs(v).max() <= math.sqrt(-2 * math.log(2.0**-48)) + 0.01
    # standard errors: mean 1/sqrt(N) = 0.0022, variance sqrt(2/N) = 0.0032; KS at p=1e-9: 0.0072
    assert abs(v.mean()) < 0.015 and abs(v.var() - 1) < 0.025
    assert _ks_normal(v) < 0.01


def test_randn_like_dtypes_as_torch():
    g = lm.Graph()
    x, i = g.input("x", (3,), dtype=lm.float16), g.input("i", (3,), dtype=lm.int32)
    assert lm.randn_like(x).dtype == lm.float16 and lm.randn_like(x, lm.float64).dtype == lm.float64
    assert lm.randn_like(i, dtype=lm.float32).dtype == lm.float32
    assert torch.randn_like(torch.zeros(3, dtype=torch.float16)).dtype == torch.float16
    with pytest.raises(TypeError, match=r"^randn_like: needs a float dtype .*int32"):
        lm.randn_like(i)
    with pytest.raises(NotImplementedError):
        torch.randn_like(torch.zeros(3, dtype=torch.int32))


@pytest.mark.parametrize("hi, lo, u2, want", [
    (0.0, 0.0, 0.25, 0.0),  # log(1 - 0) = 0
    (U_MAX, U_MAX, 0.0, math.sqrt(-2 * math.log(2.0**-48))),  # 1 - u1 = 2**-48: finite, the largest radius
    (U_MAX, U_MAX, 0.5, -math.sqrt(-2 * math.log(2.0**-48))),
    (U_MAX, 0.0, 0.0, math.sqrt(-2 * math.log(2.0**-24))),  # the largest radius of a 24-bit uniform
    (0.5, 0.0, 0.125, math.sqrt(-2 * math.log(0.5)) * math.cos(math.pi / 4)),
])
def test_randn_box_muller_at_the_extreme_uniforms(hi, lo, u2, want):
    """The radius's uniform is 48 bits (``hi + lo * 2**-24``), so the values reach 8.16 sigma."""
    for dtype in (lm.float32, lm.float64):
        g = lm.Graph()
        x = g.input("x", (2,), dtype=dtype)
        _fixed_uniforms(g, hi, lo, u2)
        v = _run([lm.randn_like(x)], x=np.zeros(2, dtype.np))[0]
        np.testing.assert_allclose(v, [want, want], rtol=1e-5, atol=1e-6)


def test_fresh_draws_and_reproducible_after_manual_seed():
    def draws(seed):
        lm.manual_seed(seed)
        g = lm.Graph()
        x = g.input("x", (64,))
        f = lm.compile([lm.randn_like(x), lm.randint_like(x, 1000), lm.bernoulli(lm.full_like(x, 0.5)),
                        lm.normal(x, 1.0)])
        zeros = np.zeros(64, np.float32)
        return f(x=zeros), f(x=zeros)

    (a, b), (c, d) = draws(7), draws(7)
    for first, second, again in zip(a, b, c):
        assert not np.array_equal(first, second)  # a new draw on every call
        np.testing.assert_array_equal(first, again)  # the same stream after the same seed
    for second, again in zip(b, d):
        np.testing.assert_array_equal(second, again)
    assert not np.array_equal(draws(8)[0][0], a[0])


def test_two_calls_draw_independent_noise():
    lm.manual_seed(1)
    g = lm.Graph()
    x = g.input("x", (N,))
    a, b = _run([lm.randn_like(x), lm.randn_like(x)], x=np.zeros(N, np.float32))
    assert abs(np.corrcoef(a, b)[0, 1]) < 0.015


def test_symbolic_shapes():
    lm.manual_seed(2)
    g = lm.Graph()
    x = g.input("x", ("n", 4))
    mean = g.input("m", ("n", 1))
    outs = [lm.randn_like(x), lm.randint_like(x, 5, 9), x.bernoulli(0.5), lm.normal(mean, x.abs() + 1)]
    f = lm.compile(outs)
    for n in (3, 5000):
        res = f(x=np.zeros((n, 4), np.float32), m=np.full((n, 1), 10, np.float32))
        assert [r.shape for r in res] == [(n, 4)] * 4
    assert set(np.unique(res[1])) == {5, 6, 7, 8}
    assert abs(res[3].mean() - 10) < 0.1


def test_zero_dim_and_empty_tensors():
    g = lm.Graph()
    s, e = g.input("s", ()), g.input("e", (0, 3))
    outs = [lm.randn_like(s), lm.randint_like(s, 4), lm.bernoulli(s), lm.normal(s, s), lm.randn_like(e),
            lm.randint_like(e, 4), lm.bernoulli(e), lm.normal(e, e)]
    res = _run(outs, s=np.array(0.5, np.float32), e=np.zeros((0, 3), np.float32))
    assert [r.shape for r in res] == [()] * 4 + [(0, 3)] * 4


# -------------------------------------------------------------------------------------------------- randint


@pytest.mark.parametrize("args, kwargs, low, high", [
    ((10,), {}, 0, 10), ((3, 13), {}, 3, 13), ((-5, 5), {}, -5, 5), ((), {"low": 2, "high": 12}, 2, 12),
    ((), {"high": 10}, 0, 10), ((np.int64(7),), {}, 0, 7), ((0, 2), {}, 0, 2), ((4, 5), {}, 4, 5),
])
def test_randint_like_is_uniform_on_the_range(args, kwargs, low, high):
    lm.manual_seed(3)
    g = lm.Graph()
    x = g.input("x", (N,), dtype=lm.int32)
    r = lm.randint_like(x, *args, **kwargs)
    assert r.dtype == lm.int32
    v = _run([r], x=np.zeros(N, np.int32))[0]
    counts = np.bincount(v - low, minlength=high - low) if v.min() >= low else None
    assert counts is not None and v.max() < high and len(counts) == high - low  # none outside [low, high)
    assert (counts > 0).all()  # every value, the largest (high - 1) included
    want = N / (high - low)
    chi2 = ((counts - want) ** 2 / want).sum()
    assert chi2 < high - low - 1 + 60  # (9 degrees of freedom: P(chi2 > 69) < 1e-10)


def test_randint_like_wide_ranges_are_unbiased():
    """Ranges far past float32's 24 bits (floor(u * n) with one uniform would skip most values and
    lean on some): 48 random bits, so the low bits are uniform too."""
    lm.manual_seed(4)
    g = lm.Graph()
    x = g.input("x", (N,), dtype=lm.int32)
    high = 2**31 - 1
    v = _run([lm.randint_like(x, -2**31, high)], x=np.zeros(N, np.int32))[0].astype(np.int64)
    assert v.min() >= -2**31 and v.max() < high
    span = 2.0**32 - 1
    assert abs((v.mean() + 2**31) / span - 0.5) < 0.005  # (standard error 0.00065)
    for bits in (v & 1, (v >> 7) & 1):  # low bits a 24-bit uniform could not fill
        assert abs(bits.mean() - 0.5) < 0.01
    assert len(np.unique(v)) > 0.99 * N


@pytest.mark.parametrize("low, high", [(0, 3), (-7, 1000), (0, 2**24 + 1), (-2**31, 2**31 - 1), (0, 2**31)])
def test_randint_like_ends_of_the_range(low, high):
    """The largest uniform gives ``high - 1`` (never ``high``, whatever the rounding of u * n), zero
    gives ``low``."""
    for u, want in ((U_MAX, high - 1), (0.0, low)):
        g = lm.Graph()
        x = g.input("x", (2,), dtype=lm.float64)
        _fixed_uniforms(g, u, u)
        got = _run([lm.randint_like(x, low, high)], x=np.zeros(2))[0]
        np.testing.assert_array_equal(got, [want, want])


def test_randint_like_dtypes_as_torch():
    g = lm.Graph()
    x, i, b = g.input("x", (N,)), g.input("i", (3,), dtype=lm.int32), g.input("b", (3,), dtype=lm.bool)
    assert lm.randint_like(x, 5).dtype == lm.float32 and torch.randint_like(torch.zeros(3), 5).dtype == torch.float32
    assert lm.randint_like(i, 5, dtype=lm.float16).dtype == lm.float16
    assert lm.randint_like(b, 2).dtype == lm.bool and torch.randint_like(torch.zeros(3, dtype=torch.bool), 2).dtype \
        == torch.bool
    lm.manual_seed(5)
    f, h, t = _run([lm.randint_like(x, -2048, 2049, dtype=lm.float16), lm.randint_like(x, 2, dtype=lm.bool),
                    lm.randint_like(x, 2**24 - 10, 2**24 + 1)], x=np.zeros(N, np.float32))
    assert f.dtype == np.float16 and f.min() >= -2048 and f.max() <= 2048 and (f == np.round(f)).all()
    assert h.dtype == np.bool_ and 0.48 < h.mean() < 0.52
    assert set(np.unique(t).tolist()) == set(range(2**24 - 10, 2**24 + 1))  # every float32 integer, exact


@pytest.mark.parametrize("args, kwargs, error, match", [
    ((3, 3), {}, ValueError, r"^randint_like: expects low < high, got low=3, high=3"),
    ((10, 3), {}, ValueError, r"^randint_like: expects low < high, got low=10, high=3"),
    ((0,), {}, ValueError, r"^randint_like: expects low < high, got low=0, high=0"),
    ((10.5,), {}, TypeError, r"^randint_like: high must be an int, got float 10.5"),
    ((True,), {}, TypeError, r"^randint_like: high must be an int, got bool"),
    ((2**31 + 1,), {}, ValueError, r"^randint_like: the range \[0, 2147483649\) does not fit in int32"),
    ((-2**31 - 1, 0), {}, ValueError, r"does not fit in int32"),
    ((2**11 + 2,), {"dtype": lm.float16}, ValueError, r"does not fit in float16, whose integers are exact from "
                                                       r"-2048 to 2048"),
    ((3,), {"dtype": lm.bool}, ValueError, r"does not fit in bool"),
])
def test_randint_like_refuses_bad_ranges(args, kwargs, error, match):
    x = lm.Graph().input("x", (3,), dtype=lm.int32)
    with pytest.raises(error, match=match):
        lm.randint_like(x, *args, **kwargs)
    t = torch.zeros(3, dtype=torch.int32)
    tkw = {"dtype": {lm.float16: torch.float16, lm.bool: torch.bool}[kwargs["dtype"]]} if kwargs else {}
    if args != (2**11 + 2,):  # (torch only warns there, that it will be an error)
        with pytest.raises((RuntimeError, TypeError)):
            torch.randint_like(t, *args, **tkw)


def test_randint_like_refuses_a_tensor_bound():
    g = lm.Graph()
    x = g.input("x", (3,))
    with pytest.raises(TypeError, match=r"^randint_like: high must be an int, got a tensor \(its value is known "
                                        r"only when the program runs\)"):
        lm.randint_like(x, g.constant(5))


# ------------------------------------------------------------------------------------------------ bernoulli


@pytest.mark.parametrize("dtype", [lm.float32, lm.float64, lm.float16, lm.bfloat16])
def test_bernoulli_frequencies_per_probability(dtype):
    lm.manual_seed(6)
    ps = np.array([0.0, 0.001, 0.1, 0.5, 0.9, 1.0])
    rows = 50_000
    g = lm.Graph()
    p = g.input("p", (rows, len(ps)), dtype=dtype)
    out = lm.bernoulli(p)
    assert (out.dtype, out.shape) == (dtype, (rows, len(ps)))
    stored = lm.core.dtype.to_storage(np.broadcast_to(ps, (rows, len(ps))), dtype)
    v = np.asarray(_run([out], p=stored)[0], np.float64)
    assert set(np.unique(v)) <= {0.0, 1.0}
    assert v[:, 0].sum() == 0 and v[:, -1].sum() == rows  # p = 0 never, p = 1 always
    exact = np.asarray(stored[0], np.float64)
    for k in range(1, len(ps) - 1):
        se = math.sqrt(exact[k] * (1 - exact[k]) / rows)
        assert abs(v[:, k].mean() - exact[k]) < 6 * se + 1e-4, (ps[k], v[:, k].mean())
    assert torch.bernoulli(torch.full((2,), 0.5, dtype=torch.float16)).dtype == torch.float16


def test_bernoulli_with_a_number_p_keeps_the_dtype():
    lm.manual_seed(7)
    g = lm.Graph()
    i, x = g.input("i", (N,), dtype=lm.int32), g.input("x", (N,))
    a, b, c, d = i.bernoulli(0.25), lm.bernoulli(x, 0.75), lm.bernoulli(x, 0), x.bernoulli(p=1.0)
    assert (a.dtype, b.dtype) == (lm.int32, lm.float32)
    assert torch.bernoulli(torch.zeros(3, dtype=torch.int32), 0.25).dtype == torch.int32
    va, vb, vc, vd = _run([a, b, c, d], i=np.zeros(N, np.int32), x=np.zeros(N, np.float32))
    assert set(np.unique(va)) == {0, 1} and abs(va.mean() - 0.25) < 0.006 and abs(vb.mean() - 0.75) < 0.006
    assert vc.sum() == 0 and vd.sum() == N


def test_bernoulli_refuses_bad_probabilities():
    g = lm.Graph()
    x, i = g.input("x", (3,)), g.input("i", (3,), dtype=lm.int32)
    with pytest.raises(ValueError, match=r"^bernoulli: expects p in \[0, 1\], got p=1.3"):
        x.bernoulli(1.3)
    with pytest.raises(RuntimeError):
        torch.zeros(3).bernoulli(1.3)
    with pytest.raises(TypeError, match=r"^bernoulli: needs float probabilities .*int32"):
        lm.bernoulli(i)
    with pytest.raises(NotImplementedError):
        torch.bernoulli(torch.zeros(3, dtype=torch.int64))
    for bad in ([-0.1, 0.5], [1.1, 0.5], [math.nan, 0.5]):
        with pytest.raises(RuntimeError, match=r"^bernoulli: expects every probability in \[0, 1\], got"):
            lm.bernoulli(g.constant(np.array(bad, np.float32)))
        with pytest.raises(RuntimeError):
            torch.bernoulli(torch.tensor(bad))


@pytest.mark.parametrize("bad", [-0.1, 1.1, math.nan])
def test_bernoulli_checks_run_time_probabilities(bad):
    g = lm.Graph()
    p = g.input("p", (3,))
    f = lm.compile([lm.bernoulli(p)])
    assert set(f(p=np.array([0, 0.5, 1], np.float32))[0]) <= {0.0, 1.0}
    with pytest.raises(RuntimeError, match=r"^bernoulli: expects every probability in \[0, 1\]; 1 value\(s\) are not"):
        f(p=np.array([0.5, bad, 0.2], np.float32))


# --------------------------------------------------------------------------------------------------- normal


def test_normal_broadcasts_mean_and_std():
    lm.manual_seed(8)
    rows = 100_000
    g = lm.Graph()
    mean, std = g.input("mean", (rows, 1)), g.input("std", (1, 3))
    out = lm.normal(mean, std)
    assert out.shape == (rows, 3) and out.dtype == lm.float32
    assert torch.normal(torch.zeros(4, 1), torch.ones(1, 3)).shape == (4, 3)
    means = np.where(np.arange(rows) % 2, 5.0, -1.0).astype(np.float32)[:, None]
    v = np.asarray(_run([out], mean=means, std=np.array([[0.0, 1.0, 3.0]], np.float32))[0], np.float64)
    np.testing.assert_array_equal(v[:, 0], means[:, 0])  # std 0: the mean itself
    z = (v[:, 1:] - means) / np.array([1.0, 3.0])
    assert abs(z.mean()) < 0.02 and abs(z.var() - 1) < 0.03
    assert _ks_normal(z[:, 1]) < 0.01


def test_normal_number_forms_and_dtypes_as_torch():
    g = lm.Graph()
    m32, s64 = g.input("m", (3,)), g.input("s", (3,), dtype=lm.float64)
    h = g.input("h", (3,), dtype=lm.float16)
    cases = [((m32, s64), lm.float32, torch.float32), ((s64, m32), lm.float64, torch.float64),
             ((h, 2.0), lm.float16, torch.float16), ((1.0, h), lm.float16, torch.float16),
             ((m32,), lm.float32, torch.float32)]
    tt = {lm.float32: torch.float32, lm.float64: torch.float64, lm.float16: torch.float16}
    for args, want, twant in cases:
        assert lm.normal(*args).dtype == want
        targs = [torch.zeros(3, dtype=tt[a.dtype]) if isinstance(a, lm.GraphTensor) else a for a in args]
        assert torch.normal(*targs).dtype == twant
    lm.manual_seed(9)
    x = g.input("x", (N,), dtype=lm.float16)
    v = np.asarray(_run([lm.normal(x, 2.0)], x=np.full(N, 3, np.float16))[0], np.float64)
    assert abs(v.mean() - 3) < 0.03 and abs(v.std() - 2) < 0.03


def test_normal_refuses_bad_arguments():
    g = lm.Graph()
    m, i = g.input("m", (3,)), g.input("i", (3,), dtype=lm.int32)
    with pytest.raises(ValueError, match=r"^normal: expects std >= 0, got std=-1.0"):
        lm.normal(m, -1.0)
    with pytest.raises(RuntimeError):
        torch.normal(torch.zeros(3), -1.0)
    with pytest.raises(TypeError, match=r"^normal: needs mean or std to be a tensor"):
        lm.normal(1.0, 2.0)
    with pytest.raises(TypeError, match=r"^normal: needs float tensors \(as torch's\), got int32"):
        lm.normal(i, 1.0)
    with pytest.raises(TypeError, match=r"^normal: std must be a tensor or a number, got str"):
        lm.normal(m, "1")
    with pytest.raises(ValueError, match=r"^normal: "):
        lm.normal(m, g.input("s", (4,)))
    with pytest.raises(ValueError, match=r"^normal: operands belong to different graphs"):
        lm.normal(m, lm.Graph().input("s", (3,)))
    for bad in ([-1.0, 1, 1], [math.nan, 1, 1]):
        with pytest.raises(RuntimeError, match=r"^normal: expects every std >= 0, got"):
            lm.normal(m, g.constant(np.array(bad, np.float32)))
        with pytest.raises(RuntimeError):
            torch.normal(torch.zeros(3), torch.tensor(bad))
    v = _run([lm.normal(m, g.constant(np.array([math.inf, 1, 1], np.float32)))], m=np.zeros(3, np.float32))[0]
    assert np.isinf(v[0])  # an infinite std is allowed, as torch's


def test_normal_checks_run_time_stds():
    g = lm.Graph()
    m, s = g.input("m", (3,)), g.input("s", (3,))
    f = lm.compile([lm.normal(m, s)])
    f(m=np.zeros(3, np.float32), s=np.ones(3, np.float32))
    with pytest.raises(RuntimeError, match=r"^normal: expects every std >= 0; 2 value\(s\) are not"):
        f(m=np.zeros(3, np.float32), s=np.array([-1, math.nan, 1], np.float32))


# ------------------------------------------------------------------------------------------------ gradients


def _grads(loss, wrt):
    """train.grad's gradients, None where luminal reports no differentiable path (torch's are zero)."""
    out = []
    for t in wrt:
        try:
            out.append(train.grad(loss, t, allow_unused=True))
        except ValueError as e:
            assert "only through" in str(e)
            out.append(None)
    return out


def _zero_or_none(got, **inputs):
    if got is None:
        return
    np.testing.assert_array_equal(_run([got], **inputs)[0], 0)


def test_no_gradient_through_the_noise_as_torch():
    """torch's normal and bernoulli give zero gradients to mean, std and p (not the reparameterised
    ones); randn_like and randint_like do not read their tensor."""
    g = lm.Graph()
    mean, std, p = g.input("mean", (4,)), g.input("std", (4,)), g.input("p", (4,))
    loss = (lm.normal(mean, std) * 3).sum() + (lm.bernoulli(p) * 2).sum() + lm.randn_like(mean).sum() \
        + lm.randint_like(std, 5).sum()
    inputs = {"mean": np.zeros(4, np.float32), "std": np.ones(4, np.float32), "p": np.full(4, 0.5, np.float32)}
    for got in _grads(loss, [mean, std, p]):
        _zero_or_none(got, **inputs)
    tm, ts, tp = (torch.tensor(v, requires_grad=True) for v in inputs.values())
    tl = (torch.normal(tm, ts) * 3).sum() + (torch.bernoulli(tp) * 2).sum() + torch.randn_like(tm).sum() \
        + torch.randint_like(ts, 5).sum()
    for grad in torch.autograd.grad(tl, [tm, ts, tp]):
        assert (grad == 0).all()


def test_reparameterised_normal_has_torch_gradients():
    """A VAE's ``mean + std * randn_like(std)`` differentiates to 1 and the noise, as torch's."""
    lm.manual_seed(10)
    g = lm.Graph()
    mean, std = g.input("mean", (5,)), g.input("std", (5,))
    eps = lm.randn_like(std)
    loss = (mean + std * eps).sum()
    gm, gs = train.grad(loss, [mean, std])
    e, vm, vs = _run([eps, gm, gs], mean=np.zeros(5, np.float32), std=np.ones(5, np.float32))
    np.testing.assert_array_equal(vm, 1)
    np.testing.assert_allclose(vs, e, rtol=1e-6)
    tm, ts = torch.zeros(5, requires_grad=True), torch.ones(5, requires_grad=True)
    teps = torch.tensor(e)
    tg = torch.autograd.grad((tm + ts * teps).sum(), [tm, ts])
    np.testing.assert_allclose(vs, tg[1].numpy(), rtol=1e-6)
