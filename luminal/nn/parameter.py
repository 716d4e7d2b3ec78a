"""``nn.Parameter``: a trainable persistent State, and ``Buffer`` for non-trainable module state."""

from __future__ import annotations

import numpy as np

from luminal.frontend.state import State


class Parameter(State):
    """A trainable array owned by a module. In a graph it is a persistent input
    (``p.on(graph)``); optimizers update ``p.data`` in place, so the module always holds the
    current values. torch's ``Parameter(data, False)`` (its second argument is ``requires_grad``) is
    read as ``requires_grad=False``: a bool is never a dtype."""

    def __init__(self, data, dtype=None, requires_grad: bool = True, name: str | None = None):
        if isinstance(dtype, (bool, np.bool_)):  # torch's Parameter(data, requires_grad): a flag, never a dtype
            dtype, requires_grad = None, bool(dtype)
        super().__init__(data, dtype, name)
        self.requires_grad = requires_grad

    def on(self, graph):
        """This parameter as a tensor of ``graph`` (the same node every time)."""
        return graph.state(self)

    def requires_grad_(self, requires_grad: bool = True) -> Parameter:
        """Mark this parameter trainable (True) or frozen (False): ``train.compile_step`` gives a frozen
        parameter no gradient and no update. Returns the parameter.

        Args:
            requires_grad: True to train, False to freeze.
        """
        self.requires_grad = bool(requires_grad)
        return self


class Buffer(State):
    """Non-trainable module state (BatchNorm's running statistics): saved in ``state_dict`` when
    ``persistent``, never given to optimizers."""

    def __init__(self, data, dtype=None, persistent: bool = True, name: str | None = None):
        super().__init__(data, dtype, name)
        self.persistent = persistent

    def on(self, graph):
        """This buffer as a tensor of ``graph`` (the same node every time).

        Args:
            graph: the Graph that reads it.
        """
        return graph.state(self)
