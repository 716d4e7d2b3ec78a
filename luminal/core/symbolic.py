"""Symbolic integer dimensions.

A shape entry is either a Python ``int`` or a :class:`Sym`: an integer expression over named dims
such as ``B`` or ``S+1``. Sums and products are kept as a canonical polynomial (a map from monomials
to integer coefficients), so ``(S+1)*2 == 2*S+2`` holds structurally and shapes compare by ``==``.
Floor division, modulo, max and min that cannot be simplified become opaque atoms evaluated at run
time. An expression that reduces to a constant is returned as a plain ``int``.
"""

from __future__ import annotations

import numbers
import operator
import re
from typing import Union

from luminal.core.errors import op_error, shape_str  # noqa: F401 - shape_str is also symbolic's

Dim = Union[int, "Sym"]
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


class Atom:
    """An indivisible factor of a monomial: a variable, or an opaque op over sub-expressions."""

    __slots__ = ("kind", "args", "_key")

    def __init__(self, kind: str, args: tuple):
        self.kind, self.args = kind, args
        self._key = (kind, tuple(str(a) for a in args))

    def __eq__(self, other):
        return isinstance(other, Atom) and self._key == other._key

    def __lt__(self, other):
        return self._key < other._key

    def __hash__(self):
        return hash(self._key)

    def __str__(self):
        if self.kind == "var":
            return self.args[0]
        if self.kind in ("max", "min"):
            return f"{self.kind}({self.args[0]}, {self.args[1]})"
        op = {"floordiv": "//", "mod": "%"}[self.kind]
        return f"({_operand_str(self.args[0])}{op}{_operand_str(self.args[1])})"

    def evaluate(self, env: dict[str, int]) -> int:
        if self.kind == "var":
            try:
                return env[self.args[0]]
            except KeyError:
                raise ValueError(f"symbolic dim {self.args[0]!r} has no value bound") from None
        a, b = (evaluate(x, env) for x in self.args)
        if self.kind == "floordiv":
            return a // b if b else 0  # (``_div``)
        if self.kind == "mod":
            return a % b if b else 0
        value = max(a, b) if self.kind == "max" else min(a, b)
        if type(a) is DimValue or type(b) is DimValue:  # (the expression, not the operand that won)
            sym = (dmax if self.kind == "max" else dmin)(sym_of(a), sym_of(b))
            return value if isinstance(sym, int) else DimValue(value, sym)
        return value

    def variables(self) -> set[str]:
        if self.kind == "var":
            return {self.args[0]}
        return set().union(*(free_vars(a) for a in self.args))


def _operand_str(x) -> str:
    """``x`` as an operand of ``//`` or ``%``: parenthesised unless it is a single name, a single
    opaque atom or a non-negative int, so that the printed form reads (and evaluates, as Python)
    with the right precedence: ``((S+1)//2)``, ``(S//(B*C))``."""
    if isinstance(x, int):
        return str(x) if x >= 0 else f"({x})"
    if len(x.terms) == 1 and x.terms[0][1] == 1 and len(x.terms[0][0]) == 1:
        return str(x)
    return f"({x})"


class Sym:
    """A canonical polynomial with integer coefficients over :class:`Atom` monomials."""

    __slots__ = ("terms", "_hash", "_vars")

    def __init__(self, terms: dict[tuple, int]):
        self.terms = tuple(sorted((m, c) for m, c in terms.items() if c != 0))
        self._hash = hash(self.terms)
        self._vars = None  # ``free_vars``, once asked

    # construction ---------------------------------------------------------------------------
    @staticmethod
    def var(name: str) -> Sym:
        """A symbolic dim that is just the name ``name`` (what a name string in a shape becomes).

        Args:
            name: an identifier.
        """
        if not _NAME.match(name):
            raise ValueError(_bad_name(name))
        return Sym({(Atom("var", (name,)),): 1})

    @staticmethod
    def _lift(x: Dim) -> dict[tuple, int]:
        return {(): x} if isinstance(x, int) else dict(x.terms)

    # arithmetic -----------------------------------------------------------------------------
    def __add__(self, other):
        if not isinstance(other, (int, Sym)):  # (a tensor: its reflected operator, ``S + x`` elementwise)
            return NotImplemented
        t = self._lift(self)
        for m, c in self._lift(other).items():
            t[m] = t.get(m, 0) + c
        return _norm(Sym(t))

    __radd__ = __add__

    def __neg__(self):
        return _norm(Sym({m: -c for m, c in self.terms}))

    def __sub__(self, other):
        return self + (-other)

    def __rsub__(self, other):
        return (-self) + other

    def __mul__(self, other):
        if type(other) is int:  # (the common case, a shape's product: no monomial changes, none reorders)
            if other == 0:
                return 0
            if other == 1:
                return self
            out = Sym.__new__(Sym)
            out.terms = tuple((m, c * other) for m, c in self.terms)
            out._hash, out._vars = hash(out.terms), self._vars
            return out
        if not isinstance(other, (int, Sym)):
            return NotImplemented
        t: dict[tuple, int] = {}
        for m1, c1 in self._lift(self).items():
            for m2, c2 in self._lift(other).items():
                m = tuple(sorted(m1 + m2))
                t[m] = t.get(m, 0) + c1 * c2
        return _norm(Sym(t))

    __rmul__ = __mul__

    def __floordiv__(self, other):
        return floordiv(self, other) if isinstance(other, (int, Sym)) else NotImplemented

    def __rfloordiv__(self, other):
        return floordiv(other, self) if isinstance(other, (int, Sym)) else NotImplemented

    def __mod__(self, other):
        return mod(self, other) if isinstance(other, (int, Sym)) else NotImplemented

    # comparison -----------------------------------------------------------------------------
    def __eq__(self, other):
        if isinstance(other, Sym):
            return self.terms == other.terms
        return False if isinstance(other, int) else NotImplemented  # (``S == x``: the tensor's, elementwise)

    def __hash__(self):
        return self._hash

    def __reduce__(self):
        # Rebuilt from its terms, never from its slots: the cached ``_hash`` hashes names (strings), and
        # string hashes differ between processes, so a copied one would break dicts in the process that
        # loads it (a Sym pickled by a user, or sent to a worker process; the compile cache stores terms).
        return (Sym, (dict(self.terms),))

    def __bool__(self):
        raise TypeError(f"the truth value of symbolic dim {self} is only known at run time")

    # ``assert T <= block_size`` in torch code: no answer while the graph is built (a plain TypeError would
    # name no dim and no line). The checks that matter are made when the program runs: a slice of a
    # 16-long dim by T requires T <= 16 then (``GraphTensor._requires``).
    def _compare(self, other, op: str):
        if not isinstance(other, (numbers.Number, Sym)):  # (a tensor: its reflected comparison, elementwise)
            return NotImplemented
        raise op_error(TypeError, f"{self} {op} {other}", f"symbolic dim {self} has no value while the graph is "
                       "built (it is bound from the inputs' shapes when a compiled program runs), so it cannot be "
                       "compared here; size checks are made by the program when it runs (slicing a 16-long dim "
                       "by T requires T <= 16 then)")

    def __lt__(self, other):
        return self._compare(other, "<")

    def __le__(self, other):
        return self._compare(other, "<=")

    def __gt__(self, other):
        return self._compare(other, ">")

    def __ge__(self, other):
        return self._compare(other, ">=")

    def __str__(self):
        parts = []
        for m, c in sorted(self.terms, key=lambda mc: (-len(mc[0]), mc[0])):
            body = "*".join(str(a) for a in m)
            if not body:
                parts.append(str(c))
            elif c == 1:
                parts.append(body)
            elif c == -1:
                parts.append("-" + body)
            else:
                parts.append(f"{c}*{body}")
        return "+".join(parts).replace("+-", "-")

    __repr__ = __str__

    def evaluate(self, env: dict[str, int]) -> int:
        """The value of the expression with its names bound.

        Args:
            env: a value for every name the expression uses.

        Returns:
            An int.
        """
        if type(env) is TrackedEnv:
            got = env.known.get(self)
            if got is not None:
                return got
        total = 0
        for m, c in self.terms:
            v = c
            for a in m:
                v *= a.evaluate(env)
            total += v
        if type(env) is TrackedEnv:
            env.known[self] = total
        return total


def _norm(s: Sym) -> Dim:
    if not s.terms:
        return 0
    if len(s.terms) == 1 and s.terms[0][0] == ():
        return s.terms[0][1]
    return s


def _bad_name(name: str) -> str:
    """Why ``name`` is no dim name, with the code to write instead: a dim string is one name and is
    never parsed as an expression (``"S+1"`` would need a parser and a second spelling of what
    ``lm.sym("S") + 1`` already says)."""
    msg = f"symbolic dim name {name!r} is not an identifier: a dim string must be a single name such as \"S\""
    tokens = re.findall(r"[A-Za-z_]\w*|\d+|//|\*\*|\S", name)
    if any(t in ("+", "-", "*", "//", "%", "**", "/") for t in tokens) and any(_NAME.match(t) for t in tokens):
        out = []
        for t in tokens:
            if _NAME.match(t):
                out.append(f'lm.sym("{t}")')
            elif t in ("+", "-", "*", "//", "%", "**", "/"):
                out.append(f" {'//' if t == '/' else t} ")
            else:
                out.append(t)
        msg += f"; for an expression write {''.join(out).strip()}"
    return msg


def sym(x) -> Dim:
    """Turn a user's shape entry (int, name, or Sym) into a Dim."""
    if type(x) is int:  # (the common case: every dim of most shapes)
        return x
    if isinstance(x, Sym):
        return x
    if isinstance(x, bool):
        raise TypeError(f"a dim must be an int or a name, got {x!r}")
    if isinstance(x, int) or (hasattr(x, "__index__") and not isinstance(x, str)):
        return int(x)
    if isinstance(x, str):
        return Sym.var(x)
    raise TypeError(f"a dim must be an int or a name, got {x!r} ({type(x).__name__})")


def dims(op: str, shape, *operands) -> tuple:
    """A user's shape (one dim, or a sequence of dims) as Dims. Anything else is a TypeError naming
    ``op`` at the user's line: ``sym``'s own error names neither, and ``None`` would fail in ``tuple``."""
    if not isinstance(shape, (tuple, list)):  # (the common case first: an ABC isinstance is slow)
        if isinstance(shape, (int, str, Sym, numbers.Integral)):
            shape = (shape,)
        else:
            try:
                shape = tuple(shape)
            except TypeError:
                raise op_error(TypeError, op, f"a shape must be a dim or a sequence of dims, got {shape!r}",
                               *operands) from None
    try:
        return tuple(map(sym, shape))
    except (TypeError, ValueError) as e:  # ValueError: a string that is no name ("S+1")
        raise op_error(type(e), op, str(e), *operands) from None


def _div(a: int, b: int) -> int:
    """``a // b`` of a binding's values, and 0 for ``b == 0``. Index math divides only by dims and
    strides, and a zero one is an empty dim, through which nothing is read: the box a gradient reads
    its adjoint through divides by its input's strides (``1 // (4*S)``, ``train/view_grad.py``), and
    bound to ``S = 0`` its bounds must still evaluate (for the views' checks, a kernel's parameters)."""
    return int.__floordiv__(int(a), int(b)) if b else 0


def _mod(a: int, b: int) -> int:
    """``a % b`` of a binding's values, and 0 for ``b == 0`` (as :func:`_div`)."""
    return int.__mod__(int(a), int(b)) if b else 0


class DimValue(int):
    """An int that remembers the symbolic dim it is the value of (``sym``: a Sym, or an int).

    A backend that lays a program out for one binding evaluates its dims with these
    (:func:`tracked`): arithmetic on them keeps the expression, so generated code can take a size,
    stride or offset as an expression of its parameters where a plain int would be baked in as a
    constant, while every decision the layout makes still compares plain values. An operation this
    class does not carry (``**``, ``abs``, numpy's) gives a plain int: a constant in the code, right
    for this binding alone. Equality and hashing are the int's."""

    def __new__(cls, value: int, sym: Dim):
        out = int.__new__(cls, value)
        out.sym = sym
        return out

    def __reduce__(self):  # (copy and pickle: the value and its expression)
        return (DimValue, (int(self), self.sym))

    def _with(self, other, op, sym_op, swap: bool = False):
        if type(other) is not DimValue and type(other) is not int:
            return op(other, int(self)) if swap else op(int(self), other)
        a, b = (other, self) if swap else (self, other)
        sa, sb = sym_of(a), sym_of(b)
        key = (sym_op, sa, sb)
        sym = _SYM_MEMO.get(key)
        if sym is None:  # (laying a program out repeats the same few products thousands of times)
            if len(_SYM_MEMO) > 65536:
                _SYM_MEMO.clear()
            sym = _SYM_MEMO[key] = sym_op(sa, sb)
        value = op(int(a), int(b))
        return value if isinstance(sym, int) else DimValue(value, sym)

    def __add__(self, o):
        return self._with(o, int.__add__, operator.add)

    def __radd__(self, o):
        return self._with(o, int.__add__, operator.add, True)

    def __sub__(self, o):
        return self._with(o, int.__sub__, operator.sub)

    def __rsub__(self, o):
        return self._with(o, int.__sub__, operator.sub, True)

    def __mul__(self, o):
        return self._with(o, int.__mul__, operator.mul)

    def __rmul__(self, o):
        return self._with(o, int.__mul__, operator.mul, True)

    def __floordiv__(self, o):
        return self._with(o, _div, floordiv)

    def __rfloordiv__(self, o):
        return self._with(o, _div, floordiv, True)

    def __mod__(self, o):
        return self._with(o, _mod, mod)

    def __rmod__(self, o):
        return self._with(o, _mod, mod, True)

    def __neg__(self):
        sym = -self.sym
        return -int(self) if isinstance(sym, int) else DimValue(-int(self), sym)


_SYM_MEMO: dict = {}  # (operation, a, b) -> its Sym, for DimValue arithmetic


def sym_of(x) -> Dim:
    """The expression a size stands for: a DimValue's, else the int itself."""
    return x.sym if type(x) is DimValue else int(x)


def same(a, b) -> bool:
    """Whether two sizes (or tuples of them) are equal in every binding where they are
    :class:`DimValue` values (their expressions equal), else whether they are equal: code that a layout
    generates on this answer holds for every binding of its dims."""
    if isinstance(a, tuple):
        return isinstance(b, tuple) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if type(a) is DimValue or type(b) is DimValue:
        return sym_of(a) == sym_of(b)
    return a == b


class TrackedEnv(dict):
    """A binding whose values are :class:`DimValue` values of their names (:func:`tracked`); it keeps the
    value of every expression evaluated under it (``known``): a layout evaluates the same few
    thousand times, and each DimValue operation builds an expression."""

    def __init__(self, values):
        super().__init__(values)
        self.known: dict = {}


def tracked(env: dict[str, int]) -> TrackedEnv:
    """``env`` with each value a :class:`DimValue` of its own name."""
    return TrackedEnv({name: DimValue(value, Sym.var(name)) for name, value in env.items()})


def is_static(d: Dim) -> bool:
    return isinstance(d, int)


def evaluate(d: Dim, env: dict[str, int]) -> int:
    return d if isinstance(d, int) else d.evaluate(env)


_NO_VARS: frozenset = frozenset()


def free_vars(d: Dim) -> frozenset[str]:
    if not isinstance(d, Sym):
        return _NO_VARS
    v = d._vars
    if v is None:  # a Sym never changes: compilers ask about the same few dims thousands of times
        v = d._vars = frozenset().union(*(a.variables() for m, _ in d.terms for a in m))
    return v


def free_vars_in(x) -> set[str]:
    """Every dim name in ``x``: a dim, or nested tuples/lists of dims and other values (ignored)."""
    used: set[str] = set()
    stack = [x]
    while stack:
        y = stack.pop()
        if isinstance(y, (tuple, list)):
            stack.extend(y)
        elif isinstance(y, Sym):
            used |= free_vars(y)
    return used


def view_vars(v) -> set[str]:
    """Every dim name a view (``frontend/view.py``) reads."""
    used: set[str] = set()
    for d in (*v.shape, *v.strides, v.offset, *(d for lo_hi in v.mask or () for d in lo_hi)):
        if isinstance(d, Sym):
            used |= free_vars(d)
    return used


def substitute(d: Dim, env: dict[str, int]) -> Dim:
    """``d`` with every factor whose variables are all bound in ``env`` replaced by its value;
    factors with an unbound variable are kept (so ``S*T`` with ``S=3`` becomes ``3*T``)."""
    if isinstance(d, int):
        return d
    out: Dim = 0
    for m, c in d.terms:
        v: Dim = c
        for a in m:
            v = v * (a.evaluate(env) if a.variables() <= env.keys() else Sym({(a,): 1}))
        out = out + v
    return out


def exact_div(a: Dim, b: Dim) -> Dim | None:
    """``a / b`` when it divides exactly as polynomials (b an int or a single monomial), else None."""
    if isinstance(b, int):
        if b == 0:
            return None
        if isinstance(a, int):
            return a // b if a % b == 0 else None
        if all(c % b == 0 for _, c in a.terms):
            return _norm(Sym({m: c // b for m, c in a.terms}))
        return None
    if isinstance(a, int) and a == 0:
        return 0  # zero is every polynomial's multiple (``0 // (16*B)`` is 0: a view at offset 0)
    if len(b.terms) != 1:
        return 1 if a == b else None  # only the trivial case for sums
    (bm, bc), = b.terms
    if isinstance(a, int):
        return None
    out = {}
    for m, c in a.terms:
        rest = list(m)
        for atom in bm:
            if atom not in rest:
                return None
            rest.remove(atom)
        if c % bc:
            return None
        out[tuple(rest)] = c // bc
    return _norm(Sym(out))


def _whole_part(a: Dim, b: Dim) -> tuple:
    """``a`` as ``b*q + r`` for a positive int ``b``: ``q`` the terms whose coefficients ``b`` divides
    (their quotients) and the constant's multiple of ``b``, ``r`` the rest, its constant in [0, b); or
    ``(0, a)``. Every term takes integer values, so ``(b*q + r) // b == q + r // b`` and
    ``(b*q + r) % b == r % b``: a strided conv's ``(4*h - 1)//2 + 1`` is ``2*h``, as a pool's ``4*h // 2``."""
    if not (isinstance(b, int) and b > 0 and isinstance(a, Sym)):
        return 0, a
    q, r = {}, {}
    for m, c in a.terms:
        if m == ():
            q[()], r[()] = c // b, c % b
        elif c % b == 0:
            q[m] = c // b
        else:
            r[m] = c
    if not any(m for m in q if q[m]):
        return 0, a
    return _norm(Sym(q)), _norm(Sym(r))


def floordiv(a: Dim, b: Dim) -> Dim:
    if isinstance(a, int) and isinstance(b, int):
        return a // b
    q = exact_div(a, b)
    if q is not None:
        return q
    whole, rest = _whole_part(a, b)
    if not (isinstance(whole, int) and whole == 0):
        return whole + floordiv(rest, b)
    return Sym({(Atom("floordiv", (a, b)),): 1})


def mod(a: Dim, b: Dim) -> Dim:
    if isinstance(a, int) and isinstance(b, int):
        return a % b
    if exact_div(a, b) is not None:
        return 0
    whole, rest = _whole_part(a, b)
    if not (isinstance(whole, int) and whole == 0):
        return mod(rest, b)
    return Sym({(Atom("mod", (a, b)),): 1})


def ceildiv(a: Dim, b: Dim) -> Dim:
    return -floordiv(-a, b)


def dmax(a: Dim, b: Dim) -> Dim:
    if isinstance(a, int) and isinstance(b, int):
        return max(a, b)
    if a == b:
        return a
    d = a - b
    if isinstance(d, int):
        return a if d > 0 else b
    if nonnegative(d):
        return a
    if nonnegative(-d):
        return b
    return Sym({(Atom("max", tuple(sorted((a, b), key=str))),): 1})


def nonnegative(d: Dim) -> bool:
    """``d >= 0`` for every binding: a polynomial in plain dim names (never negative) whose
    coefficients and constant are all >= 0 (``S``, ``2*B + 1``; not ``S - 1``, nor ``max(...)``)."""
    if isinstance(d, int):
        return d >= 0
    return all(c >= 0 and all(a.kind == "var" for a in m) for m, c in d.terms)


def dmin(a: Dim, b: Dim) -> Dim:
    if isinstance(a, int) and isinstance(b, int):
        return min(a, b)
    if a == b:
        return a
    d = a - b
    if isinstance(d, int):
        return b if d > 0 else a
    if nonnegative(d):
        return b
    if nonnegative(-d):
        return a
    return Sym({(Atom("min", tuple(sorted((a, b), key=str))),): 1})


def prod(dims) -> Dim:
    """The product of ``dims``. Symbolic ones are multiplied in after the rest (in their order): the same
    polynomial (a product is canonical), with one Sym made per symbolic dim, not one per dim after the
    first symbolic one (``B*64*384``: one, not two; shapes' products are taken for every reshape)."""
    out: Dim = 1
    syms = None
    for d in dims:
        if d.__class__ is Sym:
            if syms is None:
                syms = [d]
            else:
                syms.append(d)
        else:
            out = out * d
    if syms is not None:
        for d in syms:
            out = out * d
    return out


def solve_linear(d: Dim, value: int) -> tuple[str, int] | None:
    """For ``d = c*v + k`` in one unknown ``v``, return ``(v, solution)`` if ``d == value`` has an
    integer solution; None if ``d`` is not of that form. Raises if no integer solution exists."""
    if isinstance(d, int):
        return None
    const, lin = 0, []
    for m, c in d.terms:
        if m == ():
            const = c
        elif len(m) == 1 and m[0].kind == "var":
            lin.append((m[0].args[0], c))
        else:
            return None
    if len(lin) != 1:
        return None
    name, c = lin[0]
    if (value - const) % c:
        raise ValueError(f"no integer {name} makes {d} equal {value}")
    return name, (value - const) // c


def sizes(op: str, shape) -> tuple:
    """``shape`` as dims (ints, names or Syms), a negative static one an error naming ``op``."""
    out = dims(op, shape)
    bad = [d for d in out if isinstance(d, int) and d < 0]
    if bad:
        raise op_error(ValueError, op, f"negative size {bad[0]} in shape {shape_str(out)}")
    return out
