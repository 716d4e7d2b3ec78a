"""The global random generator: parameter initialisation and the seeds of new graphs draw from it.

``lm.manual_seed(n)`` makes model initialisation and dropout masks reproducible, as
``torch.manual_seed`` does (the streams differ from torch's).
"""

from __future__ import annotations

import numpy as np

_rng = np.random.default_rng()


def manual_seed(seed: int) -> None:
    """Reseed the global generator that parameter initialisation and new graphs' dropout draw from
    (``torch.manual_seed``; the streams differ from torch's).

    Args:
        seed: the seed.
    """
    global _rng
    _rng = np.random.default_rng(seed)


def default_rng() -> np.random.Generator:
    return _rng
