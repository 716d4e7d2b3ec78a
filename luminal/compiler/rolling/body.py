"""A rolled loop's body as the linked program sees it: the terms one trip computes, called per trip.

The link (``link.py``) turns each body's optimised template into a :class:`Body`, and every trip
into a ``Call`` term (``term.py``) whose arg (a :class:`CallArg`) names the body, with one ``Out``
term per output it returns. A body's outputs that only later calls read (a layer's saved
activations) are *packed*: per dtype, one 1-d Out holds them end to end (a :class:`Pack`), and each
reader reads its part through a view with an offset. A deep stack then has one Out (and one buffer)
per trip for them, not one per output.
"""

from __future__ import annotations

from dataclasses import dataclass

from luminal.core.dtype import DType


@dataclass(frozen=True, slots=True)
class Pack:
    """Outputs of one dtype laid end to end: ``members`` (output indices) at element ``offsets``,
    ``size`` elements in all."""

    dtype: DType
    members: tuple
    offsets: tuple
    size: object


@dataclass(eq=False, slots=True)
class Body:
    """A loop body, optimised once and called once per trip. ``inputs``: its Input terms, bound in
    this order to a Call's srcs; ``outputs``: the terms a call returns (an Out term's arg indexes
    them, then ``packs``: each a 1-d value holding several outputs)."""

    name: str
    inputs: tuple
    outputs: tuple
    packs: tuple = ()


@dataclass(frozen=True, slots=True)
class CallArg:
    body: Body
    site: tuple  # (loop, trip), for reading a program

    def __str__(self):
        return f"{self.body.name}{list(self.site)}"
