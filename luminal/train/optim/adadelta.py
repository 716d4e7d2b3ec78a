"""Adadelta: torch's ``_single_tensor_adadelta``."""

from __future__ import annotations

from luminal.core.errors import check_number
from luminal.train.optim.optimizer import Optimizer


class Adadelta(Optimizer):
    """torch.optim.Adadelta (Zeiler, 2012): per element, the step is the gradient scaled by the ratio
    of the running RMS of past updates (``acc_delta``) to the running RMS of gradients
    (``square_avg``), both decayed by ``rho``, times ``lr``.

    ``eps`` must be > 0 here (torch takes 0, and then a zero gradient gives 0 / 0 = NaN).
    """

    state_names = ("square_avg", "acc_delta")

    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, foreach=None, *, capturable=False,
                 maximize=False, differentiable=False):
        self._torch_kernels(foreach=foreach, capturable=capturable, differentiable=differentiable)
        defaults = dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, maximize=maximize)
        self._validate(defaults)
        super().__init__(params, defaults)

    def _validate(self, h: dict) -> None:
        self._nonnegative(h, ("lr", "weight_decay"))
        self._epsilon(h)
        if not 0 <= check_number("Adadelta", "rho", h["rho"]) <= 1:
            raise ValueError(f"Adadelta: invalid rho {h['rho']!r} (must be in [0, 1])")

    def add_param_group(self, group: dict) -> None:
        self._validate({**self.defaults, **group})
        super().add_param_group(group)

    def scalars(self, group: dict, t: int) -> dict[str, float]:
        s = dict(lr=group["lr"], rho=group["rho"], one_minus_rho=1 - group["rho"], eps=group["eps"])
        if group["weight_decay"] != 0:
            s["weight_decay"] = group["weight_decay"]
        return s

    def update(self, p, g, state: dict, s: dict, group: dict):
        g = self.descent_grad(p, g, s, group)
        # torch's addcmul_(x, x, value=1 - rho): ((1 - rho) * x) * x, finite for larger x than x * x first
        sq = state["square_avg"] * s["rho"] + (s["one_minus_rho"] * g) * g
        delta = (state["acc_delta"] + s["eps"]).sqrt() / (sq + s["eps"]).sqrt() * g
        acc = state["acc_delta"] * s["rho"] + (s["one_minus_rho"] * delta) * delta
        return p - delta * s["lr"], {"square_avg": sq, "acc_delta": acc}
