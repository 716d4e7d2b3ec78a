"""Pooling against torch, for what an audit found missing or wrong: adaptive max pooling's
``return_indices`` (values, indices and gradients, ties, NaNs, None entries, global pooling, unbatched
inputs, a symbolic batch, the functional forms), AvgPool's ``divisor_override`` (an int, as torch's),
and empty channel / spatial dims, which torch refuses (an adaptive average pooling raised a bare
ZeroDivisionError, the other layers returned an empty output)."""

import numpy as np
import pytest
import torch

import luminal as lm
import luminal.nn.functional as LF
from luminal.nn import layers as L

train = pytest.importorskip("luminal.train")
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _check(make, x, backend, shape=None):
    """``make(nn)`` builds one layer from ``L`` and from ``torch.nn``; compare the values and indices
    exactly (each is one input element / position) and the input's gradient for a random output
    gradient (which tells each element's share apart) to float rounding. ``shape``: the graph input's
    shape (a symbolic batch), default ``x``'s."""
    tx = torch.from_numpy(x).requires_grad_(True)
    touts = make(torch.nn)(tx)
    seed = np.random.default_rng(1).standard_normal(touts[0].shape).astype(np.float32)
    touts[0].backward(torch.from_numpy(seed))
    g = lm.Graph()
    xi = g.input("x", shape or x.shape)
    si = g.input("seed", tuple(shape[:1]) + seed.shape[1:] if shape else seed.shape)
    outs = make(L)(xi)
    assert isinstance(outs, tuple) and len(outs) == 2
    (dx,) = train.grad(outs[0], [xi], grad_output=si)
    got = lm.compile([*outs, dx], backend=backend)(x=x, seed=seed)
    np.testing.assert_array_equal(got[0], touts[0].detach().numpy(), err_msg="values")
    np.testing.assert_array_equal(got[1], touts[1].numpy(), err_msg="indices")
    np.testing.assert_allclose(got[2], tx.grad.numpy(), rtol=1e-6, atol=1e-6, err_msg="d out / d input")


def _ties(*shape, seed=0):
    return np.random.default_rng(seed).integers(0, 3, shape).astype(np.float32)


def _with_nans(*shape, seed=0):
    """Distinct values with NaNs, some windows holding two (torch takes the last)."""
    rng = np.random.default_rng(seed)
    x = rng.permutation(np.prod(shape)).astype(np.float32).reshape(shape)
    flat = x.reshape(-1)
    flat[rng.choice(flat.size, max(2, flat.size // 8), replace=False)] = np.nan
    return x


ADAPTIVE = {  # output sizes that do not divide the input, None entries, global pooling, unbatched
    "1d_3": (lambda nn: nn.AdaptiveMaxPool1d(3, return_indices=True), (2, 3, 7)),
    "1d_1": (lambda nn: nn.AdaptiveMaxPool1d(1, return_indices=True), (2, 3, 7)),
    "1d_unbatched": (lambda nn: nn.AdaptiveMaxPool1d(4, return_indices=True), (3, 6)),
    "2d_3x2": (lambda nn: nn.AdaptiveMaxPool2d((3, 2), return_indices=True), (2, 2, 7, 5)),
    "2d_1": (lambda nn: nn.AdaptiveMaxPool2d(1, return_indices=True), (2, 2, 5, 6)),
    "2d_none_3": (lambda nn: nn.AdaptiveMaxPool2d((None, 3), return_indices=True), (2, 2, 4, 7)),
    "2d_1x4": (lambda nn: nn.AdaptiveMaxPool2d((1, 4), return_indices=True), (2, 2, 5, 6)),
    "2d_larger": (lambda nn: nn.AdaptiveMaxPool2d((6, 4), return_indices=True), (1, 2, 4, 3)),
    "2d_unbatched": (lambda nn: nn.AdaptiveMaxPool2d((2, 3), return_indices=True), (2, 5, 4)),
    "3d_2x3x1": (lambda nn: nn.AdaptiveMaxPool3d((2, 3, 1), return_indices=True), (1, 2, 3, 5, 4)),
    "3d_1": (lambda nn: nn.AdaptiveMaxPool3d(1, return_indices=True), (1, 2, 3, 5, 4)),
    "3d_none": (lambda nn: nn.AdaptiveMaxPool3d((None, 2, 3), return_indices=True), (2, 3, 5, 4)),
}


@pytest.mark.parametrize("case", list(ADAPTIVE))
@pytest.mark.parametrize("fill", ["rand", "ties", "nans"])
def test_adaptive_max_pool_return_indices(case, fill, backend):
    """torch's indices: the flat position in the input plane of the element chosen (the first
    maximum in row-major order, the last NaN), which also gets the gradient. Was NotImplementedError."""
    make, shape = ADAPTIVE[case]
    x = {"rand": lambda: np.random.default_rng(0).standard_normal(shape).astype(np.float32),
         "ties": lambda: _ties(*shape), "nans": lambda: _with_nans(*shape)}[fill]()
    _check(make, x, backend)


@pytest.mark.parametrize("n", [3, 1])
def test_adaptive_max_pool_return_indices_symbolic_batch(n, backend):
    _check(lambda nn: nn.AdaptiveMaxPool2d((3, None), return_indices=True), _ties(n, 2, 7, 4, seed=n), backend,
           shape=("B", 2, 7, 4))


def test_adaptive_max_pool_functional_return_indices(backend):
    x = _ties(2, 3, 7, 5, seed=4)
    for nd in (1, 2, 3):
        xs = x[0, 0] if nd == 1 else x[0] if nd == 2 else x

        def make(nn, nd=nd):
            f = (torch.nn.functional if nn is torch.nn else LF)
            return lambda t: getattr(f, f"adaptive_max_pool{nd}d")(t, 3, return_indices=True)
        _check(make, np.ascontiguousarray(xs.reshape(1, *xs.shape) if nd == 1 else xs), backend)


@pytest.mark.parametrize("cls", ["AvgPool2d", "AvgPool3d"])
@pytest.mark.parametrize("bad", [2.5, 2.0, True])
def test_divisor_override_must_be_an_int(cls, bad):
    """torch refuses a float divisor_override (TypeError); it was taken and divided by."""
    with pytest.raises(TypeError):
        getattr(torch.nn, cls)(2, divisor_override=bad)(torch.ones((1, 1, 4, 4, 4)[: 4 if cls == "AvgPool2d" else 5]))
    with pytest.raises(TypeError, match=rf"^{cls}: divisor_override must be an int, got"):
        getattr(L, cls)(2, divisor_override=bad)
    with pytest.raises(ValueError, match=rf"^{cls}: divisor_override must be at least 1, got 0"):
        getattr(L, cls)(2, divisor_override=0)


EMPTY = {  # layer, input shape with an empty channel or spatial dim: torch refuses each
    "MaxPool2d_H0": (lambda nn: nn.MaxPool2d(1), (1, 1, 0, 3)),
    "MaxPool1d_C0": (lambda nn: nn.MaxPool1d(1), (1, 0, 3)),
    "AvgPool2d_C0": (lambda nn: nn.AvgPool2d(1), (1, 0, 3, 3)),
    "AvgPool3d_D0": (lambda nn: nn.AvgPool3d(1), (1, 1, 0, 2, 2)),
    "AdaptiveAvgPool2d_H0": (lambda nn: nn.AdaptiveAvgPool2d(2), (1, 1, 0, 3)),
    "AdaptiveMaxPool2d_H0": (lambda nn: nn.AdaptiveMaxPool2d(2), (1, 1, 0, 3)),
    "AdaptiveMaxPool1d_C0": (lambda nn: nn.AdaptiveMaxPool1d(2), (1, 0, 3)),
    "LPPool2d_W0": (lambda nn: nn.LPPool2d(2, 1), (2, 3, 0)),
}


@pytest.mark.parametrize("case", list(EMPTY))
def test_empty_channel_or_spatial_dims_are_refused(case):
    make, shape = EMPTY[case]
    with pytest.raises(RuntimeError):
        make(torch.nn)(torch.ones(shape))
    x = lm.Graph().input("x", shape)
    with pytest.raises(ValueError, match=r"expected input of shape with nonzero .*got \(" + ", ".join(map(str, shape))):
        make(L)(x)


@pytest.mark.parametrize("nd", [1, 2, 3])
def test_with_indices_functional_forms(nd, backend):
    """torch's ``F.max_poolNd_with_indices`` and ``F.adaptive_max_poolNd_with_indices`` (they were missing)."""
    x = _ties(1, 2, *(5, 6, 7)[3 - nd:], seed=nd)

    def pick(nn):
        return torch.nn.functional if nn is torch.nn else LF

    _check(lambda nn: lambda t: getattr(pick(nn), f"max_pool{nd}d_with_indices")(t, 3, 2, 1, ceil_mode=True), x,
           backend)
    _check(lambda nn: lambda t: getattr(pick(nn), f"adaptive_max_pool{nd}d_with_indices")(t, 3), x, backend)
