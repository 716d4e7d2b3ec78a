"""SGD with momentum, dampening, Nesterov momentum and weight decay: torch's ``_single_tensor_sgd``."""

from __future__ import annotations

from luminal.frontend.ops import where
from luminal.train.optim.optimizer import Optimizer


class SGD(Optimizer):
    """torch.optim.SGD. As in torch, the momentum buffer is the gradient itself at its first step
    (``first_step`` is 1.0 then, else 0.0, and selects it exactly: one graph serves every step): the
    first update, or the first after a group's momentum was switched on (torch creates the buffer
    then; a zero buffer would take the dampening)."""

    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False, maximize=False, *,
                 foreach=None, fused=None, differentiable=False):
        self._torch_kernels(foreach=foreach, fused=fused, differentiable=differentiable)
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                        nesterov=nesterov, maximize=maximize)
        self._validate(defaults)
        super().__init__(params, defaults)
        self._momentum_started: set[int] = set()  # id(group) of groups an update with momentum has run for

    def _validate(self, h: dict) -> None:
        self._nonnegative(h, ("lr", "momentum", "weight_decay"))
        if h["nesterov"] and (h["momentum"] <= 0 or h["dampening"] != 0):
            raise ValueError(f"SGD: nesterov=True needs momentum > 0 and dampening = 0, got momentum="
                             f"{h['momentum']!r}, dampening={h['dampening']!r}")

    def add_param_group(self, group: dict) -> None:
        self._validate({**self.defaults, **group})
        super().add_param_group(group)

    @property
    def state_names(self) -> tuple[str, ...]:
        """The per-parameter state: ``momentum_buffer`` when any group has momentum, else none."""
        return ("momentum_buffer",) if any(g["momentum"] != 0 for g in self.param_groups) else ()

    def scalars(self, group: dict, t: int) -> dict[str, float]:
        s = {"lr": group["lr"]}
        if group["weight_decay"] != 0:
            s["weight_decay"] = group["weight_decay"]
        if group["momentum"] != 0:
            first = t == 1 or id(group) not in self._momentum_started
            s.update(momentum=group["momentum"], one_minus_dampening=1 - group["dampening"],
                     first_step=1.0 if first else 0.0)
        return s

    def count_update(self, trained) -> None:
        """``Optimizer.count_update``, and each group with momentum now has a momentum buffer (torch's
        first step of it makes one): its next updates take the dampening."""
        super().count_update(trained)
        self._momentum_started |= {id(g) for g in self.param_groups if g["momentum"] != 0}

    def state_dict(self) -> dict:
        """``Optimizer.state_dict`` and which groups' momentum buffers have run (``momentum_started``,
        group indices): a resumed run then starts a buffer where torch's would."""
        sd = super().state_dict()
        sd["momentum_started"] = [i for i, g in enumerate(self.param_groups) if id(g) in self._momentum_started]
        return sd

    def prepare_load(self, sd: dict):
        """``Optimizer.prepare_load``, and ``momentum_started`` (absent in state saved before it was
        recorded: every group with momentum whose state has steps)."""
        apply = super().prepare_load(sd)
        started = sd.get("momentum_started")
        n = len(self.param_groups)
        if started is None:
            started = [i for i, g in enumerate(sd["param_groups"]) if g.get("momentum", 0) != 0] if sd["steps"] else []
        elif not (isinstance(started, list) and all(type(i) is int and 0 <= i < n for i in started)):
            raise ValueError(f"SGD.load_state_dict: momentum_started must be a list of group indices (0..{n - 1}), "
                             f"got {started!r}")

        def run():
            apply()
            self._momentum_started = {id(self.param_groups[i]) for i in started}

        return run

    def update(self, p, g, state: dict, s: dict, group: dict):
        new_state = dict(state)
        g = self.descent_grad(p, g, s, group)
        if group["momentum"] != 0:
            buf = state["momentum_buffer"] * s["momentum"] + g * s["one_minus_dampening"]
            buf = where(s["first_step"] > 0, g, buf)
            new_state["momentum_buffer"] = buf
            g = g + buf * s["momentum"] if group["nesterov"] else buf
        return p - g * s["lr"], new_state
