"""String reversal with noise: targets, seeding, disjoint splits, batches."""
from __future__ import annotations

import doctest

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tinygrad_rnn.data import reversal as rev
from tinygrad_rnn.data import reversal_examples, reversal_task, reverse_letters

PAD, BOS, EOS = 0, 2, 3


@given(seed=st.integers(0, 10 ** 6), lo=st.integers(2, 6), extra=st.integers(0, 6),
       p=st.sampled_from([0.0, 0.2, 0.6]))
def test_target_is_reversed_letters_without_noise(seed, lo, extra, p):
    examples = reversal_examples(15, lo, lo + extra, noise_prob=p, generator=seed)
    for ex in examples:
        letters = [t for t in ex.source if t in "abcdefgh"]
        assert all(t in "abcdefgh#*" for t in ex.source)
        assert list(ex.target) == letters[::-1]
        assert lo <= ex.num_letters <= lo + extra
        if p == 0.0:
            assert ex.source == tuple(letters)
    assert len({ex.source for ex in examples}) == 15


def test_noise_appears_at_about_the_requested_rate():
    examples = reversal_examples(2000, 5, 10, noise_prob=0.25, generator=3)
    tokens = [t for ex in examples for t in ex.source]
    rate = np.mean([t in "#*" for t in tokens])
    assert abs(rate - 0.25) < 0.02
    assert {"#", "*"} <= set(tokens)


def test_reverse_letters_example():
    assert reverse_letters(list("c#a**fb")) == list("bfac")
    assert reverse_letters(list("xy-z"), noise="-") == list("zyx")


def test_seeds_are_reproducible_and_differ():
    a = reversal_task(50, 10, 10, generator=5)
    b = reversal_task(50, 10, 10, generator=5)
    c = reversal_task(50, 10, 10, generator=6)
    assert a.train == b.train and a.valid == b.valid and a.test == b.test
    assert a.train != c.train


@given(seed=st.integers(0, 10 ** 6))
def test_splits_are_disjoint(seed):
    task = reversal_task(60, 20, 20, min_len=2, max_len=3, noise_prob=0.3, generator=seed)
    parts = [{e.source for e in part} for part in (task.train, task.valid, task.test)]
    assert [len(p) for p in parts] == [60, 20, 20]
    assert not parts[0] & parts[1] and not parts[0] & parts[2] and not parts[1] & parts[2]


def test_exclude_and_exhausted_space():
    both = reversal_examples(2, 1, 1, letters="ab", noise="", noise_prob=0.0, generator=0)
    assert {e.source for e in both} == {("a",), ("b",)}
    with pytest.raises(ValueError, match="distinct"):
        reversal_examples(3, 1, 1, letters="ab", noise="", noise_prob=0.0, generator=0)
    with pytest.raises(ValueError, match="distinct"):
        reversal_examples(1, 1, 1, letters="ab", noise="", noise_prob=0.0, generator=0,
                          exclude={("a",), ("b",)})


def test_parameter_errors():
    with pytest.raises(ValueError, match="min_len"):
        reversal_examples(1, 4, 3)
    with pytest.raises(ValueError, match="noise"):
        reversal_examples(1, 1, 2, letters="ab", noise="a")
    with pytest.raises(ValueError, match="noise_prob"):
        reversal_examples(1, 1, 2, noise_prob=1.0)


@given(seed=st.integers(0, 10 ** 6))
def test_batch_layout(seed):
    task = reversal_task(30, 0, 0, min_len=1, max_len=6, noise_prob=0.3, generator=seed)
    exs = task.train[:7]
    b = task.batch(exs)
    N = len(exs)
    assert b.src.shape == (N, max(len(e.source) for e in exs))
    assert b.tgt_in.shape == b.tgt_out.shape == (N, max(len(e.target) for e in exs) + 1)
    for i, e in enumerate(exs):
        S, T = len(e.source), len(e.target)
        assert b.src_lengths[i] == S and b.tgt_lengths[i] == T + 1
        assert task.decode(b.src[i, :S]) == list(e.source)
        assert (b.src[i, S:] == PAD).all()
        assert b.noise[i, :S].tolist() == [t in "#*" for t in e.source]
        assert not b.noise[i, S:].any()
        assert b.tgt_in[i, 0] == BOS
        assert task.decode(b.tgt_in[i, 1: T + 1]) == list(e.target)
        assert task.decode(b.tgt_out[i, :T]) == list(e.target)
        assert b.tgt_out[i, T] == EOS
        assert (b.tgt_in[i, T + 1:] == PAD).all() and (b.tgt_out[i, T + 1:] == PAD).all()
        # teacher forcing: tgt_in is tgt_out shifted right by one
        assert (b.tgt_in[i, 1: T + 1] == b.tgt_out[i, :T]).all()
    assert b.src.dtype == np.int64 and b.noise.dtype == bool


def test_vocab_and_decode():
    task = reversal_task(5, 0, 0, generator=0)
    assert task.vocab.tokens[:4] == ["<pad>", "<unk>", "<s>", "</s>"]
    assert task.vocab.tokens[4:] == list("abcdefgh#*")
    ids = task.encode(list("ab")).tolist() + [EOS, 5]
    assert task.decode(ids) == ["a", "b"]
    assert task.decode(ids, strip=False) == ["a", "b", "</s>", "b"]


def test_batches_cover_every_example_once():
    task = reversal_task(23, 0, 0, generator=1)
    seen = []
    for b in task.batches(task.train, 5, shuffle=True, generator=2):
        assert b.src.shape[0] <= 5
        for i in range(b.src.shape[0]):
            seen.append(tuple(task.decode(b.src[i, : b.src_lengths[i]])))
    assert sorted(seen) == sorted(e.source for e in task.train)


def test_docstring_examples():
    result = doctest.testmod(rev, verbose=False)
    assert result.attempted > 0 and result.failed == 0
