"""One record per primitive (``core/primitives.py``), and every facet covering every record.

A primitive's facets: its numpy semantics (``numpy_ops``: the reference interpreter, constant folding
and the cpu backend call the same functions), its dtype rule, its fusion kind, its egglog
constructor, its gradient rule (``train/autograd.py``'s ``RULES``) and each registered backend's
lowering. :func:`facet_gaps` lists, per facet, the records it misses; it is empty for the real
registry, and names a record added without the edits its facets need.
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest

import luminal as lm
from luminal.backends.cuda import render
from luminal.backends.reference.interpreter import ReferenceInterpreter
from luminal.codegen import llvm
from luminal.compiler.egraph import fold, fusion, lower, schema
from luminal.core import dtype as dt
from luminal.core import numpy_ops as ops
from luminal.core import primitives as P
from luminal.core.backend import backend_names, get_backend
from luminal.core.kernel_graph import KERNEL_KINDS
from luminal.core.view import View
from luminal.frontend.ops import where
from luminal.train import autograd

ARITY = {"Inp": 0, "Cst": 0, "Ara": 0, "Un": 1, "Bin": 2, "Whr": 3, "Red": 1, "Gat": 2, "Sct": 3}


def _dtype_rule_ok(p) -> bool:
    if p.dtype.startswith("like "):
        return p.dtype[5:] in p.inputs
    return p.dtype in P.DTYPE_RULES


def _numpy_ok(p) -> bool:
    """A leaf has no numpy function (it is bound, literal or ``np.arange``); Copy is its operand's
    value; every other primitive has a ufunc or names a ``numpy_ops`` function, not both."""
    if p.fusion == "leaf" or p.name == "Copy":
        return p.ufunc is None and p.numpy_op is None
    if p.numpy_op is not None:
        return p.ufunc is None and callable(getattr(ops, p.numpy_op, None))
    return callable(p.ufunc) and p.egglog in ("Un", "Bin")


def _grad_ok(name, p) -> bool:
    rule = autograd.RULES.get(name)
    return rule is None if p.grad is None else rule is not None and rule.__name__ == p.grad


def _operand_kinds(p) -> set:
    """The kinds of operand (float, int, bool) an elementwise primitive takes: a float primitive floats;
    the others ints too, and bools where their numpy semantics has them."""
    if p.operands == "x (float)":
        return {"f"}
    types = getattr(p.ufunc, "types", None)  # (a numpy ufunc's loops; a function of our own takes any dtype)
    bools = p.bool_ufunc is not None or types is None or any(t.startswith("??") for t in types)
    return {"f", "i"} | ({"b"} if bools else set())


def _op_tables(tables: dict):
    """The facet of one target's op tables (``{kind: {primitive name: rendering}}``): every elementwise
    primitive computed by value (not Copy, whose value is its operand's, nor Cast, a conversion of its
    own) has an entry for each kind of operand it takes."""
    def ok(n, p):
        if p.fusion != "elementwise" or n in ("Copy", "Cast"):
            return True
        return all(n in tables[k] for k in _operand_kinds(p))
    return ok


def facet_gaps(records) -> dict[str, list[str]]:
    """Per facet, the names of the ``records`` it does not cover."""
    checks = {
        "dtype rule": lambda n, p: _dtype_rule_ok(p),
        "numpy semantics": lambda n, p: _numpy_ok(p),
        "numpy_ops tables": lambda n, p: ops.UFUNCS.get(n) is p.ufunc and ops._BOOL.get(n) is p.bool_ufunc,
        "fusion kind": lambda n, p: p.fusion in P.FUSION_KINDS and (p.fusion == "leaf" or p.fusion in KERNEL_KINDS),
        "fusion ruleset": lambda n, p: (fusion.kind(n) == "ew") == (p.fusion == "elementwise")
        and (p.fusion != "elementwise" or n in fusion.ACCEPTS),
        "egglog constructor": lambda n, p: p.egglog in schema.CONSTRUCTORS and ARITY.get(p.egglog) == len(p.inputs)
        and (p.egglog in lower._TERMS or p.egglog in lower._LEAVES),
        "gradient rule": _grad_ok,
        "llvm op tables": _op_tables({"f": llvm.FLOAT_OPS, "i": llvm.INT_OPS, "b": llvm.BOOL_OPS}),
        "cuda op tables": _op_tables({"f": render.FLOAT_C, "i": render.INT_C, "b": render.BOOL_C}),
    }
    gaps = {facet: [n for n, p in records.items() if not ok(n, p)] for facet, ok in checks.items()}
    for b in backend_names():
        gaps[f"backend {b!r}"] = [n for n in records if not get_backend(b).lowers(n)]
    return gaps


def test_no_facet_misses_a_primitive():
    assert facet_gaps(P.PRIMITIVES) == {facet: [] for facet in facet_gaps({})}


def test_a_primitive_added_as_a_record_alone_is_reported_missing():
    """A new unary primitive, recorded but not wired (no ufunc in the numpy tables, no gradient rule,
    no lowering): every facet that needs an edit beyond the record names it."""
    tan = dataclasses.replace(P.PRIMITIVES["Sin"], name="Tan", ufunc=np.tan, grad="_tan")
    gaps = facet_gaps({"Tan": tan})
    needs_edit = {"numpy_ops tables", "fusion ruleset", "gradient rule", "llvm op tables", "cuda op tables",
                  *(f"backend {b!r}" for b in backend_names())}
    assert {facet for facet, names in gaps.items() if names} == needs_edit


@pytest.mark.parametrize("name", backend_names())
def test_every_registered_backend_lowers_every_primitive(name):
    backend = get_backend(name)
    assert [p for p in P.PRIMITIVES if not backend.lowers(p)] == []
    assert backend.primitives <= P.PRIMITIVES.keys()  # no lowering of a primitive that is not one


def test_gradient_rules_are_the_records():
    """``RULES`` has exactly the rules the records name, under their names."""
    assert {n: f.__name__ for n, f in autograd.RULES.items()} == {n: p.grad for n, p in P.PRIMITIVES.items() if p.grad}


def test_docstring_tables_are_the_records():
    assert P.table() in P.__doc__
    assert P.facet_table() in P.__doc__


def test_name_groups_partition_the_primitives():
    groups = P.LEAVES + P.UNARY_FLOAT + P.BINARY + P.REDUCE + P.OTHER
    assert sorted(groups) == sorted(P.PRIMITIVES)
    assert P.ELEMENTWISE == {n for n, p in P.PRIMITIVES.items() if p.fusion == "elementwise"}
    assert set(P.UNARY_FLOAT) | set(P.BINARY) <= P.ELEMENTWISE
    assert all(P.PRIMITIVES[n].operands == "x (float)" for n in P.UNARY_FLOAT)


def test_schema_table_lists_each_constructors_primitives():
    """The constructor table of ``schema.py``'s docstring agrees with the records' ``egglog``."""
    listed = {}
    for line in schema.__doc__.splitlines():
        m = re.match(r"\| ``\((\w+)[^|]*\|(.*)", line)
        if m and m.group(1) in ARITY:
            listed[m.group(1)] = {w for w in re.findall(r"\w+", m.group(2)) if w in P.PRIMITIVES}
    want = {}
    for n, p in P.PRIMITIVES.items():
        want.setdefault(p.egglog, set()).add(n)
    assert listed == want


def _every_primitive():
    """A graph in which the frontend's own ops make a node of every primitive."""
    g = lm.Graph()
    x = g.input("x", (3, 4))
    y = g.input("y", (3, 4))
    idx = g.input("idx", (3, 4), dtype=lm.int32)
    h = x.half()
    outs = [x.log2(), x.exp2(), x.sin(), x.sqrt(), x.reciprocal(), h.sqrt(), x + y, x * y, x.fmod(y),
            x.maximum(y), x < y, where(x < y, x, y), x.sum(0), x.amax(1), x.gather(1, idx),
            x.scatter_add(1, idx, y), x.T.contiguous(), x.detach(), x.cast(lm.int32) + g.arange(4),
            (x + 1.5).bfloat16()]
    return g, outs


def test_frontend_nodes_follow_the_dtype_rules():
    g, _ = _every_primitive()
    seen = set()
    for n in g.nodes:
        p = P.PRIMITIVES[n.op]
        seen.add(n.op)
        assert p.result_dtype([s.dtype for s, _ in n.srcs], n.arg, declared=n.dtype) is n.dtype, n
        assert len(n.srcs) == len(p.inputs), n
    assert seen == P.PRIMITIVES.keys()


def test_lowering_uses_each_records_constructor():
    g, outs = _every_primitive()
    low = lower.lower([t.node for t in outs])
    lowered = {it.op for it in low.items}
    assert lowered == P.PRIMITIVES.keys()
    for it in low.items:
        assert it.term[0] == P.PRIMITIVES[it.op].egglog, it


def _scalar_cases():
    """(primitive, operand dtypes, arg) for folding each elementwise primitive on scalars."""
    floats = (dt.float32, dt.float16, dt.bfloat16, dt.float64)
    for name, p in P.PRIMITIVES.items():
        if p.fusion != "elementwise":
            continue
        if name == "Cast":
            for src in (*floats, dt.int32, dt.bool_):
                for dst in (*floats, dt.int32, dt.bool_):
                    yield name, (src,), dst
        elif name == "Where":
            for d in (*floats, dt.int32, dt.bool_):
                yield name, (dt.bool_, d, d), None
        elif p.egglog == "Un":
            for d in floats + ((dt.int32, dt.bool_) if name == "Copy" else ()):
                yield name, (d,), None
        else:
            for d in (*floats, dt.int32, dt.bool_):
                if not (name == "Mod" and d is dt.bool_):
                    yield name, (d, d), None


VALUES = (0.7, -3.25, 0.0, -0.0, 7.0, float("inf"), float("nan"), 65504.0, 2.5e-8)


@pytest.mark.parametrize("name", sorted(P.ELEMENTWISE))
def test_folding_is_the_reference_bit_for_bit(name):
    """Constant folding (compiler) and the reference interpreter compute every elementwise primitive
    with the same numpy calls: the same bits, NaNs and signed zeros included."""
    rng = np.random.default_rng(0)
    for op, ins, arg in _scalar_cases():
        if op != name:
            continue
        p = P.PRIMITIVES[op]
        for _ in range(12):
            g = lm.Graph()
            srcs = []
            for d in ins:
                v = rng.choice(VALUES)
                v = bool(v) if d.kind == "b" else int(np.clip(np.nan_to_num(v), -9, 9)) if d.kind == "i" else float(v)
                srcs.append(g.constant(v, d))
            # (the node itself: at the user's level ``prim`` gives a float comparison as a Copy of its own)
            out = g.tensor(g.add(op, srcs, arg, p.result_dtype(ins, arg), ()))
            vals = [fold.scalar_value(s) for s, _ in out.node.srcs]
            folded = fold.evaluate(out.node, vals)
            ref = ReferenceInterpreter([(out.node, View.contiguous(()))], g.constants)({}, {})[0]
            assert folded.dtype == ref.dtype and folded.tobytes() == ref.tobytes(), (op, ins, arg, vals, folded, ref)


def _names_in(text: str, after: str) -> set:
    """The primitive names in the part of ``text`` from ``after`` to the next blank line or period."""
    part = text[text.index(after) + len(after):]
    part = re.split(r"\n\s*\n|\.\s", part, maxsplit=1)[0]
    return {w for w in re.findall(r"\w+", part) if w in P.PRIMITIVES}


def test_docstring_lists_of_elementwise_primitives_are_the_records():
    """The modules that restate the elementwise primitives in prose name exactly the records' (so a
    new primitive fails here until each says it too)."""
    from luminal.codegen import ir
    from luminal.core import kernel_graph

    value_ops = P.ELEMENTWISE - {"Copy", "Cast"}  # (the IR has its own cast; Copy is its operand's value)
    assert _names_in(ir.__doc__, "an elementwise primitive of ``core/primitives.py``:") == value_ops
    assert _names_in(fusion.__doc__, "Elementwise =") - {"Gather", "ScatterAdd"} == P.ELEMENTWISE
    assert _names_in(kernel_graph.__doc__, "Expr ops: every elementwise primitive") == P.ELEMENTWISE
