"""Text corpora that need no download.

The default corpus is the English documentation that ships with CPython itself:
``pydoc_data.topics.topics``, the text ``help()`` shows for keywords and topics (a dict of
about 80 topics, roughly 0.46 MB of English prose with code examples and grammar rules). It is
in every standard CPython install, so a character- or word-level language model can be trained
and evaluated offline. Any UTF-8 text file can be used instead.
"""
from __future__ import annotations

import os
import re
from typing import Any, NamedTuple, Sequence

import numpy as np

from .. import _validate
from .text import (CharTokenizer, Vocab, WordTokenizer, check_vocab_limits, read_text_file,
                   split_sizes)

__all__ = ["load_corpus", "pydoc_text", "char_corpus", "word_corpus", "Corpus",
           "DEFAULT_CORPUS"]

#: The name of the built-in corpus accepted by :func:`load_corpus`.
DEFAULT_CORPUS = "pydoc"

_BLANK_RUNS = re.compile(r"\n{3,}")


def _normalize(text: str) -> str:
    """Light whitespace normalisation: universal newlines, no trailing spaces on a line, at
    most one blank line in a row, no leading/trailing blank lines. Indentation is kept."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = "\n".join(line.rstrip() for line in text.split("\n"))
    text = _BLANK_RUNS.sub("\n\n", text)
    return text.strip("\n")


def pydoc_text() -> str:
    """The CPython topic documentation as one string.

    The values of ``pydoc_data.topics.topics`` are joined in sorted order of their keys
    (``'assert'``, ``'assignment'``, ...), each normalised lightly (``\\r\\n`` -> ``\\n``,
    trailing spaces removed, runs of blank lines collapsed to one, the topic's leading and
    trailing blank lines stripped) and separated by one blank line. Indentation, tabs and
    everything else are kept as they are, so the text depends only on the Python version.
    """
    try:
        from pydoc_data.topics import topics
    except ImportError as exc:  # pragma: no cover - stripped-down Python builds only
        raise RuntimeError(
            "the built-in corpus needs the standard-library module pydoc_data, which this "
            "Python build lacks; pass the path of a UTF-8 text file instead"
        ) from exc
    parts = [_normalize(topics[key]) for key in sorted(topics)]
    return "\n\n".join(part for part in parts if part) + "\n"


def load_corpus(name_or_path: str | os.PathLike | None = None) -> str:
    """Load a corpus as text.

    Parameters
    ----------
    name_or_path : None, ``'pydoc'``, or a path
        None or ``'pydoc'`` gives :func:`pydoc_text` (the name wins over a file called
        ``pydoc``; write ``'./pydoc'`` for that). Anything else is the path of a UTF-8 text
        file, read as it is (no normalisation).

    Raises
    ------
    FileNotFoundError, IsADirectoryError, OSError
        The path is missing, a directory, or unreadable.
    ValueError
        The file is not UTF-8 (e.g. binary) or the corpus is empty (only whitespace).
    Every message names the path and the problem.
    """
    if name_or_path is None or (isinstance(name_or_path, str)
                                and name_or_path == DEFAULT_CORPUS):
        return pydoc_text()
    if not isinstance(name_or_path, (str, os.PathLike)):
        raise TypeError(f"load_corpus: name_or_path must be None, {DEFAULT_CORPUS!r} or a "
                        f"path, got {type(name_or_path).__name__}")
    text = read_text_file(name_or_path, what="load_corpus: corpus file")
    if not text.strip():
        kind = "empty" if not text else "only whitespace"
        raise ValueError(f"corpus file {os.fspath(name_or_path)!r}: the file is {kind}, "
                         f"there is no text to train on")
    return text


class Corpus(NamedTuple):
    """A tokenised corpus: the vocabulary (built from the training part only) and the
    contiguous train / valid / test id streams (1-D ``int64``). Unpacks as a 4-tuple."""

    vocab: Vocab
    train: np.ndarray
    valid: np.ndarray
    test: np.ndarray


def _make_corpus(tokens: list[str], fractions: Sequence[float], min_freq: int,
                 max_size: int | None, where: str) -> Corpus:
    sizes = split_sizes(len(tokens), fractions, where)
    if len(sizes) != 3:
        raise ValueError(f"{where}: fractions must give three parts (train, valid, test), got "
                         f"{len(sizes)}")
    a, b = sizes[0], sizes[0] + sizes[1]
    train_tokens, valid_tokens, test_tokens = tokens[:a], tokens[a:b], tokens[b:]
    if not train_tokens:
        raise ValueError(f"{where}: the training part is empty ({len(tokens)} tokens, "
                         f"fractions {tuple(fractions)})")
    vocab = Vocab.build(train_tokens, min_freq=min_freq, max_size=max_size)
    return Corpus(vocab, vocab.encode(train_tokens), vocab.encode(valid_tokens),
                  vocab.encode(test_tokens))


def _check_corpus_args(where: str, min_freq: Any, max_size: Any, lowercase: Any,
                       max_chars: Any) -> int | None:
    """Every argument checked before any text is read (errors name ``where``); returns the
    checked ``max_chars``."""
    check_vocab_limits(min_freq, max_size, where)
    if not isinstance(lowercase, (bool, np.bool_)):
        raise TypeError(f"{where}: lowercase must be True or False, got {lowercase!r} "
                        f"({type(lowercase).__name__})")
    return _max_chars(max_chars, where)


def _max_chars(max_chars: int | None, where: str) -> int | None:
    """``max_chars`` checked before any text is read: None (the whole text) or a positive
    integer (a negative one would cut from the end, a float be truncated: both refused)."""
    if max_chars is None:
        return None
    return _validate.positive_int(max_chars, "max_chars", where)


def char_corpus(name_or_path: str | os.PathLike | None = None,
                fractions: Sequence[float] = (0.8, 0.1, 0.1), min_freq: int = 1,
                max_size: int | None = None, lowercase: bool = False,
                max_chars: int | None = None) -> Corpus:
    """A character-level corpus: ``(vocab, train_ids, valid_ids, test_ids)``.

    The text of :func:`load_corpus` (cut to its first ``max_chars`` characters if given) is
    split into characters and cut contiguously by ``fractions`` (the train part is the start
    of the text, the test part its end). The vocabulary is built from the training characters
    only (``min_freq``, ``max_size`` as in :meth:`Vocab.from_counts`); characters of the held-out
    parts that it lacks become ``<unk>``. Deterministic: no shuffling, no randomness.
    """
    where = "char_corpus"
    limit = _check_corpus_args(where, min_freq, max_size, lowercase, max_chars)
    text = load_corpus(name_or_path)[:limit]
    tokens = CharTokenizer(lowercase=lowercase).tokenize(text)
    return _make_corpus(tokens, fractions, min_freq, max_size, where)


def word_corpus(name_or_path: str | os.PathLike | None = None,
                fractions: Sequence[float] = (0.8, 0.1, 0.1), min_freq: int = 1,
                max_size: int | None = None, lowercase: bool = True,
                max_chars: int | None = None) -> Corpus:
    """A word-level corpus with :class:`WordTokenizer`; otherwise as :func:`char_corpus`.

    Lowercased by default, which shrinks the vocabulary of a small corpus; use ``min_freq=2``
    or ``max_size`` to map rare words to ``<unk>`` (the training part then has ``<unk>`` too,
    so a model learns to predict it).
    """
    where = "word_corpus"
    limit = _check_corpus_args(where, min_freq, max_size, lowercase, max_chars)
    text = load_corpus(name_or_path)[:limit]
    tokens = WordTokenizer(lowercase=lowercase).tokenize(text)
    return _make_corpus(tokens, fractions, min_freq, max_size, where)

