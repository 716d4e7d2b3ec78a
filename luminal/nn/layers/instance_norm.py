"""``F.instance_norm`` and ``nn.InstanceNorm1d/2d/3d``: each sample's channels normalised over their
own spatial positions (style transfer, GANs), with torch's optional running statistics."""

from __future__ import annotations

import warnings

from luminal.core.errors import op_error, renamed
from luminal.core.symbolic import is_static, prod
from luminal.frontend.checks import check_tensors
from luminal.frontend.ops.elementwise import _opmath
from luminal.frontend.state import State
from luminal.frontend.tensor import GraphTensor
from luminal.nn.layers._util import bad_input, check_float, layer_forward, layer_name
from luminal.nn.layers.norm import _current, _NormBase, batch_var, normalise, running_stats


def _running(name: str, what: str, s, use_input_stats: bool, momentum):
    """A running statistic as batch_norm takes it: a State (updated in place by the compiled program
    when the input statistics are used), a GraphTensor (read only), or None."""
    if isinstance(s, State):
        if use_input_stats and not isinstance(momentum, (int, float)):
            raise TypeError(f"{name}: momentum must be a number to update {what}, got {momentum!r}")
        return s
    if s is None or isinstance(s, GraphTensor):
        if use_input_stats and s is not None:
            raise TypeError(f"{name}: use_input_stats=True updates {what} in place, which needs a State (a "
                            f"module's Buffer), not a GraphTensor; pass the Buffer or None")
        return s
    raise TypeError(f"{name}: {what} must be a GraphTensor, a State or None, got {type(s).__name__}")


def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None,  # noqa: A002
                  use_input_stats: bool = True, momentum: float = 0.1, eps: float = 1e-5):
    """torch's ``F.instance_norm`` over an (N, C, *) input: each ``(n, c)`` normalised by the mean and
    (biased) variance of its own spatial positions, then ``* weight + bias`` per channel. With running
    statistics (States, as batch_norm takes them) each run moves them towards the batch's mean over N
    of the per-instance statistics (the variance unbiased), as torch; with ``use_input_stats=False``
    the running statistics normalise instead.

    Args:
        input: a float tensor (N, C, *) with more than one spatial element (or none: an empty output,
            the running statistics left alone, as torch's).
        running_mean, running_var: (C,) States (updated), GraphTensors (read, with
            ``use_input_stats=False``) or None.
        weight, bias: optional (C,) tensors.
        use_input_stats: normalise by each instance's statistics (else by the running ones).
        momentum: the running statistics' update factor.
        eps: added to the variance.
    """
    name = "instance_norm"
    check_tensors(name, optional=("weight", "bias"), input=input, weight=weight, bias=bias)
    check_float(name, input)
    if input.ndim < 3:
        raise bad_input(name, "(N, C, *) with at least one spatial dim", input)
    spatial = prod(input.shape[2:])
    if use_input_stats and is_static(spatial) and spatial == 1:  # (0 passes, as torch's: an empty output)
        raise op_error(ValueError, name, "expected more than 1 spatial element when using the input's "
                       "statistics", input)
    rm = _running(name, "running_mean", running_mean, use_input_stats, momentum)
    rv = _running(name, "running_var", running_var, use_input_stats, momentum)
    if not use_input_stats and (rm is None or rv is None):
        raise op_error(ValueError, name, "use_input_stats=False needs running_mean and running_var", input)
    g, n, c = input.graph, input.shape[0], input.shape[1]
    for what, t in (("weight", weight), ("bias", bias), ("running_mean", rm), ("running_var", rv)):
        if t is not None and tuple(t.shape) != (c,):
            raise bad_input(name, f"({c},)", t, what=what)
    per_channel = (1, c) + (1,) * (input.ndim - 2)
    axes = tuple(range(2, input.ndim))

    @_opmath
    def run(x):
        if use_input_stats:
            mean = x.mean(axes, keepdim=True)
            var = batch_var(x, axes)
            for st, per in ((rm, mean), (rv, x.var(axes, correction=1))):
                if st is not None and not (is_static(spatial) and spatial == 0):  # (torch's leaves them)
                    batch = per.reshape(n, c).mean(0).detach()
                    g.assign(st, _current(g, st) * (1 - momentum) + batch.to(st.dtype) * momentum)
        else:
            mean, var = running_stats(g, rm, rv, x.dtype, per_channel)
        return normalise(x, mean, var, eps, weight, bias, per_channel)

    with renamed(name):
        return run(input)


class _InstanceNorm(_NormBase):
    """torch's ``_InstanceNorm``: ``instance_norm`` with the module's parameters and buffers. Unlike
    BatchNorm its defaults are ``affine=False, track_running_stats=False``; with running statistics a
    training-mode run updates them (``num_batches_tracked`` stays 0, as torch's) and eval mode
    normalises by them."""

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = False,
                 track_running_stats: bool = False, device=None, dtype=None, *, bias: bool = True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, dtype=dtype, bias=bias)

    @layer_forward
    def forward(self, x):
        name = layer_name(self)
        check_float(name, x)
        if x.ndim not in self._ranks:
            raise bad_input(name, self._layout.format(C=self.num_features), x)
        unbatched = x.ndim == self._ranks[0]
        c = x.shape[0 if unbatched else 1]
        if c != self.num_features:
            if self.affine or self.track_running_stats:
                raise bad_input(name, self._layout.format(C=self.num_features), x)
            warnings.warn(f"{name}: the input's {c} channels do not match num_features ({self.num_features}), "
                          "which is not used because affine=False and track_running_stats=False", stacklevel=3)
        g = x.graph
        w = self.weight.on(g) if self.weight is not None else None
        b = self.bias.on(g) if self.bias is not None else None
        # (not self.training first: a layer without running statistics reads no mode, as it has none)
        use_input_stats = not self.track_running_stats or self.training
        y = instance_norm(x.unsqueeze(0) if unbatched else x, self.running_mean, self.running_var, w, b,
                          use_input_stats, self.momentum if self.momentum is not None else 0.0, self.eps)
        return y.squeeze(0) if unbatched else y


class InstanceNorm1d(_InstanceNorm):
    """torch's ``nn.InstanceNorm1d(num_features, eps=1e-5, momentum=0.1, affine=False,
    track_running_stats=False, dtype=None, *, bias=True)`` over (N, C, L) or unbatched (C, L): a thin
    module over ``F.instance_norm``. A ``num_features`` that does not match the input's channels warns
    (as torch) when the layer has neither affine parameters nor running statistics, else fails.

    Args:
        num_features: C. eps: added to the variance. momentum: the running statistics' update factor
            (None: 0, no update, as torch). affine: learn ``weight`` (ones) and ``bias`` (zeros).
        track_running_stats: keep ``running_mean``/``running_var`` (and ``num_batches_tracked``),
            updated in training mode and used in eval mode. device: ignored. dtype: of the parameters and buffers.
        bias: with ``affine``, learn the bias too.
    """

    _ranks = (2, 3)
    _layout = "(N, {C}, L) or ({C}, L)"


class InstanceNorm2d(_InstanceNorm):
    """torch's ``nn.InstanceNorm2d`` over (N, C, H, W) or unbatched (C, H, W): a thin module over
    ``F.instance_norm`` (arguments as InstanceNorm1d)."""

    _ranks = (3, 4)
    _layout = "(N, {C}, H, W) or ({C}, H, W)"


class InstanceNorm3d(_InstanceNorm):
    """torch's ``nn.InstanceNorm3d`` over (N, C, D, H, W) or unbatched (C, D, H, W): a thin module over
    ``F.instance_norm`` (arguments as InstanceNorm1d)."""

    _ranks = (4, 5)
    _layout = "(N, {C}, D, H, W) or ({C}, D, H, W)"
