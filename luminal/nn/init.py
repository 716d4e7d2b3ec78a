"""``nn.init``: torch's initialisers, by name and formula, on Parameters (``p.data`` written in place).

Draws come from ``luminal.frontend.seed.default_rng()`` (or ``generator=``), so ``lm.manual_seed(n)``
makes a model's initial values reproducible. The distributions match torch's; the streams do not.
Each function also accepts a plain numpy array and returns what it was given, as torch's ``*_``
functions return their tensor.
"""

from __future__ import annotations

import math

import numpy as np

from luminal.frontend import seed
from luminal.frontend.state import State

__all__ = [
    "calculate_gain", "constant_", "eye_", "kaiming_normal_", "kaiming_uniform_", "normal_", "ones_",
    "trunc_normal_", "uniform_", "xavier_normal_", "xavier_uniform_", "zeros_",
]


def _write(p, values):
    if isinstance(p, State):
        p.set(values)
    else:
        np.copyto(p, values, casting="unsafe")
    return p


def _rng(generator):
    return generator if generator is not None else seed.default_rng()


def _draw_dtype(p) -> type:
    """The numpy dtype to draw ``p``'s values in: float32 unless ``p`` holds float64 (or ints). Drawing
    float64 and converting took most of a model's build (0.4 s of 10 million values here, against
    0.05 s), as torch also draws in the parameter's dtype."""
    held = p.data.dtype if isinstance(p, State) else np.asarray(p).dtype
    return np.float32 if held.kind == "f" and held.itemsize <= 4 else np.float64


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


def uniform_(p, a: float = 0.0, b: float = 1.0, generator=None):
    """torch's ``nn.init.uniform_``: fill ``p`` with draws from U(a, b).

    Args:
        p: the Parameter (or numpy array) to fill.
        a: the lower bound.
        b: the upper bound.
        generator: a numpy Generator to draw from (default: the global one, ``lm.manual_seed``).

    Returns:
        ``p``, filled in place.
    """
    return _write(p, _uniform(_rng(generator), a, b, p.shape, _draw_dtype(p)))


def normal_(p, mean: float = 0.0, std: float = 1.0, generator=None):
    """torch's ``nn.init.normal_``: fill ``p`` with draws from N(mean, std**2).

    Args:
        p: the Parameter (or numpy array) to fill.
        mean: the mean.
        std: the standard deviation.
        generator: a numpy Generator to draw from (default: the global one, ``lm.manual_seed``).

    Returns:
        ``p``, filled in place.
    """
    return _write(p, _normal(_rng(generator), mean, std, p.shape, _draw_dtype(p)))


def trunc_normal_(p, mean: float = 0.0, std: float = 1.0, a: float = -2.0, b: float = 2.0, generator=None):
    """N(mean, std) restricted to [a, b], by redrawing the values that fall outside."""
    rng = _rng(generator)
    d = _draw_dtype(p)
    out = _normal(rng, mean, std, p.shape, d)
    bad = (out < a) | (out > b)
    while bad.any():
        out[bad] = _normal(rng, mean, std, int(bad.sum()), d)
        bad = (out < a) | (out > b)
    return _write(p, out)


def constant_(p, val: float):
    """torch's ``nn.init.constant_``: fill ``p`` with ``val``.

    Args:
        p: the Parameter (or numpy array) to fill.
        val: the value.

    Returns:
        ``p``, filled in place.
    """
    return _write(p, np.full(p.shape, val))


def zeros_(p):
    """torch's ``nn.init.zeros_``: fill ``p`` with 0.

    Args:
        p: the Parameter (or numpy array) to fill.

    Returns:
        ``p``, filled in place.
    """
    return constant_(p, 0.0)


def ones_(p):
    """torch's ``nn.init.ones_``: fill ``p`` with 1.

    Args:
        p: the Parameter (or numpy array) to fill.

    Returns:
        ``p``, filled in place.
    """
    return constant_(p, 1.0)


def eye_(p):
    """torch's ``nn.init.eye_``: fill the 2-d ``p`` with the identity (ones on the diagonal).

    Args:
        p: the Parameter (or numpy array) to fill.

    Returns:
        ``p``, filled in place.
    """
    if len(p.shape) != 2:
        raise ValueError(f"eye_ needs a 2-d parameter, got shape {tuple(p.shape)}")
    return _write(p, np.eye(*p.shape))


def kaiming_uniform_(p, a: float = 0.0, mode: str = "fan_in", nonlinearity: str = "leaky_relu", generator=None):
    """U(-bound, bound), bound = gain * sqrt(3 / fan). Linear/Conv use a=sqrt(5): 1/sqrt(fan_in)."""
    if 0 in p.shape:
        return p
    std = calculate_gain(nonlinearity, a) / math.sqrt(_fan(p, mode))
    bound = math.sqrt(3.0) * std
    return uniform_(p, -bound, bound, generator)


def kaiming_normal_(p, a: float = 0.0, mode: str = "fan_in", nonlinearity: str = "leaky_relu", generator=None):
    """torch's ``nn.init.kaiming_normal_``: N(0, std**2) with ``std = gain / sqrt(fan)``, ``gain =
    calculate_gain(nonlinearity, a)``. An empty ``p`` is left alone.

    Args:
        p: the Parameter (or numpy array) to fill.
        a: the negative slope of a leaky_relu that follows (for the gain).
        mode: ``"fan_in"`` (default; keeps the forward variance) or ``"fan_out"`` (the backward's).
        nonlinearity: the nonlinearity's name, for ``calculate_gain``.
        generator: a numpy Generator to draw from (default: the global one, ``lm.manual_seed``).

    Returns:
        ``p``, filled in place.
    """
    if 0 in p.shape:
        return p
    std = calculate_gain(nonlinearity, a) / math.sqrt(_fan(p, mode))
    return normal_(p, 0.0, std, generator)


def xavier_uniform_(p, gain: float = 1.0, generator=None):
    """U(-a, a), a = gain * sqrt(6 / (fan_in + fan_out))."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(p)
    a = gain * math.sqrt(6.0 / float(fan_in + fan_out))
    return uniform_(p, -a, a, generator)


def xavier_normal_(p, gain: float = 1.0, generator=None):
    """torch's ``nn.init.xavier_normal_``: N(0, std**2) with ``std = gain * sqrt(2 / (fan_in + fan_out))``.

    Args:
        p: the Parameter (or numpy array) to fill.
        gain: the scale factor.
        generator: a numpy Generator to draw from (default: the global one, ``lm.manual_seed``).

    Returns:
        ``p``, filled in place.
    """
    fan_in, fan_out = _calculate_fan_in_and_fan_out(p)
    return normal_(p, 0.0, gain * math.sqrt(2.0 / float(fan_in + fan_out)), generator)


def bias_bound(fan_in: int) -> float:
    """torch's default bias bound for Linear/Conv: 1/sqrt(fan_in) (0 for an empty fan)."""
    return 1 / math.sqrt(fan_in) if fan_in > 0 else 0.0
