"""Random sampling in a graph with torch's names: ``randn_like``, ``randint_like``, ``bernoulli``,
``normal`` and ``multinomial``, and the in-place fills (``x.normal_()``, ``uniform_``, ``exponential_``,
``bernoulli_``, ``random_``, ``geometric_``, ``cauchy_``, ``log_normal_``: ``inplace.RANDOM``), all built
on ``Graph.rand``'s uniform float32 noise (drawn afresh on every call of a compiled program from the
graph's generator, which ``lm.manual_seed`` seeds when the graph is made; the streams differ from
torch's, and torch's ``generator=`` is refused).

A uniform is ``k / 2**24`` for an integer ``0 <= k < 2**24``: strictly below 1, and possibly 0. So the
normal's Box-Muller takes the log of ``1 - u`` (never 0), and where 24 bits would cut a tail or a range
short (the normal's radius, the exponential, Cauchy, multinomial's draws, the integers) two uniforms
make a 48-bit one (``uniform48``).
No gradient flows through the noise; ``bernoulli`` and ``normal`` give none to their probabilities, means
and standard deviations either (torch's gradients there are zeros, not the reparameterised ones: write
``mean + std * lm.randn_like(std)`` for those).
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from luminal.core import dtype as dt
from luminal.core.errors import op_error, renamed
from luminal.core.symbolic import shape_str
from luminal.frontend.checks import check_tensors, got, tensor_op
from luminal.frontend.graph import Graph
from luminal.frontend.ops.core import broadcast_shapes, cast
from luminal.frontend.ops.elementwise import (
    add,
    cos,
    div,
    exp,
    floor,
    ge,
    gt,
    le,
    log,
    logical_and,
    logical_not,
    lt,
    minimum,
    mul,
    neg,
    sqrt,
    sub,
    tan,
    where,
)
from luminal.frontend.ops.reduce import amax, any_, cumsum, topk
from luminal.frontend.ops.reduce import sum as sum_
from luminal.frontend.ops.value_checks import known_values
from luminal.frontend.tensor import GraphTensor


def _float_dtype(op: str, x: GraphTensor, dtype) -> dt.DType:
    """The result's dtype (``x``'s unless given), which must be a float one: torch's continuous noise is
    not defined for integer or bool tensors."""
    d = x.dtype if dtype is None else dt.as_dtype(dtype)
    if not d.is_float:
        raise op_error(TypeError, op, f"needs a float dtype (as torch's), got {d.name}", x)
    return d


def _work(d: dt.DType) -> dt.DType:
    """The dtype a result of ``d`` is computed in: float64 for float64, else float32 (half-precision
    results are rounded once from float32, as torch's half kernels compute in float)."""
    return dt.float64 if d == dt.float64 else dt.float32


def uniform48(g: Graph, shape) -> GraphTensor:
    """A float64 uniform ``k / 2**48`` (an integer ``0 <= k < 2**48``) from two ``Graph.rand`` draws,
    ``u1 + u2 * 2**-24``: every value exact, at most ``1 - 2**-48``."""
    return add(cast(g.rand(shape), dt.float64), mul(cast(g.rand(shape), dt.float64), 2.0**-24))


def _standard_normal(g: Graph, shape, d: dt.DType) -> GraphTensor:
    """Standard normal noise of ``shape`` and dtype ``d`` by Box-Muller, ``sqrt(-2 log(1 - u1))
    cos(2 pi u2)``, with a 48-bit ``u1`` (``uniform48``) for the radius: ``1 - u1`` is exact in float64
    and in ``[2**-48, 1]``, so the log is finite and the radius reaches ``sqrt(96 ln 2) = 8.16`` (a 24-bit
    uniform stopped it at 5.77, cutting the tail beyond 5.77 sigma, 6e-8 of the draws, for float32 as
    for float64). ``1 - u1`` is rounded once to the work dtype, so float32 takes its log in float32."""
    w = _work(d)
    one_minus_u1 = cast(sub(1.0, uniform48(g, shape)), w)
    u2 = cast(g.rand(shape), w)
    radius = sqrt(mul(log(one_minus_u1), -2))
    return cast(mul(radius, cos(mul(u2, 2 * math.pi))), d)


@tensor_op("randn_like")
def randn_like(x: GraphTensor, dtype=None, *, generator=None) -> GraphTensor:
    """torch.randn_like: standard normal noise (mean 0, variance 1) of ``x``'s shape, in ``x``'s graph,
    drawn afresh on every call of a compiled program (Box-Muller over ``Graph.rand`` uniforms, 48 bits
    for the radius: the values reach about +-8.16, the tail beyond falling below ``2**-48``). No gradient
    flows to ``x``.

    Args:
        x: the tensor whose shape, graph and (by default) dtype are used (its values are not read).
        dtype: the result's dtype (default ``x``'s), a float dtype: torch's normal noise is not defined
            for integer or bool tensors.
        generator: only None (a graph draws from its own generator: ``lm.manual_seed``).
    """
    _no_generator("randn_like", generator)
    return _standard_normal(x.graph, x.shape, _float_dtype("randn_like", x, dtype))


def _int_arg(what: str, v, op: str = "randint_like") -> int:
    """randint_like's ``low``/``high`` (``random_``'s ``from``/``to``): a Python or numpy int (torch
    refuses floats and bools)."""
    if isinstance(v, GraphTensor):
        raise op_error(TypeError, op, f"{what} must be an int, got a tensor (its value is known only when the "
                       "program runs)")
    if isinstance(v, bool) or not isinstance(v, numbers.Integral):
        raise op_error(TypeError, op, f"{what} must be an int, got {type(v).__name__} {v!r}")
    return int(v)


def _int_range(d: dt.DType) -> tuple[int, int]:
    """The integers a dtype holds exactly, every one of them (torch's bounds for ``randint``): int32's
    range, bool's 0 and 1, a float's ``+-2**digits``."""
    if d.kind == "b":
        return 0, 1
    if d.kind == "i":
        return -2**31, 2**31 - 1
    digits = 1 - round(math.log2(dt.finfo(d).eps))
    return -2**digits, 2**digits


@tensor_op("randint_like")
def randint_like(x: GraphTensor, low=0, high=None, *, generator=None, dtype=None) -> GraphTensor:
    """torch.randint_like: integers drawn uniformly from ``[low, high)``, of ``x``'s shape, in ``x``'s
    graph, afresh on every call of a compiled program.

    Called as torch's: ``randint_like(x, high)`` (low 0) or ``randint_like(x, low, high)``. The draw is
    ``floor(u * (high - low)) + low`` in float64 with a 48-bit uniform ``u`` made of two ``Graph.rand``
    uniforms: ``u <= 1 - 2**-48``, so ``u * n`` stays ``n * 2**-48`` (16 float64 ulps of ``n``) below ``n``
    however it rounds: ``high`` never occurs and ``high - 1`` does, and each value's probability is within
    ``n * 2**-48`` of ``1 / n`` (no visible rounding bias). Ranges wider than ``2**48`` reach only some
    of their values.

    Args:
        x: the tensor whose shape, graph and (by default) dtype are used (its values are not read).
        low: the smallest value (an int; default 0).
        high: the bound, excluded (an int above ``low``).
        dtype: the result's dtype (default ``x``'s): int32, bool, or a float dtype holding every value
            of the range exactly (``low`` and ``high - 1`` within ``+-2**11`` for float16, ``2**8`` for
            bfloat16, ``2**24`` for float32; torch only warns past float16's).
        generator: only None (a graph draws from its own generator: ``lm.manual_seed``).
    """
    _no_generator("randint_like", generator)
    if high is None:  # randint_like(x, high)
        low, high = 0, low
    low, high = _int_arg("low", low), _int_arg("high", high)
    d = x.dtype if dtype is None else dt.as_dtype(dtype)
    if high <= low:
        raise op_error(ValueError, "randint_like", f"expects low < high, got low={low}, high={high} (as torch's)", x)
    lo, hi = _int_range(d)
    if not lo <= low <= high - 1 <= hi:
        raise op_error(ValueError, "randint_like", f"the range [{low}, {high}) does not fit in {d.name}, whose "
                       f"integers are exact from {lo} to {hi}", x)
    u = uniform48(x.graph, x.shape)
    return cast(add(floor(mul(u, float(high - low))), float(low)), d)


def _check_range(op: str, t: GraphTensor, lo: float, hi: float, what: str, of: GraphTensor) -> None:
    """A RuntimeError, as torch's, for values of ``t`` outside ``[lo, hi]`` or NaN: now when ``t``'s
    values are known (a constant), else before a program computing ``of`` runs (``Graph.guard``)."""
    known = known_values(t)
    if known is not None:
        bad = ~((known >= lo) & (known <= hi))
        if bad.any():
            raise op_error(RuntimeError, op, f"expects {what}, got {known[bad].flat[0]}", t)
        return
    bad = logical_not(logical_and(ge(t, lo), le(t, hi)))
    message = op_error(RuntimeError, op, f"expects {what}; {{value}} value(s) are not", t)
    t.graph.guard(any_(bad), sum_(cast(bad, dt.int32)), RuntimeError, str(message), of=of)


def _probability(op: str, p) -> float:
    """A number ``p`` in ``[0, 1]`` (torch's RuntimeError otherwise, a ValueError here: known now)."""
    if isinstance(p, bool) or not isinstance(p, numbers.Real):
        raise op_error(TypeError, op, f"p must be a float, got {type(p).__name__} {p!r}")
    if not 0 <= p <= 1:
        raise op_error(ValueError, op, f"expects p in [0, 1], got p={p} (as torch's)")
    return float(p)


@tensor_op("bernoulli")
def bernoulli(input: GraphTensor, p=None, *, generator=None) -> GraphTensor:  # noqa: A002 - torch's name
    """torch.bernoulli / ``Tensor.bernoulli``: 1 with probability ``input`` (elementwise), else 0, drawn
    afresh on every call of a compiled program; of ``input``'s dtype and shape, as torch's.

    ``u < p`` for a fresh uniform ``u`` in ``[0, 1)``, compared in float32 (float64 for float64
    probabilities), so ``p = 0`` never gives 1 and ``p = 1`` always does; probabilities resolve to
    ``2**-24``. Probabilities outside ``[0, 1]`` or NaN are torch's RuntimeError: raised now when they
    are constants, else before a program computing the result runs (a ``Graph.guard``). No gradient
    flows to ``input`` (torch's is zero).

    Args:
        input: the probabilities, a float tensor; with ``p`` given, only its shape, graph and dtype
            (any dtype, as torch's) are used.
        p: one probability for every element (torch's ``bernoulli(input, p)``), a number in ``[0, 1]``.
        generator: only None (a graph draws from its own generator: ``lm.manual_seed``).
    """
    _no_generator("bernoulli", generator)
    g = input.graph
    u = g.rand(input.shape)
    if p is not None:
        return cast(lt(cast(u, dt.float64), _probability("bernoulli", p)), input.dtype)
    if not input.dtype.is_float:
        raise op_error(TypeError, "bernoulli", f"needs float probabilities (as torch's), got {input.dtype.name}",
                       input)
    w = _work(input.dtype)
    out = cast(lt(cast(u, w), cast(input, w)), input.dtype)  # (a comparison: no gradient to input)
    _check_range("bernoulli", input, 0, 1, "every probability in [0, 1]", out)
    return out


def normal(mean, std=1.0, *, generator=None) -> GraphTensor:
    """torch.normal for tensors: normal noise with the given means and standard deviations (broadcast
    together), ``mean + std * randn``, drawn afresh on every call of a compiled program.

    The dtype is ``mean``'s when it is a tensor, else ``std``'s (torch's), a float one; half-precision
    results are computed in float32 and rounded once. No gradient flows to ``mean`` or ``std``: torch's
    ``normal`` gives them zeros, not the reparameterised ``1`` and ``noise`` (for those write
    ``mean + std * lm.randn_like(std)``). A negative or NaN ``std`` is torch's RuntimeError: raised now
    when known, else before a program computing the result runs (a ``Graph.guard``). torch's
    ``normal(mean, std, size)`` of two numbers needs a graph: ``mean + std * lm.randn_like(g.zeros(size))``.

    Args:
        mean: the means, a float tensor or a number.
        std: the standard deviations, a float tensor or a non-negative number (default 1.0); at least
            one of ``mean`` and ``std`` is a tensor.
        generator: only None (a graph draws from its own generator: ``lm.manual_seed``).
    """
    with renamed("normal"):
        _no_generator("normal", generator)
        for what, v in (("mean", mean), ("std", std)):
            if not isinstance(v, GraphTensor) and (isinstance(v, bool) or not isinstance(v, numbers.Real)):
                raise op_error(TypeError, "normal", f"{what} must be a tensor or a number, got {got(v)}")
        tensors = {k: v for k, v in (("mean", mean), ("std", std)) if isinstance(v, GraphTensor)}
        if not tensors:
            raise op_error(TypeError, "normal", "needs mean or std to be a tensor: for numbers write "
                           "mean + std * lm.randn_like(g.zeros(size)) (torch's normal(mean, std, size))")
        check_tensors("normal", **tensors)
        first = next(iter(tensors.values()))
        d = first.dtype
        if not d.is_float:
            raise op_error(TypeError, "normal", f"needs float tensors (as torch's), got {d.name}", first)
        if not isinstance(std, GraphTensor) and not std >= 0:
            raise op_error(ValueError, "normal", f"expects std >= 0, got std={std} (as torch's)")
        shape = broadcast_shapes("normal", *tensors.values())
        w, g = _work(d), first.graph
        m, s = (cast(v.detach(), w) if isinstance(v, GraphTensor) else float(v) for v in (mean, std))
        out = cast(add(m, mul(s, _standard_normal(g, shape, w))), d)
        if isinstance(std, GraphTensor):
            _check_range("normal", std, 0, math.inf, "every std >= 0", out)
        return out


def _no_generator(op: str, generator) -> None:
    """torch's ``generator=``: only None. A graph draws from its own generator (``Graph.rng``, seeded
    from ``lm.manual_seed``'s when the graph is made), at every run; a torch.Generator cannot reach it."""
    if generator is not None:
        raise op_error(NotImplementedError, op, f"generator= is not supported (got {got(generator)}): a graph draws "
                       "from its own generator, seeded by lm.manual_seed before the graph is made")


def _refuse(op: str, t: GraphTensor, known_bad, bad: GraphTensor, message: str, of: GraphTensor) -> None:
    """torch's RuntimeError ``message`` (``{value}`` in it: how many entries are bad) if any entry of
    the bool ``bad`` is True: now when ``t``'s values are known (``known_bad``: the same test in numpy,
    of the float64 values), else before a program computing ``of`` runs (a ``Graph.guard``)."""
    known = known_values(t)
    if known is not None:
        with np.errstate(invalid="ignore"):
            count = int(np.sum(known_bad(np.asarray(known, np.float64))))
        if count:
            raise op_error(RuntimeError, op, message.format(value=count), t)
        return
    t.graph.guard(any_(bad), sum_(cast(bad, dt.int32)), RuntimeError, str(op_error(RuntimeError, op, message, t)),
                  of=of)


@tensor_op("multinomial")
def multinomial(input: GraphTensor, num_samples: int, replacement: bool = False, *,  # noqa: A002 - torch's name
                generator=None) -> GraphTensor:
    """torch.multinomial / ``Tensor.multinomial``: ``num_samples`` category indices drawn per row of
    (unnormalised, non-negative) weights, afresh on every call of a compiled program. A 1-d ``input``
    of ``n`` weights gives ``(num_samples,)``, a 2-d one ``(rows, num_samples)``; int32 (luminal's
    integer type, where torch's is int64). No gradient flows to ``input`` (torch's has none).

    With ``replacement``, each draw is the inverse CDF of a 48-bit uniform ``u``: the last non-zero
    weight whose range (from the running sums, in float64) starts at or below ``u * total``, so a
    zero weight is never drawn, however the sums round. Without, the categories race: weight ``p`` finishes at
    ``E / p`` for an exponential ``E`` (compared as ``log(E) - log(p)``, finite for every positive
    weight; zero weights never finish), and the first ``num_samples`` to finish
    are drawn in order, so the first is distributed as the weights and each next as the weights of
    those left (torch's order). There ``num_samples`` may not exceed the categories, nor the non-zero
    weights of any row (torch's CPU kernel then returns zero-weight categories; this refuses). The
    search compares every draw with every running sum (``searchsorted``): it costs rows x
    ``num_samples`` x categories, meant for the category counts of models (classes, tokens).

    Negative, infinite or NaN weights, rows summing to 0, and (without replacement) rows with too
    few non-zero weights are torch's RuntimeErrors: raised now when ``input`` is a constant, else
    before a program computing the result runs (a ``Graph.guard``).

    Args:
        input: the weights, a 1-d or 2-d float tensor (its last dim the categories, at most 2**24).
        num_samples: how many indices per row, an int >= 1.
        replacement: draw with replacement (default False: distinct indices per row).
        generator: only None (a graph draws from its own generator: ``lm.manual_seed``).
    """
    _no_generator("multinomial", generator)
    if not input.dtype.is_float:
        raise op_error(TypeError, "multinomial", f"needs float weights (as torch's), got {input.dtype.name}", input)
    if input.ndim not in (1, 2):
        raise op_error(ValueError, "multinomial", f"prob_dist must be 1 or 2 dim (as torch's), got {input.ndim}-d",
                       input)
    if isinstance(num_samples, bool) or not isinstance(num_samples, numbers.Integral):
        raise op_error(TypeError, "multinomial", f"num_samples must be an int, got {got(num_samples)}", input)
    num_samples, n = int(num_samples), input.shape[-1]
    if num_samples <= 0:
        raise op_error(ValueError, "multinomial", f"cannot sample num_samples={num_samples} <= 0 samples (as torch's)",
                       input)
    if isinstance(n, int) and n == 0:  # (torch: an empty max, or a sum of probabilities <= 0)
        raise op_error(ValueError, "multinomial", "needs at least one category, got none", input)
    if isinstance(n, int) and n > 2**24:
        raise op_error(ValueError, "multinomial", f"number of categories cannot exceed 2**24, got {n} (as torch's)",
                       input)
    if isinstance(n, int) and not replacement and num_samples > n:
        raise op_error(ValueError, "multinomial", f"cannot sample num_samples={num_samples} > {n} categories without "
                       "replacement (as torch's)", input)
    g, p = input.graph, cast(input.detach(), dt.float64)
    shape = (*input.shape[:-1], num_samples)
    if replacement:
        cdf = cumsum(p, -1)
        target = mul(uniform48(g, shape), amax(cdf, -1, keepdim=True))  # (the last sum, also over a symbolic dim)
        # the last non-zero weight whose range starts (the running sum before it; the first one's is 0) at
        # or below the target: not a count of the running sums below it, which drew a zero weight where
        # the scan's tree order put its running sum an ulp below the one before it
        starts = cdf.pad([1, 0]).pad([0, -1]).unsqueeze(-2)
        hit = logical_and(gt(p, 0).unsqueeze(-2), le(starts, target.unsqueeze(-1)))
        out = amax(where(hit, g.arange(n), -1), -1)
    else:
        exponential = neg(log(add(uniform48(g, shape[:-1] + (n,)), 2.0**-49)))  # (> 0: u + 2**-49 < 1)
        # the finishing times E / p compared as logs: E / p overflowed to inf for p below about 1e-307,
        # a tie with the zero weights' inf (log(0) = -inf: theirs stays inf, never before a weight's)
        out = topk(sub(log(exponential), log(p)), num_samples, largest=False).indices
    checks = [(lambda k: ~(np.isfinite(k) & (k >= 0)), logical_not(logical_and(ge(p, 0), lt(p, math.inf))),
               "probability tensor contains either inf, nan or element < 0 ({value} of them)"),
              (lambda k: k.sum(-1) <= 0, le(sum_(p, -1), 0),
               "invalid multinomial distribution (sum of probabilities <= 0) in {value} row(s)")]
    if not replacement:
        checks.append((lambda k: (k > 0).sum(-1) < num_samples, lt(sum_(cast(gt(p, 0), dt.int32), -1), num_samples),
                       f"cannot sample {num_samples} without replacement from fewer non-zero weights (in "
                       "{value} row(s))"))
    for known_bad, bad, message in checks:
        _refuse("multinomial", input, known_bad, bad, message, out)
    return out


# ---------------------------------------------------------------------------------------------------------
# In-place random fills (``x.normal_()``, ``x.uniform_(a, b)``, ...): ops/inplace.py's RANDOM installs them
# on GraphTensor and State, rebinding the handle to the result (of the tensor's shape and dtype). Each
# draws afresh on every call of a compiled program and reads nothing of the tensor but its shape, graph
# and dtype (no gradient flows to its old values, as torch's). Arguments are checked as torch's.


def _number(op: str, what: str, v) -> float:
    """A fill's parameter: a real number (not a bool or a tensor, as torch's float arguments)."""
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        raise op_error(TypeError, op, f"{what} must be a number, got {got(v)}")
    return float(v)


def _float_fill(op: str, x: GraphTensor, generator) -> dt.DType:
    """The work dtype of a continuous fill of ``x``, which must be a float tensor (as torch's)."""
    _no_generator(op, generator)
    if not x.dtype.is_float:
        raise op_error(TypeError, op, f"needs a float tensor (as torch's: a continuous distribution), got "
                       f"{x.dtype.name}", x)
    return _work(x.dtype)


def _exponential(g: Graph, shape, w: dt.DType) -> GraphTensor:
    """Exponential noise of mean 1, ``-log(1 - u)`` of a 48-bit ``u`` (``1 - u`` exact in float64, then
    rounded once to ``w``): finite, reaching 33.3 (a 24-bit uniform would stop at 16.6)."""
    return neg(log(cast(sub(1.0, uniform48(g, shape)), w)))


def normal_fill(x: GraphTensor, mean=0.0, std=1.0, *, generator=None) -> GraphTensor:
    """normal noise of mean ``mean`` and standard deviation ``std >= 0`` (``randn_like``'s, to 8.16 std)"""
    mean, std = _number("normal_", "mean", mean), _number("normal_", "std", std)
    if not std >= 0:
        raise op_error(ValueError, "normal_", f"expects std >= 0, got std={std} (as torch's)", x)
    w = _float_fill("normal_", x, generator)
    return cast(add(mul(_standard_normal(x.graph, x.shape, w), std), mean), x.dtype)


def log_normal_fill(x: GraphTensor, mean=1.0, std=2.0, *, generator=None) -> GraphTensor:
    """``exp`` of normal noise of mean ``mean`` and standard deviation ``std > 0``"""
    mean, std = _number("log_normal_", "mean", mean), _number("log_normal_", "std", std)
    if not std > 0:
        raise op_error(ValueError, "log_normal_", f"expects std > 0, got std={std} (as torch's)", x)
    w = _float_fill("log_normal_", x, generator)
    return cast(exp(add(mul(_standard_normal(x.graph, x.shape, w), std), mean)), x.dtype)


def uniform_fill(x: GraphTensor, from_=0.0, to=1.0, *, generator=None) -> GraphTensor:
    """uniform noise in ``[from_, to)``, ``from_ + (to - from_) * u`` (48-bit ``u`` for float64, else
    24-bit; rounding to a narrow dtype may give ``to`` itself, as torch's half kernels may); torch
    refuses ``from_ > to`` and bounds past the dtype's range"""
    from_, to = _number("uniform_", "from", from_), _number("uniform_", "to", to)
    w = _float_fill("uniform_", x, generator)
    biggest = float(dt.finfo(x.dtype).max)
    for what, v in (("from", from_), ("to", to)):
        if not -biggest <= v <= biggest:
            raise op_error(ValueError, "uniform_", f"{what}={v} is out of bounds for {x.dtype.name} (as torch's)", x)
    if from_ > to:
        raise op_error(ValueError, "uniform_", f"expects a [from, to) range, got from={from_} > to={to} (as torch's)",
                       x)
    g = x.graph
    u = uniform48(g, x.shape) if w == dt.float64 else cast(g.rand(x.shape), dt.float64)
    return cast(add(mul(u, to - from_), from_), x.dtype)


def exponential_fill(x: GraphTensor, lambd=1.0, *, generator=None) -> GraphTensor:
    """exponential noise of rate ``lambd > 0`` (mean ``1 / lambd``)"""
    lambd = _number("exponential_", "lambd", lambd)
    if not lambd > 0:
        raise op_error(ValueError, "exponential_", f"expects lambd > 0, got lambd={lambd} (as torch's)", x)
    w = _float_fill("exponential_", x, generator)
    return cast(div(_exponential(x.graph, x.shape, w), lambd), x.dtype)


def cauchy_fill(x: GraphTensor, median=0.0, sigma=1.0, *, generator=None) -> GraphTensor:
    """Cauchy noise of median ``median`` and scale ``sigma > 0``, ``median + sigma tan(pi v)`` for the
    48-bit uniform ``v`` moved to ``(-1/2, 1/2)`` (by ``2**-49 - 1/2``), in float64, where ``pi v``
    stays below float64's ``pi / 2``: finite, of either sign as drawn"""
    median, sigma = _number("cauchy_", "median", median), _number("cauchy_", "sigma", sigma)
    if not sigma > 0:
        raise op_error(ValueError, "cauchy_", f"expects sigma > 0, got sigma={sigma} (as torch's)", x)
    _float_fill("cauchy_", x, generator)
    v = add(uniform48(x.graph, x.shape), 2.0**-49 - 0.5)
    return cast(add(mul(tan(mul(v, math.pi)), sigma), median), x.dtype)


def bernoulli_fill(x: GraphTensor, p=0.5, *, generator=None) -> GraphTensor:
    """1 with probability ``p`` (a number in ``[0, 1]``, or a float tensor of probabilities broadcast to
    the tensor's shape), else 0; any dtype, as torch's (``bernoulli``'s draws and checks)"""
    _no_generator("bernoulli_", generator)
    if isinstance(p, GraphTensor):
        check_tensors("bernoulli_", input=x, p=p)
        try:
            p = p.expand(*x.shape)
        except ValueError:
            raise op_error(ValueError, "bernoulli_", f"p of shape {shape_str(p.shape)} does not broadcast to the "
                           f"tensor's shape {shape_str(x.shape)}", x, p) from None
        return cast(bernoulli(p), x.dtype)
    return bernoulli(x, _probability("bernoulli_", p))


_UNSET = object()  # random_'s ``to`` when not given (None means: to the dtype's largest integer)


def random_fill(x: GraphTensor, from_=None, to=_UNSET, *, generator=None) -> GraphTensor:
    """integers drawn uniformly from ``[from_, to)`` (``randint_like``'s), in torch's forms:
    ``random_()`` the dtype's integers from 0 (to ``2**24`` for float32, ``2**31 - 1`` for int32, 1 for
    bool), ``random_(to)`` from 0, ``random_(from_, to)``, and ``random_(from_, None)`` from ``from_`` to
    the dtype's largest"""
    _no_generator("random_", generator)
    largest = _int_range(x.dtype)[1]
    if to is _UNSET:  # random_() or random_(to)
        from_, to = 0, largest + 1 if from_ is None else from_
    elif to is None:
        to = largest + 1
    from_, to = _int_arg("from", 0 if from_ is None else from_, "random_"), _int_arg("to", to, "random_")
    if from_ >= to:
        raise op_error(ValueError, "random_", f"expects from < to, got from={from_}, to={to} (as torch's)", x)
    return randint_like(x, from_, to, dtype=x.dtype)


def geometric_fill(x: GraphTensor, p, *, generator=None) -> GraphTensor:
    """the number of Bernoulli(``p``) trials to the first success, ``p`` in ``(0, 1)``: ``1 + floor(E /
    -log(1 - p))`` for an exponential ``E`` (so ``P(> k) = (1 - p)**k``), in float64; int32 results past
    its largest integer (``p`` below about 1.6e-8) are clamped to it; not for bool (as torch's)"""
    _no_generator("geometric_", generator)
    p = _number("geometric_", "p", p)
    if not 0 < p < 1:
        raise op_error(ValueError, "geometric_", f"expects p in (0, 1), got p={p} (as torch's)", x)
    if x.dtype == dt.bool_:
        raise op_error(TypeError, "geometric_", "is not defined for bool tensors (as torch's)", x)
    out = add(floor(div(_exponential(x.graph, x.shape, dt.float64), -math.log1p(-p))), 1.0)
    if x.dtype.kind == "i":
        out = minimum(out, float(_int_range(x.dtype)[1]))
    return cast(out, x.dtype)
