"""Training: autograd as a graph transform, losses, optimizers, schedulers, the train-step runner and
checkpoints, and ``interrupts_deferred`` (a block of a training loop kept whole under Ctrl-C). Uses
``luminal.frontend`` and the core (safetensors I/O for checkpoints, the deferred interrupt), and
``lm.compile``."""

from luminal.core.interrupts import interrupts_deferred
from luminal.nn.functional import (  # F's: they take Parameters and Buffers (frontend/join.py)
    binary_cross_entropy,
    binary_cross_entropy_with_logits,
    cosine_embedding_loss,
    cross_entropy,
    ctc_loss,
    focal_loss,
    gaussian_nll_loss,
    hinge_embedding_loss,
    huber_loss,
    kl_div,
    l1_loss,
    margin_ranking_loss,
    mse_loss,
    multi_margin_loss,
    multilabel_margin_loss,
    multilabel_soft_margin_loss,
    nll_loss,
    poisson_nll_loss,
    smooth_l1_loss,
    soft_margin_loss,
    triplet_margin_loss,
    triplet_margin_with_distance_loss,
)
from luminal.train import swa_utils  # (torch.optim.swa_utils)
from luminal.train.amp import GradScaler, autocast
from luminal.train.autograd import grad
from luminal.train.chained_scheduler import ChainedScheduler
from luminal.train.checkpoint import load_checkpoint, save_checkpoint
from luminal.train.optim import (
    ASGD,
    LAMB,
    LBFGS,
    SGD,
    Adadelta,
    Adafactor,
    Adagrad,
    Adam,
    Adamax,
    AdamW,
    Muon,
    NAdam,
    Optimizer,
    RAdam,
    RMSprop,
    Rprop,
    SparseAdam,
)
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
from luminal.train.swa_utils import SWALR, AveragedModel

__all__ = [
    "ASGD", "AveragedModel", "LAMB", "LBFGS", "SGD", "Adadelta", "Adafactor", "Muon", "Rprop", "SparseAdam",
    "Adagrad", "Adam", "AdamW", "Adamax", "ChainedScheduler", "ConstantLR", "CosineAnnealingLR",
    "CosineAnnealingWarmRestarts", "CyclicLR", "ExponentialLR", "GradScaler", "LRScheduler", "LambdaLR", "LinearLR",
    "MultiplicativeLR", "NAdam",
    "PolynomialLR", "ReduceLROnPlateau", "SequentialLR", "MultiStepLR", "NonFiniteLossError", "OneCycleLR",
    "Optimizer", "RAdam", "RMSprop", "StepLR", "SWALR", "TrainStep",
    "autocast", "binary_cross_entropy",
    "binary_cross_entropy_with_logits", "clip_by_norm", "clip_by_value", "compile_step", "cross_entropy",
    "focal_loss", "grad", "interrupts_deferred",
    "huber_loss", "kl_div", "l1_loss", "load_checkpoint", "mse_loss", "nll_loss", "save_checkpoint",
    "smooth_l1_loss", "swa_utils",
    "cosine_embedding_loss", "ctc_loss", "gaussian_nll_loss", "hinge_embedding_loss", "margin_ranking_loss",
    "multi_margin_loss", "multilabel_margin_loss", "multilabel_soft_margin_loss", "poisson_nll_loss",
    "soft_margin_loss", "triplet_margin_loss", "triplet_margin_with_distance_loss",
]
