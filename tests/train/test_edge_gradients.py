"""Values and gradients at ties, kinks and boundaries, where a composition of primitives can pick a
different one-sided derivative (or split a tie differently) than torch's hand-written backward.

Every input here is hand-chosen to sit exactly on the point in question (a tie of a reduction, the
kink of a loss, the threshold of an activation, padding of a pool, a constant row of a norm), next to a
few generic values. Each case compares values and the gradient of the summed outputs with torch
through the shared parity harness, on every backend.

Not covered because luminal does not expose them: torch.max/min(dim) with indices (luminal's
``max(dim)`` is ``amax``), vector norms (torch.linalg.norm), sort/topk/median/kthvalue/cummax,
hardtanh/relu6/hardsigmoid/hardswish/selu/celu, GroupNorm, margin/hinge losses. Covered elsewhere: unary special values
(tests/frontend/test_elementwise.py), maximum/clamp/relu ties (tests/train/test_autograd.py), amax/amin
over several axes (tests/frontend/test_reduce.py), BCE at p = 0 and 1 and kl_div at target 0
(tests/train/test_losses.py: values only there, the gradients differ by documented choice).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from parity import check

import luminal as lm
from luminal import train
from luminal.nn import layers as NN
from luminal.nn import losses as L

INF, NAN = math.inf, math.nan
pytestmark = [pytest.mark.filterwarnings("ignore:reduction. 'mean' divides the total loss:UserWarning"),  # kl_div
              pytest.mark.usefixtures("one_torch_thread")]



def f32(x) -> np.ndarray:
    return np.array(x, np.float32)


def distinct(shape, seed=0, scale=0.37, shift=-5.0) -> np.ndarray:
    """Pairwise distinct values (no ties anywhere), many negative: a 0 padding would win a max."""
    n = int(np.prod(shape))
    return (np.random.default_rng(seed).permutation(n) * scale + shift).astype(np.float32).reshape(shape)


# reductions -----------------------------------------------------------------------------------------
# rows: a tie at the max, all tied, all -inf, tied +inf, tied signed zeros, a tie at the min
TIES = f32([[1, 3, 3, 0], [2, 2, 2, 2], [-INF, -INF, -INF, -INF], [INF, 5, INF, -1], [0.0, -0.0, 0.0, -1],
            [-2, 4, -2, 1]])


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("fn", ["amax", "amin", "max", "min"])
def test_extreme_single_axis_ties(fn, axis, keepdim, backend):
    """torch.amax/amin share the gradient evenly among the tied extremes of each reduced slice;
    ``max(dim)``/``min(dim)`` return ``(values, indices)`` and give a tie's gradient to the one
    (first) index, as torch's."""
    check(lambda t: getattr(t, fn)(axis, keepdim), [TIES], backend=backend)
    check(lambda t: getattr(t, fn)(axis, keepdim), [TIES], backend=backend, shapes=[("B", "N")])


@pytest.mark.parametrize("fn", ["max", "min"])
def test_full_extreme_ties(fn, backend):
    """``x.max()`` over everything: torch's full max/min (not only amax) shares a tie evenly too."""
    x = f32([[1, 3, 3], [3, -1, 0], [-1, 3, -1]])
    check(lambda t: getattr(t, fn)(), [x], backend=backend)
    check(lambda t: getattr(t, fn)(), [-x], backend=backend)


@pytest.mark.parametrize("fn", ["argmax", "argmin"])
def test_arg_extreme_ties_pick_the_first(fn, backend):
    x = np.concatenate([TIES, -TIES])
    check(lambda t: getattr(t, fn)(1), [x], backend=backend)
    check(lambda t: getattr(t, fn)(0), [x], backend=backend)


ZEROS = f32([[0, 2, 3, 4], [0, 0, 2, 1], [1.5, 2, 3, -4], [2, -1, 0, 0.5], [0, 0, 0, 0], [-0.0, 3, 1, 2]])


@pytest.mark.parametrize("op", ["prod1", "prod0", "prod_all", "cumprod1", "cumprod0"])
def test_prod_and_cumprod_at_zeros(op, backend):
    """One zero factor: its gradient is the product of the others; two or more: all gradients 0
    (torch's backward special-cases zeros; a division by the input would give NaN)."""
    f = {"prod1": lambda t: t.prod(1), "prod0": lambda t: t.prod(0), "prod_all": lambda t: t.prod(),
         "cumprod1": lambda t: t.cumprod(1), "cumprod0": lambda t: t.cumprod(0)}[op]
    check(f, [ZEROS], backend=backend)


LSE = f32([[1, 1, 1, 1], [-INF, 0, -INF, 1], [3, 3, -INF, 0], [-INF, 2, 2, -INF], [-30, 40, 40, 40]])


@pytest.mark.parametrize("fn", ["logsumexp", "softmax", "log_softmax"])
@pytest.mark.parametrize("axis", [1, 0])
def test_softmax_family_ties_and_minus_inf(fn, axis, backend):
    """Tied maxima (the max shift's shared gradient must cancel out) and -inf entries (gradient 0)."""
    x = LSE if axis == 1 else np.ascontiguousarray(LSE.T)
    check(lambda t: getattr(t, fn)(axis), [x], backend=backend)
    # symbolic dims: the max then reads one extra -inf element per reduced row (``_amax_or``)
    check(lambda t: getattr(t, fn)(axis), [x], backend=backend, shapes=[("B", "N")])


CONST_ROWS = f32([[1.5, 1.5, 1.5, 1.5], [0, 0, 0, 0], [-2, -2, -2, -2], [1, 2, 4, 8]])


@pytest.mark.parametrize("correction", [0, 1])
def test_var_of_constant_rows(correction, backend):
    """Constant rows: the variance's gradient there is 0."""
    check(lambda t: t.var(1, correction=correction), [CONST_ROWS], backend=backend)
    check(lambda t: t.var(1, correction=correction), [CONST_ROWS], backend=backend, shapes=[("B", "N")])


def test_var_of_constant_tensor(backend):
    check(lambda t: t.var(), [np.full((3, 4), 0.75, np.float32)], backend=backend)


@pytest.mark.parametrize("axis", [1, None])
def test_std_of_constant_gradient_is_zero(axis, backend):
    """torch's std backward is ``grad / (2 std)`` masked to 0 where std == 0, so a constant row's
    gradient is 0, not the NaN of sqrt'(0) * 0."""
    x = CONST_ROWS if axis == 1 else np.full((3, 4), 0.75, np.float32)
    check(lambda t: t.std(axis), [x], backend=backend)


# elementwise ops and activations ---------------------------------------------------------------------
# (x, lo, hi) triples on every boundary of clamp's gradient (torch's clamp_backward / _min_max)
CLAMP_ROWS = [
    (0.5, 0.5, 2.0),    # x == lo < hi: x gets it
    (2.0, 0.5, 2.0),    # x == hi > lo: x gets it
    (0.0, 0.5, 2.0),    # x < lo < hi: lo
    (3.0, 0.5, 2.0),    # x > hi: hi
    (0.0, 1.0, 1.0),    # x < lo == hi: nobody
    (1.0, 1.0, 1.0),    # x == lo == hi: x
    (3.0, 1.0, 1.0),    # x > hi == lo: hi
    (1.5, 2.0, 1.0),    # lo > hi, x between: hi
    (0.0, 2.0, 1.0),    # x below both, lo > hi: hi
    (3.0, 2.0, 1.0),    # x above both, lo > hi: hi
    (2.0, 2.0, 1.0),    # x == lo > hi: hi
    (1.0, 2.0, 1.0),    # x == hi < lo: hi
    (-0.0, 0.0, 1.0),   # signed zero tie with lo
    (0.7, -1.0, 1.0),   # inside
]
CX, CLO, CHI = (f32(c) for c in zip(*CLAMP_ROWS))


def test_clamp_tensor_bounds_on_the_boundaries(backend):
    check(lambda x, lo, hi: x.clamp(lo, hi), [CX, CLO, CHI], backend=backend)


def test_clamp_one_tensor_bound_on_the_boundary(backend):
    check(lambda x, lo: x.clamp(min=lo), [CX, CLO], backend=backend)
    check(lambda x, hi: x.clamp(max=hi), [CX, CHI], backend=backend)


def test_clamp_infinite_and_nan_bounds(backend):
    """Infinite bounds, and NaN bounds that give NaN (and no gradient to x)."""
    rows = [(5.0, -INF, INF), (5.0, INF, -INF), (INF, 0.0, INF), (-INF, -INF, 0.0), (0.0, NAN, 2.0),
            (1.0, NAN, 2.0), (3.0, 0.0, NAN), (-1.0, 0.0, NAN), (0.5, 0.0, NAN), (1.0, NAN, NAN), (NAN, 0.0, 1.0)]
    check(lambda x, lo, hi: x.clamp(lo, hi), [f32(c) for c in zip(*rows)], backend=backend)


@pytest.mark.parametrize("bounds", ["tensor", "scalar"])
def test_clamp_nan_min_above_max(bounds, backend):
    """torch's clamp is NaN wherever x or a bound is NaN, also where it would otherwise take max's
    value (x > max, or max < min); max keeps its gradient there."""
    if bounds == "tensor":
        check(lambda x, lo, hi: x.clamp(lo, hi), [f32([3.0, 2.5, NAN, NAN]), f32([NAN, NAN, 2.0, NAN]),
                                                  f32([2.0, -1.0, 1.0, -0.0])], backend=backend)
    else:
        check(lambda x: x.clamp(NAN, 2.0), [f32([3.0, 2.5, 1.0])], backend=backend)


def test_clamp_equal_scalar_bounds(backend):
    check(lambda x: x.clamp(1.0, 1.0), [f32([0.0, 1.0, 2.0, -0.0])], backend=backend)


SOFTPLUS = [  # (beta, threshold, x): x * beta exactly at the threshold, one ulp either side, and far away
    (1.0, 20.0, [20.0, np.nextafter(np.float32(20), 0), np.nextafter(np.float32(20), 30), -20.0, 0.0, 25.0]),
    (2.0, 3.0, [1.5, np.nextafter(np.float32(1.5), 0), np.nextafter(np.float32(1.5), 3), -1.5, 0.0, 4.0]),
    (0.5, 1.0, [2.0, 1.0, 3.0, -2.0, 0.0]),
    (1.0, 0.0, [0.0, -0.0, 1e-30, -1e-30, 1.0, -1.0]),
    (-1.0, 2.0, [-2.0, 2.0, 0.0, -3.0, 3.0]),
]


@pytest.mark.parametrize("beta,threshold,x", SOFTPLUS, ids=[f"b{b}_t{t}" for b, t, _ in SOFTPLUS])
def test_softplus_at_its_threshold(beta, threshold, x, backend):
    check(lambda t: t.softplus(beta, threshold), [f32(x)],
          torch_op=lambda t: F.softplus(t, beta, threshold), backend=backend)


KINK = f32([0.0, -0.0, 1e-30, -1e-30, 1e-7, -1e-7, 1.0, -1.0])
ACTS = {
    "leaky_relu_neg": (lambda t: t.leaky_relu(-0.5), lambda t: F.leaky_relu(t, -0.5)),
    "leaky_relu_2": (lambda t: t.leaky_relu(2.0), lambda t: F.leaky_relu(t, 2.0)),
    "leaky_relu_0": (lambda t: t.leaky_relu(0.0), lambda t: F.leaky_relu(t, 0.0)),
    "elu_2": (lambda t: t.elu(2.0), lambda t: F.elu(t, 2.0)),
    "elu_0": (lambda t: t.elu(0.0), lambda t: F.elu(t, 0.0)),
    "gelu_tanh": (lambda t: t.gelu(approximate="tanh"), lambda t: F.gelu(t, approximate="tanh")),
    "silu": (lambda t: t.silu(), F.silu),
    "mish": (lambda t: t.mish(), F.mish),
    "abs_relu": (lambda t: t.abs().relu(), lambda t: t.abs().relu()),
    "sign_mul": (lambda t: t.sign() * t, lambda t: t.sign() * t),
}


@pytest.mark.parametrize("name", list(ACTS))
def test_activation_kinks(name, backend):
    op, top = ACTS[name]
    check(op, [KINK], torch_op=top, backend=backend)


def test_dropout_p1_and_p0(backend):
    x = f32([[0.0, -1.5, 2.0], [3.0, -0.0, 1.0]])
    check(lambda t: NN.dropout(t, 1.0), [x], torch_op=lambda t: F.dropout(t, 1.0, training=True), backend=backend)
    check(lambda t: NN.dropout(t, 0.0), [x], torch_op=lambda t: F.dropout(t, 0.0, training=True), backend=backend)


# layers -----------------------------------------------------------------------------------------------
def _layer(make, train_mode=False, seed=1):
    """The same layer from luminal's and torch's nn, torch's (perturbed) parameters loaded into ours."""
    tm = make(torch.nn).train(train_mode)
    with torch.no_grad():
        for p in tm.parameters():
            p.add_(torch.from_numpy(np.random.default_rng(seed + p.numel()).standard_normal(p.shape)
                                    .astype(np.float32)) * 0.3)
    m = make(NN).train(train_mode)
    m.load_state_dict({k: v.detach().numpy().astype(np.int32) if v.dtype == torch.int64 else v.detach().numpy()
                       for k, v in tm.state_dict().items()})
    return m, tm


def _check_layer(make, x, backend, train_mode=False, **kw):
    m, tm = _layer(make, train_mode)
    check(lambda t: m(t), [x], torch_op=lambda t: tm(t), backend=backend, **kw)


MAXPOOLS = {  # windows that overhang the input into -inf padding (never tied: distinct inputs)
    "1d_pad": (lambda nn: nn.MaxPool1d(3, 2, 1), (2, 2, 7)),
    "1d_k2_pad1_ceil": (lambda nn: nn.MaxPool1d(2, 2, 1, ceil_mode=True), (1, 2, 6)),
    "1d_dilated": (lambda nn: nn.MaxPool1d(3, 1, 1, dilation=2), (1, 2, 6)),
    "2d_pad_ceil": (lambda nn: nn.MaxPool2d(3, 2, 1, ceil_mode=True), (1, 2, 6, 5)),
    "2d_rect": (lambda nn: nn.MaxPool2d((2, 3), (1, 2), (1, 1), dilation=(2, 1)), (1, 1, 5, 6)),
    "2d_unbatched": (lambda nn: nn.MaxPool2d(2, 1, 1), (2, 3, 3)),
    "1d_minus_inf_inputs": (lambda nn: nn.MaxPool1d(3, 2, 1), (1, 2, 7)),
}


@pytest.mark.parametrize("name", list(MAXPOOLS))
def test_max_pool_with_padding(name, backend):
    """Distinct inputs: the ties are test_max_pool_ties_go_to_the_first_maximum's."""
    make, shape = MAXPOOLS[name]
    x = distinct(shape)
    if name == "1d_minus_inf_inputs":  # one -inf per window (windows [p, 0, 1], [1, 2, 3], [3, 4, 5], [5, 6, p])
        x[..., 2] = x[..., 4] = -INF
    _check_layer(make, x, backend)


MAXPOOL_TIES = {  # small integers: most windows hold a tie, some are constant
    "2d_tiled": (lambda nn: nn.MaxPool2d(2), (2, 3, 6, 8)),
    "2d_tiled_rect": (lambda nn: nn.MaxPool2d((2, 3)), (1, 2, 4, 9)),
    "2d_overlap_pad": (lambda nn: nn.MaxPool2d(3, 2, 1), (1, 2, 7, 6)),
    "2d_dilated_ceil": (lambda nn: nn.MaxPool2d(2, 2, 1, dilation=2, ceil_mode=True), (1, 2, 7, 7)),
    "1d_tiled": (lambda nn: nn.MaxPool1d(2), (2, 2, 8)),
    "1d_overlap": (lambda nn: nn.MaxPool1d(3, 1), (1, 2, 9)),
    "3d_tiled": (lambda nn: nn.MaxPool3d(2), (1, 2, 4, 4, 4)),
}


@pytest.mark.parametrize("name", list(MAXPOOL_TIES))
def test_max_pool_ties_go_to_the_first_maximum(name, backend):
    """torch's max pooling gives a window's gradient to its first maximum in window order (a later
    element replaces the maximum only if greater, or NaN); so does luminal's, tiled windows (one
    pass over the input, ``pool._tiled_gradient``) and overlapping ones alike. Two NaN windows: the
    last NaN gets it."""
    make, shape = MAXPOOL_TIES[name]
    x = np.random.default_rng(7).integers(-1, 2, shape).astype(np.float32)
    x.reshape(-1)[[1, 3, 5]] = NAN
    _check_layer(make, x, backend)


AVGPOOLS = {  # windows that overhang the padding or (ceil_mode) the padded input
    "1d_pad": (lambda nn: nn.AvgPool1d(3, 2, 1), (2, 2, 7)),
    "1d_pad_exclude": (lambda nn: nn.AvgPool1d(3, 2, 1, count_include_pad=False), (2, 2, 7)),
    "1d_ceil": (lambda nn: nn.AvgPool1d(3, 2, 1, ceil_mode=True), (1, 2, 6)),
    "1d_ceil_exclude": (lambda nn: nn.AvgPool1d(3, 2, 1, ceil_mode=True, count_include_pad=False), (1, 2, 6)),
    "2d_ceil_include": (lambda nn: nn.AvgPool2d(3, 2, 1, ceil_mode=True), (1, 2, 6, 5)),
    "2d_divisor": (lambda nn: nn.AvgPool2d(3, 2, 1, divisor_override=2), (1, 1, 5, 6)),
    "2d_rect_exclude": (lambda nn: nn.AvgPool2d((2, 3), (2, 1), (1, 1), count_include_pad=False), (1, 1, 5, 6)),
}


@pytest.mark.parametrize("name", list(AVGPOOLS))
def test_avg_pool_at_padding(name, backend):
    make, shape = AVGPOOLS[name]
    _check_layer(make, distinct(shape, scale=0.1, shift=-1.0), backend)


def _const_rows(shape, values):
    x = np.empty(shape, np.float32)
    for i, v in enumerate(values):
        x[i] = v
    return x


NORMS = {  # every row (or channel) constant: the variance is 0 and only eps keeps the scale finite
    "layernorm": (lambda nn: nn.LayerNorm(4), _const_rows((3, 4), [1.5, 0.0, -2.0]), False),
    "layernorm_2d": (lambda nn: nn.LayerNorm((2, 4)), _const_rows((2, 2, 4), [0.25, -3.0]), False),
    "layernorm_noaffine": (lambda nn: nn.LayerNorm(4, elementwise_affine=False), _const_rows((2, 4), [1.0, 0.0]),
                           False),
    "rmsnorm_zero": (lambda nn: nn.RMSNorm(4), np.zeros((2, 4), np.float32), False),
    "rmsnorm_eps": (lambda nn: nn.RMSNorm(4, eps=1e-5), _const_rows((2, 4), [0.0, 2.0]), False),
    "batchnorm1d_train": (lambda nn: nn.BatchNorm1d(3), np.tile(f32([1.5, 0.0, -2.0])[None, :, None], (4, 1, 2)),
                          True),
    "batchnorm2d_train": (lambda nn: nn.BatchNorm2d(2), np.tile(f32([0.5, 0.0])[None, :, None, None], (2, 1, 2, 2)),
                          True),
}


@pytest.mark.parametrize("name", list(NORMS))
def test_norm_layers_at_constant_input(name, backend):
    """A weight differing per position makes the gradient nonzero, rsqrt(eps) * (w - mean(w)). torch's
    batch norm computes ``x * a + (b - mean * a)`` with ``a = weight * rsqrt(eps)`` ~ 300: its x - mean
    does not cancel exactly, so values are compared to 1e-4."""
    make, x, train_mode = NORMS[name]
    m, tm = _layer(make, train_mode)
    w = np.random.default_rng(7).standard_normal(x.shape[1:]).astype(np.float32)
    check(lambda t: m(t) * t.graph.constant(w), [x], torch_op=lambda t: tm(t) * torch.from_numpy(w),
          backend=backend, rtol=1e-4, atol=1e-4, grad_rtol=1e-3, grad_atol=1e-3)


def test_attention_with_masked_keys_and_ties(backend):
    """A bool mask leaving one key (or several tied scores) per query: softmax over -inf entries."""
    q = f32([[[1.0, 0.0], [0.0, 0.0], [1.0, 1.0]]])
    k = f32([[[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.5, 0.5]]])
    v = distinct((1, 4, 2), scale=0.5)
    mask = np.array([[True, False, False, False], [True, True, True, True], [False, True, True, False]])

    def ours(q, k, v):
        return NN.scaled_dot_product_attention(q, k, v, attn_mask=q.graph.constant(mask))

    def theirs(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=torch.from_numpy(mask))

    check(ours, [q, k, v], torch_op=theirs, backend=backend)


@pytest.mark.parametrize("float_mask", [False, True], ids=["bool_mask", "float_mask"])
def test_attention_with_a_fully_masked_query(float_mask, backend):
    q = f32([[[1.0, 0.0], [0.5, -1.0], [1.0, 1.0]]])
    k = f32([[[1.0, 0.0], [1.0, 0.5], [0.0, 1.0], [0.5, 0.5]]])
    v = distinct((1, 4, 2), scale=0.5)
    mask = np.array([[True, False, False, False], [False, False, False, False], [False, True, True, False]])
    m = np.where(mask, 0.0, -INF).astype(np.float32) if float_mask else mask

    def ours(q, k, v):
        return NN.scaled_dot_product_attention(q, k, v, attn_mask=q.graph.constant(m))

    def theirs(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=torch.from_numpy(m))

    check(ours, [q, k, v], torch_op=theirs, backend=backend)


# losses -------------------------------------------------------------------------------------------------
REDUCTIONS = ("none", "mean", "sum")


def _loss(name, inputs, backend, torch_name=None, int_target=False, reductions=REDUCTIONS, **kw):
    """``L.name(*inputs, reduction=r, **kw)`` for every reduction (one graph) against torch's."""
    tf = getattr(F, torch_name or name)

    def theirs(*ts):
        ts = [t.long() if t.dtype == torch.int32 else t for t in ts]
        return tuple(tf(*ts, reduction=r, **kw) for r in reductions)

    check(lambda *xs: tuple(getattr(L, name)(*xs, reduction=r, **kw) for r in reductions), inputs,
          torch_op=theirs, backend=backend)


# target, and differences (input - target) exactly at 0, +-0.5, +-1, +-2 and generic values (all exact)
TGT = f32([0.25, -1.0, 3.0, 0.0, 0.5, -0.25, 1.0, 2.0, -3.0, 0.125])
DIFF = f32([0.0, 0.5, -0.5, 1.0, -1.0, 2.0, -2.0, 0.75, -1.5, 0.0])
INP = TGT + DIFF


def test_l1_at_zero_difference(backend):
    _loss("l1_loss", [INP, TGT], backend)


@pytest.mark.parametrize("beta", [1.0, 0.5, 2.0, 0.0])
def test_smooth_l1_at_beta(beta, backend):
    """|d| == beta is where the quadratic meets the line (slope 1 from both sides); beta = 0 is L1,
    whose gradient at d == 0 is 0."""
    _loss("smooth_l1_loss", [INP, TGT], backend, beta=beta)


@pytest.mark.parametrize("delta", [1.0, 0.5, 2.0])
def test_huber_at_delta(delta, backend):
    _loss("huber_loss", [INP, TGT], backend, delta=delta)


def test_bce_at_exact_targets(backend):
    """Targets exactly 0 and 1 (one of the two terms vanishes), probabilities inside (0, 1)."""
    p = f32([0.5, 0.25, 0.75, 0.5, 1e-3, 0.999, 0.125])
    t = f32([0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.5])
    _loss("binary_cross_entropy", [p, t], backend)


@pytest.mark.parametrize("pos_weight", [False, True], ids=["", "pos_weight"])
def test_bce_with_logits_at_zero_logit(pos_weight, backend):
    """x = 0 is where log_sigmoid's ``min(x, 0) - log1p(exp(-|x|))`` has its kinks; the sum is smooth
    (d/dx = 1/2 there), so the two kinks' tie splits must add up."""
    x = f32([0.0, -0.0, 0.0, 0.0, 1e-30, -1e-30, 2.0, -2.0])
    t = f32([0.0, 1.0, 1.0, 0.5, 0.0, 1.0, 0.25, 0.75])
    pw = f32([3.0] * 8) if pos_weight else None

    def ours(x, t):
        return tuple(L.binary_cross_entropy_with_logits(x, t, reduction=r,
                                                        pos_weight=None if pw is None else x.graph.constant(pw))
                     for r in REDUCTIONS)

    def theirs(x, t):
        return tuple(F.binary_cross_entropy_with_logits(x, t, reduction=r,
                                                        pos_weight=None if pw is None else torch.from_numpy(pw))
                     for r in REDUCTIONS)

    check(ours, [x, t], torch_op=theirs, backend=backend)


def test_kl_div_log_target_at_equal_logs(backend):
    """log_target: ``exp(t) (t - x)`` at t == x (0 loss) and generic points; t is differentiable."""
    x = f32([[-1.0, -0.5, -2.0], [-3.0, -0.1, -0.7]])
    t = f32([[-1.0, -0.25, -2.0], [-3.0, -1.0, -0.7]])
    _loss("kl_div", [x, t], backend, reductions=REDUCTIONS + ("batchmean",), log_target=True)


# logits with tied maxima (the log-softmax max shift's shared gradient must cancel), -inf logits of
# other classes (their gradient is 0), and a row whose target class logit is itself -inf (loss inf)
CE_X = f32([[1, 1, 1, 1], [2, 2, 0, -1], [-INF, 0, 3, 3], [0, -INF, -INF, 5], [0.5, -1, 2, 2], [0, 0, 0, 0]])
CE_T = np.array([0, 1, 2, 1, 1, 3], np.int32)


@pytest.mark.parametrize("label_smoothing", [0.0, 0.2])
@pytest.mark.parametrize("ignore", [False, True], ids=["", "ignore"])
@pytest.mark.parametrize("weighted", [False, True], ids=["", "weight"])
def test_cross_entropy_at_ties_and_minus_inf_logits(label_smoothing, ignore, weighted, backend):
    t = CE_T.copy()
    kw = dict(label_smoothing=label_smoothing)
    if ignore:  # rows 1 and 5 (a tie of the max, all tied) ignored, by an in-range index
        t[[1, 5]] = 2
        kw["ignore_index"] = 2
    w = f32([0.5, 1.0, 2.0, 0.25]) if weighted else None

    def ours(x, tt):
        wc = None if w is None else x.graph.constant(w)
        return tuple(L.cross_entropy(x, tt, wc, reduction=r, **kw) for r in REDUCTIONS)

    def theirs(x, tt):
        wt = None if w is None else torch.from_numpy(w)
        return tuple(F.cross_entropy(x, tt.long(), wt, reduction=r, **kw) for r in REDUCTIONS)

    check(ours, [CE_X, t], torch_op=theirs, backend=backend)


def test_nll_loss_at_minus_inf_log_probs(backend):
    """-inf log-probabilities at an ignored target (loss 0, gradient 0) and at a kept one (loss inf)."""
    logp = f32([[-INF, -0.5, -1.0], [-0.1, -INF, -3.0], [-1.0, -1.0, -INF], [-0.2, -0.2, -0.2]])
    for t in (np.array([0, 1, 1, 2], np.int32), np.array([1, 2, 0, 1], np.int32)):
        _loss("nll_loss", [logp, t], backend, ignore_index=0)


def test_cross_entropy_finite_logits_at_ties(backend):
    """Only finite logits (so every reduction is finite): ties and a one-hot-like row."""
    x = f32([[1, 1, 1, 1], [2, 2, 0, -1], [0, 3, 3, -2], [30, -30, 30, 0]])
    t = np.array([0, 1, 2, 3], np.int32)
    _loss("cross_entropy", [x, t], backend, label_smoothing=0.1)
    probs = f32([[0.25] * 4, [0.5, 0.5, 0, 0], [0, 0, 1, 0], [0, 0.5, 0, 0.5]])
    _loss("cross_entropy", [x, probs], backend)


@pytest.mark.parametrize("case", ["minus_inf_window", "two_nans"])
def test_max_pool_indices_and_gradient_choose_torchs_element(case, backend):
    """A padded window whose elements are all -inf chooses its first element, not the padding (its
    index and its gradient); a window with two NaNs chooses the last (index and gradient alike)."""
    if case == "minus_inf_window":
        x = f32([[[-INF, -INF, 5.0]]])
        make = (lambda m: m.MaxPool1d(3, 1, 1, return_indices=True))
    else:
        x = f32([[[[1.0, NAN], [NAN, 2.0]]]])
        make = (lambda m: m.MaxPool2d(2, return_indices=True))
    g = lm.Graph()
    xi = g.input("x", x.shape)
    y, idx = make(NN)(xi)
    (dx,) = train.grad(y.sum(), [xi])
    got = lm.compile([y, idx, dx], backend=backend)(x=x)
    tx = torch.tensor(x, requires_grad=True)
    ty, ti = make(torch.nn)(tx)
    ty.sum().backward()
    np.testing.assert_array_equal(got[0], ty.detach().numpy())
    np.testing.assert_array_equal(got[1], ti.numpy())
    np.testing.assert_array_equal(got[2], tx.grad.numpy())
