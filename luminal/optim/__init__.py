"""torch.optim's layout over luminal's optimizers: ``lm.optim.SGD``, ``lm.optim.lr_scheduler.OneCycleLR``,
``lm.optim.swa_utils.AveragedModel``, so a ported script's ``optim.`` names resolve where a torch user
reaches first. The classes are ``luminal.train``'s (one implementation, the same objects): an optimizer
made here is what ``train.compile_step`` updates."""

from luminal.optim import lr_scheduler, swa_utils
from luminal.train.optim import (
    ASGD,
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

__all__ = ["ASGD", "LBFGS", "SGD", "Adadelta", "Adafactor", "Adagrad", "Adam", "AdamW", "Adamax", "Muon", "NAdam",
           "Optimizer", "RAdam", "RMSprop", "Rprop", "SparseAdam", "lr_scheduler", "swa_utils"]
