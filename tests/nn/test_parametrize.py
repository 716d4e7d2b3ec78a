"""``nn.utils.parametrize`` and ``nn.utils.parametrizations`` against torch's: register_parametrization
(with and without right_inverse, chained, on a buffer), assignment through right_inverse,
remove_parametrizations, is_parametrized, cached, weight_norm (state_dict names, values, gradients through
train.grad and several compiled SGD steps, load/save round trips with torch)."""

import copy
import pickle

import numpy as np
import pytest
import torch
import torch.nn.utils.parametrize as tparam

import luminal as lm
from luminal import nn, train
from luminal.nn.utils import parametrizations, parametrize

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def randn(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def load_from_torch(m, tm):
    m.load_state_dict({k: v.detach().numpy() for k, v in tm.state_dict().items()})


class Symmetric(nn.Module):
    def forward(self, x):
        return x.triu() + x.triu(1).transpose(0, 1)


class TSymmetric(torch.nn.Module):
    def forward(self, x):
        return x.triu() + x.triu(1).transpose(0, 1)


class SymmetricInv(Symmetric):
    def right_inverse(self, a):
        return a.triu()


class TSymmetricInv(TSymmetric):
    def right_inverse(self, a):
        return a.triu()


class Scale(nn.Module):
    def forward(self, x):
        return x * 2.0


class TScale(torch.nn.Module):
    def forward(self, x):
        return x * 2.0


def grads_vs_torch(m, tm, x, rtol=1e-5, atol=1e-5):
    """Forward and the gradient of sum(out * c) w.r.t. every parameter, luminal's train.grad vs torch."""
    g = lm.Graph()
    out = m(g.input("x", x.shape))
    c = randn(*out.shape, seed=7)  # (not from a torch call: a training forward updates spectral norm's vectors)
    names = [n for n, _ in m.named_parameters()]
    assert names == [n for n, _ in tm.named_parameters()]
    grads = train.grad((out * c).sum(), list(m.parameters()))
    got = lm.compile([out, *grads])(x=x)
    tout = tm(torch.from_numpy(x))
    (tout * torch.from_numpy(c)).sum().backward()
    np.testing.assert_allclose(got[0], tout.detach().numpy(), rtol=rtol, atol=atol, err_msg="forward")
    for n, gr, (_, p) in zip(names, got[1:], tm.named_parameters(), strict=True):
        np.testing.assert_allclose(gr, p.grad.numpy(), rtol=rtol, atol=atol, err_msg=f"d/d {n}")


WEIGHT_NORM = [
    ("linear", lambda n: n.Linear(5, 3), (4, 5), 0),
    ("linear_dim1", lambda n: n.Linear(5, 3), (4, 5), 1),
    ("linear_whole", lambda n: n.Linear(5, 3), (4, 5), None),
    ("linear_minus1", lambda n: n.Linear(5, 3), (4, 5), -1),  # torch's -1: the whole tensor
    ("conv2d", lambda n: n.Conv2d(2, 4, 3, padding=1), (2, 2, 5, 5), 0),
    ("conv2d_dim2", lambda n: n.Conv2d(2, 4, 3), (1, 2, 5, 6), 2),
    ("conv2d_minus2", lambda n: n.Conv2d(2, 4, 3), (1, 2, 5, 6), -2),
    ("conv1d_nobias", lambda n: n.Conv1d(3, 2, 2, bias=False), (2, 3, 6), 0),
    ("convT1d", lambda n: n.ConvTranspose1d(3, 2, 3), (2, 3, 4), 1),
]


@pytest.mark.parametrize("make,shape,dim", [c[1:] for c in WEIGHT_NORM], ids=[c[0] for c in WEIGHT_NORM])
def test_weight_norm_matches_torch(make, shape, dim):
    torch.manual_seed(0)
    tm = torch.nn.utils.parametrizations.weight_norm(make(torch.nn), dim=dim)
    m = make(nn)
    w_before = m.weight
    load_from_torch_plain = {k.replace("parametrizations.weight.original1", "weight"): v.detach().numpy()
                             for k, v in tm.state_dict().items() if "original0" not in k}
    m.load_state_dict(load_from_torch_plain)
    assert parametrizations.weight_norm(m, dim=dim) is m
    assert type(m).__name__ == type(tm).__name__  # ParametrizedLinear, ...
    assert list(m.state_dict()) == list(tm.state_dict())
    for k, v in tm.state_dict().items():  # g = ||w|| computed at registration as torch's
        np.testing.assert_allclose(m.state_dict()[k], v.numpy(), rtol=1e-6, atol=1e-6, err_msg=k)
    np.testing.assert_allclose(np.asarray(m.weight), tm.weight.detach().numpy(), rtol=1e-6, atol=1e-6)
    assert m.parametrizations.weight.original1 is not w_before  # (torch's: a new Parameter, v)
    load_from_torch(m, tm)
    grads_vs_torch(m, tm, randn(*shape))


def test_weight_norm_trains_as_torch():
    """Three compiled SGD steps on a weight-normed MLP: g, v and the biases follow torch's."""
    torch.manual_seed(1)
    tm = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2))
    m = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
    for i in (0, 2):
        torch.nn.utils.parametrizations.weight_norm(tm[i])
        parametrizations.weight_norm(m[i])
    load_from_torch(m, tm)
    x, y = randn(5, 3), randn(5, 2, seed=1)
    g = lm.Graph()
    loss = train.mse_loss(m(g.input("x", x.shape)), g.input("y", y.shape))
    step = train.compile_step(loss, train.SGD(m.parameters(), lr=0.1), backend="cpu")
    topt = torch.optim.SGD(tm.parameters(), lr=0.1)
    for _ in range(3):
        got = step(x=x, y=y)
        topt.zero_grad()
        want = torch.nn.functional.mse_loss(tm(torch.from_numpy(x)), torch.from_numpy(y))
        want.backward()
        topt.step()
        np.testing.assert_allclose(got, want.item(), rtol=1e-5)
    for k, v in tm.state_dict().items():
        np.testing.assert_allclose(m.state_dict()[k], v.numpy(), rtol=1e-5, atol=1e-6, err_msg=k)


def test_weight_norm_state_dict_round_trip_to_torch():
    m = parametrizations.weight_norm(nn.Conv1d(2, 3, 2), dim=1)
    m.parametrizations.weight.original0.set(randn(1, 2, 1) + 2)
    tm = torch.nn.utils.parametrizations.weight_norm(torch.nn.Conv1d(2, 3, 2), dim=1)
    tm.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in m.state_dict().items()})
    np.testing.assert_allclose(np.asarray(m.weight), tm.weight.detach().numpy(), rtol=1e-6, atol=1e-6)
    x = randn(2, 2, 5)
    g = lm.Graph()
    out = lm.compile(m(g.input("x", x.shape)))(x=x)
    np.testing.assert_allclose(out, tm(torch.from_numpy(x)).detach().numpy(), rtol=1e-5, atol=1e-5)


def test_weight_norm_bad_dim_and_name():
    with pytest.raises(IndexError, match=r"weight_norm: dim 2 is out of range for weight of shape \(3, 4\)"):
        parametrizations.weight_norm(nn.Linear(4, 3), dim=2)
    with pytest.raises(ValueError, match="no parameter or buffer with name 'kernel'"):
        parametrizations.weight_norm(nn.Linear(4, 3), name="kernel")


@pytest.mark.parametrize("inverse", [False, True])
def test_register_parametrization_matches_torch(inverse):
    torch.manual_seed(2)
    tm, m = torch.nn.Linear(3, 3), nn.Linear(3, 3)
    load_from_torch(m, tm)
    w = m.weight
    tparam.register_parametrization(tm, "weight", TSymmetricInv() if inverse else TSymmetric())
    parametrize.register_parametrization(m, "weight", SymmetricInv() if inverse else Symmetric())
    assert m.parametrizations.weight.original is w  # the same Parameter (optimizers keep it), as torch's
    assert list(m.state_dict()) == list(tm.state_dict()) == ["bias", "parametrizations.weight.original"]
    np.testing.assert_allclose(w.data, tm.parametrizations.weight.original.detach().numpy(), rtol=1e-6)
    w_now = np.asarray(m.weight)
    np.testing.assert_allclose(w_now, w_now.T)
    np.testing.assert_allclose(w_now, tm.weight.detach().numpy(), rtol=1e-6)
    assert parametrize.is_parametrized(m) and parametrize.is_parametrized(m, "weight")
    assert not parametrize.is_parametrized(m, "bias") and not parametrize.is_parametrized(nn.Linear(2, 2))
    assert parametrize.type_before_parametrizations(m) is nn.Linear
    grads_vs_torch(m, tm, randn(4, 3))


def test_assignment_goes_through_right_inverse():
    torch.manual_seed(3)
    tm, m = torch.nn.Linear(3, 3), nn.Linear(3, 3)
    load_from_torch(m, tm)
    tparam.register_parametrization(tm, "weight", TSymmetricInv())
    parametrize.register_parametrization(m, "weight", SymmetricInv())
    a = randn(3, 3, seed=5)
    a = a + a.T
    with torch.no_grad():
        tm.weight = torch.from_numpy(a)
    m.weight = a.astype(np.float64)  # (a plain array takes the tensor's dtype)
    assert "weight" not in m._parameters and "weight" not in m.__dict__
    np.testing.assert_allclose(m.parametrizations.weight.original.data,
                               tm.parametrizations.weight.original.detach().numpy(), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(m.weight), a, rtol=1e-6)
    plain = nn.Linear(3, 3)
    parametrize.register_parametrization(plain, "weight", Symmetric())
    with pytest.raises(RuntimeError, match="parametrization Symmetric does not implement right_inverse"):
        plain.weight = a


def test_chained_parametrizations_and_remove():
    torch.manual_seed(4)
    tm, m = torch.nn.Linear(3, 3), nn.Linear(3, 3)
    load_from_torch(m, tm)
    for reg, mod, sym, scale in ((tparam.register_parametrization, tm, TSymmetric, TScale),
                                 (parametrize.register_parametrization, m, Symmetric, Scale)):
        reg(mod, "weight", sym())
        reg(mod, "weight", scale())
    assert len(m.parametrizations.weight) == 2
    np.testing.assert_allclose(np.asarray(m.weight), tm.weight.detach().numpy(), rtol=1e-6)
    grads_vs_torch(m, tm, randn(2, 3))
    original = m.parametrizations.weight.original
    tparam.remove_parametrizations(tm, "weight")
    parametrize.remove_parametrizations(m, "weight")
    assert type(m) is nn.Linear and not hasattr(m, "parametrizations")
    assert m.weight is original  # leave_parametrized: the original Parameter holds the value
    assert list(m.state_dict()) == list(tm.state_dict()) == ["bias", "weight"]
    np.testing.assert_allclose(m.weight.data, tm.weight.detach().numpy(), rtol=1e-6)


def test_remove_parametrizations_variants():
    m = parametrizations.weight_norm(nn.Linear(3, 2))
    w = np.asarray(m.weight).copy()
    with pytest.raises(ValueError, match="parametrized in terms of a sequence of tensors"):
        parametrize.remove_parametrizations(m, "weight", leave_parametrized=False)
    parametrize.remove_parametrizations(m, "weight")
    assert isinstance(m.weight, nn.Parameter) and list(m.state_dict()) == ["bias", "weight"]
    np.testing.assert_allclose(m.weight.data, w, rtol=1e-6)
    with pytest.raises(ValueError, match="does not have a parametrization on weight"):
        parametrize.remove_parametrizations(m, "weight")
    m = nn.Linear(3, 3)
    w0 = m.weight.data.copy()
    parametrize.register_parametrization(m, "weight", Symmetric())
    parametrize.remove_parametrizations(m, "weight", leave_parametrized=False)
    np.testing.assert_array_equal(m.weight.data, w0)


def test_two_names_and_deepcopy_keep_their_own():
    m = nn.Linear(3, 3)
    parametrize.register_parametrization(m, "weight", Symmetric())
    parametrize.register_parametrization(m, "bias", Scale())
    c = copy.deepcopy(m)
    parametrize.remove_parametrizations(m, "weight")
    assert type(m).__name__ == "ParametrizedLinear" and parametrize.is_parametrized(m, "bias")
    assert parametrize.is_parametrized(c, "weight")  # the copy's class is not changed by m's removal
    np.testing.assert_allclose(np.asarray(c.bias), 2 * c.parametrizations.bias.original.data, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(c.weight), np.asarray(c.weight).T)
    with pytest.raises(RuntimeError, match="only supported through state_dict"):
        pickle.dumps(c)


def test_parametrized_buffer():
    bn = nn.BatchNorm1d(3)
    bn.running_var.set(np.array([1.0, 4.0, 9.0]))
    parametrize.register_parametrization(bn, "running_var", Scale())
    assert list(bn.state_dict()) == ["weight", "bias", "running_mean", "num_batches_tracked",
                                     "parametrizations.running_var.original"]
    tb = torch.nn.BatchNorm1d(3)
    tparam.register_parametrization(tb, "running_var", TScale())
    assert list(bn.state_dict()) == list(tb.state_dict())
    np.testing.assert_allclose(np.asarray(bn.running_var), [2.0, 8.0, 18.0])


def test_checks_without_unsafe():
    class Crop(nn.Module):
        def forward(self, x):
            return x[:2]

    class Half(nn.Module):
        def forward(self, x):
            return x.to(lm.float16)

    with pytest.raises(ValueError, match=r"may not change the shape .*\nunparametrized shape: \(3, 4\)\n"
                                         r"parametrized shape: \(2, 4\)"):
        parametrize.register_parametrization(nn.Linear(4, 3), "weight", Crop())
    with pytest.raises(ValueError, match="may not change the dtype"):
        parametrize.register_parametrization(nn.Linear(4, 3), "weight", Half())
    m = parametrize.register_parametrization(nn.Linear(4, 3), "weight", Crop(), unsafe=True)
    assert m.weight.shape == (2, 4)
    with pytest.raises(ValueError, match="does not have a parameter, a buffer, or a parametrized element with name "
                                         "'kernel'"):
        parametrize.register_parametrization(nn.Linear(4, 3), "kernel", Scale())


def test_reads_outside_a_module_call_and_cached():
    """``m.weight.on(g)`` at the top level builds the parametrization in g (gradients reach the
    originals); inside cached() a graph builds it once per module."""
    m = parametrizations.weight_norm(nn.Linear(3, 2))
    g = lm.Graph()
    w = m.weight.on(g)
    x = g.input("x", (4, 3))
    dg, dv = train.grad((x @ w.T).sum(), list(m.parametrizations.weight.originals()))
    tm = torch.nn.utils.parametrizations.weight_norm(torch.nn.Linear(3, 2))
    load_from_torch_map = {k: torch.from_numpy(v.copy()) for k, v in m.state_dict().items()}
    tm.load_state_dict(load_from_torch_map)
    xs = randn(4, 3)
    (torch.from_numpy(xs) @ tm.weight.T).sum().backward()
    got = lm.compile([dg, dv])(x=xs)
    np.testing.assert_allclose(got[0], tm.parametrizations.weight.original0.grad.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[1], tm.parametrizations.weight.original1.grad.numpy(), rtol=1e-5, atol=1e-6)
    g2 = lm.Graph()
    with parametrize.cached():
        a, b = m.weight.on(g2), m.weight.on(g2)
        assert a.node is b.node
    assert not getattr(parametrize._cache, "table", {})  # (emptied on leaving the block)


SPECTRAL = [
    ("linear", lambda n: n.Linear(4, 3), (2, 4), {}),
    ("linear_3iters", lambda n: n.Linear(3, 5), (2, 3), {"n_power_iterations": 3}),
    ("conv2d", lambda n: n.Conv2d(2, 3, 2), (1, 2, 4, 4), {}),
    ("conv2d_dim1", lambda n: n.Conv2d(2, 3, 2), (1, 2, 4, 4), {"dim": 1}),
    ("convT1d", lambda n: n.ConvTranspose1d(2, 3, 2), (2, 2, 4), {}),  # (dim 1 by default)
    ("bias_1d", lambda n: n.Linear(3, 4), (2, 3), {"name": "bias"}),
]


@pytest.mark.parametrize("train_mode", [True, False])
@pytest.mark.parametrize("make,shape,kw", [c[1:] for c in SPECTRAL], ids=[c[0] for c in SPECTRAL])
def test_spectral_norm_matches_torch(make, shape, kw, train_mode):
    """Forward, gradients and, in training mode, the power-iteration vectors written back after the run
    (torch's in-place update), from torch's state (its random start vectors)."""
    torch.manual_seed(5)
    tm = torch.nn.utils.parametrizations.spectral_norm(make(torch.nn), **kw).train(train_mode)
    m = parametrizations.spectral_norm(make(nn), **kw).train(train_mode)
    assert list(m.state_dict()) == list(tm.state_dict())
    load_from_torch(m, tm)
    before = {k: v.copy() for k, v in m.state_dict().items()}
    grads_vs_torch(m, tm, randn(*shape))
    for k, v in tm.state_dict().items():  # (float32 power iteration: a few ulps of cancellation in _v)
        np.testing.assert_allclose(m.state_dict()[k], v.numpy(), rtol=1e-5, atol=1e-5, err_msg=k)
        if k.endswith(("_u", "_v")) and not train_mode:
            np.testing.assert_array_equal(m.state_dict()[k], before[k])


def test_spectral_norm_trains_as_torch():
    torch.manual_seed(6)
    tm = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2))
    m = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
    for i in (0, 2):
        torch.nn.utils.parametrizations.spectral_norm(tm[i])
        parametrizations.spectral_norm(m[i])
    load_from_torch(m, tm)
    x, y = randn(5, 3), randn(5, 2, seed=1)
    g = lm.Graph()
    loss = train.mse_loss(m(g.input("x", x.shape)), g.input("y", y.shape))
    step = train.compile_step(loss, train.SGD(m.parameters(), lr=0.2), backend="cpu")
    topt = torch.optim.SGD(tm.parameters(), lr=0.2)
    for _ in range(3):
        got = step(x=x, y=y)
        topt.zero_grad()
        want = torch.nn.functional.mse_loss(tm(torch.from_numpy(x)), torch.from_numpy(y))
        want.backward()
        topt.step()
        np.testing.assert_allclose(got, want.item(), rtol=1e-5)
    for k, v in tm.state_dict().items():
        np.testing.assert_allclose(m.state_dict()[k], v.numpy(), rtol=1e-5, atol=1e-6, err_msg=k)


def test_spectral_norm_start_and_errors():
    lm.manual_seed(0)
    m = parametrizations.spectral_norm(nn.Linear(6, 4))
    w = m.parametrizations.weight.original.data.astype(np.float64)
    sigma = np.linalg.svd(w, compute_uv=False)[0]  # 15 iterations at registration: close to the top one
    u, v = m.parametrizations.weight[0]._u.data, m.parametrizations.weight[0]._v.data
    np.testing.assert_allclose(u @ w @ v, sigma, rtol=1e-2)
    np.testing.assert_allclose(np.linalg.norm(u), 1, rtol=1e-6)
    with pytest.raises(IndexError, match=r"Dimension out of range \(expected to be in range of \[-2, 1\] but got 2\)"):
        parametrizations.spectral_norm(nn.Linear(2, 2), dim=2)
    with pytest.raises(ValueError, match="n_power_iterations to be positive"):
        parametrizations.spectral_norm(nn.Linear(2, 2), n_power_iterations=0)


@pytest.mark.filterwarnings("ignore:`torch.nn.utils.weight_norm` is deprecated:FutureWarning")
@pytest.mark.parametrize("make,shape,dim", [c[1:] for c in WEIGHT_NORM], ids=[c[0] for c in WEIGHT_NORM])
def test_old_weight_norm_matches_torch(make, shape, dim):
    """torch's older nn.utils.weight_norm: weight_g / weight_v, values and gradients, then removal."""
    torch.manual_seed(7)
    tm = torch.nn.utils.weight_norm(make(torch.nn), dim=dim)
    m = make(nn)
    with pytest.warns(FutureWarning, match="parametrizations.weight_norm"):
        assert nn.utils.weight_norm(m, dim=dim) is m
    assert list(m.state_dict()) == list(tm.state_dict())
    load_from_torch(m, tm)
    np.testing.assert_allclose(np.asarray(m.weight), tm.weight.detach().numpy(), rtol=1e-6, atol=1e-6)
    grads_vs_torch(m, tm, randn(*shape))
    assert type(m).__name__ == type(tm).__name__ and not parametrize.is_parametrized(m)  # (torch's keeps its class)
    with pytest.raises(AttributeError, match="weight is computed from weight_g and weight_v"):
        m.weight = np.zeros(tuple(m.weight.shape), np.float32)
    torch.nn.utils.remove_weight_norm(tm)
    assert nn.utils.remove_weight_norm(m) is m
    assert type(m) is type(make(nn))
    assert list(m.state_dict()) == list(tm.state_dict())
    np.testing.assert_allclose(m.weight.data, tm.weight.detach().numpy(), rtol=1e-6, atol=1e-6)


@pytest.mark.filterwarnings("ignore:`torch.nn.utils.weight_norm` is deprecated:FutureWarning")
def test_old_weight_norm_errors_and_old_checkpoint_into_new_api():
    m = nn.utils.weight_norm(nn.Linear(3, 2))
    with pytest.raises(RuntimeError, match="Cannot register two weight_norm hooks on the same parameter weight"):
        nn.utils.weight_norm(m)
    with pytest.raises(ValueError, match="weight_norm of 'bias' not found in Linear"):
        nn.utils.remove_weight_norm(m, "bias")
    torch.manual_seed(8)
    old = torch.nn.utils.weight_norm(torch.nn.Conv1d(2, 3, 2))  # a checkpoint with weight_g / weight_v
    new = parametrizations.weight_norm(nn.Conv1d(2, 3, 2))
    assert not new.load_state_dict({k: v.detach().numpy() for k, v in old.state_dict().items()}).missing_keys
    np.testing.assert_allclose(np.asarray(new.weight), old.weight.detach().numpy(), rtol=1e-6)
    np.testing.assert_array_equal(new.parametrizations.weight.original0.data, old.weight_g.detach().numpy())


def test_load_state_dict_pre_hooks():
    """Module.register_load_state_dict_pre_hook (and torch's private form): hooks rewrite a copy of the
    state_dict, parents first, with each module's prefix; an error message fails the load."""
    m = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 1))
    calls = []

    def rename(module, sd, prefix, *rest):
        calls.append((type(module).__name__, prefix))
        if f"{prefix}w" in sd:
            sd[f"{prefix}weight"] = sd.pop(f"{prefix}w")

    m.register_load_state_dict_pre_hook(rename)
    handle = m[1].register_load_state_dict_pre_hook(rename)
    sd = {k: v.copy() + 1 for k, v in m.state_dict().items()}
    sd["1.w"] = sd.pop("1.weight")
    given = dict(sd)
    m.load_state_dict(sd)
    assert calls == [("Sequential", ""), ("Linear", "1.")] and sd == given  # (the caller's dict is not changed)
    np.testing.assert_array_equal(m[1].weight.data, given["1.w"])
    handle.remove()
    m._register_load_state_dict_pre_hook(lambda sd, prefix, meta, strict, missing, unexpected, errors:
                                         errors.append("refused by the hook"))
    with pytest.raises(RuntimeError, match="refused by the hook"):
        m.load_state_dict(m.state_dict())


OLD_SPECTRAL = [
    ("linear", lambda n: n.Linear(4, 3), (2, 4), {}),
    ("conv1d_3iters", lambda n: n.Conv1d(2, 3, 2), (2, 2, 5), {"n_power_iterations": 3}),
    ("convT1d", lambda n: n.ConvTranspose1d(2, 3, 2), (2, 2, 4), {}),  # (dim 1 by default)
]


@pytest.mark.parametrize("train_mode", [True, False])
@pytest.mark.parametrize("make,shape,kw", [c[1:] for c in OLD_SPECTRAL], ids=[c[0] for c in OLD_SPECTRAL])
def test_old_spectral_norm_matches_torch(make, shape, kw, train_mode):
    """torch's older nn.utils.spectral_norm: weight_orig / weight_u / weight_v, values, gradients, the
    vectors written back in training mode (left alone in eval), then removal."""
    torch.manual_seed(9)
    tm = torch.nn.utils.spectral_norm(make(torch.nn), **kw).train(train_mode)
    m = nn.utils.spectral_norm(make(nn), **kw).train(train_mode)
    assert type(m).__name__ == type(tm).__name__ and list(m.state_dict()) == list(tm.state_dict())
    load_from_torch(m, tm)
    before = m.weight_u.data.copy()
    grads_vs_torch(m, tm, randn(*shape), rtol=1e-4)
    for k, v in tm.state_dict().items():
        np.testing.assert_allclose(m.state_dict()[k], v.numpy(), rtol=1e-5, atol=1e-5, err_msg=k)
    assert np.abs(m.weight_u.data - before).max() > 0 if train_mode else np.array_equal(m.weight_u.data, before)
    with pytest.raises(AttributeError, match="weight is computed from weight_orig"):
        m.weight = np.zeros(tuple(m.weight.shape), np.float32)
    torch.nn.utils.remove_spectral_norm(tm)
    assert nn.utils.remove_spectral_norm(m) is m
    assert type(m) is type(make(nn)) and list(m.state_dict()) == list(tm.state_dict())
    np.testing.assert_allclose(m.weight.data, tm.weight.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_old_spectral_norm_trains_as_torch_and_errors():
    torch.manual_seed(10)
    tm = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2))
    m = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
    for i in (0, 2):
        torch.nn.utils.spectral_norm(tm[i])
        nn.utils.spectral_norm(m[i])
    load_from_torch(m, tm)
    x, y = randn(5, 3), randn(5, 2, seed=1)
    g = lm.Graph()
    loss = train.mse_loss(m(g.input("x", x.shape)), g.input("y", y.shape))
    step = train.compile_step(loss, train.SGD(m.parameters(), lr=0.2), backend="cpu")
    topt = torch.optim.SGD(tm.parameters(), lr=0.2)
    for _ in range(3):
        got = step(x=x, y=y)
        topt.zero_grad()
        want = torch.nn.functional.mse_loss(tm(torch.from_numpy(x)), torch.from_numpy(y))
        want.backward()
        topt.step()
        np.testing.assert_allclose(got, want.item(), rtol=1e-5)
    for k, v in tm.state_dict().items():
        np.testing.assert_allclose(m.state_dict()[k], v.numpy(), rtol=1e-5, atol=1e-5, err_msg=k)
    with pytest.raises(RuntimeError, match="Cannot register two spectral_norm hooks on the same parameter weight"):
        nn.utils.spectral_norm(m[0])
    with pytest.raises(ValueError, match="spectral_norm of 'bias' not found in Linear"):
        nn.utils.remove_spectral_norm(m[0], "bias")
    with pytest.raises(ValueError, match="cannot be applied as parameter `kernel` is None"):
        nn.utils.spectral_norm(nn.Linear(2, 2), name="kernel")
    old = {"bias": np.zeros(4, np.float32), "weight_orig": np.ones((4, 3), np.float32),
           "weight": np.ones((4, 3), np.float32), "weight_u": np.ones(4, np.float32)}
    with pytest.raises(RuntimeError, match="spectral_norm checkpoint from before torch 1.0"):
        m[0].load_state_dict(old)


def test_transfer_parametrizations_and_params():
    src = parametrizations.weight_norm(nn.Linear(3, 2))
    dst = nn.Linear(3, 2)
    assert parametrize.transfer_parametrizations_and_params(src, dst) is dst
    assert parametrize.is_parametrized(dst, "weight") and list(dst.state_dict()) == list(src.state_dict())
    assert dst.parametrizations.weight.original1 is src.parametrizations.weight.original1  # shared, as torch's
    assert dst.parametrizations.weight[0] is src.parametrizations.weight[0]
    np.testing.assert_allclose(np.asarray(dst.weight), np.asarray(src.weight), rtol=1e-6)


def test_orthogonal_is_refused_by_name():
    with pytest.raises(NotImplementedError, match=r"parametrizations.orthogonal\(Linear, 'weight', "
                                                  r"orthogonal_map=None\) is not supported: .*matrix_exp"):
        parametrizations.orthogonal(nn.Linear(3, 3))
