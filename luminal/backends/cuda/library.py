"""Library products on the CUDA backends: a matmul computed by the device's BLAS (cuBLASLt on a GPU,
``cublaslt.py``; numpy on the simulated device, from the same descriptor), then its epilogue as a
kernel of the one lowering (``codegen/lowering/epilogue.py``), as the CPU backend does with BLAS.

A product takes the ``library`` schedule (:func:`layout`) where cuBLASLt can read it as it lies: a
float16, bfloat16 or float32 product with one M, N and K axis (``matmul.matmul_axes``), each operand
a strided batch of matrices (a unit stride along one of its two matrix axes; its batch axes merging
into one stride, 0 for an operand shared by every batch). Those are conditions on the views'
symbolic strides, so they hold for every binding of the dims; the numbers are evaluated per launch.

cuBLASLt is column-major. The row-major ``C = A @ B`` (M x N) is the column-major ``C^T = B^T A^T``
(N x M), so the call's first operand is B and its second A (:meth:`LibraryGemm.call`). An operand
stored row-major (unit stride along its columns) is, read column-major, already its transpose (no
op); one stored column-major is read transposed (``CUBLAS_OP_T``). The product is computed in float32
(``CUBLAS_COMPUTE_32F``: no TF32, no reduced-precision reductions) and rounded once into C's dtype,
as the reference rounds a 16-bit product once. C is the product's own output buffer where an output
is just the product (``Acc``) in its dtype, else a scratch the epilogue reads.

:class:`LibraryGemm` is what the runtime launches in place of an IR kernel: it has the buffers and
parameters a launch is packed from, and a one-block "grid", so arenas, argument blocks, graphs and
the schedule search take it like any launch; the device runs it (``SimulatedDevice``: :func:`simulate`;
``DriverDevice``: ``cublasLt``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from luminal.backends.cuda.device import DeviceError
from luminal.codegen import emulator, ir
from luminal.codegen.lower import Placed, dim
from luminal.codegen.lowering import matmul
from luminal.codegen.lowering.epilogue import epilogue
from luminal.codegen.lowering.work import one, sizes
from luminal.core import dtype as dt
from luminal.core.symbolic import nonnegative, prod, same
from luminal.core.view import contiguous_strides

DTYPES = (dt.float16, dt.bfloat16, dt.float32)  # what cuBLASLt multiplies here (all operands alike)


class LibraryError(DeviceError):
    """A library product whose numbers, for this binding, are not a matrix cuBLASLt takes (the message
    names the kernel and the operand): a device error, as cuBLASLt's refusal would be."""


@dataclass(frozen=True)
class Matrix:
    """One operand as cuBLASLt stores it: column-major ``rows x cols`` with leading dimension ``ld``
    (elements), ``batch_stride`` elements from one batch's matrix to the next (0: one matrix for all),
    at device address ``ptr``, of ``dtype``."""

    ptr: int
    dtype: dt.DType
    rows: int
    cols: int
    ld: int
    batch_stride: int

    def span(self, batch: int) -> int:
        """Bytes from ``ptr`` to the end of the last element the call touches."""
        if self.rows == 0 or self.cols == 0 or batch == 0:
            return 0
        last = (batch - 1) * self.batch_stride + (self.cols - 1) * self.ld + self.rows
        return last * self.dtype.itemsize


@dataclass(frozen=True)
class GemmCall:
    """One cuBLASLt matmul in its own terms: ``D = op(A) @ op(B)`` (``m x n``, ``k`` summed) for each
    of ``batch`` matrices, ``op`` a transpose where ``transa`` / ``transb``; D is C (beta 0), float32
    compute. ``name``: the kernel, for messages."""

    name: str
    transa: bool
    transb: bool
    m: int
    n: int
    k: int
    batch: int
    a: Matrix
    b: Matrix
    c: Matrix

    def key(self) -> tuple:
        """Everything a cuBLASLt plan depends on (not the addresses): descriptors are cached by it."""
        shape = lambda x: (x.dtype.name, x.rows, x.cols, x.ld, x.batch_stride)  # noqa: E731
        return (self.transa, self.transb, self.m, self.n, self.k, self.batch, shape(self.a), shape(self.b),
                shape(self.c))


@dataclass(eq=False)
class LibraryGemm:
    """A library product, launched as a kernel is (module docstring). Row-major roles: ``C[batch] =
    A[batch] @ B[batch]``, ``m x n`` with ``k`` summed; ``geometry`` holds, for A, B and C in turn,
    ``(offset, row stride, column stride, batch stride)`` in elements, INDEX values over ``params``."""

    name: str
    buffers: tuple  # ir.Buf of A ("r"), B ("r"), C ("w")
    m: ir.V
    n: ir.V
    k: ir.V
    batch: ir.V
    geometry: tuple
    params: tuple = ()
    grid: tuple = (ir.const(1),)
    block: tuple = (1,)
    shared: tuple = ()
    notes: dict = field(default_factory=lambda: {"schedule": "library"})

    def __post_init__(self):
        values = [self.m, self.n, self.k, self.batch, *(v for g in self.geometry for v in g)]
        self.params = tuple(sorted({v.arg for v in ir.walk_values_of(values) if v.op == "param"}))

    gpu = True  # (a device launch, not a CPU kernel)

    def text(self) -> str:
        show = ir.show_value
        ops = ", ".join(f"{b.name}: {b.dtype.name}[{' '.join(show(x) for x in g)}]"
                        for b, g in zip(self.buffers, self.geometry))
        return (f"library gemm {self.name}: {self.buffers[2].name} = {self.buffers[0].name} @ {self.buffers[1].name}"
                f", m {show(self.m)} n {show(self.n)} k {show(self.k)} batch {show(self.batch)}"
                f" (offset, row, column, batch strides: {ops})")

    def call(self, pointers, params: dict) -> GemmCall:
        """The cuBLASLt call for buffers at ``pointers`` (A, B, C) and parameter values ``params``."""
        from luminal.backends.cuda.render import eval_index

        m, n, k, batch = (eval_index(v, params) for v in (self.m, self.n, self.k, self.batch))
        (ao, ar, ac, ab), (bo, br, bc, bb), (co, cr, cc, cb) = (
            tuple(eval_index(v, params) for v in g) for g in self.geometry)
        (a, b, c), (pa, pb, pc) = self.buffers, (int(p) for p in pointers)
        if not (cc == 1 or n == 1):
            raise LibraryError(f"{self.name}: C's columns are not contiguous (stride {cc})")
        # C^T = B^T A^T, column-major: the first operand is B (k x n, read as its n x k transpose)
        tb, mb = self._operand("B", b.dtype, pb + bo * b.dtype.itemsize, k, n, br, bc, bb)
        ta, ma = self._operand("A", a.dtype, pa + ao * a.dtype.itemsize, m, k, ar, ac, ab)
        ldc = cr if m > 1 else max(n, 1)
        mc = Matrix(pc + co * c.dtype.itemsize, c.dtype, n, m, max(ldc, 1), cb)
        if min(m, n, batch) > 0 and ldc < n:  # (an empty product writes nothing)
            raise LibraryError(f"{self.name}: C's rows overlap (row stride {cr} for {n} columns)")
        return GemmCall(self.name, tb, ta, n, m, k, batch, mb, ma, mc)

    def _operand(self, what: str, dtype, ptr: int, rows: int, cols: int, sr: int, sc: int, sb: int):
        """``(transposed, Matrix)``: the row-major ``rows x cols`` operand (strides ``sr``, ``sc``)
        as cuBLASLt reads its transpose: stored row-major it is the transpose as it lies (no op);
        stored column-major, it is read with ``CUBLAS_OP_T``. An empty one is read not at all."""
        if rows == 0 or cols == 0:
            return False, Matrix(ptr, dtype, cols, rows, max(cols, 1), 0)
        if sc == 1 or cols == 1:
            ld = sr if rows > 1 else max(cols, 1)
            if ld >= max(cols, 1):
                return False, Matrix(ptr, dtype, cols, rows, ld, sb)
        if sr == 1 or rows == 1:
            ld = sc if cols > 1 else max(rows, 1)
            if ld >= max(rows, 1):
                return True, Matrix(ptr, dtype, rows, cols, ld, sb)
        raise LibraryError(f"{self.name}: operand {what} ({rows} x {cols}, strides {sr}, {sc}) is not a matrix "
                           "cuBLASLt reads (one unit stride, the other covering it)")


def layout(k, memory):
    """``(slot of A, slot of B, axes)`` where product ``k`` can be a library call (module docstring),
    else None. ``axes``: ``matmul.matmul_axes``'s (batch axes, row axis, column axis, k axis)."""
    axes = matmul.matmul_axes(k)
    if axes is None or any(v.mask is not None for _, v in k.inputs):
        return None
    roles = matmul.roles(k, axes)
    if roles is None or k.acc_dtype not in DTYPES or any(b.dtype is not k.acc_dtype for b, _ in k.inputs):
        return None
    batch_axes, r, c, kx = axes
    domain = sizes(memory, k.domain)
    (sa, sb) = roles
    pa, pb = (memory.read(*k.inputs[s]) for s in roles)
    for p, rows, cols in ((pa, r, kx), (pb, kx, c)):
        stride = _batch_stride(p.strides, batch_axes, domain)
        if stride is None or not nonnegative(stride):
            return None
        if not _matrix_layout(domain[rows], domain[cols], p.strides[rows], p.strides[cols]):
            return None
    return sa, sb, axes


def _matrix_layout(rows, cols, sr, sc) -> bool:
    """Whether a ``rows x cols`` operand with strides ``(sr, sc)`` is, for every binding, row-major
    (unit column stride, a row stride covering the columns) or column-major (the other way round):
    what a leading dimension describes. Not for overlapping rows (a sliding window's), reversed
    strides (a flip) or a broadcast inside the matrix."""
    def covers(ld, extent):
        return nonnegative(ld - extent)  # (an empty extent: an empty product, read not at all)

    return ((one(cols) or same(sc, 1)) and (one(rows) or covers(sr, cols))) or \
        ((one(rows) or same(sr, 1)) and (one(cols) or covers(sc, rows)))


def _batch_stride(strides, batch_axes, domain):
    """The one stride of the batch axes (0 where they are all of size 1), or None when they do not
    merge (each a stride of the next's times its size)."""
    live = [a for a in batch_axes if not one(domain[a])]
    for i, j in zip(live, live[1:]):
        if not same(strides[i], strides[j] * domain[j]):
            return None
    return strides[live[-1]] if live else 0


def lower(k, target, memory, name: str) -> list:
    """Product ``k`` (where :func:`layout` takes it) as its :class:`LibraryGemm`, then the epilogue
    kernel of the outputs that are not the product itself."""
    found = layout(k, memory)
    if found is None:
        raise ValueError(f"{name}: kernel {k} is not a product cuBLASLt takes as it lies")
    sa, sb, (batch_axes, r, c, kx) = found
    domain = sizes(memory, k.domain)
    kept = [a for a in range(len(domain)) if a not in k.axes]
    out_shape = tuple(domain[a] for a in kept)
    direct = next(((b, e) for b, e in k.outputs if e.op == "Acc" and b.dtype is k.acc_dtype), None)
    # C: a buffer stored row-major in the output shape's order (the device keeps outputs whole)
    if direct is not None:
        placed = memory.output(direct[0])
        pc = Placed(placed.name, k.acc_dtype, 0, tuple(contiguous_strides(out_shape)))
    else:
        pc = memory.scratch("acc", k.acc_dtype, out_shape)
    c_strides = dict(zip(kept, pc.strides))
    pa, pb = memory.read(*k.inputs[sa]), memory.read(*k.inputs[sb])

    def geometry(p, rows, cols, strides):
        return tuple(dim(x) for x in (p.offset, strides[rows], strides[cols],
                                      _batch_stride(strides, batch_axes, domain)))

    full = {a: c_strides.get(a, 0) for a in range(len(domain))}
    gemm = LibraryGemm(
        name, (ir.Buf(pa.name, pa.dtype, "r"), ir.Buf(pb.name, pb.dtype, "r"), ir.Buf(pc.name, pc.dtype, "w")),
        dim(domain[r]), dim(domain[c]), dim(domain[kx]), dim(prod(domain[a] for a in batch_axes)),
        (geometry(pa, r, kx, pa.strides), geometry(pb, kx, c, pb.strides), geometry(pc, r, c, full)))
    rest = [(b, e) for b, e in k.outputs if direct is None or b is not direct[0]]
    if not rest:
        return [gemm]
    epi = dataclasses.replace(k, outputs=rest)
    return [gemm, *epilogue(epi, target, memory, Placed(pc.name, k.acc_dtype, 0, pc.strides), f"{name}_epilogue")]


# the simulated device's library: the descriptor's definition, in numpy ----------------------------

def simulate(call: GemmCall, bytes_at, check_only: bool = False) -> None:
    """Run ``call`` over device memory (``bytes_at(ptr, nbytes)``: the live bytes, a DeviceError when
    they are not inside one allocation): each operand read as the column-major batch its descriptor
    says, the products summed in float64, rounded to float32 (the compute type) and then once into
    C's dtype."""
    views = [_matrix(x, call.batch, bytes_at) for x in (call.a, call.b, call.c)]
    if check_only or call.batch == 0 or call.m == 0 or call.n == 0:
        return
    a, b = (emulator.host_array(v.reshape(-1), x.dtype, v.shape).astype(np.float64)
            for v, x in zip(views[:2], (call.a, call.b)))
    a = np.swapaxes(a, 1, 2) if call.transa else a
    b = np.swapaxes(b, 1, 2) if call.transb else b
    d = np.matmul(a, b).astype(np.float32)  # (batch, m, n)
    out = views[2]
    out[...] = emulator.device_array(d, call.c.dtype).reshape(d.shape)


def _matrix(x: Matrix, batch: int, bytes_at) -> np.ndarray:
    """Operand ``x`` as a ``(batch, rows, cols)`` view of its storage (writable: C is written through it)."""
    storage = np.dtype(np.uint16) if x.dtype is dt.bfloat16 else x.dtype.np
    span = x.span(batch)
    raw = bytes_at(x.ptr, span) if span else np.empty(0, np.uint8)
    if not span:
        return np.empty((batch, x.rows, x.cols), storage)
    if x.ptr % storage.itemsize:
        raise LibraryError(f"operand at {x.ptr:#x} is misaligned for {x.dtype.name}")
    base = raw.view(storage)
    item = storage.itemsize
    return np.lib.stride_tricks.as_strided(base, (batch, x.rows, x.cols),
                                           (x.batch_stride * item, item, x.ld * item))
