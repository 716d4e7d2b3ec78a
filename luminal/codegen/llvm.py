"""The CPU target: kernel IR (``ir.py``) compiled to machine code in-process through LLVM (llvmlite).

:func:`compile_kernels` builds one LLVM module for a list of CPU kernels (``kernel.block == ()``)
with ``llvmlite.ir``, optimises it with LLVM's O2 pipeline (loop and SLP vectorisation:
``KERNEL_SPEED``) for the host CPU's name and features, and JITs it with MCJIT: one engine per
program binding, holding one object per kernel.

**ABI.** Every kernel becomes ``void <name>(i8** bufs, i64* params, i64 start, i64 stop)``:
``bufs[i]`` points at ``kernel.buffers[i]``, ``params[j]`` is ``kernel.params[j]``. It runs the work
items whose grid axis-0 index lies in ``[start, stop)``, and every index of the other axes (nested
loops, the last axis innermost: the loop LLVM vectorises). A caller splits axis 0 over threads
(ctypes releases the GIL during the call) and keeps one prebuilt pointer array per call site.

**Semantics** are the primitive table's (``core/primitives.py``), bit for bit as numpy computes them
(``core/numpy_ops.py``) wherever the result is defined by correctly rounded arithmetic:

- float16 values live in ``half`` registers: arithmetic widens its operands to float, computes and
  rounds back (``fptrunc``); compares and selects work on the halves themselves. bfloat16 values live
  in ``float`` registers, rounded after every operation that can leave the type (the bit rounding of
  ``dtype.round_bf16``, a NaN kept a NaN). Buffers store float16 as ``half``, bfloat16 in float32,
  bool as bytes (0/1). A float64 cast to float16/bfloat16 rounds to float32 first, as numpy_ops.cast
  does. (float16 values were float registers first; LLVM 20 then shrank a ReLU's compares and
  selects of widened halves back to half and folded ``select(x <= 0, select(x < 0, 0, x), x)`` into
  ``select(x <= 0, 0, x)``, turning -0.0 into +0.0: halves compared and selected as halves keep it.)
- Sqrt is ``llvm.sqrt`` (correctly rounded). Sin of a float (and the half types, through float) is
  inline arithmetic (``_sin_f32``: an exact table-driven reduction, polynomials in double, rounded
  once: within half an ulp and a hair); of a double, ``llvm.sin`` (a scalar libm call, which keeps
  its loop scalar). Exp2 and Log2 are inline arithmetic (``_INLINE``: range reduction, a polynomial,
  exponent bits set through integer ops, selects for the special values; no calls, so the loop
  vectoriser widens them): float32 (and the half types, through float32) computed in double and
  rounded once, within 1 ulp of the correctly rounded result, subnormals included; float64 within
  0.65 ulp (exp2) and 0.85 ulp (log2, fdlibm's algorithm). Special values are numpy's (exp2: inf at
  +inf and past the range, 0 at -inf and below it, 1 at +-0; log2: -inf at +-0, NaN below 0, +0 at 1).
  Polynomials use ``llvm.fma`` where the host has FMA. numpy's float32 exp2/log2 are less accurate
  (up to 3 and 2 ulps): the results agree with numpy's within a few ulps, not bit for bit.
- Recip is ``1/x``; Mod is ``frem`` (C fmod) / a guarded ``srem`` for int32 (``x % 0`` and
  ``INT_MIN % -1`` are 0, as numpy's fmod gives, where LLVM's srem would be undefined); int32
  Add/Mul wrap; on bool, Add/Max are or, Mul is and.
- Max is ``llvm.maximum`` (IEEE 754-2019 maximum, the primitive's semantics: NaN if either operand
  is, -0 < +0). LessThan is ``fcmp olt`` (False on NaN). Where is ``select``.
- Cast: float -> int truncates toward zero and saturates (``numpy_ops.float_to_int32``): NaN gives 0,
  a value past int32's range (an infinity too) ``INT_MAX``/``INT_MIN``, as a GPU's conversion (LLVM's
  ``fptosi`` would be poison there); -> bool is ``x != 0`` (``fcmp une``: NaN is True); int -> float is
  ``sitofp``; bool -> number is 0/1.
- Index math (``ir.INDEX``) is i64 with ``nsw`` (offsets never overflow); ``Div``/``Mod`` are
  ``sdiv``/``srem`` (floor division for the non-negative operands the IR promises).
- A ``load`` with ``valid`` reads only where ``valid`` holds (a branch around the load, which the
  vectoriser turns into a masked load), else gives ``pad``; a ``Store`` with ``valid`` likewise.

No fast-math flags on elementwise code (NaN, inf and -0.0 behave as specified). The one exception is
a reduction's accumulation: ``Assign(acc, Add(var acc, x))`` on float32/float64 inside a ``Loop`` gets
``reassoc contract``, so LLVM vectorises the sum (the order of a float sum is unspecified: tests
compare reductions with a tolerance), except inside an ordered loop (``ir.Loop.ordered``: a block of
column sums, vectorised across its accumulators instead), and ``Assign(acc, Max(var acc, x))`` there
is ``llvm.maximum`` (NaN-propagating, which the vectoriser reduces).

Registers (``Assign``) are allocas in the entry block (mem2reg makes them SSA); loop variables are
phis. Buffer pointers carry no ``noalias``: the cpu backend may read and write one buffer in one
kernel (a state updated in place), so aliasing is left to LLVM's runtime checks before a vectorised
loop.

**Caching.** Each kernel is compiled as a module of its own, and its object code is cached on disk
under ``$LUMINAL_CACHE_DIR/llvm`` (default ``~/.cache/luminal/llvm``; ``core/disk_cache.py``:
``LUMINAL_CACHE``, the size cap) and in-process (the most recent ``MAX_OBJECT_BYTES``), keyed by the sha256
of the kernel module's IR text, the host CPU's name and features, the llvmlite version and ``CODEGEN_VERSION``
(the code generator's, bumped when it emits other code for the same IR), and written atomically
(a temp file, then ``os.replace``): a warm compile skips optimisation and code generation. An object
is machine code that runs in this process: ``DiskCache`` reads it only from a directory the user owns
and nobody else can write, and only when its header's digest and name match (a damaged or swapped
object is compiled again and rewritten, never handed to MCJIT; the generated driver's too). The object
is made with the target machine's ``emit_object`` and loaded into an MCJIT engine with
``add_object_file`` (the cold path does the same, so both run the same code; MCJIT's own object-cache
hooks would need the IR parsed on a warm start too). Per kernel, because programs share most of
their kernels: the candidates that ``search=N`` times, a program laid out for another binding of its
dims, a model edited by one layer recompile only the kernels that differ (cold, a program's kernels
compiled one by one take about 20% longer than as one module; the engine links the objects in
milliseconds). A warm start does not even build a kernel's IR text (a GPT step's 60 modules take
0.2 s to build): an index entry, keyed by the kernel's IR fingerprint, the options, the host,
llvmlite's version and a digest of the code generator's own source (``_index_key``), names the
kernel's symbol and its object's key (``_indexed``), written when the object is made. An engine
belongs to the programs that use it: found in-process by the keys of its
objects while one of them holds it, freed with the last (``_modules`` is weak; object code and module
texts are kept under byte bounds, ``MAX_OBJECT_BYTES`` and ``MAX_TEXT_BYTES``). ``STATS`` counts
objects compiled and reused and engines made (the compile report's code generation stage).
A :class:`Module` keeps its execution engine alive, and each function it hands out keeps the Module
alive; a raw ``address`` does not (keep the Module while code calls it). Each
engine owns a target machine of its own (llvmlite hands the one given to the engine, which frees it
with itself).
"""

from __future__ import annotations

import ctypes
import dataclasses
import functools
import hashlib
import math
import os
import re
import threading
import weakref
from collections.abc import Callable

import llvmlite
import llvmlite.binding as llvm
import llvmlite.ir as ll
import numpy as np
from tqdm import tqdm

from luminal.codegen import ir, llvm_workers
from luminal.codegen.simplify import simplify_index
from luminal.core import disk_cache
from luminal.core import dtype as dt
from luminal.core.disk_cache import DiskCache
from luminal.core.source_digest import source_digest

I1, I8, I32, I64 = ll.IntType(1), ll.IntType(8), ll.IntType(32), ll.IntType(64)
F16, F32, F64 = ll.HalfType(), ll.FloatType(), ll.DoubleType()
PTR = ll.PointerType()
KERNEL_TYPE = ll.FunctionType(ll.VoidType(), (PTR, PTR, I64, I64))
CFUNC = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)

REDUCE_FLAGS = ("reassoc", "contract")  # on a float sum's accumulation only (see the module docstring)
_ROUNDED = frozenset({"Log2", "Exp2", "Sin", "Sqrt", "Recip", "Add", "Mul", "Mod"})  # may leave a half type
_ALIGN = {I8: 1, F16: 2, I32: 4, F32: 4, I64: 8, F64: 8}  # natural alignment (numpy's arrays have it)
CODEGEN_VERSION = 6  # in the disk cache's key: bump when the code made for one IR text changes (6: double
# Exp2's polynomial by Estrin's scheme; 5: float Sin inline; 4: a NaN constant's bits in the IR text; 3: IEEE
# Max; it also keeps a luminal from before the cache entries' header from reading them as bare objects, which
# crashed it)


def value_type(d) -> ll.Type:
    """The LLVM type a value of dtype ``d`` lives in (float16: ``half``; bfloat16: ``float``)."""
    if d is ir.INDEX:
        return I64
    if d.kind == "b":
        return I1
    if d.kind == "i":
        return I32
    return {dt.float64: F64, dt.float16: F16}.get(d, F32)


def storage_type(d) -> ll.Type:
    """The LLVM type of one element of a buffer of dtype ``d`` (bool: a byte; bfloat16: float32)."""
    if d is ir.INDEX:
        return I64
    if d.kind == "b":
        return I8
    if d.kind == "i":
        return I32
    return {dt.float16: F16, dt.float64: F64}.get(d, F32)


def _const(d, value) -> ll.Constant:
    """``value`` as a constant of dtype ``d`` (half floats: the float of the rounded value)."""
    if d.kind == "b":
        return ll.Constant(I1, int(bool(value)))
    if d.kind == "i":
        bits = 64 if d is ir.INDEX else 32
        v = int(value) & ((1 << bits) - 1)
        return ll.Constant(I64 if bits == 64 else I32, v - (1 << bits) if v >> (bits - 1) else v)
    if d is dt.float16:
        value = float(np.float16(value))
    elif d is dt.bfloat16:
        value = float(dt.round_bf16(np.float32(value)))
    elif d is not dt.float64:
        value = float(np.float32(value))
    return ll.Constant(value_type(d), float(value))


# building -----------------------------------------------------------------------------------------

class _Emitter:
    """Builds one kernel's function: a walk over its statements, values emitted once per scope."""

    def __init__(self, module: ll.Module, k: ir.Kernel, distinct: bool = False, vector_width: int | None = None):
        self.m, self.k, self.distinct = module, k, distinct
        self.fn = ll.Function(module, KERNEL_TYPE, name=k.name)
        self.fn.attributes.add("nounwind")
        if vector_width is not None:  # a string attribute, which llvmlite's checked ``add`` refuses
            set.add(self.fn.attributes, f'"prefer-vector-width"="{vector_width}"')
        self.b = ll.IRBuilder(self.fn.append_basic_block("entry"))
        self.cache: dict = {}  # id(value) -> LLVM value, for the values that dominate the builder's position
        self.deps: dict = {}  # id(value) -> registers it reads (frozenset)
        self.readers: dict = {}  # register name -> ids of cached values reading it
        self.log: list = [[]]  # per open scope: the ids cached in it (dropped when it closes)
        self.loopvars: dict = {}  # name -> its phi, while inside the loop (and grid items)
        self.items: list = []  # per grid axis: its index (a phi)
        self.regs: dict = {}  # register name -> alloca
        self.loops = 0  # IR loops (not grid loops) around the statement being built
        self.ordered = 0  # of them, ordered loops (``ir.Loop.ordered``: sums without reassociation)

    # the function ---------------------------------------------------------------------------------
    def build(self) -> None:
        k, b = self.k, self.b
        bufs, params, start, stop = self.fn.args
        self.bufs = {}
        for i, buf in enumerate(k.buffers):
            slot = b.gep(bufs, [ll.Constant(I64, i)], inbounds=True, source_etype=PTR)
            # (named by position, as the alias scopes are: a kernel's code is the same text whatever its
            # buffers are called in the program, so the trips of a rolled body share one object)
            self.bufs[buf.name] = (b.load(slot, name=f"buf{i}", typ=PTR, align=8), buf.dtype)
        self.scopes = self._alias_scopes() if self.distinct else {}
        self.params = {}
        for j, name in enumerate(k.params):
            slot = b.gep(params, [ll.Constant(I64, j)], inbounds=True, source_etype=I64)
            self.params[name] = b.load(slot, name=name, typ=I64, align=8)
        for name, d in _registers(k.body).items():
            self.regs[name] = b.alloca(value_type(d), name=name)
        bounds = [(start, stop)] + [(ll.Constant(I64, 0), self.value(g)) for g in k.grid[1:]]
        self._grid(bounds, 0)
        self.b.ret_void()

    def _grid(self, bounds, axis: int) -> None:
        if axis == len(bounds):
            self.block(self.k.body)
            return
        lo, hi = bounds[axis]

        def body(i):
            self.items.append(i)
            self._grid(bounds, axis + 1)
            self.items.pop()

        self.loop(lo, hi, ll.Constant(I64, 1), body, f"item{axis}")

    def loop(self, lo, hi, step, body, name: str) -> None:
        """``for i in range(lo, hi, step)`` (``step`` > 0): ``body(i)`` builds one trip."""
        b = self.b
        pre = b.block
        head = self.fn.append_basic_block(f"{name}.head")
        inner = self.fn.append_basic_block(f"{name}.body")
        done = self.fn.append_basic_block(f"{name}.end")
        b.branch(head)
        b.position_at_end(head)
        i = b.phi(I64, name=name)
        i.add_incoming(lo, pre)
        b.cbranch(b.icmp_signed("<", i, hi), inner, done)
        b.position_at_end(inner)
        self.open()
        body(i)
        self.close()
        nxt = b.add(i, step, name=f"{name}.next", flags=("nsw",))
        i.add_incoming(nxt, b.block)
        b.branch(head)
        b.position_at_end(done)

    # scopes: a value cached inside a loop or a branch does not dominate the code after it -----------
    def open(self) -> None:
        self.log.append([])

    def close(self) -> None:
        for key in self.log.pop():
            self._forget(key)

    def _forget(self, key) -> None:
        if self.cache.pop(key, None) is not None:
            for r in self.deps.pop(key):
                self.readers[r].discard(key)

    def _stale(self, register: str) -> None:
        for key in list(self.readers.get(register, ())):
            self._forget(key)

    def _remember(self, v: ir.V, x) -> None:
        key = id(v)
        if v.op == "var" and v.arg in self.regs and v.arg not in self.loopvars:
            deps = frozenset((v.arg,))
        else:
            deps = frozenset().union(*(self.deps[id(a)] for a in _operands(v))) if v.args else frozenset()
        self.cache[key], self.deps[key] = x, deps
        for r in deps:
            self.readers.setdefault(r, set()).add(key)
        self.log[-1].append(key)

    # statements -----------------------------------------------------------------------------------
    def block(self, body) -> None:
        for s in body:
            self.statement(s)

    def statement(self, s) -> None:
        b = self.b
        if isinstance(s, ir.Assign):
            x = self._accumulate(s) or self.value(s.value)
            b.store(x, self.regs[s.name])
            self._stale(s.name)  # values computed from its old value
        elif isinstance(s, ir.Store):
            ptr, d = self.bufs[s.buffer]
            index, x = self.value(s.index), self.value(s.value)

            def store():
                at = b.gep(ptr, [index], inbounds=True, source_etype=storage_type(d))
                self._scoped(b.store(self._to_storage(x, d), at, align=_ALIGN[storage_type(d)]), s.buffer)

            self._guarded(s.valid, store)
        elif isinstance(s, ir.Loop):
            lo, hi = self.value(s.start), self.value(s.stop)
            step = ll.Constant(I64, 1) if s.step is None else self.value(s.step)

            for r in _registers(s.body):  # a register the loop assigns changes between trips
                self._stale(r)

            def body(i):
                saved = self.loopvars.get(s.var)
                self.loopvars[s.var] = i
                self.loops += 1
                self.ordered += s.ordered
                self.block(s.body)
                self.ordered -= s.ordered
                self.loops -= 1
                if saved is None:
                    del self.loopvars[s.var]
                else:
                    self.loopvars[s.var] = saved

            self.loop(lo, hi, step, body, s.var)
        elif isinstance(s, ir.If):
            self._guarded(s.cond, lambda: self.block(s.body))
        elif isinstance(s, ir.AtomicAdd):
            ptr, d = self.bufs[s.buffer]
            if d not in (dt.float32, dt.float64, dt.int32, ir.INDEX):
                raise NotImplementedError(f"llvm: AtomicAdd on {d.name} (kernel {self.k.name})")
            index, x = self.value(s.index), self.value(s.value)

            def add():
                at = b.gep(ptr, [index], inbounds=True, source_etype=storage_type(d))
                b.atomic_rmw("fadd" if d.is_float else "add", at, x, "monotonic")

            self._guarded(s.valid, add)
        else:
            raise ir.IRError(f"kernel {self.k.name}: {type(s).__name__} in a CPU kernel")

    def _guarded(self, cond, build) -> None:
        """``build()`` where ``cond`` holds (None: always), in a scope of its own."""
        if cond is None:
            build()
            return
        b = self.b
        c = self.value(cond)
        then = self.fn.append_basic_block("then")
        done = self.fn.append_basic_block("endif")
        b.cbranch(c, then, done)
        b.position_at_end(then)
        self.open()
        build()
        self.close()
        b.branch(done)
        b.position_at_end(done)

    def _accumulate(self, s: ir.Assign):
        """A reduction's accumulation inside a loop (``acc = acc + x`` / ``max(acc, x)`` on float32 or
        float64): the add with ``reassoc contract``, the max as ``llvm.maximum``; else None."""
        v = s.value
        if not self.loops or v.op not in ("Add", "Max") or v.dtype not in (dt.float32, dt.float64):
            return None
        own = [a.op == "var" and a.arg == s.name and a.arg not in self.loopvars for a in v.args]
        if not any(own):
            return None
        acc = self.value(v.args[own.index(True)])
        x = self.value(v.args[1 - own.index(True)])
        if v.op == "Add":
            return self.b.fadd(acc, x, flags=() if self.ordered else REDUCE_FLAGS)
        return self.b.call(self._intrinsic("llvm.maximum", acc.type), [acc, x])

    # values ---------------------------------------------------------------------------------------
    def value(self, v: ir.V):
        """The LLVM value of ``v`` at the builder's position (operands first; an iterative walk: an
        expression may be thousands of operations deep)."""
        cache = self.cache
        got = cache.get(id(v))
        if got is not None:
            return got
        stack = [(v, False)]
        while stack:
            x, ready = stack.pop()
            if id(x) in cache:
                continue
            if ready:
                self._remember(x, self._emit(x, [cache[id(a)] for a in _operands(x)]))
                continue
            stack.append((x, True))
            stack.extend((a, False) for a in reversed(_operands(x)) if id(a) not in cache)
        return cache[id(v)]

    def _emit(self, v: ir.V, xs: list):
        op, b = v.op, self.b
        if op == "const":
            return _const(v.dtype, v.arg)
        if op == "param":
            return self.params[v.arg]
        if op == "item":
            return self.items[v.arg]
        if op == "var":
            if v.arg in self.loopvars:
                return self.loopvars[v.arg]
            return b.load(self.regs[v.arg], typ=value_type(v.dtype))
        if op == "load":
            return self._load(v, xs)
        if op == "cast":
            if _operands(v) is not v.args:  # (float32 of a float64 exp2: at float32's accuracy)
                return _exp2_narrow(b, xs[0])
            return self._cast(xs[0], v.args[0].dtype, v.dtype)
        if op in ("And", "Or", "Not"):
            return {"And": b.and_, "Or": b.or_}[op](*xs) if op != "Not" else b.not_(xs[0])
        if op == "Div":
            return b.sdiv(*xs)
        d = v.args[0].dtype if op != "Where" else v.args[1].dtype
        table = op_table(d)
        emit = table.get(op)
        if emit is None:
            raise NotImplementedError(f"llvm: {op} on {d.name}")
        if d is dt.float16 and op in _ROUNDED:  # computed in float, rounded once
            return self.round(emit(self, d, [b.fpext(x, F32) for x in xs]), v.dtype)
        x = emit(self, d, xs)
        return self.round(x, v.dtype) if op in _ROUNDED else x

    def _intrinsic(self, name: str, t: ll.Type):
        full = f"{name}.{'f64' if t == F64 else 'f16' if t == F16 else 'f32'}"
        fn = self.m.globals.get(full)
        if fn is None:
            fn = ll.Function(self.m, ll.FunctionType(t, (t,) * (2 if name == "llvm.maximum" else 1)), name=full)
        return fn

    def _load(self, v: ir.V, xs: list):
        """``buffer[index]``; with a ``valid`` operand, read only where it holds, else ``pad``."""
        b = self.b
        buf, pad = v.arg
        ptr, d = self.bufs[buf]
        st = storage_type(d)
        align = _ALIGN[st]

        def read():
            at = b.gep(ptr, [xs[0]], inbounds=True, source_etype=st)
            return self._from_storage(self._scoped(b.load(at, typ=st, align=align), buf), d)

        if len(xs) == 1:
            return read()
        pre = b.block
        then = self.fn.append_basic_block(f"{buf}.read")
        done = self.fn.append_basic_block(f"{buf}.join")
        b.cbranch(xs[1], then, done)
        b.position_at_end(then)
        x = read()
        then = b.block
        b.branch(done)
        b.position_at_end(done)
        phi = b.phi(x.type)
        phi.add_incoming(x, then)
        phi.add_incoming(_const(v.dtype, pad), pre)
        return phi

    def _alias_scopes(self) -> dict:
        """{buffer: (its scope list, every other buffer's)}: LLVM's scoped-noalias metadata, one scope per
        buffer (in one domain per kernel), so that accesses to different buffers are known apart."""
        m = self.m
        domain = m.add_metadata([ll.MetaDataString(m, f"luminal.{self.k.name}")])
        scopes = {b.name: m.add_metadata([ll.MetaDataString(m, f"luminal.{self.k.name}.{i}"), domain])
                  for i, b in enumerate(self.k.buffers)}
        return {n: (m.add_metadata([sc]), m.add_metadata([o for on, o in scopes.items() if on != n]))
                for n, sc in scopes.items()}

    def _scoped(self, access, buffer: str):
        """``access`` (a load or store of ``buffer``) tagged with the buffers' alias scopes (when the
        caller promised distinct buffers)."""
        if self.scopes:
            own, others = self.scopes[buffer]
            access.set_metadata("alias.scope", own)
            access.set_metadata("noalias", others)
        return access

    def _from_storage(self, x, d):
        if d.kind == "b":
            return self.b.icmp_unsigned("!=", x, ll.Constant(I8, 0))
        return x

    def _to_storage(self, x, d):
        if d.kind == "b":
            return self.b.zext(x, I8)
        return x

    # rounding and casts ---------------------------------------------------------------------------
    def round(self, x, d):
        """A float32 value rounded to ``d`` when ``d`` is a half float (float16: a half register;
        bfloat16: a float register)."""
        b = self.b
        if d is dt.float16:
            return b.fptrunc(x, F16)
        if d is dt.bfloat16:  # dtype.round_bf16: to nearest even on the top 16 bits; a NaN stays itself
            u = b.bitcast(x, I32)
            odd = b.and_(b.lshr(u, ll.Constant(I32, 16)), ll.Constant(I32, 1))
            r = b.and_(b.add(u, b.add(odd, ll.Constant(I32, 0x7FFF))), ll.Constant(I32, -65536))
            return b.select(b.fcmp_unordered("uno", x, x), x, b.bitcast(r, F32))
        return x

    def _cast(self, x, src, dst):
        b = self.b
        if src is dst:
            return x
        t = value_type(dst)
        if dst.kind == "b":
            if src.is_float:
                return b.fcmp_unordered("!=", x, ll.Constant(x.type, 0.0))
            return b.icmp_unsigned("!=", x, ll.Constant(x.type, 0))
        if src.kind == "b":
            return b.zext(x, t) if dst.kind == "i" else b.uitofp(x, t)
        if src.kind == "i" and dst.kind == "i":
            if x.type.width == t.width:
                return x
            return b.trunc(x, t) if x.type.width > t.width else b.sext(x, t)
        if src.kind == "i":  # -> float: one rounding to float32 (or float64), then to a half type
            return self.round(b.sitofp(x, F64 if t == F64 else F32), dst)
        if x.type == F16:
            x = b.fpext(x, F32)
        if dst.kind == "i":
            return self._to_int(x, t)
        if t == F64:
            return x if x.type == F64 else b.fpext(x, F64)
        if x.type == F64:
            x = b.fptrunc(x, F32)  # float64 -> a half type rounds through float32, as numpy_ops.cast
        return self.round(x, dst)

    def _to_int(self, x, t):
        """float -> int truncating toward zero, saturating as ``numpy_ops.float_to_int32``: NaN gives
        0, values past the range (infinities included) its end (``fptosi`` alone would be poison)."""
        b = self.b
        bits = t.width
        lo = -(2.0 ** (bits - 1))
        if x.type == F64 and bits == 32:
            fits = b.fcmp_ordered(">", x, ll.Constant(F64, lo - 1.0))
        else:
            fits = b.fcmp_ordered(">=", x, ll.Constant(x.type, lo))
        fits = b.and_(fits, b.fcmp_ordered("<", x, ll.Constant(x.type, -lo)))
        zero = ll.Constant(x.type, 0.0)
        end = b.select(b.fcmp_ordered(">", x, zero), ll.Constant(t, (1 << (bits - 1)) - 1),
                       b.select(b.fcmp_ordered("<", x, zero), ll.Constant(t, -(1 << (bits - 1))), ll.Constant(t, 0)))
        return b.select(fits, b.fptosi(x, t), end)


# Exp2 and Log2 as inline arithmetic -----------------------------------------------------------------
#
# LLVM lowers llvm.exp2/llvm.log2 to scalar libm calls, which keep a loop from being vectorised. These
# are straight-line IR instead (range reduction, a polynomial, exponent bits set through integer ops;
# selects for the special values, no calls, no branches, no fast-math), which the loop vectoriser widens.
# float32 (and the half types, computed in float32) is computed in double and rounded once: within an
# ulp of the correctly rounded result everywhere, subnormal results included (fptrunc rounds them).
# float64 keeps its reduction exact and the last additions in double-double: under 0.65 ulp for exp2,
# 0.85 for log2 (fdlibm's e_log2.c). Coefficients: near-minimax fits (Chebyshev-node interpolation
# in 60-digit arithmetic), as hex floats.

_ROUND = 6755399441055744.0  # 1.5 * 2**52: for |x| < 2**51, (x + _ROUND) - _ROUND is x rounded to an
_ROUND_BITS = 0x4338000000000000  # integer (to nearest even), and the bits of x + _ROUND minus these are it
_EXP2_Q32 = tuple(map(float.fromhex, (  # 2**r = 1 + r*q(r), |r| <= 1/2: error of q 1.7e-10
    "0x1.62e42fefa39efp-1", "0x1.ebfbe045f4d3cp-3", "0x1.c6b08d883dca1p-5", "0x1.3b2a1b7152befp-7",
    "0x1.5d879ead06a82p-10", "0x1.443fffc90db59p-13", "0x1.00a581594758ep-16")))
_EXP2_Q64 = tuple(map(float.fromhex, (  # 2**r = 1 + ln2*r + r*r*Q(r), |r| <= 1/2: error of Q 1.2e-17
    "0x1.ebfbdff82c58fp-3", "0x1.c6b08d704a0c2p-5", "0x1.3b2ab6fba4e78p-7", "0x1.5d87fe78a5276p-10",
    "0x1.430912f86bf52p-13", "0x1.ffcbfc670dcd4p-17", "0x1.62c022401b97dp-20", "0x1.b524fae627834p-24",
    "0x1.e4cf1cd08d4b8p-28", "0x1.e9d3fe3952179p-32", "0x1.c48f769ad2c46p-36")))
_LN2_HI = float.fromhex("0x1.62e42f8p-1")  # ln 2 in 26 bits: its product with a 26-bit number is exact
_LN2_LO = float.fromhex("0x1.be8e7bcd5e4f2p-27")  # ln 2 - _LN2_HI
_HIGH26 = -(1 << 27)  # clears a double's low 27 mantissa bits (26 significant bits stay)
_LOG2_R32 = tuple(map(float.fromhex, (  # ln(m) = 2s + s*z*R(z), s = (m-1)/(m+1), z = s*s <= 0.0295: 1.2e-9
    "0x1.5555554bb2b2cp-1", "0x1.9999eb5d84f14p-2", "0x1.245c438323e9ap-2", "0x1.ddced7078dd3ap-3")))
_LG = (6.666666666666735130e-01, 3.999999999940941908e-01, 2.857142874366239149e-01,  # fdlibm's Lg1-Lg7
       2.222219843214978396e-01, 1.818357216161805012e-01, 1.531383769920937332e-01, 1.479819860511658591e-01)
_IVLN2_HI = float.fromhex("0x1.7154765200000p+0")  # 1/ln 2 in 33 bits (fdlibm's ivln2hi) and the rest
_IVLN2_LO = float.fromhex("0x1.705fc2eefa200p-33")
_INVLN2 = float.fromhex("0x1.71547652b82fep+0")


def _d(v: float) -> ll.Constant:
    return ll.Constant(F64, v)


def _q(v: int) -> ll.Constant:
    return ll.Constant(I64, v)


def _muladd(b):
    """``(x, y, z) -> x * y + z``: ``llvm.fma`` where the host has FMA (a fused multiply-add, exactly
    specified: one rounding), else a multiply and an add."""
    if "+fma" not in _init()["features"].split(","):
        return lambda x, y, z: b.fadd(b.fmul(x, y), z)
    fma = b.module.globals.get("llvm.fma.f64")
    if fma is None:
        fma = ll.Function(b.module, ll.FunctionType(F64, (F64, F64, F64)), name="llvm.fma.f64")
    return lambda x, y, z: b.call(fma, [x, y, z])


def _horner(b, coeffs, r):
    """``sum(coeffs[j] * r**j)`` in Horner's order (``_muladd``)."""
    muladd, p = _muladd(b), _d(coeffs[-1])
    for c in reversed(coeffs[:-1]):
        p = muladd(p, r, _d(c))
    return p


_ESTRIN_HEAD = 3  # (see _estrin)


def _estrin(b, coeffs, r):
    """``sum(coeffs[j] * r**j)``: the first ``_ESTRIN_HEAD`` terms in Horner's order around the rest,
    which Estrin's scheme sums: pairs ``c3 + c4 r``, ``c5 + c6 r``, ... joined by ``r**2``, then pairs of
    those by ``r**4``, ... A chain of 3 + about log2(n) multiply-adds where Horner's is n long: a loop of
    a long polynomial is bound by that chain's latency (float64 exp2's 11 terms; 1M float32 on one AVX2
    thread, the same kernel built both ways, alternating: elu 3.43 -> 3.12 ms, expm1 3.11 -> 2.94,
    softplus 5.71 -> 5.37). The Horner head keeps the rounding of the terms that matter: float64 exp2
    differs from Horner's at 1 of 800,000 random arguments, the largest error unchanged (0.616 ulp
    against an 80-bit long double; Estrin's all the way, 5156 differed and 0.670 ulp)."""
    muladd = _muladd(b)
    head, tail = coeffs[:_ESTRIN_HEAD], coeffs[_ESTRIN_HEAD:]
    terms = [muladd(r, _d(tail[i + 1]), _d(tail[i])) if i + 1 < len(tail) else _d(tail[i])
             for i in range(0, len(tail), 2)]
    power = r
    while len(terms) > 1:
        power = b.fmul(power, power)
        terms = [muladd(terms[i + 1], power, terms[i]) if i + 1 < len(terms) else terms[i]
                 for i in range(0, len(terms), 2)]
    p = terms[0]
    for c in reversed(head):
        p = muladd(p, r, _d(c))
    return p


def _pow2(b, n):
    """2**n as a double, for an i64 ``n`` in [-1022, 1023]."""
    return b.bitcast(b.shl(b.add(n, _q(1023)), _q(52)), F64)


def _exp2_reduce(b, x, limit: float):
    """``x`` (a double) clamped to [-limit, limit] (a NaN stays NaN), as ``n + r``: (n as an i64,
    r = x - n exactly, |r| <= 1/2). A NaN gives a NaN ``r`` (and some ``n``), so the result is NaN."""
    x = b.select(b.fcmp_ordered(">", x, _d(limit)), _d(limit), x)
    x = b.select(b.fcmp_ordered("<", x, _d(-limit)), _d(-limit), x)
    t = b.fadd(x, _d(_ROUND))
    return b.sub(b.bitcast(t, I64), _q(_ROUND_BITS)), b.fsub(x, b.fsub(t, _d(_ROUND)))


def _exp2_f32(b, x):
    """exp2 of a float: :func:`_exp2_narrow` of it as a double."""
    return _exp2_narrow(b, b.fpext(x, F64))


def _exp2_narrow(b, x):
    """exp2 of a double ``x`` as a float: in double, 2**n exact (|n| <= 200), q's error (1.7e-10) far
    under float's half ulp, one rounding to float at the end (below 2**-126 to a subnormal or 0, above
    2**128 to inf)."""
    n, r = _exp2_reduce(b, x, 200.0)
    p = b.fadd(_d(1.0), b.fmul(r, _horner(b, _EXP2_Q32, r)))
    return b.fptrunc(b.fmul(p, _pow2(b, n)), F32)


def _operands(v: ir.V) -> tuple:
    """The values ``v`` is emitted from: its operands, but for a float32 cast of a float64 Exp2 (what
    ``lm.exp`` of float32 computes: the product ``x log2(e)`` in double, rounded once at the end), the
    Exp2's operand: the cast is emitted as :func:`_exp2_narrow`, a polynomial of float32's accuracy,
    not float64's (half the work; the Exp2 itself is emitted only if something else reads it)."""
    a = v.args
    if v.op == "cast" and v.dtype is dt.float32 and a[0].op == "Exp2" and a[0].dtype is dt.float64:
        return a[0].args
    return a


def _exp2_f64(b, x):
    """exp2 of a double: 1 + ln2*r + r*r*Q(r) (Q by ``_estrin``) with ln2*r split exactly (26-bit
    halves) and added to 1 in double-double; 2**n applied in two exact-or-once-rounded steps (n in
    [-1100, 1100]: results near and below 2**-1022 round once, to a subnormal or 0; above 2**1024 they
    overflow to inf)."""
    n, r = _exp2_reduce(b, x, 1100.0)
    r_hi = b.bitcast(b.and_(b.bitcast(r, I64), _q(_HIGH26)), F64)
    r_lo = b.fsub(r, r_hi)
    t = b.fmul(r_hi, _d(_LN2_HI))  # exact
    tail = b.fadd(b.fadd(b.fmul(r_lo, _d(_LN2_HI)), b.fmul(r, _d(_LN2_LO))),
                  b.fmul(b.fmul(r, r), _estrin(b, _EXP2_Q64, r)))
    s = b.fadd(_d(1.0), t)
    e = b.fadd(b.fsub(_d(1.0), s), t)  # 1 + t - s exactly (|t| < 1)
    p = b.fadd(s, b.fadd(e, tail))
    n1 = b.ashr(n, _q(1))
    return b.fmul(b.fmul(p, _pow2(b, n1)), _pow2(b, b.sub(n, n1)))


def _log2_reduce(b, x):
    """A positive normal double as 2**k * m, m in [sqrt(1/2), sqrt(2)): (k as an exact double, m - 1
    exact) (fdlibm's branch-free normalisation)."""
    bits = b.bitcast(x, I64)
    k = b.sub(b.ashr(bits, _q(52)), _q(1023))
    mant = b.and_(bits, _q((1 << 52) - 1))
    i = b.and_(b.add(mant, _q(0x95F64 << 32)), _q(1 << 52))  # set where m >= sqrt(2) (then halve m)
    m = b.bitcast(b.or_(mant, b.xor(i, _q(0x3FF << 52))), F64)
    k = b.add(k, b.lshr(i, _q(52)))
    y = b.fsub(b.bitcast(b.add(k, _q(_ROUND_BITS)), F64), _d(_ROUND))  # k as a double (|k| < 2**51)
    return y, b.fsub(m, _d(1.0))


def _log2_special(b, x, res):
    """log2's special values over ``res``: +inf at +inf, -inf at +-0, NaN below 0 and at NaN."""
    res = b.select(b.fcmp_ordered("==", x, _d(float("inf"))), x, res)
    res = b.select(b.fcmp_ordered("==", x, _d(0.0)), _d(float("-inf")), res)
    return b.select(b.fcmp_unordered("<", x, _d(0.0)), _d(float("nan")), res)


def _log2_f32(b, x):
    """log2 of a float: in double (a float32 subnormal is a normal double), rounded once."""
    x = b.fpext(x, F64)
    y, f = _log2_reduce(b, x)
    s = b.fdiv(f, b.fadd(_d(2.0), f))
    z = b.fmul(s, s)
    ln = b.fadd(b.fmul(s, _d(2.0)), b.fmul(b.fmul(s, z), _horner(b, _LOG2_R32, z)))
    return b.fptrunc(_log2_special(b, x, b.fadd(y, b.fmul(ln, _d(_INVLN2)))), F32)


def _log2_f64(b, x):
    """log2 of a double: fdlibm's e_log2.c (FreeBSD), branch-free: a subnormal scaled by 2**54 first,
    f - f*f/2 split in halves and multiplied by 1/ln2 in pieces, k added in double-double."""
    sub = b.icmp_signed("<", b.bitcast(x, I64), _q(1 << 52))  # below 2**-1022 (and 0, negatives)
    y, f = _log2_reduce(b, b.select(sub, b.fmul(x, _d(2.0**54)), x))
    y = b.fsub(y, b.select(sub, _d(54.0), _d(0.0)))
    hfsq = b.fmul(b.fmul(_d(0.5), f), f)
    s = b.fdiv(f, b.fadd(_d(2.0), f))
    z = b.fmul(s, s)
    w = b.fmul(z, z)
    t1 = b.fmul(w, _horner(b, _LG[1::2], w))
    t2 = b.fmul(z, _horner(b, _LG[0::2], w))
    r = b.fmul(s, b.fadd(hfsq, b.fadd(t2, t1)))
    hi = b.bitcast(b.and_(b.bitcast(b.fsub(f, hfsq), I64), _q(-(1 << 32))), F64)
    lo = b.fadd(b.fsub(b.fsub(f, hi), hfsq), r)
    v_hi = b.fmul(hi, _d(_IVLN2_HI))
    v_lo = b.fadd(b.fmul(b.fadd(lo, hi), _d(_IVLN2_LO)), b.fmul(lo, _d(_IVLN2_HI)))
    w = b.fadd(y, v_hi)
    v_lo = b.fadd(v_lo, b.fadd(b.fsub(y, w), v_hi))
    return _log2_special(b, x, b.fadd(v_lo, w))


# Sin of a float as inline arithmetic (llvm.sin.f32 is a scalar libm call per element, which kept the
# loop scalar: 12 times exp's time). The argument is reduced exactly over float32's whole range (Payne
# and Hanek's reduction with a table, no branches): |x| = M 2**E (M the 24-bit integer significand),
# and x (2/pi) = M T_E modulo 4, where T_E = 2**E (2/pi) mod 4 is tabulated per exponent field (256
# entries) in four doubles c0..c3 holding its bits of weights 2**1..2**-22, 2**-23..2**-46,
# 2**-47..2**-70 and the rest (53 bits). M c0, M c1, M c2 are exact (48-bit products at fixed
# positions), so the sum's integer part (the quadrant) and its fraction f (|f| <= 1/2) are exact to
# 2**-70 before the last two terms, and f is within 2**-99 of x (2/pi) - n: even the float32 nearest a
# multiple of pi/2 keeps 60 bits of it. sin or cos of f pi/2 (|f pi/2| <= pi/4) by Taylor polynomials
# to the 13th and 14th powers (under 2**-44 relative), by quadrant, in double, rounded once to float:
# within half an ulp (and a hair) of the correctly rounded sine. A float64 Sin stays a libm call.
_TWO_OVER_PI_BITS = int(  # floor(2/pi 2**320)
    "a2f9836e4e441529fc2757d1f534ddc0db6295993c439041fe5163abdebbc561b7246e3a424dd2e0", 16)
_SIN_S = tuple((-1) ** k / math.factorial(2 * k + 1) for k in range(7))  # sin y = y S(y**2), to y**13
_SIN_C = tuple((-1) ** k / math.factorial(2 * k) for k in range(8))  # cos y = C(y**2), to y**14
_PIO2_D = float.fromhex("0x1.921fb54442d18p+0")


def _sin_table() -> list:
    """[c0, c1, c2, c3] for each float32 exponent field e: T = 2**E (2/pi) mod 4 with E = max(e, 1) -
    150 (the weight of M's last bit; e = 255 is never used), cut at bits 2**-22, 2**-46 and 2**-70."""
    cols: list = [[], [], [], []]
    for e in range(256):
        shift = max(e, 1) - 150 - 320  # T = _TWO_OVER_PI_BITS 2**shift mod 4, as an integer over 2**224
        t = _TWO_OVER_PI_BITS << (224 + shift) if shift >= -224 else _TWO_OVER_PI_BITS >> -(224 + shift)
        t %= 4 << 224
        for j, low in enumerate((224 - 22, 224 - 46, 224 - 70)):
            part = t >> low << low
            cols[j].append(part / 2.0**224)
            t -= part
        cols[3].append(t / 2.0**224)
    return cols


_SIN_TABLE = _sin_table()


def _table(b, name: str, values: list):
    """A constant [n x double] of the module, made once per module."""
    g = b.module.globals.get(name)
    if g is None:
        g = ll.GlobalVariable(b.module, ll.ArrayType(F64, len(values)), name=name)
        g.global_constant, g.linkage = True, "internal"
        g.initializer = ll.Constant(ll.ArrayType(F64, len(values)), [float(v) for v in values])
    return g


def _sin_f32(b, x):
    """sin of a float (see above): NaN at +-inf and NaN, -0.0 at -0.0."""
    bits = b.bitcast(x, I32)
    e = b.and_(b.lshr(bits, ll.Constant(I32, 23)), ll.Constant(I32, 255))
    implicit = b.select(b.icmp_unsigned("==", e, ll.Constant(I32, 0)), ll.Constant(I32, 0), ll.Constant(I32, 1 << 23))
    m = b.uitofp(b.or_(b.and_(bits, ll.Constant(I32, (1 << 23) - 1)), implicit), F64)  # exact
    idx = b.zext(e, I64)
    c = [b.load(b.gep(_table(b, f"luminal.sin.c{j}", col), [_q(0), idx], inbounds=True))
         for j, col in enumerate(_SIN_TABLE)]
    s0, s1, s2, s3 = (b.fmul(m, cj) for cj in c)  # s0, s1, s2 exact
    n0 = b.fsub(b.fadd(s0, _d(_ROUND)), _d(_ROUND))
    t = b.fadd(b.fsub(s0, n0), s1)  # exact: bits 2**2 .. 2**-46
    t_round = b.fadd(t, _d(_ROUND))
    n1 = b.fsub(t_round, _d(_ROUND))
    f = b.fadd(b.fsub(t, n1), b.fadd(s2, s3))
    quadrant = b.add(b.fptosi(n0, I64), b.sub(b.bitcast(t_round, I64), _q(_ROUND_BITS)))
    y = b.fmul(f, _d(_PIO2_D))
    z = b.fmul(y, y)
    sin_y = b.fmul(y, _horner(b, _SIN_S, z))
    cos_y = _horner(b, _SIN_C, z)
    odd = b.icmp_signed("!=", b.and_(quadrant, _q(1)), _q(0))
    v = b.select(odd, cos_y, sin_y)
    flip = b.xor(b.icmp_signed("!=", b.and_(quadrant, _q(2)), _q(0)), b.icmp_signed("<", bits, ll.Constant(I32, 0)))
    v = b.select(flip, b.fneg(v), v)
    v = b.select(b.icmp_unsigned("==", e, ll.Constant(I32, 255)), _d(float("nan")), v)  # +-inf, NaN
    return b.fptrunc(v, F32)


def _inline(f32, f64):
    return lambda b, x: f64(b, x) if x.type == F64 else f32(b, x)


def _sin_libm(b, x):
    fn = b.module.globals.get("llvm.sin.f64")
    if fn is None:
        fn = ll.Function(b.module, ll.FunctionType(F64, (F64,)), name="llvm.sin.f64")
    return b.call(fn, [x])


_INLINE = {"Exp2": _inline(_exp2_f32, _exp2_f64), "Log2": _inline(_log2_f32, _log2_f64),
           "Sin": _inline(_sin_f32, _sin_libm)}


# The elementwise primitives (``core/primitives.py``'s records, by name) on each kind of operand, as
# llvmlite builders ``emit(emitter, operand dtype, operand values)``; the coverage test
# (``tests/core/test_primitive_records.py``) checks that every elementwise primitive has an entry for
# every kind of operand it takes. The result of a float op on half floats is rounded by the emitter.
def _mod_int(e, d, xs):
    x, y = xs
    if d is ir.INDEX:
        return e.b.srem(x, y)
    zero, one = ll.Constant(x.type, 0), ll.Constant(x.type, 1)
    trivial = e.b.or_(e.b.icmp_signed("==", y, zero), e.b.icmp_signed("==", y, ll.Constant(x.type, -1)))
    return e.b.srem(x, e.b.select(trivial, one, y))  # x % 1 is 0: numpy's fmod by 0 and by -1


def _wrap(d) -> tuple:
    return ("nsw",) if d is ir.INDEX else ()  # int32 wraps; index math never overflows


def _select(e, d, xs):
    return e.b.select(*xs)


FLOAT_OPS = {
    "Log2": lambda e, d, xs: _INLINE["Log2"](e.b, xs[0]),
    "Exp2": lambda e, d, xs: _INLINE["Exp2"](e.b, xs[0]),
    "Sin": lambda e, d, xs: _INLINE["Sin"](e.b, xs[0]),
    "Sqrt": lambda e, d, xs: e.b.call(e._intrinsic("llvm.sqrt", xs[0].type), xs),
    "Recip": lambda e, d, xs: e.b.fdiv(ll.Constant(xs[0].type, 1.0), xs[0]),
    "Add": lambda e, d, xs: e.b.fadd(*xs),
    "Mul": lambda e, d, xs: e.b.fmul(*xs),
    "Mod": lambda e, d, xs: e.b.frem(*xs),
    # IEEE maximum, as the reductions' accumulation: NaN-propagating, -0 < +0
    "Max": lambda e, d, xs: e.b.call(e._intrinsic("llvm.maximum", xs[0].type), xs),
    "LessThan": lambda e, d, xs: e.b.fcmp_ordered("<", *xs),
    "Where": _select,
}
INT_OPS = {
    "Add": lambda e, d, xs: e.b.add(*xs, flags=_wrap(d)),
    "Mul": lambda e, d, xs: e.b.mul(*xs, flags=_wrap(d)),
    "Mod": _mod_int,
    "Max": lambda e, d, xs: e.b.select(e.b.icmp_signed(">", *xs), *xs),
    "LessThan": lambda e, d, xs: e.b.icmp_signed("<", *xs),
    "Where": _select,
}
BOOL_OPS = {
    "Add": lambda e, d, xs: e.b.or_(*xs),
    "Mul": lambda e, d, xs: e.b.and_(*xs),
    "Max": lambda e, d, xs: e.b.or_(*xs),
    "LessThan": lambda e, d, xs: e.b.icmp_unsigned("<", *xs),
    "Where": _select,
}


def op_table(d) -> dict:
    """The builders of the elementwise primitives on operands of dtype ``d`` (``Where``: its values')."""
    return FLOAT_OPS if d.is_float else BOOL_OPS if d.kind == "b" else INT_OPS


def _registers(body) -> dict:
    """{register name: dtype of its first assignment} over ``body`` (nested statements included)."""
    out: dict = {}
    stack = list(reversed(body))
    while stack:
        s = stack.pop()
        if isinstance(s, ir.Assign):
            out.setdefault(s.name, s.value.dtype)
        elif isinstance(s, (ir.Loop, ir.If)):
            stack.extend(reversed(s.body))
    return out



def build_module(kernels, distinct: bool = False, vector_width: int | None = None) -> ll.Module:
    """The LLVM module (``llvmlite.ir``) of ``kernels``, for the host; ``distinct`` and
    ``vector_width``: see :func:`compile_kernels`."""
    m = ll.Module(name="luminal")
    m.triple = _init()["triple"]
    m.data_layout = _init()["layout"]
    names = set()
    for k in kernels:
        if k.gpu:
            raise ir.IRError(f"kernel {k.name}: a GPU kernel (block {k.block}) given to the CPU target")
        if k.name in names:
            raise ir.IRError(f"two kernels named {k.name!r} in one module")
        names.add(k.name)
        _Emitter(m, simplify_index(ir.check(k)), distinct, vector_width).build()
    return m


# compiling ----------------------------------------------------------------------------------------

_lock = threading.RLock()  # LLVM's global state (initialisation, the JIT) is not shared across threads
_host: dict = {}
class _Recent:
    """A least-recently-used map bounded by the bytes of its values (``size(value)``): what a process
    keeps of compiled code is bounded however many programs it compiles."""

    def __init__(self, max_bytes: int, size):
        self.max_bytes, self.size, self.bytes = max_bytes, size, 0
        self._items: dict = {}  # most recently used last (dicts keep insertion order)

    def get(self, key):
        value = self._items.pop(key, None)
        if value is not None:
            self._items[key] = value
        return value

    def put(self, key, value) -> None:
        old = self._items.pop(key, None)
        if old is not None:
            self.bytes -= self.size(old)
        self._items[key] = value
        self.bytes += self.size(value)
        while self.bytes > self.max_bytes and len(self._items) > 1:
            self.bytes -= self.size(self._items.pop(next(iter(self._items))))

    def __len__(self):
        return len(self._items)

    def clear(self) -> None:
        self._items.clear()
        self.bytes = 0


# Engines belong to the programs that use them: a Module (its engine and code) lives as long as a
# binding holds it and is found here while it does (so programs of the same kernels share one); the
# last one gone, the engine and its memory are freed. Object code and module texts are kept for
# reuse under byte bounds (a later program of the same kernels links them without compiling).
_modules: weakref.WeakValueDictionary = weakref.WeakValueDictionary()  # link key -> live Module
MAX_OBJECT_BYTES = 32 << 20
_objects = _Recent(MAX_OBJECT_BYTES, len)  # object key -> object code
STATS = {"compiled": 0, "reused": 0, "engines": 0}  # objects compiled / found in a cache, engines made


# LLVM command-line options set once per process (this one and each compile worker), before anything
# is optimised; they are in every object's cache key. ``-enable-masked-interleaved-mem-accesses``: a
# loop whose vector body is masked (a row of 14 in 16 lanes) may load a strided group (a 2x2 max
# pool's four window positions) as whole vectors split by shuffles, not as one gather per position.
# MaxPool2d(2) forward and backward over 128x16x28x28 (AMD EPYC, one process): 0.83-1.08 ms against
# 2.1-2.2; the kernels of a GPT train step compile to the same IR with it as without.
LLVM_OPTIONS = ("-enable-masked-interleaved-mem-accesses=1",)


def _init():
    if not _host:
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        for option in LLVM_OPTIONS:
            llvm.set_option("luminal", option)
        cpu, features = llvm.get_host_cpu_name(), llvm.get_host_cpu_features().flatten()
        # (the triple and data layout once: every llvmlite call takes llvmlite's one lock, which a
        # compile on another thread holds for most of its time, so asking per module would wait for it)
        tm = _machine(cpu, features)
        _host.update(cpu=cpu, features=features, tm=tm, triple=llvm.get_process_triple(), layout=str(tm.target_data))
    return _host


def _machine(cpu, features):
    """A target machine for the host (an execution engine takes ownership of the one it is given:
    each gets its own, and ``_host["tm"]`` stays for optimising and code generation)."""
    return llvm.Target.from_default_triple().create_target_machine(cpu=cpu, features=features, opt=3, jit=True)


@functools.cache
def vector_widths() -> tuple:
    """The widths (bits) of the host's vector registers that LLVM may use: 128, 256 with AVX, 512
    with AVX-512 (x86; 128 elsewhere). (Asked for each product a binding weighs: kept.)"""
    on = {f[1:] for f in _init()["features"].split(",") if f.startswith("+")}
    return (128,) + ((256,) if "avx" in on else ()) + ((512,) if "avx512f" in on else ())


_DISK = DiskCache("llvm")


def cache_dir() -> str:
    """Where compiled objects are kept: ``$LUMINAL_CACHE_DIR/llvm``, default ``~/.cache/luminal/llvm``
    (``core/disk_cache.py``: the root, the ``LUMINAL_CACHE`` switch and the size cap)."""
    return str(_DISK.directory)


def cache_key(text, vectorised: bool = False) -> str:
    """The object key of module ``text`` (or of a :class:`Generated` module: its name and luminal's
    source in place of the text) optimised as ``vectorised`` says, for this host."""
    if isinstance(text, Generated):
        text = f"generated module {text.name}\0{source_digest().hex()}"
    h = _init()
    parts = (text, h["cpu"], h["features"], llvmlite.__version__, f"codegen {CODEGEN_VERSION}",
             f"pipeline O{HAND_VECTORISED_SPEED if vectorised else KERNEL_SPEED}, vectorisers {not vectorised}",
             *LLVM_OPTIONS)
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


@dataclasses.dataclass(frozen=True, eq=False)
class Generated:
    """A module whose IR text a Python generator writes (the generated GEMM and GEMV): ``name`` names
    every parameter the text depends on, and luminal's own source decides the rest, so its object is
    found in the caches by those (``cache_key``) and the text, 25-40 ms to write, is written only to
    compile it: a warm start wrote it just to look its object up."""

    name: str
    write: Callable[[], str]

    @functools.cached_property
    def text(self) -> str:
        return self.write()


# LLVM's pipeline for generated kernels: O2 with the loop and SLP vectorisers. Against O3 (AMD EPYC, 2
# vCPU, alternating processes): a cold GPT train step's code generation 1.41 s against 1.52 (median of
# four; the LLVM CPU time of its 69 modules 1.68 s against 2.06), and the steady state no slower (train
# steps: MNIST CNN 19.5 ms against 23.5, MLP 0.95 against 1.35, GPT 306 against 299; encoder forward 55.4
# against 57.0; small Llama decode 2.1-2.2 ms per token both).
KERNEL_SPEED = 2
# Modules vectorised by hand (the generated GEMM and GEMV: their vector code is written out, register
# by register): O1 without the vectorisers. Measured on the 12x32 AVX-512 GEMM (162 kB of IR): O3 with
# vectorisers 1.13 s to compile, O1 0.37 s, and its products as fast (six shapes, alternating; O2 was
# slower on three: it unrolls what the text already unrolled).
HAND_VECTORISED_SPEED = 1


def optimise(mod, vectorised: bool = False) -> None:
    """LLVM's optimisation pipeline for the host CPU, on a parsed module: ``KERNEL_SPEED`` with loop and
    SLP vectorisation, or for a module ``vectorised`` by hand ``HAND_VECTORISED_SPEED`` without."""
    pto = llvm.create_pipeline_tuning_options(speed_level=HAND_VECTORISED_SPEED if vectorised else KERNEL_SPEED)
    pto.loop_vectorization = not vectorised
    pto.slp_vectorization = not vectorised
    pb = llvm.create_pass_builder(_init()["tm"], pto)
    pb.getModulePassManager().run(mod, pb)


class Module:
    """The compiled kernels of one :func:`compile_kernels` call (it owns the JIT's code): one engine, one
    object per distinct kernel; ``from_cache``: no kernel of it had to be compiled."""

    def __init__(self, engine, symbols: dict, key: str, cached: bool):
        self._engine, self._symbols, self.key, self.from_cache = engine, symbols, key, cached
        self.names = tuple(symbols)  # the kernels' names (their functions' symbols hash their code)
        self._functions: dict = {}

    def address(self, name: str) -> int:
        if name not in self._symbols:
            raise KeyError(f"no kernel {name!r} in this module")
        return self._engine.get_function_address(self._symbols[name])

    def function(self, name: str):
        """The kernel as a ctypes function ``f(bufs, params, start, stop)`` (addresses as ints or
        ctypes arrays)."""
        f = self._functions.get(name)
        if f is None:
            f = self._functions[name] = CFUNC(self.address(name))
            f.module = self  # a function keeps its code alive (engines are freed with their last user)
        return f

    def run(self, name: str, arrays, params=(), start: int = 0, stop: int | None = None) -> None:
        """Run kernel ``name`` over numpy ``arrays`` (in buffer order) for axis-0 items ``[start, stop)``
        (a convenience for tests and one-off calls: a hot caller prebuilds the pointer arrays)."""
        ptrs = (ctypes.c_void_p * max(len(arrays), 1))(*(a.ctypes.data for a in arrays))
        vals = (ctypes.c_int64 * max(len(params), 1))(*params)
        if stop is None:
            raise ValueError("stop: the end of the grid's axis 0 range")
        self.function(name)(ctypes.addressof(ptrs), ctypes.addressof(vals), start, stop)


def compile_kernels(kernels, distinct: bool = False, vector_width: int | None = None, also=()) -> Module:
    """One JIT-compiled module of CPU ``kernels`` (``ir.Kernel``); see the module docstring.

    ``distinct``: the caller's promise that, within each kernel, different buffers never share memory
    that one of them writes (one buffer may be read and written: a state updated in place). The
    accesses then carry scoped-noalias metadata, so LLVM vectorises without runtime overlap checks
    (which made it leave short inner loops scalar: a 14-wide im2col copy, 2-wide pooling windows).

    ``vector_width``: the widest vectors (bits) LLVM's vectorisers should use, as every kernel's
    ``"prefer-vector-width"`` attribute; None leaves LLVM's choice for the host (on AVX-512 machines it
    prefers 256-bit vectors: 512 is an alternative worth timing, ``backends/cpu/tune.py``). The
    attribute is in the module's text, so each width has a cache key of its own.

    ``also``: ``(module text, vectorised)`` of modules the caller will :func:`compile_text` soon (the
    driver, the generated GEMM): where kernels are compiled, their objects are made in the same batch,
    beside the kernels' on this process and the workers, into the caches; they are not linked here."""
    kernels = list(kernels)
    with _lock:
        names = set()
        for k in kernels:
            if k.name in names:  # (build_module checks one module; each kernel is one here)
                raise ir.IRError(f"two kernels named {k.name!r} in one module")
            names.add(k.name)
        fps = [_fingerprint(k, distinct, vector_width) for k in kernels]
        hits = [_indexed(fp) for fp in fps]
        misses = sum(hit is None for hit in hits)
        # the objects of the texts built below, compiled as they come (on the workers where there are
        # many), the companions first (the longest: the generated GEMM)
        objects = _Objects(expected=misses + len(also) if misses else 0)
        try:
            return _compile_kernels(kernels, distinct, vector_width, also if misses else (), fps, hits, objects)
        finally:
            objects.close()  # (an interrupted compile leaves no thread waiting for texts)


def _compile_kernels(kernels, distinct, vector_width, also, fps, hits, objects) -> Module:
    """:func:`compile_kernels` past the index look-ups (called with ``_lock`` held): the texts of the
    kernels the index did not have built and handed to ``objects`` as they come, then linked."""
    for text, vectorised in also:  # (the companions first: the longest)
        objects.want(text, vectorised)
    symbols = {}  # kernel name -> its function's symbol
    found = {}  # symbol -> (key, object, cached), or the object key of a text being compiled
    index: dict = {}  # symbol -> the fingerprints of the kernels whose text was built
    for k, fp, hit in zip(kernels, fps, hits):
        if hit is not None:
            symbol, key, obj = hit
            symbols[k.name] = symbol
            found.setdefault(symbol, (key, obj, True))
            continue
        symbol, text = _named_by_content(k, distinct, vector_width, fp)
        symbols[k.name] = symbol
        if symbol in found:  # (the same text as another kernel's: one object)
            if isinstance(found[symbol], tuple):  # (an indexed kernel's, from another fingerprint)
                _index_put(fp, symbol, found[symbol][0])
            else:
                index[symbol].append(fp)
            continue
        found[symbol] = objects.want(text)
        index[symbol] = [fp]
    made = objects.finish()
    for symbol, fps_of in index.items():
        found[symbol] = made[found[symbol]]
        for fp in fps_of:
            _index_put(fp, symbol, found[symbol][0])
    return _link([key for key, _, _ in found.values()], [obj for _, obj, _ in found.values()], symbols,
                 all(cached for _, _, cached in found.values()))


_PLACEHOLDER = "luminal_kernel"


MAX_TEXT_BYTES = 32 << 20
_texts = _Recent(MAX_TEXT_BYTES, lambda got: len(got[1]))  # digest of a kernel's positional fingerprint
# and options -> (symbol, module text)


def _fingerprint(k: ir.Kernel, distinct: bool, vector_width) -> bytes:
    """A digest of kernel ``k``'s code with its buffers named by position, and the options: equal for
    kernels whose module text is equal (``_named_by_content``). Kept per kernel object while it lives:
    a program's generated kernels are compiled again at each new binding of its dims (to find their
    objects), and walking a kernel's code costs about half a millisecond (a 32-block stack's 17
    distinct kernels: 7 ms of its 0.13 s new binding)."""
    got = _fps.get(k)
    if got is None:
        got = _fps[k] = {}
    fp = got.get((distinct, vector_width))
    if fp is None:
        fp = got[(distinct, vector_width)] = hashlib.sha256(
            f"{ir.fingerprint(k, positional=True)}\0{distinct}\0{vector_width}".encode()).digest()
    return fp


_fps: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # kernel -> {(distinct, vector width): digest}


_INDEXED = _Recent(4 << 20, lambda got: 128)  # index key -> (symbol, object key)
_SYMBOL_TEXT = re.compile(r"k[0-9a-f]{24} [0-9a-f]{64}")


@functools.lru_cache(maxsize=1)
def _generator_digest() -> bytes:
    """A digest of the source that turns a kernel into module text (this package and the dtypes): an
    index entry made by other code is never found."""
    h = hashlib.sha256()
    here = os.path.dirname(os.path.abspath(__file__))
    paths = sorted(os.path.join(here, n) for n in os.listdir(here) if n.endswith(".py")) + [dt.__file__]
    for path in paths:
        with open(path, "rb") as f:
            h.update(os.path.basename(path).encode() + b"\0" + f.read() + b"\0")
    return h.digest()


def _index_key(fp: bytes) -> str:
    h = _init()
    parts = (fp.hex(), h["cpu"], h["features"], llvmlite.__version__, f"codegen {CODEGEN_VERSION}",
             _generator_digest().hex())
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def _indexed(fp: bytes) -> tuple[str, str, bytes] | None:
    """``(symbol, object key, object code)`` of the kernel of fingerprint ``fp`` from the index and the
    object caches (in-process, then disk), without building its text; None when any is missing."""
    ix = _index_key(fp)
    got = _INDEXED.get(ix)
    if got is None:
        raw = _DISK.read(f"{ix[:2]}/{ix}.ix")
        if raw is None:
            return None
        try:
            text = raw.decode("ascii")
        except UnicodeDecodeError:
            return None
        if not _SYMBOL_TEXT.fullmatch(text):  # (verified by its digest; still only data of this form)
            return None
        got = tuple(text.split(" "))
    symbol, key = got
    obj = _objects.get(key)
    if obj is None:
        obj = _DISK.read(f"{key[:2]}/{key}.o")
        if obj is None:
            return None
        _objects.put(key, obj)
    _INDEXED.put(ix, got)
    STATS["reused"] += 1
    return symbol, key, obj


def _index_put(fp: bytes, symbol: str, key: str) -> None:
    ix = _index_key(fp)
    if _INDEXED.get(ix) != (symbol, key):
        _INDEXED.put(ix, (symbol, key))
        _DISK.write_behind(f"{ix[:2]}/{ix}.ix", f"{symbol} {key}".encode("ascii"))  # (kept in _INDEXED)


def _named_by_content(k: ir.Kernel, distinct: bool, vector_width, fp: bytes | None = None) -> tuple[str, str]:
    """``(symbol, module text)`` of kernel ``k`` compiled alone, its function named after a hash of its
    code rather than its name in the program (``ew3``, ``epi12``: positions in the order of lowering)
    and its buffers after their positions, so that the same code in another program, at another
    position or over other buffers (each trip of a rolled body) is the same module text and hits the
    caches. The text is made once per code in a process (building it through llvmlite costs
    milliseconds; the kernel's fingerprint a fraction of that)."""
    fp = _fingerprint(k, distinct, vector_width) if fp is None else fp
    got = _texts.get(fp)
    if got is None:
        text = str(build_module([dataclasses.replace(k, name=_PLACEHOLDER)], distinct, vector_width))
        symbol = "k" + hashlib.sha256(text.encode()).hexdigest()[:24]
        got = symbol, text.replace(f'@"{_PLACEHOLDER}"', f'@"{symbol}"')
        _texts.put(fp, got)
    return got


def compile_text(text, names, vectorised: bool = False) -> Module:
    """The module of LLVM IR ``text`` (or a :class:`Generated` module's) whose functions ``names`` it
    serves, optimised (``optimise``: ``vectorised`` by hand or not) and compiled for the host through the
    in-process and disk caches (the key: the text, the pipeline, the host CPU and its features,
    llvmlite's version, ``CODEGEN_VERSION``)."""
    with _lock:
        objects = _Objects(expected=1)
        wanted = objects.want(text, vectorised)
        key, obj, cached = objects.finish()[wanted]
        return _link([key], [obj], {n: n for n in names}, cached)


PARALLEL_MIN = 24  # objects to compile at once from which worker processes share them (llvm_workers.py)
PARALLEL_RUNNING = 4  # ... when the workers are running already (started ahead: ``Cpu.expect_code``)


class _Objects:
    """The object code of module texts, each looked up in the in-process and disk caches as it comes
    (:meth:`want`) and the rest compiled: where ``expected`` (texts that may need compiling) is
    ``PARALLEL_MIN`` or more (a GPT's 77 objects, a fifth less code generation on 2 cores; a dozen, as
    an MLP's, would gain less than a worker takes to start), or ``PARALLEL_RUNNING`` with the workers
    started already, by the worker processes and a thread here as they come, while the caller builds
    the next texts (``llvm_workers.Batch``); else here, one after another, at :meth:`finish`. A
    progress bar when compiling takes over a second."""

    def __init__(self, expected: int):
        self._expected = expected
        self._parallel = llvm_workers.worker_count() > 1 and (
            expected >= PARALLEL_MIN or (expected >= PARALLEL_RUNNING and llvm_workers.running() > 0))
        self._out: dict = {}  # object key -> (key, object code, whether it came from a cache)
        self._todo: dict = {}  # object key -> (text, vectorised), in the order wanted
        self._batch = None
        self._bar = None

    def want(self, text, vectorised: bool = False) -> str:
        """Ask for the object of ``text`` (optimised as ``vectorised`` says; a :class:`Generated` module's
        text written only where its object is in no cache); its key in :meth:`finish`."""
        key = cache_key(text, vectorised)
        if key in self._out or key in self._todo:
            return key
        obj = _objects.get(key)
        if obj is None:
            obj = _DISK.read(f"{key[:2]}/{key}.o")
        if obj is not None:
            STATS["reused"] += 1
            _objects.put(key, obj)
            self._out[key] = (key, obj, True)
            return key
        if isinstance(text, Generated):
            text = text.text
        self._todo[key] = (text, vectorised)
        if self._parallel:
            if self._batch is None:
                self._bar = tqdm(total=0, desc="compiling kernels", unit="object", delay=1.0, leave=False)
                self._batch = llvm_workers.Batch(compile_text_to_object, self._bar.update, self._expected)
            self._bar.total += 1
            self._batch.submit(text, vectorised)
        return key

    def close(self) -> None:
        """Stop the batch's threads once its queue is drained (what :meth:`finish` does first)."""
        if self._batch is not None:
            self._batch.close()
            self._bar.close()

    def finish(self) -> dict:
        """``{object key: (key, object code, whether it came from a cache)}`` of every text wanted; the
        compiled ones written to the caches."""
        if self._batch is not None:
            objects = self._batch.results()
            self._bar.close()
        elif self._todo:
            objects = []
            with tqdm(total=len(self._todo), desc=f"compiling kernels: {len(self._todo)} objects", unit="object",
                      delay=1.0, leave=False) as bar:
                for text, vectorised in self._todo.values():
                    objects.append(compile_text_to_object(text, vectorised))
                    bar.update()
        else:
            objects = []
        for key, obj in zip(self._todo, objects, strict=True):
            # (atomic, on the writer thread; kept in _objects meanwhile; a cache that cannot be written
            # is skipped)
            _DISK.write_behind(f"{key[:2]}/{key}.o", obj)
            STATS["compiled"] += 1
            _objects.put(key, obj)
            self._out[key] = (key, obj, False)
        return self._out


def compile_text_to_object(text: str, vectorised: bool = False) -> bytes:
    """The object code of module IR ``text`` for the host: parsed, verified, optimised (``optimise``)
    and emitted (what a worker process does too, ``llvm_workers.py``, for kernels: not ``vectorised``)."""
    parsed = llvm.parse_assembly(text)
    parsed.verify()
    optimise(parsed, vectorised)
    return _init()["tm"].emit_object(parsed)


def forget() -> None:
    """Empty this process's caches of compiled code (live modules found by key, object code, module
    texts): the next compile reads the disk cache or compiles, as a new process would. Modules in
    use keep working."""
    disk_cache.flush()  # (what this process wrote is on disk for the next compile to read)
    with _lock:
        _modules.clear()
        _objects.clear()
        _texts.clear()
        _INDEXED.clear()


def _link(keys: list, objects: list, symbols: dict, cached: bool) -> Module:
    """One engine holding ``objects``, whose functions are ``symbols`` (name -> symbol); the in-process
    cache's, when the same objects were linked for the same names before."""
    key = hashlib.sha256("\0".join([*keys, *(f"{n}={s}" for n, s in symbols.items())]).encode()).hexdigest()
    mod = _modules.get(key)
    if mod is not None:
        return mod
    h = _init()
    engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), _machine(h["cpu"], h["features"]))
    for obj in objects:
        engine.add_object_file(llvm.ObjectFileRef.from_data(obj))
    engine.finalize_object()
    mod = _modules[key] = Module(engine, symbols, key, cached)
    STATS["engines"] += 1
    return mod


def optimised_ir(kernels, distinct: bool = False, vector_width: int | None = None) -> str:
    """The optimised LLVM IR of ``kernels`` as text (to check what LLVM made of them: vector types)."""
    with _lock:
        mod = llvm.parse_assembly(str(build_module(list(kernels), distinct, vector_width)))
        optimise(mod)
        return str(mod)


if __name__ == "__main__":  # a worker process of llvm_workers.py
    llvm_workers.serve(compile_text_to_object)
