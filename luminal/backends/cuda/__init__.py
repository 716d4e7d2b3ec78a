"""The CUDA target: the GPU lowering of a kernel graph into the kernel IR (``lower.py``), the
emulator that runs that IR on the CPU (``emulator.py``), the CUDA C renderer (``render.py``) and the
NVRTC compiler (``nvrtc.py``)."""
