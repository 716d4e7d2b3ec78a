"""Optimizers: torch's update formulas, written as graph ops (see ``optimizer.py``)."""

from luminal.train.optim.adagrad import Adagrad
from luminal.train.optim.adam import Adam, AdamW
from luminal.train.optim.adamax import Adamax
from luminal.train.optim.lamb import LAMB
from luminal.train.optim.nadam import NAdam
from luminal.train.optim.optimizer import Optimizer
from luminal.train.optim.radam import RAdam
from luminal.train.optim.rmsprop import RMSprop
from luminal.train.optim.sgd import SGD

__all__ = ["LAMB", "SGD", "Adagrad", "Adam", "AdamW", "Adamax", "NAdam", "Optimizer", "RAdam", "RMSprop"]
