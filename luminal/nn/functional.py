"""``luminal.nn.functional`` (``import luminal.nn.functional as F``): every functional form in one
namespace, with torch's names and signatures. The layers and these functions share one implementation
(each lives beside its layer under ``luminal/nn/layers``); this module only gathers them.

The losses (``F.cross_entropy``, ``F.mse_loss``, ...) are ``luminal/nn/losses.py``'s, the same
functions ``luminal.train`` exports.

Each is wrapped so that a Parameter or Buffer argument joins the graph of the call
(``F.layer_norm(x, shape, self.weight, self.bias)``; ``luminal/frontend/join.py``).
"""

from __future__ import annotations

from luminal.frontend.join import joins_all as _joins_all
from luminal.frontend.ops import one_hot as _one_hot
from luminal.frontend.ops import pdist
from luminal.nn.layers.activation import (
    celu,
    elu,
    gelu,
    glu,
    hardsigmoid,
    hardswish,
    hardtanh,
    leaky_relu,
    log_softmax,
    logsigmoid,
    mish,
    prelu,
    relu,
    relu6,
    rrelu,
    selu,
    sigmoid,
    silu,
    softmax,
    softplus,
    softsign,
    tanh,
)
from luminal.nn.layers.affine_grid import affine_grid
from luminal.nn.layers.alpha_dropout import alpha_dropout, feature_alpha_dropout
from luminal.nn.layers.attention import scaled_dot_product_attention
from luminal.nn.layers.channel import channel_shuffle, native_channel_shuffle
from luminal.nn.layers.conv import conv1d, conv2d, conv3d, conv_transpose1d, conv_transpose2d, conv_transpose3d
from luminal.nn.layers.deprecated import upsample_bilinear, upsample_nearest
from luminal.nn.layers.dropout import dropout, dropout1d, dropout2d, dropout3d
from luminal.nn.layers.embedding_bag import embedding_bag
from luminal.nn.layers.fold import fold, unfold
from luminal.nn.layers.grid_sample import grid_sample
from luminal.nn.layers.gumbel import gumbel_softmax
from luminal.nn.layers.instance_norm import instance_norm
from luminal.nn.layers.linear import (
    bilinear,
    cosine_similarity,
    embedding,
    linear,
    normalize,
    pairwise_distance,
)
from luminal.nn.layers.local_response_norm import local_response_norm
from luminal.nn.layers.lp_pool import lp_pool1d, lp_pool2d, lp_pool3d
from luminal.nn.layers.max_unpool import max_unpool1d, max_unpool2d, max_unpool3d
from luminal.nn.layers.norm import batch_norm, group_norm, layer_norm, rms_norm
from luminal.nn.layers.pool_nd import (
    adaptive_avg_pool1d,
    adaptive_avg_pool2d,
    adaptive_avg_pool3d,
    adaptive_max_pool1d,
    adaptive_max_pool1d_with_indices,
    adaptive_max_pool2d,
    adaptive_max_pool2d_with_indices,
    adaptive_max_pool3d,
    adaptive_max_pool3d_with_indices,
    avg_pool1d,
    avg_pool2d,
    avg_pool3d,
    max_pool1d,
    max_pool1d_with_indices,
    max_pool2d,
    max_pool2d_with_indices,
    max_pool3d,
    max_pool3d_with_indices,
)
from luminal.nn.layers.sampling import interpolate, pad, pixel_shuffle, pixel_unshuffle
from luminal.nn.layers.shrink import hardshrink, softmin, softshrink, tanhshrink, threshold
from luminal.nn.losses import (
    binary_cross_entropy,
    binary_cross_entropy_with_logits,
    cross_entropy,
    focal_loss,
    huber_loss,
    kl_div,
    l1_loss,
    mse_loss,
    nll_loss,
    smooth_l1_loss,
)
from luminal.nn.losses_ctc import ctc_loss
from luminal.nn.losses_embedding import cosine_embedding_loss, triplet_margin_loss, triplet_margin_with_distance_loss
from luminal.nn.losses_likelihood import gaussian_nll_loss, poisson_nll_loss
from luminal.nn.losses_margin import (
    hinge_embedding_loss,
    margin_ranking_loss,
    multi_margin_loss,
    multilabel_margin_loss,
    multilabel_soft_margin_loss,
    soft_margin_loss,
)


def one_hot(tensor, num_classes: int = -1):
    """torch's ``F.one_hot`` (int32 instead of int64). ``num_classes`` must be given: the indices'
    values are not known when the graph is built.

    Args:
        tensor: int32 class indices of any shape. num_classes: the number of classes.
    """
    return _one_hot(tensor, num_classes)


def upsample(input, size=None, scale_factor=None, mode: str = "nearest", align_corners: bool | None = None):  # noqa: A002
    """torch's deprecated ``F.upsample``: ``interpolate``.

    Args:
        input, size, scale_factor, mode, align_corners: as ``interpolate``.
    """
    return interpolate(input, size, scale_factor, mode, align_corners)


def __dir__():
    return sorted(__all__)


__all__ = [
    "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d", "adaptive_max_pool1d", "adaptive_max_pool2d",
    "adaptive_max_pool3d", "affine_grid", "alpha_dropout", "avg_pool1d",
    "avg_pool2d", "avg_pool3d", "batch_norm", "bilinear", "celu", "conv1d", "conv2d", "conv3d", "conv_transpose1d",
    "conv_transpose2d", "conv_transpose3d", "cosine_similarity", "dropout", "dropout1d", "dropout2d", "dropout3d",
    "elu", "embedding", "embedding_bag", "feature_alpha_dropout",
    "fold", "gelu", "glu", "grid_sample", "group_norm", "hardshrink", "hardsigmoid", "hardswish",
    "hardtanh", "instance_norm", "interpolate", "layer_norm", "leaky_relu", "linear",
    "local_response_norm", "log_softmax", "logsigmoid", "lp_pool1d", "lp_pool2d", "lp_pool3d",
    "max_pool1d", "max_pool2d", "max_pool3d", "max_pool1d_with_indices", "max_pool2d_with_indices",
    "max_pool3d_with_indices", "adaptive_max_pool1d_with_indices", "adaptive_max_pool2d_with_indices",
    "adaptive_max_pool3d_with_indices", "max_unpool1d", "max_unpool2d", "max_unpool3d",
    "mish", "normalize", "one_hot", "pad", "pairwise_distance", "pdist",
    "pixel_shuffle", "pixel_unshuffle", "prelu", "relu", "relu6", "rms_norm", "rrelu", "scaled_dot_product_attention",
    "selu",
    "sigmoid", "silu", "softmax", "softmin", "softplus", "softshrink", "softsign", "tanh", "tanhshrink", "threshold",
    "unfold", "upsample",
]
__all__ += ["binary_cross_entropy", "binary_cross_entropy_with_logits", "cross_entropy", "focal_loss", "huber_loss",
            "kl_div", "l1_loss", "mse_loss", "nll_loss", "smooth_l1_loss"]
__all__ += ["cosine_embedding_loss", "ctc_loss", "gaussian_nll_loss", "hinge_embedding_loss", "margin_ranking_loss",
            "multi_margin_loss", "multilabel_margin_loss", "multilabel_soft_margin_loss", "poisson_nll_loss",
            "soft_margin_loss", "triplet_margin_loss", "triplet_margin_with_distance_loss"]
__all__ += ["channel_shuffle", "gumbel_softmax", "native_channel_shuffle", "upsample_bilinear", "upsample_nearest"]
# (the running statistics stay States: batch_norm and instance_norm update them in place)
_joins_all(globals(), __all__, keep={"batch_norm": ("running_mean", "running_var"),
                                     "instance_norm": ("running_mean", "running_var")})
_LOSSES = tuple(n for n in __all__ if globals()[n].__module__.startswith("luminal.nn.losses"))
