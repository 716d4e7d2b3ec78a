"""The caches that make a compile cheaper give what the uncached code gave.

A View keeps its equality key and hash; an ``ENode`` its hash; extraction's ``Costs`` prices
e-nodes alike once per compile; ``Values.at`` works an index tuple's key out once; egglog string
literals are made once. None of them may hand one view's, e-node's, index's or string's result to
another.
"""

from __future__ import annotations

import pickle

import luminal as lm
from luminal.compiler.egraph import lower as lowering
from luminal.compiler.egraph import runner, schedule
from luminal.compiler.egraph.budget import Budget
from luminal.compiler.egraph.cost import CPU
from luminal.compiler.egraph.egraph_read import ENode, read
from luminal.compiler.egraph.extract import Costs
from luminal.core.symbolic import Sym
from luminal.core.view import View


def test_a_views_cached_key_tells_pads_and_strides_apart_and_is_not_pickled():
    a = View((2, 3), (3, 1), 0, ((0, 1), (0, 3)), 0.0)
    b = View((2, 3), (3, 1), 0, ((0, 1), (0, 3)), -0.0)
    c = View((2, 3), (3, 1), 0, ((0, 1), (0, 3)), 0.0)
    nan1, nan2 = (View((2,), (1,), 0, ((0, 1),), float("nan")) for _ in range(2))
    for _ in range(2):  # before and after the key and hash are cached
        assert a == c and hash(a) == hash(c) and a != b and a == a
        assert nan1 == nan2 and hash(nan1) == hash(nan2)
        assert View.contiguous((2, 3)) == View((2, 3), (3, 1)) and View.contiguous((2, 3)) != View((3, 2), (2, 1))
    state = a.__getstate__()
    assert "_k" not in state and "_hash" not in state
    back = pickle.loads(pickle.dumps(a))
    assert back == a and hash(back) == hash(a)
    assert View.contiguous((2, 3)) is not View.contiguous((2, 3))  # each a View of its own (backends key by id)


def test_contiguous_views_are_recognised_with_and_without_size_one_strides():
    assert View.contiguous((2, 3)).is_contiguous()
    assert View((2, 1, 3), (3, 7, 1)).is_contiguous()  # a size-1 dim's stride does not matter
    assert not View((2, 3), (1, 2)).is_contiguous()
    assert not View((2, 3), (3, 1), 1).is_contiguous()
    n = Sym.var("N")
    assert View.contiguous((n, 3)).is_contiguous() and not View((n, 3), (1, n)).is_contiguous()


def test_enode_hash_is_the_dataclass_hash_of_its_fields():
    e = ENode(1, "Add", None, (2, 3), (0, 1))
    assert hash(e) == hash((1, "Add", None, (2, 3), (0, 1)))
    assert e == ENode(1, "Add", None, (2, 3), (0, 1)) and e != ENode(1, "Add", None, (3, 2), (0, 1))
    assert len({e, ENode(1, "Add", None, (2, 3), (0, 1)), ENode(1, "Mul", None, (2, 3), (0, 1))}) == 2


def test_costs_priced_once_per_kind_equal_each_enodes_own_price():
    """Every e-node of a program whose ops repeat over shapes, dtypes and views costs exactly what the
    model says for it alone."""
    g = lm.Graph()
    x = g.input("x", (4, 8))
    d = g.input("d", (4, 8), dtype=lm.float64)
    w = g.input("w", (8, 8))
    h = ((x @ w).relu() @ w).exp() + x.permute(1, 0).permute(1, 0) * 2.0
    y = (h.sum(-1) + h.amax(-1)).mean() + (d * d).sum().float() + x.T.sum()
    low = lowering.lower([y.node])
    with runner.session() as eg:
        runner.run(eg, "test", commands=lowering.commands(low))
        schedule.run(eg, Budget(), len(low.items), {})
        eg_read = read(eg, low)
    costs = Costs(eg_read, low, CPU)
    n = 0
    for c, es in eg_read.classes.items():
        shape, dtype = costs.info[c]
        for e in es:
            reads = [(low.views[v], costs.info[k][1].itemsize) for k, v in zip(e.kids, e.views)]
            assert costs.own[e] == CPU.enode(e.op, shape, dtype, reads, e.arg), e
            n += 1
    assert n == eg_read.n_enodes and len(set(costs.own.values())) > 5


def test_lowered_values_at_fresh_index_tuples_are_never_another_index_s():
    """``Values.at`` keys its memo by the ids of an index's values, worked out once per index tuple:
    a tuple made for one call and dropped must not lend its key to the next one at its address."""
    from luminal.codegen import ir
    from luminal.codegen.lower import Values
    from luminal.core import dtype as dt
    from luminal.core.kernel_graph import Expr

    load = Expr("Load", (), 0, dt.float32)
    e = Expr("Mul", (Expr("Exp2", (load,), None, dt.float32), load), None, dt.float32)
    values = Values(lambda x, idx: ir.V("load", dt.float32, idx, ("p0", 0.0)), lambda x: (8,))
    for i in range(200):
        v = values.at(e, (ir.var(f"i{i}"),))  # a fresh tuple each time, freed after the call
        assert v.op == "Mul" and v.args[1].args[0].arg == f"i{i}" and v.args[0].args[0].args[0].arg == f"i{i}"


def test_string_literals_are_made_once_each_and_stay_their_own_string(monkeypatch):
    a, b = lowering._string("Add"), lowering._string("Mul")
    assert lowering._string("Add") is a and "'Add'" in repr(a) and "'Mul'" in repr(b)
    assert "'Add'" in repr(lowering._expr(("Bin", "Add", ("n", 1), ("w", 2), ("n", 3), ("w", 4))))
    monkeypatch.setattr(lowering, "_STRINGS", {})
    monkeypatch.setattr(lowering, "_MAX_STRINGS", 2)
    made = [lowering._string(f"k{i}") for i in range(5)]  # past the bound: made each time, still right
    assert [f"'k{i}'" in repr(m) for i, m in enumerate(made)] == [True] * 5 and len(lowering._STRINGS) == 2
