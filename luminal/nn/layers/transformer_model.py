"""torch's ``nn.Transformer``: the encoder-decoder model of "Attention Is All You Need", built from
``TransformerEncoder`` and ``TransformerDecoder`` (each with a final LayerNorm) with torch's attribute
names, so its ``state_dict`` keys are torch's and a torch checkpoint loads by name."""

from __future__ import annotations

import numpy as np

from luminal.core import dtype as dt
from luminal.core.errors import check_int, op_error
from luminal.core.symbolic import Sym, shape_str
from luminal.frontend.checks import check_tensors
from luminal.nn import init
from luminal.nn.layers._util import layer_name
from luminal.nn.layers.norm import LayerNorm
from luminal.nn.layers.transformer import (
    TransformerDecoder,
    TransformerDecoderLayer,
    TransformerEncoder,
    TransformerEncoderLayer,
    _check_heads,
)
from luminal.nn.module import Module


class Transformer(Module):
    """torch's ``nn.Transformer``: ``encoder`` (``num_encoder_layers`` encoder layers and a LayerNorm)
    reads ``src``; ``decoder`` (``num_decoder_layers`` decoder layers and a LayerNorm) reads ``tgt``
    and attends to the encoder's output. Every parameter of two or more dims is re-drawn
    ``xavier_uniform_`` at construction, as torch's ``_reset_parameters`` does (custom parts too).

    Args:
        d_model: the embedding size of ``src`` and ``tgt``.
        nhead: attention heads.
        num_encoder_layers, num_decoder_layers: the depth of each stack.
        dim_feedforward: the hidden size of the feed-forward blocks.
        dropout: the dropout probability (training mode).
        activation: 'relu', 'gelu' or a callable/module.
        custom_encoder, custom_decoder: modules used instead of the built stacks (called as
            ``TransformerEncoder`` and ``TransformerDecoder`` are).
        layer_norm_eps: the norms' eps.
        batch_first: inputs and output are (N, S, E) instead of (S, N, E).
        norm_first: pre-norm layers.
        bias: biases in the linears and norms.
        device: accepted for torch's signature (arrays live on the host).
        dtype: the parameters' dtype.
    """

    def __init__(self, d_model: int = 512, nhead: int = 8, num_encoder_layers: int = 6, num_decoder_layers: int = 6,
                 dim_feedforward: int = 2048, dropout: float = 0.1, activation="relu", custom_encoder=None,
                 custom_decoder=None, layer_norm_eps: float = 1e-5, batch_first: bool = False,
                 norm_first: bool = False, bias: bool = True, device=None, dtype=None):
        super().__init__()
        d_model = _check_heads("Transformer", d_model, nhead)
        layer_args = (d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps, batch_first, norm_first,
                      bias)
        if custom_encoder is not None:
            self.encoder = custom_encoder
        else:
            self.encoder = TransformerEncoder(TransformerEncoderLayer(*layer_args, dtype=dtype), num_encoder_layers,
                                              LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype))
        if custom_decoder is not None:
            self.decoder = custom_decoder
        else:
            self.decoder = TransformerDecoder(TransformerDecoderLayer(*layer_args, dtype=dtype), num_decoder_layers,
                                              LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype))
        self._reset_parameters()
        self.d_model, self.nhead, self.batch_first = d_model, nhead, batch_first

    def _reset_parameters(self) -> None:
        """torch's: ``xavier_uniform_`` for every parameter of two or more dims (the layers' own init of
        the linears is replaced; biases and norms keep theirs)."""
        for p in self.parameters():
            if p.ndim > 1:
                init.xavier_uniform_(p)

    def forward(self, src, tgt, src_mask=None, tgt_mask=None, memory_mask=None, src_key_padding_mask=None,
                tgt_key_padding_mask=None, memory_key_padding_mask=None, src_is_causal: bool | None = None,
                tgt_is_causal: bool | None = None, memory_is_causal: bool = False):
        """The decoder's output for ``tgt`` attending to the encoded ``src``: (T, N, E) (or (N, T, E)
        with ``batch_first``, (T, E) unbatched).

        Args:
            src: (S, N, E) (or (N, S, E), or (S, E)).
            tgt: (T, N, E) (or (N, T, E), or (T, E)).
            src_mask, tgt_mask, memory_mask: (S, S), (T, T), (T, S) (or per batch and head,
                (N * nhead, L, S)): bool True masks out, float is added to the scores. A numpy array
                (``generate_square_subsequent_mask``'s) is taken as a constant.
            src_key_padding_mask, tgt_key_padding_mask, memory_key_padding_mask: (N, S), (N, T),
                (N, S): True marks padding keys.
            src_is_causal, tgt_is_causal, memory_is_causal: apply a causal mask (where no mask is
                given: with a mask, the mask is what counts, as torch's hint). A causal ``tgt`` of
                symbolic length needs ``tgt_is_causal=True``, with no array of a fixed size.
        """
        name = layer_name(self)
        check_tensors(name, src=src, tgt=tgt)
        if src.ndim != tgt.ndim or src.ndim not in (2, 3):
            raise op_error(ValueError, name, f"src and tgt must both be batched (3-D) or both unbatched (2-D), got "
                           f"{shape_str(src.shape)} and {shape_str(tgt.shape)}", src, tgt)
        batch = 0 if self.batch_first else 1
        if src.ndim == 3 and src.shape[batch] != tgt.shape[batch]:
            raise op_error(ValueError, name, f"the batch number of src and tgt must be equal (dim {batch}), got "
                           f"{shape_str(src.shape)} and {shape_str(tgt.shape)}", src, tgt)
        if src.shape[-1] != self.d_model or tgt.shape[-1] != self.d_model:
            raise op_error(ValueError, name, f"the feature number of src and tgt must be equal to d_model "
                           f"({self.d_model}), got {shape_str(src.shape)} and {shape_str(tgt.shape)}", src, tgt)
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask, is_causal=src_is_causal)
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask,
                            memory_key_padding_mask=memory_key_padding_mask, tgt_is_causal=tgt_is_causal,
                            memory_is_causal=memory_is_causal)

    @staticmethod
    def generate_square_subsequent_mask(sz: int, device=None, dtype=None) -> np.ndarray:
        """torch's causal mask: a (sz, sz) float array, -inf above the diagonal and 0 elsewhere (with
        ``dtype=bool``, as torch's: True above the diagonal, the positions masked out).

        A numpy array, not a tensor: torch code makes it before calling the model, when no graph
        exists yet, and an array serves any graph. The Transformer layers take it as a constant of
        their input's graph (``g.constant(mask)`` does that elsewhere). For a length that is
        symbolic, pass ``tgt_is_causal=True`` (or ``is_causal=True``) instead.

        Args:
            sz: the sequence length.
            device: accepted for torch's signature.
            dtype: a float dtype (float32 when None), or bool.
        """
        if isinstance(sz, Sym):
            raise TypeError(f"Transformer.generate_square_subsequent_mask: sz is symbolic ({sz}); an array needs a "
                            f"fixed size: pass tgt_is_causal=True (is_causal=True) to the model instead")
        sz = check_int("Transformer.generate_square_subsequent_mask", "sz", sz, 0)
        d = dt.as_dtype(dt.float32 if dtype is None else dtype)
        if d is dt.bool_:
            return np.triu(np.ones((sz, sz), bool), k=1)
        if not d.is_float:
            raise TypeError(f"Transformer.generate_square_subsequent_mask: dtype must be a float dtype or bool, got "
                            f"{d.name} (-inf has no {d.name} value)")
        return np.triu(np.full((sz, sz), -np.inf, d.np), k=1)
