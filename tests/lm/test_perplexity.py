"""The shared perplexity evaluation (tinygrad_rnn/lm/perplexity.py).

* a uniform model's perplexity is the vocabulary size (1e-12), in both output forms;
* perplexity == exp(mean NLL) == 2 ** (cross entropy in bits);
* evaluate_lm scores T - 1 tokens per sequence, adds sequences up, and accepts (T - 1,),
  (T, V) and (T - 1, V) outputs (NumPy or Tensor) with the same result;
* bad model outputs (logits, probabilities, wrong shapes, NaN) raise clear errors;
* on held-out pydoc text, Kneser-Ney perplexity falls from unigram to bigram to trigram, at the
  character and the word level, and n-gram perplexity through the shared path equals exp of
  the model's own log-probabilities.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tinygrad_rnn as tr
from tinygrad_rnn.data import BOS_ID, EOS_ID, char_corpus, word_corpus
from tinygrad_rnn.lm import (
    LMEvaluation, NGramLM, bits_per_token, evaluate_lm, evaluate_perplexity,
    ngram_perplexity, perplexity, with_boundaries,
)


def _uniform_rows(V: int):
    def model_fn(ids: np.ndarray) -> np.ndarray:
        return np.full((ids.size, V), -math.log(V))  # (T, V)
    return model_fn


def _uniform_tokens(V: int):
    def model_fn(ids: np.ndarray) -> np.ndarray:
        return np.full(ids.size - 1, -math.log(V))  # (T - 1,)
    return model_fn


@given(V=st.integers(1, 5000), T=st.integers(2, 60), seed=st.integers(0, 2**31))
def test_uniform_model_perplexity_is_vocab_size(V: int, T: int, seed: int) -> None:
    ids = np.random.default_rng(seed).integers(0, V, size=T)
    for fn in (_uniform_rows(V), _uniform_tokens(V)):
        result = evaluate_lm(fn, ids)
        assert result.num_tokens == T - 1
        assert abs(result.perplexity - V) <= 1e-12 * V
        assert abs(evaluate_perplexity(fn, ids) - V) <= 1e-12 * V


@given(nll=st.floats(0.0, 1e4), n=st.integers(1, 10_000))
def test_perplexity_is_two_to_the_bits(nll: float, n: int) -> None:
    ppl = perplexity(nll, n)
    bits = nll / n / math.log(2.0)
    assert bits_per_token(nll, n) == pytest.approx(bits, rel=1e-14, abs=1e-300)
    if ppl < math.inf:
        assert ppl == pytest.approx(2.0 ** bits, rel=1e-12)
        assert ppl == pytest.approx(math.exp(nll / n), rel=1e-14)
    ev = LMEvaluation(nll, n)
    assert ev.bits == pytest.approx(bits, rel=1e-14, abs=1e-300)
    assert ev.perplexity == ppl


def test_perplexity_edge_cases() -> None:
    assert perplexity(0.0, 3) == 1.0
    assert perplexity(math.inf, 3) == math.inf
    assert perplexity(1e6, 1) == math.inf  # overflow is infinity, not an exception
    with pytest.raises(ValueError, match="log-likelihood instead"):
        perplexity(-5.0, 10)
    with pytest.raises(ValueError, match="num_tokens"):
        perplexity(1.0, 0)
    with pytest.raises(ValueError, match="NaN"):
        perplexity(float("nan"), 2)


@given(seed=st.integers(0, 2**31), V=st.integers(2, 12),
       lengths=st.lists(st.integers(0, 12), min_size=1, max_size=5))
def test_output_forms_agree_and_sequences_add_up(seed: int, V: int,
                                                 lengths: list[int]) -> None:
    rng = np.random.default_rng(seed)
    table = rng.normal(size=(V, V))
    table -= np.log(np.exp(table).sum(axis=1, keepdims=True))  # a random bigram model

    def rows(ids: np.ndarray) -> np.ndarray:
        return table[ids]  # (T, V): row t predicts ids[t + 1]

    def rows_short(ids: np.ndarray) -> np.ndarray:
        return table[ids[:-1]]  # (T - 1, V)

    def tokens(ids: np.ndarray) -> np.ndarray:
        return table[ids[:-1], ids[1:]]  # (T - 1,)

    def as_tensor(ids: np.ndarray) -> tr.Tensor:
        return tr.Tensor(table[ids])

    seqs = [rng.integers(0, V, size=n) for n in lengths]
    scored = sum(max(n - 1, 0) for n in lengths)
    if scored == 0:
        with pytest.raises(ValueError, match="nothing to score"):
            evaluate_lm(rows, seqs)
        return
    expected = -sum(table[s[t - 1], s[t]] for s in seqs for t in range(1, s.size))
    for fn in (rows, rows_short, tokens, as_tensor):
        result = evaluate_lm(fn, seqs)
        assert result.num_tokens == scored
        assert result.nll_sum == pytest.approx(expected, rel=1e-12, abs=1e-12)
    # a stream is scored as one sequence
    stream = np.concatenate(seqs)
    if stream.size >= 2:
        assert evaluate_lm(tokens, stream).num_tokens == stream.size - 1


def test_float32_outputs_are_accepted() -> None:
    V = 7
    rows32 = np.full((5, V), -math.log(V), dtype=np.float32)
    result = evaluate_lm(lambda ids: rows32[: ids.size], np.arange(5) % V)
    assert result.perplexity == pytest.approx(V, rel=1e-6)


def test_bad_model_outputs_raise() -> None:
    ids = np.array([1, 2, 3, 0])
    logits = np.zeros((4, 5)) + np.arange(5)
    with pytest.raises(ValueError, match="not log-probabilities.*log_softmax"):
        evaluate_lm(lambda x: logits, ids)
    probs = np.full(3, 0.9)
    with pytest.raises(ValueError, match="above 0"):
        evaluate_lm(lambda x: probs, ids)
    with pytest.raises(ValueError, match=r"shape \(2,\)"):
        evaluate_lm(lambda x: np.zeros(2), ids)
    with pytest.raises(ValueError, match=r"shape \(2, 5\)"):
        evaluate_lm(lambda x: np.zeros((2, 5)), ids)
    with pytest.raises(ValueError, match="NaN"):
        evaluate_lm(lambda x: np.full(3, np.nan), ids)
    with pytest.raises(ValueError, match="outside the model's 3 outputs"):
        evaluate_lm(lambda x: np.full((4, 3), -math.log(3)), ids)
    # unnormalised rows pass when the check is off (the caller's responsibility)
    ok = evaluate_lm(lambda x: np.full((4, 5), -1.0), ids, check_normalized=False)
    assert ok.nll_sum == pytest.approx(3.0)


def test_with_boundaries_matches_sentence_log_prob() -> None:
    sentences = [[4, 5, 6], [5, 4], [6]]
    lm = NGramLM(3).fit(sentences, vocab_size=8)
    wrapped = with_boundaries([[4, 6], [5]])
    assert wrapped[0].tolist() == [BOS_ID, 4, 6, EOS_ID]
    result = evaluate_lm(lm.token_log_probs, wrapped)
    assert result.num_tokens == 3 + 2
    direct = -(lm.log_prob_sequence([4, 6]) + lm.log_prob_sequence([5]))
    assert result.nll_sum == pytest.approx(direct, rel=1e-13)


def _ngram_table(corpus) -> tuple[dict[int, float], str]:
    ppl = {n: ngram_perplexity(NGramLM(n, "kneser_ney").fit(corpus.train, corpus.vocab),
                               corpus.valid) for n in (1, 2, 3)}
    report = ", ".join(f"order {n}: {p:.3f}" for n, p in ppl.items())
    return ppl, f"held-out Kneser-Ney perplexity (V={len(corpus.vocab)}): {report}"


def test_kneser_ney_order_ranking_on_pydoc_characters() -> None:
    corpus = char_corpus(max_chars=120_000, fractions=(0.8, 0.1, 0.1))
    ppl, report = _ngram_table(corpus)
    assert ppl[1] > ppl[2] > ppl[3], report
    assert ppl[1] < len(corpus.vocab), report  # even the unigram beats a uniform guess
    print(report)


def test_kneser_ney_order_ranking_on_pydoc_words() -> None:
    corpus = word_corpus(max_chars=300_000, fractions=(0.8, 0.1, 0.1))
    ppl, report = _ngram_table(corpus)
    assert ppl[1] > ppl[2] > ppl[3], report
    print(report)


def test_ngram_perplexity_is_the_shared_evaluation() -> None:
    corpus = char_corpus(max_chars=20_000, fractions=(0.8, 0.1, 0.1))
    lm = NGramLM(2, "add_k", k=0.1).fit(corpus.train, corpus.vocab)
    valid = corpus.valid[:400]
    via_rows = evaluate_perplexity(lm.log_probs, valid)
    direct = math.exp(-np.mean([math.log(lm.prob(valid[:t], valid[t]))
                                for t in range(1, valid.size)]))
    assert ngram_perplexity(lm, valid) == pytest.approx(direct, rel=1e-12)
    assert via_rows == pytest.approx(direct, rel=1e-12)
