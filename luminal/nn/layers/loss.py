"""Loss modules (``nn.CrossEntropyLoss``, ``nn.MSELoss``, ...): torch's names, constructor arguments
and defaults, each a thin module over its function in ``luminal/nn/losses.py`` (``F.cross_entropy``,
...). A class weight or ``pos_weight`` is a registered buffer, as torch's, so ``state_dict`` has torch's
keys (``weight``, ``pos_weight``).

torch's deprecated ``size_average`` and ``reduce`` keep their places in the signatures (so positional
torch calls bind the same arguments) but are refused: give ``reduction`` instead.
"""

from __future__ import annotations

from luminal.core.errors import check_int, check_number
from luminal.frontend.host import value as host_value
from luminal.frontend.ops.value_checks import known_values
from luminal.frontend.tensor import GraphTensor
from luminal.nn import losses
from luminal.nn.module import Module
from luminal.nn.parameter import Buffer

_REDUCTIONS = ("none", "mean", "sum")


class _Loss(Module):
    """torch's ``_Loss``: the ``reduction`` every loss takes, checked when the module is made."""

    _reductions = _REDUCTIONS

    def __init__(self, size_average=None, reduce=None, reduction: str = "mean"):
        super().__init__()
        name = type(self).__name__
        if size_average is not None or reduce is not None:
            raise TypeError(f"{name}: size_average and reduce are deprecated in torch and not supported; give "
                            "reduction instead ('sum' for size_average=False, 'none' for reduce=False)")
        if reduction not in self._reductions:
            choices = ", ".join(repr(r) for r in self._reductions)
            raise ValueError(f"{name}: reduction must be one of {choices}, got {reduction!r}")
        self.reduction = reduction


class _WeightedLoss(_Loss):
    """torch's ``_WeightedLoss``: an optional ``weight`` buffer."""

    def __init__(self, weight=None, size_average=None, reduce=None, reduction: str = "mean"):
        super().__init__(size_average, reduce, reduction)
        self._buffer("weight", weight)

    def _buffer(self, name: str, value) -> None:
        """``value`` (an array, a tensor whose values are known now, a Buffer, or None) as the buffer
        ``name``: a float Buffer, or None (torch registers None, which ``state_dict`` leaves out)."""
        if value is None:
            setattr(self, name, None)
            return
        if isinstance(value, GraphTensor):  # (torch.tensor(w) ported as g.constant(w): its values are known)
            # (a host tensor, lm.ones(5) * 0.5: computed outside any graph, its values are known now)
            known = host_value(value, type(self).__name__) if value.graph.host else known_values(value)
            if known is None:
                raise TypeError(f"{type(self).__name__}: {name} must be known when the module is built: a numpy array "
                                f"(or a constant tensor), got a tensor computed in a graph")
            value = known.astype(value.dtype.np) if known.dtype != value.dtype.np else known
        buf = value if isinstance(value, Buffer) else Buffer(value)
        if not buf.dtype.is_float:
            raise TypeError(f"{type(self).__name__}: {name} must hold floats, got {buf.dtype.name}")
        self.register_buffer(name, buf)

    @staticmethod
    def _read(buf, like):
        """The buffer ``buf`` read into the graph of ``like``, in ``like``'s float dtype (a float64 numpy
        weight with a float32 input, which torch would refuse); passed through when ``like`` is not a
        tensor, so that the loss names the wrong argument."""
        if buf is None or not isinstance(like, GraphTensor):
            return buf
        w = buf.on(like.graph)
        return w.to(like.dtype) if like.dtype.is_float and w.dtype is not like.dtype else w


class L1Loss(_Loss):
    """torch's ``nn.L1Loss(size_average=None, reduce=None, reduction='mean')``: ``F.l1_loss``.

    Args:
        size_average, reduce: refused (deprecated in torch). reduction: 'mean', 'sum' or 'none'.
    """

    def forward(self, input, target):  # noqa: A002
        """The loss of ``input`` against ``target``.

        Args:
            input: the predictions. target: the targets.
        """
        return losses.l1_loss(input, target, reduction=self.reduction)


class MSELoss(_Loss):
    """torch's ``nn.MSELoss(size_average=None, reduce=None, reduction='mean')``: ``F.mse_loss``.

    Args:
        size_average, reduce: refused (deprecated in torch). reduction: 'mean', 'sum' or 'none'.
    """

    def forward(self, input, target):  # noqa: A002
        """The loss of ``input`` against ``target``.

        Args:
            input: the predictions. target: the targets.
        """
        return losses.mse_loss(input, target, reduction=self.reduction)


class SmoothL1Loss(_Loss):
    """torch's ``nn.SmoothL1Loss(size_average=None, reduce=None, reduction='mean', beta=1.0)``:
    ``F.smooth_l1_loss``.

    Args:
        size_average, reduce: refused. reduction: 'mean', 'sum' or 'none'.
        beta: where the loss turns from quadratic to linear (>= 0).
    """

    def __init__(self, size_average=None, reduce=None, reduction: str = "mean", beta: float = 1.0):
        super().__init__(size_average, reduce, reduction)
        if not check_number("SmoothL1Loss", "beta", beta) >= 0:
            raise ValueError(f"SmoothL1Loss: beta must be >= 0, got {beta!r}")
        self.beta = beta

    def forward(self, input, target):  # noqa: A002
        """The loss of ``input`` against ``target``.

        Args:
            input: the predictions. target: the targets.
        """
        return losses.smooth_l1_loss(input, target, reduction=self.reduction, beta=self.beta)


class HuberLoss(_Loss):
    """torch's ``nn.HuberLoss(reduction='mean', delta=1.0)``: ``F.huber_loss``.

    Args:
        reduction: 'mean', 'sum' or 'none'. delta: where the loss turns from quadratic to linear (> 0).
    """

    def __init__(self, reduction: str = "mean", delta: float = 1.0):
        super().__init__(reduction=reduction)
        if not check_number("HuberLoss", "delta", delta) > 0:
            raise ValueError(f"HuberLoss: delta must be > 0, got {delta!r}")
        self.delta = delta

    def forward(self, input, target):  # noqa: A002
        """The loss of ``input`` against ``target``.

        Args:
            input: the predictions. target: the targets.
        """
        return losses.huber_loss(input, target, reduction=self.reduction, delta=self.delta)


class KLDivLoss(_Loss):
    """torch's ``nn.KLDivLoss(size_average=None, reduce=None, reduction='mean', log_target=False)``:
    ``F.kl_div`` of log-probabilities ``input`` against ``target``.

    Args:
        size_average, reduce: refused. reduction: 'mean', 'batchmean', 'sum' or 'none'.
        log_target: ``target`` holds log-probabilities too.
    """

    _reductions = _REDUCTIONS + ("batchmean",)

    def __init__(self, size_average=None, reduce=None, reduction: str = "mean", log_target: bool = False):
        super().__init__(size_average, reduce, reduction)
        self.log_target = log_target

    def forward(self, input, target):  # noqa: A002
        """The loss of ``input`` against ``target``.

        Args:
            input: log-probabilities. target: probabilities (log-probabilities with ``log_target``).
        """
        return losses.kl_div(input, target, reduction=self.reduction, log_target=self.log_target)


class BCELoss(_WeightedLoss):
    """torch's ``nn.BCELoss(weight=None, size_average=None, reduce=None, reduction='mean')``:
    ``F.binary_cross_entropy`` of probabilities. A ``weight`` is the buffer ``weight``, cast to the
    input's dtype.

    Args:
        weight: a per-element weight broadcasting to the input, or None.
        size_average, reduce: refused. reduction: 'mean', 'sum' or 'none'.
    """

    def forward(self, input, target):  # noqa: A002
        """The loss of ``input`` against ``target``.

        Args:
            input: probabilities. target: the targets in [0, 1], of the input's shape.
        """
        return losses.binary_cross_entropy(input, target, self._read(self.weight, input), reduction=self.reduction)


class BCEWithLogitsLoss(_WeightedLoss):
    """torch's ``nn.BCEWithLogitsLoss(weight=None, size_average=None, reduce=None, reduction='mean',
    pos_weight=None)``: ``F.binary_cross_entropy_with_logits``. ``weight`` and ``pos_weight`` are
    buffers of those names, cast to the input's dtype.

    Args:
        weight: a per-element weight broadcasting to the input, or None.
        size_average, reduce: refused. reduction: 'mean', 'sum' or 'none'.
        pos_weight: the positives' weight, broadcasting along the last dims (one per class), or None.
    """

    def __init__(self, weight=None, size_average=None, reduce=None, reduction: str = "mean", pos_weight=None):
        super().__init__(weight, size_average, reduce, reduction)
        self._buffer("pos_weight", pos_weight)

    def forward(self, input, target):  # noqa: A002
        """The loss of ``input`` against ``target``.

        Args:
            input: logits. target: the targets in [0, 1], of the input's shape.
        """
        return losses.binary_cross_entropy_with_logits(input, target, self._read(self.weight, input),
                                                       reduction=self.reduction,
                                                       pos_weight=self._read(self.pos_weight, input))


class NLLLoss(_WeightedLoss):
    """torch's ``nn.NLLLoss(weight=None, size_average=None, ignore_index=-100, reduce=None,
    reduction='mean')``: ``F.nll_loss`` of log-probabilities against int32 class indices (torch's are
    int64). A class ``weight`` is the buffer ``weight``, cast to the input's dtype.

    Args:
        weight: (C,) class weights, or None. size_average, reduce: refused.
        ignore_index: a target value that contributes nothing. reduction: 'mean', 'sum' or 'none'.
    """

    def __init__(self, weight=None, size_average=None, ignore_index: int = -100, reduce=None,
                 reduction: str = "mean"):
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index = check_int("NLLLoss", "ignore_index", ignore_index)

    def forward(self, input, target):  # noqa: A002
        """The loss of ``input`` against ``target``.

        Args:
            input: log-probabilities (N, C, d1, ...) or (C,). target: int32 class indices.
        """
        return losses.nll_loss(input, target, self._read(self.weight, input), ignore_index=self.ignore_index,
                               reduction=self.reduction)


class CrossEntropyLoss(_WeightedLoss):
    """torch's ``nn.CrossEntropyLoss(weight=None, size_average=None, ignore_index=-100, reduce=None,
    reduction='mean', label_smoothing=0.0)``: ``F.cross_entropy`` of logits against int32 class indices
    (torch's are int64) or float class probabilities. A class ``weight`` is the buffer ``weight``, cast to
    the input's dtype.

    Args:
        weight: (C,) class weights, or None. size_average, reduce: refused.
        ignore_index: a target value that contributes nothing. reduction: 'mean', 'sum' or 'none'.
        label_smoothing: in [0, 1], the share of the uniform distribution mixed into the target.
    """

    def __init__(self, weight=None, size_average=None, ignore_index: int = -100, reduce=None,
                 reduction: str = "mean", label_smoothing: float = 0.0):
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index = check_int("CrossEntropyLoss", "ignore_index", ignore_index)
        if not 0.0 <= check_number("CrossEntropyLoss", "label_smoothing", label_smoothing) <= 1.0:
            raise ValueError(f"CrossEntropyLoss: label_smoothing must be in [0, 1], got {label_smoothing!r}")
        self.label_smoothing = label_smoothing

    def forward(self, input, target):  # noqa: A002
        """The loss of ``input`` against ``target``.

        Args:
            input: logits (N, C, d1, ...) or (C,). target: int32 class indices, or class probabilities
                of the input's shape.
        """
        return losses.cross_entropy(input, target, self._read(self.weight, input), ignore_index=self.ignore_index,
                                    reduction=self.reduction, label_smoothing=self.label_smoothing)
