"""Audit of bad-input handling across the public API (README "Errors").

test_errors.py pins the message format on hand-picked ops; this file sweeps the rest of the public
surface (lm.* ops, GraphTensor methods, graph leaves, nn layers, losses, optimizers, schedulers,
compile) with the usual mistakes: wrong dtypes, shapes that cannot match, out-of-range dims, negative
or zero sizes, non-tensors where a tensor is expected, tensors of two graphs, bad keyword values.

Each case must raise a plain ValueError/TypeError at the call (not an AttributeError, a numpy error,
a silent success that breaks or computes garbage later), whose message names the op or layer and,
for ops on tensors, ends with "called at <this file>:<line>". Known gaps are xfail(strict=True) with
the reason, so fixing one turns its case into an XPASS to be un-marked.
"""

from __future__ import annotations

import warnings
from types import SimpleNamespace

import numpy as np
import pytest

import luminal as lm
from luminal import nn
from luminal.frontend.state import State
from luminal.train import (
    SGD,
    Adagrad,
    Adam,
    CosineAnnealingLR,
    LinearLR,
    MultiStepLR,
    OneCycleLR,
    RMSprop,
    StepLR,
    binary_cross_entropy,
    binary_cross_entropy_with_logits,
    compile_step,
    cross_entropy,
    grad,
    huber_loss,
    kl_div,
    l1_loss,
    mse_loss,
    nll_loss,
    smooth_l1_loss,
)

HERE = __file__
f32 = np.float32


@pytest.fixture
def t():
    """Fresh tensors of one graph (and one of another graph), named by what they are."""
    g, other = lm.Graph(), lm.Graph()
    return SimpleNamespace(
        g=g,
        x=g.input("x", ("B", 3)),  # symbolic batch
        m=g.input("m", (2, 3)),
        m5=g.input("m5", (2, 5)),
        v=g.input("v", (3,)),
        v4=g.input("v4", (4,)),
        d=g.input("d", (3,), dtype=lm.float64),
        i=g.input("i", (3,), dtype=lm.int32),
        i2=g.input("i2", (2, 3), dtype=lm.int32),
        b=g.input("b", (3,), dtype=lm.bool),
        s=g.input("s", ("S",)),
        one=g.input("one", (1, 3)),
        img=g.input("img", (2, 3, 8, 8)),
        seq=g.input("seq", (2, 3, 8)),
        q=g.input("q", (2, 4, 5, 8)),  # (N, H, L, E)
        k=g.input("k", (2, 4, 6, 8)),
        mha_q=g.input("mha_q", (5, 2, 8)),  # (L, N, E)
        o=other.input("o", (3,)),
        om=other.input("om", (2, 3)),
        oi=other.input("oi", (2, 1), dtype=lm.int32),
    )


def params(n=1):
    return nn.Linear(3, n).parameters()


def opt():
    return SGD(params(), lr=0.1, momentum=0.9)


# Known gaps, by key, for ``case(..., bug=KEY)`` (a strict xfail giving the reason); none at present.
XF: dict[str, str] = {}


def xf(key):
    return pytest.mark.xfail(strict=True, reason=XF[key])


def case(id_, fn, exc, pattern, at=True, bug=None):
    """``at``: the message must say ``called at <this file>``; ``bug``: key of a known gap in XF."""
    return pytest.param(fn, exc, pattern, at, id=id_, marks=[xf(bug)] if bug else [])


def _np_left(t):
    return np.ones(4, f32) + t.v  # a numpy operand is a constant (test_factories_numpy.py); this one cannot broadcast


def _two_graph_stack(t):
    return lm.stack([t.v, t.o])


V, T = ValueError, TypeError

CASES = [
    # ---- elementwise / operators with non-tensors and wrong dtypes --------------------------------
    case("add-list", lambda t: t.v + [1.0, 2.0, 3.0], T, r"^add: .*list"),
    case("add-none", lambda t: t.v + None, T, r"^add: .*NoneType"),
    case("add-ndarray", lambda t: t.v + np.ones(4, f32), V, r"^add: .*cannot broadcast"),
    case("add-ndarray-str", lambda t: t.v + np.array(["a", "b", "c"]), T, r"^add: .*numpy array of dtype"),
    case("radd-ndarray", _np_left, V, r"add"),
    case("mul-str", lambda t: t.v * "a", T, r"^mul: .*str"),
    case("sub-bool", lambda t: t.b - t.b, T, r"^sub: .*bool"),
    case("sub-shapes-sym", lambda t: t.s - t.v, V, r"^sub: .*cannot broadcast"),
    case("fmod-bool", lambda t: lm.fmod(t.b, t.b), T, r"^fmod: "),
    case("remainder-bool", lambda t: t.b % t.b, T, r"^remainder: "),
    case("floordiv-bool", lambda t: t.b // t.b, T, r"^floor_divide: "),
    case("pow-int-neg", lambda t: t.i ** -1, V, r"^pow: .*negative"),
    case("pow-bool", lambda t: lm.pow(t.b, t.b), T, r"^pow: "),
    case("maximum-shapes", lambda t: lm.maximum(t.v, t.v4), V, r"^maximum: .*cannot broadcast"),
    case("lerp-shapes", lambda t: lm.lerp(t.v, t.v4, 0.5), V, r"cannot broadcast"),
    case("lt-shapes", lambda t: t.v < t.v4, V, r"^lt: .*cannot broadcast"),
    case("eq-shapes", lambda t: lm.eq(t.v, t.v4), V, r"^eq: .*cannot broadcast"),
    case("logical_and-shapes", lambda t: lm.logical_and(t.b, t.v4), V, r"^logical_and: "),
    case("div-rounding", lambda t: lm.div(t.v, 2.0, rounding_mode="round"), V, r"^div: .*rounding_mode"),
    case("clamp-none", lambda t: t.v.clamp(), V, r"^clamp: "),
    case("clamp-str", lambda t: t.v.clamp(min="a"), T, r"^clamp: .*str"),
    case("gelu-approx", lambda t: lm.gelu(t.v, approximate="fast"), V, r"^gelu: .*approximate"),
    case("exp-ndarray", lambda t: lm.exp(np.ones(3, f32)), T, r"^exp: .*GraphTensor"),
    case("sigmoid-list", lambda t: lm.sigmoid([1.0]), T, r"^sigmoid: .*GraphTensor"),
    case("where-cond-list", lambda t: lm.where([True, False, True], t.v, 0.0), T, r"^where: "),
    case("where-two-graphs", lambda t: lm.where(t.b, t.v, t.o), V, r"^where: .*different graphs"),
    # unary ops given a non-tensor
    case("relu-list", lambda t: lm.relu([1.0, -1.0]), T, r"^relu: "),
    case("abs-none", lambda t: lm.abs(None), T, r"^abs: "),
    case("neg-ndarray", lambda t: lm.neg(np.ones(3, f32)), T, r"^neg: "),
    case("sign-none", lambda t: lm.sign(None), T, r"^sign: "),
    case("floor-list", lambda t: lm.floor([1.5]), T, r"^floor: "),
    case("isnan-ndarray", lambda t: lm.isnan(np.ones(3, f32)), T, r"^isnan: "),
    case("logical_not-none", lambda t: lm.logical_not(None), T, r"^logical_not: "),
    case("square-list", lambda t: lm.square([2.0]), T, r"^square: "),
    case("sum-list", lambda t: lm.sum([1.0, 2.0]), T, r"^sum: "),
    case("mean-ndarray", lambda t: lm.mean(np.ones(3, f32)), T, r"^mean: "),
    case("softmax-none", lambda t: lm.softmax(None, 0), T, r"^softmax: "),
    case("argmax-list", lambda t: lm.argmax([1, 2]), T, r"^argmax: "),
    case("cumsum-list", lambda t: lm.cumsum([1, 2], 0), T, r"^cumsum: "),
    case("zeros_like-list", lambda t: lm.zeros_like([1.0]), T, r"^(zeros_like|full_like): "),
    case("leaky_relu-slope-str", lambda t: t.v.leaky_relu("a"), T, r"^leaky_relu: "),
    # ---- reductions ------------------------------------------------------------------------------
    case("sum-axis-and-dim", lambda t: t.m.sum(0, dim=1), T, r"^sum: "),
    case("sum-axis-tuple-range", lambda t: t.m.sum((0, 2)), V, r"^sum: .*dim 2 is out of range"),
    case("cumsum-none", lambda t: t.m.cumsum(), T, r"^cumsum: .*None"),
    case("prod-sym", lambda t: t.s.prod(), V, r"^prod: .*symbolic"),
    case("cumprod-sym", lambda t: t.s.cumprod(0), V, r"^cumprod: .*symbolic"),
    case("max-empty", lambda t: t.g.input("e", (0, 3)).amax(0), V, r"^max: .*empty"),
    case("argmin-range", lambda t: t.m.argmin(2), V, r"^argmin: .*out of range"),
    case("var-int", lambda t: t.i.var(), T, r"^var: .*int32"),
    case("logsumexp-range", lambda t: t.m.logsumexp(3), V, r"^logsumexp: .*out of range"),
    case("any-range", lambda t: t.m.any(-3), V, r"^any: .*out of range"),
    # ---- movement -------------------------------------------------------------------------------
    case("transpose-range", lambda t: t.m.transpose(0, 2), V, r"^transpose: .*dim 2"),
    case("squeeze-range", lambda t: t.m.squeeze(2), V, r"^squeeze: "),
    case("unsqueeze-range", lambda t: t.m.unsqueeze(3), V, r"^unsqueeze: .*dim 3"),
    case("unsqueeze-float", lambda t: t.m.unsqueeze(1.0), T, r"^unsqueeze: "),
    case("flatten-order", lambda t: t.img.flatten(2, 1), V, r"^flatten: .*start_dim"),
    case("flatten-range", lambda t: t.m.flatten(0, 2), V, r"^flatten: "),
    case("unflatten-count", lambda t: t.m.unflatten(1, (2, 2)), V, r"^unflatten: "),
    case("unflatten-hole", lambda t: t.m.unflatten(1, (2, -1)), V, r"^unflatten: "),
    case("flip-range", lambda t: t.m.flip(2), V, r"^flip: "),
    case("pad-odd", lambda t: t.m.pad((1,)), V, r"^pad: "),
    case("pad-too-many", lambda t: t.v.pad((1, 1, 1, 1)), V, r"^pad: "),
    case("pad-crop-too-much", lambda t: t.v.pad((-5, 0)), V, r"^pad: "),
    case("pad-value-str", lambda t: t.v.pad((1, 1), value="a"), T, r"^pad: "),
    case("pad-int-frac", lambda t: t.i.pad((1, 1), value=0.5), T, r"^pad: "),
    case("unfold-negative-size", lambda t: t.m.unfold(1, -1, 1), V, r"^unfold: "),  # (size 0 is torch's empty windows)
    case("unfold-step0", lambda t: t.m.unfold(1, 2, 0), V, r"^unfold: "),
    case("unfold-big", lambda t: t.m.unfold(1, 4, 1), V, r"^unfold: "),
    case("repeat-few", lambda t: t.m.repeat(2), V, r"^repeat: "),
    case("repeat-negative", lambda t: t.m.repeat(-1, 2), V, r"^repeat: "),
    case("expand-negative", lambda t: t.one.expand(-2, 3), V, r"^expand: "),
    case("expand-lead-minus1", lambda t: t.v.expand(-1, 3), V, r"^expand: .*-1"),
    case("reshape-float", lambda t: t.m.reshape(2.5, 2), T, r"^reshape: "),
    case("reshape-zero-hole", lambda t: t.m.reshape(0, -1), V, r"^reshape: "),
    case("reshape-negative", lambda t: t.m.reshape(-2, -3), V, r"^reshape: "),
    case("broadcast_to-bad", lambda t: t.m.broadcast_to((4, 3)), V, r"^expand: "),
    case("size-range", lambda t: t.m.size(2), V, r"^size: "),
    # ---- indexing -------------------------------------------------------------------------------
    case("getitem-list", lambda t: t.m[[0.5, 1.0]], T, r"^getitem: .*ints or bools"),
    case("getitem-step0", lambda t: t.m[::0], V, r"^getitem: .*step"),
    case("getitem-float-tensor", lambda t: t.v[t.v], T, r"^getitem: .*float32"),
    case("getitem-runtime-mask", lambda t: t.m[t.m > 0], IndexError, r"^getitem: .*run time"),
    case("gather-list", lambda t: t.m.gather(1, [[0], [1]]), T, r"^gather: .*GraphTensor"),
    case("gather-range", lambda t: t.m.gather(2, t.i2), V, r"^gather: .*dim 2"),
    case("gather-two-graphs", lambda t: t.om.gather(1, t.i2), V, r"^gather: .*different graphs"),
    case("index_select-2d", lambda t: t.m.index_select(0, t.i2), V, r"^index_select: .*1-d"),
    case("index_select-two-graphs", lambda t: t.om.index_select(0, t.i), V, r"^index_select: .*different graphs"),
    case("take_along_dim-rank", lambda t: t.m.take_along_dim(t.i, 1), V, r"^take_along_dim: "),
    case("scatter_add-rank", lambda t: t.m.scatter_add(1, t.i, t.v), V, r"^scatter_add: "),
    case("scatter_add-float-index", lambda t: t.m.scatter_add(1, t.m, t.m), T, r"^scatter_add: .*float32"),
    case("scatter_add-small-src", lambda t: t.m.scatter_add(1, t.i2, t.g.input("sm", (2, 2))), V,
         r"^scatter_add: "),
    case("scatter-range", lambda t: t.m.scatter(2, t.i2, 1.0), V, r"^scatter(_add)?: .*out of range"),
    case("one_hot-neg", lambda t: lm.one_hot(t.i, -1), V, r"^one_hot: "),
    case("one_hot-float-index", lambda t: lm.one_hot(t.v, 3), T, r"^one_hot: .*float32"),
    case("one_hot-float-classes", lambda t: lm.one_hot(t.i, 2.5), T, r"^one_hot: "),
    # ---- linear algebra / combine ---------------------------------------------------------------
    case("matmul-0d", lambda t: t.g.input("z", ()) @ t.v, V, r"^matmul: .*at least one dim"),
    case("matmul-ndarray", lambda t: lm.matmul(t.m, np.ones((3, 2), f32)), T, r"^matmul: "),
    case("matmul-two-graphs", lambda t: t.m @ t.o, V, r"^matmul: .*different graphs"),
    case("dot-mismatch", lambda t: lm.dot(t.v, t.v4), V, r"^dot: matmul: .*3 vs 4"),
    case("outer-2d", lambda t: lm.outer(t.m, t.v), V, r"^outer: "),
    case("outer-list", lambda t: lm.outer(t.v, [1.0, 2.0]), T, r"^outer: "),
    case("cat-none", lambda t: lm.cat([t.v, None]), T, r"^cat: "),
    case("cat-dim-range", lambda t: lm.cat([t.m, t.m], 2), V, r"^cat: .*out of range"),
    case("cat-tensor-not-list", lambda t: lm.cat(t.m), T, r"^cat: "),
    case("stack-ndarray", lambda t: lm.stack([t.v, np.ones(3, f32)]), T, r"^stack: "),
    case("stack-two-graphs", _two_graph_stack, V, r"^stack: .*different graphs"),
    case("stack-dim-range", lambda t: lm.stack([t.v, t.v], 2), V, r"^stack: .*out of range"),
    case("split-zero", lambda t: t.m.split(0, 1), V, r"^split: "),
    case("split-sections", lambda t: t.m.split([1, 1], 1), V, r"^split: .*add up"),
    case("split-negative-section", lambda t: t.m.split([4, -1], 1), V, r"^split: "),
    case("chunk-zero", lambda t: t.m.chunk(0, 1), V, r"^chunk: "),
    case("chunk-sym", lambda t: t.x.chunk(2, 0), V, r"^chunk: .*static"),
    case("tril-1d", lambda t: lm.tril(t.v), V, r"^tril: "),
    case("triu-1d", lambda t: t.v.triu(), V, r"^triu: "),
    # ---- graph leaves ---------------------------------------------------------------------------
    case("input-none-shape", lambda t: t.g.input("n", None), T, r"input 'n'", at=False),
    case("input-neg", lambda t: t.g.input("n", (-1, 3)), V, r"input 'n'.*negative", at=False),
    case("input-float-dim", lambda t: t.g.input("n", (2.5,)), T, r"input 'n'", at=False),
    case("input-dup", lambda t: t.g.input("x", (3,)), V, r"input 'x' is already defined", at=False),
    case("input-name", lambda t: t.g.input("1x", (3,)), V, r"identifier", at=False),
    case("constant-str", lambda t: t.g.constant(["a"]), T, r"^constant: .*numbers"),
    case("constant-none", lambda t: t.g.constant(None), T, r"^constant: "),
    case("constant-complex", lambda t: t.g.constant(np.ones(3, np.complex64)), T, r"^constant: "),
    case("constant-int-range", lambda t: t.g.constant(2**40), V, r"^constant: .*int32"),
    case("arange-step0", lambda t: t.g.arange(0, 5, 0), V, r"^arange: .*step"),
    case("arange-dtype", lambda t: t.g.arange(5, dtype="int64"), T, r"int64", at=False),
    case("full-negative", lambda t: t.g.full((2, -1), 1.0), V, r"^full: "),
    case("zeros-negative", lambda t: t.g.zeros((-2, 3)), V, r"^(zeros|full): "),
    case("ones-none", lambda t: t.g.ones(None), T, r"^(ones|full): "),
    case("full-str", lambda t: t.g.full((2,), "a"), T, r"^full: "),
    case("eye-negative", lambda t: t.g.eye(-1), V, r"^eye: "),
    case("rand-negative", lambda t: t.g.rand((-1,)), V, r"rand"),
    case("cast-unknown", lambda t: t.v.to("complex"), T, r"unknown dtype", at=False),
    # ---- nn layers ------------------------------------------------------------------------------
    case("Linear-features", lambda t: nn.Linear(3, 4)(t.m5), V, r"^Linear\(.*\(\*, 3\).*\(2, 5\)"),
    case("Linear-sym-features", lambda t: nn.Linear(3, 4)(t.g.input("f", ("B", "F"))), V, r"^Linear\("),
    case("Linear-0d", lambda t: nn.Linear(3, 4)(t.g.input("z", ())), V, r"^Linear\("),
    case("Linear-list", lambda t: nn.Linear(3, 4)([1.0, 2.0, 3.0]), T, r"^Linear\(.*list", at=False),
    case("Linear-bool", lambda t: nn.Linear(3, 4)(t.b), T, r"^Linear\("),
    case("Linear-ctor-neg", lambda t: nn.Linear(-1, 4), V, r"^Linear: ", at=False),
    case("Embedding-float", lambda t: nn.Embedding(10, 4)(t.v), T, r"^Embedding\(.*float32"),
    case("Embedding-bool", lambda t: nn.Embedding(10, 4)(t.b), T, r"^Embedding\(.*bool"),
    case("Embedding-ndarray", lambda t: nn.Embedding(10, 4)(np.arange(3)), T, r"^Embedding\(", at=False),
    case("Embedding-padding_idx", lambda t: nn.Embedding(10, 4, padding_idx=10), V, r"^Embedding: ", at=False),
    case("Embedding-ctor-neg", lambda t: nn.Embedding(-1, 4), V, r"^Embedding: ", at=False),
    case("Conv2d-channels", lambda t: nn.Conv2d(4, 8, 3)(t.img), V, r"^Conv2d\(.*\(N, 4, H, W\).*\(2, 3, 8, 8\)"),
    case("Conv2d-rank", lambda t: nn.Conv2d(3, 8, 3)(t.seq), V, r"^Conv2d\("),
    case("Conv2d-int", lambda t: nn.Conv2d(3, 8, 3)(t.g.input("ii", (1, 3, 8, 8), dtype=lm.int32)), T,
         r"^Conv2d\(.*int32"),
    case("Conv2d-small", lambda t: nn.Conv2d(3, 8, 9)(t.img), V, r"^Conv2d\(.*kernel"),
    case("Conv1d-channels", lambda t: nn.Conv1d(4, 8, 3)(t.seq), V, r"^Conv1d\("),
    case("Conv2d-groups", lambda t: nn.Conv2d(3, 8, 3, groups=2), V, r"^Conv2d: .*groups", at=False),
    case("Conv2d-padding-str", lambda t: nn.Conv2d(3, 8, 3, padding="full"), V, r"^Conv2d: .*padding", at=False),
    case("Conv2d-same-strided", lambda t: nn.Conv2d(3, 8, 3, padding="same", stride=2), V, r"^Conv2d: ", at=False),
    case("Conv2d-kernel-tuple", lambda t: nn.Conv2d(3, 8, (3, 3, 3)), V, r"^Conv2d: kernel_size", at=False),
    case("Conv2d-ctor-kernel0", lambda t: nn.Conv2d(3, 8, 0), V, r"^Conv2d: ", at=False),
    case("Conv2d-ctor-stride0", lambda t: nn.Conv2d(3, 8, 3, stride=0), V, r"^Conv2d: ", at=False),
    case("Conv2d-ctor-neg-padding", lambda t: nn.Conv2d(3, 8, 3, padding=-1), V, r"^Conv2d: ", at=False),
    case("Conv2d-ctor-neg-channels", lambda t: nn.Conv2d(-3, 8, 3), V, r"^Conv2d: ", at=False),
    case("conv2d-weight-channels", lambda t: nn.conv2d(t.img, t.g.input("w", (8, 4, 3, 3))), V,
         r"^conv2d: .*channels"),
    case("conv2d-ndarray", lambda t: nn.conv2d(np.ones((1, 3, 8, 8), f32), t.g.input("w", (8, 3, 3, 3))), T,
         r"^conv2d: "),
    case("conv2d-two-graphs", lambda t: nn.conv2d(t.img, lm.Graph().input("w", (8, 3, 3, 3))), V,
         r"^conv2d: .*different graphs"),
    case("MaxPool2d-rank", lambda t: nn.MaxPool2d(2)(t.v), V, r"^MaxPool2d\("),
    case("MaxPool2d-int", lambda t: nn.MaxPool2d(2)(t.i2.reshape(1, 2, 3)), T, r"^MaxPool2d\(.*int32"),
    case("MaxPool2d-big-kernel", lambda t: nn.MaxPool2d(16)(t.img), V, r"^MaxPool2d\("),
    case("MaxPool2d-padding", lambda t: nn.MaxPool2d(2, padding=2), V, r"^MaxPool2d: .*half", at=False),
    case("MaxPool2d-ctor-kernel0", lambda t: nn.MaxPool2d(0), V, r"^MaxPool2d: ", at=False),
    case("AvgPool2d-ctor-stride0", lambda t: nn.AvgPool2d(2, stride=0), V, r"^AvgPool2d: ", at=False),
    case("AvgPool1d-rank", lambda t: nn.AvgPool1d(2)(t.img), V, r"^AvgPool1d\("),
    case("AvgPool2d-divisor", lambda t: nn.AvgPool2d(2, divisor_override=0), V, r"^AvgPool2d: ", at=False),
    case("AdaptiveAvgPool2d-sym", lambda t: nn.AdaptiveAvgPool2d(2)(t.g.input("a", (3, "H", 4))), V,
         r"^AdaptiveAvgPool2d\(.*static"),
    case("AdaptiveAvgPool2d-neg", lambda t: nn.AdaptiveAvgPool2d(-1), V, r"^AdaptiveAvgPool2d: ", at=False),
    case("AdaptiveAvgPool1d-tuple", lambda t: nn.AdaptiveAvgPool1d((2, 2)), V, r"^AdaptiveAvgPool1d: ", at=False),
    case("LayerNorm-shape", lambda t: nn.LayerNorm(4)(t.m), V, r"^LayerNorm\(.*\(\*, 4\)"),
    case("LayerNorm-int", lambda t: nn.LayerNorm(3)(t.i2), T, r"^LayerNorm\(.*int32"),
    case("LayerNorm-ndarray", lambda t: nn.LayerNorm(3)(np.ones((2, 3), f32)), T, r"^LayerNorm\(", at=False),
    case("LayerNorm-ctor-neg", lambda t: nn.LayerNorm(-1), V, r"^LayerNorm: ", at=False),
    case("RMSNorm-shape", lambda t: nn.RMSNorm((2, 4))(t.m), V, r"^RMSNorm\("),
    case("BatchNorm1d-features", lambda t: nn.BatchNorm1d(4)(t.m), V, r"^BatchNorm1d\(.*\(N, 4\)"),
    case("BatchNorm2d-rank", lambda t: nn.BatchNorm2d(3)(t.seq), V, r"^BatchNorm2d\("),
    case("BatchNorm1d-one-value", lambda t: nn.BatchNorm1d(3)(t.g.input("bn", (1, 3))), V,
         r"^BatchNorm1d\(.*more than 1"),
    case("BatchNorm2d-bool", lambda t: nn.BatchNorm2d(3)(t.g.input("bb", (2, 3, 2, 2), dtype=lm.bool)), T,
         r"^BatchNorm2d\(.*bool"),
    case("Dropout-neg", lambda t: nn.Dropout(-0.1), V, r"^Dropout: ", at=False),
    case("Dropout-big", lambda t: nn.Dropout(1.5), V, r"^Dropout: ", at=False),
    case("dropout-neg", lambda t: nn.dropout(t.v, -0.1), V, r"dropout"),
    case("dropout-str", lambda t: nn.dropout(t.v, "a"), T, r"dropout"),
    case("GELU-approx", lambda t: nn.GELU("fast"), V, r"^GELU: ", at=False),
    case("Softmax-dim", lambda t: nn.Softmax(2)(t.m), V, r"^softmax: .*out of range"),
    case("Flatten-range", lambda t: nn.Flatten(3)(t.m), V, r"^flatten: "),
    case("Unflatten-count", lambda t: nn.Unflatten(1, (2, 2))(t.m), V, r"^unflatten: "),
    case("Sequential-mismatch", lambda t: nn.Sequential(nn.Linear(3, 4), nn.Linear(5, 2))(t.m), V,
         r"^Linear\(in_features=5"),
    case("MHA-ctor", lambda t: nn.MultiheadAttention(5, 2), V, r"^MultiheadAttention: .*divisible", at=False),
    case("MHA-embed", lambda t: nn.MultiheadAttention(4, 2)(t.mha_q, t.mha_q, t.mha_q), V,
         r"^MultiheadAttention\(embed_dim=4, num_heads=2, batch_first=False\): query: expected input of shape"),
    case("MHA-rank-mix", lambda t: nn.MultiheadAttention(8, 2)(t.mha_q, t.g.input("k2", (6, 8)),
                                                               t.g.input("v2", (6, 8))), V,
         r"^MultiheadAttention\(.*batched"),
    case("MHA-batch-mismatch", lambda t: nn.MultiheadAttention(8, 2)(t.mha_q, t.g.input("kb", (6, 3, 8)),
                                                                     t.g.input("vb", (6, 3, 8))), V,
         r"^MultiheadAttention\("),
    case("MHA-kv-length", lambda t: nn.MultiheadAttention(8, 2)(t.mha_q, t.g.input("kl", (6, 2, 8)),
                                                                t.g.input("vl", (7, 2, 8))), V,
         r"^MultiheadAttention\("),
    case("sdpa-E", lambda t: nn.scaled_dot_product_attention(t.q, t.g.input("k3", (2, 4, 6, 7)), t.k), V,
         r"^scaled_dot_product_attention: .*share E"),
    case("sdpa-mask-and-causal", lambda t: nn.scaled_dot_product_attention(
        t.q, t.k, t.k, attn_mask=t.g.input("am", (5, 6), dtype=lm.bool), is_causal=True), V,
        r"^scaled_dot_product_attention: .*not both"),
    case("sdpa-value-length", lambda t: nn.scaled_dot_product_attention(t.q, t.k, t.g.input("v7", (2, 4, 7, 8))), V,
         r"^scaled_dot_product_attention: "),
    case("sdpa-mask-shape", lambda t: nn.scaled_dot_product_attention(
        t.q, t.k, t.k, attn_mask=t.g.input("am", (5, 7), dtype=lm.bool)), V, r"^scaled_dot_product_attention: "),
    case("sdpa-list", lambda t: nn.scaled_dot_product_attention(t.q, [1.0], t.k), T,
         r"^scaled_dot_product_attention: ", at=False),
    # ---- losses ---------------------------------------------------------------------------------
    case("ce-int-logits", lambda t: cross_entropy(t.i2, t.i.reshape(3)[:2]), T, r"^cross_entropy: .*float"),
    case("ce-target-shape", lambda t: cross_entropy(t.m, t.i), V, r"^cross_entropy: .*target shape"),
    case("ce-soft-target-shape", lambda t: cross_entropy(t.m, t.v), V, r"^cross_entropy: .*class probabilities"),
    case("ce-bool-target", lambda t: cross_entropy(t.v, t.g.input("bt", (), dtype=lm.bool)), T,
         r"^cross_entropy: .*int32"),
    case("ce-reduction", lambda t: cross_entropy(t.v, t.g.input("ct", (), dtype=lm.int32), reduction="avg"), V,
         r"^cross_entropy: .*reduction"),
    case("ce-smoothing", lambda t: cross_entropy(t.v, t.g.input("ct", (), dtype=lm.int32), label_smoothing=2.0),
         V, r"^cross_entropy: .*label_smoothing"),
    case("ce-weight-shape", lambda t: cross_entropy(t.m, t.g.input("ct", (2,), dtype=lm.int32), t.v4), V,
         r"^cross_entropy: .*weight"),
    case("ce-ndarray-target", lambda t: cross_entropy(t.m, np.zeros(2, np.int32)), T, r"^cross_entropy: .*target"),
    case("ce-0d", lambda t: cross_entropy(t.g.input("z", ()), t.g.input("ct", (), dtype=lm.int32)), V,
         r"^cross_entropy: .*class dim"),
    case("ce-sym-mismatch", lambda t: cross_entropy(t.g.input("lg", ("B", 4)), t.g.input("ct", ("T",),
                                                                                          dtype=lm.int32)), V,
         r"^cross_entropy: "),
    case("ce-two-graphs", lambda t: cross_entropy(t.om, t.g.input("ct", (2,), dtype=lm.int32)), V,
         r"^cross_entropy: .*different graphs"),
    case("nll-reduction", lambda t: nll_loss(t.m, t.g.input("ct", (2,), dtype=lm.int32), reduction="batchmean"), V,
         r"^nll_loss: .*reduction"),
    case("nll-float-target", lambda t: nll_loss(t.m, t.g.input("ct", (2,))), T, r"^nll_loss: .*int32"),
    case("mse-shapes", lambda t: mse_loss(t.v, t.v4), V, r"^mse_loss: .*cannot broadcast"),
    case("mse-int", lambda t: mse_loss(t.i, t.i), T, r"^mse_loss: .*float"),
    case("mse-reduction", lambda t: mse_loss(t.v, t.v, reduction="avg"), V, r"^mse_loss: .*reduction"),
    case("mse-none-target", lambda t: mse_loss(t.v, None), T, r"^mse_loss: .*target", at=False),
    case("mse-weight-shape", lambda t: mse_loss(t.m, t.m, weight=t.v), V, r"^mse_loss: .*weight"),
    case("mse-sym", lambda t: mse_loss(t.s, t.g.input("tt", ("T",))), V, r"^mse_loss: .*S vs T"),
    case("mse-two-graphs", lambda t: mse_loss(t.v, t.o), V, r"^mse_loss: .*different graphs"),
    case("mse-positional-reduction", lambda t: mse_loss(t.v, t.v, "sum"), T, r"mse_loss", at=False),
    case("l1-reduction", lambda t: l1_loss(t.v, t.v, reduction=None), V, r"^l1_loss: .*reduction"),
    case("smooth_l1-beta", lambda t: smooth_l1_loss(t.v, t.v, beta=-1.0), V, r"^smooth_l1_loss: .*beta"),
    case("huber-delta", lambda t: huber_loss(t.v, t.v, delta=0.0), V, r"^huber_loss: .*delta"),
    case("bce-int-target", lambda t: binary_cross_entropy(t.v, t.i), T, r"^binary_cross_entropy: .*target"),
    case("bce-shape", lambda t: binary_cross_entropy(t.v, t.v4), V, r"^binary_cross_entropy: .*target shape"),
    case("bce-weight", lambda t: binary_cross_entropy(t.m, t.m, t.v4), V, r"^binary_cross_entropy: .*cannot broadcast"),
    case("bcel-pos_weight", lambda t: binary_cross_entropy_with_logits(t.m, t.m, pos_weight=t.v4), V,
         r"^binary_cross_entropy_with_logits: .*cannot broadcast"),
    case("kl-reduction", lambda t: kl_div(t.v, t.v, reduction="avg"), V, r"^kl_div: .*reduction"),
    case("kl-bool", lambda t: kl_div(t.v, t.b), T, r"^kl_div: .*target"),
    case("grad-unused", lambda t: grad(t.v.sum(), t.m), V, r"^grad: .*not used"),
    case("grad-nonscalar", lambda t: grad(t.v * 2, t.v), V, r"grad"),
    case("grad-int", lambda t: grad(t.i.sum(), t.i), T, r"grad"),
]


@pytest.mark.parametrize("fn,exc,pattern,at", CASES)
def test_bad_input(t, fn, exc, pattern, at):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(exc, match=pattern) as e:
            fn(t)
    assert type(e.value).__module__ == "builtins", f"{type(e.value)} is not a plain builtin error: {e.value}"
    if at:
        assert f"called at {HERE}:" in str(e.value), str(e.value)


# ---- optimizers, schedulers, compile: host-side arguments (no user line needed) ---------------------------
HOST = [
    case("SGD-empty", lambda: SGD([], lr=0.1), V, r"^SGD: .*empty", at=False),
    case("SGD-lr", lambda: SGD(params(), lr=-1.0), V, r"^SGD: .*lr", at=False),
    case("SGD-nan-lr", lambda: SGD(params(), lr=float("nan")), V, r"^SGD: .*lr", at=False),
    case("SGD-nesterov", lambda: SGD(params(), lr=0.1, nesterov=True), V, r"^SGD: .*nesterov", at=False),
    case("SGD-ndarray", lambda: SGD([np.ones(3, f32)], lr=0.1), T, r"^SGD: .*Parameter", at=False),
    case("SGD-int-param", lambda: SGD([nn.Parameter(np.ones(3, np.int32), lm.int32)], lr=0.1), T,
         r"^SGD: .*float", at=False),
    case("SGD-dup", lambda: SGD([{"params": list(params())}] * 2, lr=0.1), V, r"^SGD: .*more than one group",
         at=False),
    case("SGD-module", lambda: SGD(nn.Linear(3, 1), lr=0.1), T, r"^SGD: ", at=False),
    case("SGD-group-no-params", lambda: SGD([{"lr": 0.1}]), V, r"^SGD: param group 0 has no \"params\"", at=False),
    case("Adam-added-group-no-params", lambda: Adam(params()).add_param_group({"lr": 0.1}), V,
         r"^Adam: param group 1 has no \"params\".*got keys \['lr'\]", at=False),
    case("SGD-lr-str", lambda: SGD(params(), lr="0.1"), T, r"^SGD: .*lr", at=False),
    case("Adam-betas-len", lambda: Adam(params(), betas=(0.9,)), V, r"^Adam: .*betas", at=False),
    case("Adam-betas-range", lambda: Adam(params(), betas=(0.9, 1.0)), V, r"^Adam: .*betas\[1\]", at=False),
    case("Adam-betas-float", lambda: Adam(params(), betas=0.9), T, r"^Adam: .*betas", at=False),
    case("Adam-eps", lambda: Adam(params(), eps=-1e-8), V, r"^Adam: .*eps", at=False),
    case("Adam-lr-none", lambda: Adam(params(), lr=None), T, r"^Adam: .*lr", at=False),
    case("RMSprop-alpha", lambda: RMSprop(params(), alpha=-0.1), V, r"^RMSprop: .*alpha", at=False),
    case("Adagrad-lr_decay", lambda: Adagrad(params(), lr_decay=-1), V, r"^Adagrad: .*lr_decay", at=False),
    case("StepLR-size0", lambda: StepLR(opt(), 0), V, r"^StepLR: .*step_size", at=False),
    case("StepLR-float", lambda: StepLR(opt(), 2.5), V, r"^StepLR: .*step_size", at=False),
    case("StepLR-not-optimizer", lambda: StepLR("sgd", 2), T, r"^StepLR: ", at=False),
    case("MultiStepLR-str", lambda: MultiStepLR(opt(), [3, "a"]), V, r"^MultiStepLR: ", at=False),
    case("MultiStepLR-int", lambda: MultiStepLR(opt(), 5), T, r"^MultiStepLR: ", at=False),
    case("Cosine-T0", lambda: CosineAnnealingLR(opt(), 0), V, r"^CosineAnnealingLR: .*T_max", at=False),
    case("LinearLR-start0", lambda: LinearLR(opt(), start_factor=0.0), V, r"^LinearLR: .*start_factor", at=False),
    case("OneCycle-missing", lambda: OneCycleLR(opt(), 0.1), V, r"^OneCycleLR: .*total_steps", at=False),
    case("OneCycle-pct", lambda: OneCycleLR(opt(), 0.1, total_steps=10, pct_start=2.0), V,
         r"^OneCycleLR: .*pct_start", at=False),
    case("OneCycle-anneal", lambda: OneCycleLR(opt(), 0.1, total_steps=10, anneal_strategy="exp"), V,
         r"^OneCycleLR: .*anneal_strategy", at=False),
    case("OneCycle-momentum", lambda: OneCycleLR(Adagrad(params()), 0.1, total_steps=10), V,
         r"^OneCycleLR: .*cycle_momentum", at=False),
    case("OneCycle-max_lr-len", lambda: OneCycleLR(opt(), [0.1, 0.2], total_steps=10), V,
         r"^OneCycleLR: .*max_lr", at=False),
]


@pytest.mark.parametrize("fn,exc,pattern,at", HOST)
def test_bad_host_argument(fn, exc, pattern, at):
    with pytest.raises(exc, match=pattern) as e:
        fn()
    assert type(e.value).__module__ == "builtins", f"{type(e.value)} is not a plain builtin error: {e.value}"


def test_compile_arguments(t):
    with pytest.raises(ValueError, match=r"^compile: search"):
        lm.compile(t.v, search=-1)
    with pytest.raises(ValueError, match=r"^compile: unknown backend None"):
        lm.compile(t.v, backend=None)
    with pytest.raises(TypeError, match=r"^compile: "):
        lm.compile(None)
    with pytest.raises(TypeError, match=r"^compile: "):
        lm.compile((t.v, "y"))


def test_compile_names_a_parameter_given_as_an_output(t):
    """Before: 'Parameter' object is not iterable, or an error naming no output."""
    lin = nn.Linear(3, 4)
    out = lin(t.m)  # (which names its parameters)
    read = r"Parameter weight \(4, 3\) float32 \(read it into the graph with \.on\(graph\)\)"
    with pytest.raises(TypeError, match=r"^compile: expected a GraphTensor .*, got " + read) as e:
        lm.compile(lin.weight)
    assert f"called at {HERE}:" in str(e.value)
    with pytest.raises(TypeError, match=r"^compile: output 1 must be a GraphTensor, got " + read) as e:
        lm.compile([out, lin.weight])
    assert f"called at {HERE}:" in str(e.value)
    with pytest.raises(TypeError, match=r"^compile: expected .*, got an empty sequence"):
        lm.compile([])
    moment = State(np.zeros(3, f32), name="m")  # a plain State (an optimizer's) has no .on
    with pytest.raises(TypeError, match=r"^compile: output 1 .*, got State m \(3,\) float32 \(read it into the "
                                        r"graph with graph\.state\(\.\.\.\)\)"):
        lm.compile([out, moment])


def test_compile_step_arguments(t):
    lin = nn.Linear(3, 1)
    loss = lin(t.m).sum()
    with pytest.raises(ValueError, match=r"^compile_step: accumulate"):
        compile_step(loss, SGD(lin.parameters(), lr=0.1), accumulate=0)
    with pytest.raises(TypeError, match=r"^compile_step: loss"):
        compile_step(np.float32(1.0), SGD(lin.parameters(), lr=0.1))
    with pytest.raises(ValueError, match=r"^compile_step: .*none of the optimizer's parameters"):
        compile_step(t.v.sum(), SGD(nn.Linear(3, 1).parameters(), lr=0.1))


@pytest.mark.parametrize("make,pattern", [
    (lambda lin, out: dict(optimizer=None),
     r"^compile_step: needs an optimizer \(train\.SGD, train\.AdamW, \.\.\.\), got None"),
    (lambda lin, out: dict(optimizer=lin.parameters()), r"^compile_step: needs an optimizer .*, got generator"),
    (lambda lin, out: dict(clip_grad_nrom=1.0),
     r"^compile_step: unknown option 'clip_grad_nrom' \(did you mean 'clip_grad_norm'\?\); the options: outputs, "),
    (lambda lin, out: dict(speed=2), r"^compile_step: unknown option 'speed'; the options: outputs, "),
    (lambda lin, out: dict(outputs=out),
     r"^compile_step: outputs must be a list of GraphTensors, got a GraphTensor \(outputs=\[t\] for one\)"),
    (lambda lin, out: dict(outputs={out}), r"^compile_step: outputs must be a list of GraphTensors, got set"),
    (lambda lin, out: dict(outputs=[out, lin.weight]),
     r"^compile_step: outputs\[1\] must be a GraphTensor, got Parameter weight \(1, 3\) float32 "
     r"\(read it into the graph with \.on\(graph\)\)"),
    (lambda lin, out: dict(outputs=lin.weight),
     r"^compile_step: outputs must be a list of GraphTensors, got Parameter"),
], ids=["no-optimizer", "parameters-for-optimizer", "misspelled-option", "unknown-option", "one-tensor-outputs",
        "set-outputs", "parameter-in-outputs", "parameter-outputs"])
def test_compile_step_names_the_bad_argument(t, make, pattern):
    """Before: AttributeError ('NoneType' object has no attribute 'params'), TrainStep.__init__'s unexpected
    keyword argument, "len() of a tensor whose first dim B is symbolic", "'Parameter' object is not iterable"."""
    lin = nn.Linear(3, 1)
    out = lin(t.x)
    kw = {"optimizer": SGD(lin.parameters(), lr=0.1), **make(lin, out)}
    with pytest.raises(TypeError, match=pattern) as e:
        compile_step(out.sum(), **kw)
    assert f"called at {HERE}:" in str(e.value), str(e.value)


def test_compiled_call_bad_arrays(t):
    f = lm.compile([t.m.sum(), t.i.sum()])
    with pytest.raises(TypeError, match=r"input 'm'"):
        f(m=None, i=np.zeros(3, np.int32))
    with pytest.raises(TypeError, match=r"input 'i': expected dtype int32, got bool"):
        f(m=np.ones((2, 3), f32), i=np.zeros(3, bool))
    with pytest.raises(ValueError, match=r"input 'm': dim 0 should be 2"):
        f(m=np.ones((3, 3), f32), i=np.zeros(3, np.int32))


def test_an_error_inside_nested_modules_names_the_failing_child():
    """A Sequential of alike layers: the error's lines name the innermost Linear and the user's call of the
    outermost module; a note gives the child's path (state_dict's names), which says which Linear it was."""

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Linear(6, 4), nn.ReLU(), nn.Linear(5, 3))

        def forward(self, x):
            return self.body(x)

    x = lm.Graph().input("x", ("B", 6))
    with pytest.raises(ValueError, match=r"^Linear\(in_features=5, out_features=3, bias=True\)") as e:
        Net()(x)
    assert e.value.__notes__ == ["  in Net: body.2 = Linear(in_features=5, out_features=3, bias=True)"]
    with pytest.raises(ValueError) as e:  # one module alone: its own lines say it all
        nn.Linear(5, 3)(x)
    assert not getattr(e.value, "__notes__", None)
    with pytest.raises(ValueError) as e:  # a failed call leaves no state behind: the next one notes anew
        Net()(x)
    assert e.value.__notes__ == ["  in Net: body.2 = Linear(in_features=5, out_features=3, bias=True)"]


def test_a_users_own_exception_in_forward_gets_no_module_note():
    class Bad(nn.Module):
        def forward(self, x):
            raise KeyError("mine")

    class Outer(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = Bad()

        def forward(self, x):
            return self.inner(x)

    with pytest.raises(KeyError) as e:
        Outer()(lm.Graph().input("x", (2,)))
    assert not getattr(e.value, "__notes__", None)


def test_the_module_note_finds_a_block_called_in_a_loop_over_a_module_list():
    """``for blk in self.blocks: x = blk(x)`` never calls the ModuleList itself: the path still goes
    through it (blocks.2.proj), as a Sequential's does."""

    class Block(nn.Module):
        def __init__(self, n_in):
            super().__init__()
            self.proj = nn.Linear(n_in, 4)

        def forward(self, x):
            return self.proj(x)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = nn.ModuleList([Block(6), Block(4), Block(5)])

        def forward(self, x):
            for blk in self.blocks:
                x = blk(x)
            return x

    with pytest.raises(ValueError) as e:
        Net()(lm.Graph().input("x", ("B", 6)))
    assert e.value.__notes__ == ["  in Net: blocks.2.proj = Linear(in_features=5, out_features=4, bias=True)"]


def test_layer_norm_over_no_dim_is_refused_as_torch():
    with pytest.raises(ValueError, match=r"^layer_norm: normalized_shape must have at least one dim"):
        nn.functional.layer_norm(lm.Graph().input("x", (2, 3)), ())


def test_a_gather_error_is_not_blamed_on_an_int_index_the_program_does_not_compute():
    g = lm.Graph()
    x = g.input("x", ("B", 4))
    ids = g.input("ids", (2,), dtype=lm.int32)
    emb = nn.Embedding(10, 4)
    _unused = x[5]
    f = lm.compile([emb(ids).sum() + x.sum()])
    with pytest.raises(IndexError, match=r"^Embedding\(10, 4\): index 12 is out of range"):
        f(x=np.ones((3, 4), np.float32), ids=np.array([1, 12], np.int32))
