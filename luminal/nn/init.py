"""``nn.init``: torch's initialisers, by name and formula, on Parameters (``p.data`` written in place).

Draws come from ``luminal.frontend.seed.default_rng()`` (or ``generator=``), so ``lm.manual_seed(n)``
makes a model's initial values reproducible. The distributions match torch's; the streams do not.
Each function also accepts a plain numpy array and returns what it was given, as torch's ``*_``
functions return their tensor.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from luminal.frontend import seed
from luminal.frontend.state import State

__all__ = [
    "calculate_gain", "constant_", "dirac_", "eye_", "kaiming_normal_", "kaiming_uniform_", "normal_", "ones_",
    "orthogonal_", "sparse_", "trunc_normal_", "uniform_", "xavier_normal_", "xavier_uniform_", "zeros_",
]


def _write(p, values):
    if isinstance(p, State):
        p.set(values)
    else:
        np.copyto(p, values, casting="unsafe")
    return p


def _rng(generator):
    return generator if generator is not None else seed.default_rng()


def _draw_dtype(p, who: str) -> type:
    """The numpy dtype to draw ``p``'s values in: float32 unless ``p`` holds float64. Drawing float64 and
    converting took most of a model's build (0.4 s of 10 million values here, against 0.05 s), as torch
    also draws in the parameter's dtype. A random fill of an integer or bool ``p`` is refused, as torch
    refuses it ("normal_kernel_cpu" not implemented for 'Long'): the draws were truncated on writing, so
    ``uniform_`` of an int array gave all zeros."""
    held = p.data.dtype if isinstance(p, State) else np.asarray(p).dtype
    if held.kind != "f":
        raise TypeError(f"{who}: random values need a floating-point parameter, got dtype {held} "
                        f"(shape {tuple(p.shape)})")
    return np.float32 if held.itemsize <= 4 else np.float64


def _is_empty(p, who: str) -> bool:
    """Whether ``p`` has no elements; torch's kaiming_* warn then that they do nothing, and so do these."""
    if 0 not in tuple(p.shape):
        return False
    warnings.warn(f"{who}: initializing zero-element tensors is a no-op", UserWarning, stacklevel=3)
    return True


def _uniform(rng, a: float, b: float, shape, dtype) -> np.ndarray:
    if not isinstance(rng, np.random.Generator):  # (a legacy RandomState draws float64 only)
        return rng.uniform(a, b, size=shape)
    out = rng.random(shape, dtype=dtype)
    out *= dtype(b) - dtype(a)
    out += dtype(a)
    return out


def _normal(rng, mean: float, std: float, shape, dtype) -> np.ndarray:
    if not isinstance(rng, np.random.Generator):
        return rng.normal(mean, std, size=shape)
    out = rng.standard_normal(shape, dtype=dtype)
    out *= dtype(std)
    out += dtype(mean)
    return out


def calculate_gain(nonlinearity: str, param=None) -> float:
    """The recommended gain for ``nonlinearity`` (torch's table)."""
    linear = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
              "conv_transpose3d", "sigmoid")
    if nonlinearity in linear:
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif isinstance(param, (int, float)) and not isinstance(param, bool):
            slope = param
        else:
            raise ValueError(f"calculate_gain: negative_slope {param!r} is not a number")
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"calculate_gain: unsupported nonlinearity {nonlinearity!r}")


def _calculate_fan_in_and_fan_out(p) -> tuple[int, int]:
    """torch's fans: dim 1 is inputs, dim 0 outputs, the rest a receptive field multiplying both."""
    shape = p.shape
    if len(shape) < 2:
        raise ValueError(f"fan in and fan out need at least 2 dims, got shape {tuple(shape)}")
    receptive = int(np.prod(shape[2:])) if len(shape) > 2 else 1
    return shape[1] * receptive, shape[0] * receptive


def _fan(p, mode: str) -> int:
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"mode must be 'fan_in' or 'fan_out', got {mode!r}")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(p)
    return fan_in if mode == "fan_in" else fan_out


def uniform_(tensor, a: float = 0.0, b: float = 1.0, generator=None):
    """torch's ``nn.init.uniform_``: fill ``tensor`` with draws from U(a, b).

    Args:
        tensor: the Parameter (or numpy array) to fill.
        a: the lower bound.
        b: the upper bound.
        generator: a numpy Generator to draw from (default: the global one, ``lm.manual_seed``).

    Returns:
        ``tensor``, filled in place.
    """
    if not a <= b:  # (torch: "uniform_ expects to return a [from, to) range, but found from=1 > to=-1")
        raise ValueError(f"uniform_: expects the range [a, b) with a <= b, but found a={a} > b={b}")
    return _write(tensor, _uniform(_rng(generator), a, b, tensor.shape, _draw_dtype(tensor, "uniform_")))


def normal_(tensor, mean: float = 0.0, std: float = 1.0, generator=None):
    """torch's ``nn.init.normal_``: fill ``tensor`` with draws from N(mean, std**2).

    Args:
        tensor: the Parameter (or numpy array) to fill.
        mean: the mean.
        std: the standard deviation.
        generator: a numpy Generator to draw from (default: the global one, ``lm.manual_seed``).

    Returns:
        ``tensor``, filled in place.
    """
    if not std >= 0:  # (torch: "normal expects std >= 0.0, but found std -1"; numpy drew -N(0, 1) silently)
        raise ValueError(f"normal_: std must be at least 0, got {std}")
    return _write(tensor, _normal(_rng(generator), mean, std, tensor.shape, _draw_dtype(tensor, "normal_")))


def trunc_normal_(tensor, mean: float = 0.0, std: float = 1.0, a: float = -2.0, b: float = 2.0, generator=None):
    """torch's ``nn.init.trunc_normal_``: fill ``tensor`` with draws from N(mean, std**2) restricted to [a, b].

    The time is bounded whatever the bounds: normal draws are kept where they fall in [a, b] (when
    that is likely: most of them) and the others are drawn by the inverse CDF, which always lands
    inside. Redrawing until every value fell inside never ended for a far tail (a = 6 std keeps one
    draw in a billion). The inverse CDF takes its probabilities on the side of the median where they
    are small, so a tail interval is sampled as accurately as a central one (torch's ``erfinv`` of a
    difference of CDFs rounds to the bound there, hence its warning when the mean is more than 2 std
    outside [a, b]). ``std=0`` puts every value at the mean clipped to [a, b] (the limit as std goes to 0).

    Args:
        tensor: the Parameter (or numpy array) to fill.
        mean: the mean of the normal distribution.
        std: its standard deviation (at least 0).
        a: the lower bound.
        b: the upper bound (at least ``a``).
        generator: a numpy Generator to draw from (default: the global one, ``lm.manual_seed``).

    Returns:
        ``tensor``, filled in place.
    """
    if not a <= b:  # (torch: "uniform_ expects to return a [from, to) range, but found from=1 > to=-1")
        raise ValueError(f"trunc_normal_: expects the range [a, b] with a <= b, but found a={a} > b={b}")
    if not std >= 0:
        raise ValueError(f"trunc_normal_: std must be at least 0, got {std}")
    dtype = _draw_dtype(tensor, "trunc_normal_")
    if std == 0:
        return _write(tensor, np.full(tensor.shape, min(max(mean, a), b)))
    rng = _rng(generator)
    lo, hi = (a - mean) / std, (b - mean) / std  # the bounds in standard units
    below, above = _norm_cdf(lo), _norm_cdf(-hi)  # the mass below lo and above hi, each accurate when small
    if below + above < 0.5:  # most normal draws land inside: keep those (exact: each kept one is a draw
        z = _normal(rng, 0.0, 1.0, tensor.shape, dtype)  # of the truncated normal), replace the rest
        outside = ~((z >= lo) & (z <= hi))
        z[outside] = _truncated_standard(rng, lo, hi, below, above, int(outside.sum()))
    else:
        z = _truncated_standard(rng, lo, hi, below, above, tensor.shape)
    return _write(tensor, np.clip(mean + std * z, a, b))


def _truncated_standard(rng, lo: float, hi: float, below: float, above: float, shape) -> np.ndarray:
    """Draws of the standard normal restricted to [lo, hi] by its inverse CDF (``below``, ``above``:
    the mass outside each bound)."""
    u = _uniform(rng, 0.0, 1.0, shape, np.float64)
    edge = lo if lo > 0 else -hi if hi < 0 else None
    if edge is not None and _norm_cdf(-edge) < 1e-300:  # beyond 37 std the tail's mass underflows, and its
        # density exp(-x**2 / 2) is exp(-edge * (x - edge)) within 1 / edge**2: an exponential's
        z = edge - np.log1p(u * np.expm1(-edge * (hi - lo))) / edge
        return z if lo > 0 else -z
    if lo >= 0:  # the mass between the bounds, without the cancellation of 1 - below - above in a tail
        mass = _norm_cdf(-lo) - above
    elif hi <= 0:
        mass = _norm_cdf(hi) - below
    else:
        mass = 1.0 - below - above
    left = below + mass * u  # P(X <= x) for the draws, and P(X > x) computed directly (not as 1 - left):
    right = above + mass * (1.0 - u)  # the smaller of the two, at most 1/2, keeps its digits
    z = _norm_ppf_lower(np.minimum(left, right))
    np.negative(z, out=z, where=left > right)
    return z


def _norm_cdf(x: float) -> float:
    """P(X <= x) for a standard normal X, accurate to its last digits when small (x << 0)."""
    return 0.5 * math.erfc(-x / math.sqrt(2.0))


def _norm_ppf_lower(q: np.ndarray) -> np.ndarray:
    """The standard normal quantile of each ``q`` in [0, 0.5] (0 gives the smallest positive float's):
    Wichura's AS241 (the algorithm of Python's ``statistics.NormalDist.inv_cdf``, about 1e-16 relative
    error), vectorised for numpy, which has no ``erfinv``."""
    q = np.maximum(q, np.finfo(np.float64).tiny)
    central = q >= 0.075  # |q - 0.5| <= 0.425
    if central.all():  # (the common case, the bounds within 1.44 std: no tail to pick out)
        return _central(q)
    out = np.empty_like(q)
    out[central] = _central(q[central])
    r = np.sqrt(-np.log(q[~central]))
    near = r <= 5.0
    tail = np.where(near, _poly(r - 1.6, _AS241_NEAR_NUM) / _poly(r - 1.6, _AS241_NEAR_DEN),
                    _poly(r - 5.0, _AS241_FAR_NUM) / _poly(r - 5.0, _AS241_FAR_DEN))
    out[~central] = -tail
    return out


def _central(q: np.ndarray) -> np.ndarray:
    c = q - 0.5
    r = 0.180625 - c * c
    return c * _poly(r, _AS241_CENTRAL_NUM) / _poly(r, _AS241_CENTRAL_DEN)


def _poly(x: np.ndarray, coefficients: tuple[float, ...]) -> np.ndarray:
    """The polynomial with ``coefficients`` (highest power first) at ``x``, by Horner's rule."""
    out = np.full_like(x, coefficients[0])
    for c in coefficients[1:]:
        out *= x
        out += c
    return out


_AS241_CENTRAL_NUM = (2.5090809287301226727e+3, 3.3430575583588128105e+4, 6.7265770927008700853e+4,
                      4.5921953931549871457e+4, 1.3731693765509461125e+4, 1.9715909503065514427e+3,
                      1.3314166789178437745e+2, 3.3871328727963666080e+0)
_AS241_CENTRAL_DEN = (5.2264952788528545610e+3, 2.8729085735721942674e+4, 3.9307895800092710610e+4,
                      2.1213794301586595867e+4, 5.3941960214247511077e+3, 6.8718700749205790830e+2,
                      4.2313330701600911252e+1, 1.0)
_AS241_NEAR_NUM = (7.7454501427834140764e-4, 2.2723844989269184583e-2, 2.4178072517745061177e-1,
                   1.2704582524523683826e+0, 3.6478483247632046050e+0, 5.7694972214606914055e+0,
                   4.6303378461565452959e+0, 1.4234371107496835773e+0)
_AS241_NEAR_DEN = (1.0507500716444168432e-9, 5.4759380849953449460e-4, 1.5198666563616457197e-2,
                   1.4810397642748007459e-1, 6.8976733498510000455e-1, 1.6763848301838038494e+0,
                   2.0531916266377588219e+0, 1.0)
_AS241_FAR_NUM = (2.0103343992922881327e-7, 2.7115555687434875782e-5, 1.2426609473880784386e-3,
                  2.6532189526576123093e-2, 2.9656057182850489123e-1, 1.7848265399172913358e+0,
                  5.4637849111641143699e+0, 6.6579046435011037772e+0)
_AS241_FAR_DEN = (2.0442631033899397856e-15, 1.4215117583164458887e-7, 1.8463183175100546818e-5,
                  7.8686913114561325910e-4, 1.4875361290850614853e-2, 1.3692988092273580531e-1,
                  5.9983220655588793769e-1, 1.0)


def constant_(tensor, val: float):
    """torch's ``nn.init.constant_``: fill ``tensor`` with ``val``.

    Args:
        tensor: the Parameter (or numpy array) to fill.
        val: the value.

    Returns:
        ``tensor``, filled in place.
    """
    return _write(tensor, np.full(tensor.shape, val))


def zeros_(tensor):
    """torch's ``nn.init.zeros_``: fill ``tensor`` with 0.

    Args:
        tensor: the Parameter (or numpy array) to fill.

    Returns:
        ``tensor``, filled in place.
    """
    return constant_(tensor, 0.0)


def ones_(tensor):
    """torch's ``nn.init.ones_``: fill ``tensor`` with 1.

    Args:
        tensor: the Parameter (or numpy array) to fill.

    Returns:
        ``tensor``, filled in place.
    """
    return constant_(tensor, 1.0)


def eye_(tensor):
    """torch's ``nn.init.eye_``: fill the 2-d ``tensor`` with the identity (ones on the diagonal).

    Args:
        tensor: the Parameter (or numpy array) to fill.

    Returns:
        ``tensor``, filled in place.
    """
    if len(tensor.shape) != 2:
        raise ValueError(f"eye_ needs a 2-d parameter, got shape {tuple(tensor.shape)}")
    return _write(tensor, np.eye(*tensor.shape))


def dirac_(tensor, groups: int = 1):
    """torch's ``nn.init.dirac_``: fill the 3-, 4- or 5-d convolution weight ``tensor`` with the Dirac delta,
    so the convolution passes its input through (output channel ``d`` of each group copies input
    channel ``d`` at the kernel's centre; the channels one side has more of stay 0).

    Args:
        tensor: the Parameter (or numpy array) to fill, shaped (out_channels, in_channels / groups, *kernel).
        groups: the convolution's groups (``out_channels`` must divide by it).

    Returns:
        ``tensor``, filled in place.
    """
    shape = tuple(tensor.shape)
    if len(shape) not in (3, 4, 5):
        raise ValueError(f"dirac_: only tensors with 3, 4, or 5 dimensions are supported, got shape {shape}")
    if groups < 1 or shape[0] % groups:
        raise ValueError(f"dirac_: dim 0 ({shape[0]}) must be divisible by groups ({groups})")
    per_group = shape[0] // groups
    values = np.zeros(shape)
    centre = tuple(k // 2 for k in shape[2:])
    for g in range(groups):
        for d in range(min(per_group, shape[1])):
            values[(g * per_group + d, d, *centre)] = 1.0
    return _write(tensor, values)


def orthogonal_(tensor, gain: float = 1.0, generator=None):
    """torch's ``nn.init.orthogonal_``: fill ``tensor`` (2-d or more, flattened after dim 0) with a (semi-)
    orthogonal matrix times ``gain``: the Q of a normal matrix's QR, its columns' signs set by R's
    diagonal so that Q is uniformly distributed (Mezzadri, math-ph/0609050), as torch's. An empty
    ``tensor`` is left alone.

    Args:
        tensor: the Parameter (or numpy array) to fill.
        gain: the scale factor.
        generator: a numpy Generator to draw from (default: the global one, ``lm.manual_seed``).

    Returns:
        ``tensor``, filled in place.
    """
    shape = tuple(tensor.shape)
    if len(shape) < 2:
        raise ValueError(f"orthogonal_: only tensors with 2 or more dimensions are supported, got shape {shape}")
    _draw_dtype(tensor, "orthogonal_")
    if 0 in shape:
        return tensor
    rows = shape[0]
    cols = int(np.prod(shape)) // rows
    flat = _normal(_rng(generator), 0.0, 1.0, (rows, cols), np.float64)
    if rows < cols:
        flat = flat.T
    q, r = np.linalg.qr(flat)
    q *= np.sign(np.diag(r))
    if rows < cols:
        q = q.T
    return _write(tensor, (q * gain).reshape(shape))


def sparse_(tensor, sparsity: float, std: float = 0.01, generator=None):
    """torch's ``nn.init.sparse_`` (Martens 2010): fill the 2-d ``tensor`` with N(0, std**2) draws, then set
    ``ceil(sparsity * rows)`` entries of each column to 0, in rows chosen at random per column.

    Args:
        tensor: the 2-d Parameter (or numpy array) to fill.
        sparsity: the fraction of each column set to 0, in [0, 1] (torch takes any value: above 1 it
            zeroes everything, below 0 all rows but ``ceil(-sparsity * rows)``; refused here).
        std: the standard deviation of the nonzero values.
        generator: a numpy Generator to draw from (default: the global one, ``lm.manual_seed``).

    Returns:
        ``tensor``, filled in place.
    """
    shape = tuple(tensor.shape)
    if len(shape) != 2:
        raise ValueError(f"sparse_: only tensors with 2 dimensions are supported, got shape {shape}")
    if not 0 <= sparsity <= 1:
        raise ValueError(f"sparse_: sparsity is the fraction of each column set to 0, in [0, 1], got {sparsity}")
    if not std >= 0:
        raise ValueError(f"sparse_: std must be at least 0, got {std}")
    rng = _rng(generator)
    rows, cols = shape
    values = _normal(rng, 0.0, std, shape, _draw_dtype(tensor, "sparse_"))
    zeros = math.ceil(sparsity * rows)
    if zeros and cols:  # each column's zeroed rows: the first `zeros` of a random permutation of its rows
        picked = np.argsort(_uniform(rng, 0.0, 1.0, shape, np.float64), axis=0)[:zeros]
        values[picked, np.arange(cols)] = 0
    return _write(tensor, values)


def kaiming_uniform_(tensor, a: float = 0.0, mode: str = "fan_in", nonlinearity: str = "leaky_relu", generator=None):
    """torch's ``nn.init.kaiming_uniform_``: U(-bound, bound) with ``bound = gain * sqrt(3 / fan)``, ``gain =
    calculate_gain(nonlinearity, a)``; Linear and Conv use ``a=sqrt(5)``, a bound of ``1 / sqrt(fan_in)``.
    An empty ``tensor`` is left alone, with torch's warning.

    Args:
        tensor: the Parameter (or numpy array) to fill.
        a: the negative slope of a leaky_relu that follows (for the gain).
        mode: ``"fan_in"`` (default; keeps the forward variance) or ``"fan_out"`` (the backward's).
        nonlinearity: the nonlinearity's name, for ``calculate_gain``.
        generator: a numpy Generator to draw from (default: the global one, ``lm.manual_seed``).

    Returns:
        ``tensor``, filled in place.
    """
    if _is_empty(tensor, "kaiming_uniform_"):
        return tensor
    _draw_dtype(tensor, "kaiming_uniform_")
    std = calculate_gain(nonlinearity, a) / math.sqrt(_fan(tensor, mode))
    bound = math.sqrt(3.0) * std
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor, a: float = 0.0, mode: str = "fan_in", nonlinearity: str = "leaky_relu", generator=None):
    """torch's ``nn.init.kaiming_normal_``: N(0, std**2) with ``std = gain / sqrt(fan)``, ``gain =
    calculate_gain(nonlinearity, a)``. An empty ``tensor`` is left alone, with torch's warning.

    Args:
        tensor: the Parameter (or numpy array) to fill.
        a: the negative slope of a leaky_relu that follows (for the gain).
        mode: ``"fan_in"`` (default; keeps the forward variance) or ``"fan_out"`` (the backward's).
        nonlinearity: the nonlinearity's name, for ``calculate_gain``.
        generator: a numpy Generator to draw from (default: the global one, ``lm.manual_seed``).

    Returns:
        ``tensor``, filled in place.
    """
    if _is_empty(tensor, "kaiming_normal_"):
        return tensor
    _draw_dtype(tensor, "kaiming_normal_")
    std = calculate_gain(nonlinearity, a) / math.sqrt(_fan(tensor, mode))
    return normal_(tensor, 0.0, std, generator)


def xavier_uniform_(tensor, gain: float = 1.0, generator=None):
    """torch's ``nn.init.xavier_uniform_``: U(-a, a) with ``a = gain * sqrt(6 / (fan_in + fan_out))``.

    Args:
        tensor: the Parameter (or numpy array) to fill.
        gain: the scale factor.
        generator: a numpy Generator to draw from (default: the global one, ``lm.manual_seed``).

    Returns:
        ``tensor``, filled in place.
    """
    _draw_dtype(tensor, "xavier_uniform_")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    a = gain * math.sqrt(6.0 / float(fan_in + fan_out))
    return uniform_(tensor, -a, a, generator)


def xavier_normal_(tensor, gain: float = 1.0, generator=None):
    """torch's ``nn.init.xavier_normal_``: N(0, std**2) with ``std = gain * sqrt(2 / (fan_in + fan_out))``.

    Args:
        tensor: the Parameter (or numpy array) to fill.
        gain: the scale factor.
        generator: a numpy Generator to draw from (default: the global one, ``lm.manual_seed``).

    Returns:
        ``tensor``, filled in place.
    """
    _draw_dtype(tensor, "xavier_normal_")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / float(fan_in + fan_out)), generator)


def bias_bound(fan_in: int) -> float:
    """torch's default bias bound for Linear/Conv: 1/sqrt(fan_in) (0 for an empty fan)."""
    return 1 / math.sqrt(fan_in) if fan_in > 0 else 0.0
