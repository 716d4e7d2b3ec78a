"""Modules and layers (``nn.Module``, ``nn.Linear``, ...): they build frontend graphs and own their
parameters (persistent States of every graph they are called in). Uses only ``luminal.frontend``."""

from . import init
from .layers import *  # noqa: F403 - the layer list lives in layers/__init__.py
from .layers import __all__ as _layers
from .module import Module
from .parameter import Buffer, Parameter

__all__ = ["Buffer", "Module", "Parameter", "init", *_layers]
