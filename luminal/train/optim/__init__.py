"""Optimizers: torch's update formulas, written as graph ops (see ``optimizer.py``)."""

from .optimizer import Optimizer
