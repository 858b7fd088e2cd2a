r"""A causal convolutional language model: a temporal convolutional network (TCN) over the
token embeddings (Bai, Kolter and Koltun 2018; the WaveNet stack of dilations).

For ids w_0 .. w_{T-1}, with C channels, kernel size K and ``num_layers`` = L blocks:

(TC1) h^0_t = E[w_t]                                                  embedding, E (V, C)
(TC2) h^{i+1} = h^i + B^i_2 * dropout(relu(B^i_1 * h^i))              block i, dilation 2^i
(TC3) z_t = W dropout(h^L_t) + b                                      logits (V,)

where ``*`` is a causal convolution (:class:`~tinygrad_rnn.nn.CausalConv1d`: step t reads
steps t - 2^i (K - 1 - k) for k = 0 .. K - 1, zeros before the stream's start). Each block
reads 2 (K - 1) 2^i steps further back, so z_t depends on exactly the R most recent ids,

(TC4) R = 1 + 2 (K - 1) (2^L - 1)                                     the receptive field

and on nothing older: a gradient path from the loss at t to the input at t - d has about
log2(d) blocks when d < R and does not exist for d >= R. All T positions are computed at
once (one GEMM per convolution over the whole window), not one step after another.

It is scored by the shared evaluation (:func:`~tinygrad_rnn.lm.evaluate_lm` with
``model.token_log_probs``), trained on random windows (:func:`~tinygrad_rnn.lm.lm_windows`),
and generates through the ``prime``/``advance`` protocol of :func:`~tinygrad_rnn.lm.generate`
with a window of the last R ids as its state: constant memory and time per token.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .. import _validate
from .. import functional as F
from ..backend import DEFAULT_FLOAT
from ..nn import init
from ..nn.module import eval_no_grad
from ..nn.conv import CausalConv1d
from ..nn._checks import check_ids
from ..nn.layers import Dropout, Embedding, Linear, ModuleList
from ..nn.module import Module
from ..random import get_generator
from ..tensor import Tensor
from .models import (
    check_vocab_range, check_dropout, host_row, id_array, check_init_range, picked,
)

__all__ = ["ConvLM"]


class ConvLM(Module):
    """A causal convolutional (TCN) language model, eqs. (TC1)-(TC4).

    Parameters
    ----------
    vocab_size : int
        V.
    channels : int
        C, the embedding size and the width of every convolution.
    kernel_size : int
        K, taps per convolution (default 3).
    num_layers : int
        L residual blocks, block i with dilation 2^i (default 4).
    dropout : float
        In each block and on the decoder input, training mode only.
    tie_weights : bool
        Use the embedding matrix as the decoder weight (both (V, C)).
    init_range, dtype, generator
        As for :class:`~tinygrad_rnn.lm.RNNLM`.

    Attributes
    ----------
    embedding : Embedding (V, C)
    blocks : ModuleList of ModuleList [conv1, conv2] (CausalConv1d(C, C, K, dilation 2^i))
    decoder : Linear (C -> V)
    receptive_field : int
        R of (TC4).

    Shapes
    ------
    ids (N, T) -> logits (N, T, V); ``logits[:, t]`` predicts the id after ``ids[:, t]``.

    Examples
    --------
    >>> import numpy as np
    >>> model = ConvLM(vocab_size=10, channels=8, kernel_size=2, num_layers=3, generator=0)
    >>> model.receptive_field
    15
    >>> model(np.zeros((2, 5), dtype=np.int64)).shape
    (2, 5, 10)
    """

    def __init__(self, vocab_size: int, channels: int, kernel_size: int = 3,
                 num_layers: int = 4, dropout: float = 0.0, tie_weights: bool = False,
                 init_range: float = 0.1, dtype: Any = DEFAULT_FLOAT,
                 generator: Any = None) -> None:
        super().__init__()
        owner = "ConvLM"
        V = _validate.positive_int(vocab_size, "vocab_size", owner)
        C = _validate.positive_int(channels, "channels", owner)
        K = _validate.positive_int(kernel_size, "kernel_size", owner)
        L = _validate.positive_int(num_layers, "num_layers", owner)
        p = check_dropout(dropout, owner)
        self.tie_weights = _validate.flag(tie_weights, "tie_weights", owner)
        init_range = check_init_range(init_range, owner)
        rng = get_generator(generator)
        self.vocab_size, self.channels, self.kernel_size, self.num_layers = V, C, K, L
        self.embedding = Embedding(V, C, dtype=dtype, generator=rng)
        init.uniform_(self.embedding.weight, -init_range, init_range, generator=rng)
        self.blocks = ModuleList([
            ModuleList([CausalConv1d(C, C, K, dilation=2 ** i, dtype=dtype, generator=rng),
                        CausalConv1d(C, C, K, dilation=2 ** i, dtype=dtype, generator=rng)])
            for i in range(L)])
        self.drop = Dropout(p, generator=int(rng.integers(2 ** 63)))
        self.decoder = Linear(C, V, dtype=dtype, generator=rng)
        if self.tie_weights:
            self.decoder.weight = self.embedding.weight        # one Parameter, two uses
        else:
            init.uniform_(self.decoder.weight, -init_range, init_range, generator=rng)
        init.zeros_(self.decoder.bias)
        self.receptive_field = 1 + 2 * (K - 1) * (2 ** L - 1)              # (TC4)

    def forward(self, ids: Any) -> Tensor:
        """Logits (N, T, V) of eqs. (TC1)-(TC3) for ids (N, T) in [0, V)."""
        shape = tuple(ids.shape) if hasattr(ids, "shape") else np.shape(ids)
        if len(shape) != 2:
            raise ValueError(f"ConvLM: expected token ids of shape (N, T), got shape {shape}; "
                             "use ids[None] for one sequence")
        check_ids("ConvLM", "ids", ids, self.vocab_size)
        h = self.embedding(ids).transpose(0, 2, 1)                      # (TC1) (N, C, T)
        for conv1, conv2 in self.blocks:  # type: ignore[attr-defined]  # ModuleLists of two
            h = h + conv2(self.drop(F.relu(conv1(h))))                  # (TC2)
        return self.decoder(self.drop(h.transpose(0, 2, 1)))            # (TC3) (N, T, V)

    def log_probs(self, ids: Any) -> Tensor:
        """log_softmax of the logits: ids (T,) give (T, V), ids (N, T) give (N, T, V).
        Differentiable, run in the current mode."""
        arr = ids if isinstance(ids, Tensor) else np.asarray(ids)
        single = arr.ndim == 1
        lp = F.log_softmax(self(arr.reshape(1, -1) if single else arr), axis=-1)
        return lp[0] if single else lp

    def token_log_probs(self, ids: Any, chunk_size: int = 1024) -> np.ndarray:
        """log p(ids[t] | ids[:t]) for t = 1 .. T - 1 (nats), (T - 1,) float64, exactly as one
        pass over the whole stream would give them: each chunk of ``chunk_size`` positions is
        computed with the R - 1 ids before it (all its outputs depend on), in eval mode,
        without a graph."""
        owner = "ConvLM.token_log_probs"
        arr = id_array(ids, owner, (1,))
        check_vocab_range(arr, self.vocab_size, owner)
        k = _validate.positive_int(chunk_size, "chunk_size", owner)
        out = np.zeros(max(arr.size - 1, 0))
        if arr.size < 2:
            return out
        inputs, targets = arr[:-1], arr[1:]
        before = self.receptive_field - 1
        with eval_no_grad(self):
            for start in range(0, inputs.size, k):
                stop = min(start + k, inputs.size)
                lo = max(0, start - before)
                logits = self(inputs[None, lo:stop])                         # (1, ., V)
                lp = F.log_softmax(logits, axis=-1)._data[0, start - lo:]     # (k, V)
                out[start:stop] = picked(lp, targets[start:stop])
        return out

    # ------------------------------------------------------------------ generation protocol
    def prime(self, prompt_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The logits (V,) after a 1-D prompt and the window of its last R ids (the state)."""
        window = np.asarray(prompt_ids, dtype=np.int64)[-self.receptive_field:]
        return host_row(self(window[None])._data[0, -1]), window

    def advance(self, token_id: int, window: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Append one token to the window (keeping the last R ids); the next logits (V,) and
        the new window. Memory and time per token do not grow with the position."""
        window = np.append(window, np.int64(token_id))[-self.receptive_field:]
        return host_row(self(window[None])._data[0, -1]), window

    def extra_repr(self) -> str:
        return (f"vocab_size={self.vocab_size}, channels={self.channels}, "
                f"kernel_size={self.kernel_size}, num_layers={self.num_layers}, "
                f"receptive_field={self.receptive_field}")
