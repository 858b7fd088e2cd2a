"""Sequence models on devices: Seq2Seq, decoding, language models, classifiers and taggers.

Each test builds the same seeded model twice, keeps one on the CPU and moves the other with
``.to(device)``, and compares with :func:`assert_same` every output, loss, state and
parameter gradient, in float64 and float32 where the dtype matters.

Where the data meets the device
-------------------------------
Batches come from :mod:`tinygrad_rnn.data` as host NumPy arrays and are passed to the models
as they are, on every device: the models read ids and lengths on the host (they steer shapes,
checks and the recurrent layers), the embedding lookups copy the ids to the device, the losses
copy the targets, and masks built from the lengths are copied once per batch. Nothing in a
test copies a batch by hand, so a model that forgot a copy (or made an implicit one) fails on
the stand-in, which refuses host operands and implicit device -> host conversions.

Decoding and generation run their loops on the host, copying one small thing per step
explicitly (the chosen ids, or a beam's log-probabilities, or the next-token logits); sampling
draws its random numbers on the host, so a seed gives the same tokens on every device.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest

import tinygrad_rnn as tr
from tinygrad_rnn import decoding, nn
from tinygrad_rnn.data import PAD_ID, lm_stream_batches, pad_batch, reversal_task
from tinygrad_rnn.lm import (
    FeedForwardLM, RNNLM, evaluate_lm, evaluate_perplexity, generate, lm_loss, with_boundaries,
)

from ._devices import DEVICES, assert_on_device, assert_same, on_device

DTYPES = (np.float64, np.float32)


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------
def pair(factory: Callable[[], nn.Module], device: str) -> tuple[nn.Module, nn.Module]:
    """The same seeded model twice: one on the CPU, one moved to ``device``."""
    cpu, dev = factory(), factory().to(device)
    for p in dev.parameters():
        assert_on_device(p, device)
    return cpu, dev


def assert_grads_same(dev: nn.Module, cpu: nn.Module, device: str) -> None:
    """Every parameter gradient of ``dev`` equals that of ``cpu`` and lives on ``device``."""
    dev_params = dict(dev.named_parameters())
    assert [n for n, _ in cpu.named_parameters()] == list(dev_params)
    reached = 0
    for name, p in cpu.named_parameters():
        assert_same(dev_params[name].grad, p.grad, device, f"grad of {name}")
        reached += p.grad is not None
    assert reached, "no gradient reached any parameter"


def assert_host_same(dev_value: Any, cpu_value: Any, device: str, what: str = "") -> None:
    """Host results (decoded scores, perplexities): exactly equal on the stand-in, within
    float64 1e-10 on a GPU."""
    got, want = np.asarray(dev_value), np.asarray(cpu_value)
    assert type(dev_value) is type(cpu_value), what
    if device == "standin":
        np.testing.assert_array_equal(got, want, err_msg=what)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10, err_msg=what)


def reversal_batch(n: int = 4) -> tuple[Any, int]:
    """A padded host batch of the string-reversal task and the vocabulary size."""
    task = reversal_task(20, 5, 5, min_len=2, max_len=5, generator=1)
    return task.batch(task.train[:n]), len(task.vocab)


# --------------------------------------------------------------------------------------------
# Seq2Seq
# --------------------------------------------------------------------------------------------
SEQ2SEQ = [  # (decoder, cell, score, bidirectional)
    ("init", "gru", None, True),
    ("input", "lstm", None, True),
    ("output", "rnn", None, False),
    ("bahdanau", "gru", None, True),
    ("bahdanau", "lstm", "scaled_dot", True),
    ("luong", "gru", None, True),
    ("luong", "lstm", "dot", True),
]


def seq2seq_factory(decoder: str, cell: str, score: str | None, bidirectional: bool, V: int,
                    dtype: Any) -> Callable[[], nn.Module]:
    return lambda: nn.Seq2Seq(V, V, emb=5, hidden=6, cell=cell, decoder=decoder, score=score,
                              bidirectional=bidirectional, dtype=dtype, generator=3)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("decoder,cell,score,bidirectional", SEQ2SEQ)
def test_seq2seq_matches_cpu(decoder, cell, score, bidirectional, dtype, device):
    """Teacher forcing on a padded batch: logits, attention weights, the loss and every
    parameter gradient."""
    batch, V = reversal_batch()
    cpu, dev = pair(seq2seq_factory(decoder, cell, score, bidirectional, V, dtype), device)
    args = (batch.src, batch.src_lengths, batch.tgt_in)
    with tr.no_grad():
        out_cpu, out_dev = cpu(*args), dev(*args)
    assert_same(out_dev[0], out_cpu[0], device, "logits")
    assert_same(out_dev[1], out_cpu[1], device, "attention weights")
    if out_cpu[1] is not None:
        padded = ~(np.arange(batch.src.shape[1]) < batch.src_lengths[:, None])
        assert np.all(out_dev[1].numpy()[np.broadcast_to(padded[:, None, :],
                                                          out_cpu[1].shape)] == 0.0)
    loss_cpu = cpu.loss(*args, batch.tgt_out)
    loss_dev = dev.loss(*args, batch.tgt_out)
    assert_same(loss_dev, loss_cpu, device, "loss")
    loss_cpu.backward()
    loss_dev.backward()
    assert_grads_same(dev, cpu, device)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("decoder", ["bahdanau", "luong"])
def test_seq2seq_scheduled_sampling_matches_cpu(decoder, device):
    """teacher_forcing_ratio < 1: the coin flips come from the host generator and the fed-back
    predictions from the device's argmax, so both copies feed the same tokens; the targets
    are given as a Tensor on the device."""
    batch, V = reversal_batch()
    cpu, dev = pair(seq2seq_factory(decoder, "gru", None, True, V, np.float64), device)
    args = (batch.src, batch.src_lengths, batch.tgt_in)
    loss_cpu = cpu.loss(*args, batch.tgt_out, teacher_forcing_ratio=0.4, generator=5)
    loss_dev = dev.loss(*args, tr.tensor(batch.tgt_out, device=device),
                        teacher_forcing_ratio=0.4, generator=5)
    assert_same(loss_dev, loss_cpu, device, "loss")
    loss_cpu.backward()
    loss_dev.backward()
    assert_grads_same(dev, cpu, device)


@pytest.mark.parametrize("device", DEVICES)
def test_seq2seq_reorder_moves_rows_on_device(device):
    """reorder (beam search's back-pointers) takes host indices and keeps every field of the
    state and memory, the padding mask included, on the device."""
    batch, V = reversal_batch()
    _, dev = pair(seq2seq_factory("luong", "lstm", None, True, V, np.float64), device)
    with tr.no_grad():
        state, memory = dev.encode(batch.src, batch.src_lengths)
    index = np.array([3, 0, 0])
    for before, after in ((state, dev.reorder(state, index)),
                          (memory, dev.reorder(memory, index))):
        for field_before, field_after in zip(before, after):
            if field_before is None:
                assert field_after is None
                continue
            assert_on_device(field_after, device)
            want = (field_before.numpy() if isinstance(field_before, tr.Tensor)
                    else field_before.get())[index]
            got = field_after.numpy() if isinstance(field_after, tr.Tensor) else \
                field_after.get()
            np.testing.assert_array_equal(got, want)


# --------------------------------------------------------------------------------------------
# decoding
# --------------------------------------------------------------------------------------------
def decode_model(decoder: str, cell: str, V: int) -> Callable[[], nn.Module]:
    """A float64 Seq2Seq whose output layer is scaled up, so the log-probabilities are spread
    apart (no near-ties for the GPU's rounding to flip)."""
    def make() -> nn.Module:
        model = nn.Seq2Seq(V, V, emb=5, hidden=6, cell=cell, decoder=decoder,
                           dtype=np.float64, generator=2)
        with tr.no_grad():
            model.out.weight.mul_(3.0)
        return model
    return make


def assert_decoded_same(dev: decoding.DecodeResult, cpu: decoding.DecodeResult,
                        device: str) -> None:
    assert len(dev.sequences) == len(cpu.sequences)
    for i, (a, b) in enumerate(zip(dev.sequences, cpu.sequences)):
        np.testing.assert_array_equal(a, b, err_msg=f"sequence {i}")
        assert a.dtype == np.int64
    assert_host_same(dev.scores, cpu.scores, device, "scores")
    np.testing.assert_array_equal(dev.finished, cpu.finished)
    if cpu.attention is None:
        assert dev.attention is None
    else:
        for i, (a, b) in enumerate(zip(dev.attention, cpu.attention)):
            assert_host_same(a, b, device, f"attention {i}")


DECODERS = [
    ("greedy", lambda m, b: decoding.greedy_decode(m, b.src, b.src_lengths, max_len=6)),
    ("sample", lambda m, b: decoding.sample_decode(m, b.src, b.src_lengths, max_len=6,
                                                   temperature=1.5, generator=7)),
    ("sample_top_k", lambda m, b: decoding.sample_decode(m, b.src, b.src_lengths, max_len=6,
                                                         top_k=3, generator=8)),
    ("beam", lambda m, b: decoding.beam_search(m, b.src, b.src_lengths, beam_width=3,
                                               max_len=6, alpha=0.7)),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("decoder,cell", [("bahdanau", "gru"), ("luong", "lstm"),
                                          ("output", "gru")])
@pytest.mark.parametrize("name,decode", DECODERS, ids=[d[0] for d in DECODERS])
def test_decoding_matches_cpu(name, decode, decoder, cell, device):
    """Greedy, seeded sampling and beam search give the same tokens, scores and attention on
    the device as on the CPU, and leave the model on its device."""
    batch, V = reversal_batch()
    cpu, dev = pair(decode_model(decoder, cell, V), device)
    res_cpu, res_dev = decode(cpu, batch), decode(dev, batch)
    assert_decoded_same(res_dev, res_cpu, device)
    if name.startswith("sample"):          # a different seed draws different tokens
        other = decoding.sample_decode(dev, batch.src, batch.src_lengths, max_len=6,
                                       temperature=1.5, generator=99)
        assert any(not np.array_equal(a, b) for a, b in zip(other.sequences,
                                                            res_dev.sequences))
    for p in dev.parameters():
        assert_on_device(p, device)


# --------------------------------------------------------------------------------------------
# language models
# --------------------------------------------------------------------------------------------
TEXT_IDS = np.random.default_rng(0).integers(4, 12, 130)            # a host id stream, V = 12


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("cell,tied,dropout", [("lstm", True, 0.0), ("gru", False, 0.3),
                                               ("rnn", False, 0.0)])
def test_rnnlm_windows_match_cpu(cell, tied, dropout, dtype, device):
    """Two stateful windows of tr.data's stream batches (state from init_state on the device,
    carried and detached), in training mode (dropout masks from the host generator): logits,
    states, losses and gradients, the tied matrix's summed gradient included."""
    def make() -> nn.Module:
        return RNNLM(12, 8, 8, num_layers=2, cell=cell, dropout=dropout, tie_weights=tied,
                     dtype=dtype, generator=4)

    cpu, dev = pair(make, device)
    if tied:
        assert dev.decoder.weight is dev.embedding.weight
    state_cpu, state_dev = cpu.init_state(3), dev.init_state(3)
    assert_same(state_dev, state_cpu, device, "init_state")
    windows = list(lm_stream_batches(TEXT_IDS, batch_size=3, bptt_len=9))[:2]
    for x, y in windows:
        logits_cpu, state_cpu = cpu(x, state_cpu)
        logits_dev, state_dev = dev(x, state_dev)
        assert_same(logits_dev, logits_cpu, device, "logits")
        assert_same(state_dev, state_cpu, device, "state")
        loss_cpu, loss_dev = lm_loss(logits_cpu, y), lm_loss(logits_dev, y)
        assert_same(loss_dev, loss_cpu, device, "loss")
        loss_cpu.backward()
        loss_dev.backward()
        assert_grads_same(dev, cpu, device)
        state_cpu = tuple(s.detach() for s in state_cpu) if cell == "lstm" else \
            state_cpu.detach()
        state_dev = tuple(s.detach() for s in state_dev) if cell == "lstm" else \
            state_dev.detach()


@pytest.mark.parametrize("device", DEVICES)
def test_rnnlm_padded_sentences_match_cpu(device):
    """A pad_batch of sentences with lengths; the padding is ignored by the loss."""
    cpu, dev = pair(lambda: RNNLM(12, 6, 7, cell="gru", padding_idx=PAD_ID,
                                  dtype=np.float64, generator=1), device)
    sents = with_boundaries([TEXT_IDS[:5], TEXT_IDS[5:7], TEXT_IDS[7:11]])
    padded, lengths, _ = pad_batch(sents)
    x, y = padded[:, :-1], padded[:, 1:]
    results = []
    for model in (cpu, dev):
        logits, state = model(x, None, lengths - 1)
        lm_loss(logits, y, ignore_index=PAD_ID).backward()
        results.append((logits, state))
    assert_same(results[1], results[0], device, "logits, state")
    assert_grads_same(dev, cpu, device)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_feedforward_lm_matches_cpu(dtype, device):
    cpu, dev = pair(lambda: FeedForwardLM(12, 3, 4, 10, direct=True, dropout=0.2,
                                          dtype=dtype, generator=6), device)
    contexts, targets = cpu.contexts(TEXT_IDS[:40])
    results = []
    for model in (cpu, dev):
        logits = model(contexts)
        loss = tr.functional.cross_entropy(logits, targets)
        loss.backward()
        results.append((logits, loss))
    assert_same(results[1], results[0], device, "logits, loss")
    assert_grads_same(dev, cpu, device)


LMS = {
    "rnnlm_tied": lambda: RNNLM(12, 8, 8, cell="lstm", tie_weights=True, dtype=np.float64,
                                generator=2),
    "rnnlm_untied": lambda: RNNLM(12, 6, 8, cell="gru", dtype=np.float64, generator=3),
    "feedforward": lambda: FeedForwardLM(12, 2, 4, 9, dtype=np.float64, generator=4),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("lm", list(LMS))
def test_perplexity_evaluation_matches_cpu(lm, device):
    """evaluate_lm with both model_fn forms (token_log_probs, in chunks, and log_probs) and
    evaluate_perplexity on one stream and on a list of sentences: the same NLL sum."""
    cpu, dev = pair(LMS[lm], device)
    sentences = with_boundaries([TEXT_IDS[:6], TEXT_IDS[6:15], TEXT_IDS[15:18]])
    for data in (TEXT_IDS[:50], sentences):
        ev_cpu = evaluate_lm(lambda ids: cpu.token_log_probs(ids, chunk_size=7), data)
        ev_dev = evaluate_lm(lambda ids: dev.token_log_probs(ids, chunk_size=7), data)
        assert ev_cpu.num_tokens == ev_dev.num_tokens
        assert_host_same(ev_dev.nll_sum, ev_cpu.nll_sum, device, "token_log_probs NLL")
        with tr.no_grad():
            full_cpu = evaluate_lm(cpu.log_probs, data)
            full_dev = evaluate_lm(dev.log_probs, data)
        assert_host_same(full_dev.nll_sum, full_cpu.nll_sum, device, "log_probs NLL")
        assert_host_same(evaluate_perplexity(dev.token_log_probs, data),
                         evaluate_perplexity(cpu.token_log_probs, data), device, "perplexity")
        assert full_dev.perplexity > 1.0


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("lm", list(LMS))
@pytest.mark.parametrize("strategy,top_k", [("greedy", None), ("sample", None),
                                            ("sample", 4)])
def test_generate_matches_cpu(strategy, top_k, lm, device):
    """tr.lm.generate: the same ids (a seed gives the same draws on every device) and the
    same log-probabilities; generation stops at eos_id on both."""
    cpu, dev = pair(LMS[lm], device)
    kwargs = dict(strategy=strategy, temperature=1.3, top_k=top_k, generator=11,
                  return_log_probs=True)
    ids_cpu, lp_cpu = generate(cpu, TEXT_IDS[:4], 12, **kwargs)
    ids_dev, lp_dev = generate(dev, TEXT_IDS[:4], 12, **kwargs)
    np.testing.assert_array_equal(ids_dev, ids_cpu)
    assert_host_same(lp_dev, lp_cpu, device, "log-probabilities")
    stop = int(ids_cpu[2])
    short_cpu = generate(cpu, TEXT_IDS[:4], 12, eos_id=stop, **kwargs)[0]
    short_dev = generate(dev, TEXT_IDS[:4], 12, eos_id=stop, **kwargs)[0]
    np.testing.assert_array_equal(short_dev, short_cpu)
    assert short_dev[-1] == stop and len(short_dev) <= 3


# --------------------------------------------------------------------------------------------
# classification and tagging
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("cell,pooling,bidirectional", [("lstm", "last", True),
                                                        ("gru", "mean", False),
                                                        ("rnn", "mean", True)])
def test_sequence_classifier_matches_cpu(cell, pooling, bidirectional, dtype, device):
    cpu, dev = pair(lambda: nn.SequenceClassifier(12, 5, 6, num_classes=3, cell=cell,
                                                  pooling=pooling, bidirectional=bidirectional,
                                                  dropout=0.2, padding_idx=PAD_ID, dtype=dtype,
                                                  generator=7), device)
    ids, lengths, _ = pad_batch([TEXT_IDS[:4], TEXT_IDS[4:10], TEXT_IDS[10:12]])
    labels = np.array([0, 2, 1])
    results = []
    for model in (cpu, dev):
        logits = model(ids, lengths)
        loss = model.loss(ids, labels, lengths)
        loss.backward()
        results.append((logits, loss))
    assert_same(results[1], results[0], device, "logits, loss")
    assert_grads_same(dev, cpu, device)
    np.testing.assert_array_equal(dev.predict(ids, lengths), cpu.predict(ids, lengths))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("tags_on_device", [False, True])
def test_sequence_tagger_matches_cpu(tags_on_device, dtype, device):
    """Per-step logits, the loss over the valid steps (host tags, or a tags Tensor on the
    device whose padding holds arbitrary tags) and every gradient; predict's padding."""
    cpu, dev = pair(lambda: nn.SequenceTagger(12, 5, 6, num_tags=4, cell="gru",
                                              dtype=dtype, generator=9), device)
    ids, lengths, mask = pad_batch([TEXT_IDS[:4], TEXT_IDS[4:10], TEXT_IDS[10:12]])
    tags = np.where(mask, ids % 4, 3)                    # padding holds tag 3, not -100
    results = []
    for model, on in ((cpu, None), (dev, device)):
        given = tr.tensor(tags, device=on) if tags_on_device else tags
        logits = model(ids, lengths)
        loss = model.loss(ids, given, lengths)
        loss.backward()
        results.append((logits, loss))
    assert_same(results[1], results[0], device, "logits, loss")
    assert_grads_same(dev, cpu, device)
    pred = dev.predict(ids, lengths)
    np.testing.assert_array_equal(pred, cpu.predict(ids, lengths))
    assert np.all(pred[~mask] == nn.classify.IGNORE_INDEX)


# --------------------------------------------------------------------------------------------
# lengths are read on the host by every model that takes them
# --------------------------------------------------------------------------------------------
def _lengths_consumers(V: int) -> dict[str, Callable[[Any, Any, str], Any]]:
    """Each model or function that takes sequence lengths, called on (ids, lengths, device)."""
    def classifier(ids, lengths, device):
        model = nn.SequenceClassifier(V, 5, 6, num_classes=3, generator=7).to(device)
        return model(ids, lengths)

    def tagger(ids, lengths, device):
        model = nn.SequenceTagger(V, 5, 6, num_tags=3, generator=7).to(device)
        return model(ids, lengths)

    def seq2seq(ids, lengths, device):
        model = seq2seq_factory("luong", "gru", None, True, V, np.float64)().to(device)
        return model(ids, lengths, ids)

    def greedy(ids, lengths, device):
        model = seq2seq_factory("bahdanau", "gru", None, True, V, np.float64)().to(device)
        return decoding.greedy_decode(model, ids, lengths, max_len=3)

    return {"SequenceClassifier": classifier, "SequenceTagger": tagger, "Seq2Seq": seq2seq,
            "greedy_decode": greedy}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("owner", ["SequenceClassifier", "SequenceTagger", "Seq2Seq",
                                   "greedy_decode"])
@pytest.mark.parametrize("as_tensor", [True, False], ids=["tensor", "raw-array"])
def test_lengths_on_the_device_are_refused_by_every_model(as_tensor, owner, device):
    """As ``RNN(..., lengths=)``: lengths on a device raise a TypeError naming the model and
    the device and asking for the explicit copy, instead of being copied back silently; the
    copied lengths then work."""
    batch, V = reversal_batch()
    call = _lengths_consumers(V)[owner]
    host = batch.src_lengths
    lengths = on_device(tr.tensor(host) if as_tensor else host, device)
    with pytest.raises(TypeError, match=f"{owner}: .*lengths must be on the host.*{device}"):
        call(batch.src, lengths, device)
    explicit = lengths.numpy() if as_tensor else lengths.get()  # the documented copy
    call(batch.src, explicit, device)
    call(batch.src, tr.tensor(host), device)  # a CPU Tensor is host data


@pytest.mark.parametrize("owner", ["SequenceClassifier", "SequenceTagger", "Seq2Seq",
                                   "greedy_decode"])
def test_fractional_lengths_are_an_error_not_truncated(owner):
    batch, V = reversal_batch()
    call = _lengths_consumers(V)[owner]
    with pytest.raises(ValueError, match=f"{owner}: .*lengths must be integers, got dtype "
                                         f"float64"):
        call(batch.src, batch.src_lengths + 0.5, "cpu")
