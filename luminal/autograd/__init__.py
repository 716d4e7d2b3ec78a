"""``lm.autograd``: torch.autograd's functions over graphs: ``grad`` (``torch.autograd.grad``) and
``functional`` (``jacobian``, ``hessian``, ``vjp``, ``jvp``, ``hvp``, ``vhp``). Each builds its result
into the graph of its arguments, as lazy tensors to compile with ``lm.compile`` or to put in a loss
(second derivatives for physics-informed losses, gradient penalties, Newton steps). They read
``luminal.train``'s graph transform (``train.grad``), which holds the gradient rules."""

from luminal.autograd import functional
from luminal.autograd.gradients import grad

__all__ = ["functional", "grad"]
