"""torch's dtype names and utilities: ``lm.half``/``float``/``double``/``int``, the names ``"half"``,
``"double"``, ``"long"``... in ``to``/``as_dtype``, ``lm.finfo``/``lm.iinfo``, ``lm.promote_types`` and
``lm.result_type`` against torch's; a torch dtype given to luminal is a clear error."""

from __future__ import annotations

import itertools

import pytest
import torch
from parity import TORCH_DTYPE

import luminal as lm

DTYPES = [lm.bool, lm.int32, lm.float16, lm.bfloat16, lm.float32, lm.float64]


def _int32(d):
    """torch's dtype with int64 as int32, luminal's one integer type (README: where torch gives int64)."""
    return torch.int32 if d == torch.int64 else d


def test_torchs_dtype_names():
    assert (lm.half, lm.float, lm.double, lm.int, lm.long) == (lm.float16, lm.float32, lm.float64, lm.int32, lm.int32)
    g = lm.Graph()
    x = g.input("x", (2,))
    for name, d in (("half", lm.float16), ("float", lm.float32), ("double", lm.float64), ("int", lm.int32),
                    ("long", lm.int32), ("bool", lm.bool)):
        assert x.to(name).dtype is d
    with pytest.raises(TypeError, match=r"torch\.float16 is a torch dtype; use luminal's own \(lm\.float16\)"):
        x.to(torch.float16)
    with pytest.raises(TypeError, match="unknown dtype 'quad'; use one of"):
        x.to("quad")


@pytest.mark.parametrize("d", [lm.float16, lm.bfloat16, lm.float32, lm.float64])
def test_finfo_as_torchs(d):
    mine, theirs = lm.finfo(d), torch.finfo(TORCH_DTYPE[d])
    for attr in ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution"):
        assert getattr(mine, attr) == getattr(theirs, attr), attr
    assert lm.finfo().eps == torch.finfo().eps  # (the default: float32)
    with pytest.raises(TypeError, match="finfo: int32 is not a float dtype"):
        lm.finfo(lm.int32)


def test_iinfo_as_torchs():
    mine, theirs = lm.iinfo(lm.int32), torch.iinfo(torch.int32)
    assert (mine.bits, mine.min, mine.max) == (theirs.bits, theirs.min, theirs.max)
    with pytest.raises(TypeError, match="iinfo: float32 is a float dtype"):
        lm.iinfo(lm.float32)


@pytest.mark.parametrize("a,b", list(itertools.product(DTYPES, DTYPES)))
def test_promote_types_as_torchs(a, b):
    assert TORCH_DTYPE[lm.promote_types(a, b)] == torch.promote_types(TORCH_DTYPE[a], TORCH_DTYPE[b])


@pytest.mark.parametrize("d", DTYPES)
@pytest.mark.parametrize("other", [True, 3, 2.5, "0d-float64", "0d-int32", "1d-float16"])
def test_result_type_as_torchs(d, other):
    g = lm.Graph()
    x, t = g.input("x", (2,), dtype=d), torch.zeros(2, dtype=TORCH_DTYPE[d])
    if isinstance(other, str):
        shape, name = other.split("-")
        od = getattr(lm, name)
        o = g.input("o", () if shape == "0d" else (2,), dtype=od)
        ot = torch.zeros(() if shape == "0d" else (2,), dtype=TORCH_DTYPE[od])
    else:
        o, ot = other, other
    assert TORCH_DTYPE[lm.result_type(x, o)] == _int32(torch.result_type(t, ot))
    assert TORCH_DTYPE[lm.result_type(o, x)] == _int32(torch.result_type(ot, t))


def test_result_type_of_two_numbers():
    for a, b in ((1, 2), (1, 2.0), (True, False), (True, 3)):
        assert TORCH_DTYPE[lm.result_type(a, b)] == _int32(torch.result_type(torch.tensor(a), b))
