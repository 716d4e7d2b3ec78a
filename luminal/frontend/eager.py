"""Eager-PyTorch habits and the lazy way luminal does each: an error that says it.

A luminal tensor holds no values and no gradient: it is a node of a graph until a compiled program
runs. So torch's eager calls (``loss.backward()``, ``x.item()``, ``x.numpy()``, ``opt.zero_grad()``,
``opt.step()``, ``with torch.no_grad():``) have nothing to act on. They are defined anyway, so that
code ported from torch fails at the habit with :class:`EagerOnlyError` naming luminal's equivalent,
not with a bare AttributeError (or, for ``no_grad``, by silently doing nothing).
"""

from __future__ import annotations

from luminal.core.errors import op_error

COMPILE_TO_READ = ("a luminal tensor is lazy and holds no values until a compiled program runs: "
                   "f = lm.compile([t]); (a,) = f(**inputs) gives numpy arrays")
TRAIN_STEP = ("step = train.compile_step(loss, optimizer) compiles forward, backward and the optimizer's update "
              "as one program; step(**batch) runs one training step")


class EagerOnlyError(TypeError):
    """An eager-PyTorch call that has a lazy equivalent in luminal; the message says which. A TypeError,
    as other misuses of a lazy tensor are (``if t:``, a GraphTensor where a number is expected)."""


def eager_only(name: str, instead: str, *operands) -> EagerOnlyError:
    """The error for the eager call ``name``: what luminal does ``instead``, the operands (shapes,
    dtypes, where they were made) and the user's line, in the format of every op error."""
    return op_error(EagerOnlyError, name, instead, *operands)


def no_grad(*args, **kwargs):
    """torch's ``no_grad`` has no luminal counterpart, and this says so (raises :class:`EagerOnlyError`).

    luminal differentiates only what ``train.grad`` or ``train.compile_step`` asks for, so an inference
    graph (``lm.compile(outputs)``) computes no gradients without it. A do-nothing context manager
    would be wrong where torch users need it: a value built under ``no_grad`` inside a training graph
    (a target network's output) would still pass gradients here. ``x.detach()`` is the lazy way.

    Raises:
        EagerOnlyError: always.
    """
    raise eager_only("no_grad", "luminal builds gradients only where train.grad(loss, params) or "
                     "train.compile_step(loss, optimizer) asks for them, so an inference graph (lm.compile(outputs)) "
                     "needs no no_grad; to stop gradients through a value of a training graph, use x.detach()")
