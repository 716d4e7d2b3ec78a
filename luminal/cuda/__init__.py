"""The CUDA backend: renders kernel graphs to CUDA C, compiles them with NVRTC and launches them
through cuda-python (the optional ``cuda`` extra). Reads only the compiler's kernel graph."""
