r"""Count-based n-gram language models: add-k and interpolated Kneser-Ney.

These are the baselines a neural language model has to beat; they use the same token ids,
the same special tokens (:mod:`tinygrad_rnn.data.text`) and the same perplexity evaluation
(:mod:`tinygrad_rnn.lm.perplexity`) as the recurrent models.

Notation
--------
n is the order, V the vocabulary size, w the next token and h its history: the n - 1 tokens
before it (fewer for lower orders); h' is h without its first (oldest) token. c(h w) counts
the n-gram "h w" in the training data, c(h) = sum_w c(h w) counts h *as a context* (so it
differs from the raw count of h at the end of a sentence), and

    N1+(h .)   = |{w : c(h w) > 0}|                    distinct tokens seen after h
    N1+(. h w) = |{v : c(v h w) > 0}|                  distinct tokens seen before "h w"
    N1+(. h .) = sum_w N1+(. h w)

Training sequences are padded with n - 1 ``<s>`` on the left and one ``</s>`` on the right, so
every token and the end of every sentence is predicted from a full-length history; a single
stream is treated as one sequence.

Add-k (Lidstone) smoothing
--------------------------
(1)  P(w | h) = (c(h w) + k) / (c(h) + k V)

for every history, seen or not (an unseen history gives the uniform 1 / V). As k -> 0 this
tends to the maximum-likelihood estimate c(h w) / c(h) on seen histories; k = 1 is Laplace.

Interpolated Kneser-Ney
-----------------------
The form of Chen & Goodman (1998), as taught in Jurafsky & Martin (ch. 3), with one discount
0 < d <= 1 at every order. The highest order interpolates an absolutely discounted estimate
with the next lower order:

(2)  P_KN(w | h) = max(c(h w) - d, 0) / c(h) + lambda(h) P_KN(w | h')
(3)  lambda(h) = d N1+(h .) / c(h)

Lower orders (histories shorter than n - 1) replace counts by continuation counts, "in how
many different contexts did h w appear":

(4)  P_KN(w | h) = max(N1+(. h w) - d, 0) / N1+(. h .) + lambda_c(h) P_KN(w | h')
(5)  lambda_c(h) = d |{w : N1+(. h w) > 0}| / N1+(. h .)

The recursion ends at the continuation unigram interpolated with the uniform distribution, so
a token never seen in training still has non-zero probability:

(6)  P_KN(w) = max(N1+(. w) - d, 0) / N1+(. .) + d |{w : N1+(. w) > 0}| / N1+(. .) * 1 / V

(for order 1 the only level is the highest one: (2)-(3) with the empty history and raw counts,
then the uniform 1 / V). A history that was never seen as a context (c(h) = 0 in (2), or
N1+(. h .) = 0 in (4)) backs off completely:

(7)  P_KN(w | h) = P_KN(w | h')

Every level sums to one over the V tokens: since d <= 1 and counts are integers,
sum_w max(c(h w) - d, 0) = c(h) - d N1+(h .), which (3) puts back, times a distribution
that sums to one. So :meth:`NGramLM.distribution` sums to 1 for every history, seen or not,
over the whole vocabulary (special tokens included: ``<pad>`` and ``<s>`` are never predicted
in training, so they keep only the small uniform share of (6)).

References
----------
S. F. Chen and J. Goodman, "An empirical study of smoothing techniques for language
modeling", Harvard TR-10-98, 1998.
R. Kneser and H. Ney, "Improved backing-off for m-gram language modeling", ICASSP 1995.
D. Jurafsky and J. H. Martin, "Speech and Language Processing", 3rd ed. draft, chapter 3.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ..data.text import BOS_ID, EOS_ID, id_sequence

__all__ = ["NGramLM"]

_SMOOTHINGS = ("add_k", "kneser_ney")


@dataclass
class _Level:
    """Counts of one order m: the m-grams seen, keyed as base-V integers, sorted, with their
    counts (raw at the highest order, continuation counts below), and per history (the first
    m - 1 tokens) the total count and the number of distinct next tokens."""

    gram_keys: np.ndarray   # (G,) int64, sorted
    gram_counts: np.ndarray  # (G,) float64
    ctx_keys: np.ndarray    # (C,) int64, sorted
    ctx_total: np.ndarray   # (C,) float64: c(h) or N1+(. h .)
    ctx_types: np.ndarray   # (C,) float64: N1+(h .)


def _level_from(gram_keys: np.ndarray, gram_counts: np.ndarray, V: int) -> _Level:
    ctx = gram_keys // V  # sorted, because the keys are
    ctx_keys, starts, types = np.unique(ctx, return_index=True, return_counts=True)
    total = np.add.reduceat(gram_counts, starts) if gram_counts.size else np.zeros(0)
    return _Level(gram_keys, gram_counts.astype(np.float64), ctx_keys,
                  total.astype(np.float64), types.astype(np.float64))


def _keys(rows: np.ndarray, V: int) -> np.ndarray:
    """Base-V integer keys of the rows of an (M, m) int64 array (0 for m = 0)."""
    key = np.zeros(rows.shape[0], dtype=np.int64)
    for j in range(rows.shape[1]):
        key = key * V + rows[:, j]
    return key


def _lookup(sorted_keys: np.ndarray, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Positions of ``keys`` in ``sorted_keys`` and whether each is present."""
    idx = np.searchsorted(sorted_keys, keys)
    idx_c = np.minimum(idx, max(sorted_keys.size - 1, 0))
    found = (idx < sorted_keys.size)
    if sorted_keys.size:
        found &= sorted_keys[idx_c] == keys
    return idx_c, found


def _vocab_size(vocab_size: Any, where: str) -> int:
    """V from an integer >= 1 or a :class:`~tinygrad_rnn.data.Vocab` (its length)."""
    if isinstance(vocab_size, (bool, np.bool_)):
        V: Any = vocab_size
    elif isinstance(vocab_size, (int, np.integer)):
        V = int(vocab_size)
    elif hasattr(vocab_size, "__len__") and not isinstance(vocab_size, (str, bytes)):
        V = len(vocab_size)
    else:
        V = vocab_size
    if isinstance(V, (bool, np.bool_)) or not isinstance(V, int) or V < 1:
        raise ValueError(f"{where}: vocab_size must be an integer >= 1 or a Vocab, got "
                         f"{vocab_size!r}")
    return V


def _id_in_vocab(value: Any, name: str, V: int, where: str) -> int:
    """A single id: an integer (not a bool or a float, which is refused, not truncated) in
    [0, V)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{where}: {name} must be an integer id, got {value!r}")
    if not 0 <= value < V:
        raise ValueError(f"{where}: {name}={value} is outside the vocabulary [0, {V})")
    return int(value)


def _check_ids(ids: Any, V: int | None, where: str) -> np.ndarray:
    """A 1-D int64 array of ids, each in [0, V) when V is given."""
    arr = np.asarray(ids)
    if arr.size == 0:
        return np.zeros(0, dtype=np.int64)
    arr = id_sequence(arr, where)
    if V is not None and (arr.min() < 0 or arr.max() >= V):
        bad = int(arr[(arr < 0) | (arr >= V)][0])
        raise ValueError(f"{where}: id {bad} is outside the vocabulary [0, {V})")
    return arr.astype(np.int64, copy=False)


def _as_sequences(data: Any, V: int, where: str) -> list[np.ndarray]:
    """The training data as a list of checked 1-D id arrays: a 1-D array or a flat list of
    scalars is one stream; a 2-D array or a list of sequences is one sequence per item."""
    if isinstance(data, np.ndarray):
        if data.ndim not in (1, 2):
            raise ValueError(f"{where}: expected 1-D or 2-D ids, got shape {data.shape}")
        items = [data] if data.ndim == 1 else list(data)
    else:
        if isinstance(data, (str, bytes)) or not hasattr(data, "__iter__"):
            raise TypeError(f"{where}: data must be a sequence of ids or a list of "
                            f"sequences, got {type(data).__name__}")
        items = list(data)
        if items and all(np.ndim(x) == 0 for x in items):   # one flat stream of scalars
            items = [np.asarray(items)]
    return [_check_ids(x, V, where) for x in items]


class NGramLM:
    """A count-based n-gram language model over token ids (see the module docstring for the
    numbered equations).

    Parameters
    ----------
    order : int
        n: 1 (unigram), 2 (bigram) or 3 (trigram); higher orders work too.
    smoothing : {'kneser_ney', 'add_k'}
        Interpolated Kneser-Ney, eqs. (2)-(7), or add-k, eq. (1).
    k : float
        The add-k pseudo-count (> 0); ignored by Kneser-Ney.
    discount : float
        The Kneser-Ney discount d, 0 < d <= 1; ignored by add-k.

    Examples
    --------
    >>> import numpy as np
    >>> lm = NGramLM(order=2).fit([[4, 5, 4], [4, 5]], vocab_size=6)
    >>> round(float(lm.distribution([4]).sum()), 12)
    1.0
    >>> lm.prob([4], 5) > lm.prob([4], 4)
    True
    """

    def __init__(self, order: int = 3, smoothing: str = "kneser_ney", k: float = 1.0,
                 discount: float = 0.75) -> None:
        if isinstance(order, bool) or not isinstance(order, (int, np.integer)) or order < 1:
            raise ValueError(f"NGramLM: order must be an integer >= 1, got {order!r}")
        if smoothing not in _SMOOTHINGS:
            raise ValueError(f"NGramLM: smoothing must be one of {_SMOOTHINGS}, got "
                             f"{smoothing!r}")
        for name, value in (("k", k), ("discount", discount)):
            if isinstance(value, (bool, np.bool_)) or not isinstance(
                    value, (int, float, np.integer, np.floating)):
                raise TypeError(f"NGramLM: {name} must be a real number, got {value!r} "
                                f"({type(value).__name__})")
        if smoothing == "add_k" and not (np.isfinite(k) and k > 0):
            raise ValueError(f"NGramLM: add-k needs a finite k > 0, got k={k!r}")
        if smoothing == "kneser_ney" and not (0.0 < discount <= 1.0):
            raise ValueError(f"NGramLM: Kneser-Ney needs a discount 0 < d <= 1, got "
                             f"{discount!r}")
        self.order = int(order)
        self.smoothing = smoothing
        self.k = float(k)
        self.discount = float(discount)
        self.vocab_size: int | None = None
        self.bos_id = BOS_ID
        self.eos_id = EOS_ID
        self._levels: dict[int, _Level] = {}

    def __repr__(self) -> str:
        extra = f"k={self.k}" if self.smoothing == "add_k" else f"discount={self.discount}"
        return (f"NGramLM(order={self.order}, smoothing={self.smoothing!r}, {extra}, "
                f"vocab_size={self.vocab_size})")

    # ---------------------------------------------------------------- fitting
    def fit(self, data: Any, vocab_size: Any, bos_id: int = BOS_ID,
            eos_id: int = EOS_ID) -> "NGramLM":
        """Count the n-grams of ``data``.

        Parameters
        ----------
        data : 1-D int array / list of ints, or a list of those
            One stream of ids, or several sequences (e.g. sentences). Each sequence is padded
            with ``order - 1`` copies of ``bos_id`` on the left and one ``eos_id`` on the
            right.
        vocab_size : int or Vocab
            V: ids must lie in [0, V), and distributions are over all V ids.
        bos_id, eos_id : int
            The ``<s>`` and ``</s>`` ids (2 and 3 in a :class:`~tinygrad_rnn.data.Vocab`).

        Returns
        -------
        self

        Everything is checked before the model changes: a fit that raises leaves the model
        exactly as it was (unfitted, or fitted on the previous data).
        """
        where = "NGramLM.fit"
        V = _vocab_size(vocab_size, where)
        n = self.order
        if float(V) ** n >= 2.0 ** 62:
            raise ValueError(f"{where}: vocab_size {V} is too large for order {n} "
                             f"(n-gram keys need V**n < 2**62)")
        bos = _id_in_vocab(bos_id, "bos_id", V, where)
        eos = _id_in_vocab(eos_id, "eos_id", V, where)
        sequences = _as_sequences(data, V, where)
        if not sequences:
            raise ValueError(f"{where}: no training sequences")
        # everything is checked and counted into locals first: a failed fit leaves the model
        # exactly as it was
        windows = []
        for seq in sequences:
            padded = np.concatenate([np.full(n - 1, bos, dtype=np.int64), seq,
                                     np.array([eos], dtype=np.int64)])
            windows.append(np.lib.stride_tricks.sliding_window_view(padded, n))
        grams = np.concatenate(windows, axis=0)  # (M, n): every predicted event
        keys, counts = np.unique(_keys(grams, V), return_counts=True)
        levels = {n: _level_from(keys, counts.astype(np.float64), V)}
        if self.smoothing == "kneser_ney":
            for m in range(n - 1, 0, -1):
                # eq. (4): N1+(. h w) = number of distinct (m+1)-gram types ending in "h w"
                suffixes = levels[m + 1].gram_keys % (V ** m)
                keys_m, cont = np.unique(suffixes, return_counts=True)
                levels[m] = _level_from(keys_m, cont.astype(np.float64), V)
        self.vocab_size, self.bos_id, self.eos_id, self._levels = V, bos, eos, levels
        return self

    def _check_fitted(self, where: str) -> int:
        if self.vocab_size is None:
            raise RuntimeError(f"{where}: the model is not fitted; call fit() first")
        return self.vocab_size

    def _check_ids(self, ids: Any, where: str) -> np.ndarray:
        return _check_ids(ids, self.vocab_size, where)

    def _context(self, context: Any, where: str) -> np.ndarray:
        """The last n - 1 ids of ``context``, left-padded with ``<s>``: shape (n - 1,)."""
        ctx = self._check_ids(context, where)
        width = self.order - 1
        ctx = ctx[max(len(ctx) - width, 0):]  # (not ctx[-width:]: wrong for width 0)
        pad = np.full(width - len(ctx), self.bos_id, dtype=np.int64)
        return np.concatenate([pad, ctx])

    # ---------------------------------------------------------------- probabilities
    def _probs(self, contexts: np.ndarray, words: np.ndarray) -> np.ndarray:
        """P(words[i] | contexts[i]) for (M, n - 1) contexts and (M,) words, vectorised."""
        V = self.vocab_size
        assert V is not None, "callers check that the model is fitted"
        n = self.order
        d = self.discount
        p = np.full(words.shape[0], 1.0 / V)  # level 0: uniform
        levels = range(1, n + 1) if self.smoothing == "kneser_ney" else [n]
        for m in levels:
            level = self._levels[m]
            ctx_key = _keys(contexts[:, n - m:], V)          # last m - 1 tokens
            ci, c_found = _lookup(level.ctx_keys, ctx_key)
            gi, g_found = _lookup(level.gram_keys, ctx_key * V + words)
            # a fitted level is never empty: every sequence adds at least the </s> event
            c = np.where(g_found, level.gram_counts[gi], 0.0)
            total = level.ctx_total[ci]
            types = level.ctx_types[ci]
            if self.smoothing == "add_k":
                total = np.where(c_found, total, 0.0)
                p = (c + self.k) / (total + self.k * V)                      # eq. (1)
            else:
                mixed = (np.maximum(c - d, 0.0) + d * types * p) / total     # eqs. (2)-(6)
                p = np.where(c_found, mixed, p)                               # eq. (7)
        return p

    def distribution(self, context: Any = ()) -> np.ndarray:
        """P(. | context) over the whole vocabulary: shape (V,), float64, sums to 1.

        Only the last ``order - 1`` ids of ``context`` matter; a shorter context is
        left-padded with ``<s>`` (so ``()`` is the start of a sentence).
        """
        V = self._check_fitted("NGramLM.distribution")
        ctx = self._context(context, "NGramLM.distribution")
        n = self.order
        d = self.discount
        p = np.full(V, 1.0 / V)
        levels = range(1, n + 1) if self.smoothing == "kneser_ney" else [n]
        for m in levels:
            level = self._levels[m]
            ctx_key = int(_keys(ctx[None, n - m:], V)[0])
            ci, c_found = _lookup(level.ctx_keys, np.array([ctx_key], dtype=np.int64))
            lo = int(np.searchsorted(level.gram_keys, ctx_key * V))
            hi = int(np.searchsorted(level.gram_keys, (ctx_key + 1) * V))
            words = level.gram_keys[lo:hi] - ctx_key * V
            counts = level.gram_counts[lo:hi]
            if self.smoothing == "add_k":
                total = float(level.ctx_total[ci[0]]) if c_found[0] else 0.0
                c = np.zeros(V)
                c[words] = counts
                p = (c + self.k) / (total + self.k * V)                      # eq. (1)
            elif c_found[0]:
                total = level.ctx_total[ci[0]]
                types = level.ctx_types[ci[0]]
                mixed = d * types * p                                        # eq. (3)/(5)
                mixed[words] += np.maximum(counts - d, 0.0)                  # eq. (2)/(4)
                p = mixed / total
            # else: eq. (7), p stays the lower-order distribution
        return p

    def prob(self, context_ids: Any, next_id: int) -> float:
        """P(next_id | context_ids) (context handled as in :meth:`distribution`)."""
        V = self._check_fitted("NGramLM.prob")
        ctx = self._context(context_ids, "NGramLM.prob")
        w = _id_in_vocab(next_id, "next_id", V, "NGramLM.prob")
        return float(self._probs(ctx[None, :], np.array([w], dtype=np.int64))[0])

    def _history_contexts(self, ids: np.ndarray, start: int) -> np.ndarray:
        """(len(ids) - start, n - 1) contexts: row i is the history of ids[start + i]."""
        width = self.order - 1
        padded = np.concatenate([np.full(width, self.bos_id, dtype=np.int64), ids])
        if width == 0:
            return np.zeros((len(ids) - start, 0), dtype=np.int64)
        windows = np.lib.stride_tricks.sliding_window_view(padded, width)
        return windows[start: len(ids)]

    def token_log_probs(self, ids: Any) -> np.ndarray:
        """log P(ids[t] | ids[:t]) for t = 1 .. T - 1, in nats: shape (T - 1,).

        The first id is given, not scored; histories are left-padded with ``<s>``. This is
        the per-token form :func:`tinygrad_rnn.lm.perplexity.evaluate_lm` expects.
        """
        self._check_fitted("NGramLM.token_log_probs")
        arr = self._check_ids(ids, "NGramLM.token_log_probs")
        if arr.size < 2:
            return np.zeros(0)
        contexts = self._history_contexts(arr, 1)
        return np.log(self._probs(contexts, arr[1:]))

    def log_probs(self, ids: Any) -> np.ndarray:
        """Next-token log-distributions: row t is log P(. | ids[:t + 1]).

        ``ids`` of shape (T,) gives (T, V); a batch (N, T) gives (N, T, V), like the output
        of a neural LM run on the same ids. This holds T V floats: to score a long stream,
        use :meth:`token_log_probs`, which computes only the probabilities of the targets.
        """
        V = self._check_fitted("NGramLM.log_probs")
        arr = np.asarray(ids)
        if arr.ndim == 2:
            return np.stack([self.log_probs(row) for row in arr])
        arr = self._check_ids(arr, "NGramLM.log_probs")
        out = np.empty((arr.size, V))
        for t in range(arr.size):
            out[t] = np.log(self.distribution(arr[: t + 1]))
        return out

    def log_prob_sequence(self, ids: Any) -> float:
        """log P(sentence) in nats: every token of ``ids`` and a final ``</s>``, each given
        its history left-padded with ``<s>``, as in training.

        Equal to ``token_log_probs([<s>] + ids + [</s>]).sum()``.
        """
        self._check_fitted("NGramLM.log_prob_sequence")
        arr = self._check_ids(ids, "NGramLM.log_prob_sequence")
        wrapped = np.concatenate([[self.bos_id], arr, [self.eos_id]]).astype(np.int64)
        return float(self.token_log_probs(wrapped).sum())

    def count(self, ngram: Sequence[int]) -> int:
        """The training count c(ngram) of a full-order n-gram (for inspection and tests)."""
        self._check_fitted("NGramLM.count")
        gram = self._check_ids(list(ngram), "NGramLM.count")
        if gram.size != self.order:
            raise ValueError(f"NGramLM.count: need {self.order} ids, got {gram.size}")
        level = self._levels[self.order]
        assert self.vocab_size is not None  # fitted (checked above)
        i, found = _lookup(level.gram_keys, _keys(gram[None, :], self.vocab_size))
        return int(level.gram_counts[i[0]]) if found[0] else 0

    @property
    def fitted(self) -> bool:
        return self.vocab_size is not None

