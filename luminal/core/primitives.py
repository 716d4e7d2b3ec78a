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
| Cast       | x                 | dtype    | ``x`` converted; float->int truncates, saturating, NaN 0; ->bool: x != 0
| Log2       | x (float)         | -        | ``log2(x)``; -inf at 0, NaN below 0
| Exp2       | x (float)         | -        | ``2**x``
| Sin        | x (float)         | -        | ``sin(x)``
| Sqrt       | x (float)         | -        | ``sqrt(x)``; NaN below 0
| Recip      | x (float)         | -        | ``1/x``; +-inf at +-0
| Add        | a, b (same dtype) | -        | ``a + b`` (int32 wraps; bool: logical or)
| Mul        | a, b (same dtype) | -        | ``a * b`` (int32 wraps; bool: logical and)
| Mod        | a, b (same dtype) | -        | C ``fmod``: remainder with the sign of ``a`` (int or float)
| Max        | a, b (same dtype) | -        | elementwise IEEE 754-2019 ``maximum``: NaN if either is NaN; -0 < +0
| LessThan   | a, b (same dtype) | -        | bool ``a < b`` (False when either is NaN)
| Where      | c (bool), a, b    | -        | ``a`` where ``c`` else ``b``; never mixes values of a and b
| SumReduce  | x                 | axis     | sum over ``axis`` (removed); 0 over an empty axis
| MaxReduce  | x                 | axis     | max over ``axis`` (removed), as ``Max``: NaN if any is; axis non-empty
| Gather     | x, idx (int32)    | axis     | ``out[i] = x[i with i[axis] := idx[i]]``; idx shape = out shape
| ScatterAdd | dst, idx, src     | axis     | ``dst`` with ``src[i]`` added at ``i with i[axis] := idx[i]``

Why these: luminal's 15 (Log2, Exp2, Sin, Sqrt, Recip, Add, Mul, Mod, LessThan, SumReduce,
MaxReduce, Iota, Gather, Scatter, Cast) plus ``Max`` and ``Where``, whose compositions are unsafe
(``mask*a + (1-mask)*b`` leaks NaN and inf) and ``Copy`` for inexpressible views. Iota is ``Arange``
(other index patterns are views and arithmetic of it); Scatter is ``ScatterAdd``, which is also the
gradient of ``Gather``.

Each primitive is one :class:`Primitive` record in ``PRIMITIVES``, holding every facet the rest of
the project needs, so that adding one is one record plus the facets that cannot be data (its
gradient rule in ``train/autograd.py``, each backend's lowering) and a coverage test
(``tests/core/test_primitive_records.py``) fails until every facet has it:

| op         | dtype    | fusion      | egglog | gradient     | numpy
|------------|----------|-------------|--------|--------------|-------
| Input      | declared | leaf        | Inp    | -            | -
| Constant   | declared | leaf        | Cst    | -            | -
| Arange     | int32    | leaf        | Ara    | -            | -
| Copy       | like x   | elementwise | Un     | _copy        | -
| Cast       | arg      | elementwise | Un     | _cast        | numpy_ops.cast
| Log2       | like x   | elementwise | Un     | _log2        | log2
| Exp2       | like x   | elementwise | Un     | _exp2        | exp2
| Sin        | like x   | elementwise | Un     | _sin         | sin
| Sqrt       | like x   | elementwise | Un     | _sqrt        | sqrt
| Recip      | like x   | elementwise | Un     | _recip       | reciprocal
| Add        | like a   | elementwise | Bin    | _add         | add / logical_or
| Mul        | like a   | elementwise | Bin    | _mul         | multiply / logical_and
| Mod        | like a   | elementwise | Bin    | _mod         | fmod
| Max        | like a   | elementwise | Bin    | _max         | maximum
| LessThan   | bool     | elementwise | Bin    | -            | less
| Where      | like a   | elementwise | Whr    | _where       | numpy_ops.where
| SumReduce  | like x   | reduce      | Red    | _sum         | numpy_ops.reduce
| MaxReduce  | like x   | reduce      | Red    | _max_reduce  | numpy_ops.reduce
| Gather     | like x   | gather      | Gat    | _gather      | numpy_ops.gather
| ScatterAdd | like dst | scatter_add | Sct    | _scatter_add | numpy_ops.scatter_add

(dtype: see ``DTYPE_RULES``; fusion: the kernel kind it is computed in, ``FUSION_KINDS``; egglog: its
constructor in ``compiler/egraph/schema.py``; numpy: the ufunc, on bool operands / other operands,
or the ``numpy_ops`` function with its semantics.) Both tables are :func:`table` and
:func:`facet_table` of the records; a test keeps this docstring equal to them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from luminal.core import dtype as dt

DTYPE_RULES = {
    "declared": "the dtype the leaf is made with",
    "int32": "int32",
    "bool": "bool",
    "arg": "the dtype named by ``arg``",
    # "like NAME": the dtype of the input called NAME (the inputs without a rule of their own share it)
}
FUSION_KINDS = ("leaf", "elementwise", "reduce", "gather", "scatter_add")


def _maximum(a, b, out=None, **kw):
    """IEEE 754-2019 ``maximum``: ``np.maximum`` (NaN-propagating), with zeros ordered -0 < +0, which
    numpy leaves to its loops (the scalar loop returns the first of two equal operands, the SIMD loops
    the second): a zero maximum is -0 only where both operands have the sign bit. Then ``abs`` as
    ``max(x, -x)`` is +0 at either zero, and ``min`` as ``-max(-a, -b)`` is the IEEE minimum. (numpy
    deprecates ``out`` given by position.)"""
    r = np.maximum(a, b, out=out, **kw)
    if r.dtype.kind != "f":
        return r
    zero = r == 0
    if not zero.any():
        return r
    signed = np.where(np.signbit(a) & np.signbit(b), -0.0, 0.0).astype(r.dtype)
    if not isinstance(r, np.ndarray):  # a numpy scalar (0-d operands)
        return signed[()]
    np.copyto(r, np.broadcast_to(signed, r.shape), where=zero)
    return r


@dataclass(frozen=True)
class Primitive:
    """Every facet of one primitive. Derived from these: the name tuples below, the numpy tables of
    ``numpy_ops.py`` (the reference interpreter, constant folding and the cpu backend all call them),
    the egglog lowering (``compiler/egraph/lower.py``), what fuses (``compiler/egraph/fusion.py``),
    the ufunc entries of the backends' tables, and this module's docstring tables."""

    name: str
    inputs: tuple  # operand names, in order ("x"; "a", "b"; ...); () for a leaf
    operands: str  # the semantics table's inputs column (the operands' dtype constraints)
    arg: str  # what ``Node.arg`` holds ("-": nothing)
    result: str  # the semantics, as the table states them
    dtype: str  # the result's dtype: a key of DTYPE_RULES or "like NAME" (an input's)
    fusion: str  # FUSION_KINDS: the kernel kind it is computed in ("leaf": a buffer, no kernel)
    egglog: str  # its term constructor in compiler/egraph/schema.py
    grad: str | None  # the name of its rule in train/autograd.py's RULES; None: no gradient flows
    ufunc: Callable | None = None  # the numpy function computing it, elementwise
    bool_ufunc: Callable | None = None  # the one for bool operands, where it differs (or, and)
    numpy_op: str | None = None  # else: the function of core/numpy_ops.py with its semantics

    def result_dtype(self, input_dtypes, arg, declared=None):
        """The dtype of a node of this primitive reading ``input_dtypes`` with ``arg`` (``declared``: a
        leaf's own)."""
        if self.dtype.startswith("like "):
            return input_dtypes[self.inputs.index(self.dtype[5:])]
        if self.dtype == "arg":
            return arg
        if self.dtype == "declared":
            return declared
        return dt.as_dtype(self.dtype)


def _leaf(name, arg, result, egglog, dtype="declared"):
    return Primitive(name, (), "-", arg, result, dtype, "leaf", egglog, None)


def _unary(name, ufunc, result, grad):
    return Primitive(name, ("x",), "x (float)", "-", result, "like x", "elementwise", "Un", grad, ufunc)


def _binary(name, ufunc, result, grad, bool_ufunc=None, dtype="like a"):
    return Primitive(name, ("a", "b"), "a, b (same dtype)", "-", result, dtype, "elementwise", "Bin", grad,
                     ufunc, bool_ufunc)


PRIMITIVES: dict[str, Primitive] = {p.name: p for p in (
    _leaf("Input", "name", "the array bound to ``name`` at run time", "Inp"),
    _leaf("Constant", "ConstKey", "a literal array, or a scalar (a number or a symbolic dim)", "Cst"),
    _leaf("Arange", "n (Dim)", "int32 ``[0, 1, ..., n-1]``", "Ara", dtype="int32"),
    Primitive("Copy", ("x",), "x", "detach?",
              '``x`` made contiguous (materialises a view); ``"detach"``: no gradient',
              "like x", "elementwise", "Un", "_copy"),
    Primitive("Cast", ("x",), "x", "dtype",
              "``x`` converted; float->int truncates, saturating, NaN 0; ->bool: x != 0",
              "arg", "elementwise", "Un", "_cast", numpy_op="cast"),
    _unary("Log2", np.log2, "``log2(x)``; -inf at 0, NaN below 0", "_log2"),
    _unary("Exp2", np.exp2, "``2**x``", "_exp2"),
    _unary("Sin", np.sin, "``sin(x)``", "_sin"),
    _unary("Sqrt", np.sqrt, "``sqrt(x)``; NaN below 0", "_sqrt"),
    _unary("Recip", np.reciprocal, "``1/x``; +-inf at +-0", "_recip"),
    _binary("Add", np.add, "``a + b`` (int32 wraps; bool: logical or)", "_add", np.logical_or),
    _binary("Mul", np.multiply, "``a * b`` (int32 wraps; bool: logical and)", "_mul", np.logical_and),
    _binary("Mod", np.fmod, "C ``fmod``: remainder with the sign of ``a`` (int or float)", "_mod"),
    _binary("Max", _maximum, "elementwise IEEE 754-2019 ``maximum``: NaN if either is NaN; -0 < +0", "_max"),
    _binary("LessThan", np.less, "bool ``a < b`` (False when either is NaN)", None, dtype="bool"),
    Primitive("Where", ("c", "a", "b"), "c (bool), a, b", "-",
              "``a`` where ``c`` else ``b``; never mixes values of a and b",
              "like a", "elementwise", "Whr", "_where", numpy_op="where"),
    Primitive("SumReduce", ("x",), "x", "axis", "sum over ``axis`` (removed); 0 over an empty axis",
              "like x", "reduce", "Red", "_sum", numpy_op="reduce"),
    Primitive("MaxReduce", ("x",), "x", "axis",
              "max over ``axis`` (removed), as ``Max``: NaN if any is; axis non-empty",
              "like x", "reduce", "Red", "_max_reduce", numpy_op="reduce"),
    Primitive("Gather", ("x", "idx"), "x, idx (int32)", "axis",
              "``out[i] = x[i with i[axis] := idx[i]]``; idx shape = out shape",
              "like x", "gather", "Gat", "_gather", numpy_op="gather"),
    Primitive("ScatterAdd", ("dst", "idx", "src"), "dst, idx, src", "axis",
              "``dst`` with ``src[i]`` added at ``i with i[axis] := idx[i]``",
              "like dst", "scatter_add", "Sct", "_scatter_add", numpy_op="scatter_add"),
)}


def _names(keep) -> tuple:
    return tuple(n for n, p in PRIMITIVES.items() if keep(p))


# The groupings the rest of the code tests membership in, in table order.
LEAVES = _names(lambda p: p.fusion == "leaf")
UNARY_FLOAT = _names(lambda p: p.egglog == "Un" and p.ufunc is not None)
BINARY = _names(lambda p: p.egglog == "Bin")
REDUCE = _names(lambda p: p.fusion == "reduce")
OTHER = _names(lambda p: p.fusion != "leaf" and p.name not in UNARY_FLOAT + BINARY + REDUCE)
ELEMENTWISE = frozenset(_names(lambda p: p.fusion == "elementwise"))


def _rows(header, cells) -> str:
    """A markdown table, every column padded but the last (which runs free, as in the docstring)."""
    widths = [max(len(c) for c in col) for col in zip(header, *cells)]

    def line(cs):
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cs[:-1], widths)) + " | " + cs[-1]

    sep = "|" + "|".join("-" * (w + 2) for w in widths[:-1]) + "|-------"
    return "\n".join([line(header), sep] + [line(c) for c in cells])


def table() -> str:
    """The semantics table of this module's docstring, from the records."""
    return _rows(("op", "inputs", "arg", "result"),
                 [(p.name, p.operands, p.arg, p.result) for p in PRIMITIVES.values()])


def _numpy_doc(p: Primitive) -> str:
    if p.numpy_op:
        return f"numpy_ops.{p.numpy_op}"
    if p.ufunc is None:
        return "-"
    names = [f.__name__.strip("_") for f in (p.ufunc, p.bool_ufunc) if f is not None]
    return " / ".join(names)


def facet_table() -> str:
    """The facets table of this module's docstring, from the records."""
    return _rows(("op", "dtype", "fusion", "egglog", "gradient", "numpy"),
                 [(p.name, p.dtype, p.fusion, p.egglog, p.grad or "-", _numpy_doc(p)) for p in PRIMITIVES.values()])
