"""Gather and scatter_add as generated code on the CPU backend (``codegen/lowering/indexing.py``'s ``gather`` and
``scatter_add``, lowered by ``lowering.py``), checked against ``numpy_ops`` (the reference's
implementation): every dtype, the index dtypes a caller passes, repeated indices (accumulated in
order, half floats rounded once), indices out of range (the reference's IndexError, raised after the
run from the kernel's error cell), each axis, odd and empty shapes, strided and padded views, and
that no numpy gather or scatter is left in a compiled program."""

from __future__ import annotations

import numpy as np
import pytest
from kg_helpers import KG, E, L, View, rand_array

import luminal as lm
from luminal.backends.cpu import plan
from luminal.backends.cpu.parallel import Split
from luminal.codegen.lower import index_value
from luminal.core import numpy_ops as ops

DTYPES = [lm.float32, lm.float64, lm.float16, lm.bfloat16, lm.int32, lm.bool]


def _program(build, shapes):
    """``build(inputs) -> [tensors]`` compiled for the cpu backend; ``shapes``: name -> (shape, dtype)."""
    g = lm.Graph()
    ins = {n: g.input(n, s, d) for n, (s, d) in shapes.items()}
    return lm.compile(build(ins), backend="cpu")


def _run(f, **arrays) -> list:
    res = f(**arrays)
    return list(res) if isinstance(res, (tuple, list)) else [res]


def _calls(f):
    b = next(iter(f.runner.program._bindings.values()))
    return [c for f_, args in b.schedule.steps for c in (f_.parts[0] if isinstance(f_, Split) else [(f_, args)])]


def _no_numpy_indexing(f):
    funcs = [fn for fn, _ in _calls(f)]
    assert not any(fn in (ops.gather, ops.scatter_add) for fn in funcs), funcs


def _index(shape, n, seed, dtype=np.int32):
    return np.random.default_rng(seed).integers(0, n, size=shape).astype(dtype)


@pytest.mark.parametrize("d", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("axis", [0, 1, 2])
def test_gather_and_scatter_add_match_numpy(d, axis):
    """(3, 5, 4) data, an index 7 long on ``axis`` (so positions repeat) and one shorter on another
    dim: the scatter is then three kernels (copy, adds, rounding), with the full index one."""
    xs = (3, 5, 4)
    full = tuple(7 if a == axis else n for a, n in enumerate(xs))
    part = tuple(7 if a == axis else (n - 1 if a == (axis + 1) % 3 else n) for a, n in enumerate(xs))
    x, s = rand_array(xs, d, 1), rand_array(full, d, 2)
    i, j = _index(full, xs[axis], 3), _index(part, xs[axis], 4)
    f = _program(lambda t: [t["x"].gather(axis, t["i"]), t["x"].gather(axis, t["j"]),
                            t["x"].scatter_add(axis, t["i"], t["s"]), t["x"].scatter_add(axis, t["j"], t["s"])],
                 {"x": (xs, d), "s": (full, d), "i": (full, lm.int32), "j": (part, lm.int32)})
    got = f(x=x, s=s, i=i, j=j)
    cut = tuple(slice(None) if a == axis else slice(0, n) for a, n in enumerate(part))  # what j reads
    want = [ops.gather(x, i, axis), ops.gather(x[cut], j, axis), ops.scatter_add(x, i, s, axis, d),
            ops.scatter_add(x, j, s[tuple(slice(0, n) for n in part)], axis, d)]
    for gv, wv in zip(got, want):
        np.testing.assert_array_equal(gv, wv)
    _no_numpy_indexing(f)


@pytest.mark.parametrize("d", [lm.float16, lm.bfloat16], ids=lambda d: d.name)
def test_half_floats_accumulate_in_float32_and_round_once(d):
    """4096 ones added into one element: a float16 accumulator would stop at 2048 (2048 + 1 rounds
    back to 2048)."""
    x = np.zeros((1, 3), d.np)
    i = np.ones((1, 4096), np.int32)
    s = lm.core.dtype.to_storage(np.full((1, 4096), 1.0), d)
    f = _program(lambda t: [t["x"].scatter_add(1, t["i"], t["s"])],
                 {"x": ((1, 3), d), "i": ((1, 4096), lm.int32), "s": ((1, 4096), d)})
    (got,) = _run(f, x=x, i=i, s=s)
    np.testing.assert_array_equal(got, ops.scatter_add(x, i, s, 1, d))
    assert got[0, 1] == 4096


def test_int64_indices():
    x = rand_array((4, 6), lm.float32, 1)
    i = _index((4, 5), 6, 2, np.int64)
    f = _program(lambda t: [t["x"].gather(1, t["i"]), t["x"].scatter_add(1, t["i"], t["x"][:, :5])],
                 {"x": ((4, 6), lm.float32), "i": ((4, 5), lm.int32)})
    g, s = f(x=x, i=i)
    np.testing.assert_array_equal(g, ops.gather(x, i, 1))
    np.testing.assert_array_equal(s, ops.scatter_add(x, i, x[:, :5], 1, lm.float32))


def _message(idx, size, op):
    with pytest.raises(IndexError) as e:
        ops.check_index(idx, size, op)
    return str(e.value)


def _reported(err) -> str:
    """A run's index error as the backend found it: the call adds where the op was made (and called)."""
    text = str(err)
    assert " (made at " in text and "test_gather_scatter.py" in text, text
    return text.split(" (made at ")[0]


@pytest.mark.parametrize("bad", [6, -1, 100])
def test_an_index_out_of_range_raises_the_references_error(bad):
    """The first bad index in the index's order is named (as numpy_ops.check_index names it), however
    many there are; the next run, with good indices, is right (the error cell was cleared)."""
    x = rand_array((4, 6), lm.float32, 1)
    i = _index((4, 3), 6, 2)
    f = _program(lambda t: [t["x"].gather(1, t["i"]), t["x"].scatter_add(1, t["i"], t["x"][:, :3])],
                 {"x": ((4, 6), lm.float32), "i": ((4, 3), lm.int32)})
    wrong = i.copy()
    wrong[1, 2], wrong[3, 0] = bad, 7
    with pytest.raises(IndexError) as e:
        f(x=x, i=wrong)
    assert _reported(e.value) == _message(wrong, 6, "gather")
    g, s = f(x=x, i=i)
    np.testing.assert_array_equal(g, ops.gather(x, i, 1))
    np.testing.assert_array_equal(s, ops.scatter_add(x, i, x[:, :3], 1, lm.float32))
    s_only = _program(lambda t: [t["x"].scatter_add(1, t["i"], t["x"][:, :3])],
                      {"x": ((4, 6), lm.float32), "i": ((4, 3), lm.int32)})
    with pytest.raises(IndexError) as e:
        _run(s_only, x=x, i=wrong)
    assert _reported(e.value) == _message(wrong, 6, "scatter_add")
    np.testing.assert_array_equal(_run(s_only, x=x, i=i)[0], s)


@pytest.mark.parametrize("xs,idx", [((3, 0), (3, 0)), ((0, 4), (0, 2)), ((3, 4), (3, 0)), ((1, 1), (1, 1)),
                                    ((5,), (9,))], ids=str)
def test_empty_and_size_one_shapes(xs, idx):
    x = rand_array(xs, lm.float32, 1)
    i = _index(idx, max(1, xs[-1]), 2)
    s = rand_array(idx, lm.float32, 3)
    axis = len(xs) - 1
    f = _program(lambda t: [t["x"].gather(axis, t["i"]), t["x"].scatter_add(axis, t["i"], t["s"])],
                 {"x": (xs, lm.float32), "i": (idx, lm.int32), "s": (idx, lm.float32)})
    g, sc = f(x=x, i=i, s=s)
    np.testing.assert_array_equal(g, ops.gather(x, i, axis))
    np.testing.assert_array_equal(sc, ops.scatter_add(x, i, s, axis, lm.float32))


def test_an_index_into_an_empty_dim_is_out_of_range():
    f = _program(lambda t: [t["x"].gather(1, t["i"])], {"x": ((3, 0), lm.float32), "i": ((3, 2), lm.int32)})
    i = np.zeros((3, 2), np.int32)
    with pytest.raises(IndexError) as e:
        _run(f, x=np.zeros((3, 0), np.float32), i=i)
    assert _reported(e.value) == _message(i, 0, "gather")


def test_strided_and_padded_views():
    """Kernels built by hand so that their inputs are views: a transposed ``x``, a flipped ``dst``, a
    ``src`` read every other column, and an index padded with zeros (a masked view)."""
    f = lm.float32
    kg = KG()
    x = kg.input("x", (5, 4))
    i = kg.input("i", (4, 2), lm.int32)
    s = kg.input("s", (4, 6))
    xv = View.contiguous((5, 4)).permute((1, 0))  # (4, 5), strided
    iv = View.contiguous((4, 2)).pad_dim(1, 1, 0, 0)  # (4, 3): column 0 is the pad
    sv = View.contiguous((4, 6)).slice(1, 0, 3, 2)  # (4, 3), every other column
    dv = xv.flip(0)
    g_out, s_out = kg.buf((4, 3)), kg.buf((4, 5))
    kg.kernel("gather", (4, 3), [(x, xv), (i, iv)], [(g_out, E("Gather", L(0, f), L(1, lm.int32), arg=1))],
              axes=(1,))
    kg.kernel("scatter_add", (4, 5), [(x, dv), (i, iv), (s, sv)],
              [(s_out, E("ScatterAdd", L(0, f), L(1, lm.int32), L(2, f), arg=1))], axes=(1,))
    kg.output(g_out)
    kg.output(s_out)
    prog = kg.program()
    arrays = {"x": rand_array((5, 4), f, 1), "i": _index((4, 2), 5, 2), "s": rand_array((4, 6), f, 3)}
    got = prog(arrays, {})[0]
    xr, ir_, sr, dr = (ops.read(arrays[n], v, {}) for n, v in (("x", xv), ("i", iv), ("s", sv), ("x", dv)))
    np.testing.assert_array_equal(got[0], ops.gather(xr, ir_, 1))
    np.testing.assert_array_equal(got[1], ops.scatter_add(dr, ir_, sr, 1, f))
    b = next(iter(prog._bindings.values()))
    assert not any(fn in (ops.gather, ops.scatter_add) for fn, _ in b.schedule.steps)
    arrays["i"][2, 1] = 5
    with pytest.raises(IndexError) as e:
        prog(arrays, {})
    assert str(e.value) == _message(ops.read(arrays["i"], iv, {}), 5, "gather")  # (the backend's own program)


def test_symbolic_dims():
    f = _program(lambda t: [t["x"].gather(1, t["i"]), t["x"].scatter_add(0, t["i"], t["x"][:, :2])],
                 {"x": (("B", 3), lm.float32), "i": (("B", 2), lm.int32)})
    for n in (4, 1, 7):
        x = rand_array((n, 3), lm.float32, n)
        i = _index((n, 2), min(n, 3), n)
        g, s = f(x=x, i=i)
        np.testing.assert_array_equal(g, ops.gather(x, i, 1))
        np.testing.assert_array_equal(s, ops.scatter_add(x, i, x[:, :2], 0, lm.float32))


@pytest.mark.parametrize("axis", [0, 1])
def test_cut_over_threads(monkeypatch, axis):
    """Every kernel cut over three threads (items write disjoint elements; any part may flag)."""
    monkeypatch.setattr(plan, "SPLIT_NS", 0)
    monkeypatch.setattr(plan, "OWN_THREADS_NS", 0)
    monkeypatch.setenv("LUMINAL_NUM_THREADS", "3")
    x = rand_array((7, 5), lm.float16, 1)
    i = _index((7, 5), x.shape[axis], 2)
    f = _program(lambda t: [t["x"].gather(axis, t["i"]), t["x"].scatter_add(axis, t["i"], t["x"] * 2)],
                 {"x": ((7, 5), lm.float16), "i": ((7, 5), lm.int32)})
    g, s = _run(f, x=x, i=i)
    np.testing.assert_array_equal(g, ops.gather(x, i, axis))
    np.testing.assert_array_equal(s, ops.scatter_add(x, i, (x * 2).astype(np.float16), axis, lm.float16))
    b = next(iter(f.runner.program._bindings.values()))
    assert any(isinstance(fn, Split) for fn, _ in b.schedule.steps)
    wrong = i.copy()
    wrong[6, 4], wrong[5, 0] = -3, 9
    with pytest.raises(IndexError) as e:
        _run(f, x=x, i=wrong)
    assert _reported(e.value) == _message(wrong, x.shape[axis], "gather")


@pytest.mark.parametrize("axis", [0, 1])
def test_a_scatter_along_a_strided_axis_copies_in_memory_order(axis):
    """An embedding's gradient scatters along the table's rows: a line of the output along that axis is
    a column, across memory. Its copy-in is a kernel of its own over every element in memory order,
    then the adds by lines; along the innermost axis (contiguous lines) one kernel does both."""
    f = _program(lambda t: [t["x"].scatter_add(axis, t["i"], t["s"])],
                 {"x": ((6, 40), lm.float32), "i": ((3, 40) if axis == 0 else (6, 5), lm.int32),
                  "s": ((3, 40) if axis == 0 else (6, 5), lm.float32)})
    x, rng = rand_array((6, 40), lm.float32, 1), np.random.default_rng(3)
    i = rng.integers(0, 6 if axis == 0 else 40, (3, 40) if axis == 0 else (6, 5)).astype(np.int32)
    s = rand_array(i.shape, lm.float32, 2)
    (got,) = _run(f, x=x, i=i, s=s)
    np.testing.assert_allclose(got, ops.scatter_add(x, i, s, axis, lm.float32), rtol=1e-6)
    b = next(iter(f.runner.program._bindings.values()))
    items = [int(np.prod([index_value(d, b.schedule.env) for d in kern.grid])) for kern, _, _ in b.schedule.generated]
    assert items == ([240, 40] if axis == 0 else [6]), items  # axis 0: the copy over all 240, then a column each
