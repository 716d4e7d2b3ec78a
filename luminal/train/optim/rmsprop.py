"""RMSprop (centered, with momentum): torch's ``_single_tensor_rmsprop``."""

from __future__ import annotations

import numpy as np

from luminal.core import dtype as dt
from luminal.frontend.ops import minimum
from luminal.train.optim.optimizer import Optimizer


def _finite_max(d: dt.DType) -> float:
    """The largest finite value of the float dtype ``d``."""
    return 3.3895313892515355e38 if d is dt.bfloat16 else float(np.finfo(d.np).max)


class RMSprop(Optimizer):
    """torch.optim.RMSprop. State: ``square_avg``; ``momentum_buffer`` when momentum > 0 and
    ``grad_avg`` when centered (in some group)."""

    # torch's positional order (all its arguments are positional): capturable, foreach, then maximize
    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0, centered=False,
                 capturable=False, foreach=None, maximize=False, differentiable=False):
        self._torch_kernels(foreach=foreach, capturable=capturable, differentiable=differentiable)
        defaults = dict(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay, momentum=momentum,
                        centered=centered, maximize=maximize)
        self._validate(defaults)
        super().__init__(params, defaults)

    def _validate(self, h: dict) -> None:
        self._nonnegative(h, ("lr", "alpha", "weight_decay", "momentum"))
        self._epsilon(h)

    def add_param_group(self, group: dict) -> None:
        self._validate({**self.defaults, **group})
        super().add_param_group(group)

    @property
    def state_names(self) -> tuple[str, ...]:
        """The per-parameter state: ``square_avg``, plus ``momentum_buffer`` with momentum and
        ``grad_avg`` when centered.
        """
        names = ("square_avg",)
        if any(g["momentum"] > 0 for g in self.param_groups):
            names += ("momentum_buffer",)
        if any(g["centered"] for g in self.param_groups):
            names += ("grad_avg",)
        return names

    def scalars(self, group: dict, t: int) -> dict[str, float]:
        s = dict(lr=group["lr"], alpha=group["alpha"], one_minus_alpha=1 - group["alpha"], eps=group["eps"])
        if group["weight_decay"] != 0:
            s["weight_decay"] = group["weight_decay"]
        if group["momentum"] > 0:
            s["momentum"] = group["momentum"]
        return s

    def update(self, p, g, state: dict, s: dict, group: dict):
        new_state = dict(state)
        g = self.descent_grad(p, g, s, group)
        # torch's addcmul_(g, g, value=1 - alpha): ((1 - alpha) * g) * g, finite for larger g than g * g first
        sq = new_state["square_avg"] = state["square_avg"] * s["alpha"] + (s["one_minus_alpha"] * g) * g
        if group["centered"]:
            ga = new_state["grad_avg"] = state["grad_avg"] + (g - state["grad_avg"]) * s["one_minus_alpha"]
            # ga * ga <= sq, so it overflows only where sq is inf already: there torch's fused multiply-add
            # (sq.addcmul(ga, ga, value=-1)) gives inf - finite = inf, and the step 0 (g / inf); capped at the
            # largest finite value, the square does the same here instead of inf - inf = NaN
            avg = (sq - minimum(ga * ga, _finite_max(ga.dtype))).sqrt() + s["eps"]
        else:
            avg = sq.sqrt() + s["eps"]
        if group["momentum"] > 0:
            buf = new_state["momentum_buffer"] = state["momentum_buffer"] * s["momentum"] + g / avg
            return p - buf * s["lr"], new_state
        return p - s["lr"] * (g / avg), new_state
