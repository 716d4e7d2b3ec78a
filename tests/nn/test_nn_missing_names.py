"""torch.nn names that ports of torch code reach for, against torch: ``nn.Softmax2d``,
``nn.ChannelShuffle`` / ``F.channel_shuffle`` / ``F.native_channel_shuffle``, the deprecated
``F.upsample_nearest`` / ``F.upsample_bilinear`` and ``nn.NLLLoss2d``, and ``F.gumbel_softmax`` (values
and gradients with torch's noise injected on both sides; the distribution of the in-graph noise and of
the hard samples' categories). Values, gradients, reprs, warnings and errors."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as TF
from parity import check, rand

import luminal as lm
import luminal.nn.functional as F
from luminal import nn, train
from luminal.nn.layers import gumbel

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _either(t):
    return (TF, torch.nn) if isinstance(t, torch.Tensor) else (F, nn)


def _weighted(y, w):
    """``y * w`` for a fixed array ``w``: a loss whose gradient is not zero through a softmax."""
    return y * (torch.from_numpy(w) if isinstance(y, torch.Tensor) else y.graph.constant(w))


# Softmax2d ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(2, 5, 3, 4), (4, 3, 2)])
def test_softmax2d_values_and_grads(backend, shape):
    w = rand(shape, seed=9)
    check(lambda t: _weighted(_either(t)[1].Softmax2d()(t), w), [rand(shape, low=-4, high=4)], backend=backend)


def test_softmax2d_float64_repr_and_no_state():
    check(lambda t: _either(t)[1].Softmax2d()(t), [rand((1, 6, 2, 2), seed=1, low=-30, high=30).astype(np.float64)])
    assert repr(nn.Softmax2d()) == repr(torch.nn.Softmax2d()) == "Softmax2d()"
    assert not list(nn.Softmax2d().state_dict())


@pytest.mark.parametrize("shape", [(3, 4), (1, 2, 3, 4, 5)])
def test_softmax2d_refuses_other_ranks_as_torch(shape):
    with pytest.raises(ValueError, match="expected input to be 3D or 4D"):
        torch.nn.Softmax2d()(torch.zeros(shape))
    with pytest.raises(ValueError, match=r"^Softmax2d: expected input of shape \(N, C, H, W\) or \(C, H, W\)"):
        nn.Softmax2d()(lm.Graph().input("x", shape))


# channel shuffle ---------------------------------------------------------------------------------


@pytest.mark.parametrize("fn", ["channel_shuffle", "native_channel_shuffle"])
@pytest.mark.parametrize(("shape", "groups"), [((2, 6, 3), 3), ((2, 6, 3), 2), ((1, 8, 2, 3), 4), ((2, 4, 1, 2, 2), 2),
                                               ((2, 5, 3), 1), ((2, 5, 3), 5)])
def test_channel_shuffle_values_and_grads(fn, shape, groups):
    w = rand(shape, seed=3)
    check(lambda t: _weighted(getattr(_either(t)[0], fn)(t, groups), w), [rand(shape)])


def test_channel_shuffle_module_every_backend_ints_and_repr(backend):
    check(lambda t: _either(t)[1].ChannelShuffle(2)(t), [rand((2, 4, 2, 2))], backend=backend)
    check(lambda t: _either(t)[0].channel_shuffle(t, 3), [rand((2, 6, 2), lm.int32, low=-50, high=50)],
          backend=backend)
    assert repr(nn.ChannelShuffle(3)) == repr(torch.nn.ChannelShuffle(3)) == "ChannelShuffle(groups=3)"
    assert not list(nn.ChannelShuffle(3).state_dict())


def test_channel_shuffle_symbolic_batch_channels_and_spatial():
    a = rand((3, 6, 5))
    check(lambda t: _either(t)[0].channel_shuffle(t, 3), [a], shapes=[("B", 6, "L")])
    g = lm.Graph()
    c = lm.sym("c")
    x = g.input("x", ("B", 3 * c, "L"))
    y = F.channel_shuffle(x, 3)
    assert y.shape == x.shape
    got = lm.compile(y)(x=a)
    np.testing.assert_array_equal(got, TF.channel_shuffle(torch.from_numpy(a), 3).numpy())


@pytest.mark.parametrize(("shape", "groups", "kind", "match"), [
    ((2, 6, 3), 0, ValueError, "must be positive, got 0"),
    ((2, 6, 3), -1, ValueError, "must be positive, got -1"),
    ((2, 6, 3), 4, ValueError, r"divisible by groups: got 6 channels and 4 groups"),
    ((6, 3), 2, ValueError, r"more than 2 dims, got \(6, 3\)"),
    ((2, 6, 3), 2.0, TypeError, "groups must be an int, got float 2.0"),
])
def test_channel_shuffle_errors_as_torch(shape, groups, kind, match):
    if not isinstance(groups, float):  # (torch's own: a RuntimeError)
        with pytest.raises(RuntimeError):
            TF.channel_shuffle(torch.zeros(shape), groups)
    x = lm.Graph().input("x", shape)
    with pytest.raises(kind, match=r"^channel_shuffle: .*" + match):
        F.channel_shuffle(x, groups)
    with pytest.raises(kind, match=r"^ChannelShuffle: .*" + match):
        nn.ChannelShuffle(groups)(x)


# deprecated aliases --------------------------------------------------------------------------------


@pytest.mark.parametrize(("fn", "kwargs"), [
    ("upsample_nearest", {"scale_factor": 2}), ("upsample_nearest", {"size": (5, 3)}),
    ("upsample_bilinear", {"scale_factor": 2}), ("upsample_bilinear", {"size": (5, 7)}),
])
def test_upsample_aliases_as_torch(fn, kwargs):
    with pytest.warns(UserWarning, match=f"`nn.functional.{fn}` is deprecated") as rec:
        check(lambda t: _weighted(getattr(_either(t)[0], fn)(t, **kwargs), rand((2, 3) + _out(kwargs), seed=4)),
              [rand((2, 3, 3, 2))])
    assert any(r.filename == __file__ for r in rec)  # (luminal's names the caller's line, as torch's)


def _out(kwargs):
    return tuple(kwargs["size"]) if "size" in kwargs else (6, 4)


def test_upsample_bilinear_aligns_corners_and_nearest_takes_3d():
    """upsample_bilinear is align_corners=True (the corners kept): not interpolate's default."""
    g = lm.Graph()
    x = g.input("x", (1, 1, 2, 2))
    with pytest.warns(UserWarning):
        y = F.upsample_bilinear(x, size=(3, 3))
    got = lm.compile(y)(x=np.array([[[[0.0, 2.0], [4.0, 6.0]]]], np.float32))
    np.testing.assert_allclose(got[0, 0], [[0, 1, 2], [2, 3, 4], [4, 5, 6]], atol=1e-6)
    with pytest.warns(UserWarning):
        check(lambda t: _either(t)[0].upsample_nearest(t, scale_factor=3), [rand((2, 3, 4))])


def test_nllloss2d_is_nllloss_and_warns():
    logp = TF.log_softmax(torch.from_numpy(rand((2, 4, 3, 5))), 1).numpy()
    target = rand((2, 3, 5), lm.int32, low=0, high=3, seed=2)
    target[0, 0, 0] = -100
    weight = np.array([0.5, 1.0, 2.0, 1.5], np.float32)
    with pytest.warns(FutureWarning, match="NLLLoss2d` has been deprecated"):
        m = nn.NLLLoss2d(weight=weight)
    with pytest.warns(FutureWarning):
        ref = torch.nn.NLLLoss2d(weight=torch.from_numpy(weight))
    assert isinstance(m, nn.NLLLoss)
    assert repr(m) == repr(ref) == "NLLLoss2d()"
    assert list(m.state_dict()) == list(ref.state_dict()) == ["weight"]
    check(lambda x, t: m(x, t) if isinstance(x, lm.GraphTensor) else ref(x, t.long()), [logp, target])
    with pytest.warns(FutureWarning), pytest.raises(TypeError, match="size_average and reduce"):
        nn.NLLLoss2d(size_average=False)


# gumbel_softmax ------------------------------------------------------------------------------------


def _inject(monkeypatch, e: np.ndarray):
    """The same exponential noise ``e`` (torch's ``exponential_`` draw) on both sides: torch's
    ``gumbel_softmax`` fills with it, luminal's noise is ``-log(e)`` as a constant."""
    monkeypatch.setattr(torch.Tensor, "exponential_", lambda self, *a, **k: self.copy_(torch.from_numpy(e)))
    monkeypatch.setattr(gumbel, "_gumbel_noise", lambda logits: logits.graph.constant(-np.log(e)).to(logits.dtype))


@pytest.mark.parametrize("hard", [False, True])
@pytest.mark.parametrize(("shape", "dim", "tau"), [((4, 5), -1, 1.0), ((3, 4, 2), 1, 0.5), ((2, 3, 6), -1, 2.5)])
def test_gumbel_softmax_with_torchs_noise(monkeypatch, hard, shape, dim, tau):
    """Same noise: the same samples, and the same gradients (hard: the soft sample's, straight through)."""
    e = np.random.default_rng(1).exponential(size=shape).astype(np.float32)
    _inject(monkeypatch, e)
    w = rand(shape, seed=5)
    check(lambda t: _weighted(_either(t)[0].gumbel_softmax(t, tau=tau, hard=hard, dim=dim), w), [rand(shape, seed=2)])


def test_gumbel_softmax_hard_is_one_hot_float64(monkeypatch):
    e = np.random.default_rng(2).exponential(size=(6, 4))
    _inject(monkeypatch, e)
    logits = rand((6, 4), seed=3).astype(np.float64)
    (got,) = check(lambda t: _either(t)[0].gumbel_softmax(t, hard=True), [logits])
    np.testing.assert_allclose(got, np.eye(4)[np.argmax(logits - np.log(e), -1)], atol=1e-12)


def test_gumbel_noise_is_standard_gumbel_and_fresh_per_call():
    lm.manual_seed(0)  # (a fixed stream: the statistical bounds below are not re-drawn per run)
    g = lm.Graph()
    x = g.input("x", (200_000,))
    f = lm.compile(gumbel._gumbel_noise(x))
    a, b = f(x=np.zeros(200_000, np.float32)), f(x=np.zeros(200_000, np.float32))
    assert a.dtype == np.float32 and np.all(np.isfinite(a))
    assert not np.array_equal(a, b)
    s = np.sort(a.astype(np.float64))
    ks = np.max(np.abs(np.exp(-np.exp(-s)) - (np.arange(1, s.size + 1) - 0.5) / s.size))
    assert ks < 1.63 / math.sqrt(s.size) + 0.5 / s.size  # (KS at the 1% level)
    assert abs(s.mean() - 0.5772156649) < 5 * math.pi / math.sqrt(6) / math.sqrt(s.size)


@pytest.mark.parametrize("tau", [1.0, 0.3])
def test_gumbel_softmax_hard_categories_follow_softmax(tau):
    """The argmax of logits + Gumbel noise is a draw of softmax(logits), whatever tau (chi-square)."""
    logits = np.array([1.0, -0.5, 0.0, 2.0, -3.0], np.float32)
    n = 40_000
    lm.manual_seed(1)
    g = lm.Graph()
    x = g.input("x", (n, 5))
    y = F.gumbel_softmax(x, tau=tau, hard=True)
    got = lm.compile(y)(x=np.broadcast_to(logits, (n, 5)).copy())
    assert set(np.unique(got)) <= {0.0, 1.0} and np.all(got.sum(1) == 1)
    p = np.exp(logits) / np.exp(logits).sum()
    counts = got.sum(0)
    chi2 = float(np.sum((counts - n * p) ** 2 / (n * p)))
    assert chi2 < 18.5  # (4 degrees of freedom: the 0.1% point is 18.47)


def test_gumbel_softmax_soft_gradient_is_the_softmaxs():
    """Without injected noise: d/dlogits of sum(w * y) is (y * (w - sum(w * y))) / tau, y the sample."""
    g = lm.Graph()
    x = g.input("x", (3, 4))
    w = rand((3, 4), seed=7)
    y = F.gumbel_softmax(x, tau=0.5)
    (dx,) = train.grad((y * g.constant(w)).sum(), [x])
    ys, dxs = lm.compile([y, dx])(x=rand((3, 4), seed=8))
    np.testing.assert_allclose(ys.sum(-1), 1, rtol=1e-6)
    want = ys * (w - (w * ys).sum(-1, keepdims=True)) / 0.5
    np.testing.assert_allclose(dxs, want, rtol=1e-4, atol=1e-6)


def test_gumbel_softmax_arguments():
    g = lm.Graph()
    with pytest.raises(TypeError, match=r"^gumbel_softmax: expected a float input, got int32"):
        F.gumbel_softmax(g.input("i", (2, 3), dtype=lm.int32))
    with pytest.raises(TypeError, match=r"^gumbel_softmax: tau must be a number"):
        F.gumbel_softmax(g.input("x", (2, 3)), tau="1")
    with pytest.raises(ValueError, match=r"^gumbel_softmax: dim 2 is out of range"):
        F.gumbel_softmax(g.input("y", (2, 3)), dim=2)
    with pytest.warns(UserWarning, match="`eps` parameter is deprecated and has no effect"):
        F.gumbel_softmax(g.input("z", (2, 3)), eps=1e-5)
    one = lm.compile(F.gumbel_softmax(g.input("s", ()), hard=True))(s=np.float32(0.3))
    assert one == 1.0 and one.shape == ()


# SyncBatchNorm ---------------------------------------------------------------------------------------


def _sync_pair(*args, **kwargs):
    m, ref = nn.SyncBatchNorm(*args, **kwargs), torch.nn.SyncBatchNorm(*args, **kwargs)
    lm.manual_seed(3)
    if m.affine:  # (not the initial ones and zeros: a gradient of the affine part shows)
        m.weight.set(rand((m.num_features,), seed=1, low=0.5, high=1.5))
        m.bias.set(rand((m.num_features,), seed=2))
    ref.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in m.state_dict().items()})
    return m, ref


@pytest.mark.parametrize("shape", [(6, 3), (4, 3, 5), (2, 3, 2, 3), (2, 3, 2, 2, 2), (2, 3, 1, 2, 2, 2)])
@pytest.mark.parametrize("training", [True, False])
def test_sync_batchnorm_is_batchnorm_in_one_process_as_torchs(shape, training):
    """torch's SyncBatchNorm without a process group: batch_norm, over (N, C, *) of any rank."""
    m, ref = _sync_pair(3, momentum=0.3)
    m.train(training)
    ref.train(training)
    if not training:
        m.running_mean.set(np.array([0.5, -1, 0], np.float32))
        ref.running_mean.copy_(torch.tensor([0.5, -1, 0]))
    w = rand(shape, seed=7)
    check(lambda t: (m if isinstance(t, lm.GraphTensor) else ref)(t) * _weighted_const(t, w), [rand(shape, seed=4)])
    for k, v in ref.state_dict().items():  # (check ran one forward on each side: the running statistics' update)
        np.testing.assert_allclose(m.state_dict()[k], v.numpy(), rtol=1e-5, atol=1e-6, err_msg=k)


def _weighted_const(t, w):
    return torch.from_numpy(w) if isinstance(t, torch.Tensor) else t.graph.constant(w)


def test_sync_batchnorm_repr_state_and_errors():
    m, ref = _sync_pair(4, affine=False, track_running_stats=False)
    assert repr(m) == repr(ref) and list(m.state_dict()) == list(ref.state_dict()) == []
    assert repr(nn.SyncBatchNorm(5)) == repr(torch.nn.SyncBatchNorm(5))
    assert list(nn.SyncBatchNorm(5).state_dict()) == list(torch.nn.SyncBatchNorm(5).state_dict())
    assert nn.SyncBatchNorm(5).process_group is None
    with pytest.raises(ValueError, match=r"^SyncBatchNorm\(4, .*\): expected input of shape \(N, 4, \*\), got \(4,\)"):
        nn.SyncBatchNorm(4)(lm.Graph().input("x", (4,)))
    with pytest.raises(ValueError, match=r"expected input of shape \(N, 4, \*\), got \(2, 3, 5\)"):
        nn.SyncBatchNorm(4)(lm.Graph().input("x", (2, 3, 5)))
    with pytest.raises(TypeError, match=r"^SyncBatchNorm: process_group must be None: luminal has no process groups"):
        nn.SyncBatchNorm(4, process_group="group")
    with pytest.raises(TypeError, match="process_group must be None"):
        nn.SyncBatchNorm.convert_sync_batchnorm(nn.BatchNorm1d(3), process_group=object())


def test_sync_batchnorm_refuses_to_train_over_several_ranks(monkeypatch):
    from luminal import distributed

    monkeypatch.setattr(distributed, "world_size", lambda: 2)
    m = nn.SyncBatchNorm(3)
    with pytest.raises(ValueError, match=r"^SyncBatchNorm\(3, .*\): cannot synchronise batch statistics across the "
                                         r"2 ranks of this job: .* Use nn.BatchNorm2d"):
        m(lm.Graph().input("x", (2, 3, 4, 4)))
    m.eval()  # (evaluation reads the running statistics: nothing to synchronise, as torch's)
    m(lm.Graph().input("x", (2, 3, 4, 4)))


def test_convert_sync_batchnorm_as_torchs():
    def build(ns):
        inner = ns.Sequential(ns.Conv2d(2, 3, 1), ns.BatchNorm2d(3, momentum=0.2))
        return ns.Sequential(ns.Linear(4, 4), ns.BatchNorm1d(4, affine=False), inner, ns.BatchNorm3d(2, eps=1e-3))

    m, ref = build(nn), build(torch.nn)
    m[2][1].eval()
    ref[2][1].eval()
    old = [m[1].running_mean, m[2][1].weight, m[2][1].running_var, m[3].bias]
    c, tc = nn.SyncBatchNorm.convert_sync_batchnorm(m), torch.nn.SyncBatchNorm.convert_sync_batchnorm(ref)
    assert c is m and repr(c) == repr(tc)
    assert list(c.state_dict()) == list(tc.state_dict())
    assert [type(x).__name__ for x in (c[1], c[2][1], c[3])] == ["SyncBatchNorm"] * 3
    shared = [c[1].running_mean, c[2][1].weight, c[2][1].running_var, c[3].bias]
    assert all(a is b for a, b in zip(shared, old))
    assert (c[2][1].training, c[3].training) == (False, True)
    single = nn.BatchNorm1d(2)
    assert isinstance(nn.SyncBatchNorm.convert_sync_batchnorm(single), nn.SyncBatchNorm)
