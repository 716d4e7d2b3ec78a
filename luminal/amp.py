"""``lm.amp``: torch.amp's ``autocast`` by its path (``torch.amp.autocast("cuda", dtype=...)`` ports as
``lm.amp.autocast``), which fails naming luminal's mixed precision: ``train.compile_step(...,
compute_dtype=lm.float16, scaler=train.GradScaler())`` (``frontend/eager.py``)."""

from luminal.frontend.eager import autocast

__all__ = ["autocast"]
