"""Training: autograd as a graph transform, losses, optimizers, schedulers, the train-step runner and
checkpoints. Uses only ``luminal.frontend`` (and ``luminal.nn``'s safetensors I/O for checkpoints)."""

from .autograd import grad
from .checkpoint import load_checkpoint, save_checkpoint
from .losses import (
    binary_cross_entropy,
    binary_cross_entropy_with_logits,
    cross_entropy,
    huber_loss,
    kl_div,
    l1_loss,
    mse_loss,
    nll_loss,
    smooth_l1_loss,
)
from .optim import SGD, Adagrad, Adam, AdamW, Optimizer, RMSprop
from .schedulers import CosineAnnealingLR, ExponentialLR, LinearLR, LRScheduler, MultiStepLR, OneCycleLR, StepLR
from .step import TrainStep, clip_by_norm, clip_by_value, compile_step

__all__ = [
    "SGD", "Adagrad", "Adam", "AdamW", "CosineAnnealingLR", "ExponentialLR", "LRScheduler", "LinearLR",
    "MultiStepLR", "OneCycleLR", "Optimizer", "RMSprop", "StepLR", "TrainStep", "binary_cross_entropy",
    "binary_cross_entropy_with_logits", "clip_by_norm", "clip_by_value", "compile_step", "cross_entropy", "grad",
    "huber_loss", "kl_div", "l1_loss", "load_checkpoint", "mse_loss", "nll_loss", "save_checkpoint",
    "smooth_l1_loss",
]
