"""Training: autograd as a graph transform, losses, optimizers, schedulers, the train-step runner and
checkpoints, and ``interrupts_deferred`` (a block of a training loop kept whole under Ctrl-C). Uses
``luminal.frontend`` and the core (safetensors I/O for checkpoints, the deferred interrupt), and
``lm.compile``."""

from luminal.core.interrupts import interrupts_deferred
from luminal.nn.functional import (  # F's: they take Parameters and Buffers (frontend/join.py)
    binary_cross_entropy,
    binary_cross_entropy_with_logits,
    cross_entropy,
    focal_loss,
    huber_loss,
    kl_div,
    l1_loss,
    mse_loss,
    nll_loss,
    smooth_l1_loss,
)
from luminal.train.amp import GradScaler, autocast
from luminal.train.autograd import grad
from luminal.train.chained_scheduler import ChainedScheduler
from luminal.train.checkpoint import load_checkpoint, save_checkpoint
from luminal.train.optim import LAMB, SGD, Adagrad, Adam, Adamax, AdamW, NAdam, Optimizer, RAdam, RMSprop
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
from luminal.train.step import NonFiniteLossError, TrainStep, clip_by_norm, clip_by_value, compile_step

__all__ = [
    "LAMB", "SGD", "Adagrad", "Adam", "AdamW", "Adamax", "ChainedScheduler", "ConstantLR", "CosineAnnealingLR",
    "CosineAnnealingWarmRestarts", "CyclicLR", "ExponentialLR", "GradScaler", "LRScheduler", "LambdaLR", "LinearLR",
    "MultiplicativeLR", "NAdam",
    "PolynomialLR", "ReduceLROnPlateau", "SequentialLR", "MultiStepLR", "NonFiniteLossError", "OneCycleLR",
    "Optimizer", "RAdam", "RMSprop", "StepLR", "TrainStep",
    "autocast", "binary_cross_entropy",
    "binary_cross_entropy_with_logits", "clip_by_norm", "clip_by_value", "compile_step", "cross_entropy",
    "focal_loss", "grad", "interrupts_deferred",
    "huber_loss", "kl_div", "l1_loss", "load_checkpoint", "mse_loss", "nll_loss", "save_checkpoint",
    "smooth_l1_loss",
]
