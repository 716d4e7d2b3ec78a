"""The padding layers (``nn.ZeroPad2d``, ``nn.ReflectionPad1d``, ...) against torch's: values and input
gradients (the parity harness), the ``padding`` torch stores, the empty ``state_dict``, and the errors
for bad arguments and inputs. ``F.pad``'s modes themselves are tested with the other functionals."""

from __future__ import annotations

import pytest
import torch
from parity import check, rand

import luminal as lm
from luminal import nn

pytestmark = pytest.mark.usefixtures("one_torch_thread")
KINDS = ("Zero", "Constant", "Reflection", "Replication", "Circular")


def _make(m, kind: str, n: int, padding):
    cls = getattr(m, f"{kind}Pad{n}d")
    return cls(padding, 1.5) if kind == "Constant" else cls(padding)


# (n, padding, input shape): an int, and a tuple with a different amount on every side
CASES = [(1, 2, (2, 3, 4)), (1, (1, 2), (3, 4)), (2, 1, (1, 2, 3, 3)), (2, (0, 2, 1, 2), (2, 3, 4)),
         (3, 1, (1, 1, 2, 2, 3)), (3, (1, 0, 0, 1, 1, 2), (2, 3, 2, 3))]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("n,padding,shape", CASES, ids=[f"{n}d-{p}" for n, p, _ in CASES])
def test_padding_layer(kind, n, padding, shape, backend):
    ours, theirs = _make(nn, kind, n, padding), _make(torch.nn, kind, n, padding)
    assert ours.padding == theirs.padding
    assert repr(ours) == repr(theirs)
    check(ours, [rand(shape)], torch_op=theirs, backend=backend)


@pytest.mark.parametrize("n", [1, 2, 3])
def test_constant_and_zero_pad_crop_and_take_any_rank(n, backend):
    """Negative amounts crop, as torch's; the constant modes pad the last dims of any rank."""
    padding = (-1, 2, 1, -1, 0, 1)[:2 * n]
    shape = {1: (4,), 2: (2, 3, 4), 3: (1, 2, 3, 3, 4, 2)}[n]
    for kind in ("Zero", "Constant"):
        check(_make(nn, kind, n, padding), [rand(shape)], torch_op=_make(torch.nn, kind, n, padding), backend=backend)


def test_state_dict_is_empty_as_torch():
    for kind in KINDS:
        ours, theirs = _make(nn, kind, 2, 1), _make(torch.nn, kind, 2, 1)
        assert list(ours.state_dict()) == list(theirs.state_dict()) == []
        assert not list(ours.parameters())


def test_constructor_errors():
    with pytest.raises(TypeError, match=r"^ZeroPad2d: padding must be an int or a tuple of 4 ints, got \(1, 2\)"):
        nn.ZeroPad2d((1, 2))
    with pytest.raises(TypeError, match=r"^ReflectionPad1d: padding must be an int or a tuple of 2 ints, got 1.5"):
        nn.ReflectionPad1d(1.5)
    with pytest.raises(TypeError, match="^CircularPad3d: padding must be an int or a tuple of 6 ints"):
        nn.CircularPad3d((1, 1, 1, 1, 1, True))
    assert nn.ReplicationPad2d((1, -1, 0, 0)).padding == (1, -1, 0, 0)  # negative amounts crop, as torch's
    with pytest.raises(TypeError, match="^ConstantPad1d: value must be a number, got NoneType"):
        nn.ConstantPad1d(1, None)
    with pytest.raises(TypeError, match="value"):
        nn.ConstantPad2d(1)  # (value has no default, as torch's)


def test_forward_errors():
    g = lm.Graph()
    with pytest.raises(ValueError, match=r"^ReflectionPad2d\(\(1, 1, 1, 1\)\): expected input of shape \(C, H, W\) "
                                         r"or \(N, C, H, W\), got \(3, 4\)"):
        nn.ReflectionPad2d(1)(g.input("a", (3, 4)))
    with pytest.raises(ValueError, match="^CircularPad1d.*expected input of shape"):
        nn.CircularPad1d(1)(g.input("b", (1, 2, 3, 4)))
    with pytest.raises(ValueError, match=r"^pad: padding \(3, 3\) is invalid for dim 1 of size 3 in mode 'reflect'"):
        nn.ReflectionPad1d(3)(g.input("c", (2, 3)))
    with pytest.raises(ValueError, match=r"^pad: pad \(1, 1, 1, 1\) must have an even length of at most 2 \* ndim"):
        nn.ZeroPad2d(1)(g.input("d", (3,)))
