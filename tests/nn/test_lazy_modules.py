"""torch's lazy modules against torch: reprs and state_dict keys before and after the first call, the
sizes inferred from it, values and gradients with the same (materialised) weights, torch's
initialisation, an optimizer made before the first call training them through a compiled step, loads
into an uninitialised module, copies, and the errors (symbolic sizes, uninitialised parameters)."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest
import torch
from parity import check, rand

import luminal as lm
from luminal import nn, train

pytestmark = pytest.mark.usefixtures("one_torch_thread")

CASES = [  # (class name, args, kwargs, input shape, what the first call sets)
    ("LazyLinear", (4,), {}, (2, 3), "in_features"),
    ("LazyLinear", (2,), {"bias": False}, (2, 5, 3), "in_features"),
    ("LazyConv1d", (4, 3), {"padding": 1}, (2, 3, 6), "in_channels"),
    ("LazyConv2d", (4, 3), {"stride": 2, "groups": 2}, (2, 6, 7, 5), "in_channels"),
    ("LazyConv2d", (2, 1), {"bias": False}, (3, 4, 5), "in_channels"),  # unbatched
    ("LazyConv3d", (2, (1, 2, 2)), {}, (1, 2, 3, 4, 4), "in_channels"),
    ("LazyConvTranspose1d", (4, 3), {"stride": 2, "output_padding": 1}, (2, 3, 5), "in_channels"),
    ("LazyConvTranspose2d", (4, 3), {"groups": 2, "dilation": 2}, (2, 4, 5, 4), "in_channels"),
    ("LazyConvTranspose3d", (2, 2), {}, (1, 3, 2, 3, 3), "in_channels"),
    ("LazyBatchNorm1d", (), {}, (6, 3), "num_features"),
    ("LazyBatchNorm2d", (), {"momentum": 0.3}, (4, 3, 2, 2), "num_features"),
    ("LazyBatchNorm3d", (), {"affine": False}, (2, 3, 2, 2, 2), "num_features"),
    ("LazyInstanceNorm1d", (), {}, (2, 3, 5), "num_features"),
    ("LazyInstanceNorm2d", (), {"track_running_stats": False}, (2, 3, 4, 4), "num_features"),
    ("LazyInstanceNorm3d", (), {"bias": False}, (2, 3, 2, 3, 2), "num_features"),
]
IDS = [f"{c[0]}-{'x'.join(map(str, c[3]))}" for c in CASES]


def _both(name, args, kwargs):
    return getattr(nn, name)(*args, **kwargs), getattr(torch.nn, name)(*args, **kwargs)


def _copy_into(torch_module, m) -> None:
    torch_module.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in m.state_dict().items()})


@pytest.mark.parametrize(("name", "args", "kwargs", "shape", "attr"), CASES, ids=IDS)
def test_lazy_module_becomes_the_layer_as_torchs(name, args, kwargs, shape, attr):
    m, ref = _both(name, args, kwargs)
    assert repr(m) == repr(ref)
    assert list(m.state_dict(keep_vars=True)) == list(ref.state_dict(keep_vars=True))
    assert [n for n, _ in m.named_parameters()] == [n for n, _ in ref.named_parameters()]
    assert all(isinstance(p, nn.UninitializedParameter) for p in m.parameters())
    assert m.has_uninitialized_params() == ref.has_uninitialized_params()
    m(lm.Graph().input("x", shape))
    with torch.no_grad():
        ref(torch.zeros(shape))
    assert type(m).__name__ == type(ref).__name__ == name[4:]
    assert isinstance(m, getattr(nn, name[4:]))
    assert getattr(m, attr) == getattr(ref, attr) > 0
    assert repr(m) == repr(ref)
    assert {k: tuple(v.shape) for k, v in m.state_dict().items()} == \
        {k: tuple(v.shape) for k, v in ref.state_dict().items()}
    assert all(type(p) is nn.Parameter for p in m.parameters())
    assert all(type(b) is nn.Buffer for b in m.buffers())


@pytest.mark.parametrize(("name", "args", "kwargs", "shape", "attr"), CASES, ids=IDS)
def test_lazy_module_values_and_input_grads(name, args, kwargs, shape, attr):
    """Materialised here, the same weights copied into torch's (materialised by a no-grad call)."""
    m, ref = _both(name, args, kwargs)

    def op(t):
        if not isinstance(t, torch.Tensor):
            return m(t)
        with torch.no_grad():
            ref(t)
        _copy_into(ref, m)
        return ref(t)

    w = rand(_out_shape(name, args, kwargs, shape), seed=5)  # (a weighted sum: norms' plain sums have no gradient)
    check(lambda t: op(t) * (torch.from_numpy(w) if isinstance(t, torch.Tensor) else t.graph.constant(w)),
          [rand(shape, seed=1)])


def _out_shape(name, args, kwargs, shape):
    with torch.no_grad():
        return tuple(getattr(torch.nn, name)(*args, **kwargs)(torch.zeros(shape)).shape)


def test_lazy_linear_and_conv_parameter_grads_and_a_compiled_step_from_an_early_optimizer():
    """An optimizer made over parameters() before the first call trains them, as torch's."""
    model = nn.Sequential(nn.LazyConv1d(3, 2), nn.Tanh(), nn.Flatten(), nn.LazyLinear(2))
    opt = train.SGD(model.parameters(), lr=0.1, momentum=0.9)
    g = lm.Graph()
    x, t = g.input("x", (4, 2, 5)), g.input("t", (4, 2))
    loss = ((model(x) - t) ** 2).mean()
    grads = train.grad(loss, list(model.parameters()))
    xs, ts = rand((4, 2, 5), seed=2), rand((4, 2), seed=3)
    got = lm.compile(grads)(x=xs, t=ts)
    ref = torch.nn.Sequential(torch.nn.Conv1d(2, 3, 2), torch.nn.Tanh(), torch.nn.Flatten(), torch.nn.Linear(12, 2))
    _copy_into(ref, model)
    before = {k: np.array(v) for k, v in model.state_dict().items()}
    tloss = ((ref(torch.from_numpy(xs)) - torch.from_numpy(ts)) ** 2).mean()
    tloss.backward()
    for (k, p), gv in zip(ref.named_parameters(), got):
        np.testing.assert_allclose(gv, p.grad.numpy(), rtol=1e-4, atol=1e-6, err_msg=k)
    step = train.compile_step(loss, opt)
    topt = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
    for _ in range(2):
        step(x=xs, t=ts)
        topt.zero_grad()
        ((ref(torch.from_numpy(xs)) - torch.from_numpy(ts)) ** 2).mean().backward()
        topt.step()
    for k, v in ref.state_dict().items():
        np.testing.assert_allclose(model.state_dict()[k], v.numpy(), rtol=1e-5, atol=1e-6, err_msg=k)
        assert not np.array_equal(model.state_dict()[k], before[k])


def test_lazy_initialisation_is_torchs():
    """Linear's and Conv's kaiming-uniform with a = sqrt(5) (bound 1/sqrt(fan_in)), BatchNorm's ones,
    zeros and running statistics."""
    lm.manual_seed(0)
    lin = nn.LazyLinear(400)
    lin(lm.Graph().input("x", (1, 25)))
    w = np.asarray(lin.weight)
    assert np.abs(w).max() <= 0.2 and np.abs(w).max() > 0.199 and abs(w.std() - 0.2 / np.sqrt(3)) < 2e-3
    assert np.abs(np.asarray(lin.bias)).max() <= 0.2 and np.asarray(lin.bias).std() > 0.1
    conv = nn.LazyConv2d(64, 3, groups=2)
    conv(lm.Graph().input("x", (1, 8, 5, 5)))
    assert conv.weight.shape == (64, 4, 3, 3)
    assert np.abs(np.asarray(conv.weight)).max() <= 1 / 6 and np.abs(np.asarray(conv.bias)).max() <= 1 / 6
    bn = nn.LazyBatchNorm2d(dtype=lm.float64)
    bn(lm.Graph().input("x", (2, 5, 3, 3), dtype=lm.float64))
    for k, want in {"weight": 1, "bias": 0, "running_mean": 0, "running_var": 1}.items():
        np.testing.assert_array_equal(bn.state_dict()[k], np.full(5, want, np.float64))
        assert bn.state_dtypes()[k] is lm.float64
    assert int(bn.state_dict()["num_batches_tracked"]) == 0


def test_lazy_batchnorm_trains_its_running_statistics():
    bn, ref = _both("LazyBatchNorm1d", (), {"momentum": 0.5})
    g = lm.Graph()
    x = g.input("x", (8, 3))
    f = lm.compile(bn(x))
    a = rand((8, 3), seed=4)
    f(x=a)
    ref(torch.from_numpy(a))
    for k, v in ref.state_dict().items():
        np.testing.assert_allclose(bn.state_dict()[k], v.numpy(), rtol=1e-5, atol=1e-6, err_msg=k)


def test_lazy_instance_norm_takes_an_unbatched_inputs_channels():
    """(C, L): the channels are dim 0 (torch's lazy instance norms take dim 1 there, and then fail)."""
    m = nn.LazyInstanceNorm1d()
    m(lm.Graph().input("x", (3, 5)))
    assert m.num_features == 3 and m.weight.shape == (3,)


def test_load_state_dict_into_an_uninitialised_module_as_torchs():
    m, ref = _both("LazyLinear", (4,), {})
    sd = {"weight": rand((4, 3), seed=1), "bias": rand((4,), seed=2)}
    m.load_state_dict(sd)
    ref.load_state_dict({k: torch.from_numpy(v) for k, v in sd.items()})
    assert repr(m) == repr(ref) == "LazyLinear(in_features=0, out_features=4, bias=True)"
    np.testing.assert_array_equal(m.state_dict()["weight"], sd["weight"])
    g = lm.Graph()
    x = g.input("x", (2, 3))
    y = lm.compile(m(x))(x=rand((2, 3)))
    assert repr(m) == "Linear(in_features=3, out_features=4, bias=True)"
    np.testing.assert_allclose(y, rand((2, 3)) @ sd["weight"].T + sd["bias"], rtol=1e-5, atol=1e-6)
    bad = nn.LazyConv2d(2, 3)
    bad.load_state_dict({"weight": np.zeros((2, 5, 3, 3), np.float32), "bias": np.zeros(2, np.float32)})
    with pytest.raises(ValueError, match=r"^LazyConv2d: the in_channels inferred from the input \(4\) is not the "
                                         r"in_channels of the loaded parameters \(5\)"):
        bad(lm.Graph().input("x", (1, 4, 6, 6)))


def test_lazy_modules_copy_and_pickle_before_and_after():
    m = nn.Sequential(nn.LazyLinear(4), nn.ReLU(), nn.LazyLinear(2))
    twin, unpickled = copy.deepcopy(m), pickle.loads(pickle.dumps(m))
    twin(lm.Graph().input("x", (5, 3)))
    assert repr(m[0]) == "LazyLinear(in_features=0, out_features=4, bias=True)"  # (the original is still lazy)
    m(lm.Graph().input("x", (5, 7)))
    unpickled(lm.Graph().input("x", (5, 2)))
    assert (twin[0].in_features, m[0].in_features, unpickled[0].in_features) == (3, 7, 2)
    assert m[2].in_features == 4 and isinstance(m[2], nn.Linear)


def test_uninitialised_parameters_refuse_clearly():
    m = nn.LazyLinear(3)
    msg = r"uninitialized parameter or buffer of a lazy module .* until the module is first called on an input"
    with pytest.raises(ValueError, match=r"cannot read or assign the values \(\.data, state_dict\) of an " + msg):
        m.state_dict()
    for use in (lambda: m.weight.shape, lambda: m.weight.numel(), lambda: np.asarray(m.bias),
                lambda: m.weight.on(lm.Graph()), lambda: m.weight.set(np.zeros(3))):
        with pytest.raises(ValueError, match=msg):
            use()
    p = nn.UninitializedParameter(dtype=lm.float64)
    assert p.requires_grad and p.dtype is lm.float64 and "uninitialized" in repr(p).lower()
    p.materialize((2, 3))
    assert type(p) is nn.Parameter and p.shape == (2, 3) and p.dtype is lm.float64
    with pytest.raises(ValueError, match="requires_grad=True"):
        nn.UninitializedBuffer(requires_grad=True)


def test_lazy_module_input_errors():
    with pytest.raises(ValueError, match=r"^LazyLinear: infers in_features from the first input's dim -1, which "
                                         r"must be a fixed size, got \(2, n\)"):
        nn.LazyLinear(3)(lm.Graph().input("x", (2, "n")))
    nn.LazyLinear(3)(lm.Graph().input("x", ("B", 4)))  # (a symbolic batch is fine)
    with pytest.raises(ValueError, match=r"^LazyConv2d: expected 3D \(unbatched\) or 4D \(batched\) input, got "
                                         r"\(2, 3\)"):
        nn.LazyConv2d(4, 1)(lm.Graph().input("x", (2, 3)))
    with pytest.raises(ValueError, match=r"^LazyConv1d: in_channels must be divisible by groups: the input has 3 "
                                         r"channels and groups=2"):
        nn.LazyConv1d(4, 1, groups=2)(lm.Graph().input("x", (1, 3, 5)))
    with pytest.raises(ValueError, match=r"^LazyBatchNorm2d: expected an input \(N, C, H, W\), got \(2, 3\)"):
        nn.LazyBatchNorm2d()(lm.Graph().input("x", (2, 3)))
    with pytest.raises(ValueError, match=r"out_channels \(3\) must be divisible by groups \(2\)"):
        nn.LazyConv2d(3, 1, groups=2)
