"""RAdam, Adam with the variance of its adaptive learning rate rectified: torch's
``_single_tensor_radam``."""

from __future__ import annotations

from luminal.train.optim.adam_family import AdamFamily


class RAdam(AdamFamily):
    """torch.optim.RAdam (``decoupled_weight_decay=True``: ``p *= 1 - lr * weight_decay`` before the
    update, as AdamW, instead of the L2 term in the gradient).

    torch chooses per step between the rectified adaptive step (once the approximated SMA length
    ``rho_t`` exceeds 5) and plain momentum SGD. Here that choice is three runtime scalars,
    ``adaptive`` (``sqrt(1 - beta2**t) * rect``, or 0), ``plain`` (0, or 1) and ``denom_eps`` (``eps``, or
    ``eps + 1``), in one formula ``p - lr / (1 - beta1**t) * m * (adaptive / (sqrt(v) + denom_eps) +
    plain)``: one compiled step serves every step, either side of the switch. The plain steps'
    denominator is at least 1, so that they divide 0 by a positive number where torch's never divide:
    with ``sqrt(v) + eps`` a zero gradient's 0 / 0 would be NaN wherever ``eps`` rounds to 0 (float16's
    1e-8), and NaN * 0 + 1 is NaN. The rectified steps divide by ``sqrt(v) + eps`` exactly (+ 0.0).
    """

    state_names = ("exp_avg", "exp_avg_sq")

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, decoupled_weight_decay=False,
                 *, foreach=None, maximize=False, capturable=False, differentiable=False):
        self._torch_kernels(foreach=foreach, capturable=capturable, differentiable=differentiable)
        defaults = dict(lr=lr, betas=self._betas(betas), eps=eps, weight_decay=weight_decay, maximize=maximize,
                        decoupled_weight_decay=decoupled_weight_decay)
        self._validate(defaults)
        super().__init__(params, defaults)

    def scalars(self, group: dict, t: int) -> dict[str, float]:
        lr, (beta1, beta2) = group["lr"], group["betas"]
        bias_correction2 = 1 - beta2**t
        rho_inf = 2 / (1 - beta2) - 1
        rho_t = rho_inf - 2 * t * beta2**t / bias_correction2
        if rho_t > 5.0:  # (torch's test, in float64 on the host as torch's)
            rect = ((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t)) ** 0.5
            adaptive, plain = bias_correction2**0.5 * rect, 0.0
        else:
            adaptive, plain = 0.0, 1.0
        s = dict(one_minus_beta1=1 - beta1, beta2=beta2, one_minus_beta2=1 - beta2, bias_correction1=1 - beta1**t,
                 lr=lr, adaptive=adaptive, plain=plain, denom_eps=group["eps"] + plain)
        return self.decay_scalars(group, s)

    def update(self, p, g, state: dict, s: dict, group: dict):
        g = self.descent_grad(p, g, s, group)
        p = self.decayed(p, s, group)
        m, v = self.moments(state, g, s)
        step = m / s["bias_correction1"] * s["lr"]
        return p - step * (s["adaptive"] / (v.sqrt() + s["denom_eps"]) + s["plain"]), {"exp_avg": m, "exp_avg_sq": v}
