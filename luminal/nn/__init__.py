"""Modules and layers (``nn.Module``, ``nn.Linear``, ...): they build frontend graphs and own their
parameters. Arrives with the training issue; uses only ``luminal.frontend``."""
