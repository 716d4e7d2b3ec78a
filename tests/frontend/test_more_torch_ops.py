"""Parity with torch for ``Tensor.t``/``view_as``/``reshape_as``/``expand_as``, logit, xlogy, erfc
(``luminal/frontend/ops/special.py``), clamp_min/clamp_max, aminmax, tensor_split, diag_embed,
linspace/logspace and ``mean``/``prod``'s ``dtype=``: values, dtypes, shapes and gradients on every
backend, the edges (0, 1, infinities, NaN, empty pieces) and the errors."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from parity import TORCH_DTYPE, check, compare_outputs, rand

import luminal as lm
from luminal import nn

pytestmark = pytest.mark.usefixtures("one_torch_thread")

F16, BF16, F32, F64, I32, BOOL = lm.float16, lm.bfloat16, lm.float32, lm.float64, lm.int32, lm.bool
inf, nan = math.inf, math.nan


def _ns(t):
    return torch if isinstance(t, torch.Tensor) else lm


def _dtype(t, d):
    """The lm dtype ``d`` on luminal's side, torch's on torch's (one lambda for both)."""
    return TORCH_DTYPE[d] if isinstance(t, torch.Tensor) else d


def _g():
    return lm.Graph().input("x", (2, 3, 4))


# Tensor.t, view_as, reshape_as, expand_as -------------------------------------------------------------
def test_t(backend):
    check(lambda t: t.t(), [rand((3, 5))], backend=backend)
    check(lambda t: t.t() * 2, [rand((5, 3))], backend=backend, pre=lambda t: t.T)  # a view of a view
    check(lambda t: t.t() + 1, [rand((4,))], backend=backend)  # 1-d and 0-d: as is
    check(lambda t: t.t() + 1, [np.array(2.5, np.float32)], backend=backend)
    check(lambda t: t.t(), [rand((2, 0), I32)], backend=backend)
    g = lm.Graph()
    x = g.input("x", ("B", 3))
    assert x.t().shape == (3, lm.sym("B"))
    v = g.input("v", (3,))
    assert v.t() is v


def test_view_as_reshape_as_expand_as(backend):
    check(lambda a, b: a.view_as(b) * b, [rand((3, 5)), rand((15,), seed=1)], backend=backend)
    check(lambda a, b: a.reshape_as(b) + b, [rand((3, 5)), rand((5, 3), seed=1)], backend=backend,
          pre=lambda t: t.T)  # not contiguous: reshape copies
    check(lambda a, b: a.view_as(b), [rand((1,)), np.array(3.0, np.float32)], backend=backend)  # to 0-d
    check(lambda a, b: a.expand_as(b) * b, [rand((3, 1)), rand((2, 3, 5), seed=1)], backend=backend)
    check(lambda a, b: a.reshape_as(b), [rand((6,), I32), rand((2, 3), BOOL)], backend=backend)


def test_shape_of_another_tensor_symbolic_and_parameter():
    g = lm.Graph()
    x, y = g.input("x", ("B", 6)), g.input("y", ("B", 2, 3))
    assert x.view_as(y).shape == y.shape and y.reshape_as(x).shape == x.shape
    w = nn.Parameter(np.arange(6, dtype=np.float32).reshape(3, 2))
    z = g.input("z", (6,))
    assert z.view_as(w).shape == (3, 2) and z.reshape_as(w).graph is g  # a Parameter as other
    out = lm.compile([w.reshape_as(z) + z, w.view_as(z.reshape(2, 3)).t()])(z=np.ones(6, np.float32))
    np.testing.assert_array_equal(out[0], np.arange(6) + 1)  # a Parameter as self joins other's graph
    np.testing.assert_array_equal(out[1], np.arange(6).reshape(2, 3).T)


def test_t_view_as_errors():
    x = _g()
    with pytest.raises(ValueError, match=r"^t: expects a tensor with <= 2 dims, got 3 \(use mT"):
        x.t()
    with pytest.raises(TypeError, match="^view_as: other must be a GraphTensor, got ndarray"):
        x.view_as(np.zeros(24))
    with pytest.raises(TypeError, match="^reshape_as: other must be a GraphTensor, got tuple"):
        x.reshape_as((4, 6))
    with pytest.raises(ValueError, match="^reshape: cannot reshape to"):
        x.view_as(lm.Graph().input("y", (5,)))


# logit, xlogy, erfc ------------------------------------------------------------------------------------
LOGIT_EDGES = np.array([-1.0, -0.0, 0.0, 1e-7, 0.2, 0.3, 0.5, 0.7, 0.9999, 1.0, 2.0, inf, -inf, nan], np.float32)


@pytest.mark.parametrize("eps", [None, 1e-6, 0.3, 0.6, -1.0])
def test_logit(eps, backend):
    check(lambda t: t.logit(eps), [LOGIT_EDGES], backend=backend)  # torch's NaN/0 gradients outside
    check(lambda t: _ns(t).logit(t, eps=eps), [rand((3, 5), low=0.01, high=0.99)], backend=backend)
    check(lambda t: t.logit(eps), [rand((3, 5), F64, low=-0.2, high=1.2, seed=1)], backend=backend)
    for d in (F16, BF16):
        check(lambda t: t.logit(eps), [rand((7,), d, low=0.05, high=0.95)], dtypes=[d], backend=backend)


def test_logit_int_symbolic_and_errors(backend):
    check(lambda t: t.logit(), [np.array([0, 1, 2], np.int32)], backend=backend)  # float32, as torch
    check(lambda t: t.logit(0.25), [np.array([True, False])], backend=backend)
    check(lambda t: t.logit(), [rand((4, 3), low=0.1, high=0.9)], backend=backend, shapes=[("B", 3)])
    with pytest.raises(TypeError, match="^logit: eps must be a number, got str"):
        _g().logit("0.1")
    with pytest.raises(TypeError, match="^logit: input must be a GraphTensor"):
        lm.logit(np.ones(3))


XLOGY_X = [0.0, 0.0, 0.0, 0.0, 0.0, -0.0, 1.0, 2.0, -1.0, nan, 0.0, 2.0, 3.0, inf]
XLOGY_Y = [0.0, 2.0, inf, -1.0, nan, 0.0, 0.0, inf, -inf, 1.0, -inf, 0.5, -2.0, 0.0]


def test_xlogy_edges(backend):
    """0 where x == 0 (y = 0 and inf included) unless y is NaN; torch's gradients there (by x: log(y),
    0 where y <= 0; by y: x / y, NaN at 0 / 0)."""
    x, y = np.array(XLOGY_X, np.float32), np.array(XLOGY_Y, np.float32)
    out = check(lambda a, b: a.xlogy(b), [x, y], backend=backend)[0]
    assert not np.signbit(out[:6]).any()  # +0.0, as torch's
    check(lambda a, b: _ns(a).xlogy(a, b), [x.astype(np.float64), y.astype(np.float64)], backend=backend)


def test_xlogy_broadcast_numbers_and_dtypes(backend):
    check(lambda a, b: a.xlogy(b), [rand((3, 1), low=-1, high=2), rand((4,), low=0, high=3, seed=1)], backend=backend)
    check(lambda a, b: _ns(a).xlogy(a, b), [rand((2, 5)), rand((5,), low=0.5, high=3, seed=2)], backend=backend,
          pre=lambda t: t.flip(-1))
    check(lambda a: _ns(a).xlogy(a, 3.0), [np.array([0.0, 1.5, -2.0], np.float32)], backend=backend)
    check(lambda a: _ns(a).xlogy(2, a), [np.array([0.0, 1.5, 4.0], np.float32)], backend=backend)  # number input
    check(lambda a, b: a.xlogy(b), [np.array([0, 1, 2], np.int32), np.array([0, 5, 3], np.int32)], backend=backend)
    check(lambda a, b: a.xlogy(b), [rand((5,), F16, low=0, high=2), rand((5,), low=0.1, high=3, seed=1)],
          dtypes=[F16, F32], backend=backend)  # promoted to float32
    for d in (F16, BF16):
        check(lambda a, b: a.xlogy(b), [rand((6,), d, low=0, high=2), rand((6,), d, low=0.1, high=3, seed=1)],
              dtypes=[d, d], backend=backend)
    check(lambda a, b: a.xlogy(b), [rand((4, 3), low=0, high=1), rand((4, 3), low=1, high=3, seed=1)],
          backend=backend, shapes=[("B", 3), ("B", 3)])


def test_xlogy_errors():
    with pytest.raises(TypeError, match="^xlogy: at least one operand must be a GraphTensor"):
        lm.xlogy(1.0, 2.0)
    with pytest.raises(ValueError, match=r"^xlogy: shapes \(2, 3, 4\) and \(5,\) cannot broadcast"):
        lm.xlogy(_g(), np.ones(5, np.float32))


ERFC_POINTS = np.array([-inf, -30.0, -6.5, -3.0, -0.7, -0.5, -0.2, -0.0, 0.0, 1e-9, 0.3, 0.49, 0.5, 0.9, 2.0,
                        5.9, 6.0, 6.1, 9.0, 9.5, 10.5, 26.5, 27.0, inf, nan])


def test_erfc(backend):
    """To the dtype's relative precision in the tail too, where ``1 - erf`` is 0 (erfc(9) = 4.1e-37)."""
    out = check(lambda t: t.erfc(), [ERFC_POINTS], backend=backend, rtol=1e-13, atol=0, grad="finite")[0]
    want = np.array([math.erfc(v) for v in ERFC_POINTS])
    np.testing.assert_allclose(out, want, rtol=1e-13, atol=0)
    check(lambda t: t.erfc(), [ERFC_POINTS.astype(np.float32)], backend=backend, rtol=3e-7, atol=0, grad="finite")
    check(lambda t: _ns(t).erfc(t), [rand((3, 5), low=-4, high=4)], backend=backend)
    check(lambda t: t.erfc(), [rand((3, 5), low=-7, high=7, seed=1)], backend=backend, pre=lambda t: t.T)
    for d in (F16, BF16):
        check(lambda t: t.erfc(), [rand((9,), d, low=-3, high=4)], dtypes=[d], backend=backend)
    check(lambda t: t.erfc(), [np.array([-2, 0, 3], np.int32)], backend=backend)  # float32, as torch


# clamp_min, clamp_max ----------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["clamp_min", "clamp_max"])
def test_clamp_min_max(name, backend):
    x = rand((3, 5), low=-2, high=2)
    check(lambda t: getattr(t, name)(0.5), [x], backend=backend)
    check(lambda t: getattr(_ns(t), name)(t, -0.25), [x], backend=backend, pre=lambda t: t.T)
    check(lambda t, b: getattr(t, name)(b), [x, rand((5,), seed=1)], backend=backend)  # a tensor bound
    check(lambda t: getattr(t, name)(1), [rand((7,), I32, low=-3, high=3)], backend=backend)  # stays int32
    check(lambda t: getattr(t, name)(1.5), [rand((7,), I32, low=-3, high=3)], backend=backend)  # float32
    check(lambda t: getattr(t, name)(0.0), [np.array([nan, -inf, inf, -0.0, 0.0], np.float32)], backend=backend)
    check(lambda t: getattr(t, name)(0.3), [rand((6,), BF16)], dtypes=[BF16], backend=backend)
    with pytest.raises(TypeError, match=f"^{name}: {name[-3:]} must be a number or a tensor, got None"):
        getattr(_g(), name)(None)


# aminmax -----------------------------------------------------------------------------------------------
def test_aminmax(backend):
    ties = np.array([[1.0, 3.0, 3.0], [2.0, -1.0, -1.0]], np.float32)  # gradients shared among ties, as torch
    check(lambda t: _ns(t).aminmax(t), [ties], backend=backend)
    check(lambda t: t.aminmax(keepdim=True), [ties], backend=backend)
    for dim in (0, 1, -1):
        check(lambda t: t.aminmax(dim=dim), [ties], backend=backend)
        check(lambda t: _ns(t).aminmax(t, dim=dim, keepdim=True), [rand((3, 5, 2))], backend=backend,
              pre=lambda t: t.transpose(0, 2))
    check(lambda t: t.aminmax(dim=1), [np.array([[nan, 1.0], [2.0, -inf]], np.float32)], backend=backend)
    check(lambda t: t.aminmax(dim=0), [rand((5, 3), I32, low=-9, high=9)], backend=backend)
    check(lambda t: t.aminmax(), [np.array([True, False, True])], backend=backend, grad=False)
    check(lambda t: t.aminmax(dim=0), [np.array(2.5, np.float32)], backend=backend)  # 0-d
    check(lambda t: t.aminmax(dim=1), [rand((0, 3))], backend=backend)  # empty, not reduced
    check(lambda t: t.aminmax(dim=0), [rand((5,), BF16)], dtypes=[BF16], backend=backend)
    check(lambda t: t.aminmax(dim=1), [rand((4, 3))], backend=backend, shapes=[("B", 3)])


def test_aminmax_result_and_errors():
    x = _g()
    r = x.aminmax(dim=1)
    assert type(r).__name__ == "aminmax" and r._fields == ("min", "max") and isinstance(r, tuple)
    assert r.min.shape == r.max.shape == (2, 4) and r[0] is r.min
    with pytest.raises(ValueError, match="^aminmax: cannot compute aminmax over an empty dim"):
        lm.Graph().input("e", (3, 0)).aminmax()
    with pytest.raises(TypeError, match="^aminmax: dim must be an int, got"):
        x.aminmax(dim=(0, 1))
    with pytest.raises(ValueError, match="^aminmax: dim 3 is out of range for a 3-d tensor"):
        x.aminmax(dim=3)
    with pytest.raises(TypeError):
        x.aminmax(1)  # dim is keyword-only, as torch's
    s = lm.Graph().input("s", (3, "N"))
    r = s.aminmax(dim=1)
    for outs in ([r.min, r.max], [r.max]):  # a symbolic dim bound to 0: refused before the run
        f = lm.compile(outs, backend="reference")
        with pytest.raises(IndexError, match=r"aminmax: reducing dim 1 of a \(3, N\) tensor, which is empty"):
            f(s=np.zeros((3, 0), np.float32))


# tensor_split ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("arg", [1, 3, 4, 9, [1, 4], [2], [1, -2, 10, 3], (0, 0, 7), [], [-9, 5]])
def test_tensor_split(arg, backend):
    check(lambda t: _ns(t).tensor_split(t, arg), [rand((7, 3))], backend=backend)
    check(lambda t: t.tensor_split(arg, dim=1), [rand((2, 7))], backend=backend, pre=lambda t: t.flip(1))
    check(lambda t: t.tensor_split(arg, -1), [rand((3, 7), I32)], backend=backend)


def test_tensor_split_errors():
    x = _g()
    with pytest.raises(ValueError, match="^tensor_split: the number of sections must be at least 1, got 0"):
        x.tensor_split(0)
    with pytest.raises(TypeError, match="^tensor_split: sections must be an int, got float"):
        x.tensor_split(2.0)
    with pytest.raises(TypeError, match="^tensor_split: index must be an int, got str"):
        x.tensor_split([1, "2"])
    with pytest.raises(TypeError, match="^tensor_split: indices_or_sections must be an int or a sequence of ints"):
        x.tensor_split(lm.arange(2, graph=x.graph))
    with pytest.raises(ValueError, match="^tensor_split: needs a tensor with at least 1 dim"):
        lm.Graph().input("s", ()).tensor_split(2)
    with pytest.raises(ValueError, match="^tensor_split: needs a static dim, got dim 0 of size B"):
        lm.Graph().input("b", ("B", 2)).tensor_split(2)
    assert len(lm.Graph().input("b", ("B", 2)).tensor_split(2, 1)) == 2  # another dim may be symbolic


# diag_embed --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("offset,dim1,dim2", [(0, -2, -1), (1, 0, 1), (-1, 1, 0), (2, 0, 2), (-2, -1, 0), (0, 2, 1)])
def test_diag_embed(offset, dim1, dim2, backend):
    check(lambda t: _ns(t).diag_embed(t, offset, dim1, dim2), [rand((2, 3))], backend=backend)
    check(lambda t: t.diag_embed(offset=offset, dim1=dim1, dim2=dim2), [rand((3, 2), I32)], backend=backend,
          pre=lambda t: t.T)


def test_diag_embed_more(backend):
    check(lambda t: t.diag_embed(), [rand((4,))], backend=backend)
    check(lambda t: t.diag_embed(1, 1, 3), [rand((2, 3, 3))], backend=backend)
    check(lambda t: t.diag_embed(-1), [np.array([True, False])], backend=backend)
    check(lambda t: t.diag_embed(), [rand((2, 0))], backend=backend)
    check(lambda t: t.diag_embed(), [rand((3, 2))], backend=backend, shapes=[("B", 2)])
    with pytest.raises(ValueError, match="^diag_embed: needs at least 1 dim, got a 0-d tensor"):
        lm.Graph().input("s", ()).diag_embed()
    with pytest.raises(ValueError, match=r"^diag_embed: dim1 and dim2 are the same dim \(0\)"):
        _g().diag_embed(0, 0, -4)
    with pytest.raises(ValueError, match="^diag_embed: dim 4 is out of range for a 4-d tensor"):
        _g().diag_embed(0, 4)
    with pytest.raises(TypeError, match="^diag_embed: offset must be an int, got float"):
        _g().diag_embed(1.0)
    with pytest.raises(ValueError, match="^diag_embed: the last dim must be static, got T"):
        lm.Graph().input("t", (2, "T")).diag_embed()


# linspace, logspace ------------------------------------------------------------------------------------
SPACES = [(0, 1, 5), (-1.7, 10.2, 7), (3, 3, 1), (0.3, 5, 1), (0, 1, 0), (1, 0, 6), (0.1, 1.3, 100), (2, -3, 2)]


def _factory(fn, args, kwargs, dtype, backend, exact):
    g = lm.Graph()
    out = getattr(lm, fn)(*args, **kwargs, dtype=dtype, graph=g)
    ref = getattr(torch, fn)(*args, **kwargs, dtype=torch.int64 if dtype is I32 else TORCH_DTYPE[dtype])
    (got,) = lm.compile([out], backend=backend)()
    compare_outputs([out], [got], [ref], rtol=0 if exact else None, atol=0 if exact else None)


@pytest.mark.parametrize("dtype", [F32, F64, F16, BF16, I32])
def test_linspace(dtype, backend):
    for args in SPACES:  # (torch's float arithmetic may differ in the last bit by CPU: ints exact)
        _factory("linspace", args, {}, dtype, backend, exact=dtype is I32)
    _factory("linspace", (-4, 4), {"steps": 9}, dtype, backend, exact=dtype is I32)


@pytest.mark.parametrize("dtype", [F32, F64, F16, BF16, I32])
def test_logspace(dtype, backend):
    for args in [(0, 2, 3), (-1.7, 3.2, 7), (0.5, 0.5, 1), (2, 5, 1), (1, 0, 0), (3, -3, 6)]:
        _factory("logspace", args, {}, dtype, backend, exact=dtype is I32)
    _factory("logspace", (0, 3, 4, 2.0), {}, dtype, backend, exact=dtype is I32)
    _factory("logspace", (1, 3), {"steps": 3, "base": -2.0}, dtype, backend, exact=dtype is I32)


def test_linspace_forms_and_errors():
    g = lm.Graph()
    a, b, c = g.linspace(0, 1, 5), lm.linspace(g, 0, 1, 5), lm.linspace(0.0, 1.0, steps=5, graph=g)
    assert a.shape == b.shape == c.shape == (5,) and a.dtype is F32 and a.graph is g
    assert g.logspace(0, 2, 3, 2.0).dtype is F32 and lm.logspace(g, 0, 2, steps=3, base=2).shape == (3,)
    x = g.input("x", (5,))
    (out,) = lm.compile([x * g.linspace(0, 4, 5, dtype=lm.float64)])(x=np.ones(5, np.float32))
    np.testing.assert_array_equal(out, [0, 1, 2, 3, 4])
    with pytest.raises(ValueError, match="^linspace: the number of steps must be non-negative, got -1"):
        g.linspace(0, 1, -1)
    with pytest.raises(TypeError, match="^linspace: steps must be an int, got float"):
        g.linspace(0, 1, 2.0)
    with pytest.raises(TypeError, match="^logspace: missing steps"):
        g.logspace(0, 1)
    with pytest.raises(TypeError, match=r"^linspace: start must be a number, got GraphTensor .* known only when"):
        g.linspace(x[0], 1, 3)
    with pytest.raises(TypeError, match="^logspace: base must be a number, got str"):
        g.logspace(0, 1, 3, "e")
    with pytest.raises(TypeError, match="^linspace: is not defined for bool"):
        g.linspace(0, 1, 3, dtype=lm.bool)
    with pytest.raises(TypeError, match="^linspace: expected start, end and steps, got 4 positional"):
        lm.linspace(0, 1, 3, 4, graph=g)
    with pytest.raises(TypeError, match="^logspace: base given both by position and as base="):
        g.logspace(0, 1, 3, 2.0, base=3.0)
    with pytest.raises(ValueError, match="^linspace: device 'cuda'"):
        g.linspace(0, 1, 3, device="cuda")


# mean(dtype=), prod(dtype=) ---------------------------------------------------------------------------
@pytest.mark.parametrize("src,to", [(I32, F32), (I32, F64), (F16, F32), (F32, F64), (F64, F32), (F32, BF16),
                                    (BOOL, F16)])
def test_mean_dtype(src, to, backend):
    x = rand((3, 5), src, low=-3, high=3)
    check(lambda t: t.mean(dtype=_dtype(t, to)), [x], dtypes=[src], backend=backend)
    check(lambda t: _ns(t).mean(t, 1, keepdim=True, dtype=_dtype(t, to)), [x], dtypes=[src], backend=backend)
    check(lambda t: t.mean((0, 1), dtype=_dtype(t, to)), [x], dtypes=[src], backend=backend, pre=lambda t: t.T)


@pytest.mark.parametrize("src,to", [(I32, F32), (F16, F32), (F32, F64), (F64, F16), (F32, I32), (BOOL, I32),
                                    (F32, BOOL)])
def test_prod_dtype(src, to, backend):
    x = rand((3, 5), src, low=-2, high=2)
    kw = dict(dtypes=[src], backend=backend, grad=to.is_float)  # (torch's autograd refuses an int or bool result)
    if to is F16:  # a gradient through a float16 product: float16's precision, whatever the input's dtype
        kw.update(grad_rtol=1e-2, grad_atol=1e-2)
    check(lambda t: t.prod(dtype=_dtype(t, to)), [x], **kw)
    check(lambda t: _ns(t).prod(t, 1, keepdim=True, dtype=_dtype(t, to)), [x], **kw)
    check(lambda t: t.prod(0, dtype=_dtype(t, to)), [x], pre=lambda t: t.T, **kw)


def test_mean_dtype_errors():
    g = lm.Graph()
    with pytest.raises(TypeError, match="^mean: dtype must be a float dtype, got int32"):
        g.input("x", (3,)).mean(dtype=lm.int32)
    with pytest.raises(TypeError, match="^mean: needs a float tensor, got int32"):
        g.input("i", (3,), dtype=lm.int32).mean()
    with pytest.raises(TypeError, match="unknown dtype 'float33'"):
        g.input("y", (3,)).prod(dtype="float33")
