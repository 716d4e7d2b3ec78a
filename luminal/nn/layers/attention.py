"""Attention: torch's ``F.scaled_dot_product_attention`` and ``nn.MultiheadAttention`` (its parameter names,
packed ``in_proj_weight``, mask conventions and sequence-first default layout)."""

from __future__ import annotations

import math

import numpy as np

from luminal.core import dtype as dt
from luminal.core.errors import check_int, op_error, renamed
from luminal.core.symbolic import is_static, shape_str
from luminal.frontend.checks import check_tensors
from luminal.frontend.ops import broadcast_shapes, cast, cat, where
from luminal.frontend.tensor import GraphTensor
from luminal.nn import init
from luminal.nn.layers._util import bad_input, layer_forward, layer_name, param
from luminal.nn.layers.dropout import dropout
from luminal.nn.layers.linear import Linear
from luminal.nn.module import Module, _addindent


def _causal(g, n_q, n_k):
    """Top-left aligned lower-triangular bool mask (query i sees keys 0..i), as torch's ``is_causal``."""
    return g.arange(n_q).reshape(n_q, 1) >= g.arange(n_k).reshape(1, n_k)


def _repeat_heads(t, r: int):
    """(..., H, S, E) -> (..., H*r, S, E), each head repeated r times in place (``repeat_interleave``)."""
    if r == 1:
        return t
    *lead, h, s, e = t.shape
    return t.unsqueeze(-3).expand(*lead, h, r, s, e).reshape(*lead, h * r, s, e)


def _wide(t):
    """A float16/bfloat16 tensor in float32, others as they are: torch's sdpa computes 16-bit attention in
    float32 and rounds only its output (a score ``q.k * scale`` beyond 65504 is inf in float16 storage, and
    a row holding one turned into NaN through the softmax)."""
    return cast(t, dt.float32) if t.dtype in (dt.float16, dt.bfloat16) else t


def _attention_scores(query, key, attn_mask, is_causal, scale, enable_gqa, name, wide=False):
    """``q @ k^T * scale`` with the mask applied (masked out: -inf), before the softmax; with ``wide``,
    16-bit query and key are multiplied in float32 (``_wide``)."""
    if query.ndim < 2 or key.ndim < 2 or query.shape[-1] != key.shape[-1]:
        raise op_error(ValueError, name, f"query (..., L, E) and key (..., S, E) must share E, got "
                       f"{shape_str(query.shape)} and {shape_str(key.shape)}", query, key)
    if is_causal and attn_mask is not None:
        raise op_error(ValueError, name, "give attn_mask or is_causal, not both", query, attn_mask)
    if enable_gqa and query.ndim >= 3 and key.shape[-3] != query.shape[-3]:
        key = _repeat_heads(key, query.shape[-3] // key.shape[-3])
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    # (the batch dims checked here, so that the error names the inputs as given, not their float32 copies)
    broadcast_shapes(name, query, key, shapes=[query.shape[:-2], key.shape[:-2]])
    q, k = (_wide(query), _wide(key)) if wide else (query, key)
    scores = (q * scale) @ k.transpose(-2, -1)
    if is_causal:
        attn_mask = _causal(query.graph, query.shape[-2], key.shape[-2])
    if attn_mask is not None:
        if not _broadcasts(attn_mask.shape, scores.shape):
            raise op_error(ValueError, name, f"attn_mask of shape {shape_str(attn_mask.shape)} does not broadcast to "
                           f"the scores (..., L, S) = {shape_str(scores.shape)}", query, key, attn_mask)
        _check_mask_dtype(name, "attn_mask", attn_mask)
        if attn_mask.dtype is dt.bool_:
            scores = where(attn_mask, scores, -math.inf)
        else:
            scores = scores + attn_mask
    return scores


def _check_mask_dtype(name: str, what: str, mask) -> None:
    """A mask is bool (which positions take part, or are masked out) or float (added to the scores), as
    torch's: an int mask (``(ids == pad).int()``, a tokenizer's 0/1) would be added as 0 and 1 and mask
    nothing, silently."""
    if mask.dtype is not dt.bool_ and not mask.dtype.is_float:
        raise op_error(TypeError, name, f"{what} must be bool or float, got {mask.dtype.name} (a 0/1 int mask: "
                       f"compare it, e.g. mask == 1, to make it bool)", mask)


def _broadcasts(shape, target) -> bool:
    """Whether ``shape`` broadcasts to ``target`` without growing it."""
    return len(shape) <= len(target) and all(
        d == t or (is_static(d) and d == 1) for d, t in zip(reversed(shape), reversed(target)))


def _safe_softmax(scores):
    """Softmax over the keys, with rows whose every score is -inf (every key masked out) giving 0 and
    passing no gradient, as torch's sdpa does (its ``_safe_softmax``). Those rows are softmaxed as zeros
    first: NaN there would come back as 0 * NaN in the gradient even though the row is not used."""
    full = (scores == -math.inf).all(-1, keepdim=True)
    return where(full, 0.0, where(full, 0.0, scores).softmax(-1))


@renamed("scaled_dot_product_attention")
def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p: float = 0.0, is_causal: bool = False,
                                 scale: float | None = None, enable_gqa: bool = False):
    """torch's ``F.scaled_dot_product_attention``: ``softmax(q @ k^T * scale + mask) @ v``. A bool mask
    marks the positions that take part; a float mask is added to the scores. Rows with every key masked
    out give 0, as torch's. float16/bfloat16 inputs are computed in float32 and the output rounded once,
    as torch's CPU kernels (math and flash) do: the scores may exceed the 16-bit range."""
    name = "scaled_dot_product_attention"
    check_tensors(name, optional=("attn_mask",), query=query, key=key, value=value, attn_mask=attn_mask)
    scores = _attention_scores(query, key, attn_mask, is_causal, scale, enable_gqa, name, wide=True)
    if value.ndim < 2 or value.shape[-2] != key.shape[-2]:
        raise op_error(ValueError, name, f"key (..., S, E) and value (..., S, Ev) must share S, got "
                       f"{shape_str(key.shape)} and {shape_str(value.shape)}", key, value)
    # a causal mask always keeps key 0: only a given mask can leave a row with none
    w = _safe_softmax(scores) if attn_mask is not None else scores.softmax(-1)
    if dropout_p > 0.0:
        w = dropout(w, dropout_p)
    if enable_gqa and query.ndim >= 3 and value.shape[-3] != query.shape[-3]:
        value = _repeat_heads(value, query.shape[-3] // value.shape[-3])
    broadcast_shapes(name, w, value, shapes=[w.shape[:-2], value.shape[:-2]])
    return _narrow(w @ _wide(value), query, key, value, attn_mask)


def _narrow(out, *operands):
    """``out``, computed in float32 for 16-bit ``operands`` (``_wide``), in the dtype those operands give
    without widening (float masks included; a bool mask selects and does not promote)."""
    want = None
    for t in operands:
        if t is not None and t.dtype.is_float:
            want = t.dtype if want is None else dt.promote(want, t.dtype)
    return out if out.dtype is want else cast(out, want)


def _float_mask(mask, like, name: str, what: str):
    """MultiheadAttention's masks: bool True means *masked out* (the opposite of sdpa's) -> -inf;
    float masks are added as they are."""
    _check_mask_dtype(name, what, mask)
    if mask.dtype is dt.bool_:
        return where(mask, like.graph.constant(-math.inf, like.dtype), like.graph.constant(0.0, like.dtype))
    return mask.to(like.dtype)


def _mask_on(mask, like):
    """``mask`` as a tensor of ``like``'s graph: a numpy array (torch code builds its masks before any
    graph exists, with ``Transformer.generate_square_subsequent_mask`` or numpy) becomes a constant of
    it; a GraphTensor or None is passed on as it is (and so is anything when ``like`` is no tensor: the
    attention's checks name that input)."""
    return like.graph.constant(mask) if isinstance(mask, np.ndarray) and isinstance(like, GraphTensor) else mask


def _same(a, b) -> bool:
    """``a`` and ``b`` read the same elements the same way (one tensor passed twice)."""
    return a is b or (a.node is b.node and a.layout == b.layout)


class NonDynamicallyQuantizableLinear(Linear):
    """torch's class of ``MultiheadAttention.out_proj``: a ``Linear`` (the name keeps reprs identical)."""


class MultiheadAttention(Module):
    """torch's ``nn.MultiheadAttention``. Inputs are (L, N, E) (or (N, L, E) with ``batch_first``, or
    unbatched (L, E)); returns ``(output, weights)`` with the weights averaged over heads unless
    ``average_attn_weights=False``, or None with ``need_weights=False``. A mask may be a numpy array
    (``Transformer.generate_square_subsequent_mask``'s): it becomes a constant of the query's graph.
    ``add_bias_kv`` appends the learned ``bias_k``/``bias_v`` as one more key and value, ``add_zero_attn``
    a zero key and value per head, after the projections, as torch's. ``device`` is accepted for torch's
    signature and ignored (arrays live on the host)."""

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True,
                 add_bias_kv: bool = False, add_zero_attn: bool = False, kdim: int | None = None,
                 vdim: int | None = None, batch_first: bool = False, device=None, dtype=None):
        super().__init__()
        embed_dim = check_int("MultiheadAttention", "embed_dim", embed_dim, 1)
        num_heads = check_int("MultiheadAttention", "num_heads", num_heads, 1)
        if embed_dim % num_heads:
            raise ValueError(f"MultiheadAttention: embed_dim ({embed_dim}) must be divisible by num_heads "
                             f"({num_heads})")
        self.embed_dim, self.num_heads, self.head_dim = embed_dim, num_heads, embed_dim // num_heads
        self.kdim, self.vdim = kdim or embed_dim, vdim or embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.dropout, self.batch_first = dropout, batch_first
        if self._qkv_same_embed_dim:
            self.in_proj_weight = param((3 * embed_dim, embed_dim), dtype)
            self.q_proj_weight = self.k_proj_weight = self.v_proj_weight = None
        else:
            self.q_proj_weight = param((embed_dim, embed_dim), dtype)
            self.k_proj_weight = param((embed_dim, self.kdim), dtype)
            self.v_proj_weight = param((embed_dim, self.vdim), dtype)
            self.in_proj_weight = None
        self.in_proj_bias = param((3 * embed_dim,), dtype) if bias else None
        self.out_proj = NonDynamicallyQuantizableLinear(embed_dim, embed_dim, bias=bias, dtype=dtype)
        if add_bias_kv:  # one learned key and value appended to every sequence (after the projection)
            self.bias_k, self.bias_v = param((1, 1, embed_dim), dtype), param((1, 1, embed_dim), dtype)
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """torch's: xavier_uniform_ projections, zero biases, xavier_normal_ bias_k and bias_v;
        out_proj.weight keeps Linear's init."""
        for w in (self.in_proj_weight, self.q_proj_weight, self.k_proj_weight, self.v_proj_weight):
            if w is not None:
                init.xavier_uniform_(w)
        if self.in_proj_bias is not None:
            init.zeros_(self.in_proj_bias)
            init.zeros_(self.out_proj.bias)
        if self.bias_k is not None:
            init.xavier_normal_(self.bias_k)
            init.xavier_normal_(self.bias_v)

    def _project(self, x, i: int | None):
        """The i-th (q, k, v) input projection: rows [i*E, (i+1)*E) of the packed weight and bias; with
        ``i=None`` all three at once (the packed weight's rows: q, k and v side by side)."""
        g, e = x.graph, self.embed_dim
        rows = slice(None) if i is None else slice(i * e, (i + 1) * e)
        if self.in_proj_weight is not None:
            w = self.in_proj_weight.on(g)[rows]
        else:
            w = (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight)[i].on(g)
        y = x @ w.T
        return y + self.in_proj_bias.on(g)[rows] if self.in_proj_bias is not None else y

    def _check(self, name, query, key, value, key_padding_mask, attn_mask):
        check_tensors(name, optional=("key_padding_mask", "attn_mask"), query=query, key=key, value=value,
                      key_padding_mask=key_padding_mask, attn_mask=attn_mask)
        for t, d, what in ((query, self.embed_dim, "query"), (key, self.kdim, "key"), (value, self.vdim, "value")):
            if t.ndim not in (2, 3) or t.shape[-1] != d:
                layout = "(N, L, {d}) or (L, {d})" if self.batch_first else "(L, N, {d}) or (L, {d})"
                raise bad_input(name, layout.format(d=d), t, what=what)
        if not (query.ndim == key.ndim == value.ndim):
            raise op_error(ValueError, name, "query, key and value must all be batched or all unbatched",
                           query, key, value)
        seq, batch = (1, 0) if self.batch_first and query.ndim == 3 else (0, 1)
        if key.shape[seq] != value.shape[seq]:
            raise op_error(ValueError, name, f"key and value must have the same length S (dim {seq}), got "
                           f"{shape_str(key.shape)} and {shape_str(value.shape)}", key, value)
        if query.ndim == 3 and not query.shape[batch] == key.shape[batch] == value.shape[batch]:
            raise op_error(ValueError, name, f"query, key and value must have the same batch size N (dim {batch}), "
                           f"got {shape_str(query.shape)}, {shape_str(key.shape)} and {shape_str(value.shape)}",
                           query, key, value)

    @layer_forward
    def forward(self, query, key, value, key_padding_mask=None, need_weights: bool = True, attn_mask=None,
                average_attn_weights: bool = True, is_causal: bool = False):
        name = layer_name(self)
        key_padding_mask, attn_mask = _mask_on(key_padding_mask, query), _mask_on(attn_mask, query)
        self._check(name, query, key, value, key_padding_mask, attn_mask)
        # self-attention (one tensor as query, key and value): one product with the packed weight
        packed = self.in_proj_weight is not None and _same(query, key) and _same(key, value)
        unbatched = query.ndim == 2
        if unbatched:
            query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
            if key_padding_mask is not None:
                key_padding_mask = key_padding_mask.unsqueeze(0)
        elif self.batch_first:
            query, key, value = (t.transpose(0, 1) for t in (query, key, value))
        # (L, N, E) from here on
        n_q, n, n_k, h, hd = query.shape[0], query.shape[1], key.shape[0], self.num_heads, self.head_dim

        def heads(t, length):  # (len, N, E) -> (N, H, len, hd)
            return t.reshape(length, n, h, hd).permute(1, 2, 0, 3)

        if packed:  # (L, N, 3E): one GEMM with N = 3E instead of three with N = E (and one in each backward product)
            qkv = self._project(query, None)
            q, k, v = (heads(qkv[..., i * self.embed_dim:(i + 1) * self.embed_dim], n_q) for i in range(3))
        else:
            q = heads(self._project(query, 0), n_q)
            k = heads(self._project(key, 1), n_k)
            v = heads(self._project(value, 2), n_k)
        # torch's order: bias_k/bias_v appended as one more key and value of every sequence, then (with
        # add_zero_attn) a zero key and value per head; the masks keep those keys (padded with 0 below)
        extra = 0
        if self.bias_k is not None:
            bk, bv = (heads(b.on(q.graph).expand(1, n, self.embed_dim), 1) for b in (self.bias_k, self.bias_v))
            k, v, extra = cat([k, bk], 2), cat([v, bv], 2), 1
        if self.add_zero_attn:
            k, v, extra = k.pad([0, 0, 0, 1]), v.pad([0, 0, 0, 1]), extra + 1
        mask = None
        want = {2: (n_q, n_k), 3: (n * h, n_q, n_k)}
        if attn_mask is not None and tuple(attn_mask.shape) != want.get(attn_mask.ndim):
            raise op_error(ValueError, name, f"attn_mask must be {shape_str(want[2])} or {shape_str(want[3])} "
                           f"(L, S or N*num_heads, L, S), got {shape_str(attn_mask.shape)}", attn_mask)
        if key_padding_mask is not None and tuple(key_padding_mask.shape) != (n, n_k):
            raise op_error(ValueError, name, f"key_padding_mask must be {shape_str((n, n_k))} (N, S), got "
                           f"{shape_str(key_padding_mask.shape)}", key_padding_mask)
        if attn_mask is not None:
            mask = _float_mask(attn_mask, q, name, "attn_mask")
            if mask.ndim == 3:  # (N*H, L, S)
                mask = mask.reshape(n, h, n_q, n_k)
        if is_causal and attn_mask is None:
            mask = _float_mask(_causal(q.graph, n_q, n_k).logical_not(), q, name, "is_causal")
        if key_padding_mask is not None:
            kpm = _float_mask(key_padding_mask, q, name, "key_padding_mask").reshape(n, 1, 1, n_k)
            mask = kpm if mask is None else mask + kpm
        if mask is not None and extra:
            mask = mask.pad([0, extra], 0.0)
        # torch computes need_weights=False through sdpa, whose rows with every key masked out (a sequence
        # all padding, a left-padded causal row) give 0 and no gradient, and whose 16-bit attention is
        # computed in float32 (``_wide``); with the weights asked for, a plain softmax in the inputs' dtype
        # (NaN in those rows, and from scores beyond the float16 range, as torch's). A causal mask alone
        # always keeps key 0.
        scores = _attention_scores(q, k, mask, False, None, False, name, wide=not need_weights)
        given = attn_mask is not None or key_padding_mask is not None
        w = _safe_softmax(scores) if given and not need_weights else scores.softmax(-1)
        if self.dropout > 0.0 and self.training:  # (reads the mode only where it matters)
            w = dropout(w, self.dropout)
        att = w @ v if need_weights else _narrow(w @ _wide(v), q, k, v, mask)
        out = att.permute(2, 0, 1, 3).reshape(n_q, n, self.embed_dim)  # (L, N, E)
        out = self.out_proj(out)
        if unbatched:
            out = out.squeeze(1)
        elif self.batch_first:
            out = out.transpose(0, 1)
        if not need_weights:
            return out, None
        weights = w.mean(1) if average_attn_weights else w
        return out, weights.squeeze(0) if unbatched else weights

    def extra_repr(self) -> str:
        return f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, batch_first={self.batch_first}"

    def __repr__(self):
        """torch's (its extra_repr is empty; ours names the layer in errors)."""
        return "MultiheadAttention(\n  (out_proj): " + _addindent(repr(self.out_proj), 2) + "\n)"
