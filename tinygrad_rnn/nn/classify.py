r"""Sequence classification and sequence labeling on top of the recurrent layers.

Both models read token ids (N, T), embed them and run a recurrent encoder
(:class:`~tinygrad_rnn.nn.RNN`, :class:`~tinygrad_rnn.nn.GRU` or
:class:`~tinygrad_rnn.nn.LSTM`, batch first) over each sequence's valid steps only: pass the
true ``lengths`` of a padded batch (:func:`tinygrad_rnn.data.pad_batch`) and padding changes
nothing, neither a prediction nor a gradient.

Sequence classification (one label per sequence)
------------------------------------------------
With h_t the encoder's top-layer output at step t of a sequence of length L:

(C1)  s = h_{L-1}                          pooling='last' (forward direction; a bidirectional
                                           encoder adds the reverse direction's state after
                                           it has read back to step 0)
(C2)  s = (1 / L) sum_{t < L} h_t          pooling='mean' (the valid steps only)
(C3)  z = W s + b,   p(y | x) = softmax(z),   loss = -log p(y | x)   (cross entropy)

Sequence labeling (one tag per step)
------------------------------------
A bidirectional encoder (the default) gives each step both its left and right context,
h_t = [h_t^fwd ; h_t^bwd], and every step gets its own softmax:

(T1)  z_t = W h_t + b,   loss = (1 / #valid) sum_{valid (n, t)} -log softmax(z_t)[y_t]

Padded steps carry the tag ``ignore_index`` (-100, as in torch) and get exactly zero loss and
zero gradient (:func:`tinygrad_rnn.functional.cross_entropy`); :meth:`SequenceTagger.loss`
also masks them by ``lengths``, whatever tag the padding holds.

On a device (``model.to(device)``) ids, lengths, labels and tags are given as host arrays:
the lengths are read on the host (they steer the recurrent layers), the ids are copied to the
device by the embedding lookup and the targets by the loss; the masks built from the lengths
are copied to the device once per batch. ``predict`` and :func:`accuracy` return host arrays
and numbers (an explicit copy of the predictions).

The generated tasks of :mod:`tinygrad_rnn.data.synthetic` (parity, balanced parentheses,
repeated-token tagging) are small enough to train these models in seconds.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .. import _validate
from .. import functional as F
from ..backend import DEFAULT_FLOAT, get_array_module, to_device
from ..random import get_generator
from ..tensor import Tensor
from ._checks import check_ids, check_layer_lengths
from .layers import Dropout, Embedding, Linear
from .module import Module, eval_no_grad
from .recurrent import GRU, LSTM, RNN, RNNBase

__all__ = ["SequenceClassifier", "SequenceTagger", "recurrent_layer", "accuracy",
           "IGNORE_INDEX", "CELLS"]

#: The target id whose rows the losses ignore (torch's default ``ignore_index``).
IGNORE_INDEX = -100

#: The recurrent layer behind each ``cell`` name.
CELLS: dict[str, type] = {"rnn": RNN, "gru": GRU, "lstm": LSTM}


def recurrent_layer(cell: str, input_size: int, hidden_size: int, num_layers: int = 1, *,
                    bidirectional: bool = False, dropout: float = 0.0, engine: str = "fused",
                    dtype: Any = DEFAULT_FLOAT, generator: Any = None,
                    owner: str = "recurrent_layer") -> RNNBase:
    """A batch-first ``RNN``/``GRU``/``LSTM`` chosen by name (``'rnn'``, ``'gru'``,
    ``'lstm'``); ``owner`` names the caller in the error for an unknown cell."""
    if not isinstance(cell, str) or cell.lower() not in CELLS:
        raise ValueError(f"{owner}: cell must be one of {sorted(CELLS)}, got {cell!r}")
    layer_cls = CELLS[cell.lower()]
    return layer_cls(input_size, hidden_size, num_layers, batch_first=True, dropout=dropout,
                     bidirectional=bidirectional, engine=engine, dtype=dtype,
                     generator=generator)


def _as_ids(ids: Any, owner: str, vocab_size: int | None = None) -> Any:
    """Check a (N, T) batch of integer ids (in [0, vocab_size) when given); returns it as
    an array or Tensor (a list becomes a NumPy array)."""
    if not hasattr(ids, "shape"):
        try:
            ids = np.asarray(ids)
        except ValueError:
            raise ValueError(f"{owner}: expected token ids of shape (N, T), got rows of "
                             f"different lengths; pad them first (tr.data.pad_batch)") from None
    shape = tuple(ids.shape)
    if len(shape) != 2:
        raise ValueError(f"{owner}: expected token ids of shape (N, T), got shape {shape}; "
                         "add a batch axis with ids[None] for one sequence")
    dtype = ids.dtype if hasattr(ids, "dtype") else np.asarray(ids).dtype
    if np.dtype(dtype).kind not in "iu":
        raise TypeError(f"{owner}: token ids must be integers, got dtype {dtype}")
    if vocab_size is not None:
        check_ids(owner, "ids", ids, vocab_size)
    return ids


def _lengths(lengths: Any, N: int, T: int, owner: str) -> np.ndarray | None:
    """Check ``lengths`` (N,) with 1 <= lengths <= T; None stays None (every step valid)."""
    arr = check_layer_lengths(owner, lengths, T, N, minimum=1,
                              why="; every sequence needs at least one token")
    return None if arr is None else arr.astype(np.int64)


def accuracy(logits: Any, targets: Any, ignore_index: int = IGNORE_INDEX) -> float:
    """The fraction of positions whose argmax over the last axis of ``logits`` equals
    ``targets``, ignoring positions where the target is ``ignore_index``.

    ``logits`` (..., C) (a Tensor or array, on any device) pairs with integer ``targets``
    (...); NaN when every position is ignored. Device data is copied to the host explicitly
    (the result is a host number anyway).
    """
    z = np.asarray(logits.numpy() if isinstance(logits, Tensor) else to_device(logits, "cpu"))
    y = np.asarray(targets.numpy() if isinstance(targets, Tensor)
                   else to_device(targets, "cpu"))
    ignore_index = _validate.integer(ignore_index, "ignore_index", "accuracy")
    if y.size and y.dtype.kind not in "iu":
        raise TypeError(f"accuracy: targets must be integer class ids, got dtype {y.dtype}")
    if z.shape[:-1] != y.shape:
        raise ValueError(f"accuracy: logits of shape {z.shape} need targets of shape "
                         f"{z.shape[:-1]}, got {y.shape}")
    keep = y != ignore_index
    if not keep.any():
        return float("nan")
    return float(np.mean(z.argmax(axis=-1)[keep] == y[keep]))


class _Encoder(Module):
    """Embedding -> dropout -> recurrent layer (batch first), shared by both models."""

    def __init__(self, vocab_size: int, embedding_dim: int, hidden_size: int, cell: str,
                 num_layers: int, bidirectional: bool, dropout: float,
                 padding_idx: int | None, engine: str, dtype: Any, generator: Any,
                 owner: str) -> None:
        super().__init__()
        for name, value in (("vocab_size", vocab_size), ("embedding_dim", embedding_dim),
                            ("hidden_size", hidden_size), ("num_layers", num_layers)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) \
                    or value < 1:
                raise ValueError(f"{owner}: {name} must be a positive integer, got {value!r}")
        if _validate.probability(dropout, "dropout", owner) == 1.0:
            raise ValueError(f"{owner}: dropout must be in [0, 1), got {dropout!r}")
        bidirectional = _validate.flag(bidirectional, "bidirectional", owner)
        rng = get_generator(generator)
        self.owner = owner
        self.vocab_size = int(vocab_size)
        self.embedding = Embedding(vocab_size, embedding_dim, padding_idx, dtype=dtype,
                                   generator=rng)
        self.rnn = recurrent_layer(cell, embedding_dim, hidden_size, num_layers,
                                   bidirectional=bidirectional, dropout=dropout,
                                   engine=engine, dtype=dtype, generator=rng, owner=owner)
        self.drop = Dropout(dropout, generator=int(rng.integers(2 ** 63)))

    def forward(self, ids: Any, lengths: np.ndarray | None) -> tuple[Tensor, Any]:
        x = self.drop(self.embedding(ids))          # (N, T, E)
        return self.rnn(x, None, lengths)           # (N, T, dirs*H), h_n (or (h_n, c_n))


class SequenceClassifier(Module):
    """Classify a whole sequence: embedding -> recurrent encoder -> pooled state -> linear,
    eqs. (C1)-(C3) of the module docstring.

    Parameters
    ----------
    vocab_size, embedding_dim, hidden_size : int
    num_classes : int
    cell : {'lstm', 'gru', 'rnn'}
    num_layers : int
    bidirectional : bool
        With ``pooling='last'`` the reverse direction contributes its state after reading
        the whole (valid part of the) sequence backwards.
    pooling : {'last', 'mean'}
        ``'last'``: the final state at each sequence's own last valid step (C1); ``'mean'``:
        the mean of the top-layer outputs over the valid steps (C2).
    dropout : float
        On the embeddings, between recurrent layers and on the pooled state (training mode).
    padding_idx : int or None
        The embedding row of the padding token (zero, never updated); default None.
    engine : {'fused', 'autograd'}
    dtype, generator
        As for the layers (default float32; a seed or ``numpy.random.Generator``).

    Shapes
    ------
    ids (N, T) integer, lengths (N,) with 1 <= lengths <= T -> logits (N, num_classes).

    Examples
    --------
    >>> import numpy as np
    >>> model = SequenceClassifier(6, 8, 16, num_classes=2, cell='gru', generator=0)
    >>> ids = np.array([[4, 5, 5, 0], [5, 4, 4, 5]])          # row 0 padded with 0
    >>> model(ids, lengths=np.array([3, 4])).shape
    (2, 2)
    >>> loss = model.loss(ids, np.array([0, 1]), lengths=np.array([3, 4]))
    >>> loss.backward()
    """

    def __init__(self, vocab_size: int, embedding_dim: int, hidden_size: int,
                 num_classes: int, cell: str = "lstm", num_layers: int = 1,
                 bidirectional: bool = False, pooling: str = "last", dropout: float = 0.0,
                 padding_idx: int | None = None, engine: str = "fused",
                 dtype: Any = DEFAULT_FLOAT, generator: Any = None) -> None:
        super().__init__()
        owner = "SequenceClassifier"
        if pooling not in ("last", "mean"):
            raise ValueError(f"{owner}: pooling must be 'last' or 'mean', got {pooling!r}")
        if isinstance(num_classes, bool) or not isinstance(num_classes, (int, np.integer)) \
                or num_classes < 2:
            raise ValueError(f"{owner}: num_classes must be an integer >= 2, got "
                             f"{num_classes!r}")
        rng = get_generator(generator)
        self.pooling = pooling
        self.num_classes = int(num_classes)
        self.encoder = _Encoder(vocab_size, embedding_dim, hidden_size, cell, num_layers,
                                bidirectional, dropout, padding_idx, engine, dtype, rng, owner)
        dirs = 2 if bidirectional else 1
        self.head = Linear(dirs * hidden_size, num_classes, dtype=dtype, generator=rng)

    def features(self, ids: Any, lengths: Any = None) -> Tensor:
        """The pooled sequence representation s of (C1)/(C2): (N, dirs * hidden_size)."""
        ids = _as_ids(ids, "SequenceClassifier", self.encoder.vocab_size)
        N, T = ids.shape
        lens = _lengths(lengths, N, T, "SequenceClassifier")
        out, state = self.encoder(ids, lens)                     # out (N, T, dirs*H)
        if self.pooling == "mean":
            if lens is None:
                return out.mean(axis=1)
            xp = get_array_module(out._data)                      # host -> device copies
            mask = (np.arange(T)[None, :] < lens[:, None])       # (N, T)
            mask = xp.asarray(mask[:, :, None].astype(out.dtype))    # (N, T, 1)
            total = (out * mask).sum(axis=1)                     # (N, dirs*H)
            return total / xp.asarray(lens[:, None].astype(out.dtype))
        h_n = state[0] if isinstance(state, tuple) else state   # (layers*dirs, N, H)
        rnn = self.encoder.rnn
        if rnn.num_directions == 1:
            return h_n[-1]                                       # (N, H)
        return F.cat([h_n[-2], h_n[-1]], axis=-1)               # (N, 2H): fwd, bwd

    def forward(self, ids: Any, lengths: Any = None) -> Tensor:
        """Logits (N, num_classes) of eq. (C3)."""
        s = self.encoder.drop(self.features(ids, lengths))
        return self.head(s)

    def loss(self, ids: Any, labels: Any, lengths: Any = None,
             reduction: str = "mean") -> Tensor:
        """Cross entropy of eq. (C3) against integer ``labels`` (N,)."""
        check_ids("SequenceClassifier.loss", "labels", labels, self.num_classes, "num_classes")
        return F.cross_entropy(self(ids, lengths), labels, reduction=reduction)

    def predict(self, ids: Any, lengths: Any = None) -> np.ndarray:
        """The most probable class of each sequence, (N,) int64, computed in eval mode
        without a graph (the training flag is restored afterwards)."""
        with eval_no_grad(self):
            return np.asarray(self(ids, lengths).numpy().argmax(axis=-1), dtype=np.int64)


class SequenceTagger(Module):
    """Tag every step of a sequence: embedding -> (bidirectional) recurrent encoder ->
    linear at every step, eq. (T1) of the module docstring.

    Parameters
    ----------
    vocab_size, embedding_dim, hidden_size : int
    num_tags : int
    cell : {'lstm', 'gru', 'rnn'}
    num_layers : int
    bidirectional : bool
        Default True: each tag sees the whole sentence.
    dropout : float
        On the embeddings, between recurrent layers and on the encoder outputs.
    padding_idx : int or None
        The embedding row of the padding token; default None.
    engine, dtype, generator
        As for :class:`SequenceClassifier`.

    Shapes
    ------
    ids (N, T) integer, lengths (N,) -> logits (N, T, num_tags); logits at padded steps are
    those of a zero encoder output (the bias) and are never used by :meth:`loss`.

    Examples
    --------
    >>> import numpy as np
    >>> tagger = SequenceTagger(7, 8, 12, num_tags=3, generator=0)
    >>> ids = np.array([[4, 5, 6], [6, 4, 0]])
    >>> tags = np.array([[0, 1, 2], [2, 0, -100]])              # -100: padding, ignored
    >>> tagger(ids, lengths=np.array([3, 2])).shape
    (2, 3, 3)
    >>> tagger.loss(ids, tags, lengths=np.array([3, 2])).backward()
    """

    def __init__(self, vocab_size: int, embedding_dim: int, hidden_size: int, num_tags: int,
                 cell: str = "lstm", num_layers: int = 1, bidirectional: bool = True,
                 dropout: float = 0.0, padding_idx: int | None = None,
                 engine: str = "fused", dtype: Any = DEFAULT_FLOAT,
                 generator: Any = None) -> None:
        super().__init__()
        owner = "SequenceTagger"
        if isinstance(num_tags, bool) or not isinstance(num_tags, (int, np.integer)) \
                or num_tags < 2:
            raise ValueError(f"{owner}: num_tags must be an integer >= 2, got {num_tags!r}")
        rng = get_generator(generator)
        self.num_tags = int(num_tags)
        self.encoder = _Encoder(vocab_size, embedding_dim, hidden_size, cell, num_layers,
                                bidirectional, dropout, padding_idx, engine, dtype, rng, owner)
        dirs = 2 if bidirectional else 1
        self.head = Linear(dirs * hidden_size, num_tags, dtype=dtype, generator=rng)

    def forward(self, ids: Any, lengths: Any = None) -> Tensor:
        """Logits (N, T, num_tags) of eq. (T1)."""
        ids = _as_ids(ids, "SequenceTagger", self.encoder.vocab_size)
        N, T = ids.shape
        lens = _lengths(lengths, N, T, "SequenceTagger")
        out, _ = self.encoder(ids, lens)                         # (N, T, dirs*H)
        return self.head(self.encoder.drop(out))                 # (N, T, C)

    def loss(self, ids: Any, tags: Any, lengths: Any = None, reduction: str = "mean",
             ignore_index: int = IGNORE_INDEX) -> Tensor:
        """Cross entropy of eq. (T1) over the valid steps: positions at or after
        ``lengths[n]`` and positions whose tag is ``ignore_index`` are left out.

        ``tags`` (N, T) must hold integer tag ids (a host array or list, or a Tensor); float,
        bool and string tags are refused with a TypeError rather than converted."""
        y = _integer_tags(tags, "SequenceTagger.loss")
        logits = self(ids, lengths)                              # (N, T, C)
        N, T, C = logits.shape
        if tuple(y.shape) != (N, T):
            raise ValueError(f"SequenceTagger.loss: tags must have shape {(N, T)} like the "
                             f"ids, got {y.shape}")
        if lengths is not None:
            lens = _lengths(lengths, N, T, "SequenceTagger")
            assert lens is not None  # lengths were given
            past_end = np.arange(T)[None, :] >= lens[:, None]   # (N, T)
            if isinstance(y, Tensor):
                y = y.masked_fill(past_end, ignore_index)
            else:
                y[past_end] = ignore_index
        return F.cross_entropy(logits.reshape(N * T, C), y.reshape(N * T),
                               ignore_index=ignore_index, reduction=reduction)

    def predict(self, ids: Any, lengths: Any = None) -> np.ndarray:
        """The most probable tag at every step, (N, T) int64, in eval mode without a graph;
        padded steps (t >= lengths[n]) hold ``IGNORE_INDEX``."""
        with eval_no_grad(self):
            pred = np.asarray(self(ids, lengths).numpy().argmax(axis=-1), dtype=np.int64)
        if lengths is not None:
            N, T = pred.shape
            lens = _lengths(lengths, N, T, "SequenceTagger")
            assert lens is not None  # lengths were given
            pred[np.arange(T)[None, :] >= lens[:, None]] = IGNORE_INDEX
        return pred


def _integer_tags(tags: Any, owner: str) -> Any:
    """Integer tags as given (a Tensor stays on its device) or as a fresh int64 host copy
    (the caller edits it); TypeError for any other dtype, naming ``owner`` and the dtype."""
    if isinstance(tags, Tensor):
        if np.dtype(tags.dtype).kind not in "iu":
            raise TypeError(f"{owner}: tags must hold integer tag ids, got a Tensor of dtype "
                            f"{tags.dtype}")
        return tags
    try:
        arr = np.asarray(tags)
    except ValueError as err:                   # ragged nesting
        raise ValueError(f"{owner}: tags must be an (N, T) array of integer tag ids, got "
                         f"rows of different lengths") from err
    if arr.dtype.kind not in "iu":
        raise TypeError(f"{owner}: tags must hold integer tag ids, got dtype {arr.dtype}")
    if arr.dtype.kind == "u" and arr.size and int(arr.max()) > np.iinfo(np.int64).max:
        raise ValueError(f"{owner}: tag id {int(arr.max())} does not fit in int64")
    return arr.astype(np.int64)                 # a copy: padded steps are edited in it
