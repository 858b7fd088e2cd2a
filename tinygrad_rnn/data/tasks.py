"""Generated long-dependency tasks (seeded): the adding problem, the copy problem, and
"recall the first token after T distractors".

All generators take ``generator`` (a seed or ``numpy.random.Generator``) and return
batch-first NumPy arrays (use ``batch_first=True`` layers, or transpose to time-major).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..random import get_generator

__all__ = ["adding_problem", "copy_problem", "recall_first", "AddingBaseline",
           "CopyTask"]

def _count(value: Any, name: str, where: str, least: int) -> int:
    """A size argument as a Python int: an integer (TypeError for a bool or a float, which
    is refused, not truncated) that is at least ``least`` (ValueError)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{where}: {name} must be an integer, got {value!r}")
    if value < least:
        raise ValueError(f"{where}: {name} must be at least {least}, got {value}")
    return int(value)


#: MSE of always predicting 1 on the adding problem: Var(u1 + u2) = 2/12 for u ~ U(0, 1).
AddingBaseline = 1.0 / 6.0


def adding_problem(n: int, T: int, generator: Any = None,
                   dtype: Any = np.float32) -> tuple[np.ndarray, np.ndarray]:
    """The adding problem (Hochreiter & Schmidhuber 1997; the two-halves form of Le et al.
    2015).

    Each sequence has T steps of two features: a value u_t ~ U(0, 1) and a marker that is 1
    at exactly two steps, one in each half of the sequence, and 0 elsewhere. The target is
    the sum of the two marked values. Predicting the mean, 1, gives MSE 1/6 ~ 0.167, so a
    model is only learning once its MSE falls well below that.

    Returns x of shape (n, T, 2) and y of shape (n, 1); n >= 0 and T >= 2.
    """
    n = _count(n, "n", "adding_problem", 0)
    T = _count(T, "T", "adding_problem", 2)
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"adding_problem: dtype must be a floating-point dtype, got "
                        f"{dtype!r}") from None
    if dt.kind != "f":  # the values are in (0, 1): an integer dtype would make them all 0
        raise TypeError(f"adding_problem: dtype must be a floating-point dtype, got {dt}")
    rng = get_generator(generator)
    values = rng.random((n, T))
    half = T // 2
    first = rng.integers(0, half, size=n)
    second = rng.integers(half, T, size=n)
    markers = np.zeros((n, T))
    rows = np.arange(n)
    markers[rows, first] = 1.0
    markers[rows, second] = 1.0
    x = np.stack([values, markers], axis=-1).astype(dtype)
    y = (values[rows, first] + values[rows, second]).astype(dtype)[:, None]
    return x, y


@dataclass(frozen=True)
class CopyTask:
    """Token layout of :func:`copy_problem`: ids 0..num_symbols-1 are symbols, then
    ``blank`` and ``delimiter``."""

    num_symbols: int

    @property
    def blank(self) -> int:
        return self.num_symbols

    @property
    def delimiter(self) -> int:
        return self.num_symbols + 1

    @property
    def vocab_size(self) -> int:
        return self.num_symbols + 2


def copy_problem(n: int, delay: int, length: int = 10, num_symbols: int = 8,
                 generator: Any = None) -> tuple[np.ndarray, np.ndarray, CopyTask]:
    """The copy (memory) problem (Hochreiter & Schmidhuber 1997; Arjovsky et al. 2016).

    Input: ``length`` random symbols, ``delay`` blanks, a delimiter, then ``length - 1``
    blanks (total T = 2 length + delay). Target: blanks everywhere except the last
    ``length`` steps, which must reproduce the symbols. A model that outputs blanks and then
    guesses uniformly has cross entropy length * log(num_symbols) / T per step.

    Returns token ids x, y of shape (n, T) and the :class:`CopyTask` layout; n >= 0,
    delay >= 0, length >= 1 and num_symbols >= 1.
    """
    where = "copy_problem"
    n = _count(n, "n", where, 0)
    delay = _count(delay, "delay", where, 0)
    length = _count(length, "length", where, 1)
    num_symbols = _count(num_symbols, "num_symbols", where, 1)
    task = CopyTask(num_symbols)
    rng = get_generator(generator)
    T = 2 * length + delay
    symbols = rng.integers(0, num_symbols, size=(n, length))
    x = np.full((n, T), task.blank, dtype=np.int64)
    y = np.full((n, T), task.blank, dtype=np.int64)
    x[:, :length] = symbols
    x[:, length + delay] = task.delimiter
    y[:, T - length:] = symbols
    return x, y, task


def recall_first(n: int, distractors: int, vocab_size: int = 10,
                 generator: Any = None) -> tuple[np.ndarray, np.ndarray]:
    """Recall the first token after T distractors (the lectures' "tickets" example in
    miniature: the answer depends on something said long ago).

    Each sequence is a key token from ids [0, vocab_size // 2) followed by ``distractors``
    tokens from [vocab_size // 2, vocab_size). The target, read at the last step, is the key.
    Chance accuracy is 1 / (vocab_size // 2).

    Returns x of shape (n, distractors + 1) and y of shape (n,); n >= 0, distractors >= 0
    and vocab_size >= 4.
    """
    n = _count(n, "n", "recall_first", 0)
    distractors = _count(distractors, "distractors", "recall_first", 0)
    vocab_size = _count(vocab_size, "vocab_size", "recall_first", 4)
    rng = get_generator(generator)
    keys = rng.integers(0, vocab_size // 2, size=n)
    noise = rng.integers(vocab_size // 2, vocab_size, size=(n, distractors))
    x = np.concatenate([keys[:, None], noise], axis=1).astype(np.int64)
    return x, keys.astype(np.int64)
