"""String reversal with noise tokens, the lectures' attention task.

The source is a random string of letters from a small alphabet (default ``'a'``-``'h'``) with
noise symbols (default ``'#'`` and ``'*'``) mixed in; the target is the letters in reverse
order with the noise dropped::

    source  c # a * * f b        target  b f a c

Reversal makes the first output depend on the last input and the last output on the first,
so a decoder that only sees a fixed-size summary has to carry everything through it, while an
attention decoder can look up the token it needs; the noise makes the alignment non-trivial
(the attention weights form an anti-diagonal that skips the noise positions).

Tokens use one shared :class:`~tinygrad_rnn.data.text.Vocab`: ids 0..3 are ``<pad>``,
``<unk>``, ``<s>`` (BOS), ``</s>`` (EOS), then the letters, then the noise symbols.
:meth:`ReversalTask.batch` gives padded ``src``, ``src_lengths``, ``tgt_in`` (BOS + target),
``tgt_out`` (target + EOS) and the noise positions, ready for
:class:`tinygrad_rnn.nn.Seq2Seq`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator, NamedTuple, Sequence

import numpy as np

from ..random import get_generator
from .text import BOS_ID, EOS_ID, PAD_ID, Vocab, id_sequence

__all__ = ["ReversalExample", "ReversalBatch", "ReversalTask", "reverse_letters",
           "reversal_examples", "reversal_task"]


def reverse_letters(source: Sequence[str], noise: Sequence[str] = ("#", "*")) -> list[str]:
    """The target of a source: its non-noise tokens in reverse order."""
    for name, value in (("source", source), ("noise", noise)):
        if isinstance(value, bytes) or not hasattr(value, "__iter__"):
            raise TypeError(f"reverse_letters: {name} must be a sequence of tokens (str), got "
                            f"{type(value).__name__}")
    bad = set(noise)
    return [tok for tok in reversed(list(source)) if tok not in bad]


@dataclass(frozen=True)
class ReversalExample:
    """One source string (tokens) and its target (the letters reversed, no noise)."""

    source: tuple[str, ...]
    target: tuple[str, ...]

    @property
    def num_letters(self) -> int:
        """The number of letters (= the target length)."""
        return len(self.target)


class ReversalBatch(NamedTuple):
    """A padded batch (PAD_ID = 0 after each row's length).

    Attributes
    ----------
    src : int64 (N, S)
    src_lengths : int64 (N,)
    tgt_in : int64 (N, T)
        BOS followed by the target; T = longest target + 1.
    tgt_out : int64 (N, T)
        The target followed by EOS.
    tgt_lengths : int64 (N,)
        Target length + 1 (the real positions of tgt_in and tgt_out).
    noise : bool (N, S)
        True at the source positions that hold a noise symbol.
    """

    src: np.ndarray
    src_lengths: np.ndarray
    tgt_in: np.ndarray
    tgt_out: np.ndarray
    tgt_lengths: np.ndarray
    noise: np.ndarray


def _check_count(where: str, name: str, value: Any, least: int) -> int:
    """An integer (not a bool or a float, which is refused, not truncated) >= ``least``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{where}: {name} must be an integer, got {value!r} "
                        f"({type(value).__name__})")
    if value < least:
        raise ValueError(f"{where}: {name} must be >= {least}, got {value}")
    return int(value)


def _check_params(min_len: int, max_len: int, letters: str, noise: str,
                  noise_prob: float, where: str) -> None:
    _check_count(where, "min_len", min_len, 1)
    _check_count(where, "max_len", max_len, 1)
    if not min_len <= max_len:
        raise ValueError(f"{where}: need 1 <= min_len <= max_len, got min_len={min_len} and "
                         f"max_len={max_len}")
    for name, value in (("letters", letters), ("noise", noise)):
        if not isinstance(value, str):
            raise TypeError(f"{where}: {name} must be a str of one-character symbols, got "
                            f"{type(value).__name__}")
    if len(set(letters)) != len(letters) or len(letters) == 0:
        raise ValueError(f"{where}: letters must be distinct and non-empty, got {letters!r}")
    if set(letters) & set(noise) or len(set(noise)) != len(noise):
        raise ValueError(f"{where}: noise symbols {noise!r} must be distinct and not "
                         f"letters ({letters!r})")
    if isinstance(noise_prob, (bool, np.bool_)) or not isinstance(
            noise_prob, (int, float, np.integer, np.floating)):
        raise TypeError(f"{where}: noise_prob must be a number in [0, 1), got "
                        f"{noise_prob!r} ({type(noise_prob).__name__})")
    if not 0.0 <= noise_prob < 1.0 or (noise_prob > 0.0 and not noise):
        raise ValueError(f"{where}: noise_prob must be in [0, 1) (and > 0 needs noise "
                         f"symbols), got {noise_prob}")


def _draw(rng: np.random.Generator, min_len: int, max_len: int, letters: str, noise: str,
          noise_prob: float) -> ReversalExample:
    """Letter count L uniform in [min_len, max_len]; before each letter and at the end, a
    geometric number of noise symbols (each further one with probability noise_prob)."""
    n_letters = int(rng.integers(min_len, max_len + 1))
    source: list[str] = []
    placed = 0
    while placed < n_letters:
        if noise_prob > 0.0 and rng.random() < noise_prob:
            source.append(noise[int(rng.integers(len(noise)))])
        else:
            source.append(letters[int(rng.integers(len(letters)))])
            placed += 1
    return ReversalExample(tuple(source), tuple(reverse_letters(source, noise)))


def reversal_examples(n: int, min_len: int = 3, max_len: int = 12, letters: str = "abcdefgh",
                      noise: str = "#*", noise_prob: float = 0.2, generator: Any = 0,
                      exclude: Any = (), max_tries: int | None = None
                      ) -> list[ReversalExample]:
    """``n`` distinct examples whose sources are not in ``exclude``.

    Parameters
    ----------
    n : int
    min_len, max_len : int
        Range of the number of letters (the target length), drawn uniformly.
    letters, noise : str
        The alphabet and the noise symbols (one character each).
    noise_prob : float in [0, 1)
        Probability that the next source token is noise; a source of L letters has on
        average L * p / (1 - p) noise symbols.
    generator : int or numpy Generator
        Seed; the same seed gives the same examples.
    exclude : collection of source tuples
        Sources that may not be drawn (to keep splits disjoint).
    max_tries : int, optional
        Give up (ValueError) after this many draws (default 50 n + 1000).
    """
    _check_params(min_len, max_len, letters, noise, noise_prob, "reversal_examples")
    n = _check_count("reversal_examples", "n", n, 0)
    rng = get_generator(generator)
    seen = set(exclude)
    out: list[ReversalExample] = []
    tries = 0
    limit = 50 * n + 1000 if max_tries is None else max_tries
    while len(out) < n:
        tries += 1
        if tries > limit:
            raise ValueError(
                f"reversal_examples: found only {len(out)} of {n} distinct sources in "
                f"{limit} draws; widen the length range or the alphabet, or ask for fewer"
            )
        ex = _draw(rng, min_len, max_len, letters, noise, noise_prob)
        if ex.source in seen:
            continue
        seen.add(ex.source)
        out.append(ex)
    return out


@dataclass
class ReversalTask:
    """Train / valid / test splits of string reversal (disjoint sources) and their vocabulary.

    Build one with :func:`reversal_task`.
    """

    vocab: Vocab
    letters: str
    noise: str
    train: list = field(default_factory=list)
    valid: list = field(default_factory=list)
    test: list = field(default_factory=list)

    def encode(self, tokens: Sequence[str]) -> np.ndarray:
        """Token strings -> int64 ids."""
        return np.array([self.vocab.token_to_id(t) for t in tokens], dtype=np.int64)

    def decode(self, ids: Sequence[int], strip: bool = True) -> list[str]:
        """Ids (a 1-D sequence of integers) -> tokens; with ``strip``, stop at EOS and drop
        PAD/BOS."""
        arr = id_sequence(ids, "ReversalTask.decode")
        out = []
        for i in arr.tolist():
            if strip and i == EOS_ID:
                break
            if strip and i in (PAD_ID, BOS_ID):
                continue
            out.append(self.vocab.id_to_token(i))
        return out

    def batch(self, examples: Sequence[ReversalExample]) -> ReversalBatch:
        """Pad ``examples`` into a :class:`ReversalBatch`."""
        if len(examples) == 0:
            raise ValueError("ReversalTask.batch: need at least one example")
        N = len(examples)
        src_lengths = np.array([len(e.source) for e in examples], dtype=np.int64)
        tgt_lengths = np.array([len(e.target) + 1 for e in examples], dtype=np.int64)
        S, T = int(src_lengths.max()), int(tgt_lengths.max())
        src = np.full((N, S), PAD_ID, dtype=np.int64)
        noise = np.zeros((N, S), dtype=bool)
        tgt_in = np.full((N, T), PAD_ID, dtype=np.int64)
        tgt_out = np.full((N, T), PAD_ID, dtype=np.int64)
        noise_set = set(self.noise)
        for i, e in enumerate(examples):
            src[i, : len(e.source)] = self.encode(e.source)
            noise[i, : len(e.source)] = [t in noise_set for t in e.source]
            tgt = self.encode(e.target)
            tgt_in[i, 0] = BOS_ID
            tgt_in[i, 1: len(tgt) + 1] = tgt
            tgt_out[i, : len(tgt)] = tgt
            tgt_out[i, len(tgt)] = EOS_ID
        return ReversalBatch(src, src_lengths, tgt_in, tgt_out, tgt_lengths, noise)

    def batches(self, examples: Sequence[ReversalExample], batch_size: int,
                shuffle: bool = True, generator: Any = None) -> Iterator[ReversalBatch]:
        """One pass over ``examples`` in batches (shuffled with ``generator`` if asked)."""
        if batch_size < 1:
            raise ValueError(f"ReversalTask.batches: batch_size must be >= 1, got "
                             f"{batch_size}")
        order = np.arange(len(examples))
        if shuffle:
            order = get_generator(generator).permutation(len(examples))
        for start in range(0, len(examples), batch_size):
            yield self.batch([examples[i] for i in order[start: start + batch_size]])


def reversal_task(n_train: int = 5000, n_valid: int = 500, n_test: int = 500,
                  min_len: int = 3, max_len: int = 12, letters: str = "abcdefgh",
                  noise: str = "#*", noise_prob: float = 0.2,
                  generator: Any = 0) -> ReversalTask:
    """Seeded train / valid / test splits with pairwise distinct sources.

    Parameters are those of :func:`reversal_examples`. The vocabulary holds the special
    tokens (ids 0..3), then ``letters``, then ``noise``; sources and targets share it.

    Examples
    --------
    >>> task = reversal_task(20, 5, 5, min_len=2, max_len=4, generator=1)
    >>> ex = task.train[0]
    >>> list(ex.target) == [t for t in reversed(ex.source) if t not in "#*"]
    True
    >>> b = task.batch(task.train[:3])
    >>> bool((b.tgt_in[:, 0] == 2).all()), b.src.shape[0]
    (True, 3)
    """
    where = "reversal_task"
    sizes = tuple(_check_count(where, name, value, 0) for name, value in
                  (("n_train", n_train), ("n_valid", n_valid), ("n_test", n_test)))
    _check_params(min_len, max_len, letters, noise, noise_prob, where)
    rng = get_generator(generator)
    every = reversal_examples(sum(sizes), min_len, max_len, letters, noise, noise_prob, rng)
    vocab = Vocab(list(letters) + list(noise))
    parts = []
    start = 0
    for size in sizes:
        parts.append(every[start: start + size])
        start += size
    return ReversalTask(vocab, letters, noise, *parts)
