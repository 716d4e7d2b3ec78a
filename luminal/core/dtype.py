"""Data types and the promotion rules.

Promotion follows torch: categories order ``bool < int < float``; two tensors promote to the higher
category, and within floats to the wider type, with ``float16 + bfloat16 -> float32``. Python scalars
are *weak*: they never widen a tensor of the same category (``f16_tensor * 2.0`` stays float16); a
scalar of a higher category gives that category's default (``int32_tensor * 0.5`` is float32).
We have one integer type, int32; where torch would produce int64 (integer sums, indices) we give
int32.

numpy has no bfloat16: bfloat16 values are carried in float32 arrays and rounded to bfloat16
(round-to-nearest-even) after every op, so they hold exactly the values a bfloat16 tensor would.
"""

from __future__ import annotations

import numpy as np


class DType:
    """A tensor element type: ``lm.float32``, ``lm.float16``, ``lm.bfloat16``, ``lm.float64``,
    ``lm.int32`` and ``lm.bool``, promoted by torch's rules. One instance per type (compare with ``is``).

    Args:
        name: the name (``"float32"``).
        kind: ``"f"`` (float), ``"i"`` (int) or ``"b"`` (bool).
        bits: the width in bits.
        storage: the numpy dtype of the host arrays that carry it (bfloat16 travels as float32).
    """

    __slots__ = ("name", "kind", "bits", "np")

    def __init__(self, name: str, kind: str, bits: int, storage):
        self.name, self.kind, self.bits, self.np = name, kind, bits, np.dtype(storage)

    def __repr__(self):
        return f"lm.{self.name}"

    def __reduce__(self):
        return (_by_name, (self.name,))

    @property
    def is_float(self) -> bool:
        """Whether this is a floating-point dtype (float16, bfloat16, float32, float64)."""
        return self.kind == "f"

    @property
    def itemsize(self) -> int:
        """The size of one element in bytes, as luminal counts it (bfloat16: 2, though carried in float32 arrays)."""
        return self.bits // 8


float16 = DType("float16", "f", 16, np.float16)
bfloat16 = DType("bfloat16", "f", 16, np.float32)
float32 = DType("float32", "f", 32, np.float32)
float64 = DType("float64", "f", 64, np.float64)
int32 = DType("int32", "i", 32, np.int32)
bool_ = DType("bool", "b", 8, np.bool_)

ALL = (float16, bfloat16, float32, float64, int32, bool_)
_RANK = {"b": 0, "i": 1, "f": 2}
_DEFAULT = {"b": bool_, "i": int32, "f": float32}


def _by_name(name: str) -> DType:
    for d in ALL:
        if d.name == name:
            return d
    raise KeyError(name)


def as_dtype(x) -> DType:
    """Accept an lm dtype, a numpy dtype/type, or a name."""
    if isinstance(x, DType):
        return x
    if isinstance(x, str):
        try:
            return _by_name("bool" if x == "bool_" else x)
        except KeyError:
            raise TypeError(f"unknown dtype {x!r}; use one of {[d.name for d in ALL]}") from None
    if x is bool:
        return bool_
    if x is int:
        return int32
    if x is float:
        return float32
    try:
        npd = np.dtype(x)
    except TypeError:
        raise TypeError(f"unknown dtype {x!r}") from None
    for d in (float16, float32, float64, int32, bool_):
        if d.np == npd:
            return d
    raise TypeError(f"dtype {npd} is not supported; use one of {[d.name for d in ALL]}")


def promote(a: DType, b: DType) -> DType:
    """Result dtype of a binary op between two tensors."""
    if a is b:
        return a
    if a.kind != b.kind:
        return a if _RANK[a.kind] > _RANK[b.kind] else b
    if {a, b} == {float16, bfloat16}:
        return float32
    return a if a.bits >= b.bits else b


def kind_rank(d: DType) -> int:
    """Where ``d``'s kind stands in promotion: bool < int < float."""
    return _RANK[d.kind]


def scalar_kind(v) -> str:
    if isinstance(v, (bool, np.bool_)):
        return "b"
    if isinstance(v, (int, np.integer)):
        return "i"
    if isinstance(v, (float, np.floating)):
        return "f"
    raise TypeError(f"expected a number, got {type(v).__name__}")


def promote_scalar(t: DType, v) -> DType:
    """Result dtype of a binary op between a tensor of dtype ``t`` and a Python scalar ``v``."""
    k = scalar_kind(v)
    return t if _RANK[t.kind] >= _RANK[k] else _DEFAULT[k]


def round_bf16(a: np.ndarray) -> np.ndarray:
    """Round float32 values to the nearest bfloat16 (ties to even), keeping float32 storage."""
    a = np.array(a, dtype=np.float32, order="C", copy=None)  # not ascontiguousarray: it makes 0-d arrays 1-d
    u = a.view(np.uint32)
    r = ((u + (np.uint32(0x7FFF) + ((u >> 16) & 1))) & np.uint32(0xFFFF0000)).view(np.float32)
    return np.where(np.isnan(a), a, r)


def to_storage(a: np.ndarray, dt: DType) -> np.ndarray:
    """Convert computed values to the storage of ``dt`` (rounding for the 16-bit floats)."""
    if dt is bfloat16:
        return round_bf16(a)
    return np.asarray(a, dtype=dt.np)
