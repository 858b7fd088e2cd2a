"""The window language models (docs/sequence_models.md): ConvLM (a causal TCN) and
TransformerLM with its key/value cache. The cache gives the logits of full recomputation to
float64 rounding; both models are causal, the TCN reads exactly its receptive field; float64
gradient checks of every parameter (tr.testing.check_module, directional); the shared
evaluation (chunked and windowed scoring) and generation protocol; the errors."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tinygrad_rnn as tr
from tinygrad_rnn.lm import ConvLM, KVCache, TransformerLM, lm_loss, lm_windows
from tinygrad_rnn.lm.windows import window_log_probs
from tinygrad_rnn.testing import check_module

V = 11


def _transformer(seed: int = 0, **kw) -> TransformerLM:
    kw = {"d_model": 8, "nhead": 2, "num_layers": 2, "max_len": 24, **kw}
    return TransformerLM(V, generator=seed, dtype=np.float64, **kw)


# ----------------------------------------------------------------------------- KV cache
@given(norm_first=st.booleans(), positional=st.sampled_from(["learned", "sinusoidal"]),
       split=st.integers(1, 9), n=st.integers(1, 2), seed=st.integers(0, 2 ** 31 - 1))
@settings(max_examples=20)
def test_cached_logits_equal_full_recomputation(norm_first: bool, positional: str, split: int,
                                                n: int, seed: int) -> None:
    """A prompt read at once, then tokens one at a time against the cache (TF4): every step's
    logits equal the full forward pass over all the ids, to float64 rounding."""
    model = _transformer(seed, norm_first=norm_first, positional=positional)
    model.eval()
    ids = np.random.default_rng(seed).integers(0, V, size=(n, 16))
    with tr.no_grad():
        full = model(ids).numpy()                                        # (n, 16, V)
        logits, cache = model.forward_cached(ids[:, :split], model.new_cache(n))
        steps = [logits.numpy()]
        for t in range(split, 16):
            logits, cache = model.forward_cached(ids[:, t:t + 1], cache)
            steps.append(logits.numpy())
    np.testing.assert_allclose(np.concatenate(steps, axis=1), full, rtol=1e-10, atol=1e-12)
    assert cache.length == 16
    # 2 L d numbers per position and sequence
    assert cache.nbytes == 2 * model.num_layers * model.d_model * 8 * 16 * n


def test_cache_is_not_changed_by_later_steps_and_generation_uses_it() -> None:
    model = _transformer()
    logits, cache = model.prime(np.array([1, 2, 3]))
    keys = [k.numpy().copy() for k in cache.keys]
    _, longer = model.advance(4, cache)
    assert cache.length == 3 and longer.length == 4
    for before, k in zip(keys, cache.keys):
        np.testing.assert_array_equal(k.numpy(), before)
    full = model(np.array([[1, 2, 3]])).numpy()[0, -1]
    np.testing.assert_allclose(logits, full, rtol=1e-12)
    out = tr.lm.generate(model, np.array([1, 2]), 8, strategy="greedy")
    assert out.shape == (8,) and ((0 <= out) & (out < V)).all()


def test_cache_errors_are_clear() -> None:
    model = _transformer(dropout=0.1)
    with pytest.raises(RuntimeError, match="training mode with dropout"):
        model.forward_cached(np.array([[1]]), model.new_cache(1))
    model.eval()
    with pytest.raises(TypeError, match="cache must be a KVCache"):
        model.forward_cached(np.array([[1]]), None)
    _, cache = model.forward_cached(np.zeros((1, 24), dtype=np.int64), model.new_cache(1))
    with pytest.raises(ValueError, match=r"positions 24 \.\. 24 do not fit the context "
                                         r"max_len = 24"):
        model.forward_cached(np.array([[1]]), cache)
    _, cache = model.forward_cached(np.zeros((2, 3), dtype=np.int64), model.new_cache(2))
    with pytest.raises(ValueError, match="the cache holds 2 sequences, ids have 1"):
        model.forward_cached(np.array([[1]]), cache)
    with pytest.raises(IndexError, match=str(V)):
        model(np.array([[V]]))
    assert isinstance(cache, KVCache) and "length=3" in repr(cache)


# ----------------------------------------------------------------------------- causality
@pytest.mark.parametrize("make", [lambda: _transformer(),
                                  lambda: ConvLM(V, 6, 2, 3, generator=0, dtype=np.float64)])
def test_no_position_reads_the_future(make) -> None:
    model = make()
    rng = np.random.default_rng(0)
    ids = rng.integers(0, V, size=(2, 20))
    changed = ids.copy()
    changed[:, 12:] = rng.integers(0, V, size=(2, 8))
    a, b = model(ids).numpy(), model(changed).numpy()
    np.testing.assert_array_equal(a[:, :12], b[:, :12])
    assert not np.allclose(a[:, 12:], b[:, 12:])


def test_conv_lm_reads_exactly_its_receptive_field() -> None:
    """Logits at t depend on ids t - R + 1 .. t (TC4) and on nothing older."""
    model = ConvLM(V, 6, kernel_size=2, num_layers=3, generator=0, dtype=np.float64)
    R = model.receptive_field
    assert R == 1 + 2 * 1 * (2 ** 3 - 1)
    ids = np.random.default_rng(1).integers(0, V, size=(1, R + 6))
    t = ids.shape[1] - 1
    base = model(ids).numpy()[0, t]
    for s in (t - R, t - R - 3):                 # outside the field: no effect
        other = ids.copy()
        other[0, s] = (other[0, s] + 1) % V
        np.testing.assert_array_equal(model(other).numpy()[0, t], base)
    other = ids.copy()
    other[0, t - R + 1] = (other[0, t - R + 1] + 1) % V    # the oldest id inside it
    assert not np.allclose(model(other).numpy()[0, t], base)


# ----------------------------------------------------------------------------- gradients
@pytest.mark.parametrize("make", [
    lambda: _transformer(num_layers=1, d_model=4, max_len=8),
    lambda: _transformer(num_layers=1, d_model=4, max_len=8, norm_first=False,
                         positional="sinusoidal", tie_weights=True),
    lambda: ConvLM(V, 4, 2, 2, generator=0, dtype=np.float64),
    lambda: ConvLM(V, 4, 3, 1, generator=0, dtype=np.float64, tie_weights=True),
])
def test_every_parameter_gradient_float64(make) -> None:
    """Directional float64 checks of the LM loss with respect to every parameter."""
    model = make()
    model.eval()
    x, y = lm_windows(np.random.default_rng(2).integers(0, V, size=40), 2, 6, generator=3)

    class Loss(tr.nn.Module):
        def __init__(self, inner: tr.nn.Module) -> None:
            super().__init__()
            self.inner = inner

        def forward(self) -> tr.Tensor:
            return lm_loss(self.inner(x), y)

    report = check_module(Loss(model), mode="directional", n_directions=6, atol=1e-7,
                          rtol=1e-5)
    assert report.passed


def test_tied_weights_are_one_parameter() -> None:
    for model in (_transformer(tie_weights=True),
                  ConvLM(V, 6, generator=0, tie_weights=True)):
        assert model.decoder.weight is model.embedding.weight
        names = [n for n, _ in model.named_parameters()]
        assert "decoder.weight" not in names and "embedding.weight" in names


# ----------------------------------------------------------------------------- evaluation
def test_conv_lm_scores_a_stream_in_chunks_exactly() -> None:
    model = ConvLM(V, 6, 2, 3, generator=0, dtype=np.float64)
    ids = np.random.default_rng(4).integers(0, V, size=70)
    whole = model.log_probs(ids).numpy()[:-1]                         # (69, V)
    want = whole[np.arange(69), ids[1:]]
    for chunk in (1, 7, 15, 100):
        np.testing.assert_allclose(model.token_log_probs(ids, chunk_size=chunk), want,
                                   rtol=1e-12, atol=1e-12)
    ppl = tr.lm.evaluate_perplexity(model.token_log_probs, ids)
    np.testing.assert_allclose(ppl, np.exp(-want.mean()), rtol=1e-12)


def test_transformer_scores_through_overlapping_windows() -> None:
    """Short streams: one window, equal to the full pass; long ones: each token is scored
    by the window of max_len ids that window_log_probs assigns it."""
    model = _transformer(max_len=10)
    ids = np.random.default_rng(5).integers(0, V, size=40)
    short = ids[:10]
    np.testing.assert_allclose(model.token_log_probs(short),
                               model.log_probs(short).numpy()[np.arange(9), short[1:]],
                               rtol=1e-12)
    scores = model.token_log_probs(ids, overlap=4)
    assert scores.shape == (39,)
    # token 20 (target index 19): windows start at 0, 6, 12, 18, ...; the window starting at
    # 12 scores input positions 16 .. 21, so input 19 is read with inputs 12 .. 19
    lp = model.log_probs(ids[12:22]).numpy()
    np.testing.assert_allclose(scores[19], lp[19 - 12, ids[20]], rtol=1e-12)
    with pytest.raises(ValueError, match="overlap"):
        window_log_probs(model, ids, 5, 5)


def test_lm_windows_pairs_inputs_with_their_next_ids() -> None:
    ids = np.arange(100) * 3
    x, y = lm_windows(ids, 8, 12, generator=0)
    assert x.shape == y.shape == (8, 12)
    np.testing.assert_array_equal(y, x + 3)
    np.testing.assert_array_equal(np.diff(x, axis=1), 3)
    again, _ = lm_windows(ids, 8, 12, generator=0)
    np.testing.assert_array_equal(x, again)
    with pytest.raises(ValueError, match="needs a stream of at least 13 ids"):
        lm_windows(np.arange(12), 2, 12)
    with pytest.raises(ValueError, match="batch_size"):
        lm_windows(ids, 0, 3)


def test_models_train_on_windows() -> None:
    """A few Adam steps on a periodic stream lower the loss of both models."""
    stream = np.tile(np.arange(6), 30)
    for model in (_transformer(d_model=8, max_len=16), ConvLM(V, 8, 2, 3, generator=0,
                                                             dtype=np.float64)):
        opt = tr.optim.Adam(model.parameters(), lr=0.02)
        rng = np.random.default_rng(0)
        losses = []
        for _ in range(40):
            x, y = lm_windows(stream, 8, 12, generator=rng)
            loss = lm_loss(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad()
            losses.append(loss.item())
        assert losses[-1] < 0.25 * losses[0], (type(model).__name__, losses[::10])


def test_bad_arguments_are_refused_by_name() -> None:
    with pytest.raises(ValueError, match="positional must be one of"):
        TransformerLM(V, 8, positional="rotary")
    with pytest.raises(ValueError, match="d_model"):
        TransformerLM(V, 0)
    with pytest.raises(ValueError, match="divisible"):
        TransformerLM(V, 6, nhead=4)
    with pytest.raises(ValueError, match="ConvLM: channels"):
        ConvLM(V, 0)
    with pytest.raises(ValueError, match=r"expected token ids of shape \(N, T\)"):
        ConvLM(V, 4)(np.zeros(5, dtype=np.int64))
    with pytest.raises(ValueError, match="max_len = 24"):
        _transformer()(np.zeros((1, 25), dtype=np.int64))


def test_standin_device_gives_the_cpu_numbers() -> None:
    """The cache, the windowed scoring and the TCN run on the stand-in device (CuPy's rules)
    and give the CPU's numbers bit for bit."""
    ids = np.random.default_rng(6).integers(0, V, size=30)
    for make in (lambda: _transformer(max_len=12),
                 lambda: ConvLM(V, 6, 2, 3, generator=0, dtype=np.float64)):
        cpu, dev = make(), make().to("standin")
        np.testing.assert_array_equal(dev.token_log_probs(ids), cpu.token_log_probs(ids))
        lc, sc = cpu.prime(ids[:4])
        ld, sd = dev.prime(ids[:4])
        for token in ids[4:10]:
            lc, sc = cpu.advance(int(token), sc)
            ld, sd = dev.advance(int(token), sd)
            np.testing.assert_array_equal(ld, lc)
