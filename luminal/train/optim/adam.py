"""Adam and AdamW (with AMSGrad): torch's ``_single_tensor_adam``."""

from __future__ import annotations

from luminal.core.errors import check_number
from luminal.frontend.ops import maximum
from luminal.train.optim.optimizer import Optimizer


class Adam(Optimizer):
    """torch.optim.Adam. ``decoupled_weight_decay=True`` is AdamW (``p *= 1 - lr * weight_decay``
    before the update instead of adding ``weight_decay * p`` to the gradient)."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False,
                 maximize=False, decoupled_weight_decay=False, *, foreach=None, fused=None, capturable=False,
                 differentiable=False):
        self._torch_kernels(foreach, fused, capturable, differentiable)
        defaults = dict(lr=lr, betas=self._betas(betas), eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                        maximize=maximize, decoupled_weight_decay=decoupled_weight_decay)
        self._validate(defaults)
        super().__init__(params, defaults)

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
        try:
            return tuple(betas)
        except TypeError:
            raise TypeError(f"{type(self).__name__}: betas must be a pair (beta1, beta2), got {betas!r}") from None

    def add_param_group(self, group: dict) -> None:
        if "betas" in group:
            group = {**group, "betas": self._betas(group["betas"])}
        self._validate({**self.defaults, **group})
        super().add_param_group(group)

    @property
    def state_names(self) -> tuple[str, ...]:
        """The per-parameter state: ``exp_avg`` and ``exp_avg_sq``, and ``max_exp_avg_sq`` when any group
        uses AMSGrad.
        """
        ams = any(g["amsgrad"] for g in self.param_groups)
        return ("exp_avg", "exp_avg_sq") + (("max_exp_avg_sq",) if ams else ())

    def scalars(self, group: dict, t: int) -> dict[str, float]:
        lr, (beta1, beta2), wd = group["lr"], group["betas"], group["weight_decay"]
        s = dict(one_minus_beta1=1 - beta1, beta2=beta2, one_minus_beta2=1 - beta2,
                 step_size=lr / (1 - beta1**t), bias_correction2_sqrt=(1 - beta2**t) ** 0.5, eps=group["eps"])
        if wd != 0:
            if group["decoupled_weight_decay"]:
                s["decay"] = 1 - lr * wd
            else:
                s["weight_decay"] = wd
        return s

    def update(self, p, g, state: dict, s: dict, group: dict):
        new_state = dict(state)
        g = self.descent_grad(p, g, s, group)
        if group["weight_decay"] != 0 and group["decoupled_weight_decay"]:
            p = p * s["decay"]
        m = state["exp_avg"] + (g - state["exp_avg"]) * s["one_minus_beta1"]  # lerp(exp_avg, g, 1 - beta1)
        v = state["exp_avg_sq"] * s["beta2"] + g * g * s["one_minus_beta2"]
        new_state.update(exp_avg=m, exp_avg_sq=v)
        if group["amsgrad"]:
            v = new_state["max_exp_avg_sq"] = maximum(state["max_exp_avg_sq"], v)
        denom = v.sqrt() / s["bias_correction2_sqrt"] + s["eps"]
        return p - s["step_size"] * (m / denom), new_state


class AdamW(Adam):
    """torch.optim.AdamW: Adam with decoupled weight decay (default 1e-2)."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False,
                 maximize=False, *, foreach=None, fused=None, capturable=False, differentiable=False):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize, decoupled_weight_decay=True,
                         foreach=foreach, fused=fused, capturable=capturable, differentiable=differentiable)
