"""Names a torch user reaches for (issue 32): ``lm.flatten``, ``dim()``/``size()`` on tensors and on
Parameters/Buffers, ``to`` (dtype, ``"cpu"``, another tensor; other devices a clear error), ``type_as``
and ``new_zeros``/``new_ones``/``new_full``: values, dtypes, shapes and gradients against torch."""

from __future__ import annotations

import sys

import numpy as np
import pytest
import torch
from parity import TORCH_DTYPE, check, rand

import luminal as lm
from luminal import nn

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def here() -> int:
    return sys._getframe(1).f_lineno


def _dtype(t, d):
    """The lm dtype ``d`` on luminal's side, torch's on torch's (one lambda for both)."""
    return TORCH_DTYPE[d] if isinstance(t, torch.Tensor) else d


def _ns(t):
    return torch if isinstance(t, torch.Tensor) else lm


@pytest.mark.parametrize("start,end", [(0, -1), (1, -1), (1, 2), (-2, -1), (2, 2)])
def test_flatten_function(start, end, backend):
    check(lambda t: _ns(t).flatten(t, start, end), [rand((2, 3, 4, 5))], backend=backend)
    check(lambda t: _ns(t).flatten(t, start_dim=start, end_dim=end), [rand((2, 3, 4, 5))], backend=backend,
          pre=lambda t: t.permute(3, 1, 2, 0))  # a view that needs a copy to flatten


def test_flatten_function_edges(backend):
    check(lambda t: _ns(t).flatten(t), [np.array(2.5, np.float32)], backend=backend)  # 0-d becomes (1,)
    check(lambda t: _ns(t).flatten(t, 1), [np.zeros((3, 0, 2), np.float32)], backend=backend)
    with pytest.raises(ValueError, match="^flatten: start_dim comes after end_dim"):
        lm.flatten(lm.Graph().input("x", (2, 3, 4)), 2, 1)
    with pytest.raises(TypeError, match="^flatten: input must be a GraphTensor"):
        lm.flatten(np.zeros(3))


def test_dim_and_size_match_torch():
    g = lm.Graph()
    for shape in [(), (3,), (2, 0, 5), (2, 3, 4)]:
        x, t = g.input(f"x{len(shape)}{0 in shape}", shape), torch.zeros(shape)
        assert x.dim() == t.dim() and x.size() == tuple(t.size())
        for d in range(-len(shape), len(shape)):
            assert x.size(d) == t.size(d)
    s = g.input("s", ("B", 3))
    assert s.size(0) == lm.sym("B") and s.size(-1) == 3 and s.dim() == 2


def test_parameter_and_buffer_dim_and_size():
    """A torch Parameter is a tensor, so ported code asks a weight ``w.size(1)``, ``w.dim()``."""
    lin, bn = nn.Linear(3, 4), nn.BatchNorm1d(5)
    tl = torch.nn.Linear(3, 4)
    for ours, theirs in [(lin.weight, tl.weight), (lin.bias, tl.bias), (bn.running_mean, torch.zeros(5))]:
        assert ours.dim() == theirs.dim() and ours.size() == tuple(theirs.size())
        for d in range(-ours.dim(), ours.dim()):
            assert ours.size(d) == theirs.size(d)
    assert isinstance(bn.running_mean, nn.Buffer)
    with pytest.raises(ValueError, match=r"^size: dim 2 is out of range for Parameter .*\(4, 3\) float32"):
        lin.weight.size(2)
    with pytest.raises(TypeError, match="^size: dim must be an int"):
        lin.weight.size("1")
    with pytest.raises(ValueError, match="out of range"):
        nn.Parameter(np.float32(1.0)).size(0)  # a 0-d tensor has no dim 0, as torch


@pytest.mark.parametrize("d", [lm.float64, lm.float16, lm.bfloat16, lm.int32, lm.bool])
def test_to_dtype(d, backend):
    x = rand((3, 4), low=-3, high=3)
    check(lambda t: t.to(_dtype(t, d)), [x], backend=backend)
    check(lambda t: t.to(dtype=_dtype(t, d)), [x], backend=backend)
    check(lambda t: t.to("cpu", _dtype(t, d)), [x], backend=backend)
    check(lambda t: t.to(_dtype(t, d), False, False), [x], backend=backend)  # non_blocking, copy


def test_to_cpu_and_to_other(backend):
    x, y, i = rand((3, 4), seed=1), rand((4,), lm.float64, seed=2), rand((2,), lm.int32)
    check(lambda t: t.to("cpu") * 2, [x], backend=backend)
    check(lambda t: t.to(device="cpu") * 2, [x], backend=backend)
    check(lambda a, b: a.to(b) * b, [x, y], backend=backend)  # b's dtype: float64, gradients through the cast
    check(lambda a, b: a.to(b), [x, i], backend=backend)
    g = lm.Graph()
    t = g.input("t", (2,))
    assert t.to("cpu") is t and t.to(lm.float32) is t and t.to("float16").dtype is lm.float16


def test_to_another_device_is_an_error_naming_compile():
    g = lm.Graph()
    x = g.input("x", (2, 3)); lx = here()
    for device in ["cuda", "cuda:0", "mps", 0, "meta"]:
        with pytest.raises(ValueError) as e:
            lc = here(); x.to(device)
        msg = str(e.value)
        assert msg.startswith("to: device ") and "luminal has no per-tensor device ('cpu' is accepted" in msg, msg
        assert "lm.compile(outputs, backend='cuda')" in msg and "reference" in msg, msg
        assert f"made at {__file__}:{lx}:" in msg and f"called at {__file__}:{lc}:" in msg, msg
    with pytest.raises(ValueError, match="^to: device 'cuda'"):
        x.to(device="cuda", dtype=lm.float16)
    with pytest.raises(TypeError, match="unknown dtype 'floatt16'"):  # any other str is a dtype's name
        x.to("floatt16")
    with pytest.raises(TypeError, match="^to: expected a dtype, a device or a tensor"):
        x.to(lm.float16, "cpu")
    with pytest.raises(ValueError, match="^to: operands belong to different graphs"):
        x.to(lm.Graph().input("y", (1,)))


def test_type_as(backend):
    x, y, i = rand((3, 4), seed=3), rand((1, 4), lm.float64, seed=4), rand((4,), lm.int32)
    check(lambda a, b: a.type_as(b) + b, [x, y], backend=backend)
    check(lambda a, b: a.type_as(b), [x, i], backend=backend)
    check(lambda a, b: a.type_as(b), [i, x], backend=backend)
    g = lm.Graph()
    with pytest.raises(TypeError, match="^type_as: other must be a GraphTensor, got ndarray"):
        g.input("x", (2,)).type_as(np.zeros(2))


@pytest.mark.parametrize("dtype", [lm.float32, lm.float16, lm.int32, lm.bool])
def test_new_factories(dtype, backend):
    x = rand((3, 2), dtype, seed=5)
    check(lambda t: t.new_zeros(2, 3), [x], dtypes=[dtype], backend=backend)
    check(lambda t: t.new_ones((4,)), [x], dtypes=[dtype], backend=backend)
    check(lambda t: t.new_zeros([]), [x], dtypes=[dtype], backend=backend)
    check(lambda t: t.new_full((2, 2), 3), [x], dtypes=[dtype], backend=backend)  # x's dtype, not the value's
    check(lambda t: t.new_full((2, 0), 1), [x], dtypes=[dtype], backend=backend)
    check(lambda t: t.new_ones(2, dtype=_dtype(t, lm.float64)), [x], dtypes=[dtype], backend=backend)
    check(lambda t: t.new_full([3], 2.5, dtype=_dtype(t, lm.float32)) * t[:, :1].float(), [x], dtypes=[dtype],
          backend=backend)


def test_new_factories_symbolic_and_errors():
    g = lm.Graph()
    x = g.input("x", ("B", 3))
    z = x.new_zeros(x.size(0), 5)
    assert z.shape == (lm.sym("B"), 5) and z.graph is g and z.dtype is lm.float32
    (out,) = lm.compile([z.sum(1) + x.new_full((1,), 2.0)], backend="reference")(x=np.zeros((4, 3), np.float32))
    np.testing.assert_array_equal(out, np.full(4, 2.0, np.float32))
    with pytest.raises(ValueError, match=r"^new_zeros: negative size -2 in shape \(-2, 3\)"):
        x.new_zeros(-2, 3)
    with pytest.raises(TypeError, match="^new_full: full: value must be a number, got str"):
        x.new_full((2,), "a")
    with pytest.raises(TypeError, match="^new_ones: input must be a GraphTensor"):
        lm.frontend.ops.creation.new_ones(None, 2)


def test_out_of_place_aliases_match_torch(backend):
    # torch's other names for div, mul, sub, neg, abs and trunc, as functions and methods (their
    # in-place forms, x.true_divide_(y) & co., were there already)
    x, y = rand((3, 4), low=-5, high=5), rand((4,), seed=1, low=0.5, high=3)

    def binary(a, b):
        ns = _ns(a)
        return (ns.true_divide(a, b), a.true_divide(b), ns.divide(a, b), a.divide(b, rounding_mode="floor"),
                ns.divide(a, b, rounding_mode="trunc"), ns.multiply(a, b), a.multiply(b), ns.subtract(a, b),
                a.subtract(b, alpha=2.5), ns.subtract(a, b, alpha=-1))

    def unary(a):
        ns = _ns(a)
        return ns.negative(a), a.negative(), ns.absolute(a), a.absolute(), ns.fix(a), a.fix()

    check(binary, [x, y], backend=backend)
    check(unary, [x], backend=backend)
    i, j = np.array([7, -7, 5], np.int32), np.array([2, 2, -3], np.int32)
    check(lambda a, b: (_ns(a).true_divide(a, b), a.divide(b, rounding_mode="floor"), a.multiply(b),
                        a.subtract(b, alpha=3), a.negative(), _ns(a).absolute(a), a.fix()), [i, j], backend=backend)


def test_out_of_place_aliases_keep_torchs_signatures_and_name_themselves_in_errors():
    g = lm.Graph()
    x, b = g.input("x", (3,)), g.input("b", (3,), dtype=lm.bool)
    with pytest.raises(TypeError):
        lm.divide(x, x, "floor")  # rounding_mode is keyword-only, as torch's
    with pytest.raises(TypeError):
        lm.subtract(x, x, 2)  # alpha too
    with pytest.raises(ValueError, match="^divide: .*rounding_mode"):
        lm.divide(x, x, rounding_mode="round")
    with pytest.raises(TypeError, match="^negative: .*bool"):
        b.negative()
    with pytest.raises(TypeError, match="^absolute: .*bool"):
        lm.absolute(b)
    with pytest.raises(TypeError, match="^subtract: .*alpha"):
        x.int().subtract(x.int(), alpha=0.5)
    for name in ("true_divide", "divide", "multiply", "subtract", "negative", "absolute", "fix"):
        assert getattr(lm, name).__doc__ and getattr(lm.GraphTensor, name).__doc__
