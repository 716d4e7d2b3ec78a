"""CUDA C for a GPU kernel of the kernel IR (``codegen/ir.py``): one walk over the kernel.

The text needs no CUDA header at all (the NVRTC wheel ships none: ``shared/notes/cuda.md``):

* float16 and bfloat16 are stored as ``unsigned short`` and live in ``float`` registers, converted
  with inline PTX (``cvt.f32.f16``, ``cvt.rn.f16.f32``) or bit operations (bfloat16: the high half
  of the float32 bits, rounded to nearest even, NaN kept NaN). A 16-bit value is rounded to its type
  after every operation that can leave its grid (the IR's dtype rule), so a register always holds a
  value of its type and a store only repacks it.
* Tensor cores through inline-PTX ``mma.sync``; atomics on 16-bit floats through a compare-and-swap
  loop on the containing 32-bit word.

Semantics follow ``core/primitives.py`` exactly where C differs from it: int32 ``+``/``*`` wrap
(computed unsigned, since signed overflow is undefined in C), ``Mod`` is C ``fmod`` (and 0 for an
integer divisor of 0, as numpy gives), ``Max`` is IEEE ``maximum`` (``fmaxf`` would drop a NaN, and
does not order -0 < +0), constants are written bit-exactly (hex floats, ``__int_as_float`` for NaN
and infinities).

Values: every value used more than once in the kernel is computed once into a local ``vN`` (named
in emission order, so the same IR gives the same text byte for byte) at its first use, and reused
while it is still valid: a local is forgotten when a register it reads is assigned, when a buffer it
loads is stored to, at a barrier (other threads' stores) and when its scope (a loop or an if body)
ends; a value computed before a loop is forgotten on entry if the loop body changes what it reads.
Registers (``Assign``, ``Mma`` results) are declared once at the top of the function with their
type, zero-initialised, so they may be assigned in a loop or an if and read after it. IR names are
prefixed (``g_`` buffers, ``s_`` shared arrays, ``p_`` parameters, ``r_`` registers and loop
variables) so that no IR name can collide with C, with the locals or with the helpers (``lm_``).
"""

from __future__ import annotations

import math
import re

import numpy as np

from luminal.codegen import ir
from luminal.codegen.simplify import simplify_index
from luminal.core import dtype as dt
from luminal.core import numpy_ops

INDEX = ir.INDEX
_MAX_INLINE_DEPTH = 24  # deeper single-use expressions go to a local (compilers limit paren nesting)
_LEAVES = frozenset({"const", "param", "thread", "block", "var"})
_FULL_MASK = "0xffffffffu"


class RenderError(ValueError):
    """The kernel uses something this renderer cannot express (reported with the kernel's name)."""


# types --------------------------------------------------------------------------------------------

def _is16(d) -> bool:
    return d is dt.float16 or d is dt.bfloat16


def ctype(d) -> str:
    """The C type of a register holding a value of ``d`` (16-bit floats compute in float)."""
    if d is INDEX:
        return "long long"
    if d is dt.float64:
        return "double"
    if d.kind == "f":
        return "float"
    if d is dt.int32:
        return "int"
    if d is dt.bool_:
        return "bool"
    raise RenderError(f"no CUDA type for dtype {d!r}")


def storage_type(d) -> str:
    """The C type of one element of a buffer of ``d`` (16-bit floats stored as their bits)."""
    return "unsigned short" if _is16(d) else ctype(d)


# literals -----------------------------------------------------------------------------------------

def _hex(x: float, suffix: str) -> str:
    """A finite float as an exact C hex literal, trailing zero digits dropped."""
    h = x.hex()  # '-0x1.8000000000000p+1'
    mant, exp = h.split("p")
    if "." in mant:
        mant = mant.rstrip("0").rstrip(".")
    s = f"{mant}p{exp}{suffix}"
    return f"({s})" if s.startswith("-") else s


def _int_lit(n: int, bits: int, suffix: str) -> str:
    n = (n + (1 << (bits - 1))) % (1 << bits) - (1 << (bits - 1))  # wrap to the signed range
    if n == -(1 << (bits - 1)):
        return f"(-{(1 << (bits - 1)) - 1}{suffix} - 1{suffix})"
    return f"({n}{suffix})" if n < 0 else f"{n}{suffix}"


def literal(value, d) -> str:
    """``value`` as a C constant of dtype ``d``, bit-exact (16-bit floats rounded to their type)."""
    if d is INDEX:
        return _int_lit(int(value), 64, "LL")
    if d is dt.int32:
        return _int_lit(int(value), 32, "")
    if d is dt.bool_:
        return "true" if bool(value) else "false"
    if d is dt.float64:
        x = float(value)
        if math.isfinite(x):
            return _hex(x, "")
        bits = int(np.float64(x).view(np.uint64))
        return f"__longlong_as_double(0x{bits:016x}LL)"
    if d.kind == "f":
        f = np.float32(value)  # 16-bit types round through float32, as the Cast rule does
        if d is dt.float16:
            f = np.float32(np.float16(f))
        elif d is dt.bfloat16:
            f = np.float32(dt.round_bf16(f))
        if math.isfinite(float(f)):
            return _hex(float(f), "f")
        return f"__int_as_float(0x{int(f.view(np.uint32)):08x})"
    raise RenderError(f"no CUDA literal for dtype {d!r}")


# helpers (emitted only when used, in this order) ---------------------------------------------------

_HELPERS = {
    "h2f": ((), "__device__ __forceinline__ float lm_h2f(unsigned short h) "
                "{ float f; asm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(f) : \"h\"(h)); return f; }"),
    "f2h": ((), "__device__ __forceinline__ unsigned short lm_f2h(float f) "
                "{ unsigned short h; asm(\"cvt.rn.f16.f32 %0, %1;\" : \"=h\"(h) : \"f\"(f)); return h; }"),
    "b2f": ((), "__device__ __forceinline__ float lm_b2f(unsigned short b) "
                "{ return __uint_as_float((unsigned)b << 16); }"),
    "f2b": ((), "__device__ __forceinline__ unsigned short lm_f2b(float f) {\n"
                "  unsigned u = __float_as_uint(f);\n"
                "  if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u);  // NaN stays NaN\n"
                "  return (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);  // round to nearest even\n"
                "}"),
    "rh": (("h2f", "f2h"), "__device__ __forceinline__ float lm_rh(float x) { return lm_h2f(lm_f2h(x)); }"),
    "rb": (("b2f", "f2b"), "__device__ __forceinline__ float lm_rb(float x) { return lm_b2f(lm_f2b(x)); }"),
    # IEEE maximum: NaN-propagating, and of two equal operands the second where the first is -0
    "max": ((), "__device__ __forceinline__ float lm_max(float a, float b) "
                "{ return (a > b || a != a) ? a : (b > a || b != b || __float_as_int(a) < 0) ? b : a; }\n"
                "__device__ __forceinline__ double lm_max(double a, double b) "
                "{ return (a > b || a != a) ? a : (b > a || b != b || __double_as_longlong(a) < 0) ? b : a; }\n"
                "__device__ __forceinline__ int lm_max(int a, int b) { return a > b ? a : b; }\n"
                "__device__ __forceinline__ long long lm_max(long long a, long long b) { return a > b ? a : b; }"),
    "mod": ((), "__device__ __forceinline__ int lm_mod(int a, int b) "
                "{ return (b == 0 || b == -1) ? 0 : a % b; }"),
    "pack_h": (("f2h",), "__device__ __forceinline__ unsigned lm_pack_h(float lo, float hi) "
                         "{ return (unsigned)lm_f2h(lo) | ((unsigned)lm_f2h(hi) << 16); }"),
    "pack_b": (("f2b",), "__device__ __forceinline__ unsigned lm_pack_b(float lo, float hi) "
                         "{ return (unsigned)lm_f2b(lo) | ((unsigned)lm_f2b(hi) << 16); }"),
}


def _atomic16(suffix: str, to_f: str, from_f: str) -> str:
    return (
        f"__device__ __forceinline__ void lm_atomic_add_{suffix}(unsigned short* p, float v) {{\n"
        "  // no 16-bit atomic add that rounds like the IR: CAS the 32-bit word holding *p\n"
        "  unsigned* w = (unsigned*)((unsigned long long)p & ~3ull);\n"
        "  unsigned shift = ((unsigned long long)p & 2ull) ? 16u : 0u;\n"
        "  unsigned old = *w, assumed;\n"
        "  do {\n"
        "    assumed = old;\n"
        f"    float s = {to_f}((unsigned short)(assumed >> shift)) + v;\n"
        f"    unsigned next = (assumed & ~(0xffffu << shift)) | ((unsigned){from_f}(s) << shift);\n"
        "    old = atomicCAS(w, assumed, next);\n"
        "  } while (old != assumed);\n"
        "}")


_HELPERS["atomic_h"] = (("h2f", "f2h"), _atomic16("h", "lm_h2f", "lm_f2h"))
_HELPERS["atomic_b"] = (("b2f", "f2b"), _atomic16("b", "lm_b2f", "lm_f2b"))


# names --------------------------------------------------------------------------------------------

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def _sanitize(name: str) -> str:
    s = re.sub(r"[^A-Za-z0-9_]", "_", str(name))
    return s if s and not s[0].isdigit() else "_" + s


def kernel_symbol(kernel: ir.Kernel) -> str:
    """The C name of ``kernel``'s function (its name, made a C identifier): what a module is asked for."""
    return kernel.name if _IDENT.match(kernel.name) else "k_" + _sanitize(kernel.name)


class _Names:
    """IR names -> C names: prefixed by kind, unique, in first-seen order (deterministic)."""

    def __init__(self):
        self.c: dict = {}
        self.taken: set = set()

    def get(self, kind: str, name: str) -> str:
        key = (kind, name)
        if key not in self.c:
            base = f"{kind}_{_sanitize(name)}"
            c, n = base, 2
            while c in self.taken:
                c, n = f"{base}_{n}", n + 1
            self.c[key] = c
            self.taken.add(c)
        return self.c[key]


# index evaluation (launch shapes) -----------------------------------------------------------------

def eval_index(v: ir.V, params: dict) -> int:
    """The integer value of index math ``v`` (const, param, Add, Mul, Div, Mod, Max) given ``params``:
    what a launcher needs to turn a kernel's symbolic grid into numbers."""
    if v.op == "const":
        return int(v.arg)
    if v.op == "param":
        if v.arg not in params:
            raise KeyError(f"kernel parameter {v.arg!r} has no value (given: {sorted(params)})")
        return int(params[v.arg])
    if v.op in ("Add", "Mul", "Div", "Mod", "Max"):
        a, b = (eval_index(x, params) for x in v.args)
        if v.op == "Add":
            return a + b
        if v.op == "Mul":
            return a * b
        if v.op == "Max":
            return max(a, b)
        if b == 0:
            raise ZeroDivisionError(f"{v.op} by zero in {ir.show_value(v)}")
        q = abs(a) // abs(b) * (1 if (a >= 0) == (b >= 0) else -1)  # C truncation, as the device computes
        return q if v.op == "Div" else a - q * b
    raise ValueError(f"cannot evaluate {v.op} in a launch shape: {ir.show_value(v)}")


# the elementwise primitives ----------------------------------------------------------------------
# ``core/primitives.py``'s elementwise records, by name, on each kind of operand, as C text
# ``render(renderer, result dtype, operand texts)``; the coverage test
# (``tests/core/test_primitive_records.py``) checks that every elementwise primitive has an entry for
# every kind of operand it takes. Float results on 16-bit types are rounded once (``round16``).

def _arith(sym: str):
    def render(r, d, a):
        if d is dt.int32:
            return f"(int)((unsigned){a[0]} {sym} (unsigned){a[1]})"  # wraps, as int32 does
        return r.round16(d, f"({a[0]} {sym} {a[1]})")
    return render


def _math(fn: str):
    def render(r, d, a):
        return r.round16(d, f"{fn}({a[0]})" if d is dt.float64 else f"{fn}f({a[0]})")
    return render


def _max(r, d, a):
    r.use("max")
    return f"lm_max({a[0]}, {a[1]})"  # exact on 16-bit values: no rounding


def _int_mod(r, d, a):
    if d is INDEX:
        return f"({a[0]} % {a[1]})"
    r.use("mod")
    return f"lm_mod({a[0]}, {a[1]})"


def _less(r, d, a):
    return f"({a[0]} < {a[1]})"


def _where(r, d, a):
    return f"({a[0]} ? {a[1]} : {a[2]})"


def _logical(sym: str):
    return lambda r, d, a: f"({a[0]} {sym} {a[1]})"


FLOAT_C = {
    "Log2": _math("log2"), "Exp2": _math("exp2"), "Sin": _math("sin"), "Sqrt": _math("sqrt"),
    "Recip": lambda r, d, a: r.round16(d, f"(1.0 / {a[0]})" if d is dt.float64 else f"(1.0f / {a[0]})"),
    "Add": _arith("+"), "Mul": _arith("*"),
    # fmod is exact: no rounding for 16-bit values
    "Mod": lambda r, d, a: f"fmod({a[0]}, {a[1]})" if d is dt.float64 else f"fmodf({a[0]}, {a[1]})",
    "Max": _max, "LessThan": _less, "Where": _where,
}
INT_C = {"Add": _arith("+"), "Mul": _arith("*"), "Mod": _int_mod, "Max": _max, "LessThan": _less, "Where": _where}
BOOL_C = {"Add": _logical("||"), "Mul": _logical("&&"), "Max": _logical("||"), "LessThan": _less, "Where": _where}


def op_table(d) -> dict:
    """The C renderings of the elementwise primitives on operands of dtype ``d`` (``Where``: its values')."""
    return FLOAT_C if d.kind == "f" else BOOL_C if d is dt.bool_ else INT_C


# the renderer -------------------------------------------------------------------------------------

def _count_uses(body) -> dict:
    """id(value) -> how many places read it: statement slots plus the operand slots of each distinct
    value (a value shared by two parents counts twice, a parent shared itself counts its operands once)."""
    uses: dict = {}
    seen: set = set()

    def root(v):
        uses[id(v)] = uses.get(id(v), 0) + 1
        stack = [v]
        while stack:
            x = stack.pop()
            if id(x) in seen:
                continue
            seen.add(id(x))
            for a in x.args:
                uses[id(a)] = uses.get(id(a), 0) + 1
                stack.append(a)

    def stmts(body):
        for s in body:
            for v in _slots(s):
                root(v)
            if isinstance(s, (ir.Loop, ir.If)):
                stmts(s.body)

    stmts(body)
    return uses


def _slots(s) -> tuple:
    """The values a statement reads itself (not its body's)."""
    if isinstance(s, ir.Assign):
        return (s.value,)
    if isinstance(s, (ir.Store, ir.AtomicAdd)):
        return (s.index, s.value) + (() if s.valid is None else (s.valid,))
    if isinstance(s, ir.Loop):
        return (s.start, s.stop) + (() if s.step is None else (s.step,))
    if isinstance(s, ir.If):
        return (s.cond,)
    if isinstance(s, ir.Mma):
        return tuple(s.a) + tuple(s.b) + tuple(s.c)
    if isinstance(s, (ir.WideLoad, ir.LdMatrix)):
        return (s.index,)
    if isinstance(s, ir.AsyncCopy):
        return (s.sindex, s.index, s.count)
    return ()


def _effects(body) -> tuple[set, set, bool]:
    """(registers assigned, buffers stored, has a barrier) anywhere in ``body``."""
    regs: set = set()
    bufs: set = set()
    barrier = False
    for s in body:
        if isinstance(s, ir.Assign):
            regs.add(s.name)
        elif isinstance(s, (ir.Mma, ir.WideLoad, ir.LdMatrix)):
            regs.update(s.d)
        elif isinstance(s, (ir.Store, ir.AtomicAdd)):
            bufs.add(s.buffer)
        elif isinstance(s, ir.AsyncCopy):
            bufs.add(s.shared)
        elif isinstance(s, ir.Barrier):
            barrier = True
        elif isinstance(s, (ir.Loop, ir.If)):
            r, b, bar = _effects(s.body)
            regs |= r
            bufs |= b
            barrier |= bar
            if isinstance(s, ir.Loop):
                regs.add(s.var)
    return regs, bufs, barrier


class _Renderer:
    def __init__(self, k: ir.Kernel):
        self.k = k
        self.names = _Names()
        self.buf_dtype = {b.name: b.dtype for b in k.buffers} | {s.name: s.dtype for s in k.shared}
        self.buf_c = {}
        for b in k.buffers:
            self.buf_c[b.name] = self.names.get("g", b.name)
        for s in k.shared:
            self.buf_c[s.name] = self.names.get("s", s.name)
        for p in k.params:
            self.names.get("p", p)
        self.uses = _count_uses(k.body)
        self.helpers: set = set()
        self.noround = False
        self.lines: list = []
        self.depth = 1
        self.n_locals = 0
        self.scopes: list = [{}]  # id(value) -> (local name, vars read, buffers loaded)
        self.deps: dict = {}  # id(value) -> (vars read, buffers loaded, has a load without valid)
        self.registers: dict = {}  # IR name -> dtype, in first-assignment order
        self._collect_registers(k.body)

    def fail(self, msg):
        raise RenderError(f"kernel {self.k.name}: {msg}")

    def _collect_registers(self, body):
        for s in body:
            if isinstance(s, ir.Assign):
                self._register(s.name, s.value.dtype)
            elif isinstance(s, ir.Mma):
                for d in s.d:
                    self._register(d, dt.float32)
            elif isinstance(s, (ir.WideLoad, ir.LdMatrix)):
                for d in s.d:
                    self._register(d, s.dtype)
            elif isinstance(s, (ir.Loop, ir.If)):
                self._collect_registers(s.body)

    def _register(self, name, d):
        if self.registers.setdefault(name, d) is not d:
            self.fail(f"register {name!r} is assigned both {self.registers[name].name} and {d.name} values")

    # emission helpers

    def emit(self, line: str):
        self.lines.append("  " * self.depth + line)

    def use(self, name: str):
        deps, _ = _HELPERS[name]
        for d in deps:
            self.use(d)
        self.helpers.add(name)

    def var_c(self, name: str) -> str:
        return self.names.get("r", name)

    def value_deps(self, v) -> tuple:
        """(registers/loop variables read, buffers loaded, whether a load has no ``valid`` of its own)
        of ``v`` and its operands."""
        got = self.deps.get(id(v))
        if got is not None:
            return got
        stack = [(v, False)]
        while stack:
            x, done = stack.pop()
            if id(x) in self.deps:
                continue
            if not done:
                stack.append((x, True))
                stack.extend((a, False) for a in x.args if id(a) not in self.deps)
                continue
            vs = frozenset({x.arg}) if x.op == "var" else frozenset()
            bs = frozenset({x.arg[0]}) if x.op == "load" else frozenset()
            bare = x.op == "load" and len(x.args) == 1
            for a in x.args:
                av, ab, abare = self.deps[id(a)]
                vs, bs, bare = vs | av, bs | ab, bare or abare
            self.deps[id(x)] = (vs, bs, bare)
        return self.deps[id(v)]

    def cached(self, v):
        for scope in reversed(self.scopes):
            hit = scope.get(id(v))
            if hit is not None:
                return hit[0]
        return None

    def forget(self, regs=(), bufs=(), loads=False):
        """Drop the locals that are stale after ``regs`` are assigned / ``bufs`` stored / a barrier."""
        regs, bufs = set(regs), set(bufs)
        for scope in self.scopes:
            for key in [key for key, (_, vs, bs) in scope.items()
                        if (vs & regs) or (bs & bufs) or (loads and bs)]:
                del scope[key]

    def local(self, v, text: str) -> str:
        name = f"v{self.n_locals}"
        self.n_locals += 1
        self.emit(f"const {ctype(v.dtype)} {name} = {text};")
        vs, bs, _ = self.value_deps(v)
        self.scopes[-1][id(v)] = (name, vs, bs)
        return name

    # values

    def expr(self, root, force: bool = False, unrounded: bool = False) -> str:
        """C text of ``root``; locals for its shared parts are emitted first (``force``: ``root`` itself too,
        unless it is a leaf; ``unrounded``: a 16-bit ``root`` computed inline may skip its final rounding,
        for a caller that converts it to 16 bits anyway, which rounds the same)."""
        texts: dict = {}  # id -> (text, depth)
        stack = [(root, False)]
        while stack:
            v, expanded = stack.pop()
            if id(v) in texts:
                continue
            name = self.cached(v)
            if name is not None:
                texts[id(v)] = (name, 0)
                continue
            if v.op in _LEAVES:
                texts[id(v)] = (self.leaf(v), 0)
                continue
            if not expanded:
                stack.append((v, True))
                stack.extend((a, False) for a in reversed(v.args))
                continue
            args = [texts[id(a)] for a in v.args]
            depth = 1 + max((d for _, d in args), default=0)
            bind = self.uses.get(id(v), 0) > 1 or depth > _MAX_INLINE_DEPTH or (force and v is root)
            self.noround = unrounded and v is root and not bind
            text = self.op(v, [t for t, _ in args])
            self.noround = False
            texts[id(v)] = (self.local(v, text), 0) if bind else (text, depth)
        return texts[id(root)][0]

    def leaf(self, v) -> str:
        if v.op == "const":
            return literal(v.arg, v.dtype)
        if v.op == "param":
            return self.names.get("p", v.arg)
        if v.op == "var":
            return self.var_c(v.arg)
        if v.arg not in (0, 1, 2):
            self.fail(f"{v.op} axis {v.arg!r} (0, 1 or 2)")
        return f"(long long){'threadIdx' if v.op == 'thread' else 'blockIdx'}.{'xyz'[v.arg]}"

    def round16(self, d, text: str) -> str:
        if self.noround:
            return text
        if d is dt.float16:
            self.use("rh")
            return f"lm_rh({text})"
        if d is dt.bfloat16:
            self.use("rb")
            return f"lm_rb({text})"
        return text

    def cast(self, text: str, src, dst) -> str:
        """``text`` (a value of ``src``) converted by the Cast primitive's rule to ``dst``."""
        if src is dst:
            return text
        if dst is dt.bool_:
            return f"({text} != 0)"
        if _is16(dst):
            inner = text if src.kind == "f" and src is not dt.float64 else f"(float){text}"
            return self.round16(dst, inner)
        if dst is dt.float32 and _is16(src):
            return text  # already a float holding the 16-bit value
        return f"({ctype(dst)}){text}"

    def fold_cast(self, v):
        """A cast of a constant as a literal of the target type (by the Cast rule), None if not foldable."""
        x, src, dst = v.args[0], v.args[0].dtype, v.dtype
        if x.op != "const":
            return None
        value = x.arg
        if dst is dt.bool_:
            return literal(value != 0, dst)
        if dst.kind == "f":
            if src.kind == "f" and src is not dt.float64:  # a 16-bit constant is already on its grid
                value = float(np.float32(value))
            return literal(value, dst) if dst is dt.float64 else literal(np.float32(value), dst)
        if src.kind == "f" and dst is dt.int32:  # the Cast rule (the device's conversion): NaN 0, saturating
            return literal(int(numpy_ops.float_to_int32(value)), dst)
        if src.kind == "f" and not math.isfinite(float(value)):
            return None  # the device's conversion decides (saturating; NaN -> 0)
        return literal(math.trunc(value), dst)

    def load(self, v, a) -> str:
        buf, pad = v.arg
        d = self.buf_dtype[buf]
        if d is not v.dtype:
            self.fail(f"load of {v.dtype.name} from {buf!r}, a {d.name} buffer")
        at = f"{self.buf_c[buf]}[{a[0]}]"
        if d is dt.float16:
            self.use("h2f")
            at = f"lm_h2f({at})"
        elif d is dt.bfloat16:
            self.use("b2f")
            at = f"lm_b2f({at})"
        if len(a) == 1:
            return at
        return f"({a[1]} ? {at} : {literal(pad, d)})"

    def op(self, v, a: list) -> str:
        op, d = v.op, v.dtype
        if op == "load":
            return self.load(v, a)
        if op == "cast":
            folded = self.fold_cast(v)
            return folded if folded is not None else self.cast(a[0], v.args[0].dtype, d)
        if op == "shfl_xor":
            if d is dt.bool_:
                return f"(__shfl_xor_sync({_FULL_MASK}, (int){a[0]}, {int(v.arg)}) != 0)"
            return f"__shfl_xor_sync({_FULL_MASK}, {a[0]}, {int(v.arg)})"
        if op in ("And", "Or"):
            return f"({a[0]} {'&&' if op == 'And' else '||'} {a[1]})"
        if op == "Not":
            return f"(!{a[0]})"
        if op == "Div":
            return f"({a[0]} / {a[1]})"
        operand = v.dtype if op == "Where" else v.args[0].dtype
        render = op_table(operand).get(op)
        if render is None:
            self.fail(f"value op {op!r} on {operand.name} has no CUDA rendering")
        return render(self, d, a)

    # statements

    def store_value(self, buf: str, v) -> str:
        d = self.buf_dtype[buf]
        text = self.cast(self.expr(v, unrounded=v.dtype is d), v.dtype, d)
        if d is dt.float16:
            self.use("f2h")
            return f"lm_f2h({text})"
        if d is dt.bfloat16:
            self.use("f2b")
            return f"lm_f2b({text})"
        return text

    def guarded(self, valid, body):
        """Run ``body`` (emitting lines) under ``if (valid)``: nothing it computes runs when invalid."""
        if valid is None:
            body()
            return
        self.emit(f"if ({self.expr(valid)}) {{")
        self.block(body)
        self.emit("}")

    def block(self, body):
        self.depth += 1
        self.scopes.append({})
        body()
        self.scopes.pop()
        self.depth -= 1

    def stmt(self, s):
        if isinstance(s, ir.Assign):
            text = self.expr(s.value)
            self.emit(f"{self.var_c(s.name)} = {text};")
            self.forget(regs=(s.name,))
        elif isinstance(s, ir.Store):
            if s.buffer not in self.buf_dtype:
                self.fail(f"store to undeclared buffer {s.buffer!r}")

            if self.hoistable(s):  # nothing it computes can read out of bounds: only the write is guarded
                index = self.expr(s.index)
                value = self.store_value(s.buffer, s.value)
                self.emit(f"if ({self.expr(s.valid)}) {self.buf_c[s.buffer]}[{index}] = {value};")
                self.forget(bufs=(s.buffer,))
                return
            index = self.early_index(s)

            def store():
                at = index if index is not None else self.expr(s.index)
                self.emit(f"{self.buf_c[s.buffer]}[{at}] = {self.store_value(s.buffer, s.value)};")

            self.guarded(s.valid, store)
            self.forget(bufs=(s.buffer,))
        elif isinstance(s, ir.AtomicAdd):
            if self.hoistable(s):
                self.emit(f"if ({self.expr(s.valid)}) {self.atomic(s)}")
            else:
                index = self.early_index(s)
                self.guarded(s.valid, lambda: self.emit(self.atomic(s, index)))
            self.forget(bufs=(s.buffer,))
        elif isinstance(s, ir.Loop):
            self.loop(s)
        elif isinstance(s, ir.If):
            self.emit(f"if ({self.expr(s.cond)}) {{")
            self.block(lambda: self.stmts(s.body))
            self.emit("}")
        elif isinstance(s, ir.Barrier):
            self.emit("__syncthreads();")
            self.forget(loads=True)
        elif isinstance(s, ir.Mma):
            self.mma(s)
        elif isinstance(s, ir.WideLoad):
            self.wide(s)
        elif isinstance(s, ir.AsyncCopy):
            self.async_copy(s)
        elif isinstance(s, ir.AsyncCommit):
            self.emit('asm volatile("cp.async.commit_group;" ::: "memory");')
        elif isinstance(s, ir.AsyncWait):
            self.emit(f'asm volatile("cp.async.wait_group %0;" :: "n"({int(s.pending)}) : "memory");')
            self.forget(loads=True)  # (shared memory the copies landed in)
        elif isinstance(s, ir.LdMatrix):
            self.ldmatrix(s)
        else:
            self.fail(f"not a statement: {s!r}")

    def stmts(self, body):
        for s in body:
            self.stmt(s)

    def hoistable(self, s) -> bool:
        """Whether a guarded store's index and value may be computed before its guard: every load in them
        carries its own ``valid`` (a load without one may rely on the store's guard to stay in bounds)."""
        return s.valid is not None and not self.value_deps(s.index)[2] and not self.value_deps(s.value)[2]

    def early_index(self, s):
        """The index of a guarded store computed before its guard when it loads nothing (pure index
        math is safe to compute for any thread, and its locals then serve the statements after)."""
        if s.valid is None or self.value_deps(s.index)[1]:
            return None
        return self.expr(s.index)

    def atomic(self, s, index=None) -> str:
        """The C statement of atomic add ``s`` (its locals emitted first)."""
        d = self.buf_dtype.get(s.buffer)
        if d is None:
            self.fail(f"atomic add to undeclared buffer {s.buffer!r}")
        index = index if index is not None else self.expr(s.index)
        value = self.cast(self.expr(s.value), s.value.dtype, d)
        at = f"&{self.buf_c[s.buffer]}[{index}]"
        if d is dt.float16 or d is dt.bfloat16:
            h = "atomic_h" if d is dt.float16 else "atomic_b"
            self.use(h)
            return f"lm_{h[:-2]}_add_{h[-1]}({at}, {value});"
        if d in (dt.float32, dt.float64, dt.int32):
            return f"atomicAdd({at}, {value});"
        self.fail(f"atomic add on a {d.name} buffer")

    def loop(self, s):
        start = self.expr(s.start)
        # range() evaluates its bounds once: a bound that is not a constant or parameter becomes a local
        stop = self.expr(s.stop, force=True)
        step = None if s.step is None else self.expr(s.step, force=True)
        regs, bufs, barrier = _effects(s.body)
        self.forget(regs=regs, bufs=bufs, loads=barrier)  # locals from before the loop, stale by iteration 2
        i = self.var_c(s.var)
        if step is None:
            head = f"for (long long {i} = {start}; {i} < {stop}; ++{i}) {{"
        else:
            neg = s.step.op == "const" and s.step.arg < 0
            head = f"for (long long {i} = {start}; {i} {'>' if neg else '<'} {stop}; {i} += {step}) {{"
        self.emit(head)
        self.block(lambda: self.stmts(s.body))
        self.emit("}")

    def wide(self, s):
        """One 16-byte load (``ld.global.v4``) into the registers: a ``float4``'s four lanes, or for
        16-bit floats a ``uint4``'s eight halves, the lower half of each word first."""
        d = s.dtype
        if d not in ir.WIDE_DTYPES or self.buf_dtype.get(s.buffer) is not d or len(s.d) != ir.wide_lanes(d):
            self.fail(f"a wide load is 4 float32 or 8 float16/bfloat16 registers from a buffer of theirs "
                      f"({s.buffer!r})")
        index = self.expr(s.index)
        v = f"w{self.n_locals}"
        self.n_locals += 1
        vector = "float4" if d is dt.float32 else "uint4"
        self.emit(f"const {vector} {v} = *reinterpret_cast<const {vector}*>(&{self.buf_c[s.buffer]}[{index}]);")
        if d is dt.float32:
            values = [f"{v}.{lane}" for lane in "xyzw"]
        else:
            h = "h2f" if d is dt.float16 else "b2f"
            self.use(h)
            values = [f"lm_{h}((unsigned short)({v}.{lane}{' >> 16' if high else ' & 0xFFFFu'}))"
                      for lane in "xyzw" for high in (False, True)]
        for name, value in zip(s.d, values):
            self.emit(f"{self.var_c(name)} = {value};")
        self.forget(regs=s.d)

    def shared_address(self, name: str, index: str) -> str:
        """A local holding the shared-window address of ``name[index]`` (a 32-bit ``.shared`` address, what
        ``cp.async`` and ``ldmatrix`` take; converted in PTX: no header declares the intrinsic here)."""
        v = f"sa{self.n_locals}"
        self.n_locals += 1
        self.emit(f"unsigned {v};")
        self.emit(f'asm("{{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }}" : "=r"({v}) '
                  f': "l"(&{self.buf_c[name]}[{index}]));')
        return v

    def async_copy(self, s):
        """``cp.async.cg``: 16 bytes into shared memory, ``count`` elements of them read (the source
        pointer is the buffer's start when none is, so no address past it is formed)."""
        d = s.dtype
        if d not in ir.WIDE_DTYPES or self.buf_dtype.get(s.buffer) is not d or self.buf_dtype.get(s.shared) is not d:
            self.fail(f"an async copy moves float32, float16 or bfloat16 between a buffer and a shared array of "
                      f"that dtype ({s.buffer!r} -> {s.shared!r})")
        sidx, idx, count = self.expr(s.sindex), self.expr(s.index), self.expr(s.count)
        dst = self.shared_address(s.shared, sidx)
        n = f"cb{self.n_locals}"
        self.n_locals += 1
        g = self.buf_c[s.buffer]
        self.emit(f"const unsigned {n} = (unsigned)({count}) * {d.itemsize}u;")
        self.emit(f'asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" :: "r"({dst}), '
                  f'"l"({n} ? (const void*)&{g}[{idx}] : (const void*){g}), "r"({n}) : "memory");')
        self.forget(bufs=(s.shared,))

    def ldmatrix(self, s):
        """``ldmatrix.sync.aligned.m8n8.x4``: four 32-bit registers, each two 16-bit values (the lower
        half first), into the eight registers as floats (how 16-bit registers are kept)."""
        if s.dtype not in (dt.float16, dt.bfloat16) or self.buf_dtype.get(s.shared) is not s.dtype or len(s.d) != 8:
            self.fail(f"ldmatrix gives 8 float16/bfloat16 registers from a shared array of theirs ({s.shared!r})")
        a = self.shared_address(s.shared, self.expr(s.index))
        r = [f"lr{self.n_locals}_{i}" for i in range(4)]
        self.n_locals += 1
        self.emit(f"unsigned {', '.join(r)};")
        self.emit(f'asm volatile("ldmatrix.sync.aligned.m8n8.x4{".trans" if s.trans else ""}.shared.b16 '
                  '{%0, %1, %2, %3}, [%4];" : ' + ", ".join(f'"=r"({x})' for x in r) + f' : "r"({a}) : "memory");')
        h = "h2f" if s.dtype is dt.float16 else "b2f"
        self.use(h)
        for i, name in enumerate(s.d):
            half = " >> 16" if i % 2 else " & 0xFFFFu"
            self.emit(f"{self.var_c(name)} = lm_{h}((unsigned short)({r[i // 2]}{half}));")
        self.forget(regs=s.d)

    def mma(self, s):
        if s.dtype is dt.float16:
            kind, pack = "f16", "pack_h"
        elif s.dtype is dt.bfloat16:
            kind, pack = "bf16", "pack_b"
        else:
            self.fail(f"mma of {s.dtype!r} (float16 or bfloat16)")
        for x in tuple(s.a) + tuple(s.b):
            if x.dtype is not s.dtype:
                self.fail(f"mma.{kind} operand of dtype {x.dtype.name}")
        for x in s.c:
            if x.dtype is not dt.float32:
                self.fail(f"mma accumulator operand of dtype {x.dtype.name} (float32)")
        a = [self.expr(x) for x in s.a]
        b = [self.expr(x) for x in s.b]
        c = [self.expr(x) for x in s.c]
        self.use(pack)
        fn = f"lm_{pack}"
        regs = [f"{fn}({a[i]}, {a[i + 1]})" for i in range(0, 8, 2)] + [f"{fn}({b[i]}, {b[i + 1]})" for i in (0, 2)]
        d = [self.var_c(n) for n in s.d]
        self.emit(f'asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.{kind}.{kind}.f32 '
                  '{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};"')
        self.emit("    : " + ", ".join(f'"=f"({x})' for x in d))
        self.emit("    : " + ", ".join(f'"r"({x})' for x in regs) + ",")
        self.emit("      " + ", ".join(f'"f"({x})' for x in c) + ");")
        self.forget(regs=s.d)

    # the whole kernel

    def render(self) -> str:
        k = self.k
        threads = 1
        for n in k.block:
            threads *= int(n)
        if not 1 <= len(k.block) <= 3 or threads < 1 or threads > 1024:
            self.fail(f"block {tuple(k.block)}: 1 to 3 axes of at most 1024 threads in all")
        body_lines = self._body()
        params = []
        written = _effects(k.body)[1]
        for b in k.buffers:
            const = "const " if b.access == "r" and b.name not in written else ""
            params.append(f"{const}{storage_type(b.dtype)}* __restrict__ {self.buf_c[b.name]}")
        params += [f"long long {self.names.get('p', p)}" for p in k.params]
        grid = ", ".join(ir.show_value(g) for g in k.grid)
        out = [f"// luminal kernel {k.name}: grid ({grid}) block {tuple(k.block)}"
               " (backends/cuda/render.py, from the kernel IR)", ""]
        out += self.prelude()
        out += self.function(threads, params, body_lines)
        return "\n".join(out) + "\n"

    def prelude(self) -> list:
        """The helpers this kernel uses, in ``_HELPERS`` order (a blank line after them)."""
        out = [_HELPERS[name][1] for name in _HELPERS if name in self.helpers]
        return out + [""] if out else out

    def function(self, threads, params, body_lines) -> list:
        k = self.k
        out = []
        out.append(f'extern "C" __global__ void __launch_bounds__({threads}) {kernel_symbol(k)}(')
        out.append("    " + ",\n    ".join(params) + ") {" if params else "    ) {")
        for s in k.shared:
            size = int(s.size) + (int(s.size) % 2 if _is16(s.dtype) else 0)  # 16-bit CAS reads whole words
            out.append(f"  __shared__ __align__(16) {storage_type(s.dtype)} {self.buf_c[s.name]}[{size}];")
        for name, d in self.registers.items():
            out.append(f"  {ctype(d)} {self.var_c(name)} = 0;")
        out += body_lines
        out.append("}")
        return out

    def _body(self) -> list:
        for s in self.k.shared:
            if int(s.size) < 1:
                self.fail(f"shared array {s.name!r} of size {s.size}")
        for name in self.registers:
            self.var_c(name)  # registers are named before locals and loop variables: stable names
        self.stmts(self.k.body)
        return self.lines


def render_many(kernels) -> str:
    """One translation unit holding every kernel of ``kernels`` (distinct names), each helper once:
    NVRTC's cost is mostly per program, so checking thousands of kernels compiles them in batches."""
    return combine(render(k) for k in kernels)  # render checks each kernel


def combine(sources) -> str:
    """One translation unit from sources :func:`render` wrote (kernels of distinct names), each helper
    once: :func:`render_many` for kernels rendered elsewhere (in another process)."""
    helpers: set = set()
    functions: list = []
    for text in sources:
        head, _, fn = text.partition('extern "C"')  # its helpers are the lines before ``extern "C"``
        helpers.update(h for h in _HELPERS if _HELPERS[h][1] in head)
        functions.append('extern "C"' + fn)
    prelude = [_HELPERS[name][1] for name in _HELPERS if name in helpers]
    return "\n".join(["// luminal kernels (backends/cuda/render.py, from the kernel IR)", *prelude, "", *functions])


def render(kernel: ir.Kernel) -> str:
    """CUDA C source of the GPU kernel ``kernel`` (``kernel.block != ()``): one ``extern "C"
    __global__`` function named :func:`kernel_symbol`, taking the buffers (typed ``__restrict__``
    pointers, ``const`` when read-only) then the scalar parameters (``long long``). Same IR, same
    text: the source is the compile cache's key."""
    if not kernel.gpu:
        raise RenderError(f"kernel {kernel.name}: a CPU kernel (block == ()); the CUDA renderer takes GPU kernels")
    ir.check(kernel)
    return _Renderer(simplify_index(kernel)).render()  # (the index math of every target: codegen/simplify.py)
