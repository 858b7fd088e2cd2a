"""Differentiable primitives: one class per op, forward and backward on raw arrays."""
from .activations import LogSoftmax, ReLU, Sigmoid, Softmax, Tanh, stable_sigmoid
from .base import Context, Function, sum_to_shape
from .conversion import Cast, Copy, ToDevice
from .conv import Conv1d
from .elementwise import (
    Abs, Add, Clip, Div, Exp, Log, Maximum, Minimum, Mul, Neg, Pow, Sqrt, Sub, broadcast_shape,
)
from .linalg import MatMul
from .losses import (
    BCEWithLogits, BinaryCrossEntropy, CrossEntropy, MSELoss, NLLLoss, PlainCrossEntropy,
    SoftCrossEntropy,
)
from .normalization import LayerNorm
from .reductions import Max, Mean, Min, Norm, Sum
from .selection import Dropout, Embedding, MaskedFill, Where, check_token_ids
from .shape import (
    BroadcastTo, Concatenate, GetItem, Reshape, Split, Stack, Transpose, Unbind, ViewOf,
    WriteRegion,
)

__all__ = [
    "Context", "Function", "sum_to_shape", "broadcast_shape", "stable_sigmoid",
    "check_token_ids",
    "Add", "Sub", "Mul", "Div", "Neg", "Pow", "Exp", "Log", "Sqrt", "Abs", "Maximum",
    "Minimum", "Clip", "ReLU", "Tanh", "Sigmoid", "Softmax", "LogSoftmax", "MatMul", "Sum",
    "Mean", "Max", "Min", "Reshape", "Transpose", "BroadcastTo", "Concatenate", "Stack",
    "Split", "Unbind", "GetItem", "Where", "MaskedFill", "Embedding", "Dropout", "CrossEntropy",
    "SoftCrossEntropy", "NLLLoss", "MSELoss", "BCEWithLogits", "ViewOf", "WriteRegion",
    "Norm", "BinaryCrossEntropy", "PlainCrossEntropy",
    "LayerNorm", "Copy", "ToDevice", "Cast", "Conv1d",
]
