"""luminal: a lazy tensor DSL with training support and a search-based compiler.

``Graph`` builds lazy ``GraphTensor``s; ``compile`` turns outputs into a callable on numpy arrays.
"""

from .compile import compile
from .frontend import DType, Graph, GraphTensor, Sym, bfloat16, float16, float32, float64, int32, sym
from .frontend.dtype import bool_
from .frontend.ops import (
    abs, add, all, amax, amin, any, arange, argmax, argmin, cat, ceil, chunk, clamp, cos, cumprod,
    cumsum, div, dot, elu, eq, erf, exp, exp2, floor, floor_divide, fmod, full_like, gather, ge, gelu,
    gt, index_select, isfinite, isinf, isnan, le, leaky_relu, lerp, log, log2, log_softmax,
    logical_and, logical_not, logical_or, logical_xor, logsumexp, lt, matmul, maximum, mean,
    minimum, mish, mul, ne, neg, one_hot, ones_like, outer, pow, prod, reciprocal, relu, remainder,
    round, rsqrt, scatter, scatter_add, sigmoid, sign, silu, sin, softmax, softplus, split, sqrt,
    square, stack, std, sub, sum, take_along_dim, tan, tanh, tril, triu, trunc, var, where,
    zeros_like,
)

bool = bool_  # noqa: A001 - lm.bool, as torch.bool

__version__ = "0.1.0"
