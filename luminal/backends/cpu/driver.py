"""The generated driver: a binding's native calls, run in order by one native function.

A binding's calls are a Python list, and each costs a trip through the interpreter and ctypes: about
0.4 us for a generated kernel, 1-2 us for an ``np.matmul`` (argument parsing, its dispatch, its
checks). Between the calls that need Python (numpy's copies, index checks, the hand-over of a
``Split`` to the threads, whose parts get runs of their own), every run of native calls becomes one
table that a single generated function walks
(:data:`DRIVER_IR`: the same machine code for every program, compiled once and disk-cached like the
kernels):

- a **kernel** entry calls the generated kernel's function with its pointer array, its parameters
  and its item range (``codegen/llvm.py``'s ABI);
- a **GEMM** entry calls BLAS by its C symbol (OpenBLAS's ``cblas_sgemm`` / ``cblas_dgemm`` in
  numpy's bundled library, 64-bit integers), or the generated GEMM of the same signature
  (``generated_gemm.py``: which one is a schedule choice, :func:`build`), once per batch, where
  ``np.matmul`` would have: a float32 or float64 product whose operands each have a unit stride
  along one of their two axes, and whose batch axes merge into one.

Operands are read through *cells*: a pointer-sized slot holding an array's base address, plus a byte
offset. A caller array's cell is one of the binding's pointer slots, written by its rebind (as a
kernel's pointer array is), so a new caller array changes no table.

- a **GEMV** entry calls ``cblas_?gemv`` for such a product with one row or one column (a batch-1
  Linear, a decode step's products): OpenBLAS's GEMM runs those several times slower than its GEMV,
  which is what ``np.matmul`` calls for them. With ``gemm="generated"`` it calls the generated GEMV
  (``generated_gemv.py``) instead.

One entry is :data:`WORDS` 64-bit words:

| kind      | words
|-----------|------
| 0 kernel  | kind, function, pointer array, parameters, start, stop
| 1, 2 GEMM | kind (1: float32, 2: float64), cblas function, trans a, trans b, M, N, K,
|           | a cell, a offset, lda, b cell, b offset, ldb, c cell, c offset, ldc,
|           | batches, a batch stride, b batch stride, c batch stride (strides and offsets in bytes)
| 3, 4 GEMV | kind (3: float32, 4: float64), cblas function, trans, rows, columns, matrix cell, offset,
|           | leading dimension, x cell, offset, increment, y cell, offset, increment,
|           | batches, matrix batch stride, x batch stride, y batch stride
"""

from __future__ import annotations

import ctypes
import functools
import itertools

import numpy as np

from luminal.backends.cpu import blas, generated_gemm, generated_gemv
from luminal.backends.cpu import native_team as nt
from luminal.backends.cpu.parallel import Split
from luminal.backends.cpu.steps import Gemm
from luminal.codegen import llvm

KERNEL_WORDS = ("kind", "fn", "ptrs", "params", "start", "stop")
GEMM_WORDS = ("kind", "fn", "ta", "tb", "m", "n", "k", "ac", "ao", "lda", "bc", "bo", "ldb", "cc", "co", "ldc",
              "nb", "as", "bs", "cs")  # the table above, one name per word (the IR loads them by these names)
GEMV_WORDS = ("kind", "fn", "trans", "m", "n", "ac", "ao", "lda", "xc", "xo", "incx", "yc", "yo", "incy",
              "nb", "as", "xs", "ys")
SPLIT_WORDS = ("kind", "team", "parts", "tables")  # tables: the address of (table, count) per part
WORDS = max(len(KERNEL_WORDS), len(GEMM_WORDS), len(GEMV_WORDS), len(SPLIT_WORDS))
KERNEL, SGEMM, DGEMM, SGEMV, DGEMV, SPLIT = 0, 1, 2, 3, 4, 5
ROW_MAJOR, NO_TRANS, TRANS = 101, 111, 112  # CBLAS_ORDER, CBLAS_TRANSPOSE

DRIVER = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64)


def _entry_loads(label: str, words: tuple) -> str:
    """The IR loading an entry's ``words`` (the kind, word 0, is read already) as ``%{label}.{word}``."""
    return "\n".join(f"  %{label}.{n}.p = getelementptr i64, ptr %e, i64 {i}\n"
                     f"  %{label}.{n} = load i64, ptr %{label}.{n}.p" for i, n in enumerate(words) if i)


def _batched_block(label: str, words: tuple, operands: tuple, before: str, call: str) -> str:
    """The IR of a BLAS entry: its ``words`` loaded; each operand's start (``(name, cell word, offset
    word, batch stride word)``: the address its cell holds plus its offset), ``before`` (the entry's
    other set-up); then ``call`` once per batch, each operand advanced by its batch stride (the call
    reads operand ``x`` as ``%{label}.xp``)."""
    loads = _entry_loads(label, words)
    starts = "\n".join(f"  %{label}.{x}cell = inttoptr i64 %{label}.{cell} to ptr\n"
                       f"  %{label}.{x}base = load i64, ptr %{label}.{x}cell\n"
                       f"  %{label}.{x}0 = add i64 %{label}.{x}base, %{label}.{off}" for x, cell, off, _ in operands)
    steps = "\n".join(f"  %{label}.{x}o.j = mul i64 %{label}.j, %{label}.{stride}\n"
                      f"  %{label}.{x}i = add i64 %{label}.{x}0, %{label}.{x}o.j\n"
                      f"  %{label}.{x}p = inttoptr i64 %{label}.{x}i to ptr" for x, _, _, stride in operands)
    return f"""{label}:
{loads}
  %{label}.f = inttoptr i64 %{label}.fn to ptr
{before}
{starts}
  br label %{label}.head
{label}.head:
  %{label}.j = phi i64 [ 0, %{label} ], [ %{label}.j1, %{label}.call ]
  %{label}.more = icmp slt i64 %{label}.j, %{label}.nb
  br i1 %{label}.more, label %{label}.call, label %next
{label}.call:
{steps}
  {call}
  %{label}.j1 = add i64 %{label}.j, 1
  br label %{label}.head
"""


def _gemm_block(label: str, fp: str) -> str:
    """The IR of a GEMM entry of ``fp`` (float or double): its batch loop around one cblas call."""
    before = f"  %{label}.ta32 = trunc i64 %{label}.ta to i32\n  %{label}.tb32 = trunc i64 %{label}.tb to i32"
    call = (f"call void %{label}.f(i32 {ROW_MAJOR}, i32 %{label}.ta32, i32 %{label}.tb32, i64 %{label}.m, "
            f"i64 %{label}.n, i64 %{label}.k, {fp} 1.0, ptr %{label}.ap, i64 %{label}.lda, ptr %{label}.bp, "
            f"i64 %{label}.ldb, {fp} 0.0, ptr %{label}.cp, i64 %{label}.ldc)")
    operands = (("a", "ac", "ao", "as"), ("b", "bc", "bo", "bs"), ("c", "cc", "co", "cs"))
    return _batched_block(label, GEMM_WORDS, operands, before, call)


def _gemv_block(label: str, fp: str) -> str:
    """The IR of a GEMV entry of ``fp`` (float or double): its batch loop around one cblas call."""
    before = f"  %{label}.t32 = trunc i64 %{label}.trans to i32"
    call = (f"call void %{label}.f(i32 {ROW_MAJOR}, i32 %{label}.t32, i64 %{label}.m, i64 %{label}.n, {fp} 1.0, "
            f"ptr %{label}.ap, i64 %{label}.lda, ptr %{label}.xp, i64 %{label}.incx, {fp} 0.0, ptr %{label}.yp, "
            f"i64 %{label}.incy)")
    operands = (("a", "ac", "ao", "as"), ("x", "xc", "xo", "xs"), ("y", "yc", "yo", "ys"))
    return _batched_block(label, GEMV_WORDS, operands, before, call)



def _slot_word(name: str, slot: str, offset: int) -> str:
    return f"  %{name} = getelementptr i8, ptr %{slot}, i64 {offset}"


_SLOTS = "\n".join(_slot_word(n, "slot", o) for n, o in (
    ("table", nt.TABLE), ("count", nt.COUNT), ("claim", nt.CLAIM), ("done", nt.DONE), ("wsleeps", nt.WORKER_SLEEPS),
    ("dsleeps", nt.DRIVER_SLEEPS), ("ready", nt.READY)))


def _slot(w: str) -> str:
    """The IR that points ``%slot`` (and its words, ``_SLOTS``) at worker ``%{w}``'s slot of ``%team``."""
    return (f"  %slot.at = mul i64 %{w}, {nt.SLOT}\n  %slot.off = add i64 %slot.at, {nt.HEADER}\n"
            f"  %slot = getelementptr i8, ptr %team, i64 %slot.off\n{_SLOTS}")


# The team's protocol (``native_team.py``): a split's parts posted to native workers, run, awaited.
_TEAM_IR = f"""
declare void @llvm.x86.sse2.pause()

define internal void @luminal_futex(ptr %team, ptr %word, i64 %op, i32 %val) {{
entry:
  %sys.p = getelementptr i8, ptr %team, i64 {nt.SYSCALL}
  %sys = load i64, ptr %sys.p
  %f = inttoptr i64 %sys to ptr
  %v = zext i32 %val to i64
  %r = call i64 (i64, ...) %f(i64 {nt.SYS_FUTEX}, ptr %word, i64 %op, i64 %v, ptr null)
  ret void
}}

; wait until *word != old (spinning, then asleep with *sleeps set): its new value
define internal i32 @luminal_await(ptr %team, ptr %word, i32 %old, ptr %sleeps) {{
entry:
  %spin.p = getelementptr i8, ptr %team, i64 {nt.SPINS}
  %spin = load i64, ptr %spin.p
  br label %round
round:
  br label %head
head:
  %i = phi i64 [ 0, %round ], [ %i1, %pause ]
  %v = load atomic i32, ptr %word acquire, align 4
  %new = icmp ne i32 %v, %old
  br i1 %new, label %got, label %more
more:
  %go = icmp slt i64 %i, %spin
  br i1 %go, label %pause, label %sleep
pause:
  call void @llvm.x86.sse2.pause()
  %i1 = add i64 %i, 1
  br label %head
got:
  ret i32 %v
sleep:
  store atomic i32 1, ptr %sleeps seq_cst, align 4
  %v2 = load atomic i32, ptr %word seq_cst, align 4
  %new2 = icmp ne i32 %v2, %old
  br i1 %new2, label %woke, label %wait
wait:
  call void @luminal_futex(ptr %team, ptr %word, i64 {nt.FUTEX_WAIT_PRIVATE}, i32 %old)
  store atomic i32 0, ptr %sleeps seq_cst, align 4
  br label %round
woke:
  store atomic i32 0, ptr %sleeps seq_cst, align 4
  ret i32 %v2
}}

; *word = v, and wake its sleeper (whose flag is *sleeps)
define internal void @luminal_publish(ptr %team, ptr %word, i32 %v, ptr %sleeps) {{
entry:
  store atomic i32 %v, ptr %word seq_cst, align 4
  %s = load atomic i32, ptr %sleeps seq_cst, align 4
  %asleep = icmp ne i32 %s, 0
  br i1 %asleep, label %wake, label %out
wake:
  call void @luminal_futex(ptr %team, ptr %word, i64 {nt.FUTEX_WAKE_PRIVATE}, i32 1)
  br label %out
out:
  ret void
}}

; part p of a split: its (table, count) at parts[2p], run by the driver
define internal void @luminal_part(ptr %parts, i64 %p) {{
entry:
  %ti = mul i64 %p, 2
  %tp = getelementptr i64, ptr %parts, i64 %ti
  %t = load i64, ptr %tp
  %ci = add i64 %ti, 1
  %cp = getelementptr i64, ptr %parts, i64 %ci
  %c = load i64, ptr %cp
  %table = inttoptr i64 %t to ptr
  call void @luminal_driver(ptr %table, i64 %c)
  ret void
}}

define internal void @luminal_split(ptr %team, i64 %n, ptr %parts) {{
entry:
  %live.p = getelementptr i8, ptr %team, i64 {nt.LIVE}
  %live = load atomic i64, ptr %live.p acquire, align 8
  %need = sub i64 %n, 1
  %enough = icmp sge i64 %live, %need
  br i1 %enough, label %take, label %serial
take:
  %cx = cmpxchg ptr %team, i32 0, i32 1 seq_cst seq_cst, align 4
  %got = extractvalue {{ i32, i1 }} %cx, 1
  br i1 %got, label %post, label %serial
serial:
  %sp = phi i64 [ 0, %entry ], [ 0, %take ], [ %sp1, %serial.next ]
  %smore = icmp slt i64 %sp, %n
  br i1 %smore, label %serial.next, label %out
serial.next:
  call void @luminal_part(ptr %parts, i64 %sp)
  %sp1 = add i64 %sp, 1
  br label %serial
post:
  %pw = phi i64 [ 0, %take ], [ %pw1, %posting ]
  %pmore = icmp slt i64 %pw, %need
  br i1 %pmore, label %posting, label %mine
posting:
  %pw1 = add i64 %pw, 1
  %pt.i = mul i64 %pw1, 2
  %pt.p = getelementptr i64, ptr %parts, i64 %pt.i
  %pt = load i64, ptr %pt.p
  %pc.i = add i64 %pt.i, 1
  %pc.p = getelementptr i64, ptr %parts, i64 %pc.i
  %pc = load i64, ptr %pc.p
  call void @luminal_post(ptr %team, i64 %pw, i64 %pt, i64 %pc)
  br label %post
mine:
  call void @luminal_part(ptr %parts, i64 0)
  br label %await
await:
  %aw = phi i64 [ 0, %mine ], [ %aw1, %awaiting ]
  %amore = icmp slt i64 %aw, %need
  br i1 %amore, label %awaiting, label %free
awaiting:
  call void @luminal_steal_or_join(ptr %team, i64 %aw, ptr %parts)
  %aw1 = add i64 %aw, 1
  br label %await
free:
  store atomic i32 0, ptr %team release, align 4
  br label %out
out:
  ret void
}}

; hand (table, count) to worker w: its table and count, then its next generation
define internal void @luminal_post(ptr %team, i64 %w, i64 %t, i64 %c) {{
entry:
{_slot("w")}
  store i64 %t, ptr %table
  store i64 %c, ptr %count
  %g0 = load atomic i32, ptr %slot monotonic, align 4
  %g1 = add i32 %g0, 1
  call void @luminal_publish(ptr %team, ptr %slot, i32 %g1, ptr %wsleeps)
  ret void
}}

; the part posted to worker w last (part w + 1 of %parts): run it here if the worker has not claimed it,
; else wait for the worker to finish it (its done word leaves the generation before)
define internal void @luminal_steal_or_join(ptr %team, i64 %w, ptr %parts) {{
entry:
{_slot("w")}
  %g = load atomic i32, ptr %slot monotonic, align 4
  %before = sub i32 %g, 1
  %cx = cmpxchg ptr %claim, i32 %before, i32 %g seq_cst seq_cst, align 4
  %stolen = extractvalue {{ i32, i1 }} %cx, 1
  br i1 %stolen, label %run, label %join
run:
  %p = add i64 %w, 1
  call void @luminal_part(ptr %parts, i64 %p)
  store atomic i32 %g, ptr %done release, align 4
  ret void
join:
  %d = call i32 @luminal_await(ptr %team, ptr %done, i32 %before, ptr %dsleeps)
  ret void
}}

; worker w of the team: forever, await a generation, claim it (unless the driver has: then await the
; next), run its part, publish it as done
define void @luminal_worker(ptr %team, i64 %w) {{
entry:
{_slot("w")}
  %g0 = load atomic i32, ptr %slot acquire, align 4
  store atomic i32 1, ptr %ready seq_cst, align 4
  br label %loop
loop:
  %seen = phi i32 [ %g0, %entry ], [ %g, %loop ], [ %g, %run ]
  %g = call i32 @luminal_await(ptr %team, ptr %slot, i32 %seen, ptr %wsleeps)
  %before = sub i32 %g, 1
  %cx = cmpxchg ptr %claim, i32 %before, i32 %g seq_cst seq_cst, align 4
  %mine = extractvalue {{ i32, i1 }} %cx, 1
  br i1 %mine, label %run, label %loop
run:
  %t = load i64, ptr %table
  %c = load i64, ptr %count
  %tp = inttoptr i64 %t to ptr
  call void @luminal_driver(ptr %tp, i64 %c)
  call void @luminal_publish(ptr %team, ptr %done, i32 %g, ptr %dsleeps)
  br label %loop
}}
"""

DRIVER_IR = f"""; luminal's generated driver (backends/cpu/driver.py): runs a table of kernel and GEMM entries
define void @luminal_driver(ptr %table, i64 %count) {{
entry:
  br label %head
head:
  %i = phi i64 [ 0, %entry ], [ %i1, %next ]
  %more = icmp slt i64 %i, %count
  br i1 %more, label %body, label %exit
body:
  %at = mul i64 %i, {WORDS}
  %e = getelementptr i64, ptr %table, i64 %at
  %kind = load i64, ptr %e
  switch i64 %kind, label %next [ i64 {KERNEL}, label %kernel
                                  i64 {SGEMM}, label %sgemm
                                  i64 {DGEMM}, label %dgemm
                                  i64 {SGEMV}, label %sgemv
                                  i64 {DGEMV}, label %dgemv
                                  i64 {SPLIT}, label %split ]
kernel:
{_entry_loads("kernel", KERNEL_WORDS)}
  %kernel.f = inttoptr i64 %kernel.fn to ptr
  %kernel.b = inttoptr i64 %kernel.ptrs to ptr
  %kernel.q = inttoptr i64 %kernel.params to ptr
  call void %kernel.f(ptr %kernel.b, ptr %kernel.q, i64 %kernel.start, i64 %kernel.stop)
  br label %next
{_gemm_block("sgemm", "float")}
{_gemm_block("dgemm", "double")}
{_gemv_block("sgemv", "float")}
{_gemv_block("dgemv", "double")}
split:
{_entry_loads("split", SPLIT_WORDS)}
  %split.t = inttoptr i64 %split.team to ptr
  %split.q = inttoptr i64 %split.tables to ptr
  call void @luminal_split(ptr %split.t, i64 %split.parts, ptr %split.q)
  br label %next
next:
  %i1 = add i64 %i, 1
  br label %head
exit:
  ret void
}}
{_TEAM_IR}"""

def driver():
    """The driver as a ctypes function ``f(table address, entry count)`` (compiled on first use)."""
    return _compiled()[1]


def worker():
    """A native team's worker as a ctypes function ``f(team address, worker index)``: it never returns
    (``native_team.py``)."""
    return _compiled()[2]


@functools.cache
def _compiled() -> tuple:
    """``(module, driver, worker)``: the module keeps the functions' code alive."""
    mod = llvm.compile_text(DRIVER_IR, ["luminal_driver", "luminal_worker"])
    return mod, DRIVER(mod.address("luminal_driver")), DRIVER(mod.address("luminal_worker"))


def companions(steps: list, gemm: str = "auto", blas_threads: int = 1, parts: int = 1) -> list[tuple]:
    """``(module IR text or ``llvm.Generated`` module, vectorised by hand)`` of the modules a binding's
    driver tables may call (:func:`build`, over ``steps``, the plan's steps before they are cut over
    threads): the driver's own, and the generated GEMM or GEMV per dtype where :func:`_gemm_entry` would choose it, each
    product as BLAS sees it (a column-major result: its transpose), on ``blas_threads``; with
    ``parts`` > 1 (a threaded run, whose products may be cut by rows or columns), each part's too.
    Compiled on first use, each would wait for the kernels' objects and then take its own turn (the
    float32 GEMM: 0.4 s); a cold program's planner has them compiled beside the kernels instead
    (``llvm.compile_kernels``' ``also``). A prediction: one missed is compiled at its first use as
    before, one not used cost CPU time beside the kernels and is cached."""
    out = {DRIVER_IR: False}
    for step in steps:
        if not isinstance(step, Gemm) or step.out.dtype not in generated_gemm.DTYPES or len(step.out.shape) < 2:
            continue
        c, dtype, k = step.out, step.out.dtype, step.a.shape[-1]
        (m, n), (csr, csc) = c.shape[-2:], c.strides[-2:]
        layout = _matrix(m, n, csr, csc, dtype.itemsize)
        if layout is None or 0 in c.shape or k == 0:
            continue  # (numpy's call, or nothing to compute)
        if layout[0] == TRANS:
            m, n = n, m
        if m == 1 or n == 1:
            if gemm == "generated":
                out[generated_gemv.module(dtype)] = True
            continue
        shapes = [(m, n)] + ([(-(-m // parts), n), (m, -(-n // parts))] if parts > 1 else [])
        if gemm == "generated" or (gemm == "auto" and any(generated_gemm.preferred(dtype, mm, nn, k, blas_threads)
                                                           for mm, nn in shapes)):
            out[generated_gemm.module(dtype)] = True
    return list(out.items())


def build(calls: list, cell, gemm: str = "auto", blas_threads: int = 1,
          native_splits: bool | None = None) -> tuple[list, list]:
    """``calls`` (a binding's steps, ``steps.py``, each unpacking as ``(function, args)``) with each run
    of native calls (generated kernels, GEMMs the driver can call) replaced by one call of the driver,
    within each thread's part of a :class:`Split` too, and the tables those calls read (the caller
    keeps them alive).
    ``cell(x)``: ``(cell address, byte offset)`` of an operand ``x`` (a ``steps.Ref``, or an array).
    ``gemm``: which GEMM a product calls: "blas", "generated" (``generated_gemm.py``) or "auto" (its
    cost model, per product: ``generated_gemm.preferred``); ``blas_threads``: the threads BLAS runs
    on outside the parts of a Split (which run on one each). ``native_splits``: a Split whose parts
    are all native calls becomes a split entry of the driver's table, run on the native team
    (``native_team.py``); default: where the team can run (``native_team.available``)."""
    if native_splits is None:
        native_splits = nt.available()
    kernel_type, fns = llvm.CFUNC, (blas.gemms(), blas.gemvs())
    out, tables, run = [], [], []
    addresses: dict = {}  # id(kernel function) -> its address (the functions live in ``calls``)

    def close():
        if run:
            table = (ctypes.c_int64 * (WORDS * len(run)))(*itertools.chain.from_iterable(run))
            tables.append(table)
            out.append((driver(), (ctypes.c_void_p(ctypes.addressof(table)), ctypes.c_int64(len(run)))))
            run.clear()

    for f, args in calls:
        entry = None
        if isinstance(f, Split):  # each thread's part: runs of its own
            parts = []
            for part in f.parts:
                part_calls, part_tables = build(part, cell, gemm, 1)
                parts.append(part_calls)
                tables += part_tables
            entry = _split_entry(parts, tables) if native_splits else None
            if entry is not None:  # all native: the driver runs it on the native team, in this run
                run.append(entry + [0] * (WORDS - len(entry)))
                continue
            close()
            out.append((Split(parts), args))
            continue
        if isinstance(f, kernel_type):
            fn = addresses.get(id(f))  # (the calls of one kernel: its address looked up once)
            if fn is None:
                fn = addresses[id(f)] = ctypes.cast(f, ctypes.c_void_p).value
            entry = _kernel_entry(fn, args)
        elif f is np.matmul and len(args) == 3:
            entry = _gemm_entry(*args, fns, cell, gemm, blas_threads)
        if entry is None:
            close()
            out.append((f, args))
        elif entry:  # (an empty entry: a product with nothing to compute)
            run.append(entry + [0] * (WORDS - len(entry)))
    close()
    return out, tables


def _split_entry(parts: list, tables: list) -> list | None:
    """The split entry of a Split whose ``parts`` (each thread's calls, built) are each one call of the
    driver or none, or None: its part list, ``(table address, count)`` per part, joins ``tables``."""
    driven = driver()
    if not 2 <= len(parts) <= nt.MAX_WORKERS + 1 or any(len(p) > 1 or (p and p[0][0] is not driven) for p in parts):
        return None  # (more parts than the team can have workers: Python's threads)
    words = []
    for p in parts:
        words += [p[0][1][0].value, p[0][1][1].value] if p else [0, 0]
    part_list = (ctypes.c_int64 * len(words))(*words)
    tables.append(part_list)
    return _words(SPLIT_WORDS, kind=SPLIT, team=nt.ensure(len(parts) - 1, worker()), parts=len(parts),
                  tables=ctypes.addressof(part_list))


def _kernel_entry(fn: int, args) -> list:
    """The entry of a call of the kernel at address ``fn``; ``args``: the addresses of its pointer and
    parameter arrays and its item range, as ints or as ctypes objects (``.value``)."""
    p, q, lo, hi = args if type(args[0]) is int else [x.value or 0 for x in args]
    return [KERNEL, fn, p, q, lo, hi]  # (KERNEL_WORDS's order)


def _words(names: tuple, **values) -> list:
    """An entry's words in the order ``names`` gives them."""
    return [values[n] for n in names]


def _matrix(rows: int, cols: int, sr: int, sc: int, item: int):
    """``(transpose, leading dimension)`` for cblas (row-major) of a ``rows x cols`` matrix with byte
    strides ``(sr, sc)``, or None when neither axis has a unit stride (or the other overlaps it).
    A size-1 axis may have any stride."""
    if (cols == 1 or sc == item) and (rows == 1 or (sr % item == 0 and sr // item >= cols)):
        return NO_TRANS, sr // item if rows > 1 else max(1, cols)
    if (rows == 1 or sr == item) and (cols == 1 or (sc % item == 0 and sc // item >= rows)):
        return TRANS, sc // item if cols > 1 else max(1, rows)
    return None


def _batches(out_batch: tuple, strides: list):
    """``(count, stride per operand)`` of the batch axes ``out_batch`` (each operand's byte strides
    along them) merged into one, or None when they do not merge. Axes of size 1 drop out."""
    axes = [i for i, n in enumerate(out_batch) if n != 1]
    count = 1
    for n in out_batch:
        count *= n
    if not axes:
        return count, [0] * len(strides)
    for i, j in zip(axes, axes[1:]):
        if any(s[i] != s[j] * out_batch[j] for s in strides):
            return None
    return count, [s[axes[-1]] for s in strides]


def _shares(x, y) -> bool:
    """Whether two operands (arrays, or ``steps.Ref`` views: of one space, byte ranges that meet) may
    share memory."""
    if isinstance(x, np.ndarray) and isinstance(y, np.ndarray):
        return np.may_share_memory(x, y)
    if isinstance(x, np.ndarray) or isinstance(y, np.ndarray) or x.space != y.space:
        return False
    return _span(x)[0] < _span(y)[1] and _span(y)[0] < _span(x)[1]


def _span(r) -> tuple:
    """``[first byte, end byte)`` of a Ref's elements within its space."""
    lo = hi = r.offset
    for n, s in zip(r.shape, r.strides):
        if s < 0:
            lo += (n - 1) * s
        else:
            hi += (n - 1) * s
    return lo, hi + r.itemsize


def _gemm_entry(a, b, c, fns, cell, gemm: str = "auto", blas_threads: int = 1):
    """The entry of ``np.matmul(a, b, out=c)`` (``fns``: the cblas GEMMs and GEMVs by dtype): a GEMV's
    for a product with one row or one column, a GEMM's otherwise (BLAS's or the generated one, as
    ``gemm`` says: see :func:`build`); ``[]`` when there is nothing to compute; None where the driver
    cannot make this call (numpy keeps it): another dtype, no unit stride, an empty contraction (numpy
    writes zeros), batch axes that do not merge, an output that overlaps an operand."""
    dtype = c.dtype
    if dtype not in generated_gemm.DTYPES or a.dtype != dtype or b.dtype != dtype or len(a.shape) < 2 \
            or len(b.shape) < 2:
        return None
    if any(_shares(x, c) for x in (a, b)):
        return None  # BLAS would read what it writes; np.matmul copies first (the memory plan never does this)
    *batch, m, n = c.shape
    k = a.shape[-1]
    if 0 in c.shape:
        return []
    if k == 0:
        return None
    item = dtype.itemsize
    strides = []
    for x in (a, b, c):  # batch strides, right-aligned; a broadcast (size-1 or missing) axis reads stride 0
        nb = len(x.shape) - 2
        own = [0] * (len(batch) - nb) + [s if d != 1 else 0 for d, s in zip(x.shape[:nb], x.strides[:nb])]
        strides.append(own)
    merged = _batches(tuple(batch), strides)
    if merged is None:
        return None
    count, (abs_, bbs, cbs) = merged
    (asr, asc), (bsr, bsc), (csr, csc) = (x.strides[-2:] for x in (a, b, c))
    out = _matrix(m, n, csr, csc, item)
    if out is None:
        return None
    if out[0] == TRANS:  # a column-major result: compute its transpose, b.T @ a.T, row-major
        (a, asr, asc, abs_), (b, bsr, bsc, bbs) = (b, bsc, bsr, bbs), (a, asc, asr, abs_)
        m, n, csr, csc = n, m, csc, csr
    la, lb, lc = _matrix(m, k, asr, asc, item), _matrix(k, n, bsr, bsc, item), _matrix(m, n, csr, csc, item)
    if la is None or lb is None or lc is None or lc[0] != NO_TRANS:
        return None
    (ac, ao), (bc, bo), (cc, co) = cell(a), cell(b), cell(c)
    if m == 1 or n == 1:  # a GEMV: BLAS's, or the generated one where asked (no cost model: they tie)
        gemv = generated_gemv.gemv(dtype) if gemm == "generated" else fns[1].get(dtype)
        if gemv is None:
            return None  # (numpy calls its own BLAS)
        # y = op(matrix) @ x: one row of c is b's columns against a's row; one column, a's rows against b's
        if m == 1:  # b is (k, n), stored as is (ld lb) or as its transpose (n, k)
            matrix = (TRANS, k, n) if lb[0] == NO_TRANS else (NO_TRANS, n, k)
            mat, x, y = (bc, bo, lb[1], bbs), (ac, ao, asc // item if k > 1 else 1, abs_), (cc, co, 1, cbs)
        else:  # a is (m, k), stored as is or as its transpose (k, m)
            matrix = (NO_TRANS, m, k) if la[0] == NO_TRANS else (TRANS, k, m)
            mat, x, y = (ac, ao, la[1], abs_), (bc, bo, bsr // item if k > 1 else 1, bbs), (cc, co, csr // item, cbs)
        (trans, rows, cols), (mc, mo, ld, ms), (xc, xo, incx, xs), (yc, yo, incy, ys) = matrix, mat, x, y
        return _words(GEMV_WORDS, kind=SGEMV if dtype == np.float32 else DGEMV, fn=gemv, trans=trans, m=rows,
                      n=cols, ac=mc, ao=mo, lda=ld, xc=xc, xo=xo, incx=incx, yc=yc, yo=yo, incy=incy, nb=count,
                      **{"as": ms}, xs=xs, ys=ys)
    generated = gemm == "generated" or (gemm == "auto" and generated_gemm.preferred(dtype, m, n, k, blas_threads))
    if not generated and dtype not in fns[0]:
        return None  # (numpy calls its own BLAS)
    fn = generated_gemm.gemm(dtype) if generated else fns[0][dtype]
    return _words(GEMM_WORDS, kind=SGEMM if dtype == np.float32 else DGEMM, fn=fn, ta=la[0], tb=lb[0], m=m, n=n,
                  k=k, ac=ac, ao=ao, lda=la[1], bc=bc, bo=bo, ldb=lb[1], cc=cc, co=co, ldc=lc[1], nb=count,
                  **{"as": abs_}, bs=bbs, cs=cbs)
