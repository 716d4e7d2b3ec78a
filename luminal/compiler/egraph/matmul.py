"""The ``matmul`` ruleset: ``SumReduce(Mul(a va, b vb), k)`` becomes ``MatMul(a va, b vb, k)`` when
the two views form a GEMM layout (the CPU backend plans exactly this; anything else stays a
SumReduce of a Mul, which is still correct).

The layout, on the product shape: both views unmasked; axis ``k`` has a nonzero stride in both;
every other axis of size != 1 is *batch* (both strides nonzero, or both zero), *M* (only ``a``
moves) or *N* (only ``b`` moves). Runs of M axes that are adjacent in axis order and contiguous in
``a`` (``stride_a[i] == size[i+1] * stride_a[i+1]``) merge into one group; there is at most one M
group and, merging by ``b``'s strides, at most one N group. Each operand is a row- or column-major
matrix: ``a`` has a unit stride on its (merged) M or on K, ``b`` on K or on its (merged) N (a
missing group counts as fine). Adjacency is strict: a size-1 axis between two M axes splits them
(a backend that skips size-1 axes accepts a superset of these layouts).

A product with neither M nor N axes is a (batched) dot product: BLAS gains nothing there over a
reduction that fuses the product into its prologue (variance, squared norms), so it is left alone.

The per-axis facts are bit masks of the views (``schema.py``); the rule combines the two operands
and the reduced axis with i64 bit arithmetic, in one match (no scan over the axes):

    live = all & ~one & ~(1<<k);  M = live & ~zero_a & zero_b;  N = live & zero_a & ~zero_b
    M groups start where an M axis does not continue the previous one: s = M & ~((M & merge_a) << 1);
    one group at most: s & (s - 1) == 0
    M | N != 0 (not a dot product)
    a row/column-major: k in unit_a, or M == 0, or the innermost (highest) M axis is in unit_a,
    i.e. (M & unit_a) > (M & ~unit_a)   (and the same for b with N)
"""

RULESET = "matmul"


def _ok(unit: str, grp: str) -> str:
    """1 when the operand is a row/column-major matrix: unit stride on k, no group, or on the group."""
    return (f"(max (& (>> {unit} k) 1) (max (- 1 (min {grp} 1)) "
            f"(min 1 (max 0 (- (& {grp} {unit}) (& {grp} (^ {unit} all)))))))")


TEXT = f"""
(rule ((= s (Red "SumReduce" (Bin "Mul" a va b vb) vm k)) (Ident vm)
       (= va (V ka fa r za ua oa ma)) (= vb (V kb fb r zb ub ob mb)) (= 6 (& fa 6)) (= 6 (& fb 6))
       (= kbit (<< 1 k)) (= 0 (& za kbit)) (= 0 (& zb kbit))
       (= all (- (<< 1 r) 1)) (= live (& all (^ all (| oa kbit))))
       (= m (& live (& (^ za all) zb))) (= n (& live (& za (^ zb all))))
       (= sm (& m (^ all (<< (& m ma) 1)))) (= 0 (& sm (- sm 1)))
       (= sn (& n (^ all (<< (& n mb) 1)))) (= 0 (& sn (- sn 1)))
       (!= 0 (| m n)) (= 1 {_ok("ua", "m")}) (= 1 {_ok("ub", "n")}))
      ((union s (MatMul a va b vb k))) :ruleset {RULESET} :name "matmul")
"""
