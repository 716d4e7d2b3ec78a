"""Normalisation layers against torch 2.13 as a torch user trains them: several compiled train steps
(``train.compile_step``) against the same torch SGD loop, comparing the loss, the parameters and the
running statistics (``running_mean``/``running_var``/``num_batches_tracked``) after every step; then
eval mode, mixed dtypes (16-bit inputs with float32 parameters, torch's "mixed type"), state_dict
round trips, resets and reprs. Single forwards, options and errors already covered elsewhere
(test_layer_modes, test_layer_options, test_instance_norm, test_half_precision) are not repeated."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as TF
from parity import GRAD_TOLERANCE, TOLERANCE, TORCH_DTYPE, check, rand

import luminal as lm
import luminal.nn.functional as F
from luminal import nn, train

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _norm_pair(cls: str, *args, **kw):
    """luminal's and torch's ``cls(*args, **kw)``, torch's with random parameters and running
    statistics, luminal's loaded from its state_dict as is (torch tensors, int64 num_batches_tracked)."""
    theirs = getattr(torch.nn, cls)(*args, **kw)
    with torch.no_grad():
        for t in theirs.parameters():
            t.uniform_(-1, 1)
        if getattr(theirs, "running_mean", None) is not None:
            theirs.running_mean.uniform_(-1, 1)
            theirs.running_var.uniform_(0.5, 2)
            theirs.num_batches_tracked.fill_(2)
    ours = getattr(nn, cls)(*args, **kw)
    ours.load_state_dict(theirs.state_dict())
    return ours, theirs


def _pair(cls: str, *args, last: int, **kw):
    """``_norm_pair`` behind a Linear(last, last) over the last dim, so that every norm, affine or
    not, has parameters to train."""
    norm, tnorm = _norm_pair(cls, *args, **kw)
    theirs = torch.nn.Sequential(torch.nn.Linear(last, last), tnorm)
    ours = nn.Sequential(nn.Linear(last, last), norm)
    ours[0].load_state_dict(theirs[0].state_dict())
    return ours, theirs


def _assert_state(ours, theirs, what, tol=None):
    sd = ours.state_dict()
    assert list(sd) == list(theirs.state_dict())
    rtol, atol = tol or GRAD_TOLERANCE[lm.float32]  # (a parameter is a sum of gradients, a statistic of values)
    for k, v in theirs.state_dict().items():
        np.testing.assert_allclose(np.asarray(sd[k], np.float64), v.double().numpy(), rtol=rtol, atol=atol,
                                   err_msg=f"{what}: {k}")


def _train_parity(cls, args, kw, shape, steps=3, eval_after=True):
    """``steps`` SGD steps of ``(norm(linear(x)) * c).sum()`` on both sides, state compared after each;
    then (``eval_after``) an eval forward on both."""
    ours, theirs = _pair(cls, *args, **kw)
    g = lm.Graph()
    x, c = g.input("x", shape), g.input("c", shape)
    loss = (ours(x) * c).sum()
    step = train.compile_step(loss, train.SGD(ours.parameters(), lr=0.1), backend="cpu")
    opt = torch.optim.SGD(theirs.parameters(), lr=0.1)
    cs = rand(shape, seed=99)
    for s in range(steps):
        xs = rand(shape, seed=s, low=-1, high=3)
        got = step(x=xs, c=cs)
        opt.zero_grad()
        want = (theirs(torch.from_numpy(xs)) * torch.from_numpy(cs)).sum()
        want.backward()
        opt.step()
        np.testing.assert_allclose(got, want.item(), rtol=1e-4, atol=1e-4, err_msg=f"loss of step {s}")
        _assert_state(ours, theirs, f"after step {s}")
    if eval_after:
        ours.eval()
        theirs.eval()
        xe = rand(shape, seed=42)
        g = lm.Graph()
        y = lm.compile(ours(g.input("x", shape)), backend="cpu")(x=xe)
        np.testing.assert_allclose(y, theirs(torch.from_numpy(xe)).detach().numpy(), rtol=1e-4, atol=1e-5)
        assert not g.updates  # eval leaves the running statistics alone
        _assert_state(ours, theirs, "after eval")


BN_TRAIN = {
    "bn1d_2d": ("BatchNorm1d", (3,), {}, (5, 3)),
    "bn1d_3d": ("BatchNorm1d", (3,), {}, (4, 3, 5)),
    "bn2d": ("BatchNorm2d", (3,), {}, (2, 3, 4, 5)),
    "bn3d": ("BatchNorm3d", (2,), {}, (2, 2, 3, 2, 4)),
    "bn2d_momentum_none": ("BatchNorm2d", (3,), {"momentum": None}, (2, 3, 2, 3)),
    "bn3d_momentum_none": ("BatchNorm3d", (2,), {"momentum": None}, (2, 2, 2, 2, 3)),
    "bn1d_affine_false": ("BatchNorm1d", (3,), {"affine": False}, (4, 3, 2)),
    "bn2d_no_stats": ("BatchNorm2d", (3,), {"track_running_stats": False}, (2, 3, 2, 2)),
    "bn3d_eps_no_bias": ("BatchNorm3d", (2,), {"eps": 0.3, "bias": False}, (2, 2, 2, 2, 2)),
    # (groups of 4: a group of 2 values normalises to +-1, its gradient then mostly rounding)
    "gn_2d": ("GroupNorm", (2, 8), {}, (3, 8)),
    "gn_3d": ("GroupNorm", (2, 4), {}, (2, 4, 3)),
    "gn_4d_affine_false": ("GroupNorm", (1, 2), {"affine": False}, (2, 2, 2, 3)),
    "gn_5d": ("GroupNorm", (3, 3), {"eps": 0.1}, (2, 3, 2, 2, 2)),
    "in1d_tracked": ("InstanceNorm1d", (3,), {"affine": True, "track_running_stats": True}, (2, 3, 4)),
    "in2d_tracked_noaffine": ("InstanceNorm2d", (3,), {"track_running_stats": True, "momentum": 0.4}, (2, 3, 2, 3)),
    "in3d_affine": ("InstanceNorm3d", (2,), {"affine": True}, (2, 2, 2, 2, 3)),
    "in2d_unbatched_tracked": ("InstanceNorm2d", (3,), {"affine": True, "track_running_stats": True}, (3, 2, 4)),
    "ln_int": ("LayerNorm", (4,), {}, (3, 2, 4)),
    "ln_tuple_no_bias": ("LayerNorm", ((2, 4),), {"bias": False, "eps": 0.1}, (3, 2, 4)),
    "ln_no_affine": ("LayerNorm", ([4],), {"elementwise_affine": False}, (3, 4)),
    "rms": ("RMSNorm", (4,), {}, (3, 2, 4)),
    "rms_no_affine_eps": ("RMSNorm", ((2, 4),), {"elementwise_affine": False, "eps": 0.01}, (3, 2, 4)),
}


@pytest.mark.parametrize("case", list(BN_TRAIN))
@pytest.mark.filterwarnings("ignore:.*set to eval mode after a graph was built")
def test_train_steps_match_torch(case):
    cls, args, kw, shape = BN_TRAIN[case]
    _train_parity(cls, args, dict(kw, last=shape[-1]), shape)


# 16-bit inputs with float32 parameters: torch's "mixed type", which returns the input's dtype --------
def _fn(name, x):
    """torch's functional ``name`` for a torch tensor ``x``, luminal's for a graph tensor."""
    return getattr(TF if isinstance(x, torch.Tensor) else F, name)


MIXED = {  # (op, parameter shapes): every parameter float32
    "layer_norm": (lambda x, w, b: _fn("layer_norm", x)(x, (2, 3), w, b, 1e-3), [(2, 3), (2, 3)]),
    "rms_norm": (lambda x, w: _fn("rms_norm", x)(x, [3], w), [(3,)]),
    "group_norm": (lambda x, w, b: _fn("group_norm", x)(x, 2, w, b, 1e-3), [(4,), (4,)]),
    "batch_norm": (lambda x, w, b: _fn("batch_norm", x)(x, None, None, w, b, True, 0.1, 1e-3), [(4,), (4,)]),
    "instance_norm": (lambda x, w, b: _fn("instance_norm", x)(x, None, None, w, b, True, 0.1, 1e-3), [(4,), (4,)]),
}


@pytest.mark.parametrize("dtype", [lm.float16, lm.bfloat16], ids=lambda d: d.name)
@pytest.mark.parametrize("op", list(MIXED))
def test_functional_16_bit_input_with_float32_parameters(op, dtype):
    """F.layer_norm, F.rms_norm and F.group_norm returned float32 here (the parameters' dtype), torch
    the input's: values and gradients (of the input and the float32 parameters) as torch's. (The
    gradients within the 16-bit dtype's tolerance: torch's layer_norm rounds its float32 weight's
    gradient to the input's dtype, -0.147705078125 where the sum is -0.14912.)"""
    f, shapes = MIXED[op]
    x = rand((3, 4, 2, 3), dtype, low=-1, high=3)
    params = [rand(s, seed=i + 1) for i, s in enumerate(shapes)]
    rtol, atol = GRAD_TOLERANCE[dtype]
    check(f, [x, *params], dtypes=[dtype] + [lm.float32] * len(params), grad_rtol=rtol, grad_atol=atol)


@pytest.mark.parametrize("dtype", [lm.float16, lm.bfloat16], ids=lambda d: d.name)
@pytest.mark.parametrize("make", [lambda nn: nn.GroupNorm(2, 4), lambda nn: nn.GroupNorm(4, 4, affine=False),
                                  lambda nn: nn.LayerNorm(3), lambda nn: nn.RMSNorm([2, 3]),
                                  lambda nn: nn.BatchNorm2d(4), lambda nn: nn.InstanceNorm2d(4, affine=True)],
                         ids=["gn", "gn_noaffine", "ln", "rms", "bn", "in"])
def test_module_16_bit_input_with_float32_parameters(make, dtype):
    """A float32 module on a 16-bit input: the output in the input's dtype (nn.GroupNorm's was float32),
    values and gradients as torch's."""
    ours, theirs = make(nn), make(torch.nn)
    with torch.no_grad():
        for p in theirs.parameters():
            p.uniform_(-1, 1)
    ours.load_state_dict(theirs.state_dict())
    check(ours, [rand((3, 4, 2, 3), dtype, low=-1, high=3)], dtypes=[dtype], torch_op=theirs)


@pytest.mark.parametrize("dtype", [lm.float16, lm.bfloat16], ids=lambda d: d.name)
@pytest.mark.parametrize("cls,kw", [("BatchNorm1d", {}), ("BatchNorm1d", {"momentum": None}),
                                    ("InstanceNorm1d", {"track_running_stats": True})])
def test_16_bit_input_updates_float32_running_stats(cls, kw, dtype):
    """The float32 running statistics of a training-mode norm on a 16-bit input, run after run, as
    torch's (which computes the statistics in float32). torch's instance_norm rounds each instance's
    updated statistics to the input's dtype before averaging them over the batch (its float32
    buffers then hold 16-bit values); luminal keeps them in float32: equal within that rounding."""
    ours, theirs = getattr(nn, cls)(3, **kw), getattr(torch.nn, cls)(3, **kw)
    g = lm.Graph()
    f = lm.compile(ours(g.input("x", (4, 3, 5), dtype=dtype)), backend="cpu")
    for s in range(3):
        x = rand((4, 3, 5), dtype, seed=s, low=-1, high=4)
        got, want = f(x=x), theirs(torch.from_numpy(x).to(TORCH_DTYPE[dtype]))
        np.testing.assert_allclose(np.asarray(got, np.float32), want.float().detach().numpy(), rtol=2e-2, atol=2e-2)
        _assert_state(ours, theirs, f"after run {s}", tol=TOLERANCE[dtype] if cls.startswith("Instance") else None)


# empty inputs: torch returns an empty output (and leaves the running statistics alone) -------------
@pytest.mark.parametrize("shape", [(0, 4, 3), (2, 4, 0)], ids=["no-batch", "no-positions"])
def test_empty_input_gives_an_empty_output(shape):
    """``reshape(n, c, -1)`` of an input with no batch (N = 0) was refused as ambiguous."""
    x = np.zeros(shape, np.float32)
    check(lambda t: _fn("local_response_norm", t)(t, 2), [x], grad=False)
    check(lambda t: _fn("group_norm", t)(t, 2), [x], grad=False)
    check(lambda t: (nn if isinstance(t, lm.GraphTensor) else torch.nn).GroupNorm(2, 4)(t), [x], grad=False)


@pytest.mark.parametrize("cls,shape", [("BatchNorm1d", (0, 4)), ("BatchNorm1d", (2, 4, 0)),
                                       ("BatchNorm2d", (0, 4, 2, 2)), ("InstanceNorm1d", (2, 4, 0))])
@pytest.mark.parametrize("momentum", [0.1, None])
def test_empty_training_batch_leaves_the_running_stats(cls, shape, momentum):
    """torch normalises an empty training batch to an empty output, leaving running_mean/running_var
    alone (BatchNorm still counts it in num_batches_tracked); luminal refused it as "one value per
    channel" (its count, 0, is not 1), and instance_norm as "one spatial element"."""
    ours, theirs = _norm_pair(cls, 4, momentum=momentum, track_running_stats=True)
    before = theirs.running_mean.clone().numpy()
    g = lm.Graph()
    f = lm.compile(ours(g.input("x", shape)), backend="cpu")
    for _ in range(2):
        assert f(x=np.zeros(shape, np.float32)).shape == shape
        assert theirs(torch.zeros(shape)).shape == shape
    _assert_state(ours, theirs, "after two empty batches")
    np.testing.assert_array_equal(ours.running_mean.data, before)


def test_functional_batch_norm_on_an_empty_training_batch():
    m = nn.BatchNorm1d(3)
    m.running_mean.set(np.array([1.0, 2.0, 3.0]))
    g = lm.Graph()
    y = F.batch_norm(g.input("x", (0, 3, 2)), m.running_mean, m.running_var, training=True, momentum=0.5)
    assert lm.compile(y, backend="cpu")(x=np.zeros((0, 3, 2), np.float32)).shape == (0, 3, 2)
    np.testing.assert_array_equal(m.running_mean.data, [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(m.running_var.data, [1.0, 1.0, 1.0])


# normalized_shape as torch takes it ------------------------------------------------------------------
def test_normalized_shape_of_numpy_ints():
    """torch takes any ``numbers.Integral`` (a size read from an array: ``np.int64``); luminal's
    LayerNorm/RMSNorm failed with "'numpy.int64' object is not iterable"."""
    d = np.int64(4)
    x = rand((3, 2, 4))
    for make in (lambda m: m.LayerNorm(d), lambda m: m.RMSNorm([np.int64(2), d], eps=1e-3)):
        ours, theirs = make(nn), make(torch.nn)
        assert ours.normalized_shape == tuple(int(s) for s in theirs.normalized_shape)
        check(ours, [x], torch_op=theirs)
    check(lambda t: _fn("layer_norm", t)(t, [d]), [x])


@pytest.mark.parametrize("bad", [4.0, "4", None, [4.0]])
def test_normalized_shape_not_of_ints_is_refused(bad):
    for make, name in ((nn.LayerNorm, "LayerNorm"), (nn.RMSNorm, "RMSNorm")):
        with pytest.raises(TypeError, match=f"^{name}: normalized_shape must be an int or a sequence of ints, got "):
            make(bad)
    g = lm.Graph()
    with pytest.raises(TypeError, match="^layer_norm: normalized_shape must be an int or a sequence of ints, got"):
        F.layer_norm(g.input("x", (2, 4)), bad)


# the functional forms in a train step, their running statistics as the module's Buffers --------------
@pytest.mark.parametrize("op", ["batch_norm", "instance_norm"])
def test_functional_running_stats_over_train_steps(op):
    """``F.batch_norm(x, rm, rv, w, b, True, 0.3, 1e-3)`` and ``F.instance_norm(x, rm, rv, w, b, True,
    0.3, 1e-3)`` (torch's argument orders) with Buffers for the running statistics: each compiled
    step updates them as torch's call updates its tensors in place, the weights trained alike."""
    shape = (4, 3, 5)
    buffers = nn.BatchNorm1d(3)
    w, b = nn.Parameter(rand((3,), seed=1)), nn.Parameter(rand((3,), seed=2))
    tw, tb = (torch.tensor(np.asarray(p.data), requires_grad=True) for p in (w, b))
    rm, rv = torch.zeros(3), torch.ones(3)
    g = lm.Graph()
    x, c = g.input("x", shape), g.input("c", shape)
    y = getattr(F, op)(x, buffers.running_mean, buffers.running_var, w, b, True, 0.3, 1e-3)
    step = train.compile_step((y * c).sum(), train.SGD([w, b], lr=0.1), backend="cpu")
    opt = torch.optim.SGD([tw, tb], lr=0.1)
    cs = rand(shape, seed=9)
    for s in range(3):
        xs = rand(shape, seed=s, low=-1, high=3)
        got = step(x=xs, c=cs)
        opt.zero_grad()
        want = (getattr(TF, op)(torch.from_numpy(xs), rm, rv, tw, tb, True, 0.3, 1e-3) * torch.from_numpy(cs)).sum()
        want.backward()
        opt.step()
        np.testing.assert_allclose(got, want.item(), rtol=1e-4, atol=1e-4)
        for ours, theirs in ((buffers.running_mean, rm), (buffers.running_var, rv), (w, tw), (b, tb)):
            np.testing.assert_allclose(ours.data, theirs.detach().numpy(), rtol=2e-5, atol=2e-6, err_msg=f"step {s}")


# state_dict, load from torch, resets and repr ----------------------------------------------------------
STATEFUL = {
    "bn1d": lambda m: m.BatchNorm1d(3, momentum=None), "bn2d_noaffine": lambda m: m.BatchNorm2d(3, affine=False),
    "bn3d_nostats": lambda m: m.BatchNorm3d(3, track_running_stats=False, eps=1e-3),
    "bn1d_nobias": lambda m: m.BatchNorm1d(3, bias=False), "gn": lambda m: m.GroupNorm(3, 6, eps=0.1),
    "gn_nobias": lambda m: m.GroupNorm(1, 2, bias=False), "gn_noaffine": lambda m: m.GroupNorm(2, 2, affine=False),
    "ln": lambda m: m.LayerNorm([2, 3]), "ln_nobias": lambda m: m.LayerNorm(3, bias=False, eps=0.5),
    "rms": lambda m: m.RMSNorm(3), "rms_noaffine": lambda m: m.RMSNorm((2, 3), 1e-3, False),
    "lrn": lambda m: m.LocalResponseNorm(4, 1e-3, 0.5, 2.0),
}


@pytest.mark.parametrize("case", list(STATEFUL))
def test_state_dict_resets_and_repr_as_torch(case):
    """Keys (and their order), values after loading torch's trained-looking state_dict, after
    reset_running_stats and after reset_parameters, and the repr."""
    ours, theirs = STATEFUL[case](nn), STATEFUL[case](torch.nn)
    assert repr(ours) == repr(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    with torch.no_grad():
        for t in theirs.state_dict().values():
            t.add_(3) if t.dtype == torch.int64 else t.uniform_(0.5, 2)
    ours.load_state_dict(theirs.state_dict())
    _assert_state(ours, theirs, "loaded")
    for reset in ("reset_running_stats", "reset_parameters"):
        if hasattr(theirs, reset):
            getattr(theirs, reset)()
            getattr(ours, reset)()
            _assert_state(ours, theirs, reset)


# errors --------------------------------------------------------------------------------------------------
def test_group_norm_errors():
    with pytest.raises(ValueError, match=r"^GroupNorm: num_channels \(4\) must be divisible by num_groups \(3\)"):
        nn.GroupNorm(3, 4)  # (torch's words)
    g = lm.Graph()
    with pytest.raises(ValueError, match=r"^group_norm: expected input of shape \(N, C, \*\) with C divisible by "
                                         r"num_groups=3, got \(2, 4, 5\)"):
        F.group_norm(g.input("x", (2, 4, 5)), 3)
    with pytest.raises(ValueError, match=r"^group_norm: expected input of shape \(N, C, \*\) .*got \(4,\)"):
        F.group_norm(g.input("y", (4,)), 2)  # (torch: at least 2 dims)
    with pytest.raises(ValueError, match=r"^GroupNorm\(2, 4, .*\): expected input of shape \(N, 4, \*\), got \(2, 6\)"):
        nn.GroupNorm(2, 4)(g.input("z", (2, 6)))


@pytest.mark.parametrize("dtype", [lm.float16, lm.bfloat16], ids=lambda d: d.name)
def test_local_response_norm_16_bit(dtype):
    """torch computes a 16-bit LRN of a 3-d input (its 4-d and wider ones are not implemented on
    the CPU for 16 bits): values and gradients."""
    check(lambda t: _fn("local_response_norm", t)(t, 3, 0.5, 0.75, 2.0), [rand((2, 5, 4), dtype, low=-20, high=20)],
          dtypes=[dtype])


@pytest.mark.parametrize("cls,one,two", [("BatchNorm2d", (1, 3, 1, 1), (1, 3, 2, 1)),
                                         ("BatchNorm3d", (1, 3, 1, 1, 1), (1, 3, 1, 2, 1))])
def test_batch_of_one_in_training(cls, one, two):
    """A single sample with one value per channel is refused, as torch's; with two it trains (the
    running variance unbiased over 2 values) as torch's."""
    g = lm.Graph()
    with pytest.raises(ValueError, match=rf"^{cls}\(3, .*\): expected input of shape with more than 1 value per "
                                         r"channel when training"):
        getattr(nn, cls)(3)(g.input("x", one))
    ours, theirs = _norm_pair(cls, 3)
    x = rand(two, seed=5)
    g = lm.Graph()
    np.testing.assert_allclose(lm.compile(ours(g.input("x", two)), backend="cpu")(x=x),
                               theirs(torch.from_numpy(x)).detach().numpy(), rtol=1e-5, atol=1e-5)
    _assert_state(ours, theirs, "after one step")
