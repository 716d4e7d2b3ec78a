"""Quick checks of the Transformer layers' arguments (the full-tier parity against torch is
``tests/nn/test_transformer_audit.py``): ``generate_square_subsequent_mask``'s dtypes (bool as torch's),
and the errors for d_model/nhead and for masks and inputs of the wrong shape, which name the layer, its
argument (src_mask, memory_mask, ...) and the shapes."""

from __future__ import annotations

import numpy as np
import pytest

import luminal as lm
from luminal import nn
from luminal.core.dtype import as_dtype

E, H, FF, N, T, S = 8, 2, 12, 2, 3, 4
KPM = np.zeros((N, S), bool)


def randn(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64", "bool"])
def test_generate_square_subsequent_mask_dtypes(dtype):
    """-inf above the diagonal and 0 elsewhere in a float dtype; True above the diagonal with
    dtype=bool (torch's; it used to be refused), which the layers take as the same mask."""
    mask = nn.Transformer.generate_square_subsequent_mask(4, dtype=getattr(lm, dtype if dtype != "bool" else "bool_"))
    want = np.triu(np.ones((4, 4), bool), 1)
    if dtype == "bool":
        assert mask.dtype == np.bool_
        np.testing.assert_array_equal(mask, want)
    else:
        assert mask.dtype == as_dtype(getattr(lm, dtype)).np
        np.testing.assert_array_equal(mask, np.where(want, -np.inf, 0.0))
    with pytest.raises(TypeError, match=r"generate_square_subsequent_mask: dtype must be a float dtype or bool, "
                                        r"got int32"):
        nn.Transformer.generate_square_subsequent_mask(4, dtype=lm.int32)
    with pytest.raises(ValueError, match="sz must be at least 0"):
        nn.Transformer.generate_square_subsequent_mask(-1)


def test_bool_subsequent_mask_is_the_float_one():
    m = nn.TransformerDecoderLayer(E, H, FF, 0.0)
    g = lm.Graph()
    tgt, mem = g.input("tgt", (T, N, E)), g.input("mem", (S, N, E))
    outs = [m(tgt, mem, tgt_mask=nn.Transformer.generate_square_subsequent_mask(T, dtype=d))
            for d in (lm.bool_, lm.float32)]
    got = lm.compile(outs, backend="reference")(tgt=randn(T, N, E, seed=1), mem=randn(S, N, E, seed=2))
    np.testing.assert_allclose(got[0], got[1], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("make", [
    lambda: nn.TransformerEncoderLayer(9, 2), lambda: nn.TransformerDecoderLayer(9, 2),
    lambda: nn.Transformer(9, 2)], ids=["encoder_layer", "decoder_layer", "transformer"])
def test_d_model_not_divisible_by_nhead_names_the_layer(make):
    """torch asserts 'embed_dim must be divisible by num_heads' in MultiheadAttention; here the error
    names the layer built and its own arguments."""
    with pytest.raises(ValueError, match=r"^(TransformerEncoderLayer|TransformerDecoderLayer|Transformer): "
                                         r"d_model \(9\) must be divisible by nhead \(2\)"):
        make()
    with pytest.raises(ValueError, match="nhead must be at least 1"):
        nn.TransformerEncoderLayer(8, 0)


def _raises(call, kind, pattern):
    with pytest.raises(kind, match=pattern):
        call()


def test_bad_masks_and_inputs_name_the_layer_argument_and_shapes():
    enc = nn.TransformerEncoderLayer(E, H, FF, 0.0)
    dec = nn.TransformerDecoderLayer(E, H, FF, 0.0, batch_first=True)
    g = lm.Graph()
    src, tgt, mem = g.input("src", (S, N, E)), g.input("tgt", (N, T, E)), g.input("mem", (N, S, E))
    el, dl = r"TransformerEncoderLayer\(\): ", r"TransformerDecoderLayer\(\): "
    _raises(lambda: enc(src, src_mask=np.zeros((3, 3), bool)), ValueError,
            el + r"src_mask must be \(L, S\) = \(4, 4\) or \(N \* nhead, L, S\) = \(4, 4, 4\), got \(3, 3\)")
    _raises(lambda: enc(src, src_key_padding_mask=np.zeros((S, N), bool)), ValueError,
            el + r"src_key_padding_mask must be \(N, S\) = \(2, 4\), got \(4, 2\)")
    _raises(lambda: enc(src, src_mask=np.zeros((S, S), np.int32)), TypeError,
            el + "src_mask must be bool or float, got int32")
    _raises(lambda: enc(g.input("wide", (S, N, E + 1))), ValueError,
            el + r"src: expected input of shape \(L, N, 8\) or \(L, 8\), got \(4, 2, 9\)")
    _raises(lambda: dec(tgt, mem, memory_mask=np.zeros((T, T), bool)), ValueError,
            dl + r"memory_mask must be \(L, S\) = \(3, 4\) or \(N \* nhead, L, S\) = \(4, 3, 4\), got \(3, 3\)")
    _raises(lambda: dec(tgt, mem, tgt_mask=np.zeros((T, S), bool)), ValueError,
            dl + r"tgt_mask must be \(L, S\) = \(3, 3\) .* got \(3, 4\)")
    _raises(lambda: dec(tgt, mem, tgt_key_padding_mask=np.zeros((N, S), bool)), ValueError,
            dl + r"tgt_key_padding_mask must be \(N, S\) = \(2, 3\), got \(2, 4\)")
    _raises(lambda: dec(tgt, mem, memory_key_padding_mask=np.zeros((N, T), bool)), ValueError,
            dl + r"memory_key_padding_mask must be \(N, S\) = \(2, 4\), got \(2, 3\)")
    _raises(lambda: dec(tgt, g.input("m3", (3, S, E))), ValueError,
            dl + r"tgt and memory must both be batched with the same batch size N.*\(2, 3, 8\) and \(3, 4, 8\)")
    _raises(lambda: dec(tgt, g.input("m2", (S, E))), ValueError, dl + "tgt and memory must both be batched")
    _raises(lambda: dec(tgt, g.input("m4", (N, S, 4))), ValueError,
            dl + r"memory: expected input of shape \(N, L, 8\) or \(L, 8\), got \(2, 4, 4\)")
    _raises(lambda: dec(g.input("t2", (T, E)), g.input("m5", (S, E)), memory_key_padding_mask=KPM), ValueError,
            dl + r"memory_key_padding_mask must be \(S,\) = \(4,\), got \(2, 4\)")
    # through the stacks and the model: the layer and its argument are named, and the module path
    stack = nn.TransformerEncoder(enc, 2)
    _raises(lambda: stack(src, mask=np.zeros((S, T), bool)), ValueError, el + "src_mask must be")
    model = nn.Transformer(E, H, 1, 1, FF, 0.0)
    with pytest.raises(ValueError, match=dl + r"memory_mask must be .* got \(4, 4\)") as info:
        model(src, g.input("t", (T, N, E)), memory_mask=np.zeros((S, S), bool))
    assert "in Transformer: decoder.layers.0 = TransformerDecoderLayer()" in "\n".join(info.value.__notes__)
