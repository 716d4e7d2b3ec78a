"""The layers, with torch's names, constructor arguments and state_dict layouts."""

from luminal.nn.layers.activation import (
    ELU,
    GELU,
    LeakyReLU,
    LogSoftmax,
    Mish,
    ReLU,
    Sigmoid,
    SiLU,
    Softmax,
    Softplus,
    Tanh,
)
from luminal.nn.layers.attention import MultiheadAttention, scaled_dot_product_attention
from luminal.nn.layers.containers import ModuleList, Sequential
from luminal.nn.layers.conv import Conv1d, Conv2d, Conv3d, conv1d, conv2d, conv3d, conv_nd
from luminal.nn.layers.dropout import Dropout, dropout
from luminal.nn.layers.linear import Embedding, Flatten, Identity, Linear, Unflatten
from luminal.nn.layers.norm import BatchNorm1d, BatchNorm2d, LayerNorm, RMSNorm
from luminal.nn.layers.pool import AdaptiveAvgPool1d, AdaptiveAvgPool2d, AvgPool1d, AvgPool2d, MaxPool1d, MaxPool2d

__all__ = [
    "AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AvgPool1d", "AvgPool2d", "BatchNorm1d", "BatchNorm2d", "Conv1d",
    "Conv2d", "Conv3d", "Dropout", "ELU", "Embedding", "Flatten", "GELU", "Identity", "LayerNorm", "LeakyReLU",
    "Linear", "LogSoftmax", "MaxPool1d", "MaxPool2d", "Mish", "ModuleList", "MultiheadAttention", "RMSNorm", "ReLU",
    "Sequential", "SiLU", "Sigmoid", "Softmax", "Softplus", "Tanh", "Unflatten", "conv1d", "conv2d", "conv3d",
    "conv_nd",
    "dropout", "scaled_dot_product_attention",
]
