"""Explicit backpropagation through time on raw arrays (the fast default engine).

For each cell family a readable per-step pair (``*_step_forward`` / ``*_step_backward`` with
a named cache) and a fused sequence pair (``*_forward`` / ``*_backward``) that is tested equal
to a loop of the per-step pair. Weights use PyTorch's layouts, so torch weights load
unchanged. This layer imports only NumPy and :mod:`tinygrad_rnn.backend`.

The kernels run on the device of their arrays (NumPy, CuPy, or the stand-in device): all
arrays of one call must share a device, and ``lengths`` stays on the host (see
:mod:`tinygrad_rnn.bptt._checks`).
"""
from .elman import (
    RNNGrads, RNNSequenceCache, RNNStepCache, RNNStepGrads, rnn_backward, rnn_forward,
    rnn_step_backward, rnn_step_forward,
)
from .gru import (
    GRUGrads, GRUSequenceCache, GRUStepCache, GRUStepGrads, gru_backward, gru_forward,
    gru_step_backward, gru_step_forward,
)
from .lstm import (
    LSTMGrads, LSTMSequenceCache, LSTMStepCache, LSTMStepGrads, lstm_backward, lstm_forward,
    lstm_step_backward, lstm_step_forward,
)

__all__ = [
    "rnn_step_forward", "rnn_step_backward", "rnn_forward", "rnn_backward",
    "RNNStepCache", "RNNStepGrads", "RNNSequenceCache", "RNNGrads",
    "gru_step_forward", "gru_step_backward", "gru_forward", "gru_backward",
    "GRUStepCache", "GRUStepGrads", "GRUSequenceCache", "GRUGrads",
    "lstm_step_forward", "lstm_step_backward", "lstm_forward", "lstm_backward",
    "LSTMStepCache", "LSTMStepGrads", "LSTMSequenceCache", "LSTMGrads",
]
