"""Generated long-dependency tasks (tinygrad_rnn/data/tasks.py).

* shapes and dtypes of the adding problem, the copy problem and recall-first;
* seeds: the same seed gives the same arrays, another seed other arrays, and a Generator is
  consumed (two draws from one generator differ);
* adding problem: exactly one marker in each half, the target is the sum of the two marked
  values, and always predicting 1 gives MSE 1/6 (a statistical check with a fixed seed);
* copy problem: symbols, blanks, the delimiter and the targets where the layout says;
* recall-first: keys and distractors in their ranges, the target is the first token.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tinygrad_rnn.data import (
    AddingBaseline, CopyTask, adding_problem, copy_problem, recall_first,
)


# --------------------------------------------------------------------------------------------
# the adding problem
# --------------------------------------------------------------------------------------------
@given(n=st.integers(0, 20), T=st.integers(2, 40), seed=st.integers(0, 2**31))
def test_adding_problem_layout(n: int, T: int, seed: int) -> None:
    x, y = adding_problem(n, T, generator=seed)
    assert x.shape == (n, T, 2) and y.shape == (n, 1)
    assert x.dtype == y.dtype == np.float32
    values, markers = x[..., 0], x[..., 1]
    assert np.all((values >= 0) & (values <= 1))          # float32 may round up to 1
    assert set(np.unique(markers)) <= {0.0, 1.0}
    half = T // 2
    assert np.all(markers[:, :half].sum(axis=1) == 1)     # one marker in the first half
    assert np.all(markers[:, half:].sum(axis=1) == 1)     # and one in the second
    np.testing.assert_allclose(y[:, 0], (values * markers).sum(axis=1), rtol=1e-6)


def test_adding_problem_float64_and_exact_target() -> None:
    x, y = adding_problem(50, 9, generator=3, dtype=np.float64)
    assert x.dtype == y.dtype == np.float64
    marked = [x[i, x[i, :, 1] == 1, 0] for i in range(50)]
    np.testing.assert_array_equal(y[:, 0], [m[0] + m[1] for m in marked])


def test_adding_problem_baseline_mse_is_one_sixth() -> None:
    """u1 + u2 with u ~ U(0, 1) has mean 1 and variance 2/12 = 1/6. With 20000 samples the
    standard error of the MSE estimate is sqrt((1/15 - 1/36) / 20000) ~ 0.0014."""
    _, y = adding_problem(20000, 30, generator=0, dtype=np.float64)
    mse = float(np.mean((y - 1.0) ** 2))
    assert AddingBaseline == pytest.approx(1 / 6, rel=1e-15)
    assert abs(mse - AddingBaseline) < 5 * 0.0014
    assert abs(float(y.mean()) - 1.0) < 5 * np.sqrt(1 / 6 / 20000)


def test_adding_problem_marker_positions_are_spread_over_each_half() -> None:
    x, _ = adding_problem(4000, 10, generator=1)
    pos = np.argwhere(x[..., 1] == 1)[:, 1]
    counts = np.bincount(pos, minlength=10)
    assert np.all(counts > 0)                             # every position is used
    assert counts[:5].sum() == counts[5:].sum() == 4000


def test_adding_problem_rejects_short_sequences() -> None:
    with pytest.raises(ValueError, match="at least 2"):
        adding_problem(3, 1)


# --------------------------------------------------------------------------------------------
# seeds
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("make", [
    lambda g: adding_problem(8, 12, generator=g),
    lambda g: copy_problem(8, delay=5, generator=g)[:2],
    lambda g: recall_first(8, 7, generator=g),
], ids=["adding", "copy", "recall"])
def test_seeds_are_reproducible(make: object) -> None:
    a, b, c = make(7), make(7), make(8)
    for u, v in zip(a, b):
        np.testing.assert_array_equal(u, v)
    assert any(not np.array_equal(u, w) for u, w in zip(a, c))
    rng = np.random.default_rng(7)
    first, second = make(rng), make(rng)                  # a Generator is consumed
    assert any(not np.array_equal(u, w) for u, w in zip(first, second))
    for u, v in zip(make(np.random.default_rng(7)), a):   # a seed is default_rng(seed)
        np.testing.assert_array_equal(u, v)


# --------------------------------------------------------------------------------------------
# the copy problem
# --------------------------------------------------------------------------------------------
@given(n=st.integers(1, 10), delay=st.integers(0, 20), length=st.integers(1, 10),
       num_symbols=st.integers(1, 9), seed=st.integers(0, 2**31))
def test_copy_problem_layout(n: int, delay: int, length: int, num_symbols: int,
                             seed: int) -> None:
    x, y, task = copy_problem(n, delay, length, num_symbols, generator=seed)
    T = 2 * length + delay
    assert x.shape == y.shape == (n, T) and x.dtype == y.dtype == np.int64
    assert isinstance(task, CopyTask) and task.num_symbols == num_symbols
    assert (task.blank, task.delimiter, task.vocab_size) == (num_symbols, num_symbols + 1,
                                                             num_symbols + 2)
    symbols = x[:, :length]
    assert np.all((symbols >= 0) & (symbols < num_symbols))
    assert np.all(x[:, length:length + delay] == task.blank)
    assert np.all(x[:, length + delay] == task.delimiter)
    assert np.all(x[:, length + delay + 1:] == task.blank)
    assert np.all(y[:, :T - length] == task.blank)
    np.testing.assert_array_equal(y[:, T - length:], symbols)
    assert np.all((x >= 0) & (x < task.vocab_size)) and np.all((y >= 0) & (y < task.vocab_size))


# --------------------------------------------------------------------------------------------
# recall the first token
# --------------------------------------------------------------------------------------------
@given(n=st.integers(0, 20), distractors=st.integers(0, 30), vocab=st.integers(4, 20),
       seed=st.integers(0, 2**31))
def test_recall_first_keys_and_distractors_in_range(n: int, distractors: int, vocab: int,
                                                    seed: int) -> None:
    x, y = recall_first(n, distractors, vocab, generator=seed)
    assert x.shape == (n, distractors + 1) and y.shape == (n,)
    assert x.dtype == y.dtype == np.int64
    np.testing.assert_array_equal(x[:, 0], y)
    assert np.all((y >= 0) & (y < vocab // 2))
    assert np.all((x[:, 1:] >= vocab // 2) & (x[:, 1:] < vocab))


def test_recall_first_uses_every_key() -> None:
    _, y = recall_first(2000, 3, vocab_size=10, generator=0)
    assert set(np.unique(y)) == set(range(5))


def test_recall_first_rejects_tiny_vocabularies() -> None:
    with pytest.raises(ValueError, match="at least 4"):
        recall_first(2, 3, vocab_size=3)
