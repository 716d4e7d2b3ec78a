"""Rprop, resilient backpropagation: torch's ``_single_tensor_rprop``."""

from __future__ import annotations

from luminal.frontend.ops import maximum, minimum, sign, where
from luminal.train.optim.checks import as_tuple
from luminal.train.optim.optimizer import Optimizer


class Rprop(Optimizer):
    """torch.optim.Rprop. Each element keeps its own step size (``step_size``, starting at the group's
    ``lr`` at the parameter's first step) and moves by it against the sign of its gradient. Where the
    gradient's sign agrees with the previous one (``prev``) the step size grows by ``etas[1]``; where it
    flips, the step size shrinks by ``etas[0]`` and that element sits the step out (its gradient taken
    as 0, so the next step does not count a flip again); where either is 0 the size stays. Sizes are
    clamped to ``step_sizes`` (min, max).

    ``first`` (1.0 at a parameter's first step, else 0.0, a runtime scalar) selects ``lr`` as the step
    size to start from, so one compiled program serves every step.
    """

    state_names = ("prev", "step_size")

    def __init__(self, params, lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), *, capturable=False, foreach=None,
                 maximize=False, differentiable=False):
        self._torch_kernels(foreach=foreach, capturable=capturable, differentiable=differentiable)
        defaults = dict(lr=lr, etas=as_tuple("Rprop", "etas", etas, 2),
                        step_sizes=as_tuple("Rprop", "step_sizes", step_sizes, 2), maximize=maximize)
        self._validate(defaults)
        super().__init__(params, defaults)

    def _validate(self, h: dict) -> None:
        self._nonnegative(h, ("lr",))
        minus, plus = as_tuple("Rprop", "etas", h["etas"], 2)
        if not 0 < minus < 1 < plus:
            raise ValueError(f"Rprop: invalid etas {h['etas']!r} (must be (etaminus, etaplus) with 0 < etaminus < 1 "
                             f"< etaplus)")
        lo, hi = as_tuple("Rprop", "step_sizes", h["step_sizes"], 2)
        if not 0 <= lo <= hi:
            raise ValueError(f"Rprop: invalid step_sizes {h['step_sizes']!r} (must be (min, max) with 0 <= min <= max)")

    def add_param_group(self, group: dict) -> None:
        group = {**group, **{k: as_tuple("Rprop", k, group[k], 2) for k in ("etas", "step_sizes") if k in group}}
        self._validate({**self.defaults, **group})
        super().add_param_group(group)

    def scalars(self, group: dict, t: int) -> dict[str, float]:
        (minus, plus), (lo, hi) = group["etas"], group["step_sizes"]
        return dict(lr=group["lr"], first=1.0 if t == 1 else 0.0, etaminus=minus, etaplus=plus, step_size_min=lo,
                    step_size_max=hi)

    def update(self, p, g, state: dict, s: dict, group: dict):
        if group["maximize"]:
            g = -g
        size = where(s["first"] > 0, s["lr"].to(p.dtype), state["step_size"])
        agree = g * state["prev"]  # (torch's sign of the product: one that underflows to 0 counts as 0)
        factor = where(agree > 0, s["etaplus"], where(agree < 0, s["etaminus"], where(agree == 0, 1.0, agree)))
        size = minimum(maximum(size * factor.to(p.dtype), s["step_size_min"]), s["step_size_max"])
        g = where(agree < 0, 0.0, g)
        return p - sign(g) * size, {"prev": g, "step_size": size}
