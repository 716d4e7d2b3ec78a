"""``search=N`` for the compiled CPU backend: time the backend's own alternatives for a binding and
keep the fastest; and, at any ``search``, the one choice no cost model gets right on every machine
(:func:`threads`: our threads or BLAS's, for a binding with a little to cut over them).

How a binding is laid out (``plan.py``) is decided by cost models and thresholds: whether our
threads run the program (BLAS then on one thread) or BLAS keeps its own threads
(``OWN_THREADS_NS``), which generated kernels are cut over the threads (``SPLIT_NS``), which
temps a GEMM reads or writes are stored permuted (``layout.gemm_orders``), the vector width LLVM
vectorises with (``codegen/llvm.py``: on AVX-512 machines it prefers 256 bits), and which GEMM each
product calls, BLAS's or the generated one (``generated_gemm.preferred``). The models are
estimates, measured on a few programs; :class:`Choices` names an alternative to each, its default
being the models' choice. Under ``search=N`` the first call of a new binding lays it out under up
to N choices, the default first, then alternatives that each change one choice of the fastest so
far, likeliest wins first (:data:`STEPS`); each is timed on that call's arrays (:func:`measure`)
and the fastest is kept (one other than the default after a rematch against it: :func:`search`).
Alternatives that cannot differ are not timed: no vector widths without generated code or beyond
the host's, no thread choices on one thread, no layout alternative where the default permutes
nothing, no GEMM choice without a product, no specialised code where no kernel reads a dim, and no
layout identical to one timed already (:func:`_signature`). A specialised layout's objects are
compiled for its binding alone (and disk-cached per shape like any object); the default's serve
every binding.

Winners are cached on disk (the ``compile`` kind, entry ``search/<digest>``): the digest of the default
layout's program (every generated kernel's code, every step's operands), the binding, the host CPU,
its features, the thread count and BLAS's. A later search of the same binding on the same machine lays out
the cached choices at once and times nothing. An entry is data: ``field=value`` pairs parsed against
:class:`Choices`' fields and the values a search can try; anything else is a miss.

The runs read the caller's arrays but write copies of the states a binding writes in place
(``Schedule.written``): on the real arrays every timed run would apply the update (an optimizer
step) again. Every other caller array is only read, so it is not copied (a model's weights may be
gigabytes).
"""

from __future__ import annotations

import dataclasses
import hashlib
import time
from dataclasses import dataclass

import numpy as np
from tqdm import tqdm

from luminal.backends.cpu import blas
from luminal.backends.cpu.parallel import Split, thread_count
from luminal.backends.cpu.steps import Gemm, Kernel, Library, Ref
from luminal.codegen import ir, llvm
from luminal.core.disk_cache import DiskCache


@dataclass(frozen=True)
class Choices:
    """One way to lay a binding out.

    ``threads``: "auto" (the cost model: our threads when the kernels worth cutting add up to
    ``OWN_THREADS_NS``), "own" (ours always, BLAS on one thread) or "blas" (none of ours: BLAS keeps
    its threads, generated code runs on one). ``split_scale``: times ``SPLIT_NS``, the estimated time
    from which a generated kernel is cut over the threads. ``vector_width``: the vector width (bits)
    LLVM should prefer, None for its default. ``gemm_layouts``: store GEMM operands and results
    permuted where the layout model says; False keeps every temp in its logical order.
    ``specialise``: generate code with the binding's dims as constants (fixed trip counts and strides
    for LLVM, one set of objects per binding) instead of kernel parameters (one set for every binding).
    ``gemm``: which GEMM the products call: "auto" (the cost model per product,
    ``generated_gemm.preferred``; BLAS's GEMVs), "blas" or "generated" (``generated_gemm.py`` and
    ``generated_gemv.py``). ``blocks``: run the fusions the planner finds a block at a time (an
    attention a block of query rows: ``attention.py``; a product and the kernel reading it an image:
    ``batched.py``); False: their kernels one after another over everything. ``direct``: run a
    convolution's gathered products as direct convolutions where they apply (``direct_conv.py``);
    False: as the gathered GEMM."""

    threads: str = "auto"
    split_scale: float = 1.0
    vector_width: int | None = None
    gemm_layouts: bool = True
    specialise: bool = False
    gemm: str = "auto"
    blocks: bool = True
    direct: bool = True

    def __str__(self):
        changed = [f"{f.name}={getattr(self, f.name)}" for f in dataclasses.fields(self)
                   if getattr(self, f.name) != f.default]
        return ", ".join(changed) or "default"


DEFAULT = Choices()
# The alternatives in the order they are tried, each a change to the fastest choices so far. Likeliest
# first: the thread choice moves a small program by tens of percent either way (plan.py's
# OWN_THREADS_NS note), 512-bit vectors help wide streaming kernels; cutting more or fewer kernels and
# dropping the GEMM layouts are finer, and 128-bit vectors rarely win.
STEPS = (("threads", "own"), ("threads", "blas"), ("vector_width", 512), ("gemm", "generated"), ("gemm", "blas"),
         ("blocks", False), ("direct", False), ("split_scale", 0.25), ("gemm_layouts", False), ("specialise", True),
         ("split_scale", 4.0), ("vector_width", 128))


@dataclass
class Search:
    """What a search did for one binding: the choices timed with their seconds (in the order timed),
    those skipped for laying the binding out as one timed already, the rematch of the fastest against
    the default (their seconds, when the fastest was not the default) and the choices kept."""

    env: dict
    timed: list  # [(Choices, seconds)]
    skipped: list  # [Choices]
    rematch: tuple | None  # (default's seconds, the fastest's seconds)
    chosen: Choices
    seconds: float  # the whole search, layouts and LLVM compiles included
    cached: bool = False  # the choices came from the disk cache: nothing was timed

    def __str__(self):
        dims = ", ".join(f"{k}={v}" for k, v in self.env.items()) or "no symbolic dims"
        if self.cached:
            return f"cpu search, binding ({dims}): kept {self.chosen}, found in the cache (nothing timed)"
        lines = [f"cpu search, binding ({dims}): {len(self.timed)} candidates timed in {self.seconds:.2f} s, "
                 f"kept: {self.chosen}"]
        for c, s in self.timed:
            lines.append(f"  {_took(s)}  {c}{'  <- kept' if c == self.chosen else ''}")
        if self.skipped:
            lines.append(f"  not timed (the same layout as one timed): {'; '.join(map(str, self.skipped))}")
        if self.rematch is not None:
            lines.append(f"  rematch against the default: {_took(self.rematch[1]).strip()} vs "
                         f"{_took(self.rematch[0]).strip()}")
        return "\n".join(lines)


def _took(s: float) -> str:
    return f"{s * 1e6:8.1f} us" if s < 1e-3 else f"{s * 1e3:8.2f} ms"


def search(make, arrays: dict, n: int, env: dict, default=None) -> tuple:
    """``(binding, Search)``: the fastest of up to ``n`` layouts of the binding ``env``, each made by
    ``make(choices)`` and timed on ``arrays`` (by :func:`measure`); ``default``: the layout under
    :data:`DEFAULT` when the caller has made it already.

    A shared machine's other work can slow one candidate's runs many times over (on 2 busy cores, a
    BLAS thread descheduled mid-GEMM made the MNIST MLP step's runs 40 ms instead of 1 ms for a
    while), so a fastest other than the default must win a rematch, the default and it timed again
    one after the other, before it is kept: a loss against the default costs every later call."""
    t0 = time.perf_counter()
    default = make(DEFAULT) if default is None else default
    key = _key(default, n)
    known = _cached(key)
    if known is not None:
        best = default if known == DEFAULT else make(known)
        return best, Search(dict(env), [], [], None, best.choices, time.perf_counter() - t0, cached=True)
    with tqdm(total=n + 1, desc="cpu search", unit="timing", delay=1.0, leave=False) as bar:  # +1: the rematch
        best = default
        trial = _trial(default, arrays)
        best_s = measure(best, trial)
        last = best
        bar.update()
        timed, skipped, tried, seen = [(DEFAULT, best_s)], [], {DEFAULT}, {_signature(best)}
        for field, value in _steps(best):
            if len(timed) >= n:
                break
            choices = dataclasses.replace(best.choices, **{field: value})
            if choices in tried:
                continue
            tried.add(choices)
            b = make(choices)
            sig = _signature(b)
            if sig in seen:
                skipped.append(choices)
                continue
            seen.add(sig)
            s = _after(last, b, trial)
            last = b
            timed.append((choices, s))
            bar.update()
            if s < best_s:
                best, best_s = b, s
        rematch = None
        if best is not default:
            first = _after(last, default, trial)
            rematch = first, _after(default, best, trial)
            if rematch[1] >= rematch[0]:
                best = default
        bar.update(bar.total - bar.n)
    _DISK.write(key, encode(best.choices).encode())
    return best, Search(dict(env), timed, skipped, rematch, best.choices, time.perf_counter() - t0)


def _trial(binding, arrays: dict) -> dict:
    """The arrays timed runs of ``binding``'s layouts read: the caller's, but copies of the states the
    binding writes in place (``Schedule.written``; the same for every choice), so the runs leave the
    caller's unchanged."""
    trial = dict(arrays)
    for name in binding.schedule.written:
        trial[name] = np.array(arrays[name], copy=True)
    return trial


# seconds OpenBLAS's workers spin after a GEMM on its threads before they sleep (2**28 cycles at 2.5 GHz and
# up; ``threads``): a layout that pins BLAS to one thread and runs ours is timed that long after one that
# left BLAS its threads, or it would share the cores with them
BLAS_SPIN_S = 0.15


def _let_blas_threads_sleep() -> None:
    """Wait out OpenBLAS's spinning workers (:data:`BLAS_SPIN_S`); a function of its own so that a test
    can see the wait without replacing ``time.sleep`` for every thread of the process."""
    time.sleep(BLAS_SPIN_S)


def _after(last, b, arrays: dict) -> float:
    """:func:`measure` of ``b``, timed after the layout ``last`` (:data:`BLAS_SPIN_S`)."""
    if b._threaded and not last._threaded:
        _let_blas_threads_sleep()
    return measure(b, arrays)


# seconds of runs :func:`threads` times each layout for: it runs at a first call, which a warm start
# (the MNIST MLP step from the compile cache: 0.11 s before it) should not double
THREADS_BUDGET_S = 0.012


def threads(make, arrays: dict, env: dict, default, limit_s: float) -> tuple:
    """``(binding, Search)``: of the binding ``env`` laid out as ``default`` (BLAS's threads) and
    under ``threads="own"`` (ours, BLAS on one), the faster on ``arrays``, for a binding whose thread
    choice the cost model leaves to the machine (``plan.OWN_THREADS_NS``, ``Schedule.undecided``).

    Ours are timed first: after a GEMM on its own threads, OpenBLAS's workers spin for about 0.1 s
    (2**28 cycles) before they sleep, and runs on our threads meanwhile share the cores with them (the
    MNIST MLP step on 2 cores: 1.6-2.3 ms for the first 0.14 s after BLAS's threads ran, 0.83-0.9 ms
    after; a run of the steady state has no threaded BLAS call), so timing ours after BLAS's would
    measure that instead (:func:`search` waits :data:`BLAS_SPIN_S` there; this first call does not
    afford it). Not cached: a few runs settle it, and other work on the machine during
    them could make a cached answer wrong for good. When ours take more than ``limit_s`` a run
    (twice: :func:`measure`) the default is kept untimed: the gain would be a small part of a run."""
    t0 = time.perf_counter()
    trial = _trial(default, arrays)
    own = make(dataclasses.replace(default.choices, threads="own"))
    timed = [(own.choices, measure(own, trial, limit_s, budget_s=THREADS_BUDGET_S))]
    best = default
    if timed[0][1] <= limit_s:
        timed.append((default.choices, measure(default, trial, budget_s=THREADS_BUDGET_S)))
        if timed[0][1] < timed[1][1]:
            best = own
    return best, Search(dict(env), timed, [], None, best.choices, time.perf_counter() - t0)


SEARCH_VERSION = 6  # 2: the gemm choice; 3: the blocks choice; 4: the direct choice; 5: n in the key; 6: BLAS's threads
_DISK = DiskCache("compile")


def _searchable() -> dict:
    """{field of :class:`Choices`: the values a search can give it} (what a cache entry may name)."""
    values = {f.name: {getattr(DEFAULT, f.name)} for f in dataclasses.fields(Choices)}
    for field, value in (("threads", "own"), ("threads", "blas"), ("gemm_layouts", False), ("specialise", True),
                         *STEPS):
        values[field].add(value)
    return values


def _key(default, n: int) -> str:
    """The cache entry of a search of up to ``n`` layouts whose default layout is ``default``: its
    program (each generated kernel's code, each step's kind and operands), its binding and the machine
    (module docstring). (``n`` too: a search of 2 found no winner among the layouts a search of 8 times;
    and BLAS's own thread count, which ``LUMINAL_NUM_THREADS`` does not set.)"""
    host = llvm._init()
    h = hashlib.sha256(repr((SEARCH_VERSION, n, host["cpu"], host["features"], thread_count(), blas.threads(),
                             sorted(default.schedule.env.items()))).encode())
    for step in default.schedule.steps:
        h.update(_describe(step).encode())
    return f"search/{h.hexdigest()}"


def _describe(x) -> str:
    """A step or operand as text that another process writes alike for the same program."""
    if isinstance(x, Kernel):
        code = llvm.cache_key(x.kernel.module, True) if isinstance(x.kernel, Library) else \
            hashlib.sha256(ir.fingerprint(x.kernel, positional=True).encode()).hexdigest()
        return f"Kernel({code}, {x.buffers!r}, {x.params!r}, {x.start}, {x.stop})"
    if isinstance(x, Split):
        return "Split[" + "; ".join(", ".join(_describe(s) for s in part) for part in x.parts) + "]"
    if isinstance(x, Ref):
        return f"Ref({x.space!r}, {x.shape}, {x.dtype.str}, {x.strides}, {x.offset})"
    if isinstance(x, np.ndarray):
        return f"array({x.shape}, {x.dtype.str}, {x.strides})"
    if isinstance(x, (tuple, list)):
        return "(" + ", ".join(_describe(a) for a in x) + ")"
    if isinstance(x, (int, float, str, bool, type(None))):
        return repr(x)
    if hasattr(x, "args") and not callable(x.args):
        return f"{type(x).__name__}{_describe(tuple(x.args))}"
    return type(x).__name__


def encode(choices: Choices) -> str:
    """``choices`` as text (``field=repr;...``, every field): a search cache entry's, a checkpoint's."""
    return ";".join(f"{f.name}={getattr(choices, f.name)!r}" for f in dataclasses.fields(choices))


def decode(text: str) -> Choices | None:
    """The :class:`Choices` that :func:`encode` wrote as ``text``, when it names every field once with a
    value a search can try; else None (data from disk is never evaluated)."""
    fields = {f.name for f in dataclasses.fields(Choices)}
    values = {}
    for part in text.split(";"):
        name, _, value = part.partition("=")
        allowed = {repr(v): v for v in _searchable().get(name, ())}
        if name not in fields or name in values or value not in allowed:
            return None
        values[name] = allowed[value]
    return Choices(**values) if set(values) == fields else None


def _cached(key: str) -> Choices | None:
    """The choices cached under ``key`` (:func:`decode`: an entry it does not take is a miss)."""
    raw = _DISK.read(key)
    return None if raw is None else decode(raw.decode("ascii", "replace"))


MEASURE_S = 0.03


def measure(binding, arrays: dict, limit_s: float | None = None, budget_s: float = MEASURE_S) -> float:
    """Median seconds of a run of ``binding`` on ``arrays``: runs for about ``budget_s`` (five to
    fifty; three when one takes 0.1 s or more) after a warm-up run, which also points the binding at
    the arrays; a second run's seconds alone when it and the warm-up each take more than ``limit_s``."""
    t0 = time.perf_counter()
    binding.run(arrays)
    first = time.perf_counter() - t0
    if limit_s is not None and first > limit_s:  # (a first run pays page faults: one more decides)
        t0 = time.perf_counter()
        binding.run(arrays)
        first = time.perf_counter() - t0
        if first > limit_s:
            return first
    # short runs: as many as take about budget_s (a burst of other work on the machine then moves the
    # median less), at least five and at most fifty
    repeats = max(5, min(50, int(budget_s / max(first, 1e-6)))) if first < 0.1 else 3
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        binding.run(arrays)
        times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2]


def _steps(default) -> list:
    """The :data:`STEPS` that can change the binding laid out as ``default`` on this machine: a
    vector width of the host's, when it has more than one and there is generated code; thread
    choices on more than one thread (cutting kernels: if there are generated ones); no GEMM layouts
    where the default permutes some temp; unfused blocks only where the default fuses some; gathered
    GEMMs only where the default runs some direct convolution."""
    s = default.schedule
    threads = thread_count() > 1
    widths = llvm.vector_widths() if s.generated else ()
    ok = {"threads": threads, "split_scale": threads and bool(s.generated),
          "gemm_layouts": bool(s.perms or s.acc_orders),
          "specialise": any(kern.params for kern, _, _ in s.generated), "gemm": _has_gemm(s.steps),
          "blocks": bool(s.blocked), "direct": s.direct > 0}
    return [(f, v) for f, v in STEPS if (v in widths and len(widths) > 1 if f == "vector_width" else ok[f])]


def _signature(b) -> tuple:
    """What of a binding's run its choices can change: its generated kernels and their vector width,
    how its calls are cut over threads, and the temps stored permuted. Two bindings with one signature
    run the same code."""
    s = b.schedule
    cuts = tuple(len(x.parts) if isinstance(x, Split) else 0 for x in s.steps)
    return (s.choices.vector_width if s.generated else None, cuts, tuple(sorted(s.perms.items())),
            tuple(sorted(s.acc_orders.items())), tuple(id(kern) for kern, _, _ in s.generated),
            s.choices.gemm if _has_gemm(s.steps) else None, s.direct)


def _has_gemm(steps) -> bool:
    """Whether ``steps`` (a Split's parts included) make a product that BLAS or the generated GEMM runs."""
    return any(_has_gemm([x for part in st.parts for x in part]) if isinstance(st, Split) else isinstance(st, Gemm)
               for st in steps)
