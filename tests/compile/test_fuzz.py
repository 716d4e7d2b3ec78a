"""Equivalence fuzz: random programs of public ops, compiled for ``cpu``, against the reference interpreter.

Why: the compiler rewrites, fuses and re-lowers whole graphs, so a wrong rule shows up only for some
combination of ops, views, dtypes and symbolic dims. The programs combine elementwise unary/binary ops
(where, maximum, mod, comparisons), casts between float32/float16/bfloat16/int32/bool, sum/max-family
reductions, matmuls (batched, broadcast, transposed operands), gather/index_select/take_along_dim/
scatter_add and movement (permute, expand, reshape, strided slices, pad, flip, unfold, cat) over inputs
with named dims; each is compiled once per backend and run under two bindings of its dims (0 included),
the cpu backend in guard mode (``luminal/backends/cpu/guard.py``: an out-of-bounds write fails the run).
A second test differentiates the sum of the outputs (``train.grad``) and compares the gradients too.

Reproducing: hypothesis draws a seed and an op count (``derandomize=True``: the same examples every
run); the program is drawn from a numpy generator with that seed, so a smaller count is a prefix of the
same program and shrinking finds the shortest failing one. The failure note is the program's source as
it was built (paste it after ``import luminal as lm, numpy as np``), with the bindings; the inputs are
``build(seed, n_ops, grad).arrays(binding, seed + k)``. ``LUMINAL_FUZZ_EXAMPLES`` scales the example
counts for a longer run.

Comparison: each value carries an ``exact`` flag (bit-for-bit fixed by the semantics table: movement,
casts, int/bool math, max, where, gather), compared exactly, and float arithmetic an absolute error
estimate (rounding per op in its dtype, accumulation over reductions) that sets the tolerance, so
float16/bfloat16 chains and long reductions get looser as they should and no further. Ops that jump
(comparisons, float->int casts, mod, argmax) only read exact values, so a legitimate last-bit
difference upstream cannot flip them; in gradient programs the same holds for kinks (relu, abs, max).
Domains avoid NaN/inf by construction (``log2(x*x + 0.5)``; values are rescaled by powers of two when
their bound grows). Calibration (by hand, not in CI): against a legitimate but different
implementation (float64 math, unrounded float16/bfloat16 intermediates, reversed summation) 2,800
programs passed at half the margin used here, and planted bugs (a dropped sum term, an off-by-one
gather, scatter_add assigning instead of adding) failed within the default example count.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

import luminal as lm
from luminal import train
from luminal.core import dtype as dt
from luminal.core.symbolic import evaluate, is_static, shape_str

pytestmark = pytest.mark.usefixtures("cpu_guard")  # (conftest: out-of-bounds writes fail)

FLOATS = (lm.float32, lm.float16, lm.bfloat16)
DTYPES = FLOATS + (lm.int32, lm.bool)
U = {lm.float32: 2.0**-24, lm.float16: 2.0**-11, lm.bfloat16: 2.0**-8}  # unit roundoff per float dtype
U_ACC = 2.0**-24  # reductions accumulate in float32 whatever the dtype (primitives.py)
BASE_TOL = {lm.float32: (1e-4, 1e-5), lm.float16: (4e-3, 4e-3), lm.bfloat16: (3e-2, 3e-2)}  # (rtol, atol floor)
GRAD_TOL = {lm.float32: 1e-3, lm.float16: 3e-2, lm.bfloat16: 1e-1}  # relative to the gradient's largest entry
NAMES = ("B", "S")
MAX_NUMEL = 512
SCALE = float(os.environ.get("LUMINAL_FUZZ_EXAMPLES", "1"))
CODEGEN_BACKENDS = ("cpu", "cuda-emulated")  # every program is checked on each code-generating backend
FUZZ = settings(deadline=None, derandomize=True, print_blob=True, max_examples=max(1, int(100 * SCALE)),
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# unary float ops: template, |f'| bound given the input bound M, output bound, keeps exactness, kinked
# (a kink in value or gradient: in gradient programs only applied to exact inputs, where no rounding
# difference can move a value across it)
UNARY = {
    "sin": ("{x}.sin()", lambda m: 1, lambda m: min(m, 1.0), False, False),
    "cos": ("{x}.cos()", lambda m: 1, lambda m: 1.0, False, False),
    "tanh": ("{x}.tanh()", lambda m: 1, lambda m: min(m, 1.0), False, False),
    "sigmoid": ("{x}.sigmoid()", lambda m: 0.25, lambda m: 1.0, False, False),
    "exp2": ("({x}.tanh() * 4).exp2()", lambda m: 44.4, lambda m: 16.0, False, False),
    "exp": ("({x}.tanh() * 3).exp()", lambda m: 60.3, lambda m: 20.1, False, False),
    "log2": ("({x} * {x} + 0.5).log2()", lambda m: 2.1, lambda m: max(1.0, math.log2(m * m + 0.5)), False, False),
    "sqrt": ("({x} * {x} + 0.25).sqrt()", lambda m: 1, lambda m: math.sqrt(m * m + 0.25), False, False),
    "recip": ("({x} * {x} + 0.5).reciprocal()", lambda m: 1.9, lambda m: 2.0, False, False),
    "square": ("{x}.square()", lambda m: 2 * m, lambda m: m * m, False, False),
    "gelu": ("{x}.gelu()", lambda m: 1.2, lambda m: m, False, False),
    "silu": ("{x}.silu()", lambda m: 1.1, lambda m: m, False, False),
    "neg": ("-{x}", lambda m: 1, lambda m: m, True, False),
    "relu": ("{x}.relu()", lambda m: 1, lambda m: m, True, True),
    "abs": ("{x}.abs()", lambda m: 1, lambda m: m, True, True),
    "clamp": ("{x}.clamp(-1.5, 1.0)", lambda m: 1, lambda m: min(m, 1.5), True, True),
}


@dataclass
class Val:
    """A tensor of the program with what the comparison needs to know about it."""

    name: str  # a Python expression for it (a variable of the program, or a literal)
    t: lm.GraphTensor | None  # None for a Python scalar
    exact: bool  # bit-for-bit fixed by the semantics: compared exactly
    bound: float  # |value| <= bound
    err: float  # absolute error an implementation may legitimately add (reordered sums, fused rounding)
    dtype: lm.DType | None = None  # of a scalar

    @property
    def kind(self) -> str:
        return (self.t.dtype if self.t is not None else self.dtype).kind

    @property
    def dt(self) -> lm.DType:
        return self.t.dtype if self.t is not None else self.dtype


class Program:
    """Draws and builds one random program; keeps its source text and how to make its inputs."""

    def __init__(self, rng: np.random.Generator, envs: list[dict], grad: bool):
        self.rng, self.envs, self.grad = rng, envs, grad
        self.g = lm.Graph()
        self.ns: dict[str, object] = {}
        self.lines = ["g = lm.Graph()"]
        self.pool: list[Val] = []
        self.specs: dict[str, tuple] = {}  # input name -> (shape, dtype, index range as (lo, hi) Dims or None)
        self.outputs: list[Val] = []
        self.used: set[str] = set()  # values some op reads
        self.names: list[str] = []  # named dims some input has as a plain dim (so every call binds them)

    # drawing ----------------------------------------------------------------------------------
    def choice(self, seq):
        seq = list(seq)
        return seq[self.rng.integers(len(seq))]

    def int(self, lo: int, hi: int) -> int:
        return int(self.rng.integers(lo, hi + 1))

    def coin(self) -> bool:
        return bool(self.rng.random() < 0.5)

    # shapes -----------------------------------------------------------------------------------
    def sizes(self, shape) -> list[tuple]:
        return [tuple(evaluate(d, env) for d in shape) for env in self.envs]

    def dim_min(self, shape, i) -> int:
        return min(evaluate(shape[i], env) for env in self.envs)

    def dim_max(self, shape, i) -> int:
        return max(evaluate(shape[i], env) for env in self.envs)

    def numel_max(self, shape) -> int:
        return max((math.prod(s) for s in self.sizes(shape)), default=1)

    @staticmethod
    def dim(v: Val, i: int) -> str:
        d = v.t.shape[i]
        return str(d) if is_static(d) else f"{v.name}.shape[{i}]"

    def shape_expr(self, v: Val, replace: dict | None = None) -> str:
        """``v``'s shape as source text, with dims in ``replace`` (index -> text) substituted."""
        items = [(replace or {}).get(i, self.dim(v, i)) for i in range(v.t.ndim)]
        return "(" + "".join(f"{x}, " for x in items) + ")"

    # building ---------------------------------------------------------------------------------
    def emit(self, expr: str, *, exact: bool, bound: float, err: float = 0.0) -> Val | None:
        """Evaluate ``expr`` (the program's next line); drop it when the result is too large."""
        t = eval(expr, {"lm": lm, "np": np, "g": self.g}, self.ns)  # noqa: S307 - our own generated source
        if self.numel_max(t.shape) > MAX_NUMEL:
            return None
        name = f"t{len(self.lines)}"
        self.ns[name] = t
        self.lines.append(f"{name} = {expr}  # {shape_str(t.shape)} {t.dtype.name}"
                          + (" exact" if exact else f" |x|<={bound:.3g} err~{err:.2g}"))
        self.used.update(re.findall(r"\b[tx]\d+\b", expr))
        if t.dtype.kind != "f":
            exact, err, bound = True, 0.0, min(bound, 2.0**31)
        v = Val(name, t, exact, bound, err)
        self.pool.append(v)
        return v

    def new_input(self, shape: str, dtype, index: tuple[str, str] | None = None) -> Val:
        """A fresh input; ``index``: (lo, hi) source of Dims, for int indices drawn in [lo, hi)."""
        name = f"x{len(self.specs)}"
        t = eval(f"g.input({name!r}, {shape}, lm.{dtype.name})", {"lm": lm, "g": self.g}, self.ns)
        rng = None if index is None else tuple(eval(e, {}, self.ns) for e in index)  # noqa: S307
        self.specs[name] = (t.shape, dtype, rng)
        self.ns[name] = t
        self.lines.append(f"{name} = g.input({name!r}, {shape}, lm.{dtype.name})  # {shape_str(t.shape)}"
                          + (f", values in [{index[0]}, {index[1]})" if index else ""))
        bound = {"f": 2.0, "i": 5.0, "b": 1.0}[dtype.kind]
        if index is not None:
            bound = float(max(abs(evaluate(d, env)) for d in rng for env in self.envs))
        v = Val(name, t, True, bound, 0.0)
        self.pool.append(v)
        return v

    def fit(self, v: Val, limit: float) -> Val:
        """``v`` rescaled (floats: by a power of two; ints: fmod) so that its bound is under ``limit``."""
        if v.bound <= limit or v.t is None:
            return v
        if v.kind == "f":
            s = 2.0 ** -math.ceil(math.log2(v.bound / limit))
            return self.emit(f"{v.name} * {s!r}", exact=False, bound=v.bound * s,
                             err=(v.err + U[v.dt] * v.bound) * s) or v
        if v.kind == "i":
            return self.emit(f"lm.fmod({v.name}, 1000)", exact=True, bound=999.0) or v
        return v

    def lift(self, v: Val, out: lm.DType) -> Val:
        """An int operand about to be promoted to float16 kept in range (past 65504 it would be inf)."""
        return self.fit(v, 3e4) if v.kind == "i" and out is lm.float16 else v

    # operand helpers --------------------------------------------------------------------------
    def broadcasts(self, shape, target) -> bool:
        return len(shape) <= len(target) and all(
            a == b or (is_static(a) and a == 1) for a, b in zip(reversed(shape), reversed(target)))

    def partner(self, a: Val, kinds: str, exact: bool = False) -> Val:
        """A second operand for ``a``: same shape or broadcastable to it, of a kind in ``kinds``."""
        form = self.choice(["pool", "fresh", "fresh_broadcast", "scalar", "flip", "constant"])
        if form == "pool":
            cands = [v for v in self.pool if v.kind in kinds and (v.exact or not exact)
                     and self.broadcasts(v.t.shape, a.t.shape)]
            if cands:
                return self.choice(cands)
        if form == "scalar":
            k = self.choice(kinds)
            lit = {"f": self.choice([0.5, -1.25, 2.0, 3.0]), "i": self.choice([2, -3] + [65537] * (a.kind == "i")),
                   "b": True}[k]
            d = {"f": lm.float32, "i": lm.int32, "b": lm.bool}[k]
            return Val(repr(lit), None, True, float(abs(lit)), 0.0, dtype=d)
        if form == "flip" and a.t.ndim and a.kind in kinds and (a.exact or not exact):
            d = self.int(0, a.t.ndim - 1)
            return Val(f"{a.name}.flip({d})", a.t.flip(d), a.exact, a.bound, a.err)
        if form == "constant" and all(is_static(d) for d in a.t.shape) and a.kind in kinds:
            n, shape = math.prod(a.t.shape), tuple(a.t.shape)
            if a.kind == "f":
                src = f"np.linspace(-1.5, 1.5, {n}, dtype=np.float32).reshape({shape})"
            elif a.kind == "i":
                src = f"(np.arange({n}, dtype=np.int32) % 7 - 3).reshape({shape})"
            else:
                src = f"(np.arange({n}) % 3 == 0).reshape({shape})"
            return self.emit(f"g.constant({src}, lm.{a.dt.name})", exact=True, bound=3.0)
        replace = {}
        if form == "fresh_broadcast":
            replace = {i: "1" for i in range(a.t.ndim) if self.coin()}
        same = a.kind in kinds and self.coin()
        d = a.dt if same else self.choice([d for d in DTYPES if d.kind in kinds])
        return self.new_input(self.shape_expr(a, replace), d)

    def condition(self, like: Val) -> Val:
        """An exact bool tensor broadcastable to ``like``."""
        cands = [v for v in self.pool if v.kind == "b" and self.broadcasts(v.t.shape, like.t.shape)]
        if cands and self.coin():
            return self.choice(cands)
        if like.exact and like.kind != "b" and self.coin():
            return Val(f"({like.name} > 0)", like.t > 0, True, 1.0, 0.0)
        return self.new_input(self.shape_expr(like), lm.bool)

    # ops --------------------------------------------------------------------------------------
    def op_unary(self, v: Val):
        if v.kind != "f":
            return
        name = self.choice(sorted(UNARY))
        tmpl, lip, out_bound, keeps, kinked = UNARY[name]
        if kinked and self.grad and not v.exact:
            return
        v = self.fit(v, 16.0)
        b = out_bound(v.bound)
        self.emit(tmpl.format(x=v.name), exact=v.exact and keeps, bound=b,
                  err=lip(v.bound) * v.err + (0 if keeps else 4 * U[v.dt] * (b + v.bound)))

    def op_binary(self, a: Val):
        if a.t.ndim == 0 and self.coin():
            return
        if a.kind == "b":
            b = self.partner(a, "b")
            op = self.choice(["&", "|", "^"])
            self.emit(f"({a.name} {op} {b.name})", exact=True, bound=1.0)
            return
        op = self.choice(["+", "-", "*", "/", "maximum", "minimum", "where", "mod", "compare"])
        if op == "compare":
            if not a.exact:
                return
            b = self.partner(a, "fi", exact=True)
            a, b = self.lift(a, _result_dtype(a, b)), self.lift(b, _result_dtype(a, b))
            cmp = self.choice(["<", "<=", ">", ">=", "==", "!="])
            self.emit(f"({a.name} {cmp} {b.name})", exact=True, bound=1.0)
            return
        if op == "mod":
            if a.kind == "i":
                b = self.partner(a, "i")
                den = f"({self.fit(b, 2.0**20).name}.abs() + 1)" if b.t is not None else str(abs(int(b.name)) + 1)
                f = self.choice(["lm.fmod({a}, {d})", "({a} % {d})", "({a} // {d})"])
                self.emit(f.format(a=a.name, d=den), exact=True, bound=a.bound)
            elif a.exact:
                if self.coin():
                    self.emit(f"lm.fmod({a.name}, 0.75)", exact=True, bound=0.75)
                else:
                    self.emit(f"({a.name} % 0.75)", exact=False, bound=0.75, err=4 * U[a.dt])
            return
        b = self.partner(a, "fi")
        out = _result_dtype(a, b)
        a, b = self.lift(a, out), self.lift(b, out)
        if op == "where":
            c = self.condition(a)
            self.emit(f"lm.where({c.name}, {a.name}, {b.name})", exact=a.exact and b.exact,
                      bound=max(a.bound, b.bound), err=max(a.err, b.err))
            return
        if op in ("maximum", "minimum"):
            if self.grad and not (a.exact and b.exact):
                return
            self.emit(f"lm.{op}({a.name}, {b.name})", exact=a.exact and b.exact, bound=max(a.bound, b.bound),
                      err=max(a.err, b.err))
            return
        u = U.get(out, 0.0)
        if op in ("+", "-"):
            self.emit(f"({a.name} {op} {b.name})", exact=out.kind != "f", bound=a.bound + b.bound,
                      err=a.err + b.err + u * (a.bound + b.bound))
        elif op == "*":
            lim = 16.0 if out.kind == "f" else 2.0**20  # int32 wraps (primitives.py): exercised, not avoided
            a, b = self.fit(a, lim), self.fit(b, lim)
            self.emit(f"({a.name} * {b.name})", exact=out.kind != "f", bound=a.bound * b.bound,
                      err=a.err * b.bound + b.err * a.bound + u * a.bound * b.bound)
        else:  # true division by a positive denominator
            a, b = self.fit(a, 16.0), self.fit(b, 16.0)
            u = max(U.get(d, 0.0) for d in (_result_dtype(a, b), b.dt))  # b * b rounds in b's dtype
            self.emit(f"({a.name} / ({b.name} * {b.name} + 0.5))", exact=False, bound=2 * a.bound,
                      err=2 * a.err + 1.9 * a.bound * b.err + 8 * u * a.bound)

    def op_reduce(self, v: Val):
        nd = v.t.ndim
        if nd == 0:
            return
        axis = self.int(-nd, nd - 1)
        axes = (axis,)
        if nd >= 2 and self.coin():
            axes = tuple(sorted({axis % nd, self.int(0, nd - 1)}))
        n = max(math.prod(evaluate(v.t.shape[a], env) for a in axes) for env in self.envs)
        nonempty = all(self.dim_min(v.t.shape, a) > 0 for a in axes)
        keep = self.coin()
        ax = axes[0] if len(axes) == 1 else axes
        kind = self.choice(["sum", "sum", "max", "min", "mean", "softmax", "logsumexp", "argmax", "cumsum", "anyall"])
        if kind in ("sum", "cumsum"):
            if v.kind == "f":
                v = self.fit(v, 16.0)
            elif v.kind == "i":
                v = self.fit(v, 2.0**20)
            u = U.get(v.dt, 0.0)
            expr = f"{v.name}.sum({ax!r}, keepdim={keep})" if kind == "sum" else f"{v.name}.cumsum({axis})"
            self.emit(expr, exact=v.kind != "f", bound=n * v.bound,
                      err=n * v.err + (U_ACC * n + u) * n * v.bound)
        elif kind in ("max", "min") and nonempty:
            if self.grad and not v.exact:
                return
            self.emit(f"{v.name}.a{kind}({ax!r}, keepdim={keep})", exact=v.exact, bound=v.bound, err=v.err)
        elif kind == "mean" and v.kind == "f":
            v = self.fit(v, 16.0)
            self.emit(f"{v.name}.mean({ax!r}, keepdim={keep})", exact=False, bound=v.bound,
                      err=v.err + (U_ACC * n + 2 * U[v.dt]) * v.bound)
        elif kind == "softmax" and v.kind == "f" and self.dim_min(v.t.shape, axis) > 0:
            v = self.fit(v, 16.0)
            self.emit(f"{v.name}.softmax({axis})", exact=False, bound=1.0,
                      err=2 * v.err + 6 * U[v.dt] + 2 * U_ACC * n)
        elif kind == "logsumexp" and v.kind == "f" and nonempty:
            v = self.fit(v, 16.0)
            b = v.bound + math.log(max(n, 1))
            self.emit(f"{v.name}.logsumexp({ax!r}, keepdim={keep})", exact=False, bound=b,
                      err=v.err + 6 * U[v.dt] * b + 2 * U_ACC * n)
        elif kind == "argmax" and v.exact and v.kind != "b" and self.dim_min(v.t.shape, axis) > 0:
            f = self.choice(["argmax", "argmin"])
            self.emit(f"{v.name}.{f}({axis}, keepdim={keep})", exact=True, bound=float(n))
        elif kind == "anyall" and v.kind == "b":
            self.emit(f"{v.name}.{self.choice(['any', 'all'])}({ax!r}, keepdim={keep})", exact=True, bound=1.0)

    def op_matmul(self, a: Val):
        if a.kind == "b" or a.t.ndim == 0:
            return
        a = self.fit(a, 16.0 if a.kind == "f" else 2.0**20)
        k = self.dim(a, -1 % a.t.ndim)
        n = self.int(1, 4)
        form = self.choice(["new", "new_transposed", "batched", "gram", "pool", "vector"])
        d = a.dt if self.coin() else self.choice([x for x in DTYPES if x.kind in "fi"])
        if form == "gram" and a.t.ndim >= 2:
            b = Val(f"{a.name}.mT", a.t.mT, a.exact, a.bound, a.err)
        elif form == "pool":
            cands = [v for v in self.pool if v.kind in "fi" and v.t.ndim >= 1 and v.bound <= 16
                     and v.t.shape[-2 if v.t.ndim >= 2 else 0] == a.t.shape[-1]
                     and _broadcastable(v.t.shape[:-2], a.t.shape[:-2])]
            if not cands:
                return
            b = self.choice(cands)
        elif form == "vector":
            b = self.new_input(f"({k},)", d)
        elif form == "new_transposed":
            x = self.new_input(f"({n}, {k})", d)
            b = Val(f"{x.name}.mT", x.t.mT, True, x.bound, 0.0)
        elif form == "batched":
            batch = [self.choice(["1", self.dim(a, i)]) for i in range(a.t.ndim - 2)]
            batch = ["2"] + batch if not batch or self.coin() else batch
            b = self.new_input("(" + ", ".join(batch + [k, str(n)]) + ",)", d)
        else:
            b = self.new_input(f"({k}, {n})", d)
        if a.t.ndim == 1 and b.t.ndim == 1 and self.coin():
            a = self.emit(f"{a.name}.unsqueeze(0)", exact=a.exact, bound=a.bound, err=a.err) or a
        kmax = self.dim_max(a.t.shape, a.t.ndim - 1)
        out = _result_dtype(a, b)
        a, b = self.lift(a, out), self.lift(b, out)
        u = U.get(out, 0.0)
        self.emit(f"({a.name} @ {b.name})", exact=out.kind != "f", bound=kmax * a.bound * b.bound,
                  err=kmax * (a.err * b.bound + b.err * a.bound) + (U_ACC * kmax + u) * kmax * a.bound * b.bound)

    def op_index(self, v: Val):
        nd = v.t.ndim
        if nd == 0:
            return
        d = self.int(0, nd - 1)
        if self.dim_min(v.t.shape, d) < 1:
            return
        m = self.int(1, 4)
        hi = f"{v.name}.shape[{d}]"
        form = self.choice(["index_select", "arange_index", "gather", "take_along_dim", "getitem", "scatter_add"])
        keep = dict(exact=v.exact, bound=v.bound, err=v.err)
        if form == "index_select":
            idx = self.new_input(f"({m},)", lm.int32, ("0", hi))
            self.emit(f"{v.name}.index_select({d}, {idx.name})", **keep)
        elif form == "arange_index":
            n = self.dim(v, d)
            mod = n if is_static(v.t.shape[d]) else f"g.constant({n})"
            self.emit(f"{v.name}.index_select({d}, (g.arange({m}) * {self.int(1, 3)} + {self.int(0, 2)}) % {mod})",
                      **keep)
        elif form in ("gather", "take_along_dim"):
            replace = {d: str(m)}
            if form == "take_along_dim":
                replace.update({i: "1" for i in range(nd) if i != d and self.coin()})
            idx = self.new_input(self.shape_expr(v, replace), lm.int32, ("0", hi))
            self.emit(f"lm.gather({v.name}, {d}, {idx.name})" if form == "gather" else
                      f"lm.take_along_dim({v.name}, {idx.name}, {d})", **keep)
        elif form == "getitem":
            shape = f"({m},)" if self.coin() else f"({m}, 2)"
            idx = self.new_input(shape, lm.int32, (f"-{hi}", hi))  # negative indices count from the end
            self.emit(f"{v.name}[{idx.name}]" if d == 0 else f"{v.name}[{':, ' * d}{idx.name}]", **keep)
        elif v.kind != "b":
            v = self.fit(v, 16.0 if v.kind == "f" else 1000.0)
            replace = {d: str(m)}
            idx = self.new_input(self.shape_expr(v, replace), lm.int32, ("0", hi))
            src = self.new_input(self.shape_expr(v, replace), v.dt)
            u = U.get(v.dt, 0.0)
            b = v.bound + m * src.bound
            self.emit(f"lm.scatter_add({v.name}, {d}, {idx.name}, {src.name})", exact=v.kind != "f", bound=b,
                      err=v.err + (U_ACC * m + 2 * u) * b)

    def op_move(self, v: Val):
        nd, shape = v.t.ndim, v.t.shape
        keep = dict(exact=v.exact, bound=v.bound, err=v.err)
        form = self.choice(["permute", "expand", "merge", "split", "slice", "index", "newaxis", "pad", "pad", "flip",
                            "unfold", "repeat", "contiguous", "flatten", "cat"])
        d = self.int(0, max(nd - 1, 0))
        if form == "permute" and nd >= 2:
            self.emit(f"{v.name}.permute{tuple(int(i) for i in self.rng.permutation(nd))}", **keep)
        elif form == "expand":
            k = self.int(0, nd)
            r = self.choice(["2", "3"] + [repr(x) for x in self.names])
            sizes = ["-1"] * k + [r] + ["-1"] * (nd - k)
            self.emit(f"{v.name}.unsqueeze({k}).expand({', '.join(sizes)})", **keep)
        elif form == "merge" and nd >= 2:
            d = min(d, nd - 2)
            self.emit(f"{v.name}.flatten({d}, {d + 1})", **keep)
        elif form == "split" and nd and is_static(shape[d]):
            divs = [q for q in range(2, shape[d]) if shape[d] % q == 0]
            if divs:
                q = self.choice(divs)
                self.emit(f"{v.name}.unflatten({d}, ({q}, {shape[d] // q}))", **keep)
        elif form == "slice" and nd:
            step = self.choice([1, 2, 3, -1, -2])
            n = shape[d]
            bounds = [None] + (list(range(-n - 1, n + 2)) if is_static(n) else [0, 1, -1, 2])
            a, b = self.choice(bounds), self.choice(bounds)
            sl = f"{'' if a is None else a}:{'' if b is None else b}:{step}"
            self.emit(f"{v.name}[{':, ' * d}{sl}]", **keep)
        elif form == "index" and nd and self.dim_min(shape, d) > 0:
            i = self.int(-self.dim_min(shape, d), self.dim_min(shape, d) - 1)
            self.emit(f"{v.name}[{':, ' * d}{i}]", **keep)
        elif form == "newaxis":
            self.emit(f"{v.name}[{':, ' * min(d, nd)}None]", **keep)
        elif form == "pad" and nd:
            pads = []
            for i in range(min(nd, self.int(1, 2))):
                crop_ok = self.dim_min(shape, nd - 1 - i) >= 2
                pads += [self.int(-1 if crop_ok else 0, 2), self.int(-1 if crop_ok else 0, 2)]
                if crop_ok and pads[-1] + pads[-2] < -1:
                    pads[-1] = 0
            value = {"f": self.choice([0.0, 1.0, -0.5]), "i": self.choice([0, 1, -2]), "b": self.coin()}[v.kind]
            self.emit(f"{v.name}.pad({tuple(pads)}, {value!r})", **{**keep, "bound": max(v.bound, abs(float(value)))})
        elif form == "flip" and nd:
            dims = sorted({d, self.int(0, nd - 1)})
            self.emit(f"{v.name}.flip({', '.join(map(str, dims))})", **keep)
        elif form == "unfold" and nd and is_static(shape[d]) and shape[d] >= 1:
            self.emit(f"{v.name}.unfold({d}, {self.int(1, shape[d])}, {self.int(1, 3)})", **keep)
        elif form == "repeat":
            reps = [self.int(1, 2) for _ in range(nd + self.int(0, 1))] or [2]
            self.emit(f"{v.name}.repeat({', '.join(map(str, reps))})", **keep)
        elif form == "contiguous":
            self.emit(f"{v.name}.contiguous()" if self.coin() else f"{v.name}.detach()", **keep)
        elif form == "flatten":
            self.emit(f"{v.name}.reshape(-1)", **keep)
        elif form == "cat" and nd:
            which = self.choice(["self", "flip", "fresh"])
            if which == "fresh":
                p = self.new_input(self.shape_expr(v, {d: self.choice(["1", "2"] + [repr(x) for x in self.names])}),
                                   v.dt if self.coin() else self.choice(DTYPES))
            else:
                p = v if which == "self" else Val(f"{v.name}.flip({d})", v.t.flip(d), v.exact, v.bound, v.err)
            out = dt.promote(v.dt, p.dt)
            v, p = self.lift(v, out), self.lift(p, out)
            parts = [v.name, p.name] + ([v.name] if self.coin() else [])
            self.emit(f"lm.cat([{', '.join(parts)}], {d})", exact=v.exact and p.exact, bound=max(v.bound, p.bound),
                      err=max(v.err, p.err))

    def op_cast(self, v: Val):
        target = self.choice(DTYPES)
        if target is v.dt or (v.kind == "f" and target.kind != "f" and not (v.exact and v.bound < 2.0**30)):
            return  # a float->int cast jumps, and out of int32's range it is undefined
        if target is lm.float16:
            v = self.fit(v, 3e4)
        err = v.err + U[target] * v.bound if v.kind == "f" and target.kind == "f" else 0.0
        self.emit(f"{v.name}.to(lm.{target.name})", exact=v.exact, bound=v.bound if target.kind != "b" else 1.0,
                  err=err)

    def op_arange(self, v: Val):
        if v.t.ndim:
            d = self.int(0, v.t.ndim - 1)
            self.emit(f"g.arange({self.dim(v, d)})", exact=True, bound=float(self.dim_max(v.t.shape, d)))

    OPS = ("unary", "unary", "binary", "binary", "binary", "reduce", "reduce", "matmul", "index", "move", "move",
           "move", "cast", "arange")

    # data -------------------------------------------------------------------------------------
    def arrays(self, env: dict, seed: int) -> dict[str, np.ndarray]:
        rng = np.random.default_rng(seed)
        out = {}
        for name, (shape, d, index) in self.specs.items():
            s = tuple(evaluate(x, env) for x in shape)
            if index is not None:
                out[name] = rng.integers(evaluate(index[0], env), evaluate(index[1], env), size=s).astype(np.int32)
            elif d.kind == "f":
                out[name] = dt.to_storage(rng.uniform(-2, 2, size=s), d)
            elif d.kind == "i":
                out[name] = rng.integers(-5, 6, size=s).astype(np.int32)
            else:
                out[name] = rng.random(s) < 0.5
        return out

    def source(self) -> str:
        outs = ", ".join(v.name for v in self.outputs)
        return "\n".join(self.lines + [f"outputs = [{outs}]", f"bindings = {self.envs}"])


def _broadcastable(s, t) -> bool:
    return all(a == b or (is_static(a) and a == 1) or (is_static(b) and b == 1)
               for a, b in zip(reversed(s), reversed(t)))


def _result_dtype(a: Val, b: Val) -> lm.DType:
    if b.t is None:  # Python scalars are weak: they never widen a tensor of their own kind
        return dt.promote_scalar(a.dt, {"f": 1.0, "i": 1, "b": True}[b.kind])
    return dt.promote(a.dt, b.dt)


def build(seed: int, n_ops: int, grad: bool) -> Program:
    """Bindings, 1-3 inputs with named dims and ``n_ops`` ops, all drawn from ``seed``; 1-4 outputs.

    The outputs are the last few values nothing reads, so a smaller ``n_ops`` gives a prefix of the
    same program: hypothesis shrinks a failure to the shortest failing prefix."""
    rng = np.random.default_rng([seed, int(grad)])
    first = {n: int(rng.integers(1, 6)) for n in NAMES}
    second = {n: int(rng.choice([x for x in range(6) if x != first[n]])) for n in NAMES}
    p = Program(rng, [first, second], grad)
    try:
        _grow(p, n_ops)
    except Exception:
        note(f"# build(seed={seed}, n_ops={n_ops}, grad={grad}) failed after:\n{p.source()}")
        raise
    return p


def _grow(p: Program, n_ops: int):
    for _ in range(p.int(1, 3)):
        dims = [p.choice(["1", "2", "3", "4", "'B'", "'S'"]) for _ in range(p.int(0 if not p.grad else 1, 3))]
        d = p.choice(FLOATS) if p.grad and not p.pool else p.choice(DTYPES)
        p.new_input("(" + "".join(x + ", " for x in dims) + ")", d)
        p.names = sorted({x.strip("'") for x in dims if x.startswith("'")} | set(p.names))
    for _ in range(n_ops):
        op = p.choice(Program.OPS)
        v = p.choice(p.pool[-3:] if p.coin() else p.pool)  # recent values half the time: deep chains
        getattr(p, f"op_{op}")(v)
    sinks = [v for v in p.pool if v.name not in p.used and v.name[0] == "t"]
    p.outputs = (sinks or p.pool)[-4:]


def _compare(got, want, v: Val, what: str):
    assert got.shape == want.shape and got.dtype == want.dtype, \
        f"{what}: {got.shape} {got.dtype} vs reference {want.shape} {want.dtype}"
    if v.exact or v.kind != "f":
        np.testing.assert_array_equal(got, want, err_msg=f"{what} (exact)")
    else:
        rtol, atol = BASE_TOL[v.dt]
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol,
                                   atol=max(atol, 2 * v.err), equal_nan=True, err_msg=what)


def check(p: Program, seed: int, grad: bool):
    outs = [v.t for v in p.outputs]
    grads = []
    if grad:
        floats = [v for v in p.outputs if v.kind == "f"]
        if not floats:
            return
        loss = None
        for v in floats:
            term = v.t.float().sum()
            loss = term if loss is None else loss + term
        for name, (_, d, _) in p.specs.items():
            if d.kind == "f":
                try:
                    grads.append((name, train.grad(loss, p.ns[name], allow_unused=True)))
                except ValueError as e:  # only reachable through comparisons or int casts
                    if "only through" not in str(e):
                        raise
    tensors = outs + [g for _, g in grads]
    reference = lm.compile(tensors, backend="reference")
    grad_tol = max(GRAD_TOL[v.dt] for v in p.pool if v.kind == "f") if grads else 0.0
    for backend in CODEGEN_BACKENDS:
        compiled = lm.compile(tensors, backend=backend)
        for k, env in enumerate(p.envs):
            arrays = p.arrays(env, seed + k)
            want, got = reference(**arrays), compiled(**arrays)
            want, got = (want, got) if isinstance(want, tuple) else ((want,), (got,))
            for i, v in enumerate(p.outputs):
                _compare(got[i], want[i], v, f"{backend}: output {v.name} under {env}")
            for (name, _), w, gg in zip(grads, want[len(outs):], got[len(outs):]):
                scale = max(1.0, float(np.nanmax(np.abs(w), initial=0.0)))
                np.testing.assert_allclose(gg, w, rtol=grad_tol, atol=grad_tol * scale, equal_nan=True,
                                           err_msg=f"{backend}: gradient of {name} under {env}")


def _run(seed: int, n_ops: int, grad: bool):
    p = build(seed, n_ops, grad)
    note(f"# build(seed={seed}, n_ops={n_ops}, grad={grad}); input data: Program.arrays(env, seed + k) for "
         f"binding k\n{p.source()}")
    check(p, seed, grad)


@pytest.mark.slow  # the full tier, as every fuzzer (the cases it found run in both)
@FUZZ
@given(seed=st.integers(0, 2**32 - 1), n_ops=st.integers(1, 12))
def test_compiled_matches_reference(seed, n_ops):
    _run(seed, n_ops, grad=False)


@pytest.mark.slow
@settings(FUZZ, max_examples=max(1, int(40 * SCALE)))
@given(seed=st.integers(0, 2**32 - 1), n_ops=st.integers(1, 10))
def test_compiled_gradients_match_reference(seed, n_ops):
    _run(seed, n_ops, grad=True)
