r"""Neural language models: a recurrent LM and the feed-forward LM of Bengio et al. (2003).

Both predict the next token of a sequence of ids from the :mod:`tinygrad_rnn.data.text`
vocabularies and are scored by the one shared evaluation of
:mod:`tinygrad_rnn.lm.perplexity`: pass ``model.token_log_probs`` (or ``model.log_probs``) to
:func:`~tinygrad_rnn.lm.evaluate_lm`, exactly as for the n-gram models.

Recurrent LM (RNNLM)
--------------------
For inputs w_0 .. w_{T-1} (ids) and a hidden state carried from the previous window:

(LM1) e_t = E[w_t]                                    embedding row, E of shape (V, D)
(LM2) h_t = cell(dropout(e_t), h_{t-1})               RNN, GRU or LSTM (num_layers deep)
(LM3) z_t = W dropout(h_t) + b                        decoder, W of shape (V, H): logits
(LM4) p(w_{t+1} = v | w_0 .. w_t) = softmax(z_t)_v
(LM5) loss = -(1 / #targets) sum_t log p(w_{t+1} | w_0 .. w_t)

so ``logits[:, t]`` predicts the token *after* ``ids[:, t]``. Dropout acts on the
non-recurrent connections only (the embeddings and the decoder input, and between layers),
never on h_{t-1} -> h_t (Zaremba et al. 2014).

Weight tying (Press & Wolf 2017; Inan et al. 2017) uses E as the decoder weight, W = E, which
needs D = H. The one matrix is used twice, as the input lookup (LM1) and the output projection
(LM3), so its gradient is the sum of the two uses::

    dL/dE = (dL/dE)_lookup + (dL/dW)_decoder

(the engine accumulates, it never overwrites; tests/lm/test_models.py checks this sum against an
untied copy). A tied parameter is listed once by ``parameters()``.

Feed-forward LM (Bengio et al. 2003)
------------------------------------
With a context of the n - 1 previous ids (left-padded with ``<s>`` at the start of a stream)
and x the concatenation of their embeddings, x = [C[w_{t-n+1}] ; ... ; C[w_{t-1}]]
(size (n - 1) m):

(F1)  a = tanh(d + H x)                                hidden layer, H of shape (h, (n-1) m)
(F2)  y = b + U a  (+ W x with direct connections)     logits, U (V, h), W (V, (n-1) m)
(F3)  p(w_t = v | context) = softmax(y)_v

The direct connections W x of the paper are off by default (``direct=False``).

Initialisation
--------------
Embedding (and an untied decoder weight) U(-init_range, init_range) with init_range = 0.1, the
decoder bias 0, as in Zaremba et al. (2014): with N(0, 1) embeddings a tied decoder starts
with logits of size sqrt(H) and a perplexity far above V. Recurrent and hidden layers keep
their torch defaults.

Devices
-------
``model.to(device)`` moves the parameters; the models then run there. Token ids are host
arrays (as :mod:`tinygrad_rnn.data` makes them, and as :func:`~tinygrad_rnn.lm.evaluate_lm`
passes them): they are checked on the host and copied to the device by the embedding lookup,
once per call; targets are copied by the loss (or by the gather of ``token_log_probs``). What
comes back to the host is explicit and small: ``token_log_probs`` copies the picked
log-probabilities (one per token), and the generation protocol (``prime``/``advance``) copies
the V logits of the next token once per step, since the sampler runs on the host.

References
----------
Y. Bengio, R. Ducharme, P. Vincent and C. Jauvin, "A neural probabilistic language model",
JMLR 3, 2003.
T. Mikolov, M. Karafiat, L. Burget, J. Cernocky and S. Khudanpur, "Recurrent neural network
based language model", Interspeech 2010.
W. Zaremba, I. Sutskever and O. Vinyals, "Recurrent neural network regularization", 2014.
O. Press and L. Wolf, "Using the output embedding to improve language models", EACL 2017.
H. Inan, K. Khosravi and R. Socher, "Tying word vectors and word classifiers", ICLR 2017.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .. import _validate
from .. import functional as F
from ..backend import DEFAULT_FLOAT, get_array_module, to_device
from ..data.text import BOS_ID
from ..nn import init
from ..nn.classify import IGNORE_INDEX, recurrent_layer
from ..nn.module import eval_no_grad
from ..nn._checks import check_ids
from ..nn.layers import Dropout, Embedding, Linear
from ..nn.module import Module
from ..random import get_generator
from ..creation import zeros
from ..nn._checks import host_lengths
from ..tensor import Tensor

__all__ = ["RNNLM", "FeedForwardLM", "lm_loss", "make_contexts"]


def check_dropout(value: Any, owner: str) -> float:
    """A dropout probability in [0, 1) (1 would drop everything), named in the errors."""
    p = _validate.probability(value, "dropout", owner)
    if p == 1.0:
        raise ValueError(f"{owner}: dropout must be in [0, 1), got {value!r}")
    return p


def check_init_range(value: Any, owner: str) -> float:
    r = _validate.finite_real(value, "init_range", owner)
    if not r > 0:
        raise ValueError(f"{owner}: init_range must be positive, got {value!r}")
    return r


def _check_padding_idx(value: Any, V: int, owner: str) -> None:
    """None, or a row of the embedding table in [-V, V) (negative counts from the end, as
    for :class:`~tinygrad_rnn.nn.Embedding`); errors name ``owner``."""
    if value is None:
        return
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{owner}: padding_idx must be an integer id or None, got {value!r}")
    if not -V <= value < V:
        raise ValueError(f"{owner}: padding_idx {value} is out of range for vocab_size {V} "
                         f"(valid: {-V} .. {V - 1})")


def _check_state(state: Any, cell: str, owner: str) -> None:
    """A carried state is None, a Tensor or array (L, N, H), or for an LSTM a pair of them;
    anything else (a string, a number, a dict) is a TypeError naming ``owner``."""
    if state is None:
        return
    parts = state if cell == "lstm" and isinstance(state, (tuple, list)) else (state,)
    for part in parts:
        if not (isinstance(part, Tensor) or hasattr(part, "shape") or isinstance(part, list)):
            want = "a pair (h_0, c_0)" if cell == "lstm" else "a Tensor (L, N, H)"
            raise TypeError(f"{owner}: state must be {want} as returned by a previous call "
                            f"or init_state(N), or None, got {type(state).__name__}")


def _check_lengths(lengths: Any, N: int, T: int, owner: str) -> None:
    """``lengths`` (N,) integers in [0, T], or None; errors name ``owner``."""
    if lengths is None:
        return
    lens = host_lengths(lengths, owner)
    if lens.shape != (N,):
        raise ValueError(f"{owner}: lengths must have shape ({N},) for ids of shape ({N}, {T}), "
                         f"got shape {lens.shape}")
    bad = np.flatnonzero((lens < 0) | (lens > T))
    if bad.size:
        k = int(bad[0])
        raise ValueError(f"{owner}: lengths[{k}] = {int(lens[k])} is outside [0, {T}] "
                         f"(ids have T = {T} steps)")


def _special_id(value: Any, name: str, owner: str, V: int | None = None) -> int:
    """A special id such as ``bos_id``: an integer (not a bool or a float, which is refused,
    not truncated), >= 0 and, when V is given, < V."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{owner}: {name} must be an integer id, got {value!r}")
    if value < 0:
        raise ValueError(f"{owner}: {name} must be >= 0, got {value}")
    if V is not None and value >= V:
        raise ValueError(f"{owner}: {name} {value} is outside the vocabulary [0, {V})")
    return int(value)


def id_array(ids: Any, owner: str, ndim: tuple[int, ...]) -> np.ndarray:
    """``ids`` as an int64 NumPy array of one of the dimensions ``ndim``."""
    arr = np.asarray(ids.numpy() if isinstance(ids, Tensor) else ids)
    if arr.ndim not in ndim:
        want = " or ".join(f"{d}-D" for d in ndim)
        raise ValueError(f"{owner}: expected {want} token ids, got shape {arr.shape}")
    if arr.size and arr.dtype.kind not in "iu":
        raise TypeError(f"{owner}: token ids must be integers, got dtype {arr.dtype}")
    return arr.astype(np.int64, copy=False)


def check_vocab_range(ids: np.ndarray, V: int, owner: str) -> None:
    """IndexError naming the first id outside [0, V), its position and V."""
    if ids.size == 0:
        return
    bad = np.argwhere((ids < 0) | (ids >= V))
    if bad.size:
        pos = tuple(int(i) for i in bad[0])
        raise IndexError(f"{owner}: id {int(ids[pos])} at position {pos} is out of range for "
                         f"vocabulary size {V}")


def picked(lp: Any, targets: np.ndarray) -> np.ndarray:
    """``lp[t, targets[t]]`` for every row t of log-probabilities ``lp`` (k, V) on any
    device: the host targets are copied to the device, the k picked values copied back (the
    one device -> host copy of a chunk)."""
    xp = get_array_module(lp)
    return to_device(lp[xp.arange(targets.size), xp.asarray(targets)], "cpu")


def host_row(logits: Any) -> np.ndarray:
    """The next-token logits (V,) copied to the host, where the sampler of
    :func:`~tinygrad_rnn.lm.generate` runs: the one device -> host copy of a generation
    step."""
    return to_device(logits, "cpu")


def lm_loss(logits: Tensor, targets: Any, ignore_index: int = IGNORE_INDEX,
            reduction: str = "mean") -> Tensor:
    """Next-token cross entropy, eq. (LM5): ``logits`` (N, T, V) against ``targets`` (N, T).

    Targets equal to ``ignore_index`` (default -100) count neither in the sum nor in the
    mean; pass ``ignore_index=PAD_ID`` for batches of :func:`~tinygrad_rnn.data.pad_batch`
    sentences. ``reduction='sum'`` gives the summed NLL (nats), which adds up over windows.
    Host targets are copied to the logits' device by the loss; a target Tensor must live
    there already.
    """
    if not isinstance(logits, Tensor):
        raise TypeError(f"lm_loss: logits must be a Tensor (N, T, V) (the model's output, "
                        f"with its graph), got {type(logits).__name__}")
    if logits.ndim != 3:
        raise ValueError(f"lm_loss: expected logits of shape (N, T, V), got {logits.shape}")
    N, T, V = logits.shape
    y = targets if isinstance(targets, Tensor) else np.asarray(targets)
    if tuple(y.shape) != (N, T):
        raise ValueError(f"lm_loss: logits of shape {logits.shape} need targets of shape "
                         f"{(N, T)}, got {y.shape}")
    ignore = ignore_index if isinstance(ignore_index, (int, np.integer)) else None
    check_ids("lm_loss", "targets", _not_ignored(y, ignore), V)
    return F.cross_entropy(logits.reshape(N * T, V), y.reshape(N * T),
                           ignore_index=ignore_index, reduction=reduction)


def _not_ignored(y: Any, ignore: int | None) -> Any:
    """The raw targets with ``ignore`` positions replaced by 0 (a valid id), for the range
    check; the targets themselves are left alone."""
    raw = y._data if isinstance(y, Tensor) else y
    if ignore is None or raw.dtype.kind not in "iu":
        return raw
    xp = get_array_module(raw)
    return xp.where(raw == ignore, 0, raw)


def make_contexts(ids: Any, context_size: int,
                  bos_id: int = BOS_ID) -> tuple[np.ndarray, np.ndarray]:
    """Turn an id stream into (contexts, targets) for a feed-forward LM.

    The stream is left-padded with ``context_size`` copies of ``bos_id`` (``<s>``), and
    target i is ``ids[i]`` with context row i the ``context_size`` ids before it::

        ids      = [a, b, c]              context_size = 2
        contexts = [[<s>, <s>], [<s>, a], [a, b]]
        targets  = [a, b, c]

    ``ids`` are non-negative integers and ``bos_id`` a non-negative integer (ValueError
    otherwise: a negative target would be read from the end of the logits).

    Returns
    -------
    contexts : (T, context_size) int64
    targets : (T,) int64, a copy of ``ids``
    """
    owner = "make_contexts"
    n1 = _validate.positive_int(context_size, "context_size", owner)
    bos = _special_id(bos_id, "bos_id", owner)
    arr = id_array(ids, owner, (1,))
    if arr.size and arr.min() < 0:
        pos = int(np.argmax(arr < 0))
        raise ValueError(f"{owner}: ids must be >= 0, got {int(arr[pos])} at position {pos}")
    padded = np.concatenate([np.full(n1, bos, dtype=np.int64), arr])        # (T + n - 1,)
    windows = np.lib.stride_tricks.sliding_window_view(padded, n1)          # (T + 1, n - 1)
    return np.ascontiguousarray(windows[: arr.size]), arr.copy()


# ------------------------------------------------------------------------------------ RNNLM
class RNNLM(Module):
    """A recurrent language model, eqs. (LM1)-(LM5): embedding -> RNN/GRU/LSTM -> dropout ->
    linear decoder to V logits.

    Parameters
    ----------
    vocab_size : int
        V, the number of token ids (``len(vocab)``).
    embedding_dim : int
        D, the embedding size.
    hidden_size : int
        H, the recurrent state size.
    num_layers : int
        Stacked recurrent layers (dropout between them when ``dropout > 0``).
    cell : {'lstm', 'gru', 'rnn'}
        The recurrent layer: :class:`~tinygrad_rnn.nn.LSTM`, :class:`~tinygrad_rnn.nn.GRU` or
        the Elman :class:`~tinygrad_rnn.nn.RNN` (tanh).
    dropout : float
        Drop probability in [0, 1) on the embeddings, between layers and on the decoder
        input, in training mode only.
    tie_weights : bool
        Use the embedding matrix as the decoder weight (needs ``embedding_dim ==
        hidden_size``); the shared Parameter appears once in ``parameters()``.
    engine : {'fused', 'autograd'}
        The recurrent layer's engine (the fused BPTT kernels by default).
    dtype : float dtype
        Default float32.
    generator : int, numpy Generator or None
        Seed of every initial value and of the dropout masks.
    padding_idx : int, optional
        Embedding row that stays zero and gets no gradient from the lookup (e.g. ``PAD_ID``
        for padded sentence batches). Default None.
    init_range : float
        Embedding (and untied decoder weight) values from U(-init_range, init_range); the
        decoder bias starts at 0.

    Attributes
    ----------
    embedding : Embedding (V, D)
    rnn : RNN, GRU or LSTM (batch first)
    drop : Dropout
    decoder : Linear (H -> V); ``decoder.weight is embedding.weight`` when tied

    Shapes
    ------
    ids (N, T) integer, state as returned by :meth:`init_state` (or None) -> logits (N, T, V)
    and the new state: ``(L, N, H)`` for RNN/GRU, ``((L, N, H), (L, N, H))`` for the LSTM.

    Examples
    --------
    Train with stateful truncated BPTT over an :func:`~tinygrad_rnn.data.lm_stream` pair: the
    model itself is the ``forward(x_window, state)`` that
    :func:`tinygrad_rnn.training.train_stream` runs (time is axis 1), and the shared
    evaluation scores held-out text.

    >>> import tinygrad_rnn as tr
    >>> from tinygrad_rnn.data import Vocab, lm_stream
    >>> from tinygrad_rnn.truncation import chunked
    >>> from tinygrad_rnn.lm import RNNLM, lm_loss, evaluate_perplexity
    >>> text = "abcd" * 60
    >>> vocab = Vocab.build(text)
    >>> x, y = lm_stream(vocab.encode(text), batch_size=4)         # (4, 59) each
    >>> model = RNNLM(len(vocab), 16, 16, cell='lstm', generator=0)
    >>> opt = tr.optim.Adam(model.parameters(), lr=0.02)
    >>> def loss_fn(logits, start, stop):          # the window's steps [start, stop)
    ...     return lm_loss(logits, y[:, start:stop])
    >>> result = tr.training.train_stream(model, x, loss_fn, opt, chunked(12), epochs=8,
    ...                                   clip=1.0, progress=False, time_axis=1)
    >>> result.losses[-1] < 0.2 * result.losses[0]
    True
    >>> evaluate_perplexity(model.token_log_probs, vocab.encode("abcdabcdabcd")) < 1.5
    True
    """

    def __init__(self, vocab_size: int, embedding_dim: int, hidden_size: int,
                 num_layers: int = 1, cell: str = "lstm", dropout: float = 0.0,
                 tie_weights: bool = False, engine: str = "fused",
                 dtype: Any = DEFAULT_FLOAT, generator: Any = None,
                 padding_idx: int | None = None, init_range: float = 0.1) -> None:
        super().__init__()
        owner = "RNNLM"
        V = _validate.positive_int(vocab_size, "vocab_size", owner)
        D = _validate.positive_int(embedding_dim, "embedding_dim", owner)
        H = _validate.positive_int(hidden_size, "hidden_size", owner)
        L = _validate.positive_int(num_layers, "num_layers", owner)
        dropout = check_dropout(dropout, owner)
        tie_weights = _validate.flag(tie_weights, "tie_weights", owner)
        _check_padding_idx(padding_idx, V, owner)
        if tie_weights and D != H:
            raise ValueError(
                f"{owner}: tie_weights=True uses the embedding matrix (V, embedding_dim) = "
                f"({V}, {D}) as the decoder weight (V, hidden_size) = ({V}, {H}), so it needs "
                f"embedding_dim == hidden_size; got embedding_dim={D}, hidden_size={H}"
            )
        init_range = check_init_range(init_range, owner)
        rng = get_generator(generator)
        self.vocab_size, self.embedding_dim, self.hidden_size = V, D, H
        self.num_layers, self.cell = L, str(cell).lower()
        self.tie_weights = bool(tie_weights)
        self.embedding = Embedding(V, D, padding_idx, dtype=dtype, generator=rng)
        init.uniform_(self.embedding.weight, -init_range, init_range, generator=rng)
        if padding_idx is not None:
            init.zeros_(self.embedding.weight._data[self.embedding.padding_idx])
        self.rnn = recurrent_layer(cell, D, H, L, dropout=dropout, engine=engine, dtype=dtype,
                                   generator=rng, owner=owner)
        self.drop = Dropout(dropout, generator=int(rng.integers(2 ** 63)))
        self.decoder = Linear(H, V, dtype=dtype, generator=rng)
        if self.tie_weights:
            self.decoder.weight = self.embedding.weight       # one Parameter, two uses
        else:
            init.uniform_(self.decoder.weight, -init_range, init_range, generator=rng)
        init.zeros_(self.decoder.bias)

    # ------------------------------------------------------------------ state
    def init_state(self, batch_size: int) -> Any:
        """The zero state for ``batch_size`` sequences, in the parameters' dtype and on their
        device: ``(L, N, H)`` for RNN/GRU, a pair ``(h_0, c_0)`` for the LSTM."""
        n = _validate.positive_int(batch_size, "batch_size", "RNNLM.init_state")
        dt, dev = self.decoder.weight.dtype, self.decoder.weight.device
        h0 = zeros(self.num_layers, n, self.hidden_size, dtype=dt, device=dev)
        if self.cell == "lstm":
            return h0, zeros(self.num_layers, n, self.hidden_size, dtype=dt, device=dev)
        return h0

    # ------------------------------------------------------------------ forward
    def forward(self, ids: Any, state: Any = None, lengths: Any = None) -> tuple[Tensor, Any]:
        """Logits and the new state, eqs. (LM1)-(LM3).

        Parameters
        ----------
        ids : (N, T) integer array or Tensor
            Ids in [0, V); an id out of range raises IndexError naming the id, its position
            and V.
        state : the state returned by the previous call (carry it, detached, across windows
            of a stream), :meth:`init_state`, or None for zeros.
        lengths : (N,) integers, optional
            True lengths of a padded batch: steps at or after ``lengths[n]`` change neither
            the state (row n's new state is its state after its own last token, ready to be
            carried on) nor any gradient; their logits are the decoder bias and must be
            left out of the loss (``lm_loss(..., ignore_index=PAD_ID)``).

        Returns
        -------
        logits : Tensor (N, T, V); ``logits[:, t]`` predicts the id after ``ids[:, t]``.
        state : the new state.
        """
        shape = tuple(ids.shape) if hasattr(ids, "shape") else np.shape(ids)
        if len(shape) != 2:
            raise ValueError(f"RNNLM: expected token ids of shape (N, T), got shape {shape}; "
                             "use ids[None] for one sequence")
        check_ids("RNNLM", "ids", ids, self.vocab_size)
        _check_lengths(lengths, shape[0], shape[1], "RNNLM")
        _check_state(state, self.cell, "RNNLM")
        emb = self.drop(self.embedding(ids))                       # (N, T, D)
        out, new_state = self.rnn(emb, state, lengths)             # (N, T, H)
        return self.decoder(self.drop(out)), new_state             # (N, T, V)

    def log_probs(self, ids: Any, state: Any = None) -> Tensor:
        """Next-token log-distributions ``log_softmax(logits)``: ids (T,) give (T, V) with row
        t = log p(. | ids[:t + 1]); ids (N, T) give (N, T, V).

        Differentiable (it records a graph unless under ``tr.no_grad()``) and run in the
        current mode: call ``model.eval()`` first to score without dropout. As a ``model_fn``
        of :func:`~tinygrad_rnn.lm.evaluate_lm` it holds T V values; for long streams use
        :meth:`token_log_probs`.
        """
        arr = ids if isinstance(ids, Tensor) else np.asarray(ids)
        single = arr.ndim == 1
        logits, _ = self(arr.reshape(1, -1) if single else arr, state)
        lp = F.log_softmax(logits, axis=-1)
        return lp[0] if single else lp

    def token_log_probs(self, ids: Any, chunk_size: int = 256) -> np.ndarray:
        """log p(ids[t] | ids[:t]) for t = 1 .. T - 1 (nats), shape (T - 1,), float64.

        The per-token form of :func:`~tinygrad_rnn.lm.evaluate_lm` (as for ``NGramLM``): the
        model reads ``ids`` in chunks of ``chunk_size`` steps from the zero state, carrying
        its state, in eval mode and without a graph (the training flag is restored), so a
        long stream needs memory for one chunk of logits only.
        """
        arr = id_array(ids, "RNNLM.token_log_probs", (1,))
        check_vocab_range(arr, self.vocab_size, "RNNLM.token_log_probs")
        k = _validate.positive_int(chunk_size, "chunk_size", "RNNLM.token_log_probs")
        out = np.zeros(max(arr.size - 1, 0))
        if arr.size < 2:
            return out
        inputs, targets = arr[:-1], arr[1:]
        state = None
        with eval_no_grad(self):
            for start in range(0, inputs.size, k):
                stop = min(start + k, inputs.size)
                logits, state = self(inputs[None, start:stop], state)          # (1, k, V)
                lp = F.log_softmax(logits, axis=-1)._data[0]                    # (k, V)
                out[start:stop] = picked(lp, targets[start:stop])
        return out

    # ------------------------------------------------------------------ generation protocol
    def prime(self, prompt_ids: np.ndarray) -> tuple[np.ndarray, Any]:
        """Read a 1-D prompt from the zero state; returns the logits (V,) for the next token
        and the state after the prompt (used by :func:`tinygrad_rnn.lm.generate`)."""
        logits, state = self(np.asarray(prompt_ids, dtype=np.int64)[None], None)
        return host_row(logits._data[0, -1]), state

    def advance(self, token_id: int, state: Any) -> tuple[np.ndarray, Any]:
        """Feed one token from ``state``; returns the next logits (V,) and the new state."""
        logits, state = self(np.array([[token_id]], dtype=np.int64), state)
        return host_row(logits._data[0, -1]), state

    def extra_repr(self) -> str:
        return (f"vocab_size={self.vocab_size}, cell={self.cell!r}, "
                f"tie_weights={self.tie_weights}")


# ------------------------------------------------------------------------- FeedForwardLM
class FeedForwardLM(Module):
    """The neural probabilistic language model of Bengio et al. (2003), eqs. (F1)-(F3).

    Parameters
    ----------
    vocab_size : int
        V.
    context_size : int
        n - 1, the number of previous tokens the model sees (>= 1).
    embedding_dim : int
        m, the size of each token's feature vector.
    hidden_size : int
        h, the tanh hidden layer's size.
    direct : bool
        Add the paper's direct connections W x from the embeddings to the logits (F2);
        default False.
    dropout : float
        On the concatenated embeddings and the hidden layer, training mode only.
    bos_id : int
        The id that pads the context at the start of a stream (``<s>``).
    init_range, dtype, generator
        As for :class:`RNNLM`.

    Attributes
    ----------
    embedding : Embedding (V, m)                          C of the paper
    hidden : Linear ((n-1) m -> h)                        H and d
    output : Linear (h -> V)                              U and b
    direct : Linear ((n-1) m -> V, no bias) or None       W

    Shapes
    ------
    contexts (N, n - 1) integer (or (*, n - 1)) -> logits (N, V) (or (*, V)).

    Examples
    --------
    >>> import numpy as np
    >>> model = FeedForwardLM(vocab_size=10, context_size=2, embedding_dim=4, hidden_size=8,
    ...                       generator=0)
    >>> contexts, targets = make_contexts(np.array([4, 5, 6, 7]), context_size=2)
    >>> contexts.tolist()
    [[2, 2], [2, 4], [4, 5], [5, 6]]
    >>> model(contexts).shape
    (4, 10)
    """

    def __init__(self, vocab_size: int, context_size: int, embedding_dim: int,
                 hidden_size: int, direct: bool = False, dropout: float = 0.0,
                 bos_id: int = BOS_ID, init_range: float = 0.1, dtype: Any = DEFAULT_FLOAT,
                 generator: Any = None) -> None:
        super().__init__()
        owner = "FeedForwardLM"
        V = _validate.positive_int(vocab_size, "vocab_size", owner)
        n1 = _validate.positive_int(context_size, "context_size", owner)
        m = _validate.positive_int(embedding_dim, "embedding_dim", owner)
        h = _validate.positive_int(hidden_size, "hidden_size", owner)
        dropout = check_dropout(dropout, owner)
        direct = _validate.flag(direct, "direct", owner)
        bos_id = _special_id(bos_id, "bos_id", owner, V)
        init_range = check_init_range(init_range, owner)
        rng = get_generator(generator)
        self.vocab_size, self.context_size = V, n1
        self.embedding_dim, self.hidden_size, self.bos_id = m, h, int(bos_id)
        self.embedding = Embedding(V, m, dtype=dtype, generator=rng)
        init.uniform_(self.embedding.weight, -init_range, init_range, generator=rng)
        self.hidden = Linear(n1 * m, h, dtype=dtype, generator=rng)
        self.output = Linear(h, V, dtype=dtype, generator=rng)
        init.zeros_(self.output.bias)
        self.direct: Linear | None
        if direct:
            self.direct = Linear(n1 * m, V, bias=False, dtype=dtype, generator=rng)
        else:
            self.direct = None
        self.drop = Dropout(dropout, generator=int(rng.integers(2 ** 63)))

    def forward(self, contexts: Any) -> Tensor:
        """Logits (*, V) of eq. (F2) for contexts (*, n - 1), oldest id first."""
        shape = tuple(contexts.shape) if hasattr(contexts, "shape") else np.shape(contexts)
        if len(shape) < 1 or shape[-1] != self.context_size:
            raise ValueError(f"FeedForwardLM: contexts must have shape (N, {self.context_size})"
                             f" (context_size = n - 1 = {self.context_size} previous ids), got "
                             f"shape {shape}")
        check_ids("FeedForwardLM", "contexts", contexts, self.vocab_size)
        emb = self.embedding(contexts)                                   # (*, n-1, m)
        x = self.drop(emb.reshape(*shape[:-1], self.context_size * self.embedding_dim))
        a = self.drop(F.tanh(self.hidden(x)))                            # (*, h)
        y = self.output(a)                                               # (*, V)
        if self.direct is not None:
            y = y + self.direct(x)
        return y

    def contexts(self, ids: Any) -> tuple[np.ndarray, np.ndarray]:
        """:func:`make_contexts` with this model's context size and ``<s>`` id."""
        return make_contexts(ids, self.context_size, self.bos_id)

    def log_probs(self, ids: Any) -> Tensor:
        """Next-token log-distributions of a 1-D stream: (T, V), row t = log p(. | ids[:t+1])
        (its context is the last n - 1 ids of ids[:t + 1], ``<s>``-padded), as for
        :meth:`RNNLM.log_probs`. Differentiable; runs in the current mode."""
        arr = id_array(ids, "FeedForwardLM.log_probs", (1,))
        ctx, _ = make_contexts(np.append(arr, self.bos_id), self.context_size, self.bos_id)
        return F.log_softmax(self(ctx[1:]), axis=-1)                     # (T, V)

    def token_log_probs(self, ids: Any, chunk_size: int = 1024) -> np.ndarray:
        """log p(ids[t] | ids[:t]) for t = 1 .. T - 1, (T - 1,) float64: the per-token form
        of :func:`~tinygrad_rnn.lm.evaluate_lm`, in eval mode, without a graph, in chunks of
        ``chunk_size`` positions."""
        arr = id_array(ids, "FeedForwardLM.token_log_probs", (1,))
        check_vocab_range(arr, self.vocab_size, "FeedForwardLM.token_log_probs")
        k = _validate.positive_int(chunk_size, "chunk_size", "FeedForwardLM.token_log_probs")
        out = np.zeros(max(arr.size - 1, 0))
        if arr.size < 2:
            return out
        ctx, targets = make_contexts(arr, self.context_size, self.bos_id)
        ctx, targets = ctx[1:], targets[1:]
        with eval_no_grad(self):
            for start in range(0, targets.size, k):
                stop = min(start + k, targets.size)
                lp = F.log_softmax(self(ctx[start:stop]), axis=-1)._data      # (k, V)
                out[start:stop] = picked(lp, targets[start:stop])
        return out

    # ------------------------------------------------------------------ generation protocol
    def prime(self, prompt_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The logits (V,) after a 1-D prompt and the window of the last n - 1 ids (the
        "state" of a feed-forward LM; ``<s>``-padded for short prompts)."""
        arr = np.asarray(prompt_ids, dtype=np.int64)
        padded = np.concatenate([np.full(self.context_size, self.bos_id, np.int64), arr])
        window = padded[-self.context_size:]
        return host_row(self(window[None])._data[0]), window

    def advance(self, token_id: int, window: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Slide the window by one token; returns the next logits (V,) and the new window."""
        window = np.append(window[1:], np.int64(token_id))
        return host_row(self(window[None])._data[0]), window

    def extra_repr(self) -> str:
        return (f"vocab_size={self.vocab_size}, context_size={self.context_size}, "
                f"direct={self.direct is not None}")
