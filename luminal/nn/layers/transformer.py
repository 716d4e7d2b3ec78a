"""torch's Transformer layers: ``TransformerEncoderLayer``, ``TransformerEncoder``,
``TransformerDecoderLayer`` and ``TransformerDecoder``, with torch's parameter names (``self_attn``,
``linear1``, ``norm1``, ...), ``norm_first``, ``batch_first`` and relu/gelu activations, so a torch
state_dict loads by name. A mask may be a numpy array (``Transformer.generate_square_subsequent_mask``'s):
it becomes a constant of the input's graph."""

from __future__ import annotations

import copy

from luminal.core.errors import check_int, op_error
from luminal.core.symbolic import shape_str
from luminal.frontend.tensor import GraphTensor
from luminal.nn.layers._util import bad_input, layer_name
from luminal.nn.layers.activation import gelu, relu
from luminal.nn.layers.attention import MultiheadAttention, _check_mask_dtype, _mask_on
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


def _check_heads(layer: str, d_model, nhead) -> int:
    """``d_model`` and ``nhead`` as ints, each head taking ``d_model // nhead`` features: checked here so
    that the error names the layer and its own arguments (MultiheadAttention's say embed_dim/num_heads).
    Returns ``d_model``."""
    d_model, nhead = check_int(layer, "d_model", d_model, 1), check_int(layer, "nhead", nhead, 1)
    if d_model % nhead:
        raise ValueError(f"{layer}: d_model ({d_model}) must be divisible by nhead ({nhead})")
    return d_model


def _lengths(layer: Module, what: str, x):
    """(N, L) of a layer's input ``x`` ((L, N, E), (N, L, E) with batch_first, or (L, E): N is None),
    checked against d_model here, so that the error names the layer and the argument (``src``,
    ``memory``); None for what is no tensor (the module call names that)."""
    if not isinstance(x, GraphTensor):
        return None
    attn = layer.self_attn
    e = attn.embed_dim
    if x.ndim not in (2, 3) or x.shape[-1] != e:
        raise bad_input(layer_name(layer), f"(N, L, {e}) or (L, {e})" if attn.batch_first else
                        f"(L, N, {e}) or (L, {e})", x, what=what)
    if x.ndim == 2:
        return None, x.shape[0]
    return (x.shape[0], x.shape[1]) if attn.batch_first else (x.shape[1], x.shape[0])


def _check_masks(layer: Module, query, key, **masks) -> None:
    """The shapes of the masks of one attention of ``layer``: an attention mask (``*_mask``) is (L, S),
    or (N * nhead, L, S) per head ((nhead, L, S) unbatched), a ``*_key_padding_mask`` (N, S) ((S,)
    unbatched), with ``query``/``key`` = (N, L)/(N, S) from ``_lengths``. MultiheadAttention checks them
    too, but under its own argument names: a decoder's tgt_mask and memory_mask are both its attn_mask."""
    if query is None or key is None:
        return
    (n, n_q), (_, n_k) = query, key
    heads = layer.self_attn.num_heads * (1 if n is None else n)
    for what, mask in masks.items():
        if not isinstance(mask, GraphTensor):
            continue
        _check_mask_dtype(layer_name(layer), what, mask)
        if what.endswith("key_padding_mask"):
            want = {"(S,)" if n is None else "(N, S)": (n_k,) if n is None else (n, n_k)}
        else:
            want = {"(L, S)": (n_q, n_k), "(nhead, L, S)" if n is None else "(N * nhead, L, S)": (heads, n_q, n_k)}
        if tuple(mask.shape) not in want.values():
            shapes = " or ".join(f"{k} = {shape_str(v)}" for k, v in want.items())
            raise op_error(ValueError, layer_name(layer), f"{what} must be {shapes}, got {shape_str(mask.shape)}", mask)


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
        d_model = _check_heads("TransformerEncoderLayer", d_model, nhead)
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
        lengths = _lengths(self, "src", src)
        _check_masks(self, lengths, lengths, src_mask=src_mask, src_key_padding_mask=src_key_padding_mask)
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
        d_model = _check_heads("TransformerDecoderLayer", d_model, nhead)
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
        t, m = _lengths(self, "tgt", tgt), _lengths(self, "memory", memory)
        if t is not None and m is not None and (tgt.ndim != memory.ndim or t[0] != m[0]):
            raise op_error(ValueError, layer_name(self), f"tgt and memory must both be batched with the same batch "
                           f"size N, or both unbatched, got {shape_str(tgt.shape)} and {shape_str(memory.shape)}",
                           tgt, memory)
        _check_masks(self, t, t, tgt_mask=tgt_mask, tgt_key_padding_mask=tgt_key_padding_mask)
        _check_masks(self, t, m, memory_mask=memory_mask, memory_key_padding_mask=memory_key_padding_mask)
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
        enable_nested_tensor, mask_check: accepted for torch compatibility. They choose torch's nested-tensor
            inference fast path (and the check of its masks), which changes the speed, not the result, at
            the non-padded positions; there is no such path here, so ``use_nested_tensor`` is always False.
    """

    def __init__(self, encoder_layer: Module, num_layers: int, norm: Module | None = None,
                 enable_nested_tensor: bool = True, mask_check: bool = True):
        super().__init__()
        self.layers = _clones(encoder_layer, num_layers, "TransformerEncoder")
        self.num_layers = num_layers
        self.norm = norm
        self.enable_nested_tensor, self.mask_check = enable_nested_tensor, mask_check
        self.use_nested_tensor = False

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
