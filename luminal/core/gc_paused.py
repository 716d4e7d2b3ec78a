"""``gc_paused()``: the cyclic garbage collector off for a block that allocates much and frees little.

Compiling and laying out a program allocate an object or more per node or kernel and free next to
nothing, so every collection pass would only walk the growing heap again (measured: up to half of a
stage's time, and on a deep graph's first run a good part of a second). The collector comes back on,
if it was on, when the block ends; nested blocks leave it to the outermost.
"""

from __future__ import annotations

import gc
from contextlib import contextmanager


@contextmanager
def gc_paused():
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
