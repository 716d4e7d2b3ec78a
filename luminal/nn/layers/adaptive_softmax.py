"""torch's ``nn.AdaptiveLogSoftmaxWithLoss`` (Grave et al. 2016, "Efficient softmax approximation for
GPUs"): the frequent classes (below ``cutoffs[0]``) in a head softmax with one extra entry per cluster of
rarer classes, each cluster's classes in a softmax of their own over a smaller projection; a class's
log-probability is its head entry's, or its cluster's head entry plus its place in the cluster.

torch evaluates each cluster only on the rows whose target falls in it (rows picked by value); a graph
has no data-dependent shapes, so here every cluster is evaluated on every row and each row's value is
selected by its target's range (``where``): the same values, and the same gradients (a row's gradient
reaches only its own cluster's projection). Targets out of ``[0, n_classes)`` are an IndexError naming
the module, now where they are known, else when the program runs (torch's RuntimeError).
"""

from __future__ import annotations

import numbers
from collections import namedtuple

from luminal.core.errors import check_int, check_number, op_error
from luminal.core.symbolic import shape_str
from luminal.frontend import ops
from luminal.frontend.checks import check_tensors
from luminal.frontend.ops.value_checks import guard, range_check
from luminal.nn.layers._util import check_float
from luminal.nn.layers.containers import ModuleList, Sequential
from luminal.nn.layers.linear import Linear
from luminal.nn.module import Module

_ASMoutput = namedtuple("_ASMoutput", ["output", "loss"])  # (torch's name)


class AdaptiveLogSoftmaxWithLoss(Module):
    """torch's ``nn.AdaptiveLogSoftmaxWithLoss(in_features, n_classes, cutoffs, div_value=4.0,
    head_bias=False, device=None, dtype=None)``: ``head`` a Linear to ``cutoffs[0] + len(cutoffs)``
    entries, ``tail[i]`` a Sequential of two bias-free Linears, ``in_features`` to
    ``in_features // div_value**(i+1)`` to the cluster's size (torch's state_dict names and init).

    ``forward(input, target)`` returns ``(output, loss)``: each row's log-probability of its target and
    their negated mean. ``log_prob(input)`` gives every class's, ``predict(input)`` the most likely one.

    Args:
        in_features: the input's features. n_classes: the number of classes.
        cutoffs: increasing, unique ints in ``[1, n_classes - 1]``: the clusters' first classes.
        div_value: each cluster's projection is this much smaller than the previous one's.
        head_bias: give the head a bias. device: ignored. dtype: the parameters' dtype.
    """

    def __init__(self, in_features: int, n_classes: int, cutoffs, div_value: float = 4.0, head_bias: bool = False,
                 device=None, dtype=None):
        super().__init__()
        name = type(self).__name__
        in_features = check_int(name, "in_features", in_features, 1)
        n_classes = check_int(name, "n_classes", n_classes, 2)
        div_value = check_number(name, "div_value", div_value)
        if not div_value > 0:  # (torch's fails with a bare ZeroDivisionError, or a negative Linear size)
            raise ValueError(f"{name}: div_value must be positive (cluster i's projection has in_features // "
                             f"div_value**(i+1) features), got {div_value}")
        cutoffs = list(cutoffs)
        if not cutoffs:
            raise ValueError(f"{name}: cutoffs should be a sequence of length larger than 0")
        if (not all(isinstance(c, numbers.Real) and not isinstance(c, bool) and int(c) == c for c in cutoffs)
                or cutoffs != sorted(cutoffs) or min(cutoffs) <= 0 or max(cutoffs) > n_classes - 1
                or len(set(cutoffs)) != len(cutoffs)):
            raise ValueError(f"{name}: cutoffs should be a sequence of unique, positive integers sorted in an "
                             f"increasing order, where each value is between 1 and n_classes-1 ({n_classes - 1}), "
                             f"got {cutoffs}")
        self.in_features, self.n_classes, self.div_value, self.head_bias = in_features, n_classes, div_value, head_bias
        self.cutoffs = [int(c) for c in cutoffs] + [n_classes]
        self.shortlist_size = self.cutoffs[0]
        self.n_clusters = len(self.cutoffs) - 1
        self.head_size = self.shortlist_size + self.n_clusters
        self.head = Linear(in_features, self.head_size, bias=head_bias, dtype=dtype)
        self.tail = ModuleList()
        for i in range(self.n_clusters):
            hsz = int(in_features // (div_value ** (i + 1)))
            osz = self.cutoffs[i + 1] - self.cutoffs[i]
            self.tail.append(Sequential(Linear(in_features, hsz, bias=False, dtype=dtype),
                                        Linear(hsz, osz, bias=False, dtype=dtype)))

    def reset_parameters(self) -> None:
        """Re-initialise every Linear as torch does (kaiming-uniform weights, the head's bias uniform)."""
        self.head.reset_parameters()
        for i2h, h2o in self.tail:
            i2h.reset_parameters()
            h2o.reset_parameters()

    def _rows(self, x, what: str = "input"):
        """``x`` as (N, in_features), checked."""
        name = type(self).__name__
        check_tensors(name, **{what: x})
        check_float(name, x)
        if x.ndim != 2 or x.shape[1] != self.in_features:
            raise op_error(ValueError, name, f"expected {what} of shape (N, {self.in_features}), got "
                           f"{shape_str(x.shape)}", x)
        return x

    def _head_and_clusters(self, x):
        """The head's log-softmax (N, head_size) and each cluster's (N, its size)."""
        head = ops.log_softmax(self.head(x), 1)
        return head, [ops.log_softmax(t(x), 1) for t in self.tail]

    def forward(self, input, target):  # noqa: A002
        """Each row's log-probability of its target, and the loss (their negated mean).

        Args:
            input: (N, in_features), or (in_features,) with a 0-d target.
            target: int32 class indices (N,) (or 0-d), in ``[0, n_classes)``.

        Returns:
            ``(output, loss)``, a named tuple: output (N,) (0-d for a 0-d target), loss a scalar.
        """
        name = type(self).__name__
        check_tensors(name, input=input, target=target)
        if target.dtype.kind != "i":
            raise op_error(TypeError, name, f"target must hold int32 class indices, got {target.dtype.name}", target)
        if target.ndim == 1:
            if input.ndim != 2:
                raise op_error(ValueError, name, f"a 1D target expects a 2D input, got {shape_str(input.shape)}",
                               input, target)
            if input.shape[0] != target.shape[0]:
                raise op_error(ValueError, name, f"input and target should have the same size in the batch "
                               f"dimension, got {shape_str(input.shape)} and {shape_str(target.shape)}", input, target)
        elif target.ndim == 0:
            if input.ndim != 1:
                raise op_error(ValueError, name, f"a 0D target expects a 1D input, got {shape_str(input.shape)}",
                               input, target)
        else:
            raise op_error(ValueError, name, f"0D or 1D target expected (multi-target not supported), got "
                           f"{shape_str(target.shape)}", target)
        batched = target.ndim == 1
        x = self._rows(input if batched else input.unsqueeze(0))
        t = target if batched else target.unsqueeze(0)
        check = range_check(name, t, self.n_classes,
                            lambda v: f"target values should be in [0, {self.n_classes - 1}], got {v}", (input, target))
        head, clusters = self._head_and_clusters(x)
        # the shortlist's rows: the head's entry of the target; a cluster's: its head entry + its place in it
        first = self.shortlist_size
        out = ops.gather(head, 1, ops.clamp(t, 0, first - 1).unsqueeze(1)).squeeze(1)
        for i, lp in enumerate(clusters):
            lo, hi = self.cutoffs[i], self.cutoffs[i + 1]
            local = ops.gather(lp, 1, ops.clamp(t - lo, 0, hi - lo - 1).unsqueeze(1)).squeeze(1)
            out = ops.where(ops.ge(t, lo), local + head[:, first + i], out)
        guard(check, out)
        loss = (-out).mean()
        return _ASMoutput(out if batched else out.squeeze(0), loss)

    def log_prob(self, input):  # noqa: A002
        """Every class's log-probability.

        Args:
            input: (N, in_features).

        Returns:
            (N, n_classes).
        """
        x = self._rows(input)
        head, clusters = self._head_and_clusters(x)
        parts = [head[:, :self.shortlist_size]]
        parts += [lp + head[:, self.shortlist_size + i].unsqueeze(1) for i, lp in enumerate(clusters)]
        return ops.cat(parts, 1)

    def predict(self, input):  # noqa: A002
        """The most likely class of each row (the first among ties): ``log_prob(input).argmax(1)``, as torch's.

        Args:
            input: (N, in_features).

        Returns:
            (N,) int32 (torch's are int64).
        """
        return ops.argmax(self.log_prob(input), 1)
