"""Optimizers: torch's update formulas, written as graph ops (see ``optimizer.py``)."""

from luminal.train.optim.adadelta import Adadelta
from luminal.train.optim.adafactor import Adafactor
from luminal.train.optim.adagrad import Adagrad
from luminal.train.optim.adam import Adam, AdamW
from luminal.train.optim.adamax import Adamax
from luminal.train.optim.asgd import ASGD
from luminal.train.optim.lamb import LAMB
from luminal.train.optim.lbfgs import LBFGS
from luminal.train.optim.muon import Muon
from luminal.train.optim.nadam import NAdam
from luminal.train.optim.optimizer import Optimizer
from luminal.train.optim.radam import RAdam
from luminal.train.optim.rmsprop import RMSprop
from luminal.train.optim.rprop import Rprop
from luminal.train.optim.sgd import SGD
from luminal.train.optim.sparse_adam import SparseAdam

__all__ = ["ASGD", "LAMB", "LBFGS", "SGD", "Adadelta", "Adafactor", "Adagrad", "Adam", "AdamW", "Adamax", "Muon",
           "NAdam", "Optimizer", "RAdam", "RMSprop", "Rprop", "SparseAdam"]
