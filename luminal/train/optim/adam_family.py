"""The hyperparameter checks that Adam's relatives in torch.optim (NAdam, RAdam, Adamax) share with
Adam: ``betas`` a pair in [0, 1), ``lr`` and ``weight_decay`` >= 0, ``eps`` > 0. One base, so each
of those optimizers' files holds only its update."""

from __future__ import annotations

from luminal.core.errors import check_number
from luminal.train.optim.optimizer import Optimizer


class AdamFamily(Optimizer):
    """An optimizer with Adam's ``lr``, ``betas``, ``eps`` and ``weight_decay``, checked as Adam checks
    them (in the constructor, ``add_param_group`` and a checkpoint's groups). Subclasses add the checks
    of their own hyperparameters to ``_validate``."""

    def _validate(self, h: dict) -> None:
        name = type(self).__name__
        self._nonnegative(h, ("lr", "weight_decay"))
        self._epsilon(h)
        if len(h["betas"]) != 2:
            raise ValueError(f"{name}: betas must be a pair (beta1, beta2), got {h['betas']!r}")
        for i, b in enumerate(h["betas"]):
            if not 0 <= check_number(name, f"betas[{i}]", b) < 1:
                raise ValueError(f"{name}: invalid betas[{i}] {b!r} (must be in [0, 1))")

    def _betas(self, betas) -> tuple:
        """``betas`` as a tuple (a list from a config file or a checkpoint compares equal to torch's)."""
        try:
            return tuple(betas)
        except TypeError:
            raise TypeError(f"{type(self).__name__}: betas must be a pair (beta1, beta2), got {betas!r}") from None

    def add_param_group(self, group: dict) -> None:
        if "betas" in group:
            group = {**group, "betas": self._betas(group["betas"])}
        self._validate({**self.defaults, **group})
        super().add_param_group(group)
