"""float16/bfloat16 attention and losses at magnitudes where 16-bit intermediates overflow, against torch
on CPU (values and gradients).

torch's CPU ``F.scaled_dot_product_attention`` (math and flash kernels alike) computes 16-bit attention in
float32 and rounds only its output, so a score ``q.k * scale`` beyond 65504 is finite there; luminal
computed the scores in float16 storage and gave inf, then NaN through the softmax (forward and backward).
``nn.MultiheadAttention(need_weights=False)`` goes through sdpa in torch and does the same; with the
weights asked for torch softmaxes 16-bit scores (not tested here: inf/NaN on both sides).
"""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from parity import GRAD_TOLERANCE, TOLERANCE, check, from_torch, to_torch

import luminal as lm
from luminal import train
from luminal.nn import layers as L

F16, BF16, BOOL = lm.float16, lm.bfloat16, lm.bool_
HALF = pytest.mark.parametrize("dtype", [F16, BF16], ids=lambda d: d.name)
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def randn(shape, dtype, seed=0, scale=1.0):
    """Normal values exactly representable in ``dtype`` (bfloat16 as float32 storage)."""
    return lm.core.dtype.to_storage(scale * np.random.default_rng(seed).standard_normal(shape), dtype)


# attention ----------------------------------------------------------------------------------------
@HALF
def test_sdpa_scores_beyond_float16_range(dtype, backend):
    """|q.k| * scale reaches about 2e5: torch's output and gradients are finite and luminal's match them,
    with a bool mask (a row with every key masked out gives 0), a float mask, is_causal and GQA."""
    q, k = randn((1, 4, 5, 8), dtype, 0, 300), randn((1, 2, 6, 8), dtype, 1, 300)
    v = randn((1, 2, 6, 8), dtype, 2)
    keep = np.random.default_rng(3).random((5, 6)) < 0.7
    keep[2] = False
    fm = randn((1, 1, 5, 6), dtype, 4)

    def op(f):
        def run(q, k, v, keep, fm):
            k2, v2 = (t.repeat_interleave(2, 1) for t in (k, v))
            return (f(q, k2, v2), f(q, k, v, attn_mask=keep, enable_gqa=True),
                    f(q, k, v, attn_mask=fm, scale=0.3, enable_gqa=True), f(q, k, v, is_causal=True, enable_gqa=True))
        return run

    got = check(op(L.scaled_dot_product_attention), [q, k, v, keep, fm], dtypes=[dtype, dtype, dtype, BOOL, dtype],
                torch_op=op(F.scaled_dot_product_attention), backend=backend)
    assert all(np.isfinite(o.astype(np.float64)).all() for o in got)


@pytest.mark.parametrize("dtype", [lm.float32, lm.float64], ids=lambda d: d.name)
def test_sdpa_wide_dtypes_unchanged(dtype):
    """float32/float64 attention is built as before: no cast to a 16-bit type in the graph (float32's
    exp computes in float64 and casts back, ``elementwise.exp``)."""
    g = lm.Graph()
    q = g.input("q", (2, 3, 4), dtype=dtype)
    out = L.scaled_dot_product_attention(q, q, q, attn_mask=g.input("m", (3, 3), dtype=dtype))
    assert out.dtype is dtype
    assert not [n for n in g.nodes if n.op == "Cast" and n.dtype in (F16, lm.bfloat16)]


def test_sdpa_float32_mask_promotes_half_inputs():
    """A float32 mask on float16 inputs promotes the output to float32, as before the float32 compute."""
    g = lm.Graph()
    q = g.input("q", (3, 4), dtype=F16)
    assert L.scaled_dot_product_attention(q, q, q, attn_mask=g.input("m", (3, 3))).dtype is lm.float32


@HALF
def test_multihead_attention_no_weights_large_scores(dtype, backend):
    """MultiheadAttention(need_weights=False) with a key_padding_mask, scores beyond 65504 in float16:
    torch runs it through sdpa (float32 inside), finite; output and every gradient compared."""
    with torch.random.fork_rng():
        torch.manual_seed(0)
        tm = torch.nn.MultiheadAttention(8, 2, batch_first=True).to(torch.float16 if dtype is F16 else torch.bfloat16)
    m = L.MultiheadAttention(8, 2, batch_first=True, dtype=dtype)
    m.load_state_dict({k: from_torch(t) for k, t in tm.state_dict().items()})
    x = randn((2, 5, 8), dtype, 5, 300)
    pad = np.zeros((2, 5), bool)
    pad[0, 3:] = True

    g = lm.Graph()
    xi = g.input("x", x.shape, dtype=dtype)
    out = m(xi, xi, xi, key_padding_mask=g.constant(pad), need_weights=False)[0]
    c = np.random.default_rng(7).uniform(-1, 1, out.shape).astype(np.float32)
    params = [p for _, p in m.named_parameters()]
    grads = train.grad((out.float() * g.constant(c)).sum(), [xi, *params])
    got = lm.compile([out, *grads], backend=backend)(x=x)

    tx = to_torch(x, dtype).requires_grad_()
    tout = tm(tx, tx, tx, key_padding_mask=torch.from_numpy(pad), need_weights=False)[0]
    (tout.float() * torch.from_numpy(c)).sum().backward()
    want = [from_torch(tout), from_torch(tx.grad)] + [from_torch(p.grad) for p in tm.parameters()]
    assert np.isfinite(want[0]).all()
    rt, at = TOLERANCE[dtype]
    np.testing.assert_allclose(got[0].astype(np.float64), want[0].astype(np.float64), rtol=rt, atol=at)
    # the gradients reach 1e3 (products of inputs ~300): within the tolerance relative to each one's largest
    # element (torch's own float16 gradients are 2e-3 of that from float64's, luminal's 5e-4)
    grt, _ = GRAD_TOLERANCE[dtype]
    for name, a, b in zip(["input"] + [n for n, _ in tm.named_parameters()], got[1:], want[1:], strict=True):
        a, b = a.astype(np.float64), b.astype(np.float64)
        assert np.abs(a - b).max() <= grt * np.abs(b).max(), name


# losses -------------------------------------------------------------------------------------------
# A count that is a symbolic dim (the batch of kl_div's batchmean, the classes of the per-class means and
# of label smoothing) was cast to the input's dtype before dividing: inf in float16 beyond 65504, so the
# loss was 0 (or lost its smoothing term) with a zero gradient, where torch divides by the Python int.
BIG = 70_000  # > 65504, the float16 maximum


def test_kl_div_batchmean_symbolic_batch_beyond_float16_range(backend):
    x = randn((BIG, 2), F16, 0)
    t = lm.core.dtype.to_storage(np.random.default_rng(1).uniform(0.1, 0.9, (BIG, 2)), F16)
    check(lambda x, t: lm.nn.functional.kl_div(x, t, reduction="batchmean"), [x, t], dtypes=[F16, F16],
          shapes=[("N", 2), ("N", 2)], torch_op=lambda x, t: F.kl_div(x, t, reduction="batchmean"), backend=backend)


def test_multilabel_soft_margin_symbolic_classes_beyond_float16_range(backend):
    x = randn((2, BIG), F16, 0)
    t = (np.random.default_rng(1).random((2, BIG)) < 0.5).astype(np.float16)
    check(lambda x, t: lm.nn.functional.multilabel_soft_margin_loss(x, t), [x, t], dtypes=[F16, F16],
          shapes=[(2, "C"), (2, "C")], torch_op=F.multilabel_soft_margin_loss, backend=backend)


def test_cross_entropy_label_smoothing_symbolic_classes_beyond_float16_range(backend):
    """Class-probability targets (the forward is finite: the smoothed target's share 0.1 / C per class)."""
    x = randn((2, BIG), F16, 0)
    t = np.zeros((2, BIG), np.float16)
    t[0, 3] = t[1, 7] = 1.0

    def op(f):
        return lambda x, t: f(x, t, label_smoothing=0.1)

    check(op(lm.nn.functional.cross_entropy), [x, t], dtypes=[F16, F16], shapes=[(2, "C"), (2, "C")],
          torch_op=op(F.cross_entropy), backend=backend)


def test_cross_entropy_label_smoothing_index_target_symbolic_classes_gradient(backend):
    """Class-index targets over C > 65504 classes: the loss itself overflows float16 on both sides (the sum
    of C log-probabilities), the gradient ``(1 - s)(p - onehot) + s (p - 1/C)`` is finite and compared."""
    x = randn((2, BIG), F16, 0)
    y = np.array([3, 7], np.int32)
    g = lm.Graph()
    xi = g.input("x", (2, "C"), dtype=F16)
    loss = lm.nn.functional.cross_entropy(xi, g.input("y", (2,), dtype=lm.int32), label_smoothing=0.1)
    got = lm.compile(train.grad(loss.float(), xi), backend=backend)(x=x, y=y)
    tx = to_torch(x, F16).requires_grad_()
    F.cross_entropy(tx, torch.from_numpy(y).long(), label_smoothing=0.1).float().backward()
    np.testing.assert_allclose(got.astype(np.float64), from_torch(tx.grad).astype(np.float64),
                               rtol=GRAD_TOLERANCE[F16][0], atol=1e-7)
