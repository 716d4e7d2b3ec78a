"""The rest of torch's loss modules (``nn.PoissonNLLLoss``, ``nn.MarginRankingLoss``, ``nn.CTCLoss``, ...):
torch's names, constructor arguments and defaults, each a thin module over its function
(``luminal/nn/losses_likelihood.py``, ``losses_margin.py``, ``losses_embedding.py``, ``losses_ctc.py``),
on the bases of ``loss.py`` (``_Loss``, ``_WeightedLoss``): the reduction is checked when the module is
made, torch's deprecated ``size_average``/``reduce`` keep their places but are refused, and a class
``weight`` is a registered float buffer, as torch's (``state_dict`` has torch's keys).

The hyperparameters are checked when the module is made, so that a bad one fails at the line that
builds the model rather than at its first forward.
"""

from __future__ import annotations

from luminal.core.errors import check_int, check_number
from luminal.nn import losses_ctc, losses_embedding, losses_likelihood, losses_margin
from luminal.nn.layers.loss import _Loss, _WeightedLoss


def _positive_margin(owner: str, margin) -> float:
    if not check_number(owner, "margin", margin) > 0:
        raise ValueError(f"{owner}: margin must be greater than 0, got {margin!r}")
    return margin


class PoissonNLLLoss(_Loss):
    """torch's ``nn.PoissonNLLLoss(log_input=True, full=False, size_average=None, eps=1e-08, reduce=None,
    reduction='mean')``: ``F.poisson_nll_loss``.

    Args:
        log_input: the input is the log of the rate. full: add the Stirling term (targets > 1).
        size_average, reduce: refused (deprecated in torch). eps: keeps ``log(input + eps)`` finite.
        reduction: 'mean', 'sum' or 'none'.
    """

    def __init__(self, log_input: bool = True, full: bool = False, size_average=None, eps: float = 1e-8,
                 reduce=None, reduction: str = "mean"):
        super().__init__(size_average, reduce, reduction)
        self.log_input, self.full = log_input, full
        self.eps = check_number("PoissonNLLLoss", "eps", eps)

    def forward(self, log_input, target):
        """The loss of the predicted (log-)rates ``log_input`` against the counts ``target``.

        Args:
            log_input: the log-rates (or rates, with ``log_input=False``). target: the counts.
        """
        return losses_likelihood.poisson_nll_loss(log_input, target, self.log_input, self.full, eps=self.eps,
                                                  reduction=self.reduction)


class GaussianNLLLoss(_Loss):
    """torch's ``nn.GaussianNLLLoss(*, full=False, eps=1e-06, reduction='mean')``: ``F.gaussian_nll_loss``.

    Args:
        full: add the constant ``log(2 pi) / 2``. eps: the smallest variance read (>= 0).
        reduction: 'mean', 'sum' or 'none'.
    """

    def __init__(self, *, full: bool = False, eps: float = 1e-6, reduction: str = "mean"):
        super().__init__(reduction=reduction)
        self.full = full
        self.eps = check_number("GaussianNLLLoss", "eps", eps)

    def forward(self, input, target, var):  # noqa: A002
        """The loss of ``target`` under the normal distributions of means ``input`` and variances ``var``.

        Args:
            input: the means. target: the targets. var: the variances (a tensor or a number).
        """
        return losses_likelihood.gaussian_nll_loss(input, target, var, full=self.full, eps=self.eps,
                                                   reduction=self.reduction)


class MarginRankingLoss(_Loss):
    """torch's ``nn.MarginRankingLoss(margin=0.0, size_average=None, reduce=None, reduction='mean')``:
    ``F.margin_ranking_loss``.

    Args:
        margin: the gap wanted between the scores. size_average, reduce: refused.
        reduction: 'mean', 'sum' or 'none'.
    """

    def __init__(self, margin: float = 0.0, size_average=None, reduce=None, reduction: str = "mean"):
        super().__init__(size_average, reduce, reduction)
        self.margin = check_number("MarginRankingLoss", "margin", margin)

    def forward(self, input1, input2, target):
        """The loss of ranking ``input1`` against ``input2`` as ``target`` (+-1) says.

        Args:
            input1, input2: the scores. target: +-1 labels.
        """
        return losses_margin.margin_ranking_loss(input1, input2, target, self.margin, reduction=self.reduction)


class HingeEmbeddingLoss(_Loss):
    """torch's ``nn.HingeEmbeddingLoss(margin=1.0, size_average=None, reduce=None, reduction='mean')``:
    ``F.hinge_embedding_loss``.

    Args:
        margin: the distance dissimilar pairs are pushed to. size_average, reduce: refused.
        reduction: 'mean', 'sum' or 'none'.
    """

    def __init__(self, margin: float = 1.0, size_average=None, reduce=None, reduction: str = "mean"):
        super().__init__(size_average, reduce, reduction)
        self.margin = check_number("HingeEmbeddingLoss", "margin", margin)

    def forward(self, input, target):  # noqa: A002
        """The loss of the distances ``input`` against the +-1 labels ``target``.

        Args:
            input: the distances. target: +-1 labels.
        """
        return losses_margin.hinge_embedding_loss(input, target, self.margin, reduction=self.reduction)


class SoftMarginLoss(_Loss):
    """torch's ``nn.SoftMarginLoss(size_average=None, reduce=None, reduction='mean')``:
    ``F.soft_margin_loss``.

    Args:
        size_average, reduce: refused. reduction: 'mean', 'sum' or 'none'.
    """

    def forward(self, input, target):  # noqa: A002
        """The logistic loss of the scores ``input`` against the +-1 labels ``target``.

        Args:
            input: the scores. target: +-1 labels.
        """
        return losses_margin.soft_margin_loss(input, target, reduction=self.reduction)


class CosineEmbeddingLoss(_Loss):
    """torch's ``nn.CosineEmbeddingLoss(margin=0.0, size_average=None, reduce=None, reduction='mean')``:
    ``F.cosine_embedding_loss``.

    Args:
        margin: the largest cosine wanted for dissimilar pairs. size_average, reduce: refused.
        reduction: 'mean', 'sum' or 'none'.
    """

    def __init__(self, margin: float = 0.0, size_average=None, reduce=None, reduction: str = "mean"):
        super().__init__(size_average, reduce, reduction)
        self.margin = check_number("CosineEmbeddingLoss", "margin", margin)

    def forward(self, input1, input2, target):
        """The loss of the pairs ``input1``, ``input2`` against the +-1 labels ``target``.

        Args:
            input1, input2: (N, D) or (D,) vectors. target: (N,) or 0-d +-1 labels.
        """
        return losses_embedding.cosine_embedding_loss(input1, input2, target, self.margin, reduction=self.reduction)


class MultiLabelMarginLoss(_Loss):
    """torch's ``nn.MultiLabelMarginLoss(size_average=None, reduce=None, reduction='mean')``:
    ``F.multilabel_margin_loss``.

    Args:
        size_average, reduce: refused. reduction: 'mean', 'sum' or 'none'.
    """

    def forward(self, input, target):  # noqa: A002
        """The loss of the scores ``input`` against the listed classes ``target``.

        Args:
            input: scores (N, C) or (C,). target: int32 class indices of the input's shape, ended by -1.
        """
        return losses_margin.multilabel_margin_loss(input, target, reduction=self.reduction)


class MultiLabelSoftMarginLoss(_WeightedLoss):
    """torch's ``nn.MultiLabelSoftMarginLoss(weight=None, size_average=None, reduce=None, reduction='mean')``:
    ``F.multilabel_soft_margin_loss``. A ``weight`` is the buffer ``weight``, cast to the input's dtype.

    Args:
        weight: a per-class weight (C,), or None. size_average, reduce: refused.
        reduction: 'mean', 'sum' or 'none'.
    """

    def forward(self, input, target):  # noqa: A002
        """The loss of the logits ``input`` against the 0/1 labels ``target``.

        Args:
            input: logits (N, C) or (C,). target: 0/1 labels of the input's shape.
        """
        return losses_margin.multilabel_soft_margin_loss(input, target, self._read(self.weight, input),
                                                         reduction=self.reduction)


class MultiMarginLoss(_WeightedLoss):
    """torch's ``nn.MultiMarginLoss(p=1, margin=1.0, weight=None, size_average=None, reduce=None,
    reduction='mean')``: ``F.multi_margin_loss``. A class ``weight`` is the buffer ``weight``, cast to the
    input's dtype.

    Args:
        p: 1 or 2. margin: the gap wanted. weight: (C,) class weights, or None.
        size_average, reduce: refused. reduction: 'mean', 'sum' or 'none'.
    """

    def __init__(self, p: int = 1, margin: float = 1.0, weight=None, size_average=None, reduce=None,
                 reduction: str = "mean"):
        if p not in (1, 2) or isinstance(p, bool):
            raise ValueError(f"MultiMarginLoss: only p == 1 and p == 2 are supported, got {p!r}")
        super().__init__(weight, size_average, reduce, reduction)
        if self.weight is not None and self.weight.ndim != 1:
            raise ValueError(f"MultiMarginLoss: weight must be one-dimensional, got shape {self.weight.shape}")
        self.p = p
        self.margin = check_number("MultiMarginLoss", "margin", margin)

    def forward(self, input, target):  # noqa: A002
        """The loss of the scores ``input`` against the class indices ``target``.

        Args:
            input: scores (N, C) or (C,). target: int32 class indices (N,) or 0-d.
        """
        return losses_margin.multi_margin_loss(input, target, self.p, self.margin, self._read(self.weight, input),
                                               reduction=self.reduction)


class TripletMarginLoss(_Loss):
    """torch's ``nn.TripletMarginLoss(margin=1.0, p=2.0, eps=1e-06, swap=False, size_average=None,
    reduce=None, reduction='mean')``: ``F.triplet_margin_loss``.

    Args:
        margin: the gap wanted (> 0). p: the norm's order. eps: added to the differences.
        swap: also use the positive-negative distance when smaller. size_average, reduce: refused.
        reduction: 'mean', 'sum' or 'none'.
    """

    def __init__(self, margin: float = 1.0, p: float = 2.0, eps: float = 1e-6, swap: bool = False,
                 size_average=None, reduce=None, reduction: str = "mean"):
        super().__init__(size_average, reduce, reduction)
        self.margin = _positive_margin("TripletMarginLoss", margin)
        self.p = check_number("TripletMarginLoss", "p", p)
        self.eps = check_number("TripletMarginLoss", "eps", eps)
        self.swap = swap

    def forward(self, anchor, positive, negative):
        """The loss of the triplets.

        Args:
            anchor, positive, negative: (N, D) or (D,) embeddings.
        """
        return losses_embedding.triplet_margin_loss(anchor, positive, negative, self.margin, self.p, self.eps,
                                                    self.swap, reduction=self.reduction)


class TripletMarginWithDistanceLoss(_Loss):
    """torch's ``nn.TripletMarginWithDistanceLoss(*, distance_function=None, margin=1.0, swap=False,
    reduction='mean')``: ``F.triplet_margin_with_distance_loss``.

    Args:
        distance_function: a callable of two GraphTensors -> distances, or None (``pairwise_distance``).
        margin: the gap wanted (> 0). swap: also use the positive-negative distance when smaller.
        reduction: 'mean', 'sum' or 'none'.
    """

    def __init__(self, *, distance_function=None, margin: float = 1.0, swap: bool = False, reduction: str = "mean"):
        super().__init__(reduction=reduction)
        if distance_function is not None and not callable(distance_function):
            raise TypeError(f"TripletMarginWithDistanceLoss: distance_function must be callable, got "
                            f"{type(distance_function).__name__}")
        self.distance_function = distance_function
        self.margin = _positive_margin("TripletMarginWithDistanceLoss", margin)
        self.swap = swap

    def forward(self, anchor, positive, negative):
        """The loss of the triplets.

        Args:
            anchor, positive, negative: embeddings, as ``distance_function`` takes them.
        """
        return losses_embedding.triplet_margin_with_distance_loss(
            anchor, positive, negative, distance_function=self.distance_function, margin=self.margin,
            swap=self.swap, reduction=self.reduction)


class CTCLoss(_Loss):
    """torch's ``nn.CTCLoss(blank=0, reduction='mean', zero_infinity=False)``: ``F.ctc_loss``.

    Args:
        blank: the blank label's index. reduction: 'mean' (each loss divided by its target length,
            then the batch mean), 'sum' or 'none'. zero_infinity: impossible alignments cost 0 (and
            give 0 gradients) instead of inf.
    """

    def __init__(self, blank: int = 0, reduction: str = "mean", zero_infinity: bool = False):
        super().__init__(reduction=reduction)
        self.blank = check_int("CTCLoss", "blank", blank, 0)
        self.zero_infinity = zero_infinity

    def forward(self, log_probs, targets, input_lengths, target_lengths):
        """The CTC loss of the label sequences ``targets`` under the frame log-probabilities ``log_probs``.

        Args:
            log_probs: (T, N, C) or (T, C) log-probabilities. targets: (N, S) padded or concatenated 1-d
                int32 labels. input_lengths, target_lengths: ints (sequences) or int32 tensors.
        """
        return losses_ctc.ctc_loss(log_probs, targets, input_lengths, target_lengths, self.blank, self.reduction,
                                   self.zero_infinity)
