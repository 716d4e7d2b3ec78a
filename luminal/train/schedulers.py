"""Learning-rate schedulers: host-side Python over ``optimizer.param_groups[i]["lr"]``, with
torch.optim.lr_scheduler's semantics and formulas (the same recursive updates, so the values agree
to the last bit). The learning rate reaches the compiled step as a runtime scalar, so a schedule
never recompiles.

As in torch, the constructor performs the initial step (``last_epoch`` becomes 0 and the groups hold
the epoch-0 rates); call ``step()`` after each optimizer step. ``state_dict()`` is a plain JSON-able
dict; restore the optimizer's state (its groups hold the current ``lr``) and then the scheduler's.
"""

from __future__ import annotations

import bisect
import copy
import math
import numbers
import types

__all__ = ["LRScheduler", "StepLR", "MultiStepLR", "ExponentialLR", "CosineAnnealingLR", "LinearLR", "OneCycleLR",
           "LambdaLR", "SequentialLR", "CosineAnnealingWarmRestarts"]


class LRScheduler:
    """The shared machinery. A subclass implements ``get_lr()``: the learning rates for epoch
    ``self.last_epoch`` (already advanced), usually from the current ``group["lr"]``s."""

    def __init__(self, optimizer, last_epoch: int = -1):
        if not hasattr(optimizer, "param_groups"):
            raise TypeError(f"{type(self).__name__}: expected an optimizer, got {type(optimizer).__name__} "
                            f"{optimizer!r}")
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

    def step(self) -> None:
        """Advance one epoch (or iteration) and write the new rates into the optimizer's groups."""
        self._update_lr()

    def _update_lr(self, epoch: int | None = None) -> None:
        """Advance one epoch, or (``epoch`` given: SequentialLR restarting this scheduler at a milestone)
        jump to ``epoch``, by the closed form where the scheduler has one, as torch's ``_update_lr``."""
        if epoch is None:
            self.last_epoch += 1
            lrs = self.get_lr()
        else:
            self.last_epoch = epoch
            closed = getattr(self, "_closed_form_lr", None)
            lrs = closed() if closed is not None else self.get_lr()
        self._set_lrs(lrs)

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
        """Everything but the optimizer, as plain (JSON-able) values."""
        return copy.deepcopy({k: v for k, v in vars(self).items() if k != "optimizer"})

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore what ``state_dict`` returned.

        Args:
            state_dict: a dict from ``state_dict``.
        """
        self.__dict__.update(copy.deepcopy(state_dict))

    def __repr__(self):
        return f"{type(self).__name__}(last_epoch={self.last_epoch}, last_lr={self._last_lr})"


def _positive_int(owner: str, name: str, v, minimum: int = 1) -> None:
    if not isinstance(v, numbers.Integral) or isinstance(v, bool) or v < minimum:
        what = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
        raise ValueError(f"{owner}: {name} must be {what}, got {v!r}")


class StepLR(LRScheduler):
    """Multiply the rate by ``gamma`` every ``step_size`` epochs."""

    def __init__(self, optimizer, step_size: int, gamma: float = 0.1, last_epoch: int = -1):
        _positive_int("StepLR", "step_size", step_size)
        self.step_size, self.gamma = step_size, gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return self._lrs()
        return [lr * self.gamma for lr in self._lrs()]

    def _closed_form_lr(self):
        return [base * self.gamma ** (self.last_epoch // self.step_size) for base in self.base_lrs]


class MultiStepLR(LRScheduler):
    """Multiply the rate by ``gamma`` at each milestone epoch (a repeated milestone applies twice)."""

    def __init__(self, optimizer, milestones, gamma: float = 0.1, last_epoch: int = -1):
        try:
            milestones = list(milestones)
        except TypeError:
            raise TypeError(f"MultiStepLR: milestones must be a list of epochs, got {milestones!r}") from None
        for m in milestones:
            _positive_int("MultiStepLR", "each milestone", m, minimum=0)
        self.milestones = sorted(int(m) for m in milestones)
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

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
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

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
        _positive_int("CosineAnnealingLR", "T_max", T_max)
        self.T_max, self.eta_min = T_max, eta_min
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self._initial:
            return self._lrs()
        e, T, lo = self.last_epoch, self.T_max, self.eta_min
        if (e - 1 - T) % (2 * T) == 0:  # leaving the bottom of a cycle: the recursion's ratio would be 0/0
            return [lr + (base - lo) * (1 - math.cos(math.pi / T)) / 2 for lr, base in zip(self._lrs(), self.base_lrs)]
        ratio = (1 + math.cos(math.pi * e / T)) / (1 + math.cos(math.pi * (e - 1) / T))
        return [ratio * (lr - lo) + lo for lr in self._lrs()]

    def _closed_form_lr(self):
        return [self.eta_min + (base - self.eta_min) * (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2
                for base in self.base_lrs]


class LinearLR(LRScheduler):
    """Scale the rate linearly from ``start_factor`` to ``end_factor`` over ``total_iters`` epochs."""

    def __init__(self, optimizer, start_factor: float = 1.0 / 3, end_factor: float = 1.0, total_iters: int = 5,
                 last_epoch: int = -1):
        if not 0 < start_factor <= 1:
            raise ValueError(f"LinearLR: start_factor must be in (0, 1], got {start_factor!r}")
        if not 0 <= end_factor <= 1:
            raise ValueError(f"LinearLR: end_factor must be in [0, 1], got {end_factor!r}")
        self.start_factor, self.end_factor, self.total_iters = start_factor, end_factor, total_iters
        super().__init__(optimizer, last_epoch)

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


class OneCycleLR(LRScheduler):
    """The 1cycle policy (per batch): warm up from ``max_lr / div_factor`` to ``max_lr`` over
    ``pct_start`` of ``total_steps``, then anneal to ``initial_lr / final_div_factor`` (or, with
    ``three_phase``, back down symmetrically first). With ``cycle_momentum`` the group's
    ``momentum`` (SGD, RMSprop) or ``betas[0]`` (Adam family) moves inversely between
    ``max_momentum`` and ``base_momentum``."""

    def __init__(self, optimizer, max_lr, total_steps: int | None = None, epochs: int | None = None,
                 steps_per_epoch: int | None = None, pct_start: float = 0.3, anneal_strategy: str = "cos",
                 cycle_momentum: bool = True, base_momentum=0.85, max_momentum=0.95, div_factor: float = 25.0,
                 final_div_factor: float = 1e4, three_phase: bool = False, last_epoch: int = -1):
        if total_steps is not None:
            _positive_int("OneCycleLR", "total_steps", total_steps)
        elif epochs is not None and steps_per_epoch is not None:
            _positive_int("OneCycleLR", "epochs", epochs)
            _positive_int("OneCycleLR", "steps_per_epoch", steps_per_epoch)
            total_steps = epochs * steps_per_epoch
        else:
            raise ValueError("OneCycleLR: give total_steps, or both epochs and steps_per_epoch")
        if not isinstance(pct_start, float) or not 0 <= pct_start <= 1:
            raise ValueError(f"OneCycleLR: pct_start must be a float in [0, 1], got {pct_start!r}")
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"OneCycleLR: anneal_strategy must be 'cos' or 'linear', got {anneal_strategy!r}")
        self.total_steps, self.anneal_strategy, self.cycle_momentum = total_steps, anneal_strategy, cycle_momentum
        # (end step, start lr key, end lr key, start momentum key, end momentum key) per phase
        up = float(pct_start * total_steps) - 1
        if three_phase:
            self.phases = [[up, "initial_lr", "max_lr", "max_momentum", "base_momentum"],
                           [float(2 * pct_start * total_steps) - 2, "max_lr", "initial_lr", "base_momentum",
                            "max_momentum"],
                           [total_steps - 1, "initial_lr", "min_lr", "max_momentum", "max_momentum"]]
        else:
            self.phases = [[up, "initial_lr", "max_lr", "max_momentum", "base_momentum"],
                           [total_steps - 1, "max_lr", "min_lr", "base_momentum", "max_momentum"]]
        groups = optimizer.param_groups
        if last_epoch == -1:
            for group, m in zip(groups, _per_group("max_lr", max_lr, groups), strict=True):
                group["initial_lr"] = m / div_factor
                group["max_lr"] = m
                group["min_lr"] = group["initial_lr"] / final_div_factor
        if cycle_momentum:
            if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
                raise ValueError(f"OneCycleLR: cycle_momentum needs an optimizer with momentum or betas; "
                                 f"{type(optimizer).__name__} has neither")
            self.use_beta1 = "betas" in optimizer.defaults
            if last_epoch == -1:
                for group, hi, lo in zip(groups, _per_group("max_momentum", max_momentum, groups),
                                         _per_group("base_momentum", base_momentum, groups), strict=True):
                    self._set_momentum(group, hi)
                    group["max_momentum"], group["base_momentum"] = hi, lo
        super().__init__(optimizer, last_epoch)

    def _set_momentum(self, group: dict, value: float) -> None:
        if self.use_beta1:
            group["betas"] = (value, *group["betas"][1:])
        else:
            group["momentum"] = value

    def _anneal(self, start: float, end: float, pct: float) -> float:
        if self.anneal_strategy == "cos":
            return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)
        return (end - start) * pct + start

    def get_lr(self):
        step = self.last_epoch
        if step > self.total_steps:
            raise ValueError(f"OneCycleLR: tried to step {step} times; total_steps is {self.total_steps}")
        lrs = []
        for group in self.optimizer.param_groups:
            start = 0.0
            for i, (end, lr0, lr1, m0, m1) in enumerate(self.phases):
                if step <= end or i == len(self.phases) - 1:
                    pct = (step - start) / (end - start)
                    lrs.append(self._anneal(group[lr0], group[lr1], pct))
                    if self.cycle_momentum:
                        self._set_momentum(group, self._anneal(group[m0], group[m1], pct))
                    break
                start = end
        return lrs


def _per_group(name: str, value, groups) -> list:
    if isinstance(value, (list, tuple)):
        if len(value) != len(groups):
            raise ValueError(f"OneCycleLR: {name} has {len(value)} values for {len(groups)} param groups")
        return list(value)
    return [value] * len(groups)


class LambdaLR(LRScheduler):
    """The base rate times ``lr_lambda(epoch)`` (one function, or one per param group).

    ``state_dict`` holds the attributes of callable objects among the lambdas and None for plain
    functions and lambdas, which cannot be saved (torch's rule): rebuild the scheduler with the same
    functions, then load."""

    def __init__(self, optimizer, lr_lambda, last_epoch: int = -1):
        n = len(optimizer.param_groups) if hasattr(optimizer, "param_groups") else 0
        if isinstance(lr_lambda, (list, tuple)):
            if len(lr_lambda) != n:
                raise ValueError(f"LambdaLR: expected {n} lr_lambdas (one per param group), got {len(lr_lambda)}")
            self.lr_lambdas = list(lr_lambda)
        else:
            self.lr_lambdas = [lr_lambda] * n
        for f in self.lr_lambdas:
            if not callable(f):
                raise TypeError(f"LambdaLR: lr_lambda must be a function of the epoch, got {type(f).__name__} {f!r}")
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        return [base * f(self.last_epoch) for f, base in zip(self.lr_lambdas, self.base_lrs, strict=True)]

    def state_dict(self) -> dict:
        """Everything but the optimizer; for each lambda, a callable object's attributes or None."""
        sd = copy.deepcopy({k: v for k, v in vars(self).items() if k not in ("optimizer", "lr_lambdas")})
        sd["lr_lambdas"] = [None if isinstance(f, types.FunctionType) else copy.deepcopy(vars(f))
                            for f in self.lr_lambdas]
        return sd

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore what ``state_dict`` returned (the lambdas stay this scheduler's; a callable object's
        attributes are restored).

        Args:
            state_dict: a dict from ``state_dict``.
        """
        sd = copy.deepcopy(state_dict)
        saved = sd.pop("lr_lambdas", [None] * len(self.lr_lambdas))
        self.__dict__.update(sd)
        for f, attrs in zip(self.lr_lambdas, saved):
            if attrs is not None:
                vars(f).update(attrs)


class SequentialLR(LRScheduler):
    """``schedulers[i]`` from ``milestones[i - 1]`` on: each takes over at its milestone from its own
    epoch 0 (torch's semantics: the rate restarts at its closed form for epoch 0, from the base rate).

    The schedulers are built on the same optimizer first (each performs its initial step); this
    undoes those steps and starts the first one again, as torch does."""

    def __init__(self, optimizer, schedulers, milestones, last_epoch: int = -1):
        schedulers, milestones = list(schedulers), list(milestones)
        if not schedulers:
            raise ValueError("SequentialLR: expected at least one scheduler, got none")
        for i, sch in enumerate(schedulers):
            if not isinstance(sch, LRScheduler):
                raise TypeError(f"SequentialLR: schedulers[{i}] must be a scheduler, got {type(sch).__name__}")
            if sch.optimizer is not optimizer:
                raise ValueError(f"SequentialLR: schedulers[{i}] ({type(sch).__name__}) belongs to another optimizer")
        if len(milestones) != len(schedulers) - 1:
            raise ValueError(f"SequentialLR: expected {len(schedulers) - 1} milestones for {len(schedulers)} "
                             f"schedulers, got {len(milestones)}")
        for m in milestones:
            _positive_int("SequentialLR", "each milestone", m, minimum=0)
        self.optimizer, self._schedulers, self._milestones = optimizer, schedulers, milestones
        self.last_epoch = last_epoch + 1
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

    def step(self) -> None:
        """Advance one epoch: the scheduler of this epoch's stretch steps, or restarts at its milestone."""
        self.last_epoch += 1
        i = bisect.bisect_right(self._milestones, self.last_epoch)
        sch = self._schedulers[i]
        if i > 0 and self._milestones[i - 1] == self.last_epoch:
            sch._update_lr(0)
        else:
            sch.step()
        self._last_lr = sch.get_last_lr()

    def state_dict(self) -> dict:
        """Everything but the optimizer, each scheduler's state in its place (plain, JSON-able values)."""
        sd = copy.deepcopy({k: v for k, v in vars(self).items() if k not in ("optimizer", "_schedulers")})
        sd["_schedulers"] = [sch.state_dict() for sch in self._schedulers]
        return sd

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore what ``state_dict`` returned, the schedulers' states included.

        Args:
            state_dict: a dict from ``state_dict``.
        """
        sd = copy.deepcopy(state_dict)
        for sch, saved in zip(self._schedulers, sd.pop("_schedulers"), strict=True):
            sch.load_state_dict(saved)
        self.__dict__.update(sd)


class CosineAnnealingWarmRestarts(LRScheduler):
    """SGDR: cosine annealing from the base rate to ``eta_min`` over ``T_0`` epochs, then a restart at
    the base rate, each period ``T_mult`` times the last. ``step(epoch)`` may jump to a fractional
    epoch (``epoch + i / iters`` per batch), as torch's."""

    def __init__(self, optimizer, T_0: int, T_mult: int = 1, eta_min: float = 0.0, last_epoch: int = -1):  # noqa: N803
        _positive_int("CosineAnnealingWarmRestarts", "T_0", T_0)
        _positive_int("CosineAnnealingWarmRestarts", "T_mult", T_mult)
        if isinstance(eta_min, bool) or not isinstance(eta_min, numbers.Real):
            raise TypeError(f"CosineAnnealingWarmRestarts: eta_min must be a number, got {eta_min!r}")
        self.T_0, self.T_i, self.T_mult, self.eta_min = T_0, T_0, T_mult, eta_min
        self.T_cur = last_epoch
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        return [self.eta_min + (base - self.eta_min) * (1 + math.cos(math.pi * self.T_cur / self.T_i)) / 2
                for base in self.base_lrs]

    def step(self, epoch: float | None = None) -> None:
        """Advance one epoch, or go to ``epoch`` (a number >= 0, fractional for steps within an epoch).

        Args:
            epoch: None (the next epoch) or the epoch to set.
        """
        if epoch is None and self.last_epoch < 0:
            epoch = 0
        if epoch is None:
            epoch = self.last_epoch + 1
            self.T_cur += 1
            if self.T_cur >= self.T_i:
                self.T_cur, self.T_i = self.T_cur % self.T_i, self.T_i * self.T_mult
        else:
            if isinstance(epoch, bool) or not isinstance(epoch, numbers.Real) or epoch < 0:
                raise ValueError(f"CosineAnnealingWarmRestarts: epoch must be a number >= 0, got {epoch!r}")
            if epoch < self.T_0:
                self.T_i, self.T_cur = self.T_0, epoch
            elif self.T_mult == 1:
                self.T_cur = epoch % self.T_0
            else:
                n = int(math.log(epoch / self.T_0 * (self.T_mult - 1) + 1, self.T_mult))
                self.T_cur = epoch - self.T_0 * (self.T_mult**n - 1) / (self.T_mult - 1)
                self.T_i = self.T_0 * self.T_mult**n
        self.last_epoch = math.floor(epoch)
        self._set_lrs(self.get_lr())
