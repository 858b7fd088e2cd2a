"""tr.nn.utils.rnn (padding and packing) and recurrent layers on packed input, against torch
(skipped cleanly without torch).

float64 throughout: padded tensors, PackedSequence fields, recurrent outputs, final states
and every gradient (of the padded or packed data and of every parameter) equal torch's to
1e-12, for enforce_sorted True and False, batch_first True and False and total_length.
Batches hold at most 8 sequences: up to 16, torch's sort keeps equal lengths in batch order
as our stable sort does (beyond that torch's order among equal lengths is unspecified; see
tinygrad_rnn/nn/utils/rnn.py).
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tinygrad_rnn as tr
import tinygrad_rnn.nn as nn
from tinygrad_rnn.nn.utils import rnn as R

torch = pytest.importorskip("torch")
TR = torch.nn.utils.rnn

TOL = 1e-12


def close(got: Any, want: Any) -> None:
    got = got.numpy() if isinstance(got, tr.Tensor) else np.asarray(got)
    want = want.detach().numpy() if isinstance(want, torch.Tensor) else np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_allclose(got, want, rtol=TOL, atol=TOL)


def same_packed(ours: R.PackedSequence, theirs: Any) -> None:
    close(ours.data, theirs.data)
    for name in ("batch_sizes", "sorted_indices", "unsorted_indices"):
        a, b = getattr(ours, name), getattr(theirs, name)
        assert (a is None) == (b is None), name
        if a is not None:
            assert a.dtype == np.int64
            np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=name)


lengths_st = st.lists(st.integers(1, 6), min_size=1, max_size=8)


def _sequences(lengths: list, seed: int, features: int = 3) -> list:
    rng = np.random.default_rng(seed)
    return [rng.normal(size=(n, features)) for n in lengths]


def _leaves(arrays: list) -> tuple:
    return ([tr.tensor(a, requires_grad=True) for a in arrays],
            [torch.tensor(a, requires_grad=True) for a in arrays])


# ------------------------------------------------------------------------------ padding
@given(lengths=lengths_st, batch_first=st.booleans(), side=st.sampled_from(["right", "left"]),
       value=st.sampled_from([0.0, -1.5]), seed=st.integers(0, 2**31 - 1))
def test_pad_sequence_values_and_gradients_match_torch(lengths: list, batch_first: bool,
                                                       side: str, value: float,
                                                       seed: int) -> None:
    ours, theirs = _leaves(_sequences(lengths, seed))
    y = R.pad_sequence(ours, batch_first=batch_first, padding_value=value, padding_side=side)
    z = TR.pad_sequence(theirs, batch_first=batch_first, padding_value=value,
                        padding_side=side)
    close(y, z)
    g = np.random.default_rng(seed + 1).normal(size=tuple(z.shape))
    y.backward(g)
    z.backward(torch.from_numpy(g))
    for a, b in zip(ours, theirs):
        close(a.grad, b.grad)


@given(lengths=lengths_st, seed=st.integers(0, 2**31 - 1))
def test_unpad_pack_and_unpack_sequence_match_torch(lengths: list, seed: int) -> None:
    arrays = _sequences(lengths, seed)
    ours, theirs = _leaves(arrays)
    padded = R.pad_sequence(ours, batch_first=True)
    for a, b in zip(R.unpad_sequence(padded, tr.tensor(np.array(lengths)), batch_first=True),
                    arrays):
        close(a, b)
    same_packed(R.pack_sequence(ours, enforce_sorted=False),
                TR.pack_sequence(theirs, enforce_sorted=False))
    for a, b in zip(R.unpack_sequence(R.pack_sequence(ours, enforce_sorted=False)), arrays):
        close(a, b)
    ordered = sorted(range(len(lengths)), key=lambda k: -lengths[k])
    same_packed(R.pack_sequence([ours[k] for k in ordered]),
                TR.pack_sequence([theirs[k] for k in ordered]))


# ------------------------------------------------------------------------------ packing
@given(lengths=lengths_st, batch_first=st.booleans(), enforce_sorted=st.booleans(),
       extra=st.integers(0, 2), seed=st.integers(0, 2**31 - 1))
def test_pack_and_pad_packed_match_torch_with_gradients(lengths: list, batch_first: bool,
                                                        enforce_sorted: bool, extra: int,
                                                        seed: int) -> None:
    if enforce_sorted:
        lengths = sorted(lengths, reverse=True)
    rng = np.random.default_rng(seed)
    T, B = max(lengths) + extra, len(lengths)
    x = rng.normal(size=(B, T, 2) if batch_first else (T, B, 2))
    xt, xx = tr.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    lens_ours = tr.tensor(np.array(lengths))  # int64, as torch.tensor(lengths)
    packed = R.pack_padded_sequence(xt, lens_ours, batch_first=batch_first,
                                    enforce_sorted=enforce_sorted)
    packed_t = TR.pack_padded_sequence(xx, torch.tensor(lengths), batch_first=batch_first,
                                       enforce_sorted=enforce_sorted)
    same_packed(packed, packed_t)
    total = T if extra else None
    out, out_lens = R.pad_packed_sequence(packed, batch_first=batch_first,
                                          padding_value=7.0, total_length=total)
    out_t, out_lens_t = TR.pad_packed_sequence(packed_t, batch_first=batch_first,
                                               padding_value=7.0, total_length=total)
    close(out, out_t)
    assert out_lens.dtype == np.int64
    np.testing.assert_array_equal(out_lens.numpy(), out_lens_t.numpy())
    g = rng.normal(size=tuple(out_t.shape))
    out.backward(g)
    out_t.backward(torch.from_numpy(g))
    close(xt.grad, xx.grad)  # padding positions: exactly 0 in both


# ------------------------------------------------------------------------------ layers
def _layer_pair(kind: str, batch_first: bool, num_layers: int,
                bidirectional: bool) -> tuple:
    torch.manual_seed(0)
    theirs = getattr(torch.nn, kind)(3, 4, num_layers=num_layers, batch_first=batch_first,
                                     bidirectional=bidirectional, dtype=torch.float64)
    ours = getattr(nn, kind)(3, 4, num_layers=num_layers, batch_first=batch_first,
                             bidirectional=bidirectional, dtype=np.float64)
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    return ours, theirs


@pytest.mark.parametrize("enforce_sorted", [True, False])
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("kind, num_layers, bidirectional", [
    ("LSTM", 1, False), ("LSTM", 2, True), ("GRU", 1, False), ("RNN", 2, False),
])
def test_layer_on_packed_input_matches_torch(kind: str, num_layers: int, bidirectional: bool,
                                             batch_first: bool, enforce_sorted: bool) -> None:
    """Output (packed), h_n (and c_n) and the gradients of the padded input, of h_0 (and
    c_0) and of every parameter equal torch's in float64."""
    lengths = [5, 4, 4, 2, 1] if enforce_sorted else [2, 5, 1, 4, 4]
    rng = np.random.default_rng(1)
    T, B = 6, len(lengths)  # one step longer than the longest sequence
    x = rng.normal(size=(B, T, 3) if batch_first else (T, B, 3))
    L = num_layers * (2 if bidirectional else 1)
    h0, c0 = rng.normal(size=(L, B, 4)), rng.normal(size=(L, B, 4))
    ours, theirs = _layer_pair(kind, batch_first, num_layers, bidirectional)
    leaves = [tr.tensor(a, requires_grad=True) for a in (x, h0, c0)]
    leaves_t = [torch.tensor(a, requires_grad=True) for a in (x, h0, c0)]

    def run(lib: Any, layer: Any, xs: list) -> tuple:
        utils = R if lib is tr else TR
        packed = utils.pack_padded_sequence(xs[0], lengths, batch_first=batch_first,
                                            enforce_sorted=enforce_sorted)
        state = (xs[1], xs[2]) if kind == "LSTM" else xs[1]
        out, final = layer(packed, state)
        finals = final if kind == "LSTM" else (final,)
        return out, finals

    out, finals = run(tr, ours, leaves)
    out_t, finals_t = run(torch, theirs, leaves_t)
    assert isinstance(out, R.PackedSequence)
    same_packed(out, out_t)
    for a, b in zip(finals, finals_t):
        close(a, b)
    # a loss that reads the packed output and every final state
    g = rng.normal(size=tuple(out_t.data.shape))
    gf = [rng.normal(size=tuple(f.shape)) for f in finals_t]
    loss = (out.data * tr.tensor(g)).sum()
    loss_t = (out_t.data * torch.from_numpy(g)).sum()
    for f, f_t, w in zip(finals, finals_t, gf):
        loss = loss + (f * tr.tensor(w)).sum()
        loss_t = loss_t + (f_t * torch.from_numpy(w)).sum()
    close(loss, loss_t)
    loss.backward()
    loss_t.backward()
    used = 3 if kind == "LSTM" else 2
    for a, b in zip(leaves[:used], leaves_t[:used]):
        close(a.grad, b.grad)
    for (name, p), (name_t, q) in zip(ours.named_parameters(), theirs.named_parameters()):
        assert name == name_t
        close(p.grad, q.grad)


def test_packed_lstm_without_initial_state_and_padded_round_trip() -> None:
    """pad_packed_sequence of the packed output equals torch's, padding included, and the
    last valid output of each sequence is h_n (one layer, one direction)."""
    lengths = [3, 1, 4]
    rng = np.random.default_rng(2)
    x = rng.normal(size=(3, 4, 3))
    ours, theirs = _layer_pair("LSTM", True, 1, False)
    packed = R.pack_padded_sequence(tr.tensor(x), lengths, batch_first=True,
                                    enforce_sorted=False)
    out, (h_n, _) = ours(packed)
    padded, lens = R.pad_packed_sequence(out, batch_first=True, padding_value=-1.0,
                                         total_length=5)
    out_t, (h_t, _) = theirs(TR.pack_padded_sequence(torch.tensor(x), lengths,
                                                     batch_first=True, enforce_sorted=False))
    padded_t, _ = TR.pad_packed_sequence(out_t, batch_first=True, padding_value=-1.0,
                                         total_length=5)
    close(padded, padded_t)
    close(h_n, h_t)
    last = padded.numpy()[np.arange(3), lens.numpy() - 1]
    np.testing.assert_allclose(last, h_n.numpy()[0], rtol=0, atol=0)


# ------------------------------------------------------------------------------ API and errors
def test_module_layout_and_existing_names() -> None:
    import tinygrad_rnn.nn.utils.rnn as module

    assert module is R is tr.nn.utils.rnn
    for name in ("clip_grad_norm_", "clip_grad_value_", "get_total_norm",
                 "parameters_to_vector", "vector_to_parameters"):
        assert callable(getattr(tr.nn.utils, name))
    packed = R.pack_sequence([tr.tensor(np.ones((2, 1))), tr.tensor(np.ones((1, 1)))])
    data, batch_sizes, sorted_indices, unsorted_indices = packed  # a named tuple, as torch
    assert packed._fields == TR.PackedSequence._fields
    assert sorted_indices is None and unsorted_indices is None
    assert packed.double() is packed and packed.to("cpu") is packed
    assert packed.float().data.dtype == np.float32 and not packed.is_cuda


def test_errors_name_the_function_and_the_argument() -> None:
    x = tr.tensor(np.zeros((4, 3, 2)))
    with pytest.raises(ValueError, match="pack_padded_sequence: lengths .* must be sorted in "
                                         "decreasing order when enforce_sorted=True"):
        R.pack_padded_sequence(x, [2, 4, 1])
    with pytest.raises(ValueError, match="pack_padded_sequence: every length must be > 0"):
        R.pack_padded_sequence(x, [2, 0, 1], enforce_sorted=False)
    with pytest.raises(ValueError, match="pack_padded_sequence: expected len\\(lengths\\)"):
        R.pack_padded_sequence(x, [2, 1])
    with pytest.raises(ValueError, match="pack_padded_sequence: a length of 5 exceeds"):
        R.pack_padded_sequence(x, [5, 1, 1])
    with pytest.raises(ValueError, match="pack_padded_sequence: lengths must be integers"):
        R.pack_padded_sequence(x, np.array([2.0, 1.0, 1.0]))
    packed = R.pack_padded_sequence(x, [4, 2, 1])
    with pytest.raises(ValueError, match="pad_packed_sequence: expected total_length to be "
                                         "at least"):
        R.pad_packed_sequence(packed, total_length=3)
    with pytest.raises(TypeError, match="pad_packed_sequence: sequence must be a "
                                        "PackedSequence"):
        R.pad_packed_sequence(x)
    with pytest.raises(ValueError, match="pad_sequence: received an empty list"):
        R.pad_sequence([])
    with pytest.raises(ValueError, match=r"pad_sequence: sequences\[1\] has shape \(2, 3\)"):
        R.pad_sequence([tr.tensor(np.zeros((2, 2))), tr.tensor(np.zeros((2, 3)))])
    with pytest.raises(ValueError, match="pad_sequence: padding_side must be"):
        R.pad_sequence([tr.tensor(np.zeros((2, 2)))], padding_side="middle")
    lstm = nn.LSTM(2, 3, dtype=np.float64)
    with pytest.raises(ValueError, match="LSTM: lengths cannot be given with a "
                                         "PackedSequence"):
        lstm(packed, lengths=[4, 2, 1])
