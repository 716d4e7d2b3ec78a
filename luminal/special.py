"""``luminal.special`` (``lm.special``): ``torch.special``'s functions under torch's names and signatures,
so that ``torch.special.ndtr(x)`` ports as ``lm.special.ndtr(x)``.

Most are the ops luminal has under torch's top-level names (``expit`` is ``sigmoid``, ``gammaln``
``lgamma``, ``psi`` ``digamma``); the rest (``erfcx``, ``ndtr``, ``ndtri``, ``log_ndtr``, ``entr``,
``xlog1py``, ``multigammaln``, the Bessel functions ``i0``, ``i0e``, ``i1``, ``i1e``, ``bessel_j0``,
``bessel_j1``, ``bessel_y0``, ``bessel_y1``, ``modified_bessel_i0/i1/k0/k1``,
``scaled_modified_bessel_k0/k1``, ``spherical_bessel_j0``, the incomplete gamma functions ``gammainc``
and ``gammaincc``, Hurwitz's ``zeta``, the orthogonal polynomials ``chebyshev_polynomial_t/u/v/w``,
``shifted_chebyshev_polynomial_t/u/v/w``, ``hermite_polynomial_h/he``, ``laguerre_polynomial_l``,
``legendre_polynomial_p``, whose degree ``n`` must be a number) are ``luminal/frontend/ops/special.py``'s.
``airy_ai`` is ``luminal/frontend/ops/airy.py``'s. Each is wrapped so that a Parameter or Buffer argument
joins the graph of the call (``luminal/frontend/join.py``).
"""

from __future__ import annotations

from luminal.frontend.join import joins_all as _joins_all
from luminal.frontend.ops import reduce as _reduce
from luminal.frontend.ops.activations import sigmoid as _sigmoid
from luminal.frontend.ops.airy import airy_ai
from luminal.frontend.ops.elementwise import erf, exp2, expm1, log1p
from luminal.frontend.ops.elementwise import round_ as round  # noqa: A004 - torch's name
from luminal.frontend.ops.pointwise import sinc
from luminal.frontend.ops.special import (
    bessel_j0,
    bessel_j1,
    bessel_y0,
    bessel_y1,
    chebyshev_polynomial_t,
    chebyshev_polynomial_u,
    chebyshev_polynomial_v,
    chebyshev_polynomial_w,
    digamma,
    entr,
    erfc,
    erfcx,
    erfinv,
    gammainc,
    gammaincc,
    hermite_polynomial_h,
    hermite_polynomial_he,
    i0,
    i0e,
    i1,
    i1e,
    laguerre_polynomial_l,
    legendre_polynomial_p,
    log_ndtr,
    logit,
    modified_bessel_i0,
    modified_bessel_i1,
    modified_bessel_k0,
    modified_bessel_k1,
    multigammaln,
    ndtr,
    ndtri,
    polygamma,
    scaled_modified_bessel_k0,
    scaled_modified_bessel_k1,
    shifted_chebyshev_polynomial_t,
    shifted_chebyshev_polynomial_u,
    shifted_chebyshev_polynomial_v,
    shifted_chebyshev_polynomial_w,
    spherical_bessel_j0,
    xlog1py,
    xlogy,
    zeta,
)
from luminal.frontend.ops.special import lgamma as _lgamma
from luminal.frontend.tensor import GraphTensor


def expit(input) -> GraphTensor:  # noqa: A002 - torch's names
    """torch.special.expit: the logistic sigmoid ``1 / (1 + exp(-x))`` (``lm.sigmoid``).

    Args:
        input: a tensor.
    """
    return _sigmoid(input)


def gammaln(input) -> GraphTensor:  # noqa: A002 - torch's names
    """torch.special.gammaln: ``log |gamma(x)|`` (``lm.lgamma``).

    Args:
        input: a tensor.
    """
    return _lgamma(input)


def psi(input) -> GraphTensor:  # noqa: A002 - torch's names
    """torch.special.psi: the digamma function (``lm.digamma``).

    Args:
        input: a tensor.
    """
    return digamma(input)


def softmax(input, dim: int, *, dtype=None) -> GraphTensor:  # noqa: A002 - torch's names
    """torch.special.softmax: ``lm.softmax`` along ``dim`` (required, as torch's), computed in ``dtype``
    when given.

    Args:
        input: a tensor.
        dim: the dimension to normalise.
        dtype: the dtype to cast ``input`` to first (default: its own).
    """
    return _reduce.softmax(input, dim, dtype)


def log_softmax(input, dim: int, *, dtype=None) -> GraphTensor:  # noqa: A002 - torch's names
    """torch.special.log_softmax: ``lm.log_softmax`` along ``dim`` (required, as torch's).

    Args:
        input: a tensor.
        dim: the dimension to normalise.
        dtype: the dtype to cast ``input`` to first (default: its own).
    """
    return _reduce.log_softmax(input, dim, dtype)


def logsumexp(input, dim, keepdim: bool = False) -> GraphTensor:  # noqa: A002 - torch's names
    """torch.special.logsumexp: ``lm.logsumexp`` over ``dim`` (an int or a tuple, required as torch's).

    Args:
        input: a tensor.
        dim: the dimension(s) to reduce.
        keepdim: keep the reduced dimensions with size 1.
    """
    return _reduce.logsumexp(input, dim, keepdim)


__all__ = ["airy_ai", "bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1", "chebyshev_polynomial_t",
           "chebyshev_polynomial_u", "chebyshev_polynomial_v", "chebyshev_polynomial_w", "digamma", "entr", "erf",
           "erfc", "erfcx", "erfinv", "exp2", "expit", "expm1", "gammainc", "gammaincc", "gammaln",
           "hermite_polynomial_h", "hermite_polynomial_he", "i0", "i0e", "i1", "i1e", "laguerre_polynomial_l",
           "legendre_polynomial_p", "log1p", "log_ndtr", "log_softmax", "logit", "logsumexp", "modified_bessel_i0",
           "modified_bessel_i1", "modified_bessel_k0", "modified_bessel_k1", "multigammaln", "ndtr", "ndtri",
           "polygamma", "psi", "round", "scaled_modified_bessel_k0", "scaled_modified_bessel_k1",
           "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
           "shifted_chebyshev_polynomial_w", "sinc", "softmax", "spherical_bessel_j0", "xlog1py", "xlogy", "zeta"]
_joins_all(globals(), __all__)


def __dir__():
    return sorted(__all__)
