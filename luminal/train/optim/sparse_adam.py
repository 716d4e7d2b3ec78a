"""SparseAdam: refused, naming Adam. luminal's gradients are dense (an ``nn.Embedding(sparse=True)``'s
too), and torch's SparseAdam takes only sparse ones."""

from __future__ import annotations

from typing import NoReturn


class SparseAdam:
    """torch.optim.SparseAdam, which is not available: its update is Adam's applied lazily to the
    entries a sparse gradient holds (the rows an embedding looked up in the batch), and luminal has no
    sparse gradients (``nn.Embedding(sparse=True)``'s gradient is dense), which torch's SparseAdam
    refuses too. Use ``train.Adam``: it moves every row's moments at every step, where SparseAdam
    leaves the rows not looked up as they are, so the two differ where a row sits out a step.
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, maximize=False) -> NoReturn:
        raise NotImplementedError("SparseAdam: luminal has no sparse gradients (nn.Embedding(sparse=True)'s gradient "
                                  "is dense, and torch's SparseAdam refuses dense gradients); use train.Adam, which "
                                  "also moves the moments of rows not looked up in a batch")
