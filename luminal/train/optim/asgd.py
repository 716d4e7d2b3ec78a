"""ASGD, averaged stochastic gradient descent: torch's ``_single_tensor_asgd``."""

from __future__ import annotations

import numpy as np

from luminal.core import dtype as dt
from luminal.core.errors import check_number
from luminal.frontend.ops import where
from luminal.frontend.state import State
from luminal.train.optim.optimizer import Optimizer


class ASGD(Optimizer):
    """torch.optim.ASGD (Polyak and Juditsky's averaging). Per parameter, as torch's state: ``eta`` (the
    step's learning rate) and ``mu`` (the averaging weight), 0-d float32 tensors, and ``ax``, the running
    average of the parameter. Step ``t`` uses the ``eta`` and ``mu`` left by step ``t - 1`` (``eta`` is
    ``lr`` and ``mu`` 1 at the first), decays and moves the parameter, averages it into ``ax``
    (``ax = p`` while ``mu`` is 1, that is until ``t0`` steps have passed), and sets ``eta = lr / (1 +
    lambd * lr * t) ** alpha`` and ``mu = 1 / max(1, t - t0)`` for the next step, from this step's ``lr``.

    ``first`` (1.0 at a parameter's first step, else 0.0, a runtime scalar) selects ``lr`` as the
    first ``eta``, so one compiled program serves every step. Read the averaged weights from
    ``optimizer.state_for(p)["ax"]``.
    """

    state_names = ("eta", "mu", "ax")

    def __init__(self, params, lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0, foreach=None, maximize=False,
                 differentiable=False, capturable=False):
        self._torch_kernels(foreach=foreach, capturable=capturable, differentiable=differentiable)
        defaults = dict(lr=lr, lambd=lambd, alpha=alpha, t0=t0, weight_decay=weight_decay, maximize=maximize)
        self._validate(defaults)
        super().__init__(params, defaults)

    def _validate(self, h: dict) -> None:
        self._nonnegative(h, ("lr", "weight_decay"))
        for k in ("lambd", "alpha", "t0"):
            if check_number("ASGD", k, h[k]) != h[k]:
                raise ValueError(f"ASGD: invalid {k} {h[k]!r} (NaN)")

    def add_param_group(self, group: dict) -> None:
        self._validate({**self.defaults, **group})
        super().add_param_group(group)

    def state_for(self, p: State) -> dict[str, State]:
        """``ax`` shaped as ``p``; ``eta`` and ``mu`` 0-d float32 (torch's scalar dtype), ``mu`` from 1."""
        st = self.state.setdefault(id(p), {})
        tag = p.name or "param"
        if "eta" not in st:
            st["eta"] = State(np.zeros((), np.float32), dt.float32, f"{tag}.eta")
            st["mu"] = State(np.ones((), np.float32), dt.float32, f"{tag}.mu")
        return super().state_for(p)

    def scalars(self, group: dict, t: int) -> dict[str, float]:
        lr, lambd = group["lr"], group["lambd"]
        s = dict(lr=lr, lambd=lambd, first=1.0 if t == 1 else 0.0,
                 next_eta=lr / ((1 + lambd * lr * t) ** group["alpha"]), next_mu=1 / max(1, t - group["t0"]))
        if group["weight_decay"] != 0:
            s["weight_decay"] = group["weight_decay"]
        return s

    def update(self, p, g, state: dict, s: dict, group: dict):
        g = self.descent_grad(p, g, s, group)
        eta = where(s["first"] > 0, s["lr"].to(dt.float32), state["eta"]).to(p.dtype)
        mu = state["mu"].to(p.dtype)
        p = p * (1 - s["lambd"] * eta) - g * eta
        ax = where(mu == 1, p, state["ax"] + (p - state["ax"]) * mu)
        return p, {"eta": s["next_eta"].to(dt.float32), "mu": s["next_mu"].to(dt.float32), "ax": ax}
