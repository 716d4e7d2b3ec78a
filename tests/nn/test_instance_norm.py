"""Parity with torch for ``F.instance_norm``: per-instance statistics (values and gradients of the input,
weight and bias), running statistics updated as torch updates them, the running statistics used
instead (``use_input_stats=False``), 16-bit inputs, errors."""

from __future__ import annotations

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
    with pytest.raises(ValueError, match=r"^instance_norm weight: expected input of shape \(3,\)"):
        F.instance_norm(x, weight=g.input("w", (4,)))
    with pytest.raises(TypeError, match="^instance_norm: expected a float input, got int32"):
        F.instance_norm(g.input("i", (2, 3, 4), dtype=lm.int32))
