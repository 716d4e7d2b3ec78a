"""``lm.amp``: torch.amp's names by their paths. ``torch.amp.GradScaler("cuda", ...)`` ports as
``lm.amp.GradScaler`` (``train.GradScaler``, which the compiled step drives: ``train.compile_step(...,
compute_dtype=lm.float16, scaler=scaler)``); ``torch.amp.autocast("cuda", dtype=...)`` ports as
``lm.amp.autocast``, which fails naming luminal's mixed precision, that same ``compute_dtype``
(``frontend/eager.py``)."""

from luminal.frontend.eager import autocast
from luminal.train.amp import GradScaler

__all__ = ["GradScaler", "autocast"]
