"""The graph: hash-consing, constants by content, input validation, reprs, and building never computes."""

from __future__ import annotations

import math
import sys
import tracemalloc

import numpy as np
import pytest

import luminal as lm
from luminal.backends.cpu import compiled
from luminal.backends.reference import interpreter as reference


# hash-consing -------------------------------------------------------------------------------------
def test_same_op_same_inputs_same_node():
    g = lm.Graph()
    a = g.input("a", ("B", 3))
    b = g.input("b", ("B", 3))
    assert (a + b).node is (a + b).node
    assert (a * b).node is (a * b).node
    assert a.exp().node is a.exp().node
    assert a.sum(1).node is a.sum(1).node
    assert (a @ b.T).node is (a @ b.T).node
    n = len(g.nodes)
    for _ in range(3):
        ((a + b) * a).softmax(-1).sum(1)
    m = len(g.nodes)
    ((a + b) * a).softmax(-1).sum(1)
    assert len(g.nodes) == m and m > n  # the second identical build adds nothing


def test_same_views_share_nodes_different_views_do_not():
    g = lm.Graph()
    a = g.input("a", (3, 3))
    b = g.input("b", (3, 3))
    assert (a.T + b).node is (a.T + b).node
    assert (a.T + b).node is not (a + b).node
    assert (a[1:] + b[1:]).node is (a[1:] + b[1:]).node
    assert (a[1:] + b[1:]).node is not (a[:2] + b[:2]).node
    assert a.sum(0).node is not a.sum(1).node
    assert a.exp().node is not a.sin().node


def test_distinct_inputs_are_distinct_nodes():
    g = lm.Graph()
    a = g.input("a", (3,))
    b = g.input("b", (3,))
    assert a.node is not b.node
    assert (a + 1).node is not (b + 1).node


def test_graph_tensors_are_hashable_by_identity():
    g = lm.Graph()
    a = g.input("a", (3,))
    d = {a: 1}
    assert d[a] == 1


# constants --------------------------------------------------------------------------------------------
def test_constants_hashed_by_content():
    g = lm.Graph()
    c1 = g.constant(np.arange(6, dtype=np.float32).reshape(2, 3))
    c2 = g.constant(np.arange(6, dtype=np.float32).reshape(2, 3))
    assert c1.node is c2.node
    assert len(g.constants) == 1
    assert g.constant(np.arange(6, dtype=np.float32)).node is not c1.node  # same bytes, other shape
    assert g.constant(np.arange(6, dtype=np.int32).reshape(2, 3)).node is not c1.node  # other dtype
    c3 = g.constant(np.arange(6, dtype=np.float32).reshape(2, 3) + 1)
    assert c3.node is not c1.node
    # a non-contiguous array with the same values is the same constant
    t = np.arange(6, dtype=np.float32).reshape(3, 2).T
    assert not t.flags.c_contiguous
    assert g.constant(np.ascontiguousarray(t)).node is g.constant(t).node


def test_scalar_constants():
    g = lm.Graph()
    assert g.constant(1.0).node is g.constant(1.0).node
    assert g.constant(1.0).node is not g.constant(1).node  # float32 vs int32
    assert g.constant(1).dtype is lm.int32 and g.constant(1.0).dtype is lm.float32
    assert g.constant(True).dtype is lm.bool
    assert g.constant(1, lm.float32).node is g.constant(1.0).node
    assert g.constant(0.0).node is not g.constant(-0.0).node
    assert g.constant(math.nan).node is g.constant(math.nan).node
    assert g.constant(math.inf).node is g.constant(math.inf).node
    assert g.constant(lm.sym("S") + 1).node is g.constant(1 + lm.sym("S")).node
    assert g.constant(lm.sym("S")).node is not g.constant(lm.sym("T")).node


def test_signed_zero_constants_compute_differently(backend):
    g = lm.Graph()
    x = g.input("x", (1,))
    ypos = x * 0 + g.constant(0.0)
    yneg = x * 0 + g.constant(-0.0)
    f = lm.compile([1 / g.constant(0.0), 1 / g.constant(-0.0)], backend=backend)
    pos, neg = f()
    assert pos == np.inf and neg == -np.inf
    assert ypos.node is not yneg.node


def test_pad_values_are_part_of_a_views_identity(backend):
    """A view padded with -0.0 must not be merged with one padded with 0.0 (they compare == )."""
    g = lm.Graph()
    a = g.input("a", (2,))
    p0 = 1 / a.pad((0, 1), 0.0)
    pn = 1 / a.pad((0, 1), -0.0)
    assert p0.node is not pn.node
    assert (1 / a.pad((0, 1), 0.0)).node is p0.node
    f = lm.compile([p0, pn], backend=backend)
    o0, on = f(a=np.ones(2, np.float32))
    assert o0[-1] == np.inf and on[-1] == -np.inf


def test_nan_padding_is_hash_consed():
    g = lm.Graph()
    a = g.input("a", (2,))
    assert (a.pad((1, 1), math.nan) + 1).node is (a.pad((1, 1), math.nan) + 1).node


def test_constant_is_copied_at_build_time(backend):
    g = lm.Graph()
    arr = np.ones(3, np.float32)
    c = g.constant(arr)
    arr[0] = 99.0  # changing the caller's array afterwards changes nothing
    np.testing.assert_array_equal(lm.compile(c * 1, backend=backend)(), np.ones(3, np.float32))
    assert g.constant(np.ones(3, np.float32)).node is c.node  # and it is still keyed by its content


def test_constant_dtypes():
    g = lm.Graph()
    assert g.constant(np.ones(2, np.float64)).dtype is lm.float64  # numpy arrays keep their dtype
    assert g.constant(np.ones(2, np.float16)).dtype is lm.float16
    assert g.constant(np.arange(3)).dtype is lm.int32  # the one integer type
    assert g.constant(np.arange(3, dtype=np.uint8)).dtype is lm.int32
    assert g.constant([1, 2]).dtype is lm.int32  # Python lists: torch.tensor's defaults
    assert g.constant([1.0, 2.0]).dtype is lm.float32
    assert g.constant([True, False]).dtype is lm.bool
    assert g.constant([1.0, 2.0], lm.float64).dtype is lm.float64
    assert g.constant(np.ones(2), lm.bfloat16).dtype is lm.bfloat16
    with pytest.raises(ValueError, match="do not fit in int32"):
        g.constant(np.array([2**40]))
    with pytest.raises(ValueError, match="does not fit in int32"):
        g.constant(2**40)
    with pytest.raises(TypeError, match="constant"):
        g.constant(["a", "b"])


def test_int_scalar_overflow_in_an_op_points_at_the_call():
    g = lm.Graph()
    i = g.input("i", (3,), dtype=lm.int32)
    with pytest.raises(ValueError) as e:
        line = sys._getframe().f_lineno; i + 2**40
    msg = str(e.value)
    assert "does not fit in int32" in msg and f"{__file__}:{line}" in msg


def test_bfloat16_constants_are_rounded(backend):
    g = lm.Graph()
    c = g.constant(np.array([1 + 2**-10, 3.14159], np.float32), lm.bfloat16)
    out = lm.compile(c * 1, backend=backend)()
    assert out.dtype == np.float32
    assert np.all(out.view(np.uint32) & 0xFFFF == 0)
    assert out[0] == 1.0


# inputs -------------------------------------------------------------------------------------------
def test_input_name_validation():
    g = lm.Graph()
    for bad in ["1x", "x y", "", "a-b", "x.y"]:
        with pytest.raises(ValueError, match="identifier"):
            g.input(bad, (3,))
    with pytest.raises(ValueError, match="identifier"):
        g.input(3, (3,))
    g.input("x", (3,))
    with pytest.raises(ValueError, match="'x' is already defined"):
        g.input("x", (4,))
    g.input("_private2", (1,))
    assert list(g.inputs) == ["x", "_private2"]


def test_input_shape_validation():
    g = lm.Graph()
    with pytest.raises(ValueError, match="negative dim"):
        g.input("a", (3, -1))
    with pytest.raises(TypeError, match="True"):
        g.input("b", (True,))
    with pytest.raises(TypeError, match="float"):
        g.input("c", (2.0,))
    with pytest.raises(ValueError, match="'B\\+1' is not an identifier"):
        g.input("d", ("B+1",))
    assert g.input("e", 5).shape == (5,)  # a bare int is a 1-d shape
    assert g.input("f", "S").shape == (lm.sym("S"),)
    assert g.input("h", ()).shape == ()
    assert g.input("k", (lm.sym("S") + 1, np.int64(2))).shape == (lm.sym("S") + 1, 2)
    assert type(g.input("m", (np.int64(2),)).shape[0]) is int
    assert not g.inputs.get("a")  # failed inputs are not registered


def test_input_dtypes():
    g = lm.Graph()
    assert g.input("a", (2,)).dtype is lm.float32
    assert g.input("b", (2,), dtype="int32").dtype is lm.int32
    assert g.input("c", (2,), dtype=np.float16).dtype is lm.float16
    assert g.input("d", (2,), dtype=bool).dtype is lm.bool
    assert g.input("e", (2,), dtype=lm.bfloat16).dtype is lm.bfloat16


# reprs ------------------------------------------------------------------------------------------------
def test_reprs():
    g = lm.Graph()
    assert repr(g) == "Graph(0 nodes, inputs=[])"
    a = g.input("a", ("B", 3))
    b = g.input("b", (3,), dtype=lm.int32)
    assert repr(g) == "Graph(2 nodes, inputs=['a', 'b'])"
    assert repr(a.node) == "%0 = Input(a) (B, 3) float32"
    assert repr(b.node) == "%1 = Input(b) (3,) int32"
    assert repr(a) == "GraphTensor((B, 3), float32, node=Input#0)"
    s = a.sum(1)
    assert repr(s) == f"GraphTensor((B,), float32, node=SumReduce#{s.node.id})"
    assert f"Graph({len(g.nodes)} nodes" in repr(g)


# building never computes -----------------------------------------------------------------------------
@pytest.fixture
def no_execution(monkeypatch):
    def boom(*a, **k):
        raise AssertionError("the graph was executed while building")

    monkeypatch.setattr(reference.ReferenceInterpreter, "__call__", boom)
    monkeypatch.setattr(reference.ReferenceInterpreter, "_eval", boom)
    monkeypatch.setattr(compiled.CpuProgram, "__call__", boom)


def test_building_huge_graphs_allocates_nothing(no_execution):
    tracemalloc.start()
    g = lm.Graph()
    x = g.input("x", ("B", "S", 10**6))
    w = g.input("w", (10**6, 10**6))
    h = (x @ w).relu()
    y = h.softmax(-1).sum(axis=1, keepdim=True) + g.ones((10**6,))
    z = lm.cat([y, y], 1).reshape("B", -1).mean(1)
    big = g.zeros((10**9, 10**9)) + g.arange(10**9).float()
    e = g.eye(10**7).sum()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 20 * 2**20  # nothing near the tensors' sizes was allocated
    assert z.shape == (lm.sym("B"),) and big.shape == (10**9, 10**9) and e.shape == ()
    assert h.shape == (lm.sym("B"), lm.sym("S"), 10**6)


def test_a_compiled_graph_runs_only_when_called(no_execution):
    g = lm.Graph()
    x = g.input("x", ("B", 4))
    f = lm.compile((x * 2).sum(1))  # compiling does not run it either
    assert f.input_names == ["x"]
    with pytest.raises(AssertionError, match="executed"):
        f(x=np.ones((2, 4), np.float32))
