"""Eager-PyTorch habits and the lazy way luminal does each: an error that says it.

A luminal tensor holds no values and no gradient: it is a node of a graph until a compiled program
runs. So torch's eager calls (``loss.backward()``, ``x.item()``, ``x.numpy()``, ``opt.zero_grad()``,
``opt.step()``, ``with torch.no_grad():``, ``torch.inference_mode()``, ``torch.autocast(...)``) have
nothing to act on: gradients, precision and device are decided when a graph is compiled. They are
defined anyway, so that code ported from torch fails at the habit with :class:`EagerOnlyError` naming
luminal's equivalent, not with a bare AttributeError (or, for the context managers, by silently doing
nothing where torch's would change the result).
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


def inference_mode(*args, **kwargs):
    """torch's ``inference_mode`` has no luminal counterpart, and this says so (raises
    :class:`EagerOnlyError`).

    An inference graph compiled with ``lm.compile(outputs)`` already computes no gradients and keeps no
    autograd state: it computes the outputs asked for and nothing else. A do-nothing context manager
    would hide, as ``no_grad``'s would, a value of a training graph still passing gradients.

    Raises:
        EagerOnlyError: always.
    """
    raise eager_only("inference_mode", "an inference graph (lm.compile(outputs), built after model.eval()) "
                     "computes no gradients and keeps no autograd state, so it needs no inference_mode; to stop "
                     "gradients through a value of a training graph, use x.detach()")


def autocast(*args, **kwargs):
    """torch's ``autocast`` (``torch.autocast``, ``torch.amp.autocast``) has no luminal counterpart, and
    this says so (raises :class:`EagerOnlyError`).

    Mixed precision is an option of the compiled train step: ``train.compile_step(loss, optimizer,
    compute_dtype=lm.float16, scaler=train.GradScaler())`` rewrites the whole step's graph to compute
    in 16 bits over float32 master weights (``train/amp.py``). A region of a graph cannot be marked
    while the graph is built, so a context manager here would change nothing (and ``enabled=False``
    could not keep a region in float32 inside such a step).

    Raises:
        EagerOnlyError: always.
    """
    raise eager_only("autocast", "mixed precision is chosen when compiling: train.compile_step(loss, optimizer, "
                     "compute_dtype=lm.float16 (or lm.bfloat16), scaler=train.GradScaler()) computes the step in "
                     "16 bits over float32 master weights; for inference, lm.compile(train.autocast(outputs, "
                     "lm.float16)) or a model converted with model.half()")
