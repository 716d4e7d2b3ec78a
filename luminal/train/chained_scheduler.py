"""``ChainedScheduler``: torch's scheduler that steps every scheduler of a list at each step.

Kept out of ``schedulers.py`` (one scheduler per concern, and that file is long); it shares the
nested-state machinery of SequentialLR (``schedulers._Nested``): each scheduler's state is kept,
checked and restored in its place, all or nothing.
"""

from __future__ import annotations

import functools

from luminal.train.schedulers import _Nested, _no_epoch, _rates, _real


class ChainedScheduler(_Nested):
    """torch's ``ChainedScheduler``: each ``step()`` steps every scheduler of ``schedulers`` in order,
    so their factors compose (``ConstantLR`` warm-up times ``ExponentialLR`` decay). The schedulers
    are built on the same optimizer first (each performs its initial step, as in torch, so the
    epoch-0 rates are already composed); unlike SequentialLR this undoes nothing.

    Each scheduler must be chainable: its rate at a step computed from the current ``group["lr"]``
    (all of luminal's but ReduceLROnPlateau, whose ``step`` takes a metric and which is refused,
    as torch refuses it).

    Args:
        schedulers: the schedulers, all of one optimizer.
        optimizer: that optimizer (default: the first scheduler's); a scheduler of another is refused.
    """

    def __init__(self, schedulers, optimizer=None):
        schedulers = list(schedulers)
        if optimizer is None and schedulers:
            optimizer = getattr(schedulers[0], "optimizer", None)
        self._schedulers = self._checked(schedulers, optimizer)
        self.optimizer = optimizer
        self._last_lr = self._lrs()

    def step(self, epoch=None) -> None:
        """Step every scheduler, in order; the rates they leave are the step's.

        Args:
            epoch: refused (a TypeError), as torch's ChainedScheduler.step refuses it.
        """
        _no_epoch(self, epoch)
        for sch in self._schedulers:
            sch.step()
        self._last_lr = self._lrs()

    def _undo_initial_step(self) -> None:
        for sch in self._schedulers:
            sch._undo_initial_step()

    def _state_checks(self, state: dict) -> dict:
        # torch's keys: the schedulers' states and the last rates (no epoch or base rates of its own)
        return {"_schedulers": self._check_schedulers,
                "_last_lr": functools.partial(_rates, n=len(self.optimizer.param_groups), check=_real)}

    def __repr__(self):
        return f"ChainedScheduler([{', '.join(type(s).__name__ for s in self._schedulers)}], last_lr={self._last_lr})"
