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


# torch's other names for the dtypes (``torch.half``, ``torch.double``, ``x.to("long")``: int32, luminal's one int)
_ALIASES = {"bool_": "bool", "half": "float16", "float": "float32", "double": "float64", "int": "int32",
            "long": "int32"}


def as_dtype(x) -> DType:
    """Accept an lm dtype, a numpy dtype/type, a Python type (``float`` is float64 and ``int`` int32, as
    torch's and numpy's float64/int64), or a name (also torch's ``"half"``, ``"float"``, ``"double"``,
    ``"int"``, ``"long"``)."""
    if isinstance(x, DType):
        return x
    if isinstance(x, str):
        try:
            return _by_name(_ALIASES.get(x, x))
        except KeyError:
            raise TypeError(_unsupported(f"unknown dtype {x!r}", x)) from None
    if x is bool:
        return bool_
    if x is int:
        return int32
    if x is float:
        return float64
    if type(x).__module__ == "torch":  # (torch.float16: luminal takes its own dtypes, lm.float16)
        name = str(x).removeprefix("torch.")
        if name in _NAMES:
            raise TypeError(f"{x} is a torch dtype; use luminal's own (lm.{name}), one of {list(_NAMES)}")
        raise TypeError(_unsupported(f"{x} is a torch dtype luminal does not have", name))
    try:
        npd = np.dtype(x)
    except TypeError:
        raise TypeError(_unsupported(f"unknown dtype {x!r}", "")) from None
    for d in (float16, float32, float64, int32, bool_):
        if d.np == npd:
            return d
    raise TypeError(_unsupported(f"dtype {npd} is not supported", npd.name))


_NAMES = {d.name: d for d in ALL}


def _unsupported(what: str, name: str) -> str:
    """The error for a dtype luminal lacks: the dtypes it has, and for another integer type
    (int64, uint8...) that int32 is its one integer type."""
    hint = ""
    if name.startswith(("int", "uint")) or name in ("long", "short"):
        hint = " (luminal's one integer type is int32: x.long() and x.int() give int32)"
    return f"{what}{hint}; use one of {list(_NAMES)}"


def promote(a: DType, b: DType) -> DType:
    """Result dtype of a binary op between two tensors."""
    if a is b:
        return a
    if a.kind != b.kind:
        return a if _RANK[a.kind] > _RANK[b.kind] else b
    if {a, b} == {float16, bfloat16}:
        return float32
    return a if a.bits >= b.bits else b


def promote_types(type1, type2) -> DType:
    """torch.promote_types: the dtype two tensors of these dtypes promote to (``lm.promote_types``).

    Args:
        type1: a dtype (an lm dtype, a numpy dtype or a name).
        type2: another.
    """
    return promote(as_dtype(type1), as_dtype(type2))


class finfo:  # noqa: N801 - torch's name
    """torch.finfo: a float dtype's limits (``lm.finfo(lm.bfloat16).eps``), as Python floats.

    Its attributes are torch's: ``bits``, ``eps``, ``max``, ``min``, ``tiny`` (= ``smallest_normal``),
    ``resolution`` and ``dtype`` (the name).

    Args:
        type: a float dtype (default float32).
    """

    def __init__(self, type=None):  # noqa: A002 - torch's name
        d = float32 if type is None else as_dtype(type)
        if not d.is_float:
            raise TypeError(f"finfo: {d.name} is not a float dtype (iinfo is for integers)")
        if d is bfloat16:  # (8 bits of exponent as float32's, 8 of significand)
            self.eps, self.max, self.tiny, self.resolution = 2.0**-7, float.fromhex("0x1.fep127"), 2.0**-126, 0.01
        else:
            f = np.finfo(d.np)
            self.eps, self.max, self.tiny = float(f.eps), float(f.max), float(f.tiny)
            self.resolution = 10.0 ** -int(f.precision)  # (as torch's: 0.001, not float16's nearest to it)
        self.bits, self.min, self.smallest_normal, self.dtype = d.bits, -self.max, self.tiny, d.name

    def __repr__(self):
        return (f"finfo(resolution={self.resolution}, min={self.min:g}, max={self.max:g}, eps={self.eps:g}, "
                f"smallest_normal={self.tiny:g}, tiny={self.tiny:g}, dtype={self.dtype})")


class iinfo:  # noqa: N801 - torch's name
    """torch.iinfo: an integer (or bool) dtype's limits (``lm.iinfo(lm.int32).max``).

    Its attributes are torch's: ``bits``, ``max``, ``min`` and ``dtype`` (the name).

    Args:
        type: int32 (luminal's one integer type) or bool.
    """

    def __init__(self, type):  # noqa: A002 - torch's name
        d = as_dtype(type)
        if d.is_float:
            raise TypeError(f"iinfo: {d.name} is a float dtype (finfo is for floats)")
        self.bits, self.dtype = d.bits, d.name
        self.min, self.max = (0, 1) if d is bool_ else (int(np.iinfo(d.np).min), int(np.iinfo(d.np).max))

    def __repr__(self):
        return f"iinfo(min={self.min}, max={self.max}, dtype={self.dtype})"


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
