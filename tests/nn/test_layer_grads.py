"""Forward + backward through every layer: the gradient of sum(output) w.r.t. the input and every
parameter, from ``luminal.train.grad``, against torch's ``.grad``."""

import numpy as np
import pytest
import torch

import luminal as lm
from luminal.nn import layers as L

pytestmark = pytest.mark.filterwarnings("ignore:Using padding='same':UserWarning")
train = pytest.importorskip("luminal.train")


def randn(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def grad_check(make, x, backend, *, call=None, tcall=None, train_mode=False, rtol=1e-4, atol=1e-5, perturb=True):
    """``make(nn)`` builds the same layer from ``L`` and ``torch.nn``; ``call(m, x)`` applies it."""
    call = call or (lambda m, t: m(t))
    tcall = tcall or call
    tm, m = make(torch.nn).train(train_mode), make(L).train(train_mode)
    if perturb:  # non-trivial biases / norm weights, so their gradients are tested too
        with torch.no_grad():
            for p in tm.parameters():
                p.add_(torch.from_numpy(randn(*p.shape, seed=p.numel())) * 0.1)
    m.load_state_dict({k: v.detach().numpy().astype(np.int32) if v.dtype == torch.int64 else v.detach().numpy()
                       for k, v in tm.state_dict().items()})
    g = lm.Graph()
    xi = g.input("x", x.shape, dtype=lm.core.dtype.as_dtype(x.dtype))
    out = call(m, xi)
    names = [n for n, p in m.named_parameters()]
    wrt = ([xi] if x.dtype == np.float32 else []) + list(m.parameters())
    grads = train.grad(out.sum(), wrt)
    got = lm.compile([out] + list(grads), backend=backend)(x=x)

    tx = torch.from_numpy(x)
    if x.dtype == np.float32:
        tx.requires_grad_(True)
    tout = tcall(tm, tx if x.dtype == np.float32 else tx.long())
    tout.sum().backward()
    np.testing.assert_allclose(got[0], tout.detach().numpy(), rtol=1e-5, atol=1e-5, err_msg="forward")
    want = ([tx.grad.numpy()] if x.dtype == np.float32 else []) + [p.grad.numpy() for _, p in tm.named_parameters()]
    labels = (["input"] if x.dtype == np.float32 else []) + names
    for label, a, b in zip(labels, got[1:], want, strict=True):
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, err_msg=f"d sum / d {label}")


CASES = {
    "linear": (lambda nn: nn.Linear(5, 3), (2, 4, 5)),
    "linear_nobias": (lambda nn: nn.Linear(5, 3, bias=False), (4, 5)),
    "layernorm": (lambda nn: nn.LayerNorm((3, 4)), (2, 3, 4)),
    "rmsnorm": (lambda nn: nn.RMSNorm(4), (3, 4)),
    "batchnorm1d_eval": (lambda nn: nn.BatchNorm1d(3), (4, 3, 5)),
    "batchnorm2d_eval": (lambda nn: nn.BatchNorm2d(3), (2, 3, 4, 4)),
    "conv1d": (lambda nn: nn.Conv1d(3, 4, 3, stride=2, padding=1), (2, 3, 9)),
    "conv2d": (lambda nn: nn.Conv2d(4, 6, 3, stride=2, padding=1, dilation=2, groups=2), (2, 4, 7, 8)),
    "conv2d_same": (lambda nn: nn.Conv2d(2, 3, (3, 2), padding="same"), (1, 2, 5, 6)),
    "maxpool2d": (lambda nn: nn.MaxPool2d(3, 2, 1, ceil_mode=True), (2, 2, 7, 8)),
    "avgpool2d": (lambda nn: nn.AvgPool2d(3, 2, 1, ceil_mode=True, count_include_pad=False), (2, 2, 7, 8)),
    "adaptive_avgpool2d": (lambda nn: nn.AdaptiveAvgPool2d((3, 2)), (2, 2, 7, 5)),
    "gelu": (lambda nn: nn.GELU(), (3, 4)),
    "gelu_tanh": (lambda nn: nn.GELU("tanh"), (3, 4)),
    "silu": (lambda nn: nn.SiLU(), (3, 4)),
    "softmax": (lambda nn: nn.Sequential(nn.Linear(4, 4), nn.Softmax(-1)), (3, 4)),
    "mlp": (lambda nn: nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2), nn.Tanh()), (5, 4)),
}


@pytest.mark.parametrize("case", list(CASES))
def test_layer_grads(backend, case):
    make, shape = CASES[case]
    grad_check(make, randn(*shape) * 2, backend)


@pytest.mark.parametrize("cls,shape", [("BatchNorm1d", (6, 3)), ("BatchNorm2d", (2, 3, 4, 4))])
def test_batchnorm_train_grads(backend, cls, shape):
    grad_check(lambda nn: getattr(nn, cls)(3), randn(*shape) + 1, backend, train_mode=True)


def test_embedding_grads(backend):
    idx = np.array([[1, 3, 3], [0, 4, 1]], np.int32)
    grad_check(lambda nn: nn.Embedding(5, 3), idx, backend)


def test_embedding_padding_idx_grad_is_zero(backend):
    """torch never updates the padding row: its gradient is zero."""
    idx = np.array([0, 2, 2, 1], np.int32)
    grad_check(lambda nn: nn.Embedding(4, 3, padding_idx=2), idx, backend)


@pytest.mark.parametrize("causal", [False, True])
def test_multihead_attention_grads(backend, causal):
    s = 4
    mask = torch.from_numpy(np.triu(np.ones((s, s), bool), 1))

    def call(m, x):
        return m(x, x, x, need_weights=False, is_causal=causal)[0]

    def tcall(m, x):
        kw = {"attn_mask": mask, "is_causal": True} if causal else {}
        return m(x, x, x, need_weights=False, **kw)[0]

    grad_check(lambda nn: nn.MultiheadAttention(6, 2, batch_first=True), randn(2, s, 6), backend,
               call=call, tcall=tcall)


@pytest.mark.parametrize("need_weights", [False, True])
def test_multihead_attention_with_a_query_that_sees_no_key(backend, need_weights):
    """A left-padded causal batch: the first query of the padded sequence sees no key. torch computes
    ``need_weights=False`` through sdpa, whose such rows give 0 and no gradient; luminal's plain softmax gave
    NaN there, and one AdamW step made every parameter NaN (the loss itself was finite). Asked for the weights,
    torch's plain softmax gives NaN too, and so does luminal's."""
    s = 4
    kpm = np.zeros((2, s), bool)
    kpm[1, :2] = True  # sequence 1: two pads on the left
    causal = torch.from_numpy(np.triu(np.ones((s, s), bool), 1))

    def call(m, x):
        g = x.graph
        return m(x, x, x, key_padding_mask=g.constant(kpm), attn_mask=g.constant(causal.numpy()),
                 need_weights=need_weights)[0]

    def tcall(m, x):
        return m(x, x, x, key_padding_mask=torch.from_numpy(kpm), attn_mask=causal, need_weights=need_weights)[0]

    if need_weights:
        tm = torch.nn.MultiheadAttention(6, 2, batch_first=True)
        x = torch.from_numpy(randn(2, s, 6))
        assert torch.isnan(tcall(tm, x)[1, 0]).all()  # (torch's own: row 0 of sequence 1 sees no key)
        m = L.MultiheadAttention(6, 2, batch_first=True)
        g = lm.Graph()
        out = lm.compile(call(m, g.input("x", (2, s, 6))), backend=backend)(x=x.numpy())
        assert np.isnan(out[1, 0]).all() and np.isfinite(out[0]).all()
        return
    grad_check(lambda nn: nn.MultiheadAttention(6, 2, batch_first=True), randn(2, s, 6), backend,
               call=call, tcall=tcall)


@pytest.mark.parametrize("which", ["key_padding_mask", "attn_mask", "sdpa"])
def test_an_int_mask_is_refused(which):
    """torch refuses int masks; luminal added a 0/1 int mask to the scores, masking nothing, silently."""
    g = lm.Graph()
    x = g.input("x", (2, 3, 6))
    m = L.MultiheadAttention(6, 2, batch_first=True)
    if which == "sdpa":
        with pytest.raises(TypeError, match="^scaled_dot_product_attention: attn_mask must be bool or float"):
            lm.nn.functional.scaled_dot_product_attention(x, x, x, attn_mask=g.constant(np.ones((3, 3), np.int32)))
        return
    mask = g.constant(np.ones((2, 3) if which == "key_padding_mask" else (3, 3), np.int32))
    with pytest.raises(TypeError, match=rf"MultiheadAttention.*: {which} must be bool or float, got int32"):
        m(x, x, x, **{which: mask})


def test_dropout_grad_is_the_mask(backend):
    x = np.abs(randn(40, 50)) + 0.5
    g = lm.Graph()
    xi = g.input("x", x.shape)
    y = L.Dropout(0.3)(xi)
    (dx,) = train.grad(y.sum(), [xi])
    out, got = lm.compile([y, dx], backend=backend)(x=x)
    np.testing.assert_allclose(got, (out != 0) / 0.7, rtol=1e-6)
