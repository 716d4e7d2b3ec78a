"""Parity with torch for softmin, softshrink, hardshrink, tanhshrink and threshold: the ops
(``lm.hardshrink``, ``lm.threshold``, ``Tensor.hardshrink``), the ``F`` functions and the ``nn``
modules; values at NaN, infinities and signed zeros, dtypes, and gradients."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as TF
from parity import check, rand

import luminal as lm
import luminal.nn.functional as F
from luminal import nn

pytestmark = pytest.mark.usefixtures("one_torch_thread")

EDGES = np.array([math.nan, math.inf, -math.inf, 0.5, -0.5, 0.7, -0.7, -0.0, 0.0, 0.2, -1e-30, 3.0], np.float32)


def _f(t):
    return TF if isinstance(t, torch.Tensor) else F


@pytest.mark.parametrize("name,args", [("softshrink", ()), ("softshrink", (1.25,)), ("softshrink", (0.0,)),
                                       ("hardshrink", ()), ("hardshrink", (0.9,)), ("hardshrink", (-1.0,)),
                                       ("tanhshrink", ()), ("threshold", (0.5, -2.0)), ("threshold", (-1, 7))])
def test_shrink_family(name, args, backend):
    x = rand((4, 6), low=-3, high=3)
    check(lambda t: getattr(_f(t), name)(t, *args), [x], backend=backend)
    check(lambda t: getattr(_f(t), name)(t, *args), [x.astype(np.float64)], backend=backend, pre=lambda t: t.T)
    out = check(lambda t: getattr(_f(t), name)(t, *args), [EDGES], backend=backend, grad="finite")[0]
    want = getattr(TF, name)(torch.from_numpy(EDGES), *args).numpy()
    zeros = want == 0
    assert np.array_equal(np.signbit(out[zeros]), np.signbit(want[zeros]))  # torch's signed zeros
    for d in (lm.float16, lm.bfloat16):
        check(lambda t: getattr(_f(t), name)(t, *args), [rand((8,), d, low=-3, high=3)], dtypes=[d], backend=backend)


def test_ops_and_methods(backend):
    x = rand((3, 4), low=-2, high=2)
    check(lambda t: t.hardshrink(0.3), [x], backend=backend)
    check(lambda t: (torch if isinstance(t, torch.Tensor) else lm).hardshrink(t, 0.3), [x], backend=backend)
    check(lambda t: (torch if isinstance(t, torch.Tensor) else lm).threshold(t, 0.1, 20), [x], backend=backend)
    check(lambda t: TF.threshold(t, 1, 0) if isinstance(t, torch.Tensor) else F.threshold(t, 1, 0),
          [rand((5,), lm.int32, low=-3, high=3)], backend=backend)  # keeps the integer dtype
    check(lambda t: _f(t).tanhshrink(t), [np.array([-2, 0, 3], np.int32)], backend=backend)  # int gives float32


@pytest.mark.filterwarnings("ignore:Implicit dimension choice for softmin")
@pytest.mark.parametrize("dim", [None, 0, 1, -1])
def test_softmin(dim, backend):
    x = rand((3, 4, 5), low=-4, high=4)
    check(lambda t: _f(t).softmin(t, dim), [x], backend=backend)
    check(lambda t: _f(t).softmin(t, dim, dtype=torch.float64 if isinstance(t, torch.Tensor) else lm.float64),
          [x], backend=backend)
    check(lambda t: _f(t).softmin(t, dim), [np.array([[1.0, math.inf], [-math.inf, 0.0]], np.float32)],
          backend=backend, grad=False)
    if dim is not None:  # lm.softmin: torch has only the functional
        check(lambda t: TF.softmin(t, dim) if isinstance(t, torch.Tensor) else lm.softmin(t, dim), [x], backend=backend)


@pytest.mark.parametrize("make", [lambda ns: ns.Softmin(1), lambda ns: ns.Softshrink(0.4), lambda ns: ns.Hardshrink(),
                                  lambda ns: ns.Tanhshrink(), lambda ns: ns.Threshold(0.2, -1.0)],
                         ids=["Softmin", "Softshrink", "Hardshrink", "Tanhshrink", "Threshold"])
def test_modules(make, backend):
    m, tm = make(nn), make(torch.nn)
    assert repr(m) == repr(tm)
    check(lambda t: (tm if isinstance(t, torch.Tensor) else m)(t), [rand((3, 5), low=-2, high=2)], backend=backend)


def test_errors():
    g = lm.Graph()
    x = g.input("x", (3,))
    with pytest.raises(ValueError, match="^softshrink: lambd must be >= 0, got -1"):
        F.softshrink(x, -1)
    with pytest.raises(TypeError, match="^hardshrink: needs a float tensor, got int32"):
        lm.hardshrink(g.input("i", (3,), dtype=lm.int32))
    with pytest.raises(TypeError, match="^threshold: value must be a number, got str"):
        F.threshold(x, 0.5, "a")
    with pytest.raises(TypeError, match="^softmin: input must be a GraphTensor"):
        F.softmin(np.zeros(3), 0)
