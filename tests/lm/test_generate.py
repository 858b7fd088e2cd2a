"""Generation (tinygrad_rnn/decoding.py, tr.lm.generate) for the recurrent and the feed-forward LM.

* sampling with a fixed seed is reproducible (and another seed gives another text);
* greedy decoding picks the argmax of the model's own next-token distribution at every step
  (recomputed from the whole sequence, so carrying the RNN state step by step and sliding
  the feed-forward window are both checked);
* the returned log-probabilities are the model's: their sum is the log-likelihood that the
  shared evaluation gives the continuation;
* statistics with fixed seeds: at temperature 1 draws follow softmax(z); as tau -> 0 sampling
  becomes greedy; at a very high temperature draws are uniform (and at tau = 1 they are
  not); top-k draws only from the k largest logits, in the renormalised proportions;
* generation stops after ``eos_id``, runs without a graph in eval mode and restores the mode;
* bad temperature, top_k, prompts and models raise clear errors.
"""
from __future__ import annotations

import doctest
import importlib
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tinygrad_rnn as tr
from tinygrad_rnn.lm import FeedForwardLM, RNNLM, evaluate_lm, generate, sample_logits

generate_module = importlib.import_module("tinygrad_rnn.decoding")
V = 12


def test_docstring_examples() -> None:
    result = doctest.testmod(generate_module)
    assert result.attempted > 0 and result.failed == 0


def _models() -> list:
    # larger init so that the distributions are far from uniform and argmax ties do not occur
    rnn = RNNLM(V, 8, 10, num_layers=2, cell="lstm", init_range=1.0, dtype=np.float64,
                generator=3)
    ffn = FeedForwardLM(V, 3, 6, 10, direct=True, init_range=1.0, dtype=np.float64,
                        generator=4)
    return [rnn, ffn]


MODELS = _models()
IDS = ["rnnlm", "feedforward"]


def _chi_square(counts: np.ndarray, probs: np.ndarray) -> float:
    expected = counts.sum() * probs
    return float(((counts - expected) ** 2 / expected).sum())


# Upper 1e-6 tail of chi-square: df=11 -> 48.9, df=4 -> 33.4 (a true distribution passes
# with probability 1 - 1e-6; the seeds are fixed, so the outcome is deterministic).
CHI2_DF11, CHI2_DF4 = 48.9, 33.4


# --------------------------------------------------------------------------- reproducibility
@pytest.mark.parametrize("model", MODELS, ids=IDS)
def test_sampling_is_reproducible_with_a_seed(model) -> None:
    kwargs = dict(strategy="sample", temperature=1.3, top_k=8)
    a = generate(model, [2, 5, 6], 30, generator=123, **kwargs)
    b = generate(model, [2, 5, 6], 30, generator=123, **kwargs)
    c = generate(model, [2, 5, 6], 30, generator=124, **kwargs)
    assert a.dtype == np.int64 and a.shape == (30,)
    assert np.array_equal(a, b)
    assert not np.array_equal(a, c)
    rng_a, rng_b = np.random.default_rng(9), np.random.default_rng(9)  # Generators work too
    assert np.array_equal(generate(model, [4], 10, "sample", generator=rng_a),
                          generate(model, [4], 10, "sample", generator=rng_b))
    tr.manual_seed(5)                                              # default generator
    d = generate(model, [4], 10, "sample")
    tr.manual_seed(5)
    assert np.array_equal(d, generate(model, [4], 10, "sample"))


# ------------------------------------------------------------------------------ greedy
@pytest.mark.parametrize("model", MODELS, ids=IDS)
@pytest.mark.parametrize("prompt", [[2], [2, 7, 7, 9, 4]])
def test_greedy_is_the_argmax_at_every_step(model, prompt: list) -> None:
    out, lps = generate(model, prompt, 15, strategy="greedy", return_log_probs=True)
    assert out.shape == (15,) and lps.shape == (15,)
    full = np.concatenate([prompt, out])
    rows = model.log_probs(full).numpy()          # row t: distribution of full[t + 1]
    P = len(prompt)
    for i, token in enumerate(out):
        row = rows[P - 1 + i]
        assert token == int(np.argmax(row))
        gap = np.sort(row)[-1] - np.sort(row)[-2]
        assert gap > 1e-6                          # not a near-tie: argmax is well defined
        assert lps[i] == pytest.approx(row[token], rel=1e-10, abs=1e-12)


@pytest.mark.parametrize("model", MODELS, ids=IDS)
def test_log_probs_sum_to_the_shared_evaluation(model) -> None:
    prompt = np.array([2, 5, 9])
    out, lps = generate(model, prompt, 20, strategy="sample", temperature=2.0, top_k=6,
                        generator=0, return_log_probs=True)
    full = np.concatenate([prompt, out])
    whole = evaluate_lm(model.token_log_probs, full)
    head = evaluate_lm(model.token_log_probs, prompt)
    assert -lps.sum() == pytest.approx(whole.nll_sum - head.nll_sum, rel=1e-10)


# ------------------------------------------------------------------------- statistics
def test_sampling_at_temperature_one_follows_the_softmax() -> None:
    logits = np.linspace(-1.5, 1.5, V)
    p = np.exp(logits) / np.exp(logits).sum()
    draws = sample_logits(np.tile(logits, (20000, 1)), "sample", generator=0)
    counts = np.bincount(draws, minlength=V)
    assert _chi_square(counts, p) < CHI2_DF11
    assert _chi_square(counts, np.full(V, 1 / V)) > 10 * CHI2_DF11   # and clearly not uniform


def test_high_temperature_approaches_uniform() -> None:
    logits = np.linspace(-3.0, 3.0, V)
    draws = sample_logits(np.tile(logits, (20000, 1)), "sample", temperature=1e4,
                          generator=1)
    counts = np.bincount(draws, minlength=V)
    assert _chi_square(counts, np.full(V, 1 / V)) < CHI2_DF11
    # the same test at tau = 1 rejects uniformity by far
    draws = sample_logits(np.tile(logits, (20000, 1)), "sample", temperature=1.0,
                          generator=1)
    assert _chi_square(np.bincount(draws, minlength=V), np.full(V, 1 / V)) > 100 * CHI2_DF11


@pytest.mark.parametrize("model", MODELS, ids=IDS)
def test_high_temperature_generation_is_uniform(model) -> None:
    out = generate(model, [2], 1500, strategy="sample", temperature=1e5, generator=2)
    assert _chi_square(np.bincount(out, minlength=V), np.full(V, 1 / V)) < CHI2_DF11
    # the same test sees that a cooler model is not uniform
    out = generate(model, [2], 1500, strategy="sample", temperature=0.5, generator=2)
    assert _chi_square(np.bincount(out, minlength=V), np.full(V, 1 / V)) > CHI2_DF11


@pytest.mark.parametrize("model", MODELS, ids=IDS)
def test_low_temperature_approaches_greedy(model) -> None:
    greedy = generate(model, [2, 8], 25, strategy="greedy")
    for seed in range(3):
        cold = generate(model, [2, 8], 25, strategy="sample", temperature=1e-4,
                        generator=seed)
        assert np.array_equal(cold, greedy)
    warm = generate(model, [2, 8], 25, strategy="sample", temperature=1.0, generator=0)
    assert not np.array_equal(warm, greedy)        # at tau = 1 it really samples


@settings(max_examples=25)
@given(seed=st.integers(0, 2**31), k=st.integers(1, V))
def test_top_k_restricts_the_support(seed: int, k: int) -> None:
    rng = np.random.default_rng(seed)
    logits = rng.normal(0.0, 2.0, size=V)
    draws = sample_logits(np.tile(logits, (400, 1)), "sample", top_k=k, generator=seed)
    top = set(np.argsort(-logits, kind="stable")[:k].tolist())
    assert set(draws.tolist()) <= top
    if k == 1:
        assert set(draws.tolist()) == {int(np.argmax(logits))}


def test_top_k_draws_in_renormalised_proportions() -> None:
    logits = np.array([0.0, 2.0, -1.0, 1.5, 0.5, 3.0, -2.0, 1.0, 0.2, -0.5, 2.5, -3.0])
    k = 5
    top = np.argsort(-logits)[:k]
    q = np.zeros(V)
    q[top] = np.exp(logits[top]) / np.exp(logits[top]).sum()
    draws = sample_logits(np.tile(logits, (20000, 1)), "sample", top_k=k, generator=3)
    counts = np.bincount(draws, minlength=V)
    assert counts[q == 0].sum() == 0 and (counts[top] > 0).all()
    assert _chi_square(counts[top], q[top]) < CHI2_DF4


def test_top_k_ties_prefer_the_lower_id() -> None:
    logits = np.array([1.0, 3.0, 3.0, 3.0, 0.0])
    draws = sample_logits(np.tile(logits, (300, 1)), "sample", top_k=2, generator=0)
    assert set(draws.tolist()) == {1, 2}


@pytest.mark.parametrize("model", MODELS, ids=IDS)
def test_generation_with_top_k_stays_in_the_top_k(model) -> None:
    prompt, k = [2, 6], 3
    out = generate(model, prompt, 30, strategy="sample", top_k=k, temperature=3.0,
                   generator=4)
    rows = model.log_probs(np.concatenate([prompt, out])).numpy()
    for i, token in enumerate(out):
        row = rows[len(prompt) - 1 + i]
        assert token in np.argsort(-row, kind="stable")[:k]


def test_sample_logits_greedy_and_shapes() -> None:
    z = np.array([[0.1, 0.9, 0.3], [2.0, -1.0, 0.0]])
    assert sample_logits(z, "greedy").tolist() == [1, 0]
    assert sample_logits(z[0], "greedy") == 1
    assert isinstance(sample_logits(z[0], "sample", generator=0), int)
    # -inf logits (masked tokens) are never drawn
    masked = np.array([-np.inf, 0.0, -np.inf, 0.0])
    assert set(sample_logits(np.tile(masked, (200, 1)), generator=0).tolist()) == {1, 3}


# --------------------------------------------------------------------- stopping and modes
@pytest.mark.parametrize("model", MODELS, ids=IDS)
def test_stops_after_eos(model) -> None:
    greedy = generate(model, [2, 4], 10, strategy="greedy")
    eos = int(greedy[3])
    first = int(np.flatnonzero(greedy == eos)[0])
    out = generate(model, [2, 4], 10, strategy="greedy", eos_id=eos)
    assert out.tolist() == greedy[: first + 1].tolist()       # eos included, then stop
    sampled = generate(model, [2, 4], 200, strategy="sample", temperature=3.0, eos_id=eos,
                       generator=0)
    assert sampled[-1] == eos and eos not in sampled[:-1].tolist()
    assert generate(model, [2], 0).shape == (0,)


class Recorder(RNNLM):
    """An RNNLM that records the grad mode and its training flag during generation."""

    seen: list

    def advance(self, token_id, state):
        self.seen.append((tr.is_grad_enabled(), self.training, self.drop.training))
        return super().advance(token_id, state)


def test_runs_under_no_grad_in_eval_mode_and_restores_it() -> None:
    model = Recorder(V, 4, 4, dropout=0.5, generator=0)
    model.seen = []
    model.train()
    generate(model, [2, 3], 6, strategy="sample", generator=0)
    assert len(model.seen) == 5 and all(s == (False, False, False) for s in model.seen)
    assert tr.is_grad_enabled()
    assert all(m.training for m in model.modules())
    assert all(p.grad is None for p in model.parameters())
    # and an eval-mode model stays in eval mode
    model.eval()
    generate(model, [2], 3)
    assert not any(m.training for m in model.modules())


# ------------------------------------------------------------------------------ errors
@pytest.mark.parametrize("kwargs, exc, match", [
    (dict(temperature=0.0), ValueError, "temperature must be a finite number > 0"),
    (dict(temperature=-1.0), ValueError, "temperature"),
    (dict(temperature=float("nan")), ValueError, "temperature"),
    (dict(temperature=float("inf")), ValueError, "temperature"),
    (dict(temperature="hot"), TypeError, "temperature must be a number"),
    (dict(top_k=0), ValueError, r"top_k must be None or an integer in \[1, V\] = \[1, 12\]"),
    (dict(top_k=V + 1), ValueError, "top_k"),
    (dict(top_k=True), ValueError, "top_k"),
    (dict(strategy="beam"), ValueError, "strategy"),
    (dict(max_new_tokens=-1), ValueError, "max_new_tokens"),
    (dict(eos_id=V), ValueError, "eos_id"),
    (dict(prompt_ids=[]), ValueError, "non-empty"),
    (dict(prompt_ids=[[2, 3]]), ValueError, "1-D"),
    (dict(prompt_ids=[2.0]), TypeError, "integers"),
    (dict(prompt_ids=[2, 5, 12]), IndexError,
     r"prompt id 12 at position 2 is out of range for vocabulary size 12"),
])
@pytest.mark.parametrize("model", MODELS, ids=IDS)
def test_errors(model, kwargs: dict, exc: type, match: str) -> None:
    args = dict(prompt_ids=[2, 4], max_new_tokens=3, strategy="sample")
    args.update(kwargs)
    with pytest.raises(exc, match=match):
        generate(model, **args)


def test_model_without_the_protocol() -> None:
    with pytest.raises(TypeError, match="prime"):
        generate(tr.nn.Linear(3, 3), [1], 2)


@pytest.mark.parametrize("logits, match", [
    (np.array([0.0, np.nan]), "NaN"),
    (np.array([-np.inf, -np.inf]), "all -inf"),
    (np.zeros((2, 2, 2)), "shape"),
])
def test_sample_logits_errors(logits: np.ndarray, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        sample_logits(logits)


def test_chi_square_thresholds() -> None:
    """The thresholds are the chi-square 1e-6 upper quantiles (checked by a series)."""
    def upper_tail(x: float, df: int) -> float:
        # P(X > x) = Q(df/2, x/2), regularised upper incomplete gamma, by its series
        a, z = df / 2.0, x / 2.0
        term = total = 1.0 / a
        n = 0
        while term > 1e-17 * total:
            n += 1
            term *= z / (a + n)
            total += term
        lower = math.exp(-z + a * math.log(z) - math.lgamma(a)) * total
        return 1.0 - lower

    assert 5e-7 < upper_tail(CHI2_DF11, 11) < 1.5e-6
    assert 5e-7 < upper_tail(CHI2_DF4, 4) < 1.5e-6
