"""Seq2Seq: end-to-end float64 gradients, padding, teacher forcing and scheduled sampling."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tinygrad_rnn as tr
from tinygrad_rnn.nn.seq2seq import DECODERS, teacher_forcing_schedule

from module_helpers import swapped_parameters

V_SRC, V_TGT = 9, 7
PAD, BOS, EOS = 0, 2, 3


def make_model(decoder: str = "bahdanau", cell: str = "gru", score: str | None = None,
               bidirectional: bool = True, seed: int = 0, dtype=np.float64,
               engine: str = "fused") -> tr.nn.Seq2Seq:
    return tr.nn.Seq2Seq(V_SRC, V_TGT, 3, 4, cell=cell, bidirectional=bidirectional,
                         decoder=decoder, score=score, engine=engine, dtype=dtype,
                         generator=seed)


def make_batch(seed: int = 0):
    """A padded batch: sources of lengths 5, 2, 4; targets of lengths 3, 1, 2 (+ EOS)."""
    rng = np.random.default_rng(seed)
    src_lengths = np.array([5, 2, 4])
    src = np.full((3, 5), PAD, dtype=np.int64)
    tgt_len = np.array([3, 1, 2])
    tgt_in = np.full((3, 4), PAD, dtype=np.int64)
    tgt_out = np.full((3, 4), PAD, dtype=np.int64)
    for i in range(3):
        src[i, : src_lengths[i]] = rng.integers(4, V_SRC, src_lengths[i])
        y = rng.integers(4, V_TGT, tgt_len[i])
        tgt_in[i, 0] = BOS
        tgt_in[i, 1: tgt_len[i] + 1] = y
        tgt_out[i, : tgt_len[i]] = y
        tgt_out[i, tgt_len[i]] = EOS
    return src, src_lengths, tgt_in, tgt_out, tgt_len + 1


def grads(model: tr.nn.Module, loss: tr.Tensor) -> dict:
    model.zero_grad()
    loss.backward()
    return {n: (None if p.grad is None else np.array(p.grad))
            for n, p in model.named_parameters()}


# ------------------------------------------------------------------------ gradients
@pytest.mark.parametrize("decoder,cell,score", [
    ("bahdanau", "gru", None), ("bahdanau", "lstm", "additive"), ("luong", "gru", None),
    ("luong", "lstm", "dot"), ("init", "gru", None), ("input", "rnn", None),
    ("output", "lstm", None),
])
def test_end_to_end_gradcheck_with_padding(decoder, cell, score):
    model = make_model(decoder, cell, score, seed=1)
    src, lens, tgt_in, tgt_out, tgt_lens = make_batch(1)
    names = [n for n, _ in model.named_parameters()]
    params = [tr.Tensor(p.numpy().copy(), requires_grad=True)
              for _, p in model.named_parameters()]
    # outputs at padded target steps are excluded: they read the <pad> embedding row, whose
    # gradient is 0 by the padding_idx convention (as torch), not by calculus
    valid = (np.arange(tgt_in.shape[1])[None, :] < tgt_lens[:, None])[..., None]  # (N, T, 1)

    def fn(*ps):
        with swapped_parameters(model, dict(zip(names, ps))):
            logits, weights = model(src, lens, tgt_in)
            loss = model.loss(src, lens, tgt_in, tgt_out)
        out = [loss, logits * (0.1 * valid)]
        if weights is not None:
            out.append(weights * valid)
        return tuple(out)

    assert tr.gradcheck(fn, params, mode="directional", n_directions=6)


def test_unidirectional_autograd_engine_gradcheck():
    model = make_model("bahdanau", "gru", bidirectional=False, engine="autograd", seed=2)
    src, lens, tgt_in, tgt_out, _ = make_batch(2)
    names = [n for n, _ in model.named_parameters()]
    params = [tr.Tensor(p.numpy().copy(), requires_grad=True)
              for _, p in model.named_parameters()]

    def fn(*ps):
        with swapped_parameters(model, dict(zip(names, ps))):
            return model.loss(src, lens, tgt_in, tgt_out)

    assert tr.gradcheck(fn, params, mode="directional", n_directions=4)


def test_float32_matches_float64():
    m64 = make_model("luong", "lstm", seed=3)
    m32 = make_model("luong", "lstm", seed=3, dtype=np.float32)
    m32.load_state_dict({k: np.asarray(v).astype(np.float32)
                         for k, v in m64.state_dict().items()})
    src, lens, tgt_in, tgt_out, _ = make_batch(3)
    l64, l32 = m64.loss(src, lens, tgt_in, tgt_out), m32.loss(src, lens, tgt_in, tgt_out)
    assert l32.dtype == np.float32
    np.testing.assert_allclose(l32.item(), l64.item(), rtol=1e-5)
    g64, g32 = grads(m64, l64), grads(m32, l32)
    for name in g64:
        assert g32[name].dtype == np.float32
        np.testing.assert_allclose(g32[name], g64[name], rtol=2e-3, atol=2e-5, err_msg=name)


# ------------------------------------------------------------------------ shapes, masks
@pytest.mark.parametrize("decoder", DECODERS)
def test_shapes_and_attention_weights(decoder):
    model = make_model(decoder, seed=4)
    src, lens, tgt_in, _, _ = make_batch(4)
    logits, weights = model(src, lens, tgt_in)
    assert logits.shape == (3, 4, V_TGT)
    if decoder in ("bahdanau", "luong"):
        w = weights.numpy()
        assert w.shape == (3, 4, 5)
        pad = np.arange(5)[None, :] >= lens[:, None]
        assert np.all(w[np.broadcast_to(pad[:, None, :], w.shape)] == 0.0)
        np.testing.assert_allclose(w.sum(-1), 1.0, rtol=1e-12)
    else:
        assert weights is None


@given(seed=st.integers(0, 10 ** 6), decoder=st.sampled_from(DECODERS),
       cell=st.sampled_from(["gru", "lstm"]))
def test_loss_and_grads_ignore_padding(seed, decoder, cell):
    """Changing padded source tokens and padded decoder inputs changes nothing."""
    model = make_model(decoder, cell, seed=seed % 7)
    src, lens, tgt_in, tgt_out, tgt_lens = make_batch(seed)
    rng = np.random.default_rng(seed)
    src2, tgt_in2 = src.copy(), tgt_in.copy()
    src_pad = np.arange(src.shape[1])[None, :] >= lens[:, None]
    tgt_pad = np.arange(tgt_in.shape[1])[None, :] >= tgt_lens[:, None]
    src2[src_pad] = rng.integers(1, V_SRC, int(src_pad.sum()))
    tgt_in2[tgt_pad] = rng.integers(1, V_TGT, int(tgt_pad.sum()))
    assert (src2 != src).any() and (tgt_in2 != tgt_in).any()
    l1 = model.loss(src, lens, tgt_in, tgt_out)
    g1 = grads(model, l1)
    l2 = model.loss(src2, lens, tgt_in2, tgt_out)
    g2 = grads(model, l2)
    assert l1.item() == l2.item()
    for name in g1:
        np.testing.assert_array_equal(g1[name], g2[name], err_msg=name)


@pytest.mark.parametrize("decoder", ["bahdanau", "luong", "output"])
def test_padded_row_equals_row_alone(decoder):
    model = make_model(decoder, "lstm", seed=5)
    src, lens, tgt_in, _, tgt_lens = make_batch(5)
    logits, weights = model(src, lens, tgt_in)
    i = 1                                                 # the shortest source
    alone, w_alone = model(src[i: i + 1, : lens[i]], lens[i: i + 1],
                           tgt_in[i: i + 1, : tgt_lens[i]])
    np.testing.assert_allclose(logits.numpy()[i, : tgt_lens[i]], alone.numpy()[0],
                               rtol=1e-10, atol=1e-12)
    if weights is not None:
        np.testing.assert_allclose(weights.numpy()[i, : tgt_lens[i], : lens[i]],
                                   w_alone.numpy()[0], rtol=1e-10, atol=1e-12)


def test_loss_matches_manual_cross_entropy():
    model = make_model("bahdanau", seed=6)
    src, lens, tgt_in, tgt_out, _ = make_batch(6)
    logits, _ = model(src, lens, tgt_in)
    z = logits.numpy()
    logp = z - np.log(np.exp(z - z.max(-1, keepdims=True)).sum(-1, keepdims=True)) \
        - z.max(-1, keepdims=True)
    real = tgt_out != PAD
    picked = np.take_along_axis(logp, tgt_out[..., None], axis=-1)[..., 0]
    expected = -picked[real].mean()
    np.testing.assert_allclose(model.loss(src, lens, tgt_in, tgt_out).item(), expected,
                               rtol=1e-12)


# ------------------------------------------------------------------------ teacher forcing
def manual_teacher_forcing(model, src, lens, tgt_in):
    state, memory = model.encode(src, lens)
    out = []
    for t in range(tgt_in.shape[1]):
        logits, state, _ = model.decode_step(tgt_in[:, t], state, memory)
        out.append(logits.numpy())
    return np.stack(out, axis=1)


@pytest.mark.parametrize("decoder", DECODERS)
def test_ratio_one_is_teacher_forcing(decoder):
    model = make_model(decoder, seed=7)
    src, lens, tgt_in, _, _ = make_batch(7)
    plain, _ = model(src, lens, tgt_in)
    ratio1, _ = model(src, lens, tgt_in, teacher_forcing_ratio=1.0, generator=123)
    np.testing.assert_array_equal(plain.numpy(), ratio1.numpy())
    np.testing.assert_allclose(plain.numpy(), manual_teacher_forcing(model, src, lens, tgt_in),
                               rtol=1e-13, atol=1e-14)


@pytest.mark.parametrize("decoder", ["init", "bahdanau", "luong"])
def test_ratio_zero_feeds_back_predictions(decoder):
    """A model whose argmax is always token k: with ratio 0 the decoder must read k at every
    step after the first, i.e. behave as teacher forcing on [BOS, k, k, ...]."""
    model = make_model(decoder, seed=8)
    k = 5
    with tr.no_grad():
        model.out.weight.mul_(0.01)                       # logits dominated by the bias
        model.out.bias.fill_(0.0)
        model.out.bias[k] = 5.0
    src, lens, tgt_in, _, _ = make_batch(8)
    tgt_in[:, 1:] = np.where(tgt_in[:, 1:] == k, 4, tgt_in[:, 1:])   # no k in the inputs
    fed = tgt_in.copy()
    fed[:, 1:] = k
    free, _ = model(src, lens, tgt_in, teacher_forcing_ratio=0.0, generator=0)
    forced_k, _ = model(src, lens, fed)
    forced, _ = model(src, lens, tgt_in)
    assert (np.argmax(free.numpy(), -1) == k).all()
    np.testing.assert_allclose(free.numpy(), forced_k.numpy(), rtol=1e-13, atol=1e-14)
    assert not np.allclose(free.numpy()[:, 1:], forced.numpy()[:, 1:])
    np.testing.assert_array_equal(free.numpy()[:, 0], forced.numpy()[:, 0])


def test_scheduled_sampling_is_seeded_and_mixes():
    model = make_model("bahdanau", seed=9)
    src, lens, tgt_in, _, _ = make_batch(9)
    a, _ = model(src, lens, tgt_in, teacher_forcing_ratio=0.5, generator=11)
    b, _ = model(src, lens, tgt_in, teacher_forcing_ratio=0.5, generator=11)
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    seen = set()
    for seed in range(30):
        c, _ = model(src, lens, tgt_in, teacher_forcing_ratio=0.5, generator=seed)
        seen.add(c.numpy().tobytes())
    assert len(seen) > 2                                   # the coin flips differ by seed


@given(kind=st.sampled_from(["linear", "inverse_sigmoid", "exponential", "constant"]),
       total=st.integers(1, 500), k=st.floats(1.0, 50.0))
def test_teacher_forcing_schedules_decay_within_bounds(kind, total, k):
    values = [teacher_forcing_schedule(i, total, kind, start=1.0, end=0.1, k=k)
              for i in range(total)]
    assert all(0.1 - 1e-12 <= v <= 1.0 for v in values)
    assert all(b <= a + 1e-12 for a, b in zip(values, values[1:]))
    if kind == "linear":
        assert values[0] == 1.0 and (total == 1 or abs(values[-1] - 0.1) < 1e-12)


def test_schedule_and_constructor_errors():
    with pytest.raises(ValueError, match="kind"):
        teacher_forcing_schedule(0, 10, "cosine")
    with pytest.raises(ValueError, match="decoder"):
        tr.nn.Seq2Seq(5, 5, 2, 2, decoder="bogus")
    with pytest.raises(ValueError, match="score"):
        tr.nn.Seq2Seq(5, 5, 2, 2, decoder="init", score="dot")
    model = make_model("init")
    src, lens, tgt_in, _, _ = make_batch(0)
    with pytest.raises(ValueError, match="teacher_forcing_ratio"):
        model(src, lens, tgt_in, teacher_forcing_ratio=1.5)
    with pytest.raises(ValueError, match="src_lengths"):
        model(src, np.array([6, 1, 1]), tgt_in)


@pytest.mark.parametrize("name, value", [("bos_id", 6), ("eos_id", 6), ("eos_id", 99),
                                         ("bos_id", -1), ("eos_id", -3)])
def test_special_ids_must_lie_in_the_target_vocabulary(name, value):
    # an eos_id the decoder can never emit would make every decode run to max_len
    with pytest.raises(ValueError, match=rf"Seq2Seq: {name}={value} is outside the target "
                                         r"vocabulary \[0, tgt_vocab\) = \[0, 6\)"):
        tr.nn.Seq2Seq(9, 6, 2, 2, **{name: value})
    tr.nn.Seq2Seq(9, 6, 2, 2, **{name: 5})                  # the last id is fine


def test_pad_id_must_be_an_id_of_both_vocabularies():
    with pytest.raises(ValueError, match=r"pad_id=6 must be an id of both vocabularies, "
                                         r"\[0, min\(src_vocab, tgt_vocab\)\) = \[0, 6\)"):
        tr.nn.Seq2Seq(9, 6, 2, 2, pad_id=6)
    with pytest.raises(ValueError, match=r"pad_id=-1"):
        tr.nn.Seq2Seq(9, 6, 2, 2, pad_id=-1)


@pytest.mark.parametrize("kwargs, exc, match", [
    (dict(tgt_vocab=6.5), TypeError, "tgt_vocab must be an integer, got 6.5"),
    (dict(src_vocab=True), TypeError, "src_vocab must be an integer"),
    (dict(hidden=0), ValueError, "hidden must be positive, got 0"),
    (dict(emb=2.0), TypeError, "emb must be an integer"),
    (dict(bos_id=2.0), TypeError, "bos_id must be an integer"),
    (dict(eos_id=True), TypeError, "eos_id must be an integer"),
    (dict(attn_hidden=0), ValueError, "attn_hidden must be positive"),
])
def test_constructor_sizes_and_ids_are_integers(kwargs, exc, match):
    args = dict(src_vocab=9, tgt_vocab=6, emb=2, hidden=2)
    args.update(kwargs)
    with pytest.raises(exc, match="Seq2Seq: " + match):
        tr.nn.Seq2Seq(**args)


def test_forward_refuses_an_empty_target():
    model = make_model("init")
    src, lens, _, _, _ = make_batch(0)
    with pytest.raises(ValueError, match=r"Seq2Seq: tgt_in must have at least one step "
                                         r"\(BOS first\), got shape \(3, 0\)"):
        model(src, lens, np.zeros((3, 0), dtype=np.int64))


def test_reorder_selects_rows():
    model = make_model("luong", "lstm", seed=10)
    src, lens, _, _, _ = make_batch(10)
    state, memory = model.encode(src, lens)
    idx = np.array([2, 2, 0])
    s2, m2 = model.reorder(state, idx), model.reorder(memory, idx)
    np.testing.assert_array_equal(s2.h.numpy(), state.h.numpy()[idx])
    np.testing.assert_array_equal(s2.c.numpy(), state.c.numpy()[idx])
    np.testing.assert_array_equal(m2.padding, memory.padding[idx])
    np.testing.assert_array_equal(m2.outputs.numpy(), memory.outputs.numpy()[idx])


# ------------------------------------------------------------------------ the demo
def test_string_reversal_demo_runs_end_to_end(tmp_path, capsys):
    """The demo's main in a tiny configuration (a few updates): it trains both models, prints
    the accuracy table and writes its figures. The accuracy claims need the real budget and
    are not asserted here."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "tinygrad_rnn" / "demos" / "string_reversal.py"
    spec = importlib.util.spec_from_file_location("string_reversal_demo", path)
    demo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(demo)
    result = demo.run(demo.parse_args(["--quick", "--steps", "8", "--out", str(tmp_path),
                                       "--seed", "3"]))
    out = capsys.readouterr().out
    assert "greedy exact match on held-out strings" in out
    assert "overall held-out exact match" in out
    assert set(result["overall"]) == {"no attention", "attention"}
    for name, accs in result["by_length"].items():
        assert len(accs) == len(result["spans"])
        assert all(0.0 <= a <= 1.0 for a in accs)
    for name in ("accuracy_vs_length.png", "learning_curves.png", "attention_0.png"):
        assert (tmp_path / name).stat().st_size > 1000


@pytest.mark.parametrize("score", ["additive", "bilinear", "dot"])
def test_attention_step_matches_the_attention_module(score):
    """The decoder's attention step (keys projected once per sentence for the additive
    score) gives the numbers of nn.Attention on the raw encoder outputs."""
    model = make_model("bahdanau", "gru", score=score, seed=11)
    src, lens, _, _, _ = make_batch(11)
    state, memory = model.encode(src, lens)
    context, weights = model._attend(state.h, memory)
    keys = memory.outputs if score != "dot" else model.key_proj(memory.outputs)
    ref_c, ref_w = model.attention(state.h, keys, memory.outputs,
                                   key_padding_mask=memory.padding)
    np.testing.assert_allclose(context.numpy(), ref_c.numpy(), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(weights.numpy(), ref_w.numpy(), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("decoder, score", [("init", None), ("luong", None),
                                            ("bahdanau", "dot"), ("luong", "bilinear")])
def test_attn_hidden_without_an_additive_score_is_refused(decoder, score):
    """attn_hidden sizes the additive score only; given with any other, it would be ignored."""
    with pytest.raises(ValueError, match=f"attn_hidden .*decoder={decoder!r}"):
        tr.nn.Seq2Seq(9, 6, emb=4, hidden=5, decoder=decoder, score=score, attn_hidden=7)


@pytest.mark.parametrize("decoder, score", [("bahdanau", None), ("bahdanau", "additive"),
                                            ("luong", "additive")])
def test_attn_hidden_sizes_the_additive_score(decoder, score):
    m = tr.nn.Seq2Seq(9, 6, emb=4, hidden=5, decoder=decoder, score=score, attn_hidden=7,
                      generator=0)
    sizes = {p.shape for _, p in m.attention.named_parameters()}
    assert any(7 in shape for shape in sizes), sizes
