"""Muon, momentum orthogonalized by Newton-Schulz: torch.optim.Muon (``_single_tensor_muon``)."""

from __future__ import annotations

import math

from luminal.core import dtype as dt
from luminal.core.errors import check_int
from luminal.frontend.ops import maximum
from luminal.train.optim.checks import as_tuple
from luminal.train.optim.optimizer import Optimizer

_ADJUST_LR = {None: "original", "original": "original", "match_rms_adamw": "match_rms_adamw"}


def _lr_ratio(fn: str, shape) -> float:
    """torch's ``_adjust_lr`` factor for a parameter of ``shape`` (A, B): ``sqrt(max(1, A / B))``
    ("original", Keller Jordan's) or ``0.2 * sqrt(max(A, B))`` ("match_rms_adamw", Moonshot's)."""
    a, b = shape[:2]
    return math.sqrt(max(1, a / b)) if fn == "original" else 0.2 * math.sqrt(max(a, b))


class Muon(Optimizer):
    """torch.optim.Muon, for 2-d parameters (the weights of hidden layers; train biases, embeddings and
    other parameters with another optimizer, such as AdamW, in a second optimizer). At each step:

    * ``momentum_buffer = lerp(momentum_buffer, g, 1 - momentum)``; the update is ``lerp(g,
      momentum_buffer, momentum)`` with ``nesterov``, else the buffer;
    * the update is orthogonalized by ``ns_steps`` Newton-Schulz iterations in bfloat16, as torch's (the
      wider side transposed to the columns, scaled to norm 1 with ``eps`` as the norm's floor, then ``X = a
      X + (b A + c A @ A) @ X`` with ``A = X @ X.T``, ``(a, b, c) = ns_coefficients``);
    * ``p *= 1 - lr * weight_decay``, then ``p -= lr * ratio * update``, ``ratio`` from
      ``adjust_lr_fn`` and the parameter's shape (A, B): ``sqrt(max(1, A / B))`` (None or "original") or
      ``0.2 * sqrt(max(A, B))`` ("match_rms_adamw").

    The coefficients are runtime scalars, one set per iteration (``a0, b0, c0, a1, ...``): changing
    ``ns_steps`` or ``adjust_lr_fn`` in a group changes the update's terms, and a compiled train step
    builds again.
    """

    state_names = ("momentum_buffer",)

    def __init__(self, params, lr=1e-3, weight_decay=0.1, momentum=0.95, nesterov=True,
                 ns_coefficients=(3.4445, -4.7750, 2.0315), eps=1e-7, ns_steps=5, adjust_lr_fn=None):
        defaults = dict(lr=lr, weight_decay=weight_decay, momentum=momentum, nesterov=nesterov,
                        ns_coefficients=as_tuple("Muon", "ns_coefficients", ns_coefficients, 3), eps=eps,
                        ns_steps=ns_steps, adjust_lr_fn=adjust_lr_fn)
        self._validate(defaults)
        super().__init__(params, defaults)

    def _validate(self, h: dict) -> None:
        self._nonnegative(h, ("lr", "weight_decay", "momentum"))
        self._epsilon(h)
        as_tuple("Muon", "ns_coefficients", h["ns_coefficients"], 3)
        if check_int("Muon", "ns_steps", h["ns_steps"], minimum=0) >= 100:
            raise ValueError(f"Muon: invalid ns_steps {h['ns_steps']!r} (torch's limit: fewer than 100 "
                             f"Newton-Schulz iterations)")
        if not isinstance(h["nesterov"], bool):
            raise TypeError(f"Muon: nesterov must be True or False, got {h['nesterov']!r}")
        fn = h["adjust_lr_fn"]
        if not (fn is None or isinstance(fn, str) and fn in _ADJUST_LR):
            raise ValueError(f"Muon: adjust_lr_fn {fn!r} is not supported (None, 'original' or 'match_rms_adamw')")

    def add_param_group(self, group: dict) -> None:
        if "ns_coefficients" in group:
            group = {**group, "ns_coefficients": as_tuple("Muon", "ns_coefficients", group["ns_coefficients"], 3)}
        self._validate({**self.defaults, **group})
        super().add_param_group(group)
        for p in self.param_groups[-1]["params"]:
            if len(p.shape) != 2:
                self.param_groups.pop()
                raise ValueError(f"Muon: only 2-d parameters can be trained with Muon, got {p.describe()}; "
                                 f"give the others (biases, norms' weights, ...) to another optimizer, such as AdamW")

    def scalars(self, group: dict, t: int) -> dict[str, float]:
        lr = group["lr"]
        s = {"one_minus_momentum": 1 - group["momentum"], "momentum": group["momentum"], "eps": group["eps"],
             "decay": 1 - lr * group["weight_decay"], f"lr_{_ADJUST_LR[group['adjust_lr_fn']]}": lr}
        a, b, c = group["ns_coefficients"]
        for k in range(group["ns_steps"]):
            s.update({f"a{k}": a, f"b{k}": b, f"c{k}": c})
        return s

    def update(self, p, g, state: dict, s: dict, group: dict):
        buf = state["momentum_buffer"] + (g - state["momentum_buffer"]) * s["one_minus_momentum"]
        u = g + (buf - g) * s["momentum"] if group["nesterov"] else buf
        # bfloat16 values, each product computed in float32 and rounded once to bfloat16, as torch's CPU
        # bfloat16 mm and addmm (float32 accumulation; beta * C added before the rounding)
        x = u.to(dt.bfloat16).float()
        wide = p.shape[0] > p.shape[1]
        if wide:
            x = x.T
        norm = maximum((x * x).sum().sqrt().to(dt.bfloat16), s["eps"].to(dt.bfloat16)).float()
        x = (x / norm).to(dt.bfloat16).float()
        for k in range(group["ns_steps"]):
            a, b, c = (s[f"{n}{k}"].to(dt.float32) for n in "abc")
            gram = (x @ x.T).to(dt.bfloat16).float()
            gram = (b * gram + c * (gram @ gram)).to(dt.bfloat16).float()
            x = (a * x + gram @ x).to(dt.bfloat16).float()
        if wide:
            x = x.T
        fn = _ADJUST_LR[group["adjust_lr_fn"]]
        lr = s[f"lr_{fn}"] * _lr_ratio(fn, p.shape)
        return p * s["decay"] - x.to(p.dtype) * lr, {"momentum_buffer": buf}
