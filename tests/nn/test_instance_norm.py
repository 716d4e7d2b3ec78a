"""Parity with torch for ``F.instance_norm``: per-instance statistics (values and gradients of the input,
weight and bias), running statistics updated as torch updates them, the running statistics used
instead (``use_input_stats=False``), 16-bit inputs, errors."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as TF
from parity import check, rand

import luminal as lm
import luminal.nn.functional as F
from luminal import nn

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.mark.parametrize("shape", [(2, 3, 5), (3, 2, 4, 3), (1, 4, 2, 2, 3)])
def test_instance_norm_input_stats(shape, backend):
    x, w, b = rand(shape, low=-3, high=5), rand((shape[1],), seed=1), rand((shape[1],), seed=2)
    check(lambda t: (TF if isinstance(t, torch.Tensor) else F).instance_norm(t), [x], backend=backend)
    check(lambda t, u, v: (TF if isinstance(t, torch.Tensor) else F).instance_norm(t, weight=u, bias=v, eps=1e-3),
          [x, w, b], backend=backend)
    check(lambda t: (TF if isinstance(t, torch.Tensor) else F).instance_norm(t), [x.astype(np.float64)],
          backend=backend, pre=lambda t: t.transpose(0, 1))
    for d in (lm.float16, lm.bfloat16):
        check(lambda t: (TF if isinstance(t, torch.Tensor) else F).instance_norm(t), [rand(shape, d, seed=3)],
              dtypes=[d], backend=backend)


def test_instance_norm_updates_running_stats(backend):
    bn = nn.BatchNorm1d(3)  # its Buffers, as a module would pass them
    x = rand((4, 3, 6), low=-2, high=4)
    g = lm.Graph()
    y = F.instance_norm(g.input("x", x.shape), bn.running_mean, bn.running_var, momentum=0.3)
    f = lm.compile(y, backend=backend)
    rm, rv = torch.zeros(3), torch.ones(3)
    for _ in range(2):  # twice: the second update starts from the first's values
        got = f(x=x)
        want = TF.instance_norm(torch.from_numpy(x), rm, rv, momentum=0.3)
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(bn.running_mean.data, rm.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(bn.running_var.data, rv.numpy(), rtol=1e-5, atol=1e-6)


def test_instance_norm_with_running_stats(backend):
    x, m, v = rand((2, 3, 4)), rand((3,), seed=1), rand((3,), seed=2, low=0.5, high=2)
    check(lambda t, a, c: F.instance_norm(t, a, c, use_input_stats=False), [x, m, v], backend=backend,
          torch_op=lambda t, a, c: TF.instance_norm(t, a.detach(), c.detach(), use_input_stats=False))
    # (torch refuses a gradient to the running statistics; luminal's says there is none: no path)


def test_instance_norm_errors():
    g = lm.Graph()
    x = g.input("x", (2, 3, 4))
    with pytest.raises(ValueError, match=r"^instance_norm: expected input of shape \(N, C, \*\) with at least one"):
        F.instance_norm(g.input("a", (2, 3)))
    with pytest.raises(ValueError, match="^instance_norm: expected more than 1 spatial element"):
        F.instance_norm(g.input("b", (2, 3, 1)))
    with pytest.raises(ValueError, match="^instance_norm: use_input_stats=False needs running_mean and running_var"):
        F.instance_norm(x, use_input_stats=False)
    with pytest.raises(TypeError, match="use_input_stats=True updates running_mean in place, which needs a State"):
        F.instance_norm(x, g.input("m", (3,)))
    with pytest.raises(ValueError, match=r"^instance_norm: weight: expected input of shape \(3,\)"):
        F.instance_norm(x, weight=g.input("w", (4,)))
    with pytest.raises(TypeError, match="^instance_norm: expected a float input, got int32"):
        F.instance_norm(g.input("i", (2, 3, 4), dtype=lm.int32))


# nn.InstanceNorm1d/2d/3d ----------------------------------------------------------------------
def _modules(n: int, **kw):
    """Ours and torch's InstanceNorm{n}d(3, **kw), ours holding torch's state (random affine values)."""
    theirs = getattr(torch.nn, f"InstanceNorm{n}d")(3, **kw)
    with torch.no_grad():
        for p in theirs.parameters():
            p.uniform_(-1, 1)
    ours = getattr(nn, f"InstanceNorm{n}d")(3, **kw)
    ours.load_state_dict({k: v.numpy().astype(np.int32) if v.dtype == torch.int64 else v.numpy()
                          for k, v in theirs.state_dict().items()})
    return ours, theirs


@pytest.mark.parametrize("n,shape", [(1, (2, 3, 4)), (1, (3, 5)), (2, (2, 3, 2, 3)), (2, (3, 2, 2)),
                                     (3, (1, 3, 2, 2, 2))], ids=["1d", "1d-unbatched", "2d", "2d-unbatched", "3d"])
@pytest.mark.parametrize("kw", [{}, {"affine": True, "eps": 1e-3}, {"affine": True, "bias": False}],
                         ids=["plain", "affine", "no-bias"])
def test_instance_norm_module(n, shape, kw, backend):
    ours, theirs = _modules(n, **kw)
    check(ours, [rand(shape, low=-2, high=3)], torch_op=theirs, backend=backend)


@pytest.mark.parametrize("momentum", [0.3, None])
def test_instance_norm_module_running_stats(momentum, backend):
    """Training mode updates the running statistics as torch's (twice: from the first update's values;
    ``num_batches_tracked`` stays 0 and momentum=None updates nothing, as torch); eval mode uses them."""
    ours, theirs = _modules(2, affine=True, track_running_stats=True, momentum=momentum)
    x = rand((2, 3, 2, 3), low=-2, high=4)
    g = lm.Graph()
    f = lm.compile(ours(g.input("x", x.shape)), backend=backend)
    for _ in range(2):
        got, want = f(x=x), theirs(torch.from_numpy(x))
    np.testing.assert_allclose(got, want.detach().numpy(), rtol=1e-5, atol=1e-5)
    for k, v in theirs.state_dict().items():
        np.testing.assert_allclose(ours.state_dict()[k], v.numpy(), rtol=1e-5, atol=1e-6, err_msg=k)
    assert int(ours.num_batches_tracked.data) == 0
    with pytest.warns(UserWarning, match="set to eval mode after a graph was built"):  # (g is alive)
        ours.eval()
    theirs.eval()
    check(ours, [rand((2, 3, 2, 3), seed=1)], torch_op=theirs, backend=backend)


def test_instance_norm_module_without_running_stats_reads_no_mode():
    """With no running statistics eval mode also normalises by each instance's own statistics, so a
    graph built in training mode is the same graph: switching the mode does not warn."""
    m = nn.InstanceNorm1d(3)
    g = lm.Graph()
    y = m(g.input("x", (2, 3, 4)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m.eval()
    x = rand((2, 3, 4))
    np.testing.assert_allclose(lm.compile(y)(x=x), TF.instance_norm(torch.from_numpy(x)).numpy(), rtol=1e-5,
                               atol=1e-5)
    tracked = nn.InstanceNorm1d(3, track_running_stats=True)
    g2 = lm.Graph()
    tracked(g2.input("x", (2, 3, 4)))
    with pytest.warns(UserWarning, match="set to eval mode after a graph was built from it in train mode"):
        tracked.eval()


@pytest.mark.parametrize("kw", [{}, {"affine": True}, {"affine": True, "bias": False}, {"track_running_stats": True},
                                {"affine": True, "track_running_stats": True}])
def test_instance_norm_module_state_dict_as_torch(kw):
    for n in (1, 2, 3):
        ours, theirs = getattr(nn, f"InstanceNorm{n}d")(4, **kw), getattr(torch.nn, f"InstanceNorm{n}d")(4, **kw)
        sd = theirs.state_dict()
        assert list(ours.state_dict()) == list(sd)
        for k, v in ours.state_dict().items():
            np.testing.assert_array_equal(v, sd[k].numpy(), err_msg=k)
        assert [name for name, _ in ours.named_parameters()] == [name for name, _ in theirs.named_parameters()]
        assert repr(ours) == repr(theirs)


def test_instance_norm_module_errors():
    with pytest.raises(TypeError, match="^InstanceNorm1d: num_features must be an int, got float"):
        nn.InstanceNorm1d(3.0)
    with pytest.raises(ValueError, match="^InstanceNorm2d: num_features must be at least 1, got 0"):
        nn.InstanceNorm2d(0)
    g = lm.Graph()
    with pytest.raises(ValueError, match=r"^InstanceNorm2d\(3, .*\): expected input of shape \(N, 3, H, W\) or "
                                         r"\(3, H, W\), got \(2, 3, 4, 5, 6\)"):
        nn.InstanceNorm2d(3)(g.input("a", (2, 3, 4, 5, 6)))
    with pytest.raises(ValueError, match=r"^InstanceNorm1d\(3, .*\): expected input of shape \(N, 3, L\)"):
        nn.InstanceNorm1d(3, affine=True)(g.input("b", (2, 4, 5)))
    with pytest.raises(ValueError, match=r"^InstanceNorm1d\(3, .*\): expected input of shape \(N, 3, L\)"):
        nn.InstanceNorm1d(3, track_running_stats=True)(g.input("c", (2, 4, 5)))
    with pytest.warns(UserWarning, match=r"the input's 4 channels do not match num_features \(3\)"):
        nn.InstanceNorm1d(3)(g.input("d", (2, 4, 5)))  # unused without affine or running stats, as torch
    with pytest.raises(TypeError, match=r"^InstanceNorm1d\(3, .*\): expected a float input, got int32"):
        nn.InstanceNorm1d(3)(g.input("e", (2, 3, 5), dtype=lm.int32))
    with pytest.raises(ValueError, match=r"^InstanceNorm1d\(3, .*\): .*expected more than 1 spatial element"):
        nn.InstanceNorm1d(3)(g.input("f", (2, 3, 1)))
