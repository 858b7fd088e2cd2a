"""Count-based n-gram LMs (tinygrad_rnn/lm/ngram.py).

* every distribution sums to 1 over the vocabulary (to 1e-12) for every context, seen or
  unseen, with every probability > 0 (hypothesis over random small corpora and contexts);
* the vectorised model equals a slow, loop-based reference written straight from the numbered
  equations of the module docstring (add-k eq. (1), interpolated Kneser-Ney eqs. (2)-(7));
* hand-computed values on a two-sentence corpus;
* add-k with k -> 0 approaches the maximum-likelihood estimate on seen events;
* prob, distribution, token_log_probs, log_probs and log_prob_sequence agree;
* a stream is one sequence; errors for bad arguments and unfitted models.
"""
from __future__ import annotations

import doctest
import math
from collections import Counter

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import tinygrad_rnn.lm.ngram as ngram_module
from tinygrad_rnn.data import BOS_ID, EOS_ID
from tinygrad_rnn.lm import NGramLM


# --------------------------------------------------------------------------------------------
# a slow reference implementation, straight from the equations
# --------------------------------------------------------------------------------------------
class ReferenceNGram:
    """Dictionaries of tuples and plain loops; no shared code with the model under test."""

    def __init__(self, sequences: list[list[int]], V: int, order: int, smoothing: str,
                 k: float = 1.0, d: float = 0.75) -> None:
        self.V, self.n, self.smoothing, self.k, self.d = V, order, smoothing, k, d
        events: list[tuple[int, ...]] = []
        for seq in sequences:
            padded = [BOS_ID] * (order - 1) + list(seq) + [EOS_ID]
            for i in range(order - 1, len(padded)):
                events.append(tuple(padded[i - order + 1: i + 1]))
        self.table: dict[int, Counter] = {order: Counter(events)}
        for m in range(order - 1, 0, -1):
            # N1+(. h w): how many distinct tokens precede "h w" among the (m+1)-gram types
            self.table[m] = Counter(gram[1:] for gram in self.table[m + 1])

    def _level(self, m: int, h: tuple[int, ...], w: int) -> float:
        if m == 0:
            return 1.0 / self.V
        table = self.table[m]
        total = sum(c for gram, c in table.items() if gram[:-1] == h)
        if total == 0:
            return self._level(m - 1, h[1:], w)                               # eq. (7)
        types = sum(1 for gram in table if gram[:-1] == h)
        seen = table.get(h + (w,), 0)
        return max(seen - self.d, 0) / total + self.d * types / total * \
            self._level(m - 1, h[1:], w)                                      # eqs. (2)-(6)

    def prob(self, context: list[int], w: int) -> float:
        h = ([BOS_ID] * (self.n - 1) + list(context))[len(context):] if self.n > 1 else []
        h = tuple(h)
        if self.smoothing == "add_k":
            table = self.table[self.n]
            total = sum(c for gram, c in table.items() if gram[:-1] == h)
            return (table.get(h + (w,), 0) + self.k) / (total + self.k * self.V)  # eq. (1)
        return self._level(self.n, h, w)


# --------------------------------------------------------------------------------------------
# strategies
# --------------------------------------------------------------------------------------------
@st.composite
def corpora(draw: st.DrawFn) -> tuple[list[list[int]], int]:
    V = draw(st.integers(5, 9))
    sentences = draw(st.lists(st.lists(st.integers(4, V - 1), max_size=8), min_size=1,
                              max_size=5))
    return sentences, V


def test_docstring_examples() -> None:
    result = doctest.testmod(ngram_module)
    assert result.attempted > 0 and result.failed == 0


# --------------------------------------------------------------------------------------------
# normalisation and agreement with the reference
# --------------------------------------------------------------------------------------------
@given(corpus=corpora(), order=st.integers(1, 4),
       smoothing=st.sampled_from(["kneser_ney", "add_k"]),
       discount=st.sampled_from([0.1, 0.5, 0.75, 1.0]), k=st.sampled_from([0.01, 0.5, 1.0]),
       contexts=st.lists(st.lists(st.integers(0, 8), max_size=4), min_size=1, max_size=4))
@example(corpus=([[]], 5), order=3, smoothing="kneser_ney", discount=0.75, k=1.0,
         contexts=[[], [0, 1]])
# regression: a context shorter than n - 1 lost all but its last token when left-padded
@example(corpus=([[4, 4]], 5), order=4, smoothing="kneser_ney", discount=0.1, k=1.0,
         contexts=[[4, 4]])
def test_distribution_sums_to_one_and_matches_reference(
        corpus: tuple, order: int, smoothing: str, discount: float, k: float,
        contexts: list[list[int]]) -> None:
    sentences, V = corpus
    lm = NGramLM(order, smoothing, k=k, discount=discount).fit(sentences, vocab_size=V)
    ref = ReferenceNGram(sentences, V, order, smoothing, k=k, d=discount)
    # seen contexts too: the prefixes of the training sentences
    all_contexts = [[c % V for c in ctx] for ctx in contexts]
    all_contexts += [s[:i] for s in sentences for i in range(len(s) + 1)][:6]
    for ctx in all_contexts:
        p = lm.distribution(ctx)
        assert p.shape == (V,) and p.dtype == np.float64
        assert abs(p.sum() - 1.0) <= 1e-12, (ctx, p.sum())
        assert (p > 0).all()
        expected = np.array([ref.prob(ctx, w) for w in range(V)])
        np.testing.assert_allclose(p, expected, rtol=1e-12, atol=0)
        for w in range(V):
            assert abs(lm.prob(ctx, w) - p[w]) <= 1e-15


def test_kneser_ney_hand_computed_bigram() -> None:
    """Sentences "a b" and "a c" (a, b, c = 4, 5, 6; V = 7), bigram, d = 1/2.

    Continuation counts: N1+(. a) = 1 (<s>), N1+(. b) = N1+(. c) = 1 (a), N1+(. </s>) = 2
    (b, c); N1+(. .) = 5 over 4 types, so P(b) = 0.5/5 + 0.5 * 4/5 * 1/7 = 11/70 (eq. 6)
    and P(</s>) = 1.5/5 + 2/35 = 5/14. Context a: c(a) = 2, N1+(a .) = 2, so
    P(b | a) = 0.5/2 + 0.5 * 2/2 * 11/70 = 23/70 (eqs. 2-3). An unseen context backs off.
    """
    lm = NGramLM(2, "kneser_ney", discount=0.5).fit([[4, 5], [4, 6]], vocab_size=7)
    assert abs(lm.prob([4], 5) - 23 / 70) < 1e-15
    assert abs(lm.prob([0], EOS_ID) - 5 / 14) < 1e-15  # <pad> never was a context: eq. (7)
    assert abs(lm.prob([0], 5) - 11 / 70) < 1e-15
    # an id never seen in training gets the uniform share only: 0.5 * 4/5 * 1/7
    assert abs(lm.prob([0], 0) - 2 / 35) < 1e-15
    assert lm.count([4, 5]) == 1 and lm.count([BOS_ID, 4]) == 2 and lm.count([5, 4]) == 0


def test_add_k_hand_computed() -> None:
    lm = NGramLM(2, "add_k", k=1.0).fit([[4, 5], [4, 6]], vocab_size=7)
    assert abs(lm.prob([4], 5) - 2 / 9) < 1e-15           # (1 + 1) / (2 + 7)
    assert abs(lm.prob([4], 4) - 1 / 9) < 1e-15
    assert abs(lm.prob([0], 4) - 1 / 7) < 1e-15           # unseen context: uniform
    uni = NGramLM(1, "add_k", k=0.5).fit([[4, 5], [4, 6]], vocab_size=7)
    # 6 events (4, 5, </s>, 4, 6, </s>): P(4) = (2 + 0.5) / (6 + 3.5)
    assert abs(uni.prob([], 4) - 2.5 / 9.5) < 1e-15


@given(corpus=corpora(), order=st.integers(1, 3))
def test_add_k_tends_to_mle_on_seen_events(corpus: tuple, order: int) -> None:
    sentences, V = corpus
    ref = ReferenceNGram(sentences, V, order, "add_k")
    table = ref.table[order]
    models = {k: NGramLM(order, "add_k", k=k).fit(sentences, vocab_size=V)
              for k in (1e-2, 1e-5, 1e-10)}
    for gram, count in table.items():
        history, w = gram[:-1], gram[-1]
        total = sum(c for g, c in table.items() if g[:-1] == history)
        mle = count / total
        for k, model in models.items():
            # add-k - MLE = k (c(h) - c(h w) V) / (c(h) (c(h) + k V)), at most k V / c(h)
            error = model.prob(list(history), w) - mle
            exact = k * (total - count * V) / (total * (total + k * V))
            assert abs(error - exact) <= 1e-15
            assert abs(error) <= k * V / total + 1e-15


# --------------------------------------------------------------------------------------------
# the scoring methods agree with each other
# --------------------------------------------------------------------------------------------
@given(corpus=corpora(), order=st.integers(1, 3),
       smoothing=st.sampled_from(["kneser_ney", "add_k"]),
       ids=st.lists(st.integers(0, 4), min_size=0, max_size=10))
def test_scoring_methods_agree(corpus: tuple, order: int, smoothing: str,
                               ids: list[int]) -> None:
    sentences, V = corpus
    lm = NGramLM(order, smoothing).fit(sentences, vocab_size=V)
    ids = np.array([4 + i % (V - 4) for i in ids], dtype=np.int64)
    token_lp = lm.token_log_probs(ids)
    assert token_lp.shape == (max(ids.size - 1, 0),)
    loop = [math.log(lm.prob(ids[:t], ids[t])) for t in range(1, ids.size)]
    np.testing.assert_allclose(token_lp, loop, rtol=1e-13, atol=1e-15)
    rows = lm.log_probs(ids)
    assert rows.shape == (ids.size, V)
    for t in range(ids.size):
        np.testing.assert_allclose(np.exp(rows[t]), lm.distribution(ids[: t + 1]), rtol=1e-13)
    # sentence probability: every token and </s>, histories padded with <s>
    sentence = sum(math.log(lm.prob(ids[:t], ids[t])) for t in range(ids.size))
    sentence += math.log(lm.prob(ids, EOS_ID))
    assert abs(lm.log_prob_sequence(ids) - sentence) <= 1e-12 * max(1.0, abs(sentence))
    wrapped = np.concatenate([[BOS_ID], ids, [EOS_ID]])
    assert abs(lm.log_prob_sequence(ids) - lm.token_log_probs(wrapped).sum()) <= 1e-12 * \
        max(1.0, abs(sentence))


def test_log_probs_batch_shape() -> None:
    lm = NGramLM(2).fit(np.array([4, 5, 6, 4, 5]), vocab_size=8)
    batch = np.array([[4, 5, 6], [6, 5, 4]])
    out = lm.log_probs(batch)
    assert out.shape == (2, 3, 8)
    np.testing.assert_allclose(out[1], lm.log_probs(batch[1]))


def test_stream_is_one_sequence() -> None:
    stream = np.array([4, 5, 6, 4, 5, 7, 4])
    a = NGramLM(3).fit(stream, vocab_size=8)
    b = NGramLM(3).fit([stream], vocab_size=8)
    c = NGramLM(3).fit(stream.tolist(), vocab_size=8)
    for ctx in ([], [4], [4, 5], [7, 4], [0, 0]):
        np.testing.assert_array_equal(a.distribution(ctx), b.distribution(ctx))
        np.testing.assert_array_equal(a.distribution(ctx), c.distribution(ctx))
    # one sequence: the only sentence start is before the first token
    assert a.count([BOS_ID, BOS_ID, 4]) == 1 and a.count([7, 4, EOS_ID]) == 1


def test_vocab_object_as_vocab_size() -> None:
    from tinygrad_rnn.data import Vocab

    vocab = Vocab.build("abcab")
    lm = NGramLM(2).fit(vocab.encode("abcab"), vocab)
    assert lm.vocab_size == len(vocab) == 7
    assert lm.distribution(vocab.encode("a")).shape == (7,)


def test_kneser_ney_beats_uniform_on_predictable_data() -> None:
    stream = np.tile(np.array([4, 5, 6, 7]), 50)
    lm = NGramLM(3).fit(stream, vocab_size=10)
    assert lm.prob([4, 5], 6) > 0.9
    assert lm.prob([4, 5], 4) < 0.05


# --------------------------------------------------------------------------------------------
# errors
# --------------------------------------------------------------------------------------------
def test_argument_errors() -> None:
    with pytest.raises(ValueError, match="order"):
        NGramLM(0)
    with pytest.raises(ValueError, match="smoothing"):
        NGramLM(2, "witten_bell")
    with pytest.raises(ValueError, match="discount"):
        NGramLM(2, discount=1.5)
    with pytest.raises(ValueError, match="discount"):
        NGramLM(2, discount=0.0)
    with pytest.raises(ValueError, match="k > 0"):
        NGramLM(2, "add_k", k=0.0)
    with pytest.raises(RuntimeError, match="not fitted"):
        NGramLM(2).distribution([4])
    with pytest.raises(ValueError, match="too large"):
        NGramLM(3).fit([[4]], vocab_size=2_000_000)
    lm = NGramLM(2).fit([[4, 5]], vocab_size=6)
    with pytest.raises(ValueError, match="id 9 is outside"):
        lm.prob([9], 4)
    with pytest.raises(ValueError, match="outside"):
        lm.prob([4], 6)
    with pytest.raises(ValueError, match="outside"):
        NGramLM(2).fit([[4, 8]], vocab_size=6)
    with pytest.raises(ValueError, match="no training"):
        NGramLM(2).fit([], vocab_size=6)
    with pytest.raises(TypeError, match="integers"):
        lm.token_log_probs(np.array([4.0, 5.0]))
