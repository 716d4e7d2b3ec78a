"""The primitive op set: small and closed. Every high-level op is a composition of these.

Each node reads its inputs through views (see ``view.py``); "elementwise" means all input views have
the node's shape. Float ops on float16/bfloat16 compute in float32 and round the result to the
node's dtype. The one table below is the whole semantics; backends implement exactly this.

| op         | inputs            | arg      | result
|------------|-------------------|----------|-------
| Input      | -                 | name     | the array bound to ``name`` at run time
| Constant   | -                 | ConstKey | a literal array, or a scalar (a number or a symbolic dim)
| Arange     | -                 | n (Dim)  | int32 ``[0, 1, ..., n-1]``
| Copy       | x                 | detach?  | ``x`` made contiguous (materialises a view); ``"detach"``: no gradient
| Cast       | x                 | dtype    | ``x`` converted; float->int truncates toward zero; ->bool is ``x != 0``
| Log2       | x (float)         | -        | ``log2(x)``; -inf at 0, NaN below 0
| Exp2       | x (float)         | -        | ``2**x``
| Sin        | x (float)         | -        | ``sin(x)``
| Sqrt       | x (float)         | -        | ``sqrt(x)``; NaN below 0
| Recip      | x (float)         | -        | ``1/x``; +-inf at +-0
| Add        | a, b (same dtype) | -        | ``a + b`` (int32 wraps; bool: logical or)
| Mul        | a, b (same dtype) | -        | ``a * b`` (int32 wraps; bool: logical and)
| Mod        | a, b (same dtype) | -        | C ``fmod``: remainder with the sign of ``a`` (int or float)
| Max        | a, b (same dtype) | -        | elementwise maximum; NaN if either is NaN
| LessThan   | a, b (same dtype) | -        | bool ``a < b`` (False when either is NaN)
| Where      | c (bool), a, b    | -        | ``a`` where ``c`` else ``b``; never mixes values of a and b
| SumReduce  | x                 | axis     | sum over ``axis`` (removed); 0 over an empty axis
| MaxReduce  | x                 | axis     | max over ``axis`` (removed); NaN if any is NaN; axis non-empty
| Gather     | x, idx (int32)    | axis     | ``out[i] = x[i with i[axis] := idx[i]]``; idx shape = out shape
| ScatterAdd | dst, idx, src     | axis     | ``dst`` with ``src[i]`` added at ``i with i[axis] := idx[i]``

Why these: luminal's 15 (Log2, Exp2, Sin, Sqrt, Recip, Add, Mul, Mod, LessThan, SumReduce,
MaxReduce, Iota, Gather, Scatter, Cast) plus ``Max`` and ``Where``, whose compositions are unsafe
(``mask*a + (1-mask)*b`` leaks NaN and inf) and ``Copy`` for inexpressible views. Iota is ``Arange``
(other index patterns are views and arithmetic of it); Scatter is ``ScatterAdd``, which is also the
gradient of ``Gather``.
"""

LEAVES = ("Input", "Constant", "Arange")
UNARY_FLOAT = ("Log2", "Exp2", "Sin", "Sqrt", "Recip")
BINARY = ("Add", "Mul", "Mod", "Max", "LessThan")
REDUCE = ("SumReduce", "MaxReduce")
OTHER = ("Copy", "Cast", "Where", "Gather", "ScatterAdd")
PRIMITIVES = frozenset(LEAVES + UNARY_FLOAT + BINARY + REDUCE + OTHER)
ELEMENTWISE = frozenset(UNARY_FLOAT + BINARY + ("Copy", "Cast", "Where"))
