"""Adamax, Adam with the infinity norm: torch's ``_single_tensor_adamax``."""

from __future__ import annotations

from luminal.frontend.ops import maximum
from luminal.train.optim.adam_family import AdamFamily


class Adamax(AdamFamily):
    """torch.optim.Adamax: the second moment is an exponentially weighted infinity norm,
    ``exp_inf = max(beta2 * exp_inf, |g| + eps)``, so the step needs no second bias correction
    (``eps`` sits inside the max, which keeps ``exp_inf`` above 0). Weight decay is the coupled L2
    term, as torch's (Adamax has no decoupled form). ``foreach`` is positional, as in torch's
    signature."""

    state_names = ("exp_avg", "exp_inf")

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, foreach=None, *,
                 maximize=False, differentiable=False, capturable=False):
        self._torch_kernels(foreach=foreach, capturable=capturable, differentiable=differentiable)
        defaults = dict(lr=lr, betas=self._betas(betas), eps=eps, weight_decay=weight_decay, maximize=maximize)
        self._validate(defaults)
        super().__init__(params, defaults)

    def scalars(self, group: dict, t: int) -> dict[str, float]:
        beta1, beta2 = group["betas"]
        s = dict(one_minus_beta1=1 - beta1, beta2=beta2, eps=group["eps"], clr=group["lr"] / (1 - beta1**t))
        if group["weight_decay"] != 0:
            s["weight_decay"] = group["weight_decay"]
        return s

    def update(self, p, g, state: dict, s: dict, group: dict):
        g = self.descent_grad(p, g, s, group)
        m = state["exp_avg"] + (g - state["exp_avg"]) * s["one_minus_beta1"]  # lerp(exp_avg, g, 1 - beta1)
        u = maximum(state["exp_inf"] * s["beta2"], g.abs() + s["eps"])
        return p - s["clr"] * (m / u), {"exp_avg": m, "exp_inf": u}
