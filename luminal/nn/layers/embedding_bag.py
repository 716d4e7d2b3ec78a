"""Sums, means or maxima of bags of embeddings without the per-index rows in between being the
user's (``nn.EmbeddingBag``, ``F.embedding_bag``), as torch's.

A bag is a row of a 2-d index tensor (every bag the same size), or, for 1-d indices, the run from one
``offsets`` entry to the next (the last to the end, or to the last offset with
``include_last_offset``). The rows are read by one gather; a 2-d input reduces over its bag dim, a
1-d input scatters each row into its bag, whose number is the count of offsets at or before its
position (offsets are data: a bag's size is known only when the program runs). Indices equal to
``padding_idx`` are left out of their bag (and of a mean's count); an empty bag is zeros, as torch's.
Offsets that do not start at 0, decrease, or pass the end are a ValueError when the program runs.

In ``max`` mode a feature tied between two positions of a bag shares its gradient between them
(torch gives it to the first); ties of one index repeated in a bag, the usual case, reach the same
weight row either way. Over offsets, ``max`` compares every index with every bag (``scatter_reduce``'s
amax), so it needs a static number of bags and suits moderate sizes; ``sum`` and ``mean`` cost one pass.
"""

from __future__ import annotations

from luminal.core import dtype as dt
from luminal.core.errors import check_int, op_error, renamed
from luminal.core.symbolic import is_static
from luminal.frontend.checks import check_tensors
from luminal.frontend.ops import where, zeros
from luminal.nn.layers._util import layer_name
from luminal.nn.layers.linear import _pretrained_shape, _refuse_max_norm, _Table

_MODES = ("sum", "mean", "max")


def _check_offsets(name: str, offsets, n) -> None:
    """Register the run-time checks of ``offsets`` (torch's): the first is 0, none decreases, none
    passes the ``n`` indices."""
    g = offsets.graph
    first_bad = offsets[0] != 0
    steps_bad = (offsets[1:] < offsets[:-1]).any() if offsets.shape[0] != 1 else g.constant(False)
    past_end = (offsets > n).any()
    failed = first_bad | steps_bad | past_end
    what = (f"{name}: offsets must start at 0, never decrease and stay within the {n} indices "
            f"(offsets[0] = {{value}})")
    g.guard(failed, offsets[0], ValueError, what)


def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type: float = 2, scale_grad_by_freq: bool = False,  # noqa: A002
                  mode: str = "mean", sparse: bool = False, per_sample_weights=None,
                  include_last_offset: bool = False, padding_idx: int | None = None, *, _name: str = "embedding_bag"):
    """torch's ``F.embedding_bag``: the ``mode`` ('sum', 'mean' or 'max') of each bag's rows of ``weight``.

    Args:
        input: int indices: (B, N), B bags of N; or (N,) with ``offsets``.
        weight: (num_embeddings, embedding_dim) float.
        offsets: with a 1-d input, (B,) int starts of the bags (B + 1 with ``include_last_offset``).
        max_norm, scale_grad_by_freq: not supported (refused when set).
        norm_type: accepted for torch's signature (it only matters with ``max_norm``).
        sparse: accepted; the gradient has torch's values, held dense.
        mode: 'sum', 'mean' or 'max'.
        per_sample_weights: float weights of ``input``'s shape, multiplying each row ('sum' only).
        include_last_offset: the last offset ends the last bag (torch's CSR layout).
        padding_idx: an index left out of every bag.

    Returns:
        (B, embedding_dim).
    """
    name = _name
    check_tensors(name, optional=("offsets", "per_sample_weights"), input=input, weight=weight, offsets=offsets,
                  per_sample_weights=per_sample_weights)
    _refuse_max_norm(name, max_norm, input)
    _refuse_scale_grad_by_freq(name, scale_grad_by_freq, input)
    if mode not in _MODES:
        raise op_error(ValueError, name, f"mode must be one of {_MODES}, got {mode!r}", input)
    if input.dtype.kind != "i":
        raise op_error(TypeError, name, f"expected integer indices, got {input.dtype.name}", input)
    if weight.ndim != 2 or not weight.dtype.is_float:
        raise op_error(ValueError, name, f"weight must be a 2-d float tensor, got {weight.ndim}-d "
                       f"{weight.dtype.name}", weight)
    num, dim = weight.shape
    if padding_idx is not None:
        padding_idx = check_int(name, "padding_idx", padding_idx)
        if not -num <= padding_idx < num:
            raise op_error(ValueError, name, f"padding_idx {padding_idx} must be within num_embeddings ({num})", weight)
        padding_idx %= num
    if per_sample_weights is not None:
        if mode != "sum":
            raise op_error(ValueError, name, f"per_sample_weights is only supported for mode='sum', got "
                           f"mode={mode!r}", per_sample_weights)
        if per_sample_weights.shape != input.shape or not per_sample_weights.dtype.is_float:
            raise op_error(ValueError, name, "per_sample_weights must be floats of the input's shape",
                           input, per_sample_weights)
        per_sample_weights = per_sample_weights.to(weight.dtype)
    if input.ndim == 2:
        if offsets is not None:
            raise op_error(ValueError, name, "a 2-d input is B bags of equal size: offsets must be None", input,
                           offsets)
        with renamed(name):  # (an index out of range, found when the program runs, names the op)
            return _fixed_bags(input, weight, mode, per_sample_weights, padding_idx)
    if input.ndim != 1:
        raise op_error(ValueError, name, f"input must be 1-d (with offsets) or 2-d (B, N), got {input.ndim}-d", input)
    if offsets is None or offsets.ndim != 1 or offsets.dtype.kind != "i":
        raise op_error(ValueError, name, "a 1-d input needs offsets: a 1-d integer tensor of the bags' starts",
                       input, *(() if offsets is None else (offsets,)))
    if include_last_offset and offsets.shape[0] == 0:
        raise op_error(ValueError, name, "include_last_offset needs at least one offset", offsets)
    n = input.shape[0]
    bags = offsets.shape[0] - 1 if include_last_offset else offsets.shape[0]
    if offsets.shape[0] != 0:
        _check_offsets(name, offsets, n)
    if mode == "max" and not is_static(bags):
        raise op_error(ValueError, name, f"mode='max' over offsets needs a static number of bags, got {bags} "
                       f"(its maxima compare every index with every bag); sum and mean take a symbolic one", offsets)
    if (is_static(bags) and bags == 0) or (mode == "max" and is_static(n) and n == 0):
        return zeros(bags, dim, dtype=weight.dtype, graph=input.graph)  # (no bags, or every bag empty)
    with renamed(name):  # (an index out of range, found when the program runs, names the op)
        return _offset_bags(input, weight, offsets, bags, mode, per_sample_weights, include_last_offset,
                            padding_idx)


def _offset_bags(input, weight, offsets, bags, mode: str, per_sample_weights, include_last_offset: bool,  # noqa: A002
                 padding_idx):
    """Bags given by ``offsets`` over the 1-d ``input``: each index scattered into its bag."""
    n, dim = input.shape[0], weight.shape[1]
    g = input.graph
    starts = offsets[:-1] if include_last_offset else offsets
    positions = g.arange(n)
    # the bag of each index: how many starts are at or before it, less one, as a running count of a mark
    # per start (one slot past the end takes starts equal to n, empty last bags)
    marks = zeros(n + 1, dtype=dt.int32, graph=g).index_add(0, starts, g.constant(1, dt.int32).expand(bags))
    bag = marks.cumsum(0)[:n] - 1
    keep = bag >= 0
    if include_last_offset:
        keep = keep & (positions < offsets[-1])
    if padding_idx is not None:
        keep = keep & (input != padding_idx)
    rows = weight.index_select(0, input)
    bag = where(keep, bag, 0)
    if mode == "max":
        masked = where(keep.unsqueeze(1), rows, float("-inf"))
        base = zeros(bags, dim, dtype=weight.dtype, graph=input.graph)
        top = base.scatter_reduce(0, bag.unsqueeze(1).expand(n, dim), masked, "amax", include_self=False)
        count = zeros(bags, dtype=dt.int32, graph=input.graph).index_add(0, bag, keep.to(dt.int32))
        return where((count > 0).unsqueeze(1), top, 0.0)
    w = keep.to(weight.dtype) if per_sample_weights is None else where(keep, per_sample_weights, 0.0)
    total = zeros(bags, dim, dtype=weight.dtype, graph=input.graph).index_add(0, bag, rows * w.unsqueeze(1))
    if mode == "sum":
        return total
    count = zeros(bags, dtype=weight.dtype, graph=input.graph).index_add(0, bag, keep.to(weight.dtype))
    return total / count.clamp(min=1.0).unsqueeze(1)


def _refuse_scale_grad_by_freq(name: str, scale_grad_by_freq: bool, *tensors) -> None:
    """torch's bags scale the gradient by frequencies it counts in its own way (an index seen once in
    bags of three gets a third), not by each index's count as ``F.embedding``; rather than a second rule
    that only looks like torch's, the option is refused."""
    if scale_grad_by_freq:
        raise op_error(NotImplementedError, name, "scale_grad_by_freq=True is not supported for bags (torch's "
                       "scaling there is not the index counts F.embedding divides by)", *tensors)


def _fixed_bags(idx, weight, mode: str, per_sample_weights, padding_idx):
    """Bags of equal size: the rows of a (B, N) index, reduced over N."""
    b, n = idx.shape
    rows = weight.index_select(0, idx.reshape(-1)).reshape(b, n, weight.shape[1])
    keep = None if padding_idx is None else (idx != padding_idx)
    if mode == "max":
        if keep is None:
            return rows.amax(1) if n != 0 else zeros(b, weight.shape[1], dtype=weight.dtype, graph=idx.graph)
        top = where(keep.unsqueeze(2), rows, float("-inf")).amax(1)
        return where(keep.any(1).unsqueeze(1), top, 0.0)
    w = per_sample_weights
    if keep is not None:
        w = keep.to(weight.dtype) if w is None else where(keep, w, 0.0)
    total = (rows * w.unsqueeze(2)).sum(1) if w is not None else rows.sum(1)
    if mode == "sum":
        return total
    count = keep.to(weight.dtype).sum(1, keepdim=True).clamp(min=1.0) if keep is not None else max(n, 1)
    return total / count


class EmbeddingBag(_Table):
    """torch's ``nn.EmbeddingBag(num_embeddings, embedding_dim, max_norm=None, norm_type=2.0,
    scale_grad_by_freq=False, mode='mean', sparse=False, _weight=None, include_last_offset=False,
    padding_idx=None, dtype=None)``; ``forward(input, offsets=None, per_sample_weights=None)``: each
    bag's sum, mean or max of its rows of ``weight`` (``F.embedding_bag``).

    Args:
        num_embeddings, embedding_dim: the table's shape. mode: 'sum', 'mean' (default) or 'max'.
        include_last_offset, padding_idx: as ``F.embedding_bag``; the ``padding_idx`` row starts at zero.
        max_norm, scale_grad_by_freq: not supported. norm_type: accepted. sparse: accepted (dense gradient).
        device: ignored (arrays live on the host).
        dtype: the weight's dtype (default float32).
    """

    def __init__(self, num_embeddings: int, embedding_dim: int, max_norm=None, norm_type: float = 2.0,
                 scale_grad_by_freq: bool = False, mode: str = "mean", sparse: bool = False, _weight=None,
                 include_last_offset: bool = False, padding_idx: int | None = None, device=None, dtype=None):
        if mode not in _MODES:
            raise ValueError(f"EmbeddingBag: mode must be one of {_MODES}, got {mode!r}")
        _refuse_scale_grad_by_freq("EmbeddingBag", scale_grad_by_freq)
        super().__init__("EmbeddingBag", num_embeddings, embedding_dim, padding_idx, max_norm, norm_type,
                         scale_grad_by_freq, sparse, _weight, dtype)
        self.mode, self.include_last_offset = mode, bool(include_last_offset)

    @classmethod
    def from_pretrained(cls, embeddings, freeze: bool = True, max_norm=None, norm_type: float = 2.0,
                        scale_grad_by_freq: bool = False, mode: str = "mean", sparse: bool = False,
                        include_last_offset: bool = False, padding_idx: int | None = None, dtype=None):
        """torch's ``EmbeddingBag.from_pretrained``: an EmbeddingBag whose weight is ``embeddings``
        (a 2-d array), frozen (no gradient, no update) unless ``freeze=False``.

        Args:
            embeddings: (num_embeddings, embedding_dim). freeze: ``requires_grad = not freeze``.
            max_norm, norm_type, scale_grad_by_freq, mode, sparse, include_last_offset, padding_idx, dtype:
                as the constructor's.
        """
        n, d = _pretrained_shape("EmbeddingBag", embeddings)
        bag = cls(n, d, max_norm, norm_type, scale_grad_by_freq, mode, sparse, embeddings, include_last_offset,
                  padding_idx, dtype=dtype)
        bag.weight.requires_grad = not freeze
        return bag

    def forward(self, input, offsets=None, per_sample_weights=None):  # noqa: A002
        check_tensors(layer_name(self), input=input)
        return embedding_bag(input, self.weight.on(input.graph), offsets, mode=self.mode,
                             per_sample_weights=per_sample_weights, include_last_offset=self.include_last_offset,
                             padding_idx=self.padding_idx, _name=layer_name(self))

    def extra_repr(self) -> str:
        pad = f", padding_idx={self.padding_idx}" if self.padding_idx is not None else ""
        norm = f", norm_type={self.norm_type}" if self.norm_type != 2 else ""
        return f"{self.num_embeddings}, {self.embedding_dim}{norm}, mode={self.mode!r}{pad}"
