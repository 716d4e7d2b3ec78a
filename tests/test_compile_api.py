"""``lm.compile``: the call contract (inputs by name, outputs as fresh arrays, one callable for every
binding of the symbolic dims, bfloat16 carried in float32 arrays)."""

from __future__ import annotations

import numpy as np
import torch

import luminal as lm
from luminal.core.dtype import round_bf16

f32 = np.float32
rng = np.random.default_rng(0)


def test_single_output_returns_an_array_and_a_list_a_tuple(backend):
    g = lm.Graph()
    x = g.input("x", (2, 3))
    f = lm.compile(x * 2, backend=backend)
    out = f(x=np.ones((2, 3), f32))
    assert type(out) is np.ndarray and out.shape == (2, 3) and out.dtype == f32
    out = lm.compile([x * 2], backend=backend)(x=np.ones((2, 3), f32))  # a list of one: a tuple of one
    assert type(out) is tuple and len(out) == 1 and type(out[0]) is np.ndarray and out[0].shape == (2, 3)
    (y,) = lm.compile((x + 1,), backend=backend)(x=np.ones((2, 3), f32))  # any sequence
    np.testing.assert_array_equal(y, np.full((2, 3), 2, f32))


def test_several_outputs_return_a_tuple(backend):
    g = lm.Graph()
    x = g.input("x", (2, 3))
    f = lm.compile([x * 2, x.sum(1), (x > 0)], backend=backend)
    out = f(x=np.arange(6, dtype=f32).reshape(2, 3))
    assert type(out) is tuple and len(out) == 3
    assert all(type(o) is np.ndarray for o in out)
    np.testing.assert_array_equal(out[0], np.arange(6, dtype=f32).reshape(2, 3) * 2)
    np.testing.assert_array_equal(out[1], [3, 12])
    assert out[2].dtype == np.bool_
    out = lm.compile((t for t in (x, x + 1)), backend=backend)(x=np.zeros((2, 3), f32))  # any iterable
    assert len(out) == 2


def test_0d_outputs_are_0d_arrays(backend):
    g = lm.Graph()
    x = g.input("x", (4,))
    s, m, i = lm.compile([x.sum(), x.mean(), x.argmax()], backend=backend)(x=np.arange(4, dtype=f32))
    assert type(s) is np.ndarray and s.shape == () and s == 6
    assert m.shape == () and m == 1.5
    assert i.shape == () and i.dtype == np.int32 and i == 3


def test_one_callable_two_bindings(backend):
    g = lm.Graph()
    a = g.input("a", ("B", 3, 4))
    w = g.input("w", (4, 5))
    y = (a @ w).relu().sum(-1)
    f = lm.compile(y, backend=backend)
    W = rng.standard_normal((4, 5)).astype(f32)
    for b in (2, 7, 2, 0):
        A = rng.standard_normal((b, 3, 4)).astype(f32)
        out = f(a=A, w=W)
        assert out.shape == (b, 3)
        np.testing.assert_allclose(out, np.maximum(A @ W, 0).sum(-1), rtol=1e-5, atol=1e-5)


def test_derived_symbolic_dims(backend):
    g = lm.Graph()
    x = g.input("x", ("S",))
    y = g.input("y", (lm.sym("S") + 1,))
    z = g.input("z", (lm.sym("S") * lm.sym("T"),))  # T is solved once S is known
    f = lm.compile([lm.cat([x, y]), z.reshape("S", "T").sum(0)], backend=backend)
    for s, t in ((2, 3), (5, 1)):
        X, Y = np.arange(s, dtype=f32), np.arange(s + 1, dtype=f32)
        Z = np.arange(s * t, dtype=f32)
        c, zs = f(x=X, y=Y, z=Z)
        np.testing.assert_array_equal(c, np.concatenate([X, Y]))
        np.testing.assert_array_equal(zs, Z.reshape(s, t).sum(0))


def test_outputs_are_fresh_arrays(backend):
    g = lm.Graph()
    x = g.input("x", (3,))
    c = g.constant(np.arange(3, dtype=f32))
    f = lm.compile([x, x * 1, c, x], backend=backend)
    X = np.ones(3, f32)
    o = f(x=X)
    assert all(a.flags.writeable and a.flags.c_contiguous for a in o)
    assert not any(np.shares_memory(a, X) for a in o)
    assert not np.shares_memory(o[0], o[3])  # the same tensor twice: two arrays
    for a in o:
        a[:] = 99
    assert np.all(X == 1)  # the input is untouched
    o2 = f(x=X)  # and the next call is unaffected, constants included
    np.testing.assert_array_equal(o2[0], X)
    np.testing.assert_array_equal(o2[2], np.arange(3, dtype=f32))


def test_inputs_are_not_modified(backend):
    g = lm.Graph()
    x = g.input("x", (2, 3))
    f = lm.compile([x.T.contiguous(), x.softmax(-1), x[:, ::-1]], backend=backend)
    X = rng.standard_normal((2, 3)).astype(f32)
    keep = X.copy()
    f(x=X)
    np.testing.assert_array_equal(X, keep)


def test_non_contiguous_inputs(backend):
    g = lm.Graph()
    x = g.input("x", (3, 2))
    f = lm.compile(x * 1, backend=backend)
    X = np.arange(6, dtype=f32).reshape(2, 3).T  # a transposed view
    np.testing.assert_array_equal(f(x=X), X)


def test_bfloat16_inputs_and_outputs(backend):
    g = lm.Graph()
    h = g.input("h", (64,), dtype=lm.bfloat16)
    y = h * 3 + 0.1
    s = (h * h).sum()
    f = lm.compile([y, s, h], backend=backend)
    H = round_bf16(rng.standard_normal(64).astype(f32))
    oy, os_, oh = f(h=H)
    for o in (oy, os_, oh):
        assert o.dtype == f32
        assert np.all(o.view(np.uint32) & 0xFFFF == 0), "not bfloat16-exact"
    np.testing.assert_array_equal(oh, H)
    th = torch.from_numpy(H).to(torch.bfloat16)
    np.testing.assert_array_equal(oy, (th * 3 + 0.1).float().numpy())
    np.testing.assert_allclose(os_, (th * th).sum().float().numpy(), rtol=1.6e-2)


def test_bfloat16_inputs_that_are_not_exact_are_rounded(backend):
    g = lm.Graph()
    h = g.input("h", (3,), dtype=lm.bfloat16)
    # below half an ulp (2**-7 at 1), a tie to even (down), a tie to even (up)
    H = np.array([1 + 2**-10, 1 + 2**-8, 1 + 3 * 2**-8], f32)
    out = lm.compile(h, backend=backend)(h=H)
    assert np.all(out.view(np.uint32) & 0xFFFF == 0)
    np.testing.assert_array_equal(out, np.array([1.0, 1.0, 1 + 2**-6], f32))
    np.testing.assert_array_equal(out, torch.from_numpy(H).to(torch.bfloat16).float().numpy())


def test_only_needed_inputs_are_required(backend):
    g = lm.Graph()
    x = g.input("x", (2,))
    g.input("unused", ("U",))
    f = lm.compile(x + 1, backend=backend)
    assert f.input_names == ["x"]
    np.testing.assert_array_equal(f(x=np.zeros(2, f32)), [1, 1])
    # naming another input of the same graph is allowed (it is not needed by this output)
    np.testing.assert_array_equal(f(x=np.zeros(2, f32), unused=np.zeros(5, f32)), [1, 1])


def test_no_inputs(backend):
    g = lm.Graph()
    f = lm.compile(g.arange(4) * 2, backend=backend)
    assert f.input_names == []
    np.testing.assert_array_equal(f(), [0, 2, 4, 6])


def test_an_input_may_be_named_self(backend):
    g = lm.Graph()
    x = g.input("self", (2,))
    f = lm.compile(x * 2, backend=backend)
    np.testing.assert_array_equal(f(self=np.ones(2, f32)), [2, 2])
    np.testing.assert_array_equal(f(**{"self": np.ones(2, f32)}), [2, 2])


def test_repr_and_names(backend):
    g = lm.Graph()
    a = g.input("a", (2,))
    b = g.input("b", (2,))
    f = lm.compile([a + b], backend=backend)
    assert f.backend == backend
    assert sorted(f.input_names) == ["a", "b"]
    assert repr(f).startswith(f"Compiled(backend={backend!r}, inputs=")


def test_output_dtypes(backend):
    g = lm.Graph()
    x = g.input("x", (3,), dtype=lm.float16)
    i = g.input("i", (3,), dtype=lm.int32)
    d = g.input("d", (3,), dtype=lm.float64)
    f = lm.compile([x * 2, i * 2, d * 2, i > 1], backend=backend)
    o = f(x=np.ones(3, np.float16), i=np.arange(3, dtype=np.int32), d=np.ones(3))
    assert [a.dtype for a in o] == [np.float16, np.int32, np.float64, np.bool_]


def test_the_compiler_package_is_reachable_beside_the_compile_function():
    """``lm.compile`` is the user's function; the compiler package is ``luminal.compiler``, so the
    README's paths (``luminal.compiler.errors.CompileError``, ``luminal.compiler.egraph.Budget``) work
    from ``import luminal as lm``."""
    from luminal.compiler.egraph import Budget
    from luminal.compiler.errors import CompileError

    assert callable(lm.compile)
    assert lm.compiler.errors.CompileError is CompileError
    assert lm.compiler.egraph.Budget is Budget
