"""The steps of a laid-out CPU program: what one binding of the dims runs, in order, as typed data.

Laying a binding out (``compiled.Binding``) makes a list of steps; two consumers run them:

- the generated driver (``driver.build``): each run of native steps (kernel calls, GEMMs it can
  call through cblas) becomes one table walked by one native call; the other steps are called as
  they are, from Python;
- the Python path (:func:`run`): every step called from Python in order (a kernel through ctypes,
  a GEMM through ``np.matmul``), the executable definition the driver must agree with.

| step          | does
|---------------|-----
| ``Kernel``    | a generated kernel over its axis-0 items ``[start, stop)`` (``codegen/llvm.py``'s ABI)
| ``Gemm``      | ``np.matmul(a, b, out=out)`` (BLAS; the driver calls cblas directly where it can)
| ``Copy``      | ``np.copyto(dst, src)``: an operand laid out for BLAS, a masked view's valid box
| ``Round``     | a float32 array rounded to bfloat16 in place (a half GEMM's result)
| ``IndexCheck``| raise the reference's IndexError if a gather/scatter kernel flagged an index
| ``Split``     | (``parallel.py``) parts of steps, one per thread, run at once

A step unpacks as the call it makes, ``function, args = step``, which is how the driver and the
thread splitter read it. Operands may be :class:`InputView` placeholders for caller arrays (inputs,
states, random draws), known by shape and strides before the arrays are: a rebind resolves them.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass, field

import numpy as np

from luminal.core import numpy_ops as ops


class InputView:
    """A strided view over a caller array, known by shape and strides before the array is."""

    __slots__ = ("name", "shape", "dtype", "strides", "offset", "value")

    def __init__(self, name, shape, dtype, strides, offset):
        self.name, self.shape, self.dtype = name, shape, dtype
        self.strides, self.offset, self.value = strides, offset, None  # bytes

    def resolve(self, arr: np.ndarray) -> np.ndarray:
        if any(n == 0 for n in self.shape):
            return np.empty(self.shape, self.dtype)
        return np.ndarray(self.shape, self.dtype, arr, self.offset, self.strides)


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

    def run(self) -> None:
        """Call it from Python, caller-array views resolved to the arrays of the last rebind."""
        self.fn(*(a.value if type(a) is InputView else a for a in self.args))


@dataclass(eq=False)
class Kernel(Step):
    """A call of generated kernel ``kernel`` (its IR) over axis-0 items ``[start, stop)``: ``function``
    its compiled code, ``pointers`` its buffers' addresses (caller arrays' slots written on rebind),
    ``params`` the values of the dims it reads."""

    function: object
    pointers: object  # ctypes array of void pointers
    params: object  # ctypes array of int64
    start: int
    stop: int
    kernel: object = None  # the ir.Kernel (for inspection and the cost model)
    _args: tuple = field(default=(), repr=False)

    def __post_init__(self):
        # ctypes objects of the argument types: ctypes then passes them as they are instead of
        # converting four ints on every call (about 0.15 us of a 0.5 us call)
        self._args = (ctypes.c_void_p(ctypes.addressof(self.pointers)), ctypes.c_void_p(ctypes.addressof(self.params)),
                      ctypes.c_int64(self.start), ctypes.c_int64(self.stop))

    @property
    def fn(self):
        return self.function

    @property
    def args(self) -> tuple:
        return self._args

    def with_range(self, start: int, stop: int) -> Kernel:
        return Kernel(self.function, self.pointers, self.params, start, stop, self.kernel)


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


def run(steps: list) -> None:
    """The Python path: every step called from Python, in order (a ``Split``'s parts one after the
    other: they touch disjoint rows)."""
    for s in steps:
        parts = getattr(s, "parts", None)
        if parts is not None:
            for part in parts:
                run(part)
        else:
            s.run()
