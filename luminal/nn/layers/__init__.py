"""The layers, with torch's names, constructor arguments and state_dict layouts."""

from luminal.nn.layers.activation import (
    CELU,
    ELU,
    GELU,
    GLU,
    SELU,
    Hardsigmoid,
    Hardswish,
    Hardtanh,
    LeakyReLU,
    LogSigmoid,
    LogSoftmax,
    Mish,
    PReLU,
    ReLU,
    ReLU6,
    RReLU,
    Sigmoid,
    SiLU,
    Softmax,
    Softplus,
    Softsign,
    Tanh,
)
from luminal.nn.layers.adaptive_softmax import AdaptiveLogSoftmaxWithLoss
from luminal.nn.layers.alpha_dropout import AlphaDropout, FeatureAlphaDropout
from luminal.nn.layers.attention import MultiheadAttention, scaled_dot_product_attention
from luminal.nn.layers.channel import ChannelShuffle, Softmax2d
from luminal.nn.layers.containers import ModuleDict, ModuleList, ParameterDict, ParameterList, Sequential
from luminal.nn.layers.conv import (
    Conv1d,
    Conv2d,
    Conv3d,
    ConvTranspose1d,
    ConvTranspose2d,
    ConvTranspose3d,
    conv1d,
    conv2d,
    conv3d,
    conv_nd,
)
from luminal.nn.layers.deprecated import NLLLoss2d
from luminal.nn.layers.dropout import Dropout, Dropout1d, Dropout2d, Dropout3d, dropout
from luminal.nn.layers.embedding_bag import EmbeddingBag
from luminal.nn.layers.fold import Fold, Unfold
from luminal.nn.layers.instance_norm import InstanceNorm1d, InstanceNorm2d, InstanceNorm3d
from luminal.nn.layers.lazy import (
    LazyBatchNorm1d,
    LazyBatchNorm2d,
    LazyBatchNorm3d,
    LazyConv1d,
    LazyConv2d,
    LazyConv3d,
    LazyConvTranspose1d,
    LazyConvTranspose2d,
    LazyConvTranspose3d,
    LazyInstanceNorm1d,
    LazyInstanceNorm2d,
    LazyInstanceNorm3d,
    LazyLinear,
    UninitializedBuffer,
    UninitializedParameter,
)
from luminal.nn.layers.linear import (
    Bilinear,
    CosineSimilarity,
    Embedding,
    Flatten,
    Identity,
    Linear,
    PairwiseDistance,
    Unflatten,
)
from luminal.nn.layers.local_response_norm import LocalResponseNorm
from luminal.nn.layers.loss import (
    BCELoss,
    BCEWithLogitsLoss,
    CrossEntropyLoss,
    HuberLoss,
    KLDivLoss,
    L1Loss,
    MSELoss,
    NLLLoss,
    SmoothL1Loss,
)
from luminal.nn.layers.loss_more import (
    CosineEmbeddingLoss,
    CTCLoss,
    GaussianNLLLoss,
    HingeEmbeddingLoss,
    MarginRankingLoss,
    MultiLabelMarginLoss,
    MultiLabelSoftMarginLoss,
    MultiMarginLoss,
    PoissonNLLLoss,
    SoftMarginLoss,
    TripletMarginLoss,
    TripletMarginWithDistanceLoss,
)
from luminal.nn.layers.lp_pool import LPPool1d, LPPool2d, LPPool3d
from luminal.nn.layers.max_unpool import MaxUnpool1d, MaxUnpool2d, MaxUnpool3d
from luminal.nn.layers.norm import BatchNorm1d, BatchNorm2d, BatchNorm3d, GroupNorm, LayerNorm, RMSNorm
from luminal.nn.layers.padding import (
    CircularPad1d,
    CircularPad2d,
    CircularPad3d,
    ConstantPad1d,
    ConstantPad2d,
    ConstantPad3d,
    ReflectionPad1d,
    ReflectionPad2d,
    ReflectionPad3d,
    ReplicationPad1d,
    ReplicationPad2d,
    ReplicationPad3d,
    ZeroPad1d,
    ZeroPad2d,
    ZeroPad3d,
)
from luminal.nn.layers.pool import AdaptiveAvgPool1d, AdaptiveAvgPool2d, AvgPool1d, AvgPool2d, MaxPool1d, MaxPool2d
from luminal.nn.layers.pool_nd import (
    AdaptiveAvgPool3d,
    AdaptiveMaxPool1d,
    AdaptiveMaxPool2d,
    AdaptiveMaxPool3d,
    AvgPool3d,
    MaxPool3d,
)
from luminal.nn.layers.recurrent import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNBase, RNNCell, RNNCellBase
from luminal.nn.layers.sampling import (
    PixelShuffle,
    PixelUnshuffle,
    Upsample,
    UpsamplingBilinear2d,
    UpsamplingNearest2d,
)
from luminal.nn.layers.shrink import Hardshrink, Softmin, Softshrink, Tanhshrink, Threshold
from luminal.nn.layers.sync_batchnorm import SyncBatchNorm
from luminal.nn.layers.transformer import (
    TransformerDecoder,
    TransformerDecoderLayer,
    TransformerEncoder,
    TransformerEncoderLayer,
)
from luminal.nn.layers.transformer_model import Transformer

__all__ = [
    "AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveAvgPool3d", "AdaptiveMaxPool1d", "AdaptiveMaxPool2d",
    "AdaptiveMaxPool3d", "AlphaDropout",
    "AvgPool1d", "AvgPool2d", "AvgPool3d", "BCELoss", "BCEWithLogitsLoss", "BatchNorm1d",
    "BatchNorm2d", "BatchNorm3d", "Bilinear", "CELU",
    "CircularPad1d", "CircularPad2d", "CircularPad3d", "ConstantPad1d", "ConstantPad2d", "ConstantPad3d", "Conv1d",
    "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d", "CosineSimilarity", "CrossEntropyLoss",
    "Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "ELU", "Embedding", "EmbeddingBag",
    "FeatureAlphaDropout", "Flatten", "Fold", "GELU", "GLU", "GRU",
    "GRUCell", "GroupNorm", "Hardshrink", "Hardsigmoid", "Hardswish", "Hardtanh", "HuberLoss", "Identity",
    "InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d", "KLDivLoss", "L1Loss", "LSTM", "LSTMCell", "LayerNorm",
    "LPPool1d", "LPPool2d", "LPPool3d", "LeakyReLU", "Linear", "LocalResponseNorm",
    "LogSigmoid", "LogSoftmax", "MSELoss", "MaxPool1d", "MaxPool2d", "MaxPool3d", "MaxUnpool1d", "MaxUnpool2d",
    "MaxUnpool3d", "Mish",
    "ModuleDict", "ModuleList", "MultiheadAttention", "NLLLoss", "PReLU", "PairwiseDistance", "ParameterDict",
    "ParameterList", "PixelShuffle", "PixelUnshuffle", "RMSNorm", "RNN", "RNNBase", "RNNCell", "RNNCellBase", "RReLU",
    "ReLU",
    "ReLU6", "ReflectionPad1d", "ReflectionPad2d", "ReflectionPad3d", "ReplicationPad1d", "ReplicationPad2d",
    "ReplicationPad3d", "SELU", "Sequential", "SiLU", "Sigmoid", "SmoothL1Loss", "Softmax", "Softmin", "Softplus",
    "Softshrink", "Softsign", "Tanh", "Tanhshrink", "Threshold", "Transformer", "TransformerDecoder",
    "TransformerDecoderLayer", "TransformerEncoder", "TransformerEncoderLayer", "Unflatten", "Unfold", "Upsample",
    "UpsamplingBilinear2d",
    "UpsamplingNearest2d", "ZeroPad1d", "ZeroPad2d", "ZeroPad3d", "conv1d", "conv2d", "conv3d", "conv_nd", "dropout",
    "scaled_dot_product_attention",
]
__all__ += ["CTCLoss", "CosineEmbeddingLoss", "GaussianNLLLoss", "HingeEmbeddingLoss", "MarginRankingLoss",
            "MultiLabelMarginLoss", "MultiLabelSoftMarginLoss", "MultiMarginLoss", "PoissonNLLLoss", "SoftMarginLoss",
            "TripletMarginLoss", "TripletMarginWithDistanceLoss"]
__all__ += ["ChannelShuffle", "NLLLoss2d", "Softmax2d"]
__all__ += ["LazyBatchNorm1d", "LazyBatchNorm2d", "LazyBatchNorm3d", "LazyConv1d", "LazyConv2d", "LazyConv3d",
            "LazyConvTranspose1d", "LazyConvTranspose2d", "LazyConvTranspose3d", "LazyInstanceNorm1d",
            "LazyInstanceNorm2d", "LazyInstanceNorm3d", "LazyLinear", "UninitializedBuffer", "UninitializedParameter"]
__all__ += ["AdaptiveLogSoftmaxWithLoss"]
__all__ += ["SyncBatchNorm"]
