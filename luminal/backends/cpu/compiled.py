"""The compiled CPU backend: runs a kernel graph as a short list of precomputed calls, most of them
one call of generated code.

For each binding of the symbolic dims, planning (``plan.py``) makes the binding's schedule without
touching memory: every kernel lowered (``lowering.py``: elementwise, reduce, gather and scatter_add
kernels and matmul epilogues to kernels of the IR, ``codegen/lowering``, compiled by
``codegen/llvm.py``; GEMMs to BLAS), typed steps (``steps.py``) over views of caller arrays and of the
storages it lists. The kernels' code is generic in the symbolic dims and made once per program for
every binding and every trip of a rolled body that places its buffers alike, so a new binding
compiles nothing it has compiled before. A :class:`Binding` then does the rest: it allocates the
storages (temps in the memory plan's slots, scratch, constants), makes each generated kernel's
pointer and parameter arrays, turns each stretch of native steps into one call of the generated
driver (``driver.py``: kernels and cblas GEMMs in order, in native code), and on each call rebinds
the caller's arrays; a run is ``for f, args in _exec: f(*args)`` over a handful of calls: no graph
walking, no allocation on the hot path. :meth:`Binding.run_steps` runs the same steps from Python
instead. The kernel graph's calls of rolled loop bodies are expanded into their kernels first (once
per program).

Caller arrays (inputs, states, random draws) are read in place, not copied: the numpy calls that
read them hold their views, the generated kernels a slot of their pointer array and the driver's
GEMMs a cell, all redone only when a name's array object differs from the previous run's (a State's
array stays the same object across steps, so in steady state nothing is rebuilt).

``LUMINAL_CPU_GUARD=1`` (read once, at import) is guard mode (``guard.py``): every storage between
guard bytes, each call on guarded copies of the caller's arrays, each step its own call of the driver,
and after each one the guards checked, so an out-of-bounds write raises ``guard.GuardError`` naming the
storage and the step. It is chosen per binding when it is made; without it a binding's runs do no
per-call work for it.
"""
from __future__ import annotations

import contextlib
import ctypes
import time
from collections import OrderedDict
from collections.abc import Callable

import numpy as np

from luminal.backends.cpu import blas, driver, guard, native_team, steps, tune
from luminal.backends.cpu.fold import fold_batch_sums
from luminal.backends.cpu.outer import outer_products
from luminal.backends.cpu.parallel import Split
from luminal.backends.cpu.plan import Schedule, fresh, plan, same, written
from luminal.backends.cpu.steps import Kernel, Ref
from luminal.codegen import llvm
from luminal.core.gc_paused import gc_paused
from luminal.core.interrupts import interruptible
from luminal.core.kernel_graph import MemoryPlan, dims_needed, expand_calls

MAX_BINDINGS = 8  # bindings kept per program (each holds all of its buffers)
# An undecided binding (plan.OWN_THREADS_NS) whose first two runs on our threads each take longer keeps
# BLAS's: on a quiet machine ours could gain about the kernels worth cutting (under 1 ms), a few percent
# of such a run, while timing both would cost the first call tens of runs (``tune.threads``)
UNDECIDED_LIMIT_S = 0.02
_NO_CONTEXT = contextlib.nullcontext()
_NONE = frozenset()
_NATIVE = (llvm.CFUNC, driver.DRIVER)  # calls that run generated code only (and BLAS, the driver's)


class CpuProgram:
    """``prog(arrays, env) -> (outputs, updates)``: ``arrays`` maps every input/state/random buffer's
    name to its array, ``env`` binds the symbolic dims. ``outputs`` are fresh C-contiguous arrays
    (the caller keeps them); ``updates`` are the values for ``kg.updates`` in order, possibly views
    of internal buffers that the next run overwrites: copy them right away; None for one the run
    wrote into the state's array itself (nothing to copy).

    ``search``: lay each new binding out under up to this many :class:`~luminal.backends.cpu.tune.Choices`
    and keep the fastest on its first call's arrays (``tune.py``; 0 or 1: the cost models' choices,
    but for a binding whose thread choice the model leaves to the machine, ``Schedule.undecided``:
    that first call times it on BLAS's threads and on ours, ``tune.threads``, unless a run takes longer
    than ``UNDECIDED_LIMIT_S``). Every new binding is searched: a program whose dims take many values
    pays it at each."""

    def __init__(self, kg, plan: MemoryPlan, search: int = 0, time_undecided: bool = True):
        self.kg, self.plan = outer_products(fold_batch_sums(kg, plan.slot_of)), plan
        self.dims = tuple(kg.dims) or dims_needed(kg)
        self.search = search
        self.time_undecided = time_undecided  # (False: the compiler's timing of candidate programs, ``Cpu.time``)
        self.searches: OrderedDict = OrderedDict()  # binding key -> its tune.Search, for the bindings kept
        self._bindings: OrderedDict = OrderedDict()
        self._untimed: set = set()  # keys of bindings laid out but not yet timed (by ``search`` or undecided)
        self._kernels: list | None = None  # kg's kernels with the calls expanded, at the first binding
        self._memo: dict = {}  # generated kernels by template and placements, for every binding (lowering.py)
        # what laying bindings out cost (``_count``): bindings, seconds, calls of generated code, kernels
        # generated and reused (``lowering._generate``), LLVM objects compiled and found in a cache
        self.codegen = dict.fromkeys(("bindings", "seconds", "calls", "kernels", "reused", "compiled", "cached"), 0)
        self._recent: tuple = (None, None)  # (key, binding) of the last call: the newest in _bindings
        self._kept: dict = {}  # binding key -> the Choices a checkpoint gave it (``prepare_layouts``): not timed

    _flat = False  # return one list, the outputs then the updates (the backend protocol's ``_Run``)

    def __call__(self, arrays: dict, env: dict) -> tuple[list, list]:
        b = self._recent[1]
        if b is None or self.dims:  # (a program without symbolic dims has one binding: no look-up)
            b = self.binding(env, arrays)
        results = b.run(arrays)
        if self._flat:
            return results
        n = len(b.out_calls)
        return results[:n], results[n:]

    def run_exact(self, arrays: dict) -> list | None:
        """The outputs then the update values of a program without symbolic dims, where ``arrays`` are
        exactly what its binding takes (``Binding.run_exact``); else None, having done nothing."""
        b = self._recent[1]
        if b is None or self.dims:
            return None
        return b.run_exact(arrays)

    def binding(self, env: dict, arrays: dict | None = None) -> Binding:
        """The :class:`Binding` of ``env``'s dims, laid out at the first call that binds them (under
        ``search``, the fastest layout on that call's ``arrays``). Bindings are kept most recently used
        last; a call with the dims of the call before finds its binding there already (nothing to move)."""
        key = ()
        if self.dims:
            try:
                key = tuple([env[d] for d in self.dims])
            except KeyError as e:
                raise ValueError(f"symbolic dim {e.args[0]!r} has no value bound") from None
        recent = self._recent
        if key == recent[0]:
            return recent[1]
        b = self._bindings.get(key)
        if b is None:
            t0, before = time.perf_counter(), dict(llvm.STATS)
            # laying out a run allocates per kernel and frees next to nothing; it writes nothing a caller
            # sees (``search`` times on copies), so a Ctrl-C during its code generation acts at once
            # even inside a train step's deferred block (``core/interrupts.py``)
            kept = self._kept.get(key)
            with gc_paused(), interruptible():
                if self._kernels is None:
                    self._kernels = expand_calls(self.kg.kernels)
                b = Binding(plan(self.kg, self._kernels, self.plan, dict(zip(self.dims, key)), kept or tune.DEFAULT,
                                 memo=self._memo))
            self._count(b, time.perf_counter() - t0, before)
            self._bindings[key] = b
            if kept is None and (self.search > 1 or (b.schedule.undecided and self.time_undecided)):  # (OWN_THREADS_NS)
                self._untimed.add(key)
            if len(self._bindings) > MAX_BINDINGS:
                evicted = self._bindings.popitem(last=False)[0]
                self.searches.pop(evicted, None)
                self._untimed.discard(evicted)
        else:
            self._bindings.move_to_end(key)
        if key in self._untimed:
            if arrays is None:  # (``prepare``: timed at the first call, which does not find it recent)
                self._recent = (None, None)
                return b
            b = self._bindings[key] = self._timed(key, b, arrays)
            self._untimed.discard(key)  # (after the search: one interrupted, or failed, is run again next call)
        self._recent = (key, b)
        return b

    def _timed(self, key: tuple, default: Binding, arrays: dict) -> Binding:
        """The fastest layout of the binding ``key`` on this first call's ``arrays``: a search of up to
        ``search`` layouts (``tune.search``), or BLAS's threads against ours for an undecided binding
        (``tune.threads``)."""
        t0, before = time.perf_counter(), dict(llvm.STATS)
        bound = dict(zip(self.dims, key))

        def make(c):
            return Binding(plan(self.kg, self._kernels, self.plan, bound, c, self._memo))

        with gc_paused(), interruptible():
            if self.search > 1:
                b, self.searches[key] = tune.search(make, arrays, self.search, bound, default)
            else:
                b, self.searches[key] = tune.threads(make, arrays, bound, default, UNDECIDED_LIMIT_S)
        c = self.codegen  # (the alternatives' LLVM objects too, as ``_count`` counts the default's)
        c["seconds"] += time.perf_counter() - t0
        c["compiled"] += llvm.STATS["compiled"] - before["compiled"]
        c["cached"] += llvm.STATS["reused"] - before["reused"]
        return b

    def layouts(self) -> list:
        """``[[dims, choices text]]`` of the bindings whose layout this machine timed (``search``, or an
        undecided thread choice) or a checkpoint gave (:meth:`prepare_layouts`): what a checkpoint keeps.
        The layouts round differently in the last bit (BLAS on its threads or on one, a product cut or
        whole), and a timing in a new process can pick the other one, so a resumed run lays its
        bindings out as the run it continues did (``train/checkpoint.py``)."""
        chosen = {**{key: s.chosen for key, s in self.searches.items()}, **self._kept}
        return [[list(key), tune.encode(c)] for key, c in chosen.items()]

    def prepare_layouts(self, entries) -> Callable[[], None]:
        """Check ``entries`` (:meth:`layouts`' list, as a checkpoint's JSON gives it back) and return
        ``apply()``, which makes them this program's layouts: a binding of those dims is laid out so, not
        timed, and one laid out otherwise already is laid out again at its next call. A ValueError, before
        anything changes, for an entry that is not ``[dims, choices]`` with as many int dims as the
        program has symbolic dims and choices this version can lay out (``tune.decode``)."""
        if not isinstance(entries, list):
            raise ValueError(f"the step's layouts must be a list, got {type(entries).__name__}")
        kept = {}
        for e in entries:
            dims = e[0] if isinstance(e, list) and len(e) == 2 else None
            if not (isinstance(dims, list) and len(dims) == len(self.dims) and isinstance(e[1], str)
                    and all(type(d) is int and d >= 0 for d in dims)):
                raise ValueError(f"a layout must be [[{len(self.dims)} dim value(s)], choices], got {e!r:.200}")
            choices = tune.decode(e[1])
            if choices is None:
                raise ValueError(f"layout {e[1]!r:.200} is not one this version of luminal lays out")
            kept[tuple(dims)] = choices

        def apply():
            for key, choices in kept.items():
                b = self._bindings.get(key)
                # (one laid out so but not timed yet, ``prepare``'s, keeps its layout and is not timed)
                self._untimed.discard(key)
                if b is not None and b.choices != choices:
                    del self._bindings[key]
                    self.searches.pop(key, None)
                    if self._recent[0] == key:
                        self._recent = (None, None)
            self._kept = kept

        return apply

    def prepare(self, env: dict) -> None:
        """Lay the program out for the binding ``env`` now (its code generated and compiled), so that
        the first call with those dims only runs (and times the layouts a search or an undecided thread
        choice compares: there are no arrays to time on before it)."""
        self.binding(env)

    def _count(self, b: Binding, seconds: float, before: dict) -> None:
        """Add a new binding's layout to ``codegen``, what the compile report's code generation stage says."""
        c = self.codegen
        c["bindings"] += 1
        c["seconds"] += seconds
        c["calls"] += len(b.schedule.generated)
        for k in ("kernels", "reused"):
            c[k] += b.schedule.made[k]
        c["compiled"] += llvm.STATS["compiled"] - before["compiled"]
        c["cached"] += llvm.STATS["reused"] - before["reused"]

    def describe(self) -> str:
        """For ``report(code=True)``: what ``search`` timed for each binding kept, and what it chose."""
        if not self.searches:
            when = ("at a new binding's first call" if self.search > 1 else
                    "with search=2 or more, or where the thread choice is the machine's")
            return f"cpu: nothing timed (search={self.search}; layouts are timed {when})"
        return "\n".join(str(s) for s in self.searches.values())


class Binding:
    """One binding of the symbolic dims: the memory of its :class:`~luminal.backends.cpu.plan.Schedule`
    and the calls that run it. It allocates and rebinds; every decision was the plan's."""

    def __init__(self, schedule: Schedule):
        self.schedule, self.choices = schedule, schedule.choices
        guarded = guard.BYTES  # guard mode (``guard.py``): read once per binding
        if guarded:
            self._guards = {i: guard.storage(s, guarded, f"storage {i}: {s.what or 'unnamed'}, {s.nbytes} bytes")
                            for i, s in enumerate(schedule.storages)}
            self._memory = [self._guards[i].array for i in range(len(schedule.storages))]
        else:
            self._memory = [s.allocate() for s in schedule.storages]  # space -> its array
        self._caller = schedule.callers  # name -> (shape, np dtype) of each caller array
        self._written = schedule.written  # the states written in place
        self._cells: dict = {}  # space -> a cell holding its base address (the driver's GEMM operands)
        self._kernel_args: dict = {}  # (buffers, params) of a kernel call -> its ctypes arguments
        self._bases: dict = {}  # space -> the address of its array (``_base``)
        self._slots: dict = {}  # caller array name -> [(pointer array or cell, slot)] patched on rebind
        self._keep: list = []  # the ctypes arrays native code reads
        self._held: dict = {}  # caller array name -> the array bound now
        self._last: dict = {}  # name -> the caller's array object of the last rebind (None: converted)
        # what a run executes: the steps with each run of native ones one call of the generated driver
        # (a threaded run has BLAS on one thread: blas.py)
        blas_threads = 1 if schedule.threaded else blas.threads() or 1
        if guarded:  # each step a call of its own, its guards checked after it
            calls, tables, self._owners = [], [], []
            for i, s in enumerate(schedule.steps):
                c, t = driver.build([self._call(s)], self._cell, self.choices.gemm, blas_threads)
                calls += c
                tables += t
                self._owners += [i] * len(c)
        else:
            calls, tables = driver.build([self._call(s) for s in schedule.steps], self._cell, self.choices.gemm,
                                         blas_threads)
        self._keep += tables
        self._exec = self._bind(calls)
        self.out_calls = self._bind(schedule.outputs)
        self.up_calls = self._bind(schedule.updates)
        self._threaded = schedule.threaded
        self._deps = self._index_caller_refs()
        # A run of generated kernels and plain copies alone, on this thread, runs no numpy arithmetic
        # and no BLAS: it needs neither np.errstate (about a microsecond to enter and leave: numpy clears
        # the floating-point flags before each ufunc it runs, so what a generated kernel leaves in them
        # warns nowhere) nor BLAS on one thread. Threaded runs (long by construction) keep both.
        # (the driver's GEMMs are BLAS called directly: no numpy, no floating-point warnings)
        self._plain = not self._threaded and all(isinstance(f, _NATIVE) for f, _ in self._exec) and \
            all(f is fresh or f is same or f is written for f, _ in self.out_calls + self.up_calls)
        self._names = tuple(self._caller)
        self._targets = {n: tuple(self._slots.get(n, ())) for n in self._names}  # what a rebind patches
        # a run's rebind in line (``run``) where nothing can overlap (no state written in place) and no
        # numpy call reads a caller array (no dependent call to rebuild): per caller array (name, shape,
        # dtype, the slots its address goes to); None when :meth:`_rebind` does it all
        self._direct = None if self._written or self._deps or _DATA_FIELD is None else \
            tuple((n, *self._caller[n], self._targets[n]) for n in self._names)
        if guarded:
            self._guard_setup(guarded)

    # making the calls -----------------------------------------------------------------------------
    def _call(self, step) -> tuple:
        """A step as the call it makes, ``(function, args)``: a kernel's with its ctypes arguments, a
        Split's parts likewise; the others' operands still Refs."""
        if isinstance(step, Kernel):
            return step.function, self._arguments(step)
        if isinstance(step, Split):
            return Split([[self._call(s) for s in part] for part in step.parts]), ()
        return step.fn, step.args

    def _arguments(self, k: Kernel) -> tuple:
        """The arguments of a kernel call, as ints: the address of its pointer array (one per program
        buffer; a caller array's slot written on rebind), of its parameters' array, its item range.
        Every kernel call runs in the driver's tables (``driver.build``), which take the ints; only
        the Python path (:meth:`run_steps`) calls one through ctypes, which converts them."""
        arrays = self._kernel_args.get((k.buffers, k.params))
        if arrays is None:
            ptrs = (ctypes.c_void_p * max(1, len(k.buffers)))()
            for slot, (space, offset) in enumerate(k.buffers):
                if type(space) is str:
                    assert offset == 0, "a kernel reads a caller array from its start"
                    self._slots.setdefault(space, []).append((ptrs, slot))
                else:
                    ptrs[slot] = self._base(space) + offset
            params = (ctypes.c_int64 * max(1, len(k.params)))(*k.params)
            arrays = self._kernel_args[(k.buffers, k.params)] = (ptrs, params)
            self._keep += arrays
        ptrs, params = arrays
        return ctypes.addressof(ptrs), ctypes.addressof(params), k.start, k.stop

    def _base(self, space: int) -> int:
        """The address of a storage's array, looked up once (:func:`_address`)."""
        got = self._bases.get(space)
        if got is None:
            got = self._bases[space] = _address(self._memory[space])
        return got

    def _cell(self, x: Ref) -> tuple[int, int]:
        """For the generated driver (``driver.py``): ``(address of a cell holding the base address of
        x's space, x's byte offset)``; a caller array's cell is written on every rebind."""
        cell = self._cells.get(x.space)
        if cell is None:
            cell = self._cells[x.space] = (ctypes.c_void_p * 1)()
            if x.caller:
                self._slots.setdefault(x.space, []).append((cell, 0))
            else:
                cell[0] = self._base(x.space)
            self._keep.append(cell)
        return ctypes.addressof(cell), x.offset

    def _bind(self, calls: list, callers: bool = False) -> list:
        """``calls`` with the Refs of the program's memory made arrays (those of caller arrays too,
        from the arrays bound now, with ``callers``; else they stay Refs until a rebind)."""
        out = []
        for f, args in calls:
            if isinstance(f, Split):
                out.append((Split([self._bind(p, callers) for p in f.parts]), ()))
                continue
            out.append((f, tuple(self._array(x, callers) if type(x) is Ref else x for x in args)))
        return out

    def _array(self, ref: Ref, callers: bool):
        if ref.caller:
            return ref.resolve(self._held[ref.space]) if callers else ref
        return ref.resolve(self._memory[ref.space])

    def _index_caller_refs(self) -> dict:
        """``{caller name: [(list, index, call)]}`` of the executed calls that read views of the name
        (rebuilt with the new views on a rebind)."""
        deps: dict = {}
        parts = [p for f, _ in self._exec if isinstance(f, Split) for p in f.parts]
        for lst in (self._exec, self.out_calls, self.up_calls, *parts):
            for i, (f, args) in enumerate(lst):
                for n in {x.space for x in args if type(x) is Ref}:
                    deps.setdefault(n, []).append((lst, i, (f, args)))
        return deps

    # running --------------------------------------------------------------------------------------
    def run(self, arrays: dict) -> list:
        """Run on the caller arrays ``arrays`` (by name): the outputs (fresh arrays), then the values of
        the updates (possibly views of buffers that the next run overwrites)."""
        # (plain loops: a comprehension is a function call of its own in Python 3.11, ~0.15 us each)
        last, changed, direct = self._last, None, self._direct
        if direct is not None:  # a new C-contiguous array of the right shape and dtype: its address in line
            held = self._held
            for n, shape, dtype, slots in direct:
                a = arrays[n]
                if a is not last.get(n):
                    if type(a) is np.ndarray and a.dtype is dtype and a.shape == shape and a.flags.c_contiguous:
                        last[n] = held[n] = a
                        address = _u64_at(id(a) + _DATA_FIELD).value
                        for ptrs, i in slots:
                            ptrs[i] = address
                    elif changed is None:  # (anything else: checked and converted by ``_rebind``)
                        changed = [n]
                    else:
                        changed.append(n)
        else:
            for n in self._names:
                if arrays[n] is not last.get(n):
                    if changed is None:
                        changed = [n]
                    else:
                        changed.append(n)
        if changed is not None:
            self._rebind(changed, arrays)
        return self._execute()

    def run_exact(self, arrays: dict) -> list | None:
        """:meth:`run`, for a call whose ``arrays`` are exactly the caller arrays this binding takes (the
        same names, each a plain C-contiguous ndarray of its shape and dtype) where a rebind is an
        address written in line (``_direct``); else None, having done nothing. ``Compiled`` calls
        this first, once a call of a program without symbolic dims went through every check: the
        checks here are what its signature compared (about a microsecond of a few-microsecond call)."""
        direct = self._direct
        if direct is None or len(arrays) != len(direct):
            return None
        for n, shape, dtype, _ in direct:
            a = arrays.get(n)
            if type(a) is not np.ndarray or a.dtype is not dtype or a.shape != shape or not a.flags.c_contiguous:
                return None
        last, held = self._last, self._held
        for n, _, _, slots in direct:
            a = arrays[n]
            if a is not last.get(n):
                last[n] = held[n] = a
                address = _u64_at(id(a) + _DATA_FIELD).value
                for ptrs, i in slots:
                    ptrs[i] = address
        return self._execute()

    def _execute(self) -> list:
        """Run the bound calls: the outputs, then the values of the updates."""
        outs = []
        if self._plain:
            for f, args in self._exec:
                f(*args)
            for f, args in self.out_calls:
                outs.append(f(*args))
        else:
            if self._threaded:
                native_team.restore()
            with np.errstate(all="ignore"), blas.single_threaded() if self._threaded else _NO_CONTEXT:
                for f, args in self._exec:
                    f(*args)
                for f, args in self.out_calls:
                    outs.append(f(*args))
        for f, args in self.up_calls:
            outs.append(f(*args))
        return outs

    def run_steps(self, arrays: dict) -> list:
        """:meth:`run` through the Python path (``steps.run``): every step of the schedule called from
        Python in order, no driver table; the same results (what tests compare the driver with)."""
        self._last.clear()  # every caller array is bound anew
        self._rebind(list(self._names), arrays)
        s = self.schedule
        with np.errstate(all="ignore"):
            steps.run(self._bind([self._call(x) for x in s.steps], callers=True))
            outs = [f(*args) for f, args in self._bind(s.outputs, callers=True)]
        return outs + [f(*args) for f, args in self._bind(s.updates, callers=True)]

    def _rebind(self, names, arrays) -> None:
        """Point the program at the caller arrays ``names`` (new objects since the last run): the
        generated kernels' pointer slots, the driver's cells, the numpy calls that read them. Every
        array is checked (and converted where it must be) before anything changes."""
        written, caller = self._written, self._caller
        clash = _NONE
        if written:
            if any(n in written for n in names):  # a new state array: anything may overlap it now
                names = list(dict.fromkeys([*names, *caller]))
            clash = _overlapping(names, written, arrays)
        new = []
        for n in names:
            a = arrays[n]
            shape, dtype = caller[n]
            # (``is`` first: numpy's built-in dtypes are singletons, and ``==`` costs a call)
            if type(a) is np.ndarray and (a.dtype is dtype or a.dtype == dtype) and a.flags.c_contiguous \
                    and n not in clash:
                arr = a
            else:
                arr = np.array(a, dtype, order="C")
            if arr.shape != shape:
                raise ValueError(f"array {n!r} has shape {arr.shape}, expected {shape}")
            new.append((n, a, arr))
        last, targets, held = self._last, self._targets, self._held
        for n, a, arr in new:
            last[n] = a if arr is a else None  # a converted copy is redone every run
            held[n] = arr
            slots = targets[n]
            if slots:
                address = _address(arr)
                for ptrs, i in slots:
                    ptrs[i] = address
        deps = self._deps
        if deps:
            seen = set()
            for n in names:
                for lst, i, (f, args) in deps.get(n, ()):
                    if (id(lst), i) not in seen:
                        seen.add((id(lst), i))
                        lst[i] = (f, tuple(x.resolve(held[x.space]) if type(x) is Ref else x for x in args))

    # guard mode (``guard.py``) ------------------------------------------------------------------------
    def _guard_setup(self, nbytes: int) -> None:
        """Make this binding check guards: its runs go through the guarded methods below (instance
        attributes: a binding without guards runs the class's methods, untouched)."""
        self._guard_bytes = nbytes
        self._guard_callers: dict = {}  # name -> guard.Guarded copy of the caller array, this run's
        steps_ = self.schedule.steps
        effects = [guard.writes(s) for s in steps_]
        # the spaces each executed call may touch (checked right after it), and who writes each space
        self._guard_touched = [tuple(effects[i][1]) for i in self._owners]
        self._guard_writers: dict = {}
        for i, (w, _) in enumerate(effects):
            for space in w:
                self._guard_writers.setdefault(space, []).append(i)
        self.run = self._guarded_run
        self.run_exact = self._guarded_run
        self._execute = self._guarded_execute
        self.run_steps = self._guarded_run_steps

    def _guarded_run(self, arrays: dict) -> list:
        """:meth:`run` on guarded copies of the caller's arrays, the states written in place copied back."""
        copies = {n: guard.caller(arrays[n], *self._caller[n], self._guard_bytes, n) for n in self._names}
        self._guard_callers = copies
        out = Binding.run(self, {n: g.array for n, g in copies.items()})
        self._guard_read_only(arrays, copies)
        return self._guard_copy_back(arrays, copies, out)

    def _guard_read_only(self, arrays: dict, copies: dict) -> None:
        """Raise a :class:`guard.GuardError` if the run changed memory no step may write: a caller array
        other than the states written in place (compared with the caller's), a constant (with its data)."""
        changed = []
        for n, g in copies.items():
            if n not in self._written:
                want = np.ascontiguousarray(np.asarray(arrays[n], self._caller[n][1]))
                if g.array.tobytes() != want.tobytes():
                    changed.append(f"caller array {n!r}")
        for i, s in enumerate(self.schedule.storages):
            if s.data is not None and self._guards[i].array.tobytes() != np.ascontiguousarray(s.data).tobytes():
                changed.append(f"storage {i}: {s.what or 'a constant'}")
        if changed:
            raise guard.GuardError("cpu guard mode: the run wrote memory no step writes (read only): " + ", ".join(
                changed) + "; its writers may be kernels whose stores go to the wrong buffer")

    def _guard_copy_back(self, arrays: dict, copies: dict, out: list) -> list:
        """The states written in place copied back into the caller's arrays (where a run without guards
        writes them: a C-contiguous writable array of the state's dtype), and the results that view
        those copies made the same views of the caller's arrays."""
        moved = {}
        for n in self._written:
            a = arrays[n]
            if type(a) is np.ndarray and a.dtype == self._caller[n][1] and a.flags.c_contiguous and a.flags.writeable:
                np.copyto(a, copies[n].array)
                moved[_root(copies[n].array)] = (copies[n].array, a)
        if not moved:
            return out
        for i, r in enumerate(out):
            if isinstance(r, np.ndarray) and r.base is not None and r.size:
                got = moved.get(_root(r))
                if got is not None:
                    copy, a = got
                    out[i] = np.ndarray(r.shape, r.dtype, a, r.ctypes.data - copy.ctypes.data, r.strides)
        return out

    def _guarded_execute(self) -> list:
        """:meth:`_execute`, each call followed by a check of the guards of what it touched, and all of
        them at the end (or when a call raises)."""
        check = self._guard_check
        try:
            if self._threaded:
                native_team.restore()
            with np.errstate(all="ignore"), blas.single_threaded() if self._threaded else _NO_CONTEXT:
                for j, (f, args) in enumerate(self._exec):
                    f(*args)
                    check(self._guard_touched[j], self._owners[j])
                outs = [f(*args) for f, args in self.out_calls]
            outs += [f(*args) for f, args in self.up_calls]
        except guard.GuardError:
            raise
        except BaseException as e:
            check(None, None, e)
            raise
        check(None, None)
        return outs

    def _guarded_run_steps(self, arrays: dict) -> list:
        """:meth:`run_steps` (the Python path) with the guards checked after every step."""
        copies = {n: guard.caller(arrays[n], *self._caller[n], self._guard_bytes, n) for n in self._names}
        self._guard_callers = copies
        self._last.clear()
        self._rebind(list(self._names), {n: g.array for n, g in copies.items()})
        s = self.schedule
        with np.errstate(all="ignore"):
            for i, step in enumerate(s.steps):
                steps.run(self._bind([self._call(step)], callers=True))
                self._guard_check(guard.writes(step)[1], i)
            outs = [f(*args) for f, args in self._bind(s.outputs, callers=True)]
        outs += [f(*args) for f, args in self._bind(s.updates, callers=True)]
        self._guard_check(None, None)
        self._guard_read_only(arrays, copies)
        return self._guard_copy_back(arrays, copies, outs)

    def _guard_check(self, spaces, at, cause: BaseException | None = None) -> None:
        """Raise a :class:`guard.GuardError` if a guard of ``spaces`` (None: every storage and caller
        array) changed; ``at``: the index of the step that ran last (None: the run is over)."""
        guards, callers = self._guards, self._guard_callers
        if spaces is None:
            found = [g for g in (*guards.values(), *callers.values()) if not g.intact()]
        else:
            found = []
            for space in spaces:
                g = callers.get(space) if type(space) is str else guards.get(space)
                if g is not None and not g.intact():
                    found.append(g)
        if not found:
            return
        spaces_of = {id(g): k for k, g in (*guards.items(), *callers.items())}
        steps_ = self.schedule.steps
        lines = []
        for g in found:
            writers = self._guard_writers.get(spaces_of[id(g)], [])
            who = "; ".join(f"step {i}: {guard.describe(steps_[i])}" for i in writers[:6]) or "no step"
            more = f" and {len(writers) - 6} more" if len(writers) > 6 else ""
            lines.append(f"{g.what}: {g.damage()}; written by {who}{more}")
            g.restore()
        when = "at the end of the run" if at is None else f"after step {at}: {guard.describe(steps_[at])}"
        raise guard.GuardError(f"cpu guard mode: a write out of bounds, found {when}:\n  " + "\n  ".join(lines)) \
            from cause


def _overlapping(names, written, arrays) -> set:
    """The ``names`` whose arrays share memory with a state array the run writes in place (other than
    their own): they are read from a private copy, so that every read sees the values from before
    the run. Arrays of distinct allocations never overlap, so only those with a common base are
    compared."""
    roots = {}
    for w in written:
        roots.setdefault(_root(arrays[w]), []).append(w)
    out = set()
    for n in names:
        a = arrays[n]
        for w in roots.get(_root(a), ()):
            if w != n and np.may_share_memory(a, arrays[w]):
                out.add(n)
    return out


def _address(a: np.ndarray) -> int:
    """The address of an array's first element, on every call whose caller array is a new object.
    ``a.ctypes.data`` builds a ``_ctypes`` object and an ``__array_interface__`` dict (2 us on a 2-core
    Xeon); a ctypes view of the buffer 0.6 us (and needs a writable array); reading numpy's own
    ``data`` field out of the array object 0.24 us. That field's offset (``PyArrayObject``: after the
    object header) is not a constant of the language, so it is found at import by comparison with
    ``ctypes.data`` on probe arrays (:func:`_data_field`), and where none agrees the views are used."""
    if _DATA_FIELD is not None:
        return _u64_at(id(a) + _DATA_FIELD).value
    try:
        return ctypes.addressof(ctypes.c_byte.from_buffer(a))
    except (TypeError, ValueError):
        return a.ctypes.data


_u64_at = ctypes.c_uint64.from_address


def _data_field() -> int | None:
    """The byte offset of the data pointer in an ndarray object, when one offset gives ``ctypes.data``
    for every probe (dtypes, sizes, a read-only array, an offset view, an empty one); else None. Only
    offsets inside numpy's array object (its header, then the data pointer) are read."""
    base = np.arange(24, dtype=np.float64)
    ro = np.ones(3, np.int32)
    ro.flags.writeable = False
    probes = [base, base[5:], np.zeros(1, np.float32), np.empty(0, np.uint8), ro, np.ones((2, 3), bool)]
    for offset in range(8, np.ndarray.__basicsize__ - 7, 8):
        if all(_u64_at(id(p) + offset).value == p.ctypes.data for p in probes):
            return offset
    return None


_DATA_FIELD = _data_field()


def _root(a) -> int:
    """Identity of the allocation behind an array (the end of its ``base`` chain)."""
    while isinstance(a, np.ndarray) and a.base is not None:
        a = a.base
    return id(a)
