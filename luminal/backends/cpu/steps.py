"""The schedule of a CPU program: what one binding of the dims runs, in order, as typed data.

Planning (``plan.py``) makes it from the kernel graph and the binding's sizes, without touching
memory: steps whose operands are :class:`Ref` s, views of memory known by shape, strides and offset
before the memory is: either a caller array (by name) or one of the :class:`Storage` the schedule
lists. A binding (``compiled.Binding``) allocates the storages and runs the steps two ways:

- through the generated driver (``driver.build``): each run of native steps (kernel calls, GEMMs it
  can call through cblas) becomes one table walked by one native call; the other steps are called
  as they are, from Python;
- through the Python path (:func:`run`): every step called from Python in order (a kernel through
  ctypes, a GEMM through ``np.matmul``), the executable definition the driver must agree with.

| step          | does
|---------------|-----
| ``Kernel``    | a generated kernel over its axis-0 items ``[start, stop)`` (``codegen/llvm.py``'s ABI)
| ``Gemm``      | ``np.matmul(a, b, out=out)`` (BLAS; the driver calls cblas directly where it can)
| ``Copy``      | ``np.copyto(dst, src)``: an operand laid out for BLAS, a masked view's valid box
| ``Round``     | a float32 array rounded to bfloat16 in place (a half GEMM's result)
| ``IndexCheck``| raise the reference's IndexError if a gather/scatter kernel flagged an index
| ``Split``     | (``parallel.py``) parts of steps, one per thread, run at once

A step unpacks as the call it makes, ``function, args = step`` (its operands still Refs), which is
how the driver and the thread splitter read it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from luminal.core import numpy_ops as ops
from luminal.core import prefault


class Ref:
    """A strided view of memory that the schedule names but does not hold: ``space`` is a caller array's
    name (an input, a state, a random draw: bound on every rebind) or the index of one of the schedule's
    :class:`Storage` (allocated by the binding). Byte ``strides`` and ``offset``, as numpy's; plain ints.
    It answers ``shape``, ``dtype``, ``strides`` and ``size`` as an array would, which is what the
    driver and the thread splitter read."""

    __slots__ = ("space", "shape", "dtype", "strides", "offset")

    def __init__(self, space, shape, dtype, strides, offset=0):
        self.space, self.dtype = space, np.dtype(dtype)
        self.shape, self.strides, self.offset = tuple(map(int, shape)), tuple(map(int, strides)), int(offset)

    @classmethod
    def contiguous(cls, space, shape, dtype, offset: int = 0) -> Ref:
        dtype = np.dtype(dtype)
        return cls(space, shape, dtype, _byte_strides(shape, dtype.itemsize), offset)

    @property
    def size(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    @property
    def caller(self) -> bool:
        """Whether this views a caller array (bound anew on a rebind) rather than the program's own memory."""
        return type(self.space) is str

    def resolve(self, memory: np.ndarray) -> np.ndarray:
        """The array this is a view of, over ``memory`` (its space's array, any dtype: read as bytes)."""
        if 0 in self.shape:
            return np.empty(self.shape, self.dtype)
        return np.ndarray(self.shape, self.dtype, memory, self.offset, self.strides)

    def view(self, shape, strides, offset) -> Ref:
        """A view ``(shape, strides, offset)`` in elements over this one's memory, from its first element."""
        item = self.dtype.itemsize
        return Ref(self.space, shape, self.dtype, [int(s) * item for s in strides], self.offset + int(offset) * item)

    def reshape(self, shape) -> Ref:
        """The same elements in ``shape`` (this one C-contiguous)."""
        assert self.strides == _byte_strides(self.shape, self.dtype.itemsize) or self.size <= 1, \
            "reshape of a strided Ref"
        return Ref.contiguous(self.space, shape, self.dtype, self.offset)

    def box(self, box) -> Ref:
        """The part ``[lo, hi)`` along each axis, ``box`` one ``(lo, hi)`` per axis."""
        offset = self.offset + sum(int(lo) * s for (lo, _), s in zip(box, self.strides))
        return Ref(self.space, [int(hi) - int(lo) for lo, hi in box], self.dtype, self.strides, offset)

    def rows(self, axis: int, lo: int, hi: int) -> Ref:
        """Rows ``lo:hi`` along ``axis``."""
        box = [(0, n) for n in self.shape]
        box[axis] = (lo, hi)
        return self.box(box)

    def __repr__(self):
        return f"Ref({self.space!r}, {self.shape}, {self.dtype}, strides={self.strides}, offset={self.offset})"


def _byte_strides(shape, item: int) -> tuple:
    strides, step = [], item
    for n in reversed(tuple(shape)):
        strides.append(step)
        step *= max(int(n), 1)
    return tuple(reversed(strides))


@dataclass(frozen=True, eq=False)
class Storage:
    """Memory the program owns, one allocation per binding: ``nbytes`` zero bytes, or ``fill``'s
    value in every element of ``dtype`` (a masked view's pad), or ``data`` itself (a constant, read
    only: used in place, never copied)."""

    nbytes: int
    dtype: object = None
    fill: object = None
    data: object = None
    what: str = ""  # what it holds, in words (guard mode's errors: guard.py)

    def allocate(self) -> np.ndarray:
        if self.data is not None:
            return self.data
        if self.fill is not None:  # (-0.0 and NaN pads too: numpy writes the value's own bits)
            return np.full(self.nbytes // np.dtype(self.dtype).itemsize, self.fill, self.dtype)
        # (8-byte aligned; not written here: ``core/prefault.py``'s ``zeros``)
        return prefault.zeros(-(-self.nbytes // 8), np.float64, populate=False).view(np.uint8)


class Step:
    """One step; subclasses say what it calls (``fn``) with what (``args``)."""

    __slots__ = ()

    @property
    def fn(self):
        raise NotImplementedError

    @property
    def args(self) -> tuple:
        raise NotImplementedError

    def __iter__(self):
        return iter((self.fn, self.args))

    def __getitem__(self, i):
        return (self.fn, self.args)[i]

    def with_args(self, args: tuple) -> Step:
        """The same step over other operands (a thread's rows of them)."""
        return type(self)(*args)


@dataclass(frozen=True)
class Library:
    """A kernel of a module written by hand (``gathered_gemm.py``, ``direct_conv.py``): the module (an
    ``llvm.Generated``, its text written only to compile it), whose function has the module's name. A
    :class:`Kernel` step planned with one as its ``function`` gets the compiled function once the
    binding's kernels are compiled, in the same batch (``plan._link``), and keeps the record as its
    ``kernel``."""

    module: object  # llvm.Generated

    @property
    def name(self) -> str:
        return self.module.name


@dataclass(eq=False)
class Kernel(Step):
    """A call of generated kernel ``kernel`` (its IR) over axis-0 items ``[start, stop)``: ``function``
    is its compiled code (``codegen/llvm.py``'s ABI), ``buffers`` where each of its buffers starts
    (``kernel.buffers[i]`` at ``buffers[i]``: ``(space, byte offset)``, the space a caller array's
    name or a Storage's index), ``params`` the values of the dims it reads. The binding makes the
    pointer and parameter arrays the call takes (``compiled.Binding._arguments``)."""

    function: object
    buffers: tuple
    params: tuple
    start: int
    stop: int
    kernel: object = None  # the code it runs, as data: the ir.Kernel, or the Library of a hand-written one

    @property
    def fn(self):
        return self.function

    @property
    def args(self) -> tuple:
        return (self.buffers, self.params, self.start, self.stop)

    def with_range(self, start: int, stop: int) -> Kernel:
        return Kernel(self.function, self.buffers, self.params, start, stop, self.kernel)


@dataclass(eq=False)
class Gemm(Step):
    """``out = a @ b`` (batched as numpy broadcasts), float32 or float64."""

    a: object
    b: object
    out: object

    fn = staticmethod(np.matmul)

    @property
    def args(self) -> tuple:
        return (self.a, self.b, self.out)


@dataclass(eq=False)
class Copy(Step):
    """``dst[...] = src``."""

    dst: object
    src: object

    fn = staticmethod(np.copyto)

    @property
    def args(self) -> tuple:
        return (self.dst, self.src)


@dataclass(eq=False)
class Round(Step):
    """``array`` (float32) rounded to bfloat16 values in place."""

    array: object

    fn = staticmethod(ops.round_bf16_)

    @property
    def args(self) -> tuple:
        return (self.array,)


@dataclass(eq=False)
class IndexCheck(Step):
    """After a gather or scatter_add kernel: raise the reference's IndexError if the kernel flagged an
    index out of range in ``cell`` (the message names the first bad index, so it is found again here,
    in the index view ``src``: the valid box ``valid`` of a padded view of ``shape``), and clear it."""

    cell: np.ndarray
    op: str
    size: int
    src: object
    shape: tuple
    pad: object
    valid: tuple | None

    @property
    def fn(self):
        return check_index

    @property
    def args(self) -> tuple:
        return (self.cell, self.op, self.size, self.src, self.shape, self.pad, self.valid)


def check_index(cell, op: str, size: int, src, shape, pad, valid) -> None:
    """:class:`IndexCheck`'s call (a plain function: what the run's table of calls holds)."""
    if cell[0]:
        cell[0] = 0
        idx = src
        if valid is not None:
            idx = np.full(shape, pad, np.int32)  # (index tensors are int32)
            if src is not None:
                idx[valid] = src
        ops.check_index(np.asarray(idx), size, op)
        raise AssertionError(f"{op}: the generated kernel flagged an index out of range, numpy finds none")


def run(calls: list) -> None:
    """The Python path: every call ``(function, args)`` made from Python, in order (a ``Split``'s parts
    one after the other: they touch disjoint rows)."""
    for f, args in calls:
        parts = getattr(f, "parts", None)
        if parts is not None:
            for part in parts:
                run(part)
        else:
            f(*args)
