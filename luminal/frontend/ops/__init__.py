"""High-level ops, written once as compositions of primitives, and attached to GraphTensor as
torch-named methods and operators."""

from __future__ import annotations

from collections.abc import Callable

from luminal.core import dtype as dt
from luminal.frontend import host, state_tensor
from luminal.frontend.graph import Graph
from luminal.frontend.join import joins, joins_all, op_name
from luminal.frontend.ops import (
    activations,
    combine,
    creation,
    elementwise,
    indexing,
    inplace,
    linalg,
    movement,
    reduce,
)
from luminal.frontend.ops import core as _core
from luminal.frontend.ops.activations import (
    elu,
    gelu,
    hardshrink,
    leaky_relu,
    mish,
    relu,
    sigmoid,
    silu,
    softmin,
    softplus,
    tanh,
    threshold,
)
from luminal.frontend.ops.combinations import combinations
from luminal.frontend.ops.combine import (
    cat,
    chunk,
    column_stack,
    concat,
    concatenate,
    dstack,
    hstack,
    row_stack,
    split,
    stack,
    tensor_split,
    vstack,
)
from luminal.frontend.ops.core import broadcast_shapes, cast, result_type
from luminal.frontend.ops.creation import (
    arange,
    eye,
    full,
    full_like,
    linspace,
    logspace,
    ones,
    ones_like,
    rand_like,
    tril,
    triu,
    zeros,
    zeros_like,
)
from luminal.frontend.ops.distance import cdist, cosine_similarity, pairwise_distance, pdist
from luminal.frontend.ops.einsum import einsum, tensordot
from luminal.frontend.ops.elementwise import (
    abs_ as abs,
)
from luminal.frontend.ops.elementwise import (
    absolute,
    acos,
    acosh,
    add,
    addcdiv,
    addcmul,
    asin,
    asinh,
    atan,
    atan2,
    atanh,
    bitwise_and,
    bitwise_left_shift,
    bitwise_not,
    bitwise_or,
    bitwise_right_shift,
    bitwise_xor,
    ceil,
    clamp,
    clip,
    clone,
    cos,
    cosh,
    div,
    divide,
    eq,
    erf,
    exp,
    exp2,
    expm1,
    fix,
    floor,
    floor_divide,
    fmod,
    ge,
    gt,
    isfinite,
    isinf,
    isnan,
    le,
    lerp,
    log,
    log1p,
    log2,
    log10,
    logical_and,
    logical_not,
    logical_or,
    logical_xor,
    lt,
    masked_fill,
    maximum,
    minimum,
    mul,
    multiply,
    nan_to_num,
    ne,
    neg,
    negative,
    pow,
    reciprocal,
    remainder,
    rsqrt,
    sign,
    sin,
    sinh,
    sqrt,
    square,
    sub,
    subtract,
    tan,
    true_divide,
    trunc,
    where,
)
from luminal.frontend.ops.elementwise import (
    round_ as round,
)
from luminal.frontend.ops.indexing import (
    gather,
    index_add,
    index_copy,
    index_fill,
    index_put,
    index_reduce,
    index_select,
    masked_scatter,
    one_hot,
    put,
    scatter,
    scatter_add,
    scatter_reduce,
    take,
    take_along_dim,
)
from luminal.frontend.ops.integrate import cumulative_trapezoid, trapezoid
from luminal.frontend.ops.linalg import (
    addbmm,
    addmm,
    addmv,
    addr,
    baddbmm,
    bmm,
    chain_matmul,
    cross,
    dot,
    ger,
    inner,
    kron,
    matmul,
    mm,
    mv,
    outer,
    vdot,
)
from luminal.frontend.ops.linalg_solve import cholesky, det, slogdet
from luminal.frontend.ops.linalg_solve import inv as inverse
from luminal.frontend.ops.movement import (
    diag,
    diag_embed,
    diagflat,
    diagonal,
    diff,
    flatten,
    flip,
    meshgrid,
    moveaxis,
    movedim,
    narrow,
    repeat_interleave,
    roll,
    rot90,
    select,
    trace,
    unbind,
)
from luminal.frontend.ops.norms import matrix_norm, norm, renorm, vector_norm
from luminal.frontend.ops.order_stats import kthvalue, median, mode, nanmedian, nanquantile, quantile
from luminal.frontend.ops.pointwise import (
    allclose,
    clamp_max,
    clamp_min,
    copysign,
    deg2rad,
    fmax,
    fmin,
    frexp,
    hypot,
    isclose,
    ldexp,
    logaddexp,
    logaddexp2,
    nextafter,
    rad2deg,
    sinc,
)
from luminal.frontend.ops.random import bernoulli, multinomial, normal, randint_like, randn_like
from luminal.frontend.ops.reduce import (
    all_ as all,
)
from luminal.frontend.ops.reduce import (
    amax,
    amin,
    argmax,
    argmin,
    argsort,
    cummax,
    cummin,
    cumprod,
    cumsum,
    log_softmax,
    logcumsumexp,
    logsumexp,
    mean,
    msort,
    softmax,
    sort,
    std,
    std_mean,
    sum,
    topk,
    var,
    var_mean,
)
from luminal.frontend.ops.reduce import (
    any_ as any,
)
from luminal.frontend.ops.reduce import max_ as max
from luminal.frontend.ops.reduce import min_ as min
from luminal.frontend.ops.reduce import (
    prod_ as prod,
)
from luminal.frontend.ops.reduce_extra import aminmax, count_nonzero, nanmean, nansum
from luminal.frontend.ops.search import bucketize, histc, histogram, isin, searchsorted
from luminal.frontend.ops.special import digamma, erfc, erfinv, lgamma, logit, polygamma, xlogy
from luminal.frontend.ops.special import polygamma_method as _polygamma_method
from luminal.frontend.ops.torch_more import (
    block_diag,
    cartesian_prod,
    corrcoef,
    cov,
    dist,
    dsplit,
    fliplr,
    flipud,
    float_power,
    frac,
    gcd,
    heaviside,
    hsplit,
    lcm,
    logdet,
    permute,
    reshape,
    sgn,
    signbit,
    squeeze,
    swapaxes,
    swapdims,
    t,
    tile,
    transpose,
    tril_indices,
    triu_indices,
    unsqueeze,
    vsplit,
)
from luminal.frontend.tensor import GraphTensor

_E = elementwise


def _flip(f):
    """``f`` with its operands swapped: the reflected operator (``2 - x`` calls ``x.__rsub__(2)``)."""

    def op(self: GraphTensor, other) -> GraphTensor:
        return f(other, self)

    op.__name__ = op.__qualname__ = f"r{f.__name__}"
    op.__doc__ = (f"``other {f.__name__} self``: the reflected form of :func:`{f.__name__}`, which Python calls "
                  f"when the left operand (a number or a numpy array) does not handle the operator.\n\n"
                  f"Args:\n    other: the left operand.")
    return op


def _equality(f):
    """``==``/``!=`` against something that is neither a tensor, a numpy array nor a number defers to
    Python (``t == None`` is False, ``Ellipsis in (t,)`` works) instead of raising. ``np.bool_`` (not a
    ``numbers.Number``) and a symbolic size are numbers here, as to ``<`` and ``+``: Python's default
    would silently answer False."""
    import numbers

    import numpy as np

    from luminal.core.symbolic import Sym

    def op(self: GraphTensor, other) -> GraphTensor:
        if not isinstance(other, (GraphTensor, numbers.Number, np.ndarray, np.bool_, Sym)):
            return NotImplemented
        return f(self, other)

    op.__name__ = op.__qualname__ = f"{f.__name__}_operator"
    op.__doc__ = (f"``self {'==' if f.__name__ == 'eq' else '!='} other`` elementwise (:func:`{f.__name__}`); "
                  "against anything but a tensor, a numpy array or a number Python's default applies "
                  "(``t == None`` is False).\n\nArgs:\n    other: the tensor, array or number compared with.")
    return op


def _dtype_method(d, name: str) -> Callable[[GraphTensor], GraphTensor]:
    """The ``Tensor.float()``-style method casting to ``d``."""

    def method(self: GraphTensor) -> GraphTensor:
        return cast(self, d)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"torch ``Tensor.{name}()``: ``self`` cast to {d.name} (``self.to(lm.{d.name})``)."
    return method


_float_method = _dtype_method(dt.float32, "float")
_half_method = _dtype_method(dt.float16, "half")
_bfloat16_method = _dtype_method(dt.bfloat16, "bfloat16")
_double_method = _dtype_method(dt.float64, "double")
_int_method = _dtype_method(dt.int32, "int")
_bool_method = _dtype_method(dt.bool_, "bool")
_long_method = _dtype_method(dt.int32, "long")


def _where_method(self: GraphTensor, condition, other) -> GraphTensor:
    """torch ``Tensor.where``: ``self`` where ``condition`` holds, else ``other`` (``where(condition,
    self, other)``).

    Args:
        condition: a bool tensor, broadcast against ``self`` and ``other``.
        other: the values taken where ``condition`` is False (a tensor, array or number).
    """
    return where(condition, self, other)


def _pos(self: GraphTensor) -> GraphTensor:
    """``+self``: the tensor itself."""
    return self


def _install():
    methods = {
        # arithmetic and operators
        "add": add, "sub": sub, "mul": mul, "div": div, "neg": neg, "pow": pow, "fmod": fmod,
        "remainder": remainder, "floor_divide": floor_divide, "maximum": maximum, "minimum": minimum,
        "clamp": clamp, "clip": clip, "lerp": lerp, "where": _where_method,
        "__add__": add, "__radd__": _flip(add), "__sub__": sub, "__rsub__": _flip(sub),
        "__mul__": mul, "__rmul__": _flip(mul), "__truediv__": div, "__rtruediv__": _flip(div),
        "__floordiv__": floor_divide, "__rfloordiv__": _flip(floor_divide), "__mod__": remainder,
        "__rmod__": _flip(remainder), "__pow__": pow, "__rpow__": _flip(pow), "__neg__": neg,
        "__pos__": _pos, "__abs__": abs, "__matmul__": matmul, "__rmatmul__": _flip(matmul),
        "__lt__": lt, "__le__": le, "__gt__": gt, "__ge__": ge, "__eq__": _equality(eq), "__ne__": _equality(ne),
        "__and__": _E.bitwise_and, "__rand__": _flip(_E.bitwise_and), "__or__": _E.bitwise_or,
        "__ror__": _flip(_E.bitwise_or), "__xor__": _E.bitwise_xor, "__rxor__": _flip(_E.bitwise_xor),
        "__invert__": _E.bitwise_not,
        "lt": lt, "le": le, "gt": gt, "ge": ge, "eq": eq, "ne": ne,
        "logical_and": logical_and, "logical_or": logical_or, "logical_not": logical_not,
        "logical_xor": logical_xor, "isnan": isnan, "isinf": isinf, "isfinite": isfinite,
        # unary math
        "abs": abs, "sign": sign, "exp": exp, "exp2": exp2, "log": log, "log2": log2, "sqrt": sqrt,
        "rsqrt": rsqrt, "sin": sin, "cos": cos, "tan": tan, "square": square, "reciprocal": reciprocal,
        "floor": floor, "ceil": ceil, "round": round, "trunc": trunc, "erf": erf,
        # activations
        "relu": relu, "leaky_relu": leaky_relu, "sigmoid": sigmoid, "tanh": tanh, "gelu": gelu,
        "silu": silu, "softplus": softplus, "elu": elu, "mish": mish,
        # reductions
        "sum": sum, "mean": mean, "var": var, "std": std, "max": max, "min": min, "amax": amax,
        "amin": amin, "prod": prod, "argmax": argmax, "argmin": argmin, "any": any, "all": all,
        "logsumexp": logsumexp, "softmax": softmax, "log_softmax": log_softmax, "cumsum": cumsum,
        "cumprod": cumprod,
        # indexing, linear algebra, structure
        "gather": gather, "take_along_dim": take_along_dim, "index_select": index_select,
        "scatter": scatter, "scatter_add": scatter_add, "matmul": matmul, "dot": dot,
        "tril": tril, "triu": triu, "split": split, "chunk": chunk, "__getitem__": indexing.getitem,
        # dtypes
        "cast": cast, "type": cast, "float": _float_method,
        "half": _half_method, "bfloat16": _bfloat16_method,
        "double": _double_method, "int": _int_method, "bool": _bool_method,
        # math, selection, scans and sorting (test_api_math.py)
        "log1p": log1p, "expm1": expm1, "log10": log10, "sinh": sinh, "cosh": cosh, "asinh": asinh,
        "acosh": acosh, "atanh": atanh, "atan": atan, "asin": asin, "acos": acos, "atan2": atan2,
        "arctan2": atan2, "arcsin": asin, "arccos": acos, "arctan": atan, "nan_to_num": nan_to_num,
        "clone": clone, "masked_fill": masked_fill, "addcmul": addcmul, "addcdiv": addcdiv, "norm": norm,
        "var_mean": var_mean, "std_mean": std_mean, "cummax": cummax, "cummin": cummin,
        "logcumsumexp": logcumsumexp, "sort": sort, "argsort": argsort, "msort": msort, "topk": topk,
        "long": _long_method, "bitwise_and": bitwise_and, "bitwise_or": bitwise_or,
        "bitwise_xor": bitwise_xor, "bitwise_not": bitwise_not, "bitwise_left_shift": bitwise_left_shift,
        "bitwise_right_shift": bitwise_right_shift, "__lshift__": bitwise_left_shift,
        "__rlshift__": _flip(bitwise_left_shift), "__rshift__": bitwise_right_shift,
        "__rrshift__": _flip(bitwise_right_shift),
        # shapes, indexing and products with torch's names (movement.py, indexing.py, linalg.py)
        "roll": roll, "narrow": narrow, "select": select, "unbind": unbind, "movedim": movedim,
        "moveaxis": moveaxis, "repeat_interleave": repeat_interleave, "diagonal": diagonal, "diag": diag,
        "trace": trace, "addmm": addmm, "baddbmm": baddbmm, "bmm": bmm, "index_add": index_add,
        "index_copy": index_copy, "index_put": index_put, "scatter_reduce": scatter_reduce,
        "index_fill": index_fill, "index_reduce": index_reduce, "masked_scatter": masked_scatter, "put": put,
        "take": take,
        "__setitem__": indexing.setitem,
        # dtype and factory methods with torch's names (test_torch_names.py)
        "to": _core.to, "type_as": _core.type_as, "new_zeros": creation.new_zeros, "new_ones": creation.new_ones,
        "new_full": creation.new_full,
        # more elementwise math (pointwise.py)
        "logaddexp": logaddexp, "logaddexp2": logaddexp2, "sinc": sinc, "hypot": hypot, "copysign": copysign,
        "fmax": fmax, "fmin": fmin,
        "isclose": isclose, "allclose": allclose, "deg2rad": deg2rad, "rad2deg": rad2deg,
        "ldexp": ldexp, "frexp": frexp, "nextafter": nextafter,
        # more reductions (reduce_extra.py)
        "nansum": nansum, "nanmean": nanmean, "count_nonzero": count_nonzero,
        # shapes and products (movement.py, linalg.py)
        "diff": diff, "rot90": rot90, "cross": cross, "kron": kron, "hardshrink": hardshrink,
        # order statistics (order_stats.py)
        "median": median, "nanmedian": nanmedian, "kthvalue": kthvalue, "quantile": quantile,
        "nanquantile": nanquantile, "mode": mode, "histc": histc,
        # square matrices (linalg_solve.py)
        "det": det, "slogdet": slogdet, "inverse": inverse, "cholesky": cholesky,
        # special functions, bounds, min-max, splits and diagonals (special.py, pointwise.py, reduce_extra.py,
        # combine.py, movement.py)
        "logit": logit, "xlogy": xlogy, "erfc": erfc, "erfinv": erfinv, "lgamma": lgamma, "digamma": digamma,
        "polygamma": _polygamma_method, "clamp_min": clamp_min, "clamp_max": clamp_max,
        "aminmax": aminmax, "tensor_split": tensor_split, "diag_embed": diag_embed,
        # torch's other names (x.true_divide(y); the in-place forms are inplace.py's)
        "true_divide": true_divide, "divide": divide, "multiply": multiply, "subtract": subtract,
        "negative": negative, "absolute": absolute, "fix": fix,
        # more of torch's names (torch_more.py, linalg.py)
        "sgn": sgn, "frac": frac, "signbit": signbit, "heaviside": heaviside, "float_power": float_power,
        "fliplr": fliplr, "flipud": flipud, "hsplit": hsplit, "vsplit": vsplit, "dsplit": dsplit, "dist": dist,
        "renorm": renorm,
        "logdet": logdet, "cov": cov, "corrcoef": corrcoef, "gcd": gcd, "lcm": lcm, "outer": outer,
        "swapdims": swapdims,
        # the rest of torch's matrix products (linalg.py)
        "mm": mm, "mv": mv, "vdot": vdot, "inner": inner, "ger": ger, "addmv": addmv, "addr": addr,
        "addbmm": addbmm,
        # random sampling (random.py)
        "bernoulli": bernoulli, "multinomial": multinomial,
    }
    for name, fn in methods.items():  # (a Parameter or Buffer argument joins the tensor's graph: join.py)
        setattr(GraphTensor, name, joins(fn, op_name(name)))
    for name in ("expand_as", "view_as", "reshape_as"):  # (the class's tensor-taking methods: a Parameter joins)
        setattr(GraphTensor, name, joins(getattr(GraphTensor, name)))
    GraphTensor.__hash__ = object.__hash__
    graph_methods = {
        "arange": arange, "full": full, "eye": eye, "zeros": zeros, "ones": ones, "linspace": linspace,
        "logspace": logspace,
    }
    for name, fn in graph_methods.items():
        setattr(Graph, name, fn)


_install()
GraphTensor._pad_mode_dim = staticmethod(movement.pad_mode_dim)  # (Tensor.pad's modes, as F.pad's)
inplace.install()  # x.add_(y) & co.: the handle rebound to the out-of-place result (inplace.py); before States'
state_tensor.install()  # Parameters and Buffers take GraphTensor's methods (state_tensor.py)
host.install()  # np.asarray of a tensor made outside any graph (host.py)

# The public ops (re-exported as ``lm.<name>``): every function defined in this package's modules,
# written out so that type checkers and editors see them (tests/test_api_types.py checks the list).
__all__ = [
    "abs", "absolute", "acos", "acosh", "add", "addbmm", "addcdiv", "addcmul", "addmm", "addmv", "addr", "all",
    "allclose", "amax", "amin",
    "aminmax", "any", "arange", "argmax", "argmin", "argsort", "asin", "asinh", "atan", "atan2", "atanh", "baddbmm",
    "bernoulli", "bitwise_and", "bitwise_left_shift", "bitwise_not", "bitwise_or", "bitwise_right_shift",
    "bitwise_xor", "block_diag", "bmm", "broadcast_shapes", "bucketize", "cartesian_prod", "cast", "cat", "cdist",
    "ceil",
    "chain_matmul", "cholesky",
    "chunk", "clamp", "clamp_max", "clamp_min", "clip", "clone", "column_stack", "combinations", "concat",
    "concatenate",
    "copysign", "corrcoef", "cos", "cosh", "cosine_similarity",
    "count_nonzero", "cov",
    "cross", "cummax", "cummin", "cumprod", "cumsum", "cumulative_trapezoid",
    "deg2rad", "det", "diag", "diag_embed", "diagflat", "diagonal",
    "diff",
    "digamma", "dist", "div", "divide", "dot", "dsplit", "dstack", "einsum", "elu", "eq", "erf", "erfc", "erfinv",
    "exp", "exp2", "expm1",
    "eye", "fix", "flatten", "flip", "fliplr", "flipud", "float_power", "floor", "floor_divide", "fmax", "fmin", "fmod",
    "frac", "frexp", "full", "full_like", "gather", "gcd", "ge", "gelu", "ger", "gt", "hardshrink", "heaviside",
    "histc", "histogram",
    "hsplit",
    "hstack", "hypot", "index_add", "index_copy", "index_fill", "index_put",
    "index_reduce", "index_select", "inner", "inverse", "isclose", "isfinite", "isin",
    "isinf", "isnan", "kron", "kthvalue", "lcm", "ldexp", "le", "leaky_relu", "lerp", "lgamma", "linspace", "log",
    "log10",
    "log1p", "log2", "log_softmax", "logaddexp", "logaddexp2", "logcumsumexp", "logdet", "logical_and", "logical_not",
    "logical_or", "logical_xor", "logit", "logspace", "logsumexp", "lt", "masked_fill", "masked_scatter",
    "matmul", "matrix_norm", "max", "maximum",
    "mean", "median", "meshgrid", "min", "minimum", "mish", "mm", "mode", "moveaxis", "movedim", "msort", "mul",
    "multinomial", "multiply", "mv",
    "nan_to_num", "nanmean", "nanmedian", "nanquantile", "nansum", "narrow", "ne", "neg", "negative", "nextafter",
    "norm", "normal", "one_hot",
    "ones", "ones_like", "outer", "pairwise_distance", "pdist", "permute", "polygamma", "pow", "prod", "put",
    "quantile", "rad2deg", "rand_like", "randint_like", "randn_like",
    "reciprocal", "relu",
    "remainder", "renorm", "repeat_interleave", "reshape", "result_type", "roll", "rot90", "round", "row_stack",
    "rsqrt",
    "scatter", "scatter_add", "scatter_reduce", "searchsorted", "select", "sgn", "sigmoid", "sign", "signbit", "silu",
    "sin", "sinc", "sinh", "slogdet", "softmax", "softmin", "softplus", "sort", "split", "sqrt", "square", "squeeze",
    "stack", "std", "std_mean", "sub", "subtract", "sum", "swapaxes", "swapdims", "t", "take",
    "take_along_dim", "tan", "tanh",
    "tensor_split", "tensordot", "threshold", "tile", "topk", "trace", "transpose", "trapezoid", "tril",
    "tril_indices", "triu",
    "triu_indices", "true_divide", "trunc", "unbind", "unsqueeze", "var", "var_mean", "vdot", "vector_norm", "vsplit",
    "vstack",
    "where", "xlogy", "zeros", "zeros_like",
]

joins_all(globals(), __all__)  # lm.<op>: Parameters, Buffers and host tensors join the op's graph (join.py)
