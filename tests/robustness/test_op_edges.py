"""Edge cases found by torch's OpInfo samples, each compared with torch (forward and gradients).

0-d tensors along dim 0 / -1, ``correction=None``, negative ``take_along_dim`` indices, ``tan`` near
its poles, float64 ``erf``, unbatched convolutions and pooling, ``arange`` with bool bounds, and
out-of-range class labels in the losses.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from parity import check

import luminal as lm
from luminal import train
from luminal.nn import layers as L
from luminal.nn.layers import conv

pytestmark = pytest.mark.usefixtures("one_torch_thread")

F32 = np.float32


def _scalar(v=2.5):
    return np.array(v, dtype=F32)


def _index(v):
    return np.array(v, dtype=np.int32)


# 1. 0-d tensors: torch treats a scalar as one element along dim 0 (or -1) -------------------------
ZERO_D = {  # name: (op, torch op or None for the same)
    "softmax": (lambda x: x.softmax(0), None),
    "softmax_neg": (lambda x: x.softmax(-1), None),
    "log_softmax": (lambda x: x.log_softmax(0), None),
    "cumsum": (lambda x: x.cumsum(0), None),
    "cumprod": (lambda x: x.cumprod(0), None),
    "argmax": (lambda x: x.argmax(dim=0), None),
    "argmin": (lambda x: x.argmin(dim=0), None),
    "argmax_keepdim": (lambda x: x.argmax(dim=0, keepdim=True), None),
    "squeeze": (lambda x: x.squeeze(0), None),
    "squeeze_neg": (lambda x: x.squeeze(-1), None),
    "transpose": (lambda x: x.transpose(0, 0), None),
    "transpose_neg": (lambda x: x.transpose(-1, 0), None),
    "unfold": (lambda x: x.unfold(0, 1, 1), None),
    "flip": (lambda x: x.flip(0), None),
}


@pytest.mark.parametrize("name", sorted(ZERO_D))
def test_zero_d_dim_ops(name, backend):
    op, torch_op = ZERO_D[name]
    check(op, [_scalar(-1.75)], torch_op=torch_op, backend=backend)


INDEXED = {  # name: (op, torch op, index value); the index is an int32 input, int64 for torch
    "index_select": (lambda x, i: x.index_select(0, i), lambda x, i: x.index_select(0, i.long()), 0),
    "index_select_1elem": (lambda x, i: x.index_select(-1, i), lambda x, i: x.index_select(-1, i.long()), [0]),
    "gather": (lambda x, i: x.gather(0, i), lambda x, i: x.gather(0, i.long()), 0),
    "gather_1d_index": (lambda x, i: x.gather(0, i), lambda x, i: x.gather(0, i.long()), [0, 0, 0]),
    "scatter": (lambda x, i: x.scatter(0, i, x * 3.0), lambda x, i: x.scatter(0, i.long(), x * 3.0), 0),
    "scatter_value": (lambda x, i: x.scatter(0, i, 7.0), lambda x, i: x.scatter(0, i.long(), 7.0), 0),
    "scatter_add": (lambda x, i: x.scatter_add(0, i, x * 3.0), lambda x, i: x.scatter_add(0, i.long(), x * 3.0), 0),
    "scatter_add_1d_index": (lambda x, i: x.scatter_add(0, i, (x * 3.0).expand(2)),
                             lambda x, i: x.scatter_add(0, i.long(), (x * 3.0).expand(2)), [0, 0]),
}


@pytest.mark.parametrize("name", sorted(INDEXED))
def test_zero_d_indexing(name, backend):
    op, torch_op, index = INDEXED[name]
    check(op, [_scalar(-1.75), _index(index)], torch_op=torch_op, backend=backend)


@pytest.mark.parametrize("name", ["gather", "index_select", "scatter_add"])
def test_zero_d_index_into_1d(name, backend):
    """A 0-d index into a 1-d input counts as one index, as torch: gather gives a 0-d result,
    index_select a 1-element one, scatter_add adds at one position."""
    ops = {
        "gather": (lambda x, i: x.gather(0, i), lambda x, i: x.gather(0, i.long())),
        "index_select": (lambda x, i: x.index_select(0, i), lambda x, i: x.index_select(0, i.long())),
        "scatter_add": (lambda x, i: x.scatter_add(0, i, x[1] * 2.0),
                        lambda x, i: x.scatter_add(0, i.long(), x[1] * 2.0)),
    }
    op, torch_op = ops[name]
    check(op, [np.array([0.5, -1.0, 2.0], F32), _index(2)], torch_op=torch_op, backend=backend)


def test_zero_d_wrong_dims_name_the_op():
    """Dims other than 0 / -1 of a 0-d tensor, and ops that need a real dim, fail naming the op."""
    g = lm.Graph()
    x = g.input("x", (), dtype=lm.float32)
    cases = [(lambda: x.softmax(1), "softmax"), (lambda: x.transpose(0, 1), "transpose"),
             (lambda: x.cumsum(-2), "cumsum"), (lambda: x.unfold(0, 2, 1), "unfold"),
             (lambda: x.split(1), "split"), (lambda: x.chunk(1), "chunk"), (lambda: x.size(0), "size"),
             (lambda: x.unflatten(0, (1,)), "unflatten"),
             (lambda: x.index_select(0, g.input("i", (2,), dtype=lm.int32)), "index_select")]
    for make, name in cases:
        with pytest.raises(ValueError, match=f"^{name}: "):
            make()


# 2. correction=None means torch's default, Bessel's correction -----------------------------------
@pytest.mark.parametrize("op", ["var", "std"])
def test_correction_none_is_default(op, backend):
    x = np.random.default_rng(0).uniform(-2, 2, (3, 5)).astype(F32)
    check(lambda t: (getattr(t, op)(correction=None), getattr(t, op)(1, correction=None, keepdim=True)), [x],
          backend=backend)


# 3. take_along_dim counts negative indices from the end, as torch (and x[idx]) -----------------
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_take_along_dim_negative_indices(dim, backend):
    x = np.random.default_rng(1).uniform(-2, 2, (3, 4)).astype(F32)
    n = x.shape[dim]
    # 1 along the other dim: take_along_dim broadcasts it
    idx = np.random.default_rng(2).integers(-n, n, (5, 1) if dim == 0 else (1, 5)).astype(np.int32)
    idx.flat[0] = -1
    check(lambda t, i: t.take_along_dim(i, dim), [x, idx],
          torch_op=lambda t, i: torch.take_along_dim(t, i.long(), dim), backend=backend)


def test_take_along_dim_negative_symbolic(backend):
    """The wrap reads the dim's size at run time when it is symbolic."""
    x = np.random.default_rng(1).uniform(-2, 2, (5, 2)).astype(F32)
    idx = np.array([[-1, 0], [-5, -2]], np.int32)
    check(lambda t, i: t.take_along_dim(i, 0), [x, idx], shapes=[("B", 2), (2, 2)],
          torch_op=lambda t, i: torch.take_along_dim(t, i.long(), 0), backend=backend)


# 4. tan near its poles -------------------------------------------------------------------------
def _tan_points(dtype):
    near = np.pi / 2 + np.linspace(-1e-3, 1e-3, 201)
    x = np.concatenate([np.linspace(-1.57, 1.57, 2001), near, -near])
    return x.astype(dtype)


def test_tan_float32_near_poles(backend):
    """Within 2 float32 ulps of torch (measured: 1 ulp, 1.2e-7, both sides within half an ulp of the
    exact value) over [-1.57, 1.57] and within 1e-3 of +-pi/2; ``sin/cos`` in float32 was 1e-4 off."""
    check(lambda t: t.tan(), [_tan_points(np.float32)], backend=backend, rtol=2.4e-7, atol=0)


def test_tan_float64_near_poles(backend):
    """float64: within 5 ulps (measured 4.4e-16; a vectorised sin may differ by an ulp or two), also
    at the double nearest pi/2 (tan 1.6e16, where the unreduced ``sin/cos`` had no correct digit) and
    for angles up to 1e6."""
    x = np.concatenate([_tan_points(np.float64), [np.pi / 2, -np.pi / 2, 3 * np.pi / 2, 0.0],
                        np.linspace(-1e6, 1e6, 2001)])
    check(lambda t: t.tan(), [x], backend=backend, rtol=1e-15, atol=0)


# 5. erf and exact gelu in float64 ---------------------------------------------------------------
_ERF64_POINTS = np.concatenate([np.linspace(-7.0, 7.0, 4001), [0.0, 0.5, -0.5, 6.0, 1e-300, np.inf, -np.inf]])


def test_erf_float64(backend):
    """Within 10 ulps of torch (measured 4.1e-16 relative); A&S 7.1.26 was 1.5e-7 off. The gradient
    too (measured 3.2e-15 relative; beyond |x| = 6, where erf is 1 in float64, ours is 0 and torch's
    below 3e-16)."""
    check(lambda t: t.erf(), [_ERF64_POINTS], backend=backend, rtol=2e-15, atol=0,
          grad="finite", grad_rtol=1e-13, grad_atol=1e-15)


def test_gelu_float64(backend):
    """Exact gelu, ``x/2 (1 + erf(x/sqrt(2)))``, as torch computes it; for x << 0 the ``1 + erf`` cancels
    (as in torch), so an ulp of erf near -1 is 1e-16 absolute: hence the small ``atol``."""
    x = np.linspace(-8.0, 8.0, 4001)
    check(lambda t: t.gelu(), [x],
          torch_op=torch.nn.functional.gelu, backend=backend, rtol=1e-13, atol=1e-15,
          grad_rtol=1e-12, grad_atol=1e-15)


# 6. convolution of an unbatched input ------------------------------------------------------------
CONV_UNBATCHED = {  # name: (luminal functional, torch functional, input shape, weight shape, kwargs)
    "conv1d": (conv.conv1d, torch.nn.functional.conv1d, (4, 9), (6, 2, 3), dict(stride=2, padding=1, groups=2)),
    "conv2d": (conv.conv2d, torch.nn.functional.conv2d, (3, 6, 5), (4, 3, 3, 2), dict(padding="same", dilation=(2, 1))),
    "conv3d": (conv.conv3d, torch.nn.functional.conv3d, (2, 4, 3, 5), (3, 2, 2, 2, 3), dict(stride=(1, 2, 1))),
}


@pytest.mark.parametrize("name", sorted(CONV_UNBATCHED))
def test_conv_unbatched_functional(name, backend):
    """torch's conv takes ``(C, *spatial)`` as a batch of one and returns ``(O, *out)``."""
    ours, theirs, xs, ws, kw = CONV_UNBATCHED[name]
    rng = np.random.default_rng(3)
    arrays = [rng.standard_normal(s).astype(F32) for s in (xs, ws, ws[:1])]
    check(lambda x, w, b: ours(x, w, b, **kw), arrays, torch_op=lambda x, w, b: theirs(x, w, b, **kw),
          backend=backend, rtol=1e-5, atol=1e-5)


def test_conv_unbatched_layers(backend):
    """The layers take the same path (Conv1d and Conv3d here; Conv2d in tests/nn/test_layers.py)."""
    for ours, theirs, shape in [(L.Conv1d(3, 4, 2), torch.nn.Conv1d(3, 4, 2), (3, 7)),
                                (L.Conv3d(2, 3, 2, padding=1), torch.nn.Conv3d(2, 3, 2, padding=1), (2, 3, 4, 2))]:
        ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
        x = np.random.default_rng(4).standard_normal(shape).astype(F32)
        check(lambda t: ours(t), [x], torch_op=theirs, backend=backend)


def test_conv_wrong_rank_names_the_op():
    g = lm.Graph()
    with pytest.raises(ValueError, match="^conv2d: expected an input of 3 .unbatched. or 4 .batched. dims"):
        conv.conv2d(g.input("x", (5, 6)), g.input("w", (4, 3, 3, 3)))


# 7. arange's bounds ---------------------------------------------------------------------------------
@pytest.mark.parametrize("args", [(False, True, True), (True,), (0, 5, True), (True, 4), (0.5, True, 0.25)],
                         ids=str)
def test_arange_bool_bounds(args, backend):
    """torch takes bools as 0 / 1 (``arange(False, True, True)`` is ``[0]``)."""
    check(lambda: lm.Graph().arange(*args), [], torch_op=lambda: torch.arange(*args), backend=backend)


@pytest.mark.parametrize(("args", "what", "kind"), [
    ((None,), "end", TypeError), ((0, 3, "x"), "step", TypeError), ((0, float("inf")), "end", ValueError),
    ((float("nan"), 3), "start", ValueError), ((0, 3, 0), "step", ValueError)], ids=str)
def test_arange_bad_bounds_name_the_op(args, what, kind):
    with pytest.raises(kind, match=f"^arange: {what} must be"):
        lm.Graph().arange(*args)


# 8. class labels out of range ----------------------------------------------------------------------
@pytest.mark.parametrize("loss", ["cross_entropy", "nll_loss"])
def test_known_out_of_range_label_names_the_loss(loss):
    """Labels known when the graph is built (a constant target) are checked then, as torch checks
    them, naming the loss and the target: not left to the run's gather ("gather: index 7 ...")."""
    g = lm.Graph()
    x = g.input("x", (2, 3))
    fn = getattr(train, loss)
    for target in (g.constant(np.array([0, 7], np.int32)), g.constant(-2, lm.int32).expand(2)):
        with pytest.raises(IndexError, match=f"^{loss}: target holds class (7|-2), out of range for 3 classes"):
            fn(x, target)


@pytest.mark.parametrize("loss", ["cross_entropy", "nll_loss"])
def test_known_labels_in_range_and_ignored(loss, backend):
    """Constant labels in range, and ignore_index (itself out of range), still match torch."""
    labels = np.array([2, -100, 0, 1], np.int32)
    x = np.random.default_rng(5).standard_normal((4, 3)).astype(F32)
    ours, theirs = getattr(train, loss), getattr(torch.nn.functional, loss)
    check(lambda t: ours(t, t.graph.constant(labels)), [x],
          torch_op=lambda t: theirs(t, torch.from_numpy(labels).long()), backend=backend)
