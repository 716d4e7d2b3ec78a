"""What Adam and its relatives (NAdam, RAdam, Adamax, LAMB) share: the hyperparameter checks
(``betas`` a pair in [0, 1), ``lr`` and ``weight_decay`` >= 0, ``eps`` > 0) and the pieces of the update
(the weight-decay scalars, the decoupled decay, the two moments). One base, so each optimizer's file
holds only what is its own."""

from __future__ import annotations

from luminal.core.errors import check_number
from luminal.train.optim.optimizer import Optimizer


class AdamFamily(Optimizer):
    """An optimizer with Adam's ``lr``, ``betas``, ``eps`` and ``weight_decay``, checked as Adam checks
    them (in the constructor, ``add_param_group`` and a checkpoint's groups). Subclasses add the checks
    of their own hyperparameters to ``_validate``."""

    @staticmethod
    def decay_scalars(group: dict, s: dict) -> dict:
        """``s`` with the weight decay's scalar: ``decay = 1 - lr * wd`` when decoupled (AdamW's), else
        ``weight_decay`` (added to the gradient by ``descent_grad``); none without weight decay."""
        wd = group["weight_decay"]
        if wd != 0:
            if group.get("decoupled_weight_decay", False):
                s["decay"] = 1 - group["lr"] * wd
            else:
                s["weight_decay"] = wd
        return s

    @staticmethod
    def decayed(p, s: dict, group: dict):
        """``p`` shrunk by the decoupled weight decay (before the update, as torch's), else ``p``."""
        return p * s["decay"] if group["weight_decay"] != 0 and group.get("decoupled_weight_decay", False) else p

    @staticmethod
    def moments(state: dict, g, s: dict) -> tuple:
        """The new first and second moments: ``lerp(exp_avg, g, 1 - beta1)`` and
        ``exp_avg_sq * beta2 + ((1 - beta2) * g) * g``, in the order of torch's ``addcmul_(g, g,
        value=1 - beta2)``: ``g * g`` first overflows float32 from ``|g|`` ~ 1.8e19, where torch's square
        stays finite (to ~1.8e20 at beta2 = 0.999) and still takes a step."""
        m = state["exp_avg"] + (g - state["exp_avg"]) * s["one_minus_beta1"]
        return m, state["exp_avg_sq"] * s["beta2"] + (s["one_minus_beta2"] * g) * g

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
