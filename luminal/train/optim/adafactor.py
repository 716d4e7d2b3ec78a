"""Adafactor (Shazeer and Stern, 2018), as torch.optim.Adafactor: ``_single_tensor_adafactor``."""

from __future__ import annotations

import math

import numpy as np

from luminal.core import dtype as dt
from luminal.core.errors import check_number
from luminal.frontend.ops import maximum
from luminal.frontend.state import State, zeros_state
from luminal.train.optim.checks import as_tuple
from luminal.train.optim.optimizer import Optimizer


def _rms(x):
    """The root mean square of a whole tensor (torch's ``x.norm(2) / sqrt(x.numel())``)."""
    return (x * x).sum().sqrt() / math.sqrt(max(int(np.prod(x.shape)), 1))


class Adafactor(Optimizer):
    """torch.optim.Adafactor. The second moment of a parameter of 2 or more dims is kept factored, as
    its row means (``row_var``, the last dim reduced to 1) and column means (``col_var``, the dim
    before it reduced to 1), their outer product divided by the mean of ``row_var`` estimating it;
    a 0-d or 1-d parameter keeps the full ``variance``. At step ``t``:

    * ``beta2_t = 1 - t ** beta2_decay``: the moments move towards the new squares by ``t ** beta2_decay``;
    * the step size is ``max(eps[1], RMS(p)) * min(lr, 1 / sqrt(t))`` (the parameter's scale, before
      the weight decay ``p *= 1 - lr * weight_decay``);
    * the update ``g / sqrt(max(var, eps[0] ** 2))`` is divided by ``max(1, RMS(update) / d)``
      (clipping). ``eps[0]`` None is the machine epsilon of the parameter's dtype.
    """

    def __init__(self, params, lr=1e-2, beta2_decay=-0.8, eps=(None, 1e-3), d=1.0, weight_decay=0.0, *,
                 foreach=None, maximize=False):
        self._torch_kernels(foreach=foreach)
        defaults = dict(lr=lr, beta2_decay=beta2_decay, eps=as_tuple("Adafactor", "eps", eps, 2, allow_none=(0,)),
                        d=d, weight_decay=weight_decay, maximize=maximize)
        self._validate(defaults)
        super().__init__(params, defaults)

    def _validate(self, h: dict) -> None:
        self._nonnegative(h, ("lr", "weight_decay"))
        if not check_number("Adafactor", "beta2_decay", h["beta2_decay"]) <= 0:
            raise ValueError(f"Adafactor: invalid beta2_decay {h['beta2_decay']!r} (must be <= 0)")
        eps1, eps2 = as_tuple("Adafactor", "eps", h["eps"], 2, allow_none=(0,))
        if eps1 is not None and not eps1 > 0:
            raise ValueError(f"Adafactor: invalid eps[0] {eps1!r} (must be > 0 or None: it keeps the update's "
                             f"denominator off 0)")
        if not eps2 >= 0:
            raise ValueError(f"Adafactor: invalid eps[1] {eps2!r} (must be >= 0)")
        if not check_number("Adafactor", "d", h["d"]) >= 1:
            raise ValueError(f"Adafactor: invalid d {h['d']!r} (the clipping threshold must be >= 1)")

    def add_param_group(self, group: dict) -> None:
        if "eps" in group:
            group = {**group, "eps": as_tuple("Adafactor", "eps", group["eps"], 2, allow_none=(0,))}
        self._validate({**self.defaults, **group})
        super().add_param_group(group)

    def state_for(self, p: State) -> dict[str, State]:
        """``row_var`` and ``col_var`` for a parameter of 2 or more dims, else ``variance`` (torch's)."""
        st = self.state.setdefault(id(p), {})
        if not st:
            shape, tag = tuple(p.shape), p.name or "param"
            shapes = ({"row_var": shape[:-1] + (1,), "col_var": shape[:-2] + (1, shape[-1])} if len(shape) > 1
                      else {"variance": shape})
            for n, sh in shapes.items():
                st[n] = zeros_state(sh, p.dtype, f"{tag}.{n}")
        return st

    def scalars(self, group: dict, t: int) -> dict[str, float]:
        lr, eps1 = group["lr"], group["eps"][0]
        s = dict(lr=lr, weight=float(t) ** group["beta2_decay"], rho=min(lr, 1 / t**0.5), eps2=group["eps"][1],
                 d=group["d"])
        if eps1 is not None:  # (else a constant of the parameter's dtype)
            s["eps1"], s["eps1_sq"] = eps1, eps1 * eps1
        if group["weight_decay"] != 0:
            s["decay"] = 1 - lr * group["weight_decay"]
        return s

    def update(self, p, g, state: dict, s: dict, group: dict):
        if group["maximize"]:
            g = -g
        if "eps1" in s:
            eps1, eps1_sq = s["eps1"], s["eps1_sq"]
        else:
            eps1 = float(dt.finfo(p.dtype).eps)
            eps1_sq = eps1 * eps1
        alpha = maximum(_rms(p), s["eps2"]) * s["rho"]
        if group["weight_decay"] != 0:
            p = p * s["decay"]
        sq = g * g
        if len(p.shape) > 1:
            row = state["row_var"] + (sq.mean(-1, keepdim=True) - state["row_var"]) * s["weight"]
            col = state["col_var"] + (sq.mean(-2, keepdim=True) - state["col_var"]) * s["weight"]
            var = row * col / maximum(row.mean(-2, keepdim=True), eps1)
            new_state = {"row_var": row, "col_var": col}
        else:
            var = state["variance"] + (sq - state["variance"]) * s["weight"]
            new_state = {"variance": var}
        update = maximum(var, eps1_sq).rsqrt() * g
        clip = maximum(_rms(update) / s["d"], 1.0)
        return p - update * (alpha / clip), new_state
