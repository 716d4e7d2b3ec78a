"""Graph-free factories with torch's spellings (``lm.zeros(2, 3, graph=g)``, ``lm.arange(5, graph=g)``,
the ``*_like`` ones taking the graph from their tensor) beside the graph-first forms (``lm.arange(g, 5)``,
``g.zeros(...)``), and numpy arrays as operands (constants, promoted as torch promotes
``torch.from_numpy(a)``)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import luminal as lm

f32 = np.float32


def _run(outs, **inputs):
    return lm.compile(list(outs), backend="cpu")(**inputs)


def test_factories_every_spelling_matches_torch():
    g = lm.Graph()
    x = g.input("x", (2, 3))
    cases = [
        (lm.arange(5, graph=g), torch.arange(5)),
        (lm.arange(g, 5), torch.arange(5)),
        (g.arange(2, 8, 2), torch.arange(2, 8, 2)),
        (lm.arange(1, 4, graph=g, dtype=lm.float32), torch.arange(1, 4, dtype=torch.float32)),
        (lm.arange(0.5, 2.0, 0.5, graph=g), torch.arange(0.5, 2.0, 0.5)),
        (lm.arange(g, 0, 5, 2, lm.float32), torch.arange(0, 5, 2, dtype=torch.float32)),
        (lm.zeros(2, 3, graph=g), torch.zeros(2, 3)),
        (lm.zeros((2, 3), graph=g), torch.zeros((2, 3))),
        (lm.zeros(g, 2, 3), torch.zeros(2, 3)),
        (g.zeros((2, 3), lm.int32), torch.zeros(2, 3, dtype=torch.int32)),
        (lm.ones(4, graph=g, dtype=lm.int32), torch.ones(4, dtype=torch.int32)),
        (g.ones(3, dtype=lm.bool), torch.ones(3, dtype=torch.bool)),
        (lm.full((2, 2), 7, graph=g), torch.full((2, 2), 7, dtype=torch.int32)),
        (lm.full((2,), 1.5, graph=g, dtype=lm.float64), torch.full((2,), 1.5, dtype=torch.float64)),
        (lm.full(g, (2,), True), torch.full((2,), True)),
        (lm.eye(3, graph=g), torch.eye(3)),
        (lm.eye(3, 2, graph=g, dtype=lm.int32), torch.eye(3, 2, dtype=torch.int32)),
        (lm.eye(g, 2), torch.eye(2)),
        (g.eye(3, dtype=lm.bool), torch.eye(3, dtype=torch.bool)),
        (lm.zeros_like(x), torch.zeros(2, 3)),
        (lm.ones_like(x, dtype=lm.int32), torch.ones(2, 3, dtype=torch.int32)),
        (lm.full_like(x, 2.5), torch.full((2, 3), 2.5)),
    ]
    got = _run([t for t, _ in cases], x=np.ones((2, 3), f32))
    for i, (out, (t, want)) in enumerate(zip(got, cases, strict=True)):
        want = want.numpy()
        if want.dtype == np.int64:  # luminal's one integer type is int32
            want = want.astype(np.int32)
        assert out.dtype == want.dtype, (i, t)
        np.testing.assert_array_equal(out, want, err_msg=f"case {i}")


@pytest.mark.parametrize("call", [
    lambda: lm.arange(5), lambda: lm.zeros(2, 3), lambda: lm.ones((2,)), lambda: lm.full((2,), 1.0),
    lambda: lm.eye(3),
], ids=["arange", "zeros", "ones", "full", "eye"])
def test_a_factory_without_a_graph(call):
    """Outside any module call it makes a host tensor, whose values are known now (``nn.Parameter(
    lm.ones(n))`` in a module's ``__init__``; tests/frontend/test_host_tensors.py); inside a module
    called on no graph tensor it fails naming itself, the module, and ``graph=``."""
    from luminal import nn

    t = call()
    assert t.graph.host and np.asarray(t).shape == t.shape

    class Make(nn.Module):
        def forward(self, n):
            return call()

    with pytest.raises(TypeError, match="graph=") as e:
        Make()(3)
    assert str(e.value).split(":")[0] in {"arange", "zeros", "ones", "full", "eye"}
    assert "Make() was called on no GraphTensor (int 3)" in str(e.value)


def test_factory_graph_given_twice_must_agree():
    g, h = lm.Graph(), lm.Graph()
    assert lm.zeros(g, 2, graph=g).graph is g
    with pytest.raises(ValueError, match="zeros"):
        lm.zeros(g, 2, graph=h)
    with pytest.raises(TypeError, match="graph must be a luminal Graph"):
        lm.ones(2, graph="g")


NUMPY_OPERANDS = [np.linspace(-2, 2, 6), np.linspace(-2, 2, 6).astype(f32), np.arange(1, 7),
                  np.array([True, False] * 3), np.linspace(1, 2, 6).astype(np.float16)]
TORCH_DTYPES = {lm.float32: torch.float32, lm.float16: torch.float16, lm.int32: torch.int32}


@pytest.mark.parametrize("a", NUMPY_OPERANDS, ids=lambda a: str(a.dtype))
@pytest.mark.parametrize("dtype", [lm.float32, lm.float16, lm.int32], ids=lambda d: d.name)
@pytest.mark.parametrize("op", ["add", "mul", "sub", "lt"])
def test_numpy_operands_both_orders_promote_as_torch_from_numpy(op, dtype, a):
    g = lm.Graph()
    x = g.input("x", (6,), dtype=dtype)
    fn = {"add": lambda p, q: p + q, "mul": lambda p, q: p * q, "sub": lambda p, q: p - q,
          "lt": lambda p, q: p < q}[op]
    if op == "sub" and a.dtype == bool:
        pytest.skip("torch: subtraction with a bool tensor is an error")
    xv = np.array([0.5, -1, 2, 3, -4, 1]).astype(lm.float16.np if dtype is lm.float16 else dtype.np)
    tx, ta = torch.from_numpy(xv), torch.from_numpy(a)
    for got, want in ((fn(x, a), fn(tx, ta)), (fn(a, x), fn(ta, tx))):
        want_name = str(want.dtype).removeprefix("torch.").replace("int64", "int32")  # luminal's one int type
        assert got.dtype.name == want_name, (got.dtype, want.dtype)
    out = _run([fn(x, a), fn(a, x)], x=xv)
    np.testing.assert_allclose(out[0].astype(np.float64), fn(tx, ta).double().numpy(), rtol=1e-3)
    np.testing.assert_allclose(out[1].astype(np.float64), fn(ta, tx).double().numpy(), rtol=1e-3)


def test_numpy_operand_edge_cases():
    g = lm.Graph()
    x = g.input("x", (3,))
    assert (x + np.array(2.0)).dtype is lm.float32  # a 0-d array is a scalar, as torch's 0-dim tensors
    assert (x + np.float64(2.0)).dtype is lm.float32
    eq, ne = np.arange(3.0) == x, x != np.arange(3.0)
    assert isinstance(eq, lm.GraphTensor) and isinstance(ne, lm.GraphTensor)
    got = _run([eq, ne, x + np.ones((2, 3))], x=np.array([0, 5, 2], f32))
    np.testing.assert_array_equal(got[0], [True, False, True])
    np.testing.assert_array_equal(got[1], [False, True, False])
    assert got[2].shape == (2, 3) and got[2].dtype == np.float64  # broadcasts like a tensor operand
    with pytest.raises(TypeError, match="add: cannot combine a tensor with a numpy array of dtype <U1"):
        x + np.array(["a", "b", "c"])
    with pytest.raises(ValueError, match="cannot broadcast"):
        x + np.ones(4)
