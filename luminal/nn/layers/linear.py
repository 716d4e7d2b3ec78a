"""Linear, Embedding and the shape-only layers (Flatten, Unflatten, Identity), with torch's names and layouts."""

from __future__ import annotations

from luminal.core import dtype as dt
from luminal.core.errors import check_int, op_error
from luminal.frontend.checks import check_tensors
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
    """``y = x @ weight.T + bias`` with ``weight`` (out_features, in_features), as torch's."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, dtype=None):
        super().__init__()
        self.in_features = check_int("Linear", "in_features", in_features, 0)
        self.out_features = check_int("Linear", "out_features", out_features, 0)
        self.weight = param((out_features, in_features), dtype)
        self.bias = param((out_features,), dtype) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.kaiming_uniform_(self.weight, a=5 ** 0.5)
        if self.bias is not None:
            b = init.bias_bound(self.in_features)
            init.uniform_(self.bias, -b, b)

    @layer_forward
    def forward(self, x):
        if x.ndim == 0 or x.shape[-1] != self.in_features:
            raise bad_input(layer_name(self), f"(*, {self.in_features})", x)
        y = x @ self.weight.on(x.graph).T
        return y + self.bias.on(x.graph) if self.bias is not None else y

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class Embedding(Module):
    """A lookup table ``weight`` (num_embeddings, embedding_dim); rows are read by integer index.
    The ``padding_idx`` row starts at zero and, as in torch, gets no gradient (it is read detached)."""

    def __init__(self, num_embeddings: int, embedding_dim: int, padding_idx: int | None = None,
                 max_norm=None, norm_type: float = 2.0, scale_grad_by_freq: bool = False, sparse: bool = False,
                 _weight=None, _freeze: bool = False, dtype=None):
        super().__init__()
        num_embeddings = check_int("Embedding", "num_embeddings", num_embeddings, 0)
        embedding_dim = check_int("Embedding", "embedding_dim", embedding_dim, 0)
        if max_norm is not None or scale_grad_by_freq or sparse:
            raise NotImplementedError("Embedding: max_norm, scale_grad_by_freq and sparse are not supported")
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise ValueError(f"Embedding: padding_idx {padding_idx} must be within num_embeddings "
                                 f"({num_embeddings})")
            padding_idx %= num_embeddings
        self.num_embeddings, self.embedding_dim, self.padding_idx = num_embeddings, embedding_dim, padding_idx
        self.weight = param((num_embeddings, embedding_dim), dtype)
        self.weight.requires_grad = not _freeze
        if _weight is None:
            self.reset_parameters()
        else:
            self.weight.set(_weight)

    def reset_parameters(self) -> None:
        init.normal_(self.weight)
        if self.padding_idx is not None:
            self.weight.data[self.padding_idx] = 0

    @classmethod
    def from_pretrained(cls, embeddings, freeze: bool = True, padding_idx: int | None = None, dtype=None):
        n, d = embeddings.shape
        return cls(n, d, padding_idx, _weight=embeddings, _freeze=freeze, dtype=dtype)

    @layer_forward
    def forward(self, idx):
        if idx.dtype is not dt.int32:
            raise op_error(TypeError, layer_name(self), f"expected integer indices, got {idx.dtype.name}", idx)
        w = self.weight.on(idx.graph)
        if self.padding_idx is not None:
            pad_row = (idx.graph.arange(self.num_embeddings) == self.padding_idx).unsqueeze(1)
            w = w.detach().where(pad_row, w)
        rows = w.index_select(0, idx.reshape(-1))
        return rows.reshape(*idx.shape, self.embedding_dim)

    def extra_repr(self) -> str:
        pad = f", padding_idx={self.padding_idx}" if self.padding_idx is not None else ""
        return f"{self.num_embeddings}, {self.embedding_dim}{pad}"


class Flatten(Module):
    def __init__(self, start_dim: int = 1, end_dim: int = -1):
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, x):
        check_tensors("flatten", input=x)
        return x.flatten(self.start_dim, self.end_dim)

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    def __init__(self, dim: int, unflattened_size):
        super().__init__()
        self.dim, self.unflattened_size = dim, tuple(unflattened_size)

    def forward(self, x):
        check_tensors("unflatten", input=x)
        return x.unflatten(self.dim, self.unflattened_size)

    def extra_repr(self) -> str:
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"
