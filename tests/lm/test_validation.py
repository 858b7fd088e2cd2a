"""Argument checks of the language-model package (tinygrad_rnn/lm), each a regression test:

* a failed NGramLM.fit leaves the model exactly as it was (before the fix the new vocabulary
  was kept with the old counts, or a new model claimed to be fitted and raised KeyError);
* NGramLM.fit names what is wrong with its data, vocabulary size and special ids;
* ids and special ids are integers (a float is refused, not truncated) and never negative:
  with_boundaries, make_contexts, FeedForwardLM, generate's eos_id, evaluate_lm.
"""
from __future__ import annotations

import numpy as np
import pytest

from tinygrad_rnn.data import Vocab
from tinygrad_rnn.lm import (
    FeedForwardLM, NGramLM, RNNLM, evaluate_lm, generate, make_contexts, with_boundaries,
)


# ------------------------------------------------------------------------------ NGramLM.fit
def snapshot(lm: NGramLM) -> tuple:
    """Everything a fit writes, and the answers the model gives."""
    return (lm.vocab_size, lm.bos_id, lm.eos_id, lm.fitted, lm.distribution([4]).tolist(),
            lm.count([4, 5]))


@pytest.mark.parametrize("smoothing", ["kneser_ney", "add_k"])
@pytest.mark.parametrize("bad_fit", [
    lambda lm: lm.fit([[4, 9]], vocab_size=8),                 # id 9 outside [0, 8)
    lambda lm: lm.fit([[4, 5]], vocab_size=8, eos_id=8),       # eos_id outside [0, 8)
    lambda lm: lm.fit([[4, 5]], vocab_size=8, bos_id=2.7),     # a float id
    lambda lm: lm.fit([[4, 5.0]], vocab_size=8),               # float ids
    lambda lm: lm.fit([], vocab_size=8),                       # no data
    lambda lm: lm.fit(5, vocab_size=8),                        # not a sequence
])
def test_a_failed_fit_leaves_a_fitted_model_unchanged(smoothing, bad_fit):
    lm = NGramLM(order=2, smoothing=smoothing).fit([[4, 5], [4, 5, 4]], vocab_size=6)
    before = snapshot(lm)
    with pytest.raises((ValueError, TypeError), match="NGramLM.fit"):
        bad_fit(lm)
    assert snapshot(lm) == before
    # and the model still refits normally
    lm.fit([[4, 7]], vocab_size=8)
    assert lm.vocab_size == 8 and lm.count([4, 7]) == 1


def test_a_failed_first_fit_leaves_the_model_unfitted():
    lm = NGramLM(order=2)
    with pytest.raises(ValueError, match="id 9 is outside the vocabulary"):
        lm.fit([[4, 9]], vocab_size=6)
    assert not lm.fitted and lm.vocab_size is None
    with pytest.raises(RuntimeError, match="not fitted"):
        lm.distribution([4])


@pytest.mark.parametrize("data, vocab_size, kwargs, exc, match", [
    ([4.0, 5.0], 6, {}, TypeError, r"NGramLM.fit: ids must be integers, got dtype float64"),
    ([True, False], 6, {}, TypeError, r"NGramLM.fit: ids must be integers, got dtype bool"),
    (5, 6, {}, TypeError, r"NGramLM.fit: data must be a sequence of ids or a list of "
                          r"sequences, got int"),
    ("abc", 6, {}, TypeError, r"NGramLM.fit: data must be a sequence of ids .* got str"),
    ([[4, 5]], 6.5, {}, ValueError, r"NGramLM.fit: vocab_size must be an integer >= 1 or a "
                                    r"Vocab, got 6.5"),
    ([[4, 5]], True, {}, ValueError, r"vocab_size must be an integer >= 1 or a Vocab"),
    ([[4, 5]], 0, {}, ValueError, r"vocab_size must be an integer >= 1 or a Vocab, got 0"),
    ([[4, 5]], 6, dict(bos_id=2.7), ValueError, r"NGramLM.fit: bos_id must be an integer id, "
                                                r"got 2.7"),
    ([[4, 5]], 6, dict(eos_id=True), ValueError, r"eos_id must be an integer id, got True"),
    ([[4, 5]], 6, dict(eos_id=6), ValueError, r"eos_id=6 is outside the vocabulary \[0, 6\)"),
])
def test_fit_errors_name_what_is_wrong(data, vocab_size, kwargs, exc, match):
    with pytest.raises(exc, match=match):
        NGramLM(order=2).fit(data, vocab_size, **kwargs)


def test_fit_accepts_a_flat_list_numpy_ints_and_a_vocab():
    a = NGramLM(order=2).fit([4, 5, 4], vocab_size=6)
    b = NGramLM(order=2).fit([np.int64(4), np.int64(5), np.int64(4)], vocab_size=np.int32(6))
    c = NGramLM(order=2).fit(np.array([4, 5, 4]), vocab_size=Vocab(["a", "b"]))
    for lm in (b, c):
        assert lm.vocab_size == 6
        np.testing.assert_array_equal(lm.distribution([4]), a.distribution([4]))


def test_prob_refuses_a_float_next_id():
    lm = NGramLM(order=2).fit([[4, 5]], vocab_size=6)
    with pytest.raises(ValueError, match=r"NGramLM.prob: next_id must be an integer id, got "
                                         r"5.7"):
        lm.prob([4], 5.7)
    assert lm.prob([4], np.int64(5)) == lm.prob([4], 5)


# ------------------------------------------------------------------------------ ids
def test_with_boundaries_refuses_float_and_negative_ids():
    with pytest.raises(TypeError, match=r"with_boundaries: sentence 0: ids must be integers, "
                                        r"got dtype float64"):
        with_boundaries([[4.7, 5.2]])
    with pytest.raises(ValueError, match=r"with_boundaries: sentence 1: negative id -3"):
        with_boundaries([[4, 5], [-3]])
    with pytest.raises(ValueError, match=r"sentence 0 must be a 1-D sequence of ids, got "
                                         r"shape \(1, 2\)"):
        with_boundaries([[[4, 5]]])
    with pytest.raises(ValueError, match=r"with_boundaries: bos_id must be a non-negative "
                                         r"integer id, got 2.5"):
        with_boundaries([[4]], bos_id=2.5)
    with pytest.raises(ValueError, match=r"eos_id must be a non-negative integer id, got True"):
        with_boundaries([[4]], eos_id=True)
    out = with_boundaries([[4, 5], [], np.array([6], dtype=np.int32)])
    assert [o.tolist() for o in out] == [[2, 4, 5, 3], [2, 3], [2, 6, 3]]
    assert all(o.dtype == np.int64 for o in out)


def test_evaluate_lm_refuses_a_flat_list_of_float_ids():
    def uniform(ids):
        return np.full(ids.size - 1, -np.log(5.0))

    with pytest.raises(TypeError, match=r"evaluate_lm: sequence 0: ids must be integers, got "
                                        r"dtype float64"):
        evaluate_lm(uniform, [1.0, 2.0, 3.0])
    assert evaluate_lm(uniform, [1, 2, 3]).num_tokens == 2


def test_make_contexts_refuses_negative_ids_and_a_float_bos():
    with pytest.raises(ValueError, match=r"make_contexts: ids must be >= 0, got -3 at position "
                                         r"1"):
        make_contexts([1, -3], 2)
    with pytest.raises(ValueError, match=r"make_contexts: bos_id must be an integer id, got "
                                         r"2.5"):
        make_contexts([1, 3], 2, bos_id=2.5)
    with pytest.raises(ValueError, match=r"make_contexts: bos_id must be >= 0, got -1"):
        make_contexts([1, 3], 2, bos_id=-1)


@pytest.mark.parametrize("bos_id, match", [
    (2.5, r"bos_id must be an integer id, got 2.5"),
    (True, r"bos_id must be an integer id, got True"),
    (9, r"bos_id 9 is outside the vocabulary \[0, 9\)"),
    (-1, r"bos_id must be >= 0, got -1"),
])
def test_feed_forward_lm_bos_id(bos_id, match):
    with pytest.raises(ValueError, match="FeedForwardLM: " + match):
        FeedForwardLM(9, 2, 4, 4, bos_id=bos_id, generator=0)
    assert FeedForwardLM(9, 2, 4, 4, bos_id=np.int64(8), generator=0).bos_id == 8


@pytest.mark.parametrize("eos_id", [True, False, 1.0, 9, -1])
def test_generate_refuses_a_bool_or_float_eos_id(eos_id):
    model = RNNLM(9, 4, 4, generator=0)
    with pytest.raises(ValueError, match=r"generate: eos_id must be None or an id in \[0, 9\), "
                                         r"got " + repr(eos_id)):
        generate(model, [1], 2, eos_id=eos_id)


def test_temperature_takes_a_zero_d_array_like_the_other_knobs() -> None:
    from tinygrad_rnn.decoding import check_temperature

    assert check_temperature(np.array(0.7), "generate") == 0.7
    assert check_temperature(np.float32(2.0), "generate") == 2.0
    with pytest.raises(TypeError, match="generate: temperature must be a number"):
        check_temperature(np.array([0.7]), "generate")
    with pytest.raises(TypeError, match="generate: temperature must be a number"):
        check_temperature(np.bool_(True), "generate")
