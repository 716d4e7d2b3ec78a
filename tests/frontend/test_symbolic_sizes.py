"""Symbolic sizes where torch code passes ints: slice bounds (``mask[:, :, :T, :T]``, ``x[:T - 1]``),
``narrow``'s start and length, ``view``/``reshape`` of ``x.size()``'s dims, masks built with ``T``, and
``T`` as a scalar operand. A bound that may run past its dim is checked when the program runs, before any
work, naming the op and the user's line; ``T <= 16`` while building says why it has no answer."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import luminal as lm

HERE = __file__
BACKENDS = ("reference", "cpu")


def line() -> int:
    return inspect.currentframe().f_back.f_lineno


@pytest.fixture(params=BACKENDS)
def backend(request):
    return request.param


def _mask_and_x():
    g = lm.Graph()
    x = g.input("x", ("B", "T", 4))
    mask = g.constant(np.tril(np.ones((16, 16), np.float32)))
    return g, x, mask


def test_a_static_dim_sliced_by_a_symbolic_bound(backend):
    _, x, mask = _mask_and_x()
    B, T, C = x.size()
    m = mask[:T, :T]
    assert m.shape == (T, T)
    y = (x.transpose(1, 2) @ m).sum(1) + mask[1:T + 1, 2].reshape(1, T)  # ``T + 1``: within 16 when T <= 15
    f = lm.compile(y, backend=backend)
    a = np.random.default_rng(0).standard_normal((2, 5, 4)).astype(np.float32)
    tri = np.tril(np.ones((16, 16), np.float32))
    np.testing.assert_allclose(f(x=a), (a.transpose(0, 2, 1) @ tri[:5, :5]).sum(1) + tri[1:6, 2], rtol=1e-5)


def test_a_bound_past_the_dim_fails_when_the_program_runs():
    _, x, mask = _mask_and_x()
    T = x.shape[1]
    at = line(); y = x * mask[:T, :4]
    f = lm.compile(y, backend="reference")
    assert f(x=np.ones((1, 16, 4), np.float32)).shape == (1, 16, 4)
    with pytest.raises(ValueError) as e:
        f(x=np.ones((1, 17, 4), np.float32))
    msg = str(e.value)
    assert "T=17" in msg and "getitem: slice [:T] of dim 0 (size 16) of a (16, 16) float32 tensor reads past" in msg
    assert f"at {HERE}:{at}" in msg, msg


def test_a_symbolic_dim_sliced_by_another_is_checked_too():
    g = lm.Graph()
    x, k = g.input("x", ("S", 3)), g.input("k", ("T",))
    y = x[:k.shape[0]] * 2
    f = lm.compile(y, backend="reference")
    np.testing.assert_array_equal(f(x=np.ones((5, 3), np.float32), k=np.ones(4, np.float32)), 2 * np.ones((4, 3)))
    with pytest.raises(ValueError, match=r"S=2.*T=3.*getitem: slice \[:T\] of dim 0 \(size S\)"):
        f(x=np.ones((2, 3), np.float32), k=np.ones(3, np.float32))


def test_shapes_that_provably_fit_are_not_checked():
    g = lm.Graph()
    x = g.input("x", ("B", "T"))
    T = x.shape[1]
    assert x[:, :T - 1].shape == x[:, :-1].shape and x[:, :T].shape == x.shape
    assert not g.requirements


def test_narrow_takes_symbolic_start_and_length(backend):
    g = lm.Graph()
    x = g.input("x", (2, "T", 3))
    T = x.shape[1]
    assert x.narrow(1, 0, T).shape == x.shape
    y = x.narrow(1, 1, T - 1) - x.narrow(1, 0, T - 1)
    a = np.random.default_rng(1).standard_normal((2, 6, 3)).astype(np.float32)
    np.testing.assert_allclose(lm.compile(y, backend=backend)(x=a), np.diff(a, axis=1), rtol=1e-6)
    w = g.constant(np.arange(10, dtype=np.float32))
    f = lm.compile(w.narrow(0, 2, T) * 1, backend="reference")
    np.testing.assert_array_equal(f(x=np.ones((2, 8, 3), np.float32)), np.arange(2, 10))
    with pytest.raises(ValueError, match=r"T=9.*narrow: start 2 \+ length T exceeds dim 0 of size 10"):
        f(x=np.ones((2, 9, 3), np.float32))


def test_view_and_masks_of_symbolic_sizes(backend):
    g = lm.Graph()
    x = g.input("x", ("B", "T", 4))
    B, T, C = x.size()
    heads = x.view(B, T, 2, C // 2).transpose(1, 2)  # (B, 2, T, 2)
    att = heads @ heads.transpose(-2, -1)  # (B, 2, T, T)
    causal = lm.ones(T, T, graph=g).tril().view(1, 1, T, T)
    y = att.masked_fill(causal == 0, float("-inf")).softmax(-1).view(-1, T)
    a = np.random.default_rng(2).standard_normal((2, 3, 4)).astype(np.float32)
    h = a.reshape(2, 3, 2, 2).transpose(0, 2, 1, 3)
    s = np.where(np.tril(np.ones((3, 3))) == 0, -np.inf, h @ h.transpose(0, 1, 3, 2))
    want = np.exp(s - s.max(-1, keepdims=True))
    want = (want / want.sum(-1, keepdims=True)).reshape(-1, 3)
    np.testing.assert_allclose(lm.compile(y, backend=backend)(x=a), want, rtol=1e-5, atol=1e-6)


def test_a_symbolic_size_is_a_scalar_operand():
    g = lm.Graph()
    x = g.input("x", ("B", "T"))
    T = x.shape[1]
    y = (x + T).masked_fill(x > 0, T - 1)  # T as an operand and as a fill value
    assert y.dtype is lm.float32
    got = lm.compile(y, backend="reference")(x=np.array([[0, 1, 0], [1, 0, 0]], np.float32))
    np.testing.assert_array_equal(got, [[3, 2, 3], [2, 3, 3]])


def test_comparing_a_symbolic_size_while_building_says_why_not():
    x = lm.Graph().input("x", ("B", "T"))
    t = x.shape[1]
    with pytest.raises(TypeError) as e:
        at = line(); assert t <= 16
    msg = str(e.value)
    assert msg.startswith("T <= 16: symbolic dim T has no value while the graph is built"), msg
    assert f"called at {HERE}:{at}" in msg
    with pytest.raises(TypeError, match=r"^T > 3: "):
        3 < t  # noqa: B015 - the comparison under test


def test_bad_slice_bounds_are_named():
    x = lm.Graph().input("x", (4,))
    with pytest.raises(TypeError) as e:
        at = line(); x[:1.5]
    assert str(e.value).startswith("getitem: slice bounds must be ints or symbolic sizes, got float 1.5")
    assert f"called at {HERE}:{at}" in str(e.value)
    with pytest.raises(IndexError, match=r"^narrow: start 0 \+ length 5 exceeds dim 0 of size 4"):
        x.narrow(0, 0, 5)
