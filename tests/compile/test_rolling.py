"""Loop rolling: repeated blocks (forward and backward) roll to one body x trips, the e-graph's share
does not grow with depth, and the stitched program computes exactly what the unrolled graph computes.

Programs are checked by evaluating the stitched Term DAG with the reference interpreter, against the
reference interpreter on the original graph. Most tests run twice: with a one-to-one stand-in for the
e-graph stage (rolling's own logic, nothing rewritten) and with the real one."""

from __future__ import annotations

import importlib
from dataclasses import dataclass

import numpy as np
import pytest

import luminal as lm
from luminal import nn, train
from luminal.backends.reference.interpreter import ReferenceInterpreter
from luminal.compiler.rolling import detect, link, roll, template
from luminal.compiler.term import topological
from luminal.core.kernel_graph import expand_calls
from luminal.core.symbolic import prod
from luminal.core.view import View
from luminal.frontend.graph import Node


@dataclass
class _Result:
    terms: dict
    stats: dict
    order: list | None = None


def one_to_one(roots, **kw):
    """The e-graph stage's contract with no rewrites: one Term per Node."""
    n = len(template.collect(roots))
    stats = {"nodes_before": n, "nodes_after": n, "egraph": {"enodes": n, "eclasses": n}, "rules": {},
             "budget_hit": None, "times": {"optimize": 0.0}, "candidates": []}
    return _Result(template._unoptimized(roots), stats)


@pytest.fixture(params=["one_to_one", "egraph"])
def seen(request, monkeypatch):
    """Runs rolling with the given e-graph stage; records how many nodes each e-graph run was given."""
    inner = one_to_one if request.param == "one_to_one" else roll._optimize
    sizes: list[int] = []

    def spy(roots, **kw):
        sizes.append(len(template.collect(roots)))
        return inner(roots, **kw)

    monkeypatch.setattr(roll, "_optimize", spy)
    return sizes


# models -------------------------------------------------------------------------------------------
def mlp_stack(depth, backward=False, width=16):
    g = lm.Graph()
    x = g.input("x", ("B", width))
    layers = [nn.Linear(width, width) for _ in range(depth)]
    h = x
    for layer in layers:
        h = layer(h).relu()
    return _outputs(g, h, [p for m in layers for p in m.parameters()], backward)


class Block(nn.Module):
    """Pre-norm transformer block: causal multi-head attention and a GELU MLP, both residual."""

    def __init__(self, d, heads):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        h = self.ln1(x)
        x = x + self.attn(h, h, h, need_weights=False, is_causal=True)[0]
        return x + self.fc2(self.fc1(self.ln2(x)).gelu())


def transformer_stack(depth, backward=False, d=16, heads=2, seq=8):
    g = lm.Graph()
    x = g.input("x", ("B", seq, d))
    blocks = [Block(d, heads) for _ in range(depth)]
    y = x
    for b in blocks:
        y = b(y)
    return _outputs(g, y, [p for b in blocks for p in b.parameters()], backward)


def _outputs(g, y, params, backward):
    if not backward:
        return g, [y.node]
    loss = (y * y).mean()
    return g, [loss.node] + [t.node for t in train.grad(loss, params)]


# evaluation ---------------------------------------------------------------------------------------
def run_terms(terms: dict, graph, arrays, env):
    """Evaluate a Term DAG with the reference interpreter (MatMul as the Mul + SumReduce it stands for,
    a Call as its body's terms, an Out as one of their values)."""
    nodes, made = [], {}

    def add(op, srcs, arg, dtype, shape):
        nodes.append(Node(len(nodes), op, srcs, arg, dtype, shape))
        return nodes[-1]

    def call(body, srcs) -> list:
        """The body's output nodes, then its packs' (its inputs bound to ``srcs``)."""
        inner = {id(i): add("Copy", ((s, v),), None, i.dtype, i.shape)  # read through the call's view
                 for i, (s, v) in zip(body.inputs, srcs, strict=True)}
        for b in topological(list(body.outputs)):
            if id(b) not in inner:
                inner[id(b)] = make(b, tuple((inner[id(s)], v) for s, v in b.srcs))
        outs = [inner[id(o)] for o in body.outputs]
        for p in body.packs:  # members end to end: each read across the whole pack (zero outside it), summed
            whole, acc = View.contiguous((p.size,)), None
            for i, off in zip(p.members, p.offsets):
                spread = View((p.size,), (1,), -off, ((off, off + prod(outs[i].shape)),))
                x = add("Copy", ((outs[i], spread),), None, p.dtype, (p.size,))
                acc = x if acc is None else add("Add", ((acc, whole), (x, whole)), None, p.dtype, (p.size,))
            outs.append(acc)
        return outs

    def make(t, srcs):
        if t.op == "Call":
            return call(t.arg.body, srcs)
        if t.op == "Out":
            return srcs[0][0][t.arg]
        if t.op == "MatMul":
            shape = srcs[0][1].shape
            mul = add("Mul", srcs, None, t.dtype, shape)
            return add("SumReduce", ((mul, View.contiguous(shape)),), t.arg, t.dtype, t.shape)
        return add(t.op, srcs, t.arg, t.dtype, t.shape)

    for t in topological(list(terms.values())):
        made[id(t)] = make(t, tuple((made[id(s)], v) for s, v in t.srcs))
    outs = [(made[id(t)], View.contiguous(t.shape)) for t in terms.values()]
    return ReferenceInterpreter(outs, graph.constants)(arrays, env)


def check_same(graph, roots, res, batch=3):
    rng = np.random.default_rng(0)
    env = {"B": batch}
    arrays = {name: rng.standard_normal([env.get(str(d), d) for d in n.shape]).astype(np.float32)
              for name, n in graph.inputs.items()}
    arrays.update({name: s.data for name, s in graph.states.items()})
    arrays.update({name: rng.random([env.get(str(d), d) for d in n.shape], dtype=np.float32)
                   for name, n in graph.random.items()})
    want = ReferenceInterpreter([(t.node, t.layout) for t in map(graph.tensor, roots)], graph.constants)(arrays, env)
    got = run_terms({r.id: res.terms[r.id] for r in roots}, graph, arrays, env)
    for w, g in zip(want, got, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def trips(res):
    return [lp["trips"] for lp in res.stats["loops"]]


# tests --------------------------------------------------------------------------------------------
def test_mlp_stack_rolls_to_one_body(seen):
    g, roots = mlp_stack(8)
    res = roll.optimize_rolled(roots, g)
    assert trips(res) == [8] and "roll" in res.stats["times"]
    assert len(seen) == 1  # the body alone: the relu's constant mask is computed in it, so no rest remains

    def computed(depth):  # non-leaf nodes: a layer adds its own, the ones layers share exist once
        return sum(n.op not in ("Input", "Constant") for n in template.collect(mlp_stack(depth)[1]))

    assert res.stats["loops"][0]["body_nodes"] == computed(9) - computed(8)
    check_same(g, roots, res)


def test_graph_grows_after_a_rolled_compile():
    """Detection builds its columns from the graph's nodes as they are when it runs: the graph stays
    free to grow after a compile, and a second compile sees the new nodes."""
    g = lm.Graph()
    x = g.input("x", ("B", 16))
    layers = [nn.Linear(16, 16) for _ in range(8)]
    h = x
    for layer in layers:
        h = layer(h).relu()
    first = lm.compile(h)
    y = (h * 2.0).sum(1)  # new nodes after the compile
    second = lm.compile([h, y])
    a = np.random.default_rng(0).standard_normal((3, 16)).astype(np.float32)
    want = lm.compile([h, y], backend="reference")(x=a)
    np.testing.assert_allclose(first(x=a), want[0], rtol=1e-5, atol=1e-6)
    for got, w in zip(second(x=a), want, strict=True):
        np.testing.assert_allclose(got, w, rtol=1e-5, atol=1e-5)


def test_mlp_forward_and_backward_roll(seen):
    g, roots = mlp_stack(8, backward=True)
    res = roll.optimize_rolled(roots, g)
    assert trips(res)[0] == 8 and len(trips(res)) >= 2 and min(trips(res)) >= 7
    check_same(g, roots, res)


@pytest.mark.parametrize("backward", [False, True])
def test_transformer_stack_rolls(seen, backward):
    g, roots = transformer_stack(4, backward)
    res = roll.optimize_rolled(roots, g)
    assert trips(res)[0] == 4 and all(t >= 3 for t in trips(res))
    if backward:
        assert len(trips(res)) >= 2  # the backward rolls as loops of its own
    check_same(g, roots, res)


@pytest.mark.parametrize("build, depths", [(mlp_stack, (8, 12)), (transformer_stack, (4, 6))])
@pytest.mark.parametrize("backward", [False, True])
def test_egraph_share_does_not_grow_with_depth(monkeypatch, build, depths, backward):
    """What the e-graph is given (templates + rest) is the same at every depth (rolling alone decides it)."""
    shares = []
    for depth in depths:
        sizes = []
        monkeypatch.setattr(roll, "_optimize", lambda roots, **kw: (sizes.append(len(template.collect(roots))),
                                                                          one_to_one(roots))[1])
        roll.optimize_rolled(*reversed(build(depth, backward)))
        shares.append(sum(sizes))
    assert shares[1] == shares[0]


def test_non_repeating_graph_is_untouched(seen):
    g = lm.Graph()
    x = g.input("x", (4, 8))
    y = nn.Linear(16, 4)(nn.Linear(8, 16)(x).relu()).softmax(-1)
    res = roll.optimize_rolled([y.node], g)
    assert res.stats["loops"] == [] and len(seen) == 1 and seen[0] == res.stats["nodes_before"]
    check_same(g, [y.node], res)


def test_skip_connections_across_layers(seen):
    """Each layer reads the two layers before it: a trip's input may be another trip's inner node."""
    g = lm.Graph()
    x = g.input("x", ("B", 8))
    a, b = x, x.exp()
    for _ in range(10):
        w = nn.Linear(8, 8)
        a, b = b, (w(b) + a * 0.5).tanh()
    res = roll.optimize_rolled([b.node], g)
    assert trips(res) and trips(res)[0] >= 8
    check_same(g, [b.node], res)


def test_shared_weights_and_several_outputs(seen):
    """One weight read by every layer (a leaf shared by all trips), every layer's output a root, and
    an input leaf a root too; the stitched program has one term per distinct leaf."""
    g = lm.Graph()
    x = g.input("x", ("B", 8))
    shared = nn.Linear(8, 8)
    outs, h = [x.node], x
    for _ in range(6):
        h = (shared(h) + nn.Linear(8, 8)(h)).sigmoid()
        outs.append(h.node)
    res = roll.optimize_rolled(outs, g)
    assert trips(res) == [6]
    check_same(g, outs, res)
    leaves = [t for t in topological(list(res.terms.values())) if t.op in ("Input", "Constant")]
    assert len(leaves) == len({(t.op, t.arg) for t in leaves})


def test_dropout_masks_differ_per_trip(seen):
    """Each layer draws its own random input: a leaf that varies by trip, like a weight."""
    g = lm.Graph()
    x = g.input("x", ("B", 16))
    h = x
    for _ in range(6):
        h = nn.Dropout(0.25)(nn.Linear(16, 16)(h).relu())
    res = roll.optimize_rolled([h.node], g)
    assert trips(res) == [6] and len(g.random) == 6
    check_same(g, [h.node], res)


def test_first_layer_wired_differently(seen):
    """Layer 0 reads the stack's input where the others read their own node: that position is not the
    same edge in every trip, so it leaves the body (a trip may not read itself from outside)."""
    g = lm.Graph()
    x = g.input("x", ("B", 8))
    prev, h = x, x
    for i in range(8):
        h = nn.Linear(8, 8)(h).tanh()
        h = (h * (x if i == 0 else h)).exp() + prev
        prev = h
    res = roll.optimize_rolled([h.node], g)
    assert trips(res) and trips(res)[0] >= 7
    check_same(g, [h.node], res)


def test_search_times_whole_programs():
    """Each run's candidates are timed as the whole stitched program (every root present)."""
    g, roots = mlp_stack(8)
    calls = []

    def timer(terms):
        calls.append(set(terms))
        return float(len(topological(list(terms.values()))))

    res = roll.optimize_rolled(roots, g, search=2, timer=timer)
    assert trips(res) == [8] and calls and all(c == {r.id for r in roots} for c in calls)
    assert len(res.stats["candidates"]) == len(calls)
    check_same(g, roots, res)


def test_compiled_stack_matches_reference():
    """End to end: ``lm.compile`` rolls the stack (forward + backward) and runs it like the reference."""
    g, roots = mlp_stack(8, backward=True)
    outs = [g.tensor(r) for r in roots]
    x = np.random.default_rng(1).standard_normal((5, 16)).astype(np.float32)
    f = lm.compile(outs, backend="cpu")
    assert [lp["trips"] for lp in f.report(show=False).loops][:1] == [8]
    for got, want in zip(f(x=x), lm.compile(outs, backend="reference")(x=x), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.slow  # the full tier: times the e-graph's alternatives
def test_search_compiles_a_rolled_stack_end_to_end():
    """``search=N`` times whole rolled programs on the CPU backend (packs, calls and all) and keeps one
    that computes what the reference computes."""
    g, roots = transformer_stack(2, backward=True)
    outs = [g.tensor(r) for r in roots]
    f = lm.compile(outs, backend="cpu", search=2, seed=1)
    assert f.report(show=False).loops
    x = np.random.default_rng(4).standard_normal((2, 8, 16)).astype(np.float32)
    for got, want in zip(f(x=x), lm.compile(outs, backend="reference")(x=x), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_outputs_only_later_calls_read_are_packed():
    """A forward layer's saved activations are read by the backward's calls alone: each forward call
    writes them into one pack per dtype (not a buffer each), which the backward's calls read through
    views of their parts; the parameter gradients, which the roots read, keep buffers of their own.
    Expanded, every part a call reads is the Buffer the earlier call wrote."""
    g, roots = transformer_stack(4, backward=True)
    outs = [g.tensor(r) for r in roots]
    f = lm.compile(outs, backend="cpu")
    kg = f.runner.program.kg
    fwd, bwd = kg.bodies()[:2]
    assert sum(len(p) for p in fwd.packs) > 10 and len(fwd.results) <= 2  # the residual stream, the output
    assert len(bwd.results) >= 12  # the block's parameter gradients: program outputs
    calls = [k for k in kg.kernels if k.body is fwd]
    assert len(calls) == 4 and all(len(k.outputs) == len(fwd.results) + len(fwd.packs) for k in calls)
    packs = {b for k in calls for b, _ in k.outputs[len(fwd.results):]}
    read = [(b, v) for k in kg.kernels if k.body is bwd for b, v in k.inputs if b in packs]
    assert read and all(v.shape != b.shape for b, v in read)  # parts, not whole packs
    written: set = set()
    for k in expand_calls(kg.kernels):
        assert all(b.base is None or b.id in written for b, _ in k.inputs), k
        written.update(b.id for b, _ in k.outputs)
    x = np.random.default_rng(1).standard_normal((3, 8, 16)).astype(np.float32)
    for got, want in zip(f(x=x), lm.compile(outs, backend="reference")(x=x), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("backward", [False, True])
def test_rolled_program_fuses_nearly_like_the_unrolled_one(monkeypatch, backward):
    """A body's inputs and outputs are buffers (its kernels are built once, called per trip), so a value
    crossing a trip boundary is stored where the unrolled program may have recomputed it in its
    readers: a few more elementwise kernels per trip, never another reduction or matmul. (Measured on
    this stack with the backward: 73 rolled against 68 unrolled elementwise kernels while self-attention
    projected q, k and v apart; 64 against 56 with the packed projection, which took kernels off both,
    more off the unrolled one: its three slices' gradients fuse across blocks there.)"""
    g, roots = transformer_stack(3, backward)
    outs = [g.tensor(r) for r in roots]
    rolled = lm.compile(outs, backend="cpu").report(show=False)
    monkeypatch.setattr(detect, "MIN_SAVED", 10**9)
    unrolled = lm.compile(outs, backend="cpu").report(show=False)
    assert rolled.loops and not unrolled.loops
    trips = sum(lp["trips"] for lp in rolled.loops)
    for kind, n in unrolled.kernels_by_kind.items():
        assert rolled.kernels_by_kind[kind] <= n + (2 * trips if kind == "elementwise" else 0), kind
    assert set(rolled.kernels_by_kind) == set(unrolled.kernels_by_kind)


def test_loop_invariant_kernels_run_once(monkeypatch):
    """A body kernel that reads none of the trip's inputs (the causal mask, from constants and an
    Arange) is emitted at the first call only: every later trip reads its buffer."""
    pipeline = importlib.import_module("luminal.compiler.pipeline")
    made = []
    build = pipeline.build_kernels
    monkeypatch.setattr(pipeline, "build_kernels", lambda *a, **k: made.append(build(*a, **k)) or made[-1])
    for depth in (2, 4):
        g, roots = transformer_stack(depth)
        lm.compile([g.tensor(r) for r in roots], backend="cpu")
    for kg in made:
        invariant = [k for k in kg.kernels
                     if all(b.kind in ("const", "iota") for b, _ in k.inputs + k.epilogue_inputs)]
        assert len(invariant) == 1 and "LessThan" in invariant[0].fused


def test_unstitchable_result_falls_back_to_one_run(seen, monkeypatch):
    """Should an extracted template read an input its value does not depend on and so close a cycle
    between trips, the graph is optimised whole instead."""
    g, roots = mlp_stack(8)

    def cycle(self):
        raise link._Cycle()

    monkeypatch.setattr(link._Link, "run", cycle)
    res = roll.optimize_rolled(roots, g)
    assert res.stats["loops"] == [] and seen[-1] == res.stats["nodes_before"]
    check_same(g, roots, res)


def test_scratch_read_through_a_padded_view_is_fresh_in_every_call():
    """A body's scratch is the same storage in every call; a masked (padded) read of it is a copy
    made when it is read, so each call must copy its own trip's values, not reuse the first call's."""
    g = lm.Graph()
    x = g.input("x", ("B", 16))
    layers = [nn.Linear(16, 16) for _ in range(4)]
    h = x
    for layer in layers:
        p = layer(h).relu().pad((1, 1), value=0.5)
        h = (p[:, :-2] + p[:, 2:]).tanh()  # two shifted, padded reads of the matmul's result
    f = lm.compile([h], backend="cpu")
    assert [lp["trips"] for lp in f.report(show=False).loops] == [4]
    [body] = f.runner.program.kg.bodies()
    assert body.scratch  # the matmul's result lives within a call
    xv = np.random.default_rng(2).standard_normal((3, 16)).astype(np.float32)
    np.testing.assert_allclose(f(x=xv), lm.compile([h], backend="reference")(x=xv), rtol=1e-5, atol=1e-6)


def test_a_rolled_body_of_copies_returns_its_arguments():
    """64 per-step values, then 64 copies of them: the copies roll into a loop whose body the rewrites
    empty (its outputs are its inputs, read by no kernel). Building the body's call then failed with a
    KeyError (found by the recurrent layers, which copy each step's output); the call now returns its
    arguments as they are."""
    from luminal.frontend.ops.core import prim

    g = lm.Graph()
    x = g.input("x", (64, "B", 16))
    steps = [(x[t] * 2.0).tanh() for t in range(64)]
    out = lm.stack([prim("Copy", h) for h in steps], 0)
    xv = np.random.default_rng(0).standard_normal((64, 3, 16)).astype(np.float32)
    np.testing.assert_allclose(lm.compile(out)(x=xv), np.tanh(xv * 2.0), rtol=1e-6, atol=1e-6)


def _passing_on_stack(depth=10):
    """Two rolled bodies. A's trips compute u and v, read by B's trips alone, so A packs them (v at an
    offset in the pack); B's trips return ``v * 1.0``, which the rewrites reduce to v itself: a call that
    returns its argument as it is."""
    g = lm.Graph()
    x = g.input("x", (4,))
    h, saved = x, []
    for _ in range(depth):  # body A
        u = (h * 1.5).sin()
        v = (u * 2.0).sin()
        h = u + v
        saved.append((u, v))
    ds, cs = [], []
    for u, v in saved:  # body B
        c = v * 1.0
        ds.append(((c * u).sin() * 2.0).sin())
        cs.append(c)
    return g, x, lm.stack(ds, 0), lm.stack(cs, 0)


@pytest.mark.parametrize("backend", ["cpu", pytest.param("cuda-emulated", marks=pytest.mark.slow)])
def test_a_value_a_call_passes_on_is_not_packed(backend):
    """A call that returns an argument as it is (``calls.py``'s "param" return) hands its readers the
    argument's buffer whole, not the view the call read it through. Packing A's v, which only B's calls
    read, made that argument a part of a pack (at an offset): B's readers then read the pack from
    element 0, A's u. Such a value is no longer packed (``link._passed``). Values and the gradient,
    against the reference interpreter."""
    g, x, d, c = _passing_on_stack()
    y = (d * c).sum()
    outs = [d, c, y, train.grad(y, x)]
    f = lm.compile(outs, backend=backend)
    assert [lp["trips"] for lp in f.report(show=False).loops][:2] == [9, 10]
    kg = f.runner.program.kg
    assert kg.bodies()[0].packs  # A still packs the values B's calls read through views of their parts
    xv = np.random.default_rng(0).standard_normal(4).astype(np.float32)
    for got, want in zip(f(x=xv), lm.compile(outs, backend="reference")(x=xv), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * max(1.0, float(np.abs(want).max())))


@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [False, True])
def test_grid_sample_bicubic_grid_gradient_asked_apart(padding, align_corners):
    """Found by a parity audit: ``F.grid_sample(mode="bicubic")``'s gradient for the grid, asked for by a
    ``train.grad`` call of its own (as tests/parity.py's ``check`` does), rolls into two bodies, the
    second passing on values the first packed (as in the test above): the compiled gradient was wrong
    (for every padding mode and ``align_corners``)."""
    from luminal.nn import functional as F

    a = np.array([[[[0.5, -1.0], [2.0, 0.25]]]], np.float32)
    grid = np.array([[[[-1.2430525, -0.7895685]]]], np.float32)
    g = lm.Graph()
    x, gd = g.input("x", a.shape), g.input("g", grid.shape)
    loss = F.grid_sample(x, gd, mode="bicubic", padding_mode=padding, align_corners=align_corners).sum()
    outs = [train.grad(loss, x), train.grad(loss, gd)]
    f = lm.compile(outs, backend="cpu")
    assert len(f.report(show=False).loops) >= 2
    for got, want in zip(f(x=a, g=grid), lm.compile(outs, backend="reference")(x=a, g=grid), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
