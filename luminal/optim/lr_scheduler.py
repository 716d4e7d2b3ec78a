"""torch.optim.lr_scheduler's names: luminal's schedulers (``luminal.train``'s classes, host-side Python
with torch's formulas; call ``sched.step()`` after each call of the compiled train step)."""

from luminal.train.chained_scheduler import ChainedScheduler
from luminal.train.schedulers import (
    ConstantLR,
    CosineAnnealingLR,
    CosineAnnealingWarmRestarts,
    CyclicLR,
    ExponentialLR,
    LambdaLR,
    LinearLR,
    LRScheduler,
    MultiplicativeLR,
    MultiStepLR,
    OneCycleLR,
    PolynomialLR,
    ReduceLROnPlateau,
    SequentialLR,
    StepLR,
)

# torch's deprecated name of the base class, which older scripts subclass (``class Warmup(_LRScheduler)``)
_LRScheduler = LRScheduler

__all__ = ["ChainedScheduler", "ConstantLR", "CosineAnnealingLR", "CosineAnnealingWarmRestarts", "CyclicLR",
           "ExponentialLR", "LRScheduler", "LambdaLR", "LinearLR", "MultiStepLR", "MultiplicativeLR", "OneCycleLR",
           "PolynomialLR", "ReduceLROnPlateau", "SequentialLR", "StepLR"]
