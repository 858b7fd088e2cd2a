"""Generated sequence classification and sequence labeling tasks (seeded).

Every task is a padded batch of token ids in the package's conventions: a
:class:`~tinygrad_rnn.data.text.Vocab` whose ids 0..3 are ``<pad>``, ``<unk>``, ``<s>``,
``</s>`` and whose task symbols start at id 4, rows padded with ``PAD_ID`` (0) after their
true ``lengths``, so they feed :class:`tinygrad_rnn.nn.SequenceClassifier` and
:class:`tinygrad_rnn.nn.SequenceTagger` directly.

Classification (one label per sequence)
---------------------------------------
* :func:`parity_task`: a bit string; the label is the parity of its number of ones
  (XOR of all bits). Every bit matters, so no shortcut beats chance (1/2).
* :func:`balanced_parens_task`: a string of ``(`` and ``)``; the label says whether it is
  balanced (every prefix has at least as many ``(`` as ``)``, and the counts are equal).
  Half the examples are balanced; the unbalanced half has the same even lengths and is split
  between strings with unequal counts and strings with equal counts whose prefix depth goes
  negative, so neither counting alone nor the length gives the answer.

Labeling (one tag per token)
----------------------------
* :func:`repeat_tagging_task`: random symbols; a token is tagged ``repeat`` when it equals
  the previous token (``compare='previous'``) or the next one (``compare='next'``, which
  needs right context), else ``new``. Tags of padded steps are ``IGNORE_INDEX`` (-100).

All generators take ``generator`` (an int seed or a ``numpy.random.Generator``): the same
seed gives the same data.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator

import numpy as np

from ..random import get_generator
from .text import PAD_ID, Vocab, pad_batch

__all__ = ["SequenceTask", "IGNORE_INDEX", "parity_task", "balanced_parens_task",
           "repeat_tagging_task", "is_balanced"]

#: The tag of padded steps; the losses skip it (torch's default ``ignore_index``).
IGNORE_INDEX = -100


@dataclass(frozen=True)
class SequenceTask:
    """A generated data set: padded ids, lengths and targets, with the vocabulary.

    Attributes
    ----------
    ids : (N, T) int64
        Row n holds ``lengths[n]`` token ids followed by ``PAD_ID``.
    lengths : (N,) int64
        The true lengths (>= 1).
    targets : (N,) int64 class ids, or (N, T) int64 tags with ``IGNORE_INDEX`` at padding
    vocab : Vocab
        Decodes ``ids`` (``vocab.decode(ids[n, :lengths[n]])``).
    classes : tuple of str
        The names of the classes (or tags): target c means ``classes[c]``.
    """

    ids: np.ndarray
    lengths: np.ndarray
    targets: np.ndarray
    vocab: Vocab
    classes: tuple[str, ...]

    def __len__(self) -> int:
        return int(self.ids.shape[0])

    @property
    def num_classes(self) -> int:
        return len(self.classes)

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    @property
    def is_tagging(self) -> bool:
        """True when there is one target per token (sequence labeling)."""
        return self.targets.ndim == 2

    @property
    def mask(self) -> np.ndarray:
        """(N, T) bool, True at real tokens."""
        return np.arange(self.ids.shape[1])[None, :] < self.lengths[:, None]

    def subset(self, index: Any) -> "SequenceTask":
        """The examples selected by ``index`` (an index array, slice or boolean mask), with
        the padding cut to the longest selected sequence."""
        lengths = self.lengths[index]
        width = int(lengths.max()) if lengths.size else 0
        targets = self.targets[index]
        if self.is_tagging:
            targets = targets[:, :width]
        return SequenceTask(self.ids[index][:, :width], lengths, targets, self.vocab,
                            self.classes)

    def batches(self, batch_size: int, generator: Any = None,
                shuffle: bool = True) -> Iterator["SequenceTask"]:
        """Minibatches of ``batch_size`` examples (the last may be smaller) covering every
        example once, in an order shuffled by ``generator`` (or in order)."""
        if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) \
                or batch_size < 1:
            raise ValueError(f"SequenceTask.batches: batch_size must be a positive integer, "
                             f"got {batch_size!r}")
        order = np.arange(len(self))
        if shuffle:
            order = get_generator(generator).permutation(len(self))
        for start in range(0, len(self), batch_size):
            yield self.subset(order[start: start + batch_size])


def _check_lengths(min_length: int, max_length: int | None, where: str,
                   least: int = 1) -> tuple[int, int]:
    hi = min_length if max_length is None else max_length
    for name, value in (("min_length", min_length), ("max_length", hi)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise TypeError(f"{where}: {name} must be an integer, got {value!r}")
    if min_length < least or hi < min_length:
        raise ValueError(f"{where}: need {least} <= min_length <= max_length, got "
                         f"min_length={min_length}, max_length={hi}")
    return int(min_length), int(hi)


def _check_n(n: int, where: str) -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"{where}: n must be a positive integer, got {n!r}")
    return int(n)


def _tagged(vocab: Vocab, rows: list[list[str]], tag_rows: list[np.ndarray] | None,
            labels: np.ndarray | None, classes: tuple[str, ...]) -> SequenceTask:
    ids, lengths, mask = pad_batch([vocab.encode(r) for r in rows], pad_id=PAD_ID)
    if tag_rows is not None:
        targets = np.full(ids.shape, IGNORE_INDEX, dtype=np.int64)
        for i, tags in enumerate(tag_rows):
            targets[i, : tags.size] = tags
    else:
        targets = np.asarray(labels, dtype=np.int64)
    return SequenceTask(ids, lengths, targets, vocab, classes)


# ----------------------------------------------------------------------------- classification
def parity_task(n: int, min_length: int = 6, max_length: int | None = None,
                generator: Any = None) -> SequenceTask:
    """Bit strings labelled with their parity.

    Each string has a length drawn uniformly from [min_length, max_length] (fixed when
    ``max_length`` is None) and independent fair bits; its label is 1 (``'odd'``) when it has
    an odd number of ones, else 0 (``'even'``). Tokens ``'0'`` and ``'1'`` have ids 4 and 5.

    Returns a :class:`SequenceTask` with targets (n,).
    """
    where = "parity_task"
    n = _check_n(n, where)
    lo, hi = _check_lengths(min_length, max_length, where)
    rng = get_generator(generator)
    vocab = Vocab(["0", "1"])
    lengths = rng.integers(lo, hi + 1, size=n)
    rows, labels = [], np.zeros(n, dtype=np.int64)
    for i, length in enumerate(lengths):
        bits = rng.integers(0, 2, size=int(length))
        rows.append([str(b) for b in bits])
        labels[i] = int(bits.sum()) % 2
    return _tagged(vocab, rows, None, labels, ("even", "odd"))


def is_balanced(s: str | list[str]) -> bool:
    """Whether a string of ``(`` and ``)`` is balanced: the depth (``(`` minus ``)`` so far)
    never goes negative and ends at 0."""
    if isinstance(s, bytes) or not hasattr(s, "__iter__"):
        raise TypeError(f"is_balanced: s must be a str or a list of '(' and ')', got "
                        f"{type(s).__name__}")
    depth = 0
    for ch in s:
        depth += 1 if ch == "(" else -1
        if depth < 0:
            return False
    return depth == 0


def _random_balanced(half: int, rng: np.random.Generator) -> list[str]:
    """A balanced string of ``half`` pairs: a random walk that opens while it may and
    otherwise closes, choosing fairly when both are allowed."""
    out, depth, opened = [], 0, 0
    for _ in range(2 * half):
        can_open, can_close = opened < half, depth > 0
        if can_open and (not can_close or rng.random() < 0.5):
            out.append("(")
            depth, opened = depth + 1, opened + 1
        else:
            out.append(")")
            depth -= 1
    return out


def _random_unbalanced(half: int, rng: np.random.Generator) -> list[str]:
    """An unbalanced string of length 2 ``half``: equal counts in a wrong order, or one
    character of a balanced string flipped (unequal counts), with equal probability."""
    if rng.random() < 0.5:
        while True:  # a random arrangement of half '(' and half ')' is balanced w.p. 1/(half+1)
            s = list(rng.permutation(["("] * half + [")"] * half))
            if not is_balanced(s):
                return [str(c) for c in s]
    s = _random_balanced(half, rng)
    i = int(rng.integers(0, len(s)))
    s[i] = ")" if s[i] == "(" else "("
    return s


def balanced_parens_task(n: int, min_length: int = 2, max_length: int = 12,
                         generator: Any = None) -> SequenceTask:
    """Strings of parentheses labelled balanced (1) or not (0).

    Lengths are even, drawn uniformly from the even numbers in [min_length, max_length];
    each example is balanced with probability 1/2 (see the module docstring for how the
    unbalanced ones are made). Tokens ``'('`` and ``')'`` have ids 4 and 5.

    Returns a :class:`SequenceTask` with targets (n,) and classes ``('unbalanced',
    'balanced')``.
    """
    where = "balanced_parens_task"
    n = _check_n(n, where)
    lo, hi = _check_lengths(min_length, max_length, where, least=2)
    halves = np.arange((lo + 1) // 2, hi // 2 + 1)
    if halves.size == 0:
        raise ValueError(f"{where}: no even length in [{lo}, {hi}]")
    rng = get_generator(generator)
    vocab = Vocab(["(", ")"])
    rows, labels = [], np.zeros(n, dtype=np.int64)
    for i in range(n):
        half = int(rng.choice(halves))
        if rng.random() < 0.5:
            rows.append(_random_balanced(half, rng))
            labels[i] = 1
        else:
            rows.append(_random_unbalanced(half, rng))
    return _tagged(vocab, rows, None, labels, ("unbalanced", "balanced"))


# ------------------------------------------------------------------------------------ tagging
def repeat_tagging_task(n: int, min_length: int = 4, max_length: int = 12,
                        num_symbols: int = 4, repeat_prob: float = 0.4,
                        compare: str = "previous", generator: Any = None) -> SequenceTask:
    """Tag every token with whether it repeats its neighbour.

    A sequence starts with a uniform symbol; each next symbol repeats the current one with
    probability ``repeat_prob`` and is otherwise uniform over the other ``num_symbols - 1``
    symbols. With ``compare='previous'`` token t is tagged 1 (``'repeat'``) when it equals
    token t - 1 (the first token is ``'new'``); with ``compare='next'`` when it equals token
    t + 1 (the last token is ``'new'``). Symbols are ``'a'``, ``'b'``, ... with ids 4, 5, ....

    Returns a :class:`SequenceTask` with targets (n, T): tags, ``IGNORE_INDEX`` at padding.
    """
    where = "repeat_tagging_task"
    n = _check_n(n, where)
    lo, hi = _check_lengths(min_length, max_length, where)
    if isinstance(num_symbols, bool) or not isinstance(num_symbols, (int, np.integer)) \
            or not 2 <= num_symbols <= 26:
        raise ValueError(f"{where}: num_symbols must be an integer in [2, 26], got "
                         f"{num_symbols!r}")
    if isinstance(repeat_prob, (bool, np.bool_)) or not isinstance(
            repeat_prob, (int, float, np.integer, np.floating)):
        raise TypeError(f"{where}: repeat_prob must be a number in [0, 1], got "
                        f"{repeat_prob!r} ({type(repeat_prob).__name__})")
    if not 0.0 <= repeat_prob <= 1.0:
        raise ValueError(f"{where}: repeat_prob must be in [0, 1], got {repeat_prob}")
    if compare not in ("previous", "next"):
        raise ValueError(f"{where}: compare must be 'previous' or 'next', got {compare!r}")
    rng = get_generator(generator)
    symbols = [chr(ord("a") + i) for i in range(num_symbols)]
    vocab = Vocab(symbols)
    rows, tag_rows = [], []
    for length in rng.integers(lo, hi + 1, size=n):
        seq = np.empty(int(length), dtype=np.int64)
        seq[0] = rng.integers(0, num_symbols)
        for t in range(1, seq.size):
            if rng.random() < repeat_prob:
                seq[t] = seq[t - 1]
            else:  # uniform over the other symbols
                seq[t] = (seq[t - 1] + rng.integers(1, num_symbols)) % num_symbols
        same = (seq[1:] == seq[:-1]).astype(np.int64)                    # (L - 1,)
        tags = np.concatenate([[0], same]) if compare == "previous" \
            else np.concatenate([same, [0]])
        rows.append([symbols[s] for s in seq])
        tag_rows.append(tags.astype(np.int64))
    return _tagged(vocab, rows, tag_rows, None, ("new", "repeat"))
