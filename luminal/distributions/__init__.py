"""``lm.distributions``: torch.distributions' core over GraphTensors, under torch's names and argument
orders (docs/distributions.md). Parameters are GraphTensors (of any graph), Parameters, Buffers or
numbers, broadcast together; ``log_prob``, ``entropy``, ``cdf``/``icdf``, the moments and
``kl_divergence`` are graph tensors with gradients to the parameters; ``rsample`` is reparameterised
and ``sample`` is not differentiated; both draw from the graph's own generator (``lm.manual_seed``).
"""

from luminal.distributions import constraints, transforms
from luminal.distributions.bernoulli import Bernoulli
from luminal.distributions.beta import Beta
from luminal.distributions.categorical import Categorical, OneHotCategorical
from luminal.distributions.distribution import Distribution
from luminal.distributions.exponential import Exponential
from luminal.distributions.gamma import Gamma
from luminal.distributions.independent import Independent
from luminal.distributions.kl import kl_divergence, register_kl
from luminal.distributions.laplace import Laplace
from luminal.distributions.multivariate_normal import MultivariateNormal
from luminal.distributions.normal import LogNormal, Normal
from luminal.distributions.poisson import Poisson
from luminal.distributions.transformed_distribution import TransformedDistribution
from luminal.distributions.transforms import (
    AffineTransform,
    ComposeTransform,
    ExpTransform,
    SigmoidTransform,
    TanhTransform,
    Transform,
)
from luminal.distributions.uniform import Uniform

__all__ = ["AffineTransform", "Bernoulli", "Beta", "Categorical", "ComposeTransform", "Distribution", "ExpTransform",
           "Exponential", "Gamma", "Independent", "Laplace", "LogNormal", "MultivariateNormal", "Normal",
           "OneHotCategorical", "Poisson", "SigmoidTransform", "TanhTransform", "Transform", "TransformedDistribution",
           "Uniform", "constraints", "kl_divergence", "register_kl", "transforms"]
