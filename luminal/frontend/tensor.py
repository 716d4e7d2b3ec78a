"""GraphTensor: a lazy tensor = a graph node read through a view.

Building never computes. Movement ops return a new GraphTensor over the same node with a new
:class:`View`; when the view cannot express a movement, an explicit ``Copy`` node is inserted.
Arithmetic, reductions and the rest live in ``ops/`` and are attached here as methods.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, NamedTuple, NoReturn, TypeVar

from luminal.core import dtype as dt
from luminal.core.errors import check_number, op_error, outermost_op, renamed, user_frame, where
from luminal.core.symbolic import Dim, dims, exact_div, is_static, nonnegative, prod, shape_str
from luminal.core.view import View
from luminal.frontend.eager import COMPILE_TO_READ, TRAIN_STEP, eager_only

_F = TypeVar("_F", bound=Callable[..., Any])
if TYPE_CHECKING:
    _InPlace = Callable[..., "GraphTensor"]  # an in-place method (``ops/inplace.py``): returns its tensor
    _RandomFill = Callable[..., "GraphTensor"]  # an in-place random fill (``inplace.RANDOM``): returns its tensor


def scalar_as_1d(op: str, dims=("dim",), tensors=(), result=None) -> Callable[[_F], _F]:
    """Decorator: an op taking a dim runs on 0-d operands as torch runs it.

    torch treats a 0-d tensor as a single element along dim 0 (or -1): ``softmax(0)`` of a scalar is
    1, ``cumsum(0)`` the scalar itself, ``transpose(0, 0)`` and ``squeeze(0)`` leave it alone, and
    ``gather``/``scatter`` take a 0-d input or index as a 1-element one. The ops are written for real
    dims (they read ``shape[dim]``), so rather than give each a 0-d branch this runs them on a view:
    when the first argument, or a tensor argument named in ``tensors``, is 0-d, those 0-d tensors are
    viewed as ``(1,)``; if the first argument was 0-d, the arguments named in ``dims`` (ints, or
    sequences of ints; None is left alone) are checked against it (dim in [-1, 0], as torch) and made
    0. The op runs, and its result is viewed back: by ``result(out, args)`` (``args`` the original
    arguments by name) when given, else as 0-d when the first argument was 0-d. Operands that are not
    0-d take the op's own path untouched (one scan of the arguments)."""

    def deco(fn: _F) -> _F:
        sig = inspect.signature(fn)
        first = next(iter(sig.parameters))

        @functools.wraps(fn)
        def run(*args, **kwargs):
            if not any(isinstance(v, GraphTensor) and not v.layout.shape for v in (*args, *kwargs.values())):
                return fn(*args, **kwargs)
            bound = sig.bind(*args, **kwargs)
            a = bound.arguments
            orig = dict(a)
            x = a.get(first)
            x0 = isinstance(x, GraphTensor) and x.ndim == 0
            lifted = False
            for name in (first, *tensors):
                t = a.get(name)
                if isinstance(t, GraphTensor) and t.ndim == 0:
                    a[name], lifted = t.reshape(1), True
            if not lifted:
                return fn(*args, **kwargs)
            if x0:
                for name in dims:
                    if a.get(name) is not None:
                        a[name] = _dims_to_zero(a[name], x, op)
            out = fn(*bound.args, **bound.kwargs)
            if result is not None:
                return result(out, orig)
            return out.reshape(()) if x0 else out

        return run  # type: ignore[return-value]  # functools.wraps keeps fn's signature

    return deco


def _needs_values(t: GraphTensor, op: str, why: str) -> Exception:
    """The error for a Python protocol that needs ``t``'s values now (``bool(t)``, ``float(t)``,
    ``f"{t:.2f}"``, ``pickle``): a graph's tensor has none until a compiled program runs, and a tensor made
    outside any graph (a host tensor) gives them by ``np.asarray(t)``; ``why`` names the lazy form."""
    how = ("a tensor made outside any graph gives its values by np.asarray(t)" if getattr(t.graph, "host", False)
           else COMPILE_TO_READ)
    return eager_only(op, f"{how}. {why}", t)


def _augmented(symbol: str, method: str) -> Callable[..., GraphTensor]:
    """``x <op>= y``: the in-place method ``method`` (``x.add_(y)``), whose errors name ``symbol``."""

    def op(self: GraphTensor, other) -> GraphTensor:
        with renamed(symbol):
            return getattr(self, method)(other)

    op.__name__ = op.__qualname__ = f"__i{method.rstrip('_')}__"
    op.__doc__ = (f"``x {symbol} y``: ``x.{method}(y)``, torch's in-place rules (the handle keeps its dtype and "
                  f"shape, and is rebound: ``frontend/ops/inplace.py``).")
    return op


def _dims_to_zero(d, x: GraphTensor, op: str):
    """Every dim in ``d`` (an int or nested sequences of ints) checked for the 0-d ``x`` and made 0."""
    if isinstance(d, (tuple, list)):
        return type(d)(_dims_to_zero(e, x, op) for e in d)
    x._axis(d, op)
    return 0


class GraphTensor:
    """A lazy tensor: a node of a :class:`Graph` read through a view (shape, strides, offset, mask).

    Building never computes: ops and operators (``x + 1``, ``x @ w``, ``x.relu()``, ``x[0]``) add
    nodes or make views, with torch's names, signatures and semantics; ``lm.compile`` turns outputs
    into a program over numpy arrays. A numpy array operand becomes a constant.

    Args:
        graph: the Graph the node belongs to.
        node: the node read.
        layout: the View through which it is read.
        origin: where in user code it was made (for error messages; default: the caller's frame).
    """

    __slots__ = ("graph", "node", "layout", "origin")
    # (set by ``ops/__init__``, which imports this module: ``ops.movement.pad_mode_dim``, what ``pad``'s
    # reflect / replicate / circular modes are, as ``F.pad``'s)
    _pad_mode_dim: Callable[..., GraphTensor]
    __hash__ = object.__hash__
    __array_ufunc__ = None  # ``ndarray + tensor``: numpy defers to ``__radd__`` (and its checks)

    def __init__(self, graph, node, layout: View, origin=None):
        self.graph, self.node, self.layout = graph, node, layout
        self.origin = origin or user_frame()

    # basic properties -------------------------------------------------------------------------
    @property
    def shape(self) -> tuple:
        """The shape: a tuple of ints and symbolic dims (``Sym``), as torch's ``Tensor.shape``."""
        return self.layout.shape

    @property
    def dtype(self) -> dt.DType:
        """The element type (an lm dtype: ``lm.float32``, ``lm.int32``, ...)."""
        return self.node.dtype

    @property
    def ndim(self) -> int:
        """The number of dims."""
        return len(self.layout.shape)

    def dim(self) -> int:
        """The number of dims (torch ``Tensor.dim()``, the same as ``ndim``)."""
        return self.ndim

    @property
    def device(self) -> str:
        """``"cpu"``: a compiled program takes and returns host (numpy) arrays whatever backend runs it,
        and the backend is chosen when compiling (``lm.compile(..., backend=...)``), not per tensor. torch
        code passes ``x.device`` on (``torch.arange(t, device=x.device)``, ``y.to(x.device)``), and
        those accept ``"cpu"``."""
        return "cpu"

    def size(self, d: int | None = None) -> tuple | Dim:
        """torch ``Tensor.size``: the shape, or the size of one dim.

        Args:
            d: a dim (negative counts from the end); None for the whole shape.

        Returns:
            The shape tuple, or the dim's size (an int or a symbolic dim).
        """
        return self.shape if d is None else self.shape[self._axis(d, "size", scalar=False)]

    def numel(self) -> Dim:
        """The number of elements: the product of the shape (symbolic when a dim is)."""
        return prod(self.shape)

    def __len__(self) -> int:
        """The size of the first dim, as torch's; a 0-d tensor, or a symbolic first dim (known only when
        the program runs), is a TypeError naming the line (``x.shape[0]`` is the symbolic size)."""
        return self._rows("len", "len() of")

    def __iter__(self) -> Iterator[GraphTensor]:
        """The rows ``x[0], x[1], ...`` (views), as torch's; a 0-d tensor or a symbolic first dim is a
        TypeError naming the line, as ``len``."""
        return (self[i] for i in range(self._rows("iter", "iteration over")))

    def _rows(self, op: str, what: str) -> int:
        if not self.shape:
            raise op_error(TypeError, op, f"{what} a 0-d tensor", self)
        n = self.shape[0]
        if not is_static(n):
            raise op_error(TypeError, op, f"{what} a tensor whose first dim {n} is symbolic: its size is known only "
                           f"when the program runs (x.shape[0] is the symbolic size; index rows with x[i])", self)
        return n

    def __repr__(self) -> str:
        return f"GraphTensor({shape_str(self.shape)}, {self.dtype.name}, node={self.node.op}#{self.node.id})"

    # Python's protocols that need values ----------------------------------------------------------
    # A lazy tensor has none while the graph is built, so each fails naming the line and the lazy form,
    # where torch's would read the values (and, for a one-element tensor, silently compare them).
    def __bool__(self) -> NoReturn:
        raise _needs_values(self, "bool", "Python asks for one truth value in `if t:`, `while t:`, `t and u`, "
                            "`not t`, `a < t < b`, `max(t, u)`, `sorted(...)` and `t in [tensors]`; the lazy forms "
                            "are lm.where(cond, a, b), t.any(), t.all(), lm.maximum(t, u) and lm.sort(t)")

    def __contains__(self, value) -> NoReturn:
        raise _needs_values(self, "in", "`v in t` needs t's values; (t == v).any() is the lazy form")

    def __int__(self) -> NoReturn:
        raise _needs_values(self, "int", "int(t) needs the value; t.int() is the lazy cast")

    def __float__(self) -> NoReturn:
        raise _needs_values(self, "float", "float(t) needs the value, and so do the math module's functions "
                            "(math.floor(t), math.sqrt(t)); t.float() is the lazy cast, t.floor() and lm.sqrt(t) "
                            "the lazy ops")

    def __complex__(self) -> NoReturn:
        raise _needs_values(self, "complex", "complex(t) needs the value")

    def __format__(self, spec: str) -> str:
        """``str(t)`` for an empty spec (``f"{t}"``); a number's spec (``f"{loss:.4f}"``) needs the value."""
        if not spec:
            return str(self)
        raise _needs_values(self, "format", f"The format spec {spec!r} needs the value; format the compiled array")

    # (no ``__index__``: ``hasattr(v, "__index__")`` marks an integer, and a tensor is not one; ``range(t)``
    # and ``seq[t]`` fail with Python's "'GraphTensor' object cannot be interpreted as an integer")

    # copies and pickles ------------------------------------------------------------------------------
    def __copy__(self) -> GraphTensor:
        """A new handle on the same value: an in-place method on either rebinds only that one."""
        return GraphTensor(self.graph, self.node, self.layout, self.origin)

    def __deepcopy__(self, memo) -> GraphTensor:
        """A new handle on the same value, in the same graph (as ``copy.copy``). The graph is not copied:
        a copy would hold copies of the Parameters it reads, so a program compiled from it would keep
        their old values, and its tensors could not be combined with the original's."""
        return self.__copy__()

    def __reduce_ex__(self, protocol) -> str | tuple:
        """A tensor made outside any graph pickles with its host graph of constants (it has values); a
        graph's tensor is refused: it has no values, and its graph holds copies of the Parameters it reads."""
        if getattr(self.graph, "host", False):
            return object.__reduce_ex__(self, protocol)
        raise _needs_values(self, "pickle", "Pickle the arrays a compiled program returns, or a module's "
                            "state_dict() for its parameters")

    # augmented assignment: torch's in-place ops (``ops/inplace.py``: the tensor keeps its dtype and shape,
    # so ``int_x += 1.5`` and ``x += wider`` are refused and ``half_x += float_y`` stays float16). ``@=`` is
    # left to Python's ``x = x @ w``, as torch defines no in-place matmul.
    __iadd__ = _augmented("+=", "add_")
    __isub__ = _augmented("-=", "sub_")
    __imul__ = _augmented("*=", "mul_")
    __itruediv__ = _augmented("/=", "div_")
    __ifloordiv__ = _augmented("//=", "floor_divide_")
    __imod__ = _augmented("%=", "remainder_")
    __ipow__ = _augmented("**=", "pow_")
    __iand__ = _augmented("&=", "bitwise_and_")
    __ior__ = _augmented("|=", "bitwise_or_")
    __ixor__ = _augmented("^=", "bitwise_xor_")
    __ilshift__ = _augmented("<<=", "bitwise_left_shift_")
    __irshift__ = _augmented(">>=", "bitwise_right_shift_")

    # eager-PyTorch habits: an error naming the lazy way (eager.py) ------------------------------------
    def backward(self, *args, **kwargs) -> NoReturn:
        """torch's ``loss.backward()``; raises :class:`~luminal.frontend.eager.EagerOnlyError`. Gradients
        are graph outputs here, never stored on tensors or parameters: ``train.grad(loss, params)``
        builds them, ``train.compile_step(loss, optimizer)`` builds them with the update."""
        raise eager_only("backward", "gradients are graph outputs in luminal, not stored on tensors: "
                         "train.grad(loss, params) builds them (compile them with lm.compile); "
                         + TRAIN_STEP, self)

    def item(self) -> NoReturn:
        """torch's ``x.item()``; raises :class:`~luminal.frontend.eager.EagerOnlyError`: the tensor
        has no value until compiled and run (``lm.compile([x])`` returns numpy arrays)."""
        raise eager_only("item", COMPILE_TO_READ + " (a.item())", self)

    def numpy(self) -> NoReturn:
        """torch's ``x.numpy()``; raises :class:`~luminal.frontend.eager.EagerOnlyError`: the tensor
        has no value until compiled and run (``lm.compile([x])`` returns numpy arrays)."""
        raise eager_only("numpy", COMPILE_TO_READ, self)

    def tolist(self) -> NoReturn:
        """torch's ``x.tolist()``; raises :class:`~luminal.frontend.eager.EagerOnlyError`: the tensor
        has no value until compiled and run (``lm.compile([x])`` returns numpy arrays)."""
        raise eager_only("tolist", COMPILE_TO_READ + " (a.tolist())", self)

    def _with_view(self, view: View) -> GraphTensor:
        return GraphTensor(self.graph, self.node, view)

    def _axis(self, axis: int, op: str, ndim: int | None = None, scalar: bool = True) -> int:
        """``axis`` made non-negative. As in torch, a 0-d tensor takes dim 0 or -1 (ops that
        accept that run it as one element, ``scalar_as_1d``); ``scalar=False`` for ops that need a
        real dim (split, unflatten), so that a 0-d input fails naming the op, not as a bare IndexError."""
        n = self.ndim if ndim is None else ndim
        if not isinstance(axis, int) or isinstance(axis, bool):
            raise op_error(TypeError, op, f"dim must be an int, got {axis!r}", self)
        if n == 0 and not scalar:
            raise op_error(ValueError, op, "needs a tensor with at least 1 dim, got a 0-d one", self)
        if not -max(n, 1) <= axis < max(n, 1):
            raise op_error(ValueError, op, f"dim {axis} is out of range for a {n}-d tensor", self)
        return axis % max(n, 1)

    def _axes(self, axes, op: str) -> list[int]:
        """Each of ``axes`` made non-negative (``_axis``), in order; a dim named twice is a ValueError, as
        torch's "dim appears multiple times" (flipping, squeezing or reducing a dim twice is a mistake)."""
        out = [self._axis(a, op) for a in axes]
        for i, a in enumerate(out):
            if a in out[:i]:
                raise op_error(ValueError, op, f"dim {a} appears multiple times in the dims {tuple(axes)}", self)
        return out

    # movement ---------------------------------------------------------------------------------
    def contiguous(self) -> GraphTensor:
        """Materialise the view (a Copy node); a no-op when the view is already the identity."""
        if self.layout.is_contiguous():
            return self
        return self.graph.tensor(self.graph.add("Copy", (self,), None, self.dtype, self.shape))

    def detach(self) -> GraphTensor:
        """The same values with no gradient flowing back through them (torch ``detach``). The user's own
        (not an op's, which marks a zero gradient) is remembered: a parameter read only through it has no
        gradient at all (``train.autograd.has_grad``), so an optimizer skips it, as torch's."""
        if outermost_op() is None:  # (a node of its own, not an op's detach of the same tensor)
            return self.graph.user_stop(self)
        return self.graph.tensor(self.graph.add("Copy", (self,), "detach", self.dtype, self.shape))

    def reshape(self, *shape) -> GraphTensor:
        """torch ``Tensor.reshape``: the same elements in a new shape (a view when the layout allows,
        else after a Copy).

        Args:
            shape: the new shape, as ints (``reshape(2, 3)``) or one sequence; one entry may be -1,
                inferred from the element count.
        """
        n = self.numel()
        shape = self._infer_minus_one(_shape_args(shape), "reshape", n)
        if prod(shape) != n:
            raise op_error(ValueError, "reshape", f"cannot reshape to {shape_str(shape)}: "
                           f"{n} elements vs {prod(shape)}", self)
        v = self.layout.reshape(shape)
        if v is None:
            return self.contiguous().reshape(shape)
        return self._with_view(v)

    def view(self, *shape) -> GraphTensor:
        """torch ``Tensor.view``: the same as ``reshape`` here (a lazy graph has no storage to share
        or refuse to share).

        Args:
            shape: the new shape, as ints or one sequence; one entry may be -1.
        """
        return self.reshape(*shape)

    def _infer_minus_one(self, shape, op, numel=None):
        """``shape`` as Dims, its one -1 (if any) inferred so that it holds ``numel`` elements (the
        tensor's by default)."""
        shape = list(dims(op, shape, self))
        holes = [i for i, d in enumerate(shape) if isinstance(d, int) and d == -1]
        if len(holes) > 1:
            raise op_error(ValueError, op, "only one dim can be -1", self)
        if any(isinstance(d, int) and d < -1 for d in shape):
            raise op_error(ValueError, op, f"invalid shape {shape_str(shape)}", self)
        if holes:
            numel = self.numel() if numel is None else numel
            known = prod(d for i, d in enumerate(shape) if i != holes[0])
            q = exact_div(numel, known) if not (isinstance(known, int) and known == 0) else None
            if q is None:
                raise op_error(ValueError, op, f"shape {shape_str(shape)} is invalid for {numel} elements", self)
            shape[holes[0]] = q
        return tuple(shape)

    def permute(self, *dims) -> GraphTensor:
        """torch ``Tensor.permute``: the dims reordered (a view).

        Args:
            dims: a permutation of the dims, as ints or one sequence.
        """
        dims = [self._axis(d, "permute") for d in _shape_args(dims)]
        if sorted(dims) != list(range(self.ndim)):
            raise op_error(ValueError, "permute", f"dims {tuple(dims)} are not a permutation of "
                           f"{self.ndim} dims", self)
        return self._with_view(self.layout.permute(dims))

    @scalar_as_1d("transpose", dims=("d0", "d1"))
    def transpose(self, d0: int, d1: int) -> GraphTensor:
        """torch ``Tensor.transpose`` (also ``swapaxes``): dims ``d0`` and ``d1`` swapped (a view).

        Args:
            d0: the first dim.
            d1: the second dim.
        """
        order = list(range(self.ndim))
        a, b = self._axis(d0, "transpose"), self._axis(d1, "transpose")
        order[a], order[b] = order[b], order[a]
        return self._with_view(self.layout.permute(order)) if self.ndim else self

    swapaxes = transpose

    @property
    def T(self) -> GraphTensor:
        """All dims reversed (torch ``Tensor.T``; a 0-d or 1-d tensor is returned as is)."""
        return self.permute(*reversed(range(self.ndim))) if self.ndim else self

    @property
    def mT(self) -> GraphTensor:
        """The last two dims swapped (torch ``Tensor.mT``): a batch of matrices transposed."""
        return self.transpose(-2, -1)

    def expand(self, *sizes) -> GraphTensor:
        """torch ``Tensor.expand``: size-1 dims broadcast to ``sizes`` without copying (a view);
        new leading dims may be added.

        Args:
            sizes: the target shape, as ints or one sequence; -1 keeps a dim's size.
        """
        sizes = _shape_args(sizes)
        if len(sizes) < self.ndim:
            raise op_error(ValueError, "expand", f"target {shape_str(sizes)} has fewer dims than the tensor", self)
        sizes = dims("expand", sizes, self)
        lead = len(sizes) - self.ndim
        t = self.reshape((1,) * lead + self.shape) if lead else self
        target = []
        for i, (d, n) in enumerate(zip(t.shape, sizes)):
            if isinstance(n, int) and n < -1:
                raise op_error(ValueError, "expand", f"negative size {n} for dim {i}", self)
            if isinstance(n, int) and n == -1:
                if i < lead:
                    raise op_error(ValueError, "expand", "-1 is not allowed for a new leading dim", self)
                n = d
            if d != n and not (is_static(d) and d == 1):
                raise op_error(ValueError, "expand", f"dim {i} of size {d} cannot expand to {n}", self)
            target.append(n)
        return t._with_view(t.layout.expand(tuple(target)))

    def broadcast_to(self, shape) -> GraphTensor:
        """torch ``Tensor.broadcast_to``: ``expand`` to ``shape``.

        Args:
            shape: the target shape.
        """
        return self.expand(*_shape_args((shape,)))

    def t(self) -> GraphTensor:
        """torch ``Tensor.t()``: a 2-d tensor transposed (a view); a 0-d or 1-d tensor is returned as is,
        and a tensor of more dims is an error (``mT`` swaps the last two, ``T`` reverses all)."""
        if self.ndim > 2:
            raise op_error(ValueError, "t", f"expects a tensor with <= 2 dims, got {self.ndim} (use mT or "
                           "transpose(-2, -1) for a batch of matrices)", self)
        return self.transpose(0, 1) if self.ndim == 2 else self

    def view_as(self, other) -> GraphTensor:
        """torch ``Tensor.view_as``: ``view(other.shape)``, the same elements in ``other``'s shape.

        Args:
            other: the tensor whose shape is taken (its values are not read).
        """
        return self.reshape(_shape_of(other, "view_as", self))

    def reshape_as(self, other) -> GraphTensor:
        """torch ``Tensor.reshape_as``: ``reshape(other.shape)``, the same elements in ``other``'s shape.

        Args:
            other: the tensor whose shape is taken (its values are not read).
        """
        return self.reshape(_shape_of(other, "reshape_as", self))

    def expand_as(self, other: GraphTensor) -> GraphTensor:
        """torch ``Tensor.expand_as``: ``expand`` to ``other``'s shape.

        Args:
            other: the tensor whose shape is taken.
        """
        return self.expand(*other.shape)

    @scalar_as_1d("squeeze")
    def squeeze(self, dim=None) -> GraphTensor:
        """torch ``Tensor.squeeze``: size-1 dims removed (all of them, or those named; a named dim
        whose size is not 1 is kept, as torch). A symbolic dim's size is known only when the program
        runs, and the result's rank cannot wait for it: ``squeeze()`` keeps symbolic dims (torch would
        drop one bound to 1), and naming one is a ValueError (index it, ``x[0]``, or reshape instead).

        Args:
            dim: None, a dim, or a sequence of dims.
        """
        if dim is None:
            dims = [i for i, d in enumerate(self.shape) if is_static(d) and d == 1]
        else:
            dims = self._axes(dim if isinstance(dim, (tuple, list)) else (dim,), "squeeze")
            for d in dims:
                if not is_static(self.shape[d]):
                    raise op_error(ValueError, "squeeze", f"dim {d} has the symbolic size {self.shape[d]}: whether "
                                   f"it is 1 is known only when the program runs (torch squeezes it then); index "
                                   f"it (x[0]) or reshape instead", self)
            dims = [d for d in dims if self.shape[d] == 1]
        return self.reshape(tuple(d for i, d in enumerate(self.shape) if i not in dims))

    def unsqueeze(self, dim: int) -> GraphTensor:
        """torch ``Tensor.unsqueeze``: a size-1 dim inserted at ``dim``.

        Args:
            dim: the position of the new dim, in ``[-ndim - 1, ndim]``.
        """
        d = self._axis(dim, "unsqueeze", self.ndim + 1)
        return self.reshape(self.shape[:d] + (1,) + self.shape[d:])

    def flatten(self, start_dim: int = 0, end_dim: int = -1) -> GraphTensor:
        """torch ``Tensor.flatten``: dims ``start_dim`` to ``end_dim`` merged into one (a 0-d tensor
        becomes 1-d).

        Args:
            start_dim: the first dim merged (default 0).
            end_dim: the last dim merged (default -1).
        """
        if self.ndim == 0:
            return self.reshape(1)
        s, e = self._axis(start_dim, "flatten"), self._axis(end_dim, "flatten")
        if s > e:
            raise op_error(ValueError, "flatten", "start_dim comes after end_dim", self)
        return self.reshape(self.shape[:s] + (prod(self.shape[s:e + 1]),) + self.shape[e + 1:])

    def unflatten(self, dim: int, sizes) -> GraphTensor:
        """torch ``Tensor.unflatten``: dim ``dim`` split into ``sizes``.

        Args:
            dim: the dim to split.
            sizes: the new dims, multiplying to the dim's size; one may be -1.
        """
        d = self._axis(dim, "unflatten", scalar=False)
        sub = self._infer_minus_one(sizes, "unflatten", numel=self.shape[d])
        if prod(sub) != self.shape[d]:
            raise op_error(ValueError, "unflatten", f"sizes {shape_str(sub)} do not multiply to dim {d}'s size "
                           f"{self.shape[d]}", self)
        return self.reshape(self.shape[:d] + sub + self.shape[d + 1:])

    def flip(self, *args, dims=None) -> GraphTensor:
        """torch ``Tensor.flip``: reverse the order of elements along the given dims (a view).

        Args:
            dims: the dims, as ints (``flip(0, 1)``), one sequence (``flip((0, 1))``) or by keyword
                (``flip(dims=(0, 1))``, ``flip(dims=0)``).
        """
        if args and dims is not None:
            raise op_error(TypeError, "flip", "give the dims by position or as dims=, not both", self)
        if dims is None:
            dims = _shape_args(args)
        return self._flip(tuple(dims) if isinstance(dims, (tuple, list)) else (dims,))

    @scalar_as_1d("flip", dims=("dims",))
    def _flip(self, dims) -> GraphTensor:
        v = self.layout
        for d in self._axes(dims, "flip"):
            v = v.flip(d)
        return self._with_view(v)

    def pad(self, pads, value=0.0, mode: str = "constant") -> GraphTensor:
        """torch ``F.pad``: ``pads`` pairs ``(before, after)`` from the last dim backwards.

        Args:
            pads: the amounts, two per padded dim, last dim first; negative amounts crop.
            value: the fill value of ``mode="constant"`` (None: 0, as torch).
            mode: ``"constant"`` (a view: out-of-range reads give ``value``), ``"reflect"`` (mirror
                without repeating the edge; each amount below the dim's size), ``"replicate"`` (repeat
                the edge element) or ``"circular"`` (wrap around; each amount at most the dim's size):
                torch's rules, negative amounts included, on static or symbolic dims
                (``ops.movement.pad_mode_dim``, which ``F.pad`` uses too).
        """
        pads = dims("pad", pads, self)
        if len(pads) % 2 or len(pads) // 2 > self.ndim:
            raise op_error(ValueError, "pad", f"pads {pads} must be pairs for at most {self.ndim} dims", self)
        if mode != "constant":
            if mode not in ("reflect", "replicate", "circular"):
                raise op_error(ValueError, "pad", f"mode must be 'constant', 'reflect', 'replicate' or "
                               f"'circular', got {mode!r}", self)
            if value not in (None, 0, 0.0):
                raise op_error(ValueError, "pad", f"mode {mode!r} takes no fill value, got {value!r}", self)
            if any(not is_static(p) for p in pads):
                raise op_error(ValueError, "pad", f"mode {mode!r} takes int amounts, got {pads}", self)
            t = self
            for k in range(len(pads) // 2):
                if pads[2 * k] or pads[2 * k + 1]:
                    t = GraphTensor._pad_mode_dim(t, self.ndim - 1 - k, int(pads[2 * k]), int(pads[2 * k + 1]), mode)
            return t
        value = _pad_value(check_number("pad", "value", 0.0 if value is None else value, self), self)
        t = self
        for k in range(len(pads) // 2):
            d = self.ndim - 1 - k
            t = t._pad_dim(d, pads[2 * k], pads[2 * k + 1], value)
        return t

    def _pad_dim(self, d, before, after, value) -> GraphTensor:
        t = self
        if (is_static(before) and before < 0) or (is_static(after) and after < 0):
            lo = -before if is_static(before) and before < 0 else 0
            hi = t.shape[d] + (after if is_static(after) and after < 0 else 0)
            if is_static(hi - lo) and hi - lo < 0:
                raise op_error(ValueError, "pad", f"crops {lo + t.shape[d] - hi} from dim {d} of size "
                               f"{t.shape[d]}", self)
            t = t._slice_dim(d, lo, hi - lo, 1)
            before = 0 if is_static(before) and before < 0 else before
            after = 0 if is_static(after) and after < 0 else after
        if (is_static(before) and before == 0) and (is_static(after) and after == 0):
            return t
        v = t.layout.pad_dim(d, before, after, value)
        if v is None:
            t = t.contiguous()
            v = t.layout.pad_dim(d, before, after, value)
        return t._with_view(v)


    def _slice_dim(self, d, start, count, step) -> GraphTensor:
        return self._with_view(self.layout.slice(d, start, count, step))

    def _requires(self, need, size, op: str, what: str) -> None:
        """Record that ``need >= 0`` must hold when a program runs (a symbolic slice within its dim:
        ``16 - T``); ``size`` is the size of the dim the slice makes, by which a program that reads the
        slice is found (``graph.requirements``; the compiled call checks it before any work and fails
        with ``what``, the op and the user's line; the first of several alike is kept). Nothing is recorded
        when every binding satisfies it; a static violation fails now."""
        if nonnegative(need):
            return
        if is_static(need):
            raise op_error(IndexError, op, what, self)
        message = f"{op}: {what}, at {where(user_frame())}"
        self.graph.requirements.setdefault((self.node.id, size, size), (need, message))

    @scalar_as_1d("unfold", dims=("dimension",), result=lambda out, args: out.reshape(out.shape[1:]))
    def unfold(self, dimension: int, size: int, step: int) -> GraphTensor:
        """torch ``Tensor.unfold``: sliding windows as a new last dim (a pure view). A 0-d tensor
        gives just the window, as torch (``scalar_as_1d``, whose one-window count dim is dropped)."""
        d = self._axis(dimension, "unfold")
        n = self.shape[d]
        if size < 0 or step <= 0 or (is_static(n) and size > n):
            raise op_error(ValueError, "unfold", f"size {size} / step {step} invalid for dim of size {n}", self)
        v = self.layout.unfold(d, size, step)
        t = self
        if v is None:
            t = self.contiguous()
            v = t.layout.unfold(d, size, step)
        if not is_static(n):  # the window count, v.shape[d], is 0 (not negative) when size > n
            self.graph.requirements[(t.node.id, v.shape[d], size)] = (
                n - size, f"unfold: window size {size} is larger than dim {d} ({n}), at {where(user_frame())}")
        return t._with_view(v)

    def repeat(self, *sizes) -> GraphTensor:
        """torch ``Tensor.repeat`` (tile the whole tensor ``sizes[i]`` times along dim i)."""
        sizes = dims("repeat", _shape_args(sizes), self)
        if len(sizes) < self.ndim:
            raise op_error(ValueError, "repeat", "fewer repeat counts than dims", self)
        if any(is_static(r) and r < 0 for r in sizes):
            raise op_error(ValueError, "repeat", f"negative repeat count in {shape_str(sizes)}", self)
        t = self.reshape((1,) * (len(sizes) - self.ndim) + self.shape)
        inter = [x for d in t.shape for x in (1, d)]
        t = t.reshape(inter).expand(*[x for r, d in zip(sizes, t.shape) for x in (r, d)])
        return t.reshape(tuple(r * d for r, d in zip(sizes, t.shape[1::2])))

    def tile(self, *dims) -> GraphTensor:
        """torch ``Tensor.tile``: ``repeat`` with ``dims`` padded with leading 1s to the tensor's rank.

        Args:
            dims: the repeat count per dim, as ints or one sequence.
        """
        dims = _shape_args(dims)
        return self.repeat(*((1,) * (self.ndim - len(dims)) + tuple(dims)))


    if TYPE_CHECKING:
        # The methods frontend/ops/__init__.py installs (``_install``), declared for type checkers and editors:
        # what each returns (the op functions' return annotations; tests/test_api_types.py checks this list
        # against the installed methods). Declared rather than assigned from the ops, which import this module:
        # mypy cannot infer a decorated function's type across that import cycle.
        add: Callable[..., GraphTensor]; sub: Callable[..., GraphTensor]; mul: Callable[..., GraphTensor]
        div: Callable[..., GraphTensor]; neg: Callable[..., GraphTensor]; pow: Callable[..., GraphTensor]
        fmod: Callable[..., GraphTensor]; remainder: Callable[..., GraphTensor]
        floor_divide: Callable[..., GraphTensor]; maximum: Callable[..., GraphTensor]
        minimum: Callable[..., GraphTensor]; clamp: Callable[..., GraphTensor]; clip: Callable[..., GraphTensor]
        lerp: Callable[..., GraphTensor]; where: Callable[..., GraphTensor]; __add__: Callable[..., GraphTensor]
        __radd__: Callable[..., GraphTensor]; __sub__: Callable[..., GraphTensor]
        __rsub__: Callable[..., GraphTensor]; __mul__: Callable[..., GraphTensor]
        __rmul__: Callable[..., GraphTensor]; __truediv__: Callable[..., GraphTensor]
        __rtruediv__: Callable[..., GraphTensor]; __floordiv__: Callable[..., GraphTensor]
        __rfloordiv__: Callable[..., GraphTensor]; __mod__: Callable[..., GraphTensor]
        __rmod__: Callable[..., GraphTensor]; __pow__: Callable[..., GraphTensor]
        __rpow__: Callable[..., GraphTensor]; __neg__: Callable[..., GraphTensor]
        __pos__: Callable[..., GraphTensor]; __abs__: Callable[..., GraphTensor]
        __matmul__: Callable[..., GraphTensor]; __rmatmul__: Callable[..., GraphTensor]
        __lt__: Callable[..., GraphTensor]; __le__: Callable[..., GraphTensor]; __gt__: Callable[..., GraphTensor]
        __ge__: Callable[..., GraphTensor]; __eq__: Callable[..., GraphTensor]; __ne__: Callable[..., GraphTensor]
        __and__: Callable[..., GraphTensor]; __rand__: Callable[..., GraphTensor]
        __or__: Callable[..., GraphTensor]; __ror__: Callable[..., GraphTensor]; __xor__: Callable[..., GraphTensor]
        __rxor__: Callable[..., GraphTensor]; __invert__: Callable[..., GraphTensor]; lt: Callable[..., GraphTensor]
        le: Callable[..., GraphTensor]; gt: Callable[..., GraphTensor]; ge: Callable[..., GraphTensor]
        eq: Callable[..., GraphTensor]; ne: Callable[..., GraphTensor]; logical_and: Callable[..., GraphTensor]
        logical_or: Callable[..., GraphTensor]; logical_not: Callable[..., GraphTensor]
        logical_xor: Callable[..., GraphTensor]; isnan: Callable[..., GraphTensor]
        isinf: Callable[..., GraphTensor]; isfinite: Callable[..., GraphTensor]; abs: Callable[..., GraphTensor]
        sign: Callable[..., GraphTensor]; exp: Callable[..., GraphTensor]; exp2: Callable[..., GraphTensor]
        log: Callable[..., GraphTensor]; log2: Callable[..., GraphTensor]; sqrt: Callable[..., GraphTensor]
        rsqrt: Callable[..., GraphTensor]; sin: Callable[..., GraphTensor]; cos: Callable[..., GraphTensor]
        tan: Callable[..., GraphTensor]; square: Callable[..., GraphTensor]; reciprocal: Callable[..., GraphTensor]
        floor: Callable[..., GraphTensor]; ceil: Callable[..., GraphTensor]; round: Callable[..., GraphTensor]
        trunc: Callable[..., GraphTensor]; erf: Callable[..., GraphTensor]; relu: Callable[..., GraphTensor]
        leaky_relu: Callable[..., GraphTensor]; sigmoid: Callable[..., GraphTensor]
        tanh: Callable[..., GraphTensor]; gelu: Callable[..., GraphTensor]; silu: Callable[..., GraphTensor]
        softplus: Callable[..., GraphTensor]; elu: Callable[..., GraphTensor]; mish: Callable[..., GraphTensor]
        sum: Callable[..., GraphTensor]; mean: Callable[..., GraphTensor]; var: Callable[..., GraphTensor]
        std: Callable[..., GraphTensor]; max: Callable[..., GraphTensor | ValuesIndices]
        min: Callable[..., GraphTensor | ValuesIndices]; amax: Callable[..., GraphTensor]
        amin: Callable[..., GraphTensor]; prod: Callable[..., GraphTensor]; argmax: Callable[..., GraphTensor]
        argmin: Callable[..., GraphTensor]; any: Callable[..., GraphTensor]; all: Callable[..., GraphTensor]
        logsumexp: Callable[..., GraphTensor]; softmax: Callable[..., GraphTensor]
        log_softmax: Callable[..., GraphTensor]; cumsum: Callable[..., GraphTensor]
        cumprod: Callable[..., GraphTensor]; gather: Callable[..., GraphTensor]
        take_along_dim: Callable[..., GraphTensor]; index_select: Callable[..., GraphTensor]
        scatter: Callable[..., GraphTensor]; scatter_add: Callable[..., GraphTensor]
        matmul: Callable[..., GraphTensor]; dot: Callable[..., GraphTensor]; tril: Callable[..., GraphTensor]
        triu: Callable[..., GraphTensor]; split: Callable[..., tuple[GraphTensor, ...]]
        chunk: Callable[..., tuple[GraphTensor, ...]]; __getitem__: Callable[..., GraphTensor]
        to: Callable[..., GraphTensor]; cast: Callable[..., GraphTensor]; type: Callable[..., GraphTensor]
        float: Callable[..., GraphTensor]; half: Callable[..., GraphTensor]; bfloat16: Callable[..., GraphTensor]
        double: Callable[..., GraphTensor]; int: Callable[..., GraphTensor]; bool: Callable[..., GraphTensor]
        log1p: Callable[..., GraphTensor]; expm1: Callable[..., GraphTensor]; log10: Callable[..., GraphTensor]
        sinh: Callable[..., GraphTensor]; cosh: Callable[..., GraphTensor]; asinh: Callable[..., GraphTensor]
        acosh: Callable[..., GraphTensor]; atanh: Callable[..., GraphTensor]; atan: Callable[..., GraphTensor]
        asin: Callable[..., GraphTensor]; acos: Callable[..., GraphTensor]; atan2: Callable[..., GraphTensor]
        arctan2: Callable[..., GraphTensor]; arcsin: Callable[..., GraphTensor]; arccos: Callable[..., GraphTensor]
        arctan: Callable[..., GraphTensor]; nan_to_num: Callable[..., GraphTensor]
        clone: Callable[..., GraphTensor]; masked_fill: Callable[..., GraphTensor]
        addcmul: Callable[..., GraphTensor]; addcdiv: Callable[..., GraphTensor]; norm: Callable[..., GraphTensor]
        var_mean: Callable[..., tuple[GraphTensor, GraphTensor]]
        std_mean: Callable[..., tuple[GraphTensor, GraphTensor]]; cummax: Callable[..., ValuesIndices]
        cummin: Callable[..., ValuesIndices]; logcumsumexp: Callable[..., GraphTensor]
        sort: Callable[..., ValuesIndices]; argsort: Callable[..., GraphTensor]; msort: Callable[..., GraphTensor]
        topk: Callable[..., ValuesIndices]; long: Callable[..., GraphTensor]
        bitwise_and: Callable[..., GraphTensor]; bitwise_or: Callable[..., GraphTensor]
        bitwise_xor: Callable[..., GraphTensor]; bitwise_not: Callable[..., GraphTensor]
        bitwise_left_shift: Callable[..., GraphTensor]; bitwise_right_shift: Callable[..., GraphTensor]
        __lshift__: Callable[..., GraphTensor]; __rlshift__: Callable[..., GraphTensor]
        __rshift__: Callable[..., GraphTensor]; __rrshift__: Callable[..., GraphTensor]
        roll: Callable[..., GraphTensor]; narrow: Callable[..., GraphTensor]; select: Callable[..., GraphTensor]
        unbind: Callable[..., tuple[GraphTensor, ...]]; movedim: Callable[..., GraphTensor]
        moveaxis: Callable[..., GraphTensor]; repeat_interleave: Callable[..., GraphTensor]
        diagonal: Callable[..., GraphTensor]; diag: Callable[..., GraphTensor]; trace: Callable[..., GraphTensor]
        addmm: Callable[..., GraphTensor]; baddbmm: Callable[..., GraphTensor]; bmm: Callable[..., GraphTensor]
        index_add: Callable[..., GraphTensor]; index_copy: Callable[..., GraphTensor]
        index_put: Callable[..., GraphTensor]; scatter_reduce: Callable[..., GraphTensor]
        index_fill: Callable[..., GraphTensor]; index_reduce: Callable[..., GraphTensor]
        masked_scatter: Callable[..., GraphTensor]; put: Callable[..., GraphTensor]; take: Callable[..., GraphTensor]
        __setitem__: Callable[..., None]; type_as: Callable[..., GraphTensor]
        new_zeros: Callable[..., GraphTensor]; new_ones: Callable[..., GraphTensor]
        new_full: Callable[..., GraphTensor]; logaddexp: Callable[..., GraphTensor]
        logaddexp2: Callable[..., GraphTensor]; sinc: Callable[..., GraphTensor]
        lgamma: Callable[..., GraphTensor]; digamma: Callable[..., GraphTensor]; polygamma: Callable[..., GraphTensor]
        hypot: Callable[..., GraphTensor]; copysign: Callable[..., GraphTensor]; fmax: Callable[..., GraphTensor]
        fmin: Callable[..., GraphTensor]; isclose: Callable[..., GraphTensor]; allclose: Callable[..., GraphTensor]
        deg2rad: Callable[..., GraphTensor]; rad2deg: Callable[..., GraphTensor]
        nansum: Callable[..., GraphTensor]; nanmean: Callable[..., GraphTensor]
        count_nonzero: Callable[..., GraphTensor]; diff: Callable[..., GraphTensor]
        rot90: Callable[..., GraphTensor]; cross: Callable[..., GraphTensor]; kron: Callable[..., GraphTensor]
        hardshrink: Callable[..., GraphTensor]; median: Callable[..., GraphTensor | ValuesIndices]
        nanmedian: Callable[..., GraphTensor | ValuesIndices]; kthvalue: Callable[..., ValuesIndices]
        quantile: Callable[..., GraphTensor]; nanquantile: Callable[..., GraphTensor]
        mode: Callable[..., ValuesIndices]; histc: Callable[..., GraphTensor]
        det: Callable[..., GraphTensor]; slogdet: Callable[..., tuple[GraphTensor, GraphTensor]]
        inverse: Callable[..., GraphTensor]; cholesky: Callable[..., GraphTensor]
        ldexp: Callable[..., GraphTensor]; frexp: Callable[..., tuple[GraphTensor, GraphTensor]]
        nextafter: Callable[..., GraphTensor]
        logit: Callable[..., GraphTensor]; xlogy: Callable[..., GraphTensor]; erfc: Callable[..., GraphTensor]
        erfinv: Callable[..., GraphTensor]
        clamp_min: Callable[..., GraphTensor]; clamp_max: Callable[..., GraphTensor]
        aminmax: Callable[..., MinMax]; tensor_split: Callable[..., tuple[GraphTensor, ...]]
        diag_embed: Callable[..., GraphTensor]; true_divide: Callable[..., GraphTensor]
        divide: Callable[..., GraphTensor]; multiply: Callable[..., GraphTensor]; subtract: Callable[..., GraphTensor]
        negative: Callable[..., GraphTensor]; absolute: Callable[..., GraphTensor]; fix: Callable[..., GraphTensor]
        sgn: Callable[..., GraphTensor]; frac: Callable[..., GraphTensor]; signbit: Callable[..., GraphTensor]
        heaviside: Callable[..., GraphTensor]; float_power: Callable[..., GraphTensor]
        fliplr: Callable[..., GraphTensor]; flipud: Callable[..., GraphTensor]
        hsplit: Callable[..., tuple[GraphTensor, ...]]; vsplit: Callable[..., tuple[GraphTensor, ...]]
        dsplit: Callable[..., tuple[GraphTensor, ...]]; dist: Callable[..., GraphTensor]
        logdet: Callable[..., GraphTensor]; cov: Callable[..., GraphTensor]; corrcoef: Callable[..., GraphTensor]
        gcd: Callable[..., GraphTensor]; lcm: Callable[..., GraphTensor]; outer: Callable[..., GraphTensor]
        mm: Callable[..., GraphTensor]; mv: Callable[..., GraphTensor]; vdot: Callable[..., GraphTensor]
        inner: Callable[..., GraphTensor]; ger: Callable[..., GraphTensor]; addmv: Callable[..., GraphTensor]
        addr: Callable[..., GraphTensor]; addbmm: Callable[..., GraphTensor]
        swapdims: Callable[..., GraphTensor]; renorm: Callable[..., GraphTensor]
        bernoulli: Callable[..., GraphTensor]; multinomial: Callable[..., GraphTensor]
        # the in-place methods frontend/ops/inplace.py installs (``x.add_(y)`` rebinds ``x`` and returns it)
        add_: _InPlace; sub_: _InPlace; subtract_: _InPlace; mul_: _InPlace; multiply_: _InPlace; div_: _InPlace
        divide_: _InPlace; true_divide_: _InPlace; pow_: _InPlace; fmod_: _InPlace; remainder_: _InPlace
        floor_divide_: _InPlace; neg_: _InPlace; negative_: _InPlace; abs_: _InPlace; absolute_: _InPlace
        square_: _InPlace; reciprocal_: _InPlace; sign_: _InPlace; clamp_: _InPlace; clip_: _InPlace
        clamp_min_: _InPlace; clamp_max_: _InPlace; lerp_: _InPlace; addcmul_: _InPlace; addcdiv_: _InPlace
        hypot_: _InPlace; copysign_: _InPlace; xlogy_: _InPlace; atan2_: _InPlace; arctan2_: _InPlace
        nan_to_num_: _InPlace; exp_: _InPlace; exp2_: _InPlace; expm1_: _InPlace; log_: _InPlace; log2_: _InPlace
        log10_: _InPlace; log1p_: _InPlace; sqrt_: _InPlace; rsqrt_: _InPlace; sin_: _InPlace; cos_: _InPlace
        tan_: _InPlace; sinh_: _InPlace; cosh_: _InPlace; asin_: _InPlace; acos_: _InPlace; atan_: _InPlace
        asinh_: _InPlace; acosh_: _InPlace; atanh_: _InPlace; arcsin_: _InPlace; arccos_: _InPlace; arctan_: _InPlace
        floor_: _InPlace; ceil_: _InPlace; round_: _InPlace; trunc_: _InPlace; fix_: _InPlace; erf_: _InPlace
        erfc_: _InPlace; logit_: _InPlace; deg2rad_: _InPlace; rad2deg_: _InPlace; relu_: _InPlace; sigmoid_: _InPlace
        tanh_: _InPlace; eq_: _InPlace; ne_: _InPlace; lt_: _InPlace; le_: _InPlace; gt_: _InPlace; ge_: _InPlace
        logical_and_: _InPlace; logical_or_: _InPlace; logical_xor_: _InPlace; logical_not_: _InPlace
        bitwise_and_: _InPlace; bitwise_or_: _InPlace; bitwise_xor_: _InPlace; bitwise_not_: _InPlace
        bitwise_left_shift_: _InPlace; bitwise_right_shift_: _InPlace; tril_: _InPlace; triu_: _InPlace
        masked_fill_: _InPlace; scatter_: _InPlace; scatter_add_: _InPlace; scatter_reduce_: _InPlace
        index_add_: _InPlace; index_copy_: _InPlace; index_put_: _InPlace; cumsum_: _InPlace; cumprod_: _InPlace
        detach_: _InPlace; fill_: _InPlace; zero_: _InPlace; copy_: _InPlace; squeeze_: _InPlace; unsqueeze_: _InPlace
        t_: _InPlace; transpose_: _InPlace; swapaxes_: _InPlace; index_fill_: _InPlace; index_reduce_: _InPlace
        masked_scatter_: _InPlace; put_: _InPlace
        normal_: _RandomFill; uniform_: _RandomFill; exponential_: _RandomFill; bernoulli_: _RandomFill
        random_: _RandomFill; geometric_: _RandomFill; cauchy_: _RandomFill; log_normal_: _RandomFill

class ValuesIndices(NamedTuple):
    """A ``(values, indices)`` pair of tensors, as torch's ``torch.return_types``: the base of the
    results of ``max``/``min`` over a dim, ``cummax``/``cummin``, ``sort`` and ``topk``."""

    values: GraphTensor
    indices: GraphTensor


class MinMax(NamedTuple):
    """A ``(min, max)`` pair of tensors, as torch's ``torch.return_types.aminmax``: the base of
    ``aminmax``'s result."""

    min: GraphTensor
    max: GraphTensor


def _shape_of(other, op: str, x: GraphTensor) -> tuple:
    """The shape of ``other``, the tensor whose shape an op takes (a Parameter or Buffer arrives as a
    tensor: the method joins, ``ops/__init__.py``)."""
    if not isinstance(other, GraphTensor):
        raise op_error(TypeError, op, f"other must be a GraphTensor, got {type(other).__name__}", x)
    return tuple(other.shape)


def _shape_args(args) -> tuple:
    """Accept ``f(2, 3)`` and ``f((2, 3))`` alike."""
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        return tuple(args[0])
    return tuple(args)


def _pad_value(value, x: GraphTensor):
    """The fill value in ``x``'s dtype kind; a fraction cannot pad an integer tensor."""
    kind = x.dtype.kind
    if kind == "b":
        return bool(value)
    if kind == "i":
        if not float(value).is_integer():  # (NaN and inf are not integers either)
            raise op_error(TypeError, "pad", f"value {value} is not an integer for a {x.dtype.name} tensor", x)
        return int(value)
    return float(value)

