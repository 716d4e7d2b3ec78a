"""Code generation shared by the code-generating backends: the kernel IR (``ir.py``), the lowering of
a kernel graph's per-element code into it, and the CPU target (LLVM through llvmlite). Reads only
``luminal.core``; the backends read it."""
