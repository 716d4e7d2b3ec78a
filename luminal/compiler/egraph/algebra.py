"""The ``algebra`` ruleset: identities that remove work without changing any value.

A rewrite that replaces a node by one of its inputs is only valid when that input is read through
the identity view (same shape, same order); the constant operand may be read through any unmasked
view (a masked one would read the pad value somewhere). Nothing here changes NaN or inf behaviour:
``x*0 -> 0`` is wrong for inf/NaN ``x`` and is not done.
Sums of zeros and other values computed from constants alone are folded while lowering (``fold.py``).

* ``mul-one``: ``x*1 -> x`` (also bool ``x and True``);
* ``add-zero``: ``x+0 -> x`` for int ``0``, ``False`` and float ``-0.0``; not for float ``+0.0``:
  ``-0.0 + 0.0`` is ``+0.0``, and ``1/x`` then gives ``+inf`` where ``x`` gives ``-inf``;
* ``neg-neg``: ``x*-1*-1 -> x`` (negation is exact; int32 wraps back);
* ``recip-recip``: ``1/(1/x) -> x`` (equal up to rounding; the same infs, zeros and NaNs except
  for subnormal ``x``, whose reciprocal overflows);
* ``copy-id``: a ``Copy`` (also ``"detach"``, a stop-gradient marker that is the identity at run
  time) through the identity view is its input.
"""

RULESET = "algebra"


def _rules():
    out = []

    def rule(name, body, head):
        out.append(f'(rule ({body}) ({head}) :ruleset {RULESET} :name "{name}")')

    for name, op, fact in (("mul-one", "Mul", "IsOne"), ("add-zero", "Add", "IsAddId")):
        rule(name, f'(= m (Bin "{op}" x vx c vc)) (Ident vx) ({fact} c) (Unmasked vc)', "(union m x)")
        rule(name + "-l", f'(= m (Bin "{op}" c vc x vx)) (Ident vx) ({fact} c) (Unmasked vc)', "(union m x)")
    for i, inner in enumerate(('(Bin "Mul" x vx c1 vc1)', '(Bin "Mul" c1 vc1 x vx)')):
        for j, outer in enumerate(('(Bin "Mul" n vn c2 vc2)', '(Bin "Mul" c2 vc2 n vn)')):
            rule(f"neg-neg-{i}{j}", f"(= m {outer}) (= n {inner}) (Ident vn) (Ident vx) (IsNegOne c1) "
                 "(IsNegOne c2) (Unmasked vc1) (Unmasked vc2)", "(union m x)")
    rule("recip-recip", '(= m (Un "Recip" (Un "Recip" x vx a) vr b)) (Ident vx) (Ident vr)', "(union m x)")
    rule("copy-id", '(= m (Un "Copy" x v a)) (Ident v)', "(union m x)")
    return "\n".join(out)


TEXT = _rules()
