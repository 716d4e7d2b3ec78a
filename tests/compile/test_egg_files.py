"""The rule files are plain egglog: each one, loaded after ``schema.egg`` into a fresh e-graph with
nothing of luminal's Python around it, rewrites a small hand-written term the way its comments say.

Views are written out as ``(V k flags rank zero unit one merge)`` (``schema.egg``): flags 15 is the
identity (identity | unmasked | axis masks valid | in order), 6 an unmasked strided view."""

from __future__ import annotations

import pytest
from egglog import bindings

from luminal.compiler.egraph import fusion, runner

IDENT = 15
STRIDED = 6


def _egraph(*files: str, extra: str = "") -> bindings.EGraph:
    eg = bindings.EGraph()
    text = "\n".join(runner.egg(f) for f in ("schema", *files)) + "\n" + extra
    eg.run_program(*eg.parse_program(text))
    return eg


def _run(eg, program: str):
    return eg.run_program(*eg.parse_program(program))


def test_every_rule_file_is_loaded_and_parses_alone():
    assert set(runner.RULE_FILES) >= {"schema", "algebra", "matmul", "contraction", "fusion"}
    for name in runner.RULE_FILES[1:]:
        _egraph(name, extra=fusion.facts() if name == "fusion" else "")


def test_algebra_removes_a_multiplication_by_one():
    eg = _egraph("algebra")
    _run(eg, f"""
        (let $x (Inp "k0"))
        (let $one (Cst "k1" 1))
        (let $v (V 0 {IDENT} 1 0 1 0 0))
        (let $m (Bin "Mul" $x $v $one $v))
        (let $c (Un "Copy" $m $v ""))
        (run-schedule (run facts) (repeat 3 (run algebra)))
        (check (= $m $x))
        (check (= $c $x))""")


def test_algebra_keeps_x_plus_positive_zero():
    eg = _egraph("algebra")
    _run(eg, f"""
        (let $x (Inp "k0"))
        (let $zero (Cst "k1" 0))
        (let $v (V 0 {IDENT} 1 0 1 0 0))
        (let $a (Bin "Add" $x $v $zero $v))
        (run-schedule (run facts) (repeat 3 (run algebra)))
        (fail (check (= $a $x)))""")


# a (M, K) @ b (K, N) as the product (M, N, K), summed over axis 2; M = N = K = 4:
# a's view has strides (4, 0, 1): zero = axis 1, unit = axis 2; b's view (0, 1, 4): zero = axis 0, unit = axis 1
_GEMM = f"""
    (let $a (Inp "a"))
    (let $b (Inp "b"))
    (let $va (V 1 {STRIDED} 3 2 4 0 0))
    (let $vb (V 2 {STRIDED} 3 1 2 0 0))
    (let $vm (V 3 {IDENT} 3 0 4 0 3))
    (let $p (Bin "Mul" $a $va $b $vb))
    (let $s (Red "SumReduce" $p $vm 2))"""

# the same product with a read at stride 2 along K (strides (8, 0, 2)): no unit stride on M or K
_STRIDED = f"""
    (let $a (Inp "a"))
    (let $b (Inp "b"))
    (let $va (V 1 {STRIDED} 3 2 0 0 0))
    (let $vb (V 2 {STRIDED} 3 1 2 0 0))
    (let $vm (V 3 {IDENT} 3 0 4 0 3))
    (let $p (Bin "Mul" $a $va $b $vb))
    (let $s (Red "SumReduce" $p $vm 2))"""


def test_matmul_takes_a_gemm_layout():
    eg = _egraph("matmul")
    _run(eg, _GEMM + """
        (run-schedule (run facts) (repeat 2 (run matmul)))
        (check (= $s (MatMul $a $va $b $vb 2)))""")


def test_matmul_leaves_an_operand_without_a_unit_stride():
    eg = _egraph("matmul")
    _run(eg, _STRIDED + """
        (run-schedule (run facts) (repeat 2 (run matmul)))
        (fail (check (= $s (MatMul $a $va $b $vb 2))))""")


def test_contraction_takes_a_float_product_the_matmul_rule_leaves():
    eg = _egraph("contraction")
    _run(eg, _STRIDED + """
        (BlasMul $p)
        (run-schedule (run facts) (repeat 2 (run contraction)))
        (check (= $s (MatMul $a $va $b $vb 2)))
        (check (= $s (Red "SumReduce" (Bin "Mul" $a $va $b $vb) $vm 2)))""")


@pytest.mark.parametrize("program,why", [
    (_STRIDED, "not a float32/float64 product (no BlasMul fact)"),
    (_GEMM + "\n(BlasMul $p)", "a strict GEMM layout: the matmul rule's"),
])
def test_contraction_leaves(program, why):
    eg = _egraph("contraction")
    _run(eg, program + """
        (run-schedule (run facts) (repeat 2 (run contraction)))
        (fail (check (= $s (MatMul $a $va $b $vb 2))))""")


def test_contraction_leaves_a_batch_of_dot_products():
    """(B, K) * (B, K) summed over K: both operands move along B, so there is no M or N axis."""
    eg = _egraph("contraction")
    _run(eg, f"""
        (let $a (Inp "a"))
        (let $b (Inp "b"))
        (let $v (V 1 {STRIDED} 2 0 0 0 0))
        (let $vm (V 2 {IDENT} 2 0 2 0 1))
        (let $p (Bin "Mul" $a $v $b $v))
        (BlasMul $p)
        (let $s (Red "SumReduce" $p $vm 1))
        (run-schedule (run facts) (repeat 2 (run contraction)))
        (fail (check (= $s (MatMul $a $v $b $v 1))))""")


def test_fusion_marks_an_elementwise_prologue_of_a_sum():
    eg = _egraph("fusion", extra=fusion.facts())
    _run(eg, f"""
        (let $x (Inp "k0"))
        (let $v (V 0 {IDENT} 2 0 2 0 1))
        (let $e (Un "Exp2" $x $v ""))
        (let $r (Red "SumReduce" $e $v 1))
        (let $g (Gat $x $v $x $v 0))
        (let $after (Un "Sin" $g $v ""))
        (run-schedule (run facts) (repeat 2 (run fusion)))
        (check (Fz $r "SumReduce" 0 "ew" $v))
        (check (Kind $r "SumReduce"))
        (fail (check (Fz $after "Sin" 0 k $v)))""")
