"""LAMB (You et al., "Large Batch Optimization for Deep Learning: Training BERT in 76 minutes", 2019):
Adam's direction, rescaled per parameter tensor by a layer-wise trust ratio.

For each parameter tensor ``x`` with gradient ``g`` at step ``t`` (Algorithm 2 of the paper, with the
identity scaling function ``phi``)::

    m = beta1 * m + (1 - beta1) * g
    v = beta2 * v + (1 - beta2) * g * g
    m_hat = m / (1 - beta1**t), v_hat = v / (1 - beta2**t)          (bias_correction=True)
    r = m_hat / (sqrt(v_hat) + eps) + weight_decay * x
    trust = ||x|| / ||r||   (1 when either norm is 0; clipped to max_trust_ratio if given)
    x = x - lr * trust * r
"""

from __future__ import annotations

from luminal.core import dtype as dt
from luminal.core.errors import check_number
from luminal.frontend.ops import logical_and, minimum, where
from luminal.train.optim.adam_family import AdamFamily


def _norm(t):
    """The L2 norm of a whole tensor, in float64 for a float64 one, else in float32 (a 16-bit sum of
    squares overflows at 65504)."""
    t = t if t.dtype is dt.float64 else t.float()
    return (t * t).sum().sqrt()


class LAMB(AdamFamily):
    """Layer-wise Adaptive Moments for Batch training (the paper's Algorithm 2).

    Args:
        params: an iterable of parameters or of param-group dicts.
        lr: the learning rate ``eta``.
        betas: the moment decay rates ``(beta1, beta2)``, each in [0, 1).
        eps: added to ``sqrt(v_hat)`` (the paper uses 1e-6).
        weight_decay: the decoupled decay ``lambda``: ``lambda * x`` is added to the Adam direction
            before the trust ratio is taken, so it is scaled by it too.
        bias_correction: divide the moments by ``1 - beta**t`` (the paper's ``m_hat``, ``v_hat``).
        max_trust_ratio: an upper bound for the trust ratio (the paper's ``phi`` clipping), or None.
    """

    state_names = ("exp_avg", "exp_avg_sq")

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.0, bias_correction=True,
                 max_trust_ratio=None):
        defaults = dict(lr=lr, betas=self._betas(betas), eps=eps, weight_decay=weight_decay,
                        bias_correction=bool(bias_correction), max_trust_ratio=max_trust_ratio)
        self._validate(defaults)
        super().__init__(params, defaults)

    def _validate(self, h: dict) -> None:
        super()._validate(h)
        if h["max_trust_ratio"] is not None and not check_number("LAMB", "max_trust_ratio", h["max_trust_ratio"]) > 0:
            raise ValueError(f"LAMB: max_trust_ratio must be > 0 or None, got {h['max_trust_ratio']!r}")

    def scalars(self, group: dict, t: int) -> dict[str, float]:
        """The runtime scalars of ``group`` at step ``t``: lr, the betas, eps and the bias corrections.

        Args:
            group: the param group.
            t: the 1-based step number.
        """
        (beta1, beta2) = group["betas"]
        bc = group["bias_correction"]
        s = dict(lr=group["lr"], one_minus_beta1=1 - beta1, beta2=beta2, one_minus_beta2=1 - beta2,
                 inv_bc1=1 / (1 - beta1**t) if bc else 1.0, inv_sqrt_bc2=(1 - beta2**t) ** -0.5 if bc else 1.0,
                 eps=group["eps"])
        if group["weight_decay"] != 0:
            s["weight_decay"] = group["weight_decay"]
        if group["max_trust_ratio"] is not None:
            s["max_trust_ratio"] = group["max_trust_ratio"]
        return s

    def update(self, p, g, state: dict, s: dict, group: dict):
        """The LAMB step of one parameter tensor as graph ops.

        Args:
            p: the parameter tensor.
            g: its gradient.
            state: ``exp_avg`` and ``exp_avg_sq`` tensors.
            s: the scalar tensors of :meth:`scalars`.
            group: the param group (structural choices).

        Returns:
            ``(new_p, new_state)``.
        """
        m, v = self.moments(state, g, s)
        # sqrt(v_hat) as sqrt(v) / sqrt(1 - beta2**t), as Adam's: v / (1 - beta2**t) first is inf for v
        # above float32's largest / 1000 (|g| > ~5.8e20 at beta2 = 0.999), where sqrt(v) is finite
        r = (m * s["inv_bc1"]) / (v.sqrt() * s["inv_sqrt_bc2"] + s["eps"])
        if group["weight_decay"] != 0:
            r = r + p * s["weight_decay"]
        w_norm, r_norm = _norm(p), _norm(r)
        both = logical_and(w_norm > 0, r_norm > 0)
        trust = where(both, w_norm / where(r_norm > 0, r_norm, 1.0), 1.0)
        if group["max_trust_ratio"] is not None:
            trust = minimum(trust, s["max_trust_ratio"])
        step = (s["lr"] * trust).to(p.dtype)
        return p - r * step, {"exp_avg": m, "exp_avg_sq": v}
