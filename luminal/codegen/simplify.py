"""Index simplification, for every target: a kernel's index math (``INDEX`` values) rewritten into
sums of terms, ``Div`` and ``Mod`` by constants folded through them using the ranges of the work
items and loop variables. The CPU emitter (``llvm.py``) and the CUDA renderer
(``backends/cuda/render.py``) both render :func:`simplify_index`'s kernel; the emulator runs the
kernel as lowered, and the tests run both forms on it.
"""

from __future__ import annotations

from luminal.codegen import ir
from luminal.core import dtype as dt


class _Index:
    """Rewrites a CPU kernel's index math (``INDEX`` values) into sums of terms, then folds ``Div`` and
    ``Mod`` by constants through them using the ranges of the work items and loop variables: a
    row-major index taken apart again (``((i * 18 + j) // 18) % 16``, what a Reshape of a view reads)
    becomes ``i % 16``. Every rewrite holds for the non-negative operands the IR promises; a
    remainder that may be negative (an index outside a masked view's box) is left as written, so
    even the values computed for unread lanes stay what the kernel says.

    A linear form is ``({id(atom): (atom, coefficient)}, constant)``; atoms are the values that are not
    sums or constant multiples (items, loop variables, parameters, quotients, remainders, products
    of two unknowns)."""

    def __init__(self, k: ir.Kernel):
        self.ranges: dict = {}  # name -> (lo, hi) of a loop variable in scope
        self.items = [(0, g.arg - 1) if g.op == "const" else (0, None) for g in k.grid]
        self.memo: dict = {}  # id(value) -> simplified value (per loop scope: ranges differ)
        self.lin: dict = {}  # id(simplified value) -> (the value, kept alive so its id stays its own; its linear form)

    def kernel(self, k: ir.Kernel) -> ir.Kernel:
        return ir.Kernel(k.name, k.buffers, k.params, k.grid, self.block(k.body), k.block, k.shared, k.notes)

    def block(self, body) -> tuple:
        out = []
        for s in body:
            if isinstance(s, ir.Assign):
                out.append(ir.Assign(s.name, self.value(s.value)))
            elif isinstance(s, (ir.Store, ir.AtomicAdd)):
                valid = None if s.valid is None else self.value(s.valid)
                out.append(type(s)(s.buffer, self.value(s.index), self.value(s.value), valid))
            elif isinstance(s, ir.Loop):
                start, stop = self.value(s.start), self.value(s.stop)
                step = None if s.step is None else self.value(s.step)
                lo, hi = self.range(start), self.range(stop)
                saved, memo, lin = self.ranges.get(s.var), self.memo, self.lin
                self.ranges[s.var] = (lo[0], None if hi[1] is None else hi[1] - 1) if step is None else (lo[0], None)
                self.memo, self.lin = {}, {}
                body = self.block(s.body)
                self.memo, self.lin = memo, lin
                if saved is None:
                    del self.ranges[s.var]
                else:
                    self.ranges[s.var] = saved
                out.append(ir.Loop(s.var, start, stop, body, step, s.ordered))
            elif isinstance(s, ir.If):
                out.append(ir.If(self.value(s.cond), self.block(s.body)))
            else:
                out.append(s)
        return tuple(out)

    def value(self, v: ir.V) -> ir.V:
        memo = self.memo
        stack = [(v, False)]
        push, pop = stack.append, stack.pop
        while stack:
            x, ready = pop()
            if id(x) in memo:
                continue
            if not ready:
                push((x, True))
                for a in x.args:
                    if id(a) not in memo:
                        push((a, False))
                continue
            args = tuple([memo[id(a)] for a in x.args])
            new = x
            for a, b in zip(args, x.args):
                if a is not b:
                    new = ir.V(x.op, x.dtype, args, x.arg)
                    break
            if x.dtype is ir.INDEX and x.op in ("Add", "Mul", "Div", "Mod"):
                new = self.build(self.linear(new))
            elif x.op in ("LessThan", "And", "Or", "Not", "Where"):
                new = self.decide(new)
            elif x.op == "load" and len(args) == 2 and args[1].op == "const":  # always or never read
                new = ir.V("load", x.dtype, args[:1], x.arg) if args[1].arg else ir.const(x.arg[1], x.dtype)
            memo[id(x)] = new
        return memo[id(v)]

    def decide(self, v: ir.V) -> ir.V:
        """A mask's test whose outcome the ranges decide (an index compared with a bound it always or
        never reaches), as a constant; and/or/not/select of such constants folded."""
        a = v.args
        if v.op == "LessThan":
            if a[0].dtype is not ir.INDEX:
                return v
            lo, hi = self.range_of(_plus(self.linear(a[0]), _times(self.linear(a[1]), -1)))
            if hi is not None and hi < 0:
                return ir.const(True, dt.bool_)
            if lo is not None and lo >= 0:
                return ir.const(False, dt.bool_)
            return v
        known = [x.arg if x.op == "const" and x.dtype.kind == "b" else None for x in a]
        if v.op == "Not":
            return v if known[0] is None else ir.const(not known[0], dt.bool_)
        if v.op == "Where":
            return v if known[0] is None else a[1] if known[0] else a[2]
        absorbing = v.op == "Or"  # x or True is True; x and False is False; the neutral one drops out
        for i in (0, 1):
            if known[i] is not None:
                return ir.const(absorbing, dt.bool_) if bool(known[i]) == absorbing else a[1 - i]
        return v

    # linear forms ---------------------------------------------------------------------------------
    def linear(self, v: ir.V):
        got = self.lin.get(id(v))
        if got is not None:
            return got[1]
        if v.op == "const":
            out = ({}, v.arg)
        elif v.op == "Add":
            out = self.recombine(_plus(self.linear(v.args[0]), self.linear(v.args[1])))
        elif v.op == "Mul" and (self.linear(v.args[0])[0] == {} or self.linear(v.args[1])[0] == {}):
            (ta, ca), (tb, cb) = self.linear(v.args[0]), self.linear(v.args[1])
            k, (t, c) = (ca, (tb, cb)) if not ta else (cb, (ta, ca))
            out = ({key: (a, n * k) for key, (a, n) in t.items() if n * k}, c * k)
        elif v.op in ("Div", "Mod") and self.linear(v.args[1])[0] == {} and self.linear(v.args[1])[1] > 0:
            out = self.divmod_(v, self.linear(v.args[0]), self.linear(v.args[1])[1])
        else:
            out = ({id(v): (v, 1)}, 0)
        self.lin[id(v)] = (v, out)
        return out

    def recombine(self, form):
        """``form`` with each ``(x // k) * k * n + (x % k) * n`` pair (a row-major index split and put
        back together) replaced by ``x * n`` (exact for any integers, floor or truncating alike)."""
        terms, _ = form
        for key, (a, n) in terms.items():
            if a.op != "Div" or a.args[1].op != "const" or a.args[1].arg <= 0 or n % a.args[1].arg:
                continue
            k, x = a.args[1].arg, a.args[0]
            for key2, (b, m) in terms.items():
                if b.op == "Mod" and b.args[1].op == "const" and b.args[1].arg == k and m * k == n and \
                        _same(self.linear(b.args[0]), self.linear(x)):
                    rest = ({kk: t for kk, t in terms.items() if kk not in (key, key2)}, form[1])
                    return self.recombine(_plus(rest, _times(self.linear(x), m)))
        return form

    def divmod_(self, v, x, k: int):
        """``x // k`` or ``x % k`` (``v.op``) of the linear form ``x``."""
        terms, c = x
        whole = {key: (a, n // k) for key, (a, n) in terms.items() if n % k == 0}
        part = {key: t for key, t in terms.items() if key not in whole}
        cq, cr = divmod(c, k)
        rest = (part, cr)
        lo, hi = self.range_of(rest)
        if lo is None or lo < 0:  # a remainder that may be negative: as written
            if v.op == "Div" and not part and not whole and c >= 0:
                return ({}, c // k)
            return ({id(v): (v, 1)}, 0)
        if v.op == "Mod":
            if hi is not None and hi < k:
                return rest
            atom = ir.V("Mod", ir.INDEX, (self.build(rest), ir.const(k)))
            return ({id(atom): (atom, 1)}, 0)
        q = ({key: t for key, t in whole.items() if t[1]}, cq)
        if hi is not None and hi < k:
            return q
        inner = self.build(rest)
        lo = self.range(inner.args[0])[0] if inner.op == "Div" else None
        if inner.op == "Div" and inner.args[1].op == "const" and inner.args[1].arg > 0 and lo is not None and \
                lo >= 0:  # (y // a) // k is y // (a * k)
            atom = ir.V("Div", ir.INDEX, (inner.args[0], ir.const(inner.args[1].arg * k)))
        else:
            atom = ir.V("Div", ir.INDEX, (inner, ir.const(k)))
        self.lin[id(atom)] = (atom, ({id(atom): (atom, 1)}, 0))
        return _plus(q, ({id(atom): (atom, 1)}, 0))

    def build(self, form) -> ir.V:
        terms, c = form
        out = None
        for a, n in terms.values():
            t = a if n == 1 else ir.V("Mul", ir.INDEX, (a, ir.const(n)))
            out = t if out is None else ir.V("Add", ir.INDEX, (out, t))
        if out is None:
            out = ir.const(c)
        elif c:
            out = ir.V("Add", ir.INDEX, (out, ir.const(c)))
        self.lin[id(out)] = (out, form)
        return out

    # ranges -------------------------------------------------------------------------------------------
    def range(self, v: ir.V):
        """``(lo, hi)`` bounds of an INDEX value (None: unbounded)."""
        if v.dtype is not ir.INDEX:
            return (None, None)
        if v.op in ("Add", "Mul", "Div", "Mod", "const"):
            return self.range_of(self.linear(v))
        return self.atom_range(v)

    def atom_range(self, a: ir.V):
        if a.op == "item":
            return self.items[a.arg]
        if a.op == "var":
            return self.ranges.get(a.arg, (None, None))
        if a.op == "param":
            return (0, None)
        if a.op == "const":
            return (a.arg, a.arg)
        if a.op in ("Div", "Mod") and a.args[1].op == "const" and a.args[1].arg > 0:
            lo, hi = self.range(a.args[0])
            if lo is None or lo < 0:
                return (None, None)
            k = a.args[1].arg
            if a.op == "Mod":
                return (0, k - 1 if hi is None else min(hi, k - 1))
            return (lo // k, None if hi is None else hi // k)
        if a.op == "Mul":
            (la, ha), (lb, hb) = self.range(a.args[0]), self.range(a.args[1])
            if None not in (la, lb) and la >= 0 and lb >= 0:
                return (la * lb, None if None in (ha, hb) else ha * hb)
        if a.op == "Where":
            (la, ha), (lb, hb) = self.range(a.args[1]), self.range(a.args[2])
            return (None if None in (la, lb) else min(la, lb), None if None in (ha, hb) else max(ha, hb))
        return (None, None)

    def range_of(self, form):
        terms, c = form
        lo = hi = c
        for a, n in terms.values():
            la, ha = self.atom_range(a)
            if n < 0:
                la, ha = (None if ha is None else ha * n), (None if la is None else la * n)
            else:
                la, ha = (None if la is None else la * n), (None if ha is None else ha * n)
            lo = None if lo is None or la is None else lo + la
            hi = None if hi is None or ha is None else hi + ha
        return lo, hi


def _same(x, y) -> bool:
    """Two linear forms with the same terms and constant."""
    return x[1] == y[1] and {k: n for k, (_, n) in x[0].items()} == {k: n for k, (_, n) in y[0].items()}


def _times(x, k: int):
    return {key: (a, n * k) for key, (a, n) in x[0].items()}, x[1] * k


def _plus(x, y):
    terms = dict(x[0])
    for key, (a, n) in y[0].items():
        m = terms[key][1] + n if key in terms else n
        if m:
            terms[key] = (a, m)
        else:
            terms.pop(key, None)
    return terms, x[1] + y[1]


def simplify_index(k: ir.Kernel) -> ir.Kernel:
    """``k`` with its index math simplified (:class:`_Index`): the same values wherever the IR's
    promises hold, fewer divisions."""
    return _Index(k).kernel(k)
