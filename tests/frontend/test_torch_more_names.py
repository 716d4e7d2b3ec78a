"""More of torch's names (``frontend/ops/torch_more.py``), as functions and methods, against torch:
sgn, frac, signbit, heaviside, float_power, fliplr/flipud, hsplit/vsplit/dsplit, dist, logdet,
block_diag, cartesian_prod, tril_indices/triu_indices, cov/corrcoef, gcd/lcm, Tensor.outer and
Tensor.swapdims, and the function forms lm.transpose/permute/squeeze/unsqueeze/reshape/swapaxes/
swapdims/tile: values and gradients, special values, errors."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from parity import TORCH_DTYPE, check, rand

import luminal as lm

pytestmark = pytest.mark.usefixtures("one_torch_thread")

INF, NAN = math.inf, math.nan
F16, BF16, F32, F64, I32, B = lm.float16, lm.bfloat16, lm.float32, lm.float64, lm.int32, lm.bool


def _ns(t):
    return torch if isinstance(t, torch.Tensor) else lm


SPECIAL = np.array([-2.5, -1.0, -0.0, 0.0, 0.7, 3.25, -7.75, INF, -INF, NAN, 1e-40, -1e-40], np.float32)


# elementwise ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [F32, F64, F16, BF16], ids=lambda d: d.name)
def test_sgn_frac_signbit(dtype, backend):
    x = lm.core.dtype.to_storage(SPECIAL.astype(np.float64), dtype)
    check(lambda t: (_ns(t).sgn(t), t.sgn(), _ns(t).frac(t), t.frac()), [x], dtypes=[dtype], backend=backend,
          grad="finite")
    # (a NaN's sign bit is not observable: signbit reads False there, torch the bit)
    check(lambda t: (_ns(t).signbit(t), t.signbit()), [x[~np.isnan(x)]], dtypes=[dtype], backend=backend)
    y = rand((3, 4), dtype, seed=1, low=-5, high=5)
    check(lambda t: (t.sgn(), t.frac(), t.signbit()), [y], dtypes=[dtype], backend=backend,
          pre=lambda t: t.transpose(0, 1))


def test_sgn_signbit_of_integers_and_bools(backend):
    i = np.array([-3, 0, 5, -(2 ** 31)], np.int32)
    check(lambda t: (t.sgn(), t.signbit()), [i], backend=backend)
    check(lambda t: t.signbit(), [np.array([True, False])], backend=backend)
    with pytest.raises(TypeError, match="^frac: needs a float tensor"):
        lm.Graph().input("i", (2,), dtype=lm.int32).frac()


@pytest.mark.parametrize("dtype", [F32, F64, F16, I32], ids=lambda d: d.name)
def test_heaviside(dtype, backend):
    x = np.array([-1.5, 0.0, 2.0, -0.0, 3.0, -4.0], np.float64)
    if dtype is F32 or dtype is F64:
        x = np.concatenate([x, [NAN, INF, -INF]])
    x = lm.core.dtype.to_storage(x, dtype) if dtype.is_float else x.astype(np.int32)
    v = lm.core.dtype.to_storage(np.array([0.5]), dtype) if dtype.is_float else np.array([7], np.int32)
    check(lambda a, b: (_ns(a).heaviside(a, b), a.heaviside(b)), [x, v], dtypes=[dtype] * 2, backend=backend)
    g = lm.Graph()
    with pytest.raises(TypeError, match="^heaviside: input and values must have one dtype"):
        g.input("a", (2,)).heaviside(g.input("b", (2,), dtype=lm.float64))


@pytest.mark.parametrize("dtype", [F32, F16, I32, F64], ids=lambda d: d.name)
def test_float_power(dtype, backend):
    base = rand((3, 4), dtype, seed=2, low=0.5, high=3)
    exp = rand((3, 4), dtype, seed=3, low=-2, high=2)
    check(lambda a, b: (_ns(a).float_power(a, b), a.float_power(b)), [base, exp], dtypes=[dtype] * 2,
          backend=backend)
    check(lambda a: (a.float_power(2), a.float_power(0.5), _ns(a).float_power(a, -1.5)), [base], dtypes=[dtype],
          backend=backend)
    neg = rand((5,), dtype, seed=4, low=-3, high=-0.5)
    check(lambda a: a.float_power(3), [neg], dtypes=[dtype], backend=backend)


# shapes ---------------------------------------------------------------------------------------------------
def test_fliplr_flipud(backend):
    x = rand((3, 4, 2), seed=5)
    check(lambda t: (_ns(t).fliplr(t), t.fliplr(), _ns(t).flipud(t), t.flipud()), [x], backend=backend)
    check(lambda t: t.flipud(), [rand((5,), seed=6)], backend=backend)
    g = lm.Graph()
    with pytest.raises(ValueError, match="^fliplr: needs at least 2 dims"):
        g.input("v", (3,)).fliplr()
    with pytest.raises(ValueError, match="^flipud: needs at least 1 dim"):
        g.input("s", ()).flipud()


@pytest.mark.parametrize("name,shape,arg", [
    ("hsplit", (6,), 3), ("hsplit", (2, 6), 2), ("hsplit", (2, 7, 3), [1, 4]), ("vsplit", (4, 3), 2),
    ("vsplit", (5, 2), [2, 3]), ("dsplit", (2, 3, 4), 2), ("dsplit", (2, 3, 5), [1, -1]),
])
def test_directional_splits(name, shape, arg, backend):
    x = rand(shape, seed=7)
    check(lambda t: tuple(getattr(_ns(t), name)(t, arg)), [x], backend=backend)
    check(lambda t: tuple(getattr(t, name)(arg)), [x], backend=backend)


def test_directional_split_errors():
    g = lm.Graph()
    with pytest.raises(ValueError, match="^hsplit: dim 1 of size 5 does not split into 2 equal pieces"):
        g.input("a", (2, 5)).hsplit(2)
    with pytest.raises(RuntimeError):
        torch.zeros(2, 5).hsplit(2)
    with pytest.raises(ValueError, match="^vsplit: needs at least 2 dims"):
        g.input("b", (4,)).vsplit(2)
    with pytest.raises(ValueError, match="^dsplit: needs at least 3 dims"):
        g.input("c", (4, 2)).dsplit(2)


# reductions and products -------------------------------------------------------------------------------------
@pytest.mark.parametrize("p", [2, 1, 0, 3, 0.5, INF, -INF])
def test_dist(p, backend):
    a, b = rand((3, 4), seed=8), rand((4,), seed=9)
    check(lambda x, y: (_ns(x).dist(x, y, p), x.dist(y, p=p)), [a, b], backend=backend,
          grad=p != 0)  # (torch's backward of p=0 fails; here the gradient is 0)


def test_dist_of_equal_tensors_has_zero_gradient(backend):
    a = rand((2, 3), seed=10)
    check(lambda x, y: x.dist(y), [a, a.copy()], backend=backend)


def _spd(n, batch=(), seed=0):
    m = np.random.default_rng(seed).standard_normal(batch + (n, n))
    return (m @ np.swapaxes(m, -1, -2) + n * np.eye(n)).astype(np.float32)


def test_logdet(backend):
    check(lambda t: (_ns(t).logdet(t), t.logdet()), [_spd(3, seed=11)], backend=backend)
    check(lambda t: t.logdet(), [_spd(4, (2,), seed=12).astype(np.float64)], backend=backend)
    neg = np.diag([2.0, -1.0, 3.0]).astype(np.float32)  # det < 0: NaN; singular: -inf
    sing = np.array([[1.0, 2.0], [2.0, 4.0]], np.float32)
    check(lambda t: t.logdet(), [neg], backend=backend, grad=False)
    check(lambda t: t.logdet(), [sing], backend=backend, grad=False)


def test_block_diag(backend):
    a, b, c = rand((), seed=13), rand((3,), seed=14), rand((2, 2), seed=15)
    check(lambda x, y, z: _ns(x).block_diag(x, y, z), [a, b, c], backend=backend)
    check(lambda x, y: _ns(x).block_diag(x, y), [rand((2, 3), seed=16), rand((1, 4), F64, seed=17)],
          backend=backend)
    check(lambda x, y: _ns(x).block_diag(x, y), [np.array([[1, 2]], np.int32), rand((2, 1), seed=18)],
          backend=backend)
    check(lambda x, y: _ns(x).block_diag(x, y), [rand((2, 0), seed=19), rand((1, 2), seed=20)], backend=backend)
    check(lambda x: _ns(x).block_diag(x), [np.array([[True, False]])], backend=backend)


def test_cartesian_prod(backend):
    a, b, c = rand((2,), seed=21), rand((3,), seed=22), rand((2,), seed=23)
    check(lambda x, y: _ns(x).cartesian_prod(x, y), [a, b], backend=backend)
    check(lambda x, y, z: _ns(x).cartesian_prod(x, y, z), [a, b, c], backend=backend)
    check(lambda x: _ns(x).cartesian_prod(x), [a], backend=backend)
    check(lambda x, y: _ns(x).cartesian_prod(x, y), [np.array([1, 2], np.int32), np.array([3, 4, 5], np.int32)],
          backend=backend)


@pytest.mark.parametrize("row,col,offset", [(3, 4, 0), (3, 4, 1), (4, 3, -1), (4, 4, -5), (3, 3, 7), (0, 3, 0),
                                            (1, 1, 0)])
def test_tril_triu_indices(row, col, offset, backend):
    g = lm.Graph()
    outs = [lm.tril_indices(row, col, offset, graph=g), lm.triu_indices(g, row, col, offset=offset),
            g.input("x", (1,)) * 1]
    got = lm.compile(outs, backend=backend)(x=np.zeros(1, np.float32))
    for o, want in zip(got[:2], (torch.tril_indices(row, col, offset), torch.triu_indices(row, col, offset))):
        assert o.dtype == np.int32 and o.shape == tuple(want.shape)
        np.testing.assert_array_equal(o, want.numpy())


def test_cov_and_corrcoef(backend):
    x = rand((3, 6), seed=24, low=-3, high=3)
    check(lambda t: (_ns(t).cov(t), t.cov(), t.cov(correction=0), _ns(t).corrcoef(t), t.corrcoef()), [x],
          backend=backend)
    check(lambda t: (t.cov(), t.corrcoef()), [x[0]], backend=backend)  # one variable: 0-d results
    check(lambda t: (t.cov(), t.corrcoef()), [x[:1]], backend=backend)  # (1, n): squeezed to 0-d too
    check(lambda t: t.cov(), [x], backend=backend, pre=lambda t: t.transpose(0, 1))
    check(lambda t: (t.cov(), t.corrcoef()), [np.array([[1, 2, 4], [3, 1, 0]], np.int32)], backend=backend)
    check(lambda t: t.cov(correction=6), [x], backend=backend, grad=False)  # divisor 0: inf


def test_cov_weights(backend):
    x = rand((2, 5), seed=25, low=-3, high=3)
    fw = np.array([1, 2, 0, 3, 1], np.int32)
    aw = np.array([0.5, 1.0, 2.0, 0.25, 1.5], np.float32)

    def op(t, f, a):
        return t.cov(fweights=f, aweights=a), t.cov(fweights=f), t.cov(aweights=a, correction=0)

    check(op, [x, fw, aw], torch_op=lambda t, f, a: (t.cov(fweights=f.long(), aweights=a), t.cov(fweights=f.long()),
                                                     t.cov(aweights=a, correction=0)), backend=backend)


def test_cov_weight_checks_when_run(backend):
    g = lm.Graph()
    x, f = g.input("x", (2, 3)), g.input("f", (3,), dtype=lm.int32)
    run = lm.compile([x.cov(fweights=f)], backend=backend)
    X = rand((2, 3), seed=26)
    with pytest.raises(RuntimeError, match="^cov: weights sum to zero"):
        run(x=X, f=np.zeros(3, np.int32))
    with pytest.raises(RuntimeError, match=r"^cov: fweights cannot be negative \(1 negative\)"):
        run(x=X, f=np.array([2, -1, 1], np.int32))
    want = torch.from_numpy(X).cov(fweights=torch.tensor([2, 0, 1]))
    np.testing.assert_allclose(run(x=X, f=np.array([2, 0, 1], np.int32))[0], want.numpy(), rtol=1e-5, atol=1e-6)
    with pytest.raises(TypeError, match="^cov: fweights must be an integer tensor"):
        x.cov(fweights=g.input("fw", (3,)))
    with pytest.raises(ValueError, match="^cov: aweights must be 1-d with one weight per observation"):
        x.cov(aweights=g.input("aw", (2,)))


FIB = [1134903170, 701408733, 433494437, 267914296]


@pytest.mark.parametrize("name", ["gcd", "lcm"])
def test_gcd_lcm(name, backend):
    a = np.array([0, -4, 6, 0, 12, 7, 18, -15, 1, FIB[0], FIB[2], 2 ** 30, -(2 ** 31), 3], np.int32)
    b = np.array([0, 6, -4, 5, 18, 13, 12, -25, 1, FIB[1], FIB[3], 3 * 2 ** 20, 2, -(2 ** 31)], np.int32)
    if name == "lcm":  # (torch's lcm of INT_MIN wraps too; kept to values whose product fits)
        a, b = a[:9], b[:9]
    check(lambda x, y: (getattr(_ns(x), name)(x, y), getattr(x, name)(y)), [a, b], backend=backend)
    check(lambda x: getattr(x, name)(6), [a], torch_op=lambda x: getattr(x, name)(torch.tensor(6, dtype=x.dtype)),
          backend=backend)
    with pytest.raises(TypeError, match=f"^{name}: needs integer tensors"):
        getattr(lm.Graph().input("f", (2,)), name)(2)


def test_outer_and_swapdims_methods(backend):
    a, b = rand((3,), seed=27), rand((4,), seed=28)
    check(lambda x, y: x.outer(y), [a, b], backend=backend)
    check(lambda x: (x.swapdims(0, 2), _ns(x).swapdims(x, 1, -1)), [rand((2, 3, 4), seed=29)], backend=backend)


def test_function_forms_of_shape_methods(backend):
    x = rand((2, 1, 3, 4), seed=30)

    def op(t):
        ns = _ns(t)
        return (ns.transpose(t, 0, 2), ns.permute(t, (3, 1, 0, 2)), ns.squeeze(t), ns.squeeze(t, 1),
                ns.unsqueeze(t, -1), ns.reshape(t, (6, -1)), ns.swapaxes(t, 1, 3), ns.tile(t, (2, 1)),
                ns.tile(t, (1, 2, 1, 1, 1)))

    check(op, [x], backend=backend)
    check(lambda t: _ns(t).squeeze(t, (0, 1)), [rand((1, 1, 3), seed=31)], backend=backend)


@pytest.mark.parametrize("dtype", [F32, F64], ids=lambda d: d.name)
def test_dtypes_map(dtype):  # (the table the cases above rely on)
    assert TORCH_DTYPE[dtype] in (torch.float32, torch.float64)
