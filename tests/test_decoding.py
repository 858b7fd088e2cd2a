"""Decoding: greedy, sampling and beam search against brute force and each other."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tinygrad_rnn as tr
from tinygrad_rnn import decoding

PAD, BOS, EOS = 0, 2, 3


def make_model(decoder: str = "bahdanau", cell: str = "gru", tgt_vocab: int = 7,
               seed: int = 0, sharpen: float = 1.0) -> tr.nn.Seq2Seq:
    model = tr.nn.Seq2Seq(9, tgt_vocab, 4, 5, cell=cell, decoder=decoder, dtype=np.float64,
                          generator=seed)
    if sharpen != 1.0:                       # spread the log-probabilities apart
        with tr.no_grad():
            model.out.weight.mul_(sharpen)
            model.out.bias.mul_(sharpen)
    return model


def make_src(seed: int, n: int = 3, max_len: int = 5) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    lens = rng.integers(1, max_len + 1, n)
    lens[0] = max_len
    src = np.full((n, max_len), PAD, dtype=np.int64)
    for i in range(n):
        src[i, : lens[i]] = rng.integers(4, 9, lens[i])
    return src, lens


def sequence_logprob(model, src, lens, seq) -> tuple[float, np.ndarray | None]:
    """log p(seq | src) by teacher forcing, and the attention rows (one source)."""
    tgt_in = np.array([[BOS] + list(seq[:-1])], dtype=np.int64)
    with tr.no_grad():
        logits, weights = model(src, lens, tgt_in)
    logp = tr.functional.log_softmax(logits, axis=-1).numpy()[0]
    score = float(sum(logp[t, tok] for t, tok in enumerate(seq)))
    return score, None if weights is None else weights.numpy()[0][:, : lens[0]]


# ------------------------------------------------------------------------ greedy
@pytest.mark.parametrize("decoder", ["bahdanau", "luong", "input"])
def test_greedy_scores_and_attention_match_teacher_forcing(decoder):
    model = make_model(decoder, seed=1, sharpen=3.0)
    src, lens = make_src(1)
    res = decoding.greedy_decode(model, src, lens, max_len=6)
    assert res.scores.shape == (3,) and res.finished.shape == (3,)
    for i, seq in enumerate(res.sequences):
        assert 1 <= len(seq) <= 6
        assert res.finished[i] == (seq[-1] == EOS)
        assert EOS not in seq[:-1]
        score, w = sequence_logprob(model, src[i: i + 1], lens[i: i + 1], seq)
        np.testing.assert_allclose(res.scores[i], score, rtol=1e-10)
        if decoder == "input":
            assert res.attention is None
        else:
            assert res.attention[i].shape == (len(seq), lens[i])
            np.testing.assert_allclose(res.attention[i], w, rtol=1e-10, atol=1e-14)
        # greedy: every token is the argmax given the prefix
        tgt_in = np.array([[BOS] + list(seq[:-1])])
        with tr.no_grad():
            logits, _ = model(src[i: i + 1], lens[i: i + 1], tgt_in)
        np.testing.assert_array_equal(np.argmax(logits.numpy()[0], -1), seq)


def test_decoding_runs_without_grad():
    model = make_model("bahdanau", seed=2)
    seen = []
    step = model.decode_step

    def spy(*args):
        seen.append(tr.is_grad_enabled())
        return step(*args)

    model.decode_step = spy
    src, lens = make_src(2)
    decoding.greedy_decode(model, src, lens, max_len=3)
    decoding.sample_decode(model, src, lens, max_len=3, generator=0)
    decoding.beam_search(model, src, lens, beam_width=2, max_len=3)
    assert seen and not any(seen)
    assert tr.is_grad_enabled()


# ------------------------------------------------------------------------ beam search
@settings(max_examples=10)
@given(seed=st.integers(0, 10 ** 6), decoder=st.sampled_from(["bahdanau", "luong", "init"]),
       cell=st.sampled_from(["gru", "lstm"]), sharpen=st.sampled_from([1.0, 4.0]))
def test_beam_width_one_is_greedy(seed, decoder, cell, sharpen):
    model = make_model(decoder, cell, seed=seed % 11, sharpen=sharpen)
    src, lens = make_src(seed)
    g = decoding.greedy_decode(model, src, lens, max_len=7)
    b = decoding.beam_search(model, src, lens, beam_width=1, max_len=7)
    for i in range(len(src)):
        np.testing.assert_array_equal(g.sequences[i], b.sequences[i])
        np.testing.assert_allclose(g.scores[i], b.scores[i], rtol=1e-12)
        if g.attention is not None:
            np.testing.assert_allclose(g.attention[i], b.attention[i], rtol=1e-12)
    np.testing.assert_array_equal(g.finished, b.finished)


def all_hypotheses(vocab: int, max_len: int):
    """Every complete output: tokens ending in EOS (no earlier EOS), or max_len tokens
    without EOS."""
    for length in range(1, max_len + 1):
        for seq in itertools.product(range(vocab), repeat=length):
            if EOS in seq[:-1]:
                continue
            if seq[-1] == EOS or length == max_len:
                yield list(seq)


@pytest.mark.parametrize("alpha", [0.0, 1.0])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_wide_beam_finds_the_best_sequence(seed, alpha):
    vocab, max_len = 5, 3
    model = make_model("bahdanau", tgt_vocab=vocab, seed=seed, sharpen=2.5)
    src, lens = make_src(seed + 10, n=1, max_len=4)
    best, best_key = None, -np.inf
    for seq in all_hypotheses(vocab, max_len):
        score, _ = sequence_logprob(model, src, lens, seq)
        key = score / len(seq) ** alpha
        if key > best_key:
            best, best_key, best_score = seq, key, score
    res = decoding.beam_search(model, src, lens, beam_width=10 ** 4, max_len=max_len,
                               alpha=alpha)
    assert res.sequences[0].tolist() == best
    np.testing.assert_allclose(res.scores[0], best_score, rtol=1e-10)
    # a narrow beam can only do as well or worse (in the normalized score)
    narrow = decoding.beam_search(model, src, lens, beam_width=2, max_len=max_len,
                                  alpha=alpha)
    assert narrow.scores[0] / len(narrow.sequences[0]) ** alpha <= best_key + 1e-12


def test_beam_hypotheses_are_well_formed():
    model = make_model("luong", "lstm", seed=3, sharpen=2.0)
    src, lens = make_src(3, n=4)
    res = decoding.beam_search(model, src, lens, beam_width=4, max_len=5, alpha=0.7)
    for i, seq in enumerate(res.sequences):
        assert 1 <= len(seq) <= 5
        assert EOS not in seq[:-1]
        assert res.finished[i] == (seq[-1] == EOS)
        score, w = sequence_logprob(model, src[i: i + 1], lens[i: i + 1], seq)
        np.testing.assert_allclose(res.scores[i], score, rtol=1e-10)
        np.testing.assert_allclose(res.attention[i], w, rtol=1e-10, atol=1e-14)


def test_eos_stops_a_hypothesis():
    """When EOS is by far the most likely first token, every width returns just [EOS]."""
    model = make_model("bahdanau", seed=4)
    with tr.no_grad():
        model.out.bias[EOS] = 50.0
    src, lens = make_src(4)
    for width in (1, 3):
        res = decoding.beam_search(model, src, lens, beam_width=width, max_len=6)
        assert all(seq.tolist() == [EOS] for seq in res.sequences)
        assert res.finished.all()


def test_length_normalization_prefers_longer_outputs():
    """With alpha = 0 beam search favours short outputs; alpha > 0 can only lengthen the
    chosen output's length (never shorten it) on the same beam."""
    model = make_model("bahdanau", seed=5, sharpen=0.5)
    src, lens = make_src(5, n=4)
    raw = decoding.beam_search(model, src, lens, beam_width=30, max_len=4, alpha=0.0)
    norm = decoding.beam_search(model, src, lens, beam_width=30, max_len=4, alpha=1.0)
    for i in range(4):
        assert len(norm.sequences[i]) >= len(raw.sequences[i])
        assert raw.scores[i] >= norm.scores[i] - 1e-12


# ------------------------------------------------------------------------ sampling
def test_sampling_is_reproducible_with_a_seed():
    model = make_model("bahdanau", seed=6)
    src, lens = make_src(6, n=8)
    a = decoding.sample_decode(model, src, lens, max_len=6, temperature=1.5, generator=7)
    b = decoding.sample_decode(model, src, lens, max_len=6, temperature=1.5, generator=7)
    for x, y in zip(a.sequences, b.sequences):
        np.testing.assert_array_equal(x, y)
    np.testing.assert_array_equal(a.scores, b.scores)
    c = decoding.sample_decode(model, src, lens, max_len=6, temperature=1.5, generator=8)
    assert any(len(x) != len(y) or (x != y).any() for x, y in zip(a.sequences, c.sequences))


def test_top_k_one_is_greedy():
    model = make_model("luong", seed=7)
    src, lens = make_src(7, n=5)
    g = decoding.greedy_decode(model, src, lens, max_len=6)
    s = decoding.sample_decode(model, src, lens, max_len=6, top_k=1, temperature=3.0,
                               generator=0)
    for x, y in zip(g.sequences, s.sequences):
        np.testing.assert_array_equal(x, y)
    np.testing.assert_allclose(g.scores, s.scores, rtol=1e-12)


@pytest.mark.parametrize("temperature,top_k", [(1.0, None), (0.5, None), (2.0, 3)])
def test_first_token_frequencies_follow_tempered_top_k_softmax(temperature, top_k):
    model = make_model("bahdanau", seed=8, sharpen=2.0)
    n = 4000
    src = np.tile(np.array([[4, 5, 6]]), (n, 1))
    lens = np.full(n, 3)
    res = decoding.sample_decode(model, src, lens, max_len=1, temperature=temperature,
                                 top_k=top_k, generator=9)
    first = np.array([seq[0] for seq in res.sequences])
    with tr.no_grad():
        state, memory = model.encode(src[:1], lens[:1])
        logits, _, _ = model.decode_step(np.array([BOS]), state, memory)
    z = logits.numpy()[0] / temperature
    if top_k is not None:
        z = np.where(z >= np.sort(z)[-top_k], z, -np.inf)
    p = np.exp(z - z.max())
    p /= p.sum()
    freq = np.bincount(first, minlength=p.size) / n
    sigma = np.sqrt(p * (1 - p) / n)
    assert np.all(np.abs(freq - p) <= 4.5 * sigma + 1e-12), (freq, p)
    if top_k is not None:
        assert np.count_nonzero(freq) <= top_k


def test_argument_errors():
    model = make_model("init")
    src, lens = make_src(0)
    with pytest.raises(ValueError, match="beam_width"):
        decoding.beam_search(model, src, lens, beam_width=0)
    with pytest.raises(ValueError, match="max_len"):
        decoding.greedy_decode(model, src, lens, max_len=0)
    with pytest.raises(ValueError, match="temperature"):
        decoding.sample_decode(model, src, lens, temperature=0.0)


# ------------------------------------------------------------------------ regressions
def constant_logits_model(bias) -> tr.nn.Seq2Seq:
    """A model whose logits are ``bias`` at every step (output weights zeroed): exact ties."""
    model = make_model("init", tgt_vocab=len(bias), seed=0)
    with tr.no_grad():
        model.out.weight.mul_(0.0)
        model.out.bias.array[:] = np.asarray(bias, dtype=np.float64)
    return model


@pytest.mark.parametrize("seed", range(6))
def test_top_k_keeps_exactly_k_candidates_ties_towards_the_lower_id(seed):
    # ids 1 and 2 tie for the largest logit: top_k=1 keeps only id 1, as greedy does
    model = constant_logits_model([0.0, 5.0, 5.0, 0.0, 0.0, 0.0, 0.0])
    src, lens = make_src(seed, n=4)
    greedy = decoding.greedy_decode(model, src, lens, max_len=5)
    one = decoding.sample_decode(model, src, lens, max_len=5, top_k=1, generator=seed)
    for g, s in zip(greedy.sequences, one.sequences):
        np.testing.assert_array_equal(s, g)
        np.testing.assert_array_equal(s, [1] * 5)
    # ids 1, 2 and 3 (EOS) tie: top_k=2 keeps 1 and 2 only, so EOS is never drawn
    model = constant_logits_model([0.0, 5.0, 5.0, 5.0, 0.0, 0.0, 0.0])
    two = decoding.sample_decode(model, np.tile(src, (10, 1)), np.tile(lens, 10), max_len=5,
                                 top_k=2, generator=seed)
    drawn = np.concatenate(two.sequences)
    assert set(drawn.tolist()) == {1, 2} and not two.finished.any()


@given(z=st.lists(st.integers(-2, 2), min_size=1, max_size=8), data=st.data())
def test_top_k_mask_is_the_stable_top_k(z, data):
    """Exactly k entries per row: the k largest, ties broken towards the lower id."""
    from tinygrad_rnn.decoding import top_k_mask

    k = data.draw(st.integers(1, len(z)))
    row = np.array(z, dtype=np.float64)
    expected = np.zeros(len(z), dtype=bool)
    expected[np.argsort(-row, kind="stable")[:k]] = True
    np.testing.assert_array_equal(top_k_mask(row[None], k)[0], expected)


@pytest.mark.parametrize("temperature", [float("nan"), float("inf"), 0.0, -1.0])
def test_sample_decode_refuses_a_bad_temperature_like_generate(temperature):
    model = make_model("init")
    src, lens = make_src(0)
    with pytest.raises(ValueError, match="sample_decode: temperature must be a finite number "
                                         "> 0"):
        decoding.sample_decode(model, src, lens, temperature=temperature)
    with pytest.raises(TypeError, match="temperature must be a number"):
        decoding.sample_decode(model, src, lens, temperature="hot")


@pytest.mark.parametrize("top_k", [0, 8, 100, 2.7, True])
def test_sample_decode_top_k_follows_the_rule_of_generate(top_k):
    model = make_model("init", tgt_vocab=7)
    src, lens = make_src(0)
    with pytest.raises(ValueError, match=r"sample_decode: top_k must be None or an integer in "
                                         r"\[1, V\] = \[1, 7\], got"):
        decoding.sample_decode(model, src, lens, top_k=top_k)
    ok = decoding.sample_decode(model, src, lens, top_k=np.int64(7), max_len=2, generator=0)
    assert len(ok.sequences) == 3


@pytest.mark.parametrize("call", [
    lambda m, s, l: decoding.greedy_decode(m, s, l, max_len=2.5),
    lambda m, s, l: decoding.sample_decode(m, s, l, max_len=2.0),
    lambda m, s, l: decoding.beam_search(m, s, l, max_len=True),
    lambda m, s, l: decoding.beam_search(m, s, l, beam_width=2.5),
])
def test_counts_must_be_integers_not_truncated(call):
    model = make_model("init")
    src, lens = make_src(0)
    with pytest.raises(ValueError, match=r"(max_len|beam_width) must be an integer >= 1, got"):
        call(model, src, lens)


DECODERS = [decoding.greedy_decode, decoding.sample_decode, decoding.beam_search]


@pytest.mark.parametrize("decode", DECODERS)
def test_every_decoder_checks_the_source_the_same_way(decode):
    model = make_model("bahdanau")
    name = decode.__name__
    with pytest.raises(ValueError, match=rf"{name}: src must be an integer array \(N, S\), "
                                         r"got shape \(2,\).*src\[None\]"):
        decode(model, np.array([4, 5]))
    with pytest.raises(ValueError, match=rf"{name}: src_lengths must have shape \(N,\) = "
                                         r"\(2,\) for src of shape \(2, 2\), got shape "
                                         r"\(1,\)"):
        decode(model, np.array([[4, 5], [4, 5]]), [2])
    # the range is checked on the whole source, before any slicing: [1, S] = [1, 2]
    for bad in ([0], [3]):
        with pytest.raises(ValueError, match=rf"{name}: src_lengths must be integers in "
                                             r"\[1, S\] = \[1, 2\].*got \[" + str(bad[0])):
            decode(model, np.array([[4, 5]]), bad)
    with pytest.raises(ValueError, match=rf"{name}: src_lengths must be integers, got dtype "
                                         r"float64"):
        decode(model, np.array([[4, 5]]), [1.5])
    with pytest.raises(ValueError, match=rf"{name}: src of shape \(1, 0\) has no tokens"):
        decode(model, np.zeros((1, 0), dtype=np.int64))


@pytest.mark.parametrize("decode", DECODERS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_attention_comes_back_in_the_model_dtype(decode, dtype):
    model = tr.nn.Seq2Seq(9, 7, 4, 5, decoder="luong", dtype=dtype, generator=0)
    src, lens = make_src(0)
    res = decode(model, src, lens, max_len=3)
    assert all(a.dtype == dtype for a in res.attention)
    assert res.scores.dtype == np.float64            # scores: float64, as documented


def test_docstring_examples():
    import doctest

    from tinygrad_rnn.nn import seq2seq

    for module in (decoding, seq2seq):
        result = doctest.testmod(module, verbose=False)
        assert result.attempted > 0 and result.failed == 0, module.__name__
