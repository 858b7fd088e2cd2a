"""Positional encodings (docs/sequence_models.md, (PE1)-(PE2)): the sinusoid table's values
and its relative-offset property, float64 gradient checks of both modules (hypothesis), the
offset used by cached generation, both layouts, and the errors."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tinygrad_rnn as tr
import tinygrad_rnn.nn as nn
from tinygrad_rnn.nn.positional import sinusoidal_table


@given(d=st.integers(1, 9), p=st.integers(0, 60))
def test_sinusoid_table_is_pe1(d: int, p: int) -> None:
    table = sinusoidal_table(64, d)
    for j in range(d):
        w = 10000.0 ** (-(j - j % 2) / d)
        want = np.sin(p * w) if j % 2 == 0 else np.cos(p * w)
        assert abs(table[p, j] - want) < 1e-12


@given(d=st.integers(1, 5).map(lambda h: 2 * h), p=st.integers(0, 40), k=st.integers(0, 20))
def test_a_fixed_offset_is_a_fixed_rotation(d: int, p: int, k: int) -> None:
    """PE[p + k] = R_k PE[p] with R_k block-diagonal rotations by k w_i, the same for every
    p: attention can read relative positions as a linear function."""
    table = sinusoidal_table(64, d)
    w = 10000.0 ** (-np.arange(0, d, 2) / d)
    c, s = np.cos(k * w), np.sin(k * w)
    sin_p, cos_p = table[p, 0::2], table[p, 1::2]
    np.testing.assert_allclose(table[p + k, 0::2], sin_p * c + cos_p * s, atol=1e-12)
    np.testing.assert_allclose(table[p + k, 1::2], cos_p * c - sin_p * s, atol=1e-12)


@given(n=st.integers(1, 3), t=st.integers(1, 5), offset=st.integers(0, 3),
       batch_first=st.booleans(), seed=st.integers(0, 2 ** 31 - 1))
@settings(max_examples=30)
def test_learned_encoding_gradcheck_float64(n: int, t: int, offset: int, batch_first: bool,
                                            seed: int) -> None:
    pos = nn.LearnedPositionalEncoding(4, max_len=8, batch_first=batch_first,
                                       dtype=np.float64, generator=seed)
    shape = (n, t, 4) if batch_first else (t, n, 4)
    x = tr.tensor(np.random.default_rng(seed).normal(size=shape), requires_grad=True)
    # times x: non-linear in x, so the check compares a Jacobian that depends on x
    assert tr.gradcheck(lambda x: pos(x, offset=offset) * x, [x], atol=1e-8, rtol=1e-6)
    # the table's gradient: row offset + t collects dL/dout at step t over the batch (PE2)
    out = pos(x, offset=offset)
    g = np.random.default_rng(seed + 1).normal(size=out.shape)
    out.backward(tr.tensor(g))
    per_step = g.sum(axis=0 if batch_first else 1)
    want = np.zeros((8, 4))
    want[offset:offset + t] = per_step
    np.testing.assert_allclose(pos.embedding.weight.grad.numpy(), want, atol=1e-12)
    np.testing.assert_allclose(x.grad.numpy(), g, atol=1e-12)


@given(t=st.integers(1, 6), offset=st.integers(0, 4), seed=st.integers(0, 2 ** 31 - 1))
@settings(max_examples=20)
def test_sinusoidal_encoding_gradcheck_and_layouts(t: int, offset: int, seed: int) -> None:
    first = nn.SinusoidalPositionalEncoding(6, max_len=10, dtype=np.float64)
    second = nn.SinusoidalPositionalEncoding(6, max_len=10, batch_first=False,
                                             dtype=np.float64)
    x = np.random.default_rng(seed).normal(size=(2, t, 6))
    a = first(tr.tensor(x), offset=offset).numpy()
    b = second(tr.tensor(x.transpose(1, 0, 2)), offset=offset).numpy().transpose(1, 0, 2)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(a - x, np.broadcast_to(sinusoidal_table(10, 6)[
        offset:offset + t], x.shape), atol=1e-12)
    xt = tr.tensor(x, requires_grad=True)
    assert tr.gradcheck(lambda v: first(v, offset=offset) * v, [xt], atol=1e-8, rtol=1e-6)
    assert list(first.state_dict()) == ["pe"] and not list(first.parameters())


def test_unbatched_input_and_dropout() -> None:
    pos = nn.SinusoidalPositionalEncoding(4, max_len=6, dropout=0.5, dtype=np.float64,
                                          generator=0)
    x = tr.zeros(3, 4, dtype=np.float64)
    pos.eval()
    np.testing.assert_array_equal(pos(x).numpy(), sinusoidal_table(6, 4)[:3])
    pos.train()
    dropped = pos(x).numpy()
    kept = dropped != 0
    np.testing.assert_allclose(dropped[kept], 2 * sinusoidal_table(6, 4)[:3][kept])


def test_bad_inputs_are_refused_by_name() -> None:
    pos = nn.LearnedPositionalEncoding(4, max_len=5, dtype=np.float64, generator=0)
    with pytest.raises(ValueError, match=r"positions 3 \.\. 5 are beyond max_len = 5"):
        pos(tr.zeros(1, 3, 4, dtype=np.float64), offset=3)
    with pytest.raises(ValueError, match="E = d_model = 4"):
        pos(tr.zeros(1, 3, 5, dtype=np.float64))
    with pytest.raises(ValueError, match="offset must be an integer >= 0"):
        pos(tr.zeros(1, 3, 4, dtype=np.float64), offset=-1)
    with pytest.raises(TypeError, match="float32"):
        pos(tr.zeros(1, 3, 4))
    with pytest.raises(ValueError, match="init_std"):
        nn.LearnedPositionalEncoding(4, init_std=0.0)
    with pytest.raises(ValueError, match="max_len"):
        nn.SinusoidalPositionalEncoding(4, max_len=0)
