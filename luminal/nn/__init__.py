"""Modules and layers (``nn.Module``, ``nn.Linear``, ...): they build frontend graphs and own their
parameters (persistent States of every graph they are called in). Uses only ``luminal.frontend``."""

from luminal.nn import functional, init, utils
from luminal.nn.layers import *  # noqa: F403 - the layer list lives in layers/__init__.py
from luminal.nn.layers import __all__ as _layers
from luminal.nn.module import Module
from luminal.nn.parameter import Buffer, Parameter

__all__ = ["Buffer", "Module", "Parameter", "functional", "init", "utils", *_layers]
