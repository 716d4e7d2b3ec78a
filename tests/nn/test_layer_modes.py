"""Training vs eval: BatchNorm's batch statistics and running-stat updates, Dropout's random masks."""

import numpy as np
import pytest
import torch

import luminal as lm
from luminal.nn import layers as L


def randn(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def copy_state(ours, theirs):
    ours.load_state_dict({k: v.detach().numpy().astype(np.int32) if v.dtype == torch.int64 else v.detach().numpy()
                          for k, v in theirs.state_dict().items()})


def compiled(module, shape, backend):
    g = lm.Graph()
    return lm.compile(module(g.input("x", shape)), backend=backend), g


def assert_stats_equal(m, tm):
    for k, v in tm.state_dict().items():
        np.testing.assert_allclose(m.state_dict()[k], v.numpy(), rtol=1e-5, atol=1e-6, err_msg=k)


# BatchNorm -------------------------------------------------------------------------------------
@pytest.mark.parametrize("cls,shape", [("BatchNorm1d", (6, 3)), ("BatchNorm1d", (4, 3, 5)),
                                       ("BatchNorm2d", (2, 3, 4, 5))])
@pytest.mark.parametrize("momentum", [0.1, 0.5, None])
def test_batchnorm_train(backend, cls, shape, momentum):
    tm = getattr(torch.nn, cls)(3, momentum=momentum)
    with torch.no_grad():
        tm.weight.uniform_(-1, 1)
        tm.bias.uniform_(-1, 1)
        tm.running_mean.uniform_(-1, 1)
        tm.running_var.uniform_(0.5, 2)
        tm.num_batches_tracked.fill_(3)
    m = getattr(L, cls)(3, momentum=momentum)
    copy_state(m, tm)
    f, _ = compiled(m, shape, backend)
    for step in range(2):  # one compiled program, two runs: two updates
        x = randn(*shape, seed=step) * 2 + 1
        got = f(x=x)
        want = tm(torch.from_numpy(x)).detach().numpy()
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
        assert_stats_equal(m, tm)
    assert int(m.num_batches_tracked.data) == 5


def test_batchnorm_train_then_eval(backend):
    tm, m = torch.nn.BatchNorm2d(3), L.BatchNorm2d(3)
    f, _ = compiled(m, (2, 3, 4, 4), backend)
    for s in range(3):
        x = randn(2, 3, 4, 4, seed=s)
        f(x=x)
        tm(torch.from_numpy(x))
    tm.eval()
    m.eval()
    x = randn(2, 3, 4, 4, seed=9)
    f_eval, g = compiled(m, (2, 3, 4, 4), backend)
    assert not g.updates  # eval graphs leave the buffers alone
    np.testing.assert_allclose(f_eval(x=x), tm(torch.from_numpy(x)).detach().numpy(), rtol=1e-5, atol=1e-5)
    assert_stats_equal(m, tm)


@pytest.mark.parametrize("training", [True, False])
def test_batchnorm_without_running_stats(backend, training):
    tm, m = torch.nn.BatchNorm1d(3, track_running_stats=False), L.BatchNorm1d(3, track_running_stats=False)
    tm.train(training)
    m.train(training)
    f, g = compiled(m, (5, 3), backend)
    x = randn(5, 3)
    np.testing.assert_allclose(f(x=x), tm(torch.from_numpy(x)).detach().numpy(), rtol=1e-5, atol=1e-5)
    assert not g.updates
    assert list(m.state_dict()) == list(tm.state_dict()) == ["weight", "bias"]


def test_batchnorm_called_twice_in_one_graph(backend):
    """Two calls in one graph update the running stats twice, in order, as two torch calls do."""
    tm, m = torch.nn.BatchNorm1d(2), L.BatchNorm1d(2)
    g = lm.Graph()
    a, b = g.input("a", (4, 2)), g.input("b", (4, 2))
    f = lm.compile([m(a), m(b)], backend=backend)
    xa, xb = randn(4, 2), randn(4, 2, seed=1) + 3
    f(a=xa, b=xb)
    tm(torch.from_numpy(xa))
    tm(torch.from_numpy(xb))
    assert_stats_equal(m, tm)


@pytest.mark.parametrize("shape,ragged,full", [(("B", 3), (1, 3), (4, 3)), (("B", 3, "L"), (1, 3, 1), (4, 3, 5))])
def test_batchnorm_refuses_one_value_per_channel_on_the_call(backend, shape, ragged, full):
    """torch raises for a training batch norm with one value per channel; a symbolic batch is checked
    once per binding (a ragged last batch of one row), before anything runs: the unbiased variance
    would divide by zero and the running variance turn NaN while the loss stays finite."""
    tm, m = torch.nn.BatchNorm1d(3), L.BatchNorm1d(3)
    f, _ = compiled(m, shape, backend)
    with pytest.raises(ValueError, match=r"with B=1.*BatchNorm1d\(3.*more than 1 value per channel when "
                                         r"training \(an input of shape \(B, 3") as e:
        f(x=randn(*ragged))
    assert "test_layer_modes.py" in str(e.value)  # the user's line
    assert_stats_equal(m, tm)  # nothing ran
    x = randn(*full, seed=1)
    np.testing.assert_allclose(f(x=x), tm(torch.from_numpy(x)).detach().numpy(), rtol=1e-5, atol=1e-5)
    assert_stats_equal(m, tm)
    with pytest.warns(UserWarning, match="set to eval mode"):  # (the train graph above stays train)
        m.eval()  # an eval graph reads the running statistics: one row is fine
    f_eval, _ = compiled(m, shape, backend)
    tm.eval()
    np.testing.assert_allclose(f_eval(x=randn(*ragged, seed=2)),
                               tm(torch.from_numpy(randn(*ragged, seed=2))).detach().numpy(), rtol=1e-5, atol=1e-5)


def test_functional_batch_norm_refuses_one_value_per_channel(backend):
    m = L.BatchNorm1d(2)
    g = lm.Graph()
    y = lm.nn.functional.batch_norm(g.input("x", ("B", 2)), m.running_mean, m.running_var, training=True)
    f = lm.compile(y, backend=backend)
    with pytest.raises(ValueError, match=r"batch_norm: expected more than 1 value per channel when training"):
        f(x=randn(1, 2))
    np.testing.assert_array_equal(m.running_var.data, np.ones(2, np.float32))
    with pytest.raises(ValueError, match="more than 1 value per channel"):  # known now: refused now
        lm.nn.functional.batch_norm(g.input("z", (1, 2)), None, None, training=True)


# Dropout ---------------------------------------------------------------------------------------
def test_dropout_eval_and_p0_are_identity(backend):
    x = randn(4, 5)
    for m in (L.Dropout(0.5).eval(), L.Dropout(0.0)):
        f, g = compiled(m, (4, 5), backend)
        np.testing.assert_array_equal(f(x=x), x)
        assert not g.random


def test_dropout_p1_zeroes(backend):
    f, _ = compiled(L.Dropout(1.0), (3, 4), backend)
    np.testing.assert_array_equal(f(x=randn(3, 4)), np.zeros((3, 4), np.float32))


@pytest.mark.parametrize("p", [0.2, 0.5, 0.8])
def test_dropout_train_statistics(backend, p):
    x = np.abs(randn(200, 250)) + 0.5  # no zeros of its own
    f, _ = compiled(L.Dropout(p), ("B", 250), backend)
    y1, y2 = f(x=x), f(x=x)
    for y in (y1, y2):
        zero = y == 0
        assert abs(zero.mean() - p) < 0.01
        np.testing.assert_allclose(y[~zero], x[~zero] / (1 - p), rtol=1e-6)
    assert ((y1 == 0) != (y2 == 0)).any()  # a fresh mask on every call


def test_dropout_reproducible_with_seeded_graph_rng(backend):
    x = np.ones((30, 40), np.float32)

    def two_runs():
        g = lm.Graph()
        g.rng = np.random.default_rng(0)
        f = lm.compile(L.Dropout(0.5)(g.input("x", (30, 40))), backend=backend)
        return f(x=x), f(x=x)

    a1, a2 = two_runs()
    b1, b2 = two_runs()
    np.testing.assert_array_equal(a1, b1)
    np.testing.assert_array_equal(a2, b2)
    assert (a1 != a2).any()


def test_manual_seed_makes_graph_rng_reproducible(backend):
    x = np.ones((20, 20), np.float32)

    def once():
        lm.frontend.seed.manual_seed(3)
        g = lm.Graph()
        return lm.compile(L.Dropout(0.5)(g.input("x", (20, 20))), backend=backend)(x=x)

    np.testing.assert_array_equal(once(), once())


def test_mode_is_fixed_when_the_graph_is_built(backend):
    m = L.Sequential(L.Linear(4, 4), L.Dropout(0.9))
    f_train, _ = compiled(m, (50, 4), backend)
    m.eval()
    assert not m[1].training and not m.training
    f_eval, _ = compiled(m, (50, 4), backend)
    x = randn(50, 4)
    assert (f_train(x=x) == 0).mean() > 0.5
    assert not (f_eval(x=x) == 0).any()


def test_mha_dropout_only_in_training(backend):
    m = L.MultiheadAttention(4, 2, dropout=0.5, batch_first=True)
    g = lm.Graph()
    x = g.input("x", (2, 3, 4))
    m(x, x, x)
    assert g.random
    m.eval()
    g = lm.Graph()
    x = g.input("x", (2, 3, 4))
    m(x, x, x)
    assert not g.random
