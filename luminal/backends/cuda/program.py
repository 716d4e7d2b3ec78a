"""A kernel graph as a CUDA program: every kernel lowered once (``launches.py``), and every binding of
the dims run on a device by the runtime (``binding.py``: one arena per binding laid out by the memory
plan, States resident on the device, launches replayed as CUDA graphs after the first call).

``EmulatedProgram`` runs on the simulated device (``backend="cuda-emulated"``: the whole CUDA runtime
but the driver, the kernels run by the emulator, temps and scratch poisoned with 0xFF bytes before
use so nothing passes on zeros); ``DeviceProgram`` on device 0 through the driver.

``search=N`` (``schedules.py``) times each kernel's schedules on the device after the first call and
keeps the fastest; with ``search`` > 0 a kernel whose winner is cached takes it at once.

Every kernel lowered in this process is remembered (:func:`generated_kernels`), so one test can
render and compile each distinct kernel the suite generated with NVRTC.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict

import numpy as np

from luminal.backends.cuda import runtime as rt
from luminal.backends.cuda import schedules
from luminal.backends.cuda.arena import aligned
from luminal.backends.cuda.binding import DeviceBinding
from luminal.backends.cuda.launches import DeviceMemory, Launch, lower_kernel, lower_run
from luminal.codegen import ir
from luminal.codegen.lowering import rows
from luminal.codegen.target import CUDA, CUDA_LIBRARY
from luminal.core.kernel_graph import call_links, dims_needed

MAX_BINDINGS = 8
_SEEN: dict[str, object] = {}  # kernel name -> ir.Kernel, every kernel lowered in this process
_SEEN_LOCK = threading.Lock()


def generated_kernels() -> list:
    """Every distinct GPU kernel lowered in this process (for the NVRTC compile check)."""
    with _SEEN_LOCK:
        return list(_SEEN.values())


def _remember(launches) -> None:
    with _SEEN_LOCK:
        for launch in launches:
            if isinstance(launch.kernel, ir.Kernel):  # (a library product has no code of ours)
                _SEEN.setdefault(launch.kernel.name, launch.kernel)


class Step:
    """One kernel-graph kernel: its launches and the links of the call it runs in (``{}``: none)."""

    __slots__ = ("kernel", "launches", "links")

    def __init__(self, kernel, launches: list[Launch], links: dict):
        self.kernel, self.launches, self.links = kernel, launches, links


class CudaProgram:
    """``prog(arrays, env) -> [*outputs, *updates]`` over a kernel graph, the backend protocol's call.
    It takes States (``takes_states``): each is read from its device copy, and an update the device
    applied is None in the results (``core/backend.py``)."""

    takes_states = True
    poison = False  # fill temps and scratch with 0xFF before use (the simulated device: nothing passes on zeros)

    def __init__(self, kg, plan, runtime: rt.Runtime, search: int = 0):
        self.kg, self.plan, self.runtime, self.search = kg, plan, runtime, search
        self.dims = tuple(kg.dims) or dims_needed(kg)
        arch = getattr(runtime.device, "arch", "unknown")
        # products as library calls where the device has cuBLASLt (library.py), else own kernels
        with runtime.lock:
            runtime.device.use()
            self.target = CUDA_LIBRARY if runtime.device.gemm_library() else CUDA
        lowered: dict[int, list[Launch]] = {}  # a body's kernels are lowered once, launched per call
        self.steps: list[Step] = []
        pairs = list(call_links(kg.kernels))
        kernels = [k for k, _ in pairs]
        # single-pass rows: a run's first kernel launches the whole run, the others nothing
        same_call = lambda i: pairs[i][1] is pairs[i - 1][1] or not (pairs[i][1] or pairs[i - 1][1])  # noqa: E731
        found = rows.runs(kernels, same_call)
        # (a body's run is one in every call, or in none: its kernels are lowered once)
        unsafe = {id(kernels[a]) for a, b in found
                  if not rows.fits(kernels[a:b], CUDA, DeviceMemory(), plan.slot_of, pairs[a][1])}
        in_run: dict[int, list] = {}
        for start, stop in found:
            if id(kernels[start]) not in unsafe:
                in_run.setdefault(id(kernels[start]), kernels[start:stop])
                for x in kernels[start + 1:stop]:
                    lowered[id(x)] = []
        for k, links in pairs:
            launches = lowered.get(id(k))
            if launches is None and id(k) in in_run:
                launches = lowered[id(k)] = lower_run(in_run[id(k)])
                _remember(launches)
            elif launches is None:
                launches = lowered[id(k)] = lower_kernel(k, target=self.target)
                won = schedules.cached(launches, arch) if search > 0 else None
                if won is not None and won != launches[0].choice:
                    launches = lowered[id(k)] = lower_kernel(k, won, self.target)
                _remember(launches)
            self.steps.append(Step(k, launches, links))
        self.searched = search < 2  # (search=0 or 1: the cost model's schedules, or cached winners)
        self.timings: list = []  # (kernel-graph kernel, {schedule: seconds}, the kept one) per kernel timed
        self.state_buffers = {b.name: b for b in kg.buffers if b.kind == "state"}
        self._functions: dict = {}  # kernel name -> the device's function
        self._consts: dict | None = None  # const buffer id -> device address (one allocation, made once)
        self._bindings: OrderedDict = OrderedDict()
        owned: list = []  # device memory this program holds, freed when it is collected
        self._owned = owned
        weakref.finalize(self, _release, runtime, self._bindings, owned)

    def launches(self) -> list[Launch]:
        """Every distinct launch of the program, in first-use order."""
        seen: dict = {}
        for s in self.steps:
            for launch in s.launches:
                seen.setdefault(id(launch), launch)
        return list(seen.values())

    def describe(self) -> str:
        """Every kernel's IR, the lowering's choice among its alternatives, and, where NVRTC is
        installed, the registers and spill bytes of its sm_90 cubin."""
        from luminal.backends.cuda import nvrtc, render

        out = []
        for launch in self.launches():
            k = launch.kernel
            if not isinstance(k, ir.Kernel):
                out.append(f"# {k.name}: {launch.choice} (of: {', '.join(launch.choices)})\n{k.text()}")
                continue
            try:
                cubin = nvrtc.compile_cubin(render.render(k), render.kernel_symbol(k))
                compiled = (f"; {cubin.arch}: {cubin.registers} registers, {cubin.spills} spill bytes"
                            if cubin.spills >= 0 else f"; {cubin.arch}: (NVRTC's log has no ptxas report)")
            except nvrtc.CudaUnavailableError as e:
                compiled = f"; not compiled ({e})"
            options = ", ".join(launch.choices) or launch.choice
            out.append(f"# {k.name}: {launch.choice} (of: {options}){compiled}\n{k.text()}")
        for k, times, kept in self.timings:
            timed = ", ".join(f"{o} {s * 1e3:.3f} ms" for o, s in times.items())
            out.append(f"# schedule search, {k.kind} kernel {k}: {timed}; kept {kept}")
        return "\n\n".join(out)

    def __call__(self, arrays: dict, env: dict) -> list:
        try:
            key = tuple(env[d] for d in self.dims)
        except KeyError as e:
            raise ValueError(f"symbolic dim {e.args[0]!r} has no value bound") from None
        with self.runtime.lock:
            self.runtime.device.use()
            self.runtime.flush()
            binding = self._bindings.get(key)
            if binding is None:
                binding = DeviceBinding(weakref.proxy(self), self.runtime, dict(zip(self.dims, key)), self.consts())
                self._bindings[key] = binding
                if len(self._bindings) > MAX_BINDINGS:
                    self._bindings.popitem(last=False)[1].release()
            self._bindings.move_to_end(key)
            out = binding(arrays)
            if not self.searched:
                self.searched = True
                self.relower(schedules.search(self, binding, self.search))
            return out

    def relower(self, options: dict) -> None:
        """Run the kernels in ``options`` (``{id(kernel-graph kernel): schedule}``) in those schedules;
        the bindings are laid out again at their next call."""
        if not options:
            return
        made: dict = {}
        for step in self.steps:
            option = options.get(id(step.kernel))
            if option is not None:
                if id(step.kernel) not in made:
                    made[id(step.kernel)] = lower_kernel(step.kernel, option, self.target)
                    _remember(made[id(step.kernel)])
                step.launches = made[id(step.kernel)]
        for b in self._bindings.values():
            b.release()
        self._bindings.clear()

    def function(self, launch: Launch):
        """The device's loaded code of ``launch``'s kernel (loaded once per program)."""
        f = self._functions.get(launch.kernel.name)
        if f is None:
            f = self._functions[launch.kernel.name] = self.runtime.device.function(launch.kernel)
        return f

    def consts(self) -> dict:
        """The device address of every const buffer: one allocation per program, uploaded once."""
        if self._consts is None:
            consts = [b for b in self.kg.buffers if b.kind == "const"]
            sizes = [aligned(np.asarray(b.value).size * b.dtype.itemsize) for b in consts]
            base = self.runtime.device.alloc(sum(sizes))
            self._owned.append(base)
            self._consts, at = {}, base
            for b, n in zip(consts, sizes):
                staged = np.empty(np.asarray(b.value).size, rt.storage(b.dtype))
                rt.stage(staged, b.value, b.dtype)
                self.runtime.device.upload(at, staged)
                self._consts[b.id] = at
                at += n
        return self._consts


def _release(runtime: rt.Runtime, bindings: OrderedDict, owned: list) -> None:
    """Free what a collected program held on the device."""
    for b in bindings.values():
        b.release()
    for ptr in owned:
        runtime.release(ptr)


class EmulatedProgram(CudaProgram):
    """The program on the process's simulated device (the emulator runs the kernels)."""

    poison = True

    def __init__(self, kg, plan, search: int = 0):
        super().__init__(kg, plan, rt.simulated(), search)


class DeviceProgram(CudaProgram):
    """The program on device 0 through the driver (each kernel rendered to CUDA C and compiled by
    NVRTC for the device's architecture, through the disk cache)."""

    def __init__(self, kg, plan, search: int = 0):
        super().__init__(kg, plan, rt.gpu(), search)
