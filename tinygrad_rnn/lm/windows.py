"""What the two window language models (:class:`~tinygrad_rnn.lm.ConvLM`,
:class:`~tinygrad_rnn.lm.TransformerLM`) share: random training windows of a stream and the
scoring of a long stream through windows of bounded context.

A recurrent LM carries its state along a stream, so it reads a stream of any length in
chunks. A convolutional LM sees a fixed number of past tokens (its receptive field R) and a
Transformer LM at most ``max_len`` positions (its context), so each is trained on windows
and scores a stream through windows:

* :func:`lm_windows` draws B windows of length T at random offsets of a stream, with their
  next-token targets (the same kind of batch as :func:`tinygrad_rnn.data.lm_stream` gives
  the recurrent models, at random positions instead of contiguous ones);
* :func:`window_log_probs` scores every token t >= 1 of a stream with the window that ends at
  t - 1 and starts ``context`` tokens earlier at most: windows of length W = ``context`` every
  W - ``overlap`` tokens, each scoring the tokens after its first ``overlap`` positions (the
  first window scores all of its own), so every token but the first ``overlap`` has at least
  ``overlap`` tokens of context.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from .. import functional as F
from ..backend import get_array_module, to_device
from ..random import get_generator
from ..tensor import Tensor

__all__ = ["lm_windows", "window_log_probs"]


def _positive(value: Any, name: str, owner: str, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{owner}: {name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def lm_windows(ids: Any, batch_size: int, length: int,
               generator: Any = None) -> tuple[np.ndarray, np.ndarray]:
    """``batch_size`` windows of ``length`` ids at random offsets of the 1-D stream ``ids``,
    and their targets (each id's successor).

    Returns
    -------
    x, y : (batch_size, length) int64, y[b, t] = ids[o_b + t + 1] for x[b, t] = ids[o_b + t].

    Examples
    --------
    >>> import numpy as np
    >>> x, y = lm_windows(np.arange(10), batch_size=2, length=3, generator=0)
    >>> bool(np.all(y == x + 1)), x.shape
    (True, (2, 3))
    """
    owner = "lm_windows"
    arr = np.asarray(ids)
    if arr.ndim != 1 or (arr.size and arr.dtype.kind not in "iu"):
        raise ValueError(f"{owner}: ids must be a 1-D stream of integer ids, got shape "
                         f"{arr.shape} and dtype {arr.dtype}")
    b = _positive(batch_size, "batch_size", owner)
    t = _positive(length, "length", owner)
    if arr.size < t + 1:
        raise ValueError(f"{owner}: a window of length {t} needs a stream of at least {t + 1} "
                         f"ids (inputs and their next ids), got {arr.size}")
    rng = get_generator(generator)
    starts = rng.integers(0, arr.size - t, size=b)                       # (B,)
    index = starts[:, None] + np.arange(t)                               # (B, T)
    return arr[index].astype(np.int64), arr[index + 1].astype(np.int64)


def window_log_probs(logits_fn: Callable[[np.ndarray], Tensor], ids: np.ndarray,
                     context: int, overlap: int) -> np.ndarray:
    """log p(ids[t] | ids[s:t]) for t = 1 .. T - 1 (nats), (T - 1,) float64, with windows of
    ``context`` ids that overlap by ``overlap`` (see the module docstring).

    ``logits_fn(window)`` maps one window (1, W) of ids to its logits (1, W, V); it runs under
    the caller's eval mode and no_grad. The picked log-probabilities are copied to the host,
    one window at a time."""
    owner = "window_log_probs"
    w = _positive(context, "context", owner)
    k = _positive(overlap, "overlap", owner, minimum=0)
    if k >= w:
        raise ValueError(f"{owner}: overlap ({k}) must be smaller than the context ({w})")
    out = np.zeros(max(ids.size - 1, 0))
    inputs, targets = ids[:-1], ids[1:]
    start = 0
    while start < inputs.size:
        stop = min(start + w, inputs.size)
        lp = F.log_softmax(logits_fn(inputs[None, start:stop]), axis=-1)._data[0]  # (W, V)
        xp = get_array_module(lp)
        first = 0 if start == 0 else k                                   # positions scored
        rows = xp.arange(first, stop - start)
        picked = lp[rows, xp.asarray(targets[start + first:stop])]
        out[start + first:stop] = to_device(picked, "cpu")
        if stop == inputs.size:
            break
        start += w - k
    return out
