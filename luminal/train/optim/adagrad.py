"""Adagrad (with lr decay and a non-zero initial accumulator): torch's ``_single_tensor_adagrad``."""

from __future__ import annotations

import numpy as np

from luminal.train.optim.optimizer import Optimizer


class Adagrad(Optimizer):
    """torch.optim.Adagrad. The ``sum`` state starts at ``initial_accumulator_value``: the
    constructor's, for every group (as torch does; a group's own value is kept but not used)."""

    state_names = ("sum",)

    # torch's positional order: its 7th argument is foreach, a kernel choice (maximize there read it as ascent)
    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0, eps=1e-10,
                 foreach=None, *, maximize=False, differentiable=False, fused=None):
        self._torch_kernels(foreach=foreach, fused=fused, differentiable=differentiable)
        defaults = dict(lr=lr, lr_decay=lr_decay, weight_decay=weight_decay,
                        initial_accumulator_value=initial_accumulator_value, eps=eps, maximize=maximize)
        self._validate(defaults)
        super().__init__(params, defaults)

    def _validate(self, h: dict) -> None:
        self._nonnegative(h, ("lr", "lr_decay", "weight_decay", "initial_accumulator_value"))
        self._epsilon(h)

    def add_param_group(self, group: dict) -> None:
        self._validate({**self.defaults, **group})
        super().add_param_group(group)

    def state_for(self, p):
        fresh = id(p) not in self.state
        st = super().state_for(p)
        if fresh:
            st["sum"].set(np.full(p.shape, self.defaults["initial_accumulator_value"], np.float64))
        return st

    def scalars(self, group: dict, t: int) -> dict[str, float]:
        s = dict(clr=group["lr"] / (1 + (t - 1) * group["lr_decay"]), eps=group["eps"])
        if group["weight_decay"] != 0:
            s["weight_decay"] = group["weight_decay"]
        return s

    def update(self, p, g, state: dict, s: dict, group: dict):
        g = self.descent_grad(p, g, s, group)
        total = state["sum"] + g * g
        return p - s["clr"] * (g / (total.sqrt() + s["eps"])), {**state, "sum": total}
