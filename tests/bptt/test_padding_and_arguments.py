"""Padded steps holding inf or NaN, and argument checks of the fused and per-step kernels.

* Padding: the values a caller puts at padded steps (``x`` and the upstream ``dhs`` there)
  are documented as ignored. They must be dropped with selects: inf or NaN there gives
  exactly (bit for bit) the outputs and gradients of zero padding, for every family and
  variant, both directions, float32 and float64, one or several backward blocks. The
  caller's arrays are never modified. At layer level (``nn.RNN/GRU/LSTM``) a loss whose
  gradient is non-finite at the zero padded outputs, sqrt(out * out), gives the same finite
  parameter gradients on the fused and the autograd engines.
* Arguments: the LSTM kernels refuse a None cell state; switches (reverse, coupled,
  input_grad, state_grads) must be bools (Python or NumPy) or the integers 0 and 1, so
  ``reverse=1`` works and ``reverse="no"``, 2, 1.0 and None are refused; every backward
  function checks the type of its cache; an upstream gradient must be an array; ragged
  lengths get an error naming the function; ``lengths=[]`` is the empty batch.
"""
from __future__ import annotations

import itertools
import re
from typing import Any

import numpy as np
import pytest

import tinygrad_rnn.bptt._layout as layout
from tinygrad_rnn import bptt
from tinygrad_rnn.nn import GRU, LSTM, RNN
from tinygrad_rnn.tensor import Tensor

VARIANTS = ["rnn-tanh", "rnn-relu", "gru-after", "gru-before", "lstm", "lstm-peephole",
            "lstm-coupled", "lstm-peephole-coupled"]
T, N, D, H = 6, 4, 3, 5
LENGTHS = [6, 2, 0, 4]
PAD = np.arange(T)[:, None] >= np.array(LENGTHS)[None, :]            # (T, N) padded steps


def _inputs(variant: str, dtype: Any, seed: int = 0) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    family = variant.split("-")[0]
    coupled = "coupled" in variant
    G = {"rnn": 1, "gru": 3}.get(family, 3 if coupled else 4)

    def r(*shape: int) -> np.ndarray:
        return (0.6 * rng.standard_normal(shape)).astype(dtype)

    return {"family": family, "coupled": coupled, "x": r(T, N, D), "h0": r(N, H),
            "c0": r(N, H), "w_ih": r(G * H, D), "w_hh": r(G * H, H), "b_ih": r(G * H),
            "b_hh": r(G * H), "w_ch": r((G - 1) * H) if "peephole" in variant else None,
            "option": variant.split("-")[1] if family in ("rnn", "gru") else None,
            "dhs": r(T, N, H), "dh_n": r(N, H), "dc_n": r(N, H)}


def _run(a: dict, x: np.ndarray, dhs: np.ndarray, reverse: bool) -> dict[str, np.ndarray]:
    """Forward and backward of one variant; every output and gradient by name."""
    fam = a["family"]
    if fam == "rnn":
        hs, h_n, cache = bptt.rnn_forward(x, a["h0"], a["w_ih"], a["w_hh"], a["b_ih"],
                                          a["b_hh"], nonlinearity=a["option"],
                                          lengths=LENGTHS, reverse=reverse)
        g = bptt.rnn_backward(dhs, a["dh_n"], cache)
        outs = {"hs": hs, "h_n": h_n}
    elif fam == "gru":
        hs, h_n, cache = bptt.gru_forward(x, a["h0"], a["w_ih"], a["w_hh"], a["b_ih"],
                                          a["b_hh"], reset=a["option"], lengths=LENGTHS,
                                          reverse=reverse)
        g = bptt.gru_backward(dhs, a["dh_n"], cache)
        outs = {"hs": hs, "h_n": h_n}
    else:
        hs, h_n, c_n, cache = bptt.lstm_forward(
            x, a["h0"], a["c0"], a["w_ih"], a["w_hh"], a["b_ih"], a["b_hh"],
            weight_ch=a["w_ch"], coupled=a["coupled"], lengths=LENGTHS, reverse=reverse)
        g = bptt.lstm_backward(dhs, a["dh_n"], a["dc_n"], cache)
        outs = {"hs": hs, "h_n": h_n, "c_n": c_n}
    outs.update({name: v for name, v in g._asdict().items() if v is not None})
    return outs


@pytest.mark.parametrize("variant,dtype,reverse,chunk",
                         list(itertools.product(VARIANTS, [np.float32, np.float64],
                                                [False, True], [1, 1 << 17])))
def test_inf_and_nan_at_padded_steps_change_no_bit(variant: str, dtype: Any, reverse: bool,
                                                   chunk: int,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(layout, "CHUNK_ELEMS", chunk)   # one step per block, or one block
    a = _inputs(variant, dtype)
    x0, dhs0 = a["x"].copy(), a["dhs"].copy()
    x0[PAD], dhs0[PAD] = 0, 0
    clean = _run(a, x0, dhs0, reverse)
    for x_junk, dhs_junk in ((np.nan, np.inf), (np.inf, -np.inf), (-np.inf, np.nan)):
        x, dhs = a["x"].copy(), a["dhs"].copy()
        x[PAD], dhs[PAD] = x_junk, dhs_junk
        x_given, dhs_given = x.copy(), dhs.copy()
        dirty = _run(a, x, dhs, reverse)
        assert dirty.keys() == clean.keys()
        for name, value in clean.items():
            assert np.all(np.isfinite(dirty[name])), f"{variant} {name}: non-finite"
            assert dirty[name].dtype == value.dtype
            assert dirty[name].tobytes() == value.tobytes(), f"{variant} {name} differs"
        # the caller's arrays are read, never written
        np.testing.assert_array_equal(x, x_given)
        np.testing.assert_array_equal(dhs, dhs_given)
        # padded outputs and input gradients are exactly +0.0
        assert not np.any(dirty["hs"][PAD]) and not np.any(np.signbit(dirty["hs"][PAD]))
        assert not np.any(dirty["dx"][PAD])


# (no relu: its valid outputs can be exactly 0 too, where sqrt(u^2) has no derivative)
@pytest.mark.parametrize("layer,kwargs", [
    (RNN, {}), (GRU, {}), (GRU, {"reset": "before"}), (LSTM, {}),
    (LSTM, {"peephole": True, "coupled": True}),
])
@pytest.mark.parametrize("bidirectional", [False, True])
def test_layer_loss_non_finite_at_padded_outputs_fused_equals_autograd(
        layer: type, kwargs: dict, bidirectional: bool) -> None:
    """d sqrt(u^2)/du is 0/0 = NaN at the zero padded outputs; the padded outputs do not
    depend on any parameter, so every parameter gradient must stay finite and equal between
    the engines (as with torch's packed sequences)."""
    x = np.random.default_rng(0).standard_normal((5, 3, 4))
    lengths = [5, 2, 3]
    grads = {}
    for engine in ("fused", "autograd"):
        m = layer(4, 3, num_layers=2, bidirectional=bidirectional, engine=engine,
                  dtype=np.float64, generator=0, **kwargs)
        out, _ = m(Tensor(x), None, lengths)
        with np.errstate(divide="ignore", invalid="ignore"):
            (out * out).sqrt().sum().backward()
        grads[engine] = {name: p.grad for name, p in m.named_parameters()}
    for name, g in grads["fused"].items():
        assert np.all(np.isfinite(g)), f"{name}: non-finite gradient on the fused engine"
        np.testing.assert_allclose(g, grads["autograd"][name], rtol=1e-10, atol=1e-12,
                                   err_msg=name)


# --------------------------------------------------------------------------------------------
# argument checks
# --------------------------------------------------------------------------------------------
def _lstm(dtype: Any = np.float64) -> dict[str, Any]:
    return _inputs("lstm", dtype)


@pytest.mark.parametrize("fname", ["lstm_forward", "lstm_step_forward"])
def test_lstm_refuses_a_none_cell_state(fname: str) -> None:
    a = _lstm()
    name = "c0" if fname == "lstm_forward" else "c_prev"
    x = a["x"] if fname == "lstm_forward" else a["x"][0]
    msg = re.escape(f"{fname}: {name} must be an array, got NoneType") + ".*explicit states"
    with pytest.raises(TypeError, match=msg):
        getattr(bptt, fname)(x, a["h0"], None, a["w_ih"], a["w_hh"], a["b_ih"], a["b_hh"])


def test_none_hidden_state_is_refused_naming_it() -> None:
    a = _inputs("gru-after", np.float64)
    with pytest.raises(TypeError, match=re.escape("gru_forward: h0 must be an array, got "
                                                  "NoneType")):
        bptt.gru_forward(a["x"], None, a["w_ih"], a["w_hh"])
    with pytest.raises(TypeError, match=re.escape("rnn_step_forward: x_t must be an array, "
                                                  "got list")):
        bptt.rnn_step_forward([[1.0]], a["h0"], a["w_ih"], a["w_hh"], None, None)


def _flag_calls(a: dict, value: Any) -> list[tuple[str, str, Any]]:
    """(function, argument, call) for every switch of the kernels, set to ``value``."""
    *_, cache = bptt.lstm_forward(a["x"], a["h0"], a["c0"], a["w_ih"], a["w_hh"])
    g = _inputs("gru-after", np.float64)
    *_, gcache = bptt.gru_forward(g["x"], g["h0"], g["w_ih"], g["w_hh"])
    r = _inputs("rnn-tanh", np.float64)
    *_, rcache = bptt.rnn_forward(r["x"], r["h0"], r["w_ih"], r["w_hh"])
    lstm_args = (a["x"], a["h0"], a["c0"], a["w_ih"], a["w_hh"])
    # coupled=True needs the 3H gate rows f, g, o
    rows = 3 * H if isinstance(value, (bool, np.bool_, int, np.integer)) and value == 1 \
        else 4 * H
    coupled_args = (a["x"], a["h0"], a["c0"], a["w_ih"][:rows], a["w_hh"][:rows])
    return [
        ("rnn_forward", "reverse",
         lambda: bptt.rnn_forward(r["x"], r["h0"], r["w_ih"], r["w_hh"], reverse=value)),
        ("gru_forward", "reverse",
         lambda: bptt.gru_forward(g["x"], g["h0"], g["w_ih"], g["w_hh"], reverse=value)),
        ("lstm_forward", "reverse", lambda: bptt.lstm_forward(*lstm_args, reverse=value)),
        ("lstm_forward", "coupled", lambda: bptt.lstm_forward(*coupled_args, coupled=value)),
        ("lstm_step_forward", "coupled",
         lambda: bptt.lstm_step_forward(coupled_args[0][0], *coupled_args[1:], None, None,
                                        coupled=value)),
        ("rnn_backward", "input_grad", lambda: bptt.rnn_backward(None, None, rcache,
                                                                 input_grad=value)),
        ("gru_backward", "state_grads", lambda: bptt.gru_backward(None, None, gcache,
                                                                  state_grads=value)),
        ("lstm_backward", "input_grad", lambda: bptt.lstm_backward(None, None, None, cache,
                                                                   input_grad=value)),
        ("lstm_backward", "state_grads", lambda: bptt.lstm_backward(None, None, None, cache,
                                                                    state_grads=value)),
    ]


@pytest.mark.parametrize("value", ["no", "", 2, -1, np.int64(2), None, 1.0, np.float64(0.0),
                                   [1]])
def test_switches_must_be_bools_or_0_or_1(value: Any) -> None:
    for fname, name, call in _flag_calls(_lstm(), value):
        msg = re.escape(f"{fname}: {name} must be a bool (True or False), got {value!r}")
        with pytest.raises(TypeError, match=msg):
            call()


@pytest.mark.parametrize("true, false", [(1, 0), (np.int64(1), np.int32(0)),
                                         (np.uint8(1), np.uint8(0))])
def test_switches_accept_the_integers_0_and_1(true: Any, false: Any) -> None:
    """reverse=1 worked before the bool-only check and is common (torch-style layers take
    bias=1); 1 and 0 give exactly the results of True and False."""
    a = _lstm()
    for value in (true, false):
        for _, _, call in _flag_calls(a, value):
            call()
    lstm_args = (a["x"], a["h0"], a["c0"], a["w_ih"], a["w_hh"])
    for as_int, as_bool in ((true, True), (false, False)):
        hs_i, h_i, c_i, cache_i = bptt.lstm_forward(*lstm_args, lengths=LENGTHS,
                                                    reverse=as_int)
        hs_b, h_b, c_b, cache_b = bptt.lstm_forward(*lstm_args, lengths=LENGTHS,
                                                    reverse=as_bool)
        for got, want in ((hs_i, hs_b), (h_i, h_b), (c_i, c_b)):
            np.testing.assert_array_equal(got, want)
        assert cache_i.reverse is as_bool
        dhs = np.ones_like(hs_b)
        grads_i = bptt.lstm_backward(dhs, None, None, cache_i, input_grad=true,
                                     state_grads=false)
        grads_b = bptt.lstm_backward(dhs, None, None, cache_b, input_grad=True,
                                     state_grads=False)
        for got, want in zip(grads_i, grads_b):
            if want is None:
                assert got is None
            else:
                np.testing.assert_array_equal(got, want)


def test_switches_accept_numpy_bools() -> None:
    a = _lstm()
    for value in (np.bool_(True), np.bool_(False)):
        for _, _, call in _flag_calls(a, value):
            call()
    x = a["x"]
    plain = bptt.rnn_forward(x, a["h0"][:, :2], a["w_ih"][:2], a["w_hh"][:2, :2],
                             reverse=True)
    numpy = bptt.rnn_forward(x, a["h0"][:, :2], a["w_ih"][:2], a["w_hh"][:2, :2],
                             reverse=np.bool_(True))
    np.testing.assert_array_equal(plain[0], numpy[0])
    assert numpy[2].reverse is True


def test_backward_functions_check_their_cache() -> None:
    a = _lstm()
    *_, lcache = bptt.lstm_forward(a["x"], a["h0"], a["c0"], a["w_ih"], a["w_hh"])
    g = _inputs("gru-after", np.float64)
    _, gstep = bptt.gru_step_forward(g["x"][0], g["h0"], g["w_ih"], g["w_hh"], None, None)
    lstm_cache, gru_step = "LSTMSequenceCache", "GRUStepCache"
    cases = [
        ("rnn_backward", "RNNSequenceCache", "rnn_forward", lstm_cache,
         lambda: bptt.rnn_backward(None, None, lcache)),
        ("gru_backward", "GRUSequenceCache", "gru_forward", lstm_cache,
         lambda: bptt.gru_backward(None, None, lcache)),
        ("lstm_backward", "LSTMSequenceCache", "lstm_forward", gru_step,
         lambda: bptt.lstm_backward(None, None, None, gstep)),
        ("rnn_step_backward", "RNNStepCache", "rnn_step_forward", gru_step,
         lambda: bptt.rnn_step_backward(g["h0"], gstep)),
        ("gru_step_backward", "GRUStepCache", "gru_step_forward", lstm_cache,
         lambda: bptt.gru_step_backward(g["h0"], lcache)),
        ("lstm_step_backward", "LSTMStepCache", "lstm_step_forward", gru_step,
         lambda: bptt.lstm_step_backward(g["h0"], None, gstep)),
    ]
    for fname, cls, producer, got, call in cases:
        msg = re.escape(f"{fname}: cache must be the {cls} returned by {producer}, got {got}")
        with pytest.raises(TypeError, match=msg):
            call()


def test_upstream_gradient_must_be_an_array() -> None:
    a = _lstm()
    *_, cache = bptt.lstm_forward(a["x"], a["h0"], a["c0"], a["w_ih"], a["w_hh"])
    msg = re.escape(f"lstm_backward: dhs must be an array of shape {(T, N, H)} or None, got "
                    "list")
    with pytest.raises(TypeError, match=msg):
        bptt.lstm_backward(a["dhs"].tolist(), None, None, cache)
    with pytest.raises(TypeError, match=re.escape("lstm_backward: dc_n must be an array")):
        bptt.lstm_backward(None, None, 1.0, cache)


def test_ragged_lengths_name_the_function() -> None:
    r = _inputs("rnn-tanh", np.float64)
    msg = re.escape("rnn_forward: lengths must be a flat sequence of 4 integers")
    with pytest.raises(ValueError, match=msg):
        bptt.rnn_forward(r["x"], r["h0"], r["w_ih"], r["w_hh"], lengths=[1, [2], 3, 4])


def test_empty_list_is_the_lengths_of_an_empty_batch() -> None:
    x, h0 = np.ones((3, 0, 2)), np.zeros((0, 4))
    w_ih, w_hh = np.ones((4, 2)), np.ones((4, 4))
    for lengths in ([], ()):
        hs, h_n, cache = bptt.rnn_forward(x, h0, w_ih, w_hh, lengths=lengths)
        assert hs.shape == (3, 0, 4) and h_n.shape == (0, 4)
        grads = bptt.rnn_backward(np.zeros_like(hs), None, cache)
        assert not np.any(grads.dweight_ih)
    # an empty float array has a dtype of its own, and it is not an integer one
    with pytest.raises(ValueError, match="lengths must have an integer dtype, got float64"):
        bptt.rnn_forward(x, h0, w_ih, w_hh, lengths=np.array([]))
    # a non-empty list still needs N entries
    with pytest.raises(ValueError, match=re.escape("lengths has shape (0,) but expected")):
        bptt.rnn_forward(np.ones((3, 1, 2)), np.zeros((1, 4)), w_ih, w_hh, lengths=[])
