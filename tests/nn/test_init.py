"""nn.init and the layers' default initialisation: torch's distributions, reproducible with manual_seed."""

import math

import numpy as np
import pytest
import torch

import luminal as lm
from luminal.frontend import seed
from luminal.nn import init
from luminal.nn import layers as L
from luminal.nn.parameter import Parameter


@pytest.fixture(autouse=True)
def _seeded():
    seed.manual_seed(0)  # the statistical checks below are then deterministic


def uniform_ok(a, bound):
    """Values within [-bound, bound] with U(-bound, bound)'s mean and std, to within ~5 standard errors."""
    a = np.asarray(a, np.float64).ravel()
    se = bound / math.sqrt(a.size)
    assert np.abs(a).max() <= bound * (1 + 1e-6)
    assert np.abs(a).max() > bound * (1 - 10 / a.size)
    assert abs(a.mean()) < 5 * se
    assert abs(a.std() - bound / math.sqrt(3)) < 5 * se


def normal_ok(a, std, mean=0.0):
    a = np.asarray(a, np.float64).ravel()
    se = std / math.sqrt(a.size)
    assert abs(a.mean() - mean) < 5 * se
    assert abs(a.std() - std) < 5 * se


def test_calculate_gain_matches_torch():
    for nl, param in [("linear", None), ("conv2d", None), ("sigmoid", None), ("tanh", None), ("relu", None),
                      ("leaky_relu", None), ("leaky_relu", 0.2), ("leaky_relu", math.sqrt(5)), ("selu", None)]:
        assert init.calculate_gain(nl, param) == pytest.approx(torch.nn.init.calculate_gain(nl, param))
    with pytest.raises(ValueError, match="unsupported nonlinearity"):
        init.calculate_gain("swish")


def test_fans_match_torch():
    for shape in [(5, 3), (8, 4, 3, 2), (6, 2, 7)]:
        want = torch.nn.init._calculate_fan_in_and_fan_out(torch.empty(shape))
        assert init._calculate_fan_in_and_fan_out(Parameter(np.zeros(shape, np.float32))) == want


@pytest.mark.parametrize("mode", ["fan_in", "fan_out"])
def test_kaiming_and_xavier(mode):
    p = Parameter(np.zeros((300, 200, 3), np.float32))
    fan = 600 if mode == "fan_in" else 900
    init.kaiming_uniform_(p, a=0.2, mode=mode, nonlinearity="leaky_relu")
    uniform_ok(p.data, math.sqrt(3) * init.calculate_gain("leaky_relu", 0.2) / math.sqrt(fan))
    init.kaiming_normal_(p, mode=mode, nonlinearity="relu")
    normal_ok(p.data, math.sqrt(2) / math.sqrt(fan))
    init.xavier_uniform_(p, gain=2.0)
    uniform_ok(p.data, 2.0 * math.sqrt(6 / (600 + 900)))
    init.xavier_normal_(p)
    normal_ok(p.data, math.sqrt(2 / (600 + 900)))


def test_basic_initialisers_write_in_place():
    p = Parameter(np.zeros((100, 100), np.float32))
    data = p.data
    assert init.uniform_(p, -2, 3) is p and p.data is data
    assert p.data.min() >= -2 and p.data.max() < 3 and abs(p.data.mean() - 0.5) < 0.05
    init.normal_(p, 1.0, 0.5)
    normal_ok(p.data, 0.5, 1.0)
    init.trunc_normal_(p, std=1.0, a=-1.0, b=1.5)
    assert p.data.min() >= -1 and p.data.max() <= 1.5
    init.constant_(p, 3.5)
    assert (p.data == 3.5).all()
    init.zeros_(p)
    assert not p.data.any()
    init.ones_(p)
    assert (p.data == 1).all()
    init.eye_(p)
    np.testing.assert_array_equal(p.data, np.eye(100))
    assert p.data is data and p.data.dtype == np.float32


def test_bfloat16_parameters_hold_bf16_values():
    p = Parameter(np.zeros((50, 50), np.float32), dtype=lm.bfloat16)
    init.normal_(p)
    bits = p.data.view(np.uint32)
    assert not (bits & 0xFFFF).any()


def test_manual_seed_reproducible():
    def make():
        seed.manual_seed(123)
        return L.Sequential(L.Linear(4, 5), L.Conv2d(2, 3, 3), L.Embedding(6, 2), L.MultiheadAttention(4, 2))

    a, b = make(), make()
    for (k, x), y in zip(a.state_dict().items(), b.state_dict().values()):
        np.testing.assert_array_equal(x, y, err_msg=k)
    seed.manual_seed(124)
    assert not np.array_equal(L.Linear(4, 5).weight.data, a[0].weight.data)


# layers' defaults ------------------------------------------------------------------------------
def test_linear_default_init():
    m = L.Linear(400, 300)
    uniform_ok(m.weight.data, 1 / math.sqrt(400))
    uniform_ok(m.bias.data, 1 / math.sqrt(400))
    assert m.weight.data.dtype == np.float32


@pytest.mark.parametrize("make,fan_in", [(lambda: L.Conv2d(16, 64, 5, groups=2), 8 * 25),
                                         (lambda: L.Conv1d(30, 400, 7), 30 * 7)])
def test_conv_default_init(make, fan_in):
    m = make()
    uniform_ok(m.weight.data, 1 / math.sqrt(fan_in))
    uniform_ok(m.bias.data, 1 / math.sqrt(fan_in))


def test_embedding_default_init():
    m = L.Embedding(500, 100, padding_idx=3)
    normal_ok(np.delete(m.weight.data, 3, axis=0), 1.0)
    assert not m.weight.data[3].any()


def test_norm_default_init():
    for m in (L.LayerNorm((3, 4)), L.RMSNorm(5), L.BatchNorm2d(6)):
        assert (m.weight.data == 1).all()
        if getattr(m, "bias", None) is not None:
            assert not m.bias.data.any()
    bn = L.BatchNorm1d(3)
    assert not bn.running_mean.data.any() and (bn.running_var.data == 1).all() and int(bn.num_batches_tracked.data) == 0


def test_mha_default_init():
    m = L.MultiheadAttention(240, 4)
    uniform_ok(m.in_proj_weight.data, math.sqrt(6 / (240 + 720)))
    assert not m.in_proj_bias.data.any() and not m.out_proj.bias.data.any()
    uniform_ok(m.out_proj.weight.data, 1 / math.sqrt(240))


def test_dtype_argument():
    m = L.Linear(3, 4, dtype=lm.float64)
    assert m.weight.dtype is lm.float64 and m.weight.data.dtype == np.float64
    assert L.Conv2d(2, 2, 3, dtype=lm.float16).weight.data.dtype == np.float16
    assert L.BatchNorm2d(2, dtype=lm.float64).num_batches_tracked.dtype is lm.int32


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_draws_in_the_parameters_precision(dtype):
    """Values are drawn in the parameter's own precision (float32 unless it holds float64), as torch draws
    them: bounds kept, the moments of U(a, b) and N(mean, std), and a float64 parameter's values are not
    float32's widened."""
    rng = np.random.default_rng(0)
    u = init.uniform_(np.empty(200_000, dtype), -0.5, 1.5, generator=rng)
    assert u.min() >= -0.5 and u.max() <= 1.5
    assert abs(u.mean() - 0.5) < 0.01 and abs(u.var() - 4 / 12) < 0.01
    n = init.normal_(np.empty(200_000, dtype), 2.0, 3.0, generator=rng)
    assert abs(n.mean() - 2.0) < 0.03 and abs(n.std() - 3.0) < 0.03
    t = init.trunc_normal_(np.empty(50_000, dtype), 0.0, 1.0, -0.5, 0.5, generator=rng)
    assert t.min() >= -0.5 and t.max() <= 0.5
    if dtype is np.float64:
        assert np.any(u != u.astype(np.float32).astype(np.float64))


def test_a_legacy_random_state_still_draws():
    p = init.uniform_(np.empty(1000, np.float32), -1.0, 1.0, generator=np.random.RandomState(0))
    assert p.min() >= -1 and p.max() <= 1 and p.std() > 0.5
    q = init.normal_(np.empty(1000, np.float32), 0.0, 2.0, generator=np.random.RandomState(0))
    assert 1.5 < q.std() < 2.5
