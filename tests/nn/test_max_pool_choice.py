"""Which element of a max-pooling window is "the" maximum, against torch: it gets the whole gradient
and is the one ``return_indices`` names. torch takes a window's elements in window order (row-major)
and replaces its maximum only with a greater element or a NaN, never with padding: ties go to the
first maximum, a window holding NaNs to its last NaN, and a window whose elements are all -inf to its
first element (not a padding position, though padding reads -inf too). Ties are common (the zeros after
a ReLU), so a gradient spread over them trains differently from torch.

Every pooling layer and window size is covered: windows of up to ``MAX_TAPS`` elements (pooled as an
elementwise chain), larger ones (pooled as a reduction) and the adaptive layers (windows of varying
size, which need not divide the input)."""

import numpy as np
import pytest
import torch

import luminal as lm
import luminal.nn.functional as LF
from luminal.nn import layers as L

train = pytest.importorskip("luminal.train")


def _check(make, x, backend, *, call=None):
    """``make(nn)`` builds one layer from ``L`` and from ``torch.nn``; compare its outputs (values and,
    with return_indices, indices) and the input's gradient for a random output gradient, which tells
    every element's share apart. Outputs exactly (each is one input element); the gradient to float
    rounding (an element in overlapping windows sums their adjoints, in another order than torch)."""
    call = call or (lambda m, t: m(t))
    tm, m = make(torch.nn), make(L)
    tx = torch.from_numpy(x).requires_grad_(True)
    tout = call(tm, tx)
    touts = tout if isinstance(tout, tuple) else (tout,)
    seed = np.random.default_rng(1).standard_normal(touts[0].shape).astype(np.float32)
    touts[0].backward(torch.from_numpy(seed))

    g = lm.Graph()
    xi = g.input("x", x.shape)
    si = g.input("seed", seed.shape)
    out = call(m, xi)
    outs = out if isinstance(out, tuple) else (out,)
    (dx,) = train.grad(outs[0], [xi], grad_output=si)
    got = lm.compile([*outs, dx], backend=backend)(x=x, seed=seed)
    for k, (a, b) in enumerate(zip(got[:-1], touts, strict=True)):
        np.testing.assert_array_equal(a, b.detach().numpy(), err_msg=f"output {k}")
    np.testing.assert_allclose(got[-1], tx.grad.numpy(), rtol=1e-6, atol=1e-6, err_msg="d out / d input")


def _ties(*shape, seed=0):
    """Small integers: most windows hold their maximum several times, in varying positions."""
    return np.random.default_rng(seed).integers(0, 3, shape).astype(np.float32)


MAX_POOLS = {  # (layer, input shape); windows of 4 to 63 elements, with padding, dilation, ceil_mode
    "2d_k2": (lambda nn: nn.MaxPool2d(2), (2, 3, 6, 8)),
    "2d_k3s2p1": (lambda nn: nn.MaxPool2d(3, 2, 1), (2, 3, 9, 8)),
    "2d_k5": (lambda nn: nn.MaxPool2d(5), (2, 3, 10, 10)),
    "2d_k5s2p2": (lambda nn: nn.MaxPool2d(5, 2, 2), (2, 3, 9, 11)),
    "2d_7x3": (lambda nn: nn.MaxPool2d((7, 3), (2, 1), (3, 1)), (2, 2, 12, 9)),
    "2d_k5_dilated_ceil": (lambda nn: nn.MaxPool2d(5, 3, 2, dilation=(1, 2), ceil_mode=True), (1, 2, 12, 15)),
    "1d_k17": (lambda nn: nn.MaxPool1d(17, 5, 8, ceil_mode=True), (2, 3, 40)),
    "3d_k3": (lambda nn: nn.MaxPool3d(3, 2, 1), (1, 2, 6, 7, 5)),
    "3d_k4x4x4": (lambda nn: nn.MaxPool3d(4), (1, 2, 8, 4, 8)),
}


@pytest.mark.parametrize("case", list(MAX_POOLS))
@pytest.mark.parametrize("fill", ["zeros", "ties"])
def test_max_pool_ties_go_to_the_first_maximum(case, fill, backend):
    make, shape = MAX_POOLS[case]
    x = np.zeros(shape, np.float32) if fill == "zeros" else _ties(*shape)
    _check(make, x, backend)


ADAPTIVE = {  # output sizes that do not divide the input (overlapping windows of varying size)
    "1d_3": (lambda nn: nn.AdaptiveMaxPool1d(3), (2, 3, 7)),
    "1d_1": (lambda nn: nn.AdaptiveMaxPool1d(1), (2, 3, 7)),
    "2d_3x2": (lambda nn: nn.AdaptiveMaxPool2d((3, 2)), (2, 2, 7, 5)),
    "2d_1": (lambda nn: nn.AdaptiveMaxPool2d(1), (2, 2, 5, 6)),
    "2d_none_3": (lambda nn: nn.AdaptiveMaxPool2d((None, 3)), (2, 2, 4, 7)),
    "2d_1x4": (lambda nn: nn.AdaptiveMaxPool2d((1, 4)), (2, 2, 5, 6)),
    "2d_3x1": (lambda nn: nn.AdaptiveMaxPool2d((3, 1)), (2, 2, 5, 6)),
    "3d_2x3x1": (lambda nn: nn.AdaptiveMaxPool3d((2, 3, 1)), (1, 2, 3, 5, 4)),
    "3d_1": (lambda nn: nn.AdaptiveMaxPool3d(1), (1, 2, 3, 5, 4)),
}


@pytest.mark.parametrize("case", list(ADAPTIVE))
@pytest.mark.parametrize("fill", ["zeros", "ties"])
def test_adaptive_max_pool_ties_go_to_the_first_maximum(case, fill, backend):
    make, shape = ADAPTIVE[case]
    x = np.zeros(shape, np.float32) if fill == "zeros" else _ties(*shape, seed=2)
    _check(make, x, backend)


def test_window_order_is_row_major(backend):
    """[[0, 1], [1, 0]]: the first maximum in row-major order is (0, 1), in column-major (1, 0). A
    reduction one dim at a time finds torch's only if it reduces the last dim first."""
    x = np.tile(np.array([[0, 1], [1, 0]], np.float32), (1, 1, 3, 3))
    for make in (lambda nn: nn.AdaptiveMaxPool2d(1), lambda nn: nn.AdaptiveMaxPool2d((2, 1)),
                 lambda nn: nn.AdaptiveMaxPool2d((1, 2)), lambda nn: nn.MaxPool2d(6)):
        _check(make, x, backend)


def _with_nans(shape, seed=0):
    """Distinct values with NaNs, some windows holding two (torch's gradient goes to the last)."""
    rng = np.random.default_rng(seed)
    x = rng.permutation(np.prod(shape)).astype(np.float32).reshape(shape)
    flat = x.reshape(-1)
    flat[rng.choice(flat.size, max(2, flat.size // 12), replace=False)] = np.nan
    return x


@pytest.mark.parametrize("case", ["2d_k3s2p1", "2d_k5", "2d_k5s2p2", "2d_7x3", "1d_k17", "3d_k4x4x4"])
def test_max_pool_nan_windows(case, backend):
    make, shape = MAX_POOLS[case]
    _check(make, _with_nans(shape), backend)
    _check(lambda nn: make(nn).__class__(**_with_indices(make(nn))), _with_nans(shape, 1), backend)


def _with_indices(layer):
    return {k: getattr(layer, k) for k in ("kernel_size", "stride", "padding", "dilation", "ceil_mode")} | {
        "return_indices": True}


@pytest.mark.parametrize("case", list(ADAPTIVE))
def test_adaptive_max_pool_nan_windows(case, backend):
    make, shape = ADAPTIVE[case]
    _check(make, _with_nans(shape, 3), backend)


def test_adaptive_max_pool_nan_repro(backend):
    """The audit's case: a NaN in the top-left window of a 4x4 -> 2x2 pooling."""
    x = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
    x[0, 0, 0, 1] = np.nan
    _check(lambda nn: nn.AdaptiveMaxPool2d((2, 2)), x, backend)


@pytest.mark.parametrize("case", ["2d_k3s2p1", "2d_k5s2p2", "2d_7x3", "2d_k5_dilated_ceil", "1d_k17", "3d_k3"])
def test_max_pool_all_neginf_windows_with_padding(case, backend):
    """Windows whose elements are all -inf, with padding (which reads -inf too): torch's maximum is the
    window's first element, never a padding position (index -1), and it gets the gradient."""
    make, shape = MAX_POOLS[case]
    x = np.zeros(shape, np.float32)
    x[..., : shape[-1] // 2] = -np.inf
    x.reshape(-1)[:: 7] = -np.inf
    layer = make(torch.nn)
    _check(lambda nn: make(nn).__class__(**_with_indices(layer)), x, backend)
    _check(make, x, backend)


def test_audit_neginf_indices(backend):
    x = np.zeros((1, 1, 4, 4), np.float32)
    x[0, 0, :3, :3] = -np.inf
    _check(lambda nn: nn.MaxPool2d(5, 2, 2, return_indices=True), x, backend)


def test_functional_forms(backend):
    x = _ties(2, 3, 9, 7, seed=4)
    _check(lambda nn: None, x, backend,
           call=lambda m, t: (LF if isinstance(t, lm.GraphTensor) else torch.nn.functional).max_pool2d(
               t, 5, 2, 2, return_indices=True))
    _check(lambda nn: None, x, backend,
           call=lambda m, t: (LF if isinstance(t, lm.GraphTensor) else torch.nn.functional).adaptive_max_pool2d(
               t, (4, 3)))
    _check(lambda nn: None, x[0], backend,
           call=lambda m, t: (LF if isinstance(t, lm.GraphTensor) else torch.nn.functional).max_pool1d(
               t, 6, 1, 3))
