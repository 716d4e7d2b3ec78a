"""Training: autograd as a graph transform, losses, optimizers, schedulers and the train-step
runner. Arrives with the training issue; uses only ``luminal.frontend``."""
