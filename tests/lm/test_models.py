"""Neural language models (tinygrad_rnn/lm/models.py): RNNLM and the feed-forward LM.

* shapes and states for every cell; ``init_state`` is the zero state;
* float64 gradient checks of the feed-forward LM (with and without direct connections) and of
  tied-weights RNNLMs; the tied parameter's gradient is the sum of the embedding's and the
  decoder's gradients of an untied copy with the same values;
* the feed-forward LM computes eqs. (F1)-(F3) (recomputed in NumPy); ``make_contexts``
  left-pads with ``<s>``;
* padded batches with ``lengths``: valid logits and final states equal those of each sequence
  alone, the state carries on, and padding changes neither the loss nor any gradient;
* a model with uniform output has perplexity V under the shared evaluation, through both
  scoring paths; chunked scoring equals whole-sequence scoring; ``lm_loss`` with
  ``reduction='sum'`` equals the evaluation's NLL;
* fused and autograd engines agree; float32 agrees with float64; dropout only in training;
* training with ``train_stream`` over ``lm_stream`` (the docstring example) and clear errors.
"""
from __future__ import annotations

import copy
import doctest
import importlib
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tinygrad_rnn as tr
from tinygrad_rnn.data import BOS_ID, PAD_ID, pad_batch
from tinygrad_rnn.lm import (
    FeedForwardLM, RNNLM, evaluate_lm, evaluate_perplexity, lm_loss, make_contexts,
)
from tinygrad_rnn.testing import check_module

models_module = importlib.import_module("tinygrad_rnn.lm.models")
CELLS = ["rnn", "gru", "lstm"]


def test_docstring_examples() -> None:
    result = doctest.testmod(models_module)
    assert result.attempted > 0 and result.failed == 0


def _ids(rng: np.random.Generator, shape: tuple, V: int) -> np.ndarray:
    return rng.integers(0, V, size=shape).astype(np.int64)


# ------------------------------------------------------------------------------ shapes
@pytest.mark.parametrize("cell", CELLS)
@pytest.mark.parametrize("num_layers", [1, 2])
def test_rnnlm_shapes_and_state(cell: str, num_layers: int) -> None:
    V, D, H, N, T = 11, 5, 7, 3, 4
    model = RNNLM(V, D, H, num_layers=num_layers, cell=cell, generator=0)
    ids = _ids(np.random.default_rng(0), (N, T), V)
    logits, state = model(ids)
    assert logits.shape == (N, T, V) and logits.dtype == np.float32
    zero = model.init_state(N)
    if cell == "lstm":
        assert isinstance(state, tuple) and len(state) == 2
        assert all(s.shape == (num_layers, N, H) for s in state)
        assert all(float(np.abs(z.numpy()).max()) == 0 for z in zero)
    else:
        assert state.shape == (num_layers, N, H)
        assert zero.shape == (num_layers, N, H) and float(np.abs(zero.numpy()).max()) == 0
    again, _ = model(ids, zero)                     # init_state is the None state
    assert np.array_equal(again.numpy(), logits.numpy())
    lp = model.log_probs(ids[0])
    assert lp.shape == (T, V)
    np.testing.assert_allclose(np.exp(lp.numpy()).sum(-1), 1.0, rtol=1e-5)


def test_rnnlm_float32_matches_float64() -> None:
    V, ids = 9, _ids(np.random.default_rng(1), (2, 6), 9)
    m32 = RNNLM(V, 6, 6, cell="lstm", tie_weights=True, generator=3)
    m64 = RNNLM(V, 6, 6, cell="lstm", tie_weights=True, dtype=np.float64, generator=3)
    out32, _ = m32(ids)
    out64, _ = m64(ids)
    assert out32.dtype == np.float32 and out64.dtype == np.float64
    np.testing.assert_allclose(out32.numpy(), out64.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("cell", CELLS)
def test_fused_and_autograd_engines_agree(cell: str) -> None:
    V, ids = 8, _ids(np.random.default_rng(2), (3, 5), 8)
    y = _ids(np.random.default_rng(3), (3, 5), 8)
    grads = []
    for engine in ("fused", "autograd"):
        model = RNNLM(V, 4, 5, num_layers=2, cell=cell, engine=engine, dtype=np.float64,
                      generator=4)
        logits, _ = model(ids)
        lm_loss(logits, y).backward()
        grads.append((logits.numpy(), [p.grad.array.copy() for p in model.parameters()]))
    np.testing.assert_allclose(grads[0][0], grads[1][0], rtol=1e-10, atol=1e-12)
    for g_fused, g_auto in zip(grads[0][1], grads[1][1]):
        np.testing.assert_allclose(g_fused, g_auto, rtol=1e-9, atol=1e-12)


# ------------------------------------------------------------------------- weight tying
def test_tied_weights_share_one_parameter() -> None:
    V, H = 10, 6
    tied = RNNLM(V, H, H, cell="gru", tie_weights=True, generator=0)
    untied = RNNLM(V, H, H, cell="gru", tie_weights=False, generator=0)
    assert tied.decoder.weight is tied.embedding.weight
    params = list(tied.parameters())
    assert sum(p is tied.embedding.weight for p in params) == 1
    assert len(params) == len(list(untied.parameters())) - 1
    assert tied.num_parameters() == untied.num_parameters() - V * H
    keys = tied.state_dict().keys()
    assert "embedding.weight" in keys and "decoder.weight" in keys   # torch's layout
    # an optimizer step moves the one matrix, seen from both places
    opt = tr.optim.SGD(tied.parameters(), lr=0.5)
    logits, _ = tied(np.array([[4, 5, 6]]))
    lm_loss(logits, np.array([[5, 6, 7]])).backward()
    before = tied.embedding.weight.numpy().copy()
    opt.step()
    assert not np.array_equal(before, tied.embedding.weight.numpy())
    assert tied.decoder.weight is tied.embedding.weight


def test_padding_row_is_zero_and_gets_no_lookup_gradient() -> None:
    ids, y = np.array([[4, PAD_ID, 5, PAD_ID]]), np.array([[5, 6, 7, 4]])
    untied = RNNLM(8, 4, 4, padding_idx=PAD_ID, dtype=np.float64, generator=0)
    assert np.abs(untied.embedding.weight.numpy()[PAD_ID]).max() == 0
    logits, _ = untied(ids)
    lm_loss(logits, y).backward()
    assert np.abs(untied.embedding.weight.grad[PAD_ID]).max() == 0
    assert np.abs(untied.embedding.weight.grad[4]).max() > 0
    # tied, the row is still an output class: the decoder use gives it a gradient
    tied = RNNLM(8, 4, 4, padding_idx=PAD_ID, tie_weights=True, dtype=np.float64,
                 generator=0)
    logits, _ = tied(ids)
    lm_loss(logits, y).backward()
    assert np.abs(tied.embedding.weight.grad[PAD_ID]).max() > 0      # p(<pad>) h_t


def test_tie_weights_needs_equal_sizes() -> None:
    with pytest.raises(ValueError, match=r"embedding_dim=4, hidden_size=6"):
        RNNLM(10, 4, 6, tie_weights=True)


@pytest.mark.parametrize("cell", CELLS)
def test_tied_gradient_is_the_sum_of_both_uses(cell: str) -> None:
    """dL/dE of the tied model = (dL/dE)_embedding + (dL/dW)_decoder of an untied copy."""
    V, H = 9, 5
    rng = np.random.default_rng(7)
    ids, y = _ids(rng, (2, 6), V), _ids(rng, (2, 6), V)
    tied = RNNLM(V, H, H, cell=cell, tie_weights=True, dtype=np.float64, generator=1)
    untied = RNNLM(V, H, H, cell=cell, tie_weights=False, dtype=np.float64, generator=1)
    untied.load_state_dict(tied.state_dict())       # the same values in both matrices
    assert untied.decoder.weight is not untied.embedding.weight
    np.testing.assert_array_equal(untied.decoder.weight.numpy(), tied.embedding.weight.numpy())
    for model in (tied, untied):
        logits, _ = model(ids)
        lm_loss(logits, y).backward()
    g_emb, g_dec = untied.embedding.weight.grad, untied.decoder.weight.grad
    assert np.abs(g_emb).max() > 0 and np.abs(g_dec).max() > 0   # both uses contribute
    np.testing.assert_allclose(tied.embedding.weight.grad, g_emb + g_dec, rtol=1e-12,
                               atol=1e-14)
    # every other parameter has the same gradient in both models
    other = dict(untied.named_parameters())
    for name, p in tied.named_parameters():
        if name != "embedding.weight":
            np.testing.assert_allclose(p.grad, other[name].grad, rtol=1e-12, atol=1e-14)


# ------------------------------------------------------------------------- gradient checks
@pytest.mark.parametrize("cell", CELLS)
def test_gradcheck_tied_rnnlm(cell: str) -> None:
    V, H = 7, 4
    rng = np.random.default_rng(11)
    ids, y = _ids(rng, (2, 5), V), _ids(rng, (2, 5), V)
    model = RNNLM(V, H, H, num_layers=2 if cell == "lstm" else 1, cell=cell,
                  tie_weights=True, init_range=0.5, dtype=np.float64, generator=5)

    class Loss(tr.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lm = model

        def forward(self, ids: np.ndarray) -> tr.Tensor:
            logits, state = self.lm(ids, None)
            return lm_loss(logits, y)

    report = check_module(Loss(), ids, mode="directional", n_directions=6, seed=1)
    assert report.passed
    assert report.gradcheck is not None and report.gradcheck.passed


@pytest.mark.parametrize("direct", [False, True])
def test_gradcheck_feedforward_lm(direct: bool) -> None:
    V, n1 = 8, 3
    rng = np.random.default_rng(12)
    ctx, y = _ids(rng, (6, n1), V), _ids(rng, (6,), V)
    model = FeedForwardLM(V, n1, 3, 5, direct=direct, init_range=0.5, dtype=np.float64,
                          generator=2)

    class Loss(tr.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lm = model

        def forward(self, contexts: np.ndarray) -> tr.Tensor:
            return tr.functional.cross_entropy(self.lm(contexts), y)

    report = check_module(Loss(), ctx, mode="directional", n_directions=8, seed=2)
    assert report.passed and report.gradcheck.passed
    # and the logits themselves, every output, along random directions
    report = check_module(model, ctx, mode="directional", n_directions=4, seed=3)
    assert report.passed


# ------------------------------------------------------------------------- feed-forward LM
@pytest.mark.parametrize("direct", [False, True])
def test_feedforward_lm_computes_the_equations(direct: bool) -> None:
    V, n1, m, h = 9, 3, 4, 6
    model = FeedForwardLM(V, n1, m, h, direct=direct, dtype=np.float64, generator=0)
    ctx = _ids(np.random.default_rng(0), (5, n1), V)
    C = model.embedding.weight.numpy()
    x = C[ctx].reshape(5, n1 * m)                                  # concatenated, oldest first
    a = np.tanh(x @ model.hidden.weight.numpy().T + model.hidden.bias.numpy())
    y = a @ model.output.weight.numpy().T + model.output.bias.numpy()
    if direct:
        y = y + x @ model.direct.weight.numpy().T
        assert model.direct.bias is None
    else:
        assert model.direct is None
    np.testing.assert_allclose(model(ctx).numpy(), y, rtol=1e-12, atol=1e-14)
    # (*, n-1) contexts work too
    np.testing.assert_allclose(model(ctx.reshape(5, 1, n1)).numpy()[:, 0], y, rtol=1e-12)


def test_make_contexts_example() -> None:
    ctx, tgt = make_contexts(np.array([7, 8, 9]), 2)
    assert ctx.tolist() == [[BOS_ID, BOS_ID], [BOS_ID, 7], [7, 8]]
    assert tgt.tolist() == [7, 8, 9]


@given(ids=st.lists(st.integers(4, 30), min_size=1, max_size=25), n1=st.integers(1, 5))
def test_make_contexts_windows(ids: list, n1: int) -> None:
    ctx, tgt = make_contexts(np.array(ids), n1)
    padded = [BOS_ID] * n1 + ids
    assert ctx.shape == (len(ids), n1) and ctx.dtype == np.int64
    for i in range(len(ids)):
        assert ctx[i].tolist() == padded[i: i + n1]     # the n-1 ids before ids[i]
        assert tgt[i] == ids[i]


def test_feedforward_log_probs_rows_predict_the_next_token() -> None:
    V, n1 = 10, 2
    model = FeedForwardLM(V, n1, 3, 4, dtype=np.float64, generator=1)
    ids = np.array([4, 5, 6, 7, 8])
    rows = model.log_probs(ids).numpy()                            # (T, V)
    assert rows.shape == (5, V)
    ctx, _ = make_contexts(ids, n1)
    for t in range(4):  # row t is the distribution of ids[t + 1]
        expect = tr.functional.log_softmax(model(ctx[t + 1][None]), axis=-1).numpy()[0]
        np.testing.assert_allclose(rows[t], expect, rtol=1e-12)
    expect_last = model(np.array([[7, 8]]))                        # after the whole stream
    np.testing.assert_allclose(rows[4], tr.functional.log_softmax(expect_last).numpy()[0],
                               rtol=1e-12)
    tok = model.token_log_probs(ids, chunk_size=3)
    np.testing.assert_allclose(tok, rows[np.arange(4), ids[1:]], rtol=1e-12)


# ------------------------------------------------------------------- padding and lengths
@pytest.mark.parametrize("cell", CELLS)
def test_rnnlm_padded_batch_with_lengths_and_state_carrying(cell: str) -> None:
    V = 12
    rng = np.random.default_rng(3)
    seqs = [_ids(rng, (L,), V - 4) + 4 for L in (6, 3, 1)]
    padded, lengths, mask = pad_batch(seqs)
    model = RNNLM(V, 5, 6, num_layers=2, cell=cell, dtype=np.float64, generator=9)
    logits, state = model(padded, lengths=lengths)
    conts = [_ids(rng, (L,), V - 4) + 4 for L in (2, 4, 3)]
    cont_padded, cont_lengths, _ = pad_batch(conts)
    cont_logits, _ = model(cont_padded, state, lengths=cont_lengths)
    for n, seq in enumerate(seqs):
        alone, alone_state = model(seq[None])
        L = seq.size
        np.testing.assert_allclose(logits.numpy()[n, :L], alone.numpy()[0], rtol=1e-12,
                                   atol=1e-14)
        s_batch = state[0] if cell == "lstm" else state
        s_alone = alone_state[0] if cell == "lstm" else alone_state
        np.testing.assert_allclose(s_batch.numpy()[:, n], s_alone.numpy()[:, 0], rtol=1e-12)
        # carrying the padded batch's state on equals reading the whole sequence at once
        whole, _ = model(np.concatenate([seq, conts[n]])[None])
        np.testing.assert_allclose(cont_logits.numpy()[n, : conts[n].size],
                                   whole.numpy()[0, L:], rtol=1e-12, atol=1e-14)


def test_padding_changes_neither_loss_nor_gradients() -> None:
    V = 10
    rng = np.random.default_rng(4)
    seqs = [_ids(rng, (L,), V - 4) + 4 for L in (7, 4, 2)]
    padded, lengths, mask = pad_batch(seqs)
    x, y = padded[:, :-1], padded[:, 1:]                 # targets: PAD_ID after each end
    x_lengths = lengths - 1
    model = RNNLM(V, 4, 5, cell="lstm", dtype=np.float64, generator=2)
    results = []
    for fill in (PAD_ID, 9):
        x_fill = x.copy()
        x_fill[np.arange(x.shape[1])[None, :] >= x_lengths[:, None]] = fill
        model.zero_grad()
        logits, _ = model(x_fill, lengths=x_lengths)
        loss = lm_loss(logits, y, ignore_index=PAD_ID)
        loss.backward()
        results.append((loss.item(), [p.grad.array.copy() for p in model.parameters()]))
    assert results[0][0] == results[1][0]
    for g0, g1 in zip(results[0][1], results[1][1]):
        np.testing.assert_array_equal(g0, g1)
    # the loss is the mean NLL of the real targets only
    total = 0.0
    for seq in seqs:
        total -= model.token_log_probs(seq).sum()
    assert results[0][0] == pytest.approx(total / int((lengths - 1).sum()), rel=1e-12)


# ------------------------------------------------------------------------- evaluation
def _uniform(model: tr.nn.Module, layer: tr.nn.Linear) -> tr.nn.Module:
    """Zero the output layer: logits all 0, the uniform distribution over V."""
    tr.nn.init.zeros_(layer.weight)
    if layer.bias is not None:
        tr.nn.init.zeros_(layer.bias)
    return model


@settings(max_examples=15)
@given(V=st.integers(4, 60), T=st.integers(2, 40), seed=st.integers(0, 2**31),
       cell=st.sampled_from(CELLS))
def test_uniform_output_perplexity_is_vocab_size(V: int, T: int, seed: int,
                                                 cell: str) -> None:
    ids = np.random.default_rng(seed).integers(0, V, size=T)
    rnn = RNNLM(V, 4, 5, cell=cell, dtype=np.float64, generator=seed)
    _uniform(rnn, rnn.decoder)
    ffn = FeedForwardLM(V, 2, 3, 4, dtype=np.float64, generator=seed)
    _uniform(ffn, ffn.output)
    for model in (rnn, ffn):
        for fn in (model.token_log_probs, lambda a, m=model: m.log_probs(a)):
            result = evaluate_lm(fn, ids)
            assert result.num_tokens == T - 1
            assert abs(result.perplexity - V) <= 1e-10 * V


def test_untrained_model_is_not_uniform_but_scoring_paths_agree() -> None:
    V = 20
    ids = np.random.default_rng(0).integers(4, V, size=50)
    model = RNNLM(V, 8, 8, cell="gru", dtype=np.float64, generator=0)
    model.eval()
    by_rows = evaluate_lm(model.log_probs, ids)
    by_tokens = evaluate_lm(model.token_log_probs, ids)
    chunked = evaluate_lm(lambda a: model.token_log_probs(a, chunk_size=7), ids)
    assert by_rows.nll_sum == pytest.approx(by_tokens.nll_sum, rel=1e-12)
    assert chunked.nll_sum == pytest.approx(by_tokens.nll_sum, rel=1e-12)
    assert by_tokens.perplexity != pytest.approx(V, rel=1e-6)
    # the training loss with reduction='sum' is the evaluation's NLL
    logits, _ = model(ids[None, :-1])
    nll = lm_loss(logits, ids[None, 1:], reduction="sum").item()
    assert nll == pytest.approx(by_tokens.nll_sum, rel=1e-12)


# ------------------------------------------------------------------------- modes, dropout
def test_dropout_only_in_training_and_scoring_restores_the_mode() -> None:
    V = 10
    ids = np.random.default_rng(0).integers(0, V, size=(2, 8))
    model = RNNLM(V, 6, 6, num_layers=2, dropout=0.5, generator=0)
    a, _ = model(ids)
    b, _ = model(ids)
    assert not np.array_equal(a.numpy(), b.numpy())             # fresh masks each call
    model.token_log_probs(ids[0])
    assert all(m.training for m in model.modules())             # scoring restored the mode
    model.eval()
    c, _ = model(ids)
    d, _ = model(ids)
    assert np.array_equal(c.numpy(), d.numpy())
    scored = model.token_log_probs(ids[0])
    assert not model.training
    np.testing.assert_allclose(scored, model.log_probs(ids[0]).numpy()[np.arange(7), ids[0, 1:]],
                               rtol=1e-6)


def test_scoring_builds_no_graph() -> None:
    model = RNNLM(8, 4, 4, generator=0)
    model.token_log_probs(np.array([4, 5, 6, 7]))
    assert all(p.grad is None for p in model.parameters())
    with tr.no_grad():
        lp = model.log_probs(np.array([4, 5, 6]))
    assert not lp.requires_grad


# ------------------------------------------------------------------------- training
@pytest.mark.parametrize("cell", ["gru", "rnn"])
def test_train_stream_learns_a_periodic_stream(cell: str) -> None:
    from tinygrad_rnn.truncation import chunked
    from tinygrad_rnn.data import Vocab, lm_stream

    text = "the cat sat. " * 30
    vocab = Vocab.build(text)
    ids = vocab.encode(text)
    x, y = lm_stream(ids, batch_size=4)
    model = RNNLM(len(vocab), 12, 24, cell=cell, tie_weights=False, generator=1)
    before = evaluate_perplexity(model.token_log_probs, ids[:40])
    opt = tr.optim.Adam(model.parameters(), lr=0.02)

    def loss_fn(logits: tr.Tensor, start: int, stop: int) -> tr.Tensor:
        return lm_loss(logits, y[:, start:stop])

    result = tr.training.train_stream(model, x, loss_fn, opt, chunked(13), epochs=12,
                                      clip=1.0, progress=False, time_axis=1)
    assert result.steps == 12 * math.ceil(x.shape[1] / 13)
    after = evaluate_perplexity(model.token_log_probs, ids[:40])
    assert before > 0.5 * len(vocab)       # untrained: close to uniform
    assert after < 1.6                     # the stream is deterministic after its first word


def test_feedforward_lm_trains_with_fit_on_contexts() -> None:
    from tinygrad_rnn.data import Vocab

    text = "abacad" * 30                    # the next char is fixed by the previous two
    vocab = Vocab.build(text)
    ids = vocab.encode(text)
    model = FeedForwardLM(len(vocab), 2, 6, 16, generator=0)
    contexts, targets = model.contexts(ids)
    opt = tr.optim.Adam(model.parameters(), lr=0.05)
    before = evaluate_perplexity(model.token_log_probs, ids)
    tr.training.fit(lambda i: tr.functional.cross_entropy(model(contexts), targets), 60,
                    opt, progress=False)
    after = evaluate_perplexity(model.token_log_probs, ids)
    assert before > 0.8 * len(vocab)
    assert after < 1.1


# ------------------------------------------------------------------------------ errors
def test_token_id_out_of_range_names_id_position_and_vocab() -> None:
    model = RNNLM(6, 4, 4, generator=0)
    with pytest.raises(IndexError, match=r"id 9 at position \(1, 2\).*vocabulary size 6"):
        model(np.array([[1, 2, 3], [4, 5, 9]]))
    with pytest.raises(IndexError, match=r"id 7 at position \(3,\).*vocabulary size 6"):
        model.token_log_probs(np.array([1, 2, 3, 7]))
    ffn = FeedForwardLM(6, 2, 3, 4, generator=0)
    with pytest.raises(IndexError, match=r"id 6 at position \(1, 0\).*vocabulary size 6"):
        ffn(np.array([[1, 2], [6, 0]]))
    with pytest.raises(IndexError, match=r"id -1 at position \(2,\).*vocabulary size 6"):
        ffn.token_log_probs(np.array([1, 2, -1]))


@pytest.mark.parametrize("call, exc, match", [
    (lambda: RNNLM(10, 4, 4, cell="lstmm"), ValueError, "cell must be one of"),
    (lambda: RNNLM(10, 4, 4, dropout=1.0), ValueError, "dropout"),
    (lambda: RNNLM(0, 4, 4), ValueError, "vocab_size"),
    (lambda: RNNLM(10, 4, 4)(np.array([1, 2, 3])), ValueError, r"shape \(N, T\)"),
    (lambda: RNNLM(10, 4, 4)(np.array([[0.5, 1.0]])), TypeError, "integer"),
    (lambda: RNNLM(10, 4, 4).init_state(0), ValueError, "batch_size"),
    (lambda: FeedForwardLM(10, 0, 4, 4), ValueError, "context_size"),
    (lambda: FeedForwardLM(10, 3, 4, 4)(np.zeros((2, 2), np.int64)), ValueError,
     r"\(N, 3\).*got shape \(2, 2\)"),
    (lambda: FeedForwardLM(2, 2, 4, 4), ValueError, "bos_id 2"),
    (lambda: make_contexts(np.zeros((2, 2), np.int64), 2), ValueError, "1-D"),
    (lambda: lm_loss(tr.zeros(2, 3, 4), np.zeros((2, 2), np.int64)), ValueError,
     r"targets of shape \(2, 3\)"),
])
def test_errors(call, exc, match: str) -> None:
    with pytest.raises(exc, match=match):
        call()


def test_deepcopy_keeps_the_tie() -> None:
    model = RNNLM(8, 4, 4, tie_weights=True, generator=0)
    clone = copy.deepcopy(model)
    assert clone.decoder.weight is clone.embedding.weight
    assert clone.embedding.weight is not model.embedding.weight
