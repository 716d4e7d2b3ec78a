"""NAdam, Adam with Nesterov momentum and a momentum schedule: torch's ``_single_tensor_nadam``."""

from __future__ import annotations

import numbers

import numpy as np

from luminal.core.errors import check_number
from luminal.train.optim.adam_family import AdamFamily


def _mu(beta1: float, momentum_decay: float, t: int) -> float:
    """The momentum of step ``t`` (torch's ``mu``; ``t + 1`` gives its ``mu_next``)."""
    return beta1 * (1.0 - 0.5 * 0.96 ** (t * momentum_decay))


class NAdam(AdamFamily):
    """torch.optim.NAdam (``decoupled_weight_decay=True`` is torch's NAdamW: ``p *= 1 - lr *
    weight_decay`` before the update).

    torch keeps ``mu_product``, the product of the momenta of a parameter's steps so far, as per-parameter
    state (a float32 scalar, ``mu_product *= mu`` at each of its steps, ``mu`` from that step's ``betas[0]``
    and ``momentum_decay``). Here it is kept on the host, per parameter, with torch's float32 rounding
    (``mu_products``), and reaches the compiled step inside two runtime scalars (the coefficients of the
    gradient and of ``exp_avg``): one compiled step serves every step, a scheduler cycling beta1
    (``OneCycleLR``'s default with betas) included, and the state dict holds the products. A parameter
    without a recorded product (a state saved before they were kept) takes the product of its steps
    at the group's current ``betas[0]``.
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
        self._mu_product_cache: dict[tuple, dict[int, np.float32]] = {}
        self.mu_products: dict[int, np.float32] = {}  # id(param) -> torch's mu_product after its last step
        # (id(group), own step t) -> the mu_product after step t that this update's scalars were built from:
        # count_update records it for the parameters that trained
        self._next_products: dict[tuple[int, int], np.float32] = {}
        super().__init__(params, defaults)

    def _validate(self, h: dict) -> None:
        super()._validate(h)
        if not check_number(type(self).__name__, "momentum_decay", h["momentum_decay"]) >= 0:
            raise ValueError(f"{type(self).__name__}: invalid momentum_decay {h['momentum_decay']!r} (must be >= 0)")

    def mu_product(self, beta1: float, momentum_decay: float, t: int) -> float:
        """torch's ``mu_product`` after ``t`` steps: float32 products of the steps' momenta, each
        rounded as torch's in-place ``mu_product *= mu`` on a float32 scalar. Extended from the latest
        value cached for an earlier step (a run asks for t, t + 1, ...; a resumed one starts over)."""
        cache = self._mu_product_cache.setdefault((beta1, momentum_decay), {})
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

    def _own_steps(self, p) -> int:
        """The updates ``p`` has taken (torch's per-parameter ``step``)."""
        return self.steps - self.first_steps.get(id(p), 0)

    def _product_before(self, group: dict, t: int) -> np.float32:
        """The mu_product of ``group``'s parameters at their own step ``t - 1``: the one recorded for such
        a parameter, else (none recorded: a state saved before they were kept) the product of ``t - 1``
        steps at the group's current beta1."""
        if t == 1:
            return np.float32(1.0)
        for p in group["params"]:
            if id(p) in self.mu_products and self._own_steps(p) == t - 1:
                return self.mu_products[id(p)]
        return np.float32(self.mu_product(group["betas"][0], group["momentum_decay"], t - 1))

    def count_update(self, trained) -> None:
        """``Optimizer.count_update``, and each parameter that trained keeps the mu_product its update used."""
        for g in self.param_groups:
            for p in g["params"]:
                new = self._next_products.get((id(g), self._own_steps(p) + 1)) if id(p) in trained else None
                if new is not None:
                    self.mu_products[id(p)] = new
        self._next_products.clear()
        super().count_update(trained)

    def scalars(self, group: dict, t: int) -> dict[str, float]:
        lr, (beta1, beta2), md = group["lr"], group["betas"], group["momentum_decay"]
        mu, mu_next = _mu(beta1, md, t), _mu(beta1, md, t + 1)
        mu_product = np.float32(self._product_before(group, t) * np.float32(mu))  # (torch's mu_product *= mu)
        self._next_products[(id(group), t)] = mu_product
        mu_product = float(mu_product)
        s = dict(one_minus_beta1=1 - beta1, beta2=beta2, one_minus_beta2=1 - beta2, bias_correction2=1 - beta2**t,
                 eps=group["eps"], grad_coef=lr * (1.0 - mu) / (1.0 - mu_product),
                 avg_coef=lr * mu_next / (1.0 - mu_product * mu_next))
        return self.decay_scalars(group, s)

    def state_dict(self) -> dict:
        """``Optimizer.state_dict`` and each parameter's ``mu_products`` (by parameter index, as floats)."""
        sd = super().state_dict()
        sd["mu_products"] = {str(k): float(self.mu_products[id(p)]) for k, (_, p) in enumerate(self.params())
                             if id(p) in self.mu_products}
        return sd

    def prepare_load(self, sd: dict):
        """``Optimizer.prepare_load``, and ``mu_products`` (absent in a state saved before they were kept:
        then each parameter's product is that of its steps at the group's current beta1)."""
        apply = super().prepare_load(sd)
        params = [p for _, p in self.params()]
        saved = sd.get("mu_products", {})
        if not isinstance(saved, dict):
            raise ValueError(f"NAdam.load_state_dict: mu_products must be a dict, got {type(saved).__name__}")
        products = {}
        for k, v in saved.items():
            if not (isinstance(k, str) and k.isdigit() and int(k) < len(params)):
                raise ValueError(f"NAdam.load_state_dict: mu_products: {k!r} is not a parameter index "
                                 f"(0..{len(params) - 1})")
            if isinstance(v, bool) or not isinstance(v, numbers.Real) or not 0 <= v <= 1:
                raise ValueError(f"NAdam.load_state_dict: mu_products[{k}] must be a number in [0, 1], got {v!r}")
            products[id(params[int(k)])] = np.float32(v)

        def run():
            apply()
            self.mu_products = products
            self._next_products.clear()

        return run

    def update(self, p, g, state: dict, s: dict, group: dict):
        g = self.descent_grad(p, g, s, group)
        p = self.decayed(p, s, group)
        m, v = self.moments(state, g, s)
        denom = (v / s["bias_correction2"]).sqrt() + s["eps"]
        p = p - s["grad_coef"] * g / denom - s["avg_coef"] * m / denom
        return p, {"exp_avg": m, "exp_avg_sq": v}
