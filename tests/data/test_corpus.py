"""Corpora (tinygrad_rnn/data/corpus.py).

* the default corpus is CPython's pydoc topic text, joined in sorted-key order, normalised
  lightly, deterministic;
* a user file is read as it is; missing files, directories, binary (non-UTF-8) and empty files
  raise errors that name the path and the problem;
* char_corpus / word_corpus: contiguous, deterministic splits whose tokens add up to the text;
  the vocabulary comes from the training part only.
"""
from __future__ import annotations

import numpy as np
import pytest

from tinygrad_rnn.data import (
    UNK_ID, CharTokenizer, Corpus, WordTokenizer, char_corpus, load_corpus, pydoc_text,
    word_corpus,
)


def test_default_corpus_is_the_pydoc_topics() -> None:
    from pydoc_data.topics import topics

    text = load_corpus()
    assert text == load_corpus("pydoc") == pydoc_text()
    assert 300_000 < len(text) < 2_000_000
    # topics appear in sorted-key order: each topic's title line is found after the previous
    titles = [topics[k].strip().split("\n", 1)[0] for k in sorted(topics)]
    position = -1
    for title in titles:
        found = text.find(title, position + 1)
        assert found > position, f"topic title {title!r} missing or out of order"
        position = found
    # light normalisation: no trailing spaces, at most one blank line in a row, one final \n
    assert all(line == line.rstrip() for line in text.split("\n"))
    assert "\n\n\n" not in text and "\r" not in text
    assert text.endswith("\n") and not text.endswith("\n\n")
    # the words are the topics' words, in the same order
    words = " ".join(topics[k] for k in sorted(topics)).split()
    assert text.split() == words


def test_user_file_is_read_as_is(tmp_path) -> None:
    path = tmp_path / "mine.txt"
    content = "Hello, wörld!\n\n\n  indented  \n"
    path.write_text(content, encoding="utf-8")
    assert load_corpus(str(path)) == content
    assert load_corpus(path) == content


def test_corpus_errors_name_path_and_problem(tmp_path) -> None:
    missing = tmp_path / "nope.txt"
    with pytest.raises(FileNotFoundError, match=r"nope\.txt.*no such file"):
        load_corpus(str(missing))
    with pytest.raises(IsADirectoryError, match="is a directory"):
        load_corpus(str(tmp_path))
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    with pytest.raises(ValueError, match=r"empty\.txt.*empty"):
        load_corpus(empty)
    blank = tmp_path / "blank.txt"
    blank.write_text(" \n\t\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"blank\.txt.*only whitespace"):
        load_corpus(blank)
    binary = tmp_path / "data.bin"
    binary.write_bytes(bytes(range(256)) * 4)
    with pytest.raises(ValueError, match=r"data\.bin.*not UTF-8.*0x80 at offset 128"):
        load_corpus(binary)
    with pytest.raises(TypeError, match="path"):
        load_corpus(42)  # type: ignore[arg-type]


def test_char_corpus_splits_are_contiguous_and_deterministic(tmp_path) -> None:
    text = "the quick brown fox jumps over the lazy dog. " * 20 + "ZZZ"
    path = tmp_path / "fox.txt"
    path.write_text(text, encoding="utf-8")
    corpus = char_corpus(path, fractions=(0.8, 0.1, 0.1))
    assert isinstance(corpus, Corpus)
    vocab, train, valid, test = corpus
    assert train.size + valid.size + test.size == len(text)
    assert train.size == round(0.8 * len(text))
    # the train part is the beginning of the text, the test part its end
    assert "".join(vocab.decode(train)) == text[: train.size]
    assert "".join(vocab.decode(valid)) == text[train.size: train.size + valid.size]
    # "Z" only occurs in the test part, so the training vocabulary lacks it
    assert "Z" not in vocab
    assert (test[-3:] == UNK_ID).all()
    again = char_corpus(path, fractions=(0.8, 0.1, 0.1))
    assert again.vocab == vocab
    for a, b in zip(again[1:], corpus[1:]):
        np.testing.assert_array_equal(a, b)


def test_word_corpus_on_pydoc() -> None:
    corpus = word_corpus(max_chars=60_000)
    tokens = WordTokenizer(lowercase=True).tokenize(pydoc_text()[:60_000])
    assert corpus.train.size + corpus.valid.size + corpus.test.size == len(tokens)
    assert corpus.vocab.decode(corpus.train) == tokens[: corpus.train.size]
    assert all(t == t.lower() for t in corpus.vocab.tokens[4:])
    small = word_corpus(max_chars=60_000, min_freq=3)
    assert len(small.vocab) < len(corpus.vocab)
    assert (small.train == UNK_ID).any()  # rare training words became <unk>
    assert all(arr.dtype == np.int64 for arr in corpus[1:])


def test_char_corpus_on_pydoc_default() -> None:
    corpus = char_corpus(max_chars=50_000, fractions=(0.9, 0.05, 0.05))
    text = pydoc_text()[:50_000]
    assert corpus.train.size == 45_000 and corpus.test.size == 2_500
    assert CharTokenizer().detokenize(corpus.vocab.decode(corpus.train)) == text[:45_000]
    with pytest.raises(ValueError, match="three parts"):
        char_corpus(max_chars=1000, fractions=(0.5, 0.5))
