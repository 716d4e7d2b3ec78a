"""``nn.init`` audited against torch 2.13's ``torch.nn.init``: the gain table, fans, argument checks
(ranges, integer parameters, empty ones), ``sparse_``, and the default initialisation of the layers
tests/nn/test_init.py leaves out (recurrent, transposed conv, Bilinear, MultiheadAttention's separate
projections). Distributions are checked by their moments against the formulas, never by torch's draws."""

import math

import numpy as np
import pytest
import torch

import luminal as lm
from luminal.nn import init
from luminal.nn import layers as L
from luminal.nn.parameter import Parameter

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(autouse=True)
def _seeded():
    lm.manual_seed(0)  # the statistical checks are then deterministic


def _uniform_ok(a, bound):
    """U(-bound, bound): inside the bounds, reaching near them, with its mean and std (~5 standard errors)."""
    a = np.asarray(a, np.float64).ravel()
    se = bound / math.sqrt(a.size)
    assert np.abs(a).max() <= bound * (1 + 1e-6)
    assert np.abs(a).max() > bound * (1 - 20 / a.size)
    assert abs(a.mean()) < 5 * se
    assert abs(a.std() - bound / math.sqrt(3)) < 5 * se


def _normal_ok(a, std):
    a = np.asarray(a, np.float64).ravel()
    se = std / math.sqrt(a.size)
    assert abs(a.mean()) < 5 * se
    assert abs(a.std() - std) < 5 * se


# calculate_gain and the fans ---------------------------------------------------------------------
@pytest.mark.parametrize("name,param,want", [
    ("linear", None, 1.0), ("conv1d", None, 1.0), ("conv2d", None, 1.0), ("conv3d", None, 1.0),
    ("conv_transpose1d", None, 1.0), ("conv_transpose2d", None, 1.0), ("conv_transpose3d", None, 1.0),
    ("sigmoid", None, 1.0), ("tanh", None, 5 / 3), ("relu", None, math.sqrt(2)), ("selu", None, 0.75),
    ("leaky_relu", None, math.sqrt(2 / (1 + 0.01 ** 2))), ("leaky_relu", 0, math.sqrt(2)),
    ("leaky_relu", 0.2, math.sqrt(2 / 1.04)), ("leaky_relu", 5 ** 0.5, math.sqrt(1 / 3)),
    ("relu", 0.3, math.sqrt(2)),  # (a param is ignored by the others)
])
def test_calculate_gain_table(name, param, want):
    assert init.calculate_gain(name, param) == pytest.approx(want, rel=1e-15)
    assert torch.nn.init.calculate_gain(name, param) == pytest.approx(want, rel=1e-15)


@pytest.mark.parametrize("name,param", [("swish", None), ("Relu", None), ("leaky_relu", True), ("leaky_relu", "0.1")])
def test_calculate_gain_refusals_as_torchs(name, param):
    with pytest.raises(ValueError):
        torch.nn.init.calculate_gain(name, param)
    with pytest.raises(ValueError, match="calculate_gain"):
        init.calculate_gain(name, param)


@pytest.mark.parametrize("shape", [(7, 3), (3, 7), (8, 4, 5), (8, 4, 3, 2), (6, 2, 3, 4, 5), (0, 4, 3)])
def test_fans_of_matrices_and_conv_weights(shape):
    want = torch.nn.init._calculate_fan_in_and_fan_out(torch.empty(shape))
    assert init._calculate_fan_in_and_fan_out(np.empty(shape, np.float32)) == want
    receptive = math.prod(shape[2:])
    assert want == (shape[1] * receptive, shape[0] * receptive)


@pytest.mark.parametrize("shape", [(), (5,)])
def test_fans_of_fewer_than_two_dims_refused_as_torch(shape):
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        torch.nn.init._calculate_fan_in_and_fan_out(torch.empty(shape))
    for f in (init._calculate_fan_in_and_fan_out, init.kaiming_uniform_, init.xavier_normal_):
        with pytest.raises(ValueError, match="at least 2 dims"):
            f(np.empty(shape, np.float32))


# kaiming and xavier on conv weights -----------------------------------------------------------------
@pytest.mark.parametrize("mode", ["fan_in", "fan_out"])
@pytest.mark.parametrize("nonlinearity,a", [("relu", 0), ("leaky_relu", 0.1), ("tanh", 0), ("selu", 0),
                                            ("linear", 0)])
def test_kaiming_on_a_conv_weight(mode, nonlinearity, a):
    shape = (64, 32, 5, 5)  # fan_in 800, fan_out 1600; 51,200 values
    fan = 800 if mode == "fan_in" else 1600
    std = init.calculate_gain(nonlinearity, a) / math.sqrt(fan)
    _uniform_ok(init.kaiming_uniform_(np.empty(shape, np.float32), a, mode, nonlinearity), math.sqrt(3) * std)
    _normal_ok(init.kaiming_normal_(np.empty(shape, np.float32), a, mode, nonlinearity), std)


def test_kaiming_mode_refused():
    with pytest.raises(ValueError, match="fan_in"):
        init.kaiming_normal_(np.empty((3, 3)), mode="fan_avg")


@pytest.mark.parametrize("gain", [1.0, 0.5, init.calculate_gain("relu")])
def test_xavier_gain_on_a_conv_weight(gain):
    shape = (40, 20, 3, 3, 3)  # fan_in 540, fan_out 1080
    _uniform_ok(init.xavier_uniform_(np.empty(shape, np.float32), gain), gain * math.sqrt(6 / 1620))
    _normal_ok(init.xavier_normal_(np.empty(shape, np.float32), gain), gain * math.sqrt(2 / 1620))


# argument checks as torch's -------------------------------------------------------------------------
def test_uniform_with_a_above_b_refused_as_torch():
    """torch refuses from > to; the draw here spanned (b, a] silently."""
    with pytest.raises(RuntimeError, match="from=1 > to=-1"):
        torch.nn.init.uniform_(torch.empty(3), 1.0, -1.0)
    with pytest.raises(ValueError, match=r"uniform_: expects the range \[a, b\) with a <= b, but found a=1.0 > b=-1.0"):
        init.uniform_(np.empty(3, np.float32), 1.0, -1.0)
    p = init.uniform_(np.empty(10, np.float32), 2.0, 2.0)  # (an empty range is allowed, as torch's)
    np.testing.assert_array_equal(p, 2.0)


def test_normal_with_negative_std_refused_as_torch():
    """torch refuses std < 0 (and so xavier's negative gain); the draw here was N(mean, std**2) negated."""
    with pytest.raises(RuntimeError, match="std >= 0.0"):
        torch.nn.init.normal_(torch.empty(3), 0.0, -1.0)
    with pytest.raises(ValueError, match="normal_: std must be at least 0, got -1.0"):
        init.normal_(np.empty(3, np.float32), 0.0, -1.0)
    with pytest.raises(ValueError, match="std must be at least 0"):
        init.xavier_normal_(np.empty((3, 3), np.float32), gain=-1.0)
    with pytest.raises(ValueError, match="a <= b"):
        init.xavier_uniform_(np.empty((3, 3), np.float32), gain=-1.0)
    np.testing.assert_array_equal(init.normal_(np.empty(4, np.float32), 1.5, 0.0), 1.5)


RANDOM = [(name, lambda i, p, name=name: getattr(i, name)(p)) for name in (
    "uniform_", "normal_", "trunc_normal_", "xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_",
    "orthogonal_")] + [("sparse_", lambda i, p: i.sparse_(p, 0.5))]


@pytest.mark.parametrize("name,fill", RANDOM, ids=[r[0] for r in RANDOM])
def test_random_fills_of_integer_parameters_refused_as_torch(name, fill):
    """torch refuses ("not implemented for 'Long'"); here the float draws were truncated on writing
    (``uniform_`` of an int array gave all zeros)."""
    with pytest.raises((NotImplementedError, RuntimeError)):
        fill(torch.nn.init, torch.zeros((4, 4), dtype=torch.int64))
    for p in (np.zeros((4, 4), np.int64), np.zeros((4, 4), bool), Parameter(np.zeros((4, 4), np.int32))):
        with pytest.raises(TypeError, match=f"{name}: random values need a floating-point parameter, got dtype"):
            fill(init, p)


def test_deterministic_fills_of_integer_parameters_as_torch():
    for fill in (lambda i, p: i.constant_(p, 2.7), lambda i, p: i.ones_(p), lambda i, p: i.zeros_(p),
                 lambda i, p: i.eye_(p)):
        t = fill(torch.nn.init, torch.full((3, 3), 9, dtype=torch.int64))
        np.testing.assert_array_equal(fill(init, np.full((3, 3), 9, np.int64)), t.numpy())
    t = torch.nn.init.dirac_(torch.full((4, 2, 3), 9, dtype=torch.int64), 2)
    np.testing.assert_array_equal(init.dirac_(np.full((4, 2, 3), 9, np.int64), 2), t.numpy())


@pytest.mark.parametrize("name", ["kaiming_uniform_", "kaiming_normal_"])
def test_kaiming_of_an_empty_parameter_warns_as_torch(name):
    with pytest.warns(UserWarning, match="zero-element tensors is a no-op"):
        getattr(torch.nn.init, name)(torch.empty(0, 3))
    p = Parameter(np.zeros((0, 3), np.float32))
    with pytest.warns(UserWarning, match=f"{name}: initializing zero-element tensors is a no-op"):
        assert getattr(init, name)(p) is p


def test_other_fills_of_empty_parameters_do_nothing_quietly():
    for fill in (init.uniform_, init.normal_, init.trunc_normal_, init.ones_, init.orthogonal_, init.xavier_uniform_):
        p = np.zeros((0, 3), np.float32)
        assert fill(p) is p


# sparse_ -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("rows,sparsity,std", [(1000, 0.1, 0.01), (301, 0.25, 0.5), (50, 1.0, 0.01), (40, 0.0, 2.0)])
def test_sparse_zeroes_ceil_sparsity_rows_of_each_column(rows, sparsity, std):
    """torch's recipe: N(0, std**2), then ceil(sparsity * rows) random rows of each column zeroed. The count
    per column is torch's; the rows differ between columns; the rest have the normal's std."""
    cols = 200
    zeros = math.ceil(sparsity * rows)
    t = torch.nn.init.sparse_(torch.empty(rows, cols), sparsity, std)
    np.testing.assert_array_equal((t == 0).sum(0).numpy(), zeros)
    p = Parameter(np.zeros((rows, cols), np.float32))
    assert init.sparse_(p, sparsity, std) is p
    w = p.data
    np.testing.assert_array_equal((w == 0).sum(0), zeros)
    if 0 < zeros < rows:
        assert len({tuple(np.flatnonzero(w[:, j] == 0)) for j in range(cols)}) > cols // 2
        hits = (w == 0).mean(1)  # every row is as likely to be zeroed
        assert abs(hits.mean() - zeros / rows) < 1e-12 and hits.std() < 5 * math.sqrt(zeros / rows / cols)
    if zeros < rows:
        _normal_ok(w[w != 0], std)


def test_sparse_refusals():
    with pytest.raises(ValueError, match="Only tensors with 2 dimensions"):
        torch.nn.init.sparse_(torch.empty(3, 3, 3), 0.1)
    with pytest.raises(ValueError, match=r"sparse_: only tensors with 2 dimensions are supported, got shape \(3, 3"):
        init.sparse_(np.empty((3, 3, 3), np.float32), 0.1)
    for sparsity in (-0.1, 1.5):  # (torch zeroes all rows but ceil(0.1 * rows), or every row, silently)
        with pytest.raises(ValueError, match=f"sparse_: sparsity .* in \\[0, 1\\], got {sparsity}"):
            init.sparse_(np.empty((3, 3), np.float32), sparsity)
    with pytest.raises(ValueError, match="sparse_: std must be at least 0"):
        init.sparse_(np.empty((3, 3), np.float32), 0.1, std=-1.0)


def test_sparse_reproducible_with_a_generator():
    a = init.sparse_(np.empty((30, 20)), 0.3, generator=np.random.default_rng(4))
    b = init.sparse_(np.empty((30, 20)), 0.3, generator=np.random.default_rng(4))
    np.testing.assert_array_equal(a, b)


# the layers' defaults that tests/nn/test_init.py does not check -------------------------------------
@pytest.mark.parametrize("make", [lambda m: m.RNN(60, 300, num_layers=2), lambda m: m.LSTM(60, 300, bidirectional=True),
                                  lambda m: m.LSTM(60, 300, proj_size=40), lambda m: m.GRU(60, 300),
                                  lambda m: m.RNNCell(60, 300), lambda m: m.LSTMCell(60, 300),
                                  lambda m: m.GRUCell(60, 300)])
def test_recurrent_default_init(make):
    """torch: every weight and bias U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))."""
    names = sorted(n for n, _ in make(torch.nn).named_parameters())
    state = make(L).state_dict()
    assert sorted(state) == names
    for name in names:
        w = state[name]
        bound = 1 / math.sqrt(300)
        assert np.abs(w).max() <= bound * (1 + 1e-6)
        assert abs(w.std() - bound / math.sqrt(3)) < 5 * bound / math.sqrt(w.size), name


@pytest.mark.parametrize("make,fan_in", [(lambda m: m.ConvTranspose1d(40, 300, 5), 300 * 5),
                                         (lambda m: m.ConvTranspose2d(40, 240, 3, groups=4), 60 * 9),
                                         (lambda m: m.ConvTranspose3d(8, 30, 3), 30 * 27),
                                         (lambda m: m.Conv3d(6, 64, 3), 6 * 27)])
def test_transposed_and_3d_conv_default_init(make, fan_in):
    """torch's fan_in of a transposed conv's weight (in, out / groups, *k) is its dim 1 times the kernel."""
    m, t = make(L), make(torch.nn)
    assert torch.nn.init._calculate_fan_in_and_fan_out(t.weight)[0] == fan_in
    assert m.weight.data.shape == tuple(t.weight.shape)
    _uniform_ok(m.weight.data, 1 / math.sqrt(fan_in))
    assert np.abs(m.bias.data).max() <= 1 / math.sqrt(fan_in)


def test_bilinear_default_init():
    m = L.Bilinear(80, 60, 50)
    _uniform_ok(m.weight.data, 1 / math.sqrt(80))
    assert np.abs(m.bias.data).max() <= 1 / math.sqrt(80)


def test_mha_separate_projections_and_bias_kv_default_init():
    """kdim/vdim: q/k/v_proj_weight each xavier_uniform_; bias_k/bias_v (1, 1, E) xavier_normal_ (std 1/sqrt(E))."""
    e = 240
    m = L.MultiheadAttention(e, 4, kdim=100, vdim=120, add_bias_kv=True)
    _uniform_ok(m.q_proj_weight.data, math.sqrt(6 / (e + e)))
    _uniform_ok(m.k_proj_weight.data, math.sqrt(6 / (100 + e)))
    _uniform_ok(m.v_proj_weight.data, math.sqrt(6 / (120 + e)))
    assert m.bias_k.data.shape == (1, 1, e) and m.bias_v.data.shape == (1, 1, e)
    both = np.concatenate([m.bias_k.data.ravel(), m.bias_v.data.ravel()])
    assert abs(both.std() - 1 / math.sqrt(e)) < 0.15 / math.sqrt(e)
    assert not m.in_proj_bias.data.any() and not m.out_proj.bias.data.any()
    _uniform_ok(m.out_proj.weight.data, 1 / math.sqrt(e))
