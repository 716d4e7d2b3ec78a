"""The layers, with torch's names, constructor arguments and state_dict layouts."""

from .activation import ELU, GELU, LeakyReLU, LogSoftmax, Mish, ReLU, Sigmoid, SiLU, Softmax, Softplus, Tanh
from .attention import MultiheadAttention, scaled_dot_product_attention
from .containers import ModuleList, Sequential
from .conv import Conv1d, Conv2d, Conv3d, conv1d, conv2d, conv_nd
from .dropout import Dropout, dropout
from .linear import Embedding, Flatten, Identity, Linear, Unflatten
from .norm import BatchNorm1d, BatchNorm2d, LayerNorm, RMSNorm
from .pool import AdaptiveAvgPool1d, AdaptiveAvgPool2d, AvgPool1d, AvgPool2d, MaxPool1d, MaxPool2d

__all__ = [
    "AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AvgPool1d", "AvgPool2d", "BatchNorm1d", "BatchNorm2d", "Conv1d",
    "Conv2d", "Conv3d", "Dropout", "ELU", "Embedding", "Flatten", "GELU", "Identity", "LayerNorm", "LeakyReLU",
    "Linear", "LogSoftmax", "MaxPool1d", "MaxPool2d", "Mish", "ModuleList", "MultiheadAttention", "RMSNorm", "ReLU",
    "Sequential", "SiLU", "Sigmoid", "Softmax", "Softplus", "Tanh", "Unflatten", "conv1d", "conv2d", "conv_nd",
    "dropout", "scaled_dot_product_attention",
]
