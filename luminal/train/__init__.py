"""Training: autograd as a graph transform, losses, optimizers, schedulers and the train-step
runner. Uses only ``luminal.frontend``."""

from .autograd import grad
