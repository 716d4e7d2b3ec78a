"""``nn.utils.convert_parameters`` (parameters_to_vector, vector_to_parameters) and ``nn.utils.fusion``
(fuse_conv_bn_eval, fuse_linear_bn_eval and their ``*_weights``) against torch's."""

import numpy as np
import pytest
import torch
import torch.nn.utils as tutils
import torch.nn.utils.fusion as tfusion

import luminal as lm
from luminal import nn, train
from luminal.nn.utils import fusion
from luminal.nn.utils.convert_parameters import parameters_to_vector, vector_to_parameters

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def randn(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def load_from_torch(m, tm):
    m.load_state_dict({k: v.detach().numpy().astype(np.int32) if v.dtype == torch.int64 else v.detach().numpy()
                       for k, v in tm.state_dict().items()})


def pair(make):
    torch.manual_seed(0)
    tm, m = make(torch.nn), make(nn)
    load_from_torch(m, tm)
    return m, tm


def test_parameters_to_vector_values():
    m, tm = pair(lambda n: n.Sequential(n.Linear(3, 4), n.Conv1d(2, 3, 2), n.LayerNorm(4)))
    v = parameters_to_vector(m.parameters())  # outside any graph: the current values
    np.testing.assert_array_equal(np.asarray(v), tutils.parameters_to_vector(tm.parameters()).detach().numpy())


def test_parameters_to_vector_gradient_in_a_forward():
    """An L2 penalty on the flat vector inside a forward: its gradient reaches every parameter."""

    class Net(nn.Module):
        def __init__(self, body):
            super().__init__()
            self.body = body

        def forward(self, x):
            return self.body(x).sum() + 0.5 * parameters_to_vector(self.parameters()).pow(2).sum()

    m, tm = pair(lambda n: n.Sequential(n.Linear(3, 4), n.Tanh(), n.Linear(4, 2)))
    net = Net(m)
    x = randn(5, 3)
    g = lm.Graph()
    loss = net(g.input("x", x.shape))
    got = lm.compile(list(train.grad(loss, list(net.parameters()))))(x=x)
    tloss = tm(torch.from_numpy(x)).sum() + 0.5 * tutils.parameters_to_vector(tm.parameters()).pow(2).sum()
    tloss.backward()
    for a, (n, p) in zip(got, tm.named_parameters(), strict=True):
        np.testing.assert_allclose(a, p.grad.numpy(), rtol=1e-5, atol=1e-6, err_msg=n)


def test_parameters_to_vector_of_graph_tensors():
    m = nn.Linear(2, 3)
    g = lm.Graph()
    v = parameters_to_vector([p.on(g) for p in m.parameters()])
    assert v.graph is g and v.shape == (9,)
    (dw, db) = lm.compile(list(train.grad((v * v).sum(), [m.weight, m.bias])))()
    np.testing.assert_allclose(dw, 2 * m.weight.data, rtol=1e-6)
    np.testing.assert_allclose(db, 2 * m.bias.data, rtol=1e-6)


def test_vector_to_parameters_matches_torch():
    m, tm = pair(lambda n: n.Sequential(n.Linear(3, 4), n.Linear(4, 2)))
    vec = randn(26, seed=3)
    tutils.vector_to_parameters(torch.from_numpy(vec), tm.parameters())
    kept = [p for p in m.parameters()]
    vector_to_parameters(vec.astype(np.float64), m.parameters())  # (converted to each parameter's dtype)
    assert list(m.parameters()) == kept and all(p.dtype is lm.float32 for p in kept)
    for k, v in tm.state_dict().items():
        np.testing.assert_array_equal(m.state_dict()[k], v.numpy(), err_msg=k)
    vector_to_parameters(parameters_to_vector(m.parameters()) * 2, m.parameters())  # a host tensor: values now
    np.testing.assert_allclose(m[1].bias.data, 2 * tm[1].bias.detach().numpy(), rtol=1e-6)


def test_vector_to_parameters_errors():
    m = nn.Linear(2, 3)
    before = m.weight.data.copy()
    with pytest.raises(ValueError, match="vec has 8 elements but the 2 parameters hold 9"):
        vector_to_parameters(np.zeros(8), m.parameters())
    with pytest.raises(ValueError, match=r"vec must be 1-d, got shape \(3, 3\)"):
        vector_to_parameters(np.zeros((3, 3)), m.parameters())
    g = lm.Graph()
    with pytest.raises(ValueError, match="tensor of a graph, whose values are known only when a compiled program"):
        vector_to_parameters(g.input("v", (9,)), m.parameters())
    with pytest.raises(TypeError, match="parameter 0 is a tensor of a graph"):
        vector_to_parameters(np.zeros(9), [m.weight.on(g), m.bias])
    with pytest.raises(ValueError, match="parameters_to_vector: no parameters given"):
        parameters_to_vector([])
    np.testing.assert_array_equal(m.weight.data, before)


def run(m, x):
    g = lm.Graph()
    return lm.compile(m(g.input("x", x.shape)))(x=x)


def perturbed_bn(tbn, seed):
    with torch.no_grad():
        c = tbn.num_features
        tbn.running_mean.copy_(torch.from_numpy(randn(c, seed=seed)))
        tbn.running_var.copy_(torch.from_numpy(np.abs(randn(c, seed=seed + 1)) + 0.5))
        if tbn.affine:
            tbn.weight.copy_(torch.from_numpy(randn(c, seed=seed + 2)))
            tbn.bias.copy_(torch.from_numpy(randn(c, seed=seed + 3)))
    return tbn


CONV_BN = [
    ("conv2d", lambda n: n.Conv2d(3, 4, 3, padding=1), lambda n: n.BatchNorm2d(4), (2, 3, 5, 5), False),
    ("conv1d_nobias_noaffine", lambda n: n.Conv1d(2, 3, 2, bias=False), lambda n: n.BatchNorm1d(3, affine=False),
     (2, 2, 6), False),
    ("conv_transpose2d", lambda n: n.ConvTranspose2d(3, 2, 2, stride=2), lambda n: n.BatchNorm2d(2), (1, 3, 3, 4),
     True),
]


@pytest.mark.parametrize("make_conv,make_bn,shape,transpose", [c[1:] for c in CONV_BN], ids=[c[0] for c in CONV_BN])
def test_fuse_conv_bn_eval(make_conv, make_bn, shape, transpose):
    conv, tconv = pair(make_conv)
    tbn = perturbed_bn(make_bn(torch.nn), seed=4)
    bn = make_bn(nn)
    load_from_torch(bn, tbn)
    for mod in (conv, tconv, bn, tbn):
        mod.eval()
    fused = fusion.fuse_conv_bn_eval(conv, bn, transpose=transpose)
    tfused = tfusion.fuse_conv_bn_eval(tconv, tbn, transpose=transpose)
    assert fused is not conv and type(fused) is type(conv)
    assert list(fused.state_dict()) == list(tfused.state_dict())
    for k, v in tfused.state_dict().items():
        np.testing.assert_allclose(fused.state_dict()[k], v.numpy(), rtol=1e-5, atol=1e-6, err_msg=k)
    assert [p.requires_grad for p in fused.parameters()] == [p.requires_grad for p in tfused.parameters()]
    x = randn(*shape, seed=9)
    want = tbn(tconv(torch.from_numpy(x))).detach().numpy()
    np.testing.assert_allclose(run(fused, x), want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(run(nn.Sequential(conv, bn), x), want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("features,bias", [(3, True), (1, True), (1, False)])
def test_fuse_linear_bn_eval(features, bias):
    lin, tlin = pair(lambda n: n.Linear(4, 3, bias=bias))
    tbn = perturbed_bn(torch.nn.BatchNorm1d(features), seed=5)
    bn = nn.BatchNorm1d(features)
    load_from_torch(bn, tbn)
    for mod in (lin, tlin, bn, tbn):
        mod.eval()
    fused = fusion.fuse_linear_bn_eval(lin, bn)
    tfused = tfusion.fuse_linear_bn_eval(tlin, tbn)
    np.testing.assert_allclose(fused.weight.data, tfused.weight.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.broadcast_to(tfused.bias.detach().numpy(), (3,)), fused.bias.data, rtol=1e-5,
                               atol=1e-6)
    assert fused.bias.shape == (3,)  # (torch's is (1,) for a bias-less Linear and a 1-feature BatchNorm)
    x = randn(6, 4, seed=2)
    np.testing.assert_allclose(run(fused, x), tfused(torch.from_numpy(x)).detach().numpy(), rtol=1e-4, atol=1e-5)
    if features == 3:
        want = tbn(tlin(torch.from_numpy(x))).detach().numpy()
        np.testing.assert_allclose(run(fused, x), want, rtol=1e-4, atol=1e-5)


def test_fusion_errors():
    conv, bn = nn.Conv2d(2, 3, 1), nn.BatchNorm2d(3)
    with pytest.raises(ValueError, match=r"fusion only for eval: the layer Conv2d\(.*\) is in training mode"):
        fusion.fuse_conv_bn_eval(conv, bn)
    conv.eval()
    with pytest.raises(ValueError, match="the BatchNorm BatchNorm2d.* is in training mode"):
        fusion.fuse_conv_bn_eval(conv, bn)
    with pytest.raises(ValueError, match="has no running statistics"):
        fusion.fuse_conv_bn_eval(conv, nn.BatchNorm2d(3, track_running_stats=False).eval())
    with pytest.raises(ValueError, match=r"weight \(3, 2, 1, 1\) has 3 output channels \(dim 0\) but the "
                                         r"BatchNorm's statistics have shape \(4,\)"):
        fusion.fuse_conv_bn_eval(conv, nn.BatchNorm2d(4).eval())
    with pytest.raises(ValueError, match="linear.out_features == bn.num_features or bn.num_features == 1, got "
                                         "linear.out_features=3 and bn.num_features=2"):
        fusion.fuse_linear_bn_eval(nn.Linear(2, 3).eval(), nn.BatchNorm1d(2).eval())
