"""Parameters and Buffers used as tensors, as torch code uses them: in ops, methods, operators and
functionals, joining the graph of the other operands or of the module call (``frontend/join.py``,
``frontend/state_tensor.py``, ``frontend/building.py``); and the errors when there is no graph to join."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import luminal as lm
from luminal import nn, train
from luminal.nn import functional as F

HERE = __file__


def line() -> int:
    return inspect.currentframe().f_back.f_lineno


def _param(shape, seed=0, **kw):
    return nn.Parameter(np.random.default_rng(seed).standard_normal(shape).astype(np.float32), **kw)


def test_ops_methods_operators_and_functionals_take_parameters():
    g = lm.Graph()
    x = g.input("x", ("B", 3))
    w, b, s, v = _param((4, 3), 1, name="w"), _param((4,), 2, name="b"), _param((3,), 3, name="s"), _param((3, 4), 8)
    outs = [x * s, s * x, x + s, s - x, x @ v, F.linear(x, w, b), lm.where(x > 0, x, s), lm.add(x, s),
            x.mul(s), lm.stack([x[0], s]), F.layer_norm(x, s.shape, s, s), x.masked_fill(x > s, 1.0)]
    a = np.random.default_rng(4).standard_normal((2, 3)).astype(np.float32)
    got = lm.compile(outs, backend="reference")(x=a)
    mu, var = a.mean(-1, keepdims=True), a.var(-1, keepdims=True)
    want = [a * s.data, s.data * a, a + s.data, s.data - a, a @ v.data, a @ w.data.T + b.data,
            np.where(a > 0, a, s.data), a + s.data, a * s.data, np.stack([a[0], s.data]),
            (a - mu) / np.sqrt(var + 1e-5) * s.data + s.data, np.where(a > s.data, 1.0, a)]
    for o, wv in zip(got, want):
        np.testing.assert_allclose(o, wv, rtol=1e-5, atol=1e-6)
    # one node per State and graph, the same ``.on(g)`` reads: a gradient reaches it
    assert (x * s).node.srcs[1][0] is s.on(g).node is g.state_node(s)


def test_a_module_forward_uses_its_states_directly_and_trains_them():
    class Scaled(nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = _param((3, 3), 5)
            self.register_buffer("mask", np.tril(np.ones((8, 8), np.float32)))

        def forward(self, x):
            T = x.size(1)
            y = x @ self.weight.T  # a State's method and property, in the module call's graph
            return (self.mask[:T, :T] @ y) * self.weight[0]  # indexed by a symbolic T, and by an int

    m = Scaled()
    g = lm.Graph()
    x = g.input("x", (2, "T", 3))
    y = m(x)
    assert y.shape == (2, x.shape[1], 3)
    a = np.random.default_rng(6).standard_normal((2, 5, 3)).astype(np.float32)
    want = (np.tril(np.ones((5, 5))) @ (a @ m.weight.data.T)) * m.weight.data[0]
    np.testing.assert_allclose(lm.compile(y)(x=a), want, rtol=1e-5, atol=1e-5)
    (gw,) = lm.compile(train.grad(y.sum(), [m.weight]))(x=a)
    assert gw.shape == (3, 3) and np.abs(gw).sum() > 0


def test_a_loss_takes_a_buffer_as_its_class_weight():
    g = lm.Graph()
    logits, y = g.input("logits", (4, 3)), g.input("y", (4,), dtype=lm.int32)
    weight = nn.Buffer(np.array([1.0, 2.0, 0.5], np.float32))
    a, t = np.random.default_rng(7).standard_normal((4, 3)).astype(np.float32), np.array([0, 1, 2, 1], np.int32)
    got = lm.compile([train.cross_entropy(logits, y, weight=weight), F.cross_entropy(logits, y, weight=weight)],
                     backend="reference")(logits=a, y=t)
    logp = a - np.log(np.exp(a).sum(-1, keepdims=True))
    w = weight.data[t]
    want = -(w * logp[np.arange(4), t]).sum() / w.sum()
    np.testing.assert_allclose(got, [want, want], rtol=1e-5)


def test_batch_norm_keeps_its_running_statistics_as_states():
    """``F.batch_norm``'s running statistics stay States (it updates them in place); its weight and bias
    join the graph like any operand."""
    g = lm.Graph()
    x = g.input("x", (4, 2))
    rm, rv = nn.Buffer(np.zeros(2, np.float32)), nn.Buffer(np.ones(2, np.float32))
    w, b = _param((2,), 9), _param((2,), 10)
    y = F.batch_norm(x, rm, rv, weight=w, bias=b, training=True, momentum=0.5)
    a = np.random.default_rng(11).standard_normal((4, 2)).astype(np.float32)
    got = lm.compile(y, backend="reference")(x=a)
    want = (a - a.mean(0)) / np.sqrt(a.var(0) + 1e-5) * w.data + b.data
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(rm.data, 0.5 * a.mean(0), rtol=1e-5)  # written back after the run


def test_indexing_outside_any_graph_reads_the_current_values():
    """``nn.Parameter(wpe.weight[:2])``: a new Parameter initialised from those rows (a copy), of the
    same dtype; a Buffer assigned a slice of itself keeps its registration."""
    w = nn.Parameter(np.arange(12, dtype=np.float32).reshape(6, 2), dtype=lm.bfloat16)
    p = nn.Parameter(w[:2])
    assert p.dtype is lm.bfloat16 and p.shape == (2, 2)
    np.testing.assert_array_equal(p.data, w.data[:2])
    p.data[0, 0] = 100
    assert w.data[0, 0] == 0  # a copy (torch's would share storage)
    np.testing.assert_array_equal(np.asarray(w[::2, 1]), w.data[::2, 1])

    class Holder(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("mask", np.ones((1, 4, 4), np.float32), persistent=False)

    h = Holder()
    h.mask = h.mask[:, :2, :2]
    assert isinstance(h.mask, nn.Buffer) and h.mask.shape == (1, 2, 2) and not h.mask.persistent
    assert dict(h.named_buffers())["mask"] is h.mask


def test_states_compare_by_identity_outside_elementwise_use():
    p, q = _param((2,)), _param((2,))
    assert p in [q, p] and [q, p].index(p) == 1 and {p: 1}[p] == 1
    assert (p == None) is False and p != "a"  # noqa: E711 - the comparison under test
    assert np.asarray(p) is p.data and p.device == "cpu" and bool(p)


# errors ---------------------------------------------------------------------------------------------

def _check(err, op, has=(), at=None):
    msg = str(err.value)
    assert msg.startswith(f"{op}: "), msg
    for h in has:
        assert h in msg, msg
    if at is not None:
        assert f"called at {HERE}:{at}" in msg, msg
    return msg


def test_a_state_with_no_graph_to_join_says_what_to_do():
    w = _param((3,), name="w")
    with pytest.raises(TypeError) as e:
        at = line(); w * 2
    _check(e, "mul", ["Parameter w (3,) float32 has no graph to join", "w.on(g)"], at)
    with pytest.raises(TypeError) as e:
        at = line(); F.layer_norm(w, (3,))
    _check(e, "layer_norm", ["Parameter w (3,) float32 has no graph to join"], at)
    with pytest.raises(TypeError) as e:
        at = line(); w.T  # noqa: B018 - the property under test
    _check(e, "T", ["has no graph to join"], at)


def test_an_op_error_names_the_parameter_it_read():
    g = lm.Graph()
    x = g.input("x", ("B", 3))
    w = _param((4,), name="fc.weight")
    with pytest.raises(ValueError) as e:
        at = line(); x * w
    _check(e, "mul", ["shapes (B, 3) and (4,) cannot broadcast", f"operand 1: (4,) float32 (Parameter fc.weight), "
                      f"made at {HERE}:{at}"], at)


def test_a_module_called_on_no_graph_tensor_says_so():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = _param((3,), name="w")

        def forward(self, x):
            return self.w * x if not isinstance(x, int) else self.w[:x]

    with pytest.raises(TypeError) as e:
        at = line(); Net()(np.ones((2, 3)))
    _check(e, r"Net()", ["called on no GraphTensor (ndarray (2, 3) float64)", "g.input(", "lm.compile"], at)
    with pytest.raises(TypeError) as e:  # a bare number is no data: the first State op finds no graph
        Net()(2)
    _check(e, "getitem", ["Parameter w (3,) float32 has no graph to join: Net() was called on no GraphTensor (int 2)",
                          f"called at {HERE}:", "self.w[:x]"])  # the line in forward

    class Positions(nn.Module):
        def forward(self, n):
            return lm.arange(n)

    with pytest.raises(TypeError) as e:
        Positions()(4)
    _check(e, "arange", ["has no graph to build in: Positions() was called on no GraphTensor (int 4)",
                         f"called at {HERE}:", "lm.arange(n)"])


def test_a_state_reaching_an_unwrapped_check_is_named():
    from luminal.frontend.checks import check_tensors

    w = _param((3,), name="w")
    with pytest.raises(TypeError, match=r"^op: weight must be a GraphTensor, got Parameter w \(3,\) float32 "
                                        r"\(read it into the graph with \.on\(graph\)\)"):
        check_tensors("op", weight=w)
