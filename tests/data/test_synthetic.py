"""Generated classification and tagging tasks (tinygrad_rnn/data/synthetic.py).

* every task follows the package's conventions: symbols from id 4 of a Vocab, rows padded with
  PAD_ID after their true lengths, tags IGNORE_INDEX at padding;
* labels and tags are what their definitions say, recomputed from the decoded tokens:
  parity of the ones, balanced parentheses (against an independent check), repeat of the
  previous / next token;
* lengths cover the requested range; labels are balanced about 1/2; repeats occur with about
  ``repeat_prob``; the unbalanced strings include both kinds (unequal counts, bad order);
* the same seed gives the same data; subsets and minibatches cover every example once;
* bad arguments raise errors that name them.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from tinygrad_rnn.data import (
    IGNORE_INDEX, PAD_ID, SequenceTask, balanced_parens_task, is_balanced, parity_task,
    repeat_tagging_task,
)
from tinygrad_rnn.nn import classify


def _decoded(task: SequenceTask) -> list[list[str]]:
    return [task.vocab.decode(task.ids[i, : task.lengths[i]]) for i in range(len(task))]


def _check_padding(task: SequenceTask) -> None:
    mask = task.mask
    assert task.ids.dtype == np.int64 and task.lengths.dtype == np.int64
    assert task.ids.shape == (len(task), int(task.lengths.max()))
    assert (task.ids[~mask] == PAD_ID).all()
    assert (task.ids[mask] >= 4).all()          # task symbols follow the 4 special tokens
    assert (task.ids[mask] < task.vocab_size).all()
    if task.is_tagging:
        assert task.targets.shape == task.ids.shape
        assert (task.targets[~mask] == IGNORE_INDEX).all()
        assert ((task.targets[mask] >= 0) & (task.targets[mask] < task.num_classes)).all()
    else:
        assert task.targets.shape == (len(task),)
        assert ((task.targets >= 0) & (task.targets < task.num_classes)).all()


def test_ignore_index_agrees_with_the_models() -> None:
    assert IGNORE_INDEX == classify.IGNORE_INDEX == -100


# ------------------------------------------------------------------------------------ parity
@given(seed=st.integers(0, 2**32 - 1), lo=st.integers(1, 8), extra=st.integers(0, 6))
def test_parity_labels_are_the_parity_of_the_ones(seed: int, lo: int, extra: int) -> None:
    task = parity_task(40, lo, lo + extra, generator=seed)
    _check_padding(task)
    assert task.classes == ("even", "odd") and task.vocab.tokens[4:] == ["0", "1"]
    assert ((task.lengths >= lo) & (task.lengths <= lo + extra)).all()
    for tokens, label in zip(_decoded(task), task.targets):
        assert label == tokens.count("1") % 2


def test_parity_fixed_length_is_balanced_and_reproducible() -> None:
    task = parity_task(4000, 6, generator=7)
    assert (task.lengths == 6).all()
    assert abs(task.targets.mean() - 0.5) < 0.03        # 4000 fair draws: sd 0.008
    again = parity_task(4000, 6, generator=7)
    assert np.array_equal(task.ids, again.ids) and np.array_equal(task.targets, again.targets)
    other = parity_task(4000, 6, generator=8)
    assert not np.array_equal(task.ids, other.ids)
    # all 2^6 strings turn up
    assert len({tuple(row) for row in task.ids.tolist()}) == 64


def test_parity_covers_the_length_range() -> None:
    task = parity_task(600, 1, 6, generator=0)
    assert set(task.lengths.tolist()) == set(range(1, 7))


# ------------------------------------------------------------------------------ parentheses
def _balanced_reference(s: str) -> bool:
    """Balanced iff repeatedly deleting "()" empties the string (independent of depth)."""
    while "()" in s:
        s = s.replace("()", "")
    return s == ""


@given(st.text(alphabet="()", max_size=16))
@example("")
@example(")(")
@example("(()))(")
def test_is_balanced_matches_a_reference(s: str) -> None:
    assert is_balanced(s) == _balanced_reference(s)
    assert is_balanced(list(s)) == is_balanced(s)


@given(seed=st.integers(0, 2**32 - 1))
def test_balanced_parens_labels(seed: int) -> None:
    task = balanced_parens_task(60, 2, 12, generator=seed)
    _check_padding(task)
    assert task.classes == ("unbalanced", "balanced")
    assert (task.lengths % 2 == 0).all()
    assert ((task.lengths >= 2) & (task.lengths <= 12)).all()
    for tokens, label in zip(_decoded(task), task.targets):
        assert set(tokens) <= {"(", ")"}
        assert label == int(_balanced_reference("".join(tokens)))


def test_balanced_parens_has_both_kinds_of_negatives() -> None:
    task = balanced_parens_task(3000, 2, 12, generator=3)
    assert abs(task.targets.mean() - 0.5) < 0.04
    negatives = [t for t, y in zip(_decoded(task), task.targets) if y == 0]
    equal_counts = sum(t.count("(") == t.count(")") for t in negatives)
    # about half of the negatives have equal counts: counting alone cannot solve the task
    assert 0.35 < equal_counts / len(negatives) < 0.65
    # and the lengths of positives and negatives cover the same even values
    pos_lengths = set(task.lengths[task.targets == 1].tolist())
    neg_lengths = set(task.lengths[task.targets == 0].tolist())
    assert pos_lengths == neg_lengths == {2, 4, 6, 8, 10, 12}


def test_balanced_parens_odd_bounds_round_to_even() -> None:
    task = balanced_parens_task(300, 3, 9, generator=0)
    assert set(task.lengths.tolist()) == {4, 6, 8}


# ---------------------------------------------------------------------------------- tagging
@given(seed=st.integers(0, 2**32 - 1), compare=st.sampled_from(["previous", "next"]),
       num_symbols=st.integers(2, 6), lo=st.integers(1, 5), extra=st.integers(0, 8))
def test_repeat_tags(seed: int, compare: str, num_symbols: int, lo: int, extra: int) -> None:
    task = repeat_tagging_task(30, lo, lo + extra, num_symbols=num_symbols, compare=compare,
                               generator=seed)
    _check_padding(task)
    assert task.classes == ("new", "repeat")
    assert task.vocab.tokens[4:] == [chr(ord("a") + i) for i in range(num_symbols)]
    for i, tokens in enumerate(_decoded(task)):
        tags = task.targets[i, : task.lengths[i]].tolist()
        for t, tok in enumerate(tokens):
            if compare == "previous":
                expected = t > 0 and tok == tokens[t - 1]
            else:
                expected = t + 1 < len(tokens) and tok == tokens[t + 1]
            assert tags[t] == int(expected)


@pytest.mark.parametrize("repeat_prob", [0.0, 0.3, 1.0])
def test_repeat_probability(repeat_prob: float) -> None:
    task = repeat_tagging_task(500, 10, 10, num_symbols=5, repeat_prob=repeat_prob,
                               generator=1)
    rate = task.targets[:, 1:].mean()           # every step after the first can repeat
    assert abs(rate - repeat_prob) < 0.02
    # a non-repeat is uniform over the other symbols
    if repeat_prob == 0.0:
        steps = (task.ids[:, 1:] - task.ids[:, :-1]) % 5
        counts = np.bincount(steps.ravel(), minlength=5)
        assert counts[0] == 0
        assert np.all(np.abs(counts[1:] / counts[1:].sum() - 0.25) < 0.02)


# ------------------------------------------------------------------------- subsets, batches
def test_subset_trims_padding_and_batches_cover_everything() -> None:
    task = repeat_tagging_task(23, 1, 9, generator=5)
    short = np.flatnonzero(task.lengths <= 3)
    sub = task.subset(short)
    assert sub.ids.shape[1] == task.lengths[short].max()
    assert np.array_equal(sub.ids, task.ids[short][:, : sub.ids.shape[1]])
    assert np.array_equal(sub.targets, task.targets[short][:, : sub.ids.shape[1]])
    seen = []
    for batch in task.batches(5, generator=0):
        assert len(batch) <= 5
        _check_padding(batch)
        seen += [tuple(batch.ids[i, : batch.lengths[i]]) for i in range(len(batch))]
    assert sorted(seen) == sorted(tuple(task.ids[i, : task.lengths[i]])
                                  for i in range(len(task)))
    in_order = list(task.batches(10, shuffle=False))
    assert [len(b) for b in in_order] == [10, 10, 3]
    assert np.array_equal(in_order[0].targets, task.subset(slice(0, 10)).targets)


def test_classification_subset_keeps_labels() -> None:
    task = parity_task(10, 2, 5, generator=0)
    sub = task.subset(np.array([3, 1]))
    assert sub.targets.tolist() == [task.targets[3], task.targets[1]]


# ----------------------------------------------------------------------------------- errors
@pytest.mark.parametrize("call, match", [
    (lambda: parity_task(0), "n must be a positive integer"),
    (lambda: parity_task(5, 0), "min_length <= max_length"),
    (lambda: parity_task(5, 6, 4), "min_length=6, max_length=4"),
    (lambda: balanced_parens_task(5, 1, 8), "2 <= min_length"),
    (lambda: balanced_parens_task(5, 3, 3), "no even length"),
    (lambda: repeat_tagging_task(5, num_symbols=1), "num_symbols"),
    (lambda: repeat_tagging_task(5, repeat_prob=1.5), "repeat_prob"),
    (lambda: repeat_tagging_task(5, compare="left"), "compare"),
    (lambda: next(parity_task(4).batches(0)), "batch_size"),
])
def test_errors_name_the_argument(call, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        call()


def test_lengths_must_be_integers() -> None:
    with pytest.raises(TypeError, match="min_length must be an integer"):
        parity_task(5, 2.5)
