"""Neural-network building blocks, mirroring ``torch.nn``.

``tr.nn.Module`` and ``tr.nn.Parameter`` (module.py), the basic layers (layers.py), weight
initialisers as ``tr.nn.init`` (init.py), gradient utilities as ``tr.nn.utils`` and, as in
torch, ``tr.nn.functional`` (torch.nn.functional's names and signatures, built on
``tr.functional``).
"""
from __future__ import annotations

from . import functional, init, utils
from .activation import (
    ELU, GELU, Flatten, LeakyReLU, LogSigmoid, LogSoftmax, SiLU, Softmax, Softplus, Unflatten,
)
from .layers import (
    Dropout, Embedding, Identity, Linear, ModuleDict, ModuleList, ReLU, Sequential, Sigmoid,
    Tanh,
)
from .losses import BCELoss, BCEWithLogitsLoss, CrossEntropyLoss, L1Loss, MSELoss, NLLLoss
from .module import IncompatibleKeys, Module, Parameter, RemovableHandle
from .normalization import LayerNorm
from .conv import CausalConv1d, Conv1d
from .positional import LearnedPositionalEncoding, SinusoidalPositionalEncoding

__all__ = [
    "Module", "Parameter", "IncompatibleKeys", "RemovableHandle", "Linear", "Embedding",
    "Dropout", "Sequential", "ModuleList", "ModuleDict", "Tanh", "ReLU", "Sigmoid",
    "Identity", "init", "utils", "functional",
    "Softmax", "LogSoftmax", "GELU", "LeakyReLU", "Softplus", "LogSigmoid", "ELU", "SiLU",
    "Flatten", "Unflatten",
    "CrossEntropyLoss", "NLLLoss", "MSELoss", "L1Loss", "BCELoss", "BCEWithLogitsLoss",
    "LayerNorm", "Conv1d", "CausalConv1d", "SinusoidalPositionalEncoding",
    "LearnedPositionalEncoding",
]

# Recurrent cells and layers (attention comes with the encoder-decoder work)
from .cells import GRUCell, LSTMCell, RNNCell
from .recurrent import GRU, LSTM, RNN, RNNBase

__all__ += ["RNNCell", "GRUCell", "LSTMCell", "RNN", "GRU", "LSTM", "RNNBase"]

# Attention (docs/attention.md)
from .attention import Attention, CausalSelfAttention, MultiheadAttention

__all__ += ["Attention", "MultiheadAttention", "CausalSelfAttention"]

# Sequence classification and labeling
from .classify import SequenceClassifier, SequenceTagger, accuracy

__all__ += ["SequenceClassifier", "SequenceTagger", "accuracy"]

# Encoder-decoder models (decoding: tinygrad_rnn.decoding)
from .seq2seq import DecoderState, Memory, Seq2Seq, teacher_forcing_schedule

__all__ += ["Seq2Seq", "Memory", "DecoderState", "teacher_forcing_schedule"]

# Transformer layers, as torch.nn's (docs/attention.md, section 8)
from .transformer import (
    Transformer, TransformerDecoder, TransformerDecoderLayer, TransformerEncoder,
    TransformerEncoderLayer,
)

__all__ += ["TransformerEncoderLayer", "TransformerDecoderLayer", "TransformerEncoder",
            "TransformerDecoder", "Transformer"]
