"""NAdam, Adam with Nesterov momentum and a momentum schedule: torch's ``_single_tensor_nadam``."""

from __future__ import annotations

import numpy as np

from luminal.core.errors import check_number
from luminal.train.optim.adam_family import AdamFamily


def _mu(beta1: float, momentum_decay: float, t: int) -> float:
    """The momentum of step ``t`` (torch's ``mu``; ``t + 1`` gives its ``mu_next``)."""
    return beta1 * (1.0 - 0.5 * 0.96 ** (t * momentum_decay))


class NAdam(AdamFamily):
    """torch.optim.NAdam (``decoupled_weight_decay=True`` is torch's NAdamW: ``p *= 1 - lr *
    weight_decay`` before the update).

    torch keeps ``mu_product``, the product of the momenta of the steps so far, as per-parameter
    state (a float32 scalar). It depends only on the step count, so here it is computed on the host
    with torch's float32 rounding, and reaches the compiled step inside two runtime scalars (the
    coefficients of the gradient and of ``exp_avg``): one compiled step serves every step, and a
    checkpoint needs nothing more than the step count. It uses the group's current ``betas[0]`` and
    ``momentum_decay`` for every past step; torch's multiplies in each step's own, so the two differ
    only after a scheduler changes beta1 (``OneCycleLR(cycle_momentum=True)``).
    """

    state_names = ("exp_avg", "exp_avg_sq")

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, momentum_decay=4e-3,
                 decoupled_weight_decay=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False):
        self._torch_kernels(foreach=foreach, capturable=capturable, differentiable=differentiable)
        defaults = dict(lr=lr, betas=self._betas(betas), eps=eps, weight_decay=weight_decay,
                        momentum_decay=momentum_decay, decoupled_weight_decay=decoupled_weight_decay,
                        maximize=maximize)
        self._validate(defaults)
        # (beta1, momentum_decay) -> {t: mu_product after step t}, the few latest: each step extends one
        self._mu_products: dict[tuple, dict[int, np.float32]] = {}
        super().__init__(params, defaults)

    def _validate(self, h: dict) -> None:
        super()._validate(h)
        if not check_number(type(self).__name__, "momentum_decay", h["momentum_decay"]) >= 0:
            raise ValueError(f"{type(self).__name__}: invalid momentum_decay {h['momentum_decay']!r} (must be >= 0)")

    def mu_product(self, beta1: float, momentum_decay: float, t: int) -> float:
        """torch's ``mu_product`` after ``t`` steps: float32 products of the steps' momenta, each
        rounded as torch's in-place ``mu_product *= mu`` on a float32 scalar. Extended from the latest
        value cached for an earlier step (a run asks for t, t + 1, ...; a resumed one starts over)."""
        cache = self._mu_products.setdefault((beta1, momentum_decay), {})
        if t in cache:
            return float(cache[t])
        start = max((k for k in cache if k < t), default=0)
        prod = cache.get(start, np.float32(1.0))
        for i in range(start + 1, t + 1):
            prod = np.float32(prod * np.float32(_mu(beta1, momentum_decay, i)))
        cache[t] = prod
        while len(cache) > 8:  # (one entry per parameter start in use, and the steps just before)
            del cache[min(cache)]
        return float(prod)

    def scalars(self, group: dict, t: int) -> dict[str, float]:
        lr, (beta1, beta2), md = group["lr"], group["betas"], group["momentum_decay"]
        mu, mu_next = _mu(beta1, md, t), _mu(beta1, md, t + 1)
        mu_product = self.mu_product(beta1, md, t)
        s = dict(one_minus_beta1=1 - beta1, beta2=beta2, one_minus_beta2=1 - beta2, bias_correction2=1 - beta2**t,
                 eps=group["eps"], grad_coef=lr * (1.0 - mu) / (1.0 - mu_product),
                 avg_coef=lr * mu_next / (1.0 - mu_product * mu_next))
        return self.decay_scalars(group, s)

    def update(self, p, g, state: dict, s: dict, group: dict):
        g = self.descent_grad(p, g, s, group)
        p = self.decayed(p, s, group)
        m, v = self.moments(state, g, s)
        denom = (v / s["bias_correction2"]).sqrt() + s["eps"]
        p = p - s["grad_coef"] * g / denom - s["avg_coef"] * m / denom
        return p, {"exp_avg": m, "exp_avg_sq": v}
