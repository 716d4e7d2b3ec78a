"""The core layer, under everything and importing nothing else from ``luminal``: dtypes, symbolic
dims, views, the primitive records and their numpy semantics, errors that point at user code, graph
walks, the kernel graph and memory plan (the compiler's hand-off to backends), the backend protocol
and registry, and safetensors files."""
