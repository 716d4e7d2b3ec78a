"""``nn.utils.rnn``: torch's path to the variable-length batch helpers (``pad_sequence``,
``pack_padded_sequence``, ``pad_packed_sequence``, ``pack_sequence``, ``unpad_sequence``, ``unpack_sequence``,
``PackedSequence``). They live in ``luminal/nn/packed_sequence.py`` (its docstring says how luminal packs):
below ``nn.layers``, whose recurrent layers read packed sequences, as ``nn.utils`` is above it (its
parametrizations read the layers)."""

from luminal.nn.packed_sequence import (
    PackedSequence,
    pack_padded_sequence,
    pack_sequence,
    pad_packed_sequence,
    pad_sequence,
    unpack_sequence,
    unpad_sequence,
)

__all__ = ["PackedSequence", "pack_padded_sequence", "pack_sequence", "pad_packed_sequence", "pad_sequence",
           "unpack_sequence", "unpad_sequence"]
