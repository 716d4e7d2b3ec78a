"""The egglog vocabulary every ruleset shares: the term language and the facts it carries, whose
egglog text is ``rules/schema.egg`` (loaded by ``runner.py``); this module holds the encoding's
constants that lowering (``lower.py``) and reading back (``egraph_read.py``) share with it.

Terms mirror the frontend primitives, grouped by arity so that one rule covers a whole family:

| constructor                       | primitives
|-----------------------------------|-----------
| ``(Inp key)``                     | Input (identified by name; ``key`` interns it, see ``lower.py``)
| ``(Cst key values)``              | Constant (``key`` interns the ConstKey)
| ``(Ara key)``                     | Arange (``key`` interns the length)
| ``(Un op x v arg)``               | Log2 Exp2 Sin Sqrt Recip Copy Cast (``arg``: "" / "detach" / a dtype name)
| ``(Bin op a va b vb)``            | Add Mul Mod Max LessThan
| ``(Whr c vc a va b vb)``          | Where
| ``(Red op x v axis)``             | SumReduce MaxReduce
| ``(Gat x vx idx vi axis)``        | Gather
| ``(Sct d vd idx vi src vs axis)`` | ScatterAdd
| ``(MatMul a va b vb axis)``       | the compiler's MatMul (``rules/matmul.egg``, ``rules/contraction.egg``)

Every input is read through a view ``(V k flags rank zero unit one merge)``: ``k`` interns the View
(and whether it is the identity of its source) per compile; the other fields are its structure,
computed in Python so that rules can check shapes and strides without arithmetic on symbolic dims:

* ``flags``: bit 0 = identity (same shape as the source, contiguous, no offset or mask), bit 1 =
  unmasked, bit 2 = the axis masks are valid (rank <= 62), bit 3 = in order (the identity or a
  reshape of it: the whole source, element by element in order);
* axis masks, bit ``i`` for axis ``i``: ``zero`` / ``unit`` = the stride is statically 0 / 1,
  ``one`` = the size is statically 1, ``merge`` = axes ``i`` and ``i+1`` are laid out one after the
  other (``stride[i] == size[i+1] * stride[i+1]``, proven symbolically).

A scalar constant's ``values`` bits say what the algebra needs: 1 = one, 2 = minus one, 4 = an
additive identity (int 0, False, float -0.0; not float +0.0, see ``rules/algebra.egg``). Values
themselves are folded in Python while lowering (``fold.py``): egglog's f64 cannot round to
float32/16 or tell -0.0 from 0.0.

Facts are fields of terms rather than asserted rows because every action sent to egglog costs
~50 us while the ``facts`` ruleset derives the relations below in bulk inside one run.
``(Nd k)`` names item ``k`` for later load chunks (``lower.py``); it is not a primitive and
extraction never picks it.
"""

CONSTRUCTORS = ("Inp", "Cst", "Ara", "Un", "Bin", "Whr", "Red", "Gat", "Sct", "MatMul")
IDENT, UNMASKED, AXES, IN_ORDER = 1, 2, 4, 8
V_ONE, V_NEG_ONE, V_ADD_ID = 1, 2, 4
MAX_AXES = 62
