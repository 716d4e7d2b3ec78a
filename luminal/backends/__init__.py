"""Backends: each sub-package registers itself with ``luminal.core.backend`` under a name and reads only
the core (the kernel graph, the memory plan, the primitive records). See ``docs/architecture.md``."""
