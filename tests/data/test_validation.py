"""Argument checks of the data package (tinygrad_rnn/data), each a regression test for a
value that used to be silently corrected or to fail deep inside NumPy:

* pad_batch's pad_id, split_sizes' n, the corpora's max_chars, Vocab.id_to_token's id and
  ReversalTask.decode's ids are integers (a float is refused, not truncated) in range;
* the long-dependency tasks (adding, copy, recall-first) check every size argument and name
  the task, the argument and its value.
"""
from __future__ import annotations

import numpy as np
import pytest

from tinygrad_rnn.data import (
    Vocab, adding_problem, char_corpus, copy_problem, pad_batch, recall_first, reversal_task,
    word_corpus,
)
from tinygrad_rnn.data.text import split_sizes


# ------------------------------------------------------------------------------ text
@pytest.mark.parametrize("pad_id", [0.5, 1.0, True, "0"])
def test_pad_batch_refuses_a_non_integer_pad_id(pad_id):
    with pytest.raises(ValueError, match=r"pad_batch: pad_id must be an integer id, got "
                                         + repr(pad_id).replace(".", r"\.")):
        pad_batch([[4, 5], [6]], pad_id=pad_id)


def test_pad_batch_keeps_integer_pad_ids_including_negative_ones():
    padded, lengths, mask = pad_batch([[4, 5], [6]], pad_id=np.int64(-100))
    assert padded.tolist() == [[4, 5], [6, -100]] and lengths.tolist() == [2, 1]
    assert mask.tolist() == [[True, True], [True, False]]


@pytest.mark.parametrize("n", [-5, -1, 2.5, 10.0, True])
def test_split_sizes_refuses_a_negative_or_non_integer_n(n):
    with pytest.raises(ValueError, match=r"split_sizes: n must be an integer >= 0, got "
                                         + repr(n).replace(".", r"\.")):
        split_sizes(n, [0.5, 0.5])


def test_split_sizes_accepts_zero_and_numpy_integers():
    assert split_sizes(0, [0.5, 0.5]) == [0, 0]
    assert split_sizes(np.int64(10), [0.3, 0.7]) == [3, 7]


def test_id_to_token_refuses_a_float_id():
    vocab = Vocab(["a"])
    with pytest.raises(TypeError, match=r"Vocab.id_to_token: id must be an integer, got 2.9"):
        vocab.id_to_token(2.9)
    with pytest.raises(TypeError, match=r"got True"):
        vocab.id_to_token(True)
    assert vocab.id_to_token(np.int64(4)) == "a"


@pytest.mark.parametrize("index", [np.array(4), np.array(4, np.uint8), np.int32(4), 4])
def test_id_to_token_accepts_anything_integer(index):
    """A 0-d integer array (``ids[i]`` of a 0-d slice, ``np.array(4)``) used to be refused."""
    assert Vocab(["a"]).id_to_token(index) == "a"


@pytest.mark.parametrize("index", [np.array(4.0), np.float64(4.0), np.array(True),
                                   np.bool_(True), np.array([4]), "4", None])
def test_id_to_token_refuses_floats_bools_and_non_scalars(index):
    with pytest.raises(TypeError, match=r"Vocab.id_to_token: id must be an integer, got "):
        Vocab(["a"]).id_to_token(index)


def test_reversal_decode_refuses_float_ids():
    task = reversal_task(3, 1, 1, generator=0)
    ids = task.encode(list("ab"))
    with pytest.raises(TypeError, match=r"ReversalTask.decode: ids must be integers, got dtype "
                                        r"float64"):
        task.decode(ids.astype(np.float64) + 0.7)
    assert task.decode(ids) == ["a", "b"]


# ------------------------------------------------------------------------------ corpora
@pytest.mark.parametrize("make", [char_corpus, word_corpus])
@pytest.mark.parametrize("max_chars", [-5, 0, 12.9, True])
def test_max_chars_must_be_a_positive_integer(tmp_path, make, max_chars):
    path = tmp_path / "text.txt"
    path.write_text("the quick brown fox jumps over the lazy dog " * 3)
    with pytest.raises(ValueError, match=rf"{make.__name__}: max_chars must be a positive "
                                         r"integer, got " + repr(max_chars).replace(".", r"\.")):
        make(path, max_chars=max_chars)


def test_max_chars_cuts_the_text(tmp_path):
    path = tmp_path / "text.txt"
    path.write_text("abcdefghij" * 3)
    corpus = char_corpus(path, max_chars=np.int64(20))
    assert sum(len(part) for part in (corpus.train, corpus.valid, corpus.test)) == 20


# ------------------------------------------------------------------------------ tasks
@pytest.mark.parametrize("call, exc, match", [
    (lambda: adding_problem(-1, 5), ValueError, r"adding_problem: n must be at least 0, got -1"),
    (lambda: adding_problem(2.0, 5), TypeError, r"adding_problem: n must be an integer, got "
                                                r"2\.0"),
    (lambda: adding_problem(2, 5.5), TypeError, r"adding_problem: T must be an integer, got "
                                                r"5\.5"),
    (lambda: adding_problem(2, 1), ValueError, r"adding_problem: T must be at least 2, got 1"),
    (lambda: copy_problem(2, delay=-5, length=3), ValueError,
     r"copy_problem: delay must be at least 0, got -5"),
    (lambda: copy_problem(2, 3, length=0), ValueError,
     r"copy_problem: length must be at least 1, got 0"),
    (lambda: copy_problem(-2, 3), ValueError, r"copy_problem: n must be at least 0, got -2"),
    (lambda: copy_problem(2, 3, num_symbols=0), ValueError,
     r"copy_problem: num_symbols must be at least 1, got 0"),
    (lambda: copy_problem(2, 2.5), TypeError, r"copy_problem: delay must be an integer, got "
                                              r"2\.5"),
    (lambda: recall_first(-1, 3), ValueError, r"recall_first: n must be at least 0, got -1"),
    (lambda: recall_first(2, -1), ValueError,
     r"recall_first: distractors must be at least 0, got -1"),
    (lambda: recall_first(2, 3, vocab_size=10.0), TypeError,
     r"recall_first: vocab_size must be an integer, got 10\.0"),
    (lambda: recall_first(2, True), TypeError,
     r"recall_first: distractors must be an integer, got True"),
])
def test_task_sizes_are_checked(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_task_sizes_accept_numpy_integers_and_empty_batches():
    x, y, task = copy_problem(np.int64(2), np.int32(0), length=np.int64(1), num_symbols=1,
                              generator=0)
    assert x.shape == (2, 2) and x[0, 1] == task.delimiter
    assert adding_problem(0, np.int64(2))[0].shape == (0, 2, 2)
    assert recall_first(np.int64(0), 0)[0].shape == (0, 1)


def test_id_streams_refuse_negative_and_overflowing_ids() -> None:
    from tinygrad_rnn.data import lm_stream, pad_batch

    with pytest.raises(ValueError, match=r"lm_stream: token ids must be in \[0, 2\*\*63\), got -3"):
        lm_stream(np.array([4, 5, -3, 6, 7]), 2)
    huge = np.array([4, 2**63 + 5], dtype=np.uint64)
    with pytest.raises(ValueError, match="lm_stream: token ids must be in"):
        lm_stream(np.concatenate([huge, huge]), 1)
    with pytest.raises(ValueError, match="pad_batch: sequence 1 holds id 9223372036854775813"):
        pad_batch([[4, 5], huge])
    padded, _, _ = pad_batch([[4, -100], np.array([3], np.uint64)], pad_id=-100)
    assert padded.tolist() == [[4, -100], [3, -100]]   # ignore_index targets still pad
