"""One binding of a CUDA program on a device: its arena (``arena.py``), its launches with their
argument blocks packed once, and a call as a few device operations.

A call: the host writes the inputs into one pinned staging buffer; the run (one upload of the whole
input region, the error flags cleared, the launches, the outputs and the flags downloaded into pinned
memory) is enqueued; one synchronize; the flags are read (the first set one raises the IndexError
of its kernel, and nothing is committed); then the commit: each updated State's device copy gets its
new value (device to device, after every read of the run), and the States are marked written on the
device. Outputs are host arrays read from the staging memory.

**Graphs.** The first call runs the operations one by one; the second captures the run and the
commit as two CUDA graphs, and it and every later call replay them: one launch each, over the same
addresses (the arena, the State copies, the staging buffers never move for a binding; runtime values
such as a learning rate are State data, not baked). ``LUMINAL_CUDA_SYNC=1`` never captures, and
synchronizes and reads the flag after every launch, so a fault names its kernel.

A State handed as a plain array (a caller of the program that is not ``lm.compile``) is staged like
an input into memory of this binding, and its update is returned as an array, as the backend
protocol's plain programs do.
"""

from __future__ import annotations

import os

import numpy as np

from luminal.backends.cuda.arena import ArenaLayout, buffer_bytes
from luminal.backends.cuda.device import ArgBlock, DeviceError
from luminal.backends.cuda.driver import launch_shape
from luminal.backends.cuda.launches import ERROR_FLAG
from luminal.backends.cuda.runtime import Runtime, stage, storage
from luminal.codegen import emulator, ir
from luminal.core import numpy_ops as ops
from luminal.core.residency import Mirrored
from luminal.core.symbolic import evaluate, prod

POISON = 0xFF  # temps and scratch are filled with it before use on the simulated device (NaN, -1)
SMALL_STATE = 256  # bytes: a State this small that the host wrote is uploaded inside the run (its graph)


def sync_mode() -> bool:
    """``LUMINAL_CUDA_SYNC=1``: launch by launch, a synchronize and a flag check after each."""
    return os.environ.get("LUMINAL_CUDA_SYNC", "") not in ("", "0")


class DeviceBinding:
    """The device side of one binding (module docstring)."""

    def __init__(self, program, runtime: Runtime, env: dict, consts: dict):
        self.program, self.runtime, self.env = program, runtime, env
        kg = program.kg
        for k in kg.kernels:  # (a rolled body's views name its trip: its reads are its calls' views)
            for buf, view in [*k.inputs, *k.epilogue_inputs]:
                if view is not None:
                    ops.check_view(view, env, evaluate(prod(buf.shape), env))
        for k in kg.kernels + [k for body in kg.bodies() for k in body.kernels]:
            if k.kind == "reduce":
                sizes = [evaluate(d, env) for d in k.domain]
                kept = [n for a, n in enumerate(sizes) if a not in k.axes]
                ops.check_max_nonempty(k.reduce_op, [sizes[a] for a in k.axes], kept, f"kernel {k}, binding {env}")
        self.runs = [(step, launch) for step in program.steps for launch in step.launches]
        self.layout = lay = ArenaLayout(kg, program.plan, env, self.runs)
        dev = runtime.device
        self.poison = program.poison
        self.base = dev.alloc(lay.size)
        self.consts = consts  # buffer id -> device address, the program's
        self.pinned: list = []
        lo, hi = lay.regions["inputs"]
        self.in_staging = self._pinned(hi - lo)
        self.params = [{p: ir.derived_value(p, env) for p in launch.kernel.params} for _, launch in self.runs]
        self.shapes = [launch_shape(launch.kernel, p) for (_, launch), p in zip(self.runs, self.params)]
        self.functions = [program.function(launch) for _, launch in self.runs]
        for b in kg.buffers:
            if b.kind == "iota":
                n = evaluate(prod(b.shape), env)
                dev.upload(self.base + lay.offset[b.id], np.arange(n, dtype=np.int32))
        # what every call stages: each input's part of the staging buffer; each State's bytes
        self.inputs = [(b.name, self.in_staging[lay.offset[b.id] - lo:lay.offset[b.id] - lo + buffer_bytes(b, env)]
                        .view(storage(b.dtype)), b.dtype) for b in kg.buffers if b.kind in ("input", "random")]
        self.states = [(name, b, buffer_bytes(b, env)) for name, b in program.state_buffers.items()]
        # a small State the host wrote (a learning rate, a bias correction: set before every step)
        # goes up through a pinned slot inside the run, captured with it, not as a copy of its own
        small = [(name, b, n) for name, b, n in self.states if n <= SMALL_STATE]
        small_staging = self._pinned(sum((n + 7) // 8 * 8 for _, _, n in small))
        self.slots: dict = {}
        at = 0
        for name, b, n in small:
            self.slots[name] = small_staging[at:at + n].view(storage(b.dtype))
            at += (n + 7) // 8 * 8
        # pinned: the flags, then every buffer a call reads back (grown by ``_pack``)
        self.out_staging: np.ndarray = self._pinned(8 * len(self.runs))
        self._packed: tuple | None = None  # (the key it was packed for, blocks, commits, reads, uploads)
        self._graphs: tuple | None = None  # (run, commit) once captured
        self._plain: dict[int, int] = {}  # State buffer id -> memory of a State handed as a plain array
        self.calls = 0

    def _pinned(self, nbytes: int) -> np.ndarray:
        host = self.runtime.device.alloc_pinned(nbytes)
        self.pinned.append(host)
        return host

    # addresses ------------------------------------------------------------------------------------

    def address(self, buf, states: dict) -> int:
        """Where ``buf`` lives for this call (``states``: State buffer id -> its address)."""
        if buf.base is not None:
            return self.address(buf.base, states) + evaluate(buf.offset, self.env) * buf.dtype.itemsize
        if buf.kind == "state":
            return states[buf.id]
        if buf.kind == "const":
            return self.consts[buf.id]
        return self.base + self.layout.offset[buf.id]

    def _pack(self, states: dict, resident: set, staged: list):
        """The argument blocks of every launch, the commit's copies, the buffers a call reads back
        (outputs; updates that the commit cannot copy) and the small States' uploads, for State
        addresses ``states`` (``resident``: the names of the States that are device copies; ``staged``:
        those uploaded from their slots)."""
        blocks = []
        for i, (step, launch) in enumerate(self.runs):
            ptrs, extents = [], []
            for b in launch.kernel.buffers:
                kbuf = launch.args[b.name]
                if kbuf is None:
                    dtype, count = launch.scratch[b.name]
                    n = evaluate(count, self.env)
                    ptrs.append(self.base + self.layout.scratch[(b.name, dtype.name, n)])
                    extents.append(n * dtype.itemsize)
                elif kbuf == ERROR_FLAG:
                    ptrs.append(self.base + self.layout.flags_at + 8 * i)
                    extents.append(8)
                else:
                    kbuf = step.links.get(kbuf, kbuf)
                    ptrs.append(self.address(kbuf, states))
                    extents.append(buffer_bytes(kbuf, self.env))
            blocks.append(ArgBlock.pack(launch.kernel, ptrs, extents, self.params[i]))
        before, commits = [], []  # the commit: State-to-State values set aside first, then the copies
        kg = self.program.kg
        reads = [b for b, _ in kg.outputs]
        for i, (name, buf, view) in enumerate(kg.updates):
            if name not in resident or not self._whole(view, buf, name):
                reads.append(buf)
                continue
            sid = self.program.state_buffers[name].id
            src, n = self.address(buf, states), buffer_bytes(buf, self.env)
            if i in self.layout.commit:  # another State's copy: taken before any write of the commit
                before.append((self.base + self.layout.commit[i], src, n))
                src = self.base + self.layout.commit[i]
            if src != states[sid]:
                commits.append((states[sid], src, n))
        reads = list(dict.fromkeys(reads))
        at, read_at = 8 * len(self.runs), []
        for b in reads:
            read_at.append((b, at, self.address(b, states)))
            at += (buffer_bytes(b, self.env) + 7) // 8 * 8
        if len(self.out_staging) < at:
            self.pinned = [h for h in self.pinned if h is not self.out_staging]
            self.runtime.release(self.out_staging, "pinned")
            self.out_staging = self._pinned(at)
        self.read_at = {b.id: at for b, at, _ in read_at}
        self._whole_reads = {(b.id, view): self._whole_read(b, view)
                             for b, view in [*kg.outputs, *((b, v) for _, b, v in kg.updates)]}
        uploads = [(states[self.program.state_buffers[name].id], self.slots[name]) for name in staged]
        return blocks, before + commits, read_at, uploads

    # a call ---------------------------------------------------------------------------------------

    def __call__(self, arrays: dict) -> list:
        dev = self.runtime.device
        for name, out, dtype in self.inputs:
            stage(out, arrays[name], dtype)
        states, resident, staged = {}, set(), []
        for name, buf, nbytes in self.states:
            value = arrays[name]
            if isinstance(value, Mirrored):
                slot = self.slots.get(name)
                if slot is not None and not value.device_current:
                    states[buf.id] = self.runtime.resident(value, nbytes, buf.dtype, into=slot)
                    staged.append(name)
                else:
                    states[buf.id] = self.runtime.resident(value, nbytes, buf.dtype)
                resident.add(name)
        for name, buf, _ in self.states:
            if name not in resident:  # a plain array: staged here, like an input
                states[buf.id] = self._plain_copy(buf, arrays[name])
        self.states_at = states  # (for ``schedules.search``: where the States were for this call)
        key = (tuple(sorted(states.items())), tuple(staged))
        packed = self._packed
        if packed is None or packed[0] != key:
            self._drop_graphs()
            packed = self._packed = (key, *self._pack(states, resident, staged))
        _, blocks, commits, reads, uploads = packed
        self.calls += 1
        graphs = None
        if not sync_mode() and self.calls > 1:
            graphs = self._graphs
            if graphs is None:
                graphs = self._graphs = (self._capture(lambda: self._run(blocks, reads, uploads)),
                                         self._capture(lambda: self._commit_ops(commits)) if commits else None)
        if graphs is not None:
            dev.replay(graphs[0])
        else:
            self._run(blocks, reads, uploads, checked=sync_mode())
        for name in staged:  # (their uploads are on the stream, ahead of every launch)
            arrays[name].uploaded()
        dev.synchronize()
        self._check_flags()
        if graphs is None:
            self._commit_ops(commits)
        elif graphs[1] is not None:
            dev.replay(graphs[1])
        return self._results(arrays, resident)

    def time_run(self, repeats: int) -> list[float]:
        """Seconds of each of ``repeats`` replays of the run graph alone (inputs as last staged, no
        commit: no State changes), measured by device events around it. After two calls (the graph
        is captured at the second)."""
        if self._graphs is None:
            raise RuntimeError("time_run: the binding has no captured graph yet (call it twice first)")
        dev, out = self.runtime.device, []
        for _ in range(repeats):
            start, end = dev.event(), dev.event()
            dev.record(start)
            dev.replay(self._graphs[0])
            dev.record(end)
            dev.synchronize()
            out.append(dev.elapsed_ms(start, end) / 1e3)
        return out

    def _capture(self, enqueue):
        dev = self.runtime.device
        dev.begin_capture()
        try:
            enqueue()
        except BaseException:
            dev.abort_capture()
            raise
        return dev.end_capture()

    def _run(self, blocks, reads, uploads, checked: bool = False) -> None:
        dev, lay = self.runtime.device, self.layout
        lo, hi = lay.regions["inputs"]
        if hi > lo:
            dev.upload(self.base + lo, self.in_staging)
        for ptr, slot in uploads:
            dev.upload(ptr, slot)
        dev.memset(self.base + lay.flags_at, 0, 8 * len(self.runs))
        if self.poison:
            dev.memset(self.base, POISON, lay.regions["temps"][1])
        seen_scratch: set = set()
        for i, (step, launch) in enumerate(self.runs):
            if self.poison:
                if i == 0 or self.runs[i - 1][0] is not step:
                    seen_scratch = set()
                for name, (dtype, count) in launch.scratch.items():
                    n = evaluate(count, self.env)
                    key = (name, dtype.name, n)
                    if key not in seen_scratch:  # poisoned once per kernel-graph kernel, as the lowering shares it
                        seen_scratch.add(key)
                        dev.memset(self.base + lay.scratch[key], POISON, n * dtype.itemsize)
            grid, block = self.shapes[i]
            try:
                dev.launch(self.functions[i], grid, block, blocks[i])
                if checked:
                    dev.synchronize()
            except DeviceError as e:
                raise DeviceError(f"kernel {launch.kernel.name} (of {step.kernel}): {e}") from e
            if checked:
                flag = np.empty(2, np.int32)
                dev.download(flag, self.base + lay.flags_at + 8 * i)
                dev.synchronize()
                if flag[0]:
                    self._index_error(i, flag)
        dev.download(self.out_staging[:8 * len(self.runs)], self.base + lay.flags_at)
        for b, at, ptr in reads:
            dev.download(self.out_staging[at:at + buffer_bytes(b, self.env)], ptr)

    def _commit_ops(self, commits) -> None:
        for dst, src, n in commits:
            self.runtime.device.copy(dst, src, n)

    def _check_flags(self) -> None:
        raw = self.out_staging[:8 * len(self.runs)]
        if np.count_nonzero(raw):  # (zeroed by the run, written only by a kernel that found a bad index)
            flags = raw.view(np.int32).reshape(-1, 2)
            bad = int(np.flatnonzero(flags[:, 0])[0])
            self._index_error(bad, flags[bad])

    def _index_error(self, i: int, flag) -> None:
        k, env = self.runs[i][0].kernel, self.env
        size = evaluate(k.inputs[0][1].shape[k.axes[0]] if k.kind == "gather" else k.domain[k.axes[0]], env)
        raise IndexError(f"{k.kind}: index {int(flag[1])} is out of range for a dim of size {size} "
                         f"(kernel {self.runs[i][1].kernel.name}, of the kernel graph's {k})")

    def _results(self, arrays: dict, resident: set) -> list:
        """The outputs, then per update: None where the commit wrote the State's device copy, else its
        value (a plain State, whose caller writes it back; a State read through a view the commit
        cannot copy, written here from the host: the next call uploads it)."""
        kg = self.program.kg
        outs = [self._read(buf, view) for buf, view in kg.outputs]
        ups: list = []
        for name, buf, view in kg.updates:
            if name not in resident:
                ups.append(self._read(buf, view))
                continue
            if self._whole(view, buf, name):
                arrays[name].written_on_device()
            else:
                arrays[name].set(self._read(buf, view))
            ups.append(None)
        return [*outs, *ups]

    def _whole_read(self, buf, view):
        """``(first byte, end, storage dtype, shape)`` in the staging memory when ``view`` reads ``buf``
        whole and in order (an output usually does: its result is a fresh array of those bytes, no view
        arithmetic at each call); None for any other view (``_read`` materialises it)."""
        if buf.id not in self.read_at or not view.is_contiguous():
            return None
        shape = tuple(evaluate(d, self.env) for d in view.shape)
        if int(np.prod(shape, dtype=np.int64)) != evaluate(prod(buf.shape), self.env):
            return None
        at = self.read_at[buf.id]
        return at, at + buffer_bytes(buf, self.env), storage(buf.dtype), shape

    def _read(self, buf, view) -> np.ndarray:
        whole = self._whole_reads.get((buf.id, view))
        if whole is not None:
            lo, hi, kind, shape = whole
            return emulator.host_array(self.out_staging[lo:hi].view(kind), buf.dtype, shape)  # (a fresh array)
        at = self.read_at[buf.id]
        shape = tuple(evaluate(d, self.env) for d in buf.shape)
        raw = self.out_staging[at:at + buffer_bytes(buf, self.env)].view(storage(buf.dtype))
        host = emulator.host_array(raw, buf.dtype, shape)
        return np.array(ops.read(host, view, self.env), order="C")  # (ascontiguousarray makes 0-d 1-d)

    def _plain_copy(self, buf, value) -> int:
        ptr = self._plain.get(buf.id)
        if ptr is None:
            ptr = self._plain[buf.id] = self.runtime.device.alloc(buffer_bytes(buf, self.env))
        staged = np.empty(buffer_bytes(buf, self.env) // storage(buf.dtype).itemsize, storage(buf.dtype))
        stage(staged, value, buf.dtype)
        self.runtime.device.upload(ptr, staged)
        return ptr

    def _whole(self, view, buf, name: str) -> bool:
        """Whether the update of State ``name`` is ``buf`` read whole, in order, in the State's dtype:
        bytes the commit copies."""
        state = self.program.state_buffers[name]
        return view.is_contiguous() and buf.dtype is state.dtype and buffer_bytes(buf, self.env) == \
            buffer_bytes(state, self.env)

    # lifetime -------------------------------------------------------------------------------------

    def _drop_graphs(self) -> None:
        if self._graphs is not None:
            for g in self._graphs:
                if g is not None:
                    self.runtime.release(g, "graph")
            self._graphs = None

    def release(self) -> None:
        """Free the arena, the staging and the graphs (queued while the device captures)."""
        self._drop_graphs()
        self.runtime.release(self.base)
        for ptr in self._plain.values():
            self.runtime.release(ptr)
        for host in self.pinned:
            self.runtime.release(host, "pinned")
        self.pinned = []
