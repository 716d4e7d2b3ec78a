"""One IR kernel run once on a device, over host arrays: the plain path for tests and one-off launches
(the runtime, ``binding.py``, is the path of programs).

Every buffer is allocated and uploaded, the kernel launched with every argument typed (``ArgBlock``),
the buffers it writes (access "w"/"rw") downloaded back into their arrays in place after one
synchronize, and everything freed. Through the device layer, so it runs the same on the GPU
(``runtime.gpu().device``) and on the simulated device.
"""

from __future__ import annotations

import numpy as np

from luminal.backends.cuda.device import ArgBlock, Device
from luminal.backends.cuda.driver import launch_shape
from luminal.codegen import ir
from luminal.core import dtype as dt


def _staging(b: ir.Buf, arr) -> np.ndarray:
    """The bytes the device holds for host array ``arr`` of buffer ``b`` (bfloat16: float32 on the host,
    its 16 high bits on the device; raw uint16 bits are taken as they are)."""
    if not isinstance(arr, np.ndarray):
        raise TypeError(f"buffer {b.name!r}: expected a numpy array, got {type(arr).__name__}")
    if not arr.flags.c_contiguous:
        raise ValueError(f"buffer {b.name!r}: the array must be C-contiguous (outputs are written back in place)")
    if b.dtype is dt.bfloat16:
        if arr.dtype == np.uint16:
            return arr
        if arr.dtype != np.float32:
            raise TypeError(f"buffer {b.name!r} (bfloat16): expected float32 (or uint16 bits), got {arr.dtype}")
        return (dt.round_bf16(arr).view(np.uint32) >> 16).astype(np.uint16)
    want = np.dtype(np.int64) if b.dtype is ir.INDEX else b.dtype.np
    if arr.dtype != want:
        raise TypeError(f"buffer {b.name!r} ({b.dtype.name}): expected {want}, got {arr.dtype}")
    return arr


def launch_once(device: Device, kernel: ir.Kernel, buffers: dict, params: dict) -> None:
    """Run ``kernel`` once on ``device`` over the host arrays ``buffers`` (name -> C-contiguous numpy
    array of the buffer's storage dtype; bfloat16 as float32 or as uint16 bits) with scalar ``params``
    (name -> int); the arrays of the buffers it writes get the results in place. Synchronous."""
    missing = [b.name for b in kernel.buffers if b.name not in buffers]
    if missing:
        raise KeyError(f"kernel {kernel.name}: no array for buffers {missing}")
    grid, block = launch_shape(kernel, params)
    staged = [_staging(b, buffers[b.name]) for b in kernel.buffers]
    device.use()
    function = device.function(kernel)
    ptrs: list[int] = []
    try:
        for host in staged:
            ptrs.append(device.alloc(max(4, -(-host.nbytes // 4) * 4)))  # whole words: 16-bit atomics CAS 32 bits
            if host.nbytes:
                device.upload(ptrs[-1], host)
        device.launch(function, grid, block, ArgBlock.pack(kernel, ptrs, [h.nbytes for h in staged], params))
        back = []
        for b, host, ptr in zip(kernel.buffers, staged, ptrs):
            if b.access != "r" and host.nbytes:
                out = host if host is buffers[b.name] else np.empty_like(host)
                device.download(out, ptr)
                back.append((b, out))
        device.synchronize()
        for b, out in back:
            if out is not buffers[b.name]:  # bfloat16 bits back into the float32 array
                buffers[b.name][...] = (out.astype(np.uint32) << 16).view(np.float32).reshape(buffers[b.name].shape)
    finally:
        for ptr in ptrs:
            device.free(ptr)
