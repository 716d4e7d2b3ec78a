"""torch's variable-length batch helpers (``pad_sequence``, ``pack_padded_sequence``, ``pad_packed_sequence``,
``pack_sequence``, ``unpad_sequence``, ``unpack_sequence``, ``PackedSequence``), which ``nn.utils.rnn``
re-exports under torch's path: they live here, below ``nn.layers`` (its recurrent layers read packed
sequences) as ``nn.utils`` is above it (its parametrizations read the layers).

luminal's shapes are fixed when the graph is built, and the lengths of a batch are often data that only a
run sees, so a luminal :class:`PackedSequence` does not drop the padding as torch's does: its ``data`` is
the padded batch, time-major ``(T, B, *)``, in the batch's own order, and it carries the ``lengths``.
The recurrent layers (``nn.RNN``, ``nn.LSTM``, ``nn.GRU``) given one mask their recurrence with them
(the state is kept where ``t >= length``), so their outputs, ``h_n`` and ``c_n`` are torch's: the outputs
past each sequence's end are zero (``pad_packed_sequence`` writes ``padding_value`` there), the final
states are each sequence's own last step, a reverse direction starts at each sequence's own last element.

Lengths are host data (a list, numpy array or CPU tensor of ints, as torch's) or an int graph tensor
(``g.input("lengths", ("B",), dtype=lm.int32)``). Host lengths are checked now and cut the batch to the
longest length, as torch does; graph lengths are checked by guards before a program runs (a bad length
raises then), and the batch keeps its padded length ``T`` (torch's is the longest length).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from luminal.core.errors import op_error
from luminal.core.symbolic import is_static, shape_str
from luminal.frontend.checks import check_tensors, got
from luminal.frontend.ops.combine import stack
from luminal.frontend.ops.creation import arange
from luminal.frontend.ops.elementwise import where
from luminal.frontend.ops.reduce import argsort
from luminal.frontend.ops.value_checks import known_values
from luminal.frontend.tensor import GraphTensor

_SORTED_MSG = ("`lengths` array must be sorted in decreasing order when `enforce_sorted` is True. You can pass "
               "`enforce_sorted=False` to pack_padded_sequence and/or pack_sequence to sidestep this requirement "
               "if you do not need ONNX exportability.")
_ZERO_MSG = "Length of all samples has to be greater than 0, but found an element in 'lengths' that is <= 0"


class _Fields(NamedTuple):
    data: GraphTensor
    batch_sizes: object
    sorted_indices: object
    unsorted_indices: object


class PackedSequence(_Fields):
    """torch's ``PackedSequence``: the named tuple ``(data, batch_sizes, sorted_indices, unsorted_indices)``
    that the recurrent layers take and give, made by :func:`pack_padded_sequence` or :func:`pack_sequence`
    (torch: never by hand), read back by :func:`pad_packed_sequence` or :func:`unpack_sequence`.

    Unlike torch's, ``data`` is not the (sum(lengths), *) concatenation of the steps: luminal's shapes are
    fixed when the graph is built and lengths may be run-time data, so ``data`` is the padded batch,
    time-major ``(T, B, *)`` in the batch's own order (its values past a sequence's end are not read), and
    ``lengths`` (not a tuple field, as in torch) holds each sequence's length in that order. An elementwise
    op on ``data`` repacks as in torch: ``PackedSequence(f(p.data), p.batch_sizes, p.sorted_indices,
    p.unsorted_indices)`` (the lengths come back from ``batch_sizes``), or ``p._replace(data=f(p.data))``.

    Fields:
        data: the padded batch (T, B, *), T the longest host length (the padded length for graph lengths).
        batch_sizes: torch's: how many sequences are longer than each step, int64 numpy for host lengths
            (one per step up to the longest), an int32 graph tensor of T for graph lengths.
        sorted_indices: torch's: the batch by decreasing length (None with ``enforce_sorted=True``).
        unsorted_indices: the inverse permutation of ``sorted_indices``.
        lengths: the lengths, host int64 numpy or an int32 graph tensor, in the batch's order.
    """

    def __new__(cls, data, batch_sizes=None, sorted_indices=None, unsorted_indices=None, *, lengths=None):
        check_tensors("PackedSequence", data=data)
        if data.ndim < 2:
            raise op_error(ValueError, "PackedSequence", f"data must be the padded (T, B, *) batch, got "
                           f"{shape_str(data.shape)}", data)
        if unsorted_indices is None and sorted_indices is not None:
            unsorted_indices = _invert(sorted_indices)
        if lengths is None:
            if batch_sizes is None:
                raise op_error(TypeError, "PackedSequence", "give batch_sizes or lengths", data)
            lengths = _lengths_from_batch_sizes(data, batch_sizes, unsorted_indices)
        lengths = _lengths("PackedSequence", lengths, data)
        steps, batch = data.shape[0], data.shape[1]
        size = lengths.shape[0] if isinstance(lengths, GraphTensor) else lengths.size
        if is_static(batch) and is_static(size) and size != batch:
            raise op_error(ValueError, "PackedSequence", f"{size} lengths for the batch of {batch} of data "
                           f"{shape_str(data.shape)} (T, B, *)", data)
        if not isinstance(lengths, GraphTensor) and is_static(steps) and lengths.size and lengths.max() > steps:
            raise op_error(ValueError, "PackedSequence", f"lengths {lengths.tolist()}: {lengths.max()} is longer "
                           f"than the {steps} steps of data {shape_str(data.shape)} (T, B, *)", data)
        self = super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)
        self.lengths = lengths
        return self

    def _replace(self, **fields):
        """namedtuple's ``_replace``, keeping ``lengths`` (unless ``batch_sizes`` is replaced)."""
        kept = {} if "batch_sizes" in fields else {"lengths": self.lengths}
        return PackedSequence(**{**self._asdict(), **fields, **kept})

    def __repr__(self) -> str:
        return (f"PackedSequence(data={self.data!r}, batch_sizes={self.batch_sizes!r}, sorted_indices="
                f"{self.sorted_indices!r}, unsorted_indices={self.unsorted_indices!r}, lengths={self.lengths!r})")


def _invert(perm):
    """The inverse permutation, host or graph."""
    if isinstance(perm, GraphTensor):
        return argsort(perm)
    perm = np.asarray(perm, np.int64)
    inv = np.empty_like(perm)
    inv[perm] = np.arange(perm.size)
    return inv


def _lengths_from_batch_sizes(data, batch_sizes, unsorted_indices):
    """The lengths in the batch's order from torch's ``batch_sizes`` (sequence j of the sorted batch is
    longer than step t iff ``batch_sizes[t] > j``)."""
    if isinstance(batch_sizes, GraphTensor):
        batch = data.shape[1]
        j = arange(batch, graph=data.graph)
        lengths = (batch_sizes.unsqueeze(0) > j.unsqueeze(1)).int().sum(1)
        return lengths if unsorted_indices is None else lengths[unsorted_indices]
    sizes = np.asarray(batch_sizes, np.int64).reshape(-1)
    lengths = (sizes[None, :] > np.arange(sizes[0] if sizes.size else 0)[:, None]).sum(1).astype(np.int64)
    return lengths if unsorted_indices is None else lengths[np.asarray(unsorted_indices)]


def _host_lengths(op: str, lengths):
    """Host lengths as a 1-d int64 array (torch's ``'lengths' argument should be a 1D CPU int64 tensor``:
    it converts lists and float tensors; a non-integral float is refused here rather than truncated)."""
    try:
        arr = np.asarray(lengths)
    except Exception as e:  # (a tensor on another device)
        raise TypeError(f"{op}: lengths must be a list, numpy array or CPU tensor of ints, got {got(lengths)}") from e
    if arr.ndim != 1:
        raise ValueError(f"{op}: 'lengths' argument should be a 1D int64 array, but got {arr.ndim}D "
                         f"shape {arr.shape}")
    if arr.dtype.kind == "f" and np.all(arr == np.floor(arr)):
        arr = arr.astype(np.int64)
    if arr.dtype.kind not in "iu":
        raise TypeError(f"{op}: lengths must be integers, got {arr.dtype} {arr.tolist()}")
    return arr.astype(np.int64)


def _lengths(op: str, lengths, x: GraphTensor):
    """``lengths`` as host int64 numpy (given so, or a graph constant) or as a 1-d int graph tensor of
    ``x``'s graph."""
    if isinstance(lengths, GraphTensor):
        known = known_values(lengths)
        if known is None:
            check_tensors(op, input=x, lengths=lengths)
            if lengths.dtype.is_float or lengths.dtype.name == "bool" or lengths.ndim != 1:
                raise op_error(TypeError, op, f"lengths must be a 1-d int tensor, got {lengths.dtype.name} "
                               f"{shape_str(lengths.shape)}", lengths)
            return lengths
        lengths = known
    return _host_lengths(op, lengths)


def _check_lengths(op: str, lengths, x: GraphTensor, given: GraphTensor, enforce_sorted: bool) -> None:
    """torch's checks of pack_padded_sequence's lengths for the time-major ``x`` (``given``: the input as
    the user passed it, for the errors): one per sequence, each > 0, sorted when ``enforce_sorted``, and
    (luminal's: torch reads past the end) at most the padded length. Host lengths now; graph lengths by
    guards before a program reading them runs."""
    steps, batch = x.shape[0], x.shape[1]
    if isinstance(lengths, GraphTensor):
        if is_static(batch) and is_static(lengths.shape[0]) and lengths.shape[0] != batch:
            raise op_error(ValueError, op, f"Expected `len(lengths)` to be equal to batch_size, but got "
                           f"{lengths.shape[0]} (batch_size={batch})", given, lengths)
        g = lengths.graph
        low, high = lengths.amin(), lengths.amax()
        g.guard((lengths <= 0).any(), low, RuntimeError, f"{op}: {_ZERO_MSG} (found {{value}})")
        bound = steps if is_static(steps) else g.constant(steps)
        g.guard((lengths > bound).any(), high, ValueError,
                f"{op}: a length of {{value}} is longer than the padded sequence length {steps}")
        if enforce_sorted and lengths.shape[0] != 1:
            g.guard((lengths[1:] > lengths[:-1]).any(), high, RuntimeError, f"{op}: {_SORTED_MSG}")
        return
    if not is_static(batch):
        raise op_error(ValueError, op, f"the batch {batch} is symbolic but the {lengths.size} lengths are host "
                       f"data, which fix it: pass them as a graph input of shape ({batch},) (int32)", given)
    if lengths.size != batch:
        raise op_error(ValueError, op, f"Expected `len(lengths)` to be equal to batch_size, but got "
                       f"{lengths.size} (batch_size={batch})", given)
    if lengths.size and lengths.min() <= 0:
        raise op_error(RuntimeError, op, f"{_ZERO_MSG} (lengths {lengths.tolist()})", given)
    if is_static(steps) and lengths.size and lengths.max() > steps:
        raise op_error(ValueError, op, f"lengths {lengths.tolist()}: {lengths.max()} is longer than the padded "
                       f"sequence length {steps}", given)
    if enforce_sorted and np.any(np.diff(lengths) > 0):
        raise op_error(RuntimeError, op, f"{_SORTED_MSG} (lengths {lengths.tolist()})", given)


def step_mask(lengths, steps, graph):
    """The (steps, B) bool mask ``t < lengths[b]``: which steps of each sequence are data."""
    if isinstance(lengths, GraphTensor):
        return arange(steps, graph=graph).unsqueeze(1) < lengths.unsqueeze(0)
    return graph.constant(np.arange(steps)[:, None] < lengths[None, :])


def pack_padded_sequence(input, lengths, batch_first: bool = False,  # noqa: A002 - torch's name
                         enforce_sorted: bool = True) -> PackedSequence:
    """torch's ``pack_padded_sequence``: the padded batch with its lengths, for the recurrent layers.

    Args:
        input: the padded batch, (T, B, *) or (B, T, *) with ``batch_first``.
        lengths: each sequence's length: host ints (list, numpy, CPU tensor) or a 1-d int graph tensor;
            each in ``[1, T]``, in decreasing order when ``enforce_sorted`` (torch's errors otherwise).
        batch_first: the batch is (B, T, *).
        enforce_sorted: require decreasing lengths (torch's ONNX-friendly default); with False the
            lengths may come in any order and ``sorted_indices`` is the batch by decreasing length.

    Returns:
        a :class:`PackedSequence` (its ``data`` time-major and cut to the longest host length).
    """
    op = "pack_padded_sequence"
    check_tensors(op, input=input)
    if input.ndim < 2:
        raise op_error(ValueError, op, f"expected input of at least 2 dims (T, B, *), got "
                       f"{shape_str(input.shape)}", input)
    x = input.transpose(0, 1) if batch_first else input
    lengths = _lengths(op, lengths, input)
    _check_lengths(op, lengths, x, input, enforce_sorted)
    if isinstance(lengths, GraphTensor):
        steps = x.shape[0]
        batch_sizes = step_mask(lengths, steps, x.graph).int().sum(1)
        sorted_indices = None if enforce_sorted else argsort(lengths, descending=True)
    else:
        steps = int(lengths.max()) if lengths.size else 0
        x = x[:steps]
        batch_sizes = (lengths[None, :] > np.arange(steps)[:, None]).sum(1).astype(np.int64)
        sorted_indices = None if enforce_sorted else np.argsort(-lengths, kind="stable").astype(np.int64)
    unsorted = None if sorted_indices is None else _invert(sorted_indices)
    return PackedSequence(x, batch_sizes, sorted_indices, unsorted, lengths=lengths)


def pad_packed_sequence(sequence: PackedSequence, batch_first: bool = False, padding_value: float = 0.0,
                        total_length: int | None = None):
    """torch's ``pad_packed_sequence``: the padded batch and the lengths back from a PackedSequence.

    Args:
        sequence: a :class:`PackedSequence`.
        batch_first: return (B, T, *) instead of (T, B, *).
        padding_value: the value past each sequence's end.
        total_length: pad to this many steps (torch's ValueError when shorter than the longest length; for
            graph lengths a guard checks that before a program runs). None: the longest host length, or
            the padded length T for graph lengths.

    Returns:
        ``(padded, lengths)``: lengths as given (int64 numpy for host lengths, as torch's int64 tensor).
    """
    op = "pad_packed_sequence"
    if not isinstance(sequence, PackedSequence):
        raise TypeError(f"{op}: expected a luminal PackedSequence (nn.utils.rnn.pack_padded_sequence), got "
                        f"{got(sequence)}")
    x, lengths = sequence.data, sequence.lengths
    target = total_length  # the steps returned (None: the padded length, for graph lengths)
    if total_length is not None:
        if isinstance(total_length, bool) or not isinstance(total_length, (int, np.integer)):
            raise TypeError(f"{op}: total_length must be an int, got {got(total_length)}")
        target = total_length = int(total_length)
        if isinstance(lengths, GraphTensor):
            lengths.graph.guard((lengths > total_length).any(), lengths.amax(), ValueError,
                                f"{op}: Expected total_length to be at least the length of the longest sequence "
                                f"in input, but got total_length={total_length} and max sequence length being "
                                f"{{value}}")
    if not isinstance(lengths, GraphTensor):
        longest = int(lengths.max()) if lengths.size else 0
        if total_length is not None and total_length < longest:
            raise ValueError(f"{op}: Expected total_length to be at least the length of the longest sequence in "
                             f"input, but got total_length={total_length} and max sequence length being {longest}")
        target = longest if total_length is None else total_length
    steps = x.shape[0]
    if target is not None and is_static(steps) and target < steps:
        x, steps = x[:target], target
    mask = step_mask(lengths, steps, x.graph).reshape(*(x.shape[:2]), *([1] * (x.ndim - 2)))
    out = where(mask, x, padding_value)
    if target is not None and is_static(steps) and target > steps:
        out = out.pad([0, 0] * (x.ndim - 1) + [0, target - steps], padding_value)
    return (out.transpose(0, 1) if batch_first else out), lengths


def pad_sequence(sequences, batch_first: bool = False, padding_value: float = 0.0, padding_side: str = "right"):
    """torch's ``pad_sequence``: sequences (L_i, *) of one trailing shape as one padded batch.

    Args:
        sequences: a list of graph tensors (of one graph) or numpy arrays (a numpy batch comes back); the
            lengths L_i must be static.
        batch_first: return (B, max L, *) instead of (max L, B, *).
        padding_value: the value of the padding.
        padding_side: "right" (default) or "left": where the padding goes.
    """
    op = "pad_sequence"
    if padding_side not in ("left", "right"):
        raise ValueError(f"{op}: Expected padding_side to be one of left or right, but got {padding_side}.")
    if isinstance(sequences, (GraphTensor, np.ndarray)):
        sequences = list(sequences)  # (torch's: a tensor is the sequence of its rows)
    if not isinstance(sequences, (list, tuple)):
        raise TypeError(f"{op}: sequences must be a list of tensors, got {got(sequences)}")
    if not sequences:
        raise RuntimeError(f"{op}: received an empty list of sequences")
    graphs = [s for s in sequences if isinstance(s, GraphTensor)]
    if graphs:
        check_tensors(op, **{f"sequences[{i}]": s for i, s in enumerate(graphs)})
        sequences = [s if isinstance(s, GraphTensor) else graphs[0].graph.constant(np.asarray(s))
                     for s in sequences]
    else:
        sequences = [np.asarray(s) for s in sequences]
    shapes = [tuple(s.shape) for s in sequences]
    for i, shape in enumerate(shapes):
        if len(shape) == 0:
            raise ValueError(f"{op}: sequences[{i}] is 0-d; each sequence must be (L, *)")
        if shape[1:] != shapes[0][1:]:
            raise ValueError(f"{op}: every sequence must have the trailing shape {shape_str(shapes[0][1:])} of "
                             f"sequences[0], but sequences[{i}] is {shape_str(shape)}")
        if not is_static(shape[0]):
            raise ValueError(f"{op}: sequences[{i}] has the symbolic length {shape[0]}; the lengths must be "
                             f"static to pad to the longest")
    longest = max(shape[0] for shape in shapes)
    if not graphs:
        dtype = np.result_type(*sequences)
        out = np.full((len(sequences), longest, *shapes[0][1:]), padding_value, dtype)
        for i, s in enumerate(sequences):
            if padding_side == "right":
                out[i, :len(s)] = s
            else:
                out[i, longest - len(s):] = s
        return out if batch_first else out.swapaxes(0, 1)
    padded = []
    for s in sequences:
        extra = longest - s.shape[0]
        pads = [0, extra] if padding_side == "right" else [extra, 0]
        padded.append(s.pad([0, 0] * (s.ndim - 1) + pads, padding_value) if extra else s)
    return stack(padded, 0 if batch_first else 1)


def pack_sequence(sequences, enforce_sorted: bool = True) -> PackedSequence:
    """torch's ``pack_sequence``: ``pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=...)``.

    Args:
        sequences: a list of (L_i, *) graph tensors of one graph (static L_i), longest first when
            ``enforce_sorted``.
        enforce_sorted: require decreasing lengths (torch's error otherwise).
    """
    if isinstance(sequences, (list, tuple)):
        check_tensors("pack_sequence", **{f"sequences[{i}]": s for i, s in enumerate(sequences)})
    padded = pad_sequence(sequences)
    lengths = [s.shape[0] for s in sequences]
    return pack_padded_sequence(padded, lengths, enforce_sorted=enforce_sorted)


def unpad_sequence(padded_sequences, lengths, batch_first: bool = False) -> list:
    """torch's ``unpad_sequence``: the list of sequences ``padded[:L_i, i]`` of a padded batch.

    Args:
        padded_sequences: the padded batch (T, B, *) or (B, T, *) with ``batch_first``: a graph tensor or a
            numpy array.
        lengths: host ints (or a graph constant): the outputs' shapes depend on them.
        batch_first: the batch is (B, T, *).
    """
    op = "unpad_sequence"
    x = padded_sequences
    if not isinstance(x, GraphTensor):
        x = np.asarray(x)
    if isinstance(lengths, GraphTensor) and known_values(lengths) is None:
        raise op_error(TypeError, op, "lengths must be host data (a list or numpy array): they set the "
                       "shapes of the sequences returned, and a graph input's values are only known at run time",
                       lengths)
    lengths = _lengths(op, lengths, x) if isinstance(lengths, GraphTensor) else _host_lengths(op, lengths)
    if x.ndim < 2:
        raise ValueError(f"{op}: expected a padded batch of at least 2 dims, got {shape_str(x.shape)}")
    batch, steps = (x.shape[0], x.shape[1]) if batch_first else (x.shape[1], x.shape[0])
    if is_static(batch) and lengths.size != batch:
        raise ValueError(f"{op}: got {lengths.size} lengths for a batch of {batch}")
    if is_static(steps) and lengths.size and (lengths.max() > steps or lengths.min() < 0):
        raise ValueError(f"{op}: lengths {lengths.tolist()} must be in [0, {steps}], the padded length")
    return [x[i, :n] if batch_first else x[:n, i] for i, n in enumerate(lengths.tolist())]


def unpack_sequence(packed_sequences: PackedSequence) -> list:
    """torch's ``unpack_sequence``: the list of sequences of a PackedSequence with host lengths."""
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)


__all__ = ["PackedSequence", "pack_padded_sequence", "pack_sequence", "pad_packed_sequence", "pad_sequence",
           "unpack_sequence", "unpad_sequence"]
