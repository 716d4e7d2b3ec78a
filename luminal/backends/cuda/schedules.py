"""``search=N`` on the CUDA backends: each kernel's schedules (the one lowering's ``options``) timed
on the device, the fastest kept, winners cached per (kernel code, device architecture).

A program's first binding runs its first call with the cost model's schedules (that call's results
come from them). Then every kernel-graph kernel offering more than one schedule has up to N of them
launched alone over the binding's arena: its inputs as the call left them, every buffer it writes
redirected to a copy (so nothing of the call changes: no State, output or temp is touched), timed
with device events around ``REPEATS`` runs after a warm-up, the median kept. Where a winner is not
the default, the program's launches for that kernel change and its bindings are laid out again at
the next call.

Winners are written to the ``cuda`` disk cache (entry ``schedules/<digest>``, the digest of the
default launches' names: their code, of the options offered, of the architecture and of
``SEARCH_VERSION``). An entry is data: the name of an option, used only when it is one of the
kernel's options; anything else is a miss. A later program with the same kernel code on the same
architecture and ``search`` > 0 takes the cached winner without timing.

On the simulated device (``cuda-emulated``) the events time the emulator: the mechanism runs and is
tested there, but its winners mean nothing for a GPU (its architecture, ``emulated``, keeps them apart).
"""

from __future__ import annotations

import hashlib

from luminal.backends.cuda.arena import buffer_bytes
from luminal.backends.cuda.device import ArgBlock
from luminal.backends.cuda.driver import launch_shape
from luminal.backends.cuda.launches import ERROR_FLAG, lower_kernel
from luminal.codegen import ir
from luminal.core.disk_cache import DiskCache
from luminal.core.symbolic import evaluate

REPEATS = 5
SEARCH_VERSION = 1
_DISK = DiskCache("cuda")


def _entry(launches, arch: str) -> str:
    text = "\n".join([f"v{SEARCH_VERSION}", arch, " ".join(launches[0].choices), *(x.kernel.name for x in launches)])
    return f"schedules/{hashlib.sha256(text.encode()).hexdigest()}"


def cached(launches, arch: str) -> str | None:
    """The cached winner among the schedules of the kernel whose default launches are ``launches``."""
    if len(launches[0].choices) < 2:
        return None
    raw = _DISK.read(_entry(launches, arch))
    option = raw.decode("ascii", "replace") if raw is not None else None
    return option if option in launches[0].choices else None


def remember(launches, arch: str, option: str) -> None:
    if option not in launches[0].choices:
        raise ValueError(f"schedule {option!r} is not one of {launches[0].choices}")
    _DISK.write(_entry(launches, arch), option.encode("ascii"))


def search(program, binding, n: int) -> dict:
    """``{id(kernel-graph kernel): option}`` of the kernels whose fastest of up to ``n`` schedules is
    not the one the program runs, timed over ``binding``'s arena after its first call; every winner
    (the default included) is cached."""
    arch = getattr(binding.runtime.device, "arch", "unknown")
    changed, seen = {}, set()
    for step in program.steps:
        k = step.kernel
        if id(k) in seen or not step.launches or len(step.launches[0].choices) < 2:  # (a run's later kernels: none)
            continue
        seen.add(id(k))
        base = lower_kernel(k, target=program.target)  # the cost model's: the cache's key
        running = step.launches[0].choice
        times = {}
        for option in base[0].choices[:max(n, 1)]:
            launches = step.launches if option == running else base if option == base[0].choice \
                else lower_kernel(k, option, program.target)
            times[option] = time_launches(program, binding, step, launches)
        best = min(times, key=times.get)
        program.timings.append((k, times, best))
        remember(base, arch, best)
        if best != running:
            changed[id(k)] = best
    return changed


def time_launches(program, binding, step, launches) -> float:
    """Median seconds of ``launches`` (one kernel-graph kernel's) run alone over ``binding``'s arena,
    the buffers they write redirected to copies, their scratch and error cell to memory of their own."""
    dev, env, states = binding.runtime.device, binding.env, binding.states_at
    owned: list = []

    def alloc(nbytes: int) -> int:
        ptr = dev.alloc(max(int(nbytes), 8))
        owned.append(ptr)
        return ptr

    written = {id(x.args[b.name]) for x in launches for b in x.kernel.buffers if b.access != "r"}
    copies: dict = {}
    scratch: dict = {}
    flag = alloc(8)
    runs = []
    try:
        for launch in launches:
            params = {p: ir.derived_value(p, env) for p in launch.kernel.params}
            ptrs, extents = [], []
            for b in launch.kernel.buffers:
                kbuf = launch.args[b.name]
                if kbuf is None:
                    dtype, count = launch.scratch[b.name]
                    nbytes = evaluate(count, env) * dtype.itemsize
                    if b.name not in scratch:
                        scratch[b.name] = alloc(nbytes)
                    ptr = scratch[b.name]
                elif kbuf == ERROR_FLAG:
                    ptr, nbytes = flag, 8
                else:
                    real = step.links.get(kbuf, kbuf)
                    nbytes = buffer_bytes(real, env)
                    ptr = binding.address(real, states)
                    if id(kbuf) in written:
                        if id(kbuf) not in copies:
                            copies[id(kbuf)] = alloc(nbytes)
                            dev.copy(copies[id(kbuf)], ptr, nbytes)
                        ptr = copies[id(kbuf)]
                ptrs.append(ptr)
                extents.append(nbytes)
            grid, block = launch_shape(launch.kernel, params)
            runs.append((program.function(launch), grid, block, ArgBlock.pack(launch.kernel, ptrs, extents, params)))

        def run():
            for f, grid, block, args in runs:
                dev.launch(f, grid, block, args)

        run()  # a warm-up (and the copies' first touch)
        times = []
        for _ in range(REPEATS):
            start, end = dev.event(), dev.event()
            dev.record(start)
            run()
            dev.record(end)
            dev.synchronize()
            times.append(dev.elapsed_ms(start, end) / 1e3)
        return sorted(times)[len(times) // 2]
    finally:
        dev.synchronize()
        for ptr in owned:
            binding.runtime.release(ptr)
