"""A kernel graph as a CUDA program: every kernel lowered once (``lower.py``), every binding of the
dims laid out as one device arena, and a run as the launches in order.

``EmulatedProgram`` runs the launches on the emulator (``backend="cuda-emulated"``): the whole CUDA
pipeline but the driver. The arena is a flat host byte array laid out as the device's would be
(temps in the memory plan's slots, every buffer at a 256-byte aligned offset, bfloat16 as 16-bit
patterns), temps poisoned with 0xFF bytes (NaN) before every run so nothing passes on zeros.

Every kernel lowered in this process is remembered (:func:`generated_kernels`), so one test can
render and compile each distinct kernel the suite generated with NVRTC.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np

from luminal.backends.cuda import emulator
from luminal.backends.cuda.lower import ERROR_FLAG, Launch, lower_kernel
from luminal.codegen import ir
from luminal.core import numpy_ops as ops
from luminal.core.kernel_graph import call_links, dims_needed, logical_itemsize
from luminal.core.symbolic import evaluate, prod

ALIGN = 256
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
            _SEEN.setdefault(launch.kernel.name, launch.kernel)


def _storage(dtype) -> np.dtype:
    """The element type of a device buffer of ``dtype`` (bfloat16: its 16-bit patterns)."""
    return np.dtype(np.uint16) if dtype.name == "bfloat16" else dtype.np


class Step:
    """One kernel-graph kernel: its launches and the links of the call it runs in (``{}``: none)."""

    __slots__ = ("kernel", "launches", "links")

    def __init__(self, kernel, launches: list[Launch], links: dict):
        self.kernel, self.launches, self.links = kernel, launches, links


class CudaProgram:
    """``prog(arrays, env) -> [*outputs, *updates]`` over a kernel graph, the backend protocol's call."""

    def __init__(self, kg, plan):
        self.kg, self.plan = kg, plan
        self.dims = tuple(kg.dims) or dims_needed(kg)
        lowered: dict[int, list[Launch]] = {}  # a body's kernels are lowered once, launched per call
        self.steps: list[Step] = []
        for k, links in call_links(kg.kernels):
            launches = lowered.get(id(k))
            if launches is None:
                launches = lowered[id(k)] = lower_kernel(k)
                _remember(launches)
            self.steps.append(Step(k, launches, links))
        self._bindings: OrderedDict = OrderedDict()

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
            try:
                cubin = nvrtc.compile_cubin(render.render(k), render.kernel_symbol(k))
                compiled = f"; {cubin.arch}: {cubin.registers} registers, {cubin.spills} spill bytes"
            except nvrtc.CudaUnavailableError as e:
                compiled = f"; not compiled ({e})"
            options = ", ".join(launch.choices) or launch.choice
            out.append(f"# {k.name}: {launch.choice} (of: {options}){compiled}\n{k.text()}")
        return "\n\n".join(out)

    def __call__(self, arrays: dict, env: dict) -> list:
        try:
            key = tuple(env[d] for d in self.dims)
        except KeyError as e:
            raise ValueError(f"symbolic dim {e.args[0]!r} has no value bound") from None
        arena = self._bindings.get(key)
        if arena is None:
            arena = self._bindings[key] = Arena(self.kg, self.plan, dict(zip(self.dims, key)))
            if len(self._bindings) > MAX_BINDINGS:
                self._bindings.popitem(last=False)
        self._bindings.move_to_end(key)
        return arena.run(self, arrays)

    def launch(self, launch: Launch, buffers: dict, params: dict) -> None:
        raise NotImplementedError


class EmulatedProgram(CudaProgram):
    """The launches run on the emulator."""

    def launch(self, launch: Launch, buffers: dict, params: dict) -> None:
        emulator.run(launch.kernel, buffers, params)


class DeviceProgram(CudaProgram):
    """The launches run on the GPU: each kernel rendered to CUDA C, compiled by NVRTC for the
    device's architecture (cached on disk) and launched through the driver over the arena's arrays
    (copied to the device and back around every launch: a correctness path for comparing the
    device with the emulator, not the runtime; a resident arena and CUDA graphs come with that)."""

    def __init__(self, kg, plan):
        super().__init__(kg, plan)
        from luminal.backends.cuda import nvrtc, render

        self._cubins = {launch.kernel.name: nvrtc.compile_cubin(render.render(launch.kernel),
                                                                 render.kernel_symbol(launch.kernel))
                        for launch in self.launches()}

    def launch(self, launch: Launch, buffers: dict, params: dict) -> None:
        from luminal.backends.cuda import driver

        driver.launch(self._cubins[launch.kernel.name], launch.kernel, buffers, params)


class Arena:
    """One binding's device memory: every buffer's flat array at its offset in one byte arena."""

    def __init__(self, kg, plan, env: dict):
        self.env = env
        self.kg = kg
        for k in kg.kernels + [k for body in kg.bodies() for k in body.kernels]:
            if k.kind == "reduce" and k.reduce_op == "max" and any(evaluate(k.domain[a], env) == 0 for a in k.axes):
                raise ValueError(f"MaxReduce over an empty axis (kernel {k}, binding {env})")
        offsets: dict[int, int] = {}
        size = 0

        def place(nbytes: int) -> int:
            nonlocal size
            at = size
            size += (nbytes + ALIGN - 1) // ALIGN * ALIGN
            return at

        def nbytes(buf) -> int:
            return evaluate(prod(buf.shape), env) * logical_itemsize(buf.dtype)

        slot_at = [place(n) for n in plan.slot_bytes(env)]
        self.temp_end = size
        for buf in kg.buffers:
            if buf.kind == "temp":
                offsets[buf.id] = slot_at[plan.slot_of[buf.id]]
            else:
                offsets[buf.id] = place(nbytes(buf))
        for body in kg.bodies():
            for buf in body.scratch:
                offsets[buf.id] = slot_at[plan.slot_of[buf.id]]
        self.flag_at = place(8)
        self.bytes = np.empty(size, np.uint8)
        self._offsets = offsets
        self._flat: dict[int, np.ndarray] = {}
        for buf in kg.buffers:
            if buf.kind == "const":
                self.flat(buf)[...] = emulator.device_array(np.asarray(buf.value).reshape(-1), buf.dtype)
            elif buf.kind == "iota":
                self.flat(buf)[...] = np.arange(self.count(buf), dtype=np.int32)
        self.flag = self.bytes[self.flag_at:self.flag_at + 8].view(np.int32)
        self._scratch: dict = {}

    def count(self, buf) -> int:
        return evaluate(prod(buf.shape), self.env)

    def flat(self, buf) -> np.ndarray:
        """The device storage of ``buf`` as a flat typed array (a part of a pack: inside its pack)."""
        arr = self._flat.get(buf.id)
        if arr is not None:
            return arr
        st = _storage(buf.dtype)
        n = self.count(buf)
        if buf.base is not None:
            base = self.flat(buf.base)
            off = evaluate(buf.offset, self.env)
            arr = base[off:off + n]
        else:
            at = self._offsets[buf.id]
            arr = self.bytes[at:at + n * st.itemsize].view(st)
        self._flat[buf.id] = arr
        return arr

    def scratch(self, name: str, dtype, count) -> np.ndarray:
        n = evaluate(count, self.env)
        key = (name, dtype.name, n)
        arr = self._scratch.get(key)
        if arr is None:
            arr = self._scratch[key] = np.empty(n, _storage(dtype))
        arr.view(np.uint8)[...] = 0xFF
        return arr

    def run(self, prog: CudaProgram, arrays: dict) -> list:
        self.bytes[:self.temp_end] = 0xFF  # poison every temp: a kernel that skips an element shows NaN
        for buf in self.kg.buffers:
            if buf.kind in ("input", "state", "random"):
                a = np.asarray(arrays[buf.name])
                self.flat(buf)[...] = emulator.device_array(a.reshape(-1), buf.dtype)
        env = self.env
        for step in prog.steps:
            scratch: dict = {}
            for launch in step.launches:
                buffers = {}
                for name, buf in launch.args.items():
                    if buf is None:
                        if name not in scratch:
                            dtype, count = launch.scratch[name]
                            scratch[name] = self.scratch(name, dtype, count)
                        buffers[name] = scratch[name]
                    elif buf == ERROR_FLAG:
                        buffers[name] = self.flag
                    else:
                        buffers[name] = self.flat(step.links.get(buf, buf))
                self.flag[...] = 0
                prog.launch(launch, buffers, {p: ir.derived_value(p, env) for p in launch.kernel.params})
                if self.flag[0]:
                    k = step.kernel
                    size = evaluate(k.inputs[0][1].shape[k.axes[0]] if k.kind == "gather" else k.domain[k.axes[0]],
                                    env)
                    raise IndexError(f"{k.kind}: index {int(self.flag[1])} is out of range for a dim of size {size}")
        outs = [self.read(buf, view) for buf, view in self.kg.outputs]
        ups = [self.read(buf, view) for _, buf, view in self.kg.updates]
        return [*outs, *ups]

    def read(self, buf, view) -> np.ndarray:
        """``view`` of ``buf`` copied back to the host (a fresh array the caller keeps)."""
        shape = tuple(evaluate(d, self.env) for d in buf.shape)
        host = emulator.host_array(self.flat(buf), buf.dtype, shape)
        return np.array(ops.read(host, view, self.env), order="C")  # (ascontiguousarray makes 0-d 1-d)
