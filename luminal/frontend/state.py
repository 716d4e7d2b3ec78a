"""Persistent state: host-held arrays that graphs read, and that a compiled program may update.

A :class:`State` owns one numpy array (``.data``). Parameters, optimizer moments, BatchNorm running
statistics and runtime scalars (learning rate, bias corrections) are all States: one mechanism.
``graph.state(s)`` makes ``s`` readable in a graph (an ``Input`` node whose value is taken from
``s.data`` on every call, so later host changes are seen without recompiling), and
``graph.assign(s, t)`` asks every compiled program of that graph to write ``t`` back into ``s.data``
after it runs (in place, so references to the array stay valid). All reads of a run see the values
from before the run; all writes happen after it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from luminal.core import dtype as dt
from luminal.core import prefault
from luminal.core.residency import Mirrored

if TYPE_CHECKING:  # a State takes GraphTensor's methods and operators (``state_tensor.py`` installs them)
    from luminal.frontend.tensor import GraphTensor as _TensorMethods
else:
    _TensorMethods = object


class State(Mirrored, _TensorMethods):
    """A named, typed host array. ``data`` is kept in the dtype's storage form (see ``dtype.py``).

    ``data`` may be an array, another State (copied) or a tensor whose values are known now (a host
    tensor, ``frontend/host.py``: ``nn.Parameter(torch.ones(3))``, ``nn.Parameter(w[:16])``), whose dtype
    is kept. Used in an op, a State is read into the op's graph (``frontend/state_tensor.py``).

    A device backend may hold a copy of the values between calls (``core/residency.py``): reading
    ``data`` brings them back, and writing into it reaches the device at the next call."""

    def __init__(self, data, dtype=None, name: str | None = None):
        arr = np.asarray(data)
        if dtype is None and isinstance(getattr(data, "dtype", None), dt.DType):
            dtype = data.dtype  # a State or a tensor: its lm dtype (bfloat16 arrives as float32 storage)
        if dtype is None:
            dtype = dt.int32 if arr.dtype.kind in "iu" else arr.dtype  # one integer type, as for inputs
        d = dt.as_dtype(dtype)
        self.dtype: dt.DType = d
        self._replace(np.array(dt.to_storage(arr, d), order="C", copy=True))
        self.name = name

    @property
    def data(self) -> np.ndarray:
        """The values as a host array, in the dtype's storage form (``core/residency.py``). Assigning an
        array makes it the State's storage (programs read and write it: torch's ``p.data = t``): it must be
        a writeable numpy array of the State's shape and storage dtype, checked here, at the user's line.
        A program compiled from a graph reads a State as the shape and dtype it had then, so another one
        would be read as something it is not (a (2, 3) array for a (3,) State read its first row on one
        backend and was refused on another; a read-only one made a program write into read-only memory);
        ``set(value)`` converts."""
        return Mirrored.data.fget(self)

    @data.setter
    def data(self, value) -> None:
        self._check_storage(value)
        Mirrored.data.fset(self, value)

    def _check_storage(self, value) -> None:
        want = self.dtype.np  # (the storage dtype: bfloat16 travels as float32)
        if not isinstance(value, np.ndarray):
            raise TypeError(f"{self.describe()}: .data must be a numpy array, got {type(value).__name__} (set(value) "
                            f"converts)")
        if value.shape != self.shape or value.dtype != want:
            raise ValueError(f"{self.describe()}: .data must be a {want} array of shape {tuple(self.shape)}, got "
                             f"{value.dtype} {value.shape} (set(value) converts one of this shape)")
        if not value.flags.writeable:
            raise ValueError(f"{self.describe()}: .data must be writeable (programs write a State's updates into "
                             f"it), got a read-only array (copy it, or use set(value))")
        if self.dtype is dt.bfloat16 and not np.array_equal(dt.to_storage(value, dt.bfloat16), value, equal_nan=True):
            raise ValueError(f"{self.describe()}: .data must hold bfloat16 values (float32 storage of values a "
                             f"bfloat16 can hold: one backend would read them rounded, another not); set(value) "
                             f"rounds")

    def _replace(self, value: np.ndarray, dtype: dt.DType | None = None) -> None:
        """Make ``value`` the storage, of any shape (and ``dtype``, when given): the constructor's, and
        ``Module.to``'s, for a State no compiled graph reads yet."""
        if dtype is not None:
            self.dtype = dtype
        Mirrored.data.fset(self, value)

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        """The current values (``np.asarray(w)``; a copy when asked for one or for another dtype)."""
        if dtype is not None and np.dtype(dtype) != self._host.dtype:
            return self.host_array().astype(dtype)
        return self.host_array().copy() if copy else self.data

    @property
    def device(self) -> str:
        """``"cpu"``: the values live on the host whatever backend a graph is compiled for (torch code
        passes ``w.device`` on to ``to``/factories, which accept ``"cpu"``)."""
        return "cpu"

    @property
    def shape(self) -> tuple:
        """The shape of the held array."""
        return self._host.shape

    @property
    def ndim(self) -> int:
        """The number of dims of the held array."""
        return self._host.ndim

    def numel(self) -> int:
        """The number of elements of the held array."""
        return int(self._host.size)

    def dim(self) -> int:
        """The number of dims (torch ``Tensor.dim()``: a torch Parameter is a tensor, so code written for
        torch asks a parameter ``w.dim()``)."""
        return self._host.ndim

    def size(self, d: int | None = None) -> tuple | int:
        """torch ``Tensor.size``: the shape, or the size of dim ``d`` (``fan_in = w.size(1)``).

        Args:
            d: a dim (negative counts from the end); None for the whole shape.
        """
        if d is None:
            return self.shape
        n = self._host.ndim
        if isinstance(d, bool) or not isinstance(d, int):
            raise TypeError(f"size: dim must be an int, got {d!r}, for {self.describe()}")
        if not -n <= d < n:
            raise ValueError(f"size: dim {d} is out of range for {self.describe()}")
        return self.shape[d]

    def set(self, value) -> None:
        """Overwrite the value in place (shape must match), converting to the state's dtype (a device
        copy is not read back first: every element is replaced)."""
        np.copyto(self._host, self.prepared(value), casting="unsafe")
        self.host_overwritten()

    def prepared(self, value) -> np.ndarray:
        """``value`` checked and converted as ``set`` would store it, changing nothing yet (so that a
        load can check every value before it writes any)."""
        arr = np.asarray(value)
        if arr.shape != self._host.shape:
            raise ValueError(f"{self.describe()}: cannot set a value of shape {arr.shape}; "
                             f"expected {self._host.shape}")
        if self.dtype.kind == "i" and arr.dtype.kind in "iuf" and arr.size:
            if arr.dtype.kind == "f":  # (a cast would make NaN and inf -2**31, with a warning at most;
                # a fraction truncates, as torch's copy_ does)
                finite = np.isfinite(arr)
                if not finite.all():
                    raise ValueError(f"{self.describe()}: {arr[~finite].flat[0]} has no int32 value")
            if arr.min() < -2**31 or arr.max() >= 2**31:
                raise ValueError(f"{self.describe()}: values in [{arr.min()}, {arr.max()}] do not fit in int32")
        return dt.to_storage(arr, self.dtype)

    def describe(self) -> str:
        """A short description for messages: the class, the name (or ``(unnamed)``), the shape and the dtype."""
        return f"{type(self).__name__} {self.name or '(unnamed)'} {tuple(self.shape)} {self.dtype.name}"

    def __repr__(self):
        return f"{type(self).__name__}(name={self.name!r}, shape={tuple(self.shape)}, dtype={self.dtype.name})"


def scalar_state(value: float, name: str, dtype=dt.float32) -> State:
    """A 0-d runtime scalar (learning rate, a bias correction) fed to the graph on every call."""
    return State(np.asarray(value, dtype=dt.as_dtype(dtype).np), dtype, name)


def zeros_state(shape, dtype, name: str | None = None) -> State:
    """A zero-filled State of ``shape`` and ``dtype`` (an optimizer's moments, a gradient accumulator)
    whose storage is fresh zeros, not a copy of them: the constructor's copy would write every page now
    (a 10M-parameter AdamW's 156 moments: 80 MB, about 50 ms of its ``compile_step``), where these are
    mapped on another thread while the compile goes on (``core/prefault.py``'s ``zeros``)."""
    state = State.__new__(State)
    state.dtype = dt.as_dtype(dtype)
    state._replace(prefault.zeros(shape, state.dtype.np))
    state.name = name
    return state
