"""Adam and AdamW (with AMSGrad): torch's ``_single_tensor_adam``."""

from __future__ import annotations

from luminal.frontend.ops import maximum
from luminal.train.optim.adam_family import AdamFamily


class Adam(AdamFamily):
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

    @property
    def state_names(self) -> tuple[str, ...]:
        """The per-parameter state: ``exp_avg`` and ``exp_avg_sq``, and ``max_exp_avg_sq`` when any group
        uses AMSGrad.
        """
        ams = any(g["amsgrad"] for g in self.param_groups)
        return ("exp_avg", "exp_avg_sq") + (("max_exp_avg_sq",) if ams else ())

    def scalars(self, group: dict, t: int) -> dict[str, float]:
        lr, (beta1, beta2) = group["lr"], group["betas"]
        return self.decay_scalars(group, dict(
            one_minus_beta1=1 - beta1, beta2=beta2, one_minus_beta2=1 - beta2, step_size=lr / (1 - beta1**t),
            bias_correction2_sqrt=(1 - beta2**t) ** 0.5, eps=group["eps"]))

    def update(self, p, g, state: dict, s: dict, group: dict):
        new_state = dict(state)
        g = self.descent_grad(p, g, s, group)
        p = self.decayed(p, s, group)
        m, v = self.moments(state, g, s)
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
