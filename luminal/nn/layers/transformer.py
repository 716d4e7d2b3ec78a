"""torch's Transformer layers: ``TransformerEncoderLayer``, ``TransformerEncoder``,
``TransformerDecoderLayer`` and ``TransformerDecoder``, with torch's parameter names (``self_attn``,
``linear1``, ``norm1``, ...), ``norm_first``, ``batch_first`` and relu/gelu activations, so a torch
state_dict loads by name. A mask may be a numpy array (``Transformer.generate_square_subsequent_mask``'s):
it becomes a constant of the input's graph."""

from __future__ import annotations

import copy

from luminal.core.errors import check_int
from luminal.nn.layers.activation import gelu, relu
from luminal.nn.layers.attention import MultiheadAttention, _mask_on
from luminal.nn.layers.containers import ModuleList
from luminal.nn.layers.dropout import Dropout
from luminal.nn.layers.linear import Linear
from luminal.nn.layers.norm import LayerNorm
from luminal.nn.module import Module

_ACTIVATIONS = {"relu": relu, "gelu": gelu}


def _activation(layer: str, activation):
    if isinstance(activation, str):
        if activation not in _ACTIVATIONS:
            raise ValueError(f"{layer}: activation should be relu/gelu, not {activation}")
        return _ACTIVATIONS[activation]
    if not callable(activation):
        raise TypeError(f"{layer}: activation must be 'relu', 'gelu' or a callable, got {activation!r}")
    return activation


class TransformerEncoderLayer(Module):
    """torch's ``nn.TransformerEncoderLayer``: self-attention and a feed-forward block, each with a
    residual connection and a LayerNorm (after it, or before it with ``norm_first``).

    Args:
        d_model: the embedding size.
        nhead: attention heads.
        dim_feedforward: the hidden size of the feed-forward block.
        dropout: the dropout probability (training mode).
        activation: 'relu', 'gelu' or a callable/module.
        layer_norm_eps: the norms' eps.
        batch_first: inputs are (N, S, E) instead of (S, N, E).
        norm_first: pre-norm.
        bias: biases in the linears and norms.
        device: accepted for torch's signature and ignored (arrays live on the host).
        dtype: the parameters' dtype.
    """

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048, dropout: float = 0.1,
                 activation="relu", layer_norm_eps: float = 1e-5, batch_first: bool = False,
                 norm_first: bool = False, bias: bool = True, device=None, dtype=None):
        super().__init__()
        d_model = check_int("TransformerEncoderLayer", "d_model", d_model, 1)
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias, batch_first=batch_first,
                                            dtype=dtype)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, dtype=dtype)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, dtype=dtype)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.activation = _activation("TransformerEncoderLayer", activation)

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal: bool = False):
        """``src`` (S, N, E), (N, S, E) with batch_first, or (S, E); masks as ``MultiheadAttention``'s
        (``src_mask`` is its ``attn_mask``; bool True masks out; numpy arrays are taken as constants)."""
        src_mask, src_key_padding_mask = _mask_on(src_mask, src), _mask_on(src_key_padding_mask, src)
        x = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            x = x + self._ff_block(self.norm2(x))
        else:
            x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal))
            x = self.norm2(x + self._ff_block(x))
        return x

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal):
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask, need_weights=False,
                           is_causal=is_causal)[0]
        return self.dropout1(x)

    def _ff_block(self, x):
        return self.dropout2(self.linear2(self.dropout(self.activation(self.linear1(x)))))


class TransformerDecoderLayer(Module):
    """torch's ``nn.TransformerDecoderLayer``: self-attention, cross-attention over ``memory`` and a
    feed-forward block, each with a residual connection and a LayerNorm.

    Args:
        d_model, nhead, dim_feedforward, dropout, activation: as ``TransformerEncoderLayer``.
        layer_norm_eps, batch_first, norm_first, bias, device, dtype: as ``TransformerEncoderLayer``.
    """

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048, dropout: float = 0.1,
                 activation="relu", layer_norm_eps: float = 1e-5, batch_first: bool = False,
                 norm_first: bool = False, bias: bool = True, device=None, dtype=None):
        super().__init__()
        d_model = check_int("TransformerDecoderLayer", "d_model", d_model, 1)
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias, batch_first=batch_first,
                                            dtype=dtype)
        self.multihead_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                                 batch_first=batch_first, dtype=dtype)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, dtype=dtype)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, dtype=dtype)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
        self.norm3 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.dropout3 = Dropout(dropout)
        self.activation = _activation("TransformerDecoderLayer", activation)

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal: bool = False, memory_is_causal: bool = False):
        """``tgt`` (T, N, E) and ``memory`` (S, N, E) (batch first with ``batch_first``); masks as
        ``MultiheadAttention``'s (numpy arrays are taken as constants)."""
        tgt_mask, tgt_key_padding_mask = _mask_on(tgt_mask, tgt), _mask_on(tgt_key_padding_mask, tgt)
        memory_mask, memory_key_padding_mask = _mask_on(memory_mask, tgt), _mask_on(memory_key_padding_mask, tgt)
        x = tgt
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), tgt_mask, tgt_key_padding_mask, tgt_is_causal)
            x = x + self._mha_block(self.norm2(x), memory, memory_mask, memory_key_padding_mask, memory_is_causal)
            x = x + self._ff_block(self.norm3(x))
        else:
            x = self.norm1(x + self._sa_block(x, tgt_mask, tgt_key_padding_mask, tgt_is_causal))
            x = self.norm2(x + self._mha_block(x, memory, memory_mask, memory_key_padding_mask, memory_is_causal))
            x = self.norm3(x + self._ff_block(x))
        return x

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal):
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask, need_weights=False,
                           is_causal=is_causal)[0]
        return self.dropout1(x)

    def _mha_block(self, x, mem, attn_mask, key_padding_mask, is_causal):
        x = self.multihead_attn(x, mem, mem, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                                need_weights=False, is_causal=is_causal)[0]
        return self.dropout2(x)

    def _ff_block(self, x):
        return self.dropout3(self.linear2(self.dropout(self.activation(self.linear1(x)))))


def _clones(layer: Module, n: int, name: str) -> ModuleList:
    n = check_int(name, "num_layers", n, 0)
    return ModuleList([copy.deepcopy(layer) for _ in range(n)])


class TransformerEncoder(Module):
    """torch's ``nn.TransformerEncoder``: ``num_layers`` copies of ``encoder_layer`` (``layers.0``,
    ``layers.1``, ...), then an optional final ``norm``.

    Args:
        encoder_layer: the layer to copy. num_layers: how many. norm: an optional final module.
        enable_nested_tensor, mask_check: accepted for torch compatibility (no effect here).
    """

    def __init__(self, encoder_layer: Module, num_layers: int, norm: Module | None = None,
                 enable_nested_tensor: bool = True, mask_check: bool = True):
        super().__init__()
        self.layers = _clones(encoder_layer, num_layers, "TransformerEncoder")
        self.num_layers = num_layers
        self.norm = norm
        self.enable_nested_tensor, self.mask_check = enable_nested_tensor, mask_check

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal: bool | None = None):
        """Run ``src`` through every layer with the same masks, then ``norm``."""
        mask, src_key_padding_mask = _mask_on(mask, src), _mask_on(src_key_padding_mask, src)  # (once for all)
        x = src
        for layer in self.layers:
            x = layer(x, src_mask=mask, src_key_padding_mask=src_key_padding_mask, is_causal=bool(is_causal))
        return self.norm(x) if self.norm is not None else x


class TransformerDecoder(Module):
    """torch's ``nn.TransformerDecoder``: ``num_layers`` copies of ``decoder_layer``, then an optional ``norm``.

    Args:
        decoder_layer: the layer to copy. num_layers: how many. norm: an optional final module.
    """

    def __init__(self, decoder_layer: Module, num_layers: int, norm: Module | None = None):
        super().__init__()
        self.layers = _clones(decoder_layer, num_layers, "TransformerDecoder")
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal: bool | None = None, memory_is_causal: bool = False):
        """Run ``tgt`` through every layer (each attending to ``memory``), then ``norm``."""
        tgt_mask, tgt_key_padding_mask = _mask_on(tgt_mask, tgt), _mask_on(tgt_key_padding_mask, tgt)
        memory_mask, memory_key_padding_mask = _mask_on(memory_mask, tgt), _mask_on(memory_key_padding_mask, tgt)
        x = tgt
        for layer in self.layers:
            x = layer(x, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                      tgt_key_padding_mask=tgt_key_padding_mask, memory_key_padding_mask=memory_key_padding_mask,
                      tgt_is_causal=bool(tgt_is_causal), memory_is_causal=memory_is_causal)
        return self.norm(x) if self.norm is not None else x
