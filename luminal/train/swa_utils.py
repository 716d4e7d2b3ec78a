"""torch.optim.swa_utils: weight averaging (SWA and EMA) of a module's parameters, the SWA learning-rate
schedule, and recomputing BatchNorm statistics for the averaged weights.

The averaged copy's Parameters and Buffers are States like any module's: averaging writes into their
host arrays in place, so a program compiled from the averaged model (``lm.compile([ema(x)])``) reads
the new values on its next call, with no recompiling. The averaging functions take and give numpy
arrays (host values) where torch's take tensors: ``avg_fn(averaged, current, n_averaged)`` returns the
new average, ``multi_avg_fn(averaged_list, current_list, n_averaged)`` updates the first list's
arrays in place; ``n_averaged`` is an int.
"""

from __future__ import annotations

import copy
import functools
import math
import numbers
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from luminal.compiler import compile as compile_graph
from luminal.core import dtype as dt
from luminal.core.errors import op_error
from luminal.frontend.graph import Graph
from luminal.frontend.ops.core import check_device
from luminal.frontend.tensor import GraphTensor
from luminal.nn.layers.norm import _BatchNorm
from luminal.nn.module import Module
from luminal.train.schedulers import LRScheduler, _anneal_strategy, _per_group, _positive_int

__all__ = ["AveragedModel", "SWALR", "get_ema_avg_fn", "get_ema_multi_avg_fn", "get_swa_avg_fn",
           "get_swa_multi_avg_fn", "update_bn"]


def _decay(owner: str, decay) -> float:
    if isinstance(decay, bool) or not isinstance(decay, numbers.Real) or not 0.0 <= decay <= 1.0:
        raise ValueError(f"{owner}: invalid decay value {decay!r} provided; please provide a value in [0, 1] range")
    return float(decay)


def _lerp_(start: np.ndarray, end: np.ndarray, weight: float) -> None:
    """``start`` moved to ``start + weight * (end - start)`` in place, by torch's lerp formula (from the
    nearer end, so that weight 1 gives ``end`` exactly), in ``start``'s dtype."""
    w = start.dtype.type(weight)
    diff = end - start
    if abs(weight) < 0.5:
        np.add(start, w * diff, out=start)
    else:
        np.subtract(end, diff * (start.dtype.type(1) - w), out=start)


def _mix_(averaged: np.ndarray, value) -> None:
    """An integer state takes the new average truncated, as torch's ``copy_`` of a float into a long."""
    np.copyto(averaged, value, casting="unsafe")


def get_ema_multi_avg_fn(decay: float = 0.999) -> Callable[[list, list, int], None]:
    """torch's ``get_ema_multi_avg_fn``: an exponential moving average over lists of same-dtype arrays,
    in place, ``ema = decay * ema + (1 - decay) * current`` (a lerp for floats).

    Args:
        decay: the weight of the old average, in [0, 1].

    Returns:
        ``ema_update(ema_arrays, current_arrays, n_averaged)``.
    """
    decay = _decay("get_ema_multi_avg_fn", decay)

    def ema_update(ema_param_list, current_param_list, _n_averaged) -> None:
        for p_ema, p_model in zip(ema_param_list, current_param_list, strict=True):
            if p_ema.dtype.kind == "f":
                _lerp_(p_ema, p_model, 1 - decay)
            else:
                _mix_(p_ema, p_ema * decay + p_model * (1 - decay))

    return ema_update


def get_swa_multi_avg_fn() -> Callable[[list, list, int], None]:
    """torch's ``get_swa_multi_avg_fn``: the running equal-weight average over lists of same-dtype
    arrays, in place (a lerp with weight ``1 / (n_averaged + 1)`` for floats).

    Returns:
        ``swa_update(averaged_arrays, current_arrays, n_averaged)``.
    """

    def swa_update(averaged_param_list, current_param_list, num_averaged) -> None:
        for p_avg, p_model in zip(averaged_param_list, current_param_list, strict=True):
            if p_avg.dtype.kind == "f":
                _lerp_(p_avg, p_model, 1 / (num_averaged + 1))
            else:
                _mix_(p_avg, p_avg + (p_model - p_avg) * (1.0 / (num_averaged + 1)))

    return swa_update


def get_ema_avg_fn(decay: float = 0.999) -> Callable[[Any, Any, int], Any]:
    """torch's ``get_ema_avg_fn``: ``decay * ema + (1 - decay) * current`` for one array.

    Args:
        decay: the weight of the old average, in [0, 1].

    Returns:
        ``ema_update(ema, current, n_averaged)``, the new average.
    """
    decay = _decay("get_ema_avg_fn", decay)

    def ema_update(ema_param, current_param, num_averaged):
        return decay * ema_param + (1 - decay) * current_param

    return ema_update


def get_swa_avg_fn() -> Callable[[Any, Any, int], Any]:
    """torch's ``get_swa_avg_fn``: ``averaged + (current - averaged) / (n_averaged + 1)`` for one array.

    Returns:
        ``swa_update(averaged, current, n_averaged)``, the new average.
    """

    def swa_update(averaged_param, current_param, num_averaged):
        return averaged_param + (current_param - averaged_param) / (num_averaged + 1)

    return swa_update


class AveragedModel(Module):
    """torch's ``AveragedModel(model, device=None, avg_fn=None, multi_avg_fn=None, use_buffers=False)``:
    a deep copy of ``model`` (``self.module``) whose parameters hold the average of the weights passed
    to ``update_parameters``: the equal-weight (SWA) average by default, or another by ``avg_fn`` /
    ``multi_avg_fn`` (``get_ema_multi_avg_fn(0.999)`` for an EMA). The first update copies the weights.
    ``use_buffers=True`` averages the buffers too (as torch's, ``num_batches_tracked`` among them);
    otherwise each update copies the model's buffers. Calling it calls the copy, building graph ops as
    the model does; ``state_dict`` has torch's keys (``n_averaged``, then ``module.<name>``), so a torch
    checkpoint loads (``n_averaged`` is int32 here, torch's long).

    Args:
        model: the module whose weights are averaged.
        device: ``"cpu"`` or None (luminal picks the backend when compiling).
        avg_fn: ``avg_fn(averaged, current, n_averaged) -> new average``, per array.
        multi_avg_fn: ``multi_avg_fn(averaged_list, current_list, n_averaged)``, in place, per dtype.
        use_buffers: whether to average the buffers as well as the parameters.
    """

    def __init__(self, model: Module, device=None, avg_fn=None, multi_avg_fn=None, use_buffers: bool = False):
        super().__init__()
        if not isinstance(model, Module):
            raise TypeError(f"AveragedModel: model must be an nn.Module, got {type(model).__name__}")
        if avg_fn is not None and multi_avg_fn is not None:
            raise ValueError("AveragedModel: give only one of avg_fn and multi_avg_fn")
        for name, f in (("avg_fn", avg_fn), ("multi_avg_fn", multi_avg_fn)):
            if f is not None and not callable(f):
                raise TypeError(f"AveragedModel: {name} must be callable, got {type(f).__name__}")
        check_device("AveragedModel", device)
        self.module = copy.deepcopy(model)
        self.register_buffer("n_averaged", np.array(0, np.int32))
        self.avg_fn, self.multi_avg_fn, self.use_buffers = avg_fn, multi_avg_fn, bool(use_buffers)

    def forward(self, *args, **kwargs):
        """The averaged copy called on the arguments (``self.module(*args, **kwargs)``)."""
        return self.module(*args, **kwargs)

    def _pairs(self, model: Module, buffers: bool) -> list:
        """(averaged State, model's State) pairs, parameters (and buffers) in order, checked to match."""
        def states(m: Module) -> list:
            named = list(m.named_parameters())
            return named + list(m.named_buffers()) if buffers else named

        mine, theirs = states(self.module), states(model)
        what = "parameters and buffers" if buffers else "parameters"
        if len(mine) != len(theirs):
            raise ValueError(f"AveragedModel.update_parameters: the model has {len(theirs)} {what}, the averaged "
                             f"copy {len(mine)}: pass the model this AveragedModel was built from")
        for (n, a), (_, b) in zip(mine, theirs, strict=True):
            if tuple(a.shape) != tuple(b.shape):
                raise ValueError(f"AveragedModel.update_parameters: {n} has shape {tuple(b.shape)} in the model, "
                                 f"{tuple(a.shape)} in the averaged copy")
        return [(a, b) for (_, a), (_, b) in zip(mine, theirs, strict=True)]

    def update_parameters(self, model: Module) -> None:
        """Fold ``model``'s current weights into the average (copy them, the first time) and add one to
        ``n_averaged``; without ``use_buffers`` copy its buffers. Written in place into this module's
        arrays, which programs compiled from it read on their next call.

        Args:
            model: the trained module (of the same structure as the averaged copy).
        """
        if not isinstance(model, Module):
            raise TypeError(f"AveragedModel.update_parameters: model must be an nn.Module, got "
                            f"{type(model).__name__}")
        pairs = self._pairs(model, self.use_buffers)
        buffer_pairs = [] if self.use_buffers else self._pairs_of_buffers(model)
        n = int(self.n_averaged.data)
        if n == 0:
            for mine, theirs in pairs:
                mine.set(theirs.host_array())
        elif self.avg_fn is not None:
            for mine, theirs in pairs:
                mine.set(self.avg_fn(mine.data, theirs.host_array(), n))
        else:
            multi = self.multi_avg_fn if self.multi_avg_fn is not None else get_swa_multi_avg_fn()
            groups: dict[dt.DType, list] = {}
            for mine, theirs in pairs:  # torch's grouping by dtype: each call sees arrays of one dtype
                groups.setdefault(mine.dtype, []).append((mine, theirs))
            for group in groups.values():
                multi([a.data for a, _ in group], [b.host_array() for _, b in group], n)
                for a, _ in group:
                    a.set(a.data)  # (bfloat16 values rounded to bfloat16)
        for mine, theirs in buffer_pairs:
            mine.set(theirs.host_array())
        self.n_averaged.set(n + 1)

    def _pairs_of_buffers(self, model: Module) -> list:
        mine, theirs = list(self.module.buffers()), list(model.buffers())
        if len(mine) != len(theirs):
            raise ValueError(f"AveragedModel.update_parameters: the model has {len(theirs)} buffers, the averaged "
                             f"copy {len(mine)}: pass the model this AveragedModel was built from")
        return list(zip(mine, theirs, strict=True))


def _batches(loader: Iterable) -> Iterable[np.ndarray]:
    for item in loader:
        if isinstance(item, (list, tuple)):
            item = item[0]
        yield np.asarray(item)


def update_bn(loader: Iterable, model: Module, device=None, *, backend: str = "cpu") -> None:
    """torch's ``update_bn``: recompute the running statistics of every BatchNorm in ``model`` over
    ``loader`` (each item an input batch, or a list/tuple whose first element is), as their cumulative
    average (``momentum=None`` for the pass), as after SWA: the averaged weights need their own. The
    training-mode forward graph is built once (a symbolic first dim, so batches may differ in size),
    compiled for ``backend``, and run on each batch; its BatchNorms update their statistics after every
    run. Each module's mode and momentum are restored afterwards.

    Args:
        loader: an iterable of batches (numpy arrays or anything ``np.asarray`` reads).
        model: the module (an ``AveragedModel`` too).
        device: ``"cpu"`` or None.
        backend: the backend the forward pass is compiled for.
    """
    check_device("update_bn", device)
    if not isinstance(model, Module):
        raise TypeError(f"update_bn: model must be an nn.Module, got {type(model).__name__}")
    norms = [m for m in model.modules() if isinstance(m, _BatchNorm) and m.track_running_stats]
    if not norms:
        return
    for m in norms:
        m.reset_running_stats()
    momenta = {m: m.momentum for m in norms}
    modes = {m: m.training for m in model.modules()}
    run = None
    try:
        for m in momenta:
            m.momentum = None  # (read when the graph is built: each batch weighs 1 / num_batches_tracked)
        for m in modes:
            m.training = True  # (the setter: graphs the user built keep their mode, nothing to warn about)
        for i, batch in enumerate(_batches(loader)):
            if run is None:
                if batch.ndim == 0:
                    raise op_error(ValueError, "update_bn", f"batch {i} is 0-d: a batch needs a first (batch) dim")
                d = dt.int32 if batch.dtype.kind in "iu" else dt.as_dtype(batch.dtype)
                g = Graph()
                out = model(g.input("input", ("B", *batch.shape[1:]), dtype=d))
                if not g.updates:  # (no BatchNorm was called in training mode: nothing to update)
                    return
                run = compile_graph(_first_tensor(out, g), backend=backend)
            run(input=batch)
    finally:
        for m, momentum in momenta.items():
            m.momentum = momentum
        for m, mode in modes.items():
            m.training = mode


def _first_tensor(out, g: Graph) -> GraphTensor:
    """A tensor of the forward's output to compile (its updates run with it), or a running statistic's
    update when the output is not a tensor or a sequence of them."""
    if isinstance(out, GraphTensor):
        return out
    if isinstance(out, (list, tuple)) and out and isinstance(out[0], GraphTensor):
        return out[0]
    return next(iter(g.updates.values()))


class SWALR(LRScheduler):
    """torch's ``SWALR(optimizer, swa_lr, anneal_epochs=10, anneal_strategy="cos", last_epoch=-1)``: anneal
    each param group's rate from its current value to ``swa_lr`` over ``anneal_epochs`` epochs
    (cosine or linear), then hold it; torch's recursive formulas. ``swa_lr`` is kept in each group (as
    torch's ``group["swa_lr"]``). As torch's, the anneal counts the ``step()`` calls since it was built
    (``_step_count``, kept in the state), not ``last_epoch``: a scheduler built with ``last_epoch=5``
    anneals from its first step, and ``step(epoch)`` advances the anneal by one whatever the epoch.

    Args:
        optimizer: the optimizer whose rates are set.
        swa_lr: the SWA learning rate: a number, or a list of one per param group.
        anneal_epochs: the epochs of the anneal (an int >= 0; 0 switches at once).
        anneal_strategy: ``"cos"`` or ``"linear"``.
        last_epoch: the index of the last epoch (-1 to start).
    """

    _fixed_groups = True  # (each group's swa_lr is set here)

    def __init__(self, optimizer, swa_lr, anneal_epochs: int = 10, anneal_strategy: str = "cos",
                 last_epoch: int = -1):
        if not hasattr(optimizer, "param_groups"):
            raise TypeError(f"SWALR: expected an optimizer, got {type(optimizer).__name__} {optimizer!r}")
        self.anneal_epochs = _positive_int("SWALR", "anneal_epochs", anneal_epochs, minimum=0)
        self.anneal_strategy = _anneal_strategy("SWALR", "anneal_strategy", anneal_strategy)
        swa_lrs = _per_group("SWALR", "swa_lr", swa_lr, optimizer.param_groups)
        for group, lr in zip(optimizer.param_groups, swa_lrs, strict=True):
            group["swa_lr"] = lr
        super().__init__(optimizer, last_epoch)

    def _initial_step(self) -> None:
        self._step_count = 0  # (torch's: the constructor's step is the first one counted)
        super()._initial_step()

    def step(self, epoch: int | None = None) -> None:
        """Advance the anneal one step and write the new rates into the optimizer's groups (torch's
        ``step``: ``epoch``, deprecated, sets ``last_epoch`` and still advances the anneal by one).

        Args:
            epoch: deprecated, as in torch (it warns).
        """
        self._step_count += 1  # (torch's step() counts; SequentialLR's restart at a milestone does not)
        try:
            super().step(epoch)
        except BaseException:
            self._step_count -= 1
            raise

    def _state_checks(self, state: dict) -> dict:
        nonnegative = functools.partial(_positive_int, minimum=0)
        return {**super()._state_checks(state), "anneal_epochs": nonnegative, "anneal_strategy": _anneal_strategy,
                "_step_count": nonnegative}

    def _anneal(self, t: float) -> float:
        return t if self.anneal_strategy == "linear" else (1 - math.cos(math.pi * t)) / 2

    def get_lr(self):
        step = self._step_count - 1
        if self.anneal_epochs == 0:
            step = max(1, step)
        span = max(1, self.anneal_epochs)
        prev_alpha = self._anneal(max(0, min(1, (step - 1) / span)))
        alpha = self._anneal(max(0, min(1, step / span)))
        out = []
        for group in self.optimizer.param_groups:
            swa, lr = group["swa_lr"], group["lr"]
            initial = swa if prev_alpha == 1 else (lr - prev_alpha * swa) / (1 - prev_alpha)
            out.append(swa * alpha + initial * (1 - alpha))
        return out
