"""Audit of whole compiled CPU programs: ``backend="cpu"`` against ``backend="reference"`` (and torch).

Why this file: the compiled backend (``luminal/cpu/compiled.py``) keeps one set of buffers per binding,
lets temps share memory-plan slots (``compile/memory.py``), stores GEMM results in their readers' axis
order (``cpu/layout.py``), reads caller arrays in place and writes some state updates straight into the
state's own array (``Binding._in_place``). Each of those is a way for one value to overwrite another
that is still needed, and the existing tests pin them one kernel at a time. Here they meet in whole
programs: outputs and updates that alias each other (the same tensor twice, views of one another, a
state returned as is, swaps, updates that are views of other states or of outputs), states updated
from views of themselves, one program called many times with new, mutated, converted and
non-contiguous arrays and under more bindings than ``MAX_BINDINGS`` (0 and 1 included), matmuls with
transposed/broadcast/sliced/flipped operands whose results several readers view differently, rolled
stacks with state updates and outputs from the middle, training steps with tied weights, and two
seeded random-program fuzzes (one aimed at in-place updates); float32 first, float16, bfloat16, int32
and bool where the ops allow.

Every call's outputs and every state after it are compared with the reference interpreter; nothing a
call returned may change later or share memory with anything else returned.

The audit found three in-place hazards, now fixed; the smallest repro of each is its own test
(``test_in_place_outer_product_...``: a call split along a short inner axis read what an earlier slice
wrote; ``test_in_place_where_over_a_copy_...``: a Copy passed the state through as a view into a
``where``; ``test_input_array_that_is_a_state_...``: a caller array sharing the state's memory).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from parity import TOLERANCE, compare_outputs, rand, to_torch

import luminal as lm
from luminal import nn, train
from luminal.backends.cpu.compiled import MAX_BINDINGS
from luminal.core.dtype import to_storage
from luminal.frontend.seed import manual_seed
from luminal.frontend.state import State

pytestmark = pytest.mark.usefixtures("one_torch_thread")

F32_TOL = (1e-4, 1e-4)  # reference and cpu may sum in another order, divide instead of multiplying by a recip
TOL = {lm.float32: F32_TOL, lm.float16: TOLERANCE[lm.float16], lm.bfloat16: TOLERANCE[lm.bfloat16],
       lm.int32: (0, 0), lm.bool: (0, 0)}

# harness ---------------------------------------------------------------------------------------------

def _history(build, init, calls, backend, dtypes=None):
    """Compile ``build(g, states) -> (outputs, updates)`` once with fresh States from ``init`` and run it
    on each input dict of ``calls``. Returns per call the outputs and every state's data after it
    (sorted by name), and the compiled object. Checks that nothing returned changed afterwards or
    shares memory with another returned array or a state."""
    states = {k: State(np.array(v, copy=True), (dtypes or {}).get(k), name=k) for k, v in init.items()}
    g = lm.Graph()
    outs, ups = build(g, states)
    f = lm.compile(list(outs), backend=backend, updates=ups)
    kept, got = [], []
    for inputs in calls:
        res = f(**inputs)
        res = res if isinstance(res, tuple) else (res,)
        kept.append(res)
        got.append([np.array(r, copy=True) for r in res] + [states[k].data.copy() for k in sorted(states)])
    for k, (res, copies) in enumerate(zip(kept, got)):
        for i, (r, c) in enumerate(zip(res, copies)):
            assert np.array_equal(r, c, equal_nan=True), f"{backend}: output {i} of call {k} changed later"
    flat = [r for res in kept for r in res if r.size]
    for i, a in enumerate(flat):
        assert not any(np.shares_memory(a, s.data) for s in states.values()), f"{backend}: output shares a state"
        assert not any(np.shares_memory(a, b) for b in flat[i + 1:]), f"{backend}: two results share memory"
    return got, f


def _compare(ref, cpu, tol=F32_TOL):
    assert len(ref) == len(cpu)
    for k, (a, b) in enumerate(zip(ref, cpu)):
        assert len(a) == len(b)
        for i, (p, q) in enumerate(zip(a, b)):
            where = f"call {k}, item {i}"
            assert p.shape == q.shape, f"{where}: shape {q.shape} vs reference {p.shape}"
            assert p.dtype == q.dtype, f"{where}: dtype {q.dtype} vs reference {p.dtype}"
            if p.dtype.kind in "fc":
                np.testing.assert_allclose(q.astype(np.float64), p.astype(np.float64), rtol=tol[0], atol=tol[1],
                                           equal_nan=True, err_msg=where)
            else:
                np.testing.assert_array_equal(q, p, err_msg=where)


def _same_as_reference(build, init, calls=({},) * 3, dtypes=None, tol=F32_TOL):
    ref, _ = _history(build, init, calls, "reference", dtypes)
    cpu, f = _history(build, init, calls, "cpu", dtypes)
    _compare(ref, cpu, tol)
    return f


def _f32(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def _binding(f):
    """The CPU program's most recent binding (its buffers, calls and in-place aliases)."""
    return next(reversed(f.runner.program._bindings.values()))


# outputs and updates that alias each other -------------------------------------------------------------

_R = np.random.default_rng(0)
A34, B34, Q44 = _f32(_R, 3, 4), _f32(_R, 3, 4), _f32(_R, 4, 4)
X34 = [{"x": _f32(_R, 3, 4)} for _ in range(3)]


def st(g, S, name):
    return g.state(S[name])


ALIAS_CASES = {
    # name: (build(g, S) -> (outputs, updates), initial states, calls)
    "swap_computed": (lambda g, S: ([st(g, S, "a") + 0.5], {S["a"]: st(g, S, "b") * 1.5, S["b"]: st(g, S, "a") * 2}),
                      {"a": A34, "b": B34}, None),
    "swap_pure_views": (lambda g, S: ([st(g, S, "a") + 0.5], {S["a"]: st(g, S, "b"), S["b"]: st(g, S, "a")}),
                        {"a": A34, "b": B34}, None),
    "swap_flipped_views": (lambda g, S: ([st(g, S, "a").sum(0)],
                                         {S["a"]: st(g, S, "b").flip(0), S["b"]: st(g, S, "a").flip(1)}),
                           {"a": A34, "b": B34}, None),
    "state_returned_as_is_and_transposed": (
        lambda g, S: ([st(g, S, "a"), st(g, S, "a").transpose(0, 1), st(g, S, "a")[1:, ::2]],
                      {S["a"]: st(g, S, "a") * 2 + 1}), {"a": A34}, None),
    "unchanged_state_returned": (lambda g, S: ([st(g, S, "a"), st(g, S, "a") * 1], {}), {"a": A34}, None),
    "new_value_is_an_output": (lambda g, S: ([st(g, S, "a") * 2 + 1], {S["a"]: st(g, S, "a") * 2 + 1}),
                               {"a": A34}, None),
    "new_value_viewed_by_outputs": (
        lambda g, S: ([(st(g, S, "a") * 2 + 1).transpose(0, 1).flip(0), (st(g, S, "a") * 2 + 1)[:, 1:3],
                       (st(g, S, "a") * 2 + 1).sum(1, keepdim=True).expand(3, 4)],
                      {S["a"]: st(g, S, "a") * 2 + 1}), {"a": A34}, None),
    "same_output_three_times": (
        lambda g, S: ([st(g, S, "a") * 2, st(g, S, "a") * 2, (st(g, S, "a") * 2).transpose(0, 1)],
                      {S["a"]: st(g, S, "a") * 2}), {"a": A34}, None),
    "two_states_one_value": (
        lambda g, S: ([st(g, S, "a").sum()], {S["a"]: st(g, S, "a") * 2, S["b"]: st(g, S, "a") * 2}),
        {"a": A34, "b": B34}, None),
    "update_is_view_of_another_update": (
        lambda g, S: ([st(g, S, "a").sum()], {S["a"]: st(g, S, "a") * 2, S["b"]: (st(g, S, "a") * 2).flip(0, 1)}),
        {"a": A34, "b": B34}, None),
    "update_reads_another_new_value": (
        lambda g, S: ([st(g, S, "a").sum()],
                      {S["a"]: st(g, S, "b") + 1, S["b"]: (st(g, S, "b") + 1) * st(g, S, "a")}),
        {"a": A34, "b": B34}, None),
    "update_is_a_view_of_an_output": (
        lambda g, S: ([(st(g, S, "a") @ st(g, S, "b").transpose(0, 1))],
                      {S["q"]: (st(g, S, "a") @ st(g, S, "b").transpose(0, 1)).expand(4, 3, 3)[1:, 0, :].pad((0, 1))}),
        {"a": A34, "b": B34, "q": A34}, None),
    "update_from_a_constant": (
        lambda g, S: ([st(g, S, "a") + 1], {S["a"]: g.constant(np.full((3, 4), 2.0, np.float32))}), {"a": A34}, None),
    "update_to_zero": (lambda g, S: ([st(g, S, "a") + 1], {S["a"]: st(g, S, "a") * 0.0}), {"a": A34}, None),
    "update_from_a_broadcast_scalar": (lambda g, S: ([st(g, S, "a") + 1], {S["a"]: g.constant(3.0).expand(3, 4)}),
                                       {"a": A34}, None),
    "update_from_an_input": (lambda g, S: ([st(g, S, "a") + 1], {S["a"]: g.input("x", (3, 4))}), {"a": A34}, X34),
    "update_from_a_transposed_input": (
        lambda g, S: ([st(g, S, "a") + 1], {S["a"]: g.input("x", (4, 3)).transpose(0, 1)}), {"a": A34},
        [{"x": c["x"].reshape(4, 3)} for c in X34]),
    "outputs_are_an_input_and_its_views": (
        lambda g, S: (lambda x: ([x, x.transpose(0, 1), x.flip(0)[:, 1:3], x.reshape(12)], {}))(g.input("x", (3, 4))),
        {}, X34),
    "update_from_padded_slices_of_itself": (
        lambda g, S: ([st(g, S, "a").sum()],
                      {S["a"]: (st(g, S, "a") + 1).pad((1, 1))[:, 1:5] + (st(g, S, "a") * 2).pad((0, 0, 1, 0))[:3]}),
        {"a": A34}, None),
    "self_transposed_plus_one": (lambda g, S: ([st(g, S, "q").sum()], {S["q"]: st(g, S, "q").transpose(0, 1) + 1}),
                                 {"q": Q44}, None),
    "self_transposed_only_update": (lambda g, S: ([g.constant(1.0) + 0], {S["q"]: st(g, S, "q").transpose(0, 1) * 3}),
                                    {"q": Q44}, None),
    "self_flipped_times_self": (lambda g, S: ([g.constant(1.0) + 0], {S["q"]: st(g, S, "q").flip(0) * st(g, S, "q")}),
                                {"q": Q44}, None),
    "self_rolled": (lambda g, S: ([g.constant(1.0) + 0],
                                  {S["q"]: lm.cat([st(g, S, "q")[1:], st(g, S, "q")[:1]], 0) * 2}), {"q": Q44}, None),
    "self_row_broadcast": (
        lambda g, S: ([g.constant(1.0) + 0], {S["q"]: st(g, S, "q")[0:1].expand(4, 4) * 2 + st(g, S, "q")}),
        {"q": Q44}, None),
    "matmul_with_itself_written_back": (
        lambda g, S: ([st(g, S, "q").sum(0)], {S["q"]: (st(g, S, "q") @ st(g, S, "q").transpose(0, 1)) * 0.5}),
        {"q": Q44}, None),
    "state_and_new_state_read_by_one_output": (
        lambda g, S: ([st(g, S, "q") - (st(g, S, "q") * 0.5).transpose(0, 1)], {S["q"]: st(g, S, "q") * 0.5}),
        {"q": Q44}, None),
}


@pytest.mark.parametrize("name", list(ALIAS_CASES))
def test_outputs_and_updates_that_alias(name):
    build, init, calls = ALIAS_CASES[name]
    _same_as_reference(build, init, calls or ({},) * 3)


# the same wirings in the other dtypes (integer-safe arithmetic: +1, *2)
DTYPE_CASES = {
    "swap_plus": lambda g, S: ([st(g, S, "a") + 1], {S["a"]: st(g, S, "b") + 1, S["b"]: st(g, S, "a") * 2}),
    "state_as_output": lambda g, S: ([st(g, S, "a"), st(g, S, "a").transpose(0, 1)], {S["a"]: st(g, S, "a") * 2}),
    "new_value_viewed": lambda g, S: ([(st(g, S, "a") + 1).flip(1)], {S["a"]: st(g, S, "a") + 1}),
    "view_of_new_value": lambda g, S: ([st(g, S, "a").sum(0)], {S["a"]: st(g, S, "a") + 1,
                                                                 S["b"]: (st(g, S, "a") + 1).flip(0, 1)}),
    "self_transposed": lambda g, S: ([st(g, S, "b").sum(1)], {S["a"]: st(g, S, "a").transpose(0, 1) + 1}),
    "self_rolled": lambda g, S: ([st(g, S, "b") * 2],
                                 {S["a"]: lm.cat([st(g, S, "a")[1:], st(g, S, "a")[:1]], 0) + 1}),
    "matmul_of_states": lambda g, S: ([st(g, S, "a") @ st(g, S, "b")],
                                      {S["a"]: st(g, S, "b").transpose(0, 1) @ st(g, S, "a")}),
}


@pytest.mark.parametrize("dtype", [lm.float16, lm.bfloat16, lm.int32], ids=lambda d: d.name)
@pytest.mark.parametrize("name", list(DTYPE_CASES))
def test_aliasing_wirings_in_other_dtypes(name, dtype):
    init = {"a": rand((4, 4), dtype, 1), "b": rand((4, 4), dtype, 2)}
    _same_as_reference(DTYPE_CASES[name], init, dtypes={"a": dtype, "b": dtype}, tol=TOL[dtype])


def test_bool_state_toggled_and_counted():
    def build(g, S):
        m, c = st(g, S, "m"), st(g, S, "c")
        return [m.float().sum(), c * 2], {S["m"]: m.logical_not().transpose(0, 1), S["c"]: c + m.int().sum(0)}

    _same_as_reference(build, {"m": rand((4, 4), lm.bool, 3), "c": np.arange(4, dtype=np.int32)})


# state updates written in place --------------------------------------------------------------------------

@pytest.mark.parametrize("n", [2, 4, 5])
@pytest.mark.parametrize("dtype", [lm.float32, lm.float16, lm.bfloat16, lm.int32, lm.bool], ids=lambda d: d.name)
def test_in_place_outer_product_of_a_row_and_a_column_of_itself(dtype, n):
    """q <- outer(q[0], q[:, 1]): the update reads row 0 while writing every row, so it is not
    written in place (a work item would read elements that another one already wrote)."""
    def build(g, S):
        q = st(g, S, "q")
        return [g.constant(1.0) + 0], {S["q"]: q[0].reshape(n, 1) * q[:, 1]}

    init = (np.arange(n * n).reshape(n, n) % 3 != 1) if dtype is lm.bool else \
        to_storage(np.arange(n * n, dtype=np.float64).reshape(n, n) / 4 - 1, dtype) if dtype.is_float else \
        np.arange(1, n * n + 1, dtype=np.int32).reshape(n, n)
    f = _same_as_reference(build, {"q": init}, dtypes={"q": dtype}, tol=TOL[dtype])
    assert not _binding(f).schedule.written


def test_in_place_transposed_self_times_column_shared_with_an_output():
    """q <- q.T * c, and an output reading the same product: one kernel writes both."""
    def build(g, S):
        q, c, x = st(g, S, "q"), g.input("c", (3, 1)), g.input("x", (3, 3))
        return [x * x * x + q.transpose(0, 1) * c], {S["q"]: q.transpose(0, 1) * c}

    rng = np.random.default_rng(1)
    calls = [{"c": _f32(rng, 3, 1), "x": _f32(rng, 3, 3)} for _ in range(2)]
    _same_as_reference(build, {"q": np.arange(9, dtype=np.float32).reshape(3, 3)}, calls)


def test_in_place_transposed_self_times_column_alone_is_right():
    """The same update in a kernel of its own: it reads q transposed, so it is not written in place."""
    def build(g, S):
        q, c = st(g, S, "q"), g.input("c", (3, 1))
        return [c * 2], {S["q"]: q.transpose(0, 1) * c}

    f = _same_as_reference(build, {"q": np.arange(9, dtype=np.float32).reshape(3, 3)},
                           [{"c": np.array([[1.0], [2.0], [3.0]], np.float32)}] * 2)
    assert not _binding(f).schedule.written


def test_in_place_update_reading_its_own_elements():
    """q <- q * c + q (every read of q at the element written): written in place, right on every call."""
    def build(g, S):
        q, c = st(g, S, "q"), g.input("c", (3, 1))
        return [c * 2], {S["q"]: q * c + q}

    f = _same_as_reference(build, {"q": np.arange(9, dtype=np.float32).reshape(3, 3)},
                           [{"c": np.array([[1.0], [2.0], [3.0]], np.float32)}] * 3)
    assert _binding(f).schedule.written


@pytest.mark.parametrize("other", ["x", "zero"])  # a select against another value / against zero
@pytest.mark.parametrize("dtype", [lm.float32, lm.int32], ids=lambda d: d.name)
def test_in_place_where_over_a_copy_of_its_transpose(dtype, other):
    """q <- where(x > 0, x or 0, q.T reshaped back): the reshape of a permuted view is a Copy."""
    def build(g, S):
        q, x = st(g, S, "q"), g.input("x", (4, 4), dtype)
        copied = q.transpose(0, 1).reshape(16).reshape(4, 4)
        return [x + 1], {S["q"]: lm.where(x > 0, x, copied) if other == "x" else lm.where(x > 0, copied, 0)}

    x = np.where(np.eye(4) > 0, 100, -1).astype(dtype.np)
    _same_as_reference(build, {"q": (np.arange(16).reshape(4, 4) + 1).astype(dtype.np)}, [{"x": x}] * 2,
                       dtypes={"q": dtype})


def test_in_place_relu_of_a_copy_of_its_transpose():
    """The ReLU of a Copy of q's transpose, read twice (comparison and select): right."""
    def build(g, S):
        return [g.constant(1.0) + 0], {S["q"]: st(g, S, "q").transpose(0, 1).reshape(16).reshape(4, 4).relu()}

    _same_as_reference(build, {"q": np.arange(16, dtype=np.float32).reshape(4, 4) - 5})


@pytest.mark.parametrize("rows", [4, 2], ids=["the_state_array", "a_contiguous_slice_of_it"])
def test_input_array_that_is_a_state_updated_in_place(rows):
    """``f(x=w.data)``: every read of a run must see the values from before it (the reference's do)."""
    got = {}
    for backend in ("reference", "cpu"):
        s = State(np.arange(12, dtype=np.float32).reshape(4, 3), name="w")
        g = lm.Graph()
        w, x = g.state(s), g.input("x", (rows, 3))
        f = lm.compile([(w + 1) @ x.transpose(0, 1)], backend=backend, updates={s: w + 1})
        got[backend] = (f(x=s.data[:rows]), s.data.copy())
    np.testing.assert_allclose(got["cpu"][1], got["reference"][1])
    np.testing.assert_allclose(got["cpu"][0], got["reference"][0], rtol=1e-6)


@pytest.mark.parametrize("how", ["a_copy", "a_transposed_view"])  # no shared memory / converted to a copy
def test_input_array_from_a_state_without_sharing_is_right(how):
    got = {}
    for backend in ("reference", "cpu"):
        s = State(np.arange(9, dtype=np.float32).reshape(3, 3), name="w")
        g = lm.Graph()
        w, x = g.state(s), g.input("x", (3, 3))
        f = lm.compile([(w + 1) @ x.transpose(0, 1)], backend=backend, updates={s: w + 1})
        got[backend] = (f(x=s.data.copy() if how == "a_copy" else s.data.T), s.data.copy())
    np.testing.assert_allclose(got["cpu"][0], got["reference"][0], rtol=1e-6)
    np.testing.assert_allclose(got["cpu"][1], got["reference"][1])


def test_failed_gather_leaves_states_and_the_next_call_is_right():
    """A gather of a permuted GEMM result with an index out of range: both backends raise, no state
    changes (updates before a fallible kernel are not written in place), the next call is right."""
    got = {}
    for backend in ("reference", "cpu"):
        w = State(np.arange(12, dtype=np.float32).reshape(4, 3), name="w")
        v = State(np.ones(3, np.float32), name="v")
        g = lm.Graph()
        ws, vs = g.state(w), g.state(v)
        x, i = g.input("x", ("B", 4)), g.input("i", ("B",), lm.int32)
        h = x @ ws
        f = lm.compile([h.transpose(0, 1).index_select(1, i), h.sum(0)], backend=backend,
                       updates={w: ws * 0.5 + 1, v: vs + h.sum(0)})
        xv = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
        first = f(x=xv, i=np.array([0, 2, 1], np.int32))
        before = (w.data.copy(), v.data.copy())
        with pytest.raises(IndexError, match="out of range"):
            f(x=xv, i=np.array([0, 5, 1], np.int32))
        np.testing.assert_array_equal(w.data, before[0])
        np.testing.assert_array_equal(v.data, before[1])
        second = f(x=xv * 2, i=np.array([2, 2, 0], np.int32))
        got[backend] = [list(first) + list(before), list(second) + [w.data.copy(), v.data.copy()]]
    _compare(got["reference"], got["cpu"])


class _Embedder(nn.Module):
    """Token embeddings, residual blocks, a projection: the blocks' updates come before the scatter_add
    of the embedding's gradient."""

    def __init__(self):
        super().__init__()
        self.emb, self.out = nn.Embedding(7, 4), nn.Linear(4, 5)
        self.blocks = nn.ModuleList([nn.Linear(4, 4) for _ in range(3)])

    def forward(self, idx):
        h = self.emb(idx)
        for block in self.blocks:
            h = h + block(h).tanh()
        return self.out(h)


def test_an_embedding_step_updates_in_place_and_a_bad_index_changes_nothing():
    """The scatter_add of an embedding's gradient reads the indices its forward gather checked, so it
    cannot fail (``Planner._last_fallible``): the blocks' parameters and AdamW states, updated before it,
    are written in place. A bad index still raises before any state changes, and the steps around it
    are the reference's."""
    hist = {}
    good = {"idx": np.array([0, 6, 3, 3], np.int32), "y": np.array([1, 4, 0, 2], np.int32)}
    for backend in ("reference", "cpu"):
        manual_seed(0)
        m = _Embedder()
        opt = train.AdamW(m.parameters(), lr=1e-2)
        g = lm.Graph()
        idx, y = g.input("idx", ("B",), lm.int32), g.input("y", ("B",), lm.int32)
        step = train.compile_step(train.cross_entropy(m(idx), y), opt, backend=backend)

        def states():
            return [p.data.copy() for p in m.parameters()] + \
                [s.data.copy() for per in opt.state.values() for s in per.values()]

        hist[backend] = [[np.float64(step(**good))] + states()]
        before = states()
        with pytest.raises(IndexError, match="out of range"):
            step(idx=np.array([0, 7, 1, 2], np.int32), y=good["y"])
        for now, was in zip(states(), before, strict=True):
            np.testing.assert_array_equal(now, was)
        hist[backend].append([np.float64(step(**good))] + states())
        if backend == "cpu":
            written = _binding(step._update).schedule.written
            assert {f"$blocks.{n}.{p}{s}" for n in (1, 2) for p in ("weight", "bias")
                    for s in ("", ".exp_avg", ".exp_avg_sq")} <= written, sorted(written)
    _compare(hist["reference"], hist["cpu"], (1e-4, 1e-5))


@pytest.mark.parametrize("second", ["same_check", "same_computed_index", "another_size", "another_index"])
def test_a_gather_can_fail_unless_an_earlier_one_made_its_check(second):
    """``Planner._last_fallible``: a gather whose indices (the same buffer, the same elements, unwritten
    since) an earlier gather checked against the same size cannot fail; any other can. (A buffer
    written between the two, a rolled body's scratch: the next test.)"""
    from luminal.backends.cpu import tune
    from luminal.backends.cpu.plan import Planner

    g = lm.Graph()
    i, j = g.input("i", ("B",), lm.int32), g.input("j", ("B",), lm.int32)
    a, b = g.input("a", (5, 3)), g.input("b", (6 if second == "another_size" else 5, 3))
    if second == "same_computed_index":
        i = (i + 1) * 1 - 1
    first = a.index_select(0, i)
    f = lm.compile([first * 2, b.index_select(0, j if second == "another_index" else i) + first], backend="cpu")
    f(i=np.array([0, 4, 1], np.int32), j=np.array([2, 2, 2], np.int32), a=np.ones((5, 3), np.float32),
      b=np.ones(b.shape, np.float32))
    prog = f.runner.program
    gathers = [n for n, k in enumerate(prog._kernels) if k.kind == "gather"]
    assert len(gathers) == 2
    planner = Planner(prog.kg, prog._kernels, prog.plan, {"B": 3}, tune.DEFAULT, {})
    assert planner._last_fallible(prog._kernels) == gathers[0 if second.startswith("same") else 1]


def test_a_rolled_bodys_index_is_checked_again_on_every_trip():
    """Each trip of a rolled stack gathers with an index it computes into the body's scratch (the same
    buffer every trip, rewritten): no trip's check covers the next one's, so a bad index met only in a
    later trip still raises before any state is written in place. (The index shared by every trip is
    checked once.) The states' updates come between the trips, so all but the last one's are written in
    place only if the last trip's gather is the last kernel that can fail."""
    depth, v, d = 4, 7, 4
    rng = np.random.default_rng(0)
    tables = [_f32(rng, v, d) for _ in range(depth)]
    calls = [(np.array([1, 2, 0], np.int32), _f32(rng, 3, d)),
             (np.array([v - 1, 2, 0, 1], np.int32), _f32(rng, 4, d)),  # v - 1 + 1 = v: trips 1 and 3 fail
             (np.array([3, 5], np.int32), _f32(rng, 2, d))]
    got = {}
    for backend in ("reference", "cpu"):
        ws = [State(t.copy(), name=f"w{k}") for k, t in enumerate(tables)]
        offsets = [State(np.array([k % 2], np.int32), name=f"o{k}") for k in range(depth)]
        g = lm.Graph()
        idx, h = g.input("i", ("B",), lm.int32), g.input("x", ("B", d))
        updates = {}
        for s, o in zip(ws, offsets):  # (each update made with its trip: the kernels keep that order)
            w = g.state(s)
            h = (h + w.index_select(0, idx + g.state(o)) * 0.5 + w.index_select(0, idx)).tanh()
            updates[s] = w * 0.9 + 0.01
        f = lm.compile([h], backend=backend, updates=updates)
        got[backend] = []
        for i, x in calls:
            before = [w.data.copy() for w in ws]
            if i.max() == v - 1:
                with pytest.raises(IndexError, match="out of range"):
                    f(i=i, x=x)
                for w, was in zip(ws, before, strict=True):
                    np.testing.assert_array_equal(w.data, was)
            else:
                got[backend].append([np.array(f(i=i, x=x))] + [w.data.copy() for w in ws])
        if backend == "cpu":
            assert f.report(show=False).loops, "the stack did not roll"
            assert _binding(f).schedule.written == {f"$w{depth - 1}"}
    _compare(got["reference"], got["cpu"])


# a random fuzz of state updates that read the state through views -------------------------------------

N_FUZZ = 4


def _view(t, rng):
    k = rng.integers(0, 9)
    n = N_FUZZ
    return [lambda: t, lambda: t.transpose(0, 1), lambda: t.flip(0), lambda: t.flip(1),
            lambda: t[0:1, :].expand(n, n), lambda: t[:, 1:2].expand(n, n),
            lambda: t.transpose(0, 1).reshape(n * n).reshape(n, n),  # a Copy
            lambda: t.transpose(0, 1)[:, 0:1].expand(n, n),
            lambda: lm.cat([t[1:], t[:1]], 0)][k]()


def _expr(leaves, rng, depth):
    if depth == 0 or rng.random() < 0.3:
        return _view(leaves[rng.integers(0, len(leaves))], rng)
    a, b = _expr(leaves, rng, depth - 1), _expr(leaves, rng, depth - 1)
    return [lambda: a + b, lambda: a * b, lambda: a - b * 0.5, lambda: a.maximum(b),
            lambda: lm.where(a > 0, a, b)][rng.integers(0, 5)]()


def _in_place_program(seed):
    def build(g, S):
        rng = np.random.default_rng(seed)
        n = N_FUZZ
        leaves = [st(g, S, "s"), g.input("x", (n, n)), g.input("r", (1, n)).expand(n, n),
                  g.input("c", (n, 1)).expand(n, n)]
        new = _expr(leaves, rng, 3)
        outs = [_expr(leaves + [new], rng, 2) for _ in range(rng.integers(1, 3))]
        return outs, {S["s"]: new}
    return build


@pytest.mark.parametrize("seed", range(100))  # seeds 0, 16, 86 and 90 found the first two hazards
def test_in_place_update_fuzz(seed):
    """A state ``s`` (4, 4) updated from a random expression of views of itself (transposed, flipped,
    broadcast rows/columns, rolled, copied) and of inputs; outputs read both ``s`` and its new value.
    Reproduce: ``_same_as_reference(_in_place_program(seed), ...)`` as below."""
    rng = np.random.default_rng(seed + 10**6)
    n = N_FUZZ
    calls = [{"x": _f32(rng, n, n), "r": _f32(rng, 1, n), "c": _f32(rng, n, 1)} for _ in range(2)]
    _same_as_reference(_in_place_program(seed), {"s": _f32(rng, n, n)}, calls)


# one program, many calls ------------------------------------------------------------------------------

def _busy_program(g, S):
    """GEMMs whose results are read transposed and sliced, a padded read, reductions, an index input and
    two states (one written in place, one from a GEMM)."""
    x, idx = g.input("x", ("B", 4)), g.input("i", ("B",), lm.int32)
    w, v = st(g, S, "w"), st(g, S, "v")
    h = x @ w
    t = h.transpose(0, 1)  # stored (4, B) for its readers?
    e = lm.cat([h, h.exp()], 1)
    sel = w.index_select(0, idx)
    outs = [t * 2, e[:, ::3], h.sum(0), (t @ x) * 0.1, sel + v, h.pad((1, 1)).amax(1)]
    return outs, {S["v"]: v * 0.9 + h.sum(0) * 0.01, S["w"]: w - (x.transpose(0, 1) @ h) * 0.01}


def _busy_init():
    rng = np.random.default_rng(5)
    return {"w": _f32(rng, 4, 4) * 0.5, "v": _f32(rng, 4)}


def _busy_call(n, seed):
    rng = np.random.default_rng([n, seed])
    return {"x": _f32(rng, n, 4), "i": rng.integers(0, 4, n).astype(np.int32)}


def test_caller_arrays_new_mutated_converted_and_strided():
    """The same compiled program on: new arrays, one array mutated in place between calls, Fortran
    order, negative and step-2 strides, int64 and list indices, read-only arrays; each call checked
    against the reference on the same values."""
    x = _busy_call(3, 0)["x"]
    big = _f32(np.random.default_rng(1), 6, 8)
    ro = _busy_call(3, 9)["x"]
    ro.setflags(write=False)
    seq = [
        {"x": x, "i": np.array([0, 3, 1], np.int32)},
        {"x": x, "i": np.array([0, 3, 1], np.int32)},  # same objects again
        {"x": np.asfortranarray(_busy_call(3, 1)["x"]), "i": np.array([2, 2, 0], np.int64)},
        {"x": big[::2, ::2], "i": [1, 1, 3]},  # step-2 strides (3, 4)
        {"x": big[5:2:-1, 7:3:-1], "i": np.array([3, 0, 1], np.int32)[::-1]},  # negative strides
        {"x": ro, "i": np.array([0, 1, 2], np.int32)},
    ]
    cpu_states = {k: State(v.copy(), name=k) for k, v in _busy_init().items()}
    ref_states = {k: State(v.copy(), name=k) for k, v in _busy_init().items()}
    progs = {}
    for backend, states in (("cpu", cpu_states), ("reference", ref_states)):
        g = lm.Graph()
        outs, ups = _busy_program(g, states)
        progs[backend] = lm.compile(outs, backend=backend, updates=ups)
    kept = []
    for call in seq + [None]:
        if call is None:  # mutate the first array in place and call with the same objects
            x[:] = x * -2 + 1
            call = seq[0]
        ref = progs["reference"](**{n: np.array(a, copy=True) for n, a in call.items()})
        got = progs["cpu"](**call)
        kept.append((got, [np.array(a) for a in got]))
        _compare([list(ref) + [ref_states[n].data for n in sorted(ref_states)]],
                 [list(got) + [cpu_states[n].data for n in sorted(cpu_states)]])
    for got, copies in kept:
        for a, b in zip(got, copies):
            np.testing.assert_array_equal(a, b)


def test_more_bindings_than_kept_coming_back():
    """Batch sizes 0..MAX_BINDINGS+2 up and down (each binding evicted and rebuilt), new data every call,
    the states carried across all of them."""
    sizes = list(range(MAX_BINDINGS + 3)) + list(range(MAX_BINDINGS + 2, -1, -3)) + [1, 0, 1]
    calls = [_busy_call(n, k) for k, n in enumerate(sizes)]
    ref, _ = _history(_busy_program, _busy_init(), calls, "reference")
    cpu, f = _history(_busy_program, _busy_init(), calls, "cpu")
    _compare(ref, cpu)
    assert len(f.runner.program._bindings) <= MAX_BINDINGS


# GEMM planning and layouts ----------------------------------------------------------------------------

B_SIZES = ({"B": 3}, {"B": 1}, {"B": 0}, {"B": 2})
GEMMS = {
    # name: (input shapes, op on luminal and torch tensors alike, bindings)
    "plain": ([(4, 5), (5, 3)], lambda a, b: a @ b, None),
    "a_transposed": ([(5, 4), (5, 3)], lambda a, b: a.transpose(0, 1) @ b, None),
    "b_transposed": ([(4, 5), (3, 5)], lambda a, b: a @ b.transpose(0, 1), None),
    "both_transposed": ([(5, 4), (3, 5)], lambda a, b: a.transpose(0, 1) @ b.transpose(0, 1), None),
    "result_read_many_ways": ([(4, 5), (5, 3)], lambda a, b: ((a @ b).transpose(0, 1) * 2, (a @ b) + 1, (a @ b).sum(0),
                                                             (a @ b)[1:3, ::2], (a @ b).flip(0)), None),
    "batched_broadcast_a": ([("B", 4, 5), (5, 3)], lambda a, b: (a @ b, (a @ b).transpose(1, 2) + 1), B_SIZES),
    "batched_broadcast_b": ([(4, 5), ("B", 5, 3)], lambda a, b: a @ b, B_SIZES),
    "broadcast_batch_dims": ([(2, 1, 4, 5), (1, 3, 5, 2)], lambda a, b: a @ b, None),
    "batched_both_transposed": ([("B", 5, 4), (3, 5)], lambda a, b: a.transpose(1, 2) @ b.transpose(0, 1), B_SIZES),
    "symbolic_m": ([("B", 5), (5, 3)], lambda a, b: a @ b, B_SIZES),
    "symbolic_k": ([(4, "B"), ("B", 3)], lambda a, b: a @ b, B_SIZES),
    "symbolic_n": ([(4, 5), (5, "B")], lambda a, b: a @ b, B_SIZES),
    "symbolic_everywhere": ([("B", "B"), ("B", "B")], lambda a, b: (a @ b.transpose(0, 1), (b @ a).transpose(0, 1)),
                            B_SIZES),
    "sliced_operands": ([(6, 8), (8, 5)], lambda a, b: a[1:5, ::2] @ b[::2, 1:4], None),
    "flipped_operands": ([(6, 8), (8, 5)], lambda a, b: (a.flip(0) @ b.flip(1), a.flip(1) @ b.flip(0)), None),
    "expanded_operands": ([(1, 8), (8, 1)],
                          lambda a, b: (a.expand(4, 8) @ b.expand(8, 5), b.expand(8, 3).transpose(0, 1) @ b), None),
    "vectors": ([(8,), (8, 5), (6, 8)], lambda v, b, a: (v @ b, a @ v, v @ v), None),
    "permuted_batch": ([(3, 4, 2, 5), (2, 5, 3)], lambda a, b: a.permute(2, 0, 1, 3) @ b.reshape(2, 1, 5, 3), None),
    "chains": ([(4, 5), (5, 6), (6, 3)], lambda a, b, c: ((a @ b) @ c, a @ (b @ c), (a @ b).transpose(0, 1)), None),
    "gram_matrices": ([("B", 5)], lambda a: (a @ a.transpose(0, 1), a.transpose(0, 1) @ a,
                                             (a.transpose(0, 1) @ a).transpose(0, 1) * 2), B_SIZES),
    "powers": ([(4, 4)], lambda a: (a @ a, a @ a @ a, (a @ a).transpose(0, 1) @ a), None),
    "all_sizes_one": ([("B", 1), (1, "B")], lambda a, b: (a @ b, b @ a), B_SIZES),
    "outer_as_matmul": ([(4,), (3,)], lambda a, b: a.reshape(4, 1) @ b.reshape(1, 3), None),
    "linear_relu_and_transposed_use": ([("B", 5), (3, 5), (3,)],
                                       lambda x, w, b: ((x @ w.transpose(0, 1) + b).relu(),
                                                        (x @ w.transpose(0, 1)).transpose(0, 1) * b.reshape(3, 1)),
                                       B_SIZES),
    "batched_results_permuted": ([(2, 4, 5), (2, 5, 3)],
                                 lambda a, b: ((a @ b).transpose(1, 2), (a @ b).permute(2, 0, 1) + 1, (a @ b).sum(1)),
                                 None),
    "batched_sliced": ([(3, 4, 6), (3, 6, 3)], lambda a, b: a[::2, 1:, ::2] @ b[::2, ::2, :], None),
    "attention_like": ([("B", 4, 5), (5, 5)], lambda a, b: (a @ b).softmax(-1) @ b.transpose(0, 1), B_SIZES),
}
GEMM_DTYPES = {"plain", "result_read_many_ways", "batched_broadcast_a", "linear_relu_and_transposed_use",
               "gram_matrices", "chains", "symbolic_everywhere"}


def _gemm_cases():
    for name in GEMMS:
        yield pytest.param(name, lm.float32, id=f"{name}-float32")
        if name in GEMM_DTYPES:
            for d in (lm.float16, lm.bfloat16, lm.int32):
                yield pytest.param(name, d, id=f"{name}-{d.name}")


@pytest.mark.parametrize("name,dtype", list(_gemm_cases()))
def test_matmul_operands_and_readers_against_reference_and_torch(name, dtype):
    shapes, op, bindings = GEMMS[name]
    if dtype is lm.int32 and name in ("linear_relu_and_transposed_use",):
        op = lambda x, w, b: (x @ w.transpose(0, 1) + b, (x @ w.transpose(0, 1)).transpose(0, 1) * b.reshape(3, 1))  # noqa: E731
    g = lm.Graph()
    xs = [g.input(f"x{i}", s, dtype) for i, s in enumerate(shapes)]
    outs = op(*xs)
    outs = list(outs) if isinstance(outs, tuple) else [outs]
    cpu, ref = lm.compile(outs, backend="cpu"), lm.compile(outs, backend="reference")
    for k, env in enumerate(bindings or [{}]):
        arrays = [rand(tuple(env.get(d, d) for d in s), dtype, seed=10 * k + i, low=-3, high=3)
                  for i, s in enumerate(shapes)]
        inputs = {f"x{i}": a for i, a in enumerate(arrays)}
        for _ in range(2):  # a second run over the same buffers
            got = cpu(**inputs)
            got = got if isinstance(got, tuple) else (got,)
            want = ref(**inputs)
            want = want if isinstance(want, tuple) else (want,)
            _compare([list(want)], [list(got)], TOL[dtype])
        theirs = op(*[to_torch(a, dtype) for a in arrays])
        theirs = theirs if isinstance(theirs, tuple) else (theirs,)
        rt, at = TOL[dtype]
        compare_outputs(outs, got, theirs, rtol=rt * 10, atol=at * 10, where=f"{env}: ")


# rolled stacks ----------------------------------------------------------------------------------------

class _NormBlock(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.fc, self.bn = nn.Linear(d, d), nn.BatchNorm1d(d)

    def forward(self, x):
        return x + self.bn(self.fc(x)).tanh()


@pytest.mark.parametrize("depth", [4, 7])
def test_rolled_stack_with_running_stats_and_middle_outputs(depth):
    """Each trip updates its own BatchNorm statistics (States); outputs come from the middle of the stack
    and are read through views; batch sizes change between calls."""
    d, sizes = 8, [3, 5, 2, 3, 6]
    hist = {}
    for backend in ("reference", "cpu"):
        manual_seed(0)
        blocks = [_NormBlock(d) for _ in range(depth)]
        g = lm.Graph()
        h = g.input("x", ("B", d))
        mids = []
        for b in blocks:
            h = b(h)
            mids.append(h)
        f = lm.compile([h, mids[depth // 2].transpose(0, 1), mids[1].sum(0), mids[-2][:, ::3]], backend=backend)
        rng = np.random.default_rng(1)
        hist[backend] = []
        for n in sizes:
            res = f(x=_f32(rng, n, d))
            hist[backend].append([np.array(r) for r in res] + [b.bn.running_mean.data.copy() for b in blocks]
                                 + [b.bn.running_var.data.copy() for b in blocks])
        if backend == "cpu":
            assert any(lp["trips"] == depth for lp in f.report(show=False).loops), "the stack did not roll"
    _compare(hist["reference"], hist["cpu"])


@pytest.mark.parametrize("dtype", [lm.float16, lm.bfloat16], ids=lambda d: d.name)
def test_rolled_stack_in_half_precision_under_many_bindings(dtype):
    depth, d = 6, 8
    rng = np.random.default_rng(2)
    ws = [to_storage(rng.standard_normal((d, d)) * 0.4, dtype) for _ in range(depth)]

    def build(g, S):
        h = g.input("x", ("B", d), dtype)
        mids = []
        for i in range(depth):
            h = (h @ st(g, S, f"w{i}")).tanh() + h * 0.5
            mids.append(h)
        return [h, mids[2].transpose(0, 1), mids[3].amax(1)], {}

    calls = [{"x": to_storage(rng.standard_normal((n, d)), dtype)} for n in (3, 0, 1, 5, 3)]
    f = _same_as_reference(build, {f"w{i}": w for i, w in enumerate(ws)}, calls,
                           dtypes={f"w{i}": dtype for i in range(depth)}, tol=TOL[dtype])
    assert f.report(show=False).loops, "the stack did not roll"


@pytest.mark.parametrize("width", [2, 4, 5])
@pytest.mark.parametrize("opt", [("SGD", dict(lr=0.05, momentum=0.9)), ("AdamW", dict(lr=1e-2))], ids=lambda o: o[0])
def test_rolled_train_step_narrow_layers(width, opt):
    """A residual stack of narrow Linear layers (inner dims of 2 to 5), its forward and
    backward rolled, trained with the update written in place; an output from the middle of the stack;
    batch sizes 3, 1, 5, 2, 3."""
    depth, sizes = 6, [3, 1, 5, 2, 3]
    hist = {}
    for backend in ("reference", "cpu"):
        manual_seed(0)
        layers = [nn.Linear(width, width) for _ in range(depth)]
        g = lm.Graph()
        x, y = g.input("x", ("B", width)), g.input("y", ("B", width))
        h, mids = x, []
        for layer in layers:
            h = layer(h).tanh() + h
            mids.append(h)
        loss = ((h - y) * (h - y)).mean()
        params = [p for layer in layers for p in layer.parameters()]
        step = train.compile_step(loss, getattr(train, opt[0])(params, **opt[1]), backend=backend,
                                  outputs=[mids[depth // 2]])
        rng = np.random.default_rng(1)
        hist[backend] = []
        for n in sizes:
            loss_v, mid = step(x=_f32(rng, n, width), y=_f32(rng, n, width))
            hist[backend].append([np.float64(loss_v), np.array(mid)] + [p.data.copy() for p in params])
        if backend == "cpu":
            assert step._update.report(show=False).loops, "the step did not roll"
    _compare(hist["reference"], hist["cpu"], (1e-4, 1e-5))


# training steps with tied or reused weights ----------------------------------------------------------

class _Tied(nn.Module):
    """An embedding whose table is also the output projection (read transposed)."""

    def __init__(self, v=5, d=3):
        super().__init__()
        self.emb, self.proj = nn.Embedding(v, d), nn.Linear(d, d)

    def forward(self, idx):
        h = self.proj(self.emb(idx)).tanh()
        return h @ self.emb.weight.on(h.graph).transpose(0, 1)


class _Reused(nn.Module):
    """One square weight read as is, transposed and reduced."""

    def __init__(self, d=3):
        super().__init__()
        self.w = nn.Linear(d, d, bias=False)

    def forward(self, x):
        w = self.w.weight.on(x.graph)
        return (x @ w) * (x @ w.transpose(0, 1)) + x * w.sum(0)


def _tied_loss(g, m):
    idx, y = g.input("idx", ("B",), lm.int32), g.input("y", ("B",), lm.int32)
    return train.cross_entropy(m(idx), y)


def _reused_loss(g, m):
    out = m(g.input("x", ("B", 3)))
    return (out * out).mean()


def _tied_batches():
    rng = np.random.default_rng(0)
    return [{"idx": rng.integers(0, 5, n).astype(np.int32), "y": rng.integers(0, 5, n).astype(np.int32)}
            for n in (4, 1, 3, 4, 2)]


def _reused_batches():
    rng = np.random.default_rng(0)
    return [{"x": _f32(rng, n, 3)} for n in (4, 1, 3, 4, 2)]


MODELS = {"tied": (_Tied, _tied_loss, _tied_batches), "reused": (_Reused, _reused_loss, _reused_batches)}
OPTS = {"sgd_momentum_wd": ("SGD", dict(lr=0.1, momentum=0.9, weight_decay=0.1)),
        "adam_amsgrad": ("Adam", dict(lr=1e-2, amsgrad=True)),
        "rmsprop_centered": ("RMSprop", dict(lr=1e-2, centered=True, momentum=0.5))}


@pytest.mark.parametrize("options", [{}, {"clip_grad_norm": 0.1}, {"accumulate": 2}], ids=str)
@pytest.mark.parametrize("opt", list(OPTS))
@pytest.mark.parametrize("model", list(MODELS))
def test_train_step_with_tied_weights(model, opt, options):
    make, make_loss, batches = MODELS[model]
    opt_cls, kw = OPTS[opt]
    hist = {}
    for backend in ("reference", "cpu"):
        manual_seed(0)
        m = make()
        g = lm.Graph()
        step = train.compile_step(make_loss(g, m), getattr(train, opt_cls)(m.parameters(), **kw), backend=backend,
                                  **options)
        hist[backend] = [[np.float64(step(**b))] + [v.copy() for v in m.state_dict().values()] for b in batches()]
    _compare(hist["reference"], hist["cpu"], (1e-4, 1e-5))


# a random-program fuzz: GEMMs, reductions, views, states -------------------------------------------------

D_FUZZ = 4


def _random_program(seed, dtype):
    """Random mix of (B, D), (D, D) and (D,) tensors: matmuls either way round, outer products of the
    batch, softmax, reductions, where, rolls and flips; a few outputs through views; updates of both
    states (sometimes a transposed read of the other's old value)."""
    def build(g, S):
        rng = np.random.default_rng(seed)
        d = D_FUZZ
        w, v = st(g, S, "w"), st(g, S, "v")
        bd, dd, d1 = [g.input("x", ("B", d), dtype)], [w], [v]

        def pick(ts):
            return ts[rng.integers(0, len(ts))]

        for _ in range(rng.integers(4, 10)):
            k = rng.integers(0, 14)
            if k == 0:
                bd.append(pick(bd) @ pick(dd))
            elif k == 1:
                bd.append(pick(bd) @ pick(dd).transpose(0, 1))
            elif k == 2:
                dd.append(pick(bd).transpose(0, 1) @ pick(bd) * 0.1)
            elif k == 3:
                bd.append((pick(bd) + pick(d1)).tanh())
            elif k == 4:
                bd.append(pick(bd).softmax(-1))
            elif k == 5:
                d1.append(pick(bd).sum(0) * 0.1)
            elif k == 6:
                d1.append(pick(dd).amax(0))
            elif k == 7:
                dd.append(pick(dd).transpose(0, 1) * pick(d1).reshape(d, 1) + pick(dd))
            elif k == 8:
                bd.append(lm.cat([pick(bd)[:, 1:], pick(bd)[:, :1]], 1) * 0.5)
            elif k == 9:
                dd.append(pick(dd) @ pick(dd) * 0.3)
            elif k == 10:
                bd.append(lm.where(pick(bd) > 0, pick(bd), pick(d1)))
            elif k == 11:
                d1.append((pick(dd) @ pick(d1)) * 0.3)
            elif k == 12:
                bd.append(pick(bd).flip(1) - pick(bd).mean(1, keepdim=True))
            else:
                dd.append(pick(dd).flip(0).relu())
        outs = []
        for _ in range(rng.integers(1, 4)):
            t = pick([bd, dd, d1][rng.integers(0, 3)])
            m = rng.integers(0, 5)
            if m == 1 and t.ndim == 2:
                t = t.transpose(0, 1)
            elif m == 2 and t.ndim == 2:
                t = t[:, ::2]
            elif m == 3:
                t = t.flip(0)
            elif m == 4 and t.ndim == 1:
                t = t.reshape(1, d).expand(3, d)
            outs.append(t)
        ups = {}
        if rng.random() < 0.8:
            ups[S["w"]] = pick(dd[1:] or dd)
        if rng.random() < 0.8:
            ups[S["v"]] = pick(d1[1:] or d1)
        if rng.random() < 0.2 and ups:
            ups[S["w"]], ups[S["v"]] = w.transpose(0, 1), pick(d1)
        return outs, ups
    return build


def _fuzz_cases():
    for seed in range(60):
        yield pytest.param(seed, lm.float32, id=f"{seed}-float32")
    for seed in range(12):
        for d in (lm.float16, lm.bfloat16):
            yield pytest.param(seed, d, id=f"{seed}-{d.name}")


@pytest.mark.parametrize("seed,dtype", list(_fuzz_cases()))
def test_random_program_over_changing_bindings(seed, dtype):
    """Reproduce: ``_same_as_reference(_random_program(seed, dtype), ...)`` as below."""
    rng = np.random.default_rng([seed, 7])
    d = D_FUZZ
    init = {"w": to_storage(rng.standard_normal((d, d)) * 0.5, dtype), "v": to_storage(rng.standard_normal(d), dtype)}
    calls = [{"x": to_storage(rng.standard_normal((n, d)), dtype)} for n in (3, 1, 0, 5, 3)]
    _same_as_reference(_random_program(seed, dtype), init, calls, dtypes={"w": dtype, "v": dtype}, tol=TOL[dtype])


def test_torch_agrees_on_a_busy_program():
    """The busy program's first call against torch too (the reference could share a numpy mistake)."""
    states = {k: State(v.copy(), name=k) for k, v in _busy_init().items()}
    g = lm.Graph()
    outs, _ = _busy_program(g, states)
    call = _busy_call(3, 0)
    got = lm.compile(outs, backend="cpu")(**call)
    x, i = torch.tensor(call["x"]), torch.tensor(call["i"]).long()
    w, v = torch.tensor(states["w"].data), torch.tensor(states["v"].data)
    h = x @ w
    t = h.T
    e = torch.cat([h, h.exp()], 1)
    want = [t * 2, e[:, ::3], h.sum(0), (t @ x) * 0.1, w[i] + v, torch.nn.functional.pad(h, (1, 1)).amax(1)]
    compare_outputs(outs, got, want)
