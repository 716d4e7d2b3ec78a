"""Floats written exactly, for the keys and files that must tell any two apart.

``repr`` round-trips every number (``-0.0`` and ``1e-45`` included) but writes every NaN as ``nan``,
whatever its sign and payload; ``float.hex`` and JSON do the same. A NaN's bits can reach a result
(a pad or ``where`` value, a constant), so a cache keyed or stored through those would hand one NaN's
program or value to another. Here a NaN is its bit pattern.
"""

from __future__ import annotations

import struct


def float_text(x: float) -> str:
    """``x`` as text that tells it from every other float: ``repr`` for a number, ``nan:<bits>`` (the
    IEEE double's 16 hex digits, big-endian) for a NaN."""
    return repr(x) if x == x else f"nan:{nan_bits(x)}"


def nan_bits(x: float) -> str:
    """The 16 hex digits of the double ``x`` (big-endian): a NaN's sign and payload."""
    return struct.pack(">d", x).hex()


def from_bits(text: str) -> float:
    """The double whose 16 big-endian hex digits are ``text`` (``nan_bits``'s inverse); ValueError if not."""
    if len(text) != 16:
        raise ValueError(f"expected 16 hex digits, got {text!r}")
    return struct.unpack(">d", bytes.fromhex(text))[0]
