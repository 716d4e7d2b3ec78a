"""The compiler's fast passes agree with their plain definitions: the memory plan's best fit, the
kernel merge's path test, the post-order walks and the symbolic dims a kernel graph needs.

Each fast version does the same work in fewer steps (a sorted free list, a search from both ends,
iterators instead of re-pushed entries, dims collected while kernels are built); these tests pin
down that the answers are unchanged, on random graphs and on compiled models."""

from __future__ import annotations

import random
from types import SimpleNamespace

import numpy as np
import pytest
from test_rolling import Block  # the transformer block the rolling tests use

import luminal as lm
from luminal import train
from luminal.compiler import kernels
from luminal.compiler.memory import lifetimes
from luminal.compiler.rolling import detect
from luminal.compiler.term import topological
from luminal.core.kernel_graph import dims_needed, expand_calls, nbytes
from luminal.core.walk import postorder


# plain definitions ----------------------------------------------------------------------------------
def plain_postorder(roots, children):
    """Depth first, first child first, each node once (the stack re-pushes nodes; the walk must not)."""
    order, seen = [], set()
    stack = [(r, False) for r in reversed(list(roots))]
    while stack:
        x, done = stack.pop()
        if done:
            order.append(x)
        elif id(x) not in seen:
            seen.add(id(x))
            stack.append((x, True))
            stack.extend((c, False) for c in reversed(list(children(x))) if id(c) not in seen)
    return order


def plain_path(d1, d2, consumers) -> bool:
    """A kernel other than d1 and d2 on a path from d1 to d2: everything d1 reaches, then look."""
    seen, stack = set(), [c for c in consumers[d1] if c is not d2]
    while stack:
        x = stack.pop()
        if x in seen:
            continue
        seen.add(x)
        stack.extend(consumers[x])
    return any(d2 in consumers[x] for x in seen)


def plain_plan(kg) -> dict:
    """Linear scan in kernel order; a new temp takes the smallest free slot that holds it (else the
    largest free one), ties to the lowest slot; a slot frees after the kernel of its last read. A
    body's scratch is first planned the same way over the body's kernels; each of those slots
    then takes part as one temp living from the body's first call to its last."""
    probe = dict.fromkeys(kg.dims, 64)
    life = lifetimes(kg)
    items = [(*life[b.id], nbytes(b, probe), [b]) for b in kg.buffers if b.id in life]
    for r in kg.bodies():
        calls = [i for i, k in enumerate(kg.kernels) if k.body is r]
        spans = []
        for b in r.scratch:
            start = min(i for i, k in enumerate(r.kernels) if any(o is b for o, _ in k.outputs))
            reads = [i for i, k in enumerate(r.kernels) if any(x is b for x, _ in k.inputs + k.epilogue_inputs)]
            spans.append((start, max([start, *reads]), nbytes(b, probe), [b]))
        items += [(calls[0], calls[-1], est, bufs) for est, bufs in plain_scan(spans)]
    return {b.id: s for s, (_, bufs) in enumerate(plain_scan(items)) for b in bufs}


def plain_scan(items) -> list:
    """``items``: (first step, last step, bytes, buffers). Returns [(bytes, buffers)] per slot."""
    est, members, slot_of, free = [], [], {}, []
    for i in range(max((end for _, end, _, _ in items), default=-1) + 1):
        for j, (start, _, size, bufs) in enumerate(items):
            if start != i:
                continue
            fits = [s for s in free if est[s] >= size]
            s = min(fits, key=lambda s: (est[s], s)) if fits else \
                max(free, key=lambda s: (est[s], -s)) if free else None
            if s is None:
                s = len(est)
                est.append(0)
                members.append([])
            else:
                free.remove(s)
            est[s] = max(est[s], size)
            members[s] += bufs
            slot_of[j] = s
        free += [slot_of[j] for j, (_, end, _, _) in enumerate(items) if end == i]
    return list(zip(est, members))


# models -----------------------------------------------------------------------------------------------
def model(depth, backward):
    g = lm.Graph()
    y = g.input("x", ("B", 8, 16))
    blocks = [Block(16, 2) for _ in range(depth)]
    for b in blocks:
        y = b(y)
    if not backward:
        return [y]
    loss = (y * y).mean()
    return [loss, *train.grad(loss, [p for b in blocks for p in b.parameters()])]


def program(depth, backward):
    return lm.compile(model(depth, backward), backend="cpu").runner.program


# tests --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("depth, backward", [(1, False), (3, True)])
def test_memory_plan_is_the_plain_best_fit(depth, backward):
    prog = program(depth, backward)
    assert prog.plan.slot_of == plain_plan(prog.kg)


@pytest.mark.parametrize("depth, backward", [(1, False), (3, True)])
def test_memory_plan_never_overwrites_a_value_still_read(depth, backward):
    """Run the program's buffers through their slots as it runs (calls expanded): every read finds the
    value it reads still in its slot, no kernel writes into a slot it reads, and the results are in
    theirs at the end. (Rolled stacks: a body's scratch is placed once, in slots every call reuses, and a loop-invariant
    value computed before the first call must survive the last.)"""
    prog = program(depth, backward)
    kg, slot_of = prog.kg, prog.plan.slot_of
    assert kg.bodies() if depth > 1 else True
    holds: dict = {}  # slot -> id of the buffer last written into it

    def check(b):
        assert b.id not in slot_of or holds.get(slot_of[b.id]) == b.id, f"{b} was overwritten"

    def planned(b):  # a part of a pack lives in its pack's slot
        return b if b.base is None else b.base

    def apart(a, b):  # two parts of one pack
        return a.base is not None and a.base is b.base and a is not b

    for k in expand_calls(kg.kernels):
        reads = [b for b, _ in k.inputs + k.epilogue_inputs]
        for b in reads:
            check(planned(b))
        for w, _ in k.outputs:
            b = planned(w)
            if b.id in slot_of:
                assert all(slot_of.get(planned(r).id) != slot_of[b.id] or apart(r, w) for r in reads), \
                    f"{k} writes over its input"
                holds[slot_of[b.id]] = b.id
    for b in [b for b, _ in kg.outputs] + [b for _, b, _ in kg.updates]:
        check(b)


@pytest.mark.parametrize("depth, backward", [(1, False), (3, True)])
def test_dims_from_the_builder_match_a_walk_of_every_expression(depth, backward):
    kg = program(depth, backward).kg
    assert kg.dims == dims_needed(kg) == ("B",)


def random_dag(rng, n, p_edge):
    nodes = [SimpleNamespace(srcs=()) for _ in range(n)]
    for i, x in enumerate(nodes):
        x.srcs = tuple((nodes[j], None) for j in range(i) if rng.random() < p_edge)
    return nodes


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("dead_chain", [0, 3, 40])
def test_liveness_by_array_passes_is_plain_reachability(seed, dead_chain):
    """``detect._live`` drops unread nodes pass by pass (then sweeps, past a long chain of them)."""
    rng = random.Random(seed)
    srcs = [()]
    for i in range(1, 150):
        srcs.append(tuple(sorted(rng.sample(range(i), min(i, rng.randint(0, 3))))))
    for _ in range(dead_chain):  # each reads the one before: unread by the roots, dropped one per pass
        srcs.append((len(srcs) - 1,))
    roots = [SimpleNamespace(id=i) for i in rng.sample(range(150), 3)]
    arity = np.array([len(s) for s in srcs])
    flat = np.array([i for s in srcs for i in s], np.int64)
    reader = np.repeat(np.arange(len(srcs)), arity)
    want, stack = set(), [r.id for r in roots]
    while stack:
        i = stack.pop()
        if i not in want:
            want.add(i)
            stack.extend(srcs[i])
    got = detect._live(reader, flat, srcs, roots)
    assert set(np.flatnonzero(got).tolist()) == want


@pytest.mark.parametrize("seed", range(5))
def test_walks_are_the_plain_post_order(seed):
    rng = random.Random(seed)
    nodes = random_dag(rng, 60, 0.08)
    roots = rng.sample(nodes, 5) + [nodes[-1]]
    want = plain_postorder(roots, lambda x: [s for s, _ in x.srcs])
    assert [id(x) for x in topological(roots)] == [id(x) for x in want]
    assert [id(x) for x in postorder(roots, lambda x: [s for s, _ in x.srcs])] == [id(x) for x in want]


class _D:
    """A draft as the path test sees it: the range of its terms' topological positions."""

    def __init__(self, i):
        self.lo = self.hi = i


@pytest.mark.parametrize("seed", range(5))
def test_path_search_from_both_ends_is_plain_reachability(seed):
    rng = random.Random(seed)
    ds = [_D(i) for i in range(40)]
    consumers = {d: set() for d in ds}
    producers = {d: set() for d in ds}
    for i, a in enumerate(ds):
        for b in ds[i + 1:]:
            if rng.random() < 0.1:
                consumers[a].add(b)
                producers[b].add(a)
    for d1 in ds:
        for d2 in consumers[d1]:
            assert kernels._path(d1, d2, consumers, producers) == plain_path(d1, d2, consumers)
