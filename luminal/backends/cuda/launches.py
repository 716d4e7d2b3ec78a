"""Each kernel-graph kernel as GPU launches: the one lowering (``codegen/lowering``) with the ``CUDA``
target record, over buffers the device lays out whole and row-major in the arena.

Kernels take the symbolic dims as parameters (the lowering's ``memory.env`` is None), so a program
is lowered once and launched for any batch size; a rolled loop's body is lowered once and every call
launches its kernels over the call's buffers (``Launch.args``, rebound per call by the binding). A
kernel is named by its schedule and a digest of its code: the same code gets the same name in every
program, so the NVRTC cache hits.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from luminal.backends.cuda import library
from luminal.codegen import ir, lowering
from luminal.codegen.lower import Placed
from luminal.codegen.lowering import rows
from luminal.codegen.target import CUDA
from luminal.core.symbolic import prod
from luminal.core.view import contiguous_strides

ERROR_FLAG = "error_flag"  # int32[2]: set to (1, the index) by a kernel that finds an index out of range


@dataclass
class Launch:
    """One GPU kernel and what it is launched over: ``args`` maps each of the kernel's buffer names to
    the kernel-graph Buffer it reads or writes (``None``: a scratch of ``scratch[name]`` = (dtype,
    element count Dim), owned by the kernel-graph kernel's launches; ``ERROR_FLAG``: the error cell).
    ``choice`` is the schedule built, ``choices`` every schedule the lowering offers (default first)."""

    kernel: ir.Kernel
    args: dict
    scratch: dict = field(default_factory=dict)
    choice: str = ""
    choices: tuple = ()


class DeviceMemory:
    """Buffers as the device lays them out (``codegen/lowering/work.py``'s protocol): every buffer
    whole and row-major from its start, named ``b0, b1, ...`` in a kernel-graph kernel's launches."""

    env = None  # dims stay symbolic: parameters of the kernel
    contiguous_outputs = True

    def __init__(self):
        self.args: dict[str, object] = {}
        self.scratches: dict[str, tuple] = {}
        self._names: dict[int, str] = {}

    def _name(self, buf) -> str:
        n = self._names.get(id(buf))
        if n is None:
            n = self._names[id(buf)] = f"b{len(self._names)}"
            self.args[n] = buf
        return n

    def read(self, buf, view) -> Placed:
        return Placed(self._name(buf), buf.dtype, view.offset, tuple(view.strides), view.mask, view.pad)

    def output(self, buf) -> Placed:
        return Placed(self._name(buf), buf.dtype, 0, tuple(contiguous_strides(buf.shape)))

    def scratch(self, tag: str, dtype, shape) -> Placed:
        if tag == "flag":
            self.args[ERROR_FLAG] = ERROR_FLAG
            return Placed(ERROR_FLAG, dtype, 0, (1,))
        name = f"s_{tag}"
        self.args[name] = None
        self.scratches[name] = (dtype, prod(shape))
        return Placed(name, dtype, 0, tuple(contiguous_strides(shape)))


_TAGS = {("reduce", "thread"): "reduce_thread", ("reduce", "row"): "reduce_row", ("reduce", "split"): "reduce_split",
         ("matmul", "gemv"): "gemv", ("matmul", "mma"): "matmul_mma", ("matmul", "tiled"): "matmul_tiled",
         ("matmul", "blocked"): "matmul_blocked", ("matmul", "library"): "matmul_library",
         ("reduce", "warp"): "reduce_warp", ("matmul", "warp"): "gemv_warp",
         ("matmul", "thread"): "reduce_thread", ("matmul", "row"): "reduce_row", ("scatter_add", "atomics"): "scatter",
         ("scatter_add", "lines"): "scatter_lines"}


def lower_kernel(k, option: str | None = None, target=CUDA) -> list[Launch]:
    """The launches computing kernel-graph kernel ``k`` in schedule ``option`` (None: the cost
    model's) on ``target`` (``CUDA``, or ``CUDA_LIBRARY`` where the device has cuBLASLt: products it
    takes as they lie are library calls, ``library.py``). Not a call: a program lowers a body's
    kernels once and launches them per call."""
    memory = DeviceMemory()
    choices = options(k, target, memory)
    option = choices[0] if option is None else option
    if option not in choices:
        raise ValueError(f"cuda: a {k.kind} kernel has no schedule {option!r} here (options: {choices})")
    tag = _TAGS.get((k.kind, option), k.kind)
    if option == "library":
        kernels = library.lower(k, target, memory, tag)
    else:
        kernels = lowering.lower(k, target, memory, tag, option)
    return [Launch(_named(kern), memory.args, memory.scratches, option, choices) for kern in kernels]


def options(k, target, memory) -> tuple:
    """The one lowering's schedules of ``k`` on ``target``, less ``library`` where cuBLASLt cannot
    read the operands as they lie (``library.layout``)."""
    choices = lowering.options(k, target, memory)
    if "library" in choices and library.layout(k, memory) is None:
        choices = tuple(c for c in choices if c != "library")
    return choices


def lower_run(run: list) -> list[Launch]:
    """The launches computing a run of kernel-graph kernels in one pass over their rows
    (``codegen/lowering/rows.py``: softmax, LayerNorm, RMSNorm)."""
    memory = DeviceMemory()
    return [Launch(_named(kern), memory.args, memory.scratches, "rows", ("rows",))
            for kern in rows.lower(run, CUDA, memory, "rows")]


def _named(k):
    """``k`` (an IR kernel, or a library product) named by its schedule and a digest of its code."""
    code = ir.fingerprint(k) if isinstance(k, ir.Kernel) else k.text()
    k.name = f"{k.name}_{hashlib.sha256(code.encode()).hexdigest()[:10]}"
    return k
