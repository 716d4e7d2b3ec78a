"""Recurrent layers: torch's ``nn.RNN``, ``nn.LSTM`` and ``nn.GRU`` and their cells, with torch's
constructor arguments, parameter names (``weight_ih_l0``, ``bias_hh_l1_reverse``, ...), shapes, gate
orders (LSTM: i, f, g, o; GRU: r, z, n) and initialisation.

The sequence length must be static: the recurrence is unrolled over time into graph ops. The input
projection ``x @ W_ih^T + b_ih`` of every time step is one matmul over the whole sequence; each step
computes only the recurrent ``h @ W_hh^T`` and its gates. The steps are identical blocks of ops, so
the compiler's loop rolling optimises one step and calls it once per time step (forward and
backward): compile time stays nearly flat in the sequence length.

A :class:`~luminal.nn.utils.rnn.PackedSequence` (``nn.utils.rnn.pack_padded_sequence``) carries the padded
batch and each sequence's length; the layers then keep each sequence's state once its steps are done
(``h_t = h_{t-1}`` where ``t >= length``) and give zeros past its end, which is torch's result on the
packed batch: ``h_n``/``c_n`` are each sequence's own last step, a reverse direction starts at its own
last element (from the initial state), and no gradient reaches the padding.
"""

from __future__ import annotations

import math
import warnings

from luminal.core.errors import check_int, check_number, op_error, user_stacklevel
from luminal.core.symbolic import is_static, shape_str
from luminal.frontend.checks import check_tensors
from luminal.frontend.ops.combine import cat, stack
from luminal.frontend.ops.core import prim
from luminal.frontend.ops.elementwise import where
from luminal.nn import init
from luminal.nn.layers._util import bad_input, check_float, layer_forward, layer_name, param
from luminal.nn.layers.dropout import dropout as _dropout
from luminal.nn.module import Module
from luminal.nn.packed_sequence import PackedSequence, step_mask

_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


# one time step ------------------------------------------------------------------------------------
# ``gx`` is the step's input projection x_t @ W_ih^T + b_ih (plus the parts of b_hh that are added
# outside a gate's product: all of it for RNN and LSTM, b_hr and b_hz for GRU). A zero initial state is
# a tensor of zeros like any other: the recurrent weights are read (and get their zero gradient) as in
# torch, so an optimizer treats them alike (AdamW's weight decay) even for a single step.

def _rnn_cell(gx, h, w_hh, relu: bool):
    a = gx + h @ w_hh.T
    return a.relu() if relu else a.tanh()


def _lstm_cell(gx, h, c, w_hh, w_hr=None):
    """torch's LSTM step; with projections (``w_hr``, (proj_size, hidden_size)) h' is projected to proj_size
    features, c' keeps hidden_size."""
    i, f, g, o = (gx + h @ w_hh.T).chunk(4, -1)
    c = f.sigmoid() * c + i.sigmoid() * g.tanh()
    h = o.sigmoid() * c.tanh()
    return (h if w_hr is None else h @ w_hr.T), c


def _gru_cell(gx, h, w_hh, b_hn):
    """torch's GRU step: r and z from the sums of both projections; n = tanh(gx_n + r * (W_hn h + b_hn));
    h' = (h - n) * z + n (torch's order of operations)."""
    gx_r, gx_z, gx_n = gx.chunk(3, -1)
    gh_r, gh_z, gh_n = (h @ w_hh.T).chunk(3, -1)
    r, z = (gx_r + gh_r).sigmoid(), (gx_z + gh_z).sigmoid()
    if b_hn is not None:
        gh_n = gh_n + b_hn
    n = (gx_n + r * gh_n).tanh()
    return (h - n) * z + n


def _zeros(x, hidden_size: int):
    """A zero state (N, hidden_size) for the (N, F) or (L, N, F) tensor ``x``."""
    return x.graph.constant(0.0, x.dtype).expand(x.shape[-2], hidden_size)


# The steps are identical blocks of ops, which the compiler's loop rolling turns into one body called
# once per step, forward and backward. A loop's trips must read what comes from outside them through
# the same views; step t's slice of the sequence (``gx[t]``) and of the output's gradient are views at
# offset t. So each step's slice of the input projection is a node of its own, made before the steps,
# and each step's output reaches the stacked output through a copy whose gradient is materialised: the
# backward steps then read a whole node too (it is made when the stack's gradient is, before them).

def _step_input(gx, t: int):
    """Step ``t``'s slice of the (L, N, G) input projection as a node of its own (a Copy), whose gradient
    reaches the whole ``gx`` padded with -0.0, the additive identity, as ``_stack_steps`` pads: the
    compiler folds the sum of the steps' padded gradients into one buffer written slice by slice. The
    slice's own gradient (``view_grad``) pads with +0.0, which is not folded: each step's gradient was a
    whole (L, N, G) buffer and their sum cost O(L^2) (an LSTM's backward over 800 steps: 1.9 s, 16x torch)."""
    n = gx.shape[0]
    out = prim("Copy", gx[t])

    def rule(_, adjoint, whole):
        return [prim("Copy", adjoint).unsqueeze(0).pad([0, 0] * adjoint.ndim + [t, n - 1 - t], -0.0)]

    return gx.graph.custom_vjp(out, [gx], rule)


def _boundary(h):
    """A copy of ``h`` whose gradient is a whole node (a Copy of the adjoint, a view of the output's)."""
    out = prim("Copy", h)
    return h.graph.custom_vjp(out, [h], lambda y, a, x: [prim("Copy", a)])


def _stack_steps(hs):
    """The steps' (N, H) outputs as one (L, N, H) tensor, as ``stack`` makes it (each padded to the whole
    length, the pieces added), each through ``_boundary``. The copies and additions alternate: a run of
    identical copies would itself be rolled into a loop of copies, which the compiler fails on (a body
    whose outputs are its inputs once the copies are optimised away)."""
    out, n = None, len(hs)
    for t, h in enumerate(hs):
        piece = _boundary(h).unsqueeze(0).pad([0, 0] * (h.ndim) + [t, n - 1 - t], -0.0)
        out = piece if out is None else out + piece
    return out


def _reset_uniform(module, hidden_size: int) -> None:
    """torch's RNN initialisation: every parameter from U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))."""
    bound = 1.0 / math.sqrt(hidden_size)
    for p in module.parameters():
        init.uniform_(p, -bound, bound)


def _is_packed(x) -> bool:
    """A PackedSequence of another library (torch's, or any look-alike): data with batch_sizes."""
    return type(x).__name__ == "PackedSequence" or (hasattr(x, "batch_sizes") and hasattr(x, "data"))


def _step_mask(mask, t: int):
    """Step ``t``'s (N, 1) slice of the (L, N, 1) mask as a node of its own, as ``_step_input``'s."""
    return prim("Copy", mask[t])


# the sequence layers ------------------------------------------------------------------------------

class RNNBase(Module):
    """The common base of RNN, LSTM and GRU (torch's ``nn.RNNBase``): ``num_layers`` layers of one or two
    directions; layer k's parameters are ``weight_ih_l{k}`` (gates*hidden_size, input), ``weight_hh_l{k}``
    (gates*hidden_size, hidden_size), ``bias_ih_l{k}`` and ``bias_hh_l{k}`` (gates*hidden_size,), and with
    LSTM's ``proj_size`` P > 0 ``weight_hr_l{k}`` (P, hidden_size), the recurrent weights then (4*hidden_size,
    P); with the suffix ``_reverse`` for the backward direction, in torch's order.

    Args:
        mode: "RNN_TANH", "RNN_RELU", "LSTM" or "GRU".
        input_size: the features of the input.
        hidden_size: the features of the hidden state.
        num_layers: stacked layers (default 1).
        bias: whether the layers have the biases ``b_ih`` and ``b_hh``.
        batch_first: inputs and outputs are (N, L, H) instead of (L, N, H) (the states stay (D*layers, N, H)).
        dropout: in training mode, dropout with this probability on the outputs of every layer but the last.
        bidirectional: run each layer forward and backward in time; the outputs are concatenated.
        proj_size: LSTM only: if > 0 (and < hidden_size), every step's hidden state is projected to
            proj_size features (``h_t = W_hr (o_t * tanh(c_t))``); h and the outputs have proj_size features.
        device: ignored (arrays live on the host).
        dtype: the parameters' dtype (default float32).
    """

    def __init__(self, mode: str, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False, proj_size: int = 0,
                 device=None, dtype=None):
        super().__init__()
        name = {"RNN_TANH": "RNN", "RNN_RELU": "RNN"}.get(mode, mode)
        if mode not in _GATES:
            raise ValueError(f"{name}: unknown mode {mode!r}")
        self.mode = mode
        self.input_size = check_int(name, "input_size", input_size, 1)  # (torch's cells allow 0, its RNNs not)
        self.hidden_size = check_int(name, "hidden_size", hidden_size, 1)
        self.num_layers = check_int(name, "num_layers", num_layers, 1)
        self.proj_size = check_int(name, "proj_size", proj_size, 0)
        if self.proj_size > 0 and mode != "LSTM":
            raise ValueError(f"{name}: proj_size argument is only supported for LSTM, not RNN or GRU")
        if self.proj_size >= self.hidden_size:
            raise ValueError(f"{name}: proj_size has to be smaller than hidden_size, got proj_size="
                             f"{self.proj_size} and hidden_size={self.hidden_size}")
        if isinstance(dropout, bool) or not 0.0 <= check_number(name, "dropout", dropout) <= 1.0:
            raise ValueError(f"{name}: dropout should be a number in range [0, 1] representing the probability "
                             f"of an element being zeroed, got {dropout!r}")
        if dropout > 0 and self.num_layers == 1:
            warnings.warn(f"{name}: dropout option adds dropout after all but last recurrent layer, so non-zero "
                          f"dropout expects num_layers greater than 1, but got dropout={dropout} and "
                          f"num_layers={self.num_layers}", UserWarning, stacklevel=user_stacklevel())
        self.bias, self.batch_first = bool(bias), bool(batch_first)
        self.dropout, self.bidirectional = float(dropout), bool(bidirectional)
        gates = _GATES[mode] * self.hidden_size
        dirs = 2 if self.bidirectional else 1
        out_size = self._out_size
        self._flat_weights_names: list[str] = []
        for layer in range(self.num_layers):
            for d in range(dirs):
                sfx = f"_l{layer}" + ("_reverse" if d else "")
                width = self.input_size if layer == 0 else out_size * dirs
                shapes = {f"weight_ih{sfx}": (gates, width), f"weight_hh{sfx}": (gates, out_size)}
                if self.bias:
                    shapes |= {f"bias_ih{sfx}": (gates,), f"bias_hh{sfx}": (gates,)}
                if self.proj_size:
                    shapes[f"weight_hr{sfx}"] = (self.proj_size, self.hidden_size)
                for n, shape in shapes.items():
                    setattr(self, n, param(shape, dtype))
                self._flat_weights_names.extend(shapes)
        self.reset_parameters()

    @property
    def _out_size(self) -> int:
        """The features of h (and of each direction's output): proj_size with LSTM projections, else hidden_size."""
        return self.proj_size or self.hidden_size

    def reset_parameters(self) -> None:
        """Re-initialise as torch does: every weight and bias from U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))."""
        _reset_uniform(self, self.hidden_size)

    @property
    def all_weights(self) -> list[list]:
        """torch's ``all_weights``: per layer and direction, the list [w_ih, w_hh, b_ih, b_hh, w_hr] (no biases
        without ``bias``, no w_hr without ``proj_size``)."""
        per = (4 if self.bias else 2) + (1 if self.proj_size else 0)
        ws = [getattr(self, n) for n in self._flat_weights_names]
        return [ws[i:i + per] for i in range(0, len(ws), per)]

    def flatten_parameters(self) -> None:
        """Accepted for torch compatibility (cuDNN's weight layout): does nothing."""

    def forward(self, input, hx=None):  # noqa: A002 - torch's name
        """Run the layers over the whole sequence.

        Args:
            input: (L, N, input_size), (N, L, input_size) with ``batch_first``, or unbatched (L, input_size);
                L must be static (an int). Or a :class:`~luminal.nn.utils.rnn.PackedSequence` (its data
                (L, N, input_size) whatever ``batch_first``): each sequence runs for its own length.
            hx: the initial states, (D*num_layers, N, hidden_size) (or (D*num_layers, hidden_size) for an
                unbatched input), D = 2 if bidirectional else 1; for LSTM a tuple (h_0, c_0), h_0 with
                proj_size features when proj_size > 0. None: zeros.

        Returns:
            ``(output, h_n)`` (LSTM: ``(output, (h_n, c_n))``): output (L, N, D*H_out) (batch_first:
            (N, L, D*H_out)), H_out = proj_size or hidden_size, the last layer's hidden state at every step;
            h_n and c_n the final states of every layer and direction, shaped as ``hx``. For a
            PackedSequence, output is one too (zeros past each sequence's end; ``pad_packed_sequence``
            pads it) and h_n, c_n are the states at each sequence's last step.
        """
        if isinstance(input, PackedSequence):
            out, states = self._forward(input.data, hx, input.lengths)
            return input._replace(data=out), states
        if _is_packed(input):
            raise TypeError(f"{layer_name(self)}: got a {type(input).__module__}.{type(input).__name__}; pack "
                            f"with luminal.nn.utils.rnn.pack_padded_sequence (its data stays padded, with "
                            f"the lengths)")
        return self._forward(input, hx)

    @layer_forward
    def _forward(self, x, hx, lengths=None):
        name = layer_name(self)
        check_float(name, x)
        feat = f"{self.input_size}"
        layout = f"(N, L, {feat}) or (L, {feat})" if self.batch_first else f"(L, N, {feat}) or (L, {feat})"
        if lengths is not None:
            layout = f"PackedSequence data (L, N, {feat})"
        if x.ndim not in (2, 3) or x.shape[-1] != self.input_size or (lengths is not None and x.ndim != 3):
            raise bad_input(name, layout, x)
        w0 = self.weight_ih_l0
        if x.dtype is not w0.dtype:
            raise op_error(TypeError, name, f"input must have the parameters' dtype {w0.dtype.name}, got "
                           f"{x.dtype.name}", x)
        unbatched = x.ndim == 2
        given = x  # (the errors show the input as the user passed it)
        x = x.unsqueeze(1) if unbatched else x.transpose(0, 1) if self.batch_first and lengths is None else x
        seq_len, batch = x.shape[0], x.shape[1]  # (L, N, F) from here on
        if not is_static(seq_len):
            raise op_error(NotImplementedError, name, f"the sequence length must be static (an int), got "
                           f"{seq_len}: the recurrence is unrolled over time", given)
        if seq_len == 0:
            raise op_error(ValueError, name, "expected a sequence length larger than 0", given)
        states = self._initial_states(name, hx, unbatched, batch, given)
        mask = None
        if lengths is not None:
            mask = step_mask(lengths, seq_len, x.graph).unsqueeze(-1)
            # torch never reads the padding: a NaN there must not reach the (masked) steps' gradients
            x = where(mask, x, 0.0)
        out, finals = self._layers(x, states, seq_len, mask)
        finals = [stack(f, 0) for f in finals]  # h_n (and c_n): (D*num_layers, N, H)
        if unbatched:
            out, finals = out.squeeze(1), [f.squeeze(1) for f in finals]
        elif self.batch_first and lengths is None:
            out = out.transpose(0, 1)
        return (out, tuple(finals)) if self.mode == "LSTM" else (out, finals[0])

    def _initial_states(self, name, hx, unbatched, batch, x):
        """The list of initial states (h, and c for LSTM), each a list over layers*directions of an
        (N, H) tensor or None (zeros)."""
        n_states = 2 if self.mode == "LSTM" else 1
        count = self.num_layers * (2 if self.bidirectional else 1)
        if hx is None:
            return [[None] * count for _ in range(n_states)]
        if self.mode == "LSTM":
            if not isinstance(hx, (tuple, list)) or len(hx) != 2:
                raise op_error(TypeError, name, f"hx must be a tuple (h_0, c_0) of tensors, got "
                               f"{type(hx).__name__}", x)
            given = {"h_0": hx[0], "c_0": hx[1]}
        else:
            given = {"hx": hx}
        check_tensors(name, **given)
        out = []
        for what, t in given.items():
            size = self.hidden_size if what == "c_0" else self._out_size
            want = (count, size) if unbatched else (count, batch, size)
            if unbatched and t.ndim != 2:
                raise op_error(ValueError, name, f"for an unbatched 2-d input, {what} should also be 2-d "
                               f"{shape_str(want)}, got shape {shape_str(t.shape)}", x, t)
            if t.ndim != len(want) or any(a != b for a, b in zip(t.shape, want)):
                feat = "proj_size" if size != self.hidden_size else "hidden_size"
                raise op_error(ValueError, name, f"expected {what} of shape {shape_str(want)} "
                               f"(num_layers * num_directions, N, {feat}), got {shape_str(t.shape)}", x, t)
            if t.dtype is not x.dtype:
                raise op_error(TypeError, name, f"{what} must have the input's dtype {x.dtype.name}, got "
                               f"{t.dtype.name}", x, t)
            t = t.unsqueeze(1) if unbatched else t
            out.append([t[k] for k in range(count)])
        return out

    def _layers(self, x, states, seq_len, mask=None):
        """Every layer over the (L, N, F) sequence ``x`` (``mask``: the (L, N, 1) steps that are data, or
        None: all); returns the last layer's (L, N, D*H) output and the final states (lists over
        layers*directions, torch's order)."""
        g = x.graph
        dirs = 2 if self.bidirectional else 1
        finals = [[] for _ in states]
        for layer in range(self.num_layers):
            outs = []
            for d in range(dirs):
                k = layer * dirs + d
                sfx = f"_l{layer}" + ("_reverse" if d else "")
                seq, last = self._direction(g, x, sfx, [s[k] for s in states], seq_len, bool(d), mask)
                outs.append(seq)
                for f, v in zip(finals, last):
                    f.append(v)
            x = outs[0] if dirs == 1 else cat(outs, -1)
            if self.dropout > 0 and layer < self.num_layers - 1 and self.training:
                x = _dropout(x, self.dropout)
        return x, finals

    def _direction(self, g, x, sfx, init_states, seq_len, reverse, mask=None):
        """One layer in one direction over the (L, N, F) sequence: the input projection of all steps in
        one matmul, then the steps. Returns the (L, N, H) outputs and the final states. With the (L, N, 1)
        bool ``mask``, a step outside it keeps the state and outputs zeros (a packed batch)."""
        w_ih, w_hh = getattr(self, "weight_ih" + sfx).on(g), getattr(self, "weight_hh" + sfx).on(g)
        w_hr = getattr(self, "weight_hr" + sfx).on(g) if self.proj_size else None
        b_hn = None
        gx = x @ w_ih.T  # (L, N, gates*H)
        if self.bias:
            b_ih, b_hh = getattr(self, "bias_ih" + sfx).on(g), getattr(self, "bias_hh" + sfx).on(g)
            if self.mode == "GRU":  # b_hn is multiplied by r: it stays in the step
                hsz = self.hidden_size
                b_hn = b_hh[2 * hsz:]
                gx = gx + (b_ih + b_hh[:2 * hsz].pad([0, hsz]))
            else:
                gx = gx + (b_ih + b_hh)
        h = init_states[0] if init_states[0] is not None else _zeros(x, self._out_size)
        c = None
        if self.mode == "LSTM":
            c = init_states[1] if init_states[1] is not None else _zeros(x, self.hidden_size)
        order = list(reversed(range(seq_len)) if reverse else range(seq_len))
        # (before the steps: see the note above ``_step_input``)
        steps_in = {t: (_step_input(gx, t), None if mask is None else _step_mask(mask, t)) for t in order}
        hs = {}
        for t in order:
            gx_t, m = steps_in[t]
            h_new, c_new = _step(self.mode, gx_t, h, c, w_hh, b_hn, w_hr)
            if m is None:
                h, c, hs[t] = h_new, c_new, h_new
            else:
                h = where(m, h_new, h)
                c = None if c is None else where(m, c_new, c)
                hs[t] = where(m, h_new, 0.0)
        return _stack_steps([hs[t] for t in range(seq_len)]), ([h, c] if self.mode == "LSTM" else [h])

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size != 0:
            s += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if self.batch_first is not False:
            s += f", batch_first={self.batch_first}"
        if self.dropout != 0:
            s += f", dropout={self.dropout}"
        if self.bidirectional is not False:
            s += f", bidirectional={self.bidirectional}"
        return s


def _step(mode, gx, h, c, w_hh, b_hn, w_hr):
    if mode == "LSTM":
        return _lstm_cell(gx, h, c, w_hh, w_hr)
    if mode == "GRU":
        return _gru_cell(gx, h, w_hh, b_hn), None
    return _rnn_cell(gx, h, w_hh, mode == "RNN_RELU"), None


class RNN(RNNBase):
    """torch's ``nn.RNN``: an Elman RNN, ``h_t = tanh(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh)`` (or
    ReLU), over ``num_layers`` layers of one or two directions. ``forward(input, hx=None)`` returns
    ``(output, h_n)``; the sequence length must be static.

    Args:
        input_size: the features of the input. hidden_size: the features of the hidden state.
        num_layers: stacked layers. nonlinearity: "tanh" (default) or "relu".
        bias: use b_ih and b_hh. batch_first: (N, L, H) inputs and outputs.
        dropout: dropout between layers in training mode. bidirectional: also run backward in time.
        proj_size: LSTM's only (0). device: ignored. dtype: the parameters' dtype.
    """

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, nonlinearity: str = "tanh",
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False,
                 proj_size: int = 0, device=None, dtype=None):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"RNN: unknown nonlinearity {nonlinearity!r}; select from 'tanh' or 'relu'")
        super().__init__("RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU", input_size, hidden_size,
                         num_layers, bias, batch_first, dropout, bidirectional, proj_size, device, dtype)
        self.nonlinearity = nonlinearity


class LSTM(RNNBase):
    """torch's ``nn.LSTM``: per step ``i, f, g, o`` gates from ``x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh``
    (in that order in the weights' rows), ``c_t = sigmoid(f) c_{t-1} + sigmoid(i) tanh(g)``,
    ``h_t = sigmoid(o) tanh(c_t)`` (projected, ``h_t W_hr^T``, with ``proj_size``). ``forward(input,
    (h_0, c_0)=None)`` returns ``(output, (h_n, c_n))``; the sequence length must be static.

    Args:
        input_size: the features of the input. hidden_size: the features of the hidden state.
        num_layers: stacked layers. bias: use b_ih and b_hh. batch_first: (N, L, H) inputs and outputs.
        dropout: dropout between layers in training mode. bidirectional: also run backward in time.
        proj_size: if > 0, project h to this many features (``weight_hr_l{k}``); must be < hidden_size.
        device: ignored. dtype: the parameters' dtype.
    """

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False, proj_size: int = 0,
                 device=None, dtype=None):
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                         proj_size, device, dtype)


class GRU(RNNBase):
    """torch's ``nn.GRU``: per step ``r, z`` = sigmoid of the summed projections (rows r, z, n of the
    weights), ``n = tanh(x_t W_in^T + b_in + r * (h_{t-1} W_hn^T + b_hn))``, ``h_t = (1 - z) n + z h_{t-1}``.
    ``forward(input, hx=None)`` returns ``(output, h_n)``; the sequence length must be static.

    Args:
        input_size: the features of the input. hidden_size: the features of the hidden state.
        num_layers: stacked layers. bias: use b_ih and b_hh. batch_first: (N, L, H) inputs and outputs.
        dropout: dropout between layers in training mode. bidirectional: also run backward in time.
        proj_size: LSTM's only (0). device: ignored. dtype: the parameters' dtype.
    """

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False, proj_size: int = 0,
                 device=None, dtype=None):
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                         proj_size, device, dtype)


# the cells ----------------------------------------------------------------------------------------

class RNNCellBase(Module):
    """The common base of the cells (torch's ``nn.RNNCellBase``): parameters ``weight_ih``
    (gates*hidden_size, input_size), ``weight_hh`` (gates*hidden_size, hidden_size), ``bias_ih`` and
    ``bias_hh`` (gates*hidden_size,).

    Args:
        input_size: the features of the input. hidden_size: the features of the state.
        bias: use the biases. num_chunks: the gates (1, 4 or 3). device: ignored. dtype: the parameters' dtype.
    """

    def __init__(self, input_size: int, hidden_size: int, bias: bool, num_chunks: int, device=None, dtype=None):
        super().__init__()
        name = type(self).__name__
        self.input_size = check_int(name, "input_size", input_size, 0)
        self.hidden_size = check_int(name, "hidden_size", hidden_size, 1)
        self.bias = bool(bias)
        self.weight_ih = param((num_chunks * self.hidden_size, self.input_size), dtype)
        self.weight_hh = param((num_chunks * self.hidden_size, self.hidden_size), dtype)
        if self.bias:
            self.bias_ih = param((num_chunks * self.hidden_size,), dtype)
            self.bias_hh = param((num_chunks * self.hidden_size,), dtype)
        else:
            self.bias_ih = self.bias_hh = None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Re-initialise as torch does: every weight and bias from U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))."""
        _reset_uniform(self, self.hidden_size)

    def _check(self, name, x, hx: dict):
        """Check the input and the given states; returns (x, states as (N, H) tensors or None, unbatched)."""
        check_float(name, x)
        if x.ndim not in (1, 2) or x.shape[-1] != self.input_size:
            raise bad_input(name, f"(N, {self.input_size}) or ({self.input_size},)", x)
        if x.dtype is not self.weight_ih.dtype:
            raise op_error(TypeError, name, f"input must have the parameters' dtype {self.weight_ih.dtype.name}, "
                           f"got {x.dtype.name}", x)
        unbatched = x.ndim == 1
        given = x  # (the errors show the input as the user passed it)
        x = x.unsqueeze(0) if unbatched else x
        want = (x.shape[0], self.hidden_size)
        states = []
        for what, t in hx.items():
            if t is None:
                states.append(None)
                continue
            check_tensors(name, **{what: t})
            if t.ndim != x.ndim - (1 if unbatched else 0) or t.shape[-1] != self.hidden_size or \
                    (not unbatched and t.shape[0] != want[0]):
                raise op_error(ValueError, name, f"expected {what} of shape "
                               f"{shape_str(want[1:] if unbatched else want)}, got {shape_str(t.shape)}", given, t)
            if t.dtype is not x.dtype:
                raise op_error(TypeError, name, f"{what} must have the input's dtype {x.dtype.name}, got "
                               f"{t.dtype.name}", given, t)
            states.append(t.unsqueeze(0) if unbatched else t)
        return x, states, unbatched

    def _projection(self, x, gru: bool = False):
        """x @ W_ih^T + b_ih (+ b_hh, all of it but GRU's b_hn), and b_hn for GRU."""
        g = x.graph
        gx = x @ self.weight_ih.on(g).T
        if not self.bias:
            return gx, None
        b_ih, b_hh = self.bias_ih.on(g), self.bias_hh.on(g)
        if gru:
            hsz = self.hidden_size
            return gx + (b_ih + b_hh[:2 * hsz].pad([0, hsz])), b_hh[2 * hsz:]
        return gx + (b_ih + b_hh), None

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        nl = getattr(self, "nonlinearity", "tanh")
        return s if nl == "tanh" else s + f", nonlinearity={nl}"


class RNNCell(RNNCellBase):
    """torch's ``nn.RNNCell``: ``h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh)`` (or ReLU).
    ``forward(input, hx=None)``: input (N, input_size) or (input_size,), hx shaped like the output
    (N, hidden_size) or (hidden_size,), zeros when None; returns h'.

    Args:
        input_size: the features of the input. hidden_size: the features of the state.
        bias: use the biases. nonlinearity: "tanh" or "relu". device: ignored. dtype: the parameters' dtype.
    """

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, nonlinearity: str = "tanh",
                 device=None, dtype=None):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"RNNCell: unknown nonlinearity {nonlinearity!r}; select from 'tanh' or 'relu'")
        super().__init__(input_size, hidden_size, bias, 1, device, dtype)
        self.nonlinearity = nonlinearity

    @layer_forward
    def forward(self, input, hx=None):  # noqa: A002 - torch's name
        """One step.

        Args:
            input: (N, input_size) or (input_size,).
            hx: (N, hidden_size) or (hidden_size,); None: zeros.

        Returns:
            h', shaped as hx.
        """
        name = layer_name(self)
        x, (h,), unbatched = self._check(name, input, {"hx": hx})
        gx, _ = self._projection(x)
        h = _zeros(x, self.hidden_size) if h is None else h
        out = _rnn_cell(gx, h, self.weight_hh.on(x.graph), self.nonlinearity == "relu")
        return out.squeeze(0) if unbatched else out


class LSTMCell(RNNCellBase):
    """torch's ``nn.LSTMCell``: one LSTM step (gates i, f, g, o). ``forward(input, hx=None)``: input
    (N, input_size) or (input_size,), hx a tuple (h, c) shaped (N, hidden_size) or (hidden_size,), zeros
    when None; returns (h', c').

    Args:
        input_size: the features of the input. hidden_size: the features of the state.
        bias: use the biases. device: ignored. dtype: the parameters' dtype.
    """

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 4, device, dtype)

    @layer_forward
    def forward(self, input, hx=None):  # noqa: A002 - torch's name
        """One step.

        Args:
            input: (N, input_size) or (input_size,).
            hx: a tuple (h, c), each (N, hidden_size) or (hidden_size,); None: zeros.

        Returns:
            (h', c').
        """
        name = layer_name(self)
        if hx is None:
            hx = (None, None)
        if not isinstance(hx, (tuple, list)) or len(hx) != 2:
            raise op_error(TypeError, name, f"hx must be a tuple (h, c) of tensors, got {type(hx).__name__}", input)
        x, (h, c), unbatched = self._check(name, input, {"h": hx[0], "c": hx[1]})
        gx, _ = self._projection(x)
        h = _zeros(x, self.hidden_size) if h is None else h
        c = _zeros(x, self.hidden_size) if c is None else c
        h, c = _lstm_cell(gx, h, c, self.weight_hh.on(x.graph))
        return (h.squeeze(0), c.squeeze(0)) if unbatched else (h, c)


class GRUCell(RNNCellBase):
    """torch's ``nn.GRUCell``: one GRU step (gates r, z, n; ``n = tanh(x W_in^T + b_in + r * (h W_hn^T + b_hn))``,
    ``h' = (1 - z) n + z h``). ``forward(input, hx=None)``: input (N, input_size) or (input_size,), hx
    (N, hidden_size) or (hidden_size,), zeros when None; returns h'.

    Args:
        input_size: the features of the input. hidden_size: the features of the state.
        bias: use the biases. device: ignored. dtype: the parameters' dtype.
    """

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 3, device, dtype)

    @layer_forward
    def forward(self, input, hx=None):  # noqa: A002 - torch's name
        """One step.

        Args:
            input: (N, input_size) or (input_size,).
            hx: (N, hidden_size) or (hidden_size,); None: zeros.

        Returns:
            h', shaped as hx.
        """
        name = layer_name(self)
        x, (h,), unbatched = self._check(name, input, {"hx": hx})
        gx, b_hn = self._projection(x, gru=True)
        h = _zeros(x, self.hidden_size) if h is None else h
        out = _gru_cell(gx, h, self.weight_hh.on(x.graph), b_hn)
        return out.squeeze(0) if unbatched else out


__all__ = ["GRU", "LSTM", "RNN", "GRUCell", "LSTMCell", "RNNBase", "RNNCell", "RNNCellBase"]
