"""Learning-rate schedulers: host-side Python over ``optimizer.param_groups[i]["lr"]``, with
torch.optim.lr_scheduler's semantics and formulas (the same recursive updates, so the values agree
to the last bit). The learning rate reaches the compiled step as a runtime scalar, so a schedule
never recompiles.

As in torch, the constructor performs the initial step (``last_epoch`` becomes 0 and the groups hold
the epoch-0 rates); call ``step()`` after each optimizer step (ReduceLROnPlateau: ``step(metric)``
after each evaluation; its constructor changes no rate). torch's deprecated ``step(epoch)`` (and
ReduceLROnPlateau's ``step(metrics, epoch)``) works as torch's: it sets ``last_epoch`` to ``epoch``
and computes the rates by the closed form where the scheduler has one (else by ``get_lr``, from the
current rates), with torch's deprecation UserWarning; CosineAnnealingWarmRestarts takes a
fractional epoch without a warning, and SequentialLR and ChainedScheduler take no epoch, as torch's.
``state_dict()`` is a plain JSON-able
dict; restore the optimizer's state (its groups hold the current ``lr``) and then the scheduler's.
A state is data: ``load_state_dict`` takes only the scheduler's own keys, each checked as the
constructor checks that argument, and applies all of them or none.
"""

from __future__ import annotations

import bisect
import copy
import functools
import math
import numbers
import sys
import types
import warnings

import numpy as np

from luminal.core.errors import check_number

__all__ = ["LRScheduler", "StepLR", "MultiStepLR", "ExponentialLR", "CosineAnnealingLR", "LinearLR", "OneCycleLR",
           "LambdaLR", "SequentialLR", "CosineAnnealingWarmRestarts", "ConstantLR", "PolynomialLR", "MultiplicativeLR",
           "ReduceLROnPlateau", "CyclicLR"]


# Checks of a constructor's arguments, ``check(owner, name, value) -> value``: load_state_dict applies the
# same ones to the saved values (``owner`` is then "<Scheduler>.load_state_dict", ``name`` the key).
def _positive_int(owner: str, name: str, v, minimum: int = 1) -> int:
    if not isinstance(v, numbers.Integral) or isinstance(v, bool) or v < minimum:
        what = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
        raise ValueError(f"{owner}: {name} must be {what}, got {v!r}")
    return int(v)


_epoch = functools.partial(_positive_int, minimum=-1)


def _step_epoch(owner: str, epoch) -> int:
    """The ``epoch`` of a deprecated ``step(epoch)``, checked (an integer >= 0: ``last_epoch`` must stay
    one a state can hold), after torch's deprecation warning, which old scripts expect to see."""
    epoch = _positive_int(owner, "epoch", epoch, minimum=0)
    warnings.warn(f"{owner}: the epoch argument is deprecated, as in torch: step(epoch) sets last_epoch to "
                  f"{epoch} and uses the closed form where the scheduler has one; call step() instead",
                  UserWarning, stacklevel=3)
    return epoch


def _number(owner: str, name: str, v, what: str = "a number >= 0", ok=lambda x: x >= 0):
    """A finite real number (not a bool) for which ``ok`` holds. A str or None is a TypeError here,
    naming the scheduler, instead of one inside a later ``step()``; a negative rate or factor is
    refused, as it would give the optimizer a negative learning rate."""
    check_number(owner, name, v)
    if isinstance(v, (bool, np.bool_)) or not abs(v) <= sys.float_info.max or not ok(v):  # NaN, inf, 10**400
        raise ValueError(f"{owner}: {name} must be {what}, got {v!r}")
    return v


def _positive(owner: str, name: str, v):
    return _number(owner, name, v, "a positive number", lambda x: x > 0)


_real = functools.partial(_number, what="a finite number", ok=lambda x: True)


def _rates(owner: str, name: str, v, n: int, check=_number, what: str = "learning rates") -> list:
    """One learning rate per param group: ``base_lrs`` (each >= 0), ``_last_lr`` (``check=_real``: the
    rate a step set, which OneCycleLR's linear anneal takes a little below 0 at ``total_steps``); or
    one of ``what`` else per group (CyclicLR's momentums)."""
    if not isinstance(v, list) or len(v) != n:
        raise ValueError(f"{owner}: {name} must be a list of {n} {what}, one per param group, got {v!r}")
    return [check(owner, f"{name}[{i}]", x) for i, x in enumerate(v)]


def _epochs(owner: str, name: str, v) -> list[int]:
    """MultiStepLR's milestones: epochs (ints >= 0), sorted."""
    try:
        v = list(v)
    except TypeError:
        raise TypeError(f"{owner}: {name} must be a list of epochs, got {v!r}") from None
    return sorted(_positive_int(owner, f"{name}[{i}]", m, minimum=0) for i, m in enumerate(v))


class LRScheduler:
    """The shared machinery. A subclass implements ``get_lr()``: the learning rates for epoch
    ``self.last_epoch`` (already advanced), usually from the current ``group["lr"]``s; and declares
    the state it keeps, with each value's check, in ``_state_checks``."""

    _not_state: tuple[str, ...] = ("optimizer", "_initial")  # attributes that state_dict leaves out
    # whether get_lr reads values fixed per param group when the scheduler was built (base_lrs, lr_lambdas,
    # max_lrs, a group's initial_lr): a group added since has none (``_check_groups``)
    _fixed_groups = False

    def __init__(self, optimizer, last_epoch: int = -1):
        if not hasattr(optimizer, "param_groups"):
            raise TypeError(f"{type(self).__name__}: expected an optimizer, got {type(optimizer).__name__} "
                            f"{optimizer!r}")
        last_epoch = _epoch(type(self).__name__, "last_epoch", last_epoch)
        self.optimizer = optimizer
        for i, group in enumerate(optimizer.param_groups):
            if last_epoch == -1:
                group.setdefault("initial_lr", group["lr"])
            elif "initial_lr" not in group:
                raise KeyError(f"{type(self).__name__}: param_groups[{i}] has no 'initial_lr'; resuming with "
                               f"last_epoch={last_epoch} needs the optimizer's state restored first")
        self.base_lrs = [group["initial_lr"] for group in optimizer.param_groups]
        self.last_epoch = last_epoch
        self._initial_step()

    def _initial_step(self) -> None:
        """The step a constructor performs (``_initial`` tells ``get_lr`` so: some keep the rates then).
        SequentialLR repeats it for the scheduler that starts."""
        self._initial = True
        try:
            self.step()
        finally:
            self._initial = False

    def _undo_initial_step(self) -> None:
        """SequentialLR takes back the step each of its schedulers made when it was built (torch's
        ``recursive_undo``)."""
        self.last_epoch -= 1

    def get_lr(self) -> list[float]:
        """The learning rates for epoch ``self.last_epoch`` (already advanced), one per param group; each
        scheduler implements it (torch's chainable form: usually from the current ``group["lr"]``s).

        Returns:
            A list of floats.
        """
        raise NotImplementedError

    def step(self, epoch: int | None = None) -> None:
        """Advance one epoch (or iteration) and write the new rates into the optimizer's groups.

        Args:
            epoch: deprecated, as in torch (it warns): go to this epoch (an integer >= 0, any order:
                skipping or going back) instead, by the closed form where the scheduler has one,
                else by ``get_lr`` from the current rates, as torch's ``step(epoch)``.
        """
        if epoch is not None:
            epoch = _step_epoch(f"{type(self).__name__}.step", epoch)
        self._update_lr(epoch)

    def _update_lr(self, epoch: int | None = None) -> None:
        """Advance one epoch, or (``epoch`` given: ``step(epoch)``, or SequentialLR restarting this scheduler
        at a milestone) jump to ``epoch``, by the closed form where the scheduler has one, as torch's
        ``_update_lr``.
        A step that fails (a LambdaLR's function returning a str) leaves the epoch as it was."""
        if epoch is not None and hasattr(self, "_closed_form_lr"):
            self._check_groups("step(epoch)'s closed form reads")
        else:
            self._check_groups()
        previous = self.last_epoch
        try:
            if epoch is None:
                self.last_epoch += 1
                lrs = self.get_lr()
            else:
                self.last_epoch = epoch
                closed = getattr(self, "_closed_form_lr", None)
                lrs = closed() if closed is not None else self.get_lr()
        except BaseException:
            self.last_epoch = previous
            raise
        self._set_lrs(lrs)

    def _check_groups(self, reads: str | None = None) -> None:
        """Refuse to step when a param group was added to the optimizer after this scheduler was built and
        the rates read values the scheduler fixed per group then (``_fixed_groups``, or ``reads``: what reads
        them at this step, as ``step(epoch)``'s closed form reads ``base_lrs``): the new group has none.
        torch's fail on a ``zip``, a missing ``'initial_lr'``, or leave the group unscheduled; the
        chainable ones (StepLR, ...) schedule it from its own rate, here as there."""
        n, built = len(self.optimizer.param_groups), len(self.base_lrs)
        if n != built and (self._fixed_groups or reads):
            name = type(self).__name__
            how = reads if reads and not self._fixed_groups else "its rates read"
            raise ValueError(f"{name}.step: the optimizer has {n} param groups, and this {name} was built for "
                             f"{built}: {how} values fixed per group when it was built, which a group added since "
                             f"does not have; build the scheduler after adding the group")

    def _set_lrs(self, lrs) -> None:
        for group, lr in zip(self.optimizer.param_groups, lrs, strict=True):
            group["lr"] = lr
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]

    def get_last_lr(self) -> list[float]:
        """torch's ``get_last_lr``: the learning rates the last ``step`` set, one per param group."""
        return list(self._last_lr)

    def _lrs(self) -> list[float]:
        return [group["lr"] for group in self.optimizer.param_groups]

    def state_dict(self) -> dict:
        """The scheduler's class and state (never its optimizer), as plain (JSON-able) values."""
        sd = copy.deepcopy({k: v for k, v in vars(self).items() if k not in self._not_state})
        return {"scheduler": type(self).__name__, **sd}

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore what ``state_dict`` returned; nothing changes unless all of it loads (see
        ``prepare_load``).

        Args:
            state_dict: a dict from ``state_dict``.
        """
        self.prepare_load(state_dict)()

    def prepare_load(self, state_dict: dict):
        """``load_state_dict``'s checks, changing nothing; returns ``apply()``. The state must come from
        this class of scheduler and hold exactly its keys (never a method or the optimizer), each value
        of the type and range its constructor accepts, one rate per param group; else a ValueError
        names the scheduler, the key and the problem.

        Args:
            state_dict: a dict from ``state_dict``.

        Returns:
            A function of no arguments that writes the checked state.
        """
        name = type(self).__name__
        owner = f"{name}.load_state_dict"
        if not isinstance(state_dict, dict):
            raise ValueError(f"{owner}: expected a dict from state_dict(), got {type(state_dict).__name__}")
        sd = dict(state_dict)
        saved_by = sd.pop("scheduler", name)  # absent in states saved before it was recorded
        if saved_by != name:
            raise ValueError(f"{owner}: the state was saved by {saved_by!r}, and this scheduler is {name}")
        initial = sd.pop("_initial", False)  # older states hold the constructor-step flag (False between steps)
        if initial is not False:
            raise ValueError(f"{owner}: _initial must be false, got {initial!r}")
        checks = self._state_checks(sd)
        unknown, missing = sorted(repr(k) for k in sd if k not in checks), [repr(k) for k in checks if k not in sd]
        if unknown or missing:
            problems = [f"has keys a {name} does not keep: {', '.join(unknown)}"] if unknown else []
            problems += [f"lacks {', '.join(missing)}"] if missing else []
            raise ValueError(f"{owner}: the state {'; it '.join(problems)}")
        values = {}
        for k, check in checks.items():
            try:
                values[k] = check(owner, k, copy.deepcopy(sd[k]))
            except TypeError as e:  # check_number's: a value of the wrong type
                raise ValueError(str(e)) from None
        return functools.partial(self._apply, values)

    def _state_checks(self, state: dict) -> dict:
        """The state this scheduler keeps: key -> ``check(owner, key, value) -> value``, the check its
        constructor makes of that value (``state``, the dict being loaded, for keys kept with some
        options only). A subclass adds its own keys."""
        n = len(self.optimizer.param_groups)
        return {"base_lrs": functools.partial(_rates, n=n), "last_epoch": _epoch,
                "_last_lr": functools.partial(_rates, n=n, check=_real)}

    def _apply(self, values: dict) -> None:
        vars(self).update(values)

    def __repr__(self):
        return f"{type(self).__name__}(last_epoch={self.last_epoch}, last_lr={self._last_lr})"


class StepLR(LRScheduler):
    """Multiply the rate by ``gamma`` every ``step_size`` epochs."""

    def __init__(self, optimizer, step_size: int, gamma: float = 0.1, last_epoch: int = -1):
        self.step_size = _positive_int("StepLR", "step_size", step_size)
        self.gamma = _positive("StepLR", "gamma", gamma)
        super().__init__(optimizer, last_epoch)

    def _state_checks(self, state: dict) -> dict:
        return {**super()._state_checks(state), "step_size": _positive_int, "gamma": _positive}

    def get_lr(self):
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return self._lrs()
        return [lr * self.gamma for lr in self._lrs()]

    def _closed_form_lr(self):
        return [base * self.gamma ** (self.last_epoch // self.step_size) for base in self.base_lrs]


class MultiStepLR(LRScheduler):
    """Multiply the rate by ``gamma`` at each milestone epoch (a repeated milestone applies twice)."""

    def __init__(self, optimizer, milestones, gamma: float = 0.1, last_epoch: int = -1):
        self.milestones = _epochs("MultiStepLR", "milestones", milestones)
        self.gamma = _positive("MultiStepLR", "gamma", gamma)
        super().__init__(optimizer, last_epoch)

    def _state_checks(self, state: dict) -> dict:
        return {**super()._state_checks(state), "milestones": _epochs, "gamma": _positive}

    def get_lr(self):
        k = self.milestones.count(self.last_epoch)
        if k == 0:
            return self._lrs()
        return [lr * self.gamma**k for lr in self._lrs()]

    def _closed_form_lr(self):
        return [base * self.gamma ** bisect.bisect_right(self.milestones, self.last_epoch) for base in self.base_lrs]


class ExponentialLR(LRScheduler):
    """Multiply the rate by ``gamma`` every epoch."""

    def __init__(self, optimizer, gamma: float, last_epoch: int = -1):
        self.gamma = _positive("ExponentialLR", "gamma", gamma)
        super().__init__(optimizer, last_epoch)

    def _state_checks(self, state: dict) -> dict:
        return {**super()._state_checks(state), "gamma": _positive}

    def get_lr(self):
        if self._initial:
            return self._lrs()
        return [lr * self.gamma for lr in self._lrs()]

    def _closed_form_lr(self):
        return [base * self.gamma**self.last_epoch for base in self.base_lrs]


class CosineAnnealingLR(LRScheduler):
    """Cosine annealing from the base rate to ``eta_min`` over ``T_max`` epochs, then back up
    (torch's recursive form, which continues past ``T_max`` as a cosine of period ``2 * T_max``)."""

    def __init__(self, optimizer, T_max: int, eta_min: float = 0.0, last_epoch: int = -1):  # noqa: N803 - torch's name
        self.T_max = _positive_int("CosineAnnealingLR", "T_max", T_max)
        self.eta_min = _number("CosineAnnealingLR", "eta_min", eta_min)
        super().__init__(optimizer, last_epoch)

    def _state_checks(self, state: dict) -> dict:
        return {**super()._state_checks(state), "T_max": _positive_int, "eta_min": _number}

    def get_lr(self):
        if self._initial:
            return self._lrs()
        e, T, lo = self.last_epoch, self.T_max, self.eta_min
        if (e - 1 - T) % (2 * T) == 0:  # leaving the bottom of a cycle: the recursion's ratio would be 0/0
            self._check_groups(f"epoch {e}, leaving the bottom of the cosine, reads")  # (from base_lrs)
            return [lr + (base - lo) * (1 - math.cos(math.pi / T)) / 2 for lr, base in zip(self._lrs(), self.base_lrs)]
        ratio = (1 + math.cos(math.pi * e / T)) / (1 + math.cos(math.pi * (e - 1) / T))
        return [ratio * (lr - lo) + lo for lr in self._lrs()]

    def _closed_form_lr(self):
        return [self.eta_min + (base - self.eta_min) * (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2
                for base in self.base_lrs]


_start_factor = functools.partial(_number, what="a number in (0, 1]", ok=lambda x: 0 < x <= 1)
_end_factor = functools.partial(_number, what="a number in [0, 1]", ok=lambda x: 0 <= x <= 1)


class LinearLR(LRScheduler):
    """Scale the rate linearly from ``start_factor`` to ``end_factor`` over ``total_iters`` epochs."""

    def __init__(self, optimizer, start_factor: float = 1.0 / 3, end_factor: float = 1.0, total_iters: int = 5,
                 last_epoch: int = -1):
        self.start_factor = _start_factor("LinearLR", "start_factor", start_factor)
        self.end_factor = _end_factor("LinearLR", "end_factor", end_factor)
        self.total_iters = _positive_int("LinearLR", "total_iters", total_iters)
        super().__init__(optimizer, last_epoch)

    def _state_checks(self, state: dict) -> dict:
        return {**super()._state_checks(state), "start_factor": _start_factor, "end_factor": _end_factor,
                "total_iters": _positive_int}

    def get_lr(self):
        if self.last_epoch == 0:
            return [lr * self.start_factor for lr in self._lrs()]
        if self._initial or self.last_epoch > self.total_iters:
            return self._lrs()
        d = self.end_factor - self.start_factor
        factor = 1.0 + d / (self.total_iters * self.start_factor + (self.last_epoch - 1) * d)
        return [lr * factor for lr in self._lrs()]

    def _closed_form_lr(self):
        f = self.start_factor + (self.end_factor - self.start_factor) * min(self.total_iters, self.last_epoch) \
            / self.total_iters
        return [base * f for base in self.base_lrs]


_factor = functools.partial(_number, what="a number in (0, 1]", ok=lambda x: 0 < x <= 1)


class ConstantLR(LRScheduler):
    """Multiply the rate by ``factor`` until epoch ``total_iters``, then restore it (torch's
    recursive form: times ``factor`` at epoch 0, times ``1 / factor`` at ``total_iters``)."""

    def __init__(self, optimizer, factor: float = 1.0 / 3, total_iters: int = 5, last_epoch: int = -1):
        self.factor = _factor("ConstantLR", "factor", factor)  # (0 would divide by 0 at total_iters)
        self.total_iters = _positive_int("ConstantLR", "total_iters", total_iters)
        super().__init__(optimizer, last_epoch)

    def _state_checks(self, state: dict) -> dict:
        return {**super()._state_checks(state), "factor": _factor, "total_iters": _positive_int}

    def get_lr(self):
        if self.last_epoch == 0:
            return [lr * self.factor for lr in self._lrs()]
        if self.last_epoch != self.total_iters:
            return self._lrs()
        return [lr * (1.0 / self.factor) for lr in self._lrs()]

    def _closed_form_lr(self):
        return [base * (self.factor + (self.last_epoch >= self.total_iters) * (1 - self.factor))
                for base in self.base_lrs]


class PolynomialLR(LRScheduler):
    """Decay the rate as ``base * (1 - epoch / total_iters) ** power`` to 0 at ``total_iters``, then
    keep it (torch's recursive form)."""

    def __init__(self, optimizer, total_iters: int = 5, power: float = 1.0, last_epoch: int = -1):
        self.total_iters = _positive_int("PolynomialLR", "total_iters", total_iters)
        self.power = _number("PolynomialLR", "power", power)  # (< 0 would divide by 0 at total_iters)
        super().__init__(optimizer, last_epoch)

    def _state_checks(self, state: dict) -> dict:
        return {**super()._state_checks(state), "total_iters": _positive_int, "power": _number}

    def get_lr(self):
        if self._initial or self.last_epoch > self.total_iters:
            return self._lrs()
        e, n = self.last_epoch, self.total_iters
        decay = ((1.0 - e / n) / (1.0 - (e - 1) / n)) ** self.power
        return [lr * decay for lr in self._lrs()]

    def _closed_form_lr(self):
        return [base * (1.0 - min(self.total_iters, self.last_epoch) / self.total_iters) ** self.power
                for base in self.base_lrs]


def _one_cycle_phases(pct_start: float, total_steps: int, three_phase: bool) -> list:
    """OneCycleLR's phases: (end step, start lr key, end lr key, start momentum key, end momentum key) each."""
    up = float(pct_start * total_steps) - 1
    if three_phase:
        return [[up, "initial_lr", "max_lr", "max_momentum", "base_momentum"],
                [float(2 * pct_start * total_steps) - 2, "max_lr", "initial_lr", "base_momentum", "max_momentum"],
                [total_steps - 1, "initial_lr", "min_lr", "max_momentum", "max_momentum"]]
    return [[up, "initial_lr", "max_lr", "max_momentum", "base_momentum"],
            [total_steps - 1, "max_lr", "min_lr", "base_momentum", "max_momentum"]]


def _phases(owner: str, name: str, v, total_steps: int) -> list:
    """Phases laid out as the constructor lays them out for ``total_steps``, their ends finite numbers."""
    layouts = [[p[1:] for p in _one_cycle_phases(0.5, total_steps, three)] for three in (False, True)]
    if not (isinstance(v, list) and all(isinstance(p, list) and len(p) == 5 for p in v)
            and [p[1:] for p in v] in layouts and v[-1][0] == total_steps - 1
            and all(isinstance(p[0], (int, float)) and not isinstance(p[0], bool)
                    and abs(p[0]) <= sys.float_info.max for p in v)):
        raise ValueError(f"{owner}: {name} must be OneCycleLR's phases for total_steps={total_steps}, got {v!r}")
    return v


def _anneal_strategy(owner: str, name: str, v) -> str:
    if v not in ("cos", "linear"):
        raise ValueError(f"{owner}: {name} must be 'cos' or 'linear', got {v!r}")
    return v


def _cycle_momentum(owner: str, name: str, v, optimizer) -> bool:
    if not isinstance(v, bool):
        raise ValueError(f"{owner}: {name} must be true or false, got {v!r}")
    if v and "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
        raise ValueError(f"{owner}: cycle_momentum needs an optimizer with momentum or betas; "
                         f"{type(optimizer).__name__} has neither")
    return v


def _use_beta1(owner: str, name: str, v, optimizer) -> bool:
    """Whether the cycled momentum is ``betas[0]``: the optimizer decides it, a state only repeats it."""
    want = "betas" in optimizer.defaults
    if v is not want:
        raise ValueError(f"{owner}: {name} must be {want} for {type(optimizer).__name__}, got {v!r}")
    return v


class OneCycleLR(LRScheduler):
    """The 1cycle policy (per batch): warm up from ``max_lr / div_factor`` to ``max_lr`` over
    ``pct_start`` of ``total_steps``, then anneal to ``initial_lr / final_div_factor`` (or, with
    ``three_phase``, back down symmetrically first). With ``cycle_momentum`` the group's
    ``momentum`` (SGD, RMSprop) or ``betas[0]`` (Adam family) moves inversely between
    ``max_momentum`` and ``base_momentum``."""

    _fixed_groups = True

    def __init__(self, optimizer, max_lr, total_steps: int | None = None, epochs: int | None = None,
                 steps_per_epoch: int | None = None, pct_start: float = 0.3, anneal_strategy: str = "cos",
                 cycle_momentum: bool = True, base_momentum=0.85, max_momentum=0.95, div_factor: float = 25.0,
                 final_div_factor: float = 1e4, three_phase: bool = False, last_epoch: int = -1):
        if total_steps is not None:
            total_steps = _positive_int("OneCycleLR", "total_steps", total_steps)
        elif epochs is not None and steps_per_epoch is not None:
            total_steps = _positive_int("OneCycleLR", "epochs", epochs) * \
                _positive_int("OneCycleLR", "steps_per_epoch", steps_per_epoch)
        else:
            raise ValueError("OneCycleLR: give total_steps, or both epochs and steps_per_epoch")
        if not isinstance(pct_start, float) or not 0 <= pct_start <= 1:
            raise ValueError(f"OneCycleLR: pct_start must be a float in [0, 1], got {pct_start!r}")
        _positive("OneCycleLR", "div_factor", div_factor)
        _positive("OneCycleLR", "final_div_factor", final_div_factor)
        self.total_steps = total_steps
        self.anneal_strategy = _anneal_strategy("OneCycleLR", "anneal_strategy", anneal_strategy)
        self.cycle_momentum = _cycle_momentum("OneCycleLR", "cycle_momentum", bool(cycle_momentum), optimizer)
        self.phases = _one_cycle_phases(pct_start, total_steps, three_phase)
        if self.phases[0][0] == 0:  # (the constructor's step 0 would fall in it: refused before a group is written)
            self._empty_phase(0, 0, 0)
        groups = optimizer.param_groups
        max_lrs = _per_group("OneCycleLR", "max_lr", max_lr, groups)  # (all checked before a group is written)
        his = _per_group("OneCycleLR", "max_momentum", max_momentum, groups)
        los = _per_group("OneCycleLR", "base_momentum", base_momentum, groups)
        if last_epoch == -1:
            for group, m in zip(groups, max_lrs, strict=True):
                group["initial_lr"] = m / div_factor
                group["max_lr"] = m
                group["min_lr"] = group["initial_lr"] / final_div_factor
        if self.cycle_momentum:
            self.use_beta1 = "betas" in optimizer.defaults
            if last_epoch == -1:
                for group, hi, lo in zip(groups, his, los, strict=True):
                    self._set_momentum(group, hi)
                    group["max_momentum"], group["base_momentum"] = hi, lo
        super().__init__(optimizer, last_epoch)

    def _state_checks(self, state: dict) -> dict:
        opt = self.optimizer
        checks = {**super()._state_checks(state), "total_steps": _positive_int, "anneal_strategy": _anneal_strategy,
                  "cycle_momentum": functools.partial(_cycle_momentum, optimizer=opt),
                  # (total_steps is checked before phases: a bad one has raised by then)
                  "phases": lambda owner, name, v: _phases(owner, name, v, state["total_steps"])}
        if state.get("cycle_momentum") is not False:  # (kept with cycle_momentum only; a bad value fails on its own)
            checks["use_beta1"] = functools.partial(_use_beta1, optimizer=opt)
        return checks

    def _apply(self, values: dict) -> None:
        super()._apply(values)
        if not self.cycle_momentum:
            vars(self).pop("use_beta1", None)

    def _set_momentum(self, group: dict, value: float) -> None:
        _set_momentum(group, value, self.use_beta1)

    def _anneal(self, start: float, end: float, pct: float) -> float:
        if self.anneal_strategy == "cos":
            return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)
        return (end - start) * pct + start

    def _empty_phase(self, i: int, at: float, step: int) -> None:
        """Refuse a step in phase ``i``, which starts and ends at step ``at``: ``pct_start * total_steps``
        (the warm-up's length, ``at + 1`` for the first phase) leaves it no steps, and its position in it is
        0 / 0."""
        n, warm = len(self.phases), self.phases[0][0] + 1
        raise ValueError(f"OneCycleLR: step {step} falls in phase {i + 1} of {n}, which has no steps (it starts and "
                         f"ends at step {at:g}): pct_start * total_steps = {warm:g} with total_steps="
                         f"{self.total_steps}{', three_phase=True' if n == 3 else ''}; choose a pct_start that "
                         f"gives every phase at least one step")

    def get_lr(self):
        step = self.last_epoch
        if step > self.total_steps:
            raise ValueError(f"OneCycleLR: tried to step {step} times; total_steps is {self.total_steps}")
        lrs = []
        for group in self.optimizer.param_groups:
            start = 0.0
            for i, (end, lr0, lr1, m0, m1) in enumerate(self.phases):
                if step <= end or i == len(self.phases) - 1:
                    if end == start:  # (torch: ZeroDivisionError)
                        self._empty_phase(i, start, step)
                    pct = (step - start) / (end - start)
                    lrs.append(self._anneal(group[lr0], group[lr1], pct))
                    if self.cycle_momentum:
                        self._set_momentum(group, self._anneal(group[m0], group[m1], pct))
                    break
                start = end
        return lrs


def _set_momentum(group: dict, value: float, use_beta1: bool) -> None:
    """Write a cycled momentum: ``betas[0]`` (Adam family) or ``momentum`` (SGD, RMSprop)."""
    if use_beta1:
        group["betas"] = (value, *group["betas"][1:])
    else:
        group["momentum"] = value


def _per_group(owner: str, name: str, value, groups) -> list:
    """A number >= 0 for every param group (torch's ``_format_param``): one value, or a list of one per group."""
    if isinstance(value, (list, tuple)):
        if len(value) != len(groups):
            raise ValueError(f"{owner}: {name} has {len(value)} values for {len(groups)} param groups")
        return [_number(owner, f"{name}[{i}]", v) for i, v in enumerate(value)]
    return [_number(owner, name, value)] * len(groups)


def _kind(v) -> type:
    """A value's type as far as a JSON round trip keeps it: a tuple comes back a list, and any real
    number may stand for another."""
    if isinstance(v, bool):
        return bool
    return numbers.Real if isinstance(v, numbers.Real) else list if isinstance(v, (list, tuple)) else type(v)


def _fn_state(f):
    """What ``state_dict`` keeps of a user's function (torch's rule): a callable object's attributes,
    None for a plain function or lambda (which cannot be saved)."""
    return None if _stateless(f) else copy.deepcopy(vars(f))


def _stateless(f) -> bool:
    """A plain function or lambda, or a callable without attributes (a builtin): nothing to save."""
    return isinstance(f, types.FunctionType) or not hasattr(f, "__dict__")


def _check_fn_state(owner: str, name: str, f, attrs, whose: str):
    """``attrs`` (from ``_fn_state``) for the function ``f``: None (nothing to restore), or attributes
    that ``f``, a callable object, has, each of the kind it holds: a state sets no method and no
    attribute of a plain function."""
    mine = None if _stateless(f) else vars(f)
    if attrs is not None and (mine is None or not isinstance(attrs, dict) or any(
            k not in mine or _kind(v) is not _kind(mine[k]) for k, v in attrs.items())):
        own = "a function, which keeps no state" if mine is None else \
            f"a {type(f).__name__} with attributes {', '.join(map(repr, mine)) or 'none'}"
        raise ValueError(f"{owner}: {name} must be None or attributes of {whose} ({own}), each of the kind it "
                         f"holds; got {attrs!r}")
    return attrs


class _FunctionScheduler(LRScheduler):
    """LambdaLR's and MultiplicativeLR's machinery: ``lr_lambda``, one function of the epoch or one per
    param group, saved as torch saves it (``_fn_state``)."""

    _fixed_groups = True

    _not_state = (*LRScheduler._not_state, "lr_lambdas")

    def __init__(self, optimizer, lr_lambda, last_epoch: int = -1):
        name = type(self).__name__
        n = len(optimizer.param_groups) if hasattr(optimizer, "param_groups") else 0
        if isinstance(lr_lambda, (list, tuple)):
            if len(lr_lambda) != n:
                raise ValueError(f"{name}: expected {n} lr_lambdas (one per param group), got {len(lr_lambda)}")
            self.lr_lambdas = list(lr_lambda)
        else:
            self.lr_lambdas = [lr_lambda] * n
        for f in self.lr_lambdas:
            if not callable(f):
                raise TypeError(f"{name}: lr_lambda must be a function of the epoch, got {type(f).__name__} {f!r}")
        super().__init__(optimizer, last_epoch)

    def _factors(self) -> list:
        """Each group's ``lr_lambda(last_epoch)``, checked: a number >= 0."""
        e = self.last_epoch
        return [_number(type(self).__name__, f"lr_lambdas[{i}]({e})", f(e)) for i, f in enumerate(self.lr_lambdas)]

    def state_dict(self) -> dict:
        """The scheduler's class and state; for each lambda, a callable object's attributes or None."""
        return {**super().state_dict(), "lr_lambdas": [_fn_state(f) for f in self.lr_lambdas]}

    def _state_checks(self, state: dict) -> dict:
        return {**super()._state_checks(state), "lr_lambdas": self._check_lambdas}

    def _check_lambdas(self, owner: str, name: str, saved) -> list:
        """One entry per lambda, each checked by ``_check_fn_state``."""
        if not isinstance(saved, list) or len(saved) != len(self.lr_lambdas):
            raise ValueError(f"{owner}: {name} must be a list of {len(self.lr_lambdas)} entries, one per lr_lambda, "
                             f"got {saved!r}")
        return [_check_fn_state(owner, f"{name}[{i}]", f, attrs, f"this {type(self).__name__}'s lr_lambdas[{i}]")
                for i, (f, attrs) in enumerate(zip(self.lr_lambdas, saved))]

    def _apply(self, values: dict) -> None:
        for f, attrs in zip(self.lr_lambdas, values["lr_lambdas"]):
            if attrs is not None:
                vars(f).update(attrs)
        super()._apply({k: v for k, v in values.items() if k != "lr_lambdas"})


class LambdaLR(_FunctionScheduler):
    """The base rate times ``lr_lambda(epoch)`` (one function, or one per param group).

    ``state_dict`` holds the attributes of callable objects among the lambdas and None for plain
    functions and lambdas, which cannot be saved (torch's rule): rebuild the scheduler with the same
    functions, then load."""

    def get_lr(self):
        return [base * k for k, base in zip(self._factors(), self.base_lrs, strict=True)]


class MultiplicativeLR(_FunctionScheduler):
    """Multiply the rate by ``lr_lambda(epoch)`` every epoch after the first (one function, or one per
    param group); the constructor's step keeps the rates.

    ``state_dict`` holds the attributes of callable objects among the lambdas and None for plain
    functions and lambdas, which cannot be saved (torch's rule): rebuild the scheduler with the same
    functions, then load."""

    def get_lr(self):
        if self._initial:
            return self._lrs()
        return [lr * k for lr, k in zip(self._lrs(), self._factors(), strict=True)]


def _milestones_for(owner: str, name: str, v, n: int) -> list[int]:
    """SequentialLR's milestones: the epoch (an int >= 0) at which each scheduler after the first of ``n`` starts."""
    if not isinstance(v, list) or len(v) != n - 1:
        raise ValueError(f"{owner}: {name}: expected {n - 1} milestones for {n} schedulers, "
                         f"got {len(v) if isinstance(v, list) else repr(v)}")
    return [_positive_int(owner, f"{name}[{i}]", m, minimum=0) for i, m in enumerate(v)]


def _no_epoch(scheduler, epoch) -> None:
    """A scheduler of schedulers has no ``step(epoch)`` (torch's SequentialLR and ChainedScheduler take
    none: which of its schedulers would go to that epoch, and from where?)."""
    if epoch is not None:
        name = type(scheduler).__name__
        raise TypeError(f"{name}.step: takes no epoch (got {epoch!r}), as torch's {name}.step; call step() once "
                        f"per epoch")


class _Nested(LRScheduler):
    """A scheduler of schedulers (SequentialLR, ChainedScheduler): the checks of the list it is given,
    and each scheduler's state kept, checked and restored in its place."""

    _not_state = (*LRScheduler._not_state, "_schedulers")

    def _checked(self, schedulers, optimizer) -> list:
        """``schedulers`` as a list, each a scheduler of ``optimizer`` whose ``step()`` takes nothing."""
        name = type(self).__name__
        schedulers = list(schedulers)
        if not schedulers:
            raise ValueError(f"{name}: expected at least one scheduler, got none")
        for i, sch in enumerate(schedulers):
            if not isinstance(sch, LRScheduler):
                raise TypeError(f"{name}: schedulers[{i}] must be a scheduler, got {type(sch).__name__}")
            if isinstance(sch, ReduceLROnPlateau):
                raise TypeError(f"{name}: schedulers[{i}] is a ReduceLROnPlateau, whose step takes a metric; "
                                f"it cannot be part of a {name}")
            if sch.optimizer is not optimizer:
                raise ValueError(f"{name}: schedulers[{i}] ({type(sch).__name__}) belongs to another optimizer")
        return schedulers

    def state_dict(self) -> dict:
        """The scheduler's class and state, each scheduler's state in its place (plain, JSON-able values)."""
        return {**super().state_dict(), "_schedulers": [sch.state_dict() for sch in self._schedulers]}

    def _check_schedulers(self, owner: str, name: str, saved) -> list:
        """One state per scheduler, each checked by that scheduler: returns their ``apply``s."""
        n = len(self._schedulers)
        if not isinstance(saved, list) or len(saved) != n:
            got = f"the states of {len(saved)} schedulers" if isinstance(saved, list) else repr(saved)
            raise ValueError(f"{owner}: {name} holds {got}; this {type(self).__name__} has {n} "
                             f"({', '.join(type(s).__name__ for s in self._schedulers)})")
        applies = []
        for i, (sch, sd) in enumerate(zip(self._schedulers, saved)):
            try:
                applies.append(sch.prepare_load(sd))
            except ValueError as e:
                raise ValueError(f"{owner}: {name}[{i}]: {e}") from None
        return applies

    def _apply(self, values: dict) -> None:
        for apply in values["_schedulers"]:
            apply()
        super()._apply({k: v for k, v in values.items() if k != "_schedulers"})


class SequentialLR(_Nested):
    """``schedulers[i]`` from ``milestones[i - 1]`` on: each takes over at its milestone from its own
    epoch 0 (torch's semantics: the rate restarts at its closed form for epoch 0, from the base rate).

    The schedulers are built on the same optimizer first (each performs its initial step); this
    undoes those steps and starts the first one again, as torch does."""

    def __init__(self, optimizer, schedulers, milestones, last_epoch: int = -1):
        schedulers = self._checked(schedulers, optimizer)
        milestones = _milestones_for("SequentialLR", "milestones", list(milestones), len(schedulers))
        self.optimizer, self._schedulers, self._milestones = optimizer, schedulers, milestones
        self.last_epoch = _epoch("SequentialLR", "last_epoch", last_epoch) + 1
        for group in optimizer.param_groups:
            group["lr"] = group["initial_lr"]
        for sch in schedulers:
            sch._undo_initial_step()
        first = schedulers[bisect.bisect_right(milestones, 0)]
        first._initial_step()
        self._last_lr = first.get_last_lr()

    def _undo_initial_step(self) -> None:
        for sch in self._schedulers:
            sch._undo_initial_step()

    def step(self, epoch=None) -> None:
        """Advance one epoch: the scheduler of this epoch's stretch steps, or restarts at its milestone.

        Args:
            epoch: refused (a TypeError), as torch's SequentialLR.step refuses it.
        """
        _no_epoch(self, epoch)
        self.last_epoch += 1
        i = bisect.bisect_right(self._milestones, self.last_epoch)
        sch = self._schedulers[i]
        if i > 0 and self._milestones[i - 1] == self.last_epoch:
            sch._update_lr(0)
        else:
            sch.step()
        self._last_lr = sch.get_last_lr()

    def _state_checks(self, state: dict) -> dict:
        # (the schedulers' states before the milestones: their number decides how many milestones there are)
        return {"last_epoch": _epoch, "_schedulers": self._check_schedulers,
                "_milestones": functools.partial(_milestones_for, n=len(self._schedulers)),
                "_last_lr": functools.partial(_rates, n=len(self.optimizer.param_groups), check=_real)}


_t_cur = functools.partial(_number, what="a number >= -1", ok=lambda x: x >= -1)


class CosineAnnealingWarmRestarts(LRScheduler):
    """SGDR: cosine annealing from the base rate to ``eta_min`` over ``T_0`` epochs, then a restart at
    the base rate, each period ``T_mult`` times the last. ``step(epoch)`` may jump to a fractional
    epoch (``epoch + i / iters`` per batch), as torch's."""

    _fixed_groups = True

    def __init__(self, optimizer, T_0: int, T_mult: int = 1, eta_min: float = 0.0, last_epoch: int = -1):  # noqa: N803
        owner = "CosineAnnealingWarmRestarts"
        self.T_0 = self.T_i = _positive_int(owner, "T_0", T_0)
        self.T_mult = _positive_int(owner, "T_mult", T_mult)
        self.eta_min = _number(owner, "eta_min", eta_min)
        self.T_cur = last_epoch
        super().__init__(optimizer, last_epoch)

    def _state_checks(self, state: dict) -> dict:
        return {**super()._state_checks(state), "T_0": _positive_int, "T_i": _positive_int, "T_mult": _positive_int,
                "eta_min": _number, "T_cur": _t_cur}

    def get_lr(self):
        return [self.eta_min + (base - self.eta_min) * (1 + math.cos(math.pi * self.T_cur / self.T_i)) / 2
                for base in self.base_lrs]

    def step(self, epoch: float | None = None) -> None:
        """Advance one epoch, or go to ``epoch`` (a number >= 0, fractional for steps within an epoch).

        Args:
            epoch: None (the next epoch) or the epoch to set.
        """
        self._check_groups()
        if epoch is None and self.last_epoch < 0:
            epoch = 0
        if epoch is None:
            epoch = self.last_epoch + 1
            self.T_cur += 1
            if self.T_cur >= self.T_i:
                self.T_cur, self.T_i = self.T_cur % self.T_i, self.T_i * self.T_mult
        else:  # (no deprecation warning: a fractional epoch is this scheduler's own API, as in torch)
            epoch = _number("CosineAnnealingWarmRestarts.step", "epoch", epoch)
            if epoch < self.T_0:
                self.T_i, self.T_cur = self.T_0, epoch
            elif self.T_mult == 1:
                self.T_cur = epoch % self.T_0
            else:
                n = self._restarts(epoch)
                self.T_cur = epoch - self._restart_epoch(n)
                self.T_i = self.T_0 * self.T_mult**n
        self.last_epoch = math.floor(epoch)
        self._set_lrs(self.get_lr())

    def _restart_epoch(self, n: int) -> int:
        """The epoch of the ``n``-th restart (T_mult > 1): the sum of the first ``n`` periods, exactly."""
        return self.T_0 * (self.T_mult**n - 1) // (self.T_mult - 1)

    def _restarts(self, epoch: float) -> int:
        """The number of restarts by ``epoch`` (>= T_0, T_mult > 1): the largest ``n`` whose restart epoch is
        at most ``epoch``. torch's float logarithm alone is one short at some restarts (``log(243, 3)`` is
        4.999...: epoch 121 with ``T_0=1, T_mult=3`` gave the end of the previous period, ``eta_min``, instead
        of the restart's base rate); it is the first guess here, corrected against the exact restart epochs."""
        n = int(math.log(epoch / self.T_0 * (self.T_mult - 1) + 1, self.T_mult))
        while n > 0 and self._restart_epoch(n) > epoch:
            n -= 1
        while self._restart_epoch(n + 1) <= epoch:
            n += 1
        return n


def _choice(*options: str):
    """A check that the value is one of the strings ``options``."""
    def check(owner: str, name: str, v) -> str:
        if not isinstance(v, str) or v not in options:
            raise ValueError(f"{owner}: {name} must be one of {', '.join(map(repr, options))}, got {v!r}")
        return v
    return check


_plateau_mode, _threshold_mode = _choice("min", "max"), _choice("rel", "abs")
_plateau_factor = functools.partial(_number, what="a number in [0, 1)", ok=lambda x: 0 <= x < 1)
_count = functools.partial(_positive_int, minimum=0)


def _threshold(owner: str, name: str, v, mode: str, threshold_mode: str):
    """ReduceLROnPlateau's threshold: a number >= 0; below 1 in mode 'min' with threshold_mode 'rel',
    where ``best * (1 - threshold)`` must stay on the side of ``best`` (else no value is ever better)."""
    if mode == "min" and threshold_mode == "rel":
        return _number(owner, name, v, "a number in [0, 1) with mode='min', threshold_mode='rel'",
                       lambda x: 0 <= x < 1)
    return _number(owner, name, v)


def _best(owner: str, name: str, v):
    """The best metric seen: any real number or +-inf (the initial ``mode_worse``), never NaN (a NaN
    metric is never better, so it never becomes the best)."""
    check_number(owner, name, v)
    if isinstance(v, (bool, np.bool_)) or v != v:
        raise ValueError(f"{owner}: {name} must be a number or +-inf, got {v!r}")
    return float(v)


def _default_min_lr(owner: str, name: str, v):
    return None if v is None else _number(owner, name, v)


def _metric(v) -> float:
    """ReduceLROnPlateau's monitored value as a float: a real number, a numpy scalar, or a 0-d array
    (or any 0-d array-like with ``item()``); a str, a bool or a larger array is refused."""
    if not isinstance(v, numbers.Real) and getattr(v, "ndim", None) == 0 and hasattr(v, "item"):
        v = v.item()
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Real):
        shape = getattr(v, "shape", None)
        what = f"an array of shape {tuple(shape)}" if shape is not None else f"{type(v).__name__} {v!r}"
        raise TypeError(f"ReduceLROnPlateau.step: metrics must be a number (a float, a numpy scalar or a 0-d "
                        f"array), got {what}")
    return float(v)


class ReduceLROnPlateau(LRScheduler):
    """Multiply the rates by ``factor`` (down to ``min_lr``, one value or one per param group) when the
    monitored metric, given to ``step(metrics)``, has not improved for more than ``patience`` steps;
    then wait ``cooldown`` steps before counting again. Improving means below ``best * (1 - threshold)``
    (``threshold_mode='rel'``) or ``best - threshold`` (``'abs'``) in ``mode='min'``; above
    ``best * (1 + threshold)`` or ``best + threshold`` in ``mode='max'``. A reduction smaller than
    ``eps`` is skipped. As torch's: the constructor changes no rate, and a NaN metric is never an
    improvement (it counts as a bad epoch)."""

    def __init__(self, optimizer, mode: str = "min", factor: float = 0.1, patience: int = 10, threshold: float = 1e-4,
                 threshold_mode: str = "rel", cooldown: int = 0, min_lr=0, eps: float = 1e-8):
        owner = "ReduceLROnPlateau"
        if not hasattr(optimizer, "param_groups"):
            raise TypeError(f"{owner}: expected an optimizer, got {type(optimizer).__name__} {optimizer!r}")
        self.factor = _plateau_factor(owner, "factor", factor)
        if isinstance(min_lr, (list, tuple)):
            self.default_min_lr = None
            self.min_lrs = _per_group(owner, "min_lr", min_lr, optimizer.param_groups)
        else:
            self.default_min_lr = _number(owner, "min_lr", min_lr)
            self.min_lrs = [self.default_min_lr] * len(optimizer.param_groups)
        self.patience = _count(owner, "patience", patience)
        self.cooldown = _count(owner, "cooldown", cooldown)
        self.eps = _number(owner, "eps", eps)
        self.mode = _plateau_mode(owner, "mode", mode)
        self.threshold_mode = _threshold_mode(owner, "threshold_mode", threshold_mode)
        self.threshold = _threshold(owner, "threshold", threshold, mode, threshold_mode)
        self.mode_worse = math.inf if mode == "min" else -math.inf
        self.optimizer = optimizer
        self.last_epoch = 0
        self._last_lr = self._lrs()
        self.best, self.cooldown_counter, self.num_bad_epochs = self.mode_worse, 0, 0

    @property
    def in_cooldown(self) -> bool:
        """Whether the scheduler is waiting out ``cooldown`` steps after a reduction."""
        return self.cooldown_counter > 0

    def _is_better(self, a: float, best: float) -> bool:
        if self.mode == "min" and self.threshold_mode == "rel":
            return a < best * (1.0 - self.threshold)
        if self.mode == "min":
            return a < best - self.threshold
        if self.threshold_mode == "rel":
            return a > best * (self.threshold + 1.0)
        return a > best + self.threshold

    def step(self, metrics, epoch: int | None = None) -> None:
        """Count one epoch with the monitored value ``metrics``, and reduce the rates if it has not
        improved for more than ``patience`` epochs (outside a cooldown).

        Args:
            metrics: the monitored value: a float, a numpy scalar or a 0-d array (NaN counts as no
                improvement, as in torch).
            epoch: deprecated, as in torch (it warns): the epoch number to record as ``last_epoch``
                (an integer >= 0) instead of the next one; the plateau logic is the same.
        """
        current = _metric(metrics)
        if epoch is not None:
            epoch = _step_epoch("ReduceLROnPlateau.step", epoch)
        n = len(self.optimizer.param_groups)
        if n != len(self.min_lrs) and self.default_min_lr is None:
            raise ValueError(f"ReduceLROnPlateau.step: the optimizer has {n} param groups and min_lr has "
                             f"{len(self.min_lrs)} values (a param group was added); set min_lrs to one per group")
        self.last_epoch = self.last_epoch + 1 if epoch is None else epoch
        if self._is_better(current, self.best):
            self.best, self.num_bad_epochs = current, 0
        else:
            self.num_bad_epochs += 1
        if self.in_cooldown:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0  # bad epochs in a cooldown do not count
        if self.num_bad_epochs > self.patience:
            self._reduce_lr()
            self.cooldown_counter, self.num_bad_epochs = self.cooldown, 0
        self._last_lr = self._lrs()

    def _reduce_lr(self) -> None:
        if len(self.min_lrs) != len(self.optimizer.param_groups):  # (a group was added; one min_lr for all)
            self.min_lrs = [self.default_min_lr] * len(self.optimizer.param_groups)
        for group, lo in zip(self.optimizer.param_groups, self.min_lrs, strict=True):
            old = float(group["lr"])
            new = max(old * self.factor, lo)
            if old - new > self.eps:
                group["lr"] = new

    def _state_checks(self, state: dict) -> dict:
        n = len(self.optimizer.param_groups)
        return {"factor": _plateau_factor, "default_min_lr": _default_min_lr,
                "min_lrs": functools.partial(_rates, n=n, what="min_lr values"),
                "patience": _count, "cooldown": _count, "eps": _number, "last_epoch": _count,
                "_last_lr": functools.partial(_rates, n=n, check=_real),
                # (mode and threshold_mode are checked before the keys that depend on them: a bad one has raised)
                "mode": _plateau_mode, "threshold_mode": _threshold_mode,
                "threshold": lambda owner, name, v: _threshold(owner, name, v, state["mode"], state["threshold_mode"]),
                "mode_worse": lambda owner, name, v: self._check_mode_worse(owner, name, v, state["mode"]),
                "best": _best,
                "cooldown_counter": lambda owner, name, v: self._check_at_most(owner, name, v, state, "cooldown"),
                "num_bad_epochs": lambda owner, name, v: self._check_at_most(owner, name, v, state, "patience")}

    @staticmethod
    def _check_mode_worse(owner: str, name: str, v, mode: str) -> float:
        want = math.inf if mode == "min" else -math.inf
        if v != want or isinstance(v, bool):
            raise ValueError(f"{owner}: {name} must be {want} for mode={mode!r}, got {v!r}")
        return want

    @staticmethod
    def _check_at_most(owner: str, name: str, v, state: dict, bound: str) -> int:
        """A counter between 0 and ``state[bound]`` (a step leaves it there)."""
        v = _count(owner, name, v)
        if v > state[bound]:
            raise ValueError(f"{owner}: {name} must be at most {bound} ({state[bound]}), got {v}")
        return v


_cyclic_modes = {"triangular": "cycle", "triangular2": "cycle", "exp_range": "iterations"}  # mode -> its scale_mode
_scale_mode = _choice("cycle", "iterations")
_step_ratio = functools.partial(_number, what="a number in (0, 1)", ok=lambda x: 0 < x < 1)
_scale = functools.partial(_number, what="a number in [0, 1]", ok=lambda x: 0 <= x <= 1)


class CyclicLR(LRScheduler):
    """Cyclical learning rates (per batch): each group's rate goes from ``base_lr`` up to ``max_lr`` over
    ``step_size_up`` steps and back over ``step_size_down`` (default: the same), the amplitude scaled
    by ``mode`` ('triangular': constant; 'triangular2': halved every cycle; 'exp_range':
    ``gamma ** step``) or by your ``scale_fn(x)`` (in [0, 1]; ``x`` the cycle number, or the step with
    ``scale_mode='iterations'``). With ``cycle_momentum`` the group's ``momentum`` (SGD, RMSprop) or
    ``betas[0]`` (Adam family) moves inversely between ``max_momentum`` and ``base_momentum``.

    ``state_dict`` holds a callable object's attributes for ``scale_fn`` and None for a plain function
    or lambda, which cannot be saved (torch's rule): rebuild the scheduler with the same function, then
    load."""

    _fixed_groups = True

    _not_state = (*LRScheduler._not_state, "_scale_fn_custom")

    def __init__(self, optimizer, base_lr, max_lr, step_size_up: int = 2000, step_size_down: int | None = None,
                 mode: str = "triangular", gamma: float = 1.0, scale_fn=None, scale_mode: str = "cycle",
                 cycle_momentum: bool = True, base_momentum=0.8, max_momentum=0.9, last_epoch: int = -1):
        owner = "CyclicLR"
        if not hasattr(optimizer, "param_groups"):
            raise TypeError(f"{owner}: expected an optimizer, got {type(optimizer).__name__} {optimizer!r}")
        _epoch(owner, "last_epoch", last_epoch)
        groups = optimizer.param_groups
        base_lrs = _per_group(owner, "base_lr", base_lr, groups)  # (all checked before a group is written)
        max_lrs = _per_group(owner, "max_lr", max_lr, groups)
        up = _positive_int(owner, "step_size_up", step_size_up)
        down = up if step_size_down is None else _positive_int(owner, "step_size_down", step_size_down)
        if scale_fn is not None and not callable(scale_fn):
            raise TypeError(f"{owner}: scale_fn must be None or a function, got {type(scale_fn).__name__} {scale_fn!r}")
        self._scale_fn_custom = scale_fn
        self.mode = self._check_mode(owner, "mode", mode)
        self.gamma = _positive(owner, "gamma", gamma)
        self.scale_mode = _scale_mode(owner, "scale_mode", scale_mode) if scale_fn is not None else _cyclic_modes[mode]
        self.cycle_momentum = _cycle_momentum(owner, "cycle_momentum", bool(cycle_momentum), optimizer)
        if self.cycle_momentum:
            his = _per_group(owner, "max_momentum", max_momentum, groups)
            los = _per_group(owner, "base_momentum", base_momentum, groups)
        self.max_lrs = max_lrs
        self.total_size = float(up) + float(down)
        self.step_ratio = float(up) / self.total_size
        if last_epoch == -1:
            for group, lr in zip(groups, base_lrs, strict=True):
                group["lr"] = lr
        if self.cycle_momentum:
            self.use_beta1 = "betas" in optimizer.defaults
            self.base_momentums, self.max_momentums = los, his
            if last_epoch == -1:
                for group, hi, lo in zip(groups, his, los, strict=True):
                    _set_momentum(group, hi, self.use_beta1)
                    group["max_momentum"], group["base_momentum"] = hi, lo
        super().__init__(optimizer, last_epoch)
        # As torch: the constructor's step ran from the groups' initial_lr (base_lr unless an earlier
        # scheduler set initial_lr); the cycle runs from base_lr.
        self.base_lrs = base_lrs

    def _check_mode(self, owner: str, name: str, v) -> str:
        """One of the three modes; with a ``scale_fn``, which replaces the mode, any str (as torch)."""
        if self._scale_fn_custom is not None and isinstance(v, str):
            return v
        return _choice(*_cyclic_modes)(owner, name, v)

    def scale_fn(self, x) -> float:
        """The amplitude's scale at ``x`` (the cycle number, or the step with scale_mode 'iterations'):
        your ``scale_fn``'s, else ``mode``'s.

        Args:
            x: the cycle number (from 1) or the step.

        Returns:
            A float.
        """
        if self._scale_fn_custom is not None:
            return self._scale_fn_custom(x)
        if self.mode == "triangular":
            return 1.0
        if self.mode == "triangular2":
            return 1 / (2.0 ** (x - 1))
        return self.gamma**x

    def get_lr(self):
        cycle = math.floor(1 + self.last_epoch / self.total_size)
        x = 1.0 + self.last_epoch / self.total_size - cycle
        if x <= self.step_ratio:
            scale_factor = x / self.step_ratio
        else:
            scale_factor = (x - 1) / (self.step_ratio - 1)
        at = cycle if self.scale_mode == "cycle" else self.last_epoch
        k = self.scale_fn(at)
        if self._scale_fn_custom is not None:
            k = _scale("CyclicLR", f"scale_fn({at})", k)
        lrs = [base + (hi - base) * scale_factor * k for base, hi in zip(self.base_lrs, self.max_lrs, strict=True)]
        if self.cycle_momentum:
            for group, lo, hi in zip(self.optimizer.param_groups, self.base_momentums, self.max_momentums,
                                     strict=True):
                _set_momentum(group, hi - (hi - lo) * scale_factor * k, self.use_beta1)
        return lrs

    def state_dict(self) -> dict:
        """The scheduler's class and state; for ``scale_fn``, a callable object's attributes or None."""
        f = self._scale_fn_custom
        return {**super().state_dict(), "_scale_fn_custom": None if f is None else _fn_state(f)}

    def _state_checks(self, state: dict) -> dict:
        n, opt = len(self.optimizer.param_groups), self.optimizer
        checks = {**super()._state_checks(state), "max_lrs": functools.partial(_rates, n=n),
                  "total_size": _positive, "step_ratio": _step_ratio, "mode": self._check_mode, "gamma": _positive,
                  # (mode is checked before scale_mode: a bad one has raised by then)
                  "scale_mode": lambda owner, name, v: self._check_scale_mode(owner, name, v, state["mode"]),
                  "cycle_momentum": functools.partial(_cycle_momentum, optimizer=opt),
                  "_scale_fn_custom": self._check_scale_fn_state}
        if state.get("cycle_momentum") is not False:  # (kept with cycle_momentum only; a bad value fails on its own)
            checks.update(use_beta1=functools.partial(_use_beta1, optimizer=opt),
                          base_momentums=functools.partial(_rates, n=n, what="momentums"),
                          max_momentums=functools.partial(_rates, n=n, what="momentums"))
        return checks

    def _check_scale_mode(self, owner: str, name: str, v, mode: str) -> str:
        v = _scale_mode(owner, name, v)
        if self._scale_fn_custom is None and v != _cyclic_modes[mode]:
            raise ValueError(f"{owner}: {name} must be {_cyclic_modes[mode]!r} for mode={mode!r} (without a "
                             f"scale_fn), got {v!r}")
        return v

    def _check_scale_fn_state(self, owner: str, name: str, attrs):
        if self._scale_fn_custom is None:
            if attrs is not None:
                raise ValueError(f"{owner}: {name} must be None: this CyclicLR has no scale_fn; got {attrs!r}")
            return None
        return _check_fn_state(owner, name, self._scale_fn_custom, attrs, "this CyclicLR's scale_fn")

    def _apply(self, values: dict) -> None:
        attrs = values["_scale_fn_custom"]
        if attrs is not None:
            vars(self._scale_fn_custom).update(attrs)
        super()._apply({k: v for k, v in values.items() if k != "_scale_fn_custom"})
        if not self.cycle_momentum:
            for k in ("use_beta1", "base_momentums", "max_momentums"):
                vars(self).pop(k, None)
