"""Linear, Bilinear, Embedding, the shape-only layers (Flatten, Unflatten, Identity) and the similarity
layers (CosineSimilarity, PairwiseDistance), with torch's names and layouts."""

from __future__ import annotations

from luminal.core import dtype as dt
from luminal.core.errors import check_int, op_error, renamed
from luminal.frontend.checks import check_tensors
from luminal.frontend.ops import zeros
from luminal.frontend.ops.core import prim
from luminal.frontend.ops.distance import cosine_similarity, pairwise_distance
from luminal.frontend.ops.elementwise import _opmath
from luminal.frontend.ops.norms import vector_norm
from luminal.nn import init
from luminal.nn.layers._util import bad_input, layer_forward, layer_name, param
from luminal.nn.module import Module


class Identity(Module):
    """Returns its input; takes (and ignores) any arguments, as torch's."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, x):
        return x


class Linear(Module):
    """``y = x @ weight.T + bias`` with ``weight`` (out_features, in_features), as torch's; ``device``
    is accepted for torch's signature and ignored (arrays live on the host)."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, device=None, dtype=None):
        super().__init__()
        self.in_features = check_int("Linear", "in_features", in_features, 0)
        self.out_features = check_int("Linear", "out_features", out_features, 0)
        self.weight = param((out_features, in_features), dtype)
        self.bias = param((out_features,), dtype) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Re-initialise as torch does: the weight kaiming-uniform with ``a = sqrt(5)`` (U(-1/sqrt(in), 1/sqrt(in))),
        the bias U(-1/sqrt(in_features), 1/sqrt(in_features)).
        """
        init.kaiming_uniform_(self.weight, a=5 ** 0.5)
        if self.bias is not None:
            b = init.bias_bound(self.in_features)
            init.uniform_(self.bias, -b, b)

    @layer_forward
    def forward(self, x):
        if x.ndim == 0 or x.shape[-1] != self.in_features:
            raise bad_input(layer_name(self), f"(*, {self.in_features})", x)
        g = x.graph
        return _affine(x, self.weight.on(g).T, self.bias.on(g) if self.bias is not None else None)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class _Table(Module):
    """A lookup table ``weight`` (num_embeddings, embedding_dim) with an optional ``padding_idx`` row
    that starts at zero: what Embedding and EmbeddingBag share (their checks, initialisation, layout,
    torch's option attributes)."""

    def __init__(self, name: str, num_embeddings: int, embedding_dim: int, padding_idx, max_norm, norm_type,
                 scale_grad_by_freq: bool, sparse: bool, _weight, dtype):
        super().__init__()
        num_embeddings = check_int(name, "num_embeddings", num_embeddings, 0)
        embedding_dim = check_int(name, "embedding_dim", embedding_dim, 0)
        _refuse_max_norm(name, max_norm)
        if padding_idx is not None:
            padding_idx = check_int(name, "padding_idx", padding_idx)
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise ValueError(f"{name}: padding_idx {padding_idx} must be within num_embeddings "
                                 f"({num_embeddings})")
            padding_idx %= num_embeddings
        self.num_embeddings, self.embedding_dim, self.padding_idx = num_embeddings, embedding_dim, padding_idx
        self.max_norm, self.norm_type = max_norm, norm_type
        self.scale_grad_by_freq, self.sparse = bool(scale_grad_by_freq), bool(sparse)
        self.weight = param((num_embeddings, embedding_dim), dtype)
        if _weight is None:
            self.reset_parameters()
        else:
            self.weight.set(_weight)

    def reset_parameters(self) -> None:
        """Re-initialise as torch does: the weight N(0, 1), the ``padding_idx`` row zero."""
        init.normal_(self.weight)
        if self.padding_idx is not None:
            self.weight.data[self.padding_idx] = 0


def _refuse_max_norm(name: str, max_norm, *tensors) -> None:
    """torch's ``max_norm`` rescales the looked-up rows of the weight in place during the forward (a
    second forward, and the optimizer's step, see the rescaled rows). A luminal graph cannot write a
    tensor it reads mid-program, and a parameter's write-back would be overwritten by the optimizer's
    step, so the option is refused rather than half done."""
    if max_norm is not None:
        raise op_error(NotImplementedError, name, f"max_norm={max_norm!r} is not supported: torch renormalises "
                       "the weight's rows in place during the forward; renormalise the weight (lm.renorm) before "
                       "the lookup instead", *tensors)


def _pretrained_shape(name: str, embeddings) -> tuple[int, int]:
    """The (num_embeddings, embedding_dim) of a ``from_pretrained`` table, which must be 2-d."""
    shape = tuple(getattr(embeddings, "shape", ()))
    if len(shape) != 2:
        raise ValueError(f"{name}.from_pretrained: embeddings must be 2-d (num_embeddings, embedding_dim), "
                         f"got shape {shape}")
    return shape


def _scale_grad_by_freq(rows, idx, num_embeddings: int):
    """``rows`` (one per index of the flat ``idx``) as they are, with each row's gradient divided by how
    often its index occurs in ``idx``, as torch's ``scale_grad_by_freq`` (a rule of its own,
    ``Graph.custom_vjp``: the values are the rows', untouched)."""
    g = idx.graph
    ones = g.constant(1, dt.int32).expand(idx.shape[0])
    count = zeros(num_embeddings, dtype=dt.int32, graph=g).index_add(0, idx, ones).index_select(0, idx)
    out = prim("Copy", rows)
    return g.custom_vjp(out, [rows], lambda _, adjoint, r: [adjoint / count.to(adjoint.dtype).unsqueeze(1)])


def _lookup(weight, idx, padding_idx, scale_grad_by_freq: bool):
    """``weight``'s rows at the int32 indices ``idx`` (any shape): (*idx.shape, embedding_dim); the
    ``padding_idx`` row (non-negative, or None) read detached, as torch gives it no gradient."""
    n, d = weight.shape
    if padding_idx is not None:
        pad_row = (idx.graph.arange(n) == padding_idx).unsqueeze(1)
        weight = weight.detach().where(pad_row, weight)
    flat = idx.reshape(-1)
    rows = weight.index_select(0, flat)
    if scale_grad_by_freq:
        rows = _scale_grad_by_freq(rows, flat, n)
    return rows.reshape(*idx.shape, d)


class Embedding(_Table):
    """A lookup table ``weight`` (num_embeddings, embedding_dim); rows are read by integer index.
    The ``padding_idx`` row starts at zero and, as in torch, gets no gradient (it is read detached).
    ``scale_grad_by_freq`` divides each row's gradient by how often its index occurs in the input, as
    torch's. ``sparse=True`` is accepted: the gradient has torch's values, held dense (luminal has no
    sparse tensors). ``max_norm`` is refused (torch renormalises the weight in place mid-forward).
    ``device`` is ignored (arrays live on the host)."""

    def __init__(self, num_embeddings: int, embedding_dim: int, padding_idx: int | None = None,
                 max_norm=None, norm_type: float = 2.0, scale_grad_by_freq: bool = False, sparse: bool = False,
                 _weight=None, _freeze: bool = False, device=None, dtype=None):
        super().__init__("Embedding", num_embeddings, embedding_dim, padding_idx, max_norm, norm_type,
                         scale_grad_by_freq, sparse, _weight, dtype)
        self.weight.requires_grad = not _freeze

    @classmethod
    def from_pretrained(cls, embeddings, freeze: bool = True, padding_idx: int | None = None, max_norm=None,
                        norm_type: float = 2.0, scale_grad_by_freq: bool = False, sparse: bool = False, dtype=None):
        """torch's ``Embedding.from_pretrained``: an Embedding whose weight is ``embeddings``.

        Args:
            embeddings: a 2-d array (num_embeddings, embedding_dim).
            freeze: when True (default) the weight gets no gradient and no update (``requires_grad=False``).
            padding_idx: the row that gets no gradient, as in the constructor.
            max_norm, norm_type, scale_grad_by_freq, sparse: as the constructor's.
            dtype: the weight's dtype (default float32).

        Returns:
            The Embedding.
        """
        n, d = _pretrained_shape("Embedding", embeddings)
        return cls(n, d, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse, _weight=embeddings,
                   _freeze=freeze, dtype=dtype)

    @layer_forward
    def forward(self, idx):
        if idx.dtype is not dt.int32:
            raise op_error(TypeError, layer_name(self), f"expected integer indices, got {idx.dtype.name}", idx)
        return _lookup(self.weight.on(idx.graph), idx, self.padding_idx, self.scale_grad_by_freq)

    def extra_repr(self) -> str:
        pad = f", padding_idx={self.padding_idx}" if self.padding_idx is not None else ""
        norm = f", norm_type={self.norm_type}" if self.norm_type != 2 else ""
        freq = ", scale_grad_by_freq=True" if self.scale_grad_by_freq else ""
        sparse = ", sparse=True" if self.sparse else ""
        return f"{self.num_embeddings}, {self.embedding_dim}{pad}{norm}{freq}{sparse}"


class Flatten(Module):
    """torch's ``nn.Flatten(start_dim=1, end_dim=-1)``.

    Args:
        start_dim, end_dim: the dims merged.
    """

    def __init__(self, start_dim: int = 1, end_dim: int = -1):
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, x):
        check_tensors("flatten", input=x)
        return x.flatten(self.start_dim, self.end_dim)

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    """torch's ``nn.Unflatten(dim, unflattened_size)``.

    Args:
        dim: the dim split. unflattened_size: its new sizes.
    """

    def __init__(self, dim: int, unflattened_size):
        super().__init__()
        self.dim, self.unflattened_size = dim, tuple(unflattened_size)

    def forward(self, x):
        check_tensors("unflatten", input=x)
        return x.unflatten(self.dim, self.unflattened_size)

    def extra_repr(self) -> str:
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"


def linear(input, weight, bias=None):  # noqa: A002
    """torch's ``F.linear``: ``input @ weight.T + bias``.

    Args:
        input: (*, in_features).
        weight: (out_features, in_features) or (in_features,).
        bias: optional (out_features,) or a scalar tensor.
    """
    name = "linear"
    check_tensors(name, optional=("bias",), input=input, weight=weight, bias=bias)
    if weight.ndim not in (1, 2) or input.ndim == 0 or input.shape[-1] != weight.shape[-1]:
        raise op_error(ValueError, name, f"input (*, in_features) and weight (out_features, in_features) must share "
                       f"in_features, got {tuple(input.shape)} and {tuple(weight.shape)}", input, weight)
    with renamed(name):
        return _affine(input, weight.T if weight.ndim == 2 else weight, bias)


def _affine(x, wt, bias):
    """``x @ wt + bias`` (no bias: ``x @ wt``), on 16-bit operands rounded once, as torch's addmm."""
    return x @ wt if bias is None else _affine_opmath(x, wt, bias)


@_opmath  # (16-bit: the product and the bias's sum in float32; rounding the product first differed by an ulp)
def _affine_opmath(x, wt, bias):
    return x @ wt + bias


def bilinear(input1, input2, weight, bias=None):
    """torch's ``F.bilinear``: ``y[..., o] = x1 @ weight[o] @ x2 + bias[o]``.

    Args:
        input1: (*, in1). input2: (*, in2). weight: (out, in1, in2). bias: optional (out,).
    """
    name = "bilinear"
    check_tensors(name, optional=("bias",), input1=input1, input2=input2, weight=weight, bias=bias)
    if (weight.ndim != 3 or input1.ndim == 0 or input2.ndim == 0 or input1.shape[-1] != weight.shape[1]
            or input2.shape[-1] != weight.shape[2]):
        raise op_error(ValueError, name, f"input1 (*, in1), input2 (*, in2) and weight (out, in1, in2) do not match: "
                       f"{tuple(input1.shape)}, {tuple(input2.shape)}, {tuple(weight.shape)}", input1, input2, weight)
    with renamed(name):
        t = input1.unsqueeze(-2).unsqueeze(-2) @ weight  # (*, out, 1, in2)
        y = (t.squeeze(-2) * input2.unsqueeze(-2)).sum(-1)
        return y + bias if bias is not None else y


def embedding(input, weight, padding_idx: int | None = None, max_norm=None, norm_type: float = 2.0,  # noqa: A002
              scale_grad_by_freq: bool = False, sparse: bool = False):
    """torch's ``F.embedding``: the rows of ``weight`` at the int32 indices ``input``; the
    ``padding_idx`` row gets no gradient.

    Args:
        input: int32 indices of any shape.
        weight: (num_embeddings, embedding_dim).
        padding_idx: a row that receives no gradient.
        max_norm: not supported (torch renormalises ``weight`` in place). norm_type: accepted.
        scale_grad_by_freq: divide each row's gradient by how often its index occurs in ``input``.
        sparse: accepted; the gradient has torch's values, held dense.
    """
    name = "embedding"
    check_tensors(name, input=input, weight=weight)
    _refuse_max_norm(name, max_norm, input)
    if input.dtype is not dt.int32:
        raise op_error(TypeError, name, f"expected integer indices, got {input.dtype.name}", input)
    if weight.ndim != 2:
        raise op_error(ValueError, name, f"weight must be 2-d (num_embeddings, embedding_dim), got "
                       f"{tuple(weight.shape)}", weight)
    n = weight.shape[0]
    if padding_idx is not None:
        if not -n <= padding_idx < n:
            raise op_error(ValueError, name, f"padding_idx {padding_idx} must be within num_embeddings ({n})",
                           weight)
        padding_idx %= n
    with renamed(name):
        return _lookup(weight, input, padding_idx, scale_grad_by_freq)


@_opmath  # (16-bit inputs: the norm's sum of squares in float32, as torch's; it overflowed)
def normalize(input, p: float = 2.0, dim: int = 1, eps: float = 1e-12):  # noqa: A002
    """torch's ``F.normalize``: ``input / max(||input||_p, eps)`` along ``dim``.

    Args:
        input: a float tensor. p: the norm's exponent. dim: the dim normalised. eps: the smallest divisor.
    """
    check_tensors("normalize", input=input)
    with renamed("normalize"):
        return input / _norm(input, p, dim).clamp(min=eps)


def _norm(x, p: float, dim: int):
    """The p-norm along ``dim`` (keepdim): ``vector_norm``'s, with torch's gradients (0 at a zero
    vector; for ``p < 1`` 0 at each zero element) and its ``p`` = 0 and ``-inf``."""
    return vector_norm(x, p, dim, keepdim=True)


class Bilinear(Module):
    """torch's ``nn.Bilinear``: ``y[..., o] = x1 @ weight[o] @ x2 + bias[o]`` with ``weight``
    (out_features, in1_features, in2_features) and ``bias`` (out_features,), as torch's (its state_dict
    loads as is).

    Args:
        in1_features: the size of the first input's last dim.
        in2_features: the size of the second input's last dim.
        out_features: the size of the output's last dim.
        bias: whether there is a bias (default True).
        device: ignored (arrays live on the host).
        dtype: the parameters' dtype (default float32).
    """

    def __init__(self, in1_features: int, in2_features: int, out_features: int, bias: bool = True, device=None,
                 dtype=None):
        super().__init__()
        self.in1_features = check_int("Bilinear", "in1_features", in1_features, 0)
        self.in2_features = check_int("Bilinear", "in2_features", in2_features, 0)
        self.out_features = check_int("Bilinear", "out_features", out_features, 0)
        self.weight = param((out_features, in1_features, in2_features), dtype)
        self.bias = param((out_features,), dtype) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Re-initialise as torch does: the weight and the bias U(-1/sqrt(in1_features), 1/sqrt(in1_features))."""
        b = init.bias_bound(self.in1_features)
        init.uniform_(self.weight, -b, b)
        if self.bias is not None:
            init.uniform_(self.bias, -b, b)

    @layer_forward
    def forward(self, input1, input2):
        check_tensors(layer_name(self), input2=input2)
        for what, x, n in (("input1", input1, self.in1_features), ("input2", input2, self.in2_features)):
            if x.ndim == 0 or x.shape[-1] != n:
                raise bad_input(layer_name(self), f"(*, {n})", x, what=what)
        g = input1.graph
        return bilinear(input1, input2, self.weight.on(g), self.bias.on(g) if self.bias is not None else None)

    def extra_repr(self) -> str:
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")


class CosineSimilarity(Module):
    """torch's ``nn.CosineSimilarity(dim=1, eps=1e-8)``: ``F.cosine_similarity(x1, x2, dim, eps)``.

    Args:
        dim: the dim of the vectors.
        eps: the smallest norm.
    """

    def __init__(self, dim: int = 1, eps: float = 1e-8):
        super().__init__()
        self.dim, self.eps = dim, eps

    def forward(self, x1, x2):
        return cosine_similarity(x1, x2, self.dim, self.eps)


class PairwiseDistance(Module):
    """torch's ``nn.PairwiseDistance(p=2.0, eps=1e-6, keepdim=False)``: ``F.pairwise_distance(x1, x2,
    p, eps, keepdim)``.

    Args:
        p: the norm's exponent.
        eps: added to the difference.
        keepdim: keep the reduced dim.
    """

    def __init__(self, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False):
        super().__init__()
        self.norm, self.eps, self.keepdim = p, eps, keepdim

    def forward(self, x1, x2):
        return pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)
